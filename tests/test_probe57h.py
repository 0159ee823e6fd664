"""Probe 57h: normalisation kernels forward and backward at scale and odd shapes (Triton's tutorial layer norm with
its lock array, Liger's RMSNorm, LayerNorm and GroupNorm, Apex-style persistent dgamma, fused add + RMSNorm in place,
GroupNorm / BatchNorm / InstanceNorm with Welford merges, hidden sizes 1 to 16384). Two classes did not run:

(1) A Python number's `.to(dtype)` (Triton's) or a NumPy or JAX scalar's `.astype(dtype)`: Liger's RMSNorm converts
its `eps` and `offset` arguments to the row's dtype in its "none" casting mode (`eps = eps.to(X_row_dtype)`); ported
with `eps` a constexpr, that was MG002 "eps has no attribute 'to'" with the hint "check the spelling". Now the number
is the scalar Triton's argument is (float32, int32, or the NumPy scalar's own dtype), converted as a run-time
scalar's `.to` converts it (`bitcast=True` and `fp_downcast_rounding=` too).

(2) `ml.float32` (Triton's `tl.float32`) outside the kernel: Liger's layer-norm backward takes `dtype: tl.constexpr`
for its outputs, and `jax.ShapeDtypeStruct(shape, dtype)` in the out_shape callable failed with "Cannot interpret
'<DType.f32: 'float32'>' as a data type" (MG006). The dtypes of `ml` now have NumPy's `.dtype`, so NumPy and JAX
take them wherever they take a dtype."""
import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl import language as tl
from probe_util import export, rnd

S = jax.ShapeDtypeStruct
BF16 = ml_dtypes.bfloat16
F32 = jnp.float32


# ---------------------------------------------------------------- (1) .to / .astype of a number
@mg.mgpu_kernel(out_shape=lambda X, W, *, eps, offset, BLOCK_SIZE: (X, S((X.shape[0],), F32)),
                grid=lambda X, W, **k: (X.shape[0],))
def liger_rms_none(X, W, Y, RSTD, *, eps, offset, BLOCK_SIZE: tl.constexpr):
  """Liger's _rms_norm_forward_kernel in its casting mode "none": every step in the row's dtype."""
  row_idx = tl.program_id(0)
  n_cols = X.shape[1]
  col_offsets = tl.arange(0, BLOCK_SIZE)
  mask = col_offsets < n_cols
  X_row = tl.load(X.at[row_idx, col_offsets], mask=mask, other=0)
  X_row_dtype = X_row.dtype
  W_row = tl.load(W.at[col_offsets], mask=mask, other=0)
  eps = eps.to(X_row_dtype)
  offset = offset.to(X_row_dtype)
  mean_square = tl.sum(X_row * X_row, axis=0) / n_cols
  rstd = tl.rsqrt(mean_square + eps)
  tl.store(RSTD.at[row_idx], rstd)
  tl.store(Y.at[row_idx, col_offsets], X_row * rstd * (offset + W_row), mask=mask)


def _rms_none(x, w, eps, offset):
  """jnp's numbers for the kernel above (a float16 sum accumulates in float32 and rounds once, as ml.sum's)."""
  x, w = jnp.asarray(x), jnp.asarray(w)
  ms = (jnp.sum(x * x, axis=-1, dtype=F32).astype(x.dtype) / x.shape[1])
  rs = jax.lax.rsqrt(ms + jnp.float32(eps).astype(x.dtype))
  return np.asarray(x * rs[:, None] * (jnp.float32(offset).astype(x.dtype) + w)), np.asarray(rs.astype(F32))


