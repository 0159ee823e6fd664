"""Probe 70b's corpus, its third part: the edges of float arithmetic. Signed zeros and subnormals through min / max /
abs / copysign / signbit, NaN through sums, max, argmax, sort, cummax and clip as jnp defines them, conversions at
the edges (saturation, NaN, .5 cases, negative to unsigned, int32 to float32 and bfloat16 rounding), bit-level
functions (nextafter, spacing, frexp, ldexp, bfloat16 rounding to nearest even and stochastically with given random
bits). References are NumPy where jnp on the CPU flushes subnormals (the kernel keeps them, as XLA on the GPU), jnp's
own results elsewhere. Same CASES form as probe70b_sums.py."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70b_sums import BF16, F16, F32, I32, S, f32, rng_of

CASES = {}
U32 = jnp.uint32
SPECIAL = np.array([0.0, -0.0, 1.0, -1.0, np.inf, -np.inf, np.nan, 1e-45, -1e-45, 1.1754942e-38, -3e-39, 3.4028235e38,
                    -3.4028235e38, 0.5, -0.5, 2.5, -2.5, 1.5, 16777217.0, 2147483520.0, 2147483648.0, -2147483904.0,
                    4294967296.0, 65504.0, 65520.0, 1e-8, 300.7, -300.7, 255.5, 256.0, -1e-30, 1e30], f32)


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def specials(seed, rows=8):
  r = rng_of(seed)
  v = np.concatenate([SPECIAL, (r.standard_normal(128 * rows - len(SPECIAL)) * 10).astype(f32)])
  return v.reshape(rows, 128)


def special_pairs(seed):
  x = specials(seed)
  return (x, np.roll(x, 7, axis=1)[::-1].copy()), {}


def _np(f):
  """A NumPy reference computed quietly (NaN and inf are the point)."""
  def g(*a, **k):
    with np.errstate(all="ignore"):
      return f(*a, **k)
  return g


# ---------------------------------------------------------------- signed zeros and subnormals
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a, a), grid=(1,))
def min_max_signed_zeros(a, b, mx, mn, jmx, jmn):
  """ml.maximum / minimum and jnp's: -0.0 below +0.0, NaN from either side (jnp's lax.max / lax.min)."""
  x, y = a[...], b[...]
  mx[...] = ml.maximum(x, y)
  mn[...] = ml.minimum(x, y)
  jmx[...] = jnp.maximum(x, y)
  jmn[...] = jnp.minimum(x, y)


def _minmax_ref(a, b):
  mx, mn = np.asarray(jnp.maximum(a, b)), np.asarray(jnp.minimum(a, b))
  sub = (np.abs(a) < 1.1754944e-38) | (np.abs(b) < 1.1754944e-38)     # jnp on the CPU flushes these: NumPy's here
  mx = np.where(sub, np.maximum(a, b), mx)
  mn = np.where(sub, np.minimum(a, b), mn)
  zz = (a == 0) & (b == 0)
  mx = np.where(zz, np.where(np.signbit(a) & np.signbit(b), f32(-0.0), f32(0.0)), mx)
  mn = np.where(zz, np.where(np.signbit(a) | np.signbit(b), f32(-0.0), f32(0.0)), mn)
  return mx, mn, mx, mn


case("min_max_signed_zeros_nan", min_max_signed_zeros, special_pairs, _np(_minmax_ref), 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a, S(a.shape, I32)), grid=(1,))
def abs_copysign_signbit(a, b, ab, cs, neg, sb):
  """abs of -0.0 and of subnormals, jnp.copysign by the sign bit (NaN's too), -x of 0.0, jnp.signbit."""
  x, y = a[...], b[...]
  ab[...] = ml.abs(x)
  cs[...] = jnp.copysign(x, y)
  neg[...] = -x
  sb[...] = jnp.signbit(x).astype(I32)


case("abs_copysign_signbit", abs_copysign_signbit, special_pairs,
     _np(lambda a, b: (np.abs(a), np.copysign(a, b), -a, np.signbit(a).astype(np.int32))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def subnormals_kept(x, scaled, back, flushed):
  """Scaling into float32's subnormals and back (kept on the GPU and in interpret mode, as XLA on the GPU keeps them),
  and a flush to zero written out by the user (|x| < 2**-126: +-0 of x's sign)."""
  v = x[...]
  s = v * 2.0 ** -140
  scaled[...] = s
  back[...] = s * 2.0 ** 140
  flushed[...] = ml.where(ml.abs(s) < 2.0 ** -126, jnp.copysign(0.0, s), s)


def _sub_ref(x):
  s = f32(x * f32(2.0 ** -140))
  return s, f32(s * f32(2.0 ** 140)), np.where(np.abs(s) < f32(2.0 ** -126), np.copysign(f32(0), s), s)


case("subnormals_kept_and_flushed", subnormals_kept,
     lambda s: ((rng_of(s).standard_normal((8, 128)).astype(f32) * 1000,), {}), _np(_sub_ref), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=(1,))
def zero_sums_signs(x, s, mx, mn):
  """Row sums of -0.0 (+0.0, XLA's init), the max of a row of -0.0 and +0.0, and its min."""
  v = x[...]
  s[...] = ml.sum(v, axis=1)
  mx[...] = ml.max(v, axis=1)
  mn[...] = ml.min(v, axis=1)


def _zs_make(seed):
  x = np.full((8, 128), -0.0, f32)
  x[1, 5] = 0.0
  x[2, :] = 0.0
  x[3, 7] = -0.0
  x[4, :64] = 0.0
  return (x,), {}


case("zero_sums_and_extrema_signs", zero_sums_signs, _zs_make,
     lambda x: (np.asarray(jnp.sum(x, 1)), np.asarray(jnp.max(x, 1)), np.asarray(jnp.min(x, 1))), 0)


# ---------------------------------------------------------------- NaN through reductions, argmax, sort, scans, clip
def nan_rows(seed):
  r = rng_of(seed)
  x = r.standard_normal((8, 128)).astype(f32)
  x[1, 17] = np.nan
  x[2, [3, 90]] = np.nan
  x[3, :] = np.nan
  x[4, 0] = np.inf
  x[4, 1] = -np.inf
  x[5, 60] = np.nan
  x[5, 61] = np.inf
  x[6, :] = -np.inf
  return x


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32),) * 4 + (S((x.shape[0],), I32),) * 2, grid=(1,))
def nan_reductions(x, s, mx, mn, mean, am, an):
  """NaN propagates through ml.sum, ml.max, ml.min and jnp.mean; argmax and argmin give the first NaN's index, as
  jnp's."""
  v = x[...]
  s[...] = ml.sum(v, axis=1)
  mx[...] = ml.max(v, axis=1)
  mn[...] = ml.min(v, axis=1)
  mean[...] = jnp.mean(v, axis=1)
  am[...] = ml.argmax(v, axis=1).astype(I32)
  an[...] = jnp.argmin(v, axis=1).astype(I32)


