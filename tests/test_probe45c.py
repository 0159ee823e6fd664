"""Probe 45c (Python semantics of run-time scalars and small values in a kernel, compared with what Python and
NumPy give on the same numbers): `and`/`or` of a run-time boolean and then numbers give Python's value (the later
operands computed only where the boolean does not decide), `min`/`max` follow Python's tie and NaN rules, ..."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


# ---------------------------------------------------------------- a run-time boolean `and`/`or` a number
@mg.mgpu_kernel(out_shape=lambda x, s: (S((5,), F32), S((4,), I32)))
def bool_then_number(x, s, out, ints):
  i, k = s[0], s[1]
  c = i < x.shape[0]
  out[0] = c and x[i]                                  # x[i] read only where i < 8
  out[1] = (i >= x.shape[0]) or x[i]
  out[2] = c and (i > 1) and x[i]
  out[3] = (c and x[i]) + 1.0
  out[4] = c and 2.5
  ints[0] = c and k
  ints[1] = k or (i < 3)                               # a number, then a boolean: an int
  ints[2] = c or 7
  ints[3] = c and x[i].astype(jnp.int32) and k


def _bool_then_number_want(x, i, k):
  n = len(x)
  xi = (lambda: float(x[i]))
  return ([float(i < n and xi()), float(i >= n or xi()), float(i < n and i > 1 and xi()), (i < n and xi()) + 1.0,
           float(i < n and 2.5)], [int(i < n and k), int(k or i < 3), int(i < n or 7), int(i < n and int(xi()) and k)])


def test_a_boolean_and_then_a_number_gives_pythons_value_reading_only_where_it_decides():
  """`i < n and x[i]` was MG001 (operands after a run-time boolean had to be booleans): it is Python's value,
  x[i] where i < n, else False as the number 0; x[i] is read only on that path (past the end here: MG952)."""
  x = np.array([10, 0, 12, 13, 14, 0, 16, 17], np.float32)
  for i, k in [(0, 5), (1, 0), (2, 3), (5, 4), (8, 6), (100, 0)]:
    got, ints = bool_then_number(x, np.array([i, k], np.int32), interpret=True)
    want, want_ints = _bool_then_number_want(x, i, k)
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")
    np.testing.assert_array_equal(np.asarray(ints), np.array(want_ints, np.int32), err_msg=f"i={i} k={k}")
  ir = bool_then_number.typed_ir(S((8,), F32), S((2,), I32))
  x_ref = re.search(r"param (%\d+) x:", ir).group(1)
  reads = re.findall(f"\n( *)%\\d+: scalar<float32> = scalarread ref={x_ref} ", ir)
  assert len(reads) == 5 and all(len(indent) > 2 for indent in reads), ir     # each under an if, none before it


@pytest.mark.gpu
def test_gpu_a_boolean_and_then_a_number_reads_only_where_it_decides():
  """Reads x[i] past its end only on the path Python would not take (i = 100): a fault here is a read performed."""
  x = np.array([10, 0, 12, 13, 14, 0, 16, 17], np.float32)
  for i, k in [(0, 5), (1, 0), (5, 4), (8, 6), (100, 0)]:
    got, ints = bool_then_number(jnp.asarray(x), jnp.asarray(np.array([i, k], np.int32)))
    want, want_ints = _bool_then_number_want(x, i, k)
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")
    np.testing.assert_array_equal(np.asarray(ints), np.array(want_ints, np.int32), err_msg=f"i={i} k={k}")
