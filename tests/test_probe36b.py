"""Probe 36b (a numerics audit of special values and integer edge cases, op by op, against jnp):
NaN, +-inf, -0.0 and subnormals through the elementwise ops, reductions, scans and sorts, casts,
integer division and shifts, in interpret mode and (marked gpu) on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _same_bits(got, want):
  """Equal values, NaN where NaN, and the same sign of zero."""
  g, w = np.asarray(got).astype(np.float64), np.asarray(want).astype(np.float64)
  assert g.shape == w.shape, (g.shape, w.shape)
  np.testing.assert_array_equal(np.isnan(g), np.isnan(w))
  ok = ~np.isnan(w)
  np.testing.assert_array_equal(g[ok], w[ok])
  np.testing.assert_array_equal(np.signbit(g[ok]), np.signbit(w[ok]))


# ---------------------------------------------------------------- the sign of a zero sum
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_sums(x, out):
  out[...] = ml.sum(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def column_sums(x, out):
  out[...] = ml.sum(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def total(x, out):
  out[0] = ml.sum(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), block=256)
def row_means_two_warpgroups(x, out):
  out[...] = ml.mean(x[...], axis=1)


def _zeros(shape, dtype=F32):
  """-0.0 everywhere but +0.0 in the first of the last rows (a sum of both signs is +0.0)."""
  x = np.full(shape, -0.0, np.float32)
  x[-1, 0] = 0.0
  return jnp.asarray(x, dtype)


def test_a_sum_of_one_element_keeps_its_sign_of_zero_as_jnp():
  """Interpret mode summed a (128, 1) tile's rows with numpy, whose sum of a single -0.0 is +0.0,
  where jnp's sum (and the GPU's, which moves nothing for an axis of one element) is the element."""
  x = _zeros((128, 1))
  _same_bits(row_sums(x, interpret=True), jnp.sum(x, axis=1))


@pytest.mark.parametrize("kernel,ref", [(row_sums, lambda x: jnp.sum(x, axis=1)),
                                        (column_sums, lambda x: jnp.sum(x, axis=0)),
                                        (total, lambda x: jnp.sum(x)[None]),
                                        (row_means_two_warpgroups, lambda x: jnp.mean(x, axis=1))])
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_a_sum_of_negative_zeros_is_positive_zero_in_interpret_mode_as_jnp(kernel, ref, dtype):
  x = _zeros((8, 128), dtype)
  _same_bits(kernel(x, interpret=True), ref(x))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [row_sums, column_sums, total, row_means_two_warpgroups])
@pytest.mark.parametrize("dtype", [F32, jnp.float16, jnp.bfloat16])
def test_gpu_a_sum_of_negative_zeros_is_positive_zero_as_interpret_mode(kernel, dtype):
  """Mosaic GPU's reduction combines the elements alone (no +0.0 init value, as XLA's): a row of -0.0
  summed to -0.0 on the GPU; the lowering adds +0.0 to every float sum of more than one element."""
  x = _zeros((8, 128), dtype)
  _same_bits(jax.jit(kernel)(x), kernel(x, interpret=True))
  y = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), dtype)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(y), np.float32),
                             np.asarray(kernel(y, interpret=True), np.float32), rtol=2e-2, atol=1e-3)
  one = _zeros((128, 1), dtype)
  _same_bits(jax.jit(row_sums)(one), row_sums(one, interpret=True))


# ---------------------------------------------------------------- jnp's numerics functions ml lacks
@mg.mgpu_kernel(out_shape=lambda x, y: S(x.shape, jnp.bool_))
def close(x, y, out):
  a = x[...]
  b = y[...]
  out[...] = ml.isclose(a, b)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def nan_means(x, out):
  v = x[...]
  out[...] = ml.nanmean(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def nan_argmaxes(x, out):
  v = x[...]
  out[...] = ml.nanargmax(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def spans(x, out):
  v = x[...]
  out[...] = ml.ptp(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def inverse_tanh(x, out):
  a = x[...]
  out[...] = ml.arctanh(a)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def medians(x, out):
  out[...] = ml.median(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def to_radians(x, out):
  a = x[...]
  out[...] = ml.deg2rad(a)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def log_add_exp2(x, y, out):
  a = x[...]
  b = y[...]
  out[...] = ml.logaddexp2(a, b)


# what the hints write, followed
@mg.mgpu_kernel(out_shape=lambda x, y: S(x.shape, jnp.bool_))
def close_followed(x, y, out):
  a = x[...]
  b = y[...]
  out[...] = (a == b) | (ml.abs(a - b) <= 1e-08 + 1e-05 * ml.abs(b))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def nan_means_followed(x, out):
  v = x[...]
  out[...] = ml.sum(ml.where(v != v, 0.0, v), axis=1) / ml.sum(v == v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def nan_argmaxes_followed(x, out):
  v = x[...]
  out[...] = ml.argmax(ml.where(v != v, float('-inf'), v), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def spans_followed(x, out):
  v = x[...]
  out[...] = ml.max(v, axis=1) - ml.min(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def medians_followed(x, out):
  s = ml.sort(x[...])
  n = x.shape[1]
  out[...] = (s[:, n // 2 - 1] + s[:, n // 2]) / 2


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def log_add_exp2_followed(x, y, out):
  a = x[...]
  b = y[...]
  out[...] = ml.where(a == b, a + 1.0, ml.maximum(a, b) + ml.log2(1 + ml.exp2(-ml.abs(a - b))))


def _rows():
  rng = np.random.default_rng(36)
  x = rng.standard_normal((8, 128)).astype(np.float32)
  x[1, 3] = np.nan
  x[2, ::2] = np.nan
  x[4, 0] = np.inf
  y = x + rng.standard_normal((8, 128)).astype(np.float32) * 1e-6
  y[4, 0] = np.inf
  y[5, 5] = x[5, 5] = 0.0
  return jnp.asarray(x), jnp.asarray(y)


def test_jnp_numerics_functions_ml_lacks_say_what_to_write_with_the_calls_operands():
  """They said "did you mean ml.cos?" (isclose), "check the spelling" (nanmean, nanargmax, ptp, arctanh,
  median, deg2rad) or named the reduction ml.logsumexp for the elementwise logaddexp2."""
  x, y = S((8, 128), F32), S((8, 128), F32)
  expect(close, [x, y], mg.UnknownNameError, "ml.isclose", "ml has no attribute 'isclose'",
         hint="no ml.isclose: write (a == b) | (ml.abs(a - b) <= 1e-08 + 1e-05 * ml.abs(b)) (jnp.isclose's"
              " default tolerances; equal infinities are close, NaN never)")
  expect(nan_means, [x], mg.UnknownNameError, "ml.nanmean", "ml has no attribute 'nanmean'",
         hint="no ml.nanmean: write ml.sum(ml.where(v != v, 0.0, v), axis=1) / ml.sum(v == v, axis=1) (the mean"
              " of the elements that are not NaN; NaN where all are, as jnp.nanmean)")
  expect(nan_argmaxes, [x], mg.UnknownNameError, "ml.nanargmax", "ml has no attribute 'nanargmax'",
         hint="no ml.nanargmax: write ml.argmax(ml.where(v != v, float('-inf'), v), axis=1) (NaN ranked lowest;"
              " where every element is NaN this gives 0, jnp.nanargmax -1)")
  expect(spans, [x], mg.UnknownNameError, "ml.ptp", "ml has no attribute 'ptp'",
         hint="no ml.ptp: write ml.max(v, axis=1) - ml.min(v, axis=1)")
  expect(inverse_tanh, [x], mg.UnknownNameError, "ml.arctanh", "ml has no attribute 'arctanh'",
         hint="no ml.arctanh (nor ml.atanh): jnp.atanh(a) (jnp's form, accurate near 0 too; also"
              " ml.libdevice.atanh(a))")        # (session 60: it wrote 0.5 * ml.log((1 + a) / (1 - a)))
  e = expect(medians, [x], mg.UnknownNameError, "ml.median", "ml has no attribute 'median'")
  assert e.hint.startswith("no ml.median: sort the rows, s = ml.sort(v)") and "(s[:, n // 2 - 1] + s[:, n // 2]) / 2" in e.hint
  expect(to_radians, [x], mg.UnknownNameError, "ml.deg2rad", "ml has no attribute 'deg2rad'",
         hint="no ml.deg2rad: write a * 0.017453292519943295 (pi / 180)")
  expect(log_add_exp2, [x, y], mg.UnknownNameError, "ml.logaddexp2", "ml has no attribute 'logaddexp2'",
         hint="no ml.logaddexp2: write ml.where(a == b, a + 1.0, ml.maximum(a, b) + ml.log2(1 + ml.exp2(-ml.abs(a -"
              " b)))) (equal operands apart: inf and inf give inf, as jnp.logaddexp2)")


def test_the_numerics_hints_followed_compute_what_jnp_does():
  x, y = _rows()
  np.testing.assert_array_equal(close_followed(x, y, interpret=True), jnp.isclose(x, y))
  np.testing.assert_allclose(nan_means_followed(x, interpret=True), jnp.nanmean(x, axis=1), rtol=1e-6)
  rows = jnp.asarray(np.delete(np.asarray(x), 3, axis=0))
  np.testing.assert_array_equal(nan_argmaxes_followed(rows, interpret=True), jnp.nanargmax(rows, axis=1))
  _same_bits(spans_followed(x, interpret=True), jnp.ptp(x, axis=1))
  clean = jnp.nan_to_num(x, posinf=0.0)
  np.testing.assert_array_equal(medians_followed(clean, interpret=True), jnp.median(clean, axis=1))
  big = jnp.asarray(np.where(np.isnan(np.asarray(x)), 3.0, np.asarray(x)))
  np.testing.assert_allclose(log_add_exp2_followed(big, jnp.where(jnp.isnan(y), 3.0, y), interpret=True),
                             jnp.logaddexp2(big, jnp.where(jnp.isnan(y), 3.0, y)), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, y: S(x.shape, jnp.bool_))
def jnp_close(x, y, out):
  a = x[...]
  b = y[...]
  out[...] = jnp.isclose(a, b)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def jnp_nan_means(x, out):
  v = x[...]
  out[...] = jnp.nanmean(v, axis=0)


def test_jnp_numerics_functions_called_on_register_values_get_the_same_hints():
  """They said "decorate a helper of your own with @ml.inline" (MG003), a helper nobody has; both compute now."""
  a, b = _rows()          # (jnp.isclose computes since probe 47b, as jax's own: inf and -inf are not close)
  np.testing.assert_array_equal(np.asarray(jnp_close(a, b, interpret=True)), np.asarray(jnp.isclose(a, b)))
  # (jnp.nanmean of register values computes since probe 47h: frontend/jnp_stats.py)
  rows, _ = _rows()
  np.testing.assert_allclose(jnp_nan_means(rows, interpret=True), jnp.nanmean(rows, axis=0), rtol=1e-6)


# ---------------------------------------------------------------- a float times a boolean mask
@mg.mgpu_kernel(out_shape=lambda x: x)
def relu_by_mask(x, out):
  a = x[...]
  out[...] = a * (a > 0)


@mg.mgpu_kernel(out_shape=lambda x, m: x)
def masked(x, m, out):
  out[...] = m[...] * x[...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x, m: x)
def masked_rows(x, m, out):
  out[...] = x[...] * m[...][:, None]


@mg.mgpu_kernel(out_shape=lambda x: x)
def relu_by_mask_scalars(x, out):
  for i in ml.static_range(8):
    s = x[i]
    out[i] = s * (s > 0)


def _specials(shape, dtype):
  v = np.resize(np.array([np.nan, -np.inf, -1.0, 2.0, np.inf, -0.0, 0.5, -3.0], np.float32), shape)
  return jnp.asarray(v, dtype)


@pytest.mark.parametrize("dtype", [F32, jnp.float16])
def test_a_float_times_a_boolean_mask_of_its_shape_is_jnps_select(dtype):
  """jnp's x * (x > 0) is +0.0 where the mask is off, NaN and -inf included (XLA rewrites the product of a
  converted boolean into a select); the kernel multiplied, giving NaN and -0.0 there."""
  x = _specials((8, 128), dtype)
  _same_bits(relu_by_mask(x, interpret=True), x * (x > 0))
  m = jnp.asarray(np.random.default_rng(1).random((8, 128)) > 0.5)
  _same_bits(masked(x, m, interpret=True), m * x * 2.0)
  rows = jnp.asarray([True, False] * 4)     # broadcast: jnp converts first, and multiplies
  _same_bits(masked_rows(x, rows, interpret=True), x * rows[:, None])
  s = x[0, :8]               # run-time scalars: a MG900 (the product's shape is None) while it was written
  _same_bits(relu_by_mask_scalars(s, interpret=True), s * (s > 0))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.float16, jnp.bfloat16])
def test_gpu_a_float_times_a_boolean_mask_matches_interpret_mode(dtype):
  x = _specials((8, 128), dtype)
  m = jnp.asarray(np.random.default_rng(1).random((8, 128)) > 0.5)
  _same_bits(jax.jit(relu_by_mask)(x), relu_by_mask(x, interpret=True))
  _same_bits(jax.jit(masked)(x, m), masked(x, m, interpret=True))
  _same_bits(jax.jit(masked)(x, m), jax.jit(lambda x, m: m * x * 2.0)(x, m))
  rows = jnp.asarray([True, False] * 4)
  _same_bits(jax.jit(masked_rows)(x, rows), masked_rows(x, rows, interpret=True))
  _same_bits(jax.jit(relu_by_mask_scalars)(x[0, :8]), relu_by_mask_scalars(x[0, :8], interpret=True))
