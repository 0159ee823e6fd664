"""Probe 70a's corpus, its seventh part: the same operators written the way Pallas and JAX users write them, with jnp's
own functions in the kernel (jnp.unique with a size, jnp.diff's heads, jnp.packbits of a predicate, ml.histogram,
a 2-D sort for a top-N per group), a CUDA probe loop ported with `while True` and `break`, an SMEM MIN of uint32 keys,
and row-wise group-by sums. Same CASES form as probe70a_filter.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe70a_filter import F32, I32, U32, S, rng_of
from probe70a_groupby import EMPTY, hash32, table_np

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S((), I32)), grid=(1,))
def distinct_jnp_unique(x, out, count):
  """SELECT DISTINCT of one block with jnp.unique's fixed size (fill past the distinct values)."""
  v = x[...]
  u = jnp.unique(v, size=x.shape[0], fill_value=jnp.iinfo(jnp.int32).max)
  out[...] = u
  count[...] = jnp.sum(u != jnp.iinfo(jnp.int32).max)


def _du_ref(x):
  u = np.unique(x)
  return np.concatenate([u, np.full(len(x) - len(u), np.iinfo(np.int32).max)]).astype(np.int32), np.int32(len(u))


case("distinct_jnp_unique_sized", distinct_jnp_unique, lambda s: ((rng_of(s).integers(-40, 40, 256).astype(np.int32),), {}),
     _du_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.bool_), S((), I32)), grid=(1,))
def run_heads_jnp_diff(x, heads, nruns):
  """Run heads of a sorted column by jnp.diff with a prepended sentinel (an RLE's first step)."""
  h = jnp.diff(x[...], prepend=x[0] - 1) != 0
  heads[...] = h
  nruns[...] = jnp.count_nonzero(h)


def _rh_ref(x):
  h = np.diff(x, prepend=x[0] - 1) != 0
  return h, np.int32(h.sum())


