"""Probe 72b's corpus, its seventh part: Triton ports as written against `tl` (the language imported as `tl`, pointer
blocks and masks, tl.dot of register tiles, ragged K loops): torch.stft's reflect-padded centre framing, a
Stockham radix-2 stage a launch (a host loop over stages), a fused power-to-mel product over 201 bins in masked K
blocks, a multi-channel conv1d as tl.dot of an im2col tile, a Triton complex GEMV (a DFT of one frame against
twiddles from GMEM). Same CASES form as probe72b_complex.py."""
import math

import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe72b_complex import S, F32, normal, rng_of
from probe72b_fft import dft_mats, fft_ref
from probe72b_stft import hann_np, mel_fb

CASES = {}


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda x, *, N, HOP: S((x.shape[0] // HOP + 1, N), F32),
                grid=lambda x, *, N, HOP: (x.shape[0] // HOP + 1,))
def stft_center_reflect(x, out, *, N: tl.constexpr = 256, HOP: tl.constexpr = 64):
  """torch.stft(center=True, pad_mode='reflect')'s frames: frame f starts at f * HOP - N // 2, indices before the
  start reflected (-i -> i) and past the end reflected (L - 1 + j -> L - 1 - j), times a Hann window."""
  f = tl.program_id(0)
  L = x.shape[0]
  offs = tl.arange(0, N)
  idx = f * HOP - N // 2 + offs
  idx = tl.where(idx < 0, -idx, idx)
  idx = tl.where(idx >= L, 2 * (L - 1) - idx, idx)
  v = tl.load(x.at[idx])
  w = 0.5 - 0.5 * tl.cos(2.0 * math.pi * offs.to(tl.float32) / N)
  tl.store(out.at[f, offs], v * w)


def _stft_center_ref(x, N=256, HOP=64):
  p = np.pad(x, N // 2, mode="reflect")
  return np.stack([p[f * HOP:f * HOP + N] for f in range(len(x) // HOP + 1)]) * hann_np(N)


case("torch_stft_center_reflect_pad_frames", stft_center_reflect,
     lambda s: ((normal(s, 2048),), {"N": 256, "HOP": 64}), _stft_center_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda xr, xi, twr, twi, *, s: (xr, xi), grid=lambda xr, xi, twr, twi, *, s: (xr.shape[1] // 2 // 128, xr.shape[0]))
def stockham_stage(xr, xi, twr, twi, yr, yi, *, s: tl.constexpr):
  """One Stockham radix-2 stage of rows of N (stride s, a launch each, the host looping over s = 1, 2, 4, ...):
  lanes u = p s + q of N / 2, a = x[q + s p], b = x[q + s (p + N / (2 s))], y[q + 2 s p] = a + b,
  y[q + s (2 p + 1)] = (a - b) w^(p s) with the N / 2 roots read from GMEM."""
  row = tl.program_id(1)
  N = xr.shape[1]
  u = tl.program_id(0) * 128 + tl.arange(0, 128)
  m = N // (2 * s)
  p, q = u // s, u % s
  ar, ai = tl.load(xr.at[row, q + s * p]), tl.load(xi.at[row, q + s * p])
  br, bi = tl.load(xr.at[row, q + s * (p + m)]), tl.load(xi.at[row, q + s * (p + m)])
  wr, wi = tl.load(twr.at[p * s]), tl.load(twi.at[p * s])
  dr, di = ar - br, ai - bi
  tl.store(yr.at[row, q + s * 2 * p], ar + br)
  tl.store(yi.at[row, q + s * 2 * p], ai + bi)
  tl.store(yr.at[row, q + s * (2 * p + 1)], dr * wr - di * wi)
  tl.store(yi.at[row, q + s * (2 * p + 1)], dr * wi + di * wr)


class StockhamFFT:
  """The host loop of stockham_stage launches (log2 N of them), each reading the last one's output."""

  def __call__(self, xr, xi, twr, twi, interpret=False):
    s = 1
    while s < xr.shape[1]:
      xr, xi = stockham_stage(xr, xi, twr, twi, s=s, interpret=interpret)
      s *= 2
    return xr, xi

  def steps(self, xr, xi, twr, twi):
    return [(stockham_stage, (xr, xi, twr, twi), {"s": 1 << k}) for k in range(int(math.log2(xr.shape[1])))]


def _stock_make(s, n=512):
  k = np.arange(n // 2)
  return (normal(s, (4, n)), normal(s + 1, (4, n)), np.cos(-2 * np.pi * k / n).astype(np.float32),
          np.sin(-2 * np.pi * k / n).astype(np.float32)), {}


case("stockham_stage_per_launch_host_loop", StockhamFFT(), _stock_make, lambda xr, xi, a, b: fft_ref(xr, xi), 3e-6)


@mg.mgpu_kernel(out_shape=lambda re, im, fb: S((re.shape[0], fb.shape[1]), F32), grid=lambda re, im, fb: (re.shape[0] // 64,))
def power_to_mel_ragged_k(re, im, fb, out, *, BK: tl.constexpr = 64):
  """Whisper's power-to-mel as a Triton GEMM: |X|^2 of 201 bins computed a K block at a time (masked loads, zeros
  past the last bin), cast to float16, times the (201, 80) filterbank block (masked rows), accumulated by tl.dot."""
  pid = tl.program_id(0)
  rows = pid * 64 + tl.arange(0, 64)
  cols = tl.arange(0, 80)
  acc = tl.zeros((64, 80), dtype=tl.float32)
  for k in range(0, re.shape[1], BK):
    offs_k = k + tl.arange(0, BK)
    km = offs_k < re.shape[1]
    a = tl.load(re.at[rows[:, None], offs_k[None, :]], mask=km[None, :], other=0.0)
    b = tl.load(im.at[rows[:, None], offs_k[None, :]], mask=km[None, :], other=0.0)
    p = (a * a + b * b).to(tl.float16)
    w = tl.load(fb.at[offs_k[:, None], cols[None, :]], mask=km[:, None], other=0.0)
    acc += tl.dot(p, w)
  tl.store(out.at[rows[:, None], cols[None, :]], tl.log(acc + 1e-10))


def _p2m_ref(re, im, fb):
  p = (re * re + im * im).astype(np.float16).astype(np.float64)
  return np.log(p @ fb.astype(np.float64) + 1e-10)


case("power_to_mel_201_bins_masked_k_blocks", power_to_mel_ragged_k,
     lambda s: ((normal(s, (128, 201)), normal(s + 1, (128, 201)), mel_fb(201, 80).astype(np.float16)), {}),
     _p2m_ref, 2e-3)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0], x.shape[2] - w.shape[2] + 1), F32),
                grid=lambda x, w: (x.shape[0], (x.shape[2] - w.shape[2] + 1) // 64))
def conv1d_im2col(x, w, y):
  """A valid conv1d of (batch, 16 channels, time) with (64, 16, 4) weights as one tl.dot: the (64, 64) weight tile
  (c_in k flattened) times an im2col tile of the input, rows c_in * 4 + k gathered at t + k, float16 in float32."""
  b, tb = tl.program_id(0), tl.program_id(1)
  r = tl.arange(0, 64)
  ci, kk = r // 4, r % 4
  t = tb * 64 + tl.arange(0, 64)
  cols = tl.load(x.at[b, ci[:, None], t[None, :] + kk[:, None]])
  wt = tl.load(w.at[tl.arange(0, 64)[:, None], ci[None, :], kk[None, :]])
  acc = tl.dot(wt, cols)
  tl.store(y.at[b, tl.arange(0, 64)[:, None], t[None, :]], acc)


def _conv_ref(x, w):
  x, w = x.astype(np.float64), w.astype(np.float64)
  T = x.shape[2] - w.shape[2] + 1
  out = np.zeros((x.shape[0], w.shape[0], T))
  for k in range(w.shape[2]):
    out += np.einsum("oc,bct->bot", w[:, :, k], x[:, :, k:k + T])
  return out


case("conv1d_im2col_tl_dot_register_tiles", conv1d_im2col,
     lambda s: ((normal(s, (2, 16, 131), np.float16), (normal(s + 1, (64, 16, 4)) * 0.3).astype(np.float16)), {}),
     _conv_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda x, c, s: (S((x.shape[0], c.shape[1]), F32),) * 2, grid=lambda x, c, s: (x.shape[0] // 64,))
def dft_gemm_k_loop(x, c, s, o_re, o_im, *, BK: tl.constexpr = 64):
  """A Triton DFT GEMM of frames of 256 against (256, 128) cos / sin blocks (the first 128 bins), K in blocks of 64
  through tl.dot of loaded float16 tiles, two accumulators."""
  rows = tl.program_id(0) * 64 + tl.arange(0, 64)
  n = tl.arange(0, 128)
  acc_r = tl.zeros((64, 128), dtype=tl.float32)
  acc_i = tl.zeros((64, 128), dtype=tl.float32)
  for k in range(0, x.shape[1], BK):
    kk = k + tl.arange(0, BK)
    a = tl.load(x.at[rows[:, None], kk[None, :]])
    acc_r = tl.dot(a, tl.load(c.at[kk[:, None], n[None, :]]), acc_r)
    acc_i = tl.dot(a, tl.load(s.at[kk[:, None], n[None, :]]), acc_i)
  tl.store(o_re.at[rows[:, None], n[None, :]], acc_r)
  tl.store(o_im.at[rows[:, None], n[None, :]], acc_i)


def _dft_gemm_make(seed):
  c, s = dft_mats(256)
  return (normal(seed, (128, 256), np.float16), np.ascontiguousarray(c[:, :128]), np.ascontiguousarray(s[:, :128])), {}


case("dft_gemm_k_loop_two_accumulators", dft_gemm_k_loop, _dft_gemm_make,
     lambda x, c, s: (x.astype(np.float64) @ c.astype(np.float64), x.astype(np.float64) @ s.astype(np.float64)), 1e-3)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def spectral_gate(x, out, *, thresh_db: tl.constexpr = -30.0):
  """A Triton spectral gate over (frames, bins) magnitudes: bins below the frame's peak by more than thresh_db
  zeroed (10 log10 ratio by tl.log), the frame's max by tl.max along the bins."""
  rows = tl.program_id(0) * 128 + tl.arange(0, 128)
  cols = tl.arange(0, 64)
  m = tl.load(x.at[rows[:, None], cols[None, :]])
  peak = tl.max(m, axis=1)
  db = 20.0 * tl.log(m / peak[:, None] + 1e-12) / math.log(10.0)
  tl.store(out.at[rows[:, None], cols[None, :]], tl.where(db < thresh_db, 0.0, m))


def _gate_ref(x, thresh_db=-30.0):
  x32 = x.astype(np.float32)
  db = np.float32(20.0) * np.log(x32 / x32.max(1, keepdims=True) + np.float32(1e-12)) / np.float32(math.log(10.0))
  return np.where(db < thresh_db, 0.0, x32)


case("spectral_gate_peak_relative_db", spectral_gate,
     lambda s: ((np.abs(normal(s, (256, 64))) * np.exp(rng_of(s).uniform(-6, 0, (256, 64))).astype(np.float32),), {}),
     _gate_ref, 1e-6)
