"""Probe 46g (the mistakes kernel authors make, nothing silently wrong): Triton's tail bug.

A row of n elements read as a tile of BLOCK > n lanes with `mask=cols < n` leaves BLOCK - n lanes that hold
`other`, not data. Reduced as if they were data they gave wrong numbers, in interpret mode as on the GPU, and
nothing said so: `other=0.0` under a max (a softmax's, an argmax's) of negative rows, a layer norm's
`ml.sum(d * d)` of `d = v - mean` (the padding holds -mean there), `ml.mean(v)` or `ml.sum(v) / BLOCK` dividing
by the tile's size. Interpret mode now follows those lanes (lowering/interpret_padding.py) and reports a
reduction whose result they change, MaskedReductionError (MG953), at the reduction, with the fix; the kernels
that handle the padding (the identity as `other`, an `ml.where` or `where=` of the mask, a running sum whose
last tile adds zeros, padded rows stored under a mask) run as before."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _raises(kernel, args, at, message, hint, nth=0, **kw):
  """`kernel(*args)` in interpret mode fails with MG953 at `at`, with exactly `message` and `hint`."""
  with pytest.raises(mg.MaskedReductionError) as info:
    kernel(*args, interpret=True, **kw)
  e = info.value
  assert e.code == "MG953" and isinstance(e, mg.InterpretError)
  assert (e.lineno, e.col_offset) == where(kernel, at, nth), e.render()
  assert e.message == message, e.message
  assert e.hint == hint, e.hint
  return e


def _rows(seed, shape=(4, 100), shift=-3.0):
  return (np.random.default_rng(seed).standard_normal(shape) + shift).astype(np.float32)


def _g(v):
  return f"{float(v):.6g}"


def _softmax(x):
  e = np.exp(x - x.max(1, keepdims=True))
  return e / e.sum(1, keepdims=True)


# ---------------------------------------------------------------- a max over padding of other=0
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def softmax_other0(x, out, *, BLOCK: ml.constexpr = 128, OTHER: ml.constexpr = 0.0):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  m = cols < x.shape[1]
  v = x.at[r, cols].load(mask=m, other=OTHER)
  v = v - ml.max(v, axis=0)
  e = ml.exp(v)
  out.at[r, cols].store(e / ml.sum(e, axis=0), mask=m)


def test_softmax_with_other_zero_is_reported_at_its_max():
  x = _rows(0)
  line = where(softmax_other0, "v = x.at[r, cols].load")[0]
  _raises(softmax_other0, [x], "ml.max(v, axis=0)",
          f"ml.max reduces lanes the masked load at line {line} kept off past the end of x, filled with other=OTHER"
          f" (0.0): they change its result in program (0, 0, 0), 0 where the elements inside give {_g(x[0].max())}",
          f"fill them with the identity of a max: other=float('-inf') in the masked load at line {line} (where a sum"
          f" reduces the same tile, keep other=0 there and take the max of ml.where(m, v, float('-inf')))")
  got = softmax_other0(x, OTHER=float("-inf"), interpret=True)        # the hint followed
  np.testing.assert_allclose(np.asarray(got), _softmax(x), rtol=1e-5, atol=1e-6)
  with pytest.raises(mg.MaskedReductionError) as info:
    softmax_other0(-x, interpret=True)     # positive rows: 0 changes no max, but exp(0 - max) enters the sum
  assert (info.value.lineno, info.value.col_offset) == where(softmax_other0, "ml.sum(e, axis=0)")
  assert info.value.hint == "reduce only the lanes the mask keeps: ml.sum(e, axis=0, where=m)"


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), grid=lambda x: (x.shape[0],))
def argmax_other0(x, out, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.argmax(v, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def column_max_of_a_row_tail(x, out):
  rows = ml.arange(16)
  v = x.at[rows[:, None], ml.arange(128)[None, :]].load(mask=rows[:, None] < x.shape[0], other=0.0)
  out[...] = ml.max(v, axis=0)


def test_argmax_and_a_column_max_over_padded_rows():
  x = _rows(1)
  line = where(argmax_other0, "v = x.at")[0]
  _raises(argmax_other0, [x], "ml.argmax(v, axis=0)",
          f"ml.argmax reduces lanes the masked load at line {line} kept off past the end of x, filled with other=0.0:"
          f" they change the max it takes in program (0, 0, 0), 0 where the elements inside give {_g(x[0].max())}",
          f"fill them with the identity of a max: other=float('-inf') in the masked load at line {line} (where a sum"
          f" reduces the same tile, keep other=0 there and take the max of ml.where(cols < x.shape[1], v,"
          f" float('-inf')))")
  x = _rows(2, (13, 128))
  line = where(column_max_of_a_row_tail, "v = x.at")[0]
  _raises(column_max_of_a_row_tail, [x], "ml.max(v, axis=0)",
          f"ml.max reduces lanes the masked load at line {line} kept off past the end of x, filled with other=0.0:"
          f" they change its result in program (0, 0, 0) (result 0), 0 where the elements inside give"
          f" {_g(x[:, 0].max())}",
          f"fill them with the identity of a max: other=float('-inf') in the masked load at line {line} (where a sum"
          f" reduces the same tile, keep other=0 there and take the max of ml.where(rows[:, None] < x.shape[0], v,"
          f" float('-inf')))")


# ---------------------------------------------------------------- padding changed by math before a sum
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def layer_norm_no_where(x, out, *, BLOCK: ml.constexpr = 128, FIXED: ml.constexpr = False):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  m = cols < x.shape[1]
  v = x.at[r, cols].load(mask=m, other=0.0)
  mean = ml.sum(v, axis=0) / x.shape[1]
  d = v - mean
  if FIXED:
    var = ml.sum(d * d, axis=0, where=m) / x.shape[1]
  else:
    var = ml.sum(d * d, axis=0) / x.shape[1]
  out.at[r, cols].store(d / ml.sqrt(var + 1e-5), mask=m)


def _layer_norm(x):
  mu = x.mean(1, keepdims=True)
  return (x - mu) / np.sqrt(((x - mu) ** 2).mean(1, keepdims=True) + 1e-5)


def test_layer_norm_summing_deviations_of_the_padding():
  x = _rows(3)
  line = where(layer_norm_no_where, "v = x.at")[0]
  mu = np.float32(x[0].sum(dtype=np.float32) / np.float32(100))
  d = x[0] - mu
  _raises(layer_norm_no_where, [x], "ml.sum(d * d, axis=0)",
          f"ml.sum reduces lanes the masked load at line {line} kept off past the end of x, filled with other=0.0,"
          f" {_g(np.float32(mu * mu))} by the time they reach it: they change its result in program (0, 0, 0),"
          f" {_g(np.sum(np.concatenate([d * d, np.full(28, mu * mu, np.float32)]), dtype=np.float32))}"
          f" where the elements inside give {_g(np.sum(d * d, dtype=np.float32))}",
          "reduce only the lanes the mask keeps: ml.sum(d * d, axis=0, where=m)")
  got = layer_norm_no_where(x, FIXED=True, interpret=True)          # the hint followed
  np.testing.assert_allclose(np.asarray(got), _layer_norm(x), rtol=1e-4, atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def log_sum_exp_other0(x, out, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.logsumexp(v)


def test_a_composite_reduction_is_hinted_with_its_where():
  x = -_rows(4)            # positive rows: the max is right, the sum of exp(0 - max) in the padding is not
  line = where(log_sum_exp_other0, "v = x.at")[0]
  with pytest.raises(mg.MaskedReductionError) as info:
    log_sum_exp_other0(x, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(log_sum_exp_other0, "ml.logsumexp(v)")
  assert e.message.startswith(f"ml.logsumexp reduces lanes the masked load at line {line} kept off past the end of x,"
                              f" filled with other=0.0, ")
  assert " by the time they reach it: they change the sum it takes in program (0, 0, 0), " in e.message
  assert e.hint == "reduce only the lanes the mask keeps: ml.logsumexp(v, where=cols < x.shape[1])"


# ---------------------------------------------------------------- a mean that counts the padding
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def row_mean(x, out, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.mean(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def row_mean_by_block(x, out, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.sum(v) / BLOCK


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def row_mean_fixed(x, out, *, BLOCK: ml.constexpr = 128):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
  out[r] = ml.mean(v, where=cols < x.shape[1]) + ml.sum(v) / x.shape[1]


def test_a_mean_over_the_tile_counts_the_padding():
  x = _rows(5)
  line = where(row_mean, "v = x.at")[0]
  _raises(row_mean, [x], "ml.mean(v)",
          f"this mean counts 128 elements, but 28 of them are lanes the masked load at line {line} kept off past the"
          f" end of x (program (0, 0, 0)): the mean of the 100 elements inside divides by 100",
          "average only the elements inside: ml.mean(v, where=cols < x.shape[1]), or ml.sum(v) / x.shape[1]")
  line = where(row_mean_by_block, "v = x.at")[0]
  _raises(row_mean_by_block, [x], "ml.sum(v) / BLOCK",
          f"this division counts 128 elements, but 28 of them are lanes the masked load at line {line} kept off past"
          f" the end of x (program (0, 0, 0)): the mean of the 100 elements inside divides by 100",
          "divide by the number of elements inside (x.shape[1]), not by the tile's size")
  np.testing.assert_allclose(np.asarray(row_mean_fixed(x, interpret=True)), 2 * x.mean(1), rtol=1e-5)


# ---------------------------------------------------------------- valid kernels beside the mistakes
@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def tail_sum_and_abs_max(x, out):
  acc = ml.zeros((128,), F32)
  big = ml.zeros((128,), F32)
  for c in range(ml.cdiv(x.shape[0], 128)):
    offs = c * 128 + ml.arange(128)
    v = x.at[offs].load(mask=offs < x.shape[0], other=0.0)
    acc += v * v                       # (the last tile adds 0 * 0 per padding lane: the data it meets stays as it was)
    big = ml.maximum(big, ml.abs(v))
  out[0] = ml.sum(acc) * 0.0 + ml.max(big) + ml.max(ml.abs(x.at[ml.ds(0, 128)].load(
      mask=ml.arange(128) < x.shape[0], other=0.0)))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def softmax_padded_rows(x, out):
  i = ml.program_id(0)
  rows = i * 8 + ml.arange(8)
  cols = ml.arange(128)
  m = rows[:, None] < x.shape[0]
  v = x.at[rows[:, None], cols[None, :]].load(mask=m, other=0.0)     # whole padding rows: never mixed with data
  e = ml.exp(v - ml.max(v, axis=1)[:, None])
  out.at[rows[:, None], cols[None, :]].store(e / ml.sum(e, axis=1)[:, None], mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x)
def softmax_of_a_small_array(x, out):
  out[...] = ml.softmax(x[...], axis=1)      # (a (6, 100) tile read padded to (8, 128) by the compiler)


def test_the_padding_handled_is_not_reported():
  """The mistake above, and beside it kernels whose padding reaches a reduction harmlessly."""
  x = _rows(6)
  with pytest.raises(mg.MaskedReductionError):
    softmax_other0(x, interpret=True)
  x1 = np.random.default_rng(7).standard_normal(1000).astype(np.float32)
  got = np.asarray(tail_sum_and_abs_max(x1, interpret=True))
  np.testing.assert_allclose(got, np.abs(x1).max() + np.abs(x1[:128]).max(), rtol=1e-6)
  x2 = _rows(8, (13, 128))
  np.testing.assert_allclose(np.asarray(softmax_padded_rows(x2, interpret=True)), _softmax(x2), rtol=1e-5, atol=1e-6)
  x3 = _rows(9, (6, 100))
  np.testing.assert_allclose(np.asarray(softmax_of_a_small_array(x3, interpret=True)),
                             _softmax(x3), rtol=1e-5, atol=1e-6)


def test_under_jit_the_error_is_the_same_class():
  x = _rows(10)
  with pytest.raises(mg.MaskedReductionError) as info:
    jax.jit(lambda a: softmax_other0(a, interpret=True))(x)
  assert info.value.code == "MG953"
  assert (info.value.lineno, info.value.col_offset) == where(softmax_other0, "ml.max(v, axis=0)")


# ---------------------------------------------------------------- a TMA load's zeros past the end
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 8,))
def row_max_in_chunks(x, out, *, FIXED: ml.constexpr = False):
  i = ml.program_id(0)
  buf = ml.smem((8, 128), F32)
  m = ml.full((8,), float("-inf"), F32)
  for c in range(ml.cdiv(x.shape[1], 128)):
    ml.copy(x.at[ml.ds(i * 8, 8), ml.ds(c * 128, 128)], buf)
    if FIXED:
      m = ml.maximum(m, ml.max(buf[...], axis=1, where=(c * 128 + ml.arange(128))[None, :] < x.shape[1]))
    else:
      m = ml.maximum(m, ml.max(buf[...], axis=1))
  out.at[ml.ds(i * 8, 8)][...] = m


@mg.mgpu_kernel(out_shape=lambda x: S((ml.cdiv(x.shape[0], 128), x.shape[1]), F32),
                grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def column_means_of_tiles(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64), F32)
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  out.at[i][...] = ml.mean(buf[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 8,), F32), grid=lambda x: (x.shape[0] // 8,))
def sums_in_chunks_and_a_rewritten_buffer(x, out):
  i = ml.program_id(0)
  buf = ml.smem((8, 128), F32)
  s = ml.zeros((8,), F32)
  for c in range(ml.cdiv(x.shape[1], 128)):
    ml.copy(x.at[ml.ds(i * 8, 8), ml.ds(c * 128, 128)], buf)
    s = s + ml.sum(buf[...], axis=1)               # zeros: a sum's identity
    buf[...] = ml.full((8, 128), -1.0, F32)        # the kernel's own values now
    s = s + ml.max(buf[...], axis=1)
  out[i] = ml.sum(s)


def test_the_zeros_a_tma_load_reads_past_the_end():
  x = _rows(11, (16, 1000), shift=-4.0)
  line = where(row_max_in_chunks, "ml.copy(")[0]
  _raises(row_max_in_chunks, [x], "ml.max(buf[...], axis=1)",
          f"ml.max reduces elements the TMA copy at line {line} read past the end of x (as zeros): they change its"
          f" result in program (0, 0, 0) (result 0), 0 where the elements inside give {_g(x[0, 896:].max())}",
          "reduce only the elements inside: ml.max(buf[...], axis=1, where=(c * 128 + ml.arange(128))[None, :] <"
          " x.shape[1]); a masked load from registers, x.at[...].load(mask=..., other=...), fills them with a value"
          " of yours")
  np.testing.assert_array_equal(np.asarray(row_max_in_chunks(x, FIXED=True, interpret=True)), x.max(1))
  x2 = _rows(12, (300, 64), shift=0.0)
  line = where(column_means_of_tiles, "ml.copy(")[0]
  _raises(column_means_of_tiles, [x2], "ml.mean(buf[...], axis=0)",
          f"this mean counts 128 elements, but 84 of them are elements the TMA copy at line {line} read past the end"
          f" of x (program (2, 0, 0)): the mean of the 44 elements inside divides by 44",
          "average only the elements inside: ml.mean(buf[...], axis=0, where=(i * 128 + ml.arange(128))[:, None] <"
          " x.shape[0])")
  got = np.asarray(sums_in_chunks_and_a_rewritten_buffer(x, interpret=True))
  np.testing.assert_allclose(got, x.reshape(2, 8, 1000).sum((1, 2)) - 64, rtol=1e-5)


# ---------------------------------------------------------------- a 16-bit sum over many trips (a warning)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def column_sums(x, out, *, WIDE: ml.constexpr = False):
  if WIDE:
    acc = ml.zeros((128,), F32)
    for i in range(x.shape[0]):
      acc = acc + x.at[i][...].astype(F32)
    out[...] = acc.astype(out.dtype)
  else:
    acc = ml.zeros((128,), x.dtype)
    for i in range(x.shape[0]):
      acc = acc + x.at[i][...]
    out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((128,), x.dtype))
def nested_sums(x, out):
  acc = ml.zeros((128,), x.dtype)
  for i in range(x.shape[0] // 64):
    for j in range(64):
      acc += x.at[i * 64 + j][...]
  out[...] = acc


def _warned(fn):
  import warnings
  with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    fn()
  return [w for w in got if issubclass(w.category, mg.PrecisionWarning)]


def test_a_bfloat16_sum_over_thousands_of_trips_is_warned():
  x = np.random.default_rng(13).random((2048, 128)).astype(jnp.bfloat16)
  ws = _warned(lambda: column_sums.check(S(x.shape, x.dtype)))
  line, col = where(column_sums, "acc + x.at[i][...]\n")
  assert len(ws) == 1 and (ws[0].filename, ws[0].lineno) == (column_sums.fn.__code__.co_filename, line)
  text = str(ws[0].message)
  assert text.startswith(f"{column_sums.fn.__code__.co_filename}:{line}:{col}: acc (bfloat16) adds a term on each of"
                         " 2048 loop trips, rounded to bfloat16 after each: past 256 terms of one sign a bfloat16 sum"
                         " stops growing (it keeps 8 significant bits), so it may lose most of its value\n")
  assert text.endswith("hint: accumulate in float32: start acc as float32 (acc = ml.zeros((128,), jnp.float32)), add each"
                       " term as float32 (term.astype(jnp.float32)), and convert once after the loop:"
                       " acc.astype(jnp.bfloat16); if bfloat16 is meant, silence this with"
                       " warnings.filterwarnings('ignore', category=mg.PrecisionWarning)")
  want = x.astype(np.float32).sum(0)
  narrow = np.asarray(column_sums(x, interpret=True), np.float32)
  assert np.abs(narrow - want).max() > 0.5 * want.max()          # what it warns of: the sum stopped growing
  assert not _warned(lambda: column_sums.check(S((64, 128), x.dtype)))    # few trips: no warning
  wide = []
  assert not _warned(lambda: wide.append(column_sums(x, WIDE=True, interpret=True)))    # the hint followed
  np.testing.assert_allclose(np.asarray(wide[0], np.float32), want, rtol=1e-2)


def test_nested_loops_count_their_trips_together():
  ws = _warned(lambda: nested_sums.check(S((4096, 128), jnp.float16)))
  assert len(ws) == 1 and "acc (float16) adds a term on each of 4096 loop trips" in str(ws[0].message)
  assert ws[0].lineno == where(nested_sums, "acc += x.at")[0]
  assert not _warned(lambda: nested_sums.check(S((1024, 128), jnp.float16)))


# ---------------------------------------------------------------- one program id where another belongs (MG602's hint)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def tile_with_i_twice(x, out):
  i = ml.program_id(0)
  j = ml.program_id(1)
  out.at[ml.ds(i * 64, 64), ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], x.shape[1] // 64))
def batch_index_left_out(x, out):
  b = ml.program_id(0)
  i = ml.program_id(1)
  buf = ml.smem((64, 128), F32)
  ml.copy(x.at[b, ml.ds(i * 64, 64)], buf)
  ml.copy(buf, out.at[0, ml.ds(i * 64, 64)])


def _idle(a, n):
  return (f"ml.program_id({a}) steps no dimension of out's window: the {n} programs along grid axis {a} write the same"
          f" elements of out and leave the rest unwritten; index the dimension that axis should step with it, as the"
          f" other axes step theirs: out.at[ml.program_id({a}), ...] for one element of it a program,"
          f" ml.ds(ml.program_id({a}) * t, t) for tiles of t")


def test_a_program_id_that_steps_no_dimension_of_the_output():
  """MG602's hint said to launch ml.cdiv programs along the axis that steps the unwritten dimension: none does."""
  expect(tile_with_i_twice, [S((128, 256), F32)], mg.UncoveredOutputError, "out.at[",
         "out[0:64, 64:256] is never written: none of the 8 programs of grid (2, 4) writes it, so 24576 of 32768"
         " elements of out would stay uninitialised", hint=_idle(1, 4))
  expect(batch_index_left_out, [S((4, 128, 128), F32)], mg.UncoveredOutputError, "ml.copy(buf",
         "out[1:4, :, :] is never written: none of the 8 programs of grid (4, 2) writes it, so 49152 of 65536"
         " elements of out would stay uninitialised", hint=_idle(0, 4))
