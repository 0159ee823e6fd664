"""Attention variants in mgpu_dsl: a sliding window with logit softcapping, packed variable-length batches, and
a split-K decode step.

    python examples/attention_variants.py    # checks each against a jnp reference (interpreted without a GPU)

Each is examples/attention.py's online softmax with the change its users make:

- `local_attention`: each query sees the keys from `left` before it to `right` after it, and the key loop runs
  over the blocks the query tile's window touches only (a run-time first block: `ml.range(lo, hi, ...)`), with
  Gemma's softcap `cap * tanh(s / cap)` on the logits. The running max starts at a finite floor, so a block that
  masks a whole row leaves its statistics as they were.
- `varlen_attention`: sequences of different lengths packed into one (total, heads, head_dim) array, sequence b
  being rows cu_seqlens[b]:cu_seqlens[b + 1] (FlashAttention's varlen API). Each program reads its sequence's
  bounds from memory; the output is stored from registers under a mask, since a whole tile's TMA store would write
  the next sequence's rows, which another program writes (interpret mode reports that race, MG951).
- `decode_split` and `decode_combine`: a decode step, the last `nq` positions' queries against a long KV cache,
  the query heads that share a kv head packed as the rows of one tile, the keys split among `splits` programs a
  head (split-K, FlashDecoding), whose partial outputs and logsumexps the combine kernel weighs.
"""
from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

LOG2E = 1.4426950408889634
S = jax.ShapeDtypeStruct


@ml.inline
def softmax_step(m, l, acc, s, v_s, dtype):
  """One key block's update of the online softmax (natural exponentials) of masked, scaled logits s."""
  m_new = ml.maximum(m, ml.max(s, axis=1))
  alpha = ml.exp(m - m_new)
  p = ml.exp(s - m_new[:, None])
  l = l * alpha + ml.sum(p, axis=1)
  acc = ml.dot(p.astype(dtype), v_s, acc * alpha[:, None])
  return m_new, l, acc


# ---------------------------------------------------------------- a sliding window, softcapped
def _local_out(q, *_, **__):
  b, s, h, _d = q.shape
  return S(q.shape, q.dtype), S((b, h, s), jnp.float32)


@mg.mgpu_kernel(out_shape=_local_out, grid=lambda q, *_, bq, **__: (ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0]),
                block=lambda q, *_, bq, **__: 128 if bq == 64 else 256)
def local_attention(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                    scale: ml.constexpr, left: ml.constexpr, right: ml.constexpr, softcap: ml.constexpr = 0.0,
                    ws: ml.constexpr = False):
  """(batch, seq, heads, head_dim) q; k and v with a divisor of its heads. o, and lse (batch, heads, seq)."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  m = ml.full((bq,), -1e30, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  lo = ml.maximum(i * bq - left, 0) // bkv                          # the first key block of the tile's window
  hi = ml.minimum(ml.cdiv((i + 1) * bq + right, bkv), ml.cdiv(k.shape[1], bkv))
  rows = i * bq + ml.arange(bq)[:, None]
  for j in ml.range(lo, hi, stages=stages, warp_specialize=ws):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T) * scale
    if softcap:
      s = softcap * ml.tanh(s / softcap)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where((cols >= rows - left) & (cols <= rows + right) & (cols < k.shape[1]), s, -jnp.inf)
    m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
  q_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(q_s, o.at[b, ml.ds(i * bq, bq), h, :])                    # (a partial last tile: TMA clips it)
  r = i * bq + ml.arange(bq)
  lse.at[b, h, ml.ds(i * bq, bq)].store(m + ml.log(l), mask=r < q.shape[1])


# ---------------------------------------------------------------- packed variable-length sequences
def _varlen_out(q, k, v, cu, **_):
  return S(q.shape, q.dtype), S((q.shape[1], q.shape[0]), jnp.float32)


def _varlen_grid(q, k, v, cu, *, max_seqlen, bq, **_):
  return (ml.cdiv(max_seqlen, bq), q.shape[1], cu.shape[0] - 1)


@mg.mgpu_kernel(out_shape=_varlen_out, grid=_varlen_grid, block=lambda q, *_, bq, **__: 128 if bq == 64 else 256)
def varlen_attention(q, k, v, cu, o, lse, *, max_seqlen: ml.constexpr, bq: ml.constexpr, bkv: ml.constexpr,
                     stages: ml.constexpr, scale: ml.constexpr, causal: ml.constexpr):
  """q (total, heads, d), k and v (total, kv_heads, d): sequence b is rows cu[b]:cu[b + 1]; lse (heads, total)."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[1] // k.shape[1])
  d = q.shape[2]
  start = cu[b]
  n = cu[b + 1] - start
  if i * bq < n:                                     # tiles past this sequence's end have nothing to do
    q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
    ml.copy(q.at[ml.ds(start + i * bq, bq), h, :], q_s)
    rows = i * bq + ml.arange(bq)
    m = ml.full((bq,), -1e30, jnp.float32)
    l = ml.zeros((bq,), jnp.float32)
    acc = ml.zeros((bq, d), jnp.float32)
    blocks = ml.cdiv(n, bkv)
    if causal:
      blocks = ml.minimum(ml.cdiv((i + 1) * bq, bkv), blocks)
    for j in ml.range(blocks, stages=stages):
      ml.copy(k.at[ml.ds(start + j * bkv, bkv), hk, :], k_s)
      ml.copy(v.at[ml.ds(start + j * bkv, bkv), hk, :], v_s)
      cols = j * bkv + ml.arange(bkv)
      keep = cols[None, :] < n                       # the next sequence's keys (or zeros past the end) are out
      if causal:
        keep = keep & (cols[None, :] <= rows[:, None])
      s = ml.where(keep, ml.dot(q_s, k_s.T) * scale, -math.inf)
      m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
    # rows past n are the next sequence's, which another program writes: stored from registers under a mask
    o.at[ml.ds(start + i * bq, bq), h, :].store((acc / l[:, None]).astype(o.dtype), mask=(rows < n)[:, None])
    lse.at[h, ml.ds(start + i * bq, bq)].store(m + ml.log(l), mask=rows < n)


