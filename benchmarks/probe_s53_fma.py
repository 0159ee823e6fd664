"""Does the GPU fuse a product and the add or subtraction it feeds into one FMA (one rounding), where jnp and interpret
mode round the product first? Probe 57e's fuzzer on the GPU (session 53) gave three seeds whose only fault that
could be: `v1 = jnp.square(v0); v1 - v1` not 0 (float16), `(v0 * v0)[:, None] - (v0 * v0)[None, :]` not 0 on the
diagonal (float32), `v3 = v0 * 0.1; v3 + max(v3)` a few bfloat16 ulp off. Each kernel here runs under jax.jit on the
GPU; the line says how far it is from the rounded-product result (interpret mode's) and from the fused one.

    MOSAIC_GPU_DUMP_PTX=1 python benchmarks/probe_s53_fma.py 2>&1 | grep -E "^(ok|fused|other)|fma.rn|mul.rn|sub.rn"
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def square_minus_itself(x, o, p):
  v = x[...]
  s = v * v
  o[...] = s - s
  p[...] = s


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def scaled_plus(x, o, p):
  v = x[...]
  s = v * 0.1
  o[...] = s + 1.0
  p[...] = s


def main():
  rng = np.random.default_rng(0)
  for dt in ("float32", "float16", "bfloat16"):
    x = jnp.asarray(rng.standard_normal(1024) * 3, jnp.dtype(dt))
    xf = np.asarray(x, np.float64)
    for name, k, fused in (("x*x - x*x", square_minus_itself, lambda s: xf * xf - s),
                           ("x*0.1 + 1", scaled_plus, lambda s: xf * np.float64(np.asarray(jnp.asarray(0.1, x.dtype), np.float64)) + 1.0)):
      got, s = (np.asarray(a, np.float64) for a in jax.jit(k)(x))
      want, _ = (np.asarray(a, np.float64) for a in k(x, interpret=True))
      f = np.asarray(jnp.asarray(fused(s), x.dtype), np.float64)
      off = int((got != want).sum())
      kind = "ok" if off == 0 else "fused" if (got == f).all() else "other"
      print(f"{kind:6s} {dt:9s} {name:10s}: {off} of {got.size} differ from the rounded product's result;"
            f" {int((got != f).sum())} from the fused one; largest difference {np.abs(got - want).max():.3g}")


if __name__ == "__main__":
  main()
