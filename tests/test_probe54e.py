"""Probe 54e (nothing silently wrong, round 4). Interpret mode's MaskedReductionError (MG953) followed a masked
load's padding only as its `other=` filled it: a select that put a constant of its own in the padded lanes,
`v = ml.where(c < n, v, 0.0)` after `other=-inf` (or `ml.where(c >= n, 0.0, v)` after the default fill), made them
constants (NEUTRAL), so `ml.max(v)` of a row of negatives was 0 with no error, where `other=0.0` in the load
itself was MG953. Such lanes now stay padding (lowering/interpret_padding.py `_where`), and the error names the
select and the identity to put there; a select of the reduction's identity, of a sum's 0, or one that puts its
constant on lanes of data too, stays fine. Sorts did not follow the padding at all: `jax.lax.top_k` of an MoE
router's 60 logits read as 64 lanes with `other=0.0` gave padding as the top experts when every logit was below 0,
and `jnp.sort(v)` stored back under the load's mask lost elements to it; a sort that puts a lane of padding before
a lane of data is now MG953 at the sort (lowering/interpret_pad_sorts.py), with the fill that sorts last."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _raises(kernel, args, at, message, hint):
  """`kernel(*args)` in interpret mode fails with MG953 at `at`, with exactly `message` and `hint`."""
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(*args, interpret=True)
  e = info.value
  assert e.code == "MG953" and isinstance(e, mg.InterpretError)
  assert (e.lineno, e.col_offset) == where(kernel, at), e.render()
  assert e.message == message
  assert e.hint == hint
  assert "Traceback" not in str(e)


def _rows(seed, shape, sign=0):
  x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
  return x if not sign else (sign * (np.abs(x) + 0.5)).astype(np.float32)


# ---------------------------------------------------------------- a select's constant in the padded lanes
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def max_of_select_zero(x, o):
  i = ml.program_id(0)
  c = ml.arange(128)
  m = c < x.shape[1]
  v = x.at[i, c].load(mask=m, other=-float("inf"))
  v = ml.where(m, v, 0.0)
  o[i] = ml.max(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0] // 4,))
def rows_jnp_max_of_select(x, o):
  i = ml.program_id(0)
  r = i * 4 + ml.arange(4)
  c = ml.arange(128)
  m = c[None, :] < x.shape[1]
  v = x.at[r[:, None], c[None, :]].load(mask=m, other=-float("inf"))
  v = jnp.where(m, v, 0.0)
  o.at[ml.ds(i * 4, 4)][...] = jnp.max(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def min_of_swapped_select(x, o):
  i = ml.program_id(0)
  c = ml.arange(128)
  v = x.at[i, c].load(mask=c < x.shape[1])
  o[i] = ml.min(ml.where(c >= x.shape[1], 0.0, v))


def test_a_select_of_a_constant_in_the_padded_lanes_is_padding_again():
  _raises(max_of_select_zero, [_rows(0, (4, 100), -1)], "ml.max(v)",
          "ml.max reduces lanes the masked load at line 47 kept off past the end of x, filled with other=-float('inf')"
          " (-inf), then set to 0 by the select at line 48: they change its result in program (0, 0, 0), 0 where the"
          " elements inside give -0.504454",
          "select the identity of a max there: float('-inf') in place of 0 in the select at line 48 (where a sum"
          " reduces the same tile, keep 0 there and take the max of a select of float('-inf'))")
  _raises(rows_jnp_max_of_select, [_rows(1, (8, 100), -1)], "jnp.max(v, axis=1)",
          "jnp.max reduces lanes the masked load at line 58 kept off past the end of x, filled with other=-float('inf')"
          " (-inf), then set to 0 by the select at line 59: they change its result in program (0, 0, 0) (result 0), 0"
          " where the elements inside give -0.501049",
          "select the identity of a max there: float('-inf') in place of 0 in the select at line 59 (where a sum"
          " reduces the same tile, keep 0 there and take the max of a select of float('-inf'))")
  _raises(min_of_swapped_select, [_rows(1, (2, 100), 1)], "ml.min(ml.where(c >= x.shape[1], 0.0, v))",
          "ml.min reduces lanes the masked load at line 67 kept off past the end of x, filled with other=0, then set"
          " to 0 by the select at line 68: they change its result in program (0, 0, 0), 0 where the elements inside"
          " give 0.501049",
          "select the identity of a min there: float('inf') in place of 0 in the select at line 68 (where a sum"
          " reduces the same tile, keep 0 there and take the min of a select of float('inf'))")


# ---------------------------------------------------------------- selects that stay fine
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def softmax_of_selects(x, o):
  i = ml.program_id(0)
  c = ml.arange(128)
  m = c < x.shape[1]
  v = ml.where(m, x.at[i, c].load(mask=m, other=0.0), -float("inf"))
  e = ml.where(m, jnp.exp(v - ml.max(v)), 0.0)
  o.at[i, c].store(e / ml.sum(e), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 4), x.dtype), grid=lambda x: (x.shape[0],))
def stats_of_selects(x, o):
  i = ml.program_id(0)
  n = x.shape[1]
  c = ml.arange(128)
  v = x.at[i, c].load(mask=c < n, other=0.0)
  d = ml.where(c < n, v - ml.sum(v) / n, 0.0)
  o[i, 0] = ml.sum(d * d) / n                          # a variance: 0 is a sum's identity
  o[i, 1] = ml.max(ml.where(c < n, jnp.abs(v), 0.0))   # an absolute max: 0 is below every lane of data
  o[i, 2] = ml.max(ml.where(v > 0, v, 0.0))            # a relu's max: data lanes take the 0 too
  o[i, 3] = ml.max(ml.where(c < 50, v, 0.0))           # a constant on lanes of data too


def test_a_select_of_the_padding_is_followed_and_selects_of_the_identity_or_of_data_lanes_stay_fine():
  """The padding a select keeps or puts a constant in reaches the reduction: the max of a select of 0 at padded
  lanes is MG953 (as above); the reduction's identity there, or a constant on lanes of data too, gives jnp's numbers."""
  with pytest.raises(mg.MaskedReductionError):
    max_of_select_zero(_rows(4, (2, 100), -1), interpret=True)
  x = _rows(2, (4, 100))
  e = np.exp(x - x.max(1, keepdims=True))
  np.testing.assert_allclose(softmax_of_selects(x, interpret=True), e / e.sum(1, keepdims=True), rtol=1e-5)
  want = np.stack([x.var(1), np.abs(x).max(1), np.maximum(x, 0).max(1),
                   np.where(np.arange(100) < 50, x, 0).max(1)], 1)
  np.testing.assert_allclose(stats_of_selects(x, interpret=True), want, rtol=1e-4, atol=1e-6)
  neg = _rows(3, (4, 100), -1)
  np.testing.assert_allclose(stats_of_selects(neg, interpret=True)[:, 3], np.zeros(4))


# ---------------------------------------------------------------- padding sorted among the data
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 2), x.dtype), S((x.shape[0], 2), jnp.int32)),
                grid=lambda x: (x.shape[0] // 8,))
def router(x, w, ids, *, fill: ml.constexpr = 0.0):
  i = ml.program_id(0)
  r = i * 8 + ml.arange(8)
  e = ml.arange(64)
  v = x.at[r[:, None], e[None, :]].load(mask=e[None, :] < x.shape[1], other=fill)
  top, idx = jax.lax.top_k(v, 2)
  w.at[ml.ds(i * 8, 8), :][...] = top
  ids.at[ml.ds(i * 8, 8), :][...] = idx


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def sorted_rows(x, o, *, fill: ml.constexpr = 0.0):
  i = ml.program_id(0)
  c = ml.arange(64)
  v = x.at[i, c].load(mask=c < x.shape[1], other=fill)
  o.at[i, c].store(jnp.sort(v), mask=c < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32), grid=lambda x: (x.shape[0],))
def ranked(x, o):
  i = ml.program_id(0)
  c = ml.arange(64)
  v = x.at[i, c].load(mask=c < x.shape[1], other=0)
  o.at[i, c].store(jnp.argsort(v, descending=True).astype(jnp.int32), mask=c < x.shape[1])


def test_padding_sorted_before_data_is_mg953_and_padding_sorted_last_is_fine():
  rng = np.random.default_rng(5)
  logits = (rng.standard_normal((16, 60)) - 3.0).astype(np.float32)
  _raises(router, [logits], "jax.lax.top_k(v, 2)",
          "jax.lax.top_k sorts lanes the masked load at line 138 kept off past the end of x, filled with other=fill"
          " (0.0): in program (0, 0, 0) (row 0) a lane of padding sorts to position 0, before an element of data at"
          " position 4, so the largest values it gives are padding",
          "fill them so that they sort after the data: other=float('-inf') in the masked load at line 138 (or sort"
          " ml.where(e[None, :] < x.shape[1], v, float('-inf')))")
  pos = (np.abs(logits) + 1).astype(np.float32)
  _raises(sorted_rows, [pos], "jnp.sort(v)",
          "jnp.sort sorts lanes the masked load at line 148 kept off past the end of x, filled with other=fill (0.0): in"
          " program (0, 0, 0) a lane of padding sorts to position 0, before an element of data at position 4, so the"
          " smallest values it gives are padding",
          "fill them so that they sort after the data: other=float('inf') in the masked load at line 148 (or sort"
          " ml.where(c < x.shape[1], v, float('inf')))")
  ints = rng.integers(-100, -1, (2, 60)).astype(np.int32)
  _raises(ranked, [ints], "jnp.argsort(v, descending=True)",
          "jnp.argsort sorts lanes the masked load at line 156 kept off past the end of x, filled with other=0: in"
          " program (0, 0, 0) a lane of padding sorts to position 0, before an element of data at position 4, so the"
          " first positions it gives are the padding's",
          "fill them so that they sort after the data: other=-2147483648 in the masked load at line 156 (or sort"
          " ml.where(c < x.shape[1], v, -2147483648))")
  order = np.argsort(-logits, 1, kind="stable")[:, :2]
  w, ids = router(logits, fill=-float("inf"), interpret=True)
  np.testing.assert_array_equal(w, np.take_along_axis(logits, order, 1))
  np.testing.assert_array_equal(ids, order)
  np.testing.assert_array_equal(sorted_rows(pos, fill=float("inf"), interpret=True), np.sort(pos, 1))
  full = rng.standard_normal((8, 64)).astype(np.float32)     # no padding: the fill is never read
  np.testing.assert_array_equal(router(full, interpret=True)[1], np.argsort(-full, 1, kind="stable")[:, :2])
