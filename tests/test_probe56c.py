"""Probe 56c: block-sparse kernels and wide copies, written as Triton, Pallas and JAX authors write them.

Found and fixed: (1) a pipelined loop whose TMA loads all lie under a run-time `if` (a block-sparse matmul's or
attention's `if lay[i, k]:`, or its `continue`) was MG502: the loads now move out of the if, before it, where they
may run on every trip (frontend/guarded_loads.py: their buffer read only in their branch, their window pure scalar
arithmetic), and the if skips the dot; a window read from a table under the if (`k = idx[i, p]` under `if p <
cnt[i]:`, past the table on the skipped trips) stays MG502, which now names the read and hints the clamped index.
(2) A TMA copy whose last axis is wider than a box (DeepSeek MLA's 576 = 512 + 64 columns) was MG401: it is one box
of (pieces, width), the array's last axis tiled by a width dividing it (Mosaic GPU's TileTransform) and the buffer's
unfolded alike (lowering/memory.py `_wide_rows`); a buffer tiled for ml.dot was always whole tiles. A start read
from data keeps MG401. (3) conv_general_dilated mixing channels (feature_group_count 1) was MG003: a product a tap
(window_forms._dense, form_helpers.conv_dots), channels first or last."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct
BF16, F32, I32 = jnp.bfloat16, jnp.float32, jnp.int32
L = jax.lax


def _specs(*args):
  return [S(np.shape(a), a.dtype) for a in args]


def _masked(a, lay):
  """a with its (64, 64) blocks that `lay` leaves out zeroed."""
  a = f32(a).copy()
  for i, k in zip(*np.nonzero(np.asarray(lay) == 0)):
    a[i * 64:(i + 1) * 64, k * 64:(k + 1) * 64] = 0
  return a


def _attention(q, k, v, lay, scale=0.125):
  q, k, v = (np.float64(f32(t)) for t in (q, k, v))
  s = np.where(np.kron(lay, np.ones((64, 64))) > 0, q @ k.T * scale, -np.inf)
  p = np.exp(s - s.max(1, keepdims=True))
  return p @ v / p.sum(1, keepdims=True)


# ---------------------------------------------------------------- (1) loads under a run-time if, pipelined
@mg.mgpu_kernel(out_shape=lambda a, b, lay: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, lay: (a.shape[0] // 64, b.shape[1] // 64))
def bsmm(a, b, lay, c):                       # a block-sparse matmul: the layout table skips blocks of a
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    if lay[i, k]:
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, lay: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, lay: (a.shape[0] // 64, b.shape[1] // 64))
def bsmm_continue(a, b, lay, c):              # the same skipped by `continue`, three stages
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=3):
    if lay[i, k] == 0:
      continue
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, lay: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, lay: (a.shape[0] // 64, b.shape[1] // 64))
def bsmm_nested(a, b, lay, c):                # ifs nested, a window's start computed in the branch
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    if lay[i, k] > 0:
      kk = k * 64
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kk, 64)], a_s)
      if lay[i, k] > 1:
        ml.copy(b.at[ml.ds(kk, 64), ml.ds(j * 64, 64)], b_s)
        acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, lay: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, lay: (a.shape[0] // 64, b.shape[1] // 64))
def bsmm_ws(a, b, lay, c):                    # warp-specialised: the producer issues every trip's loads
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    if lay[i, k]:
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda q, k, v, lay: q, grid=lambda q, k, v, lay: (q.shape[0] // 64,))
def bs_attention(q, k, v, lay, o):            # block-sparse flash attention (a local + causal layout)
  i = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  m, l = ml.full((64,), -1e30, F32), ml.zeros((64,), F32)
  acc = ml.zeros((64, 64), F32)
  for j in ml.range(k.shape[0] // 64, stages=2):
    if lay[i, j] != 0:
      ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
      ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
      s = ml.dot(q_s, k_s.T) * 0.125
      m_new = ml.maximum(m, ml.max(s, axis=1))
      p = ml.exp(s - m_new[:, None])
      a = ml.exp(m - m_new)
      l = l * a + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(v.dtype), v_s, acc * a[:, None])
      m = m_new
  o.at[ml.ds(i * 64, 64)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32))
def ragged_sum(x, n, o):                      # a tail guarded by a length: the skipped loads lie past the end
  x_s = ml.smem((64, 64))
  acc = ml.zeros((64,), F32)
  for k in ml.range(4, stages=2):
    if k * 64 < n[0]:
      ml.copy(x.at[ml.ds(k * 64, 64)], x_s)
      acc = acc + ml.sum(x_s[...].astype(F32), axis=0)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, cnt, idx: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, cnt, idx: (a.shape[0] // 64, b.shape[1] // 64))
def lut_guarded(a, b, cnt, idx, c):           # the window read from a table under the if: stays MG502
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for p in ml.range(a.shape[1] // 64, stages=2):
    if p < cnt[i]:
      kb = idx[i, p]
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kb * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(kb * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, cnt, idx: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, cnt, idx: (a.shape[0] // 64, b.shape[1] // 64))
def lut_hinted(a, b, cnt, idx, c):            # the hint followed: the entry read above the if, clamped
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for p in ml.range(a.shape[1] // 64, stages=2):
    kb = idx[i, ml.minimum(p, idx.shape[1] - 1)]
    if p < cnt[i]:
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kb * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(kb * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, lut_ptr, lut: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, lut_ptr, lut: (a.shape[0] // 64, b.shape[1] // 64))
def triton_bsmm(a, b, lut_ptr, lut, c):       # Triton's block-sparse matmul: a CSR of the nonzero blocks
  i, j = ml.program_id(0), ml.program_id(1)
  start = lut_ptr[i]
  count = lut_ptr[i + 1] - start
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for p in ml.range(count, stages=2):
    k = lut[start + p]
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda q, k, v, cols: q, grid=lambda q, k, v, cols: (q.shape[0] // 64,))
def column_attention(q, k, v, cols, o):       # sparse attention over a column index table
  i = ml.program_id(0)
  q_s, k_s, v_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  m, l = ml.full((64,), -1e30, F32), ml.zeros((64,), F32)
  acc = ml.zeros((64, 64), F32)
  for t in ml.range(cols.shape[1], stages=2):
    j = cols[i, t]
    ml.copy(k.at[ml.ds(j * 64, 64)], k_s)
    ml.copy(v.at[ml.ds(j * 64, 64)], v_s)
    s = ml.dot(q_s, k_s.T) * 0.125
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(v.dtype), v_s, acc * alpha[:, None])
    m = m_new
  o.at[ml.ds(i * 64, 64)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, w, offs: S((x.shape[0], w.shape[2]), F32),
                grid=lambda x, w, offs: (w.shape[0], w.shape[2] // 64))
def moe_gemm(x, w, offs, o):                  # MoE grouped GEMM: tokens sorted by expert, empty experts skipped
  e, n = ml.program_id(0), ml.program_id(1)
  start, end = offs[e], offs[e + 1]
  w_s = ml.smem((64, 64))
  if end > start:
    for t in range(start, end, 64):
      rows = t + ml.arange(64)
      xt = x.at[ml.ds(t, 64)].load(mask=(rows < end)[:, None], other=0.0)
      acc = ml.zeros((64, 64), F32)
      for kk in range(x.shape[1] // 64):
        ml.copy(w.at[e, ml.ds(kk * 64, 64), ml.ds(n * 64, 64)], w_s)
        acc = ml.dot(xt[:, kk * 64:(kk + 1) * 64], w_s, acc)
      o.at[ml.ds(t, 64), ml.ds(n * 64, 64)].store(acc, mask=(rows < end)[:, None])


@mg.mgpu_kernel(out_shape=lambda vals, idx, b: S((vals.shape[0], b.shape[1]), F32),
                grid=lambda vals, idx, b: (vals.shape[0] // 64,))
def sparse24_matmul(vals, idx, b, c):         # 2:4 structured sparsity: two values and their positions per 4
  i = ml.program_id(0)
  v = vals.at[ml.ds(i * 64, 64)][...]
  ix = idx.at[ml.ds(i * 64, 64)][...]
  pos = ml.arange(vals.shape[1] * 2) % 4
  v0, v1 = jnp.repeat(v[:, 0::2], 4, axis=1), jnp.repeat(v[:, 1::2], 4, axis=1)
  i0, i1 = jnp.repeat(ix[:, 0::2], 4, axis=1), jnp.repeat(ix[:, 1::2], 4, axis=1)
  dense = ml.where(i0 == pos[None, :], v0, ml.where(i1 == pos[None, :], v1, 0.0)).astype(vals.dtype)
  b_s = ml.smem(b.shape)
  ml.copy(b, b_s)
  c.at[ml.ds(i * 64, 64)][...] = ml.dot(dense, b_s)


_A, _B = rnd((128, 256), 4, BF16), rnd((256, 128), 5, BF16)
_LAY = np.array([[1, 0, 0, 1], [0, 1, 1, 0]], np.int32)


def test_block_sparse_matmuls_skipping_blocks_in_a_pipelined_loop_compute():
  want = _masked(_A, _LAY) @ f32(_B)
  for kernel in (bsmm, bsmm_continue, bsmm_ws):
    np.testing.assert_allclose(kernel(_A, _B, _LAY, interpret=True), want, rtol=2e-2, atol=2e-2)
    export(kernel, _A, _B, _LAY)
  lay = np.array([[2, 1, 0, 2], [0, 2, 2, 1]], np.int32)
  np.testing.assert_allclose(bsmm_nested(_A, _B, lay, interpret=True), _masked(_A, lay > 1) @ f32(_B), rtol=2e-2,
                             atol=2e-2)
  export(bsmm_nested, _A, _B, lay)


def test_the_guarded_loads_are_pipelined():
  """The loads left the if: two pipelined load sites (two stages of each buffer, a wait a stage), not MG502."""
  ir = bsmm.typed_ir(*_specs(_A, _B, _LAY))
  assert ir.count("ref<SMEM, 2x64x64, bfloat16> = smemalloc") == 2, ir
  assert ir.count("waitload slot=") == 2, ir


def test_block_sparse_attention_skips_blocks():
  q, k, v = rnd((256, 64), 1, BF16), rnd((256, 64), 2, BF16), rnd((256, 64), 3, BF16)
  lay = np.tril(np.ones((4, 4), np.int32))
  lay[3, 1] = lay[2, 0] = 0
  np.testing.assert_allclose(f32(bs_attention(q, k, v, lay, interpret=True)), _attention(q, k, v, lay), atol=3e-2,
                             rtol=3e-2)
  export(bs_attention, q, k, v, lay)


def test_a_tail_guarded_by_a_length_reads_zeros_past_the_end_on_skipped_trips():
  x = rnd((192, 64), 9, BF16)
  for n in (64, 128, 192):
    np.testing.assert_allclose(ragged_sum(x, np.array([n], np.int32), interpret=True), f32(x)[:n].sum(0),
                               rtol=1e-4, atol=1e-3)
  export(ragged_sum, x, np.array([128], np.int32))


def test_a_window_read_from_a_table_under_the_if_stays_mg502_with_the_clamped_read():
  cnt, idx = np.array([2, 2], np.int32), np.array([[0, 3], [1, 2]], np.int32)
  e = expect(lut_guarded, _specs(_A, _B, cnt, idx), mg.PipelineError,
         "ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kb * 64, 64)], a_s)",
         "this pipelined loop's TMA load takes its window from a read of memory under a run-time if: a pipelined"
         " loop issues every trip's loads ahead of it (1 trip early), before its if could decide, and the read may"
         " lie outside its array on the trips the if skips",
         hint="read the entry above the if at an index kept inside the table (ml.minimum(p, n - 1) for a table of n"
              " entries), so that the loads may run on every trip while the if still skips the ml.dot; or walk only"
              " the blocks that count (for p in ml.range(count, stages=s): k = indices[first + p]), as a block-sparse"
              " matmul does; or drop stages= for a plain loop, for p in ml.range(a.shape[1] // 64):")
  line, col = where(lut_guarded, "idx[i, p]")
  assert e.notes[0].endswith(f":{line}:{col}: the read"), e.notes
  np.testing.assert_allclose(lut_hinted(_A, _B, cnt, idx, interpret=True), _masked(_A, _LAY) @ f32(_B), rtol=2e-2,
                             atol=2e-2)
  export(lut_hinted, _A, _B, cnt, idx)


def test_triton_lut_matmul_column_table_attention_moe_and_24_sparsity():
  lut_ptr, lut = np.array([0, 2, 4], np.int32), np.array([0, 3, 1, 2], np.int32)
  np.testing.assert_allclose(triton_bsmm(_A, _B, lut_ptr, lut, interpret=True), _masked(_A, _LAY) @ f32(_B),
                             rtol=2e-2, atol=2e-2)
  export(triton_bsmm, _A, _B, lut_ptr, lut)
  q, k, v = rnd((256, 64), 1, BF16), rnd((256, 64), 2, BF16), rnd((256, 64), 3, BF16)
  cols = np.array([[0, 1], [1, 3], [0, 2], [2, 3]], np.int32)
  lay = np.zeros((4, 4), np.int32)
  for r in range(4):
    lay[r, cols[r]] = 1
  np.testing.assert_allclose(f32(column_attention(q, k, v, cols, interpret=True)), _attention(q, k, v, lay),
                             atol=3e-2, rtol=3e-2)
  export(column_attention, q, k, v, cols)
  x, w = rnd((192, 128), 6, BF16), rnd((4, 128, 128), 7, BF16)
  offs = np.array([0, 64, 64, 150, 192], np.int32)          # expert 1 is empty
  want = np.zeros((192, 128), np.float32)
  for e in range(4):
    want[offs[e]:offs[e + 1]] = f32(x)[offs[e]:offs[e + 1]] @ f32(w[e])
  np.testing.assert_allclose(moe_gemm(x, w, offs, interpret=True), want, rtol=2e-2, atol=5e-2)
  export(moe_gemm, x, w, offs)
  rng = np.random.default_rng(0)
  vals = rng.standard_normal((128, 64)).astype(BF16)
  idx = np.stack([np.sort(rng.choice(4, 2, replace=False)) for _ in range(128 * 32)]).reshape(128, 64).astype(I32)
  dense = np.zeros((128, 128), np.float32)
  for r in range(128):
    for g in range(32):
      dense[r, g * 4 + idx[r, 2 * g:2 * g + 2]] = f32(vals[r, 2 * g:2 * g + 2])
  b = rnd((128, 64), 8, BF16)
  np.testing.assert_allclose(sparse24_matmul(vals, idx, b, interpret=True), dense @ f32(b), rtol=2e-2, atol=5e-2)
  export(sparse24_matmul, vals, idx, b)


# ---------------------------------------------------------------- (2) a last axis wider than a TMA box
@mg.mgpu_kernel(out_shape=lambda x: x)
def stage_576(x, o):
  x_s = ml.smem((64, 576))
  ml.copy(x, x_s)
  ml.copy(x_s, o)


@mg.mgpu_kernel(out_shape=lambda q, kv, **kw: S((q.shape[0], q.shape[1], 512), q.dtype),
                grid=lambda q, kv, **kw: (q.shape[0],))
def mla_decode(q, kv, o, *, scale: ml.constexpr):      # DeepSeek MLA: 576-wide rows, values the first 512
  b = ml.program_id(0)
  q_s, kv_s = ml.smem((q.shape[1], 576)), ml.smem((64, 576))
  ml.copy(q.at[b], q_s)
  m = ml.full((q.shape[1],), -jnp.inf, F32)
  l = ml.zeros((q.shape[1],), F32)
  acc = ml.zeros((q.shape[1], 512), F32)
  for j in ml.range(kv.shape[1] // 64):
    ml.copy(kv.at[b, ml.ds(j * 64, 64)], kv_s)
    s = ml.dot(q_s, kv_s.T) * scale
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    a = ml.exp(m - m_new)
    l = l * a + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(kv.dtype), kv_s.at[:, 0:512], acc * a[:, None])
    m = m_new
  o[b] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda kv: S((kv.shape[0],), F32), grid=lambda kv: (kv.shape[0] // 256,))
def latent_norms(kv, o):                      # pipelined 576-wide loads into an untiled buffer
  i = ml.program_id(0)
  kv_s = ml.smem((32, 576))
  for t in ml.range(8, stages=2):
    ml.copy(kv.at[ml.ds(i * 256 + t * 32, 32)], kv_s)
    r = kv_s[...].astype(F32)
    o.at[ml.ds(i * 256 + t * 32, 32)][...] = ml.sqrt(ml.sum(r * r, axis=1))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 576,))
def heads_576(x, o):                          # a run-time start proven a multiple of the piece
  j = ml.program_id(0)
  s = ml.smem((16, 576))
  ml.copy(x.at[:, ml.ds(j * 576, 576)], s)
  s[...] = s[...] * 2
  ml.copy(s, o.at[:, ml.ds(j * 576, 576)])


@mg.mgpu_kernel(out_shape=lambda q, cs: q, grid=lambda q, cs: (q.shape[0] // 64,))
def mla_rope(q, cs, o):                       # rotary embedding of the 64 rope columns of a 576-wide row, in place
  i = ml.program_id(0)
  q_s = ml.smem((64, 576))
  ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
  r = q_s.at[:, 512:576][...].astype(F32)
  c, s = cs.at[ml.ds(i * 64, 64), 0:32][...], cs.at[ml.ds(i * 64, 64), 32:64][...]
  x1, x2 = r[:, 0:32], r[:, 32:64]
  q_s.at[:, 512:576][...] = jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1).astype(q.dtype)
  ml.copy(q_s, o.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x, at: S((8, 576), x.dtype))
def wide_at_a_read_start(x, at, out):
  buf = ml.smem((8, 576), x.dtype)
  ml.copy(x.at[:, ml.ds(at[0], 576)], buf)
  out[...] = buf[...]


def test_576_wide_copies_compute_both_ways():
  x = rnd((64, 576), 1, BF16)
  np.testing.assert_array_equal(f32(stage_576(x, interpret=True)), f32(x))
  export(stage_576, x)
  kv = rnd((512, 576), 10, BF16)
  np.testing.assert_allclose(latent_norms(kv, interpret=True), np.linalg.norm(f32(kv), axis=1), rtol=1e-4)
  export(latent_norms, kv)
  x = rnd((16, 1152), 11, BF16)
  np.testing.assert_array_equal(f32(heads_576(x, interpret=True)), f32(x) * 2)
  export(heads_576, x)
  q, cs = rnd((128, 576), 12, BF16), rnd((128, 64), 13)
  want = f32(q).copy()
  x1, x2 = want[:, 512:544].copy(), want[:, 544:576].copy()
  want[:, 512:544], want[:, 544:576] = x1 * cs[:, :32] - x2 * cs[:, 32:], x2 * cs[:, :32] + x1 * cs[:, 32:]
  np.testing.assert_allclose(f32(mla_rope(q, cs, interpret=True)), want, rtol=2e-2, atol=2e-2)
  export(mla_rope, q, cs)


def test_an_mla_decode_of_576_wide_rows_computes():
  q, kv = rnd((2, 16, 576), 3, BF16), rnd((2, 128, 576), 4, BF16)
  scale = 1 / math.sqrt(576)
  got = mla_decode(q, kv, scale=scale, interpret=True)
  for b in range(2):
    qb, kb = np.float64(f32(q[b])), np.float64(f32(kv[b]))
    s = qb @ kb.T * scale
    p = np.exp(s - s.max(1, keepdims=True))
    np.testing.assert_allclose(f32(got[b]), p @ kb[:, :512] / p.sum(1, keepdims=True), atol=4e-2, rtol=4e-2)
  export(mla_decode, q, kv, scale=scale)


def test_the_wide_copy_is_one_box_of_pieces():
  """The untiled (64, 576) copy's box is (64, 3, 192): the module holds a TMA of three pieces of 192."""
  text = stage_576.mlir(S((64, 576), BF16))
  assert "64x3x192xbf16" in text, text[:2000]


