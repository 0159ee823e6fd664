"""Probe 44c: the kernel as a JAX citizen, part four: jax.jit's static_argnums and static_argnames checked against
the kernel's signature (mgpu_dsl/signature.py), a value bound by position to a constexpr of another kind
(positional.py), races in source order (frontend/checks.py), interpret mode under jax.jit over several
devices (wrap.py)."""
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32 = jnp.float32
S = jax.ShapeDtypeStruct
HERE = __file__
X = np.arange(256, dtype=np.float32).reshape(4, 64) / 10 - 12


def line_of(text: str) -> int:
  """The line of this file holding `text`."""
  lines = open(HERE).read().splitlines()
  return next(i + 1 for i, l in enumerate(lines) if text in l and "line_of(" not in l)


def col_of(text: str, sub: str) -> int:
  return open(HERE).read().splitlines()[line_of(text) - 1].index(sub)


@mg.mgpu_kernel(out_shape=lambda x: (S((64,), x.dtype), S((64,), x.dtype)), grid=(2,))
def two_outputs(x, a, b):
  b[...] = x[...] * 2          # b, first in source
  a[...] = x[...] + 1          # a, second


def test_races_come_in_source_order():
  """The race on a (output 0, line 2 of the body) was reported before the one on b (output 1, line 1)."""
  with pytest.raises(mg.RaceError) as e:
    two_outputs.check(S((64,), F32))
  assert (e.value.lineno, e.value.col_offset) == (line_of("# b, first in source"), 2)
  assert e.value.message.startswith("program (0, 0, 0) and program (1, 0, 0) both write b[0]")
  assert [(x.lineno, type(x)) for x in e.value.errors] == [(line_of("# b, first in source"), mg.RaceError),
                                                            (line_of("# a, second"), mg.RaceError)]



@mg.mgpu_kernel(out_shape=lambda x: (S((64,), x.dtype), S((64,), x.dtype)), grid=(1,))
def half_written(x, a, b):
  b.at[ml.ds(0, 32)][...] = x.at[ml.ds(0, 32)][...] * 2      # b half
  a.at[ml.ds(0, 32)][...] = x.at[ml.ds(0, 32)][...] + 1      # a half


def test_uncovered_outputs_come_in_source_order():
  """The same for outputs left partly unwritten (MG602): a's came first."""
  with pytest.raises(mg.UncoveredOutputError) as e:
    half_written.check(S((64,), F32))
  assert [(type(x), x.lineno, x.col_offset) for x in e.value.errors] == [
      (mg.UncoveredOutputError, line_of("# b half"), 2), (mg.UncoveredOutputError, line_of("# a half"), 2)]
  assert e.value.message.startswith("b[32:64] is never written")


@mg.mgpu_kernel(out_shape=lambda x, dt: S(x.shape, dt))
def cast_scaled(x, out, *, dt: ml.constexpr = F32, k: ml.constexpr = 2.0):
  out[...] = (x[...] * k).astype(dt)


@mg.mgpu_kernel(out_shape=lambda x: x)
def act_scaled(x, out, *, k: ml.constexpr = 2.0, act: ml.constexpr = "relu"):
  v = x[...] * k
  out[...] = ml.where(v > 0, v, 0.0) if act == "relu" else v


def test_a_value_by_position_of_another_kind_than_its_constexpr():
  """cast_scaled(x, 3.0): 3.0 bound dt, and the error was the out_shape callable's "Cannot interpret '3.0' as a
  data type" at the decorator (or, where out_shape does not read dt, .astype's "needs a dtype, got 3.0")."""
  with pytest.raises(mg.SignatureError) as e:
    cast_scaled(X, 3.0, interpret=True)   # 3.0 to dt
  assert (e.value.lineno, e.value.col_offset) == (line_of("# 3.0 to dt"), 4)
  assert e.value.message == ("cast_scaled: 3.0, a value after the input, was taken as constexpr dt by position"
                             " (constexprs bind by position in the def's order: dt, k), and dt takes a dtype (its"
                             " default is jnp.float32)")
  assert e.value.hint == "pass it by keyword: cast_scaled(x, k=3.0)"
  np.testing.assert_allclose(cast_scaled(X, k=3.0, interpret=True), X * 3.0)           # the hint, followed
  with pytest.raises(mg.SignatureError) as e:
    cast_scaled(X, 3.0, jnp.bfloat16, interpret=True)   # swapped
  assert (e.value.lineno, e.value.col_offset) == (line_of("# swapped"), 4)
  assert e.value.hint == "pass them by keyword: cast_scaled(x, k=3.0, dt=jnp.bfloat16)"
  got = cast_scaled(X, jnp.bfloat16, 3.0, interpret=True)       # in the def's order: fine
  assert got.dtype == jnp.bfloat16
  np.testing.assert_allclose(np.asarray(got, np.float32), (X * 3.0).astype(jnp.bfloat16).astype(np.float32))
  with pytest.raises(mg.SignatureError) as e:
    act_scaled(X, "none", interpret=True)   # a string to k
  assert (e.value.lineno, e.value.col_offset) == (line_of("# a string to k"), 4)
  assert "'none', a value after the input, was taken as constexpr k by position" in e.value.message
  assert e.value.message.endswith("and k takes a number (its default is 2.0)")
  assert e.value.hint == "pass it by keyword: act_scaled(x, act='none')"
  np.testing.assert_allclose(act_scaled(X, act="none", interpret=True), X * 2.0)
  # through jax.jit's static_argnums: at the user's call too
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(functools.partial(cast_scaled, interpret=True), static_argnums=1)(X, 3.0)   # jitted
  assert (e.value.lineno, e.value.hint) == (line_of("# jitted"), "pass it by keyword: cast_scaled(x, k=3.0)")


