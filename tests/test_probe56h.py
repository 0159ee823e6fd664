"""Probe 56h: integer and conversion semantics against jnp bit for bit (nothing silently wrong, round 5).

Kernels as users write them for wrap-around (int8 to uint32 `+ - *` and unary `-`), floor division and remainder
with negative operands (`//`, `%`, `lax.div`, `jnp.fmod`, a divisor of -1 and INT_MIN), shifts past the width,
float -> int conversions of NaN, +-inf and values outside the target's range (saturating, NaN -> 0, as XLA's
conversions on the CPU and GPU), int -> float rounding, bool arithmetic and promotion, float16 sums past 65504,
min / max / fmin / fmax with NaN and signed zeros (reductions, arg reductions, scans, sorts, top k), clip with
lo > hi, abs of INT_MIN, sign of -0.0 and NaN, popcount and clz, and unsigned comparisons, sorts and reductions,
each in interpret mode against jnp and exported for CUDA; the lowering's choice of signed or unsigned ops for
uint16 and uint32 values is read from the emitted MLIR.

Found and fixed:
1. `jnp.searchsorted` / `ml.searchsorted` (and `jnp.digitize`, through it) of NaN queries: silently wrong. Every method
   of jnp's places a NaN query after the table's numbers (its sort's order: NaN last, equal to NaN), the register
   count and the GMEM binary search placed it at 0. Both now compare in jnp's order.
2. `jnp.isposinf(x)` / `jnp.isneginf(x)` were MG003 (a refusal of jnp functions of register values): they are
   `x == inf` / `x == -inf` of floats and False of integers and bools, as jnp's.
3. `jnp.std` (`nanstd`, `x.std()`) of float16 / bfloat16: the root was taken of the float32 variance, where jnp's
   is `lax.sqrt(var(...))` of the variance rounded to the input's dtype: a float16 variance past 65504 gave a
   finite std where jnp's is inf (and a double rounding elsewhere). Now rounded first, then the root.
Everything else probed was already jnp's result (or a documented, located refusal: int32 with uint32, `+` of
bools, run-time division by zero and out-of-range run-time shifts, MG950 in interpret mode).
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct
N = 256
INTS = [np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8]
FLOATS = [jnp.float32, jnp.float16, jnp.bfloat16]


def _name(d):
  return jnp.dtype(d).name


def like(x, dt=None):
  return S(x.shape, dt or x.dtype)


def ints(dt, n=N, seed=0):
  """Random values of `dt` over its whole range, its extremes, 0, 1 and -1 first."""
  info = np.iinfo(dt)
  r = np.random.default_rng(seed).integers(info.min, int(info.max) + 1, size=n, dtype=np.int64).astype(dt)
  r[:6] = [info.min, info.max, 0, 1, -1 if info.min < 0 else 2, info.min + 1]
  return jnp.asarray(r)


def floats(edges, dt=np.float32, n=N, seed=0, scale=1.0):
  x = (np.random.default_rng(seed).standard_normal(n) * scale).astype(np.float32)
  x[:len(edges)] = edges
  return jnp.asarray(x).astype(dt)


def same(got, want):
  """Equal bit for bit in value: the dtype, the sign of zeros, NaN matching NaN."""
  g, w = np.asarray(got), np.asarray(want)
  assert g.dtype == w.dtype, (g.dtype, w.dtype)
  assert g.shape == w.shape, (g.shape, w.shape)
  if g.dtype.kind in "iub":
    bad = g != w
  else:
    g, w = g.astype(np.float64), w.astype(np.float64)
    bad = ~(((g == w) & (np.signbit(g) == np.signbit(w))) | (np.isnan(g) & np.isnan(w)))
  assert not bad.any(), f"differ at {np.flatnonzero(bad)[:8]}: got {g[bad][:8]}, want {w[bad][:8]}"


def check(kernel, args, ref, build=True):
  got, want = kernel(*args, interpret=True), ref(*args)
  if not isinstance(got, (tuple, list)):
    got, want = (got,), (want,)
  assert len(got) == len(want)
  for g, w in zip(got, want):
    same(g, w)
  if build:
    export(kernel, *args)


def unary_kernel(f, x):
  """A kernel storing f of its input's register value (its output typed as jnp types f(x))."""
  o = jax.eval_shape(f, x)

  @mg.mgpu_kernel(out_shape=lambda x: S(o.shape, o.dtype))
  def k(x, out):
    out[...] = f(x[...])
  return k


