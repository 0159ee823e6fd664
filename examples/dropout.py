"""Seeded, reproducible dropout in mgpu_dsl (Triton's "low-memory dropout" tutorial).

    python examples/dropout.py      # on a GPU, and in interpret mode everywhere

No mask is stored: element e of x is kept when `ml.rand(seed, e) >= p`, a counter-based random
number (Philox4x32-10) of the seed and the element's index. The same seed gives the same mask
on the GPU and in interpret mode, bit for bit, and the backward pass recomputes it from the
seed instead of reading a mask from memory. The seed is an `ml.scalar` parameter: a new seed
per step needs no recompilation.
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

BLOCK = 1024


def _grid(x, seed, **meta):
  return (ml.cdiv(x.size, BLOCK),)


@mg.mgpu_kernel(out_shape=lambda x, seed, **meta: x, grid=_grid)
def dropout(x, seed: ml.scalar, out, *, p: ml.constexpr = 0.5):
  """out = x / (1 - p) where the element is kept, 0 elsewhere; x is 1-D of any length."""
  assert len(x.shape) == 1, "dropout takes a 1-D x: flatten it, dropout(x.reshape(-1), seed).reshape(x.shape)"
  i = ml.program_id(0)
  idx = i * BLOCK + ml.arange(BLOCK)
  inside = idx < x.shape[0]
  v = x.at[ml.ds(i * BLOCK, BLOCK)].load(mask=inside, other=0.0)
  keep = ml.rand(seed, idx) >= p
  y = ml.where(keep, v.astype(jnp.float32) * (1.0 / (1.0 - p)), 0.0)
  out.at[ml.ds(i * BLOCK, BLOCK)].store(y.astype(out.dtype), mask=inside)


def reference_mask(n, seed, p):
  """The keep-mask, from the Philox reference on Python ints (frontend/ops/random.py)."""
  from mgpu_dsl.frontend.ops.random import philox_reference
  key0, key1 = seed & 0xFFFFFFFF, (seed >> 32) & 0xFFFFFFFF
  bits = np.array([philox_reference(key0, key1, e)[0] for e in range(n)], np.uint32).view(np.int32)
  folded = np.where(bits < 0, ~bits, bits)          # Triton's uint_to_uniform_float, as ml.rand draws
  return folded.astype(np.float32) * np.float32(4.6566127342e-10) >= p


mg.check_specs(dropout, jax.ShapeDtypeStruct((5000,), jnp.float32), jax.ShapeDtypeStruct((), jnp.int32))


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  n, p = 3000, 0.3
  x = jax.random.normal(jax.random.key(0), (n,), jnp.float32)
  a = dropout(x, 42, p=p, interpret=not on_gpu)
  b = dropout(x, 42, p=p, interpret=True)
  c = dropout(x, 43, p=p, interpret=True)
  keep = reference_mask(n, 42, p)
  np.testing.assert_array_equal(np.asarray(a), np.asarray(b))             # GPU == interpret, bitwise
  np.testing.assert_allclose(np.asarray(b), np.where(keep, np.asarray(x) / (1 - p), 0.0), rtol=1e-6)
  print(f"dropout p={p} of {n} elements: kept {keep.mean():.3f}; same seed, same mask"
        f" ({'GPU vs interpret' if on_gpu else 'interpret mode'}); a new seed changes"
        f" {(np.asarray(b) != np.asarray(c)).mean():.2f} of the outputs")


if __name__ == "__main__":
  main()
