"""Probe 57a: the leftovers of session 43's probes, each an MG950 or MG003 before: integer division and remainder
by a run-time zero (jnp's numbers, XLA's rule), 2-D segment reductions past 64 segments, int32 products past 16384
result elements (and the hint past 32768), 16-bit cumsum/cumprod (checked: float32, closer than jnp), transposed
convs."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export

S = jax.ShapeDtypeStruct
I32 = jnp.int32


def _ints(shape, lo, hi, seed, dtype=np.int32):
  return np.random.default_rng(seed).integers(lo, hi, shape).astype(dtype)


# ---------------------------------------------------------------- integer division by a run-time zero
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x))
def divisions(x, y, q, r, f):
  a, b = x[...], y[...]
  q[...] = a // b
  r[...] = a % b
  f[...] = jnp.fmod(a, b)


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x))
def lax_divisions(x, y, q, r):
  q[...] = jax.lax.div(x[...], y[...])
  r[...] = jax.lax.rem(x[...], y[...])


@mg.mgpu_kernel(out_shape=lambda x, y: S((2,), x.dtype))
def scalar_divisions(x, y, o):
  a, b = x[0], y[0]
  o[0] = a // b
  o[1] = a % b


def _divisors(dtype, n=256):
  """Dividends of every sign (0, the lowest value) and divisors with zeros (and -1 for signed types)."""
  info = np.iinfo(dtype)
  x = _ints((n,), max(info.min, -1000), min(info.max, 1000), 1, dtype)
  y = (np.arange(n) % 5 - (2 if info.min < 0 else 0)).astype(dtype)
  x[:3] = [0, info.min, info.max]
  y[:3] = 0
  if info.min < 0:
    x[3], y[3] = info.min, -1
  return x, y


DTYPES = [np.int32, np.uint32, np.int16, np.uint16, np.int8, np.uint8]


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_integer_division_by_a_run_time_zero_is_jnps(dtype):
  """It was MG950 ("integer // by zero (undefined on the GPU)"); jnp defines it (XLA's x / 0 is -1, all bits
  set, and x % 0 is x; jnp's % and fmod make the divisor 1): x // 0 is -2 (-1 where x is 0; unsigned: the
  largest value), x % 0 and jnp.fmod(x, 0) are 0, lax.div(x, 0) is -1 and lax.rem(x, 0) is x. Interpret mode
  computes jnp's numbers; the GPU's division takes the zero apart (lowering/elementwise._zero_safe_*)."""
  x, y = _divisors(dtype)
  want = [x // jnp.asarray(y), jnp.asarray(x) % y, jnp.fmod(x, y)]
  for g, w in zip(divisions(x, y, interpret=True), want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  for g, w in zip(lax_divisions(x, y, interpret=True), [jax.lax.div(x, y), jax.lax.rem(x, y)]):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  export(divisions, x, y)
  export(lax_divisions, x, y)


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_scalar_division_by_a_run_time_zero_is_jnps(dtype):
  for a in (7, 0):
    x, y = np.array([a], dtype), np.zeros((1,), dtype)
    np.testing.assert_array_equal(np.asarray(scalar_divisions(x, y, interpret=True)),
                                  [np.asarray(jnp.asarray(x)[0] // y[0]), np.asarray(jnp.asarray(x)[0] % y[0])])
  export(scalar_divisions, x, y)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: d.__name__)
def test_integer_division_by_zero_on_the_gpu(dtype):
  x, y = _divisors(dtype)
  for g, w in zip(divisions(x, y), [x // jnp.asarray(y), jnp.asarray(x) % y, jnp.fmod(x, y)]):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  for g, w in zip(lax_divisions(x, y), [jax.lax.div(x, y), jax.lax.rem(x, y)]):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  if dtype in (np.int32, np.uint32):
    for a in (7, 0):
      xs, ys = np.array([a], dtype), np.zeros((1,), dtype)
      np.testing.assert_array_equal(np.asarray(scalar_divisions(xs, ys)),
                                    [np.asarray(jnp.asarray(xs)[0] // ys[0]), np.asarray(jnp.asarray(xs)[0] % ys[0])])


# ---------------------------------------------------------------- segment reductions of 2-D data past 64 segments
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x, ids: (S((100, x.shape[1]), x.dtype), S((96, x.shape[1]), x.dtype)))
def graph_messages(x, ids, total, peak):          # a graph's messages summed (and their max) per node
  m = x[...]
  total[...] = jax.ops.segment_sum(m, ids[...], num_segments=100)
  peak[...] = jax.ops.segment_max(m, ids[...], num_segments=96)


@mg.mgpu_kernel(out_shape=lambda y, tok: S((128, y.shape[1]), F32))
def unpermute_128(y, tok, out):                   # an MoE unpermute into 128 tokens
  out[...] = jnp.zeros((128, y.shape[1]), jnp.float32).at[tok[...]].add(y[...].astype(jnp.float32))


@mg.mgpu_kernel(out_shape=lambda x, ids: S((300, x.shape[1]), x.dtype))
def too_many_segments(x, ids, out):
  out[...] = jax.ops.segment_sum(x[...], ids[...], num_segments=300)


def test_segment_reductions_of_2d_data_take_up_to_256_segments():
  """jax.ops.segment_sum / segment_max of a tile's rows into 100 (96) segments, and `.at[ids].add` into 128 rows,
  were MG003 ("at most 64"); each segment is a select and a reduction of the whole tile, now up to 256 of them
  (ops/segments.SEGMENT_ROWS); past that MG003 keeps its hint (scatter atomically into the output)."""
  rng = np.random.default_rng(11)
  x = rng.standard_normal((256, 64)).astype(np.float32)
  ids = rng.integers(-3, 104, 256).astype(np.int32)
  total, peak = graph_messages(x, ids, interpret=True)
  np.testing.assert_allclose(total, jax.ops.segment_sum(x, ids, 100), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(peak, jax.ops.segment_max(x, ids, 96))
  y = rng.standard_normal((128, 32)).astype(jnp.bfloat16)
  tok = rng.integers(0, 128, 128).astype(np.int32)
  np.testing.assert_allclose(unpermute_128(y, tok, interpret=True),
                             jnp.zeros((128, 32)).at[tok].add(y.astype(np.float32)), rtol=1e-6, atol=1e-6)
  export(graph_messages, x, ids)
  export(unpermute_128, y, tok)
  with pytest.raises(mg.KernelTypeError) as info:
    too_many_segments.check(S((256, 64), F32), S((256,), I32))
  e = info.value
  assert e.message == ("jax.ops.segment_sum (as ml.segment_sum) of 2-D data reduces the tile once per segment, at"
                       " most 256; got num_segments=300") and "atomic_add" in e.hint


@pytest.mark.gpu
def test_segment_reductions_past_64_segments_on_the_gpu():
  rng = np.random.default_rng(12)
  x = rng.standard_normal((256, 64)).astype(np.float32)
  ids = rng.integers(-3, 104, 256).astype(np.int32)
  total, peak = graph_messages(x, ids)
  np.testing.assert_allclose(total, jax.ops.segment_sum(x, ids, 100), rtol=1e-5, atol=1e-5)
  np.testing.assert_array_equal(peak, jax.ops.segment_max(x, ids, 96))
  y = rng.standard_normal((128, 32)).astype(jnp.bfloat16)
  tok = rng.integers(0, 128, 128).astype(np.int32)
  np.testing.assert_allclose(unpermute_128(y, tok), jnp.zeros((128, 32)).at[tok].add(y.astype(np.float32)),
                             rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- int32 products of larger accumulators
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32))
def int_product(a, b, o):
  o[...] = jnp.dot(a[...], b[...])


def test_int32_products_of_up_to_32768_result_elements_compute():
  """jnp.dot of int32 tiles past (200, 24) x (24, 128) (an accumulator of more than 16384 elements) was MG003; the
  tensor cores take no int32, so the product is computed in registers: k rank-1 updates of the (m, n) accumulator
  where no k-chunk fits beside it (form_helpers.outer_dot), up to 32768 elements (jnp_einsum._ACC_MOST)."""
  rng = np.random.default_rng(5)
  for m, k, n in ((200, 24, 128), (64, 32, 512)):
    a = rng.integers(-1000, 1000, (m, k)).astype(np.int32)
    b = rng.integers(-1000, 1000, (k, n)).astype(np.int32)
    np.testing.assert_array_equal(int_product(a, b, interpret=True), jnp.dot(a, b))
    export(int_product, a, b)


def test_a_larger_int32_product_hints_pieces_of_rows_not_int32_tensor_cores():
  """Past 32768 elements MG003 stays; its hint staged int32 SMEM operands for ml.dot, which the tensor cores do not
  take (ml.dot's MG106): it now computes the product in pieces of rows (dot_hints._int32_hint), which compile."""
  with pytest.raises(mg.KernelError) as info:
    int_product.check(S((256, 64), I32), S((64, 256), I32))
  e = info.value
  assert e.code == "MG003"
  assert e.hint == ("the tensor cores take no 32-bit integers, and registers hold an int32 product of at most 32768"
                    " elements (256 x 256 here): compute it in pieces of 64 rows, each stored: for r in"
                    " ml.static_range(0, 256, 64): out[r:r + 64, :] = jnp.dot(a[r:r + 64, :], b[...])")
  a = np.random.default_rng(6).integers(-50, 50, (256, 64)).astype(np.int32)
  b = np.random.default_rng(7).integers(-50, 50, (64, 256)).astype(np.int32)
  np.testing.assert_array_equal(int_pieces(a, b, interpret=True), a @ b)
  export(int_pieces, a, b)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.int32))
