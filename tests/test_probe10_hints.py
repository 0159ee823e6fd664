"""A newcomer probe's hints that did not fix the kernel when followed literally (probe 10,
hints): each hint, checked as printed, and where it suggests code, that code builds."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from locate import expect, expect_call, where
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, BF16, F16 = jnp.float32, jnp.bfloat16, jnp.float16


def exports(kernel, *specs, **constexprs):
  """The kernel builds for the GPU: its typed IR, and a CUDA export of a call."""
  kernel.typed_ir(*specs, **constexprs)
  f = jax.jit(lambda *a: kernel(*a, **constexprs))
  assert "mosaic_gpu" in jax.export.export(f, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- 1. MG203: a mask of the window's rank
ROWS = S((60, 256), F32)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 8 - 1) // 8,), block=256)
def softmax_rows(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...]
  e = ml.exp(v - ml.max(v, axis=1, keepdims=True))
  out.at[ml.ds(i * 8, 8), :][...] = e / ml.sum(e, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 8 - 1) // 8,), block=256)
def softmax_rows_masked(x, out):          # the hint, followed
  i = ml.program_id(0)
  start = i * 8
  v = x.at[ml.ds(i * 8, 8), :].load(mask=(start + ml.arange(8))[:, None] < x.shape[0], other=0)
  e = ml.exp(v - ml.max(v, axis=1, keepdims=True))
  out.at[ml.ds(i * 8, 8), :].store(e / ml.sum(e, axis=1, keepdims=True),
                                   mask=(start + ml.arange(8))[:, None] < out.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], (x.shape[2] + 127) // 128))
def scale_cols(x, out):
  b, j = ml.program_id(0), ml.program_id(1)
  out.at[b, :, ml.ds(j * 128, 128)][...] = x.at[b, :, ml.ds(j * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0], (x.shape[2] + 127) // 128))
def scale_cols_masked(x, out):            # the hint, followed
  b, j = ml.program_id(0), ml.program_id(1)
  start = j * 128
  v = x.at[b, :, ml.ds(j * 128, 128)].load(mask=(start + ml.arange(128))[None, :] < x.shape[2], other=0)
  out.at[b, :, ml.ds(j * 128, 128)].store(v * 2.0, mask=(start + ml.arange(128))[None, :] < out.shape[2])


def test_a_bounds_mask_hint_has_the_windows_rank():
  expect(softmax_rows, [ROWS], mg.IndexOutOfBoundsError, "x.at[ml.ds(i * 8, 8), :][...]",
         "this register read touches x[56:64, 0:256] in program (7, 0, 0), outside x's shape (60, 256)",
         hint="mask it to the elements inside: x.at[ml.ds(i * 8, 8), :].load(mask=(i * 8 +"
              " ml.arange(8))[:, None] < x.shape[0], other=0); or guard the access (if i * 8 + 8 <= 60:) or clamp"
              " its start (ml.minimum(i * 8, 52))")      # (the user's window, since probe 28e)
  exports(softmax_rows_masked, ROWS)
  x = rand.normal(rand.key(0), (60, 256), F32)
  np.testing.assert_allclose(np.asarray(softmax_rows_masked(x, interpret=True)),
                             np.asarray(jax.nn.softmax(x, axis=1)), rtol=1e-5, atol=1e-6)


def test_a_bounds_mask_hint_indexes_the_masked_axis_of_the_window():
  # x.at[b, :, ds] is a 2-D window whose axis 1 is x's dimension 2
  spec = S((2, 8, 200), F32)
  expect(scale_cols, [spec], mg.IndexOutOfBoundsError, "x.at[b, :, ml.ds(j * 128, 128)][...]",
         "this register read touches x[0:1, 0:8, 128:256] in program (0, 1, 0), outside x's shape (2, 8, 200)",
         hint="mask it to the elements inside: x.at[b, :, ml.ds(j * 128, 128)].load(mask=(j * 128 +"
              " ml.arange(128))[None, :] < x.shape[2], other=0); or guard the access (if j * 128 + 128 <= 200:)"
              " or clamp its start (ml.minimum(j * 128, 72))")
  exports(scale_cols_masked, spec)


# ---------------------------------------------------------------- 2. MG006: a constexpr without its annotation
@mg.mgpu_kernel(out_shape=lambda x, BLOCK: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
def double_blocks(x, out, BLOCK):
  i = ml.program_id(0)
  out.at[ml.ds(i * BLOCK, BLOCK)][...] = x.at[ml.ds(i * BLOCK, BLOCK)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, BLOCK: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
def double_blocks_fixed(x, out, *, BLOCK: ml.constexpr):      # the hint, followed
  i = ml.program_id(0)
  out.at[ml.ds(i * BLOCK, BLOCK)][...] = x.at[ml.ds(i * BLOCK, BLOCK)][...] * 2


def test_a_python_constant_given_to_a_ref_parameter_hints_declaring_it_a_constexpr():
  expect_call(double_blocks, [S((1024,), F32)], mg.SignatureError, "def double_blocks",
         "double_blocks has no constexpr parameter 'BLOCK' (it is a ref parameter)",
         hint="BLOCK=256 is a compile-time constant: declare BLOCK a constexpr, keyword-only after the"
              " arrays: def double_blocks(x, out, *, BLOCK: ml.constexpr)", BLOCK=256)
  exports(double_blocks_fixed, S((1024,), F32), BLOCK=256)
  x = jnp.arange(1024, dtype=F32)
  np.testing.assert_array_equal(np.asarray(double_blocks_fixed(x, BLOCK=256, interpret=True)), 2 * np.asarray(x))


# ---------------------------------------------------------------- 3. MG204: reductions across split rows
MM = (S((256, 64), BF16), S((64, 128), BF16))
MM1 = (S((128, 64), BF16), S((64, 128), BF16))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] // 128, b.shape[1]), F32),
                grid=lambda a, b: (a.shape[0] // 128,), block=256)
def colmax_read_back(a, b, out):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, a.shape[1])), ml.smem((a.shape[1], b.shape[1]))
  ml.copy(a.at[ml.ds(i * 128, 128), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  t_s = ml.smem((128, 128), jnp.float32)
  t_s[...] = acc
  out.at[i][...] = ml.max(t_s[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] // 128, b.shape[1]), F32),
                grid=lambda a, b: (a.shape[0] // 128,), block=256)
def colmax_read_back_T(a, b, out):        # the hint, followed: the transpose
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, a.shape[1])), ml.smem((a.shape[1], b.shape[1]))
  ml.copy(a.at[ml.ds(i * 128, 128), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  t_s = ml.smem((128, 128), jnp.float32)
  t_s[...] = acc
  out.at[i][...] = ml.max(t_s[...].T, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0] // 128, b.shape[1]), F32),
                grid=lambda a, b: (a.shape[0] // 128,), block=256)
def colmax_windows(a, b, out):            # the hint, followed: windows of 8 rows
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, a.shape[1])), ml.smem((a.shape[1], b.shape[1]))
  ml.copy(a.at[ml.ds(i * 128, 128), :], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  t_s = ml.smem((128, 128), jnp.float32)
  t_s[...] = acc
  m = ml.max(t_s.at[ml.ds(0, 8)][...], axis=0)
  for r in ml.static_range(1, 16):
    m = ml.maximum(m, ml.max(t_s.at[ml.ds(r * 8, 8)][...], axis=0))
  out.at[i][...] = m


@mg.mgpu_kernel(out_shape=lambda a, b: S((b.shape[1],), F32), block=256)
def colsum(a, b, out):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.sum(acc, axis=0)


@mg.mgpu_kernel(out_shape=lambda a, b: S((b.shape[1],), F32), block=256)
def colsum_T(a, b, out):                   # the hint, followed
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.sum(acc.T, axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((), F32), block=256)
def total_rowmax(a, b, out):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.sum(ml.max(acc, axis=1))


@mg.mgpu_kernel(out_shape=lambda a, b: S((), F32), block=256)
def total_rowmax_row(a, b, out):          # the hint, followed
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.sum(ml.max(acc, axis=1)[:, None].T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((), F32), block=256)
def total(a, b, out):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.sum(ml.dot(a_s, b_s))


@mg.mgpu_kernel(out_shape=lambda a, b: S((), F32), block=256)
def total_T(a, b, out):                    # the hint, followed
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.sum(ml.dot(a_s, b_s).T)


def _mm(k=1):
  a = rand.normal(rand.key(k), (256, 64), BF16)
  b = rand.normal(rand.key(k + 1), (64, 128), BF16)
  return a, b, jnp.dot(a.astype(F32), b.astype(F32))




def test_a_column_reduction_of_a_tile_read_back_works_as_written_transposed_or_by_row_windows():
  # (MG204 with the hint of the transpose or row windows until probe 62a: the warpgroups now combine their parts)
  a, b, c = _mm()
  for kernel in (colmax_read_back, colmax_read_back_T, colmax_windows):
    exports(kernel, *MM)
    np.testing.assert_allclose(np.asarray(kernel(a, b, interpret=True)), np.asarray(c.reshape(2, 128, 128).max(1)),
                               rtol=2e-3, atol=2e-3)


def test_a_column_reduction_of_a_dot_result_works_as_written_or_transposed():
  # (MG204 with the hint of the transpose until probe 62a)
  a, b, c = _mm()
  for kernel in (colsum, colsum_T):
    exports(kernel, *MM1)
    np.testing.assert_allclose(np.asarray(kernel(a[:128], b, interpret=True)), np.asarray(c[:128].sum(0)),
                               rtol=1e-3, atol=1e-2)


def test_a_reduction_of_a_row_statistic_works_whole_or_as_one_row():
  # (was MG204 with the hint of the one-row form; the warpgroups now combine their parts)
  a, b, c = _mm()
  for kernel in (total_rowmax, total_rowmax_row):
    exports(kernel, *MM1)
    np.testing.assert_allclose(float(kernel(a[:128], b, interpret=True)), float(c[:128].max(1).sum()), rtol=1e-4)


def test_a_full_reduction_of_a_split_tile_works_whole_or_transposed():
  a, b, c = _mm()
  for kernel in (total, total_T):
    exports(kernel, *MM1)
    np.testing.assert_allclose(float(kernel(a[:128], b, interpret=True)), float(c[:128].sum()), rtol=1e-3)


# ---------------------------------------------------------------- 4. MG602: elements a mask left unwritten
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def relu_store(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)].store(v, mask=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def relu_store_where(x, out):             # the hint, followed
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = ml.where(v > 0, v, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def relu_store_filled(x, out):            # the hint's other way, followed
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = 0
  out.at[ml.ds(i * 128, 128)].store(v, mask=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def masked_tail_floor_grid(x, out):
  i = ml.program_id(0)
  rows = i * 128 + ml.arange(128)
  out.at[ml.ds(i * 128, 128)].store(x.at[ml.ds(i * 128, 128)].load(mask=rows < x.shape[0]), mask=rows < x.shape[0])


def test_output_elements_a_data_mask_skipped_are_blamed_on_the_mask():
  x = rand.normal(rand.key(1), (256,), F32)
  with pytest.raises(mg.UncoveredOutputError) as info:
    relu_store(x, interpret=True)
  e = info.value
  assert e.code == "MG602"
  assert (e.lineno, e.col_offset) == where(relu_store, "out.at[ml.ds(i * 128, 128)].store")
  skipped = int((np.asarray(x) <= 0).sum())
  assert e.message.endswith(
      f" is never written: the masked store into out (line {e.lineno}) leaves the elements where its mask is"
      f" false unwritten, and nothing else writes them, so {skipped} of 256 elements of out would stay"
      f" uninitialised"), e.message
  assert e.hint.startswith("write every element of out: put the mask into the value, ml.where(v > 0, v, 0), and"
                           " store that unmasked, out.at[ml.ds(i * 128, 128)][...] = ..., where the window lies"
                           " inside out; a window running past out's end keeps a mask of out's own extent")
  with pytest.raises(Exception, match="the masked store into out"):      # under jit too
    jax.block_until_ready(jax.jit(lambda x: relu_store(x, interpret=True))(x))
  for fixed in (relu_store_where, relu_store_filled):
    exports(fixed, S((256,), F32))
    np.testing.assert_array_equal(np.asarray(fixed(x, interpret=True)), np.maximum(np.asarray(x), 0))
  # windows that do not cover the output are still the programs' fault, masked or not
  with pytest.raises(mg.UncoveredOutputError, match="none of the 7 programs") as info:
    masked_tail_floor_grid.check(S((1000,), F32))
  assert info.value.hint.startswith("launch enough programs")


# ---------------------------------------------------------------- 5. MG202: the operand that lacks axes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def minus_rowmax(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...]
  m = ml.max(v, axis=1)
  out.at[ml.ds(i * 8, 8), :][...] = v - m


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def rowmax_minus(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...]
  out.at[ml.ds(i * 8, 8), :][...] = ml.max(v, axis=1) - v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def minus_rowmax_fixed(x, out):           # the hint, followed
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 8, 8), :][...]
  m = ml.max(v, axis=1)
  out.at[ml.ds(i * 8, 8), :][...] = v - m[:, None]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def mask_of_rows(x, out):
  out[...] = x.load(mask=ml.arange(8) < 5, other=0.0)


def test_a_broadcast_mismatch_hint_names_the_operand_that_lacks_axes():
  bcast = "shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch; "
  expect(minus_rowmax, [S((64, 128), F32)], mg.ShapeMismatchError, "v - m",
         "- on v of shape (8, 128) and m of shape (8,): the shapes do not broadcast (axis 1 of the result"
         " would be both 128 and 8)", hint=bcast + "give m the axes it lacks: m[:, None] (shape (8, 1))")
  expect(rowmax_minus, [S((64, 128), F32)], mg.ShapeMismatchError, "ml.max(v, axis=1) - v",
         "- on ml.max(v, axis=1) of shape (8,) and v of shape (8, 128): the shapes do not broadcast (axis 1"
         " of the result would be both 8 and 128)",
         hint=bcast + "give ml.max(v, axis=1) the axes it lacks: ml.max(v, axis=1)[:, None] (shape (8, 1))")
  expect(mask_of_rows, [S((8, 128), F32)], mg.ShapeMismatchError, "x.load",
         "ml.load on the mask of shape (8,) and x of shape (8, 128): the shapes do not broadcast (axis 1 of"
         " the result would be both 8 and 128)",
         hint=bcast + "give the mask the axes it lacks: index it [:, None] (shape (8, 1))")
  exports(minus_rowmax_fixed, S((64, 128), F32))


# ---------------------------------------------------------------- 6. float index, ml.fdiv, reading an output
@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def middle_row(x, out):
  out[...] = x.at[x.shape[0] / 2][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def middle_row_fixed(x, out):             # the hint, followed
  out[...] = x.at[x.shape[0] // 2][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def halve(x, out):
  out[...] = ml.fdiv(x[...], 2.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def halve_fixed(x, out):                  # the hint, followed
  out[...] = x[...] / 2.0


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def sum_rows_into_out(x, out):
  for r in range(x.shape[0]):
    out[...] = out[...] + x.at[r][...]


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def sum_rows_acc(x, out):                 # the hint, followed
  acc = ml.zeros((128,), jnp.float32)
  for r in range(x.shape[0]):
    acc = acc + x.at[r][...]
  out[...] = acc


def test_a_float_index_hints_integer_division():
  expect(middle_row, [S((8, 128), F32)], mg.KernelTypeError, "x.at[x.shape[0] / 2]",
         "cannot index with a Python float; use ints, static slices or ml.ds(start, size)",
         hint="an index is an integer: divide with // (e.g. x.shape[0] // 2, not x.shape[0] / 2), or convert"
              " with int(...)")
  exports(middle_row_fixed, S((8, 128), F32))


def test_triton_fdiv_is_the_division_operator():
  x = jnp.arange(128, dtype=F32)          # (a hint to write / until probe 49h made ml.fdiv Triton's tl.fdiv)
  np.testing.assert_array_equal(np.asarray(halve(x, interpret=True)), np.asarray(halve_fixed(x, interpret=True)))
  exports(halve_fixed, S((128,), F32))


def test_an_output_read_before_written_hints_a_register_accumulator_and_aliasing():
  expect(sum_rows_into_out, [S((8, 128), F32)], mg.UninitializedReadError, "out[...] + x",
         "out is read before this program writes it: outputs start uninitialised",
         hint="read inputs, not outputs: to accumulate into out, keep the running value in registers and"
              " store it once (acc = ml.zeros(shape, dtype) before the loop, acc = acc + ... in it,"
              " out[...] = acc after); to update an array in place, pass it as an input and alias it to"
              " out: @mgpu_kernel(..., input_output_aliases={input_index: output_index}); a value another"
              " program writes cannot be waited for (programs run in no set order): a prefix over programs (a"
              " decoupled look-back) is two kernels, one writing each program's total, and one taking"
              " jnp.cumsum(totals) - totals as an input")
  exports(sum_rows_acc, S((8, 128), F32))


@mg.mgpu_kernel(out_shape=lambda a, b, **kw: S((128,), F32), block=256)
def argmax_rows(a, b, out):
  a_s, b_s = ml.smem((256, 64)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  out[...] = ml.argmax(acc, axis=0).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b, **kw: S((128,), F32), block=256)
def split_reductions_fixed(a, b, out, *, how: ml.constexpr):     # each hint of the 256 rows, followed
  a_s, b_s = ml.smem((256, 64)), ml.smem((64, 128))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  if how == "sum0":
    out[...] = ml.sum(acc.T, axis=1)
  elif how == "full":
    out[...] = ml.full((128,), ml.sum(acc.T), jnp.float32)
  elif how == "argmax0":
    out[...] = ml.argmax(acc.T, axis=1).astype(jnp.float32)
  else:
    out[...] = ml.full((128,), ml.sum(ml.max(acc, axis=1)[:, None].T), jnp.float32)


def test_an_argmax_across_split_rows_works_as_written_or_transposed():
  # (MG204 with the hint of the argmax of the transpose until probe 62a)
  spec = (S((256, 64), F16), S((64, 128), F16))
  exports(argmax_rows, *spec)
  a = rand.normal(rand.key(3), (256, 64), F16)
  b = rand.normal(rand.key(4), (64, 128), F16)
  c = jnp.dot(a.astype(F32), b.astype(F32))
  want = {"sum0": c.sum(0), "full": jnp.full((128,), c.sum()), "argmax0": c.argmax(0).astype(F32),
          "row_stat_sum": jnp.full((128,), c.max(1).sum())}
  for how, ref in want.items():
    exports(split_reductions_fixed, *spec, how=how)
    np.testing.assert_allclose(np.asarray(split_reductions_fixed(a, b, how=how, interpret=True)), np.asarray(ref),
                               rtol=1e-3, atol=5e-2)
  np.testing.assert_array_equal(np.asarray(argmax_rows(a, b, interpret=True)), np.asarray(c.argmax(0).astype(F32)))
