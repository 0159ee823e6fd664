"""Probe 36f (reductions, scans and shape ops on 2-D and 3-D tensors with tails, across warpgroups):
row and column statistics of masked loads at block=128, 256 and 384 against jnp, scans along every
axis, and jnp.split / ml.split / v.split of register tensors, whose hints now write the windows
the parts are."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _blocks(x, r, pad):
  """x's rows in blocks of r, the last one padded with `pad`: (blocks, r, ...)."""
  nb = -(-x.shape[0] // r)
  tail = np.full((nb * r - x.shape[0], *x.shape[1:]), pad, x.dtype)
  return np.concatenate([np.asarray(x), tail]).reshape(nb, r, *x.shape[1:])


# ---------------------------------------------------------------- split of a register tensor
ONE = lambda x: (1,)
ROWS = lambda x: S((x.shape[0],), F32)


@mg.mgpu_kernel(out_shape=ROWS, grid=ONE)
def jnp_split_halves(x, o):
  a, b = jnp.split(x[...], 2, axis=1)
  o[...] = ml.sum(a, axis=1) - ml.sum(b, axis=1)


@mg.mgpu_kernel(out_shape=ROWS, grid=ONE)
def ml_split_at(x, o):
  a, b, c = ml.split(x[...], [32, 64], axis=-1)
  o[...] = ml.sum(a, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=ONE)
def ml_split_rows(x, o):
  v = x[...]
  a, b = ml.split(v, 2)
  o[...] = ml.sum(a, axis=0)


@mg.mgpu_kernel(out_shape=ROWS, grid=ONE)
def numpy_method_split(x, o):
  v = x[...]
  a, b = v.split(2, axis=1)
  o[...] = ml.max(a, axis=1)


@mg.mgpu_kernel(out_shape=ROWS, grid=ONE)
def torch_method_split(x, o):
  v = x[...]
  a, b = v.split(128, dim=1)
  o[...] = ml.max(a, axis=1)


@mg.mgpu_kernel(out_shape=ROWS, grid=ONE)
def torch_method_chunk(x, o):
  v = x[...]
  a, b = v.chunk(2, dim=1)
  o[...] = ml.max(a, axis=1)


def test_a_split_of_a_register_tensor_hints_the_windows_its_parts_are():
  """The hints named Triton's split of a last axis of 2 (a[..., 0], a[..., 1]) whatever the call:
  jnp.split's sections or indices along an axis were not what they wrote."""
  spec = [S((64, 256), F32)]
  x = np.random.default_rng(2).standard_normal((64, 256)).astype(np.float32)     # (ml.split since probe 46k)
  np.testing.assert_allclose(jnp_split_halves(x, interpret=True), x[:, :128].sum(1) - x[:, 128:].sum(1),
                             rtol=1e-4, atol=1e-4)              # (jnp.split is ml.split since probe 49a: MG003 before)
  np.testing.assert_allclose(ml_split_at(x, interpret=True), x[:, :32].sum(1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(ml_split_rows(x, interpret=True), x[:32].sum(0), rtol=1e-5, atol=1e-5)
  expect(numpy_method_split, spec, mg.KernelTypeError, "v.split", "a register tensor has no attribute 'split'",
         hint="the parts are windows of v along axis 1: v[:, :v.shape[1] // 2], v[:, v.shape[1] // 2:]")
  expect(torch_method_split, spec, mg.KernelTypeError, "v.split", "a register tensor has no attribute 'split'",
         hint="the parts are windows of v along axis 1: v[:, :128], v[:, 128:256], ... (torch's .split)")
  expect(torch_method_chunk, spec, mg.KernelTypeError, "v.chunk", "a register tensor has no attribute 'chunk'",
         hint="the parts are windows of v along axis 1: v[:, :v.shape[1] // 2], v[:, v.shape[1] // 2:] (torch's .chunk)")


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[1],), F32)), grid=ONE)
def split_followed(x, d, f, g):
  v = x[...]
  a, b = v[:, :128], v[:, 128:]                       # jnp.split(v, 2, axis=1)
  d[...] = ml.sum(a, axis=1) - ml.sum(b, axis=1)
  p, q, r = v[..., :32], v[..., 32:64], v[..., 64:]   # ml.split(v, [32, 64], axis=-1)
  f[...] = ml.sum(p, axis=1) + 2 * ml.sum(q, axis=1) + 3 * ml.sum(r, axis=1)
  h, k = v[:v.shape[0] // 2], v[v.shape[0] // 2:]      # ml.split(v, 2)
  g[...] = ml.sum(h, axis=0) - ml.max(k, axis=0)


def test_the_split_hints_followed_compute_jnp_split():
  x = np.random.default_rng(0).standard_normal((64, 256)).astype(np.float32)
  d, f, g = split_followed(jnp.asarray(x), interpret=True)
  a, b = np.split(x, 2, axis=1)
  np.testing.assert_allclose(d, a.sum(1) - b.sum(1), rtol=1e-5, atol=1e-4)
  p, q, r = np.split(x, [32, 64], axis=-1)
  np.testing.assert_allclose(f, p.sum(1) + 2 * q.sum(1) + 3 * r.sum(1), rtol=1e-5, atol=1e-4)
  h, k = np.split(x, 2)
  np.testing.assert_allclose(g, h.sum(0) - k.max(0), rtol=1e-5, atol=1e-4)
  _export(split_followed, S(x.shape, F32))


# ---------------------------------------------------------------- row and column statistics with tails
def _stats_kernel(block):
  @mg.mgpu_kernel(out_shape=lambda x, *, R: (S((x.shape[0],), F32), S((x.shape[0],), I32), x,
                                              S((ml.cdiv(x.shape[0], R), x.shape[1]), F32),
                                              S((ml.cdiv(x.shape[0], R), x.shape[1]), I32)),
                  grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),), block=block)
  def stats(x, s, am, norm, cmin, camin, *, R: ml.constexpr):
    i = ml.program_id(0)
    ok = i * R + ml.arange(R) < x.shape[0]
    v = x.at[ml.ds(i * R, R), :].load(mask=ok[:, None], other=0.0)
    s.at[ml.ds(i * R, R)].store(ml.sum(v, axis=-1), mask=ok)
    w = x.at[ml.ds(i * R, R), :].load(mask=ok[:, None], other=float('-inf'))
    am.at[ml.ds(i * R, R)].store(ml.argmax(w, axis=1), mask=ok)
    d = v - ml.mean(v, axis=1)[:, None]
    norm.at[ml.ds(i * R, R), :].store(d / ml.sqrt(ml.sum(d ** 2, axis=1, keepdims=True) / v.shape[1] + 1e-5),
                                      mask=ok[:, None])
    u = x.at[ml.ds(i * R, R), :].load(mask=ok[:, None], other=float('inf'))
    cmin.at[i][...] = ml.min(u, axis=-2)
    camin.at[ml.ds(i, 1), :][...] = ml.argmin(u, axis=0, keepdims=True)
  return stats


