"""Probe 51f: attention written from scratch (Triton's fused-attention tutorial, Pallas's flash attention, TMA
forms), what it met.

(1) Triton's `tl.dot(q, tl.trans(k))` and `tl.dot(p, v)` of loaded register tiles: the compiler stores a register B
into an SMEM buffer of its own, and a mistake in such a call (a K tile passed untransposed, `ml.trans(v)` for `v`,
mixed 16-bit dtypes) was reported in the compiler's words, naming that buffer: `ml.dot of q (64, 64) and k_s (32, 64)`,
hint `k_s views a buffer stored (k, n) = (64, 32): pass the buffer itself, ml.dot(q, the buffer)`; or `dot operand b.T`;
or a dtype hint allocating the compiler's `v_s` anew. They are checked on the operands as written now
(frontend/ops/dot_register_checks.py). (2) A float32 (TF32) flash attention with K and V copied by TMA,
`ml.dot(p, v_s, acc)` of a float32 `p`, was MG106, whose hint staged `p` into SMEM and transposed `v_s` once by hand:
the compiler does both now (ops/dot_staging.py, k_major_b), also for a decode's few query rows, and pads V's tile
at a head_dim of 32, 80 or 96 (narrow_f32_b_dot). (3) A head_dim
mask (`dmask[None, :]`, Pallas's `head_mask`) shared by a 128-row Q tile and 32-row K/V tiles was MG204: index
vectors are recomputed for each tile shape they are stretched into (frontend/remat.py). (4) Triton 3's tutorial
with tensor descriptors, `tl.range(lo, hi, BLOCK_N, warp_specialize=ws, num_stages=3)` over `desc_k.load(...)`:
MG502/MG503; a descriptor's load is a register load, and warp_specialize= is dropped there as num_stages= is."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _rand(shape, dtype, seed):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _attn_ref(q, k, v, scale, mask=None):
  """softmax(q @ k.T * scale) @ v in float64, one head: q (sq, d), k and v (skv, d)."""
  q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
  s = q @ k.T * scale
  if mask is not None:
    s = np.where(mask, s, -np.inf)
  p = np.exp(s - s.max(axis=1, keepdims=True))
  return p @ v / p.sum(axis=1, keepdims=True)


def _exports(kernel, *args, **constexprs):
  f = lambda *a: kernel(*a, **constexprs)      # noqa: E731
  jax.export.export(jax.jit(f), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


# ---------------------------------------------------------------- (1) register operands, in the call's words
def _triton_fwd(variant, bm=64, bn=32):
  """The tutorial's forward of one (z * h) head a program, register tiles; `variant` writes the two dots."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype),
                  grid=lambda q, k, v, **kw: (ml.cdiv(q.shape[1], bm), q.shape[0]))
  def attn_fwd(Q, K, V, Out, *, sm_scale: ml.constexpr):
    start_m, off_hz = ml.program_id(0), ml.program_id(1)
    offs_m = start_m * bm + ml.arange(0, bm)
    offs_n = ml.arange(0, bn)
    offs_d = ml.arange(0, Q.shape[2])
    q = ml.load(Q.at[off_hz, offs_m[:, None], offs_d[None, :]])
    m_i = ml.zeros([bm], dtype=jnp.float32) - float("inf")
    l_i = ml.zeros([bm], dtype=jnp.float32)
    acc = ml.zeros([bm, Q.shape[2]], dtype=jnp.float32)
    for start_n in range(0, Q.shape[1], bn):
      k = ml.load(K.at[off_hz, (start_n + offs_n)[:, None], offs_d[None, :]])
      if variant == "k":
        qk = ml.dot(q, k)
      elif variant == "k.T":
        qk = ml.dot(q, k.T)
      else:
        qk = ml.dot(q, ml.trans(k))
      qk = qk * sm_scale
      m_ij = ml.maximum(m_i, ml.max(qk, 1))
      p = ml.math.exp(qk - m_ij[:, None])
      alpha = ml.math.exp(m_i - m_ij)
      l_i = l_i * alpha + ml.sum(p, 1)
      v = ml.load(V.at[off_hz, (start_n + offs_n)[:, None], offs_d[None, :]])
      if variant == "trans(v)":
        acc = ml.dot(p.to(v.dtype), ml.trans(v), acc)
      elif variant == "bf16":
        acc = ml.dot(p.to(jnp.bfloat16), v, acc)
      elif variant == "f16":
        acc = ml.dot(p.to(jnp.float16), v, acc)
      else:
        acc = ml.dot(p.to(v.dtype), v, acc * alpha[:, None])
      m_i = m_ij
    ml.store(Out.at[off_hz, offs_m[:, None], offs_d[None, :]], acc / l_i[:, None])
  return attn_fwd


