"""Which float32 operation differs between the GPU and NumPy (interpret mode's arithmetic)?
Probe 30a's int4 quantisation picked different integers on the H200 for 4 of 8192 float16 inputs
(ties of 7 * v / max at k + 0.5). Each step of it is written out here and compared bit for bit:
the row max, the scale max / 7.0, the quotient v / scale, its rounding, and a plain x / y.

  python benchmarks/probe_division.py          # on the GPU
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0],), F32), S(x.shape, F32), S(x.shape, F32), S(x.shape, F32)),
                grid=lambda x, y: (x.shape[0] // 8,))
def steps(x, y, sc_out, q_out, r_out, d_out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...].astype(jnp.float32)
  sc = ml.maximum(ml.max(ml.abs(v), axis=1), 1e-8) / 7.0
  q = v / sc[:, None]
  sc_out.at[ml.ds(i * 8, 8)][...] = sc
  q_out.at[ml.ds(i * 8, 8), :][...] = q
  r_out.at[ml.ds(i * 8, 8), :][...] = ml.round(q)
  d_out.at[ml.ds(i * 8, 8), :][...] = v / y.at[ml.ds(i * 8, 8), :][...]


def compare(name, got, want):
  got, want = np.asarray(got), np.asarray(want)
  bad = np.flatnonzero(got.view(np.uint32) != want.view(np.uint32))
  print(f"{name:>12}: {bad.size} of {got.size} differ" + "".join(
      f"; at {j}: {got.flat[j]!r} vs {want.flat[j]!r}" for j in bad[:3]))


def main():
  x = jax.random.normal(jax.random.key(0), (64, 256), F32).astype(jnp.float16)
  y = jax.random.uniform(jax.random.key(1), (64, 256), F32, 0.5, 2.0)
  for interpret in (False, True):
    sc, q, r, d = (steps(x, y, interpret=True) if interpret else jax.jit(steps)(x, y))
    v = np.asarray(x, np.float32)
    print("interpret mode" if interpret else "GPU", "against NumPy:")
    want_sc = np.maximum(np.abs(v).max(1), np.float32(1e-8)) / np.float32(7)
    compare("scale", sc, want_sc)
    compare("v / scale", q, v / np.asarray(sc)[:, None])        # with the kernel's own scale
    compare("round", r, np.round(np.asarray(q)))
    compare("x / y", d, v / np.asarray(y))


if __name__ == "__main__":
  main()
