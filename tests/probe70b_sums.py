"""Probe 70b's corpus, its first part: compensated summation (Kahan, Neumaier, Kahan-Babuska-Klein, pairwise trees in a
block), error-free transformations (TwoSum, Fast2Sum, TwoProd by ml.fma and by Dekker's split), double-float (float32
pairs) arithmetic, compensated dot products, Welford and Chan's parallel variance merges, exact integer sums in float32
and 16-bit data accumulated in float32 and rounded once, written as CUDA, Triton and JAX users write them.
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit (the references
replay the kernel's float32 steps in NumPy, each rounded on its own, so a reassociated or contracted step shows)."""
import math
from fractions import Fraction

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, BF16, F32, I32 = jnp.float16, jnp.bfloat16, jnp.float32, jnp.int32
f32 = np.float32
CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def rng_of(seed):
  return np.random.default_rng(7000 + seed)


def ill_conditioned(seed, shape):
  """Values whose float32 sum loses digits: large terms of both signs that cancel, and small ones."""
  r = rng_of(seed)
  big = r.choice([-1.0, 1.0], shape) * 2.0 ** r.integers(10, 20, shape)
  small = r.standard_normal(shape) * 1e-3
  return np.where(r.random(shape) < 0.3, big, small).astype(f32)


# ---------------------------------------------------------------- float32 replays of the kernels' steps (references)
def two_sum(a, b):
  a, b = f32(a), f32(b)
  s = f32(a + b)
  bb = f32(s - a)
  return s, f32(f32(a - f32(s - bb)) + f32(b - bb))


def _fma_one(a, b, c):
  """The exact a * b + c (Fractions) rounded once to float32: to float64 by Python (correctly rounded), moved to the
  odd neighbour where inexact (round to odd), then to float32, which that keeps correct."""
  if not all(math.isfinite(v) for v in (a, b, c)):
    return np.float32(np.float64(a) * np.float64(b) + np.float64(c))
  exact = Fraction(a) * Fraction(b) + Fraction(c)
  d = float(exact)
  if Fraction(d) != exact and np.float64(d).view(np.uint64) & 1 == 0:
    d = float(np.nextafter(d, math.inf if exact > Fraction(d) else -math.inf))
  return np.float32(d)


def fma32(a, b, c):
  """float32 fma of arrays (broadcast): each element's exact a * b + c rounded once."""
  a, b, c = np.broadcast_arrays(*(np.asarray(v, f32) for v in (a, b, c)))
  return np.array([_fma_one(float(x), float(y), float(z)) for x, y, z in zip(a.ravel(), b.ravel(), c.ravel())],
                  f32).reshape(a.shape)


def kahan_np(x, axis=0):
  x = np.moveaxis(np.asarray(x, f32), axis, 0)
  s = np.zeros(x.shape[1:], f32)
  c = np.zeros(x.shape[1:], f32)
  for v in x:
    y = f32(v - c)
    t = f32(s + y)
    c = f32(f32(t - s) - y)
    s = t
  return s


