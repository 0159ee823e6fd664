"""Attention forward with part of the softmax's exponentials on the FMA units (issue #9).

    python benchmarks/attn_exp.py

At head_dim 64 a key block costs the tensor cores 4 * 64 = 256 flops per score, and the SM's
MUFU unit (16 ex2 a cycle) about as long per score as the tensor cores (about 4096 dense f16
flops a cycle), so the exponentials, not the dots, may bound the forward (FlashAttention-4's
observation; it computes part of them with a polynomial on the FMA pipes). Here the key
block is split in two halves (two dots of bkv / 2 keys each); `mode` picks how each half
takes 2 ** x:
  0: the example's kernel (one dot, every exponential on MUFU: `ml.exp2(..., approx=True)`);
  1: two halves, both on MUFU (what the split itself costs);
  2: two halves, the second by a degree-3 polynomial (2 ** floor(x) put into the exponent bits,
     relative error 1.1e-4, below float16's half ulp);
  3: one dot, every exponential by the polynomial.
TFLOP/s by kernel time (CUPTI) and wall time, float16, batch x seq = 16384 tokens, 16 heads,
seq 4096, each result checked against a float32 jnp reference (one head) first.

Measured on the H200 (docs/benchmarks.md, twelfth session): modes 1-3 are slower than mode 0 in
every case, so the forward's exponentials stay on MUFU.
"""
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))   # (the example imports attention_config)
from common import table  # noqa: E402
import mgpu_dsl as mg  # noqa: E402

# examples/attention.py by its path: this folder has an attention.py (the benchmark) of its own.
_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples",
                                                                                 "attention.py"))
ex = sys.modules["attention_example"] = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)
from mgpu_dsl import language as ml  # noqa: E402

LOG2E = ex.LOG2E
NEG_INF = -float("inf")
# 2 ** f on [0, 1) ~ 1 + f * (A + f * (B + f * C)), p(0) = 1, p(1) = 2, least relative squares
A, B, C = 0.6955020102552256, 0.22626981564297835, 0.07822817410179603


@ml.inline
def exp2_poly(x):
  """2 ** x for x <= 0 (scores minus their row max) on the FMA and integer pipes."""
  x = ml.maximum(x, -126.0)
  j = ml.floor(x)
  f = x - j
  p = 1.0 + f * (A + f * (B + f * C))                      # in [1, 2): exponent bits 127
  return ml.bitcast(ml.bitcast(p, jnp.int32) + (j.astype(jnp.int32) << 23), jnp.float32)


@ml.inline
def exp2_of(x, poly):
  if poly:
    return exp2_poly(x)
  return ml.exp2(x, approx=True)


