"""Probe 26d (seventeenth session, numerics): hints for division by zero and shifts past the width
that failed when followed (a select after the division still divides in every lane), `i % 3.0`
blamed on the user's integer, Python numbers stored into float8 refs gave NaN where ml.full
saturates, the docs' claim for `x ** 3.0`, and a whole-number `other=` outside the integer range."""
import pathlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
DOCS = pathlib.Path(__file__).resolve().parent.parent / "docs"


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _interpret_error(kernel, *args, **kw):
  with pytest.raises(mg.InterpretError) as info:
    kernel(*args, interpret=True, **kw)
  return info.value


def _at(e, kernel, text):
  assert (e.lineno, e.col_offset) == where(kernel, text), e.render()
  assert e.code == "MG950"


# ---------------------------------------------------------------- division by zero: guard the divisor
@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def divide_by(n, out, *, c: ml.constexpr, op: ml.constexpr = "//"):
  out[...] = n[...] // c if op == "//" else n[...] % c


@mg.mgpu_kernel(out_shape=lambda x, d: x)
def select_after_dividing(x, d, out, *, op: ml.constexpr):
  a, b = x[...], d[...]
  out[...] = ml.where(b != 0, a // b, 0) if op == "//" else ml.where(b != 0, a % b, 0)


@mg.mgpu_kernel(out_shape=lambda x, d: x)
def divisor_guarded(x, d, out, *, op: ml.constexpr):
  a, b = x[...], d[...]
  out[...] = (ml.where(b == 0, 0, a // ml.where(b == 0, 1, b)) if op == "//" else
              ml.where(b == 0, 0, a % ml.where(b == 0, 1, b)))


@mg.mgpu_kernel(out_shape=lambda x, d: S((1,), I32))
def scalar_divide(x, d, out):
  a, b = x[0], d[0]
  out[0] = a // b


@mg.mgpu_kernel(out_shape=lambda x, d: S((1,), I32))
def scalar_guarded(x, d, out):
  a, b = x[0], d[0]
  out[0] = ml.where(b == 0, 0, a // ml.where(b == 0, 1, b))


def _guard(x, op, d, call=""):
  q = f"{call}({x}, ml.where({d} == 0, 1, {d}))" if call else f"{x} {op} ml.where({d} == 0, 1, {d})"
  return (f"a divisor that can be 0 must be replaced where it is: ml.where({d} == 0, 0, {q})"
          f" (the outer ml.where sets the lanes where {d} == 0, to 0 or the value you want)")


@pytest.mark.parametrize("op", ["//", "%"])
def test_division_by_zero_hints_replace_the_zeros_of_the_divisor_and_work_followed(op):
  """MG003 hinted `ml.where(d != 0, x // d, 0)` (with // for %), the form MG950 rejects: every lane
  divides, so a select after the division still divides by zero (undefined in LLVM)."""
  at = "n[...] // c" if op == "//" else "n[...] % c"
  expect(divide_by, [S((256,), I32)], mg.KernelTypeError, at,
         f"{op} by 0 on int32: integer division by zero is undefined on the GPU", c=0, op=op,
         hint=f"divide by a non-zero constant; {_guard('n[...]', op, 'd')}")
  x = jnp.arange(128, dtype=I32) - 64
  d = jnp.arange(128, dtype=I32) % 3 - 1
  jop = (lambda p, q: p // q) if op == "//" else (lambda p, q: p % q)
  # a run-time zero divisor is jnp's since probe 57a (x // 0 is -2 or -1, x % 0 is 0; it was MG950): the
  # select after dividing computes
  np.testing.assert_array_equal(select_after_dividing(x, d, op=op, interpret=True),
                                jnp.where(d != 0, jop(x, d), 0))
  # the guard: interpret mode gives jnp's numbers, and it exports
  np.testing.assert_array_equal(divisor_guarded(x, d, op=op, interpret=True),
                                jnp.where(d == 0, 0, jop(x, jnp.where(d == 0, 1, d))))
  assert "mosaic_gpu" in _export(lambda p, q: divisor_guarded(p, q, op=op), S((128,), I32), S((128,), I32))


def test_a_scalar_division_by_zero_hints_the_guard_that_works_on_scalars():
  x, d = jnp.full((1,), 7, I32), jnp.zeros((1,), I32)
  np.testing.assert_array_equal(scalar_divide(x, d, interpret=True), x // d)     # jnp's -2 (MG950 before 57a)
  np.testing.assert_array_equal(scalar_guarded(x, d, interpret=True), [0])
  np.testing.assert_array_equal(scalar_guarded(x, d + 2, interpret=True), [3])
  assert "mosaic_gpu" in _export(scalar_guarded, S((1,), I32), S((1,), I32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def cdiv_by_zero(x, out):
  out[...] = ml.cdiv(x[...], 0)


@mg.mgpu_kernel(out_shape=lambda x, d: x)
def cdiv_by(x, d, out):
  out[...] = ml.cdiv(x[...], d[...])


@mg.mgpu_kernel(out_shape=lambda x, d: x)
def cdiv_guarded(x, d, out):
  out[...] = ml.where(d[...] == 0, 0, ml.cdiv(x[...], ml.where(d[...] == 0, 1, d[...])))


def test_ml_cdiv_by_zero_is_named_as_ml_cdiv_and_hints_its_guard():
  """ml.cdiv's zero divisor was reported as `//` (MG003 and MG950), with hints of `a // ...`."""
  expect(cdiv_by_zero, [S((128,), I32)], mg.KernelTypeError, "ml.cdiv(",
         "ml.cdiv by 0: integer division by zero is undefined on the GPU",
         hint=f"divide by a positive constant; {_guard('x[...]', '', 'd', 'ml.cdiv')}")
  x, d = jnp.arange(128, dtype=I32), jnp.arange(128, dtype=I32) % 3
  q = x // d                   # a run-time zero: ml.cdiv's formula of jnp's // (it was MG950 before probe 57a)
  np.testing.assert_array_equal(cdiv_by(x, d, interpret=True), q + (q * d != x))
  np.testing.assert_array_equal(cdiv_guarded(x, d, interpret=True),
                                jnp.where(d == 0, 0, -(-x // jnp.where(d == 0, 1, d))))
  assert "mosaic_gpu" in _export(cdiv_guarded, S((128,), I32), S((128,), I32))


# ---------------------------------------------------------------- shifts past the width: clamp the amount
@mg.mgpu_kernel(out_shape=lambda x, s: x)
def select_after_shifting(x, s, out, *, op: ml.constexpr, bits: ml.constexpr):
  a, b = x[...], s[...]
  out[...] = ml.where(b < bits, a << b, 0) if op == "<<" else ml.where(b < bits, a >> b, 0)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def shift_clamped(x, s, out, *, bits: ml.constexpr):
  a, b = x[...], s[...]
  out[...] = a >> ml.minimum(b, bits - 1)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def shift_guarded(x, s, out, *, op: ml.constexpr, bits: ml.constexpr):
  a, b = x[...], s[...]
  out[...] = (ml.where(b < bits, a << ml.minimum(b, bits - 1), 0) if op == "<<" else
              ml.where(b < bits, a >> ml.minimum(b, bits - 1), 0))


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def shift_clipped(x, s, out, *, op: ml.constexpr, bits: ml.constexpr):
  a, b = x[...], s[...]
  out[...] = (ml.where((b >= 0) & (b < bits), a << ml.clip(b, 0, bits - 1), 0) if op == "<<" else
              ml.where((b >= 0) & (b < bits), a >> ml.clip(b, 0, bits - 1), 0))


@pytest.mark.parametrize("dtype,negative", [(jnp.int32, False), (jnp.uint32, False), (jnp.int16, False),
                                            (jnp.uint16, False), (jnp.int32, True), (jnp.int16, True)], ids=str)
@pytest.mark.parametrize("op", ["<<", ">>"])
def test_a_run_time_shift_out_of_range_hints_a_clamped_amount_that_works_followed(dtype, op, negative):
  """MG950 said only "keep shift amounts below the bit width"; the natural guard,
  ml.where(s < 32, a >> s, 0), is itself an MG950 (every lane shifts). Negative amounts (of a
  signed type) are clipped at 0 too."""
  signed = jnp.issubdtype(dtype, jnp.signedinteger)
  bits = jnp.dtype(dtype).itemsize * 8
  top = bits - 1
  x = (jnp.arange(128, dtype=I32) * 77777 - 3000000).astype(dtype)
  s = (jnp.arange(128, dtype=I32) % (bits + 8) - (5 if negative else 0)).astype(dtype)
  e = _interpret_error(select_after_shifting, x, s, op=op, bits=bits)
  _at(e, select_after_shifting, f"a {op} b")
  assert e.message == f"a shift by an amount outside 0..{top} (undefined on the GPU)"
  jop = (lambda p, q: p << q) if op == "<<" else (lambda p, q: p >> q)
  ok = (s >= 0) & (s < bits)
  want = jnp.where(ok, jop(x, jnp.clip(s, 0, top)), 0)
  specs = (S((128,), dtype), S((128,), dtype))
  if negative:
    there = "0 there, as jnp gives" if op == "<<" else "or the value you want there"
    assert e.hint == (f"clamp the amount and set the lanes it was out of range in: ml.where((b >= 0) & (b < {bits}),"
                      f" a {op} ml.clip(b, 0, {top}), 0) ({there})")
    np.testing.assert_array_equal(shift_clipped(x, s, op=op, bits=bits, interpret=True), want)
    assert "mosaic_gpu" in _export(lambda p, q: shift_clipped(p, q, op=op, bits=bits), *specs)
    return
  guarded = f"ml.where(b < {bits}, a {op} ml.minimum(b, {top}), 0)"
  if op == ">>" and signed:
    assert e.hint == (f"clamp the amount: a >> ml.minimum(b, {top}) (amounts of {bits} or more then give the sign"
                      f" fill, as jnp's >>), or {guarded} for 0 there")
    np.testing.assert_array_equal(shift_clamped(x, s, bits=bits, interpret=True), x >> s)    # jnp's sign fill
    assert "mosaic_gpu" in _export(lambda p, q: shift_clamped(p, q, bits=bits), *specs)
  else:
    assert e.hint == f"clamp the amount and set the lanes it was out of range in: {guarded} (0 there, as jnp gives)"
  got = shift_guarded(x, s, op=op, bits=bits, interpret=True)
  np.testing.assert_array_equal(got, want)
  if op == "<<" or not signed:
    np.testing.assert_array_equal(got, jop(x, s))      # jnp gives 0 past the width
  assert "mosaic_gpu" in _export(lambda p, q: shift_guarded(p, q, op=op, bits=bits), *specs)


@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def shift_by(n, out, *, c: ml.constexpr, op: ml.constexpr):
  out[...] = n[...] >> c if op == ">>" else n[...] << c


@mg.mgpu_kernel(out_shape=lambda n: n, grid=(1,))
def shift_by_hint(n, out, *, c: ml.constexpr, op: ml.constexpr):
  out[...] = n[...] >> c if op == ">>" else n[...] << c


def test_a_static_shift_out_of_range_is_jnps_sign_fill_or_zero():
  """`n >> 32` on int32 hinted "use 0" (jnp gives the sign fill, -1 for negatives); `n << -1`
  hinted the bit width, not the shift the user meant. (Since probe 28e a static amount outside
  the width is no error: it gives jnp's result.)"""
  n = jnp.arange(256, dtype=I32) - 128
  np.testing.assert_array_equal(shift_by(n, c=32, op=">>", interpret=True), n >> 32)
  np.testing.assert_array_equal(shift_by(n, c=-1, op="<<", interpret=True), n << -1)
  np.testing.assert_array_equal(shift_by_hint(n, c=31, op=">>", interpret=True),
                                jax.lax.shift_right_arithmetic(n, jnp.full_like(n, 32)))
  np.testing.assert_array_equal(shift_by_hint(n, c=1, op=">>", interpret=True), n >> 1)
  assert "mosaic_gpu" in _export(lambda p: shift_by_hint(p, c=31, op=">>"), S((256,), I32))


# ---------------------------------------------------------------- an integer meeting a float constant in // % & <<
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32))
def int_with_float(x, out, *, op: ml.constexpr):
  v = x[...]
  if op == "%":
    out[...] = v % 3.0
  elif op == "r%":
    out[...] = 7.5 % v
  elif op == "//":
    out[...] = v // 2.0
  elif op == "&":
    out[...] = (v & 1.0).astype(F32)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, F32), S(x.shape, F32), x, x, x))
def int_with_float_followed(x, o1, o2, o3, o4, o5, o6):
  v = x[...]
  a = v.astype(jnp.float32)
  o1[...] = a - ml.floor(a / 3.0) * 3.0
  o2[...] = 7.5 - ml.floor(7.5 / a) * a
  o3[...] = ml.floor(a / 2.0)
  o4[...] = v % 3
  o5[...] = v // 2
  o6[...] = v & 1


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_remainder(x, out):
  out[...] = x[...] % 3


def test_an_integer_meeting_a_float_constant_names_the_float_and_hints_forms_that_work():
  """`x_i32 % 3.0` said "% needs integer operands, got float32" of the user's int32 value, and
  hinted `a - ml.floor(a / b) * b`, an MG104 on the int32 `a`."""
  spec = [S((128,), I32)]
  tail = "is a float (an integer value meeting a Python float computes in float32)"
  expect(int_with_float, spec, mg.UnsupportedDtypeError, "v & 1.0", f"& needs integer operands: v is int32 but 1.0 {tail}",
         op="&", hint="an integer constant: v & 1")
  x = jnp.arange(128, dtype=I32) - 64
  got = int_with_float_followed(x, interpret=True)
  for g, w in zip(got, [x % 3.0, 7.5 % x, x // 2.0, x % 3, x // 2, x & 1]):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(g, w)
  assert "mosaic_gpu" in _export(int_with_float_followed, S((128,), I32))
  # floats with an integer constant: jnp's remainder (it was MG106 before float % was supported)
  y = jnp.linspace(-7.0, 7.0, 128, dtype=F32)
  np.testing.assert_array_equal(float_remainder(y, interpret=True), y % 3)


# ---------------------------------------------------------------- Python numbers becoming float8
def _f8_kernel(F8):
  f8 = S((128,), F8)

  @mg.mgpu_kernel(out_shape=lambda x: (f8,) * 6)
  def numbers_into_float8(x, a, b, c, d, e, f):
    v = x[...]
    a[...] = 1e6
    b[...] = ml.where(v > 0, v, -1e6)
    c[...] = ml.maximum(v, 1000.0)
    d[...] = x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 64, other=-1e6)
    e[...] = ml.full((128,), -1e6, F8)
    f[...] = ml.full((128,), 1e6, F32).astype(F8)
  return numbers_into_float8


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int8))
def float8_compare_big(x, out):
  out[...] = (x[...] < 1000.0).astype(jnp.int8)


@pytest.mark.parametrize("F8", [jnp.float8_e4m3fn, jnp.float8_e5m2], ids=str)
def test_python_numbers_becoming_float8_convert_as_ml_full_does(F8):
  """A number stored into float8, or met in ml.where, ml.maximum and other=, converts as ml.full and
  .astype do: since probe 50e as jnp's (1e6 is NaN in float8_e4m3fn, inf in e5m2), not saturated."""
  k = _f8_kernel(F8)
  x = jnp.linspace(-3, 3, 128).astype(F8)
  big = jnp.full((128,), 1e6, F8)
  got = [np.asarray(t.astype(F32)) for t in k(x, interpret=True)]
  want = [big, jnp.where(x > 0, x, -big), jnp.maximum(x, 1000.0), jnp.where(jnp.arange(128) < 64, x, -big), -big, big]
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, np.asarray(w.astype(F32)))
  assert "mosaic_gpu" in _export(k, S((128,), F8))
  # (not changed: a comparison converts its number as jnp does, 1000.0 to NaN in e4m3fn)
  np.testing.assert_array_equal(float8_compare_big(x, interpret=True), (x < 1000.0).astype(jnp.int8))


# ---------------------------------------------------------------- x ** 3.0 is jnp's x ** 3
@mg.mgpu_kernel(out_shape=lambda x: x)
def cube(x, out):
  out[...] = x[...] ** 3.0


def test_a_whole_float_exponent_is_jnps_integer_power_as_the_docs_now_say():
  """The docs said `x ** 2.0` is bit for bit jnp's `x ** n`: it is jnp's `x ** 3` (products), not
  jnp's `x ** 3.0` (XLA's pow), which differs by an ulp for bfloat16 2.84375."""
  x = jnp.full((128,), 2.84375, jnp.bfloat16)
  got = cube(x, interpret=True)
  np.testing.assert_array_equal(got, x ** 3)
  assert float(got[0]) == 22.875 and float((x ** 3.0)[0]) == 23.0
  text = (DOCS / "language.md").read_text()
  assert "(or a whole float such as `2.0`, on floats)" not in text
  assert ("so it is jnp's `x ** 3` with the int exponent, not jnp's `x ** 3.0` (`jnp.power(x, 3.0)`, XLA's pow,"
          " rounded once), from which it can differ by an ulp") in text


# ---------------------------------------------------------------- other= a whole number outside the range
@mg.mgpu_kernel(out_shape=lambda x: x)
def load_other(x, out, *, other: ml.constexpr):
  out[...] = x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 100, other=other)


@pytest.mark.parametrize("dtype,other,near,lo,hi", [(I32, 1e10, 2147483647, -2 ** 31, 2 ** 31 - 1),
                                                    (jnp.uint8, 300.0, 255, 0, 255),
                                                    (jnp.uint32, -1.0, 0, 0, 2 ** 32 - 1)], ids=str)
def test_a_whole_float_other_outside_the_range_says_so(dtype, other, near, lo, hi):
  """`other=1e10` on int32 said "is a float but x is int32" where `other=2.0` is taken."""
  name = jnp.dtype(dtype).name
  expect(load_other, [S((128,), dtype)], mg.KernelTypeError, "x.at[ml.ds(0, 128)].load(",
         f"ml.load's other ({other}) is outside {name}'s range ({lo}..{hi}): x.at[ml.ds(0, 128)] is {name}",
         other=other, hint=f"an integer of {name} ({lo}..{hi}): other={near}, the nearest; or the identity of what"
                           f" you reduce: other=0 for a sum, other={lo} for a max, other={hi} for a min")
  x = jnp.arange(128, dtype=I32).astype(dtype)
  got = load_other(x, other=near, interpret=True)
  np.testing.assert_array_equal(got, jnp.where(jnp.arange(128) < 100, x, jnp.asarray(near).astype(dtype)))
  assert "mosaic_gpu" in _export(lambda p: load_other(p, other=near), S((128,), dtype))
