"""Where does probe_layouts' masked_flatten[300x1:int8;R=128] spend its time on the H200 (it ran past
90 s there, while every other masked_flatten case took seconds)? Lowering, compiling and running are
timed apart; a Python stack is printed every 20 s, so a hang names its phase.

  python benchmarks/probe_hang.py [--kernel masked_flatten] [--dtype int8] [--rows 300] [--R 128]
                                                                           one case, in this process
  python benchmarks/probe_hang.py --sweep [--timeout 25]                   the variants below, each in
                                                                           a process of its own

The twenty-second session's visits: lowering 0.3 s, compiling 0.1 s, then the run never ended (int32:
0.0 s). The sweep: every 8-bit case at width 1 whose mask splits a warp (300 or 100 rows, R=128) hung;
all rows valid (128, 384), R=256 (two elements a thread), int16, masked_rows and plain_flatten ran.
The cause was the barrier between the relayout's store and load, copied by LLVM into both arms of
the mask's branch (design note 66, lowering/barriers.py). The sweep tells apart what the case needs to hang: the dtype (8-bit types alone go through
the SMEM relayout at width 1; 16- and 32-bit ones through a row sum), the masked rows, the
program count, and the relayout itself (layout_kernels' masked_rows: the same masked load and a
masked store, no reshape; plain_flatten: the reshape, no masks). With MOSAIC_GPU_DUMP_TO set, each case's PTX and SASS are written there: a SASS file
means ptxas finished, so the hang is the kernel's own.
"""
import argparse
import faulthandler
import os
import subprocess
import sys
import time

VARIANTS = [  # kernel, dtype, rows, R
    ("masked_flatten", "int8", 300, 128), ("masked_flatten", "uint8", 300, 128),
    ("masked_flatten", "float8_e4m3fn", 300, 128), ("masked_flatten", "int8", 384, 128),
    ("masked_flatten", "int8", 128, 128), ("masked_flatten", "int8", 100, 128),
    ("masked_flatten", "int8", 300, 256), ("masked_flatten", "int16", 300, 128),
    ("masked_rows", "int8", 300, 128), ("masked_rows", "int8", 384, 128),
    ("plain_flatten", "int8", 384, 128), ("plain_flatten", "uint8", 256, 128),
]


def one(kernel, dtype, rows, R):
  import jax
  import jax.numpy as jnp
  import numpy as np
  sys.path.insert(0, __file__.rsplit("/", 1)[0])
  import layout_kernels
  faulthandler.dump_traceback_later(20, repeat=True)
  x = jnp.asarray(np.arange(rows) % 100, dtype).reshape(rows, 1)
  f = jax.jit(lambda x: getattr(layout_kernels, kernel)(x, R=R))
  t = time.perf_counter()
  lowered = f.lower(x)
  print(f"lowered in {time.perf_counter() - t:.1f} s", flush=True)
  t = time.perf_counter()
  compiled = lowered.compile()
  print(f"compiled in {time.perf_counter() - t:.1f} s", flush=True)
  t = time.perf_counter()
  y = jax.block_until_ready(compiled(x))
  want = np.asarray(x).reshape(np.shape(y)).astype(np.float32)
  equal = bool((np.asarray(y).astype(np.float32) == want).all())
  print(f"ran in {time.perf_counter() - t:.1f} s; equal: {equal}", flush=True)
  faulthandler.cancel_dump_traceback_later()


def sweep(timeout):
  base = os.environ.get("MOSAIC_GPU_DUMP_TO")
  for kernel, dtype, rows, R in VARIANTS:
    env = dict(os.environ)
    if base:
      env.update(MOSAIC_GPU_DUMP_TO=f"{base}/{kernel}_{dtype}_{rows}_{R}", MOSAIC_GPU_DUMP_PTX="1",
                 MOSAIC_GPU_DUMP_SASS="1", MOSAIC_GPU_DUMP_PTXAS="1")
    cmd = [sys.executable, "-u", __file__, "--kernel", kernel, "--dtype", dtype, "--rows", str(rows), "--R", str(R)]
    t = time.perf_counter()
    try:
      r = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)
      out = (r.stdout + r.stderr).strip().splitlines()
      verdict = f"rc={r.returncode}: " + " | ".join(l for l in out if l.startswith(("lowered", "compiled", "ran")))
      if r.returncode:
        verdict += " | " + " | ".join(out[-3:])
    except subprocess.TimeoutExpired as e:
      out = ((e.stdout or b"").decode() if isinstance(e.stdout, bytes) else (e.stdout or "")).splitlines()
      verdict = "TIMEOUT after " + " | ".join(l for l in out if l.startswith(("lowered", "compiled")))
    files = sorted(os.listdir(env["MOSAIC_GPU_DUMP_TO"])) if base and os.path.isdir(env["MOSAIC_GPU_DUMP_TO"]) else []
    print(f"{kernel} {dtype}[{rows}x1] R={R} ({time.perf_counter() - t:.0f} s): {verdict}; dumped: {files}", flush=True)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--kernel", default="masked_flatten")
  ap.add_argument("--dtype", default="int8")
  ap.add_argument("--rows", type=int, default=300)
  ap.add_argument("--R", type=int, default=128)
  ap.add_argument("--sweep", action="store_true")
  ap.add_argument("--timeout", type=float, default=25)
  a = ap.parse_args()
  if a.sweep:
    sweep(a.timeout)
  else:
    one(a.kernel, a.dtype, a.rows, a.R)


if __name__ == "__main__":
  main()
