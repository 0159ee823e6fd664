"""examples/tensor_parallel.py: mgpu_dsl kernels inside jax.shard_map, on 2 CPU devices in interpret
mode and exported for CUDA (in a subprocess that asks XLA for 2 host devices)."""
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1]

SCRIPT = r"""
import sys
sys.path.insert(0, {examples!r})
import jax, jax.numpy as jnp, numpy as np
from jax.sharding import Mesh
import tensor_parallel as tp
assert len(jax.devices()) == 2
mesh = Mesh(np.array(jax.devices()), ("tp",))
x, w1, b1, w2 = tp.make(128, 128, 512, jnp.bfloat16)
got = tp.mlp_tensor_parallel(mesh, interpret=True)(x, w1, b1, w2)
want = tp.mlp_reference(x, w1, b1, w2)
err = float(jnp.linalg.norm((got - want).astype(jnp.float32)) / jnp.linalg.norm(want.astype(jnp.float32)))
print("relative error", err)
assert err < 1e-2
spec = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in (x, w1, b1, w2)]
exp = jax.export.export(tp.mlp_tensor_parallel(mesh), platforms=["cuda"])(*spec)
text = exp.mlir_module()
print("custom calls", text.count("@mosaic_gpu"), "devices", exp.nr_devices)
assert text.count("@mosaic_gpu") == 2 and exp.nr_devices == 2
"""


def test_tensor_parallel_mlp_on_two_host_devices_and_exported():
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2")
  env.pop("MGPU_DSL_INTERPRET", None)
  r = subprocess.run([sys.executable, "-c", SCRIPT.format(examples=str(ROOT / "examples"))],
                     capture_output=True, text=True, timeout=600, env=env)
  assert r.returncode == 0, r.stdout + r.stderr
  assert "relative error" in r.stdout and "custom calls 2" in r.stdout


@pytest.mark.gpu
def test_tensor_parallel_mlp_on_the_gpus():
  r = subprocess.run([sys.executable, str(ROOT / "examples" / "tensor_parallel.py")],
                     capture_output=True, text=True, timeout=600)
  assert r.returncode == 0, r.stdout + r.stderr
  err = float(r.stdout.split("relative error ")[1].split()[0])
  assert err < 1e-2