# ------------------------------------------------------------------ wrap-around, division, shifts
@mg.mgpu_kernel(out_shape=lambda x, y: (like(x),) * 4)
def wrap(x, y, a, m, n, s):
  u, v = x[...], y[...]
  a[...] = u + v
  m[...] = u * v
  n[...] = -u
  s[...] = u - v


@pytest.mark.parametrize("dt", INTS, ids=_name)
def test_wrap_around_as_jnp(dt):
  check(wrap, (ints(dt), ints(dt, seed=1)), lambda x, y: (x + y, x * y, -x, x - y))


@mg.mgpu_kernel(out_shape=lambda x, y: (like(x),) * 4)
def divisions(x, y, q, r, t, f):
  u, v = x[...], y[...]
  q[...] = u // v
  r[...] = u % v
  t[...] = lax.div(u, v)
  f[...] = jnp.fmod(u, v)


@pytest.mark.parametrize("dt", INTS, ids=_name)
def test_floor_division_and_remainders_of_negative_operands(dt):
  x, y = ints(dt), np.array(ints(dt, seed=1))
  y[y == 0] = 3
  y[:6] = [-1, 5, -3, 2, -7, -2] if np.iinfo(dt).min < 0 else [7, 5, 3, 2, 7, 2]    # INT_MIN // -1 first
  check(divisions, (x, jnp.asarray(y)), lambda x, y: (x // y, x % y, lax.div(x, y), jnp.fmod(x, y)))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 3)
def by_constants(x, q, r, f):
  u = x[...]
  q[...] = u // -3
  r[...] = u % -3
  f[...] = jnp.fmod(u, -3)


def test_division_by_a_negative_constant():
  check(by_constants, (ints(np.int32),), lambda x: (x // -3, x % -3, jnp.fmod(x, -3)))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 6)
def static_shifts(x, a, b, c, d, e, f):
  u = x[...]
  a[...] = u << 31
  b[...] = u >> 31
  c[...] = u << 32            # past the width: lax's 0
  d[...] = u >> 40            # the sign fill (signed) or 0
  e[...] = lax.shift_right_logical(u, 5)
  f[...] = jnp.right_shift(u, 1)


@pytest.mark.parametrize("dt", [np.int32, np.uint32, np.int16, np.uint8], ids=_name)
def test_static_shifts_past_the_width(dt):
  check(static_shifts, (ints(dt),), lambda x: (x << 31, x >> 31, x << 32, x >> 40,
                                               lax.shift_right_logical(x, jnp.asarray(5, x.dtype)), x >> 1))


@mg.mgpu_kernel(out_shape=lambda x, s: (like(x),) * 4)
def lax_shifts(x, s, a, b, c, d):
  v, k = x[...], s[...]
  a[...] = lax.shift_right_arithmetic(v, k)      # of an unsigned type too: its bits as signed
  b[...] = lax.shift_right_logical(v, k)
  c[...] = lax.shift_left(v, k)
  d[...] = lax.shift_right_arithmetic(v, 3)


@pytest.mark.parametrize("dt", [np.uint32, np.int32, np.uint16, np.uint8, np.int8], ids=_name)
def test_lax_shifts_by_run_time_amounts(dt):
  s = jnp.asarray(np.random.default_rng(5).integers(0, np.dtype(dt).itemsize * 8, N).astype(dt))
  check(lax_shifts, (ints(dt), s), lambda v, k: (
      lax.shift_right_arithmetic(v, k), lax.shift_right_logical(v, k), lax.shift_left(v, k),
      lax.shift_right_arithmetic(v, jnp.asarray(3, v.dtype))))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 4)
def hashes(x, a, b, c, d):
  v = x[...]
  a[...] = v * 2654435761          # a Python int past int32 against uint32
  b[...] = v ^ 0xFFFFFFFF
  c[...] = (v + 4000000000) >> 7
  d[...] = v // 3000000000


def test_uint32_hash_constants():
  u = jnp.uint32
  check(hashes, (ints(np.uint32),), lambda v: (v * u(2654435761), v ^ u(0xFFFFFFFF), (v + u(4000000000)) >> 7,
                                               v // u(3000000000)))


# ------------------------------------------------------------------ conversions
F2I = np.array([np.nan, np.inf, -np.inf, 3e9, -3e9, 2.5, -2.5, 300.0, -129.7, 65536.0, 4294967296.0, -0.9, 0.9,
                1e20, -1e20, 255.9, 256.0, -1.0, 127.5, -128.5], np.float32)


@pytest.mark.parametrize("src", FLOATS, ids=_name)
@pytest.mark.parametrize("dt", INTS + [np.bool_], ids=_name)
def test_float_to_int_saturates_nan_to_zero(src, dt):
  """NaN -> 0, +-inf and values past the range saturate (XLA's conversions, CPU and GPU alike)."""
  x = floats(F2I, src, scale=1e3)
  check(unary_kernel(lambda v: v.astype(dt), x), (x,), lambda v: v.astype(dt))


@mg.mgpu_kernel(out_shape=lambda x: (S((8,), jnp.bool_), S((8,), jnp.int8), S((8,), jnp.uint8)))
def scalar_conversions(x, o, p, q):
  v = x[...]
  for j in range(8):
    o[j] = v[j].astype(jnp.bool_)
    p[j] = v[j].astype(jnp.int8)
    q[j] = v[j].astype(jnp.uint8)


@pytest.mark.parametrize("dt", FLOATS, ids=_name)
def test_scalar_float_conversions(dt):
  x = floats([np.nan, 0.5, -0.0, 0.0, np.inf, -300.0, 255.9, -0.7], dt)
  check(scalar_conversions, (x,), lambda v: (v[:8].astype(bool), v[:8].astype(jnp.int8), v[:8].astype(jnp.uint8)))


@pytest.mark.parametrize("src", [np.int32, np.uint32, np.uint16, np.int8], ids=_name)
@pytest.mark.parametrize("dt", [jnp.float32, jnp.float16], ids=_name)
def test_int_to_float_rounds_once(src, dt):
  """Large ints round to nearest even (2**24 + 1 -> 2**24 in float32); float16 overflows to inf. (bfloat16 is left
  out: jnp on the CPU rounds through float32, twice; docs/language.md.)"""
  x = np.array(ints(src))
  x[6:10] = np.array([2**24 + 1, 2**24 + 3, 16842753, 65520], np.int64).astype(src)
  x = jnp.asarray(x)
  check(unary_kernel(lambda v: v.astype(dt), x), (x,), lambda v: v.astype(dt))


@pytest.mark.parametrize("src", INTS, ids=_name)
def test_int_to_int_wraps_and_scalar_casts(src):
  for dt in [d for d in INTS if d != src]:
    @mg.mgpu_kernel(out_shape=lambda x: (like(x, dt), S((1,), dt)))
    def k(x, o, s):
      v = x[...]
      o[...] = v.astype(o.dtype)
      s[0] = v[3].astype(o.dtype) + v[4].astype(o.dtype)
    check(k, (ints(src),), lambda x: (x.astype(dt), (x[3].astype(dt) + x[4].astype(dt))[None]), build=False)
  export(k, ints(src))


# ------------------------------------------------------------------ bools, promotion, float16 sums
@mg.mgpu_kernel(out_shape=lambda x, y: (like(x, jnp.bool_),) * 4 + (like(x, jnp.int32),) * 2)
def bool_ops(x, y, a, b, c, d, e, f):
  m, n = x[...] > 0, y[...] > 0
  a[...] = m * n
  b[...] = m ^ n
  c[...] = ~m
  d[...] = jnp.maximum(m, n)
  e[...] = m.astype(jnp.int32) - n.astype(jnp.int32)
  f[...] = m + 0


def test_bool_arithmetic():
  def ref(x, y):
    m, n = x > 0, y > 0
    return m * n, m ^ n, ~m, jnp.maximum(m, n), m.astype(jnp.int32) - n.astype(jnp.int32), m + 0
  check(bool_ops, (floats([]), floats([], seed=1)), ref)


@mg.mgpu_kernel(out_shape=lambda x: (S((1,), jnp.int32),) * 3)
def bool_counts(x, a, b, c):
  m = x[...] > 0
  a[0] = jnp.sum(m)
  b[0] = m.sum()
  c[0] = jnp.count_nonzero(m)


def test_bool_counts():
  check(bool_counts, (floats([]),), lambda u: (jnp.sum(u > 0)[None],) * 2 + (
      jnp.count_nonzero(u > 0)[None].astype(jnp.int32),))


@pytest.mark.parametrize("da,db", [(np.int8, np.uint8), (np.int16, np.uint8), (np.uint8, np.int32),
                                   (jnp.float16, np.int32), (jnp.bfloat16, np.int8), (np.float32, np.uint32)],
                         ids=lambda d: _name(d))
def test_mixed_promotion_as_jnp(da, db):
  a = ints(da) if np.issubdtype(da, np.integer) else floats([], da, scale=100.0)
  b = ints(db, seed=2)
  o = jax.eval_shape(lambda a, b: a + b, a, b)

  @mg.mgpu_kernel(out_shape=lambda x, y: (like(x, o.dtype),) * 2)
  def k(x, y, s, p):
    s[...] = x[...] + y[...]
    p[...] = x[...] * y[...]
  check(k, (a, b), lambda a, b: (a + b, a * b))


@mg.mgpu_kernel(out_shape=lambda x: (S((1,), x.dtype),) * 3)
def half_sums(x, s, m, t):
  u = x[...]
  s[0] = jnp.sum(u)
  m[0] = jnp.mean(u)
  t[0] = u.sum()


@pytest.mark.filterwarnings("ignore::mgpu_dsl.PrecisionWarning")
def test_float16_sums_past_65504():
  """jnp sums float16 in float32: partial sums past 65504 do not overflow; a total past it is inf."""
  for x in (floats([60000.0, 60000.0, -60000.0, -60000.0], jnp.float16, scale=1000.0),
            floats([60000.0] * 8, jnp.float16)):
    check(half_sums, (x,), lambda u: (jnp.sum(u)[None], jnp.mean(u)[None], u.sum()[None]))


def _half_rows(dt):
  x = np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32) * 100
  x[0, :4] = [60000, 60000, -60000, -60000]; x[1, :] = 1000.0; x[2, :8] = [65504] * 4 + [-65504] * 4
  x[3, :3] = [np.inf, -np.inf, 1.0]; x[4, 0] = np.nan; x[5, :] = 600.0
  with np.errstate(over="ignore"):          # (bfloat16's rows past float32's range: inf)
    return jnp.asarray(x if dt == jnp.float16 else x * 1e34).astype(dt)


@mg.mgpu_kernel(out_shape=lambda x: (S((8,), x.dtype),) * 5 + (S((8,), jnp.float32),))
def half_stats(x, v, s, n, k, m, f):
  u = x[...]
  v[...] = jnp.var(u, axis=1)
  s[...] = jnp.std(u, axis=1)
  n[...] = jnp.nanstd(u, axis=1)
  k[...] = u.std(axis=1, ddof=1)
  m[...] = jnp.std(u, axis=1, mean=jnp.mean(u, axis=1, keepdims=True))
  f[...] = jnp.std(u, axis=1, dtype=jnp.float32)


@pytest.mark.filterwarnings("ignore::mgpu_dsl.PrecisionWarning")
@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16], ids=_name)
def test_std_of_16_bit_floats_is_the_root_of_the_rounded_variance(dt):
  """jnp.std is lax.sqrt(jnp.var(...)): the variance rounded to float16 first (inf past 65504, so the std is inf);
  the kernel took the root in float32 (1.06e4 where jnp gives inf)."""
  x = _half_rows(dt)
  got = half_stats(x, interpret=True)
  want = (jnp.var(x, axis=1), jnp.std(x, axis=1), jnp.nanstd(x, axis=1), jnp.std(x, axis=1, ddof=1),
          jnp.std(x, axis=1, mean=jnp.mean(x, axis=1, keepdims=True)))
  for g, w in zip(got, want):
    same(g, w)
  f = np.asarray(jnp.std(x.astype(jnp.float32), axis=1))      # dtype=float32: a float32 root (sums' order aside)
  np.testing.assert_allclose(np.asarray(got[5]), f, rtol=1e-6)
  export(half_stats, x)


# ------------------------------------------------------------------ NaN, signed zeros, clip, abs, sign, bits
NAN_A = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, np.inf, -np.inf, np.nan, 2.0, -1.0], np.float32)
NAN_B = np.array([1.0, np.nan, 0.0, -0.0, np.nan, np.nan, 3.0, -np.inf, np.nan, -1.0], np.float32)