STATS = {b: _stats_kernel(b) for b in (128, 256, 384)}
SHAPES = [(8, 64, 20), (96, 192, 150), (128, 64, 300), (256, 128, 300), (384, 128, 500)]


def _stats_reference(x, r):
  d = x - x.mean(1, keepdims=True)
  u = _blocks(x, r, np.inf)
  return (x.sum(1), np.argmax(x, 1), d / np.sqrt((d ** 2).mean(1, keepdims=True) + 1e-5), u.min(1),
          np.argmin(u, 1))


@pytest.mark.parametrize("block", [128, 256, 384])
@pytest.mark.parametrize("r,c,m", SHAPES)
def test_row_and_column_statistics_of_masked_tails_match_jnp(block, r, c, m):
  x = np.random.default_rng(r + c + m).standard_normal((m, c)).astype(np.float32)
  got = STATS[block](jnp.asarray(x), R=r, interpret=True)
  for g, w in zip(got, _stats_reference(x, r)):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-4, atol=1e-4)


def _scan_kernel(block):
  @mg.mgpu_kernel(out_shape=lambda x, *, R, axis: (x, x, S(x.shape, I32)),
                  grid=lambda x, *, R, axis: (ml.cdiv(x.shape[0], R),), block=block)
  def scans(x, cs, cm, cb, *, R: ml.constexpr, axis: ml.constexpr):
    i = ml.program_id(0)
    ok = i * R + ml.arange(R) < x.shape[0]
    v = x.at[ml.ds(i * R, R), :].load(mask=ok[:, None], other=0.0)
    cs.at[ml.ds(i * R, R), :].store(ml.cumsum(v, axis=axis, reverse=True), mask=ok[:, None])
    w = x.at[ml.ds(i * R, R), :].load(mask=ok[:, None], other=float('-inf'))
    cm.at[ml.ds(i * R, R), :].store(ml.cummax(w, axis=axis), mask=ok[:, None])
    cb.at[ml.ds(i * R, R), :].store(ml.cumsum(v > 0, axis=axis), mask=ok[:, None])
  return scans


