"""Probe 72b's corpus, its fourth part: STFT front ends as torchaudio, librosa-on-GPU and Triton ports write them:
framing with a hop (gathers, TMA windows), Hann / Hamming windows computed in the kernel, a windowed frame's DFT
on the tensor cores and its power spectrum, overlap-add by atomics and by gathering the frames that cover a block,
window-sum normalisation (ISTFT), mel filterbanks as matmuls and log-mel with dB clamps, spectral centroid and
flux, an FFT convolution pipeline of three launches (forward DFT, pointwise complex product, inverse), float16 and
bfloat16 inputs with float32 accumulation. Same CASES form as probe72b_complex.py."""
import math

import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72b_complex import S, F32, F16, BF16, normal
from probe72b_fft import dft_mats

CASES = {}


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


def hann_np(n):
  return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(n) / n)       # periodic (torch.hann_window's default)


def frames_np(x, n, hop):
  f = (len(x) - n) // hop + 1
  return np.stack([x[i * hop:i * hop + n] for i in range(f)])


# ---------------------------------------------------------------- framing and windows
@mg.mgpu_kernel(out_shape=lambda x, *, N, HOP: S(((x.shape[0] - N) // HOP + 1, N), F32),
                grid=lambda x, *, N, HOP: (((x.shape[0] - N) // HOP + 1) // 8,))
def frame_hann(x, out, *, N: ml.constexpr = 256, HOP: ml.constexpr = 64):
  """Frames of N with hop HOP times a periodic Hann window computed in the kernel (torch.stft's framing), a pointer
  grid `x.at[f[:, None] * HOP + n[None, :]]` of 8 frames a program."""
  f = ml.program_id(0) * 8 + ml.arange(8)
  n = ml.arange(N)
  win = 0.5 - 0.5 * ml.cos(2.0 * math.pi * n.astype(F32) / N)
  v = ml.load(x.at[f[:, None] * HOP + n[None, :]])
  out.at[ml.ds(ml.program_id(0) * 8, 8), :][...] = v * win[None, :]


case("stft_frames_hann_pointer_grid", frame_hann, lambda s: ((normal(s, 256 + 64 * 31),), {"N": 256, "HOP": 64}),
     lambda x, N, HOP: frames_np(x, N, HOP) * hann_np(N), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], (x.shape[1] - 128) // 32 + 1, 128), F32),
                grid=lambda x: (x.shape[0], ((x.shape[1] - 128) // 32 + 1)))
def frame_hamming_tma(x, out):
  """A frame a program staged by TMA from its hop offset (`x.at[b, ml.ds(f * 32, 128)]`), a symmetric Hamming
  window (jnp.hamming's) applied in registers."""
  b, f = ml.program_id(0), ml.program_id(1)
  buf = ml.smem((128,), F32)
  ml.copy(x.at[b, ml.ds(f * 32, 128)], buf)
  out[b, f, :] = buf[...] * jnp.hamming(128)


case("stft_frame_tma_hop_jnp_hamming", frame_hamming_tma, lambda s: ((normal(s, (2, 128 + 32 * 15)),), {}),
     lambda x: np.stack([frames_np(r, 128, 32) for r in x]) * np.hamming(128), 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, c, s: S(((x.shape[0] - 64) // 16 + 1, 64), F32),
                grid=lambda x, c, s: (((x.shape[0] - 64) // 16 + 1) // 64,))
def stft_power(x, c, s, pw):
  """A magnitude spectrogram: 64 frames of 64 (hop 16) a program gathered, Hann-windowed, cast to float16 and
  multiplied by the cos / sin DFT matrices on the tensor cores, the power re^2 + im^2 in float32."""
  f = ml.program_id(0) * 64 + ml.arange(64)
  n = ml.arange(64)
  win = 0.5 - 0.5 * ml.cos(2.0 * math.pi / 64 * n.astype(F32))
  fr = (ml.load(x.at[f[:, None] * 16 + n[None, :]]) * win[None, :]).astype(F16)
  c_s = ml.smem((64, 64), F16)
  s_s = ml.smem((64, 64), F16)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  re = ml.dot(fr, c_s)
  im = ml.dot(fr, s_s)
  pw.at[ml.ds(ml.program_id(0) * 64, 64), :][...] = re * re + im * im


def _stft_power_ref(x, c, s):
  fr = (frames_np(x, 64, 16) * hann_np(64)).astype(np.float16).astype(np.float64)
  re, im = fr @ c.astype(np.float64), fr @ s.astype(np.float64)
  return re * re + im * im


case("stft_power_dft_on_tensor_cores", stft_power, lambda s: ((normal(s, 64 + 16 * 127),) + dft_mats(64), {}),
     _stft_power_ref, 2e-3)


# ---------------------------------------------------------------- overlap-add
@mg.mgpu_kernel(out_shape=lambda fr, z: z, grid=lambda fr, z: (fr.shape[0],), input_output_aliases={1: 0})
def ola_atomic(fr, zeros, y, *, HOP: ml.constexpr = 64):
  """Overlap-add of windowed frames (ISTFT's synthesis): each frame a program, added into the aliased zeroed
  output at f * HOP by ml.atomic_add over a window."""
  f = ml.program_id(0)
  N = fr.shape[1]
  win = 0.5 - 0.5 * ml.cos(2.0 * math.pi / N * ml.arange(N).astype(F32))
  ml.atomic_add(y.at[ml.ds(f * HOP, N)], fr[f, :] * win)


def _ola_ref(fr, z, HOP=64):
  y = np.zeros(len(z))
  w = hann_np(fr.shape[1])
  for i, r in enumerate(fr):
    y[i * HOP:i * HOP + fr.shape[1]] += r * w
  return y


case("overlap_add_atomic_windows", ola_atomic, lambda s: ((normal(s, (16, 256)), np.zeros(256 + 64 * 15, np.float32)),
     {}), _ola_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda fr: S(((fr.shape[0] - 1) * 64 + 256,), F32),
                grid=lambda fr: (((fr.shape[0] - 1) * 64 + 256) // 64,))
def ola_gather_normalised(fr, y):
  """ISTFT's overlap-add without atomics: output block j of HOP samples sums the 4 frames covering it (frame
  j - q at offset q * HOP, those that exist), divided by the sum of squared windows (the NOLA normaliser) where it
  is not tiny."""
  j = ml.program_id(0)
  t = ml.arange(64)
  N = 256
  acc = ml.zeros((64,), F32)
  wsum = ml.zeros((64,), F32)
  for q in range(4):
    fi = j - q
    n = q * 64 + t
    w = 0.5 - 0.5 * ml.cos(2.0 * math.pi / N * n.astype(F32))
    ok = (fi >= 0) & (fi < fr.shape[0])
    v = ml.load(fr.at[fi, n], mask=ok & (n < N), other=0.0)
    acc += v * w
    wsum += ml.where(ok, w * w, 0.0)
  y.at[ml.ds(j * 64, 64)][...] = ml.where(wsum > 1e-8, acc / wsum, acc)


def _ola_norm_ref(fr):
  n = (fr.shape[0] - 1) * 64 + 256
  y, ws = np.zeros(n), np.zeros(n)
  w = hann_np(256)
  for i, r in enumerate(fr):
    y[i * 64:i * 64 + 256] += r * w
    ws[i * 64:i * 64 + 256] += w * w
  return np.where(ws > 1e-8, y / np.where(ws > 1e-8, ws, 1), y)


case("istft_overlap_add_gather_nola_normalised", ola_gather_normalised, lambda s: ((normal(s, (12, 256)),), {}),
     _ola_norm_ref, 1e-5)


# ---------------------------------------------------------------- mel
def mel_fb(n_freqs, n_mels, sr=16000):
  """torchaudio.functional.melscale_fbanks (htk), (n_freqs, n_mels)."""
  hz = lambda m: 700.0 * (10 ** (m / 2595.0) - 1)
  mel = lambda f: 2595.0 * np.log10(1 + f / 700.0)
  all_f = np.linspace(0, sr / 2, n_freqs)
  pts = hz(np.linspace(mel(0), mel(sr / 2), n_mels + 2))
  d = np.diff(pts)
  slopes = pts[None, :] - all_f[:, None]
  down = -slopes[:, :-2] / d[:-1]
  up = slopes[:, 2:] / d[1:]
  return np.maximum(0, np.minimum(down, up)).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda p, fb: S((p.shape[0], fb.shape[1]), F32), grid=lambda p, fb: (p.shape[0] // 64,))
def log_mel(p, fb, out, *, eps: ml.constexpr = 1e-6):
  """log(power @ mel_fb + eps) of a bfloat16 power spectrogram (frames, 128 bins) and a (128, 64) filterbank, both
  staged by TMA, the product on the tensor cores in float32."""
  i = ml.program_id(0)
  p_s = ml.smem((64, p.shape[1]), BF16)
  fb_s = ml.smem(fb.shape, BF16)
  ml.copy(p.at[ml.ds(i * 64, 64), :], p_s)
  ml.copy(fb, fb_s)
  out.at[ml.ds(i * 64, 64), :][...] = ml.log(ml.dot(p_s, fb_s) + eps)


def _log_mel_ref(p, fb, eps=1e-6):
  return np.log(np.asarray(p, np.float64) @ np.asarray(fb, np.float64) + eps)


case("log_mel_bf16_matmul", log_mel, lambda s: ((np.abs(normal(s, (128, 128))).astype(jnp.bfloat16),
     mel_fb(128, 64).astype(jnp.bfloat16)), {}), _log_mel_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda re, im, fb: S((re.shape[0], fb.shape[1]), F32),
                grid=lambda re, im, fb: (re.shape[0] // 64,))
def mel_db_from_complex(re, im, fb, out, *, top_db: ml.constexpr = 80.0):
  """Whisper's log-mel: |X|^2 of float32 (re, im) computed in registers, cast to float16 for the filterbank product
  (jnp.dot of a register tile and the (129 bins, 80 mels) filterbank read), log10 with a 1e-10 floor, then the
  frame block's max - 8 floor and (x + 4) / 4 (here per block of frames)."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  a, b = re.at[r, :][...], im.at[r, :][...]
  mag = (a * a + b * b).astype(F16)
  mel = jnp.dot(mag, fb[...], preferred_element_type=F32)
  lm = jnp.log10(jnp.maximum(mel, 1e-10))
  lm = jnp.maximum(lm, jnp.max(lm) - 8.0)
  out.at[r, :][...] = (lm + 4.0) / 4.0


def _whisper_ref(re, im, fb):
  mag = (re * re + im * im).astype(np.float16).astype(np.float64)
  mel = mag @ fb.astype(np.float64)
  lm = np.log10(np.maximum(mel, 1e-10))
  out = []
  for i in range(0, len(lm), 64):
    blk = lm[i:i + 64]
    out.append((np.maximum(blk, blk.max() - 8.0) + 4) / 4)
  return np.concatenate(out)


case("whisper_log_mel_129_bins_80_mels", mel_db_from_complex,
     lambda s: ((normal(s, (128, 129)), normal(s + 1, (128, 129)), mel_fb(129, 80).astype(np.float16)), {}),
     _whisper_ref, 2e-3)


@mg.mgpu_kernel(out_shape=lambda p: (S(p.shape[:1], F32), S(p.shape[:1], F32)), grid=lambda p: (p.shape[0] // 8,))
def centroid_flux(p, cen, flux, *, sr: ml.constexpr = 16000.0):
  """Spectral centroid (sum f S / sum S, bin frequencies in the kernel) and spectral flux (the L2 norm of the
  positive change from the previous frame, 0 for the first), per frame."""
  i = ml.program_id(0)
  r = ml.ds(i * 8, 8)
  s = p.at[r, :][...]
  nb = p.shape[1]
  freqs = ml.arange(nb).astype(F32) * (sr / 2 / (nb - 1))
  cen.at[r][...] = jnp.sum(s * freqs[None, :], axis=1) / (jnp.sum(s, axis=1) + 1e-10)
  prev_rows = i * 8 + ml.arange(8)[:, None] - 1
  prev = ml.load(p.at[prev_rows, ml.arange(nb)[None, :]], mask=prev_rows >= 0, other=0.0)
  d = jnp.maximum(s - prev, 0.0)
  flux.at[r][...] = jnp.where(i * 8 + ml.arange(8) > 0, jnp.sqrt(jnp.sum(d * d, axis=1)), 0.0)


def _cf_ref(p, sr=16000.0):
  nb = p.shape[1]
  f = np.arange(nb) * (sr / 2 / (nb - 1))
  cen = (p * f).sum(1) / (p.sum(1) + 1e-10)
  d = np.maximum(p - np.pad(p, ((1, 0), (0, 0)))[:-1], 0)
  fl = np.sqrt((d * d).sum(1))
  fl[0] = 0
  return cen, fl


case("spectral_centroid_and_flux", centroid_flux, lambda s: ((np.abs(normal(s, (32, 128))),), {}), _cf_ref, 1e-5)


# ---------------------------------------------------------------- an FFT convolution pipeline
@mg.mgpu_kernel(out_shape=lambda x, c, s: (S(x.shape, F32),) * 2, grid=lambda x, c, s: (x.shape[0] // 64,))
def fwd_dft(x, c, s, xr, xi):
  i = ml.program_id(0)
  a = ml.smem((64, 64), F16)
  c_s, s_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(x.at[ml.ds(i * 64, 64), :], a)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  xr.at[ml.ds(i * 64, 64), :][...] = ml.dot(a, c_s)
  xi.at[ml.ds(i * 64, 64), :][...] = ml.dot(a, s_s)


@mg.mgpu_kernel(out_shape=lambda xr, xi, hr, hi: (S(xr.shape, F16),) * 2, grid=lambda xr, xi, hr, hi: (xr.shape[0] // 64,))
def spectral_mul(xr, xi, hr, hi, yr, yi):
  r = ml.ds(ml.program_id(0) * 64, 64)
  a, b = xr.at[r, :][...], xi.at[r, :][...]
  c, d = hr[...][None, :], hi[...][None, :]
  yr.at[r, :][...] = ((a * c - b * d) / 64).astype(F16)
  yi.at[r, :][...] = ((a * d + b * c) / 64).astype(F16)


@mg.mgpu_kernel(out_shape=lambda yr, yi, c, s: S(yr.shape, F32), grid=lambda yr, yi, c, s: (yr.shape[0] // 64,))
def inv_dft_real(yr, yi, c, s, y):
  """Re(ifft) * N = Yr C - Yi (-S) with S the forward sine: y = Yr C + Yi S (the 1/N already applied)."""
  i = ml.program_id(0)
  a, b = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  c_s, s_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  ml.copy(yr.at[ml.ds(i * 64, 64), :], a)
  ml.copy(yi.at[ml.ds(i * 64, 64), :], b)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  y.at[ml.ds(i * 64, 64), :][...] = ml.dot(a, c_s, ml.dot(b, s_s))


class FftConv:
  """Circular convolution of rows of 64 with one filter through three launches (a host pipeline)."""

  def __call__(self, x, h, c, s, interpret=False):
    hr, hi = (np.asarray(v)[0] for v in fwd_dft(np.pad(h, ((0, 63), (0, 0))).astype(np.float16), c, s,
                                                interpret=interpret))
    xr, xi = fwd_dft(x, c, s, interpret=interpret)
    yr, yi = spectral_mul(xr, xi, hr, hi, interpret=interpret)
    return inv_dft_real(yr, yi, c, s, interpret=interpret)

  def steps(self, x, h, c, s):
    f = S((128, 64), F32)
    return [(fwd_dft, (x, c, s), {}), (spectral_mul, (f, f, S((64,), F32), S((64,), F32)), {}),
            (inv_dft_real, (S((128, 64), F16), S((128, 64), F16), c, s), {})]


def _fftconv_ref(x, h, c, s):
  X = np.fft.fft(x.astype(np.float64), axis=1)
  H = np.fft.fft(h[0].astype(np.float64))
  return np.fft.ifft(X * H[None, :], axis=1).real


case("fft_convolution_three_launch_pipeline", FftConv(), lambda s: ((normal(s, (128, 64), np.float16),
     (normal(s + 1, (1, 64)) * 0.2).astype(np.float16)) + dft_mats(64), {}), _fftconv_ref, 5e-3)
