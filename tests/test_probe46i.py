"""Probe 46i (Pallas-style kernel bodies): jnp, jax.nn, jax.lax and jax.scipy.special functions called on register
values compute as their ml.* namesake (bound by the library's own signature and defaults), jax.nn's activations ml
has no function for as jax.nn's formulas (activation_forms, the hints' own), and jnp.zeros / ones / full / arange
build tensors; an argument ml does not take is refused by name (MG003)."""
import jax
import jax.numpy as jnp
import jax.scipy.special as jsp
import numpy as np
import pytest

import mgpu_dsl as mg
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32

# each output's expression, as the kernel below writes it (v: the input's (8, 128) tile)
ELEMENTWISE = [
    lambda v: jnp.exp(v), lambda v: jnp.tanh(v), lambda v: jnp.sqrt(jnp.abs(v)), lambda v: jnp.maximum(v, 0),
    lambda v: jnp.where(v > 0, v, 0.0), lambda v: jnp.clip(v, -0.5, 0.5), lambda v: jnp.clip(v, min=-0.5),
    lambda v: jax.nn.sigmoid(v), lambda v: jax.nn.relu(v), lambda v: jax.nn.silu(v), lambda v: jax.nn.gelu(v),
    lambda v: jax.nn.gelu(v, approximate=False), lambda v: jax.lax.rsqrt(jnp.abs(v) + 1),
    lambda v: jax.lax.exp2(v), lambda v: jax.nn.leaky_relu(v, 0.1), lambda v: jax.nn.elu(v),
    lambda v: jax.nn.relu6(v), lambda v: jax.nn.softplus(v), lambda v: jax.nn.hard_swish(v),
    lambda v: jnp.power(jnp.abs(v), 1.5), lambda v: jnp.log1p(jnp.abs(v)), lambda v: jax.lax.max(v, 0.5 * v),
    lambda v: jnp.multiply(v, 3.0), lambda v: jax.nn.celu(v, alpha=0.5), lambda v: jax.lax.logistic(v),
    lambda v: v * jnp.ones((8, 128), v.dtype), lambda v: v + jnp.full((8, 128), 2.0, v.dtype),
]


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, x.dtype) for _ in range(27)))
def pallas_elementwise(x, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14, o15, o16, o17, o18, o19,
                       o20, o21, o22, o23, o24, o25, o26):
  v = x[...]
  o0[...] = jnp.exp(v)
  o1[...] = jnp.tanh(v)
  o2[...] = jnp.sqrt(jnp.abs(v))
  o3[...] = jnp.maximum(v, 0)
  o4[...] = jnp.where(v > 0, v, 0.0)
  o5[...] = jnp.clip(v, -0.5, 0.5)
  o6[...] = jnp.clip(v, min=-0.5)
  o7[...] = jax.nn.sigmoid(v)
  o8[...] = jax.nn.relu(v)
  o9[...] = jax.nn.silu(v)
  o10[...] = jax.nn.gelu(v)
  o11[...] = jax.nn.gelu(v, approximate=False)
  o12[...] = jax.lax.rsqrt(jnp.abs(v) + 1)
  o13[...] = jax.lax.exp2(v)
  o14[...] = jax.nn.leaky_relu(v, 0.1)
  o15[...] = jax.nn.elu(v)
  o16[...] = jax.nn.relu6(v)
  o17[...] = jax.nn.softplus(v)
  o18[...] = jax.nn.hard_swish(v)
  o19[...] = jnp.power(jnp.abs(v), 1.5)
  o20[...] = jnp.log1p(jnp.abs(v))
  o21[...] = jax.lax.max(v, 0.5 * v)
  o22[...] = jnp.multiply(v, 3.0)
  o23[...] = jax.nn.celu(v, alpha=0.5)
  o24[...] = jax.lax.logistic(v)
  o25[...] = v * jnp.ones((8, 128), v.dtype)
  o26[...] = v + jnp.full((8, 128), 2.0, v.dtype)


