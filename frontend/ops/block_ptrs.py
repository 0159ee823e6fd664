"""Triton's block pointers (probe 49h): `ml.make_block_ptr(base, shape, strides, offsets, block_shape, order)`,
`ml.advance(ptr, offsets)`, and `ml.load(ptr, boundary_check=(0, 1), padding_option="zero")` /
`ml.store(ptr, value, boundary_check=(0, 1))`, as the block-pointer matmul and the fused-attention tutorials write
them. A block pointer is a static object of the tracer (no op): the ref it windows, its `shape` (the bounds its
boundary check tests), the base axis each of its axes walks (read from `strides`: a ref has no strides, so they
must be the row-major strides of the base's axes, in any order), its run-time `offsets` and its block's shape. A
load is the masked (or plain) read of the window `base.at[ml.ds(o0, b0), ml.ds(o1, b1)]` (the boundary check's
mask is `o + ml.arange(b) < shape` along each checked axis), transposed in registers where the pointer walks the
base's axes in another order (the attention tutorial's K^T pointer, `strides=(1, HEAD_DIM)`); a store is the same
window written (the value converted to the ref's dtype, as tl.store converts). Loops and branches carry a pointer
as the tuple of its offsets (frontend/carried.py), so `ptr = ml.advance(ptr, (0, BLOCK_K))` in a run-time loop
is a loop carry. Triton 3's tensor descriptors, `ml.make_tensor_descriptor(base, shape, strides, block_shape)` with
`desc.load([r, c])` / `desc.store([r, c], v)`, are block pointers whose offsets each access gives, every axis
checked."""
from __future__ import annotations

import dataclasses
import itertools
import math

from .. import errors as E
from ..types import resolve
from . import elementwise as ew
from .base import builtin, is_ref, is_scalar, is_tensor, is_value, kind_of, shown

_SEE = ("or index the ref itself: x.at[ml.ds(r, BLOCK_M), ml.ds(c, BLOCK_K)] (masked with ml.load(..., mask=...,"
        " other=0) where it may run past the end)")


@dataclasses.dataclass(frozen=True, eq=False)
class BlockPtr:
  """A Triton block pointer: the window `block_shape` at `offsets` of `base` (axis k of the block walks base
  axis `perm[k]`), bounded by `shape` for boundary checks."""
  base: object               # the ref (an ir.Value)
  shape: tuple               # per block axis: an int or a run-time integer scalar
  perm: tuple
  offsets: tuple             # per block axis: an int or a run-time integer scalar
  block_shape: tuple
  name: str
  KIND = "a block pointer (ml.make_block_ptr)"

  @property
  def dtype(self):
    """The base's element dtype (numpy's, as a ref's `.dtype`), so flash-linear-attention's
    `b_o.to(p_o.dtype.element_ty)` is the output's dtype (a pointer's element type is what a ref's dtype is)."""
    d = resolve(self.base.type.dtype)
    if getattr(d, "np", None) is None:
      raise AttributeError("dtype")        # (an SMEM buffer whose dtype is inferred later: the attribute error)
    return d.np

  @property
  def type(self):
    """Triton's `p.type.element_ty` (and `.scalar.element_ty`): the base's element dtype; `.shape` the block's."""
    from ..triton_math import TritonType
    return TritonType(self.dtype, tuple(self.block_shape), True)

  # (frontend/carried.py: a loop or an if carries the offsets; the rest is static)
  def carry_leaves(self) -> tuple:
    return self.offsets

  def with_leaves(self, leaves) -> "BlockPtr":
    return dataclasses.replace(self, offsets=tuple(leaves))

  def static_key(self) -> tuple:
    ids = lambda xs: tuple(x.id if is_value(x) else x for x in xs)
    return ("BlockPtr", self.base.id, ids(self.shape), self.perm, self.block_shape)

  def __eq__(self, other):
    if not isinstance(other, BlockPtr) or self.static_key() != other.static_key():
      return False
    return all(a is b if is_value(a) or is_value(b) else a == b for a, b in zip(self.offsets, other.offsets))

  __hash__ = None


