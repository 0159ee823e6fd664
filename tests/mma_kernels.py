"""Tensor-core kernels with transposed SMEM operands (`buf.T`) and register A operands, shared by
the interpret, export and GPU tests (tests/test_mma.py)."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml


def _abt_out(a, b, **_):
  return jax.ShapeDtypeStruct((a.shape[0], b.shape[0]), jnp.float32)


@mg.mgpu_kernel(out_shape=_abt_out, grid=lambda a, b, **_: (b.shape[0] // 128,), block=256)
def dot_bt(a, b, out, *, stages: ml.constexpr = 2):
  """out = a @ b.T, b stored (n, k): the K-major B that attention's q @ k.T reads, pipelined."""
  j = ml.program_id(0)
  a_s = ml.smem((a.shape[0], 64))
  b_s = ml.smem((128, 64))
  acc = ml.zeros((a.shape[0], 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=stages):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(j * 128, 128), ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  out.at[:, ml.ds(j * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[1], b.shape[1]), jnp.float32),
                block=256)
def dot_at(a, b, out):
  """out = a.T @ b, a stored (k, m): an MN-major A read through a transposed view."""
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s.T, b_s.T.T)


@mg.mgpu_kernel(out_shape=lambda a, b, c: jax.ShapeDtypeStruct((a.shape[0], c.shape[1]), jnp.float32),
                block=256)
def dot_chain(a, b, c, out):
  """out = (a @ b.T as a's dtype) @ c: the second dot takes A from registers, as attention's P @ V."""
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  c_s = ml.smem(c.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  ml.copy(c, c_s)
  s = ml.dot(a_s, b_s.T)
  out[...] = ml.dot(s.astype(a.dtype), c_s)


@mg.mgpu_kernel(out_shape=lambda a, b, c: jax.ShapeDtypeStruct((a.shape[0], b.shape[0]), jnp.float32),
                block=256)
def two_dots_in_flight(a, b, c, out):
  """The first product is read while the second still runs: the wait keeps one group in flight."""
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  c_s = ml.smem(c.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  ml.copy(c, c_s)
  s1 = ml.dot(a_s, b_s.T)
  s2 = ml.dot(a_s, c_s.T)
  m = ml.max(s1, axis=1)
  out[...] = s2 - m[:, None]


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[0]), a.dtype), block=256)
def overwrite_after_dot(a, b, out):
  """a_s is overwritten once the dot that read it is done, in every warpgroup."""
  a_s = ml.smem(a.shape)
  b_s = ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  s = ml.dot(a_s, b_s.T)
  a_s[...] = s.astype(a.dtype)
  ml.copy(a_s, out)


@mg.mgpu_kernel(out_shape=_abt_out)
def dot_narrow_bt(a, b, out):
  """out = a @ b.T with b only a few rows (n = 8, 16, 24...): the K-major B of S^T = K Q^T, whose
  n counts 8-row tiles, not 128-byte rows."""
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32))
def dot_narrow_b(a, b, out):
  """Wrong: b stored (k, n) with n = 8, narrower than its narrowest (32-byte, 16-element) tile rows."""
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda q, k, **_: jax.ShapeDtypeStruct((q.shape[0], 64), jnp.float32))
def scores_kt_only(q, k, out, *, stages: ml.constexpr = 2, ws: ml.constexpr = False):
  """sum over key blocks j of q @ k_j.T: the loop's only loaded buffer is read through .T (once
  such a loop got no dot wait, and its refill raced the tensor cores)."""
  q_s, k_s = ml.smem((64, q.shape[1])), ml.smem((64, k.shape[1]))
  ml.copy(q, q_s)
  acc = ml.zeros((64, 64), jnp.float32)
  for j in ml.range(k.shape[0] // 64, stages=stages, warp_specialize=ws):
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    acc = ml.dot(q_s, k_s.T, acc)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((128, 64), jnp.float32), grid=(2,), cluster=(2,))
def peer_partial_sums(a, b, c):
  """Each CTA of a pair computes its rows' a @ b into SMEM (tiled for the dot's layout) and adds
  the peer's through ml.cluster_ref (once an InternalError: the peer's tiling was not known)."""
  pid = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(pid * 64, 64)], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  part = ml.smem((64, 64), jnp.float32)
  part[...] = acc
  ml.cluster_sync()
  other = ml.cluster_ref(part, 1 - pid)[...]
  ml.cluster_sync()
  c.at[ml.ds(pid * 64, 64)][...] = acc + other


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((16, 64), jnp.float32), grid=(2,), cluster=(2,))
def peer_rows_of_result(a, b, c):
  """Rows 8..16 of this CTA's a @ b and the same rows of the peer's, read from SMEM through
  windows of a buffer written from the dot's result (a flash-decoding combine reads just the
  group's rows; once an IndexError inside Mosaic GPU for the peer, a LayoutError locally)."""
  pid = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a.at[ml.ds(pid * 64, 64)], a_s)
  ml.copy(b, b_s)
  part = ml.smem((64, 64), jnp.float32)
  part[...] = ml.dot(a_s, b_s)
  ml.cluster_sync()
  mine = part.at[ml.ds(8, 8)][...]
  c.at[ml.ds(pid * 8, 8)][...] = mine + ml.cluster_ref(part, 1 - pid).at[ml.ds(8, 8), ml.ds(0, 64)][...]
  ml.cluster_sync()


