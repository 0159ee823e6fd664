"""Probe 72b's corpus, its sixth part: audio kernels around the transforms as torchaudio and cuSignal ports write
them: int16 PCM in and out (dithered quantisation, clipping), mu-law companding to uint8 and back, a CIC decimator
in wrapping int32 arithmetic, an envelope follower (attack / release recurrence), fractional-delay resampling by
linear interpolation (gathers), a four-step FFT of 1024 points as small DFT products with twiddles between them,
YIN's cumulative-mean-normalised difference and an autocorrelation pitch by argmax, a sliding DFT's complex
recurrence, the mel scale of frequencies. Same CASES form as probe72b_complex.py."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72b_complex import S, F32, I32, normal, rng_of
from probe72b_fft import fft_ref

CASES = {}
I16, U8 = jnp.int16, jnp.uint8


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- PCM, companding, CIC
@mg.mgpu_kernel(out_shape=lambda x, n: S(x.shape, I16), grid=lambda x, n: (x.shape[0] // 1024,))
def to_pcm16(x, noise, out):
  """float audio to int16 PCM with TPDF dither (two uniform noises given), rounded and clipped to int16's range."""
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  d = noise.at[0, r][...] - noise.at[1, r][...]
  v = jnp.round(x.at[r][...] * 32767.0 + d)
  out.at[r][...] = jnp.clip(v, -32768, 32767).astype(I16)


def _pcm_ref(x, n):
  v = np.round(x * np.float32(32767.0) + (n[0] - n[1]))
  return np.clip(v, -32768, 32767).astype(np.int16)


case("float_to_pcm16_tpdf_dither_clip", to_pcm16,
     lambda s: ((normal(s, 4096) * 0.6, rng_of(s).uniform(0, 1, (2, 4096)).astype(np.float32)), {}), _pcm_ref, 0)


