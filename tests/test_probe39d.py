"""Probe 39d (kernels as JAX citizens: closures, factories, caching, jit/vmap/scan, promotion).
What a kernel's helpers capture is part of what it compiles to: an `ml.inline` lambda over a factory's
argument, `lambda v, a=a: ...`, a def's default, a functools.partial of a helper, a bound helper method,
what a method or property reads of its instance, a config object passed as a constexpr. Each was missed
by the dependency check or the cache key, so a second kernel (or a second call) silently ran the first
one's numbers. Also: jax.jit(kernel) with a constexpr it cannot trace, ml.inline of a partial, MG104's
hint for a 0-d input, and an export for the CPU."""

import functools
import types

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rand(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape).astype(np.float32)).astype(dtype)


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  return tmp_path


# ---------------------------------------------------------------- helpers a factory builds, and the disk cache
def _kernel_of(act):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
  def scaled(x, out):
    i = ml.program_id(0)
    w = ml.ds(i * 128, 128)
    out.at[w][...] = act(x.at[w][...])
  return scaled


def _lambda_closure(alpha):
  return _kernel_of(ml.inline(lambda v: v * alpha))


def _lambda_default(alpha):
  return _kernel_of(ml.inline(lambda v, a=alpha: v * a))


def _def_default(alpha):
  @ml.inline
  def act(v, s=alpha):
    return v * s
  return _kernel_of(act)


def _def_kw_default(alpha):
  @ml.inline
  def act(v, *, s=alpha):
    return v * s
  return _kernel_of(act)


@pytest.mark.parametrize("factory", [_lambda_closure, _lambda_default, _def_default, _def_kw_default])
def test_helpers_a_factory_builds_are_cached_by_what_they_capture(cache_dir, factory):
  x = _rand((256, 64))
  for alpha in (2.0, 3.0):         # two kernels of one source: the second must not read the first's entry
    np.testing.assert_array_equal(np.asarray(factory(alpha)(x, interpret=True)), np.asarray(x * alpha))
  again = factory(3.0)             # a fresh kernel of the same capture does read its entry
  again(x, interpret=True)
  assert again.cache_info().disk_hits == 1


