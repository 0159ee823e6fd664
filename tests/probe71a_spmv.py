"""Probe 71a's corpus, its first part: sparse matrix kernels as cuSPARSE-replacement, Triton-sparse and Gunrock
authors write them: CSR SpMV (a row a program, rows unrolled a program, merge-path with a diagonal search), COO SpMV
(atomics; a sorted block's segment sums), ELL with x staged in SMEM, sliced ELL (SELL-C), DIA, BSR SpMV of 4x4 blocks,
BSR SpMM on the tensor cores, CSR SpMM over column tiles, SDDMM (COO and a row a program), the transposed SpMV by
atomic scatters, float16 values with a float32 accumulator.
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
  return np.random.default_rng(7100 + seed)


def random_csr(r, n_rows, n_cols, max_nnz, min_nnz=0):
  lens = r.integers(min_nnz, max_nnz + 1, n_rows)
  rowptr = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  cols = np.concatenate([np.sort(r.choice(n_cols, l, replace=False)) for l in lens]).astype(np.int32)
  vals = r.standard_normal(int(rowptr[-1])).astype(np.float32)
  return rowptr, cols, vals


def csr_dense(rowptr, cols, vals, n_cols):
  a = np.zeros((len(rowptr) - 1, n_cols), np.float64)
  for i in range(len(rowptr) - 1):
    a[i, cols[rowptr[i]:rowptr[i + 1]]] = vals[rowptr[i]:rowptr[i + 1]]
  return a


def _csr_ref(rp, c, v, x, **k):
  return (csr_dense(rp, c, v.astype(np.float64), x.shape[0]) @ x.astype(np.float64)).astype(np.float32)


# ---------------------------------------------------------------- CSR SpMV: ROWS rows a program, unrolled
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32),
                grid=lambda rp, c, v, x, *, ROWS, **k: (ml.cdiv(rp.shape[0] - 1, ROWS),))
def csr_spmv_rows_unrolled(rowptr, cols, vals, x, y, *, ROWS: ml.constexpr, BLOCK: ml.constexpr):
  """Triton's CSR-vector: each program takes ROWS rows, one after another, a BLOCK of nonzeros at a time."""
  n = rowptr.shape[0] - 1
  for r in ml.static_range(ROWS):
    row = ml.program_id(0) * ROWS + r
    if row < n:
      start = ml.load(rowptr.at[row])
      end = ml.load(rowptr.at[row + 1])
      acc = ml.zeros((BLOCK,), F32)
      for s in range(start, end, BLOCK):
        offs = s + ml.arange(0, BLOCK)
        m = offs < end
        c = ml.load(cols.at[offs], mask=m, other=0)
        acc += ml.load(vals.at[offs], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0)
      ml.store(y.at[row], ml.sum(acc, axis=0))


def _rows_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 37, 200, 150)
  return (rp, c, v, r.standard_normal(200).astype(np.float32)), dict(ROWS=4, BLOCK=64)


case("csr_spmv_rows_unrolled_static_range", csr_spmv_rows_unrolled, _rows_make, _csr_ref, 1e-5)


# ---------------------------------------------------------------- CSR SpMV: merge path
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, **k: S((rp.shape[0] - 1,), F32),
                grid=lambda rp, c, v, x, *, ITEMS, **k: (ml.cdiv(rp.shape[0] - 1 + c.shape[0], ITEMS),))
def csr_spmv_merge_path(rowptr, cols, vals, x, y, *, ITEMS: ml.constexpr):
  """Merrill and Garland's merge-based SpMV: program p starts at diagonal p * ITEMS of the merge of the row ends
  (rowptr[1:]) with the nonzeros' indices, found by a binary search; it then consumes ITEMS items, a row end
  flushing the running sum into y, and adds its last partial row atomically (the carry-out)."""
  n_rows = rowptr.shape[0] - 1
  nnz = cols.shape[0]
  total = n_rows + nnz
  diag = ml.minimum(ml.program_id(0) * ITEMS, total)
  diag_end = ml.minimum(diag + ITEMS, total)
  lo = ml.maximum(diag - nnz, 0)
  hi = ml.minimum(diag, n_rows)
  while lo < hi:                      # the row coordinate where the diagonal crosses the merge path
    mid = (lo + hi) // 2
    if rowptr[mid + 1] <= diag - mid - 1:
      lo = mid + 1
    else:
      hi = mid
  row = lo
  k = diag - lo
  acc = 0.0
  for _ in range(diag, diag_end):
    if row < n_rows:
      if k < rowptr[row + 1]:
        acc += vals[k] * x[cols[k]]
        k += 1
      else:
        ml.atomic_add(y.at[row], acc)
        acc = 0.0
        row += 1
    else:
      k += 1
  if row < n_rows:
    ml.atomic_add(y.at[row], acc)


