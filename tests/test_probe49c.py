"""Probe 49c (atomics on a tensor of elements): Triton's atomics on a block of pointers return the block of old
values, and `tl.atomic_cas` / `tl.atomic_xchg` take one: an MoE permutation's slot of each token, `pos =
tl.atomic_add(counts + expert_ids, 1)`, a window's `old = tl.atomic_max(ptrs, v)`, `tl.atomic_xchg(ptrs, v,
mask=m)`. They were MG004 (the update returned None) and MG202 / MG003 (cas and xchg took one element). Now a GMEM
window's or scatter's atomic returns its elements' old values (one relaxed `atom` each, 0 where the mask keeps
an element off), through an SMEM scratch where several threads hold an element (a row statistic, a vector of
fewer than 128 elements, block=256); where nothing uses them the update stays the `red`s it was
(frontend/ops/atomic_fetch.py, lowering/atomic_rmw.py, interpret_sync.py)."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32
EXPERTS = 16


def _mlir(kernel, *arrays) -> str:
  return kernel.mlir(*[S(a.shape, a.dtype) for a in arrays])


def _export(kernel, *arrays):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in arrays])


def _atoms(text: str) -> set:
  return set(re.findall(r"atom\.[a-z_]+\.[a-z]+\.[a-z]+\.[a-z0-9]+", text))


# ---------------------------------------------------------------- an MoE permutation's slots (Triton's habit)
@mg.mgpu_kernel(out_shape=lambda e: (S((EXPERTS,), I32), S(e.shape, I32)), grid=lambda e: (ml.cdiv(e.shape[0], 128),))
def expert_slots(e, counts, pos):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  m = offs < e.shape[0]
  ids = ml.load(e.at[offs], mask=m, other=-1)          # -1: a dropped token
  slot = ml.atomic_add(counts.at[ids], 1, mask=m & (ids >= 0))
  ml.store(pos.at[offs], ml.where(ids >= 0, slot, -1), mask=m)


@mg.mgpu_kernel(out_shape=lambda e: (S((EXPERTS,), I32), S(e.shape, I32)), grid=lambda e: (e.shape[0] // 64,))
def expert_slots_of_64(e, counts, pos):                 # 64 tokens a program: two threads hold each
  i = ml.program_id(0)
  ids = e.at[ml.ds(i * 64, 64)][...]
  pos.at[ml.ds(i * 64, 64)][...] = ml.atomic_add(counts.at[ids], 1)


@mg.mgpu_kernel(out_shape=lambda e: (S((EXPERTS,), I32), S(e.shape, I32)), grid=lambda e: (e.shape[0] // 256,),
                block=256)
def expert_slots_256(e, counts, pos):
  i = ml.program_id(0)
  ids = e.at[ml.ds(i * 256, 256)][...]
  pos.at[ml.ds(i * 256, 256)][...] = ml.atomic_add(counts.at[ids], 1)


def _ranks(e):
  """Each token's rank among its expert's tokens in order (interpret mode's order), -1 for a dropped one."""
  c, out = np.zeros(EXPERTS, np.int32), np.full(e.shape, -1, np.int32)
  for i, v in enumerate(e):
    if v >= 0:
      out[i], c[v] = c[v], c[v] + 1
  return c, out


def _experts(n, seed, dropped=True):
  return np.random.default_rng(seed).integers(-1 if dropped else 0, EXPERTS, n).astype(np.int32)


@pytest.mark.parametrize("kernel, n", [(expert_slots, 300), (expert_slots_of_64, 192), (expert_slots_256, 512)])
def test_a_scatters_old_values_give_each_token_its_slot(kernel, n):
  e = _experts(n, 1, dropped=kernel is expert_slots)
  counts, pos = kernel(e, interpret=True)
  want_counts, want_pos = _ranks(e)
  np.testing.assert_array_equal(np.asarray(counts), want_counts)
  np.testing.assert_array_equal(np.asarray(pos), want_pos)
  text = _mlir(kernel, e)
  assert _atoms(text) == {"atom.relaxed.gpu.add.s32"} and "red." not in text
  _export(kernel, e)


def _check_slots(e, counts, pos):
  """On the GPU the order is the hardware's: each expert's tokens hold the slots 0..count-1, each once."""
  counts, pos = np.asarray(counts), np.asarray(pos)
  np.testing.assert_array_equal(counts, np.bincount(e[e >= 0], minlength=EXPERTS))
  for x in range(EXPERTS):
    np.testing.assert_array_equal(np.sort(pos[e == x]), np.arange(counts[x]))
  assert (pos[e < 0] == -1).all()


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, n", [(expert_slots, 3000), (expert_slots_of_64, 1920), (expert_slots_256, 4096)])
def test_slots_on_the_gpu(kernel, n):
  e = _experts(n, 2, dropped=kernel is expert_slots)
  _check_slots(e, *kernel(e))


# ---------------------------------------------------------------- a window's old values
@mg.mgpu_kernel(out_shape=lambda x: (S((64, 32), I32), S(x.shape, I32)), grid=lambda x: (x.shape[0] // 64,))
def running_max(x, m, prev):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 64, 64), :][...]
  prev.at[ml.ds(i * 64, 64), :][...] = ml.atomic_max(m.at[:, :], v)


@mg.mgpu_kernel(out_shape=lambda x: (S((64,), F32), S((x.shape[0] // 32, 64), F32)), grid=lambda x: (x.shape[0] // 32,))
def column_sums_seen(x, acc, seen):                     # a column statistic: several threads hold each element
  i = ml.program_id(0)
  t = x.at[ml.ds(i * 32, 32), :][...]
  seen.at[i, :][...] = ml.atomic_add(acc.at[:], ml.sum(t, axis=0))


def test_a_windows_old_values():
  x = np.random.default_rng(3).integers(-1000, 1000, (192, 32)).astype(np.int32)
  m, prev = running_max(x, interpret=True)
  parts = x.reshape(3, 64, 32)
  np.testing.assert_array_equal(np.asarray(m), parts.max(0))
  lo = np.full((64, 32), np.iinfo(np.int32).min, np.int32)
  np.testing.assert_array_equal(np.asarray(prev), np.concatenate([lo, parts[0], np.maximum(parts[0], parts[1])]))
  assert _atoms(_mlir(running_max, x)) == {"atom.relaxed.gpu.max.s32"}
  _export(running_max, x)
  y = np.random.default_rng(4).standard_normal((96, 64)).astype(np.float32)
  acc, seen = column_sums_seen(y, interpret=True)
  sums = y.reshape(3, 32, 64).sum(1)
  np.testing.assert_allclose(np.asarray(acc), sums.sum(0), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(seen), np.cumsum(sums, 0) - sums, rtol=1e-5, atol=1e-5)
  _export(column_sums_seen, y)


@pytest.mark.gpu
def test_a_windows_old_values_on_the_gpu():
  x = np.random.default_rng(5).integers(-1000, 1000, (128, 32)).astype(np.int32)
  m, prev = (np.asarray(a) for a in running_max(x))
  a, b = x[:64], x[64:]
  np.testing.assert_array_equal(m, np.maximum(a, b))
  lo = np.iinfo(np.int32).min     # each element: one program saw the start, the other the first one's value
  first_a = prev[:64] == lo
  np.testing.assert_array_equal(np.where(first_a, lo, b), prev[:64])
  np.testing.assert_array_equal(prev[64:], np.where(first_a, a, lo))
  y = np.random.default_rng(6).standard_normal((64, 64)).astype(np.float32)
  acc, seen = (np.asarray(a) for a in column_sums_seen(y))
  sums = y.reshape(2, 32, 64).sum(1)
  np.testing.assert_allclose(acc, sums.sum(0), rtol=1e-4, atol=1e-4)
  first = seen[0] == 0       # each column: program 0 came first (and saw 0), or program 1 did
  np.testing.assert_allclose(seen[1], np.where(first, sums[0], 0), rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(seen[0], np.where(first, 0, sums[1]), rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- cas and xchg of a tensor of elements
@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((128,), I32)), grid=lambda x: (x.shape[0] // 128,))
def first_writer_wins(x, o, wins):                      # each element: the first program's value stays
  i = ml.program_id(0)
  old = ml.atomic_cas(o.at[:], 0.0, x.at[ml.ds(i * 128, 128)][...])
  ml.atomic_add(wins.at[:], ml.where(old == 0.0, 1, 0))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S(x.shape, F32)), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def exchange_tail(x, o, prev):                          # Triton's tail: the last program's window leaves the array
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  m = offs < x.shape[0]
  v = x.at[ml.ds(i * 128, 128)].load(mask=m, other=0.0)
  old = ml.atomic_xchg(o.at[ml.ds(i * 128, 128)], v, mask=m)
  prev.at[ml.ds(i * 128, 128)].store(old + 1.0, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: (S((64,), I32), S((x.shape[0] // 64, 64), I32)), grid=lambda x: (x.shape[0] // 64,))
def claim_slots(x, owner, got):                         # a vector of locks: each program claims what is free
  i = ml.program_id(0)
  want = x.at[ml.ds(i * 64, 64)][...] > 0
  old = ml.atomic_cas(owner.at[ml.arange(64)], ml.where(want, 0, -7), i + 1)
  got.at[i, :][...] = ml.where(want & (old == 0), 1, 0)


def test_cas_and_xchg_of_a_tensor():
  rng = np.random.default_rng(7)
  x = (rng.standard_normal(384) + 10).astype(np.float32)
  o, wins = first_writer_wins(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), x[:128])
  np.testing.assert_array_equal(np.asarray(wins), np.ones(128, np.int32))
  assert _atoms(_mlir(first_writer_wins, x)) == {"atom.relaxed.gpu.cas.b32"}
  _export(first_writer_wins, x)
  y = rng.standard_normal(300).astype(np.float32)
  o, prev = exchange_tail(y, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), y)
  np.testing.assert_array_equal(np.asarray(prev), np.ones(300, np.float32))
  assert _atoms(_mlir(exchange_tail, y)) == {"atom.relaxed.gpu.exch.b32"}
  _export(exchange_tail, y)
  z = rng.standard_normal(256).astype(np.float32)
  owner, got = claim_slots(z, interpret=True)
  want = z.reshape(4, 64) > 0
  first = np.where(want.any(0), want.argmax(0) + 1, 0)
  np.testing.assert_array_equal(np.asarray(owner), first)
  np.testing.assert_array_equal(np.asarray(got), (want & (np.arange(4)[:, None] + 1 == first)).astype(np.int32))
  _export(claim_slots, z)


@pytest.mark.gpu
def test_cas_and_xchg_of_a_tensor_on_the_gpu():
  rng = np.random.default_rng(8)
  x = (rng.standard_normal(1280) + 10).astype(np.float32)
  o, wins = (np.asarray(a) for a in first_writer_wins(x))
  np.testing.assert_array_equal(wins, np.ones(128, np.int32))
  assert ((o[None, :] == x.reshape(10, 128)).sum(0) >= 1).all()
  y = rng.standard_normal(300).astype(np.float32)
  o, prev = (np.asarray(a) for a in exchange_tail(y))
  np.testing.assert_array_equal(o, y)
  np.testing.assert_array_equal(prev, np.ones(300, np.float32))
  z = rng.standard_normal(256).astype(np.float32)
  owner, got = (np.asarray(a) for a in claim_slots(z))
  want = z.reshape(4, 64) > 0
  np.testing.assert_array_equal(got.sum(0), want.any(0).astype(np.int32))
  np.testing.assert_array_equal(owner, np.where(want.any(0), got.argmax(0) + 1, 0))


# ---------------------------------------------------------------- unused old values, and what stays an error
@mg.mgpu_kernel(out_shape=lambda e: S((EXPERTS,), I32), grid=lambda e: (e.shape[0] // 128,))
def histogram(e, counts):
  ml.atomic_add(counts.at[e.at[ml.ds(ml.program_id(0) * 128, 128)][...]], 1)


@mg.mgpu_kernel(out_shape=lambda x, ids: (S(x.shape, F16), S(ids.shape, F16)), grid=(1,))
def half_old_values(x, ids, out, old):
  old[...] = ml.atomic_max(out.at[:], x[...])      # (a float16 max's old values since probe 53c: atom.cas.b16 loops)


def test_unused_old_values_stay_reds_and_16_bit_ones_compute():
  e = _experts(256, 9, dropped=False)
  text = _mlir(histogram, e)
  assert "atom." not in text and "red.relaxed.gpu.add.s32" in text
  x = np.random.default_rng(0).standard_normal(128).astype(F16)      # (MG106 until probe 53c)
  out, old = half_old_values(x, np.zeros(128, np.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(old, np.float32), np.full(128, -np.inf))
  np.testing.assert_array_equal(np.asarray(out), x)


# ---------------------------------------------------------------- two locks taken in opposite orders
@mg.mgpu_kernel(out_shape=lambda x: (S((2,), I32), S((1,), F32)), grid=(2,))
def opposite_lock_order(x, lock, acc):
  i = ml.program_id(0)
  while ml.atomic_cas(lock.at[i], 0, 1) == 1:
    pass
  while ml.atomic_cas(lock.at[1 - i], 0, 1) == 1:
    pass
  ml.atomic_add(acc.at[0], x[i])
  ml.atomic_xchg(lock.at[1 - i], 0)
  ml.atomic_xchg(lock.at[i], 0)


@mg.mgpu_kernel(out_shape=lambda x: (S((2,), I32), S((1,), F32)), grid=(2,))
def one_lock_order(x, lock, acc):
  i = ml.program_id(0)
  a, b = ml.minimum(i, 1 - i), ml.maximum(i, 1 - i)
  while ml.atomic_cas(lock.at[a], 0, 1) == 1:
    pass
  while ml.atomic_cas(lock.at[b], 0, 1) == 1:
    pass
  ml.atomic_add(acc.at[0], x[i])
  ml.atomic_xchg(lock.at[b], 0)
  ml.atomic_xchg(lock.at[a], 0)


def test_locks_taken_in_opposite_orders_are_a_deadlock():
  """Interpret mode runs the programs one after another, so program 0 took both locks and ended before program 1
  began: the kernel passed, and on the GPU the two can each hold one lock and wait for the other forever."""
  x = np.array([1.5, 2.25], np.float32)
  with pytest.raises(mg.InterpretError) as info:
    opposite_lock_order(x, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(opposite_lock_order, "ml.atomic_cas(lock.at[1 - i]")
  assert e.message == ("program (1, 0, 0) takes lock[0] while it holds lock[1], and program (0, 0, 0) took lock[1]"
                       " while it held lock[0]: on the GPU, where both run at once, each can hold one lock and wait"
                       " for the other forever (a deadlock; interpret mode runs the programs one after another, so it"
                       " never waits here)")
  first, second = where(opposite_lock_order, "ml.atomic_cas(lock.at[i]"), e.lineno
  assert [n.split(": ", 1)[1] for n in e.notes[:3]] == ["program (1, 0, 0) takes lock[1]", "program (0, 0, 0) takes lock[0]",
                                                     "program (0, 0, 0) takes lock[1] while it holds lock[0]"]
  assert [int(n.split(":")[1]) for n in e.notes[:3]] == [first[0], first[0], second]
  assert e.hint == ("take the locks in one order in every program, e.g. the lower index first (of indices i and j,"
                    " take ml.minimum(i, j), then ml.maximum(i, j)), or release lock[1] before taking lock[0]")
  _, acc = one_lock_order(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(acc), [x.sum()])


# ---------------------------------------------------------------- 64-bit tickets and locks (jax_enable_x64)
I64 = jnp.int64


@mg.mgpu_kernel(out_shape=lambda x: (S((3,), I64), S((1,), F32), S((1,), I64), S((1,), I64), S(x.shape, I64)),
                grid=lambda x: (x.shape[0],))
def locks_of_64_bits(x, lock, acc, total, low, ticket):
  i = ml.program_id(0)
  while ml.atomic_cas(lock.at[0], 0, 1) == 1:
    pass
  if ml.atomic_xchg(lock.at[1], 1) == 0:
    acc[0] = x[i]
  else:
    acc[0] = acc[0] + x[i]
  ml.atomic_xchg(lock.at[0], 0)
  ml.atomic_add(total.at[0], 3000000000)
  ml.atomic_min(low.at[0], (-5 - i).astype(I64))
  ticket[i] = ml.atomic_add(lock.at[2], 1)


def _x64(fn):
  jax.config.update("jax_enable_x64", True)
  try:
    return fn()
  finally:
    jax.config.update("jax_enable_x64", False)


def test_int64_tickets_and_locks_with_x64():
  """With jax_enable_x64 an int64 lock or counter (Triton's torch.zeros(n, dtype=torch.int64)) was MG106: Hopper's
  atom takes 64-bit integers (cas.b64, exch.b64, add.u64, max/min.s64)."""
  x = np.array([0.5, 1.25, 2.0, 4.0], np.float32)

  def run():
    lock, acc, total, low, ticket = (np.asarray(a) for a in locks_of_64_bits(x, interpret=True))
    text = _mlir(locks_of_64_bits, x)
    _export(locks_of_64_bits, x)
    return lock, acc, total, low, ticket, text
  lock, acc, total, low, ticket, text = _x64(run)
  np.testing.assert_array_equal(lock, [0, 1, 4])
  np.testing.assert_array_equal(acc, [x.sum()])
  np.testing.assert_array_equal(total, [4 * 3000000000])
  np.testing.assert_array_equal(low, [-8])
  np.testing.assert_array_equal(ticket, [0, 1, 2, 3])
  assert _atoms(text) == {"atom.acq_rel.gpu.cas.b64", "atom.acq_rel.gpu.exch.b64", "atom.acq_rel.gpu.add.u64"}
  assert {"red.relaxed.gpu.add.u64", "red.relaxed.gpu.min.s64"} <= set(re.findall(r"red\.[a-z_.0-9]+[0-9]", text))


@pytest.mark.gpu
def test_int64_tickets_and_locks_on_the_gpu():
  x = np.arange(1, 41, dtype=np.float32)
  lock, acc, total, low, ticket = _x64(lambda: [np.asarray(a) for a in locks_of_64_bits(x)])
  np.testing.assert_array_equal(lock, [0, 1, 40])
  np.testing.assert_array_equal(acc, [x.sum()])
  np.testing.assert_array_equal(total, [40 * 3000000000])
  np.testing.assert_array_equal(low, [-44])
  np.testing.assert_array_equal(np.sort(ticket), np.arange(40))


# ---------------------------------------------------------------- a float32 max's or min's old value
@mg.mgpu_kernel(out_shape=lambda x: (S((), F32), S((x.shape[0] // 128,), F32), S((128,), F32), S(x.shape, F32)),
                grid=lambda x: (x.shape[0] // 128,))
def amax_seen(x, amax, before, low, low_before):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  before[i] = ml.atomic_max(amax, ml.max(ml.abs(v)))            # FP8 scaling's amax, and what it was
  low_before.at[ml.ds(i * 128, 128)][...] = ml.atomic_min(low.at[:], v)


def test_a_float32_max_or_min_returns_its_old_value():
  """`ml.atomic_max(amax, v)` of float32 with its value used was MG106 (no `atom` max takes float32): now one
  integer `atom` on the bits by the value's sign, as Triton's (max.s32 or min.u32; a NaN changes nothing)."""
  x = np.random.default_rng(10).standard_normal(512).astype(np.float32)
  x[3], x[200] = np.nan, -0.0
  amax, before, low, low_before = (np.asarray(a) for a in amax_seen(x, interpret=True))
  m = np.abs(x.reshape(4, 128)).max(1)                 # (program 0's is NaN, which changes nothing)
  seen = np.fmax.accumulate(np.concatenate([[-np.inf], m]))
  np.testing.assert_array_equal(amax, seen[-1])
  np.testing.assert_array_equal(before, seen[:-1])
  runs = [np.full(128, np.inf, np.float32)]
  for r in x.reshape(4, 128):
    runs.append(np.where(np.isnan(r), runs[-1], np.fmin(runs[-1], r)))
  np.testing.assert_array_equal(low, runs[-1])
  np.testing.assert_array_equal(low_before, np.concatenate(runs[:-1]))
  text = _mlir(amax_seen, x)
  assert _atoms(text) == {"atom.acq_rel.gpu.max.s32", "atom.acq_rel.gpu.min.u32", "atom.relaxed.gpu.min.s32",
                          "atom.relaxed.gpu.max.u32"}
  _export(amax_seen, x)


@pytest.mark.gpu
def test_a_float32_max_or_min_returns_its_old_value_on_the_gpu():
  x = np.random.default_rng(11).standard_normal(128 * 40).astype(np.float32)
  amax, before, low, low_before = (np.asarray(a) for a in amax_seen(x))
  parts = x.reshape(40, 128)
  m = np.abs(parts).max(1)
  np.testing.assert_array_equal(amax, m.max())
  # one program came first (and saw -inf); each other saw the max of some programs' values, below its final one
  assert (before == -np.inf).sum() == 1 and set(before[before > -np.inf]) <= set(m) and (before <= m.max()).all()
  np.testing.assert_array_equal(low, parts.min(0))
  low_before = low_before.reshape(40, 128)
  assert ((low_before == np.inf).sum(0) == 1).all()       # each element: one program came first
  assert ((low_before == np.inf) | (low_before >= parts.min(0))).all()
  assert np.isin(low_before[low_before < np.inf], parts).all()


# ---------------------------------------------------------------- Pallas's pl.atomic_add(x_ref, idx, val)
@mg.mgpu_kernel(out_shape=lambda e: (S((EXPERTS,), I32), S(e.shape, I32), S((8,), I32)),
                grid=lambda e: (ml.cdiv(e.shape[0], 128),))
def pallas_atomics(e, counts, pos, seen):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  m = offs < e.shape[0]
  ids = ml.load(e.at[offs], mask=m, other=0)
  ml.store(pos.at[offs], ml.atomic_add(counts, (ids,), 1, mask=m), mask=m)   # the index second, as Pallas's
  ml.atomic_max(seen, i % 4, i)
  ml.atomic_max(seen.at[ml.ds(0, 8)], ml.full((8,), 50, I32) + i, ml.arange(8) == 3)   # (Triton's: the mask third)


def test_pallas_atomics_take_the_index_second():
  """Pallas's `pl.atomic_add(x_ref, idx, val, mask=m)` (and max, min, xchg) written with ml. took the index for
  the value and the value for the mask (MG003: "mask must be a boolean tensor"); the index comes second there,
  and the window is x_ref.at[idx]."""
  e = _experts(300, 12, dropped=False)
  counts, pos, seen = (np.asarray(a) for a in pallas_atomics(e, interpret=True))
  want_counts, want_pos = _ranks(e)
  np.testing.assert_array_equal(counts, want_counts)
  np.testing.assert_array_equal(pos, want_pos)
  np.testing.assert_array_equal(seen, [0, 1, 2, 52] + [np.iinfo(np.int32).min] * 4)
  _export(pallas_atomics, e)


# ---------------------------------------------------------------- Triton's bitwise atomics
U32 = jnp.uint32


@mg.mgpu_kernel(out_shape=lambda ids: (S((8,), I32), S((128,), U32), S((128,), I32), S((), I32), S(ids.shape, I32)),
                grid=lambda ids: (ids.shape[0] // 128,))
def bit_sets(ids, flags, cleared, parity, any_bits, before):
  i = ml.program_id(0)
  v = ids.at[ml.ds(i * 128, 128)][...]
  before.at[ml.ds(i * 128, 128)][...] = ml.atomic_or(flags.at[v // 32], 1 << (v % 32))   # a visited bit set
  ml.atomic_and(cleared.at[:], (~(1 << (v % 31))).astype(U32))      # starts with every bit set
  ml.atomic_xor(parity.at[:], v, mask=v > 10)
  ml.atomic_or(any_bits, ml.max(v))


def test_bitwise_atomics():
  """`tl.atomic_or` / `atomic_and` / `atomic_xor` (a visited bit set, flags) were MG002: now `red` and `atom`
  and, or, xor .b32 of int32 and uint32, with the old values and masks of the others; an output atomic_and
  updates starts with every bit set."""
  ids = np.random.default_rng(13).integers(0, 256, 256).astype(np.int32)
  flags, cleared, parity, any_bits, before = (np.asarray(a) for a in bit_sets(ids, interpret=True))
  want, seen = np.zeros(8, np.uint32), np.zeros(256, np.uint32)
  for k, v in enumerate(ids):
    seen[k] = want[v // 32]
    want[v // 32] |= np.uint32(1) << np.uint32(v % 32)
  np.testing.assert_array_equal(flags, want.view(np.int32))
  np.testing.assert_array_equal(before, seen.view(np.int32))
  parts = ids.reshape(2, 128)
  np.testing.assert_array_equal(
      cleared, np.bitwise_and.reduce(~(np.uint32(1) << (parts % 31).astype(np.uint32)), axis=0))
  np.testing.assert_array_equal(parity, np.bitwise_xor.reduce(np.where(parts > 10, parts, 0), axis=0))
  np.testing.assert_array_equal(any_bits, parts.max(1)[0] | parts.max(1)[1])
  text = _mlir(bit_sets, ids)
  assert _atoms(text) == {"atom.relaxed.gpu.or.b32"}
  assert {"red.relaxed.gpu.and.b32", "red.relaxed.gpu.xor.b32", "red.relaxed.gpu.or.b32"} <= set(
      re.findall(r"red\.[a-z_.0-9]+[0-9]", text))
  _export(bit_sets, ids)


@pytest.mark.gpu
def test_bitwise_atomics_on_the_gpu():
  ids = np.random.default_rng(14).integers(0, 256, 128 * 20).astype(np.int32)
  flags, cleared, parity, any_bits, before = (np.asarray(a) for a in bit_sets(ids))
  want = np.zeros(8, np.uint32)
  for v in ids:
    want[v // 32] |= np.uint32(1) << np.uint32(v % 32)
  np.testing.assert_array_equal(flags, want.view(np.int32))
  bit = (np.uint32(1) << (ids % 32).astype(np.uint32)).view(np.int32)
  assert ((before & bit) == 0).sum() == len(np.unique(ids))     # each id's bit: one program saw it unset
  parts = ids.reshape(20, 128)
  np.testing.assert_array_equal(
      cleared, np.bitwise_and.reduce(~(np.uint32(1) << (parts % 31).astype(np.uint32)), axis=0))
  np.testing.assert_array_equal(parity, np.bitwise_xor.reduce(np.where(parts > 10, parts, 0), axis=0))
  np.testing.assert_array_equal(any_bits, np.bitwise_or.reduce(parts.max(1)))


# ---------------------------------------------------------------- a CTA's ranks in its SMEM histogram
@mg.mgpu_kernel(out_shape=lambda ids: (S((ids.shape[0] // 256, 64), I32), S(ids.shape, I32)),
                grid=lambda ids: (ids.shape[0] // 256,))
def cta_ranks(ids, offsets, rank):                      # a counting sort's first step, within one CTA
  i = ml.program_id(0)
  h = ml.smem((64,), I32)
  h[...] = ml.zeros((64,), I32)
  e = ids.at[ml.ds(i * 256, 256)][...]
  rank.at[ml.ds(i * 256, 256)][...] = ml.atomic_add(h.at[e], 1)
  c = h[...]
  offsets.at[i][...] = ml.cumsum(c) - c


def _cta_counts(ids):
  return np.stack([np.bincount(p, minlength=64) for p in ids.reshape(-1, 256)]).astype(np.int32)


def test_a_smem_scatters_old_values():
  """An SMEM scatter's old values (`rank = ml.atomic_add(h.at[ids], 1)` into a CTA's histogram) were MG004: one
  generic `atom` per element at the element's shared address, as for GMEM."""
  ids = np.random.default_rng(15).integers(0, 64, 512).astype(np.int32)
  offsets, rank = (np.asarray(a) for a in cta_ranks(ids, interpret=True))
  c = _cta_counts(ids)
  np.testing.assert_array_equal(offsets, np.cumsum(c, 1) - c)
  want = np.concatenate([_ranks_of(p) for p in ids.reshape(2, 256)])
  np.testing.assert_array_equal(rank, want)
  assert _atoms(_mlir(cta_ranks, ids)) == {"atom.relaxed.gpu.add.s32"}
  _export(cta_ranks, ids)


def _ranks_of(p):
  c, out = np.zeros(64, np.int32), np.zeros(p.shape, np.int32)
  for k, v in enumerate(p):
    out[k], c[v] = c[v], c[v] + 1
  return out


@pytest.mark.gpu
def test_a_smem_scatters_old_values_on_the_gpu():
  ids = np.random.default_rng(16).integers(0, 64, 256 * 12).astype(np.int32)
  offsets, rank = (np.asarray(a) for a in cta_ranks(ids))
  c = _cta_counts(ids)
  np.testing.assert_array_equal(offsets, np.cumsum(c, 1) - c)
  for p, r, n in zip(ids.reshape(12, 256), rank.reshape(12, 256), c):
    for x in range(64):
      np.testing.assert_array_equal(np.sort(r[p == x]), np.arange(n[x]))