def _ints(cx, v, what, n=None, positive=False, values=False, fn="ml.make_block_ptr"):
  """`v` as a tuple of ints (or run-time integer scalars where `values`), of length `n` where given (`fn`: the
  call, in messages)."""
  if isinstance(v, list):
    v = tuple(v)
  if not isinstance(v, tuple):
    v = (v,)
  if n is not None and len(v) != n:
    raise E.KernelTypeError(f"{fn}'s {what} has {len(v)} entr{'y' if len(v) == 1 else 'ies'}, but the"
                            f" pointer has {n} axes", cx.loc,
                            hint=f"give one entry per axis of the base ref ({n}): shape, strides, offsets and"
                                 f" block_shape alike")
  for x in v:
    ok = (isinstance(x, int) and not isinstance(x, bool) and (not positive or x > 0)) or (
        values and is_value(x) and is_scalar(x) and getattr(resolve(x.type.dtype), "is_int", False))
    if not ok:
      want = "positive static ints" if positive else "ints or run-time integer scalars" if values else "static ints"
      raise E.KernelTypeError(f"{fn}'s {what} must be {want}, got {shown(x) if not is_value(x) else kind_of(x)}",
                              cx.loc, hint=f"{what}=(BLOCK_M, BLOCK_K): constexprs or numbers" if positive else
                              "a ref's strides are its row-major strides, from its shape: strides=(x.shape[1], 1)"
                              if what == "strides" else f"{what} of ints: a program id times a block size")
  return v


def _axis_strides(cx, base) -> list:
  """The row-major strides of `base`'s axes that a user may write: of the ref as its own array, and (a view)
  of the root array it windows, along the axes the view keeps."""
  from .memory import window
  shape = tuple(base.type.shape)
  own = tuple(math.prod(shape[k + 1:]) for k in range(len(shape)))
  out = [own]
  root, index = window(cx.b, base)
  if index is not None and all(isinstance(n, int) for n in root.type.shape):
    rs = tuple(root.type.shape)
    kept = [math.prod(rs[d + 1:]) for d, i in enumerate(index) if not i.squeeze]
    if len(kept) == len(shape) and tuple(kept) != own:
      out.append(tuple(kept))
  return out


@builtin
def make_block_ptr(cx, base, shape, strides, offsets, block_shape, order=None):
  """Triton's `tl.make_block_ptr(base=x, shape=(M, K), strides=(K, 1), offsets=(pid_m * BM, 0),
  block_shape=(BM, BK), order=(1, 0))`: a block pointer into the ref `base` (a parameter, a view such as
  `Q.at[z, h]`, or an SMEM buffer). `strides` are the base's row-major strides in the order the pointer walks
  its axes: `(K, 1)` its rows and columns, `(1, K)` its transpose (the tutorials' `K^T` pointer); `order` is
  a layout hint and changes nothing. Read it with `ml.load(ptr, boundary_check=(0, 1),
  padding_option="zero")`, write it with `ml.store(ptr, v, boundary_check=...)`, move it with `ml.advance`."""
  return _make_ptr(cx, "ml.make_block_ptr", base, shape, strides, offsets, block_shape, order)


