"""Probe 30c (a differential sweep of register layouts, benchmarks/probe_layouts.py): kernels whose
register layouts interpret mode does not model, checked against jnp, exported for CUDA, and on the
GPU compared with interpret mode."""
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- ml.arange grids in the strided layout
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def grid3(x, out):
  a, b, c = x.shape
  g = ml.arange(a)[:, None, None] * 10000 + ml.arange(b)[None, :, None] * 100 + ml.arange(c)[None, None, :]
  out[...] = g + x[...]


@mg.mgpu_kernel(out_shape=lambda x, *, R: S((x.shape[0] * x.shape[1],), x.dtype),
                grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),))
def masked_flatten(x, out, *, R: ml.constexpr):
  i = ml.program_id(0)
  r = i * R + ml.arange(R)
  v = x.at[ml.ds(i * R, R), :].load(mask=r[:, None] < x.shape[0], other=0)
  w = x.shape[1]
  out.at[ml.ds(i * R * w, R * w)].store(v.reshape(R * w), mask=i * R * w + ml.arange(R * w) < out.shape[0])


def _grid3_want(shape):
  a, b, c = shape
  return np.arange(a)[:, None, None] * 10000 + np.arange(b)[None, :, None] * 100 + np.arange(c)


def _mosaic_strided_starts(shape, vec):
  """The flat offset of each register's first element in Mosaic GPU's WGStridedFragLayout, per
  thread of the warpgroup (its linear_thread_idxs)."""
  regs = int(np.prod(shape)) // (128 * vec)
  return [[tid * vec + r * 128 * vec for r in range(regs)] for tid in range(128)]


_INT_OPS = types.SimpleNamespace(addi=lambda a, b: a + b, divui=lambda a, b: a // b,
                                 remui=lambda a, b: a % b, const=lambda v: v)


@pytest.mark.parametrize("shape,vec", [((4, 64, 2), 4), ((8, 64, 1), 4), ((16, 8, 8), 16), ((256, 2), 4),
                                       ((2, 64, 3), 1)])
def test_an_arange_of_a_strided_tile_indexes_each_element_of_a_register_that_crosses_rows(shape, vec):
  """It was silently wrong on the GPU: Mosaic's broadcasted_iota takes indices from foreach, which
  adds a register's element number to the last index alone, so in (4, 64, 2) int32 (vectors of 4)
  the third and fourth elements of a register had columns 2 and 3 and the first row's index. The
  lowering computes each element's index from its flat offset; here evaluated on integers over
  Mosaic's thread mapping."""
  from mgpu_dsl.lowering.elementwise import iota_registers
  want = np.indices(shape).reshape(len(shape), -1)
  for dim in range(len(shape)):
    for starts in _mosaic_strided_starts(shape, vec):
      got = iota_registers(starts, vec, shape, dim, _INT_OPS)
      for lin, elems in zip(starts, got):
        assert elems == [int(want[dim, lin + j]) for j in range(vec)]


@pytest.mark.parametrize("shape", [(4, 64, 2), (8, 64, 1), (2, 64, 3)])
def test_a_three_d_index_grid_exports_and_interprets(shape):
  x = jnp.arange(np.prod(shape), dtype=jnp.int32).reshape(shape) % 7
  got = np.asarray(grid3(x, interpret=True))
  np.testing.assert_array_equal(got, _grid3_want(shape) + np.asarray(x))
  _export(grid3, S(shape, jnp.int32))
  # registers of (4, 64, 2) and (8, 64, 1) int32 hold 4 elements crossing rows: their indices
  # are built element by element (Mosaic's iota inserts into an undefined vector instead)
  assert ("vector.from_elements" in grid3.mlir(S(shape, jnp.int32))) == (shape[-1] % 4 != 0 and shape[-1] != 3)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(4, 64, 2), (8, 64, 1), (2, 64, 3), (16, 8, 8), (4, 32, 24)])
