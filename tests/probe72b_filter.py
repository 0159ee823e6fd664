"""Probe 72b's corpus, its third part: filters as cuSignal, torchaudio and Triton ports write them: FIR filters
(Triton's shifted masked loads, an SMEM halo staged by TMA, taps as a module constant and from GMEM, float16 in
float32), depthwise causal conv1d (Mamba's), pre-emphasis, IIR biquads as sequential recurrences along time (one
channel a lane, direct form II transposed; a first-order recurrence as an associative scan; lfilter with
torchaudio's clamp), decimation and polyphase resampling, windowed-sinc design, Goertzel, autocorrelation and
cross-correlation by products, a moving average by cumsum. Same CASES form as probe72b_complex.py."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72b_complex import S, F32, normal, rng_of

CASES = {}


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


def fir_np(x, h):
  """y[n] = sum_k h[k] x[n - k] (zeros before the start), along the last axis, float64."""
  x, h = np.asarray(x, np.float64), np.asarray(h, np.float64)
  y = np.zeros_like(x)
  for k in range(len(h)):
    y[..., k:] += h[k] * x[..., :x.shape[-1] - k]
  return y


# ---------------------------------------------------------------- FIR filters
@mg.mgpu_kernel(out_shape=lambda x, h: x, grid=lambda x, h: (ml.cdiv(x.shape[0], 256),))
def fir_shifted_loads(x, h, y, *, K: ml.constexpr = 16):
  """Triton's FIR: each tap a masked load of the block shifted back by k, zeros before the start and past the end
  (any length)."""
  offs = ml.program_id(0) * 256 + ml.arange(256)
  acc = ml.zeros((256,), F32)
  for k in range(K):
    src = offs - k
    acc += ml.load(x.at[src], mask=(src >= 0) & (src < x.shape[0]), other=0.0) * h[k]
  ml.store(y.at[offs], acc, mask=offs < x.shape[0])


case("fir16_shifted_masked_loads_ragged", fir_shifted_loads, lambda s: ((normal(s, 1000), normal(s + 1, 16)), {}),
     fir_np, 1e-5)


TAPS = (np.hanning(9) / np.hanning(9).sum()).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], x.shape[1] // 128))
def fir_module_taps_halo_smem(x, y):
  """A smoothing FIR of module-constant taps over rows, each program's 128 outputs from an SMEM window of
  128 + 8 samples (its halo) staged by TMA from 8 before the block (past the start: zeros), taps in a Python loop
  over static slices of the window's read."""
  b, j = ml.program_id(0), ml.program_id(1)
  K = TAPS.shape[0]
  w = ml.smem((136,), F32)
  ml.copy(x.at[b, ml.ds(j * 128 - 8, 136)], w)
  v = w[...]
  acc = ml.zeros((128,), F32)
  for k in range(K):
    acc += float(TAPS[k]) * v[8 - k:136 - k]
  y.at[b, ml.ds(j * 128, 128)][...] = acc