# ---------------------------------------------------------------- a decode step, split along the keys
def _split_out(q, k, v, *, splits, **_):
  b, nq, h, d = q.shape
  return S((b, splits, nq, h, d), jnp.float32), S((b, splits, nq, h), jnp.float32)


@mg.mgpu_kernel(out_shape=_split_out, grid=lambda q, k, v, *, splits, **_: (splits, k.shape[2], q.shape[0]), block=128)
def decode_split(q, k, v, o_part, lse_part, *, splits: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """The last nq positions' queries (causal among themselves) of each kv head's g query heads, packed as nq * g
  rows, against split `sp` of the key blocks: partial outputs and their logsumexps."""
  sp, hk, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  nq, g, d, skv = q.shape[1], q.shape[2] // k.shape[2], q.shape[3], k.shape[1]
  per = ml.cdiv(ml.cdiv(skv, bkv), splits)           # key blocks a split
  lo = sp * per
  hi = ml.minimum(lo + per, ml.cdiv(skv, bkv))
  qv = q.at[b, :, ml.ds(hk * g, g), :][...].reshape(nq * g, d)
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  m = ml.full((nq * g,), -1e30, jnp.float32)
  l = ml.zeros((nq * g,), jnp.float32)
  acc = ml.zeros((nq * g, d), jnp.float32)
  pos = skv - nq + ml.arange(nq * g)[:, None] // g   # row r is query r // g
  for j in ml.range(lo, hi, stages=2):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where(cols <= pos, ml.dot(qv, k_s.T) * scale, -math.inf)
    m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
  o_part.at[b, sp, :, ml.ds(hk * g, g), :][...] = (acc / l[:, None]).reshape(nq, g, d)
  lse_part.at[b, sp, :, ml.ds(hk * g, g)][...] = (m + ml.log(l)).reshape(nq, g)


def _combined(o_part, lse_part, *, dtype):
  b, _, nq, h, d = o_part.shape
  return S((b, nq, h, d), dtype), S((b, nq, h), jnp.float32)


@mg.mgpu_kernel(out_shape=_combined, grid=lambda o_part, lse_part, **_: (o_part.shape[0],))
def decode_combine(o_part, lse_part, o, lse, *, dtype: ml.constexpr):
  """The splits' partial outputs weighted by exp(their lse - the total's), a split at a time: the whole
  (splits, nq, heads, d) block in registers spilled 1108 bytes a thread (ptxas, 8 splits of 2 x 16 x 128)."""
  b = ml.program_id(0)
  part_lse = lse_part.at[b][...]                     # (splits, nq, heads)
  mx = jnp.max(part_lse, axis=0)
  total = jnp.sum(jnp.exp(part_lse - mx), axis=0)
  acc = ml.zeros(o.shape[1:], jnp.float32)           # (nq, heads, d)
  for sp in ml.static_range(o_part.shape[1]):
    w = jnp.exp(lse_part.at[b, sp][...] - mx) / total
    acc += o_part.at[b, sp][...] * w[..., None]
  o.at[b][...] = acc.astype(o.dtype)
  lse.at[b][...] = mx + jnp.log(total)


def decode(q, k, v, *, splits=4, bkv=128, interpret=None):
  """(o, lse (batch, nq, heads)) of a decode step: q (batch, nq, heads, d) the last nq positions' queries."""
  parts = decode_split(q, k, v, splits=splits, bkv=bkv, scale=1.0 / math.sqrt(q.shape[-1]), interpret=interpret)
  return decode_combine(*parts, dtype=q.dtype, interpret=interpret)


# ---------------------------------------------------------------- references (float32 jnp)
def reference(q, k, v, scale, mask=None, softcap=0.0):
  """(o, lse (batch, heads, sq)) of softmax(softcapped q @ k.T * scale, masked) @ v, (batch, seq, heads, d)."""
  g = q.shape[2] // k.shape[2]
  k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
  s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
  if softcap:
    s = softcap * jnp.tanh(s / softcap)
  if mask is not None:
    s = jnp.where(mask, s, -jnp.inf)
  lse = jax.nn.logsumexp(s, axis=-1)
  return jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(s - lse[..., None]), v.astype(jnp.float32)), lse