# ---------------------------------------------------------------- Kahan, Neumaier, Klein
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=lambda x: (x.shape[1] // 128,))
def kahan_columns(x, out):
  """A column sum a lane each, compensated (CUDA's textbook Kahan loop over the rows)."""
  cols = ml.program_id(0) * 128 + ml.arange(128)
  s = ml.zeros((128,), F32)
  c = ml.zeros((128,), F32)
  for i in ml.range(x.shape[0]):
    y = x[i, cols] - c
    t = s + y
    c = (t - s) - y
    s = t
  out[cols] = s


case("kahan_columns", kahan_columns, lambda s: ((ill_conditioned(s, (96, 256)),), {}), lambda x: kahan_np(x), 0)


def neumaier_np(x):
  s = np.zeros(x.shape[1:], f32)
  c = np.zeros(x.shape[1:], f32)
  for v in x:
    t = f32(s + v)
    c = f32(c + np.where(np.abs(s) >= np.abs(v), f32(f32(s - t) + v), f32(f32(v - t) + s)))
    s = t
  return f32(s + c)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def neumaier_columns(x, out):
  """Neumaier's improved Kahan (Kahan-Babuska): the branch picks which operand lost digits."""
  s = ml.zeros((x.shape[1],), F32)
  c = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    v = x.at[i][...]
    t = s + v
    c += ml.where(ml.abs(s) >= ml.abs(v), (s - t) + v, (v - t) + s)
    s = t
  out[...] = s + c


case("neumaier_columns", neumaier_columns, lambda s: ((ill_conditioned(s, (64, 128)),), {}), neumaier_np, 0)


def klein_np(x):
  s = np.zeros(x.shape[1:], f32)
  cs = np.zeros(x.shape[1:], f32)
  ccs = np.zeros(x.shape[1:], f32)
  for v in x:
    t = f32(s + v)
    c = np.where(np.abs(s) >= np.abs(v), f32(f32(s - t) + v), f32(f32(v - t) + s))
    s = t
    t = f32(cs + c)
    cc = np.where(np.abs(cs) >= np.abs(c), f32(f32(cs - t) + c), f32(f32(c - t) + cs))
    cs = t
    ccs = f32(ccs + cc)
  return f32(f32(s + cs) + ccs)


@ml.inline
def fast_two_sum_by_magnitude(a, b):
  t = a + b
  return t, ml.where(ml.abs(a) >= ml.abs(b), (a - t) + b, (b - t) + a)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def klein_columns(x, out):
  """Kahan-Babuska-Klein's second-order sum, its two compensations through an @ml.inline helper."""
  s = ml.zeros((x.shape[1],), F32)
  cs = ml.zeros((x.shape[1],), F32)
  ccs = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    s, c = fast_two_sum_by_magnitude(s, x.at[i][...])
    cs, cc = fast_two_sum_by_magnitude(cs, c)
    ccs = ccs + cc
  out[...] = (s + cs) + ccs


case("klein_columns", klein_columns, lambda s: ((ill_conditioned(s, (64, 128)),), {}), klein_np, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 64,))
def kahan_rows_of_chunks(x, out, *, BK: ml.constexpr = 32):
  """Triton's pattern: each program a block of rows, a k loop over column chunks, each chunk summed by tl.sum and
  the chunk sums Kahan-accumulated (the rows' compensation carried by the loop)."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  s = ml.zeros((64,), F32)
  c = ml.zeros((64,), F32)
  for k in range(x.shape[1] // BK):
    y = ml.sum(x.at[r, ml.ds(k * BK, BK)][...], axis=1) - c
    t = s + y
    c = (t - s) - y
    s = t
  out.at[r][...] = s


case("kahan_rows_of_chunks", kahan_rows_of_chunks, lambda s: ((rng_of(s).random((128, 256)).astype(f32) + 1000,), {}),
     lambda x: np.sum(x.astype(np.float64), 1), 1e-7)


def tree_np(x):
  v = np.asarray(x, f32)
  while v.shape[0] > 1:
    h = v.shape[0] // 2
    v = f32(v[:h] + v[h:])
  return v[0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def pairwise_tree_rows(x, out):
  """A pairwise (tree) sum of 16 rows, halves added level by level as a CUDA block reduction does in shared memory."""
  v = x[...]
  h = x.shape[0] // 2
  while h >= 1:
    v = v[:h] + v[h:2 * h]
    h //= 2
  out[...] = v[0]


case("pairwise_tree_rows", pairwise_tree_rows, lambda s: ((ill_conditioned(s, (16, 128)),), {}), tree_np, 0)


# ---------------------------------------------------------------- error-free transformations
@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def two_sum_kernel(a, b, s_out, e_out):
  """Knuth's TwoSum: s + e == a + b exactly, branch-free."""
  x, y = a[...], b[...]
  s = x + y
  bb = s - x
  s_out[...] = s
  e_out[...] = (x - (s - bb)) + (y - bb)


