"""Bool arrays in memory, as jax keeps them: one byte an element, 0 or 1.

Mosaic GPU would make a bool operand an `i1` memref, which neither its register transfers nor
TMA can move. The kernel instead declares every bool ref (a GMEM argument or result, an SMEM
buffer) as an `i8` memref of the same shape, so copies move the bytes; a register read compares
the bytes with 0 (an `i1` tensor or scalar, True for any non-zero byte), a register write widens
`i1` to 0 or 1. The custom call still takes and returns XLA's `pred` arrays (also one byte an
element): no conversion runs at the call boundary.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith

from ..frontend.dtypes import DType
from .mosaic import mlir_type


def i8():
  return ir.IntegerType.get_signless(8)


def mem_type(d: DType) -> ir.Type:
  """The element type of a memref holding `d`: bytes for bool."""
  return i8() if d == DType.bool_ else mlir_type(d)


def mem_shape(t) -> jax.ShapeDtypeStruct:
  """The Mosaic GPU kernel's declaration of a GMEM ref of type `t`: int8 for bool."""
  d = jnp.int8 if t.dtype == DType.bool_ else jnp.dtype(t.dtype.numpy_name)
  return jax.ShapeDtypeStruct(tuple(t.shape), d)


def array_from_bytes(x: fa.FragmentedArray) -> fa.FragmentedArray:
  """An i8 tensor read from a bool ref as the bool tensor it holds (non-zero is True)."""
  x = fa.FragmentedArray(_registers=x.registers, _layout=x.layout, _is_signed=False)
  return x != 0


def array_to_bytes(x: fa.FragmentedArray) -> fa.FragmentedArray:
  """A bool (i1) tensor as the bytes a bool ref holds: 0 or 1."""
  return fa.FragmentedArray(_registers=x.registers, _layout=x.layout, _is_signed=False).astype(
      i8(), is_signed=False)


def scalar_from_byte(v: ir.Value) -> ir.Value:
  return arith.cmpi(arith.CmpIPredicate.ne, v, arith.constant(v.type, 0))


def scalar_to_byte(v: ir.Value) -> ir.Value:
  return arith.extui(i8(), v)


def vector_from_bytes(v: ir.Value) -> ir.Value:
  """A vector of bytes (a masked load's register) as a vector of i1."""
  from jaxlib.mlir.dialects import vector
  zero = vector.broadcast(v.type, arith.constant(i8(), 0))
  return arith.cmpi(arith.CmpIPredicate.ne, v, zero)


def vector_to_bytes(v: ir.Value) -> ir.Value:
  n = ir.VectorType(v.type).shape
  return arith.extui(ir.VectorType.get(n, i8()), v)


def bool_boundary(fn, mem_in, out_types, inout_types):
  """`fn` (as_gpu_kernel's jitted call, built with int8 in place of bool) as a call that takes
  and returns the bool arrays themselves: the same Mosaic GPU custom call, bound with the bool
  operands and results (XLA's `pred` is one byte an element, which the kernel reads as int8)."""
  from jax.experimental.mosaic.gpu.core import mosaic_gpu_p
  from .kernel import _eqns
  jaxpr = jax.make_jaxpr(fn)(*mem_in)
  eqn = next((e for e in _eqns(jaxpr.jaxpr) if e.primitive is mosaic_gpu_p), None)
  if eqn is None or not {"out_types", "inout_types"} <= set(eqn.params):
    return _converting(fn, out_types + inout_types)    # a jax whose primitive takes other parameters
  params = dict(eqn.params, out_types=tuple(out_types), inout_types=tuple(inout_types))

  @jax.jit
  def kernel(*args):
    return mosaic_gpu_p.bind(*args, **params)
  return kernel


def _converting(fn, result_types):
  """The fallback boundary: bool arguments converted to int8 before the call, bool results
  compared with 0 after it (one more XLA pass over each bool array, each way)."""
  @jax.jit
  def kernel(*args):
    res = fn(*[a.astype(jnp.int8) if a.dtype == jnp.bool_ else a for a in args])
    single = not isinstance(res, (tuple, list))
    res = [res] if single else list(res)
    res = [r != 0 if t.dtype == jnp.bool_ else r for r, t in zip(res, result_types)]
    return res[0] if single else tuple(res)
  return kernel
