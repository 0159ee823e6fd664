"""Probe 57g (point clouds, 3-D and rendering: farthest point sampling, kNN, ball query, voxelisation, trilinear
interpolation, NeRF volume rendering, Gaussian splatting's compositing, grid_sample, marching cubes' tables, chamfer
distance). What was refused and is computed now: (1) pairwise differences of two small point sets held as (m, 3)
tiles, `a[:, None, :] - b[None, :, :]` reduced over the coordinates, where a (64, 3) tile (192 elements) is no register
tensor: a padded trace (LeadPads) grows such windows along their rows to a multiple of 128 elements; where the
grown (m, n, 3) tile does not fit, MG204 at the read says to take the coordinates a column at a time. (2) A `for`
over a static range whose body makes a scalar it carries a tensor (`acc = 0.0`, then `acc = acc + w * g[idx]` over
a trilinear interpolation's 8 corners; MG005): unrolled, as Python runs it. (3) `ml.where` / `jnp.where` of a Python
bool (`ml.where(dx == 1, fx, 1 - fx)` of an unrolled corner; MG003): a constant condition, as jnp and tl.where take
it. (4) jax.scipy.ndimage.map_coordinates (orders 0 and 1, jax's five modes; MG003). (5) Interpret mode's race check
took two programs' plain scatters of the same value to one place (an occupancy grid's `occ[cell] = 1`) as a race
(MG951); the GPU keeps that value whichever lands last. (6) Silently wrong: the index of a `for` over a static range
(and lax.fori_loop's) was a strong int32, where Python's int (and jax's ~int32 counter) is weak: `v_u8 + i * 100`
computed in int32 where jnp wraps in uint8; a uint32 spatial hash's `p0 + ((c >> k) & 1)` was MG104. (7) jnp.cross
(MG003)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.scipy.ndimage import map_coordinates

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _pairwise(a, b):
  return ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)


# ---------------------------------------------------------------- (1) (m, 3) point tiles broadcast pairwise
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def pairwise_norm(a, b, o):
  o[...] = jnp.linalg.norm(a[...][:, None, :] - b[...][None, :, :], axis=-1)


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0],), F32), S((a.shape[0],), jnp.int32)))
def nearest_of_few(a, b, dist, idx):
  d = jnp.sum((a[...][:, None, :] - b[...][None, :, :]) ** 2, axis=-1)
  dist[...] = jnp.min(d, axis=1)
  idx[...] = jnp.argmin(d, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0],), F32), S((a.shape[0],), jnp.int32)),
                grid=lambda a, b: (a.shape[0] // 64,))
def nearest_tiled(a, b, dist, idx):
  i = ml.program_id(0) * 64
  aa = a[ml.ds(i, 64), :]
  d = jnp.sum((aa[:, None, :] - b[...][None, :, :]) ** 2, axis=-1)
  dist[ml.ds(i, 64)] = jnp.min(d, axis=1)
  idx[ml.ds(i, 64)] = jnp.argmin(d, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0],), F32), S((a.shape[0],), jnp.int32)),
                grid=lambda a, b: (a.shape[0] // 64,))
def nearest_by_columns(a, b, dist, idx):          # nearest_tiled's hint followed
  i = ml.program_id(0) * 64
  d = sum((a[ml.ds(i, 64), j][:, None] - b[:, j][None, :]) ** 2 for j in range(3))
  dist[ml.ds(i, 64)] = jnp.min(d, axis=1)
  idx[ml.ds(i, 64)] = jnp.argmin(d, axis=1)


def test_small_point_tiles_broadcast_pairwise():
  a, b = rnd((64, 3), 0), rnd((64, 3), 1)
  np.testing.assert_allclose(np.asarray(pairwise_norm(a, b, interpret=True)), np.sqrt(_pairwise(a, b)),
                             rtol=1e-5, atol=1e-5)
  export(pairwise_norm, a, b)
  a, b = rnd((64, 3), 2), rnd((128, 3), 3)
  dist, idx = nearest_of_few(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(dist), _pairwise(a, b).min(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(idx), _pairwise(a, b).argmin(1))
  export(nearest_of_few, a, b)


def test_a_pairwise_tile_too_large_hints_the_columns():
  e = expect(nearest_tiled, [S((128, 3), F32), S((256, 3), F32)], mg.LayoutError, "a[ml.ds(i, 64), :]",
             "aa has shape (64, 3): register tensors need a multiple of 128 elements (one per thread of a warpgroup)")
  assert e.hint.startswith("take it a column at a time, a[ml.ds(i, 64), j] for j in range(3) (a (64,) vector each:"
                           " pairwise distances are sum((a[:, j][:, None] - b[:, j][None, :]) ** 2 for j in"
                           " range(3)), with no (m, n, 3) tile), or work on a larger tile"), e.hint
  a, b = rnd((128, 3), 4), rnd((256, 3), 5)
  dist, idx = nearest_by_columns(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(dist), _pairwise(a, b).min(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(idx), _pairwise(a, b).argmin(1))
  export(nearest_by_columns, a, b)


# ---------------------------------------------------------------- (2), (3) a scalar carry made a tensor
@mg.mgpu_kernel(out_shape=lambda g, p: S((p.shape[0],), F32), grid=lambda g, p: (p.shape[0] // 128,))
def trilinear_flat(g, p, o, D: ml.constexpr = 8, H: ml.constexpr = 16, W: ml.constexpr = 32):
  i = ml.program_id(0) * 128
  x = p[ml.ds(i, 128), 0] * (W - 1)
  y = p[ml.ds(i, 128), 1] * (H - 1)
  z = p[ml.ds(i, 128), 2] * (D - 1)
  x0, y0, z0 = x.astype(jnp.int32), y.astype(jnp.int32), z.astype(jnp.int32)
  fx, fy, fz = x - x0, y - y0, z - z0
  acc = 0.0
  for dz in range(2):
    for dy in range(2):
      for dx in range(2):
        idx = (ml.minimum(z0 + dz, D - 1) * H + ml.minimum(y0 + dy, H - 1)) * W + ml.minimum(x0 + dx, W - 1)
        w = ml.where(dx == 1, fx, 1 - fx) * ml.where(dy == 1, fy, 1 - fy) * jnp.where(dz == 1, fz, 1 - fz)
        acc = acc + w * g[idx]
  o[ml.ds(i, 128)] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def runtime_trips(x, n, o):
  acc = 0.0
  for t in range(n[0]):
    acc = acc + x[t, :]
  o[...] = acc


def _trilinear(g, p):
  D, H, W = g.shape
  x, y, z = p[:, 0] * (W - 1), p[:, 1] * (H - 1), p[:, 2] * (D - 1)
  x0, y0, z0 = np.floor(x).astype(int), np.floor(y).astype(int), np.floor(z).astype(int)
  fx, fy, fz = x - x0, y - y0, z - z0
  out = 0
  for dz in (0, 1):
    for dy in (0, 1):
      for dx in (0, 1):
        w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy) * (fz if dz else 1 - fz)
        out = out + w * g[np.minimum(z0 + dz, D - 1), np.minimum(y0 + dy, H - 1), np.minimum(x0 + dx, W - 1)]
  return out


def test_static_loop_making_a_scalar_carry_a_tensor_runs_unrolled():
  g = rnd((8, 16, 32), 6)
  p = np.random.default_rng(7).uniform(0, 1, (256, 3)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(trilinear_flat(g.reshape(-1), p, interpret=True)), _trilinear(g, p),
                             rtol=1e-5, atol=1e-5)
  export(trilinear_flat, g.reshape(-1), p)


def test_runtime_trips_keep_the_carry_error():
  expect(runtime_trips, [S((8, 128), F32), S((1,), jnp.int32)], mg.LoopCarryTypeError, "acc = acc + x",
         "acc enters the loop as a float32 scalar but an iteration makes it a float32 tensor of shape (128,)",
         hint="start it as a tensor of that shape before the loop: acc = ml.zeros((128,), jnp.float32)")


@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((), F32)))
def constant_conditions(x, o1, o2, o3, *, flag: ml.constexpr = True):
  v = x[...]
  o1[...] = ml.where(flag, v, -v)
  o2[...] = jnp.where(not flag, v, 2)
  o3[...] = ml.where(flag, 1.5, 2.5)


def test_where_of_a_python_bool_is_jnps():
  x = rnd((256,), 8)
  for flag in (True, False):
    got = constant_conditions(x, interpret=True, flag=flag)
    want = (jnp.where(flag, x, -x), jnp.where(not flag, x, 2), jnp.where(flag, 1.5, 2.5))
    for g, w in zip(got, want):
      assert g.dtype == w.dtype
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  export(constant_conditions, x, flag=False)


# ---------------------------------------------------------------- (4) jax.scipy.ndimage.map_coordinates
@mg.mgpu_kernel(out_shape=lambda g, c: S((c.shape[1],), g.dtype))
def sample3(g, c, o, order: ml.constexpr = 1, mode: ml.constexpr = "constant"):
  o[...] = map_coordinates(g[...], [c[0, :], c[1, :], c[2, :]], order=order, mode=mode, cval=0.5)


@mg.mgpu_kernel(out_shape=lambda g, c: S((c.shape[1],), g.dtype))
def sample2(g, c, o, order: ml.constexpr = 1, mode: ml.constexpr = "constant"):
  o[...] = jax.scipy.ndimage.map_coordinates(g[...], c[...], order, mode=mode)


@mg.mgpu_kernel(out_shape=lambda g, c: S((c.shape[1],), g.dtype))
def sample_cubic(g, c, o):
  o[...] = map_coordinates(g[...], [c[0, :], c[1, :]], order=3)


@pytest.mark.parametrize("mode", ["constant", "nearest", "wrap", "mirror", "reflect"])
@pytest.mark.parametrize("order", [0, 1])
def test_map_coordinates_is_jaxs(order, mode):
  rng = np.random.default_rng(9)
  g3 = rng.standard_normal((4, 8, 32)).astype(np.float32)
  c3 = np.stack([rng.uniform(-2, n + 1, 256) for n in g3.shape]).astype(np.float32)
  c3[:, :6] = np.array([[0.5, 1.5, -0.5, 2.5, 3.0, -1.0]] * 3, np.float32)     # halves, both rounding ways
  want = map_coordinates(jnp.asarray(g3), list(jnp.asarray(c3)), order=order, mode=mode, cval=0.5)
  np.testing.assert_allclose(np.asarray(sample3(g3, c3, interpret=True, order=order, mode=mode)), np.asarray(want),
                             rtol=1e-6, atol=1e-6)
  gi = rng.integers(-100, 100, (16, 32)).astype(np.int32)        # an integer grid: rounded, as jax's
  c2 = np.stack([rng.uniform(-3, n + 2, 128) for n in gi.shape]).astype(np.float32)
  got = sample2(gi, c2, interpret=True, order=order, mode=mode)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(np.asarray(got), np.asarray(map_coordinates(gi, c2, order=order, mode=mode)))


def test_map_coordinates_builds_and_says_what_it_takes():
  export(sample3, rnd((4, 8, 32), 10), rnd((3, 256), 11), mode="reflect")
  expect(sample_cubic, [S((16, 32), F32), S((2, 128), F32)], mg.KernelTypeError, "map_coordinates(",
         "map_coordinates cannot take a register tensor inside a kernel",
         hint="jax.scipy.ndimage.map_coordinates computes in a kernel as jax does for order=0 or 1 and mode"
              " 'constant', 'nearest', 'wrap', 'mirror' or 'reflect' (jax's own), of a 1- to 3-D register tensor"
              " (g[...]) at a list of float coordinate tensors of one shape and its dtype, cval a number")


# ---------------------------------------------------------------- (5) scatters of one value from many programs
G = 8


@mg.mgpu_kernel(out_shape=lambda p: S((G ** 3,), jnp.int32), grid=lambda p: (p.shape[1] // 128,))
def occupancy(p, occ):
  r = ml.ds(ml.program_id(0) * 128, 128)
  ix, iy, iz = [jnp.floor(p[c, r] * G).astype(jnp.int32) for c in range(3)]
  occ[(iz * G + iy) * G + ix] = ml.full((128,), 1, jnp.int32)


@mg.mgpu_kernel(out_shape=lambda p: S((G ** 3,), jnp.int32), grid=lambda p: (p.shape[1] // 128,))
def last_program_id(p, occ):
  r = ml.ds(ml.program_id(0) * 128, 128)
  ix, iy, iz = [jnp.floor(p[c, r] * G).astype(jnp.int32) for c in range(3)]
  occ[(iz * G + iy) * G + ix] = ml.full((128,), ml.program_id(0), jnp.int32)


def test_scatters_of_one_value_from_many_programs_are_no_race():
  p = np.random.default_rng(12).uniform(-0.25, 1.25, (3, 512)).astype(np.float32)
  i = np.floor(p * G).astype(np.int32)
  want = jnp.zeros(G ** 3, jnp.int32).at[(i[2] * G + i[1]) * G + i[0]].set(1)     # (past the grid: dropped)
  np.testing.assert_array_equal(np.asarray(occupancy(p, interpret=True)), np.asarray(want))
  export(occupancy, p)
  with pytest.raises(mg.RaceError) as info:       # different values still race
    last_program_id(p, interpret=True)
  assert "both access occ[" in info.value.message


# ---------------------------------------------------------------- (6) a static range's index is a Python int
@mg.mgpu_kernel(out_shape=lambda x: S((4,) + x.shape, jnp.int32))
def narrow_plus_index(x, o):
  v = x[...]
  for i in range(4):
    o[i] = ((v + i * 100) > 250).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S((4,) + x.shape, jnp.int32))
def narrow_plus_fori_index(x, o):
  v = x[...]

  def body(i, c):
    o[i] = ((v + i * 100) > 250).astype(jnp.int32)
    return c
  jax.lax.fori_loop(0, 4, body, 0)


@mg.mgpu_kernel(out_shape=lambda x, t: S((x.shape[0],), jnp.uint32))
def spatial_hash(x, t, o):
  p0 = [jnp.floor(x[:, k] * 16).astype(jnp.uint32) for k in range(3)]
  h = jnp.zeros(x.shape[:1], jnp.uint32)
  for c in range(8):                     # a run-time loop: (c >> k) & 1 is a weak int, as Python's
    idx = jnp.zeros(x.shape[:1], jnp.uint32)
    for k in range(3):
      idx = idx ^ ((p0[k] + ((c >> k) & 1)) * jnp.uint32((1, 2654435761, 805459861)[k]))
    h = h + idx % t.shape[0]
  o[...] = h


def test_a_static_ranges_index_is_weakly_typed():
  """`v + i * 100` of uint8 `v` and a loop index computed in int32 (no wrap) where jnp, whose Python int (and
  lax.fori_loop's ~int32 counter) is weak, wraps in uint8: silently different numbers. uint32 + the index was MG104."""
  x = np.arange(256, dtype=np.uint8).reshape(2, 128)
  want = np.stack([np.asarray(((jnp.asarray(x) + i * 100) > 250).astype(jnp.int32)) for i in range(4)])
  for k in (narrow_plus_index, narrow_plus_fori_index):
    np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), want)
    export(k, x)
  pts = np.random.default_rng(14).uniform(0, 1, (128, 3)).astype(np.float32)
  t = np.zeros((4096,), np.float32)
  p0 = [jnp.floor(jnp.asarray(pts[:, k]) * 16).astype(jnp.uint32) for k in range(3)]
  h = jnp.zeros(128, jnp.uint32)
  for c in range(8):
    idx = jnp.zeros(128, jnp.uint32)
    for k in range(3):
      idx = idx ^ ((p0[k] + ((c >> k) & 1)) * jnp.uint32((1, 2654435761, 805459861)[k]))
    h = h + idx % 4096
  np.testing.assert_array_equal(np.asarray(spatial_hash(pts, t, interpret=True)), np.asarray(h))
  export(spatial_hash, pts, t)


