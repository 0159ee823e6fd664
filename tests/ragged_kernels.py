"""Kernels with partial tiles, runtime scalars, while loops, atomics and random numbers, shared by
the interpret, export and GPU tests (tests/test_ragged.py)."""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 128),))
def double_tma(x, out):
  """TMA windows past the end: the last tile of 1000 rows reads zeros and writes 104 rows."""
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def double_masked(x, out):
  """Masked register loads and stores: rows past the end are never touched."""
  i = ml.program_id(0)
  rows = i * 64 + ml.arange(64)
  mask = rows[:, None] < x.shape[0]
  v = x.at[ml.ds(i * 64, 64)].load(mask=mask, other=0.0)
  out.at[ml.ds(i * 64, 64)].store(v * 2, mask=mask)


@mg.mgpu_kernel(out_shape=lambda x, a, b: x, grid=lambda x, a, b: (x.shape[0] // 128,))
def axpb(x, alpha: ml.scalar, beta: ml.scalar, out):
  """Run-time scalar parameters: one compiled kernel for every alpha and beta."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = v * alpha + beta


@mg.mgpu_kernel(out_shape=lambda off, x: S((off.shape[0] - 1,), jnp.float32),
                grid=lambda off, x: (off.shape[0] - 1,))
def segment_sums(off, x, out):
  """Segment g of x is off[g]:off[g+1]: bounds read at run time, loop bounds from them, masked
  loads at both ends, one scalar stored per program."""
  g = ml.program_id(0)
  start = off[g]
  end = off[g + 1]
  acc = ml.zeros((128,), jnp.float32)
  for c in range(start // 128, ml.cdiv(end, 128)):
    idx = c * 128 + ml.arange(128)
    acc = acc + x.at[ml.ds(c * 128, 128)].load(mask=(idx >= start) & (idx < end), other=0.0)
  out[g] = ml.sum(acc)


@mg.mgpu_kernel(out_shape=lambda x, n: (x, S((), jnp.int32)))
def double_until(x, limit, out, steps_out):
  """A while loop on a run-time condition carrying a tensor and a counter."""
  v = x[...]
  steps = 0
  lim = limit[...]
  while ml.max(v) < lim:
    v = v * 2.0
    steps += 1
  out[...] = v
  steps_out[...] = steps


@mg.mgpu_kernel(out_shape=lambda x: (S((4, 128), jnp.float32), S((), jnp.int32), S((128,), jnp.int32)),
                grid=lambda x: (x.shape[0] // 128,))
def accumulate(x, sums, count, peak):
  """Atomics across programs: tiles added into rows, a counter, an integer maximum."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  ml.atomic_add(sums.at[i % 4], v)
  ml.atomic_add(count, 1)
  ml.atomic_max(peak, (v * 100.0).astype(jnp.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32), grid=lambda x: (x.shape[0] // 8,))
def column_sums_atomic(x, out):
  """Atomics of a column statistic (a layout that repeats values across threads)."""
  i = ml.program_id(0)
  ml.atomic_add(out, ml.sum(x.at[ml.ds(i * 8, 8)][...].astype(jnp.float32), axis=0))


@mg.mgpu_kernel(out_shape=lambda x: S((128, x.shape[1]), x.dtype), grid=lambda x: (x.shape[0] // 128,))
def fold_tma_reduce(x, out):
  """TMA reductions: every program adds its tile into the same output tile."""
  i = ml.program_id(0)
  buf = ml.smem((128, x.shape[1]))
  ml.copy(x.at[ml.ds(i * 128, 128)], buf)
  ml.copy(buf, out, reduce="add")


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32), block=256)
def smem_atomics(x, out):
  """SMEM atomics with two warpgroups: a tensor both hold is added once, by warpgroup 0."""
  buf = ml.smem((128,), jnp.int32)
  buf[...] = ml.zeros((128,), jnp.int32)
  v = x[...]
  ml.atomic_add(buf, v)
  ml.atomic_add(buf, v * 2)
  out[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda n, s: (S((n.shape[0],), jnp.uint32), S((n.shape[0],), jnp.float32)),
                grid=lambda n, s: (n.shape[0] // 1024,))
def random_bits(n, seed: ml.scalar, bits, uniform):
  """Philox numbers per element index, for a run-time seed."""
  i = ml.program_id(0)
  idx = i * 1024 + ml.arange(1024)
  bits.at[ml.ds(i * 1024, 1024)][...] = ml.randint(seed, idx)
  uniform.at[ml.ds(i * 1024, 1024)][...] = ml.rand(seed, idx)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, b.shape[1]), jnp.float32))
def dot_from_row_4(a, b, out):
  """A tensor-core tile one tile (128 bytes) wide loaded from any row of an array of any rows."""
  a_s = ml.smem((64, a.shape[1]))
  b_s = ml.smem(b.shape)
  ml.copy(a.at[ml.ds(4, 64)], a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def masked_pairs(x, out):
  """Masked accesses of a strided tensor whose registers cross rows (rows of 2 float16)."""
  i = ml.program_id(0)
  flat = i * 512 + ml.arange(512)
  inside = flat.reshape((256, 2)) < x.size
  v = x.at[ml.ds(i * 256, 256)].load(mask=inside, other=1.0)
  out.at[ml.ds(i * 256, 256)].store(v + 1.0, mask=inside)


@mg.mgpu_kernel(out_shape=lambda n, x: x, grid=lambda n, x: (x.shape[0],))
def scalar_selects(n, x, out):
  """ml.where between scalars: a run-time condition picks a scalar, no branch."""
  i = ml.program_id(0)
  limit = n[0]
  k = ml.where(i < limit, i * 2, -1)                       # int scalars
  f = ml.where(i % 2 == 0, 1.5, k.astype(jnp.float32))     # a number or a scalar
  out.at[i][...] = x.at[i][...] * f + ml.where(k > 3, 1.0, 0.0)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_between(n, x, out):
  """A loop over run-time uint32 bounds (past 2**31 too): it counts unsigned."""
  acc = x[...]
  for i in range(n[0], n[1]):
    acc = acc + 1.0
  out[...] = acc
