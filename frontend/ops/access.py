"""Register access beyond whole windows: masked loads and stores, single elements as scalars.

`ml.load(ref, mask=m, other=0)` / `ref.load(mask=m)` read a window into registers, giving
`other` where the mask is off; `ml.store(ref, v, mask=m)` / `ref.store(v, mask=m)` write
only where it is on. A masked-off element is never touched in memory (the GPU predicates
each access), so a window may run past the end of a GMEM array. SMEM windows are always
inside their buffer: there a mask is a select in registers.

`s[...]` on a ref of shape () and `s[i]` with every dimension indexed read one element as a
scalar, uniform across the CTA (a size, an offset, a seed read at run time); `out[i] = v`
writes one.
"""
from __future__ import annotations

import math

import numpy as np

from .. import errors as E
from .. import ir
from ..dtypes import FLOAT8, DType
from ..infer import unify
from ..ir import Access, LayoutRule, Traits
from ..types import ScalarType, Space, TensorType, dtype_name, resolve
from . import elementwise as ew
from .elementwise_checks import check_python_int
from .base import Num, a_an, builtin, is_ref, is_scalar, is_tensor, is_value, kind_of, one_element
from .transfers import load, store
from .widen_hints import widen_hint  # a 16-bit float sum into float32: sum in float32
from ..loc import expr_of


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_READ)], layout=LayoutRule.MEMORY))
class MaskedLoad(ir.Op):
  """Read a GMEM window where `mask` holds; `other` (a number or scalar) elsewhere."""
  ref: ir.Value
  mask: ir.Value
  other: ir.Operand
  loc: object
  results: tuple
  start_multiple: int | None = None   # (as Load's: tma_starts.mark_register_starts)


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_WRITE)], layout=LayoutRule.MEMORY))
class MaskedStore(ir.Op):
  """Write `value` into a GMEM window where `mask` holds."""
  ref: ir.Value
  value: ir.Value
  mask: ir.Value
  loc: object
  results: tuple = ()
  start_multiple: int | None = None   # (as Load's)


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_READ)]))
class ScalarLoad(ir.Op):
  """One element (a ref of shape ()) read as a CTA-uniform scalar."""
  ref: ir.Value
  loc: object
  results: tuple


@ir.op(Traits(pure=True))
class ScalarRead(ir.Op):
  """Element `index` (one ir.Idx per dimension, all squeezed) of a kernel input, read as a
  scalar: inputs never change while the kernel runs, so the read is pure, and a pipelined
  loop's loads may take their windows from it (a page table's entry)."""
  ref: ir.Value
  index: tuple
  loc: object
  results: tuple


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_WRITE)]))
class ScalarStore(ir.Op):
  """One element (a ref of shape ()) written with a scalar (every thread writes the same value)."""
  ref: ir.Value
  value: ir.Operand
  loc: object
  results: tuple = ()


# ---------------------------------------------------------------- scalars
def scalar_load(cx, ref, name=""):
  from .memory import window
  base, index = window(cx.b, ref)
  if base.id in cx.b.read_only and base.id not in cx.b.aliased:   # a pure read of an input
    index = index if index is not None else ()
    out = cx.b.emit(ScalarRead, base, index, loc=cx.loc, types=[ScalarType(ref.type.dtype)], names=[name]).result
    if base.id in cx.b.weak_inputs:     # k(x, 3) (jax.jit's weak 0-d array): x_i32 + s[...] is int32, as in jnp
      cx.b.weak.add(out.id)
    return out
  return cx.b.emit(ScalarLoad, ref, loc=cx.loc, types=[ScalarType(ref.type.dtype)], names=[name]).result


