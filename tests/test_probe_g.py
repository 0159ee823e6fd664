"""Probe G's findings.

1. A reversed slice (`x.at[::-1]`, `v[::-1]`) got the strided-slice hint built for a step of
   -1 ("an axis of size -1 ... n // -1"); negative and zero steps now have their own messages
   and hints, and the hints work.
2. `**` was unsupported and its hint failed for a Python-number base (`ml.log2(0.9)` is MG003):
   now x ** n (a static int: products as lax.integer_pow, bit for bit jnp's), x ** 0.5
   (ml.sqrt) and c ** t (a positive Python number c: exp2(t * log2(c))) work; other forms
   are errors whose hints work, and ml.log2 of a Python number hints math.log2.
3. A masked access of a GMEM window with a static negative start (`x.at[ml.ds(-1, 128)]
   .load(mask=j >= 1)`) was MG203 while the same window with a run-time start was accepted;
   now a GMEM window may start before 0 as it may run past the end (a masked-on element
   outside is interpret mode's OutOfBoundsError, as for run-time starts). The lowering sliced
   such a window as Python does (`[127:126]`, an empty memref): it now indexes the root.
"""
import math
import functools

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32


def exports(kernel, *args, **kw):
  """The kernel's real Mosaic GPU module, built on the CPU through a CUDA export."""
  text = jax.export.export(jax.jit(functools.partial(kernel, **kw)), platforms=["cuda"])(*args).mlir_module()
  assert "mosaic_gpu" in text
  return text


# ---------------------------------------------------------------- 1. reversed slices
@mg.mgpu_kernel(out_shape=lambda x: x)
def rev_ref(x, out):
  out[...] = x.at[::-1][...]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype))
def rev_ref_cols(x, out):
  out[...] = x.at[:, ::-2][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def rev_tensor(x, out):
  v = x[...]
  out[...] = v[::-1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype))
def strided_tensor(x, out):
  v = x[...]
  out[...] = v[:, ::2]


@mg.mgpu_kernel(out_shape=lambda x: x)
def zero_step(x, out):
  out[...] = x.at[::0][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def plain_copy(x, out):
  out[...] = x[...] * 2.0


R = 8


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // R,))
def rows_from_the_end(x, out):
  i = ml.program_id(0)
  n = x.shape[0]
  for r in ml.static_range(R):
    out.at[i * R + r][...] = x.at[n - 1 - (i * R + r)][...]


def test_a_reversed_ref_slice_reads_as_the_plain_subscript():
  """x.at[::-1] was MG003 (a view's window is read in memory order); since probe 46a a strided view read whole is
  the plain subscript x[::-1]: the window that covers it, reversed in registers."""
  rng = np.random.default_rng(3)
  for shape in ((128,), (64, 128)):
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(rev_ref(x, interpret=True)), x[::-1])
  x = rng.standard_normal((64, 128)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(rev_ref_cols(x, interpret=True)), x[:, ::-2])


def test_a_reversed_register_tensor_slice_has_its_own_hint():
  x1 = np.arange(128, dtype=np.float32)        # v[::-1] is now jnp.flip, through SMEM (test_probe33b)
  np.testing.assert_array_equal(rev_tensor(x1, interpret=True), x1[::-1])
  x = np.arange(8 * 48, dtype=np.float32).reshape(8, 48)      # ((8, 24): MG204 until probe 47a computed it padded)
  np.testing.assert_array_equal(strided_tensor(x, interpret=True), x[:, ::2])
  x = np.arange(8 * 256, dtype=np.float32).reshape(8, 256)     # (now computed in registers: test_probe32d)
  np.testing.assert_array_equal(strided_tensor(x, interpret=True), x[:, ::2])


def test_a_zero_step_is_an_error_as_in_python():
  expect(zero_step, [S((128,), F32)], mg.KernelTypeError, "x.at[::0][...]",
         "slice step cannot be zero (dimension 0)",
         hint="slice with a step of 1 (x.at[a:b]), or index one element with an int")


