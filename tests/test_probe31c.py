"""Probe 31c (dtype and numeric edge cases): Python bools as ml.scalar flags, 64-bit specs without
jax_enable_x64, Triton's ml.math.* spellings, and the hints for weakly typed scalars."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- a Python bool for an ml.scalar
@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def maybe_double(x, flag: ml.scalar, out):
  if flag:
    out[...] = x[...] * 2
  else:
    out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def select_by_flag(x, flag: ml.scalar, out):
  out[...] = ml.where(flag, x[...], -x[...])


def test_a_python_bool_for_an_ml_scalar_is_a_bool_flag():
  """It was MG006 ('ml.scalar values are ints or floats'): a bool is a bool scalar, as jnp.bool_(b)."""
  x = jnp.arange(128, dtype=F32)
  for flag in (True, False):
    np.testing.assert_array_equal(maybe_double(x, flag, interpret=True), x * 2 if flag else x)
    np.testing.assert_array_equal(select_by_flag(x, flag, interpret=True), x if flag else -x)
    jitted = jax.jit(lambda v, f: maybe_double(v, f, interpret=True))
    np.testing.assert_array_equal(jitted(x, flag), x * 2 if flag else x)
  assert "scalar<bool>" in maybe_double.typed_ir(S((128,), F32), True)
  maybe_double.check(S((128,), F32), False)


# ---------------------------------------------------------------- 64-bit types without jax_enable_x64
@mg.mgpu_kernel(out_shape=lambda x, n: x)
def add_n(x, n: ml.scalar, out):
  out[...] = x[...] + n


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int64))
def widen(x, out):
  out[...] = x[...].astype(jnp.int64) * 3


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def copy_same(x, out):
  out[...] = x[...]


no_x64 = pytest.mark.skipif(jax.config.jax_enable_x64, reason="x64 mode keeps 64-bit types")


@no_x64
def test_a_64_bit_spec_without_x64_is_refused_not_checked_as_32_bits():
  """S((), jnp.int64) was checked (and typed_ir shown) as an int32 kernel, silently."""
  for spec, to in ((S((), jnp.int64), "int32"), (S((), jnp.uint64), "uint32"), (S((), jnp.float64), "float32")):
    with pytest.raises(mg.SignatureError) as e:
      add_n.check(S((128,), jnp.int32), spec)
    d = np.dtype(spec.dtype).name
    assert e.value.message == (f"add_n: input 1 (n) is given as {d}, but jax_enable_x64 is off: JAX passes {d}"
                               f" arrays as {to}, so the kernel would be checked and built for {to}")
    assert e.value.hint == (f"for {d}, turn 64-bit types on: jax.config.update('jax_enable_x64', True) (before"
                            f" any array is made); else give the spec as jnp.{to}")
  add_n.check(S((128,), jnp.int32), S((), jnp.int32))      # the hint's spec builds


@no_x64
def test_an_int64_output_without_x64_is_refused():
  """out_shape asked for int64 and the kernel returned int32. (Since probe 53b it is int32 with jnp's warning for a
  dtype it does not have, as jnp.zeros(n, jnp.int_) is: tests/test_probe53b.py.)"""
  with pytest.warns(UserWarning, match="Explicitly requested dtype int64 requested in out_shape"), \
      pytest.raises(mg.StoreDtypeError):               # (the kernel's int64 values into that int32 output: MG102)
    widen.check(S((128,), jnp.int32))
  with jax.enable_x64(True):                              # with x64 it is int64, 3 * 2**31 included
    x = jnp.full((128,), 2 ** 31 - 1, jnp.int32)
    got = widen(x, interpret=True)
    assert got.dtype == jnp.int64
    np.testing.assert_array_equal(got, x.astype(jnp.int64) * 3)


@no_x64
def test_numpy_int64_values_int32_cannot_hold_are_refused_without_x64():
  """np.int64(2**40) for an ml.scalar was passed as its low 32 bits (0): x + n gave x."""
  x = jnp.arange(128, dtype=jnp.int32)
  with pytest.raises(mg.SignatureError) as e:
    add_n(x, np.int64(2 ** 40), interpret=True)
  assert e.value.message == ("add_n: input 1 (n) is a NumPy int64 scalar holding 1099511627776, which int32"
                             " cannot hold, and jax_enable_x64 is off: JAX would pass it as int32, keeping the"
                             " low 32 bits")
  with pytest.raises(mg.SignatureError, match="is a NumPy int64 array holding -8589934592"):
    add_n(np.arange(128) - 2 ** 33, 1, interpret=True)
  # values that fit are taken as JAX takes them: NumPy's default int64 arange, and an output like it
  np.testing.assert_array_equal(add_n(x, np.int64(5), interpret=True), x + 5)
  got = copy_same(np.arange(128), interpret=True)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(got, np.arange(128))


# ---------------------------------------------------------------- Triton's tl.math spellings
@mg.mgpu_kernel(out_shape=lambda x: x)
def math_exp2(x, out):
  out[...] = ml.math.exp2(x[...] * 1.4426950408889634) + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def libdevice_max(x, out):
  out[...] = ml.extra.cuda.libdevice.max(x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def math_fma(x, out):
  out[...] = ml.math.fma(x[...], 2.0, 1.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def math_pow_two_lines(x, out):
  out[...] = ml.math.pow(x[...],
                         2.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def fixed_exp2(x, out):
  out[...] = ml.exp2(x[...] * 1.4426950408889634) + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def fixed_max(x, out):
  out[...] = ml.maximum(x[...], 0.0)


def test_ml_math_names_the_ml_function_with_the_users_arguments():
  """The hint was one list for every ml.math.<f> (with ml.math.rsqrt as its example); it then named the function
  written, with its arguments, mapped where Triton's name differs (max is ml.maximum, elementwise, not the reduction
  ml.max). Since probe 48g ml.math and ml.extra.cuda.libdevice are those functions; a name ml lacks keeps its hint."""
  x = jnp.linspace(-3, 3, 128, dtype=F32)
  np.testing.assert_allclose(math_exp2(x, interpret=True), jnp.exp(x) + 1.0, rtol=1e-6)
  np.testing.assert_array_equal(libdevice_max(x, interpret=True), jnp.maximum(x, 0.0))
  np.testing.assert_allclose(math_pow_two_lines(x + 4, interpret=True), (x + 4) ** 2, rtol=1e-5)
  np.testing.assert_array_equal(math_fma(x, interpret=True), x * 2.0 + 1.0)     # ml.fma since probe 50e (x * 2 exact)
  np.testing.assert_allclose(fixed_exp2(x, interpret=True), jnp.exp(x) + 1.0, rtol=1e-6)   # the old hints' forms
  np.testing.assert_array_equal(fixed_max(x, interpret=True), jnp.maximum(x, 0.0))


# ---------------------------------------------------------------- ml.scalar parameters are not weakly typed
@mg.mgpu_kernel(out_shape=lambda x, alpha: x)
def scale_half(x, alpha: ml.scalar, out):
  out[...] = x[...] * alpha


@mg.mgpu_kernel(out_shape=lambda x, alpha: x)
def scale_half_fixed(x, alpha: ml.scalar, out):         # scale_half's hint followed
  out[...] = x[...] * alpha.astype(jnp.float16)


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def shift_by(x, n: ml.scalar, out):
  out[...] = x[...] + n


def test_an_ml_scalar_meeting_a_narrower_tensor_is_hinted_to_convert_the_scalar():
  """The hint converted the tensor (x[...].astype(jnp.float32)), so the product was float32 and its
  store into the float16 output the next error; jnp's Python number keeps float16."""
  h = jnp.linspace(-2, 2, 128, dtype=jnp.float16)
  expect(scale_half, [S((128,), jnp.float16), 0.5], mg.DtypeMismatchError, "x[...] * alpha",
         "* on x[...] (float16) and alpha (float32): dtypes differ and are never converted implicitly",
         hint="convert the scalar, alpha.astype(jnp.float16): the result stays float16, as jnp's does for a Python"
              " number (an ml.scalar is float32 here, as a Python float passed for it becomes, not weakly typed);"
              " or (x[...].astype(jnp.float32) * alpha).astype(jnp.float16) (computed in float32, the result"
              " converted back to float16)")
  np.testing.assert_array_equal(scale_half_fixed(h, 0.5, interpret=True), h * 0.5)
  # an int scalar meeting floats takes the float's dtype, as in jnp (probe 33a; it was MG104)
  x = jnp.linspace(-2, 2, 128, dtype=F32)
  np.testing.assert_array_equal(shift_by(x, 3, interpret=True), x + jnp.int32(3))
  # uint32 with an int32 scalar: no int32 alternative (it would wrap values of 2**31 or more)
  e = expect(shift_by, [S((128,), jnp.uint32), 3], mg.DtypeMismatchError, "x[...] + n",
             "+ on x[...] (uint32) and n (int32): dtypes differ and are never converted implicitly")
  assert e.hint.startswith("convert the scalar, n.astype(jnp.uint32)") and "or compute" not in e.hint


