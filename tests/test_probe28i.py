"""Probe 28i (compile time and scale): passes whose work grew with the square of a kernel's
size (the sync pass's window comparisons, the SMEM plan, the covered-cell masks) or with the
grid times the loop trips (the grid evaluation), expressions too deep for the tracer, and
ml.static_range unrolled without limit. Each test counts the work done (or asserts the error),
never the time taken."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import absint, ir, sync, sync_gmem
from locate import expect
from test_frontend import build

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs, **kw):
  import functools
  return jax.export.export(jax.jit(functools.partial(fn, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _count_overlaps(monkeypatch):
  """Count the window comparisons of the sync pass (sync.py and sync_gmem.py bind them by name)."""
  calls = [0]
  for mod in (sync, sync_gmem):
    for name in ("overlap", "disjoint"):
      if hasattr(mod, name):
        real = getattr(sync_gmem, name)
        def counted(*a, _real=real):
          calls[0] += 1
          return _real(*a)
        monkeypatch.setattr(mod, name, counted)
  return calls


# ---------------------------------------------------------------- sync pass: windows indexed by start
def gmem_rows(x, out):
  for i in ml.static_range(256):
    out[i, :] = x[i, :] * 2.0


def smem_rows(x, out):
  b = ml.smem((256, 64))
  for c in ml.static_range(4):
    ml.copy(x.at[ml.ds(c * 64, 64)], b.at[ml.ds(c * 64, 64)])
  for i in ml.static_range(256):
    b[i, :] = b[i, :] * 2.0
  for c in ml.static_range(4):
    ml.copy(b.at[ml.ds(c * 64, 64)], out.at[ml.ds(c * 64, 64)])


@pytest.mark.parametrize("fn, dtype", [(gmem_rows, "float32"), (smem_rows, "float16")])
def test_an_unrolled_loop_of_row_accesses_compares_each_row_with_its_neighbours_only(monkeypatch, fn, dtype):
  # Each row's register access was compared with every earlier row since the last barrier
  # (256 rows: 32640 comparisons; 2048 rows took 24 s): now only with the rows it may touch.
  calls = _count_overlaps(monkeypatch)
  k = build(fn, [((256, 64), dtype)], [((256, 64), dtype)])
  assert calls[0] < 8 * 256, calls[0]
  if fn is gmem_rows:      # rows of one output, each one thread's: no barrier between them
    assert not [o for o in ir.walk(k.body) if type(o).__name__ == "Barrier"]


@mg.mgpu_kernel(out_shape=lambda x: x)
def rows_then_overlap(x, out):
  for i in ml.static_range(8):
    out[i, :] = x[i, :] * 2.0
  out[ml.ds(2, 4), :] = x[ml.ds(2, 4), :] + out[ml.ds(2, 4), :] * 0.0 + 1.0
  for i in ml.static_range(8):
    out[i, :] = out[i, :] + 1.0


def test_rows_and_an_overlapping_window_still_meet_at_barriers_and_match_numpy():
  x = np.arange(8 * 128, dtype=np.float32).reshape(8, 128)
  want = x * 2.0
  want[2:6] = x[2:6] + 1.0
  want = want + 1.0
  np.testing.assert_array_equal(np.asarray(rows_then_overlap(x, interpret=True)), want)
  assert "mosaic_gpu" in str(_export(rows_then_overlap, S((8, 128), F32))).lower()


# ---------------------------------------------------------------- SMEM plan: many reduction scratches
def many_row_maxes(x, out):
  acc = ml.max(x[0, :])
  for i in ml.static_range(1, 512):
    acc = ml.maximum(acc, ml.max(x[i, :]))
  out[...] = ml.zeros((128,), jnp.float32) + acc


def test_the_smem_plan_of_hundreds_of_reduction_scratches_sizes_each_buffer_a_bounded_number_of_times(monkeypatch):
  # 512 reductions, each with its scratch: the planner placed every buffer against every other,
  # asking each one's size again per pair (2048 reductions: 51 s), and tried three placements that
  # could not fit (the scratches alone exceed the SMEM) before sharing one place among them.
  from mgpu_dsl.frontend.types import RefType
  calls = [0]
  size = RefType.nbytes.fget
  def counted(self):
    calls[0] += 1
    return size(self)
  monkeypatch.setattr(RefType, "nbytes", property(counted))
  k = build(many_row_maxes, [((512, 128), "float32")], [((128,), "float32")])
  assert k.smem_plan.shared_scratch
  assert calls[0] < 40 * 512, calls[0]


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128,), x.dtype))
def row_maxes(x, out, *, n: ml.constexpr):
  acc = ml.max(x[0, :])
  for i in ml.static_range(1, n):
    acc = ml.maximum(acc, ml.max(x[i, :]))
  out[...] = ml.zeros((128,), jnp.float32) + acc


def test_many_row_maxes_sharing_their_scratch_match_numpy_and_export():
  x = np.random.default_rng(0).standard_normal((160, 128)).astype(np.float32)
  got = np.asarray(row_maxes(x, n=160, interpret=True))
  np.testing.assert_array_equal(got, np.full(128, x.max(), np.float32))
  assert "mosaic_gpu" in str(_export(row_maxes, S((160, 128), F32), n=160)).lower()


# ---------------------------------------------------------------- grid evaluation: budget per program
def tiles_in_a_loop(x, out):
  i = ml.program_id(0)
  for j in range(8):
    out.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...] = x.at[ml.ds(i * 128, 128), ml.ds(j * 128, 128)][...]


def test_a_loop_over_a_grid_of_a_million_programs_is_summarised_not_walked(monkeypatch):
  # Walking the loop evaluated every access once a trip for every program: 8 trips over 2**20
  # programs took 16 s (over 2**22, 100 s). The budget is now per program evaluated.
  from mgpu_dsl.frontend import compile as fc
  from mgpu_dsl.frontend.checks import Facts
  monkeypatch.setattr(fc, "check_kernel", lambda kernel, defs: ([], Facts()))
  big, small = 1 << 20, 4
  seen = {}
  for p in (big, small):
    k = build(tiles_in_a_loop, [((128 * p, 1024), "float32")], [((128 * p, 1024), "float32")], grid=(p, 1, 1))
    seen[p] = []
    assert absint.GridEval(k, seen[p].append).run()
  assert len(seen[small]) == 16 and all(a.exact for a in seen[small])     # small grids: walked
  assert len(seen[big]) == 4 and not all(a.exact for a in seen[big])       # first trip, then summarised


# ---------------------------------------------------------------- proofs: the covered cells kept up to date
def smem_rows_read_back(x, out):
  b = ml.smem((256, 64))
  for i in ml.static_range(256):
    b[i, :] = x[i, :] * 2.0
    out[i, :] = b[i, :] + b[0, :]


def test_reads_of_rows_written_one_by_one_paint_each_written_box_once(monkeypatch):
  # Each read rebuilt the mask of the cells written so far from every box (256 rows: 33,000
  # boxes painted; 2048 rows: 10 s of the checks). Boxes added since the last read are painted
  # onto the kept mask instead.
  from mgpu_dsl.frontend import coverage
  painted = [0]
  real = coverage.unique_rows
  def counted(a):
    painted[0] += len(a)
    return real(a)
  monkeypatch.setattr(coverage, "unique_rows", counted)
  build(smem_rows_read_back, [((256, 64), "float16")], [((256, 64), "float16")])
  assert painted[0] < 8 * 256, painted[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def rows_read_back(x, out):
  b = ml.smem((16, 128))
  for i in ml.static_range(16):
    b[i, :] = x[i, :] * 2.0
    out[i, :] = b[i, :] + b[0, :]


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_read_before_written(x, out):
  b = ml.smem((16, 128))
  for i in ml.static_range(16):
    b[i, :] = x[i, :] * 2.0
    out[i, :] = b[i, :] + b[(i + 1) % 16, :]


def test_rows_written_then_read_match_numpy_and_a_row_read_early_is_still_reported():
  x = np.arange(16 * 128, dtype=np.float32).reshape(16, 128)
  np.testing.assert_array_equal(np.asarray(rows_read_back(x, interpret=True)), x * 2 + x[0] * 2)
  assert "mosaic_gpu" in str(_export(rows_read_back, S((16, 128), F32))).lower()
  expect(row_read_before_written, [S((16, 128), F32)], mg.UninitializedReadError, "b[(i + 1) % 16, :]",
         "b[1:2, :] is read before anything writes it: SMEM starts with garbage",
         hint="fill b first, with ml.copy(x.at[...], b) or b[...] = value, on every path to this read")


# ---------------------------------------------------------------- long operator chains
def _module(tmp_path, monkeypatch, name, expr):
  """A kernel `out[...] = <expr of v>` in a module of its own (the source is generated)."""
  import importlib
  src = ("import mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n\n\n"
         "@mg.mgpu_kernel(out_shape=lambda x: x)\n"
         f"def {name}(x, out):\n"
         "  v = x[...]\n"
         f"  out[...] = {expr}\n")
  (tmp_path / f"{name}.py").write_text(src)
  monkeypatch.syspath_prepend(str(tmp_path))
  return getattr(importlib.import_module(name), name)


def test_an_expression_of_600_additions_traces_without_recursing_per_operator(tmp_path, monkeypatch):
  # It was MG900 (RecursionError): the tracer recursed twice per operator, and each operator
  # quoted its whole left operand through astor (recursive, and quadratic in the chain's length).
  chain = _module(tmp_path, monkeypatch, "chain600", "v" + " + 1.0" * 600)
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(chain(x, interpret=True)), x + 600)
  assert "mosaic_gpu" in str(_export(chain, S((128,), F32))).lower()


def test_an_expression_nested_600_deep_computes(tmp_path, monkeypatch):
  # 600 nested unary minuses (valid Python) were MG900 (RecursionError), then MG001 at the statement ("nests too
  # deep"); since probe 71b compiling raises Python's recursion limit (frontend/deep_walks.py), so they compute.
  # (The MG001 stays for what passes even that limit; Python's own compiler refuses such nesting near 3000.)
  negs = _module(tmp_path, monkeypatch, "negs600", "-" * 600 + "v")
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(negs(x, interpret=True)), x)
  assert "mosaic_gpu" in str(_export(negs, S((128,), F32))).lower()


# ---------------------------------------------------------------- unrolling past what compiles in reasonable time
@mg.mgpu_kernel(out_shape=lambda x: x)
def unrolled_chain(x, out, *, n: ml.constexpr):
  v = x[...]
  for i in ml.static_range(n):
    v = v + 1.0
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def runtime_chain(x, out, *, n: ml.constexpr):     # unrolled_chain's hint followed
  v = x[...]
  for i in range(n):
    v = v + 1.0
  out[...] = v


def test_a_static_range_of_a_hundred_thousand_trips_is_reported_after_a_few_and_the_hint_works():
  # It traced on, a millisecond a trip (16384 trips: 14 s; 100000: minutes), with no cap.
  expect(unrolled_chain, [S((128,), F32)], mg.KernelTypeError, "ml.static_range(n)",
         "this ml.static_range unrolls its body 100000 times while tracing, about 100000 values: more than"
         " the 65536 an unrolled loop may make (each is traced and compiled separately)",
         hint="loop at run time, for i in range(...) with the same bounds (its body is traced once), or unroll"
              " fewer trips: ml.static_range for the few trips that need static indices", n=100_000)
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(runtime_chain(x, n=100_000, interpret=True)), x + 100_000)
  assert "mosaic_gpu" in str(_export(runtime_chain, S((128,), F32), n=100_000)).lower()
  np.testing.assert_array_equal(np.asarray(unrolled_chain(x, n=64, interpret=True)), x + 64)
