"""Probe 45c (Python semantics of run-time scalars and small values in a kernel, compared with what Python and
NumPy give on the same numbers): `and`/`or` of a run-time boolean and then numbers give Python's value (the later
operands computed only where the boolean does not decide; a walrus among them carried out), a chained comparison's
later operands that read are computed only where the earlier comparisons hold, `min`/`max` of float scalars follow
Python's tie and NaN rules, `k in (1, 2, 4)` and `k in range(...)` are Python's, `round(i, -1)` of integers is
Python's and NumPy's; `isinstance`/`type` of a traced value, a builtin's name rebound to a value then called, and
builtins given arguments Python refuses are errors at the user's line that say so."""
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


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def bool_and_tensor(x, s, out):
  c = s[0] > 0
  out[...] = c and x[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def bool_and_tensor_as_hinted(x, s, out):
  c = s[0] > 0
  out[...] = ml.where(c, x[...], 0)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def number_or_tensor(x, s, out):
  f = x[0]
  out[...] = f or x[...]


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def number_or_tensor_as_hinted(x, s, out):
  f = x[0]
  out[...] = ml.where(f != 0, f, x[...])


def test_a_boolean_and_then_a_number_tensor_hints_pythons_value_per_element():
  """The hint was `c & x[...]`, a bitwise and of a boolean and a float32 tensor (MG003 when followed); `f or x[...]`
  of a number scalar hinted `make both sides produce the same shape and dtype`."""
  expect(bool_and_tensor, [S((8,), F32), S((2,), I32)], mg.UnsupportedSyntaxError, "c and x",
         "'and'/'or' of a run-time boolean and a value that is not one is not supported in a kernel",
         hint="Python's value here is x[...] where c holds, else c itself (False, 0): pick it per element with"
              " ml.where(c, x[...], 0)")
  expect(number_or_tensor, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "f or x",
         "`f or x[...]` is a float32 scalar on one side and a float32 tensor of shape (8,) on the other",
         hint="Python's value here is x[...] where f is 0, else f: pick it per element with ml.where(f != 0, f, x[...])")
  for first in (0.0, 2.5):
    x = np.arange(8, dtype=np.float32) - 3
    x[0] = first
    got = number_or_tensor_as_hinted(x, np.zeros(2, np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(np.asarray(float(x[0]) or x, np.float32), x.shape))
  x = np.arange(8, dtype=np.float32) - 3
  for k in (0, 1):
    got = bool_and_tensor_as_hinted(x, np.array([k, 0], np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.broadcast_to(np.asarray(k > 0 and x, np.float32), x.shape))


@pytest.mark.gpu
def test_gpu_a_boolean_and_then_a_number_reads_only_where_it_decides():
  """Reads x[i] past its end only on the path Python would not take (i = 100): a fault here is a read performed."""
  x = np.array([10, 0, 12, 13, 14, 0, 16, 17], np.float32)
  for i, k in [(0, 5), (1, 0), (5, 4), (8, 6), (100, 0)]:
    got, ints = bool_then_number(jnp.asarray(x), jnp.asarray(np.array([i, k], np.int32)))
    want, want_ints = _bool_then_number_want(x, i, k)
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")
    np.testing.assert_array_equal(np.asarray(ints), np.array(want_ints, np.int32), err_msg=f"i={i} k={k}")


# ---------------------------------------------------------------- min/max of run-time scalars: Python's rule
@mg.mgpu_kernel(out_shape=lambda x, s: S((16,), F32))
def python_min_max(x, s, out):
  a, b, c = x[0], x[1], x[2]
  i, j = s[0], s[1]
  out[0] = max(a, b)
  out[1] = min(a, b)
  out[2] = max(a, b, c)
  out[3] = min(a, b, c)
  out[4] = max(a, 0.0)
  out[5] = min(0.0, a)
  out[6] = max(b, a)
  out[7] = min(b, a)
  out[8] = max([a, b, c])
  out[9] = min((c, b, a))
  out[10] = max(a, i)                                  # an int32 and a float32 scalar: float32, as jnp
  out[11] = min(i, a, j)
  out[12] = max(i, 2.5)
  out[13] = max(i, j) * 1.0
  out[14] = max(a.astype(jnp.bfloat16), -0.0).astype(jnp.float32)
  out[15] = min(i, True) * 1.0


def _min_max_want(a, b, c, i, j):
  import ml_dtypes
  bf = float(ml_dtypes.bfloat16(a))
  return [max(a, b), min(a, b), max(a, b, c), min(a, b, c), max(a, 0.0), min(0.0, a), max(b, a), min(b, a),
          max([a, b, c]), min((c, b, a)), max(a, i), min(i, a, j), max(i, 2.5), max(i, j), max(bf, -0.0), min(i, True)]


def _same_floats(got, want):
  """Equal as Python's floats are, NaN with NaN and the sign of a zero too."""
  got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
  return bool(np.all((np.isnan(got) & np.isnan(want)) | ((got == want) & (np.signbit(got) == np.signbit(want)))))


_NAN = float("nan")
_MIN_MAX_CASES = [(-0.0, 0.0, -0.0), (0.0, -0.0, 0.0), (_NAN, 1.0, 2.0), (1.0, _NAN, 0.5), (1.0, 2.0, _NAN),
                  (3.0, -1.0, 2.0), (2.0, 2.0, -7.5)]


def test_min_and_max_of_float_scalars_follow_pythons_ties_and_nans():
  """max(-0.0, 0.0) was 0.0 and max(1.0, nan) NaN (ml.maximum's, which orders -0.0 below 0.0 and propagates a NaN):
  Python's max keeps the first of equal values and takes a later one only where it is greater, so -0.0 and 1.0."""
  for (a, b, c), (i, j) in zip(_MIN_MAX_CASES, [(2, -3), (0, 0), (-1, 5), (1, 1), (3, 2), (-4, -9), (2, 7)]):
    got = python_min_max(np.array([a, b, c], np.float32), np.array([i, j], np.int32), interpret=True)
    want = _min_max_want(a, b, c, i, j)
    assert _same_floats(got, want), ((a, b, c, i, j), np.asarray(got), want)
  mlir = python_min_max.mlir(S((3,), F32), S((2,), I32))
  assert "maximumf" not in mlir and "minimumf" not in mlir and "arith.select" in mlir


@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), F32))
def max_of_two_widths(x, s, out):
  a = s[0]
  h = a.astype(jnp.uint32)        # (float32 with float16 is jnp's float32 since probe 47b; int32 with uint32 is int64)
  out[0] = max(a, h)


