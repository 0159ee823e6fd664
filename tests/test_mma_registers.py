"""A tensor-core instruction's accumulator block must fit the registers ptxas gives a thread at the
kernel's launch bound (frontend/mma_registers.py). Once, a 64x256 float32 block at 512 threads passed
every check and failed on the GPU as a raw "Pass pipeline failed" (ptxas C7602)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct


def _out(a, b, *, block, acc=jnp.float32):
  return S((a.shape[0], b.shape[1]), acc)


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, b, *, block, acc=jnp.float32: (a.shape[0] // (block // 2),),
                block=lambda a, b, *, block, acc=jnp.float32: block)
def wide(a, b, c, *, block: ml.constexpr, acc: ml.constexpr = jnp.float32):
  i = ml.program_id(0)
  rows = block // 2                 # 64 rows a warpgroup
  a_s = ml.smem((rows, 64), jnp.float16)
  b_s = ml.smem((64, b.shape[1]), jnp.float16)
  half = rows // 2
  ml.copy(a.at[ml.ds(i * rows, half), :], a_s.at[:half, :])
  ml.copy(a.at[ml.ds(i * rows + half, half), :], a_s.at[half:, :])
  ml.copy(b, b_s)
  c[ml.ds(i * rows, rows), :] = ml.dot(a_s, b_s, out_dtype=acc)


def _specs(block, n):
  return [S((block, 64), jnp.float16), S((64, n), jnp.float16)]


def test_a_256_column_float32_block_at_512_threads_is_rejected_at_the_dot():
  expect(wide, _specs(512, 256), mg.RegisterCapacityError, "ml.dot(a_s, b_s, out_dtype=acc)",
         "this ml.dot's 256x256 float32 accumulator: one tensor-core instruction holds a 64x256 block of it in 128"
         " registers a thread, and needs 154 in all; a CTA of 512 threads (block=512) is compiled for 128"
         " registers a thread", block=512,
         hint="use dots of at most 192 columns (a b tile of 192 columns, or several dots on column slices of b,"
              " each with its own accumulator) or block=384 or fewer threads")


def test_at_1024_threads_even_128_columns_do_not_fit():
  expect(wide, _specs(1024, 128), mg.RegisterCapacityError, "ml.dot(a_s, b_s, out_dtype=acc)",
         "this ml.dot's 512x128 float32 accumulator: one tensor-core instruction holds a 64x128 block of it in 64"
         " registers a thread, and needs 90 in all; a CTA of 1024 threads (block=1024) is compiled for 64"
         " registers a thread", block=1024,
         hint="use dots of at most 64 columns (a b tile of 64 columns, or several dots on column slices of b,"
              " each with its own accumulator) or block=640 or fewer threads")


@pytest.mark.parametrize("block,n,acc", [(512, 192, jnp.float32), (512, 256, jnp.float16), (384, 256, jnp.float32),
                                         (256, 256, jnp.float32), (1024, 64, jnp.float32)], ids=str)
def test_blocks_that_fit_build(block, n, acc):
  builds(wide, *_specs(block, n), block=block, acc=acc)


@pytest.mark.gpu
@pytest.mark.parametrize("block,n,acc", [(512, 192, jnp.float32), (512, 256, jnp.float16), (1024, 64, jnp.float32)],
                         ids=str)
def test_gpu_the_widest_blocks_that_fit_compile_and_match(block, n, acc):
  """The margin's edges on the GPU: what the check lets through, ptxas compiles."""
  ka, kb = rand.split(rand.key(block + n))
  a = rand.normal(ka, (2 * block, 64), jnp.float16)
  b = rand.normal(kb, (64, n), jnp.float16)
  got = jax.jit(lambda a, b: wide(a, b, block=block, acc=acc))(a, b)
  want = jnp.dot(a, b, preferred_element_type=jnp.float32)
  np.testing.assert_allclose(np.asarray(got, np.float32), want, rtol=2e-2, atol=2e-1)


def test_the_producer_warpgroup_counts_three_warpgroup_attention_with_256_keys():
  """examples/attention.py at bq=192 (three compute warpgroups) and 256-key blocks: 512 threads with the
  producer; the H200 run of this config stopped in ptxas (docs/logs/attn_cfg2_session27.log)."""
  import dataclasses, os, sys
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
  import attention as ex
  cfg = dataclasses.replace(ex.default_config(64, False), bq=192, bkv=256, stages=2)
  q = S((1, 1024, 2, 64), jnp.float16)
  with pytest.raises(mg.RegisterCapacityError) as info:
    jax.eval_shape(lambda q, k, v: ex.attention(q, k, v, False, config=cfg), q, q, q)
  e = info.value
  assert e.filename.endswith("attention.py") and "ml.dot(q_s, k_s.T)" in e.render()
  assert "a CTA of 512 threads (block=384 and the warp-specialised loop's producer warpgroup)" in e.message
  assert e.hint.endswith("or block=256 or fewer threads (the producer warpgroup comes on top)")
