"""Probe 47a (odd shapes the earlier probes found and left, MG204): the padded trace of odd reads
(frontend/ops/padded_tiles.py, padded_meets.py) now keeps its padding where padded values are padded to different
lengths (a (45,) bias padded to 48 beside a (3, 45) tile padded to (4, 64); a (3,) column scale padded to 8 beside
3 rows padded to 4), get size-1 axes anywhere (`w[None, :]`, RoPE's `cos[:, None, :]` over a padded tile of heads),
are statistics stretched or computed through a reshape (a 3-D softmax's keepdims max, `ml.exp(x[...].sum(axis=2))`),
are carried through a run-time loop (`for i in ml.range(n)`, `while`), are sliced with a step (`x[...][::2]` of a
(100,) read), or are joined into a shape no register tensor holds (`ml.pad(x, 1)` of a (64, 32) tile); and an odd
static part of an unpadded tensor (`o[:5] = v[:5]`, a top 5) or a strided slice to an odd length (500 of a (1000,)
vector) is made padded. All were MG204. The compiler emits only ops that already lower (concatenations with zeros,
rolls, selects), so the GPU test compares with interpret mode."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export as _export, rnd as _rnd, f32 as _f

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _close(got, want, tol=1e-5):
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=tol, atol=tol)


# ---------------------------------------------------------------- RoPE over heads: cos[:, None, :] of a padded read
@mg.mgpu_kernel(out_shape=lambda x, c, s: x)
def rope_heads(x, c, s, o):          # x: (tokens, heads, d); c, s: (tokens, d // 2)
  v = x[...].astype(F32)
  d = v.shape[2] // 2
  cs, sn = c[...][:, None, :], s[...][:, None, :]
  x1, x2 = v[:, :, :d], v[:, :, d:]
  o[...] = ml.concatenate([x1 * cs - x2 * sn, x2 * cs + x1 * sn], axis=2).astype(o.dtype)


def _rope(x, c, s):
  d = x.shape[2] // 2
  x1, x2, c, s = x[:, :, :d], x[:, :, d:], c[:, None, :], s[:, None, :]
  return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], 2)


@pytest.mark.parametrize("shape,dtype", [((7, 3, 64), np.float32), ((5, 3, 64), BF16)])
def test_rope_over_heads_broadcasts_an_odd_row_of_cos_along_the_heads(shape, dtype):
  t, _, d = shape
  x, c, s = _rnd(shape, 1, dtype), _rnd((t, d // 2), 2), _rnd((t, d // 2), 3)
  _close(rope_heads(x, c, s, interpret=True), _rope(_f(x), c, s), 2e-2 if dtype == BF16 else 1e-5)
  _export(rope_heads, x, c, s)


# ---------------------------------------------------------------- 3-D reads reduced along their last axis
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], F32))
def exp_of_sum(x, o):
  o[...] = ml.exp(x[...].sum(axis=2))


@mg.mgpu_kernel(out_shape=lambda x: x)
def softmax_3d(x, o):
  v = x[...].astype(F32)
  e = ml.exp(v - ml.max(v, axis=-1, keepdims=True))
  o[...] = (e / ml.sum(e, axis=-1, keepdims=True)).astype(o.dtype)


@pytest.mark.parametrize("shape", [(9, 9, 8), (3, 5, 7)])
def test_math_on_a_statistic_of_an_odd_3d_read(shape):
  x = _rnd(shape, 4) * 0.3
  _close(exp_of_sum(x, interpret=True), np.exp(x.sum(2)), 1e-5)
  _export(exp_of_sum, x)


@pytest.mark.parametrize("shape,dtype", [((3, 5, 7), np.float32), ((2, 7, 33), BF16)])
def test_softmax_over_the_last_axis_of_an_odd_3d_read(shape, dtype):
  x = _rnd(shape, 5, dtype)
  e = np.exp(_f(x) - _f(x).max(-1, keepdims=True))
  _close(softmax_3d(x, interpret=True), e / e.sum(-1, keepdims=True), 1e-2 if dtype == BF16 else 1e-6)
  _export(softmax_3d, x)


# ---------------------------------------------------------------- operands padded to different lengths
@mg.mgpu_kernel(out_shape=lambda x, b: x)
def bias_add(x, b, o):
  o[...] = x[...] + b[...]


@mg.mgpu_kernel(out_shape=lambda x, w, b: x)
def layer_norm(x, w, b, o):
  v = x[...].astype(F32)
  d = v - ml.mean(v, axis=1, keepdims=True)
  r = ml.rsqrt(ml.mean(d * d, axis=1, keepdims=True) + 1e-5)
  o[...] = (d * r * w[...].astype(F32)[None, :] + b[...].astype(F32)).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, c: x)
def row_scale(x, c, o):
  o[...] = x[...] * c[...][:, None]


def test_a_bias_padded_shorter_than_its_tile_meets_it():
  x, b = _rnd((3, 45), 6), _rnd((45,), 7)
  _close(bias_add(x, b, interpret=True), x + b)
  _export(bias_add, x, b)
  x = _rnd((2, 3, 45), 8)
  _close(bias_add(x, b, interpret=True), x + b)


@pytest.mark.parametrize("shape,dtype", [((2, 250), np.float32), ((7, 33), BF16)])
def test_layer_norm_of_odd_rows_with_odd_weights(shape, dtype):
  x, w, b = _rnd(shape, 9, dtype), _rnd(shape[1:], 10, dtype), _rnd(shape[1:], 11, dtype)
  xf = _f(x)
  d = xf - xf.mean(1, keepdims=True)
  want = d / np.sqrt((d * d).mean(1, keepdims=True) + 1e-5) * _f(w) + _f(b)
  _close(layer_norm(x, w, b, interpret=True), want, 5e-2 if dtype == BF16 else 1e-4)
  _export(layer_norm, x, w, b)


def test_a_column_scale_padded_longer_than_the_rows_it_scales():
  for shape in [(3, 45), (2, 250)]:
    x, c = _rnd(shape, 12), _rnd(shape[:1], 13)
    _close(row_scale(x, c, interpret=True), x * c[:, None])
  _export(row_scale, x, c)


# ---------------------------------------------------------------- strided slices of odd reads, and to odd lengths
@mg.mgpu_kernel(out_shape=lambda x: S(((x.shape[0] + 1) // 2,), x.dtype))
def evens(x, o):
  o[...] = x[...][::2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def odds(x, o):
  v = x[...]
  o[...] = v[1::2] * 2


@pytest.mark.parametrize("n", [100, 33, 1000])
def test_a_strided_slice_of_an_odd_read_or_to_an_odd_length(n):
  x = _rnd((n,), 14)
  _close(evens(x, interpret=True), x[::2])
  _close(odds(x, interpret=True), x[1::2][:n // 2] * 2)
  if n == 100:
    _export(evens, x)
    _export(odds, x)


# ---------------------------------------------------------------- odd reads carried through run-time loops
@mg.mgpu_kernel(out_shape=lambda x, n: S(x.shape[1:], F32))
def column_sums(x, n, o):
  acc = ml.zeros(x.shape[1:], F32)
  for i in ml.range(n[()]):
    acc += x.at[i][...].astype(F32)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], F32))
def running_max_and_ema(x, o):
  m = ml.full(x.shape[1:], float("-inf"), F32)
  e = x.at[0][...].astype(F32)
  for i in ml.range(x.shape[0]):
    v = x.at[i][...].astype(F32)
    m = ml.maximum(m, v)
    e = 0.5 * e + 0.5 * v
  o[...] = m + e


@mg.mgpu_kernel(out_shape=lambda x, n: S(x.shape[1:], F32))
def while_sums(x, n, o):
  acc = ml.zeros(x.shape[1:], F32)
  i = 0
  while i < n[()]:
    acc = acc + x.at[i][...].astype(F32)
    i += 1
  o[...] = acc


def _max_and_ema(x):
  e = x[0]
  for v in x:
    e = 0.5 * e + 0.5 * v
  return x.max(0) + e


@pytest.mark.parametrize("shape,dtype", [((5, 45), np.float32), ((4, 3, 33), BF16)])
def test_an_odd_read_carried_through_a_run_time_loop(shape, dtype):
  x, n = _rnd(shape, 15, dtype), np.array(shape[0], np.int32)
  tol = 2e-2 if dtype == BF16 else 1e-5
  _close(column_sums(x, n, interpret=True), _f(x).sum(0), tol)
  _close(running_max_and_ema(x, interpret=True), _max_and_ema(_f(x)), tol)
  _close(while_sums(x, n, interpret=True), _f(x).sum(0), tol)
  if dtype == np.float32:
    _export(column_sums, x, n)
    _export(running_max_and_ema, x)


# ---------------------------------------------------------------- ml.pad and joins no register tensor holds
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] + 2, x.shape[1] + 2), x.dtype))
def padded_by_one(x, o):
  o[...] = ml.pad(x[...], 1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] + 3), x.dtype))
def padded_columns(x, o):
  o[...] = ml.pad(x[...] * 2, ((0, 0), (1, 2)), constant_values=-1.0)


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def padded_sum(x, o):
  o[...] = ml.sum(ml.pad(x[...].astype(F32), 1, constant_values=0.5))


@mg.mgpu_kernel(out_shape=lambda x: x)
def three_tap(x, o):
  p = ml.pad(x[...], ((1, 1), (0, 0)))
  o[...] = p[:-2] + p[1:-1] + p[2:]


@pytest.mark.parametrize("shape", [(64, 32), (7, 33)])
def test_ml_pad_of_a_tile_whose_rows_no_register_tensor_holds(shape):
  x = _rnd(shape, 16)
  _close(padded_by_one(x, interpret=True), np.pad(x, 1))
  _close(padded_columns(x, interpret=True), np.pad(x * 2, ((0, 0), (1, 2)), constant_values=-1))
  p = np.pad(x, ((1, 1), (0, 0)))
  _close(three_tap(x, interpret=True), p[:-2] + p[1:-1] + p[2:])
  if shape == (64, 32):
    _export(padded_by_one, x)
  x = _rnd((8, 64), 17)
  _close(padded_sum(x, interpret=True), np.pad(x, 1, constant_values=0.5).sum(), 1e-4)


# ---------------------------------------------------------------- odd static parts of unpadded tensors
@mg.mgpu_kernel(out_shape=lambda x: S((5,), x.dtype))
def top5(x, o):
  v = ml.sort(x[...], descending=True)
  o[:5] = v[:5]


@mg.mgpu_kernel(out_shape=lambda x: (S((3, x.shape[1]), x.dtype), S((x.shape[0] - 3, x.shape[1]), x.dtype)))
def first_rows_and_lags(x, a, b):
  v = x[...]
  a[...] = v[:3] * 2
  b[...] = v[3:] - v[:-3]


def test_an_odd_part_of_a_register_tensor_is_stored():
  x = _rnd((64,), 18)
  _close(top5(x, interpret=True), -np.sort(-x)[:5])
  _export(top5, x)
  x = _rnd((64, 32), 19)
  got = first_rows_and_lags(x, interpret=True)
  _close(got[0], x[:3] * 2)
  _close(got[1], x[3:] - x[:-3])


# ---------------------------------------------------------------- an odd 2-D read flattened
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] * x.shape[1],), x.dtype), S((), I32)))
def flat_and_argmax(x, o, at):
  v = x[...].reshape(-1)
  o[...] = v * 2
  at[...] = ml.argmax(v)


@pytest.mark.parametrize("shape,dtype", [((7, 33), np.float32), ((7, 64), BF16), ((2, 250), np.float32)])
def test_an_odd_2d_read_flattened(shape, dtype):
  x = _rnd(shape, 43, dtype)
  got = flat_and_argmax(x, interpret=True)
  _close(got[0], _f(x).reshape(-1) * 2)
  assert int(got[1]) == int(np.argmax(_f(x).reshape(-1)))
  if shape == (7, 33):
    _export(flat_and_argmax, x)


# ---------------------------------------------------------------- mistakes at odd shapes still fail
@mg.mgpu_kernel(out_shape=lambda x: S((6,), x.dtype))
def top6_of_five(x, o):
  v = ml.sort(x[...], descending=True)
  o[...] = v[:5]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], F32))
def sums_one_too_long(x, o):
  acc = ml.zeros((x.shape[1] + 1,), F32)
  for i in ml.range(x.shape[0]):
    acc = acc + x.at[i][...].astype(F32)
  o[...] = acc


def test_mistakes_at_odd_shapes_still_fail_where_their_right_forms_compute():
  x, b = _rnd((3, 45), 38), _rnd((45,), 39)
  _close(bias_add(x, b, interpret=True), x + b)
  x = _rnd((64,), 40)
  _close(top5(x, interpret=True), -np.sort(-x)[:5])
  x, n = _rnd((5, 45), 41), np.array(5, np.int32)
  _close(column_sums(x, n, interpret=True), x.sum(0), 1e-5)
  expect(bias_add, [S((3, 45), F32), S((44,), F32)], mg.ShapeMismatchError, "x[...] + b[...]",
         "+ on x[...] of shape (3, 45) and b[...] of shape (44,): the shapes do not broadcast (axis 1 of the result"
         " would be both 45 and 44)")
  expect(top6_of_five, [S((64,), F32)], mg.ShapeMismatchError, "o[...]",
         "cannot store a tensor of shape (5,) into o of shape (6,)")
  expect(sums_one_too_long, [S((5, 45), F32)], mg.ShapeMismatchError, "acc + x.at[i][...]",
         "+ on acc of shape (46,) and x.at[i][...].astype(F32) of shape (45,): the shapes do not broadcast (axis 0"
         " of the result would be both 46 and 45)")


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def evens_into_too_few(x, o):
  o[...] = x[...][::2]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] - 1), x.dtype))
def odd_rows_into_narrower(x, o):
  o[...] = x[...] * 2


def test_a_store_of_an_odd_value_into_a_window_of_another_shape_says_so_in_its_own_shapes():
  """Both were MG204 at the read or the slice ("registers cannot hold", with a hint to read a longer tile); the
  mistake is the output's shape, now MG202 in the shapes the user wrote."""
  _close(evens(_rnd((7,), 42), interpret=True), _rnd((7,), 42)[::2])
  expect(evens_into_too_few, [S((7,), F32)], mg.ShapeMismatchError, "o[...]",
         "cannot store a tensor of shape (4,) into o of shape (3,)",
         hint="store a value of the window's shape (slice the ref with .at[...] to match), or broadcast it explicitly"
              " with ml.broadcast_to")
  expect(odd_rows_into_narrower, [S((3, 45), BF16)], mg.ShapeMismatchError, "o[...]",
         "cannot store a tensor of shape (3, 45) into o of shape (3, 44)")