def scalar_store(cx, ref, value):
  t = ref.type
  what = ref.name or "this element"
  if is_tensor(value):
    raise E.ShapeMismatchError(
        f"cannot store a tensor of shape {value.type.shape} into {what}, a single element", cx.loc,
        hint="store a scalar (a number, a reduction such as ml.sum(x), a value read with s[i]), or"
             " index fewer dimensions to write a window")
  if not (isinstance(value, Num) or is_scalar(value)):
    hint = "store a number or a scalar"
    if is_ref(value):       # out[i] = v of `for i, v in enumerate(x)`, out[0] = x.at[3]: the ref's element, read
      src = value.name or "the ref"
      hint = (f"read its element: {what} = {src}[...]" if not value.type.shape else
              f"read one element of it ({src} has shape {tuple(value.type.shape)}): {what} ="
              f" {src}[{', '.join('0' for _ in value.type.shape)}]")
    raise E.KernelTypeError(f"cannot store {kind_of(value)} into {what}", cx.loc, hint=hint)
  if is_value(value) and resolve(value.type.dtype) == DType.bool_ and resolve(t.dtype) != DType.bool_:
    raise E.StoreDtypeError(
        f"cannot store {cx.named(value, '') or 'a boolean scalar'} (bool) into {what} ({t.space},"
        f" {dtype_name(t.dtype)}): no implicit conversion", cx.loc,
        hint=f"make it a number: ml.where({cx.named(value, 'cond')}, 1, 0)")
  check_python_int(cx, value, t.dtype, f"the store into {what}")
  value = ew.weak_as(cx, value, resolve(t.dtype))     # out[i] = ml.where(c, 2.0, 0.5) into bfloat16
  if is_value(value) and unify(t.dtype, value.type.dtype, cx.loc, f"store into {what}") is None:
    raise E.StoreDtypeError(
        f"cannot store {cx.named(value, '') or 'a scalar'} ({dtype_name(value.type.dtype)}) into {what}"
        f" ({t.space}, {dtype_name(t.dtype)}): no implicit conversion", cx.loc,
        hint=widen_hint(cx, value, t.dtype)
        or f"convert explicitly: ({cx.named(value, 'value')}).astype(jnp.{dtype_name(t.dtype)})")
  if isinstance(value, float) and isinstance(resolve(t.dtype), DType) and not resolve(t.dtype).is_float:
    raise E.DtypeMismatchError(f"cannot store the float {value} into {what} ({dtype_name(t.dtype)})",
                               cx.loc, hint="store an int, or convert the value explicitly")
  cx.b.emit(ScalarStore, ref, value, loc=cx.loc)


# ---------------------------------------------------------------- masks
def _ref_arg(cx, ref, what, mask=None, other=0, value=None):
  if not is_ref(ref):
    from .arith_hints import not_a_ref_hint
    raise E.KernelTypeError(f"{what} needs a ref (a parameter, an ml.smem buffer or a view), got"
                            f" {kind_of(ref)}", cx.loc, hint=not_a_ref_hint(cx, ref, what, mask, other, value))
  if not ref.type.shape and _scalar_cond(cx, mask) is None:
    root, index = ((ref.name or "x").split(".at[")[0], "i") if ".at[" not in (ref.name or "") else \
        ((ref.name or "x").split(".at[")[0], (ref.name or "x").split(".at[", 1)[1].rsplit("]", 1)[0])
    raise E.KernelTypeError(f"{what} of the single element {ref.name or 'this ref'} takes a scalar condition as its"
                            f" mask (mask=i < n), got {kind_of(mask)}", cx.loc,
                            hint="pass a condition on scalars (mask=i < n), or guard the element with an if on one: "
                                 + (f"if i < n: {root}[{index}] = s" if what.endswith("store") else
                                    f"s = 0.0, then if i < n: s = {root}[{index}]"))


def _scalar_cond(cx, mask):
  """The condition of a mask on one element (Triton's `tl.load(ptr + i, mask=i < n)`): a Python bool, a
  bool scalar or a one-element tensor holding one; None for other masks."""
  if isinstance(mask, bool):
    return mask
  if is_scalar(mask) and resolve(mask.type.dtype) == DType.bool_:
    return mask
  cond = ew.one_element_scalar(cx, mask)
  return cond if is_scalar(cond) and resolve(cond.type.dtype) == DType.bool_ else None


def _masked_scalar_load(cx, ref, mask, other):
  """`ml.load(x.at[i], mask=i < n, other=0.0)`: the element read at its indices clamped into the array
  (so no address outside it is read), selected with `other` where the condition is false."""
  cond, d = _scalar_cond(cx, mask), resolve(ref.type.dtype)
  other = whole_other(cx, other, d, ref.name)      # other=0.0 on int32 data: the integer 0, as Triton's
  if is_tensor(other) or not (is_value(other) or isinstance(other, Num)):
    raise E.KernelTypeError(f"ml.load's other for the single element {ref.name or 'this ref'} must be a number or"
                            f" a scalar, got {kind_of(other)}", cx.loc, hint="other=0.0")
  if cond is True:
    return load(cx, ref, cx.name)
  if cond is False:
    return ew.full_(cx, (), other, d, "ml.load's other")
  v = load(cx, _clamped(cx, ref), cx.name)
  if d in FLOAT8:            # selected by its bits: the GPU has no float8 scalar arithmetic
    if not isinstance(other, Num):
      raise E.UnsupportedDtypeError(
          f"a masked load of one {d} element takes a number as other, not a run-time scalar", cx.loc,
          hint=_F8_OTHER.format(cx.named(other, "o")))
    import ml_dtypes
    from .elementwise_fns import bitcast
    bits = int(np.asarray(other, getattr(ml_dtypes, str(d))).view(np.uint8))
    return bitcast.rule(cx, ew.where_(cx, cond, bitcast.rule(cx, v, DType.u8), bits), d)
  return ew.where_(cx, cond, v, other)


