"""Probe 49b (jnp and lax inside kernels, as Pallas users write them). Two classes that were MG003 ("... cannot take
a register tensor inside a kernel"):
- jnp's and lax's bit-level float functions and lax's special functions (frontend/jnp_bits.py, bit_helpers.py,
  special_helpers.py): `jnp.nextafter` / `lax.nextafter`, `jnp.frexp`, `jnp.ldexp`, `lax.reduce_precision`,
  `jnp.float_power`, `jnp.fabs`, `jnp.modf`, `jnp.signbit` of integers and bools, `jnp.bitwise_count`,
  `lax.shift_right_logical` / `shift_right_arithmetic` by a run-time amount, `lax.lgamma` / `digamma` and
  jax.scipy.special's `gammaln` / `digamma`, `jax.nn.standardize`; jax.scipy.special's `xlogy`, `xlog1py`, `entr`,
  `rel_entr`, `kl_div`, `ndtr`, and `jnp.divmod`, `jnp.vdot`, `conjugate` / `real` / `imag` of real tiles
  (frontend/jnp_scipy.py); jnp's binary inexact functions (`arctan2`, `copysign`, `hypot`, `heaviside`, `logaddexp2`,
  `nextafter`, `isclose`) of integer tiles, converted as jnp's promote_args_inexact (jnp_calls.inexact_operands);
- two-operand `jnp.einsum` specs that are not a matrix product (outer products 'ij,jk->ijk', row dots 'ij,ij->i',
  elementwise products: frontend/jnp_einsum.py), with MG202 for a label of two sizes and an MG003 that writes the
  broadcast product where it is too large for registers; and products of 2-D tiles ml.dot does not take (`jnp.dot`
  of (48, 40) by (40, 72), `@` of (8, 16) by (16, 32), einsum 'ij,jk->ik') as chunked broadcast products summed in
  registers."""
import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _rand(shape, dtype=F32, seed=0, scale=1.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _ints(shape, lo, hi, seed, dtype=jnp.int32):
  return jnp.asarray(np.random.default_rng(seed).integers(lo, hi, shape), dtype)


def _same(got, want):
  """Bit for bit (NaN as NaN), with jnp's dtype and shape."""
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
  np.testing.assert_array_equal(got, want)


def _close(got, want, rtol, atol):
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape, want.dtype, want.shape)
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def _exports(kernel, *args):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


# ---------------------------------------------------------------- bit-level float functions
def _bits_ref(x, y, n):
  m, e = jnp.frexp(x)
  return (jnp.nextafter(x, y), lax.nextafter(x, jnp.zeros_like(x)), m, e, jnp.ldexp(x, n), jnp.ldexp(x, 3),
          lax.reduce_precision(x * 1000, exponent_bits=4, mantissa_bits=3), lax.reduce_precision(x, 5, 2),
          jnp.float_power(jnp.abs(x), 1.5), jnp.modf(x * 4)[0], jnp.modf(x * 4)[1])


@mg.mgpu_kernel(out_shape=lambda x, y, n: tuple(S(r.shape, r.dtype) for r in jax.eval_shape(
    _bits_ref, S(x.shape, x.dtype), S(y.shape, y.dtype), S(n.shape, n.dtype))))
def float_bits(x_ref, y_ref, n_ref, up, down, mant, expo, scaled, scaled3, e4m3, e5m2, fpow, frac, whole):
  x, y, n = x_ref[...], y_ref[...], n_ref[...]
  up[...] = jnp.nextafter(x, y)
  down[...] = lax.nextafter(x, jnp.zeros_like(x))
  m, e = jnp.frexp(x)
  mant[...] = m
  expo[...] = e
  scaled[...] = jnp.ldexp(x, n)
  scaled3[...] = jnp.ldexp(x, 3)
  e4m3[...] = lax.reduce_precision(x * 1000, exponent_bits=4, mantissa_bits=3)
  e5m2[...] = lax.reduce_precision(x, 5, 2)
  fpow[...] = jnp.float_power(jnp.abs(x), 1.5)
  f, w = jnp.modf(x * 4)      # (a power of two: exact, so a fused multiply-add on the GPU rounds alike)
  frac[...] = f
  whole[...] = w


