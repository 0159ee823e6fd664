"""Probe 56e's corpus: recommendation and graph kernels written as Triton, Pallas and JAX users write them, each run
in interpret mode against NumPy and built for CUDA. EmbeddingBag sum / mean / max / weighted / padding_idx over
ragged and empty bags (scalar loops on offsets read from memory, while loops, lax.fori_loop and lax.while_loop,
pipelined TMA row copies, masked chunks of ids, a (bags, ids) tile), FBGEMM's jagged <-> padded dense, jagged
elementwise, jagged softmax and jagged index select, segment sum / max / mean / softmax (atomics, offsets, a binary
search on loaded ids), CSR SpMV / SpMM (per row, chunked, a block of rows looping to the longest row, early return),
GAT edge softmax (one head, online over edge blocks, several heads), GraphSAGE mean aggregation fused with its
matmul, edge-parallel scatters, EmbeddingBag's backward and row-wise Adagrad in place, hashed embeddings of int64 ids
(early exits: test_probe56e.py). All of these computed and built before the probe (no change); what failed is in test_probe56e.py. The
(8, 8) tile of ids stays MG204 (checked below)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where
from probe_util import export

S = jax.ShapeDtypeStruct
R = np.random.default_rng(562)
B, V, D = 8, 50, 128
LENS = np.array([3, 0, 5, 1, 0, 7, 2, 4], np.int32)
OFFS = np.concatenate([[0], np.cumsum(LENS)]).astype(np.int32)
N = int(OFFS[-1])
IDX = R.integers(0, V, N).astype(np.int32)
TABLE = R.standard_normal((V, D)).astype(np.float32)
W = R.standard_normal(N).astype(np.float32)


def _close(got, want, tol=1e-4):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)


def _both(kernel, args, want, tol=1e-4, **kw):
  _close(kernel(*args, **kw, interpret=True), want, tol)
  export(kernel, *args, **kw)


def _bag_ref(table, idx, offs, mode="sum", w=None):
  out = np.zeros((len(offs) - 1, table.shape[1]), np.float32)
  for b in range(len(offs) - 1):
    rows = table[idx[offs[b]:offs[b + 1]]].astype(np.float32)
    if w is not None:
      rows = rows * w[offs[b]:offs[b + 1], None]
    if len(rows):
      out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
  return out


_BAG = dict(out_shape=lambda t, i, o: S((o.shape[0] - 1, t.shape[1]), t.dtype), grid=lambda t, i, o: (o.shape[0] - 1,))


# --- EmbeddingBag ---

@mg.mgpu_kernel(**_BAG)
def bag_sum(table, idx, offs, out):
  b = ml.program_id(0)
  acc = ml.zeros((table.shape[1],), jnp.float32)
  for j in range(offs[b], offs[b + 1]):
    acc += table.at[idx[j]][...].astype(jnp.float32)
  out.at[b][...] = acc.astype(out.dtype)


@mg.mgpu_kernel(**_BAG)
def bag_mean(table, idx, offs, out):
  b = ml.program_id(0)
  start, end = offs[b], offs[b + 1]
  acc = ml.zeros((table.shape[1],), jnp.float32)
  for j in range(start, end):
    acc += table[idx[j], :]
  out[b, :] = acc / ml.maximum(end - start, 1).astype(jnp.float32)


@mg.mgpu_kernel(**_BAG)
def bag_max(table, idx, offs, out):
  b = ml.program_id(0)
  start, end = offs[b], offs[b + 1]
  acc = ml.full((table.shape[1],), -jnp.inf, jnp.float32)
  for j in range(start, end):
    acc = jnp.maximum(acc, table[idx[j]])
  out[b] = jnp.where(end > start, acc, 0.0)


@mg.mgpu_kernel(out_shape=lambda t, i, o, w: S((o.shape[0] - 1, t.shape[1]), t.dtype),
                grid=lambda t, i, o, w: (o.shape[0] - 1,))
def bag_weighted_while(table, idx, offs, w, out):
  b = ml.program_id(0)
  acc = ml.zeros((table.shape[1],), jnp.float32)
  j = offs[b]
  while j < offs[b + 1]:
    acc = acc + w[j] * table.at[idx[j], :][...]
    j += 1
  out.at[b, :][...] = acc


@mg.mgpu_kernel(**_BAG)
def bag_chunks(table, idx, offs, out, *, BLOCK: ml.constexpr = 8):
  b = ml.program_id(0)
  start, end = offs[b], offs[b + 1]
  cols = ml.arange(table.shape[1])
  acc = ml.zeros((BLOCK, table.shape[1]), jnp.float32)
  for s in range(start, end, BLOCK):
    k = s + ml.arange(BLOCK)
    m = k < end
    ids = ml.load(idx.at[k], mask=m, other=0)
    acc += ml.load(table.at[ids[:, None], cols[None, :]], mask=m[:, None], other=0.0)
  ml.store(out.at[b, cols], ml.sum(acc, axis=0))


@mg.mgpu_kernel(**_BAG)
def bag_lax_while(table, idx, offs, out):
  b = ml.program_id(0)
  end = offs[b + 1]

  def body(c):
    j, acc = c
    return j + 1, acc + table[idx[j]]
  _, acc = jax.lax.while_loop(lambda c: c[0] < end, body, (offs[b], jnp.zeros((table.shape[1],), jnp.float32)))
  out[b] = acc


@mg.mgpu_kernel(**_BAG)
def bag_tma(table, idx, offs, out):
  b = ml.program_id(0)
  buf = ml.smem((table.shape[1],), table.dtype)
  acc = jnp.zeros((table.shape[1],), jnp.float32)
  for j in ml.range(offs[b], offs[b + 1], stages=2):
    ml.copy(table.at[idx[j]], buf)
    acc += buf[...]
  out[b] = acc


@mg.mgpu_kernel(**_BAG)
def bag_padding_idx(table, idx, offs, out, *, PAD: ml.constexpr = 3):
  b = ml.program_id(0)
  acc = jnp.zeros((table.shape[1],), jnp.float32)
  cnt = 0
  for j in range(offs[b], offs[b + 1]):
    r = idx[j]
    if r == PAD:
      continue
    acc += table[r]
    cnt += 1
  out[b] = acc / jnp.maximum(cnt, 1)


@mg.mgpu_kernel(out_shape=lambda t, i, o: S((o.shape[0], t.shape[1]), t.dtype), grid=lambda t, i, o: (o.shape[0],))
def bag_torch_offsets(table, idx, offs, out):
  b = ml.program_id(0)
  start = offs[b]
  end = offs[b + 1] if b + 1 < offs.shape[0] else idx.shape[0]
  acc = jnp.zeros((table.shape[1],), jnp.float32)
  for j in range(start, end):
    acc += table[idx[j]]
  out[b] = acc


def _bag_tile(ML, NB):
  @mg.mgpu_kernel(out_shape=lambda t, i, o: S((o.shape[0] - 1, t.shape[1]), t.dtype),
                  grid=lambda t, i, o: ((o.shape[0] - 1) // NB,))
  def bag_tile(table, idx, offs, out):
    p = ml.program_id(0)
    bags = p * NB + ml.arange(NB)
    start = offs[bags]
    n = offs[bags + 1] - start
    k = ml.arange(ML)
    m = k[None, :] < n[:, None]
    ids = ml.load(idx.at[start[:, None] + k[None, :]], mask=m, other=0)
    rows = ml.load(table.at[ids, :], mask=m[:, :, None], other=0.0)
    out[ml.ds(p * NB, NB), :] = jnp.sum(rows, axis=1)
  return bag_tile


BAG_TILE_16x8, BAG_TILE_8x8 = _bag_tile(16, 8), _bag_tile(8, 8)


@pytest.mark.parametrize("kernel,mode", [(bag_sum, "sum"), (bag_mean, "mean"), (bag_max, "max"), (bag_chunks, "sum"),
                                         (bag_lax_while, "sum"), (bag_tma, "sum"), (BAG_TILE_16x8, "sum")])
def test_embedding_bags(kernel, mode):
  _both(kernel, [TABLE, IDX, OFFS], _bag_ref(TABLE, IDX, OFFS, mode))


@pytest.mark.parametrize("d,dtype", [(96, jnp.bfloat16), (100, np.float32), (24, np.float32), (8, np.float32)])
def test_embedding_bag_of_odd_widths_and_bf16(d, dtype):
  t = R.standard_normal((V, d)).astype(dtype)
  _both(bag_sum, [t, IDX, OFFS], _bag_ref(np.asarray(t, np.float32), IDX, OFFS), tol=3e-2)


def test_weighted_bag_and_padding_idx_and_torch_offsets():
  _both(bag_weighted_while, [TABLE, IDX, OFFS, W], _bag_ref(TABLE, IDX, OFFS, w=W))
  idx2 = IDX.copy()
  idx2[:6] = 3
  keep = np.where(idx2 != 3, 1.0, 0.0).astype(np.float32)
  sums = _bag_ref(TABLE, idx2, OFFS, w=keep)
  cnt = np.add.reduceat(np.concatenate([keep, [0]]), OFFS[:-1])[:B] * (LENS > 0)
  _both(bag_padding_idx, [TABLE, idx2, OFFS], sums / np.maximum(cnt, 1)[:, None])
  _both(bag_torch_offsets, [TABLE, IDX, OFFS[:-1].copy()], _bag_ref(TABLE, IDX, OFFS))


def test_a_tile_of_8_by_8_ids_stays_mg204_with_the_widening_hint():
  with pytest.raises(mg.LayoutError) as info:
    BAG_TILE_8x8(TABLE, IDX, OFFS, interpret=True)
  e = info.value
  assert e.code == "MG204"
  assert (e.lineno, e.col_offset) == where(BAG_TILE_8x8, "ids = ml.load(")[0:1] + (where(BAG_TILE_8x8, "ml.load(")[1],)
  assert e.message.startswith("the indices of this gather, a (8, 8) tile, are broadcast along their rows")
  assert "widen the index tile to 32 columns" in e.hint


# --- jagged tensors (FBGEMM) ---

L = 8
VALS = R.standard_normal((N, D)).astype(np.float32)
DENSE = R.standard_normal((B, L, D)).astype(np.float32)


def _j2d_ref(v, o):
  out = np.zeros((B, L, v.shape[1]), np.float32)
  for b in range(B):
    n = min(o[b + 1] - o[b], L)
    out[b, :n] = v[o[b]:o[b] + n]
  return out


def _d2j_ref(d, o):
  return np.concatenate([d[b, :o[b + 1] - o[b]] for b in range(B)])


@mg.mgpu_kernel(out_shape=lambda v, o: S((o.shape[0] - 1, L, v.shape[1]), v.dtype), grid=lambda v, o: (o.shape[0] - 1, L))
def jagged_to_dense(values, offsets, out):
  b = ml.program_id(0)
  t = ml.program_id(1)
  start = offsets[b]
  if t < offsets[b + 1] - start:
    out.at[b, t][...] = values.at[start + t][...]
  else:
    out.at[b, t][...] = ml.zeros((values.shape[1],), values.dtype)


@mg.mgpu_kernel(out_shape=lambda v, o: S((o.shape[0] - 1, L, v.shape[1]), v.dtype), grid=lambda v, o: (o.shape[0] - 1,))
def jagged_to_dense_tile(values, offsets, out):
  b = ml.program_id(0)
  start = offsets[b]
  r = ml.arange(L)
  c = ml.arange(values.shape[1])
  out.at[b][...] = ml.load(values.at[(start + r)[:, None], c[None, :]], mask=(r < offsets[b + 1] - start)[:, None],
                           other=0.0)


@mg.mgpu_kernel(out_shape=lambda d, o, rb: S((rb.shape[0], d.shape[2]), d.dtype), grid=lambda d, o, rb: (rb.shape[0],))
def dense_to_jagged(dense, offsets, row_bag, out):
  j = ml.program_id(0)
  b = row_bag[j]
  out.at[j][...] = dense.at[b, j - offsets[b]][...]


@mg.mgpu_kernel(out_shape=lambda v, o, d: v, grid=lambda v, o, d: (o.shape[0] - 1,))
def jagged_dense_add(values, offsets, dense, out):
  b = ml.program_id(0)
  start = offsets[b]
  for t in range(ml.minimum(offsets[b + 1] - start, dense.shape[1])):
    out.at[start + t][...] = values.at[start + t][...] + dense.at[b, t][...]


@mg.mgpu_kernel(out_shape=lambda v, o: S((o.shape[0] - 1, v.shape[1]), v.dtype), grid=lambda v, o: (o.shape[0] - 1,))
def jagged_sum_fori(values, offsets, out):
  b = ml.program_id(0)
  out[b, :] = jax.lax.fori_loop(offsets[b], offsets[b + 1], lambda j, acc: acc + values[j, :],
                                jnp.zeros((values.shape[1],), jnp.float32))


@mg.mgpu_kernel(out_shape=lambda v, o: v, grid=lambda v, o: (o.shape[0] - 1,))
def jagged_softmax(values, offsets, out):
  b = ml.program_id(0)
  start, end = offsets[b], offsets[b + 1]
  m = jnp.full((values.shape[1],), -jnp.inf, jnp.float32)
  for j in range(start, end):
    m = jnp.maximum(m, values[j])
  s = jnp.zeros_like(m)
  for j in range(start, end):
    s += jnp.exp(values[j] - m)
  for j in range(start, end):
    out[j] = jnp.exp(values[j] - m) / s


@mg.mgpu_kernel(out_shape=lambda v, o, s, no, n: S((n.shape[0], v.shape[1]), v.dtype),
                grid=lambda v, o, s, no, n: (s.shape[0],))
def jagged_index_select(values, offs, sel, new_off, rows_like, out):
  k = ml.program_id(0)
  b = sel[k]
  src, dst = offs[b], new_off[k]
  for t in range(offs[b + 1] - src):
    out[dst + t] = values[src + t]


def test_jagged_ops():
  _both(jagged_to_dense, [VALS, OFFS], _j2d_ref(VALS, OFFS))
  _both(jagged_to_dense_tile, [VALS, OFFS], _j2d_ref(VALS, OFFS))
  _both(dense_to_jagged, [DENSE, OFFS, np.repeat(np.arange(B), LENS).astype(np.int32)], _d2j_ref(DENSE, OFFS))
  want = VALS.copy()
  for b in range(B):
    want[OFFS[b]:OFFS[b + 1]] += DENSE[b, :LENS[b]]
  _both(jagged_dense_add, [VALS, OFFS, DENSE], want)
  _both(jagged_sum_fori, [VALS, OFFS], _bag_ref(VALS, np.arange(N, dtype=np.int32), OFFS))
  sm = np.zeros_like(VALS)
  for b in range(B):
    x = VALS[OFFS[b]:OFFS[b + 1]]
    if len(x):
      e = np.exp(x - x.max(0))
      sm[OFFS[b]:OFFS[b + 1]] = e / e.sum(0)
  _both(jagged_softmax, [VALS, OFFS], sm)
  sel = np.array([5, 0, 2, 1, 7], np.int32)
  new_off = np.concatenate([[0], np.cumsum(LENS[sel])]).astype(np.int32)
  like = np.zeros(int(new_off[-1]), np.int32)
  _both(jagged_index_select, [VALS, OFFS, sel, new_off, like], np.concatenate([VALS[OFFS[b]:OFFS[b + 1]] for b in sel]))


# --- segment reductions over sorted ids ---

G = 6
SEG = np.sort(R.integers(0, G, 256)).astype(np.int32)
SEG_OFF = np.searchsorted(SEG, np.arange(G + 1)).astype(np.int32)
XS = R.standard_normal((256, 128)).astype(np.float32)
EV = R.standard_normal(256).astype(np.float32)


@mg.mgpu_kernel(out_shape=lambda x, s: S((G, x.shape[1]), x.dtype), grid=lambda x, s: (x.shape[0] // 64,))
def segment_sum_atomic(x, seg, out, *, op: ml.constexpr = "add"):
  i = ml.program_id(0)
  ids = seg[ml.ds(i * 64, 64)]
  if op == "add":
    ml.atomic_add(out.at[ids, :], x[ml.ds(i * 64, 64), :])
  else:
    ml.atomic_max(out.at[ids, :], x[ml.ds(i * 64, 64), :])


@mg.mgpu_kernel(out_shape=lambda x, o: S((o.shape[0] - 1, x.shape[1]), x.dtype), grid=lambda x, o: (o.shape[0] - 1,))
def segment_mean(x, off, out):
  g = ml.program_id(0)
  lo, hi = off[g], off[g + 1]
  acc = ml.zeros((x.shape[1],), jnp.float32)
  for r in range(lo, hi):
    acc += x.at[r][...]
  cnt = (hi - lo).astype(jnp.float32)
  out.at[g][...] = jnp.where(cnt > 0, acc / cnt, 0.0)


@mg.mgpu_kernel(out_shape=lambda x, s: S((G, x.shape[1]), x.dtype), grid=lambda x, s: (G,))
def segment_sum_search(x, seg, out):
  g = ml.program_id(0)
  lo, hi = 0, seg.shape[0]
  while lo < hi:                       # lower bound of g in the sorted ids
    mid = (lo + hi) // 2
    if seg[mid] < g:
      lo = mid + 1
    else:
      hi = mid
  acc = ml.zeros((x.shape[1],), jnp.float32)
  r = lo
  while r < seg.shape[0] and seg[r] == g:
    acc += x[r]
    r += 1
  out[g] = acc


@mg.mgpu_kernel(out_shape=lambda e, o: e, grid=lambda e, o: (o.shape[0] - 1,))
def segment_softmax(e, off, out, *, BLK: ml.constexpr = 128):
  g = ml.program_id(0)
  lo, hi = off[g], off[g + 1]
  m = -jnp.inf
  for s in range(lo, hi, BLK):
    k = s + ml.arange(BLK)
    m = jnp.maximum(m, jnp.max(e.at[k].load(mask=k < hi, other=-jnp.inf)))
  tot = 0.0
  for s in range(lo, hi, BLK):
    k = s + ml.arange(BLK)
    tot += jnp.sum(jnp.exp(e.at[k].load(mask=k < hi, other=-jnp.inf) - m))
  for s in range(lo, hi, BLK):
    k = s + ml.arange(BLK)
    out.at[k].store(jnp.exp(e.at[k].load(mask=k < hi, other=-jnp.inf) - m) / tot, mask=k < hi)


def test_segment_reductions():
  sums = np.asarray(jax.ops.segment_sum(XS, SEG, num_segments=G))
  _both(segment_sum_atomic, [XS, SEG], sums)
  neg = -np.abs(XS)                     # (an output atomic_max updates starts at -inf, not 0)
  _both(segment_sum_atomic, [neg, SEG], np.asarray(jax.ops.segment_max(neg, SEG, num_segments=G)), op="max")
  cnt = np.bincount(SEG, minlength=G)[:, None]
  _both(segment_mean, [XS, SEG_OFF], np.where(cnt > 0, sums / np.maximum(cnt, 1), 0))
  _both(segment_sum_search, [XS, SEG], sums)
  want = np.zeros_like(EV)
  for g in range(G):
    x = EV[SEG_OFF[g]:SEG_OFF[g + 1]]
    if len(x):
      z = np.exp(x - x.max())
      want[SEG_OFF[g]:SEG_OFF[g + 1]] = z / z.sum()
  _both(segment_softmax, [EV, SEG_OFF], want)


# --- CSR SpMV / SpMM ---

M, K = 16, 300
RL = R.integers(0, 40, M)
RL[[3, 7]] = 0
ROWPTR = np.concatenate([[0], np.cumsum(RL)]).astype(np.int32)
NNZ = int(ROWPTR[-1])
COLS = R.integers(0, K, NNZ).astype(np.int32)
DATA = R.standard_normal(NNZ).astype(np.float32)
XV = R.standard_normal(K).astype(np.float32)
BM = R.standard_normal((K, 128)).astype(np.float32)
A = np.zeros((M, K), np.float32)
for _r in range(M):
  np.add.at(A[_r], COLS[ROWPTR[_r]:ROWPTR[_r + 1]], DATA[ROWPTR[_r]:ROWPTR[_r + 1]])
_CSR = dict(out_shape=lambda rp, c, d, x: S((rp.shape[0] - 1,) + x.shape[1:], x.dtype),
            grid=lambda rp, c, d, x: (rp.shape[0] - 1,))


@mg.mgpu_kernel(**_CSR)
def spmv_scalar(rowptr, cols, data, x, y):
  r = ml.program_id(0)
  acc = 0.0
  for j in range(rowptr[r], rowptr[r + 1]):
    acc += data[j] * x[cols[j]]
  y[r] = acc


@mg.mgpu_kernel(**_CSR)
def spmv_chunks(rowptr, cols, data, x, y, *, BLK: ml.constexpr = 128):
  r = ml.program_id(0)
  start, end = rowptr[r], rowptr[r + 1]
  acc = ml.zeros((BLK,), jnp.float32)
  for s in range(start, end, BLK):
    k = s + ml.arange(BLK)
    m = k < end
    c = ml.load(cols.at[k], mask=m, other=0)
    acc += ml.load(data.at[k], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0)
  y[r] = ml.sum(acc)


@mg.mgpu_kernel(**_CSR)
def spmv_lax_while(rowptr, cols, data, x, y):
  r = ml.program_id(0)

  def body(st):
    j, acc = st
    return j + 1, acc + data[j] * x[cols[j]]
  _, acc = jax.lax.while_loop(lambda st: st[0] < rowptr[r + 1], body, (rowptr[r], jnp.float32(0)))
  y[r] = acc


@mg.mgpu_kernel(out_shape=lambda rp, c, d, x: S((rp.shape[0] - 1,), x.dtype), grid=lambda rp, c, d, x: ((rp.shape[0] - 1) // 8,))
def spmv_row_block(rowptr, cols, data, x, y, *, BK: ml.constexpr = 32):
  p = ml.program_id(0)
  rows = p * 8 + ml.arange(8)
  start, end = rowptr[rows], rowptr[rows + 1]
  acc = jnp.zeros((8, BK), jnp.float32)
  for k0 in range(0, jnp.max(end - start), BK):     # trip count: the block's longest row
    j = start[:, None] + k0 + ml.arange(BK)[None, :]
    m = j < end[:, None]
    c = ml.load(cols.at[j], mask=m, other=0)
    acc += ml.load(data.at[j], mask=m, other=0.0) * ml.load(x.at[c], mask=m, other=0.0)
  y[ml.ds(p * 8, 8)] = jnp.sum(acc, axis=1)


@mg.mgpu_kernel(**_CSR)
def spmm_row(rowptr, cols, data, B, C):
  r = ml.program_id(0)
  start, end = rowptr[r], rowptr[r + 1]
  if start == end:                      # early return of an empty row
    C[r, :] = jnp.zeros((B.shape[1],), B.dtype)
    return
  acc = jnp.zeros((B.shape[1],), jnp.float32)
  for j in range(start, end):
    acc += data[j] * B[cols[j], :]
  C[r, :] = acc


@mg.mgpu_kernel(**_CSR)
def spmm_chunks(rowptr, cols, data, B, C, *, BLK: ml.constexpr = 16):
  r = ml.program_id(0)
  start, end = rowptr[r], rowptr[r + 1]
  n = ml.arange(B.shape[1])
  acc = jnp.zeros((B.shape[1],), jnp.float32)
  for s in range(start, end, BLK):
    k = s + ml.arange(BLK)
    m = k < end
    c = ml.load(cols.at[k], mask=m, other=0)
    d = ml.load(data.at[k], mask=m, other=0.0)
    acc += jnp.sum(d[:, None] * ml.load(B.at[c[:, None], n[None, :]], mask=m[:, None], other=0.0), axis=0)
  C[r, :] = acc


@pytest.mark.parametrize("kernel", [spmv_scalar, spmv_chunks, spmv_lax_while, spmv_row_block])
def test_csr_spmv(kernel):
  _both(kernel, [ROWPTR, COLS, DATA, XV], A @ XV)


@pytest.mark.parametrize("kernel", [spmm_row, spmm_chunks])
def test_csr_spmm(kernel):
  _both(kernel, [ROWPTR, COLS, DATA, BM], A @ BM)


# --- graphs: GAT, GraphSAGE, edge scatters ---

NN = 128
DEG = R.integers(0, 6, NN)
DEG[[2, 5]] = 0
INDPTR = np.concatenate([[0], np.cumsum(DEG)]).astype(np.int32)
NE = int(INDPTR[-1])
SRC = R.integers(0, NN, NE).astype(np.int32)
H64 = R.standard_normal((NN, 64)).astype(np.float32)
H4 = 4
A_S, A_D = R.standard_normal((NN, H4)).astype(np.float32), R.standard_normal((NN, H4)).astype(np.float32)


def _gat_ref(h, a_s, a_d, heads):
  dh = h.shape[1] // heads
  out = np.zeros_like(h)
  for v in range(NN):
    es = SRC[INDPTR[v]:INDPTR[v + 1]]
    for hd in range(heads if len(es) else 0):
      e = a_s[es, hd] + a_d[v, hd]
      e = np.where(e > 0, e, 0.2 * e)
      al = np.exp(e - e.max())
      out[v, hd * dh:(hd + 1) * dh] = (al[:, None] / al.sum() * h[es, hd * dh:(hd + 1) * dh]).sum(0)
  return out


@mg.mgpu_kernel(out_shape=lambda ip, s, h, a, b: h, grid=lambda ip, s, h, a, b: (ip.shape[0] - 1,))
def gat_online(indptr, src, h, a_src, a_dst, out, *, BE: ml.constexpr = 8):
  v = ml.program_id(0)
  lo, hi = indptr[v], indptr[v + 1]
  cols = ml.arange(h.shape[1])
  m = ml.full((), -jnp.inf, jnp.float32)
  den = ml.zeros((), jnp.float32)
  acc = jnp.zeros((h.shape[1],), jnp.float32)
  for s in range(lo, hi, BE):          # online softmax over blocks of edges
    k = s + ml.arange(BE)
    msk = k < hi
    u = ml.load(src.at[k], mask=msk, other=0)
    e = ml.load(a_src.at[u], mask=msk, other=0.0) + a_dst[v]
    e = jnp.where(msk, jnp.where(e > 0, e, 0.2 * e), -jnp.inf)
    m_new = jnp.maximum(m, jnp.max(e))
    scale = jnp.exp(m - m_new)
    p = jnp.exp(e - m_new)
    den = den * scale + jnp.sum(p)
    rows = ml.load(h.at[u[:, None], cols[None, :]], mask=msk[:, None], other=0.0)
    acc = acc * scale + jnp.sum(p[:, None] * rows, axis=0)
    m = m_new
  out[v, :] = jnp.where(den > 0, acc / den, 0.0)


@mg.mgpu_kernel(out_shape=lambda ip, s, h, a, b: h, grid=lambda ip, s, h, a, b: (ip.shape[0] - 1,))
def gat_heads(indptr, src, h, a_src, a_dst, out):
  v = ml.program_id(0)
  lo, hi = indptr[v], indptr[v + 1]
  heads = a_dst.shape[1]
  ad = a_dst[v, :]
  m = jnp.full((heads,), -jnp.inf, jnp.float32)
  for k in range(lo, hi):
    m = jnp.maximum(m, jax.nn.leaky_relu(a_src[src[k], :] + ad, 0.2))
  den = jnp.zeros((heads,), jnp.float32)
  acc = jnp.zeros((heads, h.shape[1] // heads), jnp.float32)
  for k in range(lo, hi):
    u = src[k]
    w = jnp.exp(jax.nn.leaky_relu(a_src[u, :] + ad, 0.2) - m)
    den += w
    acc += w[:, None] * h[u, :].reshape(heads, h.shape[1] // heads)
  out[v, :] = jnp.where(hi > lo, acc / den[:, None], 0.0).reshape(h.shape[1])


@mg.mgpu_kernel(out_shape=lambda ip, s, h, w: S((h.shape[0], w.shape[1]), h.dtype), grid=lambda ip, s, h, w: (h.shape[0] // 64,))
def sage_layer(indptr, src, h, W, out, *, BN: ml.constexpr = 64):
  p = ml.program_id(0)
  nodes = p * BN + ml.arange(BN)
  lo = indptr[nodes]
  n = indptr[nodes + 1] - lo
  cols = ml.arange(h.shape[1])
  agg = jnp.zeros((BN, h.shape[1]), jnp.float32)
  for k in range(jnp.max(n)):
    m = k < n
    u = ml.load(src.at[lo + k], mask=m, other=0)
    agg += ml.load(h.at[u[:, None], cols[None, :]], mask=m[:, None], other=0.0)
  agg = agg / jnp.maximum(n, 1)[:, None].astype(jnp.float32)
  z = jnp.concatenate([h[ml.ds(p * BN, BN), :], agg], axis=1)
  out[ml.ds(p * BN, BN), :] = jax.nn.relu(jnp.dot(z, W[...]))


@mg.mgpu_kernel(out_shape=lambda s, d, w, h: h, grid=lambda s, d, w, h: (s.shape[0] // 16,))
def edge_scatter(src, dst, w, h, out):
  i = ml.program_id(0)
  e = i * 16 + ml.arange(16)
  t = dst[e]
  ml.atomic_add(out.at[t, :], w[e][:, None] * h[src[e], :], mask=(t >= 0)[:, None])


def test_gat():
  h = R.standard_normal((NN, 128)).astype(np.float32)
  _both(gat_online, [INDPTR, SRC, H64, A_S[:, 0].copy(), A_D[:, 0].copy()], _gat_ref(H64, A_S, A_D, 1), tol=1e-3)
  _both(gat_heads, [INDPTR, SRC, h, A_S, A_D], _gat_ref(h, A_S, A_D, H4), tol=1e-3)


def test_graphsage_mean_then_matmul():
  w = (R.standard_normal((128, 64)) / 8).astype(np.float32)
  agg = np.stack([H64[SRC[INDPTR[v]:INDPTR[v + 1]]].mean(0) if DEG[v] else np.zeros(64, np.float32)
                  for v in range(NN)])
  _both(sage_layer, [INDPTR, SRC, H64, w], np.maximum(np.concatenate([H64, agg], 1) @ w, 0), tol=2e-2)


def test_edge_parallel_scatter():
  src = np.zeros(NE + (-NE) % 16, np.int32)
  dst = np.full(src.shape, -1, np.int32)
  src[:NE], dst[:NE] = SRC, np.repeat(np.arange(NN), DEG)
  w = R.standard_normal(src.shape).astype(np.float32)
  want = np.zeros_like(H64)
  np.add.at(want, dst[:NE], w[:NE, None] * H64[src[:NE]])
  _both(edge_scatter, [src, dst, w, H64], want)


# --- training: EmbeddingBag's backward, row-wise Adagrad in place ---

@mg.mgpu_kernel(out_shape=lambda g, i, o, t: S(t.shape, jnp.float32), grid=lambda g, i, o, t: (o.shape[0] - 1,))
def bag_backward_mean(gout, idx, offs, like, gtable):
  b = ml.program_id(0)
  lo, hi = offs[b], offs[b + 1]
  g = gout[b] / jnp.maximum(hi - lo, 1).astype(jnp.float32)
  for j in range(lo, hi):
    ml.atomic_add(gtable.at[idx[j]], g)


@mg.mgpu_kernel(out_shape=lambda t, s, u, g: (t, s), grid=lambda t, s, u, g: (u.shape[0],),
                input_output_aliases={0: 0, 1: 1})
def rowwise_adagrad(table, state, uid, grad, table_out, state_out, *, lr: ml.constexpr = 0.1):
  i = ml.program_id(0)
  r = uid[i]
  g = grad[i]
  s = state_out[r] + jnp.mean(g * g)
  state_out[r] = s
  table_out[r] = table_out[r] - lr * g / (jnp.sqrt(s) + 1e-8)


def test_bag_backward_and_rowwise_adagrad():
  gout = R.standard_normal((B, D)).astype(np.float32)
  want = np.zeros((V, D), np.float32)
  for b in range(B):
    for j in range(OFFS[b], OFFS[b + 1]):
      want[IDX[j]] += gout[b] / max(LENS[b], 1)
  _both(bag_backward_mean, [gout, IDX, OFFS, np.zeros((V, D), np.float32)], want)
  uid = R.permutation(V)[:16].astype(np.int32)
  grad = R.standard_normal((16, D)).astype(np.float32)
  state = np.abs(R.standard_normal(V)).astype(np.float32)
  t2, s2 = TABLE.copy(), state.copy()
  s2[uid] += (grad ** 2).mean(1)
  t2[uid] -= 0.1 * grad / (np.sqrt(s2[uid])[:, None] + 1e-8)
  got = rowwise_adagrad(TABLE, state, uid, grad, interpret=True)
  _close(got[0], t2)
  _close(got[1], s2)
  export(rowwise_adagrad, TABLE, state, uid, grad)


# --- hashed embeddings of int64 ids; early exits ---

@mg.mgpu_kernel(out_shape=lambda t, i: S((i.shape[0], t.shape[1]), t.dtype), grid=lambda t, i: (i.shape[0] // 16,))
def hash_embed(table, ids, out):
  i = ml.program_id(0)
  raw = ids[ml.ds(i * 16, 16)]
  x = (raw ^ (raw >> 31)) * 2654435761
  out[ml.ds(i * 16, 16), :] = table[(x % table.shape[0]).astype(jnp.int32), :]


@mg.mgpu_kernel(**_BAG)
def hash_bag(table, idx, offs, out):
  b = ml.program_id(0)
  acc = jnp.zeros((table.shape[1],), jnp.float32)
  for j in range(offs[b], offs[b + 1]):
    acc += table[idx[j] % table.shape[0]]
  out[b] = acc


def test_hashed_embeddings_of_int64_ids():
  with jax.enable_x64(True):
    t = R.standard_normal((1000, 64)).astype(np.float32)
    ids = R.integers(-2 ** 40, 2 ** 40, 64, dtype=np.int64)
    x = ids ^ (ids >> 31)
    with np.errstate(over="ignore"):
      x = x * np.int64(2654435761)
    _both(hash_embed, [t, ids], t[x % 1000])
    offs = OFFS.astype(np.int64)
    idx = R.integers(0, 2 ** 40, N, dtype=np.int64)
    _both(hash_bag, [t, idx, offs], _bag_ref(t, idx % 1000, offs))