ROWS = [
    lambda v: jnp.broadcast_to(jnp.sum(v, axis=1, keepdims=True), v.shape),
    lambda v: v - jnp.max(v, axis=-1, keepdims=True), lambda v: v - jnp.mean(v, axis=1, keepdims=True),
    lambda v: jax.nn.softmax(v, axis=-1), lambda v: jax.nn.log_softmax(v),
    lambda v: jnp.cumsum(v, axis=1), lambda v: jax.lax.cumsum(v, axis=1),
    lambda v: jnp.transpose(jnp.transpose(v)), lambda v: jnp.reshape(jnp.reshape(v, (4, 256)), (8, 128)),
    lambda v: jnp.flip(v, axis=1), lambda v: jnp.concatenate([v[:, 64:], v[:, :64]], axis=1),
    lambda v: jnp.broadcast_to(jsp.logsumexp(v, axis=1, keepdims=True), v.shape),
    lambda v: jnp.broadcast_to(jnp.var(v, axis=1, keepdims=True), v.shape), lambda v: v - jnp.max(v),
]


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, x.dtype) for _ in range(14)))
def pallas_rows(x, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13):
  v = x[...]
  o0[...] = jnp.broadcast_to(jnp.sum(v, axis=1, keepdims=True), v.shape)
  o1[...] = v - jnp.max(v, axis=-1, keepdims=True)
  o2[...] = v - jnp.mean(v, axis=1, keepdims=True)
  o3[...] = jax.nn.softmax(v, axis=-1)
  o4[...] = jax.nn.log_softmax(v)
  o5[...] = jnp.cumsum(v, axis=1)
  o6[...] = jax.lax.cumsum(v, axis=1)
  o7[...] = jnp.transpose(jnp.transpose(v))
  o8[...] = jnp.reshape(jnp.reshape(v, (4, 256)), (8, 128))
  o9[...] = jnp.flip(v, axis=1)
  o10[...] = jnp.concatenate([v[:, 64:], v[:, :64]], axis=1)
  o11[...] = jnp.broadcast_to(jsp.logsumexp(v, axis=1, keepdims=True), v.shape)
  o12[...] = jnp.broadcast_to(jnp.var(v, axis=1, keepdims=True), v.shape)
  o13[...] = v - jnp.max(v)


def _compare(kernel, refs, dtype, **kw):
  x = (np.random.default_rng(46).standard_normal((8, 128)) * 2).astype(dtype)
  got = kernel(x, **kw)
  tol = 2e-5 if dtype == F32 else 3e-2
  for i, (g, f) in enumerate(zip(got, refs)):
    want = np.asarray(f(jnp.asarray(x)).astype(dtype), np.float32)
    np.testing.assert_allclose(np.asarray(g, np.float32), want, rtol=tol, atol=tol * (1 + np.abs(want).max()),
                               err_msg=f"output {i}")


@pytest.mark.parametrize("dtype", [F32, BF16])
@pytest.mark.parametrize("kernel,refs", [(pallas_elementwise, ELEMENTWISE), (pallas_rows, ROWS)])
def test_jnp_functions_of_register_values_compute_as_jnp(kernel, refs, dtype):
  """Each jnp / jax.nn / jax.lax call of a register value was MG003 "exp cannot take a register tensor" (hint
  ml.exp); it computes as jnp does, in float32 and bfloat16, and the module builds for CUDA."""
  _compare(kernel, refs, dtype, interpret=True)
  if dtype == F32:
    jax.export.export(jax.jit(lambda a: kernel(a)), platforms=["cuda"])(S((8, 128), dtype))


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, I32), S(x.shape, I32), S(x.shape, F32), S(x.shape, I32),
                                     S(x.shape, I32)))
def pallas_ints(x, o0, o1, o2, o3, o4):
  v = x[...]
  o0[...] = jnp.abs(v)
  o1[...] = jnp.maximum(v, 0) + jnp.minimum(v, 3)
  o2[...] = jnp.exp(jnp.clip(v, -3, 3))                 # jnp's: float32 of an int32 operand
  o3[...] = jnp.broadcast_to(jnp.sum(v, axis=1, keepdims=True), v.shape) + jnp.arange(128)
  o4[...] = jnp.where(v > 0, v, 0) + jnp.zeros((8, 128), jnp.int32)


