"""Probe 20 (helpers calling the examples as a library, and writing tensor-core kernels): the
long-row softmax gave NaN for a fully masked row (finfo.min); matmul, scaled_matmul and
ragged_dot dropped a K remainder silently; paged_attention with splits not dividing the pages
per sequence (its CUDA-core default, 8, for 12 pages too) gave wrong results; elementwise.add
truncated a wider b; and inputs the row kernels do not take failed deep inside (or returned
integers). Plus hints that could not be pasted (a dtype without jnp.)."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import elementwise as EW  # noqa: E402
import layernorm as LN  # noqa: E402
import matmul as MM  # noqa: E402
import paged_attention as PA  # noqa: E402
import ragged_dot as RD  # noqa: E402
import rmsnorm as RN  # noqa: E402
import softmax as SM  # noqa: E402

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@pytest.mark.parametrize("dt,d,online", [(jnp.bfloat16, 16384, False), (jnp.bfloat16, 16384, True),
                                         (jnp.float32, 20480, False), (jnp.float32, 32768, False)])
def test_long_row_softmax_of_a_fully_masked_row_is_uniform(dt, d, online):
  """NaN: finfo.min * log2(e) overflowed to -inf, and -inf - -inf is NaN."""
  x = rand.normal(rand.key(0), (2, d)).astype(dt).at[0].set(jnp.finfo(dt).min)
  got = (SM.softmax_smem(x, online=online, interpret=True) if online else SM.softmax(x, interpret=True))
  want = jax.nn.softmax(x.astype(F32), -1)
  np.testing.assert_allclose(np.asarray(got, F32), want, rtol=1e-2 if dt == jnp.bfloat16 else 1e-5, atol=1e-7)
  assert not np.isnan(np.asarray(got, F32)).any()


def test_softmax_widths_and_inputs_it_does_not_take():
  """24704 = 193 x 128 was a raw TypeError (the mixed-rows path needs multiples of 256); a 1-D
  input was 'not enough values to unpack'; integers came back as integers."""
  np.testing.assert_allclose(SM.softmax(jnp.zeros((2, 24704)), interpret=True), 1 / 24704, rtol=1e-6)
  with pytest.raises(ValueError, match="softmax takes a 2-D array"):
    SM.softmax(jnp.ones(1024), interpret=True)
  with pytest.raises(ValueError, match="float32, float16 or bfloat16 rows, got int32"):
    SM.softmax(jnp.ones((4, 256), jnp.int32), interpret=True)
  with pytest.raises(ValueError, match="layernorm takes rows a multiple of 128 wide, got 96"):
    LN.layernorm(jnp.ones((8, 96)), jnp.ones(96), jnp.ones(96), 1e-5, True)
  with pytest.raises(ValueError, match=r"rmsnorm: the weights must have shape \(256,\)"):
    RN.rmsnorm(jnp.ones((8, 256)), jnp.ones(128), interpret=True)


def test_matmuls_refuse_a_k_or_n_remainder():
  """K = 96 with bk = 64 returned a[:, :64] @ b[:64] (relative error 0.59); N < bn said 'grid (0,)'."""
  with pytest.raises(mg.SignatureError, match="matmul: k = 96 is not a multiple of bk = 64"):
    MM.matmul(jnp.ones((128, 96), jnp.bfloat16), jnp.ones((96, 256), jnp.bfloat16), interpret=True)
  with pytest.raises(mg.SignatureError, match="matmul: n = 128 is not a multiple of bn = 256"):
    MM.matmul(jnp.ones((256, 256), jnp.bfloat16), jnp.ones((256, 128), jnp.bfloat16), interpret=True)
  with pytest.raises(mg.SignatureError, match="ragged_dot: k = 96 is not a multiple of bk = 64"):
    RD.ragged_dot(jnp.ones((256, 96), jnp.float16), jnp.ones((2, 96, 256), jnp.float16),
                  jnp.array([100, 156], jnp.int32), interpret=True)


def test_paged_attention_splits_divide_the_pages():
  """splits=3 of 8 pages gave errors of 0.33 (and a store outside o_part on the tensor-core path);
  the CUDA-core default of 8 splits of 12 pages was as wrong."""
  args = PA.make_inputs(jax.random.key(0), 2, 4, 2, 128, 16, 8)
  with pytest.raises(ValueError, match=r"splits \(3\) must be a positive int dividing the pages per sequence \(8\)"):
    PA.paged_attention(*args, splits=3, interpret=True)
  with pytest.raises(ValueError, match=r"kv_heads \(2\) must divide heads \(3\)"):
    PA.paged_attention(*PA.make_inputs(jax.random.key(0), 2, 3, 2, 128, 16, 8), interpret=True)
  q, kp, vp, bt, ln = PA.make_inputs(jax.random.key(0), 2, 4, 2, 128, 16, 12)
  want = np.asarray(PA.reference(q, kp, vp, bt, ln), F32)
  for tc in (False, True):
    got = PA.paged_attention(q, kp, vp, bt, ln, tensor_cores=tc, interpret=True)
    np.testing.assert_allclose(np.asarray(got, F32), want, atol=2e-3)


def test_elementwise_add_refuses_shapes_that_differ():
  with pytest.raises(mg.SignatureError, match=r"a and b must have one shape, got \(64, 128\) and \(64, 256\)"):
    EW.add(jnp.ones((64, 128)), jnp.ones((64, 256)), interpret=True)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((64, 64), F32))
def fp8_a_from_registers(a, bt, c):
  b_s = ml.smem(bt.shape)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a[...], b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((64, 128), F32))
def jnp_dot_of_smem(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = jnp.dot(a_s, b_s)


def test_tensor_core_hints_can_be_pasted():
  """The fp8 hint said ml.smem((64, 128), float8_e4m3fn) (no jnp.); jnp.dot of SMEM buffers said
  ml.* functions take register values (ml.dot takes the buffers)."""
  # (an 8-bit A from registers computes since probe 46b: the tensor cores read it as they read a 16-bit one)
  fp8_a_from_registers.check(S((64, 128), jnp.float8_e4m3fn), S((64, 128), jnp.float8_e4m3fn))
  e = expect(jnp_dot_of_smem, [S((64, 64), jnp.float16), S((64, 128), jnp.float16)], mg.KernelTypeError,
             "jnp.dot(", "dot cannot take an SMEM ref inside a kernel")
  assert e.hint.startswith("write ml.dot(a_s, b_s) (on the tensor cores")
