"""Probe 51j (leftovers of probes 51i and 51d: scans and .at updates). (1) `ml.softplus(x)` is a composed builtin,
`jax.nn.softplus`'s max(x, 0) + log1p(exp(-|x|)), 16-bit operands in float32 rounded once (it was MG002, whose hint
wrote the form). (2) `v.at[v[0, 0]]` or `v.at[1.0]`, a float index of a register tensor's `.at`, is MG003 saying the
index must be an integer ("a register tensor has no attribute 'at'", with a hint selecting by the float). (3) A
lax.scan of more than 64 steps over xs computed elementwise from whole reads of refs, `x_ref[...] * 2`, runs as the
run-time loop computing a row a step, `x_ref[t] * 2`; a tuple of `jnp.arange(n)` counters (or counters and such xs)
does too (both were MG003, whose hint unrolled the steps). (4) The MG003 hint of a long scan over other xs
wrote `x * w.shape[0]` and `x * w[it]` for xs `x * w`, and indexed a tuple of xs as a whole: it parenthesises the
expression and indexes each leaf. (5) `.at[5].set(0.0)` (single positions, by a number or scalar) of a tile computed
padded (x[...] of a (100,) or (5, 40) input) was MG204: the padded trace aborted at the select."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from jax import lax
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _input(shape, dtype=F32, seed=0, scale=1.0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape) * scale, dtype)


def _f64(x):
  return np.asarray(x).astype(np.float64)


def _softplus(x):
  x = _f64(x)
  return np.maximum(x, 0) + np.log1p(np.exp(-np.abs(x)))


# ---------------------------------------------------------------- ml.softplus
@mg.mgpu_kernel(out_shape=lambda x, b: x)
def dt_softplus(x, b, o):                     # Mamba's dt = softplus(dt + bias)
  o[...] = ml.softplus(x[...] + b[...][None, :])


@mg.mgpu_kernel(out_shape=lambda x: x)
def softplus_gate(x, o):                      # a Mish-style gate: x * tanh(softplus(x))
  v = x[...]
  o[...] = v * ml.tanh(ml.softplus(v))


def test_ml_softplus_is_jax_nn_softplus():
  x, b = _input((16, 128), F32, 1, 20.0), _input((128,), F32, 2)
  np.testing.assert_allclose(_f64(dt_softplus(x, b, interpret=True)), _softplus(_f64(x) + _f64(b)[None, :]),
                             rtol=1e-6, atol=1e-7)
  for d in (BF16, F16):            # in float32, rounded once: as XLA on the GPU computes jax.nn.softplus
    xd, bd = x.astype(d) * 0.25, b.astype(d)
    want = _softplus(_f64((xd + bd[None, :]).astype(d))).astype(np.dtype(d)).astype(np.float64)
    np.testing.assert_array_equal(_f64(dt_softplus(xd, bd, interpret=True)), want)
  y = _input((8, 128), F32, 3, 4.0)
  np.testing.assert_allclose(_f64(softplus_gate(y, interpret=True)), _f64(y) * np.tanh(_softplus(y)), rtol=1e-6,
                             atol=1e-7)
  softplus_gate.check(S((8, 128), BF16))


# ---------------------------------------------------------------- a float index of .at
@mg.mgpu_kernel(out_shape=lambda x: x)
def at_float_scalar(x, o):
  v = x[...]
  o[...] = v.at[v[0, 0]].set(0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def at_python_float(x, o):
  v = x[...]
  o[...] = v.at[2.0].add(1.0)


def test_a_float_index_of_at_is_an_index_error():
  expect(at_float_scalar, [S((8, 128), F32)], mg.KernelTypeError, "v.at[v[0, 0]]",
         "an index of v.at must be an integer, got v[0, 0] (float32)", hint="convert it: v[0, 0].astype(jnp.int32)")
  expect(at_python_float, [S((8, 128), F32)], mg.KernelTypeError, "v.at[2.0]",
         "an index of v.at must be an integer, got 2.0 (a Python float)", hint="index with an int: v.at[2]")


# ---------------------------------------------------------------- .at of a tile computed padded
@mg.mgpu_kernel(out_shape=lambda x: x)
def zero_one_of_100(x, o):
  o[...] = x[...].at[5].set(0.0).at[-1].add(10.0)


@mg.mgpu_kernel(out_shape=lambda x, i: x)
def scale_at_runtime_index(x, i, o):          # (5, 40): rows and columns both computed padded
  o[...] = x[...].at[i[0], 3].mul(2.0)


def test_at_points_of_an_odd_tile_computed_padded():
  x = _input((100,), F32, 1)
  want = np.asarray(x).copy()
  want[5], want[-1] = 0.0, want[-1] + np.float32(10.0)       # (float32 adds, as jnp's)
  np.testing.assert_array_equal(_f64(zero_one_of_100(x, interpret=True)), _f64(want))
  y = _input((5, 40), F32, 2)
  for i in (2, -1, 5, -6):               # (5 and -6 are outside: dropped, as jnp drops them; never a padding lane)
    want = _f64(y).copy()
    if -5 <= i < 5:
      want[i, 3] *= 2.0
    got = scale_at_runtime_index(y, jnp.asarray([i], jnp.int32), interpret=True)
    np.testing.assert_array_equal(_f64(got), want)
  zero_one_of_100.check(S((100,), BF16))


# ---------------------------------------------------------------- long scans over computed xs
@mg.mgpu_kernel(out_shape=lambda x, g: S((x.shape[1],), F32))
def gated_decay(x_ref, g_ref, o):
  """A gated linear recurrence over 100 steps; xs elementwise in two whole reads (bf16 in, f32 state)."""
  def f(h, xt):
    return 0.9 * h + xt, None
  h, _ = lax.scan(f, jnp.zeros((128,), jnp.float32),
                  jax.nn.sigmoid(g_ref[...].astype(jnp.float32)) * x_ref[...].astype(jnp.float32))
  o[...] = h


def _gated_ref(x, g):
  h = np.zeros(x.shape[1])
  for t in range(x.shape[0]):
    h = 0.9 * h + _f64(x)[t] / (1 + np.exp(-_f64(g)[t]))
  return h


@mg.mgpu_kernel(out_shape=lambda x: x)
def reverse_cumsum_rows(x_ref, o):
  """A reverse running sum of exp(x) - 1 over 72 rows, each stored by the body: (computed xs, counter)."""
  def f(c, inp):
    xt, t = inp
    c = c + xt
    o[t, :] = c
    return c, None
  lax.scan(f, jnp.zeros((64,), jnp.float32), (jnp.exp(x_ref[...]) - 1.0, jnp.arange(x_ref.shape[0])), reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def two_counters(x_ref, o):
  """Rows reversed with a step count: xs a tuple of two aranges of 80."""
  n = x_ref.shape[0]

  def f(c, ij):
    i, j = ij
    o[n - 1 - i, :] = x_ref[j, :] + c
    return c + 1.0, None
  lax.scan(f, 0.0, (jnp.arange(n), jnp.arange(n)))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), F32))
def scaled_by_a_row(x_ref, o):
  w = x_ref[0, :]

  def f(h, row):
    return h + row, None
  h, _ = lax.scan(f, jnp.zeros((128,), jnp.float32), x_ref[...] * w[None, :])
  o[...] = h


def test_long_scans_over_computed_xs_read_a_row_a_step():
  x, g = _input((100, 128), BF16, 1), _input((100, 128), BF16, 2)
  np.testing.assert_allclose(_f64(gated_decay(x, g, interpret=True)), _gated_ref(x, g), rtol=1e-5, atol=1e-5)
  y = _input((72, 64), F32, 3, 0.1)
  want = np.cumsum(np.expm1(_f64(y))[::-1], 0)[::-1]
  np.testing.assert_allclose(_f64(reverse_cumsum_rows(y, interpret=True)), want, rtol=1e-5, atol=1e-6)
  z = _input((80, 128), F32, 4)
  np.testing.assert_allclose(_f64(two_counters(z, interpret=True)), (_f64(z) + np.arange(80)[:, None])[::-1],
                             rtol=1e-6)
  gated_decay.check(S((100, 128), BF16), S((100, 128), BF16))
  e = expect(scaled_by_a_row, [S((100, 128), F32)], mg.KernelTypeError, "lax.scan",
             "lax.scan is JAX's control flow, which a kernel writes in Python")       # (a named tensor in the xs)
  assert "ml.static_range((x_ref[...] * w[None, :]).shape[0])" in e.hint, e.hint
  assert "f(carry, (x_ref[...] * w[None, :])[" in e.hint, e.hint


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_softplus_and_computed_scans_match_interpret_mode():
  x, b = _input((16, 128), F32, 1, 20.0), _input((128,), F32, 2)
  np.testing.assert_allclose(_f64(jax.jit(dt_softplus)(x, b)), _softplus(_f64(x) + _f64(b)[None, :]), rtol=4e-6,
                             atol=1e-6)
  xs, gs = _input((100, 128), BF16, 1), _input((100, 128), BF16, 2)
  np.testing.assert_allclose(_f64(jax.jit(gated_decay)(xs, gs)), _gated_ref(xs, gs), rtol=1e-4, atol=1e-4)
  y = _input((72, 64), F32, 3, 0.1)
  np.testing.assert_allclose(_f64(jax.jit(reverse_cumsum_rows)(y)), np.cumsum(np.expm1(_f64(y))[::-1], 0)[::-1],
                             rtol=1e-4, atol=1e-5)
  z = _input((80, 128), F32, 4)
  np.testing.assert_allclose(_f64(jax.jit(two_counters)(z)), (_f64(z) + np.arange(80)[:, None])[::-1], rtol=1e-6)
  x = _input((100,), F32, 5)
  np.testing.assert_array_equal(_f64(jax.jit(zero_one_of_100)(x)), _f64(zero_one_of_100(x, interpret=True)))
  y, i = _input((5, 40), F32, 6), jnp.asarray([-2], jnp.int32)
  np.testing.assert_array_equal(_f64(jax.jit(scale_at_runtime_index)(y, i)),
                                _f64(scale_at_runtime_index(y, i, interpret=True)))
