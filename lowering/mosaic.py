"""Mosaic GPU helpers the lowering rules share: types, constants, register layouts, operands."""
from __future__ import annotations

import functools
import math

from jax.experimental.mosaic.gpu import fragmented_array as fa
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, llvm, vector

from ..frontend import hw
from ..frontend import ir as kir
from ..frontend.dtypes import DType
from ..frontend.types import LayoutKind, ScalarType, TensorType
from .interpret_numerics import const, int_of_float


def mlir_type(d: DType) -> ir.Type:
  return {
      DType.f32: ir.F32Type.get, DType.f16: ir.F16Type.get, DType.bf16: ir.BF16Type.get,
      DType.f8e4m3: ir.Float8E4M3FNType.get, DType.f8e5m2: ir.Float8E5M2Type.get,
      DType.bool_: lambda: ir.IntegerType.get_signless(1),
  }.get(d, lambda: ir.IntegerType.get_signless(d.bits))()


def i32():
  return ir.IntegerType.get_signless(32)


def asm_per_element(asm: str, constraints: str, *operands: ir.Value) -> ir.Value:
  """One PTX instruction (`asm`, `$0` the result) per element of same-typed operands, scalars or
  vectors (a register of a FragmentedArray): PTX has no vector form of mul.hi or div.rn."""
  if not isinstance(operands[0].type, ir.VectorType):
    return llvm.inline_asm(operands[0].type, list(operands), asm, constraints)
  out = operands[0]
  for j in range(ir.VectorType(out.type).shape[0]):
    pos = ir.DenseI64ArrayAttr.get([j])
    xs = [vector.extract(x, dynamic_position=[], static_position=pos) for x in operands]
    r = llvm.inline_asm(xs[0].type, xs, asm, constraints)
    out = vector.insert(r, out, dynamic_position=[], static_position=pos)
  return out


def index():
  return ir.IndexType.get()


def to_index(x) -> ir.Value | int:
  if isinstance(x, int) or x.type == index():
    return x
  return arith.index_cast(index(), x)


def scalar_const(value, d: DType) -> ir.Value:
  """A Python number as an MLIR constant of `d`; a Python float given an integer dtype converts
  by the cast rule (truncated, saturated, NaN -> 0), as interpret mode's `const`."""
  t = mlir_type(d)
  if d.is_float:     # rounded as interpret mode and jnp round it (numpy's cast), then exact in MLIR
    return arith.constant(t, float(const(value, d)))
  if isinstance(value, float) and d != DType.bool_:
    return arith.constant(t, int_of_float(value, d))
  return arith.constant(t, int(value))


@functools.lru_cache(maxsize=None)
def rows_layout(warps_per_row: int, vec: int, lanes: int = hw.WARP) -> fa.TiledLayout:
  """The ROWS tile layout: `warps_per_row` warps on each row (4 // warps_per_row rows per tile),
  the 32 lanes along the columns, `vec` contiguous elements per register. With `lanes` < 32 (a tile
  narrower than a warp's 32 * vec elements; one warp a row group) each warp holds 32 // lanes rows
  of `lanes` lanes: a reduction along the row shuffles among those lanes only."""
  if lanes < hw.WARP:
    assert warps_per_row == 1
    rows = hw.WARP // lanes
    tiles = ((hw.WARPS_PER_WARPGROUP * rows, lanes * vec), (rows, lanes * vec), (vec,))
    layout = fa.TiledLayout(fa.Tiling(tiles), warp_dims=(-5,), lane_dims=(-3, -2), vector_dim=-1,
                            _check_canonical=False)
    return layout.canonicalize()
  rows = hw.WARPS_PER_WARPGROUP // warps_per_row
  lane_cols = hw.WARP * vec
  tiles = ((rows, lane_cols * warps_per_row),)
  if warps_per_row > 1:
    tiles += ((lane_cols,),)
  tiles += ((vec,),)
  warp_dims = (-3,) if warps_per_row == 1 else ((-4, -3) if warps_per_row == 2 else (-3,))
  layout = fa.TiledLayout(fa.Tiling(tiles), warp_dims=warp_dims, lane_dims=(-2,), vector_dim=-1,
                          _check_canonical=False)
  return layout.canonicalize()


def layout_of(t: TensorType):
  """The Mosaic GPU layout of a register tensor of type `t`."""
  lay = t.layout
  if lay.kind == LayoutKind.STRIDED:     # (this warpgroup's rows of a split tensor)
    return fa.WGStridedFragLayout(shape=lay.local_shape(t.shape), vec_size=lay.vec)
  base = fa.WGMMA_LAYOUT if lay.kind == LayoutKind.WGMMA else rows_layout(lay.warps_per_row, lay.vec, lay.lanes)
  return base.reduce(lay.drop) if lay.drop else base


def is_split(t) -> bool:
  """Whether warpgroups split this tensor by rows (tensor-core tiles and their row vectors,
  strided tensors the layout pass split)."""
  return isinstance(t, TensorType) and (t.layout.kind == LayoutKind.WGMMA and 0 not in t.layout.drop
                                        and not t.layout.whole
                                        or t.layout.wgs > 1)


def flat_types(ctx, t) -> list[ir.Type]:
  """The MLIR types a value of typed-IR type `t` flattens to (scf.if results)."""
  if isinstance(t, ScalarType):
    return [mlir_type(t.dtype)]
  layout = layout_of(t)
  n = math.prod(layout.registers_shape(ctx.local_shape(t)))
  return [layout.registers_element_type(mlir_type(t.dtype))] * n


def as_array(ctx, x, like_type: TensorType, d: DType):
  """A FragmentedArray for operand `x`: tensors as they are, scalars splatted."""
  if isinstance(x, fa.FragmentedArray):
    return x
  if not isinstance(x, ir.Value):
    x = scalar_const(x, d)
  return fa.FragmentedArray.splat(x, ctx.local_shape(like_type), layout_of(like_type),
                                  is_signed=d.is_signed)


def operand(ctx, x):
  return ctx.get(x) if isinstance(x, kir.Value) else x
