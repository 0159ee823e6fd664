"""Probe 30e (the lead's): hints that showed placeholders where the user's own expressions belong."""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = ml.full_like(x, 3.0)


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like_computed(x_ref, o_ref):
  x = x_ref[...]
  o_ref[...] = ml.zeros_like(x * 2) + x


@mg.mgpu_kernel(out_shape=lambda x: x)
def full_like_fixed(x_ref, o_ref):       # full_like's hint followed
  x = x_ref[...]
  o_ref[...] = ml.full(x.shape, 3.0, x.dtype)


def test_ml_full_like_hint_uses_the_calls_own_arguments():
  # the hint was "ml.full(x.shape, value, x.dtype)" whatever the call's arguments
  expect(full_like, [S((128,), F32)], mg.UnknownNameError, "ml.full_like",
         "ml has no attribute 'full_like'", hint="no ml.full_like: ml.full(x.shape, 3.0, x.dtype)")
  # ml.zeros_like (Triton's tl.zeros_like) was MG002 with this hint's form until probe 47g
  x = np.arange(128, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(full_like_computed(jnp.asarray(x), interpret=True)), x)
  got = full_like_fixed(jnp.zeros((128,), F32), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.full((128,), 3.0, np.float32))


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_rows_odd(x_ref, o_ref, *, descending: ml.constexpr):
  o_ref[...] = ml.sort(x_ref[...], descending=descending)


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_rows_padded(x_ref, o_ref, *, descending: ml.constexpr, fill: ml.constexpr):   # the hint followed
  cols = ml.arange(128)
  x = ml.load(x_ref.at[:, ml.ds(0, 128)], mask=cols[None, :] < 96, other=fill)
  o_ref[...] = ml.sort(x, descending=descending)[:, :96]


def test_sort_padding_hint_gives_integers_their_extreme_value():
  # the hint said "other=the dtype's smallest value" for integers; since probe 46e the odd row sorts as
  # written (it was the MG003 whose hint this padding followed), and the padded form still works
  for dtype, descending, fill in [(jnp.int32, True, -2**31), (jnp.uint8, False, 255), (jnp.int16, False, 2**15 - 1)]:
    info = np.iinfo(dtype)
    x = np.random.default_rng(3).integers(info.min, info.max, (4, 96), endpoint=True).astype(dtype)
    x[0, :8] = fill                                    # real elements equal to the padding
    want = np.sort(x, axis=1)[:, ::-1] if descending else np.sort(x, axis=1)
    got = sort_rows_padded(jnp.asarray(x), descending=descending, fill=fill, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), want)
    got = sort_rows_odd(jnp.asarray(x), descending=descending, interpret=True)
    np.testing.assert_array_equal(np.asarray(got), want)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float16))
def half_carry(x_ref, o_ref):
  acc = ml.zeros((128,), jnp.float16)
  for i in ml.range(x_ref.shape[0] // 128):
    acc = acc + x_ref[ml.ds(i * 128, 128)] * 0.5
  o_ref[...] = acc


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float16))
def half_carry_wide(x_ref, o_ref):       # the hint's first way: the carry starts as float32
  acc = ml.zeros((128,), jnp.float32)
  for i in ml.range(x_ref.shape[0] // 128):
    acc = acc + x_ref[ml.ds(i * 128, 128)] * 0.5
  o_ref[...] = acc.astype(jnp.float16)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.float16))
def half_carry_narrow(x_ref, o_ref):     # its second way: the other side converted
  acc = ml.zeros((128,), jnp.float16)
  for i in ml.range(x_ref.shape[0] // 128):
    acc = acc + (x_ref[ml.ds(i * 128, 128)] * 0.5).astype(jnp.float16)
  o_ref[...] = acc


def test_a_narrow_loop_carry_meeting_a_wider_value_says_where_to_choose_its_dtype():
  # the hint said acc.astype(jnp.float32), which changes the carry's dtype in the body (MG005)
  e = expect(half_carry, [S((1024,), F32)], mg.DtypeMismatchError, "acc + x_ref",
             "+ on acc (float16) and x_ref[ml.ds(i * 128, 128)] * 0.5 (float32): dtypes differ and are never"
             " converted implicitly")
  assert e.hint == ("if acc is carried by a loop as float16: to compute in float32, make it float32 where it"
                    " starts before the loop (e.g. ml.zeros((128,), jnp.float32)) and convert it after the loop,"
                    " acc.astype(jnp.float16); to keep it float16, convert the other side:"
                    " (x_ref[ml.ds(i * 128, 128)] * 0.5).astype(jnp.float16)")
  x = np.random.default_rng(1).standard_normal(1024).astype(np.float32)
  want = (x.reshape(8, 128) * 0.5).sum(0)
  for k in (half_carry_wide, half_carry_narrow):
    got = np.asarray(k(jnp.asarray(x), interpret=True), np.float32)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-2)


@mg.mgpu_kernel(out_shape=lambda x, i: S((256,), F32))
def store_at_float_indices(x_ref, i_ref, o_ref):
  idx = i_ref[...] * 2.0
  o_ref[idx] = x_ref[...]


@mg.mgpu_kernel(out_shape=lambda x, i: S((256,), F32))
def store_at_float_indices_fixed(x_ref, i_ref, o_ref):     # its hint followed
  idx = i_ref[...] * 2.0
  o_ref[idx.astype(jnp.int32)] = x_ref[...]


def test_a_store_at_a_tensor_of_float_indices_hints_with_the_users_indices_converted():
  # the hint named placeholder ids, and did not say that float indices convert first
  expect(store_at_float_indices, [S((128,), F32), S((128,), jnp.int32)], mg.KernelTypeError, "o_ref[idx]",
         "a scatter's indices are integers, got idx (float32) for dimension 0 of o_ref",
         hint="convert them: idx.astype(jnp.int32)")        # what the fixed kernel below writes
  x = np.arange(128, dtype=np.float32)
  i = np.random.default_rng(2).permutation(128).astype(np.int32)
  got = store_at_float_indices_fixed(jnp.asarray(x), jnp.asarray(i), interpret=True)
  want = np.zeros(256, np.float32)
  want[i * 2] = x
  np.testing.assert_array_equal(np.asarray(got), want)
