"""Probe 33b (a FlagGems / ATen user writing everyday operators: scans, sorts, gathers, remainders,
bitwise ops, sign, min/max with NaN, var/std, norms, one-hot, triu, dropout) in f32/f16/bf16/int/bool,
compared with jnp in interpret mode and exported for CUDA."""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


# ---------------------------------------------------------------- signed // and % by -1
@mg.mgpu_kernel(out_shape=lambda x, y: (x, x, x), grid=(1,))
def signed_divisions(x, y, q, r, f):
  q[...] = x[...] // y[...]
  r[...] = x[...] % y[...]
  f[...] = ml.fmod(x[...], y[...])


@mg.mgpu_kernel(out_shape=lambda a: S((3,), a.dtype), grid=(1,))
def scalar_divisions(a, out):
  out[0] = a[0] // a[1]
  out[1] = a[0] % a[1]
  out[2] = ml.fmod(a[0], a[1])


@mg.mgpu_kernel(out_shape=lambda x: (x, x), grid=(1,))
def by_a_constant(x, q, r):
  q[...] = x[...] // 3
  r[...] = x[...] % 3


def _divisor_defs(text):
  """For each signed division in a Mosaic module, the line defining its divisor."""
  lines = str(text).splitlines()
  defs = {m.group(1): l for l in lines if (m := re.match(r"\s*(%[\w#]+) = ", l))}
  return [defs.get(m.group(1), "") for l in lines
          if (m := re.search(r"arith\.(?:floordivsi|remsi|divsi) %[\w#]+, (%[\w#]+)", l))]


def _divisions_inputs(dtype):
  lo = np.iinfo(dtype).min
  a = np.array([lo, -7, 7, lo, -lo - 1, 5, -1, 0] * 16, dtype)
  b = np.array([-1, -1, -1, 3, -1, -2, 7, -1] * 16, dtype)
  return jnp.asarray(a), jnp.asarray(b)


def test_a_signed_division_by_minus_one_is_guarded_on_the_gpu():
  """LLVM's sdiv and srem of the lowest value by -1 are undefined behaviour (the quotient overflows),
  where jnp's INT_MIN // -1 is INT_MIN and INT_MIN % -1 is 0 (interpret mode's results): the divisor
  of every signed //, % and ml.fmod with a run-time divisor is now 1 where it was -1, the quotient
  negated back. A division by a constant other than -1 is left alone."""
  for kernel, specs in ((signed_divisions, [S((128,), I32)] * 2), (signed_divisions, [S((128,), jnp.int16)] * 2),
                        (scalar_divisions, [S((2,), I32)])):
    defs = _divisor_defs(kernel.mlir(*specs))
    assert defs and all("arith.select" in d for d in defs), defs
  assert not any("arith.select" in d for d in _divisor_defs(by_a_constant.mlir(S((128,), I32))))
  for dtype in (np.int32, np.int16):
    a, b = _divisions_inputs(dtype)
    for got, want in zip(signed_divisions(a, b, interpret=True), (a // b, a % b, jnp.fmod(a, b))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))


@pytest.mark.gpu
def test_gpu_signed_division_by_minus_one_matches_jnp():
  for dtype in (np.int32, np.int16):
    a, b = _divisions_inputs(dtype)
    for got, want in zip(jax.jit(signed_divisions)(a, b), (a // b, a % b, jnp.fmod(a, b))):
      np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
  a = jnp.asarray(np.array([np.iinfo(np.int32).min, -1], np.int32))
  want = [a[0] // a[1], a[0] % a[1], jnp.fmod(a[0], a[1])]
  np.testing.assert_array_equal(np.asarray(jax.jit(scalar_divisions)(a)), np.asarray(jnp.stack(want)))


# ---------------------------------------------------------------- jnp.sign / torch.sign
@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_of_ints(x, out):
  out[...] = ml.sign(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def sign_as_hinted(x, out):
  out[...] = ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...]))


def test_the_sign_hint_keeps_the_dtype_nan_and_negative_zero():
  """The hint was ml.where(x > 0, 1.0, ml.where(x < 0, -1.0, 0.0)): float32 for integers (so the
  followed hint's store into an int32 output was MG102), 0.0 for NaN and for -0.0 where jnp.sign
  gives NaN and -0.0."""
  expect(sign_of_ints, [S((128,), I32)], mg.UnknownNameError, "ml.sign", "ml has no attribute 'sign'",
         hint="no ml.sign: ml.where(x[...] > 0, 1, ml.where(x[...] < 0, -1, x[...])) (jnp.sign: x[...]'s dtype,"
              " NaN and -0.0 kept)")
  ints = jnp.asarray(np.array([np.iinfo(np.int32).min, -7, -1, 0, 1, 9, np.iinfo(np.int32).max, 0] * 16, np.int32))
  np.testing.assert_array_equal(np.asarray(sign_as_hinted(ints, interpret=True)), np.asarray(jnp.sign(ints)))
  for dtype in (F32, jnp.bfloat16):
    x = jnp.asarray(np.array([-0.0, 0.0, np.nan, -np.inf, np.inf, -2.5, 3.0, 1e-30] * 16, np.float32), dtype)
    got, want = np.asarray(sign_as_hinted(x, interpret=True), np.float32), np.asarray(jnp.sign(x), np.float32)
    np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


# ---------------------------------------------------------------- var / std with correction
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), x.dtype),) * 2, grid=(1,))
def corrected_var_std(x, v, s):
  v[...] = ml.var(x[...], axis=1, correction=1)
  s[...] = x[...].std(axis=1, correction=2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def ddof_and_correction(x, v):
  v[...] = ml.var(x[...], axis=1, ddof=1, correction=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def torch_unbiased(x, v):
  v[...] = x[...].var(dim=1, unbiased=True)


def test_var_and_std_take_jnps_correction_and_hint_torchs_unbiased():
  """`correction=` (jnp.var's and torch.var's) was MG003 'unexpected keyword argument'."""
  x = jnp.asarray(np.random.default_rng(0).standard_normal((8, 128)), F32) * 3 + 10
  v, s = corrected_var_std(x, interpret=True)
  np.testing.assert_allclose(np.asarray(v), np.asarray(jnp.var(x, 1, correction=1)), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(s), np.asarray(jnp.std(x, 1, correction=2)), rtol=1e-5)
  expect(ddof_and_correction, [S((8, 128), F32)], mg.KernelTypeError, "ml.var(",
         "ml.var: ddof and correction are one setting, given both", hint="give one: ml.var(x[...], axis=1, ddof=1)")
  expect(torch_unbiased, [S((8, 128), F32)], mg.KernelTypeError, "x[...].var(",
         "ml.var: got an unexpected keyword argument 'dim'",
         hint="write axis= for dim=: torch's unbiased=True is ddof=1 here (or jnp's correction=): "
              "ml.var(x[...], axis=1, ddof=1); ml.var(x, axis=None, ddof=0, keepdims=False, *, correction=None)")
