"""Probe 50f (nothing silently wrong, what probe 49f left). Kernels that compiled, ran and gave wrong numbers with
nothing said:

- a masked store whose mask, known while compiling, is false for every element in every program (`mask=(cols < n)
  & (cols < 0)`) into an output aliased to an input wrote nothing, silently (MG602 caught it only where the output
  starts unwritten); a masked load of such a mask read only its `other=`. Now MG602 (a store) and MG203 (a load)
  at the access (frontend/empty_masks.py); a fixed number of chunks whose last ones lie past a short row, an
  over-provisioned grid and an empty array stay fine;
- a float16 `ml.sum` of finite elements past 65504 is inf, and a mean computed from it inf too (as jnp's): now a
  PrecisionWarning in interpret mode at the sum, with `dtype=jnp.float32` as the hint (lowering/interpret_overflow.py);
- a NumPy/JAX scalar a loop carries (`n = jnp.int8(0)`, then `n += 1` in the loop) started an int32 carry, where
  jnp's loop keeps int8 (so it did not wrap as jnp's, and storing it into an int8 output was MG102): now the
  carry keeps the scalar's dtype (frontend/carried.py).
"""
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


def _rows(seed, shape, dtype=np.float32):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# ---------------------------------------------------------------- masks false everywhere
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[0],), input_output_aliases={0: 0})
def scale_in_place(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  n = x.shape[1]
  v = x.at[r, cols].load(mask=cols < n, other=0.0)
  out.at[r, cols].store(v * 2, mask=(cols < n) & (cols < 0))


def test_a_store_whose_mask_keeps_nothing_into_an_aliased_output_is_mg602():
  expect(scale_in_place, [S((4, 100), F32)], mg.UncoveredOutputError, "out.at[r, cols].store(",
         "this masked store writes nothing: its mask (cols < n) & (cols < 0) is false for every element in every"
         " program, so out keeps what it held",
         hint="a mask is true where the store should write: check each comparison's bound (a tail mask is"
              " offs < out.shape[...]), or drop the store")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (ml.cdiv(x.shape[0], 64),),
                input_output_aliases={0: 0})
def relu_in_place(x, out, *, WRONG: ml.constexpr = True):
  i = ml.program_id(0)
  rows = i * 64 + ml.arange(64)
  cols = ml.arange(128)
  keep = (rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1])
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] > x.shape[1]) if WRONG else keep
  v = x.at[rows[:, None], cols[None, :]].load(mask=keep, other=0.0)
  out.at[rows[:, None], cols[None, :]].store(ml.maximum(v, 0.0), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=(1,), input_output_aliases={0: 0})
def add_one_in_chunks(x, out):
  for k in range(4):
    offs = k * 64 + ml.arange(64)
    ml.store(out.at[offs], ml.load(x.at[offs]) + 1, mask=offs > x.shape[0])


