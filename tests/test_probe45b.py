"""Probe 45b (tensor-core kernels a user writes by hand: batched, grouped and chained matmuls). An ml.dot
operand (or a copy's window) of an SMEM buffer at a run-time start proven a whole number of tiles (a grouped
GEMM's row start promised with ml.multiple_of, a ring of stages in one buffer at `(k % 2) * 64`, a K step
`kk * 64`, in a pipelined stage too) was MG204 or MG502 though WGMMA takes it; a start not proven one keeps
MG204, its hint writing the ml.multiple_of promise. Hints in the user's words: one conversion of a converted
A, ml.dot of 16-bit operands widened to float32 first, a bias vector as acc, a vector's row padded by TMA,
a ring kept by hand under stages=, an operand window past its buffer; and jax.lax.DotAlgorithmPreset."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text, marker):
  with open(__file__) as f:
    return next(line for line in f if marker in line and "_col_of" not in line).index(text)


def _rand(shape, seed, dtype=np.float16):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _f32(x):
  return np.asarray(x, np.float32)


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _specs(*arrays):
  return [S(x.shape, x.dtype) for x in arrays]


# ---------------------------------------------------------------- run-time windows of ml.dot operands
GROUPED = dict(out_shape=lambda a, b, rows: S((rows.shape[0] * 64, b.shape[1]), F32),
               grid=lambda a, b, rows: (rows.shape[0],))


@mg.mgpu_kernel(**GROUPED)
def grouped_promised(a, b, rows, c):
  """A grouped GEMM's tile list: program t multiplies the 64 rows of a starting at rows[t]."""
  t = ml.program_id(0)
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  r = ml.multiple_of(rows[t], 64)
  c.at[ml.ds(t * 64, 64)][...] = ml.dot(a_s.at[ml.ds(r, 64)], b_s)


@mg.mgpu_kernel(**GROUPED)
def grouped_unproven(a, b, rows, c):
  t = ml.program_id(0)
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  r = rows[t]
  c.at[ml.ds(t * 64, 64)][...] = ml.dot(a_s.at[ml.ds(r, 64)], b_s)      # the tile-list dot


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def flat_ring(a, b, c):
  """Two stages of A and B in one buffer each, stage k % 2 at rows (k % 2) * 64."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, 64)), ml.smem((128, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), F32)
  for k in range(a.shape[1] // 64):
    s = (k % 2) * 64
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s.at[ml.ds(s, 64)])
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s.at[ml.ds(s, 64)])
    acc = ml.dot(a_s.at[ml.ds(s, 64)], b_s.at[ml.ds(s, 64)], acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[1], b.shape[1]), F32), grid=lambda a, b: (a.shape[1] // 64,))
def transposed_window(a, b, c):
  """a.T @ b: a stored (k, m), each program's columns of it read transposed."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c.at[ml.ds(i * 64, 64)][...] = ml.dot(a_s.at[:, ml.ds(i * 64, 64)].T, b_s)


def test_dot_operands_at_run_time_starts_proven_whole_tiles_compute():
  a, b = _rand((256, 64), 1), _rand((64, 128), 2)
  rows = np.array([128, 0, 192], np.int32)
  want = np.concatenate([_f32(a[r:r + 64]) @ _f32(b) for r in rows])
  np.testing.assert_allclose(grouped_promised(a, b, rows, interpret=True), want, rtol=1e-5, atol=1e-4)
  mlir = _export(grouped_promised, *_specs(a, b, rows))
  assert "@mosaic_gpu" in mlir
  with pytest.raises(mg.InterpretError) as e:            # the promise is checked in interpret mode
    grouped_promised(a, b, np.array([128, 8, 192], np.int32), interpret=True)
  assert "ml.multiple_of promises a multiple of 64, but rows[t] is 8" in e.value.message
  a, b = _rand((128, 256), 3), _rand((256, 64), 4)
  np.testing.assert_allclose(flat_ring(a, b, interpret=True), _f32(a) @ _f32(b), rtol=1e-5, atol=1e-4)
  assert "@mosaic_gpu" in _export(flat_ring, *_specs(a, b))
  a, b = _rand((64, 128), 5), _rand((64, 64), 6)
  np.testing.assert_allclose(transposed_window(a, b, interpret=True), _f32(a).T @ _f32(b), rtol=1e-5, atol=1e-4)
  assert "@mosaic_gpu" in _export(transposed_window, *_specs(a, b))


