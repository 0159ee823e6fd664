"""Probe 37b (ragged and data-dependent kernels: grouped matmul, segment sums, histograms, top-k,
gathers and scatters by index arrays, scans, data-dependent loops): a column gather `t[:, cols]`
whose (rows, len(cols)) tile each row's lanes cannot hold was MG204, where the row gather
`t[ids, :]` of the same shape widens itself; and the hints of column gathers and scatters the
registers cannot hold at all were a row gather's (`t[ids[:, None], ml.arange(...)]`), which,
followed, computed other elements."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _take_columns(t, c):             # jnp's gather: negative indices from the end, the rest clamped
  c = np.asarray(c).astype(np.int64)
  n = t.shape[-1]
  return np.asarray(t)[..., np.clip(np.where(c < 0, c + n, c), 0, n - 1)]


# ---------------------------------------------------------------- column gathers widened
@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns(t, c, out):
  out[...] = t[:, c[...]]


@mg.mgpu_kernel(out_shape=lambda t, c, s: S((16, c.shape[0]), t.dtype), grid=lambda t, c, s: (1,))
def gather_columns_of_view(t, c, s, out):
  out[...] = t.at[ml.ds(s[0], 16), 3, :][:, c[...]]


COLUMN_CASES = [((64, 128), 40, F32, jnp.int32), ((128, 100), 8, jnp.bfloat16, jnp.int16),
                ((16, 300), 24, jnp.float16, jnp.uint8), ((32, 50), 16, jnp.int32, jnp.uint32)]


def _column_case(shape, n, dtype, idtype, seed=0):
  rng = np.random.default_rng(seed)
  t = jnp.asarray(rng.standard_normal(shape) * 10).astype(dtype)
  low = 0 if idtype in (jnp.uint8, jnp.uint32) else -shape[1]
  return t, jnp.asarray(rng.integers(low, shape[1] + 20, n)).astype(idtype)


@pytest.mark.parametrize("shape,n,dtype,idtype", COLUMN_CASES)
def test_a_column_gather_of_narrow_columns_is_widened_as_a_row_gather_is(shape, n, dtype, idtype):
  t, c = _column_case(shape, n, dtype, idtype)
  np.testing.assert_array_equal(np.asarray(gather_columns(t, c, interpret=True)), _take_columns(t, c))
  assert "mosaic_gpu" in str(_export(gather_columns, S(shape, dtype), S((n,), idtype)))


def test_a_column_gather_of_a_view_is_widened_inside_the_view():
  rng = np.random.default_rng(1)
  t = jnp.asarray(rng.standard_normal((40, 5, 64)), F32)
  c = jnp.asarray(rng.integers(-64, 64, 40), jnp.int32)
  got = gather_columns_of_view(t, c, jnp.array([9], jnp.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _take_columns(t[9:25, 3, :], c))
  _export(gather_columns_of_view, S((40, 5, 64), F32), S((40,), jnp.int32), S((1,), jnp.int32))


@pytest.mark.gpu
@pytest.mark.parametrize("shape,n,dtype,idtype", COLUMN_CASES)
def test_gpu_a_widened_column_gather_matches_jnp(shape, n, dtype, idtype):
  t, c = _column_case(shape, n, dtype, idtype, seed=2)
  np.testing.assert_array_equal(np.asarray(jax.jit(gather_columns)(t, c)), _take_columns(t, c))
  t3 = jnp.asarray(np.random.default_rng(3).standard_normal((40, 5, 64)), F32)
  c3 = jnp.asarray(np.random.default_rng(4).integers(-64, 64, 40), jnp.int32)
  got = jax.jit(gather_columns_of_view)(t3, c3, jnp.array([9], jnp.int32))
  np.testing.assert_array_equal(np.asarray(got), _take_columns(t3[9:25, 3, :], c3))


# ---------------------------------------------------------------- hints of column gathers and scatters
@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns_odd_rows(t, c, out):
  out[...] = t[:, c[...]]


@mg.mgpu_kernel(out_shape=lambda t, c: S((t.shape[0], c.shape[0]), t.dtype), grid=lambda t, c: (1,))
def gather_columns_as_hinted(t, c, out):
  cols = c.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 32, other=0)
  v = t[:, cols]
  out.at[:, ml.ds(0, 128)].store(v, mask=ml.arange(128)[None, :] < 32)


@mg.mgpu_kernel(out_shape=lambda v, c: S((v.shape[0], 300), v.dtype), grid=lambda v, c: (1,))
def scatter_columns(v, c, out):
  ml.atomic_add(out.at[:, c[...]], v[...])


@mg.mgpu_kernel(out_shape=lambda v, c: S((v.shape[0], 300), v.dtype), grid=lambda v, c: (1,))
def scatter_columns_as_hinted(v, c, out):
  cols = c.at[ml.ds(0, 64)].load(mask=ml.arange(64) < 40, other=out.shape[1])
  vals = v.at[:, ml.ds(0, 64)].load(mask=ml.arange(64)[None, :] < 40, other=0)
  ml.atomic_add(out.at[:, cols], vals)


def test_a_column_gather_registers_cannot_hold_hints_a_widened_index_vector_that_works():
  expect(gather_columns_odd_rows, [S((50, 128), F32), S((32,), jnp.int32)], mg.LayoutError, "t[:, c[...]]",
         "this gather of shape (50, 32) spreads each row's index along the row: that needs columns a multiple of"
         " 32 (one per lane of a warp), and rows a multiple of 4 unless the columns are a multiple of 128",
         hint="widen the index vector to 128 entries, which each row's lanes hold, and keep 32 columns at the"
              " store: cols = c.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 32, other=0); v = t[:, cols] (index 0"
              " where the mask is off); out.at[:, ml.ds(0, 128)].store(v, mask=ml.arange(128)[None, :] < 32) (the"
              " window may run past out's last column: masked elements are never written)")
  rng = np.random.default_rng(5)
  t = jnp.asarray(rng.standard_normal((50, 128)), F32)
  c = jnp.asarray(rng.integers(0, 128, 32), jnp.int32)
  np.testing.assert_array_equal(np.asarray(gather_columns_as_hinted(t, c, interpret=True)), _take_columns(t, c))
  _export(gather_columns_as_hinted, S((50, 128), F32), S((32,), jnp.int32))


def test_a_column_scatter_of_40_columns_compiles_and_so_does_the_widened_one():
  builds(scatter_columns, S((64, 40), F32), S((40,), jnp.int32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  rng = np.random.default_rng(6)
  v = jnp.asarray(rng.standard_normal((64, 40)), F32)
  c = jnp.asarray(rng.integers(0, 300, 40), jnp.int32)
  want = np.zeros((64, 300), np.float32)
  np.add.at(want, (slice(None), np.asarray(c)), np.asarray(v))
  np.testing.assert_allclose(np.asarray(scatter_columns_as_hinted(v, c, interpret=True)), want, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(scatter_columns(v, c, interpret=True)), want, rtol=1e-6, atol=1e-6)
  _export(scatter_columns_as_hinted, S((64, 40), F32), S((40,), jnp.int32))


# ---------------------------------------------------------------- loops rewritten to count up evaluate their bounds once
def _halving(x, rows):               # acc = acc * 0.5 + x[r] over `rows` in order
  acc = np.zeros(x.shape[1], np.float32)
  for r in rows:
    acc = acc * np.float32(0.5) + np.asarray(x[r])
  return acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def down_start_rebound(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  m = n[0]
  for r in range(m - 1, -1, -1):
    acc = acc * 0.5 + x.at[r][...]
    m = m - 1                        # range's arguments were evaluated before the loop
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def down_from_the_loop_variable(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  i = n[0]
  for i in range(i - 1, -1, -1):
    acc = acc * 0.5 + x.at[i][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def reversed_from_a_run_time_start(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  for r in reversed(range(n[1], n[0])):
    acc = acc * 0.5 + x.at[r][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def reversed_rows(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  for r in reversed(range(n[0])):
    acc = acc * 0.5 + x.at[r][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def down_to_minus_one(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(n[0] - 1, -1, -1):
    acc = acc * 0.5 + x.at[r][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def down_to_minus_one_as_hinted(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  for r in range((n[0] - 1).astype(jnp.int32), -1, -1):
    acc = acc * 0.5 + x.at[r][...]
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[1],), F32), grid=lambda x, n: (1,))
def rows_from_a_rebound_start(x, n, out):
  acc = ml.zeros((x.shape[1],), F32)
  s = n[0]
  for i, row in enumerate(x, s):
    acc = acc + row[...] * i.astype(F32)
    s = s + 100                      # enumerate's start was evaluated before the loop
  w = 0
  for row in x.at[ml.ds(w, 4)]:
    acc = acc + row[...]
    w = w + 2                        # so was the window iterated
  out[...] = acc


ROWS = jnp.asarray(np.random.default_rng(7).standard_normal((10, 128)), F32)
DOWN_CASES = [
    (down_start_rebound, [[7]], jnp.int32, lambda n: range(n[0] - 1, -1, -1)),
    (down_from_the_loop_variable, [[7]], jnp.int32, lambda n: range(n[0] - 1, -1, -1)),
    (down_to_minus_one, [[5]], jnp.int16, lambda n: range(n[0] - 1, -1, -1)),
    (reversed_from_a_run_time_start, [[7, 0], [7, 2], [3, 5]], jnp.uint32, lambda n: reversed(range(n[1], n[0]))),
    (reversed_rows, [[7], [0]], jnp.uint32, lambda n: reversed(range(n[0]))),
    (reversed_rows, [[6]], jnp.uint8, lambda n: reversed(range(n[0]))),
]


@pytest.mark.parametrize("kernel,ns,dtype,rows", DOWN_CASES)
def test_a_loop_counting_down_evaluates_its_bounds_once_and_never_wraps(kernel, ns, dtype, rows):
  for n in ns:
    got = kernel(ROWS, jnp.asarray(n, dtype), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _halving(ROWS, rows(n)), rtol=1e-6, atol=1e-6)
  _export(kernel, S(ROWS.shape, F32), S((len(ns[0]),), dtype))


def test_iterated_rows_evaluate_the_array_and_enumerates_start_once():
  got = rows_from_a_rebound_start(ROWS, jnp.asarray([3], jnp.int32), interpret=True)
  want = sum(np.asarray(ROWS[k]) * (k + 3) for k in range(10)) + np.asarray(ROWS[:4]).sum(0)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4)


def test_a_negative_stop_beside_a_uint32_start_counting_down_is_reported_not_run_for_no_trips():
  expect(down_to_minus_one, [S((10, 128), F32), S((1,), jnp.uint32)], mg.KernelTypeError, "-1, -1)",
         "this loop's stop is -1, but its run-time bounds are uint32, so it counts in uint32, where -1 would wrap"
         " to 4294967295",
         hint="convert the uint32 bound to int32 (values below 2**31): (n[0] - 1).astype(jnp.int32) in the range,"
              " as Python counts from a negative stop")
  for n in (7, 0):
    got = down_to_minus_one_as_hinted(ROWS, jnp.asarray([n], jnp.uint32), interpret=True)
    np.testing.assert_allclose(np.asarray(got), _halving(ROWS, range(n - 1, -1, -1)), rtol=1e-6, atol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,ns,dtype,rows", DOWN_CASES)
def test_gpu_loops_counting_down_match_numpy(kernel, ns, dtype, rows):
  for n in ns:
    got = jax.jit(kernel)(ROWS, jnp.asarray(n, dtype))
    np.testing.assert_allclose(np.asarray(got), _halving(ROWS, rows(n)), rtol=1e-5, atol=1e-5)
  got = jax.jit(rows_from_a_rebound_start)(ROWS, jnp.asarray([3], jnp.int32))
  want = sum(np.asarray(ROWS[k]) * (k + 3) for k in range(10)) + np.asarray(ROWS[:4]).sum(0)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- a grouped GEMM's tile split into one-tile buffers
@mg.mgpu_kernel(out_shape=lambda x, w, offs: S((x.shape[0], w.shape[2]), F32),
                grid=lambda x, w, offs: (w.shape[0], w.shape[2] // 64))
def grouped_k128(x, w, offs, out):
  g, j = ml.program_id(0), ml.program_id(1)
  start, end = offs[g], offs[g + 1]
  a_s, b_s = ml.smem((64, 128)), ml.smem((128, 64))
  for t in range(ml.cdiv(end - start, 64)):
    r0 = start + t * 64
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(x.shape[1] // 128, stages=2):
      ml.copy(x.at[ml.ds(r0, 64), ml.ds(k * 128, 128)], a_s)
      ml.copy(w.at[g, ml.ds(k * 128, 128), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    rows = r0 + ml.arange(64)[:, None]
    out.at[ml.ds(r0, 64), ml.ds(j * 64, 64)].store(acc, mask=rows < end)


@mg.mgpu_kernel(out_shape=lambda x, w, offs: S((x.shape[0], w.shape[2]), F32),
                grid=lambda x, w, offs: (w.shape[0], w.shape[2] // 64))
def grouped_k128_as_hinted(x, w, offs, out):
  g, j = ml.program_id(0), ml.program_id(1)
  start, end = offs[g], offs[g + 1]
  a_s0, a_s1, b_s0, b_s1 = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  for t in range(ml.cdiv(end - start, 64)):
    r0 = start + t * 64
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(x.shape[1] // 128, stages=2):
      ml.copy(x.at[ml.ds(r0, 64), ml.ds(k * 128, 64)], a_s0)
      ml.copy(x.at[ml.ds(r0, 64), ml.ds(k * 128 + 64, 64)], a_s1)
      ml.copy(w.at[g, ml.ds(k * 128, 64), ml.ds(j * 64, 64)], b_s0)
      ml.copy(w.at[g, ml.ds(k * 128 + 64, 64), ml.ds(j * 64, 64)], b_s1)
      acc = ml.dot(a_s0, b_s0, acc)
      acc = ml.dot(a_s1, b_s1, acc)
    rows = r0 + ml.arange(64)[:, None]
    out.at[ml.ds(r0, 64), ml.ds(j * 64, 64)].store(acc, mask=rows < end)


def test_the_split_buffers_hint_keeps_the_windows_run_time_column_start():
  # the hint said "with ml.ds(0, 64) as its last index, a_s1 with ml.ds(64, 64)": followed, every
  # k step multiplied the first 128 columns of x. (Since probe 46c the segment's rows, from any row, are
  # copied a row of tiles a TMA: the kernel computes as written, as the hint's split does.)
  rng = np.random.default_rng(8)
  x = jnp.asarray(rng.standard_normal((256, 256)), jnp.float16)
  w = jnp.asarray(rng.standard_normal((4, 256, 128)), jnp.float16)
  offs = jnp.asarray([0, 30, 30, 200, 256], jnp.int32)
  want = jax.lax.ragged_dot(x, w, jnp.diff(offs), preferred_element_type=F32)
  for kernel in (grouped_k128, grouped_k128_as_hinted):
    np.testing.assert_allclose(np.asarray(kernel(x, w, offs, interpret=True)), np.asarray(want), rtol=2e-2, atol=5e-2)
    _export(kernel, S((256, 256), jnp.float16), S((4, 256, 128), jnp.float16), S((5,), jnp.int32))


# ---------------------------------------------------------------- a top-2's (tokens, 2) index tile
@mg.mgpu_kernel(out_shape=lambda v, ids: S((16, v.shape[1]), v.dtype), grid=lambda v, ids: (1,))
def scatter_top2(v, ids, out):
  ml.atomic_add(out.at[ids[...], :], v[...])


@mg.mgpu_kernel(out_shape=lambda v, ids: S((16, v.shape[1]), v.dtype), grid=lambda v, ids: (1,))
def scatter_top2_as_hinted(v, ids, out):
  for k in ml.static_range(2):
    ml.atomic_add(out.at[ids[...][:, k], :], v[...])


def test_a_scatter_through_a_2d_index_tile_hints_its_columns_one_at_a_time():
  # the hint was "index one dimension with an int in an ml.static_range loop": no dimension of out
  # is the one to index, the index tile's columns are
  expect(scatter_top2, [S((64, 128), F32), S((64, 2), jnp.int32)], mg.LayoutError, "ml.atomic_add(",
         "this scatter gives a 3-D result (64, 2, 128): a scatter (its index grids broadcast together) gives 1-D"
         " and 2-D tensors",
         hint="take the 2 columns of the index tile ids[...] one at a time, a 2-D scatter a trip: for k in"
              " ml.static_range(2): index with ids[...][:, k] (a vector of 64 indices) in place of ids[...], with"
              " the values for that column")
  rng = np.random.default_rng(9)
  v = jnp.asarray(rng.standard_normal((64, 128)), F32)
  ids = jnp.asarray(rng.integers(0, 16, (64, 2)), jnp.int32)
  want = np.zeros((16, 128), np.float32)
  for k in range(2):
    np.add.at(want, np.asarray(ids[:, k]), np.asarray(v))
  np.testing.assert_allclose(np.asarray(scatter_top2_as_hinted(v, ids, interpret=True)), want, rtol=1e-5, atol=1e-5)
  _export(scatter_top2_as_hinted, S((64, 128), F32), S((64, 2), jnp.int32))
