"""Probe 68a's cases, continued: the kernels of probe68a_more, _extra, _shapes and _quant with their inputs and
references (added to probe68a_cases.CASES)."""
import jax
import jax.numpy as jnp
import numpy as np

from probe68a_cases import (CASES, K, _grads, _kw, attn, bwd_inputs, causal_mask, compress_ref, f,
                            hash_keep_ref, hsd, normal, rng, sel_mask, t5_inputs)
from probe68a_refs import BF16, F32, I32

import probe68a_more  # noqa: E402
K.__dict__.update(vars(probe68a_more))


def fused_sel_inputs(s, bs=64):
  q, k, v = hsd(s)
  return q, k, v, compress_ref(k, bs).astype(BF16)


def fused_sel_ref(q, k, v, kc, bq=64, bs=64, topk=2, scale=0.125):
  t, nc = q.shape[1], kc.shape[1]
  outs = []
  for h in range(q.shape[0]):
    rows_o = []
    for i in range(t // bq):
      sc = (f(q[h, i * bq:(i + 1) * bq]).astype(BF16).astype(F32) @ f(kc[h]).T).sum(0)
      blocks = jnp.arange(nc)
      sc = jnp.where(blocks * bs <= i * bq, sc, -1e30)
      sc = jnp.where(blocks == i * bq // bs, 1e30, sc)
      vals, ids = jax.lax.top_k(sc, topk)
      ids = jnp.where(vals > -1e29, ids, -1)
      rows_o.append(jnp.broadcast_to(ids, (bq, topk)))
    idx = jnp.concatenate(rows_o)
    outs.append(attn(q[h], k[h], v[h], scale, sel_mask(idx, t, bs))[0])
  return jnp.stack(outs)


def sink_grad_inputs(s, h=2, t=64, d=64):
  r = rng(s)
  return normal(r, (h, t, d)), normal(r, (h, t, d)), jnp.asarray(r.standard_normal((h, t)), F32), \
      jnp.asarray(r.standard_normal(h), F32)


def sink_grad_ref(o, do, lse, sinks):
  delta = jnp.sum(f(o) * f(do), -1)
  return -jnp.sum(jnp.exp(sinks[:, None] - lse) * delta, -1)


def dq_atomic_ref(q, k, v, do, lse, delta):
  return _grads(q, k, v, do, 0.0, False)[0]


def dq_atomic_inputs(s):
  q, k, v, do, o, lse = bwd_inputs(s, causal=False)
  return q, k, v, do, lse, jnp.sum(f(o) * f(do), -1)


def gqa_bwd_inputs(s, h=4, hk=2, t=128):
  q, k, v = hsd(s, h=h, hk=hk, t=t)
  do = normal(rng(s + 7), q.shape)
  g = h // hk
  o, lse = attn(q, jnp.repeat(k, g, 0), jnp.repeat(v, g, 0), 0.125, causal_mask(t)[None])
  return q, k, v, do, lse, jnp.sum(o.astype(BF16).astype(F32) * f(do), -1)


def gqa_bwd_ref(q, k, v, do, lse, delta):
  g = q.shape[0] // k.shape[0]

  def fwd(q, k, v):
    return attn(q, jnp.repeat(k, g, 0), jnp.repeat(v, g, 0), 0.125, causal_mask(q.shape[1])[None])[0]
  _, vjp = jax.vjp(fwd, f(q), f(k), f(v))
  return vjp(f(do))[1:]


def t5_reg_ref(q, k, v, table, nb=32):
  t = q.shape[1]
  rel = jnp.arange(t)[None, :] - jnp.arange(t)[:, None]
  half = nb // 2
  bucket = jnp.where(rel > 0, half, 0) + jnp.minimum(jnp.abs(rel), half - 1)
  return attn(q, k, v, 1.0, bias=table[bucket].transpose(2, 0, 1))[0]


def decode1_inputs(s, b=2, h=8, hk=2, skv=200, d=64):
  r = rng(s)
  return (normal(r, (b, h, d)), normal(r, (b, skv + 56, hk, d)), normal(r, (b, skv + 56, hk, d)),
          jnp.asarray([skv, 77][:b], I32))


def decode1_ref(q, k, v, lens, scale=0.125):
  g = q.shape[1] // k.shape[2]
  out = []
  for b in range(q.shape[0]):
    kk, vv = jnp.repeat(k[b], g, 1).transpose(1, 0, 2), jnp.repeat(v[b], g, 1).transpose(1, 0, 2)
    mask = jnp.arange(kk.shape[1])[None, :] < lens[b]
    out.append(attn(q[b][:, None], kk, vv, scale, mask[None])[0][:, 0])
  return jnp.stack(out)


CASES.update({
  "nsa_fused_select": (_kw(K.nsa_fused_select, bq=64, bs=32, topk=3, scale=0.125), lambda s: fused_sel_inputs(s, 32),
                       lambda *a: fused_sel_ref(*a, bs=32, topk=3), 2e-2),
  "sink_grad": (K.sink_grad, sink_grad_inputs, sink_grad_ref, 1e-4),
  "dq_atomic": (_kw(K.dq_atomic, bq=64, bkv=64, scale=0.125), dq_atomic_inputs, dq_atomic_ref, 3e-2),
  "gqa_dkdv": (_kw(K.gqa_dkdv, bq=64, bkv=64, scale=0.125), gqa_bwd_inputs, gqa_bwd_ref, 3e-2),
  "t5_register_table": (_kw(K.t5_register_table, bq=64, bkv=64, num_buckets=32), t5_inputs, t5_reg_ref, 2e-2),
  "decode_gqa_one_token": (_kw(K.decode_gqa_one_token, bkv=64, scale=0.125), decode1_inputs, decode1_ref, 2e-2),
})


import probe68a_extra  # noqa: E402
K.__dict__.update(vars(probe68a_extra))


def cache_inputs(s, t=32, hk=2, d=64, pages=6, page=16):
  r = rng(s)
  slots = r.permutation(pages * page)[:t].astype(np.int32)
  slots[[3, 17]] = -1
  return (normal(r, (t, hk, d)), normal(r, (t, hk, d)), jnp.asarray(slots), normal(r, (pages, page, hk, d)),
          normal(r, (pages, page, hk, d)))


def cache_ref(k, v, slots, kc, vc):
  page = kc.shape[1]
  kc, vc = np.array(f(kc)), np.array(f(vc))
  for t, sl in enumerate(np.asarray(slots)):
    if sl >= 0:
      kc[sl // page, sl % page] = f(k[t])
      vc[sl // page, sl % page] = f(v[t])
  return kc, vc


def rope_inputs(s, t=128, h=2, maxp=300):
  r = rng(s)
  inv = 1.0 / (10000 ** (np.arange(32) / 32))
  ang = np.arange(maxp)[:, None] * inv[None, :]
  return (normal(r, (t, h, 64)), jnp.asarray(np.cos(ang), F32), jnp.asarray(np.sin(ang), F32),
          jnp.asarray(r.integers(0, maxp, t), I32))


def rope_ref(x, cos, sin, pos):
  x = f(x)
  c, s = cos[pos][:, None], sin[pos][:, None]
  x1, x2 = x[..., :32], x[..., 32:]
  return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1)


def int8_inputs(s, b=2, h=8, hk=2, skv=256, d=64):
  r = rng(s)
  return (normal(r, (b, h, d)), jnp.asarray(r.integers(-127, 128, (b, skv, hk, d)), jnp.int8),
          jnp.asarray(r.integers(-127, 128, (b, skv, hk, d)), jnp.int8),
          jnp.asarray(r.random((b, skv, hk)) * 0.02, F32), jnp.asarray(r.random((b, skv, hk)) * 0.02, F32),
          jnp.asarray([200, 77][:b], I32))


def int8_ref(q, k, v, ks, vs, lens, scale=0.125):
  kd = (f(k) * ks[..., None]).astype(BF16)
  vd = (f(v) * vs[..., None]).astype(BF16)
  return decode1_ref(q, kd, vd, lens, scale)


def ring_inputs(s, h=2, t=128, d=64):
  r = rng(s)
  l1 = r.standard_normal((h, t)).astype(np.float32)
  l2 = r.standard_normal((h, t)).astype(np.float32)
  l2[0, :10] = -np.inf
  return normal(r, (h, t, d)), jnp.asarray(l1), normal(r, (h, t, d)), jnp.asarray(l2)


def ring_ref(o1, l1, o2, l2):
  lse = jnp.logaddexp(l1, l2)
  return f(o1) * jnp.exp(l1 - lse)[..., None] + f(o2) * jnp.exp(l2 - lse)[..., None], lse


def mtp_inputs(s, b=2, sq=2, h=16, skv=256):
  r = rng(s)
  return normal(r, (b, sq, h, 576)), normal(r, (b, skv, 576)), jnp.asarray([256, 130][:b], I32)


def mtp_ref(q, kv, lens, scale=0.07):
  out = []
  for b in range(q.shape[0]):
    sq = q.shape[1]
    n = int(lens[b])
    last = n - sq + jnp.arange(sq)
    mask = jnp.arange(kv.shape[1])[None, None, :] <= last[:, None, None]
    o, _ = attn(q[b], kv[b][None], kv[b][None, :, :512], scale, mask)
    out.append(o)
  return jnp.stack(out)


def group_sel_inputs(s, t=64, h=16, hk=2, d=64, bs=16):
  r = rng(s)
  q = normal(r, (t, h, d))
  k, v = normal(r, (hk, t, d)), normal(r, (hk, t, d))
  idx = np.full((t, hk, 3), -1, np.int32)
  for i in range(t):
    for g in range(hk):
      own = i // bs
      cand = list(r.permutation(own))[:2]
      idx[i, g, :1 + len(cand)] = [own] + cand
  return q, k, v, jnp.asarray(idx)


def group_sel_ref(q, k, v, idx, bs=16, scale=0.125):
  t, h = q.shape[0], q.shape[1]
  g = h // k.shape[0]
  outs = []
  for hh in range(h):
    hk = hh // g
    mask = sel_mask(idx[:, hk], t, bs)
    outs.append(attn(q[:, hh], k[hk], v[hk], scale, mask)[0])
  return jnp.stack(outs, 1)


def ragged_drop_inputs(s, t=200, p_drop=0.2):
  q, k, v = hsd(s, t=t)
  do = normal(rng(s + 7), q.shape)
  seed = jnp.asarray([99 + s], I32)
  o = dropout_fwd_ref(q, k, v, seed, p_drop=p_drop)
  s_ = jnp.einsum("hqd,hkd->hqk", f(q), f(k)) * 0.125
  lse = jax.nn.logsumexp(s_, -1)
  return q, k, v, do, lse, jnp.sum(o * f(do), -1), seed


def dropout_fwd_ref(q, k, v, seed, scale=0.125, p_drop=0.2):
  t = q.shape[1]
  p = jax.nn.softmax(jnp.einsum("hqd,hkd->hqk", f(q), f(k)) * scale, -1)
  keep = jnp.stack([hash_keep_ref(seed[0], t, p_drop, h) for h in range(q.shape[0])])
  return jnp.einsum("hqk,hkd->hqd", jnp.where(keep, p / (1 - p_drop), 0.0), f(v))


def ragged_drop_ref(q, k, v, do, lse, delta, seed):
  _, vjp = jax.vjp(lambda k, v: dropout_fwd_ref(q, k, v, seed), f(k), f(v))
  return vjp(f(do))


def fused_bwd_inputs(s, t=256):
  q, k, v, do, o, lse = bwd_inputs(s, causal=True, t=t)
  return q, k, v, do, lse, jnp.sum(f(o) * f(do), -1)


def fused_bwd_ref(q, k, v, do, lse, delta):
  dq, dk, dv = _grads(q, k, v, do, 0.0, True)
  return dk, dv, dq


CASES.update({
  "reshape_and_cache": (K.reshape_and_cache, cache_inputs, cache_ref, 0.0),
  "rope_neox": (K.rope_neox, rope_inputs, rope_ref, 1e-2),
  "decode_int8_kv": (_kw(K.decode_int8_kv, bkv=64, scale=0.125), int8_inputs, int8_ref, 2e-2),
  "ring_combine": (K.ring_combine, ring_inputs, ring_ref, 1e-2),
  "mla_mtp": (_kw(K.mla_mtp, dv=512, bn=256, bkv=64, scale=0.07), mtp_inputs, mtp_ref, 2e-2),
  "nsa_group_selected": (_kw(K.nsa_group_selected, bs=16, scale=0.125), group_sel_inputs, group_sel_ref, 2e-2),
  "dkdv_ragged_dropout": (_kw(K.dkdv_ragged_dropout, bq=64, bkv=64, scale=0.125, p_drop=0.2), ragged_drop_inputs,
                          ragged_drop_ref, 3e-2),
  "dkdv_ragged_unmasked": (_kw(K.dkdv_ragged_dropout, bq=64, bkv=64, scale=0.125, p_drop=0.2, masked=False),
                           ragged_drop_inputs, ragged_drop_ref, 3e-2),
  "fused_bwd_causal": (_kw(K.fused_bwd_causal, bq=64, bkv=128, scale=0.125), fused_bwd_inputs, fused_bwd_ref, 3e-2),
})


import probe68a_shapes  # noqa: E402
K.__dict__.update(vars(probe68a_shapes))


def prefill_inputs(s, h=2, t=200):
  r = rng(s)
  return normal(r, (h, t, 192)), normal(r, (h, t, 192)), normal(r, (h, t, 128))


def prefill_ref(q, k, v, scale=0.072):
  return attn(q, k, v, scale, causal_mask(q.shape[1])[None])[0]


def cross_inputs(s, d=64, sq=100, skv=77, h=2):
  r = rng(s)
  return normal(r, (h, sq, d)), normal(r, (h, skv, d)), normal(r, (h, skv, d))


def sinks2_inputs(s, h=2, t=256, d=128):
  q, k, v = hsd(s, h=h, t=t, d=d)
  return q, k, v, jnp.asarray(rng(s + 1).standard_normal(h) * 2, F32)


def sinks2_ref(q, k, v, sinks, scale=0.088):
  return attn(q, k, v, scale, causal_mask(q.shape[1])[None], sink=f(sinks)[:, None, None])[0]


def chunked_inputs(s, h=2, chunk=128, d=64, page=64, pages=6):
  r = rng(s)
  q, k, v = normal(r, (h, chunk, d)), normal(r, (h, chunk, d)), normal(r, (h, chunk, d))
  kp, vp = normal(r, (h, pages, page, d)), normal(r, (h, pages, page, d))
  tables = jnp.asarray(r.permutation(pages)[:4], I32)
  return q, k, v, kp, vp, tables, jnp.asarray([150], I32)


def chunked_ref(q, k, v, kp, vp, tables, plen, scale=0.125):
  n = int(plen[0])
  pk = kp[:, tables].reshape(q.shape[0], -1, q.shape[2])[:, :n]
  pv = vp[:, tables].reshape(q.shape[0], -1, q.shape[2])[:, :n]
  kk, vv = jnp.concatenate([pk, k], 1), jnp.concatenate([pv, v], 1)
  t = q.shape[1]
  mask = jnp.arange(n + t)[None, :] <= jnp.arange(t)[:, None] + n
  return attn(q, kk, vv, scale, mask[None])[0]


def whole_row_inputs(s, h=2):
  r = rng(s)
  valid = r.random((h, 128)) < 0.7
  valid[:, 0] = True
  return normal(r, (h, 64, 64)), normal(r, (h, 128, 64)), normal(r, (h, 128, 64)), jnp.asarray(valid)


CASES.update({
  "prefill_192_128": (_kw(K.prefill_qk_v_dims, bq=64, bkv=64, scale=0.072), prefill_inputs, prefill_ref, 2e-2),
  "prefill_192_128_bq128": (_kw(K.prefill_qk_v_dims, bq=128, bkv=64, scale=0.072), prefill_inputs, prefill_ref, 2e-2),
  "cross_ragged_d64": (_kw(K.cross_ragged, bq=64, bkv=64, scale=0.125), cross_inputs,
                       lambda q, k, v: attn(q, k, v, 0.125)[0], 2e-2),
  "cross_ragged_d80": (_kw(K.cross_ragged, bq=64, bkv=64, scale=0.11), lambda s: cross_inputs(s, d=80),
                       lambda q, k, v: attn(q, k, v, 0.11)[0], 2e-2),
  "cross_ragged_d96": (_kw(K.cross_ragged, bq=64, bkv=64, scale=0.1), lambda s: cross_inputs(s, d=96),
                       lambda q, k, v: attn(q, k, v, 0.1)[0], 2e-2),
  "sinks_two_warpgroups": (_kw(K.sinks_two_warpgroups, bkv=64, scale=0.088), sinks2_inputs, sinks2_ref, 2e-2),
  "chunked_prefill": (_kw(K.chunked_prefill, bq=64, scale=0.125), chunked_inputs, chunked_ref, 2e-2),
  "whole_row_softmax": (K.whole_row_softmax, whole_row_inputs,
                        lambda q, k, v, valid: attn(q, k, v, 0.125, valid[:, None, :])[0], 2e-2),
  "fori_attention": (_kw(K.fori_attention, bq=64, bkv=64, scale=0.125), hsd, lambda q, k, v: attn(q, k, v, 0.125)[0],
                     2e-2),
})


import probe68a_quant  # noqa: E402
K.__dict__.update(vars(probe68a_quant))


def fp8_inputs(s, h=2, t=256, d=64):
  r = rng(s)
  mk = lambda: jnp.asarray(r.standard_normal((h, t, d)) * 4, jnp.float8_e4m3fn)
  return mk(), mk(), mk(), jnp.asarray([0.25, 0.25, 0.25], F32)


def fp8_ref(q, k, v, ds, scale=0.125):
  return attn(f(q) * ds[0], f(k) * ds[1], f(v) * ds[2], scale)[0]


def sage_inputs(s, h=2, t=256, d=64, bq=64, bkv=64):
  r = rng(s)
  q = jnp.asarray(r.integers(-127, 128, (h, t, d)), jnp.int8)
  k = jnp.asarray(r.integers(-127, 128, (h, t, d)), jnp.int8)
  return (q, k, normal(r, (h, t, d)), jnp.asarray(r.random((h, t // bq)) * 0.01, F32),
          jnp.asarray(r.random((h, t // bkv)) * 0.01, F32))


def sage_ref(q, k, v, qs, ks, scale=0.125, bq=64, bkv=64):
  qd = f(q) * jnp.repeat(qs, bq, 1)[..., None]
  kd = f(k) * jnp.repeat(ks, bkv, 1)[..., None]
  return attn(qd, kd, v, scale)[0]


def sparse_inputs(s, h=2, t=256, b=64):
  q, k, v = hsd(s, h=h, t=t)
  r = rng(s + 5)
  n = t // b
  bm = (r.random((n, n)) < 0.5).astype(np.int32)
  np.fill_diagonal(bm, 1)
  return q, k, v, jnp.asarray(bm)


def sparse_ref(q, k, v, bm, b=64, scale=0.125):
  mask = jnp.repeat(jnp.repeat(bm, b, 0), b, 1) != 0
  return attn(q, k, v, scale, mask[None])[0]


CASES.update({
  "fp8_attention": (_kw(K.fp8_attention, bq=64, bkv=64, scale=0.125), fp8_inputs, fp8_ref, 4e-2),
  "sage_int8": (_kw(K.sage_int8, bq=64, bkv=64, scale=0.125), sage_inputs, sage_ref, 2e-2),
  "block_sparse_s1": (_kw(K.block_sparse, bq=64, bkv=64, scale=0.125, stages=1), sparse_inputs, sparse_ref, 2e-2),
  "block_sparse_s2": (_kw(K.block_sparse, bq=64, bkv=64, scale=0.125, stages=2), sparse_inputs, sparse_ref, 2e-2),
})


import probe68a_dsa  # noqa: E402
K.__dict__.update(vars(probe68a_dsa))


def indexer_inputs(s, t=256, hi=4, d=64):
  r = rng(s)
  return normal(r, (t, hi, d)), normal(r, (t, d)), jnp.asarray(r.random((t, hi)), F32)


def indexer_scores(qi, ki, w):
  t = qi.shape[0]
  sc = jnp.einsum("thd,sd->hts", f(qi), f(ki))
  sc = jnp.einsum("th,hts->ts", f(w), jnp.maximum(sc, 0.0))
  return jnp.where(jnp.arange(t)[None, :] <= jnp.arange(t)[:, None], sc, -1e30)


def indexer_check(qi, ki, w, topk=16):
  """The selected keys' scores are each row's top-k scores (ties may order differently)."""
  sc = indexer_scores(qi, ki, w)
  vals = jax.lax.top_k(sc, topk)[0]
  return jnp.where(vals > -1e29, vals, -1e30)


def indexer_run(qi, ki, w, interpret=False):
  idx = K.lightning_indexer(qi, ki, w, bq=64, topk=16, interpret=interpret)
  sc = indexer_scores(qi, ki, w)
  got = jnp.take_along_axis(sc, jnp.maximum(idx, 0), 1)
  return jnp.where(idx >= 0, got, -1e30)


def dsa_inputs(s, t=96, h=16, topk=128):
  r = rng(s)
  idx = np.full((t, topk), -1, np.int32)
  for i in range(t):
    n = min(i + 1, topk)
    idx[i, :n] = r.permutation(i + 1)[:n]
  return normal(r, (t, h, 576)), normal(r, (t, 576)), jnp.asarray(idx)


def dsa_ref(q, kv, idx, scale=0.07):
  t = q.shape[0]
  mask = jnp.zeros((t, t), bool).at[jnp.arange(t)[:, None], jnp.maximum(idx, 0)].max(idx >= 0)
  return attn(q, kv[None], kv[None, :, :512], scale, mask[:, None, :])[0]


def rope_attn_inputs(s, h=2, t=128, d=64):
  q, k, v = hsd(s, h=h, t=t, d=d)
  inv = 1.0 / (10000 ** (np.arange(d // 2) / (d // 2)))
  ang = np.arange(t)[:, None] * inv[None, :]
  return q, k, v, jnp.asarray(np.cos(ang), F32), jnp.asarray(np.sin(ang), F32)


def rope_attn_ref(q, k, v, cos, sin, scale=0.125):
  def rot(x):
    x1, x2 = f(x)[..., :x.shape[-1] // 2], f(x)[..., x.shape[-1] // 2:]
    return jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1).astype(BF16)
  return attn(rot(q), rot(k), v, scale, causal_mask(q.shape[1])[None])[0]


CASES.update({
  "lightning_indexer": (indexer_run, indexer_inputs, indexer_check, 1e-3),
  "dsa_sparse_mla": (_kw(K.dsa_sparse_mla, dv=512, bn=512, scale=0.07), dsa_inputs, dsa_ref, 2e-2),
  "mla_absorb": (K.mla_absorb, lambda s: (normal(rng(s), (64, 4, 128)), normal(rng(s + 1), (4, 128, 512), scale=0.1)),
                 lambda qn, w: jnp.einsum("thd,hdc->thc", f(qn), f(w)), 2e-2),
  "nsa_compress_mlp": (_kw(K.nsa_compress_mlp, bs=16), lambda s: (normal(rng(s), (2, 128, 64)),
                                                                  normal(rng(s + 1), (16 * 64, 64), scale=0.03)),
                       lambda k, w: jnp.einsum("hcn,nd->hcd", f(k).reshape(2, 8, 16 * 64), f(w)), 2e-2),
  "rope_attention": (_kw(K.rope_attention, bq=64, bkv=64, scale=0.125), rope_attn_inputs, rope_attn_ref, 2e-2),
})


def triton_bwd_inputs(s, causal):
  q, k, v, do, o, lse = bwd_inputs(s, causal=causal)
  return q, k, v, do, lse * 1.4426950408889634, jnp.sum(f(o) * f(do), -1)


def triton_bwd(causal):
  def run(q, k, v, do, m, delta, interpret=False):
    kw = dict(bq=64, bkv=64, scale=0.125, causal=causal, interpret=interpret)
    dk, dv = K.triton_dkdv_transposed(q, k, v, do, m, delta, **kw)
    return K.triton_dq(q, k, v, do, m, delta, **kw), dk, dv
  return run


CASES.update({
  f"triton_bwd{'_causal' if causal else ''}": (
      triton_bwd(causal), lambda s, causal=causal: triton_bwd_inputs(s, causal),
      lambda q, k, v, do, m, delta, causal=causal: _grads(q, k, v, do, 0.0, causal), 3e-2)
  for causal in (False, True)})


def small_pages_inputs(s, b=2, h=8, hk=2, d=64, page=16, pages_per=8, pool=24):
  r = rng(s)
  q = normal(r, (b, h, d))
  kp, vp = normal(r, (hk, pool, page, d)), normal(r, (hk, pool, page, d))
  tables = jnp.asarray(r.permutation(pool)[:b * pages_per].reshape(b, pages_per), I32)
  return q, kp, vp, tables, jnp.asarray([page * pages_per - 3, 37][:b], I32)


def small_pages_ref(q, kp, vp, tables, lens, scale=0.125):
  b, h, d = q.shape
  hk = kp.shape[0]
  g = h // hk
  outs = []
  for i in range(b):
    k = kp[:, tables[i]].reshape(hk, -1, d)
    v = vp[:, tables[i]].reshape(hk, -1, d)
    mask = jnp.arange(k.shape[1])[None, None, :] < lens[i]
    o, _ = attn(q[i].reshape(hk, g, d), k, v, scale, mask)
    outs.append(o.reshape(h, d))
  return jnp.stack(outs)


CASES.update({
  "decode_small_pages_1": (_kw(K.decode_small_pages, per=1, scale=0.125), small_pages_inputs, small_pages_ref, 2e-2),
  "decode_small_pages_4": (_kw(K.decode_small_pages, per=4, scale=0.125), small_pages_inputs, small_pages_ref, 2e-2),
})


CASES["softcap_fwd_causal_bkv128"] = (_kw(K.softcap_fwd, bq=64, bkv=128, cap=5.0, scale=0.125, causal=True),
                                      lambda s: hsd(s, scale=3.0),
                                      lambda q, k, v: attn(q, k, v, 0.125, causal_mask(q.shape[1])[None], softcap=5.0),
                                      2e-2)
