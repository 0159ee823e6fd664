"""Every builtin given Python numbers (session 60): `ml.sigmoid(0.5)`, `ml.softplus(-2)`, `tl.fdiv(1.0, 3.0)` were
internal errors ("binary op on two Python values reached the type rules", MG900) and `ml.trans(2.5)` a Python
AttributeError; the first three compute now while tracing, in float32, as the other math functions of numbers do
(ops/number_math.py), and a number's transpose is the number, as jnp's. The sweep calls each builtin of ml with
numbers and checks that none reaches an internal error."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend.ops import BUILTINS
from call_sweeps import escapes

S = jax.ShapeDtypeStruct


@mg.mgpu_kernel(out_shape=lambda x: x)
def numbers(x, o):
  o[...] = x[...] * 0.0 + ml.sigmoid(0.5) + ml.softplus(-2) * 10.0 + ml.fdiv(1.0, 3.0) * 100.0 + ml.trans(2.5) * 1e3


def test_math_of_numbers_computes_in_float32():
  f = np.float32
  want = (f(1) / (f(1) + np.exp(-f(0.5))) + (np.log1p(np.exp(f(-2)))) * f(10) + (f(1) / f(3)) * f(100)
          + f(2.5) * f(1e3))
  got = np.asarray(numbers(np.zeros(128, np.float32), interpret=True))
  np.testing.assert_allclose(got, np.full(128, want, np.float32), rtol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x)
def transpose_of_a_number_with_axes(x, o):
  o[...] = x[...] + ml.transpose(2.5, (1, 0))


def test_transpose_of_a_number_with_axes_is_at_the_call():
  with pytest.raises(mg.KernelTypeError) as info:
    transpose_of_a_number_with_axes.typed_ir(S((128,), jnp.float32))
  e = info.value
  assert e.filename == __file__ and e.lineno == transpose_of_a_number_with_axes.__wrapped__.__code__.co_firstlineno + 2
  assert e.message.startswith("ml.transpose of a Python number takes no axes"), e.message
  assert e.hint == "a number has no axes to permute: use 2.5 itself", e.hint


_ARGS = ("0.5", "3", "0.5, 2.0", "7, 3", "0.5, 2.0, 1.0", "True, 1", "True", "x[0], 1", "x, 0.5", "x[...] > 0, 1")


def test_no_builtin_reaches_an_internal_error_on_numbers(tmp_path):
  """Each ml builtin called with Python numbers (one, two or three; floats, ints, a bool), or with a scalar, a ref
  or a bool tensor beside one: a result or a KernelError in the user's words, never MG900 or a Python exception
  (ml.searchsorted(x, 0.5), ml.round(m, 1) of a bool tensor and ml.trans(True) were internal errors)."""
  calls = [((b, a), f"ml.{b}({a})") for b in sorted(BUILTINS) for a in _ARGS]
  bad = escapes(tmp_path, "number_calls", ["from mgpu_dsl import language as ml"], calls, (128,))
  assert not bad, bad[:10]


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), jnp.int32),) * 3)
def one_query(x, o, p, q):
  o[...] = ml.zeros((128,), jnp.int32) + jnp.searchsorted(x[0], 0.5)
  p[...] = ml.zeros((128,), jnp.int32) + ml.searchsorted(x.at[0], -0.25, side="right")
  q[...] = ml.zeros((128,), jnp.int32) + ml.searchsorted(x[1], 1)


def test_searchsorted_of_one_python_number():
  """jnp.searchsorted(a, 0.5) and ml.searchsorted(ref, -0.25) of a Python number query were internal errors
  (AttributeError: 'float' object has no attribute 'type')."""
  x = np.sort(np.random.default_rng(0).standard_normal((8, 128)).astype(np.float32), axis=1)
  o, p, q = one_query(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), np.full(128, np.searchsorted(x[0], 0.5)))
  np.testing.assert_array_equal(np.asarray(p), np.full(128, np.searchsorted(x[0], -0.25, side="right")))
  np.testing.assert_array_equal(np.asarray(q), np.full(128, np.searchsorted(x[1], 1)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def round_bool(x, o):
  o[...] = x[...] + ml.round(x[...] > 0, 1)


def test_round_of_bools_to_decimals_says_convert():
  with pytest.raises(mg.KernelTypeError) as info:
    round_bool.typed_ir(S((8, 128), jnp.float32))
  e = info.value
  assert e.lineno == round_bool.__wrapped__.__code__.co_firstlineno + 2
  assert e.message.startswith("ml.round of bool values to decimals=1"), e.message
  assert e.hint == "convert first: ml.round((x[...] > 0).astype(jnp.float32), 1)", e.hint