def test_dot_operand_at_an_unproven_run_time_start_hints_ml_multiple_of():
  a, b, rows = _rand((256, 64), 1), _rand((64, 128), 2), np.array([128, 0, 192], np.int32)
  with pytest.raises(mg.LayoutError) as e:
    grouped_unproven.check(*_specs(a, b, rows))
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# the tile-list dot"), _col_of("a_s.at[ml.ds(r", "# the tile-list dot"))
  assert err.code == "MG204"
  assert err.message == "a_s.at[ml.ds(r, 64)] slices the rows or columns of a_s, which is tiled for the tensor cores"
  assert err.hint.startswith("a_s's tiles for the tensor cores are 8 rows by 64 columns, and this window's run-time"
                             " start is not provably a multiple of them: if it always is one, say so,"
                             " ml.ds(ml.multiple_of(r, 8), 64) (checked in interpret mode)")


# ---------------------------------------------------------------- chained GEMMs: the first result as the second's A
@mg.mgpu_kernel(out_shape=lambda a, b, w: S((a.shape[0], w.shape[1]), F32), grid=lambda a, b, w: (a.shape[0] // 64,))
def chained_bf16(a, b, w, o):
  i = ml.program_id(0)
  a_s, b_s, w_s = ml.smem((64, a.shape[1])), ml.smem(b.shape), ml.smem(w.shape)
  ml.copy(a.at[ml.ds(i * 64, 64)], a_s)
  ml.copy(b, b_s)
  ml.copy(w, w_s)
  p = ml.dot(a_s, b_s)
  o.at[ml.ds(i * 64, 64)][...] = ml.dot(p.astype(jnp.bfloat16), w_s)      # the second dot


@mg.mgpu_kernel(out_shape=lambda a, b, w: S((a.shape[0], w.shape[1]), F32), grid=lambda a, b, w: (a.shape[0] // 64,))
def chained(a, b, w, o):
  i = ml.program_id(0)
  a_s, b_s, w_s = ml.smem((64, a.shape[1])), ml.smem(b.shape), ml.smem(w.shape)
  ml.copy(a.at[ml.ds(i * 64, 64)], a_s)
  ml.copy(b, b_s)
  ml.copy(w, w_s)
  p = ml.dot(a_s, b_s)
  o.at[ml.ds(i * 64, 64)][...] = ml.dot(p.astype(jnp.float16), w_s)


def test_chained_dot_of_a_converted_result_hints_one_conversion():
  a, b, w = _rand((128, 64), 7), _rand((64, 128), 8), _rand((128, 64), 9)
  with pytest.raises(mg.DtypeMismatchError) as e:
    chained_bf16.check(*_specs(a, b, w))
  assert (e.value.lineno, e.value.col_offset) == (_line_of("# the second dot"), _col_of("ml.dot(p.astype", "# the second dot"))
  assert e.value.message == ("ml.dot of p.astype(jnp.bfloat16) (bfloat16) and w_s (float16): both operands must"
                             " have one dtype")
  assert e.value.hint == ("convert A to float16 in registers: ml.dot(p.astype(jnp.float16), w_s) (the tensor cores"
                          " read A from registers)")
  # the hint followed
  want = _f32((_f32(a) @ _f32(b)).astype(np.float16)) @ _f32(w)
  np.testing.assert_allclose(chained(a, b, w, interpret=True), want, rtol=1e-5, atol=1e-3)
  assert "@mosaic_gpu" in _export(chained, *_specs(a, b, w))


# ---------------------------------------------------------------- a product of operands widened to float32 first
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def widened_product(a, b, c):
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = jnp.dot(a_s[...].astype(jnp.float32), b_s[...].astype(jnp.float32))     # the widened dot


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def widened_product_hint_followed(a, b, c):
  a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


def test_a_product_of_16_bit_operands_widened_first_computes_as_ml_dot_of_the_buffers():
  """It was MG003 whose hint wrote ml.dot(a_s, b_s) (float16 products are exact in float32, where ml.dot
  accumulates them); since probe 48b the widened product computes as that call, and widened operands of two dtypes
  (float16 and bfloat16) as float32 (TF32) ones."""
  a, b = _rand((64, 64), 10), _rand((64, 64), 11)
  want = widened_product_hint_followed(a, b, interpret=True)
  np.testing.assert_allclose(want, _f32(a) @ _f32(b), rtol=1e-5, atol=1e-4)
  np.testing.assert_array_equal(widened_product(a, b, interpret=True), want)
  mixed = widened_product(a, b.astype(jnp.bfloat16), interpret=True)
  np.testing.assert_allclose(mixed, _f32(a) @ _f32(b.astype(jnp.bfloat16)), rtol=1e-2, atol=5e-2)


# ---------------------------------------------------------------- an accumulator started from a bias
@mg.mgpu_kernel(out_shape=lambda a, b, bias: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def bias_as_acc(a, b, bias, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s, bias[...])                     # the bias acc


@mg.mgpu_kernel(out_shape=lambda a, b, bias: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def bias_broadcast(a, b, bias, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s, ml.broadcast_to(bias[...], (64, 128))) - (ml.dot(a_s, b_s) + bias[...])


@mg.mgpu_kernel(out_shape=lambda a, b, bias: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def bias_started(a, b, bias, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s, ml.broadcast_to(bias[...], (64, 128)))


def test_a_bias_vector_as_ml_dots_acc_is_hinted_broadcast():
  a, b, bias = _rand((64, 64), 12), _rand((64, 128), 13), _rand((128,), 14, np.float32)
  with pytest.raises(mg.ShapeMismatchError) as e:
    bias_as_acc.check(*_specs(a, b, bias))
  assert (e.value.lineno, e.value.col_offset) == (_line_of("# the bias acc"), _col_of("ml.dot(a_s, b_s, bias", "# the bias acc"))
  assert e.value.message == "ml.dot's acc has shape (128,), but a_s @ b_s is (64, 128)"
  assert e.value.hint == ("bias[...] broadcasts to the product's shape: start the sum from it broadcast, ml.dot(a_s,"
                          " b_s, ml.broadcast_to(bias[...], (64, 128))), or add it to the product, ml.dot(a_s, b_s) +"
                          " bias[...]")
  with pytest.raises(mg.ShapeMismatchError) as e:        # a (m, n) tile of another shape keeps its hint
    bias_as_acc.check(*_specs(a, b, _rand((64, 64), 15, np.float32)))
  assert e.value.hint == "accumulate in a (64, 128) tensor: acc = ml.zeros((64, 128), jnp.float32)"
  # the hint's two ways agree, and compute the biased product
  np.testing.assert_allclose(bias_broadcast(a, b, bias, interpret=True), np.zeros((64, 128)), atol=1e-4)
  np.testing.assert_allclose(bias_started(a, b, bias, interpret=True), _f32(a) @ _f32(b) + bias, rtol=1e-5, atol=1e-4)
  assert "@mosaic_gpu" in _export(bias_broadcast, *_specs(a, b, bias))


@mg.mgpu_kernel(out_shape=lambda a, b, at: S((64, b.shape[1]), F32), grid=(1,))
def transposed_unproven(a, b, at, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s.at[:, ml.ds(at[0], 64)].T, b_s)            # the transposed window


@mg.mgpu_kernel(out_shape=lambda a, b, at: S((64, b.shape[1]), F32), grid=(1,))
def off_tile(a, b, at, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s.at[ml.ds(at[0] * 8 + 4, 64)], b_s)         # the off-tile window


def test_run_time_window_hints_promise_only_what_may_hold():
  specs = [S((64, 256), F16), S((64, 64), F16), S((1,), I32)]
  with pytest.raises(mg.LayoutError) as e:           # the start's words, through .T
    transposed_unproven.check(*specs)
  assert e.value.lineno == _line_of("# the transposed window")
  assert "if it always is one, say so, ml.ds(ml.multiple_of(at[0], 64), 64) (checked" in e.value.hint
  with pytest.raises(mg.LayoutError) as e:           # 4 rows past a multiple of 8: no promise can hold
    off_tile.check(S((256, 64), F16), *specs[1:])
  assert e.value.lineno == _line_of("# the off-tile window")
  assert "multiple_of" not in e.value.hint
  assert e.value.hint.endswith("take windows of whole tiles for ml.dot or ml.copy (starting and ending at"
                               " multiples of 8 rows and of 128 bytes of columns)")


# ---------------------------------------------------------------- matrix-vector on the tensor cores: the vector as 8 rows
@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0],), F32), grid=(1,))
def gemv_rows(a, x, y):
  a_s, x_s = ml.smem(a.shape), ml.smem((8, x.shape[1]))
  ml.copy(a, a_s)
  ml.copy(x, x_s)                                          # the one-row copy
  y[...] = ml.dot(a_s, x_s.T)[:, 0]


@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0],), F32), grid=(1,))
def gemv_rows_padded(a, x, y):
  a_s, x_s = ml.smem(a.shape), ml.smem((8, x.shape[1]))
  ml.copy(a, a_s)
  ml.copy(x.at[ml.ds(0, 8)], x_s)
  y[...] = ml.dot(a_s, x_s.T)[:, 0]


