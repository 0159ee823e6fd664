"""Probe 35f (leftovers of session 25's probes, frontend only): hints that named a window as
`c.at[...]`, an output as `out`, a GMEM gather for a register table, `/` as exact for tl.div_rn;
`if` on a tensor without ml.any / ml.all; a scalar's reshape and ml.constexpr of a run-time value;
the padded-read hint for an ml.zeros accumulator; check() of a call whose outputs are all empty."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- (1) ml.store of a ref indexed by tensors
@mg.mgpu_kernel(out_shape=lambda x, t: S((64, 128), F32))
def store_rows_at_ids(x, t, c):
  tt = t[...]
  v = x[...]
  ml.store(c.at[tt, :], v)


@mg.mgpu_kernel(out_shape=lambda x: S((64, 128), F32), grid=(4,))
def store_rows_window(x, c):
  i = ml.program_id(0)
  ml.store(c.at[ml.ds(i * 16, 16), :], x.at[ml.ds(i * 16, 16), :][...])


def test_store_at_tensor_rows_is_a_scatter():
  """It was an error whose hint wrote the window the offsets would cover; rows at data's places are a
  scatter now, and the window store still works."""
  x = jnp.arange(16 * 128, dtype=F32).reshape(16, 128)
  t = jnp.array([5, 60, 0, 3, 17, 18, 19, 40, 41, 42, 43, 1, 2, 63, 30, 31], I32)
  np.testing.assert_array_equal(store_rows_at_ids(x, t, interpret=True), jnp.zeros((64, 128), F32).at[t].set(x))
  x = jnp.arange(64 * 128, dtype=F32).reshape(64, 128)
  np.testing.assert_array_equal(store_rows_window(x, interpret=True), x)
  store_rows_window.check(S((64, 128), F32))


# ---------------------------------------------------------------- (2) a scatter into an input names the output
@mg.mgpu_kernel(out_shape=lambda x, t, y: (S((64,), F32), S((64, 128), F32)))
def scatter_into_input(x, t, y, count, res):
  tt = t[...]
  x[tt, :] = y[...]


@mg.mgpu_kernel(out_shape=lambda x, t, y: S((64, 128), F32))
def store_into_input(x, t, y, res):
  ml.store(x.at[t[...], :], y[...])


@mg.mgpu_kernel(out_shape=lambda x, t, y: S((64, 128), F32))
def atomic_into_input(x, t, y, res):
  ml.atomic_add(x.at[t[...], :], y[...])


@mg.mgpu_kernel(out_shape=lambda x, t, y: S((64, 128), F32))
def atomic_into_output(x, t, y, res):
  ml.atomic_add(res.at[t[...], :], y[...])


SPECS2 = [S((64, 128), F32), S((16,), I32), S((16, 128), F32)]


def test_scatter_into_an_input_names_the_kernels_output():
  """It named `out`, which this kernel has not: res is its output of x's shape (count is 1-D)."""
  e = expect(scatter_into_input, SPECS2, mg.InputWriteError, "x[tt, :] = y[...]",
             "this scatter writes x, an input: inputs are read-only")
  assert e.hint.startswith("x is an input, which is read-only: scatter into an output (res) instead;"), e.hint
  assert "res[tt, :] = y[...]" in e.hint and "out." not in e.hint, e.hint
  e = expect(store_into_input, SPECS2[:3], mg.KernelTypeError, "ml.store(x.at[t[...], :], y[...])",
             "ml.store needs a ref (a parameter, an ml.smem buffer or a view), got a ref indexed by tensors"
             " (ref.at[ids, ...])")
  assert e.hint.startswith("x is an input, which is read-only: scatter into an output (res) instead; for offsets"
                           " start + ml.arange(16), take the window they cover: ml.store(res.at[ml.ds(start, 16), :],"
                           " y[...])"), e.hint
  assert "at other offsets, scatter: res[t[...], :] = y[...]" in e.hint
  expect(atomic_into_input, SPECS2, mg.InputWriteError, "ml.atomic_add(x.at[t[...], :], y[...])",
         "ml.atomic_add updates x, an input: inputs are read-only",
         hint="accumulate into an output (res) instead: it starts at the operation's identity, e.g. 0 for add")
  x, t = jnp.zeros((64, 128), F32), jnp.arange(16, dtype=I32) * 3     # the hint followed
  y = jnp.arange(16 * 128, dtype=F32).reshape(16, 128)
  np.testing.assert_array_equal(atomic_into_output(x, t, y, interpret=True), jnp.zeros((64, 128), F32).at[t].add(y))
  atomic_into_output.check(*SPECS2)


