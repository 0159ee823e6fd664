"""Memory-bound elementwise kernels at the copy limit: persistent, pipelined loads and stores.

    python examples/elementwise.py      # checks against jax.numpy (interpret mode without a GPU)

The pattern for memory-bound work: a persistent grid of about one CTA per SM
(`mg.num_sms()`), each walking the tiles pid, pid + grid, pid + 2 * grid, ... in a
`ml.range(start, stop, step, stages=s)` loop. The compiler pipelines it: every
buffer loaded by TMA at the top of the body and every buffer the body writes and
TMA-stores gets `s` copies; the loads of the next `s` tiles are in flight while
this tile is computed, and this tile's store overlaps the following loads (its
wait is deferred until its buffer comes round again). Tile counts need not divide
evenly among the CTAs.

SMEM per CTA is `stages * (bytes of the loaded tiles + bytes of the stored tiles)`;
it must stay under 227 KiB (about 113 KiB for two CTAs per SM). `specialize=True` has
a producer warpgroup issue the loads instead (warp specialisation).
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

# Defaults: tiles of 64 x 128 elements, one CTA per SM (ctas=None), and as many stages as
# keep the SMEM near 192 KiB. benchmarks/elementwise.py sweeps the alternatives.
CONFIG = dict(bm=64, bn=128, stages=3, ctas=None)


def same_shape(a, b, **meta):
  """The output of a binary op of two arrays of one shape (this file does not broadcast)."""
  if a.shape != b.shape:
    raise ValueError(f"a and b must have one shape, got {a.shape} and {b.shape}: broadcast them outside"
                     f" the kernel (jnp.broadcast_to)")
  return a


def persistent_grid(*args, ctas=None, **meta):
  """`ctas` CTAs, by default one per SM; CTAs beyond the number of tiles find no work."""
  return (ctas or mg.num_sms(),)


@ml.inline
def tile(t, shape, bm, bn):
  """The window of tile `t` (tiles numbered along rows first)."""
  per_row = shape[1] // bn
  return ml.ds(t // per_row * bm, bm), ml.ds(t % per_row * bn, bn)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=persistent_grid)
def scale(x, out, *, factor: ml.constexpr = 2.0, bm: ml.constexpr = CONFIG["bm"],
          bn: ml.constexpr = CONFIG["bn"], stages: ml.constexpr = CONFIG["stages"],
          ctas: ml.constexpr = CONFIG["ctas"], specialize: ml.constexpr = False):
  """out = x * factor."""
  x_s, o_s = ml.smem((bm, bn)), ml.smem((bm, bn))
  for t in ml.range(ml.program_id(0), x.shape[0] // bm * (x.shape[1] // bn), ml.num_programs(0),
                    stages=stages, warp_specialize=specialize):
    rows, cols = tile(t, x.shape, bm, bn)
    ml.copy(x.at[rows, cols], x_s)
    o_s[...] = x_s[...] * factor
    ml.copy(o_s, out.at[rows, cols])


@mg.mgpu_kernel(out_shape=same_shape, grid=persistent_grid)
def add(a, b, out, *, bm: ml.constexpr = 32, bn: ml.constexpr = CONFIG["bn"],
        stages: ml.constexpr = 4, ctas: ml.constexpr = CONFIG["ctas"], specialize: ml.constexpr = False):
  """out = a + b."""
  a_s, b_s, o_s = ml.smem((bm, bn)), ml.smem((bm, bn)), ml.smem((bm, bn))
  for t in ml.range(ml.program_id(0), a.shape[0] // bm * (a.shape[1] // bn), ml.num_programs(0),
                    stages=stages, warp_specialize=specialize):
    rows, cols = tile(t, a.shape, bm, bn)
    ml.copy(a.at[rows, cols], a_s)
    ml.copy(b.at[rows, cols], b_s)
    o_s[...] = a_s[...] + b_s[...]
    ml.copy(o_s, out.at[rows, cols])


@ml.inline
def gelu(x):
  """jax.nn.gelu (its default tanh approximation), in float32."""
  return 0.5 * x * (1.0 + ml.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))


@mg.mgpu_kernel(out_shape=same_shape, grid=persistent_grid)
def gelu_mul(a, b, out, *, bm: ml.constexpr = CONFIG["bm"], bn: ml.constexpr = CONFIG["bn"],
             stages: ml.constexpr = 4, ctas: ml.constexpr = CONFIG["ctas"], specialize: ml.constexpr = False):
  """out = gelu(a) * b, computed in float32 and rounded once to out's dtype."""
  a_s, b_s, o_s = ml.smem((bm, bn)), ml.smem((bm, bn)), ml.smem((bm, bn))
  for t in ml.range(ml.program_id(0), a.shape[0] // bm * (a.shape[1] // bn), ml.num_programs(0),
                    stages=stages, warp_specialize=specialize):
    rows, cols = tile(t, a.shape, bm, bn)
    ml.copy(a.at[rows, cols], a_s)
    ml.copy(b.at[rows, cols], b_s)
    y = gelu(a_s[...].astype(jnp.float32)) * b_s[...].astype(jnp.float32)
    o_s[...] = y.astype(out.dtype)
    ml.copy(o_s, out.at[rows, cols])


def _cast_out(x, *, dtype=jnp.bfloat16, **meta):
  return jax.ShapeDtypeStruct(x.shape, dtype)


