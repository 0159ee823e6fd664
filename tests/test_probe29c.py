"""Probe 29c (numerics parity: interpret mode computes what the GPU computes, and both what jnp
computes where jnp defines the result): integer // and % of negative operands, division by zero,
float -> int casts of NaN, infinities and out-of-range values, wrapping + and *, shifts past the
width, NaN and -0.0 in max/min and sorts, rounding to float16/bfloat16, mixed-dtype promotion."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect  # noqa: F401

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16
F16 = jnp.float16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- scalar casts between 16-bit floats
@mg.mgpu_kernel(out_shape=lambda x: S((8,), F16 if x.dtype == BF16 else BF16))
def scalar_16bit_swap(x, out):
  for j in range(8):
    s = x[j]
    out[j] = s.astype(out.dtype)


@pytest.mark.parametrize("src,dst", [(BF16, F16), (F16, BF16)])
def test_a_scalar_cast_between_16_bit_floats_goes_through_float32(src, dst):
  """It was MG106 ('scalars convert between floats of one width only through float32'), though
  the tensors' cast bridges through float32 itself: bfloat16 -> float32 is exact, so the one
  rounding is jnp's (NaN, infinities, float16's overflow to inf and its subnormals included)."""
  x = jnp.asarray([np.nan, 1.0 / 3, -0.0, np.inf, 70000.0, 3e-6, -2.7e38 if src == BF16 else -65504.0,
                   1.00390625], src)
  np.testing.assert_array_equal(np.asarray(scalar_16bit_swap(x, interpret=True)), np.asarray(x.astype(dst)))
  builds(scalar_16bit_swap, S((8,), src))


# ---------------------------------------------------------------- float -> int conversions, poison-free
def _guarded_conversions(mlir: str) -> tuple[int, list[str]]:
  """(how many fptosi/fptoui the module has, those whose operand no NaN select guards): LLVM
  makes a conversion of NaN or of a value outside the target's range poison, not PTX's saturated
  cvt, so each must see a value that went through `select(x != x, 0, x)`."""
  lines = mlir.splitlines()
  defs = {}                                    # name -> the lines defining it (names restart per function)
  for n, line in enumerate(lines):
    if "=" in line and line.strip().startswith("%"):
      defs.setdefault(line.split("=")[0].strip(), []).append(n)
  def line_of(name, before):
    return max((n for n in defs.get(name, []) if n < before), default=None)
  def guarded(name, before, depth=0):
    n = line_of(name, before)
    if n is None:
      return False
    line = lines[n]
    if "arith.select" in line:
      c = line_of(line.split("arith.select")[1].split(",")[0].strip(), n)
      cond = lines[c] if c is not None else ""
      parts = cond.split("arith.cmpf")[1].replace(":", ",").split(",") if "arith.cmpf" in cond else []
      if len(parts) >= 3 and parts[0].strip() in ("une", "uno") and parts[1].strip() == parts[2].strip():
        return True
    return depth < 16 and any(guarded(t, n, depth + 1) for t in re.findall(r"%[\w.]+", line.split("=", 1)[-1]))
  convs = [n for n, line in enumerate(lines) if "arith.fptosi" in line or "arith.fptoui" in line]
  return len(convs), [lines[n].strip() for n in convs if not guarded(lines[n].split("arith.fpto")[1].split()[1], n)]


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, d) for d in (jnp.int32, jnp.uint32, jnp.int8, jnp.int64)))
def nan_fill_and_constant_branch(x, i32, u32, i8, i64):
  v = x[...]
  nan = ml.full(v.shape, float("nan"), jnp.float32)
  i32[...] = nan.astype(jnp.int32)
  u32[...] = ml.where(v > 0, -1.0, v).astype(jnp.uint32)
  i8[...] = ml.where(v > 0, 1e10, nan).astype(jnp.int8)
  i64[...] = ml.where(v > 0, 1e30, v).astype(jnp.int64)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), jnp.int32))
def scalar_float_to_int(x, out):
  for j in range(8):
    out[j] = (x[j] * 2.0).astype(jnp.int32) + x[j].astype(jnp.uint16).astype(jnp.int32)


def test_no_float_to_int_conversion_sees_a_nan_or_an_out_of_range_value():
  """The lowering converted with a plain fptosi/fptoui (8 and 16 bits after a clamp that kept
  NaN): LLVM makes a NaN or out-of-range operand poison, and folds it where the value is known
  (a NaN fill, or `-1.0` of a select sunk into the cast: the other branch then reaches every
  lane), where interpret mode and jnp give 0 or the saturated value."""
  jax.config.update("jax_enable_x64", True)
  try:
    n, bad = _guarded_conversions(str(nan_fill_and_constant_branch.mlir(S((128,), F32))))
  finally:
    jax.config.update("jax_enable_x64", False)
  assert n >= 4 and not bad, bad
  n, bad = _guarded_conversions(str(scalar_float_to_int.mlir(S((8,), F32))))
  assert n >= 2 and not bad, bad
  x = jnp.asarray(np.linspace(-3, 3, 8), F32).at[3].set(jnp.nan).at[4].set(jnp.inf).at[5].set(-1e20)
  want = (x * 2.0).astype(jnp.int32) + x.astype(jnp.uint16).astype(jnp.int32)
  np.testing.assert_array_equal(np.asarray(scalar_float_to_int(x, interpret=True)), np.asarray(want))


@pytest.mark.gpu
def test_float_to_int_conversions_of_known_values_on_the_gpu():
  jax.config.update("jax_enable_x64", True)
  try:
    x = jnp.asarray(np.linspace(-3, 3, 128), F32)
    got = jax.jit(nan_fill_and_constant_branch)(x)
    nan = jnp.full(x.shape, jnp.nan, F32)
    want = (nan.astype(jnp.int32), jnp.where(x > 0, -1.0, x).astype(jnp.uint32),
            jnp.where(x > 0, 1e10, nan).astype(jnp.int8), jnp.where(x > 0, 1e30, x).astype(jnp.int64))
    for g, i, w in zip(got, nan_fill_and_constant_branch(x, interpret=True), want):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
      np.testing.assert_array_equal(np.asarray(i), np.asarray(w))
  finally:
    jax.config.update("jax_enable_x64", False)


# ---------------------------------------------------------------- int32 / uint32 meeting: the hint
@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, jnp.int8))
def mixed_sign_compare(a, b, out):
  x = a[...]
  y = b[0]
  out[...] = (x < y).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, jnp.int8))
def mixed_sign_compare_int64(a, b, out):
  x = a[...]
  y = b[0]
  out[...] = (x.astype(jnp.int64) < y.astype(jnp.int64)).astype(jnp.int8)


def test_the_hint_for_int32_meeting_uint32_converts_both_to_int64():
  """It said `y.astype(jnp.uint32)` (the second operand to the first's dtype): followed, -1 became
  4294967295 and `3000000000 < -1` was True (and `5 < -1`), where the comparison is False in
  jnp's int64 (with x64)."""
  expect(mixed_sign_compare, [S((128,), jnp.uint32), S((4,), jnp.int32)], mg.DtypeMismatchError, "x < y",
         "< on x (uint32) and y (int32): dtypes differ and are never converted implicitly",
         hint="convert both sides to int64, where jnp (with jax_enable_x64) computes and every value of both"
              " fits: x.astype(jnp.int64) and y.astype(jnp.int64)")
  a = jnp.asarray(np.array([3000000000, 5, 0, 4294967295] * 32, np.uint32))
  b = jnp.asarray(np.array([-1, 0, 0, 0], np.int32))
  want = (np.asarray(a).astype(np.int64) < -1).astype(np.int8)
  np.testing.assert_array_equal(np.asarray(mixed_sign_compare_int64(a, b, interpret=True)), want)
  builds(mixed_sign_compare_int64, S((128,), jnp.uint32), S((4,), jnp.int32))


# ---------------------------------------------------------------- Python ints past 32 bits: the hint
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def mod_two_to_the_32(x, out):
  out[...] = x[...] % 4294967296


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def mod_two_to_the_32_int64(x, out):
  out[...] = (x[...].astype(jnp.int64) % 4294967296).astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def below_ten_billion(x, out):
  out[...] = (x[...] < 10000000000).astype(jnp.int8)


def test_a_python_int_past_32_bits_hints_int64():
  """The hint was 'or a float (e.g. float(...)) if you meant floating point': followed for % (or
  //, or a bitwise op) it was the next error (MG106: % needs integer operands)."""
  expect(mod_two_to_the_32, [S((128,), jnp.int32)], mg.KernelTypeError, "x[...] % 4294967296",
         "% uses the Python int 4294967296, which does not fit in int32: kernels compute in 32 bits (a larger"
         " constant would silently lose its high bits)",
         hint="compute in int64, which holds 4294967296: x[...].astype(jnp.int64) % 4294967296 (then .astype(...)"
              " back to the type you store)")
  expect(below_ten_billion, [S((128,), jnp.uint32)], mg.KernelTypeError, "x[...] < 10000000000",
         "< uses the Python int 10000000000, which does not fit in uint32: kernels compute in 32 bits (a larger"
         " constant would silently lose its high bits)",
         hint="compute in int64, which holds 10000000000: x[...].astype(jnp.int64) < 10000000000 (then .astype(...)"
              " back to the type you store)")
  x = jnp.asarray(np.array([-5, 7, -2 ** 31, 2 ** 31 - 1], np.int32).repeat(32))
  want = (np.asarray(x).astype(np.int64) % 2 ** 32).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(mod_two_to_the_32_int64(x, interpret=True)), want)
  builds(mod_two_to_the_32_int64, S((128,), jnp.int32))


