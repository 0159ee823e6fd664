"""Probe 48c (atomics, locks and cross-program reductions): Triton's `tl.atomic_cas(lock, 0, 1)` spin lock and
`tl.atomic_xchg(lock, 0)` release (its layer-norm backward tutorial) and the old value of a single element's
atomic_add (a split-K ticket whose last program finishes the sum) were missing: ml.atomic_cas and ml.atomic_xchg
were MG002, and `t = ml.atomic_add(count, 1)` was None (MG004). Now they are PTX `atom`s by one thread of the CTA,
with Triton's sem= and scope=, and interpret mode orders the programs as their acquires and releases do, so a
critical section and a last program's reads are no race, and a spin on a lock no program will release is an
InterpretError that names the holder (frontend/ops/atomic_rmw.py, lowering/atomic_rmw.py, interpret_sync.py)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F16, F32, I32, U32 = jnp.float16, jnp.float32, jnp.int32, jnp.uint32
GROUPS = 4


def _export(kernel, *specs) -> str:
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


def _atoms(text: str) -> set:
  return set(re.findall(r"atom\.[a-z_]+\.[a-z]+\.[a-z]+\.[a-z0-9]+", text))


# ---------------------------------------------------------------- Triton's layer-norm backward, with locks
@mg.mgpu_kernel(out_shape=lambda dy, x, w, mean, rstd: (
    S(x.shape, x.dtype), S((GROUPS, x.shape[1]), F32), S((GROUPS, x.shape[1]), F32), S((2 * GROUPS,), I32)),
    grid=lambda dy, x, w, mean, rstd: (x.shape[0],))
def layer_norm_bwd_dx_fused(dy, x, w, mean, rstd, dx, dw, db, lock):
  row = ml.program_id(0)
  n = x.shape[1]
  cols = ml.arange(128)
  mask = cols < n
  xr = x.at[row, ml.ds(0, 128)].load(mask=mask, other=0.0).astype(jnp.float32)
  dyr = dy.at[row, ml.ds(0, 128)].load(mask=mask, other=0.0).astype(jnp.float32)
  wr = w.at[ml.ds(0, 128)].load(mask=mask, other=0.0).astype(jnp.float32)
  xhat = ml.where(mask, (xr - mean[row]) * rstd[row], 0.0)
  wdy = ml.where(mask, wr * dyr, 0.0)
  c1 = ml.sum(xhat * wdy) / n
  c2 = ml.sum(wdy) / n
  dx.at[row, ml.ds(0, 128)].store(((wdy - (xhat * c1 + c2)) * rstd[row]).astype(dx.dtype), mask=mask)
  partial_dw = dyr * xhat
  partial_db = dyr
  lock_id = row % GROUPS
  while ml.atomic_cas(lock.at[lock_id], 0, 1) == 1:
    pass
  count = lock[lock_id + GROUPS]
  if count == 0:
    ml.atomic_xchg(lock.at[lock_id + GROUPS], 1)
  else:
    partial_dw += dw.at[lock_id, ml.ds(0, 128)].load(mask=mask, other=0.0)
    partial_db += db.at[lock_id, ml.ds(0, 128)].load(mask=mask, other=0.0)
  dw.at[lock_id, ml.ds(0, 128)].store(partial_dw, mask=mask)
  db.at[lock_id, ml.ds(0, 128)].store(partial_db, mask=mask)
  ml.atomic_xchg(lock.at[lock_id], 0)


def _layer_norm_inputs(m, n, seed=0):
  rng = np.random.default_rng(seed)
  x, dy = (rng.standard_normal((m, n)).astype(np.float32) for _ in range(2))
  w = rng.standard_normal(n).astype(np.float32)
  mean = x.mean(1).astype(np.float32)
  rstd = (1 / np.sqrt(x.var(1) + 1e-5)).astype(np.float32)
  return dy, x, w, mean, rstd


def _layer_norm_reference(dy, x, w, mean, rstd):
  xhat = (x - mean[:, None]) * rstd[:, None]
  wdy = w * dy
  c1 = (xhat * wdy).mean(1, keepdims=True)
  c2 = wdy.mean(1, keepdims=True)
  return (wdy - (xhat * c1 + c2)) * rstd[:, None], (dy * xhat).sum(0), dy.sum(0)


def _check_layer_norm(outs, args):
  dx, dw, db, lock = (np.asarray(o) for o in outs)
  dx_ref, dw_ref, db_ref = _layer_norm_reference(*args)
  np.testing.assert_allclose(dx, dx_ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(dw.sum(0), dw_ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(db.sum(0), db_ref, rtol=1e-4, atol=1e-4)
  np.testing.assert_array_equal(lock, [0] * GROUPS + [1] * GROUPS)    # released, and each group's count set


def test_layer_norm_backward_accumulates_partial_sums_under_locks():
  """Triton's tutorial as written (a tail of 100 columns in 128, 37 rows in 4 lock groups): it was MG002 at
  ml.atomic_cas; then the critical section's reads and writes of dw, db and the count were races."""
  args = _layer_norm_inputs(37, 100)
  _check_layer_norm(layer_norm_bwd_dx_fused(*args, interpret=True), args)
  text = _export(layer_norm_bwd_dx_fused, *(S(a.shape, a.dtype) for a in args))
  assert _atoms(text) == {"atom.acq_rel.gpu.cas.b32", "atom.acq_rel.gpu.exch.b32"}


