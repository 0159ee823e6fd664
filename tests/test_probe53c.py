"""Probe 53c (semantics the lowering got differently from jax). What was wrong or refused:

- `jax.lax.top_k` / `ml.top_k` of rows holding both +0.0 and -0.0 ordered the zeros by position, where jax's top_k
  (XLA's TopK) compares floats in their total order, +0.0 above -0.0 (and a NaN by its sign bit): the indices
  differed. The top_k now sorts integer keys of the float's bits that order as the total order and map back to the
  same bits (frontend/ops/sort.py, total_sort). `jnp.partition` and `jnp.argpartition` of floats are now jax's own
  formula, two top_ks (frontend/form_helpers.py), so their zeros agree with jnp's too;
- a float16 or bfloat16 `ml.atomic_xchg` (single element, window or scatter), and a 16-bit `ml.atomic_max` /
  `ml.atomic_min` whose old values are used (or of a single element, used or not) were MG106 or MG204: PTX has no
  16-bit atom exch, max or min. They are now a loop of `atom.cas.b16` on the element itself
  (lowering/atomic_rmw.py, _half_cas_loop), np.fmax's and np.fmin's numbers as interpret mode's.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect
from probe_util import export

S = jax.ShapeDtypeStruct
F32, BF16, F16, I32 = jnp.float32, jnp.bfloat16, jnp.float16, jnp.int32


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


def _bits(x):
  """The bits of a float array (16-bit floats widened exactly), to tell -0.0 from +0.0."""
  return np.asarray(x, np.float32).view(np.int32)


def _bits_nan(x):
  """_bits with every NaN's payload made the canonical one, its sign kept: XLA's top_k on the GPU returns a
  bfloat16 NaN as 0x7fff, where the kernel keeps the input's 0x7fc0 (a payload no op promises)."""
  b = _bits(x)
  return np.where(np.isnan(np.asarray(x, np.float32)), (b & np.int32(-2**31)) | np.int32(0x7fc00000), b)


def _zeros_rows(shape, dtype, seed):
  """Halves with many signed zeros and a few NaNs: ties that the order of the zeros decides."""
  rng = np.random.default_rng(seed)
  z = rng.integers(-2, 2, shape).astype(np.float32) * 0.5       # (-1 to 0.5: zeros reach the top k)
  z[rng.random(shape) < 0.3] = -0.0
  z[rng.random(shape) < 0.05] = np.nan
  return z.astype(dtype)


# ---------------------------------------------------------------- top_k and partitions of signed zeros
@mg.mgpu_kernel(out_shape=lambda x, *, k: (S((*x.shape[:-1], k), x.dtype), S((*x.shape[:-1], k), I32)))
def lax_top_k(x, v, i, *, k: ml.constexpr):
  vals, idx = jax.lax.top_k(x[...], k)
  v[...] = vals
  i[...] = idx


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 4), I32))
def router_top4(x, i):
  _, idx = ml.top_k(x[...] * 1.0, 4)      # (a (5, 96) read no register tensor holds: computed padded)
  i[...] = idx


@pytest.mark.parametrize("shape,dtype,k", [((8, 32), F32, 8), ((8, 32), BF16, 8), ((64,), F16, 32),
                                           ((4, 2, 32), F32, 32)], ids=str)
def test_top_k_orders_signed_zeros_as_jax(shape, dtype, k):
  x = _zeros_rows(shape, dtype, len(shape) + k)
  v, i = lax_top_k(x, k=k, interpret=True)
  want_v, want_i = jax.lax.top_k(jnp.asarray(x), k)
  np.testing.assert_array_equal(np.asarray(i), np.asarray(want_i))
  np.testing.assert_array_equal(_bits(v), _bits(want_v))


def test_top_k_of_a_padded_read_orders_signed_zeros():
  x = _zeros_rows((5, 96), F32, 3)
  x[x > 0] = 0.0                          # (the top 4 of each row are zeros)
  np.testing.assert_array_equal(np.asarray(router_top4(x, interpret=True)),
                                np.asarray(jax.lax.top_k(jnp.asarray(x), 4)[1]))


