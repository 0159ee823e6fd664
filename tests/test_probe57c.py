"""Probe 57c (quantisation kernels as LLM serving stacks write them: fp8 per-token-group, per-row and per-tensor
quantisers, block-scaled fp8 GEMMs, int8 quantisers and GEMMs, MXFP4 / NVFP4 / NF4 / int4 packing, stochastic
rounding, smoothquant, absmax across programs). What was wrong and is right now: (1) libdevice's `round`
(`tl.extra.cuda.libdevice.round`, sglang's and vLLM's int8 per-token quantisers) was MG002 whose hint's
`floor(x + 0.5)` rounds 0.49999997 to 1 and 8388609.0 to 8388610: it computes, halves away from zero, exactly. (2) A
NumPy scalar's `.astype` / `.item()` (`jnp.finfo(jnp.float8_e4m3fn).max.astype(jnp.float32)`, a module constant's
`.item()`) was MG002 "has no attribute". (3) The warnings of a trace that failed or that a later trace replaced were
issued too: a float16 kernel of 100 elements warned three times of one constant, and a block-scaled GEMM's padded
retry warned of a 128x1024 accumulator the kernel never had. (4) `ml.repeat` of a vector whose length no register
vector holds (a 256-wide tile's two 128x128 block scales) beside the tile it scales was MG204 (jnp.repeat's form
already took it)."""
import warnings

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import language as tl
from locate import expect
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
F8 = jnp.float8_e4m3fn
EDGES = np.array([0.49999997, -0.49999997, 0.5, -0.5, 1.5, 2.5, -2.5, 8388609.0, -8388609.0, 8388608.5, 16777215.0,
                  np.nan, np.inf, -np.inf, 0.0, -0.0, -0.3, 126.5, -127.5, 1e30, 2.0 ** -149, 3.5, -0.7, 0.7], np.float32)


def _edges(shape, seed):
  x = rnd(shape, seed) * 100
  x.ravel()[:len(EDGES)] = EDGES
  return x


def _bits(a):
  a = np.asarray(a)
  return a.view({1: np.uint8, 2: np.uint16, 4: np.uint32}[a.dtype.itemsize])


# ---------------------------------------------------------------- (1) libdevice's round: halves away from zero
@tl.inline
def _rounded(v):
  return tl.extra.cuda.libdevice.round(v)


@mg.mgpu_kernel(out_shape=lambda x: (x, x, x, x))
def libdevice_rounds(x, a, b, c, d):
  v = x[...]
  a[...] = tl.extra.cuda.libdevice.round(v)
  b[...] = tl.math.round(v.astype(jnp.bfloat16)).astype(jnp.float32)
  c[...] = _rounded(v) + tl.libdevice.round(2.5) + tl.libdevice.round(tl.program_id(0) + 0.5)   # + 3 + 1
  d[...] = tl.libdevice.round(v.astype(jnp.int32)).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.int8), S((x.shape[0], 1), jnp.float32)), grid=lambda x: (x.shape[0],))
def per_token_quant_int8(x_ptr, xq_ptr, scale_ptr, BLOCK: tl.constexpr = 512):
  """sglang's `_per_token_quant_int8` as written (libdevice's round of the scaled row)."""
  row_id = tl.program_id(0)
  cols = tl.arange(0, BLOCK)
  mask = cols < x_ptr.shape[1]
  x = tl.load(x_ptr.at[row_id, cols], mask=mask, other=0.0).to(tl.float32)
  absmax = tl.maximum(tl.max(tl.abs(x)), 1e-10)
  scale_x = absmax / 127
  x_q = x * (127 / absmax)
  x_q = tl.extra.cuda.libdevice.round(x_q).to(tl.int8)
  tl.store(xq_ptr.at[row_id, cols], x_q, mask=mask)
  tl.store(scale_ptr.at[row_id, 0], scale_x)


def _per_token_int8_want(x):
  v = jnp.asarray(x, jnp.float32)
  amax = jnp.maximum(jnp.max(jnp.abs(v), 1, keepdims=True), 1e-10)
  return jax.lax.round(v * (127 / amax)).astype(jnp.int8), amax / 127


@mg.mgpu_kernel(out_shape=lambda x: x)
def libdevice_round_fp8(x, o):
  o[...] = tl.extra.cuda.libdevice.round(x[...].astype(F8)).astype(jnp.float32)


