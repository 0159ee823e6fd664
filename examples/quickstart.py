"""mgpu_dsl quickstart: a kernel from Python source to a Mosaic GPU kernel inside jax.jit.

    python examples/quickstart.py

With a Hopper GPU it runs the kernels and checks them against jax.numpy. Without
one it shows what the compiler produced (the typed IR and the Mosaic GPU
module), exports the kernel for CUDA, runs it in interpret mode on the CPU, and
shows a diagnostic for a buggy kernel.
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def double(x, out):                                 # parameters: GMEM refs (inputs, then outputs)
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))                  # SMEM; its dtype is inferred from the copy
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)        # GMEM -> SMEM (TMA), awaited before first read
  buf[...] = buf[...] * 2                           # SMEM -> registers -> SMEM
  ml.copy(buf, out.at[ml.ds(i * 128, 128), :])      # SMEM -> GMEM (TMA)


def _same_shape(x, y):
  if tuple(x.shape) != tuple(y.shape):          # a TMA load past y's end would read zeros
    raise ValueError(f"gelu_mul needs x and y of one shape, got {tuple(x.shape)} and {tuple(y.shape)}")
  return x


@mg.mgpu_kernel(out_shape=_same_shape, grid=lambda x, y: (x.shape[0] // 64,))
def gelu_mul(x, y, out):
  """out = gelu(x) * y (tanh approximation), computed in float32 whatever the input dtype."""
  i = ml.program_id(0)
  xs = ml.smem((64, x.shape[1]))
  ys = ml.smem((64, y.shape[1]))
  ml.copy(x.at[ml.ds(i * 64, 64)], xs)
  ml.copy(y.at[ml.ds(i * 64, 64)], ys)
  a = xs[...].astype(jnp.float32)
  inner = 0.7978845608 * (a + 0.044715 * a * a * a)
  g = 0.5 * a * (1.0 + ml.tanh(inner))
  xs[...] = (g * ys[...].astype(jnp.float32)).astype(x.dtype)
  ml.copy(xs, out.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: x)
def buggy(x, out):
  buf = ml.smem((128, 64), jnp.float16)
  ml.copy(x, buf)                                   # x is float32: a mistake, caught at this line
  ml.copy(buf, out)


# What `python -m mgpu_dsl check examples/quickstart.py` checks without a GPU (buggy is left
# out on purpose: declare it too and the checker reports its mistake and exits 1).
mg.check_specs(double, jax.ShapeDtypeStruct((1024, 64), jnp.float32))
mg.check_specs(gelu_mul, *[jax.ShapeDtypeStruct((1024, 64), jnp.bfloat16)] * 2)


def gelu_mul_ref(x, y):
  a = x.astype(jnp.float32)
  return (jax.nn.gelu(a, approximate=True) * y.astype(jnp.float32)).astype(x.dtype)


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  print(f"jax {jax.__version__}, backend {jax.default_backend()}")
  x = jax.random.normal(jax.random.key(0), (1024, 64), jnp.float32)
  y = jax.random.normal(jax.random.key(1), (1024, 64), jnp.float32)
  xb, yb = x.astype(jnp.bfloat16), y.astype(jnp.bfloat16)

  if on_gpu:
    out = jax.jit(double)(x)
    np.testing.assert_array_equal(np.asarray(out), np.asarray(x * 2))
    print("double(x) on the GPU == x * 2: OK")
    out = jax.jit(gelu_mul)(xb, yb)
    err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - gelu_mul_ref(xb, yb).astype(jnp.float32))))
    print(f"gelu_mul(x, y) bf16 on the GPU, max abs error vs jax.numpy: {err:.3g}")
    assert err < 0.05
  else:
    spec = jax.ShapeDtypeStruct(x.shape, x.dtype)
    print("\n== the typed IR of double(x) (after dtype inference and sync insertion) ==")
    print(double.typed_ir(spec))
    text = double.mlir(spec)
    keep = [l for l in text.splitlines() if any(k in l for k in (
        "cp.async.bulk", "mbarrier", "vector.load", "vector.store", "arith.mulf", "fence.proxy"))]
    print(f"\n== the Mosaic GPU module: {len(text.splitlines())} lines; its TMA, barrier and math ops ==")
    print("\n".join(l.strip()[:150] for l in keep[:12]))
    exported = jax.export.export(jax.jit(double), platforms=["cuda"])(spec)
    print("\nexported for CUDA on the CPU; custom call present:",
          "mosaic_gpu" in exported.mlir_module())
    try:
      out = double(x, interpret=True)
      print("\n== interpret mode (numpy, same typed IR) ==")
      print("double(x)[:2, :4] =\n", np.asarray(out)[:2, :4])
      print("equals x * 2:", bool(np.array_equal(np.asarray(out), np.asarray(x * 2))))
      out = gelu_mul(xb, yb, interpret=True)
      err = float(jnp.max(jnp.abs(out.astype(jnp.float32) - gelu_mul_ref(xb, yb).astype(jnp.float32))))
      print(f"gelu_mul(x, y) bf16 interpreted, max abs error vs jax.numpy: {err:.3g}")
    except ImportError:
      print("(interpret mode is not available in this build)")

  print("\n== a diagnostic: copying float32 into a float16 buffer ==")
  try:
    buggy(x[:128])
  except mg.KernelError as e:
    print(f"{type(e).__module__}.{type(e).__name__}: {e}")


if __name__ == "__main__":
  main()