@pytest.mark.gpu
def test_layer_norm_backward_with_locks_on_the_gpu():
  args = _layer_norm_inputs(301, 100, seed=1)
  _check_layer_norm(jax.jit(layer_norm_bwd_dx_fused)(*args), args)


# ---------------------------------------------------------------- a ticket: the last program finishes the sum
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[1],), F32), S((), I32)),
                grid=lambda x: (x.shape[0] // 64,))
def split_k_last_program(x, acc, out, count):
  i = ml.program_id(0)
  ml.atomic_add(acc.at[:], ml.sum(x.at[ml.ds(i * 64, 64), :][...], axis=0))
  ticket = ml.atomic_add(count, 1)
  if ticket == ml.num_programs(0) - 1:        # every other program has added its part
    out[...] = ml.sqrt(ml.abs(acc[...]))


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[1],), F32), S((x.shape[0] // 64, x.shape[1]), F32), S((), I32)),
                grid=lambda x: (x.shape[0] // 64,))
def every_program_reads_the_sum(x, acc, out, count):
  i = ml.program_id(0)
  ml.atomic_add(acc.at[:], ml.sum(x.at[ml.ds(i * 64, 64), :][...], axis=0))
  ticket = ml.atomic_add(count, 1)
  out.at[i][...] = acc[...] + ticket.astype(jnp.float32)


def test_a_ticket_lets_the_last_program_read_the_totals():
  """`t = ml.atomic_add(count, 1)` was None; the last program's read of acc was MG951."""
  x = np.random.default_rng(1).standard_normal((256, 128)).astype(np.float32)
  acc, out, count = split_k_last_program(x, interpret=True)
  np.testing.assert_allclose(out, np.sqrt(np.abs(x.sum(0))), rtol=1e-5, atol=1e-5)
  assert int(count) == 4
  text = _export(split_k_last_program, S(x.shape, x.dtype))
  assert _atoms(text) == {"atom.acq_rel.gpu.add.s32"}      # (the parts stay relaxed `red`s)
  with pytest.raises(mg.RaceError) as info:       # a program's read before the others' tickets
    every_program_reads_the_sum(x, interpret=True)
  assert f":{where(every_program_reads_the_sum, 'out.at[i][...] = acc')[0]}:" in str(info.value)   # (a note)


@pytest.mark.gpu
def test_a_ticket_on_the_gpu():
  x = np.random.default_rng(2).standard_normal((64 * 132, 128)).astype(np.float32)
  for _ in range(3):
    acc, out, count = jax.jit(split_k_last_program)(x)
    np.testing.assert_allclose(out, np.sqrt(np.abs(x.sum(0, dtype=np.float64))), rtol=1e-3, atol=1e-3)
    assert int(count) == 132


# ---------------------------------------------------------------- a counter under a lock: mutual exclusion
@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32), grid=lambda x: (x.shape[0],))
def count_under_a_lock(x, lock):
  while ml.atomic_cas(lock.at[0], 0, 1) == 1:
    pass
  n = lock[1]                      # a plain read and write: only the lock's holder runs them
  lock[1] = n + 1
  ml.atomic_xchg(lock.at[0], 0)


@pytest.mark.gpu
def test_a_lock_excludes_on_the_gpu():
  out = jax.jit(count_under_a_lock)(np.zeros(1000, np.float32))
  np.testing.assert_array_equal(out, [0, 1000])


def test_a_lock_excludes_in_interpret_mode():
  np.testing.assert_array_equal(count_under_a_lock(np.zeros(5, np.float32), interpret=True), [0, 5])


# ---------------------------------------------------------------- spins that never end in interpret mode
@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((1,), I32)), grid=lambda x: (x.shape[0] // 128,))
def never_released(x, out, lock):
  v = x.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  while ml.atomic_cas(lock.at[0], 0, 1) == 1:
    pass
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S((), I32)), grid=lambda x: (x.shape[0] // 128,))
def grid_barrier(x, out, count):
  i = ml.program_id(0)
  ml.atomic_add(count, 1)
  while ml.atomic_add(count, 0) < ml.num_programs(0):
    pass
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((x.shape[0] // 128, 128), F32), S((x.shape[0] // 128,), I32)),
                grid=lambda x: (x.shape[0] // 128,))
def chained_partials(x, out, partial, flags):      # stream-K's fix-up: each program adds the next one's partial
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  if i == ml.num_programs(0) - 1:
    partial.at[i][...] = v
  else:
    while ml.atomic_cas(flags.at[i + 1], 1, 1) != 1:     # wait for program i + 1's partial
      pass
    partial.at[i][...] = v + partial.at[i + 1][...]
  if i == 0:
    out[...] = partial.at[0][...]
  else:
    ml.atomic_xchg(flags.at[i], 1)


def test_a_spin_that_never_ends_names_the_lock_and_its_holder():
  """A lock an ended program still holds spun forever (the programs run one after another): an InterpretError
  at the loop, not a hang."""
  with pytest.raises(mg.InterpretError) as info:
    never_released(np.ones(512, np.float32), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(never_released, "while ml.atomic_cas")
  assert e.message == ("this while loop never ends in program (1, 0, 0): a trip changes neither what it carries"
                       " nor any memory, so its condition stays true")
  assert e.notes[0].endswith("ml.atomic_cas finds lock[0] = 1, last set by program (0, 0, 0) at"
                             f" {e.filename}:{e.lineno}:{e.col_offset + 6}, and no other program runs while this"
                             " one waits (interpret mode runs them one after another)")
  assert e.hint.startswith("program (0, 0, 0) ended without setting lock[0] back: release a lock in every program"
                           " that takes it, ml.atomic_xchg(lock.at[...], 0)")


def test_a_program_may_wait_for_later_ones_that_the_gpu_holds_at_once():
  """A program waiting for a later one (stream-K's fix-up, a grid barrier) spun forever when the programs run one
  after another: now it steps aside until memory changes. More waiting programs than the GPU surely holds at once
  (one per SM) is an InterpretError: the next may never start there."""
  x = np.random.default_rng(5).standard_normal(128 * 6).astype(np.float32)
  out, partial, flags = chained_partials(x, interpret=True)
  np.testing.assert_allclose(out, x.reshape(6, 128).sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(flags, [0] + [1] * 5)
  assert _atoms(_export(chained_partials, S(x.shape, F32))) == {"atom.acq_rel.gpu.cas.b32", "atom.acq_rel.gpu.exch.b32"}
  out, count = grid_barrier(x, interpret=True)
  np.testing.assert_array_equal(out, x * 2)
  with pytest.raises(mg.InterpretError) as info:
    grid_barrier(np.ones(128 * 200, np.float32), interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(grid_barrier, "while ml.atomic_add")
  assert e.message == ("program (0, 0, 0) waits here for programs that have not started while 132 programs wait: the"
                       " GPU holds 132 programs at once for certain (one per SM), so program (132, 0, 0) may never"
                       " start there and this hangs")


@pytest.mark.gpu
def test_waits_for_later_programs_on_the_gpu():
  x = np.random.default_rng(6).standard_normal(128 * 100).astype(np.float32)
  out, partial, flags = jax.jit(chained_partials)(x)
  np.testing.assert_allclose(out, x.reshape(100, 128).sum(0), rtol=1e-4, atol=1e-4)
  out, count = jax.jit(grid_barrier)(x)
  np.testing.assert_array_equal(out, x * 2)


# ---------------------------------------------------------------- dtypes, sem=, scope=, mask=
@mg.mgpu_kernel(out_shape=lambda x: (S((4,), F32), S((4,), U32), S((4,), F32)), grid=(4,))
def exchange_and_swap(x, f, u, o):
  i = ml.program_id(0)
  old = ml.atomic_xchg(f.at[i], x[i], sem="release", scope="gpu")
  seen = ml.atomic_cas(u.at[i], 0, 7, sem="acquire")
  o[i] = old + seen.astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), I32), S((4,), I32)), grid=(4,))
def masked_exchange(x, flags, olds):
  i = ml.program_id(0)
  olds[i] = ml.atomic_xchg(flags.at[i], 5, mask=x[i] > 0, scope="cta")


def test_exchange_and_swap_of_each_dtype_and_order():
  x = np.arange(1, 5, dtype=np.float32)
  f, u, o = exchange_and_swap(x, interpret=True)
  np.testing.assert_array_equal(f, x)
  np.testing.assert_array_equal(u, [7] * 4)
  np.testing.assert_array_equal(o, [0] * 4)
  assert _atoms(_export(exchange_and_swap, S((4,), F32))) == {"atom.release.gpu.exch.b32", "atom.acquire.gpu.cas.b32"}
  flags, olds = masked_exchange(np.array([1, -1, 2, -2], np.float32), interpret=True)
  np.testing.assert_array_equal(flags, [5, 0, 5, 0])
  np.testing.assert_array_equal(olds, [0, 0, 0, 0])
  assert _atoms(_export(masked_exchange, S((4,), F32))) == {"atom.acq_rel.cta.exch.b32", "atom.acq_rel.cta.cas.b32"}


@pytest.mark.gpu
def test_exchange_and_swap_on_the_gpu():
  x = np.arange(1, 5, dtype=np.float32)
  f, u, o = jax.jit(exchange_and_swap)(x)
  np.testing.assert_array_equal(f, x)
  np.testing.assert_array_equal(u, [7] * 4)
  np.testing.assert_array_equal(o, [0] * 4)
  flags, olds = jax.jit(masked_exchange)(np.array([1, -1, 2, -2], np.float32))
  np.testing.assert_array_equal(flags, [5, 0, 5, 0])
  np.testing.assert_array_equal(olds, [0, 0, 0, 0])


# ---------------------------------------------------------------- what they do not take
@mg.mgpu_kernel(out_shape=lambda x: S((4,), I32), grid=(4,))
def lock_in_smem(x, out):
  b = ml.smem((4,), I32)
  b[...] = ml.zeros((4,), I32)
  out[ml.program_id(0)] = ml.atomic_cas(b.at[0], 0, 1)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), I32), grid=(4,))
