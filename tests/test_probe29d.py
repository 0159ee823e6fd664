"""Probe 29d (reductions and shape ops at odd sizes): ml.sum/max/min/argmax/argmin/cumsum of 1-D,
2-D and 3-D tiles whose sizes are not multiples of 128, of 8- to 32-bit dtypes, with keepdims,
tuples of axes, broadcasting and loops; each hint below is followed and its result compared with
jnp's."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- the padding of a narrow row, in the data's dtype
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def argmax_of_narrow_int8_rows(x, out):
  out[...] = ml.argmax(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def min_of_narrow_uint8_rows(x, out):
  out[...] = ml.min(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def argmax_of_padded_int8_rows(x, out):          # the hint, followed
  v = x.at[:, ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 24, other=-128)
  out[...] = ml.argmax(v, axis=1)


def test_a_narrow_row_of_8_bit_data_is_padded_with_the_identity_of_its_own_dtype():
  """The hint gave int32's -2147483648 (the 32-bit tile an 8-bit max is computed in), which an int8
  load wraps to 0: an argmax or max of negative rows, padded as told, was silently wrong; for uint8 a
  min's padding was 4294967295 (255 after wrapping, by luck)."""
  # (4, 40) read whole: MG204 whose hint padded it with -128; since probe 46e an argmax computes padded
  xn = np.random.default_rng(1).integers(-100, -3, (4, 40)).astype(np.int8)
  np.testing.assert_array_equal(argmax_of_narrow_int8_rows(jnp.asarray(xn), interpret=True), np.argmax(xn, 1))
  _export(argmax_of_narrow_int8_rows, S((4, 40), jnp.int8))
  xu = np.random.default_rng(3).integers(1, 256, (4, 40)).astype(np.uint8)     # (read padded since probe 45g: a
  np.testing.assert_array_equal(min_of_narrow_uint8_rows(xu, interpret=True), xu.min(1))  # min's identity, 255)
  x = np.random.default_rng(0).integers(-100, -3, (4, 24)).astype(np.int8)
  np.testing.assert_array_equal(argmax_of_padded_int8_rows(jnp.asarray(x), interpret=True), np.argmax(x, 1))
  _export(argmax_of_padded_int8_rows, S((4, 24), jnp.int8))
  # (4, 24) read whole: 96 elements, held as their vector, each row's argmax a scalar (tests/test_probe45a.py)
  np.testing.assert_array_equal(argmax_of_narrow_int8_rows(jnp.asarray(x), interpret=True), np.argmax(x, 1))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.int32))
def argmin_down_narrow_columns(x, out):
  out[...] = ml.argmin(x[...], axis=0)


