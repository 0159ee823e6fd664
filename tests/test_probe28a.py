"""Probe 28a (quantization and bit manipulation): conversions to bool as jnp's (x != 0); ml.abs of
unsigned values (a scalar's was the GPU's signed abs); compile-time proofs that take a Python int
meeting an unsigned value as the GPU holds it; ml.round(x, decimals); and hints for bit tricks
(logical shifts, population counts, leading zeros) that work when followed for the operand's dtype."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- .astype(bool) is x != 0
@mg.mgpu_kernel(out_shape=lambda x: (jax.ShapeDtypeStruct(x.shape, jnp.int8), jax.ShapeDtypeStruct(x.shape, jnp.int32)))
def nonzero_mask(x, m8, m32):
  v = x[...]
  m8[...] = v.astype(jnp.bool_).astype(jnp.int8)
  m32[...] = ml.where(ml.cast(v, bool), 1, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def branch_on_bool(x, out):
  i = ml.program_id(0)
  if bool(x[i]):
    out[i] = x[i].astype(bool).astype(out.dtype) * 5
  else:
    out[i] = 7


_VALUES = {jnp.float32: [0.0, -0.0, np.nan, 0.25, -2.0, np.inf, -np.inf, 1e-30],
           jnp.bfloat16: [0.0, -0.0, np.nan, 0.25, -2.0, np.inf, -np.inf, 3.0],
           jnp.int32: [0, 1, -1, 2 ** 31 - 1, -2 ** 31, 7, 0, 2],
           jnp.uint8: [0, 1, 255, 128, 0, 2, 3, 0], jnp.int8: [0, -128, 127, 1, -1, 0, 5, 0],
           jnp.float8_e4m3fn: [0.0, -0.0, np.nan, 0.25, -2.0, 448.0, 0.0, 1.0]}


@pytest.mark.parametrize("dtype", list(_VALUES), ids=lambda d: jnp.dtype(d).name)
def test_astype_bool_is_nonzero_as_jnp(dtype):
  x = jnp.asarray(np.resize(np.asarray(_VALUES[dtype], np.float64), 256)).astype(dtype)
  m8, m32 = nonzero_mask(x, interpret=True)
  want = np.asarray(x.astype(bool))
  np.testing.assert_array_equal(np.asarray(m8), want.astype(np.int8))
  np.testing.assert_array_equal(np.asarray(m32), want.astype(np.int32))
  assert "mosaic_gpu" in _export(nonzero_mask, jax.ShapeDtypeStruct((256,), dtype))


@pytest.mark.parametrize("dtype", [jnp.int32, jnp.float32, jnp.int16])
def test_bool_of_a_scalar_branches_on_nonzero(dtype):
  x = jnp.asarray(np.array([0, 3, -1, 0, np.nan if dtype == jnp.float32 else 9, 0, 2, -0.0])).astype(dtype)
  got = np.asarray(branch_on_bool(x, interpret=True))
  np.testing.assert_array_equal(got, np.where(np.asarray(x) != 0, 5, 7).astype(np.asarray(x).dtype))
  assert "mosaic_gpu" in _export(branch_on_bool, jax.ShapeDtypeStruct((8,), dtype))


# ---------------------------------------------------------------- logical shifts: hints per dtype


@mg.mgpu_kernel(out_shape=lambda a: a)
def srl_lax(a, o):
  x = a[...]
  o[...] = jax.lax.shift_right_logical(x, 3)


@mg.mgpu_kernel(out_shape=lambda a: a)
def sra_jnp(a, o):
  x = a[...]
  o[...] = jnp.right_shift(x, 3)


@mg.mgpu_kernel(out_shape=lambda a: a)
def shl_jnp(a, o):
  x = a[...]
  o[...] = jnp.left_shift(x, 3)


_SRL = {   # the hint's form for each dtype, then a kernel that writes exactly that
    jnp.int8: "(ml.bitcast(x, jnp.uint8).astype(jnp.int32) >> 3).astype(jnp.int8)",
    jnp.uint8: "(x.astype(jnp.int32) >> 3).astype(jnp.uint8)",
    jnp.int16: "ml.bitcast(ml.bitcast(x, jnp.uint16) >> 3, jnp.int16)",
    jnp.uint16: "x >> 3",
    jnp.int32: "ml.bitcast(ml.bitcast(x, jnp.uint32) >> 3, jnp.int32)",
    jnp.uint32: "x >> 3",
}


@mg.mgpu_kernel(out_shape=lambda a: a)
def srl_followed(a, o):
  x = a[...]
  if x.dtype == jnp.int8:
    o[...] = (ml.bitcast(x, jnp.uint8).astype(jnp.int32) >> 3).astype(jnp.int8)
  elif x.dtype == jnp.uint8:
    o[...] = (x.astype(jnp.int32) >> 3).astype(jnp.uint8)
  elif x.dtype == jnp.int16:
    o[...] = ml.bitcast(ml.bitcast(x, jnp.uint16) >> 3, jnp.int16)
  elif x.dtype == jnp.int32:
    o[...] = ml.bitcast(ml.bitcast(x, jnp.uint32) >> 3, jnp.int32)
  else:
    o[...] = x >> 3


def _ints(dtype, n=256):
  info = np.iinfo(dtype)
  return jnp.asarray(np.random.default_rng(5).integers(info.min, info.max, n, dtype=np.int64, endpoint=True)
                     .astype(dtype))


@pytest.mark.parametrize("dtype", list(_SRL), ids=lambda d: jnp.dtype(d).name)
def test_the_logical_shift_hint_names_the_form_for_the_operands_dtype_and_works(dtype):
  """Was the int32 recipe for every dtype (ml.bitcast(x, jnp.uint32) of an int16 is MG106)."""
  S = jax.ShapeDtypeStruct((256,), dtype)
  x = _ints(dtype)      # (lax.shift_right_logical by a static amount computes as that form since probe 47b)
  np.testing.assert_array_equal(np.asarray(srl_lax(x, interpret=True)),
                                np.asarray(jax.lax.shift_right_logical(x, jnp.asarray(3, dtype))))
  got = srl_followed(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jax.lax.shift_right_logical(x, jnp.asarray(3, dtype))))
  assert "mosaic_gpu" in _export(srl_followed, S)


@mg.mgpu_kernel(out_shape=lambda a: (a, a))
def shifts_of_bytes_followed(a, r, l):
  x = a[...]
  r[...] = (x.astype(jnp.int32) >> 3).astype(x.dtype)
  l[...] = (x.astype(jnp.int32) << 3).astype(x.dtype)


@pytest.mark.parametrize("dtype", [jnp.int8, jnp.uint8], ids=lambda d: jnp.dtype(d).name)
def test_shifts_of_bytes_hint_the_32_bit_form_which_works(dtype):
  """Was 'write the operator: x >> 3', which is MG106 on 8-bit values (no 8-bit shifts); then the 32-bit form's
  hint; since probe 47b jnp.right_shift and jnp.left_shift compute as the operators, which shift bytes in 32 bits."""
  S = jax.ShapeDtypeStruct((256,), dtype)
  x = _ints(dtype)
  np.testing.assert_array_equal(np.asarray(sra_jnp(x, interpret=True)), np.asarray(jnp.right_shift(x, 3)))
  np.testing.assert_array_equal(np.asarray(shl_jnp(x, interpret=True)), np.asarray(jnp.left_shift(x, 3)))
  r, l = shifts_of_bytes_followed(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(r), np.asarray(jnp.right_shift(x, jnp.asarray(3, dtype))))
  np.testing.assert_array_equal(np.asarray(l), np.asarray(jnp.left_shift(x, jnp.asarray(3, dtype))))
  assert "mosaic_gpu" in _export(shifts_of_bytes_followed, S)


def test_right_shift_of_int16_names_its_own_logical_form():
  """(jnp.right_shift of int16 computes as >> since probe 47b: arithmetic, as jnp's)"""
  x = _ints(np.int16)
  np.testing.assert_array_equal(np.asarray(sra_jnp(x, interpret=True)), np.asarray(jnp.right_shift(x, 3)))


@mg.mgpu_kernel(out_shape=lambda a, n: a)
def srl_lax_by(a, n, o):
  x = a[...]
  k = n[...]
  o[...] = jax.lax.shift_right_logical(x, k)


@mg.mgpu_kernel(out_shape=lambda a, n: (a, a))
def int64_logical_followed(a, n, s, r):
  x = a[...]
  k = n[...]
  s[...] = (x >> 3) & 0x1fffffffffffffff
  r[...] = (x >> k) & ~((ml.full(x.shape, -2 ** 63, jnp.int64) >> k) << 1)


def test_int64_logical_shift_hints_work_with_x64():
  """int64 has no unsigned twin: lax.shift_right_logical of int64 was MG003 whose hint cleared the bits >> filled
  (was ml.bitcast(x, jnp.uint32)); since probe 70a (design note 230) it computes lax's result, and the hint's forms
  still do."""
  with jax.enable_x64(True):
    S = jax.ShapeDtypeStruct((256,), jnp.int64)
    x = _ints(np.int64)
    n = jnp.asarray(np.arange(256) % 64, jnp.int64)
    np.testing.assert_array_equal(np.asarray(srl_lax(x, interpret=True)),
                                  np.asarray(jax.lax.shift_right_logical(x, jnp.int64(3))))
    np.testing.assert_array_equal(np.asarray(srl_lax_by(x, n, interpret=True)),
                                  np.asarray(jax.lax.shift_right_logical(x, n)))
    s, r = int64_logical_followed(x, n, interpret=True)
    np.testing.assert_array_equal(np.asarray(s), np.asarray(jax.lax.shift_right_logical(x, jnp.int64(3))))
    np.testing.assert_array_equal(np.asarray(r), np.asarray(jax.lax.shift_right_logical(x, n)))
    assert "mosaic_gpu" in _export(int64_logical_followed, S, S)


# ---------------------------------------------------------------- compile-time proofs: ints meeting unsigned values
# A Python int meets a uint32 as the GPU holds it (-1 is 0xFFFFFFFF, as jnp converts it); the grid
# evaluation and the static masks took it as the signed number, so they rejected valid kernels
# (windows at -128, outputs never written) and accepted one writing at -128.
@mg.mgpu_kernel(out_shape=lambda n: jax.ShapeDtypeStruct((256,), jnp.float32), grid=(2,))
def unsigned_min_window(n, o):
  i = ml.program_id(0).astype(jnp.uint32)
  j = ml.minimum(i, -1)                    # i: -1 is the largest uint32
  o.at[ml.ds(j.astype(jnp.int32) * 128, 128)][...] = ml.full((128,), 1.0, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda n: jax.ShapeDtypeStruct((256,), jnp.float32), grid=(2,))
def unsigned_compare_window(n, o):
  i = ml.program_id(0).astype(jnp.uint32)
  j = ml.where(i > -1, i + 5, i)           # never: i
  o.at[ml.ds(j.astype(jnp.int32) * 128, 128)][...] = ml.full((128,), 1.0, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda n: jax.ShapeDtypeStruct((256,), jnp.float32), grid=(2,))
def unsigned_division_window(n, o):
  i = ml.program_id(0).astype(jnp.uint32) + 4294967294
  j = i // -1                              # by 4294967295: 0, then 1
  o.at[ml.ds(j.astype(jnp.int32) * 128, 128)][...] = ml.full((128,), 1.0, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def unsigned_mask_store(x, o):
  idx = ml.arange(256).astype(jnp.uint32)
  o.store(x[...], mask=idx <= -1)          # everywhere


@mg.mgpu_kernel(out_shape=lambda x: x)
def unsigned_min_mask_store(x, o):
  idx = ml.minimum(ml.arange(256).astype(jnp.uint32), -1)
  o.store(x[...], mask=idx < 256)          # everywhere


@pytest.mark.parametrize("kernel", [unsigned_min_window, unsigned_compare_window, unsigned_division_window],
                         ids=lambda k: k.__name__)
def test_python_ints_meet_unsigned_scalars_as_the_gpu_holds_them(kernel):
  n = jnp.zeros((1,), jnp.uint32)
  np.testing.assert_array_equal(np.asarray(kernel(n, interpret=True)), np.ones(256, np.float32))
  assert "mosaic_gpu" in _export(kernel, jax.ShapeDtypeStruct((1,), jnp.uint32))


@pytest.mark.parametrize("kernel", [unsigned_mask_store, unsigned_min_mask_store], ids=lambda k: k.__name__)
def test_static_masks_of_unsigned_values_take_python_ints_as_the_gpu_does(kernel):
  x = jnp.arange(256, dtype=jnp.float32)
  np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)), np.asarray(x))
  assert "mosaic_gpu" in _export(kernel, jax.ShapeDtypeStruct((256,), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda n: jax.ShapeDtypeStruct((256,), jnp.float32), grid=(2,))
def unsigned_max_window(n, o):
  i = ml.program_id(0).astype(jnp.uint32)
  j = ml.maximum(i, -1)                    # 0xFFFFFFFF: -1 as int32, a window at -128
  o.at[ml.ds(j.astype(jnp.int32) * 128, 128)][...] = ml.full((128,), 1.0, jnp.float32)


def test_a_window_an_unsigned_max_puts_before_the_start_is_rejected_while_compiling():
  """Was accepted (the proof took max(i, -1) as i) and exported; the GPU wrote o[-128:0]."""
  expect(unsigned_max_window, [jax.ShapeDtypeStruct((1,), jnp.uint32)], mg.IndexOutOfBoundsError,
         "o.at[ml.ds(j.astype(jnp.int32) * 128, 128)][...] =",
         "this register write touches o[-128:0] in program (0, 0, 0), outside o's shape (256,)")


# ---------------------------------------------------------------- ml.round(x, decimals), round(x, n)
@mg.mgpu_kernel(out_shape=lambda a: (a, a, a, a))
def round_decimals(a, o2, o1, o3, om1):
  v = a[...]
  o2[...] = ml.round(v, 2)
  o1[...] = ml.round(v, decimals=1)
  o3[...] = round(v, 3)
  om1[...] = ml.round(v, -1)


def _rounded(x, n):
  """jnp.round(x, n)'s arithmetic: XLA's algebraic simplifier makes its division by the constant 10**n a product
  by the constant's reciprocal, on every platform (probe 53h; bfloat16's is the division, as XLA on the CPU)."""
  x = np.asarray(x)
  w = x.astype(np.float32) if x.dtype == np.float16 else x
  f = np.asarray(10.0 ** n, w.dtype)
  if w.dtype == np.float32:
    return (np.round(w * f) * (np.float32(1) / f)).astype(x.dtype)
  return (np.round(w * f) / f).astype(x.dtype)


@pytest.mark.parametrize("dtype", [jnp.float32, jnp.float16, jnp.bfloat16], ids=lambda d: jnp.dtype(d).name)
def test_round_to_decimals_as_jnp(dtype):
  """Was 'ml.round: too many positional arguments' (hint ml.round(x)), and MG003 for round(x, 3)."""
  x = np.concatenate([[2.5, -2.5, 0.125, 1.005, 3.14159, -0.5, np.nan, 7.5, 0.015, 0.025, 25, 35, 65000, -0.0],
                      np.random.default_rng(3).standard_normal(242) * 100])
  x = jnp.asarray(x).astype(dtype)
  got = round_decimals(x, interpret=True)
  for g, n in zip(got, (2, 1, 3, -1)):
    want = _rounded(x, n)
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(want, np.float32))
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(jnp.round(x, n), np.float32))   # jnp's own
  assert "mosaic_gpu" in _export(round_decimals, jax.ShapeDtypeStruct((256,), dtype))


