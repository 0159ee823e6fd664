"""Probe 53f (state-space and linear-attention kernels: Mamba, flash-linear-attention). (1) A column statistic
(a reduction along axis 0) used as a row statistic, `b_a[:, None]`, and also aligned with a tile's columns by
NumPy's rule, as fla's forward substitution of DeltaNet's UT transform writes it, was MG204 ("likely a slip"); the
aligned use is the vector's own orientation, so the written-out one reads a copy through SMEM. (2) `jnp.eye`,
`jnp.identity` and `jnp.tri` in a kernel were MG003; they are the index vectors compared. (3) A float32 product
of register tiles computed in registers in a loop's body (`S = S + k[sl].T @ v[sl]`, linear attention's state of
float32 inputs) was MG402: the relayout pass's scratches, allocated at the kernel's start, lived through the
whole loop; a compiler scratch used in one loop's body lives from its first use there to its last."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export, rnd

F16, F32 = jnp.float16, jnp.float32


# ---------------------------------------------------------------- (1) a column statistic used both ways
@mg.mgpu_kernel(out_shape=lambda k, beta: jax.ShapeDtypeStruct((k.shape[0], 64), jnp.float32),
                grid=lambda k, beta: (k.shape[0] // 64,))
def ut_transform(k, beta, a_out):
  """fla's fwd_prepare_wy_repr: T = (I + tril(diag(beta) K K^T, -1))^-1 of a 64-row chunk, by forward substitution
  of its rows (each row a column statistic of the tile, used per row in the next product)."""
  c = ml.program_id(0)
  o_i = ml.arange(64)
  b_k = ml.load(k.at[c * 64 + o_i[:, None], ml.arange(k.shape[1])[None, :]])
  b_beta = ml.load(beta.at[c * 64 + o_i])
  b_kb = (b_k * b_beta[:, None]).to(b_k.dtype)
  b_A = ml.dot(b_kb, ml.trans(b_k))
  b_A = -ml.where(o_i[:, None] > o_i[None, :], b_A, 0)
  for i in range(1, 64):
    mask = o_i == i
    b_a = ml.sum(ml.where(mask[:, None], b_A, 0), 0)
    b_a = b_a + ml.sum(b_a[:, None] * b_A, 0) * (o_i < i)
    b_A = ml.where(mask[:, None], b_a, b_A)
  b_A += o_i[:, None] == o_i[None, :]
  ml.store(a_out.at[c * 64 + o_i[:, None], o_i[None, :]], b_A)


def _ut_ref(k, beta):
  k, beta = (np.asarray(x, np.float64) for x in (k, beta))
  out = []
  for c in range(k.shape[0] // 64):
    kk, bb = k[c * 64:(c + 1) * 64], beta[c * 64:(c + 1) * 64]
    out.append(np.linalg.inv(np.eye(64) + np.tril((bb[:, None] * kk) @ kk.T, -1)))
  return np.concatenate(out)


def _ut_inputs(seed=0, d=64, dtype=np.float16):
  return rnd((128, d), seed, dtype) * np.asarray(0.1, dtype), np.abs(rnd((128,), seed + 1, dtype))


@mg.mgpu_kernel(out_shape=lambda x: x)
def column_sums_both_ways(x, o):
  v = x[...]
  s = ml.sum(v, axis=0)               # one value per column
  o[...] = v / s + s[:, None]         # aligned with the columns, and the same values down the rows


@mg.mgpu_kernel(out_shape=lambda x, w: x)
def vector_matrix_steps(x, w, o):
  """x <- tanh(x @ W) + x, the product a column statistic reused per row the next step, and aligned to add."""
  W = w[...]
  v = x[...]
  for _ in range(4):
    v = ml.tanh(ml.sum(v[:, None] * W, axis=0)) + v
  o[...] = v


def test_fla_forward_substitution_computes_the_inverse():
  for d, dtype in ((64, np.float16), (32, np.float32)):
    k, beta = _ut_inputs(1, d, dtype)
    np.testing.assert_allclose(np.asarray(ut_transform(k, beta, interpret=True)), _ut_ref(k, beta),
                               rtol=2e-2, atol=2e-2)
    export(ut_transform, k, beta)


def test_a_column_statistic_meets_tiles_both_ways():
  x = np.abs(rnd((64, 64), 2)) + 0.5
  s = x.astype(np.float64).sum(0)
  np.testing.assert_allclose(np.asarray(column_sums_both_ways(x, interpret=True)), x / s + s[:, None], rtol=1e-5)
  export(column_sums_both_ways, x)
  x, w = rnd((64,), 3), rnd((64, 64), 4) * np.float32(0.1)
  v = x.astype(np.float64)
  for _ in range(4):
    v = np.tanh(v @ w) + v
  np.testing.assert_allclose(np.asarray(vector_matrix_steps(x, w, interpret=True)), v, rtol=1e-4, atol=1e-5)
  export(vector_matrix_steps, x, w)


# ---------------------------------------------------------------- (2) jnp.eye, jnp.identity, jnp.tri
@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x))
def eyes(x, o1, o2, o3, o4):
  v = x[...]
  o1[...] = v + jnp.eye(64, dtype=jnp.float32)
  o2[...] = v * jnp.tri(64, k=-1)
  o3[...] = jnp.where(jnp.eye(64, k=1, dtype=bool), v, 0.0)
  o4[...] = v - 2 * jnp.identity(64)


@mg.mgpu_kernel(out_shape=lambda x: x)
def eye_rectangle(x, o):
  o[...] = x[...] + jnp.eye(32, 64, 3, dtype=jnp.bfloat16)


def test_jnp_eye_identity_and_tri_are_index_comparisons():
  x = rnd((64, 64), 5)
  got = eyes(x, interpret=True)
  want = (x + np.eye(64), x * np.tri(64, k=-1), np.where(np.eye(64, k=1, dtype=bool), x, 0), x - 2 * np.identity(64))
  for g, w in zip(got, want):
    assert g.dtype == jnp.float32
    np.testing.assert_array_equal(np.asarray(g), w.astype(np.float32))
  export(eyes, x)
  xb = jnp.asarray(rnd((32, 64), 6), jnp.bfloat16)
  got = eye_rectangle(xb, interpret=True)
  assert got.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(xb + jnp.eye(32, 64, 3, dtype=jnp.bfloat16),
                                                                        np.float32))


# ---------------------------------------------------------------- (3) float32 products in a loop's body
@mg.mgpu_kernel(out_shape=lambda k, v: jax.ShapeDtypeStruct((k.shape[1], v.shape[1]), jnp.float32))
def state_sum(k, v, o):
  """Linear attention's final state, sum over chunks of K^T V, of float32 inputs."""
  S = jnp.zeros((k.shape[1], v.shape[1]), jnp.float32)
  for c in range(k.shape[0] // 64):
    S = S + k[ml.ds(c * 64, 64), :].T @ v[ml.ds(c * 64, 64), :]
  o[...] = S


@mg.mgpu_kernel(out_shape=lambda q, k, v: v)
def linear_attention_f32(q, k, v, o):
  """Chunked causal linear attention, jnp-style, float32: the state (d_k, d_v) carried across chunks."""
  S = jnp.zeros((q.shape[1], v.shape[1]), jnp.float32)
  for c in range(q.shape[0] // 64):
    sl = ml.ds(c * 64, 64)
    o[sl, :] = jnp.tril(q[sl, :] @ k[sl, :].T) @ v[sl, :] + q[sl, :] @ S
    S = S + k[sl, :].T @ v[sl, :]


def test_float32_products_in_a_loop_share_their_scratches():
  k, v = rnd((128, 64), 7), rnd((128, 32), 8)
  kk, vv = k.astype(np.float64), v.astype(np.float64)
  np.testing.assert_allclose(np.asarray(state_sum(k, v, interpret=True)), kk.T @ vv, rtol=1e-4, atol=1e-4)
  export(state_sum, k, v)
  q, k, v = rnd((128, 16), 9) * np.float32(0.3), rnd((128, 16), 10) * np.float32(0.3), rnd((128, 32), 11)
  qq, kk, vv = (x.astype(np.float64) for x in (q, k, v))
  want = (np.tril(qq @ kk.T)) @ vv        # (q @ k.T of 64 by 64 is ml.dot's, read as TF32)
  np.testing.assert_allclose(np.asarray(linear_attention_f32(q, k, v, interpret=True)), want, rtol=1e-2, atol=3e-2)
  export(linear_attention_f32, q, k, v)


# ---------------------------------------------------------------- (4) a block pointer's dtype
@mg.mgpu_kernel(out_shape=lambda q, k, v: v, grid=lambda q, k, v: (v.shape[2] // 64, q.shape[0]))
def fused_chunk_linear_attention(q, k, v, o, *, BT: ml.constexpr = 64):
  """flash-linear-attention's fused_chunk_linear_attn_fwd_kernel: block pointers (K^T by its strides), advanced
  a chunk a trip, the output converted to `p_o.dtype.element_ty`."""
  i_v, i_bh = ml.program_id(0), ml.program_id(1)
  T, K, V = q.shape[1], q.shape[2], v.shape[2]
  o_i = ml.arange(BT)
  m_s = o_i[:, None] >= o_i[None, :]
  b_h = ml.zeros((K, 64), dtype=jnp.float32)
  p_q = ml.make_block_ptr(q.at[i_bh], (T, K), (K, 1), (0, 0), (BT, K), (1, 0))
  p_k = ml.make_block_ptr(k.at[i_bh], (K, T), (1, K), (0, 0), (K, BT), (0, 1))
  p_v = ml.make_block_ptr(v.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (BT, 64), (1, 0))
  p_o = ml.make_block_ptr(o.at[i_bh], (T, V), (V, 1), (0, i_v * 64), (BT, 64), (1, 0))
  for _ in range(0, ml.cdiv(T, BT)):
    b_k = ml.load(p_k, boundary_check=(0, 1))
    b_v = ml.load(p_v, boundary_check=(0, 1))
    b_q = (ml.load(p_q, boundary_check=(0, 1)) * K ** -0.5).to(b_k.dtype)
    b_s = ml.where(m_s, ml.dot(b_q, b_k), 0)
    b_o = ml.dot(b_s.to(b_q.dtype), b_v) + ml.dot(b_q, b_h.to(b_q.dtype))
    b_h = b_h + ml.dot(b_k, b_v)
    ml.store(p_o, b_o.to(p_o.dtype.element_ty), boundary_check=(0, 1))
    p_q, p_k = ml.advance(p_q, (BT, 0)), ml.advance(p_k, (0, BT))
    p_v, p_o = ml.advance(p_v, (BT, 0)), ml.advance(p_o, (BT, 0))


@mg.mgpu_kernel(out_shape=lambda k, v: jax.ShapeDtypeStruct((k.shape[0] // 64, k.shape[1], v.shape[1]), jnp.bfloat16))
def chunk_states(k, v, h):
  """fla's chunk_fwd_h: the state before each chunk stored through a block pointer, `p_h.type.element_ty`."""
  b_h = ml.zeros((k.shape[1], v.shape[1]), dtype=jnp.float32)
  for i_t in range(k.shape[0] // 64):
    p_h = ml.make_block_ptr(h.at[i_t], (k.shape[1], v.shape[1]), (v.shape[1], 1), (0, 0), (k.shape[1], v.shape[1]),
                            (1, 0))
    ml.store(p_h, b_h.to(p_h.type.element_ty))
    b_h += ml.dot(k[ml.ds(i_t * 64, 64), :].T, v[ml.ds(i_t * 64, 64), :])


def _causal_linear(q, k, v):
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  return np.stack([((q[i] @ k[i].T) * np.tril(np.ones((q.shape[1],) * 2))) @ v[i] for i in range(q.shape[0])])


def test_block_pointers_have_their_element_dtype():
  q, k, v = (rnd((2, 100, 64), s, np.float16) * np.float16(0.5) for s in (22, 23, 24))
  got = fused_chunk_linear_attention(q, k, v, interpret=True)
  assert got.dtype == jnp.float16
  np.testing.assert_allclose(np.asarray(got, np.float32), _causal_linear(q * np.float16(64 ** -0.5), k, v),
                             rtol=3e-2, atol=3e-2)
  export(fused_chunk_linear_attention, q, k, v)
  k, v = rnd((128, 64), 25, np.float16), rnd((128, 32), 26, np.float16)
  got = chunk_states(k, v, interpret=True)
  assert got.dtype == jnp.bfloat16
  kk, vv = k.astype(np.float64), v.astype(np.float64)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.stack([np.zeros((64, 32)), kk[:64].T @ vv[:64]]),
                             rtol=2e-2, atol=5e-2)
  export(chunk_states, k, v)


# ---------------------------------------------------------------- (5) shifts by a range loop's index
@mg.mgpu_kernel(out_shape=lambda x, w, b: x)
def conv_by_rolls(x, w, b, o):
  """Mamba's causal conv1d (width 4) over a (time, channels) tile, its taps as jnp.roll shifts along time."""
  v = x[...]
  t = jnp.arange(v.shape[0])[:, None]
  acc = b[...][None, :] + v * w[:, 3][None, :]
  for s in range(1, 4):
    acc = acc + jnp.where(t >= s, jnp.roll(v, s, axis=0), 0.0) * w[:, 3 - s][None, :]
  o[...] = acc * jax.nn.sigmoid(acc)


@mg.mgpu_kernel(out_shape=lambda x, w, b: x)
def conv_by_pads(x, w, b, o):
  v = x[...]
  acc = jnp.zeros(v.shape, jnp.float32) + b[...]
  for k in range(4):
    acc = acc + jnp.pad(v, ((3 - k, 0), (0, 0)))[:v.shape[0]] * w[:, k]
  o[...] = jax.nn.silu(acc)


@mg.mgpu_kernel(out_shape=lambda x: x)
def banded(x, o):
  v = x[...]
  acc = jnp.zeros_like(v)
  for s in range(3):
    acc = acc + jnp.tril(jnp.triu(v, -s), -s) * (s + 1)
  o[...] = acc


def _conv_ref(x, w, b):
  x, w, b = (np.asarray(a, np.float64) for a in (x, w, b))
  xp = np.concatenate([np.zeros((3, x.shape[1])), x])
  y = sum(xp[k:k + x.shape[0]] * w[:, k] for k in range(4)) + b
  return y / (1 + np.exp(-y))


def test_shifts_by_a_range_loops_index_unroll_the_loop():
  x, w, b = rnd((16, 64), 30), rnd((64, 4), 31), rnd((64,), 32)
  for kernel in (conv_by_rolls, conv_by_pads):
    np.testing.assert_allclose(np.asarray(kernel(x, w, b, interpret=True)), _conv_ref(x, w, b), rtol=1e-5, atol=1e-5)
    export(kernel, x, w, b)
  x = rnd((64, 64), 33)
  want = sum(np.tril(np.triu(x, -s), -s) * (s + 1) for s in range(3))
  np.testing.assert_allclose(np.asarray(banded(x, interpret=True)), want, rtol=1e-6)
  export(banded, x)


# ---------------------------------------------------------------- (6) long lax.scans that stack their ys
@mg.mgpu_kernel(out_shape=lambda a, b: a)
def recurrence_ys(a, b, o):
  def step(h, ab):
    at, bt = ab
    h = at * h + bt
    return h, h
  _, ys = jax.lax.scan(step, jnp.zeros((128,), jnp.float32), (a[...], b[...]))
  o[...] = ys


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct(a.shape, jnp.bfloat16))
def recurrence_ys_reversed(a, b, o):
  _, ys = jax.lax.scan(lambda h, ab: (ab[0] * h + ab[1], (ab[0] * h + ab[1]).astype(jnp.bfloat16)),
                       jnp.zeros((128,), jnp.float32), (a[...], b[...]), reverse=True)
  o[...] = ys


@mg.mgpu_kernel(out_shape=lambda x, dt, A, B, C: (x, jax.ShapeDtypeStruct((x.shape[0],), jnp.float32)))
def selective_scan_ys(x, dt, A, B, C, y_ref, s_ref):
  """Mamba's selective scan as jax.lax writes it: ys of each step (a channel vector and a scalar) stacked."""
  a = A[...]

  def step(h, t):
    d = jax.nn.softplus(dt[t, :])
    h = jnp.exp(d[:, None] * a) * h + (d * x[t, :])[:, None] * B[t, :][None, :]
    return h, (jnp.sum(h * C[t, :][None, :], axis=1), jnp.sum(h))
  _, (ys, ss) = jax.lax.scan(step, jnp.zeros(a.shape, jnp.float32), jnp.arange(x.shape[0]))
  y_ref[...] = ys
  s_ref[...] = ss


def _recurrence(a, b, reverse=False):
  a, b = (np.asarray(v, np.float64)[::-1 if reverse else 1] for v in (a, b))
  h, out = np.zeros(a.shape[1]), np.zeros(a.shape)
  for t in range(a.shape[0]):
    h = a[t] * h + b[t]
    out[t] = h
  return out[::-1 if reverse else 1]


def _selective_ys(x, dt, A, B, C):
  h, y, s = np.zeros(A.shape), np.zeros(x.shape), np.zeros(x.shape[0])
  for t in range(x.shape[0]):
    d = np.log1p(np.exp(dt[t].astype(np.float64)))
    h = np.exp(d[:, None] * A) * h + (d * x[t])[:, None] * B[t][None]
    y[t], s[t] = (h * C[t][None]).sum(1), h.sum()
  return y, s


def test_a_long_scan_stacks_its_ys_through_smem():
  a, b = rnd((100, 128), 37) * np.float32(0.5), rnd((100, 128), 38)
  np.testing.assert_allclose(np.asarray(recurrence_ys(a, b, interpret=True)), _recurrence(a, b), rtol=1e-5, atol=1e-6)
  export(recurrence_ys, a, b)
  a, b = a[:80], b[:80]
  got = recurrence_ys_reversed(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), _recurrence(a, b, reverse=True), rtol=1e-2, atol=1e-2)
  export(recurrence_ys_reversed, a, b)
  args = rnd((72, 64), 39), rnd((72, 64), 40), -np.abs(rnd((64, 16), 41)), rnd((72, 16), 42), rnd((72, 16), 43)
  y, s = selective_scan_ys(*args, interpret=True)
  want_y, want_s = _selective_ys(*args)
  np.testing.assert_allclose(np.asarray(y), want_y, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(np.asarray(s), want_s, rtol=1e-4, atol=1e-3)
  export(selective_scan_ys, *args)


# ---------------------------------------------------------------- (7) slice() of run-time bounds
@mg.mgpu_kernel(out_shape=lambda x: x)
def chunked_cumsum(x, o):
  """A cumulative sum over time by chunks of 32 rows, each chunk's window a slice object of the chunk index."""
  carry = jnp.zeros((x.shape[1],), jnp.float32)
  for c in range(x.shape[0] // 32):
    rows = slice(c * 32, (c + 1) * 32)
    part = jnp.cumsum(x[rows, :], axis=0) + carry[None, :]
    idx = (rows, slice(None))
    o[idx] = part
    carry = part[31]


def test_slice_objects_of_run_time_bounds_are_windows():
  x = rnd((96, 128), 51)
  np.testing.assert_allclose(np.asarray(chunked_cumsum(x, interpret=True)), np.cumsum(x.astype(np.float64), 0),
                             rtol=1e-5, atol=1e-4)
  export(chunked_cumsum, x)


# ---------------------------------------------------------------- (8) jax.scipy.linalg.solve_triangular
@mg.mgpu_kernel(out_shape=lambda k, beta: jax.ShapeDtypeStruct((k.shape[0], 64), jnp.float32),
                grid=lambda k, beta: (k.shape[0] // 64,))
def ut_transform_jnp(k, beta, o):
  """DeltaNet's UT transform as JAX code writes it: (I + tril(diag(beta) K K^T, -1))^-1 by a triangular solve."""
  r = ml.ds(ml.program_id(0) * 64, 64)
  kk = k[r, :]
  A = jnp.tril(jnp.dot((kk * beta[r][:, None]).astype(kk.dtype), kk.T, preferred_element_type=jnp.float32), -1)
  o[r, :] = jax.scipy.linalg.solve_triangular(jnp.eye(64) + A, jnp.eye(64), lower=True)


@mg.mgpu_kernel(out_shape=lambda a, b: (b, b))
def triangular_solves(a, b, o1, o2):
  o1[...] = jax.scipy.linalg.solve_triangular(a[...], b[...], lower=False)
  o2[...] = jax.scipy.linalg.solve_triangular(a[...], b[...], trans=1, lower=True, unit_diagonal=True)


def test_solve_triangular_is_a_substitution():
  k, beta = _ut_inputs(52)
  np.testing.assert_allclose(np.asarray(ut_transform_jnp(k, beta, interpret=True)), _ut_ref(k, beta),
                             rtol=2e-2, atol=2e-2)
  export(ut_transform_jnp, k, beta)
  a, b = rnd((64, 64), 53) * np.float32(0.05) + 2 * np.eye(64, dtype=np.float32), rnd((64, 32), 54)
  up, lo = np.triu(a.astype(np.float64)), np.tril(a.astype(np.float64), -1) + np.eye(64)
  got = triangular_solves(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(got[0]), np.linalg.solve(up, b), rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(np.asarray(got[1]), np.linalg.solve(lo.T, b), rtol=1e-4, atol=1e-5)
  export(triangular_solves, a, b)


# ---------------------------------------------------------------- (9) einsums of tiles scaled by vectors
@mg.mgpu_kernel(out_shape=lambda x, a, B, C: (jax.ShapeDtypeStruct(x.shape, jnp.float32),
                                              jax.ShapeDtypeStruct((B.shape[1], x.shape[1]), jnp.float32)))
def ssd_chunk_einsums(x, a, B, C, y, st):
  """Mamba-2's SSD of one chunk as its minimal JAX code writes it: the chunk's output and its state, the decay
  a vector operand of the state's einsum."""
  xx, BB, CC = x[...], B[...], C[...]
  cs = jnp.cumsum(a[...])
  Lm = jnp.exp(jnp.where(jnp.tril(jnp.ones((64, 64), bool)), cs[:, None] - cs[None, :], -jnp.inf))
  CB = jnp.einsum('ln,sn->ls', CC, BB, preferred_element_type=jnp.float32)
  y[...] = jnp.einsum('ls,sp->lp', (Lm * CB).astype(xx.dtype), xx, preferred_element_type=jnp.float32)
  st[...] = jnp.einsum('ln,l,lp->np', BB.astype(jnp.float32), jnp.exp(cs[-1] - cs), xx.astype(jnp.float32))


def _ssd_chunk(x, a, B, C):
  x, a, B, C = (np.asarray(v, np.float64) for v in (x, a, B, C))
  cs = np.cumsum(a)
  y = (np.tril(np.exp(cs[:, None] - cs[None, :])) * (C @ B.T)) @ x
  return y, (B * np.exp(cs[-1] - cs)[:, None]).T @ x


def test_einsum_vectors_fold_into_their_tiles():
  args = (rnd((64, 64), 56, np.float16), (-np.abs(rnd((64,), 57)) * 0.1).astype(np.float32),
          rnd((64, 64), 58, np.float16) * np.float16(0.3), rnd((64, 64), 59, np.float16) * np.float16(0.3))
  for g, w in zip(ssd_chunk_einsums(*args, interpret=True), _ssd_chunk(*args)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=3e-2, atol=3e-2)
  export(ssd_chunk_einsums, *args)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_state_space_kernels_match_interpret_mode():
  k, beta = _ut_inputs(12)
  np.testing.assert_allclose(np.asarray(jax.jit(ut_transform)(k, beta)), _ut_ref(k, beta), rtol=2e-2, atol=2e-2)
  x = np.abs(rnd((64, 64), 13)) + 0.5
  np.testing.assert_allclose(np.asarray(jax.jit(column_sums_both_ways)(x)),
                             np.asarray(column_sums_both_ways(x, interpret=True)), rtol=1e-5)
  x, w = rnd((64,), 14), rnd((64, 64), 15) * np.float32(0.1)
  np.testing.assert_allclose(np.asarray(jax.jit(vector_matrix_steps)(x, w)),
                             np.asarray(vector_matrix_steps(x, w, interpret=True)), rtol=1e-4, atol=1e-5)
  x = rnd((64, 64), 16)
  for g, w in zip(jax.jit(eyes)(x), eyes(x, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  k, v = rnd((128, 64), 17), rnd((128, 32), 18)
  np.testing.assert_allclose(np.asarray(jax.jit(state_sum)(k, v)), np.asarray(state_sum(k, v, interpret=True)),
                             rtol=1e-4, atol=1e-4)
  q, k, v = rnd((128, 16), 19) * np.float32(0.3), rnd((128, 16), 20) * np.float32(0.3), rnd((128, 32), 21)
  np.testing.assert_allclose(np.asarray(jax.jit(linear_attention_f32)(q, k, v)),
                             np.asarray(linear_attention_f32(q, k, v, interpret=True)), rtol=1e-3, atol=1e-3)
  q, k, v = (rnd((2, 100, 64), s, np.float16) * np.float16(0.5) for s in (27, 28, 29))
  np.testing.assert_allclose(np.asarray(jax.jit(fused_chunk_linear_attention)(q, k, v), np.float32),
                             np.asarray(fused_chunk_linear_attention(q, k, v, interpret=True), np.float32),
                             rtol=2e-2, atol=2e-2)
  x, w, b = rnd((16, 64), 34), rnd((64, 4), 35), rnd((64,), 36)
  for kernel in (conv_by_rolls, conv_by_pads):
    np.testing.assert_allclose(np.asarray(jax.jit(kernel)(x, w, b)), np.asarray(kernel(x, w, b, interpret=True)),
                               rtol=1e-5, atol=1e-5)
  a, b = rnd((100, 128), 44) * np.float32(0.5), rnd((100, 128), 45)
  np.testing.assert_allclose(np.asarray(jax.jit(recurrence_ys)(a, b)), _recurrence(a, b), rtol=1e-5, atol=1e-5)
  args = rnd((72, 64), 46), rnd((72, 64), 47), -np.abs(rnd((64, 16), 48)), rnd((72, 16), 49), rnd((72, 16), 50)
  for g, w in zip(jax.jit(selective_scan_ys)(*args), _selective_ys(*args)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=1e-4, atol=1e-3)
  k, beta = _ut_inputs(55)
  np.testing.assert_allclose(np.asarray(jax.jit(ut_transform_jnp)(k, beta)), _ut_ref(k, beta), rtol=2e-2, atol=2e-2)
  args = (rnd((64, 64), 60, np.float16), (-np.abs(rnd((64,), 61)) * 0.1).astype(np.float32),
          rnd((64, 64), 62, np.float16) * np.float16(0.3), rnd((64, 64), 63, np.float16) * np.float16(0.3))
  for g, w in zip(jax.jit(ssd_chunk_einsums)(*args), _ssd_chunk(*args)):
    np.testing.assert_allclose(np.asarray(g), w, rtol=3e-2, atol=3e-2)
