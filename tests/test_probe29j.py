"""Probe 29j (matmul variants as users write them: batched, epilogues, transposed operands, int8,
split-K, odd shapes, mixed dtypes, TF32, matrix-vector, a fused MLP)."""

import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _rand(shape, dtype, seed):
  return rand.normal(rand.PRNGKey(seed), shape, dtype)


# ---------------------------------------------------------------- jax.nn epilogues of a computed value
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def silu_of_dot(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = jax.nn.silu(ml.dot(a_s, b_s))


@mg.mgpu_kernel(out_shape=lambda a, b, bias: S((a.shape[0], b.shape[1]), F32))
def gelu_of_biased_dot(a, b, bias, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = jax.nn.gelu(ml.dot(a_s, b_s) + bias[...][None, :], approximate=False)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def silu_as_hinted(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  z = ml.dot(a_s, b_s); c[...] = z * ml.sigmoid(z)


def test_a_jax_nn_epilogue_of_a_dot_computes_the_dot_once():
  """The hint repeated its argument where the form uses it twice (ml.dot(a_s, b_s) *
  ml.sigmoid(ml.dot(a_s, b_s)): two tensor-core products); a computed argument was bound first. Since probe 46i
  the call computes jax.nn's formula on its argument's value: one product."""
  specs = [S((64, 64), F16), S((64, 64), F16)]
  for kernel, extra in ((silu_of_dot, []), (gelu_of_biased_dot, [S((64,), F32)])):
    ir = kernel.typed_ir(*specs, *extra)
    assert sum(" = dot " in line for line in ir.splitlines()) == 1, ir
  a, b = _rand((64, 64), F16, 0), _rand((64, 64), F16, 1)
  bias = _rand((64,), F32, 2)
  want = jax.nn.silu(a.astype(F32) @ b.astype(F32))
  for got in (silu_as_hinted(a, b, interpret=True), silu_of_dot(a, b, interpret=True)):
    np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
  want = jax.nn.gelu(a.astype(F32) @ b.astype(F32) + bias[None, :], approximate=False)
  np.testing.assert_allclose(np.asarray(gelu_of_biased_dot(a, b, bias, interpret=True)), np.asarray(want),
                             rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- float16 x bfloat16
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def mixed_smem(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def mixed_registers(a, b, c):
  b_s = ml.smem((64, 64))
  ml.copy(b, b_s)
  c[...] = ml.dot(a[...], b_s)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def mixed_as_hinted(a, b, c):
  a_s, b_s = ml.smem((64, 64)), ml.smem((64, 64))
  acc = ml.zeros((64, 64), F32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s[...].astype(jnp.bfloat16), b_s, acc)
  c[...] = acc


def test_float16_times_bfloat16_hints_a_conversion_that_works():
  """The hint said "convert one operand's tile when you fill it", which a TMA copy cannot do."""
  expect(mixed_smem, [S((64, 64), F16), S((64, 64), BF16)], mg.DtypeMismatchError, "ml.dot(a_s, b_s)",
         "ml.dot of a_s (float16) and b_s (bfloat16): both operands must have one dtype",
         hint="convert A to bfloat16 in registers: ml.dot(a_s[...].astype(jnp.bfloat16), b_s) (the tensor"
              " cores read A from registers), or convert the array that fills a_s before the call"
              " (.astype(jnp.bfloat16), which XLA fuses into its producer)")
  expect(mixed_registers, [S((64, 64), F16), S((64, 64), BF16)], mg.DtypeMismatchError, "ml.dot(a[...], b_s)",
         "ml.dot of a[...] (float16) and b_s (bfloat16): both operands must have one dtype",
         hint="convert A to bfloat16 in registers: ml.dot(a[...].astype(jnp.bfloat16), b_s) (the tensor"
              " cores read A from registers)")
  expect(mixed_smem, [S((64, 64), BF16), S((64, 64), F32)], mg.DtypeMismatchError, "ml.dot(a_s, b_s)",
         "ml.dot of a_s (bfloat16) and b_s (float32): both operands must have one dtype",
         hint="give b_s the dtype of the other operand: where registers fill it, allocate it as ml.smem((64, 64),"
              " jnp.bfloat16) and store the value converted, b_s[...] = v.astype(jnp.bfloat16); where a TMA copy"
              " fills it, convert the array before the call (.astype(jnp.bfloat16), which XLA fuses into its"
              " producer): a TMA copy does not convert")       # (probe 33c: a state kept in SMEM)
  a, b = _rand((64, 128), F16, 0), _rand((128, 64), BF16, 1)     # the hint, followed
  got = mixed_as_hinted(a, b, interpret=True)
  want = a.astype(BF16).astype(F32) @ b.astype(F32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- float32 (TF32) with A stored (k, m)
@mg.mgpu_kernel(out_shape=lambda at, bt: S((at.shape[1], bt.shape[0]), F32))
def tf32_a_transposed(at, bt, c):
  a_s, b_s = ml.smem(at.shape), ml.smem(bt.shape)
  ml.copy(at, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s.T, b_s.T)


@mg.mgpu_kernel(out_shape=lambda at, bt: S((at.shape[1], bt.shape[0]), F32))
def tf32_a_transposed_as_hinted(at, bt, c):
  a_s, b_s = ml.smem(at.shape), ml.smem(bt.shape)
  ml.copy(at, a_s)
  ml.copy(bt, b_s)
  a_mk = ml.smem((64, 32)); a_mk[...] = a_s.T[...]
  c[...] = ml.dot(a_mk, b_s.T)


def test_a_k_major_operand_stored_k_by_m_hints_a_transpose_that_works():
  """The hint said to store a's tile as (m, k), which a TMA copy of an array stored (k, m) cannot. Since probe 67b
  the compiler writes that hint itself where m is a multiple of 64; 48 rows keep MG501 and its hint."""
  specs = [S((32, 64), F32), S((64, 32), F32)]
  expect(tf32_a_transposed, [S((32, 48), F32), S((64, 32), F32)], mg.MmaOperandError, "ml.dot(a_s.T, b_s.T)",
         "ml.dot reads float32 operands K-major only, so a must be stored (m, k); a_s.T is a transposed view",
         hint="pass a buffer stored (m, k): transpose the array outside the kernel (x.T in the caller, which XLA"
              " fuses), or transpose the tile once in the kernel, a_mk = ml.smem((48, 32)); a_mk[...] ="
              " a_s.T[...] (through registers), and pass ml.dot(a_mk, ...)")
  at, bt = _rand((32, 64), F32, 0), _rand((64, 32), F32, 1)     # the hint, followed, and the compiler's own
  want = jnp.dot(at.T, bt.T, precision="highest")
  for kernel in (tf32_a_transposed_as_hinted, tf32_a_transposed):
    np.testing.assert_allclose(np.asarray(kernel(at, bt, interpret=True)), np.asarray(want), rtol=2e-2, atol=2e-2)
    _export(kernel, *specs)


def _export(kernel, *specs):
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- uint8 operands
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), jnp.int32))
def uint8_dot(a, bt, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def float16_dot(a, bt, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


def test_uint8_operands_hint_a_conversion_that_keeps_their_values():
  """uint8 x int8 hinted .astype(jnp.int8) of the uint8 input (which wraps 128..255: silently wrong
  if followed), and uint8 x uint8 converting the tiles "when you fill them" (a TMA copy cannot)."""
  hint = ("convert both inputs to jnp.float16 before the call (.astype(jnp.float16): every uint8 value is exact"
          " in float16, and a float32 accumulator sums the products exactly up to 2**24), then round the"
          " result; .astype(jnp.int8) would wrap uint8 values outside int8's range")
  U8, I8 = jnp.uint8, jnp.int8
  expect(uint8_dot, [S((64, 128), U8), S((64, 128), I8)], mg.DtypeMismatchError, "ml.dot(a_s, b_s.T)",
         "ml.dot of a_s (uint8) and b_s.T (int8): both operands must have one dtype", hint=hint)
  expect(uint8_dot, [S((64, 128), U8), S((64, 128), U8)], mg.UnsupportedDtypeError, "ml.dot(a_s, b_s.T)",
         "ml.dot on uint8: the tensor cores take float16, bfloat16, float8_e4m3fn, float8_e5m2, int8 or"
         " float32 (as TF32) operands", hint=hint)
  a = rand.randint(rand.PRNGKey(0), (64, 128), 0, 256).astype(U8)      # the hint, followed
  bt = rand.randint(rand.PRNGKey(1), (64, 128), -128, 128).astype(I8)
  got = float16_dot(a.astype(F16), bt.astype(F16), interpret=True)
  want = a.astype(jnp.int32) @ bt.T.astype(jnp.int32)
  np.testing.assert_array_equal(np.asarray(jnp.round(got).astype(jnp.int32)), np.asarray(want))


# ---------------------------------------------------------------- float8_e4m3fn x float8_e5m2
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def fp8_pair(a, bt, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  c[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32))
def fp8_pair_as_hinted(a, bt, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(bt.shape)
  ml.copy(a, a_s)
  ml.copy(bt, b_s)
  b16 = ml.smem((64, 128), jnp.float16); b16[...] = b_s[...].astype(jnp.float16)
  c[...] = ml.dot(a_s[...].astype(jnp.float16), b16.T)


def test_an_e4m3_e5m2_pair_hints_a_float16_conversion_the_kernel_can_make():
  """The hint said to convert both tiles to float16 "when you fill them", which a TMA copy cannot."""
  E4, E5 = jnp.float8_e4m3fn, jnp.float8_e5m2
  specs = [S((64, 128), E4), S((64, 128), E5)]
  expect(fp8_pair, specs, mg.DtypeMismatchError, "ml.dot(a_s, b_s.T)",
         "ml.dot of a_s (float8_e4m3fn) and b_s.T (float8_e5m2): both operands must have one dtype (Mosaic GPU's"
         " tensor-core dots take no e4m3 x e5m2 pair)",
         hint="convert both to float16 (exact for both float8 types, at half the float8 rate): before the call"
              " (.astype(jnp.float16)), or in the kernel, b16 = ml.smem((64, 128), jnp.float16); b16[...] ="
              " b_s[...].astype(jnp.float16); ml.dot(a_s[...].astype(jnp.float16), b16.T, ...); or convert the"
              " float8_e4m3fn input to float8_e5m2 (keeps its range, drops a mantissa bit); float8_e5m2 to"
              " float8_e4m3fn gives NaN beyond 464")
  a, bt = _rand((64, 128), E4, 0), _rand((64, 128), E5, 1)     # the hint, followed
  got = fp8_pair_as_hinted(a, bt, interpret=True)
  want = a.astype(F32) @ bt.T.astype(F32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-4)
  _export(fp8_pair_as_hinted, *specs)
