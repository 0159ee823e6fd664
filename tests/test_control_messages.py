"""Control flow and ordinary Python in kernels: each mistake is reported at the statement that
makes it, with a hint that works; static Python (break in an unrolled loop, a short-circuit on a
constexpr, a return under a static condition, chained comparisons, len and int/float) runs."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
SPECS = (S((1,), I32), S((128,), F32))
X = jnp.arange(128, dtype=F32) - 64.0


def n_(v):
  return jnp.array([v], I32)


# ---------------------------------------------------------------- 1. at the assignment, not the loop or if

@mg.mgpu_kernel(out_shape=lambda n, x: x)
def big_int_carry(n, x, out):
  s = 2**40
  for i in range(n[0]):
    s = s + 1
  out[...] = x[...] + s.astype(jnp.float32)


def test_a_too_large_int_carried_by_a_loop_is_reported_where_it_is_assigned():
  e = expect(big_int_carry, SPECS, mg.KernelTypeError, "s = 2**40",
             "this constant uses the Python int 1099511627776, which does not fit in int32: kernels compute"
             " in 32 bits (a larger constant would silently lose its high bits)")
  assert e.notes == (f"{e.filename}:{where(big_int_carry, 'for i in')[0]}:2: the loop that carries s",)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def rebind_buffer(n, x, out):
  buf = ml.smem((128,), jnp.float32)
  for i in range(n[0]):
    buf = ml.smem((128,), jnp.float32)
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def rebind_buffer_read_after(n, x, out):
  buf = ml.smem((128,), jnp.float32)
  for i in range(n[0]):
    buf = ml.smem((128,), jnp.float32)
  buf[...] = x[...]
  out[...] = buf[...]


def test_rebinding_a_buffer_in_a_runtime_loop_is_reported_at_the_assignment():
  # (a ref rebound in a run-time loop and read by nothing after it, nor by a later trip, is Python's own binding
  # of each trip: it computes since probe 60c; read after the loop it is the refusal)
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(rebind_buffer(np.array([2], np.int32), x, interpret=True), x)
  e = expect(rebind_buffer_read_after, SPECS, mg.LoopCarryTypeError, "buf = ml.smem", nth=1,
             message="buf is rebound inside a runtime loop to a float32 SMEM ref of shape (128,); only register"
                     " values and numbers can change across iterations",
             hint="a loop cannot switch buf to another buffer or window: allocate buffers once before the loop"
                  " and index them with the loop's index (buf.at[ml.ds(i * n, n)]), or unroll it with"
                  " ml.static_range")
  assert e.notes[0].endswith(": the runtime loop")


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def rebind_ref_in_while(n, x, out):
  r = x
  i = 0
  while i < n[0]:
    r = out
    i += 1
  out[...] = r[...]


def test_rebinding_a_ref_in_a_while_loop_is_reported_at_the_assignment():
  expect(rebind_ref_in_while, SPECS, mg.LoopCarryTypeError, "r = out",
         "r is rebound inside a runtime loop to a float32 GMEM ref of shape (128,); only register values and"
         " numbers can change across iterations")


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def carry_in_if(n, x, out):
  acc = x[...]
  for i in range(n[0]):
    if i > 1:
      acc = acc * 2.0
    else:
      acc = acc.astype(jnp.bfloat16)
  out[...] = acc


def test_a_branch_that_changes_a_loop_carry_is_mg005_at_its_assignment():
  e = expect(carry_in_if, SPECS, mg.LoopCarryTypeError, "acc = acc.astype",
             "acc enters the loop as a float32 tensor of shape (128,) but an iteration makes it a bfloat16 tensor of shape (128,)",
             hint="convert it back after this assignment: acc = acc.astype(jnp.float32)")
  assert e.notes[0].endswith(": the loop that carries acc")


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def float_then_tensor(n, x, out):
  v = 0.0
  if n[0] > 2:
    v = x[...]
  out[...] = v + x[...]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def float_then_tensor_fixed(n, x, out):
  v = ml.full((128,), 0.0, jnp.float32)
  if n[0] > 2:
    v = x[...]
  out[...] = v + x[...]


def test_a_branch_that_changes_a_number_into_a_tensor_is_reported_at_its_assignment():
  line = where(float_then_tensor, "if n[0] > 2")[0]
  expect(float_then_tensor, SPECS, mg.KernelTypeError, "v = x[...]",
         f"v is a float32 tensor of shape (128,) after this assignment but a float32 scalar on the other path through the"
         f" if at line {line}",
         hint="start v as a tensor before the if: v = ml.full((128,), 0.0, jnp.float32)")
  np.testing.assert_allclose(float_then_tensor_fixed(n_(3), X, interpret=True), 2 * X)   # the hint works
  np.testing.assert_allclose(float_then_tensor_fixed(n_(0), X, interpret=True), X)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def dtype_in_one_branch(n, x, out):
  v = x[...]
  if n[0] > 2:
    v = v.astype(jnp.float16)
  out[...] = v


def test_a_branch_that_narrows_a_float_leaves_the_wider_dtype_after_the_if():
  """It was MG003 at the astype; since probe 60c a name of float16 on one path and float32 on the other is float32
  after the if, as jnp.where(c, v16, v32) is (the float16 path's values rounded to float16, then widened)."""
  x = np.random.default_rng(0).standard_normal(128).astype(np.float32)
  for n, want in ((3, x.astype(np.float16).astype(np.float32)), (1, x)):
    np.testing.assert_array_equal(dtype_in_one_branch(np.array([n], np.int32), x, interpret=True), want)


# ---------------------------------------------------------------- 2. a ref chosen at run time

@mg.mgpu_kernel(out_shape=lambda n, x: x)
def ref_by_if(n, x, out):
  r = x
  if n[0] > 0:
    r = out
  out[...] = r[...]


def test_a_ref_chosen_by_a_runtime_if_says_refs_cannot_be_chosen_at_run_time():
  line = where(ref_by_if, "if n[0] > 0")[0]
  expect(ref_by_if, SPECS, mg.KernelTypeError, "r = out",
         f"r is a different ref on each path through the if at line {line}; a ref cannot be chosen at run"
         f" time",
         hint="read or write inside each branch instead (v = out[...] in one, v = x[...] in the other), index"
              " one ref with a run-time index (ref.at[ml.ds(i * n, n)]), or choose with an ml.constexpr (an if"
              " on it is static)")


# ---------------------------------------------------------------- 3. hints that point the right way

@mg.mgpu_kernel(out_shape=lambda n, x: x)
def starred(n, x, out):
  a, *rest = (x[...], x[...], x[...])
  out[...] = a + rest[0] + rest[1]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def starred_name(n, x, out):
  t = (x[...], x[...], x[...])
  a, *mid, b = t
  out[...] = a + b


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def starred_rows(n, x, out):
  a, *rest = x[...]
  out[...] = a + rest[0]


def test_starred_unpacking_says_to_index():
  """Starred unpacking of a tuple or list computes as Python's since probe 52b; of a register tensor of more
  than 64 rows it stays MG001."""
  n = jnp.zeros((1,), jnp.int32)
  np.testing.assert_array_equal(np.asarray(starred(n, X, interpret=True)), 3 * np.asarray(X))
  np.testing.assert_array_equal(np.asarray(starred_name(n, X, interpret=True)), 2 * np.asarray(X))
  expect(starred_rows, SPECS, mg.UnsupportedSyntaxError, "*rest", "starred unpacking is not supported in a kernel",
         hint="index instead: t = x[...]; a, rest = t[0], t[1:]")


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def len_and_casts(n, x, out):
  vals = [x[...], x[...]]
  v = x[...] * float(len(vals)) + float(len(x[...]))      # 2 * x + 128
  i = int(x[...] * 0.5)                                      # int32, truncated toward zero
  out[...] = v + float(n[0]) + i.astype(jnp.float32) + float(int(n[0]) * 2)


def test_len_of_a_list_and_int_float_of_register_values_work():
  got = len_and_casts(n_(3), X, interpret=True)
  want = 2 * X + 128 + 3 + np.trunc(np.asarray(X) * 0.5) + 6
  np.testing.assert_allclose(got, want)
  len_and_casts.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: S(x.shape, jnp.int32))
