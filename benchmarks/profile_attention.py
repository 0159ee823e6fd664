"""Run examples/attention.py's forward (or backward) a few times for Nsight Compute (f16, b4 s4096 h16):

    ncu --clock-control none --kernel-name regex:forward --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats \
        --section SchedulerStats --section Occupancy \
        python3 benchmarks/profile_attention.py [--head-dim 128] [--causal] [--pingpong] [--overlap]
        [--bwd [--dq-deferred on|off]]

Checked against the reference once (head 0).
"""
import argparse
import dataclasses
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import attention as ex  # noqa: E402


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--head-dim", type=int, default=128)
  p.add_argument("--causal", action="store_true")
  p.add_argument("--pingpong", action="store_true")
  p.add_argument("--overlap", action="store_true")
  p.add_argument("--bwd", action="store_true", help="profile the backward (dK/dV with dQ) instead")
  p.add_argument("--dq-deferred", choices=("on", "off"), default=None,
                 help="the backward's kernel: deferred_kernel (on) or dkv_dq_kernel (off); default: the config's")
  p.add_argument("--runs", type=int, default=4)
  a = p.parse_args()
  keys = jax.random.split(jax.random.key(0), 3)
  q, k, v = (jax.random.normal(kk, (4, 4096, 16, a.head_dim), jnp.float32).astype(jnp.float16) for kk in keys)
  config = dataclasses.replace(ex.default_config(a.head_dim, a.causal), pingpong=a.pingpong, overlap=a.overlap)
  if a.dq_deferred:
    config = dataclasses.replace(config, bwd_dq_deferred=a.dq_deferred == "on")
  fn = jax.jit(lambda q, k, v: ex.attention(q, k, v, a.causal, config=config))
  got = fn(q, k, v)
  want = ex.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], a.causal)[0]
  err = float(np.abs(np.asarray(got[:, :, :1], np.float32) - np.asarray(want, np.float32)).max())
  print(f"attention forward d{a.head_dim} causal={a.causal} {config}: max abs error {err:.2e}", flush=True)
  if a.bwd:
    _, vjp = jax.vjp(fn, q, k, v)
    fn, args = jax.jit(lambda vjp, do: vjp(do)), (vjp, got)
  else:
    args = (q, k, v)
  for _ in range(a.runs):
    jax.block_until_ready(fn(*args))


if __name__ == "__main__":
  main()