def _merge_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 30, 64, 20)
  return (rp, c, v, r.standard_normal(64).astype(np.float32)), dict(ITEMS=16)


case("csr_spmv_merge_path_carry_out", csr_spmv_merge_path, _merge_make, _csr_ref, 1e-5)


# ---------------------------------------------------------------- COO SpMV
@mg.mgpu_kernel(out_shape=lambda r, c, v, x, *, n: S((n,), F32), grid=lambda r, c, v, x, **k: (ml.cdiv(r.shape[0], 256),))
def coo_spmv_atomic(rows, cols, vals, x, y, *, n: ml.constexpr):
  offs = ml.program_id(0) * 256 + ml.arange(0, 256)
  m = offs < rows.shape[0]
  r = ml.load(rows.at[offs], mask=m, other=0)
  c = ml.load(cols.at[offs], mask=m, other=0)
  v = ml.load(vals.at[offs], mask=m, other=0.0)
  ml.atomic_add(y.at[r], v * x[c], mask=m)


def _coo_make(seed, sort=False):
  r = rng_of(seed)
  nnz, n, m = 1000, 70, 90
  rows = r.integers(0, n, nnz).astype(np.int32)
  if sort:
    rows = np.sort(rows)
  return (rows, r.integers(0, m, nnz).astype(np.int32), r.standard_normal(nnz).astype(np.float32),
          r.standard_normal(m).astype(np.float32)), dict(n=n)


def _coo_ref(rows, cols, vals, x, *, n):
  y = np.zeros(n, np.float64)
  np.add.at(y, rows, vals.astype(np.float64) * x[cols])
  return y


case("coo_spmv_atomic_scatter", coo_spmv_atomic, _coo_make, _coo_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda r, c, v, x, *, n: S((n,), F32), grid=lambda r, c, v, x, **k: (ml.cdiv(r.shape[0], 128),))
def coo_spmv_sorted_segments(rows, cols, vals, x, y, *, n: ml.constexpr):
  """Sorted COO: each block reduces its products by row locally (segment sums relative to its first row), then adds
  one value per row it touches."""
  offs = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = offs < rows.shape[0]
  r = ml.load(rows.at[offs], mask=m, other=0)
  first = rows[ml.program_id(0) * 128]
  p = ml.where(m, ml.load(vals.at[offs], mask=m, other=0.0) * ml.load(x.at[ml.load(cols.at[offs], mask=m, other=0)]), 0.0)
  local = ml.segment_sum(p, ml.where(m, r - first, -1), num_segments=128)
  dst = first + ml.arange(0, 128)
  ml.atomic_add(y.at[dst], local, mask=dst < n)


case("coo_spmv_sorted_block_segment_sum", coo_spmv_sorted_segments, lambda s: _coo_make(s, sort=True), _coo_ref, 1e-5)


