"""Probe 39c (quantisation and low precision: float8 casts with saturation and scaling, per-tensor,
per-row and per-block absmax quantisation, int8 and packed int4, fp8 dots with scales in the epilogue,
amax reductions across programs with atomics, NaN/inf and float16 subnormals).

- `ml.abs` and `-` of a float8 tensor (`ml.max(ml.abs(q), axis=1)`, the amax of float8 data being
  requantised) were MG106 ("Hopper has no register arithmetic on 8-bit types"): they are the sign bit
  cleared or flipped, jnp's results exactly, NaN staying NaN.
- A float16/bfloat16 `ml.atomic_max`/`ml.atomic_min` of a row or column statistic (a per-column amax
  reduced across programs, `ml.atomic_max(amax, ml.max(ml.abs(v), axis=0))`) was MG204: Hopper's `red`
  max and min update pairs of neighbouring elements and a statistic holds one element a thread. Where
  it has a multiple of 256 elements the compiler now reads it through SMEM into the plain layout,
  which holds pairs (the hint said to do so by hand). Where it has not (128 columns), the hint said to
  go through SMEM too, which fails the same way: it now writes the int32 keys that order as the floats
  do, in the call's words.
"""
import re
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F8 = [jnp.float8_e4m3fn, jnp.float8_e5m2]


def _export(fn, *specs, **kw):
  return jax.export.export(jax.jit(lambda *a: fn(*a, **kw)), platforms=["cuda"])(*specs).mlir_module()


def _same_bits(got, want):
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype
  nan = np.isnan(got.astype(np.float32)) & np.isnan(want.astype(np.float32))
  bits = f"u{got.dtype.itemsize}"
  np.testing.assert_array_equal(np.where(nan, 0, got.view(bits)), np.where(nan, 0, want.view(bits)))


# ---------------------------------------------------------------- abs and - of float8 tensors
@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=lambda x: (x.shape[0] // 256,))
def f8_sign(x, a, n):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 256, 256)][...]
  a.at[ml.ds(i * 256, 256)][...] = ml.abs(v)
  n.at[ml.ds(i * 256, 256)][...] = -v


