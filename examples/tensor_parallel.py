"""A tensor-parallel MLP whose matmuls are mgpu_dsl kernels, inside jax.shard_map.

    python examples/tensor_parallel.py              # every visible GPU (2 H200s: nvidia-h200-x2)
    XLA_FLAGS=--xla_force_host_platform_device_count=2 python examples/tensor_parallel.py
                                                    # no GPU: 2 CPU devices, kernels in interpret mode

y = gelu(x @ w1 + b1) @ w2 with w1 split by columns and w2 by rows over the mesh axis
"tp" (Megatron's column-parallel then row-parallel layers): each device runs the fused
matmul + bias + gelu kernel on its slice of the hidden dimension, then the plain matmul
kernel on the matching rows of w2, and a psum (NCCL on GPUs) adds the partial outputs.
Checked against the single-device result.
"""
import functools
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np
from jax.sharding import Mesh, PartitionSpec as P

sys.path.insert(0, os.path.dirname(__file__))
import matmul as mm  # noqa: E402


def mlp_reference(x, w1, b1, w2):
  f32 = jnp.float32
  h = jnp.dot(x, w1, preferred_element_type=f32) + b1.astype(f32)
  h = jax.nn.gelu(h, approximate=True).astype(x.dtype)
  return jnp.dot(h, w2, preferred_element_type=f32).astype(x.dtype)


def mlp_tensor_parallel(mesh, *, interpret=None):
  """The MLP sharded over `mesh`'s axis "tp": x replicated, w1/b1 by columns, w2 by rows."""
  @functools.partial(jax.shard_map, mesh=mesh, in_specs=(P(), P(None, "tp"), P("tp"), P("tp", None)),
                     out_specs=P(), check_vma=False)
  def mlp(x, w1, b1, w2):
    h = mm.matmul_bias_gelu(x, w1, b1, bn=128, interpret=interpret)    # (m, hidden / devices)
    y = mm.matmul(h, w2, bn=128, interpret=interpret)                  # partial (m, d)
    return jax.lax.psum(y.astype(jnp.float32), "tp").astype(x.dtype)
  return jax.jit(mlp)


def make(m, d, hidden, dtype, key=0):
  k = jax.random.split(jax.random.key(key), 4)
  x = jax.random.normal(k[0], (m, d), jnp.float32).astype(dtype)
  w1 = (jax.random.normal(k[1], (d, hidden), jnp.float32) / np.sqrt(d)).astype(dtype)
  b1 = jax.random.normal(k[2], (hidden,), jnp.float32).astype(dtype)
  w2 = (jax.random.normal(k[3], (hidden, d), jnp.float32) / np.sqrt(hidden)).astype(dtype)
  return x, w1, b1, w2


def main():
  devices = jax.devices()
  on_gpu = devices[0].platform == "gpu"
  mesh = Mesh(np.array(devices), ("tp",))
  m, d, hidden = (8192, 4096, 16384) if on_gpu else (128, 128, 256 * len(devices))
  x, w1, b1, w2 = make(m, d, hidden, jnp.bfloat16)
  f = mlp_tensor_parallel(mesh, interpret=None if on_gpu else True)
  got = f(x, w1, b1, w2)
  want = mlp_reference(x, w1, b1, w2)
  err = float(jnp.linalg.norm((got - want).astype(jnp.float32)) / jnp.linalg.norm(want.astype(jnp.float32)))
  print(f"tensor-parallel MLP on {len(devices)} {devices[0].platform} device(s), ({m}, {d}) x hidden {hidden}:"
        f" relative error {err:.2e} against one device")
  if on_gpu:
    for name, fn in (("mgpu_dsl, tensor parallel", f), ("XLA, one device", jax.jit(mlp_reference))):
      jax.block_until_ready(fn(x, w1, b1, w2))
      t0 = time.perf_counter()
      for _ in range(20):
        out = fn(x, w1, b1, w2)
      jax.block_until_ready(out)
      t = (time.perf_counter() - t0) / 20
      print(f"{name}: {t * 1e3:.2f} ms, {4 * m * d * hidden / t / 1e12:.0f} TFLOP/s in all")


if __name__ == "__main__":
  main()
