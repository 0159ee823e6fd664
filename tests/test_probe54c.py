"""Probe 54c (code health): the disk key of a kernel derived twice (outputs grouped, for a kernel of pytree inputs)
holds both derivations: two input structures of the same leaves (NamedTuples whose fields come in other orders)
are two kernels, not one loaded from the other's disk entry."""
import typing

import numpy as np

import mgpu_dsl as mg


class XY(typing.NamedTuple):
  x: object
  y: object


class YX(typing.NamedTuple):
  y: object
  x: object


def _grouped():
  @mg.mgpu_kernel(out_shape=lambda p: {"d": p.x, "e": p.y})
  def diff(p, o):
    o["d"][...] = p.x[...] - p.y[...]
    o["e"][...] = p.y[...] * 2
  return diff


def _check(kernel, cls, a, b):
  out = kernel(cls(x=a, y=b), interpret=True)
  np.testing.assert_array_equal(np.asarray(out["d"]), a - b)
  np.testing.assert_array_equal(np.asarray(out["e"]), b * 2)


def test_grouped_outputs_of_two_input_structures_are_two_kernels_on_disk():
  rng = np.random.default_rng(54)
  a, b = (rng.standard_normal(128).astype(np.float32) for _ in range(2))
  kernel = _grouped()
  _check(kernel, XY, a, b)
  _check(kernel, YX, a, b)      # (its leaves are (y, x): read as XY's entry, d was y - x)


def test_a_fresh_kernel_of_the_other_structure_reads_its_own_disk_entry():
  rng = np.random.default_rng(55)
  a, b = (rng.standard_normal(256).astype(np.float32) for _ in range(2))
  _check(_grouped(), YX, a, b)
  _check(_grouped(), XY, a, b)
  _check(_grouped(), YX, b, a)