@mg.mgpu_kernel(out_shape=lambda x, *, kth, axis: (x, S(x.shape, I32)))
def partitions(x, p, a, *, kth: ml.constexpr, axis: ml.constexpr):
  v = x[...]
  p[...] = jnp.partition(v, kth, axis=axis)
  a[...] = jnp.argpartition(v, kth, axis=axis)


@pytest.mark.parametrize("shape,kth,axis", [((8, 64), 5, 1), ((64, 8), 2, 0), ((64,), 10, 0)], ids=str)
def test_partition_is_jax_with_signed_zeros(shape, kth, axis):
  x = _zeros_rows(shape, F32, kth)
  p, a = partitions(x, kth=kth, axis=axis, interpret=True)
  np.testing.assert_array_equal(_bits(p), _bits(jnp.partition(jnp.asarray(x), kth, axis=axis)))
  np.testing.assert_array_equal(np.asarray(a), np.asarray(jnp.argpartition(jnp.asarray(x), kth, axis=axis)))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
def test_top_k_and_partitions_on_the_gpu():
  x = _zeros_rows((8, 32), BF16, 4)
  for got, want in zip(lax_top_k(x, k=8), jax.lax.top_k(jnp.asarray(x), 8)):
    np.testing.assert_array_equal(_bits_nan(got), _bits_nan(want))
  x = _zeros_rows((8, 64), F32, 5)
  p, a = partitions(x, kth=5, axis=1)
  # (against interpret mode, which the CPU test holds to jnp's: XLA on the GPU partitions rows with NaNs otherwise,
  # jnp.partition being lax.top_k of -x there, whose NaN order is the GPU's; session 44's H100 run)
  wp, wa = partitions(x, kth=5, axis=1, interpret=True)
  np.testing.assert_array_equal(_bits_nan(p), _bits_nan(wp))
  np.testing.assert_array_equal(np.asarray(a), np.asarray(wa))


# ---------------------------------------------------------------- 16-bit xchg, max and min with old values
@mg.mgpu_kernel(out_shape=lambda x: (S((1,), x.dtype), S(x.shape, x.dtype)), grid=lambda x: (x.shape[0],))
def swap_in(x, o, old):
  i = ml.program_id(0)
  old[i] = ml.atomic_xchg(o.at[0], x[i])


@mg.mgpu_kernel(out_shape=lambda x, *, kind: (S((1,), x.dtype), S(x.shape, x.dtype)), grid=lambda x, *, kind:
                (x.shape[0],))
def running_extreme(x, o, old, *, kind: ml.constexpr):
  i = ml.program_id(0)
  if kind == "max":
    old[i] = ml.atomic_max(o.at[0], x[i])
  else:
    old[i] = ml.atomic_min(o.at[0], x[i])


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype), grid=lambda x: (x.shape[0],))
def amax_statement(x, o):
  ml.atomic_max(o.at[0], x[ml.program_id(0)])


@mg.mgpu_kernel(out_shape=lambda x: tuple(S(x.shape, x.dtype) for _ in range(5)))
def window_olds(x, a, b, c, d, e):
  v = x[...]
  a[...] = ml.atomic_xchg(b.at[...], v)       # b: 0 before, v after
  c[...] = ml.atomic_min(d.at[...], v)        # d: inf before, v after
  e[...] = ml.atomic_min(d.at[...], v * 0.5)  # then its min with v / 2


@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_half_xchg_returns_the_element_it_replaced(dtype):
  x = np.random.default_rng(1).standard_normal(6).astype(dtype)
  o, old = swap_in(x, interpret=True)     # (interpret mode runs the programs in order)
  np.testing.assert_array_equal(_bits(old), _bits(np.concatenate([[0], x[:-1]]).astype(dtype)))
  np.testing.assert_array_equal(_bits(o), _bits(x[-1:]))


