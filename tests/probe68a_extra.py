"""Probe 68a's corpus, part five: what sits around attention in a model (vLLM's reshape_and_cache into a paged cache,
rotary embeddings of MLA's rope dims, an int8 KV cache with per-token scales, ring attention's combine of partial
outputs), FlashMLA with two query tokens a step (MTP), NSA's selected attention with a GQA group's heads as rows,
and backward kernels at ragged lengths and with dropout recomputed from the hash."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe68a_lib import causal_dkdv_step, hash_keep, kv_block, kv_grad_tile, online_step, softmax_state

S = jax.ShapeDtypeStruct
F32, BF16, I32, U32, I8 = jnp.float32, jnp.bfloat16, jnp.int32, jnp.uint32, jnp.int8


@mg.mgpu_kernel(out_shape=lambda k, v, slots, kc, vc: (S(kc.shape, kc.dtype), S(vc.shape, vc.dtype)),
                grid=lambda k, v, slots, kc, vc: (k.shape[0] // 8,), input_output_aliases={3: 0, 4: 1})
def reshape_and_cache(k, v, slots, kc, vc, kc_out, vc_out):
  """vLLM's reshape_and_cache: token t's (kv_heads, d) key and value into slot slots[t] of the paged cache
  (pages, page, kv_heads, d), 8 tokens a program; a slot of -1 is a padding token and skipped."""
  i = ml.program_id(0)
  page = kc.shape[1]
  for t in range(8):
    slot = slots[i * 8 + t]
    if slot >= 0:
      kc_out.at[slot // page, slot % page][...] = k.at[i * 8 + t][...]
      vc_out.at[slot // page, slot % page][...] = v.at[i * 8 + t][...]


@mg.mgpu_kernel(out_shape=lambda x, cos, sin, pos: S(x.shape, x.dtype), grid=lambda x, cos, sin, pos: (x.shape[0] // 64,))
def rope_neox(x, cos, sin, pos, o):
  """NeoX-style rotary embedding of (tokens, heads, 64) rope dims (MLA's k_pe / q_pe) at positions pos:
  x * cos + rotate_half(x) * sin, cos and sin tables (max_pos, 32) gathered at pos."""
  i = ml.program_id(0)
  p = pos.at[ml.ds(i * 64, 64)][...]
  c = cos[p, :]                                                       # (64, 32)
  s = sin[p, :]
  for h in range(x.shape[1]):
    xv = x.at[ml.ds(i * 64, 64), h, :][...].astype(F32)
    x1, x2 = xv[:, :32], xv[:, 32:]
    out = ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1)
    o.at[ml.ds(i * 64, 64), h, :][...] = out.astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype), grid=lambda q, k, *_, **__: (k.shape[2], q.shape[0]))
def decode_int8_kv(q, k, v, ks, vs, lens, o, *, bkv: ml.constexpr, scale: ml.constexpr):
  """Decode against an int8 cache (b, seq, kv_heads, d) with per-token float32 scales (b, seq, kv_heads): blocks
  read into registers, dequantised to bfloat16, and the group's query heads as rows."""
  hk, b = ml.program_id(0), ml.program_id(1)
  g, d = q.shape[1] // k.shape[2], q.shape[2]
  qv = q.at[b, ml.ds(hk * g, g)][...]
  n = lens[b]
  m, l, acc = softmax_state(g, d)
  for j in range(ml.cdiv(n, bkv)):
    kb = k.at[b, ml.ds(j * bkv, bkv), hk, :][...].astype(F32) * ks.at[b, ml.ds(j * bkv, bkv), hk][...][:, None]
    vb = v.at[b, ml.ds(j * bkv, bkv), hk, :][...].astype(F32) * vs.at[b, ml.ds(j * bkv, bkv), hk][...][:, None]
    s = ml.dot(qv, kb.astype(BF16).T) * scale
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] < n, s, -1e30)
    m, l, acc = online_step(m, l, acc, s, vb.astype(BF16), BF16)
  o.at[b, ml.ds(hk * g, g)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda o1, l1, o2, l2: (S(o1.shape, BF16), S(l1.shape, F32)),
                grid=lambda o1, l1, o2, l2: (o1.shape[0], o1.shape[1] // 64))
def ring_combine(o1, l1, o2, l2, o, lse):
  """Ring attention's merge of two partial results (heads, seq, d) with their logsumexps; a part that saw no key
  has lse -inf and weighs nothing."""
  h, i = ml.program_id(0), ml.program_id(1)
  r = ml.ds(i * 64, 64)
  a, b = l1.at[h, r][...], l2.at[h, r][...]
  mx = ml.maximum(a, b)
  mx = ml.where(mx == -jnp.inf, 0.0, mx)
  wa, wb = ml.exp(a - mx), ml.exp(b - mx)
  tot = wa + wb
  out = (o1.at[h, r][...].astype(F32) * (wa / tot)[:, None] + o2.at[h, r][...].astype(F32) * (wb / tot)[:, None])
  o.at[h, r][...] = out.astype(o.dtype)
  lse.at[h, r][...] = mx + ml.log(tot)


@mg.mgpu_kernel(out_shape=lambda q, kv, lens, *, dv, **_: S(q.shape[:3] + (dv,), q.dtype),
                grid=lambda q, kv, lens, *, dv, bn, **_: (q.shape[0], dv // bn))
def mla_mtp(q, kv, lens, o, *, dv: ml.constexpr, bn: ml.constexpr, bkv: ml.constexpr, scale: ml.constexpr):
  """FlashMLA with s_q = 2 (multi-token prediction): q (b, s_q, h, 576) packed as s_q * h rows, query token t
  seeing keys < len - s_q + t + 1; the cache (b, seq, 576) with lengths."""
  b, c = ml.program_id(0), ml.program_id(1)
  sq, h, d = q.shape[1], q.shape[2], q.shape[3]
  q_s = ml.smem((sq * h, d))
  q_s[...] = q.at[b][...].reshape(sq * h, d)
  kv_s = ml.smem((bkv, d))
  n = lens[b]
  last = n - sq + ml.arange(sq * h)[:, None] // h                     # row r's last key
  m, l, acc = softmax_state(sq * h, bn)
  for j in ml.range(ml.cdiv(n, bkv)):
    ml.copy(kv.at[b, ml.ds(j * bkv, bkv)], kv_s)
    s = ml.where(j * bkv + ml.arange(bkv)[None, :] <= last, ml.dot(q_s, kv_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, kv_s.at[:, ml.ds(c * bn, bn)], q.dtype)
  o.at[b, :, :, ml.ds(c * bn, bn)][...] = (acc / l[:, None]).reshape(sq, h, bn).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, *_, **__: S(q.shape, q.dtype),
                grid=lambda q, k, v, idx, **_: (q.shape[0], k.shape[0]))
def nsa_group_selected(q, k, v, idx, o, *, bs: ml.constexpr, scale: ml.constexpr):
  """NSA's selected-attention kernel as its Triton code schedules it: a program per (token, kv head), the group's g
  query heads the rows of the tile (q (t, heads, d)), the token's selected blocks (idx (t, kv_heads, topk), -1 none)
  copied by TMA at their gathered indices; k, v (kv_heads, t, d)."""
  t, hk = ml.program_id(0), ml.program_id(1)
  g, d = q.shape[1] // k.shape[0], q.shape[2]
  qv = q.at[t, ml.ds(hk * g, g)][...]
  k_s, v_s = ml.smem((bs, d)), ml.smem((bs, d))
  m, l, acc = softmax_state(g, d)
  for n in range(idx.shape[2]):
    blk = idx[t, hk, n]
    if blk >= 0:
      kv_block(k, v, hk, blk, bs, k_s, v_s)
      s = ml.where(blk * bs + ml.arange(bs)[None, :] <= t, ml.dot(qv, k_s.T) * scale, -1e30)
      m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[t, ml.ds(hk * g, g)][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v, *_, **__: (S(k.shape, F32), S(v.shape, F32)),
                grid=lambda q, k, *_, bkv, **__: (ml.cdiv(k.shape[1], bkv), k.shape[0]))
def dkdv_ragged_dropout(q, k, v, do, lse, delta, seed, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr,
                        scale: ml.constexpr, p_drop: ml.constexpr, masked: ml.constexpr = True):
  """dK, dV at a sequence length no multiple of the blocks (partial last tiles: TMA zeros, masked lse and delta),
  dropout recomputed from the forward's hash: dv += (p * keep / (1 - p)).T @ do, ds = p * (dp * keep / (1-p) - delta)."""
  j, h = ml.program_id(0), ml.program_id(1)
  t = q.shape[1]
  k_s, v_s, q_s, do_s, dk_acc, dv_acc, cols = kv_grad_tile(k, v, h, j, bq, bkv, q)
  sd = seed[0]
  for i in ml.range(ml.cdiv(t, bq), stages=2):
    ml.copy(q.at[h, ml.ds(i * bq, bq)], q_s)
    ml.copy(do.at[h, ml.ds(i * bq, bq)], do_s)
    rr = i * bq + ml.arange(bq)
    inside = rr < t
    m = lse.at[h, ml.ds(i * bq, bq)].load(mask=inside, other=0.0)
    di = delta.at[h, ml.ds(i * bq, bq)].load(mask=inside, other=0.0)
    rows = rr[:, None]
    p = ml.exp(ml.dot(q_s, k_s.T) * scale - m[:, None])
    p = ml.where((cols < t) & inside[:, None], p, 0.0)
    keep = hash_keep(sd, h, rows, cols, t, p_drop)
    pd = ml.where(keep, p * (1.0 / (1.0 - p_drop)), 0.0)
    dv_acc = ml.dot(pd.astype(q.dtype).T, do_s, dv_acc)
    dp = ml.dot(do_s, v_s.T)
    ds = p * (ml.where(keep, dp * (1.0 / (1.0 - p_drop)), 0.0) - di[:, None])
    dk_acc = ml.dot(ds.astype(q.dtype).T, q_s, dk_acc)
  if masked:                               # (as MG203's hint writes it: the last key block is partial)
    keys = (j * bkv + ml.arange(bkv))[:, None] < t
    dk.at[h, ml.ds(j * bkv, bkv)].store(dk_acc * scale, mask=keys)
    dv.at[h, ml.ds(j * bkv, bkv)].store(dv_acc, mask=keys)
  else:
    dk.at[h, ml.ds(j * bkv, bkv)][...] = dk_acc * scale
    dv.at[h, ml.ds(j * bkv, bkv)][...] = dv_acc


@mg.mgpu_kernel(out_shape=lambda q, k, v, *_, **__: (S(k.shape, F32), S(v.shape, F32), S(q.shape, F32)),
                grid=lambda q, k, *_, bkv, **__: (k.shape[1] // bkv, k.shape[0]))
def fused_bwd_causal(q, k, v, do, lse, delta, dk, dv, dq, *, bq: ml.constexpr, bkv: ml.constexpr,
                     scale: ml.constexpr):
  """Triton's fused backward: one kernel per key block for dK and dV, dQ's shares added atomically; causal, with
  key blocks of 128 and query blocks of 64 (the diagonal blocks masked)."""
  j, h = ml.program_id(0), ml.program_id(1)
  k_s, v_s, q_s, do_s, dk_acc, dv_acc, cols = kv_grad_tile(k, v, h, j, bq, bkv, q)
  for i in ml.range(j * bkv // bq, q.shape[1] // bq):
    dk_acc, dv_acc, ds = causal_dkdv_step(q, do, lse, delta, h, i, bq, q_s, do_s, k_s, v_s, cols, scale, dk_acc,
                                          dv_acc)
    ml.atomic_add(dq.at[h, ml.ds(i * bq, bq)], ml.dot(ds.astype(q.dtype), k_s) * scale)
  dk.at[h, ml.ds(j * bkv, bkv)][...] = dk_acc * scale
  dv.at[h, ml.ds(j * bkv, bkv)][...] = dv_acc


@mg.mgpu_kernel(out_shape=lambda q, kp, vp, tables, lens, **_: S(q.shape, q.dtype),
                grid=lambda q, kp, vp, tables, lens, **_: (kp.shape[0], q.shape[0]))
def decode_small_pages(q, kp, vp, tables, lens, o, *, per: ml.constexpr, scale: ml.constexpr):
  """vLLM's page size of 16 tokens: `per` pages a step copied at their table entries into one buffer (per * 16
  keys), the kv head's query heads as rows; q (b, heads, d), pages (kv_heads, pages, 16, d)."""
  hk, b = ml.program_id(0), ml.program_id(1)
  g, d, page = q.shape[1] // kp.shape[0], q.shape[2], kp.shape[2]
  qv = q.at[b, ml.ds(hk * g, g)][...]
  k_s, v_s = ml.smem((per * page, d)), ml.smem((per * page, d))
  n = lens[b]
  m, l, acc = softmax_state(g, d)
  for j in ml.range(ml.cdiv(n, per * page), stages=2):
    for u in ml.static_range(per):
      slot = ml.minimum(j * per + u, ml.cdiv(n, page) - 1)
      ml.copy(kp.at[hk, tables[b, slot]], k_s.at[ml.ds(u * page, page)])
      ml.copy(vp.at[hk, tables[b, slot]], v_s.at[ml.ds(u * page, page)])
    s = ml.where(j * per * page + ml.arange(per * page)[None, :] < n, ml.dot(qv, k_s.T) * scale, -1e30)
    m, l, acc = online_step(m, l, acc, s, v_s, q.dtype)
  o.at[b, ml.ds(hk * g, g)][...] = (acc / l[:, None]).astype(o.dtype)
