"""Probe 36d (program structure and control flow as a Python programmer writes it): loop variables
the body rebinds, `and`/`or` of run-time booleans, `while 1:` with a break, ... each compared with
Python (or jnp) in interpret mode and exported for CUDA."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
X = jnp.arange(1024, dtype=F32).reshape(8, 128) / 100


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a loop variable the body rebinds
@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), I32))
def rebound_loop_variable(x, n: ml.scalar, out):
  j = 7
  for j in range(n):
    j = j * 10
  k = 3
  for k in range(1, n, 2):
    if x[k, 0] > 2.0:
      k = -k
  m = 0
  for m in range(n):
    m += 100
  out[...] = ml.where(ml.arange(8) == 0, j, ml.where(ml.arange(8) == 1, k, m))


def _rebound_want(n):
  j, k, m = 7, 3, 0
  for j in range(n):
    j = j * 10
  for k in range(1, n, 2):
    if float(X[k, 0]) > 2.0:
      k = -k
  for m in range(n):
    m += 100
  return np.array([j, k] + [m] * 6, np.int32)


def test_a_loop_variable_the_body_rebinds_is_what_the_last_trip_left_after_the_loop():
  """It was the last index (40 came out as 4): the loop computed the index after it, ignoring the body's
  own binding, as Python's `for j in range(n): j = j * 10` leaves 10 * (n - 1)."""
  for n in (0, 1, 5, 8):
    np.testing.assert_array_equal(np.asarray(rebound_loop_variable(X, n, interpret=True)), _rebound_want(n))
  assert "mosaic_gpu" in str(_export(rebound_loop_variable, S((8, 128), F32), S((), I32)))


@pytest.mark.gpu
def test_gpu_rebound_loop_variable_matches_python():
  for n in (0, 1, 5, 8):
    np.testing.assert_array_equal(np.asarray(jax.jit(rebound_loop_variable)(X, n)), _rebound_want(n))


# ---------------------------------------------------------------- and / or of run-time booleans
@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), I32))
def guarded_reads(x, n: ml.scalar, out):
  i = 0
  while i < n and x[i, 0] < 5.0:         # x[n, 0] is never read: n may be x's length
    i += 1
  c = 0
  for r in range(8):
    if r >= n or x[r, 0] > 2.0 or x[r, 1] < 0.0:
      c += 1
  hit = 0
  for r in range(8):
    hit += (r < n and x[r, 3] > 1.0) and True
  out[...] = ml.where(ml.arange(8) == 0, i, ml.where(ml.arange(8) == 1, c, hit))


def _guarded_want(n):
  x = np.asarray(X)
  i = 0
  while i < n and x[i, 0] < 5.0:
    i += 1
  c = sum(1 for r in range(8) if r >= n or x[r, 0] > 2.0 or x[r, 1] < 0.0)
  hit = sum(1 for r in range(8) if r < n and x[r, 3] > 1.0)
  return np.array([i, c] + [hit] * 6, np.int32)


