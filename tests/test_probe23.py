"""Probe 23 (helpers writing kernels from the docs: LLM inference kernels, sequence kernels,
matmul variants, vision and statistics kernels, kernels as JAX citizens): messages that named the
wrong thing or hinted at a second error, calls reported away from the call, valid kernels
rejected, 8-bit selects. The second part is tests/test_probe23b.py."""
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
BF16 = jnp.bfloat16
I32, U32 = jnp.int32, jnp.uint32


def _line_of(text):
  """The line of this file holding `text` (a call made in a test)."""
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _raises(fn):
  with pytest.raises(mg.KernelError) as info:
    fn()
  return info.value


# ---------------------------------------------------------------- calls
@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=(1,))
def scaled(x, a: ml.scalar, out):
  out[...] = x[...] * a


def test_a_run_time_scalar_by_keyword_is_taken_in_its_place():
  """`scaled(x, a=2.0)` was MG006 (passed by position, not by keyword); probe 38g: an input by
  keyword is taken, as a Python function takes it; one given twice is named."""
  x = jnp.ones((128,), F32)
  np.testing.assert_array_equal(scaled(x, a=2.0, interpret=True), x * 2)
  np.testing.assert_array_equal(scaled(a=2.0, x=x, interpret=True), x * 2)
  e = _raises(lambda: scaled(x, 2.0, a=2.0, interpret=True))  # scalar-twice
  assert type(e) is mg.SignatureError
  assert e.message == "scaled: input a is given twice, by position and by keyword"
  assert e.hint == "a is input 1, given by position already: drop a="
  assert e.lineno == _line_of("# scalar-twice")