case("two_sum", two_sum_kernel, lambda s: ((ill_conditioned(s, (256,)), ill_conditioned(s + 1, (256,))), {}),
     two_sum, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def fast_two_sum_kernel(a, b, s_out, e_out):
  """Dekker's Fast2Sum after ordering the operands by magnitude (max / min of |.| through a select)."""
  x, y = a[...], b[...]
  big = ml.where(ml.abs(x) >= ml.abs(y), x, y)
  small = ml.where(ml.abs(x) >= ml.abs(y), y, x)
  s = big + small
  s_out[...] = s
  e_out[...] = small - (s - big)


def _fast_two_sum_ref(a, b):
  big = np.where(np.abs(a) >= np.abs(b), a, b)
  small = np.where(np.abs(a) >= np.abs(b), b, a)
  s = f32(big + small)
  return s, f32(small - f32(s - big))


case("fast_two_sum", fast_two_sum_kernel, lambda s: ((ill_conditioned(s, (256,)), ill_conditioned(s + 2, (256,))), {}),
     _fast_two_sum_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def two_prod_fma(a, b, p_out, e_out):
  """TwoProd by a fused multiply-add: p + e == a * b exactly."""
  x, y = a[...], b[...]
  p = x * y
  p_out[...] = p
  e_out[...] = ml.fma(x, y, -p)


case("two_prod_fma", two_prod_fma, lambda s: ((rng_of(s).standard_normal(256).astype(f32),
                                               rng_of(s + 1).standard_normal(256).astype(f32)), {}),
     lambda a, b: (f32(a * b), fma32(a, b, -f32(a * b))), 0)


def dekker_split_np(a):
  t = f32(f32(4097.0) * a)
  hi = f32(t - f32(t - a))
  return hi, f32(a - hi)


def dekker_two_prod_np(a, b):
  p = f32(a * b)
  ah, al = dekker_split_np(a)
  bh, bl = dekker_split_np(b)
  e = f32(f32(f32(f32(ah * bh) - p) + f32(ah * bl)) + f32(al * bh))
  return p, f32(e + f32(al * bl))


@ml.inline
def split(a):
  t = 4097.0 * a                      # 2**12 + 1: float32's 24 bits in two halves of 12
  hi = t - (t - a)
  return hi, a - hi


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a))
def two_prod_dekker(a, b, p_out, e_out):
  """TwoProd without an FMA (Dekker / Veltkamp): each operand split into 12-bit halves, whose products are exact.
  The split's `t - (t - a)` is exactly what a contracted multiply-add breaks."""
  x, y = a[...], b[...]
  p = x * y
  xh, xl = split(x)
  yh, yl = split(y)
  e = ((xh * yh - p) + xh * yl) + xl * yh
  p_out[...] = p
  e_out[...] = e + xl * yl


case("two_prod_dekker", two_prod_dekker, lambda s: ((rng_of(s).standard_normal(256).astype(f32),
                                                     rng_of(s + 1).standard_normal(256).astype(f32)), {}),
     dekker_two_prod_np, 0)


@mg.mgpu_kernel(out_shape=lambda a: (a, a))
def veltkamp_split(a, hi_out, lo_out):
  hi, lo = split(a[...])
  hi_out[...] = hi
  lo_out[...] = lo


case("veltkamp_split", veltkamp_split, lambda s: ((rng_of(s).standard_normal((8, 128)).astype(f32) * 1e3,), {}),
     dekker_split_np, 0)


# ---------------------------------------------------------------- double-float (float32 pairs)
def df_add_np(ah, al, bh, bl):
  s, e = two_sum(ah, bh)
  e = f32(e + f32(al + bl))
  h = f32(s + e)
  return h, f32(e - f32(h - s))


@mg.mgpu_kernel(out_shape=lambda ah, al, bh, bl: (ah, ah))
def df_add(ah, al, bh, bl, hi, lo):
  """Double-float addition (the sloppy df64 add of GPU double-single libraries)."""
  a_hi, b_hi = ah[...], bh[...]
  s = a_hi + b_hi
  v = s - a_hi
  e = (a_hi - (s - v)) + (b_hi - v)
  e = e + (al[...] + bl[...])
  h = s + e
  hi[...] = h
  lo[...] = e - (h - s)


def _df_make(seed):
  r = rng_of(seed)
  ah = r.standard_normal(256).astype(f32)
  bh = r.standard_normal(256).astype(f32)
  return (ah, f32(ah * 1e-8 * r.random(256)), bh, f32(bh * 1e-8 * r.random(256))), {}


case("df_add", df_add, _df_make, df_add_np, 0)


def df_mul_np(ah, al, bh, bl):
  p = f32(ah * bh)
  e = fma32(ah, bh, -p)
  e = f32(e + f32(f32(ah * bl) + f32(al * bh)))
  h = f32(p + e)
  return h, f32(e - f32(h - p))