def test_and_or_of_run_time_booleans_short_circuit_as_python():
  """They were MG001 ('and'/'or' on run-time scalars), whose hint `(i < n) & (x[i, 0] < 5.0)` reads
  x[n, 0], past the array, where Python's `and` never does."""
  for n in (0, 3, 8):
    np.testing.assert_array_equal(np.asarray(guarded_reads(X, n, interpret=True)), _guarded_want(n))
  assert "mosaic_gpu" in str(_export(guarded_reads, S((8, 128), F32), S((), I32)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def tensor_or(x, out):
  v = x[...]
  out[...] = ml.where((v > 1.0) or (v < 0.5), v, 0.0)


def test_or_of_register_masks_is_the_elementwise_or():
  """It was MG001 with the elementwise or as its hint until probe 47g: Triton's `or` of masks."""
  x = np.random.default_rng(2).random((8, 128)).astype(np.float32) * 2
  np.testing.assert_array_equal(np.asarray(tensor_or(x, interpret=True)), np.where((x > 1.0) | (x < 0.5), x, 0.0))


@pytest.mark.gpu
def test_gpu_short_circuit_and_or_match_python():
  for n in (0, 3, 8):
    np.testing.assert_array_equal(np.asarray(jax.jit(guarded_reads)(X, n)), _guarded_want(n))


# ---------------------------------------------------------------- while 1: with a break
@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def while_one(x, out):
  i = 0
  while 1:
    i += 1
    if x[i, 0] > 3.0:
      break
  out[...] = i


def test_while_one_with_a_break_runs_as_while_true():
  """It was MG003: the flag a break sets False met the loop's condition 1 (an int) on the other path."""
  assert int(while_one(X, interpret=True)) == 3
  assert "mosaic_gpu" in str(_export(while_one, S((8, 128), F32)))


# ---------------------------------------------------------------- for row in ref, enumerate(ref)
@mg.mgpu_kernel(out_shape=lambda x: S((3, 128), F32))
def rows_of_refs(x, out):
  buf = ml.smem((8, 128), F32)
  ml.copy(x, buf)
  a = ml.zeros((128,), F32)
  for row in x:
    a += row[...]
  b = ml.zeros((128,), F32)
  for i, row in enumerate(buf.at[2:6]):
    b += row[...] * i
  c = ml.zeros((128,), F32)
  for row in x.at[1:]:
    if ml.max(row[...]) > 5.0:
      break
    c += row[...]
  out.at[0][...] = a
  out.at[1][...] = b
  out.at[2][...] = c


def test_for_over_a_ref_walks_its_first_axis_as_python_iterates_an_array():
  """It was MG001 ('iterating over anything but range(...)'), and enumerate(x) of a ref MG003 with the hint to
  decorate a helper with @ml.inline."""
  x = np.asarray(X)
  c = np.zeros(128, np.float32)
  for row in x[1:]:
    if row.max() > 5.0:
      break
    c += row
  want = np.stack([x.sum(0), (x[2:6] * np.arange(4)[:, None]).sum(0), c])
  np.testing.assert_allclose(np.asarray(rows_of_refs(X, interpret=True)), want, rtol=1e-6)
  assert "mosaic_gpu" in str(_export(rows_of_refs, S((8, 128), F32)))


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def rows_of_a_tensor(x, out):
  acc = ml.zeros((128,), F32)
  for v in x[...]:
    acc += v
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def rows_of_a_tensor_as_hinted(x, out):
  acc = ml.zeros((128,), F32)
  for r in ml.static_range(x[...].shape[0]):
    v = x[...][r]
    acc += v
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, y: S((3, 128), F32))
def zipped_and_reversed_rows(x, y, out):
  a = ml.zeros((128,), F32)
  for u, v in zip(x, y):             # as far as the shorter (y: 5 rows)
    a += u[...] * v[...]
  b = ml.zeros((128,), F32)
  for row in reversed(x):
    b = b * 0.5 + row[...]
  c = ml.zeros((128,), F32)
  i = -1
  for i, row in enumerate(y, start=2):
    c += row[...] * i
  out.at[0][...] = a
  out.at[1][...] = b
  out.at[2][...] = c + i


def test_zip_reversed_and_enumerate_of_refs_walk_rows_as_python():
  """They were MG003 ('zip cannot take a GMEM ref inside a kernel', hint: decorate a helper with @ml.inline)."""
  x, y = np.asarray(X), np.asarray(X)[:5] * 0.5
  b = np.zeros(128, np.float32)
  for row in x[::-1]:
    b = b * np.float32(0.5) + row
  want = np.stack([(x[:5] * y).sum(0), b, (y * np.arange(2, 7, dtype=np.float32)[:, None]).sum(0) + 6])
  got = zipped_and_reversed_rows(X, jnp.asarray(y), interpret=True)
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-6)
  assert "mosaic_gpu" in str(_export(zipped_and_reversed_rows, S((8, 128), F32), S((5, 128), F32)))


def test_iterating_a_register_tensor_is_hinted_by_its_rows():
  expect(rows_of_a_tensor, [S((8, 128), F32)], mg.UnsupportedSyntaxError, "x[...]:",
         "iterating over a register tensor is not supported in a kernel",
         hint="loop over its rows by index, for r in ml.static_range(x[...].shape[0]): v = x[...][r] (or iterate"
              " the ref it was read from, for v in ref:, each row a ref to read with v[...]); whole-tensor math"
              " (ml.sum(x[...], axis=0)) needs no loop")
  np.testing.assert_allclose(np.asarray(rows_of_a_tensor_as_hinted(X, interpret=True)), np.asarray(X).sum(0),
                             rtol=1e-6)


