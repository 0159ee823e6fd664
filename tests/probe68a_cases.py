"""Probe 68a's cases: each kernel with its inputs (a seed) and its float32 jnp reference."""
import types

import jax
import jax.numpy as jnp
import numpy as np

import probe68a_mla
from probe68a_lib import hash_keep, t5_bucket
from probe68a_refs import BF16, F32, I32, attn, f, normal, rng

K = types.SimpleNamespace(**vars(probe68a_mla))


def _kw(kernel, **kw):
  def run(*a, interpret=False):
    return kernel(*a, interpret=interpret, **kw)
  run.kernel, run.kw = kernel, kw
  return run


# ---- MLA
def mla_split_inputs(s, b=2, h=16, skv=256):
  r = rng(s)
  return (normal(r, (b, h, 512)), normal(r, (b, h, 64)), normal(r, (b, skv, 512)), normal(r, (b, skv, 64)))


def mla_split_ref(qn, qp, ckv, kpe, scale=0.07):
  q = jnp.concatenate([f(qn), f(qp)], -1)
  k = jnp.concatenate([f(ckv), f(kpe)], -1)
  return attn(q, k, ckv, scale)


def mla_shared_inputs(s, b=2, h=16, skv=256):
  r = rng(s)
  return normal(r, (b, h, 576)), normal(r, (b, skv, 576))


def mla_shared_ref(q, kv, scale=0.07):
  return attn(q, kv, kv[..., :512], scale)


def mla_paged_inputs(s, b=2, h=16, page=64, pages_per=4, pool=12):
  r = rng(s)
  q = normal(r, (b, h, 576))
  pages = normal(r, (pool, page, 576))
  tables = jnp.asarray(r.permutation(pool)[:b * pages_per].reshape(b, pages_per), I32)
  lens = jnp.asarray([page * pages_per - 5, page + 7][:b], I32)
  return q, pages, tables, lens


def mla_paged_ref(q, pages, tables, lens, scale=0.07):
  b = q.shape[0]
  outs, lses = [], []
  for i in range(b):
    kv = pages[tables[i]].reshape(-1, 576)
    mask = jnp.arange(kv.shape[0])[None, :] < lens[i]
    o, l = attn(q[i], kv, kv[:, :512], scale, mask)
    outs.append(o), lses.append(l)
  return jnp.stack(outs), jnp.stack(lses)


def mla_paged_full(q, pages, tables, lens, interpret=False, stages=2):
  op, lp = K.mla_paged_split(q, pages, tables, lens, dv=512, splits=2, scale=0.07, stages=stages, interpret=interpret)
  return K.mla_combine(op, lp, dtype=q.dtype, interpret=interpret)


# ---- NSA
def nsa_qkv(s, h=2, t=256, d=64):
  r = rng(s)
  return normal(r, (h, t, d)), normal(r, (h, t, d)), normal(r, (h, t, d))


