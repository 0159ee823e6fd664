"""Probe 72b's corpus, its second part: FFTs as cuFFT-replacement, VkFFT-style and Triton ports write them:
radix-2 DIT butterflies in registers (JAX's style: a stage a partner gather), Stockham autosort stages through SMEM
ping-pong buffers, radix-4 butterflies, bit-reversal permutations (libdevice's brev, a bit loop, a GMEM row
scatter), twiddle tables from GMEM, computed in SMEM with sin and cos, or a constant module table; small DFTs as
matmuls on the tensor cores (DFT matrices from GMEM or computed in the kernel, real and imaginary parts as
separate dots, a real FFT's N/2 + 1 bins, an inverse with 1/N), DCT-II and its inverse as matmuls, a 2-D DFT as
two chained products. Same CASES form as probe72b_complex.py."""
import math

import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe72b_complex import S, F32, F16, BF16, normal

CASES = {}
ld = ml.extra.cuda.libdevice


def case(name, kernel, make, ref, tol=1e-5):
  CASES[name] = (kernel, make, ref, tol)


def fft_ref(re, im, inverse=False):
  z = re.astype(np.float64) + 1j * im.astype(np.float64)
  y = np.fft.ifft(z, axis=-1) if inverse else np.fft.fft(z, axis=-1)
  return y.real, y.imag


def bitrev_np(n):
  bits = int(math.log2(n))
  return np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)], np.int32)


def _pair(s, shape, dtype=np.float32):
  return (normal(s, shape, dtype), normal(s + 1, shape, dtype)), {}


# ---------------------------------------------------------------- radix-2 in registers
@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def fft_radix2_registers(re, im, o_re, o_im, *, N: ml.constexpr = 256):
  """One row a program: bit-reverse (libdevice's brev), then log2(N) radix-2 DIT stages, each a gather of the
  butterfly partner `v[i ^ half]` and twiddles cos/sin of -2 pi k / (2 half)."""
  b = ml.program_id(0)
  LOG = int(math.log2(N))
  i = ml.arange(N)
  rev = (ld.brev(i) >> (32 - LOG)) & (N - 1)
  xr = re[b, :][rev]
  xi = im[b, :][rev]
  for s in ml.static_range(LOG):
    half = 1 << s
    pos = i & (2 * half - 1)
    top = pos < half
    k = pos & (half - 1)
    ang = (-2.0 * math.pi / (2 * half)) * k.astype(F32)
    wr, wi = ml.cos(ang), ml.sin(ang)
    pr, pi_ = xr[i ^ half], xi[i ^ half]
    # top: x + w * partner; bottom: partner - w * x (w of the bottom's k, the same k)
    ar, ai = ml.where(top, xr, pr), ml.where(top, xi, pi_)
    br, bi = ml.where(top, pr, xr), ml.where(top, pi_, xi)
    tr, ti = wr * br - wi * bi, wr * bi + wi * br
    xr = ml.where(top, ar + tr, ar - tr)
    xi = ml.where(top, ai + ti, ai - ti)
  o_re[b, :] = xr
  o_im[b, :] = xi