def _make_ptr(cx, fn, base, shape, strides, offsets, block_shape, order=None):
  """The block pointer of make_block_ptr's arguments (`fn`: the call the user wrote, in messages)."""
  if not is_ref(base):
    raise E.KernelTypeError(f"{fn}'s base must be a ref, got {kind_of(base)}", cx.loc,
                            hint="pass the ref or a view of it, base=Q.at[z, h] (for Triton's Q + z * stride_qz"
                                 " + h * stride_qh): a ref is indexed by its axes, not offset by strides")
  rank = len(base.type.shape)
  if rank == 0 or not all(isinstance(n, int) for n in base.type.shape):
    raise E.KernelTypeError(f"{fn}'s base must have at least one axis, got {kind_of(base)}", cx.loc,
                            hint="a single element is read as a scalar: x[i]")
  shape = _ints(cx, shape, "shape", rank, values=True, fn=fn)
  strides = _ints(cx, strides, "strides", rank, fn=fn)
  offsets = _ints(cx, offsets, "offsets", rank, values=True, fn=fn)
  block_shape = _ints(cx, block_shape, "block_shape", rank, positive=True, fn=fn)
  if order is not None and sorted(_ints(cx, order, "order", rank, fn=fn)) != list(range(rank)):
    raise E.KernelTypeError(f"{fn}'s order must be a permutation of the axes, got {shown(order)}",
                            cx.loc, hint=f"order={tuple(range(rank))[::-1]} (the fastest-varying axis first)")
  perm = None
  for want in _axis_strides(cx, base):
    perm = next((p for p in itertools.permutations(range(rank)) if all(strides[i] == want[p[i]] for i in
                                                                      range(rank))), None)
    if perm is not None:
      break
  if perm is None:
    own = _axis_strides(cx, base)[-1]
    name = base.name or "x"
    swap = f"; strides={own[::-1]} walk its transpose" if rank == 2 else ""
    raise E.KernelTypeError(
        f"{fn}'s strides {strides} are not the strides of {name}'s axes ({kind_of(base)}, row-major"
        f" strides {own}): a ref has no other layout", cx.loc,
        hint=f"strides={own} walk {name}'s axes in order{swap}; " + _SEE)
  for i in range(rank):
    n = base.type.shape[perm[i]]
    if isinstance(shape[i], int) and shape[i] > n:
      raise E.IndexOutOfBoundsError(
          f"{fn}'s shape[{i}] is {shape[i]}, past {base.name or 'the base'}'s axis {perm[i]} of"
          f" {n} elements: a boundary check against it would read past the array", cx.loc,
          hint=f"bound the pointer by the array's size: shape[{i}] = {base.name or 'x'}.shape[{perm[i]}]")
  name = cx.named(base, base.name or "base")
  return BlockPtr(base, shape, tuple(perm), offsets, block_shape, name)


def _check_ptr(cx, ptr, what):
  if not isinstance(ptr, BlockPtr):
    raise E.KernelTypeError(f"{what} takes a block pointer (ml.make_block_ptr), got {kind_of(ptr)}", cx.loc,
                            hint="make one with ml.make_block_ptr(base=x, shape=x.shape, strides=(x.shape[1], 1),"
                                 " offsets=(r, c), block_shape=(BM, BK), order=(1, 0))")


@builtin
def advance(cx, base, offsets):
  """Triton's `tl.advance(ptr, (0, BLOCK_K))`: the block pointer moved by `offsets` (ints or run-time integer
  scalars, one per axis)."""
  _check_ptr(cx, base, "ml.advance")
  offsets = _ints(cx, offsets, "offsets", len(base.offsets), values=True, fn="ml.advance")
  moved = tuple(a + d if not is_value(a) and not is_value(d) else a if d == 0 else
                ew.binary(cx, ew.BinOp.ADD, a, d, "ml.advance") for a, d in zip(base.offsets, offsets))
  return base.with_leaves(moved)


def _checked_axes(cx, ptr, boundary_check, what) -> tuple:
  if boundary_check is None:
    return ()
  axes = boundary_check if isinstance(boundary_check, (tuple, list)) else (boundary_check,)
  for a in axes:
    if not isinstance(a, int) or isinstance(a, bool) or not 0 <= a < len(ptr.offsets):
      raise E.KernelTypeError(f"{what}'s boundary_check names the pointer's axes (0 to {len(ptr.offsets) - 1}),"
                              f" got {shown(boundary_check)}", cx.loc,
                              hint=f"boundary_check={tuple(range(len(ptr.offsets)))} checks every axis")
  return tuple(sorted(set(axes)))