# ---------------------------------------------------------------- (3) ml.gather of a register table
@mg.mgpu_kernel(out_shape=lambda x, t: S((16, 128), F32))
def gather_registers(x, t, o):
  tab = x[...] * 2
  o[...] = ml.gather(tab, t[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x, t: (S((16, 128), F32), S((64, 128), F32)))
def gather_scratch(x, t, o, scratch):
  tab = x[...] * 2
  scratch[...] = tab
  o[...] = scratch[t[...], :]


@mg.mgpu_kernel(out_shape=lambda x, t: S((16, 128), F32))
def gather_rows_of_registers(x, t, o):
  tab = x[...] * 2
  o[...] = tab[t[...], :]


def test_gather_of_a_register_table_says_what_works():
  """It pointed to a GMEM gather, `table[ids, :]`, as if tab were a ref."""
  expect(gather_registers, [S((64, 128), F32), S((16,), I32)], mg.ShapeMismatchError, "ml.gather(tab",
         "ml.gather (Triton's tl.gather) takes indices of src's rank, 2, got indices of shape (16,)",  # (60)
         hint="for whole slices of tab at t[...] along axis 0, index it: tab[t[...], :]")
  x, t = jnp.arange(64 * 128, dtype=F32).reshape(64, 128), jnp.arange(16, dtype=I32)[::-1] * 3
  o, _ = gather_scratch(x, t, interpret=True)
  np.testing.assert_array_equal(o, (2 * x)[t])
  np.testing.assert_array_equal(gather_rows_of_registers(x, t, interpret=True), (2 * x)[t])   # the hint followed
  gather_scratch.check(S((64, 128), F32), S((16,), I32))


# ---------------------------------------------------------------- (4) a tensor as an if / while condition
@mg.mgpu_kernel(out_shape=lambda x: x)
def if_on_tensor(x, o):
  v = x[...]
  if v > 0:
    o[...] = v
  else:
    o[...] = -v


@mg.mgpu_kernel(out_shape=lambda x: x)
def while_on_tensor(x, o):
  v = x[...]
  while v - 1:
    v = v - 1
  o[...] = v


@mg.mgpu_kernel(out_shape=lambda x: x)
def if_on_any(x, o):
  v = x[...]
  if ml.any(v > 0):
    o[...] = v
  else:
    o[...] = -v


def test_a_tensor_condition_hints_any_all_and_where():
  """It said `compare scalars (i < n); tensors select with ml.where`, no word of ml.any / ml.all."""
  expect(if_on_tensor, [S((128,), F32)], mg.KernelTypeError, "v > 0",
         "an if condition must be a Python value or a boolean scalar, got a bool tensor of shape (128,)",
         hint="a tensor holds one truth value per element: to branch on whether any (every) element holds, reduce"
              " it, if ml.any(v > 0): (or ml.all(v > 0)); to choose per element, select with ml.where(v > 0, a, b)"
              " instead of branching")
  e = expect(while_on_tensor, [S((128,), F32)], mg.KernelTypeError, "v - 1:",
             "a while condition must be a boolean scalar, got a float32 tensor of shape (128,)")
  assert "while ml.any((v - 1) != 0): (or ml.all((v - 1) != 0))" in e.hint, e.hint
  for x in (-jnp.arange(128, dtype=F32), jnp.arange(128, dtype=F32)):      # the hint followed
    np.testing.assert_array_equal(if_on_any(x, interpret=True), jnp.where(jnp.any(x > 0), x, -x))
  if_on_any.check(S((128,), F32))


# ---------------------------------------------------------------- (5) tl.div_rn
@mg.mgpu_kernel(out_shape=lambda x, y: x)
def div_rn(x, y, o):
  o[...] = ml.div_rn(x[...], y[...])


def test_div_rn_is_the_correctly_rounded_division():
  """It said `divide with the / operator`, as if `/` were div_rn's correctly rounded division; then that mgpu_dsl
  had none. Since probe 49h ml.div_rn is PTX's div.rn.f32 (tests/test_probe49h.py runs it on the GPU)."""
  r = np.random.default_rng(5)
  x, y = (jnp.asarray(r.standard_normal(128), F32) for _ in range(2))
  np.testing.assert_array_equal(np.asarray(div_rn(x, y, interpret=True)), np.asarray(x) / np.asarray(y))
  assert "div.rn.f32" in div_rn.mlir(S((128,), F32), S((128,), F32))


# ---------------------------------------------------------------- (6) a scalar's reshape; ml.constexpr(tensor)
@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def scalar_reshape(x, o):
  s = ml.sum(x[...])
  o[...] = s.reshape(1)


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32))
def scalar_full(x, o):
  s = ml.sum(x[...])
  o[...] = ml.full((1,), s)