def test_max_of_two_float_widths_is_named_as_the_builtin_called():
  """It said `ml.maximum on a (float32) and h (float16)`, a function the kernel does not call."""
  expect(max_of_two_widths, [S((8,), F32), S((2,), I32)], mg.DtypeMismatchError, "max(a, h)",
         "max on a (int32) and h (uint32): dtypes differ and are never converted implicitly",
         hint="convert both sides to int64, where jnp (with jax_enable_x64) computes and every value of both fits:"
              " a.astype(jnp.int64) and h.astype(jnp.int64)")


@pytest.mark.gpu
def test_gpu_min_and_max_of_float_scalars_follow_pythons_ties_and_nans():
  for (a, b, c), (i, j) in zip(_MIN_MAX_CASES, [(2, -3), (0, 0), (-1, 5), (1, 1), (3, 2), (-4, -9), (2, 7)]):
    got = python_min_max(jnp.asarray(np.array([a, b, c], np.float32)), jnp.asarray(np.array([i, j], np.int32)))
    want = _min_max_want(a, b, c, i, j)
    assert _same_floats(got, want), ((a, b, c, i, j), np.asarray(got), want)


# ---------------------------------------------------------------- `in` a tuple of constants
@mg.mgpu_kernel(out_shape=lambda x, s: S((12,), jnp.bool_))
def membership(x, s, out):
  a, b, f = s[0], s[1], x[0]
  out[0] = a in (1, 2, 3)
  out[1] = a not in [1, 2, 3]
  out[2] = 3 in (a, b)
  out[3] = f in (0.5, -1.0, a)
  out[4] = a in ()
  out[5] = a not in {4, 5}
  hit = False
  if b in (0, 7):
    hit = True
  out[6] = hit
  out[7] = 4 not in (a, b, 4)
  out[8] = a in range(2, 6)
  out[9] = b in range(1, 9, 3)
  out[10] = a not in range(7, -2, -2)
  out[11] = b in range(3, 3)


