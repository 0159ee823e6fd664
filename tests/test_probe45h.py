"""Probe 45h (jnp-style operations and forms a kernel author reaches for): `ml.erfc` (jax.nn.gelu's exact form,
which `1 + ml.erf(...)` rounds to 0 below about -4), `.ravel()`/`.flatten()` of a register tensor, a small static
slice of a ref filled with a number, a conditional expression with a number on one side and a boolean on the other,
and `x[round(f)]` of a float scalar."""
import math

import jax
import jax.numpy as jnp
import ml_dtypes
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, BF16, I32 = jnp.float32, jnp.bfloat16, jnp.int32


# ---------------------------------------------------------------- ml.erfc, and the exact GELU hint that uses it
@mg.mgpu_kernel(out_shape=lambda x: (x, x, S((2,), x.dtype)))
def erfc_and_gelu(x, o, g, s):
  v = x[...]
  o[...] = ml.erfc(v)
  g[...] = 0.5 * v * ml.erfc(-v * 0.7071067811865476)      # the hint for jax.nn.gelu(v, approximate=False)
  s[0] = ml.erfc(x[0])
  s[1] = ml.erfc(x[1] * 2)


@mg.mgpu_kernel(out_shape=lambda x: x)
def gelu_exact_called(x, o):
  v = x[...]
  o[...] = jax.nn.gelu(v, approximate=False)


def _erfc(x):
  return np.array([math.erfc(float(v)) for v in np.asarray(x, np.float64).ravel()]).reshape(np.shape(x))


def _gelu_exact(x):
  x = np.asarray(x, np.float64)
  return 0.5 * x * _erfc(-x / math.sqrt(2))


def test_erfc_is_an_elementwise_function_accurate_in_the_tail_and_the_exact_gelu_hint_uses_it():
  """ml.erfc was MG003 (hinted as 1 - ml.erf(x)), and the exact GELU hint 0.5*v*(1 + ml.erf(v*0.7071...)) gave 0
  below about -4 (at -5.9 jax.nn.gelu(approximate=False) is -8.8e-9): ml.erfc is libdevice's erfcf on the GPU,
  math.erfc in interpret mode; 16-bit floats compute in float32 and round once."""
  x = np.linspace(-10, 10, 256).astype(np.float32)
  x[0], x[1] = -5.9, 3.5
  o, g, s = erfc_and_gelu(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(o), _erfc(x).astype(np.float32))      # the tail too (to 2e-45)
  np.testing.assert_allclose(np.asarray(g), _gelu_exact(x), rtol=2e-5, atol=1e-37)   # (-v * 0.7071 rounds)
  assert np.asarray(g)[0] < -1e-8                                                # 1 + erf rounded it to 0
  np.testing.assert_array_equal(np.asarray(s), _erfc([x[0], x[1] * np.float32(2)]).astype(np.float32))
  xb = x.astype(BF16)
  o, g, s = erfc_and_gelu(xb, interpret=True)
  assert o.dtype == BF16 and g.dtype == BF16
  want = _erfc(xb.astype(np.float32)).astype(np.float32).astype(ml_dtypes.bfloat16).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(o, np.float32), want)
  np.testing.assert_allclose(np.asarray(g, np.float32),                      # (bfloat16's -v * 0.7071 rounds)
                             np.asarray(jax.nn.gelu(xb, approximate=False), np.float32), rtol=1.6e-2, atol=0)
  for dt in (F32, BF16):
    assert "math.erfc" in erfc_and_gelu.mlir(S((256,), dt))
  g = gelu_exact_called(x, interpret=True)        # the call computes the hinted form since probe 46i
  np.testing.assert_allclose(np.asarray(g), _gelu_exact(x), rtol=2e-5, atol=1e-37)
  assert np.asarray(g)[0] < -1e-8


