"""Probe 27c (the dtype x op matrix): interpret mode and the CUDA export checked against jnp for
every elementwise op, cast, reduction and scan across the dtypes. Findings: a Python int divisor
that wraps to 0 in the operand's type (`x_i16 // 65536`) passed the static check, which looked at
the unwrapped value, so the export built a division by zero that interpret mode rejected."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- divisors that wrap to 0
@mg.mgpu_kernel(out_shape=lambda x, *, c: x)
def floordiv_const(x, o, *, c: ml.constexpr):
  o[...] = x[...] // c


@mg.mgpu_kernel(out_shape=lambda x, *, c: x)
def mod_const(x, o, *, c: ml.constexpr):
  o[...] = x[...] % c


@mg.mgpu_kernel(out_shape=lambda x, *, c: x)
def floordiv_scalar_const(x, o, *, c: ml.constexpr):
  for i in range(x.shape[0]):
    o[i] = x[i] // c


@mg.mgpu_kernel(out_shape=lambda x, *, c: x)
def floordiv_const_widened(x, o, *, c: ml.constexpr):      # the hint followed
  o[...] = (x[...].astype(jnp.int32) // c).astype(o.dtype)


@pytest.mark.parametrize("dtype,c", [(jnp.int16, 65536), (jnp.uint16, 65536), (jnp.int16, -2 ** 31),
                                     (jnp.uint16, -2 ** 31)])
def test_divisor_wrapping_to_zero_is_rejected(dtype, c):
  spec = S((256,), dtype)
  dname = np.dtype(dtype).name
  expect(floordiv_const, (spec,), mg.KernelTypeError, "x[...] // c",
         f"// by {c} on {dname}: {c} wraps to 0 in {dname} (as jnp converts it), and integer division by zero"
         f" is undefined on the GPU", hint=f"compute in a type that holds {c}: x[...].astype(jnp.int32) // {c}", c=c)
  expect(mod_const, (spec,), mg.KernelTypeError, "x[...] % c",
         f"% by {c} on {dname}: {c} wraps to 0 in {dname} (as jnp converts it), and integer division by zero"
         f" is undefined on the GPU", c=c)
  expect(floordiv_scalar_const, (S((8,), dtype),), mg.KernelTypeError, "x[i] // c",
         f"// by {c} on {dname}: {c} wraps to 0 in {dname} (as jnp converts it), and integer division by zero"
         f" is undefined on the GPU", c=c)


@pytest.mark.parametrize("dtype", [jnp.int16, jnp.uint16])
def test_divisor_wrapping_hint_followed(dtype):
  x = jnp.asarray(np.arange(-128, 128) * 201, jnp.int32).astype(dtype)
  got = floordiv_const_widened(x, c=65536, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), (np.asarray(x).astype(np.int64) // 65536).astype(np.dtype(dtype)))
  assert "custom_call" in _export(lambda v: floordiv_const_widened(v, c=65536), S((256,), dtype))


def test_divisor_that_does_not_wrap_to_zero_still_computes():
  # 70000 is 4464 in int16 (as jnp converts it): a valid divisor, computed as jnp computes it
  x = jnp.asarray(np.arange(-128, 128) * 201, jnp.int16)
  got = floordiv_const(x, c=70000, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x // 70000))
  assert "custom_call" in _export(lambda v: floordiv_const(v, c=70000), S((256,), jnp.int16))


# ---------------------------------------------------------------- ** on integers and float8: the user's names
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def int_sqrt_power(x, o):
  v = x[...]
  o[...] = (v ** 0.5).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def int_sqrt_power_converted(x, o):       # the hint followed
  v = x[...]
  o[...] = v.astype(jnp.float32) ** 0.5


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def f8_square(x, o):
  v = x[...]
  o[...] = (v ** 2).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def f8_exp_base(x, o):
  v = x[...]
  o[...] = (2.0 ** v).astype(jnp.float32)


def test_int_to_the_half_names_the_operand_and_its_hint_works():
  x = jnp.arange(128, dtype=jnp.int16)       # (v ** 0.5 of integers is float32, as jnp's: probe 37f)
  np.testing.assert_allclose(int_sqrt_power(x, interpret=True), x ** 0.5, rtol=1e-6)
  got = int_sqrt_power_converted(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.sqrt(np.arange(128, dtype=np.float32)))
  assert "custom_call" in _export(int_sqrt_power_converted, S((128,), jnp.int16))


@pytest.mark.parametrize("kernel,at", [(f8_square, "v ** 2"), (f8_exp_base, "2.0 ** v")])
def test_float8_power_hint_names_the_operand(kernel, at):
  expect(kernel, (S((128,), jnp.float8_e4m3fn),), mg.UnsupportedDtypeError, at,
         "** is not supported on float8_e4m3fn: Hopper has no register arithmetic on 8-bit types",
         hint="upcast first: v.astype(jnp.float16), compute, then cast back")


# ---------------------------------------------------------------- int64 -> float rounds once
@mg.mgpu_kernel(out_shape=lambda x, *, dtype: S(x.shape, dtype))
def int64_to_float(x, o, *, dtype: ml.constexpr):
  o[...] = x[...].astype(dtype)


def _rounded_once(v: int, bits: int) -> float:
  """The int `v` rounded to `bits` significant bits, half to even, with Python's exact ints."""
  m, n = abs(v), abs(v).bit_length()
  s = max(n - bits, 0)
  q, r = divmod(m, 1 << s)
  if s and (r > 1 << (s - 1) or r == 1 << (s - 1) and q & 1):
    q += 1
  return float(q << s) * (-1 if v < 0 else 1)


@pytest.mark.parametrize("dtype,bits", [(jnp.float32, 24), (jnp.bfloat16, 8), (jnp.float16, 11)])
def test_int64_to_float_rounds_once(dtype, bits):
  # float64 first (numpy's astype) rounds 2**60 + 2**36 + 1 to 2**60 + 2**36, a tie float32 then
  # rounds to 2**60; cvt.rn.f32.s64 (and jnp) round once, to 2**60 + 2**37
  prev = jax.config.jax_enable_x64
  jax.config.update("jax_enable_x64", True)
  try:
    rng = np.random.default_rng(0)
    v = rng.integers(-2 ** 63, 2 ** 63 - 1, 256, dtype=np.int64) >> rng.integers(0, 63, 256)
    v[:8] = [2 ** 60 + 2 ** 36 + 1, -(2 ** 60 + 2 ** 36 + 1), 2 ** 54 + 2 ** 30 + 1, 2 ** 63 - 1, -2 ** 63,
             16842753, 65520, 0]
    v[8] = 2 ** 60 + 2 ** 52 + 1                    # bfloat16's tie after float64's rounding
    got = np.asarray(int64_to_float(jnp.asarray(v), dtype=dtype, interpret=True))
    with np.errstate(over="ignore"):
      want = np.array([_rounded_once(int(a), bits) for a in v]).astype(np.dtype(dtype))
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got.view(np.uint16 if got.itemsize == 2 else np.uint32),
                                  want.view(np.uint16 if got.itemsize == 2 else np.uint32))
    if dtype == jnp.float32:
      assert got[0] == np.float32(2 ** 60 + 2 ** 37) and got[0] == np.asarray(jnp.asarray(v).astype(dtype))[0]
    assert "custom_call" in _export(lambda x: int64_to_float(x, dtype=dtype), S((256,), jnp.int64))
  finally:
    jax.config.update("jax_enable_x64", prev)
