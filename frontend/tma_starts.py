"""TMA window starts the GPU needs aligned, proven while compiling: a copy's start in the array's
last dimension on a 16-byte boundary, and a copy of a buffer tiled for the tensor cores on whole
tiles of the GMEM array (checks.py's memory pass collects the starts' values over the grid)."""
from __future__ import annotations

import ast
import math

import numpy as np

from . import errors as E
from . import hw
from . import ir
from .absint import UNKNOWN, known_multiple, loop_counters
from .checks import Facts
from .layout_checks import by_row_blocks, by_tile_blocks, one_tile_column, split_load
from .memory_errors import _root
from .ops.elementwise import Binary, BinOp, Constant
from .ops.memory import Copy, View
from .tma import widen_hint
from .types import DType, Space, dtype_name, resolve
from .windows import view_chain


# ---------------------------------------------------------------- TMA window starts
def _ds_start(view_text: str, d: int) -> str | None:
  """The user's text of the start of `ml.ds(start, n)` in index `d` of a view's text
  (`out.at[ml.ds(s + t * 64, 64), :]`), or None where it is not written so."""
  try:
    node = ast.parse(view_text, mode="eval").body
  except SyntaxError:
    return None
  if not isinstance(node, ast.Subscript):
    return None
  items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  i = items[d] if d < len(items) else None
  if isinstance(i, ast.Call) and ast.unparse(i.func).endswith("ds") and i.args:
    return ast.unparse(i.args[0])
  return None


def _unproven_multiple(o, d, start, t, defs, loops, facts):
  """None when the start of copy `o`'s window in dimension `d` is a multiple of `t` (static, by
  its arithmetic, or by its values over the grid); else the words naming a counterexample
  (empty when none is known)."""
  if not isinstance(start, ir.Value) or known_multiple(start, defs, loops) % t == 0:
    return None
  vals = facts.tma_starts.get((o.loc, d), UNKNOWN)
  if vals is not UNKNOWN and len(vals) and np.all(vals % t == 0):
    return None
  bad = [int(v) for v in vals if v % t] if vals is not UNKNOWN else []
  return f" (it is {bad[0]} in some program)" if bad else ""


def check_minor_starts(kernel: ir.Kernel, defs: dict, facts: Facts) -> None:
  """A TMA copy's window must start on a 16-byte boundary in the array's last dimension: on
  the H200 a copy from a run-time start of 8 bytes faults (CUDA_ERROR_ILLEGAL_INSTRUCTION, and
  the process's CUDA context with it). Run-time starts must be proven multiples of 16 bytes,
  as check_tiled_starts proves tile starts (static starts are checked at the copy)."""
  loops = loop_counters(kernel.body)
  for o in ir.walk(kernel.body):
    if not isinstance(o, Copy):
      continue
    gmem = o.src if o.dst.type.space == Space.SMEM else o.dst
    view = defs.get(gmem.id)
    if gmem.type.space != Space.GMEM or not isinstance(view, View) or view.index[-1].squeeze:
      continue
    d = resolve(gmem.type.dtype)
    t = hw.TMA_ALIGN // d.itemsize if isinstance(d, DType) else 1
    start, last = view.index[-1].start, len(view.index) - 1
    seen = _unproven_multiple(o, last, start, t, defs, loops, facts) if t > 1 else None
    if seen is None:
      continue
    size = view.index[-1].size
    first = _start_text(o.loc, view, defs) or start.name or "start"
    hint = f"start windows at multiples of {t} (e.g. i * {size}); " + (
        "" if seen else f"if the start always is one, say so: ml.ds(ml.multiple_of({first},"
                        f" {t}), {size}); ") + _registers_any_start(o, gmem, view, first, size, defs)
    base, c = _constant_offset(start, defs)
    if o.dst.type.space == Space.SMEM and c % t and known_multiple(base, defs, loops) % t == 0:
      hint = widen_hint(_start_text(o.loc, view, defs) or start.name or "start", c, size, t,
                        _root(defs, o.dst).name, sum(not i.squeeze for i in view.index))
    raise E.TmaLimitError(
        f"TMA copies need a window's start in the last dimension to fall on a {hw.TMA_ALIGN}-byte boundary"
        f" (a multiple of {t} {dtype_name(d)} elements); the start of {gmem.name or 'this window'} in"
        f" {view.ref.name}'s last dimension is not provably one{seen}, and a misaligned start faults"
        f" the GPU", o.loc, hint=hint)


