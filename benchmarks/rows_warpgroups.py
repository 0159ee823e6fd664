"""Long rows held in SMEM, their register work split among 1, 2 or 4 warpgroups (issue #8).

    python benchmarks/rows_warpgroups.py [--quick]

examples/softmax.py's softmax_smem_rows and examples/layernorm.py's layernorm_smem_rows (RMS
norm: `center=False`) with `warpgroups=w` (block=128*w): the compiler splits each chunk's
strided tiles by rows among the warpgroups and combines the full reductions' parts. For each
kernel, shape and dtype: GB/s (bytes read plus written) by kernel time / by wall time, and the
kernel-time ratio to the `x * 2` copy of the same input in the same run. Every result is
checked against jnp first; a timing is never an assertion.
"""
import argparse
import os
import sys

import jax
import jax.numpy as jnp

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402
from rowwise import measure  # noqa: E402
import layernorm as LN  # noqa: E402
import softmax as SM  # noqa: E402

F32 = jnp.float32


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="float32 1024 x 32768 only")
  a = p.parse_args()
  cases = [(F32, (1024, 32768))] if a.quick else [(F32, (1024, 32768)), (jnp.bfloat16, (1024, 32768)),
                                                  (jnp.bfloat16, (8192, 8192))]
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; GB/s by kernel time / by wall time")
  rows = []
  for dtype, shape in cases:
    tol = 1e-4 if dtype == F32 else 2e-2
    k = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k[0], shape, F32).astype(dtype)
    w = jax.random.normal(k[1], shape[1:], F32).astype(dtype)
    b = jax.random.normal(k[2], shape[1:], F32).astype(dtype)
    io = 2 * x.size * x.dtype.itemsize
    copy = measure("copy", lambda x: x * 2, [x], x * 2, io, 1e-6)
    name = f"{dtype.__name__} {shape[0]}x{shape[1]}"
    rows.append(("copy", name, "", f"{copy[0]:.0f} / {copy[1]:.0f}", "1.00"))
    print(rows[-1], flush=True)
    sm_ref = jax.jit(lambda x: jax.nn.softmax(x.astype(F32), axis=-1).astype(x.dtype))(x)
    ln_ref = jax.jit(LN.reference)(x, w, b)
    rms_ref = jax.jit(lambda x, w: (x.astype(F32) * jax.lax.rsqrt(jnp.mean(jnp.square(x.astype(F32)), -1,
                                                                             keepdims=True) + 1e-5)
                                    * w.astype(F32)).astype(x.dtype))(x, w)
    for wg in (1, 2, 4):
      for chunks in (8, 16):
        variants = [
            ("softmax", lambda x, c=chunks, g=wg: SM.softmax_smem(x, chunks=c, warpgroups=g), [x], sm_ref),
            ("layer norm", lambda x, w, b, c=chunks, g=wg: LN.layernorm_smem(x, w, b, chunks=c, warpgroups=g)[0],
             [x, w, b], ln_ref),
            ("RMS norm", lambda x, w, c=chunks, g=wg: LN.layernorm_smem(x, w, w, center=False, chunks=c,
                                                                        warpgroups=g)[0], [x, w], rms_ref),
        ]
        for op, fn, args, ref in variants:
          r = measure(op, fn, args, ref, io, tol)
          ok = not isinstance(r, str)
          rows.append((op, name, f"{wg} wg, {chunks} chunks", r if not ok else f"{r[0]:.0f} / {r[1]:.0f}",
                       f"{r[0] / copy[0]:.2f}" if ok else "-"))
          print(rows[-1], flush=True)
  print(table(("kernel", "input", "warpgroups, chunks", "GB/s kernel / wall", "of copy"), rows))


if __name__ == "__main__":
  main()
