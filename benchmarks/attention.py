"""Attention TFLOP/s on the H200: mgpu_dsl (examples/attention.py) vs cuDNN vs Pallas Mosaic GPU.

    python benchmarks/attention.py [--quick] [--dtype float16] [--seq 4096] [--head-dim 128] [--pass fwd]

Forward and backward, causal and not, head_dim 64 and 128 (others by --head-dim), seq 1024, 4096 and 16384 with
batch x seq = 16384 tokens and 16 heads, float16 and bfloat16. Contenders, each at its best
configuration of a small sweep and checked against a float32 jnp reference (on one head)
before it is timed:
  * mgpu_dsl: `attention(q, k, v, causal, config=...)` and its jax.grad backward;
  * cuDNN: `jax.nn.dot_product_attention(..., implementation="cudnn")` and its gradient;
  * Pallas: `jax.experimental.pallas.ops.gpu.attention_mgpu.attention` over a sweep of its
    TuningConfig (no causal backward).
Figures: kernel time (CUPTI: all kernels of one call, median of 20) as TFLOP/s, which the
targets are stated in, and wall time (median of timed loops of the jitted call) in ms.
Forward flops are 4 * S * S * D * H * B, halved when causal; backward 2.5x forward. The
backward is timed alone: residuals come from one forward, then the jitted vjp runs.
--quick: float16, seq 4096 only.
"""
import argparse
import dataclasses
import functools
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import table  # noqa: E402
import attention as ex  # noqa: E402

TOKENS, HEADS = 16384, 16
SEQS, HEAD_DIMS, DTYPES = (1024, 4096, 16384), (64, 128), ("float16", "bfloat16")


def flops(b, s, h, d, causal, bwd):
  f = 4 * s * s * d * h * b / (2 if causal else 1)
  return f * (2.5 if bwd else 1.0)


def ours_configs(d, few=False, causal=False, seq=None):
  """The default tiles, the other forward and backward kernels, and a few other tiles (`few`: the
  default and its variants in the two loop orders, with and without ping-pong)."""
  base = ex.default_config(d, causal, seq)
  if few == "default":
    return [base]
  if few == "narrow":    # head_dim 80-112: the two-kernel backward's tiles, and the fused one at one stage
    r = dataclasses.replace
    return [base, r(base, dkv_bq=128), r(base, dq_bkv=128), r(base, dkv_bq=128, dq_bkv=128),
            r(base, fused_bwd=True, dkv_bq=128, dkv_stages=1)]
  if few == "dqfirst":   # the fused backward with dQ's product issued before dK's, and not
    r = dataclasses.replace
    return [base, r(base, bwd_dq_first=not base.bwd_dq_first)]
  if few == "bwdws":     # the backward with and without a producer warpgroup (255 registers a thread without)
    r = dataclasses.replace
    return [base, r(base, bwd_ws=True)]
  if few == "lpt":       # the longest causal query tiles of every head first (q tiles the slowest grid axis)
    r = dataclasses.replace
    extra = [r(base, lpt=True, bq=192, stages=3), r(base, lpt=True, stages=3)] if causal and d <= 64 else []
    return [r(base, lpt=False), r(base, lpt=True)] + extra
  if few == "wg3b":      # head_dim 64: the three-warpgroup tiles against the two-warpgroup ones
    r = dataclasses.replace
    return [base] + [r(base, bq=bq, bkv=kv, stages=s) for bq, kv, s in
                     ((192, 128, 2), (192, 64, 4), (192, 64, 6), (128, 128, 4), (128, 64, 6))]
  if few == "kv":        # wider key blocks (192: the last block of seq 4096 partial, masked) against the default
    r = dataclasses.replace
    wide = [r(base, bkv=192, stages=2)] + ([r(base, bq=128, bkv=192, stages=3), r(base, bq=128, bkv=256, stages=2)]
                                           if d <= 64 else [])
    return [base] + wide
  if few == "wg3":       # three compute warpgroups on 192 query rows against two on 128
    r = dataclasses.replace
    tiles = ((128, 4, False), (128, 3, False), (128, 4, True)) if d <= 64 else \
        ((128, 2, False), (128, 3, False), (64, 4, False))
    wg3 = [r(base, bq=192, bkv=kv, stages=s, overlap=o) for kv, s, o in tiles]
    return [base] + wg3 + [r(wg3[0], ws=False)]
  if few:
    two = [base, dataclasses.replace(base, overlap=not base.overlap)]
    return two + [dataclasses.replace(c, pingpong=True) for c in two if c.ws]
  alts = {64: [ex.Config(bq=128, bkv=128, stages=3, dkv_bq=128, dkv_bkv=128, dkv_stages=2, dq_bkv=128),
               ex.Config(bq=128, bkv=256, stages=3, overlap=False, dkv_bq=128, dkv_bkv=128, dkv_stages=2,
                         dq_bkv=128),
               ex.Config(bq=128, bkv=64, stages=4, dkv_bq=128, dkv_bkv=128, dkv_stages=2, dq_bkv=64)],
          128: [ex.Config(bq=128, bkv=128, stages=2, dkv_bq=64, dkv_bkv=128, dkv_stages=2, dq_bkv=128,
                          dq_stages=2),
                ex.Config(bq=128, bkv=128, stages=3, dkv_bq=64, dkv_bkv=128, dkv_stages=2, dq_bkv=64,
                          dq_stages=3),                 # the overlapped forward at the default's depth
                ex.Config(bq=128, bkv=64, stages=4, dkv_bq=64, dkv_bkv=128, dkv_stages=2, dq_bkv=64)]}
  variants = [base, dataclasses.replace(base, ws=True), dataclasses.replace(base, overlap=False, fused_bwd=False),
              dataclasses.replace(base, overlap=False, fused_bwd=False, ws=True)]
  out = variants + alts.get(d, []) + [dataclasses.replace(c, ws=True) for c in alts.get(d, [])]
  return out + [dataclasses.replace(c, pingpong=True) for c in out if c.ws]   # the warpgroups take turns


