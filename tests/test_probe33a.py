"""Probe 33a (known leftovers): two TMA stores of one CTA into elements that may be the same are
ordered unless the sync pass proves them apart (design note 19), and interpret mode reports a
missing order; float tensors with bool or int tensors promote as jnp does; tensor-core windows in
ml.concatenate; the early-return message of a warp-specialised loop."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import sync
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


def _full_waits(kernel, *specs, **constexprs) -> int:
  """How many waits for every TMA store to land (GMEM written) the sync pass put in the kernel."""
  return kernel.typed_ir(*specs, **constexprs).count("awaitstores read_only=False")


# ---------------------------------------------------------------- TMA stores that may overlap
@mg.mgpu_kernel(out_shape=lambda x: S((16, 64), x.dtype), grid=lambda x: (1,))
def alternating_rows(x, out):
  buf = ml.smem((8, 64))
  for t in range(x.shape[0] // 8):
    ml.copy(x.at[ml.ds(t * 8, 8), :], buf)
    buf[...] = buf[...] * 2.0
    ml.copy(buf, out.at[ml.ds((t % 2) * 8, 8), :])


def _alternating_want(x):
  x = np.asarray(x) * 2
  return np.concatenate([x[16:24], x[24:32]])


@mg.mgpu_kernel(out_shape=lambda x, starts: S((8, 64), x.dtype), grid=lambda x, starts: (1,))
def loaded_start(x, starts, out):
  buf = ml.smem((8, 64))
  for t in range(4):
    ml.copy(x.at[ml.ds(t * 8, 8), :], buf)
    ml.copy(buf, out.at[ml.ds(starts[t], 8), :])


@mg.mgpu_kernel(out_shape=lambda x: S((8, 64), x.dtype), grid=lambda x: (2,))
def repeating_tiles(x, out):
  """A grid-stride loop over twice as many tiles as the output has: tiles repeat."""
  buf = ml.smem((4, 64))
  for t in range(ml.program_id(0), 4, ml.num_programs(0)):
    ml.copy(x.at[ml.ds(t * 4, 4), :], buf)
    ml.copy(buf, out.at[ml.ds((t % 2) * 4, 4), :])


@mg.mgpu_kernel(out_shape=lambda x: S((32, 64), x.dtype), grid=lambda x: (1,))
def stored_before_the_loop(x, out):
  a = ml.smem((8, 64))
  b = ml.smem((8, 64))
  ml.copy(x.at[ml.ds(0, 8), :], a)
  ml.copy(a, out.at[ml.ds(0, 8), :])
  for t in range(4):
    ml.copy(x.at[ml.ds(t * 8, 8), :], b)
    b[...] = b[...] + 1.0
    ml.copy(b, out.at[ml.ds(t * 8, 8), :])


def test_tma_stores_that_may_write_the_same_elements_are_ordered():
  """They were silently wrong: `(t % 2) * 8`, a loaded start, repeating grid-stride tiles and a
  window stored before a loop and again in it counted as apart (only windows surely the same were
  ordered); the later store could land first."""
  x = rand.normal(rand.key(0), (32, 64), F32)
  assert _full_waits(alternating_rows, S((32, 64), F32)) == 1
  np.testing.assert_array_equal(alternating_rows(x, interpret=True), _alternating_want(x))
  starts = jnp.array([0, 0, 0, 0], jnp.int32)
  assert _full_waits(loaded_start, S((32, 64), F32), S((4,), jnp.int32)) == 1
  np.testing.assert_array_equal(loaded_start(x, starts, interpret=True), x[24:32])
  assert _full_waits(repeating_tiles, S((16, 64), F32)) == 1
  np.testing.assert_array_equal(repeating_tiles(x[:16], interpret=True), x[8:16])
  assert _full_waits(stored_before_the_loop, S((32, 64), F32)) == 1
  np.testing.assert_array_equal(stored_before_the_loop(x, interpret=True), x + 1.0)
  for k, specs in ((alternating_rows, [S((32, 64), F32)]), (repeating_tiles, [S((16, 64), F32)])):
    _export(k, *specs)


def test_interpret_mode_reports_tma_stores_the_compiler_left_unordered(monkeypatch):
  """A store into elements an earlier store of the CTA may still be writing is a RaceError in
  interpret mode (the checker of the sync pass): with the pass told every pair is apart."""
  monkeypatch.setattr(sync, "disjoint", lambda *a: True)
  x = rand.normal(rand.key(0), (48, 64), F32)     # a shape not compiled before
  with pytest.raises(mg.RaceError) as info:
    alternating_rows(x, interpret=True)
  assert "an earlier TMA store of program (0, 0, 0) may still be writing" in info.value.message, info.value.message


# Stores the pass proves apart keep no wait (memory-bound and persistent loops stay overlapped).
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def row_blocks(x, out):
  buf = ml.smem((8, 64))
  for i in range(x.shape[0] // 8):
    ml.copy(x.at[ml.ds(i * 8, 8), :], buf)
    buf[...] = buf[...] * 2.0
    ml.copy(buf, out.at[ml.ds(i * 8, 8), :])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (2,))
def grid_stride_tiles(x, out):
  buf = ml.smem((8, 32))
  per_row = x.shape[1] // 32
  for t in ml.range(ml.program_id(0), x.shape[0] // 8 * per_row, ml.num_programs(0), stages=2):
    ml.copy(x.at[ml.ds(t // per_row * 8, 8), ml.ds(t % per_row * 32, 32)], buf)
    ml.copy(buf, out.at[ml.ds(t // per_row * 8, 8), ml.ds(t % per_row * 32, 32)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (2,))
def grouped_tiles(x, out):
  bufs = (ml.smem((8, 16)), ml.smem((8, 16)))
  for t in range(ml.program_id(0), (x.shape[0] // 8) * (x.shape[1] // 32), ml.num_programs(0)):
    i, j = ml.grouped_ids(t, x.shape[0] // 8, x.shape[1] // 32, group=2)
    for e in ml.static_range(2):
      ml.copy(x.at[ml.ds(i * 8, 8), ml.ds(j * 32 + e * 16, 16)], bufs[e])
      ml.copy(bufs[e], out.at[ml.ds(i * 8, 8), ml.ds(j * 32 + e * 16, 16)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def two_halves_a_trip(x, out):
  buf = ml.smem((16, 64))
  for i in range(x.shape[0] // 16):
    ml.copy(x.at[ml.ds(i * 16, 16), :], buf)
    ml.copy(buf.at[ml.ds(0, 8), :], out.at[ml.ds(i * 16, 8), :])
    ml.copy(buf.at[ml.ds(8, 8), :], out.at[ml.ds(i * 16 + 8, 8), :])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (2,))
def stride_by_num_programs(x, out):
  buf = ml.smem((8, 64))
  for i in range(x.shape[0] // 8 // 2):
    t = ml.program_id(0) + i * ml.num_programs(0)
    ml.copy(x.at[ml.ds(t * 8, 8), :], buf)
    ml.copy(buf, out.at[ml.ds(t * 8, 8), :])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (2,))
def persistent_while(x, out):
  buf = ml.smem((8, 64))
  t = ml.program_id(0)
  while t < x.shape[0] // 8:
    ml.copy(x.at[ml.ds(t * 8, 8), :], buf)
    ml.copy(buf, out.at[ml.ds(t * 8, 8), :])
    t += ml.num_programs(0)


@pytest.mark.parametrize("kernel", [row_blocks, grid_stride_tiles, grouped_tiles, two_halves_a_trip,
                                    stride_by_num_programs, persistent_while])
def test_stores_proved_apart_keep_no_wait(kernel):
  x = rand.normal(rand.key(1), (64, 64), F32)
  assert _full_waits(kernel, S((64, 64), F32)) == 0
  want = x * 2.0 if kernel is row_blocks else x
  np.testing.assert_array_equal(kernel(x, interpret=True), want)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def nested_blocks(x, out):
  buf = ml.smem((8, 64))
  for i in range(x.shape[0] // 16):
    for j in range(2):
      ml.copy(x.at[ml.ds(i * 16 + j * 8, 8), :], buf)
      ml.copy(buf, out.at[ml.ds(i * 16 + j * 8, 8), :])


def test_nested_loops_blocks_stay_apart():
  """An inner loop's index of static bounds is a range: `i * 16 + j * 8` for j in 0..1 never meets
  another trip's block (without the range the outer trip's stores would be waited for)."""
  x = rand.normal(rand.key(3), (64, 64), F32)
  assert _full_waits(nested_blocks, S((64, 64), F32)) == 0
  np.testing.assert_array_equal(nested_blocks(x, interpret=True), x)


# Register writes into GMEM: other threads' writes of elements that may be the same meet at a barrier.
@mg.mgpu_kernel(out_shape=lambda x: S((12, 64), x.dtype), grid=lambda x: (1,))
def shifted_register_rows(x, out):
  for t in range(4):
    out[ml.ds((t % 2) * 4, 8), :] = x[ml.ds(t * 8, 8), :]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (1,))
def register_row_blocks(x, out):
  for t in range(4):
    out[ml.ds(t * 8, 8), :] = x[ml.ds(t * 8, 8), :] + 1.0


def _barriers(kernel, *specs) -> int:
  return sum(line.split("#")[0].strip() == "barrier" for line in kernel.typed_ir(*specs).splitlines())


def test_register_writes_that_may_meet_other_threads_writes_meet_at_a_barrier():
  """It was silently wrong: rows 4..7 written on one trip by the threads holding rows 0..3 of the
  tile, on the next by those holding rows 4..7, with no barrier between (the windows counted as
  apart: their start depends on the loop index)."""
  assert _barriers(shifted_register_rows, S((32, 64), F32)) == 1
  assert _barriers(register_row_blocks, S((32, 64), F32)) == 0
  x = rand.normal(rand.key(4), (32, 64), F32)
  want = np.zeros((12, 64), np.float32)
  for t in range(4):
    want[(t % 2) * 4:(t % 2) * 4 + 8] = x[t * 8:t * 8 + 8]
  np.testing.assert_array_equal(shifted_register_rows(x, interpret=True), want)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [alternating_rows, repeating_tiles, stored_before_the_loop, grouped_tiles,
                                    nested_blocks, shifted_register_rows])
def test_ordered_and_apart_stores_gpu(kernel):
  n = 16 if kernel is repeating_tiles else 64 if kernel in (grouped_tiles, nested_blocks) else 32
  x = rand.normal(rand.key(2), (n, 64), F32)
  np.testing.assert_array_equal(jax.jit(kernel)(x), kernel(x, interpret=True))


# ---------------------------------------------------------------- bool and int values meeting floats
@mg.mgpu_kernel(out_shape=lambda x, i: x)
def masked_product(x, i, out):
  v = x[...]
  out[...] = v * (v > 0) + (i[...] > 3) * v


@mg.mgpu_kernel(out_shape=lambda x, i: x)
def divided_by_ints(x, i, out):
  out[...] = x[...] / i[...] + i[...] / x[...] - ml.where(x[...] > 0, x[...], i[...])


@mg.mgpu_kernel(out_shape=lambda x, i: i)
def int_times_mask(x, i, out):
  out[...] = i[...] * (x[...] > 0)


def _promotion_inputs(dt):
  x = rand.normal(rand.key(5), (128, 64), dt)
  return x, rand.randint(rand.key(6), (128, 64), 1, 7, jnp.int32)


@pytest.mark.parametrize("dt", [jnp.float32, jnp.bfloat16, jnp.float16])
def test_bool_and_int_values_meeting_floats_promote_as_jnp(dt):
  """`v * mask` and `x / i` were MG104 (dtypes never converted): jnp takes the float's dtype."""
  x, i = _promotion_inputs(dt)
  for kernel, want in ((masked_product, x * (x > 0) + (i > 3) * x),
                       (divided_by_ints, x / i + i / x - jnp.where(x > 0, x, i)),
                       (int_times_mask, i * (x > 0))):
    got = kernel(x, i, interpret=True)
    assert got.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, atol=1e-2)
    _export(kernel, S(x.shape, dt), S(i.shape, jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_and_bool(x, out):
  v = x[...]
  out[...] = v & (v > 0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_and_bool_fixed(x, out):
  v = x[...]
  out[...] = ml.where(v > 0, v, 0)


def test_bitwise_ops_of_a_float_and_a_bool_stay_an_error():
  """jnp rejects `&` of floats: no promotion there. The hint converted the bool to float32, and `&`
  of floats was the next error."""
  expect(float_and_bool, [S((128,), F32)], mg.DtypeMismatchError, "v & (v > 0)",
         "& on v (float32) and v > 0 (bool): dtypes differ and are never converted implicitly",
         hint="& takes integers and bools, as jnp's: to keep v where v > 0 holds, write ml.where(v > 0, v, 0)"
              " (or v * (v > 0))")
  x = jnp.linspace(-1, 1, 128, dtype=F32)      # the hint followed
  np.testing.assert_array_equal(float_and_bool_fixed(x, interpret=True), jnp.where(x > 0, x, 0))


@pytest.mark.gpu
@pytest.mark.parametrize("dt", [jnp.float32, jnp.bfloat16])
def test_bool_and_int_values_meeting_floats_gpu(dt):
  x, i = _promotion_inputs(dt)
  for kernel in (masked_product, divided_by_ints, int_times_mask):
    got, want = jax.jit(kernel)(x, i), kernel(x, i, interpret=True)
    np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=1e-2, atol=1e-2)


# ---------------------------------------------------------------- tensor-core windows in ml.concatenate
def _dot_inputs():
  a = rand.normal(rand.key(7), (64, 64), jnp.float16)
  b = rand.normal(rand.key(8), (64, 64), jnp.float16)
  return a, b, a.astype(F32) @ b.astype(F32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32))
def rotated_dot_columns(a, b, o):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  o[...] = ml.concatenate([acc[:, 3:], acc[:, :3]], axis=1) + ml.concatenate(
      [acc[:, 5:40], acc[:, 40:], acc[:, :5]], axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 61), F32))
