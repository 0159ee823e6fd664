"""Transfers through refs: register reads (`ref[...]`) and writes (`ref[...] = v`) of windows,
and TMA copies (`ml.copy`, with `reduce=` and `multicast=`) with their checks.

The copy rules (docs/language.md, "Copies"): GMEM <-> SMEM is a TMA copy with equal element types;
SMEM -> SMEM goes through registers; GMEM -> GMEM is rejected; a register value
stored into a ref must have its dtype. The ops (Load, Store, Copy), buffers and views are
declared in memory.py.
"""
from __future__ import annotations

import itertools
import math

from .. import errors as E
from .. import hw
from .. import ir
from .. import tma
from ..infer import conflict, unify
from ..types import DTypeVar, ScalarType, Space, TensorType, dtype_name, resolve
from .base import Num, builtin, is_ref, is_value, kind_of, one_element, shown
from .memory import (Copy, Load, Store, check_in_bounds, check_not_transposed, untransposed, view,
                     window)
from .widen_hints import widen_hint  # a 16-bit float sum into float32: sum in float32


def load(cx, ref, name="", merge=False, keep=None):
  """`ref[...]` into registers (`keep`: see Load)."""
  if is_ref(ref) and ref.type.transposed:        # buf.T[...]: the window read, then transposed
    from .permute import transpose_tensor
    return transpose_tensor(cx, load(cx, untransposed(cx, ref)), name)
  check_not_transposed(cx, ref, "read")
  t = ref.type
  check_in_bounds(cx, ref, "read")
  if not t.shape:
    from .access import scalar_load
    return scalar_load(cx, ref, name)
  if one_element(t.shape) and not merge:
    # one element (x.at[0:1, 0:1], a (1,) buffer): its scalar, stretched as a keepdims reduction's
    # is (a one-element tensor is not held in registers by itself: math on it is on its scalar)
    from .access import scalar_load
    from .elementwise import full_
    one = scalar_load(cx, view(cx, ref, (0,) * len(t.shape), ref.name), name)
    return full_(cx, t.shape, one, t.dtype)
  if not merge and keep is None:     # (a window of a few elements over 2 or more axes: its elements' vector)
    from .small_loads import load_small
    if (small := load_small(cx, ref, name)) is not None:
      return small
    from .padded_tiles import padded_load
    from .strided_columns import padded_read     # (a short strided column of 60 rows, read padded: probe 51g)
    if (padded := padded_read(cx, ref) or padded_load(cx, ref, name)) is not None:
      return padded
    if getattr(cx.b, "pad_tiles", None) is not None and not getattr(cx.b, "pad_ok", 0):
      from .padded_dots import rows_padded      # (an SMEM tile no register tensor holds: read padded, row by row)
      if (padded := rows_padded(cx, ref)) is not ref:
        return padded
      from .padded_smem import covering_read, element_read   # (an odd SMEM window: the whole rows it lies in,
      if (padded := covering_read(cx, ref, name) or element_read(cx, ref, name)) is not None:   # sliced, or its
        return padded                                                    # few elements one at a time: probe 72a)
    from .strided_columns import read
    if (column := read(cx, ref)) is not None:     # (a short column strided in memory: read padded, probe 51g)
      return column
  return cx.b.emit(Load, ref, loc=cx.loc, types=[TensorType(t.shape, t.dtype)], names=[name], merge=merge,
                   keep=keep).result


def _check_small_statistic(cx, ref, value):
  """A keepdims statistic of a 3-D tile too small for a register tensor of its shape ((2, 4, 1): the vector of
  the 2-D reshape's rows, frontend/ops/reduce.py) stored whole: MG204 at the store, storing it as its vector."""
  from .broadcast_nd import small_shape, small_source
  from .memory import root
  if root(cx.b, ref).id in cx.b.transient:
    return       # (a scratch of the compiler's, for a builtin: the layout checks report the value, not this store)
  made = small_source(cx.b.defining, value) if is_value(value) and isinstance(value.type, TensorType) else None
  shape = value.type.shape if made is not None else ()
  if made is None or not small_shape(shape):
    return
  n, name = math.prod(shape), cx.named(value, "s")
  name = name if name.isidentifier() else f"({name})"
  raise E.LayoutError(
      f"{cx.named(value, 'this value')} has shape {shape}: {n} elements, too few for a register tensor of that"
      f" shape (a multiple of {hw.WARPGROUP}; a 1-D vector may hold any multiple of 8)", cx.loc,
      hint=f"store it as the vector it is: give {ref.name or 'the output'} the shape ({n},) and write"
           f" {ref.name or 'out'}[...] = {name}.reshape({n}), then reshape the result outside the kernel,"
           f" .reshape{tuple(shape)} (free in XLA)")


