"""Probe 46j (odd shapes that still failed, MG204): odd reads computed padded (frontend/ops/padded_tiles.py) now
also take ml.roll and ml.flip (and v[::-1]) along their own length, a bool or 8-bit 1-D read beside a float one of
the same length, and ml.zeros / ml.full at a shape no register tensor holds (`z = ml.zeros((100,)); o[...] = z + 1`,
`o[...] = 0` of a (129, 3) output). Each was MG204; the roll and flip hint said to pad with other=0, which, followed,
rolled the padding into the result."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export as _export, rnd as _rnd

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _close(got, want, tol=1e-5):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- rolls and flips of odd reads
@mg.mgpu_kernel(out_shape=lambda x: x)
def rolled(x, o, *, s: ml.constexpr, a: ml.constexpr):
  o[...] = ml.roll(x[...], s, axis=a) * 2


@mg.mgpu_kernel(out_shape=lambda x: x)
def flipped(x, o, *, a: ml.constexpr):
  o[...] = ml.flip(x[...] + 1, axis=a)


@mg.mgpu_kernel(out_shape=lambda x: (x, S((), F32)))
def reversed_and_lag(x, o, dot):
  v = x[...]
  o[...] = v[::-1] - v
  dot[...] = ml.sum(ml.roll(v, 1, 0) * v)       # a lag-1 autocorrelation


@pytest.mark.parametrize("shape,dtype,axis,shift", [((17,), np.float32, 0, 1), ((100,), BF16, 0, -3),
                                                    ((9,), np.int32, 0, 11), ((3, 45), np.float32, 1, -3),
                                                    ((6, 40), BF16, 0, 1), ((5, 3, 20), np.float32, 2, 22)])
def test_an_odd_read_rolls_and_flips_along_its_own_length(shape, dtype, axis, shift):
  x = (_rnd(shape, 1) * 10).astype(dtype)
  xf = np.asarray(x, np.float32)
  _close(rolled(x, s=shift, a=axis, interpret=True), np.roll(xf, shift, axis) * 2)
  _close(flipped(x, a=axis, interpret=True), np.flip(xf + 1, axis), 1e-2)
  if len(shape) == 1 or axis == 1:
    _export(rolled, x, s=shift, a=axis)
    _export(flipped, x, a=axis)


def test_a_reversed_vector_and_a_lag_of_an_odd_read():
  x = _rnd((13,), 2)
  got = reversed_and_lag(x, interpret=True)
  _close(got[0], x[::-1] - x)
  _close(got[1], (np.roll(x, 1) * x).sum())
  _export(reversed_and_lag, x)


# ---------------------------------------------------------------- a 1-D bool or int8 read beside a float one
@mg.mgpu_kernel(out_shape=lambda l, m: (S((), F32), S(l.shape, jnp.bool_), S(l.shape, F32)))
def masked_mean_1d(l, m, loss, keep, signed):
  lv, mv = l[...].astype(F32), m[...]
  loss[...] = ml.sum(ml.where(mv, lv, 0.0)) / ml.maximum(ml.sum(mv.astype(jnp.float32)), 1.0)
  keep[...] = mv & (lv > 0)
  signed[...] = ml.where(~mv, lv, -lv)


@mg.mgpu_kernel(out_shape=lambda x, q: x)
def dequant_1d(x, q, o):
  o[...] = x[...] * q[...].astype(F32)


@pytest.mark.parametrize("n,dtype", [(17, np.float32), (33, BF16), (100, np.float32)])
def test_a_bool_vector_of_an_odd_length_beside_its_floats(n, dtype):
  l, m = _rnd((n,), n, dtype), np.random.default_rng(n).random(n) > 0.4
  lf = np.asarray(l, np.float32)
  got = masked_mean_1d(l, m, interpret=True)
  _close(got[0], (lf * m).sum() / m.sum())
  np.testing.assert_array_equal(np.asarray(got[1]), m & (lf > 0))
  _close(got[2], np.where(~m, lf, -lf))
  _export(masked_mean_1d, l, m)


def test_an_int8_vector_of_an_odd_length_beside_its_floats():
  x, q = _rnd((21,), 3), np.random.default_rng(4).integers(-100, 100, 21).astype(np.int8)
  _close(dequant_1d(x, q, interpret=True), x * q)
  _export(dequant_1d, x, q)


# ---------------------------------------------------------------- fills of odd shapes
@mg.mgpu_kernel(out_shape=lambda x: x)
def accumulated(x, o):
  acc = ml.zeros(x.shape, F32)
  acc += x[...].astype(F32)
  o[...] = (acc * 2).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x: (S((100,), F32), S((129, 3), F32), S((100,), I32), S((5, 40), F32)))
def fills(x, a, b, c, d):
  z = ml.zeros((100,), F32)
  a[...] = z + 1
  b[...] = 0
  c[...] = ml.zeros((100,), I32) + 7
  h = ml.full((5, 40), 0.5, F32)
  d[...] = h * ml.sum(h)


@mg.mgpu_kernel(out_shape=lambda x: S((101,), F32))
def fill_of_another_length(x, o):
  z = ml.zeros((100,), F32)
  o[...] = z + 1


@pytest.mark.parametrize("shape,dtype", [((3, 45), np.float32), ((17,), BF16), ((129, 3), np.float32)])
def test_an_accumulator_of_an_odd_shape_made_by_ml_zeros(shape, dtype):
  x = _rnd(shape, 5, dtype)
  _close(accumulated(x, interpret=True), np.asarray(x, np.float32) * 2)
  _export(accumulated, x)


def test_fills_of_odd_shapes_used_in_math_and_stored():
  x = _rnd((4,), 6)
  got = fills(x, interpret=True)
  for g, want in zip(got, (np.ones(100), np.zeros((129, 3)), np.full(100, 7), np.full((5, 40), 50.0))):
    _close(g, want)
  _export(fills, x)
  expect(fill_of_another_length, [S((4,), F32)], mg.ShapeMismatchError, "o[...] = z + 1",
         "cannot store a tensor of shape (100,) into o of shape (101,)")


# ---------------------------------------------------------------- parts of padded axes, and joins along them
@mg.mgpu_kernel(out_shape=lambda off: S((off.shape[0] - 1,), off.dtype))
def run_lengths(off, out):          # the lengths of CSR rows from their offsets
  o = off[...]
  out[...] = o[1:] - o[:-1]


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], x.shape[1] // 2), F32), S((x.shape[0], x.shape[1] - 2), F32)))
def halves_and_steps(x, h, g):
  v = x[...].astype(F32)
  d = x.shape[1] // 2
  h[...] = v[:, :d] * v[:, d:]
  g[...] = v[:, 2:] - v[:, :-2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] + 1,), x.dtype))
def exclusive_prefix(x, o):
  cs = ml.cumsum(x[...], axis=0)
  o[...] = ml.concatenate([ml.zeros((1,), x.dtype), cs])


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] + 2 * b.shape[0], a.shape[1]), a.dtype))
def stacked(a, b, o):
  o[...] = ml.concatenate([a[...], b[...], -b[...]], axis=0)


@pytest.mark.parametrize("n", [9, 100])
def test_lengths_from_offsets_of_an_odd_count(n):
  off = np.cumsum(np.random.default_rng(n).integers(0, 5, n)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(run_lengths(off, interpret=True)), np.diff(off))
  _export(run_lengths, off)


@pytest.mark.parametrize("shape,dtype", [((6, 80), np.float32), ((5, 40), BF16), ((3, 90), np.float32)])
def test_halves_and_shifted_parts_of_an_odd_tile(shape, dtype):
  x = _rnd(shape, 14, dtype)
  xf, d = np.asarray(x, np.float32), shape[1] // 2
  got = halves_and_steps(x, interpret=True)
  _close(got[0], xf[:, :d] * xf[:, d:], 1e-4)
  _close(got[1], xf[:, 2:] - xf[:, :-2], 1e-4)
  _export(halves_and_steps, x)


@pytest.mark.parametrize("n,dtype", [(17, np.int32), (33, np.float32)])
def test_an_exclusive_prefix_joined_from_an_inclusive_one(n, dtype):
  x = (np.random.default_rng(n).integers(0, 5, n)).astype(dtype)
  _close(exclusive_prefix(x, interpret=True), np.concatenate([[0], np.cumsum(x)]))
  _export(exclusive_prefix, x)


@pytest.mark.parametrize("m,n,cols", [(3, 5, 64), (2, 5, 40)])
def test_odd_tiles_stacked_along_their_padded_rows(m, n, cols):
  a, b = _rnd((m, cols), 15), _rnd((n, cols), 16)
  _close(stacked(a, b, interpret=True), np.concatenate([a, b, -b]))
  _export(stacked, a, b)


# ---------------------------------------------------------------- a row of a padded tile's own width beside it
@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def rope_head_dim_80(q, cos, sin, out):
  t = ml.program_id(0)
  x = q.at[t][...].astype(F32)
  c, s = cos.at[t][...][None, :], sin.at[t][...][None, :]
  x1, x2 = x[:, :40], x[:, 40:]
  out.at[t][...] = ml.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=1).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, r, w, b: (x, x))
def add_rms_norm(x, r, w, b, out, res):
  h = x[...].astype(F32) + r[...].astype(F32)
  res[...] = h.astype(res.dtype)
  ms = ml.sum(h * h, axis=1, keepdims=True) / h.shape[1]
  out[...] = (h * ml.rsqrt(ms + 1e-6) * w[...][None, :] + b[...]).astype(out.dtype)


def _rope_ref(q, cos, sin):
  q = np.asarray(q, np.float32)
  d = q.shape[-1] // 2
  c, s = cos[:, None, :], sin[:, None, :]
  return np.concatenate([q[..., :d] * c - q[..., d:] * s, q[..., d:] * c + q[..., :d] * s], -1)


@pytest.mark.parametrize("heads,dtype", [(6, BF16), (3, np.float32)])
def test_rope_of_head_dim_80_over_few_heads(heads, dtype):
  q, cos, sin = _rnd((5, heads, 80), 20, dtype), _rnd((5, 40), 21), _rnd((5, 40), 22)
  _close(rope_head_dim_80(q, cos, sin, interpret=True), _rope_ref(q, cos, sin), 2e-2)
  _export(rope_head_dim_80, q, cos, sin)


@pytest.mark.parametrize("shape,dtype", [((3, 360), np.float32), ((5, 200), BF16)])
def test_an_add_and_rms_norm_of_an_odd_tile_with_its_own_weights(shape, dtype):
  x, r, w, b = _rnd(shape, 23, dtype), _rnd(shape, 24, dtype), _rnd(shape[1:], 25), _rnd(shape[1:], 26)
  h = np.asarray(x, np.float32) + np.asarray(r, np.float32)
  got = add_rms_norm(x, r, w, b, interpret=True)
  _close(got[0], h / np.sqrt((h * h).mean(1, keepdims=True) + 1e-6) * w + b, 3e-2)
  _close(got[1], h, 2e-2)
  _export(add_rms_norm, x, r, w, b)


@pytest.mark.gpu
def test_odd_reads_rolled_flipped_masked_filled_cut_and_joined_on_the_gpu():
  for shape, dtype, axis, shift in [((17,), np.float32, 0, 1), ((100,), BF16, 0, -3), ((3, 45), np.float32, 1, -3),
                                    ((6, 40), BF16, 0, 1), ((5, 3, 20), np.float32, 2, 22)]:
    x = (_rnd(shape, 7) * 10).astype(dtype)
    _close(rolled(x, s=shift, a=axis), rolled(x, s=shift, a=axis, interpret=True))
    _close(flipped(x, a=axis), flipped(x, a=axis, interpret=True))
  x = _rnd((13,), 8)
  for g, w in zip(reversed_and_lag(x), reversed_and_lag(x, interpret=True)):
    _close(g, w, 1e-4)
  l, m = _rnd((100,), 9), np.random.default_rng(10).random(100) > 0.4
  for g, w in zip(masked_mean_1d(l, m), masked_mean_1d(l, m, interpret=True)):
    _close(g, w, 1e-5)
  x, q = _rnd((21,), 11), np.random.default_rng(12).integers(-100, 100, 21).astype(np.int8)
  _close(dequant_1d(x, q), dequant_1d(x, q, interpret=True))
  x = _rnd((129, 3), 13)
  _close(accumulated(x), accumulated(x, interpret=True))
  for g, w in zip(fills(x), fills(x, interpret=True)):
    _close(g, w)
  off = np.cumsum(np.random.default_rng(14).integers(0, 5, 100)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(run_lengths(off)), np.asarray(run_lengths(off, interpret=True)))
  x = _rnd((6, 80), 15, BF16)
  for g, w in zip(halves_and_steps(x), halves_and_steps(x, interpret=True)):
    _close(g, w, 1e-4)
  x = np.random.default_rng(16).integers(0, 5, 17).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(exclusive_prefix(x)), np.asarray(exclusive_prefix(x, interpret=True)))
  a, b = _rnd((3, 64), 17), _rnd((5, 64), 18)
  _close(stacked(a, b), stacked(a, b, interpret=True))
  q, cos, sin = _rnd((33, 6, 80), 19, BF16), _rnd((33, 40), 20), _rnd((33, 40), 21)
  _close(rope_head_dim_80(q, cos, sin), rope_head_dim_80(q, cos, sin, interpret=True), 2e-2)
  x, r, w, b = _rnd((3, 360), 22), _rnd((3, 360), 23), _rnd((360,), 24), _rnd((360,), 25)
  for g, want in zip(add_rms_norm(x, r, w, b), add_rms_norm(x, r, w, b, interpret=True)):
    _close(g, want, 1e-4)
