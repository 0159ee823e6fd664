"""Probe 28d (mixture-of-experts and ragged pipelines driven by data): register indexing with a
uint32 index of 2**31 or more (or an int64 one past int32), which read the element its low 32 bits
name as a negative int32, where jnp clamps to the last element."""
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


def _export(fn, *specs):
  return jax.export.export(jax.jit(fn), platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- register indexing by unsigned / wide indices
@mg.mgpu_kernel(out_shape=lambda x, i: S((8,), F32))
def pick_eight(x, i, out):
  v = x[...]
  acc = ml.zeros((8,), F32)
  for k in ml.static_range(8):
    acc = ml.where(ml.arange(8) == k, v[i[k]], acc)
  out[...] = acc


def _jnp_scalar_indexing(x, idx):
  return np.array([np.asarray(jnp.asarray(x)[k]) for k in idx], np.float32)


def test_a_uint32_register_index_past_2_31_clamps_to_the_last_element_as_jnp():
  x = np.random.RandomState(0).randn(128).astype(np.float32)
  idx = np.array([0, 5, 2 ** 31, 2 ** 31 + 7, 2 ** 32 - 1, 127, 128, 3], np.uint32)
  got = pick_eight(jnp.asarray(x), jnp.asarray(idx), interpret=True)
  want = _jnp_scalar_indexing(x, [jnp.uint32(k) for k in idx])
  np.testing.assert_array_equal(np.asarray(got), want)
  assert want[2] == x[127]            # (it read x[0]: 2**31 as the int32 -2**31, wrapped and clamped)
  assert "mosaic_gpu" in _export(pick_eight, S((128,), F32), S((8,), jnp.uint32))


def test_an_int64_register_index_past_int32_clamps_as_jnp():
  with jax.enable_x64(True):
    x = np.random.RandomState(1).randn(128).astype(np.float32)
    idx = np.array([0, 5, -1, 2 ** 32, 2 ** 32 + 3, -2 ** 32, 2 ** 40, -2 ** 33 + 1], np.int64)
    got = pick_eight(jnp.asarray(x), jnp.asarray(idx), interpret=True)
    want = _jnp_scalar_indexing(x, [jnp.int64(k) for k in idx])
    np.testing.assert_array_equal(np.asarray(got), want)
    assert "mosaic_gpu" in _export(pick_eight, S((128,), F32), S((8,), jnp.int64))


# ---------------------------------------------------------------- .astype of a weakly typed loop carry
@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8_cast_carry(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s.astype(jnp.int32) + c[q]
  out[p] = s


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s + c[q]
  out[p] = s


@mg.mgpu_kernel(out_shape=lambda c: S(c.shape, I32), grid=lambda c: (c.shape[0],))
def prefix_int8_as_hinted(c, out):
  p = ml.program_id(0)
  s = 0
  for q in range(p):
    s = s + c[q].astype(jnp.int32)
  out[p] = s


def test_astype_of_a_weakly_typed_carry_is_that_dtype_and_8bit_hints_name_the_8bit_operand():
  spec = S((10,), jnp.int8)
  # s.astype(jnp.int32) stayed weak, took int8 from c[q]: "+ is not supported on int8", with the hint
  # s.astype(jnp.int32).astype(jnp.int32)
  expect(prefix_int8_cast_carry, [spec], mg.DtypeMismatchError, "s.astype(jnp.int32) + c[q]",
         "+ on s.astype(jnp.int32) (int32) and c[q] (int8): dtypes differ and are never converted implicitly",
         hint="convert one side explicitly, e.g. c[q].astype(jnp.int32)")
  # the hint named the carry s (an int8 only because it met c[q]): followed, s.astype(jnp.int32) + c[q]
  # was the error above
  expect(prefix_int8, [spec], mg.UnsupportedDtypeError, "s + c[q]",
         "+ is not supported on int8: Hopper has no register arithmetic on 8-bit types",
         hint="upcast first: c[q].astype(jnp.int32), compute, then cast back")
  c = np.random.RandomState(2).randint(0, 50, size=10).astype(np.int8)
  got = prefix_int8_as_hinted(jnp.asarray(c), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.cumsum(c.astype(np.int32)) - c)
  assert "mosaic_gpu" in _export(prefix_int8_as_hinted, spec)
