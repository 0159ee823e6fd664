"""Probe 72b's corpus, its first part: complex numbers as (real, imag) pairs of arrays or interleaved last axes,
as cuSignal, torchaudio and Triton ports of cuFFT pipelines hold them: complex multiply and conjugate multiply,
magnitude and phase (atan2), power spectra in dB, spectral normalisation (phase-only correlation), pointwise
products of two spectra (an FFT convolution's middle step), a phase vocoder's step, Griffin-Lim's phase update.
Each case: (kernel, make(seed) -> (args, kwargs), reference(*args, **kwargs), tolerance: the largest error
relative to the reference's largest magnitude)."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32
CASES = {}
TWO_PI = 2 * math.pi


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


def rng_of(seed):
  return np.random.default_rng(7200 + seed)


def normal(seed, shape, dtype=np.float32):
  return rng_of(seed).standard_normal(shape).astype(dtype)


def f64(*a):
  return [np.asarray(x, np.float64) for x in a]


# ---------------------------------------------------------------- split (re, im) arrays
@mg.mgpu_kernel(out_shape=lambda ar, ai, br, bi: (ar, ar), grid=lambda ar, ai, br, bi: (ar.shape[0] // 256,))
def cmul_split(ar, ai, br, bi, cr, ci):
  """c = a * b of complex vectors held as separate real and imaginary arrays."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  a_r, a_i = ar.at[r][...], ai.at[r][...]
  b_r, b_i = br.at[r][...], bi.at[r][...]
  cr.at[r][...] = a_r * b_r - a_i * b_i
  ci.at[r][...] = a_r * b_i + a_i * b_r


def _cmul_ref(ar, ai, br, bi):
  c = (ar + 1j * ai.astype(np.float64)) * (br + 1j * bi.astype(np.float64))
  return c.real, c.imag


case("cmul_split_re_im", cmul_split, lambda s: (tuple(normal(s + i, 1024) for i in range(4)), {}), _cmul_ref)