def test_an_argmin_down_16_columns_compiles():
  builds(argmin_down_narrow_columns, S((24, 16), F32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


# ---------------------------------------------------------------- rows padded for a reduction down the columns
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def max_down_three_rows(x, out):
  out[...] = ml.max(x[...], axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype))
def max_down_three_rows_padded(x, out):          # the hint, followed
  v = x.at[ml.ds(0, 4), :].load(mask=(ml.arange(4) < 3)[:, None], other=float('-inf'))
  out[...] = ml.max(v, axis=0)


def test_rows_padded_for_a_max_down_the_columns_are_minus_infinity_not_zero():
  """The hint said other=0.0 whatever the reduction: a column max of negative data, padded as told,
  was 0 (silently wrong)."""
  x = np.random.default_rng(1).standard_normal((3, 64)).astype(np.float32) - 10
  # (read padded by the compiler itself since probe 45g, the padding -inf for the max)
  np.testing.assert_array_equal(max_down_three_rows(x, interpret=True), x.max(0))
  np.testing.assert_array_equal(max_down_three_rows_padded(jnp.asarray(x), interpret=True), x.max(0))
  _export(max_down_three_rows_padded, S((3, 64), F32))


# ---------------------------------------------------------------- small tiles padded for a max or min
@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def min_of_a_small_tile(x, out):
  out[...] = ml.min(x[...], axis=(0, 1))


@mg.mgpu_kernel(out_shape=lambda x: (S((), jnp.int32), S((), x.dtype), S((), x.dtype)))
def stats_of_a_small_tile(x, s, mx, mn):
  v = x[...]
  s[...] = ml.sum(v)
  mx[...] = ml.max(v)
  mn[...] = ml.min(v)


@mg.mgpu_kernel(out_shape=lambda x: (S((), jnp.int32), S((), x.dtype), S((), x.dtype)))
def stats_of_a_small_tile_padded(x, s, mx, mn):          # the hint, followed
  v = x.at[ml.ds(0, 8), ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 24, other=0)
  s[...] = ml.sum(v)
  mx[...] = ml.max(ml.where(ml.arange(32)[None, :] < 24, v, -128))
  mn[...] = ml.min(ml.where(ml.arange(32)[None, :] < 24, v, 127))


def test_a_small_tile_reduced_by_a_max_or_min_is_padded_with_its_identity():
  """The hint padded with other=0 whatever reduced the tile: the min of positive data (or the max of
  negative data) followed it to 0."""
  # (a float32 read reduced whole is read padded by the compiler itself since probe 45e, with the min's identity;
  # a (3, 40) one is also read whole as the vector of its 120 elements since probe 45a)
  for shape in ((3, 40), (3, 45)):
    xs = np.random.default_rng(2).random(shape).astype(np.float32) + 1
    assert float(min_of_a_small_tile(xs, interpret=True)) == float(xs.min()), shape
  x = np.random.default_rng(2).integers(-128, 128, (8, 24)).astype(np.int8)
  # (read padded by the compiler itself since probe 45g, each reduction's identity in the padding)
  assert [int(g) for g in stats_of_a_small_tile(x, interpret=True)] == [int(x.astype(np.int32).sum()), int(x.max()),
                                                                         int(x.min())]
  got = stats_of_a_small_tile_padded(jnp.asarray(x), interpret=True)
  assert [int(g) for g in got] == [int(x.astype(np.int32).sum()), int(x.max()), int(x.min())]
  _export(stats_of_a_small_tile_padded, S((8, 24), jnp.int8))


# ---------------------------------------------------------------- reductions of a scalar (jnp's of a 0-d array)
@mg.mgpu_kernel(out_shape=lambda x: (S((), x.dtype), S((), jnp.int32), S((), F32), S((), jnp.int8), S((), jnp.uint32)))
def reductions_of_scalars(x, a, b, c, d, e):
  v = x[...]
  a[...] = ml.sum(ml.sum(v))
  b[...] = ml.sum(ml.max(v > 0))
  c[...] = ml.mean(ml.min(v.astype(jnp.int32)))
  d[...] = ml.all(ml.any(v > 0)).astype(jnp.int8)
  e[...] = ml.sum(ml.max(v.astype(jnp.uint16)), axis=())


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def sum_of_a_scalar_along_an_axis(x, out):
  out[...] = ml.sum(ml.sum(x[...]), axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32))
def argmax_of_a_scalar(x, out):
  s = ml.sum(x[...])
  out[...] = ml.argmax(s)


def test_a_scalar_reduces_to_itself_as_jnp_reduces_a_0_d_array():
  """ml.sum(s) of a full reduction's scalar was an error whose hint said to read a ref into
  registers (there was none); jnp.sum of a 0-d array is the value, a bool summed as int32."""
  x = np.random.default_rng(3).standard_normal(256).astype(np.float32) * 40
  got = reductions_of_scalars(jnp.asarray(x), interpret=True)
  want = (x.sum(), int(x.max() > 0), float(x.astype(np.int32).min()), int(bool((x > 0).any())),
          int(jnp.asarray(x).astype(jnp.uint16).max()))
  assert [g.dtype for g in got] == [np.float32, np.int32, np.float32, np.int8, np.uint32]
  np.testing.assert_allclose(float(got[0]), want[0], rtol=1e-5)
  assert [float(g) for g in got[1:]] == [float(w) for w in want[1:]]
  _export(reductions_of_scalars, S((256,), F32))
  expect(sum_of_a_scalar_along_an_axis, [S((256,), F32)], mg.KernelTypeError, "ml.sum(ml.sum(x[...]), axis=0)",
         "ml.sum reduces a register tensor, got a scalar and axis=0 (a scalar has no axes)",
         hint="ml.sum(ml.sum(x[...])) with no axis is the scalar itself")
  expect(argmax_of_a_scalar, [S((256,), F32)], mg.KernelTypeError, "ml.argmax(s)",
         "ml.argmax takes a register tensor and one static axis or None",
         hint="ml.argmax indexes a tensor: the index into a scalar would be 0")