def test_a_vector_row_copied_into_an_8_row_operand_is_hinted_as_a_window_read_with_zeros():
  a, x = _rand((64, 64), 16), _rand((1, 64), 17)
  with pytest.raises(mg.CopyShapeError) as e:
    gemv_rows.check(*_specs(a, x))
  assert (e.value.lineno, e.value.col_offset) == (_line_of("# the one-row copy"), _col_of("ml.copy(x, x_s)", "# the one-row"))
  assert e.value.message == "cannot copy x (shape (1, 64)) into x_s (shape (8, 64)): shapes differ"
  assert e.value.hint == ("copy a window of x of x_s's shape, ml.copy(x.at[ml.ds(0, 8)], x_s): the TMA engine reads"
                          " zeros past x's end, so x_s's extra elements are 0")
  np.testing.assert_allclose(gemv_rows_padded(a, x, interpret=True), _f32(a) @ _f32(x)[0], rtol=1e-5, atol=1e-4)
  assert "@mosaic_gpu" in _export(gemv_rows_padded, *_specs(a, x))


# ---------------------------------------------------------------- a ring of stages kept by hand in a pipelined loop
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def hand_ring_pipelined(a, b, c):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((2, 64, 64)), ml.smem((2, 64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):                              # the ring's loop
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s.at[k % 2])          # the ring's load
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s.at[k % 2])
    acc = ml.dot(a_s.at[k % 2], b_s.at[k % 2], acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
def hand_ring_plain(a, b, c):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((2, 64, 64)), ml.smem((2, 64, b.shape[1]))
  acc = ml.zeros((64, b.shape[1]), F32)
  for k in ml.range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s.at[k % 2])
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s.at[k % 2])
    acc = ml.dot(a_s.at[k % 2], b_s.at[k % 2], acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


def test_a_ring_kept_by_hand_in_a_pipelined_loop_names_the_ring():
  a, b = _rand((128, 256), 18), _rand((256, 64), 19)
  with pytest.raises(mg.PipelineError) as e:
    hand_ring_pipelined.check(*_specs(a, b))
  err = e.value
  assert (err.lineno, err.col_offset) == (_line_of("# the ring's load"), _col_of("ml.copy(a.at", "# the ring's load"))
  assert err.message == ("this pipelined loop's TMA load fills a window of a_s picked by the loop index (a ring of"
                         " stages kept by hand), but ml.range(..., stages=2) keeps the ring itself: it pipelines"
                         " loads into a whole buffer (or static windows of one), of which it keeps 2 copies")
  assert err.hint == ("load each trip's tile into a whole buffer, a_s_k = ml.smem((64, 64)) before the loop and"
                      " ml.copy(..., a_s_k), and read that, leaving the stages to the loop; or keep your ring and"
                      " drop stages= for a plain loop, for k in ml.range(a.shape[1] // 64):")
  assert f"{_line_of('# the ring' + chr(39) + 's loop')}" in str(err)
  np.testing.assert_allclose(hand_ring_plain(a, b, interpret=True), _f32(a) @ _f32(b), rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- register reads of run-time windows of an operand
def _residual(steps):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
  def residual(a, b, c):
    a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
    ml.copy(a, a_s)
    ml.copy(b, b_s)
    c[...] = ml.dot(a_s, b_s)
    for t in steps(a.shape[0] // 64):
      c.at[ml.ds(t * 64, 64)][...] += a_s.at[ml.ds(t * 64, 64)][...].astype(jnp.float32)   # the residual read
  return residual


residual_run_time, residual_static = _residual(range), _residual(ml.static_range)


def test_a_register_read_of_a_run_time_window_of_an_operand_computes():
  """(It was MG204 with a static-window hint: Mosaic GPU's tiled transfers take a window of whole tiles at
  a run-time start, probe 45i.)"""
  a, b = _rand((128, 64), 20), _rand((64, 64), 21)
  want = _f32(a) @ _f32(b) + _f32(a)
  np.testing.assert_allclose(residual_run_time(a, b, interpret=True), want, rtol=1e-5, atol=1e-4)
  np.testing.assert_allclose(residual_static(a, b, interpret=True), want, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- one named window both loaded and multiplied
def _named_windows(steps):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
  def named_windows(a, b, c):
    i = ml.program_id(0)
    a_s, b_s = ml.smem((128, 64)), ml.smem((128, b.shape[1]))
    acc = ml.zeros((64, b.shape[1]), F32)
    for k in steps(a.shape[1] // 64):
      wa = a_s.at[ml.ds((k % 2) * 64, 64)]
      wb = b_s.at[ml.ds((k % 2) * 64, 64)]
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], wa)
      ml.copy(b.at[ml.ds(k * 64, 64)], wb)
      acc = ml.dot(wa, wb, acc)
    c.at[ml.ds(i * 64, 64)][...] = acc
  return named_windows


def test_a_window_named_once_and_both_loaded_and_multiplied_computes():
  """(MG204 before, static windows too: a view both ml.copy and ml.dot used was taken for neither.)"""
  a, b = _rand((128, 256), 22), _rand((256, 64), 23)
  for kernel in (_named_windows(ml.static_range), _named_windows(range)):
    np.testing.assert_allclose(kernel(a, b, interpret=True), _f32(a) @ _f32(b), rtol=1e-5, atol=1e-4)
    assert "@mosaic_gpu" in _export(kernel, *_specs(a, b))


# ---------------------------------------------------------------- a dot result copied out of a run-time window
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 128, 2))
def result_halves(a, b, c):
  """Each of two programs computes the same 128-row product and copies out its half, rows h * 64."""
  i, h = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, a.shape[1])), ml.smem(b.shape)
  ml.copy(a.at[ml.ds(i * 128, 128)], a_s)
  ml.copy(b, b_s)
  res = ml.smem((128, b.shape[1]), F32)
  res[...] = ml.dot(a_s, b_s)
  ml.copy(res.at[ml.ds(h * 64, 64)], c.at[ml.ds(i * 128 + h * 64, 64)])


