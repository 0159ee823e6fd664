"""Probe 42w (dtypes and numerics against jnp: integer division and shifts of every width, casts of
out-of-range values and NaN, bit casts, 8- and 16-bit tiles through arithmetic, reductions and atomics,
16-bit float math, NaN through max/min/argmax, weak types), the problems it found."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _ints(dtype, shape, seed, lo=None, hi=None):
  info = np.iinfo(dtype)
  rng = np.random.default_rng(seed)
  return jnp.asarray(rng.integers(info.min if lo is None else lo, info.max if hi is None else hi, shape,
                                  endpoint=True).astype(dtype))


def _specs(*arrays):
  return [S(a.shape, a.dtype) for a in arrays]


# ---------------------------------------------------------------- 8-bit shifts, as the other 8-bit integer ops
@mg.mgpu_kernel(out_shape=lambda x, s: (x,) * 8)
def shifts8(x, s, a, b, c, d, e, f, g, h):
  v = x[...]
  n = s[...]
  a[...] = v << n
  b[...] = v >> n
  c[...] = v << 3
  d[...] = v >> 3
  e[...] = v >> 9                  # past the width: 0, or the sign fill of a signed byte
  f[...] = v << 8
  g[...] = v >> 257                # 257 is 1 in uint8, 1 in int8
  h[...] = (v >> 4) & 0xF          # a nibble


def _shifts8_ref(v, n):
  return v << n, v >> n, v << 3, v >> 3, v >> 9, v << 8, v >> 257, (v >> 4) & 0xF


@mg.mgpu_kernel(out_shape=lambda x, s: (x, x), grid=lambda x, s: (x.shape[0],))
def shifts8_scalar(x, s, a, b):
  i = ml.program_id(0)
  a[i] = x[i] << s[i]
  b[i] = x[i] >> s[i]


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8])
def test_8bit_shifts_are_jnps_on_tensors_and_scalars(dtype):
  """`x_u8 >> 4` (a byte's bit fields) was MG106 'no register arithmetic on 8-bit types', though + - * // %
  of 8-bit values compute in 32 bits and wrap back: shifts do the same now (the value sign- or
  zero-extended), static amounts converted to the byte type as jnp converts them."""
  x = _ints(dtype, (1024,), 1)
  s = _ints(dtype, (1024,), 2, 0, 7)
  for got, want in zip(shifts8(x, s, interpret=True), _shifts8_ref(x, s)):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
  assert "@mosaic_gpu" in _export(shifts8, *_specs(x, s))
  xs, ss = x[:64], s[:64]
  for got, want in zip(shifts8_scalar(xs, ss, interpret=True), (xs << ss, xs >> ss)):
    np.testing.assert_array_equal(got, want)
  assert "@mosaic_gpu" in _export(shifts8_scalar, *_specs(xs, ss))


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def shift8_runtime(x, s, o):
  o[...] = x[...] << s[...]      # runtime amount


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def shift8_runtime_fixed(x, s, o):
  o[...] = ml.where(s[...] < 32, x[...] << ml.minimum(s[...], 31), 0)


def test_8bit_runtime_shift_past_32_is_reported_with_the_users_operands_and_the_hint_works():
  x = _ints(jnp.uint8, (1024,), 3)
  s = _ints(jnp.uint8, (1024,), 4, 0, 40)
  with pytest.raises(mg.InterpretError) as info:
    shift8_runtime(x, s, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# runtime amount"), 11)
  assert str(e).splitlines()[0].endswith("a shift by an amount outside 0..31 (undefined on the GPU) [MG950]")
  assert e.hint == ("clamp the amount and set the lanes it was out of range in: ml.where(s[...] < 32, x[...] <<"
                    " ml.minimum(s[...], 31), 0) (0 there, as jnp gives)")
  np.testing.assert_array_equal(shift8_runtime_fixed(x, s, interpret=True), x << s)


@mg.mgpu_kernel(out_shape=lambda x, d: x)
def div8(x, d, o):
  v = x[...]
  n = d[...]
  o[...] = v // n                # a zero divisor


def test_8bit_zero_divisor_is_jnps():
  """The hint named the 8-bit division's operands 'a' and 'd' (the values widened to 32 bits have no name),
  where a 16-bit one names them v and n. Since probe 57a a run-time zero divisor is jnp's (uint8's x // 0 is
  255, as uint32's all ones narrowed; it was MG950)."""
  x = _ints(jnp.uint8, (1024,), 5)
  d = _ints(jnp.uint8, (1024,), 6, 0, 3)
  assert (np.asarray(d) == 0).any()
  np.testing.assert_array_equal(div8(x, d, interpret=True), x // d)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8])
def test_gpu_8bit_shifts(dtype):
  x = _ints(dtype, (1024,), 7)
  s = _ints(dtype, (1024,), 8, 0, 7)
  for got, want in zip(shifts8(x, s), _shifts8_ref(x, s)):
    np.testing.assert_array_equal(got, want)
  xs, ss = x[:64], s[:64]
  for got, want in zip(shifts8_scalar(xs, ss), (xs << ss, xs >> ss)):
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- bit casts between widths, as lax's
@mg.mgpu_kernel(out_shape=lambda x, *, dt: jax.eval_shape(lambda v: jax.lax.bitcast_convert_type(v, dt), x))
def bitcast_to(x, o, *, dt: ml.constexpr):
  o[...] = ml.bitcast(x[...], dt)


def _bits_of(shape, dtype, seed):
  words = _ints(jnp.uint32, shape, seed)
  words = words & jnp.uint32(0xBFFFFFFF)       # no float NaNs or infinities in any split part's high byte
  return jax.lax.bitcast_convert_type(words, jnp.float32).astype(dtype) if jnp.dtype(dtype).kind == "f" else \
      jax.lax.bitcast_convert_type(words, jnp.int32).astype(dtype)


def _same_bits(got, want):
  as_bytes = lambda v: jax.lax.bitcast_convert_type(v, jnp.uint8)
  np.testing.assert_array_equal(as_bytes(got), as_bytes(want))


_RESIZED = [((8, 128), jnp.float32, jnp.uint16), ((1024,), jnp.float32, jnp.int8), ((8, 128), jnp.bfloat16, jnp.uint8),
            ((1024,), jnp.int32, jnp.float8_e4m3fn), ((8, 128), jnp.uint32, jnp.float16)]


@pytest.mark.parametrize("shape, src, dst", _RESIZED)
def test_bitcast_between_widths_splits_and_joins_the_last_axis_as_lax(shape, src, dst):
  """ml.bitcast (and the ml.bitcast that lax.bitcast_convert_type's hint writes) of another width was MG106
  'widths differ', whose hint (bitcast between types of one width) did not say how to pack or unpack: it is
  lax's now, a wider element split into a new last axis of its parts, lowest bits first, and back."""
  x = _bits_of(shape, src, 9)
  split = bitcast_to(x, dt=dst, interpret=True)
  want = jax.lax.bitcast_convert_type(x, dst)
  assert split.shape == want.shape and split.dtype == want.dtype
  _same_bits(split, want)
  joined = bitcast_to(want, dt=src, interpret=True)
  assert joined.shape == x.shape and joined.dtype == x.dtype
  _same_bits(joined, x)
  assert "@mosaic_gpu" in _export(bitcast_to, S(x.shape, x.dtype), dt=dst)
  assert "@mosaic_gpu" in _export(bitcast_to, S(want.shape, want.dtype), dt=src)


@mg.mgpu_kernel(out_shape=lambda x: jax.eval_shape(lambda v: jax.lax.bitcast_convert_type(v, jnp.uint16), x))
def lax_split(x, o):
  o[...] = jax.lax.bitcast_convert_type(x[...], jnp.uint16)      # lax in a kernel


def test_lax_bitcast_convert_type_of_another_width_hint_works():
  x = _bits_of((1024,), jnp.float32, 10)     # (lax's call computes as the hint's ml.bitcast since probe 47b)
  _same_bits(lax_split(x, interpret=True), jax.lax.bitcast_convert_type(x, jnp.uint16))
  np.testing.assert_array_equal(bitcast_to(x, dt=jnp.uint16, interpret=True),
                                jax.lax.bitcast_convert_type(x, jnp.uint16))


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:-1] + (x.shape[-1] // 4,), jnp.float32))
def join_flat(x, o):
  o[...] = ml.bitcast(x[...], jnp.float32)      # a flat byte row


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:-1] + (x.shape[-1] // 4,), jnp.float32))
def join_flat_fixed(x, o):
  o[...] = ml.bitcast(x[...].reshape(8, 128, 4), jnp.float32)


def test_bitcast_join_of_a_flat_last_axis_says_how_to_reshape_and_the_hint_works():
  words = _bits_of((8, 128), jnp.float32, 11)
  x = jax.lax.bitcast_convert_type(words, jnp.uint8).reshape(8, 512)
  with pytest.raises(mg.ShapeMismatchError) as info:
    join_flat.check(S(x.shape, x.dtype))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# a flat byte row"), 11)
  assert str(e).splitlines()[0].endswith(
      "ml.bitcast from uint8 to float32 joins a last axis of 4 parts into one element, and x[...]'s last axis is"
      " 512 [MG202]")
  assert e.hint == "reshape it first: ml.bitcast(x[...].reshape(8, 128, 4), jnp.float32) joins each 4 neighbours"
  np.testing.assert_array_equal(join_flat_fixed(x, interpret=True), words)


@pytest.mark.gpu
@pytest.mark.parametrize("shape, src, dst", _RESIZED)
def test_gpu_bitcast_between_widths(shape, src, dst):
  x = _bits_of(shape, src, 12)
  want = jax.lax.bitcast_convert_type(x, dst)
  _same_bits(bitcast_to(x, dt=dst), want)
  _same_bits(bitcast_to(want, dt=src), x)


# ---------------------------------------------------------------- float functions of 8-bit integers
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def exp_of_bytes(x, o):
  o[...] = ml.exp(x[...])      # an int8 tensor


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def exp_of_bytes_fixed(x, o):
  o[...] = ml.exp(x[...].astype(jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x, y: S(x.shape, jnp.float32))
def atan2_of_bytes(x, y, o):
  o[...] = ml.atan2(x[...], y[...])      # two uint8 tensors


@mg.mgpu_kernel(out_shape=lambda x, y: S(x.shape, jnp.float32))
def atan2_of_bytes_fixed(x, y, o):
  o[...] = ml.atan2(x[...].astype(jnp.float32), y[...].astype(jnp.float32))


def test_float_function_of_8bit_integers_hints_a_float_conversion_that_works():
  """ml.exp of an int8 tensor said 'no register arithmetic on 8-bit types' and hinted x.astype(jnp.int32)
  (ml.exp of which is an error too); ml.atan2 of two uint8 tensors hinted atan2 of int32s cast back to uint8.
  Both now say a float is needed and convert to float32, as jnp computes (jnp.exp of int8 is float32)."""
  x = _ints(jnp.int8, (1024,), 13, -20, 20)
  with pytest.raises(mg.UnsupportedDtypeError) as info:
    exp_of_bytes.check(S(x.shape, x.dtype))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# an int8 tensor"), 11)
  assert str(e).splitlines()[0].endswith("ml.exp needs a floating-point operand, got int8 [MG106]")
  assert e.hint == "convert first: x[...].astype(jnp.float32)"
  np.testing.assert_allclose(exp_of_bytes_fixed(x, interpret=True), jnp.exp(x), rtol=1e-6)

  a, b = _ints(jnp.uint8, (1024,), 14), _ints(jnp.uint8, (1024,), 15)
  with pytest.raises(mg.UnsupportedDtypeError) as info:
    atan2_of_bytes.check(S(a.shape, a.dtype), S(b.shape, b.dtype))
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of("# two uint8 tensors"), 11)
  assert str(e).splitlines()[0].endswith("ml.atan2 needs a floating-point operand, got uint8 [MG106]")
  assert e.hint == ("convert both first: ml.atan2(x[...].astype(jnp.float32), y[...].astype(jnp.float32)) (float32,"
                    " as jnp computes)")
  np.testing.assert_allclose(atan2_of_bytes_fixed(a, b, interpret=True), jnp.arctan2(a, b), rtol=1e-6)


# ---------------------------------------------------------------- integer powers with a run-time exponent
@mg.mgpu_kernel(out_shape=lambda x, n: (x,) * 4)
def int_powers(x, n, a, b, c, d):
  v = x[...]
  k = n[...]
  a[...] = 3 ** k
  b[...] = v ** k
  c[...] = 0 ** k
  d[...] = (-1) ** k


def _int_powers_ref(v, k):
  return 3 ** k, v ** k, 0 ** k, (-1) ** k


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (x.shape[0],))
def int_powers_scalar(x, n, o):
  i = ml.program_id(0)
  o[i] = x[i] ** n[i] + 3 ** n[i]


def _pow_operands(dtype, seed):
  info = np.iinfo(dtype)
  v = np.concatenate([[0, 0, 1, 2, 3, info.max, info.min], np.asarray(_ints(dtype, (1017,), seed))]).astype(dtype)
  k = np.concatenate([[0, 5, 7, 40, 5, 3, 2], np.asarray(_ints(dtype, (1017,), seed + 1, max(info.min, -70),
                                                                 min(info.max, 70)))]).astype(dtype)
  return jnp.asarray(v), jnp.asarray(k)


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.uint32, jnp.int16, jnp.uint8])
def test_integer_power_of_a_runtime_exponent_is_jnps(dtype):
  """`3 ** k` and `x ** k` of integer tensors were MG106 ('an exponent held in registers must be floating
  point'), whose hint computed in float32: 3.0 ** 5.0 is ml.exp2(5 * log2(3)) = 242.99997 there, 242 once
  converted back. They are jnp's integer power now (jnp.power's binary exponentiation over the exponent's
  low six bits, wrapping; negative exponents included), on tensors and scalars."""
  v, k = _pow_operands(dtype, 16)
  for got, want in zip(int_powers(v, k, interpret=True), _int_powers_ref(v, k)):
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)
  assert "@mosaic_gpu" in _export(int_powers, *_specs(v, k))
  vs, ks = v[:64], k[:64]
  np.testing.assert_array_equal(int_powers_scalar(vs, ks, interpret=True), vs ** ks + 3 ** ks)
  assert "@mosaic_gpu" in _export(int_powers_scalar, *_specs(vs, ks))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.int32, jnp.uint32, jnp.int16, jnp.uint8])
def test_gpu_integer_power_of_a_runtime_exponent(dtype):
  v, k = _pow_operands(dtype, 17)
  for got, want in zip(int_powers(v, k), _int_powers_ref(v, k)):
    np.testing.assert_array_equal(got, want)
  vs, ks = v[:64], k[:64]
  np.testing.assert_array_equal(int_powers_scalar(vs, ks), vs ** ks + 3 ** ks)