def test_other_stores_of_masks_false_everywhere_a_2d_one_and_one_in_a_loop():
  expect(relu_in_place, [S((100, 128), F32)], mg.UncoveredOutputError, "out.at[rows[:, None]",
         "this masked store writes nothing: its mask m is false for every element in every program, so out keeps"
         " what it held")
  expect(add_one_in_chunks, [S((256,), F32)], mg.UncoveredOutputError, "ml.store(",
         "this masked store writes nothing: its mask offs > x.shape[0] is false for every element in every program,"
         " so out keeps what it held")
  x = _rows(1, (100, 128))                      # the right mask: as meant
  np.testing.assert_array_equal(np.asarray(relu_in_place(x, WRONG=False, interpret=True)), np.maximum(x, 0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_sums(x, out):
  r = ml.program_id(0)
  cols = ml.arange(128)
  out[r] = ml.sum(x.at[r, cols].load(mask=(cols < x.shape[1]) & (cols < 0), other=0.0))


def _load_keeping_nothing():
  expect(row_sums, [S((4, 100), F32)], mg.IndexOutOfBoundsError, "x.at[r, cols].load(",
         "this masked load reads nothing: its mask (cols < x.shape[1]) & (cols < 0) is false for every element in"
         " every program, so it gives other=0.0 everywhere and none of x",
         hint="a mask is true where the load should read: check each comparison's bound (a tail mask is"
              " offs < x.shape[...])")


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def chunked_row_sums(x, out):
  r = ml.program_id(0)
  acc = 0.0
  for k in range(4):                 # four chunks of 128: the last ones lie past a row of 200
    cols = k * 128 + ml.arange(128)
    acc += ml.sum(x.at[r, cols].load(mask=cols < x.shape[1], other=0.0))
  out[r] = acc


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=(8,), input_output_aliases={0: 0})
def double_over_provisioned(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)     # programs 3 to 7 keep nothing of 300
  ml.store(out.at[offs], ml.load(x.at[offs], mask=offs < x.shape[0]) * 2, mask=offs < x.shape[0])


def test_a_load_whose_mask_keeps_nothing_is_mg203_but_one_keeping_nothing_on_some_trips_or_programs_is_fine():
  _load_keeping_nothing()
  x = _rows(2, (4, 200))
  np.testing.assert_allclose(np.asarray(chunked_row_sums(x, interpret=True)), x.sum(1), rtol=1e-5, atol=1e-5)
  y = _rows(3, (300,))
  np.testing.assert_array_equal(np.asarray(double_over_provisioned(y, interpret=True)), y * 2)


# ---------------------------------------------------------------- float16 sums past 65504
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=lambda x: (x.shape[0],))
def row_means(x, out, *, F32_SUM: ml.constexpr = False):
  r = ml.program_id(0)
  v = x.at[r][...]
  if F32_SUM:
    out[r] = (ml.sum(v, dtype=jnp.float32) / x.shape[1]).astype(x.dtype)
  else:
    out[r] = ml.sum(v) / x.shape[1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def column_means(x, out):
  v = x[...]
  out[...] = v.sum(axis=0) / x.shape[0]


def _warned(fn):
  with warnings.catch_warnings(record=True) as w:
    warnings.simplefilter("always")
    got = np.asarray(fn())
  return got, [str(m.message) for m in w if m.category is mg.PrecisionWarning]


def test_a_float16_sum_past_65504_warns_at_the_sum_with_a_float32_hint():
  x = (np.random.default_rng(4).random((4, 1024)) * 200 + 100).astype(np.float16)
  got, msgs = _warned(lambda: row_means(x, interpret=True))
  np.testing.assert_array_equal(got, np.asarray(jnp.sum(x, axis=1) / 1024))     # jnp's inf, as written
  line, col = where(row_means, "ml.sum(v) / x.shape[1]")
  big = float(x[0].astype(np.float32).sum())
  assert len(msgs) == 1, msgs
  assert msgs[0].startswith(
      f"{row_means.fn.__code__.co_filename}:{line}:{col}: this sum of float16 elements, all finite, is {big:.6g} in"
      f" program (0, 0, 0), past float16's largest value (65504): as a float16 result it is inf (jnp's sum gives"
      f" the same), and so is anything computed from it (a mean)"), msgs[0]
  assert ("hint: keep the sum in float32: ml.sum(v, dtype=jnp.float32), and convert after dividing ((... / n)"
          ".astype(jnp.float16)); ml.mean divides in float32 itself") in msgs[0]
  # the hint followed: jnp's float32 mean, and no warning
  got, msgs = _warned(lambda: row_means(x, F32_SUM=True, interpret=True))
  assert msgs == []
  np.testing.assert_allclose(got.astype(np.float32), x.astype(np.float32).mean(1), rtol=1e-3)


def test_other_float16_sums_past_65504_a_method_of_negatives_and_a_small_one():
  x = (-np.random.default_rng(5).random((256, 128)) * 600).astype(np.float16)
  got, msgs = _warned(lambda: column_means(x, interpret=True))
  np.testing.assert_array_equal(got, np.asarray(jnp.sum(x, axis=0) / 256))
  assert len(msgs) == 1 and "as a float16 result it is -inf" in msgs[0] and (
      "keep the sum in float32: v.sum(axis=0, dtype=jnp.float32)") in msgs[0], msgs
  small = np.random.default_rng(6).random((256, 128)).astype(np.float16)
  got, msgs = _warned(lambda: column_means(small, interpret=True))
  assert msgs == []
  np.testing.assert_allclose(got.astype(np.float32), small.astype(np.float32).mean(0), rtol=2e-3)


# ---------------------------------------------------------------- NumPy / JAX scalars a loop carries
@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int8), grid=(1,))
def int8_count(x, out):
  n = jnp.int8(100)
  for i in range(3):
    n += 50
  out[0] = n


@mg.mgpu_kernel(out_shape=lambda x: S((1,), jnp.int16), grid=(1,))
def int16_count(x, out):
  n = jnp.int16(30000)
  i = 0
  while i < x.shape[0]:
    n = n + 1000
    i += 1
  out[0] = n


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype), grid=(1,))
def half_total(x, out):
  s = jnp.float16(0)
  for i in ml.range(x.shape[0]):
    s += x[i]
  out[0] = s


def _jnp_loop(start, step, trips):
  n = start
  for _ in range(trips):
    n += step
  return np.asarray([n])


def test_a_jnp_int8_scalar_a_loop_carries_keeps_int8_as_jnp():
  got = np.asarray(int8_count(np.zeros(4, np.float32), interpret=True))
  assert got.dtype == np.int8
  np.testing.assert_array_equal(got, _jnp_loop(jnp.int8(100), 50, 3))      # 250 wraps to -6, as jnp's
  got = np.asarray(int16_count(np.zeros(4, np.float32), interpret=True))
  np.testing.assert_array_equal(got, _jnp_loop(jnp.int16(30000), 1000, 4))
  x = np.random.default_rng(7).random(64).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(half_total(x, interpret=True)), np.asarray([_half_sum(x)]))


