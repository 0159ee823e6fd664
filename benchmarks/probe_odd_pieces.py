"""Which store of probe 46a's odd fills and copies faults on the GPU: each statement of test_probe46a's
`odd_fills` and `odd_copies` as a kernel of its own, each run in its own process (a fault loses the
process's CUDA context), compared with interpret mode.

    python benchmarks/probe_odd_pieces.py [--jobs 8]
"""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _k(out_shape, grid=None):
  return lambda fn: mg.mgpu_kernel(out_shape=out_shape, grid=grid)(fn) if grid else mg.mgpu_kernel(out_shape=out_shape)(fn)


@_k(lambda x, s: x)
def fill_33(x, s, o):
  o[...] = x[...]
  o[0:33] = 0


@_k(lambda x, s: x)
def fill_scalar(x, s, o):
  o[...] = x[...]
  o[40:85] = x[0]


@_k(lambda x, s: x)
def fill_runtime(x, s, o):
  o[...] = x[...]
  o[s[0]:s[0] + 37] = -1.5


@_k(lambda x, s: x)
def fill_smem(x, s, o):
  o[...] = x[...]
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  buf[5:50] = 2.0
  o[100:164] = buf[...]


@_k(lambda x, s: S((3, 24, 40), x.dtype))
def fill_cube(x, s, cube):
  cube[...] = 0.5


@_k(lambda x, s: S((3, 24, 40), x.dtype))
def fill_cube_window(x, s, cube):
  cube[...] = 0.5
  cube[1, 3:20, 2:39] = ml.zeros((17, 37), cube.dtype)


@_k(lambda x, s: S((9, 9), jnp.int32))
def fill_small(x, s, small):
  small[...] = -1
  small[2:7, 1:8] = 3


@_k(lambda x, s: S((5, 20), x.dtype))
def fill_stat(x, s, stat):
  stat[...] = ml.full(stat.shape, s[1].astype(stat.dtype), stat.dtype)


@_k(lambda x, y: S((32, 24), x.dtype), grid=lambda x, y: (x.shape[0] // 16,))
def copy_smem_to_gmem(x, y, o):
  p = ml.program_id(0)
  buf = ml.smem((16, 24), x.dtype)
  buf[...] = x[ml.ds(p * 16, 16), :]
  o[ml.ds(p * 16, 16), :] = x[ml.ds(p * 16, 16), :] * 2
  o[ml.ds(p * 16 + 2, 9), 3:20] = buf[5:14, 1:18]


@_k(lambda x, y: S((9, 9), x.dtype))
def copy_corner(x, y, corner):
  v = x[0:16, :] * 3
  corner[...] = v[0:9, 0:9]


@_k(lambda x, y: S((5, 20), x.dtype))
def copy_stat(x, y, stat):
  v = x[0:16, :] * 3
  stat[...] = v[3:8, 4:24]


@_k(lambda x, y: y)
def copy_smem_smem(x, y, flat):
  a = ml.smem((64,), y.dtype)
  b = ml.smem((64,), y.dtype)
  a[...] = y[...]
  b[...] = y[...] * 2
  b[0:33] = a[3:36]
  flat[...] = b[...]


@_k(lambda x, y: y)
def copy_smem_tail(x, y, flat):
  a = ml.smem((64,), y.dtype)
  a[...] = y[...]
  flat[...] = y[...] * 2
  flat[40:63] = a[0:23]


FILLS = [fill_33, fill_scalar, fill_runtime, fill_smem, fill_cube, fill_cube_window, fill_small, fill_stat]
COPIES = [copy_smem_to_gmem, copy_corner, copy_stat, copy_smem_smem, copy_smem_tail]


def run_one(name, dt):
  rng = np.random.default_rng(6)
  k = next(k for k in FILLS + COPIES if k.__name__ == name)
  dt = {"f32": np.float32, "bf16": jnp.bfloat16}[dt]
  if k in FILLS:
    args = (rng.standard_normal(200).astype(dt), np.array([150, 3], np.int32))
  else:
    args = (rng.standard_normal((32, 24)).astype(dt), rng.standard_normal(64).astype(dt))
  want = k(*args, interpret=True)
  got = jax.jit(k)(*[jnp.asarray(a) for a in args])
  same = np.array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  print(f"{name} {dt.__name__ if hasattr(dt, '__name__') else dt}: {'OK' if same else 'MISMATCH'}", flush=True)
  if not same:
    g, w = np.asarray(got, np.float32), np.asarray(want, np.float32)
    print("  differs at", np.argwhere(g != w)[:8].tolist(), flush=True)


def main():
  if len(sys.argv) > 2 and sys.argv[1] == "--one":
    return run_one(sys.argv[2], sys.argv[3])
  jobs = []
  for k in FILLS + COPIES:
    for dt in ("f32", "bf16"):
      jobs.append((k.__name__, dt))
  env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", CUDA_LAUNCH_BLOCKING="1")
  for i in range(0, len(jobs), 8):
    batch = [(j, subprocess.Popen([sys.executable, __file__, "--one", *j], stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, text=True, env=env)) for j in jobs[i:i + 8]]
    for j, p in batch:
      try:
        out, _ = p.communicate(timeout=120)
      except subprocess.TimeoutExpired:
        p.kill()
        out = "TIMEOUT"
      lines = out.strip().splitlines()
      tail = [l for l in lines if "OK" in l or "MISMATCH" in l or "differs" in l or "rror" in l][-4:]
      print(f"== {' '.join(j)} rc={p.returncode}: " + (" | ".join(t[:300] for t in tail) or (lines[-1][:300] if lines else "")),
            flush=True)


if __name__ == "__main__":
  main()