def _mask_arg(cx, ref, mask, what):
  """The mask broadcast to the window's shape."""
  from .shape import broadcast_shape, broadcast_to_shape
  if is_tensor(mask) and resolve(mask.type.dtype) != DType.bool_:
    d = dtype_name(mask.type.dtype)
    raise E.KernelTypeError(f"{what}'s mask must be a boolean tensor, got {a_an(d)} tensor", cx.loc,
                            hint="pass a comparison as it is (mask=rows < n, without .astype), or compare a"
                                 " number tensor: mask=m != 0")
  shape = ref.type.shape
  if isinstance(mask, bool) or is_scalar(mask) and resolve(mask.type.dtype) == DType.bool_:
    return ew.full_(cx, shape, mask, DType.bool_, f"{what}'s mask")     # one condition for the whole window
  if is_scalar(mask):
    d = dtype_name(mask.type.dtype)
    raise E.KernelTypeError(f"{what}'s mask must be a boolean tensor or scalar, got {a_an(d)} scalar", cx.loc,
                            hint=f"compare it: mask={cx.named(mask, 'n')} != 0")
  n = shape[0] if shape else 128
  grid = f"rows = i * {n} + ml.arange({n}); mask = " + ("rows < n" if len(shape) <= 1 else
                                                          f"rows[:{', None' * (len(shape) - 1)}] < n")
  if not is_tensor(mask):
    raise E.KernelTypeError(f"{what}'s mask must be a boolean tensor, got {kind_of(mask)}", cx.loc,
                            hint=f"compare an index grid with a bound: {grid}")
  _mask_past_window(cx, ref, mask, what)
  if broadcast_shape(cx, [mask.type.shape, shape], what, ["the mask", ref.name or "the window"]) != shape:
    raise E.ShapeMismatchError(
        f"{what}'s mask of shape {mask.type.shape} does not fit {ref.name or 'the window'} of shape {shape}",
        cx.loc, hint=f"the mask needs the window's shape {shape}, or one that broadcasts to it: {grid}")
  return broadcast_to_shape(cx, mask, shape)


def _mask_past_window(cx, ref, mask, what):
  """A mask longer than a GMEM window along an axis (Triton's `offs < n` over a block of 4096 with
  the whole 4095-wide row as the window): the window may run past the array's end instead, the mask
  keeping the elements there off. ShapeMismatchError with that window written out."""
  shape, mshape = ref.type.shape, mask.type.shape
  if ref.type.space != Space.GMEM or len(mshape) != len(shape) or not any(
      m > n > 1 for m, n in zip(mshape, shape)) or any(1 < m < n for m, n in zip(mshape, shape)):
    return
  axis = next(a for a, (m, n) in enumerate(zip(mshape, shape)) if m > n > 1)
  name = ref.name or "the window"
  wider = _wider_window(name, axis, mshape[axis])
  raise E.ShapeMismatchError(
      f"{what}'s mask of shape {mshape} is longer than {name} of shape {shape} (axis {axis}: {mshape[axis]}"
      f" elements, the window {shape[axis]})", cx.loc,
      hint="make the window the mask's size: a masked window of a GMEM array may run past its end, and the"
           " mask keeps the elements there off" + (f": {wider}" if wider else f" (ml.ds(start, {mshape[axis]}) along"
                                                  f" axis {axis})"))


def _wider_window(name, axis, n):
  """`name` (a view as written, `l.at[r, :]`) with its `axis`-th kept index made `ml.ds(start, n)`; None
  where the text is not such a view."""
  import ast
  node = expr_of(name)
  if node is None:
    return None
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"):
    return None
  elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
  kept = [k for k, e in enumerate(elts) if isinstance(e, ast.Slice) or isinstance(e, ast.Call)
          and ast.unparse(e.func) in ("ml.ds", "pl.ds")]
  if axis >= len(kept) or not isinstance(elts[kept[axis]], ast.Slice) or elts[kept[axis]].step is not None:
    return None
  lower = elts[kept[axis]].lower
  elts[kept[axis]] = ast.parse(f"ml.ds({ast.unparse(lower) if lower else 0}, {n})", mode="eval").body
  node.slice = ast.Tuple(elts, ast.Load()) if len(elts) > 1 else elts[0]
  return ast.unparse(node)


