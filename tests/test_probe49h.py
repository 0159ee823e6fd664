"""Probe 49h: Triton's tutorials and Pallas's kernels ported unchanged, what probes 48g and 48h left.

(1) `tl.store(ptr, v)` converts `v` to the pointer's element type (a float32 result stored into a bfloat16 output,
which every ported kernel relies on): it was MG102. `ml.store` / `ref.store` convert now; `ref[...] = v` keeps
Pallas's rule (MG102). (2) Triton's one-meaning functions `tl.clamp`, `tl.fdiv`, `tl.div_rn` (div.rn.f32),
`tl.umulhi` (mul.hi.u32; libdevice's signed `mulhi`), `tl.swizzle2d` were MG002 hints: they compute now
(frontend/ops/triton_ops.py). (3) Block pointers, `tl.make_block_ptr` / `tl.advance` / `tl.load(ptr,
boundary_check=(0, 1), padding_option="zero")` / `tl.store(ptr, v, boundary_check=...)`, the block-pointer matmul
and the fused attention tutorials, were MG002: they are windows of the base ref (frontend/ops/block_ptrs.py), a
K^T pointer a transposed read, carried by loops as their offsets. (4) `Out.type.element_ty`."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as tl
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16 = jnp.float32, jnp.float16, jnp.bfloat16


def _rnd(shape, seed, dtype=F32):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(dtype)


def _f32(a):
  return np.asarray(a, np.float32)


def _close(got, want, tol):
  np.testing.assert_allclose(_f32(got), _f32(want), rtol=tol, atol=tol)


def _export(kernel, *args, **kw):
  specs = [S(np.shape(a), a.dtype) for a in args]
  kernel.check(*specs, **kw)
  text = str(jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs).mlir_module())
  assert "mosaic_gpu" in text
  return text


# ---------------------------------------------------------------- (1) tl.store converts to the pointer's type
@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (tl.cdiv(x.shape[0], 1024),))
def add_kernel(x_ptr, y_ptr, output_ptr):
  """Triton's vector add over bfloat16 arrays, computed in float32 and stored as it is."""
  offsets = tl.program_id(axis=0) * 1024 + tl.arange(0, 1024)
  mask = offsets < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offsets], mask=mask).to(tl.float32)
  y = tl.load(y_ptr.at[offsets], mask=mask).to(tl.float32)
  tl.store(output_ptr.at[offsets], x + y, mask=mask)


@mg.mgpu_kernel(out_shape=lambda X, W, B: (X, S((X.shape[0],), F16)), grid=lambda X, W, B: (X.shape[0],))
def layer_norm_fwd(X, W, B, Y, Rstd):
  """The layer-norm tutorial's forward in one block: float32 statistics, a float16 output and rstd."""
  N = X.shape[1]
  row = tl.program_id(0)
  cols = tl.arange(0, 1024)
  mask = cols < N
  x = tl.load(X.at[row, cols], mask=mask, other=0.).to(tl.float32)
  mean = tl.sum(x, axis=0) / N
  xc = tl.where(mask, x - mean, 0.)
  rstd = 1 / tl.sqrt(tl.sum(xc * xc, axis=0) / N + 1e-5)
  tl.store(Rstd.at[row], rstd)                                      # a float32 scalar into float16
  w = tl.load(W.at[cols], mask=mask)
  b = tl.load(B.at[cols], mask=mask)
  Y.at[row, cols].store(xc * rstd * w + b, mask=mask)                # float32 into float16, the method


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, BF16), grid=(1,))
def assigned_of_another_dtype(x_ref, o_ref):
  o_ref[...] = x_ref[...] * 2.0


def test_tl_store_converts_to_the_pointers_element_type():
  x, y = _rnd((3000,), 1, BF16), _rnd((3000,), 2, BF16)
  _close(add_kernel(x, y, interpret=True), (_f32(x) + _f32(y)).astype(jnp.bfloat16), 1e-2)
  _export(add_kernel, x, y)
  X, W, B = _rnd((6, 700), 3, F16), _rnd((700,), 4, F16), _rnd((700,), 5, F16)
  y, rstd = layer_norm_fwd(X, W, B, interpret=True)
  x32 = _f32(X)
  mu, var = x32.mean(1, keepdims=True), x32.var(1, keepdims=True)
  _close(y, (x32 - mu) / np.sqrt(var + 1e-5) * _f32(W) + _f32(B), 2e-2)
  _close(rstd, 1 / np.sqrt(var[:, 0] + 1e-5), 2e-2)
  _export(layer_norm_fwd, X, W, B)
  # Pallas's `o_ref[...] = v` keeps its rule: no conversion, MG102 with the conversion written out
  expect(assigned_of_another_dtype, [S((128,), F32)], mg.StoreDtypeError, "o_ref[...] =",
         "cannot store x_ref[...] * 2.0 (float32) into o_ref (GMEM, bfloat16): no implicit conversion",
         hint="convert explicitly: o_ref[...] = (x_ref[...] * 2.0).astype(jnp.bfloat16)")