@mg.mgpu_kernel(out_shape=_cast_out, grid=persistent_grid)
def cast(x, out, *, dtype: ml.constexpr = jnp.bfloat16, bm: ml.constexpr = CONFIG["bm"],
         bn: ml.constexpr = CONFIG["bn"], stages: ml.constexpr = 4,
         ctas: ml.constexpr = CONFIG["ctas"], specialize: ml.constexpr = False):
  """out = x.astype(dtype)."""
  x_s, o_s = ml.smem((bm, bn)), ml.smem((bm, bn), dtype)
  for t in ml.range(ml.program_id(0), x.shape[0] // bm * (x.shape[1] // bn), ml.num_programs(0),
                    stages=stages, warp_specialize=specialize):
    rows, cols = tile(t, x.shape, bm, bn)
    ml.copy(x.at[rows, cols], x_s)
    o_s[...] = x_s[...].astype(dtype)
    ml.copy(o_s, out.at[rows, cols])


# The other pattern: no SMEM at all. One small tile per CTA, loaded from GMEM straight into
# registers (each thread 16-byte vector loads) and stored back the same way; many CTAs per
# SM keep the memory system busy, as XLA's own fusions do. benchmarks/elementwise.py
# measures both patterns.
DIRECT = dict(bm=8, bn=512)


def tile_grid(x, *rest, bm=DIRECT["bm"], bn=DIRECT["bn"]):
  """One CTA a tile."""
  return (x.shape[0] // bm * (x.shape[1] // bn),)


@ml.inline
def my_tile(shape, bm, bn):
  return tile(ml.program_id(0), shape, bm, bn)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=tile_grid)
def scale_direct(x, out, *, factor: ml.constexpr = 2.0, bm: ml.constexpr = DIRECT["bm"],
                 bn: ml.constexpr = DIRECT["bn"]):
  """out = x * factor, through registers only."""
  rows, cols = my_tile(x.shape, bm, bn)
  out.at[rows, cols][...] = x.at[rows, cols][...] * factor


@mg.mgpu_kernel(out_shape=same_shape, grid=tile_grid)
def add_direct(a, b, out, *, bm: ml.constexpr = DIRECT["bm"], bn: ml.constexpr = DIRECT["bn"]):
  """out = a + b, through registers only."""
  rows, cols = my_tile(a.shape, bm, bn)
  out.at[rows, cols][...] = a.at[rows, cols][...] + b.at[rows, cols][...]


@mg.mgpu_kernel(out_shape=same_shape, grid=tile_grid)
def gelu_mul_direct(a, b, out, *, bm: ml.constexpr = DIRECT["bm"], bn: ml.constexpr = DIRECT["bn"]):
  """out = gelu(a) * b, through registers only."""
  rows, cols = my_tile(a.shape, bm, bn)
  y = gelu(a.at[rows, cols][...].astype(jnp.float32)) * b.at[rows, cols][...].astype(jnp.float32)
  out.at[rows, cols][...] = y.astype(out.dtype)


@mg.mgpu_kernel(out_shape=_cast_out, grid=tile_grid)
def cast_direct(x, out, *, dtype: ml.constexpr = jnp.bfloat16, bm: ml.constexpr = DIRECT["bm"],
                bn: ml.constexpr = DIRECT["bn"]):
  """out = x.astype(dtype), through registers only."""
  rows, cols = my_tile(x.shape, bm, bn)
  out.at[rows, cols][...] = x.at[rows, cols][...].astype(dtype)


# Specialisations `python -m mgpu_dsl check examples/elementwise.py` checks without a GPU.
_X = jax.ShapeDtypeStruct((4096, 1024), jnp.float32)
mg.check_specs(scale, _X)
mg.check_specs(add, _X, _X)
mg.check_specs(gelu_mul, _X.update(dtype=jnp.bfloat16), _X.update(dtype=jnp.bfloat16))
mg.check_specs(cast, _X)
mg.check_specs(scale_direct, _X)
mg.check_specs(cast_direct, _X)

KERNELS = {  # name -> (kernel, jnp reference, input dtypes)
    "a * 2": (scale, lambda a: a * 2, (jnp.float32,)),
    "a + b": (add, lambda a, b: a + b, (jnp.float32, jnp.float32)),
    "gelu(a) * b": (gelu_mul, lambda a, b: jax.nn.gelu(a) * b, (jnp.bfloat16, jnp.bfloat16)),
    "f32 -> bf16": (cast, lambda a: a.astype(jnp.bfloat16), (jnp.float32,)),
}
DIRECT_KERNELS = {"a * 2": scale_direct, "a + b": add_direct, "gelu(a) * b": gelu_mul_direct,
                  "f32 -> bf16": cast_direct}


def inputs(shape, dtypes, seed=0):
  keys = jax.random.split(jax.random.key(seed), len(dtypes))
  return [jax.random.normal(k, shape, jnp.float32).astype(d) for k, d in zip(keys, dtypes)]


def check(got, want):
  tol = 1e-6 if want.dtype == jnp.float32 else 2e-2
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  shape = (8192, 4096) if on_gpu else (640, 512)   # on the CPU: 40 tiles on 8 CTAs
  for name, (kernel, ref, dtypes) in KERNELS.items():
    args = inputs(shape, dtypes)
    got = jax.jit(kernel)(*args) if on_gpu else kernel(*args, ctas=8, interpret=True)
    check(got, ref(*args))
    direct = DIRECT_KERNELS[name]
    got = jax.jit(direct)(*args) if on_gpu else direct(*args, interpret=True)
    check(got, ref(*args))
    print(f"{name}: {'GPU' if on_gpu else 'interpret mode'} matches jax.numpy on {shape}"
          " (persistent pipelined and direct)")


if __name__ == "__main__":
  main()