@pytest.mark.parametrize("dt", [np.float16, BF16], ids=["float16", "bfloat16"])
def test_liger_rms_norm_none_mode_converts_its_eps_and_offset(dt):
  """It was MG002 at `eps.to(X_row_dtype)`: "eps has no attribute 'to'", hint "check the spelling"."""
  x, w = rnd((4, 1000), 1, dt), rnd((1000,), 2, dt)
  y, rstd = liger_rms_none(x, w, eps=1e-6, offset=1.0, BLOCK_SIZE=1024, interpret=True)
  want_y, want_rstd = _rms_none(x, w, 1e-6, 1.0)
  assert y.dtype == dt
  np.testing.assert_allclose(np.asarray(rstd), want_rstd, rtol=1e-2)
  np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(want_y, np.float32), rtol=2e-2, atol=2e-2)
  export(liger_rms_none, x, w, eps=1e-6, offset=1.0, BLOCK_SIZE=1024)


@mg.mgpu_kernel(out_shape=lambda x, *, c: (x, x, S(x.shape, jnp.int32), x))
def number_conversions(x, a, b, bits, d, *, c):
  v = x[...]
  a[...] = v + c.to(v.dtype)                            # Triton's float32 argument converted to the row's dtype
  b[...] = v * jnp.float32(c).astype(v.dtype)           # a JAX scalar's astype
  bits[...] = ml.full(v.shape, c.to(tl.int32, bitcast=True), jnp.int32)
  d[...] = v - c.to(tl.bfloat16, fp_downcast_rounding="rtz").to(v.dtype)


def test_a_numbers_to_and_astype_are_the_scalars_conversions():
  x = rnd((128,), 3, BF16)
  c = 1.0 + 2 ** -8 + 2 ** -12              # float32 1.0042725; bfloat16 1.0039062 (to nearest, and toward zero)
  a, b, bits, d = number_conversions(x, c=c, interpret=True)
  cb = np.float32(c).astype(BF16)
  np.testing.assert_array_equal(np.asarray(a), (x + cb).astype(BF16))
  np.testing.assert_array_equal(np.asarray(b), (x * cb).astype(BF16))
  np.testing.assert_array_equal(np.asarray(bits), np.full(128, np.float32(c).view(np.int32)))
  rtz = (np.float32(c).view(np.uint32) & np.uint32(0xFFFF0000)).view(np.float32).astype(BF16)
  np.testing.assert_array_equal(np.asarray(d), (x - rtz).astype(BF16))
  export(number_conversions, x, c=c)


# ---------------------------------------------------------------- (2) ml dtypes outside the kernel
@mg.mgpu_kernel(out_shape=lambda X, W, Mean, RSTD, DY, *, rows_per_program, BLOCK_SIZE, dtype: (
    S(X.shape, dtype), S((ml.cdiv(X.shape[0], rows_per_program), X.shape[1]), dtype),
    S((ml.cdiv(X.shape[0], rows_per_program), X.shape[1]), dtype)),
    grid=lambda X, *a, rows_per_program, **k: (ml.cdiv(X.shape[0], rows_per_program),))
def liger_ln_bwd(X, W, Mean, RSTD, DY, DX, DW, DB, *, rows_per_program: tl.constexpr, BLOCK_SIZE: tl.constexpr,
                 dtype: tl.constexpr):
  """Liger's _layer_norm_backward_kernel: dx per row, dw and db partial sums per program, stored in `dtype`."""
  row_block_id = tl.program_id(0)
  n_rows, n_cols = X.shape
  row_start = row_block_id * rows_per_program
  row_end = min((row_block_id + 1) * rows_per_program, n_rows)
  cols = tl.arange(0, BLOCK_SIZE)
  mask = cols < n_cols
  dw_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
  db_row = tl.zeros((BLOCK_SIZE,), dtype=tl.float32)
  for row in range(row_start, row_end):
    x = tl.load(X.at[row, cols], mask=mask, other=0.0)
    w = tl.load(W.at[cols], mask=mask, other=0.0)
    dy = tl.load(DY.at[row, cols], mask=mask, other=0.0)
    x_hat = (x - tl.load(Mean.at[row])) * tl.load(RSTD.at[row])
    wdy = w * dy
    c1 = tl.sum(x_hat * wdy, axis=0) / n_cols
    c2 = tl.sum(wdy, axis=0) / n_cols
    dx = (wdy - (x_hat * c1 + c2)) * tl.load(RSTD.at[row])
    tl.store(DX.at[row, cols], dx.to(dtype), mask=mask)
    dw_row += dy * x_hat
    db_row += dy
  tl.store(DW.at[row_block_id, cols], dw_row.to(dtype), mask=mask)
  tl.store(DB.at[row_block_id, cols], db_row.to(dtype), mask=mask)


