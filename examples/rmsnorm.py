"""RMS norm: x / sqrt(mean(x^2) + eps) * w over the last axis, `rows` rows per program.

    python examples/rmsnorm.py           # on a GPU: checks against jnp; else interpret mode

Rows too long for registers are held in SMEM by layer norm's kernel without the centring
(`layernorm.layernorm_smem_rows`, `center=False`).
"""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

import layernorm as LN


@mg.mgpu_kernel(out_shape=lambda x, w, *, rows, eps: x,
                grid=lambda x, w, *, rows, eps: (x.shape[0] // rows,))
def rmsnorm_rows(x, w, out, *, rows: ml.constexpr, eps: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * rows, rows), :][...].astype(jnp.float32)
  r = ml.rsqrt(ml.sum(v * v, axis=1, keepdims=True) / x.shape[1] + eps)
  out.at[ml.ds(i * rows, rows), :][...] = (v * r * w[...].astype(jnp.float32)).astype(out.dtype)


def rmsnorm(x, w, eps=1e-6, *, interpret=None):
  """RMS norm of a 2-D array over its last axis (a multiple of 128)."""
  LN.check_weights("rmsnorm", x, w)
  n, d = x.shape
  if d > LN.MAX_ROW and LN.smem_config(d, x.dtype.itemsize) is not None:
    return LN.layernorm_smem(x, w, w, eps, center=False, interpret=interpret)[0]   # b unused
  rows = max(1, min(8, 4096 // d))
  while n % rows:
    rows //= 2
  return rmsnorm_rows(x, w, rows=rows, eps=eps, interpret=interpret)


def reference(x, w, eps=1e-6):
  xf = x.astype(jnp.float32)
  return (xf * jax.lax.rsqrt((xf * xf).mean(-1, keepdims=True) + eps) * w.astype(jnp.float32)).astype(x.dtype)


for _dt in (jnp.float32, jnp.bfloat16):
  mg.check_specs(rmsnorm_rows, jax.ShapeDtypeStruct((64, 1024), _dt), jax.ShapeDtypeStruct((1024,), _dt),
                 rows=4, eps=1e-6)


if __name__ == "__main__":
  on_gpu = jax.default_backend() == "gpu"
  n, d = (8192, 8192) if on_gpu else (64, 1024)
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), (n, d), jnp.float32).astype(dtype)
    w = jax.random.normal(jax.random.key(1), (d,), jnp.float32).astype(dtype)
    got = jax.jit(rmsnorm)(x, w) if on_gpu else rmsnorm(x, w, interpret=True)
    err = float(jnp.abs(got.astype(jnp.float32) - reference(x, w).astype(jnp.float32)).max())
    print(f"rmsnorm {dtype.__name__} ({n}, {d}): max abs error {err:.2e} ({'GPU' if on_gpu else 'interpret mode'})")
