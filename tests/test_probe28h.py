"""Probe 28h (mutation fuzzing for raw tracebacks): kernels of examples/ and tests/ mutated
(constants, wrapped values, shapes, masks) until the compiler raised something other than a
located KernelError, or accepted what the GPU would run out of bounds."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- Python comparisons of static values
@mg.mgpu_kernel(out_shape=lambda x: x)
def shape_gt_int(x, out):
  buf = ml.smem((128,))
  buf[...] = x[...].shape > 0
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_in_int(x, out):
  n = 1 in x.shape[0]
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def chained_shape(x, out):
  n = 1 < x.shape < 3
  out[...] = x[...]


def test_a_static_comparison_python_cannot_make_is_a_located_type_error():
  """It was MG900 (internal): `operator.gt` of a tuple and an int raised TypeError in the tracer."""
  expect(shape_gt_int, [S((128,), F32)], mg.KernelTypeError, "x[...].shape > 0",
         "cannot compute x[...].shape > 0: '>' not supported between instances of 'tuple' and 'int'",
         hint="static values compute as in Python")
  expect(int_in_int, [S((128,), F32)], mg.KernelTypeError, "1 in x.shape[0]",
         "cannot compute 1 in x.shape[0]: argument of type 'int' is not iterable")
  expect(chained_shape, [S((128,), F32)], mg.KernelTypeError, "1 < x.shape < 3",
         "cannot compute 1 < x.shape < 3: '<' not supported between instances of 'int' and 'tuple'")


# ---------------------------------------------------------------- unary operators on static values
@mg.mgpu_kernel(out_shape=lambda x: x)
def negated_shape(x, out):
  n = -x.shape
  out[...] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def inverted_float(x, out):
  n = ~0.5
  out[...] = x[...]


def test_a_static_unary_operator_python_cannot_apply_is_a_located_type_error():
  expect(negated_shape, [S((128,), F32)], mg.KernelTypeError, "-x.shape",
         "cannot compute -x.shape: bad operand type for unary -: 'tuple'",
         hint="static values compute as in Python")
  expect(inverted_float, [S((128,), F32)], mg.KernelTypeError, "~0.5",
         "cannot compute ~0.5: bad operand type for unary ~: 'float'")


# ---------------------------------------------------------------- slice steps after an Ellipsis
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 2,), x.dtype))
def every_other_after_ellipsis(x, out):
  out[...] = x[...][..., ::2]


@mg.mgpu_kernel(out_shape=lambda x: x)
def reversed_last_after_ellipsis(x, out):
  v = x[...]
  out[...] = v[..., ::-1]


def test_a_strided_slice_after_an_ellipsis_names_the_dimension_it_slices():
  """`v[..., ::2]` of a 1-D tensor was MG900 (IndexError: the Ellipsis was counted as one
  dimension); of a 3-D one the hint flipped axis 1 instead of axis 2."""
  for n in (256, 48, 40):   # (in registers: test_probe32d; of 48: test_probe36a; of 40, padded: session 39)
    x = np.arange(n, dtype=np.float32)
    every_other_after_ellipsis.check(S((n,), F32))
    np.testing.assert_array_equal(every_other_after_ellipsis(x, interpret=True), x[..., ::2])
  x3 = np.arange(2 * 4 * 128, dtype=np.float32).reshape(2, 4, 128)    # (now jnp.flip, through SMEM: test_probe33b)
  np.testing.assert_array_equal(reversed_last_after_ellipsis(x3, interpret=True), x3[..., ::-1])



# ---------------------------------------------------------------- masks known while compiling, on outside GMEM
@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(2,))
def tail_wrong_bound(x, y):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  y.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)].load(mask=offs < 256, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((256,), x.dtype), grid=(2,))
def tail_right_bound(x, y):
  i = ml.program_id(0)
  offs = i * 128 + ml.arange(128)
  y.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)].load(mask=offs < x.shape[0], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 128), x.dtype))
def padded_columns(x, y):
  y[...] = ml.load(x.at[:, ml.ds(0, 128)], mask=(ml.arange(128) < 96)[None, :], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: S((8, 48), x.dtype))
def store_past_the_end(x, y):
  y.at[:, ml.ds(0, 128)].store(x[...], mask=ml.arange(128)[None, :] < 96)


def test_a_masked_load_whose_known_mask_is_on_outside_the_array_is_rejected_while_compiling():
  """Only interpret mode caught these (MG952); check and the CUDA export accepted kernels that
  read (or write) past the end of GMEM on the GPU."""
  expect(tail_wrong_bound, [S((200,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(i * 128, 128)].load(",
         "this masked load touches x[128:256] in program (1, 0, 0) where its mask is on, outside x's shape (200,)",
         hint="make the mask false past x's end: compare the offsets along dimension 0 with x.shape[0]"
              " (offs < x.shape[0]), or pass a longer x")
  expect(padded_columns, [S((8, 48), F32)], mg.IndexOutOfBoundsError, "ml.load(",
         "this masked load touches x[0:8, 0:96] where its mask is on, outside x's shape (8, 48)")
  expect(store_past_the_end, [S((8, 128), F32)], mg.IndexOutOfBoundsError, "y.at[:, ml.ds(0, 128)].store(",
         "this masked store touches y[0:8, 0:96] where its mask is on, outside y's shape (8, 48)")


def test_the_hinted_mask_reads_inside_the_array_and_matches_numpy():
  x = jnp.arange(200, dtype=F32)
  y = tail_right_bound(x, interpret=True)
  want = np.zeros(256, np.float32)
  want[:200] = np.asarray(x)
  np.testing.assert_array_equal(np.asarray(y), want)
  assert "mosaic_gpu" in str(_export(tail_right_bound, S((200,), F32)))
  y = padded_columns(jnp.ones((8, 128), F32), interpret=True)     # in bounds: the padding is other=0
  np.testing.assert_array_equal(np.asarray(y)[:, 96:], 0)
  np.testing.assert_array_equal(np.asarray(y)[:, :96], 1)


# ---------------------------------------------------------------- a dtype of None; a -1 that does not divide
@mg.mgpu_kernel(out_shape=lambda x: x)
def zeros_of_none(x, out):
  out[...] = x[...] + ml.zeros((128,), None)


@mg.mgpu_kernel(out_shape=lambda x: x)
def astype_none(x, out):
  out[...] = x[...].astype(None)


def test_a_dtype_of_none_is_named_as_none_not_as_numpys_float64():
  expect(zeros_of_none, [S((128,), F32)], mg.KernelTypeError, "ml.zeros((128,), None)",
         "ml.zeros needs a dtype such as jnp.float32, got None")
  expect(astype_none, [S((128,), F32)], mg.KernelTypeError, "x[...].astype(None)",
         "the conversion (.astype / ml.cast) needs a dtype such as jnp.float32, got None")


@mg.mgpu_kernel(out_shape=lambda x: x)
def reshape_into_threes(x, out):
  v = x[...]
  out[...] = v.reshape(3, -1).reshape(128, 64)


@mg.mgpu_kernel(out_shape=lambda x: x)
def reshape_into_twos(x, out):
  v = x[...]
  out[...] = v.reshape(2, -1).reshape(128, 64) * 2


def test_a_reshape_whose_minus_one_does_not_divide_says_so():
  """It said "a tuple of positive Python ints, got (3, -1)", though -1 is accepted."""
  expect(reshape_into_threes, [S((128, 64), F32)], mg.ShapeMismatchError, "v.reshape(3, -1)",
         "cannot reshape v of shape (128, 64) (8192 elements) to (3, -1): 8192 is not a multiple of 3",
         hint="a reshape keeps the number of elements: the sizes besides -1 must divide it")
  x = jnp.arange(128 * 64, dtype=F32).reshape(128, 64)
  np.testing.assert_array_equal(np.asarray(reshape_into_twos(x, interpret=True)), np.asarray(x) * 2)
  assert "mosaic_gpu" in str(_export(reshape_into_twos, S((128, 64), F32)))

