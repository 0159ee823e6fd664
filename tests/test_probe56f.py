"""Probe 56f (scientific and signal kernels: stencils, N-body, FFT butterflies, prefix sums, sorts, polynomials,
special functions). What was refused and is computed now: (1) jax.scipy.special's gamma family that jax composes of
lax.lgamma (gammasgn, loggamma, factorial, beta, betaln, comb, poch, multigammaln, boxcox, boxcox1p) and jnp.i0 (MG003
"cannot take a register tensor"); the functions XLA computes with series of its own (zeta, polygamma, erfcx, ...)
keep MG003 with a hint naming what a kernel computes instead of an @ml.inline helper the user never wrote. (2)
jax.lax.associative_scan with a jnp or NumPy function as its combine (jnp.logaddexp: a logcumsumexp) and the
accumulate of associative ufuncs (jnp.logaddexp.accumulate, np.fmax.accumulate). (3) jnp.pad by mode 'edge',
'reflect', 'symmetric' or 'wrap' along a vector's or a tile's last axis (a Neumann or periodic stencil's boundary).
(4) A `for` over a static range whose counter, or an int the body updates (`L *= 2`), feeds a shape (a Stockham
FFT's `x.reshape(2, m, L)`, a bitonic stage's `v.reshape(N // (2 * j), 2, j)`): unrolled, as Python and Pallas run
it. (5) jnp.gradient, jnp.cumulative_sum / cumulative_prod. (6) isinstance(v, list) of a register value is False
(it was MG003)."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jss
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct


# ---------------------------------------------------------------- (1) the gamma family of jax.scipy.special
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x, x, x))
def gamma_family(x, y, o1, o2, o3, o4, o5):
  a = x[...]
  b = y[...]
  o1[...] = jss.gammasgn(a)
  o2[...] = jss.beta(a, b)
  o3[...] = jss.betaln(jnp.abs(a) + 0.1, b)
  o4[...] = jss.poch(jnp.abs(a) + 0.5, b)
  o5[...] = jss.loggamma(a) + jnp.i0(a)


@mg.mgpu_kernel(out_shape=lambda n, k: (S(n.shape, jnp.float32),) * 3)
def combinations(n, k, o1, o2, o3):
  o1[...] = jss.comb(n[...], k[...])
  o2[...] = jss.comb(n[...], k[...], repetition=True)
  o3[...] = jss.factorial(n[...])


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x))
def box_cox(x, o1, o2, o3):
  o1[...] = jss.multigammaln(x[...], 3)
  o2[...] = jss.boxcox(x[...], 0.5)
  o3[...] = jss.boxcox1p(x[...], ml.zeros_like(x[...]))


@mg.mgpu_kernel(out_shape=lambda x: x)
def hurwitz(x, o):
  o[...] = jss.zeta(x[...], 2.0)


def _jax(f, *a, **kw):
  return np.asarray(f(*map(jnp.asarray, a), **kw), np.float32)


def _gamma_inputs():
  rng = np.random.default_rng(0)
  x = np.concatenate([rng.uniform(-5, 5, 250), [-3.0, -0.0, 0.0, np.nan, -np.inf, np.inf]]).astype(np.float32)
  y = np.concatenate([rng.uniform(0.2, 20, 250), [1.0] * 6]).astype(np.float32)
  return x, y


def test_gamma_family_matches_jax():
  x, y = _gamma_inputs()
  got = gamma_family(x, y, interpret=True)
  want = (_jax(jss.gammasgn, x), _jax(jss.beta, x, y), _jax(jss.betaln, np.abs(x) + 0.1, y),
          _jax(jss.poch, np.abs(x) + 0.5, y), _jax(jss.loggamma, x) + _jax(jnp.i0, x))
  for g, w in zip(got, want):
    np.testing.assert_allclose(f32(g), w, rtol=2e-4, atol=2e-4)


def test_comb_and_factorial_of_integers_match_jax():
  rng = np.random.default_rng(1)
  n, k = rng.integers(-2, 20, 256).astype(np.int32), rng.integers(-1, 10, 256).astype(np.int32)
  got = combinations(n, k, interpret=True)
  want = (_jax(jss.comb, n, k), _jax(jss.comb, n, k, repetition=True), _jax(jss.factorial, n))
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)


def test_bfloat16_operands_compute_in_float32_and_round_once():
  x = np.random.default_rng(2).uniform(1.5, 6, (8, 128)).astype(jnp.bfloat16)
  got = box_cox(x, interpret=True)
  want = (_jax(jss.multigammaln, x, 3), _jax(jss.boxcox, x, 0.5), _jax(jss.boxcox1p, x, np.zeros_like(x)))
  for g, w in zip(got, want):
    assert g.dtype == jnp.bfloat16
    np.testing.assert_allclose(f32(g), w, rtol=3e-2, atol=3e-2)


def test_gamma_family_builds_for_cuda():
  x, y = _gamma_inputs()
  export(gamma_family, x, y)
  export(combinations, np.arange(256, dtype=np.int32), np.arange(256, dtype=np.int32))
  export(box_cox, np.ones((8, 128), jnp.bfloat16))


def test_zeta_keeps_its_mg003_with_a_hint_naming_what_a_kernel_computes():
  e = expect(hurwitz, [S((128,), jnp.float32)], mg.KernelTypeError, "jss.zeta(",
             "zeta cannot take a register tensor inside a kernel")
  assert e.hint.startswith("jax.scipy.special's zeta has no kernel form")
  assert "betaln" in e.hint and "compute zeta outside the kernel" in e.hint and "@ml.inline" in e.hint


# ---------------------------------------------------------------- (2) library combines of a scan
@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def logcumsumexp(x, o1, o2):
  o1[...] = jax.lax.associative_scan(jnp.logaddexp, x[...], axis=1)
  o2[...] = jnp.logaddexp.accumulate(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def reverse_np_scan(x, o):
  o[...] = jax.lax.associative_scan(np.logaddexp, x[...], axis=0, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x, g: (x, g))
def running(x, g, o1, o2):
  o1[...] = np.fmax.accumulate(x[...])
  o2[...] = jax.lax.associative_scan(jnp.gcd, g[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def running_difference(x, o):
  o[...] = jnp.subtract.accumulate(x[...])


def test_logcumsumexp_by_a_jnp_combine_and_by_accumulate():
  x = rnd((8, 128), 3)
  want = np.logaddexp.accumulate(x.astype(np.float64), 1)
  for got in logcumsumexp(x, interpret=True):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  x = rnd((128, 8), 4)
  want = np.flip(np.logaddexp.accumulate(np.flip(x.astype(np.float64), 0), 0), 0)
  np.testing.assert_allclose(reverse_np_scan(x, interpret=True), want, rtol=1e-5, atol=1e-5)


def test_fmax_and_gcd_scans_are_exact():
  x = rnd((256,), 5)
  x[5] = np.nan
  g = (np.random.default_rng(6).integers(1, 50, 256) * 6).astype(np.int32)
  a, b = running(x, g, interpret=True)
  np.testing.assert_array_equal(a, np.fmax.accumulate(x))
  np.testing.assert_array_equal(b, np.gcd.accumulate(g))


def test_library_scans_build_for_cuda():
  export(logcumsumexp, rnd((8, 128), 3))
  export(reverse_np_scan, rnd((128, 8), 4))
  export(running, rnd((256,), 5), np.ones(256, np.int32))


def test_a_non_associative_accumulate_keeps_its_mg003():
  expect(running_difference, [S((256,), jnp.float32)], mg.KernelTypeError, "jnp.subtract.accumulate(",
         "accumulate cannot take a register tensor inside a kernel")


# ---------------------------------------------------------------- (3) jnp.pad's modes along the last axis
def _padded(x, W, M):
  return S(np.pad(np.zeros(x.shape), W).shape, x.dtype)


@mg.mgpu_kernel(out_shape=_padded)
def pad_by(x, o, W: ml.constexpr, M: ml.constexpr):
  o[...] = jnp.pad(x[...], W, mode=M)


@mg.mgpu_kernel(out_shape=lambda x: x)
def neumann_laplacian(x, o):
  p = jnp.pad(x[...], 1, mode="edge")
  o[...] = p[:-2] - 2 * p[1:-1] + p[2:]


@mg.mgpu_kernel(out_shape=lambda x: x)
def periodic_laplacian(x, o):
  p = jnp.pad(x[...], 1, mode="wrap")
  o[...] = p[:-2, 1:-1] + p[2:, 1:-1] + p[1:-1, :-2] + p[1:-1, 2:] - 4 * x[...]


_PADS = [((100,), (3, 5)), ((8, 128), ((1, 2), (2, 6))), ((2, 8, 60), ((0, 0), (1, 1), (4, 4)))]


@pytest.mark.parametrize("mode", ["edge", "wrap", "reflect", "symmetric"])
@pytest.mark.parametrize("shape,W", _PADS)
def test_pad_modes_along_the_last_axis_match_numpy(shape, W, mode):
  x = rnd(shape, 7)
  np.testing.assert_array_equal(pad_by(x, W=W, M=mode, interpret=True), np.pad(x, W, mode=mode))


def test_boundary_stencils_by_pad_match_numpy():
  x = rnd((128,), 8)
  p = np.pad(x, 1, mode="edge")
  np.testing.assert_allclose(neumann_laplacian(x, interpret=True), p[:-2] - 2 * p[1:-1] + p[2:], rtol=1e-6, atol=1e-6)
  v = rnd((16, 128), 9)
  want = np.roll(v, 1, 0) + np.roll(v, -1, 0) + np.roll(v, 1, 1) + np.roll(v, -1, 1) - 4 * v
  np.testing.assert_allclose(periodic_laplacian(v, interpret=True), want, rtol=1e-5, atol=1e-5)


def test_pad_modes_build_for_cuda():
  export(pad_by, rnd((8, 60), 1), W=((0, 0), (2, 2)), M="reflect")
  export(pad_by, rnd((100,), 1), W=(3, 1), M="edge")
  export(neumann_laplacian, rnd((128,), 8))
  export(periodic_laplacian, rnd((16, 128), 9))


# ---------------------------------------------------------------- (4) static range loops whose counters feed shapes
@mg.mgpu_kernel(out_shape=lambda x: x)
def bitonic_by_reshape(x, o, LOG: ml.constexpr = 8):
  N = 1 << LOG
  v = x[...]
  for stage in range(1, LOG + 1):
    for sub in range(stage - 1, -1, -1):
      j = 1 << sub
      y = v.reshape(N // (2 * j), 2, j)
      a, b = y[:, 0, :], y[:, 1, :]
      lo, hi = ml.minimum(a, b), ml.maximum(a, b)
      desc = ((((ml.arange(N // (2 * j)) * (2 * j)) >> stage) & 1) == 1)[:, None]
      v = jnp.stack([ml.where(desc, hi, lo), ml.where(desc, lo, hi)], axis=1).reshape(N)
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda re, im: (re, im))
def stockham_fft(re, im, ore, oim, LOG: ml.constexpr = 8):
  N = 1 << LOG
  xr, xi = re[...], im[...]
  L = 1
  for s in range(LOG):
    m = N // (2 * L)
    ar, ai = xr.reshape(2, m, L), xi.reshape(2, m, L)
    ang = (-np.pi / L) * ml.arange(L).astype(jnp.float32)
    wr, wi = jnp.cos(ang)[None, :], jnp.sin(ang)[None, :]
    vr, vi = ar[1] * wr - ai[1] * wi, ar[1] * wi + ai[1] * wr
    xr = jnp.stack([ar[0] + vr, ar[0] - vr], axis=1).reshape(N)
    xi = jnp.stack([ai[0] + vi, ai[0] - vi], axis=1).reshape(N)
    L *= 2
  ore[...] = xr
  oim[...] = xi


def test_bitonic_sort_by_reshape_sorts():
  x = rnd((256,), 10)
  np.testing.assert_array_equal(bitonic_by_reshape(x, interpret=True), np.sort(x))


def test_stockham_fft_matches_numpy():
  re, im = rnd((256,), 11), rnd((256,), 12)
  f = np.fft.fft(re.astype(np.float64) + 1j * im)
  gr, gi = stockham_fft(re, im, interpret=True)
  np.testing.assert_allclose(gr, f.real, rtol=2e-3, atol=2e-3)
  np.testing.assert_allclose(gi, f.imag, rtol=2e-3, atol=2e-3)


def test_unrolled_loops_build_for_cuda():
  export(bitonic_by_reshape, rnd((256,), 10))
  export(stockham_fft, rnd((256,), 11), rnd((256,), 12))


# ---------------------------------------------------------------- (5) jnp.gradient, cumulative_sum / prod; (6) isinstance
def _grads(x, sp, ax):
  g = jnp.gradient(jnp.zeros(x.shape), *sp, axis=ax)
  return S(x.shape, jnp.float32) if not isinstance(g, list) else tuple(S(x.shape, jnp.float32) for _ in g)


@mg.mgpu_kernel(out_shape=_grads)
def gradient(x, *outs, sp: ml.constexpr, ax: ml.constexpr):
  g = jnp.gradient(x[...], *sp, axis=ax)
  if isinstance(g, list):         # (a list for several axes, a tensor for one: False of a tensor, (6))
    for o, v in zip(outs, g):
      o[...] = v.astype(jnp.float32)
  else:
    outs[0][...] = g.astype(jnp.float32)


_GRADS = [((100,), (0.25,), None, np.float32), ((16, 64), (0.5, 3.0), (0, 1), np.float32),
          ((4, 8, 128), (), (2, 0), np.float32), ((128,), (), None, np.int32), ((8, 128), (2.0,), -1, jnp.bfloat16)]


@pytest.mark.parametrize("shape,sp,ax,dt", _GRADS)
def test_gradient_matches_jnp(shape, sp, ax, dt):
  x = rnd(shape, 13, dt) if dt != np.int32 else np.random.default_rng(1).integers(-50, 50, shape).astype(np.int32)
  got = gradient(x, sp=sp, ax=ax, interpret=True)
  want = jnp.gradient(jnp.asarray(x), *sp, axis=ax)
  got, want = (list(got), want) if isinstance(want, list) else ([got], [want])
  assert len(got) == len(want)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, f32(w), rtol=1e-6, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, ax, inc, prod: S(jnp.cumulative_sum(jnp.zeros(x.shape), axis=ax,
                                                                            include_initial=inc).shape, x.dtype))
def cumulative(x, o, ax: ml.constexpr, inc: ml.constexpr, prod: ml.constexpr):
  if prod:
    o[...] = jnp.cumulative_prod(x[...], axis=ax, include_initial=inc)
  else:
    o[...] = jnp.cumulative_sum(x[...], axis=ax, include_initial=inc)


@pytest.mark.parametrize("shape,ax,inc,prod", [((256,), None, True, False), ((256,), 0, False, True),
                                               ((8, 128), 1, True, False), ((128, 8), 0, True, True),
                                               ((100,), None, True, False)])
def test_cumulative_sum_and_prod_match_jnp(shape, ax, inc, prod):
  x = (1 + 0.01 * rnd(shape, 14)).astype(np.float32)
  f = jnp.cumulative_prod if prod else jnp.cumulative_sum
  np.testing.assert_allclose(cumulative(x, ax=ax, inc=inc, prod=prod, interpret=True),
                             f(jnp.asarray(x), axis=ax, include_initial=inc), rtol=1e-5, atol=1e-5)


def test_gradient_and_cumulative_build_for_cuda():
  export(gradient, rnd((16, 64), 1), sp=(0.5, 3.0), ax=(0, 1))
  export(gradient, rnd((100,), 1), sp=(), ax=None)
  export(cumulative, rnd((8, 128), 1), ax=1, inc=True, prod=False)


# ---------------------------------------------------------------- the GPU runs of the forms (no lowering changed)
@pytest.mark.gpu
def test_forms_on_the_gpu():
  x, y = _gamma_inputs()
  got = jax.jit(gamma_family)(x, y)
  np.testing.assert_allclose(f32(got[1]), _jax(jss.beta, x, y), rtol=1e-3, atol=1e-3)
  v = rnd((8, 128), 3)
  np.testing.assert_allclose(jax.jit(logcumsumexp)(v)[0], np.logaddexp.accumulate(v.astype(np.float64), 1),
                             rtol=1e-4, atol=1e-4)
  w = rnd((8, 60), 1)
  W = ((0, 0), (2, 2))
  np.testing.assert_array_equal(jax.jit(lambda a: pad_by(a, W=W, M="reflect"))(w), np.pad(w, W, mode="reflect"))
  s = rnd((256,), 10)
  np.testing.assert_array_equal(jax.jit(bitonic_by_reshape)(s), np.sort(s))
  g = rnd((16, 64), 2)
  got = jax.jit(lambda a: gradient(a, sp=(0.5, 3.0), ax=(0, 1)))(g)
  for a, b in zip(got, jnp.gradient(jnp.asarray(g), 0.5, 3.0)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-5)
