"""Probe 33b (a FlagGems / ATen user writing everyday operators: scans, sorts, gathers, remainders,
bitwise ops, sign, min/max with NaN, var/std, norms, one-hot, triu, dropout) in f32/f16/bf16/int/bool,
compared with jnp in interpret mode and exported for CUDA."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- signed // and % by -1
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x), grid=(1,))
def signed_divisions(x, y, q, r, f):
  q[...] = x[...] // y[...]
  r[...] = x[...] % y[...]
  f[...] = ml.fmod(x[...], y[...])


@mg.mgpu_kernel(out_shape=lambda a: S((3,), a.dtype), grid=(1,))
def scalar_divisions(a, out):
  out[0] = a[0] // a[1]
  out[1] = a[0] % a[1]
  out[2] = ml.fmod(a[0], a[1])


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def by_a_constant(x, q, r):
  q[...] = x[...] // 3
  r[...] = x[...] % 3


def _divisor_defs(text):
  """For each signed division in a Mosaic module, the line defining its divisor."""
  lines = str(text).splitlines()
  defs = {m.group(1): l for l in lines if (m := re.match(r"\s*(%[\w#]+) = ", l))}
  return [defs.get(m.group(1), "") for l in lines
          if (m := re.search(r"arith\.(?:floordivsi|remsi|divsi) %[\w#]+, (%[\w#]+)", l))]


def _divisions_inputs(dtype):
  lo = np.iinfo(dtype).min
  a = np.array([lo, -7, 7, lo, -lo - 1, 5, -1, 0] * 16, dtype)
  b = np.array([-1, -1, -1, 3, -1, -2, 7, -1] * 16, dtype)
  return jnp.asarray(a), jnp.asarray(b)


def test_a_signed_division_by_minus_one_is_guarded_on_the_gpu():
  """LLVM's sdiv and srem of the lowest value by -1 are undefined behaviour (the quotient overflows),
  where jnp's INT_MIN // -1 is INT_MIN and INT_MIN % -1 is 0 (interpret mode's results): the divisor
  of every signed //, % and ml.fmod with a run-time divisor is now 1 where it was -1, the quotient
  negated back. A division by a constant other than -1 is left alone."""
  for kernel, specs in ((signed_divisions, [S((128,), I32)] * 2), (signed_divisions, [S((128,), jnp.int16)] * 2),
                        (scalar_divisions, [S((2,), I32)])):
    defs = _divisor_defs(kernel.mlir(*specs))
    assert defs and all("arith.select" in d for d in defs), defs
  assert not any("arith.select" in d for d in _divisor_defs(by_a_constant.mlir(S((128,), I32))))
  for dtype in (np.int32, np.int16):
    a, b = _divisions_inputs(dtype)
    for got, want in zip(signed_divisions(a, b, interpret=True), (a // b, a % b, jnp.fmod(a, b))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.gpu
def test_gpu_signed_division_by_minus_one_matches_jnp():
  for dtype in (np.int32, np.int16):
    a, b = _divisions_inputs(dtype)
    for got, want in zip(jax.jit(signed_divisions)(a, b), (a // b, a % b, jnp.fmod(a, b))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  a = jnp.asarray(np.array([np.iinfo(np.int32).min, -1], np.int32))
  want = [a[0] // a[1], a[0] % a[1], jnp.fmod(a[0], a[1])]
  np.testing.assert_array_equal(np.asarray(jax.jit(scalar_divisions)(a)), np.asarray(jnp.stack(want)))


# ---------------------------------------------------------------- jnp.sign / torch.sign
@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_of_ints(x, out):
  out[...] = ml.sign(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_as_hinted(x, out):
  out[...] = ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...]))


def test_the_sign_hint_keeps_the_dtype_nan_and_negative_zero():
  """The hint was ml.where(x > 0, 1.0, ml.where(x < 0, -1.0, 0.0)): float32 for integers (so the
  followed hint's store into an int32 output was MG102), 0.0 for NaN and for -0.0 where jnp.sign
  gives NaN and -0.0."""
  expect(sign_of_ints, [S((128,), I32)], mg.UnknownNameError, "ml.sign", "ml has no attribute 'sign'",
         hint="no ml.sign: ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...])) (jnp.sign: x[...]'s dtype,"
              " NaN and -0.0 kept)")
  ints = jnp.asarray(np.array([np.iinfo(np.int32).min, -7, -1, 0, 1, 9, np.iinfo(np.int32).max, 0] * 16, np.int32))
  np.testing.assert_array_equal(np.asarray(sign_as_hinted(ints, interpret=True)), np.asarray(jnp.sign(ints)))
  for dtype in (F32, jnp.bfloat16):
    x = jnp.asarray(np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -2.5, 3.0, 1e-30] * 16, np.float32), dtype)
    got, want = np.asarray(sign_as_hinted(x, interpret=True), np.float32), np.asarray(jnp.sign(x), np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------- var / std with correction
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype),) * 2, grid=(1,))
def corrected_var_std(x, v, s):
  v[...] = ml.var(x[...], axis=1, correction=1)
  s[...] = x[...].std(axis=1, correction=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def ddof_and_correction(x, v):
  v[...] = ml.var(x[...], axis=1, ddof=1, correction=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def torch_unbiased(x, v):
  v[...] = x[...].var(dim=1, unbiased=True)


def test_var_and_std_take_jnps_correction_and_hint_torchs_unbiased():
  """`correction=` (jnp.var's and torch.var's) was MG003 'unexpected keyword argument'."""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), F32) * 3 + 10
  v, s = corrected_var_std(x, interpret=True)
  np.testing.assert_allclose(np.asarray(v), np.asarray(jnp.var(x, 1, correction=1)), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(s), np.asarray(jnp.std(x, 1, correction=2)), rtol=1e-5)
  expect(ddof_and_correction, [S((8, 128), F32)], mg.KernelTypeError, "ml.var(",
         "ml.var: ddof and correction are one setting, given both", hint="give one: ml.var(x[...], axis=1, ddof=1)")
  expect(torch_unbiased, [S((8, 128), F32)], mg.KernelTypeError, "x[...].var(",
         "ml.var: got an unexpected keyword argument 'dim'",
         hint="write axis= for dim=: torch's unbiased=True is ddof=1 here (or jnp's correction=): "
              "ml.var(x[...], axis=1, ddof=1); ml.var(x, axis=None, ddof=0, keepdims=False, *, correction=None, where=None, dtype=None, mean=None)")


# ---------------------------------------------------------------- ATen's operators ml has no function for
@mg.mgpu_kernel(out_shape=lambda x: x)
def aten_dropout(x, out):
  out[...] = ml.dropout(x[...], 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def aten_logical_and(x, out):
  out[...] = ml.logical_and(x[...] > 0, x[...] < 1).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), I32))
def aten_count_nonzero(x, out):
  out[...] = ml.count_nonzero(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def aten_eye(x, out):
  out[...] = ml.eye(8, 128)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def aten_nanmax(x, out):
  out[...] = ml.nanmax(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def aten_remainder(x, out):
  out[...] = ml.remainder(x[...], 2.5)


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0],), I32), x, S(x.shape, jnp.bool_)))
def aten_as_hinted(x, a, b, c, d):      # the hints above and below, followed
  v = x[...]
  a[...] = (ml.arange(8)[:, None] == ml.arange(128)[None, :]).astype(x.dtype)
  b[...] = ml.sum(v != 0, axis=1)
  c[...] = ml.where(v > 0, 0.0, v) + ml.cummax(v, axis=1) + v % 2.5
  d[...] = (v == float('inf')) | ~(v > 0)


def test_atens_everyday_operators_missing_from_ml_are_hinted():
  """They were 'check the spelling' (ml.logical_and, ml.count_nonzero, ml.eye, ml.nanmax), 'did you mean
  ml.dot?' (ml.dropout); ml.remainder's hint said x - ml.floor(x / y) * y on floats, where % is exact."""
  spec = [S((8, 128), F32)]
  expect(aten_dropout, spec, mg.UnknownNameError, "ml.dropout", "ml has no attribute 'dropout'",
         hint="no ml.dropout: ml.where(ml.rand(seed, offsets) >= p, x * (1.0 / (1.0 - p)), 0.0) with seed an"
              " ml.scalar parameter and offsets each element's own index (examples/dropout.py)")
  expect(aten_logical_and, spec, mg.UnknownNameError, "ml.logical_and", "ml has no attribute 'logical_and'",
         hint="no ml.logical_and: write the operator on booleans, a & b (comparisons give booleans; of numbers,"
              " compare first: (x != 0) & (y != 0))")
  expect(aten_count_nonzero, spec, mg.UnknownNameError, "ml.count_nonzero", "ml has no attribute 'count_nonzero'",
         hint="no ml.count_nonzero: ml.sum(x != 0, axis=...) (booleans count in int32, as jnp.count_nonzero)")
  e = expect(aten_eye, spec, mg.UnknownNameError, "ml.eye", "ml has no attribute 'eye'")
  assert e.hint.startswith("no ml.eye: compare index vectors, (ml.arange(m)[:, None] == ml.arange(n)[None, :])")
  e = expect(aten_nanmax, spec, mg.UnknownNameError, "ml.nanmax", "ml has no attribute 'nanmax'")
  assert e.hint.startswith("no ml.nanmax: ml.max(ml.where(x != x, float('-inf'), x), axis=...)")
  expect(aten_remainder, spec, mg.UnknownNameError, "ml.remainder", "ml has no attribute 'remainder'",
         hint="no ml.remainder: write the operator, x[...] % 2.5 (flooring: the divisor's sign, as jnp.remainder"
              " and torch.remainder, exact on floats too)")
  x = jnp.asarray(np.random.default_rng(1).standard_normal((8, 128)) * 4, F32).at[0, :4].set(
      jnp.array([0.0, jnp.inf, -jnp.inf, jnp.nan]))
  a, b, c, d = aten_as_hinted(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), np.eye(8, 128, dtype=np.float32))
  np.testing.assert_array_equal(np.asarray(b), np.asarray(jnp.count_nonzero(x, axis=1)))
  np.testing.assert_array_equal(np.asarray(c), np.asarray(jnp.where(x > 0, 0.0, x) + jax.lax.cummax(x, axis=1)
                                                          + jnp.remainder(x, 2.5)))
  np.testing.assert_array_equal(np.asarray(d), np.asarray(jnp.isposinf(x) | jnp.logical_not(x > 0)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def torch_masked_fill(x, out):
  out[...] = x[...].masked_fill(x[...] > 0, 0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def torch_cummax(x, out):
  out[...] = x[...].cummax(dim=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def torch_neg(x, out):
  out[...] = x[...].neg()


@mg.mgpu_kernel(out_shape=lambda x: x)
def torch_remainder(x, out):
  out[...] = x[...].remainder(2.5)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bool_))
def torch_isposinf(x, out):
  out[...] = jnp.isposinf(x[...])


def test_torchs_tensor_methods_are_hinted_in_the_users_words():
  """v.masked_fill, v.cummax, v.neg, v.remainder: the hint listed the register methods."""
  spec = [S((8, 128), F32)]
  expect(torch_masked_fill, spec, mg.KernelTypeError, "x[...].masked_fill",
         "a register tensor has no attribute 'masked_fill'", hint="write ml.where(x[...] > 0, 0.0, x[...])")
  expect(torch_cummax, spec, mg.KernelTypeError, "x[...].cummax", "a register tensor has no attribute 'cummax'",
         hint="write ml.cummax(x[...], axis=1) (torch's .cummax(dim) gives the indices too; ml.cummax gives the"
              " values)")
  expect(torch_neg, spec, mg.KernelTypeError, "x[...].neg", "a register tensor has no attribute 'neg'",
         hint="write -x[...]")
  expect(torch_remainder, spec, mg.KernelTypeError, "x[...].remainder",
         "a register tensor has no attribute 'remainder'",
         hint="write the operator: x[...] % 2.5 (flooring: the divisor's sign, as torch.remainder)")
  x = jnp.asarray(np.random.default_rng(2).standard_normal((8, 128)), F32).at[0, :3].set(
      jnp.array([jnp.inf, -jnp.inf, jnp.nan]))        # jnp.isposinf computes since probe 56h (it was this MG003)
  np.testing.assert_array_equal(np.asarray(torch_isposinf(x, interpret=True)), np.asarray(jnp.isposinf(x)))


# ---------------------------------------------------------------- a Python float meeting 16-bit floats in libdevice math
@mg.mgpu_kernel(out_shape=lambda x: (x,) * 5)
def weak_float_operands(x, fm, rf, at, pw, pp):
  v = x[...]
  fm[...] = ml.fmod(v, 0.3)
  rf[...] = ml.fmod(0.3, v)
  at[...] = ml.atan2(v, 0.3)
  pw[...] = ml.pow(ml.abs(v), 0.3)
  pp[...] = ml.abs(v) ** 0.3


def _weak_float_reference(x):
  a = jnp.abs(x)
  return jnp.fmod(x, 0.3), jnp.fmod(0.3, x), jnp.arctan2(x, 0.3), jnp.power(a, 0.3), a ** 0.3


def test_a_python_float_takes_the_16_bit_dtype_in_fmod_atan2_and_pow():
  """ml.fmod(x_f16, 0.3) divided by float32's 0.3 where jnp.fmod divides by float16's 0.2998 (a weakly
  typed number takes the tensor's dtype): 659 of 1024 float16 remainders differed, bfloat16's by up to
  0.003; ml.atan2, ml.pow and x ** 0.3 too."""
  for dtype in (jnp.float16, jnp.bfloat16):
    x = jnp.asarray(np.random.default_rng(5).standard_normal((8, 128)), dtype)
    for got, want in zip(weak_float_operands(x, interpret=True), _weak_float_reference(x)):
      assert got.dtype == want.dtype
      np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


@pytest.mark.gpu
def test_gpu_a_python_float_takes_the_16_bit_dtype_in_fmod_atan2_and_pow():
  for dtype in (jnp.float16, jnp.bfloat16):
    x = jnp.asarray(np.random.default_rng(5).standard_normal((8, 128)), dtype)
    outs, ref = jax.jit(weak_float_operands)(x), weak_float_operands(x, interpret=True)
    # the exact remainders, against interpret mode (numpy's, as jnp's on the CPU): jnp.fmod of bfloat16 run
    # by XLA on the H200 differed from them by 1-3 ulps in the first run, the kernel's did not differ from
    # interpret mode's in test_probe32a's fmod tests
    np.testing.assert_array_equal(np.asarray(outs[0], np.float32), np.asarray(ref[0], np.float32))
    np.testing.assert_array_equal(np.asarray(outs[1], np.float32), np.asarray(ref[1], np.float32))
    for got, want in zip(outs[2:], ref[2:]):     # libdevice: within an ulp
      np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, atol=1e-3)


# ---------------------------------------------------------------- Triton's masked load at computed places
@mg.mgpu_kernel(out_shape=lambda t, ids, *, pad: S((ids.shape[0], t.shape[1]), t.dtype),
                grid=lambda t, ids, *, pad: (ml.cdiv(ids.shape[0], 64),))
def embedding_padding_idx(t, ids, out, *, pad: ml.constexpr):
  i = ml.program_id(0)
  ok = i * 64 + ml.arange(64) < ids.shape[0]
  rows = ids.at[ml.ds(i * 64, 64)].load(mask=ok, other=pad)
  v = t.at[rows, :].load(mask=(rows != pad)[:, None], other=0)       # padding_idx's rows are 0
  out.at[ml.ds(i * 64, 64), :].store(v, mask=ok[:, None])


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype))
def gather_or_minus_one(t, ids, out):
  j = ids[...]
  out[...] = ml.load(t.at[j], mask=(j >= 0) & (j < t.shape[0]), other=-1)


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype))
def gather_float_other(t, ids, out):
  j = ids[...]
  out[...] = t.at[j].load(mask=j != 0, other=0.5)


@mg.mgpu_kernel(out_shape=lambda t, ids: (S(ids.shape, t.dtype),) * 2)
def gather_static_masks(t, ids, a, b):
  j = ids[...]
  a[...] = t.at[j].load(mask=True, other=1.0)
  b[...] = t.at[j].load(mask=False, other=1.0)


def _embedding_inputs(dtype):
  rng = np.random.default_rng(3)
  return jnp.asarray(rng.standard_normal((30, 64)), dtype), jnp.asarray(rng.integers(0, 30, (100,)), I32)


def test_a_masked_load_of_a_ref_indexed_by_tensors_is_a_gather_and_a_select():
  """`t.at[rows, :].load(mask=..., other=0)` (Triton's tl.load(t_ptr + rows * d + cols, mask=m, other=0),
  embedding's padding_idx) was MG003 'it has no .load'. The gather's indices clamp, so the read never
  leaves the array; the mask then selects `other`. A run of consecutive positions keeps its window hint."""
  for dtype in (F32, jnp.bfloat16):
    t, ids = _embedding_inputs(dtype)
    got = embedding_padding_idx(t, ids, interpret=True, pad=3)
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(jnp.where((ids == 3)[:, None], 0, t[ids]), np.float32))
  t = jnp.arange(50, dtype=I32) * 3
  j = jnp.asarray(np.array([-5, 0, 49, 50, 7, -1, 12, 100] * 16, np.int32))
  np.testing.assert_array_equal(np.asarray(gather_or_minus_one(t, j, interpret=True)),
                                np.asarray(jnp.where((j >= 0) & (j < 50), t[jnp.clip(j, 0, 49)], -1)))
  a, b = gather_static_masks(t.astype(F32), j, interpret=True)       # a static mask: all, or none
  np.testing.assert_array_equal(np.asarray(a), np.asarray(t.astype(F32)[j]))
  np.testing.assert_array_equal(np.asarray(b), np.ones(128, np.float32))
  expect(gather_float_other, [S((50,), I32), S((128,), I32)], mg.DtypeMismatchError, "t.at[j].load",
         "the gather's other (0.5) is a float but t is int32", hint="an integer of int32: other=0")   # (probe 67a:
  # a gather's other takes the rule of every masked load, access.whole_other: other=0.0 on int32 data is 0)


@pytest.mark.gpu
def test_gpu_a_masked_load_of_a_ref_indexed_by_tensors_matches_jnp():
  for dtype in (F32, jnp.bfloat16):
    t, ids = _embedding_inputs(dtype)
    got = jax.jit(lambda t, ids: embedding_padding_idx(t, ids, pad=3))(t, ids)
    np.testing.assert_array_equal(np.asarray(got, np.float32),
                                  np.asarray(jnp.where((ids == 3)[:, None], 0, t[ids]), np.float32))


# ---------------------------------------------------------------- scatter_add of 8- and 16-bit integers
@mg.mgpu_kernel(out_shape=lambda src, ids: S((50,), src.dtype))
def scatter_add_int8(src, ids, out):
  ml.atomic_add(out.at[ids[...]], src[...])


@mg.mgpu_kernel(out_shape=lambda src, ids: S((50,), I32))
def scatter_add_int8_as_hinted(src, ids, out):
  ml.atomic_add(out.at[ids[...]], src[...].astype(jnp.int32))


def test_a_narrow_integer_scatter_add_hints_the_32_bit_output():
  """The hint was only 'convert the value and the array to a supported dtype'; since probe 56b an int8 scatter add
  is a cas loop on each element's 32-bit word, wrapping as jnp's (the hinted int32 output still agrees)."""
  rng = np.random.default_rng(4)
  src = jnp.asarray(rng.integers(-128, 128, 128), jnp.int8)
  ids = jnp.asarray(rng.integers(0, 5, 128), I32)        # many updates an element: the int8 sum wraps
  want = np.asarray(jnp.zeros(50, jnp.int8).at[ids].add(src))
  np.testing.assert_array_equal(np.asarray(scatter_add_int8(src, ids, interpret=True)), want)
  scatter_add_int8.check(S((128,), jnp.int8), S((128,), I32))
  got = scatter_add_int8_as_hinted(src, ids, interpret=True).astype(jnp.int8)
  np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- nan_to_num and linspace hints, for every float dtype
@mg.mgpu_kernel(out_shape=lambda x: x)
def nan_to_num_in_kernel(x, out):
  out[...] = jnp.nan_to_num(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def nan_to_num_as_hinted(x, out):
  out[...] = ml.where(x[...] != x[...], 0.0, ml.clip(x[...], -jnp.finfo(x[...].dtype).max, jnp.finfo(x[...].dtype).max))


def test_the_nan_to_num_hint_uses_the_dtypes_largest_value():
  """It wrote float32's 3.4028235e38, which a float16 or bfloat16 tensor's clip converts to inf: the
  followed hint left +-inf as they were (jnp.nan_to_num gives 65504 for float16)."""
  f = np.array([np.nan, np.inf, -np.inf, 1.0, -2.0, 0.0, 65504, -65504] * 16, np.float32)
  for dtype in (jnp.float16, jnp.bfloat16, F32):
    x = jnp.asarray(f, dtype)        # (jnp.nan_to_num computes since probe 47b, the dtype's largest values too)
    np.testing.assert_array_equal(np.asarray(nan_to_num_in_kernel(x, interpret=True), np.float32),
                                  np.asarray(jnp.nan_to_num(x), np.float32))
    np.testing.assert_array_equal(np.asarray(nan_to_num_as_hinted(x, interpret=True), np.float32),
                                  np.asarray(jnp.nan_to_num(x), np.float32))


# ---------------------------------------------------------------- Python's any/all/max/sum of one tensor
@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.bool_))
def python_any_of_a_tensor(x, out):
  out[...] = any(x[...] > 0)


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def python_sum_of_a_tensor(x, out):
  out[...] = sum(x[...] * 2)


def test_pythons_reductions_of_one_tensor_hint_the_ml_call_in_the_users_words():
  """any(v > 0) hinted 'ml.max(t) of the bool tensor t' (ml.any exists), sum(v) 'ml.sum(x, axis=...)'."""
  expect(python_any_of_a_tensor, [S((128,), F32)], mg.KernelTypeError, "any(",
         "any(...) of register values is Python's iteration, which kernels do not do",
         hint="whether any element of x[...] > 0 holds is ml.any(x[...] > 0) (or ml.any(x[...] > 0, axis=...));"
              " combine register booleans elementwise with |: a | b | c")
  expect(python_sum_of_a_tensor, [S((128,), F32)], mg.UnsupportedSyntaxError, "sum(",
         "sum(...) of register values is not supported in a kernel",
         hint="reduce a register tensor with ml.sum(x[...] * 2) (or ml.sum(x[...] * 2, axis=...)); add values with +")


# ---------------------------------------------------------------- flips of register tensors
@mg.mgpu_kernel(out_shape=lambda x: (x,) * 4)
def flips(x, a, b, c, d):
  v = x[...]
  a[...] = ml.flip(v, axis=1)
  b[...] = v[::-1]
  c[...] = ml.flip(v)
  d[...] = v.flip(1)[:, ::-1][..., ::-1]       # torch's method, then two reversals


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype), x))
def flipped_statistic(x, m, o):
  v = x[...]
  m[...] = ml.flip(ml.max(v, axis=1))
  o[...] = ml.flip(ml.cumsum(v, axis=1), axis=1)         # a reversed cumsum's suffix sums, read back in order


def _flips_reference(x):
  return jnp.flip(x, 1), x[::-1], jnp.flip(x), jnp.flip(x, 1)


FLIP_SHAPES = [((8, 128), F32), ((16, 64), jnp.bfloat16), ((8, 128), jnp.int8), ((8, 128), jnp.bool_),
               ((1024, 2), I32), ((128, 3), I32)]


def _flip_input(shape, dtype):
  return jnp.asarray(np.random.default_rng(7).integers(-100, 100, shape), dtype)


def test_register_tensors_flip_through_smem():
  """jnp.flip of a register tensor (ml.flip, v[::-1], v[:, ::-1], torch's v.flip(1)) was MG003 / MG002
  ('a register tensor is not reversed in place'); it now goes through an SMEM scratch as ml.roll does.
  (1024, 2) and (128, 3) tiles have registers that cross rows: the reversed position is taken from the
  flat one."""
  for shape, dtype in FLIP_SHAPES:
    x = _flip_input(shape, dtype)
    for got, want in zip(flips(x, interpret=True), _flips_reference(x)):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
    jax.export.export(jax.jit(flips), platforms=["cuda"])(S(shape, dtype))
  x = jnp.asarray(np.random.default_rng(8).standard_normal((64, 128)), F32)
  m, o = flipped_statistic(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(m), np.asarray(jnp.flip(x.max(1))))
  np.testing.assert_allclose(np.asarray(o), np.asarray(jnp.flip(jnp.cumsum(x, 1), 1)), rtol=1e-5, atol=1e-5)
  jax.export.export(jax.jit(flipped_statistic), platforms=["cuda"])(S((64, 128), F32))


@pytest.mark.gpu
def test_gpu_register_tensors_flip_as_jnp():
  for shape, dtype in FLIP_SHAPES:
    x = _flip_input(shape, dtype)
    for got, want in zip(jax.jit(flips)(x), _flips_reference(x)):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  x = jnp.asarray(np.random.default_rng(8).standard_normal((64, 128)), F32)
  m, o = jax.jit(flipped_statistic)(x)
  np.testing.assert_array_equal(np.asarray(m), np.asarray(jnp.flip(x.max(1))))
  np.testing.assert_allclose(np.asarray(o), np.asarray(jnp.flip(jnp.cumsum(x, 1), 1)), rtol=1e-5, atol=1e-5)