@mg.mgpu_kernel(out_shape=lambda q: (S((q.shape[0],), jnp.float32), S(q.shape, jnp.float8_e5m2)),
                grid=lambda q: (q.shape[0] // 16,))
def requantise(q, amax, out):
  i = ml.program_id(0)
  v = q.at[ml.ds(i * 16, 16), :][...]
  m = ml.max(ml.abs(v), axis=1).astype(jnp.float32)
  amax.at[ml.ds(i * 16, 16)][...] = m
  out.at[ml.ds(i * 16, 16), :][...] = (v.astype(jnp.float32) * (57344.0 / m)[:, None]).astype(jnp.float8_e5m2)


def _codes(dtype):
  return np.arange(512, dtype=np.int32).astype(np.uint8).view(np.dtype(dtype))   # every code, twice


def _requantise_ref(q):
  f = np.asarray(q).astype(np.float32)
  m = np.max(np.abs(f), axis=1)
  return m, (f * (np.float32(57344.0) / m)[:, None]).astype(ml_dtypes.float8_e5m2)


@pytest.mark.parametrize("dtype", F8, ids=lambda d: jnp.dtype(d).name)
def test_abs_and_negation_of_float8_are_jnps_bit_for_bit(dtype):
  x = _codes(dtype)
  a, n = f8_sign(x, interpret=True)
  _same_bits(a, np.asarray(jnp.abs(jnp.asarray(x))))
  _same_bits(n, np.asarray(-jnp.asarray(x)))
  assert "mosaic_gpu" in _export(f8_sign, S(x.shape, dtype)).lower()


@pytest.mark.parametrize("dtype", F8, ids=lambda d: jnp.dtype(d).name)
def test_a_row_amax_of_float8_data_requantises(dtype):
  q = jnp.asarray(np.random.default_rng(0).standard_normal((64, 128)) * 20).astype(dtype)
  amax, out = requantise(q, interpret=True)
  m, want = _requantise_ref(q)
  np.testing.assert_array_equal(np.asarray(amax), m)
  _same_bits(out, want)
  assert "mosaic_gpu" in _export(requantise, S(q.shape, dtype)).lower()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", F8, ids=lambda d: jnp.dtype(d).name)
def test_abs_and_negation_of_float8_on_the_gpu(dtype):
  x = _codes(dtype)
  a, n = f8_sign(jnp.asarray(x))
  _same_bits(a, np.asarray(jnp.abs(jnp.asarray(x))))
  _same_bits(n, np.asarray(-jnp.asarray(x)))
  q = jnp.asarray(np.random.default_rng(0).standard_normal((64, 128)) * 20).astype(dtype)
  amax, out = requantise(q)
  m, want = _requantise_ref(q)
  np.testing.assert_array_equal(np.asarray(amax), m)
  # (the GPU's float32 division is within an ulp or two of the quotient: the e5m2 result can round
  # the other way where the product falls near a rounding boundary)
  np.testing.assert_allclose(np.asarray(out).astype(np.float32), want.astype(np.float32), rtol=0.25)


# ---------------------------------------------------------------- 16-bit atomic max/min of statistics
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=lambda x: (x.shape[0] // 16,))
def column_amax(x, amax):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 16, 16), :][...]
  ml.atomic_max(amax, ml.max(ml.abs(v), axis=0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 16 * 16,), x.dtype), grid=lambda x: (x.shape[1] // 128,))
def row_min(x, lo):
  j = ml.program_id(0)
  v = x.at[:, ml.ds(j * 128, 128)][...]
  ml.atomic_min(lo, ml.min(v, axis=1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32), grid=lambda x: (x.shape[0] // 16,))
def column_amax_f32(x, amax):         # column_amax's hint followed
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 16, 16), :][...]
  ml.atomic_max(amax, ml.max(ml.abs(v), axis=0).astype(jnp.float32))


def _half(shape, dtype, seed=1):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  x[3, :5] = -0.0
  return jnp.asarray(x).astype(dtype)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda d: jnp.dtype(d).name)
@pytest.mark.parametrize("cols", [256, 512])
def test_a_16_bit_atomic_max_of_a_column_statistic_goes_through_smem(dtype, cols):
  x = _half((64, cols), dtype)
  got = column_amax(x, interpret=True)
  _same_bits(got, np.max(np.abs(np.asarray(x)), axis=0))
  text = column_amax.mlir(S(x.shape, dtype))
  pair = f"max.noftz.v2.{'bf16' if dtype == jnp.bfloat16 else 'f16'}"       # pairs (jax 0.11 adds ".global")
  assert re.search(r"red(\.global)?\.relaxed\.gpu\." + re.escape(pair), text)
  assert "mosaic_gpu" in _export(column_amax, S(x.shape, dtype)).lower()


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda d: jnp.dtype(d).name)
def test_a_16_bit_atomic_min_of_a_row_statistic_goes_through_smem(dtype):
  x = _half((256, 512), dtype, seed=2)
  got = row_min(x, interpret=True)
  _same_bits(got, np.min(np.asarray(x), axis=1))
  assert "mosaic_gpu" in _export(row_min, S(x.shape, dtype)).lower()


def test_a_128_column_statistic_hints_a_float32_output_and_the_hint_works():
  # (a 128-column bfloat16 statistic, held singly, was MG204 with a float32 output's hint; since probe 56b it is a
  # loop of atom.cas.b16 an element, and the hint's float32 output still agrees)
  x = _half((64, 128), jnp.bfloat16)
  _same_bits(column_amax(x, interpret=True), np.max(np.abs(np.asarray(x)), axis=0))
  assert "mosaic_gpu" in _export(column_amax, S(x.shape, jnp.bfloat16)).lower()
  got = jnp.asarray(column_amax_f32(x, interpret=True)).astype(jnp.bfloat16)
  _same_bits(got, np.max(np.abs(np.asarray(x)), axis=0))
  assert "mosaic_gpu" in _export(column_amax_f32, S(x.shape, jnp.bfloat16)).lower()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=lambda d: jnp.dtype(d).name)
def test_16_bit_atomics_of_statistics_on_the_gpu(dtype):
  x = _half((64, 256), dtype)
  _same_bits(column_amax(x), np.max(np.abs(np.asarray(x)), axis=0))
  y = _half((256, 512), dtype, seed=2)
  _same_bits(row_min(y), np.min(np.asarray(y), axis=1))