def test_libdevice_round_takes_halves_away_from_zero_exactly():
  x = _edges((8, 128), 1)
  a, b, c, d = libdevice_rounds(x, interpret=True)
  want = np.asarray(jax.lax.round(x))               # lax.round's default: AWAY_FROM_ZERO, C's roundf
  np.testing.assert_array_equal(_bits(a), _bits(want))          # 0.49999997 -> 0, 8388609 -> 8388609, -0.3 -> -0.0
  np.testing.assert_array_equal(_bits(b), _bits(np.asarray(jax.lax.round(jnp.asarray(x, jnp.bfloat16)), np.float32)))
  np.testing.assert_array_equal(np.asarray(c), want + 4.0)
  np.testing.assert_array_equal(np.asarray(d), np.asarray(jnp.asarray(x).astype(jnp.int32), np.float32))
  export(libdevice_rounds, x)


def test_sglang_per_token_int8_quant_with_libdevice_round():
  x = rnd((16, 384), 2)
  x[3, :4] = [4.0, 1.0, -1.0, 0.5 * 4.0 / 127 * 63]     # row 3 scaled by 127 / 4: 127, 31.75, -31.75, 31.5 (a half)
  q, s = per_token_quant_int8(x, interpret=True)
  want_q, want_s = _per_token_int8_want(x)
  np.testing.assert_array_equal(np.asarray(q), np.asarray(want_q))
  np.testing.assert_array_equal(_bits(s), _bits(want_s))
  export(per_token_quant_int8, x)


def test_libdevice_round_of_float8_is_its_own_mg106():
  expect(libdevice_round_fp8, [S((128,), jnp.float32)], mg.UnsupportedDtypeError, "tl.extra.cuda.libdevice.round",
         "ml.libdevice.round is not supported on float8_e4m3fn: Hopper has no register arithmetic on 8-bit types",
         hint="upcast first: x[...].astype(F8).astype(jnp.float16), compute, then cast back")


# ---------------------------------------------------------------- (2) a NumPy scalar's .astype and .item()
FP8_MAX = jnp.finfo(F8).max                  # an ml_dtypes float8 scalar, as vLLM's `fp8_max = finfo(...).max`
HALF = np.float16(0.5)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F8), S((x.shape[0],), jnp.float32), S(x.shape, jnp.float32),
                                     S(x.shape, jnp.bfloat16)))
def finfo_scalar_quant(x, q, s, wide, same):
  v = x[...].astype(jnp.float32)
  sc = jnp.max(jnp.abs(v), axis=1) / FP8_MAX.astype(jnp.float32)
  q[...] = jnp.clip(v / sc[:, None], -FP8_MAX.item(), jnp.finfo(F8).max.item()).astype(F8)
  s[...] = sc
  wide[...] = x[...] * HALF.astype(np.float32)         # a float32 scalar: the product is float32, as jnp's
  same[...] = x[...] * HALF.item()                     # a Python float: weak, the product stays bfloat16


def test_numpy_scalar_astype_and_item_in_a_kernel():
  x = rnd((64, 128), 3).astype(jnp.bfloat16)
  q, s, wide, same = finfo_scalar_quant(x, interpret=True)
  v = np.asarray(x, np.float32)
  want_s = np.asarray(jnp.max(jnp.abs(jnp.asarray(v)), 1) / jnp.float32(448))
  np.testing.assert_array_equal(_bits(s), _bits(want_s))
  np.testing.assert_array_equal(_bits(q), _bits(jnp.asarray(np.clip(v / want_s[:, None], -448, 448)).astype(F8)))
  np.testing.assert_array_equal(np.asarray(wide), v * 0.5)
  assert same.dtype == jnp.bfloat16
  np.testing.assert_array_equal(np.asarray(same, np.float32), v * 0.5)
  export(finfo_scalar_quant, x)


# ---------------------------------------------------------------- (3) warnings of discarded traces
@mg.mgpu_kernel(out_shape=lambda x: x)
def tiny_scale_odd(x, o):
  o[...] = x[...] * 1e-10                # 0 in float16: a PrecisionWarning; 100 elements: traced padded at last


def test_only_the_kept_traces_warnings_are_issued():
  with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    tiny_scale_odd.check(S((100,), jnp.float16))
  texts = [str(w.message) for w in got if issubclass(w.category, mg.PrecisionWarning)]
  assert len(texts) == 1, texts          # (it was three: the plain trace's, the one-element trace's, the padded one's)
  assert "the Python float 1e-10 takes the dtype of x[...] (float16)" in texts[0]