def test_jnp_functions_of_int_values_keep_jnp_dtypes():
  """Integer operands: jnp's result dtypes (exp of int32 is float32; weak Python ints stay int32)."""
  x = np.random.default_rng(7).integers(-50, 50, (8, 128)).astype(np.int32)
  refs = [jnp.abs, lambda v: jnp.maximum(v, 0) + jnp.minimum(v, 3), lambda v: jnp.exp(jnp.clip(v, -3, 3)),
          lambda v: jnp.broadcast_to(jnp.sum(v, axis=1, keepdims=True), v.shape) + jnp.arange(128),
          lambda v: jnp.where(v > 0, v, 0)]
  for g, f in zip(pallas_ints(x, interpret=True), refs):
    want = f(jnp.asarray(x))
    assert g.dtype == want.dtype
    np.testing.assert_allclose(np.asarray(g), np.asarray(want), rtol=1e-6)


SHAPES = [
    lambda v: v + jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1),
    lambda v: jnp.where(jax.lax.broadcasted_iota(jnp.int32, (8, 128), 0) >= jax.lax.broadcasted_iota(
        jnp.int32, (8, 128), 1) - 100, v, -1.0),
    lambda v: v + jnp.zeros_like(v) + jnp.full_like(v, 2.5), lambda v: v * jnp.ones_like(v),
    lambda v: jnp.expand_dims(jnp.sum(v, axis=1), 1) + v, lambda v: jnp.expand_dims(jnp.max(v, axis=0), 0) + v,
    lambda v: jnp.stack([v, v * 2], axis=0)[1], lambda v: jnp.sum(jnp.stack([v, v * 2], axis=-1), axis=-1),
    lambda v: jnp.swapaxes(jnp.swapaxes(v, 0, 1), 0, 1), lambda v: jnp.moveaxis(jnp.moveaxis(v, 0, -1), -1, 0),
    lambda v: jax.lax.select(v > 0, v, v * 0.1), lambda v: jnp.sign(v), lambda v: jnp.subtract(jnp.add(v, 2), v * v),
    lambda v: jax.lax.add(v, jnp.negative(v) * 3.0), lambda v: jnp.true_divide(jnp.square(v), 4.0),
]


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, x.dtype) for _ in range(15)))
def pallas_shapes(x, o0, o1, o2, o3, o4, o5, o6, o7, o8, o9, o10, o11, o12, o13, o14):
  v = x[...]
  o0[...] = (v + jax.lax.broadcasted_iota(jnp.int32, (8, 128), 1)).astype(v.dtype)
  o1[...] = jnp.where(jax.lax.broadcasted_iota(jnp.int32, (8, 128), 0) >= jax.lax.broadcasted_iota(
      jnp.int32, (8, 128), 1) - 100, v, -1.0)
  o2[...] = v + jnp.zeros_like(v) + jnp.full_like(v, 2.5)
  o3[...] = v * jnp.ones_like(v)
  o4[...] = jnp.expand_dims(jnp.sum(v, axis=1), 1) + v
  o5[...] = jnp.expand_dims(jnp.max(v, axis=0), 0) + v
  o6[...] = jnp.stack([v, v * 2], axis=0)[1]
  o7[...] = jnp.sum(jnp.stack([v, v * 2], axis=-1), axis=-1)
  o8[...] = jnp.swapaxes(jnp.swapaxes(v, 0, 1), 0, 1)
  o9[...] = jnp.moveaxis(jnp.moveaxis(v, 0, -1), -1, 0)
  o10[...] = jax.lax.select(v > 0, v, v * 0.1)
  o11[...] = jnp.sign(v)
  o12[...] = jnp.subtract(jnp.add(v, 2), v * v)
  o13[...] = jax.lax.add(v, jnp.negative(v) * 3.0)
  o14[...] = jnp.true_divide(jnp.square(v), 4.0)


