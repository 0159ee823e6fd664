"""Attention variants written as FlexAttention / FlashAttention users write them (probe 62c): the kernels the
tests/test_attention_variants*.py files share, and their float32 jnp references.

(batch, seq, heads, head_dim) arrays as examples/attention.py takes them. `flex_forward` is FlexAttention's
shape of the forward: a `score_mod(s, b, h, rows, cols)` and a `mask_mod(b, h, rows, cols)` passed as constexpr
functions (plain Python functions of the kernel language), and `kv_blocks(i, bq, bkv, skv)` the range of key
blocks a query tile visits (a sliding window cuts it to the window). The online softmax is in natural
exponentials and starts its max at a finite floor, so that a row with no key in a block (a window, a document
boundary) keeps its statistics.
"""
from __future__ import annotations

import math
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from attention_variants import softmax_step  # noqa: E402,F401  (the online softmax's step: the example's)

NEG = -1e30        # the running max's floor: a fully masked block leaves m, l and acc as they were


def normal(rng, shape, dtype, scale=1.0):
  return jnp.asarray((rng.standard_normal(shape, np.float32) * scale).astype(dtype))


def inputs(shape, kv_heads, dtype, scale=5.5, seed=0, kv_seq=None):
  """q, k, v, do; q and k scaled so that the scaled logits (sm_scale 1 / sqrt(head_dim)) have a standard deviation
  of about 30: their maxima pass 88, where exp overflows float32 (a missing max subtraction gives inf)."""
  b, s, h, d = shape
  rng = np.random.default_rng(seed)
  skv = s if kv_seq is None else kv_seq
  return (normal(rng, shape, dtype, scale), normal(rng, (b, skv, kv_heads, d), dtype, scale),
          normal(rng, (b, skv, kv_heads, d), dtype), normal(rng, shape, dtype))


def rel(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return float(np.linalg.norm(got - want) / np.linalg.norm(want))


TOL = {jnp.float16: 1e-2, jnp.bfloat16: 4e-2}


# ---------------------------------------------------------------- references (float32 jnp)
def reference(q, k, v, scale, mask=None, score_mod=None, sink=None, bias=None):
  """(o, lse) of softmax(score_mod(q @ k.T * scale) + bias, masked) @ v in float32; `mask` (b, h, sq, skv) or
  broadcastable booleans, `score_mod(s)` a jnp function of the scaled logits, `sink` (heads,) logits in the
  denominator only, `bias` broadcastable to (b, h, sq, skv)."""
  g = q.shape[2] // k.shape[2]
  k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
  s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
  if score_mod is not None:
    s = score_mod(s)
  if bias is not None:
    s = s + bias
  if mask is not None:
    s = jnp.where(mask, s, -jnp.inf)
  if sink is not None:
    full = jnp.concatenate([s, jnp.broadcast_to(sink[None, :, None, None], s.shape[:3] + (1,))], axis=-1)
    lse = jax.nn.logsumexp(full, axis=-1)
  else:
    lse = jax.nn.logsumexp(s, axis=-1)
  p = jnp.exp(s - lse[..., None])
  o = jnp.einsum("bhqk,bkhd->bqhd", p, v.astype(jnp.float32))
  return o, lse


def positions(sq, skv):
  return jnp.arange(sq)[:, None], jnp.arange(skv)[None, :]


# ---------------------------------------------------------------- the FlexAttention-shaped forward
def all_blocks(i, bq, bkv, skv):
  return 0, ml.cdiv(skv, bkv)


def no_mod(s, b, h, rows, cols):
  return s


def no_mask(b, h, rows, cols):
  return rows >= 0


def _fwd_out(q, *_, **__):
  b, s, h, _d = q.shape
  return jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, h, s), jnp.float32)


def _q_grid(q, *_, bq, **__):
  return (ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0])


def _block(q, *_, bq, **__):
  return 128 if bq == 64 else 256


