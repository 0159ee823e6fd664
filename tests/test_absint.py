"""The grid evaluation (frontend/absint.py) that the whole-kernel proofs stand on, without JAX:
the windows each program touches, which programs certainly run an access, loops walked or
summarised, and the divisibility analysis."""
import numpy as np
import pytest

from mgpu_dsl import language as ml
from mgpu_dsl.frontend import compile as fc
from mgpu_dsl.frontend import absint, ir
from mgpu_dsl.frontend.absint import UNKNOWN, GridEval, known_multiple, loop_counters
from mgpu_dsl.frontend.checks import Facts
from test_frontend import build


@pytest.fixture(autouse=True)
def _no_proofs(monkeypatch):
  # These kernels leave outputs unwritten on purpose: evaluate them, do not reject them.
  monkeypatch.setattr(fc, "check_kernel", lambda kernel, defs: ([], Facts()))


def accesses(kernel, budget=absint.BUDGET):
  seen = []
  assert GridEval(kernel, seen.append, budget=budget).run()
  return seen


def writes_to(kernel, name):
  return [a for a in accesses(kernel) if a.window.root.name == name and a.kind == ir.Access.REG_WRITE]


def rows(x, out):
  i = ml.program_id(0)
  if i % 2 == 0:
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]
  for k in range(i):
    out.at[ml.ds(i * 128 + k, 1)][...] = x.at[ml.ds(0, 1)][...]


def test_windows_and_certain_programs_of_a_branch_and_a_loop_with_program_bounds():
  k = build(rows, [((512, 128), "float32")], [((512, 128), "float32")], grid=(4, 1, 1))
  branch, *loop = writes_to(k, "out")
  assert branch.must.tolist() == [True, False, True, False]
  assert branch.window.starts[0][branch.must].tolist() == [0, 256]
  assert len(loop) == 3                       # program 3 runs three iterations
  assert [a.must.tolist() for a in loop] == [[False, True, True, True], [False, False, True, True],
                                             [False, False, False, True]]
  assert loop[1].window.starts[0][3] == 3 * 128 + 1


def test_a_loop_past_the_budget_is_summarised_with_unknown_windows():
  k = build(rows, [((512, 128), "float32")], [((512, 128), "float32")], grid=(4, 1, 1))
  _, first, rest = writes_to_budget(k, 3)
  assert first.exact and first.window.starts[0][3] == 3 * 128      # the first iteration, exactly
  assert not rest.exact and rest.window.starts[0] is UNKNOWN and not rest.must.any()


def writes_to_budget(kernel, budget):
  return [a for a in accesses(kernel, budget) if a.window.root.name == "out"
          and a.kind == ir.Access.REG_WRITE]


def scaled(x, out):
  i = ml.program_id(0)
  for k in range(4):
    out.at[ml.ds(ml.multiple_of(i * 3, 3) * 64 + k * 16 + (i % 4) * 8, 8)][...] = x.at[0:8][...]


def test_known_multiple_follows_products_sums_remainders_and_promises():
  k = build(scaled, [((1024, 128), "float32")], [((1024, 128), "float32")], grid=(1, 1, 1))
  defs, loops = ir.def_table(k.body), loop_counters(k.body)
  view = next(o for o in ir.walk(k.body) if type(o).__name__ == "View" and o.ref.name == "out")
  assert known_multiple(view.index[0].start, defs, loops) == 8
  assert known_multiple(0, defs, loops) == 0 and known_multiple(12, defs, loops) == 12
  assert np.gcd(known_multiple(view.index[0].start, defs, loops), 16) == 8


def test_the_region_named_in_a_message_is_all_missing():
  from mgpu_dsl.frontend.coverage import describe
  missing = np.zeros((4, 4), bool)
  missing[1:3, 2:] = True
  missing[3, 0] = True
  assert describe("out", (32, 64), missing, (8, 16)) == ("out[8:24, 32:64]", 5 * 128)
  assert describe("out", (4,), np.array([False, True, True, True]), (1,)) == ("out[1:4]", 3)
  assert describe("buf", (4,), np.ones(4, bool), (1,)) == ("buf[:]", 4)


def test_group_rows_is_np_unique_along_rows():
  from mgpu_dsl.frontend.coverage import group_rows
  rng = np.random.default_rng(0)
  for a in (rng.integers(-5, 5, (1000, 3)), np.zeros((4, 2), np.int64), rng.integers(0, 2 ** 40, (50, 2))):
    u, inv = group_rows(a)
    want_u, want_inv = np.unique(a, axis=0, return_inverse=True)
    assert sorted(map(tuple, u.tolist())) == sorted(map(tuple, want_u.tolist()))
    np.testing.assert_array_equal(u[inv], a)
