"""Probe 47b (the jnp / lax surface in kernels, and jnp's type promotion). Two floats or two integers of different
dtypes were MG104 ("dtypes differ and are never converted implicitly"): a Pallas port's `v_bf16 + jnp.zeros(s,
jnp.float32)`, `x_bf16 * scale_f32` or `u8 * i8` failed where jnp computes in float32 (int16); they now compute
in jnp's dtype. jnp and lax functions ml has no namesake for (jnp.fmin, jnp.reciprocal, jnp.logical_and,
lax.clamp, lax.integer_pow, lax.convert_element_type, jnp.arange(128.0), jnp.equal, jnp.bitwise_and, ...) and
NumPy's functions of register values (np.exp(v)) were MG003 with a hint writing the form; they now compute as
that form, jnp's numbers and dtype."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _rand(shape, dtype, seed):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32), dtype)


def _ints(shape, dtype, seed, lo=-100, hi=100):
  return jnp.asarray(np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype))


def _exports(kernel, *args):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


def _same(got, want, tol=0.0):
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
  g, w = np.asarray(got.astype(F32) if got.dtype != jnp.bool_ else got), np.asarray(
      want.astype(F32) if want.dtype != jnp.bool_ else want)
  np.testing.assert_allclose(g, w, rtol=tol, atol=tol)


# ---------------------------------------------------------------- 1. two floats, two integers: jnp's promotion
def _float_mixes(a, b, h):
  """(a bfloat16, b float32, h float16): each output as jnp computes it."""
  return (a + jnp.zeros(a.shape, jnp.float32), a * b, h - a, jnp.maximum(a, b), jnp.where(a > 0, a, b),
          (a * 2 + b) * 0.5)


@mg.mgpu_kernel(out_shape=lambda a, b, h: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_float_mixes, a, b, h)))
def float_mixes(a, b, h, o0, o1, o2, o3, o4, o5):
  u, v, w = a[...], b[...], h[...]
  o0[...] = u + jnp.zeros(u.shape, jnp.float32)
  o1[...] = u * v
  o2[...] = w - u
  o3[...] = jnp.maximum(u, v)
  o4[...] = jnp.where(u > 0, u, v)
  o5[...] = (u * 2 + v) * 0.5


def test_two_float_dtypes_compute_as_jnp_promotes_them():
  args = (_rand((8, 128), BF16, 0), _rand((8, 128), F32, 1), _rand((8, 128), F16, 2))
  for got, want in zip(float_mixes(*args, interpret=True), _float_mixes(*args)):
    _same(got, want, 1e-6)
  _exports(float_mixes, *args)


def _int_mixes(s, i, u, c):
  """(s int16, i int32, u uint8, c int8)."""
  return s + i, u * c, jnp.minimum(c, i), s & i, (u - c) // 3, u.astype(jnp.uint16) + c


@mg.mgpu_kernel(out_shape=lambda *a: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_int_mixes, *a)))
def int_mixes(s, i, u, c, o0, o1, o2, o3, o4, o5):
  vs, vi, vu, vc = s[...], i[...], u[...], c[...]
  o0[...] = vs + vi
  o1[...] = vu * vc
  o2[...] = jnp.minimum(vc, vi)
  o3[...] = vs & vi
  o4[...] = (vu - vc) // 3
  o5[...] = vu.astype(jnp.uint16) + vc


def test_two_integer_dtypes_compute_as_jnp_promotes_them():
  args = (_ints(256, np.int16, 3, -30000, 30000), _ints(256, np.int32, 4, -2 ** 30, 2 ** 30),
          _ints(256, np.uint8, 5, 0, 256), _ints(256, np.int8, 6, -128, 128))
  for got, want in zip(int_mixes(*args, interpret=True), _int_mixes(*args)):
    _same(got, want)
  _exports(int_mixes, *args)


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape, F32))
def bf16_accumulated_in_f32(x, w, out):
  acc = jnp.zeros(x.shape, jnp.float32)     # Pallas's accumulator: float32, the terms bfloat16
  for k in range(3):
    acc += x[...] * w[...] * (k + 1)
  out[...] = acc


def test_a_float32_accumulator_of_bfloat16_terms_is_float32():
  x, w = _rand((8, 128), BF16, 7), _rand((8, 128), BF16, 8)
  want = jnp.zeros(x.shape, F32)
  for k in range(3):
    want += x * w * (k + 1)
  _same(bf16_accumulated_in_f32(x, w, interpret=True), want, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def scaled_into_bf16(x, s, out):
  out[...] = x[...] * s[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def half_carry_meets_f32(x, out):
  acc = ml.zeros((128,), jnp.float16)
  for i in ml.range(4):
    acc = acc + x[...].astype(jnp.float32)
  out[...] = acc


def test_the_wider_result_is_a_store_mistake_and_a_carry_keeps_its_hint():
  """bfloat16 times a float32 tile is float32 (jnp's): storing it into the bfloat16 output is MG102, with its
  conversion; a float16 loop carry meeting float32 stays MG104 (the promotion would change the carry's type from
  one trip to the next), hinting where to choose its dtype."""
  expect(scaled_into_bf16, [S((128,), BF16), S((128,), F32)], mg.StoreDtypeError, "out[...] = x[...] * s[...]",
         "cannot store x[...] * s[...] (float32) into out (GMEM, bfloat16): no implicit conversion",
         hint="convert explicitly: out[...] = (x[...] * s[...]).astype(jnp.bfloat16)")
  expect(half_carry_meets_f32, [S((128,), F16)], mg.DtypeMismatchError, "acc + x[...]",
         "+ on acc (float16) and x[...].astype(jnp.float32) (float32): dtypes differ and are never converted"
         " implicitly",
         hint="if acc is carried by a loop as float16: to compute in float32, make it float32 where it starts before"
              " the loop (e.g. ml.zeros((128,), jnp.float32)) and convert it after the loop, acc.astype(jnp.float16);"
              " to keep it float16, convert the other side: x[...].astype(jnp.float32).astype(jnp.float16)")


# ---------------------------------------------------------------- 2. jnp and lax functions ml has no namesake for
def _no_namesake(v, w, i):
  """(v, w float32, i int32): each output as jnp computes it."""
  return (jnp.fmin(v, jnp.log(w)), jnp.fmax(jnp.log(w), 0.5), jnp.reciprocal(v), jnp.reciprocal(i),
          jnp.logical_and(v > 0, i), jnp.logical_or(v > 1, w < -1), jnp.logical_not(i), jnp.logical_xor(v > 0, True),
          jax.lax.clamp(-0.5, v, 0.5), jax.lax.clamp(0, i, 7), jax.lax.integer_pow(v, 3), jax.lax.integer_pow(w, -2),
          jax.lax.convert_element_type(v, jnp.bfloat16), jax.lax.bitcast_convert_type(v, jnp.int32),
          jnp.log10(jnp.abs(v) + 1), jnp.log10(jnp.abs(i) + 1), jnp.logaddexp(v, w), jnp.logaddexp(v, -jnp.inf),
          jnp.count_nonzero(v > 0, axis=1), jnp.rint(v * 4), jnp.signbit(v), jnp.nan_to_num(jnp.log(v), nan=-1.0),
          jnp.tile(v[:4], (2, 1)), jax.lax.squeeze(v[None], (0,)), jnp.squeeze(v[:, None, :], axis=1))


@mg.mgpu_kernel(out_shape=lambda v, w, i: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_no_namesake, v, w, i)))
def no_namesake(x, y, n, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15, o16, o17, o18, o19,
                o20, o21, o22, o23, o24):
  v, w, i = x[...], y[...], n[...]
  o0[...] = jnp.fmin(v, jnp.log(w))
  o1[...] = jnp.fmax(jnp.log(w), 0.5)
  o2[...] = jnp.reciprocal(v)
  o3[...] = jnp.reciprocal(i)
  o4[...] = jnp.logical_and(v > 0, i)
  o5[...] = jnp.logical_or(v > 1, w < -1)
  o6[...] = jnp.logical_not(i)
  o7[...] = jnp.logical_xor(v > 0, True)
  o8[...] = jax.lax.clamp(-0.5, v, 0.5)
  o9[...] = jax.lax.clamp(0, i, 7)
  o10[...] = jax.lax.integer_pow(v, 3)
  o11[...] = jax.lax.integer_pow(w, -2)
  o12[...] = jax.lax.convert_element_type(v, jnp.bfloat16)
  o13[...] = jax.lax.bitcast_convert_type(v, jnp.int32)
  o14[...] = jnp.log10(jnp.abs(v) + 1)
  o15[...] = jnp.log10(jnp.abs(i) + 1)
  o16[...] = jnp.logaddexp(v, w)
  o17[...] = jnp.logaddexp(v, -jnp.inf)
  o18[...] = jnp.count_nonzero(v > 0, axis=1)
  o19[...] = jnp.rint(v * 4)
  o20[...] = jnp.signbit(v)
  o21[...] = jnp.nan_to_num(jnp.log(v), nan=-1.0)
  o22[...] = jnp.tile(v[:4], (2, 1))
  o23[...] = jax.lax.squeeze(v[None], (0,))
  o24[...] = jnp.squeeze(v[:, None, :], axis=1)


def _no_namesake_args():
  v = np.asarray(_rand((8, 128), F32, 10)).copy()
  v[0, :4] = [np.nan, -0.0, 0.0, np.inf]
  return jnp.asarray(v), _rand((8, 128), F32, 11), _ints((8, 128), np.int32, 12, -3, 4)


def test_jnp_and_lax_functions_without_an_ml_namesake_compute_as_jnp():
  args = _no_namesake_args()
  for k, (got, want) in enumerate(zip(no_namesake(*args, interpret=True), _no_namesake(*args))):
    # (libdevice-style log, log1p and exp can differ from XLA's in the last bit)
    _same(got, want, 1e-6 if k in (0, 1, 14, 15, 16, 17, 21) else 0.0)
  _exports(no_namesake, *args)


def _operators(v, i):
  return (jnp.equal(v, 0.5), jnp.greater(v, 0), jax.lax.ge(v, v * 2), jnp.bitwise_and(i, 7), jnp.left_shift(i, 2),
          jnp.right_shift(i, 1), jnp.invert(i), jnp.invert(v > 0), jnp.floor_divide(i, 3), jnp.remainder(i, 3),
          jnp.mod(v, 2.5), jax.lax.rem(i, 3), jax.lax.shift_left(i, 3))


@mg.mgpu_kernel(out_shape=lambda v, i: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_operators, v, i)))
def operators(x, n, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12):
  v, i = x[...], n[...]
  o0[...] = jnp.equal(v, 0.5)
  o1[...] = jnp.greater(v, 0)
  o2[...] = jax.lax.ge(v, v * 2)
  o3[...] = jnp.bitwise_and(i, 7)
  o4[...] = jnp.left_shift(i, 2)
  o5[...] = jnp.right_shift(i, 1)
  o6[...] = jnp.invert(i)
  o7[...] = jnp.invert(v > 0)
  o8[...] = jnp.floor_divide(i, 3)
  o9[...] = jnp.remainder(i, 3)
  o10[...] = jnp.mod(v, 2.5)
  o11[...] = jax.lax.rem(i, 3)
  o12[...] = jax.lax.shift_left(i, 3)


def test_jnp_and_lax_functions_that_are_operators_compute_as_the_operator():
  args = (_rand((256,), F32, 13), _ints((256,), np.int32, 14, -1000, 1000))
  for got, want in zip(operators(*args, interpret=True), _operators(*args)):
    _same(got, want, 1e-6)
  _exports(operators, *args)


def _more_forms(v, w, m, a):
  """(v, w float32 (8, 128), m float32 (64, 64), a float32 (64,))."""
  return (jnp.mean(v.astype(BF16), axis=-1, keepdims=True, dtype=jnp.float32), jnp.var(v, axis=1, dtype=jnp.float32),
          jax.nn.one_hot(jnp.argmax(v, axis=-1), 128), jnp.hypot(v, w), jnp.copysign(v.astype(BF16), w),
          jnp.isclose(v, w, atol=0.5), jnp.linalg.norm(v, axis=-1), jnp.outer(a, a), jnp.tril(m), jnp.triu(m, 1))


@mg.mgpu_kernel(out_shape=lambda *a: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_more_forms, *a)))
def more_forms(x, y, z, t, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9):
  v, w, m, a = x[...], y[...], z[...], t[...]
  o0[...] = jnp.mean(v.astype(BF16), axis=-1, keepdims=True, dtype=jnp.float32)
  o1[...] = jnp.var(v, axis=1, dtype=jnp.float32)
  o2[...] = jax.nn.one_hot(jnp.argmax(v, axis=-1), 128)
  o3[...] = jnp.hypot(v, w)
  o4[...] = jnp.copysign(v.astype(BF16), w)
  o5[...] = jnp.isclose(v, w, atol=0.5)
  o6[...] = jnp.linalg.norm(v, axis=-1)
  o7[...] = jnp.outer(a, a)
  o8[...] = jnp.tril(m)
  o9[...] = jnp.triu(m, 1)


def _more_forms_args():
  return _rand((8, 128), F32, 19), _rand((8, 128), F32, 20), _rand((64, 64), F32, 21), _rand((64,), F32, 22)


def test_reductions_of_a_wider_dtype_and_jnps_composite_functions_compute_as_jnp():
  args = _more_forms_args()
  for got, want in zip(more_forms(*args, interpret=True), _more_forms(*args)):
    _same(got, want, 1e-6)
  _exports(more_forms, *args)


def _dtype_rules(v, c, i):
  """(v bfloat16, c int8, i int32)."""
  return v * jnp.ones(v.shape), jnp.cumsum(c, axis=1), jax.lax.cumsum(c, axis=1), jnp.power(i, 3), jnp.power(c, 2)


@mg.mgpu_kernel(out_shape=lambda *a: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_dtype_rules, *a)))
def dtype_rules(x, y, n, o0, o1, o2, o3, o4):
  v, c, i = x[...], y[...], n[...]
  o0[...] = v * jnp.ones(v.shape)          # jnp.ones: float32, strongly typed
  o1[...] = jnp.cumsum(c, axis=1)          # int8, wrapping, as jnp's scan
  o2[...] = jax.lax.cumsum(c, axis=1)
  o3[...] = jnp.power(i, 3)                # integer power, as jnp's
  o4[...] = jnp.power(c, 2)


def test_jnp_ones_int8_scans_and_integer_powers_keep_jnps_dtypes():
  """jnp.ones(s) was a weak int (v_bf16 * it stayed bfloat16), jnp.cumsum of int8 was int32 (ml's widening sum),
  jnp.power of integers MG106 (ml.pow takes floats, its hint converting to float32)."""
  args = (_rand((8, 128), BF16, 23), _ints((8, 128), np.int8, 24, -128, 128), _ints((8, 128), np.int32, 25, -50, 50))
  for got, want in zip(dtype_rules(*args, interpret=True), _dtype_rules(*args)):
    _same(got, want)
  _exports(dtype_rules, *args)


def _lax_calls(v, i, u, c):
  """(v float32 (8, 128) with halves, i int32 (8, 128), u uint32 (256,), c int8 (256,))."""
  lax = jax.lax
  return (lax.round(v), lax.round(v, lax.RoundingMethod.TO_NEAREST_EVEN), lax.sign(v), lax.sign(i),
          lax.reduce_max(v, (1,)), lax.reduce_sum(i, axes=(0,)), lax.broadcast_in_dim(v[0], (8, 128), (1,)),
          lax.broadcast_in_dim(v[:, 3], (8, 128), (0,)), lax.is_finite(jnp.log(v)), lax.div(i, 7), lax.div(v, 4.0),
          lax.iota(jnp.int32, 128)[None, :] + i, lax.sort(v, dimension=1), lax.rev(v, (1,)),
          lax.slice(v, (0, 0), (4, 128)), lax.shift_right_logical(i, 3),
          lax.shift_right_arithmetic(u, np.uint32(5)), lax.shift_right_logical(c, np.int8(2)))


@mg.mgpu_kernel(out_shape=lambda *a: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_lax_calls, *a)))
def lax_calls(x, n, w, b, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15, o16, o17):
  v, i, u, c = x[...], n[...], w[...], b[...]
  o0[...] = jax.lax.round(v)                                  # half away from zero, lax's default
  o1[...] = jax.lax.round(v, jax.lax.RoundingMethod.TO_NEAREST_EVEN)
  o2[...] = jax.lax.sign(v)
  o3[...] = jax.lax.sign(i)
  o4[...] = jax.lax.reduce_max(v, (1,))
  o5[...] = jax.lax.reduce_sum(i, axes=(0,))
  o6[...] = jax.lax.broadcast_in_dim(v[0], (8, 128), (1,))
  o7[...] = jax.lax.broadcast_in_dim(v[:, 3], (8, 128), (0,))
  o8[...] = jax.lax.is_finite(jnp.log(v))
  o9[...] = jax.lax.div(i, 7)                                 # toward zero, C's
  o10[...] = jax.lax.div(v, 4.0)
  o11[...] = jax.lax.iota(jnp.int32, 128)[None, :] + i
  o12[...] = jax.lax.sort(v, dimension=1)
  o13[...] = jax.lax.rev(v, (1,))
  o14[...] = jax.lax.slice(v, (0, 0), (4, 128))
  o15[...] = jax.lax.shift_right_logical(i, 3)
  o16[...] = jax.lax.shift_right_arithmetic(u, np.uint32(5))
  o17[...] = jax.lax.shift_right_logical(c, np.int8(2))


def _lax_args():
  v = np.asarray(_rand((8, 128), F32, 29)) * 4
  v[0, :8] = [0.5, -0.5, 1.5, -2.5, 2.5, -0.49999997, 0.0, -0.0]
  return (jnp.asarray(v), _ints((8, 128), np.int32, 30, -2 ** 31, 2 ** 31 - 1),
          _ints(256, np.uint32, 31, 0, 2 ** 32 - 1), _ints(256, np.int8, 32, -128, 128))


def test_lax_functions_without_an_ml_namesake_compute_with_lax_meaning():
  """Each was MG003 with a hint (lax.round's hint said ml.round, which rounds halves to even: lax's default rounds
  them away from zero)."""
  args = _lax_args()
  for got, want in zip(lax_calls(*args, interpret=True), _lax_calls(*args)):
    _same(got, want)
  _exports(lax_calls, *args)


# ---------------------------------------------------------------- 3. jnp.arange of floats and steps; NumPy's functions
def _aranges(v, i):
  return (jnp.arange(128.0)[None, :] * v, jnp.arange(0, 256, 2)[None, :] + i, jnp.arange(1.0, 65.0, 0.5) * v[0],
          v * jnp.arange(128, dtype=jnp.float32), jnp.arange(10, 138)[None, :] - i, jnp.arange(8)[:, None] + i)


@mg.mgpu_kernel(out_shape=lambda v, i: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_aranges, v, i)))
def aranges(x, n, o0, o1, o2, o3, o4, o5):
  v, i = x[...], n[...]
  o0[...] = jnp.arange(128.0)[None, :] * v
  o1[...] = jnp.arange(0, 256, 2)[None, :] + i
  o2[...] = jnp.arange(1.0, 65.0, 0.5) * v[0]
  o3[...] = v * jnp.arange(128, dtype=jnp.float32)
  o4[...] = jnp.arange(10, 138)[None, :] - i
  o5[...] = jnp.arange(8)[:, None] + i


def test_jnp_arange_of_floats_and_steps_computes_jnps_values():
  args = (_rand((8, 128), F32, 15), _ints((8, 128), np.int32, 16))
  for got, want in zip(aranges(*args, interpret=True), _aranges(*args)):
    _same(got, want)
  _exports(aranges, *args)


def _numpy_calls(v, h):
  return (jnp.exp(v), jnp.maximum(h, 0), jnp.sum(v, axis=1), jnp.where(v > 0, v, 0.0), jnp.tanh(h),
          jnp.sqrt(jnp.abs(v)))


@mg.mgpu_kernel(out_shape=lambda v, h: tuple(S(o.shape, o.dtype) for o in jax.eval_shape(_numpy_calls, v, h)))
def numpy_calls(x, y, o0, o1, o2, o3, o4, o5):
  v, h = x[...], y[...]
  o0[...] = np.exp(v)
  o1[...] = np.maximum(h, 0)
  o2[...] = np.sum(v, axis=1)
  o3[...] = np.where(v > 0, v, 0.0)
  o4[...] = np.tanh(h)
  o5[...] = np.sqrt(np.abs(v))


@mg.mgpu_kernel(out_shape=lambda x: x)
def numpy_with_dtype(x, out):
  out[...] = np.exp(x[...], dtype=np.float32)


def test_numpy_functions_of_register_values_compute_as_jnps():
  args = (_rand((8, 128), F32, 17), _rand((8, 128), BF16, 18))
  for got, want in zip(numpy_calls(*args, interpret=True), _numpy_calls(*args)):
    _same(got, want, 1e-5)
  _exports(numpy_calls, *args)
  expect(numpy_with_dtype, [S((128,), F32)], mg.KernelTypeError, "np.exp(",
         "np.exp's dtype= has no counterpart in a kernel, where np.exp computes as ml.exp",
         hint="convert the operand or the result instead: ml.exp(x).astype(dtype)")


# ---------------------------------------------------------------- 4. jnp.dot, jnp.matmul and @ of SMEM reads
@mg.mgpu_kernel(out_shape=lambda q, k, v: (S((q.shape[0], v.shape[1]), F32), S((q.shape[0], k.shape[0]), q.dtype)))
def pallas_attention(q, k, v, out, scores):
  q_s, k_s, v_s = ml.smem(q.shape, q.dtype), ml.smem(k.shape, k.dtype), ml.smem(v.shape, v.dtype)
  ml.copy(q, q_s)
  ml.copy(k, k_s)
  ml.copy(v, v_s)
  s = jnp.dot(q_s[...], k_s[...].T, preferred_element_type=jnp.float32) * 0.125
  p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
  o = jnp.dot(p.astype(v.dtype), v_s[...], preferred_element_type=jnp.float32)
  out[...] = o / jnp.sum(p, axis=-1, keepdims=True)
  scores[...] = q_s[...] @ k_s[...].T          # jnp.matmul's dtype: bfloat16


def _attention(q, k, v):
  s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * 0.125
  p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
  o = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
  return o / jnp.sum(p, axis=-1, keepdims=True), q @ k.T


def _attention_args():
  return _rand((64, 64), BF16, 26), _rand((128, 64), BF16, 27), _rand((128, 64), BF16, 28)


def test_jnp_dot_and_matmul_of_smem_reads_compute_as_ml_dot():
  """Each was MG003 (the operator @: MG001) hinting ml.dot(q_s, k_s.T, preferred_element_type=...) of the buffers
  the operands are read whole from, or a register A as it is: that call, with jnp's result dtype."""
  args = _attention_args()
  for got, want in zip(pallas_attention(*args, interpret=True), _attention(*args)):
    _same(got, want, 1e-5)
  _exports(pallas_attention, *args)


@pytest.mark.gpu
def test_gpu_promotions_and_jnp_forms_match_interpret_mode():
  cases = [(float_mixes, (_rand((8, 128), BF16, 0), _rand((8, 128), F32, 1), _rand((8, 128), F16, 2))),
           (int_mixes, (_ints(256, np.int16, 3, -30000, 30000), _ints(256, np.int32, 4, -2 ** 30, 2 ** 30),
                        _ints(256, np.uint8, 5, 0, 256), _ints(256, np.int8, 6, -128, 128))),
           (no_namesake, _no_namesake_args()), (operators, (_rand((256,), F32, 13), _ints((256,), np.int32, 14))),
           (aranges, (_rand((8, 128), F32, 15), _ints((8, 128), np.int32, 16))), (more_forms, _more_forms_args()), (pallas_attention, _attention_args()),
           (lax_calls, _lax_args()),
           (dtype_rules, (_rand((8, 128), BF16, 23), _ints((8, 128), np.int8, 24, -128, 128),
                          _ints((8, 128), np.int32, 25, -50, 50))),
           (numpy_calls, (_rand((8, 128), F32, 17), _rand((8, 128), BF16, 18)))]
  for kernel, args in cases:
    for k, (got, want) in enumerate(zip(kernel(*args), kernel(*args, interpret=True))):
      # (the GPU's libdevice log, exp and tanh may differ from numpy's in the last bits; in the attention an
      # exponential an ulp apart can round p to the next bfloat16 before its product with v: 4e-3 of that term)
      _same(got, want, 2e-2 if got.dtype in (BF16, F16) else 2e-3 if kernel is pallas_attention else 1e-5)
