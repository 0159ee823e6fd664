"""How long the first call of a new kernel takes, by stage, against the floor of the stack below.

    python benchmarks/first_call.py

Each contender is a new function (a fresh constant, so no cache of jax's, XLA's or mgpu_dsl's
can serve it) computing `x * c` over a (4096, 4096) float32 array, after the process has
already compiled and run other kernels of every kind (so CUDA, LLVM and ptxas start-up are
not counted). Stages: lower (tracing: for mgpu_dsl its frontend and the Mosaic GPU module
build), compile (XLA, plus Mosaic GPU's MLIR passes, LLVM, ptxas and the host-side JIT),
first run. Contenders:

- XLA: `jax.jit(lambda x: x * c)`, the floor of any jitted function;
- Mosaic GPU by hand: the smallest `as_gpu_kernel` doing the same work (TMA in, multiply,
  TMA out, one tile a CTA), the floor of any kernel that goes through Mosaic GPU;
- Pallas Mosaic GPU: `pl.pallas_call` of the same block kernel, where it runs;
- mgpu_dsl: `examples/elementwise.py`'s register-only and pipelined kernels.

The median of 3 new functions each is printed. A timing is never an assertion.
"""
import os
import statistics
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
os.environ.setdefault("MGPU_DSL_CACHE_DIR", "off")
SHAPE = (4096, 4096)
TILE = (128, 128)


def stages(make, x, c):
  """(lower, compile, first run) seconds of the new function make(c)."""
  f = make(c)
  t0 = time.perf_counter()
  lowered = f.lower(x)
  t1 = time.perf_counter()
  compiled = lowered.compile()
  t2 = time.perf_counter()
  out = jax.block_until_ready(compiled(x))
  t3 = time.perf_counter()
  np.testing.assert_allclose(np.asarray(out[:4, :4]), np.asarray(x[:4, :4]) * c, rtol=1e-6)
  return t1 - t0, t2 - t1, t3 - t2


def xla(c):
  return jax.jit(lambda x: x * c)


def mosaic_by_hand(c):
  import jax.experimental.mosaic.gpu as mgpu
  from jax._src.interpreters import mlir as jax_mlir
  from jaxlib.mlir import ir

  def body(ctx, x_gmem, y_gmem, scratch):
    smem, bar = scratch
    from jaxlib.mlir.dialects import gpu, arith
    bx, by = gpu.block_id(gpu.Dimension.x), gpu.block_id(gpu.Dimension.y)
    rows = arith.muli(bx, arith.constant(ir.IndexType.get(), TILE[0]))
    cols = arith.muli(by, arith.constant(ir.IndexType.get(), TILE[1]))
    window = (mgpu.ds(rows, TILE[0]), mgpu.ds(cols, TILE[1]))
    ctx.async_copy(src_ref=x_gmem, dst_ref=smem, gmem_slice=window, barrier=bar)
    bar.wait()
    y = mgpu.FragmentedArray.load_strided(smem) * c
    y.store_untiled(smem)
    mgpu.commit_shared()
    ctx.async_copy(src_ref=smem, dst_ref=y_gmem, gmem_slice=window)
    ctx.await_async_copy(0)

  ty = jax.ShapeDtypeStruct(SHAPE, jnp.float32)
  with jax_mlir.make_ir_context(), ir.Location.unknown():
    return mgpu.as_gpu_kernel(body, grid=(SHAPE[0] // TILE[0], SHAPE[1] // TILE[1], 1), block=(128, 1, 1),
                              in_shape=ty, out_shape=ty,
                              smem_scratch_shape=(jax.ShapeDtypeStruct(TILE, jnp.float32), mgpu.TMABarrier()))


def pallas(c):
  from jax.experimental import pallas as pl
  from jax.experimental.pallas import mosaic_gpu as plgpu

  def kernel(x_ref, o_ref):
    o_ref[...] = x_ref[...] * c

  import inspect
  spec = pl.BlockSpec(TILE, lambda i, j: (i, j))
  extra = {"backend": "mosaic_gpu"} if "backend" in inspect.signature(pl.pallas_call).parameters else {}
  return jax.jit(pl.pallas_call(kernel, out_shape=jax.ShapeDtypeStruct(SHAPE, jnp.float32),
                                grid=(SHAPE[0] // TILE[0], SHAPE[1] // TILE[1]), in_specs=[spec],
                                out_specs=spec, compiler_params=plgpu.CompilerParams(), **extra))


def ours(kernel, **meta):
  import mgpu_dsl as mg

  def make(c):
    k = mg.mgpu_kernel(out_shape=kernel.out_shape, grid=kernel.grid)(kernel.fn)
    return jax.jit(lambda x: k(x, factor=c, **meta))
  return make


def main():
  import elementwise as ex
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; first call of a new x * c over"
        f" {SHAPE} float32, median of 3, seconds")
  x = jax.random.normal(jax.random.key(0), SHAPE, jnp.float32)
  contenders = [("XLA jax.jit", xla), ("Mosaic GPU by hand (as_gpu_kernel)", mosaic_by_hand),
                ("Pallas Mosaic GPU", pallas),
                ("mgpu_dsl register-only (scale_direct)", ours(ex.scale_direct)),
                ("mgpu_dsl pipelined (scale)", ours(ex.scale))]
  rows = []
  for n, (name, make) in enumerate(contenders):
    try:
      stages(make, x, 1.5 + n)                       # warm: this kind's one-time start-up
      runs = [stages(make, x, 2.0 + n + k / 8) for k in range(3)]
    except Exception as e:  # noqa: BLE001  (report a contender that cannot run, go on)
      print(f"{name}: {type(e).__name__}: {(str(e).splitlines() or [''])[0][:160]}", flush=True)
      continue
    lo, co, ru = (statistics.median(r[i] for r in runs) for i in range(3))
    rows.append((name, lo, co, ru, lo + co + ru))
    print(f"{name}: lower {lo:.3f}  compile {co:.3f}  run {ru:.3f}  total {lo + co + ru:.3f}", flush=True)
  print("\n| contender | lower s | compile s | first run s | total s |\n|---|--:|--:|--:|--:|")
  for r in rows:
    print(f"| {r[0]} | {r[1]:.3f} | {r[2]:.3f} | {r[3]:.3f} | {r[4]:.3f} |")


if __name__ == "__main__":
  main()
