"""Layer norm, forward and backward, wired into jax.grad with jax.custom_vjp.

    python examples/layernorm.py         # on a GPU: checks against jnp; else interpret mode

Forward: each program normalises `rows` rows held in registers (row mean and variance
are row reductions that stay inside each warp) and also writes the per-row mean and
1/std, which the backward reuses. Backward: dx per row, and the weight and bias
gradients (column sums over all rows) in two steps: each of a few hundred programs
walks its share of the rows accumulating partial column sums in registers, then a
second kernel adds the partial rows up.
"""
import functools

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32 = jnp.float32


def _rows(n, d, budget=4096):
  rows = max(1, min(8, budget // d))
  while n % rows:
    rows //= 2
  return rows


@mg.mgpu_kernel(
    out_shape=lambda x, w, b, *, rows, eps: (x, jax.ShapeDtypeStruct((x.shape[0],), F32),
                                             jax.ShapeDtypeStruct((x.shape[0],), F32)),
    grid=lambda x, w, b, *, rows, eps: (x.shape[0] // rows,))
def layernorm_fwd(x, w, b, y, mean, rstd, *, rows: ml.constexpr, eps: ml.constexpr):
  i = ml.program_id(0)
  d = x.shape[1]
  v = x.at[ml.ds(i * rows, rows), :][...].astype(F32)
  mu = ml.sum(v, axis=1) / d
  xc = v - mu[:, None]
  r = ml.rsqrt(ml.sum(xc * xc, axis=1) / d + eps)
  out = xc * r[:, None] * w[...].astype(F32)[None, :] + b[...].astype(F32)[None, :]
  y.at[ml.ds(i * rows, rows), :][...] = out.astype(y.dtype)
  mean.at[ml.ds(i * rows, rows)][...] = mu
  rstd.at[ml.ds(i * rows, rows)][...] = r


def _parts(x, w, dy, mean, rstd, *, rows, steps):
  programs = x.shape[0] // (rows * steps)
  part = jax.ShapeDtypeStruct((programs, x.shape[1]), F32)
  return x, part, part


@mg.mgpu_kernel(out_shape=_parts,
                grid=lambda x, w, dy, mean, rstd, *, rows, steps: (x.shape[0] // (rows * steps),))
def layernorm_bwd(x, w, dy, mean, rstd, dx, dw_part, db_part, *, rows: ml.constexpr,
                  steps: ml.constexpr):
  """dx for `steps` blocks of `rows` rows, and this program's partial column sums of
  dy * xhat (for dw) and dy (for db)."""
  p = ml.program_id(0)
  d = x.shape[1]
  wv = w[...].astype(F32)
  dw = ml.zeros((rows, d), F32)      # summed over rows once, after the loop
  db = ml.zeros((rows, d), F32)
  for s in range(steps):
    r0 = (p * steps + s) * rows
    xhat = (x.at[ml.ds(r0, rows), :][...].astype(F32) - mean.at[ml.ds(r0, rows)][...][:, None]) \
        * rstd.at[ml.ds(r0, rows)][...][:, None]
    g = dy.at[ml.ds(r0, rows), :][...].astype(F32)
    wg = g * wv[None, :]
    c1 = ml.sum(xhat * wg, axis=1) / d
    c2 = ml.sum(wg, axis=1) / d
    grad = (wg - xhat * c1[:, None] - c2[:, None]) * rstd.at[ml.ds(r0, rows)][...][:, None]
    dx.at[ml.ds(r0, rows), :][...] = grad.astype(dx.dtype)
    dw = dw + g * xhat
    db = db + g
  dw_part.at[p][...] = ml.sum(dw, axis=0)
  db_part.at[p][...] = ml.sum(db, axis=0)


@mg.mgpu_kernel(out_shape=lambda parts, *, cols, dtype: jax.ShapeDtypeStruct((parts.shape[1],), dtype),
                grid=lambda parts, *, cols, dtype: (parts.shape[1] // cols,))
def column_sums(parts, out, *, cols: ml.constexpr, dtype: ml.constexpr):
  """out[j] = sum over rows of parts[:, j], `cols` columns per program, 8 rows a step."""
  j = ml.program_id(0)
  acc = ml.zeros((cols,), F32)
  for r in range(parts.shape[0] // 8):
    acc = acc + ml.sum(parts.at[ml.ds(r * 8, 8), ml.ds(j * cols, cols)][...], axis=0)
  out.at[ml.ds(j * cols, cols)][...] = acc.astype(out.dtype)


def _bwd_config(n, d):
  rows = _rows(n, d)
  steps = 1
  while n // (rows * steps * 2) >= 256 and (n // rows) % (steps * 2) == 0:   # about 256 programs
    steps *= 2
  return rows, steps


def _forward(x, w, b, eps, interpret):
  return layernorm_fwd(x, w, b, rows=_rows(*x.shape), eps=eps, interpret=interpret)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def layernorm(x, w, b, eps=1e-5, interpret=None):
  """(x - mean) / sqrt(var + eps) * w + b over the last axis of a 2-D array (its last
  dimension a multiple of 128; rows a multiple of 8 for the backward)."""
  return _forward(x, w, b, eps, interpret)[0]


def _fwd(x, w, b, eps, interpret):
  y, mean, rstd = _forward(x, w, b, eps, interpret)
  return y, (x, w, b, mean, rstd)


def _bwd(eps, interpret, res, dy):
  x, w, b, mean, rstd = res
  rows, steps = _bwd_config(*x.shape)
  dx, dw_part, db_part = layernorm_bwd(x, w, dy, mean, rstd, rows=rows, steps=steps,
                                       interpret=interpret)
  cols = 256 if x.shape[1] % 256 == 0 else 128
  dw = column_sums(dw_part, cols=cols, dtype=w.dtype, interpret=interpret)
  db = column_sums(db_part, cols=cols, dtype=b.dtype, interpret=interpret)
  return dx, dw, db


layernorm.defvjp(_fwd, _bwd)


def reference(x, w, b, eps=1e-5):
  xf = x.astype(F32)
  mu = xf.mean(-1, keepdims=True)
  var = ((xf - mu) ** 2).mean(-1, keepdims=True)
  return ((xf - mu) * jax.lax.rsqrt(var + eps) * w.astype(F32) + b.astype(F32)).astype(x.dtype)


for _dt in (jnp.float32, jnp.bfloat16):
  _S = jax.ShapeDtypeStruct
  mg.check_specs(layernorm_fwd, _S((64, 1024), _dt), _S((1024,), _dt), _S((1024,), _dt), rows=4, eps=1e-5)
  mg.check_specs(layernorm_bwd, _S((64, 1024), _dt), _S((1024,), _dt), _S((64, 1024), _dt),
                 _S((64,), F32), _S((64,), F32), rows=4, steps=2)
  mg.check_specs(column_sums, _S((256, 1024), F32), cols=256, dtype=_dt)


if __name__ == "__main__":
  on_gpu = jax.default_backend() == "gpu"
  n, d = (4096, 4096) if on_gpu else (64, 512)
  interp = None if on_gpu else True
  for dtype in (jnp.float32, jnp.bfloat16):
    k = jax.random.split(jax.random.key(0), 4)
    x = (jax.random.normal(k[0], (n, d), F32) * 3 + 1).astype(dtype)
    w = jax.random.normal(k[1], (d,), F32).astype(dtype)
    b = jax.random.normal(k[2], (d,), F32).astype(dtype)
    dy = jax.random.normal(k[3], (n, d), F32).astype(dtype)
    y = layernorm(x, w, b, 1e-5, interp)
    ref = reference(x, w, b)
    f = lambda x, w, b: jnp.sum(layernorm(x, w, b, 1e-5, interp).astype(F32) * dy.astype(F32))
    g = lambda x, w, b: jnp.sum(reference(x, w, b).astype(F32) * dy.astype(F32))
    grads = jax.grad(f, argnums=(0, 1, 2))(x, w, b)
    want = jax.grad(g, argnums=(0, 1, 2))(x, w, b)
    errs = [float(jnp.abs(y.astype(F32) - ref.astype(F32)).max())] + [
        float(jnp.abs(a.astype(F32) - c.astype(F32)).max() / (jnp.abs(c.astype(F32)).max() + 1e-9))
        for a, c in zip(grads, want)]
    print(f"layernorm {dtype.__name__} ({n}, {d}): y max abs error {errs[0]:.2e}; dx, dw, db relative"
          f" errors {errs[1]:.2e} {errs[2]:.2e} {errs[3]:.2e} ({'GPU' if on_gpu else 'interpret mode'})")