def _ln_bwd(x, w, mean, rstd, dy, rows):
  x, w, dy = (np.asarray(a, np.float64) for a in (x, w, dy))
  xhat = (x - mean[:, None]) * rstd[:, None]
  wdy = w * dy
  dx = (wdy - xhat * (xhat * wdy).mean(1, keepdims=True) - wdy.mean(1, keepdims=True)) * rstd[:, None]
  parts = range(0, x.shape[0], rows)
  return dx, np.stack([(dy * xhat)[i:i + rows].sum(0) for i in parts]), np.stack([dy[i:i + rows].sum(0) for i in parts])


def _ln_inputs(n, d, dt, seed):
  x = rnd((n, d), seed, dt) * 2 + 1
  xf = np.asarray(x, np.float64)
  mean, rstd = xf.mean(1), 1 / np.sqrt(xf.var(1) + 1e-5)
  return x.astype(dt), rnd((d,), seed + 1, dt), mean.astype(np.float32), rstd.astype(np.float32), rnd((n, d), seed + 2, dt)


@pytest.mark.parametrize("dt,tdt,tol", [(np.float32, tl.float32, 1e-4), (BF16, tl.bfloat16, 3e-2)],
                         ids=["float32", "bfloat16"])
def test_liger_layer_norm_backward_with_a_triton_dtype_constexpr(dt, tdt, tol):
  """It was MG006 at the out_shape callable: TypeError: Cannot interpret '<DType.f32: 'float32'>' as a data type."""
  args = _ln_inputs(10, 1000, dt, 4)
  got = liger_ln_bwd(*args, rows_per_program=4, BLOCK_SIZE=1024, dtype=tdt, interpret=True)
  for g, w in zip(got, _ln_bwd(*args, 4)):
    assert g.dtype == dt
    np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=tol, atol=tol)
  export(liger_ln_bwd, *args, rows_per_program=4, BLOCK_SIZE=1024, dtype=tdt)


def test_ml_dtypes_are_numpys_and_jaxs_dtypes():
  for d, want in [(ml.float32, jnp.float32), (tl.bfloat16, jnp.bfloat16), (ml.float16, np.float16), (ml.int8, np.int8),
                  (ml.float8_e4m3fn, jnp.float8_e4m3fn), (ml.bool_, np.bool_)]:
    assert np.dtype(d) == np.dtype(want)
    assert S((2, 3), d).dtype == np.dtype(want)
    assert jnp.zeros(3, d).dtype == np.dtype(want)
    assert d == want                          # (the comparison it had)


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_the_classes_on_the_gpu():
  x, w = rnd((64, 1000), 5, BF16), rnd((1000,), 6, BF16)
  y, rstd = jax.jit(lambda a, b: liger_rms_none(a, b, eps=1e-6, offset=1.0, BLOCK_SIZE=1024))(x, w)
  want_y, want_rstd = _rms_none(x, w, 1e-6, 1.0)
  np.testing.assert_allclose(np.asarray(rstd), want_rstd, rtol=2e-2)
  np.testing.assert_allclose(np.asarray(y, np.float32), np.asarray(want_y, np.float32), rtol=3e-2, atol=3e-2)
  args = _ln_inputs(64, 1000, BF16, 7)
  got = jax.jit(lambda *a: liger_ln_bwd(*a, rows_per_program=8, BLOCK_SIZE=1024, dtype=tl.bfloat16))(*args)
  for g, want in zip(got, _ln_bwd(*args, 8)):
    np.testing.assert_allclose(np.asarray(g, np.float64), want, rtol=5e-2, atol=5e-2)
