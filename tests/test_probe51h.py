"""Probe 51h (code health): one staging of ml.dot's B from registers. Probes 47e and 47g each wrote one
(ops/small_dots.staged_b for 8-bit tiles and transposes, ops/dot_staging.staged_b for 16-bit and float32 tiles);
the checks they made differed, so a float8 B tile of 32 rows tied to the result had MG204's generic hint where a
16-bit one had the hint that names the k tile. Now ops/dot_staging.py stages every register B, and the order of
its stores is one (a straight-line kernel's transposed B shares SMEM with the transpose's scratch, as 8-bit tiles
did; the gpu test runs the kernels whose IR that changed)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml


S = jax.ShapeDtypeStruct
F32, F16, F8 = jnp.float32, jnp.float16, jnp.float8_e4m3fn


def _rng(seed):
  return np.random.default_rng(seed)


def _mm(a, b):
  return np.asarray(a, np.float32) @ np.asarray(b, np.float32)


@mg.mgpu_kernel(out_shape=lambda a, b, **k: S((a.shape[0], b.shape[1]), F32),
                grid=lambda a, b, **k: (ml.cdiv(a.shape[0], 64) * ml.cdiv(b.shape[1], 64),))
def fp8_matmul_masked_n(a_ptr, b_ptr, c_ptr, *, BLOCK_K: ml.constexpr):
  M, K = a_ptr.shape
  N = b_ptr.shape[1]
  pid_m = ml.program_id(0) // ml.cdiv(N, 64)
  pid_n = ml.program_id(0) % ml.cdiv(N, 64)
  offs_am = pid_m * 64 + ml.arange(0, 64)
  offs_bn = pid_n * 64 + ml.arange(0, 64)
  offs_k = ml.arange(0, BLOCK_K)
  acc = ml.zeros((64, 64), dtype=F32)
  for k in range(0, ml.cdiv(K, BLOCK_K)):
    a = ml.load(a_ptr.at[offs_am[:, None], offs_k[None, :] + k * BLOCK_K], mask=offs_k[None, :] < K - k * BLOCK_K,
                other=0.0)
    b = ml.load(b_ptr.at[offs_k[:, None] + k * BLOCK_K, offs_bn[None, :]],
                mask=(offs_k[:, None] < K - k * BLOCK_K) & (offs_bn[None, :] < N), other=0.0)
    acc = ml.dot(a, b, acc)
  ml.store(c_ptr.at[offs_am[:, None], offs_bn[None, :]], acc, mask=(offs_am[:, None] < M) & (offs_bn[None, :] < N))


def test_a_short_float8_register_b_tile_tied_to_the_result_computes():
  """As a float16 tile's (test_probe47g): the float8 B of 32 rows is stored transposed, and its mask's index vector
  ties it to the result's layout. Probe 51h gave it MG204's k-tile hint; since probes 51e/51f each tile the vector
  reaches has its own copy (frontend/remat.py), so BLOCK_K=32 computes, as BLOCK_K=64 does."""
  a = jnp.asarray(_rng(1).standard_normal((128, 96)), F8)
  b = jnp.asarray(_rng(2).standard_normal((96, 130)), F8)
  for block_k in (32, 64):
    got = fp8_matmul_masked_n(a, b, BLOCK_K=block_k, interpret=True)
    np.testing.assert_allclose(np.asarray(got), _mm(a, b), rtol=1e-5, atol=1e-4)
  fp8_matmul_masked_n.check(S((128, 96), F8), S((96, 130), F8), BLOCK_K=32)


# ---------------------------------------------------------------- the kernels whose staging IR changed (gpu)
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def register_b(x, w, o):
  """tl.dot(a, b) of a B tile loaded into registers, once (no loop)."""
  x_s = ml.smem(x.shape)
  ml.copy(x, x_s)
  r, c = ml.arange(0, w.shape[0]), ml.arange(0, w.shape[1])
  b = ml.load(w.at[r[:, None], c[None, :]])
  o[...] = ml.dot(x_s, b)


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0], w.shape[1]), F32))
def register_a_and_b(x, w, o):
  """A TF32 tl.dot of two float32 tiles loaded into registers."""
  r, c, m = ml.arange(0, w.shape[0]), ml.arange(0, w.shape[1]), ml.arange(0, x.shape[0])
  a = ml.load(x.at[m[:, None], r[None, :]])
  b = ml.load(w.at[r[:, None], c[None, :]])
  o[...] = ml.dot(a, b)


_CHANGED = [(register_b, (64, 32), (32, 128), F16), (register_b, (64, 64), (64, 128), F32),
            (register_a_and_b, (64, 32), (32, 64), F32)]


def _inputs(xs, ws, dt, seed):
  return (jnp.asarray(_rng(seed).standard_normal(xs), dt), jnp.asarray(_rng(seed + 1).standard_normal(ws), dt))


def _check(kernel, x, w, **kw):
  tol = 2e-2 if x.dtype == F32 else 1e-3           # (TF32 rounds the operands to 10 bits)
  np.testing.assert_allclose(np.asarray(kernel(x, w, **kw)), _mm(x, w), rtol=tol, atol=tol * 8)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel,xs,ws,dt", _CHANGED)
def test_gpu_register_b_staged_once_before_the_dot(kernel, xs, ws, dt):
  x, w = _inputs(xs, ws, dt, 3)
  _check(kernel, x, w)
