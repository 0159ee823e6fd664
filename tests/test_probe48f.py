"""Probe 48f (nothing silently wrong). Three classes of kernels that compiled, ran in interpret mode and gave
wrong numbers with no error:

- a masked load's padding that met another array's data in the same lanes (`ml.sum(v * w[...])` of a row padded
  past x's end and a longer w, `v * b[None, :] + b[None, :]` of padded rows, an outer product) counted as data
  in interpret mode's MG953 check (lowering/interpret_padding.py: `fresh`);
- padding moved by a transpose, a store through `buf.T`, a flip, a roll or a strided slice (each through an SMEM
  scratch) lost its lanes' states there, and a gather indexed by padding (an embedding bag's tail of ids, `other=0`,
  reading row 0 once per padding lane) read data (lowering/interpret_pad_moves.py);
- a mask bounding an index by another dimension's size (`cols < x.shape[0]` for the columns of a (64, 100) x,
  `rn[None, :] < M` after `M, N = x.shape`) kept elements inside the array off: now MG203 at the comparison,
  found while compiling (frontend/mask_axes.py).
Interpret mode and the frontend only: nothing here runs on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _raises(kernel, args, at, nth=0, **kw):
  """`kernel(*args)` in interpret mode fails with MG953 at the `nth` `at`; the error."""
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert e.code == "MG953"
  assert (e.lineno, e.col_offset) == where(kernel, at, nth), e.render()
  return e


def _rows(seed, shape, shift=0.0):
  return (np.random.default_rng(seed).standard_normal(shape) + shift).astype(np.float32)


# ---------------------------------------------------------------- padding meeting another array's data
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), x.dtype), grid=lambda x, w: (x.shape[0],))
def weighted_sum(x, w, out, *, WHERE: ml.constexpr = False):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=1.0)
  if WHERE:
    out[r] = ml.sum(v * w[...], where=cols < x.shape[1])
  else:
    out[r] = ml.sum(v * w[...])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), x.dtype), grid=lambda x, w: (x.shape[0],))
def valid_meetings(x, w, out):
  r = ml.program_id(0)
  acc = ml.full((128,), float("-inf"), F32)
  for k in ml.static_range(0, x.shape[1], 128):       # (unrolled: other tiles of x meet the last one's padding)
    cols = k + ml.arange(128)
    v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
    ww = w.at[cols].load(mask=cols < w.shape[0], other=0.0)
    acc = ml.maximum(acc, ml.where(cols < x.shape[1], v * ww, float("-inf")))
  out[r] = ml.max(acc) + ml.sum(x.at[r, ml.arange(128)].load(mask=ml.arange(128) < x.shape[1], other=0.0) * w[0])


def test_a_rows_padding_times_a_longer_arrays_data_is_reported_at_the_sum():
  x, w = _rows(1, (3, 100)), _rows(2, (128,))
  load = where(weighted_sum, "v = x.at")[0]
  e = _raises(weighted_sum, [x, w], "ml.sum(v * w[...])")
  got, want = (x[0] * w[:100]).sum() + w[100:].sum(), (x[0] * w[:100]).sum()
  assert e.message.startswith(
      f"ml.sum reduces lanes the masked load at line {load} kept off past the end of x, filled with other=1.0, then met"
      f" the elements of w in the same lanes at line {load + 4} (where no element of x is there to pair with them),"
      f" values such as "), e.message
  assert e.message.endswith(f"they change its result in program (0, 0, 0), {got:.6g} where the elements inside give"
                            f" {want:.6g}"), e.message
  assert e.hint == "reduce only the lanes the mask keeps: ml.sum(v * w[...], where=cols < x.shape[1])"
  np.testing.assert_allclose(np.asarray(weighted_sum(x, w, interpret=True, WHERE=True)), (x * w[:100]).sum(1),
                             rtol=1e-5, atol=1e-5)
  # padding meeting the same array's other tiles (a running max unrolled), masked data of w, or a select: no error
  x, w = _rows(7, (3, 200), shift=-2), np.abs(_rows(8, (200,))) + 0.5
  np.testing.assert_allclose(np.asarray(valid_meetings(x, w, interpret=True)),
                             (x * w).max(1) + x[:, :128].sum(1) * w[0], rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, b: S((x.shape[1],), x.dtype))
def affine_column_sums(x, b, out, *, WHERE: ml.constexpr = False):
  rows = ml.arange(16)
  v = x.at[rows[:, None], ml.arange(64)[None, :]].load(mask=rows[:, None] < x.shape[0], other=0.0)
  y = v * b[...][None, :] + b[...][None, :]
  if WHERE:
    out[...] = ml.sum(y, axis=0, where=rows[:, None] < x.shape[0])
  else:
    out[...] = ml.sum(y, axis=0)


@mg.mgpu_kernel(out_shape=lambda x, y: S((y.shape[0],), x.dtype))
def outer_column_sums(x, y, out, *, WHERE: ml.constexpr = False):
  i = ml.arange(128)
  a = x.at[i].load(mask=i < x.shape[0], other=1.0)
  if WHERE:
    out[...] = ml.sum(a[:, None] * y[...][None, :], axis=0, where=(i < x.shape[0])[:, None])
  else:
    out[...] = ml.sum(a[:, None] * y[...][None, :], axis=0)


def test_padded_rows_times_a_bias_plus_it_and_an_outer_product_are_reported_with_the_hint_oriented():
  x, b = _rows(3, (10, 64)), _rows(4, (64,))
  e = _raises(affine_column_sums, [x, b], "ml.sum(y, axis=0)")
  assert "then met the elements of b in the same lanes" in e.message, e.message
  assert e.hint == "reduce only the lanes the mask keeps: ml.sum(y, axis=0, where=rows[:, None] < x.shape[0])"
  np.testing.assert_allclose(np.asarray(affine_column_sums(x, b, interpret=True, WHERE=True)), (x * b + b).sum(0),
                             rtol=1e-5, atol=1e-5)
  x, y = _rows(5, (100,)), _rows(6, (128,))
  e = _raises(outer_column_sums, [x, y], "ml.sum(a[:, None]", nth=1)
  assert "then met the elements of y in the same lanes" in e.message, e.message
  assert e.hint == ("reduce only the lanes the mask keeps: ml.sum(a[:, None] * y[...][None, :], axis=0,"
                    " where=(i < x.shape[0])[:, None])")              # (the padding is a's rows: [:, None])
  np.testing.assert_allclose(np.asarray(outer_column_sums(x, y, interpret=True, WHERE=True)),
                             (x[:, None] * y[None, :]).sum(0), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- padding moved through an SMEM scratch
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def transposed_sums(x, out, *, THROUGH_T: ml.constexpr = False, WHERE: ml.constexpr = False):
  rows = ml.arange(64)
  cols = ml.arange(64)
  v = x.at[rows[:, None], cols[None, :]].load(mask=cols[None, :] < x.shape[1], other=0.0)
  buf = ml.smem((64, 64), F32)
  if THROUGH_T:
    buf.T[...] = v + 1.0
  else:
    buf[...] = (v + 1.0).T
  if WHERE:
    out[...] = ml.sum(buf[...], axis=0, where=(cols[None, :] < x.shape[1]).T)
  else:
    out[...] = ml.sum(buf[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def moved_max(x, out, *, HOW: ml.constexpr = "flip"):
  r = ml.program_id(0)
  cols = ml.arange(128)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  if HOW == "flip":
    out[r] = ml.max(ml.flip(v, 0)[:64])
  elif HOW == "roll":
    out[r] = ml.max(ml.roll(v, 5, 0))
  else:
    out[r] = ml.max(v[1::2])


def test_padding_transposed_or_stored_through_buf_T_is_followed_to_the_reduction():
  x = _rows(9, (64, 50))
  load = where(transposed_sums, "v = x.at")[0]
  for through in (False, True):
    e = _raises(transposed_sums, [x], "ml.sum(buf[...], axis=0)", THROUGH_T=through)
    assert e.message == (
        f"ml.sum reduces lanes the masked load at line {load} kept off past the end of x, filled with other=0.0, 1 by"
        f" the time they reach it: they change its result in program (0, 0, 0) (result 0),"
        f" {(x[0] + 1).sum() + (64 - x.shape[1]):.6g} where the elements inside give {(x[0] + 1).sum():.6g}"), e.message
    assert e.hint == ("reduce only the lanes the mask keeps: ml.sum(buf[...], axis=0,"
                      " where=(cols[None, :] < x.shape[1]).T)")
    np.testing.assert_allclose(np.asarray(transposed_sums(x, interpret=True, THROUGH_T=through, WHERE=True)),
                               (x + 1).sum(1), rtol=1e-5)


def test_padding_flipped_rolled_or_sliced_with_a_step_is_followed_to_the_max():
  x = _rows(10, (2, 100), shift=-5)
  load = where(moved_max, "v = x.at")[0]
  for how, at in (("flip", "ml.max(ml.flip"), ("roll", "ml.max(ml.roll"), ("strided", "ml.max(v[1::2])")):
    e = _raises(moved_max, [x], at, HOW=how)
    assert e.hint.startswith(f"fill them with the identity of a max: other=float('-inf') in the masked load at line"
                             f" {load}"), e.hint
  y = _rows(11, (2, 100), shift=5)                    # (positive rows: the padding's zeros decide nothing)
  np.testing.assert_allclose(np.asarray(moved_max(y, interpret=True, HOW="flip")), y[:, 64:].max(1))
  np.testing.assert_allclose(np.asarray(moved_max(y, interpret=True, HOW="strided")), y[:, 1::2].max(1))


# ---------------------------------------------------------------- gathers indexed by padding
@mg.mgpu_kernel(out_shape=lambda t, ids: S((t.shape[1],), t.dtype))
def embedding_bag(t, ids, out, *, WHERE: ml.constexpr = False):
  pos = ml.arange(16)
  idx = ids.at[pos].load(mask=pos < ids.shape[0], other=0)
  rows = t.at[idx, :][...]
  if WHERE:
    out[...] = rows.sum(axis=0, where=(pos < ids.shape[0])[:, None])
  else:
    out[...] = ml.sum(rows, axis=0)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((1,), t.dtype))
def register_gather_max(t, ids, out):
  pos = ml.arange(128)
  idx = ids.at[pos].load(mask=pos < ids.shape[0], other=0)
  tv = t[...]
  out[0] = ml.max(tv[idx])


def test_rows_an_embedding_bags_padded_ids_gather_are_reported_at_the_sum():
  t, ids = _rows(14, (50, 64)), np.array([3, 7, 9, 11, 20, 2, 5, 1, 0, 4], np.int32)
  load, gather = where(embedding_bag, "idx = ids.at")[0], where(embedding_bag, "rows = t.at")[0]
  e = _raises(embedding_bag, [t, ids], "ml.sum(rows, axis=0)")
  assert e.message.startswith(
      f"ml.sum reduces lanes the masked load at line {load} kept off past the end of ids, filled with other=0, then"
      f" indexed the gather at line {gather}, which read an element of t for each of them, values such as"), e.message
  assert e.message.endswith(f"{(t[ids].sum(0) + 6 * t[0])[0]:.6g} where the elements inside give"
                            f" {t[ids].sum(0)[0]:.6g}"), e.message
  assert e.hint == "reduce only the lanes the mask keeps: ml.sum(rows, axis=0, where=(pos < ids.shape[0])[:, None])"
  np.testing.assert_allclose(np.asarray(embedding_bag(t, ids, interpret=True, WHERE=True)), t[ids].sum(0),
                             rtol=1e-5, atol=1e-5)
  t = _rows(15, (128,))
  t[0] = 100.0                                        # (row 0, which the padding's index 0 reads)
  ids = np.arange(1, 101, dtype=np.int32)
  e = _raises(register_gather_max, [t, ids], "ml.max(tv[idx])")
  assert "then indexed the gather at line" in e.message and "of the register tensor" in e.message, e.message


# ---------------------------------------------------------------- a mask bounded by another dimension's size
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_sums(x, out, *, RIGHT: ml.constexpr = False):
  r = ml.program_id(0)
  cols = ml.arange(256)
  if RIGHT:
    v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  else:
    v = x.at[r, cols].load(mask=cols < x.shape[0], other=0.0)
  out[r] = ml.sum(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def column_sums_inline(x, out):
  v = x.at[ml.arange(64)[:, None], ml.arange(128)[None, :]].load(
      mask=(ml.arange(64)[:, None] < x.shape[0]) & (ml.arange(128)[None, :] < x.shape[0]), other=0.0)
  out.at[ml.arange(128)].store(ml.sum(v, axis=0), mask=ml.arange(128) < x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16), ml.cdiv(x.shape[1], 64)))
def add_one(x, o, *, SWAP: ml.constexpr = True):
  M, N = x.shape
  rm = ml.program_id(0) * 16 + ml.arange(16)
  rn = ml.program_id(1) * 64 + ml.arange(64)
  if SWAP:
    mask = (rm[:, None] < M) & (rn[None, :] < M)
  else:
    mask = (rm[:, None] < M) & (rn[None, :] < N)
  v = x.at[rm[:, None], rn[None, :]].load(mask=mask, other=0.0)
  o.at[rm[:, None], rn[None, :]].store(v + 1.0, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],), input_output_aliases={0: 0})
def double_in_place(x, o):
  r = ml.program_id(0)
  cols = ml.arange(128)
  m = cols < x.shape[0]
  o.at[r, cols].store(x.at[r, cols].load(mask=cols < x.shape[1], other=0.0) * 2, mask=m)


def test_a_column_mask_bounded_by_the_row_count_is_an_error_at_the_comparison():
  load = where(row_sums, "v = x.at", 1)[0]
  expect(row_sums, [S((64, 200), F32)], mg.IndexOutOfBoundsError, "cols < x.shape[0]",
         f"this mask bounds cols, which indexes dimension 1 of x (size 200) in the masked load at line {load}, by"
         " x.shape[0] (size 64), the size of dimension 0: it keeps off positions 64 to 199 of that"
         " dimension, inside x, so the load leaves them out",
         hint="bound each index by the size of the dimension it indexes: cols < x.shape[1]")
  # where the rows outnumber the columns the mask reads past the row's end: the same error (MG203 said before to
  # add a second bound, `(cols < x.shape[0]) & (cols < x.shape[1])`)
  e = expect(row_sums, [S((300, 100), F32)], mg.IndexOutOfBoundsError, "cols < x.shape[0]",
             f"this mask bounds cols, which indexes dimension 1 of x (size 100) in the masked load at line {load}, by"
             " x.shape[0] (size 300), the size of dimension 0: it keeps on positions 100 to 299, past"
             " the end of that dimension, so the load touches memory outside x")
  assert len(e.errors) == 1, e.render()
  x = _rows(12, (64, 200))
  np.testing.assert_allclose(np.asarray(row_sums(x, interpret=True, RIGHT=True)), x.sum(1), rtol=1e-4, atol=1e-4)
  row_sums.check(S((64, 64), F32))                # (a square x: the same numbers)
  # an index written inline, the same in the subscript and in the mask
  expect(column_sums_inline, [S((50, 100), F32)], mg.IndexOutOfBoundsError, "ml.arange(128)[None, :] < x.shape[0]",
         "this mask bounds ml.arange(128)[None, :], which indexes dimension 1 of x (size 100) in the masked load at line"
         f" {where(column_sums_inline, 'v = x.at')[0]}, by x.shape[0] (size 50), the size of dimension 0: it keeps off"
         " positions 50 to 99 of that dimension, inside x, so the load leaves them out",
         hint="bound each index by the size of the dimension it indexes: ml.arange(128)[None, :] < x.shape[1]")


def test_names_bound_to_the_shape_and_another_arrays_shape_are_read_too():
  expect(add_one, [S((100, 200), F32)], mg.IndexOutOfBoundsError, "rn[None, :] < M)",
         "this mask bounds rn[None, :], which indexes dimension 1 of x (size 200) in the masked load at line"
         f" {where(add_one, 'v = x.at')[0]}, by M, x.shape[0] (size 100), the size of dimension 0: it keeps off"
         " positions 100 to 199 of that dimension, inside x, so the load leaves them out",
         hint="bound each index by the size of the dimension it indexes: rn[None, :] < N")
  x = _rows(13, (100, 200))
  np.testing.assert_allclose(np.asarray(add_one(x, interpret=True, SWAP=False)), x + 1)
  expect(double_in_place, [S((8, 100), F32)], mg.IndexOutOfBoundsError, "cols < x.shape[0]",
         f"this mask bounds cols, which indexes dimension 1 of o (size 100) in the masked store at line"
         f" {where(double_in_place, 'o.at[r, cols]')[0]}, by x.shape[0] (size 8), the size of dimension 0: it keeps"
         " off positions 8 to 99 of that dimension, inside o, so the store leaves them unwritten",
         hint="bound each index by the size of the dimension it indexes: cols < x.shape[1]")