def test_the_reversal_hints_work():
  x = rand.normal(rand.key(0), (128,), F32)
  got = jax.jit(lambda x: plain_copy(x[::-1], interpret=True))(x)      # the hint, followed
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x[::-1] * 2.0))
  exports(lambda x: plain_copy(x[::-1]), x)
  x2 = rand.normal(rand.key(1), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(rows_from_the_end(x2, interpret=True)), np.asarray(x2[::-1]))
  rows_from_the_end.check(S((64, 128), F32))
  exports(rows_from_the_end, x2)


@pytest.mark.gpu
def test_gpu_rows_from_the_end():
  x = rand.normal(rand.key(1), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(jax.jit(rows_from_the_end)(x)), np.asarray(x[::-1]))


# ---------------------------------------------------------------- 2. the ** operator
@mg.mgpu_kernel(out_shape=lambda x: (x,) * 9)
def powers(x, o2, o3, om1, o0, oh, oc, o2f, om3, o7):
  v = x[...]
  o2[...] = v ** 2
  o3[...] = v ** 3
  om1[...] = v ** -1
  o0[...] = v ** 0
  oh[...] = v ** 0.5
  oc[...] = 0.9 ** v
  o2f[...] = v ** 2.0
  om3[...] = v ** -3
  w = v
  w **= 7
  o7[...] = w


def _powers_ref(x):
  return (x ** 2, x ** 3, x ** -1, x ** 0, x ** 0.5, 0.9 ** x, x ** 2.0, x ** -3, x ** 7)


def on_host(f, *args):
  """f(*args) jitted on the CPU: interpret mode computes on the host, in numpy (a GPU's `/` and
  sqrt may differ by an ulp)."""
  cpu = jax.devices("cpu")[0]
  return jax.jit(f)(*(jax.device_put(a, cpu) for a in args))


SPECIALS = [-0.0, 0.0, -np.inf, np.inf, -1.0, np.nan, 2.0, 1e-30, -3.5, 1e20]


@pytest.mark.parametrize("dtype", [F32, F16, jnp.bfloat16])
def test_powers_match_jnp(dtype):
  rnd = np.random.RandomState(0).randn(256 - len(SPECIALS)) * 4
  x = jnp.asarray(np.r_[SPECIALS, rnd], dtype)
  got = powers(x, interpret=True)
  ref = on_host(_powers_ref, x)
  for k, (g, r) in enumerate(zip(got, ref)):
    g, r = np.asarray(g, np.float32), np.asarray(r, np.float32)
    if k == 4:          # x ** 0.5 is ml.sqrt (correctly rounded; XLA's pow is within an ulp of it), but
      with np.errstate(invalid="ignore"):         # jnp's pow's 0.0 at -0.0 and inf at -inf (probe 53h)
        want = np.sqrt(np.asarray(x)).astype(np.float32)
      want[0], want[2] = 0.0, np.inf              # (sqrt's -0.0 and NaN)
      np.testing.assert_array_equal(g, want)
      np.testing.assert_allclose(g[4:], r[4:], rtol=2 ** -23 if dtype == F32 else 2 ** -7, atol=0)
      assert not np.signbit(g[0]) and g[2] == np.inf and not np.signbit(r[0]) and r[2] == np.inf
    elif k == 5:        # 0.9 ** x = exp2(x * log2(0.9)): to a few ulp of float32, then rounded
      tol = 2e-6 if dtype == F32 else 2 ** -10 if dtype == F16 else 2 ** -7
      np.testing.assert_allclose(g, r, rtol=tol, atol=0)
    else:               # products in lax.integer_pow's order: bit for bit
      np.testing.assert_array_equal(g, r, err_msg=f"output {k}")
  powers.check(S((256,), dtype))
  exports(powers, x)


@mg.mgpu_kernel(out_shape=lambda x, s: (x, x, x, S((), jnp.float32)))
def int_and_scalar_powers(x, s, o3, o0, o1, so):
  v = x[...]
  o3[...] = v ** 3
  o0[...] = v ** 0
  o1[...] = v ** 1
  t = ml.sum(s[...])
  so[...] = t ** 2 + t ** -1 + 2 ** t + t ** 0


