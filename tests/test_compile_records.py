"""What a compile leaves for debugging: MGPU_DSL_DUMP files, `mgpu_dsl` log records, and
the kernel's name in lowered JAX programs and GPU profiles."""
import glob
import logging
import os

import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg

import kernels as K

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def fresh(k):
  return mg.mgpu_kernel(out_shape=k.out_shape, grid=k.grid, block=k.block, cluster=k.cluster)(k.fn)


def test_dump_writes_typed_ir_and_module_of_every_specialisation(tmp_path, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_DUMP", str(tmp_path))
  k = fresh(K.double)
  k.check(S((256, 64), F32))
  k.check(S((512, 64), jnp.float16))
  irs = sorted(glob.glob(str(tmp_path / "double-*.ir.txt")))
  mlirs = sorted(glob.glob(str(tmp_path / "double-*.mlir")))
  assert len(irs) == len(mlirs) == 2
  assert {p[:-len(".ir.txt")] for p in irs} == {p[:-len(".mlir")] for p in mlirs}
  texts = [open(p).read() for p in irs]
  assert all(t.startswith("kernel @double grid=") for t in texts)
  assert sorted("float16" in t for t in texts) == [False, True]
  assert all("module @double" in open(p).read() for p in mlirs)


def test_without_dump_nothing_is_written(tmp_path, monkeypatch):
  monkeypatch.delenv("MGPU_DSL_DUMP", raising=False)
  monkeypatch.chdir(tmp_path)
  fresh(K.double).check(S((256, 64), F32))
  assert os.listdir(tmp_path) == []


def test_each_compile_is_logged_with_name_specs_and_times(caplog):
  k = fresh(K.row_block_sum)
  with caplog.at_level(logging.INFO, logger="mgpu_dsl"):
    k.check(S((256, 64), jnp.float16), n=2)
  messages = [r.getMessage() for r in caplog.records if r.name == "mgpu_dsl"]
  assert any(m.startswith("mgpu_dsl: row_block_sum(float16[256,64], n=2): traced in ") or
             m.startswith("mgpu_dsl: row_block_sum(float16[256,64], n=2): read from the disk cache in ")
             for m in messages), messages
  assert any(m.startswith("mgpu_dsl: row_block_sum(float16[256,64], n=2): Mosaic GPU module built in ")
             for m in messages), messages


def test_kernel_name_names_its_function_in_lowered_programs():
  f = jax.jit(lambda v: K.double(v * 3.0) + 1.0)
  text = jax.export.export(f, platforms=["cuda"])(S((256, 64), F32)).mlir_module()
  assert "func.func private @double(" in text and "call @double(" in text


@pytest.mark.gpu
def test_kernel_name_appears_in_the_gpu_profile():
  from jax.experimental.mosaic.gpu import profiler
  x = jnp.ones((1024, 64), F32)
  _, timings = profiler.measure(jax.jit(K.double), aggregate=False)(x)
  assert any("double" in name for name, _ in timings), timings
