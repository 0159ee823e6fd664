"""Probe 67a's corpus, part 2: stencils, Jacobi iterations, image filters, histograms, integral images, im2col /
col2im, layouts and int8 / uint8 images (tests/probe67a_kernels.py lists the cases)."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from probe67a_convs import ref_bilinear

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- stencils

@mg.mgpu_kernel(out_shape=lambda u, **k: u, grid=lambda u, *, BH, BW: (ml.cdiv(u.shape[0], BH), ml.cdiv(u.shape[1], BW)))
def laplacian2d(u, out, *, BH: ml.constexpr, BW: ml.constexpr):
  """5-point Laplacian, zero outside the image; odd sizes, tails masked."""
  H, W = u.shape
  r = ml.program_id(0) * BH + ml.arange(BH)
  c = ml.program_id(1) * BW + ml.arange(BW)
  def at(dr, dc):
    rr = r[:, None] + dr
    cc = c[None, :] + dc
    return ml.load(u.at[rr, cc], mask=(rr >= 0) & (rr < H) & (cc >= 0) & (cc < W), other=0.0)
  lap = at(-1, 0) + at(1, 0) + at(0, -1) + at(0, 1) - 4.0 * at(0, 0)
  ml.store(out.at[r[:, None], c[None, :]], lap, mask=(r[:, None] < H) & (c[None, :] < W))


def ref_laplacian(u):
  p = np.pad(np.asarray(u, np.float32), 1)
  return p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * p[1:-1, 1:-1]


@mg.mgpu_kernel(out_shape=lambda u, **k: u, grid=(1,))
def jacobi_smem(u, out, *, ITERS: ml.constexpr, SPELLING: ml.constexpr):
  """Jacobi iterations on a (64, 64) grid with a fixed boundary, held in two (66, 66) SMEM buffers (a ring of zeros
  around it) swapped each trip: chosen by a conditional expression, an if statement, or swapped names."""
  a = ml.smem((66, 66), u.dtype)
  b = ml.smem((66, 66), u.dtype)
  a[...] = ml.zeros((66, 66), u.dtype)
  a[1:65, 1:65] = u[...]
  b[...] = a[...]
  r = ml.arange(64)[:, None]
  c = ml.arange(64)[None, :]
  interior = (r > 0) & (r < 63) & (c > 0) & (c < 63)
  src, dst = a, b
  for it in range(ITERS):
    if SPELLING == "ifexp":
      src, dst = (a, b) if it % 2 == 0 else (b, a)
    elif SPELLING == "if":
      if it % 2 == 0:
        src, dst = a, b
      else:
        src, dst = b, a
    nb = 0.25 * (src[0:64, 1:65] + src[2:66, 1:65] + src[1:65, 0:64] + src[1:65, 2:66])
    dst[1:65, 1:65] = jnp.where(interior, nb, src[1:65, 1:65])
    if SPELLING == "swap":
      src, dst = dst, src
  last = (a if ITERS % 2 == 0 else b) if SPELLING != "swap" else src
  out[...] = last[1:65, 1:65]


def ref_jacobi(u, iters):
  a = np.asarray(u, np.float32).copy()
  for _ in range(iters):
    b = a.copy()
    b[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
    a = b
  return a


@mg.mgpu_kernel(out_shape=lambda u, **k: u, grid=(1,))
def jacobi_loop_registers(u, out, *, ITERS: ml.constexpr):
  """Jacobi with a run-time loop carrying the grid in registers; neighbours by jnp.roll, boundary kept by a mask."""
  v = u[...]
  H, W = u.shape
  r = ml.arange(H)[:, None]
  c = ml.arange(W)[None, :]
  interior = (r > 0) & (r < H - 1) & (c > 0) & (c < W - 1)
  for _ in ml.range(ITERS):
    nb = 0.25 * (jnp.roll(v, 1, 0) + jnp.roll(v, -1, 0) + jnp.roll(v, 1, 1) + jnp.roll(v, -1, 1))
    v = jnp.where(interior, nb, v)
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda u, **k: u, grid=lambda u, **k: (u.shape[0],))
def stencil3d_7pt(u, out, *, BW: ml.constexpr):
  """7-point 3-D Laplacian of a (D, H, W) volume, one z-plane a program, zero outside."""
  D, H, W = u.shape
  z = ml.program_id(0)
  y = ml.arange(H)
  x = ml.arange(BW)
  def at(dz, dy, dx):
    yy = y[:, None] + dy
    xx = x[None, :] + dx
    return ml.load(u.at[z + dz, yy, xx], mask=(z + dz >= 0) & (z + dz < D) & (yy >= 0) & (yy < H) & (xx >= 0) & (xx < W),
                   other=0.0)
  s = at(-1, 0, 0) + at(1, 0, 0) + at(0, -1, 0) + at(0, 1, 0) + at(0, 0, -1) + at(0, 0, 1) - 6.0 * at(0, 0, 0)
  ml.store(out.at[z, y[:, None], x[None, :]], s, mask=x[None, :] < W)


def ref_lap3d(u):
  p = np.pad(np.asarray(u, np.float32), 1)
  return (p[:-2, 1:-1, 1:-1] + p[2:, 1:-1, 1:-1] + p[1:-1, :-2, 1:-1] + p[1:-1, 2:, 1:-1] + p[1:-1, 1:-1, :-2]
          + p[1:-1, 1:-1, 2:] - 6 * p[1:-1, 1:-1, 1:-1])


# ---------------------------------------------------------------- image filters

@mg.mgpu_kernel(out_shape=lambda img, **k: S(img.shape, F32),
                grid=lambda img, *, BH, BW: (ml.cdiv(img.shape[0], BH), ml.cdiv(img.shape[1], BW)))
def sobel_u8(img, out, *, BH: ml.constexpr, BW: ml.constexpr):
  """Sobel gradient magnitude of a uint8 image (edges replicated), float math."""
  H, W = img.shape
  r = ml.program_id(0) * BH + ml.arange(BH)
  c = ml.program_id(1) * BW + ml.arange(BW)
  def px(dr, dc):
    rr = ml.minimum(ml.maximum(r[:, None] + dr, 0), H - 1)
    cc = ml.minimum(ml.maximum(c[None, :] + dc, 0), W - 1)
    return ml.load(img.at[rr, cc], mask=(r[:, None] < H) & (c[None, :] < W), other=0).astype(jnp.float32)
  gx = (px(-1, 1) + 2 * px(0, 1) + px(1, 1)) - (px(-1, -1) + 2 * px(0, -1) + px(1, -1))
  gy = (px(1, -1) + 2 * px(1, 0) + px(1, 1)) - (px(-1, -1) + 2 * px(-1, 0) + px(-1, 1))
  ml.store(out.at[r[:, None], c[None, :]], jnp.sqrt(gx * gx + gy * gy), mask=(r[:, None] < H) & (c[None, :] < W))


def ref_sobel(img):
  p = np.pad(np.asarray(img, np.float32), 1, mode="edge")
  H, W = img.shape
  s = lambda dr, dc: p[1 + dr:1 + dr + H, 1 + dc:1 + dc + W]
  gx = (s(-1, 1) + 2 * s(0, 1) + s(1, 1)) - (s(-1, -1) + 2 * s(0, -1) + s(1, -1))
  gy = (s(1, -1) + 2 * s(1, 0) + s(1, 1)) - (s(-1, -1) + 2 * s(-1, 0) + s(-1, 1))
  return np.sqrt(gx * gx + gy * gy)


@mg.mgpu_kernel(out_shape=lambda img, **k: img,
                grid=lambda img, *, BH, BW: (img.shape[0], ml.cdiv(img.shape[1], BH), ml.cdiv(img.shape[2], BW)))
def box_blur_u8(img, out, *, BH: ml.constexpr, BW: ml.constexpr, R: ml.constexpr):
  """(2R+1)^2 box blur of a batch of uint8 images, zero padding, rounded back to uint8."""
  b = ml.program_id(0)
  H, W = img.shape[1], img.shape[2]
  r = ml.program_id(1) * BH + ml.arange(BH)
  c = ml.program_id(2) * BW + ml.arange(BW)
  acc = ml.zeros((BH, BW), jnp.float32)
  for dr in range(-R, R + 1):
    for dc in range(-R, R + 1):
      rr = r[:, None] + dr
      cc = c[None, :] + dc
      acc += ml.load(img.at[b, rr, cc], mask=(rr >= 0) & (rr < H) & (cc >= 0) & (cc < W), other=0).astype(jnp.float32)
  y = jnp.round(acc / ((2 * R + 1) ** 2))
  ml.store(out.at[b, r[:, None], c[None, :]], jnp.clip(y, 0, 255).astype(jnp.uint8),
           mask=(r[:, None] < H) & (c[None, :] < W))


def ref_box(img, R):
  p = np.pad(np.asarray(img, np.float32), ((0, 0), (R, R), (R, R)))
  H, W = img.shape[1:]
  s = sum(p[:, R + dr:R + dr + H, R + dc:R + dc + W] for dr in range(-R, R + 1) for dc in range(-R, R + 1))
  return np.clip(np.round(s / (2 * R + 1) ** 2), 0, 255).astype(np.uint8)


GAUSS5 = (0.0625, 0.25, 0.375, 0.25, 0.0625)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 32), ml.cdiv(x.shape[1], 64)))
def separable_gauss_smem(x, out):
  """5-tap Gaussian: the row pass over a (32 + 4)-row halo tile into SMEM, then the column pass from SMEM windows."""
  H, W = x.shape
  r0 = ml.program_id(0) * 32
  c = ml.program_id(1) * 64 + ml.arange(64)
  rows = r0 - 2 + ml.arange(40)        # 36 halo rows, padded to 40
  tmp = ml.smem((40, 64), jnp.float32)
  acc = ml.zeros((40, 64), jnp.float32)
  for k in range(5):
    cc = c[None, :] + (k - 2)
    acc += GAUSS5[k] * ml.load(x.at[rows[:, None], cc], mask=(rows[:, None] >= 0) & (rows[:, None] < H) & (cc >= 0)
                               & (cc < W), other=0.0)
  tmp[...] = acc
  out_acc = ml.zeros((32, 64), jnp.float32)
  for k in range(5):
    out_acc += GAUSS5[k] * tmp[k:k + 32, :]
  r = r0 + ml.arange(32)
  ml.store(out.at[r[:, None], c[None, :]], out_acc, mask=(r[:, None] < H) & (c[None, :] < W))


def ref_gauss(x):
  p = np.pad(np.asarray(x, np.float32), 2)
  H, W = x.shape
  rowp = sum(GAUSS5[k] * p[:, k:k + W] for k in range(5))
  return sum(GAUSS5[k] * rowp[k:k + H] for k in range(5))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def separable_box_tma(x, out):
  """3x3 box by TMA: a (64 + 2, 64 + 2) halo... taken as a (72, 128) window at (r - 1, c - 1), zeros outside."""
  r, c = ml.program_id(0) * 64, ml.program_id(1) * 64
  t = ml.smem((72, 128), x.dtype)
  ml.copy(x.at[ml.ds(r - 1, 72), ml.ds(c - 1, 128)], t)
  v = t[...]
  rows = v[0:64, :] + v[1:65, :] + v[2:66, :]
  tmp = ml.smem((64, 128), jnp.float32)
  tmp[...] = rows
  out[ml.ds(r, 64), ml.ds(c, 64)] = (tmp[:, 0:64] + tmp[:, 1:65] + tmp[:, 2:66]) / 9.0


def ref_box_f(x):
  p = np.pad(np.asarray(x, np.float32), 1)
  H, W = x.shape
  return sum(p[dr:dr + H, dc:dc + W] for dr in range(3) for dc in range(3)) / 9.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def box3_tma_aligned(x, out):
  """3x3 box by TMA as MG401's hint writes it: the halo window widened to start at c - 4 (zeros outside), the taps
  SMEM windows of it (t.at[ml.ds(kh, 64), ml.ds(3 + kw, 64)])."""
  r, c = ml.program_id(0) * 64, ml.program_id(1) * 64
  t = ml.smem((72, 72), x.dtype)
  ml.copy(x.at[ml.ds(r - 1, 72), ml.ds(c - 4, 72)], t)
  acc = ml.zeros((64, 64), jnp.float32)
  for kh in range(3):
    for kw in range(3):
      acc += t.at[ml.ds(kh, 64), ml.ds(3 + kw, 64)][...]
  out[ml.ds(r, 64), ml.ds(c, 64)] = acc / 9.0


@mg.mgpu_kernel(out_shape=lambda x, *, R: S((x.shape[0], x.shape[1] * R, x.shape[2] * R, x.shape[3] // (R * R)),
                                             x.dtype),
                grid=lambda x, *, R: (x.shape[0], x.shape[1] * R))
def pixel_shuffle_nhwc(x, out, *, R: ml.constexpr):
  """Depth to space: out[n, h * R + i, w * R + j, c] = x[n, h, w, (i * R + j) * C + c], one output row a program."""
  n, oh = ml.program_id(0), ml.program_id(1)
  C = out.shape[3]
  ow = ml.arange(64)
  c = ml.arange(C)
  h, i = oh // R, oh % R
  src_c = (i * R + ow % R)[:, None] * C + c[None, :]
  v = ml.load(x.at[n, h, (ow // R)[:, None], src_c], mask=(ow < out.shape[2])[:, None], other=0.0)
  ml.store(out.at[n, oh, ow[:, None], c[None, :]], v, mask=(ow < out.shape[2])[:, None])


def ref_pixel_shuffle(x, R):
  N, H, W, CC = x.shape
  C = CC // (R * R)
  return x.reshape(N, H, W, R, R, C).transpose(0, 1, 3, 2, 4, 5).reshape(N, H * R, W * R, C)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[1], 2 * x.shape[2], x.shape[3]), x.dtype),
                grid=lambda x: (x.shape[0], x.shape[1]))
def upsample_nearest_repeat_nhwc(x, out):
  """Nearest 2x upsampling of NHWC by jnp.repeat in registers: an input row becomes two output rows."""
  n, h = ml.program_id(0), ml.program_id(1)
  v = jnp.repeat(x[n, h], 2, axis=0)
  out[n, 2 * h] = v
  out[n, 2 * h + 1] = v


@mg.mgpu_kernel(out_shape=lambda x, *, OH, OW: S((x.shape[0], OH, OW, x.shape[3]), F32),
                grid=lambda x, *, OH, OW: (x.shape[0], OH))
def resize_bilinear_nhwc_bf16(x, out, *, OH: ml.constexpr, OW: ml.constexpr):
  """Bilinear (half-pixel, clamped) resize of bf16 NHWC images, all channels of a row of pixels at once."""
  n, oh = ml.program_id(0), ml.program_id(1)
  H, W, C = x.shape[1], x.shape[2], x.shape[3]
  sy = ml.maximum((oh + 0.5) * (H / OH) - 0.5, 0.0)
  y0 = ml.minimum(sy.astype(jnp.int32), H - 1)
  y1 = ml.minimum(y0 + 1, H - 1)
  fy = sy - y0
  ow = ml.arange(32)
  sx = ml.maximum((ow + 0.5) * (W / OW) - 0.5, 0.0)
  x0 = ml.minimum(sx.astype(jnp.int32), W - 1)
  x1 = ml.minimum(x0 + 1, W - 1)
  fx = (sx - x0)[:, None]
  c = ml.arange(C)[None, :]
  m = (ow < OW)[:, None]
  g = lambda yy, xx: ml.load(x.at[n, yy, xx[:, None], c], mask=m, other=0.0).astype(jnp.float32)
  top = g(y0, x0) * (1 - fx) + g(y0, x1) * fx
  bot = g(y1, x0) * (1 - fx) + g(y1, x1) * fx
  ml.store(out.at[n, oh, ow[:, None], c], top * (1 - fy) + bot * fy, mask=m)


def ref_bilinear_nhwc(x, OH, OW):
  x = np.asarray(x, np.float32).transpose(0, 3, 1, 2)
  N, C, H, W = x.shape
  return ref_bilinear(x.reshape(N * C, H, W), OH, OW).reshape(N, C, OH, OW).transpose(0, 2, 3, 1)


# ---------------------------------------------------------------- histograms, prefix sums, unfold / fold

@mg.mgpu_kernel(out_shape=lambda img: S((256,), jnp.int32), grid=lambda img: (ml.cdiv(img.size, 1024),))
def histogram_u8(img, hist):
  """256-bin histogram of a flat uint8 image of odd length: atomics into the output."""
  offs = ml.program_id(0) * 1024 + ml.arange(1024)
  v = ml.load(img.at[offs], mask=offs < img.shape[0], other=0)
  ml.atomic_add(hist.at[v.astype(jnp.int32)], 1, mask=offs < img.shape[0])


@mg.mgpu_kernel(out_shape=lambda img: S((256,), jnp.int32), grid=lambda img: (img.shape[0],))
def histogram_smem(img, hist):
  """A histogram per row in SMEM (privatised), merged into the output by atomics; image (R, C) uint8."""
  h = ml.smem((256,), jnp.int32)
  h[...] = ml.zeros((256,), jnp.int32)
  r = ml.program_id(0)
  cols = ml.arange(512)
  v = ml.load(img.at[r, cols], mask=cols < img.shape[1], other=0)
  ml.atomic_add(h.at[v.astype(jnp.int32)], 1, mask=cols < img.shape[1])
  ml.atomic_add(hist.at[ml.arange(256)], h[...])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (x.shape[0],))
def integral_image(x, out):
  """Summed-area table of each (H, W) image, H, W <= 64 (padded to 64 x 64 under masks)."""
  b = ml.program_id(0)
  H, W = x.shape[1], x.shape[2]
  r = ml.arange(64)
  c = ml.arange(64)
  m = (r[:, None] < H) & (c[None, :] < W)
  v = ml.load(x.at[b, r[:, None], c[None, :]], mask=m, other=0).astype(jnp.float32)
  s = ml.cumsum(ml.cumsum(v, axis=1), axis=0)
  ml.store(out.at[b, r[:, None], c[None, :]], s, mask=m)


@mg.mgpu_kernel(out_shape=lambda x, **k: S(x.shape, F32), grid=lambda x, **k: (1,))
def integral_image_rows_loop(x, out, *, BW: ml.constexpr):
  """Summed-area table of a (H, W) image walked a row at a time, the running column sums carried."""
  H, W = x.shape
  c = ml.arange(BW)
  run = ml.zeros((BW,), jnp.float32)
  for i in range(H):
    row = ml.load(x.at[i, c], mask=c < W, other=0.0)
    run = run + ml.cumsum(row)
    ml.store(out.at[i, c], run, mask=c < W)


@ml.inline
def patch_program(OH, K, C):
  """The image, output row, tap (kh, kw), 32 output pixels and C channels of an im2col / col2im program."""
  n, oh = ml.program_id(0) // OH, ml.program_id(0) % OH
  kh, kw = ml.program_id(1) // K, ml.program_id(1) % K
  return n, oh, kh, kw, ml.arange(32), ml.arange(C)


@mg.mgpu_kernel(out_shape=lambda x, *, K: S((x.shape[0] * (x.shape[1] - K + 1) * (x.shape[2] - K + 1),
                                              K * K * x.shape[3]), x.dtype),
                grid=lambda x, *, K: (x.shape[0] * (x.shape[1] - K + 1), K * K))
def im2col_nhwc(x, cols, *, K: ml.constexpr):
  """Unfold (valid, stride 1): row (n, oh, ow) of cols holds the K x K x C patch; a program does one output row
  and one tap."""
  N, H, W, C = x.shape
  OH, OW = H - K + 1, W - K + 1
  n, oh, kh, kw, ow, ch = patch_program(OH, K, C)
  v = ml.load(x.at[n, oh + kh, (ow + kw)[:, None], ch[None, :]], mask=(ow < OW)[:, None], other=0.0)
  row = (n * OH + oh) * OW + ow
  ml.store(cols.at[row[:, None], (ml.program_id(1) * C + ch)[None, :]], v, mask=(ow < OW)[:, None])


def ref_im2col(x, K):
  N, H, W, C = x.shape
  OH, OW = H - K + 1, W - K + 1
  out = np.stack([x[:, kh:kh + OH, kw:kw + OW] for kh in range(K) for kw in range(K)], axis=3)
  return out.reshape(N * OH * OW, K * K * C)


@mg.mgpu_kernel(out_shape=lambda cols, *, N, H, W, K: S((N, H, W, cols.shape[1] // (K * K)), F32),
                grid=lambda cols, *, N, H, W, K: (N * (H - K + 1), K * K))
def col2im_atomic(cols, out, *, N: ml.constexpr, H: ml.constexpr, W: ml.constexpr, K: ml.constexpr):
  """Fold (col2im): every patch row adds back into the image by atomics (overlapping windows sum)."""
  C = out.shape[3]
  OH, OW = H - K + 1, W - K + 1
  n, oh, kh, kw, ow, ch = patch_program(OH, K, C)
  row = (n * OH + oh) * OW + ow
  v = ml.load(cols.at[row[:, None], (ml.program_id(1) * C + ch)[None, :]], mask=(ow < OW)[:, None], other=0.0)
  ml.atomic_add(out.at[n, oh + kh, (ow + kw)[:, None], ch[None, :]], v.astype(jnp.float32), mask=(ow < OW)[:, None])


def ref_col2im(cols, N, H, W, K):
  C = cols.shape[1] // (K * K)
  OH, OW = H - K + 1, W - K + 1
  c = np.asarray(cols, np.float32).reshape(N, OH, OW, K, K, C)
  out = np.zeros((N, H, W, C), np.float32)
  for kh in range(K):
    for kw in range(K):
      out[:, kh:kh + OH, kw:kw + OW] += c[:, :, :, kh, kw]
  return out


# ---------------------------------------------------------------- layouts and uint8

@mg.mgpu_kernel(out_shape=lambda x, mean, std: S((x.shape[0], x.shape[3], x.shape[1], x.shape[2]), F32),
                grid=lambda x, mean, std: (x.shape[0], x.shape[1]))
def normalize_nhwc_u8_to_nchw(x, mean, std, out):
  """uint8 NHWC image -> float32 NCHW, (x / 255 - mean) / std per channel; W not a multiple of anything."""
  n, h = ml.program_id(0), ml.program_id(1)
  W, C = x.shape[2], x.shape[3]
  w = ml.arange(64)
  c = ml.arange(4)
  v = ml.load(x.at[n, h, w[:, None], c[None, :]], mask=(w[:, None] < W) & (c[None, :] < C), other=0)
  mu = ml.load(mean.at[c], mask=c < C, other=0.0)
  sd = ml.load(std.at[c], mask=c < C, other=1.0)
  y = (v.astype(jnp.float32) / 255.0 - mu[None, :]) / sd[None, :]
  ml.store(out.at[n, c[None, :], h, w[:, None]], y, mask=(w[:, None] < W) & (c[None, :] < C))


def ref_normalize(x, mean, std):
  y = (np.asarray(x, np.float32) / 255.0 - mean) / std
  return y.transpose(0, 3, 1, 2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2], x.shape[3], x.shape[1]), x.dtype),
                grid=lambda x: (x.shape[0], x.shape[2]))
def nchw_to_nhwc(x, out):
  """A layout change: each program reads a (C, W) slab of one image row and writes it (W, C)."""
  n, h = ml.program_id(0), ml.program_id(1)
  out[n, h] = x[n, :, h, :].T


@mg.mgpu_kernel(out_shape=lambda x, w, scale: S((x.shape[0], x.shape[1] - 2, x.shape[2] - 2), jnp.int8),
                grid=lambda x, w, scale: (x.shape[0],))
def conv3x3_int8_requant(x, w, scale, out):
  """int8 image (P, H, W) conv with int8 3x3 weights in int32, requantised by a float scale to int8 (saturating)."""
  p = ml.program_id(0)
  r, c = ml.arange(32), ml.arange(64)
  acc = ml.zeros((32, 64), jnp.int32)
  for t in range(9):
    i, j = t // 3, t % 3
    v = ml.load(x.at[p, (r + i)[:, None], (c + j)[None, :]], mask=((r + i)[:, None] < x.shape[1])
                & ((c + j)[None, :] < x.shape[2]), other=0)
    acc += v.astype(jnp.int32) * w[i, j].astype(jnp.int32)       # (a run-time loop over the taps)
  y = jnp.round(acc.astype(jnp.float32) * scale[0])
  ml.store(out.at[p, r[:, None], c[None, :]], jnp.clip(y, -128, 127).astype(jnp.int8),
           mask=(r[:, None] < out.shape[1]) & (c[None, :] < out.shape[2]))


def ref_int8_conv(x, w, scale):
  x = np.asarray(x, np.int32)
  OH, OW = x.shape[1] - 2, x.shape[2] - 2
  acc = sum(x[:, i:i + OH, j:j + OW] * int(w[i, j]) for i in range(3) for j in range(3))
  return np.clip(np.round(acc.astype(np.float32) * scale[0]), -128, 127).astype(np.int8)


# ---------------------------------------------------------------- pipelined implicit GEMM

@mg.mgpu_kernel(out_shape=lambda x, w, **k: S((x.shape[0], x.shape[1], w.shape[2]), F32),
                grid=lambda x, w, *, BM, **k: (x.shape[0], ml.cdiv(x.shape[1], BM)),
                block=lambda x, w, *, BM, **k: 256 if BM >= 128 else 128)
def conv1d_gemm_pipelined(x, w, out, *, BM: ml.constexpr, BK: ml.constexpr, STAGES: ml.constexpr,
                          WS: ml.constexpr = False):
  """Dense 1-D conv (B, L, CI) x (K, CI, CO), 'same' padding, as K * CI / BK TMA-fed dots in a pipelined loop
  (warp-specialised with WS; two warpgroups for BM of 128): tap k's A tile is x's rows shifted by k - K // 2 (TMA
  reads zeros outside)."""
  b = ml.program_id(0)
  t0 = ml.program_id(1) * BM
  KT, CI, CO = w.shape
  a_s = ml.smem((BM, BK), x.dtype)
  b_s = ml.smem((BK, CO), w.dtype)
  acc = ml.zeros((BM, CO), jnp.float32)
  nk = CI // BK
  for s in ml.range(KT * nk, stages=STAGES, warp_specialize=WS):
    k = s // nk
    c0 = s % nk * BK
    ml.copy(x.at[b, ml.ds(t0 + k - KT // 2, BM), ml.ds(c0, BK)], a_s)
    ml.copy(w.at[k, ml.ds(c0, BK), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  t = t0 + ml.arange(BM)
  ml.store(out.at[b, t[:, None], ml.arange(CO)[None, :]], acc, mask=(t < x.shape[1])[:, None])


def ref_conv1d_dense(x, w):
  y = jax.lax.conv_general_dilated(jnp.asarray(x, F32), jnp.asarray(w, F32), (1,), [(w.shape[0] // 2,) * 2],
                                   dimension_numbers=("NWC", "WIO", "NWC"), precision="highest")
  return np.asarray(y)