@mg.mgpu_kernel(out_shape=lambda a: a)
def round_int_negative(a, o):
  o[...] = ml.round(a[...], -1)


def test_round_of_integers_to_negative_decimals_says_to_use_floats():
  expect(round_int_negative, [jax.ShapeDtypeStruct((256,), jnp.int32)], mg.KernelTypeError, "ml.round(a[...], -1)",
         "ml.round of int32 to decimals=-1: integers do not round to negative decimals (nor in jnp.round)",
         hint="work in floats: ml.round(a[...].astype(jnp.float32), -1)")


# ---------------------------------------------------------------- population counts and leading zeros: hints that work
@mg.mgpu_kernel(out_shape=lambda a: a)
def popcount_lax(a, o):
  x = a[...]
  o[...] = jax.lax.population_count(x)


@mg.mgpu_kernel(out_shape=lambda a: a)
def clz_lax(a, o):
  x = a[...]
  o[...] = jax.lax.clz(x)


_U = {jnp.int32: "ml.bitcast(x, jnp.uint32)", jnp.uint32: "x", jnp.int16: "ml.bitcast(x, jnp.uint16).astype(jnp.uint32)",
      jnp.uint8: "x.astype(jnp.uint32)"}
_COUNT = ("v = u - ((u >> 1) & 0x55555555); v = (v & 0x33333333) + ((v >> 2) & 0x33333333);"
          " count = (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24")