_Q = S((2, 1000, 8, 128), jnp.bfloat16)
_KV = S((2, 1000, 2, 128), jnp.bfloat16)
mg.check_specs(local_attention, _Q, _KV, _KV, bq=128, bkv=64, stages=3, scale=0.088, left=256, right=0, softcap=50.0,
               ws=True)
mg.check_specs(varlen_attention, S((3000, 8, 64), jnp.float16), S((3000, 2, 64), jnp.float16),
               S((3000, 2, 64), jnp.float16), S((5,), jnp.int32), max_seqlen=1024, bq=128, bkv=64, stages=2,
               scale=0.125, causal=True)
mg.check_specs(decode_split, S((4, 2, 16, 128), jnp.bfloat16), S((4, 8192, 4, 128), jnp.bfloat16),
               S((4, 8192, 4, 128), jnp.bfloat16), splits=8, bkv=128, scale=0.088)
mg.check_specs(decode_combine, S((4, 8, 2, 16, 128), jnp.float32), S((4, 8, 2, 16), jnp.float32), dtype=jnp.bfloat16)


def main():
  on_gpu = any(dev.platform == "gpu" for dev in jax.devices())
  interpret = not on_gpu
  rng = np.random.default_rng(0)
  normal = lambda shape, dtype, sc=1.0: jnp.asarray((rng.standard_normal(shape, np.float32) * sc).astype(dtype))
  rel = lambda got, want: float(jnp.linalg.norm(got.astype(jnp.float32) - want) / jnp.linalg.norm(want))
  where = "" if on_gpu else " (interpret mode)"

  seq, d = (2048, 128) if on_gpu else (300, 64)
  q, k, v = (normal((1, seq, 4, d), jnp.bfloat16, 3.0 if n < 2 else 1.0) for n in range(3))
  k, v = k[:, :, :2], v[:, :, :2]
  left, right, cap, scale = 128, 16, 30.0, 1.0 / math.sqrt(d)
  o, lse = local_attention(q, k, v, bq=128, bkv=64, stages=2, scale=scale, left=left, right=right, softcap=cap,
                           interpret=interpret)
  r, c = jnp.arange(seq)[:, None], jnp.arange(seq)[None, :]
  want, want_lse = reference(q, k, v, scale, (c >= r - left) & (c <= r + right), cap)
  print(f"local attention, window ({left}, {right}), softcap {cap}, {q.shape}: error {rel(o, want):.1e}{where}")
  assert rel(o, want) < 3e-2 and rel(lse, want_lse) < 1e-4

  lengths = [700, 3, 1200, 145] if on_gpu else [100, 3, 150, 45]
  cu = jnp.asarray(np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32))
  q, k, v = (normal((sum(lengths), 4, 64), jnp.float16, 3.0 if n < 2 else 1.0) for n in range(3))
  o, _ = varlen_attention(q, k, v, cu, max_seqlen=max(lengths), bq=128, bkv=64, stages=2, scale=0.125, causal=True,
                          interpret=interpret)
  err = 0.0
  for a, e in zip(np.asarray(cu[:-1]), np.asarray(cu[1:])):
    rr, cc = jnp.arange(e - a)[:, None], jnp.arange(e - a)[None, :]
    err = max(err, rel(o[a:e], reference(q[None, a:e], k[None, a:e], v[None, a:e], 0.125, cc <= rr)[0][0]))
  print(f"varlen causal attention, lengths {lengths}: worst error {err:.1e}{where}")
  assert err < 1e-2

  skv = 8192 if on_gpu else 1000
  q = normal((2, 2, 8, 128), jnp.bfloat16, 3.0)
  k, v = normal((2, skv, 2, 128), jnp.bfloat16, 3.0), normal((2, skv, 2, 128), jnp.bfloat16)
  o, lse = decode(q, k, v, splits=4, interpret=interpret)
  rr, cc = jnp.arange(2)[:, None], jnp.arange(skv)[None, :]
  want, want_lse = reference(q, k, v, 1.0 / math.sqrt(128), cc <= rr + skv - 2)
  print(f"split-K decode, 2 queries x 8 heads against {skv} keys: error {rel(o, want):.1e}{where}")
  assert rel(o, want) < 3e-2 and rel(lse, want_lse.transpose(0, 2, 1)) < 1e-4


if __name__ == "__main__":
  main()
