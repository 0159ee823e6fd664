"""Probe 46c: attention variants written by users (sliding windows, varlen batches through cu_seqlens,
cross-attention of ragged lengths) at head_dim 96-256, where the Q, K, V and O buffers are tiled for the
tensor cores more than one tile (128 bytes) wide.

Such a buffer was copied by one TMA over the array tiled (8, 64) like the buffer (Mosaic GPU's
TileTransform), so the array's rows had to be a multiple of 8 and a window had to start on one: a sequence
of 100 tokens, a cu_seqlens offset of 13 or a matmul of 300 rows was MG401, whose hint split q, k and v
into buffers one tile wide and summed a dot per buffer. Such copies now go one row of tiles (8 rows) a TMA
(lowering/memory.py, _copy_row_blocks): any row count, and a load from any row. The float64 NumPy
references take logits large enough that a softmax without its max subtracted would overflow."""
import functools
import math
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32, I32 = jnp.float16, jnp.bfloat16, jnp.float32, jnp.int32
LOG2E = 1.4426950408889634


def _randn(rng, shape, dtype, scale=1.0):
  return jnp.asarray((rng.standard_normal(shape) * scale).astype(np.float32)).astype(dtype)


def _f64(a):
  return np.asarray(jnp.asarray(a).astype(F32), np.float64)