def _unit_axes_source(cx, shape, value):
  """The vector `value` (stored into a window of `shape`) is, where it only inserts size-1 axes before a vector of
  fewer than 128 elements (no 2-D register tile holds it), the window's last axis that vector's; else None."""
  from .shape import Broadcast, Reshape
  if not (is_value(value) and isinstance(value.type, TensorType)) or tuple(value.type.shape) != tuple(shape):
    return None
  made = cx.b.defining(value)
  src = made.x if isinstance(made, (Reshape, Broadcast)) else None
  if src is None or not isinstance(src.type, TensorType) or len(src.type.shape) != 1 or len(shape) < 2:
    return None
  n = src.type.shape[0]
  if n % hw.WARPGROUP == 0 or math.prod(shape) != n or shape[-1] != n:     # (a column (n, 1): strided, not this)
    return None
  return src


def _few_elements(shape) -> bool:
  """A window of a few elements that no register vector holds (not a multiple of 8, at most FEW_SCALARS): a number
  or scalar stored into it is stored an element at a time, as `out[i] = 0` each."""
  from .small_parts import FEW_SCALARS
  n = math.prod(shape)
  return n <= FEW_SCALARS and n % 8 != 0


def store(cx, ref, value):
  from .elementwise import full_
  from .shape import broadcast_shape, broadcast_to_shape
  if is_ref(ref) and ref.type.transposed:        # buf.T[...] = x: x transposed, into the window as stored
    if is_value(value) and isinstance(value.type, TensorType):
      from .permute import transpose_tensor
      if value.type.shape != ref.type.shape:
        raise E.ShapeMismatchError(
            f"cannot store a tensor of shape {value.type.shape} into {ref.name or 'a transposed view'} of"
            f" shape {ref.type.shape}", cx.loc, hint="store a value of the view's shape")
      value = transpose_tensor(cx, value)
    return store(cx, untransposed(cx, ref), value)   # (a scalar is the same either way)
  check_not_transposed(cx, ref, "write")
  t = ref.type
  check_in_bounds(cx, ref, "write")
  if not t.shape:
    from .access import scalar_store
    return scalar_store(cx, ref, value)
  if one_element(t.shape):    # one element: a number, a scalar or a stretched one (keepdims)
    from .access import scalar_store
    from .elementwise import one_element_scalar
    one = one_element_scalar(cx, value) if is_value(value) and isinstance(value.type, TensorType) else value
    if one is not None and (isinstance(one, Num) or is_value(one) and isinstance(one.type, ScalarType)):
      return scalar_store(cx, view(cx, ref, (0,) * len(t.shape), ref.name), one)
  if (squeezed := _unit_axes_source(cx, t.shape, value)) is not None:
    # v.reshape(1, n) (or v[None, :]) of a vector no register tile of that shape holds (a decode step's one query
    # of n heads) into a window of that shape: v into the window with its size-1 axes indexed
    return store(cx, view(cx, ref, tuple(0 if n == 1 else slice(None) for n in t.shape), ref.name), squeezed)
  from .odd_fills import fill_of
  value = fill_of(cx, t, value)       # o[0:33] = ml.zeros((33,)): the number, as o[0:33] = 0
  if isinstance(value, Num) or (is_value(value) and isinstance(value.type, ScalarType)):
    if _few_elements(t.shape):      # out[4:8] = 0: no register vector holds 4 elements; an element at a time
      from .access import scalar_store
      for idx in itertools.product(*map(range, t.shape)):
        scalar_store(cx, view(cx, ref, idx, ref.name), value)
      return
    from .odd_fills import fill_pieces
    if (pieces := fill_pieces(t.shape)) is not None:     # o[0:33] = 0: windows registers hold that cover it
      for idx in pieces:
        store(cx, view(cx, ref, idx, ref.name), value)
      return
    value = full_(cx, t.shape, value, t.dtype, f"the store into {ref.name or 'this ref'}")
  from .odd_fills import copy_pieces
  if copy_pieces(cx, ref, value):        # o[0:33] = buf[3:36]: the windows copied in pieces registers hold
    return None
  from .padded_tiles import padded_store
  from .strided_columns import padded_write
  if padded_write(cx, ref, value) or padded_store(cx, ref, value):   # (a short window computed padded: under its mask)
    return None
  from .few_stats import storable, store_whole
  from .small_stores import plan, store_rows
  from .spread import check_store
  whole = storable(cx, ref, value)      # (a keepdims statistic of a few elements: an element at a time)
  if not whole and is_value(value) and tuple(getattr(value.type, "shape", ())) == tuple(t.shape):
    from .small_flat import as_held       # (a small fill, index grid or broadcast: held as its elements' vector)
    value = as_held(cx, value) or value
    whole = storable(cx, ref, value)
  rows = None if whole else plan(cx, ref, value)     # (a small statistic of more: a row at a time)
  if not whole and rows is None:
    check_store(cx, ref, value)
    _check_small_statistic(cx, ref, value)
  if not is_value(value) or not isinstance(value.type, TensorType):
    raise E.KernelTypeError(f"cannot store {kind_of(value)} into {ref.name or 'a ref'}", cx.loc,
                            hint=f"store a register tensor: {ref.name}[...] = {value.name}[...] (the ref read into registers)"
                            if is_ref(value) and ref.name and value.name else
                            "store a register tensor: ref[...] = other_ref[...] * 2")
  if value.type.shape != t.shape:
    try:
      ok = broadcast_shape(cx, [value.type.shape, t.shape], "store", ["", ""]) == t.shape
    except E.ShapeMismatchError:
      ok = False
    if not ok:
      raise E.ShapeMismatchError(
          f"cannot store a tensor of shape {value.type.shape} into {ref.name or 'a ref'} of shape {t.shape}",
          cx.loc, hint=_axes_hint(cx, value, t.shape, ref.name) or _padded_hint(cx, value, ref) or (
              "store a value of the window's shape (slice the ref with .at[...] to match), or broadcast it"
              " explicitly with ml.broadcast_to"))
    value = broadcast_to_shape(cx, value, t.shape)
  from .elementwise import weak_as
  from ..types import resolve
  value = weak_as(cx, value, resolve(t.dtype))      # ml.where(m, 1.0, 0.0) into bfloat16: as jnp's .set
  if unify(t.dtype, value.type.dtype, cx.loc, f"store of {value.name or 'a value'}") is None:
    from .elementwise_checks import method_on
    err = conflict(t.dtype, value.type.dtype, cx.loc, f"store of {value.type.dtype}",
                   stored=method_on(value.name or "value"))
    raise err or E.StoreDtypeError(
        f"cannot store {cx.named(value, 'a value')} ({dtype_name(value.type.dtype)}) into"
        f" {ref.name or 'a ref'} ({t.space}, {dtype_name(t.dtype)}): no implicit conversion", cx.loc,
        hint=widen_hint(cx, value, t.dtype) or
        f"convert explicitly: {ref.name or 'ref'}[...] = ({cx.named(value, 'value')}).astype(jnp.{dtype_name(t.dtype)})")
  if whole:
    return store_whole(cx, ref, value)
  if rows is not None and (rows := plan(cx, ref, value)) is not None:   # (again: weak_as may have cast it)
    return store_rows(cx, ref, value, rows)
  from .strided_columns import write
  if write(cx, ref, value):              # (a short column strided in memory: written padded, probe 51g)
    return None
  cx.b.emit(Store, ref, value, loc=cx.loc)


