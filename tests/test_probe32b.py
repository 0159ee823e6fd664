"""Probe 32b (a regression hunt on break/continue, loop-else, walrus whiles, bool relayouts, flat
argmax, 64-bit narrowing, interpret errors under jit, partial kernels and autotune pickling,
combined with vmap/jit, nested and pipelined loops)."""
import functools
import pickle

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


# ---------------------------------------------------------------- jax.vmap of NumPy 64-bit arrays
@mg.mgpu_kernel(out_shape=lambda x: x)
def plus_one(x, out):
  out[...] = x[...] + 1


def test_vmap_over_numpy_int64_and_float64_arrays_takes_them_as_jax_does():
  """An eager call took np.arange(128) (int64 values that fit int32) as JAX takes it; under
  jax.vmap the custom_vmap rule saw the NumPy array itself and refused it as an int64 *spec*
  (MG006 'give the spec as jnp.int32'), where jnp's own vmap computes."""
  a = np.arange(256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  assert got.dtype == jnp.int32
  np.testing.assert_array_equal(got, a + 1)
  f = np.linspace(0.0, 1.0, 256).reshape(2, 128)
  got = jax.vmap(lambda v: plus_one(v, interpret=True))(f)
  assert got.dtype == jnp.float32
  np.testing.assert_allclose(got, (f + 1).astype(np.float32))


def test_vmap_over_numpy_int64_values_int32_cannot_hold_is_refused_as_an_eager_call_is():
  a = np.arange(256).reshape(2, 128) * 2 ** 40
  with pytest.raises(mg.SignatureError) as info:
    jax.vmap(lambda v: plus_one(v, interpret=True))(a)
  e = info.value
  assert e.message.startswith("plus_one: input 0 (x) is a NumPy int64 array holding ")
  assert "which int32 cannot hold" in e.message
  assert e.hint.endswith("else pass values int32 holds")


@pytest.mark.gpu
def test_gpu_vmap_over_numpy_int64_matches_interpret_mode():
  a = np.arange(256).reshape(2, 128)
  np.testing.assert_array_equal(jax.vmap(plus_one)(a), jax.vmap(lambda v: plus_one(v, interpret=True))(a))


# ---------------------------------------------------------------- pickling kernels bound under another name
def _scale_rows(x, out, *, scale: ml.constexpr = 1.0, bn: ml.constexpr = 128):
  i = ml.program_id(0)
  out.at[ml.ds(i * bn, bn)][...] = x.at[ml.ds(i * bn, bn)][...] * scale


def _rows_grid(x, bn=128, **kw):
  return (x.shape[0] // bn,)


partial_kernel = mg.mgpu_kernel(functools.partial(_scale_rows, scale=2.0), out_shape=lambda x, **kw: x,
                                grid=_rows_grid)
called_kernel = mg.mgpu_kernel(out_shape=lambda x, **kw: x, grid=_rows_grid)(_scale_rows)
tuned_partial = mg.autotune(configs=[dict(bn=128), dict(bn=256)])(
    mg.mgpu_kernel(functools.partial(_scale_rows, scale=3.0), out_shape=lambda x, **kw: x, grid=_rows_grid))


def test_a_kernel_bound_at_top_level_under_another_name_pickles_by_that_name():
  """A kernel made by calling mg.mgpu_kernel (on a functools.partial, as Pallas kernels are passed,
  or on a plain function) and an autotuned one of it, bound at a module's top level, raised
  PicklingError ("<module>._scale_rows is not this kernel": the name of the function it wraps)."""
  for k in (partial_kernel, called_kernel, tuned_partial, tuned_partial.kernel):
    assert pickle.loads(pickle.dumps(k)) is k
  x = jnp.arange(512, dtype=F32)
  np.testing.assert_array_equal(pickle.loads(pickle.dumps(partial_kernel))(x, interpret=True), np.asarray(x) * 2)
  np.testing.assert_array_equal(pickle.loads(pickle.dumps(tuned_partial))(x, interpret=True), np.asarray(x) * 3)


# ---------------------------------------------------------------- an inner loop's else holding a jump
@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32))
def first_above_two(x, out):
  fi = -1
  fj = -1
  for i in range(x.shape[0]):
    for j in range(x.shape[1]):
      if x[i, j] > 2.0:
        fi = i
        fj = j
        break
    else:
      continue          # the inner loop ran out: next row
    break               # it broke: so does the outer one
  out[0] = fi
  out[1] = fj


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def rows_without_a_peak(x, out):
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      c += 1
      continue
    c += 100 * j
  out[...] = c


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def columns_until_a_clean_row(x, out):
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      break             # a row without a peak ends the outer loop
    c += j
  out[...] = c