def _softmax(s, keep=None):
  """Rows of float64 logits `s` (keys on the last axis) softmaxed where `keep` holds."""
  if keep is not None:
    s = np.where(keep, s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  return p / p.sum(-1, keepdims=True)


def _export(kernel, *specs, **constexprs):
  f = functools.partial(kernel, **constexprs)
  return jax.export.export(jax.jit(lambda *a: f(*a)), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- sliding window over (batch, heads, seq, dim)
def _sw_grid(q, k, v, window):
  return (ml.cdiv(q.shape[2], 64), q.shape[1], q.shape[0])


@mg.mgpu_kernel(out_shape=lambda q, k, v, window: q, grid=_sw_grid)
def sliding_window(q, k, v, window: ml.scalar, o):
  BQ, BK = 64, 64
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  n, d = q.shape[2], q.shape[3]
  q_s, k_s, v_s = ml.smem((BQ, d)), ml.smem((BK, d)), ml.smem((BK, d))
  ml.copy(q.at[b, h, ml.ds(i * BQ, BQ), :], q_s)
  c = LOG2E / math.sqrt(d)
  m = ml.full((BQ,), -1e30, jnp.float32)
  l = ml.zeros((BQ,), jnp.float32)
  acc = ml.zeros((BQ, d), jnp.float32)
  lo = ml.maximum(i * BQ - window + 1, 0) // BK
  hi = ml.minimum(ml.cdiv((i + 1) * BQ, BK), ml.cdiv(n, BK))
  rows = i * BQ + ml.arange(BQ)
  for j in ml.range(lo, hi, stages=2):
    ml.copy(k.at[b, h, ml.ds(j * BK, BK), :], k_s)
    ml.copy(v.at[b, h, ml.ds(j * BK, BK), :], v_s)
    s = ml.dot(q_s, k_s.T) * c
    cols = j * BK + ml.arange(BK)
    keep = (cols[None, :] <= rows[:, None]) & (rows[:, None] - cols[None, :] < window) & (cols[None, :] < n)
    s = ml.where(keep, s, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp2(s - m_new[:, None])
    alpha = ml.exp2(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  o.at[b, h, ml.ds(i * BQ, BQ), :].store((acc / l[:, None]).astype(o.dtype), mask=rows[:, None] < n)


def _sliding_window_ref(q, k, v, window):
  q, k, v = _f64(q), _f64(k), _f64(v)
  r, c = np.arange(q.shape[2])[:, None], np.arange(k.shape[2])[None, :]
  return _softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1]), (c <= r) & (r - c < window)) @ v


def _sliding_window_args(dtype=F16, d=128):
  rng = np.random.default_rng(0)
  q, k, v = (_randn(rng, (1, 2, 100, d), dtype, 4.0) for _ in range(3))
  return q, k, v, jnp.int32(37)


def test_sliding_window_over_a_sequence_of_100_at_head_dim_128():
  """MG401 "q's dimension 2 (100) must then be a multiple of 8" at the copy of Q."""
  q, k, v, w = _sliding_window_args()
  got = sliding_window(q, k, v, w, interpret=True)
  np.testing.assert_allclose(_f64(got), _sliding_window_ref(q, k, v, 37), atol=2e-2)
  _export(sliding_window, *(S(a.shape, a.dtype) for a in (q, k, v, w)))


def test_a_copy_of_ragged_rows_is_one_tma_a_row_of_tiles_with_one_expected_byte_count():
  """The Q tile (64 rows, 128 columns of float16) of a sequence of 100: eight TMA copies of 8 rows, the
  barrier told once of all 16384 bytes; the K and V loads of the pipelined loop likewise."""
  q, k, v, w = _sliding_window_args()
  text = sliding_window.mlir(*(S(a.shape, a.dtype) for a in (q, k, v, w)))
  loads = re.findall(r"nvvm\.cp\.async\.bulk\.tensor\.shared\.cluster\.global .*box\[([^\]]*)\]", text)
  assert len(loads) % 8 == 0 and len(loads) >= 24, len(loads)
  expects = re.findall(r"nvvm\.mbarrier\.arrive\.expect_tx %\w+, %c(\d+)_i32", text)
  assert expects and set(expects) == {str(64 * 128 * 2)}
  assert len(loads) == 8 * len(expects)


# ---------------------------------------------------------------- varlen: cu_seqlens offsets, (tokens, heads, dim)
def _varlen_grid(q, k, v, cu_q, cu_k, *, max_q):
  return (ml.cdiv(max_q, 64), q.shape[1], cu_q.shape[0] - 1)


@mg.mgpu_kernel(out_shape=lambda q, k, v, cu_q, cu_k, *, max_q: q, grid=_varlen_grid)
def varlen(q, k, v, cu_q, cu_k, o, *, max_q: ml.constexpr):
  BQ, BK = 64, 64
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  d = q.shape[2]
  q0, k0 = cu_q[b], cu_k[b]
  q_len, k_len = cu_q[b + 1] - q0, cu_k[b + 1] - k0
  if i * BQ < q_len:
    q_s, k_s, v_s = ml.smem((BQ, d)), ml.smem((BK, d)), ml.smem((BK, d))
    ml.copy(q.at[ml.ds(q0 + i * BQ, BQ), h, :], q_s)
    m = ml.full((BQ,), -1e30, jnp.float32)
    l = ml.zeros((BQ,), jnp.float32)
    acc = ml.zeros((BQ, d), jnp.float32)
    for j in ml.range(ml.cdiv(k_len, BK), stages=2):
      ml.copy(k.at[ml.ds(k0 + j * BK, BK), h, :], k_s)
      ml.copy(v.at[ml.ds(k0 + j * BK, BK), h, :], v_s)
      s = ml.dot(q_s, k_s.T) * (LOG2E / math.sqrt(d))
      s = ml.where((j * BK + ml.arange(BK))[None, :] < k_len, s, -1e30)
      m_new = ml.maximum(m, ml.max(s, axis=1))
      p = ml.exp2(s - m_new[:, None])
      alpha = ml.exp2(m - m_new)
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
      m = m_new
    rows = i * BQ + ml.arange(BQ)
    o.at[ml.ds(q0 + i * BQ, BQ), h, :].store((acc / l[:, None]).astype(o.dtype), mask=rows[:, None] < q_len)


def _varlen_args():
  rng = np.random.default_rng(1)
  cu_q, cu_k = np.array([0, 13, 100, 157], np.int32), np.array([0, 70, 75, 210], np.int32)
  q, k = _randn(rng, (157, 2, 128), F16, 4.0), _randn(rng, (210, 2, 128), F16, 4.0)
  v = _randn(rng, (210, 2, 128), F16)
  return q, k, v, jnp.asarray(cu_q), jnp.asarray(cu_k)


def _varlen_ref(q, k, v, cu_q, cu_k):
  q, k, v = _f64(q), _f64(k), _f64(v)
  out = np.zeros_like(q)
  for b in range(len(cu_q) - 1):
    (a, e), (ka, ke) = cu_q[b:b + 2], cu_k[b:b + 2]
    qq, kk, vv = (x.transpose(1, 0, 2) for x in (q[a:e], k[ka:ke], v[ka:ke]))
    out[a:e] = (_softmax(qq @ kk.swapaxes(-1, -2) / math.sqrt(q.shape[-1])) @ vv).transpose(1, 0, 2)
  return out


def test_varlen_attention_loads_q_k_and_v_from_cu_seqlens_offsets_at_head_dim_128():
  """MG401 "the start of q.at[ml.ds(q0 + i * BQ, BQ), h, :] in dimension 0 is not provably a multiple of 8"."""
  args = _varlen_args()
  got = varlen(*args, max_q=87, interpret=True)
  np.testing.assert_allclose(_f64(got), _varlen_ref(*map(np.asarray, args)), atol=2e-2)
  _export(varlen, *(S(a.shape, a.dtype) for a in args), max_q=87)


# ---------------------------------------------------------------- cross-attention, ragged q and kv, O stored by TMA
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (ml.cdiv(q.shape[1], 64), q.shape[2], q.shape[0]))
def cross(q, k, v, o):
  BQ, BK = 64, 64
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  nk, d = k.shape[1], q.shape[3]
  q_s, k_s, v_s = ml.smem((BQ, d)), ml.smem((BK, d)), ml.smem((BK, d))
  ml.copy(q.at[b, ml.ds(i * BQ, BQ), h, :], q_s)
  m = ml.full((BQ,), -float("inf"), jnp.float32)
  l = ml.zeros((BQ,), jnp.float32)
  acc = ml.zeros((BQ, d), jnp.float32)
  for j in ml.range(ml.cdiv(nk, BK), stages=3):
    ml.copy(k.at[b, ml.ds(j * BK, BK), h, :], k_s)
    ml.copy(v.at[b, ml.ds(j * BK, BK), h, :], v_s)
    s = ml.dot(q_s, k_s.T) * (d ** -0.5)
    s = ml.where((j * BK + ml.arange(BK))[None, :] < nk, s, -float("inf"))
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(v.dtype), v_s, acc * alpha[:, None])
    m = m_new
  q_s[...] = (acc / l[:, None]).astype(o.dtype)      # O out through Q's buffer: rows past 77 are dropped
  ml.copy(q_s, o.at[b, ml.ds(i * BQ, BQ), h, :])