@mg.mgpu_kernel(out_shape=lambda x, at: S((8, 576), x.dtype))
def wide_at_a_promised_start(x, at, out):     # the hint followed
  buf = ml.smem((8, 576), x.dtype)
  ml.copy(x.at[:, ml.ds(ml.multiple_of(at[0], 192), 576)], buf)
  out[...] = buf[...]


def test_a_wide_window_at_a_start_read_from_data_stays_mg401():
  expect(wide_at_a_read_start, [S((8, 1152), BF16), S((1,), I32)], mg.TmaLimitError, "ml.copy(x.at[",
         "TMA copies move at most 256 elements along each dimension; this window is (8, 576)",
         hint="a window wider than 256 is copied as one box of 3 pieces of 192 where its start is a multiple of 192:"
              " promise it, ml.ds(ml.multiple_of(at[0], 192), 576) (interpret mode checks the promise), or copy"
              " pieces of at most 256 into buffers of their own (buf0, buf1, ..., a dot over the row summing the"
              " pieces' dots)")
  x = rnd((8, 1152), 14, BF16)
  for at in (0, 384, 576):
    got = wide_at_a_promised_start(x, np.array([at], np.int32), interpret=True)
    np.testing.assert_array_equal(f32(got), f32(x)[:, at:at + 576])
  export(wide_at_a_promised_start, x, np.array([0], np.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((2, 8, 512), x.dtype), grid=(2,), cluster=(2,))
def multicast_wide(x, out):
  buf = ml.smem((8, 512), x.dtype)
  acc = ml.zeros((8, 512), x.dtype)
  for k in ml.range(4, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(k * 8, 8)], buf, multicast=0)
    acc += buf[...]
  out.at[ml.program_id(0)][...] = acc