@mg.mgpu_kernel(out_shape=lambda x, dt, n: S((n,), dt))
def head(x, out, *, dt: ml.constexpr, n: ml.constexpr):
  out[...] = x.at[ml.ds(0, n)][...].astype(dt)


def test_constexprs_by_position_that_a_callable_fails_on():
  """head(x, 128, jnp.float32) (no defaults to compare): the out_shape callable's "Cannot interpret '128' as a
  data type" at the decorator, hint "out_shape is called with the kernel's inputs (and the constexprs it names)"."""
  x = X.reshape(-1)
  with pytest.raises(mg.SignatureError) as e:
    head(x, 128, jnp.float32, interpret=True)   # dt, n swapped
  assert (e.value.lineno, e.value.col_offset) == (line_of("# dt, n swapped"), 4)
  assert e.value.message == ("head: the values after the input were taken by position as dt=128, n=jnp.float32"
                             " (constexprs bind by position in the def's order: dt, n), and the out_shape callable"
                             " failed with them: TypeError: Cannot interpret '128' as a data type")
  assert e.value.notes[0].endswith(f":{line_of('def head(') - 1}:16: the out_shape callable")
  assert e.value.hint == "check the order, or pass them by keyword: head(x, dt=..., n=...)"
  np.testing.assert_array_equal(head(x, jnp.float32, 128, interpret=True), x[:128])     # in the def's order


@mg.mgpu_kernel(out_shape=lambda *a, n: a[0], grid=(1,))
def add_some(x, y, out, *, n: ml.constexpr):
  out[...] = x[...] + y[...] * n