def _membership_want(a, b, f):
  hit = b in (0, 7)
  return [a in (1, 2, 3), a not in [1, 2, 3], 3 in (a, b), f in (0.5, -1.0, a), a in (), a not in {4, 5}, hit,
          4 not in (a, b, 4), a in range(2, 6), b in range(1, 9, 3), a not in range(7, -2, -2), b in range(3, 3)]


def test_in_a_tuple_of_constants_is_pythons_any_equal():
  """`k in (1, 2, 3)` of a run-time scalar was MG001 (hinted as (k == 1) | ...): it is Python's value, whether k
  equals an item; `not in` its negation, an item that is run-time compared too, a static item equal to a static left
  side decides while tracing; `k in range(lo, hi, step)` of an integer is within its bounds and steps."""
  for a, b, f in [(1, 3, 0.5), (2, 0, -1.0), (5, 7, 2.0), (3, 3, 3.0), (0, 4, 0.25), (-1, -2, 1.0), (6, 10, 0.5)]:
    got = membership(np.array([f], np.float32), np.array([a, b], np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), np.array(_membership_want(a, b, f)), err_msg=f"{a} {b} {f}")
  expect(set_of_values, [S((1,), F32), S((2,), I32)], mg.UnsupportedSyntaxError, "{s[0], s[1]}",
         "a set of run-time values is not supported in a kernel",
         hint="use a tuple, (s[0], s[1]): `in` tests it item by item, as a set does")


@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), jnp.bool_))
def set_of_values(x, s, out):
  out[0] = 3 in {s[0], s[1]}


# ---------------------------------------------------------------- isinstance/type of traced values
@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), I32))
def int_check(x, s, out):
  k = s[0]
  out[0] = k * 2 if isinstance(k, int) else k
  out[1] = k


@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), I32))
def type_of_tensor(x, s, out):
  v = x[...]
  if type(v) == float:
    out[...] = v.astype(jnp.int32)


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), I32))
def containers_typed(x, s, out):
  pair, row = (s[0], s[1]), [s[1]]
  out[0] = s[0] if isinstance(pair, tuple) and type(row) is list and not isinstance(pair, list) else s[1]


def test_isinstance_and_type_of_a_traced_value_hint_its_static_dtype():
  """`isinstance(k, int)` of an int32 scalar said `isinstance cannot take a scalar inside a kernel` with the hint to
  decorate a helper with @ml.inline: it names the value and hints its dtype, which is static; a tuple or list of
  run-time values is a Python container, whose type Python gives."""
  expect(int_check, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "isinstance(k, int)",
         "isinstance(k, int) of a run-time value: k is an int32 scalar, traced while compiling, so its Python type"
         " does not tell its dtype or shape",
         hint="test its dtype or shape, which are static (an if on them is decided while tracing):"
              " jnp.issubdtype(k.dtype, jnp.integer), or k.ndim == 0 for a scalar")
  expect(type_of_tensor, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "type(v)",
         "type(v) of a run-time value: v is a float32 tensor of shape (8,), traced while compiling, so its Python"
         " type does not tell its dtype or shape",
         hint="test its dtype or shape, which are static (an if on them is decided while tracing):"
              " v.dtype == jnp.float32, or v.ndim == 0 for a scalar")
  got = containers_typed(np.zeros(8, np.float32), np.array([3, 9], np.int32), interpret=True)
  assert int(np.asarray(got)[0]) == 3


