"""Layer norm (and RMS norm) of long rows (1024 x 32768) on the H200: examples/layernorm.py's
SMEM-held rows with w and b fetched a chunk ahead into registers or by TMA into SMEM slots,
against XLA and the `a * 2` copy of the same input.

    python benchmarks/layernorm_long_rows.py

GB/s by kernel time (bytes of x read + y written, CUPTI median of 20), every result checked first.
"""
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import layernorm as LN  # noqa: E402
import mgpu_dsl as mg  # noqa: E402

F32 = jnp.float32


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; layer norm of (1024, 32768), GB/s by kernel time")
  for dt in (F32, jnp.bfloat16):
    k = jax.random.split(jax.random.key(0), 3)
    x = jax.random.normal(k[0], (1024, 32768), F32).astype(dt)
    w = jax.random.normal(k[1], (32768,), F32).astype(dt)
    b = jax.random.normal(k[2], (32768,), F32).astype(dt)
    nbytes = 2 * x.size * x.dtype.itemsize
    ref = LN.reference(x, w, b).astype(F32)
    cases = [("copy (a * 2)", lambda x, w, b: x * 2),
             ("XLA", LN.reference),
             ("default (LN.layernorm)", lambda x, w, b: LN.layernorm(x, w, b))]
    for slots in (0, 2, 3):
      for chunks in (8, 16):
        cases.append((f"SMEM rows, wb_slots={slots}, {chunks} chunks",
                      lambda x, w, b, s=slots, c=chunks: LN.layernorm_smem(x, w, b, wb_slots=s, chunks=c)[0]))
    for slots in (0, 2):              # half a row a CTA, two CTAs a cluster: two clusters an SM
      for chunks in (4, 8):
        cases.append((f"2 CTAs a row, wb_slots={slots}, {chunks} chunks",
                      lambda x, w, b, s=slots, c=chunks: LN.layernorm_smem(x, w, b, wb_slots=s, chunks=c,
                                                                           parts=2)[0]))
    cases.append(("RMS norm default", lambda x, w, b: LN.layernorm_smem(x, w, b, center=False)[0]))
    cases.append(("RMS norm, 2 CTAs a row, 4 chunks",
                  lambda x, w, b: LN.layernorm_smem(x, w, b, center=False, parts=2, chunks=4)[0]))
    for name, fn in cases:
      try:
        f = jax.jit(fn)
        if name != "copy (a * 2)" and not name.startswith("RMS"):
          err = float(jnp.abs(f(x, w, b).astype(F32) - ref).max())
          assert err < 0.1, err
        print(f"{dt.__name__:9s} {name:34s} {nbytes / mg.bench(f, x, w, b) / 1e9:6.0f} GB/s", flush=True)
      except Exception as e:  # noqa: BLE001  (a variant that cannot run is reported, not fatal)
        print(f"{dt.__name__:9s} {name:34s} failed: {type(e).__name__}: {str(e)[:120]}", flush=True)


if __name__ == "__main__":
  main()