@builtin(ref_methods=("load",))
def load_(cx, ref, mask=None, other=0, boundary_check=None, padding_option=None):
  """Read `ref` into registers; with `mask`, only where it holds (`other` elsewhere).

  `x.at[ml.ds(i * 128, 128)].load(mask=rows < n, other=0.0)` reads the last partial tile of
  `x` without touching memory past its end. `mask` is a boolean tensor of the window's shape
  (or one that broadcasts to it); `other` is a number, a scalar or a tensor. Without a mask it
  is `ref[...]`.
  """
  if is_ref(other):            # other=buf (an SMEM buffer, a GMEM ref): a ref is no value to select
    named = cx.named(other, "buf")
    raise E.KernelTypeError(f"ml.load's other must be a number, a scalar or a tensor, got {kind_of(other)}",
                            cx.loc, hint=f"read it into registers: other={named}[...]")
  from .block_ptrs import BlockPtr, keyword_error, load_block
  if isinstance(ref, BlockPtr):                # Triton's tl.load(block_ptr, boundary_check=(0, 1)) (probe 49h)
    return load_block(cx, ref, mask, other, boundary_check, padding_option)
  if boundary_check is not None or padding_option is not None:
    raise keyword_error(cx, "boundary_check=" if boundary_check is not None else "padding_option=")
  from .gather import IndexedRef, _gather_load, run_window, scattered
  from .smem_runs import smem_run_outside
  iref = ref
  if isinstance(ref, IndexedRef) and (scattered(cx, ref) or mask is not None and smem_run_outside(cx, ref, mask)):
    return _gather_load(cx, ref, mask, other)  # ml.load(table.at[ids, :], mask=m, other=0); buf.at[s - 1] masked
  if isinstance(ref, IndexedRef):              # ml.load(x.at[offs], mask=offs < n): Triton's run of offsets
    ref = run_window(cx, ref, (cx.operands or {}).get(ref) or "")
    if ref is None:                            # (runs that cover no window in order: a gather)
      return _gather_load(cx, iref, mask, other)
  if mask is None:
    if not is_ref(ref):
      _ref_arg(cx, ref, "ml.load", other=other)
    return load(cx, ref, cx.name)
  _ref_arg(cx, ref, "ml.load", mask, other)
  other = whole_other(cx, other, ref.type.dtype, ref.name)   # (before every path below takes it: probe 67a)
  from .padded_masks import padded_mask, padded_masked_load
  if ref.type.shape and isinstance(other, (int, float)) and padded_mask(cx, mask) and \
      (padded := padded_masked_load(cx, ref, mask, other)) is not None:
    return padded          # (under a mask computed padded: an odd window read padded, probe 48g)
  if ref.type.shape:
    mask = _mask_arg(cx, ref, mask, "ml.load")
  d = ref.type.dtype
  if is_value(other) and not is_ref(other) and unify(d, other.type.dtype, cx.loc, "ml.load's other") is None:
    named = other.name or ""
    convert = (named if named.isidentifier() else f"({named})" if named else "s" if not is_tensor(other)
               else "v")
    f8_scalar = resolve(d) in FLOAT8 and not is_tensor(other)
    raise E.DtypeMismatchError(
        f"ml.load's other ({dtype_name(other.type.dtype)}) differs from {ref.name or 'the ref'}'s dtype"
        f" ({dtype_name(d)})", cx.loc,
        hint=_F8_OTHER.format(convert) if f8_scalar else f"convert it: other={convert}.astype(jnp.{dtype_name(d)})")
  if not ref.type.shape:        # ml.load(x.at[i], mask=i < n, other=0.0): Triton's load through a scalar pointer
    return _masked_scalar_load(cx, ref, mask, other)
  if is_tensor(other):
    plain = _masked_read(cx, ref, mask, 0)
    return ew.where_(cx, mask, plain, other)
  if not (is_value(other) or isinstance(other, Num)):
    raise E.KernelTypeError(f"ml.load's other must be a number, a scalar or a tensor, got {kind_of(other)}",
                            cx.loc, hint="other=0.0")
  if isinstance(other, int) and isinstance(dt := resolve(d), DType) and dt.is_int:
    lo, hi = dt.int_range
    check_python_int(cx, other, d, "ml.load's other", hint=_int_other_hint(other, dtype_name(d), lo, hi))
  return _masked_read(cx, ref, mask, other)