@pytest.mark.gpu
def test_gpu_rows_of_refs_match_interpret_mode():
  np.testing.assert_allclose(np.asarray(jax.jit(rows_of_refs)(X)), np.asarray(rows_of_refs(X, interpret=True)),
                             rtol=1e-6)
  y = X[:5] * 0.5
  np.testing.assert_allclose(np.asarray(jax.jit(zipped_and_reversed_rows)(X, y)),
                             np.asarray(zipped_and_reversed_rows(X, y, interpret=True)), rtol=1e-6)


# ---------------------------------------------------------------- any / all of run-time booleans
@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), I32))
def any_all_scalars(x, n: ml.scalar, out):
  for i in range(8):
    c = 0
    if any([n > i + 2, n < i, False]):
      c = 1
    if all((n > 2, i < 4, True)):
      c += 2
    out[i] = c


def test_any_and_all_of_a_list_of_run_time_booleans_are_their_or_and_and():
  """They were MG003 ('any(...) of register values is Python's iteration')."""
  for n in (0, 3, 6):
    want = np.array([(n > i + 2 or n < i) + 2 * (n > 2 and i < 4) for i in range(8)], np.int32)
    np.testing.assert_array_equal(np.asarray(any_all_scalars(X, n, interpret=True)), want)
  assert "mosaic_gpu" in str(_export(any_all_scalars, S((8, 128), F32), S((), I32)))


# ---------------------------------------------------------------- augmented assignments: hints that parse
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bfloat16))
def bf16_plus_f32(x, out):
  out[...] = ml.zeros(x.shape, jnp.bfloat16)
  out[...] += x[...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.bfloat16))
def bf16_plus_f32_as_hinted(x, out):
  out[...] = ml.zeros(x.shape, jnp.bfloat16)
  out[...] = (out[...].astype(jnp.float32) + x[...]).astype(jnp.bfloat16)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def int_plus_float(x, out):
  out[...] = ml.full(x.shape, 3, I32)
  out[...] += x[...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def int_plus_float_as_hinted(x, out):
  out[...] = ml.full(x.shape, 3, I32)
  out[...] = (out[...] + x[...]).astype(jnp.int32)


def test_an_augmented_assignment_of_another_dtype_hints_a_statement_that_parses():
  """The hints were `out[...].astype(jnp.float32)` (for `+=`: not an assignment target) and
  `out[...][...] = (value).astype(jnp.int32)`."""
  spec = [S((8, 128), F32)]
  expect(bf16_plus_f32, spec, mg.StoreDtypeError, "out[...] += x[...]",     # (float32 since probe 47b, as jnp's)
         "cannot store a value (float32) into out[...] (GMEM, bfloat16): no implicit conversion",
         hint="convert the value to out's dtype, out[...] += x[...].astype(jnp.bfloat16), or compute in float32"
              " and store the result converted: out[...] = (out[...].astype(jnp.float32) + x[...]).astype(jnp.bfloat16)")
  np.testing.assert_array_equal(np.asarray(bf16_plus_f32_as_hinted(X, interpret=True)), np.asarray(X.astype(jnp.bfloat16)))
  expect(int_plus_float, spec, mg.StoreDtypeError, "out[...] += x[...]",
         "cannot store a value (float32) into out[...] (GMEM, int32): no implicit conversion",
         hint="compute the update and store it converted to out's dtype (as jnp's .astype does):"
              " out[...] = (out[...] + x[...]).astype(jnp.int32)")
  np.testing.assert_array_equal(np.asarray(int_plus_float_as_hinted(X, interpret=True)),
                                np.asarray((3 + X).astype(I32)))


@mg.mgpu_kernel(out_shape=lambda x: x)
def register_slice_plus(x, out):
  acc = x[...]
  acc[:, 0:64] += 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def register_slice_plus_as_hinted(x, out):
  acc = x[...]
  acc = ml.where((ml.arange(128)[None, :] < 64), acc + 1.0, acc)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: x)
