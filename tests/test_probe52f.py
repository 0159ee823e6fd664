"""Probe 52f: kernels as JAX citizens. A tensor meeting a narrower ml.scalar or 0-d input of its kind (a float32
accumulator times a bfloat16 0-d `scale`, int64 offsets plus an int32 0-d `start` under jax_enable_x64) was MG104
("never converted implicitly"), though jnp gives the tensor's dtype whether the scalar is weak (a Python number
takes the tensor's dtype) or an array (promoted to the wider tensor's): it computes as jnp's now. A scalar wider
than the tensor (`x_bf16 * a` of a float32 `a`), or of a dtype that promotes past both (float16 with bfloat16),
stays MG104, as does an int32 ml.scalar meeting int64 (a Python int through jax.jit is its low 32 bits).

An undecorated function of the user's called on register values or refs (a Pallas port's module-level helper, an
activation passed as a constexpr to select a kernel variant through jax.jit's static arguments: `act=my_act`,
`act=lambda v: ...`, a functools.partial of one) was MG003 "decorate a helper of your own with @ml.inline", though
the same function under @jax.jit was traced as one: it is traced as the @ml.inline helper it would be decorated."""
from __future__ import annotations

import dataclasses
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from locate import expect

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16, BF16, I8, I32, I64 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.int32, jnp.int64


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _exports(kernel, *specs):
  """Builds for CUDA (the real Mosaic GPU module, verified) as jax.export does."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a)), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a narrower scalar meets a wider tensor
@mg.mgpu_kernel(out_shape=lambda x, s: S((128,), F32), grid=(1,))
def scaled_sum(x, s, o):
  acc = ml.zeros((128,), F32)
  for i in range(x.shape[0] // 128):
    acc += x.at[ml.ds(i * 128, 128)][...].astype(F32) * s[...]      # a bfloat16 model's 0-d scale
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, a: x, grid=lambda x, a: (x.shape[0] // 128,))
def times(x, a: ml.scalar, o):
  r = ml.ds(ml.program_id(0) * 128, 128)
  o.at[r][...] = x.at[r][...] * a


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def shifted(x, s, o):
  o[...] = x[...] + s[...]


def _narrow_scalar_cases():
  rng = np.random.default_rng(0)
  xb = rng.standard_normal(512).astype(BF16)
  xf = rng.standard_normal(256).astype(np.float32)
  xi = np.arange(256, dtype=np.int32) - 100
  return xb, xf, xi


def test_a_float32_accumulator_times_a_bfloat16_0d_input_is_float32():
  """MG104 at `* s[...]`: jnp's float32 * bfloat16 is float32, for a weak scalar and a bfloat16 array alike."""
  xb, _, _ = _narrow_scalar_cases()
  for s in (jnp.bfloat16(0.75), jnp.float16(0.75)):
    got = scaled_sum(xb, s, interpret=True)
    want = (xb.astype(np.float32) * np.float32(s)).reshape(4, 128).sum(0)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
    got = jax.jit(lambda x, s: scaled_sum(x, s, interpret=True))(xb, s)
    np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _exports(scaled_sum, S((512,), BF16), S((), BF16))
  _a_wider_or_promoting_scalar_stays_mg104()


@pytest.mark.parametrize("scalar", [jnp.bfloat16(-1.5), np.float16(2.5)])
def test_an_ml_scalar_narrower_than_the_tensor_computes_as_jnps(scalar):
  """`x_f32 * a` of a bfloat16 (float16) ml.scalar: jnp's result is float32, eagerly, under jax.jit and jax.vmap."""
  _, xf, _ = _narrow_scalar_cases()
  want = jnp.asarray(xf) * scalar
  got = times(xf, scalar, interpret=True)
  assert got.dtype == want.dtype == F32
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  got = jax.jit(lambda x, a: times(x, a, interpret=True))(xf, scalar)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  a = jnp.asarray([scalar, scalar * 2])
  got = jax.vmap(lambda x, a: times(x, a, interpret=True), in_axes=(None, 0))(xf, a)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(xf[None] * a[:, None]))


