"""Probe 60b's corpus, part c (registered in probe60b_common.CASES; tests/test_probe60b.py runs them)."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from probe_util import rnd
from probe60b_common import S, BF16, F32, _MODE, CASES, tanh, rsqrt, libdevice, tle, _export, close


# ================================================================ (b11)

def _gelu_tanh(x):
  sqrt_2_over_pi = 0.7978845608028654
  x_cubed = x * x * x
  tanh_arg = sqrt_2_over_pi * (x + 0.044715 * x_cubed)
  return 0.5 * x * (1 + tanh(tanh_arg))

# ---- Liger geglu forward+backward with a module-level libdevice alias and helper
@mg.mgpu_kernel(out_shape=lambda dc, a, b, *, BLOCK_SIZE: (a, b, a), grid=lambda dc, *x, **k: (dc.shape[0],))
def geglu_bwd(dc_ptr, a_ptr, b_ptr, da_ptr, db_ptr, c_ptr, *, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = a_ptr.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dc_row = tl.load(dc_ptr.at[program_id, col_offsets], mask=mask, other=0)
  a_row = tl.load(a_ptr.at[program_id, col_offsets], mask=mask, other=0).to(tl.float32)
  b_row = tl.load(b_ptr.at[program_id, col_offsets], mask=mask, other=0)
  sqrt_2_over_pi = tl.sqrt(2.0 / math.pi)
  a_cubed = a_row * a_row * a_row
  tanh_arg = sqrt_2_over_pi * (a_row + 0.044715 * a_cubed)
  tanh_result = tanh(tanh_arg)
  geglu_a = 0.5 * a_row * (1 + tanh_result)
  db_row = dc_row * geglu_a
  term1 = 0.5 * (1 + tanh_result)
  tanh_sq = tanh_result * tanh_result
  term2 = 0.5 * a_row * (1 - tanh_sq) * (sqrt_2_over_pi * (1 + 3 * 0.044715 * a_row * a_row))
  da_row = dc_row * b_row * (term1 + term2)
  tl.store(da_ptr.at[program_id, col_offsets], da_row, mask=mask)
  tl.store(db_ptr.at[program_id, col_offsets], db_row, mask=mask)
  tl.store(c_ptr.at[program_id, col_offsets], _gelu_tanh(a_row).to(b_row.dtype) * b_row, mask=mask)
def t_gg(n, d, dt):
  dc, a, b = rnd((n, d), 1, dt), rnd((n, d), 2, dt), rnd((n, d), 3, dt)
  da, db, c = geglu_bwd(dc, a, b, BLOCK_SIZE=1 << (d - 1).bit_length(), **_MODE)
  af = jnp.asarray(a, jnp.float32); g, vjp = jax.vjp(lambda t: jax.nn.gelu(t, approximate=True), af)
  dcf, bf = dc.astype(np.float32), b.astype(np.float32)
  tol = 3e-2 if dt != np.float32 else 1e-5
  close(db, dcf * np.asarray(g), tol); close(da, np.asarray(vjp(jnp.asarray(dcf * bf))[0]), tol)
  close(c, np.asarray(g).astype(dt).astype(np.float32) * bf, tol)
  _export(geglu_bwd, dc, a, b, BLOCK_SIZE=1 << (d - 1).bit_length())
CASES["geglu_bwd_f32"] = lambda: t_gg(3, 1000, np.float32)
CASES["geglu_bwd_bf16"] = lambda: t_gg(2, 11008, BF16)

# ---- nonzero via a prefix sum of the mask and a data-dependent scatter (single program)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), jnp.int32), S((1,), jnp.int32)), grid=(1,))
def nonzero_k(x_ptr, idx_ptr, cnt_ptr, *, BLOCK: tl.constexpr):
  N = x_ptr.shape[0]
  base = 0
  for off in range(0, N, BLOCK):
    offs = off + tl.arange(0, BLOCK)
    inb = offs < N
    v = tl.load(x_ptr.at[offs], mask=inb, other=0)
    nz = (v != 0) & inb
    pos = tl.cumsum(nz.to(tl.int32), axis=0) - 1 + base
    tl.store(idx_ptr.at[pos], offs, mask=nz)
    tl.store(idx_ptr.at[offs], -1, mask=inb & False) if False else None
    base += tl.sum(nz.to(tl.int32), axis=0)
  tl.store(cnt_ptr.at[0], base)
  for off in range(0, N, BLOCK):
    offs = off + tl.arange(0, BLOCK)
    tl.store(idx_ptr.at[offs], -1, mask=(offs >= base) & (offs < N))
def t_nz(N):
  x = (np.random.default_rng(1).random(N) > 0.6).astype(np.float32) * rnd((N,), 2)
  idx, cnt = nonzero_k(x, BLOCK=1024, **_MODE)
  want = np.nonzero(x)[0]
  assert int(np.asarray(cnt)[0]) == len(want)
  np.testing.assert_array_equal(np.asarray(idx)[:len(want)], want)
  assert (np.asarray(idx)[len(want):] == -1).all()
  _export(nonzero_k, x, BLOCK=1024)
CASES["nonzero"] = lambda: t_nz(5000)

# ---- unique_consecutive of a sorted vector: shifted loads, flags, cumsum, scatter
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((1,), jnp.int32)), grid=(1,))
def unique_sorted(x_ptr, out_ptr, n_ptr, *, BLOCK: tl.constexpr):
  N = x_ptr.shape[0]
  offs = tl.arange(0, BLOCK)
  mask = offs < N
  cur = tl.load(x_ptr.at[offs], mask=mask, other=0)
  prev = tl.load(x_ptr.at[offs - 1], mask=mask & (offs > 0), other=0)
  flag = ((cur != prev) | (offs == 0)) & mask
  pos = tl.cumsum(flag.to(tl.int32), 0) - 1
  tl.store(out_ptr.at[pos], cur, mask=flag)
  n = tl.sum(flag.to(tl.int32), 0)
  tl.store(out_ptr.at[offs], tl.zeros_like(cur), mask=(offs >= n) & mask)
  tl.store(n_ptr.at[0], n)
def t_uq(N):
  x = np.sort(np.random.default_rng(3).integers(0, N // 3, N)).astype(np.int32)
  o, n = unique_sorted(x, BLOCK=1 << (N - 1).bit_length(), **_MODE)
  u = np.unique(x); assert int(np.asarray(n)[0]) == len(u)
  np.testing.assert_array_equal(np.asarray(o)[:len(u)], u)
  _export(unique_sorted, x, BLOCK=1 << (N - 1).bit_length())
CASES["unique_sorted"] = lambda: t_uq(1000)

# ---- tl.range with num_stages, while loop over a data-dependent count, rsqrt alias of a Python number
@mg.mgpu_kernel(out_shape=lambda x, n, *, BLOCK: x, grid=lambda x, n, **k: (x.shape[0],))
def ranges(x_ptr, n_ptr, y_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  for off in tl.range(0, N, BLOCK, num_stages=3):
    cols = off + tl.arange(0, BLOCK)
    v = tl.load(x_ptr.at[row, cols], mask=cols < N, other=0.0)
    tl.store(y_ptr.at[row, cols], v * rsqrt(4.0), mask=cols < N)
def t_rg():
  x = rnd((3, 1000), 6); n = np.array([3], np.int32)
  close(ranges(x, n, BLOCK=256, **_MODE), x * 0.5); _export(ranges, x, n, BLOCK=256)
CASES["ranges_rsqrt_number"] = t_rg

# ================================================================ (b14)

# ---- FlagGems column reduction (dim 0, keepdim): program per column block, loop over rows
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK_M, BLOCK_N: (S((1, x.shape[1]), F32), S((1, x.shape[1]), jnp.int32)), grid=lambda x, *, BLOCK_M, BLOCK_N: (tl.cdiv(x.shape[1], BLOCK_N),))
def col_reduce(inp, out, cnt_out, *, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
  M, N = inp.shape
  cols = tl.program_id(0) * BLOCK_N + tl.arange(0, BLOCK_N)
  acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
  cnt = tl.zeros([BLOCK_N], tl.int32)
  for m0 in range(0, M, BLOCK_M):
    rows = m0 + tl.arange(0, BLOCK_M)
    mask = (rows[:, None] < M) & (cols[None, :] < N)
    v = tl.load(inp.at[rows[:, None], cols[None, :]], mask=mask, other=0.0).to(tl.float32)
    acc += v * v
    cnt += tl.sum(v != 0, axis=0)
  tl.store(out.at[0, cols], tl.sqrt(tl.sum(acc, axis=0)), mask=cols < N)
  tl.store(cnt_out.at[0, cols], cnt, mask=cols < N)
def t_cr(M, N, dt):
  x = rnd((M, N), 1, dt); x[x.astype(np.float32) < -1] = 0
  o, c = col_reduce(x, BLOCK_M=16, BLOCK_N=64, **_MODE)
  close(o, np.sqrt((x.astype(np.float64) ** 2).sum(0, keepdims=True)), 1e-4)
  np.testing.assert_array_equal(np.asarray(c), (x != 0).sum(0, keepdims=True))
  _export(col_reduce, x, BLOCK_M=16, BLOCK_N=64)
CASES["col_reduce_f32"] = lambda: t_cr(1000, 300, np.float32)
CASES["col_reduce_bf16"] = lambda: t_cr(33, 4096, BF16)

# ---- FlagGems two-stage mean: partials to a mid buffer, then a second kernel over mid_size
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S((tl.cdiv(x.shape[0], BLOCK),), F32), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def mean_stage1(inp, mid, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offset = pid * BLOCK + tl.arange(0, BLOCK)
  x = tl.load(inp.at[offset], mask=offset < inp.shape[0], other=0.0).to(tl.float32)
  tl.store(mid.at[pid], tl.sum(x))
@mg.mgpu_kernel(out_shape=lambda mid, *, N, BLOCK_MID: S((), F32), grid=(1,))
def mean_stage2(mid, out, *, N: tl.constexpr, BLOCK_MID: tl.constexpr):
  offset = tl.arange(0, BLOCK_MID)
  v = tl.load(mid.at[offset], mask=offset < mid.shape[0], other=0.0)
  tl.store(out, tl.sum(v) / N)
def t_mean(N, dt):
  x = rnd((N,), 2, dt)
  mid = mean_stage1(x, BLOCK=1024, **_MODE)
  ms = mid.shape[0]
  o = mean_stage2(mid, N=N, BLOCK_MID=1 << (ms - 1).bit_length(), **_MODE)
  close(o, x.astype(np.float64).mean(), 1e-5)
  _export(mean_stage1, x, BLOCK=1024); _export(mean_stage2, np.asarray(mid), N=N, BLOCK_MID=1 << (ms - 1).bit_length())
CASES["mean_two_stage"] = lambda: t_mean(100003, np.float32)
CASES["mean_two_stage_bf16"] = lambda: t_mean(4099, BF16)

# ---- FlagGems triu / tril with a diagonal, all/any reductions of booleans, prod via tl.reduce
def _prod(a, b):
  return a * b
@mg.mgpu_kernel(out_shape=lambda x, *, diagonal, BLOCK_N: (x, S((x.shape[0],), jnp.bool_), S((x.shape[0],), jnp.bool_), S((x.shape[0],), F32)),
                grid=lambda x, **k: (x.shape[0],))
def triu_any_all_prod(x_ptr, o_ptr, any_ptr, all_ptr, prod_ptr, *, diagonal: tl.constexpr, BLOCK_N: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  cols = tl.arange(0, BLOCK_N)
  mask = cols < N
  x = tl.load(x_ptr.at[row, cols], mask=mask, other=0.0)
  tl.store(o_ptr.at[row, cols], tl.where(cols >= row + diagonal, x, 0.0), mask=mask)
  nz = (x != 0) & mask
  tl.store(any_ptr.at[row], tl.max(nz.to(tl.int32), axis=0) > 0)
  tl.store(all_ptr.at[row], tl.min(tl.where(mask, nz, True).to(tl.int1), axis=0))
  p = tl.load(x_ptr.at[row, cols], mask=mask, other=1.0)
  tl.store(prod_ptr.at[row], tl.reduce(p, 0, _prod))
def t_triu(M, N):
  x = (1 + 0.05 * rnd((M, N), 3)).astype(np.float32); x[1] = 0; x[2, 5] = 0
  o, a, al, p = triu_any_all_prod(x, diagonal=1, BLOCK_N=1 << (N - 1).bit_length(), **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.triu(x, 1))
  np.testing.assert_array_equal(np.asarray(a), (x != 0).any(1)); np.testing.assert_array_equal(np.asarray(al), (x != 0).all(1))
  close(p, np.prod(x.astype(np.float64), 1), 1e-4)
  _export(triu_any_all_prod, x, diagonal=1, BLOCK_N=1 << (N - 1).bit_length())
CASES["triu_any_all_prod"] = lambda: t_triu(6, 100)

# ---- vector norms: inf, -inf, 0, 2 of rows chunked; NaN checks with x != x
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: S((x.shape[0], 4), F32), grid=lambda x, **k: (x.shape[0],))
def norms(x_ptr, o_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  N = x_ptr.shape[1]
  mx = tl.full([BLOCK], float("-inf"), tl.float32)
  mn = tl.full([BLOCK], float("inf"), tl.float32)
  nz = tl.zeros([BLOCK], tl.float32)
  sq = tl.zeros([BLOCK], tl.float32)
  has_nan = tl.zeros([BLOCK], tl.int32)
  for off in range(0, N, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    m = cols < N
    v = tl.load(x_ptr.at[row, cols], mask=m, other=0.0).to(tl.float32)
    a = tl.abs(v)
    mx = tl.maximum(mx, tl.where(m, a, float("-inf")))
    mn = tl.minimum(mn, tl.where(m, a, float("inf")))
    nz += (v != 0).to(tl.float32)
    sq += v * v
    has_nan |= (v != v).to(tl.int32)
  l2 = tl.sqrt(tl.sum(sq))
  l2 = tl.where(tl.max(has_nan) > 0, float("nan"), l2)
  tl.store(o_ptr.at[row, 0], tl.max(mx))
  tl.store(o_ptr.at[row, 1], tl.min(mn))
  tl.store(o_ptr.at[row, 2], tl.sum(nz))
  tl.store(o_ptr.at[row, 3], l2)
def t_norms(M, N, dt):
  x = rnd((M, N), 4, dt); x[0, 3] = 0; x[1, 7] = np.nan
  o = np.asarray(norms(x, BLOCK=512, **_MODE))
  xf = np.abs(x.astype(np.float64))
  close(o[:, 0], np.max(xf, 1), 1e-6); close(o[:, 2], (x != 0).sum(1), 0)
  close(o[[0] + list(range(2, M)), 3], np.sqrt((xf ** 2).sum(1))[[0] + list(range(2, M))], 1e-4)
  assert np.isnan(o[1, 3])
  _export(norms, x, BLOCK=512)
CASES["norms_f32"] = lambda: t_norms(4, 3000, np.float32)
CASES["norms_f16"] = lambda: t_norms(3, 700, np.float16)


# ================================================================ (b15)

# ---- FlagGems softmax inner: TILE_M rows per program, masked rows all -inf (NaN rows never stored)
@mg.mgpu_kernel(out_shape=lambda x, *, TILE_M, TILE_N: x, grid=lambda x, *, TILE_M, TILE_N: (tl.cdiv(x.shape[0], TILE_M),))
def softmax_inner(input_ptr, output_ptr, *, TILE_M: tl.constexpr, TILE_N: tl.constexpr):
  M, N = input_ptr.shape
  pid_m = tl.program_id(0)
  m_offsets = pid_m * TILE_M + tl.arange(0, TILE_M)
  n_offsets = tl.arange(0, TILE_N)
  mask = (m_offsets[:, None] < M) & (n_offsets[None, :] < N)
  inp = tl.load(input_ptr.at[m_offsets[:, None], n_offsets[None, :]], mask=mask, other=-float("inf")).to(tl.float32)
  m = tl.max(inp, 1)
  e = tl.exp(inp - m[:, None])
  z = tl.sum(e, 1)
  out = e / z[:, None]
  tl.store(output_ptr.at[m_offsets[:, None], n_offsets[None, :]], out, mask=mask)
def t_si(M, N, dt, TM):
  x = rnd((M, N), 1, dt)
  o = softmax_inner(x, TILE_M=TM, TILE_N=1 << (N - 1).bit_length(), **_MODE)
  xf = x.astype(np.float64); e = np.exp(xf - xf.max(1, keepdims=True))
  close(o, e / e.sum(1, keepdims=True), 1e-2 if dt != np.float32 else 1e-5)
  _export(softmax_inner, x, TILE_M=TM, TILE_N=1 << (N - 1).bit_length())
CASES["softmax_inner_f32"] = lambda: t_si(13, 1000, np.float32, 4)
CASES["softmax_inner_bf16"] = lambda: t_si(5, 128, BF16, 8)

# ---- a guard return at the top, ignore_index as a run-time scalar, n_cols a run-time scalar loop bound
@mg.mgpu_kernel(out_shape=lambda x, y, n_rows, ii, *, BLOCK: S((x.shape[0],), F32), grid=lambda x, *a, **k: (x.shape[0] + 3,))
def guarded(x_ptr, y_ptr, n_rows: tl.scalar, ignore_index: tl.scalar, out_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  if pid >= n_rows:
    return
  n_cols = x_ptr.shape[1]
  y = tl.load(y_ptr.at[pid])
  if y == ignore_index:
    tl.store(out_ptr.at[pid], 0.0)
    return
  acc = tl.zeros([BLOCK], tl.float32)
  for off in range(0, n_cols, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    acc += tl.load(x_ptr.at[pid, cols], mask=cols < n_cols, other=0.0)
  tl.store(out_ptr.at[pid], tl.sum(acc, axis=0) - tl.load(x_ptr.at[pid, y]))
def t_g():
  x = rnd((6, 1000), 2); y = np.array([1, -100, 3, 999, 0, 5], np.int32)
  o = guarded(x, y, 6, -100, BLOCK=256, **_MODE)
  w = x.sum(1) - x[np.arange(6), np.maximum(y, 0)]; w[1] = 0
  close(o, w, 1e-4); _export(guarded, x, y, np.int32(6), np.int32(-100), BLOCK=256)
CASES["guarded"] = t_g

# ---- bf16 atomic add (embedding grad in bf16), 2-D cumsum along rows with reverse
@mg.mgpu_kernel(out_shape=lambda ids, g, w0, *, BLOCK: w0, grid=lambda ids, *a, **k: (ids.shape[0],), input_output_aliases={2: 0})
def bf16_atomic(ids, g, w0, w, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  m = cols < g.shape[1]
  t = tl.load(ids.at[pid])
  tl.atomic_add(w.at[t, cols], tl.load(g.at[pid, cols], mask=m, other=0.0), mask=m)
def t_ba():
  ids = np.array([0, 2, 0, 1, 2, 2], np.int32); g = rnd((6, 300), 3, BF16); w0 = np.zeros((3, 300), BF16)
  o = bf16_atomic(ids, g, w0, BLOCK=512, **_MODE)
  want = np.zeros((3, 300), np.float32); np.add.at(want, ids, g.astype(np.float32))
  close(o, want, 3e-2); _export(bf16_atomic, ids, g, w0, BLOCK=512)
CASES["bf16_atomic"] = t_ba

@mg.mgpu_kernel(out_shape=lambda x, *, BM, BN: (x, x), grid=lambda x, *, BM, BN: (tl.cdiv(x.shape[0], BM),))
def cumsum2d(x_ptr, o_ptr, r_ptr, *, BM: tl.constexpr, BN: tl.constexpr):
  rows = tl.program_id(0) * BM + tl.arange(0, BM)
  cols = tl.arange(0, BN)
  mask = (rows[:, None] < x_ptr.shape[0]) & (cols[None, :] < x_ptr.shape[1])
  x = tl.load(x_ptr.at[rows[:, None], cols[None, :]], mask=mask, other=0.0)
  tl.store(o_ptr.at[rows[:, None], cols[None, :]], tl.cumsum(x, axis=1), mask=mask)
  tl.store(r_ptr.at[rows[:, None], cols[None, :]], tl.cumsum(x, axis=1, reverse=True), mask=mask)
def t_c2():
  x = rnd((10, 100), 4)
  o, r = cumsum2d(x, BM=4, BN=128, **_MODE)
  close(o, np.cumsum(x, 1), 1e-5); close(r, np.cumsum(x[:, ::-1], 1)[:, ::-1], 1e-5); _export(cumsum2d, x, BM=4, BN=128)
CASES["cumsum2d"] = t_c2

# ---- Liger qwen2vl mrope style: sections picked by tl.where over column ranges
@mg.mgpu_kernel(out_shape=lambda q, cos, sin, *, sec_t, sec_h, pad_hd: q, grid=lambda q, *a, **k: (q.shape[0],))
def mrope(q_ptr, cos, sin, o_ptr, *, sec_t: tl.constexpr, sec_h: tl.constexpr, pad_hd: tl.constexpr):
  pid = tl.program_id(0)
  n_h, hd = q_ptr.shape[1], q_ptr.shape[2]
  d = tl.arange(0, pad_hd // 2)
  dm = d < hd // 2
  t_cos = tl.load(cos.at[0, pid, d], mask=dm, other=0)
  h_cos = tl.load(cos.at[1, pid, d], mask=dm, other=0)
  w_cos = tl.load(cos.at[2, pid, d], mask=dm, other=0)
  t_sin = tl.load(sin.at[0, pid, d], mask=dm, other=0)
  h_sin = tl.load(sin.at[1, pid, d], mask=dm, other=0)
  w_sin = tl.load(sin.at[2, pid, d], mask=dm, other=0)
  t_mask = d < sec_t
  h_mask = (sec_t <= d) & (d < sec_t + sec_h)
  c = tl.where(t_mask, t_cos, tl.where(h_mask, h_cos, w_cos))
  s = tl.where(t_mask, t_sin, tl.where(h_mask, h_sin, w_sin))
  hh = tl.arange(0, 16)[:, None]
  m2 = (hh < n_h) & dm[None, :]
  q1 = tl.load(q_ptr.at[pid, hh, d[None, :]], mask=m2, other=0)
  q2 = tl.load(q_ptr.at[pid, hh, d[None, :] + hd // 2], mask=m2, other=0)
  tl.store(o_ptr.at[pid, hh, d[None, :]], q1 * c - q2 * s, mask=m2)
  tl.store(o_ptr.at[pid, hh, d[None, :] + hd // 2], q2 * c + q1 * s, mask=m2)
def t_mr():
  T, H, D = 5, 12, 128
  q = rnd((T, H, D), 5); cos = rnd((3, T, D // 2), 6); sin = rnd((3, T, D // 2), 7)
  o = mrope(q, cos, sin, sec_t=16, sec_h=24, pad_hd=128, **_MODE)
  d = np.arange(D // 2); sel = np.where(d < 16, 0, np.where(d < 40, 1, 2))
  c = cos[sel, :, d].T[:, None]; s = sin[sel, :, d].T[:, None]
  q1, q2 = q[..., :D // 2], q[..., D // 2:]
  close(o, np.concatenate([q1 * c - q2 * s, q2 * c + q1 * s], -1), 1e-5)
  _export(mrope, q, cos, sin, sec_t=16, sec_h=24, pad_hd=128)
CASES["mrope"] = t_mr

# ================================================================ (b16)

@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, x, x, x, x, x), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def libfuncs(x_ptr, a, b, c, d, e, f, *, BLOCK: tl.constexpr):
  pid = tle.program_id(0)
  offs = pid * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=m, other=0.0)
  tl.store(a.at[offs], tl.where(libdevice.isnan(x), 0.0, x), mask=m)
  tl.store(b.at[offs], libdevice.pow(tl.abs(x), 1.5), mask=m)
  tl.store(c.at[offs], libdevice.nearbyint(x * 3), mask=m)
  tl.store(d.at[offs], libdevice.trunc(x * 3), mask=m)
  tl.store(e.at[offs], tl.where(x > 0, x, 0.5 * (tl.exp(x) - 1)), mask=m)
  tl.store(f.at[offs], tl.math.fast_expf(x) + tl.math.floor(x), mask=m)
def t_lf():
  x = rnd((3000,), 1) * 2; x[5] = np.nan
  a, b, c, d, e, f = libfuncs(x, BLOCK=1024, **_MODE)
  xx = np.where(np.isnan(x), 0, x)
  close(a, xx); close(np.asarray(b)[np.arange(3000) != 5], (np.abs(x) ** 1.5)[np.arange(3000) != 5], 1e-5)
  close(c, np.rint(x * 3)); close(d, np.trunc(x * 3)); close(e, np.where(x > 0, x, 0.5 * np.expm1(x)), 1e-5)
  close(np.asarray(f)[np.arange(3000) != 5], (np.exp(x) + np.floor(x))[np.arange(3000) != 5], 1e-5)
  _export(libfuncs, x, BLOCK=1024)
CASES["libfuncs"] = t_lf

# ---- bernoulli with a tensor p, randint bits
@mg.mgpu_kernel(out_shape=lambda p, seed, *, BLOCK: (S(p.shape, jnp.bool_), S(p.shape, jnp.uint32)), grid=lambda p, seed, *, BLOCK: (tl.cdiv(p.shape[0], BLOCK),))
def bernoulli(p_ptr, seed: tl.scalar, out_ptr, bits_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < p_ptr.shape[0]
  p = tl.load(p_ptr.at[offs], mask=m, other=0.0)
  r = tl.rand(seed, offs)
  tl.store(out_ptr.at[offs], r < p, mask=m)
  tl.store(bits_ptr.at[offs], tl.randint(seed, offs), mask=m)
def t_be():
  p = np.linspace(0, 1, 20000).astype(np.float32)
  o, bits = bernoulli(p, 7, BLOCK=1024, **_MODE)
  o = np.asarray(o)
  assert abs(o[:10000].mean() - 0.25) < 0.03 and abs(o[10000:].mean() - 0.75) < 0.03
  assert np.asarray(bits).std() > 1e8
  _export(bernoulli, p, np.int32(7), BLOCK=1024)
CASES["bernoulli"] = t_be

# ---- gelu with a string constexpr approximate, tl.trans / tl.reshape of a tile
@mg.mgpu_kernel(out_shape=lambda x, *, approximate, BM, BN: S((x.shape[1], x.shape[0]), x.dtype), grid=(1,))
def gelu_t(x_ptr, o_ptr, *, approximate: tl.constexpr, BM: tl.constexpr, BN: tl.constexpr):
  r = tl.arange(0, BM)
  c = tl.arange(0, BN)
  x = tl.load(x_ptr.at[r[:, None], c[None, :]]).to(tl.float32)
  if approximate == "tanh":
    y = 0.5 * x * (1 + libdevice.tanh(0.7978845608028654 * (x + 0.044715 * x * x * x)))
  else:
    y = 0.5 * x * (1 + libdevice.erf(x * 0.7071067811865476))
  tl.store(o_ptr.at[c[:, None], r[None, :]], tl.trans(y).to(o_ptr.dtype.element_ty))
def t_gt(appr):
  x = rnd((64, 128), 2)
  o = gelu_t(x, approximate=appr, BM=64, BN=128, **_MODE)
  close(o, np.asarray(jax.nn.gelu(x, approximate=appr == "tanh")).T, 1e-5); _export(gelu_t, x, approximate=appr, BM=64, BN=128)
CASES["gelu_t_none"] = lambda: t_gt("none")
CASES["gelu_t_tanh"] = lambda: t_gt("tanh")

# ---- 3-D block: (B, H, D) tile per program with a head mask
@mg.mgpu_kernel(out_shape=lambda x, *, BB, BH, BD: S((x.shape[0], x.shape[1]), F32), grid=lambda x, *, BB, **k: (tl.cdiv(x.shape[0], BB),))
def norms3d(x_ptr, o_ptr, *, BB: tl.constexpr, BH: tl.constexpr, BD: tl.constexpr):
  B, H, D = x_ptr.shape
  b = tl.program_id(0) * BB + tl.arange(0, BB)
  h = tl.arange(0, BH)
  d = tl.arange(0, BD)
  mask = (b[:, None, None] < B) & (h[None, :, None] < H) & (d[None, None, :] < D)
  x = tl.load(x_ptr.at[b[:, None, None], h[None, :, None], d[None, None, :]], mask=mask, other=0.0)
  n = tl.sqrt(tl.sum(x * x, axis=2))
  tl.store(o_ptr.at[b[:, None], h[None, :]], n, mask=(b[:, None] < B) & (h[None, :] < H))
def t_n3(B, H, D):
  x = rnd((B, H, D), 3)
  o = norms3d(x, BB=2, BH=1 << (H - 1).bit_length(), BD=1 << (D - 1).bit_length(), **_MODE)
  close(o, np.sqrt((x ** 2).sum(2)), 1e-5); _export(norms3d, x, BB=2, BH=1 << (H - 1).bit_length(), BD=1 << (D - 1).bit_length())
CASES["norms3d"] = lambda: t_n3(5, 8, 128)
CASES["norms3d_odd"] = lambda: t_n3(3, 6, 100)

# ================================================================ (b18)

def _stats(x, n, EPS: tl.constexpr = 1e-5):
  mean = tl.sum(x, axis=0) / n
  xc = x - mean
  return mean, tl.rsqrt(tl.sum(xc * xc, axis=0) / n + EPS)

# ---- helper with a constexpr default returning a tuple; Unsloth CE backward with a conditional scalar binding
@mg.mgpu_kernel(out_shape=lambda logits, labels, dloss, lse, *, BLOCK_SIZE: logits, grid=lambda l, *a, **k: (l.shape[0],))
def unsloth_ce_bwd(logits_ptr, labels_ptr, dloss_ptr, lse_ptr, dx_ptr, *, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  V = logits_ptr.shape[1]
  label_idx = tl.load(labels_ptr.at[row_idx]).to(tl.int32)
  if label_idx != -100:
    dloss = tl.load(dloss_ptr.at[row_idx])
  else:
    dloss = 0.0
  lse = tl.load(lse_ptr.at[row_idx])
  for off in range(0, V, BLOCK_SIZE):
    col_offsets = off + tl.arange(0, BLOCK_SIZE)
    mask = col_offsets < V
    x = tl.load(logits_ptr.at[row_idx, col_offsets], mask=mask, other=-float("inf")).to(tl.float32)
    y = tl.exp(x - lse)
    y = tl.where(col_offsets == label_idx, y - 1.0, y)
    tl.store(dx_ptr.at[row_idx, col_offsets], dloss * y, mask=mask)
def t_ucb(n, V, dt):
  x = rnd((n, V), 1, dt); y = np.random.default_rng(2).integers(0, V, n).astype(np.int32); y[2] = -100
  xf = x.astype(np.float64); m = xf.max(1); lse = (m + np.log(np.exp(xf - m[:, None]).sum(1))).astype(np.float32); dl = rnd((n,), 3)
  g = unsloth_ce_bwd(x, y, dl, lse, BLOCK_SIZE=4096, **_MODE)
  p = np.exp(xf - lse[:, None]); p[np.arange(n), np.maximum(y, 0)] -= (y >= 0); w = p * np.where(y >= 0, dl, 0)[:, None]
  close(g, w, 2e-2 if dt != np.float32 else 1e-5); _export(unsloth_ce_bwd, x, y, dl, lse, BLOCK_SIZE=4096)
CASES["unsloth_ce_bwd_bf16"] = lambda: t_ucb(5, 32000, BF16)

@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x, **k: (x.shape[0],))
def stats_helper(x_ptr, m_ptr, r_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[row, cols], mask=cols < x_ptr.shape[1], other=0.0)
  mean, rstd = _stats(tl.where(cols < x_ptr.shape[1], x, 0.0), x_ptr.shape[1]) if False else (None, None)
  mean = tl.sum(x, axis=0) / x_ptr.shape[1]
  xc = tl.where(cols < x_ptr.shape[1], x - mean, 0.0)
  rstd = tl.rsqrt(tl.sum(xc * xc, axis=0) / x_ptr.shape[1] + 1e-5)
  tl.store(m_ptr.at[row], mean)
  tl.store(r_ptr.at[row], rstd)
def t_sh():
  x = rnd((3, 4096), 4)
  m, r = stats_helper(x, BLOCK=4096, **_MODE)
  close(m, x.mean(1), 1e-5); close(r, 1 / np.sqrt(x.var(1) + 1e-5), 1e-4)
  m2, r2 = stats_helper2(x, BLOCK=4096, **_MODE)
  close(m2, x.mean(1), 1e-5); close(r2, 1 / np.sqrt(x.var(1) + 1e-5), 1e-4)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x, **k: (x.shape[0],))
def stats_helper2(x_ptr, m_ptr, r_ptr, *, BLOCK: tl.constexpr):
  row = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[row, cols])
  mean, rstd = _stats(x, x_ptr.shape[1])
  tl.store(m_ptr.at[row], mean)
  tl.store(r_ptr.at[row], rstd)
CASES["stats_helper"] = t_sh

# ---- sort positional (dim, descending), argmin over axis 1, repeat_interleave, nearest upsample with float->int index
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((x.shape[0],), jnp.int32)), grid=(1,))
def sort_argmin(x_ptr, s_ptr, a_ptr, *, BLOCK: tl.constexpr):
  r = tl.arange(0, x_ptr.shape[0])
  c = tl.arange(0, BLOCK)
  x = tl.load(x_ptr.at[r[:, None], c[None, :]])
  tl.store(s_ptr.at[r[:, None], c[None, :]], tl.sort(x, 1, True))
  tl.store(a_ptr.at[r], tl.argmin(x, axis=1))
def t_sa():
  x = rnd((8, 256), 5)
  s, a = sort_argmin(x, BLOCK=256, **_MODE)
  np.testing.assert_array_equal(np.asarray(s), -np.sort(-x, 1)); np.testing.assert_array_equal(np.asarray(a), x.argmin(1))
  _export(sort_argmin, x, BLOCK=256)
CASES["sort_positional_argmin"] = t_sa

@mg.mgpu_kernel(out_shape=lambda x, *, reps, BLOCK: S((x.shape[0] * reps,), x.dtype), grid=lambda x, *, reps, BLOCK: (tl.cdiv(x.shape[0] * reps, BLOCK),))
def repeat_interleave(x_ptr, o_ptr, *, reps: tl.constexpr, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < o_ptr.shape[0]
  tl.store(o_ptr.at[offs], tl.load(x_ptr.at[offs // reps], mask=m), mask=m)
def t_ri():
  x = rnd((1001,), 6); o = repeat_interleave(x, reps=3, BLOCK=1024, **_MODE)
  np.testing.assert_array_equal(np.asarray(o), np.repeat(x, 3)); _export(repeat_interleave, x, reps=3, BLOCK=1024)
CASES["repeat_interleave"] = t_ri

@mg.mgpu_kernel(out_shape=lambda x, *, OH, OW, BLOCK: S((x.shape[0], OH, OW), x.dtype), grid=lambda x, *, OH, OW, BLOCK: (x.shape[0], tl.cdiv(OH * OW, BLOCK)))
def upsample_nearest(x_ptr, o_ptr, *, OH: tl.constexpr, OW: tl.constexpr, BLOCK: tl.constexpr):
  nc = tl.program_id(0)
  IH, IW = x_ptr.shape[1], x_ptr.shape[2]
  idx = tl.program_id(1) * BLOCK + tl.arange(0, BLOCK)
  m = idx < OH * OW
  oh = idx // OW
  ow = idx % OW
  ih = tl.minimum((oh * (IH / OH)).to(tl.int32), IH - 1)
  iw = tl.minimum((ow * (IW / OW)).to(tl.int32), IW - 1)
  v = tl.load(x_ptr.at[nc, ih, iw], mask=m)
  tl.store(o_ptr.at[nc, oh, ow], v, mask=m)
def t_up():
  x = rnd((3, 7, 9), 7); o = upsample_nearest(x, OH=14, OW=27, BLOCK=256, **_MODE)
  ih = np.minimum((np.arange(14) * np.float32(7 / 14)).astype(int), 6); iw = np.minimum((np.arange(27) * np.float32(9 / 27)).astype(int), 8)
  np.testing.assert_array_equal(np.asarray(o), x[:, ih][:, :, iw]); _export(upsample_nearest, x, OH=14, OW=27, BLOCK=256)
CASES["upsample_nearest"] = t_up

# ================================================================ (b21)
@mg.mgpu_kernel(out_shape=lambda x, *, BLOCK: (x, S((1,), jnp.int32)), grid=lambda x, *, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def int64_things(x_ptr, y_ptr, cnt_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  offsets = pid.to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offsets], mask=mask, other=0.0)
  cnt = tl.zeros([BLOCK], tl.int64)
  cnt += (x > 0).to(tl.int64)
  tl.store(y_ptr.at[offsets], tl.full([BLOCK], 1.5, dtype=x_ptr.dtype.element_ty) * x, mask=mask)
  tl.atomic_add(cnt_ptr.at[0], tl.sum(cnt).to(tl.int32))
def t_i64():
  x = rnd((3000,), 1); y, c = int64_things(x, BLOCK=1024, **_MODE)
  close(y, 1.5 * x); assert int(np.asarray(c)[0]) == (x > 0).sum(); _export(int64_things, x, BLOCK=1024)
CASES["int64_things"] = t_i64

# ---- Liger CE with weight, z-loss and label smoothing together; HAS_WEIGHT with a weight tensor
@mg.mgpu_kernel(out_shape=lambda X, Y, W, *, lse_square_scale, label_smoothing, BLOCK_SIZE: (S((X.shape[0],), F32), S((X.shape[0],), F32)), grid=lambda X, *a, **k: (X.shape[0],))
def ce_zloss(X_ptr, Y_ptr, weight_ptr, loss_ptr, z_loss_ptr, *, lse_square_scale: tl.constexpr, label_smoothing: tl.constexpr, BLOCK_SIZE: tl.constexpr):
  program_id = tl.program_id(0).to(tl.int64)
  n_cols = X_ptr.shape[1]
  y = tl.load(Y_ptr.at[program_id])
  m = float("-inf")
  d = 0.0
  ori_X_y = tl.load(X_ptr.at[program_id, y]).cast(tl.float32)
  weight_y = tl.load(weight_ptr.at[y]).cast(tl.float32)
  scaled_x_sum = 0.0
  eps = label_smoothing / n_cols
  for i in range(0, n_cols, BLOCK_SIZE):
    X_offsets = i + tl.arange(0, BLOCK_SIZE)
    X_block = tl.load(X_ptr.at[program_id, X_offsets], mask=X_offsets < n_cols, other=float("-inf")).cast(tl.float32)
    block_max = tl.max(X_block)
    if label_smoothing > 0:
      weight_block = tl.load(weight_ptr.at[X_offsets], mask=X_offsets < n_cols)
      scaled_x_sum += tl.sum(tl.where(X_offsets < n_cols, -eps * X_block * weight_block, 0.0))
    m_new = tl.maximum(m, block_max)
    d = d * tl.exp(m - m_new) + tl.sum(tl.exp(X_block - m_new))
    m = m_new
  lse = m + tl.log(d)
  loss = (lse - ori_X_y) * weight_y
  if label_smoothing > 0:
    loss = loss * (1 - label_smoothing) + scaled_x_sum + label_smoothing * lse * eps * 0
  z_loss = lse_square_scale * lse * lse
  loss += z_loss
  tl.store(loss_ptr.at[program_id], loss)
  tl.store(z_loss_ptr.at[program_id], z_loss)
def t_z():
  V = 50257; x = rnd((3, V), 1) * 2; y = np.array([5, 100, 50000], np.int32); w = np.abs(rnd((V,), 2))
  l, z = ce_zloss(x, y, w, lse_square_scale=1e-4, label_smoothing=0.1, BLOCK_SIZE=8192, **_MODE)
  xf = x.astype(np.float64); m = xf.max(1); lse = m + np.log(np.exp(xf - m[:, None]).sum(1))
  wl = (lse - xf[np.arange(3), y]) * w[y] * 0.9 - (0.1 / V) * (xf * w).sum(1) + 1e-4 * lse ** 2
  close(z, 1e-4 * lse ** 2, 1e-4); close(l, wl, 1e-3); _export(ce_zloss, x, y, w, lse_square_scale=1e-4, label_smoothing=0.1, BLOCK_SIZE=8192)
CASES["ce_zloss"] = t_z

# ---- soft-label CE (FlagGems, class-probability targets) over (N, C) with chunks
@mg.mgpu_kernel(out_shape=lambda x, t, *, BLOCK: S((x.shape[0],), F32), grid=lambda x, *a, **k: (x.shape[0],))
def soft_ce(x_ptr, t_ptr, o_ptr, *, BLOCK: tl.constexpr):
  pid = tl.program_id(0)
  C = x_ptr.shape[1]
  tmp_max = tl.zeros([BLOCK], tl.float32) - float("inf")
  tmp_sum = tl.zeros([BLOCK], tl.float32)
  for off in range(0, C, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    x = tl.load(x_ptr.at[pid, cols], mask=cols < C, other=-float("inf")).to(tl.float32)
    cur_max = tl.maximum(tmp_max, x)
    cur_exp = tl.exp(x - cur_max)
    tmp_sum = tmp_sum * tl.exp(tmp_max - cur_max) + cur_exp
    tmp_max = cur_max
  final_max = tl.max(tmp_max)
  tmp_sum = tmp_sum * tl.exp(tmp_max - final_max)
  lse = final_max + tl.log(tl.sum(tmp_sum))
  acc = tl.zeros([BLOCK], tl.float32)
  for off in range(0, C, BLOCK):
    cols = off + tl.arange(0, BLOCK)
    x = tl.load(x_ptr.at[pid, cols], mask=cols < C, other=0.0).to(tl.float32)
    t = tl.load(t_ptr.at[pid, cols], mask=cols < C, other=0.0).to(tl.float32)
    acc += t * (lse - x)
  tl.store(o_ptr.at[pid], tl.sum(acc))
def t_sc():
  x = rnd((4, 1000), 3); t = np.random.default_rng(4).dirichlet(np.ones(1000), 4).astype(np.float32)
  o = soft_ce(x, t, BLOCK=256, **_MODE)
  xf = x.astype(np.float64); lse = np.log(np.exp(xf).sum(1))
  close(o, (t * (lse[:, None] - xf)).sum(1), 1e-4); _export(soft_ce, x, t, BLOCK=256)
CASES["soft_ce"] = t_sc


# ================================================================ (b22)
@mg.mgpu_kernel(out_shape=lambda x, v, vp, *, BLOCK: (x, x, x), grid=lambda x, *a, BLOCK: (tl.cdiv(x.shape[0], BLOCK),))
def fills(x_ptr, value: tl.scalar, value_ptr, f_ptr, m_ptr, k_ptr, *, BLOCK: tl.constexpr):
  offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
  m = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=m, other=0.0)
  tl.store(f_ptr.at[offs], tl.full([BLOCK], value, tl.float32), mask=m)
  v2 = tl.load(value_ptr)
  tl.store(m_ptr.at[offs], tl.where(x > 0, v2, x), mask=m)
  mx = tl.max(x, axis=0, keep_dims=True)
  tl.store(k_ptr.at[offs], x - mx + tl.broadcast_to(mx, [BLOCK]) * 0, mask=m)
def t_f():
  x = rnd((3000,), 1); vp = np.array(2.5, np.float32)
  f, mm, k = fills(x, -1.25, vp, BLOCK=1024, **_MODE)
  close(f, np.full(3000, -1.25)); close(mm, np.where(x > 0, 2.5, x))
  blk = np.concatenate([np.full(1024, x[i:i + 1024].max()) for i in range(0, 3000, 1024)])[:3000]
  close(k, x - blk); _export(fills, x, np.float32(-1.25), vp, BLOCK=1024)
CASES["fills"] = t_f

# ---- Unsloth layernorm backward
@mg.mgpu_kernel(out_shape=lambda dY, X, W, b, r, mu, *, BLOCK_SIZE: X, grid=lambda dY, *a, **k: (dY.shape[0],))
def unsloth_ln_bwd(dY, X, W, b, r, mu, dX, *, BLOCK_SIZE: tl.constexpr):
  row_idx = tl.program_id(0)
  n_cols = X.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  dY_row = tl.load(dY.at[row_idx, col_offsets], mask=mask, other=0).to(tl.float32)
  X_row = tl.load(X.at[row_idx, col_offsets], mask=mask, other=0).to(tl.float32)
  W_row = tl.load(W.at[col_offsets], mask=mask, other=0).to(tl.float32)
  inv_var = tl.load(r.at[row_idx]).to(tl.float32)
  mean = tl.load(mu.at[row_idx]).to(tl.float32)
  normed = (X_row - mean) * inv_var
  dY_W = dY_row * W_row
  dX_row = dY_W - tl.sum(dY_W, axis=0) / n_cols - normed * tl.sum(dY_W * normed, axis=0) / n_cols
  dX_row = dX_row * inv_var
  tl.store(dX.at[row_idx, col_offsets], dX_row, mask=mask)
def t_ulb(n, d, dt):
  x, w, b, dy = (rnd((n, d), 1, dt) + 1).astype(dt), rnd((d,), 2, dt), rnd((d,), 3, dt), rnd((n, d), 4, dt)
  xf = x.astype(np.float64); mu = xf.mean(1); r = 1 / np.sqrt(xf.var(1) + 1e-5)
  dx = unsloth_ln_bwd(dy, x, w, b, r.astype(np.float32), mu.astype(np.float32), BLOCK_SIZE=1 << (d - 1).bit_length(), **_MODE)
  nm = (xf - mu[:, None]) * r[:, None]; dyw = dy.astype(np.float64) * w.astype(np.float64)
  want = (dyw - dyw.mean(1, keepdims=True) - nm * (dyw * nm).mean(1, keepdims=True)) * r[:, None]
  close(dx, want, 3e-2 if dt != np.float32 else 1e-4)
  _export(unsloth_ln_bwd, dy, x, w, b, r.astype(np.float32), mu.astype(np.float32), BLOCK_SIZE=1 << (d - 1).bit_length())
CASES["unsloth_ln_bwd_bf16"] = lambda: t_ulb(5, 4096, BF16)
CASES["unsloth_ln_bwd_f32"] = lambda: t_ulb(3, 999, np.float32)