@mg.mgpu_kernel(out_shape=lambda x, y: (like(x),) * 5)
def min_max(x, y, a, b, c, d, e):
  u, v = x[...], y[...]
  a[...] = jnp.minimum(u, v)
  b[...] = jnp.maximum(u, v)
  c[...] = jnp.fmin(u, v)
  d[...] = jnp.fmax(u, v)
  e[...] = jnp.nan_to_num(u)


@pytest.mark.parametrize("dt", FLOATS, ids=_name)
def test_minimum_propagates_nan_fmin_does_not(dt):
  check(min_max, (floats(NAN_A, dt), floats(NAN_B, dt, seed=1)), lambda u, v: (
      jnp.minimum(u, v), jnp.maximum(u, v), jnp.fmin(u, v), jnp.fmax(u, v), jnp.nan_to_num(u)))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 3)
def clips(x, a, b, c):
  u = x[...]
  a[...] = jnp.clip(u, 2, -2)          # lo > hi: hi everywhere, as jnp's minimum(maximum(x, lo), hi)
  b[...] = u.clip(3, 1)
  c[...] = lax.clamp(jnp.int32(5) if u.dtype == jnp.int32 else 5.0, u, -5 if u.dtype == jnp.int32 else -5.0)


def test_clip_with_lo_above_hi():
  check(clips, (floats(NAN_A),), lambda u: (jnp.clip(u, 2, -2), jnp.clip(u, 3, 1),
                                             lax.clamp(jnp.float32(5), u, jnp.float32(-5))))
  check(clips, (ints(np.int32),), lambda u: (jnp.clip(u, 2, -2), jnp.clip(u, 3, 1),
                                              lax.clamp(jnp.int32(5), u, jnp.int32(-5))))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 3 + (S((2,), x.dtype),))