def int_is_32_bits(n, x, out):
  out[...] = int(x[...] * 0.5) + int(n[0])


def test_int_of_a_tensor_is_an_int32_cast():
  # was an int64 cast: storing it into an int32 output failed
  np.testing.assert_array_equal(int_is_32_bits(n_(3), X, interpret=True), np.trunc(np.asarray(X) * 0.5) + 3)
  int_is_32_bits.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def list_item_assign(n, x, out):
  st = [x[...], x[...], x[...]]
  st[1] = st[0] * 2.0
  out[...] = st[1]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def list_item_rebuilt(n, x, out):
  st = [x[...], x[...], x[...]]
  st = st[:1] + [st[0] * 2.0] + st[2:]
  out[...] = st[1] + st[2]


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def tuple_item_assign(n, x, out):
  st = (x[...], x[...], x[...])
  st[1] = st[0] * 2.0
  out[...] = st[1]


def test_assigning_a_list_item_rebinds_the_list():
  """(Since probe 45d `st[1] = v` of a list at a static index binds st to the rebuilt list, as the hint wrote it, where
  no other name still read holds the same list; a tuple's item, which Python refuses too, keeps the hint.)"""
  np.testing.assert_allclose(list_item_assign(n_(0), X, interpret=True), 2 * X)
  expect(tuple_item_assign, SPECS, mg.KernelTypeError, "st[1] =",
         "st is a Python tuple: tuples in a kernel are values, so an item cannot be assigned",
         hint="rebuild it: st = st[:1] + (st[0] * 2.0,) + st[2:]")
  np.testing.assert_allclose(list_item_rebuilt(n_(0), X, interpret=True), 3 * X)     # the hint works


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def static_break(n, x, out, *, lim: ml.constexpr = 2):
  acc = x[...]
  for i in ml.static_range(5):
    if i >= lim:
      break
    if i == 0:
      continue
    acc = acc + 1.0
  for c in (10.0, 20.0, 30.0):
    if c > 25.0:
      break
    acc = acc + c
  out[...] = acc


