"""First GPU contact for new kernel paths: run each once, in its own process, with a timeout.

    python benchmarks/smoke.py [--timeout 90]

A kernel whose barriers are wrong hangs rather than fails; here a hang costs one case's
timeout, not a whole test run. Each case checks its result against jax.numpy and prints
OK, WRONG, ERROR or HANG with its wall time. Run it before the GPU tests and benchmarks.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from common import run_smoke_cases  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")

CASES = {
    "elementwise a * 2": "ew('a * 2', {})",
    "elementwise a + b": "ew('a + b', {})",
    "elementwise gelu(a) * b": "ew('gelu(a) * b', {})",
    "elementwise f32 -> bf16": "ew('f32 -> bf16', {})",
    "elementwise 2 CTAs/SM": "ew('a * 2', dict(bm=32, bn=128, stages=3, ctas=2 * mg.num_sms()))",
    "elementwise warp-specialised": "ew('a + b', dict(specialize=True))",
    "matmul default (persistent, warp-specialised)": "mm({})",
    "matmul cluster_m=2 (multicast)": "mm(dict(cluster_m=2))",
    "matmul 128x128 s6": "mm(dict(bn=128, stages=6))",
    "matmul non-persistent ws": "mm(dict(persistent=False))",
    "matmul software pipeline": "mm(dict(persistent=False, specialize=False))",
}

PRELUDE = """
import sys, jax, jax.numpy as jnp, numpy as np
sys.path.insert(0, {examples!r})
import mgpu_dsl as mg
import elementwise as E
import matmul as M

def ew(name, cfg):
  kernel, ref, dtypes = E.KERNELS[name]
  args = E.inputs((4160, 1024), dtypes)
  E.check(jax.block_until_ready(jax.jit(lambda *a: kernel(*a, **cfg))(*args)), ref(*args))

def mm(cfg):
  ka, kb = jax.random.split(jax.random.key(0))
  a = jax.random.normal(ka, (2048, 1024), jnp.float32).astype(jnp.float16)
  b = jax.random.normal(kb, (1024, 1536), jnp.float32).astype(jnp.float16)
  got = jax.block_until_ready(jax.jit(lambda a, b: M.matmul(a, b, **cfg))(a, b)).astype(jnp.float32)
  want = jnp.dot(a, b, preferred_element_type=jnp.float32)
  err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
  assert err < 1e-2, f"relative error {{err:.3g}}"
"""


def main():
  run_smoke_cases(CASES, PRELUDE.format(examples=os.path.join(ROOT, "examples")), default_timeout=90,
                  root=ROOT)


if __name__ == "__main__":
  main()