def test_a_dot_results_buffer_copied_out_of_a_run_time_window_computes():
  a, b = _rand((256, 64), 24), _rand((64, 64), 25)
  np.testing.assert_allclose(result_halves(a, b, interpret=True), _f32(a) @ _f32(b), rtol=1e-5, atol=1e-4)
  assert "@mosaic_gpu" in _export(result_halves, *_specs(a, b))


# ---------------------------------------------------------------- a pipelined stage's K split into steps
def _stage_steps(steps, stages, ws=False):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b: (a.shape[0] // 64,))
  def stage_steps(a, b, c):
    i = ml.program_id(0)
    a_s, b_s = ml.smem((64, 128)), ml.smem((128, b.shape[1]))
    acc = ml.zeros((64, b.shape[1]), F32)
    for k in ml.range(a.shape[1] // 128, stages=stages, warp_specialize=ws):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 128, 128)], a_s)
      ml.copy(b.at[ml.ds(k * 128, 128)], b_s)
      for kk in steps(2):
        acc = ml.dot(a_s.at[:, ml.ds(kk * 64, 64)], b_s.at[ml.ds(kk * 64, 64)], acc)
    c.at[ml.ds(i * 64, 64)][...] = acc
  return stage_steps


STAGE_STEPS = [_stage_steps(ml.static_range, 2), _stage_steps(range, 3), _stage_steps(range, 2, ws=True)]


def test_windows_of_a_pipelined_stage_that_ml_dot_reads_compute():
  """(MG502 before, 'the loop may only read it whole': windows of each trip's stage now.)"""
  a, b = _rand((128, 512), 28), _rand((512, 64), 29)
  for kernel in STAGE_STEPS:
    np.testing.assert_allclose(kernel(a, b, interpret=True), _f32(a) @ _f32(b), rtol=1e-4, atol=1e-3)
    assert "@mosaic_gpu" in _export(kernel, *_specs(a, b))


# ---------------------------------------------------------------- an operand window past its buffer's end
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, b.shape[1]), F32), grid=(1,))
def k_steps_past_the_end(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), F32)
  for kk in range(5):
    acc = ml.dot(a_s.at[:, ml.ds(kk * 64, 64)], b_s.at[ml.ds(kk * 64, 64)], acc)     # the fifth step
  c[...] = acc


