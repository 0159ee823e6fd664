"""Probe 48b (jnp and lax inside kernels, as Pallas users write them). Two classes that were MG003 ("... cannot take
a register tensor inside a kernel"):
- products of tiles ml.dot takes, written as jnp writes them: `jnp.einsum('qd,kd->qk', q, k)` (and 'ij,jk->ik',
  'ij,jk->ki', 'bij,bjk->bik'), `lax.dot_general` (one contracting axis each, a leading batch axis), `jnp.dot` /
  `jnp.matmul` / `@` / `lax.dot` / `jnp.inner` / `jnp.tensordot` of two register tiles (`q = q_ref[...];
  jnp.dot(q, k.T)`), of float32 tiles (TF32, staged into SMEM K-major), of mixed dtypes (jnp's promotion), of a
  tile and a vector, and jnp.matmul of 3-D tiles (frontend/jnp_dots.py); contracted axes that differ are MG202;
- jnp's, lax's, jax.nn's and jax.scipy.special's elementwise math ml has no namesake for, as XLA computes it:
  `sinh`, `cosh`, `arcsinh`/`asinh`, `arccosh`/`acosh`, `arctanh`/`atanh` (jnp and lax), `deg2rad`/`radians`,
  `rad2deg`/`degrees`, `sinc`, `logaddexp2`, `heaviside`, `expit`, `logit`, `soft_sign`, `squareplus`, `glu`
  (frontend/jnp_math.py), `lax.cumlogsumexp` and `jnp.median` (through frontend/form_helpers.py), `lax.select_n`,
  `lax.population_count`, one-operand `jnp.einsum`, `jnp.diff`, jax.nn's `sparse_plus` and `sparse_sigmoid`,
  `erfinv`."""
import jax
import jax.numpy as jnp
import jax.scipy.special as sp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _rand(shape, dtype=F32, seed=0, scale=1.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _close(got, want, rtol=2e-2, atol=2e-2):
  got, want = np.asarray(got), np.asarray(want)
  assert got.dtype == want.dtype, (got.dtype, want.dtype)
  assert got.shape == want.shape, (got.shape, want.shape)
  np.testing.assert_allclose(got.astype(np.float64), want.astype(np.float64), rtol=rtol, atol=atol, equal_nan=True)


def _f32(*xs):
  return [x.astype(F32) for x in xs]


def _exports(kernel, *args):
  """The kernel builds and verifies its Mosaic GPU module, as the GPU's jax would run it."""
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


# ---------------------------------------------------------------- products as jnp writes them
@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, q.dtype))
def pallas_attention(q_ref, k_ref, v_ref, o_ref):
  """Pallas's reference attention block, as written: loaded tiles, jnp.dot of registers, k.T."""
  q, k, v = q_ref[...], k_ref[...], v_ref[...]
  s = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * 0.125
  p = jnp.exp(s - jnp.max(s, axis=-1, keepdims=True))
  o = jnp.dot(p.astype(v.dtype), v, preferred_element_type=jnp.float32)
  o_ref[...] = (o / jnp.sum(p, axis=-1, keepdims=True)).astype(o_ref.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v: S(q.shape, q.dtype))
def einsum_attention(q_ref, k_ref, v_ref, o_ref):
  q_s, k_s = ml.smem(q_ref.shape, q_ref.dtype), ml.smem(k_ref.shape, k_ref.dtype)
  ml.copy(q_ref, q_s)
  ml.copy(k_ref, k_s)
  s = jnp.einsum("qd,kd->qk", q_s[...], k_s[...], preferred_element_type=jnp.float32) * 0.125
  p = jax.nn.softmax(s, axis=-1)
  o_ref[...] = jnp.einsum("qk,kd->qd", p.astype(v_ref.dtype), v_ref[...]).astype(o_ref.dtype)


def _attention(q, k, v):
  q, k, v = _f32(q, k, v)
  return (jax.nn.softmax(q @ k.T * 0.125, axis=-1) @ v)


@pytest.mark.parametrize("dtype", [F16, BF16])
def test_attention_of_jnp_dots_and_einsums(dtype):
  q, k, v = _rand((64, 64), dtype, 0), _rand((128, 64), dtype, 1), _rand((128, 64), dtype, 2)
  want = _attention(q, k, v).astype(dtype)
  _close(pallas_attention(q, k, v, interpret=True), want)
  _close(einsum_attention(q, k, v, interpret=True), want)
  _exports(pallas_attention, q, k, v)


