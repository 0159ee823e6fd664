"""Probe 45e (loss functions and whole-array reductions as training code writes them: MSE, L1, Huber, KL
divergence, BCE with logits, cross-entropy over a large vocabulary with an online logsumexp, label smoothing,
ignore_index and z-loss, cosine-similarity, triplet-margin, hinge and Dice losses; reduced to a scalar by atomics,
by partials and a second kernel, or by one program looping; backward kernels under jax.custom_vjp).

Each section says what was wrong: hints that broke a compound argument or named torch's keywords, a scalar's
s[None] and s[...], hints for a bfloat16 sum into a float32 loss, statistics of a (1, r, vocab) tile, partials
of a grid that is not a multiple of 8, a vector of a few scalars."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rnd(shape, seed, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _scalar(*args):
  return S((), F32)


# ---------------------------------------------------------------- hints that keep a compound argument whole
# Hints wrote the call's first argument into an indexing, `.T` or a product without parentheses:
# `jnp.linalg.norm(x - p, axis=1)` was hinted `ml.sqrt(ml.sum(x - p * x - p, axis=1))` (a wrong loss, followed),
# `jnp.swapaxes(v - w, 0, 1)` as `v - w.T`, `jax.nn.one_hot(a + 1, n)` as `(a + 1[:, None] == ...)`.
@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, p, n: (a.shape[0] // 8,))
def triplet_jnp_norm(a, p, n, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  x = a.at[r, :][...]
  dp = jnp.linalg.norm(x - p.at[r, :][...], axis=1)
  dn = jnp.linalg.norm(x - n.at[r, :][...], axis=1)
  ml.atomic_add(out, ml.sum(ml.maximum(dp - dn + 1.0, 0.0)) / a.shape[0])


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, p, n: (a.shape[0] // 8,))
def triplet_followed(a, p, n, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  x = a.at[r, :][...]
  dp = ml.sqrt(ml.sum((x - p.at[r, :][...]) * (x - p.at[r, :][...]), axis=1))
  dn = ml.sqrt(ml.sum((x - n.at[r, :][...]) * (x - n.at[r, :][...]), axis=1))
  ml.atomic_add(out, ml.sum(ml.maximum(dp - dn + 1.0, 0.0)) / a.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def swapaxes_of_a_difference(x, y, out):
  out[...] = jnp.swapaxes(x[...] - y[...], 0, 1)


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def one_hot_of_a_sum(x, y, out):
  out[...] = jax.nn.one_hot(ml.argmax(x[...], axis=1) + 1, 64) * y[...]


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def outer_of_sums(x, y, out):
  out[...] = jnp.outer(x[0, :] + 1.0, y[0, :] - 1.0)


@mg.mgpu_kernel(out_shape=lambda x, y: S((64, 32), F32))
def slice_of_a_difference(x, y, out):
  out[...] = jax.lax.slice(x[...] - y[...], (0, 0), (64, 32))


def test_a_hint_keeps_a_compound_first_argument_in_parentheses():
  a, p, n = _rnd((64, 64), 0), _rnd((64, 64), 1), _rnd((64, 64), 2)
  # (jnp.linalg.norm, jax.nn.one_hot, jnp.outer and lax.slice compute as these hints' forms since probe 47b)
  want = np.mean(np.maximum(np.linalg.norm(a - p, axis=1) - np.linalg.norm(a - n, axis=1) + 1.0, 0.0))
  np.testing.assert_allclose(np.asarray(triplet_jnp_norm(a, p, n, interpret=True)), want, rtol=1e-5)
  np.testing.assert_array_equal(np.asarray(one_hot_of_a_sum(a, p, interpret=True)),
                                np.asarray(jax.nn.one_hot(jnp.argmax(a, axis=1) + 1, 64) * p))
  np.testing.assert_allclose(np.asarray(outer_of_sums(a, p, interpret=True)), np.outer(a[0] + 1, p[0] - 1), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(slice_of_a_difference(a, p, interpret=True)), (a - p)[:, :32])
  # jnp.swapaxes computes as the hinted transpose since probe 46i
  np.testing.assert_array_equal(np.asarray(swapaxes_of_a_difference(a, p, interpret=True)), np.swapaxes(a - p, 0, 1))
  want = np.mean(np.maximum(np.linalg.norm(a - p, axis=1) - np.linalg.norm(a - n, axis=1) + 1.0, 0.0))
  np.testing.assert_allclose(np.asarray(triplet_followed(a, p, n, interpret=True)), want, rtol=1e-5)


# ---------------------------------------------------------------- torch's norm and logsumexp methods
# Torch's `x.norm(dim=1)` had no hint, and `(v - m).logsumexp(dim=1)` was hinted `ml.logsumexp(v - m, dim=1)`,
# which is MG003 again (ml takes jnp's axis=, keepdims=).
@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, b: (a.shape[0] // 8,))
def cosine_torch_norm(a, b, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  x, y = a.at[r, :][...], b.at[r, :][...]
  cos = ml.sum(x * y, axis=1) / ml.maximum(x.norm(dim=1) * y.norm(p=2, dim=1), 1e-8)
  ml.atomic_add(out, ml.sum(1.0 - cos) / a.shape[0])


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda x: (x.shape[0] // 8,))
def lse_torch(x, out):
  v = x.at[ml.ds(ml.program_id(0) * 8, 8), :][...]
  m = ml.max(v, axis=1, keepdims=True)
  ml.atomic_add(out, ml.sum((v - m).logsumexp(dim=1, keepdim=True) + m))


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, b: (a.shape[0] // 8,))
def cosine_torch_followed(a, b, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  x, y = a.at[r, :][...], b.at[r, :][...]
  cos = ml.sum(x * y, axis=1) / ml.maximum(ml.sqrt(ml.sum(x * x, axis=1)) * ml.sqrt(ml.sum(y * y, axis=1)), 1e-8)
  ml.atomic_add(out, ml.sum(1.0 - cos) / a.shape[0])


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda x: (x.shape[0] // 8,))
def lse_torch_followed(x, out):
  v = x.at[ml.ds(ml.program_id(0) * 8, 8), :][...]
  m = ml.max(v, axis=1, keepdims=True)
  ml.atomic_add(out, ml.sum(ml.logsumexp(v - m, axis=1, keepdims=True) + m))


def test_torch_norm_and_logsumexp_methods_are_hinted_in_ml_keywords():
  spec = [S((32, 128), F32)]
  expect(cosine_torch_norm, spec * 2, mg.KernelTypeError, "x.norm(dim=1)", "a register tensor has no attribute 'norm'",
         hint="write ml.sqrt(ml.sum(x * x, axis=1)) (torch's 2-norm)")
  expect(lse_torch, spec, mg.KernelTypeError, "(v - m).logsumexp", "a register tensor has no attribute 'logsumexp'",
         hint="write ml.logsumexp(v - m, axis=1, keepdims=True)")
  a, b = _rnd((32, 128), 3), _rnd((32, 128), 4)
  cos = np.sum(a * b, 1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
  np.testing.assert_allclose(np.asarray(cosine_torch_followed(a, b, interpret=True)), np.mean(1 - cos), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(lse_torch_followed(a, interpret=True)),
                             np.sum(np.log(np.sum(np.exp(a.astype(np.float64)), axis=1))), rtol=1e-5)


# ---------------------------------------------------------------- jax.scipy.special's entropy terms
# xlogy, kl_div, rel_entr and entr (a KL divergence's terms) had the generic "kernels call ml.* functions" hint;
# then hints writing their formulas (probe 45e); since probe 49b they compute.
@mg.mgpu_kernel(out_shape=_scalar, grid=lambda p, q: (p.shape[0] // 8,))
def kl_scipy(p, q, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  ml.atomic_add(out, ml.sum(jax.scipy.special.kl_div(q.at[r, :][...], p.at[r, :][...])))


@mg.mgpu_kernel(out_shape=lambda p, q: p)
def xlogy_scipy(p, q, out):
  out[...] = jax.scipy.special.xlogy(q[...], p[...]) + jax.scipy.special.entr(p[...])


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda p, q: (p.shape[0] // 8,))
def kl_followed(p, q, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  qv, pv = q.at[r, :][...], p.at[r, :][...]
  ml.atomic_add(out, ml.sum(ml.where((qv > 0) & (pv > 0), qv * ml.log(qv) - qv * ml.log(pv),
                                     ml.where((qv == 0) & (pv >= 0), 0.0, float('inf'))) - qv + pv))


@mg.mgpu_kernel(out_shape=lambda p, q: p)
def xlogy_followed(p, q, out):
  out[...] = (ml.where((q[...] != 0) | (p[...] != p[...]), q[...] * ml.log(p[...]), 0.0)
              + ml.where(p[...] < 0, float('-inf'), ml.where(p[...] == 0, 0.0, -p[...] * ml.log(p[...]))))


def test_scipy_entropy_terms_compute_with_their_edge_values():
  """kl_div and xlogy were MG003 whose hints wrote these formulas; since probe 49b they compute as jax's
  (frontend/jnp_scipy.py): the kernels as written and the hints' formulas give jax's values."""
  rng = np.random.default_rng(5)
  p, q = (np.exp(v) / np.exp(v).sum(1, keepdims=True) for v in (_rnd((16, 128), 6), _rnd((16, 128), 7)))
  q[0, :7] = 0.0                                   # zero targets: their terms are p
  pe, qe = rng.standard_normal((16, 128)).astype(np.float32), rng.standard_normal((16, 128)).astype(np.float32)
  pe[0, :4], qe[0, :4] = [0.0, np.nan, 0.0, -1.0], [0.0, 0.0, 2.0, 0.0]     # 0 log 0, NaN kept, log 0, x = 0
  qe[1, :64] = 0.0
  sp = jax.scipy.special                           # (one XLA compile for both references)
  kl, want = jax.jit(lambda q, p, qe, pe: (jnp.sum(sp.kl_div(q, p)), sp.xlogy(qe, pe) + sp.entr(pe)))(q, p, qe, pe)
  np.testing.assert_allclose(np.asarray(kl_followed(p, q, interpret=True)), np.asarray(kl), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(xlogy_followed(pe, qe, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(np.asarray(kl_scipy(p, q, interpret=True)), np.asarray(kl), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(xlogy_scipy(pe, qe, interpret=True)), np.asarray(want), rtol=1e-5, atol=1e-7)


# ---------------------------------------------------------------- a scalar's s[None] and s[...]
# jnp's `jnp.sum(d * d)[None]` is a (1,) array and `s[...]` of a 0-d array is itself: both were MG001
# ("indexing a scalar is not supported ... use it as it is"), so a loss written into a (1,) output as
# Pallas code writes it, `o_ref[...] = jnp.sum(d * d)[None]`, did not compile.
@mg.mgpu_kernel(out_shape=lambda a, b: (S((1,), F32), S((), F32)), grid=lambda a, b: (a.shape[0] // 1024,))
def mse_one_element(a, b, out, out0):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  d = a.at[r][...] - b.at[r][...]
  ml.atomic_add(out, ml.sum(d * d)[None] / a.shape[0])
  ml.atomic_add(out0, ml.sum(ml.abs(d))[...])


@mg.mgpu_kernel(out_shape=lambda x: (S((1, 1), F32), S((8,), F32)))
def max_rows(x, out, dev):
  v = x[...]
  out[...] = ml.max(v)[None, None]
  dev[...] = ml.max(v)[None] - x.at[ml.ds(0, 8)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def scalar_element(x, out):
  s = ml.sum(x[...])
  out[...] = s[0]


def test_a_scalars_new_axis_and_ellipsis_index_are_jnps():
  a, b = _rnd(4096, 8), _rnd(4096, 9)
  got, got0 = mse_one_element(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(got), [np.mean((a - b) ** 2)], rtol=1e-5)
  np.testing.assert_allclose(np.asarray(got0), np.sum(np.abs(a - b)), rtol=1e-5)
  mx, dev = max_rows(a, interpret=True)
  np.testing.assert_array_equal(np.asarray(mx), [[a.max()]])
  np.testing.assert_array_equal(np.asarray(dev), a.max() - a[:8])
  mse_one_element.mlir(S((4096,), F32), S((4096,), F32))
  max_rows.mlir(S((4096,), F32))
  expect(scalar_element, [S((1024,), F32)], mg.UnsupportedSyntaxError, "s[0]",
         "indexing a scalar is not supported in a kernel",
         hint="s is a scalar (as an ml.scalar parameter is: it has no elements): use it as s, without an index")


@pytest.mark.gpu
def test_a_scalars_new_axis_on_the_gpu():
  a, b = _rnd(4096, 8), _rnd(4096, 9)
  got, got0 = mse_one_element(jnp.asarray(a), jnp.asarray(b))
  np.testing.assert_allclose(np.asarray(got), [np.mean((a - b) ** 2)], rtol=1e-5)
  np.testing.assert_allclose(np.asarray(got0), np.sum(np.abs(a - b)), rtol=1e-5)
  mx, dev = max_rows(jnp.asarray(a))
  np.testing.assert_array_equal(np.asarray(mx), [[a.max()]])
  np.testing.assert_array_equal(np.asarray(dev), a.max() - a[:8])


# ---------------------------------------------------------------- a bfloat16 sum into a float32 loss
# ml.sum of bfloat16 is bfloat16 (jnp's): stored or added into a float32 output it was hinted
# `.astype(jnp.float32)`, which keeps the bfloat16 rounding of every partial, and a loop that added them to a
# Python 0.0 carried (and rounded) bfloat16 at every trip. The hints now sum in float32.
@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, b: (a.shape[0] // 1024,))
def l1_bf16(a, b, out):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  ml.atomic_add(out, ml.sum(ml.abs(a.at[r][...] - b.at[r][...])))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 8,))
def row_sq_bf16(x, out):
  r = ml.ds(ml.program_id(0) * 8, 8)
  v = x.at[r, :][...]
  out.at[r][...] = (v * v).sum(axis=1)


@mg.mgpu_kernel(out_shape=_scalar)
def mse_loop_bf16(a, b, out):
  acc = 0.0
  for c in range(a.shape[0] // 1024):
    d = a.at[ml.ds(c * 1024, 1024)][...] - b.at[ml.ds(c * 1024, 1024)][...]
    acc += ml.sum(d * d)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((), jnp.bfloat16), grid=lambda a, b: (a.shape[0] // 1024,))
def l1_into_bf16(a, b, out):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  ml.atomic_add(out, ml.sum(ml.abs(a.at[r][...] - b.at[r][...])))


@mg.mgpu_kernel(out_shape=_scalar, grid=lambda a, b: (a.shape[0] // 1024,))
def l1_bf16_followed(a, b, out):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  ml.atomic_add(out, ml.sum(ml.abs(a.at[r][...].astype(F32) - b.at[r][...].astype(F32)), dtype=jnp.float32))


@mg.mgpu_kernel(out_shape=_scalar)
def mse_loop_followed(a, b, out):
  acc = ml.full((), 0.0, jnp.float32)
  for c in range(a.shape[0] // 1024):
    d = a.at[ml.ds(c * 1024, 1024)][...].astype(F32) - b.at[ml.ds(c * 1024, 1024)][...].astype(F32)
    acc += ml.sum(d * d, dtype=jnp.float32)
  out[...] = acc / a.shape[0]


def test_a_bfloat16_sum_into_a_float32_output_is_hinted_to_sum_in_float32():
  bf = [S((4096,), jnp.bfloat16)] * 2
  expect(l1_bf16, bf, mg.DtypeMismatchError, "ml.atomic_add",
         "ml.atomic_add of a value (bfloat16) into out (float32): dtypes differ",
         hint="sum in float32: ml.sum(ml.abs(a.at[r][...] - b.at[r][...]), dtype=jnp.float32) (a sum of bfloat16 is"
              " bfloat16, as jnp's, and .astype(jnp.float32) of it keeps its bfloat16 rounding)")
  expect(row_sq_bf16, [S((16, 128), jnp.bfloat16)], mg.StoreDtypeError, "out.at[r][...] =",
         "cannot store (v * v).sum(axis=1) (bfloat16) into out.at[r] (GMEM, float32): no implicit conversion",
         hint="sum in float32: (v * v).sum(axis=1, dtype=jnp.float32) (a sum of bfloat16 is bfloat16, as jnp's, and"
              " .astype(jnp.float32) of it keeps its bfloat16 rounding)")
  expect(mse_loop_bf16, bf, mg.StoreDtypeError, "out[...] = acc",
         "cannot store acc (bfloat16) into out (GMEM, float32): no implicit conversion",
         hint="acc is carried through the loop in bfloat16 (a Python number plus bfloat16 sums is bfloat16, as in"
              " jnp), so every trip rounds it to bfloat16: add float32 sums, ml.sum(..., dtype=jnp.float32), to a"
              " float32 start, acc = ml.full((), 0.0, jnp.float32)")
  # (into a bfloat16 scalar: MG106 until probe 50c, whose single-element `red.add.noftz.bf16` takes it, each
  # program's sum rounded into the bfloat16 element as Triton's tl.atomic_add does)
  a, b = (jnp.asarray(_rnd(4096, s), jnp.bfloat16) for s in (10, 11))
  af, bf_ = (np.asarray(v, np.float64) for v in (a, b))
  np.testing.assert_allclose(np.asarray(l1_bf16_followed(a, b, interpret=True)), np.sum(np.abs(af - bf_)), rtol=1e-6)
  np.testing.assert_allclose(np.float32(l1_into_bf16(a, b, interpret=True)), np.sum(np.abs(af - bf_)), rtol=2e-2)
  np.testing.assert_allclose(np.asarray(mse_loop_followed(a, b, interpret=True)), np.mean((af - bf_) ** 2), rtol=1e-6)


# ---------------------------------------------------------------- statistics of a (1, r, c) tile
# A Pallas kernel whose BlockSpec is (1, r, vocab) reads a (1, r, c) tile: its last-axis statistics are
# (1, r), the (r,) vector of the tile's 2-D reshape made (1, r). ml.sum of it stored alone worked, but two of
# them combined (lse - max), one meeting a (1, r) tile read from memory (ml.where(lab != -100, lse, 0.0)), and
# ml.logsumexp's own result were MG204 ("reshaped from or into a row statistic", "used as a row statistic of
# one tile and as a column vector of another", "this makes a (1, 8) row"): that reshape now goes through
# SMEM, as other reshapes of a row statistic do (so does s[None, :] of a 2-D tile's row statistic).
@mg.mgpu_kernel(out_shape=lambda x, y: (S(y.shape, F32), S(y.shape, F32)), grid=lambda x, y: (x.shape[0], x.shape[1] // 8))
def token_ce_3d(x, y, loss, spread):
  b, t = ml.program_id(0), ml.program_id(1)
  v = x.at[ml.ds(b, 1), ml.ds(t * 8, 8), :][...].astype(F32)          # (1, 8, vocab)
  lab = y.at[ml.ds(b, 1), ml.ds(t * 8, 8)][...]                      # (1, 8)
  xy = ml.sum(ml.where(ml.arange(x.shape[2])[None, None, :] == lab[..., None], v, 0.0), axis=-1)
  lse = ml.logsumexp(v, axis=-1)
  loss.at[ml.ds(b, 1), ml.ds(t * 8, 8)][...] = ml.where(lab != -100, lse - xy, 0.0)
  spread.at[ml.ds(b, 1), ml.ds(t * 8, 8)][...] = ml.max(v, axis=-1) - ml.min(v, axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: S((1, x.shape[0]), F32))
def row_sums_as_a_row(x, out):
  out[...] = ml.sum(x[...], axis=1)[None, :]


def _token_ce_inputs():
  rng = np.random.default_rng(12)
  x = rng.standard_normal((2, 16, 256)).astype(np.float32) * 2
  y = rng.integers(0, 256, (2, 16)).astype(np.int32)
  y[0, 3] = y[1, 9] = -100
  lse = np.log(np.exp(x.astype(np.float64)).sum(-1))
  xy = np.take_along_axis(x, np.maximum(y, 0)[..., None], -1)[..., 0]
  return x, y, np.where(y == -100, 0.0, lse - xy), x.max(-1) - x.min(-1)


def test_statistics_of_a_one_by_rows_by_vocab_tile_combine_and_store():
  x, y, want, spread = _token_ce_inputs()
  loss, got_spread = token_ce_3d(x, y, interpret=True)
  np.testing.assert_allclose(np.asarray(loss), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(got_spread), spread)
  token_ce_3d.mlir(S((2, 16, 256), jnp.bfloat16), S((2, 16), jnp.int32))
  r = _rnd((64, 32), 13)
  np.testing.assert_allclose(np.asarray(row_sums_as_a_row(r, interpret=True)), r.sum(1)[None, :], rtol=1e-5, atol=1e-5)
  row_sums_as_a_row.mlir(S((64, 32), F32))


@pytest.mark.gpu
def test_statistics_of_a_one_by_rows_by_vocab_tile_on_the_gpu():
  x, y, want, spread = _token_ce_inputs()
  loss, got_spread = token_ce_3d(jnp.asarray(x), jnp.asarray(y))
  np.testing.assert_allclose(np.asarray(loss), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(got_spread), spread)
  r = _rnd((64, 32), 13)
  np.testing.assert_allclose(np.asarray(row_sums_as_a_row(jnp.asarray(r))), r.sum(1)[None, :], rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- per-program partials reduced by a second kernel
# `ml.sum(partials[...])` of g partials (g the first kernel's grid, not a multiple of 8) was MG204 ("a 1-D
# register vector needs a multiple of 8 elements"), and so were a 2-D grid's (3, 5); a whole 1-D or 2-D read of
# GMEM reduced whole is now read padded under a mask, the reduction's identity in the padding.
@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0] // 1024,), F32), grid=lambda x, y: (x.shape[0] // 1024,))
def hinge_partials(x, y, out):
  i = ml.program_id(0)
  r = ml.ds(i * 1024, 1024)
  out[i] = ml.sum(ml.maximum(1.0 - y.at[r][...] * x.at[r][...], 0.0))


@mg.mgpu_kernel(out_shape=lambda p: (S((), F32), S((), F32), S((), F32)))
def finish_partials(p, total, worst, mean):
  total[...] = ml.sum(p[...])
  worst[...] = ml.max(p[...])
  mean[...] = p[...].mean()


@mg.mgpu_kernel(out_shape=lambda c: (S((), jnp.int32), S((), jnp.int32)))
def finish_counts(c, total, low):
  total[...] = ml.sum(c[...])
  low[...] = ml.min(c[...])


@mg.mgpu_kernel(out_shape=lambda p: (S((), F32), S((), F32)))
def finish_bf16_partials(p, total, total2):
  total[...] = ml.sum(p[...].astype(F32))
  total2[...] = ml.sum(p[...], dtype=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[0],), F32), grid=lambda p: (p.shape[0],))
def row_extremes(p, out):
  i = ml.program_id(0)
  out[i] = ml.max(p.at[i, :][...]) - ml.min(p[i, :])


@mg.mgpu_kernel(out_shape=lambda p: (S((), F32), S((), F32)))
def finish_2d_partials(p, total, least):     # a 2-D grid's (g0, g1) partials
  total[...] = ml.sum(p[...])
  least[...] = ml.min(p[...])


def test_partials_of_a_grid_not_a_multiple_of_8_reduce_in_a_second_kernel():
  x, y = _rnd(5 * 1024, 14), np.sign(_rnd(5 * 1024, 15))
  parts = hinge_partials(x, y, interpret=True)
  want = np.maximum(1 - y * x, 0).reshape(5, 1024).sum(1)
  total, worst, mean = finish_partials(parts, interpret=True)
  np.testing.assert_allclose(np.asarray(total), want.sum(), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(worst), want.max(), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(mean), want.mean(), rtol=1e-5)
  c = np.array([7, -3, 12], np.int32)
  assert [int(v) for v in finish_counts(c, interpret=True)] == [16, -3]
  finish_partials.mlir(S((5,), F32))
  finish_counts.mlir(S((3,), jnp.int32))
  p2 = _rnd((3, 5), 18) + 4.0                # (rows padded to 4, columns to 32)
  total2, least2 = finish_2d_partials(p2, interpret=True)
  np.testing.assert_allclose(np.asarray(total2), p2.sum(), rtol=1e-5)
  assert float(least2) == float(p2.min())
  finish_2d_partials.mlir(S((3, 5), F32))
  pb = jnp.asarray(want, jnp.bfloat16)        # (converted first: the read padded, then converted)
  for got in finish_bf16_partials(pb, interpret=True):
    np.testing.assert_allclose(np.asarray(got), np.asarray(pb, np.float64).sum(), rtol=1e-6)
  # (under jax.vmap each batch element's partials are a row of a 2-D array: read padded the same way)
  ps = np.stack([want, want[::-1] * 2])
  got = jax.vmap(lambda p: finish_partials(p, interpret=True)[0])(ps)
  np.testing.assert_allclose(np.asarray(got), ps.sum(1), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(row_extremes(ps, interpret=True)), ps.max(1) - ps.min(1), rtol=1e-6)


@pytest.mark.gpu
def test_partials_read_padded_past_the_arrays_end_on_the_gpu():
  x, y = _rnd(5 * 1024, 14), np.sign(_rnd(5 * 1024, 15))
  parts = hinge_partials(jnp.asarray(x), jnp.asarray(y))
  want = np.maximum(1 - y * x, 0).reshape(5, 1024).sum(1)
  total, worst, mean = finish_partials(parts)
  np.testing.assert_allclose(np.asarray(total), want.sum(), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(worst), want.max(), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(mean), want.mean(), rtol=1e-5)
  assert [int(v) for v in finish_counts(jnp.asarray(np.array([7, -3, 12], np.int32)))] == [16, -3]
  p2 = _rnd((3, 5), 18) + 4.0
  total2, least2 = finish_2d_partials(jnp.asarray(p2))
  np.testing.assert_allclose(np.asarray(total2), p2.sum(), rtol=1e-5)
  assert float(least2) == float(p2.min())


# ---------------------------------------------------------------- a vector of a few scalars
# A Dice loss's three sums joined, ml.concatenate([i[None], p[None], t[None]]), is 3 elements, which no register
# vector holds (MG204): the hint said "slice 8 elements from 0: v[0:8] needs v to hold 8", a register slice
# the kernel does not have. It now selects the scalars into 8 lanes by index.
@mg.mgpu_kernel(out_shape=lambda p, t: S((3,), F32), grid=lambda p, t: (p.shape[0] // 1024,))
def dice_sums_joined(p, t, out):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  pv, tv = ml.sigmoid(p.at[r][...]), t.at[r][...]
  ml.atomic_add(out, ml.concatenate([ml.sum(pv * tv)[None], ml.sum(pv)[None], ml.sum(tv)[None]]))


@mg.mgpu_kernel(out_shape=lambda p, t: S((3,), F32), grid=lambda p, t: (p.shape[0] // 1024,))
def dice_sums_selected(p, t, out):
  r = ml.ds(ml.program_id(0) * 1024, 1024)
  pv, tv = ml.sigmoid(p.at[r][...]), t.at[r][...]
  k = ml.arange(8)
  v = ml.where(k == 0, ml.sum(pv * tv), ml.where(k == 1, ml.sum(pv), ml.where(k == 2, ml.sum(tv), 0.0)))
  ml.atomic_add(out.at[k], v)


def test_a_vector_of_three_scalars_is_hinted_as_lanes_selected_by_index():
  """(The joined form was MG204 with the hint the selected form follows; since probe 61b an atomic of a padded value
  computes, so both forms compute the same.)"""
  p, t = _rnd(2048, 16), (_rnd(2048, 17) > 0).astype(np.float32)
  sp = 1 / (1 + np.exp(-p.astype(np.float64)))
  np.testing.assert_allclose(np.asarray(dice_sums_joined(p, t, interpret=True)), [np.sum(sp * t), sp.sum(), t.sum()],
                             rtol=1e-5)
  export(dice_sums_joined, p, t)
  np.testing.assert_allclose(np.asarray(dice_sums_selected(p, t, interpret=True)), [np.sum(sp * t), sp.sum(), t.sum()],
                             rtol=1e-5)
  dice_sums_selected.mlir(S((2048,), F32), S((2048,), F32))


# ---------------------------------------------------------------- a window bound to a name, in a hint
# `r = ml.ds(i * 100, 100)` then `x.at[r][...]`: the padding hint wrote x.at[ml.ds(r, 104)], an ml.ds of a window
# (MG003, followed); a window bound to a name is not its start, so the hint keeps its own placeholder. (Doubled and
# stored, such a window now computes padded: tests/test_probe45g.py; scanned from the end since probe 46h, rolled
# since probe 46j, carried through a run-time loop since probe 47a. Added atomically it computes too since probe 61b.)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 100,))
def doubled_in_named_windows(x, out):
  r = ml.ds(ml.program_id(0) * 100, 100)
  v = x.at[r][...]
  for _ in range(ml.program_id(0)):
    v = v * 2
  out.at[r][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 100,))
def added_in_named_windows(x, out):
  r = ml.ds(ml.program_id(0) * 100, 100)
  v = x.at[r][...]
  ml.atomic_add(out.at[r], v * 2)


def test_a_window_bound_to_a_name_is_not_written_as_its_start():
  x = np.random.default_rng(47).standard_normal(300).astype(np.float32)
  np.testing.assert_allclose(np.asarray(doubled_in_named_windows(x, interpret=True)), x * np.repeat([1, 2, 4], 100))
  # added atomically it was MG204 with a padding hint; since probe 61b an atomic of a padded value computes
  np.testing.assert_allclose(np.asarray(added_in_named_windows(x, interpret=True)), x * 2)
  export(added_in_named_windows, x)