@pytest.mark.parametrize("dtype", [F32, BF16])
def test_jnp_shape_builders_and_operators_compute_as_jnp(dtype):
  """lax.broadcasted_iota (Pallas's masks), jnp.*_like, expand_dims, stack, swapaxes, moveaxis, lax.select,
  jnp.sign and jnp's operator functions were MG003 with the ml form as a hint; they compute as that form."""
  _compare(pallas_shapes, [lambda v, f=f: f(v).astype(v.dtype) for f in SHAPES], dtype, interpret=True)
  if dtype == F32:
    jax.export.export(jax.jit(lambda a: pallas_shapes(a)), platforms=["cuda"])(S((8, 128), dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,refs", [(pallas_elementwise, ELEMENTWISE), (pallas_rows, ROWS),
                                         (pallas_shapes, [lambda v, f=f: f(v).astype(v.dtype) for f in SHAPES])])
def test_gpu_jnp_functions_of_register_values(kernel, refs):
  _compare(kernel, refs, F32)
  _compare(kernel, refs, BF16)


# ---------------------------------------------------------------- arguments ml does not take: named
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def exp_out(x, out):
  v = x[...]
  out[...] = jnp.exp(v, out=None)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def mean_dtype(x, out):
  v = x[...]
  out[...] = v - jnp.mean(v, axis=1, keepdims=True, dtype=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def maximum_where(x, out):
  v = x[...]
  out[...] = jnp.maximum(v, 0.0, where=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def arange_step(x, out):
  v = x[...]
  out[...] = v + jnp.arange(0, 256, 2)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def add_where(x, out):
  v = x[...]
  out[...] = jnp.add(v, 1.0, where=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def cumsum_flat(x, out):
  v = x[...]
  out[...] = jnp.cumsum(v).reshape(v.shape)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype))
def where_one(x, out):
  v = x[...]
  out[...] = jnp.where(v > 0)


SPEC = (S((8, 128), F32),)


def test_an_argument_ml_does_not_take_is_named():
  err = mg
  expect(exp_out, SPEC, err.KernelTypeError, "jnp.exp(v, out=None)",
         "jnp.exp's out= has no counterpart in a kernel, where jnp.exp computes as ml.exp",
         hint="a kernel writes a result by storing it: out[...] = jnp.exp(...)")
  x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), F32)     # (dtype= is taken since probe 47h)
  np.testing.assert_allclose(mean_dtype(x, interpret=True), x - jnp.mean(x, axis=1, keepdims=True, dtype=F32),
                             rtol=1e-6, atol=1e-6)
  expect(maximum_where, SPEC, err.KernelTypeError, "jnp.maximum(",
         "jnp.maximum's where= has no counterpart in a kernel, where jnp.maximum computes as ml.maximum",
         hint="drop it, or write the call with ml.* functions (ml.maximum has no where=)")
  x = np.random.default_rng(3).standard_normal((8, 128)).astype(np.float32)    # (a step computes since probe 47b)
  np.testing.assert_array_equal(np.asarray(arange_step(x, interpret=True)), np.asarray(x + jnp.arange(0, 256, 2)))

  expect(add_where, SPEC, err.KernelTypeError, "jnp.add(",
         "jnp.add's where= has no counterpart in a kernel, where jnp.add computes as its formula in ml.* functions",
         hint="drop it, or write the formula with ml.* functions (where= changes what it computes)")
  # ml's own diagnostics of the call name it as written
  expect(cumsum_flat, SPEC, err.KernelTypeError, "jnp.cumsum(v)",
         "jnp.cumsum (as ml.cumsum) of a 2-D tensor needs an axis (jnp's axis=None flattens it)",
         hint="ml.cumsum(v, axis=1) scans each row; ml.cumsum(v, axis=0) each column; jnp's flattened scan is"
              " ml.cumsum(v.reshape(-1)), a 1-D vector")
  # a call whose meaning ml has not keeps its error: jnp.where(c) of one argument (nonzero's indices)
  expect(where_one, SPEC, err.KernelTypeError, "jnp.where(v > 0)", "where cannot take a register tensor inside a kernel",
         hint="jnp.where(c) of one argument is jnp.nonzero(c), the indices where c holds: their count depends on the"
              " data, and a kernel's tensors have static shapes. Select with three arguments, ml.where(c, x, y); count"
              " with ml.sum(c); or give each kept element its position, ml.cumsum(c, dtype=jnp.int32) - 1, and"
              " scatter it there (a masked store or an atomic scatter)")     # ("use ml.where" until probe 48b)
