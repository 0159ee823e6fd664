"""Probe 37d (matmul variants as a Triton or Pallas user writes them): the `@` operator on
register values is hinted as jnp.matmul is, with the user's own operands (it named a_s, b_s,
p and v_s whatever the kernel's names), and following that hint computes the product."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def _rand(shape, dtype, seed):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(dtype)


# ---------------------------------------------------------------- `@` hinted with the user's operands
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32))
def at_operator_smem(a, b, c):
  xs, ws = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, xs)
  ml.copy(b, ws)
  c[...] = xs[...] @ ws[...]


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def at_operator_regs(a, b, c):
  x = a[...] * 2
  w = b[...]
  c[...] = x @ w.T


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def jnp_dot_of_transposed_registers(a, b, c):
  x = a[...] * 2
  w = b[...]
  c[...] = jnp.dot(x, w.T, preferred_element_type=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), F32))
def at_operator_hint_followed(a, b, c):
  x = a[...] * 2
  w = b[...]
  stage_w = ml.smem((64, 64), jnp.float16); stage_w[...] = w
  c[...] = ml.dot(x, stage_w.T)


def test_at_operator_of_smem_reads_hints_ml_dot_of_the_buffers():
  specs = (S((64, 64), F16), S((64, 64), F16))
  expect(at_operator_smem, specs, mg.UnsupportedSyntaxError, "xs[...] @ ws[...]",
         "the operator @ is not supported in a kernel",
         hint="write ml.dot(xs, ws) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)")


def test_at_operator_of_registers_hints_the_staging_and_the_transpose():
  specs = (S((64, 64), F16), S((64, 64), F16))
  buf = "w" + "_s"     # (spelt apart: the hint's buffer avoids every name written in this file)
  expect(at_operator_regs, specs, mg.UnsupportedSyntaxError, "x @ w.T",
         "the operator @ is not supported in a kernel",
         hint=f"write ml.dot(x, {buf}.T) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc); ml.dot"
              " reads b from an SMEM buffer (a from SMEM or registers), so stage the operands first:"
              f" {buf} = ml.smem((64, 64), jnp.float16); {buf}[...] = w")
  a, b = _rand((64, 64), F16, 1), _rand((64, 64), F16, 2)     # the hint followed (its buffer renamed)
  got = at_operator_hint_followed(a, b, interpret=True)
  want = jnp.dot(a * 2, b.T, preferred_element_type=F32)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-4, atol=1e-3)


def test_jnp_dot_of_a_transposed_register_tile_stages_the_tile_and_passes_its_view():
  """It staged `w.T` (a register transpose through SMEM) where the view of w's buffer moves nothing."""
  buf = "w" + "_s"
  expect(jnp_dot_of_transposed_registers, (S((64, 64), F16), S((64, 64), F16)), mg.KernelTypeError,
         "jnp.dot(x, w.T", "dot cannot take a register tensor inside a kernel",
         hint=f"write ml.dot(x, {buf}.T, preferred_element_type=jnp.float32) (on the tensor cores; ml.dot(a, b, acc)"
              " adds the product to acc); ml.dot reads b from an SMEM buffer (a from SMEM or registers), so stage the"
              f" operands first: {buf} = ml.smem((64, 64), jnp.float16); {buf}[...] = w")
