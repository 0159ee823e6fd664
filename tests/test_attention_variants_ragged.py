"""Attention variants as FlashAttention users write them (probe 62c): ragged and data-dependent ones.

Varlen (packed) batches from `cu_seqlens`, each program finding its sequence and its bounds from loaded scalars;
attention sinks (an extra per-head logit in the softmax denominator); dropout inside attention from a seed (Philox,
checked against a NumPy Philox of our own); a decode step, one or a few queries (their heads packed as rows)
against a long KV cache, split along the keys with a combine kernel. Each: interpret mode against a float32 jnp
reference, the logsumexp too; CUDA export; the GPU against the reference and interpret mode (-m gpu). And the
class probe 62c fixed on the way: a vector of a few elements (a decode step's (queries, heads) statistics) reshaped
to 2-D, which was MG204.
"""
import functools
import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from attention_variants_lib import (NEG, TOL, Case, _block, _fwd_out, _q_grid, finish, inputs, normal, positions,
                                    reference, softmax_step, specs_of, variant_tests)
from locate import expect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention_variants as av  # noqa: E402  (varlen_attention, decode_split and decode_combine: the example's)

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- varlen: packed sequences from cu_seqlens
# (examples/attention_variants.py's varlen_attention)
def _varlen_case(lengths, heads, kv_heads, dtype, causal, bq):
  cu = np.concatenate([[0], np.cumsum(lengths)]).astype(np.int32)
  rng = np.random.default_rng(len(lengths))
  total, d = int(cu[-1]), 64
  q = normal(rng, (total, heads, d), dtype, 5.5)
  k = normal(rng, (total, kv_heads, d), dtype, 5.5)
  v = normal(rng, (total, kv_heads, d), dtype)
  kernel = functools.partial(av.varlen_attention, max_seqlen=max(lengths), bq=bq, bkv=64, stages=2, scale=0.125,
                             causal=causal)

  def want():
    outs, lses = [], []
    for a, e in zip(cu[:-1], cu[1:]):
      r, c = positions(e - a, e - a)
      o, lse = reference(q[None, a:e], k[None, a:e], v[None, a:e], 0.125, mask=(c <= r) if causal else None)
      outs.append(o[0])
      lses.append(lse[0])
    return jnp.concatenate(outs, 0), jnp.concatenate(lses, -1)
  return Case(lambda interpret: kernel(q, k, v, jnp.asarray(cu), interpret=interpret), want,
              lambda *a: kernel(*a), specs_of(q, k, v, jnp.asarray(cu)), (TOL[dtype], 1e-4))