def _registers_any_start(o, gmem, view, first, size, defs) -> str:
  """The register access that replaces copy `o` whose window starts anywhere (a CSR row's first
  nonzero read from the row pointers), masked to the array's extent along the last dimension, in
  the user's words."""
  kept = sum(not i.squeeze for i in view.index)
  lead = "[" + ", ".join(["None"] * (kept - 1) + [":"]) + "]" if kept > 1 else ""
  n = f"{view.ref.name}.shape[{len(view.index) - 1}]"
  mask = f"({first} + ml.arange({size})){lead} < {n}" if lead else f"{first} + ml.arange({size}) < {n}"
  at = gmem.name or "the window"
  if o.dst is gmem:
    return (f"or store it from registers, which takes any start, masked where it runs past the array's end:"
            f" {at}.store({_root(defs, o.src).name or 'buf'}[...], mask={mask})")
  return (f"or read the window into registers, which takes any start, masked where it runs past the array's"
          f" end: {at}.load(mask={mask}, other=0)")


def _constant_offset(start, defs):
  """(base, c): `start` written as base + c, c the sum of the Python ints added to or subtracted
  from it (i * 128 - 1 is (i * 128, -1)); (start, 0) where none is."""
  c = 0
  for _ in range(8):
    o = defs.get(start.id) if isinstance(start, ir.Value) else None
    if not (isinstance(o, Binary) and o.kind in (BinOp.ADD, BinOp.SUB)):
      break
    lhs, rhs = (_int_of(x, defs) for x in (o.lhs, o.rhs))
    if rhs is not None:
      start, c = o.lhs, c + (rhs if o.kind == BinOp.ADD else -rhs)
    elif lhs is not None and o.kind == BinOp.ADD:
      start, c = o.rhs, c + lhs
    else:
      break
  return start, c


def _int_of(x, defs):
  if isinstance(x, int) and not isinstance(x, bool):
    return x
  o = defs.get(x.id) if isinstance(x, ir.Value) else None
  return o.value if isinstance(o, Constant) and isinstance(o.value, int) and not isinstance(o.value, bool) else None


def _start_text(loc, view, defs):
  """The user's text of the last start of the copy at `loc` (ml.copy(x.at[..., ml.ds(s, n)], buf)), or None."""
  from .ops.index_hints import index_texts
  line = loc.source_line[loc.col_offset:loc.end_col_offset] if loc.end_lineno == loc.lineno else ""
  root = _root(defs, view.ref)
  texts = index_texts(line, root.name, len(root.type.shape)) if line and root is view.ref else None
  return texts[-1] if texts else None