def compress_ref(k, bs=32):
  h, t, d = k.shape
  return f(k).reshape(h, t // bs, bs, d).mean(2)


def nsa_cmp_inputs(s):
  q, k, v = nsa_qkv(s)
  return q, compress_ref(k).astype(BF16), compress_ref(v).astype(BF16)


def nsa_cmp_ref(q, kc, vc, bs=32, scale=0.125):
  t, nc = q.shape[1], kc.shape[1]
  ok = (jnp.arange(nc)[None, :] + 1) * bs - 1 <= jnp.arange(t)[:, None]
  s = jnp.einsum("hqd,hkd->hqk", f(q), f(kc)) * scale
  s = jnp.where(ok, s, -1e30)
  e = jnp.where(ok, jnp.exp(s - s.max(-1, keepdims=True)), 0.0)
  p = e / jnp.maximum(e.sum(-1, keepdims=True), 1e-30)
  return jnp.einsum("hqk,hkd->hqd", p.astype(BF16).astype(F32), f(vc)), p


def nsa_select_inputs(s, h=2, t=256, nc=8):
  r = rng(s)
  return (jnp.asarray(r.random((h, t, nc)), F32),)


def nsa_select_ref(p, topk=4, bs=32):
  score = p.sum(0)
  t, nc = score.shape
  rows, cols = jnp.arange(t)[:, None], jnp.arange(nc)[None, :]
  score = jnp.where((cols == rows // bs) | (cols == 0), 1e9, score)
  score = jnp.where(cols * bs <= rows, score, -1.0)
  vals, ids = jax.lax.top_k(score, topk)
  return jnp.where(vals >= 0, ids, -1)


def sel_mask(idx, t, bs):
  """(t, t) mask of key columns whose block idx names for each query (idx (t, topk), -1 none), causal."""
  blk = jnp.arange(t)[None, :] // bs
  m = jnp.zeros((t, t), bool)
  for n in range(idx.shape[1]):
    m = m | (blk == idx[:, n:n + 1])
  return m & (jnp.arange(t)[None, :] <= jnp.arange(t)[:, None])


def nsa_sel_inputs(s, h=2, t=128, d=64, bs=32):
  q, k, v = nsa_qkv(s, h, t, d)
  r = rng(s + 3)
  idx = np.full((t, 3), -1, np.int32)
  for i in range(t):
    own = i // bs
    cand = [c for c in r.permutation(own) if c != own][:2]
    idx[i, :1 + len(cand)] = [own] + cand
  return q, k, v, jnp.asarray(idx)


def nsa_sel_ref(q, k, v, idx, bs=32, scale=0.125):
  return attn(q, k, v, scale, sel_mask(idx, q.shape[1], bs)[None])[0]


def nsa_tiles_inputs(s, h=2, t=256, d=64, bq=64, bs=64):
  q, k, v = nsa_qkv(s, h, t, d)
  r = rng(s + 4)
  nt = t // bq
  idx = np.full((nt, 3), -1, np.int32)
  for i in range(nt):
    own = i * bq // bs
    cand = [c for c in r.permutation(own)][:2]
    idx[i, :1 + len(cand)] = [own] + cand
  return q, k, v, jnp.asarray(idx)


def nsa_tiles_ref(q, k, v, idx, bq=64, bs=64, scale=0.125):
  return attn(q, k, v, scale, sel_mask(jnp.repeat(idx, bq, 0), q.shape[1], bs)[None])[0]


def nsa_window_ref(q, k, v, window=48, scale=0.125):
  t = q.shape[1]
  r, c = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
  return attn(q, k, v, scale, ((c <= r) & (c > r - window))[None])[0]


def nsa_mix_inputs(s, h=2, t=128, d=64, dm=64):
  r = rng(s)
  return (normal(r, (h, t, d)), normal(r, (h, t, d)), normal(r, (h, t, d)), normal(r, (t, dm)),
          normal(r, (h, dm, 3), scale=0.1))


def nsa_mix_ref(oc, os_, ow, x, wg):
  g = jax.nn.sigmoid(jnp.einsum("tm,hmc->htc", f(x), f(wg)))
  return g[..., 0:1] * f(oc) + g[..., 1:2] * f(os_) + g[..., 2:3] * f(ow)


CASES = {
  "mla_split_h16": (_kw(K.mla_decode_split_dims, bkv=64, scale=0.07), mla_split_inputs, mla_split_ref, 2e-2),
  "mla_split_h64": (_kw(K.mla_decode_split_dims, bkv=64, scale=0.07), lambda s: mla_split_inputs(s, h=64),
                    mla_split_ref, 2e-2),
  "mla_split_h64_halves": (_kw(K.mla_decode_split_dims, bkv=64, scale=0.07, halves=True),
                           lambda s: mla_split_inputs(s, h=64), mla_split_ref, 2e-2),
  "mla_shared_h16": (_kw(K.mla_decode_shared_kv, dv=512, bkv=64, scale=0.07), mla_shared_inputs, mla_shared_ref,
                     2e-2),
  "mla_shared_h128": (_kw(K.mla_decode_shared_kv, dv=512, bkv=64, scale=0.07), lambda s: mla_shared_inputs(s, h=128),
                      mla_shared_ref, 2e-2),
  "mla_paged_split_combine": (mla_paged_full, mla_paged_inputs, mla_paged_ref, 2e-2),
  "mla_paged_split_combine_s1": (lambda *a, interpret=False: mla_paged_full(*a, interpret=interpret, stages=1),
                                 mla_paged_inputs, mla_paged_ref, 2e-2),         # (MG402's hint followed)
  "nsa_compress": (_kw(K.nsa_compress, bs=32), lambda s: nsa_qkv(s)[1:2], lambda k: compress_ref(k), 1e-2),
  "nsa_compressed_attention": (_kw(K.nsa_compressed_attention, bq=64, bs=32, scale=0.125), nsa_cmp_inputs,
                               nsa_cmp_ref, 2e-2),
  "nsa_select_topk": (_kw(K.nsa_select_topk, bq=64, topk=4, bs=32), nsa_select_inputs, nsa_select_ref, 0.0),
  "nsa_selected_attention": (_kw(K.nsa_selected_attention, bs=32, scale=0.125), nsa_sel_inputs, nsa_sel_ref, 2e-2),
  "nsa_selected_tiles": (_kw(K.nsa_selected_tiles, bq=64, bs=64, scale=0.125), nsa_tiles_inputs, nsa_tiles_ref, 2e-2),
  "nsa_window": (_kw(K.nsa_window, bq=64, bkv=64, window=48, scale=0.125), lambda s: nsa_qkv(s), nsa_window_ref,
                 2e-2),
  "nsa_gate_mix": (K.nsa_gate_mix, nsa_mix_inputs, nsa_mix_ref, 2e-2),
}


# ---- forward variants
import probe68a_fwd  # noqa: E402
import probe68a_bwd  # noqa: E402
K.__dict__.update(vars(probe68a_fwd))
K.__dict__.update(vars(probe68a_bwd))


def hsd(s, h=2, t=256, d=64, hk=None, scale=1.0):
  r = rng(s)
  return normal(r, (h, t, d), scale=scale), normal(r, (hk or h, t, d), scale=scale), normal(r, (hk or h, t, d))


def causal_mask(t, window=0):
  r, c = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
  m = c <= r
  return m & (c > r - window) if window else m


def sink_inputs(s, hk=1):
  q, k, v = hsd(s, h=4, hk=hk)
  return q, k, v, jnp.asarray(rng(s + 1).standard_normal(4) * 2, BF16)


def sink_ref(q, k, v, sinks, window=0, scale=0.125):
  g = q.shape[0] // k.shape[0]
  k, v = jnp.repeat(k, g, 0), jnp.repeat(v, g, 0)
  return attn(q, k, v, scale, causal_mask(q.shape[1], window)[None], sink=f(sinks)[:, None, None])[0]


def streaming_ref(q, k, v, n_sink=4, window=48, scale=0.125):
  t = q.shape[1]
  r, c = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
  return attn(q, k, v, scale, (((c < n_sink) | (c > r - window)) & (c <= r))[None])[0]


def softcap_ref(q, k, v, cap=5.0, scale=0.125, causal=True):
  return attn(q, k, v, scale, causal_mask(q.shape[1])[None] if causal else None, softcap=cap)


def gqa_inputs(s, b=2, t=128, h=8, hk=2, d=64):
  r = rng(s)
  return normal(r, (b, t, h, d)), normal(r, (b, t, hk, d)), normal(r, (b, t, hk, d))


def gqa_ref(q, k, v, scale=0.125):
  g = q.shape[2] // k.shape[2]
  k, v = jnp.repeat(k, g, 2), jnp.repeat(v, g, 2)
  t = q.shape[1]
  o, _ = attn(q.transpose(0, 2, 1, 3), k.transpose(0, 2, 1, 3), v.transpose(0, 2, 1, 3), scale,
              causal_mask(t)[None, None])
  return o.transpose(0, 2, 1, 3)


def mqa_inputs(s, h=4, t=256, d=64):
  r = rng(s)
  return normal(r, (h, t, d)), normal(r, (t, d)), normal(r, (t, d))


LQ, LK = [37, 64, 100], [50, 64, 130]


def varlen_inputs(s, h=2, d=64):
  r = rng(s)
  cq = np.concatenate([[0], np.cumsum(LQ)]).astype(np.int32)
  ck = np.concatenate([[0], np.cumsum(LK)]).astype(np.int32)
  return (normal(r, (cq[-1], h, d)), normal(r, (ck[-1], h, d)), normal(r, (ck[-1], h, d)), jnp.asarray(cq),
          jnp.asarray(ck))


def varlen_ref(q, k, v, cq, ck, scale=0.125):
  out = []
  for b in range(len(cq) - 1):
    qq, kk, vv = q[cq[b]:cq[b + 1]], k[ck[b]:ck[b + 1]], v[ck[b]:ck[b + 1]]
    nq, nk = qq.shape[0], kk.shape[0]
    mask = jnp.arange(nk)[None, :] <= jnp.arange(nq)[:, None] + nk - nq
    o, _ = attn(qq.transpose(1, 0, 2), kk.transpose(1, 0, 2), vv.transpose(1, 0, 2), scale, mask[None])
    o = jnp.where(mask.any(1)[None, :, None], o, 0.0)
    out.append(o.transpose(1, 0, 2))
  return jnp.concatenate(out)


DOCS = [70, 100, 86]


def doc_inputs(s):
  q, k, v = hsd(s)
  seg = jnp.asarray(np.repeat(np.arange(len(DOCS)), DOCS).astype(np.int32))
  prefix = jnp.asarray(np.array([10, 0, 40], np.int32))
  return q, k, v, seg, prefix


def doc_ref(q, k, v, seg, prefix, scale=0.125):
  t = q.shape[1]
  r, c = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
  starts = jnp.searchsorted(seg, seg)
  keep = (seg[:, None] == seg[None, :]) & ((c <= r) | (c - starts[None, :] < prefix[seg][None, :]))
  return attn(q, k, v, scale, keep[None])[0]


def t5_inputs(s, nb=32):
  q, k, v = hsd(s, scale=0.3)
  return q, k, v, jnp.asarray(rng(s + 2).standard_normal((nb, 2)), F32)


def t5_ref(q, k, v, table, bidirectional=True, nb=32, md=128):
  t = q.shape[1]
  r, c = jnp.arange(t)[:, None], jnp.arange(t)[None, :]
  bias = table[t5_bucket(c - r, nb, md, bidirectional)].transpose(2, 0, 1)
  return attn(q, k, v, 1.0, None if bidirectional else causal_mask(t)[None], bias=bias)[0]


def hash_keep_ref(seed, t, p_drop, h):
  return hash_keep(seed, h, jnp.arange(t)[:, None], jnp.arange(t)[None, :], t, p_drop)


def dropout_ref(q, k, v, seed, scale=0.125, p_drop=0.2):
  t = q.shape[1]
  s = jnp.einsum("hqd,hkd->hqk", f(q), f(k)) * scale
  p = jax.nn.softmax(s, -1)
  keep = jnp.stack([hash_keep_ref(seed[0], t, p_drop, h) for h in range(q.shape[0])])
  p = jnp.where(keep, p / (1 - p_drop), 0.0)
  return jnp.einsum("hqk,hkd->hqd", p, f(v))


CASES.update({
  "sink_gqa": (_kw(K.sink_attention, bq=64, bkv=64, scale=0.125), sink_inputs, sink_ref, 2e-2),
  "sink_window": (_kw(K.sink_attention, bq=64, bkv=64, scale=0.125, window=48), lambda s: sink_inputs(s, hk=4),
                  lambda *a: sink_ref(*a, window=48), 2e-2),
  "streaming": (_kw(K.streaming_attention, bq=64, bkv=64, n_sink=4, window=48, scale=0.125), hsd, streaming_ref,
                2e-2),
  "softcap_fwd_causal": (_kw(K.softcap_fwd, bq=64, bkv=64, cap=5.0, scale=0.125, causal=True),
                         lambda s: hsd(s, scale=3.0), softcap_ref, 2e-2),
  "softcap_fwd": (_kw(K.softcap_fwd, bq=64, bkv=64, cap=5.0, scale=0.125, causal=False), lambda s: hsd(s, scale=3.0),
                  lambda *a: softcap_ref(*a, causal=False), 2e-2),
  "gqa_group_rows": (_kw(K.gqa_group_rows, bq=64, bkv=64, scale=0.125), gqa_inputs, gqa_ref, 2e-2),
  "mqa_heads": (_kw(K.mqa_heads, bq=64, bkv=64, scale=0.125), mqa_inputs,
                lambda q, k, v: attn(q, k[None], v[None], 0.125)[0], 2e-2),
  "varlen_qk": (_kw(K.varlen_qk, max_q=max(LQ), bq=64, bkv=64, scale=0.125), varlen_inputs, varlen_ref, 2e-2),
  "prefix_doc": (_kw(K.prefix_doc_attention, bq=64, bkv=64, scale=0.125), doc_inputs, doc_ref, 2e-2),
  "t5_bidirectional": (_kw(K.t5_bias_attention, bq=64, bkv=64, num_buckets=32, max_distance=128, bidirectional=True),
                       t5_inputs, t5_ref, 2e-2),
  "t5_causal": (_kw(K.t5_bias_attention, bq=64, bkv=64, num_buckets=32, max_distance=128, bidirectional=False),
                t5_inputs, lambda *a: t5_ref(*a, bidirectional=False), 2e-2),
  "dropout_hash": (_kw(K.dropout_attention, bq=64, bkv=64, scale=0.125, p_drop=0.2),
                   lambda s: hsd(s) + (jnp.asarray([1234 + s], I32),), dropout_ref, 2e-2),
})


# ---- backward
def bwd_inputs(s, cap=0.0, causal=True, t=256):
  q, k, v = hsd(s, t=t, scale=3.0 if cap else 1.0)
  do = normal(rng(s + 7), q.shape)
  o, lse = attn(q, k, v, 0.125, causal_mask(t)[None] if causal else None, softcap=cap)
  return q, k, v, do, o.astype(BF16), lse


def _grads(q, k, v, do, cap, causal):
  def fwd(q, k, v):
    return attn(q, k, v, 0.125, causal_mask(q.shape[1])[None] if causal else None, softcap=cap)[0]
  _, vjp = jax.vjp(fwd, f(q), f(k), f(v))
  return vjp(f(do))


def bwd_full(cap, causal):
  def run(q, k, v, do, o, lse, interpret=False):
    delta = K.bwd_preprocess(o, do, bq=64, interpret=interpret)
    kw = dict(bq=64, bkv=64, scale=0.125, causal=causal, cap=cap, interpret=interpret)
    dk, dv = K.bwd_dkdv(q, k, v, do, lse, delta, **kw)
    dq = K.bwd_dq(q, k, v, do, lse, delta, **kw)
    return dq, dk, dv
  return run


def bwd_case(cap, causal):
  return (bwd_full(cap, causal), lambda s: bwd_inputs(s, cap, causal),
          lambda q, k, v, do, o, lse: _grads(q, k, v, do, cap, causal), 3e-2)


CASES.update({
  "bwd_preprocess": (_kw(K.bwd_preprocess, bq=64), lambda s: bwd_inputs(s)[4:3:-1] + bwd_inputs(s)[3:4],
                     lambda o, do: jnp.sum(f(o) * f(do), -1), 1e-3),
  "bwd_causal": bwd_case(0.0, True),
  "bwd_full": bwd_case(0.0, False),
  "bwd_softcap_causal": bwd_case(5.0, True),
  "bwd_softcap": bwd_case(5.0, False),
})


def mla_paged_gather_ref(q, pages, tables, lens, scale=0.07):
  return mla_paged_ref(q, pages, tables, lens, scale)[0]


CASES.update({
  "mla_vsplit_h64": (_kw(K.mla_decode_vsplit, dv=512, bn=128, bkv=64, scale=0.07),
                     lambda s: mla_shared_inputs(s, h=64), lambda q, kv: mla_shared_ref(q, kv)[0], 2e-2),
  "mla_vsplit_h16": (_kw(K.mla_decode_vsplit, dv=512, bn=256, bkv=64, scale=0.07),
                     lambda s: mla_shared_inputs(s, h=16), lambda q, kv: mla_shared_ref(q, kv)[0], 2e-2),
  "mla_two_halves": (_kw(K.mla_decode_two_halves, dv=512, bkv=64, scale=0.07),
                     lambda s: mla_shared_inputs(s, h=64), lambda q, kv: mla_shared_ref(q, kv)[0], 2e-2),
  "mla_paged_gather": (_kw(K.mla_paged_gather, dv=512, bn=128, scale=0.07), mla_paged_inputs, mla_paged_gather_ref,
                       2e-2),
  "mla_paged_copy": (_kw(K.mla_paged_copy, dv=512, bn=128, scale=0.07, per=1), mla_paged_inputs, mla_paged_gather_ref,
                     2e-2),
  "mla_paged_copy2": (_kw(K.mla_paged_copy, dv=512, bn=128, scale=0.07, per=2), mla_paged_inputs,
                      mla_paged_gather_ref, 2e-2),
  "mla_paged_gather_fixed": (_kw(K.mla_paged_gather, dv=512, bn=128, scale=0.07, fixed=True), mla_paged_inputs,
                             mla_paged_gather_ref, 2e-2),
})


import probe68a_cases_more  # noqa: E402  (the rest of the cases, which it adds to CASES)

assert probe68a_cases_more.CASES is CASES
