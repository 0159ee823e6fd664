"""How XLA divides a 16-bit float tensor by a Python number on this machine (probe 53h's GPU test): jnp's
`x / c` (eager and under jit) against three formulas, over every finite float16 / bfloat16 value.
  A: the product by the reciprocal in the dtype (x * dtype(1 / c), rounded once in the dtype)
  B: the product in float32 by the float32 reciprocal, rounded to the dtype
  C: the float32 quotient, rounded to the dtype
Prints, per dtype and c, how many values each formula misses."""
import jax
import jax.numpy as jnp
import numpy as np


def bits_all(dt):
  b = np.arange(65536, dtype=np.uint16).view(jnp.dtype(dt))
  f = b.astype(np.float32)
  return b[np.isfinite(f)]


def miss(got, want):
  g, w = np.asarray(got).astype(np.float32), np.asarray(want).astype(np.float32)
  bad = ~((g.view(np.int32) == w.view(np.int32)) | (np.isnan(g) & np.isnan(w)))
  return int(bad.sum())


def main():
  np.seterr(all='ignore')
  print("platform", jax.devices()[0].platform, jax.__version__)
  for dt in (jnp.float16, jnp.bfloat16):
    x = bits_all(dt)
    xd = jnp.asarray(x)
    x32 = x.astype(np.float32)
    for c in (3.0, 7.0, 10.0, 0.1, 1.7, 0.3, 100.0):
      eager = xd / c
      jit = jax.jit(lambda v: v / c)(xd)
      y = (x32 * 2 + 1).astype(dt).astype(np.float32)
      jit2 = jax.jit(lambda v: (v * 2.0 + 1.0) / c)(xd)
      cd = np.float32(np.asarray(c, dt))                                 # c rounded to the dtype (weak typing)
      a = (x32 * np.float32(np.asarray(1 / cd, dt))).astype(dt)          # (a 16-bit product is exact in float32)
      b = (x32 * np.float32(1 / cd)).astype(dt)
      q = (x32 / cd).astype(dt)
      print(f"{jnp.dtype(dt).name:8s} c={c:<6} eager: A {miss(eager, a):5d} B {miss(eager, b):5d} C {miss(eager, q):5d}"
            f" | jit: A {miss(jit, a):5d} B {miss(jit, b):5d} C {miss(jit, q):5d} | eager==jit {miss(eager, jit) == 0}"
            f" | (x*2+1)/c jit: A {miss(jit2, (y * np.float32(np.asarray(1 / cd, dt))).astype(dt))}"
            f" B {miss(jit2, (y * np.float32(1 / cd)).astype(dt))} C {miss(jit2, (y / cd).astype(dt))}"
            f" C-fused {miss(jit2, ((x32 * 2 + 1) / cd).astype(dt))}")


if __name__ == "__main__":
  main()
