"""An output written from registers and then read by a TMA load in the same CTA: the generic
proxy's writes reach the TMA engine (the async proxy) only through a proxy fence for global
memory and a barrier (frontend/sync.py, `proxy_back`). Was: no barrier and no fence, so the load
could read the elements before the other threads had stored them."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mlir_barriers import named_barriers

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: x)
def write_then_load(x, out):
  out.at[ml.ds(0, 64)][...] = x.at[ml.ds(0, 64)][...] * 2.0
  buf = ml.smem((64, 128))
  ml.copy(out.at[ml.ds(0, 64)], buf)
  out.at[ml.ds(64, 64)][...] = buf[...] + 1.0


@mg.mgpu_kernel(out_shape=lambda a: a, grid=lambda a: (a.shape[1] // 64,))
def running_sum(a, out):
  """Row blocks summed down the array: block k is block k - 1 of the output (stored by TMA in the
  previous step, written from registers for k = 1) plus block k of a."""
  j = ml.program_id(0)
  x_s, o_s = ml.smem((64, 64)), ml.smem((64, 64))
  out.at[ml.ds(0, 64), ml.ds(j * 64, 64)][...] = a.at[ml.ds(0, 64), ml.ds(j * 64, 64)][...]
  for k in range(1, a.shape[0] // 64):
    ml.copy(out.at[ml.ds((k - 1) * 64, 64), ml.ds(j * 64, 64)], x_s)
    o_s[...] = x_s[...] + a.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)][...]
    ml.copy(o_s, out.at[ml.ds(k * 64, 64), ml.ds(j * 64, 64)])


def _ops(kernel, *specs):
  return [l.strip().split("  #")[0] for l in kernel.typed_ir(*specs).splitlines()]


def test_a_tma_load_of_registers_output_follows_a_global_proxy_fence_and_a_barrier():
  lines = _ops(write_then_load, S((128, 128), jnp.float32))
  store = next(i for i, l in enumerate(lines) if l.startswith("store "))
  load = next(i for i, l in enumerate(lines) if l.startswith("copy ") and "slot=-1" not in l)
  assert any(l.startswith("commitshared global_=True") for l in lines[store:load])
  text = write_then_load.mlir(S((128, 128), jnp.float32))
  fence = text.index("fence.proxy.async.global")
  assert fence < text.index("cp.async.bulk.tensor.shared.cluster.global")
  assert named_barriers(text[fence:text.index("cp.async.bulk.tensor.shared.cluster.global")])


def test_a_loop_reading_back_what_registers_wrote_before_it_fences_at_its_entry():
  lines = _ops(running_sum, S((512, 128), jnp.float32))
  loop = next(i for i, l in enumerate(lines) if " for " in f" {l}" or l.startswith("for "))
  assert lines[loop - 1] == "commitshared global_=True only_global=True"


def test_kernels_that_do_not_read_back_keep_their_shared_only_fences():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def staged(x, out):
    buf = ml.smem((128, 128))
    buf[...] = x[...] * 2.0
    ml.copy(buf, out)
  lines = _ops(staged, S((128, 128), jnp.float32))
  assert [l.strip() for l in lines if l.startswith("commitshared")] == ["commitshared"]
  assert "fence.proxy.async.global" not in staged.mlir(S((128, 128), jnp.float32))


def test_read_back_kernels_interpret():
  x = rand.normal(rand.key(0), (128, 128), jnp.float32)
  got = np.asarray(write_then_load(x, interpret=True))
  np.testing.assert_allclose(got[:64], np.asarray(x[:64]) * 2)
  np.testing.assert_allclose(got[64:], np.asarray(x[:64]) * 2 + 1)
  a = rand.normal(rand.key(1), (512, 128), jnp.float32)
  want = np.asarray(a).reshape(8, 64, 128).cumsum(0).reshape(512, 128)
  np.testing.assert_allclose(running_sum(a, interpret=True), want, rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def write_then_load_tiles(x, out):
  rows = ml.ds(ml.program_id(0) * 128, 128)
  out.at[rows, :][...] = x.at[rows, :][...] * 2.0
  buf = ml.smem((128, 128))
  ml.copy(out.at[rows, :], buf)
  out.at[rows, :][...] = buf[...] + 1.0


import pytest  # noqa: E402


@pytest.mark.gpu
def test_gpu_read_back_after_register_writes():
  x = rand.normal(rand.key(2), (128 * 264, 128), jnp.float32)
  np.testing.assert_allclose(jax.jit(write_then_load_tiles)(x), np.asarray(x) * 2 + 1, rtol=1e-6)
  a = rand.normal(rand.key(1), (512, 128), jnp.float32)
  want = np.asarray(a).reshape(8, 64, 128).cumsum(0).reshape(512, 128)
  np.testing.assert_allclose(jax.jit(running_sum)(a), want, rtol=1e-5, atol=1e-5)