@mg.autotune(configs=[dict(bs=256), dict(bs=128)])
@mg.mgpu_kernel(out_shape=lambda x, *, bs: x, grid=lambda x, *, bs: (x.shape[0] // bs,))
def tuned_inc(x, out, *, bs: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bs, bs)][...] = x.at[ml.ds(i * bs, bs)][...] + 1.0


def test_a_tuned_constexpr_passed_at_the_call_is_reported_at_the_call():
  x = jnp.ones((1024,), F32)
  e = _raises(lambda: tuned_inc(x, bs=128, interpret=True))  # tuned-at-call
  assert e.message == "tuned_inc: bs is chosen by @mg.autotune"
  assert (e.filename, e.lineno) == (__file__, _line_of("# tuned-at-call"))


class _Layer:
  @mg.mgpu_kernel(out_shape=lambda self, x: x, grid=(1,))
  def forward(self, x, out):
    out[...] = x[...] * 2.0


def test_a_kernel_written_as_a_method_says_kernels_bind_no_self():
  x = jnp.ones((128,), F32)
  for call in (lambda: _Layer().forward(x, interpret=True), lambda: _Layer.forward(_Layer(), x, interpret=True)):
    e = _raises(call)
    assert type(e) is mg.SignatureError
    assert e.message == ("forward's first parameter is self, but a kernel is not a method: it binds no self"
                         " (every parameter is an array)")
    assert "@staticmethod" in e.hint


_W = jnp.arange(128, dtype=F32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def times_global(x, out):
  out[...] = x[...] * _W


def test_an_array_closed_over_says_pass_it_as_an_input():
  e = expect(times_global, [S((128,), F32)], mg.KernelTypeError, "x[...] * _W",
             "* cannot take an array from outside the kernel (float32[128])")
  assert e.hint == "pass the array to the kernel as an input (kernels read arrays through their parameters)"


@mg.mgpu_kernel(out_shape=lambda x, flip: x, grid=(1,))
def maybe_negated(x, flip: ml.scalar, out):
  v = x[...]
  out[...] = ml.where(flip, -v, v)


@mg.mgpu_kernel(out_shape=lambda x, flip: x, grid=(1,))
def maybe_negated_int(x, flip: ml.scalar, out):
  v = x[...]
  out[...] = ml.where(flip != 0, -v, v)


def test_a_bool_flag_hints_an_int_and_a_comparison_that_work():
  x = jnp.arange(128, dtype=F32)
  for flag in (True, False):      # a 0-d bool array is a flag (session 21: bool arrays in memory),
    for f in (jnp.bool_(flag), flag):     # and so is a Python bool (probe 31c: it was MG006, hinting int(flip))
      got = maybe_negated(x, f, interpret=True)
      np.testing.assert_array_equal(np.asarray(got), -np.asarray(x) if flag else np.asarray(x))
  for flag in (0, 1, 7):      # an int flag is its truth, as jnp.where's (probe 38g: it was MG003)
    want = -np.asarray(x) if flag else np.asarray(x)
    np.testing.assert_array_equal(maybe_negated(x, jnp.int32(flag), interpret=True), want)
    np.testing.assert_array_equal(maybe_negated_int(x, flag, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 128,))
def mixed_add(x, y, out):
  r = ml.ds(ml.program_id(0) * 128, 128)
  out.at[r][...] = x.at[r][...] + y.at[r][...]


def test_a_mistake_the_arguments_cause_names_the_call_and_its_arguments():
  e = _raises(lambda: mixed_add(jnp.ones((256,), I32), jnp.ones((256,), U32), interpret=True))  # the-call
  assert type(e) is mg.DtypeMismatchError      # (int32 with uint32: int64 in jnp; float32 with bfloat16 adds, 47b)
  assert e.notes[-1] == f"{__file__}:{_line_of('# the-call')}:22: the call (x: int32[256], y: uint32[256])"


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def plus_one(x, out):
  out[...] = x[...] + 1.0


def test_exporting_interpret_mode_for_the_cpu_is_a_kernel_error():
  for platforms in (["cpu"], ["cuda", "cpu"]):
    with pytest.raises(mg.SignatureError, match="runs in interpret mode, a host callback, which jax.export"):
      jax.export.export(jax.jit(lambda v: plus_one(v, interpret=True)), platforms=platforms)(S((128,), F32))
  exported = jax.export.export(jax.jit(lambda v: plus_one(v, interpret=True)), platforms=["cuda"])(S((128,), F32))
  assert "mosaic_gpu" in exported.mlir_module()


# ---------------------------------------------------------------- hints that led to a second error
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 8,))
def rowmax_512(x, out):
  i = ml.program_id(0)
  buf = ml.smem((8, 512), x.dtype)
  ml.copy(x.at[ml.ds(i * 8, 8), :], buf)
  out.at[ml.ds(i * 8, 8)][...] = ml.max(buf[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0] // 8,))
def rowmax_split(x, out):      # the hint followed: x viewed as (n, 2, 256)
  i = ml.program_id(0)
  buf = ml.smem((8, 2, 256), x.dtype)
  ml.copy(x.at[ml.ds(i * 8, 8)], buf)
  out.at[ml.ds(i * 8, 8)][...] = ml.maximum(ml.max(buf.at[:, 0][...], axis=1), ml.max(buf.at[:, 1][...], axis=1))


def test_a_tma_window_too_wide_in_its_last_dimension_hints_a_split_that_works():
  """The (8, 512) window was MG401 (hinted as x viewed (n, 2, 256)); it is that box since probe 56c."""
  x = rand.normal(rand.key(0), (64, 512), F32)
  np.testing.assert_array_equal(rowmax_512(x, interpret=True), x.max(axis=1))
  np.testing.assert_array_equal(rowmax_split(x.reshape(64, 2, 256), interpret=True), x.max(axis=1))


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=(1,))
def recurrence_from_minus_one(a, b, out):
  for t in range(a.shape[0]):
    prev = out.at[t - 1][...]
    out.at[t][...] = a.at[t][...] * prev + b.at[t][...]


def test_a_read_before_the_start_names_the_trip_and_does_not_hint_a_clamp_of_an_output():
  e = expect(recurrence_from_minus_one, [S((16, 128), F32)] * 2, mg.IndexOutOfBoundsError, "out.at[t - 1]",
             "this register read touches out[-1:0, 0:128] when t = 0, outside out's shape (16, 128)")
  assert "clamp" not in e.hint     # a clamped read of an output reads what no program wrote (MG601)


@mg.mgpu_kernel(out_shape=lambda A, B: S((64,), F32), grid=(1,))
def exp_times_row(A, B, y):
  Aj = A[...]
  h = ml.exp(Aj) * B[...][None, :]
  y[...] = ml.sum(h, axis=1)