# ---------------------------------------------------------------- (2) clamp, fdiv, div_rn, umulhi, swizzle2d
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x), grid=lambda x, y: (tl.cdiv(x.shape[0], 256),))
def divisions(x_ptr, y_ptr, o_ptr, p_ptr):
  offs = tl.program_id(0) * 256 + tl.arange(0, 256)
  m = offs < x_ptr.shape[0]
  x = tl.load(x_ptr.at[offs], mask=m, other=1.0)
  y = tl.load(y_ptr.at[offs], mask=m, other=1.0)
  tl.store(o_ptr.at[offs], tl.div_rn(x, y), mask=m)
  tl.store(p_ptr.at[offs], tl.clamp(tl.fdiv(x, y), -0.5, 0.5), mask=m)


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x), grid=(1,))
def high_words(x_ptr, y_ptr, u_ptr, s_ptr):
  x, y = x_ptr[...], y_ptr[...]
  u_ptr[...] = tl.umulhi(x, y)
  s_ptr[...] = tl.extra.cuda.libdevice.mulhi(x, y)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8, x.shape[1] // 128))
def swizzled_copy(x_ptr, o_ptr):
  pid_m, pid_n = tl.swizzle2d(tl.program_id(0), tl.program_id(1), tl.num_programs(0), tl.num_programs(1), 4)
  rows = pid_m * 8 + tl.arange(0, 8)
  cols = pid_n * 128 + tl.arange(0, 128)
  tl.store(o_ptr.at[rows[:, None], cols[None, :]], tl.load(x_ptr.at[rows[:, None], cols[None, :]]) + pid_m)


def _hi(x, y, signed):
  wide = np.int64 if signed else np.uint64
  cast = (lambda a: np.asarray(a).astype(wide)) if signed else (lambda a: np.asarray(a).view(np.uint32).astype(wide))
  return (cast(x) * cast(y)) >> 32


def _swizzle2d(i, j, size_i, size_j, size_g):
  ij = i * size_j + j
  group = ij // (size_g * size_j)
  off_i = group * size_g
  g = min(size_i - off_i, size_g)
  ij = ij % (size_g * size_j)
  return off_i + ij % g, ij // g


def test_triton_functions_of_one_meaning_compute():
  x, y = _rnd((1000,), 6), _rnd((1000,), 7) + 3.0
  q, c = divisions(x, y, interpret=True)
  np.testing.assert_array_equal(_f32(q), _f32(x) / _f32(y))
  np.testing.assert_array_equal(_f32(c), np.clip(_f32(x) / _f32(y), -0.5, 0.5))
  assert "div.rn.f32" in _export(divisions, x, y)
  r = np.random.default_rng(8)
  a, b = (r.integers(-2 ** 31, 2 ** 31, 256, dtype=np.int64).astype(np.int32) for _ in range(2))
  u, s = high_words(jnp.asarray(a), jnp.asarray(b), interpret=True)
  np.testing.assert_array_equal(np.asarray(u), _hi(a, b, False).astype(np.uint32).view(np.int32))   # Triton's umulhi
  np.testing.assert_array_equal(np.asarray(s), _hi(a, b, True).astype(np.int32))                     # libdevice's mulhi
  text = _export(high_words, jnp.asarray(a), jnp.asarray(b))
  assert "mul.hi.u32" in text and "mul.hi.s32" in text
  x = _rnd((56, 384), 9)
  want = np.empty((56, 384), np.float32)
  for i in range(7):
    for j in range(3):
      i2, j2 = _swizzle2d(i, j, 7, 3, 4)
      want[i2 * 8:(i2 + 1) * 8, j2 * 128:(j2 + 1) * 128] = _f32(x)[i2 * 8:(i2 + 1) * 8, j2 * 128:(j2 + 1) * 128] + i2
  np.testing.assert_array_equal(_f32(swizzled_copy(x, interpret=True)), want)
  _export(swizzled_copy, x)


