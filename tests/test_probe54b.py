"""Probe 54b: the caches never run another kernel's trace.

Each test makes a sequence of calls that once shared one in-memory specialisation or one disk entry
with a kernel traced for other values (a frozen dataclass of -0.0, a dict in another order, a config
object or a bound method's instance changed in place, a NamedTuple or Enum redefined as a notebook
cell does, a helper exec'd again, an out_shape callable's structure) and compares every call with NumPy.
"""
import dataclasses
import enum
import functools
import linecache
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

F32 = jnp.float32


def data(n=128, seed=0):
  return np.random.default_rng(seed).standard_normal(n).astype(np.float32)


def same_bits(got, want):
  got, want = np.asarray(got), np.asarray(want, np.float32)
  np.testing.assert_allclose(got, want, rtol=1e-6)
  np.testing.assert_array_equal(np.signbit(got), np.signbit(want))     # -0.0 is not 0.0


@pytest.fixture
def disk(tmp_path, monkeypatch):
  """A fresh, empty disk cache for this test."""
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", str(tmp_path))
  return tmp_path


def affine():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def affine(x, out, *, cfg: ml.constexpr):
    out[...] = x[...] * cfg.scale + cfg.shift
  return affine


# ---------------------------------------------------------------- the in-memory specialisations
@dataclasses.dataclass(frozen=True)
class Frozen:
  scale: float
  shift: float


class Point(NamedTuple):
  scale: float
  shift: float


def test_a_frozen_dataclass_of_minus_zero_is_its_own_specialisation():
  k, x = affine(), np.zeros(128, np.float32)
  for scale in (0.0, -0.0):       # 0 * 0.0 + -0.0 is 0.0; 0 * -0.0 + -0.0 is -0.0
    same_bits(k(x, cfg=Frozen(scale, -0.0), interpret=True), x * np.float32(scale) + np.float32(-0.0))
  same_bits(k(x, cfg=Point(-0.0, -0.0), interpret=True), x * np.float32(-0.0))


def test_a_frozen_dataclass_of_an_int_and_of_a_float_are_two_specialisations():
  @mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct(x.shape, F32))
  def widen(x, out, *, cfg: ml.constexpr):
    out[...] = (x[...] * cfg.scale).astype(F32) + cfg.shift
  x = np.arange(-64, 64, dtype=np.int8)
  int8 = (x * np.int8(3)).astype(np.float32)          # int8 * 3 wraps, as jnp's does
  np.testing.assert_array_equal(widen(x, cfg=Frozen(3, 0), interpret=True), int8)
  np.testing.assert_array_equal(widen(x, cfg=Frozen(3.0, 0), interpret=True), x.astype(np.float32) * 3)


def test_a_dict_constexpr_in_another_order_is_another_kernel():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def chain(x, out, *, ops: ml.constexpr):
    v = x[...]
    for name, c in ops.items():
      v = v + c if name == "add" else v * c
    out[...] = v
  x = data()
  same_bits(chain(x, ops={"add": 1.0, "mul": 2.0}, interpret=True), (x + 1) * 2)
  same_bits(chain(x, ops={"mul": 2.0, "add": 1.0}, interpret=True), x * 2 + 1)


class Settings:
  """A config object with __eq__ (and so no __hash__)."""

  def __init__(self, scale, shift=0.0):
    self.scale, self.shift = scale, shift

  def __eq__(self, other):
    return isinstance(other, Settings) and (self.scale, self.shift) == (other.scale, other.shift)


class Tuned(Settings):
  """A subclass that compares only what its author thought mattered."""

  def __eq__(self, other):
    return isinstance(other, Tuned) and self.scale == other.scale


@pytest.mark.parametrize("make", [Settings, Tuned])
def test_a_config_object_changed_in_place_recompiles(make):
  k, x, cfg = affine(), data(), make(2.0)
  same_bits(k(x, cfg=cfg, interpret=True), x * 2)
  cfg.scale = 3.0
  same_bits(k(x, cfg=cfg, interpret=True), x * 3)
  cfg.shift = 1.0
  same_bits(k(x, cfg=cfg, interpret=True), x * 3 + 1)


class Model:
  def __init__(self, scale):
    self.scale = scale

  def act(self, v):
    return v * self.scale


def test_a_bound_method_whose_instance_changed_recompiles():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def apply(x, out, *, fn: ml.constexpr):
    out[...] = fn(x[...])
  x, m = data(), Model(2.0)
  same_bits(apply(x, fn=m.act, interpret=True), x * 2)
  m.scale = 3.0
  same_bits(apply(x, fn=m.act, interpret=True), x * 3)
  same_bits(apply(x, fn=Model(-1.0).act, interpret=True), -x)


def _times(v, s):
  return v * s[0]


def _times_cfg(v, cfg):
  return v * cfg.scale


@pytest.mark.parametrize("how", ["list", "object"])
def test_a_partial_whose_bound_argument_changed_in_place_recompiles(how):
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def apply(x, out, *, fn: ml.constexpr):
    out[...] = fn(x[...])
  x = data()
  held = [2.0] if how == "list" else Settings(2.0)
  fn = functools.partial(_times, s=held) if how == "list" else functools.partial(_times_cfg, cfg=held)
  same_bits(apply(x, fn=fn, interpret=True), x * 2)
  if how == "list":
    held[0] = 3.0
  else:
    held.scale = 3.0
  same_bits(apply(x, fn=fn, interpret=True), x * 3)


