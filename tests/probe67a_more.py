"""Probe 67a's corpus, part 3: a pipelined implicit GEMM gathering A, a conv's weight gradient, a median filter (a
sorting network over a list of taps), pooling with indices, adaptive pooling, histogram equalisation, tall
integral images, a 3-D box filter and a bilateral filter (tests/probe67a_kernels.py lists the cases)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from probe67a_convs import img_u8, ref_depthwise, rnd
from probe67a_images import conv1d_gemm_pipelined, ref_conv1d_dense

S = jax.ShapeDtypeStruct
F32 = jnp.float32

@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], x.shape[1] - 2, x.shape[2] - 2, w.shape[3]), F32),
                grid=lambda x, w, **k: (ml.cdiv(x.shape[0] * (x.shape[1] - 2) * (x.shape[2] - 2), 64),))
def igemm_pipelined_gather(x, w, out, *, BK: ml.constexpr):
  """Implicit GEMM, valid 3x3, K loop pipelined with stages=2: A gathered by masked loads into SMEM each trip."""
  N, H, W, CI = x.shape
  CO = w.shape[3]
  OH, OW = H - 2, W - 2
  M = N * OH * OW
  m = ml.program_id(0) * 64 + ml.arange(64)
  n, oh, ow = m // (OH * OW), m // OW % OH, m % OW
  a_s = ml.smem((64, BK), x.dtype)
  b_s = ml.smem((BK, CO), w.dtype)
  acc = ml.zeros((64, CO), jnp.float32)
  nc = CI // BK
  for s in ml.range(9 * nc, stages=2):
    tap = s // nc
    c0 = s % nc * BK
    kh, kw = tap // 3, tap % 3
    ml.copy(w.at[kh, kw, ml.ds(c0, BK), :], b_s)
    ci = c0 + ml.arange(BK)
    a_s[...] = ml.load(x.at[n[:, None], (oh + kh)[:, None], (ow + kw)[:, None], ci[None, :]], mask=(m < M)[:, None], other=0.0)
    acc = ml.dot(a_s, b_s, acc)
  ml.store(out.at[n[:, None], oh[:, None], ow[:, None], ml.arange(CO)[None, :]], acc, mask=(m < M)[:, None])

def ref_conv_valid(x, w):
  return np.asarray(jax.lax.conv_general_dilated(jnp.asarray(x, F32), jnp.asarray(w, F32), (1, 1), "VALID",
      dimension_numbers=("NHWC", "HWIO", "NHWC"), precision="highest"))

@mg.mgpu_kernel(out_shape=lambda x, dy: S((3, 3, x.shape[3], dy.shape[3]), F32), grid=(9,))
def conv_weight_grad(x, dy, dw):
  """dW[kh, kw] = sum over pixels of x(shifted)^T dy: ml.dot(a_s.T, dy_s), valid conv, one tap a program."""
  N, H, W, CI = x.shape
  OH, OW, CO = dy.shape[1], dy.shape[2], dy.shape[3]
  kh, kw = ml.program_id(0) // 3, ml.program_id(0) % 3
  a_s = ml.smem((64, CI), x.dtype)
  d_s = ml.smem((64, CO), dy.dtype)
  acc = ml.zeros((CI, CO), jnp.float32)
  M = N * OH * OW
  for p0 in range(0, M, 64):
    m = p0 + ml.arange(64)
    n, oh, ow = m // (OH * OW), m // OW % OH, m % OW
    ok = (m < M)[:, None]
    a_s[...] = ml.load(x.at[n[:, None], (oh + kh)[:, None], (ow + kw)[:, None], ml.arange(CI)[None, :]], mask=ok, other=0.0)
    d_s[...] = ml.load(dy.at[n[:, None], oh[:, None], ow[:, None], ml.arange(CO)[None, :]], mask=ok, other=0.0)
    acc = ml.dot(a_s.T, d_s, acc)
  dw[kh, kw] = acc

def ref_wgrad(x, dy):
  x = x.astype(np.float32); dy = dy.astype(np.float32)
  OH, OW = dy.shape[1], dy.shape[2]
  return np.stack([np.stack([np.einsum("nhwc,nhwd->cd", x[:, a:a + OH, b:b + OW], dy) for b in range(3)]) for a in range(3)])

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], ml.cdiv(x.shape[1], 32)))
def median3x3_u8(x, out, *, SPELL: ml.constexpr = 0):
  """3x3 median filter of uint8 images (edges replicated), by a min/max sorting network over the 9 taps."""
  b = ml.program_id(0)
  H, W = x.shape[1], x.shape[2]
  r = ml.program_id(1) * 32 + ml.arange(32)
  c = ml.arange(128)
  t = []
  for dr in (-1, 0, 1):
    for dc in (-1, 0, 1):
      rr = ml.minimum(ml.maximum(r[:, None] + dr, 0), H - 1)
      cc = ml.minimum(ml.maximum(c[None, :] + dc, 0), W - 1)
      t.append(ml.load(x.at[b, rr, cc], mask=(r[:, None] < H) & (c[None, :] < W), other=0))
  def cswap(i, j):
    return ml.minimum(t[i], t[j]), ml.maximum(t[i], t[j])
  for i in range(9):
    for j in range(8 - i):
      if SPELL == 0:
        t[j], t[j + 1] = cswap(j, j + 1)
      else:
        t[j], t[j + 1] = ml.minimum(t[j], t[j + 1]), ml.maximum(t[j], t[j + 1])
  ml.store(out.at[b, r[:, None], c[None, :]], t[4], mask=(r[:, None] < H) & (c[None, :] < W))

def ref_median(x):
  p = np.pad(x, ((0, 0), (1, 1), (1, 1)), mode="edge")
  H, W = x.shape[1:]
  st = np.stack([p[:, 1 + a:1 + a + H, 1 + b:1 + b + W] for a in (-1, 0, 1) for b in (-1, 0, 1)])
  return np.median(st, axis=0).astype(np.uint8)

@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2), x.dtype),
                                     S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2), jnp.int32)),
                grid=lambda x: (x.shape[0], x.shape[1] // 2))
def maxpool_with_indices(x, out, idx):
  """2x2 max pool of (P, H, W) planes returning the flat index (h * W + w) of each max, as torch's return_indices."""
  p, i = ml.program_id(0), ml.program_id(1)
  W = x.shape[2]
  j = ml.arange(W // 2)
  taps = [x[p, 2 * i + a, b::2] for a in (0, 1) for b in (0, 1)]
  st = jnp.stack(taps, axis=0)
  k = jnp.argmax(st, axis=0)
  out[p, i] = jnp.max(st, axis=0)
  idx[p, i] = (2 * i + k // 2) * W + 2 * j + k % 2

def ref_pool_idx(x):
  P, H, W = x.shape
  v = x.reshape(P, H // 2, 2, W // 2, 2).transpose(0, 1, 3, 2, 4).reshape(P, H // 2, W // 2, 4)
  k = v.argmax(-1)
  hh = np.arange(H // 2)[None, :, None] * 2 + k // 2
  ww = np.arange(W // 2)[None, None, :] * 2 + k % 2
  return v.max(-1), (hh * W + ww).astype(np.int32)

@mg.mgpu_kernel(out_shape=lambda x, *, O: S((x.shape[0], O, O), F32), grid=lambda x, *, O: (x.shape[0], O))
def adaptive_avgpool(x, out, *, O: ml.constexpr):
  """torch's adaptive_avg_pool2d to O x O: bins [floor(i * H / O), ceil((i + 1) * H / O)), one output row a program."""
  p, i = ml.program_id(0), ml.program_id(1)
  H, W = x.shape[1], x.shape[2]
  h0 = i * H // O
  h1 = ((i + 1) * H + O - 1) // O
  j = ml.arange(8)
  w0 = j * W // O
  w1 = ((j + 1) * W + O - 1) // O
  c = ml.arange(64)
  acc = ml.zeros((8,), jnp.float32)
  for h in range(h0, h1):
    row = ml.load(x.at[p, h, c], mask=c < W, other=0.0)
    inb = (c[None, :] >= w0[:, None]) & (c[None, :] < w1[:, None])
    acc += ml.sum(jnp.where(inb, row[None, :], 0.0), axis=1)
  cnt = ((h1 - h0) * (w1 - w0)).astype(jnp.float32)
  ml.store(out.at[p, i, j], acc / cnt, mask=j < O)

def ref_adaptive(x, O):
  P, H, W = x.shape
  out = np.zeros((P, O, O), np.float32)
  for i in range(O):
    for j in range(O):
      h0, h1 = i * H // O, -(-(i + 1) * H // O)
      w0, w1 = j * W // O, -(-(j + 1) * W // O)
      out[:, i, j] = x[:, h0:h1, w0:w1].mean(axis=(1, 2))
  return out

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.uint8), grid=lambda x: (1,))
def hist_equalize(x, out):
  """Histogram equalisation of one uint8 image (H*W = 4096): histogram in SMEM, its cumsum, the LUT gathered."""
  v = x[...].astype(jnp.int32)
  h = ml.smem((256,), jnp.int32)
  h[...] = ml.zeros((256,), jnp.int32)
  ml.atomic_add(h.at[v.reshape(-1)], 1)
  cdf = ml.cumsum(h[...])
  cmin = ml.min(jnp.where(cdf > 0, cdf, x.size))
  lut = jnp.round((cdf - cmin).astype(jnp.float32) * 255.0 / (x.size - cmin)).astype(jnp.int32)
  lut = jnp.clip(lut, 0, 255).astype(jnp.uint8)
  out[...] = lut[v]

def ref_eq(x):
  h = np.bincount(x.ravel(), minlength=256)
  cdf = h.cumsum()
  cmin = cdf[cdf > 0].min()
  lut = np.clip(np.round((cdf - cmin).astype(np.float32) * np.float32(255.0) / np.float32(x.size - cmin)), 0, 255).astype(np.uint8)
  return lut[x]

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (ml.cdiv(x.shape[1], 128),))
def integral_tall(x, out):
  """Summed-area table of a tall (H, W) image, a column block a program walking row blocks of 32, the column totals
  carried."""
  H, W = x.shape
  c = ml.program_id(0) * 128 + ml.arange(128)
  carry = ml.zeros((128,), jnp.float32)
  for r0 in range(0, H, 32):
    r = r0 + ml.arange(32)
    m = (r[:, None] < H) & (c[None, :] < W)
    v = ml.load(x.at[r[:, None], c[None, :]], mask=m, other=0.0)
    cs = ml.cumsum(v, axis=0) + carry[None, :]
    carry = cs[31]
    ml.store(out.at[r[:, None], c[None, :]], cs, mask=m)

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=(1,))
def integral_rowscan_then_cols(x, out):
  """Two passes through SMEM: row cumsums stored, then column cumsums of the stored tile."""
  t = ml.smem(x.shape, jnp.float32)
  t[...] = ml.cumsum(x[...].astype(jnp.float32), axis=1)
  out[...] = ml.cumsum(t[...], axis=0)

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] - 2, x.shape[2] - 2, x.shape[3] - 2, x.shape[4]), F32),
                grid=lambda x: (x.shape[0] * (x.shape[1] - 2), x.shape[2] - 2))