@mg.mgpu_kernel(out_shape=lambda ah, al, bh, bl: (ah, ah))
def df_mul(ah, al, bh, bl, hi, lo):
  """Double-float multiplication: TwoProd by ml.fma, the cross terms, a Fast2Sum to renormalise."""
  a_hi, a_lo, b_hi, b_lo = ah[...], al[...], bh[...], bl[...]
  p = a_hi * b_hi
  e = ml.fma(a_hi, b_hi, -p)
  e = e + (a_hi * b_lo + a_lo * b_hi)
  h = p + e
  hi[...] = h
  lo[...] = e - (h - p)


case("df_mul", df_mul, _df_make, df_mul_np, 0)


def dot2_np(x, y):
  """Ogita-Rump-Oishi Dot2 over the rows, a lane a column."""
  s = np.zeros(x.shape[1], f32)
  c = np.zeros(x.shape[1], f32)
  for a, b in zip(x, y):
    p = f32(a * b)
    ep = fma32(a, b, -p)
    s, es = two_sum(s, p)
    c = f32(c + f32(ep + es))
  return f32(s + c)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[1],), F32), grid=(1,))
def dot2_columns(x, y, out):
  """Compensated dot products (Dot2): TwoProd and TwoSum per term, the errors summed apart."""
  s = ml.zeros((x.shape[1],), F32)
  c = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    a, b = x.at[i][...], y.at[i][...]
    p = a * b
    ep = ml.fma(a, b, -p)
    t = s + p
    z = t - s
    es = (s - (t - z)) + (p - z)
    s = t
    c = c + (ep + es)
  out[...] = s + c


case("dot2_columns", dot2_columns, lambda s: ((ill_conditioned(s, (48, 128)), ill_conditioned(s + 3, (48, 128))), {}),
     dot2_np, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32), grid=(1,))
def df_accumulate(x, out):
  """A column sum carried as a double-float (hi, lo) pair through a run-time loop; the pair rounded at the end."""
  hi = ml.zeros((x.shape[1],), F32)
  lo = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    v = x.at[i][...]
    s = hi + v
    bb = s - hi
    e = (hi - (s - bb)) + (v - bb) + lo
    hi = s + e
    lo = e - (hi - s)
  out[...] = hi + lo


def _df_acc_ref(x):
  hi = np.zeros(x.shape[1], f32)
  lo = np.zeros(x.shape[1], f32)
  for v in x:
    s, e = two_sum(hi, v)
    e = f32(e + lo)
    h = f32(s + e)
    lo = f32(e - f32(h - s))
    hi = h
  return f32(hi + lo)


case("df_accumulate", df_accumulate, lambda s: ((ill_conditioned(s, (64, 128)),), {}), _df_acc_ref, 0)


# ---------------------------------------------------------------- Welford and Chan's merges
def welford_np(x):
  n = np.zeros(x.shape[1], f32)
  mean = np.zeros(x.shape[1], f32)
  m2 = np.zeros(x.shape[1], f32)
  for v in x:
    n = f32(n + 1)
    d = f32(v - mean)
    mean = f32(mean + f32(d / n))
    m2 = f32(m2 + f32(d * f32(v - mean)))
  return mean, f32(m2 / n)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32)), grid=(1,))
def welford_columns(x, mean_out, var_out):
  """Welford's online mean and variance a column a lane (the count a float, as apex's welford kernels keep it)."""
  n = ml.zeros((x.shape[1],), F32)
  mean = ml.zeros((x.shape[1],), F32)
  m2 = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    v = x.at[i][...]
    n = n + 1.0
    d = v - mean
    mean = mean + d / n
    m2 = m2 + d * (v - mean)
  mean_out[...] = mean
  var_out[...] = m2 / n


