"""Probe 70b's corpus, its sixth part: exact arithmetic as Triton users port it, in libdevice's words
(`tl.extra.cuda.libdevice.add_rn / mul_rn / fma_rn`, which keep the compiler from fusing a product into a sum,
`nextafter` for interval bounds, `hypot`, `copysign`, `signbit`, `scalbn`). Same CASES form as probe70b_sums.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70b_sums import F32, I32, S, f32, fma32, ill_conditioned, rng_of, two_sum
from probe70b_edges import _np

CASES = {}
libdevice = ml.extra.cuda.libdevice


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, a, a), grid=lambda a, b: (a.shape[0] // 256,))
def eft_libdevice(a, b, s_out, e_out, p_out, pe_out):
  """TwoSum by add_rn / sub_rn and TwoProd by mul_rn / fma_rn: a Triton port's spelling of exact steps."""
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  x = ml.load(a.at[offs])
  y = ml.load(b.at[offs])
  s = libdevice.add_rn(x, y)
  bb = libdevice.sub_rn(s, x)
  e = libdevice.add_rn(libdevice.sub_rn(x, libdevice.sub_rn(s, bb)), libdevice.sub_rn(y, bb))
  p = libdevice.mul_rn(x, y)
  ml.store(s_out.at[offs], s)
  ml.store(e_out.at[offs], e)
  ml.store(p_out.at[offs], p)
  ml.store(pe_out.at[offs], libdevice.fma_rn(x, y, -p))


case("eft_libdevice_rn_names", eft_libdevice,
     lambda s: ((ill_conditioned(s, (512,)), ill_conditioned(s + 5, (512,))), {}),
     lambda a, b: (*two_sum(a, b), f32(a * b), fma32(a, b, -f32(a * b))), 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32)), grid=(1,))
def interval_sum(x, lo, hi):
  """An interval column sum (verified numerics): each step's sum widened outward by an ulp with nextafter, so the
  true sum lies in [lo, hi]."""
  l = ml.zeros((x.shape[1],), F32)
  h = ml.zeros((x.shape[1],), F32)
  for i in ml.range(x.shape[0]):
    v = x.at[i][...]
    l = ml.math.nextafter(l + v, float("-inf"))
    h = ml.math.nextafter(h + v, float("inf"))
  lo[...] = l
  hi[...] = h


def _interval_ref(x):
  l = np.zeros(x.shape[1], f32)
  h = np.zeros(x.shape[1], f32)
  for v in x:
    l = np.nextafter(f32(l + v), f32(-np.inf))
    h = np.nextafter(f32(h + v), f32(np.inf))
  exact = x.astype(np.float64).sum(0)
  assert np.all(l <= exact) and np.all(exact <= h)
  return l, h


case("interval_sum_nextafter", interval_sum, lambda s: ((ill_conditioned(s, (32, 128)),), {}), _interval_ref, 0)


@mg.mgpu_kernel(out_shape=lambda a, b: (a, a, S(a.shape, I32), a), grid=(1,))
def libdevice_bits(a, b, hy, cs, sb, sc):
  """hypot without overflow, copysign, signbit and scalbn in libdevice's names."""
  x, y = a[...], b[...]
  hy[...] = libdevice.hypot(x, y)
  cs[...] = ml.math.copysign(x, y)
  sb[...] = libdevice.signbit(y).astype(I32)
  sc[...] = libdevice.scalbn(x, -3)


def _lb_make(seed):
  r = rng_of(seed)
  sc = np.float32(10.0) ** r.integers(-30, 31, (8, 128)).astype(f32)
  y = r.standard_normal((8, 128)).astype(f32) * sc
  y[0, :2] = [-0.0, 0.0]
  return (r.standard_normal((8, 128)).astype(f32) * sc, y), {}


case("libdevice_hypot_copysign_signbit_scalbn", libdevice_bits, _lb_make,
     _np(lambda a, b: (np.hypot(a.astype(np.float64), b.astype(np.float64)), np.copysign(a, b),
                       np.signbit(b).astype(np.int32), np.ldexp(a, -3))), 2e-7)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def horner_fma_rn(x, out):
  """Horner's steps by libdevice.fma_rn, as a Triton port of a CUDA fmaf polynomial writes them."""
  v = x[...]
  acc = ml.full(v.shape, 1.0 / 5040, F32)
  for c in (-1.0 / 720, 1.0 / 120, -1.0 / 24, 1.0 / 6, -0.5, 1.0, 1.0):
    acc = libdevice.fma_rn(acc, v, c)
  out[...] = acc


def _horner_fma_rn_ref(x):
  acc = np.full_like(x, f32(1.0 / 5040))
  for c in (-1.0 / 720, 1.0 / 120, -1.0 / 24, 1.0 / 6, -0.5, 1.0, 1.0):
    acc = fma32(acc, x, f32(c))
  return acc


case("horner_libdevice_fma_rn", horner_fma_rn, lambda s: ((rng_of(s).uniform(-2, 2, (8, 128)).astype(f32),), {}),
     _horner_fma_rn_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def fdim_as_hinted(x, out):
  """C's fdimf, written as MG002's hint writes it (libdevice.fdim has no ml function): +0 where x <= 1, NaN kept."""
  v = x[...]
  out[...] = ml.where(v <= 1.0, 0.0, v - 1.0)


def _fdim_make(seed):
  x = rng_of(seed).standard_normal((8, 128)).astype(f32) * 3
  x[0, 0] = np.nan
  return (x,), {}


case("fdim_as_hinted", fdim_as_hinted, _fdim_make, _np(lambda x: np.where(x <= 1, 0, x - 1).astype(f32)), 0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def gemm_3xtf32(a, b, three):
  """CUTLASS's 3xTF32 (Triton's tf32x3): float32 operands split into a TF32 high part (the top 19 bits) and the
  rest, hi * hi + hi * lo + lo * hi on the tensor cores: near float32's accuracy where one ml.dot of float32 tiles
  reads them as TF32 (an error of about 1e-3 of the result)."""
  A, B = a[...], b[...]
  a_hi = (A.view(jnp.uint32) & 0xFFFFE000).view(F32)
  b_hi = (B.view(jnp.uint32) & 0xFFFFE000).view(F32)
  sa, sb, sal, sbl = (ml.smem(a.shape, F32) for _ in range(4))
  sa[...] = a_hi
  sb[...] = b_hi
  sal[...] = A - a_hi
  sbl[...] = B - b_hi
  acc = ml.dot(sal, sb)
  acc = ml.dot(sa, sbl, acc)
  three[...] = ml.dot(sa, sb, acc)


case("gemm_3xtf32_split", gemm_3xtf32, lambda s: ((rng_of(s).standard_normal((64, 64)).astype(f32),
                                                   rng_of(s + 1).standard_normal((64, 64)).astype(f32)), {}),
     lambda a, b: a.astype(np.float64) @ b.astype(np.float64), 3e-6)
