"""Probe 29e (control flow and scalars): run-time loops nested two and three deep, loop bounds read
from GMEM, run-time ifs whose branches leave a name different, scalar math of program ids with
Python numbers, helpers called in loops."""
import functools

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32
N = S((1,), I32)
X = S((128,), F32)


# ---------------------------------------------------------------- an int on one path, a float on the other
@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scale_set_in_if(n, x, out):
  s = 1
  if n[0] > 2:
    s = 0.5
  out[...] = x[...] * s


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scale_halved_in_if(n, x, out):
  s = 1
  if n[0] > 2:
    s = s * 0.5
  out[...] = x[...] * s


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scale_in_both_branches(n, x, out):
  if n[0] > 2:
    s = 0.5
  else:
    s = 2
  out[...] = x[...] * s


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def pair_set_in_if(n, x, out):
  st = (1, 2)
  if n[0] > 2:
    st = (0.5, 2)
  out[...] = x[...] * st[0]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def scale_float_start(n, x, out):
  s = 1.0
  if n[0] > 2:
    s = 0.5
  out[...] = x[...] * s


def test_an_int_on_one_path_of_an_if_and_a_float_on_the_other_is_the_float_as_jnp_where_gives():
  """The hint was `s = 0` (0.5 converted to int32: following it drops the fraction) or `make both
  branches produce the same shape and dtype`; then it wrote the Python int as a float; since probe 60c
  the name is float32 after the if, as jnp.where(c, 0.5, 1) is, each path's value Python's."""
  x = jnp.arange(128, dtype=F32)
  for kernel, big, small in ((scale_set_in_if, 0.5, 1), (scale_halved_in_if, 0.5, 1),
                             (scale_in_both_branches, 0.5, 2), (pair_set_in_if, 0.5, 1)):
    builds(kernel, N, X)
    for n, s in ((3, big), (1, small)):
      np.testing.assert_array_equal(kernel(jnp.array([n], I32), x, interpret=True), x * s)
  builds(scale_float_start, N, X)
  np.testing.assert_allclose(scale_float_start(jnp.array([3], I32), x, interpret=True), x * 0.5)
  np.testing.assert_allclose(scale_float_start(jnp.array([1], I32), x, interpret=True), x)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_halves_in_if(n, x, out):
  t = 0
  for k in range(n[0]):
    if k > 0:
      t += 0.5
  out[...] = x[...] * t


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_halves_in_while(n, x, out):
  t = 0
  i = 0
  while i < n[0]:
    if i > 0:
      t += 0.5
    i += 1
  out[...] = x[...] * t


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_halves_nested(n, x, out):
  t = 0
  for k in range(n[0]):
    for j in range(2):
      t += 0.5
  out[...] = x[...] * t


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_halves_nested_if(n, x, out):
  t = 0
  for k in range(n[0]):
    for j in range(2):
      if k > j:
        t += 0.5
  out[...] = x[...] * t


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_from_a_read(n, x, out):
  t = 0
  for k in range(n[0]):
    t = n[0] * 2
    for j in range(2):
      t += 0.5
  out[...] = x[...] * t


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def count_halves_nested_fixed(n, x, out):
  t = 0.0
  for k in range(n[0]):
    for j in range(2):
      if k > j:
        t += 0.5
  out[...] = x[...] * t


