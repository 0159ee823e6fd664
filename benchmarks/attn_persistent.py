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
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from attn_sweep import ex, sweep  # noqa: E402


def variants(d, causal):
  base = ex.default_config(d, causal)          # (the per-tile grid: no seq_kv given)
  out = [dataclasses.replace(base, persistent=p) for p in (False, True)]
  if d <= 64:
    out += [dataclasses.replace(base, bq=128, stages=s, persistent=True) for s in (3, 4)]
  for c in out:
    yield (f"{'persistent' if c.persistent else 'grid'} q{c.bq} kv{c.bkv} s{c.stages}",
           lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c))


if __name__ == "__main__":
  sweep(variants)
