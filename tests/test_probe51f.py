"""Probe 51f: attention written from scratch (Triton's fused-attention tutorial, Pallas's flash attention, TMA
forms), what it met.

(1) Triton's `tl.dot(q, tl.trans(k))` and `tl.dot(p, v)` of loaded register tiles: the compiler stores a register B
into an SMEM buffer of its own, and a mistake in such a call (a K tile passed untransposed, `ml.trans(v)` for `v`,
mixed 16-bit dtypes) was reported in the compiler's words, naming that buffer: `ml.dot of q (64, 64) and k_s (32, 64)`,
hint `k_s views a buffer stored (k, n) = (64, 32): pass the buffer itself, ml.dot(q, the buffer)`; or `dot operand b.T`;
or a dtype hint allocating the compiler's `v_s` anew. They are checked on the operands as written now
(frontend/ops/dot_register_checks.py). (2) A float32 (TF32) flash attention with K and V copied by TMA,
`ml.dot(p, v_s, acc)` of a float32 `p`, was MG106, whose hint staged `p` into SMEM and transposed `v_s` once by hand:
the compiler does both now (ops/dot_staging.py, k_major_b), also for a decode's few query rows."""
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


def test_a_float32_v_tile_of_a_narrow_head_keeps_its_hint():
  """head_dim 64 computes; head_dim 32: V's (32, 64) transpose is a buffer registers cannot fill (64 rows at a
  time), so MG106 and its hint (load the tile transposed from the transposed array) stand."""
  tma_f32.check(*[S((1, 64, 2, 64), F32)] * 3, scale=0.125)
  e = expect(tma_f32, [S((1, 64, 2, 32), F32)] * 3, mg.UnsupportedDtypeError, "ml.dot(p, v_s, acc * alpha[:, None])",
             "ml.dot takes operand a from registers in bfloat16 or float16 only, got p (float32)", scale=0.125)
  assert "load its tile as (n, k) = (32, 64) from the transposed array" in e.hint


@pytest.mark.gpu
def test_gpu_probe51f_kernels_match_interpret_mode_and_numpy():
  q, k, v = (_rand((2, 128, 64), F16, s) for s in range(3))
  got = as_written(q, k, v, sm_scale=0.125)
  for z in range(2):
    np.testing.assert_allclose(np.asarray(got[z], np.float64), _attn_ref(q[z], k[z], v[z], 0.125), atol=2e-2)
  for case, (kernel, sq, skv, d) in enumerate(F32_CASES):
    q, k, v = _f32_args(sq, skv, d, case)
    scale = 1 / math.sqrt(d)
    got, want = kernel(q, k, v, scale=scale), kernel(q, k, v, scale=scale, interpret=True)
    np.testing.assert_allclose(got, want, atol=1e-2)
    for h in range(2):
      np.testing.assert_allclose(got[0, :, h], _attn_ref(q[0, :, h], k[0, :, h], v[0, :, h], scale), atol=2e-2)
