"""Probe 67a's corpus, part 1: 1-D, depthwise, implicit-GEMM and 1x1 convolutions, pooling, resizes and transposed
convs as people port them from Triton / CUDA (tests/probe67a_kernels.py lists the cases)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def img_u8(shape, seed):
  return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


# ---------------------------------------------------------------- 1-D convolutions (Mamba's causal_conv1d)

@mg.mgpu_kernel(out_shape=lambda x, w, *a, **k: S(x.shape, x.dtype),
                grid=lambda x, *a, BD, BL, **k: (x.shape[0], ml.cdiv(x.shape[1], BD), ml.cdiv(x.shape[2], BL)))
def causal_conv1d(x, w, out, *, BD: ml.constexpr, BL: ml.constexpr, WIDTH: ml.constexpr, SILU: ml.constexpr):
  """x (B, D, L), w (D, WIDTH): out[b, d, t] = sum_k w[d, k] x[b, d, t - WIDTH + 1 + k]."""
  b = ml.program_id(0)
  d = ml.program_id(1) * BD + ml.arange(BD)
  t = ml.program_id(2) * BL + ml.arange(BL)
  D, L = x.shape[1], x.shape[2]
  acc = ml.zeros((BD, BL), jnp.float32)
  for k in ml.static_range(WIDTH):
    tt = t - (WIDTH - 1) + k
    xv = ml.load(x.at[b, d[:, None], tt[None, :]], mask=(d[:, None] < D) & (tt[None, :] >= 0) & (tt[None, :] < L),
                 other=0.0)
    wk = ml.load(w.at[d, k], mask=d < D, other=0.0)
    acc += xv.astype(jnp.float32) * wk.astype(jnp.float32)[:, None]
  if SILU:
    acc = acc * jax.nn.sigmoid(acc)
  ml.store(out.at[b, d[:, None], t[None, :]], acc.astype(out.dtype), mask=(d[:, None] < D) & (t[None, :] < L))


@mg.mgpu_kernel(out_shape=lambda x, w, bias, **k: S(x.shape, x.dtype),
                grid=lambda x, *a, BD, BL, **k: (x.shape[0], ml.cdiv(x.shape[1], BD), ml.cdiv(x.shape[2], BL)))
def causal_conv1d_bias(x, w, bias, out, *, BD: ml.constexpr, BL: ml.constexpr, SILU: ml.constexpr):
  b = ml.program_id(0)
  d = ml.program_id(1) * BD + ml.arange(BD)
  t = ml.program_id(2) * BL + ml.arange(BL)
  D, L = x.shape[1], x.shape[2]
  dm = d < D
  acc = ml.load(bias.at[d], mask=dm, other=0.0).astype(jnp.float32)[:, None] + ml.zeros((BD, BL), jnp.float32)
  for k in range(w.shape[1]):
    tt = t - (w.shape[1] - 1) + k
    xv = ml.load(x.at[b, d[:, None], tt[None, :]], mask=dm[:, None] & (tt[None, :] >= 0) & (tt[None, :] < L),
                 other=0.0)
    acc += xv.astype(jnp.float32) * ml.load(w.at[d, k], mask=dm, other=0.0).astype(jnp.float32)[:, None]
  if SILU:
    acc = jax.nn.silu(acc)
  ml.store(out.at[b, d[:, None], t[None, :]], acc, mask=dm[:, None] & (t[None, :] < L))


@mg.mgpu_kernel(out_shape=lambda x, w, **k: S(x.shape, x.dtype),
                grid=lambda x, w, *, BL, BD: (x.shape[0], ml.cdiv(x.shape[1], BL), ml.cdiv(x.shape[2], BD)))
def causal_conv1d_channel_last(x, w, out, *, BL: ml.constexpr, BD: ml.constexpr):
  """x (B, L, D) channel-last, w (WIDTH, D); SiLU."""
  b = ml.program_id(0)
  t = ml.program_id(1) * BL + ml.arange(BL)
  d = ml.program_id(2) * BD + ml.arange(BD)
  L, D = x.shape[1], x.shape[2]
  W = w.shape[0]
  acc = ml.zeros((BL, BD), jnp.float32)
  for k in range(W):
    tt = t + k - (W - 1)
    m = (tt[:, None] >= 0) & (tt[:, None] < L) & (d[None, :] < D)
    acc += ml.load(x.at[b, tt[:, None], d[None, :]], mask=m, other=0.0).astype(jnp.float32) * \
        ml.load(w.at[k, d], mask=d < D, other=0.0).astype(jnp.float32)[None, :]
  acc = jax.nn.silu(acc)
  ml.store(out.at[b, t[:, None], d[None, :]], acc.astype(out.dtype), mask=(t[:, None] < L) & (d[None, :] < D))


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape, F32), grid=lambda x, w: (x.shape[0],))
def conv1d_same_rows(x, w, out):
  """x (B, L) float16, w (3,) float32: 'same' conv (cross-correlation) along L, one row a program; L odd."""
  b = ml.program_id(0)
  L = x.shape[1]
  t = ml.arange(256)
  acc = ml.zeros((256,), jnp.float32)
  for k in range(3):
    tt = t + k - 1
    acc += ml.load(x.at[b, tt], mask=(tt >= 0) & (tt < L), other=0.0).astype(jnp.float32) * w[k]
  ml.store(out.at[b, t], acc, mask=t < L)


def ref_causal(x, w, bias=None, silu=False, channel_last=False):
  x32 = np.asarray(x, np.float32)
  if channel_last:
    x32 = x32.transpose(0, 2, 1)
    w = np.asarray(w).T
  W = w.shape[1]
  L = x32.shape[2]
  xp = np.pad(x32, ((0, 0), (0, 0), (W - 1, 0)))
  y = sum(xp[:, :, k:k + L] * np.asarray(w, np.float32)[None, :, k, None] for k in range(W))
  if bias is not None:
    y = y + np.asarray(bias, np.float32)[None, :, None]
  if silu:
    y = y / (1 + np.exp(-y))
  if channel_last:
    y = y.transpose(0, 2, 1)
  return y


# ---------------------------------------------------------------- 2-D depthwise convolutions

@mg.mgpu_kernel(out_shape=lambda x, w, *, K, STRIDE, PAD, BW, BC: S(
    (x.shape[0], (x.shape[1] + 2 * PAD - K) // STRIDE + 1, (x.shape[2] + 2 * PAD - K) // STRIDE + 1, x.shape[3]),
    x.dtype),
    grid=lambda x, w, *, K, STRIDE, PAD, BW, BC: (
        x.shape[0] * ((x.shape[1] + 2 * PAD - K) // STRIDE + 1),
        ml.cdiv((x.shape[2] + 2 * PAD - K) // STRIDE + 1, BW), ml.cdiv(x.shape[3], BC)))
def depthwise_nhwc(x, w, out, *, K: ml.constexpr, STRIDE: ml.constexpr, PAD: ml.constexpr, BW: ml.constexpr,
                   BC: ml.constexpr):
  """x (N, H, W, C), w (K, K, C): one output row of BW pixels x BC channels a program."""
  N, H, W, C = x.shape
  OH, OW = out.shape[1], out.shape[2]
  pid = ml.program_id(0)
  n = pid // OH
  oh = pid % OH
  ow = ml.program_id(1) * BW + ml.arange(BW)
  c = ml.program_id(2) * BC + ml.arange(BC)
  cm = c < C
  acc = ml.zeros((BW, BC), jnp.float32)
  for kh in range(K):
    ih = oh * STRIDE - PAD + kh
    for kw in range(K):
      iw = ow * STRIDE - PAD + kw
      m = (ih >= 0) & (ih < H) & (iw[:, None] >= 0) & (iw[:, None] < W) & cm[None, :]
      xv = ml.load(x.at[n, ih, iw[:, None], c[None, :]], mask=m, other=0.0)
      wv = ml.load(w.at[kh, kw, c], mask=cm, other=0.0)
      acc += xv.astype(jnp.float32) * wv.astype(jnp.float32)[None, :]
  ml.store(out.at[n, oh, ow[:, None], c[None, :]], acc.astype(out.dtype), mask=(ow[:, None] < OW) & cm[None, :])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], x.shape[1] - 2, x.shape[2] - 2), x.dtype),
                grid=lambda x, w: (x.shape[0],))
def depthwise_nchw_3x3_valid(x, w, out):
  """x (N*C, H, W) a plane a program (H, W <= 64); w (N*C, 3, 3) per plane."""
  p = ml.program_id(0)
  OH, OW = out.shape[1], out.shape[2]
  r = ml.arange(64)
  cc = ml.arange(64)
  acc = ml.zeros((64, 64), jnp.float32)
  for i in range(3):
    for j in range(3):
      rr = r + i
      cw = cc + j
      v = ml.load(x.at[p, rr[:, None], cw[None, :]], mask=(rr[:, None] < x.shape[1]) & (cw[None, :] < x.shape[2]),
                  other=0.0)
      acc += v * w[p, i, j]
  ml.store(out.at[p, r[:, None], cc[None, :]], acc, mask=(r[:, None] < OH) & (cc[None, :] < OW))


def ref_depthwise(x, w, K, stride, pad):
  C = x.shape[3]
  y = jax.lax.conv_general_dilated(
      jnp.asarray(x, F32), jnp.asarray(w, F32).reshape(K, K, 1, C), (stride, stride), [(pad, pad), (pad, pad)],
      dimension_numbers=("NHWC", "HWIO", "NHWC"), feature_group_count=C, precision="highest")
  return np.asarray(y)


# ---------------------------------------------------------------- implicit-GEMM conv2d (NHWC)

def conv_out(x, w, *, STRIDE, PAD, **k):
  N, H, W, C = x.shape
  KH, KW, _, CO = w.shape
  return S((N, (H + 2 * PAD - KH) // STRIDE + 1, (W + 2 * PAD - KW) // STRIDE + 1, CO), F32)


def conv_grid(x, w, *, STRIDE, PAD, BM, BN, **k):
  o = conv_out(x, w, STRIDE=STRIDE, PAD=PAD)
  return (ml.cdiv(o.shape[0] * o.shape[1] * o.shape[2], BM), ml.cdiv(o.shape[3], BN))


@mg.mgpu_kernel(out_shape=conv_out, grid=conv_grid)
def conv2d_implicit_gemm(x, w, out, *, STRIDE: ml.constexpr, PAD: ml.constexpr, BM: ml.constexpr, BN: ml.constexpr,
                         BK: ml.constexpr):
  """x (N, H, W, CI) 16-bit, w (KH, KW, CI, CO): im2col windows gathered into SMEM, then ml.dot; f32 accumulate."""
  N, H, W, CI = x.shape
  KH, KW, _, CO = w.shape
  OH, OW = out.shape[1], out.shape[2]
  m = ml.program_id(0) * BM + ml.arange(BM)
  co = ml.program_id(1) * BN
  n = m // (OH * OW)
  oh = m // OW % OH
  ow = m % OW
  a_s = ml.smem((BM, BK), x.dtype)
  b_s = ml.smem((BK, BN), x.dtype)
  acc = ml.zeros((BM, BN), jnp.float32)
  for kh in range(KH):
    for kw in range(KW):
      ih = oh * STRIDE - PAD + kh
      iw = ow * STRIDE - PAD + kw
      ok = (m < N * OH * OW) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
      for c0 in range(0, CI, BK):
        ci = c0 + ml.arange(BK)
        a_s[...] = ml.load(x.at[n[:, None], ih[:, None], iw[:, None], ci[None, :]],
                           mask=ok[:, None] & (ci[None, :] < CI), other=0.0)
        ml.copy(w.at[kh, kw, ml.ds(c0, BK), ml.ds(co, BN)], b_s)
        acc = ml.dot(a_s, b_s, acc)
  ml.store(out.at[n[:, None], oh[:, None], ow[:, None], (co + ml.arange(BN))[None, :]], acc,
           mask=(m[:, None] < N * OH * OW) & ((co + ml.arange(BN))[None, :] < CO))


@mg.mgpu_kernel(out_shape=conv_out, grid=conv_grid)
def conv2d_implicit_gemm_regs(x, w, out, *, STRIDE: ml.constexpr, PAD: ml.constexpr, BM: ml.constexpr,
                              BN: ml.constexpr, BK: ml.constexpr):
  """Triton's way: both operands loaded into registers by pointer blocks, ml.dot of register tiles, k flattened."""
  N, H, W, CI = x.shape
  KH, KW, _, CO = w.shape
  OH, OW = out.shape[1], out.shape[2]
  M = N * OH * OW
  K = KH * KW * CI
  m = ml.program_id(0) * BM + ml.arange(BM)
  nn = ml.program_id(1) * BN + ml.arange(BN)
  n = m // (OH * OW)
  oh = m // OW % OH
  ow = m % OW
  acc = ml.zeros((BM, BN), jnp.float32)
  for k0 in range(0, K, BK):
    kk = k0 + ml.arange(BK)
    kh = kk // (KW * CI)
    kw = kk // CI % KW
    ci = kk % CI
    ih = oh[:, None] * STRIDE - PAD + kh[None, :]
    iw = ow[:, None] * STRIDE - PAD + kw[None, :]
    ok = (m[:, None] < M) & (kk[None, :] < K) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    a = ml.load(x.at[n[:, None], ih, iw, ci[None, :]], mask=ok, other=0.0)
    b = ml.load(w.at[kh[:, None], kw[:, None], ci[:, None], nn[None, :]], mask=(kk[:, None] < K) & (nn[None, :] < CO),
                other=0.0)
    acc = ml.dot(a, b, acc)
  ml.store(out.at[n[:, None], oh[:, None], ow[:, None], nn[None, :]], acc, mask=(m[:, None] < M) & (nn[None, :] < CO))


