"""Kernels shared by the IR, export, interpreter and GPU tests."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

TILE = 128


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128), :])


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 64,))
def fused(x, y, out):
  """out = where(x > 0, exp(x) * y, max(x, y) - 1), computed in f32."""
  i = ml.program_id(0)
  xs = ml.smem((64, x.shape[1]))
  ys = ml.smem((64, y.shape[1]))
  ml.copy(x.at[ml.ds(i * 64, 64)], xs)
  ml.copy(y.at[ml.ds(i * 64, 64)], ys)
  a = xs[...].astype(jnp.float32)
  b = ys[...].astype(jnp.float32)
  r = ml.where(a > 0, ml.exp(a) * b, ml.maximum(a, b) - 1.0)
  xs[...] = r.astype(x.dtype)
  ml.copy(xs, out.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128, x.shape[1]), jnp.float32),
                grid=(1,))
def row_block_sum(x, out, *, n: ml.constexpr):
  """out = sum over k < n of x[k*128:(k+1)*128] (f32), a runtime loop with a carried tensor."""
  buf = ml.smem((128, x.shape[1]))
  acc = ml.zeros((128, x.shape[1]), jnp.float32)
  for k in range(n):
    ml.copy(x.at[ml.ds(k * 128, 128)], buf)
    acc = acc + buf[...].astype(jnp.float32)
  res = ml.smem((128, x.shape[1]), jnp.float32)
  res[...] = acc
  ml.copy(res, out)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def scale_odd_programs(x, out):
  """Programs with an odd id write 3*x, even ones -x (an if on a runtime scalar)."""
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  v = buf[...]
  if i % 2 == 1:
    v = v * 3
  else:
    v = -v
  buf[...] = v
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 1024,))
def add_iota(x, out):
  """out[i] = x[i] + (i % 1024): registers read from and written to GMEM directly."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 1024, 1024)][...]
  out.at[ml.ds(i * 1024, 1024)][...] = v + ml.arange(1024).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), cluster=(2,))
def swap_pairs(x, out):
  """Each CTA of a 2-CTA cluster writes its peer's tile: rows blocks 0<->1, 2<->3, ..."""
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.cluster_sync()
  peer = ml.cluster_ref(buf, (i + 1) % 2)
  got = ml.smem((128, x.shape[1]))
  got[...] = peer[...]
  ml.cluster_sync()
  ml.copy(got, out.at[ml.ds(i * 128, 128)])
