"""Which access of probe 46a's faulting odd pieces is misaligned on the GPU (session 36's visit: fill_smem bf16,
copy_smem_to_gmem bf16, copy_stat bf16, copy_smem_smem f32/bf16 fault with CUDA_ERROR_MISALIGNED_ADDRESS): each
variant below a kernel of its own in its own process, compared with interpret mode; with MOSAIC_GPU_DUMP_TO set,
each variant's PTX and SASS go to a folder of its name.

    python benchmarks/probe_odd_bisect.py
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
same = mg.mgpu_kernel(out_shape=lambda x: x)
head = mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype))


@head
def smem_roundtrip(x, o):        # no fill: the buffer in and out
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  o[...] = buf[...]


@head
def smem_store40_at5(x, o):      # a whole 40-vector (held) at start 5: element stores
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  buf[5:45] = ml.full((40,), 2.0, x.dtype)
  o[...] = buf[...]


@head
def smem_store8_at42(x, o):      # an 8-vector (tensor-core column layout) at start 42
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  buf[42:50] = ml.full((8,), 2.0, x.dtype)
  o[...] = buf[...]


@head
def smem_store8_at40(x, o):      # the same at an aligned start
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  buf[40:48] = ml.full((8,), 2.0, x.dtype)
  o[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x: S((8,), x.dtype))
def smem_load8_at28(x, o):       # an 8-vector read at start 28, stored to GMEM
  buf = ml.smem((64,), x.dtype)
  buf[...] = x[0:64]
  o[...] = buf[28:36]


@head
def smem_load8_at28_smem(x, o):  # ... stored into another buffer at 25 (copy_smem_smem's second piece)
  a = ml.smem((64,), x.dtype)
  b = ml.smem((64,), x.dtype)
  a[...] = x[0:64]
  b[...] = x[0:64] * 2
  b[25:33] = a[28:36]
  o[...] = b[...]


@head
def smem_load32_at3(x, o):       # copy_smem_smem's first piece
  a = ml.smem((64,), x.dtype)
  b = ml.smem((64,), x.dtype)
  a[...] = x[0:64]
  b[...] = x[0:64] * 2
  b[0:32] = a[3:35]
  o[...] = b[...]


@same
def gmem_store8_at42(x, o):      # the 8-vector at 42 into GMEM
  o[...] = x[...]
  o[42:50] = ml.full((8,), 2.0, x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((16,), x.dtype))
def regs_rows(x, o):             # a (16,) wgmma-column vector from a 2-D SMEM row at 76
  buf = ml.smem((16, 24), x.dtype)
  buf[...] = ml.reshape(x[0:384], (16, 24))
  o[...] = buf[3, 4:20]


KERNELS = [smem_roundtrip, smem_store40_at5, smem_store8_at42, smem_store8_at40, smem_load8_at28,
           smem_load8_at28_smem, smem_load32_at3, gmem_store8_at42, regs_rows]


def run_one(name, dt):
  k = next(k for k in KERNELS if k.__name__ == name)
  dt = {"f32": np.float32, "bf16": jnp.bfloat16}[dt]
  x = np.random.default_rng(3).standard_normal(384).astype(dt)
  print(k.typed_ir(S(x.shape, x.dtype)).split("\n", 1)[1], flush=True)
  want = np.asarray(k(x, interpret=True), np.float32)
  got = np.asarray(jax.jit(k)(jnp.asarray(x)), np.float32)
  print(f"{name}: {'OK' if np.array_equal(got, want) else 'MISMATCH'}", flush=True)


def main():
  if len(sys.argv) > 2 and sys.argv[1] == "--one":
    return run_one(sys.argv[2], sys.argv[3])
  dump = os.environ.get("MOSAIC_GPU_DUMP_TO")
  jobs = [(k.__name__, dt) for k in KERNELS for dt in ("f32", "bf16")]
  for i in range(0, len(jobs), 8):
    batch = []
    for j in jobs[i:i + 8]:
      env = dict(os.environ, XLA_PYTHON_CLIENT_PREALLOCATE="false", CUDA_LAUNCH_BLOCKING="1")
      if dump:
        env["MOSAIC_GPU_DUMP_TO"] = os.path.join(dump, "_".join(j))
      batch.append((j, subprocess.Popen([sys.executable, __file__, "--one", *j], stdout=subprocess.PIPE,
                                        stderr=subprocess.STDOUT, text=True, env=env)))
    for j, p in batch:
      try:
        out, _ = p.communicate(timeout=120)
      except subprocess.TimeoutExpired:
        p.kill()
        out = "TIMEOUT"
      lines = out.strip().splitlines()
      ok = [l for l in lines if l.endswith(("OK", "MISMATCH"))]
      print(f"== {' '.join(j)} rc={p.returncode}: {ok[-1] if ok else (lines[-1][:200] if lines else '')}", flush=True)
      if not ok:
        print("\n".join("   " + l for l in lines if l.startswith("  %") or "store" in l[:12]), flush=True)


if __name__ == "__main__":
  main()
