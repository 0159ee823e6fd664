"""A persistent attention forward against the example's default (issue #9: D128 at 606 of 661 TFLOP/s).

    python benchmarks/attn_persistent.py [--seq 4096] [--head-dim 128] [--causal full]

At seq 4096 a forward CTA of examples/attention.py runs 32 key blocks, and one CTA fills an SM's
SMEM, so each CTA's prologue (Q, the first K/V stages) and epilogue (O's store) leave the tensor
cores idle: the forward is 606 TFLOP/s at seq 4096 against 632 at 16384 (twenty-third session).
Here one CTA per SM walks the (query tile, head, batch) tiles; the producer warpgroup loads the
next tile's K/V during this tile's last steps and epilogue. Variants:
  * `smem`: O through q's SMEM (q is spent), TMA store; the next Q loaded at the tile's start;
  * `regs`: O stored from registers (no SMEM), the next tile's Q loaded right after the last
    q @ k.T, so it lands during the epilogue.
Each variant is checked against the float32 reference before it is timed. TFLOP/s by kernel time.
"""
import argparse
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import table  # noqa: E402
import attention as ex  # noqa: E402

TOKENS, HEADS = 16384, 16


@ml.inline
def ids(t, nq, hb, heads, causal):
  """(query tile, head, batch) of tile t: query tiles fastest (neighbours share K/V in L2); with
  `causal`, every head's longest tiles first (hb = heads * batch)."""
  if causal:
    r = t % hb
    return nq - 1 - t // hb, r % heads, r // heads
  return t % nq, (t // nq) % heads, t // (nq * heads)


def fwd_persistent(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                   causal: ml.constexpr, scale: ml.constexpr, o_regs: ml.constexpr = False,
                   kv_len: ml.constexpr = 0):
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  nq, heads = ml.cdiv(q.shape[1], bq), q.shape[2]
  hb = heads * q.shape[0]
  tiles = nq * hb
  q_s = ml.smem((bq, d))
  k_s = ml.smem((bkv, d))
  v_s = ml.smem((bkv, d))
  c = scale * ex.LOG2E
  pid, programs = ml.program_id(0), ml.num_programs(0)
  if o_regs:
    i0, h0, b0 = ids(pid, nq, hb, heads, causal)
    ml.copy(q.at[b0, ml.ds(i0 * bq, bq), h0, :], q_s)
  for t in range(pid, tiles, programs):
    i, h, b = ids(t, nq, hb, heads, causal)
    hk = h // g
    if not o_regs:
      ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
    m = ml.full((bq,), ex.NEG_INF, jnp.float32)
    l = ml.zeros((bq,), jnp.float32)
    acc = ml.zeros((bq, d), jnp.float32)
    n = ex.kv_blocks(q, k, i, bq, bkv, causal)
    for j in ml.range(n, stages=stages, warp_specialize=True):
      ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
      ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
      s = ml.dot(q_s, k_s.T)
      if causal:
        if (j + 1) * bkv > i * bq:
          rows = i * bq + ml.arange(bq)[:, None]
          cols = j * bkv + ml.arange(bkv)[None, :]
          s = ml.where(cols <= rows, s, ex.NEG_INF)
      else:
        s = ex.mask_kv_tail(s, j, bkv, kv_len or k.shape[1])
      m_new = ml.maximum(m, ml.max(s, axis=1) * c)
      alpha = ml.exp2(m - m_new, approx=True)
      p = ml.exp2(s * c - m_new[:, None], approx=True)
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
      m = m_new
    out = (acc * (1.0 / l)[:, None]).astype(o.dtype)
    if o_regs:
      nxt = ml.where(t + programs < tiles, t + programs, t)
      ni, nh, nb = ids(nxt, nq, hb, heads, causal)
      ml.copy(q.at[nb, ml.ds(ni * bq, bq), nh, :], q_s)     # lands during the epilogue
      if q.shape[1] % bq:
        rows = i * bq + ml.arange(bq)[:, None]
        o.at[b, ml.ds(i * bq, bq), h, :].store(out, mask=rows < q.shape[1])
      else:
        o.at[b, ml.ds(i * bq, bq), h, :][...] = out
    else:
      q_s[...] = out                      # q is spent: its SMEM takes the output tile
      ml.copy(q_s, o.at[b, ml.ds(i * bq, bq), h, :])
    ex.store_lse(lse, (m + ml.log2(l)) * (1.0 / ex.LOG2E), b, h, i, bq)


def _grid(q, *_, bq, **__):
  return (min(ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0], mg.num_sms()),)


forward_persistent = mg.mgpu_kernel(fwd_persistent, out_shape=ex._fwd_out, grid=_grid, block=256)


def run(q, k, v, causal, o_regs, bq=128, bkv=128, stages=3, interpret=None):
  scale = 1.0 / q.shape[-1] ** 0.5
  return forward_persistent(q, k, v, bq=bq, bkv=bkv, stages=stages, causal=causal, scale=scale,
                            o_regs=o_regs, interpret=interpret)


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--seq", type=int, action="append")
  p.add_argument("--head-dim", type=int, action="append")
  p.add_argument("--causal", choices=("full", "causal"), action="append")
  a = p.parse_args()
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; float16, batch x seq = {TOKENS}, {HEADS} heads;"
        " TFLOP/s by kernel time, wall ms")
  rows = []
  for d in a.head_dim or (128, 64):
    for causal in [m == "causal" for m in (a.causal or ("full", "causal"))]:
      for seq in a.seq or (4096, 16384):
        b = TOKENS // seq
        keys = jax.random.split(jax.random.key(seq + d), 3)
        q, k, v = (jax.random.normal(kk, (b, seq, HEADS, d), jnp.float32).astype(jnp.float16) for kk in keys)
        want = ex.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)[0]
        base = ex.default_config(d, causal)
        cands = [("default", lambda q, k, v: ex.attention(q, k, v, causal))]
        for o_regs in (False, True):
          for stages in ((3, 2) if d == 128 else (3, 4)):
            name = f"persistent {'regs' if o_regs else 'smem'} q{base.bq if base.bq != 192 else 128} s{stages}"
            cands.append((name, lambda q, k, v, o_regs=o_regs, stages=stages:
                          run(q, k, v, causal, o_regs, stages=stages)[0]))
        flop = 4 * seq * seq * d * HEADS * b / (2 if causal else 1)
        for name, f in cands:
          f = jax.jit(f)
          try:
            got = f(q, k, v)
            err = float(jnp.linalg.norm((got[:, :, :1] - want).astype(jnp.float32)) / jnp.linalg.norm(want))
            if not err < 3e-2:
              raise AssertionError(f"relative error {err:.2g}")
            ms = mg.bench(f, q, k, v) * 1e3
            wall = mg.bench_wall(f, q, k, v) * 1e3
            rows.append((d, "causal" if causal else "full", seq, name, f"{flop / ms / 1e9:.0f}", f"{wall:.3f}"))
          except Exception as e:     # a variant that does not compile or run: noted, the others go on
            rows.append((d, "causal" if causal else "full", seq, name, f"{type(e).__name__}: {str(e)[:80]}", ""))
          print(table(("D", "mask", "seq", "kernel", "TFLOP/s", "wall ms"), rows[-1:]), flush=True)
  print(table(("D", "mask", "seq", "kernel", "TFLOP/s", "wall ms"), rows))


if __name__ == "__main__":
  main()
