"""Integer indices of register tensors (`v[i]`, `m[i, j]`, `m[i]`, `m[:, j]`): through an SMEM
scratch the compiler allocates (frontend/ops/shape.py, index_through_smem), with jnp's index rules."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _outs(x, i):
  return (S((5,), F32), S((x.shape[1],), F32), S((x.shape[0],), F32), S((2, x.shape[1] - 128), F32))


@mg.mgpu_kernel(out_shape=_outs, grid=(1,))
def pick(x, i, out, row, col, win):
  v = ml.cumsum(x[...], axis=1)          # computed in registers: its elements live in other threads
  k = i[0]
  out[0] = v[3, 5]
  out[1] = v[-1, -1]
  out[2] = v[k, 7]
  out[3] = v[k - 100, 0]                 # a run-time index past the start: clamped, as jnp
  out[4] = v[k + 100, 1]                 # and past the end
  row[...] = v[k]
  win[...] = v[2:4, 128:]
  col[...] = v[:, 2]


@pytest.mark.parametrize("k", [0, 6, -3])
def test_elements_rows_and_columns_of_a_register_tensor_interpret(k):
  x = rand.normal(rand.key(0), (8, 256), F32)
  o, r, c, w = pick(x, jnp.array([k], jnp.int32), interpret=True)
  v = np.cumsum(np.asarray(x, np.float64), axis=1)
  n = 8
  kk = k % n
  want = [v[3, 5], v[-1, -1], v[kk, 7], v[max(0, min(n - 1, k - 100 + (n if k - 100 < 0 else 0))), 0],
          v[min(n - 1, k + 100), 1]]
  np.testing.assert_allclose(o, want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(r, v[kk], rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(c, v[:, 2], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(w, v[2:4, 128:], rtol=1e-5, atol=1e-4)


def test_register_indexing_exports_for_cuda():
  specs = (S((8, 256), F32), S((1,), jnp.int32))
  assert "mosaic_gpu" in jax.export.export(jax.jit(pick), platforms=["cuda"])(*specs).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=(1,))
def past_the_end(x, out):
  v = ml.cumsum(x[...])
  out[0] = v[256]


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32), grid=(1,))
def bool_element(x, out):
  m = x[...] > 0
  out[0] = m[3].astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def stepped(x, out):
  v = ml.cumsum(x[...])
  out[...] = v[0:128, None][:, 0]


@mg.mgpu_kernel(out_shape=lambda x: S((1, 128), F32), grid=(1,))
def element_and_axis(x, out):
  v = x[...]
  out[...] = v[None, ml.program_id(0)]


def test_a_static_index_past_the_end_is_an_error():
  expect(past_the_end, [S((256,), F32)], mg.IndexOutOfBoundsError, "v[256]",
         "index 256 is out of range for axis 0 of v (256,)", hint="indices of axis 0 run from -256 to 255")


def test_a_bool_tensor_is_indexed_through_its_bytes():
  x = rand.normal(rand.key(5), (256,), F32)
  got = bool_element(x, interpret=True)
  assert int(got[0]) == int(x[3] > 0)


def test_other_register_indices_name_what_works():
  x = rand.normal(rand.key(0), (256,), F32)       # a slice and a new axis: one after the other
  np.testing.assert_allclose(stepped(x, interpret=True), jnp.cumsum(x)[:128], rtol=1e-5, atol=1e-5)
  e = expect(element_and_axis, [S((8, 128), F32)], mg.UnsupportedSyntaxError, "v[None, ml.program_id(0)]",
             "this index of a register tensor is not supported: a register tensor takes integer indices (an"
             " element, a row or a column: x[i, j], x[i], x[:, j]), static windows (x[a:b], x[i, a:b], x[:, a:b]),"
             " and x[:, None]-style axis insertion, one kind at a time")
  assert e.hint.startswith("slice the ref before reading it")


@pytest.mark.gpu
def test_gpu_elements_rows_and_columns_of_a_register_tensor():
  x = rand.normal(rand.key(1), (8, 256), F32)
  i = jnp.array([5], jnp.int32)
  got = jax.jit(pick)(x, i)
  want = pick(x, i, interpret=True)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-6, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (x.shape[0] // 64,))
def swiglu(x, out):
  rows = ml.ds(ml.program_id(0) * 64, 64)
  h = x.shape[1] // 2
  v = x.at[rows, :][...].astype(F32)
  a, b = v[:, :h], v[:, h:]
  out.at[rows, :][...] = (a * ml.sigmoid(a) * b).astype(out.dtype)


def test_column_halves_of_a_loaded_tile_swiglu():
  x = rand.normal(rand.key(3), (128, 512), F32)
  np.testing.assert_allclose(swiglu(x, interpret=True), jax.nn.silu(x[:, :256]) * x[:, 256:], rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in jax.export.export(jax.jit(swiglu), platforms=["cuda"])(S((128, 512), jnp.bfloat16)).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=(1,))
def column_past_the_end(x, out):
  v = ml.cumsum(x[...], axis=1)
  out[...] = v[:, 128]


def test_a_column_index_past_the_end_names_the_tensor_as_written():
  """Was reported for axis 0 of the transposed scratch, (128, 16)."""
  expect(column_past_the_end, [S((16, 128), F32)], mg.IndexOutOfBoundsError, "v[:, 128]",
         "index 128 is out of range for axis 1 of v (16, 128)", hint="indices of axis 1 run from -128 to 127")


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def index_mistakes(x, out, *, kind: ml.constexpr):
  v = ml.cumsum(x[...])
  f = x[3]
  i = ml.program_id(0)
  if kind == "mask":
    out[...] = v[v > 0]
  elif kind == "tensor":
    out[...] = v[ml.arange(128), None].reshape(128)      # (v[ml.arange(128)] gathers since probe 45f)
  elif kind == "float":
    out[0] = v[f]
  elif kind == "window":
    out[...] = v[i:i + 128]
  else:
    out[0] = v[1, 2]


@pytest.mark.parametrize("kind,cls,message", [
    ("mask", mg.KernelTypeError, "v[mask]: a boolean mask selects a data-dependent number of elements, and a"
                                 " register tensor has a static shape"),
    ("tensor", mg.KernelTypeError, "v is indexed by a tensor of indices in a form a register gather does not take:"
                                   " integer tensors next to each other and whole axes (v[ids], v[:, ids], v[rows,"
                                   " cols]), giving a multiple of 128 elements (a 1-D vector a multiple of 8)"),
    ("float", mg.KernelTypeError, "an index of v must be an integer, got f (float32)"),
    ("window", mg.KernelTypeError, "a window of v needs static bounds; this one starts or ends at a run-time value"),
    ("rank", mg.IndexOutOfBoundsError, "too many indices for v, a tensor of rank 1: 2"),
], ids=lambda x: x if isinstance(x, str) and len(x) < 10 else "")
def test_register_index_mistakes_say_what_is_wrong(kind, cls, message):
  at = {"mask": "v[v > 0]", "tensor": "v[ml.arange", "float": "v[f]", "window": "v[i:i", "rank": "v[1, 2]"}[kind]
  expect(index_mistakes, [S((256,), F32)], cls, at, message, kind=kind)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), F32), grid=(1,))
def swiglu_wide(x, out):
  v = x[...].astype(F32)
  d = x.shape[1] // 2
  g, u = v[:, :d], v[:, d:]
  out[...] = g * ml.sigmoid(g) * u


def test_slices_of_one_value_share_its_scratch_and_an_overflow_names_it():
  ir = swiglu_wide.typed_ir(S((8, 1024), jnp.bfloat16))
  assert ir.count("smemalloc") == 1                      # v stored once for both halves
  e = expect(swiglu_wide, [S((8, 8192), jnp.bfloat16)], mg.SmemCapacityError, "v[:, :d]",
             "the kernel's SMEM needs 262144 bytes (v scratch 256 KiB, plus barriers and alignment), more than the"
             " 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use")
  assert e.hint.startswith("use smaller tiles: the largest buffer, v scratch, is one the compiler allocates")


# ------------------------------------------------------------------ ml.concatenate
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def rotate_half(x, out):
  rows = ml.ds(ml.program_id(0) * 64, 64)
  v = x.at[rows, :][...]
  h = x.shape[1] // 2
  out.at[rows, :][...] = ml.concatenate([-v[:, h:], v[:, :h]], axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] * 2 + b.shape[0],), a.dtype), grid=(1,))
def join3(a, b, out):
  out[...] = ml.concatenate((a[...], b[...] * 2, a[...] + 1))


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16], ids=str)
def test_concatenate_matches_jnp_interpret(dtype):
  x = rand.normal(rand.key(4), (128, 256), dtype)
  np.testing.assert_array_equal(np.asarray(rotate_half(x, interpret=True), np.float32),
                                np.asarray(jnp.concatenate([-x[:, 128:], x[:, :128]], axis=1), np.float32))
  a, b = jnp.arange(128, dtype=F32).astype(dtype), jnp.arange(256, dtype=F32).astype(dtype)
  np.testing.assert_array_equal(np.asarray(join3(a, b, interpret=True), np.float32),
                                np.asarray(jnp.concatenate([a, b * 2, a + 1]), np.float32))
  spec = S((128, 256), dtype)
  assert "mosaic_gpu" in jax.export.export(jax.jit(rotate_half), platforms=["cuda"])(spec).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def concat_mistakes(x, out, *, kind: ml.constexpr):
  v = x[...]
  if kind == "rank":
    out[...] = ml.concatenate([v, v[:, 0]], axis=1)
  elif kind == "shape":
    out[...] = ml.concatenate([v[0:8], v[0:16, 0:64]], axis=0)
  elif kind == "dtype":
    out[...] = ml.concatenate([v, v.astype(jnp.int32)], axis=1)
  else:
    out[...] = ml.concatenate(v, axis=1)


@pytest.mark.parametrize("kind,cls,message", [
    ("rank", mg.ShapeMismatchError, "ml.concatenate of tensors of ranks [2, 1]: the parts need one rank"),
    ("shape", mg.ShapeMismatchError, "ml.concatenate along axis 0 of a tensor (8, 128) and a tensor (16, 64): the"
                                     " other axes differ"),
    ("dtype", mg.DtypeMismatchError, "ml.concatenate of float32 and int32 parts: one dtype for every part"),
    ("list", mg.KernelTypeError, "ml.concatenate takes a list or tuple of register tensors, got a register tensor"),
], ids=["rank", "shape", "dtype", "list"])
def test_concatenate_mistakes(kind, cls, message):
  nth = ["rank", "shape", "dtype", "list"].index(kind)
  e = expect(concat_mistakes, [S((16, 128), F32)], cls, "ml.concatenate(", message, kind=kind, nth=nth)
  assert e.hint


@pytest.mark.gpu
def test_gpu_concatenate_and_column_halves():
  x = rand.normal(rand.key(6), (128, 256), F32)
  np.testing.assert_array_equal(jax.jit(rotate_half)(x), rotate_half(x, interpret=True))
  np.testing.assert_allclose(jax.jit(swiglu)(x), swiglu(x, interpret=True), rtol=1e-6, atol=1e-6)