def absolutes(x, a, b, c, s):
  u = x[...]
  a[...] = jnp.abs(u)
  b[...] = abs(u)
  c[...] = lax.abs(u)
  s[0] = jnp.abs(u[0])
  s[1] = -u[0]


@pytest.mark.parametrize("dt", INTS, ids=_name)
def test_abs_of_int_min_wraps(dt):
  check(absolutes, (ints(dt),), lambda u: (jnp.abs(u),) * 3 + (jnp.stack([jnp.abs(u[0]), -u[0]]),))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 2)
def signs(x, a, b):
  u = x[...]
  a[...] = jnp.sign(u)
  b[...] = jnp.signbit(u).astype(x.dtype)


SIGN_EDGES = [-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-30, -1e-30, 3.0, -3.0]


@pytest.mark.parametrize("dt", FLOATS + [np.int32, np.int8, np.uint32, np.uint8], ids=_name)
def test_sign_of_negative_zero_and_nan(dt):
  x = floats(SIGN_EDGES, dt) if dt in FLOATS else ints(dt)
  check(signs, (x,), lambda u: (jnp.sign(u), jnp.signbit(u).astype(u.dtype)))


@mg.mgpu_kernel(out_shape=lambda x: (like(x),) * 4)
def bit_counts(x, a, b, c, d):
  u = x[...]
  a[...] = lax.population_count(u)
  b[...] = lax.clz(u)
  c[...] = jnp.bitwise_count(u).astype(x.dtype)
  d[...] = jnp.invert(u)


