"""Probe 11's findings: NumPy and JAX scalars keep their dtype (jnp's strong typing), as
constants written in the kernel and as module constants; constexprs stay Python numbers."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
HALF = np.float16(0.5)
WIDE = np.float32(2.5)


def _f32_out(x, **meta):
  return S(x.shape, jnp.float32)


@mg.mgpu_kernel(out_shape=_f32_out)
def times_f32_scalar(x, out):
  out[...] = (x[...] * jnp.float32(1.001)).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=_f32_out)
def plus_i32_scalar(x, out):
  out[...] = (x[...] + jnp.int32(70000)).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=_f32_out)
def times_module_constants(x, out):
  out[...] = (x[...] * HALF).astype(jnp.float32) * WIDE


@mg.mgpu_kernel(out_shape=_f32_out)
def times_module_f32_on_f16(x, out):
  out[...] = (x[...] * WIDE).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=_f32_out)
def static_uses(x, out, *, scale: ml.constexpr):
  acc = ml.zeros((np.int32(8), x.shape[1]), jnp.float32)
  for _ in ml.static_range(jnp.int32(2)):
    acc = acc + (x[...] * scale).astype(jnp.float32)
  out[...] = acc


def test_a_numpy_scalar_of_a_wider_dtype_promotes_as_jnp_not_a_weak_number():
  # (x_f16 * jnp.float32(1.001) computed in float16, x_i16 + jnp.int32(70000) wrapped)
  x = rand.normal(rand.key(7), (8, 128), jnp.float16)
  np.testing.assert_array_equal(times_f32_scalar(x, interpret=True), x * jnp.float32(1.001))
  np.testing.assert_array_equal(times_module_f32_on_f16(x, interpret=True), x * WIDE)
  i = jnp.arange(8 * 128, dtype=jnp.int16).reshape(8, 128)
  np.testing.assert_array_equal(plus_i32_scalar(i, interpret=True), (i + jnp.int32(70000)).astype(jnp.float32))
  assert "float32" in [line for line in times_f32_scalar.typed_ir(S((8, 128), jnp.float16)).splitlines()
                       if "binary kind=mul" in line][0]
  jax.export.export(jax.jit(times_f32_scalar), platforms=["cuda"])(S((8, 128), jnp.float16))


@mg.mgpu_kernel(out_shape=_f32_out)
def u32_plus_i32(x, out):
  out[...] = (x[...] + np.int32(1)).astype(jnp.float32)


def test_a_promotion_jnp_takes_to_64_bits_is_a_dtype_mismatch():
  expect(u32_plus_i32, [S((8, 128), jnp.uint32)], mg.DtypeMismatchError, "x[...] + np.int32(1)",
         "+ on x[...] (uint32) and the int32 scalar 1: a NumPy or JAX scalar keeps its dtype, and jnp"
         " computes these two in int64, which is not implicit here",
         hint="write the Python number 1 to compute in uint32, or convert the value: x[...].astype(jnp.int64)")


def test_numpy_scalars_of_the_same_dtype_and_in_static_places_work():
  x = rand.normal(rand.key(0), (8, 128), jnp.float16)
  got = times_module_constants(x, interpret=True)
  np.testing.assert_allclose(got, (x * HALF).astype(jnp.float32) * WIDE, rtol=1e-6)
  # shapes and static loop counts, and a NumPy constexpr (a Python number: x's dtype)
  got = static_uses(x, scale=np.float32(3.0), interpret=True)
  np.testing.assert_allclose(got, 2 * (x * 3).astype(jnp.float32), rtol=1e-6)
  jax.export.export(jax.jit(lambda x: static_uses(x, scale=np.float32(3.0))), platforms=["cuda"])(
      S(x.shape, x.dtype))


@mg.mgpu_kernel(out_shape=_f32_out)
def narrow_scalars(x, out):
  out[...] = x[...] * np.float16(0.5) + np.int64(3) + jnp.int8(1)


def test_scalars_jnp_would_not_widen_the_value_by_are_constants_of_its_dtype():
  # float32 with a float16, an int64 (int32 without x64) and an int8 scalar: float32 in jnp too
  x = rand.normal(rand.key(1), (8, 128), jnp.float32)
  np.testing.assert_allclose(narrow_scalars(x, interpret=True),
                             x * np.float16(0.5) + np.int64(3) + jnp.int8(1), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float16))
def where_typed(x, out):
  out[...] = ml.where(x[...] > 0, jnp.float16(1.5), jnp.float16(-1.5))


def test_where_between_two_numpy_scalars_of_one_dtype_takes_that_dtype():
  assert "float16" in [line for line in where_typed.typed_ir(S((8, 128), jnp.float32)).splitlines()
                       if "= where" in line][0]
  x = rand.normal(rand.key(2), (8, 128), jnp.float32)
  np.testing.assert_array_equal(where_typed(x, interpret=True), jnp.where(x > 0, jnp.float16(1.5), jnp.float16(-1.5)))


J_HALF = jnp.float32(0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def jnp_scalars(x, out):
  out[...] = x[...] * jnp.float32(0.5) * (1.0 / jnp.sqrt(x.shape[1])) * J_HALF


def test_jnp_scalars_in_a_kernel_work_under_jit_and_export():
  # (under jax.jit the static call jnp.sqrt(128) was a tracer: an internal error; a module-level
  # jnp.float32 was "cannot take a Python ArrayImpl")
  x = rand.normal(rand.key(4), (8, 128), jnp.float32)
  want = x * 0.5 * (1.0 / np.sqrt(128)) * 0.5
  np.testing.assert_allclose(jax.jit(lambda x: jnp_scalars(x, interpret=True))(x), want, rtol=1e-6)
  jax.export.export(jax.jit(jnp_scalars), platforms=["cuda"])(S((8, 128), jnp.float32))
  h = x.astype(jnp.float16)        # float16 values meet float32 scalars: float32, as in jnp
  np.testing.assert_allclose(jnp_scalars(h.astype(jnp.float32), interpret=True),
                             h.astype(jnp.float32) * 0.5 * (1.0 / np.sqrt(128)) * 0.5, rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def thresholds(x, out):
  out[...] = ((x[...] > np.float32(0.0)) & (x[...] < np.float32(1.5))).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def inexact_threshold(x, out):
  out[...] = (x[...] > np.float32(0.1)).astype(jnp.int8)


def test_comparisons_with_typed_scalars_give_jnps_booleans():
  # thresholds the bfloat16 values hold exactly compare in bfloat16 (the same booleans); 0.1
  # does not fit: the values compare in float32, as jnp does
  x = rand.normal(rand.key(5), (8, 128), jnp.bfloat16)
  want = ((x > np.float32(0.0)) & (x < np.float32(1.5))).astype(jnp.int8)
  np.testing.assert_array_equal(thresholds(x, interpret=True), want)
  assert "compare kind=gt lhs=%" in thresholds.typed_ir(S((8, 128), jnp.bfloat16))
  np.testing.assert_array_equal(inexact_threshold(x, interpret=True), (x > np.float32(0.1)).astype(jnp.int8))