def _half_sum(x):
  """jnp's float16 running sum of x, rounded to float16 after each term."""
  s = jnp.float16(0)
  for v in x:
    s = s + v
  return s


@pytest.mark.gpu
def test_gpu_scalars_a_loop_carries_keep_their_dtype():
  np.testing.assert_array_equal(np.asarray(int8_count(jnp.zeros(4, F32))), _jnp_loop(jnp.int8(100), 50, 3))
  np.testing.assert_array_equal(np.asarray(int16_count(jnp.zeros(4, F32))), _jnp_loop(jnp.int16(30000), 1000, 4))
  x = np.random.default_rng(7).random(64).astype(np.float16)
  np.testing.assert_array_equal(np.asarray(half_total(jnp.asarray(x))), np.asarray([_half_sum(x)]))


# ---------------------------------------------------------------- a select's mask along another axis than the load's
@mg.mgpu_kernel(out_shape=lambda x: S((64, 64), x.dtype), grid=(1,))
def padded_tile(x, out):
  rows, cols = ml.arange(64), ml.arange(64)
  v = x.at[rows[:, None], cols[None, :]].load(mask=(rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1]),
                                              other=0.0)
  out[...] = ml.where(rows[None, :] < x.shape[0], v * 2, 0.0)


def test_a_select_masking_the_loads_rows_along_the_columns_is_mg202():
  expect(padded_tile, [S((50, 64), F32)], mg.ShapeMismatchError, "ml.where(rows[None, :]",
         "this select's mask rows[None, :] < x.shape[0] places rows along axis 1 of the tile, but the masked load at"
         f" line {where(padded_tile, 'v = x.at[rows')[0]} placed rows along axis 0: it keeps or drops the lanes of"
         " another axis than the load's mask did",
         hint="place rows along axis 0 as the load does (rows[:, None], or a mask m of it as m[:, None])")


@mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype), grid=(1,))
def column_max(x, out, *, RIGHT: ml.constexpr = False):
  rows = ml.arange(64)
  rm = rows < x.shape[0]
  v = x.at[rows[:, None], ml.arange(64)[None, :]].load(mask=rm[:, None], other=0.0)
  keep = rm[:, None] if RIGHT else rm[None, :]
  out[...] = ml.max(ml.where(keep, v, float('-inf')), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), x.dtype), grid=(1,))
def column_max_where(x, out):
  rows = ml.arange(64)
  rm = rows < x.shape[0]
  v = x.at[rows[:, None], ml.arange(64)[None, :]].load(mask=rm[:, None], other=0.0)
  out[...] = ml.max(v, axis=0, where=rm[None, :])


@mg.mgpu_kernel(out_shape=lambda q: S((q.shape[0], 64), q.dtype), grid=lambda q: (ml.cdiv(q.shape[0], 64),))
def causal_tile(q, out):
  i = ml.program_id(0)
  r = i * 64 + ml.arange(64)
  c = ml.arange(64)
  v = q.at[r[:, None], c[None, :]].load(mask=r[:, None] < q.shape[0], other=0.0)
  out.at[r[:, None], c[None, :]].store(ml.where(r[:, None] >= c[None, :], v, 0.0), mask=r[:, None] < q.shape[0])


def test_other_selects_a_held_mask_along_the_wrong_axis_and_right_ones():
  expect(column_max, [S((50, 64), F32)], mg.ShapeMismatchError, "ml.where(keep",
         f"this select's mask keep places rows along axis 1 of the tile, but the masked load at line"
         f" {where(column_max, 'v = x.at[rows')[0]} placed rows along axis 0: it keeps or drops the lanes of another"
         " axis than the load's mask did")
  expect(column_max_where, [S((50, 64), F32)], mg.ShapeMismatchError, "ml.max(v, axis=0",
         f"ml.max's mask rm[None, :] places rows along axis 1 of the tile, but the masked load at line"
         f" {where(column_max_where, 'v = x.at[rows')[0]} placed rows along axis 0: it keeps or drops the lanes of"
         " another axis than the load's mask did")
  x = _rows(8, (50, 64))
  np.testing.assert_array_equal(np.asarray(column_max(x, RIGHT=True, interpret=True)), x.max(0))
  q = _rows(9, (100, 64))       # a causal mask of rows against columns: both axes, as meant
  ref = np.where(np.arange(100)[:, None] % 64 + 64 * (np.arange(100)[:, None] // 64) >= np.arange(64)[None, :], q, 0)
  np.testing.assert_array_equal(np.asarray(causal_tile(q, interpret=True)), ref)