def int_pieces(a, b, out):                         # the hint, followed
  for r in ml.static_range(0, 256, 64):
    out[r:r + 64, :] = jnp.dot(a[r:r + 64, :], b[...])


@pytest.mark.gpu
def test_int32_products_on_the_gpu():
  rng = np.random.default_rng(8)
  for m, k, n in ((200, 24, 128), (64, 32, 512)):
    a = rng.integers(-1000, 1000, (m, k)).astype(np.int32)
    b = rng.integers(-1000, 1000, (k, n)).astype(np.int32)
    np.testing.assert_array_equal(int_product(a, b), jnp.dot(a, b))


# ---------------------------------------------------------------- 16-bit cumulative sums and products
@mg.mgpu_kernel(out_shape=lambda x, p: (x, p))
def scans16(x, p, s, q):
  s[...] = jnp.cumsum(x[...], axis=1)
  q[...] = jnp.cumprod(p[...], axis=1)


@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bfloat16", "float16"])
def test_16bit_cumsum_and_cumprod_accumulate_in_float32_closer_than_jnp(dtype):
  """Checked, kept: a 16-bit jnp.cumsum / cumprod accumulates in the 16-bit type, in an order of the platform's (on
  the CPU XLA rewrites lax.cumsum's reduce_window into a tree of 16-bit adds; on the GPU jax 0.11 lowers it to
  chlo.scan), so its bits are not one platform's. The kernel scans in float32 (its own tree order) and rounds each
  prefix once: within an ulp of the exact prefix where jnp's CPU result strays tens of ulps over 1024 elements."""
  rng = np.random.default_rng(9)
  x = rng.standard_normal((8, 1024)).astype(dtype)
  p = (1 + 0.01 * rng.standard_normal((8, 1024))).astype(dtype)
  s, q = scans16(x, p, interpret=True)
  frac = 7 if dtype == jnp.bfloat16 else 10

  def ulps(got, exact):           # |got - exact| in ulps of the 16-bit type at exact (at 1 for smaller values)
    return np.max(np.abs(np.asarray(got, np.float64) - exact) / 2.0 ** (np.floor(np.log2(np.maximum(
        np.abs(exact), 1.0))) - frac))
  exact = np.cumsum(x.astype(np.float64), axis=1)
  assert ulps(s, exact) <= 1.0 < ulps(jnp.cumsum(x, axis=1), exact)
  exact = np.cumprod(p.astype(np.float64), axis=1)
  assert ulps(q, exact) <= 1.0 < ulps(jnp.cumprod(p, axis=1), exact)
  export(scans16, x, p)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.bfloat16, jnp.float16], ids=["bfloat16", "float16"])
