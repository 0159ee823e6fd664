"""Attention forward with the softmax under the tensor cores: which loop shapes keep ptxas from
serialising the dots (issue #9).

    MOSAIC_GPU_DUMP_PTXAS=1 python benchmarks/attn_overlap.py

ptxas serialises every wgmma of a loop (warning C7514) when a non-wgmma instruction reads a
running dot's accumulator or redefines its register operand. The overlapped forward
(examples/attention.py, FlashAttention-3's order: s = q @ k_t.T, then p_{t-1} @ v_{t-1}, then
block t's softmax under that dot) leaves p @ v running across the loop's back edge; FA3 waits for
it at the end of each step instead. Variants, by two flags of the kernel below:
  settle: wait for p @ v at the end of each step (a read of the accumulator there: `acc * 1.0`);
  p16:    carry p converted (float16) rather than the float32 probabilities (needs settle).
float16, batch x seq = 16384 tokens, 16 heads, seq 4096, TFLOP/s by kernel time (CUPTI) and wall
time, beside the example's plain order and cuDNN; each result checked against a jnp reference first.

Measured on the H200 (docs/benchmarks.md, fifteenth session): only settle + p16 compiles without
C7514 (p converted after the step's wait, nothing running across the back edge), and it is still
slower than the plain order (548 against 613 TFLOP/s at head_dim 128; 394 against 444 at 64), so
the example's `forward_overlap` now has that form and stays an option.
"""
import dataclasses
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))   # (the example imports attention_config)
from common import table  # noqa: E402

# examples/attention.py by its path: `attention` is also this folder's benchmark module
_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples", "attention.py"))
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex             # (its dataclasses look their module up)
_spec.loader.exec_module(ex)


def overlap_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                   causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
                   pingpong: ml.constexpr = False, lpt: ml.constexpr = False,
                   settle: ml.constexpr = False, p16: ml.constexpr = False):
  i, h, b = ex.fwd_ids(causal, lpt)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s = ml.smem((bq, d))
  k_s = ml.smem((bkv, d))
  v_s = ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  c = scale * ex.LOG2E
  m = ml.full((bq,), -1e30, jnp.float32)
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  pf = ml.zeros((bq, bkv), q.dtype if p16 else jnp.float32)
  alpha = ml.full((bq,), 1.0, jnp.float32)
  n = k.shape[1] // bkv
  if causal:
    n = ((i + 1) * bq + bkv - 1) // bkv
  for t in ml.range(n + 1, stages=stages, warp_specialize=ws, pingpong=pingpong):
    ml.copy(k.at[b, ml.ds(ml.minimum(t, n - 1) * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(ml.maximum(t - 1, 0) * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T)
    scaled = acc * alpha[:, None]
    acc = ml.dot(pf.astype(q.dtype), v_s, scaled)
    if causal:
      if (t + 1) * bkv > i * bq:
        rows = i * bq + ml.arange(bq)[:, None]
        cols = t * bkv + ml.arange(bkv)[None, :]
        s = ml.where(cols <= rows, s, ex.NEG_INF)
    kill = ml.where(t < n, 0.0, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1) * c + kill)
    alpha = ml.exp2(m - m_new, approx=True)
    pf32 = ml.exp2(s * c - (m_new - kill)[:, None], approx=True)
    l = l * alpha + ml.sum(pf32, axis=1)
    m = m_new
    if settle:
      acc = acc * 1.0                        # read: waits for p @ v before the step ends
    pf = pf32.astype(q.dtype) if p16 else pf32
  o_s = q_s
  o_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
  ex.store_lse(lse, (m + ml.log2(l)) * (1.0 / ex.LOG2E), b, h, i, bq)


overlap = mg.mgpu_kernel(overlap_kernel, out_shape=ex._fwd_out, grid=ex._fwd_grid, block=ex._fwd_block)


def main():
  rows = []
  for d, causal in ((128, False), (128, True), (64, False)):
    base = ex.default_config(d, causal)
    b, seq, heads = 16384 // 4096, 4096, 16
    keys = jax.random.split(jax.random.key(d + causal), 3)
    q, k, v = (jax.random.normal(kk, (b, seq, heads, d), jnp.float32).astype(jnp.float16) for kk in keys)
    want = ex.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)[0]
    flops = 4 * seq * seq * d * heads * b / (2 if causal else 1)
    scale = 1.0 / d ** 0.5
    cands = [("plain (default)", lambda q, k, v: ex.attention(q, k, v, causal, config=base)),
             ("overlap, plain stages", lambda q, k, v: ex.attention(
                 q, k, v, causal, config=dataclasses.replace(base, overlap=True)))]
    for settle, p16 in ((False, False), (True, False), (True, True)):
      kw = dict(bq=base.bq if d > 64 else 128, bkv=base.bkv, stages=base.stages, causal=causal, scale=scale,
                ws=base.ws, lpt=base.lpt, settle=settle, p16=p16)
      cands.append((f"overlap settle={settle} p16={p16}", lambda q, k, v, kw=kw: overlap(q, k, v, **kw)[0]))
    cands.append(("cuDNN", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                                         implementation="cudnn")))
    for name, fn in cands:
      f = jax.jit(fn)
      try:
        got = f(q, k, v)
        err = float(jnp.max(jnp.abs(got[:, :, :1].astype(jnp.float32) - want.astype(jnp.float32))))
        if not err < 2e-2:
          raise AssertionError(f"max abs error {err:.3g}")
        ms = mg.bench(f, q, k, v) * 1e3
        wall = mg.bench_wall(f, q, k, v) * 1e3
        rows.append((d, "causal" if causal else "full", name, f"{flops / ms / 1e9:.0f}", f"{wall:.3f}"))
      except Exception as e:  # a variant that cannot run: say why, go on
        rows.append((d, "causal" if causal else "full", name, f"{type(e).__name__}: {str(e).splitlines()[0][:50]}", ""))
      print(table(("D", "mask", "kernel", "TFLOP/s", "wall ms"), rows[-1:]), flush=True)
  print(table(("D", "mask", "kernel", "TFLOP/s", "wall ms"), rows))


if __name__ == "__main__":
  main()