# ---------------------------------------------------------------- attention sinks
@mg.mgpu_kernel(out_shape=_fwd_out, grid=_q_grid, block=_block)
def sink_attention(q, k, v, sinks, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                   scale: ml.constexpr, window: ml.constexpr = 0):
  """softmax over the keys and one more logit per head, sinks[h], that takes no value (gpt-oss); with `window`,
  causal over the last `window` keys (a sliding window with a sink)."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  m = ml.full((bq,), sinks[h], jnp.float32)     # the sink is the first logit seen: exp(sink - m) = 1 in l
  l = ml.full((bq,), 1.0, jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  rows = i * bq + ml.arange(bq)[:, None]
  lo, hi = 0, ml.cdiv(k.shape[1], bkv)
  if window:
    lo, hi = ml.maximum(i * bq - window, 0) // bkv, ml.minimum(ml.cdiv((i + 1) * bq, bkv), hi)
  for j in ml.range(lo, hi, stages=stages):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    keep = cols < k.shape[1]
    if window:
      keep = keep & (cols <= rows) & (cols > rows - window)
    s = ml.where(keep, ml.dot(q_s, k_s.T) * scale, -math.inf)
    m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
  finish(o, lse, q_s, m, l, acc, b, h, i, bq)


def _sink_case(shape, kv_heads, dtype, sinks, window=0, bq=64):
  q, k, v, _ = inputs(shape, kv_heads, dtype)
  sinks = jnp.asarray(np.asarray(sinks, np.float32))
  scale = 1.0 / math.sqrt(shape[3])
  r, c = positions(shape[1], shape[1])
  mask = ((c <= r) & (c > r - window)) if window else None
  kernel = functools.partial(sink_attention, bq=bq, bkv=64, stages=2, scale=scale, window=window)
  return Case(lambda interpret: kernel(q, k, v, sinks, interpret=interpret),
              lambda: reference(q, k, v, scale, mask=mask, sink=sinks), lambda *a: kernel(*a),
              specs_of(q, k, v, sinks), (TOL[dtype], 1e-4), big_logits=not window)


# ---------------------------------------------------------------- dropout inside attention
@mg.mgpu_kernel(out_shape=_fwd_out, grid=_q_grid, block=_block)
def dropout_attention(q, k, v, seed: ml.scalar, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr,
                      stages: ml.constexpr, scale: ml.constexpr, rate: ml.constexpr):
  """o = dropout(softmax(s)) @ v: each probability kept with probability 1 - rate (and scaled by 1 / (1 - rate))
  by ml.rand(seed, its flat index in (batch, heads, sq, skv)); lse of the scores before the dropout."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d, sq, skv = q.shape[3], q.shape[1], k.shape[1]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  rows = i * bq + ml.arange(bq)[:, None]
  m = ml.full((bq,), NEG, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  for j in ml.range(ml.cdiv(skv, bkv), stages=stages, warp_specialize=True):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.where(cols < skv, ml.dot(q_s, k_s.T) * scale, -math.inf)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    alpha = ml.exp(m - m_new)
    p = ml.exp(s - m_new[:, None])
    l = l * alpha + ml.sum(p, axis=1)                # the denominator counts every key, dropped or not
    keep = ml.rand(seed, ((b * q.shape[2] + h) * sq + rows) * skv + cols) >= rate
    p = ml.where(keep, p * (1.0 / (1.0 - rate)), 0.0)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  finish(o, lse, q_s, m, l, acc, b, h, i, bq)


def philox_keep(seed, n, rate):
  """ml.rand(seed, e) >= rate for e in range(n): Philox4x32-10's first word (key = seed, counter = (e, 0, 0, 0)),
  folded and scaled as Triton's uint_to_uniform_float; NumPy, written from Random123's definition."""
  m0, m1, w0, w1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57), np.uint32(0x9E3779B9), np.uint32(0xBB67AE85)
  c0, c1, c2, c3 = np.arange(n, dtype=np.uint32), *(np.zeros(n, np.uint32) for _ in range(3))
  k0, k1 = np.uint32(seed & 0xFFFFFFFF), np.uint32(seed >> 32)
  for _ in range(10):
    p0, p1 = m0 * c0.astype(np.uint64), m1 * c2.astype(np.uint64)
    hi0, lo0 = (p0 >> np.uint64(32)).astype(np.uint32), p0.astype(np.uint32)
    hi1, lo1 = (p1 >> np.uint64(32)).astype(np.uint32), p1.astype(np.uint32)
    c0, c1, c2, c3 = hi1 ^ c1 ^ k0, lo1, hi0 ^ c3 ^ k1, lo0
    with np.errstate(over="ignore"):          # (the key schedule wraps modulo 2 ** 32, as Philox's does)
      k0, k1 = k0 + w0, k1 + w1
  bits = c0.view(np.int32)
  folded = np.where(bits < 0, -bits - 1, bits)
  return folded.astype(np.float32) * np.float32(4.6566127342e-10) >= rate


def _dropout_case(shape, kv_heads, dtype, seed, rate, bq):
  q, k, v, _ = inputs(shape, kv_heads, dtype)
  b, sq, h, d = shape
  scale = 1.0 / math.sqrt(d)
  kernel = functools.partial(dropout_attention, bq=bq, bkv=64, stages=2, scale=scale, rate=rate)

  def want():
    keep = jnp.asarray(philox_keep(seed, b * h * sq * sq, rate).reshape(b, h, sq, sq))
    _, lse = reference(q, k, v, scale)
    g = h // kv_heads
    s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), jnp.repeat(k, g, 2).astype(jnp.float32)) * scale
    p = jnp.where(keep, jnp.exp(s - lse[..., None]) / (1.0 - rate), 0.0)
    return jnp.einsum("bhqk,bkhd->bqhd", p, jnp.repeat(v, g, 2).astype(jnp.float32)), lse
  return Case(lambda interpret: kernel(q, k, v, seed, interpret=interpret), want, lambda *a: kernel(*a),
              specs_of(q, k, v, jnp.int32(seed)), (TOL[dtype], 1e-4))


# ---------------------------------------------------------------- a decode step, split along the keys
# (examples/attention_variants.py's decode: decode_split, then decode_combine)
def _decode_case(nq, skv, splits, heads, kv_heads, d, dtype):
  rng = np.random.default_rng(skv)
  q = normal(rng, (2, nq, heads, d), dtype, 5.5)
  k, v = normal(rng, (2, skv, kv_heads, d), dtype, 5.5), normal(rng, (2, skv, kv_heads, d), dtype)
  step = functools.partial(av.decode, splits=splits)
  r, c = positions(nq, skv)

  def want():
    o, lse = reference(q, k, v, 1.0 / math.sqrt(d), mask=c <= r + skv - nq)
    return o, lse.transpose(0, 2, 1)               # (batch, nq, heads), as the combine stores it
  return Case(lambda interpret: step(q, k, v, interpret=interpret), want,
              step, specs_of(q, k, v), (TOL[dtype], 1e-4))


