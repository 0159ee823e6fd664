"""Probe 50a (odd shapes still MG204; errors of a retrace reported at the wrong line). The flash-decoding combine of
split-K partials with head_dim 40, `ml.sum(w[:, :, None] * acc[...], axis=0)` of a (4, 8, 40) tile divided by
`den[:, None]`, was MG204 reported at `mv = m[...]`: the (8, 40) sum is a small statistic held as its 320 elements,
and a column broadcast meeting it was evaluated at its elements only up to 128 of them (ops/small_flat.py), so the
first trace failed at the sum; the kernel was then traced again with its small (4, 8) reads as tiles, and that
trace's error, at the read, was reported. Now such a broadcast is evaluated at up to 2048 elements, and the
retrace's error replaces the first trace's only where the first failed at a small read (or at an op that takes no
such vector), or the retrace found a mistake the later checks report. Index grids of odd rows and columns
(`ml.arange(5)[:, None] * 100 + ml.arange(100)[None, :]`, a causal mask of (6, 50)) were MG204: a padded
`ml.arange` made a grid's row is grown to whole warps (104 -> 128), as a padded tile's columns are. A (4, 40) read
times a (40, 24) SMEM B (or `wb[...]` read whole) was MG204: the padded trace read B into registers whole; an SMEM
tile no register tensor holds is now read padded, its rows copied into a padded scratch beside zeros. Frontend only:
the GPU test compares with interpret mode."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export as _export, rnd as _rnd, f32 as _f

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _close(got, want, tol=1e-4):
  np.testing.assert_allclose(_f(got), _f(want), rtol=tol, atol=tol)


# ---------------------------------------------------------------- the flash-decoding combine of odd head_dim
@mg.mgpu_kernel(out_shape=lambda m, l, acc: S((acc.shape[0],) + acc.shape[2:], F32), grid=lambda m, l, acc: (acc.shape[0],))
def combine(m, l, acc, o):         # m, l: (B, splits, heads); acc: (B, splits, heads, d) partials
  b = ml.program_id(0)
  mv = m[b]
  lv = l[b]
  mx = ml.max(mv, axis=0)
  w = ml.exp(mv - mx[None, :])
  den = ml.sum(w * lv, axis=0)
  num = ml.sum(w[:, :, None] * acc[b].astype(F32), axis=0)
  o[b] = num / den[:, None]


@mg.mgpu_kernel(out_shape=lambda m, acc: S(acc.shape[1:], F32), grid=lambda m, acc: (1,))
def combine_jnp(m, acc, o):        # the same in jnp, as a Pallas port writes it
  w = jax.nn.softmax(m[...], axis=0)
  o[...] = jnp.sum(w[..., None] * acc[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda a, s: S(a.shape[1:], F32), grid=lambda a, s: (1,))
def scaled_sum(a, s, o):           # a leading-axis sum of an odd tile, scaled and shifted per row
  t = ml.sum(a[...], axis=0)
  o[...] = t * s[...][:, None] + s[...][:, None]


def _combine_ref(m, l, acc):
  w = np.exp(m - m.max(1, keepdims=True))
  return (w[..., None] * _f(acc)).sum(1) / (w * l).sum(1)[..., None]


def test_flash_decoding_combine_of_odd_head_dims_computes():
  for (b, sp, h, d), dt, seed in (((2, 4, 8, 40), BF16, 1), ((1, 2, 8, 72), F32, 2), ((1, 4, 24, 40), F32, 3)):
    m, l, acc = _rnd((b, sp, h), seed), np.abs(_rnd((b, sp, h), seed + 10)) + 1, _rnd((b, sp, h, d), seed + 20, dt)
    _close(combine(m, l, acc, interpret=True), _combine_ref(m, l, acc), 1e-3)
    _export(combine, m, l, acc)
  m, acc = _rnd((4, 8), 4), _rnd((4, 8, 40), 5)
  w = np.exp(m - m.max(0)); w /= w.sum(0)
  _close(combine_jnp(m, acc, interpret=True), (w[..., None] * acc).sum(0))
  _export(combine_jnp, m, acc)
  a, s = _rnd((2, 8, 40), 6), _rnd((8,), 7)
  _close(scaled_sum(a, s, interpret=True), a.sum(0) * s[:, None] + s[:, None])
  _export(scaled_sum, a, s)


# ---------------------------------------------------------------- a retrace's error at the first trace's line
@mg.mgpu_kernel(out_shape=lambda m, a: S(a.shape[1:], F32), grid=lambda m, a: (1,))
def combine_scanned(m, a, o):
  mv = m[...]
  w = ml.exp(mv - ml.max(mv, axis=0)[None, :])
  t = ml.sum(w[:, :, None] * a[...], axis=0)
  o[...] = ml.cumsum(t, axis=1)


def test_an_error_the_first_trace_finds_away_from_a_small_read_stands_there():
  # it was reported at `mv = m[...]` ("mv of shape (4, 8) is reduced or broadcast along its rows"), the line of the
  # trace that reads small windows as tiles, then at the sum (MG204: "t has shape (8, 40)"); since probe 51c the
  # cumsum of the (8, 40) statistic held as a vector runs row by row through SMEM, and the kernel computes
  m, a = _rnd((4, 8), 30), _rnd((4, 8, 40), 31)
  w = np.exp(m - m.max(0, keepdims=True))
  _close(combine_scanned(m, a, interpret=True), np.cumsum((w[:, :, None] * a).sum(0), 1), 1e-3)


# ---------------------------------------------------------------- index grids of odd rows and columns
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32), grid=lambda x: (1,))
def flat_index(x, o):
  R, C = x.shape
  o[...] = ml.arange(R)[:, None] * C + ml.arange(C)[None, :]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def causal(x, o):
  R, C = x.shape
  r = ml.arange(R)[:, None]
  c = ml.arange(C)[None, :]
  o[...] = ml.where(c <= r + (C - R), x[...], 0.0) + (r * C + c).astype(F32)


def test_index_grids_of_odd_rows_and_columns_compute():
  for shape in ((5, 100), (6, 50), (3, 100)):
    x = np.zeros(shape, np.float32)
    np.testing.assert_array_equal(flat_index(x, interpret=True), np.arange(x.size).reshape(shape))
    _export(flat_index, x)
  for shape, seed in (((5, 100), 8), ((6, 50), 9), ((7, 33), 10)):
    x = _rnd(shape, seed)
    r, c = np.arange(shape[0])[:, None], np.arange(shape[1])[None, :]
    _close(causal(x, interpret=True), np.where(c <= r + shape[1] - shape[0], x, 0) + r * shape[1] + c)
    _export(causal, x)


# ---------------------------------------------------------------- a dot of an odd read with an odd SMEM tile
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=lambda x, w: (1,))
def project(x, w, o, *, WHOLE: ml.constexpr = False):
  wb = ml.smem(w.shape, w.dtype)
  ml.copy(w, wb)
  if WHOLE:
    o[...] = ml.dot(x[...], wb[...]) + 1.0           # the weight read whole into registers
  else:
    o[...] = ml.dot(x[...], wb)                       # B from SMEM


def test_a_dot_of_an_odd_read_with_an_smem_tile_no_register_tensor_holds_computes():
  # a (4, 40) read times a (40, 24) SMEM B was MG204: the padded trace loaded B, 960 elements, into registers
  for (m, k, n), dt, seed in (((4, 40, 24), BF16, 17), ((3, 72, 40), jnp.float16, 18)):
    x, w = _rnd((m, k), seed, dt), _rnd((k, n), seed + 1, dt)
    for whole in (False, True):
      _close(project(x, w, WHOLE=whole, interpret=True), _f(x) @ _f(w) + whole, 1e-3)
      _export(project, x, w, WHOLE=whole)


@pytest.mark.gpu
def test_on_gpu_combines_and_grids_agree_with_interpret_mode():
  m, l, acc = _rnd((2, 4, 8), 11), np.abs(_rnd((2, 4, 8), 12)) + 1, _rnd((2, 4, 8, 40), 13, BF16)
  _close(jax.jit(combine)(m, l, acc), combine(m, l, acc, interpret=True), 1e-3)
  a, s = _rnd((2, 8, 40), 14), _rnd((8,), 15)
  _close(jax.jit(scaled_sum)(a, s), scaled_sum(a, s, interpret=True))
  for shape in ((5, 100), (6, 50)):
    x = _rnd(shape, 16)
    np.testing.assert_array_equal(jax.jit(flat_index)(x), flat_index(x, interpret=True))
    _close(jax.jit(causal)(x), causal(x, interpret=True))
  x, w = _rnd((4, 40), 20, BF16), _rnd((40, 24), 21, BF16)
  for whole in (False, True):
    _close(jax.jit(lambda a, b: project(a, b, WHOLE=whole))(x, w), project(x, w, WHOLE=whole, interpret=True), 1e-3)
