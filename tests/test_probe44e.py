"""Probe 44e (data-dependent control flow written as Python expressions, as ragged/MoE kernels are): `a if c else b`
on a run-time `c` was MG001 with a hint to write an if statement; it is now traced as that if statement
(frontend/branches.py if_expression: each side computed only on its path, tuples merged as an if's names, two
Python numbers weakly typed as lax.cond keeps them), so a binary search over sorted offsets writes
`lo, hi = (mid, hi) if off[mid] <= t else (lo, mid)`."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


def _line_of(text):
  with open(__file__) as f:
    return next(n for n, line in enumerate(f, 1) if text in line and "_line_of" not in line)


def _col_of(text):
  with open(__file__) as f:
    line = next(line for line in f if text in line and "_line_of" not in line and "_col_of" not in line)
  return line.index(text)


def _expect(kernel, specs, at, message, hint=None, cls=mg.KernelTypeError):
  with pytest.raises(cls) as info:
    kernel.check(*specs)
  e = info.value
  assert (e.lineno, e.col_offset) == (_line_of(at), _col_of(at)), e
  assert e.message == message, e.message
  if hint is not None:
    assert e.hint == hint, e.hint
  return e


# ---------------------------------------------------------------- a if c else b on a run-time c
@mg.mgpu_kernel(out_shape=lambda off, t: S(t.shape, I32), grid=lambda off, t: (t.shape[0],))
def group_of(off, t, out):
  """The group each row belongs to: the last lo with off[lo] <= row (MoE's ragged groups)."""
  p = ml.program_id(0)
  row = t[p]
  lo, hi = 0, off.shape[0] - 1
  while hi - lo > 1:
    mid = (lo + hi) // 2
    lo, hi = (mid, hi) if off[mid] <= row else (lo, mid)
  out[p] = lo


_OFFSETS = np.array([0, 3, 3, 7, 12, 20, 20, 31, 40], np.int32)
_ROWS = np.array([0, 2, 3, 6, 7, 19, 20, 30, 31, 39], np.int32)


def _groups_want(off, rows):
  return (np.searchsorted(off, rows, side="right") - 1).astype(np.int32)


@mg.mgpu_kernel(out_shape=lambda x, s: S((2,), x.dtype))
def guarded_read(x, s, out):
  i = s[0]
  out[0] = x[i] if i < x.shape[0] else -1.0                  # the read guarded
  out[1] = (x[i] * 2.0 if 0 <= i < x.shape[0] else 0.0) + 1.0


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def tensors_and_numbers(x, s, out):
  v = x[...]
  k = s[0]
  a, b = (v * 2.0, k) if k > 0 else (v - 1.0, k + 1)         # a tuple of a tensor and a scalar
  out[...] = (a + b) * (0.5 if k else 0.25) + (1.0 if k > 3 else 2.0 if k > 1 else 3.0)


def _tensors_want(x, k):
  a, b = (x * 2.0, k) if k > 0 else (x - 1.0, k + 1)
  return ((a + b) * (0.5 if k else 0.25) + (1.0 if k > 3 else 2.0 if k > 1 else 3.0)).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def sides_differ(x, s, out):
  out[...] = x[...] if s[0] > 3 else x[:4]


def test_binary_search_over_sorted_offsets_runs():
  got = group_of(_OFFSETS, _ROWS, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), _groups_want(_OFFSETS, _ROWS))


def test_a_conditional_read_is_performed_only_on_its_path():
  ir = guarded_read.typed_ir(S((8,), F32), S((1,), I32))
  x_ref = re.search(r"param (%\d+) x:", ir).group(1)
  reads = f"scalarread ref={x_ref} "
  thens = [part.split("else_block():")[0] for part in ir.split("then_block():")[1:]]
  assert ir.count(reads) == 2 and all(reads in t for t in thens), ir   # each x[i] read under its if, not before it
  x = np.arange(8, dtype=np.float32) + 10
  for i in (0, 5, 8, 1000):             # (interpret mode reports a read past the end: MG952)
    got = np.asarray(guarded_read(x, np.array([i], np.int32), interpret=True))
    want = [x[i] if i < 8 else -1.0, (x[i] * 2.0 if 0 <= i < 8 else 0.0) + 1.0]
    np.testing.assert_array_equal(got, np.array(want, np.float32))


