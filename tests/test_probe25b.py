"""Probe 25b (helpers writing reductions, convolutions and data-dependent kernels): messages blamed
on the wrong line, hints that describe another operation or that fail when followed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- B1: a keepdims full reduction used again
@mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((), F32), S((1, 1), F32), S((), F32)))
def keepdims_again(x, a, b, c, d):
  t = ml.sum(x[...], keepdims=True)
  a[...] = ml.max(t)
  b[...] = t[0, 0] * 2
  c[...] = ml.mean(t, axis=1, keepdims=True) + 1
  d[...] = ml.min(ml.sum(t, axis=0))


def test_a_keepdims_full_reduction_reduces_again_and_indexes_to_its_scalar():
  # ml.max(t) of t = ml.sum(x, keepdims=True) was MG204 at t's line ("t has shape (1, 1): register
  # tensors need a multiple of 128 elements"), as was t[0, 0]; one element reduces to itself
  x = rand.normal(rand.key(0), (16, 128), F32)
  s = jnp.sum(x, keepdims=True)
  a, b, c, d = keepdims_again(x, interpret=True)
  np.testing.assert_allclose(a, jnp.max(s), rtol=1e-5)
  np.testing.assert_allclose(b, s[0, 0] * 2, rtol=1e-5)
  np.testing.assert_allclose(c, jnp.mean(s, axis=1, keepdims=True) + 1, rtol=1e-5)
  np.testing.assert_allclose(d, jnp.min(jnp.sum(s, axis=0)), rtol=1e-5)
  _export(lambda x: keepdims_again(x)[0], S((16, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), F32))
def keepdims_carried(x, out):
  t = ml.zeros((1, 1), F32)
  for c in range(x.shape[0] // 8):
    t = t + ml.sum(x.at[ml.ds(c * 8, 8)][...], keepdims=True)
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), F32))
def scalar_carried(x, out):
  t = 0.0
  for c in range(x.shape[0] // 8):
    t = t + ml.sum(x.at[ml.ds(c * 8, 8)][...])
  out[...] = t


def test_a_loop_carrying_a_one_element_tensor_carries_its_element():
  # It was MG204 at the loop with a hint to carry a scalar; since probe 48a the loop carries the element itself
  # (frontend/small_carries.py), as the hint wrote it by hand.
  x = rand.normal(rand.key(1), (16, 128), F32)
  np.testing.assert_allclose(keepdims_carried(x, interpret=True), jnp.sum(x, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(scalar_carried(x, interpret=True), jnp.sum(x, keepdims=True), rtol=1e-5)
  _export(keepdims_carried, S((16, 128), F32))


# ---------------------------------------------------------------- B2: a window of an empty dimension
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def masked_row_sums(x, out):
  cols = ml.arange(128)
  v = x.at[:, ml.ds(0, 128)].load(mask=cols[None, :] < x.shape[1], other=0.0)
  out[...] = ml.sum(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((128,), F32))
def gather_empty(t, ids, out):
  out[...] = t[ids[...], 0]


def test_a_window_of_an_empty_dimension_hints_the_empty_case_outside_the_kernel():
  # the hint was the bare fact "dimension 1 of x has size 0"
  hint = ("x is empty along dimension 1 in this call: handle that case outside the kernel (when x.shape[1] == 0,"
          " make the outputs there, e.g. with jnp.zeros) and call the kernel only on non-empty arrays")
  expect(masked_row_sums, [S((8, 0), F32)], mg.IndexOutOfBoundsError, "x.at[:, ml.ds(0, 128)]",
         "ml.ds(0, 128) is out of bounds for dimension 1 of x (size 0)", hint=hint)

  def row_sums(x):                        # the hint, followed
    return jnp.zeros((x.shape[0],), F32) if x.shape[1] == 0 else masked_row_sums(x, interpret=True)
  np.testing.assert_array_equal(row_sums(jnp.ones((8, 0), F32)), np.zeros(8))
  np.testing.assert_array_equal(row_sums(jnp.ones((8, 100), F32)), np.full(8, 100.0))
  _export(masked_row_sums, S((8, 100), F32))
  e = expect(gather_empty, [S((4, 0), F32), S((128,), jnp.int32)], mg.IndexOutOfBoundsError, "t[ids[...], 0]",
             "index 0 is out of bounds for dimension 1 of t (size 0)")
  assert e.hint.startswith("t is empty along dimension 1 in this call: handle that case outside the kernel")


# ---------------------------------------------------------------- B3: a shifted window of a tiled buffer
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], 64), F32), grid=lambda x, w: (x.shape[0] // 64,))
def conv_rows(x, w, out):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 128)), ml.smem((128, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.static_range(3):
    ml.copy(x.at[ml.ds(i * 64 + k - 1, 64), :], a_s)
    ml.copy(w.at[k], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64), :][...] = acc


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], 64), F32), grid=lambda x, w: (x.shape[0] // 64,))
def conv_rows_split(x, w, out):
  i = ml.program_id(0)
  a_s0, a_s1, b_s = ml.smem((64, 64)), ml.smem((64, 64)), ml.smem((128, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.static_range(3):
    ml.copy(x.at[ml.ds(i * 64 + k - 1, 64), ml.ds(0, 64)], a_s0)
    ml.copy(x.at[ml.ds(i * 64 + k - 1, 64), ml.ds(64, 64)], a_s1)
    ml.copy(w.at[k], b_s)
    acc = ml.dot(a_s0, b_s.at[ml.ds(0, 64)], acc)
    acc = ml.dot(a_s1, b_s.at[ml.ds(64, 64)], acc)
  out.at[ml.ds(i * 64, 64), :][...] = acc


def test_a_window_shown_off_the_tile_rows_hints_buffers_one_tile_wide_not_multiple_of():
  # the hint offered ml.ds(ml.multiple_of(start, 8), 64) for a start the message shows is -1 in
  # some program: followed, interpret mode refuses the promise (MG950). Since probe 46c a load from a row
  # inside a tile goes a row of tiles a TMA: the kernel computes as written, as the hint's split still does.
  x = rand.normal(rand.key(2), (128, 128), BF16)
  w = (rand.normal(rand.key(3), (3, 128, 64), F32) * 0.1).astype(BF16)
  xp = jnp.pad(x.astype(F32), ((1, 1), (0, 0)))
  want = sum(xp[k:k + 128] @ w[k].astype(F32) for k in range(3))
  np.testing.assert_allclose(conv_rows(x, w, interpret=True), want, rtol=2e-2, atol=2e-2)
  _export(conv_rows, S((128, 128), BF16), S((3, 128, 64), BF16))
  np.testing.assert_allclose(conv_rows_split(x, w, interpret=True), want, rtol=2e-2, atol=2e-2)
  _export(conv_rows_split, S((128, 128), BF16), S((3, 128, 64), BF16))


# ---------------------------------------------------------------- B5: 16-bit atomic max and min
@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype), grid=lambda x: (x.shape[0] // 128,))
def col_extreme(x, out):
  i = ml.program_id(0)
  ml.atomic_max(out.at[:], x.at[ml.ds(i * 128, 128)][...])


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype), grid=lambda x: (x.shape[0] // 128,))
def col_least(x, out):
  i = ml.program_id(0)
  ml.atomic_min(out.at[:], x.at[ml.ds(i * 128, 128)][...])


@pytest.mark.parametrize("kernel,kind", [(col_extreme, "max"), (col_least, "min")])
@pytest.mark.parametrize("dtype", [BF16, jnp.float16])
def test_a_16_bit_atomic_max_or_min_hints_a_float32_output(kernel, kind, dtype):
  # (the hint ended "or keep the output float32 (its atomics take any shape, as ml.atomic_add does)" when
  # float32 atomic max and min were MG106; since probe 39c they work, element by element; since probe 56b the
  # 16-bit max or min of a tensor held singly works too, a loop of atom.cas.b16 an element, where it was MG204)
  x = np.asarray(rand.normal(rand.key(5), (512,), F32)).astype(dtype)
  want = (np.max if kind == "max" else np.min)(np.asarray(x, np.float32).reshape(4, 128), axis=0)
  np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True), np.float32), want)
  _export(kernel, S((512,), dtype))


# ---------------------------------------------------------------- B6: a scatter of narrow rows
@mg.mgpu_kernel(out_shape=lambda g, ids: S((10, g.shape[1]), g.dtype), grid=lambda g, ids: (g.shape[0] // 64,))
def scatter_rows(g, ids, out):
  i = ml.program_id(0)
  idx = ids.at[ml.ds(i * 64, 64)][...]
  ml.atomic_add(out.at[idx, :], g.at[ml.ds(i * 64, 64), :][...])


@mg.mgpu_kernel(out_shape=lambda g, ids: S((10, g.shape[1]), g.dtype), grid=lambda g, ids: (g.shape[0] // 64,))
def scatter_rows_32(g, ids, out):        # the hint, followed (up to 32 columns)
  i = ml.program_id(0)
  idx = ids.at[ml.ds(i * 64, 64)][...]
  v = g.at[ml.ds(i * 64, 64), ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < g.shape[1], other=0)
  ml.atomic_add(out.at[idx[:, None], ml.arange(32)[None, :]], v)


@mg.mgpu_kernel(out_shape=lambda g, ids: S((10, g.shape[1]), g.dtype), grid=lambda g, ids: (g.shape[0] // 64,))
def scatter_rows_by_32(g, ids, out):     # the hint, followed (wider rows)
  i = ml.program_id(0)
  idx = ids.at[ml.ds(i * 64, 64)][...]
  for c in ml.static_range(0, g.shape[1], 32):
    v = g.at[ml.ds(i * 64, 64), ml.ds(c, 32)].load(mask=(c + ml.arange(32))[None, :] < g.shape[1], other=0)
    ml.atomic_add(out.at[idx[:, None], (c + ml.arange(32))[None, :]], v)


@pytest.mark.parametrize("n", [6, 36])
def test_a_scatter_of_narrow_rows_compiles_and_the_old_hints_32_column_scatter_works(n):
  builds(scatter_rows, S((128, n), F32), S((128,), jnp.int32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)
  g = rand.normal(rand.key(4), (128, n), F32)
  ids = rand.randint(rand.key(5), (128,), 0, 10)
  kernel = scatter_rows_32 if n < 32 else scatter_rows_by_32
  np.testing.assert_allclose(kernel(g, ids, interpret=True), jnp.zeros((10, n)).at[ids].add(g), atol=1e-5)
  _export(kernel, S((128, n), F32), S((128,), jnp.int32))


# ---------------------------------------------------------------- B7: slices with run-time bounds
@mg.mgpu_kernel(out_shape=lambda x, l: x, grid=lambda x, l: (x.shape[0],))
def prefix(x, l, out):
  i = ml.program_id(0)
  out.at[i, :l[i]][...] = x.at[i, :l[i]][...]


@mg.mgpu_kernel(out_shape=lambda x, l, dst: dst, grid=lambda x, l, dst: (x.shape[0],), input_output_aliases={2: 0})
def prefix_masked(x, l, dst, out):       # the hint, followed (into a destination passed in)
  i = ml.program_id(0)
  v = x.at[i, ml.ds(0, 128)].load(mask=ml.arange(128) < l[i], other=0)
  out.at[i, ml.ds(0, 128)].store(v, mask=ml.arange(128) < l[i])


@mg.mgpu_kernel(out_shape=lambda x, s: S((x.shape[0], 64), x.dtype), grid=lambda x, s: (x.shape[0],))
def from_start(x, s, out):
  i = ml.program_id(0)
  out.at[i][...] = x.at[i, s[i]:][...]


def test_a_slice_with_a_run_time_stop_hints_a_fixed_window_and_a_mask_in_the_users_names():
  # the hint was the canned x.at[ml.ds(i * 128, 128)] (another axis; the run-time length ignored)
  expect(prefix, [S((8, 128), F32), S((8,), jnp.int32)], mg.KernelTypeError, "x.at[i, :l[i]]",
         "slice :l[i] of dimension 1 of x has a run-time stop: a window's size is fixed when the kernel is compiled",
         hint="take a window of fixed size and mask it to the run-time length: v = x.at[i, ml.ds(0,"
              " 128)].load(mask=ml.arange(128) < l[i], other=0)")     # (x is an input: no store, probe 28e)
  x = rand.normal(rand.key(6), (8, 128), F32)
  l = jnp.array([0, 1, 5, 64, 127, 128, 3, 100], jnp.int32)
  got = prefix_masked(x, l, jnp.full((8, 128), -1.0, F32), interpret=True)
  np.testing.assert_array_equal(got, jnp.where(jnp.arange(128)[None, :] < l[:, None], x, -1.0))
  _export(prefix_masked, S((8, 128), F32), S((8,), jnp.int32), S((8, 128), F32))
  expect(from_start, [S((8, 128), F32), S((8,), jnp.int32)], mg.KernelTypeError, "x.at[i, s[i]:]",
         "slice bounds must be static ints: the start of s[i]: in dimension 1 of x is a run-time value, so its length,"
         " 128 - s[i], is one too: a window's size is fixed when the kernel is compiled",
         hint="take a window of the 128 elements it has at most and mask it to those inside: v = x.at[i, ml.ds(s[i],"
              " 128)].load(mask=ml.arange(128) < 128 - s[i], other=0) (the elements past them are 0); for a window of"
              " static size at a run-time start, x.at[i, ml.ds(s[i], size)]")
