"""Probe 68a's corpus, part one: DeepSeek's multi-head latent attention decode (FlashMLA) and native sparse attention
(NSA), written as a kernel engineer ports them; probe68a_cases.py pairs each with inputs and a jnp reference."""
import math

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import kv_block, online_step, q_tile, softmax_state

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32
LOG2E = 1.4426950408889634


# ------------------------------------------------------------------ FlashMLA decode: latent (512) + rope (64) split
def _mla_out(qn, *_, **__):
  return S(qn.shape, qn.dtype), S(qn.shape[:2], F32)


@ml.inline
def halves_step(m, l, a0, a1, s, v_s, dtype, half):
  """online_step with the value columns in two accumulators of 256 (FlashMLA's split of its 512 between two
  warpgroups, written by hand: MG402's hint for a 512-column p @ v)."""
  m_new = ml.maximum(m, ml.max(s, axis=1))
  alpha = ml.exp(m - m_new)
  p = ml.exp(s - m_new[:, None])
  pb = p.astype(dtype)
  a0 = ml.dot(pb, v_s.at[:, ml.ds(0, half)], a0 * alpha[:, None])
  return m_new, l * alpha + ml.sum(p, axis=1), a0, ml.dot(pb, v_s.at[:, ml.ds(half, half)], a1 * alpha[:, None])