def _axes_hint(cx, value, shape, name) -> str | None:
  """A value of the window's elements on other size-1 axes (a row statistic (16,) stored into a (16, 1)
  output): the axes it lacks or the axis it should be on, in the user's words; None otherwise."""
  from ..shape_hints import align_hint, insert_axes_hint
  from .elementwise_checks import method_on
  text = cx.named(value, "value")
  if len(value.type.shape) < len(shape):      # a row statistic (64,) into a (64, 128) window: v[:, None]
    fix = insert_axes_hint(value.type.shape, text, shape, name or "the window")
    if fix and math.prod(value.type.shape) != math.prod(shape):
      return f"a stored value broadcasts to the window as in NumPy, trailing axes aligned;{fix}"
  if math.prod(value.type.shape) != math.prod(shape):
    return None
  squeeze = lambda sh: tuple(n for n in sh if n != 1)
  if len(value.type.shape) > len(shape) and squeeze(value.type.shape) == squeeze(shape):   # v[:, :, None]
    return (f"the value has size-1 axes the window lacks: store {method_on(text)}.reshape"
            f"{tuple(shape) if len(shape) != 1 else '(' + str(shape[0]) + ',)'}")
  if len(shape) == 2 and tuple(value.type.shape) == tuple(shape)[::-1] and shape[0] != shape[1]:
    if text.endswith(".T"):
      return f"the value is the window's transpose: store {text[:-2]}"
    return (f"the value has the window's axes swapped: where it holds the window transposed, store"
            f" {method_on(text)}.T; else give it the window's shape {tuple(shape)}")
  fix = insert_axes_hint(value.type.shape, text, shape, name or "the window", exact=True) if len(value.type.shape) < len(shape) \
      else align_hint(value.type.shape, text, shape, name or "the window")
  return fix and f"the window has the value's elements on other axes:{fix}"