@ml.inline
def finish(o, lse, o_s, m, l, acc, b, h, i, bq):
  """o = acc / l through o_s (a partial last query tile clipped by TMA), lse = m + log(l) of the rows inside."""
  o_s[...] = (acc / l[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
  rows = i * bq + ml.arange(bq)
  lse.at[b, h, ml.ds(i * bq, bq)].store(m + ml.log(l), mask=rows < lse.shape[2])


def flex_forward_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                        scale: ml.constexpr, score_mod: ml.constexpr = no_mod, mask_mod: ml.constexpr = no_mask,
                        kv_range: ml.constexpr = all_blocks):
  """FlexAttention's forward: softmax(score_mod(q @ k.T * scale) where mask_mod) @ v over kv_range's key blocks."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  d = q.shape[3]
  q_s, k_s, v_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  hk = h // (q.shape[2] // k.shape[2])       # GQA: the kv head of query head h
  m = ml.full((bq,), NEG, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  rows = i * bq + ml.arange(bq)[:, None]
  lo, hi = kv_range(i, bq, bkv, k.shape[1])
  for j in ml.range(lo, hi, stages=stages):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = score_mod(ml.dot(q_s, k_s.T) * scale, b, h, rows, cols)
    s = ml.where(mask_mod(b, h, rows, cols) & (cols < k.shape[1]), s, -math.inf)
    m, l, acc = softmax_step(m, l, acc, s, v_s, q.dtype)
  finish(o, lse, q_s, m, l, acc, b, h, i, bq)


flex_forward = mg.mgpu_kernel(flex_forward_kernel, out_shape=_fwd_out, grid=_q_grid, block=_block)


# ---------------------------------------------------------------- the backward, by hand (FlashAttention-2's two kernels)
def unit_grad(s, b, h, rows, cols):
  return 1.0


def all_query_blocks(j, bq, bkv, sq):
  return 0, ml.cdiv(sq, bq)


def _dq_out(q, *_, **__):
  return jax.ShapeDtypeStruct(q.shape, q.dtype)


def _dkv_out(q, k, v, *_, **__):
  return jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)


def _kv_grid(q, k, *_, bkv, **__):
  return (ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0])


def flex_dq_kernel(q, k, v, do, lse, delta, dq, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                   scale: ml.constexpr, score_mod: ml.constexpr = no_mod, score_grad: ml.constexpr = unit_grad,
                   mask_mod: ml.constexpr = no_mask, kv_range: ml.constexpr = all_blocks):
  """dq of bq query rows: ds = p * (do @ v.T - delta) * d score_mod / d s; dq = scale * ds @ k."""
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s, do_s = ml.smem((bq, d)), ml.smem((bq, d))
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  ml.copy(do.at[b, ml.ds(i * bq, bq), h, :], do_s)
  r = i * bq + ml.arange(bq)
  lse_i = lse.at[b, h, ml.ds(i * bq, bq)].load(mask=r < q.shape[1], other=0.0)
  delta_i = delta.at[b, h, ml.ds(i * bq, bq)].load(mask=r < q.shape[1], other=0.0)
  rows = r[:, None]
  dq_acc = ml.zeros((bq, d), jnp.float32)
  lo, hi = kv_range(i, bq, bkv, k.shape[1])
  for j in ml.range(lo, hi, stages=stages):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    cols = j * bkv + ml.arange(bkv)[None, :]
    s = ml.dot(q_s, k_s.T) * scale
    dp = ml.dot(do_s, v_s.T)
    t = ml.where(mask_mod(b, h, rows, cols) & (cols < k.shape[1]), score_mod(s, b, h, rows, cols), -math.inf)
    p = ml.exp(t - lse_i[:, None])
    ds = p * (dp - delta_i[:, None]) * score_grad(s, b, h, rows, cols)
    dq_acc = ml.dot(ds.astype(q.dtype), k_s, dq_acc)
  do_s[...] = (dq_acc * scale).astype(dq.dtype)
  ml.copy(do_s, dq.at[b, ml.ds(i * bq, bq), h, :])


def flex_dkv_kernel(q, k, v, do, lse, delta, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                    scale: ml.constexpr, score_mod: ml.constexpr = no_mod, score_grad: ml.constexpr = unit_grad,
                    mask_mod: ml.constexpr = no_mask, q_range: ml.constexpr = all_query_blocks):
  """dk and dv of bkv keys of one kv head, summed over its query heads: scores transposed (keys along the rows)."""
  j, hk, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  q_s, do_s = ml.smem((bq, d)), ml.smem((bq, d))
  ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
  ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
  cols = j * bkv + ml.arange(bkv)[:, None]            # keys along the rows
  lo, hi = q_range(j, bq, bkv, q.shape[1])
  count = hi - lo
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  for t in ml.range(g * count, stages=stages):
    h = hk * g + t // count
    i = lo + t % count
    ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
    ml.copy(do.at[b, ml.ds(i * bq, bq), h, :], do_s)
    r = i * bq + ml.arange(bq)
    lse_i = lse.at[b, h, ml.ds(i * bq, bq)].load(mask=r < q.shape[1], other=0.0)
    delta_i = delta.at[b, h, ml.ds(i * bq, bq)].load(mask=r < q.shape[1], other=0.0)
    rows = r[None, :]
    s = ml.dot(k_s, q_s.T) * scale
    dp = ml.dot(v_s, do_s.T)
    keep = mask_mod(b, h, rows, cols) & (rows < q.shape[1]) & (cols < k.shape[1])
    p = ml.exp(ml.where(keep, score_mod(s, b, h, rows, cols), -math.inf) - lse_i[None, :])
    dv_acc = ml.dot(p.astype(q.dtype), do_s, dv_acc)
    ds = p * (dp - delta_i[None, :]) * score_grad(s, b, h, rows, cols)
    dk_acc = ml.dot(ds.astype(q.dtype), q_s, dk_acc)
  k_s[...] = (dk_acc * scale).astype(dk.dtype)
  v_s[...] = dv_acc.astype(dv.dtype)
  ml.copy(k_s, dk.at[b, ml.ds(j * bkv, bkv), hk, :])
  ml.copy(v_s, dv.at[b, ml.ds(j * bkv, bkv), hk, :])


flex_dq = mg.mgpu_kernel(flex_dq_kernel, out_shape=_dq_out, grid=_q_grid, block=_block)
flex_dkv = mg.mgpu_kernel(flex_dkv_kernel, out_shape=_dkv_out, grid=_kv_grid,
                          block=lambda q, *_, bkv, **__: 128 if bkv == 64 else 256)


def flex_attention(q, k, v, scale, *, bq=64, bkv=64, stages=2, mods=None, interpret=None):
  """o of the FlexAttention forward, differentiable through the two backward kernels. `mods`: a dict of the
  kernels' constexpr functions (score_mod, score_grad, mask_mod, kv_range, q_range), each kernel taking its own."""
  mods = mods or {}
  fwd_kw = {n: f for n, f in mods.items() if n in ("score_mod", "mask_mod", "kv_range")}
  dq_kw = {n: f for n, f in mods.items() if n in ("score_mod", "score_grad", "mask_mod", "kv_range")}
  dkv_kw = {n: f for n, f in mods.items() if n in ("score_mod", "score_grad", "mask_mod", "q_range")}
  tiles = dict(bq=bq, bkv=bkv, stages=stages, scale=scale, interpret=interpret)

  @jax.custom_vjp
  def attend(q, k, v):
    return flex_forward(q, k, v, **tiles, **fwd_kw)[0]

  def fwd(q, k, v):
    o, lse = flex_forward(q, k, v, **tiles, **fwd_kw)
    return o, (q, k, v, o, lse)

  def bwd(res, do):
    q, k, v, o, lse = res
    delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32))
    dq = flex_dq(q, k, v, do, lse, delta, **tiles, **dq_kw)
    dk, dv = flex_dkv(q, k, v, do, lse, delta, **tiles, **dkv_kw)
    return dq, dk, dv

  attend.defvjp(fwd, bwd)
  return attend(q, k, v)