def test_gpu_three_d_index_grid_matches_numpy(shape):
  x = jnp.zeros(shape, jnp.int32)
  np.testing.assert_array_equal(np.asarray(grid3(x)), _grid3_want(shape))


@pytest.mark.gpu
@pytest.mark.parametrize("w", [1, 2, 3, 4])
def test_gpu_row_masked_narrow_tile_flattens_as_numpy(w):
  x = jnp.arange(300 * w, dtype=jnp.int32).reshape(300, w)
  np.testing.assert_array_equal(np.asarray(masked_flatten(x, R=256)), np.asarray(x).reshape(-1))


# ---------------------------------------------------------------- row masks of tiles narrower than a warp
@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p: (ml.cdiv(p.shape[0], 128),))
def shift_points(p, out):                       # (n, 3) xyz points, 128 a program, the last partial
  i = ml.program_id(0)
  r = i * 128 + ml.arange(128)
  xyz = p.at[ml.ds(i * 128, 128), :].load(mask=r[:, None] < p.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128), :].store(xyz * 2.0 + 1.0, mask=r[:, None] < p.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def narrow_grid(x, out):
  m, n = x.shape
  g = ml.arange(m)[:, None] * n + ml.arange(n)[None, :]
  out[...] = ml.where(x[...] > 0, g, -g)


@mg.mgpu_kernel(out_shape=lambda p: S(p.shape[:1], p.dtype), grid=lambda p: (ml.cdiv(p.shape[0], 128),))
def norms(p, out):
  i = ml.program_id(0)
  r = i * 128 + ml.arange(128)
  xyz = p.at[ml.ds(i * 128, 128), :].load(mask=r[:, None] < p.shape[0], other=0.0)
  out.at[ml.ds(i * 128, 128)].store(ml.sqrt(ml.sum(xyz * xyz, axis=1)), mask=r < p.shape[0])


@pytest.mark.parametrize("w", [1, 2, 3, 8, 24])
def test_a_row_masked_tile_narrower_than_a_warp_compiles_and_interprets(w):
  """It was MG204 ("needs columns a multiple of 32"): the mask rows[:, None] < n, a broadcast, asked
  for the row-wise layout; it is now computed at the tile's shape, as for reshaped tiles."""
  p = jnp.asarray(np.random.default_rng(w).standard_normal((300, w)), jnp.float32)
  np.testing.assert_allclose(np.asarray(shift_points(p, interpret=True)), np.asarray(p) * 2 + 1, rtol=1e-6)
  _export(shift_points, S(p.shape, p.dtype))


@pytest.mark.parametrize("shape", [(128, 3), (128, 2), (64, 24), (256, 1)])
def test_an_index_grid_of_a_narrow_tile_compiles_and_interprets(shape):
  x = jnp.asarray(np.random.default_rng(0).standard_normal(shape), jnp.float32)
  g = np.arange(np.prod(shape)).reshape(shape)
  np.testing.assert_array_equal(np.asarray(narrow_grid(x, interpret=True)), np.where(np.asarray(x) > 0, g, -g))
  _export(narrow_grid, S(shape, jnp.float32))


def test_point_norms_of_3_columns_compile_and_interpret():
  """Was MG204; a (128, 3) tile now holds a row a thread now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py."""
  p = jnp.asarray(np.random.default_rng(1).standard_normal((300, 3)), jnp.float32)
  np.testing.assert_allclose(np.asarray(norms(p, interpret=True)), np.linalg.norm(np.asarray(p), axis=1), rtol=1e-6)
  _export(norms, S((300, 3), jnp.float32))


@pytest.mark.gpu
@pytest.mark.parametrize("w", [1, 2, 3, 8, 24])
def test_gpu_row_masked_narrow_tile_matches_numpy(w):
  p = jnp.asarray(np.random.default_rng(w).standard_normal((300, w)), jnp.float32)
  np.testing.assert_allclose(np.asarray(shift_points(p)), np.asarray(p) * 2 + 1, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(128, 3), (128, 2), (64, 24), (256, 1)])