@mg.mgpu_kernel(out_shape=lambda x, *, block: x, grid=lambda x, *, block: (x.shape[0] // block,))
def scale_rows(x, out, *, block: ml.constexpr, factor: ml.constexpr = 2.0):
  i = ml.program_id(0)
  out.at[ml.ds(i * block, block)][...] = x.at[ml.ds(i * block, block)][...] * factor


@mg.autotune(configs=[{"block": 1}, {"block": 2}])
@mg.mgpu_kernel(out_shape=lambda x, *, block, factor: x, grid=lambda x, *, block, factor: (x.shape[0] // block,))
def tuned_rows(x, out, *, block: ml.constexpr, factor: ml.constexpr = 2.0):
  i = ml.program_id(0)
  out.at[ml.ds(i * block, block)][...] = x.at[ml.ds(i * block, block)][...] * factor


def test_static_argnums_past_a_kernels_positional_arguments():
  """jax.jit(add_some, static_argnums=2): JAX's ValueError "Jitted function has static_argnums=(2,), but only
  accepts 2 positional arguments", raised inside jax.jit, with no word on why or what to write."""
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(add_some, static_argnums=2)   # count not fixed
  assert (e.value.lineno, e.value.col_offset) == (line_of("# count not fixed"), 4)
  assert e.value.message == (
      "jax.jit(add_some, static_argnums=2): add_some takes 2 arguments by position (x, y), so argument 2 is past"
      " them; its constexpr n is passed by keyword: the out_shape and grid callables do not fix how many inputs"
      " it takes (they take different numbers, or any number), so a value after the inputs could be an input")
  assert e.value.hint == ("name it in static_argnames and pass it by keyword:"
                          " jax.jit(add_some, static_argnames=['n'])(x, y, n=...)")
  x = X[0]
  np.testing.assert_allclose(jax.jit(functools.partial(add_some, interpret=True), static_argnames=["n"])(x, x, n=3),
                             x * 4)                      # the hint, followed
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(add_some)(x, x, 3)   # traced 3
  assert (e.value.lineno, e.value.col_offset) == (line_of("# traced 3"), 4)
  assert e.value.message == ("add_some needs constexpr argument(s) n, and was given a traced Python number after"
                             " its inputs: jax.jit traces every argument that static_argnums or static_argnames"
                             " does not name")
  assert e.value.hint.startswith("pass it by keyword and name it static: jax.jit(add_some, static_argnames=['n'])"
                                 "(..., n=...)")
  with pytest.raises(mg.SignatureError) as e:
    jax.make_jaxpr(add_some, static_argnums=(2,))(x, x, 3)   # make_jaxpr
  assert (e.value.lineno, e.value.col_offset) == (line_of("# make_jaxpr"), 4)
  assert e.value.message.startswith("jax.make_jaxpr(add_some, static_argnums=2): add_some takes 2 arguments")
  assert e.value.hint == "bind the constexprs first: jax.make_jaxpr(functools.partial(add_some, n=...))"
  with pytest.raises(mg.SignatureError) as e:
    jax.checkpoint(add_some, static_argnums=(2,))(x, x, 3)   # checkpoint
  assert (e.value.lineno, e.value.col_offset) == (line_of("# checkpoint"), 4)
  assert e.value.hint == ("pass it by keyword: add_some(..., n=3); under a JAX transformation, which traces keyword"
                          " arguments, bind it first: functools.partial(add_some, n=3)")
  np.testing.assert_allclose(jax.checkpoint(functools.partial(add_some, n=3, interpret=True))(x, x), x * 4)
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(functools.partial(scale_rows, block=2), static_argnums=(1,))   # partial
  assert (e.value.lineno, e.value.col_offset) == (line_of("# partial"), 4)
  assert e.value.message.endswith("scale_rows takes 1 argument by position (x), so argument 1 is past them; its"
                                  " constexprs block, factor are passed by keyword: functools.partial binds block,"
                                  " which makes it and the parameters after it keyword-only, as Python's partial does")
  assert e.value.hint == ("name it in static_argnames and pass it by keyword: jax.jit(functools.partial(scale_rows,"
                          " block=2), static_argnames=['factor'])(x, factor=...)")
  got = jax.jit(functools.partial(scale_rows, block=2, interpret=True), static_argnames=["factor"])(X, factor=3.0)
  np.testing.assert_allclose(got, X * 3.0)
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnums=3)   # fixed count
  assert e.value.hint == ("static_argnums counts scale_rows's arguments by position from 0 (0: x, 1: block,"
                          " 2: factor), or name them: static_argnames=[...]")


def test_static_argnums_naming_an_input():
  """jax.jit(add_some, static_argnums=1)(x, y, ...): JAX's ValueError "Non-hashable static arguments are not
  supported", at the call, with the whole array printed."""
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnums=0)   # off by one
  assert (e.value.lineno, e.value.col_offset) == (line_of("# off by one"), 4)
  assert e.value.message == ("jax.jit(scale_rows, static_argnums=0): x is an input of scale_rows, an array, which"
                             " jax.jit cannot hold static (it hashes a static argument at every call, and arrays are"
                             " not hashable)")
  assert e.value.hint == ("static_argnums names the constexprs: block is argument 1, factor is argument 2"
                          " (static_argnums=(1, 2))")
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(add_some, static_argnames=("y",))   # by name
  assert (e.value.lineno, e.value.col_offset) == (line_of("# by name"), 4)
  assert e.value.hint == "name the constexprs static: static_argnames=['n']"


def test_donate_argnums_naming_a_constexpr():
  """jax.jit(scale_rows, static_argnums=1, donate_argnums=1): JAX's "static_argnames and donate_argnames cannot
  intersect"; donated and not static, "constexpr factor is a traced value" with the hint to make it static."""
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnums=1, donate_argnums=1)   # donate block
  assert (e.value.lineno, e.value.col_offset) == (line_of("# donate block"), 4)
  assert e.value.message == ("jax.jit(scale_rows, donate_argnums=1): block is a constexpr of scale_rows, a Python"
                             " value known when it compiles: only inputs, arrays, can be donated")
  assert e.value.hint == ("donate inputs and make constexprs static: jax.jit(scale_rows, donate_argnums=(0,),"
                          " static_argnames=['block'])")
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnames="block", donate_argnames="factor")
  assert e.value.message.startswith("jax.jit(scale_rows, donate_argnames='factor'): factor is a constexpr")
  got = jax.jit(functools.partial(scale_rows, interpret=True), donate_argnums=(0,),
                static_argnames=["block"])(jnp.asarray(X), block=2)               # the hint, followed
  np.testing.assert_allclose(got, X * 2.0)