def test_narrower_integer_scalars_widen_as_jnps():
  """int32 values times an int8 ml.scalar, and (jax_enable_x64) int64 values plus an int32 0-d input: jnp's
  wider integer, where both were MG104."""
  _, _, xi = _narrow_scalar_cases()
  got = times(xi, jnp.int8(-3), interpret=True)
  assert got.dtype == I32
  np.testing.assert_array_equal(np.asarray(got), xi * -3)
  with jax.enable_x64(True):
    x64 = jnp.asarray(xi, I64) * (1 << 33)                       # past int32's range
    got = shifted(x64, jnp.int32(-7), interpret=True)
    assert got.dtype == I64
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x64) - 7)
    starts = jnp.asarray([0, 5, -9], I32)
    got = jax.vmap(lambda s: shifted(x64, s, interpret=True))(starts)
    np.testing.assert_array_equal(np.asarray(got), np.asarray(x64)[None] + np.asarray(starts)[:, None])
    assert "mosaic_gpu" in _exports(shifted, S((256,), I64), S((), I32))
  _an_int32_ml_scalar_meeting_int64_stays_mg104()


def _a_wider_or_promoting_scalar_stays_mg104():
  """Where jnp's result depends on whether the call passes a Python number (weak) or an array, the choice stays
  the user's: a float32 scalar with a bfloat16 tensor, a float16 one with bfloat16 (jnp: float32 or bfloat16)."""
  e = expect(times, [S((256,), BF16), S((), F32)], mg.DtypeMismatchError, "x.at[r][...] * a",
             "* on x.at[r][...] (bfloat16) and a (float32): dtypes differ and are never converted implicitly")
  assert e.hint.startswith("convert the scalar, a.astype(jnp.bfloat16)")
  expect(shifted, [S((256,), BF16), S((), F16)], mg.DtypeMismatchError, "x[...] + s[...]",
         "+ on x[...] (bfloat16) and s[...] (float16): dtypes differ and are never converted implicitly",
         hint="convert the scalar, s[...].astype(jnp.bfloat16): the result stays bfloat16, as jnp's does for a"
              " Python number (s[...] reads an input of dtype float16 here, not weakly typed); or (x[...].astype("
              "jnp.float16) + s[...]).astype(jnp.bfloat16) (computed in float16, the result converted back to"
              " bfloat16)")


def _an_int32_ml_scalar_meeting_int64_stays_mg104():
  """A Python int passed for it is its low 32 bits through jax.jit: the hint says to pass jnp.int64(n)."""
  with jax.enable_x64(True):
    expect(times, [S((256,), I64), S((), I32)], mg.DtypeMismatchError, "x.at[r][...] * a",
           "* on x.at[r][...] (int64) and a (int32): dtypes differ and are never converted implicitly",
           hint="pass a as an int64 scalar, jnp.int64(a) (with jax_enable_x64): a Python int passed for an"
                " ml.scalar is int32 here, its low 32 bits through jax.jit; or convert it, a.astype(jnp.int64),"
                " where every value passed fits int32")


# ---------------------------------------------------------------- undecorated helpers of the user's
def swish(v, beta=1.0):
  return v * jax.nn.sigmoid(beta * v)


def rms_rows(ref, i, eps=1e-6):          # takes a ref and a run-time row block, as Pallas helpers do
  v = ref.at[ml.ds(i * 8, 8), :][...].astype(F32)
  return v * jax.lax.rsqrt(jnp.mean(v * v, axis=-1, keepdims=True) + eps)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 8,))