case("nan_through_reductions_and_argmax", nan_reductions, lambda s: ((nan_rows(s),), {}),
     _np(lambda x: (np.sum(x, 1), np.max(x, 1), np.min(x, 1), np.mean(x, 1),
                    np.asarray(jnp.argmax(x, 1), np.int32), np.asarray(jnp.argmin(x, 1), np.int32))), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32),) * 3 + (S((x.shape[0],), I32),), grid=(1,))
def nan_skipping(x, nmx, nsum, nmean, nam):
  """jnp.nanmax / nansum / nanmean / nanargmax: NaN skipped, an all-NaN row NaN (nanargmax -1, jax's)."""
  v = x[...]
  nmx[...] = jnp.nanmax(v, axis=1)
  nsum[...] = jnp.nansum(v, axis=1)
  nmean[...] = jnp.nanmean(v, axis=1)
  nam[...] = jnp.nanargmax(v, axis=1).astype(I32)


case("nan_skipping_reductions", nan_skipping, lambda s: ((nan_rows(s),), {}),
     _np(lambda x: (np.asarray(jnp.nanmax(x, 1)), np.nansum(x, 1), np.asarray(jnp.nanmean(x, 1)),
                    np.asarray(jnp.nanargmax(x, 1), np.int32))), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, I32)), grid=(1,))
def sort_with_nan_and_zeros(x, srt, idx):
  """ml.sort and ml.argsort of rows with NaN, +-inf and both zeros: jnp.sort's order (NaN last, a stable sort where
  -0.0 and +0.0 are equal)."""
  v = x[...]
  srt[...] = ml.sort(v, axis=1)
  idx[...] = ml.argsort(v, axis=1).astype(I32)


def _sort_make(seed):
  x = nan_rows(seed)
  x[7, :8] = [0.0, -0.0, np.nan, -0.0, 0.0, -np.inf, np.inf, -0.0]
  return (x,), {}


case("sort_argsort_nan_signed_zeros", sort_with_nan_and_zeros, _sort_make,
     lambda x: (np.asarray(jnp.sort(x, axis=1)), np.asarray(jnp.argsort(x, axis=1), np.int32)), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x), grid=(1,))
