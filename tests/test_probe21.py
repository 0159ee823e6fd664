"""Probe 21 (a helper reviewing the session's last commits, another porting Triton's tutorials):
a pipelined loop whose stepped loop variable is a TMA window's start (Triton's attention loop,
`for start_n in range(0, hi, BLOCK_N)`) was MG900; a one-element ml.full of an out-of-range float
wrapped (1e10 -> 1410065407) where a cast saturates; a Python int too large for a one-element
window was stored truncated; softmax_long_rows gave NaN rows; and hints that suggested a
different function (ml.asin -> 'did you mean ml.sin?')."""
import os
import subprocess
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32
ROOT = os.path.join(os.path.dirname(__file__), "..")
sys.path.insert(0, os.path.join(ROOT, "examples"))
import paged_attention as PA  # noqa: E402
import softmax as SM  # noqa: E402


@mg.mgpu_kernel(out_shape=lambda x, *, ws: S((64, 64), F32), block=lambda x, *, ws: 128)
def stepped_pipeline(x, out, *, ws: ml.constexpr):
  acc = ml.zeros((64, 64), F32)
  s = ml.smem((64, 64))
  for start in ml.range(0, x.shape[0], 64, stages=2, warp_specialize=ws):
    ml.copy(x.at[ml.ds(start, 64), :], s)
    acc = acc + s[...]
  out[...] = acc


@pytest.mark.parametrize("ws", [False, True])
def test_a_stepped_loop_variable_as_a_window_start(ws):
  """The prefetch cloned the view as written before the loop was normalised: MG900 KeyError."""
  x = jnp.arange(256 * 64, dtype=F32).reshape(256, 64)
  want = x.reshape(4, 64, 64).sum(0)
  np.testing.assert_array_equal(stepped_pipeline(x, ws=ws, interpret=True), want)
  jax.export.export(jax.jit(lambda x: stepped_pipeline(x, ws=ws)), platforms=["cuda"])(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x, *, v, dt: S((1, 1), dt))
def one_element_full_minus_one(x, out, *, v: ml.constexpr, dt: ml.constexpr):
  out[...] = ml.full((1, 1), v, dt) - 1


@mg.mgpu_kernel(out_shape=lambda x, *, v, dt: S((1, 1), dt))
def one_element_full(x, out, *, v: ml.constexpr, dt: ml.constexpr):
  out[...] = ml.full((1, 1), v, dt)


@pytest.mark.parametrize("v,dt", [(1e10, I32), (-3e9, I32), (300.0, jnp.int8), (-1.0, jnp.uint32),
                                  (float("nan"), I32), (float("inf"), I32)])
def test_a_one_element_full_saturates_as_jnp_full(v, dt):
  """Wrapped modulo 2**32 (or was MG900 for NaN and inf), while a (128,) ml.full and jnp.full saturate."""
  want = np.asarray(jnp.full((1, 1), v, dt))
  np.testing.assert_array_equal(one_element_full(jnp.zeros(8), v=v, dt=dt, interpret=True), want)
  if dt != jnp.int8:      # (no 8-bit arithmetic)
    got = one_element_full_minus_one(jnp.zeros(8), v=v, dt=dt, interpret=True)
    np.testing.assert_array_equal(got, (want.astype(np.int64) - 1).astype(want.dtype))


@mg.mgpu_kernel(out_shape=lambda x: S((1, 1), I32))
def too_large_into_one_element(x, out):
  out[...] = 2**40


@mg.mgpu_kernel(out_shape=lambda x: S((1,), I32))
def comparison_into_one_int(x, out):
  out[...] = ml.sum(x[...]) > 3.0


def test_one_element_stores_check_like_wider_ones():
  """2**40 was stored as 0; a bool scalar into int32 blamed a bool array."""
  expect(too_large_into_one_element, [S((8,), F32)], mg.KernelTypeError, "out[...] = 2**40",
         "the store into out uses the Python int 1099511627776, which does not fit in int32: kernels compute in"
         " 32 bits (a larger constant would silently lose its high bits)")
  expect(comparison_into_one_int, [S((128,), F32)], mg.StoreDtypeError, "out[...] =",
         "cannot store ml.sum(x[...]) > 3.0 (bool) into out (GMEM, int32): no implicit conversion",
         hint="make it a number: ml.where(ml.sum(x[...]) > 3.0, 1, 0)")


def test_two_pass_softmax_of_a_row_starting_with_minus_inf():
  """The running max started at -inf: exp(-inf - -inf) made the whole row NaN."""
  y = rand.normal(rand.key(0), (2, 8192)).at[0, :4096].set(-jnp.inf)
  got = SM.softmax_long_rows(y, rows=1, interpret=True)
  np.testing.assert_allclose(got, jax.nn.softmax(y, -1), atol=1e-7)