@pytest.mark.parametrize("dt", INTS, ids=_name)
def test_popcount_and_clz(dt):
  check(bit_counts, (ints(dt),), lambda u: (lax.population_count(u), lax.clz(u),
                                            jnp.bitwise_count(u).astype(u.dtype), ~u))


@mg.mgpu_kernel(out_shape=lambda x, y: (like(x, jnp.bool_),) * 4)
def unsigned_compares(x, y, a, b, c, d):
  u, v = x[...], y[...]
  a[...] = u < v
  b[...] = u >= v
  c[...] = u > 3000000000
  d[...] = jnp.maximum(u, v) == u


def test_unsigned_comparisons():
  check(unsigned_compares, (ints(np.uint32), ints(np.uint32, seed=1)), lambda u, v: (
      u < v, u >= v, u > jnp.uint32(3000000000), jnp.maximum(u, v) == u))


# ------------------------------------------------------------------ reductions, arg reductions, scans, sorts
def _grid(dt):
  x = np.random.default_rng(0).integers(-3, 4, (8, 128)).astype(np.float32)
  x[0, 5] = np.nan; x[1, 3] = np.nan; x[1, 7] = -np.nan; x[2, :] = -0.0; x[2, 9] = 0.0; x[3, :] = np.nan
  x[4, 10] = np.inf; x[4, 11] = -np.inf; x[5, ::3] = 0.0; x[5, 1::3] = -0.0
  x[:, 100] = np.nan * (np.arange(8) % 2)
  return jnp.asarray(x).astype(dt)