def register_whole_plus(x, out):
  acc = ml.zeros(x.shape, F32)
  acc[...] += x[...]
  out[...] = acc


def test_writing_into_a_register_tensor_hints_rebinding_its_name():
  """The hint was 'write into a kernel parameter or an ml.smem buffer' for `acc[...] += v` of a register
  accumulator, whose fix is `acc += v`."""
  spec = [S((8, 128), F32)]
  expect(register_slice_plus, spec, mg.KernelTypeError, "acc[:, 0:64]",
         "only refs can be written with [...] =, but acc is a register tensor",
         hint="acc is a register value, not memory: rebind the name to a select of the part, acc ="
              " ml.where((ml.arange(128)[None, :] < 64), acc + 1.0, acc)")
  np.testing.assert_array_equal(np.asarray(register_slice_plus_as_hinted(X, interpret=True)),
                                np.asarray(X.at[:, :64].add(1.0)))
  expect(register_whole_plus, spec, mg.KernelTypeError, "acc[...]",
         "only refs can be written with [...] =, but acc is a register tensor",
         hint="acc is a register value, not memory: rebind the name, acc += x[...]")


# ---------------------------------------------------------------- unpacking arrays by their first axis
@mg.mgpu_kernel(out_shape=lambda x: S((3, 128), F32))
def unpacked_rows(x, out):
  a, b = x.at[0:2][...]            # a register tensor's rows
  c, d = x.at[2:4]                 # a ref's rows (windows)
  out.at[0][...] = b - a
  out.at[1][...] = d[...] * 2.0 + c[...]
  s0, s1, s2, s3, s4, s5, s6, s7 = ml.sum(x[...], axis=1)
  out.at[2][...] = ml.full((128,), s7 - s0, F32)


def test_unpacking_a_ref_or_register_tensor_takes_its_rows_as_python_does():
  """They were MG003 ('cannot unpack a register tensor into 2 names', hint 'unpack a tuple of the same length')."""
  x = np.asarray(X)
  rs = x.sum(1)
  want = np.stack([x[1] - x[0], x[3] * 2 + x[2], np.full(128, rs[7] - rs[0], np.float32)])
  np.testing.assert_allclose(np.asarray(unpacked_rows(X, interpret=True)), want, rtol=1e-5)
  assert "mosaic_gpu" in str(_export(unpacked_rows, S((8, 128), F32)))


@pytest.mark.gpu
def test_gpu_unpacked_rows_match_interpret_mode():
  np.testing.assert_allclose(np.asarray(jax.jit(unpacked_rows)(X)), np.asarray(unpacked_rows(X, interpret=True)),
                             rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.uint32))
def four_into_two(x, out):
  a, b = ml.randint4x(0, ml.arange(128).astype(jnp.uint32))
  out[...] = a ^ b


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.uint32))
def four_into_two_as_hinted(x, out):
  a, b = ml.randint4x(0, ml.arange(128).astype(jnp.uint32))[:2]
  out[...] = a ^ b


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def eight_rows_into_two(x, out):
  a, b = x
  out[...] = a[...] + b[...]


def test_unpacking_into_the_wrong_number_of_names_counts_both():
  e = expect(four_into_two, [S((8, 128), F32)], mg.KernelTypeError, "a, b = ml.randint4x",
             "cannot unpack a Python tuple of 4 values into 2 names")
  assert e.hint.endswith("or take the first 2: a, b = ml.randint4x(0, ml.arange(128).astype(jnp.uint32))[:2]")
  four_into_two_as_hinted.check(S((8, 128), F32))
  expect(eight_rows_into_two, [S((8, 128), F32)], mg.KernelTypeError, "a, b = x",
         "cannot unpack a GMEM ref of 8 rows into 2 names (an array unpacks by its first axis)",
         hint="unpack a window of 2 rows, a, b = x.at[0:2], or index the rows you need")


# ---------------------------------------------------------------- statements a kernel does not run: hints in the user's words
@mg.mgpu_kernel(out_shape=lambda x: x)
def imports_inside(x, out):
  import math
  out[...] = x[...] * math.pi


@mg.mgpu_kernel(out_shape=lambda x: x)
def deletes_a_name(x, out):
  v = x[...]
  out[...] = v
  del v


