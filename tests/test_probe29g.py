"""Probe 29g (data-dependent kernels: atomics, histograms, segment sums, scans, sorts, gathers and
scatters, compaction, MoE routing): what the probe's kernels found, and the two hint bugs a previous
probe left (MG602 under an if known while compiling, MG401 of a 1-D SMEM window)."""
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


def _export(kernel, *specs, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  return jax.export.export(fn, platforms=["cuda"])(*specs).mlir_module()


# ---------------------------------------------------------------- a Python float into integer atomics
@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32))
def half_counts(x, h):
  ml.atomic_add(h.at[x[...]], 0.5)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def fractional_add(x, h):
  ml.atomic_add(h, 1.5)


@mg.mgpu_kernel(out_shape=lambda x: S((), jnp.int32))
def fractional_scalar_add(x, h):
  ml.atomic_add(h, 2.7)


@mg.mgpu_kernel(out_shape=lambda x: S((128,), jnp.int32))
def huge_max(x, h):
  ml.atomic_max(h, 1e10)


@mg.mgpu_kernel(out_shape=lambda x: S((64,), jnp.int32))
def whole_float_counts(x, h):
  ml.atomic_add(h.at[x[...]], 1.0)


def test_a_fractional_python_float_into_an_integer_atomic_is_an_error():
  """`ml.atomic_add(counts.at[b], 0.5)` into int32 counts added 0 (1.5 added 1, 1e10 maxed
  2147483647): the number was converted to the ref's dtype, silently, in every update. `other=`
  of an integer load already refused such numbers."""
  expect(half_counts, [S((256,), I32)], mg.DtypeMismatchError, "ml.atomic_add(h.at[x[...]], 0.5)",
         "ml.atomic_add of the float 0.5 into h (int32): it would be truncated to 0 in every update",
         hint="make h a float array (jnp.float32 in out_shape) to accumulate fractions, or pass an integer (0 or 1)")
  expect(fractional_add, [S((128,), F32)], mg.DtypeMismatchError, "ml.atomic_add(h, 1.5)",
         "ml.atomic_add of the float 1.5 into h (int32): it would be truncated to 1 in every update")
  expect(fractional_scalar_add, [S((128,), F32)], mg.DtypeMismatchError, "ml.atomic_add(h, 2.7)",
         "ml.atomic_add of the float 2.7 into h (int32): it would be truncated to 2 in every update")
  expect(huge_max, [S((128,), F32)], mg.KernelTypeError, "ml.atomic_max(h, 1e10)",
         "ml.atomic_max of 10000000000.0 into h (int32): the number is outside int32's range"
         " (-2147483648..2147483647)")


def test_a_whole_python_float_counts_as_its_integer():
  x = np.random.default_rng(0).integers(0, 64, 256).astype(np.int32)
  got = whole_float_counts(jnp.asarray(x), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.bincount(x, minlength=64))