# ---------------------------------------------------------------- uint32 meeting an int32 NumPy scalar
NEG_ONE = np.int32(-1)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def above_numpy_minus_one(x, out):
  v = x[...]
  out[...] = (v > NEG_ONE).astype(jnp.int8)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def above_numpy_minus_one_int64(x, out):
  v = x[...]
  out[...] = (v.astype(jnp.int64) > NEG_ONE).astype(jnp.int8)


def test_uint32_meeting_an_int32_numpy_scalar_hints_int64():
  """The hint was v.astype(jnp.int32): followed, 3000000000 > -1 was False (it wrapped negative);
  the message said kernels have no int64, and the hint for an int64 scalar converted to it."""
  expect(above_numpy_minus_one, [S((128,), jnp.uint32)], mg.DtypeMismatchError, "v > NEG_ONE",
         "> on v (uint32) and the int32 scalar -1: a NumPy or JAX scalar keeps its dtype, and jnp computes"
         " these two in int64, which is not implicit here",
         hint="-1 is outside uint32: convert the value: v.astype(jnp.int64)")
  x = jnp.asarray(np.array([3000000000, 0, 4294967295, 5] * 32, np.uint32))
  jax.config.update("jax_enable_x64", True)
  try:
    want = np.asarray(x > NEG_ONE).astype(np.int8)         # jnp computes in int64
  finally:
    jax.config.update("jax_enable_x64", False)
  assert want.all()
  np.testing.assert_array_equal(np.asarray(above_numpy_minus_one_int64(x, interpret=True)), want)
  builds(above_numpy_minus_one_int64, S((128,), jnp.uint32))
