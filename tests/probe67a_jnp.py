"""Probe 67a's corpus, part 4: stencils, pools, convs and resizes written with jnp / lax calls on register tiles
(reshape-and-reduce pools, jnp.pad and jnp.roll stencils, jnp.convolve, lax.reduce_window, jnp.bincount,
jax.image.resize, jnp.repeat, jnp.stack of shifted slices; tests/probe67a_kernels.py lists the cases)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from probe67a_convs import img_u8, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2, x.shape[2]), x.dtype), grid=(1,))
def pool_reshape(x, out):
  H, W, C = x.shape
  v = x[...]
  out[...] = v.reshape(H // 2, 2, W // 2, 2, C).max(axis=(1, 3))

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2, x.shape[2]), x.dtype), grid=(1,))
def avgpool_reshape(x, out):
  H, W, C = x.shape
  out[...] = jnp.mean(x[...].reshape(H // 2, 2, W // 2, 2, C), axis=(1, 3))

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def lap_pad(x, out):
  H, W = x.shape
  p = jnp.pad(x[...], 1)
  out[...] = p[0:H, 1:W + 1] + p[2:H + 2, 1:W + 1] + p[1:H + 1, 0:W] + p[1:H + 1, 2:W + 2] - 4 * x[...]

@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def lap_roll(x, out):
  v = x[...]
  H, W = x.shape
  r = ml.arange(H)[:, None]; c = ml.arange(W)[None, :]
  up = jnp.where(r > 0, jnp.roll(v, 1, 0), 0.0)
  dn = jnp.where(r < H - 1, jnp.roll(v, -1, 0), 0.0)
  lf = jnp.where(c > 0, jnp.roll(v, 1, 1), 0.0)
  rt = jnp.where(c < W - 1, jnp.roll(v, -1, 1), 0.0)
  out[...] = up + dn + lf + rt - 4 * v

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=(1,))
def sat_jnp(x, out):
  out[...] = jnp.cumsum(jnp.cumsum(x[...].astype(jnp.float32), axis=0), axis=1)

@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0] - w.shape[0] + 1,), F32), grid=(1,))
def convolve_in_kernel(x, w, out):
  out[...] = jnp.convolve(x[...], w[...], mode="valid")

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2, x.shape[1] // 2), F32), grid=(1,))
def reduce_window_in_kernel(x, out):
  out[...] = jax.lax.reduce_window(x[...], -jnp.inf, jax.lax.max, (2, 2), (2, 2), "VALID")

@mg.mgpu_kernel(out_shape=lambda x: S((256,), jnp.int32), grid=(1,))
def bincount_in_kernel(x, out):
  out[...] = jnp.bincount(x[...].astype(jnp.int32), length=256)

@mg.mgpu_kernel(out_shape=lambda x: S((2 * x.shape[0], 2 * x.shape[1]), F32), grid=(1,))
def image_resize_in_kernel(x, out):
  out[...] = jax.image.resize(x[...], out.shape, "nearest")

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * 2, x.shape[1] * 2), x.dtype), grid=(1,))
def upsample_repeat2(x, out):
  out[...] = jnp.repeat(jnp.repeat(x[...], 2, axis=0), 2, axis=1)

@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1] - 2 * (w.shape[0] - 1)), F32), grid=(1,))
def dilated_conv1d(x, w, out):
  L = out.shape[1]
  acc = ml.zeros(out.shape, jnp.float32)
  for k in range(w.shape[0]):
    acc += x[:, 2 * k:2 * k + L] * w[k]
  out[...] = acc

@mg.mgpu_kernel(out_shape=lambda st, x, w: (S(st.shape, st.dtype), S((st.shape[0],), F32)), grid=(1,))
def conv_state_update(st, x, w, new_st, y):
  """Mamba's decode step: state (D, 4) shifted left, x appended, y = sum(state * w)."""
  s = jnp.concatenate([st[:, 1:], x[...][:, None]], axis=1)
  new_st[...] = s
  y[...] = jnp.sum(s * w[...], axis=1)

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1] - 2), F32), grid=(1,))
def sobel_slices(x, out):
  v = x[...].astype(jnp.float32)
  H, W = out.shape
  gx = v[0:H, 2:W + 2] + 2 * v[1:H + 1, 2:W + 2] + v[2:H + 2, 2:W + 2] - v[0:H, 0:W] - 2 * v[1:H + 1, 0:W] - v[2:H + 2, 0:W]
  gy = v[2:H + 2, 0:W] + 2 * v[2:H + 2, 1:W + 1] + v[2:H + 2, 2:W + 2] - v[0:H, 0:W] - 2 * v[0:H, 1:W + 1] - v[0:H, 2:W + 2]
  out[...] = jnp.hypot(gx, gy)

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.uint8), grid=(1,))
def threshold_otsu_like(x, out):
  v = x[...].astype(jnp.float32)
  m = jnp.mean(v)
  out[...] = jnp.where(v > m, 255, 0).astype(jnp.uint8)

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=(1,))
def downsample_stride2(x, out):
  out[...] = x[:, ::2]