def test_an_operand_window_past_its_buffers_end_is_hinted_with_its_start():
  with pytest.raises(mg.IndexOutOfBoundsError) as e:
    k_steps_past_the_end.check(S((64, 256), F16), S((256, 64), F16))
  assert (e.value.lineno, e.value.col_offset) == (_line_of("# the fifth step"), _col_of("ml.dot(a_s", "# the fifth"))
  assert e.value.message == ("this ml.dot operand touches a_s[0:64, 256:320] when kk = 4, outside a_s's shape"
                             " (64, 256)")
  assert e.value.hint == ("guard the access (if kk * 64 + 64 <= 256:) or clamp its start (ml.minimum(kk * 64,"
                          " 192)); windows of an SMEM buffer must stay inside it")


# ---------------------------------------------------------------- jax.lax.DotAlgorithmPreset as precision=
def _preset_dot(preset, transposed=False):
  @mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0] if transposed else b.shape[1]), F32), grid=(1,))
  def preset_dot(a, b, c):
    a_s, b_s = ml.smem(a.shape, a.dtype), ml.smem(b.shape, b.dtype)
    ml.copy(a, a_s)
    ml.copy(b, b_s)
    c[...] = ml.dot(a_s, b_s.T if transposed else b_s, precision=preset).astype(jnp.float32)   # the preset dot
  return preset_dot


