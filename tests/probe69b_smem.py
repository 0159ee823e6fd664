"""Probe 69b's corpus, its fifth part: the class fixed (design note 228): gathers from SMEM buffers by tensors of
indices, as CUDA ports read shared memory (a bitonic stage's partner `s[i ^ j]`, an FFT's bit reversal, a lookup table
a CTA staged by TMA, rows of a staged tile, a masked load at computed places). Same CASES form as probe69b_sparse.py."""
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69b_hpc import _fft_rows_ref, butterfly
from probe69b_sparse import F32, I32, S, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def bitonic_smem(x, o):
  """A row sorted in shared memory by the whole bitonic network: each stage reads its partners from the buffer."""
  n = x.shape[1]
  b = ml.smem((n,), x.dtype)
  ml.copy(x.at[ml.program_id(0)], b)
  i = ml.arange(0, n)
  k = 2
  while k <= n:
    j = k // 2
    while j >= 1:
      v = b[...]
      p = b[i ^ j]
      keep_min = ((i & k) == 0) == ((i & j) == 0)
      b[...] = ml.where(keep_min, ml.minimum(v, p), ml.maximum(v, p))
      j //= 2
    k *= 2
  ml.copy(b, o.at[ml.program_id(0)])


case("bitonic_sort_in_smem", bitonic_smem, lambda s: ((rng_of(s).standard_normal((4, 128)).astype(np.float32),), {}),
     lambda x: np.sort(x, axis=1), 0)
case("bitonic_sort_in_smem_int32", bitonic_smem, lambda s: ((rng_of(s).integers(-99, 99, (2, 256)).astype(np.int32),), {}),
     lambda x: np.sort(x, axis=1), 0)


def _bit_reversal(n):
  bits = n.bit_length() - 1
  return np.array([int(format(k, f"0{bits}b")[::-1], 2) for k in range(n)])


@mg.mgpu_kernel(out_shape=lambda re, im: (S(re.shape, F32), S(im.shape, F32)), grid=lambda re, im: (re.shape[0],))
def fft_smem(re, im, ore, oim):
  """A 128-point FFT a row in shared memory: the bit reversal and every stage's partner read from the buffers."""
  N = re.shape[1]
  r_s = ml.smem((N,), F32)
  m_s = ml.smem((N,), F32)
  ml.copy(re.at[ml.program_id(0)], r_s)
  ml.copy(im.at[ml.program_id(0)], m_s)
  i = ml.arange(0, N)
  rev = ml.zeros((N,), I32)
  for bit in ml.static_range(7):
    rev |= ((i >> bit) & 1) << (6 - bit)
  r = r_s[rev]
  m = m_s[rev]
  for s in ml.static_range(7):
    r_s[...] = r
    m_s[...] = m
    h = 1 << s
    upper = (i & h) == 0
    r, m = butterfly(r, m, r_s[i ^ h], m_s[i ^ h], upper, (i % h).astype(F32) * (-np.pi / h))
  ore.at[ml.program_id(0)][...] = r
  oim.at[ml.program_id(0)][...] = m


case("fft_128_in_smem", fft_smem, lambda s: ((rng_of(s).standard_normal((2, 128)).astype(np.float32),
                                              rng_of(s + 1).standard_normal((2, 128)).astype(np.float32)), {}),
     _fft_rows_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype), grid=lambda t, ids: (ids.shape[0] // 128,))
def lut_staged(t, ids, o):
  """A table staged in SMEM by TMA once a CTA, read at computed places, ids < 0 masked to -1 (Triton's other=)."""
  tab = ml.smem(t.shape, t.dtype)
  ml.copy(t, tab)
  i = ids.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  o.at[ml.ds(ml.program_id(0) * 128, 128)][...] = ml.load(tab.at[i], mask=i >= 0, other=-1.0)


def _lut_make(seed):
  r = rng_of(seed)
  return (r.standard_normal(256).astype(np.float32), r.integers(-8, 256, 512).astype(np.int32)), {}


case("lookup_table_staged_in_smem_masked", lut_staged, _lut_make,
     lambda t, ids: np.where(ids >= 0, t[np.maximum(ids, 0)], -1).astype(np.float32), 0)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), t.dtype), grid=(1,))
def rows_of_staged_tile(t, ids, o):
  """Embedding rows of a small table staged in SMEM, jnp's negative indices from the end."""
  b = ml.smem(t.shape, t.dtype)
  ml.copy(t, b)
  o[...] = b[ids[...], :] * 2.0


def _rows_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((16, 64)).astype(np.float32), r.integers(-16, 16, 64).astype(np.int32)), {}