def test_a_wide_multicast_load_stays_mg401():
  """A multicast load's shares are split among the cluster's CTAs: its last axis stays within a box."""
  expect(multicast_wide, [S((32, 512), F32)], mg.TmaLimitError, "ml.copy(x.at[ml.ds(k * 8, 8)], buf, multicast=0)",
         "TMA copies move at most 256 elements along each dimension; this window is (8, 512)")


# ---------------------------------------------------------------- (3) conv_general_dilated mixing channels
_CONVS = {     # name -> (the conv, the lhs's shape, the rhs's shape)
    "nhwc_3x3": (lambda v, k: L.conv_general_dilated(v, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                 (1, 8, 8, 16), (3, 3, 16, 32)),
    "nchw_3x3": (lambda v, k: L.conv_general_dilated(v, k, (1, 1), "SAME"), (1, 16, 8, 8), (32, 16, 3, 3)),
    "ncw_1d": (lambda v, k: L.conv_general_dilated(v, k, (1,), "SAME"), (1, 16, 64), (8, 16, 3)),
    "nwc_causal": (lambda v, k: L.conv_general_dilated(v, k, (1,), [(2, 0)], dimension_numbers=("NWC", "WIO", "NWC")),
                   (1, 64, 16), (3, 16, 32)),
    "nhwc_stride2": (lambda v, k: L.conv_general_dilated(v, k, (2, 2), "SAME",
                                                         dimension_numbers=("NHWC", "HWIO", "NHWC")),
                     (1, 16, 16, 16), (3, 3, 16, 16)),
    "nhwc_batch2": (lambda v, k: L.conv_general_dilated(v, k, (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                    (2, 8, 8, 16), (3, 3, 16, 16)),
    "nhwc_1x1": (lambda v, k: L.conv_general_dilated(v, k, (1, 1), "VALID", dimension_numbers=("NHWC", "HWIO", "NHWC")),
                 (1, 8, 8, 32), (1, 1, 32, 64)),
}


@mg.mgpu_kernel(out_shape=lambda x, w, *, conv: jax.eval_shape(_CONVS[conv][0], x, w))
def convolved(x, w, o, *, conv: ml.constexpr):
  o[...] = _CONVS[conv][0](x[...], w[...])


@mg.mgpu_kernel(out_shape=lambda x, w, bias: S((1, 8, 8, 32), x.dtype))
def conv_block(x, w, bias, o):                # a CNN block: conv 3x3, bias, relu
  y = jax.lax.conv_general_dilated(x[...], w[...], (1, 1), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))
  o[...] = jax.nn.relu(y + bias[...])


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 8, 64), x.dtype))
def conv_highest(x, w, o):
  o[...] = jax.lax.conv_general_dilated(x[...], w[...], (1,), "SAME", precision=jax.lax.Precision.HIGHEST)


