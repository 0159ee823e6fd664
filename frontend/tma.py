"""Legality of one TMA copy: the limits of Hopper's bulk tensor copy engine.

Hopper's TMA (as Mosaic GPU uses it): at most 5 dimensions, at most 256 elements a box
dimension, non-minor GMEM strides and the minor extent multiples of 16 bytes,
and the minor dimension contiguous. The SMEM side must be one contiguous
block (a whole buffer, or whole leading-dimension slices of one).
"""
from __future__ import annotations

import math
import re

from . import errors as E
from . import ir
from .hw import TMA_ALIGN as ALIGN, TMA_MAX_BOX as MAX_BOX, TMA_MAX_RANK as MAX_RANK
from .hw import MMA_M, TMA_SMEM_ALIGN as SMEM_ALIGN
from .types import DTypeVar, resolve


def check_copy(loc, gmem: ir.Value, gwin, smem: ir.Value, swin, store: bool = False, defs=None,
               reduce=None, multicast=None) -> None:
  """`gwin`/`swin`: (root ref, index over the root or None for the whole root) of each side;
  `store`: the copy writes GMEM (hints say how to store from registers instead); `reduce`: the
  AtomicKind of ml.copy(..., reduce=) (hints say how to combine from registers instead); `multicast`: its axis
  (such a load's shares keep a last axis within a box)."""
  d = resolve(gmem.type.dtype)
  if store and reduce is not None:      # a plain store would race with the other programs' updates
    store = _reduce_hint(reduce.value, d, d.itemsize if not isinstance(d, DTypeVar) else 1, gwin[0].name or "out")
  itemsize = d.itemsize if not isinstance(d, DTypeVar) else 1
  groot, index = gwin
  full = groot.type.shape
  index = index if index is not None else tuple(ir.Idx(0, n) for n in full)
  name = gmem.name or "the GMEM ref"
  if index and index[-1].squeeze and full[-1] > 1:
    whole = name.rsplit(", ", 1)[0] + ", :]" if name.endswith("]") and ", " in name else "x.at[i, :]"
    raise E.TmaLimitError(
        f"TMA copies need the last dimension of {name} to be contiguous, but it is indexed by a single element", loc,
        hint=f"{_registers(store, groot.name or 'out')} instead (a register access moves elements"
             f" {full[-1]} apart, one a thread), or copy a window that keeps the last dimension (its index a"
             f" slice, {whole}) into a buffer of that shape")
  box = [i.size for i in index if not i.squeeze]
  rank = tma_rank(full, index)
  if rank > MAX_RANK:
    raise E.TmaLimitError(
        f"TMA copies move at most {MAX_RANK} dimensions; copying this window of {name} (shape"
        f" {tuple(full)}) needs {rank}", loc,
        hint="reshape the array outside the kernel to at most 5 dimensions (merge neighbouring"
             " ones), then copy windows of that")
  piece = wide_piece(full, index, itemsize) if rank < MAX_RANK and multicast is None else None
  if piece and not isinstance(index[-1].start, int):
    from .absint import known_multiple
    if known_multiple(index[-1].start, defs or {}) % piece:
      raise E.about(E.TmaLimitError(
          f"TMA copies move at most {MAX_BOX} elements along each dimension; this window is {tuple(box)}", loc,
          hint=_unproven_hint(name, index[-1].size, piece, swin[0].name)), [swin[0]])
  if any(b > MAX_BOX for b in box) and not piece:
    raise E.about(E.TmaLimitError(
        f"TMA copies move at most {MAX_BOX} elements along each dimension; this window is {tuple(box)}", loc,
        hint=_box_hint(groot, full, box, itemsize, swin[0].name, (gmem.name, index), swin, smem.name,
                     bool(store))), [swin[0]])
  if (index[-1].size * itemsize) % ALIGN:
    raise E.TmaLimitError(
        f"TMA copies need the last dimension to span a multiple of {ALIGN} bytes; {index[-1].size} x"
        f" {itemsize} bytes = {index[-1].size * itemsize}", loc,
        hint=f"make the window's last dimension a multiple of {ALIGN // itemsize} elements ({ALIGN} bytes), or "
             + (store if isinstance(store, str) else
                f"store the value from registers instead of copying it through {smem.name or 'SMEM'}, {name}[...] = value"
                f" (a register store takes any width)"
                if store else f"read it into registers instead, {name}[...]" + _scalars_too(groot))
        # (a vector of 16 bytes or more has windows of whole 16 bytes, whatever its length: probe 66a, 56 of 280 int8)
        if (full[-1] * itemsize) % ALIGN == 0 or len(full) == 1 and full[-1] * itemsize >= ALIGN
        else f"{groot.name or 'the array'}'s rows are {full[-1] * itemsize} bytes, so no window of them is: "
             + (store if isinstance(store, str) else
                f"store the value from registers instead of copying it through SMEM ({name}[...] = value)" if store
                else f"read it into registers instead ({name}[...])")
             + (f", or reshape the array outside the kernel so that its last dimension spans a multiple of {ALIGN}"
                f" bytes ({groot.name or 'x'}.reshape(-1) for a column)" if len(full) > 1 else "")
             + ("" if store else _scalars_too(groot)))
  start = index[-1].start
  if isinstance(start, int) and (start * itemsize) % ALIGN:
    t = ALIGN // itemsize
    raise E.TmaLimitError(
        f"TMA copies need a window's start in the last dimension to fall on a {ALIGN}-byte boundary;"
        f" this window of {name} starts at element {start} ({start} x {itemsize} bytes), which would"
        f" fault on the GPU", loc,
        hint=(f"start it at a multiple of {t} elements, or {_registers(store, groot.name or 'out')} instead" if store
              else widen_hint(None, start, index[-1].size, t, swin[0].name, len(box))))
  if len(full) > 1 and (full[-1] * itemsize) % ALIGN:
    raise E.TmaLimitError(
        f"TMA copies need {name}'s rows to be a multiple of {ALIGN} bytes apart; its last dimension is"
        f" {full[-1]} x {itemsize} bytes", loc,
        hint=_row_stride_hint(groot, full, itemsize, name, store))
  if swin[1] is not None:
    _check_smem_contiguous(smem, swin, loc, name, store)
    _check_smem_aligned(smem, swin, itemsize, loc, defs or {})