def _squeezed(ptr) -> tuple:
  """The block axes of size 1 a pointer of 3 or more axes takes as an index, not a window (a batched pointer's
  block (1, BM, BK) is a 2-D tile: register tensors are 1-D and 2-D), leaving at least one axis."""
  if len(ptr.perm) < 3:
    return ()
  ones = tuple(i for i, b in enumerate(ptr.block_shape) if b == 1)
  return ones if len(ones) < len(ptr.perm) else ones[1:]


def _reduced_perm(ptr, sq) -> tuple:
  """The pointer's axis permutation over the axes it keeps (block order -> position among the kept base axes)."""
  kept = sorted(ptr.perm[i] for i in range(len(ptr.perm)) if i not in sq)
  return tuple(kept.index(ptr.perm[i]) for i in range(len(ptr.perm)) if i not in sq)


def _window(cx, ptr):
  """The base's window the pointer's block covers (in the base's axis order; an axis of `_squeezed` indexed by its
  offset) and its text."""
  from .memory import DSlice, view
  sq = _squeezed(ptr)
  idx, texts = [None] * len(ptr.perm), [None] * len(ptr.perm)
  for i, k in enumerate(ptr.perm):
    o = ptr.offsets[i]
    t = cx.named(o, "") if is_value(o) else str(o)
    idx[k] = o if i in sq else DSlice(o, ptr.block_shape[i], (t, str(ptr.block_shape[i])))
    texts[k] = (t or "i") if i in sq else f"ml.ds({t or 'start'}, {ptr.block_shape[i]})"
  name = f"{ptr.name}.at[{', '.join(texts)}]"
  return view(cx, ptr.base, tuple(idx), name), name


def _mask(cx, ptr, axes, shape):
  """The boundary check's mask over the window (base order, of `shape`): `o + ml.arange(b) < shape` along each
  checked block axis, broadcast along the others (a squeezed axis: its offset's test, the same for all)."""
  from ..dtypes import DType
  from .elementwise_fns import arange
  from .shape import expand
  sq = _squeezed(ptr)
  kept = sorted(ptr.perm[i] for i in range(len(ptr.perm)) if i not in sq)
  rank = len(kept)
  mask, whole = None, None
  for i in axes:
    if i in sq:
      inside = ew.compare(cx, ew.CmpOp.LT, ptr.offsets[i], ptr.shape[i]) if is_value(ptr.offsets[i]) or \
          is_value(ptr.shape[i]) else ptr.offsets[i] < ptr.shape[i]
      whole = inside if whole is None else whole & inside if not is_value(whole) and not is_value(inside) else \
          ew.binary(cx, ew.BinOp.AND, whole, inside)
      continue
    k = kept.index(ptr.perm[i])
    b = ptr.block_shape[i]
    inside = ew.compare(cx, ew.CmpOp.LT, ew.binary(cx, ew.BinOp.ADD, arange.rule(cx, b), ptr.offsets[i]),
                        ptr.shape[i])
    if rank > 1:          # `inside[:, None]` as a user writes it (a reshape to (b, 1) met odd tiles as MG204)
      inside = expand(cx, inside, tuple(slice(None) if d == k else None for d in range(rank)))
    mask = inside if mask is None else ew.binary(cx, ew.BinOp.AND, mask, inside)
  if whole is not None:
    mask = ew.full_(cx, shape, whole, DType.bool_) if mask is None else ew.binary(cx, ew.BinOp.AND, mask, whole) \
        if is_value(whole) else mask if whole else ew.full_(cx, shape, False, DType.bool_)
    # (a scalar test meets the mask as a scalar: a fill of an odd (7, 64) window met the padded trace's mask)
  return mask