@pytest.mark.parametrize("conv", sorted(_CONVS))
@pytest.mark.parametrize("dtype", [np.float32, BF16], ids=str)
def test_conv_mixing_channels_is_laxs(conv, dtype):
  """float32 operands are read as TF32 by the tensor cores (as XLA's GPU conv at its default precision)."""
  f, xs, ws = _CONVS[conv]
  x, w = rnd(xs, 1, dtype), rnd(ws, 2, dtype)
  got = f32(convolved(x, w, conv=conv, interpret=True))
  want = f32(f(jnp.asarray(x, F32), jnp.asarray(w, F32)).astype(dtype))
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=3e-2)
  export(convolved, x, w, conv=conv)


def test_a_conv_block_and_highest_precision():
  x, w, bias = rnd((1, 8, 8, 16), 1, BF16), rnd((3, 3, 16, 32), 2, BF16), rnd((32,), 3, BF16)
  want = jax.nn.relu(L.conv_general_dilated(jnp.asarray(x, F32), jnp.asarray(w, F32), (1, 1), "SAME",
                                            dimension_numbers=("NHWC", "HWIO", "NHWC")).astype(BF16) + bias)
  np.testing.assert_allclose(f32(conv_block(x, w, bias, interpret=True)), f32(want), rtol=3e-2, atol=5e-2)
  export(conv_block, x, w, bias)
  e = expect(conv_highest, [S((1, 16, 64), F32), S((8, 16, 3), F32)], mg.UnsupportedDtypeError,
             "jax.lax.conv_general_dilated(",
             "ml.dot with precision=Precision.HIGHEST: the tensor cores read float32 operands as TF32 (10 mantissa"
             " bits), lax.Precision.DEFAULT's meaning on the GPU")
  assert "tf32x3" in e.hint