@mg.mgpu_kernel(out_shape=lambda a, bt: jax.ShapeDtypeStruct((128, 128), jnp.float32))
def tiles_from_one(a, bt, out):
  """Pipelined k-tiles 1..3 (a static start other than 0) of a @ bt.T: once an InternalError
  (ZeroDivisionError folding the trip count), and with `.T` a false 'used outside the loop'."""
  a_s, b_s = ml.smem((128, 64)), ml.smem((128, 64))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(1, a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[:, ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s.T, acc)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((128, 128), jnp.float32))
def even_k_tiles(a, b, out):
  """Pipelined k-tiles 0, 2, 4, ... (a static step other than 1)."""
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(0, a.shape[1] // 64, 2, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((256,), jnp.float32), block=256)
def two_warpgroup_row_max(a, b, out):
  """Row maxima of a 256-row dot result split between two warpgroups."""
  a_s, b_s = ml.smem((256, 64)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.max(ml.dot(a_s, b_s), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b, **kw: jax.ShapeDtypeStruct((128,), jnp.float32), block=256)
def two_warpgroup_reductions(a, b, out, *, how: ml.constexpr):
  """Reductions across the rows two warpgroups hold: full ones (a scalar) and, since probe 62a,
  along axis 0 (a vector of the columns) combine the warpgroups' parts."""
  a_s, b_s = ml.smem((256, 64)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  if how == "sum0":
    out[...] = ml.sum(acc, axis=0)
  elif how == "full":
    out[...] = ml.full((128,), ml.sum(acc), jnp.float32)
  elif how == "argmax0":
    out[...] = ml.argmax(acc, axis=0).astype(jnp.float32)
  else:
    out[...] = ml.full((128,), ml.sum(ml.max(acc, axis=1)), jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((128, 128), jnp.float32))
def k_substeps(a, b, out):
  """A stage's K split into two dots on whole-tile windows of the operands (once MG204)."""
  a_s, b_s = ml.smem((128, 128)), ml.smem((128, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s.at[:, ml.ds(0, 64)], b_s.at[ml.ds(0, 64)])
  out[...] = ml.dot(a_s.at[:, ml.ds(64, 64)], b_s.at[ml.ds(64, 64)], acc)


@mg.mgpu_kernel(out_shape=lambda a, bt: jax.ShapeDtypeStruct((128, 128), jnp.float32))
def window_rows_bt(a, bt, out):
  """Rows 64.. of A and rows 128.. of a stored (n, k) B, as windows of their buffers."""
  a_s, b_s = ml.smem((192, 64)), ml.smem((256, 64))
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  out[...] = ml.dot(a_s.at[ml.ds(64, 128)], b_s.at[ml.ds(128, 128)].T)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((256, 128), jnp.float32), block=256)
def window_rows_two_warpgroups(a, b, out):
  """The second half of a 512-row A, split between two warpgroups."""
  a_s, b_s = ml.smem((512, 64)), ml.smem((64, 128))
  ml.copy(a.at[ml.ds(0, 256)], a_s.at[ml.ds(0, 256)])
  ml.copy(a.at[ml.ds(256, 256)], a_s.at[ml.ds(256, 256)])
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s.at[ml.ds(256, 256)], b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((128, 128), jnp.float32))
def two_phase_loops(a, b, out):
  """Two pipelined loops loading the same buffers one after the other (each gets its own)."""
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(0, 2, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  acc = acc * 0.5
  for k in ml.range(2, a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out[...] = acc