def locks_of_a_window(x, lock):        # (of an output it returns the old values since probe 49c)
  b = ml.smem((128,), I32)
  b[...] = ml.zeros((128,), I32)
  ml.atomic_cas(b.at[ml.ds(0, 128)], 0, 1)
  lock[...] = b[...]


@mg.mgpu_kernel(out_shape=lambda x: S((4,), I32), grid=(4,))
def sequential_consistency(x, lock):
  while ml.atomic_cas(lock.at[0], 0, 1, sem="seq_cst") == 1:
    pass


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F16), grid=(4,))
def half_lock(x, o):
  ml.atomic_xchg(o.at[0], 1.0)          # (a loop of atom.cas.b16 since probe 53c: tests/test_probe53c.py)


@mg.mgpu_kernel(out_shape=lambda x: S((16,), I32), grid=lambda x: (x.shape[0] // 128,))
def ordered_histogram(x, h):
  ml.atomic_add(h.at[x.at[ml.ds(ml.program_id(0) * 128, 128)][...]], 1, sem="release")


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((128,), F32), S((), I32)), grid=lambda x: (x.shape[0] // 128,))
def released_parts(x, acc, out, count):
  ml.atomic_add(acc.at[:], x.at[ml.ds(ml.program_id(0) * 128, 128)][...], sem="release")
  if ml.atomic_add(count, 1) == ml.num_programs(0) - 1:
    out[...] = acc[...]


def test_sem_of_a_tensors_atomics():
  """A window's atomics take sem= as a fence around them; a scatter's (one relaxed `red` per element) do not, and
  its sem= was silently dropped."""
  x = np.random.default_rng(3).standard_normal(512).astype(np.float32)
  acc, out, count = released_parts(x, interpret=True)
  np.testing.assert_allclose(out, x.reshape(4, 128).sum(0), rtol=1e-5, atol=1e-5)
  assert "fence.acq_rel.gpu;" in _export(released_parts, S((512,), F32))
  expect(ordered_histogram, [S((512,), I32)], mg.KernelTypeError, "ml.atomic_add(",
         "ml.atomic_add's sem='release' is not supported on a scatter (or a masked window that may leave its array):"
         " its updates are relaxed")


@mg.mgpu_kernel(out_shape=lambda x: S((4,), I32), grid=(4,))
def value_for_the_lock(x, lock):
  while ml.atomic_cas(lock[ml.program_id(0)], 0, 1) == 1:
    pass


def test_what_the_atoms_do_not_take_is_said_at_the_call():
  spec = [S((4,), F32)]
  expect(value_for_the_lock, spec, mg.KernelTypeError, "ml.atomic_cas(",
         "ml.atomic_cas needs a ref (one element of an output, e.g. lock.at[0]), got a scalar",
         hint="pass the element's window, ml.atomic_cas(lock.at[ml.program_id(0)], ...), not a value read from it")
  expect(lock_in_smem, spec, mg.KernelTypeError, "ml.atomic_cas(b.at[0], 0, 1)",
         "ml.atomic_cas on an SMEM buffer: a lock or a ticket lives in an output (GMEM), where programs meet",
         hint="a CTA's own threads need no lock: update SMEM plainly between barriers (each element is held by one"
              " thread), or make the lock an output (jnp.int32 in out_shape; it starts at 0)")
  expect(locks_of_a_window, spec, mg.KernelTypeError, "ml.atomic_cas(",
         "ml.atomic_cas of a tensor of elements in an SMEM buffer: it updates elements of an output (GMEM)",
         hint="a CTA's own threads each hold their elements: read them, select and store plainly between barriers,"
              " old = buf[...]; buf[...] = ml.where(old == cmp, val, old)")
  expect(sequential_consistency, spec, mg.KernelTypeError, "ml.atomic_cas(",
         "ml.atomic_cas's sem= must be one of 'relaxed', 'acquire', 'release', 'acq_rel', got 'seq_cst'",
         hint="sem='acq_rel' (Triton's default)")
  # (a float32 max's value, float_max_value, computes since probe 49c: test_probe49c)
  # (a float16 xchg was MG106 here; since probe 53c it is a loop of atom.cas.b16)
  np.testing.assert_array_equal(np.asarray(half_lock(np.zeros(4, np.float32), interpret=True), np.float32),
                                [1, 0, 0, 0])


# ---------------------------------------------------------------- what a lock does not order stays a race
@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((2,), I32)), grid=lambda x: (x.shape[0],))
def one_program_skips_the_lock(x, acc, lock):
  v = ml.full((128,), 1.0, F32)
  if ml.program_id(0) == 2:
    acc[...] = v
  else:
    while ml.atomic_cas(lock.at[0], 0, 1) == 1:
      pass
    if ml.atomic_xchg(lock.at[1], 1) == 0:
      acc[...] = v
    else:
      acc[...] = acc[...] + v
    ml.atomic_xchg(lock.at[0], 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((4,), I32)), grid=lambda x: (x.shape[0],))
