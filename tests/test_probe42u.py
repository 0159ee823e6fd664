"""Probe 42u (known debts of earlier probes): `out[offs] = v` of a run `pid * n + ml.arange(n)` is the store of the
window it covers (two programs writing one element were found only in interpret mode: the scatter path), jnp's drop
of positions past the end kept by a mask; a Python number passed for a 0-d input is weakly typed in the kernel, as
jnp's (an int32 `x[...] + s[...]` was MG104 with jax_enable_x64, a float16 `x[...] * s[...]` under jax.jit too);
Triton's `kernel[grid](x)` launch is underlined at the subscript, not from the statement's start; an autotuned
kernel's unknown-constexpr hint lists the constexprs a call may pass, not the tuned ones."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
F16 = jnp.float16


def _rand(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _export(kernel, *args, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*args).mlir_module()


# ---------------------------------------------------------------- out[offs] = v of a run: the window's store
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64 - 1,))
def overlapping_runs(x, out):
  pid = ml.program_id(0)
  offs = pid * 64 + ml.arange(128)
  out[offs] = x[offs] * 2.0


def test_two_programs_storing_one_element_through_a_run_are_found_while_compiling():
  """The scatter path left the race to interpret mode; ml.store(out.at[offs], v) found it while compiling."""
  e = expect(overlapping_runs, (S((1024,), F32),), mg.RaceError, "out[offs] = x[offs] * 2.0",
             "program (0, 0, 0) and program (1, 0, 0) both write out[64]: programs run in no fixed order, so the"
             " result depends on timing")
  assert "pid * 128" in e.hint


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def ragged_double(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = ml.load(x.at[offs], mask=offs < x.shape[0], other=0.0) * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def row_runs(x, out):
  rows = ml.program_id(0) * 8 + ml.arange(8)
  out[rows, :] = x[rows, :] + 1.0                        # the run leads the window: its mask is (8, 1)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8, x.shape[1] // 64))
def grid_runs(x, out):
  rows = ml.program_id(0) * 8 + ml.arange(8)
  cols = ml.program_id(1) * 64 + ml.arange(64)
  out[rows[:, None], cols[None, :]] = x[rows[:, None], cols[None, :]] * 3.0


def _scatters(kernel, *specs):
  return kernel.typed_ir(*specs).count("scatterupdate")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def run_from_before_zero(x, out):
  out[...] = ml.zeros(x.shape, x.dtype)
  offs = ml.program_id(0) * 128 - 64 + ml.arange(128)
  out[offs] = x.at[ml.ds(0, 128)][...]          # jnp counts -64..-1 from the end: a scatter still


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[1],))
def column_runs(x, out):
  c = ml.program_id(0)
  rows = ml.arange(64)
  out[rows, c] = x[rows, c] + 1.0               # a column, strided in memory: a scatter still


def test_a_run_store_is_a_window_store_that_drops_what_falls_past_the_end():
  x = _rand((1000,), 1)
  np.testing.assert_array_equal(ragged_double(x, interpret=True), x * 2)
  assert _scatters(ragged_double, x) == 0
  x = _rand((60, 128), 2)
  np.testing.assert_array_equal(row_runs(x, interpret=True), x + 1)
  assert _scatters(row_runs, x) == 0
  x = _rand((64, 256), 3)
  np.testing.assert_array_equal(grid_runs(x, interpret=True), x * 3)
  assert _scatters(grid_runs, x) == 0
  for k, spec in ((ragged_double, S((1000,), F32)), (row_runs, S((60, 128), F32)), (grid_runs, S((64, 256), F32))):
    assert "mosaic_gpu" in str(_export(k, spec))
  # a run that may start below 0 (jnp counts it from the end) or that indexes a column stays a scatter
  x = jnp.arange(256, dtype=F32)
  want = jnp.zeros_like(x).at[jnp.arange(128) - 64].set(x[:128])
  np.testing.assert_array_equal(run_from_before_zero(x, interpret=True), want)
  assert _scatters(run_from_before_zero, x) == 1
  x = _rand((64, 16), 4)
  np.testing.assert_array_equal(column_runs(x, interpret=True), x + 1)
  assert _scatters(column_runs, x) == 1


@mg.mgpu_kernel(out_shape=lambda x, r: x, grid=(1,))
def row_from_data(x, r, out):
  out[...] = ml.zeros(x.shape, x.dtype)
  cols = ml.arange(128)
  out[r[0], cols] = x[0, cols] + 1.0              # an unsigned row read from memory, maybe past the end


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] + 2,))
def rows_past_the_end(x, out):
  r = ml.program_id(0)                           # two programs more than rows: jnp drops their updates
  cols = ml.arange(128)
  out[r, cols] = x[r, cols] * 2.0


def test_a_run_stores_row_index_past_the_end_is_dropped_as_jnp_drops_it():
  x = _rand((8, 128), 14)
  for row in (3, 9):
    r = jnp.array([row], jnp.uint32)
    want = jnp.zeros_like(x).at[r[0], jnp.arange(128)].set(x[0] + 1, mode="drop")
    np.testing.assert_array_equal(row_from_data(x, r, interpret=True), want)
  np.testing.assert_array_equal(rows_past_the_end(x, interpret=True), x * 2)
  assert _scatters(rows_past_the_end, x) == 0
  assert "mosaic_gpu" in str(_export(row_from_data, x, jnp.array([9], jnp.uint32)))
  assert "mosaic_gpu" in str(_export(rows_past_the_end, x))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128 - 1,))
def runs_short_of_the_end(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = x[offs]


def test_a_run_store_that_leaves_the_output_short_is_found_while_compiling():
  e = expect(runs_short_of_the_end, (S((256,), F32),), mg.UncoveredOutputError, "out[offs] = x[offs]",
             "out[128:256] is never written: the kernel's one program does not write it, so 128 of 256 elements of"
             " out would stay uninitialised")
  assert e.hint.startswith("launch enough programs for their windows to cover out (256,)")


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F16), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def run_store_of_another_dtype(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = ml.load(x.at[offs], mask=offs < x.shape[0], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def run_store_of_another_shape(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = x.at[ml.ds(0, 64)][...]


def test_a_run_store_of_another_shape_says_what_the_indices_give():
  """It said `ml.store on ... and out of shape (128,)`: a call the user did not write, out's window as out."""
  expect(run_store_of_another_shape, (S((256,), F32),), mg.ShapeMismatchError, "out[offs] =",
         "the scatter on x.at[ml.ds(0, 64)][...] of shape (64,) and the indexed elements of shape (128,): the shapes"
         " do not broadcast (axis 0 of the result would be both 64 and 128)")


