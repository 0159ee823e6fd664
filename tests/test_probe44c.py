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
