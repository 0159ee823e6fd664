"""Probe 29k (diagnostics audit): for each error code, the mistakes users typically make, checked
for class, line, column, a message in the user's terms and a hint that works when followed."""
import jax
import jax.numpy as jnp
import numpy as np

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- jnp's positional dtype as keepdims
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32))
def row_sum_dtype(x, out):
  v = x[...]
  out[...] = ml.sum(v, 1, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32))
def row_sum_fixed(x, out):
  v = x[...]
  out[...] = ml.sum(v, axis=1, dtype=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float16))
def row_mean_dtype(x, out):
  v = x[...]
  out[...] = ml.mean(v, 1, jnp.float32).astype(jnp.float16)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32))
def row_max_mask(x, out):
  v = x[...]
  k = v[:, 0] > 0
  out[...] = ml.max(v, 1, k)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def row_argmax_dtype(x, out):
  v = x[...]
  out[...] = ml.argmax(v, 1, jnp.int32)


def test_a_dtype_or_tensor_passed_as_keepdims_is_rejected():
  """jnp.sum(a, axis, dtype): ml.sum(v, 1, jnp.float32) took the dtype as keepdims=True (a (128, 1)
  result, then a shape error about the store, or a silently different broadcast); a register
  tensor there was taken as True too."""
  spec = [S((128, 64), F16)]
  expect(row_sum_dtype, spec, mg.KernelTypeError, "ml.sum(v, 1, jnp.float32)",
         "ml.sum: keepdims must be True or False, got jnp.float32",
         hint="ml.sum's third argument is keepdims (jnp's is dtype): ml.sum(v, axis=1, dtype=jnp.float32)")
  expect(row_mean_dtype, spec, mg.KernelTypeError, "ml.mean(v, 1, jnp.float32)",
         "ml.mean: keepdims must be True or False, got jnp.float32",
         hint="ml.mean's third argument is keepdims (jnp's is dtype): ml.mean(v.astype(jnp.float32), axis=1)")
  expect(row_max_mask, spec, mg.KernelTypeError, "ml.max(v, 1, k)",
         "ml.max: keepdims must be True or False, got k",
         hint="keepdims=True keeps the reduced axes with size 1: ml.max(v, axis=1, keepdims=True)")
  expect(row_argmax_dtype, spec, mg.KernelTypeError, "ml.argmax(v, 1, jnp.int32)",
         "ml.argmax: keepdims must be True or False, got jnp.int32",
         hint="ml.argmax's third argument is keepdims; its indices are int32: ml.argmax(v, axis=1).astype(jnp.int32)")


def test_the_keepdims_hint_followed_computes_jnps_sum():
  x = rand.normal(rand.key(0), (128, 64), F16)
  np.testing.assert_allclose(row_sum_fixed(x, interpret=True), jnp.sum(x, 1, jnp.float32), rtol=1e-5, atol=1e-4)
  assert "mosaic_gpu" in str(_export(row_sum_fixed, S((128, 64), F16)))


# ---------------------------------------------------------------- static arguments shown in the user's terms
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.float32))
def row_var_dtype(x, out):
  v = x[...]
  out[...] = ml.var(v, 1, jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def cumsum_dtype(x, out):
  v = x[...]
  out[...] = ml.cumsum(v, jnp.float32)


def test_a_dtype_in_a_message_is_written_as_jnp_writes_it():
  """Messages showed a dtype argument as Python's repr, `<class 'jax.numpy.float32'>`."""
  expect(row_var_dtype, [S((128, 64), F32)], mg.KernelTypeError, "ml.var(v, 1, jnp.float32)",
         "ml.var: ddof must be a static int, got jnp.float32",
         hint="ml.var's third argument is ddof (jnp's is dtype): ml.var(v.astype(jnp.float32), axis=1)")
  e = expect(cumsum_dtype, [S((128,), F32)], mg.KernelTypeError, "ml.cumsum(v, jnp.float32)",
             "ml.cumsum: axis must be a static int, got jnp.float32")
  assert "<class" not in e.hint


# ---------------------------------------------------------------- MG501: the hint in the user's names
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32), grid=lambda a, b: (a.shape[0] // 128,))
def dot_of_gmem(a, b, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128), :][...] = ml.dot(a.at[ml.ds(i * 128, 128), :], b)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32), grid=lambda a, b: (a.shape[0] // 128,))
def dot_of_gmem_fixed(a, b, out):
  i = ml.program_id(0)
  a_s = ml.smem((128, 64)); ml.copy(a.at[ml.ds(i * 128, 128), :], a_s)
  b_s = ml.smem((64, 128)); ml.copy(b, b_s)
  out.at[ml.ds(i * 128, 128), :][...] = ml.dot(a_s, b_s)


def test_a_gmem_dot_operand_hint_names_the_users_ref_and_shape():
  """The hint said `a_s = ml.smem(shape); ml.copy(a_tile, a_s)`: placeholders, not the user's ref."""
  specs = [S((256, 64), F16), S((64, 128), F16)]
  expect(dot_of_gmem, specs, mg.MmaOperandError, "ml.dot(a.at",
         "ml.dot operand a must be an SMEM buffer of this CTA or a register tensor, got a.at[ml.ds(i * 128, 128), :] (GMEM)",
         hint="copy the tile into SMEM first: a_s = ml.smem((128, 64)); ml.copy(a.at[ml.ds(i * 128, 128), :], a_s);"
              " then pass a_s to ml.dot")
  a = rand.normal(rand.key(0), (256, 64), F16)
  b = rand.normal(rand.key(1), (64, 128), F16)
  np.testing.assert_allclose(dot_of_gmem_fixed(a, b, interpret=True),
                             jnp.dot(a, b, preferred_element_type=F32), rtol=1e-3, atol=1e-3)
  assert "mosaic_gpu" in str(_export(dot_of_gmem_fixed, *specs))