@pytest.mark.parametrize("kind,dtype", [("max", F16), ("min", BF16)], ids=str)
def test_half_max_min_return_the_running_extreme(kind, dtype):
  x = np.random.default_rng(2).standard_normal(8).astype(dtype)
  x[3] = np.nan                           # (a NaN value leaves the element as it is, as np.fmax)
  start = -np.inf if kind == "max" else np.inf
  acc = (np.fmax if kind == "max" else np.fmin).accumulate(np.concatenate([[start], np.asarray(x, np.float32)]))
  o, old = running_extreme(x, kind=kind, interpret=True)
  np.testing.assert_array_equal(np.asarray(old, np.float32), acc[:-1])
  np.testing.assert_array_equal(np.asarray(o, np.float32), acc[-1:])
  np.testing.assert_array_equal(np.asarray(amax_statement(x, interpret=True), np.float32),
                                np.fmax.reduce(np.asarray(x, np.float32), keepdims=True))


@pytest.mark.parametrize("shape,dtype", [((128,), BF16), ((8, 64), F16), ((48,), F16)], ids=str)
def test_half_window_xchg_and_min_old_values(shape, dtype):
  x = np.random.default_rng(3).standard_normal(shape).astype(dtype)
  a, b, c, d, e = window_olds(x, interpret=True)
  np.testing.assert_array_equal(_bits(a), _bits(np.zeros(shape, dtype)))
  np.testing.assert_array_equal(_bits(b), _bits(x))
  np.testing.assert_array_equal(np.asarray(c, np.float32), np.full(shape, np.inf))
  np.testing.assert_array_equal(_bits(e), _bits(x))
  np.testing.assert_array_equal(_bits(d), _bits(np.fmin(np.asarray(x, np.float32),
                                                        np.asarray(x * dtype(0.5), np.float32))))


def test_probe53c_kernels_build_for_the_gpu():
  export(lax_top_k, _zeros_rows((8, 32), BF16, 0), k=8)
  export(router_top4, _zeros_rows((5, 96), F32, 0))
  export(partitions, _zeros_rows((8, 64), F32, 0), kth=5, axis=1)
  x = np.ones(8, F16)
  export(swap_in, x)
  export(running_extreme, x, kind="max")
  export(running_extreme, x.astype(BF16), kind="min")
  export(amax_statement, x)
  export(window_olds, np.ones((8, 64), BF16))
  export(window_olds, np.ones((48,), F16))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
@pytest.mark.parametrize("dtype", [F16, BF16], ids=str)
def test_half_atomics_on_the_gpu(dtype):
  x = (np.random.default_rng(4).permutation(64) - 32).astype(dtype)    # distinct values
  o, old = swap_in(x)                     # every value but the last one in goes back out once
  np.testing.assert_array_equal(np.sort(np.concatenate([np.asarray(old, np.float32), np.asarray(o, np.float32)])),
                                np.sort(np.concatenate([[0], np.asarray(x, np.float32)])))
  for kind, red in (("max", np.max), ("min", np.min)):
    o, old = running_extreme(x, kind=kind)
    assert float(o[0]) == red(np.asarray(x, np.float32))
    olds, xs = np.asarray(old, np.float32), np.asarray(x, np.float32)
    # each program saw the extreme of those that ran before it (or the start): the first one the start, the others
    # a value of x, never their own (the values are distinct), and the program of the extreme a lesser one (the
    # programs run in any order: those after the extreme's all see it)
    assert np.sum(np.isinf(olds)) == 1 and np.isin(olds[~np.isinf(olds)], xs).all()
    assert (olds != xs).all()
    assert olds[np.argmax(xs) if kind == "max" else np.argmin(xs)] != float(o[0])
  np.testing.assert_array_equal(np.asarray(amax_statement(x), np.float32), [np.max(np.asarray(x, np.float32))])
  w = np.random.default_rng(5).standard_normal((8, 64)).astype(dtype)
  for got, want in zip(window_olds(w), window_olds(w, interpret=True)):
    np.testing.assert_array_equal(_bits(got), _bits(want))