# ---------------------------------------------------------------- tiled TMA windows
def check_tiled_starts(kernel: ir.Kernel, defs: dict, facts: Facts) -> None:
  """A TMA copy of a buffer tiled for the tensor cores must start on a whole tile of the GMEM
  array (Mosaic GPU reads garbage otherwise): dynamic starts must be proven multiples of the
  tile, by the divisibility of their arithmetic, by their values over the grid, or by
  ml.multiple_of."""
  loops = loop_counters(kernel.body)
  for o in ir.walk(kernel.body):
    if not isinstance(o, Copy):
      continue
    smem, gmem = (o.dst, o.src) if o.dst.type.space == Space.SMEM else (o.src, o.dst)
    tiled = kernel.smem_layouts.get(_root(defs, smem).id)
    view = defs.get(gmem.id)
    if tiled is None or gmem.type.space != Space.GMEM or not isinstance(view, View):
      continue
    if one_tile_column(tiled, view.index, view.ref.type.shape):
      continue                 # copied as plain swizzled rows: any start

    kept = [d for d, i in enumerate(view.index) if not i.squeeze]   # the tiles cover these
    for d, t in zip(kept[-2:], tiled.tile):
      start = view.index[d].start
      seen = _unproven_multiple(o, d, start, t, defs, loops, facts)
      if seen is None or by_row_blocks(o, view.index, kept, d, off_tile=True) or by_tile_blocks(o, view.index, kept, d):
        continue               # (by rows of tiles, or a load a tile at a time: any start)
      buf = _root(defs, smem).name or "this buffer"
      hint = f"start windows at multiples of {t} (e.g. i * {view.index[d].size})"
      rows = d == kept[-2] and o.dst is smem and len(kept) >= 2
      if not seen:
        first = _ds_start(gmem.name or "", d) or "start"
        hint += f"; if the start always is one, say so: ml.ds(ml.multiple_of({first}, {t}), {view.index[d].size})"
        if rows:               # a start read from data (cu_seqlens): buffers one tile wide take any row
          hint += (f"; where it may not be one, "
                   f"{split_load(kernel, defs, _root(defs, smem), view.ref, tiled, o)}")
      elif rows:
        # a window shifted off the tile rows (a convolution's taps): buffers one tile wide take any row
        hint = (f"the window starts inside a tile in some program, so no promise makes it whole tiles;"
                f" {split_load(kernel, defs, _root(defs, smem), view.ref, tiled, o)}")
      if o.src is smem and d == kept[-2] and len(kept) >= 2:
        # a tile stored at a row read from data (a grouped GEMM's segment start): a store from
        # registers takes any row, and its mask keeps the segment's rows
        n = view.index[d].size
        first = _ds_start(gmem.name or "", d)
        row0 = first if first is None or first.isidentifier() else f"({first})"
        hint += (f"; where it may not be one, store the tile from registers, which takes any start, with a mask"
                 f" of the rows to write: {gmem.name or 'the window'}.store({buf}[...], mask=({row0 or 'row0'} +"
                 f" ml.arange({n}) < end)[:, None]) ({'' if first else 'row0 the window' + chr(39) + 's first row, '}"
                 f"end the first row not to write), or the registers {buf} was filled from")
      raise E.TmaLimitError(
          f"{buf} is tiled {tiled.tile} for the tensor cores, so TMA copies whole tiles of"
          f" {view.ref.name}; the start of {gmem.name or 'this window'} in dimension {d} is not provably"
          f" a multiple of {t}{seen}", o.loc, hint=hint)


# ---------------------------------------------------------------- register transfers' starts
def mark_register_starts(kernel: ir.Kernel, defs: dict) -> None:
  """Sets each register Load's, Store's (masked or not) and AtomicUpdate's `start_multiple`: a number of elements the offset of
  each row of its window in the root array (or SMEM buffer) is a multiple of (0: always 0), where a view is taken;
  None where the ref is the root itself. The lowering moves a register's vector at once only where
  the vector's length divides it: a window at a run-time start nothing proves aligned (`buf.at[ml.ds(i,
  8)]` of a float32 buffer at i = 3) read with 8-byte vectors faults the GPU (CUDA_ERROR_MISALIGNED_ADDRESS,
  and the process's CUDA context with it). `ml.multiple_of` proves a start.

  Each row of a window of two or more dimensions starts a row stride of the root further on, so the
  strides of its kept dimensions (but the root's last) count too: rows of 129 int8 elements (or 130
  float16, 65 float32) put every other row's vectors off their alignment wherever the window starts
  (`x.at[0:8, 0:128].load(mask=...)` of a (64, 129) int8 `x` read 4-byte vectors at byte 129)."""
  loops = loop_counters(kernel.body)
  for o in ir.walk(kernel.body):
    if type(o).__name__ not in ("Load", "Store", "MaskedLoad", "MaskedStore", "AtomicUpdate"):
      continue
    chain = view_chain(defs, o.ref)        # (through ml.cluster_ref: a peer's buffer is laid out as ours)
    if not chain or not hasattr(chain[-1].ref.type, "shape"):
      continue
    shape = tuple(chain[-1].ref.type.shape)
    strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
    dims, m, sizes = list(range(len(shape))), 0, list(shape)
    for view in reversed(chain):           # from the root outwards
      for d, idx in zip(dims, view.index):
        m = math.gcd(m, known_multiple(idx.start, defs, loops) * strides[d])
      sizes = [idx.size for idx in view.index if not idx.squeeze]
      dims = [d for d, idx in zip(dims, view.index) if not idx.squeeze]
    for d, n in zip(dims, sizes):          # each row's start: the kept dimensions' steps (size-1 ones never step)
      if d != len(shape) - 1 and n > 1:
        m = math.gcd(m, strides[d])
    object.__setattr__(o, "start_multiple", m)    # (an annotation of the op in place: passes hold it by identity)