def _reference(kind, x):
  fi = fj = -1
  c = 0
  for i in range(x.shape[0]):
    j = 0
    while j < x.shape[1]:
      if x[i, j] > 2.0:
        break
      j += 1
    else:
      if kind == "first":
        continue
      if kind == "count":
        c += 1
        continue
      break
    if kind == "first":
      fi, fj = i, j
      break
    c += 100 * j if kind == "count" else j
  return np.array([fi, fj], np.int32) if kind == "first" else c


def test_an_inner_loops_else_may_continue_or_break_the_outer_loop():
  """`for j ...: if c: break` then `else: continue` and `break` (the idiom that leaves two loops) was
  MG001 "continue is not supported in a kernel"; with an inner while, `else: break` was MG001 "break
  in a pipelined loop or one with a run-time step" (it was neither)."""
  rng = np.random.default_rng(0)
  for seed in range(3):
    x = rng.standard_normal((16, 16)).astype(np.float32) * (0.8 + 0.4 * seed)
    np.testing.assert_array_equal(first_above_two(jnp.asarray(x), interpret=True), _reference("first", x))
    assert int(rows_without_a_peak(jnp.asarray(x), interpret=True)) == _reference("count", x)
    assert int(columns_until_a_clean_row(jnp.asarray(x), interpret=True)) == _reference("clean", x)
  x = np.zeros((16, 16), np.float32)
  np.testing.assert_array_equal(first_above_two(jnp.asarray(x), interpret=True), [-1, -1])
  for k in (first_above_two, rows_without_a_peak, columns_until_a_clean_row):
    k.check(S((16, 16), F32))


@pytest.mark.gpu
def test_gpu_an_inner_loops_else_jumping_matches_interpret_mode():
  x = jnp.asarray(np.random.default_rng(1).standard_normal((16, 16)).astype(np.float32))
  for k in (first_above_two, rows_without_a_peak, columns_until_a_clean_row):
    np.testing.assert_array_equal(k(x), k(x, interpret=True))


# ---------------------------------------------------------------- early returns under run-time conditions
@mg.mgpu_kernel(out_shape=lambda x, n: x, grid=(4,))
def programs_past_n_return(x, n, out):
  pid = ml.program_id(0)
  if pid >= n[0]:
    return
  for t in range(pid, x.shape[0], ml.num_programs(0)):
    out.at[t][...] = x.at[t][...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: S((3,), I32))
def first_peak_returns(x, out):
  out[0] = -1
  out[1] = -1
  out[2] = 0
  for i in range(x.shape[0]):
    for j in range(x.shape[1]):
      if x[i, j] > 2.0:
        out[0] = i
        out[1] = j
        return              # leaves both loops and skips the rest of the kernel
  out[2] = 1


def _first_peak(x):
  for i in range(x.shape[0]):
    for j in range(x.shape[1]):
      if x[i, j] > 2.0:
        return [i, j, 0]
  return [-1, -1, 1]


@ml.inline
def _doubled_if_positive(v, t):
  if t > 0:
    return v * 2.0
  return -v


@mg.mgpu_kernel(out_shape=lambda x: x)
def returns_in_a_helper(x, out):
  out[...] = _doubled_if_positive(x[...], x[0])


def test_a_return_under_a_runtime_if_or_in_a_runtime_loop_ends_the_kernel():
  """Both were MG001 ("return under a run-time condition" / "return inside a runtime loop")."""
  x = jnp.asarray(np.random.default_rng(2).standard_normal((8, 128)).astype(np.float32))
  np.testing.assert_array_equal(programs_past_n_return(x, jnp.array([4], I32), interpret=True), np.asarray(x) + 1)
  with pytest.raises(mg.UncoveredOutputError):      # programs 2 and 3 returned: their rows are unwritten
    programs_past_n_return(x, jnp.array([2], I32), interpret=True)
  rng = np.random.default_rng(3)
  for scale in (0.5, 1.0, 1.5):
    m = (rng.standard_normal((16, 16)) * scale).astype(np.float32)
    np.testing.assert_array_equal(first_peak_returns(jnp.asarray(m), interpret=True), _first_peak(m))
  programs_past_n_return.check(S((8, 128), F32), S((1,), I32))
  first_peak_returns.check(S((16, 16), F32))


def test_an_inline_helper_returns_under_a_runtime_if_on_every_path():
  for first in (3.0, -3.0):
    x = np.arange(128, dtype=np.float32)
    x[0] = first
    want = x * 2 if first > 0 else -x
    np.testing.assert_array_equal(returns_in_a_helper(jnp.asarray(x), interpret=True), want)
  returns_in_a_helper.check(S((128,), F32))