def nan_scans(x, cmx, cs, cmn):
  """ml.cummax, jnp.cumsum and lax.cummin along rows holding NaN: NaN from its position on, as jnp's."""
  v = x[...]
  cmx[...] = ml.cummax(v, axis=1)
  cs[...] = jnp.cumsum(v, axis=1)
  cmn[...] = jax.lax.cummin(v, axis=1)


case("nan_through_scans", nan_scans, lambda s: ((nan_rows(s),), {}),
     lambda x: (np.asarray(jax.lax.cummax(x, axis=1)), np.asarray(jnp.cumsum(x, axis=1)),
                np.asarray(jax.lax.cummin(x, axis=1))), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x), grid=(1,))
def clip_forms(x, c1, c2, c3, c4):
  """jnp.clip of NaN (stays NaN), with lo > hi (hi wins, as jnp's min(max(x, lo), hi)), a ReLU by maximum (NaN kept)
  and by a select (NaN > 0 is False: 0)."""
  v = x[...]
  c1[...] = jnp.clip(v, -1.0, 1.0)
  c2[...] = jnp.clip(v, 2.0, 1.0)
  c3[...] = ml.maximum(v, 0.0)
  c4[...] = ml.where(v > 0, v, 0.0)


case("clip_relu_nan", clip_forms, lambda s: ((specials(s),), {}),
     _np(lambda x: (np.clip(x, -1, 1), np.minimum(np.maximum(x, 2), 1), np.maximum(x, 0), np.where(x > 0, x, 0))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, S(x.shape, I32)), grid=(1,))
def nan_to_num_and_classes(x, y, cls):
  """jnp.nan_to_num (NaN 0, inf float32's largest) and a class code from isnan / isinf / isfinite."""
  v = x[...]
  y[...] = jnp.nan_to_num(v)
  cls[...] = ml.where(jnp.isnan(v), 1, ml.where(jnp.isinf(v), 2, ml.where(jnp.isfinite(v), 0, 3))).astype(I32)


case("nan_to_num_and_classes", nan_to_num_and_classes, lambda s: ((specials(s),), {}),
     lambda x: (np.nan_to_num(x), np.where(np.isnan(x), 1, np.where(np.isinf(x), 2, 0)).astype(np.int32)), 0)


# ---------------------------------------------------------------- conversions at the edges
@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S(x.shape, U32), S(x.shape, jnp.uint8), S(x.shape, jnp.int8)),
                grid=(1,))
def float_to_int_saturating(x, i32, u32, u8, i8):
  """astype to int32, uint32, uint8 and int8 as jnp's: truncation toward zero, saturation at the type's range, NaN
  to 0, negative values to 0 in unsigned types."""
  v = x[...]
  i32[...] = v.astype(I32)
  u32[...] = v.astype(U32)
  u8[...] = v.astype(jnp.uint8)
  i8[...] = v.astype(jnp.int8)


case("float_to_int_saturating", float_to_int_saturating, lambda s: ((specials(s),), {}),
     lambda x: tuple(np.asarray(jnp.asarray(x).astype(t)) for t in (I32, U32, jnp.uint8, jnp.int8)), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, S(x.shape, I32)), grid=(1,))
def round_halves(x, rne, away, fl, ri):
  """Halves: ml.round (to even, jnp.round), lax.round's default (away from zero), floor, and the nearest-even integer
  as int32 (jnp.rint then astype)."""
  v = x[...]
  rne[...] = ml.round(v)
  away[...] = jax.lax.round(v)
  fl[...] = jnp.floor(v)
  ri[...] = jnp.rint(v).astype(I32)


def _halves(seed):
  r = rng_of(seed)
  return ((r.integers(-200, 200, (8, 128)) / 2).astype(f32) + np.where(r.random((8, 128)) < 0.2, f32(0.0001), f32(0)),), {}


case("round_halves_even_and_away", round_halves, _halves,
     lambda x: (np.round(x), np.asarray(jax.lax.round(x)), np.floor(x), np.rint(x).astype(np.int32)), 0)


@mg.mgpu_kernel(out_shape=lambda n, u: (S(n.shape, F32), S(n.shape, BF16), S(n.shape, F16), S(u.shape, F32)),
                grid=(1,))
def int_to_float_rounding(n, u, f, b, h, fu):
  """int32 to float32 above 2**24 (to nearest even), to bfloat16 and float16 (rounded once from the integer: PTX's
  cvt.rn.bf16.s32 on the GPU, ml_dtypes' in interpret mode; jnp on the CPU rounds through float32 first, twice, so
  2**24 + 2**16 + 1 is 2**24 there and 2**24 + 2**17 here; float16 past 65504 is inf), and uint32 above 2**31 to
  float32 (an unsigned conversion)."""
  v = n[...]
  f[...] = v.astype(F32)
  b[...] = v.astype(BF16)
  h[...] = v.astype(F16)
  fu[...] = u[...].astype(F32)


