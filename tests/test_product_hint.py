"""A broadcast product summed over its shared last axis, `ml.sum(a[:, None, :] * b[None, :, :], axis=2)` (a GQA
decode's scores of a few query heads against a page of keys), is a @ b.T. Its MG204 hinted storing a (64,)
vector and reshaping it outside the kernel, of no use inside a decode loop; the hint now names the product and
both ways to compute it, each checked here as followed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_3d(q, k, out):
  qv = q[...]
  kv = k[...]
  out[...] = ml.sum(qv[:, None, :] * kv[None, :, :], axis=2)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_by_rows(q, k, out):
  qv = q[...].astype(F32)
  kv = k[...].astype(F32)
  for i in ml.static_range(4):
    out.at[i][...] = ml.sum(qv[i][None, :] * kv, axis=1)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_by_dot(q, k, out):
  qv_s = ml.smem((64, q.shape[1]), q.dtype)
  kv_s = ml.smem(k.shape, k.dtype)
  ml.copy(q.at[ml.ds(0, 64), :], qv_s)
  ml.copy(k, kv_s)
  s = ml.dot(qv_s, kv_s.T)
  out.at[ml.ds(0, 64), :].store(s, mask=ml.arange(64)[:, None] < 4)


def _inputs(dtype):
  q = rand.normal(rand.key(0), (4, 64), dtype)
  k = rand.normal(rand.key(1), (16, 64), dtype)
  return q, k, np.asarray(q, np.float32) @ np.asarray(k, np.float32).T


def test_a_product_summed_over_its_last_axis_is_hinted_as_the_dot():
  with pytest.raises(mg.LayoutError) as e:
    scores_3d.check(S((4, 64), F32), S((16, 64), F32))
  src = open(__file__).read().splitlines()
  line = scores_3d.fn.__code__.co_firstlineno + 4
  assert (e.value.lineno, e.value.col_offset) == (line, src[line - 1].index("ml.sum"))
  assert e.value.code == "MG204"
  assert e.value.message.startswith("ml.sum over axis 2 of a 3-D tensor (4, 16, 64)")
  assert e.value.hint.startswith("this is qv @ kv.T, which ml.dot computes on the tensor cores: copy the operands"
                                 " into SMEM buffers of 64 and 16 rows, s = ml.dot(qv_s, kv_s.T)")
  assert "out.at[ml.ds(0, 64), :].store(s, mask=ml.arange(64)[:, None] < 4)" in e.value.hint
  assert "ml.sum(qv[i][None, :] * kv, axis=1) for i in ml.static_range(4)" in e.value.hint


@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16], ids=["f32", "bf16"])
def test_both_ways_the_hint_offers_compute_the_scores(dtype):
  q, k, want = _inputs(dtype)
  tol = 1e-4 if dtype == F32 else 0.3
  np.testing.assert_allclose(scores_by_rows(q, k, interpret=True), want, rtol=1e-2, atol=tol)
  np.testing.assert_allclose(scores_by_dot(q, k, interpret=True), want, rtol=3e-2, atol=0.3)
  for kernel in (scores_by_rows, scores_by_dot):
    exported = jax.export.export(jax.jit(kernel), platforms=["cuda"])(S(q.shape, dtype), S(k.shape, dtype))
    assert "mosaic_gpu" in exported.mlir_module()


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_of_reads(q, k, out):
  out[...] = ml.sum(q[...][:, None, :] * k[...][None, :, :], axis=2)


@mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
def scores_of_reads_by_rows(q, k, out):
  for i in ml.static_range(4):
    out.at[i][...] = ml.sum(q[...][i][None, :] * k[...], axis=1)


def test_the_product_of_whole_reads_is_hinted_by_the_refs_names():
  with pytest.raises(mg.LayoutError) as e:
    scores_of_reads.check(S((4, 64), F32), S((16, 64), F32))
  assert e.value.lineno == scores_of_reads.fn.__code__.co_firstlineno + 2
  assert e.value.hint.startswith("this is q @ k.T, which ml.dot computes on the tensor cores: copy the operands"
                                 " into SMEM buffers of 64 and 16 rows, s = ml.dot(q_s, k_s.T)")
  assert "ml.sum(q[...][i][None, :] * k[...], axis=1) for i in ml.static_range(4)" in e.value.hint
  q, k, want = _inputs(F32)
  np.testing.assert_allclose(scores_of_reads_by_rows(q, k, interpret=True), want, rtol=1e-2, atol=1e-4)


def test_other_reductions_of_a_product_keep_their_hint():
  @mg.mgpu_kernel(out_shape=lambda q, k: S((q.shape[0], k.shape[0]), F32))
  def maxed(q, k, out):
    qv = q[...]
    kv = k[...]
    out[...] = ml.max(qv[:, None, :] * kv[None, :, :], axis=2)
  # (probe 43a: the (4, 16) statistic computes; stored whole it was MG204 with its vector's form as the hint (no
  # ml.dot); since probe 44f it is stored a row at a time)
  rng = np.random.default_rng(7)
  q, k = rng.standard_normal((4, 64)).astype(np.float32), rng.standard_normal((16, 64)).astype(np.float32)
  np.testing.assert_allclose(maxed(q, k, interpret=True), np.max(q[:, None, :] * k[None, :, :], axis=2), rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16], ids=["f32", "bf16"])
def test_gpu_both_ways_compute_the_scores(dtype):
  q, k, want = _inputs(dtype)
  np.testing.assert_allclose(jax.jit(scores_by_rows)(q, k), want, rtol=1e-2, atol=1e-4 if dtype == F32 else 0.3)
  np.testing.assert_allclose(jax.jit(scores_by_dot)(q, k), want, rtol=3e-2, atol=0.3)