# ---------------------------------------------------------------- the tests' shape: a case, its reference, its checks
class Case:
  """A variant: `run(interpret)` gives the kernel's outputs (a tuple), `want()` the float32 reference's, `specs`
  the export's input specs and `export(*specs)` the jittable function of them; `tol` the relative error allowed of
  each output (the first, 16-bit, by its dtype)."""

  def __init__(self, run, want, export, specs, tol, big_logits=True):
    self.run, self.want, self.export, self.specs, self.tol, self.big_logits = run, want, export, specs, tol, big_logits


def check_against_reference(case, got):
  want = case.want()
  assert len(got) == len(want)
  for i, (g, w) in enumerate(zip(got, want)):
    assert np.isfinite(np.asarray(g, np.float32)).all(), i
    assert rel(g, w) < case.tol[i], (i, rel(g, w))
  if case.big_logits:           # the reference's logsumexp (second output) passes exp's float32 range
    assert float(jnp.max(want[1])) > 89.0


def check_export(case):
  exported = jax.export.export(jax.jit(case.export), platforms=["cuda"])(*case.specs)
  assert exported.mlir_module().count("mosaic_gpu") >= 1


def check_gpu(case):
  """On the GPU: against the reference and against interpret mode."""
  got = case.run(False)
  check_against_reference(case, got)
  for g, c in zip(got, case.run(True)):
    assert rel(g, c) < 1e-2


def specs_of(*arrays):
  return [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in arrays]


def variant_tests(cases):
  """The three tests of a file's cases: interpret mode against the reference, CUDA export, the GPU (-m gpu)."""
  import pytest

  @pytest.mark.parametrize("name", sorted(cases))
  def test_variant_in_interpret_mode_matches_the_float32_reference(name):
    case = cases[name]()
    check_against_reference(case, case.run(True))

  @pytest.mark.parametrize("name", sorted(cases))
  def test_variant_exports_for_cuda(name):
    check_export(cases[name]())

  @pytest.mark.gpu
  @pytest.mark.parametrize("name", sorted(cases))
  def test_gpu_variant_matches_the_reference_and_interpret_mode(name):
    check_gpu(cases[name]())
  return (test_variant_in_interpret_mode_matches_the_float32_reference, test_variant_exports_for_cuda,
          test_gpu_variant_matches_the_reference_and_interpret_mode)