def box3d_ndhwc(x, out):
  """3x3x3 box filter of NDHWC video (valid), one output row of pixels x channels a program."""
  D, W, C = x.shape[1], x.shape[3], x.shape[4]
  n, d = ml.program_id(0) // (D - 2), ml.program_id(0) % (D - 2)
  h = ml.program_id(1)
  w = ml.arange(16)
  c = ml.arange(C)
  acc = ml.zeros((16, C), jnp.float32)
  for a in range(3):
    for b in range(3):
      for e in range(3):
        acc += ml.load(x.at[n, d + a, h + b, (w + e)[:, None], c[None, :]], mask=(w < W - 2)[:, None], other=0.0)
  ml.store(out.at[n, d, h, w[:, None], c[None, :]], acc / 27.0, mask=(w < W - 2)[:, None])

def ref_box3d(x):
  D, H, W = x.shape[1] - 2, x.shape[2] - 2, x.shape[3] - 2
  return sum(x[:, a:a + D, b:b + H, e:e + W] for a in range(3) for b in range(3) for e in range(3)) / 27.0

@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (x.shape[0],))
def bilateral_row(x, out, *, R: ml.constexpr = 2, SS: ml.constexpr = 2.0, SR: ml.constexpr = 0.2):
  """1-D bilateral filter along rows of (B, L) signals (L <= 256): weights exp(-d^2/2ss^2 - (x_j - x_i)^2/2sr^2)."""
  b = ml.program_id(0)
  L = x.shape[1]
  t = ml.arange(256)
  xi = ml.load(x.at[b, t], mask=t < L, other=0.0)
  num = ml.zeros((256,), jnp.float32)
  den = ml.zeros((256,), jnp.float32)
  for d in range(-R, R + 1):
    tt = t + d
    ok = (tt >= 0) & (tt < L)
    xj = ml.load(x.at[b, tt], mask=ok, other=0.0)
    wgt = jnp.where(ok, jnp.exp(-(d * d) / (2 * SS * SS) - (xj - xi) ** 2 / (2 * SR * SR)), 0.0)
    num += wgt * xj
    den += wgt
  ml.store(out.at[b, t], num / den, mask=t < L)