# ---------------------------------------------------------------- (7) jnp.cross
@mg.mgpu_kernel(out_shape=lambda a, b: (a, S((3, a.shape[0]), a.dtype), S((a.shape[0],), a.dtype)),
                grid=lambda a, b: (a.shape[0] // 128,))
def normals(a, b, rows, cols, z):
  r = ml.ds(ml.program_id(0) * 128, 128)
  rows[r, :] = jnp.cross(a[r, :], b[r, :])
  cols[:, r] = jnp.cross(a[r, :].T, b[r, :].T, axis=0)
  z[r] = jnp.cross(a[r, 0:2], b[r, 0:2])


def test_cross_products_are_jnps():
  a, b = rnd((256, 3), 15), rnd((256, 3), 16)
  rows, cols, z = normals(a, b, interpret=True)
  want = jnp.cross(a, b)
  np.testing.assert_allclose(np.asarray(rows), np.asarray(want), rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(cols), np.asarray(want).T, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(z), np.asarray(jnp.cross(a[:, :2], b[:, :2])), rtol=1e-6, atol=1e-6)
  export(normals, a, b)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_probe_57g_kernels_on_the_gpu():
  a, b = rnd((64, 3), 0), rnd((64, 3), 1)
  np.testing.assert_allclose(np.asarray(jax.jit(pairwise_norm)(a, b)), np.sqrt(_pairwise(a, b)), rtol=1e-4, atol=1e-4)
  g = rnd((8, 16, 32), 6)
  p = np.random.default_rng(7).uniform(0, 1, (256, 3)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(jax.jit(trilinear_flat)(g.reshape(-1), p)), _trilinear(g, p),
                             rtol=1e-4, atol=1e-4)
  c3 = np.stack([np.random.default_rng(13).uniform(-2, n + 1, 256) for n in g.shape]).astype(np.float32)
  for mode in ("constant", "reflect"):
    want = map_coordinates(jnp.asarray(g), list(jnp.asarray(c3)), order=1, mode=mode, cval=0.5)
    got = jax.jit(lambda g, c: sample3(g, c, mode=mode))(g, c3)
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
  x = rnd((256,), 8)
  got = jax.jit(lambda x: constant_conditions(x, flag=False))(x)
  np.testing.assert_array_equal(np.asarray(got[0]), -x)
  pts = np.random.default_rng(12).uniform(-0.25, 1.25, (3, 512)).astype(np.float32)
  i = np.floor(pts * G).astype(np.int32)
  want = jnp.zeros(G ** 3, jnp.int32).at[(i[2] * G + i[1]) * G + i[0]].set(1)
  np.testing.assert_array_equal(np.asarray(jax.jit(occupancy)(pts)), np.asarray(want))
