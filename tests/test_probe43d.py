"""Probe 43d: the kernel as a JAX citizen, part three. Constexprs passed by position after the inputs,
as Triton takes them, so that `jax.jit(kernel, static_argnums=...)` works (mgpu_dsl/positional.py)."""
import functools
import inspect

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32 = jnp.float32
HERE = __file__


def line_of(text: str) -> int:
  """The line of this file holding `text` (the one that follows this function's callers)."""
  lines = open(HERE).read().splitlines()
  return next(i + 1 for i, l in enumerate(lines) if text in l and "line_of(" not in l)


@mg.mgpu_kernel(out_shape=lambda x, *, block: x, grid=lambda x, *, block: (x.shape[0] // block,))
def scale(x, out, *, block: ml.constexpr, factor: ml.constexpr = 2.0):
  i = ml.program_id(0)
  out.at[ml.ds(i * block, block)][...] = x.at[ml.ds(i * block, block)][...] * factor


@mg.mgpu_kernel(out_shape=lambda x, *, act: x)
def activate(x, out, *, act: ml.constexpr):
  v = x[...]
  out[...] = ml.where(v > 0, v, 0.0) if act == "relu" else v


X = jnp.arange(256 * 64, dtype=F32).reshape(256, 64) / 100 - 50


def test_static_argnums_passes_a_constexpr_by_position():
  """JAX's ValueError: 'Jitted function has static_argnums=(1,), but only accepts 1 positional arguments'."""
  got = jax.jit(functools.partial(scale, interpret=True), static_argnums=(1, 2))(X, 64, 3.0)
  np.testing.assert_allclose(got, X * 3.0)
  got = jax.jit(functools.partial(activate, interpret=True), static_argnums=1)(X, "relu")
  np.testing.assert_allclose(got, jnp.maximum(X, 0))
  exported = jax.export.export(jax.jit(scale, static_argnums=1), platforms=["cuda"])(X, 64)
  assert "mosaic_gpu" in exported.mlir_module()


def test_a_constexpr_by_position_in_a_call_and_the_signature():
  np.testing.assert_allclose(scale(X, 64, interpret=True), X * 2.0)
  np.testing.assert_allclose(scale(X, 64, factor=0.5, interpret=True), X * 0.5)
  np.testing.assert_allclose(jax.jit(scale, static_argnames=["block", "interpret"])(X, 64, interpret=True), X * 2.0)
  sig = inspect.signature(scale)
  assert [(p.name, p.kind) for p in sig.parameters.values()] == [
      ("x", inspect.Parameter.POSITIONAL_OR_KEYWORD), ("block", inspect.Parameter.POSITIONAL_OR_KEYWORD),
      ("factor", inspect.Parameter.POSITIONAL_OR_KEYWORD), ("interpret", inspect.Parameter.KEYWORD_ONLY)]
  # bound by a partial: keyword-only from there on, as Python's partial makes them
  bound = inspect.signature(functools.partial(scale, block=64))
  assert bound.parameters["factor"].kind == inspect.Parameter.KEYWORD_ONLY
  np.testing.assert_allclose(jax.jit(functools.partial(scale, block=64, interpret=True))(X), X * 2.0)


def test_the_ahead_of_time_steps_take_a_constexpr_by_position():
  """kernel.lower(x, 64) and kernel.eval_shape(x, 64) traced 64: 'constexpr block is a traced value'."""
  spec = jax.ShapeDtypeStruct(X.shape, X.dtype)
  assert scale.eval_shape(spec, 64) == spec
  assert "func.func" in scale.lower(X, 64, interpret=True).as_text()
  assert "kernel @scale grid=(4, 1, 1)" in scale.typed_ir(spec, 64)


def test_a_constexpr_given_twice():
  with pytest.raises(mg.SignatureError) as e:
    scale(X, 64, block=64, interpret=True)   # twice
  assert (e.value.lineno, e.value.col_offset) == (line_of("# twice"), 4)
  assert e.value.message == "scale: constexpr block is given twice, by position (the value after the 1 input) and by keyword"
  assert e.value.hint == "drop one: scale(..., block=...) or the value by position"


def test_more_values_than_positional_constexprs():
  with pytest.raises(mg.SignatureError) as e:
    scale(X, 64, 3.0, 5, interpret=True)   # three
  assert (e.value.lineno, e.value.col_offset) == (line_of("# three"), 4)
  assert e.value.message == ("scale was given 3 values after its 1 input (int 64, float 3.0, int 5), but takes 2"
                             " constexprs by position (block, factor)")
  assert e.value.hint == "scale takes no more constexprs: scale(..., block=64, factor=3.0)"
  with pytest.raises(mg.SignatureError) as e:
    scale(X, 64, 3.0, True)   # interpret
  assert (e.value.lineno, e.value.col_offset) == (line_of("# interpret"), 4)
  assert e.value.hint == "pass interpret by keyword: scale(..., block=64, factor=3.0, interpret=True)"
  np.testing.assert_allclose(scale(X, block=64, factor=3.0, interpret=True), X * 3.0)      # followed


def test_jit_without_static_argnums_says_which_to_name():
  """jax.jit(activate)(x, "relu"): JAX's TypeError about interpreting a str as an abstract array."""
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(activate)(X, "relu")   # not static
  assert (e.value.lineno, e.value.col_offset) == (line_of("# not static"), 4)
  assert "activate's constexpr act='relu', passed by position, is not an array it can trace" in e.value.message
  assert e.value.hint == ("name it static, jax.jit(activate, static_argnums=(1,)), or bind it first:"
                          " jax.jit(functools.partial(activate, act='relu'))")
  # the hint, followed
  np.testing.assert_allclose(jax.jit(functools.partial(activate, interpret=True), static_argnums=(1,))(X, "relu"),
                             jnp.maximum(X, 0))


def test_vmap_of_a_constexpr_by_position():
  """jax.vmap(scale)(xs, 64): JAX's ValueError about mapping 64 (rank 0) along axis 0."""
  xs = X.reshape(4, 64, 64)
  with pytest.raises(mg.SignatureError) as e:
    jax.vmap(scale)(xs, 64)   # mapped
  assert (e.value.lineno, e.value.col_offset) == (line_of("# mapped"), 4)
  assert e.value.hint == ("leave it unmapped, jax.vmap(scale, in_axes=(0, None))(...), or bind it before mapping:"
                          " jax.vmap(functools.partial(scale, block=64))(x)")
  want = (X * 2.0).reshape(4, 64, 64)
  np.testing.assert_allclose(jax.vmap(functools.partial(scale, interpret=True), in_axes=(0, None))(xs, 64), want)
  np.testing.assert_allclose(jax.vmap(functools.partial(scale, block=64, interpret=True))(xs), want)


def test_checkpoint_of_a_kernel_with_a_string_constexpr():
  """jax.checkpoint(activate)(x, act="relu"): JAX's TypeError "Argument 'relu' of type str is not a valid JAX type"."""
  with pytest.raises(mg.SignatureError) as e:
    jax.checkpoint(activate)(X, act="relu")   # keyword
  assert (e.value.lineno, e.value.col_offset) == (line_of("# keyword"), 4)
  assert e.value.message == ("jax.checkpoint traces every argument not named in its static_argnums, and activate's"
                             " constexpr act='relu', passed by keyword, is not an array it can trace")
  assert e.value.hint == "bind it first: jax.checkpoint(functools.partial(activate, act='relu'))"
  with pytest.raises(mg.SignatureError) as e:
    jax.checkpoint(activate)(X, "relu")   # by position
  assert (e.value.lineno, e.value.col_offset) == (line_of("# by position"), 4)
  assert e.value.hint == ("name it static, jax.checkpoint(activate, static_argnums=(1,)), or bind it first:"
                          " jax.checkpoint(functools.partial(activate, act='relu'))")
  # both hints, followed
  relu = functools.partial(activate, interpret=True)
  np.testing.assert_allclose(jax.checkpoint(functools.partial(relu, act="relu"))(X), jnp.maximum(X, 0))
  np.testing.assert_allclose(jax.checkpoint(relu, static_argnums=(1,))(X, "relu"), jnp.maximum(X, 0))


def test_a_numpy_scalar_constexpr_by_position():
  """scale(x, np.int64(64)) said 'scale needs constexpr argument(s) block', as a keyword np.int64 is taken.
  A jax array after the inputs stays one (an input the out_shape callable leaves out gets the count's hint)."""
  np.testing.assert_allclose(scale(X, np.int64(64), interpret=True), X * 2.0)
  with pytest.raises(mg.SignatureError) as e:
    scale(X, jnp.int32(64), interpret=True)   # jnp scalar
  assert (e.value.lineno, e.value.col_offset) == (line_of("# jnp scalar"), 4)
  assert e.value.message == "scale needs constexpr argument(s) block"      # (a jax array: more likely an input)


def test_a_float_block_hint_names_only_what_the_grid_reads():
  """The hint was 'factor=2.0, block=64.0 is a float ...: pass factor=2, block=64', naming the default factor
  the grid callable never reads (and factor=2 would make the kernel's product an int's)."""
  with pytest.raises(mg.LaunchConfigError) as e:
    jax.jit(functools.partial(scale, interpret=True), static_argnums=1)(X, 64.0)
  assert e.value.hint == "block=64.0 is a float, so the counts computed from it are floats: pass block=64 (an int)"
  np.testing.assert_allclose(jax.jit(functools.partial(scale, interpret=True), static_argnums=1)(X, 64), X * 2.0)


@mg.mgpu_kernel(out_shape=lambda *a, n: a[0], grid=(1,))
def add_some(x, y, out, *, n: ml.constexpr):
  out[...] = x[...] + y[...] * n


def test_an_input_count_not_fixed_keeps_constexprs_by_keyword():
  """out_shape takes any number of inputs: a number after x could be the 0-d input y."""
  assert inspect.signature(add_some).parameters["n"].kind == inspect.Parameter.KEYWORD_ONLY
  x = jnp.ones((128,), F32)
  with pytest.raises(mg.SignatureError) as e:
    add_some(x, 3, interpret=True)   # ambiguous
  assert (e.value.lineno, e.value.col_offset) == (line_of("# ambiguous"), 4)
  assert e.value.message.endswith(": the out_shape and grid callables do not fix how many inputs it takes (they take"
                                  " different numbers, or any number), so a value after the inputs could be an input;"
                                  " pass constexprs by keyword")
  assert e.value.hint == "pass it by keyword: add_some(..., n=3)"
  np.testing.assert_allclose(add_some(x, x, n=3, interpret=True), x * 4)


@mg.autotune(configs=[{"block": 64}, {"block": 128}])
@mg.mgpu_kernel(out_shape=lambda x, *, block, factor: x, grid=lambda x, *, block, factor: (x.shape[0] // block,))
def tuned_scale(x, out, *, block: ml.constexpr, factor: ml.constexpr = 2.0):
  i = ml.program_id(0)
  out.at[ml.ds(i * block, block)][...] = x.at[ml.ds(i * block, block)][...] * factor


def test_an_autotuned_kernel_takes_its_untuned_constexprs_by_position():
  """Its signature drops the tuned block, so 3.0 is factor; it was bound to block, 'given twice'."""
  assert list(inspect.signature(tuned_scale).parameters) == ["x", "factor", "interpret"]
  np.testing.assert_allclose(tuned_scale(X, 3.0, interpret=True), X * 3.0)
  np.testing.assert_allclose(jax.jit(functools.partial(tuned_scale, interpret=True), static_argnums=1)(X, 3.0), X * 3.0)
  assert "rhs=3.0" in tuned_scale.typed_ir(jax.ShapeDtypeStruct(X.shape, X.dtype), 3.0)


@mg.mgpu_kernel(out_shape=lambda x, y, *, block: x, grid=lambda x, *, block: (x.shape[0] // block,))
def add_rows(x, y, out, *, block: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * block, block)][...] = x.at[ml.ds(i * block, block)][...] + y.at[ml.ds(i * block, block)][...]


def test_a_grid_callable_of_fewer_inputs_hints_every_input():
  """The hint was "grid is called with the kernel's inputs (and the constexprs it names)": no fix shown."""
  with pytest.raises(mg.SignatureError) as e:
    add_rows(X, X, block=64, interpret=True)
  decorator = line_of("def add_rows(") - 1
  assert (e.value.lineno, e.value.col_offset) == (decorator, open(HERE).read().splitlines()[decorator - 1].index("grid="))
  assert e.value.hint == ("grid is called with every input of the kernel (x, y): give it a parameter for each, also"
                          " those it does not use: grid=lambda x, y, *, block: ...")
  fixed = mg.mgpu_kernel(add_rows.fn, out_shape=lambda x, y, *, block: x,
                         grid=lambda x, y, *, block: (x.shape[0] // block,))          # the hint, followed
  np.testing.assert_allclose(fixed(X, X, 64, interpret=True), X * 2)


@pytest.mark.gpu
def test_static_argnums_on_the_gpu():
  np.testing.assert_allclose(jax.jit(scale, static_argnums=(1, 2))(X, 64, 3.0), X * 3.0)
  np.testing.assert_allclose(jax.jit(activate, static_argnums=1)(X, "relu"), jnp.maximum(X, 0))
  np.testing.assert_allclose(jax.jit(tuned_scale, static_argnums=1)(X, 3.0), X * 3.0)


def test_help_shows_the_kernels_signature_and_docstring():
  """help(kernel) showed 'scale = <mgpu_kernel scale>' (or the KernelFunction class), no signature."""
  import pydoc

  @mg.mgpu_kernel(out_shape=lambda x: x)
  def copy_doc(x, out):
    """Copies x."""
    out[...] = x[...]

  text = pydoc.render_doc(scale, renderer=pydoc.plaintext)
  assert "scale(x: 'jax.Array', block: ml.constexpr, factor: ml.constexpr = 2.0, *, interpret" in text
  text = pydoc.render_doc(copy_doc, renderer=pydoc.plaintext)
  assert "copy_doc(x: 'jax.Array', *, interpret: 'bool | None' = None)\n    Copies x." in text
  assert "tuned_scale(x: 'jax.Array', factor: ml.constexpr = 2.0, *" in pydoc.render_doc(tuned_scale, renderer=pydoc.plaintext)

  class Layer:                 # as a class attribute it stays the kernel, as before
    k = copy_doc
  assert Layer().k is copy_doc
  np.testing.assert_array_equal(Layer().k(jnp.ones((128,), F32), interpret=True), 1.0)


DEVICE_SCRIPT = """
import jax, jax.numpy as jnp, numpy as np
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from jax.sharding import NamedSharding, PartitionSpec as P

@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,), interpret=True)
def dbl(x, out):
  i = ml.program_id(0)
  out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * 2 + 1

x = jnp.arange(128 * 64, dtype=jnp.float32).reshape(128, 64)
x1 = jax.device_put(x, jax.devices()[1])
y = dbl(x1)
assert y.devices() == {jax.devices()[1]}, y.devices()      # where jnp's x1 * 2 + 1 would be
np.testing.assert_allclose(y + x1, x * 3 + 1)
mesh = jax.make_mesh((2,), ("d",))
xs = jax.device_put(x, NamedSharding(mesh, P("d")))
np.testing.assert_allclose(jax.jit(jax.shard_map(dbl, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(xs), x * 2 + 1)

# shard_map (check_vma on): the kernel's outputs vary over the axes its inputs vary over, as jnp's do, so an
# out_specs=P() for a per-device result is JAX's error, not device 0's block returned as the whole
@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1, x.shape[1]), x.dtype), interpret=True)
def colsum(x, out):
  out[...] = ml.sum(x[...], axis=0)[None, :]

def body(a):
  s = colsum(a)
  assert jax.typeof(s) == jax.typeof(a.sum(0)[None]), (jax.typeof(s), jax.typeof(a.sum(0)[None]))
  return s
for f in (body, lambda a: a.sum(0)[None]):
  try:
    jax.jit(jax.shard_map(f, mesh=mesh, in_specs=P("d"), out_specs=P()))(xs)
    raise AssertionError("out_specs=P() of a per-device result was accepted")
  except ValueError as e:
    assert "out_specs" in str(e), e
got = jax.jit(jax.shard_map(lambda a: jax.lax.psum(colsum(a), "d"), mesh=mesh, in_specs=P("d"), out_specs=P()))(xs)
np.testing.assert_allclose(got, x.sum(0)[None], rtol=1e-6)
got = jax.jit(jax.shard_map(colsum, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(xs)
np.testing.assert_allclose(got, x.reshape(2, 64, 64).sum(1), rtol=1e-6)
gpu = mg.mgpu_kernel(colsum.fn, out_shape=lambda x: jax.ShapeDtypeStruct((1, x.shape[1]), x.dtype))
exported = jax.export.export(jax.jit(jax.shard_map(lambda a: jax.lax.psum(gpu(a), "d"), mesh=mesh, in_specs=P("d"),
                                                   out_specs=P())), platforms=["cuda"])(xs)
assert "mosaic_gpu" in exported.mlir_module() and exported.nr_devices == 2
print("ok")
"""


def test_an_eager_interpreted_call_returns_on_its_inputs_device(tmp_path):
  """A call on arrays committed to device 1 returned its outputs on device 0 (jnp keeps the device); inside
  jax.shard_map the outputs were typed invariant, so out_specs=P() took device 0's block silently."""
  import os
  import subprocess
  import sys
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
  script = tmp_path / "devices.py"          # (a kernel's source is read from its file)
  script.write_text(DEVICE_SCRIPT)
  r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


@pytest.mark.gpu
def test_a_kernel_inside_shard_map_on_the_gpu():
  """The outputs' varying axes (wrap.varying_like) on the Mosaic GPU path, on the GPUs there are."""
  from jax.sharding import NamedSharding, PartitionSpec as P

  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((1, x.shape[1]), x.dtype))
  def colsum(x, out):
    out[...] = ml.sum(x[...], axis=0)[None, :]

  n = len(jax.devices())
  mesh = jax.make_mesh((n,), ("d",))
  x = rand.normal(rand.key(0), (64 * n, 128), F32)
  xs = jax.device_put(x, NamedSharding(mesh, P("d")))
  got = jax.jit(jax.shard_map(lambda a: jax.lax.psum(colsum(a), "d"), mesh=mesh, in_specs=P("d"), out_specs=P()))(xs)
  np.testing.assert_allclose(got, x.sum(0)[None], rtol=1e-4, atol=1e-4)
  got = jax.jit(jax.shard_map(colsum, mesh=mesh, in_specs=P("d"), out_specs=P("d")))(xs)
  np.testing.assert_allclose(got, x.reshape(n, 64, 128).sum(1), rtol=1e-4, atol=1e-4)