case("fir9_module_taps_tma_halo_smem_slices", fir_module_taps_halo_smem, lambda s: ((normal(s, (4, 512)),), {}),
     lambda x: fir_np(x, TAPS), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, h: S(x.shape, F32), grid=lambda x, h: (x.shape[0] // 8, x.shape[1] // 128))
def fir_half_rows_tile(x, h, y):
  """float16 rows filtered in float32, a (8, 128) tile a program, taps read as scalars `h[k]` from GMEM, each tap a
  masked load of the tile shifted (a 2-D pointer grid, Triton's `x_ptr + rows[:, None] * L + cols[None, :] - k`)."""
  rows = ml.program_id(0) * 8 + ml.arange(8)[:, None]
  cols = ml.program_id(1) * 128 + ml.arange(128)[None, :]
  acc = ml.zeros((8, 128), F32)
  for k in range(h.shape[0]):
    c = cols - k
    acc += ml.load(x.at[rows, c], mask=c >= 0, other=0.0).to(F32) * h[k].to(F32)
  ml.store(y.at[rows, cols], acc)


case("fir_float16_rows_pointer_grid_f32_acc", fir_half_rows_tile,
     lambda s: ((normal(s, (16, 256), np.float16), normal(s + 1, 12, np.float16)), {}), fir_np, 1e-3)


@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0], x.shape[1] // 64))
def causal_conv1d(x, w, b, y):
  """Mamba's causal_conv1d over (batch, channels, length): a program takes 64 channels of one sequence, taps
  (channels, 4) read as a tile, `jnp.roll` shifts masked at the start, SiLU after."""
  bi, cb = ml.program_id(0), ml.program_id(1)
  ch = ml.ds(cb * 64, 64)
  v = x.at[bi, ch, :][...]
  taps = w.at[ch, :][...]
  t = ml.arange(v.shape[1])[None, :]
  acc = v * taps[:, 3:4] + b.at[ch][...][:, None]
  for s in range(1, 4):
    acc += jnp.where(t >= s, jnp.roll(v, s, axis=1), 0.0) * taps[:, 3 - s:4 - s]
  y.at[bi, ch, :][...] = jax.nn.silu(acc)


def _cconv_ref(x, w, b):
  acc = np.zeros(x.shape, np.float64) + b[None, :, None]
  for k in range(4):
    s = 3 - k
    acc[:, :, s:] += w[None, :, k, None] * x[:, :, :x.shape[2] - s]
  return acc / (1 + np.exp(-acc))


case("causal_conv1d_roll_taps_silu", causal_conv1d,
     lambda s: ((normal(s, (2, 128, 128)), normal(s + 1, (128, 4)), normal(s + 2, 128)), {}), _cconv_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def pre_emphasis(x, y, *, coef: ml.constexpr = 0.97):
  """torchaudio's preemphasis: y[t] = x[t] - coef x[t - 1], x[-1] = 0, a row a program read twice (the second
  window one sample back, masked)."""
  r = ml.program_id(0)
  t = ml.arange(x.shape[1])
  cur = x[r, :]
  prev = ml.load(x.at[r, t - 1], mask=t >= 1, other=0.0)
  y[r, :] = cur - coef * prev


case("pre_emphasis_shifted_row", pre_emphasis, lambda s: ((normal(s, (4, 1024)),), {}),
     lambda x, coef=0.97: x - coef * np.pad(x, ((0, 0), (1, 0)))[:, :-1], 1e-6)


# ---------------------------------------------------------------- IIR recurrences
@mg.mgpu_kernel(out_shape=lambda x, c: x, grid=lambda x, c: (x.shape[1] // 128,))
def biquad_df2t(x, c, y):
  """A biquad (b0, b1, b2, a1, a2) per channel, direct form II transposed, over x of (time, channels): one channel a
  lane, a run-time loop along time carrying the two state vectors (cuSignal's sosfilt, one section)."""
  ch = ml.ds(ml.program_id(0) * 128, 128)
  b0, b1, b2 = c[0, ch], c[1, ch], c[2, ch]
  a1, a2 = c[3, ch], c[4, ch]
  z1 = ml.zeros((128,), F32)
  z2 = ml.zeros((128,), F32)
  for t in range(x.shape[0]):
    xt = x[t, ch]
    yt = b0 * xt + z1
    z1 = b1 * xt - a1 * yt + z2
    z2 = b2 * xt - a2 * yt
    y[t, ch] = yt


def biquad_np(x, c):
  b0, b1, b2, a1, a2 = (c[i].astype(np.float32) for i in range(5))
  z1 = np.zeros(x.shape[1], np.float32)
  z2 = np.zeros(x.shape[1], np.float32)
  out = np.zeros_like(x)
  for t in range(x.shape[0]):
    yt = b0 * x[t] + z1
    z1 = b1 * x[t] - a1 * yt + z2
    z2 = b2 * x[t] - a2 * yt
    out[t] = yt
  return out


def _biquad_make(s, n=256, ch=256):
  rng = rng_of(s)
  r, th = rng.uniform(0.5, 0.95, ch), rng.uniform(0.1, 3.0, ch)
  a1, a2 = -2 * r * np.cos(th), r * r
  b = rng.uniform(-1, 1, (3, ch))
  return (normal(s, (n, ch)), np.concatenate([b, a1[None], a2[None]]).astype(np.float32)), {}


case("biquad_df2t_time_loop_lane_per_channel", biquad_df2t, _biquad_make, biquad_np, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=lambda x, a: (x.shape[0] // 8,))
def one_pole_scan(x, a, y):
  """y[t] = a y[t-1] + x[t] along rows by ml.associative_scan of (decay, value) pairs (a linear recurrence's
  combine, as S4 / Mamba scans write it), the per-row pole broadcast along time."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  d = ml.broadcast_to(a.at[r][...][:, None], v.shape)

  def combine(l, rr):
    return l[0] * rr[0], rr[0] * l[1] + rr[1]

  _, out = ml.associative_scan(combine, (d, v), axis=1)
  y.at[r, :][...] = out


def _one_pole_ref(x, a):
  y = np.zeros(x.shape, np.float64)
  acc = np.zeros(x.shape[0])
  for t in range(x.shape[1]):
    acc = a * acc + x[:, t]
    y[:, t] = acc
  return y


case("one_pole_iir_associative_scan", one_pole_scan,
     lambda s: ((normal(s, (16, 256)), rng_of(s).uniform(0.5, 0.99, 16).astype(np.float32)), {}), _one_pole_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, b, a: x, grid=lambda x, b, a: (x.shape[0] // 128,))
def lfilter_order2_clamp(x, b, a, y):
  """torchaudio.functional.lfilter of order 2 over rows (batch, time), a row a lane: coefficients as scalars read
  from GMEM, the output clamped to [-1, 1] (its clamp=True), time along a `while` loop."""
  rows = ml.ds(ml.program_id(0) * 128, 128)
  y1 = ml.zeros((128,), F32)
  y2 = ml.zeros((128,), F32)
  x1 = ml.zeros((128,), F32)
  x2 = ml.zeros((128,), F32)
  t = 0
  while t < x.shape[1]:
    xt = x[rows, t]
    yt = (b[0] * xt + b[1] * x1 + b[2] * x2 - a[1] * y1 - a[2] * y2) / a[0]
    y[rows, t] = ml.clip(yt, -1.0, 1.0)
    x2, x1 = x1, xt
    y2, y1 = y1, yt
    t += 1


def _lfilter_ref(x, b, a):
  x = x.astype(np.float32)
  y = np.zeros_like(x)
  y1 = y2 = x1 = x2 = np.zeros(x.shape[0], np.float32)
  for t in range(x.shape[1]):
    xt = x[:, t]
    yt = (b[0] * xt + b[1] * x1 + b[2] * x2 - a[1] * y1 - a[2] * y2) / a[0]
    y[:, t] = np.clip(yt, -1, 1)
    x2, x1, y2, y1 = x1, xt, y1, yt
  return y


case("lfilter_order2_while_time_clamp", lfilter_order2_clamp,
     lambda s: ((normal(s, (256, 64)) * 0.3, np.array([0.2, 0.3, 0.2], np.float32),
                 np.array([1.0, -0.5, 0.2], np.float32)), {}), _lfilter_ref, 1e-5)


# ---------------------------------------------------------------- decimation, resampling, design
@mg.mgpu_kernel(out_shape=lambda x, h: S((x.shape[0] // 4,), F32), grid=lambda x, h: (x.shape[0] // 1024,))
def decimate4(x, h, y):
  """FIR then keep every 4th sample (scipy.signal.decimate's FIR path): y[n] = sum_k h[k] x[4n - k], the inputs
  gathered at strided offsets `x.at[4 * n - k]`, masked before the start."""
  n = ml.program_id(0) * 256 + ml.arange(256)
  acc = ml.zeros((256,), F32)
  for k in range(h.shape[0]):
    src = 4 * n - k
    acc += ml.load(x.at[src], mask=src >= 0, other=0.0) * h[k]
  y.at[ml.ds(ml.program_id(0) * 256, 256)][...] = acc


case("decimate4_strided_gather_taps", decimate4, lambda s: ((normal(s, 4096), normal(s + 1, 24)), {}),
     lambda x, h: fir_np(x, h)[::4], 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, h: S((x.shape[0] * 3 // 2,), F32), grid=lambda x, h: (x.shape[0] * 3 // 2 // 256,))
def polyphase_3_2(x, h, y, *, L: ml.constexpr = 3, M: ml.constexpr = 2):
  """Polyphase resampling by L/M = 3/2 (scipy.signal.resample_poly's core, upfirdn): output n takes phase
  (n M) % L of the filter, taps h[p + L j] against x[(n M) // L - j]; the filter read by gathers at run-time
  indices, its length a multiple of L."""
  n = ml.program_id(0) * 256 + ml.arange(256)
  base = (n * M) // L
  ph = (n * M) % L
  acc = ml.zeros((256,), F32)
  for j in range(h.shape[0] // L):
    src = base - j
    acc += ml.load(x.at[src], mask=(src >= 0) & (src < x.shape[0]), other=0.0) * h[ph + L * j]
  y.at[ml.ds(ml.program_id(0) * 256, 256)][...] = acc * L


def _poly_ref(x, h, L=3, M=2):
  up = np.zeros(len(x) * L)
  up[::L] = x
  return (fir_np(up, h) * L)[::M][:len(x) * L // M]


case("polyphase_resample_3_over_2", polyphase_3_2, lambda s: ((normal(s, 1024), normal(s + 1, 30)), {}), _poly_ref,
     1e-5)


@mg.mgpu_kernel(out_shape=lambda fc: S((fc.shape[0], 64), F32), grid=lambda fc: (fc.shape[0] // 8,))
def windowed_sinc_bank(fc, h):
  """A bank of low-pass windowed-sinc filters of 63 taps (one a row, cutoffs fc in cycles a sample): jnp.sinc of
  2 fc (n - M/2) times a Hamming window computed in the kernel, normalised to unit DC gain, the 64th tap 0."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  f = fc.at[r][...][:, None]
  n = ml.arange(64)[None, :].astype(F32)
  M = 62
  win = 0.54 - 0.46 * ml.cos(2.0 * math.pi * n / M)
  taps = jnp.where(n <= M, 2.0 * f * jnp.sinc(2.0 * f * (n - M / 2)) * win, 0.0)
  h.at[r, :][...] = taps / jnp.sum(taps, axis=1, keepdims=True)


def _sinc_ref(fc):
  n = np.arange(64)
  win = 0.54 - 0.46 * np.cos(2 * np.pi * n / 62)
  t = np.where(n <= 62, 2 * fc[:, None] * np.sinc(2 * fc[:, None] * (n - 31)) * win, 0)
  return t / t.sum(1, keepdims=True)


case("windowed_sinc_hamming_bank_jnp_sinc", windowed_sinc_bank,
     lambda s: ((rng_of(s).uniform(0.05, 0.45, 16).astype(np.float32),), {}), _sinc_ref, 1e-5)


# ---------------------------------------------------------------- Goertzel, correlations
@mg.mgpu_kernel(out_shape=lambda x, k: S((x.shape[0], k.shape[0]), F32), grid=lambda x, k: (x.shape[0],))
def goertzel(x, k, power):
  """DTMF detection: the Goertzel recurrence s = x[n] + 2 cos(w) s1 - s2 for 8 bins at once (a row a program,
  bins in lanes), a run-time loop over the row's samples read as scalars, the power at the end."""
  r = ml.program_id(0)
  N = x.shape[1]
  w = (2.0 * math.pi / N) * k[...].astype(F32)
  coeff = 2.0 * ml.cos(w)
  s1 = ml.zeros((8,), F32)
  s2 = ml.zeros((8,), F32)
  for n in range(N):
    s0 = x[r, n] + coeff * s1 - s2
    s2 = s1
    s1 = s0
  power[r, :] = s1 * s1 + s2 * s2 - coeff * s1 * s2


def _goertzel_ref(x, k):
  X = np.fft.fft(x.astype(np.float64), axis=1)[:, k]
  return np.abs(X) ** 2


case("goertzel_8_bins_scalar_samples", goertzel,
     lambda s: ((normal(s, (4, 205)), np.array([18, 20, 22, 24, 31, 34, 38, 42], np.int32)), {}), _goertzel_ref, 1e-4)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), F32), grid=lambda x: (x.shape[0],))
def autocorr_lags(x, r):
  """Autocorrelation for lags 0..63 of a row (LPC's first step): for each lag a masked load of the row shifted,
  the products summed; lags in a Python loop stored one at a time as scalars."""
  b = ml.program_id(0)
  N = x.shape[1]
  t = ml.arange(N)
  v = x[b, :]
  for lag in range(64):
    sh = ml.load(x.at[b, t + lag], mask=t + lag < N, other=0.0)
    r[b, lag] = ml.sum(v * sh)


def _autocorr_ref(x):
  N = x.shape[1]
  return np.stack([np.sum(x[:, :N - l].astype(np.float64) * x[:, l:], axis=1) for l in range(64)], 1)


case("autocorrelation_64_lags_scalar_stores", autocorr_lags, lambda s: ((normal(s, (4, 512)),), {}), _autocorr_ref,
     1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 128), F32), grid=lambda x: (x.shape[0] // 64,))
def autocorr_matmul(x, r):
  """The autocorrelation of rows as a product with a Hankel-free form: frames of 256 against the same frames
  shifted, lags in columns, as one dot per row block of the (64, 256) frames with their (256 + 128) extension read
  as lagged windows `x[:, lag:lag + 256]` stacked along the columns through SMEM."""
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  a = x.at[rows, ml.ds(0, 256)][...]
  ext = ml.load(x.at[rows, ml.ds(0, 384)], mask=ml.arange(384)[None, :] < x.shape[1], other=0.0)
  acc = ml.zeros((64, 128), F32)
  lags = ml.arange(128)[None, :]
  for lag in ml.static_range(128):      # (range(128) was MG003: its hint's unrolling)
    acc = jnp.where(lags == lag, jnp.sum(a * ext[:, lag:lag + 256], axis=1, keepdims=True), acc)
  r.at[rows, :][...] = acc


def _acm_ref(x):
  return np.stack([np.sum(x[:, :256].astype(np.float64) * np.pad(x, ((0, 0), (0, 128)))[:, l:l + 256], 1)
                   for l in range(128)], 1)


case("autocorrelation_128_lags_window_slices_where", autocorr_matmul, lambda s: ((normal(s, (64, 256)),), {}), _acm_ref,
     1e-5)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], 2 * 32 + 1), F32), grid=lambda a, b: (a.shape[0] // 8,))
def xcorr_lags(a, b, c):
  """Cross-correlation of row pairs for lags -32..32 (65 outputs a row, torch's cross-correlation in a GCC
  front end): each lag a masked shifted load of b, the products summed along the row."""
  rows = ml.ds(ml.program_id(0) * 8, 8)
  N = a.shape[1]
  t = ml.arange(N)[None, :]
  x = a.at[rows, :][...]
  r8 = ml.program_id(0) * 8 + ml.arange(8)[:, None]
  for j in range(65):
    lag = j - 32
    src = t + lag
    y = ml.load(b.at[r8, src], mask=(src >= 0) & (src < N), other=0.0)
    c.at[rows, j][...] = ml.sum(x * y, axis=1)


def _xcorr_ref(a, b):
  N = a.shape[1]
  out = []
  for lag in range(-32, 33):
    bb = np.zeros_like(b, dtype=np.float64)
    if lag >= 0:
      bb[:, :N - lag] = b[:, lag:]
    else:
      bb[:, -lag:] = b[:, :N + lag]
    out.append(np.sum(a * bb, 1))
  return np.stack(out, 1)


case("xcorr_65_lags_column_stores", xcorr_lags, lambda s: ((normal(s, (16, 256)), normal(s + 1, (16, 256))), {}),
     _xcorr_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def moving_average(x, y, *, W: ml.constexpr = 16):
  """A boxcar moving average of W samples by a cumsum along the row and its difference with the cumsum shifted by
  W (scipy's uniform_filter1d, causal, zeros before the start)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  cs = jnp.cumsum(v, axis=1)
  t = ml.arange(v.shape[1])[None, :]
  back = jnp.where(t >= W, jnp.roll(cs, W, axis=1), 0.0)
  y.at[r, :][...] = (cs - back) / W


case("moving_average_cumsum_roll", moving_average, lambda s: ((normal(s, (16, 256)),), {}),
     lambda x, W=16: fir_np(x, np.full(W, 1.0 / W)), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), F32), grid=lambda x: (x.shape[0] // 8,))
def rms_zcr(x, out):
  """Per-frame RMS energy and zero-crossing rate (librosa's features), a (frames, 2) output written by columns."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  rms = ml.sqrt(jnp.mean(v * v, axis=1))
  sgn = v >= 0
  cross = (sgn[:, 1:] != sgn[:, :-1]).astype(F32)
  out.at[r, 0][...] = rms
  out.at[r, 1][...] = jnp.sum(cross, axis=1) / v.shape[1]


def _rms_zcr_ref(x):
  s = x >= 0
  return np.stack([np.sqrt(np.mean(x.astype(np.float64) ** 2, 1)), np.sum(s[:, 1:] != s[:, :-1], 1) / x.shape[1]], 1)


case("frame_rms_and_zero_crossing_rate", rms_zcr, lambda s: ((normal(s, (32, 256)),), {}), _rms_zcr_ref, 1e-5)