def test_tensors_tuples_and_python_numbers_as_conditional_expressions():
  x = (np.arange(16, dtype=np.float32) - 5).astype(BF16)
  for k in (-2, 0, 2, 5):
    got = tensors_and_numbers(x, np.array([k], np.int32), interpret=True)
    assert got.dtype == BF16                                # two Python floats stay weak: bfloat16, as in Python/jnp
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(_tensors_want(x, k), np.float32))


@mg.mgpu_kernel(out_shape=lambda x, s: S((1,), x.dtype))
def int_or_float(x, s, out):
  i = s[0]
  out[0] = x[0] * (i if i > 1 else 0.5)


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def none_side(x, s, out):
  b = x[...] if s[0] > 0 else None
  out[...] = b


@mg.mgpu_kernel(out_shape=lambda x, s: x)
def function_side(x, s, out):
  f = ml.exp if s[0] > 0 else ml.log
  out[...] = f(x[...])


def test_sides_of_different_shapes_or_kinds_are_named_as_sides():
  _expect(sides_differ, [S((8,), F32), S((1,), I32)], "x[...] if s[0]",
          "the conditional expression is a float32 tensor of shape (8,) on one side and a float32 tensor of shape"
          " (4,) on the other", hint="make both sides produce the same shape and dtype")
  # (an int32 side and a float32 side: float32, as jnp.where(i > 1, i, 0.5) is; probe 60c, it was MG003)
  x = np.arange(1, 9, dtype=np.float32)
  for i in (0, 3):
    got = np.asarray(int_or_float(x, np.array([i], np.int32), interpret=True))
    assert got[0] == x[0] * (i if i > 1 else 0.5)
  _expect(none_side, [S((128,), F32), S((1,), I32)], "x[...] if s[0] > 0 else None",
          "the conditional expression is None on one side and a float32 tensor of shape (128,) on the other; after a"
          " run-time condition it must be a register value or a number on both",
          hint="give the None side a value of the other's kind (0.0, or ml.zeros(shape, dtype) for a tensor)")
  _expect(function_side, [S((128,), F32), S((1,), I32)], "ml.exp if",
          "the conditional expression is a different kind of value on each side")


@pytest.mark.gpu
def test_binary_search_over_sorted_offsets_gpu():
  got = group_of(jnp.asarray(_OFFSETS), jnp.asarray(_ROWS))
  np.testing.assert_array_equal(np.asarray(got), _groups_want(_OFFSETS, _ROWS))
  x = (np.arange(16, dtype=np.float32) - 5).astype(BF16)
  for k in (-2, 0, 5):
    got = tensors_and_numbers(jnp.asarray(x), jnp.array([k], I32))
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(_tensors_want(x, k), np.float32))


