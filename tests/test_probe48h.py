"""Probe 48h (Pallas kernels ported unchanged): the Pallas GPU ops' (layer_norm, attention, decode_attention) and the
Pallas docs' spellings that stopped a port at an MG003 hint, although they have one meaning a kernel can run:
JAX's control flow of the kernel's own helpers (`lax.fori_loop(0, n, body, (o, m, l))`, `lax.while_loop`,
`lax.cond(p, lambda: a, lambda: b)`, `lax.switch`) runs as the Python loop or if it means (frontend/lax_flow.py);
`jnp.dot`, `@`, `jnp.matmul` and `lax.dot_general` of tiles read from refs compute as the ml.dot they mean, which
stages register operands into SMEM (float32 A tiles read from GMEM too); `jnp.zeros_like(acc_ref)` of a ref is
`ml.zeros(acc_ref.shape, acc_ref.dtype)`."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32, I32 = jnp.float16, jnp.bfloat16, jnp.float32, jnp.int32


def _rand(shape, dtype=F32, seed=0):
  return np.asarray(np.random.default_rng(seed).standard_normal(shape)).astype(dtype)


def _f32(a):
  return np.asarray(a, np.float32)


def _export(kernel, *args, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  text = jax.export.export(fn, platforms=["cuda"])(*[S(np.shape(a), np.asarray(a).dtype) for a in args]).mlir_module()
  assert "mosaic_gpu" in text
  return text


# ---------------------------------------------------------------- lax.fori_loop of the kernel's helpers
@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[1] // 64, q.shape[0]))
def flash_fwd(q_ref, k_ref, v_ref, o_ref, block_q: ml.constexpr = 64, block_k: ml.constexpr = 64,
              causal: ml.constexpr = True, sm_scale: ml.constexpr = 0.125):
  """Pallas's attention.py forward, ported with pl.* -> ml.* only."""
  start_q, bh = ml.program_id(0), ml.program_id(1)
  seq_len, head_dim = k_ref.shape[1], q_ref.shape[-1]
  m_i = jnp.zeros(block_q, dtype=jnp.float32) - float('inf')
  l_i = jnp.zeros(block_q, dtype=jnp.float32)
  o = jnp.zeros((block_q, head_dim), dtype=jnp.float32)
  curr_q_slice = ml.ds(start_q * block_q, block_q)
  q = q_ref[bh, curr_q_slice, :]

  def body(start_k, carry):
    o_prev, m_prev, l_prev = carry
    curr_k_slice = ml.ds(start_k * block_k, block_k)
    k = k_ref[bh, curr_k_slice, :]
    qk = jnp.dot(q, k.T, preferred_element_type=jnp.float32) * sm_scale
    if causal:
      span_q = start_q * block_q + jnp.arange(block_q)
      span_k = start_k * block_k + jnp.arange(block_k)
      qk = jnp.where(span_q[:, None] >= span_k[None, :], qk, jnp.finfo(qk.dtype).min)
    m_next = jnp.maximum(m_prev, jnp.max(qk, axis=-1))
    correction = jnp.exp(m_prev - m_next)
    s_curr = jnp.exp(qk - m_next[:, None])
    l_next = correction * l_prev + s_curr.sum(axis=-1)
    v = v_ref[bh, curr_k_slice, :]
    o_next = correction[:, None] * o_prev + jnp.dot(s_curr.astype(v.dtype), v, preferred_element_type=jnp.float32)
    return o_next, m_next, l_next

  upper_bound = lax.div(block_q * (start_q + 1) + block_k - 1, block_k) if causal else ml.cdiv(seq_len, block_k)
  o, m_i, l_i = lax.fori_loop(0, upper_bound, body, (o, m_i, l_i))
  o_ref[bh, curr_q_slice, :] = (o / l_i[:, None]).astype(o_ref.dtype)