ROWS = {
    "max": lambda v: jnp.max(v, axis=1), "min0": lambda v: jnp.min(v, axis=0),
    "argmax": lambda v: jnp.argmax(v, axis=1).astype(jnp.int32),
    "argmin0": lambda v: jnp.argmin(v, axis=0).astype(jnp.int32),
    "nanmax": lambda v: jnp.nanmax(v, axis=1), "cummax": lambda v: lax.cummax(v, axis=1),
    "cummin0": lambda v: lax.cummin(v, axis=0), "top_k": lambda v: lax.top_k(v, 4)[0],
    "sort": lambda v: jnp.sort(v, axis=1), "argsort": lambda v: jnp.argsort(v, axis=1).astype(jnp.int32),
}


@pytest.mark.parametrize("dt", [jnp.float32, jnp.bfloat16], ids=_name)
@pytest.mark.parametrize("name", list(ROWS))
def test_nan_and_signed_zero_orders(name, dt):
  """NaN propagates through max / min / scans and counts as the largest in sorts and arg reductions (its first
  index), -0.0 sorts before 0.0 and ties take the first index, as jnp's."""
  x = _grid(dt)
  check(unary_kernel(ROWS[name], x), (x,), ROWS[name])


UNSIGNED_ROWS = {
    "sort": lambda v: jnp.sort(v, axis=1), "argmax": lambda v: jnp.argmax(v, axis=1).astype(jnp.int32),
    "max": lambda v: jnp.max(v, axis=1), "min0": lambda v: jnp.min(v, axis=0), "cummax": lambda v: lax.cummax(v, axis=1),
    "top_k": lambda v: lax.top_k(v, 4)[0], "div": lambda v: v // v[0:1], "shift": lambda v: v >> (v & 7),
    "to_float": lambda v: v.astype(jnp.float32),
}
_SIGNED_OPS = re.compile(r"arith\.(divsi|floordivsi|remsi|shrsi|maxsi|minsi|sitofp|extsi|fptosi)\b"
                         r"|nvvm\.redux\.sync (max|min)\b|arith\.cmpi (slt|sle|sgt|sge)")
# the signed ops a kernel of unsigned values may hold: an arg reduction's first index (minsi), a sort's tie-break of
# positions (cmpi slt), both on int32 indices
_INDEX_OPS = {"argmax": {"arith.minsi"}, "sort": {"arith.cmpi slt"}, "top_k": {"arith.cmpi slt"}}