@mg.mgpu_kernel(out_shape=lambda p: (S(p.shape, U8), S(p.shape, F32)), grid=lambda p: (p.shape[0] // 1024,))
def mu_law(p, code, back, *, mu: ml.constexpr = 255):
  """int16 PCM to mu-law codes (uint8) and decoded back (torchaudio's mu_law_encoding / decoding)."""
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  x = p.at[r][...].astype(F32) / 32768.0
  y = jnp.sign(x) * jnp.log1p(mu * jnp.abs(x)) / math.log1p(mu)
  q = ((y + 1) / 2 * mu + 0.5).astype(I32)
  code.at[r][...] = q.astype(U8)
  z = q.astype(F32) / mu * 2 - 1
  back.at[r][...] = jnp.sign(z) * (jnp.exp(jnp.abs(z) * math.log1p(mu)) - 1) / mu


def _mu_ref(p, mu=255):
  x = p.astype(np.float32) / np.float32(32768.0)
  y = np.sign(x) * np.log1p(np.float32(mu) * np.abs(x)) / np.float32(math.log1p(mu))
  q = ((y + 1) / 2 * mu + np.float32(0.5)).astype(np.int32)
  z = q.astype(np.float32) / mu * 2 - 1
  return q.astype(np.uint8), np.sign(z) * (np.exp(np.abs(z) * np.float32(math.log1p(mu))) - 1) / mu


case("mu_law_encode_decode_int16_uint8", mu_law,
     lambda s: ((rng_of(s).integers(-32768, 32767, 4096).astype(np.int16),), {}), _mu_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 8), I32), grid=lambda x: (x.shape[0] // 8,))
def cic_decimate(x, y):
  """A 3-stage CIC decimator by 8 (Hogenauer): integrators as cumsums in int32 whose overflow wraps (two's
  complement makes the combs' differences right), then every 8th sample and three comb differences."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...].astype(I32)
  for _ in range(3):
    v = jnp.cumsum(v, axis=1)
  d = v[:, 7::8]
  t = ml.arange(d.shape[1])[None, :]
  for _ in range(3):
    d = d - jnp.where(t >= 1, jnp.roll(d, 1, axis=1), 0)
  y.at[r, :][...] = d


def _cic_ref(x):
  with np.errstate(over="ignore"):
    v = x.astype(np.int32)
    for _ in range(3):
      v = np.cumsum(v, axis=1, dtype=np.int32)
    d = v[:, 7::8]
    for _ in range(3):
      d = d - np.pad(d, ((0, 0), (1, 0)))[:, :-1]
  return d


case("cic3_decimate8_wrapping_int32_cumsum", cic_decimate,
     lambda s: ((rng_of(s).integers(-30000, 30000, (16, 1024)).astype(np.int16),), {}), _cic_ref, 0)


# ---------------------------------------------------------------- recurrences and interpolation
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1] // 128,))
def envelope_follower(x, env, *, att: ml.constexpr = 0.9, rel: ml.constexpr = 0.995):
  """A peak envelope follower over (time, channels): attack where |x| rises above the envelope, release otherwise,
  a run-time loop along time carrying the channels' envelopes."""
  ch = ml.ds(ml.program_id(0) * 128, 128)
  e = ml.zeros((128,), F32)
  for t in range(x.shape[0]):
    a = ml.abs(x[t, ch])
    e = ml.where(a > e, att * e + (1 - att) * a, rel * e + (1 - rel) * a)
    env[t, ch] = e


def _env_ref(x, att=0.9, rel=0.995):
  e = np.zeros(x.shape[1], np.float32)
  out = np.zeros_like(x)
  for t in range(x.shape[0]):
    a = np.abs(x[t])
    e = np.where(a > e, np.float32(att) * e + np.float32(1 - att) * a, np.float32(rel) * e + np.float32(1 - rel) * a)
    out[t] = e
  return out


case("envelope_follower_attack_release_loop", envelope_follower, lambda s: ((normal(s, (200, 256)),), {}), _env_ref,
     1e-5)


@mg.mgpu_kernel(out_shape=lambda x, *, ratio: S((int(x.shape[0] * ratio) // 256 * 256,), F32),
                grid=lambda x, *, ratio: (int(x.shape[0] * ratio) // 256,))
def linear_resample(x, y, *, ratio: ml.constexpr = 1.5):
  """Resampling by linear interpolation: output n reads x at n / ratio, the two neighbours gathered (the right one
  clamped at the end) and mixed by the fraction."""
  n = ml.program_id(0) * 256 + ml.arange(256)
  pos = n.astype(F32) / ratio
  i0 = ml.floor(pos).astype(I32)
  frac = pos - i0.astype(F32)
  a = x[i0]
  b = x[ml.minimum(i0 + 1, x.shape[0] - 1)]
  y.at[ml.ds(ml.program_id(0) * 256, 256)][...] = a + (b - a) * frac


def _resample_ref(x, ratio=1.5):
  m = int(len(x) * ratio) // 256 * 256
  pos = np.asarray(jnp.arange(m, dtype=jnp.float32) / ratio)    # (jnp's: the product by float32's 1 / ratio)
  i0 = np.floor(pos).astype(np.int64)
  frac = pos - i0.astype(np.float32)
  a, b = x[i0], x[np.minimum(i0 + 1, len(x) - 1)]
  return a + (b - a) * frac


case("linear_interpolation_resample_gathers", linear_resample, lambda s: ((normal(s, 1024),), {"ratio": 1.5}),
     _resample_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, k: (S((x.shape[0], k.shape[0]), F32),) * 2, grid=lambda x, k: (1,))
def sliding_dft(x, k, o_re, o_im, *, N: ml.constexpr = 64):
  """A sliding DFT of 8 bins over one stream: S_k(n) = (S_k(n - 1) + x[n] - x[n - N]) e^{2 pi i k / N}, the complex
  state carried as (re, im) through a run-time loop over samples, every state stored (a row a sample)."""
  w = (2.0 * math.pi / N) * k[...].astype(F32)
  cr, ci = ml.cos(w), ml.sin(w)
  sr = ml.zeros((8,), F32)
  si = ml.zeros((8,), F32)
  for n in range(x.shape[0]):
    old = ml.where(n >= N, x[ml.maximum(n - N, 0)], 0.0)
    a = sr + x[n] - old
    sr, si = a * cr - si * ci, a * ci + si * cr
    o_re[n, :] = sr
    o_im[n, :] = si


def _sdft_ref(x, k, N=64):
  w = (2 * np.pi / N) * k.astype(np.float32)
  cr, ci = np.cos(w).astype(np.float32), np.sin(w).astype(np.float32)
  sr = np.zeros(8, np.float32)
  si = np.zeros(8, np.float32)
  ore, oim = [], []
  for n in range(len(x)):
    old = x[n - N] if n >= N else np.float32(0)
    a = sr + x[n] - old
    sr, si = a * cr - si * ci, a * ci + si * cr
    ore.append(sr)
    oim.append(si)
  return np.stack(ore), np.stack(oim)


case("sliding_dft_complex_state_loop", sliding_dft,
     lambda s: ((normal(s, 160), np.array([1, 2, 3, 5, 8, 13, 21, 30], np.int32)), {}), _sdft_ref, 1e-5)


# ---------------------------------------------------------------- four-step FFT, pitch
@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def four_step_fft1024(re, im, o_re, o_im):
  """A 1024-point FFT by the four-step method: the signal as a (32, 32) tile A[n1, n2] = x[32 n1 + n2], 32-point DFTs
  down its columns (F @ A, four float32 products of register tiles), twiddles e^{-2 pi i n2 k1 / 1024}, 32-point
  DFTs along its rows (@ F), read out transposed: X[k1 + 32 k2]."""
  b = ml.program_id(0)
  n = ml.arange(32)
  ang = (-2.0 * math.pi / 32) * ((n[:, None] * n[None, :]) % 32).astype(F32)
  fr, fi = ml.cos(ang), ml.sin(ang)
  ar = re[b, :].reshape(32, 32)
  ai = im[b, :].reshape(32, 32)
  dot = lambda p, q: jnp.sum(p[:, :, None] * q[None, :, :], axis=1)       # (exact float32 sums, no TF32)
  br, bi = dot(fr, ar) - dot(fi, ai), dot(fr, ai) + dot(fi, ar)
  tw = (-2.0 * math.pi / 1024) * ((n[:, None] * n[None, :]) % 1024).astype(F32)
  wr, wi = ml.cos(tw), ml.sin(tw)
  cr, ci = br * wr - bi * wi, br * wi + bi * wr
  dr, di = dot(cr, fr) - dot(ci, fi), dot(cr, fi) + dot(ci, fr)
  o_re[b, :] = dr.T.reshape(1024)
  o_im[b, :] = di.T.reshape(1024)


case("four_step_fft1024_32x32_tiles_transposed", four_step_fft1024, lambda s: ((normal(s, (2, 1024)),
     normal(s + 1, (2, 1024))), {}), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 128), F32), S((x.shape[0],), I32)), grid=lambda x: (x.shape[0],))
def yin(x, cmnd, tau_best, *, thresh: ml.constexpr = 0.1):
  """YIN's difference d(tau) = sum_j (x[j] - x[j + tau])^2 over a window of 256 for tau < 128 (lags in a static
  loop, each a shifted read of the frame), its cumulative-mean normalisation d(tau) tau / sum_{1..tau} d, and the
  first lag below the threshold (an argmax of a mask, 0 where none)."""
  r = ml.program_id(0)
  v = x[r, :]
  lags = ml.arange(128)
  d = ml.zeros((128,), F32)
  for tau in ml.static_range(1, 128):
    diff = v[:256] - v[tau:tau + 256]
    d = ml.where(lags == tau, jnp.sum(diff * diff), d)
  cs = jnp.cumsum(d)
  nd = ml.where(lags == 0, 1.0, d * lags.astype(F32) / ml.where(cs > 0, cs, 1.0))
  cmnd[r, :] = nd
  below = (nd < thresh) & (lags > 0)
  tau_best[r] = ml.where(ml.any(below), ml.argmax(below.astype(I32)), 0)


def _yin_ref(x, thresh=0.1):
  out, best = [], []
  for v in x.astype(np.float64):
    d = np.array([0.0] + [np.sum((v[:256] - v[t:t + 256]) ** 2) for t in range(1, 128)])
    cs = np.cumsum(d)
    nd = np.where(np.arange(128) == 0, 1.0, d * np.arange(128) / np.where(cs > 0, cs, 1))
    out.append(nd)
    b = (nd < thresh) & (np.arange(128) > 0)
    best.append(int(np.argmax(b)) if b.any() else 0)
  return np.stack(out), np.array(best, np.int32)


def _yin_make(s):
  t = np.arange(384)
  per = rng_of(s).integers(20, 90, 4)
  x = np.stack([np.sin(2 * np.pi * t / p) + 0.3 * np.sin(4 * np.pi * t / p) for p in per])
  return ((x + 0.01 * normal(s, x.shape)).astype(np.float32),), {}


case("yin_cmnd_static_lags_first_below_threshold", yin, _yin_make, _yin_ref, 1e-4)


@mg.mgpu_kernel(out_shape=lambda f: f, grid=lambda f: (f.shape[0] // 256,))
def hz_to_mel(f, m):
  """The HTK mel scale 2595 log10(1 + f / 700) and back (librosa's mel_to_hz of it), as a roundtrip check."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  mel = 2595.0 * jnp.log10(1.0 + f.at[r][...] / 700.0)
  m.at[r][...] = 700.0 * (10.0 ** (mel / 2595.0) - 1.0)


case("mel_scale_roundtrip_log10_pow", hz_to_mel, lambda s: ((rng_of(s).uniform(0, 8000, 1024).astype(np.float32),),
     {}), lambda f: f.astype(np.float64), 1e-5)


# ---------------------------------------------------------------- the fixed classes as kernels use them
@mg.mgpu_kernel(out_shape=lambda s: (s, s), grid=lambda s: (s.shape[1] // 64,))
def hpss_masks(s, harm, perc):
  """librosa's HPSS with median filters of 5: along time (stacked shifts of the (frames, 64-bin) block, jnp.median
  along the stack) and along frequency (the same within the block's bins), Wiener-like soft masks h^2 / (h^2 + p^2)."""
  c = ml.ds(ml.program_id(0) * 64, 64)
  v = s.at[:, c][...]
  t = ml.arange(v.shape[0])[:, None]
  f = ml.arange(64)[None, :]
  h = jnp.median(jnp.stack([jnp.where((t - k >= 0) & (t - k < v.shape[0]), jnp.roll(v, k, axis=0), 0.0)
                            for k in range(-2, 3)]), axis=0)
  p = jnp.median(jnp.stack([jnp.where((f - k >= 0) & (f - k < 64), jnp.roll(v, k, axis=1), 0.0)
                            for k in range(-2, 3)]), axis=0)
  hh, pp = h * h, p * p
  harm.at[:, c][...] = v * hh / (hh + pp + 1e-10)
  perc.at[:, c][...] = v * pp / (hh + pp + 1e-10)


def _hpss_ref(s):
  out_h, out_p = [], []
  for j in range(0, s.shape[1], 64):
    v = s[:, j:j + 64].astype(np.float32)
    pt, pf = np.pad(v, ((2, 2), (0, 0))), np.pad(v, ((0, 0), (2, 2)))
    h = np.median(np.stack([pt[2 - k:2 - k + v.shape[0]] for k in range(-2, 3)]), axis=0)
    p = np.median(np.stack([pf[:, 2 - k:2 - k + 64] for k in range(-2, 3)]), axis=0)
    hh, pp = h * h, p * p
    out_h.append(v * hh / (hh + pp + np.float32(1e-10)))
    out_p.append(v * pp / (hh + pp + np.float32(1e-10)))
  return np.concatenate(out_h, 1), np.concatenate(out_p, 1)


case("hpss_median_filters_soft_masks", hpss_masks, lambda s: ((np.abs(normal(s, (32, 128))),), {}), _hpss_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda p: (S(p.shape[:1], F32), p), grid=lambda p: (p.shape[0] // 8,))
def centroid_fftfreq_centred(p, cen, centred, *, sr: ml.constexpr = 16000):
  """The spectral centroid of full (two-sided) power spectra over np.fft.fftfreq's bin frequencies (|f|), and the
  spectra centred by jnp.fft.fftshift for display."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = p.at[r, :][...]
  fr = np.abs(np.fft.fftfreq(p.shape[1], d=1.0 / sr))
  cen.at[r][...] = jnp.sum(v * fr[None, :], axis=1) / (jnp.sum(v, axis=1) + 1e-10)
  centred.at[r, :][...] = jnp.fft.fftshift(v, axes=-1)


def _cf_ref(p, sr=16000):
  fr = np.abs(np.fft.fftfreq(p.shape[1], d=1.0 / sr))
  return (p * fr).sum(1) / (p.sum(1) + 1e-10), np.fft.fftshift(p, axes=-1)


case("centroid_np_fftfreq_and_fftshift", centroid_fftfreq_centred, lambda s: ((np.abs(normal(s, (32, 256))),), {}),
     _cf_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, h: x, grid=lambda x, h: (x.shape[0],))
def scipy_fir_rows(x, h, y):
  """A JAX user's FIR of each row: jax.scipy.signal.convolve(row, taps, mode='same')."""
  r = ml.program_id(0)
  y[r, :] = jax.scipy.signal.convolve(x[r, :], h[...], mode="same")


case("fir_rows_jax_scipy_signal_convolve_same", scipy_fir_rows,
     lambda s: ((normal(s, (4, 512)), normal(s + 1, 15)), {}),
     lambda x, h: np.stack([np.convolve(r.astype(np.float64), h, "same") for r in x]), 1e-5)