# ---------------------------------------------------------------- fp_downcast_rounding="rtz" beyond f32 -> bf16
def _toward_zero(dtype):
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape, dtype), grid=lambda x: (x.shape[0] // 256,))
  def toward_zero(x, out):
    i = ml.program_id(0)
    out.at[ml.ds(i * 256, 256)][...] = ml.cast(x.at[ml.ds(i * 256, 256)][...], dtype, fp_downcast_rounding="rtz")
  return toward_zero


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32))
def toward_zero_int(x, out):
  out[...] = x[...].astype(jnp.int32, fp_downcast_rounding="rtz")


def _awkward(dtype=np.float32):
  rng = np.random.default_rng(5)
  x = np.concatenate([rng.standard_normal(400) * 10, rng.standard_normal(88) * 1e5, [
      np.nan, np.inf, -np.inf, 65504, 65519, 65520, -1e5, 6e-8, 3e-8, -3e-8, 0.0, -0.0, 1e-6, 448, 449, 465, -500,
      57344, 61440, 1e-3, 2 ** -9, 2 ** -10, 2 ** -7 * 1.5, 1 + 2 ** -11]]).astype(np.float32)
  return x.astype(dtype)


def _toward_zero_ref(x, dtype):
  """Toward zero by hand: to nearest, then a step back where that went away from zero; float8 saturates
  first (as the kernel's conversions do: the largest finite value for anything beyond it, inf too)."""
  dt = np.dtype(dtype)
  f = np.asarray(x).astype(np.float32)
  if dt.itemsize == 1:
    top = float(ml_dtypes.finfo(dt).max)
    f = np.where(np.isnan(f), f, np.clip(f, -top, top))
  with np.errstate(over="ignore", invalid="ignore"):
    y = f.astype(dt)
    away = np.abs(y.astype(np.float32)) > np.abs(f)
  bits = y.view(f"u{dt.itemsize}")
  return np.where(away, (bits - 1).astype(bits.dtype).view(dt), y)


_RTZ = [(np.float32, jnp.float16), (np.float32, jnp.float8_e4m3fn), (np.float32, jnp.float8_e5m2),
        (np.float16, jnp.bfloat16), (np.float16, jnp.float8_e4m3fn), (ml_dtypes.bfloat16, jnp.float16)]


@pytest.mark.parametrize("src,dst", _RTZ, ids=lambda d: np.dtype(d).name)
def test_rounding_toward_zero_into_any_narrower_float(src, dst):
  x = _awkward(src)
  k = _toward_zero(dst)
  _same_bits(k(x, interpret=True), _toward_zero_ref(x, dst))
  assert "mosaic_gpu" in _export(k, S(x.shape, src)).lower()


def test_rounding_toward_zero_into_an_integer_is_an_error_at_the_cast():
  expect(toward_zero_int, [S((256,), jnp.float32)], mg.UnsupportedDtypeError, "x[...].astype(",
         "fp_downcast_rounding='rtz' rounds a float to a narrower float, not float32 to int32",
         hint="a float converted to an integer truncates toward zero anyway (leave fp_downcast_rounding out):"
              " x[...].astype(jnp.int32)")


@pytest.mark.gpu
@pytest.mark.parametrize("src,dst", _RTZ, ids=lambda d: np.dtype(d).name)
def test_rounding_toward_zero_on_the_gpu(src, dst):
  x = _awkward(src)
  _same_bits(_toward_zero(dst)(jnp.asarray(x)), _toward_zero_ref(x, dst))


# ---------------------------------------------------------------- float8_e5m2's infinities through scans and sorts
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x), grid=lambda x: (x.shape[0] // 16,))
def e5m2_scans(x, cmax, cmin, csum, srt):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 16, 16), :][...]
  cmax.at[ml.ds(i * 16, 16), :][...] = ml.cummax(v, axis=1)
  cmin.at[ml.ds(i * 16, 16), :][...] = ml.cummin(v, axis=1)
  csum.at[ml.ds(i * 16, 16), :][...] = ml.cumsum(v, axis=1)
  srt.at[ml.ds(i * 16, 16), :][...] = ml.sort(v, axis=1, descending=True)


def _e5m2_with_infinities():
  x = np.array(jnp.asarray(np.random.default_rng(3).standard_normal((32, 128)) * 100).astype(jnp.float8_e5m2))
  x[0, 5], x[1, 7], x[2, :], x[3, :], x[4, 60] = np.inf, -np.inf, -np.inf, np.inf, np.inf
  x[5, 3], x[5, 90] = np.inf, -np.inf
  return x