def stored_dot_window(a, b, o):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  o[...] = acc[:, 3:]


def test_tensor_core_windows_that_rotate_the_tile_concatenate():
  """`ml.concatenate([acc[:, 3:], acc[:, :3]], axis=1)` of a dot result was MG204 at `acc[:, 3:]`
  (columns off the 8-column tiles), where ml.roll(acc, -3, axis=1) worked: it reads acc rolled now."""
  a, b, acc = _dot_inputs()
  want = jnp.roll(acc, -3, axis=1) + jnp.roll(acc, -5, axis=1)
  np.testing.assert_allclose(rotated_dot_columns(a, b, interpret=True), want, rtol=1e-5, atol=1e-4)
  _export(rotated_dot_columns, S((64, 64), jnp.float16), S((64, 64), jnp.float16))


def test_a_tensor_core_window_used_elsewhere_is_mg204_hinting_the_rotation():
  expect(stored_dot_window, [S((64, 64), jnp.float16), S((64, 64), jnp.float16)], mg.LayoutError, "acc[:, 3:]",
         "columns 3:64 do not start and end on the tensor-core layout's 8-column tiles",
         hint="slice at multiples of 8 columns (64 is the usual chunk); windows that only rotate the tile work as"
              " written, ml.concatenate([acc[:, 3:], acc[:, :3]], axis=1) (ml.roll(acc, -3, axis=1)): compute on"
              " the rolled tile")