def _attention(q, k, v, causal=True):
  s = np.einsum("bqd,bkd->bqk", _f32(q), _f32(k)) * 0.125
  if causal:
    s = np.where(np.tril(np.ones(s.shape[1:], bool)), s, -np.inf)
  p = np.exp(s - s.max(-1, keepdims=True))
  return np.einsum("bqk,bkd->bqd", p / p.sum(-1, keepdims=True), _f32(v))


def test_flash_attention_fori_loop_with_a_tuple_carry_runs_as_its_loop():
  """`o, m_i, l_i = lax.fori_loop(0, upper_bound, body, (o, m_i, l_i))` was MG003 whose hint wrote the loop."""
  q, k, v = (_rand((1, 128, 64), F16, s) for s in range(3))
  got = flash_fwd(q, k, v, interpret=True)
  np.testing.assert_allclose(_f32(got), _attention(q, k, v), rtol=2e-2, atol=2e-2)
  _export(flash_fwd, q, k, v)


@mg.mgpu_kernel(out_shape=lambda x, w, b: (x, S(x.shape[:1], F32), S(x.shape[:1], F32)), grid=lambda x, w, b: (x.shape[0],))
def layer_norm(x_ref, weight_ref, bias_ref, o_ref, mean_ref, rstd_ref, eps: ml.constexpr = 1e-5,
               block_size: ml.constexpr = 128):
  """Pallas's layer_norm.py forward (one row a program, as its vmap of a grid=() call runs)."""
  r = ml.program_id(0)
  n_col = x_ref.shape[1]

  def mean_body(i, acc):
    col_idx = i * block_size + jnp.arange(block_size)
    a = ml.load(x_ref.at[r, col_idx], mask=col_idx < n_col, other=0.0).astype(jnp.float32)
    return acc + a

  mean = lax.fori_loop(0, ml.cdiv(n_col, block_size), mean_body, init_val=jnp.zeros(block_size)).sum() / n_col

  def var_body(i, acc):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    a = ml.load(x_ref.at[r, col_idx], mask=mask, other=0.0).astype(jnp.float32)
    a = jnp.where(mask, a - mean, 0.)
    return acc + a * a

  var = lax.fori_loop(0, ml.cdiv(n_col, block_size), var_body, init_val=jnp.zeros(block_size)).sum() / n_col
  rstd = 1 / jnp.sqrt(var + eps)
  mean_ref[r] = mean
  rstd_ref[r] = rstd

  def body(i, carry):
    col_idx = i * block_size + jnp.arange(block_size)
    mask = col_idx < n_col
    weight = ml.load(weight_ref.at[col_idx], mask=mask)
    bias = ml.load(bias_ref.at[col_idx], mask=mask)
    x = ml.load(x_ref.at[r, col_idx], mask=mask, other=0.0).astype(jnp.float32)
    ml.store(o_ref.at[r, col_idx], ((x - mean) * rstd * weight + bias).astype(o_ref.dtype), mask=mask)
    return carry

  lax.fori_loop(0, ml.cdiv(n_col, block_size), body, None)     # (Pallas's @pl.loop body: no carry)


def _layer_norm(x, w, b):
  x = _f32(x)
  m, v = x.mean(1), x.var(1)
  rs = 1 / np.sqrt(v + 1e-5)
  return (x - m[:, None]) * rs[:, None] * _f32(w) + _f32(b), m, rs


