"""Bool arrays as kernel inputs and outputs (they were MG106, with a hint to use int8).

jax keeps a bool array as one byte an element; so does the kernel: every bool ref (a GMEM
argument or result, an SMEM buffer) is an i8 memref, a register read compares the bytes with 0
and a register write widens i1 to 0 or 1 (lowering/bool_memory.py). The custom call takes and
returns XLA's pred arrays themselves, with no conversion at the call. Interpret mode reads and
writes numpy bool arrays."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32, I32, BOOL = jnp.float32, jnp.int32, jnp.bool_


def _mask(seed, *shape, p=0.5):
  return rand.bernoulli(rand.key(seed), p, shape)


def _normal(seed, *shape):
  return rand.normal(rand.key(seed), shape, F32)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- kernels
@mg.mgpu_kernel(out_shape=lambda m, x: x)
def where_whole(m, x, out):
  out[...] = ml.where(m[...], x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_))
def positive(x, out):
  out[...] = x[...] > 0


@mg.mgpu_kernel(out_shape=lambda m, x: x, grid=lambda m, x: (ml.cdiv(x.shape[0], 128),))
def where_tail(m, x, out):
  i = ml.program_id(0)
  ok = i * 128 + ml.arange(128) < x.shape[0]
  keep = ml.load(m.at[ml.ds(i * 128, 128)], mask=ok, other=False)
  v = ml.load(x.at[ml.ds(i * 128, 128)], mask=ok, other=0.0)
  ml.store(out.at[ml.ds(i * 128, 128)], ml.where(keep, v * 2.0, -v), mask=ok)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def positive_tail(x, out):
  i = ml.program_id(0)
  ok = i * 128 + ml.arange(128) < x.shape[0]
  v = ml.load(x.at[ml.ds(i * 128, 128)], mask=ok, other=0.0)
  ml.store(out.at[ml.ds(i * 128, 128)], v > 0.25, mask=ok)


@mg.mgpu_kernel(out_shape=lambda m, x: (x, m),
                grid=lambda m, x: (ml.cdiv(x.shape[0], 64), ml.cdiv(x.shape[1], 128)))
def where_tail_2d(m, x, out, both):
  i, j = ml.program_id(0), ml.program_id(1)
  ok = ((i * 64 + ml.arange(64))[:, None] < x.shape[0]) & ((j * 128 + ml.arange(128))[None, :] < x.shape[1])
  keep = m.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)].load(mask=ok, other=False)
  v = x.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)].load(mask=ok, other=0.0)
  ml.store(out.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)], ml.where(keep, v, -1.0), mask=ok)
  ml.store(both.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)], keep & (v > 0), mask=ok)


@mg.mgpu_kernel(out_shape=lambda m: S((1,), jnp.int32))
def count(m, out):
  out[0] = ml.sum(m[...].astype(jnp.int32))


@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0],), jnp.int32))
def count_rows(m, out):
  out[...] = ml.sum(m[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda f, x: x, grid=lambda f, x: (f.shape[0],))
def flagged_rows(f, x, out):
  i = ml.program_id(0)
  if f[i]:
    out.at[i, :][...] = x.at[i, :][...] * 2.0
  else:
    out.at[i, :][...] = x.at[i, :][...]


@mg.mgpu_kernel(out_shape=lambda f, x: x)
def flag_0d(f, x, out):
  if f[...]:
    out[...] = x[...] + 1.0
  else:
    out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def scalar_flag(x, flag: ml.scalar, out):
  if flag:
    out[...] = x[...] * 2.0
  else:
    out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda m, x: x, grid=lambda m, x: (x.shape[0] // 64,))
def tma_in(m, x, out):
  i = ml.program_id(0)
  ms = ml.smem((64, 128))
  xs = ml.smem((64, 128))
  ml.copy(m.at[ml.ds(i * 64, 64), :], ms)
  ml.copy(x.at[ml.ds(i * 64, 64), :], xs)
  out.at[ml.ds(i * 64, 64), :][...] = ml.where(ms[...], xs[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_), grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def tma_out(x, out):
  i = ml.program_id(0)
  ms = ml.smem((64, 128), jnp.bool_)
  ok = (i * 64 + ml.arange(64))[:, None] < x.shape[0]
  ms[...] = x.at[ml.ds(i * 64, 64), :].load(mask=ok, other=0.0) > 0    # rows past the end: TMA drops them
  ml.copy(ms, out.at[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=lambda m: m, grid=lambda m: (ml.cdiv(m.shape[0], 64),))
def tma_invert(m, out):
  i = ml.program_id(0)
  buf = ml.smem((64, 128))                            # inferred bool
  ml.copy(m.at[ml.ds(i * 64, 64), :], buf)
  buf[...] = ~buf[...]
  ml.copy(buf, out.at[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=lambda m, x: m, input_output_aliases={0: 0})
def or_in_place(m, x, out):
  out[...] = m[...] | (x[...] > 1.0)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), jnp.bool_))
def gather_rows(t, ids, out):
  out[...] = t[ids[...], :]


@mg.mgpu_kernel(out_shape=lambda m: m)
def through_scratch(m, out):
  v = m[...]
  out[...] = v.T | ml.cummax(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] + b.shape[0],), jnp.bool_))
def joined(a, b, out):
  out[...] = ml.concatenate([a[...], b[...]], axis=0)


@mg.mgpu_kernel(out_shape=lambda m: S((2,), jnp.int32))
def element(m, out):
  v = m[...]
  out[0] = ml.where(v[3], 7, 9)
  out[1] = ml.where(m[5], 7, 9)


@mg.mgpu_kernel(out_shape=lambda m: S((1,), jnp.bool_))
def any_scalar(m, out):
  out[0] = ml.any(m[...])


@mg.mgpu_kernel(out_shape=lambda m: m)
def atomic_on_bool(m, out):
  ml.atomic_max(out.at[...], m[...])


# ---------------------------------------------------------------- interpret mode vs numpy
@pytest.mark.parametrize("shape", [(256,), (8,), (64, 128), (2, 8, 128), (64, 1)], ids=str)
def test_a_bool_input_selects(shape):
  m, x = _mask(0, *shape), _normal(1, *shape)
  np.testing.assert_array_equal(where_whole(m, x, interpret=True), np.where(m, x, 0))


@pytest.mark.parametrize("shape", [(256,), (64, 256)], ids=str)
def test_a_bool_output_holds_the_mask(shape):
  x = _normal(2, *shape)
  got = positive(x, interpret=True)
  assert got.dtype == jnp.bool_ and got.shape == shape
  np.testing.assert_array_equal(got, np.asarray(x) > 0)


@pytest.mark.parametrize("n", [1000, 129, 7], ids=str)
def test_masked_loads_and_stores_of_bool_over_a_tail(n):
  m, x = _mask(3, n), _normal(4, n)
  np.testing.assert_allclose(where_tail(m, x, interpret=True), np.where(m, 2 * x, -x), rtol=1e-6)
  np.testing.assert_array_equal(positive_tail(x, interpret=True), np.asarray(x) > 0.25)


def test_2d_masked_tails_read_and_write_bool():
  m, x = _mask(5, 100, 200), _normal(6, 100, 200)
  out, both = where_tail_2d(m, x, interpret=True)
  np.testing.assert_array_equal(out, np.where(m, x, -1))
  np.testing.assert_array_equal(both, np.asarray(m) & (np.asarray(x) > 0))


def test_counts_of_a_mask():
  m = _mask(7, 2048, p=0.3)
  assert int(count(m, interpret=True)[0]) == int(np.sum(m))
  m2 = _mask(8, 64, 128)
  np.testing.assert_array_equal(count_rows(m2, interpret=True), np.sum(m2, axis=1))


def test_bool_scalars_steer_branches():
  f, x = _mask(9, 16), _normal(10, 16, 128)
  np.testing.assert_array_equal(flagged_rows(f, x, interpret=True), np.where(np.asarray(f)[:, None], 2 * x, x))
  y = _normal(11, 256)
  for flag in (True, False):
    want = np.asarray(y) + 1 if flag else np.asarray(y)
    np.testing.assert_array_equal(flag_0d(jnp.asarray(flag), y, interpret=True), want)
    np.testing.assert_array_equal(scalar_flag(y, jnp.asarray(flag), interpret=True), np.asarray(y) * (2 if flag else 1))


def test_tma_copies_move_the_bytes_of_bool_windows():
  m, x = _mask(12, 256, 128), _normal(13, 256, 128)
  np.testing.assert_array_equal(tma_in(m, x, interpret=True), np.where(m, x, 0))
  y = _normal(14, 200, 128)                     # a ragged last window
  np.testing.assert_array_equal(tma_out(y, interpret=True), np.asarray(y) > 0)
  m2 = _mask(15, 200, 128)
  np.testing.assert_array_equal(tma_invert(m2, interpret=True), ~np.asarray(m2))


def test_a_bool_array_updated_in_place():
  m, x = _mask(16, 256), _normal(17, 256)
  np.testing.assert_array_equal(or_in_place(m, x, interpret=True), np.asarray(m) | (np.asarray(x) > 1))


def test_gathers_of_a_bool_table():
  t = _mask(18, 50, 128)
  ids = rand.randint(rand.key(19), (128,), 0, 50)
  np.testing.assert_array_equal(gather_rows(t, ids, interpret=True), np.asarray(t)[np.asarray(ids)])


def test_bool_tensors_move_through_smem_scratch_as_bytes():
  m = _mask(20, 128, 128, p=0.1)
  v = np.asarray(m)
  np.testing.assert_array_equal(through_scratch(m, interpret=True), v.T | np.logical_or.accumulate(v, axis=1))
  a, b = _mask(21, 128), _mask(22, 256)
  np.testing.assert_array_equal(joined(a, b, interpret=True), np.concatenate([a, b]))
  e = _mask(23, 128)
  np.testing.assert_array_equal(element(e, interpret=True), [7 if e[3] else 9, 7 if e[5] else 9])


def test_a_bool_scalar_stores_into_a_bool_output():
  for p in (0.0, 0.01):
    m = _mask(24, 256, p=p)
    assert bool(any_scalar(m, interpret=True)[0]) == bool(np.any(m))


def test_atomics_on_a_bool_ref_stay_an_error():
  expect(atomic_on_bool, [S((256,), BOOL)], mg.UnsupportedDtypeError, "ml.atomic_max(out.at[...], m[...])",
         "ml.atomic_max on bool is not supported in GMEM: Hopper's atomic max takes bfloat16, float16, float32,"
         " int32, int64, uint32, and 8- and 16-bit integers")


def test_vmap_of_a_bool_input():
  m, x = _mask(25, 4, 256), _normal(26, 4, 256)
  got = jax.vmap(lambda a, b: where_whole(a, b, interpret=True))(m, x)
  np.testing.assert_array_equal(got, np.where(m, x, 0))


# ---------------------------------------------------------------- the Mosaic GPU module and the call
def test_bool_refs_are_byte_memrefs_converted_in_registers():
  text = where_whole.mlir(S((256,), BOOL), S((256,), F32))
  assert "memref<256xi8>" in text and "xi1>" not in text.split("gpu.launch")[0]
  assert re.search(r"arith.cmpi ne, %\w+, %\w+ : vector<\d+xi8>", text)
  text = positive.mlir(S((256,), F32))
  assert re.search(r"arith.extui %\w+ : vector<\d+xi1> to vector<\d+xi8>", text)


def test_the_custom_call_takes_and_returns_pred_arrays_with_no_conversion():
  text = _export(or_in_place, S((256,), BOOL), S((256,), F32))
  assert re.search(r"custom_call @mosaic_gpu\w*\(%arg0, %arg1\)", text)
  assert "tensor<256xi1>" in text and "stablehlo.convert" not in text


@pytest.mark.parametrize("kernel, specs", [
    (where_tail, (S((1000,), BOOL), S((1000,), F32))), (positive_tail, (S((777,), F32),)),
    (where_tail_2d, (S((100, 200), BOOL), S((100, 200), F32))), (count, (S((2048,), BOOL),)),
    (flagged_rows, (S((16,), BOOL), S((16, 128), F32))), (flag_0d, (S((), BOOL), S((256,), F32))),
    (scalar_flag, (S((256,), F32), S((), BOOL))), (tma_in, (S((256, 128), BOOL), S((256, 128), F32))),
    (tma_out, (S((200, 128), F32),)), (tma_invert, (S((200, 128), BOOL),)),
    (gather_rows, (S((50, 128), BOOL), S((128,), I32))), (through_scratch, (S((128, 128), BOOL),)),
    (joined, (S((128,), BOOL), S((256,), BOOL))), (element, (S((128,), BOOL),)),
    (any_scalar, (S((256,), BOOL),))], ids=lambda v: getattr(v, "__name__", ""))
def test_cuda_export_builds(kernel, specs):
  builds(kernel, *specs)
  assert "mosaic_gpu" in _export(kernel, *specs)


# ---------------------------------------------------------------- on the H200
def _gpu(kernel, *args):
  return jax.jit(kernel)(*args)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256,), (64, 128), (2, 8, 128)], ids=str)
def test_gpu_where_and_bool_output(shape):
  m, x = _mask(30, *shape), _normal(31, *shape)
  np.testing.assert_array_equal(np.asarray(_gpu(where_whole, m, x)), np.where(m, x, 0))
  got = np.asarray(_gpu(positive, x))
  assert got.dtype == np.bool_
  np.testing.assert_array_equal(got, np.asarray(x) > 0)


@pytest.mark.gpu
@pytest.mark.parametrize("n", [1000, 129], ids=str)
def test_gpu_masked_tails(n):
  m, x = _mask(32, n), _normal(33, n)
  np.testing.assert_allclose(np.asarray(_gpu(where_tail, m, x)), np.where(m, 2 * x, -x), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(_gpu(positive_tail, x)), np.asarray(x) > 0.25)
  m2, x2 = _mask(34, 100, 200), _normal(35, 100, 200)
  out, both = _gpu(where_tail_2d, m2, x2)
  np.testing.assert_array_equal(np.asarray(out), np.where(m2, x2, -1))
  np.testing.assert_array_equal(np.asarray(both), np.asarray(m2) & (np.asarray(x2) > 0))


@pytest.mark.gpu
def test_gpu_counts_and_scalars():
  m = _mask(36, 2048, p=0.3)
  assert int(_gpu(count, m)[0]) == int(np.sum(m))
  m2 = _mask(37, 64, 128)
  np.testing.assert_array_equal(np.asarray(_gpu(count_rows, m2)), np.sum(m2, axis=1))
  f, x = _mask(38, 16), _normal(39, 16, 128)
  np.testing.assert_array_equal(np.asarray(_gpu(flagged_rows, f, x)), np.where(np.asarray(f)[:, None], 2 * x, x))
  y = _normal(40, 256)
  for flag in (True, False):
    np.testing.assert_array_equal(np.asarray(_gpu(flag_0d, jnp.asarray(flag), y)), np.asarray(y) + (1 if flag else 0))
  assert bool(_gpu(any_scalar, _mask(41, 256, p=0.01))[0]) == bool(np.any(_mask(41, 256, p=0.01)))


@pytest.mark.gpu
def test_gpu_tma_copies_of_bool():
  m, x = _mask(42, 256, 128), _normal(43, 256, 128)
  np.testing.assert_array_equal(np.asarray(_gpu(tma_in, m, x)), np.where(m, x, 0))
  y = _normal(44, 200, 128)
  np.testing.assert_array_equal(np.asarray(_gpu(tma_out, y)), np.asarray(y) > 0)
  m2 = _mask(45, 200, 128)
  np.testing.assert_array_equal(np.asarray(_gpu(tma_invert, m2)), ~np.asarray(m2))


@pytest.mark.gpu
def test_gpu_in_place_gather_and_scratch():
  m, x = _mask(46, 256), _normal(47, 256)
  np.testing.assert_array_equal(np.asarray(_gpu(or_in_place, m, x)), np.asarray(m) | (np.asarray(x) > 1))
  t = _mask(48, 50, 128)
  ids = rand.randint(rand.key(49), (128,), 0, 50)
  np.testing.assert_array_equal(np.asarray(_gpu(gather_rows, t, ids)), np.asarray(t)[np.asarray(ids)])
  v = np.asarray(_mask(50, 128, 128, p=0.1))
  np.testing.assert_array_equal(np.asarray(_gpu(through_scratch, jnp.asarray(v))),
                                v.T | np.logical_or.accumulate(v, axis=1))


def test_the_converting_boundary_takes_and_returns_bool_arrays():
  """The fallback for a jax whose Mosaic GPU primitive has other parameters: int8 in, bool out."""
  from mgpu_dsl.lowering.bool_memory import _converting
  seen = []

  def fn(m, x):                       # stands for the kernel built with int8 in place of bool
    seen.append(m.dtype)
    return (m * 3, x + 1)
  call = _converting(fn, (jax.ShapeDtypeStruct((5,), jnp.bool_), jax.ShapeDtypeStruct((5,), jnp.float32)))
  m = jnp.asarray([True, False, True, True, False])
  got_m, got_x = call(m, jnp.arange(5, dtype=jnp.float32))
  assert seen == [jnp.int8]
  assert got_m.dtype == jnp.bool_ and got_m.tolist() == m.tolist()
  np.testing.assert_array_equal(np.asarray(got_x), np.arange(5) + 1)


# ---------------------------------------------------------------- bool tiles through the SMEM relayout
# A (128, 1) column read row-masked holds its rows in fixed threads; flattening it moves elements
# through an SMEM scratch (frontend/relayout.py), which bool tiles could not use (MG204): the scratch
# now holds bytes, as an SMEM bool buffer does.
@mg.mgpu_kernel(out_shape=lambda m: S((m.shape[0],), jnp.bool_), grid=lambda m: (ml.cdiv(m.shape[0], 128),))
def flatten_mask_column(m, out):
  i = ml.program_id(0)
  r = i * 128 + ml.arange(128)
  v = m.at[ml.ds(i * 128, 128), :].load(mask=r[:, None] < m.shape[0], other=False)
  out.at[ml.ds(i * 128, 128)].store(v.reshape(128), mask=r < out.shape[0])


@pytest.mark.parametrize("n", [300, 128])
def test_a_bool_column_flattens_through_smem(n):
  m = _mask(n, n, 1)
  got = flatten_mask_column(m, interpret=True)
  assert got.dtype == jnp.bool_
  np.testing.assert_array_equal(got, np.asarray(m).reshape(-1))
  text = flatten_mask_column.mlir(S((n, 1), jnp.bool_))
  assert "memref<128xi8, #gpu.address_space<workgroup>>" in text      # the scratch holds bytes
  jax.export.export(jax.jit(flatten_mask_column), platforms=["cuda"])(S((n, 1), jnp.bool_))


@pytest.mark.gpu
@pytest.mark.parametrize("n", [300, 128])
def test_gpu_a_bool_column_flattens_through_smem(n):
  m = _mask(n + 1, n, 1)
  np.testing.assert_array_equal(flatten_mask_column(m), np.asarray(m).reshape(-1))