case("welford_columns", welford_columns, lambda s: ((rng_of(s).standard_normal((40, 128)).astype(f32) + 1e4,), {}),
     welford_np, 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 64, x.shape[1]), F32),) * 3, grid=lambda x: (x.shape[0] // 64,))
def welford_partials(x, cnt, mean, m2):
  """Pass 1 of a two-pass variance: each program's block of rows reduced to (count, mean, M2) per column."""
  p = ml.program_id(0)
  v = x.at[ml.ds(p * 64, 64), :][...]
  mu = ml.sum(v, axis=0) / 64.0
  d = v - mu[None, :]
  cnt.at[p][...] = ml.full((x.shape[1],), 64.0, F32)
  mean.at[p][...] = mu
  m2.at[p][...] = ml.sum(d * d, axis=0)


@mg.mgpu_kernel(out_shape=lambda n, m, q: (S(n.shape[1:], F32), S(n.shape[1:], F32)), grid=(1,))
def chan_merge(cnt, mean, m2, mean_out, var_out):
  """Pass 2: Chan, Golub and LeVeque's pairwise merge of the partials, in the order of the programs."""
  n_a = cnt.at[0][...]
  mu_a = mean.at[0][...]
  q_a = m2.at[0][...]
  for p in ml.range(1, cnt.shape[0]):
    n_b, mu_b, q_b = cnt.at[p][...], mean.at[p][...], m2.at[p][...]
    n = n_a + n_b
    delta = mu_b - mu_a
    mu_a = mu_a + delta * (n_b / n)
    q_a = q_a + q_b + delta * delta * (n_a * n_b / n)
    n_a = n
  mean_out[...] = mu_a
  var_out[...] = q_a / n_a


def two_pass_variance(x):
  c, m, q = welford_partials(x)
  return chan_merge(c, m, q)


def _two_pass_interpret(x):
  c, m, q = welford_partials(x, interpret=True)
  return chan_merge(c, m, q, interpret=True)


class _Pipeline:
  """Two launches called as one kernel by the corpus's harness (interpret=True reaches both)."""

  def __init__(self, run, run_interpret):
    self.run, self.run_interpret = run, run_interpret

  def __call__(self, *args, interpret=False, **kw):
    return (self.run_interpret if interpret else self.run)(*args, **kw)


case("chan_merge_of_block_partials", _Pipeline(two_pass_variance, _two_pass_interpret),
     lambda s: ((rng_of(s).standard_normal((256, 128)).astype(f32) * 3 + 1e3,), {}),
     lambda x: (np.mean(x.astype(np.float64), 0), np.var(x.astype(np.float64), 0)), 2e-5)     # float32's partial means


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 8,))
def layernorm_stats_welford_chunks(x, mean_out, rstd_out, *, BK: ml.constexpr = 64, eps: ml.constexpr = 1e-5):
  """Liger / apex layer norm statistics by chunks: each chunk's mean and M2, merged into the running ones (Chan)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  n_a = 0.0
  mu = ml.zeros((8,), F32)
  q = ml.zeros((8,), F32)
  for k in range(x.shape[1] // BK):
    v = x.at[r, ml.ds(k * BK, BK)][...]
    mu_b = ml.mean(v, axis=1)
    q_b = ml.sum((v - mu_b[:, None]) ** 2, axis=1)
    n = n_a + BK
    delta = mu_b - mu
    mu = mu + delta * (BK / n)
    q = q + q_b + delta * delta * (n_a * BK / n)
    n_a = n
  mean_out.at[r][...] = mu
  rstd_out.at[r][...] = ml.rsqrt(q / n_a + eps)


case("layernorm_stats_welford_chunks", layernorm_stats_welford_chunks,
     lambda s: ((rng_of(s).standard_normal((16, 256)).astype(f32) * 0.1 + 50,), {}),
     lambda x, **k: (np.mean(x.astype(np.float64), 1), 1 / np.sqrt(np.var(x.astype(np.float64), 1) + 1e-5)), 5e-6)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=(1,))
def var_by_ml_and_jnp(x, v1, v2):
  """The library's variances: ml.var (two passes) and jnp.var(ddof=1) of a row with a large mean."""
  t = x[...]
  v1[...] = ml.var(t, axis=1)
  v2[...] = jnp.var(t, axis=1, ddof=1)


case("var_by_ml_and_jnp", var_by_ml_and_jnp, lambda s: ((rng_of(s).standard_normal((8, 128)).astype(f32) + 1e4,), {}),
     lambda x: (np.var(x.astype(np.float64), 1), np.var(x.astype(np.float64), 1, ddof=1)), 2e-3)


# ---------------------------------------------------------------- exact integer sums in float32; 16-bit accumulation
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((), F32)), grid=(1,))
def exact_integer_sums_f32(x, rows, total):
  """Counts and small integers summed in float32: exact in any order while every partial sum stays below 2**24."""
  v = x[...]
  rows[...] = ml.sum(v, axis=1)
  total[...] = ml.sum(v)


