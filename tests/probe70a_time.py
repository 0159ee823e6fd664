"""Probe 70a's corpus, its fourth part: fixed-point decimals in int32 and int64 (rescaled adds, products rounded half
away from zero, C's truncating division, sums, comparisons across scales) and date / time arithmetic on integer
timestamps (days since the epoch to year, month and day by Hinnant's civil_from_days, and back; DATE_TRUNC, add
months, day of week and hour of pre-1970 instants, time buckets), as cuDF's fixed_point and datetime kernels and
DuckDB's date functions do. Same CASES form as probe70a_filter.py; the cases named in X64 run with jax_enable_x64."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, S, rng_of

I64 = jnp.int64
CASES = {}
X64 = set()


def case(name, kernel, make, ref, tol, x64=False):
  CASES[name] = (kernel, make, ref, tol)
  if x64:
    X64.add(name)


# ---------------------------------------------------------------- decimals
@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, I32), grid=lambda a, b: (a.shape[0] // 256,))
def dec_add_rescale(a, b, out):
  """DECIMAL(9, 2) + DECIMAL(9, 4) -> DECIMAL(10, 4): a rescaled by 10^2, then added."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  out.at[r][...] = a.at[r][...] * 100 + b.at[r][...]


case("decimal_add_rescaled_int32", dec_add_rescale,
     lambda s: ((rng_of(s).integers(-10**6, 10**6, 512).astype(np.int32), rng_of(s + 1).integers(-10**8, 10**8, 512).astype(np.int32)), {}),
     lambda a, b: (a.astype(np.int64) * 100 + b).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, I64), grid=lambda a, b: (a.shape[0] // 128,))
def dec_mul_round(a, b, out):
  """DECIMAL(18, 2) * DECIMAL(18, 2) -> DECIMAL(18, 2): the int64 product at scale 4, rounded half away from zero."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  p = a.at[r][...] * b.at[r][...]
  q = (ml.abs(p) + 50) // 100
  out.at[r][...] = ml.where(p < 0, -q, q)


def _dmr_ref(a, b):
  p = a.astype(object) * b.astype(object)
  return np.array([(abs(x) + 50) // 100 * (1 if x >= 0 else -1) for x in p], np.int64)


case("decimal_mul_round_half_away_int64", dec_mul_round,
     lambda s: ((rng_of(s).integers(-10**7, 10**7, 256), rng_of(s + 2).integers(-10**7, 10**7, 256)), {}), _dmr_ref, 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, I32), grid=lambda a, b: (a.shape[0] // 256,))
def dec_div_trunc(a, b, out):
  """DECIMAL division ported from C: (a * 100) / b truncates toward zero (lax.div, not Python's floor), 0 for b = 0."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  x = a.at[r][...] * 100
  d = b.at[r][...]
  out.at[r][...] = ml.where(d != 0, jax.lax.div(x, ml.where(d != 0, d, 1)), 0)


def _ddt_ref(a, b):
  x = a.astype(np.int64) * 100
  q = np.where(b != 0, np.abs(x) // np.maximum(np.abs(b), 1) * np.sign(x) * np.sign(b), 0)
  return q.astype(np.int32)


case("decimal_div_truncating_lax_div", dec_div_trunc,
     lambda s: ((rng_of(s).integers(-10**6, 10**6, 512).astype(np.int32), rng_of(s + 3).integers(-50, 50, 512).astype(np.int32)), {}),
     _ddt_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a: S((), I64), grid=lambda a: (ml.cdiv(a.shape[0], 256),))
def dec_sum64(a, total):
  """SUM of a DECIMAL(9, 2) column: int32 values summed in int64 (a block's sum, then one atomic)."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  v = ml.load(a.at[offs], mask=offs < a.shape[0], other=0).astype(I64)
  ml.atomic_add(total, ml.sum(v))


case("decimal_sum_int32_into_int64", dec_sum64,
     lambda s: ((rng_of(s).integers(2 * 10**8, 10**9, 1000).astype(np.int32),), {}),
     lambda a: np.int64(a.astype(np.int64).sum()), 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda a, b: S(a.shape, jnp.bool_), grid=lambda a, b: (a.shape[0] // 128,))
def dec_compare_scales(a, b, out):
  """DECIMAL(18, 2) < DECIMAL(18, 5): compare at the larger scale, in int64."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = a.at[r][...] * 1000 < b.at[r][...]


case("decimal_compare_across_scales_int64", dec_compare_scales,
     lambda s: ((rng_of(s).integers(-10**12, 10**12, 256), rng_of(s + 4).integers(-10**15, 10**15, 256)), {}),
     lambda a, b: a * 1000 < b, 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape, F32), grid=lambda a: (a.shape[0] // 256,))
def dec_to_float(a, out, *, SCALE: ml.constexpr = 3):
  r = ml.ds(ml.program_id(0) * 256, 256)
  out.at[r][...] = a.at[r][...].astype(F32) / (10.0 ** SCALE)


case("decimal_to_float32", dec_to_float, lambda s: ((rng_of(s).integers(-10**6, 10**6, 512).astype(np.int32),), {}),
     lambda a, SCALE=3: a.astype(np.float32) / np.float32(10.0 ** SCALE), 1e-6)


# ---------------------------------------------------------------- dates: days since 1970-01-01
@ml.inline
def civil_from_days(z):
  """Howard Hinnant's civil_from_days, with Python's flooring // (C's version adjusts negatives by hand)."""
  z = z + 719468
  era = z // 146097
  doe = z - era * 146097
  yoe = (doe - doe // 1460 + doe // 36524 - doe // 146096) // 365
  doy = doe - (365 * yoe + yoe // 4 - yoe // 100)
  mp = (5 * doy + 2) // 153
  d = doy - (153 * mp + 2) // 5 + 1
  m = ml.where(mp < 10, mp + 3, mp - 9)
  y = yoe + era * 400 + (m <= 2).astype(I32)
  return y, m, d


@ml.inline
def days_from_civil(y, m, d):
  y = y - (m <= 2).astype(I32)
  era = y // 400
  yoe = y - era * 400
  mp = (m + 9) % 12
  doy = (153 * mp + 2) // 5 + d - 1
  doe = yoe * 365 + yoe // 4 - yoe // 100 + doy
  return era * 146097 + doe - 719468


def _ymd_np(days):
  dt = np.datetime64("1970-01-01") + days.astype("timedelta64[D]")
  y = dt.astype("datetime64[Y]").astype(int) + 1970
  m = dt.astype("datetime64[M]").astype(int) % 12 + 1
  d = (dt - dt.astype("datetime64[M]")).astype(int) + 1
  return y.astype(np.int32), m.astype(np.int32), d.astype(np.int32)


@mg.mgpu_kernel(out_shape=lambda d: (S(d.shape, I32), S(d.shape, I32), S(d.shape, I32)), grid=lambda d: (ml.cdiv(d.shape[0], 128),))
def extract_ymd(days, year, month, day):
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < days.shape[0]
  y, mo, d = civil_from_days(ml.load(days.at[offs], mask=m, other=0))
  ml.store(year.at[offs], y, mask=m)
  ml.store(month.at[offs], mo, mask=m)
  ml.store(day.at[offs], d, mask=m)


case("extract_year_month_day_civil", extract_ymd,
     lambda s: ((rng_of(s).integers(-800000, 800000, 1000).astype(np.int32),), {}), _ymd_np, 0)


@mg.mgpu_kernel(out_shape=lambda d: S(d.shape, I32), grid=lambda d: (d.shape[0] // 256,))
def date_trunc_month(days, out):
  """DATE_TRUNC('month', d): back to the first of its month."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  y, m, _ = civil_from_days(days.at[r][...])
  out.at[r][...] = days_from_civil(y, m, ml.full((256,), 1, I32))


def _trunc_ref(days):
  dt = np.datetime64("1970-01-01") + days.astype("timedelta64[D]")
  return (dt.astype("datetime64[M]").astype("datetime64[D]") - np.datetime64("1970-01-01")).astype(np.int32)


case("date_trunc_month_round_trip", date_trunc_month,
     lambda s: ((rng_of(s).integers(-100000, 100000, 512).astype(np.int32),), {}), _trunc_ref, 0)


@mg.mgpu_kernel(out_shape=lambda d, k: S(d.shape, I32), grid=lambda d, k: (d.shape[0] // 256,))
def add_months(days, k, out):
  """d + INTERVAL k MONTH, the day clamped to the new month's length (Jan 31 + 1 month = Feb 28 or 29)."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  y, m, d = civil_from_days(days.at[r][...])
  t = y * 12 + (m - 1) + k.at[r][...]
  ny, nm = t // 12, t % 12 + 1
  leap = ((ny % 4 == 0) & (ny % 100 != 0)) | (ny % 400 == 0)
  dim = ml.where(nm == 2, ml.where(leap, 29, 28), ml.where((nm == 4) | (nm == 6) | (nm == 9) | (nm == 11), 30, 31))
  out.at[r][...] = days_from_civil(ny, nm, ml.minimum(d, dim))


def _am_ref(days, k):
  y, m, d = _ymd_np(days)
  t = y.astype(np.int64) * 12 + m - 1 + k
  ny, nm = t // 12, t % 12 + 1
  first = np.array([np.datetime64(f"{a:04d}-{b:02d}") for a, b in zip(ny, nm)]).astype("datetime64[D]")
  nxt = np.array([np.datetime64(f"{a:04d}-{b:02d}") + np.timedelta64(1, "M") for a, b in zip(ny, nm)]).astype("datetime64[D]")
  dd = np.minimum(d, (nxt - first).astype(int))
  return ((first - np.datetime64("1970-01-01")).astype(int) + dd - 1).astype(np.int32)


case("add_months_clamped_day", add_months,
     lambda s: ((rng_of(s).integers(-20000, 40000, 512).astype(np.int32), rng_of(s + 5).integers(-30, 30, 512).astype(np.int32)), {}),
     _am_ref, 0)


@mg.mgpu_kernel(out_shape=lambda t: (S(t.shape, I32), S(t.shape, I32)), grid=lambda t: (t.shape[0] // 256,))
def dow_and_hour(ts, dow, hour):
  """Seconds since the epoch (int32, before 1970 too): ISO day of week (Monday 1) and hour of day."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  t = ts.at[r][...]
  day = t // 86400
  dow.at[r][...] = (day + 3) % 7 + 1
  hour.at[r][...] = t % 86400 // 3600


def _dh_ref(t):
  dt = np.datetime64("1970-01-01T00:00:00") + t.astype("timedelta64[s]")
  day = dt.astype("datetime64[D]")
  dow = ((day.astype(int) + 3) % 7 + 1).astype(np.int32)
  return dow, ((dt - day).astype(int) // 3600).astype(np.int32)


case("day_of_week_and_hour_negative_seconds", dow_and_hour,
     lambda s: ((rng_of(s).integers(-2**31, 2**31 - 1, 512).astype(np.int32),), {}), _dh_ref, 0)


@mg.mgpu_kernel(out_shape=lambda t: (S(t.shape, I32), S(t.shape, I32)), grid=lambda t: (t.shape[0] // 128,))
def extract_from_micros(ts, minute, yday):
  """Microseconds since the epoch (int64): the minute of the hour, and the day of the year (1-based)."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  t = ts.at[r][...]
  minute.at[r][...] = (t // 60_000_000 % 60).astype(I32)
  days = (t // 86_400_000_000).astype(I32)
  y, _, _ = civil_from_days(days)
  yday.at[r][...] = days - days_from_civil(y, ml.full((128,), 1, I32), ml.full((128,), 1, I32)) + 1


def _micros_ref(t):
  dt = np.datetime64("1970-01-01T00:00:00", "us") + t.astype("timedelta64[us]")
  minute = (dt.astype("datetime64[m]").astype(np.int64) % 60).astype(np.int32)
  day = dt.astype("datetime64[D]")
  yday = (day - day.astype("datetime64[Y]").astype("datetime64[D]")).astype(int) + 1
  return minute, yday.astype(np.int32)


case("extract_minute_and_yday_from_int64_micros", extract_from_micros,
     lambda s: ((rng_of(s).integers(-3 * 10**18, 3 * 10**18, 256),), {}), _micros_ref, 0, x64=True)


@mg.mgpu_kernel(out_shape=lambda t, v, *, NB, T0, WIDTH: (S((NB,), F32), S((NB,), I32)),
                grid=lambda t, v, *, NB, T0, WIDTH: (ml.cdiv(t.shape[0], 256),))
def time_bucket(ts, vals, sums, counts, *, NB: ml.constexpr, T0: ml.constexpr, WIDTH: ml.constexpr):
  """GROUP BY time_bucket(WIDTH, ts) from T0: a bucket id per row, rows outside [T0, T0 + NB * WIDTH) dropped."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < ts.shape[0]
  t = ml.load(ts.at[offs], mask=m, other=T0)
  b = (t - T0) // WIDTH
  ok = m & (b >= 0) & (b < NB)
  ml.atomic_add(sums.at[b], ml.load(vals.at[offs], mask=m, other=0.0), mask=ok)
  ml.atomic_add(counts.at[b], 1, mask=ok)


def _tb_ref(t, v, *, NB, T0, WIDTH):
  b = (t.astype(np.int64) - T0) // WIDTH
  ok = (b >= 0) & (b < NB)
  s = np.zeros(NB)
  np.add.at(s, b[ok], v[ok])
  return s, np.bincount(b[ok], minlength=NB).astype(np.int32)


case("time_bucket_15_minutes", time_bucket,
     lambda s: ((rng_of(s).integers(-10000, 60 * 60 * 24, 3000).astype(np.int32), rng_of(s).standard_normal(3000).astype(np.float32)),
                dict(NB=96, T0=0, WIDTH=900)), _tb_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, I32), S((), I32)), grid=lambda a, b: (ml.cdiv(a.shape[0], 256),))
def datediff_within(a, b, diff, late):
  """DATEDIFF(day, a, b) and how many rows shipped more than 30 days after ordering."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < a.shape[0]
  d = ml.load(b.at[offs], mask=m, other=0) - ml.load(a.at[offs], mask=m, other=0)
  ml.store(diff.at[offs], d, mask=m)
  ml.atomic_add(late, ml.sum((m & (d > 30)).astype(I32)))


case("datediff_and_late_count", datediff_within,
     lambda s: ((rng_of(s).integers(8000, 9000, 700).astype(np.int32), rng_of(s).integers(8000, 9100, 700).astype(np.int32)), {}),
     lambda a, b: (b - a, np.int32((b - a > 30).sum())), 0)