def _padded_hint(cx, value, ref) -> str | None:
  """A tile padded along one axis past a GMEM window (Pallas's head_dim padded to 128 stored into an output of 80,
  probe 51k): the window as wide as the tile under a mask of the array's part, which a masked store never writes
  past; None otherwise."""
  t, name = ref.type, ref.name
  vs, ws = tuple(value.type.shape), tuple(t.shape)
  diff = [d for d, (a, b) in enumerate(zip(vs, ws)) if a != b]
  if t.space != Space.GMEM or len(vs) != len(ws) or len(diff) != 1 or vs[diff[0]] < ws[diff[0]]:
    return None
  d, text, n, w = diff[0], cx.named(value, "value"), vs[diff[0]], ws[diff[0]]
  along = ", ".join("None" if k != d else ":" for k in range(len(vs)))
  mask = f"ml.arange({n})[{along}] < {w}"
  if (window := _whole_last_axis(cx, ref, d, n)) is not None:
    return (f"{text} is {n} wide along axis {d} where {name} is {w} (a padded tile, a head_dim padded to {n}):"
            f" store it through a window {n} wide under a mask of the first {w}, {window}.store({text},"
            f" mask={mask}) (a masked store never writes the elements past the array)")
  return (f"{text} is {n} wide along axis {d} where {name or 'the window'} is {w} (a padded tile, a head_dim"
          f" padded to {n}): store it through a window {n} wide there, ml.ds(start, {n}) along axis {d}, under a"
          f" mask of the first {w}, .store({text}, mask={mask}) (a masked store never writes the elements past the"
          f" array)")


def _whole_last_axis(cx, ref, d, n) -> str | None:
  """`o_ref.at[qs]` or `o_ref.at[qs, :]` (or `o_ref[qs, :]`) with the root's last axis whole as axis `d` of the
  window: the window's text with that axis `ml.ds(0, n)`; None where the text or the view says otherwise."""
  from .memory import View
  view, name = cx.b.defining(ref), ref.name
  if not isinstance(view, View) or not name or not name.endswith("]") or "[" not in name:
    return None
  index, shape = view.index, view.ref.type.shape
  if len(index) != len(shape) or index[-1].squeeze or (index[-1].start, index[-1].size) != (0, shape[-1]) or \
     sum(not i.squeeze for i in index) - 1 != d:
    return None
  head, body = name[:name.index("[")], name[name.index("[") + 1:-1]
  entries, depth, cur = [], 0, ""
  for c in body:
    depth += c in "([{"
    depth -= c in ")]}"
    if c == "," and depth == 0:
      entries.append(cur.strip())
      cur = ""
    else:
      cur += c
  entries.append(cur.strip())
  if "..." in entries or not (head.endswith(".at") and head[:-3].isidentifier() or head.isidentifier()):
    return None
  if len(entries) == len(shape) - 1:
    entries.append(f"ml.ds(0, {n})")
  elif len(entries) == len(shape) and entries[-1] == ":":
    entries[-1] = f"ml.ds(0, {n})"
  else:
    return None
  return f"{head if head.endswith('.at') else head + '.at'}[{', '.join(entries)}]"