def ref_conv(x, w, stride, pad):
  y = jax.lax.conv_general_dilated(jnp.asarray(x, F32), jnp.asarray(w, F32), (stride, stride),
                                   [(pad, pad), (pad, pad)], dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                   precision="highest")
  return np.asarray(y)


@mg.mgpu_kernel(out_shape=lambda x, w: S(x.shape[:3] + (w.shape[1],), F32),
                grid=lambda x, w: (x.shape[0], x.shape[1]))
def conv1x1(x, w, out):
  """1x1 conv as a matmul: x (N, H, 64, CI) one image row a program, w (CI, CO)."""
  n, h = ml.program_id(0), ml.program_id(1)
  a_s = ml.smem((x.shape[2], x.shape[3]), x.dtype)
  b_s = ml.smem(w.shape, w.dtype)
  ml.copy(x.at[n, h], a_s)
  ml.copy(w, b_s)
  out[n, h] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda x, w, b: S((x.shape[0], w.shape[0], x.shape[2], x.shape[3]), F32),
                grid=lambda x, w, b: (x.shape[0], ml.cdiv(x.shape[2] * x.shape[3], 64)))
def conv1x1_nchw(x, w, b, out):
  """Channel-first 1x1 conv: out[n, :, p] = w (CO, CI) @ x[n, :, p] + bias over pixels p (H*W not a multiple)."""
  n = ml.program_id(0)
  p = ml.program_id(1) * 64 + ml.arange(64)
  HW = x.shape[2] * x.shape[3]
  ci = ml.arange(x.shape[1])
  xv = ml.load(x.at[n, ci[:, None], p[None, :] // x.shape[3], p[None, :] % x.shape[3]], mask=p[None, :] < HW,
               other=0.0)
  wv = w[...]
  acc = ml.dot(wv, xv) + b[...].astype(jnp.float32)[:, None]
  co = ml.arange(w.shape[0])
  ml.store(out.at[n, co[:, None], p[None, :] // x.shape[3], p[None, :] % x.shape[3]], acc, mask=p[None, :] < HW)


# ---------------------------------------------------------------- pooling

@mg.mgpu_kernel(out_shape=lambda x, **k: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2, x.shape[3]), x.dtype),
                grid=lambda x, **k: (x.shape[0], x.shape[1] // 2))
def maxpool2x2_nhwc(x, out):
  """2x2 stride 2 max pool, one output row a program: NHWC rows read with a step (x[n, 2 * i, ::2])."""
  n, i = ml.program_id(0), ml.program_id(1)
  a = ml.maximum(x[n, 2 * i, 0::2, :], x[n, 2 * i, 1::2, :])
  b = ml.maximum(x[n, 2 * i + 1, 0::2, :], x[n, 2 * i + 1, 1::2, :])
  out[n, i] = ml.maximum(a, b)


def pool_out(x, *, K, STRIDE, PAD, **k):
  return S((x.shape[0], (x.shape[1] + 2 * PAD - K) // STRIDE + 1, (x.shape[2] + 2 * PAD - K) // STRIDE + 1,
            x.shape[3]), x.dtype)


@ml.inline
def pool_program(out, BW, C):
  """The image, output row, BW output pixels and C channels of a pooling program (one output row)."""
  OH = out.shape[1]
  return ml.program_id(0) // OH, ml.program_id(0) % OH, ml.arange(BW), ml.arange(C)


@mg.mgpu_kernel(out_shape=pool_out, grid=lambda x, **k: (pool_out(x, **k).shape[0] * pool_out(x, **k).shape[1],))
def maxpool_nhwc(x, out, *, K: ml.constexpr, STRIDE: ml.constexpr, PAD: ml.constexpr, BW: ml.constexpr):
  """K x K max pool with -inf padding; one output row a program, BW >= OW pixels, all channels."""
  N, H, W, C = x.shape
  OW = out.shape[2]
  n, oh, ow, c = pool_program(out, BW, C)
  acc = ml.full((BW, C), float("-inf"), jnp.float32)
  for kh in range(K):
    for kw in range(K):
      ih = oh * STRIDE - PAD + kh
      iw = ow * STRIDE - PAD + kw
      m = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W) & (ow < OW)
      v = ml.load(x.at[n, ih, iw[:, None], c[None, :]], mask=m[:, None], other=float("-inf"))
      acc = ml.maximum(acc, v.astype(jnp.float32))
  ml.store(out.at[n, oh, ow[:, None], c[None, :]], acc, mask=(ow < OW)[:, None])


@mg.mgpu_kernel(out_shape=pool_out, grid=lambda x, **k: (pool_out(x, **k).shape[0] * pool_out(x, **k).shape[1],))
def avgpool_nhwc(x, out, *, K: ml.constexpr, STRIDE: ml.constexpr, PAD: ml.constexpr, BW: ml.constexpr,
                 INCLUDE_PAD: ml.constexpr):
  N, H, W, C = x.shape
  OW = out.shape[2]
  n, oh, ow, c = pool_program(out, BW, C)
  acc = ml.zeros((BW, C), jnp.float32)
  cnt = ml.zeros((BW,), jnp.float32)
  for kh in range(K):
    for kw in range(K):
      ih = oh * STRIDE - PAD + kh
      iw = ow * STRIDE - PAD + kw
      m = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
      acc += ml.load(x.at[n, ih, iw[:, None], c[None, :]], mask=m[:, None] & (ow < OW)[:, None], other=0.0)
      cnt += m.astype(jnp.float32)
  if INCLUDE_PAD:
    acc = acc / (K * K)
  else:
    acc = acc / cnt[:, None]
  ml.store(out.at[n, oh, ow[:, None], c[None, :]], acc, mask=(ow < OW)[:, None])


def ref_pool(x, K, stride, pad, kind, include_pad=True):
  x = jnp.asarray(x, F32)
  if kind == "max":
    return np.asarray(jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (1, K, K, 1), (1, stride, stride, 1),
                                            [(0, 0), (pad, pad), (pad, pad), (0, 0)]))
  s = jax.lax.reduce_window(x, 0.0, jax.lax.add, (1, K, K, 1), (1, stride, stride, 1),
                            [(0, 0), (pad, pad), (pad, pad), (0, 0)])
  if include_pad:
    return np.asarray(s / (K * K))
  c = jax.lax.reduce_window(jnp.ones_like(x[..., :1]), 0.0, jax.lax.add, (1, K, K, 1), (1, stride, stride, 1),
                            [(0, 0), (pad, pad), (pad, pad), (0, 0)])
  return np.asarray(s / c)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1]), F32), grid=lambda x: (x.shape[0],))