@pytest.mark.gpu
def test_conditional_read_past_the_end_gpu():
  """x[i] if i < n else -1.0 with i = 1000 past the end: the read must not run (may fault if it does)."""
  x = np.arange(8, dtype=np.float32) + 10
  for i in (3, 8, 1000):
    got = np.asarray(guarded_read(jnp.asarray(x), jnp.array([i], I32)))
    want = [x[i] if i < 8 else -1.0, (x[i] * 2.0 if 0 <= i < 8 else 0.0) + 1.0]
    np.testing.assert_array_equal(got, np.array(want, np.float32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def per_element_choice(x, out):
  v = x[...]
  out[...] = v * (2.0 if v > 0 else 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def per_element_hinted(x, out):
  v = x[...]
  out[...] = v * ml.where(v > 0, 2.0, 0.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def per_element_pair(x, out):
  v = x[...]
  a, b = (v, 1.0) if v > 0 else (-v, 2.0)
  out[...] = a * b


def test_a_tensor_condition_hints_the_per_element_select():
  """The hint said ml.where(...) is a float32 value to convert for a bfloat16 tensor (it is weakly typed: it
  is not), or an if statement (which takes one truth value, not a tensor's)."""
  _expect(per_element_choice, [S((128,), BF16)], "2.0 if v > 0",
          "a conditional expression on a runtime value is not supported in a kernel",
          hint="a tensor condition chooses per element: use ml.where(v > 0, 2.0, 0.5)", cls=mg.UnsupportedSyntaxError)
  _expect(per_element_pair, [S((128,), F32)], "(v, 1.0) if",
          "a conditional expression on a runtime value is not supported in a kernel",
          hint="a tensor condition chooses per element: select each item, (ml.where(v > 0, v, -v), ml.where(v > 0,"
               " 1.0, 2.0))", cls=mg.UnsupportedSyntaxError)
  x = (np.arange(128) - 60).astype(BF16)
  got = per_element_hinted(x, interpret=True)             # the hinted select is weakly typed: bfloat16
  assert got.dtype == BF16
  np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(x * np.where(x > 0, 2.0, 0.5).astype(BF16), np.float32))


# ---------------------------------------------------------------- `k or 1`, `a and b` of run-time number scalars
@mg.mgpu_kernel(out_shape=lambda s, x: S((5,), I32))
def python_and_or(s, x, out):
  a, b = s[0], s[1]
  out[0] = a or 7                                              # Python's value: a if a else 7
  out[1] = a and b
  out[2] = a and b or 9
  out[3] = a or x[b] or 4                                      # x[b] read only where a is 0
  out[4] = ml.where((b < x.shape[0]) and (x[b] or -1) != 0, 1, 0)


def _and_or_want(a, b, x):
  return [a or 7, a and b, a and b or 9, a or int(x[b]) or 4 if a == 0 else a, int(b < 6 and (int(x[b]) or -1) != 0)]


@mg.mgpu_kernel(out_shape=lambda s: S((1,), F32))
def int_or_float_and_or(s, out):
  out[0] = s[0] or 0.5


@mg.mgpu_kernel(out_shape=lambda s, x: S((1,), I32))
def bool_and_number(s, x, out):
  b = s[1]
  out[0] = ml.where((b >= 0) and (x[b] or -1), 1, 0)


def test_and_or_of_run_time_numbers_give_pythons_value():
  """`a or 7` of an int32 scalar was MG001, whose hint `(a != 0) | (7 != 0)` computed a boolean, not Python's value:
  it is `a if a else 7`, the rest computed only where a does not decide."""
  x = np.array([5, 0, 2, 8, 1, 6], np.int32)
  for a, b in [(0, 3), (2, 0), (2, 5), (0, 1), (3, 9)]:
    got = python_and_or(np.array([a, b], np.int32), x, interpret=True)     # (b = 9 past x's end: MG952 if read)
    np.testing.assert_array_equal(np.asarray(got), np.array(_and_or_want(a, b, x), np.int32))
  for a in (0, 3):         # (float32, as jnp.where(s[0] != 0, s[0], 0.5): probe 60c, it was MG003)
    assert float(np.asarray(int_or_float_and_or(np.array([a, 0], np.int32), interpret=True))[0]) == (a or 0.5)
  for b in (-3, 1, 4):      # (a boolean and then a number: Python's value, probe 45c; x[b] read only where b >= 0)
    got = bool_and_number(np.array([0, b], np.int32), x, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), [1 if b >= 0 and (int(x[b]) or -1) else 0])


# ---------------------------------------------------------------- comparisons of mixed widths, as jnp's
@mg.mgpu_kernel(out_shape=lambda a, b: (S(a.shape, jnp.bool_), S((6,), jnp.bool_)))
def compare_mixed(a, b, out, flags):
  u, v = a[...], b[...]
  out[...] = (u <= v) | (u == v[::-1])                        # tensors of two dtypes
  flags[0] = a[1] <= b[2]                                       # scalars of two dtypes
  flags[1] = a[2] > b[1]
  flags[2] = a[0] == b[0]
  flags[3] = a[3] != b[3]
  flags[4] = b[5] < a[5]
  flags[5] = b[4] >= a[4]


_MIXED = [(jnp.int16, jnp.int32), (jnp.uint8, jnp.int8), (jnp.uint16, jnp.int16), (jnp.int32, jnp.uint8),
          (jnp.float16, jnp.float32), (jnp.float16, jnp.bfloat16)]


def _mixed_inputs(da, db):
  rng = np.random.default_rng(7)
  lo = max(np.iinfo(da).min if jnp.issubdtype(da, jnp.integer) else -100, -100)
  vals = rng.integers(lo, 100, 128)
  a = (vals + rng.standard_normal(128) * (not jnp.issubdtype(da, jnp.integer)) / 8).astype(da)
  b = np.where(rng.random(128) < 0.3, np.asarray(a, np.float64), rng.integers(max(lo, 0) if not jnp.issubdtype(
      db, jnp.signedinteger) and jnp.issubdtype(db, jnp.integer) else lo, 100, 128)).astype(db)
  return a, b


def _mixed_want(a, b):
  ja, jb = jnp.asarray(a), jnp.asarray(b)
  flags = [ja[1] <= jb[2], ja[2] > jb[1], ja[0] == jb[0], ja[3] != jb[3], jb[5] < ja[5], jb[4] >= ja[4]]
  return np.asarray((ja <= jb) | (ja == jb[::-1])), np.array(flags)


def test_comparisons_of_mixed_widths_and_signedness_follow_jnp():
  """`off_i16[mid] <= row_i32` was MG104 (dtypes differ and are never converted implicitly); a comparison's result is
  a boolean whatever its operands' dtype, so it compares as jnp promotes: int16 with int32 in int32, uint8 with int8
  in int16, float16 with float32 in float32."""
  for da, db in _MIXED:
    a, b = _mixed_inputs(da, db)
    got, flags = compare_mixed(a, b, interpret=True)
    want, want_flags = _mixed_want(a, b)
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{da.__name__} {db.__name__}")
    np.testing.assert_array_equal(np.asarray(flags), want_flags, err_msg=f"{da.__name__} {db.__name__}")
  assert "arith.extsi" in compare_mixed.mlir(S((128,), jnp.int16), S((128,), I32))


@mg.mgpu_kernel(out_shape=lambda a, b: b)
def widths_added(a, b, out):
  u, v = a[...], b[...]
  out[...] = u + v                                             # two widths added


def test_comparisons_jnp_takes_past_32_bits_stay_errors():
  """int32 with uint32 is int64 in jnp (int32 without jax_enable_x64, where uint32's upper half wraps): MG104 with
  the hint to compare in int64; arithmetic of two widths is jnp's (probe 47b)."""
  e = _expect(compare_mixed, [S((128,), I32), S((128,), jnp.uint32)], "u <= v",
              "<= on u (int32) and v (uint32): dtypes differ and are never converted implicitly",
              cls=mg.DtypeMismatchError)
  assert "int64" in e.hint, e.hint
  # (two widths added are jnp's promotion since probe 47b: int16 + int32 is int32)
  a, b = np.arange(-64, 64, dtype=np.int16) * 300, np.arange(128, dtype=np.int32) * 70001
  np.testing.assert_array_equal(np.asarray(widths_added(a, b, interpret=True)), a.astype(np.int32) + b)


@pytest.mark.gpu
def test_comparisons_of_mixed_widths_gpu():
  for da, db in _MIXED:
    a, b = _mixed_inputs(da, db)
    got, flags = compare_mixed(jnp.asarray(a), jnp.asarray(b))
    want, want_flags = _mixed_want(a, b)
    np.testing.assert_array_equal(np.asarray(got), want, err_msg=f"{da.__name__} {db.__name__}")
    np.testing.assert_array_equal(np.asarray(flags), want_flags, err_msg=f"{da.__name__} {db.__name__}")
