"""The forward's default configuration against variants of it, one field changed at a time (issue #9).

    python benchmarks/attn_configs.py "bq=128" "bq=128,stages=2" [--seq 1024] [--head-dim 64] [--causal full]

Each positional argument is one variant: comma-separated `field=value` replacements of
`ex.default_config(head_dim, causal, seq)` (ints, floats, True/False). The default itself runs first. Each
variant is checked against the float32 reference before it is timed; TFLOP/s by kernel time, wall ms.
"""
import ast
import dataclasses
import os
import sys

sys.path.insert(0, os.path.dirname(__file__))
from attn_sweep import ex, sweep  # noqa: E402

SPECS = [a for a in sys.argv[1:] if "=" in a and not a.startswith("--")]
sys.argv[1:] = [a for a in sys.argv[1:] if a not in SPECS]


def parse(spec: str) -> dict:
  return {k.strip(): ast.literal_eval(v.strip()) for k, v in (kv.split("=") for kv in spec.split(","))}


def variants(d, causal, seq):
  base = ex.default_config(d, causal, seq)
  yield "default", lambda q, k, v: ex.attention(q, k, v, causal, config=base)
  for spec in SPECS:
    c = dataclasses.replace(base, **parse(spec))
    yield spec, lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c)


if __name__ == "__main__":
  sweep(variants, seqs=(1024, 4096))
