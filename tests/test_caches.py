"""The specialisation cache: bounded, keyed by constexpr type, and never stale.

A kernel reads module globals and `@ml.inline` helpers; rebinding one after the
first call (as a notebook does) must recompile the kernel, for old and new shapes.
"""
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
THIS = sys.modules[__name__]

SCALE = 2.0
OFFSET = 0.0


@ml.inline
def plus_offset(v):
  return v + OFFSET


@ml.inline
def times_ten(v):
  return v * 10.0


@ml.inline
def transform(v):
  return plus_offset(v * SCALE)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def scaled(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = transform(v)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def times(x, out, *, f: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * f


def run(k, n=256, **kw):
  x = jnp.arange(n, dtype=F32)
  return np.asarray(k(x, interpret=True, **kw)), np.asarray(x)


def test_rebinding_a_global_constant_recompiles_the_kernel(monkeypatch):
  out, x = run(scaled)
  np.testing.assert_array_equal(out, x * 2.0)
  monkeypatch.setattr(THIS, "SCALE", 3.0)
  out, x = run(scaled)
  np.testing.assert_array_equal(out, x * 3.0)
  out, x = run(scaled, n=384)            # a shape never compiled before sees it too
  np.testing.assert_array_equal(out, x * 3.0)


def test_rebinding_a_global_read_by_a_nested_helper_recompiles(monkeypatch):
  run(scaled)
  monkeypatch.setattr(THIS, "OFFSET", 1.0)
  out, x = run(scaled)
  np.testing.assert_array_equal(out, x * SCALE + 1.0)


def test_redefining_an_inline_helper_recompiles_the_kernel(monkeypatch):
  run(scaled)
  monkeypatch.setattr(THIS, "transform", times_ten)
  out, x = run(scaled)
  np.testing.assert_array_equal(out, x * 10.0)
  assert scaled.cache_info().retraces >= 1


def test_unchanged_globals_keep_the_compiled_kernel():
  run(scaled)
  before = scaled.cache_info()
  run(scaled)
  after = scaled.cache_info()
  assert (after.hits, after.misses, after.retraces) == (before.hits + 1, before.misses, before.retraces)


def test_an_equal_rebinding_keeps_the_compiled_kernel(monkeypatch):
  run(scaled)
  before = scaled.cache_info()
  monkeypatch.setattr(THIS, "SCALE", float("2.0"))     # a new float object, the same value
  run(scaled)
  assert scaled.cache_info().retraces == before.retraces


def test_closure_cells_are_watched():
  def make():
    factor = 2.0

    @mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
    def closed(x, out):
      i = ml.program_id(0)
      out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] * factor

    def set_factor(v):
      nonlocal factor
      factor = v
    return closed, set_factor

  closed, set_factor = make()
  out, x = run(closed)
  np.testing.assert_array_equal(out, x * 2.0)
  set_factor(5.0)
  out, x = run(closed)
  np.testing.assert_array_equal(out, x * 5.0)


@pytest.mark.parametrize("a,b", [(2, 2.0), (True, 1), (1, 1.0)], ids=str)
def test_equal_constexprs_of_different_types_are_separate_specialisations(a, b):
  times.cache_clear()
  spec = S((256,), F32)
  ir_a, ir_b = times.typed_ir(spec, f=a), times.typed_ir(spec, f=b)
  assert times.cache_info().currsize == 2
  assert f"rhs={a}\n" in ir_a.replace("  #", "\n") and f"rhs={b}\n" in ir_b.replace("  #", "\n")


def test_specialisation_cache_drops_the_least_recently_used():
  k = mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), cache_size=2)(times.fn)
  for n in (128, 256, 384):
    k.typed_ir(S((n,), F32), f=2)
  info = k.cache_info()
  assert (info.currsize, info.maxsize, info.misses) == (2, 2, 3)
  k.typed_ir(S((384,), F32), f=2)          # still there
  assert k.cache_info().hits == 1
  k.typed_ir(S((128,), F32), f=2)          # dropped first: compiled again
  assert k.cache_info().misses == 4


def test_cache_clear_forgets_every_specialisation():
  times.typed_ir(S((256,), F32), f=2)
  times.cache_clear()
  assert times.cache_info().currsize == 0
  misses = times.cache_info().misses
  times.typed_ir(S((256,), F32), f=2)
  assert times.cache_info().misses == misses + 1


def test_cache_size_must_be_positive():
  with pytest.raises(mg.LaunchConfigError, match="cache_size"):
    mg.mgpu_kernel(out_shape=lambda x: x, cache_size=0)(times.fn)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def apply(x, out, *, act: ml.constexpr):
  i = ml.program_id(0)
  out.at[ml.ds(i * 128, 128)][...] = act(x.at[ml.ds(i * 128, 128)][...])


HELPERS = (plus_offset, times_ten)
BY_NAME = {"offset": plus_offset}


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def apply_held(x, out, *, j: ml.constexpr):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 128, 128)][...]
  out.at[ml.ds(i * 128, 128)][...] = HELPERS[j](v) + BY_NAME["offset"](v)


def test_a_global_read_by_a_helper_passed_as_a_constexpr_is_watched(monkeypatch):
  """The helper's reads were not followed: rebinding OFFSET kept the stale kernel (2.0 for 7.0)."""
  out, x = run(apply, act=plus_offset)
  np.testing.assert_array_equal(out, x)
  monkeypatch.setattr(THIS, "OFFSET", 5.0)
  out, x = run(apply, act=plus_offset)
  np.testing.assert_array_equal(out, x + 5.0)


def test_a_global_read_by_helpers_held_in_a_tuple_or_dict_is_watched(monkeypatch):
  out, x = run(apply_held, j=0)
  np.testing.assert_array_equal(out, 2 * x)
  monkeypatch.setattr(THIS, "OFFSET", 1.0)
  out, x = run(apply_held, j=0)
  np.testing.assert_array_equal(out, 2 * x + 2.0)


def test_the_disk_key_of_a_helper_constexpr_holds_its_source_and_reads(monkeypatch):
  """It named the helper only: a changed helper body or global was served from disk."""
  from mgpu_dsl import deps as D
  before = D.value_text(plus_offset)
  monkeypatch.setattr(THIS, "OFFSET", 3.0)
  assert D.value_text(plus_offset) != before and D.value_text(plus_offset).startswith("inline:")