@pytest.mark.gpu
def test_triton_functions_of_one_meaning_on_the_gpu():
  x, y = _rnd((1000,), 10), _rnd((1000,), 11) + 3.0
  q, c = divisions(x, y)
  np.testing.assert_array_equal(_f32(q), _f32(x) / _f32(y))              # div.rn: the correctly rounded quotient
  _close(c, np.clip(_f32(x) / _f32(y), -0.5, 0.5), 1e-6)
  r = np.random.default_rng(12)
  a, b = (r.integers(-2 ** 31, 2 ** 31, 256, dtype=np.int64).astype(np.int32) for _ in range(2))
  u, s = high_words(jnp.asarray(a), jnp.asarray(b))
  np.testing.assert_array_equal(np.asarray(u), _hi(a, b, False).astype(np.uint32).view(np.int32))
  np.testing.assert_array_equal(np.asarray(s), _hi(a, b, True).astype(np.int32))
  x = _rnd((56, 384), 13)
  np.testing.assert_array_equal(_f32(swizzled_copy(x)), _f32(swizzled_copy(x, interpret=True)))


# ---------------------------------------------------------------- (3) block pointers
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype),
                grid=lambda a, b: (tl.cdiv(a.shape[0], 64) * tl.cdiv(b.shape[1], 64),))
def block_ptr_matmul(a_ptr, b_ptr, c_ptr, BLOCK_M: tl.constexpr = 64, BLOCK_N: tl.constexpr = 64,
                     BLOCK_K: tl.constexpr = 32, GROUP_M: tl.constexpr = 4):
  """Triton's block-pointer matmul tutorial, GROUP_M ordering, any M, N, K."""
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  pid = tl.program_id(0)
  num_pid_m, num_pid_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
  group_id = pid // (GROUP_M * num_pid_n)
  first_pid_m = group_id * GROUP_M
  group_size_m = min(num_pid_m - first_pid_m, GROUP_M)
  pid_m = first_pid_m + (pid % group_size_m)
  pid_n = (pid % (GROUP_M * num_pid_n)) // group_size_m
  a_block_ptr = tl.make_block_ptr(base=a_ptr, shape=(M, K), strides=(K, 1), offsets=(pid_m * BLOCK_M, 0),
                                  block_shape=(BLOCK_M, BLOCK_K), order=(1, 0))
  b_block_ptr = tl.make_block_ptr(base=b_ptr, shape=(K, N), strides=(N, 1), offsets=(0, pid_n * BLOCK_N),
                                  block_shape=(BLOCK_K, BLOCK_N), order=(1, 0))
  accumulator = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
  for k in range(0, K, BLOCK_K):
    a = tl.load(a_block_ptr, boundary_check=(0, 1), padding_option="zero")
    b = tl.load(b_block_ptr, boundary_check=(0, 1), padding_option="zero")
    accumulator += tl.dot(a, b)
    a_block_ptr = tl.advance(a_block_ptr, (0, BLOCK_K))
    b_block_ptr = tl.advance(b_block_ptr, (BLOCK_K, 0))
  c_block_ptr = tl.make_block_ptr(base=c_ptr, shape=(M, N), strides=(N, 1), offsets=(pid_m * BLOCK_M, pid_n * BLOCK_N),
                                  block_shape=(BLOCK_M, BLOCK_N), order=(1, 0))
  tl.store(c_block_ptr, accumulator, boundary_check=(0, 1))          # (converted to c's dtype, as tl.store does)