# ---------------------------------------------------------------- (4) ml.repeat of a few block scales
@mg.mgpu_kernel(out_shape=lambda a, b, sa, sb: S((a.shape[0], b.shape[0]), jnp.bfloat16),
                grid=lambda a, b, sa, sb: (a.shape[0] // 128, b.shape[0] // 256), block=256)
def block_fp8_gemm_bn256(a, b, sa, sb, c):
  """DeepSeek-V3's block-scaled fp8 GEMM at BLOCK_N = 256: A's 1x128 scales stored column-major (K/128, M), B's
  128x128 scales (N/128, K/128), two of them under each 256-wide tile."""
  i, j = ml.program_id(0), ml.program_id(1)
  a_s, b_s = ml.smem((128, 128), F8), ml.smem((256, 128), F8)
  acc = ml.zeros((128, 256), jnp.float32)
  for k in ml.range(a.shape[1] // 128, stages=2):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 128, 128)], a_s)
    ml.copy(b.at[ml.ds(j * 256, 256), ml.ds(k * 128, 128)], b_s)
    s_a = sa[k, ml.ds(i * 128, 128)]
    s_b = ml.load(sb.at[j * 2 + ml.arange(0, 2), k])                # (2,): the tile's two block scales
    acc += ml.dot(a_s, b_s.T) * s_a[:, None] * ml.repeat(s_b, 128)[None, :]
  c[ml.ds(i * 128, 128), ml.ds(j * 256, 256)] = acc.astype(jnp.bfloat16)


@mg.mgpu_kernel(out_shape=lambda x, sb: (x, x))
def few_scales_repeated(x, sb, o1, o2):
  s = sb[2:4, 1]                                                     # (2,), a column of the scales
  o1[...] = x[...] * ml.repeat(s, 128)[None, :]
  o2[...] = x[...] * ml.repeat(s[None, :], 128, axis=1)


def _block_gemm_want(a, b, sa_t, sb):
  sa, (m, k), n = np.asarray(sa_t).T, a.shape, b.shape[0]
  af, bf = np.asarray(a, np.float32), np.asarray(b, np.float32)
  acc = np.zeros((m, n), np.float32)
  for t in range(k // 128):
    acc += (af[:, t * 128:(t + 1) * 128] @ bf[:, t * 128:(t + 1) * 128].T) * sa[:, t][:, None] * \
        np.repeat(sb[:, t], 128)[None, :]
  return acc


def _block_gemm_args():
  pos = lambda s, seed: np.abs(rnd(s, seed)) * 0.01 + 0.001
  return rnd((256, 512), 4).astype(F8), rnd((512, 512), 5).astype(F8), pos((4, 256), 6), pos((4, 4), 7)


def test_repeat_of_a_few_block_scales_beside_the_tile():
  with warnings.catch_warnings(record=True) as got:
    warnings.simplefilter("always")
    args = _block_gemm_args()
    c = block_fp8_gemm_bn256(*args, interpret=True)
  assert not [w for w in got if issubclass(w.category, mg.RegisterSpillWarning)], [str(w.message) for w in got]
  np.testing.assert_allclose(np.asarray(c, np.float32), _block_gemm_want(*args), rtol=2e-2, atol=2e-2)
  export(block_fp8_gemm_bn256, *args)
  x, sb = rnd((64, 256), 8), rnd((4, 4), 9)
  o1, o2 = few_scales_repeated(x, sb, interpret=True)
  want = x * np.repeat(sb[2:4, 1], 128)[None, :]
  np.testing.assert_array_equal(np.asarray(o1), want)
  np.testing.assert_array_equal(np.asarray(o2), want)
  export(few_scales_repeated, x, sb)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_probe57c_kernels_on_the_gpu():
  args = _block_gemm_args()
  np.testing.assert_allclose(np.asarray(jax.jit(block_fp8_gemm_bn256)(*args), np.float32), _block_gemm_want(*args),
                             rtol=3e-2, atol=3e-2)
  x = _edges((8, 128), 1)
  a = jax.jit(libdevice_rounds)(x)[0]
  np.testing.assert_array_equal(_bits(a), _bits(np.asarray(jax.lax.round(x))))
  x = rnd((16, 384), 2)
  q, s = jax.jit(per_token_quant_int8)(x)
  want_q, want_s = _per_token_int8_want(x)
  assert np.abs(np.asarray(q, np.int32) - np.asarray(want_q, np.int32)).max() <= 1   # (the GPU's x * (127 / amax))
  np.testing.assert_allclose(np.asarray(s), np.asarray(want_s), rtol=1e-6)
  x = rnd((64, 128), 3).astype(jnp.bfloat16)
  q, s, wide, same = jax.jit(finfo_scalar_quant)(x)
  np.testing.assert_allclose(np.asarray(q, np.float32) * np.asarray(s)[:, None], np.asarray(x, np.float32),
                             rtol=0.07, atol=1e-2)