@mg.mgpu_kernel(out_shape=lambda a, b, bt: (S((a.shape[0], b.shape[1]), jnp.float32),) * 3
                + (S((b.shape[1], a.shape[0]), a.dtype), S((a.shape[0], bt.shape[0]), jnp.float32),
                   S((a.shape[0], b.shape[1]), a.dtype)))
def contractions(a, b, bt, nn, dg_nn, dg_nt_sum, ki, nt, mm):
  """Each spelling of a product of (64, 64) and (64, 128) (or (128, 64) read as its transpose)."""
  av, bv, btv = a[...], b[...], bt[...]
  nn[...] = jnp.einsum("ij,jk->ik", av, bv, preferred_element_type=jnp.float32)
  dg_nn[...] = lax.dot_general(av, bv, (((1,), (0,)), ((), ())), preferred_element_type=jnp.float32)
  dg_nt_sum[...] = lax.dot_general(av, btv, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32) + 1.0
  ki[...] = jnp.einsum("ij,jk->ki", av, bv)            # the product transposed, in the operands' dtype
  nt[...] = jnp.einsum("ij,kj->ik", av, btv, preferred_element_type=jnp.float32)
  mm[...] = av @ bv


@pytest.mark.parametrize("dtype", [F16, BF16, F32])
def test_einsum_dot_general_and_register_dots(dtype):
  a, b, bt = _rand((64, 64), dtype, 3), _rand((64, 128), dtype, 4), _rand((128, 64), dtype, 5)
  nn, dg_nn, dg_nt, ki, nt, mm = contractions(a, b, bt, interpret=True)
  af, bf, btf = _f32(a, b, bt)
  tol = dict(rtol=3e-2, atol=6e-2)          # (float32 products are TF32's, as ml.dot's)
  _close(nn, af @ bf, **tol)
  _close(dg_nn, af @ bf, **tol)
  _close(dg_nt, af @ btf.T + 1.0, **tol)
  _close(ki, jnp.einsum("ij,jk->ki", a, b), **tol)
  _close(nt, af @ btf.T, **tol)
  _close(mm, a @ b, **tol)
  if dtype == F32:
    _exports(contractions, a, b, bt)


@mg.mgpu_kernel(out_shape=lambda a, b, w: (S((a.shape[0], a.shape[1], b.shape[2]), jnp.float32),
                                           S((a.shape[0], a.shape[1], w.shape[1]), a.dtype),
                                           S((a.shape[0], a.shape[1], b.shape[2]), jnp.float32)))
def batched(a, b, w, bmm, proj, dg):
  """A leading batch axis: einsum's 'bij,bjk->bik' of SMEM buffers, jnp.matmul of a 3-D tile by a 2-D one,
  dot_general's batch dimensions."""
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  bmm[...] = jnp.einsum("bij,bjk->bik", a_s[...], b_s[...], preferred_element_type=jnp.float32)
  proj[...] = jnp.matmul(a[...], w[...])
  dg[...] = lax.dot_general(a[...], b[...], (((2,), (1,)), ((0,), (0,))), preferred_element_type=jnp.float32)


