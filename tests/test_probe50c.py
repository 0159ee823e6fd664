"""Probe 50c (atomics, what probe 49c left): a float16/bfloat16 single element's atomic add (Triton's
`tl.atomic_add(out_ptr, tl.sum(x))` into a half-precision scalar) and its old value, the old values of 16-bit
windows and scatters and their cas (`red`/`atom.add.noftz.f16`/`.bf16`, `atom.cas.b16`; were MG106 / MG204), int64
add, max and min of GMEM windows and scatters under jax_enable_x64 (one `red.add.u64` / `.max.s64` per element; were
MG106), and a spin on a tensor's atomic (a grid barrier read through `ml.atomic_add(flags.at[:], 0)` or a cas of
a tensor) stepping aside in interpret mode as a single element's does (it ran 10**7 trips)."""
import re

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
BF, F16, F32, I32, I64 = jnp.bfloat16, jnp.float16, jnp.float32, jnp.int32, jnp.int64


def _specs(*arrays):
  return [S(a.shape, a.dtype) for a in arrays]


def _atomics(kernel, *arrays) -> set:
  return set(re.findall(r"(?:atom|red)\.[a-z_]+\.[a-z]+\.[a-z0-9_.]+[0-9]", kernel.mlir(*_specs(*arrays))))


def _export(kernel, *arrays):
  jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*_specs(*arrays))


def _ints(shape, seed, dtype, lo=1, hi=8):
  """Small integers (their sums exact in float16 below 2048, in bfloat16 below 256: any order gives the same bits)."""
  return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


def _chain(olds, final, parts):
  """The old values of one element across programs are the partial sums of some order of the parts: sorted with
  the final value, their steps are the parts."""
  seen = np.sort(np.append(np.asarray(olds, np.float64), np.float64(final)))
  return seen[0] == 0 and np.array_equal(np.sort(np.diff(seen)), np.sort(np.asarray(parts, np.float64)))


