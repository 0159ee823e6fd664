"""Probe 69b's corpus, its fourth part: the same families written the harder ways ports write them (run-time column
indices of register tiles, a Floyd-Warshall diagonal tile relaxing itself, halos through SMEM, COO and SELL formats,
k-means distances on tensor cores, radix-sort digit counts, loops over run-time lengths from reductions).
Same CASES form as probe69b_sparse.py."""
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe69b_sparse import F16, F32, I32, S, csr_dense, f32, random_csr, rng_of

CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


# ---------------------------------------------------------------- Floyd-Warshall phase 1: a tile relaxing itself
@mg.mgpu_kernel(out_shape=lambda d: d, grid=(1,))
def fw_diagonal_tile(d, o):
  cur = d[...]
  B = d.shape[0]
  for k in range(B):
    cur = ml.minimum(cur, cur[:, k][:, None] + cur[k, :][None, :])
  o[...] = cur


def _fw1_make(seed):
  r = rng_of(seed)
  d = r.integers(1, 100, (32, 32)).astype(np.float32)
  np.fill_diagonal(d, 0)
  return (d,), {}


def _fw1_ref(d):
  d = d.copy()
  for k in range(d.shape[0]):
    d = np.minimum(d, d[:, k:k + 1] + d[k:k + 1, :])
  return d


case("floyd_warshall_diagonal_run_time_k", fw_diagonal_tile, _fw1_make, _fw1_ref, 0)


@mg.mgpu_kernel(out_shape=lambda d: d, grid=(1,))
def fw_diagonal_smem(d, o):
  """The CUDA form: the tile in shared memory, row k and column k re-read from it each step."""
  t = ml.smem(d.shape, F32)
  ml.copy(d, t)
  B = d.shape[0]
  for k in range(B):
    col = t.at[:, ml.ds(k, 1)][...]
    row = t.at[ml.ds(k, 1), :][...]
    t[...] = ml.minimum(t[...], col + row)
  ml.copy(t, o)


case("floyd_warshall_diagonal_smem", fw_diagonal_smem, _fw1_make, _fw1_ref, 0)


# ---------------------------------------------------------------- Cholesky with a run-time column loop
@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0],))
def cholesky_run_time_loop(a_ref, l_ref):
  n = a_ref.shape[1]
  a = a_ref.at[ml.program_id(0)][...]
  ar = ml.arange(0, n)
  L = ml.zeros((n, n), F32)
  for j in range(n):
    lj = L[j, :]
    col = a[:, j] - ml.sum(L * lj[None, :], axis=1)
    d = ml.sqrt(col[j])
    L = ml.where(ar[None, :] == j, ml.where(ar >= j, col / d, 0.0)[:, None], L)
  l_ref.at[ml.program_id(0)][...] = L


def _spd(r, b, n):
  m = r.standard_normal((b, n, n)).astype(np.float32)
  return (m @ m.transpose(0, 2, 1) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


case("cholesky_run_time_column_index", cholesky_run_time_loop, lambda s: ((_spd(rng_of(s), 4, 16),), {}),
     lambda a: np.linalg.cholesky(a.astype(np.float64)), 1e-5)


@mg.mgpu_kernel(out_shape=lambda l, b: b, grid=lambda l, b: (l.shape[0],))
def back_substitution(l_ref, b_ref, x_ref):
  """U x = b with U = L^T: rows from the last, L's columns read transposed."""
  n = l_ref.shape[1]
  p = ml.program_id(0)
  U = l_ref.at[p][...].T
  x = b_ref.at[p][...]
  ar = ml.arange(0, n)
  for t in range(n):
    i = n - 1 - t
    s = ml.sum(ml.where(ar > i, U[i, :] * x, 0.0))
    x = ml.where(ar == i, (x[i] - s) / U[i, i], x)
  x_ref.at[p][...] = x


def _bs_make(seed):
  r = rng_of(seed)
  l = np.linalg.cholesky(_spd(r, 4, 16).astype(np.float64)).astype(np.float32)
  return (l, r.standard_normal((4, 16)).astype(np.float32)), {}


case("back_substitution_transposed_register_tile", back_substitution, _bs_make,
     lambda l, b: np.stack([np.linalg.solve(l[i].T.astype(np.float64), b[i]) for i in range(l.shape[0])]), 1e-5)


# ---------------------------------------------------------------- COO and SELL
@mg.mgpu_kernel(out_shape=lambda r, c, v, x, **k: S((k["M"],), F32), grid=lambda r, c, v, x, **k: (ml.cdiv(r.shape[0], 128),))
def coo_spmv_atomics(rows, cols, vals, x, y, *, M: ml.constexpr):
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < rows.shape[0]
  r = ml.load(rows.at[e], mask=m, other=0)
  c = ml.load(cols.at[e], mask=m, other=0)
  ml.atomic_add(y.at[r], ml.load(vals.at[e], mask=m, other=0.0) * x[c], mask=m)


def _coo_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 32, 48, 9)
  rows = np.repeat(np.arange(32), np.diff(rp)).astype(np.int32)
  return (rows, c, v, r.standard_normal(48).astype(np.float32)), dict(M=32)