@ml.inline
def _zero_or_doubled(v, t):
  if t > 0:
    return v * 2.0
  return 0.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def helper_returns_a_number_on_one_path(x, out):
  out[...] = _zero_or_doubled(x[...], x[0])


@ml.inline
def _doubled_or_nothing(v, t):
  if t > 0:
    return v * 2.0


@mg.mgpu_kernel(out_shape=lambda x: x)
def helper_path_without_return(x, out):
  out[...] = _doubled_or_nothing(x[...], x[0])


@ml.inline
def _first_positive(x):
  for i in range(x.shape[0]):
    if x[i] > 0.0:
      return i
  return -1


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def helper_returns_in_a_loop(x, out):
  out[...] = _first_positive(x)


@mg.mgpu_kernel(out_shape=lambda x: x)
def returns_in_a_pipelined_loop(x, out):
  buf = ml.smem((128,), F32)
  for t in ml.range(x.shape[0], stages=2):
    ml.copy(x.at[t], buf)
    if x[t, 0] > 0:
      return
    out.at[t][...] = buf[...]


def _expect_in_helper(kernel, helper, cls, text, message, hint):
  with pytest.raises(cls) as info:
    kernel.check(S((128,), F32))
  e = info.value
  assert (e.lineno, e.col_offset) == where(helper, text), e.render()
  assert e.message == message
  assert e.hint == hint
  return e


def test_a_helpers_returns_that_cannot_give_one_value_say_so_in_its_words():
  e = _expect_in_helper(
      helper_returns_a_number_on_one_path, _zero_or_doubled, mg.KernelTypeError, "if t > 0:",
      "the value _zero_or_doubled returns is a float32 tensor of shape (128,) after one branch of this if and a"
      " float32 scalar after the other", "make it a tensor in its branch: return ml.full((128,), 0.0, jnp.float32)")
  assert any(n.endswith("_zero_or_doubled returns here") for n in e.notes)
  _expect_in_helper(
      helper_path_without_return, _doubled_or_nothing, mg.UnsupportedSyntaxError, "return v * 2.0",
      "return under a run-time condition in an @ml.inline helper that has a path without a return is not"
      " supported in a kernel",
      "end every path with a return (return a value after the if, or in its else:), so that each path gives the"
      " value the call takes")
  for shift in (0.0, -200.0, -300.0):     # probe 38g: a return in a helper's loop ends it (was MG001)
    x = np.arange(128, dtype=np.float32) + shift
    want = int(np.argmax(x > 0)) if (x > 0).any() else -1
    assert int(helper_returns_in_a_loop(jnp.asarray(x), interpret=True)) == want
  expect(returns_in_a_pipelined_loop, [S((4, 128), F32)], mg.UnsupportedSyntaxError, "return", nth=1,
         message="return in a pipelined loop or one with a run-time step is not supported in a kernel",
         hint="such a loop runs every trip: set a flag (done = True) and guard the rest of the body and what"
              " follows the loop with if statements on it, or drop stages= (or make the step static) for a loop a"
              " return ends")


@pytest.mark.gpu
def test_gpu_early_returns_match_interpret_mode():
  x = jnp.asarray(np.random.default_rng(4).standard_normal((8, 128)).astype(np.float32))
  n = jnp.array([4], I32)
  np.testing.assert_array_equal(programs_past_n_return(x, n), programs_past_n_return(x, n, interpret=True))
  m = jnp.asarray(np.random.default_rng(5).standard_normal((16, 16)).astype(np.float32))
  np.testing.assert_array_equal(first_peak_returns(m), first_peak_returns(m, interpret=True))
  v = jnp.arange(128, dtype=F32) - 3.0
  np.testing.assert_array_equal(returns_in_a_helper(v), returns_in_a_helper(v, interpret=True))
  m = jnp.asarray(np.random.default_rng(6).standard_normal((4, 16)).astype(np.float32) * 1.5)
  np.testing.assert_array_equal(first_peak_of_four_rows(m), first_peak_of_four_rows(m, interpret=True))


@mg.mgpu_kernel(out_shape=lambda n: S((2,), I32))
def returns_from_an_unrolled_loop(n, out):
  i = 0
  out[0] = -1
  while (k := n[i]) != 0:
    for j in ml.static_range(3):
      if k == j + 10:
        out[0] = i
        out[1] = j
        return
    i += 1
  out[1] = i


@mg.mgpu_kernel(out_shape=lambda n: S((2,), I32))
def returns_from_a_runtime_inner_loop(n, out):
  i = 0
  out[0] = -1
  while (k := n[i]) != 0:
    for j in range(3):               # the hint followed
      if k == j + 10:
        out[0] = i
        out[1] = j
        return
    i += 1
  out[1] = i