def _not_strided(cx, src, dst):
  """`ml.copy(x.at[::2], buf)`, `ml.copy(buf, out.at[1::2])`: a strided view is not a window TMA moves; it is read
  or written whole through registers (frontend/strided_views.py), which the hint writes with the user's names."""
  from ..strided_views import StridedView
  view = src if isinstance(src, StridedView) else dst if isinstance(dst, StridedView) else None
  if view is None:
    return
  at = view.text.find(".at[")
  plain = f"{view.text[:at]}[{view.text[at + 4:-1]}]" if at >= 0 and view.text.endswith("]") else f"{view.text}[...]"
  other = dst if view is src else src
  name = other.name if is_ref(other) and other.name else "buf"
  fix = f"{name}[...] = {plain}" if view is src else f"{plain} = {name}[...]"
  raise E.KernelTypeError(
      f"ml.copy cannot move {view.text}: a strided view's elements are not consecutive in memory, and a TMA copy"
      f" moves a window of consecutive ones", cx.loc,
      hint=f"move it through registers: {fix} (or copy the step-1 window that covers it and slice the register"
           f" tensor)")


def _copy_of_value_hint(cx, src, dst) -> str:
  """ml.copy moves between refs: a value (a register tensor, a number) is stored into a ref with
  `ref[...] = value`, and a ref is read into registers with `ref[...]`, in the user's names; a ref
  read with `[...]` in the call itself (`ml.copy(x.at[w][...], buf)`) is passed without it."""
  def text(v):
    return (v.name if is_ref(v) else cx.named(v, "") or (shown(v) if isinstance(v, (int, float)) else "")) or ""
  def read(v):       # the ref a `ref[...]` operand reads, as the user wrote it
    t = text(v)
    return t[:-len("[...]")] if t.endswith("[...]") and is_value(v) and isinstance(v.type, TensorType) else ""
  if read(src) or read(dst):
    return (f"ml.copy moves data between refs: pass the ref itself, without [...], ml.copy("
            f"{read(src) or text(src)}, {read(dst) or text(dst)})")
  def view(v):       # out[0], x[i, :]: a read at an index, where Pallas's o_ref[0] meant the view out.at[0]
    import re
    m = re.fullmatch(r"([A-Za-z_]\w*)\[(.+)\]", text(v)) if is_value(v) else None
    return f"{m.group(1)}.at[{m.group(2)}]" if m and m.group(2) != "..." else ""
  if view(src) or view(dst):
    return (f"ml.copy moves data between refs: take the window as a view with .at, ml.copy("
            f"{view(src) or text(src)}, {view(dst) or text(dst)}) ({view(src) or view(dst)} is a ref;"
            f" {text(src) if view(src) else text(dst)} reads its elements into registers)")
  if is_ref(src) and not is_ref(dst):      # ml.copy(buf, v): the user meant to read buf
    target = text(dst)
    return (f"ml.copy moves data between refs; read a ref into registers with [...]:"
            f" {target if target.isidentifier() else 'v'} = {src.name or 'ref'}[...]")
  if is_ref(dst) and not is_ref(src):      # ml.copy(v * 2, out.at[...]): store the value
    return (f"ml.copy moves data between refs; store a value into a ref with an assignment:"
            f" {dst.name or 'ref'}[...] = {text(src) or 'value'}")
  return "ml.copy moves data between refs; read a ref with ref[...] and write one with ref[...] = value"