def test_a_reduction_of_a_16_column_tile_compiles():
  builds(exp_times_row, S((64, 16), F32), S((16,), F32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.int32), grid=(1,))
def shifted_int8(x, out):
  v = x.at[ml.ds(-1, 128)].load(mask=ml.arange(128) >= 1, other=0.0)
  out[...] = v.astype(jnp.int32)


def test_a_whole_number_float_other_on_an_int_load_is_that_integer():
  x = jnp.arange(128, dtype=jnp.int8)
  want = np.concatenate([[0], np.arange(127)]).astype(np.int32)
  np.testing.assert_array_equal(shifted_int8(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,))
def register_a_f32(a, b, out):
  b_s = ml.smem((64, 64), b.dtype)
  ml.copy(b, b_s)
  out[...] = ml.dot(a[...].astype(jnp.float32), b_s)


def test_a_register_operand_hint_converts_once_to_bs_dtype():
  e = expect(register_a_f32, [S((64, 64), BF16)] * 2, mg.UnsupportedDtypeError, "ml.dot(",
             "ml.dot takes operand a from registers in bfloat16 or float16 only, got a[...].astype(jnp.float32)"
             " (float32)")
  assert e.hint == "convert it to b's dtype: ml.dot(a[...].astype(jnp.bfloat16), ...)"


@mg.mgpu_kernel(out_shape=lambda w, x: S((64, x.shape[0]), F32), grid=(1,))
def gemv_n5(w, x, out):
  w_s, x_s = ml.smem((64, 64), w.dtype), ml.smem((5, 64), x.dtype)
  ml.copy(w, w_s)
  ml.copy(x, x_s)
  out[...] = ml.dot(w_s, x_s.T)