def cfg_name(c):
  return f"{'persistent ' if c.persistent else ''}{'lpt ' if c.lpt else ''}{'ws ' if c.ws else ''}{'bwd-ws ' if c.bwd_ws else ''}{'dq-first ' if c.bwd_dq_first else ''}{'dq-deferred ' if c.bwd_dq_deferred else ''}{'pp ' if c.pingpong else ''}{'overlap' if c.overlap else 'simple'} q{c.bq} kv{c.bkv} s{c.stages} | {'fused' if c.fused_bwd else 'dkv+dq'} q{c.dkv_bq} kv{c.dkv_bkv} s{c.dkv_stages} | dq kv{c.dq_bkv} s{c.dq_stages}"


def contenders(d, causal, bwd, few=False, seq=None):
  """(contender, [(config name, f(q, k, v) -> o)]); the Pallas sweep is over the blocks the
  pass uses (forward: block_kv and pipeline depth; backward: the dK/dV and dQ blocks)."""
  ours = [(cfg_name(c), functools.partial(ex.attention, causal=causal, config=c)) for c in ours_configs(d, few, causal, seq)]
  cudnn = [("cudnn", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                                   implementation="cudnn"))]
  from jax.experimental.pallas.ops.gpu import attention_mgpu as pa
  pallas = []
  if bwd:
    sweep = [dict(block_kv=128, max_concurrent_steps=2, block_q_dkv=a, block_kv_dkv=b, block_q_dq=c,
                  block_kv_dq=e) for a, b, c, e in ((64, 64, 64, 64), (64, 128, 128, 64), (128, 128, 128, 128))]
  else:
    sweep = [dict(block_kv=bkv, max_concurrent_steps=steps) for bkv in (64, 128, 256) for steps in (2, 3, 4)]
  for kw in sweep:
    kw = dict(dict(block_q_dkv=64, block_kv_dkv=64, block_q_dq=64, block_kv_dq=64), **kw)
    cfg = pa.TuningConfig(block_q=64, causal=causal, **kw)
    name = (f"dkv {kw['block_q_dkv']}x{kw['block_kv_dkv']} dq {kw['block_q_dq']}x{kw['block_kv_dq']}" if bwd
            else f"kv{kw['block_kv']} s{kw['max_concurrent_steps']}")
    pallas.append((name, lambda q, k, v, cfg=cfg: pa.attention(q, k, v, cfg)))
  return [("mgpu_dsl", ours), ("cuDNN", cudnn), ("Pallas", pallas)]


def rel(got, want):
  got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))


def head0(x):
  return x[:, :, :1]


def measure(fn, args, want, n_flops):
  """Check `fn(*args)` (its head 0) against `want`, then (TFLOP/s by kernel time, wall ms)."""
  out = fn(*args)
  outs = out if isinstance(out, tuple) else (out,)
  for o, w in zip(outs, want):
    err = rel(head0(o), w)
    if not err < 3e-2:
      raise AssertionError(f"relative error {err:.2g}")
  ms = mg.bench(fn, *args) * 1e3
  return n_flops / (ms * 1e-3) / 1e12, mg.bench_wall(fn, *args) * 1e3


def best(cands, args_of, want, n_flops, each=False):
  """(TFLOP/s, wall ms, config) of the fastest correct candidate; (nan, nan, why) if none runs.
  `each`: print every candidate's figures as it is measured."""
  top, why = (float("nan"), float("nan"), ""), ""
  for name, make in cands:
    try:
      fn, args = args_of(make)
      tf, wall = measure(fn, args, want, n_flops)
    except Exception as e:  # a configuration the contender cannot run: note it, go on
      why = f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"
      if each:
        print(f"  {name}: {why}", flush=True)
      continue
    if each:
      print(f"  {name}: {tf:.0f} TFLOP/s, wall {wall:.3f} ms", flush=True)
    if not top[0] >= tf:
      top = (tf, wall, name)
  return top if top[2] else (float("nan"), float("nan"), why)