@pytest.mark.parametrize("dt", [np.uint32, np.uint16], ids=_name)
@pytest.mark.parametrize("name", list(UNSIGNED_ROWS))
def test_unsigned_values_take_unsigned_ops(name, dt):
  """In interpret mode jnp's result; in the MLIR no signed division, shift, max, conversion, comparison or warp
  reduction but those of int32 indices."""
  info = np.iinfo(dt)
  x = jnp.asarray(np.random.default_rng(0).integers(0, int(info.max) + 1, (8, 128), dtype=np.int64).astype(dt))
  f = UNSIGNED_ROWS[name]
  k = unary_kernel(f, x)
  check(k, (x,), f)
  found = {m.group(0) for m in _SIGNED_OPS.finditer(k.mlir(S(x.shape, x.dtype)))}
  assert found <= _INDEX_OPS.get(name, set()), found


# ------------------------------------------------------------------ jnp.isposinf / jnp.isneginf (fixed)
@mg.mgpu_kernel(out_shape=lambda x: (like(x, jnp.bool_),) * 2 + (S((2,), jnp.bool_),))
def infinities(x, a, b, s):
  v = x[...]
  a[...] = jnp.isposinf(v)
  b[...] = jnp.isneginf(v)
  s[0] = jnp.isneginf(v[2])
  s[1] = jnp.isposinf(v[0]) & jnp.isposinf(v[4])


@pytest.mark.parametrize("dt", FLOATS + [jnp.int32, jnp.uint8, jnp.bool_], ids=_name)
def test_isposinf_isneginf(dt):
  """Were MG003 (no form for them); floats compare with +-inf, integers and bools are False, as jnp's."""
  x = floats([np.inf, np.nan, -np.inf, 0.0, 65520.0], scale=1e5).astype(dt)
  check(infinities, (x,), lambda v: (jnp.isposinf(v), jnp.isneginf(v),
                                     jnp.stack([jnp.isneginf(v[2]), jnp.isposinf(v[0]) & jnp.isposinf(v[4])])))


# ------------------------------------------------------------------ searchsorted of NaN (fixed)
def _table(nan_tail=0):
  t = np.sort(np.random.default_rng(1).standard_normal(64).astype(np.float32))
  if nan_tail:
    t[-nan_tail:] = np.nan                 # jnp.sort puts NaN last
  return jnp.asarray(t)


def _queries(t, n=N):
  q = np.random.default_rng(2).standard_normal(n).astype(np.float32) * 2
  q[:6] = [np.nan, -np.nan, np.inf, -np.inf, -0.0, t[3]]
  return jnp.asarray(q)


@mg.mgpu_kernel(out_shape=lambda t, q: (S(q.shape, jnp.int32),) * 5 + (S((4,), jnp.int32),))
def searches(t, q, a, b, c, d, e, s):
  tv, qv = t[...], q[...]
  a[...] = jnp.searchsorted(tv, qv)                        # a register table: counts
  b[...] = jnp.searchsorted(tv, qv, side="right")
  c[...] = ml.searchsorted(t, qv)                          # a GMEM table: a binary search of gathers
  d[...] = jnp.searchsorted(tv, qv, method="compare_all")
  e[...] = ml.searchsorted(t, qv, side="right", method="sort")
  s[0] = jnp.searchsorted(tv, qv[0])                       # scalar queries
  s[1] = ml.searchsorted(t, qv[1])
  s[2] = jnp.searchsorted(tv, qv[2], side="right")
  s[3] = ml.searchsorted(t, qv[0], side="right")


def _searches_ref(t, q):
  i = lambda v: v.astype(jnp.int32)
  return (i(jnp.searchsorted(t, q)), i(jnp.searchsorted(t, q, side="right")), i(jnp.searchsorted(t, q)),
          i(jnp.searchsorted(t, q, method="compare_all")), i(jnp.searchsorted(t, q, side="right", method="sort")),
          i(jnp.stack([jnp.searchsorted(t, q[0]), jnp.searchsorted(t, q[1]), jnp.searchsorted(t, q[2], side="right"),
                       jnp.searchsorted(t, q[0], side="right")])))