def test_a_dot_too_narrow_hints_padding_n():
  e = expect(gemv_n5, [S((64, 64), BF16), S((5, 64), BF16)], mg.MmaOperandError, "ml.dot(",
             "ml.dot needs n (columns of b) to be a multiple of 8 and at most 256, got 5")
  assert e.hint.startswith("pad n to a multiple of 8: a x_s tile of 8 rows (b is stored (n, k), passed transposed)")


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 128), F32))
def two_window_mistakes(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for k in range(2):
    ml.copy(a.at[:, ml.ds(k * 68, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(k * 68, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def test_independent_window_mistakes_are_reported_together_in_source_order():
  # (b's window started inside a tile's rows, ml.ds(k * 68, 64), until probe 46c made such loads rows of
  # tiles; then its columns started inside a tile, a second mistake, until probe 60a loaded such windows a tile
  # at a time: what is left of it is its start's 16-byte misalignment, which the check of a's reports first)
  with pytest.raises(mg.TmaLimitError) as info:
    two_window_mistakes.check(S((64, 256), BF16), S((256, 256), BF16))
  lines = [x.lineno for x in info.value.errors]
  first = inspect.getsourcelines(two_window_mistakes.fn)[1]
  assert lines == [first + 5]
  with pytest.raises(mg.TmaLimitError, match="16-byte boundary") as info:
    b_misaligned.check(S((64, 256), BF16), S((256, 256), BF16))
  assert [x.lineno for x in info.value.errors] == [inspect.getsourcelines(b_misaligned.fn)[1] + 6]


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 128), F32))
def b_misaligned(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for k in range(2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(k * 68, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


# ---------------------------------------------------------------- atomic max/min meet NaN as the hardware does
@mg.mgpu_kernel(out_shape=lambda x, init: init, grid=lambda x, init: (x.shape[0],), input_output_aliases={1: 0})
def column_min_atomic(x, init, out):
  ml.atomic_min(out, x.at[ml.program_id(0)][...])


@mg.mgpu_kernel(out_shape=lambda x, init: init, grid=lambda x, init: (x.shape[0],), input_output_aliases={1: 0})
def column_max_atomic(x, init, out):
  ml.atomic_max(out, x.at[ml.program_id(0)][...])


@mg.mgpu_kernel(out_shape=lambda x, init: init, grid=lambda x, init: (x.shape[0],), input_output_aliases={1: 0})
def column_max_tma(x, init, out):
  s = ml.smem((x.shape[1],), x.dtype)
  s[...] = x.at[ml.program_id(0)][...]
  ml.copy(s, out, reduce="max")


_NAN_CASES = [(k, d) for k in (column_min_atomic, column_max_atomic, column_max_tma)
              for d in (jnp.float16, BF16)]      # (float32 max and min atomics: MG106)


def _nan_rows(dtype):
  x = rand.normal(rand.key(3), (4, 256), F32)
  x = x.at[0].set(jnp.nan).at[2, :64].set(jnp.nan)          # a NaN row, and NaN columns in another
  return x.astype(dtype), jnp.full((256,), jnp.nan, dtype).at[128:].set(0.5)


def _nan_ignoring(kernel, x, init):
  f = np.fmin if kernel is column_min_atomic else np.fmax
  return f(f.reduce(np.asarray(x, np.float32), axis=0), np.asarray(init, np.float32))


@pytest.mark.parametrize("kernel, dtype", _NAN_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_atomic_max_and_min_take_the_operand_that_is_not_nan(kernel, dtype):
  x, init = _nan_rows(dtype)
  got = np.asarray(kernel(x, init, interpret=True), np.float32)
  np.testing.assert_array_equal(got, _nan_ignoring(kernel, x, init))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, dtype", _NAN_CASES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_atomic_max_and_min_with_nan_match_the_gpu(kernel, dtype):
  x, init = _nan_rows(dtype)
  gpu = np.asarray(kernel(x, init), np.float32)
  np.testing.assert_array_equal(gpu, np.asarray(kernel(x, init, interpret=True), np.float32))


# ---------------------------------------------------------------- columns of one, short SMEM vectors, reductions' hints
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 1), x.dtype))
def column_of_one_doubled(x, out):
  out.at[:, 0][...] = x.at[:, 0][...] * 2


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def column_of_one_sum(x, out):
  out[...] = ml.sum(x.at[:, 0][...])


@pytest.mark.parametrize("n", [8, 64, 1000])
def test_an_n_by_1_column_read_as_a_vector_is_contiguous(n):
  x = jnp.arange(n, dtype=F32).reshape(n, 1)
  np.testing.assert_array_equal(column_of_one_doubled(x, interpret=True), x * 2)
  assert float(column_of_one_sum(x, interpret=True)) == float(x.sum())
  for k in (column_of_one_doubled, column_of_one_sum):
    assert "mosaic_gpu" in jax.export.export(jax.jit(k), platforms=["cuda"])(S((n, 1), F32)).mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("n", [8, 64, 1000])
def test_an_n_by_1_column_read_as_a_vector_on_the_gpu(n):
  x = jnp.arange(n, dtype=F32).reshape(n, 1)
  np.testing.assert_array_equal(column_of_one_doubled(x), x * 2)
  assert float(column_of_one_sum(x)) == float(x.sum())


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def row_sums_through_smem(x, rs):
  r_s = ml.smem((x.shape[0],), F32)
  r_s[...] = ml.sum(x[...], axis=1)
  rs[...] = r_s[...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def row_sums_through_padded_smem(x, rs):     # the hint, followed
  r_s = ml.smem((8,), F32)
  r_s[...] = ml.zeros((8,), F32)
  r_s.at[ml.ds(0, 4)][...] = ml.sum(x[...], axis=1)
  rs.at[ml.ds(0, 8)].store(r_s[...] * 2.0, mask=ml.arange(8) < 4)


def test_a_short_vector_read_from_smem_hints_padding_the_buffer():
  """A (4,) SMEM buffer of row sums read back whole was MG204 ("r_s[...] has shape (4,): a 1-D register vector needs
  a multiple of 8 elements"), whose hint padded the buffer to 8 (row_sums_through_padded_smem); since probe 72a the
  padded trace stores it by a masked scatter and reads it back element by element, so it computes as written."""
  x = rand.normal(rand.key(1), (4, 128), F32)
  np.testing.assert_allclose(row_sums_through_smem(x, interpret=True), np.asarray(x).sum(axis=1) * 2, rtol=1e-5)
  np.testing.assert_allclose(row_sums_through_padded_smem(x, interpret=True), x.sum(axis=1) * 2, rtol=1e-5)
  jax.export.export(jax.jit(row_sums_through_padded_smem), platforms=["cuda"])(S((4, 128), F32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def max_of_two_by_reduction(x, out):
  v = x[...]
  out[...] = ml.max(v, v * 0.1)


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def python_max_of_a_tensor(x, out):
  out[...] = max(x[...])


def test_reductions_given_two_tensors_or_pythons_max_hint_what_was_meant():
  e = expect(max_of_two_by_reduction, [S((8, 128), F32)], mg.KernelTypeError, "ml.max(",
             "ml.max: axis must be a static int or a tuple of them, got a register tensor")
  # the operands as written since probe 60b (it said ml.maximum(a, b))
  assert e.hint == "ml.max reduces one tensor; the elementwise max of two is ml.maximum(v, v * 0.1)"
  e = expect(python_max_of_a_tensor, [S((8, 128), F32)], mg.KernelTypeError, "max(x",
             "max(...) of one register value is Python's iteration, which kernels do not do")
  assert e.hint.startswith("reduce it with ml.max(x[...])")


# ---------------------------------------------------------------- 8-bit order, max, min and select (in 32 bits)
@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, jnp.int8),) * 4 + (a,) * 4, grid=(1,))
def eight_bit_ops(a, b, gt, le, lt_b, ge_b, mx, mn, sel, clipped):
  x, y = a[...], b[...]
  gt[...] = (x > 101).astype(jnp.int8)      # (101 rounds to 104 in float8_e4m3fn, as jnp's weak typing)
  le[...] = (x <= 3).astype(jnp.int8)
  lt_b[...] = (x < y).astype(jnp.int8)
  ge_b[...] = (x >= y).astype(jnp.int8)
  mx[...] = ml.maximum(x, y)
  mn[...] = ml.minimum(x, 7.5 if x.dtype == jnp.float8_e4m3fn else 7)
  sel[...] = ml.where(x != y, x, y)
  clipped[...] = ml.clip(x, 16, 100)


def _eight_bit_inputs(dtype):
  k = rand.split(rand.key(5), 2)
  if jnp.issubdtype(dtype, jnp.integer):
    info = jnp.iinfo(dtype)
    return [rand.randint(kk, (8, 128), info.min, info.max + 1, jnp.int32).astype(dtype) for kk in k]
  return [(rand.normal(kk, (8, 128), F32) * 50).astype(dtype) for kk in k]


def _eight_bit_want(a, b):
  i8 = lambda m: m.astype(jnp.int8)         # jnp, in the 8-bit type (100 is 96 in float8_e4m3fn)
  return [i8(a > 101), i8(a <= 3), i8(a < b), i8(a >= b), jnp.maximum(a, b),
          jnp.minimum(a, 7.5 if a.dtype == jnp.float8_e4m3fn else 7),
          jnp.where(a != b, a, b), jnp.clip(a, 16, 100)]


@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.float8_e4m3fn], ids=str)
def test_eight_bit_comparisons_max_min_and_selects_compute_exactly(dtype):
  a, b = _eight_bit_inputs(dtype)
  got = eight_bit_ops(a, b, interpret=True)
  for g, w in zip(got, _eight_bit_want(a, b)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))
  assert "mosaic_gpu" in jax.export.export(jax.jit(eight_bit_ops), platforms=["cuda"])(
      S((8, 128), dtype), S((8, 128), dtype)).mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.uint8, jnp.int8, jnp.float8_e4m3fn], ids=str)