# ---------------------------------------------------------------- jnp's where=, dtype= and initial= keywords
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def sum_where(x, out):
  v = x[...]
  out[...] = ml.sum(v, axis=1, where=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def mean_where(x, out):
  v = x[...]
  out[...] = ml.mean(v, axis=1, where=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32))
def min_where_int(x, out):
  v = x[...]
  out[...] = ml.argmin(v, axis=1, where=v > 0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def sum_dtype(x, out):
  out[...] = ml.sum(x[...] * 2, axis=1, dtype=jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def max_initial(x, out):
  out[...] = ml.max(x[...], axis=1, initial=0.0)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32), S((x.shape[0],), jnp.int32)))
def where_hints_followed(x, s, m, n):
  v = x[...]
  s[...] = ml.sum(ml.where(v > 0, v, 0), axis=1)
  m[...] = ml.sum(ml.where(v > 0, v, 0), axis=1) / ml.sum(v > 0, axis=1).astype(jnp.float32)
  w = (v * 10).astype(jnp.int32)
  n[...] = ml.min(ml.where(w > 0, w, 2147483647), axis=1)


def test_jnp_reduction_keywords_are_hinted_in_the_users_names():
  """`ml.sum(v, axis=1, where=m)` (jnp's where=) was told only the signature; the hint now writes
  the select (the identity of the reduction and dtype) and the dtype's conversion, with the user's
  operands and axis. jnp's where= of ml.sum (38g), ml.mean and initial= of ml.max (39e) are taken."""
  x = np.random.default_rng(4).standard_normal((8, 64)).astype(np.float32)
  np.testing.assert_allclose(sum_where(jnp.asarray(x), interpret=True), jnp.sum(x, 1, where=x > 0), rtol=1e-5)  # (38g)
  np.testing.assert_allclose(mean_where(jnp.asarray(x), interpret=True), jnp.mean(x, 1, where=x > 0), rtol=1e-5)
  np.testing.assert_array_equal(max_initial(jnp.asarray(x), interpret=True), jnp.max(x, 1, initial=0.0))
  expect(min_where_int, [S((8, 64), jnp.int32)], mg.KernelTypeError, "ml.argmin(v, axis=1, where=v > 0)",
         "ml.argmin: got an unexpected keyword argument 'where'",
         hint="select the elements first, the others set to what the reduction ignores:"
              " ml.argmin(ml.where(v > 0, v, 2147483647), axis=1); ml.argmin(x, axis=None, keepdims=False,"
              " tie_break_left=True)")
  x16 = np.random.default_rng(5).standard_normal((8, 64)).astype(np.float16)
  got = sum_dtype(jnp.asarray(x16), interpret=True)   # jnp's dtype= is taken since probe 29g
  np.testing.assert_allclose(got, jnp.sum(x16.astype(np.float32) * 2, axis=1), rtol=1e-5)
  s, m, n = where_hints_followed(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(s, jnp.sum(x, 1, where=x > 0), rtol=1e-5)
  np.testing.assert_allclose(m, jnp.mean(x, 1, where=x > 0), rtol=1e-5)
  w = (x * 10).astype(np.int32)
  np.testing.assert_array_equal(n, jnp.min(w, 1, where=w > 0, initial=2147483647))
  _export(where_hints_followed, S((8, 64), F32))


# ---------------------------------------------------------------- jnp's array methods argmax, argmin, cumsum, cumprod
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), jnp.int32), S((x.shape[1],), jnp.int32), S(x.shape, F32),
                                     S((x.shape[0],), F32)))
def reduction_methods(x, a, b, c, d):
  v = x[...]
  a[...] = v.argmax(axis=1)
  b[...] = v.argmin(0)
  c[...] = v.cumsum(axis=1)
  d[...] = v.cumprod(axis=1)[:, -1]


def test_argmax_argmin_cumsum_and_cumprod_are_methods_as_on_jnp_arrays():
  """`v.argmax(axis=1)` was an error (a register tensor has no attribute 'argmax')."""
  x = np.random.default_rng(5).standard_normal((8, 32)).astype(np.float32)
  a, b, c, d = reduction_methods(jnp.asarray(x), interpret=True)
  np.testing.assert_array_equal(a, np.argmax(x, 1))
  np.testing.assert_array_equal(b, np.argmin(x, 0))
  np.testing.assert_allclose(c, np.cumsum(x, 1), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(d, np.prod(x, 1), rtol=1e-5, atol=1e-6)
  _export(reduction_methods, S((8, 32), F32))


# ---------------------------------------------------------------- a statistic of a 3-D tensor is named as written
@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2] + (1,), x.dtype))
def logsumexp_3d(x, out):
  out[...] = ml.logsumexp(x[...], axis=2, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], x.dtype))