# ---------------------------------------------------------------- ELL with x in SMEM
@mg.mgpu_kernel(out_shape=lambda c, v, x: S((c.shape[0],), F32), grid=lambda c, v, x: (c.shape[0] // 64,))
def ell_spmv_x_in_smem(cols, vals, x, y):
  i = ml.program_id(0)
  xs = ml.smem(x.shape, F32)
  ml.copy(x, xs)
  c = cols.at[ml.ds(i * 64, 64), :][...]
  v = vals.at[ml.ds(i * 64, 64), :][...]
  xv = ml.where(c >= 0, xs[ml.maximum(c, 0)], 0.0)
  y.at[ml.ds(i * 64, 64)][...] = ml.sum(v * xv, axis=1)


def _ell_make(seed):
  r = rng_of(seed)
  n, K, m = 128, 16, 512
  cols = np.where(r.random((n, K)) < 0.6, r.integers(0, m, (n, K)), -1).astype(np.int32)
  return (cols, r.standard_normal((n, K)).astype(np.float32), r.standard_normal(m).astype(np.float32)), {}


def _ell_ref(cols, vals, x):
  return np.sum(np.where(cols >= 0, vals.astype(np.float64) * x[np.maximum(cols, 0)], 0), axis=1)


case("ell_spmv_x_staged_in_smem", ell_spmv_x_in_smem, _ell_make, _ell_ref, 1e-5)


# ---------------------------------------------------------------- sliced ELL (SELL-C)
@mg.mgpu_kernel(out_shape=lambda sp, sw, c, v, x: S((sw.shape[0] * 32,), F32), grid=lambda sp, sw, c, v, x: (sw.shape[0],))
def sell_c_spmv(slice_ptr, slice_width, cols, vals, x, y):
  """SELL-32: slice s holds 32 rows column-major from slice_ptr[s], slice_width[s] columns wide (-1 padded)."""
  s = ml.program_id(0)
  base = slice_ptr[s]
  lane = ml.arange(0, 32)
  acc = ml.zeros((32,), F32)
  for j in range(slice_width[s]):
    idx = base + j * 32 + lane
    c = cols[idx]
    acc += vals[idx] * ml.load(x.at[c], mask=c >= 0, other=0.0)
  y[s * 32 + lane] = acc


def _sell_make(seed):
  r = rng_of(seed)
  n_slices, m = 5, 100
  widths = r.integers(1, 9, n_slices).astype(np.int32)
  ptr = np.concatenate([[0], np.cumsum(widths * 32)]).astype(np.int32)
  total = int(ptr[-1])
  cols = np.where(r.random(total) < 0.7, r.integers(0, m, total), -1).astype(np.int32)
  return (ptr[:-1].copy(), widths, cols, r.standard_normal(total).astype(np.float32),
          r.standard_normal(m).astype(np.float32)), {}


def _sell_ref(ptr, widths, cols, vals, x):
  y = np.zeros(len(widths) * 32)
  for s in range(len(widths)):
    for j in range(widths[s]):
      for l in range(32):
        i = ptr[s] + j * 32 + l
        if cols[i] >= 0:
          y[s * 32 + l] += float(vals[i]) * float(x[cols[i]])
  return y


case("sell_c32_spmv_slices", sell_c_spmv, _sell_make, _sell_ref, 1e-5)


# ---------------------------------------------------------------- DIA
@mg.mgpu_kernel(out_shape=lambda off, d, x: S((d.shape[1],), F32), grid=lambda off, d, x: (d.shape[1] // 128,))
def dia_spmv(offsets, diags, x, y):
  """DIA: diags[k, i] is A[i, i + offsets[k]]."""
  rows = ml.program_id(0) * 128 + ml.arange(0, 128)
  n = x.shape[0]
  acc = ml.zeros((128,), F32)
  for k in range(offsets.shape[0]):
    c = rows + offsets[k]
    acc += diags[k, rows] * ml.load(x.at[c], mask=(c >= 0) & (c < n), other=0.0)
  y[rows] = acc


def _dia_make(seed):
  r = rng_of(seed)
  n = 256
  offs = np.array([-17, -1, 0, 1, 5, 40], np.int32)
  return (offs, r.standard_normal((len(offs), n)).astype(np.float32), r.standard_normal(n).astype(np.float32)), {}


def _dia_ref(offs, diags, x):
  n = x.shape[0]
  y = np.zeros(n)
  for k, o in enumerate(offs):
    for i in range(n):
      if 0 <= i + o < n:
        y[i] += float(diags[k, i]) * float(x[i + o])
  return y


case("dia_spmv_offsets", dia_spmv, _dia_make, _dia_ref, 1e-5)


# ---------------------------------------------------------------- BSR SpMV of 4x4 blocks
@mg.mgpu_kernel(out_shape=lambda bp, bc, bv, x: S(((bp.shape[0] - 1) * 4,), F32), grid=lambda bp, bc, bv, x: (bp.shape[0] - 1,))
def bsr4_spmv(bptr, bcols, bvals, x, y):
  """BSR with 4x4 blocks: a block row a program; each block's 16 values read with the 4 x entries it needs (a short
  run `x[bcols[p] * 4 + c]` of an ml.arange(4) grid), its rows summed each step into a (4,) accumulator. (A (4, 4)
  accumulator summed after the loop stays MG204: design note 233.)"""
  i = ml.program_id(0)
  r = ml.arange(0, 4)[:, None]
  c = ml.arange(0, 4)[None, :]
  acc = ml.zeros((4,), F32)
  for p in range(bptr[i], bptr[i + 1]):
    blk = ml.load(bvals.at[p, r, c])
    acc += ml.sum(blk * x[bcols[p] * 4 + c], axis=1)
  y[i * 4 + ml.arange(0, 4)] = acc


def _bsr4_make(seed):
  r = rng_of(seed)
  nbr, nbc = 12, 16
  rp, bc, _ = random_csr(r, nbr, nbc, 6)
  return (rp, bc, r.standard_normal((len(bc), 4, 4)).astype(np.float32), r.standard_normal(nbc * 4).astype(np.float32)), {}


def _bsr4_ref(bp, bc, bv, x):
  y = np.zeros((len(bp) - 1) * 4)
  for i in range(len(bp) - 1):
    for p in range(bp[i], bp[i + 1]):
      y[i * 4:(i + 1) * 4] += bv[p].astype(np.float64) @ x[bc[p] * 4:(bc[p] + 1) * 4]
  return y


case("bsr4x4_spmv_block_rows", bsr4_spmv, _bsr4_make, _bsr4_ref, 1e-5)


@mg.mgpu_kernel(out_shape=lambda bp, bc, bv, x: S(((bp.shape[0] - 1) * 2,), F32), grid=lambda bp, bc, bv, x: (bp.shape[0] - 1,))
def bsr2_spmv_pair_pointers(bptr, bcols, bvals, x, y):
  """BSR of 2x2 blocks, the block row's two pointers read as a pair (`tl.load(bptr + i + tl.arange(0, 2))`) and each
  block's columns of x as a pair: blocks of two rows, a (2,) accumulator."""
  i = ml.program_id(0)
  two = ml.arange(0, 2)
  se = ml.load(bptr.at[i + two])
  acc = ml.zeros((2,), F32)
  for p in range(se[0], se[1]):
    xv = x[bcols[p] * 2 + two]
    acc += bvals[p, 0, :] * xv[0] + bvals[p, 1, :] * xv[1]
  y[i * 2 + two] = acc


def _bsr2_make(seed):
  r = rng_of(seed)
  rp, bc, _ = random_csr(r, 20, 30, 7)
  return (rp, bc, r.standard_normal((len(bc), 2, 2)).astype(np.float32), r.standard_normal(60).astype(np.float32)), {}


def _bsr2_ref(bp, bc, bv, x):
  y = np.zeros((len(bp) - 1) * 2)
  for i in range(len(bp) - 1):
    for p in range(bp[i], bp[i + 1]):
      y[i * 2:(i + 1) * 2] += bv[p].astype(np.float64).T @ x[bc[p] * 2:(bc[p] + 1) * 2]
  return y


case("bsr2x2_spmv_pointer_pairs", bsr2_spmv_pair_pointers, _bsr2_make, _bsr2_ref, 1e-5)


# ---------------------------------------------------------------- BSR SpMM of 64x64 blocks on the tensor cores
@mg.mgpu_kernel(out_shape=lambda bp, bc, bv, b: S(((bp.shape[0] - 1) * 64, b.shape[1]), F32),
                grid=lambda bp, bc, bv, b: (bp.shape[0] - 1, b.shape[1] // 64))
def bsr64_spmm_wgmma(bptr, bcols, bvals, b, c):
  i, j = ml.program_id(0), ml.program_id(1)
  acc = ml.zeros((64, 64), F32)
  for p in range(bptr[i], bptr[i + 1]):
    acc = ml.dot(bvals.at[p][...], b.at[ml.ds(bcols[p] * 64, 64), ml.ds(j * 64, 64)][...], acc)
  c.at[ml.ds(i * 64, 64), ml.ds(j * 64, 64)][...] = acc


def _bsr64_make(seed):
  r = rng_of(seed)
  rp = np.array([0, 2, 2, 5], np.int32)
  bc = np.array([0, 3, 1, 2, 3], np.int32)
  bv = np.asarray(jnp.asarray(r.standard_normal((5, 64, 64)) * 0.2, F16))
  b = np.asarray(jnp.asarray(r.standard_normal((256, 128)) * 0.2, F16))
  return (rp, bc, bv, b), {}


def _bsr64_ref(bp, bc, bv, b):
  out = np.zeros(((len(bp) - 1) * 64, b.shape[1]))
  for i in range(len(bp) - 1):
    for p in range(bp[i], bp[i + 1]):
      out[i * 64:(i + 1) * 64] += bv[p].astype(np.float64) @ b[bc[p] * 64:(bc[p] + 1) * 64].astype(np.float64)
  return out


case("bsr64_spmm_wgmma_empty_block_row", bsr64_spmm_wgmma, _bsr64_make, _bsr64_ref, 1e-3)


# ---------------------------------------------------------------- CSR SpMM over column tiles
@mg.mgpu_kernel(out_shape=lambda rp, c, v, b, **k: S((rp.shape[0] - 1, b.shape[1]), F32),
                grid=lambda rp, c, v, b, *, BN, **k: (rp.shape[0] - 1, ml.cdiv(b.shape[1], BN)))
def csr_spmm_tiles(rowptr, cols, vals, b, out, *, BK: ml.constexpr, BN: ml.constexpr):
  """Triton-sparse's row-split SpMM: BK nonzeros of the row at a time, their rows of B gathered as a (BK, BN) tile."""
  row, j = ml.program_id(0), ml.program_id(1)
  n = j * BN + ml.arange(0, BN)
  start, end = rowptr[row], rowptr[row + 1]
  acc = ml.zeros((BN,), F32)
  for s in range(start, end, BK):
    e = s + ml.arange(0, BK)
    m = e < end
    c = ml.load(cols.at[e], mask=m, other=0)
    v = ml.load(vals.at[e], mask=m, other=0.0)
    bt = ml.load(b.at[c[:, None], n[None, :]], mask=m[:, None] & (n[None, :] < b.shape[1]), other=0.0)
    acc += ml.sum(v[:, None] * bt, axis=0)
  ml.store(out.at[row, n], acc, mask=n < b.shape[1])


def _spmm_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 20, 48, 40)
  return (rp, c, v, r.standard_normal((48, 96)).astype(np.float32)), dict(BK=16, BN=64)


case("csr_spmm_row_split_column_tiles", csr_spmm_tiles, _spmm_make,
     lambda rp, c, v, b, **k: csr_dense(rp, c, v, b.shape[0]) @ b, 1e-5)


# ---------------------------------------------------------------- SDDMM
@mg.mgpu_kernel(out_shape=lambda r, c, v, a, b: S(r.shape, F32), grid=lambda r, c, v, a, b: (ml.cdiv(r.shape[0], 128),))
def sddmm_coo(rows, cols, vals, a, b, out):
  """out[e] = vals[e] * <a[rows[e]], b[cols[e]]>: both rows gathered whole."""
  e = ml.program_id(0) * 128 + ml.arange(0, 128)
  m = e < rows.shape[0]
  r = ml.load(rows.at[e], mask=m, other=0)
  c = ml.load(cols.at[e], mask=m, other=0)
  d = ml.sum(a[r, :] * b[c, :], axis=1)
  ml.store(out.at[e], d * ml.load(vals.at[e], mask=m, other=0.0), mask=m)


def _sddmm_make(seed):
  r = rng_of(seed)
  nnz = 300
  return (r.integers(0, 40, nnz).astype(np.int32), r.integers(0, 50, nnz).astype(np.int32),
          r.standard_normal(nnz).astype(np.float32), r.standard_normal((40, 64)).astype(np.float32),
          r.standard_normal((50, 64)).astype(np.float32)), {}


case("sddmm_coo_row_gathers", sddmm_coo, _sddmm_make,
     lambda r, c, v, a, b: v * np.sum(a[r].astype(np.float64) * b[c], axis=1), 1e-5)


@mg.mgpu_kernel(out_shape=lambda rp, c, a, b: S(c.shape, F32), grid=lambda rp, c, a, b: (rp.shape[0] - 1,))
def sddmm_csr_row(rowptr, cols, a, b, out):
  """A row a program: a's row read once, 32 of its nonzeros' b rows at a time; the scores are the masked QK^T of a
  sparse attention."""
  row = ml.program_id(0)
  arow = a.at[row, :][...]
  start, end = rowptr[row], rowptr[row + 1]
  for s in range(start, end, 32):
    e = s + ml.arange(0, 32)
    m = e < end
    c = ml.load(cols.at[e], mask=m, other=0)
    ml.store(out.at[e], ml.sum(b[c, :] * arow[None, :], axis=1), mask=m)


def _sddmm_csr_make(seed):
  r = rng_of(seed)
  rp, c, _ = random_csr(r, 24, 80, 70)
  return (rp, c, r.standard_normal((24, 64)).astype(np.float32), r.standard_normal((80, 64)).astype(np.float32)), {}


def _sddmm_csr_ref(rp, c, a, b):
  rows = np.repeat(np.arange(len(rp) - 1), np.diff(rp))
  return np.sum(a[rows].astype(np.float64) * b[c], axis=1)


case("sddmm_csr_row_per_program", sddmm_csr_row, _sddmm_csr_make, _sddmm_csr_ref, 1e-5)


# ---------------------------------------------------------------- y = A^T x by atomic scatters
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x, *, n_cols: S((n_cols,), F32), grid=lambda rp, c, v, x, **k: (rp.shape[0] - 1,))
def csr_spmv_transposed(rowptr, cols, vals, x, y, *, n_cols: ml.constexpr):
  row = ml.program_id(0)
  xr = x[row]
  for s in range(rowptr[row], rowptr[row + 1], 64):
    e = s + ml.arange(0, 64)
    m = e < rowptr[row + 1]
    ml.atomic_add(y.at[ml.load(cols.at[e], mask=m, other=0)], ml.load(vals.at[e], mask=m, other=0.0) * xr, mask=m)


def _spmvt_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 30, 90, 80)
  return (rp, c, v, r.standard_normal(30).astype(np.float32)), dict(n_cols=90)


case("csr_spmv_transposed_atomic_scatter", csr_spmv_transposed, _spmvt_make,
     lambda rp, c, v, x, *, n_cols: csr_dense(rp, c, v, n_cols).T @ x, 1e-5)


# ---------------------------------------------------------------- float16 values, float32 accumulation, bf16 result
@mg.mgpu_kernel(out_shape=lambda rp, c, v, x: S((rp.shape[0] - 1,), jnp.bfloat16), grid=lambda rp, c, v, x: (rp.shape[0] - 1,))
def csr_spmv_half(rowptr, cols, vals, x, y):
  row = ml.program_id(0)
  acc = ml.zeros((32,), F32)
  for s in range(rowptr[row], rowptr[row + 1], 32):
    e = s + ml.arange(0, 32)
    m = e < rowptr[row + 1]
    c = ml.load(cols.at[e], mask=m, other=0)
    acc += ml.load(vals.at[e], mask=m, other=0.0).to(F32) * ml.load(x.at[c], mask=m, other=0.0).to(F32)
  y[row] = ml.sum(acc).to(jnp.bfloat16)


def _half_make(seed):
  r = rng_of(seed)
  rp, c, v = random_csr(r, 20, 64, 60)
  return (rp, c, v.astype(np.float16), r.standard_normal(64).astype(np.float16)), {}


case("csr_spmv_f16_values_bf16_result", csr_spmv_half, _half_make,
     lambda rp, c, v, x: _csr_ref(rp, c, v.astype(np.float32), x.astype(np.float32)), 1e-2)