@pytest.mark.parametrize("name", ["ragged_dot.py", "matmul_fp8.py"])
def test_examples_check_alone(name):
  """check of one file failed: the out_shape callable imported matmul lazily, off sys.path."""
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off", JAX_PLATFORMS="cpu")
  r = subprocess.run([sys.executable, "-m", "mgpu_dsl", "check", os.path.join(ROOT, "examples", name)],
                     capture_output=True, text=True, env=env, timeout=600)
  assert r.returncode == 0 and "no errors" in r.stdout, r.stdout + r.stderr


def test_paged_attention_refuses_zero_splits_and_flat_block_tables():
  args = PA.make_inputs(jax.random.key(0), 2, 4, 2, 128, 16, 8)
  with pytest.raises(ValueError, match=r"splits \(0\) must be a positive int dividing"):
    PA.paged_attention(*args, splits=0, interpret=True)
  q, kp, vp, bt, ln = args
  with pytest.raises(ValueError, match="block_tables"):
    PA.paged_attention(q, kp, vp, bt.reshape(-1), ln, interpret=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def arcsine(x, out):
  out[...] = ml.asinh(x[...])


@mg.mgpu_kernel(out_shape=lambda x: x)
def compare_and_swap(x, out):
  ml.atomic_cas(out.at[0], 0, 1)


def test_missing_functions_are_not_mistaken_for_others():
  """asin said 'did you mean ml.sin?' (which compiles, and computes something else); atomic_cas
  said 'did you mean ml.atomic_max?'."""
  e = expect(arcsine, [S((128,), F32)], mg.UnknownNameError, "ml.asinh", "ml has no attribute 'asinh'")
  assert e.hint.startswith("no ml.asinh") and "ml.asin?" not in e.hint     # (ml.asin exists since probe 29a)
  out = compare_and_swap(np.zeros(128, np.int32), interpret=True)    # (ml.atomic_cas exists since probe 48c)
  np.testing.assert_array_equal(out, (np.arange(128) == 0).astype(np.int32))


@mg.mgpu_kernel(out_shape=lambda x: S((4, x.shape[1]), F32), grid=lambda x: (x.shape[0],))
def ragged_partial_sums(x, dw):
  row = ml.program_id(0)
  cols = ml.arange(0, 1024)
  v = x.at[row, ml.ds(0, 1024)].load(mask=cols < x.shape[1], other=0.0)
  ml.atomic_add(dw.at[row % 4, ml.ds(0, 1024)], v)


@mg.mgpu_kernel(out_shape=lambda x: S((4, x.shape[1]), F32), grid=lambda x: (x.shape[0],))
def ragged_partial_sums_as_hinted(x, dw):
  row = ml.program_id(0)
  cols = ml.arange(0, 1024)
  v = x.at[row, ml.ds(0, 1024)].load(mask=cols < x.shape[1], other=0.0)
  ml.atomic_add(dw.at[row % 4, ml.arange(1024)], v)


def test_an_atomic_past_the_end_hints_the_index_tensor_form():
  """The hint said to mask it with ref.load/ref.store, which an atomic does not take."""
  e = expect(ragged_partial_sums, [S((8, 700), F32)], mg.IndexOutOfBoundsError, "ml.atomic_add(",
             "ml.ds(0, 1024) is out of bounds for dimension 1 of dw (size 700)")
  assert "ml.atomic_add(dw.at[row % 4, ml.arange(1024)], value)" in e.hint
  np.testing.assert_array_equal(ragged_partial_sums_as_hinted(jnp.ones((8, 700)), interpret=True), 2.0)


@mg.mgpu_kernel(out_shape=lambda x: (S((1, 1), F32), S((1, 1), I32)))
def where_of_keepdims(x, a, b):
  s = ml.sum(x[...], keepdims=True)
  a[...] = ml.where(s > 0.0, s, -s)
  b[...] = ml.where(s > 1.0, 1, 0)


def test_where_of_keepdims_results():
  """Was MG204 ('register tensors need a multiple of 128 elements'): ml.where now folds one-element
  operands to scalars as elementwise math does."""
  x = -jnp.ones((8, 128))
  a, b = where_of_keepdims(x, interpret=True)
  np.testing.assert_array_equal(a, [[1024.0]])
  np.testing.assert_array_equal(b, [[0]])
  jax.export.export(jax.jit(where_of_keepdims), platforms=["cuda"])(S(x.shape, F32))