def _itf_make(seed):
  r = rng_of(seed)
  n = np.concatenate([[16777217, 16777219, 33554435, 257, 259, 2 ** 31 - 1, -2 ** 31, 65519, 65520, 70000, 2049, -2049,
                       2 ** 24 + 2 ** 16 + 1, -(2 ** 30 + 2 ** 22 + 1), 2 ** 27 + 2 ** 19 + 3],   # bfloat16 halfway in float32
                      r.integers(-2 ** 31, 2 ** 31 - 1, 1024 - 15)]).astype(np.int32).reshape(8, 128)
  u = np.concatenate([[2 ** 31, 2 ** 32 - 1, 2 ** 31 + 129, 0], r.integers(0, 2 ** 32 - 1, 1020, dtype=np.uint64)])
  return (n, u.astype(np.uint32).reshape(8, 128)), {}


def _bf16_once(n):
  """int32 to bfloat16 rounded once, half to even (PTX's cvt.rn.bf16.s32, interpret mode's): NumPy's `astype` is
  ml_dtypes', which rounds through float32 in some versions (the GPU machine's: 2**24 + 2**16 + 1 gave 2**24 there,
  session 58), so the reference rounds the significand itself and casts an exact value."""
  m, e = np.frexp(n.astype(np.float64))
  return np.ldexp(np.rint(np.ldexp(m, 8)), e - 8).astype(BF16)


case("int_to_float_rounding", int_to_float_rounding, _itf_make,
     lambda n, u: (np.asarray(jnp.asarray(n).astype(F32)), _bf16_once(n),
                   np.asarray(jnp.asarray(n).astype(F16)), np.asarray(jnp.asarray(u).astype(F32))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F16), S(x.shape, BF16), S(x.shape, jnp.float8_e4m3fn)), grid=(1,))
def narrowing_casts(x, h, b, e4):
  """float32 to float16 (65520 and above: inf; below 2**-24: 0 or a subnormal), to bfloat16 (to nearest even), and to
  float8 e4m3 after a clip to its +-448 (the saturating cast FP8 recipes write; without the clip jnp gives NaN)."""
  v = x[...]
  h[...] = v.astype(F16)
  b[...] = v.astype(BF16)
  e4[...] = jnp.clip(v, -448.0, 448.0).astype(jnp.float8_e4m3fn)


case("narrowing_casts_f16_bf16_fp8", narrowing_casts, lambda s: ((specials(s),), {}),
     lambda x: (x.astype(np.float16), np.asarray(jnp.asarray(x).astype(BF16)),
                np.asarray(jnp.clip(jnp.asarray(x), -448.0, 448.0).astype(jnp.float8_e4m3fn))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (x,) * 7, grid=(1,))
def no_algebraic_folding(x, a, b, c, d, e, f, g):
  """Forms an algebraic simplifier would fold, each as IEEE computes it: (x + 1) + 1 is not x + 2 at 2**24, x - x is
  NaN of inf, x * 0 is NaN of inf and -0.0 of -0.0, x + 0.0 makes -0.0 +0.0, (x * 3) * 0.1 is not x * 0.3, and
  (x + 2**24) - 2**24 loses x's low bits."""
  v = x[...]
  a[...] = (v + 1.0) + 1.0
  b[...] = v - v
  c[...] = v * 0.0
  d[...] = v + 0.0
  e[...] = v * 1.0 - 0.0
  f[...] = (v * 3.0) * 0.1
  g[...] = v + 2.0 ** 24 - 2.0 ** 24


def _fold_make(seed):
  x = np.array([2.0 ** 24, -0.0, np.nan, np.inf, -np.inf, 1.0, 3.0, 1e-45], f32)
  return (np.concatenate([x, rng_of(seed).standard_normal(120).astype(f32) * 100]).reshape(1, 128),), {}


def _fold_ref(x):
  one, three, tenth, big = f32(1), f32(3), f32(0.1), f32(2.0 ** 24)
  return (f32(f32(x + one) + one), x - x, x * f32(0), x + f32(0), f32(x * one) - f32(0), f32(f32(x * three) * tenth),
          f32(f32(x + big) - big))


case("no_algebraic_folding", no_algebraic_folding, _fold_make, _np(_fold_ref), 0)
