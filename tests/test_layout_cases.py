"""Layouts of vectors and tiles met by porting memory-bound kernels (a sixth-session probe):
half-precision column sums, named broadcasts, vectors assembled from windows, a row statistic
read back as a column vector. Interpret mode against numpy, the compiled module, and the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def spec(a):
  return S(a.shape, a.dtype)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), jnp.float32))
def column_sums(x, out):
  out[...] = ml.sum(x[...], axis=0).astype(jnp.float32)


@mg.mgpu_kernel(out_shape=lambda b: S((8, b.shape[0]), jnp.float32))
def named_broadcast(b, out):
  bb = ml.broadcast_to(b[...], (8, b.shape[0]))
  out[...] = bb


@mg.mgpu_kernel(out_shape=lambda a, s: s)
def scaled_by_halves(a, s, out):
  t = ml.smem((128,), jnp.float32)
  t.at[0:64][...] = a.at[0:64][...] * 2.0
  t.at[64:128][...] = a.at[64:128][...]
  out[...] = s[...] * t[...][None, :]


@mg.mgpu_kernel(out_shape=lambda x, y, s: s)
def cosine(x, y, s, out):
  t = ml.smem((128,), jnp.float32)
  xv, yv = x[...], y[...]
  xn = ml.sqrt(ml.sum(xv * xv, axis=1))            # a row statistic of x
  t[...] = ml.sqrt(ml.sum(yv * yv, axis=1))        # one of y, stored ...
  out[...] = s[...] / (xn[:, None] * t[...][None, :])   # ... and read back as a column vector


def rand(shape, dtype=np.float32, seed=0):
  return np.random.default_rng(seed).random(shape).astype(dtype)


def cases():
  x16 = rand((8, 256), np.float16)
  xb = jnp.asarray(rand((64, 256)), jnp.bfloat16)
  b = rand((256,))
  a, s = rand((128,)), rand((8, 128), seed=1)
  x, y, s2 = rand((128, 64)), rand((128, 64), seed=2), rand((128, 128), seed=3)
  return [
      ("column_sums_f16", column_sums, [x16], lambda x: np.asarray(x, np.float32).sum(0)),
      ("column_sums_bf16", column_sums, [xb], lambda x: np.asarray(x, np.float32).sum(0)),
      ("named_broadcast", named_broadcast, [b], lambda b: np.broadcast_to(b, (8, 256))),
      ("vector_from_halves", scaled_by_halves, [a, s],
       lambda a, s: s * np.concatenate([a[:64] * 2, a[64:]])[None, :]),
      ("row_statistic_read_as_column", cosine, [x, y, s2],
       lambda x, y, s: s / (np.linalg.norm(x, axis=1)[:, None] * np.linalg.norm(y, axis=1)[None, :])),
  ]


IDS = [c[0] for c in cases()]


@pytest.mark.parametrize("i", range(len(IDS)), ids=IDS)
def test_interpret_matches_numpy_and_the_kernel_compiles(i):
  """Column sums of float16 tiles wider than 128 columns were an InternalError at .check (a
  float32 sum of 8-wide lanes across warps), a named ml.broadcast_to an InternalError in every
  mode, a vector assembled from windows then broadcast an InternalError at .check, and a row
  statistic stored to SMEM and read back as a column vector a LayoutError."""
  _, kernel, args, ref = cases()[i]
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True), np.float32), ref(*args),
                             rtol=2e-2, atol=1e-2)
  assert "mosaic_gpu" in jax.export.export(jax.jit(kernel), platforms=["cuda"])(*map(spec, args)).mlir_module()


def test_a_row_statistic_read_back_as_a_column_vector_waits_for_every_thread():
  """Stored in one layout and read in another, the vector's elements move between threads."""
  text = cosine.typed_ir(S((128, 64), jnp.float32), S((128, 64), jnp.float32), S((128, 128), jnp.float32))
  lines = [l.strip() for l in text.splitlines()]
  store = next(i for i, l in enumerate(lines) if l.startswith("store ref="))
  read = next(i for i, l in enumerate(lines) if "_col> = load" in l)
  assert store < read and any(l.startswith("barrier") for l in lines[store:read])


@pytest.mark.gpu
@pytest.mark.parametrize("i", range(len(IDS)), ids=IDS)
def test_gpu_matches_numpy(i):
  _, kernel, args, ref = cases()[i]
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*args), np.float32), ref(*args), rtol=2e-2, atol=1e-2)
