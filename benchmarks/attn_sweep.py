"""The forward sweep attn_persistent.py and attn_prefetch.py share: float16, 16384 tokens, 16 heads.

`sweep(variants, seqs)` reads --seq, --head-dim and --causal, and for each head_dim, mask and sequence
length runs every `(name, fn)` of `variants(head_dim, causal)` (or `(head_dim, causal, seq)`; `fn(q, k, v)` gives o), checked against
the float32 reference on one head before it is timed: TFLOP/s by kernel time, wall ms per call. A
variant that does not compile, run or match is a row saying why; the others go on.
"""
import argparse
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


def sweep(variants, seqs=(1024, 4096, 16384)):
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
      for seq in a.seq or seqs:
        b = TOKENS // seq
        keys = jax.random.split(jax.random.key(seq + d), 3)
        q, k, v = (jax.random.normal(kk, (b, seq, HEADS, d), jnp.float32).astype(jnp.float16) for kk in keys)
        want = ex.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)[0]
        flop = 4 * seq * seq * d * HEADS * b / (2 if causal else 1)
        mask = "causal" if causal else "full"
        for name, fn in (variants(d, causal, seq) if variants.__code__.co_argcount == 3 else variants(d, causal)):
          f = jax.jit(fn)
          try:
            got = f(q, k, v)
            err = float(jnp.linalg.norm((got[:, :, :1] - want).astype(jnp.float32)) / jnp.linalg.norm(want))
            if not err < 3e-2:
              raise AssertionError(f"relative error {err:.2g}")
            ms = mg.bench(f, q, k, v) * 1e3
            rows.append((d, mask, seq, name, f"{flop / ms / 1e9:.0f}", f"{mg.bench_wall(f, q, k, v) * 1e3:.3f}"))
          except Exception as e:     # a variant that does not compile, run or match: noted, the others go on
            rows.append((d, mask, seq, name, f"{type(e).__name__}: {str(e)[:80]}", ""))
          print(table(HEADER, rows[-1:]), flush=True)
  print(table(HEADER, rows))
