"""Probe 56f's corpus of scientific and signal kernels that computed right before the probe's fixes (kept as a
guard): 1-D, 2-D and 3-D stencils with halos as overlapping windows (register reads, a TMA copy into SMEM), periodic
boundaries by modulo gathers and rolls, Jacobi iterations in SMEM and under lax.fori_loop, all-pairs N-body forces
(rsqrt, softening, masses over a loop of source tiles), a bit-reversal permutation and a radix-2 FFT of complex
numbers as pairs of real tiles, a prefix sum carried across blocks and one by decoupled look-back with flags, cumprod,
lax.cumlogsumexp, a bitonic sort by partner exchange, a key-value sort, Horner's rule and jnp.polyval, and
jax.scipy.special's erf, erfinv, gammaln, digamma, i0 and ndtri. Each is run in interpret mode against NumPy and
built for CUDA. Found and not fixed: float64 arrays (MG006 with its hint; the language has no float64)."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest
import scipy.special as ss

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect_call
from probe_util import export, rnd

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2,), x.dtype), grid=lambda x: ((x.shape[0] - 2) // 128,))
def jacobi1d(x, o):
  i = ml.program_id(0) * 128
  o[ml.ds(i, 128)] = (x[ml.ds(i, 128)] + x[ml.ds(i + 1, 128)] + x[ml.ds(i + 2, 128)]) / 3.0


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1] - 2), x.dtype), grid=lambda x: ((x.shape[0] - 2) // 8,))
def laplacian5(x, o):
  i = ml.program_id(0) * 8
  W = o.shape[1]
  c = x[ml.ds(i + 1, 8), 1:W + 1]
  o[ml.ds(i, 8), :] = x[ml.ds(i, 8), 1:W + 1] + x[ml.ds(i + 2, 8), 1:W + 1] + x[ml.ds(i + 1, 8), 0:W] + \
      x[ml.ds(i + 1, 8), 2:W + 2] - 4.0 * c


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1] - 2, x.shape[2] - 2), x.dtype),
                grid=lambda x: (x.shape[0] - 2,))
def laplacian7(x, o):
  z = ml.program_id(0) + 1
  H, W = o.shape[1], o.shape[2]
  s = x[z - 1, 1:H + 1, 1:W + 1] + x[z + 1, 1:H + 1, 1:W + 1] + x[z, 0:H, 1:W + 1] + x[z, 2:H + 2, 1:W + 1] + \
      x[z, 1:H + 1, 0:W] + x[z, 1:H + 1, 2:W + 2]
  o[z - 1] = s - 6.0 * x[z, 1:H + 1, 1:W + 1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] - 2, x.shape[1]), x.dtype), grid=lambda x: ((x.shape[0] - 2) // 64,))
def halo_by_tma(x, o):
  i = ml.program_id(0) * 64
  buf = ml.smem((66, 128))
  ml.copy(x.at[ml.ds(i, 66), :], buf)
  o[ml.ds(i, 64), :] = buf[0:64, :] + buf[1:65, :] + buf[2:66, :]


@mg.mgpu_kernel(out_shape=lambda x: x)
def periodic1d(x, o):
  n = x.shape[0]
  idx = ml.arange(n)
  o[...] = 0.25 * x[(idx - 1) % n] + 0.5 * x[...] + 0.25 * x[(idx + 1) % n]


@mg.mgpu_kernel(out_shape=lambda x: x)
def periodic2d(x, o):
  H, W = x.shape
  ii, jj = ml.arange(H)[:, None], ml.arange(W)[None, :]
  o[...] = x[(ii - 1) % H, jj] + x[(ii + 1) % H, jj] + x[ii, (jj - 1) % W] + x[ii, (jj + 1) % W] - 4 * x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def periodic3d(x, o):
  v = x[...]
  s = ml.zeros_like(v)
  for ax in range(3):
    s = s + jnp.roll(v, 1, axis=ax) + jnp.roll(v, -1, axis=ax)
  o[...] = s - 6 * v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def periodic_rows(x, o):
  i = ml.program_id(0)
  H = x.shape[0]
  o[i, :] = x[(i - 1) % H, :] + x[(i + 1) % H, :] - 2.0 * x[i, :]


@mg.mgpu_kernel(out_shape=lambda x: x)
def jacobi_smem(x, o, iters: ml.constexpr = 4):
  H, W = x.shape
  a = ml.smem((H, W), jnp.float32)
  a[...] = x[...]
  for t in range(iters):
    a[1:H - 1, 1:W - 1] = 0.25 * (a[0:H - 2, 1:W - 1] + a[2:H, 1:W - 1] + a[1:H - 1, 0:W - 2] + a[1:H - 1, 2:W])
  o[...] = a[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def jacobi_fori(x, o):
  def body(t, v):
    return 0.25 * (jnp.roll(v, 1, 0) + jnp.roll(v, -1, 0) + jnp.roll(v, 1, 1) + jnp.roll(v, -1, 1))
  o[...] = jax.lax.fori_loop(0, 5, body, x[...])


@mg.mgpu_kernel(out_shape=lambda p: S(p.shape, jnp.float32))
def nbody(p, o, eps: ml.constexpr = 0.01):
  x, y, z = p[0, :], p[1, :], p[2, :]
  dx, dy, dz = x[None, :] - x[:, None], y[None, :] - y[:, None], z[None, :] - z[:, None]
  inv = ml.rsqrt(dx * dx + dy * dy + dz * dz + eps)
  inv3 = inv * inv * inv
  o[0, :] = ml.sum(dx * inv3, axis=1)
  o[1, :] = ml.sum(dy * inv3, axis=1)
  o[2, :] = ml.sum(dz * inv3, axis=1)


@mg.mgpu_kernel(out_shape=lambda p, m: S(p.shape, jnp.float32), grid=lambda p, m: (p.shape[1] // 64,))
def nbody_tiled(p, m, o):
  i = ml.program_id(0) * 64
  xi, yi = p[0, ml.ds(i, 64)], p[1, ml.ds(i, 64)]
  ax, ay = ml.zeros((64,), jnp.float32), ml.zeros((64,), jnp.float32)
  for j in range(0, p.shape[1], 64):
    dx = p[0, ml.ds(j, 64)][None, :] - xi[:, None]
    dy = p[1, ml.ds(j, 64)][None, :] - yi[:, None]
    inv = jax.lax.rsqrt(dx * dx + dy * dy + 1e-2)
    w = m[ml.ds(j, 64)][None, :] * inv * inv * inv
    ax += jnp.sum(dx * w, axis=1)
    ay += jnp.sum(dy * w, axis=1)
  o[0, ml.ds(i, 64)] = ax
  o[1, ml.ds(i, 64)] = ay


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im))
def fft_dit(re, im, ore, oim, LOG: ml.constexpr = 8):
  N = 1 << LOG
  i = ml.arange(N)
  rev = ml.zeros_like(i)
  for b in range(LOG):
    rev = rev | (((i >> b) & 1) << (LOG - 1 - b))
  xr, xi = re[rev], im[rev]
  for s in range(LOG):
    half = 1 << s
    top = (i & half) == 0
    partner = i ^ half
    pr, pi = jnp.take(xr, partner), jnp.take(xi, partner)
    ang = -2.0 * np.pi * (i & (half - 1)).astype(jnp.float32) / (2 * half)
    wr, wi = jnp.cos(ang), jnp.sin(ang)
    br, bi = ml.where(top, pr, xr), ml.where(top, pi, xi)
    ar, ai = ml.where(top, xr, pr), ml.where(top, xi, pi)
    tr, ti = wr * br - wi * bi, wr * bi + wi * br
    xr, xi = ml.where(top, ar + tr, ar - tr), ml.where(top, ai + ti, ai - ti)
  ore[...] = xr
  oim[...] = xi


@mg.mgpu_kernel(out_shape=lambda x: x)
def cumsum_carried(x, o):
  carry = 0.0
  for b in range(x.shape[0] // 128):
    c = jnp.cumsum(x[ml.ds(b * 128, 128)]) + carry
    o[ml.ds(b * 128, 128)] = c
    carry = c[127]


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0] // 128,), jnp.float32), S((x.shape[0] // 128,), jnp.int32)),
                grid=lambda x: (x.shape[0] // 128,))
def lookback(x, o, agg, flag):
  pid = ml.program_id(0)
  c = jnp.cumsum(x[ml.ds(pid * 128, 128)])
  prefix = 0.0
  j = pid - 1
  while j >= 0:
    while ml.atomic_add(flag.at[j], 0) == 0:
      pass
    prefix += agg[j]
    j -= 1
  agg[pid] = c[127]
  ml.atomic_xchg(flag.at[pid], 1)
  o[ml.ds(pid * 128, 128)] = c + prefix


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def scans(x, o1, o2):
  o1[...] = jnp.cumprod(x[...], axis=1)
  o2[...] = jax.lax.cumlogsumexp(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def bitonic_partner(x, o, LOG: ml.constexpr = 8):
  N = 1 << LOG
  i = ml.arange(N)
  v = x[...]
  k = 2
  while k <= N:
    j = k // 2
    while j > 0:
      pv = v[i ^ j]
      keep_min = ((i & k) == 0) == (i < (i ^ j))
      v = ml.where(keep_min, ml.minimum(v, pv), ml.maximum(v, pv))
      j //= 2
    k *= 2
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda k, v: (k, v))
def kv_sort(k, v, ok, ov):
  a, b = jax.lax.sort((k[...], v[...]), num_keys=1)
  ok[...] = a
  ov[...] = b


COEF = (1.0, -0.5, 0.25, -0.125, 0.0625)


@mg.mgpu_kernel(out_shape=lambda x, c: (x, x))
def horner(x, c, o1, o2):
  v = x[...]
  acc = ml.zeros_like(v) + COEF[0]
  for a in COEF[1:]:
    acc = acc * v + a
  o1[...] = acc
  o2[...] = jnp.polyval(c[...], v)


@mg.mgpu_kernel(out_shape=lambda x, u, g: (x, u, g, g, x, u))
def specials(x, u, g, o1, o2, o3, o4, o5, o6):
  o1[...] = jss.erf(x[...])
  o2[...] = jss.erfinv(u[...])
  o3[...] = jss.gammaln(g[...])
  o4[...] = jss.digamma(g[...])
  o5[...] = jss.i0(x[...])
  o6[...] = jss.ndtri(0.5 + 0.49 * u[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def float64_scale(x, o):
  o[...] = 2.5 * x[...]


def _fft(re, im):
  f = np.fft.fft(re.astype(np.float64) + 1j * im)
  return f.real, f.imag


def _jacobi(a, iters=4):
  a = a.copy()
  for _ in range(iters):
    a[1:-1, 1:-1] = 0.25 * (a[:-2, 1:-1] + a[2:, 1:-1] + a[1:-1, :-2] + a[1:-1, 2:])
  return a


def _jacobi_roll(v):
  for _ in range(5):
    v = 0.25 * (np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1))
  return v


def _nbody(p, eps=0.01):
  d = p[:, None, :] - p[:, :, None]
  return (d * ((d * d).sum(0) + eps) ** -1.5).sum(2)


def _nbody_tiled(p, m):
  d = p[:, None, :] - p[:, :, None]
  inv = ((d * d).sum(0) + 1e-2) ** -0.5
  return (d * (m[None, :] * inv ** 3)).sum(2)


def _lap2(v):
  return np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1) - 4 * v


_U = np.random.default_rng(20).uniform(-0.99, 0.99, (1024,)).astype(np.float32)
_G = np.random.default_rng(21).uniform(0.1, 20, (1024,)).astype(np.float32)
CASES = [
    (jacobi1d, lambda: (rnd((514,), 0),), lambda x: (x[:-2] + x[1:-1] + x[2:]) / 3, 1e-5),
    (laplacian5, lambda: (rnd((34, 130), 1),),
     lambda x: x[:-2, 1:-1] + x[2:, 1:-1] + x[1:-1, :-2] + x[1:-1, 2:] - 4 * x[1:-1, 1:-1], 1e-5),
    (laplacian7, lambda: (rnd((6, 18, 130), 2),),
     lambda x: x[:-2, 1:-1, 1:-1] + x[2:, 1:-1, 1:-1] + x[1:-1, :-2, 1:-1] + x[1:-1, 2:, 1:-1] + x[1:-1, 1:-1, :-2] +
     x[1:-1, 1:-1, 2:] - 6 * x[1:-1, 1:-1, 1:-1], 1e-5),
    (halo_by_tma, lambda: (rnd((258, 128), 3),), lambda x: x[:-2] + x[1:-1] + x[2:], 1e-5),
    (periodic1d, lambda: (rnd((256,), 4),), lambda x: 0.25 * np.roll(x, 1) + 0.5 * x + 0.25 * np.roll(x, -1), 1e-6),
    (periodic2d, lambda: (rnd((16, 128), 5),), _lap2, 1e-5),
    (periodic3d, lambda: (rnd((4, 8, 128), 6),),
     lambda v: sum(np.roll(v, 1, a) + np.roll(v, -1, a) for a in range(3)) - 6 * v, 1e-5),
    (periodic_rows, lambda: (rnd((16, 128), 7),), lambda v: np.roll(v, 1, 0) + np.roll(v, -1, 0) - 2 * v, 1e-5),
    (jacobi_smem, lambda: (rnd((34, 66), 8),), _jacobi, 1e-5),
    (jacobi_fori, lambda: (rnd((16, 128), 9),), _jacobi_roll, 1e-5),
    (nbody, lambda: (rnd((3, 128), 10),), _nbody, 1e-3),
    (nbody_tiled, lambda: (rnd((2, 256), 11), np.abs(rnd((256,), 12))), _nbody_tiled, 1e-3),
    (fft_dit, lambda: (rnd((256,), 13), rnd((256,), 14)), _fft, 2e-3),
    (cumsum_carried, lambda: (rnd((1024,), 15),), np.cumsum, 1e-3),
    (lookback, lambda: (rnd((512,), 16),), lambda x: (np.cumsum(x), x.reshape(-1, 128).sum(1), np.ones(4)), 1e-3),
    (scans, lambda: ((1 + 0.1 * rnd((8, 128), 17)).astype(np.float32),),
     lambda x: (np.cumprod(x, 1), np.logaddexp.accumulate(x.astype(np.float64), 1)), 1e-4),
    (bitonic_partner, lambda: (rnd((256,), 18),), np.sort, 0),
    (kv_sort, lambda: (rnd((256,), 19), np.arange(256, dtype=np.int32)),
     lambda k, v: (np.sort(k), np.argsort(k, kind="stable")), 0),
    (horner, lambda: (rnd((1024,), 20), rnd((8,), 21)), lambda x, c: (np.polyval(COEF, x), np.polyval(c, x)), 1e-4),
    (specials, lambda: (3 * rnd((1024,), 22), _U, _G),
     lambda x, u, g: (ss.erf(x), ss.erfinv(u), ss.gammaln(g), ss.digamma(g), ss.i0(x), ss.ndtri(0.5 + 0.49 * u)), 1e-4),
]


@pytest.mark.parametrize("kernel,make,ref,tol", CASES, ids=[c[0].__name__ for c in CASES])
def test_theme_kernel_matches_numpy_and_builds(kernel, make, ref, tol):
  args = make()
  got, want = kernel(*args, interpret=True), ref(*args)
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=tol, atol=tol)
  export(kernel, *args)


def test_float64_is_mg006_with_the_float32_hint():
  with jax.enable_x64(True):
    e = expect_call(float64_scale, [S((256,), jnp.float64)], mg.SignatureError, "def float64_scale",
                    "float64_scale: input 0 (x) has dtype float64, which kernels do not support")
  assert e.hint.startswith("convert it to a supported dtype: x.astype(np.float32)")


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,make,ref,tol", CASES[:4] + CASES[10:13] + CASES[16:17],
                         ids=[c[0].__name__ for c in CASES[:4] + CASES[10:13] + CASES[16:17]])
def test_theme_kernel_on_the_gpu(kernel, make, ref, tol):
  args = make()
  got, want = jax.jit(kernel)(*args), ref(*args)
  got, want = (got, want) if isinstance(got, tuple) else ((got,), (want,))
  for g, w in zip(got, want):
    np.testing.assert_allclose(np.asarray(g, np.float64), np.asarray(w, np.float64), rtol=max(tol, 1e-3), atol=max(tol, 1e-3))
