"""Probe 69b's corpus, its first part: sparse and dense linear algebra as CUDA and Triton users port it (CSR SpMV with
row pointers read per program, ELL, blocked-ELL with a tensor-core dot, CSR SpMM, GEMV row-major and transposed,
batched tiny Cholesky and triangular solves, a blocked transpose through SMEM, Floyd-Warshall's min-plus step).
CASES maps a name to (kernel, make(seed) -> (args, kw), ref(*args, **kw), tol); tol 0 is bit for bit."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32, I32 = jnp.float16, jnp.float32, jnp.int32
CASES = {}


def case(name, kernel, make, ref, tol):
  CASES[name] = (kernel, make, ref, tol)


def rng_of(seed):
  return np.random.default_rng(1000 + seed)


def f32(a):
  return np.asarray(a, np.float32)


def random_csr(r, n_rows, n_cols, max_nnz):
  lens = r.integers(0, max_nnz + 1, n_rows)
  rowptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  cols = np.concatenate([np.sort(r.choice(n_cols, l, replace=False)) for l in lens]).astype(np.int32)
  vals = r.standard_normal(int(rowptr[-1])).astype(np.float32)
  return rowptr, cols, vals


def csr_dense(rowptr, cols, vals, n_cols):
  a = np.zeros((len(rowptr) - 1, n_cols), np.float32)
  for i in range(len(rowptr) - 1):
    a[i, cols[rowptr[i]:rowptr[i + 1]]] = vals[rowptr[i]:rowptr[i + 1]]
  return a


# ---------------------------------------------------------------- CSR SpMV, one row a program (scalar row pointers)
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32), grid=lambda rp, c, v, x, **k: (rp.shape[0] - 1,))
def csr_spmv_row(rowptr, cols, vals, x, y, *, BLOCK: ml.constexpr):
  row = ml.program_id(0)
  start = rowptr[row]
  end = rowptr[row + 1]
  acc = ml.zeros((BLOCK,), F32)
  for s in range(start, end, BLOCK):
    offs = s + ml.arange(0, BLOCK)
    m = offs < end
    c = ml.load(cols.at[offs], mask=m, other=0)
    v = ml.load(vals.at[offs], mask=m, other=0.0)
    acc += v * ml.load(x.at[c], mask=m, other=0.0)
  y[row] = ml.sum(acc)


def _csr_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 24, 96, 70)
  return (rp, c, v, r.standard_normal(96).astype(np.float32)), dict(BLOCK=32)


def _csr_ref(rp, c, v, x, **k):
  return csr_dense(rp, c, v, x.shape[0]) @ x


case("csr_spmv_row_per_program", csr_spmv_row, _csr_make, _csr_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32), grid=lambda rp, c, v, x, **k: (rp.shape[0] - 1,))
def csr_spmv_while(rowptr, cols, vals, x, y, *, BLOCK: ml.constexpr):
  row = ml.program_id(0)
  s = rowptr[row]
  end = rowptr[row + 1]
  total = 0.0
  while s < end:
    offs = s + ml.arange(0, BLOCK)
    m = offs < end
    c = ml.load(cols.at[offs], mask=m, other=0)
    total += ml.sum(ml.load(vals.at[offs], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0))
    s += BLOCK
  y[row] = total


case("csr_spmv_while_scalar_accumulator", csr_spmv_while, _csr_make, _csr_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32),
                grid=lambda rp, c, v, x, *, BR, **k: (ml.cdiv(rp.shape[0] - 1, BR),))
def csr_spmv_rows(rowptr, cols, vals, x, y, *, BR: ml.constexpr, MAXLEN: ml.constexpr):
  """A block of rows a program, each thread walking its row to the longest row's length (CSR-scalar)."""
  n = y.shape[0]
  rows = ml.program_id(0) * BR + ml.arange(0, BR)
  rm = rows < n
  start = ml.load(rowptr.at[rows], mask=rm, other=0)
  end = ml.load(rowptr.at[rows + 1], mask=rm, other=0)
  acc = ml.zeros((BR,), F32)
  for t in range(MAXLEN):
    idx = start + t
    m = idx < end
    c = ml.load(cols.at[idx], mask=m, other=0)
    acc += ml.load(vals.at[idx], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0)
  ml.store(y.at[rows], acc, mask=rm)