def _cross_ref(q, k, v):
  q, k, v = (_f64(a).transpose(0, 2, 1, 3) for a in (q, k, v))
  return (_softmax(q @ k.swapaxes(-1, -2) / math.sqrt(q.shape[-1])) @ v).transpose(0, 2, 1, 3)


def _cross_args(d, dtype):
  rng = np.random.default_rng(d)
  q, k = _randn(rng, (2, 77, 2, d), dtype, 4.0), _randn(rng, (2, 150, 2, d), dtype, 4.0)
  return q, k, _randn(rng, (2, 150, 2, d), dtype)


@pytest.mark.parametrize("d, dtype", [(96, BF16), (256, F16)])
def test_cross_attention_of_77_queries_and_150_keys_stores_o_by_tma(d, dtype):
  """Q, K and V of 77 and 150 rows (MG401 before), and O's TMA store, whose rows past the end are dropped."""
  q, k, v = _cross_args(d, dtype)
  got = cross(q, k, v, interpret=True)
  np.testing.assert_allclose(_f64(got), _cross_ref(q, k, v), atol=2e-2 if dtype == F16 else 5e-2)
  _export(cross, *(S(a.shape, a.dtype) for a in (q, k, v)))


# ---------------------------------------------------------------- varlen, causal, an early return, warp-specialised
def _vc_grid(q, k, v, cu, *, max_len):
  return (ml.cdiv(max_len, 64), q.shape[1], cu.shape[0] - 1)