def forward_exp_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                       causal: ml.constexpr, scale: ml.constexpr, mode: ml.constexpr):
  i = ml.program_id(0)
  if causal:
    i = ml.num_programs(0) - 1 - i
  h = ml.program_id(1)
  b = ml.program_id(2)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  half = bkv // 2
  q_s = ml.smem((bq, d))
  k_s = ml.smem((bkv if mode in (0, 3) else half, d))      # the halves: a pipelined loop reads its
  v_s = ml.smem((bkv if mode in (0, 3) else half, d))      # staged buffers whole
  if mode == 1 or mode == 2:
    k2_s = ml.smem((half, d), q.dtype)
    v2_s = ml.smem((half, d), q.dtype)
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  c = scale * LOG2E
  m = ml.full((bq,), NEG_INF, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  n = k.shape[1] // bkv
  if causal:
    n = ((i + 1) * bq + bkv - 1) // bkv
  for j in ml.range(n, stages=stages, warp_specialize=True):
    if mode == 0 or mode == 3:
      ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
      ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
      s = ml.dot(q_s, k_s.T)
      if causal:
        if (j + 1) * bkv > i * bq:
          rows = i * bq + ml.arange(bq)[:, None]
          cols = j * bkv + ml.arange(bkv)[None, :]
          s = ml.where(cols <= rows, s, NEG_INF)
      m_new = ml.maximum(m, ml.max(s, axis=1) * c)
      alpha = ml.exp2(m - m_new, approx=True)
      p = exp2_of(s * c - m_new[:, None], mode == 3)
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    else:
      ml.copy(k.at[b, ml.ds(j * bkv, half), hk, :], k_s)
      ml.copy(k.at[b, ml.ds(j * bkv + half, half), hk, :], k2_s)
      ml.copy(v.at[b, ml.ds(j * bkv, half), hk, :], v_s)
      ml.copy(v.at[b, ml.ds(j * bkv + half, half), hk, :], v2_s)
      s1 = ml.dot(q_s, k_s.T)
      s2 = ml.dot(q_s, k2_s.T)
      if causal:
        if (j + 1) * bkv > i * bq:
          rows = i * bq + ml.arange(bq)[:, None]
          cols = j * bkv + ml.arange(half)[None, :]
          s1 = ml.where(cols <= rows, s1, NEG_INF)
          s2 = ml.where(cols + half <= rows, s2, NEG_INF)
      m_new = ml.maximum(m, ml.maximum(ml.max(s1, axis=1), ml.max(s2, axis=1)) * c)
      alpha = ml.exp2(m - m_new, approx=True)
      p1 = ml.exp2(s1 * c - m_new[:, None], approx=True)
      p2 = exp2_of(s2 * c - m_new[:, None], mode == 2)
      l = l * alpha + (ml.sum(p1, axis=1) + ml.sum(p2, axis=1))
      acc = ml.dot(p1.astype(q.dtype), v_s, acc * alpha[:, None])
      acc = ml.dot(p2.astype(q.dtype), v2_s, acc)
    m = m_new
  o_s = ml.smem((bq, d))
  o_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
  lse.at[b, h, ml.ds(i * bq, bq)][...] = (m + ml.log2(l)) * (1.0 / LOG2E)


forward_exp = mg.mgpu_kernel(forward_exp_kernel, out_shape=ex._fwd_out, grid=ex._q_grid, block=256)
_Q = jax.ShapeDtypeStruct((1, 256, 2, 64), jnp.float16)
mg.check_specs(forward_exp, _Q, _Q, _Q, bq=128, bkv=128, stages=2, causal=True, scale=0.125, mode=2)


def attention_exp(q, k, v, causal=False, *, mode=2, bq=128, bkv=128, stages=4, interpret=None):
  scale = 1.0 / q.shape[-1] ** 0.5
  return forward_exp(q, k, v, bq=bq, bkv=bkv, stages=stages, causal=causal, scale=scale, mode=mode,
                     interpret=interpret)[0]


def reference(q, k, v, causal):
  q, k, v = (x.astype(jnp.float32) for x in (q, k, v))
  s = jnp.einsum("bqhd,bkhd->bhqk", q, k) / q.shape[-1] ** 0.5
  if causal:
    s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
  return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)


def main():
  seq, heads = 4096, 16
  b = 16384 // seq
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; float16, batch {b}, seq {seq}, {heads} heads")
  rows = []
  for d in (64, 128):
    kq = jax.random.split(jax.random.key(0), 3)
    q, k, v = (jax.random.normal(kk, (b, seq, heads, d), jnp.float16) for kk in kq)
    for causal in (False, True):
      want = reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)
      n_flops = 4 * seq * seq * d * heads * b / (2 if causal else 1)
      cands = [("example (default config)", lambda q, k, v: ex.attention(q, k, v, causal=causal))]
      stages = 4 if d == 64 else 3
      for mode in (0, 1, 2, 3):
        cands.append((f"mode {mode}", lambda q, k, v, mode=mode: attention_exp(q, k, v, causal, mode=mode,
                                                                               stages=stages)))
      cands.append(("cuDNN", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                                          implementation="cudnn")))
      for name, fn in cands:
        f = jax.jit(fn)
        try:
          got = f(q, k, v)
          err = float(jnp.linalg.norm(got[:, :, :1].astype(jnp.float32) - want) / jnp.linalg.norm(want))
          if not err < 3e-2:
            raise AssertionError(f"relative error {err:.2g}")
          ms = mg.bench(f, q, k, v) * 1e3
          wall = mg.bench_wall(f, q, k, v) * 1e3
          r = (f"{n_flops / ms / 1e9:.0f}", f"{n_flops / wall / 1e9:.0f}", f"{err:.1e}")
        except Exception as e:  # noqa: BLE001
          r = (f"{type(e).__name__}: {str(e).splitlines()[0][:60]}", "", "")
        rows.append((f"D{d}{' causal' if causal else ''}", name) + r)
        print(rows[-1], flush=True)
  print(table(("case", "kernel", "TFLOP/s kernel", "TFLOP/s wall", "rel err"), rows))


if __name__ == "__main__":
  main()