def global_avgpool_nchw(x, out):
  """x (N, C, H, W) -> (N, C): the mean of each plane, an image a program (H*W = 49)."""
  n = ml.program_id(0)
  HW = x.shape[2] * x.shape[3]
  p = ml.arange(64)
  c = ml.arange(x.shape[1])
  v = ml.load(x.at[n, c[:, None], p[None, :] // x.shape[3], p[None, :] % x.shape[3]], mask=p[None, :] < HW,
              other=0.0)
  out[n] = ml.sum(v, axis=1) / HW


# ---------------------------------------------------------------- upsampling and transposed convs

@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], 2 * x.shape[2]), x.dtype),
                grid=lambda x: (x.shape[0], 2 * x.shape[1]))
def upsample_nearest2x(x, out):
  """x (P, H, W) planes: out[p, oh, ow] = x[p, oh // 2, ow // 2], one output row a program (2W <= 128)."""
  p, oh = ml.program_id(0), ml.program_id(1)
  ow = ml.arange(128)
  v = ml.load(x.at[p, oh // 2, ow // 2], mask=ow < out.shape[2], other=0.0)
  ml.store(out.at[p, oh, ow], v, mask=ow < out.shape[2])


@mg.mgpu_kernel(out_shape=lambda x, *, OH, OW: S((x.shape[0], OH, OW), F32), grid=lambda x, *, OH, OW: (x.shape[0], OH))
def resize_bilinear(x, out, *, OH: ml.constexpr, OW: ml.constexpr):
  """Half-pixel bilinear resize (align_corners=False, edges clamped), one output row a program (OW <= 128)."""
  p, oh = ml.program_id(0), ml.program_id(1)
  H, W = x.shape[1], x.shape[2]
  sy = (oh.astype(jnp.float32) + 0.5) * (H / OH) - 0.5
  sy = ml.maximum(sy, 0.0)
  y0 = ml.minimum(sy.astype(jnp.int32), H - 1)
  y1 = ml.minimum(y0 + 1, H - 1)
  fy = sy - y0.astype(jnp.float32)
  ow = ml.arange(128)
  sx = ml.maximum((ow.astype(jnp.float32) + 0.5) * (W / OW) - 0.5, 0.0)
  x0 = ml.minimum(sx.astype(jnp.int32), W - 1)
  x1 = ml.minimum(x0 + 1, W - 1)
  fx = sx - x0.astype(jnp.float32)
  m = ow < OW
  a = ml.load(x.at[p, y0, x0], mask=m, other=0.0).astype(jnp.float32)
  b = ml.load(x.at[p, y0, x1], mask=m, other=0.0).astype(jnp.float32)
  c = ml.load(x.at[p, y1, x0], mask=m, other=0.0).astype(jnp.float32)
  d = ml.load(x.at[p, y1, x1], mask=m, other=0.0).astype(jnp.float32)
  top = a + (b - a) * fx
  bot = c + (d - c) * fx
  ml.store(out.at[p, oh, ow], top + (bot - top) * fy, mask=m)


def ref_bilinear(x, OH, OW):
  x = np.asarray(x, np.float32)
  P, H, W = x.shape
  def coords(o, n, on):
    s = np.maximum((np.arange(on, dtype=np.float32) + 0.5) * np.float32(n / on) - 0.5, 0)
    i0 = np.minimum(s.astype(np.int32), n - 1)
    return i0, np.minimum(i0 + 1, n - 1), s - i0
  y0, y1, fy = coords(0, H, OH)
  x0, x1, fx = coords(0, W, OW)
  top = x[:, y0][:, :, x0] + (x[:, y0][:, :, x1] - x[:, y0][:, :, x0]) * fx
  bot = x[:, y1][:, :, x0] + (x[:, y1][:, :, x1] - x[:, y1][:, :, x0]) * fx
  return top + (bot - top) * fy[None, :, None]


@mg.mgpu_kernel(out_shape=lambda x, w, *, STRIDE: S(
    (x.shape[0], (x.shape[1] - 1) * STRIDE + w.shape[0], (x.shape[2] - 1) * STRIDE + w.shape[1], x.shape[3]), F32),
    grid=lambda x, w, *, STRIDE: (x.shape[0], x.shape[1]))
def conv_transpose_depthwise_scatter(x, w, out, *, STRIDE: ml.constexpr):
  """Depthwise transposed conv by atomic scatter: each input row adds x * w[kh, kw] into out (zero-initialised)."""
  n, ih = ml.program_id(0), ml.program_id(1)
  iw = ml.arange(x.shape[2])
  c = ml.arange(x.shape[3])
  v = x[n, ih].astype(jnp.float32)
  for kh in range(w.shape[0]):
    for kw in range(w.shape[1]):
      ml.atomic_add(out.at[n, ih * STRIDE + kh, (iw * STRIDE + kw)[:, None], c[None, :]],
                    v * w[kh, kw].astype(jnp.float32)[None, :])


def ref_conv_transpose_dw(x, w, stride):
  N, H, W, C = x.shape
  K = w.shape[0]
  out = np.zeros((N, (H - 1) * stride + K, (W - 1) * stride + w.shape[1], C), np.float32)
  for kh in range(K):
    for kw in range(w.shape[1]):
      out[:, kh:kh + (H - 1) * stride + 1:stride, kw:kw + (W - 1) * stride + 1:stride] += x * w[kh, kw]
  return out