case("rows_of_a_staged_tile", rows_of_staged_tile, _rows_make, lambda t, ids: t[ids] * 2, 0)


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape, t.dtype), grid=(1,))
def points_of_staged_tile(t, ids, o):
  """A tile staged in SMEM read at (row, column) points of a flat id."""
  b = ml.smem(t.shape, t.dtype)
  ml.copy(t, b)
  i = ids[...]
  o[...] = b[i // 16, i % 16]


case("points_of_a_staged_tile", points_of_staged_tile,
     lambda s: ((rng_of(s).standard_normal((16, 16)).astype(np.float32), rng_of(s + 1).integers(0, 256, 128).astype(np.int32)), {}),
     lambda t, ids: t[ids // 16, ids % 16], 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def rotate_in_smem_loop(x, o):
  """A run-time loop that reads the buffer rotated and writes it back: each trip's read after the last trip's write."""
  b = ml.smem(x.shape, F32)
  ml.copy(x, b)
  i = ml.arange(0, x.shape[0])
  for _ in range(5):
    b[...] = b[(i + 3) % x.shape[0]] + 1.0
  ml.copy(b, o)


case("smem_gather_in_a_run_time_loop", rotate_in_smem_loop, lambda s: ((rng_of(s).standard_normal(128).astype(np.float32),), {}),
     lambda x: np.roll(x, -15) + 5, 1e-6)


@mg.mgpu_kernel(out_shape=lambda x, **k: S((256,), I32), grid=lambda x, **k: (x.shape[0] // k["BLOCK"],))
def histogram_then_lookup(x, h, *, BLOCK: ml.constexpr):
  """A byte histogram built in SMEM by atomics, then each key's bin count read back from it (a rank's first step)."""
  local = ml.smem((256,), I32)
  local[...] = ml.zeros((256,), I32)
  v = x.at[ml.ds(ml.program_id(0) * BLOCK, BLOCK)][...].astype(I32)
  ml.atomic_add(local.at[v], 1)
  seen = local[v]
  ml.atomic_max(h.at[v], seen)


def _hl_ref(x, *, BLOCK):
  out = np.full(256, np.iinfo(np.int32).min, np.int64)     # (an output only atomic_max updates starts at the lowest)
  for blk in x.reshape(-1, BLOCK):
    c = np.bincount(blk, minlength=256)
    out = np.maximum(out, np.where(c > 0, c, np.iinfo(np.int32).min))
  return out.astype(np.int32)


case("smem_histogram_read_back_at_keys", histogram_then_lookup,
     lambda s: ((rng_of(s).integers(0, 200, 1024).astype(np.uint8),), dict(BLOCK=256)), _hl_ref, 0)


# ---------------------------------------------------------------- plain scatters into SMEM buffers (the class fixed)
@mg.mgpu_kernel(out_shape=lambda k: k, grid=lambda k: (k.shape[0] // 128,))
def block_counting_sort(keys, o):
  """A stable counting sort of each block's 4-bit keys: every key stored into SMEM at its rank, then read back."""
  k = keys.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  onehot = (k[:, None] == ml.arange(0, 16)[None, :]).astype(I32)             # (128, 16)
  counts = ml.sum(onehot, axis=0)
  starts = ml.cumsum(counts, axis=0) - counts
  rank = starts[k] + ml.sum((ml.cumsum(onehot, axis=0) - 1) * onehot, axis=1)
  s = ml.smem((128,), I32)
  s[rank] = k
  o.at[ml.ds(ml.program_id(0) * 128, 128)][...] = s[...]


case("counting_sort_scatter_into_smem", block_counting_sort,
     lambda s: ((rng_of(s).integers(0, 16, 512).astype(np.int32),), {}), lambda k: np.sort(k.reshape(-1, 128), 1).reshape(-1), 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=lambda x: (x.shape[0] // 32, x.shape[1] // 32))
def transpose_flat_smem(x, o):
  """CUDA's tile transpose through a flat shared array: element (r, c) stored at c * 32 + r, read back in rows."""
  i, j = ml.program_id(0), ml.program_id(1)
  v = x.at[ml.ds(i * 32, 32), ml.ds(j * 32, 32)][...]
  r = ml.arange(0, 32)[:, None]
  c = ml.arange(0, 32)[None, :]
  t = ml.smem((32 * 32,), x.dtype)
  t[c * 32 + r] = v
  o.at[ml.ds(j * 32, 32), ml.ds(i * 32, 32)][...] = t[...].reshape(32, 32)


case("transpose_through_a_flat_smem_scatter", transpose_flat_smem,
     lambda s: ((rng_of(s).standard_normal((64, 96)).astype(np.float32),), {}), lambda x: x.T, 0)


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=(1,))
def permute_rows_smem(x, p, o):
  """Rows placed by a permutation into a staged tile (`s[p, :] = rows`), then stored whole by TMA."""
  s = ml.smem(x.shape, x.dtype)
  s[p[...], :] = x[...] * 2.0
  ml.copy(s, o)


def _perm_rows_ref(x, p):
  out = np.zeros_like(x)
  out[p] = x * 2
  return out


case("rows_scattered_into_smem_by_a_permutation", permute_rows_smem,
     lambda s: ((rng_of(s).standard_normal((16, 64)).astype(np.float32), rng_of(s).permutation(16).astype(np.int32)), {}),
     _perm_rows_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def compact_in_smem(x, o):
  """Stream compaction within a block: the kept elements stored at their prefix-sum slots (Triton's tl.store with
  a mask at computed places), the rest of the buffer zeros."""
  v = x.at[ml.ds(ml.program_id(0) * 128, 128)][...]
  keep = v > 0
  slot = ml.cumsum(keep.astype(I32), axis=0) - 1
  s = ml.smem((128,), F32)
  s[...] = ml.zeros((128,), F32)
  ml.store(s.at[slot], v, mask=keep)
  o.at[ml.ds(ml.program_id(0) * 128, 128)][...] = s[...]


def _compact_ref(x):
  out = np.zeros_like(x).reshape(-1, 128)
  for b, blk in enumerate(x.reshape(-1, 128)):
    kept = blk[blk > 0]
    out[b, :len(kept)] = kept
  return out.reshape(-1)


case("stream_compaction_masked_store_into_smem", compact_in_smem,
     lambda s: ((rng_of(s).standard_normal(256).astype(np.float32),), {}), _compact_ref, 0)


# ---------------------------------------------------------------- SMEM windows no register tensor holds (the class fixed)
@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0] - 2, u.shape[1] - 2), F32), grid=lambda u: ((u.shape[0] - 2) // 16,))
def jacobi_halo_odd(u, o):
  """A 5-point sweep of an (18, W) halo tile staged by TMA: its four neighbours are (16, W - 2) windows of SMEM."""
  i = ml.program_id(0)
  W = u.shape[1]
  t = ml.smem((18, W), F32)
  ml.copy(u.at[ml.ds(i * 16, 18), :], t)
  nb = [t.at[ml.ds(r, 16), ml.ds(c, W - 2)][...] for r, c in ((0, 1), (2, 1), (1, 0), (1, 2))]
  o.at[ml.ds(i * 16, 16), :][...] = 0.25 * (nb[0] + nb[1] + nb[2] + nb[3])


def _halo_ref(u):
  return np.float32(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


case("jacobi_halo_odd_smem_windows_72", jacobi_halo_odd, lambda s: ((rng_of(s).standard_normal((66, 72)).astype(np.float32),), {}),
     _halo_ref, 1e-6)
case("jacobi_halo_odd_smem_windows_40", jacobi_halo_odd, lambda s: ((rng_of(s).standard_normal((34, 40)).astype(np.float32),), {}),
     _halo_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0] - 2,), F32), grid=(1,))
def laplacian_1d_smem(u, o):
  """The second difference of a vector staged in SMEM: three windows of n - 2 elements."""
  t = ml.smem(u.shape, F32)
  ml.copy(u, t)
  n = u.shape[0]
  o[...] = t.at[ml.ds(0, n - 2)][...] - 2.0 * t.at[ml.ds(1, n - 2)][...] + t.at[ml.ds(2, n - 2)][...]


case("laplacian_1d_odd_smem_windows", laplacian_1d_smem, lambda s: ((rng_of(s).standard_normal(256).astype(np.float32),), {}),
     lambda u: u[:-2] - 2 * u[1:-1] + u[2:], 1e-6)


@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0], 2), F32), grid=(1,))
def window_row_stats(u, o):
  """Row sums and maxima of an odd window of a staged tile (its padding lanes must stay out of both)."""
  t = ml.smem(u.shape, F32)
  ml.copy(u, t)
  v = t.at[:, ml.ds(3, 61)][...]
  o.at[:, ml.ds(0, 1)][...] = ml.sum(v, axis=1, keepdims=True)
  o.at[:, ml.ds(1, 1)][...] = ml.max(v, axis=1, keepdims=True)


case("odd_smem_window_row_sums_and_maxima", window_row_stats,
     lambda s: ((rng_of(s).standard_normal((16, 72)).astype(np.float32) - 3,), {}),
     lambda u: np.stack([u[:, 3:64].sum(1), u[:, 3:64].max(1)], 1), 1e-6)


@mg.mgpu_kernel(out_shape=lambda c, v, x: S((c.shape[0],), F32), grid=lambda c, v, x: (c.shape[0] // 128,))
def ell_x_in_smem(cols, vals, x, y):
  """ELL SpMV with x cached in shared memory, as CUDA ports stage it: each slot's x[c] read from the buffer."""
  xs = ml.smem(x.shape, F32)
  ml.copy(x, xs)
  rows = ml.program_id(0) * 128 + ml.arange(0, 128)
  acc = ml.zeros((128,), F32)
  for k in range(cols.shape[1]):
    c = cols[rows, k]
    acc += vals[rows, k] * ml.where(c >= 0, xs[c], 0.0)
  y[rows] = acc


def _ell_smem_make(seed, n=8192):
  r = rng_of(seed)
  cols = np.where(r.random((256, 8)) < 0.8, r.integers(0, n, (256, 8)), -1).astype(np.int32)
  return (cols, r.standard_normal((256, 8)).astype(np.float32), r.standard_normal(n).astype(np.float32)), {}


def _ell_smem_ref(cols, vals, x):
  return np.sum(np.where(cols >= 0, vals * x[np.maximum(cols, 0)], 0), 1)


case("ell_spmv_x_cached_in_smem", ell_x_in_smem, _ell_smem_make, _ell_smem_ref, 1e-5)
case("ell_spmv_x_cached_in_smem_128k", ell_x_in_smem, lambda s: _ell_smem_make(s, 32768), _ell_smem_ref, 1e-5)
