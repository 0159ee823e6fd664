"""print(...) and breakpoint() inside kernels: they print and stop in interpret mode, and
still compile for the GPU (where print shows text and scalars)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.lowering import interpret as interp

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def noisy(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  print("row block", i, f"first={v}", sep=": ")
  out.at[ml.ds(i * 128, 128)][...] = v * 2


def test_print_prints_every_program_in_interpret_mode(capsys):
  x = jnp.arange(256, dtype=jnp.float32)
  out = noisy(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(out), np.asarray(x * 2))
  lines = capsys.readouterr().out.splitlines()
  assert len(lines) == 2
  for pid, line in enumerate(lines):
    head, values = line.split("first=")
    assert head == f"[program ({pid}, 0, 0)] row block: {pid}: "
    np.testing.assert_array_equal(np.array(values.strip("[]").split(), float), np.arange(128) + 128 * pid)


@pytest.mark.gpu
def test_printing_kernel_runs_on_the_gpu(capfd):
  x = jnp.arange(256, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(jax.block_until_ready(noisy(x))), np.asarray(x * 2))
  out = capfd.readouterr().out
  assert "row block: 0: first=<tensor<128, float32>>" in out


def test_print_compiles_for_the_gpu():
  txt = jax.export.export(jax.jit(noisy), platforms=["cuda"])(S((256,), jnp.float32)).mlir_module()
  assert "@mosaic_gpu" in txt
  assert "gpu.printf" in noisy.mlir(S((256,), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def stops(x, out, *, scale: ml.constexpr):
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x, buf)
  acc = buf[...] * scale
  breakpoint()
  out[...] = acc


def test_breakpoint_stops_with_the_kernels_values(monkeypatch):
  seen = []
  monkeypatch.setattr(interp, "open_debugger", lambda values, where: seen.append((values, where)))
  x = jnp.arange(128, dtype=jnp.float32)
  stops(x, scale=3.0, interpret=True)
  (values, where), = seen
  np.testing.assert_array_equal(values["acc"], np.arange(128) * 3.0)
  np.testing.assert_array_equal(values["buf"], np.arange(128))
  assert values["scale"] == 3.0 and "test_debugging.py" in where


def test_breakpoint_is_a_no_op_on_the_gpu_build():
  stops.check(S((128,), jnp.float32), scale=2.0)