@tl.inline
def _attn_fwd_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, BLOCK_M: tl.constexpr,
                    BLOCK_N: tl.constexpr, STAGE: tl.constexpr, offs_m, offs_n, N_CTX: tl.constexpr):
  if STAGE == 1:
    lo, hi = 0, start_m * BLOCK_M
  elif STAGE == 2:
    lo, hi = start_m * BLOCK_M, (start_m + 1) * BLOCK_M
    lo = tl.multiple_of(lo, BLOCK_M)
  else:
    lo, hi = 0, N_CTX
  K_block_ptr = tl.advance(K_block_ptr, (0, lo))
  V_block_ptr = tl.advance(V_block_ptr, (lo, 0))
  for start_n in range(lo, hi, BLOCK_N):
    start_n = tl.multiple_of(start_n, BLOCK_N)
    k = tl.load(K_block_ptr)
    qk = tl.dot(q, k)
    if STAGE == 2:
      mask = offs_m[:, None] >= (start_n + offs_n[None, :])
      qk = qk * qk_scale + tl.where(mask, 0, -1.0e6)
      m_ij = tl.maximum(m_i, tl.max(qk, 1))
      qk -= m_ij[:, None]
    else:
      m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
      qk = qk * qk_scale - m_ij[:, None]
    p = tl.math.exp2(qk)
    alpha = tl.math.exp2(m_i - m_ij)
    l_i = l_i * alpha + tl.sum(p, 1)
    acc = acc * alpha[:, None]
    acc = tl.dot(p.to(tl.float16), tl.load(V_block_ptr), acc)
    m_i = m_ij
    V_block_ptr = tl.advance(V_block_ptr, (BLOCK_N, 0))
    K_block_ptr = tl.advance(K_block_ptr, (0, BLOCK_N))
  return acc, l_i, m_i


@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: (q, S(q.shape[:3], F32)),
                grid=lambda q, k, v, **kw: (q.shape[2] // 64, q.shape[0] * q.shape[1]))
def attn_fwd(Q, K, V, Out, M, *, sm_scale: tl.constexpr = 0.125, STAGE: tl.constexpr = 1):
  """The fused-attention tutorial's forward (Triton 3.0, block pointers; K^T by strides (1, HEAD_DIM))."""
  BLOCK_M, BLOCK_N = 64, 64
  Z, H, N_CTX, HEAD_DIM = Q.shape
  start_m, off_hz = tl.program_id(0), tl.program_id(1)
  off_z, off_h = off_hz // H, off_hz % H
  Q_block_ptr = tl.make_block_ptr(base=Q.at[off_z, off_h], shape=(N_CTX, HEAD_DIM), strides=(HEAD_DIM, 1),
                                  offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
  V_block_ptr = tl.make_block_ptr(base=V.at[off_z, off_h], shape=(N_CTX, HEAD_DIM), strides=(HEAD_DIM, 1),
                                  offsets=(0, 0), block_shape=(BLOCK_N, HEAD_DIM), order=(1, 0))
  K_block_ptr = tl.make_block_ptr(base=K.at[off_z, off_h], shape=(HEAD_DIM, N_CTX), strides=(1, HEAD_DIM),
                                  offsets=(0, 0), block_shape=(HEAD_DIM, BLOCK_N), order=(0, 1))
  O_block_ptr = tl.make_block_ptr(base=Out.at[off_z, off_h], shape=(N_CTX, HEAD_DIM), strides=(HEAD_DIM, 1),
                                  offsets=(start_m * BLOCK_M, 0), block_shape=(BLOCK_M, HEAD_DIM), order=(1, 0))
  offs_m = start_m * BLOCK_M + tl.arange(0, BLOCK_M)
  offs_n = tl.arange(0, BLOCK_N)
  m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
  l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
  acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
  qk_scale = sm_scale * 1.44269504
  q = tl.load(Q_block_ptr)
  if STAGE & 1:
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, BLOCK_M, BLOCK_N,
                                    4 - STAGE, offs_m, offs_n, N_CTX)
  if STAGE & 2:
    acc, l_i, m_i = _attn_fwd_inner(acc, l_i, m_i, q, K_block_ptr, V_block_ptr, start_m, qk_scale, BLOCK_M, BLOCK_N,
                                    2, offs_m, offs_n, N_CTX)
  m_i += tl.math.log2(l_i)
  tl.store(M.at[off_z, off_h, offs_m], m_i)
  tl.store(O_block_ptr, (acc / l_i[:, None]).to(Out.type.element_ty))


def _attention(q, k, v, causal):
  s = np.einsum("zhqd,zhkd->zhqk", _f32(q), _f32(k)) * 0.125
  if causal:
    s = np.where(np.tril(np.ones(s.shape[-2:], bool)), s, -1e6)
  m = s.max(-1, keepdims=True)
  p = np.exp(s - m)
  lse = (m[..., 0] + np.log(p.sum(-1))) * 1.44269504
  return np.einsum("zhqk,zhkd->zhqd", p / p.sum(-1, keepdims=True), _f32(v)), lse


def test_block_pointer_matmul_and_attention_tutorials():
  for (m, k, n), seed in (((256, 128, 192), 14), ((200, 100, 136), 15)):
    a, b = _rnd((m, k), seed, F16), _rnd((k, n), seed + 1, F16)
    _close(block_ptr_matmul(a, b, interpret=True), _f32(a) @ _f32(b), 5e-2)
  ir = block_ptr_matmul.typed_ir(S((200, 100), F16), S((100, 136), F16))
  assert "maskedload" in ir and "gather" not in ir
  _export(block_ptr_matmul, a, b)
  q, k, v = (_rnd((1, 2, 128, 64), 16 + i, F16) for i in range(3))
  for stage, causal in ((1, False), (3, True)):
    o, lse = attn_fwd(q, k, v, interpret=True, STAGE=stage)
    want_o, want_lse = _attention(q, k, v, causal)
    _close(o, want_o, 3e-2)
    _close(lse, want_lse, 3e-2)
  _export(attn_fwd, q, k, v, STAGE=3)
  # the K^T pointer's tile is read (64 keys, 64 dims), stored once and passed to the tensor cores as its view .T
  ir = attn_fwd.typed_ir(*[S(q.shape, F16)] * 3, STAGE=1)
  assert "transpose=True" in ir and ir.count("dot a=") == 2


@pytest.mark.gpu
def test_block_pointer_tutorials_on_the_gpu():
  a, b = _rnd((200, 100), 20, F16), _rnd((100, 136), 21, F16)
  _close(block_ptr_matmul(a, b), _f32(a) @ _f32(b), 5e-2)
  q, k, v = (_rnd((1, 2, 256, 64), 22 + i, F16) for i in range(3))
  for stage, causal in ((1, False), (3, True)):
    o, lse = attn_fwd(q, k, v, STAGE=stage)
    want_o, want_lse = _attention(q, k, v, causal)
    _close(o, want_o, 3e-2)
    _close(lse, want_lse, 3e-2)


# ---------------------------------------------------------------- block pointers: other forms of the class
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0]), x.dtype),
                grid=lambda x: (tl.cdiv(x.shape[0], 64), tl.cdiv(x.shape[1], 64)))
