"""Probe 62d: MoE kernels as vLLM, SGLang and DeepSeek write them in Triton, ported with `from mgpu_dsl import
language as tl`: top-k gating (softmax then top-k, renormalised or not; top-k then softmax), DeepSeek-V3's
group-limited routing (sigmoid scores with a correction bias, groups ranked by their top-2 sum), the
`moe_align_block_size` tables (counts, offsets by a prefix sum, padded to the block size: sorted_token_ids,
expert_ids, num_tokens_post_padded), vLLM's fused MoE grouped GEMM (programs read their expert and rows from the
tables, gather token rows, multiply by routing weights, scatter; grouped tile order; an early return), the
block-quantised fp8 variant combining into (T, N) with atomics, and the combine step (sum of top-k weighted rows),
each against NumPy on exact inputs in interpret mode and exported for CUDA, with GPU twins.

Class fixed (design note 211): a TritonSemanticsWarning at `//` or `%` where the grid evaluation shows both operands
never negative: Triton's grouped tile order, `group_size_m = min(num_pid_m - first_pid_m, GROUP_M)` then
`pid % group_size_m` and `// group_size_m` (and every offset built from them, `(pid_n * BN + tl.arange(0, BN)) % N`),
warned in every Triton GEMM and MoE kernel using it; the warnings now wait for the grid walk
(frontend/triton_semantics.py warn_divisions). Operands read from memory (`offs_token // top_k`) still warn."""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import S, export

R = np.random.default_rng(620)
F8 = jnp.float8_e4m3fn


def distinct_logits(t, e, scale=8.0):
  """Logits without ties (top-k and argmax orders are then unique), exact in float32."""
  return (R.permutation(t * e).reshape(t, e) / (t * e) * scale).astype(np.float32)


def routed_ids(t, k, e):
  return np.stack([R.permutation(e)[:k] for _ in range(t)]).astype(np.int32)