# ---------------------------------------------------------------- a walrus after a run-time `and`; chains that read
@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), F32))
def walrus_and_chains(x, s, out):
  i, k = s[0], s[1]
  v = -5.0
  a = i < 8 and (v := x[i]) > 2.0 and v < 6.0            # v is x[i] only where i < 8, else what it held
  out[0] = v
  out[1] = a * 1.0
  n = 7
  b = i >= 8 or (n := s[1] * 2) > 3
  out[2] = n * 1.0
  out[3] = b * 1.0
  out[4] = -1.0
  if 0 <= i < 8 and (w := x[i]) != 3.0:
    out[4] = w
  j, total = 0, 0.0
  while j < 8 and (t := x[j]) < k:                      # (x[8] never read: t bound only where j < 8)
    total += t
    j += 1
  out[5] = j + total
  out[6] = (0 <= k < 2 <= s[k] + 2) * 1.0               # s[k] read only where 0 <= k < 2
  out[7] = (i < 8 > k <= x[i]) * 1.0                    # x[i] read only where i < 8 and k <= 8


def _walrus_want(x, s):
  i, k = s
  v = -5.0
  a = i < 8 and (v := x[i]) > 2.0 and v < 6.0
  n = 7
  b = i >= 8 or (n := s[1] * 2) > 3
  w4 = w if 0 <= i < 8 and (w := x[i]) != 3.0 else -1.0
  j, total = 0, 0.0
  while j < 8 and (t := x[j]) < k:
    total += t
    j += 1
  return [v, a * 1.0, n, b * 1.0, w4, j + total, (0 <= k < 2 <= s[k] + 2) * 1.0, (i < 8 > k <= x[i]) * 1.0]


def test_a_walrus_after_a_run_time_and_and_chains_that_read_compute_only_where_python_does():
  """`if i < n and (v := x[i]) > 0:` was MG001 with the hint `(i < n) & ((v := x[i]) > 0)`, which reads x[n]; the
  walrus's name is carried out of the run-time if (what it held before where the operand is skipped). A chain
  `0 <= k < 2 <= s[k]` read s[k] where k >= 2 too (MG952 in interpret mode; a fault on the GPU): its later comparisons
  are computed only where the earlier hold, as Python's `a < b and b < c`."""
  x = np.arange(8, dtype=np.float32) * 1.5
  for i, k in [(0, 1), (2, 2), (3, 9), (5, 0), (9, 4), (4, -2), (7, 12)]:
    got = walrus_and_chains(x, np.array([i, k], np.int32), interpret=True)
    want = _walrus_want([float(t) for t in x], [i, k])
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def walrus_kinds(x, s, out):
  i = s[0]
  v = s[1]                                               # an int32 before, a float32 after: v as float32
  a = i < 8 and (v := x[i]) > 0
  out[0] = v + a
  w = 2.5
  b = i < 8 and (w := s[i % 2]) > 0                       # a float before, an int32 after: no one dtype
  out[1] = w * b


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def walrus_keeps_an_int(x, s, out):
  i = s[0]
  v = s[1]
  a = i < 8 and (v := x[i]) > 0
  out[0] = v
  out[1] = a * 1.0


def test_a_walrus_name_keeps_its_old_value_where_skipped_and_one_dtype_must_hold_both():
  """An int32 the walrus rebinds to a float32 where it runs is that int32 as a float32 where it does not (Python's
  value, the same number); a float rebound to an int32 has no one dtype: MG001, said so."""
  x = np.arange(8, dtype=np.float32) + 0.5
  for i in (3, 9):
    got = walrus_keeps_an_int(x, np.array([i, 5], np.int32), interpret=True)
    np.testing.assert_array_equal(np.asarray(got), [x[i] if i < 8 else 5.0, float(i < 8)])
  e = expect(walrus_kinds, [S((8,), F32), S((2,), I32)], mg.UnsupportedSyntaxError, "i < 8 and (w",
             "a walrus (:=) after a run-time and/or that binds another kind of value than its name held is not"
             " supported in a kernel")
  assert e.hint.startswith("w := ... runs only where i < 8 does not decide, and w keeps what it held elsewhere"), e.hint


