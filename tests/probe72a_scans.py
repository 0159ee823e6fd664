"""Probe 72a's corpus, its fourth part: linear recurrences and scans as Mamba, S5, LRU and cuDF/CUB users write
them: h_t = a_t h_{t-1} + b_t sequentially (a run-time loop over rows of a tile, and over GMEM rows), as a scan of
(a, b) pairs (ml.associative_scan, jax.lax.associative_scan's combine), blocked with a carry between blocks (one
program a sequence walking its chunks; chunk products by cumprod), cumulative products and log-cumsum-exp
(jnp.logaddexp.accumulate, lax.cumlogsumexp), scans reset at segment starts (flags in the combine), prefix sums
used as output offsets (stream compaction, ragged concatenation), and a decayed cumulative sum."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72a_common import F32, I32, S, normal, registry, rng_of

CASES, case = registry()


def linrec_np(a, b, h0=None):
  """h_t = a_t h_{t-1} + b_t along axis 1 of (B, T, D) (or axis 0 of (T, D))."""
  axis = 1 if a.ndim == 3 else 0
  a64, b64 = np.moveaxis(a, axis, 0).astype(np.float64), np.moveaxis(b, axis, 0).astype(np.float64)
  h = np.zeros(a64.shape[1:]) if h0 is None else h0.astype(np.float64)
  out = np.zeros(a64.shape)
  for t in range(a64.shape[0]):
    h = a64[t] * h + b64[t]
    out[t] = h
  return np.moveaxis(out, 0, axis).astype(np.float32)


def _ab(sd, shape):
  a = (0.5 + 0.5 / (1 + np.exp(-normal(sd, shape)))).astype(np.float32)
  return a, normal(sd + 1, shape)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0], a.shape[2] // 64))
def linrec_sequential_gmem(a, b, out):
  """The plain CUDA form: each program a (sequence, 64 channels) column walking time, h a (64,) register vector."""
  bi, c = ml.program_id(0), ml.program_id(1)
  cols = ml.ds(c * 64, 64)
  h = ml.zeros((64,), jnp.float32)
  for t in range(a.shape[1]):
    h = a[bi, t, cols] * h + b[bi, t, cols]
    out[bi, t, cols] = h


case("linrec_sequential_gmem_rows", linrec_sequential_gmem, lambda sd: (_ab(sd, (4, 64, 128)), {}), linrec_np)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0],))
def linrec_associative_scan(a, b, out):
  """The parallel form (S5's and LRU's jax.lax.associative_scan): pairs combined by (a1 a2, a2 b1 + b2) along time
  of a (T, D) tile."""
  bi = ml.program_id(0)

  def combine(x, y):
    return x[0] * y[0], y[0] * x[1] + y[1]
  _, h = ml.associative_scan(combine, (a[bi], b[bi]), axis=0)
  out[bi] = h


case("linrec_associative_scan_pairs", linrec_associative_scan, lambda sd: (_ab(sd, (4, 64, 64)), {}), linrec_np)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0],))
def linrec_lax_associative_scan(a, b, out):
  """The same through jax.lax.associative_scan (the JAX author's spelling), with a Triton-style spread combine."""
  bi = ml.program_id(0)

  def combine(a1, b1, a2, b2):
    return a1 * a2, a2 * b1 + b2
  _, h = ml.associative_scan((a[bi], b[bi]), 0, combine)
  out[bi] = h


case("linrec_triton_spread_combine", linrec_lax_associative_scan, lambda sd: (_ab(sd, (4, 32, 64)), {}), linrec_np)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0],))
def linrec_blocked_carry(a, b, out, *, chunk: ml.constexpr = 16):
  """Blocked scan with a carry between blocks (Mamba's chunked form, one program a sequence): within a chunk the
  cumulative product of a by ml.cumprod and h = A_cum (h_prev + cumsum(b / A_cum)), the chunk's last row the carry."""
  bi = ml.program_id(0)
  D = a.shape[2]
  h = ml.zeros((D,), jnp.float32)
  for c in range(a.shape[1] // chunk):
    rows = ml.ds(c * chunk, chunk)
    ac = ml.cumprod(a[bi, rows, :], axis=0)
    hc = ac * (h[None, :] + ml.cumsum(b[bi, rows, :] / ac, axis=0))
    out[bi, rows, :] = hc
    h = hc[chunk - 1, :]


case("linrec_blocked_carry_cumprod", linrec_blocked_carry, lambda sd: (_ab(sd, (4, 64, 64)), {}), linrec_np, 1e-4)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0],))
def linrec_blocked_scan_carry(a, b, out, *, chunk: ml.constexpr = 16):
  """Blocked, each chunk scanned by associative_scan of pairs and the carry folded in after: h = A_cum * h_prev + H."""
  bi = ml.program_id(0)
  D = a.shape[2]
  h = ml.zeros((1, D), jnp.float32)
  for c in range(a.shape[1] // chunk):
    rows = ml.ds(c * chunk, chunk)
    A, H = ml.associative_scan(lambda x, y: (x[0] * y[0], y[0] * x[1] + y[1]), (a[bi, rows, :], b[bi, rows, :]))
    hc = A * h + H
    out[bi, rows, :] = hc
    h = hc[chunk - 1:, :]


case("linrec_blocked_scan_then_carry", linrec_blocked_scan_carry, lambda sd: (_ab(sd, (4, 64, 64)), {}), linrec_np,
     1e-4)


def _linrec_1d(sd, n=4096):
  a, b = _ab(sd, (n,))
  return (a, b), {}


@mg.mgpu_kernel(out_shape=lambda a, b: (a, S((a.shape[0] // 256,), F32), S((a.shape[0] // 256,), F32)),
                grid=lambda a, b: (a.shape[0] // 256,))
def linrec_block_summaries(a, b, h_local, a_tot, b_tot):
  """The first pass of a decoupled three-pass scan (CUB's reduce-then-scan): each block scans its 256 elements
  from zero and writes its (prod a, local h) summary."""
  p = ml.program_id(0)
  r = ml.ds(p * 256, 256)
  A, H = ml.associative_scan(lambda x, y: (x[0] * y[0], y[0] * x[1] + y[1]), (a[r], b[r]))
  h_local[r] = H
  a_tot[p] = ml.reduce(a[r], 0, lambda x, y: x * y)
  b_tot[p] = H[255]


@mg.mgpu_kernel(out_shape=lambda h, at, bt, a: h, grid=lambda h, at, bt, a: (h.shape[0] // 256,))
def linrec_block_fixup(h_local, a_tot, b_tot, a, out):
  """The third pass: each block's carry-in by a sequential scalar loop over the earlier summaries, then h = cumprod(a)
  * carry + h_local."""
  p = ml.program_id(0)
  r = ml.ds(p * 256, 256)
  carry = 0.0
  for q in range(p):
    carry = a_tot[q] * carry + b_tot[q]
  out[r] = ml.cumprod(a[r]) * carry + h_local[r]


def linrec_three_pass(a, b, **_):
  h, at, bt = linrec_block_summaries(a, b, **_)
  return linrec_block_fixup(h, at, bt, a, **_)


class _Pipeline:
  """Two launches behind one call (the corpus form takes `interpret=`; export goes launch by launch)."""

  def __call__(self, a, b, interpret=None):
    h, at, bt = linrec_block_summaries(a, b, interpret=interpret)
    return linrec_block_fixup(h, at, bt, a, interpret=interpret)


case("linrec_three_pass_block_summaries", _Pipeline(), _linrec_1d, linrec_np, 2e-4)


def lcse_np(x, axis=-1):
  return np.logaddexp.accumulate(x.astype(np.float64), axis=axis).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 16,))
def logcumsumexp_ufunc(x, out):
  """torch.logcumsumexp as a JAX author writes it: jnp.logaddexp.accumulate along the rows of (16, 128) tiles."""
  r = ml.ds(ml.program_id(0) * 16, 16)
  out[r, :] = jnp.logaddexp.accumulate(x[r, :], axis=1)


case("logcumsumexp_logaddexp_accumulate", logcumsumexp_ufunc, lambda sd: ((normal(sd, (64, 128), 3.0),), {}),
     lcse_np, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def logcumsumexp_blocked(x, out, *, block: ml.constexpr = 128):
  """A long row in blocks: each block's lax.cumlogsumexp, the running total carried as a scalar and combined by
  logaddexp (the stable online form, no global max)."""
  r = ml.program_id(0)
  run = -jnp.inf
  for c in range(x.shape[1] // block):
    cols = ml.ds(c * block, block)
    local = jax.lax.cumlogsumexp(x[r, cols], axis=0)
    out[r, cols] = jnp.logaddexp(run, local)
    run = jnp.logaddexp(run, local[block - 1])


case("logcumsumexp_blocked_scalar_carry", logcumsumexp_blocked, lambda sd: ((normal(sd, (4, 512), 3.0),), {}),
     lcse_np, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 16,))
def cumprod_reverse_discount(x, out):
  """A reverse cumulative product (survival probabilities from the end: jnp.cumprod of the flipped row, flipped
  back), and torch.cumprod's row-wise form."""
  r = ml.ds(ml.program_id(0) * 16, 16)
  out[r, :] = jnp.flip(jnp.cumprod(jnp.flip(x[r, :], axis=1), axis=1), axis=1)


case("cumprod_reverse_by_flips", cumprod_reverse_discount,
     lambda sd: ((np.exp(normal(sd, (32, 64), 0.05)).astype(np.float32),), {}),
     lambda x: np.flip(np.cumprod(np.flip(x.astype(np.float64), 1), 1), 1).astype(np.float32), 1e-5)


def discounted_np(r, gamma=0.9):
  out = np.zeros(r.shape, np.float64)
  g = np.zeros(r.shape[0])
  for t in range(r.shape[1] - 1, -1, -1):
    g = r[:, t] + gamma * g
    out[:, t] = g
  return out.astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda r: r, grid=lambda r: (r.shape[0] // 16,))
def discounted_returns(r, out, *, gamma: ml.constexpr = 0.9):
  """RL's discounted returns G_t = r_t + gamma G_{t+1}: a reverse linear recurrence of constant a as a reverse
  associative scan (reverse=True), a tile of 16 episodes."""
  rows = ml.ds(ml.program_id(0) * 16, 16)
  x = r[rows, :]
  a = ml.full(x.shape, gamma, jnp.float32)
  _, g = ml.associative_scan(lambda p, q: (p[0] * q[0], p[1] * q[0] + q[1]), (a, x), axis=1, reverse=True)
  out[rows, :] = g


case("discounted_returns_reverse_scan", discounted_returns, lambda sd: ((normal(sd, (32, 64)),), {}), discounted_np,
     1e-4)


def seg_cumsum_np(x, flags):
  out = np.zeros(x.shape, np.float64)
  for r in range(x.shape[0]):
    s = 0.0
    for t in range(x.shape[1]):
      s = x[r, t] if flags[r, t] else s + x[r, t]
      out[r, t] = s
  return out.astype(np.float32)


def _segs(sd, shape=(16, 128)):
  f = rng_of(sd).random(shape) < 0.1
  f[:, 0] = True
  return (normal(sd, shape), f.astype(np.int32)), {}


@mg.mgpu_kernel(out_shape=lambda x, f: x, grid=lambda x, f: (x.shape[0] // 8,))
def segmented_cumsum_flags(x, flags, out):
  """A segmented scan (CUB's head flags): pairs (flag, value) combined so a set flag restarts the sum."""
  rows = ml.ds(ml.program_id(0) * 8, 8)

  def combine(l, r):
    fl, vl = l
    fr, vr = r
    return fl | fr, jnp.where(fr != 0, vr, vl + vr)
  _, s = ml.associative_scan(combine, (flags[rows, :], x[rows, :]), axis=1)
  out[rows, :] = s


case("segmented_cumsum_head_flags", segmented_cumsum_flags, _segs, seg_cumsum_np, 1e-5)


def seg_linrec_np(a, b, flags):
  return linrec_np(np.where(flags != 0, 0.0, a).astype(np.float32).T, b.T).T    # (time along axis 1)


@mg.mgpu_kernel(out_shape=lambda a, b, f: a, grid=lambda a, b, f: (a.shape[0] // 8,))
def segmented_linrec_reset(a, b, flags, out):
  """A linear recurrence reset at document boundaries (packed sequences in Mamba training): a_t zeroed where a new
  segment starts, then the pair scan, as mamba_ssm's `seq_idx` masking does."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  aa = jnp.where(flags[rows, :] != 0, 0.0, a[rows, :])
  _, h = ml.associative_scan(lambda x, y: (x[0] * y[0], y[0] * x[1] + y[1]), (aa, b[rows, :]), axis=1)
  out[rows, :] = h


case("segmented_linrec_reset_at_boundaries", segmented_linrec_reset,
     lambda sd: ((*_ab(sd, (16, 128)), _segs(sd)[0][1]), {}), seg_linrec_np, 1e-5)


def seg_ids_cummax_np(flags):
  return (np.cumsum(flags, axis=1) - 1).astype(np.int32)


@mg.mgpu_kernel(out_shape=lambda f: f, grid=lambda f: (f.shape[0] // 8,))
def segment_ids_from_flags(flags, out):
  """Segment ids from head flags by an inclusive cumsum minus one (int32 scan), as torch_scatter users make them."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  out[rows, :] = jnp.cumsum(flags[rows, :], axis=1) - 1


case("segment_ids_by_cumsum", segment_ids_from_flags, lambda sd: ((_segs(sd)[0][1],), {}), seg_ids_cummax_np, 0)


def compact_np(x, thr=0.5):
  keep = x > thr
  out = np.zeros_like(x)
  n = np.zeros(x.shape[0], np.int32)
  for r in range(x.shape[0]):
    v = x[r][keep[r]]
    out[r, :len(v)] = v
    n[r] = len(v)
  return out, n


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0],), I32)), grid=lambda x: (x.shape[0],))
def stream_compaction(x, out, count, *, thr: ml.constexpr = 0.5):
  """Stream compaction by an exclusive prefix sum of the keep flags used as output offsets (a scatter of the kept
  elements; the rest of the row zero-filled first)."""
  r = ml.program_id(0)
  v = x[r, :]
  keep = v > thr
  pos = jnp.cumsum(keep.astype(jnp.int32)) - 1
  out[r, :] = ml.zeros(v.shape, jnp.float32)
  ml.store(out.at[r, pos], v, mask=keep)
  count[r] = jnp.sum(keep.astype(jnp.int32))


case("stream_compaction_prefix_offsets", stream_compaction, lambda sd: ((normal(sd, (8, 256)),), {}), compact_np, 0)


def ragged_concat_np(x, lens):
  offs = np.concatenate([[0], np.cumsum(lens)])
  out = np.zeros(x.shape[0] * x.shape[1], np.float32)
  for r in range(x.shape[0]):
    out[offs[r]:offs[r + 1]] = x[r, :lens[r]]
  return out, offs[1:].astype(np.int32)


@mg.mgpu_kernel(out_shape=lambda x, lens: (S((x.shape[0] * x.shape[1],), F32), lens), grid=(1,))
def ragged_concat_offsets(x, lens, out, ends):
  """Ragged rows packed end to end: the row offsets an exclusive cumsum of the lengths (a (16,) vector), each row
  stored at its offset by a masked pointer store, the tail of the output zero-filled."""
  n = lens[...]
  csum = jnp.cumsum(n)
  ends[...] = csum
  starts = csum - n
  out[...] = ml.zeros(out.shape, jnp.float32)
  c = ml.arange(x.shape[1])
  for r in range(x.shape[0]):
    ml.store(out.at[starts[r] + c], x[r, :], mask=c < n[r])


case("ragged_concat_by_length_offsets", ragged_concat_offsets,
     lambda sd: ((normal(sd, (16, 64)), rng_of(sd).integers(0, 65, 16).astype(np.int32)), {}), ragged_concat_np, 0)


def decayed_cumsum_np(x, lam=0.95):
  return linrec_np(np.full(x.shape, lam, np.float32), x)         # (B, T, D): along axis 1


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def decayed_cumsum_matrix(x, out, *, lam: ml.constexpr = 0.95):
  """An exponentially decayed cumulative sum as a lower-triangular decay matrix times the chunk (the SSD / linear
  attention chunk form): L[t, s] = lam^(t-s) for s <= t, built from aranges, applied with jnp.dot."""
  b = ml.program_id(0)
  T = x.shape[1]
  t = ml.arange(T)[:, None]
  s = ml.arange(T)[None, :]
  L = jnp.where(s <= t, jnp.exp((t - s).astype(jnp.float32) * np.log(lam)), 0.0)
  out[b] = jnp.dot(L, x[b], precision=None)


case("decayed_cumsum_decay_matrix_dot", decayed_cumsum_matrix, lambda sd: ((normal(sd, (2, 64, 64)),), {}),
     decayed_cumsum_np, 1e-2)