def test_eight_bit_comparisons_max_min_and_selects_on_the_gpu(dtype):
  a, b = _eight_bit_inputs(dtype)
  for g, w in zip(eight_bit_ops(a, b), _eight_bit_want(a, b)):
    np.testing.assert_array_equal(np.asarray(g, np.float32), np.asarray(w, np.float32))


@mg.mgpu_kernel(out_shape=lambda x, lo, hi: x, grid=(1,))
def clip_bf16_by_f32(x, lo: ml.scalar, hi: ml.scalar, out):
  out[...] = ml.clip(x[...], lo, hi)


def test_a_clip_dtype_mistake_names_ml_clip():
  expect(clip_bf16_by_f32, [S((128,), BF16), S((), F32), S((), F32)], mg.DtypeMismatchError, "ml.clip(",
             "ml.clip on x[...] (bfloat16) and lo (float32): dtypes differ and are never converted implicitly")


# ---------------------------------------------------------------- 4-D arrays: broadcasts, gathers, races
@mg.mgpu_kernel(out_shape=lambda img, bias: img, grid=(1,))
def add_bias_4d(img, bias, y):
  y[...] = img[...] + bias[...]


@mg.mgpu_kernel(out_shape=lambda img, bias: img, grid=(1,))
def add_bias_4d_in_loops(img, bias, y):     # the hint, followed
  for i in ml.static_range(2):
    for j in ml.static_range(4):
      y.at[i, j][...] = img.at[i, j][...] + bias.at[0, 0][...]