_F8_OTHER = ("a run-time scalar cannot become float8 on the GPU: pass a number (other=0.0), or load with a"
             " number and select in float32: ml.where(mask, v.astype(jnp.float32), {})")


def _masked_element(cx, ref, mask, other):
  """A masked load of one element (a (1, 1) window, which has no register layout of its own): its
  scalar, read where it is in bounds, then selected; an 8-bit float selected by its bits (the GPU
  cannot convert 8-bit float scalars)."""
  v = load(cx, _clamped(cx, ref), cx.name)
  d = resolve(ref.type.dtype)
  if d in FLOAT8:
    if not isinstance(other, Num):
      raise E.UnsupportedDtypeError(
          f"a masked load of one {d} element takes a number as other, not a run-time scalar", cx.loc,
          hint=_F8_OTHER.format(cx.named(other, "o")))
    import ml_dtypes
    from .elementwise_fns import bitcast
    bits = int(np.asarray(other, getattr(ml_dtypes, str(d))).view(np.uint8))
    sv, sm = ew.one_element_scalar(cx, v), ew.one_element_scalar(cx, mask)
    picked = ew.where_(cx, sm, bitcast.rule(cx, sv, DType.u8), bits)
    return ew.full_(cx, ref.type.shape, bitcast.rule(cx, picked, d), d)
  return ew.where_(cx, mask, v, other)


def _clamped(cx, ref):
  """`ref`, a window of one element, with its run-time starts clamped into its root: a masked
  read of it may start past the end (mask false there), its scalar read must not."""
  from .memory import DSlice, View, view
  o = cx.b.defining(ref)
  if not isinstance(o, View) or o.transpose:
    return ref
  dims = o.ref.type.shape
  if len(o.index) != len(dims):
    return ref
  clamp = lambda v, n: ew.binary(cx, ew.BinOp.MAX, ew.binary(cx, ew.BinOp.MIN, v, n - 1), 0) if is_value(v) else v
  index = tuple(clamp(i.start, n) if i.squeeze else DSlice(clamp(i.start, n), i.size)
                for i, n in zip(o.index, dims))
  return view(cx, o.ref, index, ref.name)


def _int_other_hint(other: float, dtype: str, lo: int, hi: int, outside=False) -> str:
  """An integer `other` for an integer load: an infinity is a reduction's identity (-inf a max's),
  so the hint gives the integer identities; a finite float, the integer it stands for (`outside`
  the range: the nearest, or an identity)."""
  if math.isinf(other) or math.isnan(other) or outside:
    near = f"other={min(max(int(other), lo), hi)}, the nearest; or " if outside else ""
    return (f"an integer of {dtype} ({lo}..{hi}): {near}the identity of what you reduce: other=0 for a sum,"
            f" other={lo} for a max, other={hi} for a min")
  return f"an integer of {dtype}: other={min(max(int(other), lo), hi)}"


_STATIC_BIN = {ew.BinOp.ADD: np.add, ew.BinOp.SUB: np.subtract, ew.BinOp.MUL: np.multiply,
               ew.BinOp.FLOORDIV: np.floor_divide, ew.BinOp.MOD: np.mod, ew.BinOp.MAX: np.maximum,
               ew.BinOp.MIN: np.minimum, ew.BinOp.AND: np.bitwise_and, ew.BinOp.OR: np.bitwise_or,
               ew.BinOp.XOR: np.bitwise_xor}
_STATIC_CMP = {ew.CmpOp.LT: np.less, ew.CmpOp.LE: np.less_equal, ew.CmpOp.GT: np.greater,
               ew.CmpOp.GE: np.greater_equal, ew.CmpOp.EQ: np.equal, ew.CmpOp.NE: np.not_equal}