def run_problem(dtype, d, causal, seq, passes, few=False, each=False, peers=True):
  b = TOKENS // seq
  keys = jax.random.split(jax.random.key(seq + d + causal), 4)
  q, k, v, do = (jax.random.normal(kk, (b, seq, HEADS, d), jnp.float32).astype(dtype) for kk in keys)
  ref = lambda q, k, v: ex.reference(q, k, v, causal)[0]
  want_o, vjp_ref = jax.vjp(ref, head0(q), head0(k), head0(v))
  want_grads = vjp_ref(head0(do))
  rows = []
  for what in passes:
    bwd = what == "bwd"
    n_flops = flops(b, seq, HEADS, d, causal, bwd)

    def args_of(make):
      f = jax.jit(make)
      if not bwd:
        return f, (q, k, v)
      _, vjp = jax.vjp(f, q, k, v)
      return jax.jit(lambda vjp, do: vjp(do)), (vjp, do)

    res = {}
    for name, cands in contenders(d, causal, bwd, few, seq):
      if name == "Pallas" and not peers:
        res[name] = (float("nan"), float("nan"), "not run (--no-pallas)")
        continue
      if bwd and name == "Pallas" and causal:
        res[name] = (float("nan"), float("nan"), "no causal backward")
        continue
      res[name] = best(cands, args_of, want_grads if bwd else (want_o,), n_flops, each)
    o, c, p = res["mgpu_dsl"], res["cuDNN"], res["Pallas"]
    top = max((x[0] for x in (c, p) if x[0] == x[0]), default=float("nan"))
    rows.append((jnp.dtype(dtype).name, d, "causal" if causal else "full", seq, what,
                 f"{o[0]:.0f}", f"{c[0]:.0f}", f"{p[0]:.0f}", f"{o[0] / c[0]:.2f}", f"{o[0] / top:.2f}",
                 f"{o[1]:.3f}", f"{c[1]:.3f}", f"{p[1]:.3f}", o[2], p[2]))
    print(table(HEADER, rows[-1:]), flush=True)
  return rows


HEADER = ("dtype", "D", "mask", "seq", "pass", "mgpu_dsl", "cuDNN", "Pallas", "vs cuDNN", "vs best",
          "wall ms ours", "cuDNN", "Pallas", "our config", "Pallas config")


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="float16, seq 4096 only")
  p.add_argument("--dtype", choices=DTYPES, action="append")
  p.add_argument("--seq", type=int, choices=SEQS, action="append")
  p.add_argument("--head-dim", type=int, choices=(32, 48, 80, 96, 112, 256) + HEAD_DIMS, action="append",
                 help="64 and 128 by default; 32-112 in steps of 16 and 256 on request")
  p.add_argument("--pass", dest="passes", choices=("fwd", "bwd"), action="append")
  p.add_argument("--causal", choices=("full", "causal"), action="append")
  p.add_argument("--few", action="store_true", help="our default tiles only, in both loop orders, with and"
                                                    " without ping-pong")
  p.add_argument("--wg3", action="store_true", help="the default tiles against 192 query rows on three warpgroups")
  p.add_argument("--wg3b", action="store_true", help="head_dim 64: more tiles of two and three warpgroups")
  p.add_argument("--bwd-ws", action="store_true", help="the default backward against the same without warp"
                 " specialisation (its dkv_dq kernel spills under the producer's register split)")
  p.add_argument("--dq-first", action="store_true", help="the default backward against the same with dQ's"
                 " product issued before dK's (or after, where the default issues it first)")
  p.add_argument("--lpt", action="store_true", help="the default tiles against the same with query tiles the"
                                                    " slowest grid axis (causal: longest first across heads)")
  p.add_argument("--default", action="store_true", help="our default configuration only (against the peers)")
  p.add_argument("--kv", action="store_true", help="the default tiles against wider key blocks (192, 256)")
  p.add_argument("--narrow", action="store_true", help="head_dim 80-112: backward tiles against the default")
  p.add_argument("--each", action="store_true", help="print every configuration's figures")
  p.add_argument("--no-pallas", action="store_true", help="skip Pallas (its forward overflows SMEM on jax 0.11.2)")
  a = p.parse_args()
  dtypes = a.dtype or (["float16"] if a.quick else DTYPES)
  seqs = a.seq or ([4096] if a.quick else SEQS)
  dims = a.head_dim or HEAD_DIMS
  masks = [m == "causal" for m in (a.causal or ("full", "causal"))]
  passes = a.passes or ("fwd", "bwd")
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; batch x seq = {TOKENS}, {HEADS} heads;"
        f" TFLOP/s by kernel time (CUPTI), wall ms per call")
  rows = []
  for dtype in dtypes:
    for d in dims:
      for causal in masks:
        for seq in seqs:
          rows += run_problem(getattr(jnp, dtype), d, causal, seq, passes, "default" if a.default else "narrow" if a.narrow else "kv" if a.kv else "wg3" if a.wg3 else "wg3b" if a.wg3b else "lpt" if a.lpt else "bwdws" if a.bwd_ws else "dqfirst" if a.dq_first else a.few, a.each,
                               not a.no_pallas)
  print("\nAttention, each contender at its best configuration:")
  print(table(HEADER, rows))


if __name__ == "__main__":
  main()