def _e5m2_scans_ref(x):
  f, e5 = x.astype(np.float32), ml_dtypes.float8_e5m2
  with np.errstate(invalid="ignore"):
    csum = np.cumsum(f, axis=1)
  return (np.maximum.accumulate(f, axis=1).astype(e5), np.minimum.accumulate(f, axis=1).astype(e5),
          csum.astype(e5), -np.sort(-f, axis=1, kind="stable").astype(e5))


def test_float8_e5m2_infinities_survive_scans_and_sorts():
  """A float8 scan or sort runs on float32 keys converted back, and that conversion saturates: ml.cummax of
  an e5m2 row holding inf gave 57344 from there on, and ml.sort turned inf into 57344 (not a permutation)."""
  x = _e5m2_with_infinities()
  for got, want in zip(e5m2_scans(x, interpret=True), _e5m2_scans_ref(x)):
    _same_bits(got, want)
  assert "mosaic_gpu" in _export(e5m2_scans, S(x.shape, jnp.float8_e5m2)).lower()


@pytest.mark.gpu
def test_float8_e5m2_infinities_through_scans_and_sorts_on_the_gpu():
  x = _e5m2_with_infinities()
  for got, want in zip(e5m2_scans(jnp.asarray(x)), _e5m2_scans_ref(x)):
    _same_bits(got, want)


# ---------------------------------------------------------------- float32 atomic max and min (amax across programs)
@mg.mgpu_kernel(out_shape=lambda x: (S((), jnp.float32), S((), jnp.float32), S((x.shape[1],), jnp.float32),
                                     S((x.shape[1],), jnp.float32), S((64, x.shape[1]), jnp.float32)),
                grid=lambda x: (x.shape[0] // 64,))
def f32_extremes(x, amax, lo, col_max, col_min, tile_max):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64), :][...]
  ml.atomic_max(amax, ml.max(ml.abs(v)))            # a per-tensor amax (delayed scaling)
  ml.atomic_min(lo, ml.min(v))
  ml.atomic_max(col_max, ml.max(v, axis=0))         # a row statistic of each program's tile
  ml.atomic_min(col_min, ml.min(v, axis=0))
  ml.atomic_max(tile_max, v)                        # a whole tile, element by element


def _signed_floats():
  x = np.random.default_rng(6).standard_normal((256, 128)).astype(np.float32)
  x[:, 0] -= 10.0                          # a column of negatives only
  x[:, 1] = np.abs(x[:, 1]) + 1.0          # positives only
  x[:, 2] = 0.0                            # zeros of both signs: +0.0 is the max, -0.0 the min
  x[::2, 2] = -0.0
  x[7, 3], x[9, 4] = np.inf, -np.inf
  return x


def _f32_extremes_ref(x):
  t = x.reshape(4, 64, 128)
  col_max, col_min = x.max(0), x.min(0)
  col_max[2], col_min[2] = 0.0, -0.0
  return np.abs(x).max(), x.min(), col_max, col_min, t.max(0)


def test_float32_atomic_max_and_min_work_in_gmem_and_on_one_element():
  """They were MG106 (Hopper's `red` has no float32 max or min), whose hint rebuilt them as int32 maxima of keys in
  an int32 output decoded outside; they are two integer `red`s on the float's own bits now."""
  x = _signed_floats()
  for got, want in zip(f32_extremes(x, interpret=True), _f32_extremes_ref(x)):
    _same_bits(got, np.asarray(want, np.float32))
  text = f32_extremes.mlir(S(x.shape, jnp.float32))
  assert "red.relaxed.gpu.max.s32" in text and "red.relaxed.gpu.min.u32" in text
  assert "red.relaxed.gpu.min.s32" in text and "red.relaxed.gpu.max.u32" in text
  assert "mosaic_gpu" in _export(f32_extremes, S(x.shape, jnp.float32)).lower()


def test_a_nan_meeting_a_float32_atomic_max_leaves_the_number():
  x = _signed_floats()
  x[10, 5] = x[70, 6] = np.nan             # (the float `red`s and interpret mode's fmax: the NaN is left out)
  got = f32_extremes(x, interpret=True)
  _same_bits(got[2], np.fmax.reduce(x, axis=0))
  assert not np.isnan(np.asarray(got[4])).any()