case("exact_integer_sums_f32", exact_integer_sums_f32,
     lambda s: ((rng_of(s).integers(-2000, 2000, (16, 256)).astype(f32),), {}),
     lambda x: (x.astype(np.int64).sum(1).astype(f32), f32(x.astype(np.int64).sum())), 0)


@mg.mgpu_kernel(out_shape=lambda m: (S((m.shape[0],), F32), S((), I32)), grid=(1,))
def mask_counts_in_f32(m, per_row, total):
  """A mask's counts as float32 (a token count for a mean) and as int32: both exact."""
  k = m[...] != 0
  per_row[...] = ml.sum(k.astype(F32), axis=1)
  total[...] = ml.sum(k.astype(I32))


case("mask_counts_in_f32", mask_counts_in_f32, lambda s: ((rng_of(s).integers(0, 2, (32, 512)).astype(np.int8),), {}),
     lambda m: ((m != 0).sum(1).astype(f32), np.int32((m != 0).sum())), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F16), S((x.shape[0],), F16), S((x.shape[0],), F32)), grid=(1,))
def f16_rows_accumulated_in_f32(x, s_auto, s_cast, s_wide):
  """Three ways users write a float16 row sum: ml.sum of the float16 tile (float32 inside, rounded once, as jnp.sum),
  an explicit float32 accumulation rounded once, and the float32 sum kept."""
  v = x[...]
  s_auto[...] = ml.sum(v, axis=1)
  w = ml.sum(v.astype(F32), axis=1)
  s_cast[...] = w.astype(F16)
  s_wide[...] = w


def _f16_ref(x):
  w = x.astype(np.float64).sum(1)
  return w.astype(np.float16), w.astype(np.float16), w


case("f16_rows_accumulated_in_f32", f16_rows_accumulated_in_f32,
     lambda s: ((rng_of(s).standard_normal((16, 1024)).astype(np.float16) + np.float16(4),), {}), _f16_ref, 2e-3)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), BF16), grid=(1,))
def bf16_loop_accumulated_in_f32(x, out):
  """A bfloat16 column sum over a run-time loop, the accumulator float32 and rounded once at the end (rounding each
  step to bfloat16 loses the small terms: 256 + 1 is 256 in bfloat16)."""
  acc = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    acc += x.at[i][...].astype(F32)
  out[...] = acc.astype(BF16)


def _bf16_loop_ref(x):
  acc = np.zeros(x.shape[1], f32)
  for v in x.astype(f32):
    acc = f32(acc + v)
  return jnp.asarray(acc).astype(BF16)


case("bf16_loop_accumulated_in_f32", bf16_loop_accumulated_in_f32,
     lambda s: ((jnp.asarray(rng_of(s).random((512, 128)).astype(f32) + 1).astype(BF16),), {}), _bf16_loop_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), BF16), S((x.shape[0],), F32)), grid=(1,))
def bf16_mean_dtype_f32(x, m16, m32):
  """jnp.mean of bfloat16 rows with dtype=float32 (accumulated wide), and without (jnp's float32 inside, bfloat16 out)."""
  v = x[...]
  m16[...] = jnp.mean(v, axis=1)
  m32[...] = jnp.mean(v, axis=1, dtype=F32)


case("bf16_mean_dtype_f32", bf16_mean_dtype_f32,
     lambda s: ((jnp.asarray(rng_of(s).standard_normal((8, 512)).astype(f32) + 3).astype(BF16),), {}),
     lambda x: (jnp.mean(x, axis=1), jnp.mean(x, axis=1, dtype=F32)), 1e-2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=(1,))
def nrm2_scaled(x, out):
  """LAPACK's overflow-safe 2-norm: scale by the row's largest magnitude before squaring (values near 1e30, whose
  squares overflow float32)."""
  v = x[...]
  a = ml.max(ml.abs(v), axis=1)
  scale = ml.where(a > 0, a, 1.0)
  w = v / scale[:, None]
  out[...] = scale * ml.sqrt(ml.sum(w * w, axis=1))


case("nrm2_scaled", nrm2_scaled,
     lambda s: ((rng_of(s).standard_normal((8, 128)).astype(f32) * np.array([1e30, 1e-30, 1, 0, 1e20, 1e37, 1e-38, 5],
                                                                            f32)[:, None],), {}),
     lambda x: np.sqrt(np.sum(x.astype(np.float64) ** 2, 1)), 2e-6)
