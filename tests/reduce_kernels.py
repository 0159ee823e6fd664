"""Kernels with reductions, broadcasting and row statistics, shared by the interpret, export and
GPU tests. Each covers one layout path: rows of a plain tile (ROWS, one warp per row), a single
row per program (warps across the row, scratch), column sums (across warps), full reductions to
a scalar, row statistics of a tensor-core tile, vectors stored to GMEM and carried in loops."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=lambda x, *, rows: (x.shape[0] // rows,))
def softmax_rows(x, out, *, rows: ml.constexpr):
  """Row softmax of `rows` rows per program, read straight from GMEM into registers."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * rows, rows), :][...].astype(jnp.float32)
  e = ml.exp(v - ml.max(v, axis=1)[:, None])
  out.at[ml.ds(i * rows, rows), :][...] = (e / ml.sum(e, axis=1, keepdims=True)).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[1],), jnp.float32), grid=(1,))
def column_sums(x, out):
  """Sums over axis 0 (across the warps that own the rows)."""
  out[...] = ml.sum(x[...].astype(jnp.float32), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def center_if_positive(x, out):
  """A full reduction is a scalar: used in math and in a runtime if."""
  v = x[...]
  total = ml.sum(v)
  if total > 0.0:
    v = v - total / v.size
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: (jax.ShapeDtypeStruct((x.shape[0],), jnp.float32),
                                     jax.ShapeDtypeStruct((x.shape[0],), jnp.int32)),
                grid=lambda x: (x.shape[0] // 8,))
def row_stats(x, mean, amax):
  """Per-row mean and argmax of 8 rows, stored as (8,) vectors."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...].astype(jnp.float32)
  mean.at[ml.ds(i * 8, 8)][...] = ml.sum(v, axis=1) / v.shape[1]
  amax.at[ml.ds(i * 8, 8)][...] = ml.argmax(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), jnp.float32),
                grid=lambda x: (x.shape[0] // 4,))
def chunked_row_max(x, out):
  """A row statistic carried through a loop over column chunks (online, as long rows need)."""
  i = ml.program_id(0)
  m = ml.full((4,), -float("inf"), jnp.float32)
  for c in range(x.shape[1] // 256):
    v = x.at[ml.ds(i * 4, 4), ml.ds(c * 256, 256)][...].astype(jnp.float32)
    m = ml.maximum(m, ml.max(v, axis=1))
  out.at[ml.ds(i * 4, 4)][...] = m


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=(1,))
def dot_row_softmax(a, b, out):
  """Row softmax of a tensor-core result: row max and sum in the WGMMA layout, index grids."""
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  s = ml.dot(a_s, b_s)
  rows = ml.arange(s.shape[0])[:, None]
  cols = ml.arange(s.shape[1])[None, :]
  s = ml.where(cols <= rows, s, -1e30)          # a causal mask from index grids
  p = ml.exp(s - ml.max(s, axis=1)[:, None])
  out[...] = p / ml.sum(p, axis=1)[:, None]


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0] // 4,))
def scale_columns(x, w, out):
  """A vector broadcast along the rows of a tile: x * w[None, :] + bias from ml.arange."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...]
  out.at[ml.ds(i * 4, 4), :][...] = v * w[...][None, :] + ml.arange(x.shape[1]).astype(x.dtype)