@pytest.mark.gpu
def test_float32_atomic_max_and_min_on_the_gpu():
  x = _signed_floats()
  for got, want in zip(f32_extremes(jnp.asarray(x)), _f32_extremes_ref(x)):
    _same_bits(got, np.asarray(want, np.float32))
  x[10, 5] = x[70, 6] = np.nan
  _same_bits(f32_extremes(jnp.asarray(x))[2], np.fmax.reduce(x, axis=0))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float32), grid=lambda x: (x.shape[0] // 128,))
def tma_max(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, out, reduce="max")


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float32), grid=lambda x: (x.shape[0] // 128,))
def tma_max_followed(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128,), jnp.float32)
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.atomic_max(out, buf[...])


def test_a_float32_tma_max_hints_the_register_atomic_which_works():
  e = expect(tma_max, [S((512,), jnp.float32)], mg.UnsupportedDtypeError, "ml.copy(buf, out",
             "ml.copy(..., reduce='max') on float32 is not supported by the TMA engine: Hopper's atomic max takes"
             " bfloat16, float16, int32, int64, uint32")
  assert e.hint.startswith("update from registers, ml.atomic_max(out, buf[...]): a float32 max in GMEM is two"
                           " integer atomics on its bits, element by element; or convert")
  x = _signed_floats()[:, 0].copy()[:512]
  x = np.concatenate([x, -x])[:512]
  _same_bits(tma_max_followed(x, interpret=True), x.reshape(4, 128).max(0))
  assert "mosaic_gpu" in _export(tma_max_followed, S((512,), jnp.float32)).lower()


@mg.mgpu_kernel(out_shape=lambda x, e: S((8, x.shape[1]), jnp.float32), grid=lambda x, e: (x.shape[0] // 64,))
def expert_amax(x, e, out):                      # an amax per expert (fp8 MoE scales), a scatter of rows
  i = ml.program_id(0)
  ml.atomic_max(out.at[e.at[ml.ds(i * 64, 64)][...], :], ml.abs(x.at[ml.ds(i * 64, 64), :][...]))


def _experts():
  rng = np.random.default_rng(8)
  return rng.standard_normal((256, 128)).astype(np.float32), rng.integers(0, 7, 256).astype(np.int32)   # 7 empty


def test_a_float32_atomic_max_scatter_works():
  x, e = _experts()
  want = np.asarray(jax.ops.segment_max(np.abs(x), e, 8))
  _same_bits(expert_amax(x, e, interpret=True), want)
  assert "mosaic_gpu" in _export(expert_amax, S(x.shape, jnp.float32), S(e.shape, jnp.int32)).lower()


@pytest.mark.gpu
def test_a_float32_atomic_max_scatter_on_the_gpu():
  x, e = _experts()
  _same_bits(expert_amax(jnp.asarray(x), jnp.asarray(e)), np.asarray(jax.ops.segment_max(np.abs(x), e, 8)))


# ---------------------------------------------------------------- lax.reduce_precision (fake quantisation) in a kernel
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 256,))
def fake_quant(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 256, 256)][...]
  out.at[ml.ds(i * 256, 256)][...] = jax.lax.reduce_precision(v, exponent_bits=4, mantissa_bits=3)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 256,))
def fake_quant_followed(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 256, 256)][...]
  out.at[ml.ds(i * 256, 256)][...] = v.astype(jnp.float8_e4m3fn).astype(v.dtype)


def test_reduce_precision_computes_as_xla_and_the_round_trip_through_its_dtype():
  """lax.reduce_precision was MG003 whose hint wrote the round trip through float8 (the same values where they are
  normal and within 240); since probe 49b it computes as XLA's (frontend/bit_helpers.py): subnormals flushed, inf
  past 240."""
  rng = np.random.default_rng(9)
  wide = (rng.standard_normal(512) * 200).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(fake_quant(wide, interpret=True)),
                                np.asarray(jax.lax.reduce_precision(jnp.asarray(wide), exponent_bits=4, mantissa_bits=3)))
  x = (rng.standard_normal(512) * 20).astype(np.float32)
  x = np.where(np.abs(x) < 2 ** -6, np.float32(0.5), np.clip(x, -240, 240)).astype(np.float32)  # normal, finite
  want = np.asarray(jax.lax.reduce_precision(jnp.asarray(x), exponent_bits=4, mantissa_bits=3))
  np.testing.assert_array_equal(np.asarray(fake_quant_followed(x, interpret=True)), want)