def _padded_load_hint(src, dst) -> str | None:
  """A GMEM array smaller than the SMEM buffer it is loaded into (a vector's one row into the 8 rows
  of a tensor-core operand): a window of the buffer's shape, which TMA fills with zeros past the
  array's end. None for other copies."""
  s, d = src.type.shape, dst.type.shape
  if not (src.type.space == Space.GMEM and dst.type.space == Space.SMEM and len(s) == len(d) and (src.name or "")
          .isidentifier() and (dst.name or "").isidentifier() and all(x <= y for x, y in zip(s, d))):
    return None
  index = [f"ml.ds(0, {y})" if x < y else ":" for x, y in zip(s, d)]
  while index and index[-1] == ":":
    index.pop()
  return (f"copy a window of {src.name} of {dst.name}'s shape, ml.copy({src.name}.at[{', '.join(index)}],"
          f" {dst.name}): the TMA engine reads zeros past {src.name}'s end, so {dst.name}'s extra elements are 0")


@builtin
def copy(cx, src, dst, reduce=None, *, multicast=None):
  """Copy a ref into another of the same shape and dtype.

  GMEM -> SMEM and SMEM -> GMEM use the TMA engine (asynchronously; the
  compiler awaits a load before the buffer is first read and a store before
  its SMEM is overwritten or the kernel ends). SMEM -> SMEM goes through
  registers. GMEM -> GMEM is rejected: stage it through SMEM.

  `reduce="add"` (or "max", "min") makes an SMEM -> GMEM copy combine with what GMEM holds,
  atomically (the TMA engine's reduction): `ml.copy(part, out.at[...], reduce="add")`.

  `multicast=axis` (a load in a warp-specialised loop, in a kernel with a cluster):
  every CTA of the cluster along `axis` loads the same window; each fetches a share
  and the TMA engine delivers the whole window to all of them.
  """
  from .split_k import Split, copy as split_copy
  if isinstance(src, Split) or isinstance(dst, Split):    # (a buffer split along a ragged K: ops/split_k.py)
    return split_copy(cx, src, dst, lambda cx, s, d: copy.rule(cx, s, d, reduce, multicast=multicast))
  kind = _reduce_kind(cx, src, dst, reduce)
  _not_strided(cx, src, dst)
  for what, r in (("source", src), ("destination", dst)):
    if not is_ref(r):
      raise E.KernelTypeError(
          f"ml.copy {what} must be a ref (a kernel parameter, an ml.smem buffer or a view),"
          f" got {kind_of(r)}", cx.loc, hint=_copy_of_value_hint(cx, src, dst))
  check_not_transposed(cx, src, "copy")
  check_not_transposed(cx, dst, "copy into")
  s, d = src.type, dst.type
  desc = lambda v: f"{v.name or 'ref'} ({v.type.space}, {dtype_name(v.type.dtype)})"
  if s.space == Space.GMEM and d.space == Space.GMEM:
    raise E.CopySpaceError(
        f"cannot copy {src.name} (GMEM) into {dst.name} (GMEM): there is no GMEM -> GMEM copy", cx.loc,
        hint=f"stage it through SMEM: buf = ml.smem({s.shape}); ml.copy({src.name}, buf); ml.copy(buf, {dst.name})")
  if s.shape != d.shape:
    raise E.CopyShapeError(
        f"cannot copy {src.name} (shape {s.shape}) into {dst.name} (shape {d.shape}): shapes differ", cx.loc,
        hint=_padded_load_hint(src, dst) or "slice both sides to the same window with .at[...]")
  if unify(s.dtype, d.dtype, cx.loc, f"copy from {src.name}" if d.space == Space.SMEM
           else f"copy to {dst.name}") is None:
    var_side, other = (d, s) if isinstance(d.dtype, DTypeVar) else (s, d)
    err = conflict(var_side.dtype, other.dtype, cx.loc, f"copy {src.name} -> {dst.name}",
                   shape=var_side.shape)
    smem_side = dst if d.space == Space.SMEM else src
    want = dtype_name((s if smem_side is dst else d).dtype)     # the other side's element type
    have = dtype_name(smem_side.type.dtype)
    buf2 = f"buf2 = ml.smem({tuple(smem_side.type.shape)}, jnp.{want})"
    convert = (f"{buf2}; ml.copy({src.name}, buf2); {dst.name}[...] = buf2[...].astype(jnp.{have})"
               if smem_side is dst else
               f"{buf2}; buf2[...] = {src.name}[...].astype(jnp.{want}); ml.copy(buf2, {dst.name})")
    raise err or E.CopyDtypeError(
        f"cannot copy {desc(src)} into {desc(dst)}: element types differ", cx.loc,
        hint=f"allocate {smem_side.name} as {want} (or leave dtype out to infer it), or convert in registers"
             f" through {'an' if want.startswith('int') else 'a'} {want} buffer: {convert}")
  if s.space == Space.SMEM and d.space == Space.SMEM:
    store(cx, dst, load(cx, src, src.name))   # through registers
    return
  if s.remote or d.remote:
    raise E.ClusterRefError(
        "TMA copies to or from another CTA's SMEM are not supported", cx.loc,
        hint="read the peer's buffer into registers: local[...] = ml.cluster_ref(buf, cta)[...]")
  gmem, smem_ref = (src, dst) if s.space == Space.GMEM else (dst, src)
  from .register_copies import register_copy, routed
  if routed(cx, src, dst, window(cx.b, gmem), kind, multicast):   # rows TMA cannot align: through registers
    return register_copy(cx, src, dst, window(cx.b, gmem))
  if multicast is None and (pieces := _leading_pieces(cx, gmem, s.shape)):
    for start, size in pieces:        # a leading axis over TMA's 256-element box: copies of its windows (probe 52c)
      part = lambda r: view(cx, r, (slice(start, start + size),), f"{r.name or 'ref'}.at[{start}:{start + size}]")
      copy.rule(cx, part(src), part(dst), reduce)
    return
  tma.check_copy(cx.loc, gmem, window(cx.b, gmem), smem_ref, window(cx.b, smem_ref), store=d.space == Space.GMEM,
                 defs=cx.b.defs, reduce=kind, multicast=multicast)
  if multicast is not None:
    _check_multicast(cx, multicast, d, dst)
  slot = cx.b.new_load_slot() if d.space == Space.SMEM else -1
  cx.b.emit(Copy, src, dst, slot, loc=cx.loc, reduce=kind, multicast=multicast)