def test_16bit_scans_on_the_gpu_are_within_an_ulp(dtype):
  rng = np.random.default_rng(10)
  x = rng.standard_normal((8, 1024)).astype(dtype)
  p = (1 + 0.01 * rng.standard_normal((8, 1024))).astype(dtype)
  s, q = scans16(x, p)
  frac = 7 if dtype == jnp.bfloat16 else 10
  for got, exact in ((s, np.cumsum(x.astype(np.float64), axis=1)), (q, np.cumprod(p.astype(np.float64), axis=1))):
    assert np.max(np.abs(np.asarray(got, np.float64) - exact) / 2.0 ** (np.floor(np.log2(np.maximum(
        np.abs(exact), 1.0))) - frac)) <= 1.0


# ---------------------------------------------------------------- transposed convolutions (lhs dilation)
L = jax.lax


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 2 * x.shape[1], w.shape[2]), x.dtype))
def upsample1d(x, w, o):                          # an audio decoder's stride-2 transposed conv, channels last
  o[...] = L.conv_transpose(x[...], w[...], (2,), "SAME")


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 2 * x.shape[1], 2 * x.shape[2], w.shape[3]), x.dtype))
def upsample2d(x, w, o):                          # a U-Net decoder's 2x2 up-convolution, NHWC
  o[...] = L.conv_transpose(x[...], w[...], (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"))


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 2 * x.shape[1], x.shape[2]), x.dtype))
def depthwise_dilated(x, w, o):                   # conv_general_dilated's own lhs_dilation, one channel a filter
  o[...] = L.conv_general_dilated(x[...], w[...], (1,), [(1, 2)], lhs_dilation=(2,),
                                  dimension_numbers=("NWC", "WIO", "NWC"), feature_group_count=x.shape[2])


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 2 * x.shape[1], w.shape[2]), x.dtype))
def upsample_valid_cut(x, w, o):                  # VALID of a kernel 2 wide at stride 2: hi padding 1 = d - 1
  o[...] = L.conv_transpose(x[...], w[...], (2,), "VALID")


