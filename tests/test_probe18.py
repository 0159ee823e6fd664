"""Probe 18 (helpers writing control-flow and data-dependent kernels): a module global read and
then assigned in a runtime loop read the global on every trip (silently wrong); a
warp-specialised loop inside a while loop was MG900; a Python bool flag set in a runtime if was
rejected while ints and floats worked; and messages that hid why (a local read before its
assignment said 'not defined', a size merged across a runtime if said only 'static int',
3-D broadcasts said 'reduced')."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
BIAS = 10.0


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def global_rebound_in_loop(x, n: ml.scalar, out):
  acc = ml.zeros((128,), F32)
  for i in range(n):
    acc = acc + BIAS
    BIAS = 1.0          # a local, as in Python
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, n: S((128,), F32))
def previous_row(x, n: ml.scalar, out):
  acc = ml.zeros((128,), F32)
  for i in range(n):
    if i > 0:
      acc = acc + prev
    prev = x.at[i][...]
  out[...] = acc


def test_a_name_assigned_in_the_kernel_is_local_as_in_python():
  """The first gave 30 (the global, every trip) where Python raises UnboundLocalError; the
  second said 'name prev is not defined' with a hint about module globals."""
  expect(global_rebound_in_loop, [S((1,), F32), S((), I32)], mg.UnboundNameError, "BIAS\n",
         "BIAS is read before it is assigned: it is assigned in this kernel, so (as in Python) it is a local"
         " name, not the module's global of the same name, and an iteration does not see what the previous"
         " one assigned unless it is assigned before the loop",
         hint="assign BIAS before its first read (before the loop, to carry it); to use the global, give the"
              " local another name")
  expect(previous_row, [S((8, 128), F32), S((), I32)], mg.UnboundNameError, "prev\n",
         "prev is read before it is assigned: it is assigned in this kernel, so (as in Python) it is a local"
         " name, and an iteration does not see what the previous one assigned unless it is assigned before"
         " the loop", hint="assign prev before its first read (before the loop, to carry it)")


@mg.mgpu_kernel(out_shape=lambda x: S((64, 128), F32))
def specialised_in_while(x, out):
  buf = ml.smem((64, 128), F32)
  acc = ml.zeros((64, 128), F32)
  t = ml.program_id(0)                 # a run-time count (a while on Python ints runs while tracing)
  while t < 2:
    for j in ml.range(x.shape[0] // 64, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds(j * 64, 64)], buf)
      acc = acc + buf[...]
    t = t + 1
  out[...] = acc


def test_a_warp_specialised_loop_in_a_while_loop_is_rejected_at_the_loop():
  """Was MG900 ('While' object has no attribute 'cond') at the def."""
  expect(specialised_in_while, [S((256, 128), F32)], mg.WarpSpecializeError, "for j in ml.range(",
         "a warp-specialised loop inside a while loop: the producer warpgroup walks the for loops and ifs"
         " around the loop, not a while loop's condition")


@mg.mgpu_kernel(out_shape=lambda l: S(l.shape, I32), grid=lambda l: (l.shape[0],))
def flag_in_branch(lens, out):
  b = ml.program_id(0)
  flag = False
  if lens[b] > 3:
    flag = True
  out[b] = ml.where(flag, 1, 0)


@mg.mgpu_kernel(out_shape=lambda x, n: S((1,), I32))
def found_any(x, n: ml.scalar, out):
  found = False
  for i in range(n):
    found = found | (x[i] > 5)
  out[0] = ml.where(found, 1, 0)


def test_a_python_bool_flag_becomes_a_boolean_scalar():
  """Was MG003 ('flag is a Python bool after this assignment but a Python bool on the other
  path') and MG005 in a loop, while ints and floats worked."""
  lens = jnp.array([1, 5, 3, 9], I32)
  np.testing.assert_array_equal(flag_in_branch(lens, interpret=True), [0, 1, 0, 1])
  x = jnp.array([1, 2, 7, 3], I32)
  np.testing.assert_array_equal(found_any(x, 4, interpret=True), [1])
  np.testing.assert_array_equal(found_any(x, 2, interpret=True), [0])
  jax.export.export(jax.jit(flag_in_branch), platforms=["cuda"])(S((4,), I32))
  jax.export.export(jax.jit(lambda x: found_any(x, 4)), platforms=["cuda"])(S((4,), I32))


@mg.mgpu_kernel(out_shape=lambda x, l: S((64,), F32))
def size_from_a_branch(x, lens, out):
  bs = 64
  if lens[0] > 0:
    bs = 128
  out[...] = x.at[ml.ds(0, bs)][...][:64]


def test_a_size_merged_across_a_runtime_if_says_why_it_is_not_static():
  line = size_from_a_branch.fn.__code__.co_firstlineno + 3
  expect(size_from_a_branch, [S((256,), F32), S((1,), I32)], mg.KernelTypeError, "x.at[ml.ds(0, bs)]",
         f"ml.ds size must be a positive static int, got bs: bs differs between the branches of the if at line"
         f" {line}, so it is a run-time value after it")


@mg.mgpu_kernel(out_shape=lambda x, b: x)
def add_rows_to_3d(x, b, out):
  out[...] = x[...] + b[...]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, I32))
def index_grid_3d(x, out):
  out[...] = ml.arange(4)[:, None, None] * 1024 + ml.arange(8)[None, :, None] * 128 + ml.arange(128)[None, None, :]


def test_broadcasting_into_3d_along_leading_axes():
  """Said 'x[...] of shape (4, 8, 128) is reduced or broadcast along an axis' (nothing was reduced);
  then MG204 'broadcasting works into 1-D and 2-D tensors'; probe 37e computes it (the 2-D broadcast
  of the merged axes between two reshapes), and a (1, 1, 1, 160) bias read 4-D still says so
  (test_probe23; a (1, 1, 1, 32) one is read as its elements' vector since probe 45a)."""
  rng = np.random.default_rng(18)
  x, b = rng.standard_normal((4, 8, 128)).astype(np.float32), rng.standard_normal((8, 128)).astype(np.float32)
  np.testing.assert_array_equal(add_rows_to_3d(x, b, interpret=True), x + b)
  jax.export.export(jax.jit(add_rows_to_3d), platforms=["cuda"])(S((4, 8, 128), F32), S((8, 128), F32))
  # A 3-D grid of pure ml.arange indices is computed at its full shape (probe 29l,
  # frontend/index_grids.py): no broadcast of rows in fixed threads, so it is accepted.
  got = index_grid_3d(jnp.zeros((4, 8, 128), F32), interpret=True)
  np.testing.assert_array_equal(got, np.arange(4 * 8 * 128, dtype=np.int32).reshape(4, 8, 128))
  jax.export.export(jax.jit(index_grid_3d), platforms=["cuda"])(S((4, 8, 128), F32))