def test_layer_norm_fori_loops_of_nested_defs_and_a_none_carry():
  x, w, b = _rand((4, 300), F32, 3), _rand((300,), F32, 4), _rand((300,), F32, 5)
  for got, want in zip(layer_norm(x, w, b, interpret=True), _layer_norm(x, w, b)):
    np.testing.assert_allclose(_f32(got), want, rtol=1e-4, atol=1e-4)
  _export(layer_norm, x, w, b)


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(1,))
def while_and_dict(x_ref, n_ref, o_ref):
  def body(c):
    k, acc = c
    return k + 1, acc + x_ref[ml.ds(k * 128, 128)]
  _, acc = lax.while_loop(lambda c: c[0] < n_ref[0], body, (0, jnp.zeros((128,), jnp.float32)))

  def twice(i, c):
    return {"a": c["a"] + 1.0, "b": c["b"] * 2.0}
  c = lax.fori_loop(0, 3, twice, {"a": acc, "b": jnp.ones((128,), jnp.float32)})
  o_ref[ml.ds(0, 128)] = c["a"]
  o_ref[ml.ds(128, 128)] = c["b"]


def test_while_loop_of_a_run_time_bound_and_a_dict_carry():
  x = _rand((256,), F32, 6)
  for n in (0, 2):
    got = _f32(while_and_dict(x, np.array([n], np.int32), interpret=True))
    np.testing.assert_allclose(got[:128], x[:n * 128].reshape(n, 128).sum(0) + 3.0, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got[128:], np.full(128, 8.0))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def cond_and_switch(x_ref, o_ref):
  i = ml.program_id(0)
  v = x_ref[ml.ds(i * 64, 64)]
  w = jax.lax.cond(i >= 2, lambda: v * 2.0, lambda: v - 1.0)           # (decode_attention.py's form)
  o_ref[ml.ds(i * 64, 64)] = lax.switch(i - 1, [lambda t: t + 10.0, lambda t: -t, functools.partial(jnp.maximum, 0.0)], w)


def test_cond_of_lambdas_and_switch_of_a_clamped_index():
  """lax.switch clamps its index into the branches, as jax.lax's: program 0's index -1 takes the first."""
  x = _rand((320,), F32, 7)
  w = np.where(np.arange(320) // 64 >= 2, x * 2, x - 1)
  want = np.concatenate([w[:64] + 10, w[64:128] + 10, -w[128:192], np.maximum(w[192:], 0.0)])
  np.testing.assert_allclose(_f32(cond_and_switch(x, interpret=True)), want, rtol=1e-6)
  _export(cond_and_switch, x)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=(1,))
def carry_narrowed(x_ref, o_ref):
  def body(j, acc):
    return acc + x_ref[ml.ds(j * 64, 64)]
  acc = lax.fori_loop(0, 4, body, jnp.zeros((64,), jnp.float16))
  o_ref[0] = jnp.sum(acc)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,))
def cond_structures(x_ref, o_ref):
  i = ml.program_id(0)
  v = x_ref[ml.ds(i * 128, 128)]
  a, b = lax.cond(i == 0, lambda: (v, v), lambda: (v, v, v))
  o_ref[ml.ds(i * 128, 128)] = a + b


def plain_body(j, acc):
  return acc + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((64,), F32), grid=(1,))
def module_body(x_ref, o_ref):
  o_ref[...] = lax.fori_loop(0, 4, plain_body, jnp.zeros((64,), jnp.float32))