SCANS = {b: _scan_kernel(b) for b in (128, 256, 384)}


def _scan_reference(x, r, axis):
  a = axis % 2 + 1
  m = x.shape[0]
  back = lambda b: b.reshape(-1, x.shape[1])[:m]
  v, w = _blocks(x, r, 0.0), _blocks(x, r, -np.inf)
  rev = np.flip(np.cumsum(np.flip(v, a), a), a)
  return back(rev), back(np.maximum.accumulate(w, a)), back(np.cumsum(v > 0, a, dtype=np.int32))


@pytest.mark.parametrize("block", [128, 256, 384])
@pytest.mark.parametrize("axis", [0, 1, -1, -2])
@pytest.mark.parametrize("r,c,m", [(16, 96, 40), (128, 64, 300), (384, 128, 500)])
def test_scans_of_masked_tails_along_every_axis_match_jnp(block, axis, r, c, m):
  x = np.random.default_rng(r + m).standard_normal((m, c)).astype(np.float32)
  got = SCANS[block](jnp.asarray(x), R=r, axis=axis, interpret=True)
  for g, w in zip(got, _scan_reference(x, r, axis)):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("block", [128, 256, 384])     # (one test a block: about 15 s each, spread over the workers)
def test_the_statistics_and_scans_build_for_cuda_at_every_block(block):
  _export(STATS[block], S((300, 128), F32), R=256)
  _export(SCANS[block], S((500, 128), F32), R=384, axis=0)


@pytest.mark.gpu
@pytest.mark.parametrize("block", [128, 256, 384])
def test_gpu_statistics_and_scans_across_warpgroups_match_interpret(block):
  """Warpgroup-local indices (argmax/argmin, arange masks), parts combined across warpgroups and
  tails: interpret mode runs no warpgroups, so only the GPU tells."""
  for r, c, m in SHAPES:
    x = jnp.asarray(np.random.default_rng(m).standard_normal((m, c)).astype(np.float32))
    for g, w in zip(STATS[block](x, R=r), STATS[block](x, R=r, interpret=True)):
      np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-5)
    for axis in (0, 1):
      for g, w in zip(SCANS[block](x, R=r, axis=axis), SCANS[block](x, R=r, axis=axis, interpret=True)):
        np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- argmax/argmin over an axis of a 3-D tensor
T3 = [S((2, 64, 128), F32)]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1]), I32), grid=ONE)
def argmax_last_3d(x, o):
  v = x[...]
  o[...] = ml.argmax(v, axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[2]), I32), grid=ONE)
def argmin_first_3d(x, o):
  v = x[...]
  o[...] = v.argmin(axis=0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[1]), I32), S((x.shape[1], x.shape[2]), I32)), grid=ONE)
def arg_3d_followed(x, o, p):
  v = x[...]
  o[...] = ml.argmax(v.reshape(128, 128), axis=1).reshape(2, 64)
  p[...] = ml.argmin(v.reshape(2, 8192), axis=0).reshape(64, 128)