def test_gpu_narrow_index_grid_matches_numpy(shape):
  x = jnp.asarray(np.random.default_rng(0).standard_normal(shape), jnp.float32)
  g = np.arange(np.prod(shape)).reshape(shape)
  np.testing.assert_array_equal(np.asarray(narrow_grid(x)), np.where(np.asarray(x) > 0, g, -g))


@pytest.mark.gpu
@pytest.mark.parametrize("w", [1, 2, 4])   # (64, 3) is 192 elements: no register layout holds it (MG204)
def test_gpu_gather_by_a_narrow_broadcast_index_grid_matches_numpy(w):
  from test_probe24b import take_top2_flat
  p = jnp.arange(64 * 32, dtype=jnp.float32) * 0.5
  ids = jnp.asarray(np.random.default_rng(w).integers(0, 32, (64, w)), jnp.int32)
  want = np.asarray(p)[np.arange(64)[:, None] * 32 + np.asarray(ids)]
  np.testing.assert_array_equal(np.asarray(take_top2_flat(p, ids)), want)


# ---------------------------------------------------------------- reductions over a short axis of a 3-D tensor
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), jnp.float32))
def pair_sums(x, out):
  out[...] = ml.sum(x[...].reshape(x.shape[0], x.shape[1] // 2, 2), axis=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), jnp.float32))
def pair_sums_as_hinted(x, out):
  v = x[...].reshape(x.shape[0], x.shape[1] // 2, 2)
  out[...] = v[:, :, 0] + v[:, :, 1]


@mg.mgpu_kernel(out_shape=lambda x: S((64, 1, 4), jnp.float32))
def max_of_halves(x, out):
  v = x[...].reshape(64, 2, 4)
  out[...] = ml.max(v, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((64, 1, 4), jnp.float32))
def max_of_halves_as_hinted(x, out):
  v = x[...].reshape(64, 2, 4)
  out[...] = max(v[:, 0, :], v[:, 1, :])[:, None, :]


def test_a_reduction_over_a_short_axis_of_a_3d_tensor_is_hinted_as_slices_that_work():
  """The hint was to read the tensor 2-D, (m * n, 2), whose reduction along its 2 columns is MG204
  again (columns not a multiple of 32; of rows too few for narrow rows, 96 here)."""
  # ((6, 32) was this error, hinting the slices below; the padded trace of odd reads computes it since session 36)
  x6 = np.random.default_rng(2).standard_normal((6, 32)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(pair_sums(x6, interpret=True)), x6.reshape(6, 16, 2).sum(2), rtol=1e-6)
  x = jnp.asarray(np.random.default_rng(3).standard_normal((128, 64)), jnp.float32)
  np.testing.assert_allclose(np.asarray(pair_sums_as_hinted(x, interpret=True)),
                             np.asarray(x).reshape(128, 32, 2).sum(2), rtol=1e-6)
  _export(pair_sums_as_hinted, S(x.shape, x.dtype))
  # (of 128 rows the (4096, 2) tile of narrow rows reduces: probe 38i)
  np.testing.assert_allclose(np.asarray(pair_sums(x, interpret=True)), np.asarray(x).reshape(128, 32, 2).sum(2),
                             rtol=1e-6)
  y = x[:64, :8]
  np.testing.assert_array_equal(np.asarray(max_of_halves_as_hinted(y, interpret=True)),
                                np.asarray(y).reshape(64, 2, 4).max(1, keepdims=True))
  _export(max_of_halves_as_hinted, S(y.shape, y.dtype))
  # a middle axis reduces as the scan along it from the end, read at its first position (probe 38j)
  np.testing.assert_array_equal(np.asarray(max_of_halves(y, interpret=True)),
                                np.asarray(y).reshape(64, 2, 4).max(1, keepdims=True))
  _export(max_of_halves, S(y.shape, y.dtype))


# ---------------------------------------------------------------- integer -> float8 tensors
@mg.mgpu_kernel(out_shape=lambda x, *, to: S(x.shape, to))
def to_float8(x, out, *, to: ml.constexpr):
  out[...] = x[...].astype(to)


@pytest.mark.parametrize("src", [jnp.int16, jnp.int32, jnp.uint32])
@pytest.mark.parametrize("to", [jnp.float8_e4m3fn, jnp.float8_e5m2])
def test_an_integer_tensor_casts_to_float8_once_rounded(src, to):
  """It was MG106 ("converts int32 to 8-bit floats only through float32") while jnp casts it; the
  lowering bridges through float32, exact over float8's range (past it NaN or inf, as jnp: probe 50e)."""
  vals = np.array([0, 1, 3, 17, 100, 447, 449, 464, 465, 1000, 30000, 57344, 61440, 123457, 5, 9] * 8)
  vals = np.clip(vals, 0, np.iinfo(src).max) * (1 if src == jnp.uint32 else np.resize([1, -1], vals.size))
  x = jnp.asarray(vals.astype(src)).reshape(128, 1)
  want = np.asarray(x.astype(to))
  np.testing.assert_array_equal(np.asarray(to_float8(x, interpret=True, to=to)).astype(np.float32),
                                want.astype(np.float32))
  _export(to_float8, S(x.shape, x.dtype), to=to)


@pytest.mark.gpu
@pytest.mark.parametrize("src", [jnp.int16, jnp.int32, jnp.uint32])
@pytest.mark.parametrize("to", [jnp.float8_e4m3fn, jnp.float8_e5m2])
def test_gpu_integer_to_float8_matches_interpret(src, to):
  vals = np.arange(-600, 680, 10) * (1 if src != jnp.uint32 else -1) % (2 ** 15)
  x = jnp.asarray(vals.astype(src)).reshape(128, 1)
  np.testing.assert_array_equal(np.asarray(to_float8(x, to=to)).astype(np.float32),
                                np.asarray(to_float8(x, interpret=True, to=to)).astype(np.float32))


# ---------------------------------------------------------------- a row of a tile whose rows are not a multiple of 8
@mg.mgpu_kernel(out_shape=lambda x, *, j: S((x.shape[1],), x.dtype))
def row_of_tile(x, out, *, j: ml.constexpr):
  out[...] = x[...][j]


@mg.mgpu_kernel(out_shape=lambda x, *, j: S((x.shape[1],), x.dtype))
def row_of_tile_scaled(x, out, *, j: ml.constexpr):
  out[...] = x[...][j] * 2


@mg.mgpu_kernel(out_shape=lambda x, *, j: S((x.shape[1],), x.dtype))
def row_of_tile_as_hinted(x, out, *, j: ml.constexpr):
  t = x.at[:, ml.ds(0, 104)].load(mask=ml.arange(104)[None, :] < 100, other=0)
  out.at[ml.ds(0, 104)].store(t[j], mask=ml.arange(104) < 100)


def test_a_row_of_100_elements_is_hinted_a_wider_masked_tile():
  """The hint was to slice v[:104], but the row has only 100 elements: no slice of it is longer. (Since probe 46a a
  row stored whole is copied in pieces from its SMEM scratch; since probe 53 a row computed on is read padded too,
  so the kernel the hint was for computes; the hinted form stays right.)"""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((128, 100)), jnp.float32)
  np.testing.assert_array_equal(np.asarray(row_of_tile_scaled(x, interpret=True, j=5)), np.asarray(x)[5] * 2)
  _export(row_of_tile_scaled, S(x.shape, x.dtype), j=5)
  x = jnp.asarray(np.random.default_rng(0).standard_normal((128, 100)), jnp.float32)
  np.testing.assert_array_equal(np.asarray(row_of_tile_as_hinted(x, interpret=True, j=5)), np.asarray(x)[5])
  np.testing.assert_array_equal(np.asarray(row_of_tile(x, interpret=True, j=5)), np.asarray(x)[5])
  _export(row_of_tile_as_hinted, S(x.shape, x.dtype), j=5)
