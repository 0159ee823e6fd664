"""Probe 49h, second file: Pallas's paged attention with fewer than 8 pages a block. `block_tables_ref[ml.ds(k * 4,
4)]` made a vector of 4 page ids, which no register layout holds (MG204); the pages gathered by it now read each id
as a scalar of the table (frontend/page_gathers.py), so the vector is never used and is dropped."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax import lax

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _rand(shape, seed, dtype=F16):
  return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


@mg.mgpu_kernel(out_shape=lambda q, kp, vp, bt, ln, **kw: q, grid=(1,))
def paged_attention(q_ref, k_pages_ref, v_pages_ref, block_tables_ref, lengths_ref, o_ref, *,
                    pages_per_compute_block: ml.constexpr):
  """Pallas's paged_attention.py, one partition, as written (its pages_per_compute_block of 2 or 4)."""
  block_h, head_dim = q_ref.shape
  page_size = k_pages_ref.shape[-2]
  block_k = pages_per_compute_block * page_size
  q = q_ref[...]

  def body(start_k, carry):
    o_prev, m_prev, l_prev = carry
    block_tables = block_tables_ref[ml.ds(start_k * pages_per_compute_block, pages_per_compute_block)]
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

  m_i = jnp.zeros(block_h, dtype=jnp.float32) + jnp.finfo(jnp.float32).min
  l_i = jnp.zeros(block_h, dtype=jnp.float32)
  o = jnp.zeros((block_h, head_dim), dtype=jnp.float32)
  n = ml.cdiv(ml.minimum(ml.cdiv(lengths_ref[0], page_size), block_tables_ref.shape[0]), pages_per_compute_block)
  o, m_i, l_i = lax.fori_loop(0, n, body, (o, m_i, l_i))
  o_ref[...] = (o / l_i[:, None]).astype(o_ref.dtype)


def _inputs():
  q = _rand((16, 64), 1)
  kp, vp = _rand((24, 16, 64), 2), _rand((24, 16, 64), 3)
  bt = np.random.default_rng(4).permutation(24)[:16].astype(np.int32)
  return q, kp, vp, bt, np.array([200], np.int32)


def _want(q, kp, vp, bt, ln):
  k, v = (np.asarray(p[bt], np.float32).reshape(-1, kp.shape[-1])[:ln[0]] for p in (kp, vp))
  s = np.asarray(q, np.float32) @ k.T
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ v


def test_paged_attention_with_four_and_two_pages_a_block():
  args = _inputs()
  for pages in (4, 2):
    got = paged_attention(*args, interpret=True, pages_per_compute_block=pages)
    np.testing.assert_allclose(np.asarray(got, np.float32), _want(*args), rtol=2e-2, atol=2e-2)
  specs = [S(np.shape(a), np.asarray(a).dtype) for a in args]
  paged_attention.check(*specs, pages_per_compute_block=4)
  text = jax.export.export(jax.jit(lambda *a: paged_attention(*a, pages_per_compute_block=4)),
                           platforms=["cuda"])(*specs).mlir_module()
  assert "mosaic_gpu" in text
  ir = paged_attention.typed_ir(*specs, pages_per_compute_block=4)
  assert "tensor<4, int32" not in ir           # (the 4 ids are read as scalars; their vector is dropped)


@pytest.mark.gpu
def test_paged_attention_with_four_pages_a_block_on_the_gpu():
  args = _inputs()
  got = paged_attention(*args, pages_per_compute_block=4)
  np.testing.assert_allclose(np.asarray(got, np.float32), _want(*args), rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- an unchecked block pointer past the array's end
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 64),))
def unchecked_block_pointer(x_ptr, o_ptr):
  M, N = x_ptr.shape
  xb = ml.make_block_ptr(x_ptr, (M, N), (N, 1), (ml.program_id(0) * 64, 0), (64, 64), (1, 0))
  v = ml.load(xb)
  ob = ml.make_block_ptr(o_ptr, (M, N), (N, 1), (ml.program_id(0) * 64, 0), (64, 64), (1, 0))
  ml.store(ob, v * 2.0, boundary_check=(0, 1))


def test_an_unchecked_block_pointer_read_past_the_end_hints_its_boundary_check():
  """Its MG203 hint wrote a mask of `x_ptr.at[...]`, a window the kernel never wrote: it names the pointer's
  boundary_check= now."""
  from locate import expect
  expect(unchecked_block_pointer, [S((100, 64), F32)], mg.IndexOutOfBoundsError, "ml.load(xb)",
         "this register read touches x_ptr[64:128, 0:64] in program (1, 0, 0), outside x_ptr's shape (100, 64)",
         hint="check the block pointer's bounds: ml.load(xb, boundary_check=(0, 1), padding_option=\"zero\") reads"
              " zeros past its shape")


# ---------------------------------------------------------------- batched block pointers: a block axis of 1
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], a.shape[1], b.shape[2]), a.dtype),
                grid=lambda a, b: (a.shape[1] // 64, b.shape[2] // 64, a.shape[0]))
def batched_block_ptr_matmul(a_ptr, b_ptr, c_ptr):
  """3-D block pointers of blocks (1, BM, BK), every axis checked: the batch axis is an index (MG204 at the
  boundary mask's 3-D broadcast before probe 49h)."""
  B, M, K = a_ptr.shape
  N = b_ptr.shape[2]
  pm, pn, bz = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  ab = ml.make_block_ptr(a_ptr, (B, M, K), (M * K, K, 1), (bz, pm * 64, 0), (1, 64, 32), (2, 1, 0))
  bb = ml.make_block_ptr(b_ptr, (B, K, N), (K * N, N, 1), (bz, 0, pn * 64), (1, 32, 64), (2, 1, 0))
  acc = ml.zeros((64, 64), jnp.float32)
  for k in range(0, K, 32):
    a = ml.reshape(ml.load(ab, boundary_check=(0, 1, 2), padding_option="zero"), (64, 32))
    acc = ml.dot(a, ml.reshape(ml.load(bb, boundary_check=(0, 1, 2)), (32, 64)), acc)
    ab = ml.advance(ab, (0, 0, 32))
    bb = ml.advance(bb, (0, 32, 0))
  cb = ml.make_block_ptr(c_ptr, (B, M, N), (M * N, N, 1), (bz, pm * 64, pn * 64), (1, 64, 64), (2, 1, 0))
  ml.store(cb, ml.reshape(acc, (1, 64, 64)), boundary_check=(0, 1, 2))


def test_batched_block_pointers_with_a_block_axis_of_one():
  a, b = _rand((2, 128, 80), 5), _rand((2, 80, 128), 6)
  want = np.einsum("bmk,bkn->bmn", a.astype(np.float32), b.astype(np.float32))
  got = batched_block_ptr_matmul(jnp.asarray(a), jnp.asarray(b), interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=5e-2, atol=5e-2)
  specs = [S(a.shape, F16), S(b.shape, F16)]
  batched_block_ptr_matmul.check(*specs)
  assert "mosaic_gpu" in jax.export.export(jax.jit(batched_block_ptr_matmul), platforms=["cuda"])(*specs).mlir_module()


@pytest.mark.gpu
def test_batched_block_pointers_on_the_gpu():
  a, b = _rand((2, 128, 80), 7), _rand((2, 80, 128), 8)
  want = np.einsum("bmk,bkn->bmn", a.astype(np.float32), b.astype(np.float32))
  got = batched_block_ptr_matmul(jnp.asarray(a), jnp.asarray(b))
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=5e-2, atol=5e-2)