@pytest.mark.gpu
def test_gpu_erfc_and_the_exact_gelu():
  x = np.linspace(-10, 10, 256).astype(np.float32)
  x[0], x[1] = -5.9, 3.5
  o, g, s = erfc_and_gelu(jnp.asarray(x))
  np.testing.assert_allclose(np.asarray(o), _erfc(x), rtol=4e-6, atol=1e-37)
  np.testing.assert_allclose(np.asarray(g), np.asarray(jax.nn.gelu(jnp.asarray(x), approximate=False)),
                             rtol=1e-5, atol=1e-37)
  np.testing.assert_allclose(np.asarray(s), _erfc([x[0], x[1] * np.float32(2)]), rtol=4e-6, atol=1e-37)
  xb = jnp.asarray(x.astype(BF16))
  o, g, s = erfc_and_gelu(xb)
  want = _erfc(np.asarray(xb, np.float32)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(o, np.float32), want, rtol=8e-3, atol=1e-37)


# ---------------------------------------------------------------- .ravel() / .flatten() / ml.ravel
@mg.mgpu_kernel(out_shape=lambda x: (S((x.size,), x.dtype),) * 3)
def ravelled(x, a, b, c):
  v = x[...]
  a[...] = v.ravel()
  b[...] = (v * 2).flatten()
  c[...] = ml.ravel(v + 1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.size,), x.dtype))
def ravelled_by_columns(x, a):
  a[...] = x[...].ravel(order="F")


@mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype))
def ravelled_scalar(x, a):
  a[...] = x[0, 0].ravel()


def test_ravel_and_flatten_of_a_register_tensor_are_its_reshape_to_one_axis():
  """x[...].ravel() and .flatten() were MG003 (no attribute; the hint wrote .reshape((n,))): they are that reshape,
  as is ml.ravel (jnp.ravel's hint names it); order='F' says what to write."""
  for shape in ((4, 128), (64, 8)):
    x = np.arange(512, dtype=np.float32).reshape(shape) - 100
    a, b, c = ravelled(x, interpret=True)
    for got, want in zip((a, b, c), (x.ravel(), (x * 2).flatten(), np.ravel(x + 1))):
      np.testing.assert_array_equal(np.asarray(got), want)
  assert "module" in ravelled.mlir(S((4, 128), F32))
  expect(ravelled_by_columns, [S((4, 128), F32)], mg.KernelTypeError, "x[...].ravel(order=",
         "ravel takes order='C' (row-major) in a kernel, got order='F'",
         hint="order='F' is the ravel of the transpose: ml.transpose(x[...]).ravel()")
  # a scalar's ravel is jnp's of a 0-d array, its one element as a (1,) tensor (an error until session 55)
  np.testing.assert_array_equal(np.asarray(ravelled_scalar(jnp.asarray(x), interpret=True)), x[:1, 0])


@pytest.mark.gpu
def test_gpu_ravel_and_flatten():
  for shape in ((4, 128), (64, 8)):
    x = np.arange(512, dtype=np.float32).reshape(shape) - 100
    a, b, c = ravelled(jnp.asarray(x))
    for got, want in zip((a, b, c), (x.ravel(), (x * 2).flatten(), np.ravel(x + 1))):
      np.testing.assert_array_equal(np.asarray(got), want)


# ---------------------------------------------------------------- a number and a boolean side of `a if c else b`
@mg.mgpu_kernel(out_shape=lambda x, s: (S((4,), F32), S((4,), I32)))
def number_or_boolean_side(x, s, out, ints):
  i, k = s[0], s[1]
  out[0] = x[i] if i < x.shape[0] else False                 # x[i] read only where i < 8
  out[1] = True if i < x.shape[0] else x[0]
  out[2] = x[0] if k > 0 else (i > 2)
  out[3] = (x[i] if i < x.shape[0] else False) + 1.0
  ints[0] = k if i < 8 else True
  ints[1] = (i < 3) if k else k
  ints[2] = (k if i < 8 else True) * 3
  ints[3] = False if k else i