untransposed_k = _triton_fwd("k")
transposed_v = _triton_fwd("trans(v)")
mixed_dtypes = _triton_fwd("bf16")
f16_p_f32_v = _triton_fwd("f16")
as_written = _triton_fwd("trans(k)")
hinted_k = _triton_fwd("k.T")
HEADS = [S((2, 128, 64), F16)] * 3


def test_an_untransposed_register_k_tile_is_named_as_written():
  expect(untransposed_k, HEADS, mg.ShapeMismatchError, "ml.dot(q, k)",
         "ml.dot of q (64, 64) and k (32, 64): inner dimensions differ", sm_scale=0.125,
         hint="k (32, 64) is (n, k), as a K tile loaded by rows is: pass its transpose, ml.dot(q, k.T) (Triton's"
              " tl.trans; the compiler stores it into SMEM as it is and reads the transposed view)")
  q, k, v = (_rand((2, 128, 64), F16, s) for s in range(3))       # the hint followed, and Triton's spelling
  for kernel in (hinted_k, as_written):
    got = kernel(q, k, v, sm_scale=0.125, interpret=True)
    for z in range(2):
      np.testing.assert_allclose(np.asarray(got[z], np.float64), _attn_ref(q[z], k[z], v[z], 0.125), atol=2e-2)
  _exports(as_written, q, k, v, sm_scale=0.125)


def test_a_register_transpose_of_a_k_by_n_tile_hints_the_tile():
  expect(transposed_v, HEADS, mg.ShapeMismatchError, "ml.dot(p.to(v.dtype), ml.trans(v), acc)",
         "ml.dot of p.to(v.dtype) (64, 32) and ml.trans(v) (64, 32): inner dimensions differ", sm_scale=0.125,
         hint="ml.trans(v) is the transpose of v (32, 64), which is (k, n) already: pass v itself,"
              " ml.dot(p.to(v.dtype), v, acc)")


def test_mixed_16_bit_register_operands_convert_in_the_calls_spelling():
  expect(mixed_dtypes, HEADS, mg.DtypeMismatchError, "ml.dot(p.to(jnp.bfloat16), v, acc)",
         "ml.dot of p.to(jnp.bfloat16) (bfloat16) and v (float16): both operands must have one dtype",
         sm_scale=0.125,
         hint="convert p.to(jnp.bfloat16) to float16 in registers: ml.dot(p.to(jnp.float16), v, acc) (the tensor"
              " cores multiply operands of one dtype; the compiler stores a register b into SMEM for them)")
  e = expect(f16_p_f32_v, [S((2, 128, 64), F32)] * 3, mg.DtypeMismatchError, "ml.dot(p.to(jnp.float16), v, acc)",
             "ml.dot of p.to(jnp.float16) (float16) and v (float32): both operands must have one dtype",
             sm_scale=0.125)
  assert e.hint.startswith("convert p.to(jnp.float16) to float32 in registers: ml.dot(p.to(jnp.float32), v, acc)")
  assert "v_s" not in e.hint


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[0]), F32), grid=(1,))
def w8_in_registers(x, w, o):
  wq = w[...]                                         # int8 (n, k) weights read whole into registers
  o[...] = ml.dot(x[...], wq.T)