def _leading_pieces(cx, gmem, shape) -> list | None:
  """A copy whose window's leading axis is longer than a TMA box may be (256 elements), every other axis within
  it: the windows of at most 256 along that axis, each its own TMA, as the MG401 hint wrote them (Triton's
  BLOCK_SIZE of 1024 staged through SMEM; a (512, 64) tile). The pieces of an SMEM buffer's leading axis are
  contiguous blocks of it, so each is a legal TMA window; the copies land in disjoint windows of the buffer and
  are awaited as several loads of one buffer are. None where the copy needs no split, another axis is too long
  (MG401 stands: a piece of a last axis is no contiguous block), a piece's GMEM window starts statically past
  the array's end (the whole window's TMA reads zeros there; such a piece is not a window of the array), or a 1-D
  window's tail piece spans no whole 16-byte units (300 bfloat16: its 44 would be MG401 about a window the user
  never wrote; the whole window's hint says to pad)."""
  if not shape or shape[0] <= hw.TMA_MAX_BOX or any(n > hw.TMA_MAX_BOX for n in shape[1:]):
    return None
  groot, index = window(cx.b, gmem)
  index = index if index is not None else tuple(ir.Idx(0, n) for n in groot.type.shape)
  axis, dim = next((k, i) for k, i in enumerate(index) if not i.squeeze)
  pieces = [(k, min(hw.TMA_MAX_BOX, shape[0] - k)) for k in range(0, shape[0], hw.TMA_MAX_BOX)]
  if isinstance(dim.start, int) and any(dim.start + k >= groot.type.shape[axis] for k, _ in pieces):
    return None
  d = resolve(gmem.type.dtype)
  itemsize = d.itemsize if not isinstance(d, DTypeVar) else 1
  if len(shape) == 1 and (pieces[-1][1] * itemsize) % tma.ALIGN:
    return None       # a 1-D tail of no whole 16-byte units is no TMA window: the whole window's MG401 (pad) stands
  return pieces