def test_a_return_in_an_unrolled_loop_under_a_runtime_condition_skips_the_later_trips():
  """The return, made a break of the loops around it, was MG001 'break under a run-time condition' in the
  unrolled loop; there it is a continue, and each later trip skips its body."""
  for n, want in (([1, 2, 11, 3, 0, 5], [2, 1]), ([1, 2, 3, 0, 11, 5], [-1, 3])):
    for k in (returns_from_an_unrolled_loop, returns_from_a_runtime_inner_loop):
      np.testing.assert_array_equal(k(jnp.array(n, I32), interpret=True), want)
  returns_from_an_unrolled_loop.check(S((6,), I32))


@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32))
def first_peak_of_four_rows(x, out):
  out[0] = -1
  out[1] = -1
  for r in ml.static_range(4):
    for j in range(x.shape[1]):
      if x[r, j] > 2.0:
        out[0] = r
        out[1] = j
        return


def test_a_return_in_a_runtime_loop_inside_an_unrolled_one_ends_both():
  """It was MG001 'break under a run-time condition' at the inner for, a break the user did not write."""
  rng = np.random.default_rng(7)
  for scale in (0.5, 1.2, 3.0):
    x = (rng.standard_normal((4, 16)) * scale).astype(np.float32)
    hits = [(r, j) for r in range(4) for j in range(16) if x[r, j] > 2.0]
    np.testing.assert_array_equal(first_peak_of_four_rows(jnp.asarray(x), interpret=True),
                                  hits[0] if hits else [-1, -1])
  first_peak_of_four_rows.check(S((4, 16), F32))


# ---------------------------------------------------------------- MG204 hint of a bool reduction's vector
@mg.mgpu_kernel(out_shape=lambda m: S((64,), jnp.bool_))
def any_rows_meet_all_columns(m, o):
  v = m[...]
  o[...] = ml.any(v.T, axis=1) ^ ml.all(v, axis=0)


@mg.mgpu_kernel(out_shape=lambda m: S((64,), jnp.bool_))
def any_rows_meet_all_columns_through_smem(m, o):      # the hint followed
  v = m[...]
  tmp = ml.smem((64,), jnp.bool); tmp[...] = ml.any(v.T, axis=1)
  o[...] = tmp[...] ^ ml.all(v, axis=0)


def test_the_smem_vector_hint_of_a_bool_reduction_allocates_bool():
  """It said ml.smem((64,), jnp.int32) (the dtype of the reduction's int32 step), and storing the bool
  vector there was MG102."""
  m = np.random.default_rng(6).random((64, 64)) > 0.5
  # the compiler now copies the reduction's vector through SMEM itself (probe 33c; it was MG204)
  np.testing.assert_array_equal(any_rows_meet_all_columns(jnp.asarray(m), interpret=True), m.T.any(1) ^ m.all(0))
  np.testing.assert_array_equal(any_rows_meet_all_columns_through_smem(jnp.asarray(m), interpret=True),
                                m.T.any(1) ^ m.all(0))


# ---------------------------------------------------------------- an atomic's result used in an expression
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0], 128), F32), S((1,), I32)), grid=(3,))
def work_queue(x, out, counter):
  while (t := ml.atomic_add(counter.at[0], 1)) < x.shape[0]:     # Triton's old value
    out.at[t][...] = x.at[t][...]


@mg.mgpu_kernel(out_shape=lambda x: (x, S((1,), I32)), grid=(3,))
def offset_by_ticket(x, out, counter):
  out[...] = x[...] + ml.atomic_add(counter.at[0], 1)


def test_an_atomics_old_value_used_in_an_expression():
  """A name bound to it said so at its use (MG004); used directly it was "cannot compute ...: '<' not
  supported between instances of 'NoneType' and 'int'" (hint: static values compute as in Python) or
  "+ cannot take a Python NoneType". Since probe 48c it is the old value: a work queue runs, and every program
  writing the whole output after its ticket is a race."""
  x = np.random.default_rng(3).standard_normal((7, 128)).astype(np.float32)
  out, counter = work_queue(x, interpret=True)
  np.testing.assert_array_equal(out, x)
  assert int(counter[0]) == 7 + 3          # each program's last ticket finds the queue empty
  with pytest.raises(mg.RaceError, match="both access out"):
    offset_by_ticket(np.zeros(128, np.float32), interpret=True)