def test_a_register_b_of_another_class_names_the_value_too():
  """W8A16 with the weights in registers: the dtype hint converts them, not a buffer the compiler made."""
  e = expect(w8_in_registers, [S((64, 64), BF16), S((64, 64), jnp.int8)], mg.DtypeMismatchError,
             "ml.dot(x[...], wq.T)", "ml.dot of x[...] (bfloat16) and wq.T (int8): both operands must have one dtype")
  assert e.hint.startswith("convert wq.T to bfloat16 in registers: ml.dot(x[...], wq.T.astype(jnp.bfloat16))")


# ---------------------------------------------------------------- (2) float32 (TF32) attention, V copied by TMA
def _tma_f32(bq=64, bkv=64, stages=2, block=128, ws=False):
  @mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype), block=block,
                  grid=lambda q, k, v, **kw: (ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0]))
  def fwd(q, k, v, o, *, scale: ml.constexpr):
    i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
    q_s, k_s, v_s = ml.smem((bq, q.shape[3])), ml.smem((bkv, q.shape[3])), ml.smem((bkv, q.shape[3]))
    ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
    m = ml.full((bq,), -1e30, jnp.float32)
    l = ml.zeros((bq,), jnp.float32)
    acc = ml.zeros((bq, q.shape[3]), jnp.float32)
    for j in ml.range(ml.cdiv(k.shape[1], bkv), stages=stages, warp_specialize=ws):
      ml.copy(k.at[b, ml.ds(j * bkv, bkv), h, :], k_s)
      ml.copy(v.at[b, ml.ds(j * bkv, bkv), h, :], v_s)
      s = ml.dot(q_s, k_s.T) * scale
      s = ml.where((j * bkv + ml.arange(bkv))[None, :] < k.shape[1], s, -jnp.inf)
      m_new = ml.maximum(m, ml.max(s, axis=1))
      alpha = ml.exp(m - m_new)
      p = ml.exp(s - m_new[:, None])
      l = l * alpha + ml.sum(p, axis=1)
      acc = ml.dot(p, v_s, acc * alpha[:, None])       # float32 p from registers, v_s stored (keys, head_dim)
      m = m_new
    o.at[b, ml.ds(i * bq, bq), h, :].store(acc / l[:, None], mask=(i * bq + ml.arange(bq) < q.shape[1])[:, None])
  return fwd


tma_f32 = _tma_f32()
tma_f32_two_warpgroups = _tma_f32(bq=128, block=256)
tma_f32_ws = _tma_f32(ws=True)
tma_f32_few_rows = _tma_f32(bq=16)
tma_f32_wide = _tma_f32(bkv=32, stages=1)
F32_CASES = [(tma_f32, 100, 200, 64), (tma_f32_two_warpgroups, 256, 128, 64), (tma_f32_ws, 64, 256, 64),
             (tma_f32_few_rows, 32, 96, 64), (tma_f32_wide, 64, 64, 256)]
F32_NARROW = [(tma_f32, 64, 64, 32), (tma_f32, 100, 150, 80), (tma_f32_few_rows, 32, 64, 96)]


def _f32_args(sq, skv, d, seed=0):
  return (_rand((1, sq, 2, d), F32, seed), _rand((1, skv, 2, d), F32, seed + 1), _rand((1, skv, 2, d), F32, seed + 2))


@pytest.mark.parametrize("case", range(len(F32_CASES)))
def test_a_float32_register_p_beside_a_tma_v_tile_computes(case):
  kernel, sq, skv, d = F32_CASES[case]
  q, k, v = _f32_args(sq, skv, d, case)
  scale = 1 / math.sqrt(d)
  got = kernel(q, k, v, scale=scale, interpret=True)
  for h in range(2):
    np.testing.assert_allclose(got[0, :, h], _attn_ref(q[0, :, h], k[0, :, h], v[0, :, h], scale), atol=2e-2)
  _exports(kernel, q, k, v, scale=scale)