@pytest.mark.gpu
def test_odd_shapes_padded_on_the_gpu():
  x, c, s = _rnd((7, 3, 64), 20), _rnd((7, 32), 21), _rnd((7, 32), 22)
  _close(rope_heads(x, c, s), rope_heads(x, c, s, interpret=True), 1e-5)
  x = _rnd((9, 9, 8), 23) * 0.3
  _close(exp_of_sum(x), exp_of_sum(x, interpret=True), 1e-5)
  x = _rnd((2, 7, 33), 24, BF16)
  _close(softmax_3d(x), softmax_3d(x, interpret=True), 1e-2)
  x, b = _rnd((3, 45), 25), _rnd((45,), 26)
  _close(bias_add(x, b), bias_add(x, b, interpret=True))
  x, w, b = _rnd((2, 250), 27), _rnd((250,), 28), _rnd((250,), 29)
  _close(layer_norm(x, w, b), layer_norm(x, w, b, interpret=True), 1e-4)
  x, c = _rnd((3, 45), 30), _rnd((3,), 31)
  _close(row_scale(x, c), row_scale(x, c, interpret=True))
  for n in (100, 1000):
    x = _rnd((n,), 32)
    _close(evens(x), evens(x, interpret=True))
    _close(odds(x), odds(x, interpret=True))
  x, n = _rnd((5, 45), 33), np.array(5, np.int32)
  _close(column_sums(x, n), column_sums(x, n, interpret=True), 1e-5)
  _close(running_max_and_ema(x), running_max_and_ema(x, interpret=True), 1e-5)
  _close(while_sums(x, n), while_sums(x, n, interpret=True), 1e-5)
  x = _rnd((64, 32), 34)
  _close(padded_by_one(x), padded_by_one(x, interpret=True))
  _close(three_tap(x), three_tap(x, interpret=True))
  x = _rnd((7, 33), 35)
  _close(padded_columns(x), padded_columns(x, interpret=True))
  x = _rnd((64,), 36)
  _close(top5(x), top5(x, interpret=True))
  x = _rnd((64, 32), 37)
  for g, w in zip(first_rows_and_lags(x), first_rows_and_lags(x, interpret=True)):
    _close(g, w)
  for shape in [(7, 33), (7, 64)]:
    x = _rnd(shape, 44)
    for g, w in zip(flat_and_argmax(x), flat_and_argmax(x, interpret=True)):
      _close(g, w)
