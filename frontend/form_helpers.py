"""Helpers in the kernel language that jnp_math's forms call where a form needs a value twice (a combine function of
ml.associative_scan, a sorted tile indexed twice), traced at each call as a user's @ml.inline helper is."""
from . import language as ml


@ml.inline
def logaddexp(p, q):
  """lax's logaddexp: the larger plus log1p(exp(-|p - q|)); p + q where the difference is NaN (equal infinities)."""
  return ml.where(ml.isnan(p - q), p + q, ml.maximum(p, q) + ml.log1p(ml.exp(-ml.abs(p - q))))


@ml.inline
def median(v, axis, lo, hi, n, keepdims):
  """jnp.median along a static axis of a 1-D or 2-D tile: jnp.quantile's midpoint of the sorted elements lo and hi
  ((n - 1) // 2 and n // 2), (s[lo] + s[hi]) * 0.5 in the tile's dtype; NaN where the row holds a NaN (sorted to
  one end or the other, by its sign: the ends are tested, not the row, which a padded tile reduces otherwise)."""
  if len(v.shape) == 1:
    s = ml.sort(v)
    m = ml.where(ml.isnan(s[0]) | ml.isnan(s[n - 1]), float("nan"), (s[lo] + s[hi]) * 0.5)
    if keepdims:
      m = ml.full((1,), m, v.dtype)
    return m
  w = v if axis == 1 else v.T          # (ml.sort sorts along the last axis)
  s = ml.sort(w, axis=1)
  m = ml.where(ml.isnan(s[:, 0]) | ml.isnan(s[:, n - 1]), float("nan"), (s[:, lo] + s[:, hi]) * 0.5)
  if keepdims:
    m = m[:, None] if axis == 1 else m[None, :]
  return m


@ml.inline
def median_of_slices(v, n, lo, hi, keepdims):
  """jnp.median along the leading axis of n (at most MEDIAN_SLICES) slices of a 3-D or wider tensor (a median filter's
  stacked shifts, HPSS's): the slices sorted elementwise by an odd-even transposition network of ml.minimum and
  ml.maximum (n rounds: a NaN, which both take, reaches every slot, so the median is NaN where jnp's is), then the
  midpoint of slices lo and hi."""
  s = [v[i] for i in ml.static_range(n)]
  for r in ml.static_range(n):
    for j in ml.static_range(r % 2, n - 1, 2):
      s = s[:j] + [ml.minimum(s[j], s[j + 1]), ml.maximum(s[j], s[j + 1])] + s[j + 2:]
  m = (s[lo] + s[hi]) * 0.5
  return m[None] if keepdims else m


MEDIAN_SLICES = 16


