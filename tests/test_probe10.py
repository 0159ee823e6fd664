"""A user probe's findings (probe 10, tensor cores and pipelines): messages whose text or hint
did not fit the mistake, or that pointed at the wrong line or gave the less useful error first."""
import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from locate import expect, where
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32
MM = (S((128, 256), F16), S((256, 128), F16))
N_X = (S((1,), I32), S((128,), F32))


# ---------------------------------------------------------------- 1. a name a loop or if starts as None
@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32))
def acc_starts_none(a, b, c):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = None
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32))
def acc_starts_zeros(a, b, c):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def test_an_accumulator_started_as_none_says_so_and_hints_its_zeros():
  e = expect(acc_starts_none, MM, mg.LoopCarryTypeError, "acc = ml.dot",
             "acc starts this runtime loop as None and the loop makes it a float32 tensor of shape (128, 128);"
             " a runtime loop carries a value only if it starts as a register value or a number",
             hint="start it as acc = ml.zeros((128, 128), jnp.float32) before the loop")
  assert e.notes == (f"{e.filename}:{where(acc_starts_none, 'for k in')[0]}:2: the runtime loop",)
  acc_starts_zeros.check(*MM)      # the hint works


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scalar_starts_none(n, x, out):
  s = None
  i = 0
  while i < n[0]:
    s = x[0].astype(jnp.float16)
    i += 1
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scalar_starts_cast(n, x, out):
  s = ml.cast(0, jnp.float16)
  i = 0
  while i < n[0]:
    s = x[0].astype(jnp.float16)
    i += 1
  out[...] = x[...] + s.astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def number_starts_none(n, x, out):
  s = None
  for i in range(n[0]):
    s = 3
  out[...] = x[...]


def test_a_scalar_or_number_started_as_none_hints_its_initial_value():
  expect(scalar_starts_none, N_X, mg.LoopCarryTypeError, "s = x[0]",
         "s starts this runtime loop as None and the loop makes it a float16 scalar; a runtime loop"
         " carries a value only if it starts as a register value or a number",
         hint="start it as s = ml.cast(0, jnp.float16) before the loop")
  scalar_starts_cast.check(*N_X)
  expect(number_starts_none, N_X, mg.LoopCarryTypeError, "s = 3",
         "s starts this runtime loop as None and the loop makes it a Python int; a runtime loop"
         " carries a value only if it starts as a register value or a number",
         hint="start it as s = 0 before the loop")


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def none_on_one_path(n, x, out):
  v = None
  if n[0] > 0:
    v = x[...] * 2.0
  out[...] = v + 1.0


def test_a_name_none_on_one_path_through_a_runtime_if_says_so():
  expect(none_on_one_path, N_X, mg.UnboundNameError, "v + 1.0",
         "v is None on one path through the if at line"
         f" {where(none_on_one_path, 'if n[0]')[0]} and a float32 tensor of shape (128,) on the other; after a"
         " runtime if it must be a register value or a number on both",
         hint="start it as v = ml.zeros((128,), jnp.float32) before the if")