def align_want(ids, e, bs):
  """moe_align_block_size's tables: each expert's token slots (flattened (t, k) order), padded to bs with t * k."""
  flat = ids.reshape(-1)
  n = flat.size
  maxp = n + e * (bs - 1)
  sorted_ids, expert_ids, p = np.full(maxp, n, np.int32), np.full(-(-maxp // bs), -1, np.int32), 0
  for x in range(e):
    toks = np.nonzero(flat == x)[0]
    sorted_ids[p:p + toks.size] = toks
    c = -(-toks.size // bs) * bs
    expert_ids[p // bs:(p + c) // bs] = x
    p += c
  return sorted_ids, expert_ids, np.array([p], np.int32)


# ---------------------------------------------------------------- top-k gating
def _gate_out(x, **k):
  return S((x.shape[0], k["TOPK"]), jnp.float32), S((x.shape[0], k["TOPK"]), jnp.int32)


@mg.mgpu_kernel(out_shape=_gate_out, grid=lambda x, **k: (tl.cdiv(x.shape[0], k["BT"]),))
def topk_gating(logits, w_out, id_out, *, TOPK: tl.constexpr, BT: tl.constexpr, RENORM: tl.constexpr,
                SOFTMAX_FIRST: tl.constexpr):
  T, E = logits.shape
  rows = tl.program_id(0) * BT + tl.arange(0, BT)
  cols = tl.arange(0, E)
  x = tl.load(logits.at[rows[:, None], cols[None, :]], mask=rows[:, None] < T, other=0.0).to(tl.float32)
  if SOFTMAX_FIRST:
    p = tl.exp(x - tl.max(x, axis=1)[:, None])
    p = p / tl.sum(p, axis=1)[:, None]
  else:
    p = x
  total = tl.zeros((BT,), tl.float32)
  for i in tl.static_range(TOPK):
    v = tl.max(p, axis=1)
    idx = tl.argmax(p, axis=1)
    tl.store(w_out.at[rows, i], v, mask=rows < T)
    tl.store(id_out.at[rows, i], idx.to(tl.int32), mask=rows < T)
    total += v
    p = tl.where(cols[None, :] == idx[:, None], float("-inf"), p)
  if RENORM or not SOFTMAX_FIRST:
    ks = tl.arange(0, TOPK)
    ws = tl.load(w_out.at[rows[:, None], ks[None, :]], mask=rows[:, None] < T, other=0.0)
    ws = ws / total[:, None] if SOFTMAX_FIRST else tl.softmax(ws, axis=1)
    tl.store(w_out.at[rows[:, None], ks[None, :]], ws, mask=rows[:, None] < T)


def _gating_want(x, k, renorm, softmax_first):
  p = np.asarray(jax.nn.softmax(x, axis=1)) if softmax_first else x
  v, i = (np.asarray(a) for a in jax.lax.top_k(p, k))
  if softmax_first and renorm:
    v = v / v.sum(1, keepdims=True)
  if not softmax_first:
    v = np.asarray(jax.nn.softmax(v, axis=1))
  return v, i


GATES = [(64, 8, 2, 64), (100, 64, 6, 64), (37, 16, 4, 16)]
ORDERS = [(True, False), (True, True), (False, False)]


@pytest.mark.parametrize("t,e,k,bt", GATES)
@pytest.mark.parametrize("softmax_first,renorm", ORDERS)
def test_topk_gating(t, e, k, bt, softmax_first, renorm):
  x = distinct_logits(t, e)
  kw = dict(TOPK=k, BT=bt, RENORM=renorm, SOFTMAX_FIRST=softmax_first)
  w, ids = topk_gating(x, interpret=True, **kw)
  want_w, want_ids = _gating_want(x, k, renorm, softmax_first)
  np.testing.assert_array_equal(np.asarray(ids), want_ids)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=2e-6, atol=1e-7)
  export(topk_gating, x, **kw)


@mg.mgpu_kernel(out_shape=lambda x, b, **k: _gate_out(x, **k), grid=lambda x, b, **k: (tl.cdiv(x.shape[0], 16),))
def grouped_topk(logits, bias_ptr, w_out, id_out, *, TOPK: tl.constexpr, G: tl.constexpr, TOPG: tl.constexpr,
                 SCALE: tl.constexpr = 2.5):
  """DeepSeek-V3's group-limited routing: groups ranked by the sum of their two best biased scores, the TOPG best
  kept, top-k of the biased scores in them, weights the unbiased sigmoid scores renormalised times SCALE."""
  T, E = logits.shape
  rows = tl.program_id(0) * 16 + tl.arange(0, 16)
  cols = tl.arange(0, E)
  scores = tl.sigmoid(tl.load(logits.at[rows[:, None], cols[None, :]], mask=rows[:, None] < T, other=0.0))
  biased = scores + tl.load(bias_ptr.at[cols])[None, :]
  g = biased.reshape(16, G, E // G)
  top1 = tl.max(g, axis=2)
  gs = top1 + tl.max(tl.where(g == top1[:, :, None], float("-inf"), g), axis=2)
  gsel = tl.zeros((16, G), tl.int32)
  for i in tl.static_range(TOPG):
    hit = tl.arange(0, G)[None, :] == tl.argmax(gs, axis=1)[:, None]
    gsel = tl.where(hit, 1, gsel)
    gs = tl.where(hit, float("-inf"), gs)
  keep = tl.broadcast_to(gsel[:, :, None], (16, G, E // G)).reshape(16, E) > 0
  cand = tl.where(keep, biased, float("-inf"))
  total = tl.zeros((16,), tl.float32)
  for i in tl.static_range(TOPK):
    idx = tl.argmax(cand, axis=1)
    hit = cols[None, :] == idx[:, None]
    w = tl.sum(tl.where(hit, scores, 0.0), axis=1)
    tl.store(id_out.at[rows, i], idx.to(tl.int32), mask=rows < T)
    tl.store(w_out.at[rows, i], w, mask=rows < T)
    total += w
    cand = tl.where(hit, float("-inf"), cand)
  ks = tl.arange(0, TOPK)
  ws = tl.load(w_out.at[rows[:, None], ks[None, :]], mask=rows[:, None] < T, other=1.0)
  tl.store(w_out.at[rows[:, None], ks[None, :]], ws / total[:, None] * SCALE, mask=rows[:, None] < T)


def _grouped_want(x, bias, k, g, topg, scale=2.5):
  s = np.asarray(jax.nn.sigmoid(x))
  b = s + bias[None]
  t, e = x.shape
  gs = np.sort(b.reshape(t, g, e // g), axis=2)[:, :, -2:].sum(2)
  keep = np.zeros((t, g), bool)
  np.put_along_axis(keep, np.argsort(-gs, axis=1, kind="stable")[:, :topg], True, 1)
  ids = np.argsort(-np.where(np.repeat(keep, e // g, 1), b, -np.inf), axis=1, kind="stable")[:, :k]
  w = np.take_along_axis(s, ids, 1)
  return w / w.sum(1, keepdims=True) * np.float32(scale), ids


@pytest.mark.parametrize("t,e,g,topg,k", [(40, 64, 8, 4, 6), (16, 32, 4, 2, 4)])
def test_deepseek_grouped_topk(t, e, g, topg, k):
  x = distinct_logits(t, e, 6.0) - 3
  bias = (R.permutation(e) / e * 0.01).astype(np.float32)
  w, ids = grouped_topk(x, bias, TOPK=k, G=g, TOPG=topg, interpret=True)
  want_w, want_ids = _grouped_want(x, bias, k, g, topg)
  np.testing.assert_array_equal(np.asarray(ids), want_ids)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=2e-6, atol=1e-7)
  export(grouped_topk, x, bias, TOPK=k, G=g, TOPG=topg)


# ---------------------------------------------------------------- Triton's tl.topk (values only), then softmax
@mg.mgpu_kernel(out_shape=lambda x, **k: S((x.shape[0], k["K"]), jnp.float32),
                grid=lambda x, **k: (tl.cdiv(x.shape[0], 16),))
def topk_then_softmax(x_ptr, o_ptr, *, K: tl.constexpr, DIM: tl.constexpr):
  """Triton 3's `tl.topk(x, k, dim=...)` (it was MG002, "tl has no attribute 'topk'")."""
  T, E = x_ptr.shape
  rows = tl.program_id(0) * 16 + tl.arange(0, 16)
  x = tl.load(x_ptr.at[rows[:, None], tl.arange(0, E)[None, :]], mask=rows[:, None] < T, other=0.0)
  v = tl.topk(x, K) if DIM is None else tl.topk(x, K, dim=DIM)
  tl.store(o_ptr.at[rows[:, None], tl.arange(0, K)[None, :]], tl.softmax(v, axis=1), mask=rows[:, None] < T)


@pytest.mark.parametrize("t,e,k,dim", [(40, 64, 4, None), (16, 8, 2, 1), (33, 128, 8, -1)])
def test_triton_topk_values(t, e, k, dim):
  x = distinct_logits(t, e)
  got = topk_then_softmax(x, K=k, DIM=dim, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(jax.nn.softmax(jax.lax.top_k(x, k)[0], axis=1)),
                             rtol=2e-6, atol=1e-7)
  export(topk_then_softmax, x, K=k, DIM=dim)
