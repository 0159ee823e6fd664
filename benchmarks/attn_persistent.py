"""The persistent attention forward against the per-tile grid (issue #9: D128 at 606 of 661 TFLOP/s).

    python benchmarks/attn_persistent.py [--seq 4096] [--head-dim 128] [--causal full]

At seq 4096 a forward CTA of examples/attention.py runs 32 key blocks, and one CTA fills an SM's
SMEM, so each CTA's prologue (Q, the first K/V stages) and epilogue (O's store) leave the tensor
cores idle: 606 TFLOP/s at seq 4096 against 632 at 16384 (twenty-third session). With
`Config(persistent=True)` one program an SM walks the (query tile, head, batch) tiles, and the
producer warpgroup loads the next tile's K and V during this tile's last steps and epilogue.
Each configuration is the default with `persistent` on and off (and at head_dim 64 also with two
warpgroups' 128 query rows), checked against the float32 reference before it is timed; TFLOP/s by
kernel time, wall ms per call.
"""
import argparse
import dataclasses
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
HEADER = ("D", "mask", "seq", "config", "TFLOP/s", "wall ms")


def configs(d, causal):
  base = ex.default_config(d, causal)          # (the per-tile grid: no seq_kv given)
  out = [dataclasses.replace(base, persistent=p) for p in (False, True)]
  if d <= 64:
    out += [dataclasses.replace(base, bq=128, stages=s, persistent=True) for s in (3, 4)]
  return out


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
      for seq in a.seq or (1024, 4096, 16384):
        b = TOKENS // seq
        keys = jax.random.split(jax.random.key(seq + d), 3)
        q, k, v = (jax.random.normal(kk, (b, seq, HEADS, d), jnp.float32).astype(jnp.float16) for kk in keys)
        want = ex.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)[0]
        flop = 4 * seq * seq * d * HEADS * b / (2 if causal else 1)
        for c in configs(d, causal):
          name = f"{'persistent' if c.persistent else 'grid'} q{c.bq} kv{c.bkv} s{c.stages}"
          f = jax.jit(lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c))
          try:
            got = f(q, k, v)
            err = float(jnp.linalg.norm((got[:, :, :1] - want).astype(jnp.float32)) / jnp.linalg.norm(want))
            if not err < 3e-2:
              raise AssertionError(f"relative error {err:.2g}")
            ms = mg.bench(f, q, k, v) * 1e3
            rows.append((d, "causal" if causal else "full", seq, name, f"{flop / ms / 1e9:.0f}",
                         f"{mg.bench_wall(f, q, k, v) * 1e3:.3f}"))
          except Exception as e:     # a configuration that does not compile or run: noted, the others go on
            rows.append((d, "causal" if causal else "full", seq, name, f"{type(e).__name__}: {str(e)[:80]}", ""))
          print(table(HEADER, rows[-1:]), flush=True)
  print(table(HEADER, rows))


if __name__ == "__main__":
  main()