@pytest.mark.parametrize("dtype", [F32, BF16, F16])
def test_bit_level_float_functions_are_jnps_bit_for_bit(dtype):
  x = _rand((8, 128), dtype, 0, 3.0).at[0, :4].set(jnp.asarray([0.0, -0.0, jnp.inf, jnp.nan], dtype))
  y = _rand((8, 128), dtype, 1).at[0, :8].set(x[0, :8]).at[1, 0].set(-1.0)
  n = _ints((8, 128), -20, 20, 2)
  got = float_bits(x, y, n, interpret=True)
  want = _bits_ref(x, y, n)
  for i, (g, w) in enumerate(zip(got, want)):
    if i == 8:          # float_power: XLA's pow on the CPU and NumPy's can differ in the last bit
      _close(g, w, rtol=1e-2 if dtype != F32 else 1e-6, atol=0)
    else:
      _same(g, w)


def test_bit_level_float_functions_build_for_the_gpu():
  x, y, n = _rand((8, 128), BF16), _rand((8, 128), BF16, 1), _ints((8, 128), -20, 20, 2)
  _exports(float_bits, x, y, n)
  _exports(float_bits, x.astype(F32), y.astype(F32), n)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int32), S(x.shape, jnp.int32), S(x.shape, jnp.int16),
                                     S(x.shape, jnp.uint32), S(x.shape, jnp.bool_), S(x.shape, jnp.bool_),
                                     S(x.shape, jnp.float32), S(x.shape, jnp.uint8)))
def integer_bits(x_ref, srl, sra, srl16, sru, neg, never, mag, count):
  x = x_ref[...]
  s = x % 40                                  # run-time amounts, past the width too
  srl[...] = lax.shift_right_logical(x, s)
  sra[...] = lax.shift_right_arithmetic(x, s)
  srl16[...] = lax.shift_right_logical(x.astype(jnp.int16), (x % 20).astype(jnp.int16))
  sru[...] = lax.shift_right_arithmetic(x.astype(jnp.uint32), s.astype(jnp.uint32))
  neg[...] = jnp.signbit(x)
  never[...] = jnp.signbit(x > 0)
  mag[...] = jnp.fabs(x)
  count[...] = jnp.bitwise_count(x)


def test_integer_bit_functions_are_jnps():
  x = _ints((8, 128), -2 ** 31, 2 ** 31 - 1, 3)
  s = x % 40
  want = (lax.shift_right_logical(x, s), lax.shift_right_arithmetic(x, s),
          lax.shift_right_logical(x.astype(jnp.int16), (x % 20).astype(jnp.int16)),
          lax.shift_right_arithmetic(x.astype(jnp.uint32), s.astype(jnp.uint32)), jnp.signbit(x),
          jnp.signbit(x > 0), jnp.fabs(x), jnp.bitwise_count(x))
  for g, w in zip(integer_bits(x, interpret=True), want):
    _same(g, w)
  _exports(integer_bits, x)


# ---------------------------------------------------------------- special functions and standardize
def _special_ref(x):
  return (lax.lgamma(x), lax.digamma(x), sp.gammaln(jnp.abs(x) + 0.5), sp.digamma(jnp.abs(x) + 0.5),
          jax.nn.standardize(x), jax.nn.standardize(x, axis=0, epsilon=1e-3))


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(r.shape, r.dtype) for r in jax.eval_shape(_special_ref, x)))
def special(x_ref, lg, dg, lg_sp, dg_sp, st, st0):
  x = x_ref[...]
  lg[...] = lax.lgamma(x)
  dg[...] = lax.digamma(x)
  lg_sp[...] = sp.gammaln(jnp.abs(x) + 0.5)
  dg_sp[...] = sp.digamma(jnp.abs(x) + 0.5)
  st[...] = jax.nn.standardize(x)
  st0[...] = jax.nn.standardize(x, axis=0, epsilon=1e-3)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_lgamma_digamma_and_standardize_match_jax(dtype):
  x = _rand((8, 128), dtype, 4, 4.0).at[0, :6].set(jnp.asarray([1.0, 2.0, -1.0, -3.0, jnp.inf, -2.5], dtype))
  tol = dict(rtol=2e-5, atol=2e-5) if dtype == F32 else dict(rtol=2e-2, atol=2e-2)
  for g, w in zip(special(x, interpret=True), _special_ref(x)):
    _close(g, w, **tol)
  # digamma(0) is jax 0.11's -inf (the H200's jax; 0.10 gives NaN), lgamma(0) inf
  lg, dg = special(x.at[0, 0].set(0.0), interpret=True)[:2]
  assert np.asarray(dg)[0, 0] == -np.inf and np.asarray(lg)[0, 0] == np.inf
  _exports(special, x)