def ref_bilateral(x, R=2, SS=2.0, SR=0.2):
  B, L = x.shape
  p = np.pad(x, ((0, 0), (R, R)))
  ok = np.pad(np.ones_like(x), ((0, 0), (R, R)))
  num = 0; den = 0
  for d in range(-R, R + 1):
    xj = p[:, R + d:R + d + L]; o = ok[:, R + d:R + d + L]
    w = o * np.exp(-(d * d) / (2 * SS * SS) - (xj - x) ** 2 / (2 * SR * SR))
    num = num + w * xj; den = den + w
  return num / den


@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], x.shape[1], w.shape[2]), F32),
                grid=lambda x, w, **k: (x.shape[0], ml.cdiv(x.shape[1], 64)))
def conv1d_sliding(x, w, out, *, REGS: ml.constexpr):
  """Dense causal 1-D conv: one (64 + 8, CI) window of x loaded once (from t0 - 8, zeros before the start), each tap's
  A its rows 5 + k..: as the SMEM view x_s.at[ml.ds(5 + k, 64)], MG204 (ml.dot reads whole 8-row tiles), whose hint
  writes the rows read into registers (REGS, a register A) or a TMA copy a tap (conv1d_tap_copies)."""
  b, t0 = ml.program_id(0), ml.program_id(1) * 64
  KT, CI, CO = w.shape
  x_s = ml.smem((72, CI), x.dtype)
  w_s = ml.smem((CI, CO), w.dtype)
  ml.copy(x.at[b, ml.ds(t0 - 8, 72), :], x_s)
  acc = ml.zeros((64, CO), jnp.float32)
  for k in range(KT):
    ml.copy(w.at[k], w_s)
    a = x_s[ml.ds(8 - (KT - 1) + k, 64), :] if REGS else x_s.at[ml.ds(8 - (KT - 1) + k, 64), :]
    acc = ml.dot(a, w_s, acc)
  out[b, ml.ds(t0, 64), :] = acc


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1], w.shape[2]), F32),
                grid=lambda x, w: (x.shape[0], ml.cdiv(x.shape[1], 64)))