def test_batched_products():
  a, b, w = _rand((2, 64, 64), BF16, 6), _rand((2, 64, 64), BF16, 7), _rand((64, 128), BF16, 8)
  bmm, proj, dg = batched(a, b, w, interpret=True)
  af, bf, wf = _f32(a, b, w)
  _close(bmm, jnp.einsum("bij,bjk->bik", af, bf))
  _close(proj, jnp.matmul(a, w), rtol=3e-2, atol=6e-2)
  _close(dg, jnp.einsum("bij,bjk->bik", af, bf))


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), jnp.float32), grid=lambda x, w: (x.shape[0] // 64,))
def linear_of_loaded_tiles(x, w, out):
  """Triton's / Pallas's K loop: both tiles loaded into registers, jnp.dot of bfloat16 by float32 (promoted)."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  acc = jnp.zeros((64, w.shape[1]), jnp.float32)
  for k in range(x.shape[1] // 64):
    acc += jnp.dot(x.at[r, ml.ds(k * 64, 64)][...], w.at[ml.ds(k * 64, 64), :][...])
  out.at[r, :][...] = acc


def test_a_k_loop_of_mixed_dtype_dots():
  x, w = _rand((128, 128), BF16, 9), _rand((128, 64), F32, 10)
  _close(linear_of_loaded_tiles(x, w, interpret=True), jnp.dot(x, w), rtol=3e-2, atol=6e-2)
  _exports(linear_of_loaded_tiles, x, w)


@mg.mgpu_kernel(out_shape=lambda a, b, v: (S((a.shape[0], b.shape[1]), jnp.float32),) * 2
                + (S((a.shape[0], a.shape[0]), a.dtype), S((a.shape[0],), a.dtype), S((b.shape[1],), jnp.float32),
                   S((a.shape[0],), jnp.float32)))
def other_products(a, b, v, ld, td, inner, mv, vm, ein_mv):
  """lax.dot, jnp.tensordot, jnp.inner, and products with a vector (a decode GEMV: no tensor cores, a sum of
  float32 products in registers)."""
  av, bv, vv = a[...], b[...], v[...]
  ld[...] = lax.dot(av, bv, preferred_element_type=jnp.float32)
  td[...] = jnp.tensordot(av, bv, axes=1, preferred_element_type=jnp.float32)
  inner[...] = jnp.inner(av, av)
  mv[...] = jnp.dot(av, vv)
  vm[...] = vv.astype(jnp.float32) @ bv
  ein_mv[...] = jnp.einsum("ij,j->i", av, vv, preferred_element_type=jnp.float32)


def test_lax_dot_tensordot_inner_and_vector_products():
  a, b, v = _rand((64, 64), BF16, 14), _rand((64, 128), BF16, 15), _rand((64,), BF16, 16)
  ld, td, inner, mv, vm, ein_mv = other_products(a, b, v, interpret=True)
  af, bf, vf = _f32(a, b, v)
  _close(ld, af @ bf)
  _close(td, af @ bf)
  _close(inner, jnp.inner(a, a), rtol=3e-2, atol=6e-2)
  _close(mv, jnp.dot(a, v), rtol=3e-2, atol=6e-2)
  _close(vm, vf @ b, rtol=1e-5, atol=1e-5)
  _close(ein_mv, af @ vf, rtol=1e-5, atol=1e-5)
  _exports(other_products, a, b, v)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), a.dtype))
def mismatched_dot(a, b, out):
  out[...] = jnp.dot(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), a.dtype))
def mismatched_matmul(a, b, out):
  k = b[...]
  out[...] = a[...] @ k


def test_a_product_whose_contracted_axes_differ_is_mg202_at_the_call():
  """It was MG003 "dot cannot take a register tensor inside a kernel" (and MG001 for @) whose hint wrote an ml.dot
  that failed in turn; now the mistake jnp reports (its TypeError), at the call, with the transpose that fits."""
  specs = [S((64, 64), BF16), S((128, 64), BF16)]
  expect(mismatched_dot, specs, mg.ShapeMismatchError, "jnp.dot(",
         "jnp.dot(a[...], b[...]) of shapes (64, 64) and (128, 64): the contracted axes differ (64 and 128)",
         hint="a product multiplies a's last axis with b's first: a is (m, k) and b is (k, n); to contract both"
              " last axes (64), transpose b: jnp.dot(a[...], b[...].T)")
  expect(mismatched_matmul, [S((64, 32), F16), S((128, 64), F16)], mg.ShapeMismatchError, "a[...] @ k",
         "a[...] @ k of shapes (64, 32) and (128, 64): the contracted axes differ (32 and 128)",
         hint="a product multiplies a's last axis with b's first: a is (m, k) and b is (k, n)")


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int32))
def where_of_one_argument(x, out):
  idx = jnp.where(x[...] > 0)
  out[...] = idx[0][:1]


def test_where_of_one_argument_says_why_and_what_to_write():
  """Its hint was "use ml.where: kernels call ml.* functions on register values", which does not take one argument."""
  expect(where_of_one_argument, [S((256,), F32)], mg.KernelTypeError, "jnp.where(",
         "where cannot take a register tensor inside a kernel",
         hint="jnp.where(c) of one argument is jnp.nonzero(c), the indices where c holds: their count depends on the"
              " data, and a kernel's tensors have static shapes. Select with three arguments, ml.where(c, x, y); count"
              " with ml.sum(c); or give each kept element its position, ml.cumsum(c, dtype=jnp.int32) - 1, and"
              " scatter it there (a masked store or an atomic scatter)")


# ---------------------------------------------------------------- elementwise math as XLA computes it
@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, x.dtype) for _ in range(10)))
def hyperbolic(x, a, b, c, d, e, f, g, h, i, j):
  v = x[...]
  a[...] = jnp.sinh(v)
  b[...] = jnp.cosh(v)
  c[...] = jnp.arcsinh(v)
  d[...] = jnp.arccosh(v)
  e[...] = jnp.arctanh(v)
  f[...] = lax.sinh(v) - lax.cosh(v) + lax.asinh(v)
  g[...] = jnp.asinh(v) + jnp.atanh(v * 0.5) + lax.atanh(v * 0.25)
  h[...] = jnp.acosh(jnp.abs(v) + 1) + lax.acosh(jnp.abs(v) + 2)
  i[...] = jnp.sinc(v)
  j[...] = sp.logit(jnp.abs(v) * 0.125) + sp.expit(v) + jnp.deg2rad(v)   # (0.125: exact, so 1 - x fused on the GPU rounds alike)


def _hyperbolic(v):
  return (jnp.sinh(v), jnp.cosh(v), jnp.arcsinh(v), jnp.arccosh(v), jnp.arctanh(v),
          lax.sinh(v) - lax.cosh(v) + lax.asinh(v), jnp.asinh(v) + jnp.atanh(v * 0.5) + lax.atanh(v * 0.25),
          jnp.acosh(jnp.abs(v) + 1) + lax.acosh(jnp.abs(v) + 2), jnp.sinc(v),
          sp.logit(jnp.abs(v) * 0.125) + sp.expit(v) + jnp.deg2rad(v))


def _edges(dtype, near_overflow=89.5):
  """Values at every branch of XLA's decompositions: zeros, |x| about 1, large (overflow branches), inf, NaN (sinh
  and cosh of +-89.5 are within an ulp of float32's largest value: the GPU test leaves them out)."""
  edges = [0.0, -0.0, 1.0, -1.0, 0.5, -0.5, 1e-7, -1e-7, 1e-3, 0.999, 1.001, 2.0, 88.0, near_overflow,
           -near_overflow, 100.0, 300.0, 4e4, 1e20, -1e20, 3e38, np.inf, -np.inf, np.nan]
  rng = np.random.default_rng(11)
  scales = np.repeat([1e-3, 0.3, 1.0, 5.0, 20.0], 205)[:1024 - len(edges)]
  return jnp.asarray(np.concatenate([edges, rng.standard_normal(1024 - len(edges)) * scales]).reshape(8, 128), dtype)


@pytest.mark.parametrize("dtype", [F32, F16, BF16])
def test_hyperbolic_and_other_math_is_jnps(dtype):
  x = _edges(dtype)
  with np.errstate(all="ignore"):
    for n, (got, want) in enumerate(zip(hyperbolic(x, interpret=True), _hyperbolic(x))):
      if n == 8:              # sinc: jax 0.11's series near 0 and 0 at +-inf (jax 0.10's NaN there; an ulp apart)
        finite = ~np.isinf(np.asarray(x))
        assert np.all(np.asarray(got)[~finite] == 0)
        eps = float(jnp.finfo(dtype).eps)
        np.testing.assert_allclose(np.asarray(got, np.float64)[finite], np.asarray(want, np.float64)[finite],
                                   rtol=4 * eps, atol=eps / 4, equal_nan=True)
      elif dtype == F32:        # (numpy's exp and log against XLA's: a few ulp)
        _close(got, want, rtol=2e-6, atol=1e-6)
      elif n < 5:             # (16-bit: XLA's own steps, each rounded, or float32 rounded once: within an ulp)
        _close(got, want, rtol=float(jnp.finfo(dtype).eps), atol=0)
      else:                   # (sums of them: XLA on the CPU keeps a fused chain's 16-bit steps in float32, where
        _close(got, want, rtol=2e-2, atol=1e-2)    # interpret mode rounds each of three terms: two ulp apart)


@mg.mgpu_kernel(out_shape=lambda x, y: (S(x.shape, jnp.float32),) * 3 + (S(x.shape, x.dtype), S((x.shape[0], x.shape[1] // 2), x.dtype)))
def more_math(x, y, a, b, c, d, e):
  v, w = x[...], y[...]
  a[...] = jnp.logaddexp2(v, w)                          # bfloat16 with float32: float32
  b[...] = jnp.heaviside(w, 0.5) + jnp.sinh(jnp.arange(128)[None, :] % 3)     # an int32 operand: float32
  c[...] = jnp.rad2deg(w) + jnp.radians(w)
  d[...] = jax.nn.soft_sign(v) + jax.nn.squareplus(v) + jax.nn.squareplus(v, b=1.0)
  e[...] = jax.nn.glu(v, axis=-1)


def test_binary_math_activations_and_promotion():
  x, y = _rand((8, 128), BF16, 12, 3.0), _rand((8, 128), F32, 13, 3.0)
  y = y.at[0, :4].set(jnp.array([0.0, -0.0, np.inf, np.nan]))
  a, b, c, d, e = more_math(x, y, interpret=True)
  _close(a, jnp.logaddexp2(x, y), rtol=1e-6, atol=1e-6)
  _close(b, jnp.heaviside(y, 0.5) + jnp.sinh(jnp.arange(128)[None, :] % 3), rtol=1e-6, atol=1e-6)
  _close(c, jnp.rad2deg(y) + jnp.radians(y), rtol=1e-6, atol=1e-6)
  once = lambda f, *a: f(x.astype(F32), *a).astype(BF16)     # (16-bit: in float32, rounded once, as XLA on the GPU)
  _close(d, once(jax.nn.soft_sign) + once(jax.nn.squareplus) + once(jax.nn.squareplus, 1.0), rtol=1e-2, atol=1e-2)
  _close(e, jax.nn.glu(x, axis=-1), rtol=1e-2, atol=1e-2)
  _exports(more_math, x, y)
  _exports(hyperbolic, _edges(BF16))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype),) * 2 + (S((x.shape[0],), x.dtype),
                                     S((x.shape[0], 1), x.dtype), S((x.shape[1],), x.dtype)))
def scans_and_medians(x, lse, lse_rev, med, med_kd, med0):
  v = x[...]
  lse[...] = lax.cumlogsumexp(v, axis=1)
  lse_rev[...] = lax.cumlogsumexp(v, axis=1, reverse=True)
  med[...] = jnp.median(v, axis=1)
  med_kd[...] = jnp.median(v, axis=-1, keepdims=True)
  med0[...] = jnp.median(v, axis=0)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_cumlogsumexp_and_median(dtype):
  """lax.cumlogsumexp (a scan of lax's logaddexp; -inf and a row starting with -inf included) and jnp.median along
  either axis (jnp.quantile's midpoint of the sorted row: bit for bit; NaN where the row holds one)."""
  x = _rand((8, 96), dtype, 17, 3.0)
  x = x.at[0, 5].set(-jnp.inf).at[1, :3].set(-jnp.inf).at[2, 7].set(jnp.nan)
  lse, lse_rev, med, med_kd, med0 = scans_and_medians(x, interpret=True)
  tol = dict(rtol=1e-5, atol=1e-5) if dtype == F32 else dict(rtol=2e-2, atol=6e-2)
  _close(lse, lax.cumlogsumexp(x, axis=1), **tol)
  _close(lse_rev, lax.cumlogsumexp(x, axis=1, reverse=True), **tol)
  _close(med, jnp.median(x, axis=1), rtol=0, atol=0)
  _close(med_kd, jnp.median(x, axis=-1, keepdims=True), rtol=0, atol=0)
  _close(med0, jnp.median(x, axis=0), rtol=0, atol=0)
  if dtype == F32:
    _exports(scans_and_medians, x)


@mg.mgpu_kernel(out_shape=lambda x, n: (S(x.shape, x.dtype), S(n.shape, jnp.int32), S(x.shape[::-1], x.dtype),
                                        S((x.shape[0],), x.dtype), S((x.shape[0], x.shape[1] - 1), x.dtype),
                                        S(x.shape, x.dtype)))
def lax_and_jnp_odds(x, n, sel, pop, tr, rowsum, dif, sparse):
  """lax.select_n (a bool and an int32 selector), lax.population_count, one-operand einsums, jnp.diff, jax.nn's
  sparse_plus and sparse_sigmoid."""
  v = x[...]
  which = (v > 1).astype(jnp.int32) + (v > 0).astype(jnp.int32)
  sel[...] = lax.select_n(v > 0, v, -v) + lax.select_n(which, v, 2 * v, 3 * v)
  pop[...] = lax.population_count(n[...])
  tr[...] = jnp.einsum("ij->ji", v)
  rowsum[...] = jnp.einsum("ij->i", v)
  dif[...] = jnp.diff(v, axis=1)
  sparse[...] = jax.nn.sparse_plus(v) + jax.nn.sparse_sigmoid(v)


def test_select_n_population_count_one_operand_einsum_and_diff():
  x = _rand((128, 128), F32, 18, 2.0)
  n = jnp.asarray(np.random.default_rng(19).integers(-2 ** 31, 2 ** 31 - 1, (8, 128)), jnp.int32)
  sel, pop, tr, rowsum, dif, sparse = lax_and_jnp_odds(x, n, interpret=True)
  which = (x > 1).astype(jnp.int32) + (x > 0).astype(jnp.int32)
  _close(sel, lax.select_n(x > 0, x, -x) + lax.select_n(which, x, 2 * x, 3 * x), rtol=0, atol=0)
  _close(pop, lax.population_count(n), rtol=0, atol=0)
  _close(tr, x.T, rtol=0, atol=0)
  _close(rowsum, jnp.einsum("ij->i", x), rtol=1e-5, atol=1e-5)
  _close(dif, jnp.diff(x, axis=1), rtol=0, atol=0)
  _close(sparse, jax.nn.sparse_plus(x) + jax.nn.sparse_sigmoid(x), rtol=1e-6, atol=1e-6)
  _exports(lax_and_jnp_odds, x, n)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, x.dtype),) * 2)
