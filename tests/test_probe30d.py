"""Probe 30d (the first hour of a Triton user, mistakes first): Triton kernels ported from memory
with Triton's spellings (@triton.jit, triton.Config, grid=lambda meta: ..., tl.load of offsets,
pointer increments, dim=, eviction_policy=...), each expected to be a located KernelError naming
the mgpu_dsl way."""
import inspect

import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _line_of(fn, text):
  lines, first = inspect.getsourcelines(fn)
  return next(first + n for n, line in enumerate(lines) if text in line)


# ---------------------------------------------------------------- triton.* names on mg and ml
def test_triton_top_level_names_on_mg_and_ml_are_located_errors():
  """`@mg.jit`, `mg.Config(...)`, `mg.cdiv` were a raw AttributeError (module 'mgpu_dsl' has no
  attribute 'jit'): the first line a Triton user writes."""
  def use_jit():
    return mg.jit
  with pytest.raises(mg.UnknownNameError) as info:
    use_jit()
  e = info.value
  assert e.code == "MG002" and e.message == "mg has no attribute 'jit'"
  assert (e.filename, e.lineno) == (__file__, _line_of(use_jit, "return mg.jit"))
  assert e.hint.startswith("decorate the kernel with @mg.mgpu_kernel(out_shape=..., grid=...)")
  with pytest.raises(mg.UnknownNameError) as info:
    mg.Config({"BLOCK": 128}, num_warps=4)
  assert info.value.hint.startswith("a configuration is a dict of constexprs: @mg.autotune(configs=[dict(")
  with pytest.raises(mg.UnknownNameError) as info:
    ml.jit
  assert info.value.message == "ml has no attribute 'jit'"
  with pytest.raises(mg.UnknownNameError) as info:
    mg.cdiv(10, 3)
  assert info.value.hint == "it is ml.cdiv, in the kernel language: from mgpu_dsl import language as ml"
  # still AttributeErrors: hasattr and getattr with a default keep their meaning
  assert not hasattr(mg, "jit") and getattr(mg, "Config", None) is None
  with pytest.raises(AttributeError) as info:
    mg.no_such_name
  assert not isinstance(info.value, mg.KernelError)


@mg.mgpu_kernel(out_shape=lambda x: x)
def mg_program_id(x, out):
  i = mg.program_id(0)
  out[...] = x[...]


def test_an_ml_name_looked_up_on_mg_in_a_kernel_names_ml():
  """It was 'check the spelling'."""
  expect(mg_program_id, [S((128,), F32)], mg.UnknownNameError, "mg.program_id",
         "mg has no attribute 'program_id'",
         hint="it is ml.program_id, in the kernel language: from mgpu_dsl import language as ml")


# ---------------------------------------------------------------- grid=lambda meta: ...
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda meta: (ml.cdiv(4096, meta["BLOCK"]),))
def meta_grid(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, META: (triton.cdiv(x.shape[0], META["BLOCK"]),))  # noqa: F821
def meta_grid2(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (triton.cdiv(x.shape[0], 1024),))  # noqa: F821
def triton_cdiv_grid(x, out):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * 1024, 1024)][...] = x.at[ml.ds(pid * 1024, 1024)][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (ml.cdiv(x.shape[0], BLOCK),))
def named_grid(x, out, BLOCK: ml.constexpr = 1024):
  pid = ml.program_id(0)
  out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]


def test_tritons_meta_grid_callable_is_rewritten_in_the_hint():
  """Its hint was "grid is called with the kernel's inputs (and the constexprs it names)", after
  "TypeError: JAX does not support string indexing"."""
  with pytest.raises(mg.SignatureError) as info:
    meta_grid.check(S((4096,), F32))
  hint = info.value.hint
  assert hint == ("Triton's grid callable takes a dict of the constexprs (meta); here a grid callable takes the"
                  " kernel's inputs, and each constexpr it needs as a parameter of that name: grid=lambda x, BLOCK:"
                  " (ml.cdiv(4096, BLOCK),)")
  with pytest.raises(mg.SignatureError) as info:
    meta_grid2.check(S((4096,), F32))
  assert info.value.hint.endswith("grid=lambda x, BLOCK: (ml.cdiv(x.shape[0], BLOCK),)")
  with pytest.raises(mg.SignatureError) as info:
    triton_cdiv_grid.check(S((4096,), F32))
  assert info.value.hint.startswith("triton.cdiv is ml.cdiv here")
  named_grid.check(S((4096,), F32))           # the hint, followed


def test_triton_launch_of_a_lambda_grid_shows_its_source():
  """The hint showed `grid=<function <lambda> at 0x7f...>`."""
  with pytest.raises(mg.SignatureError) as info:
    named_grid[lambda meta: (ml.cdiv(4096, meta["BLOCK"]),)](jnp.ones((4096,), F32))
  e = info.value
  assert e.message.startswith("named_grid[lambda ...]: an mgpu_dsl kernel takes no grid at the call")
  assert "0x" not in e.hint and "grid=lambda x, BLOCK: (ml.cdiv(4096, BLOCK),))" in e.hint


# ---------------------------------------------------------------- autotune configs
def test_autotune_config_of_launch_options_is_reported_at_the_decorator():
  """A config with num_warps= was reported at the first call, as the kernel having no constexpr
  'num_warps'; and autotune stacked under the kernel decorator printed a function's repr."""
  def tuned():
    @mg.autotune(configs=[{"BLOCK": 1024, "num_warps": 4}, {"BLOCK": 512, "num_warps": 8}])
    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
    def add(x, out, BLOCK: ml.constexpr = 1024):
      pid = ml.program_id(0)
      out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]
    return add
  with pytest.raises(mg.SignatureError) as info:
    tuned()
  e = info.value
  assert e.lineno == _line_of(tuned, "@mg.autotune")
  assert e.message == ("autotune config {'BLOCK': 1024, 'num_warps': 4} names 'num_warps', which is not a constexpr"
                       " parameter of add")
  assert e.hint.startswith("threads per CTA are the decorator's block=")

  def misspelt():
    @mg.autotune(configs=[{"BLOKC": 1024}])
    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x, BLOCK: (x.shape[0] // BLOCK,))
    def add(x, out, BLOCK: ml.constexpr = 1024):
      pid = ml.program_id(0)
      out.at[ml.ds(pid * BLOCK, BLOCK)][...] = x.at[ml.ds(pid * BLOCK, BLOCK)][...]
  with pytest.raises(mg.SignatureError) as info:
    misspelt()
  assert info.value.hint.startswith("did you mean BLOCK?")

  def swapped():
    @mg.mgpu_kernel(out_shape=lambda x: x)
    @mg.autotune(configs=[{"BLOCK": 1024}])
    def add(x, out, BLOCK: ml.constexpr = 1024):
      out[...] = x[...]
  with pytest.raises(mg.SignatureError) as info:
    swapped()
  assert info.value.message == ("@mg.autotune decorates an @mg.mgpu_kernel function, got the plain function add"
                                " (decorated in the wrong order?)")