case("fft256_radix2_register_partner_gathers", fft_radix2_registers, lambda s: _pair(s, (4, 256)), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda re, im, twr, twi: (re, im), grid=lambda re, im, twr, twi: (re.shape[0],))
def fft_stockham_smem(re, im, twr, twi, o_re, o_im, *, N: ml.constexpr = 128):
  """Stockham autosort radix-2 (no bit reversal) through two SMEM ping-pong buffers, twiddles gathered from a
  GMEM table of N/2 roots (OTFFT's fft0, iterated): a stage of length n and stride s takes a = x[q + s p],
  b = x[q + s (p + n/2)] and writes y[q + 2 s p] = a + b, y[q + s (2p + 1)] = (a - b) w^(p s), the outputs
  placed by jnp's `.at[idx].set` of a register vector."""
  b = ml.program_id(0)
  xr_s = ml.smem((N,), F32)
  xi_s = ml.smem((N,), F32)
  xr_s[...] = re[b, :]
  xi_s[...] = im[b, :]
  u = ml.arange(N // 2)
  n, s = N, 1
  while n > 1:
    m = n // 2
    p, q = u // s, u % s
    ar, ai = xr_s[q + s * p], xi_s[q + s * p]
    br, bi = xr_s[q + s * (p + m)], xi_s[q + s * (p + m)]
    wr, wi = twr[p * s], twi[p * s]
    dr, di = ar - br, ai - bi
    idx = ml.concatenate([q + s * 2 * p, q + s * (2 * p + 1)])
    yr = ml.concatenate([ar + br, dr * wr - di * wi])
    yi = ml.concatenate([ai + bi, dr * wi + di * wr])
    xr_s[...] = ml.zeros((N,), F32).at[idx].set(yr)
    xi_s[...] = ml.zeros((N,), F32).at[idx].set(yi)
    n, s = m, 2 * s
  o_re[b, :] = xr_s[...]
  o_im[b, :] = xi_s[...]


def _stockham_make(s, n=128):
  k = np.arange(n // 2)
  return (normal(s, (4, n)), normal(s + 1, (4, n)), np.cos(-2 * np.pi * k / n).astype(np.float32),
          np.sin(-2 * np.pi * k / n).astype(np.float32)), {}


case("fft128_stockham_smem_gmem_twiddles_scatter_set", fft_stockham_smem, _stockham_make,
     lambda re, im, twr, twi: fft_ref(re, im), 2e-6)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0] // 128,))
def fft8_per_thread(re, im, o_re, o_im):
  """VkFFT-style register FFT: each thread a whole 8-point FFT of one row of a (rows, 8) array, columns read as
  vectors and butterflies unrolled in Python (radix-2 DIT over bit-reversed inputs)."""
  r = ml.ds(ml.program_id(0) * 128, 128)
  rev = [0, 4, 2, 6, 1, 5, 3, 7]
  xr = [re.at[r, c][...] for c in rev]
  xi = [im.at[r, c][...] for c in rev]
  half = 1
  while half < 8:
    for start in range(0, 8, 2 * half):
      for k in range(half):
        w = -2 * math.pi * k / (2 * half)
        wr, wi = math.cos(w), math.sin(w)
        a, c = start + k, start + k + half
        tr = wr * xr[c] - wi * xi[c]
        ti = wr * xi[c] + wi * xr[c]
        xr[a], xr[c] = xr[a] + tr, xr[a] - tr
        xi[a], xi[c] = xi[a] + ti, xi[a] - ti
    half *= 2
  for c in range(8):
    o_re.at[r, c][...] = xr[c]
    o_im.at[r, c][...] = xi[c]


case("fft8_per_thread_unrolled_columns", fft8_per_thread, lambda s: _pair(s, (256, 8)), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0] // 64,))
def fft4_radix4_tile(re, im, o_re, o_im):
  """A radix-4 butterfly of (rows, 4) tiles read whole, its columns as slices `x[:, k]`, written back stacked."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  a, b = re.at[r, :][...], im.at[r, :][...]
  x0r, x1r, x2r, x3r = a[:, 0], a[:, 1], a[:, 2], a[:, 3]
  x0i, x1i, x2i, x3i = b[:, 0], b[:, 1], b[:, 2], b[:, 3]
  t0r, t0i = x0r + x2r, x0i + x2i
  t1r, t1i = x0r - x2r, x0i - x2i
  t2r, t2i = x1r + x3r, x1i + x3i
  t3r, t3i = x1i - x3i, x3r - x1r         # -j (x1 - x3)
  o_re.at[r, :][...] = jnp.stack([t0r + t2r, t1r + t3r, t0r - t2r, t1r - t3r], axis=1)
  o_im.at[r, :][...] = jnp.stack([t0i + t2i, t1i + t3i, t0i - t2i, t1i - t3i], axis=1)


case("fft4_radix4_butterfly_stack_columns", fft4_radix4_tile, lambda s: _pair(s, (256, 4)), fft_ref, 2e-6)


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def fft64_radix4_smem_twiddles(re, im, o_re, o_im):
  """A 64-point FFT as three radix-4 DIF stages in registers with twiddles computed once into SMEM by sin / cos
  and gathered from it, digit-reversed at the end (base 4) by a gather."""
  N = 64
  b = ml.program_id(0)
  tw_r = ml.smem((N,), F32)
  tw_i = ml.smem((N,), F32)
  n = ml.arange(N)
  tw_r[...] = ml.cos(-2.0 * math.pi / N * n.astype(F32))
  tw_i[...] = ml.sin(-2.0 * math.pi / N * n.astype(F32))
  xr, xi = re[b, :], im[b, :]
  span = N // 4
  while span >= 1:
    pos = n % (4 * span)
    q = pos // span                     # which of the 4 outputs this lane computes
    k = pos % span
    base = n - pos + k
    ar = [xr[base + t * span] for t in range(4)]
    ai = [xi[base + t * span] for t in range(4)]
    # y_q = sum_t x_t (-j)^(q t)
    yr = ml.zeros((N,), F32)
    yi = ml.zeros((N,), F32)
    for t in range(4):
      e = (q * t) % 4
      cr = ml.where(e == 0, ar[t], ml.where(e == 1, ai[t], ml.where(e == 2, -ar[t], -ai[t])))
      ci = ml.where(e == 0, ai[t], ml.where(e == 1, -ar[t], ml.where(e == 2, -ai[t], ar[t])))
      yr, yi = yr + cr, yi + ci
    widx = (q * k * (N // (4 * span))) % N
    wr, wi = tw_r[widx], tw_i[widx]
    xr, xi = yr * wr - yi * wi, yr * wi + yi * wr
    span //= 4
  d = ((n & 3) << 4) | (n & 12) | ((n >> 4) & 3)
  o_re[b, :] = xr[d]
  o_im[b, :] = xi[d]


case("fft64_radix4_dif_smem_twiddles_digit_reverse", fft64_radix4_smem_twiddles, lambda s: _pair(s, (4, 64)),
     fft_ref, 2e-6)


# ---------------------------------------------------------------- bit reversal
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def bitrev_rows_scatter(x, out):
  """The permutation step of an out-of-place FFT over rows of a (N, d) array: row i to row rev(i), rev built by a
  loop over the bits (CUDA's `for (b...) r = (r << 1) | (i >> b & 1)`), a GMEM row scatter."""
  LOG = int(math.log2(x.shape[0]))
  i = ml.program_id(0) * 64 + ml.arange(64)
  r = ml.zeros_like(i)
  t = i
  for _ in range(LOG):
    r = (r << 1) | (t & 1)
    t = t >> 1
  out[r, :] = x.at[ml.ds(ml.program_id(0) * 64, 64), :][...]


case("bitrev_permutation_row_scatter", bitrev_rows_scatter, lambda s: ((normal(s, (256, 32)),), {}),
     lambda x: x[bitrev_np(256)], 0)


BITREV_32 = bitrev_np(32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def bitrev_columns_module_table(x, out):
  """A bit-reversal table as a module constant (a cuFFT port's `__constant__ int rev[32]`), gathering the columns
  of (rows, 32) tiles."""
  r = ml.ds(ml.program_id(0) * 8, 8)
  out.at[r, :][...] = x.at[r, :][...][:, BITREV_32]


case("bitrev_columns_module_constant_table", bitrev_columns_module_table, lambda s: ((normal(s, (64, 32)),), {}),
     lambda x: x[:, BITREV_32], 0)


# ---------------------------------------------------------------- DFTs as matmuls
@mg.mgpu_kernel(out_shape=lambda x, c, s: (S(x.shape, F32), S(x.shape, F32)), grid=lambda x, c, s: (x.shape[0] // 64,))
def dft_matmul_gmem(x, c, s, o_re, o_im):
  """A real signal's DFT as two products with the cosine and (negated) sine matrices, float16 operands in SMEM,
  float32 accumulators (tcFFT's small-N path)."""
  i = ml.program_id(0)
  N = x.shape[1]
  x_s = ml.smem((64, N), F16)
  c_s = ml.smem((N, N), F16)
  s_s = ml.smem((N, N), F16)
  ml.copy(x.at[ml.ds(i * 64, 64), :], x_s)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  o_re.at[ml.ds(i * 64, 64), :][...] = ml.dot(x_s, c_s)
  o_im.at[ml.ds(i * 64, 64), :][...] = ml.dot(x_s, s_s)


def dft_mats(n, dtype=np.float16):
  k = np.arange(n)
  ang = -2 * np.pi * np.outer(k, k) / n
  return np.cos(ang).astype(dtype), np.sin(ang).astype(dtype)


def _dft_ref(x, c, s):
  x, c, s = (v.astype(np.float64) for v in (x, c, s))
  return x @ c, x @ s


case("dft64_matmul_gmem_matrices_f16", dft_matmul_gmem, lambda s: ((normal(s, (128, 64), np.float16),) +
     dft_mats(64), {}), _dft_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda xr, xi: (S(xr.shape, F32), S(xr.shape, F32)), grid=lambda xr, xi: (xr.shape[0] // 64,))
def cdft_matmul_in_kernel(xr, xi, o_re, o_im, *, inverse: ml.constexpr = False):
  """A complex DFT of rows of 64 as four products, the DFT matrix computed in the kernel (cos and sin of the
  index grid's products modulo N) as bfloat16 register tiles: Re = Xr C - Xi S, Im = Xr S + Xi C (S the sine
  of +-2 pi nk / N), and for the inverse a 1/N scale."""
  i = ml.program_id(0)
  N = xr.shape[1]
  n = ml.arange(N)[:, None]
  k = ml.arange(N)[None, :]
  ang = (2.0 * math.pi / N) * ((n * k) % N).astype(F32)
  sign = 1.0 if inverse else -1.0
  c = ml.cos(ang).astype(BF16)
  s = (sign * ml.sin(ang)).astype(BF16)
  a = xr.at[ml.ds(i * 64, 64), :][...].astype(BF16)
  b = xi.at[ml.ds(i * 64, 64), :][...].astype(BF16)
  re = ml.dot(a, c) - ml.dot(b, s)
  im = ml.dot(a, s) + ml.dot(b, c)
  if inverse:
    re, im = re / N, im / N
  o_re.at[ml.ds(i * 64, 64), :][...] = re
  o_im.at[ml.ds(i * 64, 64), :][...] = im


def _cdft_ref(xr, xi, inverse=False):
  q = lambda v: np.asarray(jnp.asarray(v).astype(jnp.bfloat16).astype(jnp.float32))
  return fft_ref(q(xr), q(xi), inverse)


case("cdft64_four_dots_matrix_in_kernel_bf16", cdft_matmul_in_kernel, lambda s: _pair(s, (128, 64)), _cdft_ref, 2e-2)
case("icdft64_four_dots_inverse_scaled", cdft_matmul_in_kernel,
     lambda s: (_pair(s, (128, 64))[0], {"inverse": True}), _cdft_ref, 2e-2)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[1] // 2 + 1), F32),) * 2, grid=lambda x: (x.shape[0] // 64,))
def rfft_matmul_half_bins(x, o_re, o_im):
  """A real FFT's N/2 + 1 bins (jnp.fft.rfft's) of rows of 128 as products with (N, N/2 + 1) cos / sin matrices
  computed in the kernel: 65 columns."""
  i = ml.program_id(0)
  N = x.shape[1]
  K = N // 2 + 1
  n = ml.arange(N)[:, None]
  k = ml.arange(K)[None, :]
  ang = (-2.0 * math.pi / N) * ((n * k) % N).astype(F32)
  a = x.at[ml.ds(i * 64, 64), :][...]
  o_re.at[ml.ds(i * 64, 64), :][...] = ml.dot(a, ml.cos(ang).astype(F16))
  o_im.at[ml.ds(i * 64, 64), :][...] = ml.dot(a, ml.sin(ang).astype(F16))


def _rfft_ref(x):
  y = np.fft.rfft(x.astype(np.float64), axis=-1)
  return y.real, y.imag


case("rfft128_half_bins_65_columns_f16", rfft_matmul_half_bins, lambda s: ((normal(s, (128, 128), np.float16),), {}),
     _rfft_ref, 2e-3)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (x.shape[0] // 64,))
def dct2_ortho(x, out):
  """scipy.fft.dct(x, type=2, norm='ortho') of rows of 64 as x @ C^T, C[k, n] = s_k cos(pi (n + 1/2) k / N)
  built in the kernel and held in SMEM (k, n), read transposed by the tensor cores."""
  i = ml.program_id(0)
  N = x.shape[1]
  k = ml.arange(N)[:, None].astype(F32)
  n = ml.arange(N)[None, :].astype(F32)
  scale = ml.where(k == 0, math.sqrt(1.0 / N), math.sqrt(2.0 / N))
  c_s = ml.smem((N, N), F16)
  c_s[...] = (scale * ml.cos(math.pi / N * (n + 0.5) * k)).astype(F16)
  x_s = ml.smem((64, N), F16)
  ml.copy(x.at[ml.ds(i * 64, 64), :], x_s)
  out.at[ml.ds(i * 64, 64), :][...] = ml.dot(x_s, c_s.T)


def dct_mat(n):
  k, m = np.arange(n)[:, None], np.arange(n)[None, :]
  c = np.cos(np.pi / n * (m + 0.5) * k) * np.where(k == 0, np.sqrt(1 / n), np.sqrt(2 / n))
  return c


def _dct_ref(x):
  return x.astype(np.float64) @ dct_mat(x.shape[1]).astype(np.float16).astype(np.float64).T


case("dct2_ortho_matrix_in_smem_transposed_dot", dct2_ortho, lambda s: ((normal(s, (128, 64), np.float16),), {}),
     _dct_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda y, c: S(y.shape, F32), grid=lambda y, c: (y.shape[0] // 64,))
def idct_dct3(y, c, out):
  """The inverse (DCT-III, ortho): y @ C with C from GMEM in bfloat16, jnp.dot of a register tile and a ref read."""
  i = ml.program_id(0)
  a = y.at[ml.ds(i * 64, 64), :][...]
  out.at[ml.ds(i * 64, 64), :][...] = jnp.dot(a, c[...], preferred_element_type=F32)


def _idct_ref(y, c):
  return y.astype(np.float64) @ np.asarray(c, np.float64)


case("idct_dct3_jnp_dot_bf16", idct_dct3, lambda s: ((normal(s, (128, 64)).astype(jnp.bfloat16),
     dct_mat(64).astype(jnp.bfloat16)), {}), _idct_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda x, c, s: (S(x.shape, F32), S(x.shape, F32)), grid=lambda x, c, s: (x.shape[0] // 64,))
def dft2d(x, c, s, o_re, o_im):
  """A 2-D DFT of 64 x 64 real images (one a program, stacked along rows): Y = F X F with F = C + iS; the row
  transform's two products stored as float16 into SMEM, then the column transform's four."""
  i = ml.program_id(0)
  N = 64
  c_s = ml.smem((N, N), F16)
  s_s = ml.smem((N, N), F16)
  x_s = ml.smem((N, N), F16)
  ml.copy(c, c_s)
  ml.copy(s, s_s)
  ml.copy(x.at[ml.ds(i * N, N), :], x_s)
  t_r = ml.smem((N, N), F16)
  t_i = ml.smem((N, N), F16)
  t_r[...] = ml.dot(x_s, c_s).astype(F16)          # X C
  t_i[...] = ml.dot(x_s, s_s).astype(F16)          # X S
  o_re.at[ml.ds(i * N, N), :][...] = ml.dot(c_s, t_r) - ml.dot(s_s, t_i)
  o_im.at[ml.ds(i * N, N), :][...] = ml.dot(c_s, t_i) + ml.dot(s_s, t_r)


def _dft2d_ref(x, c, s):
  out_r, out_i = [], []
  for b in range(x.shape[0] // 64):
    y = np.fft.fft2(x[b * 64:(b + 1) * 64].astype(np.float64))
    out_r.append(y.real)
    out_i.append(y.imag)
  return np.concatenate(out_r), np.concatenate(out_i)


case("dft2d_64_chained_dots_through_smem", dft2d, lambda s: ((normal(s, (128, 64), np.float16),) + dft_mats(64), {}),
     _dft2d_ref, 5e-3)


# ---------------------------------------------------------------- JAX-style FFT steps
@mg.mgpu_kernel(out_shape=lambda re, im: (re, im), grid=lambda re, im: (re.shape[0],))
def fft_reshape_stockham(re, im, o_re, o_im):
  """The reshape Stockham FFT a JAX user writes: each stage x.reshape(2, m, L) split into halves a, b, twiddled b
  (w = e^{-i pi k / L}), and jnp.stack([a + t, a - t], axis=1).reshape(N), L doubling."""
  b = ml.program_id(0)
  N = re.shape[1]
  xr, xi = re[b, :], im[b, :]
  L = 1
  while L < N:
    m = N // (2 * L)
    ar, ai = xr.reshape(2, m, L)[0], xi.reshape(2, m, L)[0]
    br, bi = xr.reshape(2, m, L)[1], xi.reshape(2, m, L)[1]
    k = ml.arange(L).astype(F32)
    wr = ml.cos(-math.pi * k / L)[None, :]
    wi = ml.sin(-math.pi * k / L)[None, :]
    tr, ti = br * wr - bi * wi, br * wi + bi * wr
    xr = jnp.stack([ar + tr, ar - tr], axis=1).reshape(N)
    xi = jnp.stack([ai + ti, ai - ti], axis=1).reshape(N)
    L *= 2
  o_re[b, :] = xr
  o_im[b, :] = xi


case("fft256_jax_reshape_stockham_stack", fft_reshape_stockham, lambda s: _pair(s, (2, 256)), fft_ref, 3e-6)


@mg.mgpu_kernel(out_shape=lambda zr, zi: (zr, zi), grid=lambda zr, zi: (zr.shape[0],))
def rfft_from_half_length(zr, zi, xr, xi):
  """A real FFT of 2M points from the M-point complex FFT Z of (even, odd) samples packed as (re, im): X[k] =
  E[k] + e^{-i pi k / M} O[k], with E, O from Z[k] and conj(Z[(M - k) % M]) (jnp.flip then jnp.roll by 1)."""
  b = ml.program_id(0)
  M = zr.shape[1]
  a_r, a_i = zr[b, :], zi[b, :]
  c_r = jnp.roll(jnp.flip(a_r), 1)
  c_i = -jnp.roll(jnp.flip(a_i), 1)
  er, ei = (a_r + c_r) * 0.5, (a_i + c_i) * 0.5
  orr, oi = (a_i - c_i) * 0.5, -(a_r - c_r) * 0.5
  k = ml.arange(M).astype(F32)
  wr, wi = ml.cos(-math.pi * k / M), ml.sin(-math.pi * k / M)
  xr[b, :] = er + orr * wr - oi * wi
  xi[b, :] = ei + orr * wi + oi * wr


def _half_make(s):
  x = normal(s, (2, 512))
  z = np.fft.fft(x[:, 0::2] + 1j * x[:, 1::2].astype(np.float64), axis=1)
  return (z.real.astype(np.float32), z.imag.astype(np.float32)), {}


def _half_ref(zr, zi):
  z = zr.astype(np.float64) + 1j * zi
  x = np.zeros((z.shape[0], 2 * z.shape[1]))
  w = np.fft.ifft(z, axis=1)
  x[:, 0::2], x[:, 1::2] = w.real, w.imag
  X = np.fft.fft(x, axis=1)[:, :z.shape[1]]
  return X.real, X.imag


case("rfft_from_half_length_complex_fft_flip_roll", rfft_from_half_length, _half_make, _half_ref, 1e-5)