def static_tensor(cx, x, depth=0, grid=None):
  """The values of an integer or bool tensor (or scalar) known while compiling, as a numpy array:
  ml.arange, int constants, and the integer math, comparisons and broadcasts of them (a mask such
  as `ml.arange(128) < 64`); None where it depends on anything else. With `grid` (the kernel's static
  grid), ml.num_programs too (a window's size, `x.shape[0] // ml.num_programs(0)`: ops/memory.py)."""
  from .shape import Broadcast, Reshape
  if isinstance(x, (bool, int)):
    return np.asarray(x)
  if not is_value(x) or depth > 32:
    return None
  o, t, get = cx.b.defining(x), x.type, lambda v: static_tensor(cx, v, depth + 1, grid)
  if grid is not None and type(o).__name__ == "NumPrograms" and 0 <= o.axis < len(grid):
    return np.asarray(grid[o.axis])
  shape = getattr(t, "shape", ())
  if math.prod(shape) > 1 << 20:
    return None
  if isinstance(o, ew.Constant):
    return np.asarray(o.value) if isinstance(o.value, (bool, int)) else None
  if isinstance(o, ew.Arange):
    n = shape[o.dim]
    return np.broadcast_to(np.arange(n).reshape([n if a == o.dim else 1 for a in range(len(shape))]), shape)
  if isinstance(o, ew.Full):
    v = get(o.value)
    return None if v is None else np.broadcast_to(v, shape)
  if isinstance(o, (ew.Binary, ew.Compare)):
    fn = (_STATIC_BIN if isinstance(o, ew.Binary) else _STATIC_CMP).get(o.kind)
    a, b = get(o.lhs), get(o.rhs)
    if fn is None or a is None or b is None or (o.kind in (ew.BinOp.FLOORDIV, ew.BinOp.MOD) and (b == 0).any()):
      return None
    return np.broadcast_to(fn(a, b), shape)
  if isinstance(o, ew.Unary) and o.kind == ew.UnOp.NOT:
    v = get(o.x)
    return None if v is None else np.logical_not(v)
  if isinstance(o, Broadcast):
    v = get(o.x)
    if v is None:
      return None
    placed = [1] * len(shape)
    for i, d in enumerate(o.dims):
      placed[d] = v.shape[i]
    return np.broadcast_to(v.reshape(placed), shape)
  if isinstance(o, Reshape):
    v = get(o.x)
    return None if v is None else v.reshape(shape)
  if isinstance(o, ew.Cast) and not o.bitcast and isinstance(resolve(t.dtype), DType):
    v, d = get(o.x), resolve(t.dtype)
    return None if v is None or not (d.is_int or d == DType.bool_) else v.astype(bool if d == DType.bool_ else np.int64)
  return None


def _kept_box(cx, mask, shape) -> tuple:
  """Load.keep of a masked SMEM load: the box of the window's elements `mask` keeps, where the
  mask is known while compiling; () where it is not; None where it is and is no box."""
  m = static_tensor(cx, mask)
  if m is None:
    return ()
  m = np.broadcast_to(m.astype(bool), shape)
  if not m.any():
    return tuple((0, 0) for _ in shape)
  box = []
  for a in range(len(shape)):
    on = np.flatnonzero(m.any(axis=tuple(b for b in range(len(shape)) if b != a)))
    box.append((int(on[0]), int(on[-1]) + 1))
  if not m[tuple(slice(lo, hi) for lo, hi in box)].all():
    return None          # gaps (a % 2 == 0): the elements read are the mask's, not a box's
  return tuple(box)


def whole_other(cx, other, dtype, name, what="ml.load's other"):
  """`other`, a Python float, as the integer it stands for where `dtype` (of the ref `name`) is an integer type:
  other=0.0 on int8 or uint8 data is the integer 0, as in Triton (plain masked loads and gathers alike: probe 67a's
  bilinear resize of a uint8 image gathered with other=0.0 was MG104); a fraction, an infinity or a whole number
  outside the type is an error whose hint gives the integer. Anything else is returned as it is."""
  d = resolve(dtype)
  if not (isinstance(other, float) and isinstance(d, DType) and not d.is_float):
    return other
  lo, hi = d.int_range
  if other.is_integer() and lo <= other <= hi:
    return int(other)
  if other.is_integer():      # (other=2.0 is taken; 1e10 is a whole number too, but no int32)
    raise E.KernelTypeError(f"{what} ({other}) is outside {dtype_name(d)}'s range ({lo}..{hi}):"
                            f" {name} is {dtype_name(d)}", cx.loc,
                            hint=_int_other_hint(other, dtype_name(d), lo, hi, outside=True))
  raise E.DtypeMismatchError(f"{what} ({other}) is a float but {name} is {dtype_name(d)}", cx.loc,
                             hint=_int_other_hint(other, dtype_name(d), lo, hi))