# ---------------------------------------------------------------- 2. no bare stages=1 for a warp-specialised loop
UNPIPELINED_WS = "stages=1 without warp_specialize=True"


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32), block=256)
def ws_window_from_counter(a, b, c, *, ws: ml.constexpr = True, stages: ml.constexpr = 2):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  kk = 0
  for k in ml.range(a.shape[1] // 64, stages=stages, warp_specialize=ws):
    ml.copy(a.at[:, ml.ds(kk * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(kk * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
    kk = kk + 1
  c[...] = acc


def test_a_carried_window_in_a_warp_specialised_loop_hints_dropping_warp_specialize():
  expect(ws_window_from_counter, MM, mg.PipelineError, "ml.copy(a.at",
         "the window of this load depends on values computed in the loop body or carried from one"
         " iteration to the next; a pipelined load's window may depend only on the loop index and on"
         " values from before the loop",
         hint="compute the window from the loop index (ml.ds(k * 64, 64)); an element of a register tensor at"
              " the loop index (p[t]) is computed in the body (through SMEM), so read it from the array in"
              f" memory instead (ml.ds(perm[t], 1) of an input perm); or use {UNPIPELINED_WS}")
  ws_window_from_counter.check(*MM, ws=False, stages=1)      # the hint works


@mg.mgpu_kernel(out_shape=lambda x: x, block=256)
def ws_reads_what_it_writes(x, out):
  x_s = ml.smem((64, 128))
  acc = ml.zeros((64, 128), jnp.float32)
  for t in ml.range(x.shape[0] // 64 - 1, stages=2, warp_specialize=True):
    ml.copy(out.at[ml.ds(t * 64, 64)], x_s)
    acc = acc + x_s[...]
    out.at[ml.ds((t + 1) * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((64, 256), x.dtype), block=256)
def ws_two_big_buffers(x, out):
  a_s, b_s = ml.smem((64, 256)), ml.smem((64, 256))
  acc = ml.zeros((64, 256), jnp.float32)
  for k in ml.range(x.shape[0] // 128, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(k * 128, 64)], a_s)
    ml.copy(x.at[ml.ds(k * 128 + 64, 64)], b_s)
    acc = acc + a_s[...] + b_s[...]
  out[...] = acc.astype(out.dtype)


def test_other_stage_hints_of_a_warp_specialised_loop_say_to_drop_it_too():
  e = expect(ws_reads_what_it_writes, [S((512, 128), F32)], mg.PipelineError, "ml.copy(out.at",
             "this pipelined load reads out, which the loop writes: with stages=2 it is issued up to 1"
             " trip(s) early, before those writes")
  assert e.hint.startswith(f"use {UNPIPELINED_WS} (or range())"), e.hint
  with pytest.raises(mg.SmemCapacityError) as info:
    ws_two_big_buffers.check(S((1024, 256), F32))
  assert info.value.hint.startswith(f"use {UNPIPELINED_WS} ("), info.value.hint


# ---------------------------------------------------------------- 3. at the ml.smem(...) to move, not the loop
@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32), block=256)
def ws_buffers_in_a_branch(a, b, c):
  if ml.program_id(0) >= 0:
    a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
    acc = ml.zeros((128, 128), jnp.float32)
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32), block=256)
def ws_buffer_in_an_outer_loop(a, b, c):
  a_s = ml.smem((128, 64))
  acc = ml.zeros((128, 128), jnp.float32)
  for r in range(1):
    b_s = ml.smem((64, 128))
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c[...] = acc


def test_warp_specialised_buffers_allocated_in_a_branch_or_loop_are_reported_at_the_allocation():
  # (since probe 46c buffers under a run-time if move to the kernel's top, where the loop needs them: the
  # branch's kernel builds; a loop's are still reported)
  ws_buffers_in_a_branch.check(*MM)
  for kernel, name, at in ((ws_buffer_in_an_outer_loop, "b_s", "ml.smem((64, 128))"),):
    e = expect(kernel, MM, mg.WarpSpecializeError, at,
               f"{name} is allocated inside a loop; a warp-specialised loop's buffers must be"
               f" allocated at the top of the kernel", hint="move its ml.smem(...) to the top")
    assert e.notes == (f"{e.filename}:{where(kernel, 'for k in')[0]}:{where(kernel, 'for k in')[1]}:"
                       f" the warp-specialised loop",)


# ---------------------------------------------------------------- 4. a dot too wide before the TMA box it needs
@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 512), F32))
def dot_n512(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 512))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, 512), F32))
def dot_n512_transposed_in_a_loop(a, bt, c):
  a_s, bt_s = ml.smem((64, 64)), ml.smem((512, 64))
  acc = ml.zeros((64, 512), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[:, ml.ds(k * 64, 64)], bt_s)
    acc = ml.dot(a_s, bt_s.T, acc)
  c[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 512), F32))
def tma_box_only(a, b, c):
  b_s = ml.smem((64, 512))
  ml.copy(b, b_s)
  c[...] = b_s[...].astype(jnp.float32)