def normed_swish(x, o):
  i = ml.program_id(0)
  o.at[ml.ds(i * 8, 8), :][...] = swish(rms_rows(x, i)).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, *, act: x, grid=lambda x, *, act: (x.shape[0] // 128,))
def activated(x, o, *, act: ml.constexpr):
  r = ml.ds(ml.program_id(0) * 128, 128)
  o.at[r][...] = act(x.at[r][...])


def recur_step(t, carry):              # a module-level jax.lax.fori_loop body
  h, acc = carry
  h = jnp.tanh(h * 0.5 + 0.1)
  return h, acc + h


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def recurrence(x, o):
  _, acc = jax.lax.fori_loop(0, 4, recur_step, (x[...], jnp.zeros_like(x[...])))
  o[...] = acc


def _swish_np(v, beta=1.0):
  return v / (1.0 + np.exp(-beta * v))


def test_an_undecorated_module_level_helper_is_traced_as_inline():
  """MG003 at `swish(...)` ("decorate a helper of your own with @ml.inline"); a helper taking a ref computes too."""
  x = np.random.default_rng(1).standard_normal((32, 128)).astype(np.float32)
  v = x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(np.asarray(normed_swish(x, interpret=True)), _swish_np(v), rtol=1e-5, atol=1e-5)
  got = jax.vmap(lambda x: normed_swish(x, interpret=True))(np.stack([x, -x]))
  np.testing.assert_allclose(np.asarray(got[1]), _swish_np(-v), rtol=1e-5, atol=1e-5)
  assert "mosaic_gpu" in _exports(normed_swish, S((32, 128), BF16))
  y, h, acc = x[0], x[0].astype(np.float64), 0.0           # a module-level body of jax.lax.fori_loop (MG003 too)
  for _ in range(4):
    h = np.tanh(h * 0.5 + 0.1)
    acc = acc + h
  np.testing.assert_allclose(np.asarray(recurrence(y, interpret=True)), acc, rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _exports(recurrence, S((128,), F32))


@dataclasses.dataclass(frozen=True)
class Leaky:                             # an activation object (hashable: a jax.jit static argument)
  slope: float = 0.1

  def __call__(self, v):
    return jnp.where(v > 0, v, self.slope * v)


@pytest.mark.parametrize("act, ref", [
    (swish, _swish_np),
    (Leaky(0.2), lambda v: np.where(v > 0, v, 0.2 * v)),
    (functools.partial(swish, beta=2.0), lambda v: _swish_np(v, 2.0)),
    (lambda v: jnp.where(v > 0, v, 0.1 * v), lambda v: np.where(v > 0, v, 0.1 * v)),
])
def test_an_activation_passed_as_a_constexpr_selects_the_variant(act, ref):
  """A plain function, an object with a __call__, a partial of one and a lambda as the constexpr: eagerly, through jax.jit's static_argnames
  (the variant a static argument selects) and under jax.vmap."""
  x = np.random.default_rng(2).standard_normal(256).astype(np.float32)
  np.testing.assert_allclose(np.asarray(activated(x, act=act, interpret=True)), ref(x), rtol=1e-5, atol=1e-6)
  f = jax.jit(activated, static_argnames=("act", "interpret"))
  np.testing.assert_allclose(np.asarray(f(x, act=act, interpret=True)), ref(x), rtol=1e-5, atol=1e-6)
  got = jax.vmap(functools.partial(activated, act=act, interpret=True))(np.stack([x, 2 * x]))
  np.testing.assert_allclose(np.asarray(got[1]), ref(2 * x), rtol=1e-5, atol=1e-6)
  assert "mosaic_gpu" in _exports(functools.partial(activated, act=act), S((256,), F32))


exec("def _sourceless(v):\n  return v * 2\n", globals())      # made by exec: no source to trace
_sourceless = globals()["_sourceless"]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def calls_sourceless(x, o):
  o[...] = _sourceless(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def calls_installed(x, o):
  o[...] = pytest.approx(x[...])          # an installed package's function: not traced


def test_a_helper_without_source_keeps_its_mg003_and_a_helper_mistake_is_at_its_line():
  """What cannot be traced says to decorate a helper; a mistake inside an undecorated helper is reported at the
  helper's own line, with the kernel's call noted."""
  expect(calls_sourceless, [S((128,), F32)], mg.KernelTypeError, "_sourceless(x[...])",
         "_sourceless cannot take a register tensor inside a kernel",
         hint="kernels call ml.* functions on register values; decorate a helper of your own with @ml.inline to"
              " call it here")
  expect(calls_installed, [S((128,), F32)], mg.KernelTypeError, "pytest.approx(x[...])",
         "approx cannot take a register tensor inside a kernel")
  with pytest.raises(mg.KernelError) as info:
    activated.check(S((256,), F32), act=_broken)
  e = info.value
  assert type(e) is mg.ShapeMismatchError and e.lineno == _broken.__code__.co_firstlineno + 1, e.render()
  assert e.message == ("+ on v of shape (128,) and v[:64] of shape (64,): the shapes do not broadcast (axis 0 of"
                       " the result would be both 128 and 64)"), e.render()
  assert any(":%d:" % (activated.fn.__code__.co_firstlineno + 3) in n for n in e.notes), e.render()


def _broken(v):
  return v + v[:64]                 # a mistake inside the helper: reported here


# ---------------------------------------------------------------- a rebound global a helper reads retraces
GAIN = 0.5


def gained(v):
  return jnp.tanh(v) * GAIN


@jax.jit
def jit_gained(v):
  return v * GAIN


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def calls_gained(x, o):
  o[...] = gained(x[...]) + jit_gained(x[...])


def test_a_global_rebound_under_a_traced_helper_retraces_the_kernel():
  """The helper made for an undecorated function (called, or passed as a constexpr) kept its first parse's globals,
  and a @jax.jit helper's reads (probe 49d) were not watched: a rebound GAIN gave the old numbers, silently."""
  global GAIN
  x = np.random.default_rng(4).standard_normal(128).astype(np.float32)
  try:
    for g in (0.5, 3.0):
      GAIN = g
      np.testing.assert_allclose(np.asarray(calls_gained(x, interpret=True)), g * np.tanh(x) + g * x, rtol=1e-5,
                                 atol=1e-6)
      np.testing.assert_allclose(np.asarray(activated(x, act=gained, interpret=True)), g * np.tanh(x), rtol=1e-5,
                                 atol=1e-6)
  finally:
    GAIN = 0.5


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_narrow_scalars_on_the_gpu_match_interpret_mode():
  xb, xf, xi = _narrow_scalar_cases()
  s = jnp.bfloat16(0.75)
  np.testing.assert_allclose(np.asarray(scaled_sum(xb, s)), np.asarray(scaled_sum(xb, s, interpret=True)),
                             rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(np.asarray(times(xf, jnp.bfloat16(-1.5))), xf * np.float32(-1.5))
  np.testing.assert_array_equal(np.asarray(jax.jit(times)(xi, jnp.int8(-3))), xi * -3)
  with jax.enable_x64(True):
    x64 = jnp.asarray(xi, I64) * (1 << 33)
    np.testing.assert_array_equal(np.asarray(shifted(x64, jnp.int32(-7))), np.asarray(x64) - 7)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_undecorated_helpers_on_the_gpu_match_interpret_mode():
  x = np.random.default_rng(3).standard_normal((32, 128)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(normed_swish(x)), np.asarray(normed_swish(x, interpret=True)),
                             rtol=1e-5, atol=1e-5)
  xb = jnp.asarray(x, BF16)
  np.testing.assert_allclose(np.asarray(normed_swish(xb), np.float32),
                             np.asarray(normed_swish(xb, interpret=True), np.float32), rtol=2e-2, atol=2e-2)
  np.testing.assert_allclose(np.asarray(recurrence(x[0])), np.asarray(recurrence(x[0], interpret=True)),
                             rtol=1e-5, atol=1e-6)
  f = jax.jit(activated, static_argnames="act")
  for act in (swish, functools.partial(swish, beta=2.0), Leaky(0.2)):
    np.testing.assert_allclose(np.asarray(f(x.reshape(-1), act=act)),
                               np.asarray(activated(x.reshape(-1), act=act, interpret=True)), rtol=1e-5, atol=1e-6)
