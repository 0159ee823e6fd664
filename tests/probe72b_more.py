"""Probe 72b's corpus, its fifth part: the forms JAX users and cuSignal ports reach next: VanderPlas' vectorised
FFT (a small DFT then radix-2 combines of growing tiles), radix-2 stages in a run-time loop, complex outputs
stacked on a last axis of 2, a biquad cascade in lax.fori_loop, a Kaiser design with jnp.i0, an analytic
signal's envelope by chained DFT products (register A operands), a digital down-converter (NCO mixing, boxcar
decimation by a reshape), half-band polyphase decimation by strided slices, spectral subtraction, MFCCs as two
chained products, overlap-save by jnp.convolve 'valid', Welch's averaged periodogram, a channel covariance by
x @ x.T, bfloat16 complex products. Same CASES form as probe72b_complex.py."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72b_complex import S, F32, F16, BF16, normal, rng_of
from probe72b_fft import dft_mats, fft_ref
from probe72b_filter import fir_np
from probe72b_stft import hann_np, mel_fb

CASES = {}


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- FFTs the JAX way
@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def fft_vanderplas(re, im, o_re, o_im):
  """VanderPlas' vectorised FFT of rows of 128: a 16-point DFT of the (16, 8) reshape (as a sum of broadcast
  products), then radix-2 combines X = [E + w O, E - w O] of the halves, the tile growing (32, 4) .. (128, 1)."""
  b = ml.program_id(0)
  N, NM = 128, 16
  n = ml.arange(NM)
  ang = (-2.0 * math.pi / NM) * ((n[:, None] * n[None, :]) % NM).astype(F32)
  mr, mi = ml.cos(ang), ml.sin(ang)
  xr = re[b, :].reshape(NM, N // NM)
  xi = im[b, :].reshape(NM, N // NM)
  Xr = jnp.sum(mr[:, :, None] * xr[None, :, :] - mi[:, :, None] * xi[None, :, :], axis=1)
  Xi = jnp.sum(mr[:, :, None] * xi[None, :, :] + mi[:, :, None] * xr[None, :, :], axis=1)
  while Xr.shape[0] < N:
    h = Xr.shape[1] // 2
    er, ei, orr, oi = Xr[:, :h], Xi[:, :h], Xr[:, h:], Xi[:, h:]
    k = ml.arange(Xr.shape[0]).astype(F32)
    wr = ml.cos(-math.pi * k / Xr.shape[0])[:, None]
    wi = ml.sin(-math.pi * k / Xr.shape[0])[:, None]
    tr, ti = wr * orr - wi * oi, wr * oi + wi * orr
    Xr = jnp.vstack([er + tr, er - tr])
    Xi = jnp.vstack([ei + ti, ei - ti])
  o_re[b, :] = Xr.ravel()
  o_im[b, :] = Xi.ravel()


def _pair(s, shape):
  return (normal(s, shape), normal(s + 1, shape)), {}


case("fft128_vanderplas_vectorised_reshape_vstack", fft_vanderplas, lambda s: _pair(s, (4, 128)), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def fft_runtime_stages(re, im, o_re, o_im):
  """Radix-2 DIT of rows of 256 whose stages run in a run-time loop (`ml.range(LOG)`): the half size a run-time
  shift `1 << s`, the partner `i ^ half` a register gather at run-time indices, the twiddle angle from the scalar."""
  b = ml.program_id(0)
  N, LOG = 256, 8
  i = ml.arange(N)
  rev = ml.zeros_like(i)
  t = i
  for _ in range(LOG):
    rev = (rev << 1) | (t & 1)
    t >>= 1
  xr, xi = re[b, :][rev], im[b, :][rev]
  for s in ml.range(LOG):
    half = 1 << s
    pos = i & (2 * half - 1)
    top = pos < half
    ang = (-math.pi / half.astype(F32)) * (pos & (half - 1)).astype(F32)
    wr, wi = ml.cos(ang), ml.sin(ang)
    pr, pim = xr[i ^ half], xi[i ^ half]
    br, bi = ml.where(top, pr, xr), ml.where(top, pim, xi)
    ar, ai = ml.where(top, xr, pr), ml.where(top, xi, pim)
    tr, ti = wr * br - wi * bi, wr * bi + wi * br
    xr, xi = ml.where(top, ar + tr, ar - tr), ml.where(top, ai + ti, ai - ti)
  o_re[b, :] = xr
  o_im[b, :] = xi


case("fft256_radix2_runtime_stage_loop", fft_runtime_stages, lambda s: _pair(s, (4, 256)), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda z, w: z, grid=lambda z, w: (z.shape[0] // 128,))
def cmul_stack_last_axis(z, w, out):
  """Complex products of (n, 2) interleaved arrays (torch.view_as_real), the result built by jnp.stack(..., -1)."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  a, b = z.at[r, :][...], w.at[r, :][...]
  re = a[:, 0] * b[:, 0] - a[:, 1] * b[:, 1]
  im = a[:, 0] * b[:, 1] + a[:, 1] * b[:, 0]
  out.at[r, :][...] = jnp.stack([re, im], axis=-1)