@mg.mgpu_kernel(out_shape=lambda x, *, act: x, grid=lambda x, *, act: (x.shape[0] // 128,))
def apply(x, out, *, act: ml.constexpr):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = act(x.at[w][...])


def test_lambda_helpers_passed_as_constexprs_are_told_apart_by_their_captures(cache_dir):
  x = _rand((256, 64))
  acts = [(a, ml.inline(lambda v, a=a: v * a)) for a in (4.0, 5.0)]      # the loop idiom
  acts += [(a, (lambda a: ml.inline(lambda v: ml.maximum(v, a)))(a)) for a in (0.1, 0.5)]
  for a, act in acts:
    want = x * a if a > 1 else jnp.maximum(x, a)
    np.testing.assert_array_equal(np.asarray(apply(x, act=act, interpret=True)), np.asarray(want))


def test_a_lambda_helper_recompiles_when_its_closure_cell_is_rebound():
  x = _rand((256, 64))
  b = 2.0
  act = ml.inline(lambda v: v * b)
  np.testing.assert_array_equal(np.asarray(apply(x, act=act, interpret=True)), np.asarray(x * 2.0))
  b = 5.0     # noqa: F841 (read by act)
  np.testing.assert_array_equal(np.asarray(apply(x, act=act, interpret=True)), np.asarray(x * 5.0))


# ---------------------------------------------------------------- a functools.partial of a helper: what the helper reads
SCALE = 2.0


@ml.inline
def _scaled_by(v, s):
  return v * s * SCALE


_act = functools.partial(_scaled_by, s=1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def partial_global(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = _act(x.at[w][...])


def test_a_partial_of_a_helper_recompiles_when_a_global_the_helper_reads_is_rebound(monkeypatch):
  x = _rand((256, 64))
  for scale in (2.0, 3.0):       # read through the global partial, and through a constexpr partial
    monkeypatch.setitem(globals(), "SCALE", scale)
    np.testing.assert_array_equal(np.asarray(partial_global(x, interpret=True)), np.asarray(x * scale))
    np.testing.assert_array_equal(np.asarray(apply(x, act=_act, interpret=True)), np.asarray(x * scale))


# ---------------------------------------------------------------- a bound @ml.inline method: what it reads of its instance
class _Model:
  def __init__(self, s):
    self.s = s

  @ml.inline
  def step(self, v):
    return v * self.s


_model = _Model(1.0)
_step = _model.step


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def bound_global(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = _step(x.at[w][...])


def test_a_bound_helper_is_compiled_per_instance_and_per_attribute_it_reads(cache_dir, monkeypatch):
  x = _rand((256, 64))
  for s in (1.0, 2.0):              # m.s rebound: through a global bound method and a constexpr one
    monkeypatch.setattr(_model, "s", s)
    np.testing.assert_array_equal(np.asarray(bound_global(x, interpret=True)), np.asarray(x * s))
    np.testing.assert_array_equal(np.asarray(apply(x, act=_model.step, interpret=True)), np.asarray(x * s))
  for s in (3.0, 4.0):              # two instances: two disk-cache entries
    np.testing.assert_array_equal(np.asarray(apply(x, act=_Model(s).step, interpret=True)), np.asarray(x * s))


# ---------------------------------------------------------------- ml.inline of a functools.partial
def _leaky(t, slope):
  return ml.where(t > 0, t, t * slope)


def test_ml_inline_of_a_partial_is_the_partial_of_the_helper(cache_dir):
  x = _rand((256, 64))
  for slope in (0.1, 0.3):     # through a kernel's closure (a factory), and as a constexpr
    act = ml.inline(functools.partial(_leaky, slope=slope))
    want = np.asarray(jnp.where(x > 0, x, x * slope))
    np.testing.assert_array_equal(np.asarray(_kernel_of(act)(x, interpret=True)), want)
    np.testing.assert_array_equal(np.asarray(apply(x, act=act, interpret=True)), want)


# ---------------------------------------------------------------- a 0-d input (a Python float through jax.jit) meeting a bfloat16 tile
@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def scale_by_input(x, s, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * s[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=lambda x, s: (x.shape[0] // 128,))
def scale_by_input_hint_followed(x, s, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * s[...].astype(jnp.bfloat16)


def test_a_0d_input_meeting_a_narrower_tile_hints_converting_the_scalar():
  specs = (S((256, 64), jnp.bfloat16), S((), F32))
  expect(scale_by_input, specs, mg.DtypeMismatchError, "x.at[w][...] * s[...]",
         "* on x.at[w][...] (bfloat16) and s[...] (float32): dtypes differ and are never converted implicitly",
         hint="convert the scalar, s[...].astype(jnp.bfloat16): the result stays bfloat16, as jnp's does for a Python"
              " number (s[...] reads an input of dtype float32 here, not weakly typed as a Python float passed for it"
              " would be); or (x.at[w][...].astype(jnp.float32) * s[...]).astype(jnp.bfloat16)"
              " (computed in float32, the result converted back to bfloat16)")
  x = _rand((256, 64), jnp.bfloat16)
  got = jax.jit(lambda x, s: scale_by_input_hint_followed(x, s, interpret=True))(x, 0.3)
  want = jax.jit(lambda x, s: x * s)(x, 0.3)             # jnp: the weak Python float keeps bfloat16
  assert got.dtype == want.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


# ---------------------------------------------------------------- jax.export for the CPU (its default on a machine without a GPU)
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def doubled(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * 2.0


def test_an_export_for_the_cpu_hints_exporting_for_cuda_not_interpret_mode():
  spec = S((256, 64), F32)
  with pytest.raises(mg.NoGpuError) as info:
    jax.export.export(jax.jit(doubled), platforms=["cpu"])(spec)
  e = info.value
  assert (e.filename, e.lineno, e.col_offset) == (__file__, where(doubled, "def doubled")[0], 0)
  assert e.message == ("doubled runs on an NVIDIA Hopper GPU (it is a Mosaic GPU kernel), but the call is being"
                       " compiled for cpu: a Mosaic GPU kernel has no lowering there")
  assert e.hint.startswith("export for platforms=['cuda']; interpret=True")     # (it said: pass interpret=True)
  assert jax.export.export(jax.jit(doubled), platforms=["cuda"])(spec).platforms == ("cuda",)   # followed
  with pytest.raises(mg.NoGpuError) as info:        # jax.jit on the CPU still hints interpret mode
    jax.jit(doubled).lower(jnp.zeros((256, 64), F32)).compile()
  assert info.value.hint.startswith("pass interpret=True")


# ---------------------------------------------------------------- a plain method or property of a config object, on static values
class _Cfg:
  def __init__(self):
    self.scale = 2.0

  def factor(self):
    return self.scale * 1.0

  @property
  def prop(self):
    return self.scale


_cfg = _Cfg()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def by_method(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * _cfg.factor()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def by_property(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * _cfg.prop


@pytest.mark.parametrize("kernel", [by_method, by_property])
def test_an_attribute_a_method_or_property_reads_of_a_config_object_is_watched(kernel, monkeypatch):
  x = _rand((256, 64))
  for s in (2.0, 3.0):
    monkeypatch.setattr(_cfg, "scale", s)
    np.testing.assert_array_equal(np.asarray(kernel(x, interpret=True)), np.asarray(x * s))


# ---------------------------------------------------------------- a config object passed as a constexpr, changed in place
class _Plain:
  def __init__(self, scale):
    self.scale = scale
    self.act = _leaky          # a function held too: the key stays hashable


@mg.mgpu_kernel(out_shape=lambda x, *, cfg: x, grid=lambda x, *, cfg: (x.shape[0] // 128,))
def by_config(x, out, *, cfg: ml.constexpr):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = x.at[w][...] * cfg.scale


def test_a_config_object_passed_as_a_constexpr_and_changed_in_place_recompiles():
  x = _rand((256, 64))
  cfg = _Plain(2.0)
  for s in (2.0, 3.0):
    cfg.scale = s
    np.testing.assert_array_equal(np.asarray(by_config(x, cfg=cfg, interpret=True)), np.asarray(x * s))


# ---------------------------------------------------------------- jax.jit(kernel) with a constexpr it cannot trace
@mg.mgpu_kernel(out_shape=lambda x, *, act, odt=F32: S(x.shape, odt), grid=lambda x, *, act, odt=F32: (x.shape[0] // 128,))
def activation(x, out, *, act: ml.constexpr, odt: ml.constexpr = F32):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  t = x.at[w][...]
  if act == "relu":
    t = ml.maximum(t, 0.0)
  out.at[w][...] = t.astype(odt)


def test_a_constexpr_jax_jit_cannot_trace_is_named_with_static_argnames_and_partial():
  x = _rand((256, 64))
  with pytest.raises(mg.KernelError) as info:
    jax.jit(activation)(x, act="relu", odt=jnp.bfloat16)      # (JAX's TypeError: not a valid abstract array)
  e = info.value
  assert type(e) is mg.SignatureError
  line = next(n for n, text in enumerate(open(__file__), 1) if text.startswith("    jax.jit(activation)(x, act="))
  assert (e.filename, e.lineno, e.col_offset) == (__file__, line, 4)
  assert e.message == ("jax.jit traces every argument not named in its static_argnames, and activation's constexprs"
                       " act='relu', odt=jnp.bfloat16 are not an array it can trace")
  assert e.hint == ("name them static, jax.jit(activation, static_argnames=['act', 'odt']), or bind them first:"
                    " jax.jit(functools.partial(activation, act='relu', odt=jnp.bfloat16))")
  want = np.asarray(jax.nn.relu(x).astype(jnp.bfloat16), np.float32)
  bound = jax.jit(functools.partial(activation, act="relu", odt=jnp.bfloat16, interpret=True))     # followed
  static = jax.jit(activation, static_argnames=["act", "odt", "interpret"])
  np.testing.assert_array_equal(np.asarray(bound(x), np.float32), want)
  np.testing.assert_array_equal(np.asarray(static(x, act="relu", odt=jnp.bfloat16, interpret=True), np.float32), want)


# ---------------------------------------------------------------- a lambda helper reading an attribute of a config object
_NS = types.SimpleNamespace(scale=2.0)
_lambda_act = ml.inline(lambda v: v * _NS.scale)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def by_lambda_attribute(x, out):
  i = ml.program_id(0)
  w = ml.ds(i * 128, 128)
  out.at[w][...] = _lambda_act(x.at[w][...])


def test_an_attribute_a_lambda_helper_reads_is_watched(monkeypatch):
  x = _rand((256, 64))
  for s in (2.0, 3.0):
    monkeypatch.setattr(_NS, "scale", s)
    np.testing.assert_array_equal(np.asarray(by_lambda_attribute(x, interpret=True)), np.asarray(x * s))


# ---------------------------------------------------------------- autotuned kernels a factory builds: their disk winners
def _tuned(cap):
  @mg.autotune(configs=[dict(bm=256), dict(bm=128)], timer=lambda f, *a: 1.0)
  @mg.mgpu_kernel(out_shape=lambda x, *, bm: x, grid=lambda x, *, bm: (x.shape[0] // bm,))
  def tuned(x, out, *, bm: ml.constexpr = 128):
    assert bm <= cap
    i = ml.program_id(0)
    w = ml.ds(i * bm, bm)
    out.at[w][...] = x.at[w][...] * 2.0
  return tuned


def test_autotuned_kernels_of_other_captures_keep_their_own_winners(cache_dir):
  x = _rand((512, 64))
  assert _tuned(256).best_config(x) == {"bm": 256}
  assert _tuned(128).best_config(x) == {"bm": 128}      # (it read the other kernel's winner, bm=256)
