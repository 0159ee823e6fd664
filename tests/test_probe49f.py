"""Probe 49f (nothing silently wrong, what probe 48f left). Two classes of kernels that compiled, ran in interpret
mode and gave wrong numbers with no error:

- a masked load of one input whose mask bounds an index by another input's size along the same dimension
  (`x.at[r, cols].load(mask=cols < y.shape[1])`, or `N = y.shape[1]` then `cols < N`): where y is the narrower, the
  load left x's last columns out, silently; where it is the wider, MG203's bounds check hinted keeping the wrong
  bound beside the right one. Now MG203 at the comparison (frontend/mask_axes.py), unless the mask bounds the index
  by x's own size too (a prefix of x meant, and said);
- views held in variables: a pointer block `ptrs = x.at[r, cols]` read or written later (`ptrs.load(mask=...)`)
  was a gather whose indices were clamped into the array, so a mask that kept on columns past x's end (MG203 when
  written `x.at[r, cols].load(...)`) read x's last element in their place, silently; now the window it covers, as
  the written form (frontend/subscripts.py). A row view `xr = x.at[r]` masked by the wrong dimension
  (`xr.at[cols].load(mask=cols < x.shape[0])`) is probe 48f's MG203 too (mask_axes reads the view's definition);
- an int8/int16 (uint8/uint16) count carried through more loop trips than its type's largest value
  (`cnt += (v > 0).astype(jnp.int8)` over 300 tiles) wrapped to a negative count: now a PrecisionWarning at the
  addition, with counting in int32 as its hint (frontend/narrow_sums.py).
Frontend only: nothing here runs on the GPU."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rows(seed, shape):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- a mask bounded by another input's size
@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), x.dtype), grid=lambda x, y: (x.shape[0],))
def row_sums(x, y, out, *, BOTH: ml.constexpr = False):
  r = ml.program_id(0)
  cols = ml.arange(128)
  if BOTH:
    a = x.at[r, cols].load(mask=(cols < x.shape[1]) & (cols < y.shape[1]), other=0.0)
  else:
    a = x.at[r, cols].load(mask=cols < y.shape[1], other=0.0)
  out[r] = ml.sum(a) + ml.sum(y.at[r, cols].load(mask=cols < y.shape[1], other=0.0))


def test_a_load_of_x_bounded_by_a_narrower_inputs_width_is_mg203_at_the_comparison():
  line = where(row_sums, "a = x.at[r, cols].load(mask=cols < y")[0]
  expect(row_sums, [S((8, 120), F32), S((8, 100), F32)], mg.IndexOutOfBoundsError, "cols < y.shape[1], other",
         f"this mask bounds cols, which indexes dimension 1 of x (size 120) in the masked load at line {line}, by"
         " y.shape[1] (size 100), the size of another array: it keeps off positions 100 to 119 of that dimension,"
         " inside x, so the load leaves them out",
         hint="bound each index by the size of the array it indexes: cols < x.shape[1]; where only the first"
              " y.shape[1] elements of x are meant, say so with both bounds: (cols < x.shape[1]) & (cols < y.shape[1])")
  # the wider one: MG203 at the comparison too, and its hint keeps only x's bound
  expect(row_sums, [S((8, 100), F32), S((8, 120), F32)], mg.IndexOutOfBoundsError, "cols < y.shape[1], other",
         f"this mask bounds cols, which indexes dimension 1 of x (size 100) in the masked load at line {line}, by"
         " y.shape[1] (size 120), the size of another array: it keeps on positions 100 to 119, past the end of that"
         " dimension, so the load touches memory outside x",
         hint="bound each index by the size of the array it indexes: cols < x.shape[1]")
  # both bounds (the hint followed): a prefix of x, as meant
  x, y = _rows(1, (8, 120)), _rows(2, (8, 100))
  np.testing.assert_allclose(np.asarray(row_sums(x, y, BOTH=True, interpret=True)), x[:, :100].sum(1) + y.sum(1),
                             rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, y: S((128,), x.dtype), grid=(1,))
def column_sums(x, y, out):
  M, N = y.shape
  rows = ml.arange(64)
  v = x.at[rows[:, None], ml.arange(128)[None, :]].load(mask=rows[:, None] < M, other=0.0)
  w = y.at[rows[:, None], ml.arange(128)[None, :]].load(mask=rows[:, None] < M, other=0.0)
  out[...] = ml.sum(v, axis=0) + ml.sum(w, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 100), x.dtype), grid=lambda x: (x.shape[0],))
def crop(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  out.at[r, cols].store(x.at[r, cols].load(mask=cols < out.shape[1], other=0.0), mask=cols < out.shape[1])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), x.dtype), grid=lambda x, w: (x.shape[0],))
def weighted(x, w, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  out[r] = ml.sum(x.at[r, cols].load(mask=cols < w.shape[0], other=0.0) * w.at[cols].load(mask=cols < w.shape[0],
                                                                                             other=0.0))


def test_a_name_bound_to_another_inputs_rows_is_followed_and_crops_and_vectors_are_left_alone():
  line = where(column_sums, "v = x.at")[0]
  expect(column_sums, [S((50, 128), F32), S((40, 128), F32)], mg.IndexOutOfBoundsError, "rows[:, None] < M",
         f"this mask bounds rows[:, None], which indexes dimension 0 of x (size 50) in the masked load at line {line},"
         " by M, y.shape[0] (size 40), the size of another array: it keeps off positions 40 to 49 of that dimension,"
         " inside x, so the load leaves them out",
         hint="bound each index by the size of the array it indexes: rows[:, None] < x.shape[0]; where only the first"
              " y.shape[0] elements of x are meant, say so with both bounds: (rows[:, None] < x.shape[0]) &"
              " (rows[:, None] < M)")
  # an output's width (a crop) and a 1-D weight's length bound an input's load as meant: no error
  x, w = _rows(3, (4, 120)), _rows(4, (100,))
  np.testing.assert_array_equal(np.asarray(crop(x, interpret=True)), x[:, :100])
  np.testing.assert_allclose(np.asarray(weighted(x, w, interpret=True)), (x[:, :100] * w).sum(1), rtol=1e-5,
                             atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), x.dtype), grid=lambda x, y: (x.shape[0],))
def negative_dims(x, y, out, *, OWN: ml.constexpr = False):
  r = ml.program_id(0)
  cols = ml.arange(128)
  if OWN:
    out[r] = ml.sum(x.at[r, cols].load(mask=(cols < x.shape[-1]) & (cols < y.shape[-1]), other=0.0))
  else:
    n_cols = x.shape[-2]
    out[r] = ml.sum(x.at[r, cols].load(mask=cols < n_cols, other=0.0))


def test_shapes_indexed_from_the_end_are_read_too():
  line = where(negative_dims, "cols < n_cols")[0]
  expect(negative_dims, [S((16, 100), F32), S((16, 100), F32)], mg.IndexOutOfBoundsError, "cols < n_cols",
         f"this mask bounds cols, which indexes dimension 1 of x (size 100) in the masked load at line {line}, by"
         " n_cols, x.shape[0] (size 16), the size of dimension 0: it keeps off positions 16 to 99 of that dimension,"
         " inside x, so the load leaves them out",
         hint="bound each index by the size of the dimension it indexes: cols < x.shape[1]")
  x, y = _rows(12, (8, 120)), _rows(13, (8, 100))
  np.testing.assert_allclose(np.asarray(negative_dims(x, y, OWN=True, interpret=True)), x[:, :100].sum(1),
                             rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- views held in variables
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def held_row_sums(x, out, *, END: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(128)
  ptrs = x.at[r, cols]
  out[r] = ml.sum(ptrs.load(mask=cols < END, other=0.0))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 16),))
def held_blocks(x, out, *, END: ml.constexpr = None):
  i = ml.program_id(0)
  rows = i * 16 + ml.arange(16)
  cols = ml.arange(128)
  src = x.at[rows[:, None], cols[None, :]]
  dst = out.at[rows[:, None], cols[None, :]]
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] < (END or x.shape[1]))
  dst.store(src.load(mask=m, other=0.0) * 2 + 1, mask=m)


def test_a_pointer_block_held_in_a_variable_is_the_window_it_covers_bounds_checked():
  expect(held_row_sums, [S((16, 100), F32)], mg.IndexOutOfBoundsError, "ptrs.load(",
         "this masked load touches x[0:1, 0:128] in program (0, 0, 0) where its mask is on, outside x's shape"
         " (16, 100)",
         hint="make the mask false past x's end: compare the offsets along dimension 1 with x.shape[1]"
              " (offs < x.shape[1]), or pass a longer x")
  x = _rows(7, (16, 100))
  np.testing.assert_allclose(np.asarray(held_row_sums(x, END=100, interpret=True)), x.sum(1), rtol=1e-5, atol=1e-5)
  # 2-D blocks held in variables, read and written: right, and a mask past the end is MG203 at the load
  x = _rows(8, (40, 100))
  np.testing.assert_allclose(np.asarray(held_blocks(x, interpret=True)), x * 2 + 1, rtol=1e-6)
  e = expect(held_blocks, [S((40, 100), F32)], mg.IndexOutOfBoundsError, "src.load(", "this masked load touches"
             " x[0:16, 0:120] in program (0, 0, 0) where its mask is on, outside x's shape (40, 100)", END=120)
  assert "compare the offsets along dimension 1 with x.shape[1]" in e.hint


@pytest.mark.gpu
def test_gpu_pointer_blocks_held_in_variables_match_numpy():
  x = _rows(9, (40, 100))
  np.testing.assert_allclose(np.asarray(jax.jit(held_blocks)(x)), x * 2 + 1, rtol=1e-6)
  x = _rows(10, (16, 100))
  np.testing.assert_allclose(np.asarray(jax.jit(lambda x: held_row_sums(x, END=100))(x)), x.sum(1), rtol=1e-5,
                             atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def view_row_sums(x, out):
  r = ml.program_id(0)
  xr = x.at[r]
  cols = ml.arange(128)
  out[r] = ml.sum(xr.at[cols].load(mask=cols < x.shape[0], other=0.0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 4,), x.dtype), grid=lambda x: (x.shape[0] // 4,))
def block_row_sums(x, out):
  i = ml.program_id(0)
  blk = x.at[ml.ds(i * 4, 4)]
  cols = ml.arange(128)
  acc = 0.0
  for r in ml.static_range(4):
    acc += ml.sum(blk.at[r, cols].load(mask=cols < x.shape[0], other=0.0))
  out[i] = acc


def test_a_row_view_held_in_a_variable_masked_by_the_other_dimension_is_mg203_once():
  line = where(view_row_sums, "xr.at[cols]")[0]
  expect(view_row_sums, [S((16, 100), F32)], mg.IndexOutOfBoundsError, "cols < x.shape[0]",
         f"this mask bounds cols, which indexes dimension 1 of x (size 100) in the masked load at line {line}, by"
         " x.shape[0] (size 16), the size of dimension 0: it keeps off positions 16 to 99 of that dimension, inside"
         " x, so the load leaves them out",
         hint="bound each index by the size of the dimension it indexes: cols < x.shape[1]")
  e = expect(block_row_sums, [S((16, 100), F32)], mg.IndexOutOfBoundsError, "cols < x.shape[0]",
             f"this mask bounds cols, which indexes dimension 1 of x (size 100) in the masked load at line"
             f" {where(block_row_sums, 'blk.at[r')[0]}, by x.shape[0] (size 16), the size of dimension 0: it keeps off"
             " positions 16 to 99 of that dimension, inside x, so the load leaves them out")
  assert len(e.errors) == 1, e.render()           # (not once per unrolled trip)


# ---------------------------------------------------------------- an 8- or 16-bit count past its type
@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int8), grid=(1,))
def positives(x, out, *, WIDE: ml.constexpr = False):
  if WIDE:
    n = ml.zeros((128,), jnp.int32)
    for k in range(x.shape[0] // 128):
      n += (x.at[ml.ds(k * 128, 128)][...] > 0).astype(jnp.int32)
    out[...] = ml.minimum(n, 127).astype(jnp.int8)
  else:
    cnt = ml.zeros((128,), jnp.int8)
    for k in range(x.shape[0] // 128):
      cnt += (x.at[ml.ds(k * 128, 128)][...] > 0).astype(jnp.int8)
    out[...] = cnt


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(1,))
def byte_sums(x, out):
  h = ml.full((256,), 0, x.dtype)
  for i in range(x.shape[0] // 1024):
    for j in range(4):
      h = h + x.at[ml.ds(i * 1024 + j * 256, 256)][...]
  out[...] = h


def _warned(fn):
  with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    fn()
  return [w for w in got if issubclass(w.category, mg.PrecisionWarning)]


def test_an_int8_count_over_more_trips_than_it_holds_is_warned_at_the_addition():
  x = _rows(5, (128 * 300,))
  ws = _warned(lambda: positives.check(S(x.shape, F32)))
  line, col = where(positives, "cnt += ")
  f = positives.fn.__code__.co_filename
  assert len(ws) == 1 and (ws[0].filename, ws[0].lineno) == (f, line)
  text = str(ws[0].message)
  assert text.startswith(f"{f}:{line}:{col}: cnt (int8) adds a term on each of 300 loop trips, but int8 holds no"
                         " value past 127: a count of more than 127 ones, or a sum of larger terms, wraps around (to"
                         " -128) and comes out wrong\n"), text
  assert text.endswith("hint: count in int32: start cnt as int32 (cnt = ml.zeros((128,), jnp.int32)), add each term"
                       " as int32 (term.astype(jnp.int32)), and convert once after the loop where the result fits:"
                       " cnt.astype(jnp.int8); if wrapping is meant (a hash), silence this with"
                       " warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"), text
  want = (x.reshape(300, 128) > 0).sum(0)
  got = np.asarray(positives(x, interpret=True)).astype(np.int64)
  assert (got != want).all() and (got == (want + 128) % 256 - 128).all()    # what it warns of: wrapped counts
  assert not _warned(lambda: positives.check(S((128 * 127,), F32)))        # 127 trips: fits
  wide = []
  assert not _warned(lambda: wide.append(positives(x, WIDE=True, interpret=True)))    # the hint followed
  np.testing.assert_array_equal(np.asarray(wide[0]), np.minimum(want, 127))


def test_uint8_and_int16_sums_count_nested_trips():
  ws = _warned(lambda: byte_sums.check(S((1024 * 64,), jnp.uint8)))
  assert len(ws) == 1 and ws[0].lineno == where(byte_sums, "h = h + ")[0]
  assert "h (uint8) adds a term on each of 256 loop trips, but uint8 holds no value past 255" in str(ws[0].message)
  assert "wraps around (to 0)" in str(ws[0].message)
  assert not _warned(lambda: byte_sums.check(S((1024 * 63,), jnp.uint8)))          # 252 trips
  ws = _warned(lambda: byte_sums.check(S((1024 * 8192,), jnp.int16)))
  assert len(ws) == 1 and "h (int16) adds a term on each of 32768 loop trips, but int16 holds no value past 32767" \
      in str(ws[0].message)
  x = np.random.default_rng(6).integers(0, 3, (1024 * 64,)).astype(np.uint8)
  np.testing.assert_array_equal(np.asarray(byte_sums(x, interpret=True)),
                                x.reshape(256, 256).astype(np.int64).sum(0) % 256)    # wraps, as warned


# ---------------------------------------------------------------- a Python float its operand's dtype cannot hold
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def rms_scaled(x, out, *, EPS: ml.constexpr = 1e-8, SCALE: ml.constexpr = 1.0):
  r = ml.program_id(0)
  v = x.at[r][...]
  n = ml.sqrt(ml.mean(v * v))
  out.at[r][...] = v / (n + EPS) * SCALE


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def masked_scores(x, out):
  r = ml.program_id(0)
  s = ml.where(ml.arange(x.shape[1]) < 100, x.at[r][...], -1e30)
  out.at[r][...] = ml.where(s > 1e5, 0.0, s)


def test_a_float_constant_a_float16_operand_makes_0_or_inf_is_warned_at_the_op():
  f = rms_scaled.fn.__code__.co_filename
  ws = _warned(lambda: rms_scaled.check(S((4, 128), jnp.float16)))
  line, col = where(rms_scaled, "n + EPS")
  assert len(ws) == 1 and (ws[0].filename, ws[0].lineno) == (f, line)
  text = str(ws[0].message)
  assert text.startswith(f"{f}:{line}:{col}: the Python float 1e-08 takes the dtype of n (float16), which it meets in"
                         " +, as in jnp: as float16 it is 0 (float16 holds no value between 0 and 5.96046e-08)\n"), text
  assert text.endswith("hint: compute in float32 (n.astype(jnp.float32) first), or use a constant float16 holds"
                       " (6.10352e-05, its smallest normal value); if float16 is meant, silence this with"
                       " warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"), text
  x = np.zeros((4, 128), np.float16)
  x[1:] = np.random.default_rng(11).standard_normal((3, 128))
  got = np.asarray(rms_scaled(x, interpret=True), np.float32)
  assert np.isnan(got[0]).all() and np.isfinite(got[1:]).all()    # what it warns of: 0 / (0 + 0) in the zero row
  ws = _warned(lambda: rms_scaled.check(S((4, 128), jnp.float16), EPS=1e-5, SCALE=1e5))
  assert len(ws) == 1 and ws[0].lineno == line and "the Python float 100000.0 takes the dtype of v / (n + EPS)" \
      " (float16), which it meets in *, as in jnp: as float16 it is inf (float16 holds no finite value past 65504)" \
      in str(ws[0].message), str(ws[0].message)
  assert "compute in float32 ((v / (n + EPS)).astype(jnp.float32) first), or use a constant float16 holds (65504)" \
      in str(ws[0].message)
  # float32 and bfloat16 hold 1e-8 and 1e5; a select's fill and a comparison are left alone
  assert not _warned(lambda: rms_scaled.check(S((4, 128), F32), SCALE=1e5))
  assert not _warned(lambda: rms_scaled.check(S((4, 128), jnp.bfloat16), SCALE=1e5))
  assert not _warned(lambda: masked_scores.check(S((4, 128), jnp.float16)))
  ws = _warned(lambda: rms_scaled.check(S((4, 128), F32), SCALE=1e39))
  assert len(ws) == 1 and "as float32 it is inf (float32 holds no finite value past 3.40282e+38)" in str(ws[0].message)