def test_integer_and_scalar_powers_match_jnp():
  x = jnp.arange(-64, 64, dtype=jnp.int32) * 37
  s = jnp.full((128,), 0.0125, F32)
  o3, o0, o1, so = int_and_scalar_powers(x, s, interpret=True)
  np.testing.assert_array_equal(np.asarray(o3), np.asarray(x ** 3))    # wraps as jnp's
  np.testing.assert_array_equal(np.asarray(o0), np.ones(128, np.int32))
  np.testing.assert_array_equal(np.asarray(o1), np.asarray(x))
  t = jnp.sum(s)
  np.testing.assert_allclose(np.asarray(so), np.asarray(t ** 2 + t ** -1 + 2 ** t + t ** 0), rtol=1e-6)
  int_and_scalar_powers.check(S((128,), jnp.int32), S((128,), F32))
  exports(int_and_scalar_powers, x, s)


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_negative_power(x, out):
  out[...] = (x[...] + 1) ** -2


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def int_negative_power_fixed(x, out):
  out[...] = (x[...] + 1).astype(jnp.float32) ** -2


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_exponent(x, out):
  v = x[...]
  out[...] = v ** 1.5


@mg.mgpu_kernel(out_shape=lambda x: x)
def float_exponent_fixed(x, out):
  v = x[...]
  out[...] = ml.exp2(1.5 * ml.log2(v))


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def tensor_exponent(x, y, out):
  v = x[...]
  w = y[...]
  out[...] = v ** w


@mg.mgpu_kernel(out_shape=lambda x, y: x)
def tensor_exponent_fixed(x, y, out):
  v = x[...]
  w = y[...]
  out[...] = ml.exp2(w * ml.log2(v))


@mg.mgpu_kernel(out_shape=lambda x: x)
def negative_base(x, out):
  t = x[...]
  out[...] = (-2.0) ** t


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_exponent_base(x, out):
  k = x[...]
  out[...] = 2 ** k


@mg.mgpu_kernel(out_shape=lambda x: x)
def int_exponent_base_fixed(x, out):
  k = x[...]
  out[...] = 1 << k


@mg.mgpu_kernel(out_shape=lambda x: x)
def log_of_number(x, out):
  t = x[...]
  out[...] = ml.exp2(t * ml.log2(0.9))


@mg.mgpu_kernel(out_shape=lambda x: x)
def log_of_number_fixed(x, out):
  t = x[...]
  out[...] = ml.exp2(t * math.log2(0.9))


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp_of_number(x, out):
  out[...] = x[...] * ml.exp(-1.5)


@mg.mgpu_kernel(out_shape=lambda x: x)
def exp_of_number_fixed(x, out):
  out[...] = x[...] * math.exp(-1.5)