def test_a_float32_v_tile_of_a_narrow_head_is_padded():
  """head_dim 32, 80, 96: V's (n, keys) transpose is no buffer registers fill (64 rows at a time); v_s's tile is read
  into registers and padded with zero columns to 64 or 128 (ops/dot_staging.narrow_f32_b_dot), the product's first
  n columns kept. It was MG106, whose hint loaded the tile transposed from the transposed array."""
  for kernel, sq, skv, d in F32_NARROW:
    q, k, v = _f32_args(sq, skv, d, d)
    scale = 1 / math.sqrt(d)
    got = kernel(q, k, v, scale=scale, interpret=True)
    for h in range(2):
      np.testing.assert_allclose(got[0, :, h], _attn_ref(q[0, :, h], k[0, :, h], v[0, :, h], scale), atol=2e-2)
    _exports(kernel, q, k, v, scale=scale)


# ---------------------------------------------------------------- (3) a head_dim mask shared by Q and K/V tiles
def _masked_head(bm, bn):
  """Triton's forward with head_dim padded to a power of two (BLOCK_D), one column mask for every tile."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype),
                  grid=lambda q, k, v, **kw: (ml.cdiv(q.shape[1], bm), q.shape[0]))
  def fwd(Q, K, V, Out, *, sm_scale: ml.constexpr, HEAD_DIM: ml.constexpr):
    start_m, off_hz = ml.program_id(0), ml.program_id(1)
    n_ctx, block_d = Q.shape[1], Q.shape[2]
    offs_m = start_m * bm + ml.arange(0, bm)
    offs_n = ml.arange(0, bn)
    offs_d = ml.arange(0, block_d)
    dmask = offs_d < HEAD_DIM
    q = ml.load(Q.at[off_hz, offs_m[:, None], offs_d[None, :]], mask=(offs_m[:, None] < n_ctx) & dmask[None, :],
                other=0.0)
    m_i = ml.full([bm], float("-inf"), jnp.float32)
    l_i = ml.zeros([bm], jnp.float32)
    acc = ml.zeros([bm, block_d], jnp.float32)
    for start_n in range(0, (start_m + 1) * bm, bn):
      cols = start_n + offs_n
      k = ml.load(K.at[off_hz, cols[:, None], offs_d[None, :]], mask=(cols[:, None] < n_ctx) & dmask[None, :],
                  other=0.0)
      qk = ml.dot(q, ml.trans(k)) * (sm_scale * 1.44269504)
      qk = ml.where((offs_m[:, None] >= cols[None, :]) & (cols[None, :] < n_ctx), qk, float("-inf"))
      m_ij = ml.maximum(m_i, ml.max(qk, 1))
      p = ml.math.exp2(qk - m_ij[:, None])
      alpha = ml.math.exp2(m_i - m_ij)
      l_i = l_i * alpha + ml.sum(p, 1)
      v = ml.load(V.at[off_hz, cols[:, None], offs_d[None, :]], mask=(cols[:, None] < n_ctx) & dmask[None, :],
                  other=0.0)
      acc = ml.dot(p.to(v.dtype), v, acc * alpha[:, None])
      m_i = m_ij
    ml.store(Out.at[off_hz, offs_m[:, None], offs_d[None, :]], acc / l_i[:, None], mask=offs_m[:, None] < n_ctx)
  return fwd


def _pallas_port(block_q, block_k):
  """Pallas's mha_forward_kernel as ported (one head a program, `head_mask` on every load), causal."""
  @mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype),
                  grid=lambda q, k, v, **kw: (ml.cdiv(q.shape[1], block_q), q.shape[0], q.shape[2]))
  def mha(q_all, k_all, v_all, o_all, *, sm_scale: ml.constexpr, head_dim: ml.constexpr):
    start_q, b, h = ml.program_id(0), ml.program_id(1), ml.program_id(2)
    q_ref, k_ref, v_ref, o_ref = (x.at[b, :, h, :] for x in (q_all, k_all, v_all, o_all))
    head_mask = (jnp.arange(q_ref.shape[-1]) < head_dim)[None, :]
    curr_q_slice = ml.ds(start_q * block_q, block_q)
    q = q_ref.at[curr_q_slice, :].load(mask=head_mask, other=0.0)
    m_i = jnp.zeros(block_q, dtype=jnp.float32) - float("inf")
    l_i = jnp.zeros(block_q, dtype=jnp.float32)
    o = jnp.zeros((block_q, q_ref.shape[-1]), dtype=jnp.float32)

    def body(start_k, carry):
      o_prev, m_prev, l_prev = carry
      curr_k_slice = ml.ds(start_k * block_k, block_k)
      k = k_ref.at[curr_k_slice, :].load(mask=head_mask, other=0.0)
      qk = ml.dot(q, k.T) * (math.log2(math.e) * sm_scale)
      span_q = start_q * block_q + jnp.arange(block_q)
      span_k = start_k * block_k + jnp.arange(block_k)
      qk = jnp.where(span_q[:, None] >= span_k[None, :], qk, -0.7 * float(np.finfo(np.float32).max))
      m_next = jnp.maximum(m_prev, jnp.max(qk, axis=-1))
      correction = jnp.exp2(m_prev - m_next)
      s_curr = jnp.exp2(qk - m_next[:, None])
      l_next = correction * l_prev + s_curr.sum(axis=-1)
      v = v_ref.at[curr_k_slice, :].load(mask=head_mask, other=0.0)
      return correction[:, None] * o_prev + ml.dot(s_curr.astype(v.dtype), v), m_next, l_next

    upper_bound = jax.lax.div(block_q * (start_q + 1) + block_k - 1, block_k)
    o, m_i, l_i = jax.lax.fori_loop(0, upper_bound, body, (o, m_i, l_i))
    o_ref.at[curr_q_slice, :][...] = (o / l_i[:, None]).astype(o_ref.dtype)    # (masked columns: zeros)
  return mha


