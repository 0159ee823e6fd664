"""GPU check: register reshapes that split the minor axis into pairs, (16, 128) -> (1024, 2) and
(16, 64, 2), with and without a row mask (int4 packing). Prints which variants match numpy."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
OUT = lambda a: S((a.shape[0], a.shape[1] // 2), jnp.uint8)
GRID = lambda a: (ml.cdiv(a.shape[0], 16),)


@mg.mgpu_kernel(out_shape=OUT, grid=GRID)
def pairs_2d(a, out):
  i = ml.program_id(0)
  v = a.at[ml.ds(i * 16, 16), :][...].astype(jnp.int32)
  v2 = v.reshape(16 * 64, 2)
  p = (v2[:, 0] & 0xF) | ((v2[:, 1] & 0xF) << 4)
  out.at[ml.ds(i * 16, 16), :][...] = p.reshape(16, 64).astype(jnp.uint8)


@mg.mgpu_kernel(out_shape=OUT, grid=GRID)
def pairs_3d(a, out):
  i = ml.program_id(0)
  v3 = a.at[ml.ds(i * 16, 16), :][...].astype(jnp.int32).reshape(16, 64, 2)
  p = (v3[:, :, 0] & 0xF) | ((v3[:, :, 1] & 0xF) << 4)
  out.at[ml.ds(i * 16, 16), :][...] = p.astype(jnp.uint8)


def main():
  a = jax.random.randint(jax.random.key(2), (1024, 128), -8, 8).astype(jnp.int8)
  ai = np.asarray(a).astype(np.int32)
  want = ((ai[:, 0::2] & 15) | ((ai[:, 1::2] & 15) << 4)).astype(np.uint8)
  for k in (pairs_2d, pairs_3d):
    for interp in (True, False):
      try:
        got = np.asarray(k(a, interpret=interp))
        bad = int((got != want).sum())
        print(f"{k.fn.__name__} {'interpret' if interp else 'GPU'}: {'match' if bad == 0 else f'{bad} of {want.size} differ'}")
      except Exception as e:
        print(f"{k.fn.__name__} {'interpret' if interp else 'GPU'}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")



def columns_probe():
  """Column 0 and 1 of a strided (16 * 128 / w, w) int32 tile (through the SMEM transpose), for w."""
  for w in (2, 4, 8, 16, 32, 64):
    n = 2048 // w

    @mg.mgpu_kernel(out_shape=lambda x: S((2, x.shape[0]), jnp.int32), grid=lambda x: (1,))
    def cols(x, out):
      v = x[...]
      out.at[0, :][...] = v[:, 0]
      out.at[1, :][...] = v[:, 1]

    x = jnp.arange(n * w, dtype=jnp.int32).reshape(n, w)
    want = np.stack([np.asarray(x)[:, 0], np.asarray(x)[:, 1]])
    for interp in (True, False):
      try:
        got = np.asarray(cols(x, interpret=interp))
        bad = int((got != want).sum())
        print(f"columns of ({n}, {w}) {'interpret' if interp else 'GPU'}: {'match' if bad == 0 else f'{bad} of {want.size} differ'}")
      except Exception as e:
        print(f"columns of ({n}, {w}) {'interpret' if interp else 'GPU'}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")


if __name__ == "__main__":
  main()
  columns_probe()