# ---------------------------------------------------------------- a loop's else in messages
@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32))
def else_makes_a_number(x, out):
  acc = ml.zeros((128,), F32)
  for i in range(x.shape[0]):
    acc = acc + x.at[i][...]
    if x[i, 0] > 0.0:
      break
  else:
    acc = 1.0
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def bound_only_in_the_else(x, out):
  for i in range(x.shape[0]):
    if x[i, 0] > 0.0:
      break
  else:
    found = 1
  out[...] = found


def test_a_loops_else_is_named_as_such_not_as_an_if():
  """Both said "the if at line N" of the else's first line, where the user wrote no if."""
  loop = where(else_makes_a_number, "for i in")[0]
  e = expect(else_makes_a_number, [S((4, 128), F32)], mg.KernelTypeError, "acc = 1.0",
             f"acc is a float32 scalar after this assignment but a float32 tensor of shape (128,) on the other path"
             f" through the else of the loop at line {loop}, which a break skips",
             hint="make it a tensor here: acc = ml.full((128,), 1.0, jnp.float32)")
  assert any(n.endswith(f"the else of the loop at line {loop}, which a break skips; its paths give acc different"
                        f" types") for n in e.notes)
  loop = where(bound_only_in_the_else, "for i in")[0]
  expect(bound_only_in_the_else, [S((4, 128), F32)], mg.UnboundNameError, "found\n",
         f"found is possibly unbound here: it is assigned only in the else of the loop at line {loop}, which a"
         f" break skips")


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def float_condition_with_a_break(x, out):
  k = 0
  while x[k] + 1.5:
    k += 1
    if k > 5:
      break
  out[...] = k


def test_a_while_with_a_break_takes_its_conditions_truth():
  """The hint quoted the flag the break rewrite adds: 'compare it: while loop at line 4 != 0:'; since probe
  39a a number condition is its truth (non-zero), with a break too."""
  for vals, want in (([1.0, 2.0, -1.5], 2), ([1.0] * 8, 6)):
    x = jnp.zeros((128,), F32).at[:len(vals)].set(jnp.asarray(vals, F32))
    assert int(float_condition_with_a_break(x, interpret=True)) == want


@mg.mgpu_kernel(out_shape=lambda x: S((2,), I32))
def returns_in_a_loop_and_its_else(x, out):
  out[1] = 0
  for i in range(x.shape[0]):
    if x[i] > 0:
      out[0] = i
      return              # skips the else and the rest
  else:
    out[0] = -1
    if x[0] < -5:
      return
  out[1] = 7


def _loop_and_else(x):
  for i in range(len(x)):
    if x[i] > 0:
      return [i, 0]
  return [-1, 0] if x[0] < -5 else [-1, 7]


@ml.inline
def _store_unless_negative(out, v, t):
  if t < 0:
    return                # a helper that returns nothing may end early too
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def stores_through_a_helper(x, out):
  out[...] = x[...]
  _store_unless_negative(out, x[...] * 2.0, x[0])


def test_a_return_in_a_loop_skips_its_else_and_a_helper_may_return_nothing_early():
  """A return in the loop's else became a break outside any loop (MG001); a bare return under a run-time
  if of a helper that returns nothing was MG001."""
  for head in ([-1, -2, 3, 4], [-1, -2, -3, -4], [-9, -2, -3, -4]):
    x = np.array(head + [-1] * 124, np.float32)
    np.testing.assert_array_equal(returns_in_a_loop_and_its_else(jnp.asarray(x), interpret=True), _loop_and_else(x))
  for shift in (0.0, -5.0):
    x = np.arange(128, dtype=np.float32) + shift
    want = x * 2 if x[0] >= 0 else x
    np.testing.assert_array_equal(stores_through_a_helper(jnp.asarray(x), interpret=True), want)
  returns_in_a_loop_and_its_else.check(S((128,), F32))
  stores_through_a_helper.check(S((128,), F32))


@ml.inline
def _scaled_by_first_below(v, t):
  for k in ml.static_range(3):
    if t > k:
      return v * k
  return v


@mg.mgpu_kernel(out_shape=lambda x: x)
def helper_returns_in_an_unrolled_loop(x, out):
  out[...] = _scaled_by_first_below(x[...], x[0])


def test_a_helpers_runtime_return_in_an_unrolled_loop_ends_it():
  """It said the helper had a path without a return, which it has not; then (MG001) that such a return
  is not supported; probe 38g: it ends the helper, the trips after it skipped."""
  for t in (0.5, -1.0):
    x = np.arange(128, dtype=np.float32) / 128 + t
    want = x * 0 if x[0] > 0 else x
    np.testing.assert_array_equal(helper_returns_in_an_unrolled_loop(jnp.asarray(x), interpret=True), want)