# ---------------------------------------------------------------- jax.scipy.special's log terms, jnp's odds
def _odds_ref(x, y, n, v):
  return (sp.xlogy(x, jnp.abs(y)), sp.xlog1py(x, jnp.abs(y)), sp.xlogy(n, 3.0), sp.entr(x), sp.rel_entr(
      jnp.abs(x), y), sp.kl_div(jnp.abs(x), jnp.abs(y)), sp.ndtr(x * 3), jnp.divmod(x, y)[0], jnp.divmod(n, 7)[1],
      jnp.vdot(v, v), jnp.conjugate(x) + jnp.real(x) + jnp.imag(x))


@mg.mgpu_kernel(out_shape=lambda x, y, n, v: tuple(S(r.shape, r.dtype) for r in jax.eval_shape(_odds_ref, x, y, n, v)))
def scipy_odds(x_ref, y_ref, n_ref, v_ref, xl, xl1, xln, en, rel, kl, nd, quot, rem, vd, parts):
  x, y, n, v = x_ref[...], y_ref[...], n_ref[...], v_ref[...]
  xl[...] = sp.xlogy(x, jnp.abs(y))
  xl1[...] = sp.xlog1py(x, jnp.abs(y))
  xln[...] = sp.xlogy(n, 3.0)
  en[...] = sp.entr(x)
  rel[...] = sp.rel_entr(jnp.abs(x), y)
  kl[...] = sp.kl_div(jnp.abs(x), jnp.abs(y))
  nd[...] = sp.ndtr(x * 3)
  quot[...] = jnp.divmod(x, y)[0]
  rem[...] = jnp.divmod(n, 7)[1]
  vd[...] = jnp.vdot(v, v)
  parts[...] = jnp.conjugate(x) + jnp.real(x) + jnp.imag(x)


def test_scipy_log_terms_and_jnp_odds_match_jax():
  x = _rand((8, 128), F32, 8).at[0, :4].set(jnp.asarray([0.0, 0.0, -1.0, jnp.nan]))
  y = _rand((8, 128), F32, 9).at[0, :4].set(jnp.asarray([0.0, jnp.nan, 0.0, 1.0]))
  n, v = _ints((8, 128), -1000, 1000, 10), _rand((128,), F32, 11)
  for g, w in zip(scipy_odds(x, y, n, v, interpret=True), _odds_ref(x, y, n, v)):
    _close(g, w, rtol=1e-5, atol=1e-6)
  _exports(scipy_odds, x, y, n, v)


# ---------------------------------------------------------------- jnp's inexact binary functions of integer tiles
def _int_binary_ref(i, j, x):
  return (jnp.arctan2(i, j), jnp.arctan2(i, 2), jnp.copysign(i, x), jnp.hypot(i, j), jnp.heaviside(i, 0.5),
          jnp.logaddexp2(i % 10, j % 10), jnp.nextafter(i, j), jnp.isclose(i, j, atol=300))


@mg.mgpu_kernel(out_shape=lambda i, j, x: tuple(S(r.shape, r.dtype) for r in jax.eval_shape(_int_binary_ref, i, j, x)))
def int_binary(i_ref, j_ref, x_ref, at, at2, cs, hy, hv, la2, na, ic):
  i, j, x = i_ref[...], j_ref[...], x_ref[...]
  at[...] = jnp.arctan2(i, j)
  at2[...] = jnp.arctan2(i, 2)
  cs[...] = jnp.copysign(i, x)
  hy[...] = jnp.hypot(i, j)
  hv[...] = jnp.heaviside(i, 0.5)
  la2[...] = jnp.logaddexp2(i % 10, j % 10)
  na[...] = jnp.nextafter(i, j)
  ic[...] = jnp.isclose(i, j, atol=300)