@pytest.mark.parametrize("dt", FLOATS, ids=_name)
@pytest.mark.parametrize("nan_tail", [0, 3])
def test_searchsorted_places_nan_after_the_numbers(dt, nan_tail):
  """jnp's order is its sort's: a NaN query goes after every number (and before the table's NaNs on the left);
  both the count and the binary search placed it at 0."""
  t = _table(nan_tail).astype(dt)
  q = _queries(_table()).astype(dt)
  check(searches, (t, q), _searches_ref)


@mg.mgpu_kernel(out_shape=lambda t, q: (S((2, 40), jnp.int32), S((2, 40), jnp.int32)))
def tile_searches(t, q, o, d):
  o[...] = jnp.searchsorted(t[...], q[...])
  d[...] = jnp.digitize(q[...], t[...]).astype(jnp.int32)


def test_searchsorted_of_a_padded_tile_of_nan_queries():
  t = _table()
  q = _queries(t)[:80].reshape(2, 40)
  check(tile_searches, (t, q), lambda t, q: (jnp.searchsorted(t, q).astype(jnp.int32),
                                             jnp.digitize(q, t).astype(jnp.int32)))


def test_searchsorted_of_integers_unchanged():
  t = jnp.asarray(np.sort(np.random.default_rng(3).integers(-50, 50, 64)).astype(np.int32))
  q = jnp.asarray(np.random.default_rng(4).integers(-60, 60, N).astype(np.int32))

  @mg.mgpu_kernel(out_shape=lambda t, q: (S(q.shape, jnp.int32),) * 2)
  def k(t, q, a, b):
    a[...] = jnp.searchsorted(t[...], q[...], side="right")
    b[...] = ml.searchsorted(t, q[...])
  check(k, (t, q), lambda t, q: (jnp.searchsorted(t, q, side="right").astype(jnp.int32),
                                 jnp.searchsorted(t, q).astype(jnp.int32)))


# ------------------------------------------------------------------ on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dt", FLOATS + [jnp.int32], ids=_name)
def test_gpu_isposinf_isneginf(dt):
  x = floats([np.inf, np.nan, -np.inf, 0.0, 65520.0], scale=1e5).astype(dt)
  got = jax.jit(infinities)(x)
  want = (jnp.isposinf(x), jnp.isneginf(x), jnp.stack([jnp.isneginf(x[2]), jnp.isposinf(x[0]) & jnp.isposinf(x[4])]))
  for g, w in zip(got, want):
    same(g, w)


@pytest.mark.gpu
@pytest.mark.parametrize("nan_tail", [0, 3])
def test_gpu_searchsorted_of_nan(nan_tail):
  t, q = _table(nan_tail), _queries(_table())
  for g, w in zip(jax.jit(searches)(t, q), _searches_ref(t, q)):
    same(g, w)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [jnp.float16, jnp.bfloat16], ids=_name)
def test_gpu_std_of_16_bit_floats(dt):
  x = _half_rows(dt)
  got = jax.jit(half_stats)(x)
  same(got[1][:3], jnp.std(x, axis=1)[:3])          # inf where the float16 variance is
  np.testing.assert_allclose(np.asarray(got[1], np.float32), np.asarray(jnp.std(x, axis=1), np.float32), rtol=1e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("src", FLOATS, ids=_name)
def test_gpu_float_to_int_saturates(src):
  x = floats(F2I, src, scale=1e3)
  for dt in INTS:
    same(jax.jit(unary_kernel(lambda v: v.astype(dt), x))(x), x.astype(dt))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [np.uint32, np.uint16], ids=_name)
def test_gpu_unsigned_rows(dt):
  info = np.iinfo(dt)
  x = jnp.asarray(np.random.default_rng(0).integers(0, int(info.max) + 1, (8, 128), dtype=np.int64).astype(dt))
  for f in UNSIGNED_ROWS.values():
    same(jax.jit(unary_kernel(f, x))(x), f(x))