def _cstack_ref(z, w):
  c = (z[:, 0] + 1j * z[:, 1].astype(np.float64)) * (w[:, 0] + 1j * w[:, 1].astype(np.float64))
  return np.stack([c.real, c.imag], -1)


case("cmul_interleaved_jnp_stack_last_axis", cmul_stack_last_axis, lambda s: _pair(s, (512, 2)), _cstack_ref)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[0] // 8,))
def cmul_bf16_interleaved(a, b, out):
  """bfloat16 spectra interleaved (rows, bins, 2), products in float32, rounded once to bfloat16."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  x = a.at[r, :, :][...].astype(F32)
  y = b.at[r, :, :][...].astype(F32)
  re = x[..., 0] * y[..., 0] - x[..., 1] * y[..., 1]
  im = x[..., 0] * y[..., 1] + x[..., 1] * y[..., 0]
  out.at[r, :, :][...] = jnp.stack([re, im], axis=-1).astype(a.dtype)


def _cbf_ref(a, b):
  x, y = a.astype(np.float32), b.astype(np.float32)
  re = x[..., 0] * y[..., 0] - x[..., 1] * y[..., 1]
  im = x[..., 0] * y[..., 1] + x[..., 1] * y[..., 0]
  return np.stack([re, im], -1).astype(a.dtype)


case("cmul_bf16_rows_bins_pairs_3d", cmul_bf16_interleaved,
     lambda s: ((normal(s, (16, 64, 2)).astype(jnp.bfloat16), normal(s + 1, (16, 64, 2)).astype(jnp.bfloat16)), {}),
     _cbf_ref, 1e-2)


# ---------------------------------------------------------------- filters, JAX style
@mg.mgpu_kernel(out_shape=lambda x, sos: x, grid=lambda x, sos: (x.shape[1] // 128,))
def sosfilt_fori(x, sos, y):
  """scipy.signal.sosfilt of two biquad sections over x (time, channels), time in jax.lax.fori_loop carrying a
  tuple of four state vectors, coefficients of each section read as scalars (b0 b1 b2 a0 a1 a2, a0 = 1)."""
  ch = ml.ds(ml.program_id(0) * 128, 128)

  def step(t, st):
    z = list(st)
    v = x[t, ch]
    for sec in range(2):
      b0, b1, b2, a1, a2 = sos[sec, 0], sos[sec, 1], sos[sec, 2], sos[sec, 4], sos[sec, 5]
      out = b0 * v + z[2 * sec]
      z[2 * sec] = b1 * v - a1 * out + z[2 * sec + 1]
      z[2 * sec + 1] = b2 * v - a2 * out
      v = out
    y[t, ch] = v
    return tuple(z)

  zero = ml.zeros((128,), F32)
  jax.lax.fori_loop(0, x.shape[0], step, (zero, zero, zero, zero))


def _sos_ref(x, sos):
  v = x.astype(np.float32)
  for sec in range(2):
    b0, b1, b2, _, a1, a2 = (np.float32(c) for c in sos[sec])
    z1 = np.zeros(x.shape[1], np.float32)
    z2 = np.zeros(x.shape[1], np.float32)
    out = np.zeros_like(v)
    for t in range(x.shape[0]):
      o = b0 * v[t] + z1
      z1 = b1 * v[t] - a1 * o + z2
      z2 = b2 * v[t] - a2 * o
      out[t] = o
    v = out
  return v


SOS = np.array([[0.2, 0.4, 0.2, 1.0, -0.3, 0.1], [1.0, -1.0, 0.5, 1.0, 0.2, 0.3]], np.float32)
case("sosfilt_two_sections_fori_loop_tuple", sosfilt_fori, lambda s: ((normal(s, (128, 256)), SOS), {}), _sos_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda beta: S((beta.shape[0], 64), F32), grid=lambda beta: (beta.shape[0] // 8,))
def kaiser_design(beta, h):
  """Kaiser windows of run-time betas (one a row) by jnp.i0, I0(beta sqrt(1 - (2n/M - 1)^2)) / I0(beta), times a
  half-band sinc."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  bt = beta.at[r][...][:, None]
  n = ml.arange(64)[None, :].astype(F32)
  M = 63.0
  arg = bt * jnp.sqrt(jnp.maximum(1.0 - (2.0 * n / M - 1.0) ** 2, 0.0))
  h.at[r, :][...] = jnp.i0(arg) / jnp.i0(bt) * 0.5 * jnp.sinc(0.5 * (n - M / 2))