@mg.mgpu_kernel(out_shape=lambda q, k, v, cu, *, max_len: q, grid=_vc_grid)
def varlen_causal_ws(q, k, v, cu, o, *, max_len: ml.constexpr):
  BQ, BK = 64, 64
  i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  d = q.shape[2]
  s0 = cu[b]
  n = cu[b + 1] - s0
  if i * BQ >= n:                # a query tile past its sequence: the rest of the kernel is this if's else
    return
  q_s, k_s, v_s = ml.smem((BQ, d)), ml.smem((BK, d)), ml.smem((BK, d))
  ml.copy(q.at[ml.ds(s0 + i * BQ, BQ), h], q_s)
  m = ml.full((BQ,), -1e30, jnp.float32)
  l = ml.zeros((BQ,), jnp.float32)
  acc = ml.zeros((BQ, d), jnp.float32)
  rows = i * BQ + ml.arange(BQ)
  for j in ml.range(ml.minimum(i + 1, ml.cdiv(n, BK)), stages=2, warp_specialize=True):
    ml.copy(k.at[ml.ds(s0 + j * BK, BK), h], k_s)
    ml.copy(v.at[ml.ds(s0 + j * BK, BK), h], v_s)
    cols = j * BK + ml.arange(BK)
    s = ml.dot(q_s, k_s.T) * (LOG2E / math.sqrt(d))
    s = ml.where((cols[None, :] <= rows[:, None]) & (cols[None, :] < n), s, -1e30)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp2(s - m_new[:, None])
    alpha = ml.exp2(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  o.at[ml.ds(s0 + i * BQ, BQ), h].store((acc / l[:, None]).astype(o.dtype), mask=rows[:, None] < n)


def _varlen_causal_args():
  rng = np.random.default_rng(11)
  q, k, v = (_randn(rng, (200, 2, 128), BF16, 3.0) for _ in range(3))
  return q, k, v, jnp.asarray([0, 5, 133, 200], jnp.int32)


def _varlen_causal_ref(q, k, v, cu):
  q, k, v = _f64(q), _f64(k), _f64(v)
  out = np.zeros_like(q)
  for b in range(len(cu) - 1):
    a, e = cu[b:b + 2]
    qq, kk, vv = (x[a:e].transpose(1, 0, 2) for x in (q, k, v))
    r, c = np.arange(e - a)[:, None], np.arange(e - a)[None, :]
    out[a:e] = (_softmax(qq @ kk.swapaxes(-1, -2) / math.sqrt(q.shape[-1]), c <= r) @ vv).transpose(1, 0, 2)
  return out


def test_warp_specialised_varlen_attention_allocates_after_an_early_return():
  """MG503 "k_s is allocated after the return in the if at line ...": the compiler now moves the ml.smem(...)
  under the return's if to the top, as the hint did (and its sequences start at cu_seqlens offsets, 5 and 133)."""
  args = _varlen_causal_args()
  got = varlen_causal_ws(*args, max_len=128, interpret=True)
  np.testing.assert_allclose(_f64(got), _varlen_causal_ref(*map(np.asarray, args)), atol=5e-2)
  _export(varlen_causal_ws, *(S(a.shape, a.dtype) for a in args), max_len=128)


# ---------------------------------------------------------------- the same class outside attention
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F16),
                grid=lambda a, b: (ml.cdiv(a.shape[0], 64), b.shape[1] // 128))
def matmul_ragged_m(a, b, c):
  """A (300, 256) @ (256, 256): A's and C's 300 rows are no whole tiles; C's last tile is cut by its TMA store."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s, c_s = ml.smem((64, 128)), ml.smem((128, 128)), ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for kk in ml.range(ml.cdiv(a.shape[1], 128), stages=2):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(kk * 128, 128)], a_s)
    ml.copy(b.at[ml.ds(kk * 128, 128), ml.ds(j * 128, 128)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s[...] = acc.astype(F16)
  ml.copy(c_s, c.at[ml.ds(i * 64, 64), ml.ds(j * 128, 128)])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[2]), F32), grid=lambda x, w: (x.shape[0] // 64,))
def conv_rows(x, w, out):
  """A 1-D convolution of 3 taps as three dots: the taps' windows start at i * 64 - 1 and i * 64 + 1 (zeros
  read before the first row and past the last)."""
  i = ml.program_id(0)
  a_s, b_s = ml.smem((64, x.shape[1])), ml.smem((x.shape[1], w.shape[2]))
  acc = ml.zeros((64, w.shape[2]), F32)
  for t in ml.static_range(3):
    ml.copy(x.at[ml.ds(i * 64 + t - 1, 64), :], a_s)
    ml.copy(w.at[t], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out.at[ml.ds(i * 64, 64)][...] = acc


def _class_args():
  rng = np.random.default_rng(5)
  a, b = _randn(rng, (300, 256), F16), _randn(rng, (256, 256), F16)
  x, w = _randn(rng, (128, 128), BF16), _randn(rng, (3, 128, 64), BF16, 0.1)
  return a, b, x, w


def _conv_ref(x, w):
  xp = np.pad(_f64(x), ((1, 1), (0, 0)))
  return sum(xp[t:t + x.shape[0]] @ _f64(w)[t] for t in range(3))


def test_a_matmul_of_300_rows_loads_a_and_stores_c_by_rows_of_tiles():
  """(A convolution's shifted taps, the same class, are test_probe25b's conv_rows; on the GPU below.)"""
  a, b, x, w = _class_args()
  np.testing.assert_allclose(_f64(matmul_ragged_m(a, b, interpret=True)), _f64(a) @ _f64(b), rtol=1e-2, atol=5e-2)
  _export(matmul_ragged_m, S(a.shape, F16), S(b.shape, F16))


# ---------------------------------------------------------------- Triton's transposes of K
def _trans_attention(form):
  @mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (ml.cdiv(q.shape[0], 64),))
  def trans_attention(q, k, v, o):
    i = ml.program_id(0)
    n, d = k.shape[0], q.shape[1]
    q_s, k_s, v_s = ml.smem((64, d)), ml.smem((64, d)), ml.smem((64, d))
    ml.copy(q.at[ml.ds(i * 64, 64)], q_s)
    m = ml.full((64,), -1e30, jnp.float32)
    l = ml.zeros((64,), jnp.float32)
    acc = ml.zeros((64, d), jnp.float32)
    for start_n in ml.range(0, n, 64, stages=2):
      ml.copy(k.at[ml.ds(start_n, 64)], k_s)
      ml.copy(v.at[ml.ds(start_n, 64)], v_s)
      if form == "trans":
        s = ml.dot(q_s, ml.trans(k_s))               # Triton's tl.dot(q, tl.trans(k))
      elif form == "trans_dims":
        s = ml.dot(q_s[...], ml.trans(k_s, 1, 0))
      else:
        s = ml.dot(q_s, ml.transpose(k_s))
      s = ml.where((start_n + ml.arange(64))[None, :] < n, s * (1 / math.sqrt(d)), -1e30)
      m_new = ml.maximum(m, ml.max(s, 1))
      p = ml.exp(s - m_new[:, None])
      alpha = ml.exp(m - m_new)
      l = l * alpha + ml.sum(p, 1)
      acc = acc * alpha[:, None] + ml.dot(p.astype(v.dtype), v_s)
      m = m_new
    rows = i * 64 + ml.arange(64)
    o.at[ml.ds(i * 64, 64)].store((acc / l[:, None]).astype(o.dtype), mask=rows[:, None] < q.shape[0])
  return trans_attention


TRANS_FORMS = {f: _trans_attention(f) for f in ("trans", "trans_dims", "transpose")}


def _trans_args():
  rng = np.random.default_rng(7)
  return _randn(rng, (100, 64), F16, 4.0), _randn(rng, (130, 64), F16, 4.0), _randn(rng, (130, 64), F16)


@pytest.mark.parametrize("form", sorted(TRANS_FORMS))
def test_ml_trans_and_ml_transpose_of_an_smem_buffer_are_its_view_for_ml_dot(form):
  """`ml.trans` was MG002 ("ml has no attribute 'trans'") and `ml.transpose(k_s)` MG003 ("works on register
  values"), both hinting k_s.T; they are that view (a register tensor's, the transpose through SMEM)."""
  q, k, v = _trans_args()
  want = _softmax(_f64(q) @ _f64(k).T / 8.0) @ _f64(v)
  np.testing.assert_allclose(_f64(TRANS_FORMS[form](q, k, v, interpret=True)), want, atol=2e-2)
  _export(TRANS_FORMS[form], *(S(a.shape, a.dtype) for a in (q, k, v)))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=(1,))