def test_argmax_over_an_axis_of_a_3d_tensor_hints_the_2d_reshape_as_a_sum_does():
  """ml.sum(v, axis=-1) of a (2, 64, 128) tile hinted the 2-D reshape that reduces; ml.argmax (which
  reduces with keepdims inside) fell back to 'a register tile cannot be reshaped into one'. (Since probe
  38i the compiler takes a statistic kept over a 3-D tile's last or first axes itself: ml.argmax(v, axis=-1)
  of that tile compiles, as its hinted form does; the hint stays for results too short to hold, (2, 8).)"""
  # (probe 43a: the (2, 8) result computes; probe 44f: stored whole, a row of 8 at a time; it was MG204 at the store)
  y = np.random.default_rng(2).standard_normal((2, 8, 128)).astype(np.float32)
  np.testing.assert_array_equal(argmax_last_3d(jnp.asarray(y), interpret=True), np.argmax(y, -1))
  _export(argmax_last_3d, S(y.shape, F32))
  x = np.random.default_rng(1).standard_normal((2, 64, 128)).astype(np.float32)
  # probe 38g: keepdims reductions of 3-D tiles (which argmax makes inside) reduce their 2-D reshape too
  np.testing.assert_array_equal(argmax_last_3d(jnp.asarray(x), interpret=True), np.argmax(x, -1))
  np.testing.assert_array_equal(argmin_first_3d(jnp.asarray(x), interpret=True), np.argmin(x, 0))
  _export(argmax_last_3d, *T3)
  _export(argmin_first_3d, *T3)
  o, p = arg_3d_followed(jnp.asarray(x), interpret=True)
  np.testing.assert_array_equal(o, np.argmax(x, -1))
  np.testing.assert_array_equal(p, np.argmin(x, 0))
  _export(arg_3d_followed, *T3)
  np.testing.assert_array_equal(argmax_last_3d(jnp.asarray(x), interpret=True), np.argmax(x, -1))
  np.testing.assert_array_equal(argmin_first_3d(jnp.asarray(x), interpret=True), np.argmin(x, 0))
  _export(argmax_last_3d, *T3)
  _export(argmin_first_3d, *T3)


@pytest.mark.gpu
def test_gpu_the_3d_argmax_hint_followed_matches_interpret():
  x = jnp.asarray(np.random.default_rng(2).standard_normal((2, 64, 128)).astype(np.float32))
  for g, w in zip(arg_3d_followed(x), arg_3d_followed(x, interpret=True)):
    np.testing.assert_array_equal(g, w)
  np.testing.assert_array_equal(argmax_last_3d(x), np.argmax(np.asarray(x), -1))      # (probe 38i: compiled itself)
  np.testing.assert_array_equal(argmin_first_3d(x), np.argmin(np.asarray(x), 0))


# ---------------------------------------------------------------- a scan along the first or last axis of a 3-D tensor
@mg.mgpu_kernel(out_shape=lambda x: x, grid=ONE)
def cumsum_last_3d(x, o):
  o[...] = ml.cumsum(x[...], axis=2)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=ONE)
def cumsum_first_3d(x, o):
  v = x[...]
  o[...] = v.cumsum(axis=0, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=ONE)
def scan_3d_followed(x, o, p):
  v = x[...]
  o[...] = ml.cumsum(x[...].reshape(128, 128), axis=1).reshape(2, 64, 128)
  p[...] = ml.cumsum(v.reshape(2, 8192), axis=0, reverse=True).reshape(2, 64, 128)


def test_a_scan_along_the_first_or_last_axis_of_a_3d_tensor_is_the_2d_reshapes():
  """Once MG003 whose hint wrote the reshape in registers; the compiler now scans that reshape itself
  (probe 38j), so the kernel and the hint followed give the same values."""
  x = np.random.default_rng(3).standard_normal((2, 64, 128)).astype(np.float32)
  o, p = scan_3d_followed(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(o, np.cumsum(x, 2), rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(p, np.flip(np.cumsum(np.flip(x, 0), 0), 0), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(cumsum_last_3d(jnp.asarray(x), interpret=True), o)
  np.testing.assert_array_equal(cumsum_first_3d(jnp.asarray(x), interpret=True), p)
  _export(scan_3d_followed, *T3)
  _export(cumsum_last_3d, *T3)


@pytest.mark.gpu
def test_gpu_the_3d_scan_hints_followed_match_interpret():
  x = jnp.asarray(np.random.default_rng(4).standard_normal((2, 64, 128)).astype(np.float32))
  for g, w in zip(scan_3d_followed(x), scan_3d_followed(x, interpret=True)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5)