@pytest.mark.gpu
def test_tensor_core_windows_that_rotate_the_tile_gpu():
  a, b, _ = _dot_inputs()
  np.testing.assert_allclose(jax.jit(rotated_dot_columns)(a, b), rotated_dot_columns(a, b, interpret=True),
                             rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- a warp-specialised loop after an early return
@mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, n: (a.shape[0] // 64,))
def ws_after_return(a, b, n, c):
  i = ml.program_id(0)
  if n[0] == 0:
    return
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), :][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, n: (a.shape[0] // 64,))
def ws_after_return_fixed(a, b, n, c):        # the hint followed
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  if n[0] == 0:
    return
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), :][...] = acc


_WS_SPECS = [S((128, 128), jnp.float16), S((128, 64), jnp.float16), S((1,), jnp.int32)]


def _ws_inputs():
  a = rand.normal(rand.key(9), (128, 128), jnp.float16)
  b = rand.normal(rand.key(10), (128, 64), jnp.float16)
  return a, b, jnp.array([1], jnp.int32), a.astype(F32) @ b.astype(F32)


def test_a_warp_specialised_loops_buffers_after_an_early_return_name_the_return():
  """MG503 said a_s was allocated inside a loop or branch, where the user wrote it at the kernel's top
  level: the return before it moved the rest of the kernel into the if's else. It then named the return
  and hinted moving the ml.smem(...) above it, which the compiler does since probe 46c."""
  a, b, n, want = _ws_inputs()
  np.testing.assert_allclose(ws_after_return(a, b, n, interpret=True), want, rtol=1e-3, atol=1e-3)
  _export(ws_after_return, *_WS_SPECS)
  np.testing.assert_allclose(ws_after_return_fixed(a, b, n, interpret=True), want, rtol=1e-3, atol=1e-3)
  _export(ws_after_return_fixed, *_WS_SPECS)


