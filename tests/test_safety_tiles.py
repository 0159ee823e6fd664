"""Interpret mode computes what the GPU computes, or the kernel is rejected: TMA windows of
tensor-core operands (tiled (8, 64) with a 128-byte swizzle) start on whole tiles, and every TMA
window starts on a 16-byte boundary in its array's last dimension (on the H200 a copy from 8
bytes in faults with CUDA_ERROR_ILLEGAL_INSTRUCTION: benchmarks/probe_tma_align.py), both proved
from the index arithmetic, the grid, or `ml.multiple_of` (checked in interpret mode); and the
pipeliner rejects, at the load, a window it cannot prefetch (one that reads a loop carry)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect, where

S = jax.ShapeDtypeStruct
F32, F16, I32 = jnp.float32, jnp.float16, jnp.int32


def rand(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def reference(a, b):
  return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


# ---------------------------------------------------------------------------- tiled windows
@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), F32), grid=(2,))
def rows_at_36(a, b, out):             # a_s is two tiles wide: TMA tiles a in (8, 64) tiles
  i = ml.program_id(0)
  a_s = ml.smem((64, 128), F16)
  b_s = ml.smem((128, 64), F16)
  ml.copy(a.at[ml.ds(i * 36, 64)], a_s)
  ml.copy(b, b_s)
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(a_s, b_s)


def test_a_tensor_core_tile_loaded_from_inside_a_tile_goes_a_row_of_tiles_a_tma():
  # (until probe 46c MG401 "not provably a multiple of 8 (it is 36 in some program)": the tiled TMA would
  # have read the wrong rows; a load from any row now goes one row of tiles a copy)
  a, b = rand((128, 128), F16), rand((128, 64), F16, 1)
  builds(rows_at_36, S(a.shape, F16), S(b.shape, F16))
  want = np.concatenate([reference(a[:64], b), reference(a[36:100], b)])
  np.testing.assert_allclose(rows_at_36(a, b, interpret=True), want, rtol=1e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda a, b, offs: S((64, 64), F32))
def rows_from_data(a, b, offs, out):
  start = ml.max(offs[...])
  a_s = ml.smem((64, 128), F16)
  b_s = ml.smem((128, 64), F16)
  ml.copy(a.at[ml.ds(start, 64)], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_a_window_start_from_data_need_not_be_promised():
  # (until probe 46c MG401 "not provably a multiple of 8", with the promise as the hint)
  a, b = rand((128, 128), F16), rand((128, 64), F16, 1)
  offs = jnp.asarray(np.arange(128) % 13, I32)
  builds(rows_from_data, S(a.shape, F16), S(b.shape, F16), S(offs.shape, I32))
  np.testing.assert_allclose(rows_from_data(a, b, offs, interpret=True), reference(a[12:76], b), rtol=1e-2, atol=5e-2)


@mg.mgpu_kernel(out_shape=lambda a, b, offs: S((64, 64), F32))
def promised_rows(a, b, offs, out):
  start = ml.multiple_of(ml.max(offs[...]), 8)
  a_s = ml.smem((64, 128), F16)
  b_s = ml.smem((128, 64), F16)
  ml.copy(a.at[ml.ds(start, 64)], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


def test_a_promised_multiple_is_accepted_and_checked_in_interpret_mode():
  a, b = rand((128, 128), F16), rand((128, 64), F16, seed=1)
  builds(promised_rows, S((128, 128), F16), S((128, 64), F16), S((128,), I32))
  got = promised_rows(a, b, jnp.full((128,), 24, I32), interpret=True)
  np.testing.assert_allclose(got, reference(a[24:88], b), rtol=1e-3, atol=1e-3)
  with pytest.raises(mg.InterpretError) as e:
    promised_rows(a, b, jnp.full((128,), 20, I32), interpret=True)
  assert e.value.message == ("ml.multiple_of promises a multiple of 8, but ml.max(offs[...]) is 20 in program"
                             " (0, 0, 0)")
  assert (e.value.lineno, e.value.col_offset) == where(promised_rows, "ml.multiple_of(")


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], 128), F32), grid=lambda a, b: (a.shape[0] // 64,))
def proven_rows(a, b, out):
  i = ml.program_id(0)
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 128), F16)
  acc = ml.zeros((64, 128), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64)][...] = acc


def test_windows_proven_by_their_arithmetic_are_accepted():
  a, b = rand((128, 192), F16), rand((192, 128), F16, seed=1)
  builds(proven_rows, S((128, 192), F16), S((192, 128), F16))
  np.testing.assert_allclose(proven_rows(a, b, interpret=True), reference(a, b), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------------------- 16-byte starts
ALIGN_HINT = ("start windows at multiples of 4 (e.g. i * 8); if the start always is one, say so:"
              " ml.ds(ml.multiple_of(first, 4), 8); or read the window into registers, which takes any start,"
              " masked where it runs past the array's end: t.at[1, ml.ds(first, 8)].load(mask=first + ml.arange(8)"
              " < t.shape[1], other=0)")


@mg.mgpu_kernel(out_shape=lambda t, s: S((128,), I32))
def entries_from(t, s, out):           # 8 int32 entries of row 1 from a run-time column
  first = s[0]
  buf = ml.smem((8,), I32)
  ml.copy(t.at[1, ml.ds(first, 8)], buf)
  out[...] = ml.zeros((128,), I32) + buf[3]


def test_a_window_from_a_runtime_column_must_start_on_16_bytes():
  expect(entries_from, [S((4, 32), I32), S((1,), I32)], mg.TmaLimitError, "ml.copy(t.at",
         "TMA copies need a window's start in the last dimension to fall on a 16-byte boundary (a multiple"
         " of 4 int32 elements); the start of t.at[1, ml.ds(first, 8)] in t's last dimension is not provably"
         " one, and a misaligned start faults the GPU", hint=ALIGN_HINT)


@mg.mgpu_kernel(out_shape=lambda t: S((128,), I32))
def entries_at_2(t, out):
  buf = ml.smem((8,), I32)
  ml.copy(t.at[1, ml.ds(2, 8)], buf)
  out[...] = ml.zeros((128,), I32) + buf[3]


def test_a_window_at_a_static_column_off_16_bytes_is_rejected():
  expect(entries_at_2, [S((4, 32), I32)], mg.TmaLimitError, "ml.copy(t.at",
         "TMA copies need a window's start in the last dimension to fall on a 16-byte boundary; this window"
         " of t.at[1, ml.ds(2, 8)] starts at element 2 (2 x 4 bytes), which would fault on the GPU",
         hint="widen the window to start at a multiple of 4: ml.ds(0, 12) (a TMA copy reads zeros before the"
              " array's start and past its end), into a buffer 12 wide there, whose elements 2 to 10 are the window"
              " asked for (buf.at[ml.ds(2, 8)]; a neighbour's tap of a stencil is buf.at[ml.ds(2 + k, n)]); or read"
              " it into registers with a masked load, .load(mask=..., other=0), whose start may be anything")


@mg.mgpu_kernel(out_shape=lambda t, s: S((128,), I32))
def promised_entries(t, s, out):
  first = ml.multiple_of(s[0], 4)
  buf = ml.smem((8,), I32)
  ml.copy(t.at[1, ml.ds(first, 8)], buf)
  out[...] = ml.zeros((128,), I32) + buf[3]


@mg.mgpu_kernel(out_shape=lambda t: S((4, 128), I32), grid=(4,))
def entries_by_program(t, out):        # starts 0, 4, 8, 12 over the grid; 2 * i * 2 by arithmetic
  i = ml.program_id(0)
  buf = ml.smem((4,), I32)
  ml.copy(t.at[i, ml.ds(i * 2 * 2, 4)], buf)
  out.at[i][...] = ml.zeros((128,), I32) + buf[1]


def test_promised_and_proven_column_starts_are_accepted_and_checked_in_interpret_mode():
  t = jnp.arange(4 * 32, dtype=I32).reshape(4, 32)
  builds(promised_entries, S((4, 32), I32), S((1,), I32))
  assert int(promised_entries(t, jnp.array([8], I32), interpret=True)[0]) == 32 + 8 + 3
  with pytest.raises(mg.InterpretError) as e:
    promised_entries(t, jnp.array([6], I32), interpret=True)
  assert e.value.message == "ml.multiple_of promises a multiple of 4, but s[0] is 6 in program (0, 0, 0)"
  builds(entries_by_program, S((4, 32), I32))
  got = np.asarray(entries_by_program(t, interpret=True))[:, 0]
  np.testing.assert_array_equal(got, [32 * i + 4 * i + 1 for i in range(4)])


# ---------------------------------------------------------------------------- the pipeliner
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def carried_window(a, b, out):
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), F32)
  row = 0
  for k in ml.range(4, stages=2):
    ml.copy(a.at[ml.ds(row, 64)], a_s)
    acc = ml.dot(a_s, b_s, acc)
    row = row + 64
  out[...] = acc


def test_a_pipelined_load_whose_window_reads_a_loop_carry_is_rejected_at_the_load():
  expect(carried_window, [S((256, 64), F16), S((64, 64), F16)], mg.PipelineError, "ml.copy(a.at",
         "the window of this load depends on values computed in the loop body or carried from one"
         " iteration to the next; a pipelined load's window may depend only on the loop index and on"
         " values from before the loop",
         hint="compute the window from the loop index (ml.ds(k * 64, 64)); an element of a register tensor at"
              " the loop index (p[t]) is computed in the body (through SMEM), so read it from the array in"
              " memory instead (ml.ds(perm[t], 1) of an input perm); or use stages=1")


@mg.mgpu_kernel(out_shape=lambda idx, a: S((8, 128), F32))
def staged_gather(idx, a, out):        # the row of step k is idx[k], read from SMEM
  table = ml.smem((8,), I32)
  ml.copy(idx, table)
  a_s = ml.smem((8, 128), F32)
  acc = ml.zeros((8, 128), F32)
  for k in ml.range(8, stages=3):
    ml.copy(a.at[ml.ds(table[k] * 8, 8)], a_s)
    acc = acc + a_s[...] * (k + 1).astype(F32)
  out[...] = acc


def test_a_pipelined_load_may_take_its_window_from_an_smem_buffer_the_loop_never_writes():
  idx = jnp.asarray([5, 0, 7, 7, 2, 1, 6, 3], I32)
  a = rand((64, 128))
  got = np.asarray(staged_gather(idx, a, interpret=True))
  rows = np.asarray(a).reshape(8, 8, 128)
  want = sum((k + 1) * rows[int(i)] for k, i in enumerate(idx))
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
  ir = staged_gather.typed_ir(S((8,), I32), S((64, 128), F32))
  assert "stages=3" in ir and "scalarload" in ir
  assert "cp.async.bulk.tensor" in staged_gather.mlir(S((8,), I32), S((64, 128), F32))


@mg.mgpu_kernel(out_shape=lambda idx, a: S((8, 128), F32))
def rewritten_table(idx, a, out):
  table = ml.smem((8,), I32)
  ml.copy(idx, table)
  a_s = ml.smem((8, 128), F32)
  acc = ml.zeros((8, 128), F32)
  for k in ml.range(8, stages=3):
    ml.copy(a.at[ml.ds(table[k] * 8, 8)], a_s)
    acc = acc + a_s[...]
    table[k] = 0
  out[...] = acc


def test_a_pipelined_load_reading_an_smem_buffer_the_loop_writes_is_rejected():
  expect(rewritten_table, [S((8,), I32), S((64, 128), F32)], mg.PipelineError, "ml.copy(a.at",
         "the window of this load depends on values computed in the loop body or carried from one"
         " iteration to the next; a pipelined load's window may depend only on the loop index and on"
         " values from before the loop",
         hint="compute the window from the loop index (ml.ds(k * 64, 64)); an element of a register tensor at"
              " the loop index (p[t]) is computed in the body (through SMEM), so read it from the array in"
              " memory instead (ml.ds(perm[t], 1) of an input perm); or use stages=1")


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def loaded_tile_used_after(a, b, out):
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(4, stages=2):
    ml.copy(a.at[ml.ds(k * 64, 64)], a_s)
    acc = ml.dot(a_s, b_s, acc)
  out[...] = acc + a_s[...].astype(F32)


def test_a_pipelined_buffer_used_after_the_loop_is_reported_where_it_is_used():
  e = expect(loaded_tile_used_after, [S((256, 64), F16), S((64, 64), F16)], mg.PipelineError,
             "a_s[...].astype", "a_s is loaded in a pipelined loop but also used outside it",
             hint="give the loop its own buffers")
  assert e.notes == (f"{e.filename}:{where(loaded_tile_used_after, 'ml.copy(a.at')[0]}:4: the pipelined load",)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def sliced_in_loop(a, b, out):
  a_s = ml.smem((64, 128), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(b, b_s)
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(4, stages=2):
    ml.copy(a.at[ml.ds(k * 64, 64)], a_s)
    acc = ml.dot(a_s.at[:, 0:64], b_s, acc)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((4, 32, 128), F16))
def sliced_copied_out(a, b, out):
  a_s = ml.smem((64, 128), F16)
  for k in ml.range(4, stages=2):
    ml.copy(a.at[ml.ds(k * 64, 64)], a_s)
    ml.copy(a_s.at[0:32], out.at[k])


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def sliced_into_registers(a, b, out):
  acc = ml.zeros((64, 64), F32)
  a_s = ml.smem((64, 64), F16)
  for k in ml.range(4, stages=2):
    ml.copy(a.at[ml.ds(k * 64, 64)], a_s)
    acc = acc + a_s.at[0:64][...].astype(F32)
  out[...] = acc


def test_a_pipelined_buffer_sliced_in_the_loop_is_reported_at_the_slice():
  expect(sliced_copied_out, [S((256, 128), F16), S((64, 64), F16)], mg.PipelineError, "a_s.at[0:32]",
         "a_s is loaded by TMA in a pipelined loop, so the loop may only read it whole (ml.dot, ml.copy"
         " from it, or [...]), read windows of it into registers, or pass windows of it to ml.dot",
         hint="load each window you need into its own buffer of that shape (ml.copy into its own ml.smem), or"
              " read it whole (a_s[...]) and slice the register value, or read the window into registers,"
              " a_s.at[0:32][...] (and store it from there)")
  # a static window read into registers is restaged with the buffer (probe 38h), and so is one ml.dot reads
  # (probe 45b)
  a = np.random.default_rng(0).standard_normal((256, 64)).astype(np.float16)
  got = sliced_into_registers(a, np.zeros((64, 64), np.float16), interpret=True)
  np.testing.assert_allclose(got, a.astype(np.float32).reshape(4, 64, 64).sum(0), rtol=1e-5, atol=1e-4)
  a = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float16)
  b = np.random.default_rng(2).standard_normal((64, 64)).astype(np.float16)
  want = sum(a[k * 64:(k + 1) * 64, :64].astype(np.float32) for k in range(4)) @ b.astype(np.float32)
  np.testing.assert_allclose(sliced_in_loop(a, b, interpret=True), want, rtol=1e-4, atol=1e-3)


def _loop(stages, guarded_load, register_read):
  """A pipelined loop with a non-pipelined load under a branch (read by a dot), or a register
  read of the stage at the top of the body: both raced (the fuzzer found them)."""
  @mg.mgpu_kernel(out_shape=lambda a, b: (S((64, 64), F32), S((64, 64), F32)))
  def loop(a, b, out, out2):
    a_s = ml.smem((64, 64), F16)
    b_s = ml.smem((64, 64), F16)
    first = ml.smem((64, 64), F32)
    first[...] = ml.zeros((64, 64), F32)
    ml.copy(b.at[0:64], b_s)
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(5, stages=stages):
      if guarded_load:
        if k % 2 == 0:
          ml.copy(a.at[ml.ds(k * 64, 64)], b_s)
      ml.copy(a.at[ml.ds(k * 64, 64)], a_s)
      acc = ml.dot(a_s, b_s, acc)
      if register_read:
        acc = acc + a_s[...].astype(F32)
    out[...] = acc
    out2[...] = first[...]
  return loop


@pytest.mark.parametrize("guarded_load,register_read", [(True, False), (False, True)], ids=str)
def test_pipelined_loops_compute_what_the_unpipelined_loop_does(guarded_load, register_read):
  a, b = rand((384, 64), F16), rand((384, 64), F16, seed=1)
  got = _loop(3, guarded_load, register_read)(a, b, interpret=True)
  want = _loop(1, guarded_load, register_read)(a, b, interpret=True)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g, w)


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 64), F32), grid=(2,))
def one_tile_column_at_36(a, b, out):
  i = ml.program_id(0)
  a_s = ml.smem((64, 64), F16)
  b_s = ml.smem((64, 64), F16)
  ml.copy(a.at[ml.ds(i * 36, 64)], a_s)   # one tile column: copied as swizzled rows, any start
  ml.copy(b, b_s)
  out.at[ml.ds(i * 64, 64)][...] = ml.dot(a_s, b_s)


def test_a_one_tile_wide_operand_may_start_on_any_row():
  a, b = rand((128, 64), F16), rand((64, 64), F16, seed=1)
  builds(one_tile_column_at_36, S((128, 64), F16), S((64, 64), F16))
  got = np.asarray(one_tile_column_at_36(a, b, interpret=True))
  np.testing.assert_allclose(got[64:], reference(a[36:100], b), rtol=1e-2, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def promise_of_a_float(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(ml.multiple_of(i, 2.5), 128)][...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def false_static_promise(x, out):
  out.at[ml.ds(ml.multiple_of(12, 8), 128)][...] = x.at[0:128][...]


def test_ml_multiple_of_takes_a_positive_static_int():
  expect(promise_of_a_float, [S((128,), F32)], mg.KernelTypeError, "ml.multiple_of(i, 2.5)",
         "ml.multiple_of needs a positive static int multiple, got 2.5",
         hint="ml.multiple_of(i * n, 8): the multiple is fixed when the kernel is compiled")


def test_a_false_static_promise_is_rejected():
  expect(false_static_promise, [S((256,), F32)], mg.KernelTypeError, "ml.multiple_of(12, 8)",
         "ml.multiple_of(12, 8): 12 is not a multiple of 8",
         hint="promise only what is true, or drop ml.multiple_of")


def test_a_broken_runtime_promise_names_the_fix():
  a, b = rand((128, 128), F16), rand((128, 64), F16, seed=1)
  with pytest.raises(mg.InterpretError) as e:
    promised_rows(a, b, jnp.full((128,), 20, I32), interpret=True)
  assert e.value.code == "MG950"
  assert e.value.hint == "promise only what holds in every program, or make the value a multiple of 8"