@ml.inline
def population_count(x, u):
  """lax.population_count of x, whose bits are `u` (uint32, zero-extended): the SWAR count, in x's dtype."""
  v = u - ((u >> 1) & 0x55555555)
  v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
  return ((((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24).astype(x.dtype)


@ml.inline
def clz(x, u, bits):
  """lax.clz of x (`bits` wide), whose bits are `u`: every bit below the highest set one smeared, then counted."""
  u = u | (u >> 1)
  u = u | (u >> 2)
  u = u | (u >> 4)
  u = u | (u >> 8)
  u = u | (u >> 16)
  v = u - ((u >> 1) & 0x55555555)
  v = (v & 0x33333333) + ((v >> 2) & 0x33333333)
  return (bits - ((((v + (v >> 4)) & 0x0F0F0F0F) * 0x01010101) >> 24)).astype(x.dtype)


@ml.inline
def erf_inv(x):
  """XLA's ErfInv of float32 x (chlo.erf_inv: Giles' single-precision polynomials in w = -log1p(-x * x), one below
  w = 5 in w - 2.5, one above in sqrt(w) - 3), +-inf at +-1."""
  w = -ml.log1p(-x * x)
  lt = w < 5.0
  w = ml.where(lt, w - 2.5, ml.sqrt(w) - 3.0)
  p = ml.where(lt, 2.81022636e-08, -0.000200214257)
  p = ml.where(lt, 3.43273939e-07, 0.000100950558) + p * w
  p = ml.where(lt, -3.5233877e-06, 0.00134934322) + p * w
  p = ml.where(lt, -4.39150654e-06, -0.00367342844) + p * w
  p = ml.where(lt, 0.00021858087, 0.00573950773) + p * w
  p = ml.where(lt, -0.00125372503, -0.0076224613) + p * w
  p = ml.where(lt, -0.00417768164, 0.00943887047) + p * w
  p = ml.where(lt, 0.246640727, 1.00167406) + p * w
  p = ml.where(lt, 1.50140941, 2.83297682) + p * w
  return ml.where(ml.abs(x) == 1, x * float("inf"), p * x)


@ml.inline
def chunked_dot(a, b, c, acc_dtype):
  """a @ b of (m, k) and (k, n) register tiles, in acc_dtype: broadcast products of c columns of a by c rows of b at a
  time, summed into the (m, n) accumulator (jnp_einsum.chunked_product: products ml.dot does not take)."""
  acc = ml.zeros((a.shape[0], b.shape[1]), acc_dtype)
  for k0 in ml.static_range(0, a.shape[1], c):
    acc = acc + ml.sum(a[:, k0:k0 + c][:, :, None] * b[k0:k0 + c, :][None, :, :], axis=1)
  return acc


@ml.inline
def outer_dot(a, b, acc_dtype):
  """a @ b of (m, k) and (k, n) register tiles, in acc_dtype, as k rank-1 updates of the (m, n) accumulator (a
  column of a times a row of b): chunked_dot's form where no chunk of k fits beside an accumulator this large."""
  acc = ml.zeros((a.shape[0], b.shape[1]), acc_dtype)
  for k0 in ml.static_range(a.shape[1]):
    acc = acc + a[:, k0:k0 + 1] * b[k0:k0 + 1, :]
  return acc


@ml.inline
def staged_dot(a, b, k, rows, acc_dtype):
  """a @ b of (m, k) and (k, n) register tiles of a 32-bit integer acc_dtype, the tensor cores' form where they take
  none: both staged in SMEM, then for each piece of `rows` of a's rows a *run-time* loop over k adds the broadcast
  product of a's column and b's row, each read from SMEM at the trip's offset, to the (rows, n) accumulator it
  carries; the pieces joined (probe 58a: outer_dot's k unrolled rank-1 updates of a (64, 32) x (32, 512) product were
  565k lines of MLIR, past what ptxas compiles in minutes). `k` is a's own columns (a padded tile's are more)."""
  sa = ml.smem(a.shape, acc_dtype)
  sb = ml.smem(b.shape, acc_dtype)
  sa[...] = a
  sb[...] = b
  parts = []
  for r0 in ml.static_range(0, a.shape[0], rows):
    acc = ml.zeros((rows, b.shape[1]), acc_dtype)
    for j in ml.range(k):
      acc = acc + sa[r0:r0 + rows, j][:, None] * sb[j, :][None, :]
    parts.append(acc)
  return parts[0] if len(parts) == 1 else ml.concatenate(parts, axis=0)


@ml.inline
def segment_rows(data, pos, n, ident, reduce):
  """The (n, d) segment reduction of 2-D `data`'s rows at each segment `pos` names (-1: dropped), one segment a trip
  of a *run-time* loop: the select of the segment's rows (the identity `ident` elsewhere) reduced over the whole
  tile, as ops/segments._table's unrolled rows, its (1, d) row stored into an SMEM scratch at the trip's row and the
  n rows read back after the loop (probe 58a: 100 segments of a (256, 64) tile unrolled were 148k lines of MLIR).
  `reduce`: ml.sum, ml.max or ml.min; None for the product (the last row of the running product, jnp.prod's form)."""
  rows = ml.smem((n, data.shape[1]))
  for s in ml.range(n):
    picked = ml.where(pos[:, None] == s, data, ident)
    if reduce is None:
      rows[ml.ds(s, 1), :] = ml.cumprod(picked, axis=0)[-1:, :]
    else:
      rows[ml.ds(s, 1), :] = reduce(picked, axis=0, keepdims=True)
  return rows[...]


@ml.inline
def gcd(a, b, steps):
  """jnp.gcd of integers: jax's Euclid loop (|a|, |b| ordered larger first, then (b, a % b) until b is 0) as a fixed
  number of steps, `steps`, that bounds Euclid's for the dtype (Lame: about 1.44 per bit, the Fibonacci pairs), each
  a vector step of every element (an element whose b is 0 stays)."""
  x = ml.abs(a)
  y = ml.abs(b)
  x, y = ml.where(x < y, y, x), ml.where(x < y, x, y)
  for _ in ml.static_range(steps):
    live = y != 0
    x, y = ml.where(live, y, x), ml.where(live, x % ml.where(live, y, 1), 0)
  return x


@ml.inline
def lcm(a, b, steps):
  """jnp.lcm: |a| * (|b| // gcd), 0 where the gcd is 0 (both 0)."""
  d = gcd(a, b, steps)
  return ml.where(d == 0, 0, ml.abs(a) * (ml.abs(b) // ml.where(d == 0, 1, d)))


@ml.inline
def interpolated(a, b, lw, hw, mode):
  """The quantile between the sorted elements a (lower) and b (higher) by jnp's `method`, quantile's and
  nanquantile's `mode`: 0 linear, a * lw + b * hw; 1 lower; 2 higher; 3 midpoint; 4 nearest (the lower where its
  weight hw is at most 0.5)."""
  if mode == 0:
    m = a * lw + b * hw
  elif mode == 1:
    m = a
  elif mode == 2:
    m = b
  elif mode == 3:
    m = (a + b) * 0.5
  else:
    m = ml.where(hw <= 0.5, a, b)
  return m


@ml.inline
def kept_axis(m, v, axis, keepdims):
  """A statistic `m` of a 1-D or 2-D tile `v` along `axis`, its axis kept (length 1) where `keepdims` (jnp's
  keepdims=True of quantile and nanquantile)."""
  if keepdims:
    if len(v.shape) == 1:
      m = ml.full((1,), m, m.dtype)
    else:
      m = m[:, None] if axis == 1 else m[None, :]
  return m


@ml.inline
def quantile(v, axis, lo, hi, lw, hw, n, mode, keepdims):
  """jnp.quantile along a static axis of a 1-D or 2-D tile at the sorted elements lo and hi (`mode` 0, jnp's linear:
  s[lo] * lw + s[hi] * hw, every term computed as jnp's, an infinite end times a weight of 0 NaN; 1: s[lo]; 2:
  s[hi]; 3, the midpoint: (s[lo] + s[hi]) * 0.5); NaN where the row holds a NaN (tested at the sorted ends, as
  median's)."""
  if len(v.shape) == 1:
    s = ml.sort(v)
    a, b = s[lo], s[hi]
    bad = ml.isnan(s[0]) | ml.isnan(s[n - 1])
  else:
    w = v if axis == 1 else v.T          # (ml.sort sorts along the last axis)
    s = ml.sort(w, axis=1)
    a, b = s[:, lo], s[:, hi]
    bad = ml.isnan(s[:, 0]) | ml.isnan(s[:, n - 1])
  m = ml.where(bad, float("nan"), interpolated(a, b, lw, hw, mode))
  return kept_axis(m, v, axis, keepdims)


@ml.inline
def bit_and(a, b):
  """The combine of a bitwise-and reduction (lax.reduce_and of integers, jnp.bitwise_and.reduce)."""
  return a & b


@ml.inline
def bit_or(a, b):
  """The combine of a bitwise-or reduction (lax.reduce_or of integers, jnp.bitwise_or.reduce)."""
  return a | b


@ml.inline
def bit_xor(a, b):
  """The combine of a bitwise-xor reduction (Triton's tl.xor_sum, lax.reduce_xor, jnp.bitwise_xor.reduce)."""
  return a ^ b


@ml.inline
def nanquantile(v, axis, q, n, mode, keepdims):
  """jnp.nanquantile along a static axis of a 1-D or 2-D float32 tile: jax's squash_nans path, each row's elements
  that are not NaN sorted first (NaN made positive, so it sorts last), their count c, the position q * (c - 1) in
  float32 and its floor and ceiling clamped to [0, c - 1] picked by a one-element max (exact: NaN where every
  element is NaN); `mode` as quantile's (1: lower, 2: higher, 3: midpoint, 4: nearest, by the row's own weight)."""
  w = v if len(v.shape) == 1 or axis == 1 else v.T
  w = ml.where(ml.isnan(w), float("nan"), w)
  if len(v.shape) == 1:
    s = ml.sort(w)
    c = ml.sum(s == s).astype(ml.float32)
    k = ml.arange(n)
  else:
    s = ml.sort(w, axis=1)
    c = ml.sum(s == s, axis=1).astype(ml.float32)
    k = ml.arange(n)[None, :]
  pos = q * (c - 1.0)
  lo = ml.floor(pos)
  hi = ml.ceil(pos)
  hw = pos - lo
  lw = 1.0 - hw
  lo = ml.maximum(0.0, ml.minimum(lo, c - 1.0)).astype(ml.int32)
  hi = ml.maximum(0.0, ml.minimum(hi, c - 1.0)).astype(ml.int32)
  if len(v.shape) == 1:
    a = ml.max(s, where=k == lo)
    b = ml.max(s, where=k == hi)
  else:
    a = ml.max(s, axis=1, where=k == lo[:, None])
    b = ml.max(s, axis=1, where=k == hi[:, None])
  return kept_axis(interpolated(a, b, lw, hw, mode), v, axis, keepdims)


@ml.inline
def min_k(x, k):
  """jax.lax.approx_min_k of float x, exactly: the k smallest along the last axis, by ml.top_k of -x (negation is
  exact), ties by position."""
  v, i = ml.top_k(-x, k)
  return -v, i


@ml.inline
def partition(x, kth, axis):
  """jnp.partition of float x along a static axis of a 1-D or 2-D tile, jax's formula: the kth + 1 smallest,
  -ml.top_k(-x) (ascending), then the rest, ml.top_k(x) (descending), each in XLA's total order as jax's top_k
  (-0.0 below +0.0, a NaN by its sign bit), ties by position; the descending one rolled by kth + 1 into place."""
  w = x if axis == len(x.shape) - 1 else x.T
  n = w.shape[-1]
  low = -ml.top_k(-w, n)[0]
  high = ml.roll(ml.top_k(w, n)[0], kth + 1, axis=len(w.shape) - 1)
  out = ml.where(ml.arange(n) <= kth, low, high) if len(w.shape) == 1 else \
      ml.where(ml.arange(n)[None, :] <= kth, low, high)
  return out if axis == len(x.shape) - 1 else out.T


@ml.inline
def argpartition(x, kth, axis):
  """jnp.argpartition of float x (as partition above): the positions of the kth + 1 smallest, ml.top_k(-x)'s, then
  the others in their own order (jax's top_k of a proxy, a stable argsort of whether each rank is past kth)."""
  w = x if axis == len(x.shape) - 1 else x.T
  n = w.shape[-1]
  order = ml.top_k(-w, n)[1]
  rest = ml.argsort((ml.argsort(order) > kth).astype(ml.int32))
  out = ml.where(ml.arange(n) <= kth, order, rest) if len(w.shape) == 1 else \
      ml.where(ml.arange(n)[None, :] <= kth, order, rest)
  return out if axis == len(x.shape) - 1 else out.T


@ml.inline
def window_taps(p, init, taps, kind):
  """lax.reduce_window's combine of the taps of the padded tile p (window_forms.py): `init` first, then each tap, the
  static slices `taps` of p in the window's row-major order, combined by `kind` ('max', 'min', 'add', 'mul')."""
  acc = init
  for tap in taps:
    if kind == "max":
      acc = ml.maximum(acc, p[tap])
    elif kind == "min":
      acc = ml.minimum(acc, p[tap])
    elif kind == "add":
      acc = acc + p[tap]
    else:
      acc = acc * p[tap]
  return acc


@ml.inline
def upsample2_linear(v, axis):
  """jax.image.resize's 'linear' of v scaled up by 2 along the static `axis` (window_forms.resize): output 2k is
  0.75 * v[k] + 0.25 * v[k - 1], 2k + 1 is 0.75 * v[k] + 0.25 * v[k + 1], the edge element alone at the ends (jax's
  triangle weights, normalised over the elements inside); the two interleaved by a stack and a reshape. Any axis of
  any rank (probe 56g: the neighbours and the edge masks were those of axis 0 or 1 of a 2-D tile, so the rows of an
  (H, W, C) image were blended along W, silently)."""
  n = v.shape[axis]
  pre = (slice(None),) * axis
  prev = ml.concatenate([v[pre + (slice(0, 1),)], v[pre + (slice(0, n - 1),)]], axis=axis)
  nxt = ml.concatenate([v[pre + (slice(1, n),)], v[pre + (slice(n - 1, n),)]], axis=axis)
  k = ml.arange(n)[(slice(None),) + (None,) * (len(v.shape) - 1 - axis)]      # (the axis's index, aligned with it)
  even = ml.where(k == 0, v, v * 0.75 + prev * 0.25)
  odd = ml.where(k == n - 1, v, v * 0.75 + nxt * 0.25)
  shape = list(v.shape)
  shape[axis] = 2 * n
  return ml.stack([even, odd], axis=axis + 1).reshape(tuple(shape))


@ml.inline
def conv_taps(p, w, taps, shape):
  """conv_general_dilated of one input channel per output channel (window_forms.conv): the sum over `taps`, each
  (a static slice of the padded lhs p, the index of its weights in w: a vector over the channels), of the slice times
  the weights reshaped to `shape` (the channels at the lhs's feature dim, 1 elsewhere)."""
  acc = None
  for sl, idx in taps:
    term = p[sl] * w[idx].reshape(shape)
    acc = term if acc is None else acc + term
  return acc


@ml.inline
def conv_dots(p, w, taps, meta, precision):
  """conv_general_dilated mixing channels (window_forms._dense): the sum over `taps`, each (a static slice of the
  padded lhs p, channels last, the index of its (O, I) or (I, O) weights in w), of the slice's pixels by its
  channels times the weights, ml.dot's product in float32 (16-bit operands through the tensor cores as they are);
  `meta`: (pixels, weights (O, I), the result's shape). Fewer than 16 output channels (a mask head's 1, probe 67a;
  it was ml.dot's MG501) are computed as 16, the weights padded with zeros, and their columns taken."""
  pix, oi, shape = meta
  acc = None
  for sl, idx in taps:
    k = w[idx]
    x = p[sl]
    k = k.T if oi else k
    if shape[-1] < 16:      # (fewer output channels than a product's 16 columns: padded with zero weights)
      k = ml.pad(k, ((0, 0), (0, 16 - shape[-1])))
    x = x.reshape(pix, x.shape[-1])
    if x.dtype == ml.float32 and x.shape[-1] % 8:     # (float32's k: whole 32 bytes; zero channels on both sides)
      x = ml.pad(x, ((0, 0), (0, 8 - x.shape[-1] % 8)))
      k = ml.pad(k, ((0, 8 - k.shape[0] % 8), (0, 0)))
    term = ml.dot(x, k, precision=precision)
    acc = term if acc is None else acc + term
  if shape[-1] < 16:        # (its first columns, each a sum of the selected column: no window of a product's tiles)
    cols = ml.arange(16)[None, :]
    acc = ml.stack([ml.sum(ml.where(cols == c, acc, 0.0), axis=1) for c in range(shape[-1])], axis=-1)
  return acc.reshape(shape)


@ml.inline
def solve_triangular(a, b, lower, unit):
  """X with a @ X = b for an (n, n) triangular `a` (`lower`, else upper; `unit`: its diagonal read as ones) and an
  (n, m) `b`, in float32: substitution a row of X a trip, forward for a lower `a` (from the last row for an upper
  one), each row b's less the rows of X found so far weighted by a's row (jax.scipy.linalg.solve_triangular)."""
  n = a.shape[0]
  rows = ml.arange(n)
  x = ml.zeros(b.shape, ml.float32)
  for k in range(n):
    i = k if lower else n - 1 - k
    pick = rows[:, None] == i
    a_i = ml.sum(ml.where(pick, a, 0.0), axis=0)           # row i of a, one value per column
    b_i = ml.sum(ml.where(pick, b, 0.0), axis=0)
    known = rows < i if lower else rows > i
    x_i = b_i - ml.sum(ml.where(known, a_i, 0.0)[:, None] * x, axis=0)
    if not unit:
      x_i = x_i / ml.sum(ml.where(rows == i, a_i, 0.0))
    x = ml.where(pick, x_i[None, :], x)
  return x


@ml.inline
def lu_solve(a, b, want_det):
  """X with a @ X = b for an (n, n) `a` and an (n, m) `b`, in float32, and a's determinant (probe 54d;
  jnp.linalg.solve, inv and det): Gauss-Jordan elimination with partial pivoting, a column a trip, the pivot the
  first row at or below the diagonal of the largest magnitude (jax's LU picks it so), its row swapped with the
  diagonal's in `a` and `b` and eliminated from every other row; then each row divided by its pivot. The
  determinant is the pivots' product, negated at each swap (1.0 where not `want_det`); where `want_det` is "log"
  (probe 56a: slogdet), its sign and the sum of the pivots' log |p|, as jax's."""
  n = a.shape[0]
  rows, cols = ml.arange(n), ml.arange(n)         # (one indexes the rows, one the columns: two layouts)
  d, logs = ml.full((n,), 1.0, ml.float32), ml.full((n,), 0.0, ml.float32)
  for k in range(n):
    col = ml.sum(ml.where(cols[None, :] == k, a, 0.0), axis=1)           # column k, one value per row
    p = ml.argmax(ml.where(rows >= k, ml.abs(col), -1.0), axis=0)
    at_k, at_p = rows[:, None] == k, rows[:, None] == p
    a_k, a_p = ml.sum(ml.where(at_k, a, 0.0), axis=0), ml.sum(ml.where(at_p, a, 0.0), axis=0)
    b_k, b_p = ml.sum(ml.where(at_k, b, 0.0), axis=0), ml.sum(ml.where(at_p, b, 0.0), axis=0)
    a = ml.where(at_k, a_p[None, :], ml.where(at_p, a_k[None, :], a))
    b = ml.where(at_k, b_p[None, :], ml.where(at_p, b_k[None, :], b))
    pivot = ml.sum(ml.where(cols == k, a_p, 0.0))
    col = ml.sum(ml.where(cols[None, :] == k, a, 0.0), axis=1)
    f = ml.where(rows == k, 0.0, col / pivot)
    a = a - f[:, None] * a_p[None, :]
    b = b - f[:, None] * b_p[None, :]
    if want_det == "log":         # (jnp.linalg.slogdet: the sign in d, the logarithms of |pivot| summed apart)
      d = d * ml.where(p != k, -1.0, 1.0) * ml.where(pivot < 0, -1.0, ml.where(pivot > 0, 1.0, 0.0))
      logs = logs + ml.log(ml.abs(pivot))
    elif want_det:
      d = d * ml.where(p != k, -pivot, pivot)
  diag = ml.sum(ml.where(rows[:, None] == cols[None, :], a, 0.0), axis=1)
  if want_det == "log":
    return b / diag[:, None], (ml.max(d), ml.max(logs))
  return b / diag[:, None], ml.max(d)


@ml.inline
def cholesky(a):
  """L, lower triangular with a = L @ L.T, of an (n, n) float32 `a` (probe 56a; jnp.linalg.cholesky): a
  symmetrised as jax's ((a + a.T) / 2), then a column of L a trip, the column of a less the columns of L found so
  far weighted by L's row j, over the square root of its diagonal element (NaN where a is not positive definite,
  as jax's)."""
  n = a.shape[0]
  rows, cols = ml.arange(n), ml.arange(n)
  a = (a + a.T) * 0.5
  low = ml.zeros((n, n), ml.float32)
  for j in range(n):
    col = ml.sum(ml.where(cols[None, :] == j, a, 0.0), axis=1)
    row_j = ml.sum(ml.where(rows[:, None] == j, low, 0.0), axis=0)
    s = col - ml.sum(low * row_j[None, :], axis=1)
    d = ml.sqrt(ml.sum(ml.where(rows == j, s, 0.0)))
    low = ml.where(cols[None, :] == j, ml.where(rows > j, s / d, ml.where(rows == j, d, 0.0))[:, None], low)
  return low


@ml.inline
def scalars_of(a, fn):
  """The vector of fn(a[i]) (a scalar each) over a's leading axis, put together by selects (probe 56a: jnp.linalg.det
  of a (B, n, n) stack)."""
  n = a.shape[0]
  v = ml.zeros((n,), ml.float32)
  for i in range(n):
    v = ml.where(ml.arange(n) == i, fn(a[i]).astype(ml.float32), v)
  return v


@ml.inline
def lu_solve_vector(a, b):
  """x with a @ x = b for an (n, n) `a` (n a multiple of 16) and an (n,) `b`, in float32 (probe 56a): lu_solve of b
  as the first column of an (n, 16) tile, that column read back."""
  n = a.shape[0]
  rows, cols = ml.arange(n), ml.arange(16)
  first = (cols[None, :] == 0) & (rows[:, None] >= 0)
  x = lu_solve(a, ml.where(first, b.astype(ml.float32)[:, None], 0.0), False)[0]
  return ml.sum(ml.where(first, x, 0.0), axis=1)


@ml.inline
def small_solve(a, b, inverse):
  """X with a @ X = b for a 2x2 or 3x3 `a` (probe 55b: jnp.linalg.inv and solve of a matrix too small for
  lu_solve's row and column vectors): the adjugate of a's scalar elements over its determinant (cofactor
  expansion along the first row), in float32; X the inverse itself where `inverse` (b unused), else the sum over
  j of inv[i, j] * b[j] for each row i of a 1-D (n,) or 2-D (n, m) `b` (of any float dtype), put together by selects on the rows."""
  n = a.shape[0]
  e = []
  for i in range(n):
    row = []
    for j in range(n):
      row.append(a[i, j])
    e.append(row)
  cof = []                  # cof[i][j]: the cofactor of element (i, j) (a 3x3's cyclic minors carry their signs)
  for i in range(n):
    row = []
    for j in range(n):
      if n == 2:
        row.append(e[1 - i][1 - j] * (1.0 if i == j else -1.0))
      else:
        i1, i2, j1, j2 = (i + 1) % 3, (i + 2) % 3, (j + 1) % 3, (j + 2) % 3
        row.append(e[i1][j1] * e[i2][j2] - e[i1][j2] * e[i2][j1])
    cof.append(row)
  d = e[0][0] * cof[0][0]
  for j in range(1, n):
    d = d + e[0][j] * cof[0][j]
  if inverse:
    r, c = ml.arange(n)[:, None], ml.arange(n)[None, :]
    x = ml.where((r == n - 1) & (c == n - 2), cof[n - 2][n - 1] / d, cof[n - 1][n - 1] / d)
    for i in range(n):
      for j in range(n):
        if i < n - 1 or j < n - 2:
          x = ml.where((r == i) & (c == j), cof[j][i] / d, x)      # (the inverse is the cofactors' transpose)
    return x
  rows = []
  for i in range(n):
    s = cof[0][i] / d * b[0].astype(ml.float32)       # (b's rows read as they are, then cast: a cast tile's
    for j in range(1, n):                              # rows would be a reduction each)
      s = s + cof[j][i] / d * b[j].astype(ml.float32)
    rows.append(s)
  if len(b.shape) == 1:
    r = ml.arange(n)
    x = rows[n - 1]
    for i in range(n - 1):
      x = ml.where(r == i, rows[i], x)
    return x
  r = ml.arange(n)[:, None]
  x = ml.where(r == n - 2, rows[n - 2][None, :], rows[n - 1][None, :])
  for i in range(n - 2):
    x = ml.where(r == i, rows[i][None, :], x)
  return x