def _coo_ref(rows, cols, vals, x, *, M):
  y = np.zeros(M, np.float64)
  np.add.at(y, rows, vals * x[cols])
  return y


case("coo_spmv_atomic_rows_tail", coo_spmv_atomics, _coo_make, _coo_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda sp, sl, c, v, x, **k: S((k["M"],), F32), grid=lambda sp, sl, c, v, x, **k: (sp.shape[0] - 1,))
def sell_c_spmv(slice_ptr, slice_len, cols, vals, x, y, *, M: ml.constexpr, C: ml.constexpr):
  """SELL-C: slices of C rows, each stored column-major padded to its longest row (a run-time trip count a slice)."""
  s = ml.program_id(0)
  base = slice_ptr[s]
  rows = s * C + ml.arange(0, C)
  acc = ml.zeros((C,), F32)
  for t in range(slice_len[s]):
    idx = base + t * C + ml.arange(0, C)
    c = cols[idx]
    acc += vals[idx] * ml.load(x.at[c], mask=c >= 0, other=0.0)
  ml.store(y.at[rows], acc, mask=rows < M)


def _sell_make(seed):
  r = rng_of(seed)
  M, N, C = 30, 40, 8
  rp, c, v = random_csr(r, M, N, 7)
  dense = csr_dense(rp, c, v, N)
  sp, sl, cols, vals = [0], [], [], []
  for s0 in range(0, 32, C):
    lens = [int(rp[i + 1] - rp[i]) if i < M else 0 for i in range(s0, s0 + C)]
    w = max(lens)
    sl.append(w)
    for t in range(w):
      for i in range(s0, s0 + C):
        if i < M and t < lens[i - s0]:
          cols.append(c[rp[i] + t])
          vals.append(v[rp[i] + t])
        else:
          cols.append(-1)
          vals.append(0.0)
    sp.append(len(cols))
  x = r.standard_normal(N).astype(np.float32)
  return (np.array(sp, np.int32), np.array(sl, np.int32), np.array(cols + [-1] * 8, np.int32),
          np.array(vals + [0.0] * 8, np.float32), x), dict(M=M, C=C, dense=dense)


def _sell_ref(sp, sl, c, v, x, *, dense, **k):
  return dense @ x


def _sell_kernel(sp, sl, c, v, x, *, dense, interpret=False, **k):
  return sell_c_spmv(sp, sl, c, v, x, interpret=interpret, **k)


case("sell_c_slices_run_time_width", _sell_kernel, _sell_make, _sell_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32),
                grid=lambda rp, c, v, x, *, BR, **k: (ml.cdiv(rp.shape[0] - 1, BR),))
def csr_rows_longest_trip(rowptr, cols, vals, x, y, *, BR: ml.constexpr):
  """A block of rows walked to its own longest row, a trip count from a register reduction."""
  n = y.shape[0]
  rows = ml.program_id(0) * BR + ml.arange(0, BR)
  rm = rows < n
  start = ml.load(rowptr.at[rows], mask=rm, other=0)
  lens = ml.load(rowptr.at[rows + 1], mask=rm, other=0) - start
  acc = ml.zeros((BR,), F32)
  for t in range(ml.max(lens)):
    m = t < lens
    c = ml.load(cols.at[start + t], mask=m, other=0)
    acc += ml.load(vals.at[start + t], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0)
  ml.store(y.at[rows], acc, mask=rm)


