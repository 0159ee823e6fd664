"""Attention variants as FlexAttention users write them (probe 62c): masks and score modifications.

Sliding-window (local) attention with a window on both sides and the key loop cut to the window, also in
examples/attention.py's own style (base-2 exponentials, a warp-specialised loop from a run-time first block);
logit softcapping; ALiBi biases from per-head slopes (one kv head: MQA); prefix-LM masks; document masking from
segment ids loaded per key block, the loop over the tile's documents' blocks only; causal attention at head_dim 32-256 with sequence tails. Each: interpret mode
against a float32 jnp reference (16-bit inputs, logits past exp's float32 range), the logsumexp too; CUDA export;
the GPU against the reference and interpret mode (-m gpu).
"""
import functools
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from attention_variants_lib import (NEG, TOL, Case, _block, _fwd_out, _q_grid, finish, flex_forward, inputs,
                                    positions, reference, softmax_step, specs_of, variant_tests)

LOG2E = 1.4426950408889634


# ---------------------------------------------------------------- the score and mask functions a user passes
def window(left, right):
  """mask_mod and kv_range of a window of `left` keys before each query and `right` after it."""
  def mask_mod(b, h, rows, cols):
    return (cols >= rows - left) & (cols <= rows + right)

  def kv_range(i, bq, bkv, skv):      # the key blocks the tile's window touches: the loop runs over those only
    return ml.maximum(i * bq - left, 0) // bkv, ml.minimum(ml.cdiv((i + 1) * bq + right, bkv), ml.cdiv(skv, bkv))
  return mask_mod, kv_range


def softcap(cap):
  def score_mod(s, b, h, rows, cols):
    return cap * ml.tanh(s / cap)
  return score_mod


def alibi(heads):
  def score_mod(s, b, h, rows, cols):
    slope = ml.exp2(-8.0 * (h + 1) / heads)            # ALiBi's geometric slopes, 2 ** (-8 (h + 1) / heads)
    return s - slope * ml.abs(rows - cols)
  return score_mod


def prefix_lm(prefix):
  def mask_mod(b, h, rows, cols):
    return (cols <= rows) | (cols < prefix)           # the prefix sees itself whole, the rest causally
  return mask_mod


def causal(b, h, rows, cols):
  return cols <= rows


def causal_range(i, bq, bkv, skv):
  return 0, ml.minimum(ml.cdiv((i + 1) * bq, bkv), ml.cdiv(skv, bkv))