def inverse_erf(x, a, b):
  a[...] = sp.erfinv(x[...])
  b[...] = lax.erf_inv(x[...] * 0.5)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_erfinv_is_xlas_polynomial(dtype):
  """jax.scipy.special.erfinv and lax.erf_inv: XLA's ErfInv (Giles' polynomials), +-inf at +-1, NaN past them."""
  rng = np.random.default_rng(21)
  x = jnp.asarray(np.concatenate([[0, 1, -1, 0.999, -0.9999, 1.5, np.nan], rng.uniform(-1, 1, 1017)]).reshape(8, 128),
                  dtype)
  eps = float(jnp.finfo(dtype).eps)
  a, b = inverse_erf(x, interpret=True)
  _close(a, sp.erfinv(x), rtol=4 * eps, atol=eps)
  _close(b, lax.erf_inv(x * 0.5), rtol=4 * eps, atol=eps)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def median_of_odd_rows(x, out):
  out[...] = jnp.median(x[...], axis=1)


def test_median_of_a_tile_no_register_tensor_holds():
  """A (5, 40) or (8, 100) read is computed padded: the median's middle elements are the row's own (its true
  length), and its NaN test reads the sorted row's ends (a padded row's reduction would not meet them)."""
  for shape in ((5, 40), (8, 100)):
    x = _rand(shape, F32, 20).at[1, 3].set(jnp.nan)
    _close(median_of_odd_rows(x, interpret=True), jnp.median(x, axis=1), rtol=0, atol=0)