# ---------------------------------------------------------------- the GPU (lowering changed: the wide copies)
@pytest.mark.gpu
def test_gpu_wide_copies_block_sparse_and_convs():
  x = rnd((64, 576), 1, BF16)
  np.testing.assert_array_equal(f32(jax.jit(stage_576)(x)), f32(x))
  kv = rnd((512, 576), 10, BF16)
  np.testing.assert_allclose(jax.jit(latent_norms)(kv), np.linalg.norm(f32(kv), axis=1), rtol=1e-3)
  x = rnd((16, 1152), 11, BF16)
  np.testing.assert_array_equal(f32(jax.jit(heads_576)(x)), f32(x) * 2)
  q, cs = rnd((128, 576), 12, BF16), rnd((128, 64), 13)
  np.testing.assert_allclose(f32(mla_rope(q, cs)), f32(mla_rope(q, cs, interpret=True)), rtol=2e-2, atol=2e-2)
  q, kvm = rnd((2, 16, 576), 3, BF16), rnd((2, 128, 576), 4, BF16)
  np.testing.assert_allclose(f32(mla_decode(q, kvm, scale=0.05)), f32(mla_decode(q, kvm, scale=0.05, interpret=True)),
                             rtol=3e-2, atol=3e-2)
  want = _masked(_A, _LAY) @ f32(_B)
  for kernel in (bsmm, bsmm_continue, bsmm_ws):
    np.testing.assert_allclose(kernel(_A, _B, _LAY), want, rtol=2e-2, atol=2e-2)
  x = rnd((192, 64), 9, BF16)
  np.testing.assert_allclose(ragged_sum(x, np.array([128], np.int32)), f32(x)[:128].sum(0), rtol=1e-3, atol=1e-2)
  for conv in ("nhwc_3x3", "nchw_3x3"):
    f, xs, ws = _CONVS[conv]
    x, w = rnd(xs, 1, BF16), rnd(ws, 2, BF16)
    np.testing.assert_allclose(f32(convolved(x, w, conv=conv)), f32(convolved(x, w, conv=conv, interpret=True)),
                               rtol=2e-2, atol=3e-2)