def test_a_dot_wider_than_256_computes_and_the_tma_box_of_its_tile_stays_the_error():
  # a dot of n = 512 is written as two dots of 256 columns since probe 53d (frontend/ops/wide_dots.py), and the
  # copy of a 512-wide window into one buffer is one box since probe 56c (of whole tiles here): it computes
  import numpy as np
  a = jax.random.normal(jax.random.key(0), (64, 64)).astype(F16)
  b = jax.random.normal(jax.random.key(1), (64, 512)).astype(F16)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32)
  np.testing.assert_allclose(np.asarray(dot_n512(a, b, interpret=True), np.float32), want, rtol=1e-2, atol=5e-2)
  jax.export.export(jax.jit(dot_n512), platforms=["cuda"])(S((64, 64), F16), S((64, 512), F16))
  # bt_s's 512 rows (its leading axis) are copied as two TMAs of 256 since probe 52i; two stages of them beside
  # the joined (64, 512) product (wide dot scratch) do not fit in SMEM, one does
  with pytest.raises(mg.SmemCapacityError) as info:
    dot_n512_transposed_in_a_loop.check(S((64, 128), F16), S((512, 128), F16))
  assert "wide dot scratch 128 KiB" in info.value.message and "stages=1" in info.value.hint
  # without a dot too (an untiled buffer: a box of (64, 2, 256) since probe 56c)
  np.testing.assert_array_equal(np.asarray(tma_box_only(a, b, interpret=True)), np.asarray(b, np.float32))
  jax.export.export(jax.jit(tma_box_only), platforms=["cuda"])(S((64, 64), F16), S((64, 512), F16))


# ---------------------------------------------------------------- 5. the stages that fit beside other buffers
@mg.mgpu_kernel(out_shape=lambda a, b, r: S((a.shape[0], b.shape[1]), F16),
                grid=lambda a, b, r: (a.shape[0] // 128, b.shape[1] // 256), block=256)
def stages_and_residual(a, b, r, c, *, stages: ml.constexpr = 4):
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 256))
  r_s = ml.smem((128, 256))
  ml.copy(r.at[ml.ds(i * 128, 128), ml.ds(j * 256, 256)], r_s)
  acc = ml.zeros((128, 256), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=stages):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), ml.ds(j * 256, 256)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s = ml.smem((128, 256))
  c_s[...] = (acc + r_s[...].astype(jnp.float32)).astype(c.dtype)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128), ml.ds(j * 256, 256)])


def test_an_smem_overflow_beside_a_pipelined_loop_names_the_stages_that_fit():
  specs = (S((256, 512), F16), S((512, 256), F16), S((256, 256), F16))
  e = expect(stages_and_residual, specs, mg.SmemCapacityError, "ml.smem((128, 256))",    # r_s: past the limit
             "the kernel's SMEM needs 263168 bytes (a_s 64 KiB, b_s 128 KiB, r_s 64 KiB, c_s 64 KiB, plus"
             " barriers and alignment), more than the 232432 bytes (227 KiB less 16 bytes) a kernel's buffers can use",
             hint="use stages=3, or smaller tiles")
  assert e.notes[0] == (f"{e.filename}:{where(stages_and_residual, 'for k in')[0]}:2:"
                        f" a pipelined loop with stages=4")
  assert e.notes[1].endswith("b_s, 128 KiB, allocated here"), e.notes      # (the largest others, probe 61b)
  stages_and_residual.check(*specs, stages=3)      # the hint works
  # when no stage count fits beside the other buffers, only smaller tiles help
  with pytest.raises(mg.SmemCapacityError) as info:
    loop_beside_a_huge_buffer.check(*MM, S((224, 256), F32))
  assert info.value.hint.startswith("use smaller tiles: big of shape (112, 256) instead of (224, 256)"), info.value.hint


@mg.mgpu_kernel(out_shape=lambda a, b, r: (S((128, 128), F32), r))
def loop_beside_a_huge_buffer(a, b, r, c, r_out):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  big = ml.smem((224, 256), jnp.float32)
  ml.copy(r, big)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c[...] = acc
  ml.copy(big, r_out)