# ---------------------------------------------------------------- lax.reduce_window of a register tile (pooling)
L = jax.lax
_POOLS = {     # name -> (the pooling, the result's shape of a (16, 64) tile)
    "max2x2": (lambda v: L.reduce_window(v, -jnp.inf, L.max, (2, 2), (2, 2), "VALID"), (8, 32)),
    "max3x3_same": (lambda v: L.reduce_window(v, -jnp.inf, L.max, (3, 3), (1, 1), "SAME"), (16, 64)),
    "avg2x2": (lambda v: L.reduce_window(v, 0.0, L.add, (2, 2), (2, 2), "VALID") / 4, (8, 32)),
    "min_rows_pad": (lambda v: L.reduce_window(v, jnp.inf, L.min, (5, 1), (1, 1), ((2, 2), (0, 0))), (16, 64)),
    "sum_valid3": (lambda v: L.reduce_window(v, 0.0, L.add, (1, 3), (1, 1), "VALID"), (16, 62)),
    "max3x3_s2_pad1": (lambda v: L.reduce_window(v, -jnp.inf, L.max, (3, 3), (2, 2), ((1, 1), (1, 1))), (8, 32)),
    "sum3x3_s2_same": (lambda v: L.reduce_window(v, 0.0, L.add, (3, 3), (2, 2), "SAME"), (8, 32)),
    "max_dilated_same": (lambda v: L.reduce_window(v, -jnp.inf, L.max, (3, 3), (1, 1), "SAME", window_dilation=(2, 2)),
                         (16, 64)),
}


@mg.mgpu_kernel(out_shape=lambda x, *, pool: S(_POOLS[pool][1], x.dtype))
def pooled(x, o, *, pool: ml.constexpr):
  o[...] = _POOLS[pool][0](x[...])


@pytest.mark.parametrize("pool", sorted(_POOLS))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_reduce_window_of_a_register_tile_is_laxs(pool, dtype):
  x = np.random.default_rng(6).standard_normal((16, 64)).astype(dtype)
  x[3, 5] = np.nan
  want = np.asarray(_POOLS[pool][0](jnp.asarray(x)), np.float32)
  got = np.asarray(pooled(x, pool=pool, interpret=True), np.float32)
  if "max" in pool or "min" in pool:        # (exact; a sum's order of additions is XLA's own)
    np.testing.assert_array_equal(got, want)
  elif dtype == F32:
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  else:                                     # (a bfloat16 sum in float32, rounded once: jnp.sum's way, where XLA's
    want = np.asarray(_POOLS[pool][0](jnp.asarray(x, F32)).astype(BF16), np.float32)   # CPU adds in bfloat16)
    np.testing.assert_allclose(got, want, rtol=8e-3, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: (S((4, 4, 16), x.dtype), S((64,), jnp.int32)))
def pooled_nhwc_and_causal(x, o, c):
  o[...] = L.reduce_window(x[...], -jnp.inf, L.max, (2, 2, 1), (2, 2, 1), "VALID")     # an NHWC image's 2x2 max pool
  t = (x[...].reshape(-1)[:64] * 4).astype(jnp.int32)
  c[...] = L.reduce_window(t, jnp.iinfo(jnp.int32).min, L.max, (4,), (1,), ((3, 0),))   # a causal running max of 4


def test_reduce_window_of_3d_and_integer_tiles():
  x = np.random.default_rng(7).standard_normal((8, 8, 16)).astype(np.float32)
  o, c = pooled_nhwc_and_causal(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), np.asarray(L.reduce_window(x, -np.inf, L.max, (2, 2, 1), (2, 2, 1),
                                                                            "VALID")))
  t = (x.reshape(-1)[:64] * 4).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(c), np.asarray(L.reduce_window(t, np.iinfo(np.int32).min, L.max, (4,),
                                                                            (1,), ((3, 0),))))