def test_a_carry_whose_dtype_changes_is_named_by_the_body_and_a_module_body_keeps_its_hint():
  """jax.lax's "body_fun output and input must have identical types" in the kernel's words: the carry by the
  body's name for it, the fix in the body's return; branches of two structures at the call (it was "cannot unpack
  a Python Unbound"); a plain module function as the body was still MG003, whose hint decorated it @ml.inline: since
  probe 52b a plain function of the user's is a helper, and the loop computes."""
  expect(carry_narrowed, [S((256,), F32)], mg.LoopCarryTypeError, "lax.fori_loop(0, 4, body",
         "acc enters the loop as a float16 tensor of shape (64,) but an iteration makes it a float32 tensor of shape"
         " (64,)", hint="convert it back where body returns it: return (...).astype(jnp.float16)")
  expect(cond_structures, [S((256,), F32)], mg.KernelTypeError, "lax.cond(i == 0",
         "the branches of lax.cond return different kinds of values",
         hint="return one structure from every branch (jax.lax requires it): a tuple of as many values, each of one"
              " shape and dtype")
  np.testing.assert_array_equal(np.asarray(module_body(np.zeros((256,), np.float32), interpret=True)),
                                np.full((64,), 4.0, np.float32))


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0],))
def rms_scale(x_ref, w_ref, o_ref, block: ml.constexpr = 256):
  """A def under `@functools.partial(lax.fori_loop, ...)` (JAX's loop decorator) binds its name to the carry."""
  r, n = ml.program_id(0), x_ref.shape[1]

  @functools.partial(lax.fori_loop, 0, ml.cdiv(n, block), init_val=jnp.zeros((block,), jnp.float32))
  def sq(i, acc):
    cols = i * block + jnp.arange(block)
    x = ml.load(x_ref.at[r, cols], mask=cols < n, other=0.0).astype(jnp.float32)
    return acc + x * x

  rstd = lax.rsqrt(sq.sum() / n + 1e-6)
  for i in range(ml.cdiv(n, block)):
    cols = i * block + jnp.arange(block)
    x = ml.load(x_ref.at[r, cols], mask=cols < n, other=0.0).astype(jnp.float32)
    ml.store(o_ref.at[r, cols], (x * rstd * ml.load(w_ref.at[cols], mask=cols < n)).astype(o_ref.dtype), mask=cols < n)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def ml_fori(x_ref, o_ref):
  o_ref[...] = ml.fori_loop(0, 4, lambda i, c: c + 1.0, x_ref[...])


def test_a_fori_loop_decorator_and_the_ml_spelling_of_pallas_names():
  """`ml.fori_loop` (a pl. -> ml. rename) said "check the spelling": it names jax.lax's call now; `ml.dslice` is
  `ml.ds`, as pl.dslice is pl.ds."""
  x, w = _rand((3, 600), F16, 14), _rand((600,), F16, 15)
  want = _f32(x) / np.sqrt((_f32(x) ** 2).mean(-1, keepdims=True) + 1e-6) * _f32(w)
  np.testing.assert_allclose(_f32(rms_scale(x, w, interpret=True)), want, rtol=2e-2, atol=2e-2)
  expect(ml_fori, [S((128,), F32)], mg.UnknownNameError, "ml.fori_loop(", "ml has no attribute 'fori_loop'",
         hint="no ml.fori_loop: call jax.lax.fori_loop(lower, upper, body, init) itself (it runs as the loop it"
              " means), or write the loop: for i in range(lower, upper): carry = body(i, carry)")
  assert ml.dslice is ml.ds


# ---------------------------------------------------------------- pages gathered by a vector of ids
@mg.mgpu_kernel(out_shape=lambda q, kp, vp, bt, ln: q, grid=(1,))
def paged_attention(q_ref, k_pages_ref, v_pages_ref, block_tables_ref, lengths_ref, o_ref, pages_per_block: ml.constexpr = 8):
  """Pallas's paged_attention.py, one partition: `k_pages_ref[block_tables].reshape(block_k, head_dim)`."""
  block_h, head_dim = q_ref.shape
  page_size = k_pages_ref.shape[-2]
  block_k = pages_per_block * page_size

  def _compute(end_page_idx, o, m_i, l_i):
    q = q_ref[...]

    def body(start_k, carry):
      o_prev, m_prev, l_prev = carry
      block_tables = block_tables_ref[ml.ds(start_k * pages_per_block, pages_per_block)]
      k = k_pages_ref[block_tables].reshape(block_k, head_dim)
      v = v_pages_ref[block_tables].reshape(block_k, head_dim)
      logits = jnp.dot(q, k.T, preferred_element_type=jnp.float32)
      mask = jnp.arange(block_k) + start_k * block_k < lengths_ref[0]
      logits = jnp.where(lax.broadcast_in_dim(mask, (block_h, block_k), (1,)), logits, -1e30)
      m_next = jnp.maximum(m_prev, logits.max(axis=-1))
      correction = jnp.exp(m_prev - m_next)
      s_curr = jnp.exp(logits - m_next[:, None])
      o_next = correction[:, None] * o_prev + jnp.dot(s_curr.astype(v.dtype), v, preferred_element_type=jnp.float32)
      return o_next, m_next, correction * l_prev + s_curr.sum(axis=-1)

    return lax.fori_loop(0, ml.cdiv(end_page_idx, pages_per_block), body, (o, m_i, l_i))

  m_i = jnp.zeros(block_h, dtype=jnp.float32) + jnp.finfo(jnp.float32).min
  l_i = jnp.zeros(block_h, dtype=jnp.float32)
  o = jnp.zeros((block_h, head_dim), dtype=jnp.float32)
  end_page_idx = jnp.minimum(ml.cdiv(lengths_ref[0], page_size), block_tables_ref.shape[0])
  o, m_i, l_i = jax.lax.cond(0 >= end_page_idx, lambda: (o, m_i, l_i), lambda: _compute(end_page_idx, o, m_i, l_i))
  o_ref[...] = (o / l_i[:, None]).astype(o_ref.dtype)


