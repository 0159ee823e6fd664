"""Probe 33e (kernels as ordinary JAX functions, adversarially): jax_enable_x64, jit with static
and donated arguments, vmap, grad through custom_vjp, checkpoint and scan, eval_shape, export, AOT,
kernels in classes, closures and factories, redefinitions, the disk cache and threads."""
import dataclasses
import types
import typing

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _x():
  return jnp.arange(256, dtype=F32)


# ---------------------------------------------------------------- constexpr defaults from an enclosing function
def _scaler_with_default(c):
  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
  def scaled(x, out, *, f: ml.constexpr = c):
    i = ml.program_id(0)
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * f
  return scaled


def test_a_constexpr_default_read_from_the_enclosing_function_is_the_value_python_bound():
  """It was a raw NameError: the default's text was evaluated again in the kernel's module scope,
  where the factory's `c` does not exist."""
  x = _x()
  for c in (2.0, 3.0):
    k = _scaler_with_default(c)
    np.testing.assert_array_equal(k(x, interpret=True), x * c)
    np.testing.assert_array_equal(k(x, f=5.0, interpret=True), x * 5.0)


def test_a_constexpr_default_is_part_of_the_disk_cache_key(monkeypatch, tmp_path):
  """Two factories' kernels share the source text and every global read; only the default differs.
  Without the default in the key the second read the first's traced kernel from disk: x * 2 for x * 3."""
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  x = _x()
  two, three = _scaler_with_default(2.0), _scaler_with_default(3.0)
  np.testing.assert_array_equal(two(x, interpret=True), x * 2)
  np.testing.assert_array_equal(three(x, interpret=True), x * 3)
  again = _scaler_with_default(2.0)
  np.testing.assert_array_equal(again(x, interpret=True), x * 2)
  assert again.cache_info().disk_hits == 1


def _aliased_annotation(n):
  cx = ml.constexpr

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
  def scaled(x, out, k: cx = n):
    i = ml.program_id(0)
    out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * k
  return scaled


def test_an_annotation_naming_an_enclosing_functions_local_is_understood():
  """It was wrongly rejected (MG006: a positional parameter with a default taken for a ref):
  `cx = ml.constexpr` lives in the factory, not in the kernel's globals."""
  x = _x()
  np.testing.assert_array_equal(_aliased_annotation(4.0)(x, interpret=True), x * 4)


# ---------------------------------------------------------------- instance attributes read by a kernel
class _Layer:
  def __init__(self, scale):
    self.scale = scale

    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
    def scaled(x, out):
      i = ml.program_id(0)
      out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * self.scale
    self.kernel = scaled


