"""Probe 51c (layout limits, MG204, and errors reported in mgpu_dsl's own files). `jnp.dot` of float32 (2, 48) and (48,
16) register tiles was MG204 reported at `frontend/form_helpers.py:77`: ml.dot's form for float32 took tiles of 64
rows only, so the product was traced as broadcast chunks (form_helpers.chunked_dot), a 3-D broadcast no layout held,
and the error stood at the helper's own line. Every op and mistake of mgpu_dsl's own @ml.inline helpers is now
located at the user's call, its values named by it; a float product whose chunks no layout holds is traced again
as ml.dot of register tiles (TF32 on the tensor cores, as float32 tiles of 64 rows are). `ml.cumsum`, `ml.cummax`,
`jnp.cumsum` and the transpose of a small 2-D statistic held as a vector (the (8, 40) sum over the leading axis of a
(4, 8, 40) tile), its `jnp.sort` and `top_k`, were MG204 at the statistic: they now go through SMEM row by row (or
a gather, for `.T`). A
one-element slice of a padded trace's tile, `vals[:, k - 1:k]` of top_k of a (5, 96) read (MoE routing), `st[1:2, :]`
of a stack of column statistics, was MG204: it is taken as the column `vals[:, k - 1][:, None]` (or row) it is.
Frontend only: the GPU test compares with NumPy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe_util import export as _export, rnd as _rnd, f32 as _f

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _close(got, want, tol=1e-4):
  np.testing.assert_allclose(_f(got), _f(want), rtol=tol, atol=tol)


# ---------------------------------------------------------------- float32 products of few rows
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (1,))
def jnp_dot(a, b, o):
  o[...] = jnp.dot(a[...], b[...], preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (1,))
def matmul_bias(x, w, o):          # a Pallas port's projection of a few tokens
  h = x[...] @ w[...]
  o[...] = h + 1.0


_TF32 = 3e-2     # (the tensor cores read float32 as TF32, as jnp.dot's default precision on the GPU does)


def test_float32_products_of_few_rows_compute():
  for (m, k, n), seed in (((2, 48, 16), 1), ((4, 48, 16), 2), ((6, 24, 40), 3)):
    a, b = _rnd((m, k), seed), _rnd((k, n), seed + 10)
    _close(jnp_dot(a, b, interpret=True), a @ b, _TF32)
    _export(jnp_dot, a, b)
  x, w = _rnd((3, 48), 4), _rnd((48, 16), 5)
  _close(matmul_bias(x, w, interpret=True), x @ w + 1, _TF32)
  _export(matmul_bias, x, w)
  # k (20) not a multiple of 8 and n (12, 100) not one of 64: zero-padded for the tensor cores, n cut back
  for (m, k, n), seed in (((5, 20, 12), 6), ((3, 96, 100), 7)):
    a, b = _rnd((m, k), seed), _rnd((k, n), seed + 10)
    _close(jnp_dot(a, b, interpret=True), a @ b, _TF32)
  _export(jnp_dot, _rnd((3, 96), 8), _rnd((96, 100), 9))


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32), grid=lambda q, k: (1,))
def scores(q, k, o):               # a Pallas port's scores, k contracted along its last axis
  s = jnp.einsum("qd,kd->qk", q[...], k[...], preferred_element_type=jnp.float32)
  o[...] = s - jnp.max(s, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32), grid=lambda a, b: (1,))
def nt_dot(a, b, o):
  o[...] = jax.lax.dot_general(a[...], b[...], (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)


def test_products_of_a_b_held_transposed_compute():
  for (m, n, d), dt, seed in (((4, 40, 64), np.float32, 1), ((2, 100, 64), BF16, 2)):
    q, k = _rnd((m, d), seed, dt), _rnd((n, d), seed + 10, dt)
    s = _f(q) @ _f(k).T
    _close(scores(q, k, interpret=True), s - s.max(1, keepdims=True), _TF32)
  _export(scores, _rnd((4, 64), 3), _rnd((40, 64), 4))
  for (m, n, k), dt, seed in (((2, 72, 40), np.float32, 5), ((4, 100, 192), BF16, 6)):
    a, b = _rnd((m, k), seed, dt), _rnd((n, k), seed + 10, dt)
    _close(nt_dot(a, b, interpret=True), _f(a) @ _f(b).T, _TF32)
  _export(nt_dot, _rnd((4, 192), 7, BF16), _rnd((100, 192), 8, BF16))


# ---------------------------------------------------------------- mistakes inside mgpu_dsl's own helpers
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32), grid=lambda a, b: (1,))
def int_dot(a, b, o):
  o[...] = jnp.dot(a[...], b[...])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (1,))
def log_add(x, o):
  v = x[...]
  o[...] = jnp.logaddexp(v, v[:, :8])


@mg.mgpu_kernel(out_shape=lambda a, b: jax.eval_shape(jnp.kron, a, b), grid=lambda a, b: (1,))
def kron(a, b, o):
  o[...] = jnp.kron(a[...], b[...])


def test_a_layout_error_inside_a_helper_of_mgpu_dsl_stands_at_the_users_call():
  # (the int32 products of this test's history all compute since probe 56a: int_dot's (9, 20) by (20, 16) among
  # them; jnp.kron's form (jnp_compose.py) of a (100,) and a (7,) vector builds a (100, 7) tile no layout holds)
  int_dot.check(S((9, 20), jnp.int32), S((20, 16), jnp.int32))
  with pytest.raises(mg.LayoutError) as info:
    kron.check(S((100,), jnp.float32), S((7,), jnp.float32))
  e = info.value
  assert (e.filename, e.lineno, e.col_offset) == (kron.fn.__code__.co_filename, *where(kron, "jnp.kron("))
  assert "jnp_compose" not in e.render() and "in this call of" not in e.render()


def test_a_helpers_values_are_named_by_the_users_call():
  # (jnp.median of a (4, 48) read, the example here before, computes since probe 53a: its columns of 4 rows are taken
  # padded; int_dot's (12, 20) by (20, 16) since probe 56a; jnp.kron of a (12, 20) read fails at that read)
  expect(kron, [S((12, 20), jnp.int32), S((20, 16), jnp.int32)], mg.LayoutError, "a[...]",
         "a[...] has shape (12, 20): register tensors need a multiple of 128 elements (one per thread of a warpgroup)")


def test_an_operator_of_a_jnp_form_is_named_as_the_call():
  expect(log_add, [S((8, 64), F32)], mg.ShapeMismatchError, "jnp.logaddexp(",
         "jnp.logaddexp on v of shape (8, 64) and v[:, :8] of shape (8, 8): the shapes do not broadcast (axis 1 of the"
         " result would be both 64 and 8)")


# ---------------------------------------------------------------- scans and transposes of small statistics
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], F32), grid=lambda x: (1,))
def stat_cumsum(x, o, axis: ml.constexpr):
  t = ml.sum(x[...], axis=0)
  o[...] = ml.cumsum(t, axis=axis)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], x.dtype), grid=lambda x: (1,))
def stat_jnp(x, o):                # jnp's spelling, a bfloat16 input, the running sum reversed beside the statistic
  t = jnp.sum(x[...].astype(jnp.float32), axis=0)
  o[...] = (jnp.flip(jnp.cumsum(jnp.flip(t, 1), axis=1), 1) * 2.0 + t).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:2], F32), grid=lambda x: (1,))
def stat_cummax_rows(x, o):
  t = ml.max(x[...], axis=0)
  o[...] = ml.max(ml.cummax(t, axis=0) - t, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:][::-1], F32), grid=lambda x: (1,))
def stat_transpose(x, o):
  t = ml.sum(x[...], axis=0)
  o[...] = t.T + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], jnp.int32), grid=lambda x: (1,))
def stat_counts(x, o):
  o[...] = jnp.cumsum(jnp.sum(x[...] > 0, axis=0), axis=0)


def test_scans_of_a_small_statistic_compute():
  for sh, seed in (((4, 8, 40), 1), ((3, 5, 24), 2)):
    x = _rnd(sh, seed)
    for axis in (0, 1):
      _close(stat_cumsum(x, axis=axis, interpret=True), np.cumsum(x.sum(0), axis))
    _export(stat_cumsum, x, axis=1)
    _close(stat_cummax_rows(x, interpret=True), (np.maximum.accumulate(x.max(0), 0) - x.max(0)).max(1))
    np.testing.assert_array_equal(np.asarray(stat_counts(x, interpret=True)), np.cumsum((x > 0).sum(0), 0))
  x = _rnd((2, 6, 40), 3, BF16)
  t = _f(x).sum(0)
  _close(stat_jnp(x, interpret=True), np.cumsum(t[:, ::-1], 1)[:, ::-1] * 2 + t, 3e-2)
  _export(stat_jnp, x)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape[1:], F32), S(x.shape[1:2] + (2,), F32)), grid=lambda x: (1,))
def stat_sorted(x, o, top):
  t = jnp.sum(x[...], axis=0)
  o[...] = jnp.sort(t, axis=1)
  top[...], _ = jax.lax.top_k(t, 2)


def test_sorts_of_a_small_statistic_compute():
  x = _rnd((4, 8, 40), 6)
  t = x.sum(0)
  got, top = stat_sorted(x, interpret=True)
  _close(got, np.sort(t, 1))
  _close(top, -np.sort(-t, 1)[:, :2])
  _export(stat_sorted, x)


def test_the_transpose_of_a_small_statistic_computes():
  for sh, seed in (((4, 8, 40), 4), ((2, 3, 64), 5)):
    x = _rnd(sh, seed)
    _close(stat_transpose(x, interpret=True), x.sum(0).T + 1)
    _export(stat_transpose, x)


# ---------------------------------------------------------------- one column or row of a padded tile's statistics
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (1,))
def moe_route(x, o, k: ml.constexpr):      # MoE routing: the top-k logits of each token kept, softmaxed
  logits = x[...].astype(jnp.float32)
  vals, _ = jax.lax.top_k(logits, k)
  p = jnp.where(logits >= vals[:, k - 1:k], jnp.exp(logits - vals[:, 0:1]), 0.0)
  o[...] = p / jnp.sum(p, axis=-1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (1,))
def last_of_top3(x, o):
  v = x[...]
  vals, _ = jax.lax.top_k(v, 3)
  o[...] = v - vals[:, -1:]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=lambda x: (1,))
def min_max_columns(x, o):
  v = x[...]
  st = jnp.stack([jnp.max(v, axis=0), jnp.min(v, axis=0)], axis=0)
  o[...] = (v - st[1:2, :]) / (st[0:1, :] - st[1:2, :])


def _route(x, k):
  s = -np.sort(-x, 1)
  p = np.where(x >= s[:, k - 1:k], np.exp(x - s[:, :1]), 0)
  return p / p.sum(1, keepdims=True)


def test_one_column_or_row_slices_of_a_padded_tiles_statistics_compute():
  x = _rnd((5, 96), 11, BF16)
  _close(moe_route(x, k=2, interpret=True), _route(_f(x), 2), 1e-2)
  _export(moe_route, x, k=2)
  for sh, seed in (((5, 96), 12), ((2, 40), 13)):
    y = _rnd(sh, seed)
    _close(last_of_top3(y, interpret=True), y - (-np.sort(-y, 1))[:, 2:3])
  for sh, seed in (((5, 64), 14), ((3, 40), 15)):
    y = _rnd(sh, seed)
    lo, hi = y.min(0, keepdims=True), y.max(0, keepdims=True)
    _close(min_max_columns(y, interpret=True), (y - lo) / (hi - lo), 1e-3)
  _export(min_max_columns, _rnd((3, 40), 16))


@pytest.mark.gpu
def test_gpu_matches_numpy():
  a, b = _rnd((2, 48), 6), _rnd((48, 16), 7)
  _close(jnp_dot(a, b), a @ b, _TF32)
  x = _rnd((4, 8, 40), 8)
  for axis in (0, 1):
    _close(stat_cumsum(x, axis=axis), np.cumsum(x.sum(0), axis))
  _close(stat_transpose(x), x.sum(0).T + 1)
  np.testing.assert_array_equal(np.asarray(stat_counts(x)), np.cumsum((x > 0).sum(0), 0))
  y = _rnd((2, 6, 40), 9, BF16)
  t = _f(y).sum(0)
  _close(stat_jnp(y), np.cumsum(t[:, ::-1], 1)[:, ::-1] * 2 + t, 3e-2)
  z = _rnd((5, 96), 10, BF16)
  _close(moe_route(z, k=2), _route(_f(z), 2), 1e-2)
  w = _rnd((3, 40), 11)
  _close(min_max_columns(w), (w - w.min(0, keepdims=True)) / (w.max(0, keepdims=True) - w.min(0, keepdims=True)), 1e-3)
