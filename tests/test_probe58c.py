"""Probe 58c: code health and compile time. (1) jnp.pad mode='edge' along the last axis traced 2 ** (lo + hi) - 1 rolls
(its form wrote each step's tile twice), each a layout conflict solved again: 255 solves for widths (2, 6); now one
roll a step. Solves after the first replay each op's recorded constraints (frontend/layout_memo.py), with the same
layouts as a fresh collection. (2) Binary.nonzero comes from check_kernel's facts through mark_nonzero_divisions (a
rebuilt op), not from the check mutating a frozen op. (3) flow.py and checks.py split, their names still imported;
one static-int test for four private twins."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import compile as fc, layout_memo, relayout

S = jax.ShapeDtypeStruct


def _padded(x, W, M):
  return S(np.pad(np.zeros(x.shape), W).shape, x.dtype)


def _pad_kernel():
  """A fresh kernel object (nothing cached in memory from another test's compile)."""
  @mg.mgpu_kernel(out_shape=_padded)
  def pad_by(x, o, W: ml.constexpr, M: ml.constexpr):
    o[...] = jnp.pad(x[...], W, mode=M)
  return pad_by


def _numbered(text: str) -> str:
  """IR text with its value ids (a global counter) renumbered by first appearance."""
  ids: dict = {}
  return re.sub(r"%(\d+)", lambda m: "%" + str(ids.setdefault(m.group(1), len(ids))), text)


_W = ((1, 2), (2, 6))


@pytest.fixture(scope="module")
def edge_pad():
  """(counts while compiling the (8, 128) edge pad: solves, ops collected, ops replayed; its typed IR; the kernel)."""
  with pytest.MonkeyPatch.context() as mp:
    mp.setenv("MGPU_DSL_CACHE_DIR", "off")        # (compiled here, not read from a cache)
    before = relayout.SOLVES[0], layout_memo.COLLECTED[0], layout_memo.REPLAYED[0]
    k = _pad_kernel()
    text = k.typed_ir(S((8, 128), jnp.float32), W=_W, M="edge")
  counts = (relayout.SOLVES[0] - before[0], layout_memo.COLLECTED[0] - before[1], layout_memo.REPLAYED[0] - before[2])
  return counts, text, k


def test_edge_pad_along_the_last_axis_takes_one_roll_a_step(edge_pad):
  """Widths (2, 6) along the last axis: 8 steps, each one roll of the tile (two of the (12, 160) tile it is
  computed padded as, ops/padded_rolls.py) and one relayout of its row-wise tile; the form made 255 rolls and took
  255 solves (about 32 s here)."""
  (solves, collected, replayed), text, k = edge_pad
  assert solves <= 3 * (2 + 6 + 1), solves        # (an odd tile is traced three times: the padded trace's)
  assert text.count("rollload") <= 2 * (2 + 6 + 1), text.count("rollload")
  x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32)
  np.testing.assert_array_equal(k(x, W=_W, M="edge", interpret=True), np.pad(x, _W, mode="edge"))


def test_layout_solves_replay_each_op_and_solve_as_a_fresh_collection(edge_pad, monkeypatch):
  """The solves after the first replay the ops they collected (more replayed than collected), and the kernel they
  lay out is the one every solve collecting afresh lays out, to the letter."""
  (solves, collected, replayed), text, _ = edge_pad
  assert solves > 1 and replayed > collected, (solves, collected, replayed)
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", "off")
  monkeypatch.setattr(layout_memo, "collect_op", lambda s, o, memo: type(s).collect_op(s, o))
  fresh = _pad_kernel().typed_ir(S((8, 128), jnp.float32), W=_W, M="edge")
  assert _numbered(fresh) == _numbered(text)


# ---------------------------------------------------------------- (2) a division's divisor proved non-zero
def _division_kernel():
  @mg.mgpu_kernel(out_shape=lambda x, d: (S(x.shape, x.dtype), S(x.shape, x.dtype)),
                  grid=lambda x, d: (x.shape[0] // 128,))
  def divide(x, d, q, r):
    i = ml.program_id(0)
    v = x[ml.ds(i * 128, 128)]
    q[ml.ds(i * 128, 128)] = v // (i + 1)         # (i + 1 >= 1 in every program: proved)
    r[ml.ds(i * 128, 128)] = v % d[i]             # (read from memory: may be 0)
  return divide


_SPECS = (S((256,), jnp.int32), S((2,), jnp.int32))


def _division_lines(text):
  lines = [ln for ln in text.splitlines() if " binary kind=" in ln]
  return ([ln for ln in lines if "kind=floordiv" in ln], [ln for ln in lines if "kind=mod" in ln])


@pytest.fixture(scope="module")
def divide():
  return _division_kernel()


def test_a_proved_divisor_is_marked_and_an_unproved_one_is_not(divide):
  floordiv, mod = _division_lines(divide.typed_ir(*_SPECS))
  assert floordiv and all("nonzero=True" in ln for ln in floordiv), floordiv
  assert mod and not any("nonzero" in ln for ln in mod), mod
  x = np.random.default_rng(1).integers(-1000, 1000, 256).astype(np.int32)
  d = np.array([7, 0], np.int32)                  # (the second program divides by 0: jnp's x % 0 is 0)
  q, r = divide(jnp.asarray(x), jnp.asarray(d), interpret=True)
  i = np.repeat(np.arange(2), 128)
  np.testing.assert_array_equal(q, jnp.floor_divide(x, i + 1))
  np.testing.assert_array_equal(r, jnp.remainder(jnp.asarray(x), jnp.asarray(d[i])))


def test_the_mark_comes_from_the_proofs_facts_not_from_the_check_pass(divide, monkeypatch):
  """Without mark_nonzero_divisions no division is marked (check_kernel changes no op; it lists what it proved in
  Facts.nonzero_divisions), and the proved division keeps its zero guard in the MLIR."""
  marked = divide.mlir(*_SPECS)
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", "off")
  monkeypatch.setattr(fc, "mark_nonzero_divisions", lambda kernel, defs, facts: None)
  k = _division_kernel()
  assert "nonzero" not in k.typed_ir(*_SPECS)
  guarded = k.mlir(*_SPECS)
  assert guarded.count("arith.select") > marked.count("arith.select")


# ---------------------------------------------------------------- (3) the splits and the one static-int test
def test_split_modules_keep_their_names():
  from mgpu_dsl.frontend import checks, flow, grid_memory, while_loops
  assert flow.trace_while is while_loops.trace_while and flow.STATIC_WHILE_TRIPS == while_loops.STATIC_WHILE_TRIPS
  assert checks.Facts is grid_memory.Facts and checks.synced_ops is grid_memory.synced_ops
  assert checks.Facts().nonzero_divisions == []
  with pytest.raises(AttributeError):
    flow.no_such_name


def test_one_static_int_test():
  from mgpu_dsl.frontend import jnp_dynamic, jnp_moves, jnp_sized
  from mgpu_dsl.frontend.ops import base, stacking, vector_views
  assert jnp_dynamic._int is jnp_moves._int is jnp_sized._int is base.static_integer
  assert stacking._int is vector_views._int is base.python_int
  for v, py, any_int in [(3, True, True), (np.int64(3), False, True), (True, False, False), (np.bool_(True), False,
                                                                                             False), (3.0, False, False)]:
    assert (base.python_int(v), base.static_integer(v)) == (py, any_int), v