@pytest.mark.gpu
def test_gpu_products_and_math_match_interpret_mode():
  cases = [(pallas_attention, (_rand((64, 64), F16, 0), _rand((128, 64), F16, 1), _rand((128, 64), F16, 2))),
           (contractions, (_rand((64, 64), F32, 3), _rand((64, 128), F32, 4), _rand((128, 64), F32, 5))),
           (contractions, (_rand((64, 64), BF16, 3), _rand((64, 128), BF16, 4), _rand((128, 64), BF16, 5))),
           (batched, (_rand((2, 64, 64), BF16, 6), _rand((2, 64, 64), BF16, 7), _rand((64, 128), BF16, 8))),
           (linear_of_loaded_tiles, (_rand((128, 128), BF16, 9), _rand((128, 64), F32, 10))),
           (other_products, (_rand((64, 64), BF16, 14), _rand((64, 128), BF16, 15), _rand((64,), BF16, 16))),
           (hyperbolic, (_edges(F32, 80.0),)), (hyperbolic, (_edges(BF16, 80.0),)),
           (more_math, (_rand((8, 128), BF16, 12, 3.0), _rand((8, 128), F32, 13, 3.0))),
           (scans_and_medians, (_rand((8, 96), F32, 17, 3.0),)),
           (inverse_erf, (jnp.tanh(_rand((8, 128), F32, 21)),)),
           (lax_and_jnp_odds, (_rand((128, 128), F32, 18, 2.0),
                               jnp.asarray(np.random.default_rng(19).integers(-2 ** 31, 2 ** 31 - 1, (8, 128)), jnp.int32)))]
  for kernel, args in cases:
    gpu, cpu = kernel(*args), kernel(*args, interpret=True)
    for got, want in zip(gpu if isinstance(gpu, tuple) else (gpu,), cpu if isinstance(cpu, tuple) else (cpu,)):
      _close(got, want, rtol=2e-2, atol=2e-2)