def _padding(cx, ptr, padding_option):
  d = resolve(ptr.base.type.dtype)
  if padding_option in (None, "", "zero"):
    return 0.0 if getattr(d, "is_float", False) else 0
  if padding_option == "nan" and getattr(d, "is_float", False):
    return float("nan")
  raise E.KernelTypeError(f"ml.load's padding_option must be \"zero\" or \"nan\" (of floats), got"
                          f" {shown(padding_option)}", cx.loc,
                          hint="padding_option=\"zero\" fills what the boundary check keeps out with 0")


def _in_block_order(cx, v, perm, inverse=False):
  """A tensor in the base's axis order as the block's (or, `inverse`, the block's as the base's)."""
  if perm == tuple(range(len(perm))):
    return v
  from .permute import permute_tensor, transpose_tensor
  if len(perm) == 2:
    return transpose_tensor(cx, v, v.name or "")
  axes = tuple(sorted(range(len(perm)), key=lambda i: perm[i])) if inverse else perm
  return permute_tensor(cx, v, axes)


def load_block(cx, ptr, mask, other, boundary_check, padding_option):
  """`ml.load(ptr, boundary_check=..., padding_option=...)` of a block pointer."""
  from .access import load_
  if mask is not None or (other != 0 and other is not None):
    raise E.KernelTypeError("ml.load of a block pointer takes boundary_check= and padding_option=, not mask= or"
                            " other=", cx.loc, hint="ml.load(ptr, boundary_check=(0, 1), padding_option=\"zero\")")
  axes = _checked_axes(cx, ptr, boundary_check, "ml.load")
  fill = _padding(cx, ptr, padding_option)
  view, _ = _window(cx, ptr)
  v = load_.rule(cx, view) if not axes else load_.rule(cx, view, _mask(cx, ptr, axes, tuple(view.type.shape)), fill)
  sq = _squeezed(ptr)
  if not sq:
    return _in_block_order(cx, v, ptr.perm)
  from .shape import expand       # (the size-1 axes inserted as `v[None]` is: a padded odd block too, probe 58b)
  return expand(cx, _in_block_order(cx, v, _reduced_perm(ptr, sq)),
                tuple(None if i in sq else slice(None) for i in range(len(ptr.block_shape))))


def store_block(cx, ptr, value, mask, boundary_check):
  """`ml.store(ptr, value, boundary_check=...)` of a block pointer."""
  from .access import _as_pointee, store_
  if mask is not None:
    raise E.KernelTypeError("ml.store of a block pointer takes boundary_check=, not mask=", cx.loc,
                            hint="ml.store(ptr, value, boundary_check=(0, 1))")
  axes = _checked_axes(cx, ptr, boundary_check, "ml.store")
  if is_tensor(value):
    from .padded_tiles import true_shape
    if true_shape(cx.b, value) != tuple(ptr.block_shape):     # (a value computed padded: its own shape, probe 58b)
      raise E.ShapeMismatchError(f"cannot store {cx.named(value, 'a value')} of shape {true_shape(cx.b, value)}"
                                 f" through a block pointer of block_shape {tuple(ptr.block_shape)}", cx.loc,
                                 hint="store a value of the pointer's block_shape")
    value = _as_pointee(cx, ptr.base, value)
    sq = _squeezed(ptr)
    if sq:
      from .shape import reshape_
      # (the value's own axes, padded where it is computed padded: a (1, 7, 64) block held as (1, 8, 64) drops its
      # size-1 axis as `v[0]` does, probe 59a: a reshape to the block's (7, 64) ended the padded trace, MG204)
      value = reshape_(cx, value, tuple(b for i, b in enumerate(value.type.shape) if i not in sq))
    value = _in_block_order(cx, value, _reduced_perm(ptr, sq) if sq else ptr.perm, inverse=True)
  view, _ = _window(cx, ptr)
  return store_.rule(cx, view, value) if not axes else store_.rule(cx, view, value,
                                                                   _mask(cx, ptr, axes, tuple(view.type.shape)))