@mg.mgpu_kernel(out_shape=lambda x, n: x)
def add_n_fixed(x, n: ml.scalar, out):                  # add an int64 n to int64 x: n passed as jnp.int64(n)
  out[...] = x[...] + n


def test_an_int32_ml_scalar_meeting_int64_is_hinted_to_be_passed_as_int64():
  """The hint was n.astype(jnp.int64), which through jax.jit (x64 on) widens only the low 32 bits of
  a Python int: 2**40 added 0."""
  with jax.enable_x64(True):
    e = expect(shift_by, [S((128,), jnp.int64), 3], mg.DtypeMismatchError, "x[...] + n",
               "+ on x[...] (int64) and n (int32): dtypes differ and are never converted implicitly")
    assert e.hint.startswith("pass n as an int64 scalar, jnp.int64(n) (with jax_enable_x64)"), e.hint
    x = jnp.arange(128, dtype=jnp.int64)
    got = jax.jit(lambda v, n: add_n_fixed(v, n, interpret=True))(x, jnp.int64(2 ** 40))
    np.testing.assert_array_equal(got, x + 2 ** 40)


# ---------------------------------------------------------------- float // and %: the hint's form is not jnp's exactly
@mg.mgpu_kernel(out_shape=lambda x, y: x)
def float_floordiv(x, y, out):
  out[...] = x[...] // y[...]


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def float_floordiv_hinted(x, y, out):
  out[...] = ml.floor(x[...] / y[...])


