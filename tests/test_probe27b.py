"""Probe 27b (data-dependent and ragged kernels): the hints of an atomic window past an array's
end, which wrote `out.at[..., ml.arange(n), ...]` (two `...`: not an index) and `atomic_add`
whatever the atomic, and dropped the window's other indices; gathers and scatters of a view that
the compiler knew runs past its array's end, which export built (the GPU read and wrote outside)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
IMIN = np.iinfo(np.int32).min


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- atomics past the end: the hints
@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), I32))
def max_row_past_end(x, out):
  ml.atomic_max(out.at[1, ml.ds(64, 64)], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), I32))
def max_row_past_end_as_hinted(x, out):
  ml.atomic_max(out.at[1, 64 + ml.arange(64)], x[...])


def test_a_static_atomic_window_past_the_end_hints_a_scatter_that_works():
  e = expect(max_row_past_end, [S((64,), I32)], mg.IndexOutOfBoundsError, "ml.atomic_max(",
             "ml.ds(64, 64) is out of bounds for dimension 1 of out (size 100)")
  assert e.hint == ("an atomic update must stay inside the array: index dimension 1 with a tensor instead,"
                    " ml.atomic_max(out.at[1, 64 + ml.arange(64)], value), which drops the elements past the end"
                    " (or ml.copy(buf, window, reduce=\"max\") from SMEM, which TMA clips)")
  x = jnp.arange(64, dtype=I32)
  want = np.full((4, 100), IMIN, np.int32)
  want[1, 64:] = np.arange(36)
  np.testing.assert_array_equal(max_row_past_end_as_hinted(x, interpret=True), want)
  assert "mosaic_gpu" in _export(max_row_past_end_as_hinted, S((64,), I32))


@mg.mgpu_kernel(out_shape=lambda x: S((100,), F32))
def add_before_start(x, out):
  ml.atomic_add(out.at[ml.ds(-1, 64)], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((100,), F32))
def add_before_start_as_hinted(x, out):
  pos = -1 + ml.arange(64)
  ml.atomic_add(out.at[ml.where(pos >= 0, pos, 100)], x[...])


def test_a_static_atomic_window_before_the_start_hints_positions_sent_past_the_end():
  # the hint said to mask it (ref.load / ref.store), which an atomic does not take; a scatter of
  # -1 + ml.arange(64) would add x[0] into out[-1], the last element
  e = expect(add_before_start, [S((64,), F32)], mg.IndexOutOfBoundsError, "ml.atomic_add(",
             "ml.ds(-1, 64) is out of bounds for dimension 0 of out (size 100)")
  assert e.hint == ("an atomic update must stay inside the array: index dimension 0 with positions instead,"
                    " pos = -1 + ml.arange(64), moving the ones before 0 past the end, where they are dropped"
                    " (a negative index counts from the end):"
                    " ml.atomic_add(out.at[ml.where(pos >= 0, pos, 100)], value)")
  x = jnp.arange(64, dtype=F32)
  want = np.zeros(100, np.float32)
  want[:63] = np.arange(1, 64)
  np.testing.assert_array_equal(add_before_start_as_hinted(x, interpret=True), want)
  assert "mosaic_gpu" in _export(add_before_start_as_hinted, S((64,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), I32), grid=(2,))
def max_rows_past_end(x, out):
  p = ml.program_id(0)
  ml.atomic_max(out.at[p, ml.ds(p * 64, 64)], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), I32), grid=(2,))
def max_rows_past_end_as_hinted(x, out):
  p = ml.program_id(0)
  ml.atomic_max(out.at[p, (p * 64) + ml.arange(64)], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), F32), grid=(2,))
def add_rows_before_start(x, out):
  p = ml.program_id(0)
  ml.atomic_add(out.at[p, ml.ds(p * 64 - 1, 64)], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4, 100), F32), grid=(2,))
def add_rows_before_start_as_hinted(x, out):
  p = ml.program_id(0)
  pos = (p * 64 - 1) + ml.arange(64)
  ml.atomic_add(out.at[p, ml.where(pos >= 0, pos, 100)], x[...])


def test_a_program_atomic_window_outside_hints_the_scatter_with_its_other_indices():
  # the hint wrote out.at[start + ml.arange(64)] for a 2-D out (the row index dropped), and
  # always atomic_add; before the start it said to mask the access
  e = expect(max_rows_past_end, [S((64,), I32)], mg.IndexOutOfBoundsError, "ml.atomic_max(",
             "this register write touches out[1:2, 64:128] in program (1, 0, 0), outside out's shape (4, 100)")
  assert e.hint == ("index the window with a tensor of positions (a scatter), whose updates past the end are"
                    " dropped: ml.atomic_max(out.at[p, (p * 64) + ml.arange(64)], x[...])")
  e = expect(add_rows_before_start, [S((64,), F32)], mg.IndexOutOfBoundsError, "ml.atomic_add(",
             "this register write touches out[0:1, -1:63] in program (0, 0, 0), outside out's shape (4, 100)")
  assert e.hint == ("index the window with positions, pos = (p * 64 - 1) + ml.arange(64), moving the ones before 0"
                    " past the end, where a scatter drops them (a negative index counts from the end):"
                    " ml.atomic_add(out.at[p, ml.where(pos >= 0, pos, 100)], x[...])")
  x = jnp.arange(64, dtype=I32)
  want = np.full((4, 100), IMIN, np.int32)
  want[0, :64], want[1, 64:] = np.arange(64), np.arange(36)
  np.testing.assert_array_equal(max_rows_past_end_as_hinted(x, interpret=True), want)
  want = np.zeros((4, 100), np.float32)
  want[0, :63], want[1, 63:] = np.arange(1, 64), np.arange(37)
  np.testing.assert_array_equal(add_rows_before_start_as_hinted(x.astype(F32), interpret=True), want)
  assert "mosaic_gpu" in _export(max_rows_past_end_as_hinted, S((64,), I32))
  assert "mosaic_gpu" in _export(add_rows_before_start_as_hinted, S((64,), F32))


# ---------------------------------------------------------------- gathers and scatters of a view outside
@mg.mgpu_kernel(out_shape=lambda t, ids: S((128,), t.dtype))
def gather_view_past_end(t, ids, out):
  out[...] = t.at[ml.ds(80, 64)][ids[...]]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((2, 128), t.dtype), grid=(2,))
def gather_program_views(t, ids, out):
  p = ml.program_id(0)
  out.at[p][...] = t.at[ml.ds(p * 64, 64)][ids[...]]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((2, 128), t.dtype), grid=(2,))
def gather_program_views_as_hinted(t, ids, out):
  p = ml.program_id(0)
  out.at[p][...] = t[p * 64 + ids[...]]


@mg.mgpu_kernel(out_shape=lambda v, ids: S((100,), F32), grid=(2,))
def scatter_program_views(v, ids, out):
  p = ml.program_id(0)
  ml.atomic_add(out.at[ml.ds(p * 64, 64)].at[ids[...]], v[...])


@mg.mgpu_kernel(out_shape=lambda v, ids: S((100,), F32), grid=(2,))
def scatter_program_views_as_hinted(v, ids, out):
  p = ml.program_id(0)
  ml.atomic_add(out.at[p * 64 + ids[...]], v[...])


def test_a_gather_or_scatter_of_a_view_known_to_leave_its_array_is_rejected_while_compiling():
  # the view's indices are clamped to the view (a scatter's dropped outside it), not to the array:
  # the GPU read and wrote past t's end; only interpret mode said so, and export built it
  spec = [S((100,), F32), S((128,), I32)]
  for k, at in ((gather_view_past_end, "t.at[ml.ds(80"), (gather_program_views, "t.at[ml.ds(p")):
    where = "" if k is gather_view_past_end else " in program (1, 0, 0)"
    view = "t[80:144]" if k is gather_view_past_end else "t[64:128]"
    expect(k, spec, mg.IndexOutOfBoundsError, at,
           f"this gather indexes the view {view}{where}, outside t's shape (100,): its indices are clamped"
           f" to the view, not t",
           hint="index t itself with the view's start added to the indices (t[start + ids] for"
                " t.at[ml.ds(start, n)][ids]), where an index past t's end clamps to its last element, or keep"
                " the view inside it")
  expect(scatter_program_views, [S((128,), F32), S((128,), I32)], mg.IndexOutOfBoundsError, "ml.atomic_add(",
         "this scatter indexes the view out[64:128] in program (1, 0, 0), outside out's shape (100,): its"
         " indices are dropped outside the view, not out",
         hint="index out itself with the view's start added to the indices (out.at[start + ids] for"
              " out.at[ml.ds(start, n)].at[ids]), where an update past out's end is dropped, or keep the view"
              " inside it")
  t = np.arange(100, dtype=np.float32)
  ids = np.arange(128, dtype=np.int32) % 64
  np.testing.assert_array_equal(gather_program_views_as_hinted(t, ids, interpret=True),
                                t[np.minimum(np.arange(2)[:, None] * 64 + ids, 99)])
  want = np.zeros(100, np.float32)
  pos = (np.arange(2)[:, None] * 64 + ids).ravel()
  np.add.at(want, pos[pos < 100], 1.0)
  np.testing.assert_array_equal(scatter_program_views_as_hinted(np.ones(128, np.float32), ids, interpret=True),
                                want)
  assert "mosaic_gpu" in _export(gather_program_views_as_hinted, *spec)
  assert "mosaic_gpu" in _export(scatter_program_views_as_hinted, S((128,), F32), S((128,), I32))
  # a view inside its array, at run-time starts, builds as before
  s = np.array([36], np.int32)
  np.testing.assert_array_equal(gather_run_time_view(t, ids, s, interpret=True), t[36 + ids])
  assert "mosaic_gpu" in _export(gather_run_time_view, *spec, S((1,), I32))


@mg.mgpu_kernel(out_shape=lambda t, ids, s: S((128,), t.dtype))
def gather_run_time_view(t, ids, s, out):
  out[...] = t.at[ml.ds(s[0], 64)][ids[...]]


# ---------------------------------------------------------------- ragged rows: a run-time window size
@mg.mgpu_kernel(out_shape=lambda x, lens: S((x.shape[0],), F32), grid=lambda x, lens: (x.shape[0],))
def ragged_row_sums_ds(x, lens, out):
  r = ml.program_id(0)
  out[r] = ml.sum(x.at[r, ml.ds(0, lens[r])][...])


@mg.mgpu_kernel(out_shape=lambda x, lens: S((x.shape[0],), F32), grid=lambda x, lens: (x.shape[0],))
def ragged_row_sums_slice(x, lens, out):
  r = ml.program_id(0)
  out[r] = ml.sum(x.at[r, 0:lens[r]][...])


@mg.mgpu_kernel(out_shape=lambda x, lens: S((x.shape[0],), F32), grid=lambda x, lens: (x.shape[0],))
def ragged_row_sums_as_hinted(x, lens, out):
  r = ml.program_id(0)
  v = x.at[r, ml.ds(0, 304)].load(mask=ml.arange(304) < lens[r], other=0)
  out[r] = ml.sum(v)


def test_a_run_time_window_size_hints_a_masked_window_that_lays_out():
  # ml.ds(0, lens[r]) said only "the size of a window is fixed when the kernel is compiled"; the
  # run-time slice's hint masked ml.arange(300), which is LayoutError MG204 (not a multiple of 8)
  spec = [S((4, 300), F32), S((4,), I32)]
  hint = ("take a window of fixed size and mask it to the run-time length: v = x.at[r, ml.ds(0, 304)]"
          ".load(mask=ml.arange(304) < lens[r], other=0)")     # (x is an input: no store, probe 28e)
  expect(ragged_row_sums_ds, spec, mg.KernelTypeError, "x.at[r, ml.ds(0, lens[r])]",
         "ml.ds size must be a positive static int, got lens[r], a run-time value: a window's size is fixed when"
         " the kernel is compiled", hint=hint)
  expect(ragged_row_sums_slice, spec, mg.KernelTypeError, "x.at[r, 0:lens[r]]",
         "slice 0:lens[r] of dimension 1 of x has a run-time stop: a window's size is fixed when the kernel is"
         " compiled", hint=hint)
  x = np.random.RandomState(0).rand(4, 300).astype(np.float32)
  lens = np.array([0, 1, 129, 300], np.int32)
  np.testing.assert_allclose(ragged_row_sums_as_hinted(x, lens, interpret=True),
                             [x[i, :lens[i]].sum() for i in range(4)], rtol=1e-5)
  assert "mosaic_gpu" in _export(ragged_row_sums_as_hinted, *spec)


# ---------------------------------------------------------------- run-time loop bounds of two types
@mg.mgpu_kernel(out_shape=lambda lens, st: S(lens.shape, I32), grid=lambda lens, st: (lens.shape[0],))
def mixed_bounds(lens, st, out):
  p = ml.program_id(0)
  c = 0
  for i in range(st[p], lens[p]):
    c = c + 1
  out[p] = c


@mg.mgpu_kernel(out_shape=lambda lens, st: S(lens.shape, I32), grid=lambda lens, st: (lens.shape[0],))
def mixed_bounds_as_hinted(lens, st, out):
  p = ml.program_id(0)
  c = 0
  for i in range(st[p], lens[p].astype(jnp.int32)):
    c = c + 1
  out[p] = c


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def pipelined_uint32_bound(x, n, out):
  buf = ml.smem((128,), F32)
  acc = ml.zeros((128,), F32)
  for i in ml.range(n[0], stages=2):
    ml.copy(x.at[i], buf)
    acc = acc + buf[...]
  out[...] = acc


def test_mixed_loop_bounds_hint_the_users_bound():
  # the hint converted "n", a name the kernel does not have, and offered uint32 bounds to a
  # pipelined loop, which counts in int32
  expect(mixed_bounds, [S((4,), jnp.uint32), S((4,), I32)], mg.KernelTypeError, "range(st[p]",
         "this loop's run-time bounds are uint32 and int32: a loop counts in one integer type",
         hint="convert the bounds to one type: lens[p].astype(jnp.int32) (values below 2**31), or make every"
              " bound uint32 (st[p].astype(jnp.uint32), of values of at least 0)")
  expect(pipelined_uint32_bound, [S((4, 128), F32), S((1,), jnp.uint32)], mg.KernelTypeError, "ml.range(n[0]",
         "this loop's run-time bounds are uint32: a pipelined loop counts in int32",
         hint="convert it: n[0].astype(jnp.int32) (values below 2**31)")
  lens = np.array([0, 1, 5, 7], np.uint32)
  st = np.array([-1, 0, 4, 9], np.int32)
  np.testing.assert_array_equal(mixed_bounds_as_hinted(lens, st, interpret=True), [1, 1, 1, 0])
  assert "mosaic_gpu" in _export(mixed_bounds_as_hinted, S((4,), jnp.uint32), S((4,), I32))