def _scalars_too(groot) -> str:
  """For a load too narrow for TMA (lengths or a block table's row staged in SMEM): its elements read one
  at a time need no copy at all."""
  x = groot.name or "x"
  idx = ", ".join(["b"] * (len(groot.type.shape) - 1) + ["i"])
  return (f"; or, where its elements are read one at a time (lengths, page ids), read them straight from {x} as"
          f" scalars, {x}[{idx}], which a pipelined loop's loads may use too")


def _row_stride_hint(groot, full, itemsize: int, name: str, store) -> str:
  """Rows not a multiple of 16 bytes apart (a 1000 x 999 float32 or uint8 image): pad the array's
  rows outside the kernel, or move the window through registers, masked where it runs past the end
  (a register read of a window past the array's end unmasked is an error too)."""
  unit = -(-full[-1] * itemsize // ALIGN) * ALIGN // itemsize      # the row length padded to 16 bytes
  pads = ", ".join(["(0, 0)"] * (len(full) - 1) + [f"(0, {unit - full[-1]})"])
  array = groot.name or "x"
  regs = (_registers(store, groot.name or "out") if store else
          f"read the window into registers instead, {name}[...] ({name}.load(mask=..., other=0) where it may"
          f" run past {array}'s end; a pipelined loop, ml.range(..., stages=), needs a TMA load: make it a plain"
          f" range)")
  return (f"pad {array}'s rows to {unit} elements outside the kernel, jnp.pad({array}, ({pads})), and slice"
          f" the result back; or {regs}" + (" instead" if store else ""))


def wide_piece(full, index, itemsize: int) -> int | None:
  """The width of the pieces a window's last axis wider than a TMA box (an MLA head's 576 = 512 + 64 columns) is
  copied as, or None where no such split serves (probe 56c). The array's last axis is viewed as (pieces, width),
  Mosaic GPU's TileTransform of that axis alone, and so is the buffer's (its rows stay contiguous: the same bytes),
  so one TMA box of (..., pieces, width) moves the window: the width divides the window's, the array's and a
  static start (check_copy proves a run-time one a multiple of it), spans whole 16-byte units, and both the width
  and the count of pieces fit a box; every other axis is within a box already. An array of one axis keeps
  MG401 (its leading pieces are transfers.py's)."""
  if not index or index[-1].squeeze or len(full) < 2:
    return None
  w, n, start = index[-1].size, full[-1], index[-1].start
  if w <= MAX_BOX or any(i.size > MAX_BOX for i in index[:-1] if not i.squeeze):
    return None
  s = start if isinstance(start, int) else 0
  return next((p for p in range(MAX_BOX, 0, -1) if w % p == 0 and n % p == 0 and s % p == 0
               and (p * itemsize) % ALIGN == 0 and w // p <= MAX_BOX), None)


def _unproven_hint(name: str, width: int, piece: int, buf) -> str:
  """How to copy a window wider than a box whose run-time start no piece is known to divide (probe 56c)."""
  m = re.search(r"ml\.ds\((.+), " + str(width) + r"\)\]$", name or "")
  start = m.group(1) if m else "start"
  return (f"a window wider than {MAX_BOX} is copied as one box of {width // piece} pieces of {piece} where its start is a"
          f" multiple of {piece}: promise it, ml.ds(ml.multiple_of({start}, {piece}), {width}) (interpret mode checks"
          f" the promise), or copy pieces of at most {MAX_BOX} into buffers of their own"
          f" ({buf or 'buf'}0, {buf or 'buf'}1, ..., a dot over the row summing the pieces' dots)")


def tma_rank(full, index) -> int:
  """The dimensions of the TMA box Mosaic GPU builds for this window (launch_context._prepare_tma).

  It drops dimensions of size 1 in both the array and the window; integer-indexed
  dimensions stay (as size-1 box dimensions) and, when that would exceed 5, are
  merged into one.
  """
  kept = sum(1 for n, i in zip(full, index) if not i.squeeze and not (n == 1 and i.size == 1))
  squeezed = sum(1 for n, i in zip(full, index) if i.squeeze and n != 1)
  if kept + squeezed > MAX_RANK and squeezed:
    squeezed = 1
  return kept + squeezed


def _check_smem_aligned(smem: ir.Value, swin, itemsize: int, loc, defs) -> None:
  from .absint import known_multiple
  sroot, index = swin
  full = sroot.type.shape
  strides = [itemsize * math.prod(full[d + 1:]) for d in range(len(full))]
  static = sum(i.start * s for i, s in zip(index, strides) if isinstance(i.start, int))
  # a run-time start moves the window by its stride times a number the start is always a multiple
  # of (buf.at[ml.ds(j * 32, 32)] of a 1-D float32 buffer: 128 bytes; ml.multiple_of tells it)
  dynamic = [(d, s * known_multiple(i.start, defs)) for d, (i, s) in enumerate(zip(index, strides))
             if not isinstance(i.start, int)]
  root = sroot.name or "the buffer"
  name = smem.name or "this window"
  hint = (f"make each row of {root} a multiple of {SMEM_ALIGN} bytes (pad its inner dimensions),"
          f" or copy into a buffer of its own")
  last = index[-1].start
  if isinstance(last, int) and (last * itemsize) % SMEM_ALIGN:     # the start inside a row (a 1-D buffer's)
    t = SMEM_ALIGN // itemsize
    lo, n = last - last % t, index[-1].size
    at = [str(c) for c in (lo, lo + t) if c + n <= full[-1]]
    where = f"{root}'s last dimension" if len(full) > 1 else root
    hint = (f"start the window at a multiple of {t} elements of {where} ({SMEM_ALIGN} bytes):"
            f" ml.ds({' or ml.ds('.join(a + f', {n})' for a in at)}, and read the elements you need from there"
            f" (or allocate {root} larger), or copy into a buffer of its own")
  if static % SMEM_ALIGN:
    raise E.TmaLimitError(
        f"TMA copies need the SMEM window to start at a multiple of {SMEM_ALIGN} bytes; {name} starts"
        f" {static} bytes into {root}", loc, hint=hint)
  for d, s in dynamic:
    if s % SMEM_ALIGN and d == len(full) - 1:       # a run-time start inside a row (a 1-D buffer's)
      t, m = SMEM_ALIGN // itemsize, s // itemsize
      raise E.TmaLimitError(
          f"TMA copies need the SMEM window to start at a multiple of {SMEM_ALIGN} bytes; the run-time start of"
          f" {name} is known to be a multiple of {m} element{'s' if m > 1 else ''} only ({s} bytes)", loc,
          hint=f"start it at a multiple of {t} elements ({SMEM_ALIGN} bytes: ml.ds(j * {t}, ...)), or, where it"
               f" is one, say so: ml.ds(ml.multiple_of(start, {t}), ...) (checked in interpret mode); or copy"
               f" into a buffer of its own")
    if s % SMEM_ALIGN:
      raise E.TmaLimitError(
          f"TMA copies need the SMEM window to start at a multiple of {SMEM_ALIGN} bytes; {name} moves"
          f" by {s} bytes per step of its dynamic index along dimension {d}", loc, hint=hint)


def _array_piece(groot, window, d, piece, start=None) -> str | None:
  """One side of piece k of a window split along its d-th free dimension, in the user's words
  (`window`: the view's text and index over `groot`, the GMEM array or the SMEM buffer; None for the
  whole of it): `lg.at[r, ml.ds(c * BL + k * 256, 256)]` for `lg.at[r, ml.ds(c * BL, BL)]`, and
  `x_s.at[c, ml.ds(k * 256, 256)]` for `x_s.at[c]`; the piece starts at `start` (text; k * piece by
  default). None where the text does not index `groot` plainly."""
  from .ops.index_hints import index_texts
  text, index = window
  index = index if index is not None else tuple(ir.Idx(0, n) for n in groot.type.shape)
  start = start or f"k * {piece}"
  texts = index_texts(text or "", groot.name, len(index)) if groot.name else None
  if texts is None and groot.name and text == groot.name:              # ml.copy(a, a_s): the whole array
    texts = ["0"] * len(index)
  if texts is None and groot.name and (text or "").endswith("]"):     # dwp.at[pid]: the dimensions left out
    for more in range(1, len(index)):
      texts = texts or index_texts(text[:-1] + ", :" * more + "]", groot.name, len(index))
  free = [k for k, i in enumerate(index) if not i.squeeze]
  if texts is None or d >= len(free):
    return None
  parts = []
  for k, (i, n) in enumerate(zip(index, groot.type.shape)):
    if i.squeeze:
      parts.append(texts[k])
    elif k == free[d]:
      parts.append(f"ml.ds({start}, {piece})" if texts[k] in ("0", ":") else
                   f"ml.ds({texts[k]} + {start}, {piece})")
    else:
      parts.append(":" if (i.start, i.size) == (0, n) else f"ml.ds({texts[k]}, {i.size})")
  while parts and parts[-1] == ":":
    parts.pop()
  return f"{groot.name}.at[{', '.join(parts)}]" if parts else None


def _box_hint(groot, full, box, itemsize, buf, window=None, swin=None, stext=None, store=False) -> str:
  """How to copy a window wider than a TMA box: in pieces along a leading dimension; a last
  dimension (inner in SMEM, so not split into one buffer's windows) split outside the kernel
  where a split divides it into pieces of whole 16-byte units, each side within a box."""
  array = groot.name or "x"
  if not (box[-1] > MAX_BOX and any(b > 1 for b in box[:-1])):
    d = next(i for i, b in enumerate(box) if b > MAX_BOX)     # the wide one (the last only if the others are 1)
    at = ":, " * d
    row = itemsize * math.prod(box[d + 1:])      # bytes a step along d moves in the buffer
    # pieces that divide it and start on 128-byte boundaries (384 rows: 2 x 192), else 256s and a rest
    piece = next((n for n in range(MAX_BOX, 0, -1) if box[d] % n == 0 and n * row % SMEM_ALIGN == 0), None)
    b = buf or "buf"
    # the pieces' counter: not a name the windows already use (a k loop's `k`, probe 51k)
    words = set(re.findall(r"[A-Za-z_]\w*", f"{window[0] if window else ''} {stext or ''}"))
    k = next(v for v in ("k", "kk", "piece") if v not in words)
    if piece is not None:
      same = _array_piece(groot, window, d, piece, f"{k} * {piece}") if window is not None else None
      # the buffer's side in the user's words too: a view of it (`x_s.at[c]`, a row of a buffer of
      # rows) keeps its own index (`x_s.at[:, ...]` named a window of every row, of another shape)
      mine = _array_piece(swin[0], (stext, swin[1]), d, piece, f"{k} * {piece}") if swin is not None else None
      return (f"copy it in pieces of at most {MAX_BOX} along that dimension into windows of the buffer,"
              f" {mine or f'{b}.at[{at}ml.ds({k} * {piece}, {piece})]'} (and the same window of the array"
              + (f", {same}" if same else "") + f") for {k} in ml.static_range({box[d] // piece})")
    q, r = divmod(box[d], MAX_BOX)
    if d == len(box) - 1 and (r * row) % ALIGN:     # the last piece would not span a multiple of 16 bytes
      unit = ALIGN // math.gcd(row, ALIGN)
      padded = -(-box[d] // unit) * unit
      return (f"pad {array} to {padded} elements outside the kernel (jnp.pad; TMA moves whole 16-byte units) and"
              f" size {b} {padded}, then copy it in pieces of at most {MAX_BOX}: {b}.at[ml.ds({k} * {MAX_BOX},"
              f" {MAX_BOX})] for {k} in ml.static_range({q}), then the last {padded - q * MAX_BOX},"
              f" {b}.at[ml.ds({q * MAX_BOX}, {padded - q * MAX_BOX})] (and the same windows of the array)")
    side = lambda start, n: (swin is not None and _array_piece(swin[0], (stext, swin[1]), d, n, start)
                             or f"{b}.at[{at}ml.ds({start}, {n})]")
    return (f"copy it in pieces of at most {MAX_BOX} along that dimension into windows of the buffer (each"
            f" starting {SMEM_ALIGN}-byte aligned): {side(f'{k} * {MAX_BOX}', MAX_BOX)} for {k} in"
            f" ml.static_range({q}), then the last {r}, {side(str(q * MAX_BOX), r)} (and the same"
            f" windows of the array)")
  fix = "the last dimension cannot be copied in pieces into one buffer (an SMEM window must be contiguous): "
  seg = next((n for n in range(MAX_BOX, 0, -1) if full[-1] % n == 0 and (n * itemsize) % ALIGN == 0
              and full[-1] // n <= MAX_BOX), None)
  if seg and full[-1] > MAX_BOX:
    fix += (f"split it outside the kernel, {array}.reshape(..., {full[-1] // seg}, {seg}) (free), and copy"
            f" windows of that into a buffer of the same shape, or ")
  elif box[-1] > full[-1]:
    fix += (f"take a window no wider than {array} ({full[-1]} columns; a tile size above the array's is a"
            f" config that does not fit this shape), or ")
  fix += f"copy each piece of at most {MAX_BOX} into a buffer of its own"
  whole = window is not None and window[0] == array and tuple(full) == tuple(box)
  if not (seg and buf and whole and len(box) == 2 and box[0] % MMA_M == 0 and full[-1] > MAX_BOX):
    return fix + _own_buffers(groot, box, itemsize, buf, window, store)
  n = full[-1] // seg             # (a dot operand takes such windows too: 64 rows by whole tiles)
  fix += (f", or read the pieces into registers and store them into windows of {buf},"
          f" {buf}.at[:, ml.ds(k * {seg}, {seg})][...] = {array}.at[:, ml.ds(k * {seg}, {seg})][...] for k in"
          f" ml.static_range({n})")
  return fix


def _own_buffers(groot, box, itemsize, buf, window, store) -> str:
  """The buffers of their own, in the user's words (an MLA decode's 576-wide latent rows, probe 51k): `q_s0 =
  ml.smem((16, 256))`, ..., each filled by a copy of its columns of the array (or copied into them: `store`),
  and a dot over the whole row summed over the pieces' dots. Pieces of 256 and a rest of whole 16-byte units;
  '' where none fits."""
  q, r = divmod(box[-1], MAX_BOX)
  if box[-1] <= MAX_BOX or (r * itemsize) % ALIGN or window is None:
    return ""
  sizes = [MAX_BOX] * q + ([r] if r else [])
  starts = [sum(sizes[:k]) for k in range(len(sizes))]
  b = buf if buf and buf.isidentifier() else "buf"
  lead = list(box[:-1])
  texts = [_array_piece(groot, window, len(box) - 1, n, str(c)) for c, n in zip(starts, sizes)]
  if any(t is None for t in texts):
    return ""
  made = ", ".join(f"{b}{k} = ml.smem({tuple(lead + [n])})" for k, n in enumerate(sizes))
  copies = "; ".join(f"ml.copy({b}{k}, {t})" if store else f"ml.copy({t}, {b}{k})" for k, t in enumerate(texts))
  if store:
    return f": {made} (each filled with its columns, as {b} was); {copies}"
  return (f": {made}; {copies} (a dot over the whole row is then the sum of the pieces' dots, s = ml.dot(a0, b0.T);"
          f" s = ml.dot(a1, b1.T, s), ... for pieces a0, a1 of one operand and b0, b1 of the other; a dot that takes"
          f" the pieces as its b, p @ v, keeps one accumulator a piece)")


def widen_hint(text, c: int, size: int, t: int, buf, rank: int) -> str:
  """How to load a window `size` elements wide whose start (`text`, the user's words, or None for
  the static start `c`) is `c` elements past a multiple of `t` (a stencil's halo, ml.ds(i * 128 - 1,
  132)): widen it to start on the multiple before it, and read the asked-for elements at an offset."""
  shift = c % t
  wide = -(-(size + shift) // t) * t
  m = re.fullmatch(r"(.+?)\s*([+-])\s*(\d+)", text or "")
  if text is None:
    start = str(c - shift)
  elif m and int(m.group(2) + m.group(3)) == c:     # i * 128 - 1 -> i * 128 - 4
    start = m.group(1) + ("" if c == shift else f" - {shift - c}" if c < shift else f" + {c - shift}")
  else:
    start = f"{text} - {shift}"
  at = ":, " * (rank - 1)
  b = buf or "buf"
  return (f"widen the window to start at a multiple of {t}: ml.ds({start}, {wide}) (a TMA copy reads zeros"
          f" before the array's start and past its end), into a buffer {wide} wide there, whose elements"
          f" {shift} to {shift + size} are the window asked for ({b}.at[{at}ml.ds({shift}, {size})]; a neighbour's"
          f" tap of a stencil is {b}.at[{at}ml.ds({shift} + k, n)]); or read it into registers with a masked load,"
          f" .load(mask=..., other=0), whose start may be anything")


def _reduce_hint(kind: str, d, itemsize: int, root: str) -> str:
  """How to combine into GMEM from registers where a TMA reduction cannot: Hopper's `red` (ml.atomic_*),
  for the dtypes it takes, else a window widened to 16 bytes whose extra elements hold the identity."""
  from .hw import ATOMIC_GMEM
  if d in ATOMIC_GMEM[kind]:
    return (f"combine it from registers instead, ml.atomic_{kind}({root}.at[...], value) (a plain store would"
            f" overwrite what the other programs combine)")
  identity = {"add": "0", "max": f"{d}'s lowest value", "min": f"{d}'s highest value"}[kind]
  return (f"ml.atomic_{kind} does not take {d} from registers: give the array's last dimension a multiple of"
          f" {ALIGN // itemsize} elements ({ALIGN} bytes), copy whole rows whose extra elements hold {identity}"
          f" (what {kind} leaves unchanged), and slice them off outside the kernel")


def _registers(store, root: str = "out") -> str:
  if isinstance(store, str):        # (a reduction's)
    return store
  return (f"store it from registers, {root}.at[...][...] = value (with .store(value, mask=...) where the window"
          f" runs past the array)" if store else "read it into registers with ref[...]")


def _check_smem_contiguous(smem: ir.Value, swin, loc, gname="x", store=False) -> None:
  sroot, index = swin
  full = sroot.type.shape
  sizes = [i.size for i in index]
  first = next((d for d, n in enumerate(sizes) if n > 1), len(sizes))
  if any(sizes[d] != full[d] for d in range(first + 1, len(full))):
    s = smem.name or "the window"
    moved = (store if isinstance(store, str) else f"store it from registers, {gname}[...] = {s}[...]" if store else
             f"read it into registers and store it there, {s}[...] = {gname}[...] (a masked"
             f" {gname}.load(mask=..., other=0) where it may run past the array's end)")
    raise E.TmaLimitError(
        f"TMA copies need a contiguous SMEM window; {smem.name or 'this view'} slices an inner dimension", loc,
        hint=f"slice only the leading dimensions of an SMEM buffer (e.g. stages: buf.at[s]), or {moved}")