_SMEARED = ("u = u | (u >> 1); u = u | (u >> 2); u = u | (u >> 4); u = u | (u >> 8); u = u | (u >> 16)"
            " (every bit below the highest one set)")


@mg.mgpu_kernel(out_shape=lambda a: (a, a))
def bit_counts_followed(a, pc, lz):
  x = a[...]
  if x.dtype == jnp.int32:
    u = ml.bitcast(x, jnp.uint32)
  elif x.dtype == jnp.int16:
    u = ml.bitcast(x, jnp.uint16).astype(jnp.uint32)
  elif x.dtype == jnp.uint8:
    u = x.astype(jnp.uint32)
  else:
    u = x
  v = u - ((u >> 1) & 0x55555555); v = (v & 0x33333333) + ((v >> 2) & 0x33333333)  # noqa: E702
  count = (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24
  pc[...] = count.astype(x.dtype)
  u = u | (u >> 1); u = u | (u >> 2); u = u | (u >> 4); u = u | (u >> 8); u = u | (u >> 16)  # noqa: E702
  v = u - ((u >> 1) & 0x55555555); v = (v & 0x33333333) + ((v >> 2) & 0x33333333)  # noqa: E702
  count = (((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24
  lz[...] = (jnp.iinfo(x.dtype).bits - count).astype(x.dtype)


@pytest.mark.parametrize("dtype", list(_U), ids=lambda d: jnp.dtype(d).name)
def test_population_count_and_clz_hints_give_a_recipe_that_works(dtype):
  """Were 'kernels call ml.* functions on register values; decorate a helper ...' (ml.popc, ml.clz:
  'check the spelling'); then MG003 whose hints wrote the recipe below (`u = {_U}; {_COUNT}`); since probe 48b
  lax.population_count and lax.clz compute as that recipe."""
  S = jax.ShapeDtypeStruct((256,), dtype)
  x = _ints(dtype)
  np.testing.assert_array_equal(np.asarray(popcount_lax(x, interpret=True)), np.asarray(jax.lax.population_count(x)))
  np.testing.assert_array_equal(np.asarray(clz_lax(x, interpret=True)), np.asarray(jax.lax.clz(x)))
  pc, lz = bit_counts_followed(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(pc), np.asarray(jax.lax.population_count(x)))
  np.testing.assert_array_equal(np.asarray(lz), np.asarray(jax.lax.clz(x)))
  assert "mosaic_gpu" in _export(bit_counts_followed, S)


# ---------------------------------------------------------------- abs of unsigned values is the value, as jnp.abs
@mg.mgpu_kernel(out_shape=lambda a: (a, a), grid=lambda a: (a.shape[0] // 128,))
def abs_of_unsigned(a, each, whole):
  i = ml.program_id(0)
  for k in ml.static_range(4):
    each[i * 128 + k] = ml.abs(a[i * 128 + k])          # scalars: was math.absi, signed (|0xFFFFFFFF| = 1 on the GPU)
  whole.at[ml.ds(i * 128, 128)][...] = abs(a.at[ml.ds(i * 128, 128)][...])
  for k in ml.static_range(4, 128):
    each[i * 128 + k] = a[i * 128 + k]


@pytest.mark.parametrize("dtype", [jnp.uint32, jnp.uint16, jnp.uint8], ids=lambda d: jnp.dtype(d).name)
def test_abs_of_unsigned_values_is_the_value_on_both_backends(dtype):
  x = jnp.asarray(np.iinfo(dtype).max - np.arange(256, dtype=np.int64)).astype(dtype)
  each, whole = abs_of_unsigned(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(each), np.asarray(jnp.abs(x)))
  np.testing.assert_array_equal(np.asarray(whole), np.asarray(jnp.abs(x)))
  S = jax.ShapeDtypeStruct((256,), dtype)
  assert "math.absi" not in abs_of_unsigned.mlir(S)
  assert "mosaic_gpu" in _export(abs_of_unsigned, S)