@pytest.mark.gpu
def test_gpu_walrus_and_chains_read_past_the_end_only_where_python_would_not():
  """Reads x[9], s[9] and s[-2] on the paths Python skips: a fault here is such a read performed."""
  x = np.arange(8, dtype=np.float32) * 1.5
  for i, k in [(0, 1), (3, 9), (9, 4), (4, -2), (7, 12)]:
    got = walrus_and_chains(jnp.asarray(x), jnp.asarray(np.array([i, k], np.int32)))
    want = _walrus_want([float(t) for t in x], [i, k])
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")


# ---------------------------------------------------------------- a builtin's name rebound, then called
@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def shadowed_abs(x, s, out):
  abs = s[0]
  out[0] = abs(x[0])
  out[1] = abs * 1.0


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def shadowed_len(x, s, out):
  len = 4
  out[0] = x[len(x) - 1]
  out[1] = 0.0


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def shadowed_and_used(x, s, out):
  sum, max = 0.0, x[0]
  for i in range(8):
    sum += x[i]
    max = x[i] if x[i] > max else max
  out[0] = sum
  out[1] = max


@mg.mgpu_kernel(out_shape=lambda x, s: S((8,), jnp.float16))
def dtype_called(x, s, out):
  dt = out.dtype
  out[...] = dt(x[...])


def test_a_builtins_name_rebound_to_a_value_then_called_says_so():
  """`abs = s[0]` then `abs(x[0])` said `abs cannot take a scalar inside a kernel` with the hint to decorate a helper
  with @ml.inline: the name is a value (Python's TypeError), said so with where it was bound; a builtin's name
  rebound and used as a value computes as in Python."""
  expect(shadowed_abs, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "abs(x[0])",
         "abs is an int32 scalar (bound at line %d), not a function, so it cannot be called; it hides Python's builtin"
         " abs" % (shadowed_abs.fn.__code__.co_firstlineno + 2),
         hint="rename that variable (abs_ = ...) so abs(...) is Python's builtin again")
  expect(shadowed_len, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "len(x)",
         "len is a Python int 4 (bound at line %d), not a function, so it cannot be called; it hides Python's builtin len"
         % (shadowed_len.fn.__code__.co_firstlineno + 2),
         hint="rename that variable (len_ = ...) so len(...) is Python's builtin again")
  expect(dtype_called, [S((8,), F32), S((2,), I32)], mg.KernelTypeError, "dt(x[...])",
         "dt is the dtype float16 (bound at line %d), not a function, so it cannot be called"
         % (dtype_called.fn.__code__.co_firstlineno + 2), hint="convert with .astype: x[...].astype(dt)")
  x = np.array([3, -1, 7.5, 2, 0, 7.5, -9, 1], np.float32)
  got = shadowed_and_used(x, np.zeros(2, np.int32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.array([x.sum(), x.max()], np.float32))


# ---------------------------------------------------------------- round(i, -k) of integers
@mg.mgpu_kernel(out_shape=lambda v, s: (S(v.shape, v.dtype), S((8,), I32)))
def round_to_tens(v, s, out, scalars):
  out[...] = round(v[...], -1)
  i = s[0]
  scalars[0] = round(i, -1)
  scalars[1] = round(i, -2)
  scalars[2] = round(i, ndigits=-3)
  scalars[3] = round(i, -10)
  scalars[4] = round(i)
  scalars[5] = round(i, 0)
  scalars[6] = round(-i, -1)
  scalars[7] = round(i + 5, -1)


def test_round_of_integers_to_negative_digits_is_pythons_and_numpys():
  """round(i, -1) of an int32 scalar was MG003 (`ml.round of int32 to decimals=-1: integers do not round to negative
  decimals (nor in jnp.round)`): Python and NumPy round to the nearest ten, halves to the even ten."""
  rng = np.random.default_rng(3)
  for dtype in (np.int32, np.int16, np.uint8):
    info = np.iinfo(dtype)
    v = np.concatenate([[0, 5, 15, 25, -5, -15, -25, 44, 45, 46, -44, -45, -46, 95, 105, 115], rng.integers(
        max(info.min, -5000), min(info.max, 5000) - 10, 112)]).astype(dtype)
    for i in (15, 25, -15, 1250, -1350, 7, 123456789):
      got, scalars = round_to_tens(v, np.array([i], np.int32), interpret=True)
      np.testing.assert_array_equal(np.asarray(got), np.round(v, -1), err_msg=dtype.__name__)
      want = [round(i, -1), round(i, -2), round(i, -3), round(i, -10), round(i), round(i, 0), round(-i, -1),
              round(i + 5, -1)]
      np.testing.assert_array_equal(np.asarray(scalars), np.array(want, np.int32), err_msg=str(i))


@pytest.mark.gpu
def test_gpu_membership_and_round_to_tens_match_python():
  for a, b, f in [(1, 3, 0.5), (2, 0, -1.0), (5, 7, 2.0)]:
    got = membership(jnp.asarray(np.array([f], np.float32)), jnp.asarray(np.array([a, b], np.int32)))
    np.testing.assert_array_equal(np.asarray(got), np.array(_membership_want(a, b, f)))
  v = np.concatenate([[0, 5, 15, 25, -5, -15, -25, 45], np.arange(-60, 60)]).astype(np.int16)
  for i in (15, 25, -1350, 123456789):
    got, scalars = round_to_tens(jnp.asarray(v), jnp.asarray(np.array([i], np.int32)))
    np.testing.assert_array_equal(np.asarray(got), np.round(v, -1))
    want = [round(i, -1), round(i, -2), round(i, -3), round(i, -10), round(i), round(i, 0), round(-i, -1), round(i + 5, -1)]
    np.testing.assert_array_equal(np.asarray(scalars), np.array(want, np.int32))


# ---------------------------------------------------------------- builtins called with arguments Python refuses
@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def abs_of_two(x, s, out):
  f, i = x[0], s[0]
  out[0] = abs(f, i)
  out[1] = 0.0


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), F32))
def divmod_of_one(x, s, out):
  q, r = divmod(x[0])
  out[0] = q
  out[1] = r


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), I32))
def len_of_a_scalar(x, s, out):
  out[0] = len(s[0])
  out[1] = 0


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), I32))
def modular_pow(x, s, out):
  out[0] = pow(s[0], 5, 7)
  out[1] = 0


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), I32))
def str_of_a_value(x, s, out):
  label = str(s[0])
  out[0] = len(label)
  out[1] = 0


