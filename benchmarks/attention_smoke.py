"""First GPU contact for the attention and 8-bit matmul paths: each once, in its own process,
with a timeout (a wrong barrier hangs rather than fails; here that costs one case's timeout).

    python benchmarks/attention_smoke.py [--timeout 120] [-k name]

Each case checks its result against a float32 jnp reference and prints OK, WRONG, ERROR or
HANG with its wall time. Run it before tests/test_attention.py and the benchmarks.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import run_smoke_cases  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CASES = {}
for d in (64, 128):
  for overlap, fused in ((True, True), (False, False)):
    for ws in (False, True):
      for causal in (False, True):
        name = (f"attention d{d} {'overlap' if overlap else 'simple'} {'fused' if fused else 'two-kernel'} bwd"
                f"{' ws' if ws else ''}{' causal' if causal else ''}")
        CASES[name] = f"att({d}, {causal}, dict(overlap={overlap}, fused_bwd={fused}, ws={ws}))"
CASES["attention d256"] = "att(256, False, {})"
for dt in ("float8_e4m3fn", "int8"):
  CASES[f"matmul {dt} 2048^3"] = f"mm8(jnp.{dt})"

PRELUDE = """
import dataclasses, sys, jax, jax.numpy as jnp
sys.path.insert(0, {examples!r})
import attention as A
import matmul_fp8 as F

def rel(got, want):
  got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))

def att(d, causal, cfg):
  keys = jax.random.split(jax.random.key(0), 4)
  q, do = (jax.random.normal(k, (2, 1024, 4, d), jnp.float32).astype(jnp.float16) for k in keys[:2])
  k, v = (jax.random.normal(k, (2, 1024, 2, d), jnp.float32).astype(jnp.float16) for k in keys[2:])
  config = dataclasses.replace(A.default_config(d, causal), **cfg)
  o, vjp = jax.vjp(jax.jit(lambda q, k, v: A.attention(q, k, v, causal, config=config)), q, k, v)
  grads = jax.block_until_ready(vjp(do))
  want, vjp_ref = jax.vjp(lambda q, k, v: A.reference(q, k, v, causal)[0], q, k, v)
  errs = [rel(o, want)] + [rel(g, w) for g, w in zip(grads, vjp_ref(do))]
  assert max(errs) < 2e-2, f"relative errors (o, dq, dk, dv) {{errs}}"

def mm8(dtype):
  a, bt, rows, cols = F.random_operands(jax.random.key(0), 2048, 2048, 2048, dtype)
  got = jax.block_until_ready(jax.jit(lambda *x: F.scaled_matmul(*x, out_dtype=jnp.float32))(a, bt, rows, cols))
  err = rel(got, F.reference(a, bt, rows, cols, jnp.float32))
  assert err < 2e-3, f"relative error {{err:.3g}}"
"""


def main():
  run_smoke_cases(CASES, PRELUDE.format(examples=os.path.join(ROOT, "examples")), default_timeout=120,
                  root=ROOT)


if __name__ == "__main__":
  main()