case("run_heads_jnp_diff_prepend", run_heads_jnp_diff,
     lambda s: ((np.sort(rng_of(s).integers(0, 30, 512)).astype(np.int32),), {}), _rh_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 8,), jnp.uint8), grid=lambda x: (x.shape[0] // 2048,))
def validity_jnp_packbits(x, out):
  """Arrow validity bytes of `x is not NaN` by jnp.packbits (LSB first)."""
  r = ml.ds(ml.program_id(0) * 2048, 2048)
  out.at[ml.ds(ml.program_id(0) * 256, 256)][...] = jnp.packbits(~jnp.isnan(x.at[r][...]), bitorder="little")


def _vp_make(seed):
  x = rng_of(seed).standard_normal(4096).astype(np.float32)
  x[rng_of(seed + 1).random(4096) < 0.2] = np.nan
  return (x,), {}


case("validity_bytes_jnp_packbits", validity_jnp_packbits, _vp_make,
     lambda x: np.packbits(~np.isnan(x), bitorder="little"), 0)


@mg.mgpu_kernel(out_shape=lambda k: S((256,), I32), grid=lambda k: (ml.cdiv(k.shape[0], 512),))
def byte_histogram(keys, hist):
  """A radix pass's low-byte histogram: Triton's tl.histogram a block, then one atomic add of the block's counts."""
  offs = ml.program_id(0) * 512 + ml.arange(0, 512)
  m = offs < keys.shape[0]
  d = ml.load(keys.at[offs], mask=m, other=0) & 255
  ml.atomic_add(hist.at[:], ml.histogram(d, 256, mask=m))


case("radix_byte_histogram_ml_histogram", byte_histogram,
     lambda s: ((rng_of(s).integers(-10**6, 10**6, 1500).astype(np.int32),), {}),
     lambda k: np.bincount(k & 255, minlength=256).astype(np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda v, *, G, K: (S((G, K), F32), S((G, K), I32)), grid=(1,))
def top_k_per_group(v, vals, idx, *, G: ml.constexpr, K: ml.constexpr):
  """The K largest of each of G groups of equal size (a window's ROW_NUMBER() <= K per partition): one 2-D sort."""
  x = v[...].reshape(G, v.shape[0] // G)
  tv, ti = ml.top_k(x, K)
  vals[...] = tv
  idx[...] = ti


def _tpg_ref(v, *, G, K):
  x = v.reshape(G, -1)
  o = np.argsort(-x, axis=1, kind="stable")[:, :K]
  return np.take_along_axis(x, o, 1), o.astype(np.int32)


case("top_k_per_group_2d", top_k_per_group, lambda s: ((rng_of(s).permutation(512).astype(np.float32),), dict(G=8, K=16)),
     _tpg_ref, 0)


@mg.mgpu_kernel(out_shape=lambda p, t: S(p.shape, I32), grid=lambda p, t: (p.shape[0],))
def probe_while_true(probe, table, pos):
  """A CUDA thread's probe loop ported as written: `while (true) { ... break; }`."""
  cap = table.shape[0]
  k = probe[ml.program_id(0)]
  slot = hash32(k, cap - 1)
  res = -1
  while True:
    t = table[slot]
    if t == k:
      res = slot
      break
    if t == EMPTY:
      break
    slot = (slot + 1) & (cap - 1)
  pos[ml.program_id(0)] = res


def _pwt_make(seed):
  r = rng_of(seed)
  return (r.integers(0, 800, 96).astype(np.int32), table_np(r.choice(800, 150, replace=False).astype(np.int32), 256)), {}


case("probe_while_true_break", probe_while_true, _pwt_make,
     lambda p, t: np.array([int(np.nonzero(t == k)[0][0]) if (t == k).any() else -1 for k in p], np.int32), 0)


@mg.mgpu_kernel(out_shape=lambda k, v: S((16,), U32), grid=lambda k, v: (k.shape[0] // 256,))
def smem_min_u32(keys, vals, out):
  """MIN(v) GROUP BY k of uint32 values, a block's SMEM table by atomic min, then merged."""
  b = ml.smem((16,), U32)
  b[...] = ml.full((16,), 0xFFFFFFFF, U32)
  r = ml.ds(ml.program_id(0) * 256, 256)
  ml.atomic_min(b.at[keys.at[r][...] & 15], vals.at[r][...])
  ml.atomic_min(out.at[:], b[...])


def _smu_ref(k, v):
  out = np.full(16, 0xFFFFFFFF, np.uint32)
  np.minimum.at(out, k & 15, v)
  return out


case("groupby_min_uint32_smem_atomic", smem_min_u32,
     lambda s: ((rng_of(s).integers(0, 1000, 512).astype(np.int32), rng_of(s).integers(0, 2**32, 512, dtype=np.uint64).astype(np.uint32)), {}),
     _smu_ref, 0)


@mg.mgpu_kernel(out_shape=lambda k, v, *, G: S((G, v.shape[1]), F32), grid=lambda k, v, *, G: (ml.cdiv(k.shape[0], 64),))
def groupby_rows(keys, vals, sums, *, G: ml.constexpr):
  """SUM of several columns GROUP BY k: each row added into its group's row (a scatter of rows)."""
  offs = ml.program_id(0) * 64 + ml.arange(0, 64)
  m = offs < keys.shape[0]
  k = ml.load(keys.at[offs], mask=m, other=0)
  ml.atomic_add(sums.at[k, :], vals.at[ml.ds(ml.program_id(0) * 64, 64), :].load(mask=m[:, None], other=0.0), mask=m[:, None])


def _gr_ref(k, v, *, G):
  out = np.zeros((G, v.shape[1]))
  np.add.at(out, k, v)
  return out


case("groupby_several_columns_row_scatter", groupby_rows,
     lambda s: ((rng_of(s).integers(0, 12, 200).astype(np.int32), rng_of(s).standard_normal((200, 8)).astype(np.float32)), dict(G=16)),
     _gr_ref, 1e-5)