def test_inexact_binary_functions_of_integer_tiles_promote_as_jnp():
  """jnp.arctan2 of int32 tiles was MG106 (ml.atan2 needs a float), copysign, hypot, heaviside, logaddexp2,
  nextafter and isclose of them MG003: jnp converts them to float32 (the float operand's dtype beside one)."""
  i, j = _ints((8, 128), -1000, 1000, 15), _ints((8, 128), -1000, 1000, 16)
  x = _rand((8, 128), BF16, 17)
  for g, w in zip(int_binary(i, j, x, interpret=True), _int_binary_ref(i, j, x)):
    _close(g, w, rtol=1e-6, atol=1e-6)
  _exports(int_binary, i, j, x)


# ---------------------------------------------------------------- einsum specs that are not matrix products
def _einsum_ref(a, b, c):
  return (jnp.einsum("ij,jk->ijk", a, b), jnp.einsum("ij,ij->i", a, c), jnp.einsum("ij,ik->ijk", a, c[:, :4]),
          jnp.einsum("ij,j->ij", a, b[:, 0]), jnp.einsum("ij,jk->kji", a, b),
          jnp.einsum("bi,bj->bij", a, c, preferred_element_type=jnp.float32), jnp.einsum("i,j->ij", a[0], b[0]))


@mg.mgpu_kernel(out_shape=lambda a, b, c: tuple(S(r.shape, r.dtype) for r in jax.eval_shape(_einsum_ref, a, b, c)))
def einsums(a_ref, b_ref, c_ref, outer, rowdot, outer2, scaled, permuted, batched, vec_outer):
  a, b, c = a_ref[...], b_ref[...], c_ref[...]
  outer[...] = jnp.einsum("ij,jk->ijk", a, b)
  rowdot[...] = jnp.einsum("ij,ij->i", a, c)
  outer2[...] = jnp.einsum("ij,ik->ijk", a, c[:, :4])
  scaled[...] = jnp.einsum("ij,j->ij", a, b[:, 0])
  permuted[...] = jnp.einsum("ij,jk->kji", a, b)
  batched[...] = jnp.einsum("bi,bj->bij", a, c, preferred_element_type=jnp.float32)
  vec_outer[...] = jnp.einsum("i,j->ij", a[0], b[0])


@pytest.mark.parametrize("dtype", [F32, BF16, jnp.int32])
def test_einsum_outer_and_row_products(dtype):
  if dtype == jnp.int32:
    a, b, c = _ints((8, 16), -50, 50, 5), _ints((16, 32), -50, 50, 6), _ints((8, 16), -50, 50, 7)
  else:
    a, b, c = _rand((8, 16), dtype, 5), _rand((16, 32), dtype, 6), _rand((8, 16), dtype, 7)
  tol = dict(rtol=1e-5, atol=1e-5) if dtype != BF16 else dict(rtol=1e-2, atol=1e-2)
  for g, w in zip(einsums(a, b, c, interpret=True), _einsum_ref(a, b, c)):
    _close(g, w, **tol)
  _exports(einsums, a, b, c)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def odd_dot(a_ref, b_ref, out):
  """A product ml.dot does not take (m not a multiple of 64, a b of 40 rows): in registers."""
  out[...] = jnp.dot(a_ref[...], b_ref[...], preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), a.dtype), S((a.shape[0], b.shape[1]), a.dtype)))
def small_products(a_ref, b_ref, p, e):
  a, b = a_ref[...], b_ref[...]
  p[...] = a @ b
  e[...] = jnp.einsum("ij,jk->ik", a, b)


@pytest.mark.parametrize("m, k, n, dtype", [(48, 40, 72, BF16), (64, 40, 72, BF16), (48, 40, 72, F32),
                                            (24, 32, 40, F16)])
def test_a_product_ml_dot_does_not_take_computes_in_registers(m, k, n, dtype):
  a, b = _rand((m, k), dtype, 12), _rand((k, n), dtype, 13)
  _close(odd_dot(a, b, interpret=True), jnp.dot(a, b, preferred_element_type=jnp.float32), rtol=1e-4, atol=1e-4)
  if (m, k, dtype) == (48, 40, BF16):
    _exports(odd_dot, a, b)