@mg.mgpu_kernel(out_shape=lambda x, y: (S(x.shape[:1], F32), S(x.shape[:1], F32)),
                grid=lambda x, y: (x.shape[0] // 128,))
def cmul_conj_interleaved(x, y, o_mag, o_ph):
  """x * conj(y) of complex vectors interleaved on a last axis of 2 (torch.view_as_real's layout), then the
  product's magnitude and phase (the cross-spectrum of a GCC-PHAT)."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  a = x.at[r, :][...]
  b = y.at[r, :][...]
  re = a[:, 0] * b[:, 0] + a[:, 1] * b[:, 1]
  im = a[:, 1] * b[:, 0] - a[:, 0] * b[:, 1]
  o_mag.at[r][...] = ml.sqrt(re * re + im * im)
  o_ph.at[r][...] = ml.atan2(im, re)


def _conj_ref(x, y):
  c = (x[:, 0] + 1j * x[:, 1].astype(np.float64)) * np.conj(y[:, 0] + 1j * y[:, 1].astype(np.float64))
  return np.abs(c), np.angle(c)


case("cmul_conj_interleaved_last_axis", cmul_conj_interleaved,
     lambda s: ((normal(s, (512, 2)), normal(s + 1, (512, 2))), {}), _conj_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), F32), grid=lambda x: (x.shape[0] // 512,))
def magnitude_strided_pairs(x, mag):
  """|z| of complex numbers interleaved in a flat float32 array (cuFFT's cufftComplex buffer viewed as floats):
  the real parts at even offsets, the imaginary at odd, read Triton's way as two gathers of `2 * offs` and
  `2 * offs + 1`."""
  offs = ml.program_id(0) * 256 + ml.arange(256)
  re = ml.load(x.at[2 * offs])
  im = ml.load(x.at[2 * offs + 1])
  ml.store(mag.at[offs], ml.sqrt(re * re + im * im))


case("magnitude_flat_interleaved_gathers", magnitude_strided_pairs, lambda s: ((normal(s, 2048),), {}),
     lambda x: np.abs(x[0::2] + 1j * x[1::2].astype(np.float64)))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 2,), F32),) * 2, grid=lambda x: (x.shape[0] // 512,))
def mag_phase_strided_slices(x, mag, ph):
  """The same buffer read whole a block at a time and split with strided slices `v[0::2]`, `v[1::2]`."""
  v = x.at[ml.ds(ml.program_id(0) * 512, 512)][...]
  re, im = v[0::2], v[1::2]
  r = ml.ds(ml.program_id(0) * 256, 256)
  mag.at[r][...] = jnp.hypot(re, im)
  ph.at[r][...] = jnp.arctan2(im, re)


case("mag_phase_strided_slices_hypot", mag_phase_strided_slices, lambda s: ((normal(s, 2048),), {}),
     lambda x: (np.hypot(x[0::2], x[1::2]), np.arctan2(x[1::2], x[0::2])))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def conj_interleaved_split_join(x, out):
  """Triton's idiom: `re, im = tl.split(x)` of an interleaved (block, 2) tile, and `tl.join(re, -im)` back."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  re, im = ml.split(x.at[r, :][...])
  out.at[r, :][...] = ml.join(re * 2.0, -im)


case("conj_interleaved_tl_split_join", conj_interleaved_split_join, lambda s: ((normal(s, (512, 2)),), {}),
     lambda x: np.stack([x[:, 0] * 2, -x[:, 1]], -1))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 256,))
def rotate_interleaved_flat(x, out, *, theta: ml.constexpr = 0.7):
  """Multiply interleaved complex numbers by e^{i theta}, read and written as a flat float32 block whose even and
  odd lanes are taken by reshape(-1, 2) and put back by ml.interleave."""
  r = ml.ds(ml.program_id(0) * 256, 256)
  v = x.at[r][...].reshape(128, 2)
  re, im = v[:, 0], v[:, 1]
  c, s = math.cos(theta), math.sin(theta)
  out.at[r][...] = ml.interleave(re * c - im * s, re * s + im * c)


def _rotate_ref(x, theta=0.7):
  z = (x[0::2] + 1j * x[1::2].astype(np.float64)) * np.exp(1j * theta)
  return np.stack([z.real, z.imag], -1).ravel()


case("rotate_interleaved_flat_reshape_interleave", rotate_interleaved_flat, lambda s: ((normal(s, 1024),), {}),
     _rotate_ref)


# ---------------------------------------------------------------- spectra of (frames, bins)
@mg.mgpu_kernel(out_shape=lambda re, im: re, grid=lambda re, im: (re.shape[0] // 8,))
def power_db(re, im, out, *, amin: ml.constexpr = 1e-10, top_db: ml.constexpr = 80.0):
  """torchaudio's AmplitudeToDB of a power spectrogram: 10 * log10(max(|X|^2, amin)), each frame clamped to
  its peak minus top_db."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  a, b = re.at[r, :][...], im.at[r, :][...]
  p = a * a + b * b
  db = 10.0 * jnp.log10(jnp.maximum(p, amin))
  peak = jnp.max(db, axis=1, keepdims=True)
  out.at[r, :][...] = jnp.maximum(db, peak - top_db)


def _power_db_ref(re, im, amin=1e-10, top_db=80.0):
  db = 10.0 * np.log10(np.maximum(re * re + im * im, amin))
  return np.maximum(db, db.max(1, keepdims=True) - top_db)


def _spec_make(s, shape=(32, 256), scale=1.0):
  x = normal(s, shape) * scale
  x[:, :3] *= 1e-6          # near-silent bins, clamped by top_db
  return (x, normal(s + 1, shape) * scale), {}


case("power_spectrum_db_top_db", power_db, _spec_make, _power_db_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0] // 8,))
def phase_only(re, im, o_re, o_im, *, eps: ml.constexpr = 1e-8):
  """Spectral whitening (phase transform): X / max(|X|, eps), also Griffin-Lim's angle update."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  a, b = re.at[r, :][...], im.at[r, :][...]
  inv = 1.0 / ml.maximum(ml.sqrt(a * a + b * b), eps)
  o_re.at[r, :][...] = a * inv
  o_im.at[r, :][...] = b * inv


def _phase_only_ref(re, im, eps=1e-8):
  m = np.maximum(np.sqrt(re.astype(np.float64) ** 2 + im.astype(np.float64) ** 2), eps)
  return re / m, im / m


case("phase_transform_normalise", phase_only, lambda s: _spec_make(s), _phase_only_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda ar, ai, br, bi: (ar, ar), grid=lambda ar, ai, br, bi: (ar.shape[0] // 8,))
def spectra_product(ar, ai, br, bi, cr, ci, *, conj_b: ml.constexpr = False, scale: ml.constexpr = 1.0):
  """The pointwise step of an FFT convolution (or, with conj_b, a cross-correlation): X * H (or X * conj(H))
  of (batch, bins) spectra, H broadcast over the batch from one row, scaled by 1/N for the inverse transform."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  xr, xi = ar.at[r, :][...], ai.at[r, :][...]
  hr, hi = br[0, :][None, :], bi[0, :][None, :]
  if conj_b:
    hi = -hi
  cr.at[r, :][...] = (xr * hr - xi * hi) * scale
  ci.at[r, :][...] = (xr * hi + xi * hr) * scale


def _spectra_ref(ar, ai, br, bi, conj_b=False, scale=1.0):
  h = br[0] + 1j * bi[0].astype(np.float64)
  c = (ar + 1j * ai.astype(np.float64)) * (np.conj(h) if conj_b else h) * scale
  return c.real, c.imag


def _spectra_make(s):
  return (normal(s, (16, 128)), normal(s + 1, (16, 128)), normal(s + 2, (1, 128)), normal(s + 3, (1, 128))), {}


case("fft_conv_pointwise_product_broadcast_row", spectra_product, _spectra_make, _spectra_ref)
case("xcorr_conj_product_scaled", spectra_product,
     lambda s: (_spectra_make(s)[0], {"conj_b": True, "scale": 1 / 128}), _spectra_ref)


@mg.mgpu_kernel(out_shape=lambda mag, ph, prev, adv: (mag, mag, mag), grid=lambda mag, ph, prev, adv: (1,))
def phase_vocoder_step(mag, ph, prev, adv, o_re, o_im, o_acc, *, rate: ml.constexpr = 0.5):
  """One time step of a phase vocoder (librosa's / torchaudio's phase_vocoder): interpolate the magnitudes of two
  frames, advance the accumulated phase by the measured deviation wrapped into [-pi, pi)."""
  m0, m1 = mag[0, :], mag[1, :]
  dphi = ph[1, :] - ph[0, :] - adv[...]
  dphi = dphi - TWO_PI * ml.round(dphi / TWO_PI)
  m = (1.0 - rate) * m0 + rate * m1
  acc = prev[0, :]
  o_re[0, :] = m * ml.cos(acc)
  o_im[0, :] = m * ml.sin(acc)
  o_acc[0, :] = acc + adv[...] + dphi
  o_re[1, :] = ml.zeros_like(m0)
  o_im[1, :] = ml.zeros_like(m0)
  o_acc[1, :] = ml.zeros_like(m0)


def _pv_ref(mag, ph, prev, adv, rate=0.5):
  mag, ph, prev, adv = [np.asarray(v, np.float32) for v in (mag, ph, prev, adv)]
  dphi = ph[1] - ph[0] - adv
  dphi = dphi - np.float32(TWO_PI) * np.round(dphi / np.float32(TWO_PI))
  m = (1 - rate) * mag[0] + rate * mag[1]
  z = np.zeros_like(m)
  return (np.stack([m * np.cos(prev[0]), z]), np.stack([m * np.sin(prev[0]), z]),
          np.stack([prev[0] + adv + dphi, z]))


def _pv_make(s):
  n = 256
  adv = (np.pi * 64 * np.arange(n) / (n - 1)).astype(np.float32)
  return (np.abs(normal(s, (2, n))), rng_of(s).uniform(-np.pi, np.pi, (2, n)).astype(np.float32),
          rng_of(s + 1).uniform(-np.pi, np.pi, (2, n)).astype(np.float32), adv), {}


case("phase_vocoder_step_wrap_round", phase_vocoder_step, _pv_make, _pv_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, re), grid=lambda re, im: (re.shape[0] // 64,))
def polar_roundtrip_half(re, im, o_mag, o_ph):
  """float16 spectra read and converted to float32 for |X| and angle(X), stored back as float16 (a mixed-precision
  STFT front end)."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  a = re.at[r, :][...].astype(F32)
  b = im.at[r, :][...].astype(F32)
  o_mag.at[r, :][...] = ml.sqrt(a * a + b * b).astype(re.dtype)
  o_ph.at[r, :][...] = ml.atan2(b, a).astype(re.dtype)


def _polar_ref(re, im):
  a, b = re.astype(np.float32), im.astype(np.float32)
  return np.sqrt(a * a + b * b).astype(re.dtype), np.arctan2(b, a).astype(re.dtype)


case("polar_float16_in_float32", polar_roundtrip_half,
     lambda s: ((normal(s, (128, 64), np.float16), normal(s + 1, (128, 64), np.float16)), {}), _polar_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda re, im: S(re.shape, F32), grid=lambda re, im: (re.shape[0] // 8,))
def cmvn_log_power(re, im, out, *, eps: ml.constexpr = 1e-6):
  """Log power per bin then mean and variance normalisation along each frame's bins (a per-utterance CMVN of
  bfloat16 spectra, float32 statistics)."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  a = re.at[r, :][...].astype(F32)
  b = im.at[r, :][...].astype(F32)
  lp = ml.log(a * a + b * b + eps)
  mu = jnp.mean(lp, axis=-1, keepdims=True)
  sd = jnp.std(lp, axis=-1, keepdims=True)
  out.at[r, :][...] = (lp - mu) / (sd + 1e-5)


def _cmvn_ref(re, im, eps=1e-6):
  a, b = re.astype(np.float32), im.astype(np.float32)
  lp = np.log(a * a + b * b + np.float32(eps))
  return (lp - lp.mean(-1, keepdims=True)) / (lp.std(-1, keepdims=True) + 1e-5)


case("log_power_cmvn_bfloat16", cmvn_log_power,
     lambda s: ((normal(s, (32, 128)).astype(jnp.bfloat16), normal(s + 1, (32, 128)).astype(jnp.bfloat16)), {}),
     _cmvn_ref, 1e-4)


@mg.mgpu_kernel(out_shape=lambda re, im: re, grid=lambda re, im: (re.shape[0] // 128,))
def complex64_magnitude(re, im, out):
  """A JAX user's first try passed a complex64 array straight in (MG006, whose hint passes jnp.real(z) and
  jnp.imag(z) and rebuilds a complex result outside): written as the hint says."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  a, b = re.at[r][...], im.at[r][...]
  out.at[r][...] = ml.sqrt(a * a + b * b)


def _complex64_make(s):
  z = (normal(s, 256) + 1j * normal(s + 1, 256)).astype(np.complex64)
  return (np.asarray(jnp.real(z)), np.asarray(jnp.imag(z))), {}


case("complex64_split_as_the_hint_says", complex64_magnitude, _complex64_make, lambda re, im: np.hypot(re, im))