def test_a_4d_broadcast_hints_loops_over_both_leading_axes_with_the_users_names():
  # (a (1, 1, 1, 32) bias, 32 elements, is read whole as their vector since probe 45a, and broadcasts: one of 160
  # elements, more than a warpgroup's threads, keeps the MG204)
  e = expect(add_bias_4d, [S((2, 4, 16, 160), F32), S((1, 1, 1, 160), F32)], mg.LayoutError, "img[...] + bias",
             "broadcasting bias[...] of shape (1, 1, 1, 160) to (2, 4, 16, 160): broadcasting works into 1-D and"
             " 2-D tensors, not 4-D ones (a register tile keeps its rows in fixed threads)")
  assert "for i in ml.static_range(2): for j in ml.static_range(4):" in e.hint
  assert "bias.at[0, 0][...]" in e.hint
  img = rand.normal(rand.key(0), (2, 4, 16, 32), F32)
  bias = rand.normal(rand.key(1), (1, 1, 1, 32), F32)
  np.testing.assert_array_equal(add_bias_4d_in_loops(img, bias, interpret=True), img + bias)
  np.testing.assert_array_equal(add_bias_4d(img, bias, interpret=True), img + bias)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1], 8, 32), x.dtype), grid=lambda x: (x.shape[0],))
def resize_nchw_3d(x, out):
  n = ml.program_id(0)
  hi = ml.arange(8) * x.shape[2] // 8
  wi = ml.arange(32) * x.shape[3] // 32
  out.at[n][...] = x.at[n][:, hi[:, None], wi[None, :]]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1], 8, 32), x.dtype), grid=lambda x: (x.shape[0],))
def resize_nchw_2d(x, out):      # the hint, followed
  n = ml.program_id(0)
  hi = ml.arange(8) * x.shape[2] // 8
  wi = ml.arange(32) * x.shape[3] // 32
  for c in ml.static_range(x.shape[1]):
    out.at[n, c][...] = x.at[n][c, hi[:, None], wi[None, :]]


def test_a_3d_gather_is_reported_as_a_gather_with_a_loop_that_works():
  e = expect(resize_nchw_3d, [S((2, 4, 8, 16), F32)], mg.LayoutError, "x.at[n][:",
             "this gather gives a 3-D result (4, 8, 32): a gather (its index grids broadcast together) gives"
             " 1-D and 2-D tensors")
  assert e.hint.startswith("take dimension 0 in an ml.static_range loop")
  x = rand.normal(rand.key(2), (2, 4, 8, 16), F32)
  hi, wi = np.arange(8) * 8 // 8, np.arange(32) * 16 // 32
  np.testing.assert_array_equal(resize_nchw_2d(x, interpret=True), np.asarray(x)[:, :, hi[:, None], wi[None, :]])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2) + x.shape[2:], x.dtype),
                grid=lambda x: (x.shape[0], x.shape[1]))
def pool_over_input_rows(x, out):
  n, h = ml.program_id(0), ml.program_id(1)
  out.at[n, h // 2][...] = x.at[n, h][...]


def test_a_race_between_programs_of_one_grid_axis_names_that_axis():
  x = jnp.ones((2, 8, 16, 32), F32)
  e = _raises(lambda: pool_over_input_rows(x, interpret=True))
  assert type(e) is mg.RaceError
  assert e.hint.startswith("programs (0, 0, 0) and (0, 1, 0) differ only along grid axis 1")
  assert "ml.program_id(1)" in e.hint