# ---------------------------------------------------------------- examples/attention.py's style, a window
@mg.mgpu_kernel(out_shape=_fwd_out, grid=_q_grid, block=_block)
def local_attention(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                    scale: ml.constexpr, left: ml.constexpr, right: ml.constexpr, ws: ml.constexpr):
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  c = scale * LOG2E
  m = ml.full((bq,), -1e30, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  lo = ml.maximum(i * bq - left, 0) // bkv
  hi = ml.minimum(ml.cdiv((i + 1) * bq + right, bkv), ml.cdiv(k.shape[1], bkv))
  rows = i * bq + ml.arange(bq)[:, None]
  for j in ml.range(lo, hi, stages=stages, warp_specialize=ws):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where((cols >= rows - left) & (cols <= rows + right) & (cols < k.shape[1]), s, -jnp.inf)
    m_new = ml.maximum(m, ml.max(s, axis=1) * c)
    alpha = ml.exp2(m - m_new, approx=True)
    p = ml.exp2(s * c - m_new[:, None], approx=True)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  q_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(q_s, o.at[b, ml.ds(i * bq, bq), h, :])
  r = i * bq + ml.arange(bq)
  lse.at[b, h, ml.ds(i * bq, bq)].store((m + ml.log2(l)) / LOG2E, mask=r < q.shape[1])


# ---------------------------------------------------------------- document masking: segment ids per key block
@mg.mgpu_kernel(out_shape=_fwd_out, grid=_q_grid, block=_block)
def document_attention(q, k, v, seg, starts, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                       scale: ml.constexpr):
  """Each query sees the keys of its own document: seg (batch, seq) int32 document ids, starts (batch, docs + 1)
  their first rows. The loop visits the key blocks of the documents the tile's queries are in (bounds from loaded
  scalars), masking by the segment ids of each block."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  rows = i * bq + ml.arange(bq)
  seg_q = seg.at[b, ml.ds(i * bq, bq)].load(mask=rows < q.shape[1], other=-1)
  first, last = seg[b, i * bq], seg[b, ml.minimum((i + 1) * bq, q.shape[1]) - 1]
  m = ml.full((bq,), NEG, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  for j in ml.range(starts[b, first] // bkv, ml.cdiv(starts[b, last + 1], bkv), stages=stages):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)
    seg_k = seg.at[b, ml.ds(j * bkv, bkv)].load(mask=cols < k.shape[1], other=-2)
    s = ml.where(seg_q[:, None] == seg_k[None, :], ml.dot(q_s, k_s.T) * scale, -math.inf)
    m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
  finish(o, lse, q_s, m, l, acc, b, h, i, bq)


# ---------------------------------------------------------------- the cases
def _flex_case(shape, kv_heads, dtype, mods, ref_kw, bq=64, bkv=64, stages=2, seed=0):
  """(a softcap bounds the logits: its logsumexp stays small, and the check of large logits is left out)"""
  q, k, v, _ = inputs(shape, kv_heads, dtype, seed=seed)
  scale = 1.0 / math.sqrt(shape[3])
  sq = shape[1]
  ref_kw = ref_kw(*positions(sq, sq)) if callable(ref_kw) else ref_kw
  kernel = functools.partial(flex_forward, bq=bq, bkv=bkv, stages=stages, scale=scale, **mods)
  return Case(lambda interpret: kernel(q, k, v, interpret=interpret),
              lambda: reference(q, k, v, scale, **ref_kw), kernel, specs_of(q, k, v), (TOL[dtype], 1e-4),
              big_logits="score_mod" not in mods or "alibi" in mods["score_mod"].__qualname__)


def _local_case(shape, dtype, left, right, bq, ws):
  q, k, v, _ = inputs(shape, 1, dtype)
  scale = 1.0 / math.sqrt(shape[3])
  kernel = functools.partial(local_attention, bq=bq, bkv=64, stages=2, scale=scale, left=left, right=right, ws=ws)
  r, c = positions(shape[1], shape[1])
  return Case(lambda interpret: kernel(q, k, v, interpret=interpret),
              lambda: reference(q, k, v, scale, mask=(c >= r - left) & (c <= r + right)), kernel,
              specs_of(q, k, v), (TOL[dtype], 1e-4))


def _document_case(lengths, dtype, bq):
  seq = sum(lengths)
  q, k, v, _ = inputs((2, seq, 2, 64), 1, dtype)
  docs = (lengths, lengths[::-1])
  seg = jnp.asarray(np.stack([np.repeat(np.arange(len(n)), n) for n in docs]).astype(np.int32))
  starts = jnp.asarray(np.stack([np.concatenate([[0], np.cumsum(n)]) for n in docs]).astype(np.int32))
  kernel = functools.partial(document_attention, bq=bq, bkv=64, stages=2, scale=0.125)
  return Case(lambda interpret: kernel(q, k, v, seg, starts, interpret=interpret),
              lambda: reference(q, k, v, 0.125, mask=seg[:, None, :, None] == seg[:, None, None, :]), kernel,
              specs_of(q, k, v, seg, starts), (TOL[dtype], 1e-4))


F16, BF16 = jnp.float16, jnp.bfloat16
CASES = {
    # a window on both sides, the loop from the window's first block to its last (333: a partial last tile)
    "window_f16_d64_seq333": lambda: _flex_case((1, 333, 2, 64), 1, F16, dict(zip(("mask_mod", "kv_range"),
                                                                                window(100, 17))),
                                                lambda r, c: dict(mask=(c >= r - 100) & (c <= r + 17))),
    "window_bf16_d128_bq128": lambda: _flex_case((1, 300, 2, 128), 2, BF16, dict(zip(("mask_mod", "kv_range"),
                                                                                   window(40, 40))),
                                                 lambda r, c: dict(mask=(c >= r - 40) & (c <= r + 40)), bq=128),
    "local_ws_f16_d64_seq333": lambda: _local_case((1, 333, 2, 64), F16, 100, 17, 128, True),
    "local_bf16_d256_seq77": lambda: _local_case((1, 77, 2, 256), BF16, 30, 5, 64, False),
    "local_f16_d32_seq500_ws": lambda: _local_case((1, 500, 2, 32), F16, 64, 64, 128, True),
    "softcap_bf16_d128": lambda: _flex_case((1, 200, 2, 128), 1, BF16, dict(score_mod=softcap(30.0)),
                                            dict(score_mod=lambda s: 30.0 * jnp.tanh(s / 30.0)), bq=128),
    "softcap_causal_f16_d64": lambda: _flex_case((2, 256, 2, 64), 2, F16, dict(score_mod=softcap(50.0),
                                                                            mask_mod=causal, kv_range=causal_range),
                                                 lambda r, c: dict(score_mod=lambda s: 50.0 * jnp.tanh(s / 50.0),
                                                                   mask=c <= r), stages=3),
    "alibi_mqa_f16_d64": lambda: _flex_case(
        (1, 300, 4, 64), 1, F16, dict(score_mod=alibi(4)),
        lambda r, c: dict(bias=-(2.0 ** (-8.0 * (jnp.arange(4) + 1) / 4))[None, :, None, None] * jnp.abs(r - c))),
    "prefix_lm_bf16_d96": lambda: _flex_case((1, 200, 2, 96), 1, BF16, dict(mask_mod=prefix_lm(70)),
                                             lambda r, c: dict(mask=(c <= r) | (c < 70))),
    "documents_f16_bq64": lambda: _document_case([30, 70, 1, 64, 35], F16, 64),
    "documents_bf16_bq128": lambda: _document_case([130, 7, 63], BF16, 128),
}
for _d, _seq in ((32, 77), (64, 513), (96, 200), (128, 130), (256, 77)):
  CASES[f"causal_d{_d}_seq{_seq}"] = functools.partial(
      _flex_case, (1, _seq, 2, _d), 1, BF16 if _d % 64 else F16, dict(mask_mod=causal, kv_range=causal_range),
      lambda r, c: dict(mask=c <= r), bq=64 if _d == 256 else 128, seed=_d)


(test_variant_in_interpret_mode_matches_the_float32_reference, test_variant_exports_for_cuda,
 test_gpu_variant_matches_the_reference_and_interpret_mode) = variant_tests(CASES)


def test_a_window_cut_loop_visits_only_the_windows_blocks():
  """The kv_range of a window: tile 2 of 64 rows with a window of 100 before and 17 after sees key blocks 0-3 of
  64 (not 0-5): the loop's bounds as the kernel computes them, in interpret mode, against Python's."""
  mask_mod, kv_range = window(100, 17)

  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((6, 8), jnp.int32), grid=lambda x: (6,))
  def bounds(x, out):
    i = ml.program_id(0)
    lo, hi = kv_range(i, 64, 64, x.shape[0])
    out.at[i][...] = ml.where(ml.arange(8) == 0, lo, hi)

  got = np.asarray(bounds(jnp.zeros((333,), jnp.float32), interpret=True))
  for i in range(6):
    lo, hi = max(i * 64 - 100, 0) // 64, min(-(-((i + 1) * 64 + 17) // 64), -(-333 // 64))
    assert got[i, 0] == lo and (got[i, 1:] == hi).all(), (i, got[i])
  assert got[2, 0] == 0 and got[2, 1] == 4