def conv1d_tap_copies(x, w, out):
  """The hint's second form: each tap's rows copied by TMA from GMEM at their own start."""
  b, t0 = ml.program_id(0), ml.program_id(1) * 64
  KT, CI, CO = w.shape
  a_s = ml.smem((64, CI), x.dtype)
  w_s = ml.smem((CI, CO), w.dtype)
  acc = ml.zeros((64, CO), jnp.float32)
  for k in range(KT):
    ml.copy(x.at[b, ml.ds(t0 - (KT - 1) + k, 64), :], a_s)
    ml.copy(w.at[k], w_s)
    acc = ml.dot(a_s, w_s, acc)
  out.at[b, ml.ds(t0, 64), :].store(acc, mask=(t0 + ml.arange(64))[:, None] < out.shape[1])   # (MG203's hint)


def ref_causal_dense(x, w):
  KT = w.shape[0]
  y = jax.lax.conv_general_dilated(jnp.asarray(x, F32), jnp.asarray(w, F32), (1,), [(KT - 1, 0)],
                                   dimension_numbers=("NWC", "WIO", "NWC"), precision="highest")
  return np.asarray(y)


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape, jnp.uint8), grid=lambda x, w: (mg.num_sms(),))
def persistent_depthwise_u8(x, w, out):
  """A persistent grid walking (image, row) items: 3x3 depthwise conv of uint8 NHWC, float math, stored to uint8 by
  ml.store's conversion (truncation toward zero after a clip)."""
  N, H, W, C = x.shape
  c = ml.arange(C)
  ow = ml.arange(32)
  for item in range(ml.program_id(0), N * H, ml.num_programs(0)):
    n, oh = item // H, item % H
    acc = ml.zeros((32, C), jnp.float32)
    for kh in range(3):
      for kw in range(3):
        ih = oh + kh - 1
        iw = ow + kw - 1
        m = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        acc += ml.load(x.at[n, ih, iw[:, None], c[None, :]], mask=m[:, None], other=0).astype(jnp.float32) * \
            w[kh, kw].astype(jnp.float32)[None, :]
    ml.store(out.at[n, oh, ow[:, None], c[None, :]], jnp.clip(acc, 0.0, 255.0), mask=(ow < W)[:, None])