@mg.mgpu_kernel(out_shape=lambda x: x)
def constexpr_of_tensor(x, o):
  v = x[...]
  c = ml.constexpr(v)
  o[...] = c * 2


@mg.mgpu_kernel(out_shape=lambda x: x)
def constexpr_dropped(x, o):
  v = x[...]
  c = v
  o[...] = c * 2


@mg.mgpu_kernel(out_shape=lambda x: S((4,), F32))
def scalar_reshape_grown(x, o):
  s = ml.sum(x[...])
  o[...] = s.reshape(4)


def test_scalar_reshape_and_constexpr_of_a_runtime_value_say_what_to_write():
  """They said `reshape a tensor read from a ref` and `decorate a helper of your own with @ml.inline`. A scalar's
  reshape to one element is jnp's (a 0-d array's): session 55 made it ml.full's tensor, where it had been refused
  with ml.full in the hint; to more elements it is refused at the reshape."""
  x = jnp.arange(128, dtype=F32)
  np.testing.assert_allclose(scalar_reshape(x, interpret=True), [x.sum()])
  scalar_reshape.check(S((128,), F32))
  expect(scalar_reshape_grown, [S((128,), F32)], mg.ShapeMismatchError, "s.reshape(4)",
         "cannot reshape s (one element) to (4,) (4 elements)",
         hint="a reshape keeps the number of elements; to repeat the value, ml.full((4,), s)")
  np.testing.assert_allclose(scalar_full(x, interpret=True), [x.sum()])
  scalar_full.check(S((128,), F32))
  expect(constexpr_of_tensor, [S((128,), F32)], mg.KernelTypeError, "ml.constexpr(v)",
         "ml.constexpr cannot take a register tensor inside a kernel",
         hint="drop ml.constexpr: v is a run-time value, used as it is (c = v); ml.constexpr(...) only wraps a value"
              " known while compiling (a number, a shape); to specialise the kernel on a value, make it a"
              " keyword-only parameter, def k(x, out, *, n: ml.constexpr), called as k(x, n=4)")
  np.testing.assert_array_equal(constexpr_dropped(x, interpret=True), 2 * x)
  constexpr_dropped.check(S((128,), F32))