masked_head = _masked_head(128, 32)
pallas_head_mask = _pallas_port(128, 32)


def test_a_head_dim_mask_shared_by_128_query_rows_and_32_key_rows_computes():
  """dmask[None, :] met Q's (128, d) tile (the tensor cores' A) and V's (32, d) one (a B the compiler stores into
  SMEM, which needs another layout): one vector cannot hold both layouts, and it was MG204 (naming offs_n, with a
  hint to change BLOCK_N). Index vectors are now recomputed for each tile shape they are stretched into
  (frontend/remat.py), as for each orientation."""
  q, k, v = (_rand((2, 100, 128), F16, s) for s in range(3))
  scale = 1 / math.sqrt(80)
  got = masked_head(q, k, v, sm_scale=scale, HEAD_DIM=80, interpret=True)
  causal = np.tril(np.ones((100, 100), bool))
  for z in range(2):
    want = _attn_ref(q[z, :, :80], k[z, :, :80], v[z, :, :80], scale, causal)
    np.testing.assert_allclose(np.asarray(got[z, :, :80], np.float64), want, atol=2e-2)
  _exports(masked_head, q, k, v, sm_scale=scale, HEAD_DIM=80)


def test_pallas_head_mask_with_a_32_key_block_computes():
  q, k, v = (_rand((1, 128, 2, 128), BF16, s) for s in range(3))
  scale = 1 / math.sqrt(96)
  got = pallas_head_mask(q, k, v, sm_scale=scale, head_dim=96, interpret=True)
  causal = np.tril(np.ones((128, 128), bool))
  for h in range(2):
    want = _attn_ref(q[0, :, h, :96], k[0, :, h, :96], v[0, :, h, :96], scale, causal)
    np.testing.assert_allclose(np.asarray(got[0, :, h, :96], np.float64), want, atol=4e-2)
    assert not np.asarray(got[0, :, h, 96:], np.float64).any()     # (masked columns: zero products)
  _exports(pallas_head_mask, q, k, v, sm_scale=scale, head_dim=96)


@mg.mgpu_kernel(out_shape=lambda q, kc, vc, lens, **kw: S(q.shape, q.dtype),
                grid=lambda q, kc, vc, lens, **kw: (q.shape[0], kc.shape[2]))