def _kaiser_ref(beta):
  n = np.arange(64)
  return np.stack([np.kaiser(64, b) * 0.5 * np.sinc(0.5 * (n - 31.5)) for b in beta.astype(np.float64)])


case("kaiser_window_jnp_i0_runtime_beta", kaiser_design,
     lambda s: ((rng_of(s).uniform(2, 10, 16).astype(np.float32),), {}), _kaiser_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, c, s: S(x.shape, F32), grid=lambda x, c, s: (x.shape[0] // 64,))
def analytic_envelope(x, c, s, env):
  """|hilbert(x)|: X = x (C + iS), negative frequencies zeroed and positive doubled, the inverse by four products
  of float16 register operands (X's parts cast in registers) with C and -S, the magnitude."""
  i = ml.program_id(0)
  N = 64
  x_s, c_s, s_s = ml.smem((64, N), F16), ml.smem((N, N), F16), ml.smem((N, N), F16)
  ml.copy(x.at[ml.ds(i * 64, 64), :], x_s)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  k = ml.arange(N)[None, :]
  h = ml.where((k == 0) | (k == N // 2), 1.0, ml.where(k < N // 2, 2.0, 0.0)) / N
  xr = (ml.dot(x_s, c_s) * h).astype(F16)
  xi = (ml.dot(x_s, s_s) * h).astype(F16)
  yr = ml.dot(xr, c_s) + ml.dot(xi, s_s)          # inverse: conj twiddles, (Xr + iXi)(C - iS)
  yi = ml.dot(xi, c_s) - ml.dot(xr, s_s)
  env.at[ml.ds(i * 64, 64), :][...] = ml.sqrt(yr * yr + yi * yi)


def _env_ref(x, c, s):
  X = np.fft.fft(x.astype(np.float64), axis=1)
  h = np.zeros(64)
  h[0] = h[32] = 1
  h[1:32] = 2
  return np.abs(np.fft.ifft(X * h, axis=1))


case("analytic_signal_envelope_chained_register_dots", analytic_envelope,
     lambda s: ((normal(s, (128, 64), np.float16),) + dft_mats(64), {}), _env_ref, 5e-3)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 8,), F32),) * 2, grid=lambda x: (x.shape[0] // 1024,))
def ddc(x, o_i, o_q, *, f0: ml.constexpr = 0.123):
  """A digital down-converter: mix with an NCO (phase = f0 n mod 1, kept small for float32), then decimate by 8
  with a boxcar (a reshape to (128, 8) and a sum along the last axis)."""
  n = ml.program_id(0) * 1024 + ml.arange(1024)
  ph = 2.0 * math.pi * ((n.astype(F32) * f0) % 1.0)
  v = x.at[ml.ds(ml.program_id(0) * 1024, 1024)][...]
  i_ = (v * ml.cos(ph)).reshape(128, 8).sum(axis=1) / 8
  q_ = (-v * ml.sin(ph)).reshape(128, 8).sum(axis=1) / 8
  r = ml.ds(ml.program_id(0) * 128, 128)
  o_i.at[r][...] = i_
  o_q.at[r][...] = q_


def _ddc_ref(x, f0=0.123):
  n = np.arange(len(x), dtype=np.float32)
  ph = np.float32(2 * math.pi) * ((n * np.float32(f0)) % np.float32(1.0))
  return ((x * np.cos(ph)).reshape(-1, 8).mean(1), (-x * np.sin(ph)).reshape(-1, 8).mean(1))


case("ddc_nco_mix_boxcar_decimate_reshape", ddc, lambda s: ((normal(s, 4096),), {}), _ddc_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, h: S((x.shape[0], x.shape[1] // 2), F32), grid=lambda x, h: (x.shape[0] // 8,))
def halfband_decimate(x, h, y):
  """Polyphase decimation by 2: even and odd phases of a row by strided slices `v[:, 0::2]`, `v[:, 1::2]`, each
  filtered by its half of the taps as shifted masked loads of the phase (jnp.roll along time, masked at the start)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  ev, od = v[:, 0::2], v[:, 1::2]
  t = ml.arange(ev.shape[1])[None, :]
  acc = ml.zeros(ev.shape, F32)
  for j in range(h.shape[0] // 2):
    acc += h[2 * j] * jnp.where(t >= j, jnp.roll(ev, j, axis=1), 0.0)
    acc += h[2 * j + 1] * jnp.where(t >= j + 1, jnp.roll(od, j + 1, axis=1), 0.0)
  y.at[r, :][...] = acc


case("halfband_polyphase_decimate_strided_slices", halfband_decimate,
     lambda s: ((normal(s, (16, 256)), normal(s + 1, 8)), {}), lambda x, h: fir_np(x, h)[:, ::2], 1e-5)


@mg.mgpu_kernel(out_shape=lambda re, im, nz: (re, im), grid=lambda re, im, nz: (re.shape[0] // 8,))
def spectral_subtraction(re, im, nz, o_re, o_im, *, alpha: ml.constexpr = 2.0, beta: ml.constexpr = 0.02):
  """Boll's spectral subtraction: |X| - alpha |N| floored at beta |X|, the phase kept (atan2, then cos / sin)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  a, b = re.at[r, :][...], im.at[r, :][...]
  mag = ml.sqrt(a * a + b * b)
  ph = ml.atan2(b, a)
  m = ml.maximum(mag - alpha * nz[...][None, :], beta * mag)
  o_re.at[r, :][...] = m * ml.cos(ph)
  o_im.at[r, :][...] = m * ml.sin(ph)


def _ss_ref(re, im, nz, alpha=2.0, beta=0.02):
  z = re.astype(np.float64) + 1j * im
  m = np.maximum(np.abs(z) - alpha * nz[None, :], beta * np.abs(z))
  return m * np.cos(np.angle(z)), m * np.sin(np.angle(z))


case("spectral_subtraction_polar_rebuild", spectral_subtraction,
     lambda s: ((normal(s, (32, 128)), normal(s + 1, (32, 128)), np.abs(normal(s + 2, 128)) * 0.3), {}), _ss_ref, 1e-5)


def dct2_ortho_np(n):
  k, m = np.arange(n)[:, None], np.arange(n)[None, :]
  return np.cos(np.pi / n * (m + 0.5) * k) * np.where(k == 0, np.sqrt(1 / n), np.sqrt(2 / n))


@mg.mgpu_kernel(out_shape=lambda p, fb, d: S((p.shape[0], d.shape[1]), F32), grid=lambda p, fb, d: (p.shape[0] // 64,))
def mfcc(p, fb, d, out):
  """MFCCs: log(power @ mel + eps) then @ DCT-II (32 mels to 16 coefficients), the log-mel cast to bfloat16 in
  registers as the second product's A, both matrices staged by TMA."""
  i = ml.program_id(0)
  p_s = ml.smem((64, p.shape[1]), BF16)
  fb_s = ml.smem(fb.shape, BF16)
  d_s = ml.smem(d.shape, BF16)
  ml.copy(p.at[ml.ds(i * 64, 64), :], p_s)
  ml.copy(fb, fb_s)
  ml.copy(d, d_s)
  lm = ml.log(ml.dot(p_s, fb_s) + 1e-6).astype(BF16)
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(lm, d_s)


def _mfcc_ref(p, fb, d):
  lm = np.log(np.asarray(p, np.float64) @ np.asarray(fb, np.float64) + 1e-6)
  lm = np.asarray(jnp.asarray(lm.astype(np.float32)).astype(jnp.bfloat16).astype(jnp.float32), np.float64)
  return lm @ np.asarray(d, np.float64)


case("mfcc_log_mel_then_dct_chained_bf16", mfcc,
     lambda s: ((np.abs(normal(s, (128, 128))).astype(jnp.bfloat16), mel_fb(128, 32).astype(jnp.bfloat16),
                 dct2_ortho_np(32).T[:, :16].astype(jnp.bfloat16)), {}), _mfcc_ref, 2e-2)


@mg.mgpu_kernel(out_shape=lambda x, h: S((x.shape[0] - 16 + 1,), F32), grid=lambda x, h: ((x.shape[0] - 15) // 256,))
def overlap_save(x, h, y):
  """Overlap-save in the time domain: a block of 256 + 15 samples (the last 15 of the previous block kept),
  jnp.convolve(v, taps, mode='valid') of register taps."""
  j = ml.program_id(0)
  v = x.at[ml.ds(j * 256, 256 + 16)].load(mask=j * 256 + ml.arange(272) < x.shape[0], other=0)   # (MG203's hint)
  y.at[ml.ds(j * 256, 256)][...] = jnp.convolve(v, h[...], mode="valid")[:256]


case("overlap_save_jnp_convolve_valid_register_taps", overlap_save,
     lambda s: ((normal(s, 1024 + 15), normal(s + 1, 16)), {}), lambda x, h: np.convolve(x, h, mode="valid"), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, c, s: S((c.shape[1],), F32), grid=lambda x, c, s: (1,))
def welch_psd(x, c, s, psd):
  """Welch's PSD: 64 half-overlapping Hann frames of 64 gathered, DFT products on the tensor cores, the periodogram
  averaged over frames (a column mean of the (64, 64) power tile) and scaled by the window's energy."""
  f = ml.arange(64)
  n = ml.arange(64)
  win = 0.5 - 0.5 * ml.cos(2.0 * math.pi / 64 * n.astype(F32))
  fr = (ml.load(x.at[f[:, None] * 32 + n[None, :]]) * win[None, :]).astype(F16)
  c_s, s_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  re, im = ml.dot(fr, c_s), ml.dot(fr, s_s)
  psd[...] = jnp.mean(re * re + im * im, axis=0) / jnp.sum(win * win)


def _welch_ref(x, c, s):
  w = hann_np(64)
  fr = np.stack([x[i * 32:i * 32 + 64] for i in range(64)]) * w
  fr = fr.astype(np.float16).astype(np.float64)
  re, im = fr @ c.astype(np.float64), fr @ s.astype(np.float64)
  return (re * re + im * im).mean(0) / (w * w).sum()


case("welch_psd_frame_mean_column_statistic", welch_psd, lambda s: ((normal(s, 32 * 63 + 64),) + dft_mats(64), {}),
     _welch_ref, 2e-3)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[0]), F32), grid=lambda x: (1,))
def channel_covariance(x, cov):
  """The zero-lag cross-correlation matrix of 64 channels (a beamformer's spatial covariance) as x @ x.T / T, x
  (channels, time) in bfloat16 staged once and read transposed."""
  x_s = ml.smem(x.shape, BF16)
  ml.copy(x, x_s)
  cov[...] = ml.dot(x_s, x_s.T) / x.shape[1]


case("channel_covariance_x_xT_bf16", channel_covariance, lambda s: ((normal(s, (64, 256)).astype(jnp.bfloat16),), {}),
     lambda x: np.asarray(x, np.float64) @ np.asarray(x, np.float64).T / 256, 1e-5)


@mg.mgpu_kernel(out_shape=lambda t: S(t.shape, F32), grid=lambda t: (t.shape[0] // 1024,))
def chirp(t, out, *, f0: ml.constexpr = 10.0, k: ml.constexpr = 400.0):
  """A linear chirp cos(2 pi (f0 t + k t^2 / 2)) at run-time sample times (scipy.signal.chirp, linear)."""
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  tt = t.at[r][...]
  out.at[r][...] = ml.cos(2.0 * math.pi * (f0 * tt + 0.5 * k * tt * tt))


def _chirp_ref(t, f0=10.0, k=400.0):
  t = t.astype(np.float32)
  return np.cos(np.float32(2 * math.pi) * (np.float32(f0) * t + np.float32(0.5 * k) * t * t))


case("linear_chirp_cos_of_quadratic_phase", chirp, lambda s: ((np.linspace(0, 1, 2048, dtype=np.float32),), {}),
     _chirp_ref, 1e-4)


# ---------------------------------------------------------------- libdevice's float intrinsics, jnp.unwrap
ld = ml.extra.cuda.libdevice


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0] // 64,))
def twiddle_multiply_sinpi(re, im, o_re, o_im):
  """A four-step FFT's twiddle multiplication as a Triton port writes it: x[r, c] * e^{-2 pi i r c / N} with the
  angle as libdevice's `cospi` / `sinpi` of 2 r c / N (r c reduced mod N first: exact zeros at multiples of N/2)."""
  rows = ml.program_id(0) * 64 + ml.arange(64)[:, None]
  cols = ml.arange(re.shape[1])[None, :]
  N = re.shape[0] * re.shape[1]
  t = ((rows * cols) % N).astype(F32) * (2.0 / N)
  wr, wi = ld.cospi(t), -ld.sinpi(t)
  r = ml.ds(ml.program_id(0) * 64, 64)
  a, b = re.at[r, :][...], im.at[r, :][...]
  o_re.at[r, :][...] = a * wr - b * wi
  o_im.at[r, :][...] = a * wi + b * wr


def _twiddle_ref(re, im):
  R, C = re.shape
  w = np.exp(-2j * np.pi * ((np.arange(R)[:, None] * np.arange(C)[None, :]) % (R * C)) / (R * C))
  z = (re + 1j * im.astype(np.float64)) * w
  return z.real, z.imag


case("four_step_twiddles_libdevice_sinpi_cospi", twiddle_multiply_sinpi, lambda s: _pair(s, (128, 64)), _twiddle_ref,
     1e-6)


@mg.mgpu_kernel(out_shape=lambda p: p, grid=lambda p: (p.shape[1] // 128,))
def instantaneous_frequency(p, f, *, hop: ml.constexpr = 64, n_fft: ml.constexpr = 256):
  """A phase vocoder's instantaneous frequency: the phase of each bin unwrapped along frames (jnp.unwrap, axis 0),
  its frame-to-frame advance less the bin's expected advance, in cycles a sample."""
  c = ml.ds(ml.program_id(0) * 128, 128)
  u = jnp.unwrap(p.at[:, c][...], axis=0)
  k = (ml.program_id(0) * 128 + ml.arange(128)).astype(F32)[None, :]
  adv = u - jnp.roll(u, 1, axis=0)
  t = ml.arange(p.shape[0])[:, None]
  f.at[:, c][...] = jnp.where(t == 0, k / n_fft, adv / (2.0 * math.pi * hop))


def _if_ref(p, hop=64, n_fft=256):
  u = np.unwrap(p.astype(np.float64), axis=0)
  adv = np.diff(u, axis=0, prepend=0)
  k = np.arange(p.shape[1])[None, :]
  return np.where(np.arange(p.shape[0])[:, None] == 0, k / n_fft, adv / (2 * np.pi * hop))


def _if_make(s):
  k = np.arange(256)[None, :]
  ph = (2 * np.pi * 64 * np.arange(16)[:, None] * (k / 256 + rng_of(s).uniform(-0.002, 0.002, (1, 256))))
  return (((ph + np.pi) % (2 * np.pi) - np.pi).astype(np.float32),), {}


case("instantaneous_frequency_jnp_unwrap_frames", instantaneous_frequency, _if_make, _if_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def db_gain_roundtrip(x, y, *, gain_db: ml.constexpr = -6.0):
  """dB to amplitude and back as CUDA ports write it: 20 log10(|x|), the gain added, libdevice's exp10 of dB / 20
  with the sign restored."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  db = 20.0 * ld.log10(ml.maximum(ml.abs(v), 1e-9)) + gain_db
  y.at[r, :][...] = ld.copysign(ld.exp10(db / 20.0), v)


case("db_gain_libdevice_log10_exp10", db_gain_roundtrip, lambda s: ((normal(s, (16, 256)),), {}),
     lambda x, gain_db=-6.0: x * 10 ** (gain_db / 20), 1e-5)
