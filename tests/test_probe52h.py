"""Probe 52h (code health): what the clean-up of duplicated code found.

A comprehension over a name whose defining statement failed (a poisoned name) left it unbound
afterwards instead of poisoned, so a later read of it was a second, spurious error ("y is read before
it is assigned") after the real one: one mistake must be reported once (frontend/env.py,
names_restored, now shared by the comprehension, a jnp call's form and a comprehension's hint).
"""
import jax
import jax.numpy as jnp
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from locate import expect


@mg.mgpu_kernel(out_shape=lambda x: x)
def comprehension_over_a_failed_name(x_ref, o_ref):
  v = x_ref[...]
  y = v + undefined_scale          # noqa: F821  (the mistake)
  ys = [y * 2 for y in range(3)]
  o_ref[...] = v * y + ys[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def nested_comprehension_over_failed_names(x_ref, o_ref):
  v = x_ref[...]
  i, j = v.shapes                  # (the mistake: a tensor has no .shapes)
  pairs = [i + j for i in range(2) for j in range(2)]
  o_ref[...] = v + i + j + pairs[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def tuple_target_over_a_failed_name(x_ref, o_ref):
  v = x_ref[...]
  w = ml.softmaxx(v)               # (the mistake: no such builtin)
  sums = [a + w for a, w in zip(range(2), range(2))]
  o_ref[...] = v * w + sums[0]


SPEC = (jax.ShapeDtypeStruct((128,), jnp.float32),)


def test_a_comprehension_keeps_a_poisoned_name_poisoned():
  e = expect(comprehension_over_a_failed_name, SPEC, mg.UnknownNameError, "undefined_scale",
             "name 'undefined_scale' is not defined")
  assert len(e.errors) == 1, str(e)


def test_nested_clauses_keep_their_poisoned_names_poisoned():
  with pytest.raises(mg.KernelError) as info:
    nested_comprehension_over_failed_names.check(*SPEC)
  e = info.value
  assert len(e.errors) == 1 and "shapes" in e.message, str(e)


def test_a_tuple_target_keeps_a_poisoned_name_poisoned():
  with pytest.raises(mg.KernelError) as info:
    tuple_target_over_a_failed_name.check(*SPEC)
  e = info.value
  assert len(e.errors) == 1 and "softmaxx" in e.message, str(e)