def gqa_decode(Q, Kc, Vc, Lens, O, *, sm_scale: ml.constexpr, HEAD_DIM: ml.constexpr):
  """Triton's GQA decode: the query heads of one KV head as rows (8), head_dim padded and masked, 64 keys a step."""
  b, hk = ml.program_id(0), ml.program_id(1)
  g = Q.shape[1] // Kc.shape[2]
  offs_g, offs_d, offs_n = hk * g + ml.arange(0, g), ml.arange(0, Q.shape[2]), ml.arange(0, 64)
  dmask = offs_d < HEAD_DIM
  n = ml.load(Lens.at[b])
  q = ml.load(Q.at[b, offs_g[:, None], offs_d[None, :]], mask=dmask[None, :], other=0.0)
  m_i = ml.full([g], float("-inf"), jnp.float32)
  l_i = ml.zeros([g], jnp.float32)
  acc = ml.zeros([g, Q.shape[2]], jnp.float32)
  for start_n in range(0, n, 64):
    cols = start_n + offs_n
    kv_mask = (cols[:, None] < n) & dmask[None, :]
    k = ml.load(Kc.at[b, cols[:, None], hk, offs_d[None, :]], mask=kv_mask, other=0.0)
    qk = ml.where(cols[None, :] < n, ml.dot(q, k.T) * sm_scale, float("-inf"))
    m_ij = ml.maximum(m_i, ml.max(qk, 1))
    p = ml.exp(qk - m_ij[:, None])
    alpha = ml.exp(m_i - m_ij)
    l_i = l_i * alpha + ml.sum(p, 1)
    v = ml.load(Vc.at[b, cols[:, None], hk, offs_d[None, :]], mask=kv_mask, other=0.0)
    acc = ml.dot(p.to(v.dtype), v, acc * alpha[:, None])
    m_i = m_ij
  ml.store(O.at[b, offs_g[:, None], offs_d[None, :]], acc / l_i[:, None])


def test_a_head_dim_mask_shared_by_8_query_heads_and_64_key_rows_computes():
  """The same class in a decode: Q's 8 rows (a dot padded to 64 rows) and K/V's 64 rows took one layout (MG204)."""
  q, kc, vc = _rand((2, 8, 128), F16, 1), _rand((2, 160, 1, 128), F16, 2), _rand((2, 160, 1, 128), F16, 3)
  lens = jnp.asarray([37, 160], jnp.int32)
  scale = 1 / math.sqrt(96)
  got = gqa_decode(q, kc, vc, lens, sm_scale=scale, HEAD_DIM=96, interpret=True)
  for b, n in enumerate([37, 160]):
    want = _attn_ref(q[b, :, :96], kc[b, :n, 0, :96], vc[b, :n, 0, :96], scale)
    np.testing.assert_allclose(np.asarray(got[b, :, :96], np.float64), want, atol=2e-2)
  _exports(gqa_decode, q, kc, vc, lens, sm_scale=scale, HEAD_DIM=96)


# ---------------------------------------------------------------- (4) Triton 3's tutorial: descriptors in tl.range
@ml.inline
def _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m, qk_scale, stage: ml.constexpr, offs_m, offs_n,
               n_ctx: ml.constexpr, bm: ml.constexpr, bn: ml.constexpr, ws: ml.constexpr):
  if stage == 1:
    lo, hi = 0, start_m * bm
  elif stage == 2:
    lo, hi = start_m * bm, (start_m + 1) * bm
    lo = ml.multiple_of(lo, bm)
  else:
    lo, hi = 0, n_ctx
  offsetk_y = offset_y + lo
  for start_n in ml.range(lo, hi, bn, warp_specialize=ws, num_stages=3):
    k = desc_k.load([offsetk_y, 0]).T
    qk = ml.dot(q, k)
    if stage == 2:
      qk = qk * qk_scale + ml.where(offs_m[:, None] >= (start_n + offs_n[None, :]), 0, -1.0e6)
      m_ij = ml.maximum(m_i, ml.max(qk, 1))
      qk -= m_ij[:, None]
    else:
      m_ij = ml.maximum(m_i, ml.max(qk, 1) * qk_scale)
      qk = qk * qk_scale - m_ij[:, None]
    p = ml.math.exp2(qk)
    alpha = ml.math.exp2(m_i - m_ij)
    acc = ml.dot(p.to(jnp.float16), desc_v.load([offsetk_y, 0]), acc * alpha[:, None])
    l_i = l_i * alpha + ml.sum(p, 1)
    m_i = m_ij
    offsetk_y += bn
  return acc, l_i, m_i