def transpose_by_pointer(x_ptr, o_ptr):
  """A transpose written through a transposed block pointer of the output (strides (1, M))."""
  M, N = x_ptr.shape
  pm, pn = tl.program_id(0), tl.program_id(1)
  xb = tl.make_block_ptr(x_ptr, (M, N), (N, 1), (pm * 64, pn * 64), (64, 64), (1, 0))
  ob = tl.make_block_ptr(o_ptr, (M, N), (1, M), (pm * 64, pn * 64), (64, 64), (0, 1))
  tl.store(ob, tl.load(xb, boundary_check=(0, 1)), boundary_check=(0, 1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def row_max_nan_padded(x_ptr, o_ptr):
  r = tl.program_id(0)
  xb = tl.make_block_ptr(x_ptr.at[r], (x_ptr.shape[1],), (1,), (0,), (1024,), (0,))
  v = tl.load(xb, boundary_check=(0,), padding_option="nan")
  tl.store(o_ptr.at[r], tl.max(tl.where(v != v, -float("inf"), v), 0))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 64), F32), grid=lambda x: (x.shape[0] // 64,))
def strip_sums_pipelined(x_ptr, o_ptr):
  """A block pointer advanced in a pipelined loop (tl.range's num_stages), bfloat16 tiles of a ragged width."""
  M, N = x_ptr.shape
  xb = tl.make_block_ptr(base=x_ptr, shape=(M, N), strides=(N, 1), offsets=(tl.program_id(0) * 64, 0),
                         block_shape=(64, 64), order=(1, 0))
  acc = tl.zeros((64, 64), tl.float32)
  for k in tl.range(0, tl.cdiv(N, 64), num_stages=3):
    acc += tl.load(xb, boundary_check=(1,)).to(tl.float32)
    xb = tl.advance(xb, (0, 64))
  tl.store(tl.make_block_ptr(o_ptr, (M, 64), (64, 1), (tl.program_id(0) * 64, 0), (64, 64), (1, 0)), acc)


@mg.mgpu_kernel(out_shape=lambda x, n: S((64,), F32), grid=(1,))
def advanced_under_if(x_ptr, n, o_ptr):
  xb = tl.make_block_ptr(x_ptr, (x_ptr.shape[0],), (1,), (0,), (64,), (0,))
  if n[0] > 0:
    xb = tl.advance(xb, (64,))
  tl.store(o_ptr.at[tl.arange(0, 64)], tl.load(xb))


def test_block_pointers_transposed_nan_padded_pipelined_and_branched():
  x = _rnd((100, 72), 30)
  np.testing.assert_array_equal(_f32(transpose_by_pointer(x, interpret=True)), _f32(x).T)
  _export(transpose_by_pointer, x)
  x = _rnd((5, 700), 31)
  np.testing.assert_array_equal(_f32(row_max_nan_padded(x, interpret=True)), _f32(x).max(1))
  x = _rnd((128, 300), 32, BF16)
  padded = np.pad(_f32(x), ((0, 0), (0, 20)))
  _close(strip_sums_pipelined(x, interpret=True), padded.reshape(128, 5, 64).sum(1), 1e-4)
  _export(strip_sums_pipelined, x)
  x = _rnd((128,), 33)
  for n, want in ((1, _f32(x)[64:]), (0, _f32(x)[:64])):
    np.testing.assert_array_equal(_f32(advanced_under_if(x, jnp.array([n], jnp.int32), interpret=True)), want)


@pytest.mark.gpu
def test_block_pointer_forms_on_the_gpu():
  x = _rnd((100, 72), 34)
  np.testing.assert_array_equal(_f32(transpose_by_pointer(x)), _f32(x).T)
  x = _rnd((128, 300), 35, BF16)
  _close(strip_sums_pipelined(x), strip_sums_pipelined(x, interpret=True), 1e-4)


# ---------------------------------------------------------------- block pointers: mistakes stay errors
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def strides_of_another_layout(x_ptr, o_ptr):
  M, N = x_ptr.shape
  xb = tl.make_block_ptr(x_ptr, (M, N), (N + 1, 1), (0, 0), (64, 64), (1, 0))
  o_ptr[...] = tl.load(xb)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def boundary_check_of_a_ref(x_ptr, o_ptr):
  o_ptr[...] = tl.load(x_ptr, boundary_check=(0,))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def advance_of_a_ref(x_ptr, o_ptr):
  o_ptr[...] = tl.load(tl.advance(x_ptr, (0, 64)))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def pointer_past_the_array(x_ptr, o_ptr):
  xb = tl.make_block_ptr(x_ptr, (128, 64), (64, 1), (0, 0), (64, 64), (1, 0))
  o_ptr[...] = tl.load(xb, boundary_check=(0, 1))


def test_block_pointer_mistakes_are_reported_at_the_users_line():
  spec = [S((64, 64), F32)]
  expect(strides_of_another_layout, spec, mg.KernelTypeError, "tl.make_block_ptr(",
         "tl.make_block_ptr's strides (65, 1) are not the strides of x_ptr's axes (a GMEM ref, row-major strides"
         " (64, 1)): a ref has no other layout",
         hint="strides=(64, 1) walk x_ptr's axes in order; strides=(1, 64) walk its transpose; or index the ref"
              " itself: x.at[tl.ds(r, BLOCK_M), tl.ds(c, BLOCK_K)] (masked with tl.load(..., mask=..., other=0)"
              " where it may run past the end)")
  expect(boundary_check_of_a_ref, spec, mg.KernelTypeError, "tl.load(",
         "boundary_check= is for block pointers (tl.make_block_ptr); a ref's window is masked instead",
         hint="tl.load(x.at[tl.ds(r, BM), :], mask=rows[:, None] < n, other=0) for a ref's window, or make a block"
              " pointer: tl.make_block_ptr(base=x, ...)")
  expect(advance_of_a_ref, spec, mg.KernelTypeError, "tl.advance(",
         "tl.advance takes a block pointer (tl.make_block_ptr), got a GMEM ref")
  expect(pointer_past_the_array, spec, mg.IndexOutOfBoundsError, "tl.make_block_ptr(",
         "tl.make_block_ptr's shape[0] is 128, past x_ptr's axis 0 of 64 elements: a boundary check against it"
         " would read past the array",
         hint="bound the pointer by the array's size: shape[0] = x_ptr.shape[0]")


# ---------------------------------------------------------------- (5) lax.scan with stacked ys (Pallas)
@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=lambda a, b: (a.shape[1] // 128,))
def linear_recurrence(a_ref, b_ref, o_ref):
  """h_t = a_t * h_{t-1} + b_t along the 16 rows of a column block, every h_t kept (lax.scan's stacked ys)."""
  j = tl.program_id(0)
  a = a_ref[:, tl.ds(j * 128, 128)]
  b = b_ref[:, tl.ds(j * 128, 128)]
  _, hs = jax.lax.scan(lambda h, ab: (ab[0] * h + ab[1],) * 2, jnp.zeros((128,), jnp.float32), (a, b))
  o_ref[:, tl.ds(j * 128, 128)] = hs


@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((x.shape[1],), F32)), grid=(1,))
def reversed_running_stats(x_ref, s_ref, m_ref, c_ref):
  def step(carry, x):
    s, m = carry
    s, m = s + x, jnp.maximum(m, x)
    return (s, m), (s, m)
  init = (jnp.zeros((x_ref.shape[1],), F32), jnp.full((x_ref.shape[1],), -jnp.inf, F32))
  (s, _), (ss, ms) = jax.lax.scan(step, init, x_ref[...], reverse=True)
  s_ref[...] = ss
  m_ref[...] = ms
  c_ref[...] = s


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def scan_of_indices(x_ref, o_ref):
  def body(c, i):
    return c * 0.5 + x_ref[i], c
  _, ys = jax.lax.scan(body, 0.0, jnp.arange(16))       # scalars stacked into a (16,) vector
  o_ref[...] = ys