@mg.mgpu_kernel(out_shape=lambda x: x)
def returns_its_result(x, out):
  return x[...] * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def returns_its_result_as_hinted(x, out):
  out[...] = x[...] * 2.0


def test_import_del_and_return_of_a_value_are_hinted_in_the_users_words():
  """Their hints were the list of what kernels support ('kernels support assignments, ...'), and for
  `return v` 'kernels write their results into output refs (the last parameters)'."""
  spec = [S((8, 128), F32)]
  expect(imports_inside, spec, mg.UnsupportedSyntaxError, "import math", "import is not supported in a kernel",
         hint="move `import math` to the top of the module: the kernel reads the module's names (math.pi,"
              " np.float32) while tracing, as static values")
  np.testing.assert_array_equal(np.asarray(deletes_a_name(X, interpret=True)), np.asarray(X))   # (probe 52b: `del
  # v` unbinds v, as Python's; it was MG001 hinting to drop it)
  expect(returns_its_result, spec, mg.UnsupportedSyntaxError, "return x", "returning a value is not supported in a"
         " kernel", hint="kernels write their results into their output refs (the last parameters):"
                         " out[...] = x[...] * 2.0, and end with a bare return (or none)")
  np.testing.assert_array_equal(np.asarray(returns_its_result_as_hinted(X, interpret=True)), np.asarray(X) * 2)


# ---------------------------------------------------------------- return in a helper's run-time loop: the hint's names
@ml.inline
def _first_hot_row(x):
  for r in range(x.shape[0]):
    if x[r, 0] > 3.0:
      return r
  return -1


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def helper_returns_in_its_loop(x, out):
  out[...] = _first_hot_row(x)


@ml.inline
def _first_hot_row_as_hinted(x):
  result = -1
  for r in range(x.shape[0]):
    if x[r, 0] > 3.0:
      result = r
      break
  return result


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def helper_returns_in_its_loop_as_hinted(x, out):
  out[...] = _first_hot_row_as_hinted(x)


def test_a_return_in_a_helpers_loop_is_hinted_with_names_the_helper_does_not_use():
  """The hint said `r = -1 before the loop; r = i`: with the loop's own r that rebinds the loop variable.
  (Probe 38g: the return in the loop itself works now, as the hint followed does.)"""
  assert int(helper_returns_in_its_loop(X, interpret=True)) == 3
  assert int(helper_returns_in_its_loop_as_hinted(X, interpret=True)) == 3


# ---------------------------------------------------------------- recursion on static values
@ml.inline
def _add_levels(v, depth):
  if depth == 0:
    return v
  return _add_levels(v + 1.0, depth - 1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def recursion_of_depth(x, out, *, depth: ml.constexpr):
  out[...] = _add_levels(x[...], depth)


@mg.mgpu_kernel(out_shape=lambda x: x)
def recursion_as_hinted(x, out, *, depth: ml.constexpr):
  v = x[...]
  for _ in ml.static_range(depth):
    v = v + 1.0
  out[...] = v


def _plus_ones(n):
  v = np.asarray(X)
  for _ in range(n):
    v = v + np.float32(1.0)
  return v


def test_a_recursion_too_deep_says_it_must_end_sooner_not_that_recursion_is_unsupported():
  """A recursion on static values of depth 10 runs; one of 20 said 'recursion is not supported'."""
  np.testing.assert_array_equal(np.asarray(recursion_of_depth(X, depth=10, interpret=True)), _plus_ones(10))
  with pytest.raises(mg.UnsupportedSyntaxError) as info:
    recursion_of_depth.check(S((8, 128), F32), depth=20)
  e = info.value
  assert (e.lineno, e.col_offset) == where(_add_levels, "_add_levels(v + 1.0")
  assert e.message == ("@ml.inline calls nest more than 16 deep here: _add_levels calls itself, and a recursion must"
                       " end within 16 calls (its depth decided by static values)")
  assert e.hint == ("make it end sooner (fewer than 16 levels), or unroll it into a loop: for _ in"
                    " ml.static_range(depth): ... (or a run-time loop, range(n), for a depth known only at run time)")
  np.testing.assert_array_equal(np.asarray(recursion_as_hinted(X, depth=20, interpret=True)), _plus_ones(20))


@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), F32))
def and_of_a_number(x, n: ml.scalar, out):
  for i in range(8):
    out[i] = i < n and x[i, 0]