def test_dot_algorithm_presets_as_jax_users_write_them():
  P = jax.lax.DotAlgorithmPreset
  a, b = _rand((64, 64), 26), _rand((64, 64), 27)
  want = _f32(a) @ _f32(b)
  for preset in (P.F16_F16_F32, "F16_F16_F32", P.DEFAULT):       # what the tensor cores do with float16 operands
    np.testing.assert_allclose(_preset_dot(preset)(a, b, interpret=True), want, rtol=1e-5, atol=1e-4)
  typed = _preset_dot(P.F16_F16_F16).typed_ir(*_specs(a, b))     # a float16 accumulator, as asked
  assert "tensor<64x64, float16, wgmma> = dot" in typed
  assert "@mosaic_gpu" in _export(_preset_dot(P.F16_F16_F16), *_specs(a, b))
  x, y = a.astype(np.float32), b.astype(np.float32)               # (float16 values: exact in TF32)
  np.testing.assert_allclose(_preset_dot(P.TF32_TF32_F32, True)(x, y, interpret=True), x @ y.T, rtol=1e-5, atol=1e-4)
  with pytest.raises(mg.KernelTypeError) as e:                     # bfloat16 products of float16 operands
    _preset_dot(P.BF16_BF16_F32).check(*_specs(a, b))
  assert e.value.lineno == _line_of("# the preset dot")
  assert e.value.message == ("ml.dot's precision=DotAlgorithmPreset.BF16_BF16_F32 multiplies bfloat16 operands, but"
                             " a_s is float16")
  assert e.value.hint == ("drop precision=: the tensor cores read float16 operands exactly (or convert the operands"
                          " to bfloat16 before the call)")
  with pytest.raises(mg.UnsupportedDtypeError) as e:               # more than TF32 of float32 operands
    _preset_dot(P.F32_F32_F32, True).check(*_specs(x, y))
  assert e.value.message.startswith("ml.dot with precision=DotAlgorithmPreset.F32_F32_F32: it asks for float32"
                                    " operands exactly, which the tensor cores do not compute")
  assert "Triton's tf32x3" in e.value.hint


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_dot_operands_and_copies_at_run_time_window_starts_match_numpy():
  a, b = _rand((256, 64), 1), _rand((64, 128), 2)
  rows = np.array([128, 0, 192, 64], np.int32)
  want = np.concatenate([_f32(a[r:r + 64]) @ _f32(b) for r in rows])
  np.testing.assert_allclose(grouped_promised(a, b, rows), want, rtol=1e-3, atol=1e-2)
  a, b = _rand((128, 256), 3), _rand((256, 64), 4)
  np.testing.assert_allclose(flat_ring(a, b), _f32(a) @ _f32(b), rtol=1e-3, atol=1e-2)
  np.testing.assert_allclose(_named_windows(range)(a, b), _f32(a) @ _f32(b), rtol=1e-3, atol=1e-2)
  a, b = _rand((64, 128), 5), _rand((64, 64), 6)
  np.testing.assert_allclose(transposed_window(a, b), _f32(a).T @ _f32(b), rtol=1e-3, atol=1e-2)
  a, b = _rand((256, 64), 24), _rand((64, 64), 25)
  np.testing.assert_allclose(result_halves(a, b), _f32(a) @ _f32(b), rtol=1e-3, atol=1e-2)
  a, b = _rand((128, 512), 28), _rand((512, 64), 29)
  for kernel in STAGE_STEPS:
    np.testing.assert_allclose(kernel(a, b), _f32(a) @ _f32(b), rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_gpu_hints_followed_chained_and_biased_products_match_numpy():
  a, b, w = _rand((128, 64), 7), _rand((64, 128), 8), _rand((128, 64), 9)
  want = _f32((_f32(a) @ _f32(b)).astype(np.float16)) @ _f32(w)
  np.testing.assert_allclose(chained(a, b, w), want, rtol=1e-2, atol=5e-2)
  a, b, bias = _rand((64, 64), 12), _rand((64, 128), 13), _rand((128,), 14, np.float32)
  np.testing.assert_allclose(bias_started(a, b, bias), _f32(a) @ _f32(b) + bias, rtol=1e-3, atol=1e-2)


@pytest.mark.gpu
def test_gpu_gemv_row_window_past_the_vectors_end_reads_zeros():
  """(A TMA load of an 8-row window of a 1-row array: rows 1 to 7 lie past its end.)"""
  a, x = _rand((64, 64), 16), _rand((1, 64), 17)
  np.testing.assert_allclose(gemv_rows_padded(a, x), _f32(a) @ _f32(x)[0], rtol=1e-3, atol=1e-2)