F16, BF16 = jnp.float16, jnp.bfloat16
CASES = {
    "varlen_f16": lambda: _varlen_case([70, 1, 130, 64, 33], 4, 2, F16, False, 64),
    "varlen_causal_bf16_bq128": lambda: _varlen_case([200, 5, 129], 2, 1, BF16, True, 128),
    "sinks_bf16_gqa": lambda: _sink_case((1, 200, 4, 64), 2, BF16, [3.0, -1.0, 150.0, 0.5]),
    "sinks_window_f16": lambda: _sink_case((2, 300, 2, 128), 1, F16, [0.0, 2.0], window=100, bq=128),
    "dropout_f16": lambda: _dropout_case((1, 100, 2, 64), 1, F16, 7, 0.2, 64),
    "dropout_bf16_bq128": lambda: _dropout_case((2, 130, 2, 64), 2, BF16, 123456789, 0.1, 128),
    "decode_one_query_mqa_d64": lambda: _decode_case(1, 4096, 8, 8, 1, 64, F16),
    "decode_one_query_gqa_d128": lambda: _decode_case(1, 1000, 4, 8, 2, 128, BF16),
    "decode_two_queries_d64": lambda: _decode_case(2, 777, 3, 8, 2, 64, F16),      # 2 x 4 rows: (8,) statistics
    "decode_four_queries_d128": lambda: _decode_case(4, 1025, 2, 8, 2, 128, BF16),
    "decode_three_queries_d64": lambda: _decode_case(3, 513, 2, 8, 2, 64, F16),     # 3 x 4 rows: (12,) statistics
}


(test_variant_in_interpret_mode_matches_the_float32_reference, test_variant_exports_for_cuda,
 test_gpu_variant_matches_the_reference_and_interpret_mode) = variant_tests(CASES)