@pytest.mark.gpu
def test_a_warp_specialised_loop_after_an_early_return_gpu():
  a, b, n, want = _ws_inputs()
  np.testing.assert_allclose(jax.jit(ws_after_return_fixed)(a, b, n), want, rtol=1e-3, atol=1e-3)


@mg.mgpu_kernel(out_shape=lambda a, b, n: S((a.shape[0], b.shape[1]), F32), grid=lambda a, b, n: (a.shape[0] // 64,))
def ws_return_in_outer_loop(a, b, n, c):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  for t in range(2):
    if t == n[0]:
      return
    acc = ml.zeros((64, 64), F32)
    for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
      ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
      ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c.at[ml.ds(i * 64, 64), :][...] = acc * (t + 1)


def test_a_return_in_a_loop_around_a_warp_specialised_loop_is_called_a_return():
  """MG001 said `break in a loop around ...` at the user's `return` (which leaves the loop as a break)."""
  line = where(ws_return_in_outer_loop, "for k in ml.range")[0]
  expect(ws_return_in_outer_loop, _WS_SPECS, mg.UnsupportedSyntaxError, "return",
         f"return in a loop around a warp-specialised loop (line {line}) is not supported in a kernel", nth=1,
         hint="the producer warpgroup walks every trip of the for loops around a warp-specialised loop, and its"
              " loads cannot depend on a flag they carry: count the trips before the loop instead, for t in"
              " range(count) with count computed from what the return tests (ml.minimum(n[0] + 1, 4)), or drop"
              " warp_specialize=True")