def two_locks_for_one_array(x, acc, lock):
  g = ml.program_id(0) % 2
  v = ml.full((128,), 1.0, F32)
  while ml.atomic_cas(lock.at[g], 0, 1) == 1:
    pass
  if ml.atomic_xchg(lock.at[2], 1) == 0:
    acc[...] = v
  else:
    acc[...] = acc[...] + v
  ml.atomic_xchg(lock.at[g], 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((2,), I32)), grid=lambda x: (x.shape[0],))
def writes_after_the_release(x, acc, lock):
  v = ml.full((128,), 1.0, F32)
  while ml.atomic_cas(lock.at[0], 0, 1) == 1:
    pass
  if ml.atomic_xchg(lock.at[1], 1) == 0:
    acc[...] = v
  ml.atomic_xchg(lock.at[0], 0)
  acc[...] = acc[...] + v


@pytest.mark.parametrize("kernel, at", [(one_program_skips_the_lock, "acc[...] = v"),
                                        (two_locks_for_one_array, "acc[...] = acc[...] + v"),
                                        (writes_after_the_release, "acc[...] = acc[...] + v")])
def test_accesses_a_lock_does_not_order_are_races(kernel, at):
  """Interpret mode orders programs only through the acquires and releases they make: a program that skips
  the lock, programs under different locks, and a write after the release still race."""
  with pytest.raises(mg.RaceError) as info:
    kernel(np.zeros(4, np.float32), interpret=True)
  assert info.value.lineno == where(kernel, at)[0]