def _masked_read(cx, ref, mask, other):
  if isinstance(other, float) and isinstance(resolve(ref.type.dtype), DType) and not resolve(ref.type.dtype).is_float:
    return _masked_read(cx, ref, mask, whole_other(cx, other, ref.type.dtype, ref.name))
  if one_element(ref.type.shape) and ew.one_element_scalar(cx, mask) is not None:
    return _masked_element(cx, ref, mask, other)
  if ref.type.space == Space.SMEM:      # always in bounds: a select in registers
    keep = _kept_box(cx, mask, ref.type.shape)
    if keep is None:     # a static mask with gaps: what it reads is not checked for being written
      return ew.where_(cx, mask, load(cx, ref, ref.name, merge=True), other)
    return ew.where_(cx, mask, load(cx, ref, ref.name, keep=keep), other)
  from .padded_masks import padded_masked_load
  if (padded := padded_masked_load(cx, ref, mask, other)) is not None:
    return padded          # (an odd 2-D window in a padded trace: read padded under the mask recomputed there)
  from .small_loads import masked_few, masked_load_small
  if (small := masked_load_small(cx, ref, mask, other) or masked_few(cx, ref, mask, other)) is not None:
    return small           # (a small window: its elements, read at indices clamped into the array)
  from .strided_columns import read
  if (column := read(cx, ref, mask, other)) is not None:
    return column          # (a short column strided in memory: read padded to 128 elements, probe 51g)
  t = TensorType(ref.type.shape, ref.type.dtype)
  return cx.b.emit(MaskedLoad, ref, mask, other, loc=cx.loc, types=[t], names=[cx.name]).result



@builtin(ref_methods=("store",))
def store_(cx, ref, value, mask=None, boundary_check=None):
  """Write `value` into `ref`; with `mask`, only where it holds (elsewhere memory is untouched).

  `out.at[ml.ds(i * 128, 128)].store(y, mask=rows < n)` writes the last partial tile of `out`.
  Without a mask it is `ref[...] = value`.
  """
  from .block_ptrs import BlockPtr, keyword_error, store_block
  if isinstance(ref, BlockPtr):                # Triton's tl.store(block_ptr, v, boundary_check=(0, 1)) (probe 49h)
    return store_block(cx, ref, value, mask, boundary_check)
  if boundary_check is not None:
    raise keyword_error(cx, "boundary_check=")
  from .gather import IndexedRef, _scatter_store, run_window, scattered, writable
  from .smem_runs import smem_run_outside
  if cx.builtin == "store":      # (the user's ml.store / ref.store call; `out[offs] = v` comes here too, unconverted)
    value = _as_pointee(cx, ref.ref if isinstance(ref, IndexedRef) else ref, value)
  at_places = isinstance(ref, IndexedRef) and ref.ref.type.space in (Space.GMEM, Space.SMEM) \
      and writable(cx.b, ref.ref)        # (an SMEM buffer's: its CTA's threads store at the places, probe 69b)
  if at_places and (scattered(cx, ref) or mask is not None and smem_run_outside(cx, ref, mask)):
    return _scatter_store(cx, ref, value, mask)        # ml.store(out.at[ids, :], v, mask=m): a scatter
  window = run_window(cx, ref, (cx.operands or {}).get(ref) or "") if isinstance(ref, IndexedRef) else None
  if window is not None:                       # ml.store(o.at[offs], v, mask=offs < n): the window they cover
    ref = window
  elif at_places:
    return _scatter_store(cx, ref, value, mask)        # runs that cover no window in order: a scatter
  if mask is None:
    if not is_ref(ref):
      _ref_arg(cx, ref, "ml.store", value=value)
    return store(cx, ref, value)
  _ref_arg(cx, ref, "ml.store", mask, value=value)
  return masked_store(cx, ref, value, mask)


def _as_pointee(cx, ref, value):
  """`value` converted to `ref`'s dtype, as Triton's tl.store converts to the pointer's element type (a float32
  result stored into a bfloat16 output: every ported kernel relies on it; probe 49h). Only the call spellings,
  `ml.store(ref, v)` and `ref.store(v)` (`cx.builtin`), convert: `ref[...] = v` and `out[offs] = v` keep Pallas's
  rule (MG102). A value whose dtype or the ref's is not known yet (an SMEM buffer inferring its dtype), a number
  and a ref are left as they are (the store's own checks take them)."""
  if not is_ref(ref) or not is_value(value) or is_ref(value) or not (is_tensor(value) or is_scalar(value)):
    return value
  to, src = resolve(ref.type.dtype), resolve(value.type.dtype)
  if not isinstance(to, DType) or not isinstance(src, DType) or to == src:
    return value
  if (to in FLOAT8 or src in FLOAT8) and is_scalar(value):
    return value           # (the GPU converts no scalar to or from 8 bits: the store's MG102 says what to write)
  return ew.astype(cx, value, to)


