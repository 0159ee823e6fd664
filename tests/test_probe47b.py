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
