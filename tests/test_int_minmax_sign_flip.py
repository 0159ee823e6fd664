"""Signed integer min / max reductions reduce the sign-flipped bits as unsigned (lowering/shape.py, session 52).

On the H100 (jax 0.11.2's ptxas) an int32 max or min fed by a negation and reduced across lanes by shuffles came
out wrong: `ml.max(-x, axis=1)` gave rows results built from other rows' elements, the PTX right
(benchmarks/probe_s52_neg.py; 47 of probe_s51_reduce.py's 1728 small reductions, and the multi-warpgroup fuzzer's
seeds 365 and 1142). `x ^ 0x80000000` maps signed order onto unsigned order, so the reduction runs as `maxui` /
`minui` of flipped bits and flips back. The CPU tests read the module; the GPU tests hold the numbers.
"""
from __future__ import annotations

import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct


def _rows(op, neg=True):
  @mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,), block=128)
  def rows(x, o):
    v = x[...]
    o[...] = op(-v if neg else v, axis=1)
  return rows


def _cols(op):
  @mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,), block=128)
  def cols(x, o):
    o[...] = op(-x[...], axis=0)
  return cols


@pytest.mark.parametrize("op,name", [(ml.max, "max"), (ml.min, "min")])
def test_a_signed_row_statistic_reduces_flipped_bits_unsigned(op, name):
  text = _rows(op).mlir(S((256, 16), jnp.int32))
  assert re.search(rf"arith.{name}ui %\w+, %\w+ : i32", text), "reduced as unsigned"
  assert not re.search(rf"arith.{name}si", text), "no signed reduction left"
  flips = re.findall(r"arith.xori %\w+, %\w+ : (vector<\d+xi32>|i32)", text)
  assert len(flips) >= 2, "flipped before and after"
  assert "arith.constant -2147483648 : i32" in text or "dense<-2147483648>" in text


def test_a_column_statistic_through_smem_flips_too():
  text = _cols(ml.max).mlir(S((64, 48), jnp.int32))
  assert re.search(r"arith.maxui", text) and not re.search(r"arith.maxsi", text)


def test_unsigned_and_float_statistics_and_sums_are_unchanged():
  text = _rows(ml.max, neg=False).mlir(S((256, 16), jnp.uint32))
  assert "arith.maxui" in text and "-2147483648" not in text
  text = _rows(ml.max).mlir(S((256, 16), jnp.float32))
  assert "-2147483648" not in text and "arith.maxui" not in text
  text = _rows(ml.sum).mlir(S((256, 16), jnp.int32))
  assert "-2147483648" not in text


@pytest.mark.parametrize("op", [ml.max, ml.min])
def test_interpret_mode_is_numpys_at_the_extremes(op):
  x = np.array([[np.iinfo(np.int32).min + 1, -1, 0, 1] * 4, [np.iinfo(np.int32).max, 5, -7, 0] * 4] * 128,
               np.int32)
  want = getattr(np, op.__name__)(-x.astype(np.int64), axis=1).astype(np.int32)
  np.testing.assert_array_equal(_rows(op)(x, interpret=True), want)


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(256, 16), (64, 48), (160, 48), (64, 128)])
@pytest.mark.parametrize("op", [ml.max, ml.min])
def test_gpu_the_row_statistic_of_a_negated_int32_tile(shape, op):
  x = np.random.default_rng(829).integers(-9, 10, shape).astype(np.int32)
  got = np.asarray(jax.jit(_rows(op))(x))
  np.testing.assert_array_equal(got, getattr(np, op.__name__)(-x, axis=1))


@pytest.mark.gpu
@pytest.mark.parametrize("op", [ml.max, ml.min])
def test_gpu_extremes_and_the_column_statistic(op):
  x = np.random.default_rng(7).integers(np.iinfo(np.int32).min + 1, np.iinfo(np.int32).max, (64, 48), np.int64)
  x = x.astype(np.int32)
  np.testing.assert_array_equal(np.asarray(jax.jit(_rows(op))(x)), getattr(np, op.__name__)(-x, axis=1))
  np.testing.assert_array_equal(np.asarray(jax.jit(_cols(op))(x)), getattr(np, op.__name__)(-x, axis=0))


def _whole(op, block):
  @mg.mgpu_kernel(out_shape=lambda x: S((1,), x.dtype), grid=(1,), block=block)
  def whole(x, o):
    o[0] = op(-x[...])
  return whole


@pytest.mark.parametrize("block", [128, 256])
def test_a_whole_tile_statistic_and_the_warpgroups_parts_flip_too(block):
  """To a scalar, at one and at two warpgroups (whose parts combine through SMEM after the flip back)."""
  text = _whole(ml.min, block).mlir(S((128, 64), jnp.int32))
  assert "arith.minui" in text and "-2147483648" in text
  x = np.random.default_rng(block).integers(-50, 50, (128, 64)).astype(np.int32)
  np.testing.assert_array_equal(_whole(ml.min, block)(x, interpret=True), [(-x).min()])
