"""Probe 51i (scans and recurrences as users write them). (1) `lax.scan` over time longer than SCAN_UNROLL (64)
steps whose xs are the trip counter (`jnp.arange(L)`) or None (`length=L`) and whose body returns None as its y
(Pallas's selective scan, an RWKV recurrence, each step's output stored by the body) runs as a run-time loop; it
was MG003 past 64 steps. A long scan whose body returns ys to stack stays MG003, now saying why and to store
each step's y in the body."""
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


def _input(shape, dtype=F32, seed=0, scale=1.0, positive=False):
  rng = np.random.default_rng(seed)
  return jnp.asarray((rng.random(shape) if positive else rng.standard_normal(shape)) * scale, dtype)


def _f64(x):
  return np.asarray(x).astype(np.float64)


# ---------------------------------------------------------------- lax.scan over time, past 64 steps
@mg.mgpu_kernel(out_shape=lambda x, dt, a, b, c: x, grid=lambda x, dt, a, b, c: (x.shape[1] // 64,))
def selective_scan_lax(x, dt, a, b, c, y_ref):
  """Mamba's selective scan as a Pallas kernel writes it: the state (d_state, block_d) carried by lax.scan over
  jnp.arange(L), each step's y stored by the body."""
  cols = ml.ds(ml.program_id(0) * 64, 64)
  a_v = a[:, cols]

  def step(h, t):
    d = jax.nn.softplus(dt[t, cols])
    h = jnp.exp(d[None, :] * a_v) * h + b[t, :][:, None] * (d * x[t, cols])[None, :]
    y_ref[t, cols] = jnp.sum(c[t, :][:, None] * h, axis=0).astype(y_ref.dtype)
    return h, None
  lax.scan(step, jnp.zeros((16, 64), jnp.float32), jnp.arange(x.shape[0]))


def _selective_ref(x, dt, a, b, c):
  x, dt, a, b, c = map(_f64, (x, dt, a, b, c))
  h, out = np.zeros(a.shape), np.zeros_like(x)
  for t in range(x.shape[0]):
    d = np.log1p(np.exp(dt[t]))
    h = np.exp(d[None] * a) * h + b[t][:, None] * (d * x[t])[None]
    out[t] = (c[t][:, None] * h).sum(0)
  return out


def _selective_inputs(steps=80, dtype=F32):
  return (_input((steps, 128), dtype, 1), _input((steps, 128), dtype, 2, 0.5),
          -_input((16, 128), F32, 3, positive=True),
          _input((steps, 16), dtype, 4), _input((steps, 16), dtype, 5))


@mg.mgpu_kernel(out_shape=lambda k, v, w: v)
def rwkv_lax(k, v, w, y):
  """An RWKV-style time mix: a tuple carry (a step counter, numerator, denominator), lax.scan of xs=None, length=."""
  ww = jnp.exp(-jnp.exp(w[...]))

  def step(carry, _):
    t, num, den = carry
    kt = jnp.exp(k[t, :])
    num, den = ww * num + kt * v[t, :], ww * den + kt
    y[t, :] = num / den
    return (t + 1, num, den), None
  lax.scan(step, (0, jnp.zeros((128,), F32), jnp.zeros((128,), F32)), None, length=k.shape[0])


def _rwkv_ref(k, v, w):
  k, v, w = map(_f64, (k, v, w))
  ww, num, den, y = np.exp(-np.exp(w)), np.zeros_like(w), np.zeros_like(w), np.zeros_like(v)
  for t in range(k.shape[0]):
    num, den = ww * num + np.exp(k[t]) * v[t], ww * den + np.exp(k[t])
    y[t] = num / den
  return y


@mg.mgpu_kernel(out_shape=lambda a, b: (b, S(b.shape[1:], F32)))
def reverse_dict_scan(a, b, o, last):
  """A backward recurrence (reverse=True) with a dict carry, its final carry used after the scan."""
  def step(c, t):
    h = a[t, :] * c["h"] + b[t, :]
    o[t, :] = h
    return {"h": h, "s": c["s"] + h}, None
  out, _ = lax.scan(step, {"h": jnp.zeros((128,), F32), "s": jnp.zeros((128,), F32)}, jnp.arange(b.shape[0]),
                    reverse=True)
  last[...] = out["s"]


def _reverse_ref(a, b):
  a, b = _f64(a), _f64(b)
  h, s, o = np.zeros(b.shape[1]), np.zeros(b.shape[1]), np.zeros_like(b)
  for t in range(b.shape[0] - 1, -1, -1):
    h = a[t] * h + b[t]
    o[t], s = h, s + h
  return o, s


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def long_scan_with_ys(a, o):
  def step(h, t):
    h = h * 0.5 + a[t, :]
    return h, h
  h, ys = lax.scan(step, jnp.zeros((128,), F32), jnp.arange(a.shape[0]))
  o[...] = h + ys[0]


@mg.mgpu_kernel(out_shape=lambda a: S(a.shape[1:], F32))
def long_scan_carry_narrowed(a, o):
  def step(h, t):
    return (h + a[t, :]).astype(jnp.bfloat16), None
  h, _ = lax.scan(step, jnp.zeros((128,), F32), jnp.arange(a.shape[0]))
  o[...] = h


def test_selective_scan_over_80_steps_runs_as_a_loop():
  args = _selective_inputs()
  got = selective_scan_lax(*args, interpret=True)
  np.testing.assert_allclose(_f64(got), _selective_ref(*args), rtol=1e-4, atol=1e-4)
  text = selective_scan_lax.mlir(*[S(t.shape, t.dtype) for t in args])
  assert "scf.for" in text and text.count("math.exp") < 16      # one copy of the body, not 80


def test_rwkv_scan_of_length_and_a_backward_scan_with_a_dict_carry():
  k, v, w = _input((96, 128), F32, 1, 0.5), _input((96, 128), F32, 2), _input((128,), F32, 3, 0.5)
  np.testing.assert_allclose(_f64(rwkv_lax(k, v, w, interpret=True)), _rwkv_ref(k, v, w), rtol=1e-4, atol=1e-6)
  a, b = _input((70, 128), F32, 4, positive=True), _input((70, 128), F32, 5)
  o, s = reverse_dict_scan(a, b, interpret=True)
  want_o, want_s = _reverse_ref(a, b)
  np.testing.assert_allclose(_f64(o), want_o, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(_f64(s), want_s, rtol=1e-4, atol=1e-4)
  jax.export.export(jax.jit(lambda *t: reverse_dict_scan(*t)), platforms=["cuda"])(S(a.shape, F32), S(b.shape, F32))


def test_a_long_scan_that_stacks_ys_keeps_its_mg003_and_a_body_mistake_is_at_its_line():
  expect(long_scan_with_ys, [S((100, 128), F32)], mg.KernelTypeError, "lax.scan(",
         "lax.scan of 100 steps returns ys to stack, which a kernel holds for at most 64 steps",
         hint="store each step's y where step makes it (out[t] = y, a row of an output or of an ml.smem buffer) and"
              " return None as its y: a lax.scan of more steps then runs as a loop")
  expect(long_scan_carry_narrowed, [S((100, 128), F32)], mg.LoopCarryTypeError, "lax.scan(",
         "h enters the loop as a float32 tensor of shape (128,) but an iteration makes it a bfloat16 tensor of shape"
         " (128,)", hint="convert it back where step returns it: return (...).astype(jnp.float32)")


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_long_lax_scans_match_interpret_mode():
  args = _selective_inputs(steps=200)
  np.testing.assert_allclose(_f64(jax.jit(selective_scan_lax)(*args)), _selective_ref(*args), rtol=2e-4, atol=2e-4)
  k, v, w = _input((96, 128), F32, 1, 0.5), _input((96, 128), F32, 2), _input((128,), F32, 3, 0.5)
  np.testing.assert_allclose(_f64(jax.jit(rwkv_lax)(k, v, w)), _rwkv_ref(k, v, w), rtol=2e-4, atol=1e-6)
  a, b = _input((70, 128), F32, 4, positive=True), _input((70, 128), F32, 5)
  o, s = jax.jit(reverse_dict_scan)(a, b)
  want_o, want_s = _reverse_ref(a, b)
  np.testing.assert_allclose(_f64(o), want_o, rtol=2e-4, atol=1e-5)
  np.testing.assert_allclose(_f64(s), want_s, rtol=2e-4, atol=1e-4)