def test_static_argnames_a_kernel_does_not_take():
  """JAX's ValueError "Jitted function has invalid argnames {'blok'} in static_argnames. Function does not take
  these args." for a typo, an output, an autotuned constexpr."""
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnames="blok")   # typo
  assert (e.value.lineno, e.value.col_offset) == (line_of("# typo"), 4)
  assert e.value.message == "jax.jit(scale_rows, static_argnames='blok'): scale_rows has no parameter blok"
  assert e.value.hint == "did you mean 'block'?"
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(scale_rows, static_argnames=["block", "out"])
  assert e.value.message.endswith("scale_rows has no parameter out to pass: it is an output (out_shape describes"
                                  " it, and the kernel returns it)")
  with pytest.raises(mg.SignatureError) as e:
    jax.jit(tuned_rows, static_argnames=["block"])   # tuned
  assert (e.value.lineno, e.value.col_offset) == (line_of("# tuned"), 4)
  assert e.value.message.endswith("tuned_rows has no parameter block to pass: mg.autotune picks its value, from"
                                  " the configs")
  assert e.value.hint == "tuned_rows takes x, factor, interpret: name those"


SHARDED_SCRIPT = """
import jax, numpy as np
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from jax.sharding import NamedSharding, PartitionSpec as P, AxisType

@mg.mgpu_kernel(out_shape=lambda x: (x, jax.ShapeDtypeStruct((1, x.shape[1]), x.dtype)),
                grid=lambda x: (x.shape[0] // 8,), interpret=True)
def twice_and_sum(x, out, colsum):
  i = ml.program_id(0)
  out.at[ml.ds(i * 8, 8)][...] = x.at[ml.ds(i * 8, 8)][...] * 2 + 1
  if i == 0:
    colsum[...] = ml.sum(x[...], axis=0)[None, :]

x = np.arange(16 * 64, dtype=np.float32).reshape(16, 64) / 64
mesh = jax.make_mesh((2,), ("d",), axis_types=(AxisType.Auto,))
xs = jax.device_put(x, NamedSharding(mesh, P("d")))
y, s = jax.jit(twice_and_sum)(xs)
assert y.sharding.is_fully_replicated, y.sharding
np.testing.assert_allclose(y + 1, x * 2 + 2)          # an array JAX can compute with
np.testing.assert_allclose(s * 1, x.sum(0)[None], rtol=1e-6)
mesh = jax.make_mesh((2,), ("d",), axis_types=(AxisType.Explicit,))
ys = jax.jit(jax.vmap(twice_and_sum))(jax.device_put(np.stack([x, -x]), NamedSharding(mesh, P("d"))))[0]
np.testing.assert_allclose(ys + 1, np.stack([x * 2 + 2, -x * 2 + 2]))          # (through jax.vmap too)

# a shard_map leaving an axis automatic: JAX's NotImplementedError "callbacks are only supported in spmd
# computations when all mesh axes are partitioned manually"
mesh = jax.make_mesh((2, 1), ("a", "b"))
xs = jax.device_put(x, NamedSharding(mesh, P("a")))
try:
  jax.jit(jax.shard_map(twice_and_sum, mesh=mesh, in_specs=P("a"), out_specs=P("a"), axis_names={"a"}))(xs)
  raise AssertionError("accepted")
except mg.SignatureError as e:
  assert e.message == ("twice_and_sum runs in interpret mode, a host callback, inside a jax.shard_map that leaves"
                       " mesh axis 'b' automatic: JAX runs a callback there only where every mesh axis is manual"), e
  assert e.hint.startswith("name every mesh axis in the shard_map, axis_names={'a', 'b'} (or leave"), e.hint
y = jax.jit(jax.shard_map(twice_and_sum, mesh=mesh, in_specs=P("a"), out_specs=P("a")))(xs)[0]    # followed
np.testing.assert_allclose(y, x * 2 + 1)
print("ok")
"""