def trans_registers(x, o):
  o[...] = ml.trans(x[...] * 2.0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype), grid=(1,))
def trans_gmem(x, o):
  o[...] = ml.trans(x)


def test_ml_trans_of_registers_transposes_and_of_an_input_says_what_to_read():
  x = _randn(np.random.default_rng(8), (64, 128), F32)
  np.testing.assert_array_equal(_f64(trans_registers(x, interpret=True)), _f64(x).T * 2)
  expect(trans_gmem, [S((64, 128), F32)], mg.KernelTypeError, "ml.trans(x)",
         "ml.trans works on register values, got x (GMEM ref)", hint="read it into registers first: x[...]")


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_probe46c_kernels_match_the_float64_references():
  q, k, v, w = _sliding_window_args()
  np.testing.assert_allclose(_f64(sliding_window(q, k, v, w)), _sliding_window_ref(q, k, v, 37), atol=2e-2)
  q, k, v, w = _sliding_window_args(BF16, 256)
  np.testing.assert_allclose(_f64(sliding_window(q, k, v, w)), _sliding_window_ref(q, k, v, 37), atol=6e-2)
  args = _varlen_args()
  np.testing.assert_allclose(_f64(varlen(*args, max_q=87)), _varlen_ref(*map(np.asarray, args)), atol=2e-2)
  for d, dtype in [(96, BF16), (128, F16), (256, F16)]:
    q, k, v = _cross_args(d, dtype)
    np.testing.assert_allclose(_f64(cross(q, k, v)), _cross_ref(q, k, v), atol=2e-2 if dtype == F16 else 5e-2)
  a, b, x, w = _class_args()
  np.testing.assert_allclose(_f64(matmul_ragged_m(a, b)), _f64(a) @ _f64(b), rtol=1e-2, atol=5e-2)
  args = _varlen_causal_args()
  got = varlen_causal_ws(*args, max_len=128)
  np.testing.assert_allclose(_f64(got), _varlen_causal_ref(*map(np.asarray, args)), atol=5e-2)
  q, k, v = _trans_args()
  want = _softmax(_f64(q) @ _f64(k).T / 8.0) @ _f64(v)
  for kernel in TRANS_FORMS.values():
    np.testing.assert_allclose(_f64(kernel(q, k, v)), want, atol=2e-2)
  np.testing.assert_allclose(_f64(conv_rows(x, w)), _conv_ref(x, w), rtol=1e-2, atol=2e-2)