LAYOUT = "tuple"


def test_an_out_shape_callable_of_another_structure_returns_it():
  global LAYOUT

  @mg.mgpu_kernel(out_shape=lambda x: {"lo": x, "hi": x} if LAYOUT == "dict" else (x, x))
  def split(x, hi, lo):
    hi[...] = x[...] * 2.0
    lo[...] = x[...] * 0.5
  x = data()
  try:
    hi, lo = split(x, interpret=True)
    LAYOUT = "dict"
    out = split(x, interpret=True)
  finally:
    LAYOUT = "tuple"
  assert isinstance(out, dict) and sorted(out) == ["hi", "lo"]
  same_bits(hi, x * 2)
  same_bits(out["hi"], x * 2)
  same_bits(out["lo"], x * 0.5)


# ---------------------------------------------------------------- the disk cache
def test_a_namedtuple_redefined_with_its_fields_swapped_is_another_disk_entry(disk):
  x = data()

  class Cfg(NamedTuple):
    scale: float
    shift: float
  same_bits(affine()(x, cfg=Cfg(2.0, 1.0), interpret=True), x * 2 + 1)

  class Cfg(NamedTuple):     # the cell edited: the same values, in fields of another order
    shift: float
    scale: float
  same_bits(affine()(x, cfg=Cfg(2.0, 1.0), interpret=True), x * 1 + 2)


def test_a_namedtuple_method_redefined_is_another_disk_entry(disk):
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def gain(x, out, *, cfg: ml.constexpr):
    out[...] = x[...] * cfg.gain()
  x = data()

  class Cfg(NamedTuple):
    scale: float

    def gain(self):
      return self.scale * 2.0
  same_bits(gain(x, cfg=Cfg(1.5), interpret=True), x * 3)

  class Cfg(NamedTuple):
    scale: float

    def gain(self):
      return self.scale * 4.0
  gain.cache_clear()       # (as a new process would: only the disk cache is left)
  same_bits(gain(x, cfg=Cfg(1.5), interpret=True), x * 6)


def test_an_enum_redefined_with_another_value_is_another_disk_entry(disk):
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def scaled(x, out, *, act: ml.constexpr):
    out[...] = x[...] * act.value
  x = data()

  class Act(enum.Enum):
    DOUBLE = 2
    HALF = 0.5
  same_bits(scaled(x, act=Act.DOUBLE, interpret=True), x * 2)

  class Act(enum.Enum):
    DOUBLE = 3       # the cell edited
    HALF = 0.5
  same_bits(scaled(x, act=Act.DOUBLE, interpret=True), x * 3)


def test_an_int_enum_whose_method_was_redefined_is_another_disk_entry(disk):
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def act(x, out, *, kind: ml.constexpr):
    out[...] = kind.apply(x[...])
  x = data()

  class Kind(enum.IntEnum):
    SCALE = 1

    def apply(self, v):
      return v * 2.0
  same_bits(act(x, kind=Kind.SCALE, interpret=True), x * 2)

  class Kind(enum.IntEnum):
    SCALE = 1

    def apply(self, v):
      return v * 7.0
  act.cache_clear()       # (as a new process would: only the disk cache is left)
  same_bits(act(x, kind=Kind.SCALE, interpret=True), x * 7)


def _exec(src, filename, namespace):
  linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
  exec(compile(src, filename, "exec"), namespace)


@pytest.mark.parametrize("how", ["helper_rebound", "kernel_rerun"])
def test_a_helper_execd_again_without_a_module_name_is_another_disk_entry(disk, how):
  ns = {"mg": mg, "ml": ml}       # exec'd as tools do: no __name__, so its functions' __module__ is None
  _exec("def helper(v):\n  return v * 2.0\n", "<probe54b-helper>", ns)
  kernel = ("@mg.mgpu_kernel(out_shape=lambda x: x)\n"
            "def kern(x, out):\n  out[...] = helper(x[...])\n")
  _exec(kernel, "<probe54b-kernel>", ns)
  x = data()
  same_bits(ns["kern"](x, interpret=True), x * 2)
  _exec("def helper(v):\n  return v * 5.0\n", "<probe54b-helper>", ns)
  if how == "kernel_rerun":
    _exec(kernel, "<probe54b-kernel>", ns)
  same_bits(ns["kern"](x, interpret=True), x * 5)


@pytest.mark.gpu
def test_gpu_configs_changed_in_place_and_reordered_match_numpy():
  x = data(256, seed=3)
  k, cfg = affine(), Settings(2.0)
  same_bits(k(x, cfg=cfg), x * 2)
  cfg.scale = -3.0
  same_bits(k(x, cfg=cfg), x * -3)
  z = np.zeros(256, np.float32)
  same_bits(k(z, cfg=Frozen(-0.0, -0.0)), z * np.float32(-0.0) + np.float32(-0.0))