def masked_store(cx, ref, value, mask):
  """`ref`'s store of `value` where the boolean tensor (or scalar) `mask` holds."""
  if not ref.type.shape:       # ml.store(out.at[i], v, mask=i < n): the scalar store under an if
    cond = _scalar_cond(cx, mask)
    return None if cond is False else store(cx, ref, value) if cond is True else \
        _masked_element_store(cx, ref, value, ew.full_(cx, (1,), cond, DType.bool_))
  from .padded_masks import padded_mask, padded_masked_store
  if padded_mask(cx, mask) and padded_masked_store(cx, ref, value, mask):
    return None            # (under a mask computed padded, probe 48g)
  mask = _mask_arg(cx, ref, mask, "ml.store")
  if one_element(ref.type.shape):
    return _masked_element_store(cx, ref, value, mask)
  if ref.type.space == Space.SMEM:      # always in bounds: merge in registers
    return store(cx, ref, ew.where_(cx, mask, value, load(cx, ref, ref.name, merge=True)))
  from .padded_masks import padded_masked_store
  if padded_masked_store(cx, ref, value, mask):       # (a padded value into its odd window, probe 48g)
    return None
  from .small_stores import plan, store_masked_rows
  rows = plan(cx, ref, value)
  if rows is not None and store_masked_rows(cx, ref, value, rows, mask):     # (a small statistic, a row at a time)
    return None
  view_value = _stored_tensor(cx, ref, value)
  from .small_loads import masked_few, masked_store_small
  if not (masked_store_small(cx, ref, view_value, mask) or masked_few(cx, ref, mask, value=view_value)):
    # (a small value: an element at a time, each under an if; a short strided column: padded, probe 51g)
    from .strided_columns import write
    if not write(cx, ref, view_value, mask):
      cx.b.emit(MaskedStore, ref, view_value, mask, loc=cx.loc)


def _masked_element_store(cx, ref, value, mask):
  """A masked store of one element (Triton's BLOCK=1: `out.at[i:i + 1].store(v, mask=i < n)`): a
  one-element tensor has no register layout of its own, so the store is its scalar's, under a
  run-time if on the mask's scalar (as `if i < n: out[i] = s`)."""
  from .control import If, Yield
  cond = ew.one_element_scalar(cx, mask)
  if cond is None:
    root = (ref.name or "out").split(".at[")[0]
    index = ", ".join("i" for _ in ref.type.shape)
    raise E.KernelTypeError(
        f"the mask of this one-element store ({ref.name or 'this window'} has shape {ref.type.shape}) is not"
        f" a condition on scalars", cx.loc,
        hint=f"store the scalar under a run-time if on the mask's condition: if i < n: {root}[{index}] = s")
  then_blk, else_blk = ir.Block(), ir.Block()
  with cx.b.region(then_blk):
    store(cx, ref, value)
    cx.b.emit(Yield, (), loc=cx.loc)
  with cx.b.region(else_blk):
    cx.b.emit(Yield, (), loc=cx.loc)
  cx.b.emit(If, cond, then_blk, else_blk, loc=cx.loc, types=[], names=[])


def _stored_tensor(cx, ref, value):
  """`value` checked and broadcast as `ref[...] = value` would (shape and dtype rules of store)."""
  from .shape import broadcast_shape, broadcast_to_shape
  t = ref.type
  if isinstance(value, Num) or is_scalar(value):
    return ew.full_(cx, t.shape, value, t.dtype, f"the store into {ref.name or 'this ref'}")
  if not is_tensor(value):
    raise E.KernelTypeError(f"cannot store {kind_of(value)} into {ref.name or 'a ref'}", cx.loc,
                            hint="store a register tensor")
  value = ew.weak_as(cx, value, resolve(t.dtype))     # ml.where(m, 1.0, 0.0) into bfloat16: as jnp's .set
  if unify(t.dtype, value.type.dtype, cx.loc, "ml.store") is None:
    text = cx.named(value, "")
    raise E.StoreDtypeError(
        f"cannot store {text or 'a value'} ({dtype_name(value.type.dtype)}) into"
        f" {ref.name or 'a ref'} ({t.space}, {dtype_name(t.dtype)}): no implicit conversion", cx.loc,
        hint=widen_hint(cx, value, t.dtype) or f"convert explicitly: ({text or 'value'}).astype(jnp.{dtype_name(t.dtype)})")
  if value.type.shape != t.shape:
    if broadcast_shape(cx, [value.type.shape, t.shape], "ml.store", [value.name or "the value",
                                                                   ref.name or "the window"]) != t.shape:
      raise E.ShapeMismatchError(
          f"cannot store a tensor of shape {value.type.shape} into {ref.name or 'a ref'} of shape {t.shape}",
          cx.loc, hint="store a value of the window's shape, or one that broadcasts to it")
    value = broadcast_to_shape(cx, value, t.shape)
  return value
