"""A matrix transpose in mgpu_dsl: each program moves one tile to its mirrored place.

    python examples/transpose.py      # checks against x.T on a GPU; in interpret mode elsewhere

`x.T` of a register tile moves elements between threads, so the compiler sends it through a
padded SMEM scratch (one barrier between the threads' stores and loads). `transpose_tma` reads
and writes its tiles by TMA instead of through registers: `t_s.T[...]` reads an SMEM tile
transposed, and the result goes back out by TMA from a second SMEM tile.
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


def _out(x, **meta):
  if x.ndim != 2:
    raise ValueError(f"transpose takes a 2-D array, got shape {x.shape}")
  return jax.ShapeDtypeStruct((x.shape[1], x.shape[0]), x.dtype)


def _grid(x, *, bm=64, bn=64):
  return (x.shape[0] // bm, x.shape[1] // bn)


@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def transpose(x, out, *, bm: ml.constexpr = 64, bn: ml.constexpr = 64):
  """out = x.T for x of (m, n), m a multiple of bm and n of bn: register loads and stores."""
  i, j = ml.program_id(0), ml.program_id(1)
  t = x.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...]
  out.at[ml.ds(j * bn, bn), ml.ds(i * bm, bm)][...] = t.T


@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def transpose_tma(x, out, *, bm: ml.constexpr = 64, bn: ml.constexpr = 64):
  """out = x.T, the tiles moved by TMA."""
  i, j = ml.program_id(0), ml.program_id(1)
  t_s, o_s = ml.smem((bm, bn)), ml.smem((bn, bm))
  ml.copy(x.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)], t_s)
  o_s[...] = t_s.T[...]
  ml.copy(o_s, out.at[ml.ds(j * bn, bn), ml.ds(i * bm, bm)])


for _dt in (jnp.float32, jnp.bfloat16):
  mg.check_specs(transpose, jax.ShapeDtypeStruct((256, 512), _dt))
  mg.check_specs(transpose_tma, jax.ShapeDtypeStruct((256, 512), _dt))


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  shape = (4096, 2048) if on_gpu else (128, 256)
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(0), shape, jnp.float32).astype(dtype)
    for kernel in (transpose, transpose_tma):
      got = jax.jit(kernel)(x) if on_gpu else kernel(x, interpret=True)
      same = bool(np.array_equal(np.asarray(got), np.asarray(x).T))
      print(f"{kernel.fn.__name__} {dtype.__name__} {shape}: equal to x.T: {same}"
            f" ({'GPU' if on_gpu else 'interpret mode'})")
      assert same


if __name__ == "__main__":
  main()