def test_a_loop_carry_started_as_a_python_int_made_a_float_hints_the_float_start():
  """Under a run-time if, or in an inner loop, the hint was `t = 0` or `t = t.astype(jnp.int32)`:
  converting back truncates every 0.5 the user adds. It now names the start, in the loop it
  belongs to."""
  line = count_halves_nested.fn.__code__.co_firstlineno
  line2 = count_halves_nested_if.fn.__code__.co_firstlineno
  expect(count_halves_in_if, [N, X], mg.LoopCarryTypeError, "t += 0.5",
         "t enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint="start it as a float before the loop: t = 0.0 (a Python int starts an int32 carry)")
  expect(count_halves_in_while, [N, X], mg.LoopCarryTypeError, "t += 0.5",
         "t enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint="start it as a float before the loop: t = 0.0 (a Python int starts an int32 carry)")
  expect(count_halves_nested, [N, X], mg.LoopCarryTypeError, "t += 0.5",
         "t enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint=f"start it as a float before the loop at line {line + 3}: t = 0.0 (a Python int starts an int32 carry)")
  expect(count_halves_nested_if, [N, X], mg.LoopCarryTypeError, "t += 0.5",
         "t enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint=f"start it as a float before the loop at line {line2 + 3}: t = 0.0 (a Python int starts an int32"
              " carry)")
  expect(count_from_a_read, [N, X], mg.LoopCarryTypeError, "t += 0.5",
         "t enters the loop as an int32 scalar but an iteration makes it a float32 scalar",
         hint="convert the integer to a float before the loop: t = t.astype(jnp.float32)")
  builds(count_halves_nested_fixed, N, X)
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(count_halves_nested_fixed(jnp.array([3], I32), x, interpret=True), x * 1.5)


# ---------------------------------------------------------------- loop bounds and ml.cdiv named as written
@mg.mgpu_kernel(out_shape=lambda n, x: x)
def mixed_bounds(n, x, out):
  acc = x[...]
  for t in range(n[0] + 1, n[1].astype(jnp.uint32) * 2):
    acc = acc + 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def mixed_bounds_fixed(n, x, out):
  acc = x[...]
  for t in range(n[0] + 1, (n[1].astype(jnp.uint32) * 2).astype(jnp.int32)):
    acc = acc + 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def float_stop(n, x, out):
  acc = x[...]
  for t in range(1, n[0] * 0.5):
    acc = acc + 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def cdiv_of_a_float_expression(n, x, out):
  i = ml.program_id(0)
  out[...] = x[...] + ml.cdiv(i * 1.0, 2)


def test_loop_bound_and_cdiv_hints_name_the_expressions_the_user_wrote():
  """The hints named `n.astype(jnp.int32)` and `i.astype(jnp.uint32)` (the bounds were
  `n[1].astype(jnp.uint32) * 2` and `n[0] + 1`), `range(n.astype(...))` for a two-argument range,
  and `n.astype(jnp.int32)` for ml.cdiv of `i * 1.0` (the message said 'a value')."""
  expect(mixed_bounds, [S((2,), I32), X], mg.KernelTypeError, "range(n[0] + 1",
         "this loop's run-time bounds are uint32 and int32: a loop counts in one integer type",
         hint="convert the bounds to one type: (n[1].astype(jnp.uint32) * 2).astype(jnp.int32) (values below"
              " 2**31), or make every bound uint32 ((n[0] + 1).astype(jnp.uint32), of values of at least 0)")
  builds(mixed_bounds_fixed, S((2,), I32), X)
  expect(float_stop, [N, X], mg.KernelTypeError, "range(1, n[0] * 0.5)",
         "a loop bound must be an integer scalar, got n[0] * 0.5 (float32)",
         hint="convert it: (n[0] * 0.5).astype(jnp.int32)")
  expect(cdiv_of_a_float_expression, [N, X], mg.KernelTypeError, "ml.cdiv(i * 1.0, 2)",
         "ml.cdiv needs integers, got i * 1.0 (float32)",
         hint="convert it: (i * 1.0).astype(jnp.int32); or, for a float result, ml.ceil(a / b) of floats")
  x = jnp.zeros((128,), F32)
  np.testing.assert_allclose(mixed_bounds_fixed(jnp.array([1, 3], I32), x, interpret=True), x + 4)


# ---------------------------------------------------------------- functools.partial of a helper
@ml.inline
def affine(v, s, b=0.0):
  return v * s + b


halve = functools.partial(affine, s=0.5)
halve_plus_one = functools.partial(functools.partial(affine, b=1.0), s=0.5)
row_sums = functools.partial(ml.sum, axis=1)
misspelt = functools.partial(affine, q=1.0)


@mg.mgpu_kernel(out_shape=lambda n, x: S((x.shape[0],), F32))
def partial_helpers_in_a_loop(n, x, out):
  v = x[...]
  for t in range(n[0]):
    v = halve_plus_one(halve(v))
  out[...] = row_sums(v)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def partial_as_constexpr(x, out, *, act: ml.constexpr = None):
  out[...] = ml.sum(act(x[...]), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def partial_with_a_wrong_keyword(x, out):
  out[...] = ml.sum(misspelt(x[...]), axis=1)


def test_a_functools_partial_of_an_inline_helper_or_ml_function_is_called_as_python_calls_it():
  """It was MG003 'functools.partial(<mgpu_dsl inline function affine>, s=0.5) cannot take a register
  tensor', hinting to decorate the (decorated) helper with @ml.inline."""
  x = jnp.linspace(-2, 2, 512, dtype=F32).reshape(4, 128)
  v = np.asarray(x)
  for _ in range(3):
    v = (v * 0.5) * 0.5 + 1.0
  got = partial_helpers_in_a_loop(jnp.array([3], I32), x, interpret=True)
  np.testing.assert_allclose(got, v.sum(1), rtol=1e-5)
  builds(partial_helpers_in_a_loop, N, S((4, 128), F32))
  np.testing.assert_allclose(partial_as_constexpr(x, act=halve, interpret=True), np.asarray(x).sum(1) * 0.5,
                             rtol=1e-5, atol=1e-5)
  expect(partial_with_a_wrong_keyword, [S((4, 128), F32)], mg.KernelTypeError, "misspelt(x[...])",
         "affine(...): got an unexpected keyword argument 'q'", hint="affine(v, s, b=0.0)")


# ---------------------------------------------------------------- the := operator
@mg.mgpu_kernel(out_shape=lambda n, x: x)
def walrus_in_if_and_loop(n, x, out):
  acc = x[...]
  for t in range(k := n[0]):
    if (s := ml.sum(acc)) > 0.0:
      acc = acc - s / 128.0
  out[...] = acc + k.astype(F32)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def walrus_in_a_static_while(n, x, out):
  r = 64
  acc = x[...]
  while (r := r // 2) > 4:
    acc = acc + 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def walrus_in_a_runtime_while(n, x, out):
  i = 0
  acc = x[...]
  while (k := n[i]) > 2:
    acc = acc + k.astype(F32)
    i += 1
  out[...] = acc


def test_the_walrus_operator_binds_its_name_as_an_assignment_does():
  """`if (m := n[0]) > 2:` was MG001 'the := operator is not supported'."""
  x = jnp.linspace(-1, 3, 128, dtype=F32)
  a = np.asarray(x)
  for _ in range(3):
    if (s := a.sum()) > 0:
      a = a - s / 128
  np.testing.assert_allclose(walrus_in_if_and_loop(jnp.array([3], I32), x, interpret=True), a + 3, rtol=1e-4,
                             atol=1e-4)
  builds(walrus_in_if_and_loop, N, X)
  np.testing.assert_allclose(walrus_in_a_static_while(jnp.array([3], I32), x, interpret=True), x + 3)
  # a run-time while whose condition binds k (was MG001): evaluated before the loop and at the end of
  # each trip, so the body sees it as Python's does (frontend/jumps.py)
  np.testing.assert_array_equal(walrus_in_a_runtime_while(jnp.array([5, 4, 1, 9], I32), x, interpret=True), x + 5 + 4)


# ---------------------------------------------------------------- int32 index arithmetic that wraps
BIG = S((2 ** 31 - 1,), jnp.int8)      # the longest dimension a kernel may index


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def tile_end_wraps(x, out):
  i = ml.program_id(0)
  end = ml.minimum((i + 1) * 1024, x.shape[0])
  idx = i * 1024 + ml.arange(1024)
  v = x.at[ml.ds(i * 1024, 1024)].load(mask=idx < end, other=0)
  out.at[ml.ds(i * 1024, 1024)].store(v, mask=idx < end)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 1024),))
def tile_offsets_compared(x, out):
  i = ml.program_id(0)
  idx = i * 1024 + ml.arange(1024)
  v = x.at[ml.ds(i * 1024, 1024)].load(mask=idx < x.shape[0], other=0)
  out.at[ml.ds(i * 1024, 1024)].store(v, mask=idx < x.shape[0])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def start_wraps(x, out):
  i = ml.program_id(0)
  j = (i * 2 ** 30) // 2 ** 30
  out.at[ml.ds(j * 128, 128)][...] = x.at[ml.ds(j * 128, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 128,), I32), grid=lambda x: (x.shape[0] // 128,))
def hash_stored(x, out):
  i = ml.program_id(0)
  out[i] = i * 1103515245 + 12345      # wraps, as an int32 hash does: data, not an index


def test_int32_index_arithmetic_that_wraps_is_reported_at_the_arithmetic():
  """`(i + 1) * 1024` wraps negative in the last program of an array of 2**31 - 1 elements, so
  the mask keeps nothing and the last 1023 elements of out stay uninitialised on the GPU: check
  and the CUDA export accepted it (the mask, 2**31 elements over the grid, is too large for the
  compile-time coverage proof, and interpret mode cannot run such sizes)."""
  expect(tile_end_wraps, [BIG], mg.KernelTypeError, "(i + 1) * 1024",
         "(i + 1) * 1024 overflows int32 in program (2097151, 0, 0): it is 2147483648 there, past int32's"
         " 2147483647, so the GPU wraps it to -2147483648, and the mask at line"
         f" {tile_end_wraps.fn.__code__.co_firstlineno + 5} uses it",
         hint="rearrange it so that no intermediate value passes 2**31 - 1 (for a tile's end, ml.minimum((i + 1)"
              " * t, n), compare the offsets instead: i * t + ml.arange(t) < n), or compute in uint32"
              " (.astype(jnp.uint32), for values below 2**32)")
  builds(tile_offsets_compared, BIG)       # the hint followed
  expect(start_wraps, [S((512,), F32)], mg.KernelTypeError, "i * 2 ** 30",
         "i * 2 ** 30 overflows int32 in program (2, 0, 0): it is 2147483648 there, past int32's 2147483647, so"
         f" the GPU wraps it to -2147483648, and the window at line {start_wraps.fn.__code__.co_firstlineno + 4}"
         " uses it")
  builds(hash_stored, S((512,), F32))
  got = np.asarray(hash_stored(jnp.zeros(512, F32), interpret=True))
  want = (np.arange(4, dtype=np.int64) * 1103515245 + 12345 + 2 ** 31) % 2 ** 32 - 2 ** 31
  np.testing.assert_array_equal(got, want.astype(np.int32))


# ---------------------------------------------------------------- hints for ifs and whiles, followed
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def tensor_or_zero(x, out):
  i = ml.program_id(0)
  if i % 2 == 0:
    v = x.at[ml.ds(i * 128, 128)][...]
  else:
    v = 0.0
  out.at[ml.ds(i * 128, 128)][...] = v


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def tensor_or_zero_fixed(x, out):
  i = ml.program_id(0)
  if i % 2 == 0:
    v = x.at[ml.ds(i * 128, 128)][...]
  else:
    v = ml.full((128,), 0.0, jnp.float32)
  out.at[ml.ds(i * 128, 128)][...] = v


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def while_true_break(n, x, out):
  v = x[...]
  i = 0
  while True:
    if i >= n[0]:
      break
    v = v + 1.0
    i += 1
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def while_true_break_fixed(n, x, out):
  v = x[...]
  i = 0
  found = 0
  while found == 0:
    found = ml.where(i >= n[0], 1, found)
    if found == 0:
      v = v + 1.0
      i += 1
  out[...] = v


def test_if_and_while_hints_name_code_that_works():
  """A tensor in one branch and a number in the other was hinted 'make both branches produce the
  same shape and dtype'; `while True:` with a run-time break was hinted `while (True) & (found == 0):`."""
  expect(tensor_or_zero, [S((512,), F32)], mg.KernelTypeError, "if i % 2 == 0:",
         "v is a float32 tensor of shape (128,) after one branch of this if and a float32 scalar after the other",
         hint="make it a tensor in its branch: v = ml.full((128,), 0.0, jnp.float32)")
  x = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(tensor_or_zero_fixed(x, interpret=True),
                                np.where(np.arange(512) // 128 % 2 == 0, np.arange(512), 0))
  # `while True:` with a run-time break now runs (frontend/jumps.py), as the hinted form does
  np.testing.assert_array_equal(while_true_break(jnp.array([3], I32), x[:128], interpret=True), x[:128] + 3)
  np.testing.assert_array_equal(while_true_break_fixed(jnp.array([3], I32), x[:128], interpret=True), x[:128] + 3)
  builds(while_true_break_fixed, N, X)


# ---------------------------------------------------------------- for ... else, while ... else
@mg.mgpu_kernel(out_shape=lambda n, x: x)
def loops_with_else(n, x, out):
  acc = x[...]
  for i in ml.static_range(2):
    for j in range(n[0]):
      acc = acc + 1.0
    else:
      acc = acc - 1.0
  else:
    k = 0
    while k < n[0]:
      k += 1
    else:
      last = acc * 2.0 + k.astype(F32)
  out[...] = last


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def for_else_with_a_break(n, x, out):
  acc = x[...]
  for i in ml.static_range(4):
    if i == 2:
      break
    acc = acc + 1.0
  else:
    acc = acc * 2.0
  out[...] = acc


def test_for_and_while_else_run_their_else_when_no_break_can_end_the_loop():
  """Both were MG001 'for ... else is not supported', with a hint listing what kernels support."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_array_equal(loops_with_else(jnp.array([3], I32), x, interpret=True), (x + 4) * 2 + 3)
  builds(loops_with_else, N, X)
  # with a break (was MG001): the else runs where no break ended the loop (frontend/jumps.py)
  np.testing.assert_array_equal(for_else_with_a_break(jnp.array([3], I32), x, interpret=True), x + 2)


# ---------------------------------------------------------------- a if c else b on a run-time c
@mg.mgpu_kernel(out_shape=lambda n, x: X)
def choose_a_ref(n, x, out):
  r = x.at[ml.ds(0, 128)] if n[0] > 2 else x.at[ml.ds(128, 128)]
  out[...] = r[...]


@mg.mgpu_kernel(out_shape=lambda n, x: X)
def choose_a_pair(n, x, out):
  a, b = (1.0, 2.0) if n[0] > 2 else (3.0, 4.0)
  out[...] = x.at[ml.ds(0, 128)][...] * a + b


@mg.mgpu_kernel(out_shape=lambda n, x: X)
def guarded_read(n, x, out):
  s = x[n[0]] if n[0] < x.shape[0] else 0.0
  out[...] = x.at[ml.ds(0, 128)][...] * s


@mg.mgpu_kernel(out_shape=lambda n, x: X)
def guarded_read_fixed(n, x, out):
  if n[0] < x.shape[0]:
    s = x[n[0]]
  else:
    s = 0.0
  out[...] = x.at[ml.ds(0, 128)][...] * s


def test_a_runtime_conditional_expression_of_refs_is_hinted_as_an_if_statement():
  """The hint was ml.where(c, a, b) for all three: ml.where cannot take refs or tuples, and of a
  read the condition guards (x[n[0]] past x's end) it reads on both paths. Since probe 44e tuples and reads
  run, as the if statement the hint wrote (the read only on its path)."""
  expect(choose_a_ref, [N, S((512,), F32)], mg.UnsupportedSyntaxError, "x.at[ml.ds(0, 128)] if",
         "a conditional expression on a runtime value is not supported in a kernel",
         hint="a ref cannot be chosen at run time: read (or write) it in each branch of an if statement, if n[0] > 2:"
              " r = x.at[ml.ds(0, 128)][...], and else: r = x.at[ml.ds(128, 128)][...]")
  x = jnp.arange(512, dtype=F32)
  for k in (1, 3):
    np.testing.assert_array_equal(choose_a_pair(jnp.array([k], I32), x, interpret=True),
                                  x[:128] * (1.0 if k > 2 else 3.0) + (2.0 if k > 2 else 4.0))
  for k in (600, 3):
    np.testing.assert_array_equal(guarded_read(jnp.array([k], I32), x, interpret=True),
                                  guarded_read_fixed(jnp.array([k], I32), x, interpret=True))
  np.testing.assert_array_equal(guarded_read_fixed(jnp.array([600], I32), x, interpret=True), x[:128] * 0)
  np.testing.assert_array_equal(guarded_read_fixed(jnp.array([3], I32), x, interpret=True), x[:128] * 3)


# ---------------------------------------------------------------- a loop variable bound before its loop
@mg.mgpu_kernel(out_shape=lambda n, x: x)
def index_after_the_loop(n, x, out):
  i = 100
  for i in range(n[0]):
    pass
  j = n[1]
  for j in range(n[1], n[0], 3):
    pass
  out[...] = x[...] * 0.0 + (i * 1000 + j).astype(F32)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def index_after_a_static_range(n, x, out):
  i = 100
  for i in range(4):
    pass
  k = n[0]
  for k in range(2, 9, 3):
    pass
  out[...] = x[...] * 0.0 + (i * 100 + k).astype(F32)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def float_before_the_loop(n, x, out):
  i = 0.5
  for i in range(n[0]):
    pass
  out[...] = x[...] * i


def test_a_loop_variable_bound_before_its_runtime_loop_is_python_s_after_it():
  """`i = 100; for i in range(n): ...` then `i` was MG004 'possibly unbound' although Python binds it
  (the last index, or 100 where the loop ran no trip)."""
  x = jnp.zeros((128,), F32)
  for n, want in (((8, 1), 7 * 1000 + 7), ((0, 1), 100 * 1000 + 1), ((3, 5), 2 * 1000 + 5)):
    np.testing.assert_array_equal(index_after_the_loop(jnp.array(n, I32), x, interpret=True), np.full(128, want))
  builds(index_after_the_loop, S((2,), I32), X)
  np.testing.assert_array_equal(index_after_a_static_range(jnp.array([5], I32), x, interpret=True), np.full(128, 308))
  expect(float_before_the_loop, [N, X], mg.UnboundNameError, "i\n",
         "i is possibly unbound here: i is the loop variable of the loop at line"
         f" {float_before_the_loop.fn.__code__.co_firstlineno + 3}, which is not defined after a runtime loop (it may"
         " run no trips)")