def _reduce_kind(cx, src, dst, reduce):
  """The AtomicKind of `ml.copy(..., reduce=)`, checked: SMEM -> GMEM, a dtype the TMA reduces."""
  if reduce is None:
    return None
  from . import atomic
  names = [k.value for k in atomic.UPDATE_KINDS]
  if reduce not in names:
    raise E.KernelTypeError(f"ml.copy's reduce must be one of {', '.join(map(repr, names))}, got {shown(reduce)}",
                            cx.loc, hint='ml.copy(buf, out.at[...], reduce="add")')
  kind = atomic.AtomicKind(reduce)
  if not (is_ref(src) and is_ref(dst) and src.type.space == Space.SMEM and dst.type.space == Space.GMEM):
    raise E.CopySpaceError(
        f"ml.copy(..., reduce={reduce!r}) combines SMEM into GMEM, but this copy goes from"
        f" {getattr(src.type, 'space', kind_of(src))} to {getattr(dst.type, 'space', kind_of(dst))}", cx.loc,
        hint="reduce from an ml.smem buffer into a window of an output")
  atomic.check_target(cx, cx.b, dst, "ml.copy(..., reduce=)")
  d = resolve(dst.type.dtype)
  narrow = d in hw.NARROW_INTS     # (probe 56b: a cas loop per element from registers)
  registers = (f"update from registers, ml.atomic_{reduce}({cx.named(dst, 'out')}, {cx.named(src, 'buf')}[...]): "
               + (f"an {dtype_name(d)} {reduce} in GMEM is a compare-and-swap loop on each element's 32-bit word"
                  if narrow else f"a float32 {reduce} in GMEM is two integer atomics on its bits, element by element")
               if (reduce != "add" or narrow) and d in hw.ATOMIC_GMEM[reduce] else None)
  atomic.check_dtype(cx, kind, dst.type.dtype, hw.TMA_REDUCE, f"ml.copy(..., reduce={reduce!r})",
                     "by the TMA engine", instead=registers)
  return kind


def _check_multicast(cx, axis, d, dst):
  if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis <= 2:
    raise E.KernelTypeError(f"multicast must be a cluster axis (0, 1 or 2), got {shown(axis)}", cx.loc,
                            hint="ml.copy(b.at[...], b_s, multicast=0)")
  if d.space != Space.SMEM:
    raise E.ClusterRefError("only loads (GMEM -> SMEM) can be multicast", cx.loc,
                            hint="drop multicast= from this store")
  n = cx.b.cluster[axis]
  if n == 1:
    raise E.ClusterRefError(
        f"multicast along axis {axis}, but the kernel's cluster is {cx.b.cluster}", cx.loc,
        hint=f"launch with @mgpu_kernel(..., cluster={(1,) * axis + (2,)}) or larger along that axis"
             + "".join(f", or multicast along axis {k}, where the cluster has {c} CTAs"
                       for k, c in enumerate(cx.b.cluster) if c > 1)[:200])
  rows = d.shape[0] if d.shape else 1
  if rows % (hw.TILE_ROWS * n):
    raise E.ClusterRefError(
        f"a multicast load is split among the {n} CTAs along axis {axis} by rows, in {hw.TILE_ROWS}-row"
        f" tiles, but {dst.name or 'its buffer'} has {rows} rows", cx.loc,
        hint=f"make the window's first dimension a multiple of {hw.TILE_ROWS * n}")
  item = resolve(d.dtype)
  row = math.prod(d.shape[1:]) * item.itemsize if not isinstance(item, DTypeVar) else 0
  share = rows // n * row
  if share % hw.TMA_SMEM_ALIGN:
    # CTA k's share lands k * share bytes into the buffer, and TMA's SMEM side must start at a multiple
    # of 128 bytes (on the H200 one 16, 32 or 64 bytes in faults: CUDA_ERROR_MISALIGNED_ADDRESS)
    per = n * math.lcm(hw.TILE_ROWS, hw.TMA_SMEM_ALIGN // math.gcd(hw.TMA_SMEM_ALIGN, row))
    raise E.TmaLimitError(
        f"a multicast load is split among the {n} CTAs along axis {axis}, so the second CTA's share of"
        f" {dst.name or 'its buffer'} ({rows // n} {'rows' if len(d.shape) > 1 else 'elements'} of {rows}) lands"
        f" {share} bytes into it; TMA needs each copy's SMEM side to start at a multiple of {hw.TMA_SMEM_ALIGN}"
        f" bytes", cx.loc,
        hint=f"make the window's first dimension a multiple of {per} ({hw.TMA_SMEM_ALIGN} bytes a CTA), or drop"
             f" multicast= (each CTA loads the whole window)")