@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1] - w.shape[0] + 1), F32), grid=(1,))
def conv1d_valid_unfold_dot(x, w, out):
  """A 1-D conv as an unfolded (L, K) tile times the taps: jnp.stack of shifted slices, then a matvec by sum."""
  L = out.shape[1]
  K = w.shape[0]
  v = x[...]
  cols = jnp.stack([v[:, k:k + L] for k in range(K)], axis=-1)
  out[...] = jnp.sum(cols * w[...], axis=-1)

def ref_lap(u):
  p = np.pad(np.asarray(u, np.float32), 1)
  return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * p[1:-1, 1:-1]


def ref_state(st, x, w):
  s = np.concatenate([st[:, 1:], x[:, None]], axis=1)
  return s, (s * w).sum(1)


def ref_sobel_valid(x):
  v = np.asarray(x, np.float32)
  H, W = v.shape[0] - 2, v.shape[1] - 2
  s = lambda a, b: v[a:a + H, b:b + W]
  gx = s(0, 2) + 2 * s(1, 2) + s(2, 2) - s(0, 0) - 2 * s(1, 0) - s(2, 0)
  gy = s(2, 0) + 2 * s(2, 1) + s(2, 2) - s(0, 0) - 2 * s(0, 1) - s(0, 2)
  return np.hypot(gx, gy)


def _c(name, k, inputs, ref, tol=1e-4):
  return (name, k, inputs, {}, ref, tol)


CASES = [
    _c("jnp_pool_reshape_max", pool_reshape, lambda s: (rnd((16, 32, 16), s),),
       lambda x: x.reshape(8, 2, 16, 2, 16).max(axis=(1, 3))),
    _c("jnp_pool_reshape_mean", avgpool_reshape, lambda s: (rnd((16, 32, 16), s),),
       lambda x: x.reshape(8, 2, 16, 2, 16).mean(axis=(1, 3))),
    _c("jnp_laplacian_pad", lap_pad, lambda s: (rnd((32, 64), s),), ref_lap),
    _c("jnp_laplacian_roll", lap_roll, lambda s: (rnd((32, 64), s),), ref_lap),
    _c("jnp_integral_cumsum_u8", sat_jnp, lambda s: (img_u8((32, 64), s),),
       lambda x: x.astype(np.float32).cumsum(0).cumsum(1), 1e-3),
    _c("jnp_convolve_valid", convolve_in_kernel, lambda s: (rnd((256,), s), rnd((3,), s + 1)),
       lambda x, w: np.convolve(x, w, "valid")),
    _c("lax_reduce_window_max", reduce_window_in_kernel, lambda s: (rnd((32, 64), s),),
       lambda x: x.reshape(16, 2, 32, 2).max(axis=(1, 3))),
    _c("jnp_bincount_u8", bincount_in_kernel, lambda s: (img_u8((1024,), s),), lambda x: np.bincount(x, minlength=256), 0),
    _c("jax_image_resize_nearest", image_resize_in_kernel, lambda s: (rnd((32, 32), s),),
       lambda x: x.repeat(2, 0).repeat(2, 1)),
    _c("jnp_repeat_upsample", upsample_repeat2, lambda s: (rnd((32, 32), s),), lambda x: x.repeat(2, 0).repeat(2, 1)),
    _c("dilated_conv1d_slices", dilated_conv1d, lambda s: (rnd((8, 132), s), rnd((3,), s + 1)),
       lambda x, w: sum(x[:, 2 * k:2 * k + 128] * w[k] for k in range(3))),
    _c("mamba_conv_state_update", conv_state_update, lambda s: (rnd((64, 4), s), rnd((64,), s + 1), rnd((64, 4), s + 2)),
       ref_state),
    _c("sobel_register_slices_u8", sobel_slices, lambda s: (img_u8((34, 66), s),), ref_sobel_valid, 1e-3),
    _c("threshold_at_mean_u8", threshold_otsu_like, lambda s: (img_u8((32, 64), s),),
       lambda x: np.where(x > x.astype(np.float32).mean(), 255, 0).astype(np.uint8), 0),
    _c("downsample_stride2", downsample_stride2, lambda s: (rnd((32, 128), s),), lambda x: x[:, ::2]),
    _c("conv1d_unfold_stack", conv1d_valid_unfold_dot, lambda s: (rnd((8, 130), s), rnd((3,), s + 1)),
       lambda x, w: sum(x[:, k:k + 128] * w[k] for k in range(3))),
]