def test_builtins_given_arguments_python_refuses_or_cannot_compute_say_so():
  """`abs(f, i)` computed abs(f) and dropped i (Python's TypeError: abs takes one argument); `divmod(x[0])`, `len(k)`,
  `pow(k, 5, 7)` and `str(k)` said `... cannot take a scalar inside a kernel` with the hint to decorate a helper with
  @ml.inline."""
  specs = [S((8,), F32), S((2,), I32)]
  expect(abs_of_two, specs, mg.KernelTypeError, "abs(f, i)",
         "abs(f, i): too many positional arguments for Python's abs(x)", hint="call it as Python does: abs(x)")
  expect(divmod_of_one, specs, mg.KernelTypeError, "divmod(x[0])",
         "divmod(x[0]): missing a required argument: 'y' for Python's divmod(x, y)",
         hint="call it as Python does: divmod(x, y)")
  expect(len_of_a_scalar, specs, mg.KernelTypeError, "len(s[0])", "Python's len(...) cannot take a scalar in a kernel",
         hint="a scalar has no length (Python's TypeError); len(t) of a register tensor is its first dimension")
  expect(modular_pow, specs, mg.KernelTypeError, "pow(s[0], 5, 7)",
         "Python's pow(...) cannot take a scalar in a kernel",
         hint="pow(a, b, mod) is not computed on run-time values: write (s[0] ** 5) % 7 (the power wraps at 32 bits,"
              " so for large exponents multiply and reduce step by step)")
  e = expect(str_of_a_value, specs, mg.KernelTypeError, "str(s[0])", "Python's str(...) cannot take a scalar in a kernel")
  assert "print(f'{s[0]}')" in e.hint, e.hint
