"""A share of the forward's exponentials on the FMA units (`Config(emulate=...)`, ml.exp2's emulate; issue #9).

    [EMULATE_SHARES="0 0.125"] python benchmarks/attn_emulate.py [--seq 4096] [--head-dim 64] [--causal full]

At head_dim 64 a 128 x 128 block of scores costs the tensor cores about as many clocks (2 x 128 x 128 x 64
multiply-adds at 1024 a clock an SM) as the special function unit (16384 ex2.approx at 16 a clock), so the
forward is bound by both. `emulate` moves that share of the exponentials to a polynomial on the FMA units
(FlashAttention-4's trick). Each variant is the default configuration for its shape with only `emulate`
changed, checked against the float32 reference before it is timed; TFLOP/s by kernel time, wall ms per call.
"""
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from attn_sweep import ex, sweep  # noqa: E402

SHARES = tuple(float(x) for x in os.environ.get("EMULATE_SHARES", "0 0.125 0.25 0.375 0.5").split())


def variants(d, causal, seq):
  base = ex.default_config(d, causal, seq)
  for share in SHARES:
    c = dataclasses.replace(base, emulate=share)
    yield f"emulate {share}", lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c)


if __name__ == "__main__":
  sweep(variants, seqs=(1024, 4096))