def _number_or_boolean_want(x, i, k):
  n, xi = len(x), (lambda: float(x[i]))
  return ([float(xi() if i < n else False), float(True if i < n else x[0]), float(x[0] if k > 0 else (i > 2)),
           (xi() if i < n else False) + 1.0],
          [int(k if i < 8 else True), int((i < 3) if k else k), (k if i < 8 else True) * 3, int(False if k else i)])


def test_a_conditional_expression_of_a_number_and_a_boolean_is_that_number_as_and_or_make_it():
  """`x[i] if i < n else False` was MG003 (a float32 scalar on one side and a bool scalar on the other), while
  `i < n and x[i]` converts the boolean: the boolean side is the number's dtype (False 0, True 1), as Python's
  bool is an int, and each side is still computed only on its path."""
  x = np.arange(8, dtype=np.float32) + 10
  for i, k in [(0, 5), (3, 0), (8, 1), (100, 0)]:
    got, ints = number_or_boolean_side(x, np.array([i, k], np.int32), interpret=True)
    want, want_ints = _number_or_boolean_want(x, i, k)
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")
    np.testing.assert_array_equal(np.asarray(ints), np.array(want_ints, np.int32), err_msg=f"i={i} k={k}")
  assert "module" in number_or_boolean_side.mlir(S((8,), F32), S((2,), I32))


@pytest.mark.gpu
def test_gpu_a_conditional_expression_of_a_number_and_a_boolean_reads_only_its_path():
  """Reads x[i] past its end only on the side Python would not take (i = 100): a fault here is a read performed."""
  x = np.arange(8, dtype=np.float32) + 10
  for i, k in [(0, 5), (3, 0), (8, 1), (100, 0)]:
    got, ints = number_or_boolean_side(jnp.asarray(x), jnp.asarray(np.array([i, k], np.int32)))
    want, want_ints = _number_or_boolean_want(x, i, k)
    np.testing.assert_array_equal(np.asarray(got), np.array(want, np.float32), err_msg=f"i={i} k={k}")
    np.testing.assert_array_equal(np.asarray(ints), np.array(want_ints, np.int32), err_msg=f"i={i} k={k}")


# ---------------------------------------------------------------- round(f) of a float scalar: an int, as Python's
@mg.mgpu_kernel(out_shape=lambda x, f: (S((4,), x.dtype), S((5,), I32)))
def rounded_index(x, f, out, ints):
  g = f[0]
  out[0] = x[round(g)]
  out[1] = x[round(f[1] * 2.0)]
  out[2] = x[round(g, None)]
  out[3] = round(g, 1)                              # with ndigits a float, as Python's
  ints[0] = round(g)
  ints[1] = round(f[1])
  ints[2] = round(-f[1])
  ints[3] = round(f[2].astype(jnp.bfloat16))
  ints[4] = round(g) // 2                           # integer arithmetic on it


def test_round_of_a_float_scalar_is_an_int_that_indexes():
  """round(f) of a float32 scalar stayed float32 (Python's round gives an int), so x[round(f)] was MG003 (an index
  must be an integer scalar): it is an int32, halves to even as Python's (round(2.5) is 2); round(f, n) stays a
  float, as Python's."""
  x = np.arange(16, dtype=np.float32) * 10
  for f in ([2.6, 2.5, 3.5], [0.4, 1.5, -2.5], [5.5, 0.25, 6.5]):
    fa = np.array(f, np.float32)
    got, ints = rounded_index(x, fa, interpret=True)
    g = float(fa[0])
    want = [x[round(g)], x[round(float(fa[1] * np.float32(2)))], x[round(g, None)], np.float32(round(g, 1))]
    np.testing.assert_allclose(np.asarray(got), np.array(want, np.float32), rtol=1e-7, err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(ints), [round(g), round(float(fa[1])), round(-float(fa[1])),
                                                     round(float(fa[2])), round(g) // 2], err_msg=str(f))
  ir = rounded_index.typed_ir(S((16,), F32), S((3,), F32))
  assert "scalar<int32> = cast" in ir, ir
  assert "module" in rounded_index.mlir(S((16,), F32), S((3,), F32))


@pytest.mark.gpu
def test_gpu_round_of_a_float_scalar_indexes():
  x = np.arange(16, dtype=np.float32) * 10
  for f in ([2.6, 2.5, 3.5], [0.4, 1.5, -2.5], [5.5, 0.25, 6.5]):
    fa = np.array(f, np.float32)
    want, got = rounded_index(x, fa, interpret=True), rounded_index(jnp.asarray(x), jnp.asarray(fa))
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]), err_msg=str(f))
    np.testing.assert_array_equal(np.asarray(got[0])[:3], np.asarray(want[0])[:3], err_msg=str(f))
    # round(g, 1) divides by 10: the GPU's float32 division is within two ulp of the quotient (H200: 2.6000001)
    np.testing.assert_allclose(np.asarray(got[0])[3], np.asarray(want[0])[3], rtol=3e-7, err_msg=str(f))