def var_3d(x, out):
  out[...] = ml.var(x[...], axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def softmax_3d(x, out):
  out[...] = ml.softmax(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], jnp.int32))
def argmax_3d(x, out):
  out[...] = ml.argmax(x[...], axis=-1)


def test_a_statistic_over_an_axis_of_a_3_d_tensor_is_named_as_the_user_wrote_it():
  """ml.logsumexp and ml.softmax were reported as 'ml.max over axis ...', ml.var as 'ml.sum', and
  ml.argmax's axis -1 as 'axis 2'."""
  # (probe 43a: the (2, 4) statistic computes; probe 39a: the (2, 4, 1) keepdims one; probe 44a: stored whole, 8
  # elements, it is stored an element at a time)
  x = jnp.asarray(np.random.default_rng(28).standard_normal((2, 4, 128)), F32)
  np.testing.assert_allclose(var_3d(x, interpret=True), jnp.var(x, -1), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(argmax_3d(x, interpret=True), jnp.argmax(x, -1))
  np.testing.assert_allclose(logsumexp_3d(x, interpret=True), jax.nn.logsumexp(x, 2, keepdims=True), rtol=1e-5)
  x = np.random.default_rng(29).standard_normal((2, 4, 128)).astype(np.float32)   # a middle axis: since 38j
  e = np.exp(x - x.max(1, keepdims=True))
  np.testing.assert_allclose(softmax_3d(jnp.asarray(x), interpret=True), e / e.sum(1, keepdims=True), rtol=1e-5)


# ---------------------------------------------------------------- the padded window is the one the user read
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def one_row_in_chunks(x, out):
  acc = ml.zeros((x.shape[0],), F32)
  for c in range(x.shape[1] // 64):
    acc += ml.sum(x.at[:, ml.ds(c * 64, 64)][...], axis=1)
  out[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def one_row_in_chunks_padded(x, out):          # the hint, followed
  acc = ml.zeros((4,), F32)
  for c in range(x.shape[1] // 64):
    acc += ml.sum(x.at[ml.ds(0, 4), ml.ds(c * 64, 64)].load(mask=(ml.arange(4) < 1)[:, None], other=0.0), axis=1)
  out.at[ml.ds(0, 4)].store(acc, mask=ml.arange(4) < 1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2]), F32))
def column_sums_per_batch(x, out):
  for i in ml.static_range(x.shape[0]):
    out.at[i][...] = ml.sum(x.at[i][...], axis=0)


def test_the_padded_window_of_a_hint_is_the_window_the_user_read():
  """The rows hint said `x.at[ml.ds(r0, 4), :]` for a read of x.at[:, ml.ds(c * 64, 64)] (its column
  window lost), and a read in an ml.static_range loop, x.at[i], was shown as x.at[0, ...]: the first
  trip's index."""
  # (since probe 40m the one row of a (1, 64) tile sums as the full reduction, and since probe 48a a loop carries
  # a one-element tensor as its element: the kernel computes)
  x = np.random.default_rng(6).standard_normal((1, 320)).astype(np.float32)
  np.testing.assert_allclose(one_row_in_chunks(jnp.asarray(x), interpret=True), x.sum(1), rtol=1e-5)
  _export(one_row_in_chunks, S((1, 320), F32))
  np.testing.assert_allclose(one_row_in_chunks_padded(jnp.asarray(x), interpret=True), x.sum(1), rtol=1e-5)
  _export(one_row_in_chunks_padded, S((1, 320), F32))
  builds(column_sums_per_batch, S((4, 16, 40), F32))     # (now compiled: tiles narrower than a warp take fewer lanes a row, tests/test_narrow_rows.py)


# ---------------------------------------------------------------- a statistic copied out by TMA too narrow for it
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_max_through_smem(x, out):
  s = ml.smem((x.shape[0],), x.dtype)
  s[...] = ml.max(x[...], axis=1)
  ml.copy(s, out)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype))
def row_max_stored(x, out):          # the hint, followed
  out[...] = ml.max(x[...], axis=1)