def test_lax_scan_of_a_static_length_stacks_its_ys():
  a, b = _rnd((16, 256), 40) * 0.5, _rnd((16, 256), 41)
  h, want = np.zeros(256, np.float32), []
  for t in range(16):
    h = _f32(a)[t] * h + _f32(b)[t]
    want.append(h)
  _close(linear_recurrence(a, b, interpret=True), np.stack(want), 1e-5)
  _export(linear_recurrence, a, b)
  x = _rnd((8, 128), 42)
  ss, ms, s = reversed_running_stats(x, interpret=True)
  _close(ss, np.cumsum(_f32(x)[::-1], 0)[::-1], 1e-5)
  _close(ms, np.maximum.accumulate(_f32(x)[::-1], 0)[::-1], 0)
  _close(s, _f32(x).sum(0), 1e-5)
  x = _rnd((16,), 43)
  c, want = np.float32(0), []
  for i in range(16):
    want.append(c)
    c = c * np.float32(0.5) + _f32(x)[i]
  _close(scan_of_indices(x, interpret=True), np.array(want), 1e-6)
  _export(scan_of_indices, x)


@pytest.mark.gpu
def test_lax_scan_on_the_gpu():
  a, b = _rnd((16, 256), 44) * 0.5, _rnd((16, 256), 45)
  _close(linear_recurrence(a, b), linear_recurrence(a, b, interpret=True), 1e-5)
  x = _rnd((16,), 46)
  _close(scan_of_indices(x), scan_of_indices(x, interpret=True), 1e-6)