@mg.mgpu_kernel(out_shape=lambda q, k, v, **kw: S(q.shape, q.dtype),
                grid=lambda q, k, v, **kw: (kw["N_CTX"] // 64, q.shape[0] // kw["N_CTX"]))
def attn_descriptors(Q, K, V, O, *, sm_scale: ml.constexpr, N_CTX: ml.constexpr, STAGE: ml.constexpr,
                     ws: ml.constexpr):
  """The fused-attention tutorial of Triton 3 (tensor descriptors over (Z * H * N_CTX, HEAD_DIM) arrays, its
  stage helper called twice when causal, `tl.range(lo, hi, BLOCK_N, warp_specialize=...)` with num_stages)."""
  bm, bn, d = 64, 32, Q.shape[1]
  desc_q, desc_k, desc_v, desc_o = (ml.make_tensor_descriptor(x, shape=[Q.shape[0], d], strides=[d, 1],
                                                              block_shape=[b, d]) for x, b in
                                    ((Q, bm), (K, bn), (V, bn), (O, bm)))
  start_m, off_hz = ml.program_id(0), ml.program_id(1)
  offset_y = off_hz * N_CTX
  offs_m, offs_n = start_m * bm + ml.arange(0, bm), ml.arange(0, bn)
  m_i = ml.zeros([bm], dtype=jnp.float32) - float("inf")
  l_i = ml.zeros([bm], dtype=jnp.float32) + 1.0
  acc = ml.zeros([bm, d], dtype=jnp.float32)
  qk_scale = sm_scale * 1.44269504
  q = desc_q.load([offset_y + start_m * bm, 0])
  if STAGE & 1:
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m, qk_scale, 4 - STAGE, offs_m,
                               offs_n, N_CTX, bm, bn, ws)
  if STAGE & 2:
    acc, l_i, m_i = _fwd_inner(acc, l_i, m_i, q, desc_k, desc_v, offset_y, start_m, qk_scale, 2, offs_m, offs_n,
                               N_CTX, bm, bn, ws)
  desc_o.store([offset_y + start_m * bm, 0], (acc / l_i[:, None]).to(jnp.float16))


@pytest.mark.parametrize("stage, ws", [(3, True), (1, False)])
def test_triton3_attention_with_descriptors_in_a_warp_specialised_tl_range(stage, ws):
  """`desc_k.load(...)` is a register load, but the loop-body scan (loop_bounds.may_load) took the descriptor's method
  for one that might make a TMA load, so num_stages=3 became stages=3: MG502 (no TMA load to pipeline). And
  `warp_specialize=True` on a loop of register loads (nothing for a producer to issue) is dropped as num_stages= is,
  where it was MG503 (the causal helper, called twice, held two such loops) or needed stages."""
  q, k, v = (_rand((2 * 128, 64), F16, s) for s in range(3))
  got = attn_descriptors(q, k, v, sm_scale=0.125, N_CTX=128, STAGE=stage, ws=ws, interpret=True)
  mask = np.tril(np.ones((128, 128), bool)) if stage == 3 else None
  for z in range(2):
    rows = slice(z * 128, (z + 1) * 128)
    want = _attn_ref(q[rows], k[rows], v[rows], 0.125, mask)
    np.testing.assert_allclose(np.asarray(got[rows], np.float64), want, atol=2e-2)
  _exports(attn_descriptors, q, k, v, sm_scale=0.125, N_CTX=128, STAGE=stage, ws=ws)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F16),
                grid=lambda a, b: (a.shape[0] // 64, b.shape[1] // 64))
def matmul_descriptors(a, b, c):
  """The descriptor matmul: `for k in tl.range(k_tiles, num_stages=4)` of `a_desc.load(...)` tiles."""
  a_desc = ml.make_tensor_descriptor(a, shape=list(a.shape), strides=[a.shape[1], 1], block_shape=[64, 32])
  b_desc = ml.make_tensor_descriptor(b, shape=list(b.shape), strides=[b.shape[1], 1], block_shape=[32, 64])
  pid_m, pid_n = ml.program_id(0), ml.program_id(1)
  acc = ml.zeros((64, 64), dtype=jnp.float32)
  for k in ml.range(ml.cdiv(a.shape[1], 32), num_stages=4):
    acc = ml.dot(a_desc.load([pid_m * 64, k * 32]), b_desc.load([k * 32, pid_n * 64]), acc)
  c[pid_m * 64:(pid_m + 1) * 64, pid_n * 64:(pid_n + 1) * 64] = acc.astype(F16)


def test_a_descriptor_matmul_with_num_stages_computes():
  a, b = _rand((128, 96), F16, 7), _rand((96, 128), F16, 8)
  got = matmul_descriptors(a, b, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(a, np.float64) @ np.asarray(b, np.float64),
                             atol=5e-2, rtol=1e-2)
  _exports(matmul_descriptors, a, b)


@pytest.mark.gpu
def test_gpu_probe51f_kernels_match_interpret_mode_and_numpy():
  q, k, v = (_rand((2, 128, 64), F16, s) for s in range(3))
  got = as_written(q, k, v, sm_scale=0.125)
  for z in range(2):
    np.testing.assert_allclose(np.asarray(got[z], np.float64), _attn_ref(q[z], k[z], v[z], 0.125), atol=2e-2)
  for case, (kernel, sq, skv, d) in enumerate(F32_CASES + F32_NARROW):
    q, k, v = _f32_args(sq, skv, d, case)
    scale = 1 / math.sqrt(d)
    got, want = kernel(q, k, v, scale=scale), kernel(q, k, v, scale=scale, interpret=True)
    np.testing.assert_allclose(got, want, atol=1e-2)
    for h in range(2):
      np.testing.assert_allclose(got[0, :, h], _attn_ref(q[0, :, h], k[0, :, h], v[0, :, h], scale), atol=2e-2)
  q, k, v = (_rand((2, 100, 128), F16, s) for s in range(3))
  got = masked_head(q, k, v, sm_scale=0.1, HEAD_DIM=80)
  np.testing.assert_allclose(np.asarray(got[:, :, :80], np.float64),
                             np.asarray(masked_head(q, k, v, sm_scale=0.1, HEAD_DIM=80, interpret=True)[:, :, :80],
                                        np.float64), atol=1e-2)
  q, k, v = (_rand((1, 128, 2, 128), BF16, s) for s in range(3))
  got = pallas_head_mask(q, k, v, sm_scale=0.1, head_dim=96)
  want = pallas_head_mask(q, k, v, sm_scale=0.1, head_dim=96, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), atol=2e-2)
  q, kc, vc = _rand((2, 8, 128), F16, 1), _rand((2, 160, 1, 128), F16, 2), _rand((2, 160, 1, 128), F16, 3)
  lens = jnp.asarray([37, 160], jnp.int32)
  got = gqa_decode(q, kc, vc, lens, sm_scale=0.1, HEAD_DIM=96)
  want = gqa_decode(q, kc, vc, lens, sm_scale=0.1, HEAD_DIM=96, interpret=True)
  np.testing.assert_allclose(np.asarray(got[:, :, :96], np.float64), np.asarray(want[:, :, :96], np.float64), atol=1e-2)
  q, k, v = (_rand((2 * 128, 64), F16, s) for s in range(3))
  for stage, ws in [(3, True), (1, False)]:
    kw = dict(sm_scale=0.125, N_CTX=128, STAGE=stage, ws=ws)
    np.testing.assert_allclose(np.asarray(attn_descriptors(q, k, v, **kw), np.float64),
                               np.asarray(attn_descriptors(q, k, v, **kw, interpret=True), np.float64), atol=1e-2)