def keyword_error(cx, what):
  """boundary_check= or padding_option= given with a ref (not a block pointer)."""
  return E.KernelTypeError(f"{what} is for block pointers (ml.make_block_ptr); a ref's window is masked instead",
                           cx.loc, hint="ml.load(x.at[ml.ds(r, BM), :], mask=rows[:, None] < n, other=0) for a ref's"
                                        " window, or make a block pointer: ml.make_block_ptr(base=x, ...)")

# ---------------------------------------------------------------- Triton 3's tensor descriptors
class TensorDescriptor:
  """Triton's `tl.make_tensor_descriptor(base, shape, strides, block_shape)`: block pointers of one block shape
  whose `desc.load([o0, o1])` and `desc.store([o0, o1], v)` take the offsets at each access and check every axis
  against `shape` (reads past it give zeros, writes past it are dropped, as the TMA unit the descriptor names
  does). `ptr` is the block pointer at offsets 0."""
  KIND = "a tensor descriptor (ml.make_tensor_descriptor)"

  def __init__(self, ptr: BlockPtr):
    self.ptr = ptr

  @property
  def block_shape(self):
    return list(self.ptr.block_shape)

  @property
  def shape(self):
    return list(self.ptr.shape)

  @property
  def dtype(self):
    return resolve(self.ptr.base.type.dtype).np

  def __getattr__(self, attr):
    if attr in ("load", "store"):
      from ..calls import _Method
      return _Method(_DESC_METHODS[attr], self)
    raise AttributeError(attr)


@builtin
def make_tensor_descriptor(cx, base, shape, strides, block_shape, padding_option="zero"):
  """Triton 3's `tl.make_tensor_descriptor(base, shape=[M, K], strides=[K, 1], block_shape=[BM, BK])`: the
  block pointer `ml.make_block_ptr(base, shape, strides, (0, ..., 0), block_shape)` whose `desc.load([r, c])` and
  `desc.store([r, c], v)` read and write the block at those offsets, every axis checked against `shape` (zeros
  read past it, `padding_option="nan"` NaN; writes past it dropped)."""
  rank = len(base.type.shape) if is_ref(base) else 1
  ptr = _make_ptr(cx, "ml.make_tensor_descriptor", base, shape, strides, (0,) * rank, block_shape)
  _padding(cx, ptr, padding_option)
  desc = TensorDescriptor(ptr)
  desc.padding = padding_option
  return desc


def _at(cx, desc, offsets, what):
  if not isinstance(desc, TensorDescriptor):
    raise E.KernelTypeError(f"{what} takes a tensor descriptor, got {kind_of(desc)}", cx.loc,
                            hint="desc = ml.make_tensor_descriptor(x, shape=x.shape, strides=[x.shape[1], 1],"
                                 " block_shape=[BM, BK]); desc.load([r, c])")
  offsets = _ints(cx, offsets, "offsets", len(desc.ptr.offsets), values=True, fn=what)
  return desc.ptr.with_leaves(offsets)


def _desc_load(cx, desc, offsets):
  """`desc.load([o0, o1])`: the descriptor's block at those offsets, every axis checked (zeros past its shape)."""
  ptr = _at(cx, desc, offsets, "desc.load")
  return load_block(cx, ptr, None, 0, tuple(range(len(ptr.offsets))), desc.padding)


def _desc_store(cx, desc, offsets, value):
  """`desc.store([o0, o1], value)`: the block at those offsets written (converted to the ref's dtype), every
  axis checked (what lies past the descriptor's shape is dropped)."""
  ptr = _at(cx, desc, offsets, "desc.store")
  return store_block(cx, ptr, value, None, tuple(range(len(ptr.offsets))))


from .base import Builtin as _Builtin  # noqa: E402  (the descriptor's methods: ml builtins bound to it)
_DESC_METHODS = {"load": _Builtin(_desc_load, "load"), "store": _Builtin(_desc_store, "store")}
