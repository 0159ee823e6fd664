"""Probe 57g's corpus of point-cloud, 3-D and rendering kernels that computed right (kept as a guard; a few need the
probe's fixes): farthest point sampling (scalar reads of the chosen point, a register gather of it, lax.fori_loop
over a batch), kNN (lax.top_k and argsort of a distance tile, ties among grid points), ball query (a cumulative count
of the points in the radius, a loop over the points, a sort of masked indices), voxelisation by atomics (counts,
feature sums, max pooling, the first point of each voxel), trilinear interpolation (8 gathers, a feature volume's
rows), NeRF volume rendering (an exclusive cumprod of transmittance, a ray-marching loop, an associative scan),
inverse-CDF sampling, Gaussian splatting's front-to-back compositing with early stopping (a break, a while loop),
grid_sample (zero and border padding, both align_corners), marching cubes' case index and table lookups, chamfer
distance (both directions, atomics across programs), three_nn interpolation, ray-box slabs, a z-buffer by
atomic_min, sphere tracing. Each is run in interpret mode against NumPy and built for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct


def rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def uni(shape, seed, lo=0., hi=1.):
  return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


def fps_ref(p, m):  # p (3, N)
  N = p.shape[1]; mind = np.full(N, 1e10, np.float32); far = 0; out = []
  for i in range(m):
    out.append(far)
    d = ((p - p[:, far:far+1]) ** 2).sum(0)
    mind = np.minimum(mind, d); far = int(np.argmax(mind))
  return np.array(out, np.int32)

@mg.mgpu_kernel(out_shape=lambda p: S((128,), jnp.int32))
def fps_scalar_reads(p, idx):
  x, y, z = p[0, :], p[1, :], p[2, :]
  mind = ml.full(x.shape, 1e10, jnp.float32)
  far = 0
  for i in range(128):
    idx[i] = far
    cx, cy, cz = p[0, far], p[1, far], p[2, far]
    d = (x - cx) ** 2 + (y - cy) ** 2 + (z - cz) ** 2
    mind = ml.minimum(mind, d)
    far = ml.argmax(mind)

@mg.mgpu_kernel(out_shape=lambda p: S((128,), jnp.int32))
def fps_register_gather(p, idx):
  pts = p[...]
  mind = ml.full((p.shape[1],), 1e10, jnp.float32)
  far = 0
  for i in range(128):
    idx[i] = far
    c = pts[:, far]
    d = ml.sum((pts - c[:, None]) ** 2, axis=0)
    mind = ml.minimum(mind, d)
    far = jnp.argmax(mind)

@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0], 64), jnp.int32), grid=lambda p: (p.shape[0],))
def fps_batched_fori(p, idx):
  b = ml.program_id(0)
  pts = p[b]                               # (3, N)
  def body(i, carry):
    mind, far = carry
    idx[b, i] = far
    c = pts[:, far]
    d = jnp.sum(jnp.square(pts - c[:, None]), axis=0)
    mind = jnp.minimum(mind, d)
    return mind, jnp.argmax(mind).astype(jnp.int32)
  jax.lax.fori_loop(0, 64, body, (jnp.full((p.shape[2],), jnp.inf, jnp.float32), jnp.int32(0)))

def knn_ref(q, r, k):
  d = ((q[:, None, :] - r[None, :, :]) ** 2).sum(-1)
  return np.argsort(d, 1, kind="stable")[:, :k].astype(np.int32)

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[1], 16), jnp.int32), grid=lambda q, r: (q.shape[1] // 64,))
def knn_topk(q, r, idx):    # q (3, M), r (3, N): coordinate-major
  i = ml.program_id(0) * 64
  d = ml.zeros((64, r.shape[1]), jnp.float32)
  for c in range(3):
    qc = q[c, ml.ds(i, 64)]
    rc = r[c, :]
    d += (qc[:, None] - rc[None, :]) ** 2
  _, nn = jax.lax.top_k(-d, 16)
  idx[ml.ds(i, 64), :] = nn

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[0], 8), jnp.int32), grid=lambda q, r: (q.shape[0] // 64,))
def knn_argsort_rows(q, r, idx):    # q (M, 3), r (N, 3)
  i = ml.program_id(0) * 64
  qq = q[ml.ds(i, 64), :]
  rr = r[...]
  d = ml.zeros((64, r.shape[0]), jnp.float32)
  for c in range(3):
    d += (qq[:, c][:, None] - rr[:, c][None, :]) ** 2
  idx[ml.ds(i, 64), :] = jnp.argsort(d, axis=1)[:, :8]

def ball_ref(q, r, rad, k):
  d = ((q.T[:, None, :] - r.T[None, :, :]) ** 2).sum(-1)
  out = np.zeros((q.shape[1], k), np.int32)
  for m in range(q.shape[1]):
    hits = np.nonzero(d[m] < rad * rad)[0]
    if len(hits) == 0: continue
    hits = list(hits[:k]); hits += [hits[0]] * (k - len(hits)); out[m] = hits
  return out

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[1], 16), jnp.int32), grid=lambda q, r: (q.shape[1] // 64,))
def ball_query_cumsum(q, r, idx, radius: ml.constexpr = 0.5):
  i = ml.program_id(0) * 64
  d = ml.zeros((64, r.shape[1]), jnp.float32)
  for c in range(3):
    d += (q[c, ml.ds(i, 64)][:, None] - r[c, :][None, :]) ** 2
  inside = d < radius * radius
  cnt = jnp.cumsum(inside.astype(jnp.int32), axis=1)
  cols = ml.arange(r.shape[1])[None, :]
  first = jnp.argmax(inside, axis=1)
  out = []
  for s in range(16):
    hit = inside & (cnt == s + 1)
    j = jnp.max(jnp.where(hit, cols, -1), axis=1)
    out.append(jnp.where(j < 0, first, j))
  idx[ml.ds(i, 64), :] = jnp.stack(out, axis=1)

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[1], 16), jnp.int32), grid=lambda q, r: (q.shape[1] // 64,))
def ball_query_loop(q, r, idx, radius: ml.constexpr = 0.5):
  i = ml.program_id(0) * 64
  qx, qy, qz = q[0, ml.ds(i, 64)], q[1, ml.ds(i, 64)], q[2, ml.ds(i, 64)]
  cnt = ml.zeros((64,), jnp.int32)
  first = ml.zeros((64,), jnp.int32)
  slots = ml.arange(16)[None, :]
  out = ml.zeros((64, 16), jnp.int32)
  for j in range(r.shape[1]):
    dx = qx - r[0, j]; dy = qy - r[1, j]; dz = qz - r[2, j]
    hit = dx * dx + dy * dy + dz * dz < radius * radius
    first = ml.where(hit & (cnt == 0), j, first)
    out = ml.where(hit[:, None] & (slots == cnt[:, None]), j, out)
    cnt = cnt + hit.astype(jnp.int32)
  out = ml.where(slots >= cnt[:, None], first[:, None], out)
  idx[ml.ds(i, 64), :] = out

G = 16

@mg.mgpu_kernel(out_shape=lambda p: S((G * G * G,), jnp.int32), grid=lambda p: (p.shape[1] // 128,))
def voxel_count(p, counts, vs: ml.constexpr = 1.0 / G):
  i = ml.program_id(0) * 128
  ix = (p[0, ml.ds(i, 128)] / vs).astype(jnp.int32)
  iy = (p[1, ml.ds(i, 128)] / vs).astype(jnp.int32)
  iz = (p[2, ml.ds(i, 128)] / vs).astype(jnp.int32)
  ix, iy, iz = ml.clip(ix, 0, G - 1), ml.clip(iy, 0, G - 1), ml.clip(iz, 0, G - 1)
  ml.atomic_add(counts.at[(iz * G + iy) * G + ix], 1)

def voxel_ref(p):
  ix = np.clip((p / (1.0 / G)).astype(np.int32), 0, G - 1)
  lin = (ix[2] * G + ix[1]) * G + ix[0]
  return np.bincount(lin, minlength=G ** 3).astype(np.int32), lin

@mg.mgpu_kernel(out_shape=lambda p, f: (S((G ** 3, f.shape[1]), jnp.float32), S((G ** 3,), jnp.float32)),
                grid=lambda p, f: (p.shape[0] // 64,))
def voxel_feature_sum(p, f, acc, cnt):
  i = ml.program_id(0) * 64
  v = p[ml.ds(i, 64), :]
  ijk = jnp.floor(v * G).astype(jnp.int32)
  ijk = jnp.clip(ijk, 0, G - 1)
  lin = (ijk[:, 2] * G + ijk[:, 1]) * G + ijk[:, 0]
  ml.atomic_add(acc.at[lin, :], f[ml.ds(i, 64), :])
  ml.atomic_add(cnt.at[lin], 1.0)

def vfs_ref(p, f):
  ijk = np.clip(np.floor(p * G).astype(np.int32), 0, G - 1)
  lin = (ijk[:, 2] * G + ijk[:, 1]) * G + ijk[:, 0]
  acc = np.zeros((G ** 3, f.shape[1]), np.float32); np.add.at(acc, lin, f)
  return acc, np.bincount(lin, minlength=G ** 3).astype(np.float32)

@mg.mgpu_kernel(out_shape=lambda p, f: S((G ** 3,), jnp.float32), grid=lambda p, f: (p.shape[1] // 128,))
def voxel_max_pool(p, f, o):
  i = ml.program_id(0) * 128
  ijk = [jnp.clip(jnp.floor(p[c, ml.ds(i, 128)] * G).astype(jnp.int32), 0, G - 1) for c in range(3)]
  lin = (ijk[2] * G + ijk[1]) * G + ijk[0]
  ml.atomic_max(o.at[lin], f[ml.ds(i, 128)])

def vmax_ref(p, f):
  ijk = np.clip(np.floor(p * G).astype(np.int32), 0, G - 1)
  lin = (ijk[2] * G + ijk[1]) * G + ijk[0]
  o = np.full(G ** 3, -np.inf, np.float32); np.maximum.at(o, lin, f); return o

@mg.mgpu_kernel(out_shape=lambda p: S((G ** 3,), jnp.int32), grid=lambda p: (ml.cdiv(p.shape[1], 128),))
def voxel_first_point(p, o):
  i = ml.program_id(0) * 128
  n = i + ml.arange(128)
  m = n < p.shape[1]
  x = ml.load(p.at[0, n], mask=m, other=0.0); y = ml.load(p.at[1, n], mask=m, other=0.0); z = ml.load(p.at[2, n], mask=m, other=0.0)
  lin = ((z * G).astype(jnp.int32) * G + (y * G).astype(jnp.int32)) * G + (x * G).astype(jnp.int32)
  ml.atomic_min(o.at[lin], n, mask=m)

def vfirst_ref(p):
  ijk = (p * G).astype(np.int32)
  lin = (ijk[2] * G + ijk[1]) * G + ijk[0]
  o = np.full(G ** 3, np.iinfo(np.int32).max, np.int32); np.minimum.at(o, lin, np.arange(p.shape[1], dtype=np.int32)); return o

def tri_ref(grid, pts, align=True):
  D, H, W = grid.shape
  x, y, z = pts[:, 0] * (W - 1), pts[:, 1] * (H - 1), pts[:, 2] * (D - 1)
  x0, y0, z0 = np.floor(x).astype(int), np.floor(y).astype(int), np.floor(z).astype(int)
  fx, fy, fz = x - x0, y - y0, z - z0
  out = 0
  for dz in (0, 1):
    for dy in (0, 1):
      for dx in (0, 1):
        w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy) * (fz if dz else 1 - fz)
        out = out + w * grid[np.clip(z0 + dz, 0, D - 1), np.clip(y0 + dy, 0, H - 1), np.clip(x0 + dx, 0, W - 1)]
  return out.astype(np.float32)

@mg.mgpu_kernel(out_shape=lambda g, p: S((p.shape[0],), jnp.float32), grid=lambda g, p: (p.shape[0] // 128,))
def trilinear(g, p, o):
  D, H, W = g.shape
  i = ml.program_id(0) * 128
  x = p[ml.ds(i, 128), 0] * (W - 1)
  y = p[ml.ds(i, 128), 1] * (H - 1)
  z = p[ml.ds(i, 128), 2] * (D - 1)
  x0, y0, z0 = ml.floor(x), ml.floor(y), ml.floor(z)
  fx, fy, fz = x - x0, y - y0, z - z0
  x0, y0, z0 = x0.astype(jnp.int32), y0.astype(jnp.int32), z0.astype(jnp.int32)
  x1, y1, z1 = ml.minimum(x0 + 1, W - 1), ml.minimum(y0 + 1, H - 1), ml.minimum(z0 + 1, D - 1)
  c000 = g[z0, y0, x0]; c001 = g[z0, y0, x1]; c010 = g[z0, y1, x0]; c011 = g[z0, y1, x1]
  c100 = g[z1, y0, x0]; c101 = g[z1, y0, x1]; c110 = g[z1, y1, x0]; c111 = g[z1, y1, x1]
  c00 = c000 * (1 - fx) + c001 * fx; c01 = c010 * (1 - fx) + c011 * fx
  c10 = c100 * (1 - fx) + c101 * fx; c11 = c110 * (1 - fx) + c111 * fx
  c0 = c00 * (1 - fy) + c01 * fy; c1 = c10 * (1 - fy) + c11 * fy
  o[ml.ds(i, 128)] = c0 * (1 - fz) + c1 * fz

@mg.mgpu_kernel(out_shape=lambda g, p: S((p.shape[0], g.shape[3]), jnp.float32), grid=lambda g, p: (p.shape[0] // 64,))
def trilinear_features(g, p, o):   # g (D, H, W, C) feature volume
  D, H, W, C = g.shape
  i = ml.program_id(0) * 64
  x = p[ml.ds(i, 64), 0] * (W - 1); y = p[ml.ds(i, 64), 1] * (H - 1); z = p[ml.ds(i, 64), 2] * (D - 1)
  x0f, y0f, z0f = jnp.floor(x), jnp.floor(y), jnp.floor(z)
  fx, fy, fz = x - x0f, y - y0f, z - z0f
  x0, y0, z0 = x0f.astype(jnp.int32), y0f.astype(jnp.int32), z0f.astype(jnp.int32)
  acc = jnp.zeros((64, C), jnp.float32)
  for dz in (0, 1):
    for dy in (0, 1):
      for dx in (0, 1):
        w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy) * (fz if dz else 1 - fz)
        zi = jnp.minimum(z0 + dz, D - 1); yi = jnp.minimum(y0 + dy, H - 1); xi = jnp.minimum(x0 + dx, W - 1)
        acc += w[:, None] * g[zi, yi, xi, :]
  o[ml.ds(i, 64), :] = acc

def trif_ref(g, p):
  return np.stack([tri_ref(g[..., c], p) for c in range(g.shape[3])], 1)

def nerf_ref(sigma, rgb, t):
  delta = np.concatenate([t[:, 1:] - t[:, :-1], np.full((t.shape[0], 1), 1e10, np.float32)], 1)
  alpha = 1 - np.exp(-sigma * delta)
  T = np.cumprod(np.concatenate([np.ones((t.shape[0], 1), np.float32), 1 - alpha + 1e-10], 1), 1)[:, :-1]
  w = alpha * T
  return np.stack([(w * rgb[c]).sum(1) for c in range(3)], 0), (w * t).sum(1), w.sum(1)

@mg.mgpu_kernel(out_shape=lambda s, c, t: (S((3, s.shape[0]), jnp.float32), S((s.shape[0],), jnp.float32), S((s.shape[0],), jnp.float32)),
                grid=lambda s, c, t: (s.shape[0] // 16,))
def nerf_render(sig, rgb, tv, color, depth, acc):
  r = ml.ds(ml.program_id(0) * 16, 16)
  sigma, t = sig[r, :], tv[r, :]
  delta = jnp.concatenate([t[:, 1:] - t[:, :-1], jnp.full((16, 1), 1e10, jnp.float32)], axis=1)
  alpha = 1.0 - jnp.exp(-sigma * delta)
  T = jnp.cumprod(jnp.concatenate([jnp.ones((16, 1), jnp.float32), 1.0 - alpha + 1e-10], axis=1), axis=1)[:, :-1]
  w = alpha * T
  for ch in range(3):
    color[ch, r] = jnp.sum(w * rgb[ch, r, :], axis=1)
  depth[r] = jnp.sum(w * t, axis=1)
  acc[r] = jnp.sum(w, axis=1)

@mg.mgpu_kernel(out_shape=lambda s, c, t: (S((3, s.shape[0]), jnp.float32), S((s.shape[0],), jnp.float32), S((s.shape[0],), jnp.float32)),
                grid=lambda s, c, t: (s.shape[0] // 128,))
def nerf_march_loop(sig, rgb, tv, color, depth, acc):
  r = ml.ds(ml.program_id(0) * 128, 128)
  T = ml.full((128,), 1.0, jnp.float32)
  cr = ml.zeros((128,), jnp.float32); cg = ml.zeros((128,), jnp.float32); cb = ml.zeros((128,), jnp.float32)
  d = ml.zeros((128,), jnp.float32); a = ml.zeros((128,), jnp.float32)
  ns = sig.shape[1]
  for s in range(ns):
    t0 = tv[r, s]
    if s < ns - 1:
      dl = tv[r, s + 1] - t0
    else:
      dl = ml.full((128,), 1e10, jnp.float32)
    alpha = 1.0 - ml.exp(-sig[r, s] * dl)
    w = alpha * T
    cr += w * rgb[0, r, s]; cg += w * rgb[1, r, s]; cb += w * rgb[2, r, s]
    d += w * t0; a += w
    T = T * (1.0 - alpha + 1e-10)
  color[0, r] = cr; color[1, r] = cg; color[2, r] = cb
  depth[r] = d; acc[r] = a

@mg.mgpu_kernel(out_shape=lambda s, c, t: (S((3, s.shape[0]), jnp.float32), S((s.shape[0],), jnp.float32), S((s.shape[0],), jnp.float32)),
                grid=lambda s, c, t: (s.shape[0] // 16,))
def nerf_assoc_scan(sig, rgb, tv, color, depth, acc):
  r = ml.ds(ml.program_id(0) * 16, 16)
  sigma, t = sig[r, :], tv[r, :]
  delta = jnp.diff(t, axis=1, append=t[:, -1:] + 1e10)
  alpha = 1.0 - jnp.exp(-sigma * delta)
  trans = jax.lax.associative_scan(jnp.multiply, 1.0 - alpha + 1e-10, axis=1)
  T = jnp.pad(trans[:, :-1], ((0, 0), (1, 0)), constant_values=1.0)
  w = alpha * T
  rgbs = rgb[:, r, :]
  color[:, r] = jnp.sum(w[None] * rgbs, axis=-1)
  depth[r] = jnp.sum(w * t, axis=1)
  acc[r] = jnp.sum(w, axis=1)

def pdf_ref(bins, w, u):
  pdf = (w + 1e-5) / (w + 1e-5).sum(1, keepdims=True)
  cdf = np.concatenate([np.zeros((w.shape[0], 1), np.float32), np.cumsum(pdf, 1)], 1)
  out = np.zeros_like(u)
  for i in range(w.shape[0]):
    ind = np.searchsorted(cdf[i], u[i], side="right")
    below = np.maximum(ind - 1, 0); above = np.minimum(ind, cdf.shape[1] - 1)
    c0, c1 = cdf[i, below], cdf[i, above]; b0, b1 = bins[i, below], bins[i, above]
    den = np.where(c1 - c0 < 1e-5, 1, c1 - c0)
    out[i] = b0 + (u[i] - c0) / den * (b1 - b0)
  return out

@mg.mgpu_kernel(out_shape=lambda b, w, u: u, grid=lambda b, w, u: (u.shape[0],))
def sample_pdf(bins, wts, u, o):
  i = ml.program_id(0)
  w = wts[i, :] + 1e-5
  pdf = w / jnp.sum(w)
  cdf = jnp.concatenate([jnp.zeros((1,), jnp.float32), jnp.cumsum(pdf)])
  uu = u[i, :]
  ind = jnp.searchsorted(cdf, uu, side="right")
  below = jnp.maximum(ind - 1, 0)
  above = jnp.minimum(ind, cdf.shape[0] - 1)
  b = bins[i, :]
  c0, c1 = cdf[below], cdf[above]
  b0, b1 = b[below], b[above]
  den = jnp.where(c1 - c0 < 1e-5, 1.0, c1 - c0)
  o[i, :] = b0 + (uu - c0) / den * (b1 - b0)

def splat_ref(px, py, mu, conic, op, col, thr=1e-4):
  P = px.shape[0]; out = np.zeros((P,), np.float32); Tf = np.ones((P,), np.float32)
  for p in range(P):
    T = 1.0; c = 0.0
    for g in range(mu.shape[0]):
      dx, dy = mu[g, 0] - px[p], mu[g, 1] - py[p]
      power = -0.5 * (conic[g, 0] * dx * dx + conic[g, 2] * dy * dy) - conic[g, 1] * dx * dy
      if power > 0: continue
      alpha = min(0.99, op[g] * np.exp(power))
      if alpha < 1 / 255: continue
      nT = T * (1 - alpha)
      if nT < thr: break
      c += col[g] * alpha * T; T = nT
    out[p] = c; Tf[p] = T
  return out, Tf

@mg.mgpu_kernel(out_shape=lambda px, py, mu, cn, op, col: (px, px), grid=lambda px, py, mu, cn, op, col: (px.shape[0] // 128,))
def splat_composite(px, py, mu, cn, op, col, out, tout):
  r = ml.ds(ml.program_id(0) * 128, 128)
  x, y = px[r], py[r]
  T = ml.full((128,), 1.0, jnp.float32)
  c = ml.zeros((128,), jnp.float32)
  done = ml.zeros((128,), jnp.bool_)
  for g in range(mu.shape[0]):
    dx, dy = mu[g, 0] - x, mu[g, 1] - y
    power = -0.5 * (cn[g, 0] * dx * dx + cn[g, 2] * dy * dy) - cn[g, 1] * dx * dy
    alpha = ml.minimum(0.99, op[g] * ml.exp(power))
    skip = (power > 0) | (alpha < 1.0 / 255.0) | done
    nT = T * (1 - alpha)
    stop = ~skip & (nT < 1e-4)
    done = done | stop
    use = ~skip & ~stop
    c = ml.where(use, c + col[g] * alpha * T, c)
    T = ml.where(use, nT, T)
    if ml.all(done):
      break
  out[r] = c
  tout[r] = T

@mg.mgpu_kernel(out_shape=lambda px, py, mu, cn, op, col: (px, px), grid=lambda px, py, mu, cn, op, col: (px.shape[0] // 128,))
def splat_while(px, py, mu, cn, op, col, out, tout):
  r = ml.ds(ml.program_id(0) * 128, 128)
  x, y = px[r], py[r]
  T = ml.full((128,), 1.0, jnp.float32)
  c = ml.zeros((128,), jnp.float32)
  done = ml.zeros((128,), jnp.bool_)
  g = 0
  while (g < mu.shape[0]) & ~jnp.all(done):
    dx, dy = mu[g, 0] - x, mu[g, 1] - y
    power = -0.5 * (cn[g, 0] * dx * dx + cn[g, 2] * dy * dy) - cn[g, 1] * dx * dy
    alpha = jnp.minimum(0.99, op[g] * jnp.exp(power))
    valid = (power <= 0) & (alpha >= 1.0 / 255.0) & ~done
    nT = T * (1 - alpha)
    done = done | (valid & (nT < 1e-4))
    ok = valid & (nT >= 1e-4)
    c = jnp.where(ok, c + col[g] * alpha * T, c)
    T = jnp.where(ok, nT, T)
    g += 1
  out[r] = c
  tout[r] = T

def splat_inputs(seed):
  rng = np.random.default_rng(seed)
  P, Gn = 256, 64
  px = rng.uniform(0, 16, P).astype(np.float32); py = rng.uniform(0, 16, P).astype(np.float32)
  mu = rng.uniform(0, 16, (Gn, 2)).astype(np.float32)
  a = rng.uniform(0.05, 0.5, Gn); b = rng.uniform(0.05, 0.5, Gn); cc = rng.uniform(-0.02, 0.02, Gn)
  conic = np.stack([a, cc, b], 1).astype(np.float32)
  op = rng.uniform(0.5, 1.0, Gn).astype(np.float32); col = rng.uniform(0, 1, Gn).astype(np.float32)
  return px, py, mu, conic, op, col

def gs_ref(img, g, align, pad):
  C, H, W = img.shape
  gx, gy = g[:, 0].astype(np.float64), g[:, 1].astype(np.float64)
  if align: x = (gx + 1) / 2 * (W - 1); y = (gy + 1) / 2 * (H - 1)
  else: x = ((gx + 1) * W - 1) / 2; y = ((gy + 1) * H - 1) / 2
  if pad == "border": x = np.clip(x, 0, W - 1); y = np.clip(y, 0, H - 1)
  x0 = np.floor(x).astype(int); y0 = np.floor(y).astype(int); fx = x - x0; fy = y - y0
  out = np.zeros((C, len(gx)))
  for dy in (0, 1):
    for dx in (0, 1):
      xi, yi = x0 + dx, y0 + dy
      w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy)
      ok = (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
      v = img[:, np.clip(yi, 0, H - 1), np.clip(xi, 0, W - 1)]
      out += np.where(ok, w, 0) * v
  return out.astype(np.float32)

@mg.mgpu_kernel(out_shape=lambda im, g: S((im.shape[0], g.shape[0]), jnp.float32), grid=lambda im, g: (g.shape[0] // 128,))
def grid_sample_zeros_align(im, g, o):
  C, H, W = im.shape
  r = ml.ds(ml.program_id(0) * 128, 128)
  x = (g[r, 0] + 1) * 0.5 * (W - 1)
  y = (g[r, 1] + 1) * 0.5 * (H - 1)
  x0f, y0f = ml.floor(x), ml.floor(y)
  fx, fy = x - x0f, y - y0f
  x0, y0 = x0f.astype(jnp.int32), y0f.astype(jnp.int32)
  for c in range(C):
    acc = ml.zeros((128,), jnp.float32)
    for dy in range(2):
      for dx in range(2):
        xi, yi = x0 + dx, y0 + dy
        ok = (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
        w = (fx if dx else 1 - fx) * (fy if dy else 1 - fy)
        v = ml.load(im.at[c, yi, xi], mask=ok, other=0.0)
        acc += w * v
    o[c, r] = acc

@mg.mgpu_kernel(out_shape=lambda im, g: S((im.shape[0], g.shape[0]), jnp.float32), grid=lambda im, g: (g.shape[0] // 128,))
def grid_sample_border_noalign(im, g, o):
  C, H, W = im.shape
  r = ml.ds(ml.program_id(0) * 128, 128)
  x = ((g[r, 0] + 1) * W - 1) / 2
  y = ((g[r, 1] + 1) * H - 1) / 2
  x = jnp.clip(x, 0, W - 1); y = jnp.clip(y, 0, H - 1)
  x0, y0 = jnp.floor(x).astype(jnp.int32), jnp.floor(y).astype(jnp.int32)
  x1, y1 = jnp.minimum(x0 + 1, W - 1), jnp.minimum(y0 + 1, H - 1)
  fx, fy = x - x0, y - y0
  wa, wb, wc, wd = (1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy
  ch = ml.arange(C)[:, None]
  Ia, Ib, Ic, Id = im[ch, y0[None, :], x0[None, :]], im[ch, y0[None, :], x1[None, :]], im[ch, y1[None, :], x0[None, :]], im[ch, y1[None, :], x1[None, :]]
  o[:, r] = wa[None] * Ia + wb[None] * Ib + wc[None] * Ic + wd[None] * Id

EDGE_TABLE = np.random.default_rng(99).integers(0, 4096, 256).astype(np.int32)

NTRI = np.random.default_rng(98).integers(0, 5, 256).astype(np.int32)

def mc_ref(v, iso=0.0):
  D, H, W = v.shape
  ci = np.zeros((D - 1, H - 1, W - 1), np.int32)
  corners = [(0,0,0),(0,0,1),(0,1,1),(0,1,0),(1,0,0),(1,0,1),(1,1,1),(1,1,0)]
  for b, (dz, dy, dx) in enumerate(corners):
    ci |= (v[dz:D-1+dz, dy:H-1+dy, dx:W-1+dx] < iso).astype(np.int32) << b
  return ci, EDGE_TABLE[ci], NTRI[ci]

@mg.mgpu_kernel(out_shape=lambda v, et, nt: (S((v.shape[0] - 1, v.shape[1] - 1, v.shape[2] - 1), jnp.int32),) * 3,
                grid=lambda v, et, nt: (v.shape[0] - 1,))
def mc_classify(v, et, nt, cube, edges, ntri, iso: ml.constexpr = 0.0):
  z = ml.program_id(0)
  H, W = v.shape[1] - 1, v.shape[2] - 1
  ci = ml.zeros((H, W), jnp.int32)
  corners = [(0,0,0),(0,0,1),(0,1,1),(0,1,0),(1,0,0),(1,0,1),(1,1,1),(1,1,0)]
  for b, (dz, dy, dx) in enumerate(corners):
    c = v[z + dz, dy:dy + H, dx:dx + W]
    ci = ci | ((c < iso).astype(jnp.int32) << b)
  cube[z] = ci
  edges[z] = et[ci]
  ntri[z] = nt[ci]

@mg.mgpu_kernel(out_shape=lambda v: (S((v.shape[0] - 1, v.shape[1] - 1, v.shape[2] - 1), jnp.int32),) * 3,
                grid=lambda v: (v.shape[0] - 1,))
def mc_static_table(v, cube, edges, ntri, iso: ml.constexpr = 0.0):
  z = ml.program_id(0)
  H, W = v.shape[1] - 1, v.shape[2] - 1
  ci = jnp.zeros((H, W), jnp.int32)
  corners = [(0,0,0),(0,0,1),(0,1,1),(0,1,0),(1,0,0),(1,0,1),(1,1,1),(1,1,0)]
  for b, (dz, dy, dx) in enumerate(corners):
    ci += jnp.where(v[z + dz, dy:dy + H, dx:dx + W] < iso, 1 << b, 0)
  cube[z] = ci
  edges[z] = jnp.asarray(EDGE_TABLE)[ci]
  ntri[z] = jnp.take(jnp.asarray(NTRI), ci)

def chamfer_ref(a, b):
  d = ((a[:, None, :] - b[None, :, :]) ** 2).sum(-1)
  return d.min(1), d.min(0), np.float32(d.min(1).mean() + d.min(0).mean())

@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[1],), jnp.float32), S((b.shape[1],), jnp.float32), S((), jnp.float32)))
def chamfer(a, b, da, db, tot):
  d = ml.zeros((a.shape[1], b.shape[1]), jnp.float32)
  for c in range(3):
    d += (a[c, :][:, None] - b[c, :][None, :]) ** 2
  m1 = jnp.min(d, axis=1)
  m2 = jnp.min(d, axis=0)
  da[...] = m1
  db[...] = m2
  tot[...] = jnp.mean(m1) + jnp.mean(m2)

@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0],), jnp.float32), S((b.shape[0],), jnp.float32)),
                grid=lambda a, b: (a.shape[0] // 64,))
def chamfer_tiled_atomic(a, b, da, db):     # a (N, 3), b (M, 3)
  i = ml.program_id(0) * 64
  aa = a[ml.ds(i, 64), :]
  best = ml.full((64,), float("inf"), jnp.float32)
  for j in range(0, b.shape[0], 128):
    bb = b[ml.ds(j, 128), :]
    d = (aa[:, 0:1] - bb[:, 0][None, :]) ** 2 + (aa[:, 1:2] - bb[:, 1][None, :]) ** 2 + (aa[:, 2:3] - bb[:, 2][None, :]) ** 2
    best = jnp.minimum(best, d.min(axis=1))
    ml.atomic_min(db.at[ml.ds(j, 128)], d.min(axis=0))
  da[ml.ds(i, 64)] = best

def three_interp_ref(u, k, f):
  d = ((u.T[:, None] - k.T[None]) ** 2).sum(-1)
  idx = np.argsort(d, 1, kind="stable")[:, :3]
  dd = np.take_along_axis(d, idx, 1)
  w = 1 / (dd + 1e-8); w = w / w.sum(1, keepdims=True)
  return (f[:, idx] * w[None]).sum(-1).astype(np.float32)

@mg.mgpu_kernel(out_shape=lambda u, k, f: S((f.shape[0], u.shape[1]), jnp.float32), grid=lambda u, k, f: (u.shape[1] // 128,))
def three_interpolate(u, k, f, o):
  i = ml.program_id(0) * 128
  d = ml.zeros((128, k.shape[1]), jnp.float32)
  for c in range(3):
    d += (u[c, ml.ds(i, 128)][:, None] - k[c, :][None, :]) ** 2
  negd, idx = jax.lax.top_k(-d, 3)
  w = 1.0 / (-negd + 1e-8)
  w = w / jnp.sum(w, axis=1, keepdims=True)
  for c in range(f.shape[0]):
    o[c, ml.ds(i, 128)] = jnp.sum(f[c, idx] * w, axis=1)

def aabb_ref(o, d, lo, hi):
  inv = 1 / d
  t0 = (lo[:, None] - o) * inv; t1 = (hi[:, None] - o) * inv
  tn = np.minimum(t0, t1).max(0); tf = np.maximum(t0, t1).min(0)
  hit = (tf >= np.maximum(tn, 0)).astype(np.int32)
  return np.maximum(tn, 0), tf, hit

@mg.mgpu_kernel(out_shape=lambda o, d: (S((o.shape[1],), jnp.float32), S((o.shape[1],), jnp.float32), S((o.shape[1],), jnp.int32)),
                grid=lambda o, d: (o.shape[1] // 128,))
def ray_aabb(ro, rd, tnear, tfar, hit, lo: ml.constexpr = (-1.0, -1.0, -1.0), hi: ml.constexpr = (1.0, 1.0, 1.0)):
  r = ml.ds(ml.program_id(0) * 128, 128)
  tn = ml.full((128,), -float("inf"), jnp.float32)
  tf = ml.full((128,), float("inf"), jnp.float32)
  for a in range(3):
    inv = 1.0 / rd[a, r]
    t0 = (lo[a] - ro[a, r]) * inv
    t1 = (hi[a] - ro[a, r]) * inv
    tn = ml.maximum(tn, ml.minimum(t0, t1))
    tf = ml.minimum(tf, ml.maximum(t0, t1))
  tn = ml.maximum(tn, 0.0)
  tnear[r] = tn
  tfar[r] = tf
  hit[r] = (tf >= tn).astype(jnp.int32)

def zbuf_ref(p, H=32, W=64):
  u = np.clip((p[0] * W).astype(np.int32), 0, W - 1); v = np.clip((p[1] * H).astype(np.int32), 0, H - 1)
  z = np.full(H * W, np.inf, np.float32); np.minimum.at(z, v * W + u, p[2]); return z.reshape(H, W)

@mg.mgpu_kernel(out_shape=lambda p: S((32, 64), jnp.float32), grid=lambda p: (p.shape[1] // 128,))
def zbuffer(p, z):
  r = ml.ds(ml.program_id(0) * 128, 128)
  u = ml.clip((p[0, r] * 64).astype(jnp.int32), 0, 63)
  v = ml.clip((p[1, r] * 32).astype(jnp.int32), 0, 31)
  ml.atomic_min(z.at[v, u], p[2, r])

def sphere_ref(ro, rd, steps=32):
  t = np.zeros(ro.shape[1], np.float32)
  for _ in range(steps):
    p = ro + t * rd
    d = np.sqrt((p * p).sum(0)) - np.float32(0.5)
    t = t + d
  return t

@mg.mgpu_kernel(out_shape=lambda ro, rd: S((ro.shape[1],), jnp.float32), grid=lambda ro, rd: (ro.shape[1] // 128,))
def sphere_trace(ro, rd, out, steps: ml.constexpr = 32):
  r = ml.ds(ml.program_id(0) * 128, 128)
  ox, oy, oz = ro[0, r], ro[1, r], ro[2, r]
  dx, dy, dz = rd[0, r], rd[1, r], rd[2, r]
  def body(i, t):
    px, py, pz = ox + t * dx, oy + t * dy, oz + t * dz
    return t + (jnp.sqrt(px * px + py * py + pz * pz) - 0.5)
  out[r] = jax.lax.fori_loop(0, steps, body, jnp.zeros((128,), jnp.float32))

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[1], 8), jnp.int32), grid=lambda q, r: (q.shape[1] // 64,))
def ball_query_sort(q, r, idx, radius: ml.constexpr = 0.5):
  i = ml.program_id(0) * 64
  d = jnp.zeros((64, r.shape[1]), jnp.float32)
  for c in range(3):
    d = d + jnp.square(q[c, ml.ds(i, 64)][:, None] - r[c, :][None, :])
  n = r.shape[1]
  cand = jnp.where(d < radius * radius, jnp.arange(n)[None, :], n)
  first = jnp.sort(cand, axis=1)[:, :8]
  idx[ml.ds(i, 64), :] = jnp.where(first == n, -1, first)

def ball_sort_ref(q, r, rad=0.5, k=8):
  d = ((q.T[:, None] - r.T[None]) ** 2).sum(-1); n = r.shape[1]
  c = np.sort(np.where(d < rad * rad, np.arange(n)[None], n), 1)[:, :k]
  return np.where(c == n, -1, c).astype(np.int32)

@mg.mgpu_kernel(out_shape=lambda q, r: S((q.shape[1], 8), jnp.int32), grid=lambda q, r: (q.shape[1] // 64,))
def knn_ties(q, r, idx):
  i = ml.program_id(0) * 64
  d = ml.zeros((64, r.shape[1]), jnp.float32)
  for c in range(3):
    d += (q[c, ml.ds(i, 64)][:, None] - r[c, :][None, :]) ** 2
  idx[ml.ds(i, 64), :] = jax.lax.top_k(-d, 8)[1]

def knn_ties_ref(q, r):
  d = ((q.T[:, None] - r.T[None]) ** 2).sum(-1)
  return np.asarray(jax.lax.top_k(-jnp.asarray(d), 8)[1])

def tie_pts(seed, n):
  return np.random.default_rng(seed).integers(0, 4, (3, n)).astype(np.float32)

CASES = [
    (fps_scalar_reads, lambda: (rnd((3, 1024), 0),), lambda p: fps_ref(p, 128), 0),
    (fps_register_gather, lambda: (rnd((3, 1024), 1),), lambda p: fps_ref(p, 128), 0),
    (fps_batched_fori, lambda: (rnd((2, 3, 512), 3),), lambda p: np.stack([fps_ref(q, 64) for q in p]), 0),
    (knn_topk, lambda: (rnd((3, 128), 5), rnd((3, 256), 6)), lambda q, r: knn_ref(q.T, r.T, 16), 0),
    (knn_argsort_rows, lambda: (rnd((128, 3), 7), rnd((256, 3), 8)), lambda q, r: knn_ref(q, r, 8), 0),
    (ball_query_cumsum, lambda: (uni((3, 128), 13), uni((3, 512), 14)), lambda q, r: ball_ref(q, r, 0.5, 16), 0),
    (ball_query_loop, lambda: (uni((3, 128), 15), uni((3, 256), 16)), lambda q, r: ball_ref(q, r, 0.5, 16), 0),
    (voxel_count, lambda: (uni((3, 1024), 0),), lambda p: voxel_ref(p)[0], 0),
    (voxel_feature_sum, lambda: (uni((256, 3), 1), rnd((256, 32), 2)), vfs_ref, 1e-4),
    (voxel_max_pool, lambda: (uni((3, 1024), 3), rnd((1024,), 4)), vmax_ref, 0),
    (voxel_first_point, lambda: (uni((3, 1000), 5),), vfirst_ref, 0),
    (trilinear, lambda: (rnd((8, 16, 32), 7), uni((256, 3), 8)), tri_ref, 1e-5),
    (trilinear_features, lambda: (rnd((4, 8, 8, 32), 11), uni((128, 3), 12)), trif_ref, 1e-5),
    (nerf_render, lambda: (np.abs(rnd((32, 64), 0)), uni((3, 32, 64), 1), np.cumsum(uni((32, 64), 2, 0.01, 0.1), 1).astype(np.float32)), nerf_ref, 1e-4),
    (nerf_march_loop, lambda: (np.abs(rnd((128, 32), 6)), uni((3, 128, 32), 7), np.cumsum(uni((128, 32), 8, 0.01, 0.1), 1).astype(np.float32)), nerf_ref, 1e-4),
    (nerf_assoc_scan, lambda: (np.abs(rnd((32, 64), 9)), uni((3, 32, 64), 10), np.cumsum(uni((32, 64), 11, 0.01, 0.1), 1).astype(np.float32)), nerf_ref, 1e-4),
    (sample_pdf, lambda: (np.cumsum(uni((8, 64), 12, 0.01, 0.1), 1).astype(np.float32), uni((8, 63), 13), np.sort(uni((8, 128), 14), 1)), pdf_ref, 1e-4),
    (splat_composite, lambda: splat_inputs(15), splat_ref, 1e-4),
    (splat_while, lambda: splat_inputs(16), splat_ref, 1e-4),
    (grid_sample_zeros_align, lambda: (rnd((4, 16, 32), 0), uni((256, 2), 1, -1.2, 1.2)), lambda im, g: gs_ref(im, g, True, "zeros"), 1e-4),
    (grid_sample_border_noalign, lambda: (rnd((4, 16, 32), 2), uni((256, 2), 3, -1.2, 1.2)), lambda im, g: gs_ref(im, g, False, "border"), 1e-4),
    (mc_classify, lambda: (rnd((5, 9, 17), 10), EDGE_TABLE, NTRI), lambda v, e, n: mc_ref(v), 0),
    (mc_static_table, lambda: (rnd((5, 9, 17), 11),), mc_ref, 0),
    (chamfer, lambda: (rnd((3, 128), 12), rnd((3, 256), 13)), lambda a, b: chamfer_ref(a.T, b.T), 1e-4),
    (chamfer_tiled_atomic, lambda: (rnd((256, 3), 14), rnd((512, 3), 15)), lambda a, b: chamfer_ref(a, b)[:2], 1e-4),
    (three_interpolate, lambda: (uni((3, 256), 0), uni((3, 128), 1), rnd((8, 128), 2)), three_interp_ref, 1e-4),
    (ray_aabb, lambda: (rnd((3, 256), 11) * 2, rnd((3, 256), 12)), lambda o, d: aabb_ref(o, d, np.full(3, -1, np.float32), np.ones(3, np.float32)), 1e-4),
    (zbuffer, lambda: (uni((3, 1024), 14),), zbuf_ref, 0),
    (sphere_trace, lambda: (np.tile(np.array([[0], [0], [-2]], np.float32), (1, 256)), (lambda d: (d / np.linalg.norm(d, axis=0)).astype(np.float32))(rnd((3, 256), 17) * 0.1 + np.array([[0], [0], [1]], np.float32))), sphere_ref, 1e-4),
    (ball_query_sort, lambda: (uni((3, 128), 25), uni((3, 256), 26)), ball_sort_ref, 0),
    (knn_ties, lambda: (tie_pts(4, 128), tie_pts(5, 256)), knn_ties_ref, 0),
]


def _check(got, want, tol):
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  assert len(got) == len(want)
  for g, w in zip(got, want):
    assert np.shape(g) == np.shape(w)
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)


@pytest.mark.parametrize("kernel,make,ref,tol", CASES, ids=[c[0].__name__ for c in CASES])
def test_theme_kernel_matches_numpy_and_builds(kernel, make, ref, tol):
  args = make()
  _check(kernel(*args, interpret=True), ref(*args), tol)
  export(kernel, *args)


_GPU = [c for c in CASES if c[0].__name__ in (
    "fps_scalar_reads", "knn_topk", "ball_query_cumsum", "voxel_count", "voxel_feature_sum", "trilinear",
    "nerf_render", "splat_composite", "grid_sample_zeros_align", "mc_classify", "chamfer", "zbuffer")]


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,make,ref,tol", _GPU, ids=[c[0].__name__ for c in _GPU])
def test_theme_kernel_on_the_gpu(kernel, make, ref, tol):
  args = make()
  _check(jax.jit(kernel)(*args), ref(*args), max(tol, 1e-3))