@pytest.mark.parametrize("dtype", [F32, jnp.int32])
def test_small_products_of_at_and_einsum_compute_in_registers(dtype):
  if dtype == jnp.int32:
    a, b = _ints((8, 16), -1000, 1000, 12), _ints((16, 32), -1000, 1000, 13)
  else:
    a, b = _rand((8, 16), dtype, 12), _rand((16, 32), dtype, 13)
  for g, w in zip(small_products(a, b, interpret=True), (a @ b, jnp.einsum("ij,jk->ik", a, b))):
    _close(g, w, rtol=1e-5, atol=1e-5)
  _exports(small_products, a, b)


@mg.mgpu_kernel(out_shape=lambda x, y: S((8, 32), jnp.float32))
def einsum_sizes_differ(x, y, out):
  out[...] = jnp.einsum("ij,jk->ik", x[...], y[...])


def test_einsum_label_of_two_sizes_is_mg202():
  expect(einsum_sizes_differ, (S((8, 16), F32), S((12, 32), F32)), mg.ShapeMismatchError, "jnp.einsum(",
         "jnp.einsum('ij,jk->ik') of shapes (8, 16) and (12, 32): label 'j' names axes of sizes 16 and 12",
         hint="a label names axes of one size in every operand; give the two 'j' axes one size, or name them apart "
              "(a new letter) if they are different axes")


@mg.mgpu_kernel(out_shape=lambda x, y: S((64, 32, 64), jnp.float32))
def einsum_too_large(x, y, out):
  out[...] = jnp.einsum("ij,jk->ijk", x[...], y[...])


def test_einsum_too_large_for_registers_writes_the_broadcasts():
  expect(einsum_too_large, (S((64, 32), F32), S((32, 64), F32)), mg.KernelTypeError, "jnp.einsum(",
         "jnp.einsum('ij,jk->ijk') is a broadcast product of shape (64, 32, 64) (131072 elements), more than a "
         "kernel holds in registers (32768)",
         hint="it is x[...][:, :, None] * y[...][None, :, :] (summed over the labels not in the output); compute it "
              "in pieces, a slice of the first axis at a time in a loop, storing each piece")


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_bits_specials_and_einsums_match_interpret_mode():
  x = _rand((8, 128), F32, 0, 3.0).at[0, :4].set(jnp.asarray([0.0, -0.0, jnp.inf, jnp.nan], F32))
  cases = [(float_bits, (x, _rand((8, 128), F32, 1), _ints((8, 128), -20, 20, 2))),
           (float_bits, (x.astype(BF16), _rand((8, 128), BF16, 1), _ints((8, 128), -20, 20, 2))),
           (integer_bits, (_ints((8, 128), -2 ** 31, 2 ** 31 - 1, 3),)),
           (special, (_rand((8, 128), F32, 4, 4.0),)), (special, (_rand((8, 128), BF16, 4, 4.0),)),
           (scipy_odds, (_rand((8, 128), F32, 8), _rand((8, 128), F32, 9), _ints((8, 128), -1000, 1000, 10),
                         _rand((128,), F32, 11))),
           (einsums, (_rand((8, 16), F32, 5), _rand((16, 32), F32, 6), _rand((8, 16), F32, 7))),
           (einsums, (_rand((8, 16), BF16, 5), _rand((16, 32), BF16, 6), _rand((8, 16), BF16, 7))),
           (int_binary, (_ints((8, 128), -1000, 1000, 15), _ints((8, 128), -1000, 1000, 16),
                         _rand((8, 128), BF16, 17))),
           (odd_dot, (_rand((48, 40), BF16, 12), _rand((40, 72), BF16, 13))),
           (odd_dot, (_rand((64, 40), F32, 12), _rand((40, 72), F32, 13))),
           (small_products, (_rand((8, 16), F32, 12), _rand((16, 32), F32, 13)))]
  for kernel, args in cases:
    gpu, cpu = kernel(*args), kernel(*args, interpret=True)
    for got, want in zip(*((r,) if not isinstance(r, tuple) else r for r in (gpu, cpu))):
      _close(got, want, rtol=2e-2, atol=2e-2)
