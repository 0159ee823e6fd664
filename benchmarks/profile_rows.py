"""Run one paged-decode or long-row softmax kernel a few times, for Nsight Compute:

    ncu --clock-control none --kernel-name regex:paged --launch-skip 2 --launch-count 1 \
        --section SpeedOfLight --section Occupancy --section WarpStateStats --section SchedulerStats \
        python3 benchmarks/profile_rows.py paged --splits 4 --stages 2
    ncu ... --kernel-name regex:softmax python3 benchmarks/profile_rows.py softmax --chunks 8

`paged`: examples/paged_attention.py on the benchmark's grouped-query shape (b32 h32 kvh8 d128,
page 16, up to 4096 tokens), tensor cores. `softmax`: examples/softmax.py's SMEM-held rows on
1024 x 32768 float32 (`softmax_default`: its default there, rows partly in registers);
`layernorm` / `rmsnorm`: examples/layernorm.py's SMEM-held rows on the same shape. Each call is checked against its reference once.
"""
import argparse
import functools
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))


def main():
  p = argparse.ArgumentParser()
  p.add_argument("kernel", choices=["paged", "softmax", "softmax_default", "layernorm", "rmsnorm"])
  p.add_argument("--splits", type=int, default=4)
  p.add_argument("--stages", type=int, default=2)
  p.add_argument("--tokens", type=int, default=64)
  p.add_argument("--q-regs", action="store_true")
  p.add_argument("--chunks", type=int, default=8)
  p.add_argument("--parts", type=int, default=1)
  p.add_argument("--online", action="store_true")
  p.add_argument("--runs", type=int, default=4)
  p.add_argument("--kernels", action="store_true",
                 help="print each kernel a call launches with its GPU time (CUPTI), not for ncu")
  a = p.parse_args()
  if a.kernel == "paged":
    import paged_attention as ex
    args = ex.make_inputs(jax.random.key(1), 32, 32, 8, 128, 16, 256)
    fn = jax.jit(functools.partial(ex.paged_attention, splits=a.splits, stages=a.stages, tensor_cores=True,
                                   tokens=a.tokens, q_regs=a.q_regs))
    want = ex.reference(*args)
  elif a.kernel in ("layernorm", "rmsnorm"):     # the SMEM-held rows of examples/layernorm.py
    import layernorm as ex
    k = jax.random.split(jax.random.key(0), 3)
    args = tuple(jax.random.normal(k[i], s, jnp.float32) for i, s in enumerate([(1024, 32768), (32768,), (32768,)]))
    center = a.kernel == "layernorm"
    fn = jax.jit(lambda x, w, b: ex.layernorm_smem(x, w, b, center=center)[0])
    want = ex.reference(*args) if center else args[0] * jax.lax.rsqrt(
        jnp.mean(args[0] ** 2, -1, keepdims=True) + 1e-5) * args[1]
  else:
    import softmax as ex
    args = (jax.random.normal(jax.random.key(0), (1024, 32768), jnp.float32),)
    fn = jax.jit(ex.softmax if a.kernel == "softmax_default" else
                 functools.partial(ex.softmax_smem, chunks=a.chunks, parts=a.parts, online=a.online))
    want = jax.nn.softmax(args[0], axis=-1)
  err = float(np.abs(np.asarray(fn(*args), np.float32) - np.asarray(want, np.float32)).max())
  print(f"{a.kernel}: max abs error {err:.2e}", flush=True)
  if a.kernels:   # where a call's kernel time goes: ours, and the XLA ops around it
    from jax.experimental.mosaic.gpu import profiler
    _, per = profiler.measure(fn, aggregate=False, iterations=10)(*args)
    for name, ms in per[-1] if per and isinstance(per[0], list) else per:
      print(f"  {ms * 1e3:8.1f} us  {name[:100]}")
    return
  for _ in range(a.runs):
    jax.block_until_ready(fn(*args))


if __name__ == "__main__":
  main()
