"""Probe 43f: slices with run-time starts written as NumPy/jnp users write them. A stop that is the start
plus a static size is the window ml.ds(start, size) also where the start is a value made twice by the same
pure math (`i % 64:i % 64 + 64`) or a read of one element of an input made twice (`s[0] * 64:(s[0] + 1) * 64`),
and a register tile's `t[i:i + 8]` names the SMEM window that works (frontend/ops/index_hints.py)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32 = jnp.float32
HERE = __file__
X = jnp.arange(512, dtype=F32) / 7 - 20
S = jnp.array([3], jnp.int32)


def line_of(text: str) -> int:
  lines = open(HERE).read().splitlines()
  return next(i + 1 for i, l in enumerate(lines) if text in l and "line_of(" not in l)


def exported(k, *args):
  return jax.export.export(jax.jit(k), platforms=["cuda"])(*args).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((64,), F32))
def from_input_read(x, s, out):
  out[...] = x[s[0] * 64:(s[0] + 1) * 64]


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((64, 64), F32))
def from_input_read_2d(x, s, out):
  out[s[0] % 2 * 32:(s[0] % 2 + 1) * 32, :] = x[s[0] * 32:s[0] * 32 + 32, 0:64]
  out[(1 - s[0] % 2) * 32:(1 - s[0] % 2) * 32 + 32, :] = x[0:32, 32:96] * 2


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((64,), F32), grid=lambda x: (1,))
def modulo_window(x, out):
  out[...] = ml.zeros((64,), F32)
  for j in range(x.shape[0] // 64):
    i = j * 64
    out[i % 64:i % 64 + 64] += x[i:i + 64]


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((64,), F32))
def cast_and_min(x, s, out):
  out[...] = x[ml.minimum(s[0].astype(jnp.int32), 4) * 64:ml.minimum(s[0].astype(jnp.int32), 4) * 64 + 64]


def test_a_start_read_twice_from_an_input_is_a_fixed_window():
  """Was MG003 "slice ... has a run-time stop" with a 512-element masked window as the hint."""
  np.testing.assert_allclose(from_input_read(X, S, interpret=True), X[192:256])
  assert "mosaic_gpu" in exported(from_input_read, X, S)
  x2 = jnp.arange(128 * 96, dtype=F32).reshape(128, 96)
  s = jnp.array([2], jnp.int32)
  got = from_input_read_2d(x2, s, interpret=True)
  np.testing.assert_allclose(got[:32], x2[64:96, :64])
  np.testing.assert_allclose(got[32:], x2[:32, 32:] * 2)
  assert "mosaic_gpu" in exported(from_input_read_2d, x2, s)


def test_a_start_made_twice_by_the_same_math_is_a_fixed_window():
  """`i % 64:i % 64 + 64` (and `ml.minimum(s.astype(...), 4) * 64` twice) was MG003 whose message quoted the slice as `i:i`."""
  np.testing.assert_allclose(modulo_window(X, interpret=True), X.reshape(8, 64).sum(0), rtol=1e-5)
  assert "mosaic_gpu" in exported(modulo_window, X)
  for s in (S, jnp.array([7], jnp.int32)):
    k = min(int(s[0]), 4)
    np.testing.assert_allclose(cast_and_min(X, s, interpret=True), X[k * 64:k * 64 + 64])
  assert "mosaic_gpu" in exported(cast_and_min, X, S)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((8,), F32))
def register_window(x, s, out):
  t = x[0:64]
  i = s[0]
  out[...] = t[i:i + 8]


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((8,), F32))
def register_window_fixed(x, s, out):
  t = x[0:64]
  i = s[0]
  buf = ml.smem((64,), jnp.float32); buf[...] = t; out[...] = buf.at[ml.ds(i, 8)][...]


def test_a_register_window_at_a_run_time_start_names_the_smem_window():
  with pytest.raises(mg.KernelError) as e:
    register_window(X, S, interpret=True)
  err = e.value
  assert err.code == "MG003" and type(err).__name__ == "KernelTypeError"
  assert (err.lineno, err.col_offset) == (line_of("out[...] = t[i:i + 8]"), 13)
  assert "a window of t needs static bounds" in err.message
  hint = "buf = ml.smem((64,), jnp.float32); buf[...] = t; then buf.at[ml.ds(i, 8)][...]"
  assert hint in err.hint
  # the hint, followed, compiles and is jnp's t[i:i + 8]
  np.testing.assert_allclose(register_window_fixed(X, S, interpret=True), X[3:11])
  assert "mosaic_gpu" in exported(register_window_fixed, X, S)


@pytest.mark.gpu
def test_gpu_windows_of_repeated_starts():
  np.testing.assert_allclose(from_input_read(X, S), X[192:256])
  np.testing.assert_allclose(modulo_window(X), X.reshape(8, 64).sum(0), rtol=1e-5)
  np.testing.assert_allclose(cast_and_min(X, jnp.array([7], jnp.int32)), X[256:320])
  np.testing.assert_allclose(register_window_fixed(X, S), X[3:11])


@mg.mgpu_kernel(out_shape=lambda x, n: jax.ShapeDtypeStruct((64,), F32))
def reversed_stepped(x, n, out):
  acc = ml.zeros((64,), F32)
  for j in reversed(range(1, n[0], 3)):
    acc = acc * 0.5 + x[j * 32:j * 32 + 64]
  out[...] = acc


def _reversed_stepped_ref(n):
  ref = jnp.zeros(64, F32)
  for j in reversed(range(1, n, 3)):
    ref = ref * 0.5 + X[j * 32:j * 32 + 64]
  return ref


def test_reversed_of_a_stepped_run_time_range_counts_down():
  """Was MG001 "reversed() cannot take a runtime loop", though range(1, n, 3)[::-1] worked."""
  for n in (0, 1, 2, 10, 11):
    np.testing.assert_allclose(reversed_stepped(X, jnp.array([n], jnp.int32), interpret=True),
                               _reversed_stepped_ref(n), rtol=1e-5)
  assert "mosaic_gpu" in exported(reversed_stepped, X, S)


@pytest.mark.gpu
def test_gpu_reversed_of_a_stepped_range():
  for n in (0, 10, 11):
    np.testing.assert_allclose(reversed_stepped(X, jnp.array([n], jnp.int32)), _reversed_stepped_ref(n), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((64,), F32))
def from_the_end(x, s, out):
  i = s[0] * 64
  out[...] = x[-(i + 64) + 512:512 - i]


def test_a_negated_start_is_a_fixed_window():
  """`-(i + 64) + 512:512 - i` was MG003 with a 512-element masked window as the hint."""
  np.testing.assert_allclose(from_the_end(X, S, interpret=True), X[256:320])
  assert "mosaic_gpu" in exported(from_the_end, X, S)


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((32,), F32))
def strided(x, s, out):
  i = s[0] * 64
  out[...] = x[i:i + 64:2]


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((32,), F32))
def strided_fixed(x, s, out):
  i = s[0] * 64
  out[...] = x.at[ml.ds(i, 64)][...][::2]


def test_a_strided_slice_at_a_run_time_start_keeps_its_step_in_the_hint():
  """The hint was x.at[ml.ds(i, 64)], which, followed, reads 64 elements, not every second one of them."""
  with pytest.raises(mg.KernelError) as e:
    strided(X, S, interpret=True)
  err = e.value
  assert err.code == "MG003" and type(err).__name__ == "KernelTypeError"
  assert (err.lineno, err.col_offset) == (line_of("out[...] = x[i:i + 64:2]"), 13)
  assert err.message.startswith("slice i:i + 64:2 in dimension 0 of x has a run-time start and a step of 2")
  assert err.hint == "read the window and take the step in registers: x.at[ml.ds(i, 64)][...][::2]"
  np.testing.assert_allclose(strided_fixed(X, S, interpret=True), X[192:256:2])
  assert "mosaic_gpu" in exported(strided_fixed, X, S)


@pytest.mark.gpu
def test_gpu_negated_and_strided_windows():
  np.testing.assert_allclose(from_the_end(X, S), X[256:320])
  np.testing.assert_allclose(strided_fixed(X, S), X[192:256:2])


@mg.mgpu_kernel(out_shape=lambda x, s: jax.ShapeDtypeStruct((256,), F32))
def gmem_windows(x, s, out):
  i = s[0]
  out[...] = x.at[ml.ds(i, 256)][...] + x.at[ml.ds(ml.multiple_of(i, 4), 256)][...]


def _vector_loads(text):
  return len(re.findall(r"llvm\.load [^\n]*-> vector<[2-9]x", text))


def test_a_register_window_at_an_unaligned_run_time_start_is_read_element_by_element():
  """A window at a run-time start nothing proves a multiple of the registers' vector length is read
  one element a load (a misaligned vector load faults the GPU: CUDA_ERROR_MISALIGNED_ADDRESS on the
  H200 for buf.at[ml.ds(i, 8)] at i = 3); one at ml.multiple_of(i, 4) keeps its vector loads."""
  smem = register_window_fixed.mlir(X, S)
  assert _vector_loads(smem.split("workgroup")[-1]) == 0 and "memref.load %subview" in smem
  text = gmem_windows.mlir(X, S)
  assert "start_multiple=1 " in gmem_windows.typed_ir(X, S) and "start_multiple=4 " in gmem_windows.typed_ir(X, S)
  assert len(re.findall(r"vector\.load [^\n]*vector<2xf32>", text)) == 1     # the proven start
  assert len(re.findall(r"memref\.load %subview", text)) == 2                 # the unproven one, element by element
  got = gmem_windows(X, jnp.array([4], jnp.int32), interpret=True)
  np.testing.assert_allclose(got, 2 * X[4:260])
  assert "mosaic_gpu" in exported(gmem_windows, X, S)


@pytest.mark.gpu
def test_gpu_register_windows_at_unaligned_run_time_starts():
  np.testing.assert_allclose(register_window_fixed(X, S), X[3:11])
  got = gmem_windows(X, jnp.array([4], jnp.int32))
  np.testing.assert_allclose(got, 2 * X[4:260])