@mg.mgpu_kernel(out_shape=lambda x, n: S((8,), F32))
def and_of_a_number_as_hinted(x, n: ml.scalar, out):
  for i in range(8):
    out[i] = ml.where(i < n, x[i, 0], 0)


def test_and_of_a_boolean_and_a_number_gives_pythons_value():
  """It was MG001 with the hint `(i < n) & x[i, 0]`, a bitwise and of a boolean and a float32 (MG003 when
  followed), then (probe 45c) a select hinted; it is Python's value, x[i, 0] where i < n, else False (0.0)."""
  for n in (0, 5, 9):
    want = np.array([float(i < n and float(np.asarray(X)[i, 0])) for i in range(8)], np.float32)
    np.testing.assert_array_equal(np.asarray(and_of_a_number(X, n, interpret=True)), want)
    np.testing.assert_array_equal(np.asarray(and_of_a_number_as_hinted(X, n, interpret=True)), want)


# ---------------------------------------------------------------- an optional input passed as None
@mg.mgpu_kernel(out_shape=lambda x, bias: x, grid=lambda x, bias: (x.shape[0],))
def optional_bias(x, bias, out, *, has_bias: ml.constexpr = True):
  i = ml.program_id(0)
  v = x.at[i][...]
  if has_bias:
    v = v + bias[...]
  out.at[i][...] = v


def test_an_input_passed_as_none_hints_a_placeholder_and_a_constexpr_flag():
  """It said 'input 1 (bias) is NoneType None' with the hint 'pass a jax or numpy array'; then (until probe 52b)
  MG006 at the call hinting a placeholder. Since probe 52b an input may be None, as Triton's optional pointer: the
  kernel compiles without it, and a read of it that no static test guards is MG003 at the read."""
  with pytest.raises(mg.KernelTypeError) as info:
    optional_bias(X, None, interpret=True)
  assert info.value.message == "bias[...] uses bias, an input the call passed as None"
  assert info.value.hint == ("guard its uses with `if bias is not None:` (a static test: each call compiles the"
                             " kernel for what it passes), or pass an array for bias")
  np.testing.assert_array_equal(np.asarray(optional_bias(X, jnp.zeros((1,), F32), has_bias=False, interpret=True)),
                                np.asarray(X))
  np.testing.assert_array_equal(np.asarray(optional_bias(X, None, has_bias=False, interpret=True)), np.asarray(X))


# ---------------------------------------------------------------- a negative static bound with uint32 run-time bounds
@mg.mgpu_kernel(out_shape=lambda x, n: S((), I32))
def negative_start_uint32_stop(x, n: ml.scalar, out):
  t = 0
  for i in range(-2, n):
    t += 1
  out[...] = t


@mg.mgpu_kernel(out_shape=lambda x, n: S((), I32))
def negative_start_as_hinted(x, n: ml.scalar, out):
  t = 0
  for i in range(-2, n.astype(jnp.int32)):
    t += 1
  out[...] = t


def test_a_negative_static_bound_of_a_uint32_loop_is_reported_at_the_header():
  """It was MG900 in interpret mode (OverflowError: -2 out of bounds for uint32), and on the GPU the start
  wrapped to 4294967294: no trips, where Python's range(-2, 5) runs 7."""
  expect(negative_start_uint32_stop, [S((8, 128), F32), S((), jnp.uint32)], mg.KernelTypeError, "-2, n)",
         "this loop's start is -2, but its run-time bounds are uint32, so it counts in uint32, where -2 would wrap"
         " to 4294967294",
         hint="convert the uint32 bound to int32 (values below 2**31): n.astype(jnp.int32) in the range, as Python"
              " counts from a negative start")
  assert int(negative_start_as_hinted(X, jnp.uint32(5), interpret=True)) == 7


# ---------------------------------------------------------------- a module's tuple of numbers at a run-time index
COEFFS = (0.5, 1.5, 2.5, 3.5, 4.5, 5.5, 6.5, 7.5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(8,))
def per_program_coefficient(x, out):
  i = ml.program_id(0)
  out.at[i][...] = x.at[i][...] * COEFFS[i]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(8,))