def test_reduce_window_builds_for_the_gpu():
  for pool in ("max2x2", "min_rows_pad", "sum_valid3", "max3x3_s2_pad1"):
    export(pooled, np.ones((16, 64), BF16), pool=pool)
  export(pooled_nhwc_and_causal, np.ones((8, 8, 16), np.float32))


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
def test_reduce_window_on_the_gpu():
  x = np.random.default_rng(8).standard_normal((16, 64)).astype(np.float32)
  for pool in sorted(_POOLS):
    np.testing.assert_allclose(np.asarray(pooled(x, pool=pool)), np.asarray(pooled(x, pool=pool, interpret=True)),
                               rtol=1e-6, atol=1e-6)
  x = np.random.default_rng(9).standard_normal((8, 8, 16)).astype(np.float32)
  for got, want in zip(pooled_nhwc_and_causal(x), pooled_nhwc_and_causal(x, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


# ---------------------------------------------------------------- jax.image.resize of a register tile
_RESIZES = {     # name -> (the output shape of a (16, 64) tile, the method)
    "nearest_up2": ((32, 128), "nearest"),
    "nearest_down2": ((8, 32), "nearest"),
    "nearest_cols3": ((16, 192), jax.image.ResizeMethod.NEAREST),
    "bilinear_up2": ((32, 128), "bilinear"),
    "linear_rows2": ((32, 64), "linear"),
}


@mg.mgpu_kernel(out_shape=lambda x, *, how: S(_RESIZES[how][0], x.dtype))
def resized(x, o, *, how: ml.constexpr):
  o[...] = jax.image.resize(x[...], _RESIZES[how][0], _RESIZES[how][1])


@pytest.mark.parametrize("how", sorted(_RESIZES))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_resize_of_a_register_tile_is_jaxs(how, dtype):
  x = np.random.default_rng(10).standard_normal((16, 64)).astype(dtype)
  got = np.asarray(resized(x, how=how, interpret=True), np.float32)
  shape, method = _RESIZES[how]
  want = np.asarray(jax.image.resize(jnp.asarray(x), shape, method), np.float32)
  if "nearest" in how:
    np.testing.assert_array_equal(got, want)
  elif dtype == F32:                      # (jax's einsum of the weights: within an ulp or two)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
  else:                                   # (bfloat16: jax's float32 resize, rounded once)
    np.testing.assert_array_equal(got, np.asarray(jax.image.resize(jnp.asarray(x, F32), shape, method).astype(dtype),
                                                  np.float32))


def test_resize_builds_for_the_gpu():
  for how in ("nearest_up2", "nearest_down2", "bilinear_up2"):
    export(resized, np.ones((16, 64), BF16), how=how)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
def test_resize_on_the_gpu():
  x = np.random.default_rng(11).standard_normal((16, 64)).astype(np.float32)
  for how in sorted(_RESIZES):
    np.testing.assert_allclose(np.asarray(resized(x, how=how)), np.asarray(resized(x, how=how, interpret=True)),
                               rtol=1e-6, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: x)
def dilated_pool(x, o):
  o[...] = jax.lax.reduce_window(x[...], 0.0, jax.lax.add, (1, 2), (1, 1), "SAME", base_dilation=(1, 2))


@mg.mgpu_kernel(out_shape=lambda x: S((24, 96), x.dtype))
def bicubic(x, o):
  o[...] = jax.image.resize(x[...], (24, 96), "cubic")


def test_what_stays_mg003_says_what_computes():
  e = expect(dilated_pool, [S((16, 64), F32)], mg.KernelTypeError, "jax.lax.reduce_window(",
             "reduce_window cannot take a register tensor inside a kernel")
  assert e.hint.startswith("reduce_window computes in a kernel on a register tile of 1 to 3 axes with a static window,"
                           " strides and padding, max, min, add or mul, and no base dilation (probe 53c); otherwise")
  e = expect(bicubic, [S((16, 64), F32)], mg.KernelTypeError, "jax.image.resize(",
             "resize cannot take a register tensor inside a kernel")
  assert e.hint.startswith("jax.image.resize computes in a kernel at integer factors with 'nearest' and scaled up by"
                           " 2 with 'linear' / 'bilinear' (probe 53c); for others")


# ---------------------------------------------------------------- lax.conv_general_dilated, one input channel each
_CONVS = {     # name -> (the conv, the lhs's shape, the rhs's shape)
    "stencil_3x3": (lambda v, k: L.conv_general_dilated(v[None, None], k[None, None], (1, 1), "SAME")[0, 0],
                    (16, 64), (3, 3)),
    "causal_conv1d_nwc": (lambda v, k: L.conv_general_dilated(v, k, (1,), [(3, 0)], dimension_numbers=("NWC", "WIO",
                                                                                                       "NWC"),
                                                              feature_group_count=16), (1, 64, 16), (4, 1, 16)),
    "depthwise_ncw": (lambda v, k: L.conv_general_dilated(v, k, (1,), "SAME", feature_group_count=16), (1, 16, 64),
                      (16, 1, 3)),
    "dilated_1d": (lambda v, k: L.conv_general_dilated(v, k, (1,), "SAME", rhs_dilation=(2,)), (1, 1, 256),
                   (1, 1, 5)),
}


@mg.mgpu_kernel(out_shape=lambda x, w, *, conv: S(x.shape, x.dtype))
def convolved(x, w, o, *, conv: ml.constexpr):
  o[...] = _CONVS[conv][0](x[...], w[...])


@pytest.mark.parametrize("conv", sorted(_CONVS))
@pytest.mark.parametrize("dtype", [F32, BF16], ids=str)
def test_conv_of_register_tiles_is_laxs(conv, dtype):
  f, xs, ws = _CONVS[conv]
  rng = np.random.default_rng(12)
  x, w = rng.standard_normal(xs).astype(dtype), rng.standard_normal(ws).astype(dtype)
  got = np.asarray(convolved(x, w, conv=conv, interpret=True), np.float32)
  want = f(jnp.asarray(x, F32), jnp.asarray(w, F32))       # (16-bit floats: in float32, rounded once)
  if dtype == F32:
    np.testing.assert_allclose(got, np.asarray(want), rtol=1e-5, atol=1e-5)
  else:                                   # (within a bfloat16 ulp of it: XLA's order of the float32 sums is its own)
    np.testing.assert_allclose(got, np.asarray(want.astype(dtype), np.float32), rtol=8e-3, atol=1e-6)


def test_conv_builds_for_the_gpu():
  for conv in ("stencil_3x3", "causal_conv1d_nwc"):
    export(convolved, np.ones(_CONVS[conv][1], np.float32), np.ones(_CONVS[conv][2], np.float32), conv=conv)


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs a GPU")
def test_conv_on_the_gpu():
  rng = np.random.default_rng(13)
  for conv, (f, xs, ws) in sorted(_CONVS.items()):
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    np.testing.assert_allclose(np.asarray(convolved(x, w, conv=conv)),
                               np.asarray(convolved(x, w, conv=conv, interpret=True)), rtol=1e-6, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 8, 64), x.dtype))
