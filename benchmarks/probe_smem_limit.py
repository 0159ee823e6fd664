"""How much SMEM a kernel may plan: run kernels whose SMEM plan is up to 4 KiB under the 227 KiB
a CTA may opt in to, and exactly at it (the driver's maximum; Mosaic GPU's module also holds a
byte of static SMEM). The compiler's own limit (frontend/hw.py: 227 KiB less 16 bytes, the boundary this script
found on the H200 in the seventeenth session) is raised to 227 KiB here to try the sizes between.
Prints, per planned size, whether the kernel ran and gave the right numbers.

    python benchmarks/probe_smem_limit.py
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import hw, smem

OPT_IN = 227 * 1024
hw.SMEM_LIMIT = smem.SMEM_LIMIT = OPT_IN     # try every size up to the driver's maximum


def _outs(x, *, rows, pad):
  return jax.ShapeDtypeStruct((rows, 128), x.dtype), jax.ShapeDtypeStruct((pad, 4), x.dtype)


@mg.mgpu_kernel(out_shape=_outs, grid=(1,))
def through_smem(x, out, out2, *, rows: ml.constexpr, pad: ml.constexpr):
  """x's first `rows` rows to out and the first 4 columns of its first `pad` rows (16 bytes each)
  to out2, through SMEM by TMA."""
  big = ml.smem((rows, 128), jnp.float32)
  small = ml.smem((pad, 4), jnp.float32)
  ml.copy(x.at[0:256, :], big.at[0:256, :])
  ml.copy(x.at[256:rows, :], big.at[256:rows, :])
  ml.copy(x.at[0:pad, 0:4], small)
  ml.copy(big.at[0:256, :], out.at[0:256, :])
  ml.copy(big.at[256:rows, :], out.at[256:rows, :])
  ml.copy(small, out2)


def planned(rows, pad, x):
  return through_smem._compile((x,), dict(rows=rows, pad=pad))["kernel"].smem_plan.total


def main():
  x = jnp.arange(456 * 128, dtype=jnp.float32).reshape(456, 128)
  spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
  seen = set()
  for rows in range(440, 456):
    for pad in (1, 2, 4, 16, 32, 48, 63, 64):
      try:
        n = planned(rows, pad, spec)
      except mg.KernelError:           # more than the compiler's own limit
        continue
      if n in seen or n < OPT_IN - 4096:
        continue
      seen.add(n)
      try:
        got, got2 = through_smem(x, rows=rows, pad=pad)
        ok = np.array_equal(np.asarray(got), np.asarray(x[:rows])) and np.array_equal(np.asarray(got2), np.asarray(x[:pad, :4]))
        print(f"planned {n} bytes ({n - 227 * 1024:+d} from 227 KiB): {'ran, right' if ok else 'ran, WRONG'}", flush=True)
      except Exception as e:  # the kernel could not run: say why
        print(f"planned {n} bytes ({n - 227 * 1024:+d} from 227 KiB): {type(e).__name__}: {str(e).splitlines()[0][:100]}",
              flush=True)


if __name__ == "__main__":
  main()