def test_transposed_convs_compute_as_jax():
  """lax.conv_transpose and conv_general_dilated with lhs_dilation were MG003; conv_transpose is jax's definition
  (window_forms.conv_transpose: unit strides, lhs_dilation = strides, its transposed padding), and a dilated lhs is
  each spatial axis repeated and selected to zeros between its elements (window_forms._dilated), then conv's taps:
  products on the tensor cores where channels mix (TF32 for float32, as XLA's GPU conv; hence the tolerance), exact
  float32 taps for a depthwise one."""
  rng = np.random.default_rng(13)
  x = rng.standard_normal((1, 64, 32)).astype(np.float32)
  w = (0.2 * rng.standard_normal((3, 32, 64))).astype(np.float32)
  hi = dict(precision="highest")
  np.testing.assert_allclose(upsample1d(x, w, interpret=True), L.conv_transpose(x, w, (2,), "SAME", **hi),
                             rtol=2e-2, atol=3e-2)
  w2 = (0.2 * rng.standard_normal((2, 32, 32))).astype(np.float32)
  np.testing.assert_allclose(upsample_valid_cut(x, w2, interpret=True), L.conv_transpose(x, w2, (2,), "VALID", **hi),
                             rtol=2e-2, atol=3e-2)
  x2 = rng.standard_normal((1, 8, 8, 32)).astype(np.float32)
  k2 = (0.2 * rng.standard_normal((3, 3, 32, 32))).astype(np.float32)
  np.testing.assert_allclose(upsample2d(x2, k2, interpret=True),
                             L.conv_transpose(x2, k2, (2, 2), "SAME", dimension_numbers=("NHWC", "HWIO", "NHWC"),
                                              **hi),
                             rtol=2e-2, atol=3e-2)
  wd = rng.standard_normal((3, 1, 32)).astype(np.float32)
  np.testing.assert_allclose(depthwise_dilated(x, wd, interpret=True),
                             L.conv_general_dilated(x, wd, (1,), [(1, 2)], lhs_dilation=(2,), feature_group_count=32,
                                                    dimension_numbers=("NWC", "WIO", "NWC"), **hi),
                             rtol=1e-5, atol=1e-5)
  export(upsample1d, x, w)
  export(upsample2d, x2, k2)
  export(depthwise_dilated, x, wd)


@pytest.mark.gpu
def test_transposed_convs_on_the_gpu():
  rng = np.random.default_rng(14)
  x = rng.standard_normal((1, 64, 32)).astype(np.float32)
  w = (0.2 * rng.standard_normal((3, 32, 64))).astype(np.float32)
  np.testing.assert_allclose(upsample1d(x, w), L.conv_transpose(x, w, (2,), "SAME", precision="highest"),
                             rtol=2e-2, atol=3e-2)
  x2 = rng.standard_normal((1, 8, 8, 32)).astype(np.float32)
  k2 = (0.2 * rng.standard_normal((3, 3, 32, 32))).astype(np.float32)
  np.testing.assert_allclose(upsample2d(x2, k2), L.conv_transpose(x2, k2, (2, 2), "SAME", precision="highest",
                                                                  dimension_numbers=("NHWC", "HWIO", "NHWC")),
                             rtol=2e-2, atol=3e-2)
  wd = rng.standard_normal((3, 1, 32)).astype(np.float32)
  np.testing.assert_allclose(depthwise_dilated(x, wd), L.conv_general_dilated(
      x, wd, (1,), [(1, 2)], lhs_dilation=(2,), feature_group_count=32, dimension_numbers=("NWC", "WIO", "NWC"),
      precision="highest"), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=(4,))
def proven_divisors(x, y, o):
  i = ml.program_id(0)
  n = ml.num_programs(0)
  o[i] = x[i] // n + x[i] % (i + 1) + x[i] // y[i]     # two divisors the grid knows, one of data


def test_a_divisor_the_grid_knows_non_zero_keeps_its_plain_division():
  """The zero guard costs a compare and two selects a division; a scalar divisor the grid evaluation knows non-zero
  in every program (`ml.num_programs`, `i + 1`) is marked `nonzero` (frontend/checks.py) and keeps the plain
  division (the examples' MLIR unchanged), one read from data is guarded."""
  text = proven_divisors.typed_ir(S((4,), I32), S((4,), I32))
  divisions = [line for line in text.splitlines() if "binary kind=floordiv" in line or "binary kind=mod" in line]
  assert len(divisions) == 3 and sum("nonzero=True" in line for line in divisions) == 2, text
  x, y = np.array([7, -7, 9, 0], np.int32), np.array([2, 0, -3, 0], np.int32)
  np.testing.assert_array_equal(proven_divisors(x, y, interpret=True),
                                x // 4 + x % (np.arange(4) + 1) + np.asarray(jnp.asarray(x) // y))