def test_break_and_continue_under_static_conditions_end_unrolled_loops():
  np.testing.assert_allclose(static_break(n_(0), X, interpret=True), X + 1 + 30)
  np.testing.assert_allclose(static_break(n_(0), X, interpret=True, lim=4), X + 3 + 30)
  static_break.check(*SPECS, lim=3)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def runtime_break_in_static_range(n, x, out):
  acc = x[...]
  for i in ml.static_range(4):
    if n[0] < i:
      break
    acc = acc + 1.0
  out[...] = acc


def test_break_under_a_runtime_condition_in_an_unrolled_loop_skips_the_trips_after_it():
  """It was MG001 (loop at run time); the trips after a run-time break are skipped under a flag."""
  for n in (-1, 0, 2, 5):
    np.testing.assert_array_equal(runtime_break_in_static_range(n_(n), X, interpret=True),
                                  X + float(max(0, min(n + 1, 4))))
  runtime_break_in_static_range.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def constexpr_and(n, x, out, *, flag: ml.constexpr = False):
  v = x[...]
  if flag and n[0] > 0:
    v = v + 1.0
  if flag or n[0] > 0:
    v = v + 10.0
  out[...] = v


def test_and_or_with_a_static_left_operand_short_circuit_while_tracing():
  np.testing.assert_allclose(constexpr_and(n_(1), X, interpret=True), X + 10)
  np.testing.assert_allclose(constexpr_and(n_(0), X, interpret=True), X)
  np.testing.assert_allclose(constexpr_and(n_(1), X, interpret=True, flag=True), X + 11)
  np.testing.assert_allclose(constexpr_and(n_(0), X, interpret=True, flag=True), X + 10)
  constexpr_and.check(*SPECS, flag=True)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def runtime_and(n, x, out):
  v = x[...]
  if n[0] > 0 and n[0] < 5:
    v = v + 1.0
  out[...] = v


