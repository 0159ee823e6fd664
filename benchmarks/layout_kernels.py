"""The kernels of benchmarks/probe_layouts.py: small register-layout kernels, each a template over
constexprs (the op, an axis, a shape, a dtype), whose inputs' shapes and dtypes the probe varies.
Every kernel is one that interpret mode computes without modelling register layouts, so the GPU
run compares the two."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _like(fn):
  """An out_shape callable: fn applied to abstract inputs (jax.eval_shape)."""
  return lambda *xs, **kw: jax.eval_shape(lambda *a: fn(*a, **kw), *xs)


# ---------------------------------------------------------------- loads and stores
@mg.mgpu_kernel(out_shape=lambda x: x)
def ident(x, out):
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def affine(x, out):
  out[...] = x[...] * 3 + 1


@mg.mgpu_kernel(out_shape=lambda x, *, B: x, grid=lambda x, *, B: (ml.cdiv(x.shape[0], B),))
def tail1d(x, out, *, B: ml.constexpr):
  i = ml.program_id(0)
  idx = i * B + ml.arange(B)
  v = x.at[ml.ds(i * B, B)].load(mask=idx < x.shape[0], other=0)
  out.at[ml.ds(i * B, B)].store(v, mask=idx < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, *, R: x, grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),),
                block=lambda x, *, wgs: 128 * wgs)
def tail_rows(x, out, *, R: ml.constexpr, wgs: ml.constexpr = 1):
  i = ml.program_id(0)
  r = i * R + ml.arange(R)
  v = x.at[ml.ds(i * R, R), :].load(mask=r[:, None] < x.shape[0], other=0)
  out.at[ml.ds(i * R, R), :].store(v, mask=r[:, None] < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, *, C: x, grid=lambda x, *, C: (1,))
def tail_cols(x, out, *, C: ml.constexpr):
  c = ml.arange(C)
  v = x.at[:, ml.ds(0, C)].load(mask=c[None, :] < x.shape[1], other=0)
  out.at[:, ml.ds(0, C)].store(v, mask=c[None, :] < x.shape[1])


# ---------------------------------------------------------------- reductions and row statistics
def _reduce(a, *, op, axis, keepdims):
  return {"sum": jnp.sum, "max": jnp.max, "min": jnp.min, "mean": jnp.mean, "argmax": jnp.argmax,
          "argmin": jnp.argmin}[op](a, axis=axis, keepdims=keepdims)


@mg.mgpu_kernel(out_shape=_like(_reduce))
def reduce(x, out, *, op: ml.constexpr, axis: ml.constexpr, keepdims: ml.constexpr):
  v = x[...]
  if op == "sum":
    out[...] = ml.sum(v, axis=axis, keepdims=keepdims)
  elif op == "max":
    out[...] = ml.max(v, axis=axis, keepdims=keepdims)
  elif op == "min":
    out[...] = ml.min(v, axis=axis, keepdims=keepdims)
  elif op == "mean":
    out[...] = ml.mean(v, axis=axis, keepdims=keepdims)
  elif op == "argmax":
    out[...] = ml.argmax(v, axis=axis, keepdims=keepdims)
  else:
    out[...] = ml.argmin(v, axis=axis, keepdims=keepdims)


@mg.mgpu_kernel(out_shape=lambda x, *, R: (S(x.shape, jnp.float32), S((x.shape[0],), jnp.float32),
                                           S((x.shape[0],), jnp.float32)),
                grid=lambda x, *, R: (x.shape[0] // R,), block=lambda x, *, wgs: 128 * wgs)
def row_stats(x, y, mean, rstd, *, R: ml.constexpr, wgs: ml.constexpr = 1):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * R, R), :][...].astype(jnp.float32)
  m = ml.sum(v, axis=1) / x.shape[1]
  d = v - m[:, None]
  s = ml.rsqrt(ml.sum(d * d, axis=1) / x.shape[1] + 1e-5)
  y.at[ml.ds(i * R, R), :][...] = d * s[:, None]
  mean.at[ml.ds(i * R, R)][...] = m
  rstd.at[ml.ds(i * R, R)][...] = s


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), jnp.float32), S(x.shape, jnp.float32)))
def col_stats(x, colsum, centred):
  v = x[...].astype(jnp.float32)
  c = ml.sum(v, axis=0)
  colsum[...] = c
  centred[...] = v - ml.max(v, axis=0, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def softmax_rows(x, out):
  out[...] = ml.softmax(x[...].astype(jnp.float32), axis=-1)


# ---------------------------------------------------------------- broadcasting and index grids
@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape[:1] + b.shape[-1:], a.dtype))
def outer(a, b, out):
  if a.ndim == 1:
    out[...] = a[...][:, None] * 2 + b[...][None, :]
  else:
    out[...] = a[...] * 2 + b[...]


@mg.mgpu_kernel(out_shape=lambda x, *, w: S((x.shape[0], w), x.dtype))
def widen(x, out, *, w: ml.constexpr):
  out[...] = ml.broadcast_to(x[...][:, None], (x.shape[0], w))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape + (1,), x.dtype))
def as_column(x, out):
  out[...] = x[...][:, None]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def index_grid(x, out):
  m, n = x.shape
  g = ml.arange(m)[:, None] * n + ml.arange(n)[None, :]
  out[...] = ml.where(x[...] > 0, g, -g)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def select(x, y, out):
  a = x[...]
  out[...] = ml.where(a > y[...], a, y[...])


@mg.mgpu_kernel(out_shape=lambda x, v: x)
def where_rows(x, v, out):
  a = x[...]
  out[...] = ml.where(v[...][:, None] > 0, a, ml.zeros(a.shape, a.dtype))


# ---------------------------------------------------------------- moving elements
@mg.mgpu_kernel(out_shape=lambda x, *, shape: S(shape, x.dtype))
def reshape(x, out, *, shape: ml.constexpr):
  out[...] = x[...].reshape(shape)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[::-1], x.dtype))
def transpose(x, out):
  out[...] = x[...].T


@mg.mgpu_kernel(out_shape=lambda x, *, j: S((2, x.shape[0]), x.dtype))
def columns(x, out, *, j: ml.constexpr):
  v = x[...]
  out.at[0, :][...] = v[:, j]
  out.at[1, :][...] = v[:, x.shape[1] - 1]


@mg.mgpu_kernel(out_shape=lambda x, *, j: S((x.shape[1],), x.dtype))
def row_of(x, out, *, j: ml.constexpr):
  out[...] = x[...][j]


@mg.mgpu_kernel(out_shape=lambda x, *, a, b: S((x.shape[0], b - a), x.dtype))
def col_slice(x, out, *, a: ml.constexpr, b: ml.constexpr):
  out[...] = x[...][:, a:b]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1]), x.dtype))
def interleave(x, out):
  v = x[...]
  out[...] = ml.concatenate([v[..., None], v[..., None]], axis=-1).reshape(x.shape[0], 2 * x.shape[1])


# ---------------------------------------------------------------- casts
@mg.mgpu_kernel(out_shape=lambda x, *, to: S(x.shape, to))
def cast(x, out, *, to: ml.constexpr):
  out[...] = x[...].astype(to)


# ---------------------------------------------------------------- sorts, scans, gathers
@mg.mgpu_kernel(out_shape=lambda x, *, descending: (x, S(x.shape, jnp.int32)))
def sort(x, out, idx, *, descending: ml.constexpr):
  v = x[...]
  out[...] = ml.sort(v, descending=descending)
  idx[...] = ml.argsort(v, descending=descending)


def _cumsum(a, *, axis):
  return jnp.cumsum(a, axis=axis, dtype=jnp.promote_types(a.dtype, jnp.int32)
                    if jnp.issubdtype(a.dtype, jnp.integer) and a.dtype.itemsize < 4 else None)


@mg.mgpu_kernel(out_shape=lambda x, *, axis: (jax.eval_shape(lambda a: _cumsum(a, axis=axis), x), x))
def scan(x, csum, cmax, *, axis: ml.constexpr):
  v = x[...]
  csum[...] = ml.cumsum(v, axis=axis)
  cmax[...] = ml.cummax(v, axis=axis)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0],) + t.shape[1:], t.dtype),
                grid=lambda t, ids: (ids.shape[0] // 64,))
def gather_rows(t, ids, out):
  i = ml.program_id(0)
  rows = ids.at[ml.ds(i * 64, 64)][...]
  out.at[ml.ds(i * 64, 64)][...] = t[rows] if t.ndim == 1 else t[rows, :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype))
def gather_grid(t, ids, out):
  out[...] = t[ids[...], ml.arange(ids.shape[1])[None, :]]


# ---------------------------------------------------------------- tensor-core results
@mg.mgpu_kernel(out_shape=lambda a, b, c: (S((a.shape[0],), jnp.float32), S((b.shape[1],), jnp.float32),
                                           S((a.shape[0], b.shape[1]), jnp.float32)))
def dot_stats(a, b, c, rows, cols, out):
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  rows[...] = ml.max(acc, axis=1)
  cols[...] = ml.sum(acc, axis=0)
  out[...] = acc - ml.max(acc, axis=1, keepdims=True) + c[...][None, :]


# ---------------------------------------------------------------- index grids at a tile's own shape
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def index_grid3(x, out):
  a, b, c = x.shape
  g = ml.arange(a)[:, None, None] * 10000 + ml.arange(b)[None, :, None] * 100 + ml.arange(c)[None, None, :]
  out[...] = g + x[...].astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x, *, R: S((x.shape[0] * x.shape[1],), x.dtype),
                grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),))
def masked_flatten(x, out, *, R: ml.constexpr):
  i = ml.program_id(0)
  r = i * R + ml.arange(R)
  v = x.at[ml.ds(i * R, R), :].load(mask=r[:, None] < x.shape[0], other=0)
  w = x.shape[1]
  out.at[ml.ds(i * R * w, R * w)].store(v.reshape(R * w), mask=i * R * w + ml.arange(R * w) < out.shape[0])



@mg.mgpu_kernel(out_shape=lambda x, *, R: x, grid=lambda x, *, R: (ml.cdiv(x.shape[0], R),))
def masked_rows(x, out, *, R: ml.constexpr):
  """masked_flatten's load and a masked store of the same (R, w) tile: no reshape, no relayout."""
  i = ml.program_id(0)
  r = i * R + ml.arange(R)
  v = x.at[ml.ds(i * R, R), :].load(mask=r[:, None] < x.shape[0], other=0)
  out.at[ml.ds(i * R, R), :].store(v, mask=r[:, None] < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, *, R: S((x.shape[0] * x.shape[1],), x.dtype),
                grid=lambda x, *, R: (x.shape[0] // R,))
def plain_flatten(x, out, *, R: ml.constexpr):
  """masked_flatten without masks (rows a multiple of R)."""
  i = ml.program_id(0)
  w = x.shape[1]
  out.at[ml.ds(i * R * w, R * w)][...] = x.at[ml.ds(i * R, R), :][...].reshape(R * w)

# ---------------------------------------------------------------- narrow windows of wider arrays
@mg.mgpu_kernel(out_shape=lambda x, *, a, b: (S((x.shape[0], b - a), x.dtype), x))
def col_window(x, win, out, *, a: ml.constexpr, b: ml.constexpr):
  win[...] = x.at[:, a:b][...]
  out[...] = x[...]
  out.at[:, a:b][...] = x.at[:, 0:b - a][...]


@mg.mgpu_kernel(out_shape=lambda p, ids: S(ids.shape, p.dtype))
def gather_flat(p, ids, out):
  rows = ml.arange(ids.shape[0])[:, None]
  out[...] = p[rows * 32 + ids[...]]
