"""Probe 44c: the kernel as a JAX citizen, part four: jax.jit's static_argnums and static_argnames checked against
the kernel's signature (mgpu_dsl/jit_argnums.py), a value bound by position to a constexpr of another kind
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