def test_interpret_mode_under_jit_of_a_sharded_input(tmp_path):
  """jax.jit(kernel)(x sharded over 2 devices) in interpret mode returned an array whose sharding was the
  callback's {maximal device=0}: `y + 1` was JAX's TypeError "Cannot convert GSPMDSharding {maximal device=0}
  into SdyArray". The outputs are now replicated (wrap._replicated). Inside a jax.shard_map leaving a mesh axis
  automatic, JAX cannot lower the callback: a SignatureError saying so (wrap._automatic_axes)."""
  import os
  import subprocess
  import sys
  env = dict(os.environ, XLA_FLAGS="--xla_force_host_platform_device_count=2", JAX_PLATFORMS="cpu")
  script = tmp_path / "sharded.py"          # (a kernel's source is read from its file)
  script.write_text(SHARDED_SCRIPT)
  r = subprocess.run([sys.executable, str(script)], env=env, capture_output=True, text=True, timeout=300)
  assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stderr[-2000:]


@pytest.mark.gpu
def test_a_sharded_input_under_jit_on_the_gpus():
  """The compiled kernel (and interpret mode there) under jax.jit of an input sharded over the GPUs there are."""
  from jax.sharding import NamedSharding, PartitionSpec as P

  @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
  def twice(x, out):
    i = ml.program_id(0)
    out.at[ml.ds(i * 64, 64)][...] = x.at[ml.ds(i * 64, 64)][...] * 2 + 1

  n = len(jax.devices())
  mesh = jax.make_mesh((n,), ("d",))
  x = np.arange(64 * n * 128, dtype=np.float32).reshape(64 * n, 128) / 128
  xs = jax.device_put(x, NamedSharding(mesh, P("d")))
  for interpret in (False, True):
    y = jax.jit(functools.partial(twice, interpret=interpret))(xs)
    np.testing.assert_allclose(y + 1, x * 2 + 2)


@mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
def doubled(x, out):
  out[...] = x[...] * 2


@mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
def scanned_from_the_end(x, out):      # (a loop carry: a reverse scan computes since probe 46h, a roll since 46j,
  v = x[...]                           # a loop carry since 47a)
  for _ in range(ml.program_id(0)):
    v = v * 2
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
def added_atomically(x, out):          # (an atomic add of an odd read computes padded since probe 61b)
  ml.atomic_add(out, x[...] * 2)


@mg.mgpu_kernel(out_shape=lambda x: x, interpret=True)
def half_stored(x, out):               # a mistake: a window of 2 elements stored a value of 4
  out.at[ml.ds(0, 2)][...] = x[...]


def test_a_mistake_under_vmap_notes_each_elements_shapes():
  """jax.vmap(doubled, in_axes=1)(x of (4, 64)): the note said "the call (x: float32[4])" at a line passing a
  float32[4, 64]: the shapes are each element's. (Since probe 45g each (4,) element is read padded and doubled;
  since probe 47a carried through a run-time loop too; since probe 61b added atomically too. The mistake is now a
  window of 2 stored a value of 4.)"""
  x = X
  np.testing.assert_allclose(jax.vmap(doubled, in_axes=1, out_axes=1)(x), x * 2)
  np.testing.assert_allclose(jax.vmap(scanned_from_the_end, in_axes=1, out_axes=1)(x), x)
  np.testing.assert_allclose(jax.vmap(added_atomically, in_axes=1, out_axes=1)(x), x * 2)
  with pytest.raises(mg.KernelError) as e:
    jax.vmap(half_stored, in_axes=1, out_axes=1)(x)   # mapped along 1
  note = f"{HERE}:{line_of('# mapped along 1')}:4: the call under jax.vmap, for each element (x: float32[4])"
  assert note in e.value.notes
  np.testing.assert_allclose(jax.vmap(doubled, in_axes=1, out_axes=1)(np.tile(x, (2, 1))), np.tile(x, (2, 1)) * 2)


@pytest.mark.gpu
def test_the_hints_followed_on_the_gpu():
  """The calls the new hints write, compiled for the GPU."""
  x = X[0]
  np.testing.assert_allclose(jax.jit(add_some, static_argnames=["n"])(x, x, n=3), x * 4)
  np.testing.assert_allclose(jax.jit(functools.partial(scale_rows, block=2), static_argnames=["factor"])(X, factor=3.0),
                             X * 3.0)
  np.testing.assert_allclose(cast_scaled(X, k=3.0), X * 3.0)
  np.testing.assert_array_equal(head(X.reshape(-1), jnp.float32, 128), X.reshape(-1)[:128])
  np.testing.assert_allclose(jax.vmap(doubled, in_axes=1, out_axes=1)(np.tile(X, (2, 1))), np.tile(X, (2, 1)) * 2)
