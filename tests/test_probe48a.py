"""Probe 48a (decode-time and per-head kernels at small and odd tile shapes). A decode kernel of one query head a
program carries its running max and sum as one-element tensors (Pallas's `m_i = jnp.full((1,), -inf)`, a (1, 1)
keepdims statistic) and scales a (1, d) accumulator by them: a loop now carries such a tensor's element, and a
one-element tensor meeting a larger one of its dtype is its element (a scalar), so the (1, d) tile needs no
row-wise layout (MG204 before). A GQA decode of a group of query heads read whole ((8, 40), (4, 72), (3, 64))
computes in the padded trace of odd reads: ml.dot takes padded operands, and a loop's fills are made again at the
padded shape its body gives them (MG204 at the accumulator before). Frontend only: the GPU test compares with
interpret mode."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export as _export, rnd as _rnd, f32 as _f

S = jax.ShapeDtypeStruct
F32, BF16 = jnp.float32, jnp.bfloat16


def _close(got, want, tol=1e-5):
  np.testing.assert_allclose(_f(got), _f(want), rtol=tol, atol=tol)


def _attention(q, k, v):         # q (h, [g,] d), k and v (h, n, d): softmax(q k^T / 8) v per head
  q, k, v = _f(q), _f(k), _f(v)
  s = np.einsum("h...d,hnd->h...n", q, k) * 0.125
  p = np.exp(s - s.max(-1, keepdims=True))
  return np.einsum("h...n,hnd->h...d", p / p.sum(-1, keepdims=True), v)


# ---------------------------------------------------------------- one query head a program: one-element statistics
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def decode_row(q, k, v, o, *, BLOCK_N: ml.constexpr = 32):     # Pallas's decode: q (heads, d), k, v (heads, n, d)
  h = ml.program_id(0)
  qv = q.at[ml.ds(h, 1), :][...].astype(F32)                    # (1, d)
  m = ml.full((1,), -float("inf"), F32)
  l = ml.zeros((1,), F32)
  acc = ml.zeros(qv.shape, F32)
  for n in range(0, k.shape[1], BLOCK_N):
    kb = k.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    vb = v.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    s = ml.sum(qv * kb, axis=1)[None, :] * 0.125               # (1, BLOCK_N)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = acc * alpha[:, None] + ml.sum(p[0][:, None] * vb, axis=0)[None, :]
    m = m_new
  o.at[ml.ds(h, 1), :][...] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def decode_keepdims(q, k, v, o, *, BLOCK_N: ml.constexpr = 32):   # the same with (1, 1) keepdims statistics
  h = ml.program_id(0)
  qv = q.at[ml.ds(h, 1), :][...].astype(F32)
  m = ml.full((1, 1), -float("inf"), F32)
  l = ml.zeros((1, 1), F32)
  acc = ml.zeros(qv.shape, F32)
  for n in range(0, k.shape[1], BLOCK_N):
    kb = k.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    vb = v.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    s = ml.sum(qv * kb, axis=1)[None, :] * 0.125
    m_new = ml.maximum(m, ml.max(s, axis=1, keepdims=True))
    p = ml.exp(s - m_new)
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1, keepdims=True)
    acc = acc * alpha + ml.sum(p.reshape(BLOCK_N, 1) * vb, axis=0, keepdims=True)
    m = m_new
  o.at[ml.ds(h, 1), :][...] = (acc / l).astype(o.dtype)


@pytest.mark.parametrize("kernel,d,dtype", [(decode_row, 64, np.float32), (decode_row, 40, BF16),
                                            (decode_keepdims, 96, np.float32)])
def test_decode_of_one_head_carries_one_element_statistics(kernel, d, dtype):
  q, k, v = _rnd((2, d), 1, dtype), _rnd((2, 64, d), 2, dtype), _rnd((2, 64, d), 3, dtype)
  _close(kernel(q, k, v, interpret=True), _attention(q, k, v), 2e-2 if dtype == BF16 else 1e-5)
  _export(kernel, q, k, v)


@mg.mgpu_kernel(out_shape=lambda x: S((8,), F32))
def running_max_of_another_shape(x, o):
  m = ml.full((1,), -float("inf"), F32)
  for c in range(x.shape[1] // 64):
    m = ml.max(x.at[:, ml.ds(c * 64, 64)][...], axis=1)
  o[...] = m


def test_a_one_element_carry_the_body_reshapes_is_named_as_written():
  # (the loop carries the (1,) tensor's element; the mistake still names the tensor, not a scalar)
  expect(running_max_of_another_shape, [S((8, 256), F32)], mg.LoopCarryTypeError, "m = ml.max(x.at",
         "m enters the loop as a float32 tensor of shape (1,) but an iteration makes it a float32 tensor of shape (8,)",
         hint="keep m's shape fixed across iterations")


# ---------------------------------------------------------------- GQA decode: a group of query heads read whole
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_dot(q, k, v, o, *, BLOCK_N: ml.constexpr = 64):       # q (kv heads, group, d); k, v (kv heads, n, d)
  h = ml.program_id(0)
  g, d = q.shape[1], q.shape[2]
  qs = q[h]                                                      # (g, d): (8, 40) or (3, 64), padded
  m = ml.full((g,), -float("inf"), F32)
  l = ml.zeros((g,), F32)
  acc = ml.zeros((g, d), F32)
  for n in range(0, k.shape[1], BLOCK_N):
    kb = k.at[h, ml.ds(n, BLOCK_N), :][...]
    vb = v.at[h, ml.ds(n, BLOCK_N), :][...]
    s = ml.dot(qs, kb.T) * 0.125
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    acc = acc * alpha[:, None] + ml.dot(p.astype(vb.dtype), vb)
    m = m_new
  o[h] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_rows(q, k, v, o, *, BLOCK_N: ml.constexpr = 16):      # the same in registers, a row of scores a head
  h = ml.program_id(0)
  g, d = q.shape[1], q.shape[2]
  qs = q[h].astype(F32) * 0.125
  m = ml.full((g,), -float("inf"), F32)
  l = ml.zeros((g,), F32)
  acc = ml.zeros((g, d), F32)
  for n in range(0, k.shape[1], BLOCK_N):
    kb = k.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    vb = v.at[h, ml.ds(n, BLOCK_N), :][...].astype(F32)
    s = ml.zeros((g, BLOCK_N), F32)                              # (4, 16): padded to (4, 32)
    for i in ml.static_range(g):
      s = ml.where(ml.arange(g)[:, None] == i, ml.sum(qs[i][None, :] * kb, axis=1)[None, :], s)
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    alpha = ml.exp(m - m_new)
    l = l * alpha + ml.sum(p, axis=1)
    pv = ml.zeros((g, d), F32)                                   # (4, 40): padded to (4, 64)
    for i in ml.static_range(g):
      pv = ml.where(ml.arange(g)[:, None] == i, ml.sum(p[i][:, None] * vb, axis=0)[None, :], pv)
    acc = acc * alpha[:, None] + pv
    m = m_new
  o[h] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_jnp(q, k, v, o):               # a Pallas port: jnp.dot of register tiles, jax.nn.softmax
  h = ml.program_id(0)
  qs, ks, vs = q[h], k[h], v[h]
  s = jnp.dot(qs, ks.T, preferred_element_type=jnp.float32) * 0.125
  p = jax.nn.softmax(s, axis=-1)
  o[h] = jnp.dot(p.astype(vs.dtype), vs, preferred_element_type=jnp.float32).astype(o.dtype)


@pytest.mark.parametrize("kernel,g,n,d", [(gqa_dot, 8, 128, 40), (gqa_dot, 3, 64, 64), (gqa_rows, 4, 32, 40),
                                          (gqa_jnp, 4, 64, 72), (gqa_jnp, 4, 64, 64)])
def test_gqa_decode_of_a_group_read_whole_computes_padded(kernel, g, n, d):
  q, k, v = _rnd((2, g, d), 6, BF16), _rnd((2, n, d), 7, BF16), _rnd((2, n, d), 8, BF16)
  _close(kernel(q, k, v, interpret=True), _attention(q, k, v), 3e-2)
  _export(kernel, q, k, v)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def gqa_products(q, k, v, o):          # a Triton port: the scores as a 3-D product summed over the head dim
  h = ml.program_id(0)
  qs, ks, vs = q[h].astype(F32), k[h].astype(F32), v[h].astype(F32)
  s = ml.sum(qs[:, None, :] * ks[None, :, :], axis=-1) * 0.125
  p = ml.exp(s - ml.max(s, axis=-1, keepdims=True))
  acc = ml.sum(p[:, :, None] * vs[None, :, :], axis=1)
  o[h] = (acc / ml.sum(p, axis=-1, keepdims=True)).astype(o.dtype)


@pytest.mark.parametrize("g,n,d", [(3, 64, 64), (2, 32, 96)])
def test_gqa_scores_as_a_3d_product_of_a_padded_group(g, n, d):
  q, k, v = _rnd((2, g, d), 23), _rnd((2, n, d), 24), _rnd((2, n, d), 25)
  _close(gqa_products(q, k, v, interpret=True), _attention(q, k, v), 1e-4)
  _export(gqa_products, q, k, v)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def few_rows_linear(x, w, o):          # a decode batch of a few tokens times a weight tile in SMEM
  ws = ml.smem(w.shape, w.dtype)
  ml.copy(w, ws)
  o[...] = ml.dot(x[...], ws, out_dtype=F32)


@pytest.mark.parametrize("m,k,n", [(5, 40, 64), (3, 64, 64)])
def test_a_dot_of_an_odd_read_of_few_rows(m, k, n):
  x, w = _rnd((m, k), 9, BF16), _rnd((k, n), 10, BF16)
  _close(few_rows_linear(x, w, interpret=True), _f(x) @ _f(w), 2e-2)
  _export(few_rows_linear, x, w)


@pytest.mark.gpu
def test_gpu_decode_kernels_of_small_tiles_match_interpret_mode():
  q, k, v = _rnd((2, 40), 11), _rnd((2, 64, 40), 12), _rnd((2, 64, 40), 13)
  _close(jax.jit(decode_row)(q, k, v), decode_row(q, k, v, interpret=True), 1e-4)
  _close(jax.jit(decode_keepdims)(q, k, v), _attention(q, k, v), 1e-4)
  for kernel, g, n, d in [(gqa_dot, 8, 128, 40), (gqa_dot, 3, 64, 64), (gqa_rows, 4, 32, 40), (gqa_jnp, 4, 64, 72)]:
    q, k, v = _rnd((2, g, d), 14, BF16), _rnd((2, n, d), 15, BF16), _rnd((2, n, d), 16, BF16)
    _close(jax.jit(kernel)(q, k, v), kernel(q, k, v, interpret=True), 3e-2)
  q, k, v = _rnd((2, 3, 64), 26), _rnd((2, 64, 64), 27), _rnd((2, 64, 64), 28)
  _close(jax.jit(gqa_products)(q, k, v), _attention(q, k, v), 1e-4)


# ---------------------------------------------------------------- ml.reduce of an odd read (a vocabulary tail, 100 logits)
@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def product_of_all(x, o):
  o[...] = ml.reduce(x[...], 0, lambda a, b: a * b, keep_dims=True)


@mg.mgpu_kernel(out_shape=lambda x: S((2,), F32))
def welford(x, o):               # Triton's welford_combine over a row read whole: its mean and variance
  v = x[...]

  def combine(m1, s1, n1, m2, s2, n2):
    n = n1 + n2
    w = ml.where(n > 0, n2 / ml.where(n > 0, n, 1.0), 0.0)
    d = m2 - m1
    return m1 + d * w, s1 + s2 + d * d * n1 * w, n

  mean, m2, n = ml.reduce((v, ml.zeros_like(v), ml.full(v.shape, 1.0, F32)), 0, combine)
  o[0] = mean
  o[1] = m2 / n


@pytest.mark.parametrize("n", [100, 17])
def test_ml_reduce_of_an_odd_read_takes_its_last_real_element(n):
  x = (0.9 + 0.1 * np.abs(_rnd((n,), 19))).astype(np.float32)
  _close(product_of_all(x, interpret=True), x.prod(keepdims=True), 1e-4)
  _close(welford(x, interpret=True), np.array([x.mean(), x.var()]), 1e-5)
  _export(product_of_all, x)
  _export(welford, x)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def row_max_by_reduce(x, o):
  o[...] = ml.reduce(x[...], 1, lambda a, b: ml.maximum(a, b))


def test_ml_reduce_along_the_rows_of_an_odd_read_ignores_the_padding():
  x = -np.abs(_rnd((8, 40), 20)) - 1           # (all negative: a max over the zeros of the padding would be 0)
  _close(row_max_by_reduce(x, interpret=True), x.max(1))
  _export(row_max_by_reduce, x)


@pytest.mark.gpu
def test_gpu_dots_and_reductions_of_odd_reads_match_numpy():
  x, w = _rnd((5, 40), 17, BF16), _rnd((40, 64), 18, BF16)
  _close(jax.jit(few_rows_linear)(x, w), _f(x) @ _f(w), 2e-2)
  x = (0.9 + 0.1 * np.abs(_rnd((100,), 21))).astype(np.float32)
  _close(jax.jit(product_of_all)(x), x.prod(keepdims=True), 1e-4)
  _close(jax.jit(welford)(x), np.array([x.mean(), x.var()]), 1e-5)
  x = -np.abs(_rnd((8, 40), 22)) - 1
  _close(jax.jit(row_max_by_reduce)(x), x.max(1))
  x, w = _rnd((2, 320), 32), _rnd((40,), 33)
  _close(jax.jit(lambda x, w: qk_norm(x, w, H=8))(x, w), qk_norm(x, w, H=8, interpret=True), 1e-5)
  x = _rnd((2, 192), 34)
  np.testing.assert_array_equal(np.asarray(jax.jit(head_argmax)(x)), x.reshape(2, 8, 24).argmax(-1))


# ---------------------------------------------------------------- a token's row of heads reshaped per head
@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0],))
def qk_norm(x, w, o, *, H: ml.constexpr = 8):      # Qwen3's q/k norm: a token's (H * d,) row, RMS-normed per head
  t = ml.program_id(0)
  v = x[t].astype(F32).reshape(H, -1)
  r = ml.rsqrt(ml.mean(v * v, axis=-1, keepdims=True) + 1e-6)
  o[t] = (v * r * w[...].astype(F32)[None, :]).reshape(-1).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 8), jnp.int32), grid=lambda x: (x.shape[0],))
def head_argmax(x, o):
  t = ml.program_id(0)
  o[t] = ml.argmax(x[t].reshape(8, 24), axis=1).astype(jnp.int32)


@pytest.mark.parametrize("h,d,dtype", [(8, 40, np.float32), (3, 64, BF16)])
def test_a_rows_reshape_of_a_vector_no_register_tensor_holds_computes_padded(h, d, dtype):
  x, w = _rnd((2, h * d), 29, dtype), _rnd((d,), 30, dtype)
  v = _f(x).reshape(2, h, d)
  want = (v / np.sqrt((v * v).mean(-1, keepdims=True) + 1e-6) * _f(w)).reshape(2, -1)
  _close(qk_norm(x, w, H=h, interpret=True), want, 2e-2 if dtype == BF16 else 1e-5)
  _export(qk_norm, x, w, H=h)


def test_argmax_of_each_row_of_a_192_element_vector_as_8_by_24():
  x = _rnd((2, 192), 31)
  np.testing.assert_array_equal(np.asarray(head_argmax(x, interpret=True)), x.reshape(2, 8, 24).argmax(-1))
  _export(head_argmax, x)


# ---------------------------------------------------------------- RMSNorm over the heads of a few tokens, read whole
@mg.mgpu_kernel(out_shape=lambda x, w: x)
def rms_heads(x, w, o):          # x: (tokens, heads, d), w: (d,): the weight stretched over a padded axis of heads
  v = x[...].astype(F32)
  r = ml.rsqrt(ml.mean(v * v, axis=-1, keepdims=True) + 1e-6)
  o[...] = (v * r * w[...].astype(F32)).astype(o.dtype)


@pytest.mark.parametrize("shape", [(5, 2, 96), (7, 3, 32)])
def test_rms_norm_of_an_odd_3d_read_stretches_the_weight_over_padded_heads(shape):
  x, w = _rnd(shape, 35), _rnd(shape[-1:], 36)
  _close(rms_heads(x, w, interpret=True), x / np.sqrt((x * x).mean(-1, keepdims=True) + 1e-6) * w)
  _export(rms_heads, x, w)


# ---------------------------------------------------------------- kernels the plain trace takes keep their IR
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def one_row_softmax(x, out):            # examples/softmax.py's rows=1: a (1, 4096) row takes a row layout
  i = ml.program_id(0)
  v = x.at[ml.ds(i, 1), :][...]
  e = ml.exp(v - ml.max(v, axis=1, keepdims=True))
  out.at[ml.ds(i, 1), :][...] = e / ml.sum(e, axis=1, keepdims=True)


def test_a_one_row_statistic_the_row_layout_takes_is_broadcast_not_reduced_again():
  """One-element tensors meet others as their element only in a trace after the plain one fails: a (1, 1)
  statistic of a (1, 4096) row broadcast as the row layout does it (as before probe 48a), not reduced again to a
  scalar through an SMEM scratch (which the first version of this probe did, changing examples/softmax.py)."""
  text = one_row_softmax.typed_ir(S((4, 4096), F32))
  assert "scalar<float32> = reduce" not in text and text.count("smemalloc") == 2, text   # (the two row statistics')
  x = _rnd((4, 4096), 30)
  e = np.exp(x - x.max(1, keepdims=True))
  _close(one_row_softmax(x, interpret=True), e / e.sum(1, keepdims=True), 1e-5)