def test_the_tests_philox_is_ml_rand():
  """philox_keep (the dropout reference) against ml.rand itself: the same keep mask, element for element."""
  @mg.mgpu_kernel(out_shape=lambda x, seed: S(x.shape, jnp.bool_), grid=lambda x, seed: (x.shape[0] // 256,))
  def keep(x, seed: ml.scalar, out):
    idx = ml.program_id(0) * 256 + ml.arange(256)
    out.at[ml.ds(ml.program_id(0) * 256, 256)][...] = ml.rand(seed, idx) >= 0.3

  got = np.asarray(keep(jnp.zeros((1024,), jnp.float32), 99, interpret=True))
  np.testing.assert_array_equal(got, philox_keep(99, 1024, 0.3))
  assert 0.6 < got.mean() < 0.8


# ---------------------------------------------------------------- the class fixed: few-element vectors reshaped
@pytest.mark.parametrize("n,shape", [(8, (2, 4)), (16, (4, 4)), (24, (3, 8)), (40, (5, 8)), (192, (2, 96)),
                                     (120, (4, 30)), (16, (2, 2, 4)), (12, (3, 4)), (6, (2, 3))])
def test_a_few_element_vector_reshaped_to_2d_is_stored_and_computed_on(n, shape):
  """A vector of n (a multiple of 8, or a row statistic of any length; not a multiple of 128; at most 256) elements
  reshaped to a shape no register tensor holds (a decode step's (queries, heads) statistics) was MG204 at the
  reshape: it is held as a small statistic is and stored into a strided window (and math on it, a row max of it
  broadcast back) as NumPy says."""
  rows, last = math.prod(shape[:-1]), shape[-1]

  @mg.mgpu_kernel(out_shape=lambda x: (S((2,) + shape[:-1] + (2 * last,), jnp.float32),), grid=lambda x: (2,))
  def kernel(x, out):
    b = ml.program_id(0)
    m = ml.max(x[...], axis=1)                       # (n,)
    t = m.reshape(shape)
    out.at[b, ..., ml.ds(0, last)][...] = t
    out.at[b, ..., ml.ds(last, last)][...] = ml.exp(t - ml.max(t, axis=-1, keepdims=True)) + b

  x = jnp.asarray(np.random.default_rng(n).standard_normal((n, 64), np.float32))
  got = np.asarray(kernel(x, interpret=True)[0])
  t = np.asarray(x).max(1).reshape(shape)
  for b in range(2):
    np.testing.assert_allclose(got[b, ..., :last], t, rtol=1e-6)
    np.testing.assert_allclose(got[b, ..., last:], np.exp(t - t.max(-1, keepdims=True)) + b, rtol=1e-5)
  jax.export.export(jax.jit(kernel), platforms=["cuda"])(S(x.shape, x.dtype))
  assert rows * last == n


@mg.mgpu_kernel(out_shape=lambda x: S((3, 4), jnp.float32))
def odd_window(x, out):
  v = x[ml.ds(0, 12)]                # (read padded to 16 elements: held)
  out[...] = v.reshape(3, 4)


@mg.mgpu_kernel(out_shape=lambda x: S((3, 5), jnp.float32))
def odd_window_15(x, out):
  v = x[ml.ds(0, 15)]
  out[...] = v.reshape(3, 5)


def test_an_odd_length_vector_that_is_no_row_statistic_is_still_refused_at_the_reshape():
  """15 elements read from memory (no row statistic, which would be held: the decode case of 3 queries; 12, read
  padded to 16, are) stay MG204 at the reshape, with its hint."""
  x = jnp.arange(64, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(odd_window(x, interpret=True)), np.arange(12).reshape(3, 4))
  expect(odd_window_15, [S((64,), jnp.float32)], mg.LayoutError, "v.reshape(3, 5)",
         "reshape of v, a vector of 15 elements, into (3, 5): a register tensor of more than one axis needs a multiple"
         " of 128 elements (one per thread of a warpgroup; a 1-D vector only a multiple of 8)",
         hint="pad it to a length that fills the threads: padded = ml.concatenate([v, ml.zeros((625,), v.dtype)])"
              ".reshape(128, 5), whose first 3 rows are the reshape: store them with out.at[ml.ds(0, 128)].store(padded,"
              " mask=ml.arange(128)[:, None] < 3)")


@pytest.mark.parametrize("n", [4, 12, 16, 64])
@pytest.mark.parametrize("form", ["reshape", "none_index", "two_unit_axes"])
def test_a_short_vector_with_size_1_axes_inserted_is_stored_into_its_window(n, form):
  """`v.reshape(1, n)` / `v[None, :]` of a vector of fewer than 128 elements (a decode step's one query of n heads)
  stored into a (1, n) window: MG204 at the value for n not a multiple of 8 ("has shape (1, 4)"); now the vector is
  stored into the window with its size-1 axis indexed."""
  @mg.mgpu_kernel(out_shape=lambda x: S((2, 1, 3, n), jnp.float32), grid=lambda x: (2,))
  def kernel(x, out):
    b = ml.program_id(0)
    m = ml.max(x[...], axis=1)
    if form == "reshape":
      out.at[b, :, 1, :][...] = m.reshape(1, n)
    elif form == "none_index":
      out.at[b, :, 1, :][...] = (m * 2.0)[None, :]
    else:
      out.at[b, :, ml.ds(1, 1), :][...] = m.reshape(1, 1, n)
    out.at[b, :, 0, :][...] = ml.zeros((1, n), jnp.float32)
    out.at[b, :, 2, :][...] = ml.full((1, n), b * 1.0, jnp.float32)

  x = jnp.asarray(np.random.default_rng(n).standard_normal((n, 64), np.float32))
  got = np.asarray(kernel(x, interpret=True))
  want = np.asarray(x).max(1) * (2.0 if form == "none_index" else 1.0)
  for b in range(2):
    np.testing.assert_array_equal(got[b, 0, 1], want)
    np.testing.assert_array_equal(got[b, 0, 0], 0.0)
    np.testing.assert_array_equal(got[b, 0, 2], float(b))
  jax.export.export(jax.jit(kernel), platforms=["cuda"])(S(x.shape, x.dtype))


def test_a_loop_no_stage_count_fits_says_what_takes_the_memory():
  """MG402 at a pipelined loop that fits at no stage count: a decode step at head_dim 256 with bkv=128, whose dots of
  4 rows the compiler pads to 64 through 144 KiB of scratch live across the loop. Its hint was the bare "use smaller
  tiles"; it is now at the loop's largest buffer (probe 62b), the loop in a note, and names the tile that fits
  (bkv=32 at stages=2; bkv=64 fits too, unpipelined by the plan)."""
  specs = [S((2, 1, 16, 256), jnp.float16), S((2, 777, 4, 256), jnp.float16), S((2, 777, 4, 256), jnp.float16)]
  e = expect(av.decode_split, specs, mg.SmemCapacityError, "ml.smem((bkv, d))",
             "with stages=2 this loop's buffers need 263168 bytes (k_s 64 KiB, v_s 64 KiB per stage, 2 copies each),"
             " more than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use",
             splits=3, bkv=128, scale=0.0625)
  assert e.hint.startswith("use smaller tiles: k_s of shape (32, 256) and v_s of shape (32, 256) instead of (128, 256)"
                           " and (128, 256)"), e.hint
  assert "the pipelined loop (stages=2)" in e.notes[0], e.notes
  av.decode_split.check(*specs, splits=3, bkv=32, scale=0.0625)           # the hinted tiles fit
  av.decode_split.check(*specs, splits=3, bkv=64, scale=0.0625)           # the hinted tiles fit