def _paged(q, kp, vp, bt, ln):
  k, v = (_f32(p[bt]).reshape(-1, kp.shape[-1])[:ln[0]] for p in (kp, vp))
  s = _f32(q) @ k.T
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ v


def _paged_inputs():
  q = _rand((16, 64), F16, 19)
  kp, vp = _rand((24, 16, 64), F16, 20), _rand((24, 16, 64), F16, 21)
  bt = np.random.default_rng(22).permutation(24)[:16].astype(np.int32)
  return q, kp, vp, bt, np.array([200], np.int32)


def test_pages_gathered_by_a_vector_of_ids_are_stacked():
  """`k_pages_ref[block_tables]` of (pages, page_size, head_dim) pages was MG204 ("this gather gives a 3-D
  result"), whose hint read the pages in a static loop: it is that loop's stack of pages now."""
  args = _paged_inputs()
  np.testing.assert_allclose(_f32(paged_attention(*args, interpret=True)), _paged(*args), rtol=2e-2, atol=2e-2)
  _export(paged_attention, *args)


# ---------------------------------------------------------------- jnp.dot, @ and dot_general of tiles
@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0], y.shape[1]), F32),
                grid=lambda x, y: (x.shape[0] // 64, y.shape[1] // 64))
def matmul_blocks(x_ref, y_ref, z_ref, bk: ml.constexpr = 64):
  """The Pallas docs' matmul: each program's (64, 64) block, K in steps, float32 inputs as the docs' example."""
  i, j = ml.program_id(0), ml.program_id(1)
  acc = jnp.zeros((64, 64), jnp.float32)
  for k in range(x_ref.shape[1] // bk):
    acc += jnp.dot(x_ref[ml.ds(i * 64, 64), ml.ds(k * bk, bk)], y_ref[ml.ds(k * bk, bk), ml.ds(j * 64, 64)])
  z_ref[ml.ds(i * 64, 64), ml.ds(j * 64, 64)] = acc


@mg.mgpu_kernel(out_shape=lambda x, y: (S((x.shape[0], y.shape[0]), F32), S((x.shape[0], y.shape[1]), x.dtype),
                                        S((x.shape[1], y.shape[1]), F32)), grid=(1,))
def products(x_ref, y_ref, nt_ref, nn_ref, tn_ref):
  x, y = x_ref[...], y_ref[...]
  nt_ref[...] = lax.dot_general(x, y, (((1,), (1,)), ((), ())), preferred_element_type=jnp.float32)
  nn_ref[...] = x @ y                         # jnp's float16 (or bfloat16) product
  tn_ref[...] = jnp.dot(x.T, y, preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32), grid=(1,))
def scores(q_ref, k_ref, s_ref):
  s_ref[...] = jnp.einsum("qd,kd->qk", q_ref[...], k_ref[...], preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32), grid=(1,))