CFG = types.SimpleNamespace(shift=1.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def shifted(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + CFG.shift


def test_an_instance_attribute_changed_after_the_first_call_recompiles_the_kernel():
  """It was silently stale: `self.scale = 5.0` (or a config object's `CFG.shift = 4.0`) after the
  first call kept running the kernel compiled with the old value."""
  x = _x()
  layer = _Layer(2.0)
  np.testing.assert_array_equal(layer.kernel(x, interpret=True), x * 2)
  layer.scale = 5.0
  np.testing.assert_array_equal(layer.kernel(x, interpret=True), x * 5)
  assert layer.kernel.cache_info().retraces == 1
  np.testing.assert_array_equal(shifted(x, interpret=True), x + 1)
  CFG.shift = 4.0
  try:
    np.testing.assert_array_equal(shifted(x, interpret=True), x + 4)
  finally:
    CFG.shift = 1.0


# ---------------------------------------------------------------- a bound method decorated
class _Model:
  def __init__(self):
    self.scale = 2.0
    self.kernel = mg.mgpu_kernel(out_shape=lambda x: x)(self.body)    # the decorating line

  def body(self, x, out):
    out[...] = x[...] * self.scale


def test_a_bound_method_decorated_says_how_to_read_self():
  """The message cut the method's repr off mid-address, and the hint (put the decorator on a def)
  did not say what to do with self."""
  with pytest.raises(mg.SignatureError) as info:
    _Model()
  e = info.value
  assert e.message == ("@mgpu_kernel takes a def function, got the bound method _Model.body: a kernel binds"
                       " no self (every parameter is an array or a constexpr)")
  assert "self.scale" in e.hint and "closure" in e.hint
  assert e.filename == __file__ and "the decorating line" in e.loc.source_line


# ---------------------------------------------------------------- NamedTuple and dataclass outputs
class _Stats(typing.NamedTuple):
  mean: object
  var: object


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class _DStats:
  mean: object
  var: object


@mg.mgpu_kernel(out_shape=lambda x: _Stats(x, x))
def stats_swapped(x, var, mean):
  v = x[...]
  mean[...] = v * 2
  var[...] = v * 3


@mg.mgpu_kernel(out_shape=lambda x: _DStats(x, x))
def dstats_swapped(x, var, mean):
  v = x[...]
  mean[...] = v * 2
  var[...] = v * 3


@mg.mgpu_kernel(out_shape=lambda x: _Stats(x, x))
def stats_in_order(x, mean, var):
  v = x[...]
  mean[...] = v * 2
  var[...] = v * 3


def test_a_namedtuple_or_dataclass_out_shape_whose_fields_name_other_parameters_is_an_error():
  """They were silently swapped (result.mean held what the kernel wrote into `mean`'s neighbour):
  the outputs follow the fields' order, as a dict's follow its sorted keys (which was checked)."""
  for k, kind in ((stats_swapped, "_Stats"), (dstats_swapped, "_DStats")):
    expect(k, [S((128,), F32)], mg.SignatureError, "out_shape=",
           f"out_shape's field 'mean' binds output parameter 'var', not the parameter named 'mean': {kind}'s"
           f" outputs follow its fields' order ('mean', 'var'), not parameter names",
           hint="name the output parameters in the fields' order (mean, var), or give out_shape a tuple in the"
                " parameters' order")
  x = _x()[:128]
  r = stats_in_order(x, interpret=True)        # the hint followed
  assert type(r) is _Stats
  np.testing.assert_array_equal(r.mean, 2 * x)
  np.testing.assert_array_equal(r.var, 3 * x)


# ---------------------------------------------------------------- a lambda given to the decorator's call
def test_a_lambda_given_to_the_decorators_call_is_reported_at_once_as_the_direct_form_is():
  """mg.mgpu_kernel(lambda x, out: ..., out_shape=...) said 'a kernel must be a def' at once; the same
  lambda given to the decorator, mg.mgpu_kernel(out_shape=...)(lambda x, out: ...), was accepted and
  failed at the first call with 'decorates a plain def function' at the line's column 0."""
  for make in (lambda: mg.mgpu_kernel(out_shape=lambda x: x)(lambda x, out: None),     # the line
               lambda: mg.mgpu_kernel(lambda x, out: None, out_shape=lambda x: x)):
    with pytest.raises(mg.LaunchConfigError) as info:
      make()
    e = info.value
    assert e.message == ("a kernel must be a def: a lambda's body is one expression, and a kernel writes its"
                         " outputs in statements")
    assert e.hint == "def body(x, out): out[...] = ...  then mg.mgpu_kernel(body, out_shape=...)"
    assert e.filename == __file__ and e.col_offset > 0


# ---------------------------------------------------------------- a Python float through jax.jit with x64, for a 0-d input
@mg.mgpu_kernel(out_shape=lambda x, s: x)
def add_0d(x, s, out):
  out[...] = x[...] + s[...]


def test_a_python_float_through_jit_with_x64_for_a_0d_input_is_float32_as_for_an_ml_scalar():
  """It was MG006 (float64, which kernels do not support): jax.jit makes the Python float a weak float64
  0-d array under jax_enable_x64; an ml.scalar parameter took it as float32 (as the number passed
  eagerly), and a 0-d input read with s[...] is documented as the same thing."""
  x = _x()[:128]
  jax.config.update("jax_enable_x64", True)
  try:
    got = jax.jit(lambda x, s: add_0d(x, s, interpret=True))(x, 0.5)
    vm = jax.jit(jax.vmap(lambda x, s: add_0d(x, s, interpret=True), in_axes=(0, None)))(jnp.stack([x, -x]), 0.25)
    text = jax.export.export(jax.jit(add_0d), platforms=["cuda"])(
        S((128,), F32), S((), jnp.float64, weak_type=True)).mlir_module()
  finally:
    jax.config.update("jax_enable_x64", False)
  assert got.dtype == F32
  np.testing.assert_array_equal(got, x + 0.5)
  np.testing.assert_array_equal(vm, jnp.stack([x, -x]) + 0.25)
  assert "mosaic_gpu" in text


# ---------------------------------------------------------------- a grid computed with jnp from shapes
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (jnp.ceil(x.shape[0] / 128).astype(jnp.int32),),
                block=lambda x: jnp.int32(128))
def jnp_grid(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * 2


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (n,))
def grid_of_0d_input(x, n, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_a_grid_computed_with_jnp_from_shapes_is_a_count_known_when_compiling():
  """It was MG007 'a value known only at run time', eagerly and under jax.jit: jnp.ceil(n / 128) of a
  shape is a 0-d jax array (a tracer under jax.jit), though no input's value enters it."""
  x = _x()
  np.testing.assert_array_equal(jnp_grid(x, interpret=True), x * 2)
  np.testing.assert_array_equal(jax.jit(lambda x: jnp_grid(x, interpret=True))(x), x * 2)
  assert "mosaic_gpu" in jax.export.export(jax.jit(jnp_grid), platforms=["cuda"])(S((256,), F32)).mlir_module()
  # one computed from an input's value stays a run-time value, under jax.jit as eagerly
  for call in (lambda: grid_of_0d_input(x, jnp.int32(2), interpret=True),
               lambda: jax.jit(lambda x, n: grid_of_0d_input(x, n, interpret=True))(x, jnp.int32(2))):
    with pytest.raises(mg.LaunchConfigError) as info:
      call()
    assert info.value.message == ("grid must be 1 to 3 positive ints, got (a run-time int32 value,): a value known"
                                  " only at run time (an ml.scalar or an array's element)")


# ---------------------------------------------------------------- a launch callable reading its inputs' values
@mg.mgpu_kernel(out_shape=lambda x, n: S((int(n[0]),), x.dtype))
def out_of_values(x, n, out):
  out[...] = x.at[ml.ds(0, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x, *, size: S((size,), x.dtype))
def out_of_constexpr(x, out, *, size: ml.constexpr):
  out[...] = x.at[ml.ds(0, size)][...]


@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=lambda x, n: (int(n[0]) // 128,))
def grid_of_values(x, n, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def test_a_launch_callable_reading_its_inputs_values_says_so_in_the_kernels_words():
  """The message was JAX's ConcretizationTypeError (or TracerArrayConversionError), a page of text
  about tracers, and the hint only said the callable is called with the inputs."""
  e = expect(out_of_values, [S((256,), F32), S((1,), jnp.int32)], mg.SignatureError, "out_shape=",
             "the out_shape callable reads the values of its inputs (float32[256], int32[1]), which are not"
             " known here: under jax.jit, jax.vmap and jax.eval_shape, and in kernel.check and kernel.typed_ir, it gets"
             " abstract arrays (shapes and dtypes only)")
  assert "n: ml.constexpr" in e.hint and "slice the result" in e.hint
  x, n = _x(), jnp.array([128], jnp.int32)
  with pytest.raises(mg.SignatureError) as info:
    jax.jit(lambda x, n: out_of_values(x, n, interpret=True))(x, n)
  assert info.value.message == e.message
  np.testing.assert_array_equal(out_of_values(x, n, interpret=True), x[:128])       # eagerly it has values
  got = jax.jit(lambda x: out_of_constexpr(x, size=128, interpret=True))(x)           # the hint, followed
  np.testing.assert_array_equal(got, x[:128])
  e = expect(grid_of_values, [S((256,), F32), S((1,), jnp.int32)], mg.SignatureError, "grid=",
             "the grid callable reads the values of its inputs (float32[256], int32[1]), which are not known"
             " here: under jax.jit, jax.vmap and jax.eval_shape, and in kernel.check and kernel.typed_ir, it gets abstract"
             " arrays (shapes and dtypes only)")
  assert "launch the largest grid" in e.hint


# ---------------------------------------------------------------- ml.inline of a lambda
_relu = ml.inline(lambda v: ml.maximum(v, 0.0))
_ACTS = {"relu": ml.inline(lambda v: ml.maximum(v, 0.0)), "neg": ml.inline(lambda v, s=1.0: -v * s)}
_attr = ml.inline(lambda v: v.at[0])


@mg.mgpu_kernel(out_shape=lambda x: x)
def lambda_helpers(x, out, *, act: ml.constexpr):
  out[...] = _relu(x[...]) * 2 + _ACTS[act](x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def lambda_helper_mistake(x, out):
  out[...] = _attr(x[...])


def test_an_inline_lambda_helper_is_traced_as_its_expression():
  """ml.inline(lambda v: ...) was MG001 '@ml.inline decorates a plain def function' at the line's column
  0, though a lambda is a helper of one expression (several on a line are told apart by their bodies)."""
  x = _x()[:128] - 64
  for act, want in (("relu", jnp.maximum(x, 0) * 3), ("neg", jnp.maximum(x, 0) * 2 - x)):
    np.testing.assert_array_equal(lambda_helpers(x, act=act, interpret=True), want)
  assert "mosaic_gpu" in jax.export.export(jax.jit(lambda x: lambda_helpers(x, act="neg")),
                                           platforms=["cuda"])(S((128,), F32)).mlir_module()
  with pytest.raises(mg.KernelTypeError) as info:      # a mistake in it: at the lambda's own expression
    lambda_helper_mistake.check(S((128,), F32))
  e = info.value
  assert e.message == "a register tensor has no attribute 'at'"
  assert (e.filename, e.lineno, e.loc.source_line[e.col_offset:e.col_offset + 4]) == (__file__, _attr.fn.__code__.co_firstlineno, "v.at")


@pytest.mark.gpu
def test_gpu_the_new_call_paths_match_interpret_mode():
  """No lowering changed in this probe; the calls it opened (a Python float through jax.jit with x64
  for a 0-d input, a grid computed with jnp, lambda helpers, a constexpr default from a factory, an
  instance attribute changed) run on the GPU with interpret mode's numbers."""
  x = _x()
  np.testing.assert_array_equal(np.asarray(jax.jit(jnp_grid)(x)), np.asarray(jnp_grid(x, interpret=True)))
  np.testing.assert_array_equal(np.asarray(jax.jit(lambda x: lambda_helpers(x, act="neg"))(x[:128] - 64)),
                                np.asarray(lambda_helpers(x[:128] - 64, act="neg", interpret=True)))
  k = _scaler_with_default(3.0)
  np.testing.assert_array_equal(np.asarray(jax.jit(k)(x)), np.asarray(x) * 3)
  layer = _Layer(2.0)
  np.testing.assert_array_equal(np.asarray(layer.kernel(x)), np.asarray(x) * 2)
  layer.scale = 5.0
  np.testing.assert_array_equal(np.asarray(layer.kernel(x)), np.asarray(x) * 5)
  jax.config.update("jax_enable_x64", True)
  try:
    got = jax.jit(add_0d)(x[:128], 0.5)
  finally:
    jax.config.update("jax_enable_x64", False)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x[:128]) + 0.5)


# ---------------------------------------------------------------- a NamedTuple or dataclass given as an input
@mg.mgpu_kernel(out_shape=lambda mean, var: mean)
def normalise(mean, var, out):
  out[...] = mean[...] / ml.sqrt(var[...] + 1e-5)


def test_a_pytree_with_fields_given_as_an_input_is_hinted_field_by_field():
  """A NamedTuple was hinted jnp.stack(x) (its fields may differ in shape), a dataclass 'pass a jax or
  numpy array'; the hint now names the fields, and followed it runs."""
  x = _x()[:128]
  for stats in (_Stats(x, x + 1), _DStats(x, x + 1)):
    with pytest.raises(mg.SignatureError) as info:
      normalise(stats, interpret=True)
    assert info.value.hint == ("kernel inputs are arrays, not pytrees: pass its fields as inputs of their own,"
                               " mean.mean, mean.var, with a parameter for each (or unpack it,"
                               " *jax.tree.leaves(mean))")
    np.testing.assert_allclose(normalise(stats.mean, stats.var, interpret=True), x / np.sqrt(x + 1 + 1e-5), rtol=1e-6)
    np.testing.assert_allclose(normalise(*jax.tree.leaves(stats), interpret=True), x / np.sqrt(x + 1 + 1e-5), rtol=1e-6)


# ---------------------------------------------------------------- what an @ml.inline method reads of its instance
class _Scaler:
  def __init__(self, scale):
    self.scale = scale

  @ml.inline
  def step(self, v):
    return self.shifted(v) * self.scale

  @ml.inline
  def shifted(self, v):
    return v + self.shift


_SCALER = _Scaler(2.0)
_SCALER.shift = 1.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def method_helper(x, out):
  out[...] = _SCALER.step(x[...])


def test_an_attribute_an_inline_method_reads_of_its_instance_recompiles_when_changed():
  """It was silently stale: model.step(v) read self.scale, and `model.scale = 5.0` after the first call
  kept the kernel compiled with 2.0 (the method's self is a parameter, not a name the kernel reads)."""
  x = _x()[:128]
  np.testing.assert_array_equal(method_helper(x, interpret=True), (x + 1) * 2)
  _SCALER.scale = 5.0
  np.testing.assert_array_equal(method_helper(x, interpret=True), (x + 1) * 5)
  _SCALER.shift = 3.0           # read by a method the method calls
  np.testing.assert_array_equal(method_helper(x, interpret=True), (x + 3) * 5)
  assert method_helper.cache_info().retraces == 2