def test_float_floor_division_is_jnps_not_the_floor_of_the_quotient():
  """Float // was MG106 with an ml.floor(x / y) hint; 1.0 // 0.1 is 9.0 in jnp (and Python) while
  ml.floor(1.0 / 0.1) is 10.0: // now computes jnp's."""
  x, y = jnp.ones((128,), F32), jnp.full((128,), 0.1, F32)
  assert float(float_floordiv(x, y, interpret=True)[0]) == float(jnp.floor_divide(x, y)[0]) == 9.0
  assert float(float_floordiv_hinted(x, y, interpret=True)[0]) == 10.0


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def clip_by(x, a: ml.scalar, out):
  out[...] = ml.maximum(x[...], -a * 2)


@mg.mgpu_kernel(out_shape=lambda x, a: x)
def clip_by_fixed(x, a: ml.scalar, out):               # clip_by's hint followed
  out[...] = ml.maximum(x[...], (-a * 2).astype(jnp.float16))


def test_a_value_computed_from_an_ml_scalar_alone_is_hinted_as_the_scalar():
  """-a * 2 of a float32 ml.scalar a has a's dtype: the hint converts it, as it does a."""
  expect(clip_by, [S((128,), jnp.float16), 0.5], mg.DtypeMismatchError, "ml.maximum(x[...], -a * 2)",
         "ml.maximum on x[...] (float16) and -a * 2 (float32): dtypes differ and are never converted implicitly",
         hint="convert the scalar, (-a * 2).astype(jnp.float16): the result stays float16, as jnp's does for a"
              " Python number (an ml.scalar is float32 here, as a Python float passed for it becomes, not weakly"
              " typed)")
  h = jnp.linspace(-2, 2, 128, dtype=jnp.float16)
  np.testing.assert_array_equal(clip_by_fixed(h, 0.5, interpret=True), jnp.maximum(h, -0.5 * 2))


@mg.mgpu_kernel(out_shape=lambda x, flag: x)
def flag_input(x, flag, out):
  out[...] = ml.where(flag[...], x[...], -x[...])


def test_a_python_bool_for_an_array_input_is_hinted_as_a_bool():
  """The hint said '(pass an int or float)' for an ml.scalar; a bool is a flag now. Since probe 46f a Python bool
  passed eagerly for a 0-d input is the bool array jax.jit makes of it (it was this hint's SignatureError)."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(flag_input(x, True, interpret=True), x)
  np.testing.assert_array_equal(flag_input(x, False, interpret=True), -x)
  np.testing.assert_array_equal(flag_input(x, jnp.bool_(True), interpret=True), x)
  np.testing.assert_array_equal(select_by_flag(x, False, interpret=True), -x)          # or annotated