def _csr_rows_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 40, 64, 12)
  return (rp, c, v, r.standard_normal(64).astype(np.float32)), dict(BR=16, MAXLEN=12)


case("csr_spmv_block_of_rows", csr_spmv_rows, _csr_rows_make, _csr_ref, 1e-5)


# ---------------------------------------------------------------- ELL
@mg.mgpu_kernel(out_shape=lambda c, v, x, **k: S((c.shape[0],), F32), grid=lambda c, v, x, *, BR, **k: (c.shape[0] // BR,))
def ell_spmv(cols, vals, x, y, *, BR: ml.constexpr):
  rows = ml.program_id(0) * BR + ml.arange(0, BR)
  K = cols.shape[1]
  kk = ml.arange(0, K)
  c = cols.at[rows[:, None], kk[None, :]].load()
  v = vals.at[rows[:, None], kk[None, :]].load()
  xv = ml.load(x.at[c], mask=c >= 0, other=0.0)
  y.at[rows].store(ml.sum(v * xv, axis=1))


def _ell_make(seed):
  r = rng_of(seed)
  n, K, m = 64, 8, 50
  cols = np.where(r.random((n, K)) < 0.7, r.integers(0, m, (n, K)), -1).astype(np.int32)
  return (cols, r.standard_normal((n, K)).astype(np.float32), r.standard_normal(m).astype(np.float32)), dict(BR=32)


def _ell_ref(cols, vals, x, **k):
  return np.sum(np.where(cols >= 0, vals * x[np.maximum(cols, 0)], 0), axis=1)


case("ell_spmv_padded_minus_one", ell_spmv, _ell_make, _ell_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda c, v, x, **k: S((c.shape[1],), F32), grid=lambda c, v, x, *, BR, **k: (c.shape[1] // BR,))
def ell_spmv_colmajor(cols, vals, x, y, *, BR: ml.constexpr):
  """ELL stored column-major (K, n), the coalesced layout of CUDA's ELL kernels: one slot at a time."""
  rows = ml.program_id(0) * BR + ml.arange(0, BR)
  acc = ml.zeros((BR,), F32)
  for k in range(cols.shape[0]):
    c = cols[k, rows]
    acc += vals[k, rows] * ml.load(x.at[c], mask=c >= 0, other=0.0)
  y[rows] = acc


def _ellc_make(seed):
  (c, v, x), kw = _ell_make(seed)
  return (np.ascontiguousarray(c.T), np.ascontiguousarray(v.T), x), kw


case("ell_spmv_column_major", ell_spmv_colmajor, _ellc_make, lambda c, v, x, **k: _ell_ref(c.T, v.T, x), 1e-5)


# ---------------------------------------------------------------- blocked-ELL SpMM with a tensor-core dot
@mg.mgpu_kernel(out_shape=lambda bc, bv, b, **k: S((bc.shape[0] * 64, b.shape[1]), F32),
                grid=lambda bc, bv, b, **k: (bc.shape[0], b.shape[1] // 64))
def blocked_ell_spmm(bcols, bvals, b, c):
  i = ml.program_id(0)
  j = ml.program_id(1)
  acc = ml.zeros((64, 64), F32)
  for t in range(bcols.shape[1]):
    bc = bcols[i, t]
    a = bvals.at[i, t][...]
    bt = b.at[ml.ds(bc * 64, 64), ml.ds(j * 64, 64)][...]
    acc = ml.dot(a, bt, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


def _bell_make(seed):
  r = rng_of(seed)
  nbr, per, nbc = 2, 3, 4
  bcols = np.stack([r.choice(nbc, per, replace=False) for _ in range(nbr)]).astype(np.int32)
  bvals = np.asarray(jnp.asarray(r.standard_normal((nbr, per, 64, 64)) * 0.2, F16))
  b = np.asarray(jnp.asarray(r.standard_normal((nbc * 64, 128)) * 0.2, F16))
  return (bcols, bvals, b), {}


def _bell_ref(bcols, bvals, b):
  out = np.zeros((bcols.shape[0] * 64, b.shape[1]), np.float32)
  for i in range(bcols.shape[0]):
    for t in range(bcols.shape[1]):
      out[i * 64:(i + 1) * 64] += f32(bvals[i, t]) @ f32(b[bcols[i, t] * 64:(bcols[i, t] + 1) * 64])
  return out


case("blocked_ell_spmm_wgmma", blocked_ell_spmm, _bell_make, _bell_ref, 1e-3)


@mg.mgpu_kernel(out_shape=lambda bc, bv, b, **k: S((bc.shape[0] * 64, b.shape[1]), F32),
                grid=lambda bc, bv, b, **k: (bc.shape[0], b.shape[1] // 64))
def blocked_ell_spmm_smem(bcols, bvals, b, c):
  """The same through SMEM buffers filled by TMA, as a CUTLASS port stages them; -1 block columns skipped."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((64, 64), F16), ml.smem((64, 64), F16)
  acc = ml.zeros((64, 64), F32)
  for t in range(bcols.shape[1]):
    if (bc := bcols[i, t]) >= 0:
      ml.copy(bvals.at[i, t], a_s)
      ml.copy(b.at[ml.ds(bc * 64, 64), ml.ds(j * 64, 64)], b_s)
      acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


def _bell_skip_make(seed):
  (bcols, bvals, b), kw = _bell_make(seed)
  bcols = bcols.copy()
  bcols[0, 1] = -1
  return (bcols, bvals, b), kw


def _bell_skip_ref(bcols, bvals, b):
  keep = bcols >= 0
  return _bell_ref(np.where(keep, bcols, 0), np.where(keep[:, :, None, None], bvals, 0).astype(bvals.dtype), b)


case("blocked_ell_spmm_smem_skip", blocked_ell_spmm_smem, _bell_skip_make, _bell_skip_ref, 1e-3)


# ---------------------------------------------------------------- CSR SpMM: a row of A times dense B
@mg.mgpu_kernel(out_shape=lambda rp, c, v, b, **k: S((rp.shape[0] - 1, b.shape[1]), F32),
                grid=lambda rp, c, v, b, **k: (rp.shape[0] - 1,))
def csr_spmm(rowptr, cols, vals, b, out):
  row = ml.program_id(0)
  N = b.shape[1]
  acc = ml.zeros((N,), F32)
  for e in range(rowptr[row], rowptr[row + 1]):
    acc += vals[e] * b.at[cols[e], :][...]
  out.at[row, :][...] = acc


def _spmm_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 16, 32, 10)
  return (rp, c, v, r.standard_normal((32, 64)).astype(np.float32)), {}


case("csr_spmm_row_gather", csr_spmm, _spmm_make, lambda rp, c, v, b: csr_dense(rp, c, v, b.shape[0]) @ b, 1e-5)


# ---------------------------------------------------------------- GEMV
@mg.mgpu_kernel(out_shape=lambda a, x, **k: S((a.shape[0],), F32), grid=lambda a, x, *, BM, **k: (a.shape[0] // BM,))
def gemv_rows(a, x, y, *, BM: ml.constexpr, BK: ml.constexpr):
  rows = ml.program_id(0) * BM + ml.arange(0, BM)
  acc = ml.zeros((BM,), F32)
  for k in range(0, a.shape[1], BK):
    cols = k + ml.arange(0, BK)
    tile = ml.load(a.at[rows[:, None], cols[None, :]], mask=cols[None, :] < a.shape[1], other=0.0)
    xv = ml.load(x.at[cols], mask=cols < a.shape[1], other=0.0)
    acc += ml.sum(tile.astype(F32) * xv[None, :].astype(F32), axis=1)
  y[rows] = acc


def _gemv_make(seed):
  r = rng_of(seed)
  return (np.asarray(jnp.asarray(r.standard_normal((128, 200)), F16)), np.asarray(jnp.asarray(r.standard_normal(200), F16))), \
      dict(BM=64, BK=64)


case("gemv_row_major_k_tail", gemv_rows, _gemv_make, lambda a, x, **k: f32(a) @ f32(x), 1e-4)


@mg.mgpu_kernel(out_shape=lambda a, x, **k: S((a.shape[1],), F32), grid=lambda a, x, *, BN, **k: (a.shape[1] // BN,))
def gemv_transposed(a, x, y, *, BN: ml.constexpr, BK: ml.constexpr):
  """y = A.T @ x with A stored (k, n): columns of a program, rows walked through a pipelined loop."""
  j = ml.program_id(0)
  acc = ml.zeros((BN,), F32)
  for k in ml.range(a.shape[0] // BK, stages=2):
    tile = a.at[ml.ds(k * BK, BK), ml.ds(j * BN, BN)][...]
    xv = x.at[ml.ds(k * BK, BK)][...]
    acc += ml.sum(tile * xv[:, None], axis=0)
  y.at[ml.ds(j * BN, BN)][...] = acc


def _gemvt_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((256, 128)).astype(np.float32), r.standard_normal(256).astype(np.float32)), dict(BN=64, BK=64)


@mg.mgpu_kernel(out_shape=lambda a, x, **k: S((a.shape[1],), F32), grid=lambda a, x, *, BN, **k: (a.shape[1] // BN,))
def gemv_transposed_tma(a, x, y, *, BN: ml.constexpr, BK: ml.constexpr):
  """The same loop as MG502's hint writes it: the tiles copied into SMEM buffers allocated before the loop."""
  j = ml.program_id(0)
  a_s = ml.smem((BK, BN), F32)
  x_s = ml.smem((BK,), F32)
  acc = ml.zeros((BN,), F32)
  for k in ml.range(a.shape[0] // BK, stages=2):
    ml.copy(a.at[ml.ds(k * BK, BK), ml.ds(j * BN, BN)], a_s)
    ml.copy(x.at[ml.ds(k * BK, BK)], x_s)
    acc += ml.sum(a_s[...] * x_s[...][:, None], axis=0)
  y.at[ml.ds(j * BN, BN)][...] = acc


case("gemv_transposed_pipelined_tma", gemv_transposed_tma, _gemvt_make, lambda a, x, **k: a.T @ x, 1e-5)


@mg.mgpu_kernel(out_shape=lambda a, x: S((a.shape[0],), F32), grid=lambda a, x: (a.shape[0] // 64,))
def gemv_smem_tiles(a, x, y):
  i = ml.program_id(0)
  a_s = ml.smem((64, 128), F32)
  x_s = ml.smem((128,), F32)
  ml.copy(x, x_s)
  acc = ml.zeros((64,), F32)
  for k in range(a.shape[1] // 128):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 128, 128)], a_s)
    acc += ml.sum(a_s[...] * x_s[...][None, :], axis=1)
  y.at[ml.ds(i * 64, 64)][...] = acc


def _gemv_smem_make(seed):
  r = rng_of(seed)
  return (r.standard_normal((128, 128)).astype(np.float32), r.standard_normal(128).astype(np.float32)), {}


case("gemv_smem_tma_tiles", gemv_smem_tiles, _gemv_smem_make, lambda a, x: a @ x, 1e-5)


# ---------------------------------------------------------------- batched tiny Cholesky and triangular solves
@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[0],))
def batched_cholesky(a_ref, l_ref):
  n = a_ref.shape[1]
  a = a_ref.at[ml.program_id(0)][...]
  r = ml.arange(0, n)[:, None]
  c = ml.arange(0, n)[None, :]
  ar = ml.arange(0, n)
  L = ml.zeros((n, n), F32)
  for j in ml.static_range(n):
    lj = ml.sum(ml.where(r == j, L, 0.0), axis=0)                       # row j of L
    col = ml.sum(ml.where(c == j, a, 0.0), axis=1) - ml.sum(L * lj[None, :], axis=1)
    d = ml.sqrt(ml.sum(ml.where(ar == j, col, 0.0)))
    L = ml.where(c == j, ml.where(ar >= j, col / d, 0.0)[:, None], L)
  l_ref.at[ml.program_id(0)][...] = L


def _spd(r, b, n):
  m = r.standard_normal((b, n, n)).astype(np.float32)
  return (m @ m.transpose(0, 2, 1) + n * np.eye(n, dtype=np.float32)).astype(np.float32)


def _chol_make(seed, n=8):
  return (_spd(rng_of(seed), 4, n),), {}


case("batched_cholesky_8x8", batched_cholesky, _chol_make, lambda a: np.linalg.cholesky(a.astype(np.float64)), 1e-5)
case("batched_cholesky_16x16", batched_cholesky, lambda s: _chol_make(s, 16),
     lambda a: np.linalg.cholesky(a.astype(np.float64)), 1e-5)


@mg.mgpu_kernel(out_shape=lambda l, b: b, grid=lambda l, b: (l.shape[0],))
def batched_trsv(l_ref, b_ref, x_ref):
  """Forward substitution, a row at a time: x[i] = (b[i] - L[i, :i] @ x[:i]) / L[i, i]."""
  n = l_ref.shape[1]
  p = ml.program_id(0)
  L = l_ref.at[p][...]
  b = b_ref.at[p][...]
  ar = ml.arange(0, n)
  x = ml.zeros((n,), F32)
  for i in ml.static_range(n):
    li = L[i, :]
    s = ml.sum(li * x)
    xi = (b[i] - s) / li[i]
    x = ml.where(ar == i, xi, x)
  x_ref.at[p][...] = x


def _trsv_make(seed):
  r = rng_of(seed)
  l = np.linalg.cholesky(_spd(r, 4, 16).astype(np.float64)).astype(np.float32)
  return (l, r.standard_normal((4, 16)).astype(np.float32)), {}


def _trsv_ref(l, b):
  return np.stack([np.linalg.solve(l[i].astype(np.float64), b[i]) for i in range(l.shape[0])])


case("batched_forward_substitution", batched_trsv, _trsv_make, _trsv_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda l, b: b, grid=lambda l, b: (l.shape[0],))
def batched_trsv_scalar(l_ref, b_ref, x_ref):
  """The CUDA port: one thread's loops over scalars read from GMEM, x written back element by element."""
  n = l_ref.shape[1]
  p = ml.program_id(0)
  for i in range(n):
    s = b_ref[p, i]
    for k in range(i):
      s -= l_ref[p, i, k] * x_ref[p, k]
    x_ref[p, i] = s / l_ref[p, i, i]


case("batched_forward_substitution_scalar", batched_trsv_scalar, _trsv_make, _trsv_ref, 1e-5)


# ---------------------------------------------------------------- transpose through SMEM
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=lambda x: (x.shape[0] // 64, x.shape[1] // 64))
def transpose_smem(x, o):
  i = ml.program_id(0)
  j = ml.program_id(1)
  t = ml.smem((64, 64), x.dtype)
  ml.copy(x.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)], t)
  o.at[ml.ds(j * 64, 64), ml.ds(i * 64, 64)][...] = t.T[...]


case("transpose_smem_tiles", transpose_smem, lambda s: ((rng_of(s).standard_normal((128, 192)).astype(np.float32),), {}),
     lambda x: x.T, 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=lambda x: (x.shape[0] // 32, x.shape[1] // 32))
def transpose_pointer(x, o):
  """The Triton tutorial's form: pointer grids loaded and stored swapped."""
  r = ml.program_id(0) * 32 + ml.arange(0, 32)
  c = ml.program_id(1) * 32 + ml.arange(0, 32)
  tile = ml.load(x.at[r[:, None], c[None, :]])
  ml.store(o.at[c[:, None], r[None, :]], ml.trans(tile))


case("transpose_pointer_grids", transpose_pointer,
     lambda s: ((np.asarray(jnp.asarray(rng_of(s).standard_normal((64, 96)), F16)),), {}), lambda x: x.T, 0)


# ---------------------------------------------------------------- Floyd-Warshall's blocked min-plus step
@mg.mgpu_kernel(out_shape=lambda d, **k: d, grid=lambda d, *, B, **k: (d.shape[0] // B, d.shape[1] // B),
                input_output_aliases={0: 0})
def fw_phase3(d_in, d, *, B: ml.constexpr, KB: ml.constexpr):
  """Phase 3 of the blocked algorithm: every tile off block row and column KB relaxed through block KB."""
  i = ml.program_id(0)
  j = ml.program_id(1)
  if (i != KB) & (j != KB):
    cur = d.at[ml.ds(i * B, B), ml.ds(j * B, B)][...]
    col = d.at[ml.ds(i * B, B), ml.ds(KB * B, B)][...]
    row = d.at[ml.ds(KB * B, B), ml.ds(j * B, B)][...]
    for k in ml.static_range(B):
      cur = ml.minimum(cur, col[:, k][:, None] + row[k, :][None, :])
    d.at[ml.ds(i * B, B), ml.ds(j * B, B)][...] = cur


def _fw_make(seed):
  r = rng_of(seed)
  d = r.integers(1, 100, (64, 64)).astype(np.float32)
  np.fill_diagonal(d, 0)
  return (d,), dict(B=16, KB=1)


def _fw_ref(d, *, B, KB):
  out = d.copy()
  for i in range(d.shape[0] // B):
    for j in range(d.shape[1] // B):
      if i != KB and j != KB:
        col = d[i * B:(i + 1) * B, KB * B:(KB + 1) * B]
        row = d[KB * B:(KB + 1) * B, j * B:(j + 1) * B]
        out[i * B:(i + 1) * B, j * B:(j + 1) * B] = np.minimum(d[i * B:(i + 1) * B, j * B:(j + 1) * B],
                                                               np.min(col[:, :, None] + row[None, :, :], axis=1))
  return out


case("floyd_warshall_phase3_in_place", fw_phase3, _fw_make, _fw_ref, 0)


@mg.mgpu_kernel(out_shape=lambda d, **k: d, grid=lambda d, *, B, **k: (d.shape[0] // B, d.shape[1] // B))
def fw_minplus_3d(d, o, *, B: ml.constexpr, KB: ml.constexpr):
  """The same min-plus product written as a 3-D broadcast and a min over its middle axis."""
  i = ml.program_id(0)
  j = ml.program_id(1)
  cur = d.at[ml.ds(i * B, B), ml.ds(j * B, B)][...]
  col = d.at[ml.ds(i * B, B), ml.ds(KB * B, B)][...]
  row = d.at[ml.ds(KB * B, B), ml.ds(j * B, B)][...]
  o.at[ml.ds(i * B, B), ml.ds(j * B, B)][...] = ml.minimum(cur, ml.min(col[:, :, None] + row[None, :, :], axis=1))


def _fw3_ref(d, *, B, KB):
  col = d[:, KB * B:(KB + 1) * B]
  row = d[KB * B:(KB + 1) * B, :]
  return np.minimum(d, np.min(col[:, :, None] + row[None, :, :], axis=1))


case("floyd_warshall_minplus_3d_broadcast", fw_minplus_3d, lambda s: (_fw_make(s)[0], dict(B=16, KB=2)), _fw3_ref, 0)
