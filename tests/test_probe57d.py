"""Probe 57d (position encodings and KV-cache kernels: RoPE in its variants, ALiBi, T5 buckets, reshape_and_cache,
paged and fp8 caches): the classes found and fixed.

1. lax's dynamic slices and updates of a register tensor at run-time starts (a KV cache's or a ring buffer's
   `lax.dynamic_update_slice(cache, new[None], (pos, 0))`, `lax.dynamic_update_index_in_dim(cache, new, pos, 0)`,
   `lax.dynamic_slice(cache, (pos, 0), (16, d))` with `pos` read from memory) were MG003 ("cannot take a register
   tensor"), where `cache.at[pos].set(new)` compiled: they compute, with lax's clamped starts (jnp_dynamic.py).
2. `jnp.roll(v, s, axis)` / `ml.roll` by a run-time integer shift (a ring buffer rolled to its write position) was
   MG003 ("needs a static int shift"): it is the register gather of `(ml.arange(n) - s) % n` (ops/roll.py).
3. `v.at[ml.ds(p, 16)].set(u)` / `v.at[p:p + 16].add(u)` of a register tensor (no jnp form takes a window at a
   run-time start) had a hint comparing `ml.arange` with `ml.ds(...)`; it now writes lax.dynamic_update_slice.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import S, export, rnd

F32 = jnp.float32
lax = jax.lax


# ------------------------------------------------------------------ 1. lax's dynamic slices at run-time starts
@mg.mgpu_kernel(out_shape=lambda c, n, r, p: c, grid=lambda c, n, r, p: (c.shape[0],))
def cache_updates(c, n, r, p, o):
  b = ml.program_id(0)
  cur = lax.dynamic_update_slice(c[b], n[b], (p[b, 0], 0))              # a chunk of 16 rows
  cur = lax.dynamic_update_index_in_dim(cur, r[b], p[b, 1], 0)          # one row (rank less one)
  o[b] = lax.dynamic_update_slice_in_dim(cur, r[b][None, :] * 2.0, p[b, 2], axis=0)


@mg.mgpu_kernel(out_shape=lambda c, u, p: c, grid=lambda c, u, p: (c.shape[0],))
def column_update(c, u, p, o):
  b = ml.program_id(0)
  o[b] = lax.dynamic_update_slice(c[b], u[b], (p[b, 0], p[b, 1]))       # a (16, 8) window, both starts run-time


@mg.mgpu_kernel(out_shape=lambda c, p: (S((c.shape[0], 16, c.shape[2]), c.dtype), S((c.shape[0], c.shape[2]), c.dtype),
                                        S((c.shape[0], c.shape[1], 8), c.dtype)), grid=lambda c, p: (c.shape[0],))
def cache_windows(c, p, win, row, cols):
  b = ml.program_id(0)
  v = c[b]
  win[b] = lax.dynamic_slice(v, (p[b, 0], 0), (16, v.shape[1]))
  row[b] = lax.dynamic_index_in_dim(v, p[b, 1], 0, keepdims=False)
  cols[b] = lax.dynamic_slice_in_dim(v, p[b, 2], 8, axis=1)


@mg.mgpu_kernel(out_shape=lambda c, p: S((2, 8, c.shape[2]), c.dtype))
def mixed_starts(c, p, o):
  o[...] = lax.dynamic_slice(c[...] * 2.0, (-3, p[0], 0), (2, 8, c.shape[2]))       # a static start: a window


@mg.mgpu_kernel(out_shape=lambda c, n, p: c)
def ring_buffer(c, n, p, o):
  cur = c[...]
  for i in range(n.shape[0]):                       # a run-time loop: the slot is a scalar each trip
    cur = lax.dynamic_update_index_in_dim(cur, n[i, :], (p[0] + i) % cur.shape[0], 0)
  o[...] = cur


_STARTS = np.array([[3, 0, 63], [60, 63, -1], [-5, -70, 17], [100, 17, 0]], np.int32)   # negative, past the end


def test_dynamic_updates_of_a_register_tensor_at_run_time_starts_are_lax_s():
  c, n, r = rnd((4, 64, 128), 0), rnd((4, 16, 128), 1), rnd((4, 128), 2)
  want = []
  for b in range(4):
    cur = lax.dynamic_update_slice(c[b], n[b], (int(_STARTS[b, 0]), 0))
    cur = lax.dynamic_update_index_in_dim(cur, r[b], int(_STARTS[b, 1]), 0)
    want.append(lax.dynamic_update_slice_in_dim(cur, r[b][None, :] * 2.0, int(_STARTS[b, 2]), axis=0))
  np.testing.assert_array_equal(np.asarray(cache_updates(c, n, r, _STARTS, interpret=True)), np.stack(want))
  export(cache_updates, c, n, r, _STARTS)
  u = rnd((4, 16, 8), 3)
  got = column_update(c, u, _STARTS[:, :2], interpret=True)
  want = [lax.dynamic_update_slice(c[b], u[b], tuple(int(s) for s in _STARTS[b, :2])) for b in range(4)]
  np.testing.assert_array_equal(np.asarray(got), np.stack(want))
  export(column_update, c, u, _STARTS[:, :2])


def test_dynamic_slices_of_a_register_tensor_at_run_time_starts_are_lax_s():
  c = rnd((4, 64, 128), 4)
  win, row, cols = cache_windows(c, _STARTS, interpret=True)
  for b, (s0, s1, s2) in enumerate(_STARTS.tolist()):
    np.testing.assert_array_equal(np.asarray(win[b]), lax.dynamic_slice(c[b], (s0, 0), (16, 128)))
    np.testing.assert_array_equal(np.asarray(row[b]), lax.dynamic_index_in_dim(c[b], s1, 0, keepdims=False))
    np.testing.assert_array_equal(np.asarray(cols[b]), lax.dynamic_slice_in_dim(c[b], s2, 8, axis=1))
  export(cache_windows, c, _STARTS)
  c3 = rnd((4, 32, 128), 10)
  for p in (np.array([29], np.int32), np.array([-40], np.int32)):
    np.testing.assert_array_equal(np.asarray(mixed_starts(c3, p, interpret=True)),
                                  np.asarray(lax.dynamic_slice(c3 * 2.0, (-3, int(p[0]), 0), (2, 8, 128))))
  export(mixed_starts, c3, p)


def test_a_ring_buffer_updated_in_a_run_time_loop():
  c, n = rnd((64, 128), 5), rnd((8, 128), 6)
  p = np.array([60], np.int32)
  want = c.copy()
  for i in range(8):
    want[(60 + i) % 64] = n[i]
  np.testing.assert_array_equal(np.asarray(ring_buffer(c, n, p, interpret=True)), want)
  export(ring_buffer, c, n, p)


@mg.mgpu_kernel(out_shape=lambda c, n, p: c, grid=lambda c, n, p: (c.shape[0],))
def update_of_another_dtype(c, n, p, o):
  b = ml.program_id(0)
  o[b] = lax.dynamic_update_slice(c[b], n[b].astype(jnp.bfloat16), (p[b], 0))


def test_an_update_lax_refuses_keeps_mg003_with_a_hint_that_says_what_it_takes():
  expect(update_of_another_dtype, [S((4, 64, 128), F32), S((4, 16, 128), F32), S((4,), jnp.int32)],
         mg.KernelTypeError, "lax.dynamic_update_slice(",
         "dynamic_update_slice cannot take a register tensor inside a kernel",
         hint="lax.dynamic_update_slice of a register tensor takes an update of the operand's dtype and its rank, and"
              " integer starts (static ints or integer scalars, a tuple of one per axis for dynamic_update_slice): "
              "jax.lax.dynamic_update_slice(c[b], n[b].astype(jnp.bfloat16).astype(c[b].dtype), (pos, 0))")


# ------------------------------------------------------------------ 2. jnp.roll by a run-time shift
@mg.mgpu_kernel(out_shape=lambda c, p: (c, S((2, c.shape[2]), c.dtype)), grid=lambda c, p: (c.shape[0],))
def rolled(c, p, o, rows):
  b = ml.program_id(0)
  o[b] = jnp.roll(jnp.roll(c[b], p[b, 0], axis=0), -p[b, 1], axis=1)
  if b == 0:
    rows[...] = jnp.stack([ml.roll(c[0, 0, :], p[0, 2]), jnp.roll(c[1, 0, :], (p[1, 2], p[2, 2]))])


@mg.mgpu_kernel(out_shape=lambda c, p: c)
def rolled_flat(c, p, o):
  o[...] = jnp.roll(c[...], p[0])


def test_jnp_roll_by_a_run_time_shift_is_a_register_gather():
  c = rnd((4, 64, 128), 7)
  p = np.array([[3, 5, 130], [-48, -1, -7], [64, 128, 9], [0, 300, 0]], np.int32)
  o, rows = rolled(c, p, interpret=True)
  for b in range(4):
    np.testing.assert_array_equal(np.asarray(o[b]), np.roll(np.roll(c[b], p[b, 0], 0), -p[b, 1], 1))
  np.testing.assert_array_equal(np.asarray(rows), np.stack([np.roll(c[0, 0], 130), np.roll(c[1, 0], -7 + 9)]))
  export(rolled, c, p)


def test_a_flattened_roll_of_a_tile_by_a_run_time_shift_keeps_mg003():
  expect(rolled_flat, [S((64, 128), F32), S((4,), jnp.int32)], mg.KernelTypeError, "jnp.roll(",
         "jnp.roll (as ml.roll) needs a static int shift, got p[0]",
         hint="roll by a Python int (a constexpr, a shape); for a run-time shift s, gather the values rolled from the"
              " ref they came from: ref[:, (ml.arange(128) - s) % 128]")


@mg.mgpu_kernel(out_shape=lambda c, n, p: c)
def whole_update(c, n, p, o):
  o[...] = lax.dynamic_update_slice(c[...], n[...] * 2.0, (p[0], p[1]))      # every start clamped to 0


@mg.mgpu_kernel(out_shape=lambda c, p, q: (S((8, c.shape[1]), c.dtype), c))
def narrow_integer_starts(c, p, q, win, o):
  win[...] = lax.dynamic_slice(c[...] * 1.0, (p[1], 0), (8, c.shape[1]))     # uint32: clamped, never negative
  o[...] = jnp.roll(c[...], q[0], axis=0)                                     # int16


def test_starts_and_shifts_of_other_integer_types():
  c = rnd((64, 128), 13)
  p, q = np.array([5, 4000000000], np.uint32), np.array([-5, 300], np.int16)
  win, o = narrow_integer_starts(c, p, q, interpret=True)
  np.testing.assert_array_equal(np.asarray(win), c[56:64])
  np.testing.assert_array_equal(np.asarray(o), np.roll(c, -5, 0))
  export(narrow_integer_starts, c, p, q)
  n = rnd((64, 128), 14)
  np.testing.assert_array_equal(np.asarray(whole_update(c, n, np.array([5, -4], np.int32), interpret=True)), n * 2.0)


# ------------------------------------------------------------------ 3. .at[] of a window at a run-time start
@mg.mgpu_kernel(out_shape=lambda c, n, p: c, grid=lambda c, n, p: (c.shape[0],))
def at_window(c, n, p, o):
  b = ml.program_id(0)
  v = c[b]
  o[b] = v.at[ml.ds(p[b], 16), :].add(n[b])


@mg.mgpu_kernel(out_shape=lambda c, n, p: c, grid=lambda c, n, p: (c.shape[0],))
def at_window_hinted(c, n, p, o):
  b = ml.program_id(0)
  v = c[b]
  o[b] = jax.lax.dynamic_update_slice(v, jax.lax.dynamic_slice(v, (p[b], 0), n[b].shape) + n[b], (p[b], 0))


@mg.mgpu_kernel(out_shape=lambda c, n, p: c, grid=lambda c, n, p: (c.shape[0],))
def at_slice(c, n, p, o):
  b = ml.program_id(0)
  o[b] = c[b].at[p[b]:p[b] + 16].set(n[b])


def test_at_of_a_run_time_window_hints_lax_dynamic_update_slice_which_computes():
  specs = [S((4, 64, 128), F32), S((4, 16, 128), F32), S((4,), jnp.int32)]
  expect(at_window, specs, mg.KernelTypeError, "v.at", "a register tensor has no attribute 'at'",
         hint="a window of a register tensor at a run-time start is updated by lax: jax.lax.dynamic_update_slice(v,"
              " jax.lax.dynamic_slice(v, (p[b], 0), n[b].shape) + n[b], (p[b], 0))")
  expect(at_slice, specs, mg.KernelTypeError, "c[b].at", "a register tensor has no attribute 'at'",
         hint="a window of a register tensor at a run-time start is updated by lax: jax.lax.dynamic_update_slice("
              "c[b], n[b], (p[b], 0))")
  c, n, p = rnd((4, 64, 128), 8), rnd((4, 16, 128), 9), np.array([3, 48, 0, 17], np.int32)
  want = c.copy()
  for b in range(4):
    want[b, p[b]:p[b] + 16] += n[b]
  np.testing.assert_array_equal(np.asarray(at_window_hinted(c, n, p, interpret=True)), want)


# ------------------------------------------------------------------ 4. a gather of one row beside a row-wise tile
@mg.mgpu_kernel(out_shape=lambda c, n: c)
def carried_cache(c, n, o):
  def body(i, cache):
    prev = lax.dynamic_index_in_dim(cache, (i - 1) % 64, 0, keepdims=False)
    return lax.dynamic_update_index_in_dim(cache, n[i, :] + prev, i, 0)
  o[...] = lax.fori_loop(0, n.shape[0], body, c[...])


@mg.mgpu_kernel(out_shape=lambda c, n: c)
def one_row_gather(c, n, o):
  cache = c[...]
  for i in range(n.shape[0]):
    prev = cache[i + ml.arange(1)][0]
    cache = ml.where(ml.arange(64)[:, None] == i, prev[None, :] + n[i, :], cache)
  o[...] = cache


def _carried_reference(c, n):
  want = c.copy()
  for i in range(n.shape[0]):
    want[i] = n[i] + want[(i - 1) % 64]
  return want


def _one_row_reference(c, n):
  want = c.copy()
  for i in range(n.shape[0]):
    want[i] = want[i] + n[i]
  return want


def test_a_gather_of_one_row_beside_a_row_wise_tile_builds():
  """The gather's (1, 128) positions take the row-wise tile's column-vector layout, whose size-1 axis the registers
  squeeze: their `arange` along axis 1 failed in Mosaic GPU ("`dimension` must be smaller than the rank", MG900);
  the lowering now counts the axis among those kept."""
  c, n = rnd((64, 128), 11), rnd((16, 128), 12)
  np.testing.assert_allclose(np.asarray(carried_cache(c, n, interpret=True)), _carried_reference(c, n), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(one_row_gather(c, n, interpret=True)), _one_row_reference(c, n))
  export(carried_cache, c, n)
  export(one_row_gather, c, n)


# ------------------------------------------------------------------ GPU
@pytest.mark.gpu
def test_run_time_slices_updates_and_rolls_on_the_gpu():
  c, n, r = rnd((4, 64, 128), 0), rnd((4, 16, 128), 1), rnd((4, 128), 2)
  np.testing.assert_array_equal(np.asarray(cache_updates(c, n, r, _STARTS)),
                                np.asarray(cache_updates(c, n, r, _STARTS, interpret=True)))
  u = rnd((4, 16, 8), 3)
  np.testing.assert_array_equal(np.asarray(column_update(c, u, _STARTS[:, :2])),
                                np.asarray(column_update(c, u, _STARTS[:, :2], interpret=True)))
  for got, want in zip(cache_windows(c, _STARTS), cache_windows(c, _STARTS, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  n8, p = rnd((8, 128), 6), np.array([60], np.int32)
  np.testing.assert_array_equal(np.asarray(ring_buffer(c[0], n8, p)), np.asarray(ring_buffer(c[0], n8, p, interpret=True)))
  pr = np.array([[3, 5, 130], [-48, -1, -7], [64, 128, 9], [0, 300, 0]], np.int32)
  for got, want in zip(rolled(c, pr), rolled(c, pr, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  c2, n2 = rnd((64, 128), 11), rnd((16, 128), 12)
  np.testing.assert_allclose(np.asarray(carried_cache(c2, n2)), _carried_reference(c2, n2), rtol=1e-6)
  np.testing.assert_array_equal(np.asarray(one_row_gather(c2, n2)), _one_row_reference(c2, n2))
