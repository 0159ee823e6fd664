"""Probe 27e (tensor cores): int8 dots whose n ptxas rejects (integer WGMMA has only the n of 8,
24 and the multiples of 16: `.m64n40k32.s32.s8.s8` is an illegal matrix shape), once accepted by
the compiler, interpret mode and the CUDA export alike and failing only in ptxas on the GPU."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
I8 = jnp.int8


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


def _ints(shape, seed):
  return jnp.asarray(np.random.default_rng(seed).integers(-128, 128, shape), I8)


# ---------------------------------------------------------------- int8 n
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.int32))
def int8_abt(a, b, out):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  out[...] = ml.dot(a_s, b_s.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.int32))
def int8_abt_padded(a, b, out):          # int8_abt's hint followed: a 48-row b tile, 40 columns stored
  a_s, b_s = ml.smem(a.shape), ml.smem((48, b.shape[1]))
  ml.copy(a, a_s)
  ml.copy(b.at[ml.ds(0, 48)], b_s)
  acc = ml.dot(a_s, b_s.T)
  out.at[:, ml.ds(0, 48)].store(acc, mask=ml.arange(48)[None, :] < b.shape[0])


@pytest.mark.parametrize("n", [40, 56, 72, 136, 248])
def test_int8_dot_rejects_the_n_ptxas_rejects(n):
  expect(int8_abt, [S((64, 128), I8), S((n, 128), I8)], mg.MmaOperandError, "ml.dot(a_s, b_s.T)",
         f"ml.dot on int8 needs n (columns of b) to be 8, 24 or a multiple of 16 and at most 256, got {n}",
         hint=f"pad n to a multiple of 16: a b_s tile of {-(-n // 16) * 16} rows (b is stored (n, k), passed"
              f" transposed) (a TMA copy past the"
              f" array's end fills zeros; or mask a register load with other=0), and store only the first"
              f" {n} columns of the result (a masked store); where the same size is also the k of another"
              f" dot (attention's key block: n of q @ k.T, k of p @ v), pad to {-(-n // 32) * 32} instead,"
              f" a multiple of 32")


@pytest.mark.parametrize("n", [8, 16, 24, 48, 80, 144, 256])
def test_int8_dot_takes_the_integer_shapes(n):
  a, b = _ints((64, 128), 0), _ints((n, 128), 1)
  got = int8_abt(a, b, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(a, np.int64) @ np.asarray(b, np.int64).T)
  _export(int8_abt, S(a.shape, I8), S(b.shape, I8))


def test_int8_dot_hint_followed_pads_n():
  a, b = _ints((64, 128), 2), _ints((40, 128), 3)
  got = int8_abt_padded(a, b, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(a, np.int64) @ np.asarray(b, np.int64).T)
  _export(int8_abt_padded, S(a.shape, I8), S(b.shape, I8))


# ---------------------------------------------------------------- .T of a GMEM ref in ml.dot
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32))
def dot_gmem_t(a, b, out):
  a_s = ml.smem(a.shape)
  ml.copy(a, a_s)
  out[...] = ml.dot(a_s, b.T)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.float32))
def dot_gmem_t_fixed(a, b, out):         # dot_gmem_t's hint followed: the tile in SMEM, buf.T
  a_s, buf = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, buf)
  out[...] = ml.dot(a_s, buf.T)


def test_transpose_of_gmem_in_a_dot_hints_the_smem_view_first():
  # the hint led with b[...].T, which as ml.dot's b is only MG501 (b comes from SMEM)
  specs = [S((64, 64), jnp.float16), S((128, 64), jnp.float16)]
  expect(dot_gmem_t, specs, mg.KernelTypeError, "b.T",
         "b.T: only this CTA's SMEM buffers have a transposed view, not GMEM refs",
         hint="copy it into this CTA's SMEM (buf = ml.smem((128, 64), jnp.float16); ml.copy(b, buf)) and use buf.T:"
              " ml.dot(a_s, buf.T) reads it transposed and moves no data, buf.T[...] reads it into registers;"
              " b[...].T also transposes in registers (but ml.dot's b comes from SMEM only)")
  a = jnp.asarray(np.random.default_rng(4).standard_normal((64, 64)), jnp.float16)
  b = jnp.asarray(np.random.default_rng(5).standard_normal((128, 64)), jnp.float16)
  got = dot_gmem_t_fixed(a, b, interpret=True)
  want = np.asarray(a, np.float32) @ np.asarray(b, np.float32).T
  np.testing.assert_allclose(np.asarray(got), want, rtol=1e-5, atol=1e-4)
  _export(dot_gmem_t_fixed, *specs)
