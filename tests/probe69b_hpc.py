"""Probe 69b's corpus, its second part: HPC kernels (n-body forces with rsqrt, k-means assignment and centroid sums by
atomics, radix-2 FFT stages on split real and imaginary arrays, multi-block prefix sums, histograms, Jacobi and
red-black Gauss-Seidel sweeps). Same CASES form as probe69b_sparse.py."""
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69b_sparse import F32, I32, S, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- n-body
@mg.mgpu_kernel(out_shape=lambda p, m, **k: S(p.shape, F32), grid=lambda p, m, *, BI, **k: (p.shape[1] // BI,))
def nbody_forces(pos, mass, acc_out, *, BI: ml.constexpr, BJ: ml.constexpr, EPS2: ml.constexpr):
  """pos is (3, n) (structure of arrays); each program accumulates the pull of every body on its BI bodies."""
  n = pos.shape[1]
  i = ml.program_id(0) * BI + ml.arange(0, BI)
  xi, yi, zi = pos[0, i], pos[1, i], pos[2, i]
  ax = ml.zeros((BI,), F32)
  ay = ml.zeros((BI,), F32)
  az = ml.zeros((BI,), F32)
  for t in range(n // BJ):
    j = t * BJ + ml.arange(0, BJ)
    dx = pos[0, j][None, :] - xi[:, None]
    dy = pos[1, j][None, :] - yi[:, None]
    dz = pos[2, j][None, :] - zi[:, None]
    inv = ml.rsqrt(dx * dx + dy * dy + dz * dz + EPS2)
    s = mass[j][None, :] * inv * inv * inv
    ax += ml.sum(s * dx, axis=1)
    ay += ml.sum(s * dy, axis=1)
    az += ml.sum(s * dz, axis=1)
  acc_out[0, i] = ax
  acc_out[1, i] = ay
  acc_out[2, i] = az


def _nbody_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((3, 128)).astype(np.float32), r.random(128).astype(np.float32)), dict(BI=32, BJ=64, EPS2=0.01)


def _nbody_ref(pos, m, *, EPS2, **k):
  p = pos.astype(np.float64)
  d = p[:, None, :] - p[:, :, None]
  inv3 = (np.sum(d * d, 0) + EPS2) ** -1.5
  return np.sum(d * (m[None, :] * inv3)[None], axis=2)


case("nbody_soa_rsqrt", nbody_forces, _nbody_make, _nbody_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda p, **k: S(p.shape, F32), grid=lambda p, *, BI, **k: (p.shape[0] // BI,))
def nbody_aos(p, a, *, BI: ml.constexpr, BJ: ml.constexpr):
  """pos as (n, 4) rows of x, y, z, mass (CUDA's float4 bodies), tiles of bodies read as (BJ, 4) windows."""
  i = ml.program_id(0)
  me = p.at[ml.ds(i * BI, BI), :][...]
  acc = ml.zeros((BI, 3), F32)
  for t in range(p.shape[0] // BJ):
    other = p.at[ml.ds(t * BJ, BJ), :][...]
    d = other[None, :, :3] - me[:, None, :3]                      # (BI, BJ, 3)
    r2 = ml.sum(d * d, axis=2) + 0.01
    inv = ml.rsqrt(r2)
    s = other[:, 3][None, :] * inv * inv * inv
    acc += ml.sum(d * s[:, :, None], axis=1)
  a.at[ml.ds(i * BI, BI), :][...] = ml.concatenate([acc, ml.zeros((BI, 1), F32)], axis=1)


def _nbody_aos_ref(p, **k):
  q = p.astype(np.float64)
  d = q[None, :, :3] - q[:, None, :3]
  inv3 = (np.sum(d * d, 2) + 0.01) ** -1.5
  acc = np.sum(d * (q[None, :, 3] * inv3)[:, :, None], axis=1)
  return np.concatenate([acc, np.zeros((p.shape[0], 1))], 1)


case("nbody_aos_float4_rows", nbody_aos, lambda s: ((rng_of(s).standard_normal((64, 4)).astype(np.float32) + [0, 0, 0, 2],),
                                                      dict(BI=16, BJ=16)), _nbody_aos_ref, 1e-5)


# ---------------------------------------------------------------- k-means
@mg.mgpu_kernel(out_shape=lambda x, c, **k: S((x.shape[0],), I32), grid=lambda x, c, *, BN, **k: (x.shape[0] // BN,))
def kmeans_assign(x, cent, label, *, BN: ml.constexpr):
  rows = ml.program_id(0) * BN + ml.arange(0, BN)
  K, D = cent.shape
  pts = x.at[ml.ds(ml.program_id(0) * BN, BN), :][...]             # (BN, D)
  c = cent[...]                                                     # (K, D)
  dist = ml.zeros((BN, K), F32)
  for d in ml.static_range(D):
    diff = pts[:, d][:, None] - c[:, d][None, :]
    dist += diff * diff
  label[rows] = ml.argmin(dist, axis=1).astype(I32)


def _km_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((128, 8)).astype(np.float32), r.standard_normal((16, 8)).astype(np.float32)), dict(BN=64)


def _km_labels(x, c):
  return np.argmin(np.sum((x[:, None, :] - c[None]) ** 2, -1), 1).astype(np.int32)


case("kmeans_assign_argmin", kmeans_assign, _km_make, lambda x, c, **k: _km_labels(x, c), 0)


@mg.mgpu_kernel(out_shape=lambda x, c, **k: (S(c.shape, F32), S((c.shape[0],), I32)),
                grid=lambda x, c, *, BN, **k: (x.shape[0] // BN,))
def kmeans_step(x, cent, sums, counts, *, BN: ml.constexpr):
  """Assignment by a dot (|x|^2 - 2 x.c + |c|^2) and argmin, then centroid sums and counts by atomics."""
  pts = x.at[ml.ds(ml.program_id(0) * BN, BN), :][...]
  c = cent[...]
  dist = ml.sum(c * c, axis=1)[None, :] - 2.0 * ml.sum(pts[:, None, :] * c[None, :, :], axis=2)
  lab = ml.argmin(dist, axis=1)
  ml.atomic_add(sums.at[lab, :], pts)
  ml.atomic_add(counts.at[lab], 1)


def _km_step_ref(x, c, **k):
  lab = np.argmin(np.sum(c * c, 1)[None] - 2 * (x @ c.T), 1)
  sums = np.zeros(c.shape, np.float32)
  np.add.at(sums, lab, x)
  return sums, np.bincount(lab, minlength=c.shape[0]).astype(np.int32)


case("kmeans_centroid_sums_atomics", kmeans_step, _km_make, _km_step_ref, 1e-5)


# ---------------------------------------------------------------- radix-2 FFT stages (split real / imaginary)
@mg.mgpu_kernel(out_shape=lambda re, im, **k: (S(re.shape, F32), S(im.shape, F32)),
                grid=lambda re, im, *, BLOCK, **k: (re.shape[0] // 2 // BLOCK,))
def fft_stage(re, im, ore, oim, *, H: ml.constexpr, BLOCK: ml.constexpr):
  """One decimation-in-time butterfly stage of half-size H: pairs (i0, i0 + H), twiddle exp(-2 pi i k / 2H)."""
  b = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
  k = b % H
  i0 = (b // H) * (2 * H) + k
  i1 = i0 + H
  ang = k.astype(F32) * (-np.pi / H)
  wr, wi = ml.cos(ang), ml.sin(ang)
  ar, ai = re[i0], im[i0]
  br, bi = re[i1], im[i1]
  tr = br * wr - bi * wi
  ti = br * wi + bi * wr
  ore[i0] = ar + tr
  oim[i0] = ai + ti
  ore[i1] = ar - tr
  oim[i1] = ai - ti


def _fft_stage_np(re, im, H):
  ore, oim = re.copy(), im.copy()
  for blk in range(0, len(re), 2 * H):
    k = np.arange(H)
    w = np.exp(-1j * np.pi * k / H)
    a = re[blk + k] + 1j * im[blk + k]
    t = (re[blk + H + k] + 1j * im[blk + H + k]) * w
    ore[blk + k], oim[blk + k] = (a + t).real, (a + t).imag
    ore[blk + H + k], oim[blk + H + k] = (a - t).real, (a - t).imag
  return ore.astype(np.float32), oim.astype(np.float32)


case("fft_radix2_stage_h4", fft_stage, lambda s: ((rng_of(s).standard_normal(256).astype(np.float32),
                                                     rng_of(s + 7).standard_normal(256).astype(np.float32)), dict(H=4, BLOCK=64)),
     lambda re, im, *, H, **k: _fft_stage_np(re, im, H), 1e-5)


def fft_full(re, im, interpret=False):
  """All log2(n) stages after the bit reversal, one launch a stage: the whole FFT."""
  n = re.shape[0]
  bits = int(np.log2(n))
  rev = np.array([int(format(i, f"0{bits}b")[::-1], 2) for i in range(n)])
  re, im = re[rev], im[rev]
  h = 1
  while h < n:
    re, im = fft_stage(re, im, H=h, BLOCK=64, interpret=interpret)
    h *= 2
  return re, im


def _fft_ref(re, im):
  f = np.fft.fft(re.astype(np.float64) + 1j * im)
  return f.real, f.imag


case("fft_radix2_all_stages", fft_full, lambda s: ((rng_of(s).standard_normal(256).astype(np.float32),
                                                    rng_of(s + 3).standard_normal(256).astype(np.float32)), {}), _fft_ref, 1e-5)


@ml.inline
def butterfly(r, m, pr, pm, upper, ang):
  """Each element of a radix-2 pair given its partner's (pr, pm): the upper one a + w b, the lower one a - w b, with
  w = exp(i ang) (the odd element b is the lower one's own)."""
  wr, wi = ml.cos(ang), ml.sin(ang)
  br, bi = ml.where(upper, pr, r), ml.where(upper, pm, m)
  ar, ai = ml.where(upper, r, pr), ml.where(upper, m, pm)
  tr, ti = br * wr - bi * wi, br * wi + bi * wr
  return ml.where(upper, ar + tr, ar - tr), ml.where(upper, ai + ti, ai - ti)


@mg.mgpu_kernel(out_shape=lambda re, im: (S(re.shape, F32), S(im.shape, F32)), grid=lambda re, im: (re.shape[0],))
def fft_in_registers(re, im, ore, oim):
  """A whole 64-point FFT a row, in registers: bit reversal by a register gather, stages by partner gathers."""
  N = re.shape[1]
  i = ml.arange(0, N)
  r = re.at[ml.program_id(0)][...]
  m = im.at[ml.program_id(0)][...]
  rev = ml.zeros((N,), I32)
  for bit in ml.static_range(6):
    rev |= ((i >> bit) & 1) << (5 - bit)
  r = r[rev]
  m = m[rev]
  for s in ml.static_range(6):
    h = 1 << s
    k = i % h
    upper = (i & h) == 0
    partner = i ^ h
    r, m = butterfly(r, m, r[partner], m[partner], upper, k.astype(F32) * (-np.pi / h))
  ore.at[ml.program_id(0)][...] = r
  oim.at[ml.program_id(0)][...] = m


def _fft_rows_ref(re, im):
  f = np.fft.fft(re.astype(np.float64) + 1j * im, axis=1)
  return f.real, f.imag


case("fft_64_in_registers", fft_in_registers, lambda s: ((rng_of(s).standard_normal((4, 64)).astype(np.float32),
                                                          rng_of(s + 1).standard_normal((4, 64)).astype(np.float32)), {}),
     _fft_rows_ref, 1e-5)


# ---------------------------------------------------------------- multi-block prefix sums
@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape, x.dtype), S((x.shape[0] // k["BLOCK"],), x.dtype)),
                grid=lambda x, *, BLOCK: (x.shape[0] // BLOCK,))
def scan_blocks(x, y, sums, *, BLOCK: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * BLOCK, BLOCK)][...]
  c = ml.cumsum(v, axis=0)
  y.at[ml.ds(i * BLOCK, BLOCK)][...] = c
  sums[i] = ml.sum(v)


@mg.mgpu_kernel(out_shape=lambda s: s, grid=(1,))
def scan_sums_exclusive(s, o):
  v = s[...]
  o[...] = ml.cumsum(v, axis=0) - v


@mg.mgpu_kernel(out_shape=lambda y, off, **k: y, grid=lambda y, off, *, BLOCK: (y.shape[0] // BLOCK,))
def scan_fixup(y, off, o, *, BLOCK: ml.constexpr):
  i = ml.program_id(0)
  o.at[ml.ds(i * BLOCK, BLOCK)][...] = y.at[ml.ds(i * BLOCK, BLOCK)][...] + off[i]


def prefix_sum(x, interpret=False):
  y, sums = scan_blocks(x, BLOCK=128, interpret=interpret)
  return scan_fixup(y, scan_sums_exclusive(sums, interpret=interpret), BLOCK=128, interpret=interpret)


case("prefix_sum_three_passes_int32", prefix_sum, lambda s: ((rng_of(s).integers(-50, 50, 1024).astype(np.int32),), {}),
     lambda x: np.cumsum(x).astype(np.int32), 0)
case("prefix_sum_three_passes_f32", prefix_sum, lambda s: ((rng_of(s).random(1024).astype(np.float32),), {}),
     lambda x: np.cumsum(x.astype(np.float64)), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x, **k: S(x.shape, x.dtype), grid=lambda x, *, BLOCK: (x.shape[0] // BLOCK,))
def scan_decoupled_serial(x, y, *, BLOCK: ml.constexpr):
  """A single-kernel scan whose program adds every earlier block's sum (re-reading them: no inter-CTA waits)."""
  i = ml.program_id(0)
  off = 0
  for b in range(i):
    off += ml.sum(x.at[ml.ds(b * BLOCK, BLOCK)][...])
  y.at[ml.ds(i * BLOCK, BLOCK)][...] = ml.cumsum(x.at[ml.ds(i * BLOCK, BLOCK)][...], axis=0) + off


case("prefix_sum_rereading_earlier_blocks", scan_decoupled_serial,
     lambda s: ((rng_of(s).integers(-9, 9, 512).astype(np.int32),), dict(BLOCK=64)), lambda x, **k: np.cumsum(x).astype(np.int32), 0)


# ---------------------------------------------------------------- histograms
@mg.mgpu_kernel(out_shape=lambda x, **k: S((k["BINS"],), I32), grid=lambda x, **k: (ml.cdiv(x.shape[0], k["BLOCK"]),))
def histogram_gmem(x, h, *, BINS: ml.constexpr, BLOCK: ml.constexpr, LO: ml.constexpr, HI: ml.constexpr):
  offs = ml.program_id(0) * BLOCK + ml.arange(0, BLOCK)
  m = offs < x.shape[0]
  v = ml.load(x.at[offs], mask=m, other=LO)
  b = ml.clip(((v - LO) * (BINS / (HI - LO))).astype(I32), 0, BINS - 1)
  ml.atomic_add(h.at[b], 1, mask=m)


def _hist_make(seed):
  return (rng_of(seed).standard_normal(1000).astype(np.float32),), dict(BINS=32, BLOCK=256, LO=-3.0, HI=3.0)


def _hist_ref(x, *, BINS, LO, HI, **k):
  b = np.clip(((x - np.float32(LO)) * np.float32(BINS / (HI - LO))).astype(np.int32), 0, BINS - 1)
  return np.bincount(b, minlength=BINS).astype(np.int32)


case("histogram_gmem_atomics_tail", histogram_gmem, _hist_make, _hist_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, **k: S((256,), I32), grid=lambda x, **k: (x.shape[0] // k["BLOCK"],))
def histogram_smem(x, h, *, BLOCK: ml.constexpr):
  """Byte histogram: a private SMEM histogram a CTA, merged into GMEM by one atomic add a bin."""
  local = ml.smem((256,), I32)
  local[...] = ml.zeros((256,), I32)
  v = x.at[ml.ds(ml.program_id(0) * BLOCK, BLOCK)][...]
  ml.atomic_add(local.at[v.astype(I32)], 1)
  ml.atomic_add(h.at[:], local[...])


case("histogram_smem_private_bytes", histogram_smem,
     lambda s: ((rng_of(s).integers(0, 256, 2048).astype(np.uint8),), dict(BLOCK=512)),
     lambda x, **k: np.bincount(x, minlength=256).astype(np.int32), 0)


# ---------------------------------------------------------------- Jacobi and red-black Gauss-Seidel
@mg.mgpu_kernel(out_shape=lambda u, f, **k: u, grid=lambda u, f, *, BR, **k: (u.shape[0] // BR,))
def jacobi_sweep(u, f, o, *, BR: ml.constexpr, H2: ml.constexpr):
  """One Jacobi sweep of -lap(u) = f; the boundary rows and columns are kept."""
  H, W = u.shape
  r = ml.program_id(0) * BR + ml.arange(0, BR)
  c = ml.arange(0, W)
  R, C = r[:, None], c[None, :]
  inner = (R > 0) & (R < H - 1) & (C > 0) & (C < W - 1)
  up = ml.load(u.at[R - 1, C], mask=inner, other=0.0)
  dn = ml.load(u.at[R + 1, C], mask=inner, other=0.0)
  lf = ml.load(u.at[R, C - 1], mask=inner, other=0.0)
  rt = ml.load(u.at[R, C + 1], mask=inner, other=0.0)
  new = 0.25 * (up + dn + lf + rt + H2 * f.at[R, C].load())
  o.at[R, C].store(ml.where(inner, new, u.at[R, C].load()))


def _jac_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((64, 64)).astype(np.float32), r.standard_normal((64, 64)).astype(np.float32)), dict(BR=16, H2=0.01)


def _jac_np(u, f, H2):
  o = u.copy()
  o[1:-1, 1:-1] = 0.25 * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:] + np.float32(H2) * f[1:-1, 1:-1])
  return o


case("jacobi_5pt_masked_pointer_grids", jacobi_sweep, _jac_make, lambda u, f, *, H2, **k: _jac_np(u, f, H2), 1e-6)


@mg.mgpu_kernel(out_shape=lambda u, f, **k: u, grid=lambda u, f, *, BR, **k: (u.shape[0] // BR,), input_output_aliases={0: 0})
def red_black_gs(u_in, f, u, *, BR: ml.constexpr, COLOR: ml.constexpr, H2: ml.constexpr):
  """A red-black Gauss-Seidel half-sweep in place: cells of one colour read only the other colour's."""
  H, W = u.shape
  r = ml.program_id(0) * BR + ml.arange(0, BR)
  c = ml.arange(0, W)
  R, C = r[:, None], c[None, :]
  mine = (R > 0) & (R < H - 1) & (C > 0) & (C < W - 1) & ((R + C) % 2 == COLOR)
  s = (ml.load(u.at[R - 1, C], mask=mine, other=0.0) + ml.load(u.at[R + 1, C], mask=mine, other=0.0)
       + ml.load(u.at[R, C - 1], mask=mine, other=0.0) + ml.load(u.at[R, C + 1], mask=mine, other=0.0))
  ml.store(u.at[R, C], 0.25 * (s + H2 * ml.load(f.at[R, C], mask=mine, other=0.0)), mask=mine)


def gauss_seidel_rb(u, f, interpret=False):
  for color in (0, 1):
    u = red_black_gs(u, f, BR=16, COLOR=color, H2=0.01, interpret=interpret)
  return u


def _gs_ref(u, f):
  o = u.astype(np.float32).copy()
  for color in (0, 1):
    for i in range(1, u.shape[0] - 1):
      for j in range(1, u.shape[1] - 1):
        if (i + j) % 2 == color:
          o[i, j] = np.float32(0.25) * (o[i - 1, j] + o[i + 1, j] + o[i, j - 1] + o[i, j + 1] + np.float32(0.01) * f[i, j])
  return o


case("gauss_seidel_red_black_in_place", gauss_seidel_rb, lambda s: (_jac_make(s)[0], {}), _gs_ref, 1e-5)