def ref_dw_u8(x, w):
  y = ref_depthwise(x.astype(np.float32), w, 3, 1, 1)
  return np.clip(y, 0, 255).astype(np.uint8)


def _c(name, k, inputs, kw, ref, tol=1e-4):
  return (name, k, inputs, kw, ref, tol)


CASES = [
    _c("igemm_pipelined_gather_f16", igemm_pipelined_gather,
       lambda s: (rnd((2, 10, 12, 64), s, np.float16), rnd((3, 3, 64, 64), s + 1, np.float16)), dict(BK=32),
       ref_conv_valid, 3e-2),
    _c("conv_weight_grad_f16", conv_weight_grad,
       lambda s: (rnd((2, 10, 10, 64), s, np.float16), rnd((2, 8, 8, 64), s + 1, np.float16)), {}, ref_wgrad, 5e-2),
    _c("median3x3_u8_helper", median3x3_u8, lambda s: (img_u8((2, 40, 100), s),), dict(SPELL=0), ref_median, 0),
    _c("median3x3_u8_inline", median3x3_u8, lambda s: (img_u8((2, 40, 100), s),), dict(SPELL=1), ref_median, 0),
    _c("maxpool_with_indices", maxpool_with_indices, lambda s: (rnd((3, 8, 64), s),), {}, ref_pool_idx, 0),
    _c("adaptive_avgpool_7", adaptive_avgpool, lambda s: (rnd((2, 23, 37), s),), dict(O=7),
       lambda x: ref_adaptive(x, 7), 1e-5),
    _c("hist_equalize_u8", hist_equalize, lambda s: (img_u8((64, 64), s),), {}, ref_eq, 0),
    _c("column_cumsum_tall_carried", integral_tall, lambda s: (rnd((100, 200), s),), {}, lambda x: x.cumsum(0), 1e-3),
    _c("integral_two_passes_smem_u8", integral_rowscan_then_cols, lambda s: (img_u8((64, 128), s),), {},
       lambda x: x.astype(np.float32).cumsum(1).cumsum(0), 1e-3),
    _c("box3d_ndhwc", box3d_ndhwc, lambda s: (rnd((1, 5, 6, 15, 16), s),), {}, ref_box3d, 1e-5),
    _c("bilateral_row", bilateral_row, lambda s: (rnd((3, 200), s),), {}, ref_bilateral, 1e-4),
    _c("conv1d_causal_register_taps_f16", conv1d_sliding,
       lambda s: (rnd((2, 128, 64), s, np.float16), rnd((4, 64, 64), s + 1, np.float16)), dict(REGS=True),
       ref_causal_dense, 3e-2),
    _c("conv1d_causal_tap_copies_bf16", conv1d_tap_copies,
       lambda s: (rnd((2, 100, 64), s).astype(jnp.bfloat16), rnd((4, 64, 64), s + 1).astype(jnp.bfloat16)), {},
       ref_causal_dense, 5e-2),
    _c("conv1d_pipelined_warp_specialized", conv1d_gemm_pipelined,
       lambda s: (rnd((2, 200, 64), s, np.float16), rnd((3, 64, 64), s + 1, np.float16)),
       dict(BM=64, BK=32, STAGES=3, WS=True), ref_conv1d_dense, 3e-2),
    _c("conv1d_pipelined_two_warpgroups", conv1d_gemm_pipelined,
       lambda s: (rnd((2, 300, 64), s, np.float16), rnd((3, 64, 128), s + 1, np.float16)),
       dict(BM=128, BK=64, STAGES=2, WS=False), ref_conv1d_dense, 3e-2),
    _c("persistent_depthwise_u8", persistent_depthwise_u8,
       lambda s: (img_u8((2, 7, 29, 16), s), (rnd((3, 3, 16), s + 1) * 0.2).astype(np.float32)), {}, ref_dw_u8, 1),
]