def mixed(x_ref, w_ref, o_ref):
  o_ref[...] = jnp.dot(x_ref[...], w_ref[...])          # float16 x float32: jnp's float32 product


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def with_precision(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=lax.Precision.DEFAULT, preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(1,))
def highest(a_ref, b_ref, o_ref):
  o_ref[...] = jnp.dot(a_ref[...], b_ref[...], precision=lax.Precision.HIGHEST)


def test_jnp_dots_precision_is_ml_dots_and_highest_on_float32_is_named_as_written():
  a, b = _rand((64, 64), F16, 17), _rand((64, 64), F16, 18)
  np.testing.assert_allclose(_f32(with_precision(a, b, interpret=True)), _f32(a) @ _f32(b), rtol=2e-2, atol=5e-2)
  e = expect(highest, [S((64, 64), F32)] * 2, mg.UnsupportedDtypeError, "jnp.dot(a_ref[...], b_ref[...], precision",
             "jnp.dot (as ml.dot) with precision=Precision.HIGHEST: the tensor cores read float32 operands as TF32 (10 mantissa"
             " bits), lax.Precision.DEFAULT's meaning on the GPU")
  assert e.hint.startswith("drop precision for TF32")


def test_jnp_dot_matmul_and_dot_general_of_tiles_read_from_refs():
  """Each was MG003 ("dot cannot take a register tensor inside a kernel") or MG001 (the operator @) whose hint staged
  the operands into SMEM, which ml.dot does itself; so was jnp.einsum of two tiles."""
  x, y = _rand((128, 128), F32, 8), _rand((128, 128), F32, 9)
  np.testing.assert_allclose(_f32(matmul_blocks(x, y, interpret=True)), x @ y, rtol=2e-2, atol=2e-1)
  _export(matmul_blocks, x, y)
  for dt in (F16, BF16):
    a, b = _rand((64, 64), dt, 10), _rand((64, 64), dt, 11)
    nt, nn, tn = products(a, b, interpret=True)
    np.testing.assert_allclose(_f32(nt), _f32(a) @ _f32(b).T, rtol=2e-2, atol=5e-2)
    assert np.asarray(nn).dtype == np.dtype(dt)
    np.testing.assert_allclose(_f32(nn), _f32(a) @ _f32(b), rtol=5e-2, atol=2e-1)
    np.testing.assert_allclose(_f32(tn), _f32(a).T @ _f32(b), rtol=2e-2, atol=5e-2)
  _export(products, a, b)
  np.testing.assert_allclose(_f32(scores(a, b, interpret=True)), _f32(a) @ _f32(b).T, rtol=2e-2, atol=5e-2)
  w = _rand((64, 64), F32, 16)
  np.testing.assert_allclose(_f32(mixed(a, w, interpret=True)), _f32(a) @ w, rtol=2e-2, atol=1e-1)


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0], y.shape[1]), F32),
                grid=lambda x, y: (x.shape[0] // 64, y.shape[1] // 64))
def matmul_scratch(x_ref, y_ref, z_ref, bk: ml.constexpr = 64):
  """Pallas's accumulate-then-store: zero a scratch at the first K step, store it at the last."""
  i, j = ml.program_id(0), ml.program_id(1)
  acc_ref = ml.smem((64, 64), jnp.float32)
  nk = x_ref.shape[1] // bk

  def step(k, carry):
    if k == 0:
      acc_ref[...] = jnp.zeros_like(acc_ref)
    acc_ref[...] += jnp.dot(x_ref[ml.ds(i * 64, 64), ml.ds(k * bk, bk)], y_ref[ml.ds(k * bk, bk), ml.ds(j * 64, 64)],
                            preferred_element_type=jnp.float32)
    if k == nk - 1:
      z_ref[ml.ds(i * 64, 64), ml.ds(j * 64, 64)] = acc_ref[...]
    return carry

  lax.fori_loop(0, nk, step, 0)


def test_zeros_like_of_a_scratch_ref_and_an_accumulate_then_store_loop():
  """`jnp.zeros_like(acc_ref)` was MG003 ("zeros_like cannot take an SMEM ref") whose hint wrote ml.zeros."""
  x, y = _rand((64, 192), F16, 12), _rand((192, 128), F16, 13)
  np.testing.assert_allclose(_f32(matmul_scratch(x, y, interpret=True)), _f32(x) @ _f32(y), rtol=2e-2, atol=1e-1)
  _export(matmul_scratch, x, y)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_ported_pallas_loops_match_numpy():
  q, k, v = (_rand((2, 128, 64), F16, s) for s in range(3))
  np.testing.assert_allclose(_f32(flash_fwd(q, k, v)), _attention(q, k, v), rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(_f32(flash_fwd(q, k, v, causal=False)), _attention(q, k, v, False), rtol=2e-2, atol=2e-2)
  x, w, b = _rand((4, 300), F32, 3), _rand((300,), F32, 4), _rand((300,), F32, 5)
  for got, want in zip(layer_norm(x, w, b), _layer_norm(x, w, b)):
    np.testing.assert_allclose(_f32(got), want, rtol=1e-4, atol=1e-4)
  x = _rand((256,), F32, 6)
  for n in (0, 2):
    np.testing.assert_allclose(_f32(while_and_dict(x, np.array([n], np.int32))),
                               _f32(while_and_dict(x, np.array([n], np.int32), interpret=True)), rtol=1e-5, atol=1e-5)
  x = _rand((320,), F32, 7)
  np.testing.assert_allclose(_f32(cond_and_switch(x)), _f32(cond_and_switch(x, interpret=True)), rtol=1e-6)
  x, w = _rand((3, 600), F16, 14), _rand((600,), F16, 15)
  np.testing.assert_allclose(_f32(rms_scale(x, w)), _f32(rms_scale(x, w, interpret=True)), rtol=1e-2, atol=1e-2)


@pytest.mark.gpu
def test_gpu_paged_attention_matches_numpy():
  args = _paged_inputs()
  np.testing.assert_allclose(_f32(paged_attention(*args)), _paged(*args), rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
def test_gpu_ported_pallas_products_match_numpy():
  x, y = _rand((128, 256), F32, 8), _rand((256, 128), F32, 9)
  np.testing.assert_allclose(_f32(matmul_blocks(x, y)), x @ y, rtol=2e-2, atol=2e-1)
  for dt in (F16, BF16):
    a, b = _rand((64, 64), dt, 10), _rand((64, 64), dt, 11)
    nt, nn, tn = products(a, b)
    np.testing.assert_allclose(_f32(nt), _f32(a) @ _f32(b).T, rtol=2e-2, atol=5e-2)
    np.testing.assert_allclose(_f32(nn), _f32(a) @ _f32(b), rtol=5e-2, atol=2e-1)
    np.testing.assert_allclose(_f32(tn), _f32(a).T @ _f32(b), rtol=2e-2, atol=5e-2)
    np.testing.assert_allclose(_f32(scores(a, b)), _f32(a) @ _f32(b).T, rtol=2e-2, atol=5e-2)
    w = _rand((64, 64), F32, 16)
    np.testing.assert_allclose(_f32(mixed(a, w)), _f32(a) @ w, rtol=2e-2, atol=1e-1)
  x, y = _rand((128, 192), F16, 12), _rand((192, 128), F16, 13)
  np.testing.assert_allclose(_f32(matmul_scratch(x, y)), _f32(x) @ _f32(y), rtol=2e-2, atol=1e-1)