def per_program_coefficient_as_hinted(x, out):
  i = ml.program_id(0)
  r = COEFFS[0]
  for k in ml.static_range(1, 8):
    r = ml.where(i == k, COEFFS[k], r)
  out.at[i][...] = x.at[i][...] * r


def test_a_tuple_of_numbers_at_a_run_time_scalar_index_hints_a_select_per_entry():
  """The hint was 'index Python tuples with static ints ...; select between register values with ml.where'."""
  expect(per_program_coefficient, [S((8, 128), F32)], mg.KernelTypeError, "COEFFS[i]",
         "cannot index COEFFS (a Python tuple) with a runtime value",
         hint="a run-time index into a table of numbers: select its entries, r = COEFFS[0], then for k in"
              " ml.static_range(1, 8): r = ml.where(i == k, COEFFS[k], r); or pass the table to the kernel as an"
              " input array, t (jnp.asarray(COEFFS, jnp.float32)), and read t[i]")
  np.testing.assert_array_equal(np.asarray(per_program_coefficient_as_hinted(X, interpret=True)),
                                np.asarray(X) * np.asarray(COEFFS, np.float32)[:, None])


# ---------------------------------------------------------------- decorators stacked
import functools  # noqa: E402


def _logged(fn):
  @functools.wraps(fn)
  def wrapper(*a, **k):
    return fn(*a, **k)
  return wrapper


def test_stacked_decorators_are_named_with_where_each_goes():
  """@mgpu_kernel over a functools.wraps decorator read the wrapper (`*a in a kernel signature`, hint
  `def wrapper(out1, ...)`); over @ml.inline, @staticmethod or lru_cache it said 'put the decorator on a def
  statement' (lru_cache's at <unknown>:0:0); @ml.inline twice was an error."""
  @mg.mgpu_kernel(out_shape=lambda x: x)
  @_logged
  def doubled(x, out):
    out[...] = x[...] * 2.0
  with pytest.raises(mg.UnsupportedSyntaxError) as info:
    doubled.check(S((8, 128), F32))
  assert info.value.message == ("@mgpu_kernel decorates wrapper, the wrapper another decorator made around doubled:"
                                " a kernel is read from its def's source, so the wrapper's body would be the kernel")
  assert info.value.hint == ("put @mg.mgpu_kernel(...) right above `def doubled` (below the other decorator, which"
                             " then wraps the kernel and runs around each call)")

  @_logged
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def doubled_as_hinted(x, out):
    out[...] = x[...] * 2.0
  np.testing.assert_array_equal(np.asarray(doubled_as_hinted(X, interpret=True)), np.asarray(X) * 2)

  with pytest.raises(mg.SignatureError) as info:
    @mg.mgpu_kernel(out_shape=lambda x: x)
    @ml.inline
    def helper_as_kernel(x, out):
      out[...] = x[...]
  assert info.value.hint.startswith("drop @ml.inline")
  with pytest.raises(mg.SignatureError) as info:
    @mg.mgpu_kernel(out_shape=lambda x: x)
    @staticmethod
    def static_kernel(x, out):
      out[...] = x[...]
  assert info.value.hint == "put @staticmethod above @mgpu_kernel (outermost), so that @mgpu_kernel decorates the def itself"

  @ml.inline
  @functools.lru_cache
  def cached(n):
    return n * 2

  @mg.mgpu_kernel(out_shape=lambda x: x)
  def uses_cached(x, out):
    out[...] = x[...] * cached(3)
  with pytest.raises(mg.SignatureError) as info:
    uses_cached.check(S((8, 128), F32))
  assert info.value.filename == __file__ and info.value.lineno > 0
  assert info.value.hint == ("put @ml.inline right above `def cached`, nearest the def (a helper's body is traced"
                             " into each call: it needs no cache)")

  @ml.inline
  @ml.inline
  def twice(v):
    return v * 2.0

  @mg.mgpu_kernel(out_shape=lambda x: x)
  def uses_twice(x, out):
    out[...] = twice(x[...])
  np.testing.assert_array_equal(np.asarray(uses_twice(X, interpret=True)), np.asarray(X) * 2)
