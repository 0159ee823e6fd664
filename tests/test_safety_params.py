"""Parameters: inputs are read-only unless aliased to an output (input_output_aliases, end to
end: check, StableHLO alias, interpret mode); outputs are written in full before they are read.
Each rejected kernel is checked for class, code, line, column, message and hint; each valid
one runs in interpret mode against numpy."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, where

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def rand(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------------------- read-only inputs
@mg.mgpu_kernel(out_shape=lambda x: x)
def store_into_input(x, out):
  x[...] = x[...] * 2
  out[...] = x[...]


def test_a_store_into_an_input_is_rejected():
  expect(store_into_input, [S((128,), F32)], mg.InputWriteError, "x[...] = x[...] * 2",
         "cannot write into x: it is an input of the kernel, and inputs are read-only (JAX arrays are"
         " immutable)",
         hint="write the result into an output; to update x in place, alias it to an output of its"
              " shape and dtype: @mgpu_kernel(..., input_output_aliases={0: 0})")


@mg.mgpu_kernel(out_shape=lambda x, y: y, grid=(2,))
def tma_store_into_input(x, y, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(y.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, x.at[ml.ds(i * 128, 128)])
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


def test_a_tma_store_into_a_view_of_an_input_is_rejected():
  e = expect(tma_store_into_input, [S((512, 64), F32), S((256, 64), F32)], mg.InputWriteError,
             "ml.copy(buf, x.at", "cannot write into x: it is an input of the kernel, and inputs are"
             " read-only (JAX arrays are immutable)")
  assert "input_output_aliases={0: 1}" in e.hint      # (x is 512 rows, the output 256: a new output)


def test_an_input_write_is_rejected_on_the_gpu_path_too():
  with pytest.raises(mg.InputWriteError):
    store_into_input(jnp.ones((128,), F32))         # no kernel runs: the caller's array is safe


# ---------------------------------------------------------------------------- aliases
@mg.mgpu_kernel(out_shape=lambda cache, new: cache, input_output_aliases={0: 0}, grid=(1,))
def append(cache, new, out):
  out.at[16:24][...] = new[...]          # the other rows keep the cache's values


def test_an_aliased_output_is_updated_in_place_in_interpret_mode():
  cache, new = rand((64, 128)), rand((8, 128), seed=1)
  got = append(cache, new, interpret=True)
  np.testing.assert_array_equal(got, cache.at[16:24].set(new))
  got = jax.jit(lambda c, n: append(c, n, interpret=True))(cache, new)
  np.testing.assert_array_equal(got, cache.at[16:24].set(new))
  assert not np.array_equal(cache[16:24], new)        # the caller's array is untouched


def test_an_aliased_kernel_exports_an_operand_output_alias():
  specs = (S((64, 128), F32), S((8, 128), F32))
  text = jax.export.export(jax.jit(append), platforms=["cuda"])(*specs).mlir_module()
  call = next(line for line in text.splitlines() if "mosaic_gpu" in line and "custom_call" in line)
  # Operands: the plain inputs, then the aliased ones; the result is the cache's buffer.
  assert "(tensor<8x128xf32>, tensor<64x128xf32>) -> tensor<64x128xf32>" in call
  assert "output_operand_alias<output_tuple_indices = [], operand_index = 1," in call


def test_an_aliased_input_may_be_written_through_either_parameter():
  @mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0}, grid=(2,))
  def scale(x, out):
    i = ml.program_id(0)
    x.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2
  x = rand((256,))
  np.testing.assert_array_equal(scale(x, interpret=True), x * 2)
  builds(scale, S((256,), F32))


def test_an_output_aliased_to_another_input_is_reported_at_the_decorator_argument():
  @mg.mgpu_kernel(out_shape=lambda x, y: x, input_output_aliases={1: 0})
  def add(x, y, out):
    out[...] = x[...] + y[...]
  e = expect(add, [S((128,), F32), S((256,), F32)], mg.LaunchConfigError, "input_output_aliases={1: 0}",
             "input 1 (y: float32[256]) cannot alias output 0 (out: float32[128]): an alias needs one"
             " shape and dtype",
             hint="make out_shape give the aliased output the input's shape and dtype")
  assert e.end_col_offset - e.col_offset == len("input_output_aliases={1: 0}")


def test_an_alias_naming_no_output_is_reported():
  @mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 1})
  def copy(x, out):
    out[...] = x[...]
  expect(copy, [S((128,), F32)], mg.LaunchConfigError, "input_output_aliases={0: 1}",
         "input_output_aliases {0: 1}: the kernel has 1 input(s) and 1 output(s) (indices count from 0)")


# ---------------------------------------------------------------------------- outputs
@mg.mgpu_kernel(out_shape=lambda x: x)
def accumulate_into_output(x, out):
  out[...] = out[...] + x[...]


def test_an_output_read_before_it_is_written_is_rejected():
  expect(accumulate_into_output, [S((128,), F32)], mg.UninitializedReadError, "out[...] + x",
         "out is read before this program writes it: outputs start uninitialised",
         hint="read inputs, not outputs: to accumulate into out, keep the running value in registers and"
              " store it once (acc = ml.zeros(shape, dtype) before the loop, acc = acc + ... in it,"
              " out[...] = acc after); to update an array in place, pass it as an input and alias it"
              " to out: @mgpu_kernel(..., input_output_aliases={input_index: output_index}); a value another"
              " program writes cannot be waited for (programs run in no set order): a prefix over programs (a"
              " decoupled look-back) is two kernels, one writing each program's total, and one taking"
              " jnp.cumsum(totals) - totals as an input")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def rows_by_floor_grid(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


def test_a_grid_that_leaves_rows_unwritten_is_rejected():
  expect(rows_by_floor_grid, [S((1000, 64), F32)], mg.UncoveredOutputError, "ml.copy(buf, out",
         "out[896:1000, :] is never written: none of the 7 programs of grid (7,) writes it, so 6656 of"
         " 64000 elements of out would stay uninitialised",
         hint="launch enough programs for their windows to cover out (1000, 64) (for tiles of t rows,"
              " grid=lambda x: ((x.shape[0] + t - 1) // t,); ml.copy stores drop what falls outside the"
              " array, a register store needs a mask of out's extent: out.at[...].store(v, mask=offs <"
              " out.shape[0]) with offs the window's positions), or write the rest; to update part of an input"
              " in place, alias it to out:"
              " @mgpu_kernel(..., input_output_aliases={input index: output index})")


def test_a_ceiling_grid_of_tma_tiles_covers_a_ragged_output():
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: ((x.shape[0] + 127) // 128,))
  def rows(x, out):
    i = ml.program_id(0)
    buf = ml.smem((128, 64))
    ml.copy(x.at[ml.ds(i * 128, 128)], buf)     # reads zeros past row 1000
    buf[...] = buf[...] * 2
    ml.copy(buf, out.at[ml.ds(i * 128, 128)])   # drops rows past 1000
  x = rand((1000, 64))
  np.testing.assert_array_equal(rows(x, interpret=True), x * 2)
  builds(rows, S((1000, 64), F32))


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def one_output_forgotten(x, out, out2):
  out[...] = x[...]


def test_an_output_never_written_is_reported_at_its_parameter():
  expect(one_output_forgotten, [S((128,), F32)], mg.UncoveredOutputError, "out2",
         "out2 is never written: every output must be written in full",
         hint="store the results into out2 (ml.copy(buf, out2.at[...]) or out2[...] = value)")


@mg.mgpu_kernel(out_shape=lambda x: x)
def half_written(x, out):
  out.at[0:128][...] = x.at[0:128][...]


def test_one_program_leaving_half_an_output_unwritten_is_rejected():
  expect(half_written, [S((256,), F32)], mg.UncoveredOutputError, "out.at[0:128]",
         "out[128:256] is never written: the kernel's one program does not write it, so 128 of 256"
         " elements of out would stay uninitialised")


@mg.mgpu_kernel(out_shape=lambda x, offsets: x)
def data_dependent_window(x, offsets, out):
  start = ml.max(offsets[...])          # known only at run time: interpret mode checks
  out.at[ml.ds(start, 128)][...] = x.at[ml.ds(start, 128)][...]


def test_outputs_the_compiler_cannot_follow_are_checked_in_interpret_mode():
  builds(data_dependent_window, S((256,), F32), S((128,), jnp.int32))
  with pytest.raises(mg.UncoveredOutputError) as e:
    data_dependent_window(rand((256,)), jnp.full((128,), 128, jnp.int32), interpret=True)
  assert e.value.message == ("out[0:128] is never written: the kernel's one program does not write it,"
                             " so 128 of 256 elements of out would stay uninitialised")
  assert (e.value.lineno, e.value.col_offset) == where(data_dependent_window, "out.at[ml.ds(start")
  with pytest.raises(mg.UninitializedReadError, match=r"out\[0:128\] is read in program \(0, 0, 0\)"):
    read_back(rand((256,)), jnp.full((128,), 128, jnp.int32), interpret=True)


@mg.mgpu_kernel(out_shape=lambda x, offsets: x)
def read_back(x, offsets, out):
  start = ml.max(offsets[...])
  out.at[128:256][...] = x.at[128:256][...]
  out.at[0:128][...] = out.at[ml.ds(start - 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def overlapping_tiles(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 96, 128)][...] = x.at[ml.ds(i * 96, 128)][...]


def test_two_programs_certainly_writing_one_element_is_a_race_at_compile_time():
  expect(overlapping_tiles, [S((416,), F32)], mg.RaceError, "out.at[ml.ds(i * 96",
         "program (0, 0, 0) and program (1, 0, 0) both write out[96]: programs run in no fixed order, so"
         " the result depends on timing",
         hint="the programs' windows of out start 96 apart (i * 96) but each writes 128 elements, so neighbours"
              " overlap by 32: step them by their size, i * 128, the last one's register store masked to out's 416"
              " elements (out.at[...].store(value, mask=...) keeping the positions below 416; a TMA copy drops them"
              " itself), and the inputs' windows the same way")


# ---------------------------------------------------------------------------- valid coverage
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(4,))
def covered_many_ways(x, out):
  i = ml.program_id(0)
  rows = out.at[ml.ds(i * 512, 512)]
  if i % 2 == 0:                                  # a runtime branch per program
    rows.at[0:256][...] = x.at[ml.ds(i * 512, 256)][...]
  else:
    rows.at[ml.ds(0, 256)][...] = x.at[ml.ds(i * 512, 256)][...] * 2
  for j in range(2):                              # a runtime loop, views of views
    part = rows.at[ml.ds(256 + j * 128, 128)]
    part.at[0:128][...] = x.at[ml.ds(i * 512 + 256 + j * 128, 128)][...] * 3


def test_outputs_written_in_branches_loops_and_views_of_views_are_covered():
  x = rand((2048,))
  want = np.asarray(x).copy()
  for i in range(4):
    want[i * 512:i * 512 + 256] *= 1 if i % 2 == 0 else 2
    want[i * 512 + 256:i * 512 + 512] *= 3
  np.testing.assert_array_equal(covered_many_ways(x, interpret=True), want)
  builds(covered_many_ways, S((2048,), F32))


@mg.mgpu_kernel(out_shape=lambda cache, new, *, pos: cache, input_output_aliases={0: 0})
def append_rows(cache, new, out, *, pos: ml.constexpr):     # docs/language.md, In-place updates
  buf = ml.smem(new.shape)
  ml.copy(new, buf)
  ml.copy(buf, out.at[pos:pos + new.shape[0]])


def test_the_documented_kv_cache_append_updates_rows_in_place_under_jit_with_donation():
  cache, new = rand((64, 128)), rand((8, 128), seed=1)
  want = cache.at[16:24].set(new)
  step = jax.jit(lambda c, n: append_rows(c, n, pos=16, interpret=True), donate_argnums=0)
  np.testing.assert_array_equal(step(jnp.array(cache), new), want)
  builds(append_rows, S((64, 128), F32), S((8, 128), F32), pos=16)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def while_rows(x, out):
  i = ml.program_id(0)
  r = i * 256
  while r < i * 256 + 256:                         # a while loop: its trip count is not evaluated
    out.at[ml.ds(r, 128)][...] = x.at[ml.ds(r, 128)][...] * 2
    r = r + 128


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(4,))
def atomic_sums(x, out):
  i = ml.program_id(0)
  ml.atomic_add(out, x.at[ml.ds(i * 128, 128)][...])   # every program adds into all of out


def test_writes_in_while_loops_and_atomic_accumulation_are_accepted():
  x = rand((512,))
  np.testing.assert_array_equal(while_rows(x, interpret=True), x * 2)
  builds(while_rows, S((512,), F32))
  np.testing.assert_allclose(atomic_sums(x, interpret=True), np.asarray(x).reshape(4, 128).sum(0), rtol=1e-5)
  builds(atomic_sums, S((512,), F32))


def test_interpret_mode_reports_an_output_read_before_it_is_written_with_the_program():
  with pytest.raises(mg.UninitializedReadError) as e:
    read_back(rand((256,)), jnp.full((128,), 128, jnp.int32), interpret=True)
  assert e.value.code == "MG601"
  assert e.value.message == ("out[0:128] is read in program (0, 0, 0) before this program writes it: outputs"
                             " start uninitialised")
  assert (e.value.lineno, e.value.col_offset) == where(read_back, "out.at[ml.ds(start - 128")
  assert e.value.hint.startswith("read inputs, not outputs: to accumulate into out")


def test_interpret_mode_reports_unwritten_outputs_with_the_fix():
  with pytest.raises(mg.UncoveredOutputError) as e:
    data_dependent_window(rand((256,)), jnp.full((128,), 128, jnp.int32), interpret=True)
  assert e.value.code == "MG602"
  assert e.value.hint.startswith("launch enough programs for their windows to cover out (256,)")


@pytest.mark.parametrize("aliases,message", [
    ([(0, 0)], "input_output_aliases must be a dict, got [(0, 0)]"),
    ({0: "out"}, "input_output_aliases maps ints to ints, got 0: 'out'"),
], ids=["not_a_dict", "not_ints"])
def test_malformed_aliases_are_reported_at_the_decorator_argument(aliases, message):
  @mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases=aliases)
  def copy(x, out):
    out[...] = x[...]
  e = expect(copy, [S((128,), F32)], mg.LaunchConfigError, "input_output_aliases=aliases", message)
  assert "input_output_aliases={input_index: output_index}" in e.hint
