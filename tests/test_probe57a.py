"""Probe 57a: the leftovers of session 43's probes, each an MG950 or MG003 before: integer division and remainder
by a run-time zero (jnp's numbers, XLA's rule), ..."""
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