# ---------------------------------------------------------------- a masked-off single element issues no update
@mg.mgpu_kernel(out_shape=lambda x, ids: x, grid=lambda x, ids: (ids.shape[0],), input_output_aliases={0: 0})
def masked_scalar_add(x, ids, out):
  e = ids[ml.program_id(0)]
  ml.atomic_add(out.at[e], 1.0, mask=(e >= 0) & (e < x.shape[0]))


def test_a_masked_off_element_is_not_updated():
  """A single element the mask kept off was updated at element 0 with the identity (0.0): element 0's -0.0 became
  +0.0, and every masked-off program contended there. Now no `red` is issued (the GPU's thread is predicated)."""
  x, ids = np.array([-0.0, 5, 6, 7], np.float32), np.array([2, 9, -3, 2], np.int32)
  out = np.asarray(masked_scalar_add(x, ids, interpret=True))
  np.testing.assert_array_equal(out, [0, 5, 8, 7])
  assert np.signbit(out[0])
  assert "red.relaxed.gpu.add.f32" in _export(masked_scalar_add, S((4,), F32), S((4,), I32))


@pytest.mark.gpu
def test_a_masked_off_element_on_the_gpu():
  x, ids = np.array([-0.0, 5, 6, 7], np.float32), np.array([2, 9, -3, 2], np.int32)
  out = np.asarray(jax.jit(masked_scalar_add)(x, ids))
  np.testing.assert_array_equal(out, [0, 5, 8, 7])
  assert np.signbit(out[0])


@mg.mgpu_kernel(out_shape=lambda x, lock: x, grid=lambda x, lock: (x.shape[0] // 128,))
def lock_as_input(x, lock, out):
  while ml.atomic_cas(lock.at[0], 0, 1) == 1:
    pass
  out.at[ml.ds(ml.program_id(0) * 128, 128)][...] = x.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  ml.atomic_xchg(lock.at[0], 0)


def test_a_lock_passed_in_as_triton_does_says_where_it_goes():
  expect(lock_as_input, [S((256,), F32), S((1,), I32)], mg.InputWriteError, "ml.atomic_cas(",
         "ml.atomic_cas updates lock, an input: inputs are read-only",
         hint="make lock an output (jnp.int32 in out_shape: an output that atomics update starts at 0, as Triton's"
              " torch.zeros lock), or alias the input to an output (input_output_aliases) and update that")