def channel_mixing_conv(x, w, o):
  o[...] = jax.lax.conv_general_dilated(x[...], w[...], (1,), "SAME")


@mg.mgpu_kernel(out_shape=lambda x, w: S((1, 8, 128), x.dtype))
def lhs_dilated_conv(x, w, o):
  o[...] = jax.lax.conv_general_dilated(x[...], w[...], (1,), [(1, 2)], lhs_dilation=(2,))


def test_a_conv_mixing_channels_stays_mg003_saying_what_computes():
  """A conv mixing channels was MG003 (its hint said what computes); since probe 56c it is a product a tap
  (window_forms._dense): it computes (float32 operands read as TF32 by the tensor cores, as XLA's GPU conv at its
  default precision). lhs dilation, MG003 with the hint until probe 57a, computes too (window_forms._dilated)."""
  rng = np.random.default_rng(3)
  x, w = rng.standard_normal((1, 16, 64)).astype(np.float32), rng.standard_normal((8, 16, 3)).astype(np.float32)
  want = jax.lax.conv_general_dilated(x, w, (1,), "SAME")
  np.testing.assert_allclose(np.asarray(channel_mixing_conv(x, w, interpret=True)), np.asarray(want), rtol=1e-2,
                             atol=2e-2)
  want = jax.lax.conv_general_dilated(x, w, (1,), [(1, 2)], lhs_dilation=(2,))
  np.testing.assert_allclose(np.asarray(lhs_dilated_conv(x, w, interpret=True)), np.asarray(want), rtol=1e-2,
                             atol=2e-2)