def _csr_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 40, 64, 12)
  return (rp, c, v, r.standard_normal(64).astype(np.float32)), dict(BR=16)


case("csr_rows_trip_count_from_max", csr_rows_longest_trip, _csr_make,
     lambda rp, c, v, x, **k: csr_dense(rp, c, v, x.shape[0]) @ x, 1e-5)


# ---------------------------------------------------------------- k-means distances on tensor cores
@mg.mgpu_kernel(out_shape=lambda x, c: S((x.shape[0],), I32), grid=lambda x, c: (x.shape[0] // 64,))
def kmeans_assign_dot(x, cent, label):
  pts = x.at[ml.ds(ml.program_id(0) * 64, 64), :][...]             # (64, D) float16
  c = cent[...]                                                     # (K, D) float16
  xc = ml.dot(pts, c.T)                                             # (64, K) float32
  cf = c.astype(F32)
  dist = ml.sum(cf * cf, axis=1)[None, :] - 2.0 * xc
  label.at[ml.ds(ml.program_id(0) * 64, 64)][...] = ml.argmin(dist, axis=1)


def _kmd_make(seed):
  r = rng_of(seed)
  return (np.asarray(jnp.asarray(r.standard_normal((128, 64)), F16)), np.asarray(jnp.asarray(r.standard_normal((16, 64)), F16))), {}


def _kmd_ref(x, c):
  x, c = f32(x), f32(c)
  return np.argmin(np.sum(c * c, 1)[None] - 2 * (x @ c.T), 1).astype(np.int32)


case("kmeans_assign_tensor_core_distances", kmeans_assign_dot, _kmd_make, _kmd_ref, 0)


@mg.mgpu_kernel(out_shape=lambda x, c: S((x.shape[0],), I32), grid=lambda x, c: (x.shape[0] // 64,))
def kmeans_ties_first(x, cent, label):
  """Integer distances with ties: argmin keeps the first centroid, as np.argmin."""
  pts = x.at[ml.ds(ml.program_id(0) * 64, 64), :][...]
  c = cent[...]
  d = ml.sum(ml.abs(pts[:, None, :] - c[None, :, :]), axis=2)
  label.at[ml.ds(ml.program_id(0) * 64, 64)][...] = ml.argmin(d, axis=1)


case("kmeans_manhattan_integer_ties", kmeans_ties_first,
     lambda s: ((rng_of(s).integers(0, 3, (128, 4)).astype(np.int32), rng_of(s + 1).integers(0, 3, (8, 4)).astype(np.int32)), {}),
     lambda x, c: np.argmin(np.abs(x[:, None] - c[None]).sum(2), 1).astype(np.int32), 0)


# ---------------------------------------------------------------- radix sort: digit counts and stable ranks
@mg.mgpu_kernel(out_shape=lambda k, **kw: (S((k.shape[0] // 128, 16), I32), S(k.shape, I32)), grid=lambda k, **kw: (k.shape[0] // 128,))
def radix_digit_ranks(keys, counts, ranks, *, SHIFT: ml.constexpr):
  """A 4-bit digit pass: each block's digit counts, and each key's stable rank among its block's keys of its digit."""
  b = ml.program_id(0)
  k = keys.at[ml.ds(b * 128, 128)][...]
  digit = (k >> SHIFT) & 15
  onehot = (digit[:, None] == ml.arange(0, 16)[None, :]).astype(I32)    # (128, 16)
  incl = ml.cumsum(onehot, axis=0)
  counts.at[b, :][...] = ml.sum(onehot, axis=0)
  ranks.at[ml.ds(b * 128, 128)][...] = ml.sum(incl * onehot, axis=1) - 1


def _radix_ref(keys, *, SHIFT):
  d = (keys >> SHIFT) & 15
  blocks = d.reshape(-1, 128)
  counts = np.stack([np.bincount(b, minlength=16) for b in blocks]).astype(np.int32)
  ranks = np.concatenate([[np.sum(b[:i] == b[i]) for i in range(128)] for b in blocks]).astype(np.int32)
  return counts, ranks


case("radix_sort_digit_counts_and_ranks", radix_digit_ranks,
     lambda s: ((rng_of(s).integers(0, 2 ** 16, 512).astype(np.int32),), dict(SHIFT=4)), _radix_ref, 0)


# ---------------------------------------------------------------- stencils with halos
@mg.mgpu_kernel(out_shape=lambda u: u, grid=lambda u: (u.shape[0] // 128,))
def stencil_1d_halo(u, o):
  """A 3-point smoothing: the tile and its neighbours read as shifted windows clamped at the ends."""
  n = u.shape[0]
  i = ml.program_id(0) * 128 + ml.arange(0, 128)
  left = u[ml.maximum(i - 1, 0)]
  right = u[ml.minimum(i + 1, n - 1)]
  o[i] = 0.25 * left + 0.5 * u[i] + 0.25 * right


def _st1_ref(u):
  p = np.concatenate([u[:1], u, u[-1:]])
  return np.float32(0.25) * p[:-2] + np.float32(0.5) * p[1:-1] + np.float32(0.25) * p[2:]


case("stencil_1d_clamped_gathers", stencil_1d_halo, lambda s: ((rng_of(s).standard_normal(512).astype(np.float32),), {}), _st1_ref, 1e-6)


@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0] - 2, 64), F32), grid=lambda u: ((u.shape[0] - 2) // 16,))
def jacobi_smem_halo(u, o):
  """A (16 + 2)-row halo tile through SMEM (rows padded to 72 for TMA), 64 columns' neighbours as shifted windows."""
  i = ml.program_id(0)
  t = ml.smem((18, u.shape[1]), F32)
  ml.copy(u.at[ml.ds(i * 16, 18), :], t)
  up = t.at[ml.ds(0, 16), ml.ds(1, 64)][...]
  dn = t.at[ml.ds(2, 16), ml.ds(1, 64)][...]
  lf = t.at[ml.ds(1, 16), ml.ds(0, 64)][...]
  rt = t.at[ml.ds(1, 16), ml.ds(2, 64)][...]
  o.at[ml.ds(i * 16, 16), :][...] = 0.25 * (up + dn + lf + rt)


def _jsh_ref(u):
  return np.float32(0.25) * (u[:-2, 1:-1] + u[2:, 1:-1] + u[1:-1, :-2] + u[1:-1, 2:])


case("jacobi_smem_halo_windows", jacobi_smem_halo, lambda s: ((rng_of(s).standard_normal((66, 72)).astype(np.float32),), {}),
     lambda u: _jsh_ref(u)[:, :64], 1e-6)


@mg.mgpu_kernel(out_shape=lambda u: S((u.shape[0] - 2, u.shape[1] - 2), F32), grid=lambda u: ((u.shape[0] - 2) // 16,))
def jacobi_register_slices(u, o):
  """The same with the halo tile in registers, neighbours as slices of it (NumPy's form)."""
  i = ml.program_id(0)
  t = u.at[ml.ds(i * 16, 18), :][...]
  o.at[ml.ds(i * 16, 16), :][...] = 0.25 * (t[:-2, 1:-1] + t[2:, 1:-1] + t[1:-1, :-2] + t[1:-1, 2:])


case("jacobi_register_tile_slices", jacobi_register_slices,
     lambda s: ((rng_of(s).standard_normal((66, 66)).astype(np.float32),), {}), _jsh_ref, 1e-6)


# ---------------------------------------------------------------- reductions
@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=lambda x: (ml.cdiv(x.shape[0], 256),))
def norm2_atomic(x, o):
  i = ml.program_id(0) * 256 + ml.arange(0, 256)
  v = ml.load(x.at[i], mask=i < x.shape[0], other=0.0)
  ml.atomic_add(o.at[0], ml.sum(v * v))


case("norm2_squared_atomic_scalar", norm2_atomic, lambda s: ((rng_of(s).standard_normal(1000).astype(np.float32),), {}),
     lambda x: np.array([np.sum(x.astype(np.float64) ** 2)]), 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 256,), I32), grid=lambda x: (x.shape[0] // 256,))
def block_argmax_value(x, o):
  v = x.at[ml.ds(ml.program_id(0) * 256, 256)][...]
  o[ml.program_id(0)] = ml.argmax(v) + ml.program_id(0) * 256


case("block_argmax_global_index", block_argmax_value, lambda s: ((rng_of(s).standard_normal(1024).astype(np.float32),), {}),
     lambda x: (np.argmax(x.reshape(-1, 256), 1) + np.arange(4) * 256).astype(np.int32), 0)