def test_a_tma_store_too_narrow_is_told_to_store_from_registers():
  """The hint said to *read* out into registers (out[...]) and to reshape a 1-D array with
  out.reshape(-1), for a copy *into* a 3-element output: neither applies."""
  expect(row_max_through_smem, [S((3, 128), F32)], mg.TmaLimitError, "ml.copy(s, out)",
         "TMA copies need the last dimension to span a multiple of 16 bytes; 3 x 4 bytes = 12",
         hint="out's rows are 12 bytes, so no window of them is: store the value from registers instead of copying"
              " it through SMEM (out[...] = value)")
  x = np.random.default_rng(7).standard_normal((3, 128)).astype(np.float32)
  np.testing.assert_array_equal(row_max_stored(jnp.asarray(x), interpret=True), x.max(1))
  _export(row_max_stored, S((3, 128), F32))


# ---------------------------------------------------------------- a reverse scan of a padded tile
@mg.mgpu_kernel(out_shape=lambda x: x)
def reverse_cummax_of_a_small_tile(x, out):
  out[...] = ml.cummax(x[...], axis=1, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def reverse_cumprod_of_a_small_tile(x, out):
  out[...] = ml.cumprod(x[...], axis=0, reverse=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def reverse_cummax_padded(x, out):          # the hint, followed
  v = x.at[ml.ds(0, 8), ml.ds(0, 32)].load(mask=ml.arange(32)[None, :] < 24, other=float('-inf'))
  out.at[ml.ds(0, 8), ml.ds(0, 32)].store(ml.cummax(v, axis=1, reverse=True), mask=ml.arange(32)[None, :] < 24)


def test_a_reverse_scan_of_a_padded_tile_is_padded_with_its_identity():
  """A reverse scan starts from the padding: padded with other=0 as the hint said, a reverse cummax
  of negative data was 0 everywhere (silently wrong), and a reverse cumprod 0. The hint then padded with the
  identity; since probe 46h the compiler reads such a tile padded itself, its identity in the padding."""
  x = np.random.default_rng(9).standard_normal((8, 24)).astype(np.float32) - 5
  np.testing.assert_array_equal(reverse_cummax_of_a_small_tile(jnp.asarray(x), interpret=True),
                                jax.lax.cummax(jnp.asarray(x), 1, reverse=True))
  i = np.random.default_rng(10).integers(-3, 4, (3, 40)).astype(np.int32)
  np.testing.assert_array_equal(reverse_cumprod_of_a_small_tile(jnp.asarray(i), interpret=True),
                                np.flip(np.cumprod(np.flip(i, 0), axis=0), 0))
  x = np.random.default_rng(8).standard_normal((8, 24)).astype(np.float32) - 5
  np.testing.assert_array_equal(reverse_cummax_padded(jnp.asarray(x), interpret=True),
                                jax.lax.cummax(jnp.asarray(x), 1, reverse=True))
  _export(reverse_cummax_padded, S((8, 24), F32))


# ---------------------------------------------------------------- a 1-D vector padded to a multiple of 8
@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def max_of_100(x, out):
  out[...] = ml.max(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((), F32))
def mean_of_100(x, out):
  out[...] = ml.mean(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((), x.dtype))
def max_of_100_padded(x, out):          # the hint, followed
  out[...] = ml.max(x.at[ml.ds(0, 104)].load(mask=ml.arange(104) < 100, other=-128))


def test_a_short_vector_is_padded_with_what_its_reduction_ignores():
  """The 1-D hint said `ref.at[ml.ds(start, 104)].load(..., other=0)` whatever reduced the vector:
  a max of negative data followed it to 0, and a mean divided by 104."""
  # (a float32 read reduced whole is read padded by the compiler itself since probe 45e: the mean divides by 100)
  xf = np.random.default_rng(9).standard_normal(100).astype(np.float32)
  np.testing.assert_allclose(np.asarray(mean_of_100(xf, interpret=True)), xf.mean(), rtol=1e-5)
  x = np.random.default_rng(9).integers(-100, -3, 100).astype(np.int8)
  assert int(max_of_100_padded(jnp.asarray(x), interpret=True)) == int(x.max())
  assert int(max_of_100(x, interpret=True)) == int(x.max())      # (read padded by the compiler since probe 45g)
  _export(max_of_100_padded, S((100,), jnp.int8))