def test_unsupported_powers_hint_what_works():
  f = S((128,), F32)
  i = S((128,), jnp.int32)
  expect(int_negative_power, [i], mg.UnsupportedDtypeError, "(x[...] + 1) ** -2",
         "(x[...] + 1) ** -2: integers cannot be raised to negative powers (as in jnp)",
         hint="compute in floating point: (x[...] + 1).astype(jnp.float32) ** -2")
  x = jnp.arange(128, dtype=jnp.int32)
  np.testing.assert_array_equal(np.asarray(int_negative_power_fixed(x, interpret=True)),
                                np.asarray(on_host(lambda x: (x + 1).astype(F32) ** -2, x)))
  xs = jnp.linspace(0.5, 3.0, 128, dtype=F32)
  ys = jnp.linspace(-2.0, 2.0, 128, dtype=F32)
  # v ** 1.5 and v ** w are jnp.power (libdevice's powf) since probe 29a (they were MG001)
  np.testing.assert_allclose(np.asarray(float_exponent(xs, interpret=True)), np.asarray(xs ** 1.5), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(tensor_exponent(xs, ys, interpret=True)), np.asarray(xs ** ys), rtol=1e-6)
  np.testing.assert_allclose(np.asarray(float_exponent_fixed(xs, interpret=True)), np.asarray(xs ** 1.5),
                             rtol=1e-5)
  np.testing.assert_allclose(np.asarray(tensor_exponent_fixed(xs, ys, interpret=True)), np.asarray(xs ** ys),
                             rtol=1e-5)
  # (-2.0) ** t is jnp's pow since probe 43b (it was MG003: c ** t was exp2(t * log2(c)))
  tn = jnp.arange(-64, 64, dtype=F32) / 2
  np.testing.assert_array_equal(np.asarray(negative_base(tn, interpret=True)), np.asarray((-2.0) ** tn))
  k = jnp.arange(128, dtype=jnp.int32) % 31
  # 2 ** k of integers is jnp's integer power since probe 42w (it was MG106, whose hint wrote 1 << k)
  np.testing.assert_array_equal(np.asarray(int_exponent_base(k, interpret=True)), np.asarray(2 ** k))
  np.testing.assert_array_equal(np.asarray(int_exponent_base_fixed(k, interpret=True)), np.asarray(2 ** k))
  t = jnp.linspace(-20.0, 20.0, 128, dtype=F32)
  # ml.log2(0.9) and ml.exp(-1.5) of Python numbers are float32 numbers computed while tracing since probe 60b
  # (they were MG003, "should be computed in Python")
  np.testing.assert_allclose(np.asarray(log_of_number(t, interpret=True)), np.asarray(0.9 ** t), rtol=2e-6)
  np.testing.assert_array_equal(np.asarray(exp_of_number(t, interpret=True)),
                                np.asarray(t) * np.exp(np.float32(-1.5)))
  np.testing.assert_allclose(np.asarray(log_of_number_fixed(t, interpret=True)), np.asarray(0.9 ** t), rtol=2e-6)
  np.testing.assert_allclose(np.asarray(exp_of_number_fixed(t, interpret=True)), np.asarray(t * math.exp(-1.5)),
                             rtol=1e-6)
  for k_ in (int_negative_power_fixed, float_exponent_fixed, tensor_exponent_fixed, log_of_number_fixed):
    k_.check(*([i] if k_ is int_negative_power_fixed else [f, f] if k_ is tensor_exponent_fixed else [f]))
  exports(log_of_number_fixed, t)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16])
def test_gpu_powers(dtype):
  rnd = np.random.RandomState(0).randn(256 - len(SPECIALS)) * 4
  x = jnp.asarray(np.r_[SPECIALS, rnd], dtype)
  got = jax.jit(powers)(x)
  for k, (g, r) in enumerate(zip(got, jax.jit(_powers_ref)(x))):     # XLA on the GPU: its `/` too
    g, r = np.asarray(g, np.float32), np.asarray(r, np.float32)
    if k == 4:                    # the GPU's sqrt and XLA's pow: an ulp apart
      np.testing.assert_allclose(g[4:], r[4:], rtol=2 ** -22 if dtype == F32 else 2 ** -7, atol=0)
    elif k == 5:
      np.testing.assert_allclose(g, r, rtol=2e-6 if dtype == F32 else 2 ** -7, atol=0)
    else:
      np.testing.assert_array_equal(g, r, err_msg=f"output {k}")