# ---------------------------------------------------------------- (7) MG202's padded hint for ml.zeros
@mg.mgpu_kernel(out_shape=lambda x: S((100,), F32))
def zeros_accumulator(x, o):
  acc = ml.zeros((100,))
  acc = acc + x[...]
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((100,), F32))
def zeros_padded(x, o):
  acc = ml.zeros((128,))
  for i in range(4):
    acc += x.at[ml.ds(0, 128)].load(mask=ml.arange(128) < 100, other=0.0)
  o.at[ml.ds(0, 128)].store(acc, mask=ml.arange(128) < 100)


def test_padded_hint_for_an_zeros_accumulator_makes_it_longer():
  """It said `read acc padded the same way: a window of 128 elements loaded with the mask`: acc reads nothing."""
  e = expect(zeros_accumulator, [S((128,), F32)], mg.ShapeMismatchError, "acc + x[...]",
             "+ on acc of shape (100,) and x[...] of shape (128,): the shapes do not broadcast (axis 0 of the result"
             " would be both 100 and 128)")
  assert ("make acc 128 long too (ml.zeros((128,)) for an accumulator, ml.full for another value) and keep the extra"
          " 28 out of the result: store a window of 128 with the mask, ref.at[ml.ds(start, 128)].store(v,"
          " mask=ml.arange(128) < 100);") in e.hint, e.hint
  assert "read acc padded" not in e.hint
  x = jnp.arange(100, dtype=F32)
  np.testing.assert_array_equal(zeros_padded(x, interpret=True), 4 * x)        # the hint followed
  zeros_padded.check(S((100,), F32))


@mg.mgpu_kernel(out_shape=lambda x: S((8, 100), F32))
def zeros_tile_accumulator(x, o):
  acc = ml.zeros((8, 100))
  acc = acc + x[...]
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((8, 100), F32))
def zeros_tile_padded(x, o):
  acc = ml.zeros((8, 128))
  acc = acc + x.at[:, ml.ds(0, 128)].load(mask=ml.arange(128)[None, :] < 100, other=0.0)
  o.at[:, ml.ds(0, 128)].store(acc, mask=ml.arange(128)[None, :] < 100)


def test_padded_hint_for_a_zeros_tile_keeps_its_rows():
  """A 2-D accumulator: the hint's ml.zeros and mask are of its shape, (8, 128) and [None, :]."""
  e = expect(zeros_tile_accumulator, [S((8, 128), F32)], mg.ShapeMismatchError, "acc + x[...]",
             "+ on acc of shape (8, 100) and x[...] of shape (8, 128): the shapes do not broadcast (axis 1 of the"
             " result would be both 100 and 128)")
  assert ("make acc 128 long too (ml.zeros((8, 128)) for an accumulator, ml.full for another value) and keep the"
          " extra 28 out of the result: store a window of 128 with the mask, ref.at[:, ml.ds(start, 128)].store(v,"
          " mask=ml.arange(128)[None, :] < 100);") in e.hint, e.hint
  x = jnp.arange(800, dtype=F32).reshape(8, 100)
  np.testing.assert_array_equal(zeros_tile_padded(x, interpret=True), x)        # the hint followed
  zeros_tile_padded.check(S((8, 100), F32))


# ---------------------------------------------------------------- (8) check() of all-empty outputs
@mg.mgpu_kernel(out_shape=lambda x: S((0, 128), F32), grid=(2,))
def empty_outputs(x, o):
  o[...] = x[...]


def test_check_of_all_empty_outputs_is_mg007_as_the_call_launches_nothing():
  """It traced the kernel (MG204 for x[...] of no elements) while the call returns the empty output."""
  out = empty_outputs(jnp.zeros((0, 128), F32), interpret=True)
  assert out.shape == (0, 128)
  expect(empty_outputs, [S((0, 128), F32)], mg.LaunchConfigError, "out_shape=",
         "every output of this call is empty (out_shape gives (0, 128)): a call on arrays returns them without a"
         " launch, whatever the grid, and there is no kernel to check or build",
         hint="check or build a specialisation whose outputs have elements")