# ---------------------------------------------------------------- Triton 3's tensor descriptors
@tl.inline
def _desc_inner(acc, l_i, m_i, q, desc_k, desc_v, offset_y, qk_scale, N_CTX: tl.constexpr, BLOCK_N: tl.constexpr):
  offsetk_y = offset_y
  for start_n in tl.range(0, N_CTX, BLOCK_N):
    k = desc_k.load([offsetk_y, 0]).T
    qk = tl.dot(q, k)
    m_ij = tl.maximum(m_i, tl.max(qk, 1) * qk_scale)
    p = tl.math.exp2(qk * qk_scale - m_ij[:, None])
    alpha = tl.math.exp2(m_i - m_ij)
    acc = tl.dot(p.to(tl.float16), desc_v.load([offsetk_y, 0]), acc * alpha[:, None])
    l_i = l_i * alpha + tl.sum(p, 1)
    m_i = m_ij
    offsetk_y += BLOCK_N
  return acc, l_i, m_i


@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: q, grid=lambda q, k, v, N_CTX, H: (N_CTX // 64, q.shape[0] // N_CTX))
def attn_descriptors(Q, K, V, Out, *, N_CTX: tl.constexpr, H: tl.constexpr):
  """The fused-attention tutorial of Triton 3.3 (descriptors over (Z * H * N_CTX, HEAD_DIM) arrays)."""
  BLOCK_M, BLOCK_N = 64, 64
  y_dim, HEAD_DIM = Q.shape
  desc_q = tl.make_tensor_descriptor(Q, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
  desc_k = tl.make_tensor_descriptor(K, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
  desc_v = tl.make_tensor_descriptor(V, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_N, HEAD_DIM])
  desc_o = tl.make_tensor_descriptor(Out, shape=[y_dim, HEAD_DIM], strides=[HEAD_DIM, 1], block_shape=[BLOCK_M, HEAD_DIM])
  start_m, off_hz = tl.program_id(0), tl.program_id(1)
  offset_y = (off_hz // H) * (N_CTX * H) + (off_hz % H) * N_CTX
  qo_offset_y = offset_y + start_m * BLOCK_M
  m_i = tl.zeros([BLOCK_M], dtype=tl.float32) - float("inf")
  l_i = tl.zeros([BLOCK_M], dtype=tl.float32) + 1.0
  acc = tl.zeros([BLOCK_M, HEAD_DIM], dtype=tl.float32)
  q = desc_q.load([qo_offset_y, 0])
  acc, l_i, m_i = _desc_inner(acc, l_i, m_i, q, desc_k, desc_v, offset_y, 0.125 * 1.44269504, N_CTX, BLOCK_N)
  desc_o.store([qo_offset_y, 0], acc / l_i[:, None])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def descriptor_load_of_a_ref(x_ptr, o_ptr):
  desc = tl.make_tensor_descriptor(x_ptr, shape=x_ptr.shape, strides=[1, 1], block_shape=[64, 64])
  o_ptr[...] = desc.load([0, 0])


def test_tensor_descriptor_attention():
  q, k, v = (_rnd((1, 2, 128, 64), 50 + i, F16) for i in range(3))
  o = attn_descriptors(*(a.reshape(-1, 64) for a in (q, k, v)), interpret=True, N_CTX=128, H=2)
  _close(np.asarray(o).reshape(q.shape), _attention(q, k, v, False)[0], 3e-2)
  _export(attn_descriptors, *(a.reshape(-1, 64) for a in (q, k, v)), N_CTX=128, H=2)
  expect(descriptor_load_of_a_ref, [S((64, 64), F32)], mg.KernelTypeError, "tl.make_tensor_descriptor(",
         "tl.make_tensor_descriptor's strides (1, 1) are not the strides of x_ptr's axes (a GMEM ref, row-major strides"
         " (64, 1)): a ref has no other layout")


@pytest.mark.gpu
def test_tensor_descriptor_attention_on_the_gpu():
  q, k, v = (_rnd((1, 2, 256, 64), 53 + i, F16) for i in range(3))
  o = attn_descriptors(*(a.reshape(-1, 64) for a in (q, k, v)), N_CTX=256, H=2)
  _close(np.asarray(o).reshape(q.shape), _attention(q, k, v, False)[0], 3e-2)


# ---------------------------------------------------------------- the persistent matmul tutorial: tl.range(flatten=)
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), a.dtype), grid=(3,))
def matmul_persistent(a_ptr, b_ptr, c_ptr, BM: tl.constexpr = 64, BN: tl.constexpr = 64, BK: tl.constexpr = 64):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  num_pid_n = tl.cdiv(N, BN)
  for tile_id in tl.range(tl.program_id(0), tl.cdiv(M, BM) * num_pid_n, 3, flatten=True):
    pid_m, pid_n = tile_id // num_pid_n, tile_id % num_pid_n
    offs_am = pid_m * BM + tl.arange(0, BM)
    offs_bn = pid_n * BN + tl.arange(0, BN)
    accumulator = tl.zeros((BM, BN), dtype=tl.float32)
    for ki in tl.range(0, tl.cdiv(K, BK), loop_unroll_factor=1, disallow_acc_multi_buffer=False):
      offs_k = ki * BK + tl.arange(0, BK)
      a = tl.load(a_ptr.at[offs_am[:, None], offs_k[None, :]], mask=offs_k[None, :] < K, other=0.0)
      b = tl.load(b_ptr.at[offs_k[:, None], offs_bn[None, :]], mask=offs_k[:, None] < K, other=0.0)
      accumulator = tl.dot(a, b, accumulator)
    c_mask = (offs_am[:, None] < M) & (offs_bn[None, :] < N)
    tl.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], accumulator, mask=c_mask)


def test_persistent_matmul_tutorial_drops_tl_ranges_tuning_keywords():
  a, b = _rnd((128, 96), 60, F16), _rnd((96, 192), 61, F16)
  _close(matmul_persistent(a, b, interpret=True), _f32(a) @ _f32(b), 5e-2)
  _export(matmul_persistent, a, b)