def test_and_on_runtime_scalars_short_circuits_as_python():
  """It was MG001 with the hint (n[0] > 0) & (n[0] < 5); a run-time `and` of booleans now runs its
  right operand only where the left is True (frontend/short_circuit.py)."""
  for n in (-1, 0, 3, 5, 9):
    np.testing.assert_allclose(runtime_and(n_(n), X, interpret=True), X + 1.0 if 0 < n < 5 else X)
  runtime_and.check(*SPECS)


# ---------------------------------------------------------------- 4. return, chained comparisons, ternaries

@mg.mgpu_kernel(out_shape=lambda n, x: x)
def returns(n, x, out, *, skip: ml.constexpr = False):
  out[...] = x[...]
  if skip:
    return
  out[...] = x[...] * 2.0
  return


def test_a_bare_return_at_the_end_and_under_a_static_condition_end_the_kernel():
  np.testing.assert_allclose(returns(n_(0), X, interpret=True), 2 * X)
  np.testing.assert_allclose(returns(n_(0), X, interpret=True, skip=True), X)
  returns.check(*SPECS, skip=True)
  returns.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def runtime_return(n, x, out):
  out[...] = x[...]
  if n[0] > 2:
    return
  out[...] = x[...] * 2.0


def test_a_return_under_a_runtime_condition_ends_the_kernel_there():
  """It was MG001 (put the rest of the kernel in the else: branch); the compiler now does that itself
  (tests/test_probe32b.py)."""
  np.testing.assert_allclose(runtime_return(n_(3), X, interpret=True), X)
  np.testing.assert_allclose(runtime_return(n_(2), X, interpret=True), 2 * X)
  runtime_return.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def chained(n, x, out, *, lo: ml.constexpr = 0):
  v = x[...]
  m = -10.0 < v <= 10.0
  v = ml.where(m, v, 0.0)
  if lo < n[0] < 5:
    v = v + 1.0
  if lo < 1 < 2 < n[0]:
    v = v + 100.0
  out[...] = v


def test_chained_comparisons_on_scalars_and_tensors():
  xs = np.asarray(X)
  base = np.where((-10 < xs) & (xs <= 10), xs, 0)
  np.testing.assert_allclose(chained(n_(3), X, interpret=True), base + 101)
  np.testing.assert_allclose(chained(n_(7), X, interpret=True), base + 100)
  np.testing.assert_allclose(chained(n_(0), X, interpret=True), base)
  np.testing.assert_allclose(chained(n_(3), X, interpret=True, lo=3), base)   # 3 < 1 is False: no compare
  chained.check(*SPECS)


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def ternaries(n, x, out, *, double: ml.constexpr = True):
  s = 2.0 if double else 1.0
  out[...] = (x[...] * s if double else x[...]) + s


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def runtime_ternary(n, x, out):
  s = 2.0 if n[0] > 0 else 1.0
  out[...] = x[...] * s


def test_a_static_conditional_expression_works_and_a_runtime_one_too():
  np.testing.assert_allclose(ternaries(n_(0), X, interpret=True), 2 * X + 2)
  np.testing.assert_allclose(ternaries(n_(0), X, interpret=True, double=False), X + 1)
  ternaries.check(*SPECS)
  for k in (0, 3):          # (an if statement since probe 44e)
    np.testing.assert_array_equal(runtime_ternary(n_(k), X, interpret=True), X * (2.0 if k > 0 else 1.0))


@mg.mgpu_kernel(out_shape=lambda n, x: x)
def enumerate_and_zip(n, x, out):
  v = x[...]
  for i, c in enumerate((1.0, 2.0)):
    v = v + c * float(i)                                   # + 2
  vals = [x[...], x[...] * 2.0]
  for k, (a, w) in enumerate(zip(vals, (10.0, 100.0))):
    v = v + a * w + float(k)                               # + 210 x + 1
  for a in reversed(vals):
    v = v + a                                              # + 3 x
  out[...] = v


def test_unpacking_over_static_tuples_enumerate_and_zip_unrolls():
  np.testing.assert_allclose(enumerate_and_zip(n_(0), X, interpret=True), X + 2 + 210 * X + 1 + 3 * X,
                             rtol=1e-6)
  enumerate_and_zip.check(*SPECS)