# ---------------------------------------------------------------- 3. static negative starts, masked
@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_right(x, out):                      # out[i] = x[i - 1], out[0] = 0
  j = ml.arange(128)
  out.at[ml.ds(0, 128)][...] = x.at[ml.ds(-1, 128)].load(mask=j >= 1, other=0.0)
  out.at[ml.ds(128, 128)][...] = x.at[ml.ds(127, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_left_store(x, out):                 # out[i - 1] = x[i], out[255] = 0
  j = ml.arange(128)
  out[...] = ml.zeros((256,), x.dtype)
  out.at[ml.ds(-1, 128)].store(x.at[ml.ds(0, 128)][...], mask=j >= 1)
  out.at[ml.ds(127, 128)].store(x.at[ml.ds(128, 128)][...], mask=j < 128)


@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_rows_down(x, out):                  # out[r] = x[r - 1], out[0] = 0: a 2-D window
  r = ml.arange(64)
  out[...] = x.at[ml.ds(-1, 64), :].load(mask=(r >= 1)[:, None], other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
def shift_right_dyn(x, out):                  # the run-time start that was always accepted
  t = ml.program_id(0)
  j = t * 128 + ml.arange(128)
  out.at[ml.ds(t * 128, 128)][...] = x.at[ml.ds(t * 128 - 1, 128)].load(mask=j >= 1, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def shift_mask_on_outside(x, out):
  j = ml.arange(128)
  out[...] = x.at[ml.ds(-1, 128)].load(mask=j >= 0, other=0.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def unmasked_negative(x, out):
  out[...] = x.at[ml.ds(-1, 128)][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def unmasked_negative_rows(x, out):
  out[...] = x.at[ml.ds(-1, 64), :][...]


@mg.mgpu_kernel(out_shape=lambda x: x)
def wholly_before(x, out):
  j = ml.arange(128)
  out[...] = x.at[ml.ds(-128, 128)].load(mask=j >= 1, other=0.0)


def _shift(x, k, axis=0):
  return np.asarray(jnp.roll(x, k, axis).at[(slice(None),) * axis + ((slice(0, k) if k > 0 else slice(k, None)),)]
                    .set(0))


def test_a_static_negative_start_with_a_mask_is_accepted_and_right():
  x = jnp.arange(1, 257, dtype=F32)
  np.testing.assert_array_equal(np.asarray(shift_right(x, interpret=True)), _shift(x, 1))
  np.testing.assert_array_equal(np.asarray(shift_right_dyn(x, interpret=True)), _shift(x, 1))
  np.testing.assert_array_equal(np.asarray(shift_left_store(x, interpret=True)), _shift(x, -1))
  x2 = rand.normal(rand.key(0), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(shift_rows_down(x2, interpret=True)), _shift(x2, 1))
  for k, a in ((shift_right, x), (shift_left_store, x), (shift_rows_down, x2), (shift_right_dyn, x)):
    k.check(S(a.shape, a.dtype))
    exports(k, a)


def test_the_lowering_indexes_the_root_for_a_window_starting_before_0():
  text = shift_right.mlir(S((256,), F32))
  assert "memref<0xf32" not in text and "[127] [0]" not in text     # was memref.subview %x[127] [0] [1]
  assert "arith.constant -1 : index" in text


def test_a_masked_on_element_before_0_is_found_while_compiling():
  """The mask is known while compiling (probe 28h: it was left to interpret mode, MG952, and the
  CUDA export accepted a read of x[-1])."""
  expect(shift_mask_on_outside, [S((128,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(-1, 128)].load(",
         "this masked load touches x[-1:127] where its mask is on, outside x's shape (128,)",
         hint="make the mask false before x's start: keep the offsets along dimension 0 at 0 or more (offs >= 0)")


def test_unmasked_and_wholly_outside_negative_windows_are_still_errors():
  expect(unmasked_negative, [S((128,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(-1, 128)][...]",
         "ml.ds(-1, 128) is out of bounds for dimension 0 of x (size 128)",
         hint="a register read must stay inside the array: mask it to the elements inside:"
              " ref.load(mask=ml.arange(128) >= 1, other=0)")
  expect(unmasked_negative_rows, [S((64, 128), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(-1, 64), :][...]",
         "ml.ds(-1, 64) is out of bounds for dimension 0 of x (size 64)",
         hint="a register read must stay inside the array: mask it to the elements inside:"
              " ref.load(mask=ml.arange(64)[:, None] >= 1, other=0)")
  expect(wholly_before, [S((128,), F32)], mg.IndexOutOfBoundsError, "x.at[ml.ds(-128, 128)]",
         "ml.ds(-128, 128) is out of bounds for dimension 0 of x (size 128)")


@pytest.mark.gpu
def test_gpu_static_negative_starts():
  x = jnp.arange(1, 257, dtype=F32)
  np.testing.assert_array_equal(np.asarray(jax.jit(shift_right)(x)), _shift(x, 1))
  np.testing.assert_array_equal(np.asarray(jax.jit(shift_left_store)(x)), _shift(x, -1))
  x2 = rand.normal(rand.key(0), (64, 128), F32)
  np.testing.assert_array_equal(np.asarray(jax.jit(shift_rows_down)(x2)), _shift(x2, 1))