def test_a_run_store_of_another_dtype_names_the_value_and_the_output():
  expect(run_store_of_another_dtype, (S((1000,), F32),), mg.StoreDtypeError, "out[offs] =",
         "cannot store ml.load(x.at[offs], mask=offs < x.shape[0], other=0.0) (float32) into out (GMEM, float16):"
         " no implicit conversion",
         hint="convert explicitly: (ml.load(x.at[offs], mask=offs < x.shape[0], other=0.0)).astype(jnp.float16)")


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def run_updated(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = ml.load(x.at[offs], mask=offs < x.shape[0], other=0.0)
  out[offs] *= out[offs] + 1.0                   # was MG001, hinting an atomic add


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def run_updated_int(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = ml.load(x.at[offs], mask=offs < x.shape[0], other=0)
  out[offs] += 1.5


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def run_updated_int_fixed(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  out[offs] = ml.load(x.at[offs], mask=offs < x.shape[0], other=0)
  out[offs] = (out[offs] + 1.5).astype(jnp.int32)


def test_an_augmented_assignment_at_a_run_updates_its_window():
  x = _rand((300,), 12)
  np.testing.assert_allclose(run_updated(x, interpret=True), x * (x + 1), rtol=1e-6)
  assert "mosaic_gpu" in str(_export(run_updated, x))
  expect(run_updated_int, (S((300,), jnp.int32),), mg.StoreDtypeError, "out[offs] += 1.5",
         "cannot store a value (float32) into out (GMEM, int32): no implicit conversion",
         hint="compute the update and store it converted to out's dtype:"
              " out[offs] = (out[offs] + 1.5).astype(jnp.int32)")
  xi = jnp.arange(300, dtype=jnp.int32)
  np.testing.assert_array_equal(run_updated_int_fixed(xi, interpret=True), (xi + 1.5).astype(jnp.int32))


@pytest.mark.gpu
def test_gpu_run_stores_match_jnp():
  x = _rand((1000,), 5)
  np.testing.assert_array_equal(ragged_double(x), x * 2)
  x = _rand((60, 128), 6)
  np.testing.assert_array_equal(row_runs(x), x + 1)
  x = _rand((64, 256), 7)
  np.testing.assert_array_equal(grid_runs(x), x * 3)
  x = jnp.arange(256, dtype=F32)
  np.testing.assert_array_equal(run_from_before_zero(x), jnp.zeros_like(x).at[jnp.arange(128) - 64].set(x[:128]))
  x = _rand((300,), 13)
  np.testing.assert_allclose(run_updated(x), x * (x + 1), rtol=1e-6)
  x = _rand((8, 128), 15)
  r = jnp.array([9], jnp.uint32)
  want = jnp.zeros_like(x).at[9, jnp.arange(128)].set(x[0] + 1, mode="drop")
  np.testing.assert_array_equal(row_from_data(x, r), want)
  np.testing.assert_array_equal(rows_past_the_end(x), x * 2)


# ---------------------------------------------------------------- a Python number for a 0-d input is weakly typed
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def add_input(x, s, out):
  out[...] = x[...] + s[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def scale_input(x, s, out):
  out[...] = x[...] * s[...]


def test_a_python_number_for_a_0d_input_keeps_the_tiles_dtype_as_jnp_does():
  x = jnp.arange(256, dtype=F16)
  f = lambda x, s: scale_input(x, s, interpret=True)
  eager, jitted, want = f(x, 0.1), jax.jit(f)(x, 0.1), jax.jit(lambda x, s: x * s)(x, 0.1)
  assert eager.dtype == jitted.dtype == want.dtype == F16
  np.testing.assert_array_equal(np.asarray(eager, F32), np.asarray(want, F32))
  np.testing.assert_array_equal(np.asarray(jitted, F32), np.asarray(want, F32))
  assert "mosaic_gpu" in str(_export(scale_input, x, 0.1))
  xb = jnp.stack([x, x + 1])                       # under jax.vmap, the number shared by the batch
  got = jax.vmap(lambda x, s: scale_input(x, s, interpret=True), in_axes=(0, None))(xb, 0.1)
  assert got.dtype == F16
  np.testing.assert_array_equal(np.asarray(got, F32), np.asarray(xb * 0.1, F32))
  text = jax.export.export(jax.jit(jax.vmap(lambda x: scale_input(x, 0.1))), platforms=["cuda"])(xb).mlir_module()
  assert "mosaic_gpu" in text
  with pytest.raises(mg.DtypeMismatchError):      # a typed 0-d array keeps its dtype (jnp promotes; the kernel asks)
    scale_input.check(S((256,), F16), S((), F32))


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def scaled_with_a_mistake(x, s, out):
  out[...] = x[...] * s[...] + ml.exp(x[...].astype(jnp.int32))


def test_a_mistake_elsewhere_in_a_kernel_given_a_python_number_is_reported_as_itself():
  """Called with a Python number for s, every mistake of the kernel was MG006 'kernel inputs are arrays'."""
  for call in (lambda: scaled_with_a_mistake(jnp.ones(256, F32), 2.0, interpret=True),
               lambda: scaled_with_a_mistake.check(S((256,), F32), 2.0)):
    with pytest.raises(mg.KernelError) as info:
      call()
    e = info.value
    assert type(e) is mg.UnsupportedDtypeError, e.render()
    assert e.message == "ml.exp needs a floating-point operand, got int32"
    line = e.loc.source_line
    assert e.col_offset == line.index("ml.exp(")


def test_a_python_int_for_a_0d_input_with_x64_keeps_an_int32_tile_int32():
  """With jax_enable_x64 a Python int is a weak int64: `x[...] + s[...]` was MG104 (int32 and int64)."""
  x = jnp.arange(256, dtype=jnp.int32)
  with jax.enable_x64(True):
    f = lambda x, s: add_input(x, s, interpret=True)
    for got in (f(x, 3), jax.jit(f)(x, 3)):
      assert got.dtype == jnp.int32
      np.testing.assert_array_equal(got, np.arange(256) + 3)
    assert "mosaic_gpu" in str(_export(add_input, x, 3))
    got = jax.jit(lambda x, s: scale_input(x, s, interpret=True))(jnp.arange(256, dtype=F16), 0.5)
    assert got.dtype == F16                    # a weak float64, made a weak float32
    np.testing.assert_array_equal(np.asarray(got, F32), np.arange(256) * 0.5)


@pytest.mark.gpu
def test_gpu_python_numbers_for_0d_inputs_match_jnp():
  x = jnp.arange(256, dtype=F16)
  got = jax.jit(scale_input)(x, 0.1)
  assert got.dtype == F16
  np.testing.assert_array_equal(np.asarray(got, F32), np.asarray(x * 0.1, F32))
  with jax.enable_x64(True):
    got = jax.jit(add_input)(jnp.arange(256, dtype=jnp.int32), 3)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(got, np.arange(256) + 3)


# ---------------------------------------------------------------- small statistics of 3-D tiles carried by loops
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def online_softmax_3d(x, out):
  """Per-head online softmax over (2, 8, 64) chunks: the (2, 8, 1) running max and sum hold 16 elements, too few
  for a register tensor of three axes; carried, they were MG204 at their broadcast, whose hint (index the carry by
  a leading axis) met MG204 at its ml.full."""
  m = ml.full((2, 8, 1), -jnp.inf, F32)
  s = ml.zeros((2, 8, 1), F32)
  for j in range(x.shape[2] // 64):
    t = x.at[:, :, ml.ds(j * 64, 64)][...]
    mn = ml.maximum(m, ml.max(t, axis=2, keepdims=True))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(t - mn), axis=2, keepdims=True)
    m = mn
  for j in range(x.shape[2] // 64):
    t = x.at[:, :, ml.ds(j * 64, 64)][...]
    out.at[:, :, ml.ds(j * 64, 64)][...] = ml.exp(t - m) / s


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def pipelined_max_3d(x, out):
  m = ml.full((2, 8, 1), -jnp.inf, F32)
  buf = ml.smem((2, 8, 64), F32)
  for j in ml.range(x.shape[2] // 64, stages=2):
    ml.copy(x.at[:, :, ml.ds(j * 64, 64)], buf)
    m = ml.maximum(m, ml.max(buf[...], axis=2, keepdims=True))
  out[...] = x[...] - m


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(1,))
def while_max_3d(x, n, out):
  m = ml.full((2, 8, 1), -jnp.inf, F32)
  j = 0
  while j < n[...]:                     # a run-time while carries it too
    m = ml.maximum(m, ml.max(x.at[:, :, ml.ds(j * 64, 64)][...], axis=2, keepdims=True))
    j += 1
  out[...] = x[...] - m


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def floored_max_3d(x, out):
  """A fill of the statistic's shape meeting it outside loops (MG204 at the broadcast, before)."""
  t = x[...]
  out[...] = t - ml.maximum(ml.full((2, 8, 1), 0.5, F32), ml.max(t, axis=2, keepdims=True))


def test_a_small_statistic_of_a_3d_tile_is_carried_by_loops_and_meets_fills():
  x = _rand((2, 8, 256), 8)
  np.testing.assert_allclose(online_softmax_3d(x, interpret=True), jax.nn.softmax(x, axis=2), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(pipelined_max_3d(x, interpret=True), x - jnp.max(x, axis=2, keepdims=True))
  assert "mosaic_gpu" in str(_export(online_softmax_3d, x))
  assert "mosaic_gpu" in str(_export(pipelined_max_3d, x))
  np.testing.assert_array_equal(while_max_3d(x, jnp.int32(4), interpret=True), x - jnp.max(x, axis=2, keepdims=True))
  assert "mosaic_gpu" in str(_export(while_max_3d, x, jnp.int32(4)))
  x = _rand((2, 8, 64), 9)
  np.testing.assert_array_equal(floored_max_3d(x, interpret=True), x - jnp.maximum(0.5, jnp.max(x, 2, keepdims=True)))
  assert "mosaic_gpu" in str(_export(floored_max_3d, x))


@pytest.mark.gpu
def test_gpu_small_statistics_carried_by_loops_match_jnp():
  x = _rand((2, 8, 256), 10)
  np.testing.assert_allclose(online_softmax_3d(x), jax.nn.softmax(x, axis=2), rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(pipelined_max_3d(x), x - jnp.max(x, axis=2, keepdims=True))
  np.testing.assert_array_equal(while_max_3d(x, jnp.int32(4)), x - jnp.max(x, axis=2, keepdims=True))
  x = _rand((2, 8, 64), 11)
  np.testing.assert_array_equal(floored_max_3d(x), x - jnp.maximum(0.5, jnp.max(x, 2, keepdims=True)))


# ---------------------------------------------------------------- call mistakes: where, and what to pass
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def doubled(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


def test_triton_launch_inside_an_expression_is_underlined_at_the_subscript():
  x = jnp.ones((256,), F32)
  with pytest.raises(mg.SignatureError) as info:
    jnp.sum(doubled[(2,)](x), axis=0) + 1
  e = info.value
  line = e.loc.source_line
  assert (e.col_offset, e.end_col_offset) == (line.index("doubled[(2,)]"), line.index("doubled[(2,)]") + 13)
  assert e.message.startswith("doubled[(2,)]: an mgpu_dsl kernel takes no grid at the call")


@mg.autotune(configs=[dict(block_rows=64), dict(block_rows=128)])
@mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=lambda x, block_rows, **kw: (x.shape[0] // block_rows,))
def tuned_scale(x, out, *, block_rows: ml.constexpr, scale: ml.constexpr):
  i = ml.program_id(0)
  w = ml.ds(i * block_rows, block_rows)
  out.at[w][...] = x.at[w][...] * scale


def test_an_autotuned_kernels_unknown_constexpr_hint_lists_only_what_a_call_passes():
  """The hint listed block_rows, which a call may not pass (MG006 'chosen by @mg.autotune')."""
  spec = S((1024, 64), F32)
  for method in (tuned_scale.typed_ir, tuned_scale.mlir, tuned_scale.check):
    with pytest.raises(mg.SignatureError) as info:
      method(spec, scale=2.0, scal=1)
    e = info.value
    assert e.message == "tuned_scale has no constexpr parameter 'scal'"
    assert e.hint == ("did you mean scale=? the constexprs a call passes are: scale (block_rows is chosen by"
                      " @mg.autotune)")
  assert "mosaic_gpu" in tuned_scale.mlir(spec, scale=2.0)             # the hint, followed
  np.testing.assert_array_equal(tuned_scale(jnp.ones((1024, 64), F32), scale=2.0, interpret=True), 2.0)