# ---------------------------------------------------------------- a 16-bit single element (red/atom .noftz.f16)
@mg.mgpu_kernel(out_shape=lambda x: S((), BF), grid=lambda x: (x.shape[0] // 128,))
def sum_into_bf16(x, out):                 # Triton's tl.atomic_add(out_ptr, tl.sum(x)) with a bfloat16 out
  ml.atomic_add(out, ml.sum(x.at[ml.ds(ml.program_id(0) * 128, 128)][...]))


@mg.mgpu_kernel(out_shape=lambda x: (S((4,), F16), S((x.shape[0] // 128,), F16)), grid=lambda x: (x.shape[0] // 128,))
def f16_tickets(x, out, prev):             # the old value: what the programs before this one had added
  i = ml.program_id(0)
  prev[i] = ml.atomic_add(out.at[1], ml.sum(x.at[ml.ds(i * 128, 128)][...]))


def test_a_16_bit_single_elements_add_and_its_old_value():
  x = np.random.default_rng(1).standard_normal(512).astype(ml_dtypes.bfloat16)
  np.testing.assert_allclose(np.float32(sum_into_bf16(x, interpret=True)), np.sum(np.asarray(x, np.float64)),
                             rtol=2e-2)
  assert _atomics(sum_into_bf16, x) == {"red.relaxed.gpu.add.noftz.bf16"}
  h = _ints(512, 2, np.float16, 0, 2)
  out, prev = f16_tickets(h, interpret=True)
  parts = np.asarray(h, np.float64).reshape(4, 128).sum(1)
  np.testing.assert_array_equal(np.asarray(prev, np.float64), np.cumsum(parts) - parts)   # (programs in order)
  np.testing.assert_array_equal(np.asarray(out, np.float64), [0, parts.sum(), 0, 0])
  assert _atomics(f16_tickets, h) == {"atom.acq_rel.gpu.add.noftz.f16"}
  _export(sum_into_bf16, x)
  _export(f16_tickets, h)


@pytest.mark.gpu
def test_a_16_bit_single_elements_add_on_the_gpu():
  x = np.ones(2048, ml_dtypes.bfloat16)         # (partial sums multiples of 128: exact in bfloat16)
  assert np.float64(sum_into_bf16(x)) == 2048
  h = _ints(2048, 4, np.float16, 0, 2)
  out, prev = f16_tickets(h)
  parts = np.asarray(h, np.float64).reshape(16, 128).sum(1)
  assert _chain(prev, np.asarray(out, np.float64)[1], parts)


# ---------------------------------------------------------------- 16-bit windows' and scatters' old values, cas
@mg.mgpu_kernel(out_shape=lambda x: (S((128,), BF), S(x.shape, BF)), grid=lambda x: (x.shape[0] // 128,))
def bf16_window_olds(x, acc, prev):
  r = ml.ds(ml.program_id(0) * 128, 128)
  prev.at[r][...] = ml.atomic_add(acc.at[:], x.at[r][...])


@mg.mgpu_kernel(out_shape=lambda x, ids: (S((16,), F16), S(ids.shape, F16)), grid=lambda x, ids: (ids.shape[0] // 128,))
def f16_scatter_olds(x, ids, acc, prev):   # each token's running total of its bucket (a 16-bit histogram)
  r = ml.ds(ml.program_id(0) * 128, 128)
  prev.at[r][...] = ml.atomic_add(acc.at[ids.at[r][...]], x.at[r][...])


@mg.mgpu_kernel(out_shape=lambda x: S((128,), BF), grid=lambda x: (x.shape[0] // 128,))
def first_writer_bf16(x, out):             # tl.atomic_cas(ptrs, 0, v) of a bfloat16 block (was MG204: pairs)
  r = ml.ds(ml.program_id(0) * 128, 128)
  ml.atomic_cas(out.at[:], ml.zeros((128,), BF), x.at[r][...])


@mg.mgpu_kernel(out_shape=lambda x: (S((8,), F16), S((x.shape[0] // 128,), F16)), grid=lambda x: (x.shape[0] // 128,))
def f16_cas_scalar(x, out, got):
  i = ml.program_id(0)
  got[i] = ml.atomic_cas(out.at[3], 0.0, x[i * 128])


@mg.mgpu_kernel(out_shape=lambda x: (S((64,), F16), S((64,), F16)), grid=(2,))
def f16_row_sums_olds(x, acc, prev):       # a row statistic: held by several threads (the olds through SMEM)
  p = ml.atomic_add(acc.at[:], ml.sum(x[...], axis=1))
  if ml.program_id(0) == 1:
    prev[...] = p


def test_16_bit_old_values_and_cas_of_tensors():
  x = np.random.default_rng(5).standard_normal(512).astype(ml_dtypes.bfloat16)
  acc, prev = bf16_window_olds(x, interpret=True)
  want, run = [], np.zeros(128, ml_dtypes.bfloat16)
  for part in x.reshape(4, 128):         # (rounded to bfloat16 at each update, programs in order)
    want.append(run)
    run = (run.astype(np.float32) + part.astype(np.float32)).astype(ml_dtypes.bfloat16)
  np.testing.assert_array_equal(np.asarray(prev).view(np.int16), np.concatenate(want).view(np.int16))
  np.testing.assert_array_equal(np.asarray(acc).view(np.int16), run.view(np.int16))
  assert _atomics(bf16_window_olds, x) == {"atom.relaxed.gpu.add.noftz.bf16"}
  h, ids = _ints(256, 6, np.float16), np.random.default_rng(7).integers(0, 16, 256).astype(np.int32)
  acc, prev = f16_scatter_olds(h, ids, interpret=True)
  tot, olds = np.zeros(16), np.zeros(256)
  for k in range(256):
    olds[k], tot[ids[k]] = tot[ids[k]], tot[ids[k]] + h[k]
  np.testing.assert_array_equal(np.asarray(prev, np.float64), olds)
  np.testing.assert_array_equal(np.asarray(acc, np.float64), tot)
  assert _atomics(f16_scatter_olds, h, ids) == {"atom.relaxed.gpu.add.noftz.f16"}
  np.testing.assert_array_equal(np.asarray(first_writer_bf16(x, interpret=True)).view(np.int16),
                                x[:128].view(np.int16))
  assert _atomics(first_writer_bf16, x) == {"atom.relaxed.gpu.cas.b16"}
  xs = (np.arange(512) + 1).astype(np.float16)
  out, got = f16_cas_scalar(xs, interpret=True)
  np.testing.assert_array_equal(np.asarray(got, np.float64), [0, 1, 1, 1])
  np.testing.assert_array_equal(np.asarray(out, np.float64), [0, 0, 0, 1, 0, 0, 0, 0])
  assert _atomics(f16_cas_scalar, xs) == {"atom.acq_rel.gpu.cas.b16"}
  r = _ints((64, 32), 13, np.float16, 0, 4)
  acc, prev = f16_row_sums_olds(r, interpret=True)
  np.testing.assert_array_equal(np.asarray(prev, np.float64), np.asarray(r, np.float64).sum(1))
  np.testing.assert_array_equal(np.asarray(acc, np.float64), 2 * np.asarray(r, np.float64).sum(1))
  for k, a in ((bf16_window_olds, (x,)), (f16_scatter_olds, (h, ids)), (first_writer_bf16, (x,)),
               (f16_cas_scalar, (xs,)), (f16_row_sums_olds, (r,))):
    _export(k, *a)


@pytest.mark.gpu
def test_16_bit_old_values_and_cas_on_the_gpu():
  x = _ints(1024, 8, ml_dtypes.bfloat16)
  acc, prev = bf16_window_olds(x)
  p, parts = np.asarray(prev, np.float64).reshape(8, 128), np.asarray(x, np.float64).reshape(8, 128)
  assert all(_chain(p[:, e], np.float64(acc[e]), parts[:, e]) for e in range(128))
  h, ids = _ints(512, 9, np.float16), np.random.default_rng(10).integers(0, 16, 512).astype(np.int32)
  acc, prev = f16_scatter_olds(h, ids)
  for b in range(16):
    assert _chain(np.asarray(prev, np.float64)[ids == b], np.float64(acc[b]), np.asarray(h, np.float64)[ids == b])
  r = _ints((64, 32), 14, np.float16, 0, 4)
  acc, prev = f16_row_sums_olds(r)
  sums = np.asarray(r, np.float64).sum(1)
  np.testing.assert_array_equal(np.asarray(acc, np.float64), 2 * sums)
  assert all(np.asarray(prev, np.float64)[e] in (0, sums[e]) for e in range(64))     # (program 1 first or second)
  xd = (np.arange(512) + 1).astype(ml_dtypes.bfloat16)    # (distinct per program: each element one program's)
  out = np.asarray(first_writer_bf16(xd), np.float64)
  assert all(out[e] in np.asarray(xd, np.float64).reshape(4, 128)[:, e] for e in range(128))
  xs = (np.arange(512) + 1).astype(np.float16)
  out, got = f16_cas_scalar(xs)
  winner = np.asarray(out, np.float64)[3]
  assert winner in (1, 129, 257, 385) and sorted(np.asarray(got, np.float64)) == [0, winner, winner, winner]


# ---------------------------------------------------------------- int64 windows and scatters (jax_enable_x64)
@mg.mgpu_kernel(out_shape=lambda x: S((16, 64), I64), grid=lambda x: (x.shape[0] // 16,))
def i64_window_min(x, out):
  ml.atomic_min(out, x.at[ml.ds(ml.program_id(0) * 16, 16), :][...])


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), I64), S(x.shape, I64)), grid=lambda x: (x.shape[0] // 128,))
def i64_window_olds(x, out, prev):
  r = ml.ds(ml.program_id(0) * 128, 128)
  prev.at[r][...] = ml.atomic_add(out.at[:], x.at[r][...])


@mg.mgpu_kernel(out_shape=lambda x: S((200,), I64), grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def i64_tail_scatter(x, out):
  offs = ml.program_id(0) * 128 + ml.arange(128)
  m = offs < x.shape[0]
  ml.atomic_add(out.at[offs % 200], ml.load(x.at[offs], mask=m, other=0), mask=m)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), I64), grid=(1,))
def i64_row_max(x, out):                   # a row statistic (replicated: its first holders update)
  ml.atomic_max(out.at[:], ml.max(x[...], axis=1))


@pytest.fixture
def x64():
  with jax.enable_x64(True):
    yield


def _i64_inputs():
  g = np.random.default_rng(11)
  return (g.integers(-2 ** 40, 2 ** 40, (64, 64)), g.integers(-2 ** 40, 2 ** 40, 512), g.integers(0, 2 ** 40, 300),
          g.integers(-2 ** 40, 2 ** 40, (64, 32)))


def _tail_sums(x):
  out = np.zeros(200, np.int64)
  np.add.at(out, np.arange(x.size) % 200, x)
  return out


def test_int64_windows_and_scatters(x64):
  a, b, c, d = _i64_inputs()
  np.testing.assert_array_equal(i64_window_min(a, interpret=True), a.reshape(4, 16, 64).min(0))
  out, prev = i64_window_olds(b, interpret=True)
  sums = np.cumsum(b.reshape(4, 128), 0)
  np.testing.assert_array_equal(out, sums[-1])
  np.testing.assert_array_equal(prev, np.concatenate([np.zeros(128, np.int64), sums[:-1].ravel()]))
  np.testing.assert_array_equal(i64_tail_scatter(c, interpret=True), _tail_sums(c))
  np.testing.assert_array_equal(i64_row_max(d, interpret=True), d.max(1))
  assert _atomics(i64_window_min, a) == {"red.relaxed.gpu.min.s64"}
  assert _atomics(i64_window_olds, b) == {"atom.relaxed.gpu.add.u64"}
  assert _atomics(i64_tail_scatter, c) == {"red.relaxed.gpu.add.u64"}
  assert _atomics(i64_row_max, d) == {"red.relaxed.gpu.max.s64"}
  for k, v in ((i64_window_min, a), (i64_window_olds, b), (i64_tail_scatter, c), (i64_row_max, d)):
    _export(k, v)


@pytest.mark.gpu
def test_int64_windows_and_scatters_on_the_gpu(x64):
  a, b, c, d = _i64_inputs()
  np.testing.assert_array_equal(i64_window_min(a), a.reshape(4, 16, 64).min(0))
  pos = np.abs(b)                          # (positive parts: the old values are partial sums of some order)
  out, prev = i64_window_olds(pos)
  p, parts = np.asarray(prev).reshape(4, 128), pos.reshape(4, 128)
  assert all(_chain(p[:, e], out[e], parts[:, e]) for e in range(128))
  np.testing.assert_array_equal(i64_tail_scatter(c), _tail_sums(c))
  np.testing.assert_array_equal(i64_row_max(d), d.max(1))


# ---------------------------------------------------------------- a spin on a tensor's atomic steps aside
@mg.mgpu_kernel(out_shape=lambda x: (S((128,), I32), S(x.shape, F32)), grid=(4,))
def vector_barrier(x, flags, out):         # a grid barrier whose flags are read with an atomic add of zeros
  i = ml.program_id(0)
  ml.atomic_xchg(flags.at[:], ml.full((128,), 1, I32), mask=ml.arange(128) == i)
  while ml.sum(ml.atomic_add(flags.at[:], ml.zeros((128,), I32))) < 4:
    pass
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), I32), S(x.shape, F32)), grid=(4,))
def cas_barrier(x, flags, out):            # the same through a cas of the tensor that changes nothing
  i = ml.program_id(0)
  ml.atomic_xchg(flags.at[i], 1)
  seen = ml.atomic_cas(flags.at[:], ml.full((128,), 2, I32), ml.full((128,), 2, I32))
  while ml.sum(seen) < 4:
    seen = ml.atomic_cas(flags.at[:], ml.full((128,), 2, I32), ml.full((128,), 2, I32))
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), I32), S(x.shape, F32)), grid=(4,))
def waits_for_nobody(x, flags, out):
  i = ml.program_id(0)
  while ml.sum(ml.atomic_add(flags.at[:], ml.zeros((128,), I32))) < 4:
    pass
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_a_spin_on_a_tensors_atomic_lets_the_other_programs_run(monkeypatch):
  from mgpu_dsl.lowering import control
  monkeypatch.setattr(control, "MAX_WHILE_ITERATIONS", 2000)     # (it ran 10**7 trips before the error)
  x = np.random.default_rng(12).standard_normal(512).astype(np.float32)
  flags, out = vector_barrier(x, interpret=True)
  np.testing.assert_array_equal(flags, (np.arange(128) < 4).astype(np.int32))
  np.testing.assert_array_equal(out, x * 2.0)
  flags, out = cas_barrier(x, interpret=True)
  np.testing.assert_array_equal(flags, (np.arange(128) < 4).astype(np.int32))
  np.testing.assert_array_equal(out, x + 1.0)
  with pytest.raises(mg.InterpretError, match="this while loop never ends in program"):
    waits_for_nobody(x, interpret=True)


# ---------------------------------------------------------------- a 16-bit exchange (MG106 until probe 53c)
@mg.mgpu_kernel(out_shape=lambda x: S((128,), BF), grid=(1,))
def bf16_swap(x, out):
  ml.atomic_xchg(out.at[:], x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F16), grid=(1,))
def f16_swap_one(x, out):
  ml.atomic_xchg(out.at[2], x[0])


def test_a_16_bit_exchange_stores_the_value():
  """A loop of atom.cas.b16 since probe 53c (tests/test_probe53c.py has its old values and GPU test)."""
  x = np.random.default_rng(0).standard_normal(128)
  np.testing.assert_array_equal(np.asarray(bf16_swap(x.astype(BF), interpret=True)), x.astype(BF))
  np.testing.assert_array_equal(np.asarray(f16_swap_one(x.astype(F16), interpret=True)),
                                np.array([0, 0, x.astype(F16)[0], 0], F16))