@mg.mgpu_kernel(out_shape=_mla_out, grid=lambda qn, *_, **__: (qn.shape[0],))
def mla_decode_split_dims(qn, qp, ckv, kpe, o, lse, *, bkv: ml.constexpr, scale: ml.constexpr,
                          halves: ml.constexpr = False):
  """One decode token a batch, every query head a row: s = q_nope @ c.T + q_pe @ k_pe.T, o = p @ c; `halves`: the
  512 latent columns in two accumulators, as MG402's hint writes it."""
  b = ml.program_id(0)
  h, dc, dr = qn.shape[1], qn.shape[2], qp.shape[2]
  qn_s, qp_s = ml.smem((h, dc)), ml.smem((h, dr))
  ml.copy(qn.at[b], qn_s)
  ml.copy(qp.at[b], qp_s)
  c_s, r_s = ml.smem((bkv, dc)), ml.smem((bkv, dr))
  m, l, acc = softmax_state(h, dc // 2 if halves else dc)
  acc1 = ml.zeros((h, dc // 2), F32)
  for j in ml.range(ckv.shape[1] // bkv, stages=2):
    ml.copy(ckv.at[b, ml.ds(j * bkv, bkv)], c_s)
    ml.copy(kpe.at[b, ml.ds(j * bkv, bkv)], r_s)
    s = ml.dot(qp_s, r_s.T, ml.dot(qn_s, c_s.T)) * scale
    if halves:
      m, l, acc, acc1 = halves_step(m, l, acc, acc1, s, c_s, qn.dtype, dc // 2)
    else:
      m, l, acc = online_step(m, l, acc, s, c_s, qn.dtype)
  if halves:
    o.at[b, :, ml.ds(0, dc // 2)][...] = (acc / l[:, None]).astype(o.dtype)
    o.at[b, :, ml.ds(dc // 2, dc // 2)][...] = (acc1 / l[:, None]).astype(o.dtype)
  else:
    o.at[b][...] = (acc / l[:, None]).astype(o.dtype)
  lse.at[b][...] = m + ml.log(l)


@mg.mgpu_kernel(out_shape=lambda q, kv, *, dv, **_: (S(q.shape[:2] + (dv,), q.dtype), S(q.shape[:2], F32)),
                grid=lambda q, *_, **__: (q.shape[0],))
def mla_decode_shared_kv(q, kv, o, lse, *, dv: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr,
                         stages: ml.constexpr = 2):
  """FlashMLA's own layout: one (seq, 576) latent cache a batch; K is all 576 columns, V its first 512."""
  b = ml.program_id(0)
  h, d = q.shape[1], q.shape[2]
  q_s = ml.smem((h, d))
  ml.copy(q.at[b], q_s)
  kv_s = ml.smem((bkv, d))
  m, l, acc = softmax_state(h, dv)
  for j in ml.range(kv.shape[1] // bkv, stages=stages):
    ml.copy(kv.at[b, ml.ds(j * bkv, bkv)], kv_s)
    s = ml.dot(q_s, kv_s.T) * scale
    m, l, acc = online_step(m, l, acc, s, kv_s.at[:, ml.ds(0, dv)], q.dtype)
  o.at[b][...] = (acc / l[:, None]).astype(o.dtype)
  lse.at[b][...] = m + ml.log(l)


def _mla_paged_out(q, kv_pages, tables, lens, *, dv, splits, **_):
  b, h, _d = q.shape
  return S((b, splits, h, dv), F32), S((b, splits, h), F32)


@mg.mgpu_kernel(out_shape=_mla_paged_out, grid=lambda q, kv_pages, tables, lens, *, splits, **_: (q.shape[0], splits))
def mla_paged_split(q, kv_pages, tables, lens, o_part, lse_part, *, dv: ml.constexpr, splits: ml.constexpr,
                    scale: ml.constexpr, stages: ml.constexpr = 2):
  """Paged latent cache (pages, page, 576) with a block table and per-batch lengths, split-KV: each split a run of
  pages; partial outputs and logsumexps for the combine kernel."""
  b, sp = ml.program_id(0), ml.program_id(1)
  h, d, page = q.shape[1], q.shape[2], kv_pages.shape[1]
  q_s = ml.smem((h, d))
  ml.copy(q.at[b], q_s)
  kv_s = ml.smem((page, d))
  n = lens[b]
  pages = ml.cdiv(n, page)
  per = ml.cdiv(tables.shape[1], splits)
  lo = sp * per
  hi = ml.minimum(lo + per, pages)
  m, l, acc = softmax_state(h, dv)
  for j in ml.range(lo, hi, stages=stages):
    ml.copy(kv_pages.at[tables[b, j]], kv_s)
    cols = j * page + ml.arange(page)
    s = ml.where(cols[None, :] < n, ml.dot(q_s, kv_s.T) * scale, -math.inf)
    m, l, acc = online_step(m, l, acc, s, kv_s.at[:, ml.ds(0, dv)], q.dtype)
  o_part.at[b, sp][...] = acc / l[:, None]
  lse_part.at[b, sp][...] = m + ml.log(l)


@mg.mgpu_kernel(out_shape=lambda o_part, lse_part, *, dtype: (S((o_part.shape[0],) + o_part.shape[2:], dtype),
                                                               S((o_part.shape[0], o_part.shape[2]), F32)),
                grid=lambda o_part, lse_part, **_: (o_part.shape[0],))
def mla_combine(o_part, lse_part, o, lse, *, dtype: ml.constexpr):
  """FlashMLA's combine: splits that saw no page have lse -inf (l = 0 gives log 0) and weigh nothing."""
  b = ml.program_id(0)
  lp = lse_part.at[b][...]                               # (splits, h)
  mx = ml.max(lp, axis=0)
  w = ml.exp(lp - mx[None, :])
  total = ml.sum(w, axis=0)
  acc = ml.zeros(o.shape[1:], F32)
  for sp in ml.static_range(o_part.shape[1]):
    part = o_part.at[b, sp][...]
    wt = w[sp] / total
    acc += ml.where(wt[:, None] > 0, part, 0.0) * wt[:, None]
  o.at[b][...] = acc.astype(o.dtype)
  lse.at[b][...] = mx + ml.log(total)


# ------------------------------------------------------------------ NSA: compression, selection, sliding window
@mg.mgpu_kernel(out_shape=lambda k, *, bs, **_: S((k.shape[0], k.shape[1] // bs, k.shape[2]), k.dtype),
                grid=lambda k, *, bs, **_: (k.shape[0],))
def nsa_compress(k, kc, *, bs: ml.constexpr):
  """Mean-pooled key blocks (NSA's compression, its MLP left out): kc[h, c] = mean(k[h, c*bs:(c+1)*bs])."""
  h = ml.program_id(0)
  x = k.at[h][...].astype(F32).reshape(k.shape[1] // bs, bs, k.shape[2])
  kc.at[h][...] = ml.sum(x, axis=1).astype(kc.dtype) * (1.0 / bs)


def _nsa_cmp_out(q, kc, vc, *, bs, **_):
  return S(q.shape, q.dtype), S((q.shape[0], q.shape[1], kc.shape[1]), F32)


@mg.mgpu_kernel(out_shape=_nsa_cmp_out, grid=lambda q, kc, vc, *, bq, **_: (q.shape[1] // bq, q.shape[0]))
def nsa_compressed_attention(q, kc, vc, o, p_out, *, bq: ml.constexpr, bs: ml.constexpr, scale: ml.constexpr):
  """Attention over compressed blocks: query t sees block c when the block ends at or before t
  ((c + 1) * bs - 1 <= t). Also the probabilities (the block scores selection reads). A row with no complete
  block yet (t < bs - 1) outputs zeros."""
  i, h = ml.program_id(0), ml.program_id(1)
  nc = kc.shape[1]
  q_s, k_s, v_s = q_tile(q, h, i, bq, nc)
  ml.copy(kc.at[h], k_s)
  ml.copy(vc.at[h], v_s)
  rows = i * bq + ml.arange(bq)[:, None]
  cols = ml.arange(nc)[None, :]
  ok = (cols + 1) * bs - 1 <= rows
  s = ml.where(ok, ml.dot(q_s, k_s.T) * scale, -1e30)
  mx = ml.max(s, axis=1, keepdims=True)
  e = ml.where(ok, ml.exp(s - mx), 0.0)
  den = ml.sum(e, axis=1, keepdims=True)
  p = e / ml.maximum(den, 1e-30)
  p_out.at[h, ml.ds(i * bq, bq)][...] = p
  o.at[h, ml.ds(i * bq, bq)][...] = ml.dot(p.astype(q.dtype), v_s).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda p, *, topk, **_: S(p.shape[1:2] + (topk,), I32),
                grid=lambda p, *, bq, **_: (p.shape[1] // bq,))
def nsa_select_topk(p, idx, *, bq: ml.constexpr, topk: ml.constexpr, bs: ml.constexpr):
  """Block importance summed over the heads of the group (one group here), the query's own block and block 0
  forced in, then the top-k blocks per query (NSA's selection). Blocks past the query are -1 (no block)."""
  i = ml.program_id(0)
  score = ml.sum(p.at[:, ml.ds(i * bq, bq)][...], axis=0)             # (bq, nc)
  rows = i * bq + ml.arange(bq)[:, None]
  cols = ml.arange(p.shape[2])[None, :]
  score = ml.where((cols == rows // bs) | (cols == 0), 1e9, score)
  score = ml.where(cols * bs <= rows, score, -1.0)
  vals, ids = jax.lax.top_k(score, topk)
  idx.at[ml.ds(i * bq, bq)][...] = ml.where(vals >= 0, ids, -1)


@mg.mgpu_kernel(out_shape=lambda q, k, v, idx, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, idx, **_: (q.shape[1], q.shape[0]))
def nsa_selected_attention(q, k, v, idx, o, *, bs: ml.constexpr, scale: ml.constexpr):
  """One query a program: attention over its selected key blocks gathered by index (the NSA kernel's
  inner loop, causal inside the query's own block), blocks of id -1 skipped."""
  t, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  qv = q.at[h, t][...].astype(F32)
  m = ml.full((), -1e30, F32)
  l = ml.zeros((), F32)
  acc = ml.zeros((d,), F32)
  for n in range(idx.shape[1]):
    blk = idx[t, n]
    if blk >= 0:
      kb = k.at[h, ml.ds(blk * bs, bs)][...].astype(F32)
      vb = v.at[h, ml.ds(blk * bs, bs)][...].astype(F32)
      s = ml.sum(kb * qv[None, :], axis=1) * scale
      s = ml.where(blk * bs + ml.arange(bs) <= t, s, -1e30)
      m_new = ml.maximum(m, ml.max(s))
      p = ml.exp(s - m_new)
      alpha = ml.exp(m - m_new)
      l = l * alpha + ml.sum(p)
      acc = acc * alpha + ml.sum(p[:, None] * vb, axis=0)
      m = m_new
  o.at[h, t][...] = (acc / l).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, idx, **_: S(q.shape, q.dtype),
                grid=lambda q, k, v, idx, *, bq, **_: (q.shape[1] // bq, q.shape[0]))
def nsa_selected_tiles(q, k, v, idx, o, *, bq: ml.constexpr, bs: ml.constexpr, scale: ml.constexpr):
  """Selected attention a tile of queries at a time (bq queries share one selection, the NSA paper's group of
  queries: idx is (t // bq, topk)): each selected block copied by TMA at its gathered index, on the tensor cores."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bs)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  for n in ml.range(idx.shape[1], stages=2):
    blk = ml.maximum(idx[i, n], 0)
    kv_block(k, v, h, blk, bs, k_s, v_s)
    cols = blk * bs + ml.arange(bs)[None, :]
    keep = (cols <= rows) & (idx[i, n] >= 0)
    s = ml.where(keep, ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, *_, bq, **__: (q.shape[1] // bq, q.shape[0]))
def nsa_window(q, k, v, o, *, bq: ml.constexpr, bkv: ml.constexpr, window: ml.constexpr, scale: ml.constexpr):
  """NSA's sliding-window branch: query t sees keys t - window + 1 .. t."""
  i, h = ml.program_id(0), ml.program_id(1)
  d = q.shape[2]
  q_s, k_s, v_s = q_tile(q, h, i, bq, bkv)
  rows = i * bq + ml.arange(bq)[:, None]
  m, l, acc = softmax_state(bq, d)
  lo = ml.maximum(i * bq - window + 1, 0) // bkv
  hi = ml.cdiv((i + 1) * bq, bkv)
  for j in ml.range(lo, hi, stages=2):
    kv_block(k, v, h, j, bkv, k_s, v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where((cols <= rows) & (cols > rows - window), ml.dot(q_s, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[h, ml.ds(i * bq, bq)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda oc, os_, ow, x, wg: S(oc.shape, oc.dtype),
                grid=lambda oc, os_, ow, x, wg: (oc.shape[0], oc.shape[1] // 64))
def nsa_gate_mix(oc, os_, ow, x, wg, o):
  """The gated mix of the three branches: g = sigmoid(x @ wg) per (token, head, branch)."""
  h, i = ml.program_id(0), ml.program_id(1)
  xt = x.at[ml.ds(i * 64, 64)][...]                                   # (64, dm)
  g = ml.sigmoid(ml.dot(xt, wg.at[h][...]).astype(F32))             # (64, 3)
  r = ml.ds(i * 64, 64)
  mix = (g[:, 0:1] * oc.at[h, r][...].astype(F32) + g[:, 1:2] * os_.at[h, r][...].astype(F32)
         + g[:, 2:3] * ow.at[h, r][...].astype(F32))
  o.at[h, r][...] = mix.astype(o.dtype)


# ------------------------------------------------------------------ MLA decode, the 512 value columns split among programs
@mg.mgpu_kernel(out_shape=lambda q, kv, *, dv, **_: S(q.shape[:2] + (dv,), q.dtype),
                grid=lambda q, kv, *, dv, bn, **_: (q.shape[0], dv // bn))
def mla_decode_vsplit(q, kv, o, *, dv: ml.constexpr, bn: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """The shared latent cache; each program the scores over all 576 columns and the output's columns
  c*bn .. (c+1)*bn (FlashMLA splits them between its two warpgroups; here between programs)."""
  b, c = ml.program_id(0), ml.program_id(1)
  h, d = q.shape[1], q.shape[2]
  q_s = ml.smem((h, d))
  ml.copy(q.at[b], q_s)
  kv_s = ml.smem((bkv, d))
  m, l, acc = softmax_state(h, bn)
  for j in ml.range(kv.shape[1] // bkv, stages=2):
    ml.copy(kv.at[b, ml.ds(j * bkv, bkv)], kv_s)
    s = ml.dot(q_s, kv_s.T) * scale
    m, l, acc = online_step(m, l, acc, s, kv_s.at[:, ml.ds(c * bn, bn)], q.dtype)
  o.at[b, :, ml.ds(c * bn, bn)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, kv, *, dv, **_: S(q.shape[:2] + (dv,), q.dtype),
                grid=lambda q, kv, **_: (q.shape[0],), block=256)
def mla_decode_two_halves(q, kv, o, *, dv: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """One program a batch, two accumulators of 256 value columns each (FlashMLA's split written by hand)."""
  b = ml.program_id(0)
  h, d = q.shape[1], q.shape[2]
  half = dv // 2
  q_s = ml.smem((h, d))
  ml.copy(q.at[b], q_s)
  kv_s = ml.smem((bkv, d))
  m, l, a0 = softmax_state(h, half)
  a1 = ml.zeros((h, half), F32)
  for j in ml.range(kv.shape[1] // bkv):
    ml.copy(kv.at[b, ml.ds(j * bkv, bkv)], kv_s)
    m, l, a0, a1 = halves_step(m, l, a0, a1, ml.dot(q_s, kv_s.T) * scale, kv_s, q.dtype, half)
  o.at[b, :, ml.ds(0, half)][...] = (a0 / l[:, None]).astype(o.dtype)
  o.at[b, :, ml.ds(half, half)][...] = (a1 / l[:, None]).astype(o.dtype)


@ml.inline
def kv_cols(kv, c, bn, fixed):
  """Columns c * bn .. (c + 1) * bn of the register tile kv: as first written (MG003), or as its hint says."""
  if fixed:
    return jax.lax.dynamic_slice_in_dim(kv, c * bn, bn, axis=1)
  return kv[:, c * bn:(c + 1) * bn]


@mg.mgpu_kernel(out_shape=lambda q, pages, tables, lens, *, dv, **_: S(q.shape[:2] + (dv,), q.dtype),
                grid=lambda q, pages, tables, lens, *, dv, bn, **_: (q.shape[0], dv // bn))
def mla_paged_gather(q, pages, tables, lens, o, *, dv: ml.constexpr, bn: ml.constexpr, scale: ml.constexpr,
                     fixed: ml.constexpr = False):
  """Pallas's paged form: a block of pages gathered at once by their ids, k = pages[ids].reshape(...)."""
  b, c = ml.program_id(0), ml.program_id(1)
  h, d, page = q.shape[1], q.shape[2], pages.shape[1]
  per = 2
  qt = q.at[b][...]
  n = lens[b]
  m, l, acc = softmax_state(h, bn)
  for j in range(ml.cdiv(ml.cdiv(n, page), per)):
    ids = tables.at[b, ml.ds(j * per, per)][...]
    kv = pages[ids].reshape(per * page, d)
    cols = j * per * page + ml.arange(per * page)
    s = ml.where(cols[None, :] < n, jnp.dot(qt, kv.T, preferred_element_type=F32) * scale, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(s - m_new[:, None])
    l = l * alpha + ml.sum(p, axis=1)
    acc = acc * alpha[:, None] + jnp.dot(p.astype(q.dtype), kv_cols(kv, c, bn, fixed), preferred_element_type=F32)
    m = m_new
  o.at[b, :, ml.ds(c * bn, bn)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, pages, tables, lens, *, dv, **_: S(q.shape[:2] + (dv,), q.dtype),
                grid=lambda q, pages, tables, lens, *, dv, bn, **_: (q.shape[0], dv // bn))
def mla_paged_copy(q, pages, tables, lens, o, *, dv: ml.constexpr, bn: ml.constexpr, scale: ml.constexpr,
                   per: ml.constexpr):
  """mla_paged_gather as MG402's hint writes it: `per` pages a step copied by TMA into one buffer at their ids."""
  b, c = ml.program_id(0), ml.program_id(1)
  h, d, page = q.shape[1], q.shape[2], pages.shape[1]
  qt = q.at[b][...]
  n = lens[b]
  m, l, acc = softmax_state(h, bn)
  buf = ml.smem((per * page, d))
  for j in range(ml.cdiv(ml.cdiv(n, page), per)):
    ids = tables.at[b, ml.ds(j * per, per)][...]
    for k in ml.static_range(per):
      ml.copy(pages.at[ids[k]], buf.at[ml.ds(k * page, page)])
    cols = j * per * page + ml.arange(per * page)
    s = ml.where(cols[None, :] < n, ml.dot(qt, buf.T) * scale, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(s - m_new[:, None])
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), buf.at[:, ml.ds(c * bn, bn)], acc * alpha[:, None])
    m = m_new
  o.at[b, :, ml.ds(c * bn, bn)][...] = (acc / l[:, None]).astype(o.dtype)