# ---------------------------------------------------------------- a few elements of a ref filled with a number
@mg.mgpu_kernel(out_shape=lambda x, n: (S((16,), x.dtype), S((8, 16), x.dtype), S((16,), I32), S((16,), x.dtype)))
def few_filled(x, n, out, grid, ints, via_smem):
  out[...] = x[...]
  out[4:8] = 0
  out[13:] = x[1]
  grid[...] = ml.zeros((8, 16), x.dtype) + 1
  grid[2:5, 3:8] = -1.5
  grid[7, 11:16] = n[0].astype(x.dtype)
  ints[...] = n[...]
  ints[1:4] = n[0] * 2
  ints[5:10] = True
  buf = ml.smem((16,), x.dtype)
  buf[...] = x[...]
  buf[0:3] = 7
  via_smem[...] = buf[...]


@mg.mgpu_kernel(out_shape=lambda x, n: S((16,), I32))
def few_filled_with_a_float(x, n, ints):
  ints[...] = n[...]
  ints[1:4] = 0.5


def _few_filled_want(x, n):
  out = x.copy(); out[4:8] = 0; out[13:] = x[1]
  grid = np.ones((8, 16), x.dtype); grid[2:5, 3:8] = -1.5; grid[7, 11:16] = n[0]
  ints = n.copy(); ints[1:4] = n[0] * 2; ints[5:10] = True
  smem = x.copy(); smem[0:3] = 7
  return out, grid, ints, smem


def test_a_few_elements_of_a_ref_filled_with_a_number_are_stored_one_at_a_time():
  """out[4:8] = 0 was MG204 (the fill made a register vector of 4 elements, which no layout holds): a number or a
  scalar stored into a window of a few elements (at most 32, not a multiple of 8) is stored an element at a time,
  as out[4] = 0, out[5] = 0, ... would be; 2-D windows, SMEM buffers, 16-bit and integer refs alike."""
  x, n = np.arange(16, dtype=np.float32) + 1, np.arange(16, dtype=np.int32) * 3
  for dt in (np.float32, BF16):
    xs = x.astype(dt)
    got = few_filled(xs, n, interpret=True)
    for g, w in zip(got, _few_filled_want(xs, n)):
      np.testing.assert_array_equal(np.asarray(g), w, err_msg=str(dt))
  assert "module" in few_filled.mlir(S((16,), BF16), S((16,), I32))
  expect(few_filled_with_a_float, [S((16,), F32), S((16,), I32)], mg.DtypeMismatchError, "ints[1:4] = 0.5",
         "cannot store the float 0.5 into ints[1:4] (int32)")


@pytest.mark.gpu
def test_gpu_a_few_elements_of_a_ref_filled_with_a_number():
  x, n = np.arange(16, dtype=np.float32) + 1, np.arange(16, dtype=np.int32) * 3
  for dt in (np.float32, BF16):
    xs = x.astype(dt)
    got = few_filled(jnp.asarray(xs), jnp.asarray(n))
    for g, w in zip(got, _few_filled_want(xs, n)):
      np.testing.assert_array_equal(np.asarray(g), w, err_msg=str(dt))
