"""Checks of the layouts and SMEM tilings frontend/layouts.py chose, in the user's terms:
windows and copies of tiled (tensor-core) buffers that do not cover whole tiles, column slices
outside the tensor-core layout, and reductions across the rows warpgroups split."""
from __future__ import annotations

from . import errors as E
from . import hw
from . import ir
from .layouts import SmemLayout
from .windows import register_tile_window, whole_tiles
from .loc import call_at, expr_at
from .tile_offset_hints import start_texts, inside_tile_hint
from .ops.memory import Copy, SmemAlloc, View
from .types import DType, Layout, LayoutKind, RefType, Space, TensorType


def check_layouts(kernel: ir.Kernel, defs) -> None:
  """After assign_layouts: what the chosen layouts and tilings cannot do."""
  _check_tiled_views(kernel, defs)
  _check_tiled_copies(kernel, defs)
  _check_slices(kernel)
  _check_split_reductions(kernel)
  _check_peer_tiled_stores(kernel, defs)
  _check_int8_register_a(kernel, defs)


def _check_int8_register_a(kernel, defs) -> None:
  """An int8 A from registers takes b tiled in rows of 64 bytes or more (a 64- or 128-byte swizzle): at
  32 bytes ptxas computes only the first instruction's tile (Mosaic GPU's wgmma refuses it). The dot's
  own k is checked at the call (ml.dot); a narrower tiling comes from b's buffer or another dot of it."""
  from .ops.mma import Dot
  for o in ir.walk(kernel.body):
    if not isinstance(o, Dot) or isinstance(o.a.type, RefType) or o.a.type.dtype != DType.i8:
      continue
    b = o.b
    while isinstance(defs.get(b.id), View):
      b = defs[b.id].ref
    tiled = kernel.smem_layouts.get(b.id)
    if tiled is not None and tiled.swizzle < hw.MMA_REG_A_INT_K:
      raise E.MmaOperandError(
          f"ml.dot takes an int8 operand a from registers only where b's buffer is tiled in rows of"
          f" {hw.MMA_REG_A_INT_K} bytes or more; {b.name} is tiled in rows of {tiled.swizzle} bytes, the widest"
          f" that divides its columns and the k of every dot that reads it", o.loc,
          hint=f"give {b.name} and the k of its dots a multiple of {hw.MMA_REG_A_INT_K} columns, or read a from"
               f" SMEM (store it in an int8 buffer and pass the buffer)")


def _check_peer_tiled_stores(kernel, defs) -> None:
  """A register store into a peer CTA's buffer (ml.cluster_ref) that is tiled for the tensor
  cores: its value keeps a plain layout (peers' buffers take no part in layout choice), which
  a tiled buffer cannot take."""
  from .ops.memory import ClusterRef, Store
  for o in ir.walk(kernel.body):
    if not isinstance(o, Store):
      continue
    d, peer = defs.get(o.ref.id), False
    while isinstance(d, (View, ClusterRef)):
      peer |= isinstance(d, ClusterRef)
      d = defs.get(d.ref.id)
    root = d.results[0] if d is not None and d.results else None
    if peer and root is not None and root.id in kernel.smem_layouts:
      raise E.LayoutError(
          f"this stores registers into a peer CTA's {root.name or 'buffer'}, which is tiled for the tensor"
          f" cores (ml.dot reads it, or it holds a dot result); register stores into a peer's buffer take"
          f" plain buffers only", o.loc,
          hint=f"store into a plain buffer of the peer (one ml.dot does not read) and let the peer copy it"
               f" into its {root.name or 'buffer'}, or have the peer read your values through"
               f" ml.cluster_ref and store them into its own {root.name or 'buffer'}")


def _check_split_reductions(kernel) -> None:
  """With several warpgroups each holds its own rows of a tensor-core tile (and of its row statistics), so a
  reduction across rows would combine only a warpgroup's share: on the H200 the column sums of a 256-row tile
  at block=256 came out wrong. A full reduction (a scalar) and, since probe 62a, a column statistic of a 16- or
  32-bit tile combine the warpgroups' shares (smem.exchange_slots); what is left (a bool or 8-bit tile's column
  statistic) is rejected (pingpong.py rejects exchanges where a ping-pong loop's warpgroup holds the turn)."""
  from .ops.shape import Reduce
  from .smem import exchange_slots
  if kernel.block <= hw.WARPGROUP:
    return
  for o in ir.walk(kernel.body):
    lay = o.x.type.layout if isinstance(o, Reduce) and isinstance(o.x.type, TensorType) else None
    if lay is None or lay.kind != LayoutKind.WGMMA or lay.whole or lay.drop == (0,) or 0 not in o.axes:
      continue
    if exchange_slots(kernel, o):
      continue
    raise E.LayoutError(
        f"this reduction runs across the rows of {_user_arg(o) or o.x.name or 'a tensor-core tile'} {o.x.type.shape}, which"
        f" block={kernel.block} splits among {kernel.block // hw.WARPGROUP} warpgroups (each holds its own"
        f" rows); reductions across the warpgroups are not supported", o.loc,
        hint=_split_reduction_hint(o))


_REDUCTIONS = ("ml.sum", "ml.max", "ml.min", "ml.mean", "ml.argmax", "ml.argmin")
_COMPOSITES = ("ml.var", "ml.std", "ml.logsumexp", "ml.any", "ml.all", "ml.softmax", "ml.log_softmax")


def _split_reduction_hint(o) -> str:
  """What works for reduction `o` across the warpgroups' rows: a transpose (it goes through
  SMEM into a layout whose rows any reduction combines), written for the value's rank and axes
  with the function the user called (ml.argmax reduces inside: name it, not its parts)."""
  called = _called(o.loc)
  node = call_at(o.loc)
  if called in _COMPOSITES and node is not None and node.args and tuple(o.axes) == (0,) and len(o.x.type.shape) == 2:
    # ml.var, ml.logsumexp, ml.any, ...: reduce inside, so the hint calls them (not their parts) on the
    # user's own argument (its parts' names were 'tile' or the call's text)
    import ast
    text = ast.unparse(node.args[0])
    arg = text if text.isidentifier() else f"({text})"
    back = ".T" if called in ("ml.softmax", "ml.log_softmax") else ""
    return (f"reduce its transpose along axis 1: {called}({arg}.T, axis=1){back}; or use block=128 (one"
            f" warpgroup holds all rows)")
  fn = called if called in _REDUCTIONS else f"ml.{o.kind.value}"
  x = o.x.name or "tile"
  arg = fn in ("ml.argmax", "ml.argmin")
  if len(o.x.type.shape) == 1:       # a row statistic: make it one row of a 2-D tensor
    fix = f"reduce it as one row: {fn}({x}[:, None].T{', axis=1' if arg else ''})"
  elif tuple(o.axes) == (0,):
    fix = f"reduce its transpose along axis 1: {fn}({x}.T, axis=1)"
    if not arg:
      buf = x[:-len("[...]")] if x.endswith("[...]") else None
      windows = (f"{buf}.at[ml.ds(r * 8, 8)][...]" if buf else
                 f"t_s.at[ml.ds(r * 8, 8)][...] after t_s[...] = {x}")
      fix += f", or reduce windows of 8 rows read back from SMEM ({windows}) and combine them"
  else:
    fix = f"reduce its transpose: {fn}({x}.T)"
  return f"{fix}; or use block=128 (one warpgroup holds all rows)"


def _user_arg(o) -> str | None:
  """The argument as the user wrote it of the ml reduction called at `o`'s location (`acc * 0.01` of
  `ml.logsumexp(acc * 0.01, axis=0)`, whose parts' own operands have no name of the user's)."""
  import ast
  node = call_at(o.loc)
  if _called(o.loc) in _REDUCTIONS + _COMPOSITES and node.args and len(o.x.type.shape) == 2:
    return ast.unparse(node.args[0])
  return None


def _called(loc) -> str | None:
  """`ml.name` when the source at `loc` is a call of an ml function (ml.argmax(acc, axis=0))."""
  import ast
  node = call_at(loc)
  f = node.func if node is not None else None
  if isinstance(f, ast.Attribute) and isinstance(f.value, ast.Name) and f.value.id in ("ml", "tl"):
    return f"ml.{f.attr}"
  return None


def _check_slices(kernel) -> None:
  """Column slices of register tensors exist in the tensor-core layout only (a tile every warpgroup holds
  whole, of rows the warpgroups cannot split, too: each slices its own copy; probe 62a)."""
  from .ops.column_slices import Slice
  for o in ir.walk(kernel.body):
    lay = o.x.type.layout if isinstance(o, Slice) else None
    if lay is not None and lay != Layout.WGMMA and not (lay.kind == LayoutKind.WGMMA and lay.whole and not lay.drop):
      raise E.LayoutError(
          f"x[:, a:b] slices register tensors in the tensor-core layout (ml.dot results and what is"
          f" computed from them); {o.x.name or 'this tensor'} is in the {o.x.type.layout} layout", o.loc,
          hint="slice the ref before reading it instead: ref.at[:, a:b][...]")


def _check_tiled_copies(kernel, defs) -> None:
  """TMA copies of tiled buffers copy whole (8, 128-byte) tiles of the GMEM array: Mosaic GPU tiles the GMEM array the
  same way (TileTransform), so its last two dimensions must be multiples of the tile (or smaller than it), and a
  window must start on a tile boundary (one inside a tile reads zeros silently); but for copies by rows of tiles
  (by_row_blocks), loads a tile at a time (by_tile_blocks) and copies of one column of tiles (one_tile_column)."""
  def root(v):
    d = defs.get(v.id)
    return (d.ref, d.index) if isinstance(d, View) else (v, None)

  for o in ir.walk(kernel.body):
    if not isinstance(o, Copy):
      continue
    smem, gmem = (o.dst, o.src) if o.dst.type.space == Space.SMEM else (o.src, o.dst)
    layout = kernel.smem_layouts.get(root(smem)[0].id)
    if layout is None or gmem.type.space != Space.GMEM:
      continue
    array, index = root(gmem)
    shape = array.type.shape
    tiles = f"({layout.tile[0]}, {layout.tile[1]})"
    if one_tile_column(layout, index, shape):
      continue                 # copied as plain swizzled rows: any row count and start
    # The tiles cover the window's last two dimensions; integer-indexed ones (a head of a
    # (batch, seq, heads, dim) array) drop out of the window.
    kept = [d for d in range(len(shape)) if index is None or not index[d].squeeze]
    for d, t in zip(kept[-2:], layout.tile):
      off_tile = index is not None and isinstance(index[d].start, int) and index[d].start % t
      if (shape[d] > t and shape[d] % t or off_tile) and by_row_blocks(o, index, kept, d, off_tile):
        continue               # any rows (a load from any row): copied a row of tiles at a time
      split = not off_tile and getattr(kernel, "split_k", None) is None and split_plan(kernel, defs, root(smem)[0], t)
      if (shape[d] > t and shape[d] % t or off_tile) and not split and by_tile_blocks(o, index, kept, d):
        continue               # any columns of a load: copied a tile at a time (else split along K, a retry)
      if shape[d] > t and shape[d] % t:
        e = E.TmaLimitError(
            f"{root(smem)[0].name} is tiled {tiles} for the tensor cores, so TMA copies whole tiles"
            f" of {array.name}; {array.name}'s dimension {d} ({shape[d]}) must then be a multiple"
            f" of {t}", o.loc,
            hint=_ragged_tiles_hint(kernel, defs, root(smem)[0], array, d, t, layout,
                                    rows=d == kept[-2] and len(kept) >= 2, copy=o))
        if d == kept[-1] and o.dst is smem:
          e.split_k = split_plan(kernel, defs, root(smem)[0], t)    # (compile.trace retries it split)
        raise e
      start = index[d].start if index is not None else 0
      if isinstance(start, int) and start % t:
        raise E.TmaLimitError(
            f"{root(smem)[0].name} is tiled {tiles} for the tensor cores, so TMA copies whole tiles of"
            f" {array.name}; this window starts at {start} in dimension {d}, inside a tile", o.loc,
            hint=f"start windows at multiples of {t} in that dimension")


def copies_take_tiles(lp, alloc, tile) -> bool:
  """Whether every TMA copy of `alloc`, a buffer the layout pass `lp` tiles only to move a tensor-core tile fast (an
  epilogue's `c_s[...] = acc`: no ml.dot reads it), can move whole tiles of its GMEM array (_check_tiled_copies'
  rule). Where one cannot (an output 84 float32 columns wide, a window starting inside a tile), the buffer stays
  untiled and the copy moves plain rows: the tiling would have made a legal kernel an MG401 (probe 58b)."""
  for o in ir.walk(lp.kernel.body):
    if not isinstance(o, Copy) or alloc not in (lp.smem_root(o.src), lp.smem_root(o.dst)):
      continue
    gmem = o.dst if lp.smem_root(o.src) is alloc else o.src
    d = lp.defs.get(gmem.id)
    array, index = (d.ref, d.index) if isinstance(d, View) else (gmem, None)
    if not isinstance(array.type, RefType) or array.type.space != Space.GMEM:
      continue
    shape = array.type.shape
    if (index[-1].size if index is not None else shape[-1]) == tile[1]:
      continue                 # one column of tiles: plain swizzled rows (one_tile_column)
    kept = [k for k in range(len(shape)) if index is None or not index[k].squeeze]
    for k, t in zip(kept[-2:], tile):
      start = index[k].start if index is not None else 0
      off = isinstance(start, int) and start % t
      rows_ok = index is not None and len(kept) >= 2 and k == kept[-2] and o.multicast is None and o.reduce is None \
          and (o.slot >= 0 or not off)
      if (shape[k] > t and shape[k] % t or off) and not rows_ok:
        return False
  return True


def _ragged_tiles_hint(kernel, defs, buf, array, d, t, layout, *, rows, copy) -> str:
  """What works when a tiled buffer's GMEM array is ragged in dimension d: padding it outside
  the kernel, or (ragged rows) loading buffers one tile wide, which TMA fills as plain swizzled
  rows of any count from any start (`one_tile_column`), with one dot per buffer. (A window of a
  buffer's columns is no TMA destination: MG401 too.) An output cannot be padded outside the
  kernel: its out_shape can be enlarged (the result sliced afterwards), and a store goes through
  buffers one tile wide, each written from its columns of the tile and copied out on its own."""
  dims = array.type.shape
  output = any(p.is_output and p.value is array for p in kernel.params)
  if output:
    up = -(-dims[d] // t) * t
    cut = ", ".join([":"] * d + [f":{dims[d]}"])
    pad = (f"make {array.name}'s out_shape dimension {d} a multiple of {t} ({up} rather than {dims[d]})"
           f" and slice the kernel's result outside it (result[{cut}])")
  else:
    widths = ", ".join("(0, %d)" % (-n % t if k == d else 0) for k, n in enumerate(dims))
    pad = (f"pad {array.name}'s dimension {d} to a multiple of {t} outside the kernel"
           f" (jnp.pad({array.name}, ({widths}{',' if len(dims) == 1 else ''})))")
    if rows and _read_as_dot_b(kernel, defs, buf):
      # (the rows of a dot's b are keys in attention: padded ones score 0, not -inf, unless masked)
      pad += (f", then mask by the real length, {dims[d]} (a constexpr or ml.scalar), not by {array.name}.shape[{d}],"
              f" which the padding makes {-(-dims[d] // t) * t}: its zero rows would count (keys scoring 0 in a softmax)")
  if not rows:
    return pad + _one_tile_column_hint(buf, array, d, t, copy)
  if copy.dst.type.space == Space.GMEM:
    return f"{pad}; or {_split_store(kernel, buf, array, layout, copy)}"
  return f"{pad}; or {split_load(kernel, defs, buf, array, layout, copy)}"


def split_plan(kernel, defs, buf, t) -> dict | None:
  """{ml.smem site: (axis, t)} of the buffers a retry splits into buffers t wide along K (ops/split_k.py): `buf`,
  whose columns are K of every ml.dot that reads it (a dot's a, or its b read as `buf.T`), and each such dot's other
  operand (an ml.smem buffer: its rows, or its columns read as `.T`); None where buf is no such operand."""
  from .ops.mma import Dot
  from .ops.split_k import key

  def base(v):
    while isinstance(defs.get(v.id), View):
      v = defs[v.id].ref
    return v
  flipped = lambda v: isinstance(defs.get(v.id), View) and defs[v.id].transpose
  site = lambda v: key(getattr(defs.get(v.id), "loc", None)) if isinstance(defs.get(v.id), SmemAlloc) else None
  if len(buf.type.shape) not in (2, 3) or buf.type.shape[-1] % t or site(buf) is None:   # (3: a pipeline's stages)
    return None
  plan = {site(buf): (1, t)}
  for o in ir.walk(kernel.body):
    if not isinstance(o, Dot) or buf not in (base(o.a), base(o.b)) or not isinstance(o.a.type, RefType):
      continue
    mine, other = (o.a, o.b) if base(o.a) is buf else (o.b, o.a)
    if flipped(mine) != (mine is o.b):
      return None                 # (buf's rows are K there)
    axis = (1 if flipped(other) else 0) if other is o.b else 1
    if site(base(other)) is None or len(base(other).type.shape) not in (2, 3) or \
        base(other).type.shape[-2:][axis] % t:
      return None
    plan[site(base(other))] = (axis, t)
  return plan if len(plan) > 1 else None


def _one_tile_column_hint(buf, array, d, t, copy) -> str:
  """Ragged columns of a load into a buffer wider than one tile (a dot's A of K = 1000 copied 128 columns at a time
  into (64, 128), probe 59a): a buffer one tile wide, stepped by the tile, is filled as plain swizzled rows
  (`one_tile_column`), which any width of the array takes, so the loop over K steps by the tile (its TMA zero-fills
  the columns past the end, as the wider window's would); '' where that is not the case."""
  shape = tuple(buf.type.shape)
  if copy.src.type.space != Space.GMEM or len(shape) < 2 or shape[-1] <= t:
    return ""
  lead = ", ".join(map(str, shape[:-1]))
  return (f"; or copy {array.name} one tile column at a time: make {buf.name} {t} wide (ml.smem(({lead}, {t})))"
          f" and step the window's start along dimension {d} by {t} (ml.ds(k * {t}, {t})): a window one tile wide"
          f" is copied as plain swizzled rows, whatever {array.name}'s width (an ml.dot's K loop then steps by {t},"
          f" its other operand's K rows likewise)")


def _read_as_dot_b(kernel, defs, buf) -> bool:
  """Whether an ml.dot reads `buf` (or a view of it) as its b operand: its rows are keys (`k_s.T`) or
  values (`v_s`) where the dot is attention's, so zero rows padded onto its array change a softmax."""
  from .ops.mma import Dot

  def base(v):
    while isinstance(defs.get(v.id), View):
      v = defs[v.id].ref
    return v
  return any(isinstance(o, Dot) and isinstance(o.b.type, RefType) and base(o.b) is buf for o in ir.walk(kernel.body))


def _last_start(copy, rank) -> str:
  """The start of the last index of the copy's GMEM window (of an array of `rank` dimensions) as the
  user wrote it (`k * 128` of `x.at[ml.ds(r0, 64), ml.ds(k * 128, 128)]`), "0" for a whole
  dimension (`:`, or none written), or None."""
  import ast
  node = call_at(copy.loc) if copy is not None else None
  if node is None or not node.args or not isinstance(node.args[0], ast.Subscript):
    return None
  window = node.args[0]
  elts = list(window.slice.elts) if isinstance(window.slice, ast.Tuple) else [window.slice]
  if not any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts) and len(elts) != rank:
    return "0" if len(elts) < rank else None
  last = elts[-1]
  if isinstance(last, ast.Call) and len(last.args) == 2 and ast.unparse(last.func) == "ml.ds":
    return ast.unparse(last.args[0])
  if isinstance(last, ast.Slice) and last.step is None:
    return "0" if last.lower is None else ast.unparse(last.lower)
  return None


def split_load(kernel, defs, buf, array, layout, copy=None) -> str:
  """The words for loading a tiled buffer's window of `array` into buffers one tile wide, which
  TMA fills as plain swizzled rows of any count from any row (`one_tile_column`), one ml.dot each;
  their windows start where the copy's (`copy`) last index does, a tile apart."""
  from .ops.mma import Dot
  w = layout.tile[1]
  start = _last_start(copy, len(array.type.shape)) or "0"
  at = lambda k: f"{k}" if start == "0" else (start if k == 0 else f"{start} + {k}")
  shape = buf.type.shape[-2:]
  parts = shape[-1] // w
  x = buf.name or "buf"
  more = ", ..." if parts > 2 else ""

  def base(v):
    while isinstance(defs.get(v.id), View):
      v = defs[v.id].ref
    return v

  how = "and give each its own ml.dot"
  for o in ir.walk(kernel.body):
    if not isinstance(o, Dot):
      continue
    other = lambda v: (base(v).name or "x") if isinstance(v.type, RefType) else (v.name or "x")
    if base(o.b) is buf and getattr(defs.get(o.b.id), "transpose", False):     # q @ k.T: split K
      a = other(o.a)
      how = (f"and sum one ml.dot per buffer: s = ml.dot({a}.at[:, ml.ds(0, {w})], {x}0.T), then"
             f" s = ml.dot({a}.at[:, ml.ds({w}, {w})], {x}1.T, s){more}")
    elif base(o.b) is buf:                                                      # p @ v: split N
      how = f"and one ml.dot per buffer, each giving {w} columns of the result: ml.dot({other(o.a)}, {x}0){more}"
    elif isinstance(o.a.type, RefType) and base(o.a) is buf and not getattr(defs.get(o.a.id), "transpose", False):
      b = other(o.b)                                                            # a @ b: split K
      transposed = getattr(defs.get(o.b.id), "transpose", False)
      if transposed:                                                             # a @ b_s.T: b's columns
        part = lambda k: f"{b}.at[:, ml.ds({k}, {w})].T"
      else:
        part = lambda k: f"{b}.at[ml.ds({k}, {w})]"
      how = (f"and sum one ml.dot per buffer: acc = ml.dot({x}0, {part(0)}), then"
             f" acc = ml.dot({x}1, {part(w)}, acc){more}")
      from .ops.control import For
      if any(isinstance(p, For) and getattr(p, "stages", 1) > 1 for p in ir.path_to(kernel.body, o)):
        how += (f" (in this pipelined loop split {b} the same way, {b}0, {b}1{more} loaded from windows of"
                f" {w} {'columns' if transposed else 'rows'}: a buffer a pipelined loop loads is read whole)")
    else:
      continue
    break
  return (f"load {array.name} into {parts if parts > 1 else 'a'} separate"
          f" buffer{'s' if parts > 1 else ''} one tile ({w} columns) wide, which TMA fills with any"
          f" number of rows from any row: {x}0 = ml.smem(({shape[0]}, {w})) filled from the same"
          f" window of {array.name} with ml.ds({at(0)}, {w}) as its last index, {x}1 with ml.ds({at(w)}, {w}){more},"
          f" {how} (a window of {x}'s columns cannot be a TMA destination)")


def _split_store(kernel, buf, array, layout, copy) -> str:
  """A TMA store of a tiled buffer into an array with ragged rows, as buffers one tile wide:
  each written from its columns of the tile stored into `buf` (x[:, a:b] of a tensor-core
  tile), then copied to its columns of the same window of the array."""
  import ast
  from .ops.memory import Store
  w = layout.tile[1]
  rows, cols = buf.type.shape[-2:]
  parts = cols // w
  x = buf.name or "buf"
  stored = next((o.value for o in ir.walk(kernel.body) if isinstance(o, Store) and o.ref is buf), None)
  y = stored.name if stored is not None and (stored.name or "").isidentifier() else "y"
  node = call_at(copy.loc)
  target = None                       # the array window's text, and the last index's start
  if node is not None and len(node.args) == 2 and isinstance(node.args[1], ast.Subscript):
    window = node.args[1]
    elts = list(window.slice.elts) if isinstance(window.slice, ast.Tuple) else [window.slice]
    last = elts[-1]
    if (len(elts) == len(array.type.shape) and isinstance(last, ast.Call) and len(last.args) == 2
        and ast.unparse(last.func) == "ml.ds"):
      start = ast.unparse(last.args[0])
      target = (ast.unparse(window.value), [ast.unparse(e) for e in elts[:-1]], start)
  if target is None:
    windows = (f"each copied to the same window of {array.name} with ml.ds(start, {w}) as its last"
               f" index, {x}1 with ml.ds(start + {w}, {w})" + (", ..." if parts > 2 else ""))
  else:
    name, lead, start = target

    def at(k):
      s = start if k == 0 else (f"{k * w}" if start == "0" else f"{start} + {k * w}")
      return f"ml.copy({x}{k}, {name}[{', '.join(lead + [f'ml.ds({s}, {w})'])}])"
    windows = f"then {at(0)} and {at(1)}" + (", ..." if parts > 2 else "")
  more = ", ..." if parts > 2 else ""
  return (f"store through {parts} separate buffers one tile ({w} columns) wide, which TMA writes to"
          f" any number of rows at any row (rows past {array.name}'s end are dropped):"
          f" {x}0 = ml.smem(({rows}, {w})) with {x}0[...] = {y}[:, 0:{w}], {x}1 with"
          f" {y}[:, {w}:{2 * w}]{more}" + ("" if y != "y" else f", y the tile you store into {x}")
          + f"; {windows} (a window of {x}'s columns cannot be a TMA source)")


def by_row_blocks(o, index, kept, d, off_tile=False) -> bool:
  """Whether copy `o` may take the rows of its window (dimension `d` of the GMEM array, the tiles' rows) by
  rows of tiles, and does from now on: then the array's rows need not be whole tiles (a sequence of 100 keys
  at head_dim 128, a matmul of 300 rows), nor a load's window start on one (`off_tile`: a cu_seqlens offset,
  a convolution's tap), since each TMA copy moves one row of tiles, the array viewed by column tiles alone
  (lowering/memory.py, _copy_row_blocks). A store keeps whole tiles of rows where it starts (its rows past
  the array's end are dropped; a tile stored from a segment's row would write the next segment's, and the
  masked store from registers is the hint). Not a multicast load (its shares split the rows) nor a TMA
  reduction."""
  ok = (index is not None and len(kept) >= 2 and d == kept[-2] and o.multicast is None and o.reduce is None
        and (o.slot >= 0 or not off_tile))
  if ok:
    object.__setattr__(o, "row_blocks", True)    # (an annotation of the op in place, as start_multiple)
  return ok


def by_tile_blocks(o, index, kept, d) -> bool:
  """Whether load `o` may take the columns of its window (dimension `d`) a tile at a time, and does from now on: the
  array's columns need not be whole tiles (a matmul's B stored (K, N) at N = 328), nor the window start on one. Each
  TMA copy moves one (t0, t1) tile as plain swizzled rows (one_tile_column's bytes; lowering/memory.py,
  _copy_tile_blocks), one copy per tile; a K operand's is split along K instead (ops/split_k.py). Not a store, a
  multicast nor a TMA reduction."""
  if ok := index is not None and len(kept) >= 2 and d == kept[-1] and o.slot >= 0 and o.multicast is o.reduce is None:
    object.__setattr__(o, "tile_blocks", True)
  return ok


def one_tile_column(layout: SmemLayout, index, shape) -> bool:
  """Whether a TMA copy of a tiled buffer is one column of tiles: its box is exactly one tile
  wide. Then the tiled SMEM bytes equal the swizzled rows of the box, so the copy needs no
  tiling of the GMEM array (its rows may be any number, its windows start on any row)."""
  width = index[-1].size if index is not None else shape[-1]
  return width == layout.tile[1]


def _expression(text) -> bool:
  """Whether a value's name is Python the user wrote (`lo`, `lo[...]`), fit to put in a hint."""
  import ast
  try:
    return bool(text) and isinstance(ast.parse(text, mode="eval"), ast.Expression)
  except SyntaxError:
    return False


def _stored_pieces_hint(kernel, defs, view):
  """For register stores into static windows of a buffer ml.dot reads (`w_s.at[:, 0:64][...] = lo`,
  which the tensor-core tiling does not take from registers): join the pieces in registers and
  store the buffer whole, `w_s[...] = ml.concatenate([lo, hi], axis=1)`; None for other views."""
  from .ops.memory import Store
  buf = view.ref
  stores = [o for o in ir.walk(kernel.body) if isinstance(o, Store) and isinstance(defs.get(o.ref.id), View)
            and defs[o.ref.id].ref is buf]
  if view.result not in [o.ref for o in stores]:
    return None
  x = buf.name or "the buffer"
  pieces = []
  for o in stores:
    idx = defs[o.ref.id].index
    moved = [d for d, (i, n) in enumerate(zip(idx[-2:], buf.type.shape[-2:])) if i.start != 0 or i.size != n]
    if len(moved) != 1 or not isinstance(idx[-2 + moved[0]].start, int) or any(i.squeeze for i in idx):
      pieces = None
      break
    pieces.append((moved[0], idx[-2 + moved[0]].start, idx[-2 + moved[0]].size, o.value))
  names = [p[3].name if _expression(p[3].name) else None for p in pieces or ()]
  whole = (f"{x}'s register stores go whole or as windows of whole tiles, {hw.MMA_M} rows by 128 bytes"
           f" of columns, static or at run-time starts proven multiples of them (its tiles are laid out for the"
           f" tensor cores)")
  if pieces and len(buf.type.shape) == 2 and len({p[0] for p in pieces}) == 1 and all(names):
    axis = pieces[0][0]
    if len(set(names)) < len(names):        # one store in an unrolled loop: each trip's value has one text
      return (f"{whole}: collect the pieces in a list as the loop makes them, parts = parts + [{names[0]}]"
              f" (parts = [] before the loop), and store them at once after it, {x}[...] ="
              f" ml.concatenate(parts, axis={axis})")
    pieces = sorted(zip(pieces, names), key=lambda p: p[0][1])
    ends = [0] + [p[1] + p[2] for p, _ in pieces]
    if all(p[1] == e for (p, _), e in zip(pieces, ends)) and ends[-1] == buf.type.shape[axis]:
      return (f"{whole}: join the pieces in registers and store them at once,"
              f" {x}[...] = ml.concatenate([{', '.join(n for _, n in pieces)}], axis={axis})")
  return (f"{whole}: join the pieces in registers with ml.concatenate([...], axis=...) and store {x}[...] at"
          f" once, or ml.copy into it from GMEM windows of whole rows (starting and ending at multiples of"
          f" {hw.TILE_ROWS}) and all its columns")


def _stored_value(kernel, buf):
  """The register value stored into SMEM buffer `buf` whole (`buf[...] = v`), or None."""
  from .ops.memory import Store
  return next((o.value for o in ir.walk(kernel.body) if isinstance(o, Store) and o.ref is buf), None)


def _result_window_hint(kernel, view, kinds, value, multiple, defs) -> str:
  """What works for a window of the rows or columns of a buffer tiled because an ml.dot result is
  stored into it (not because ml.dot reads it): ml.copy takes static windows of whole tiles of
  it, so a run-time start becomes one branch per window; or the result is stored from
  registers with a mask, not through the buffer."""
  import ast
  x = view.ref.name or "buf"
  whole = "(rows a multiple of 8, columns of 128 bytes)"
  dynamic = [(d, i) for d, i in enumerate(view.index) if not isinstance(i.start, int) and not i.squeeze]
  if len(dynamic) != 1 or view.transpose or set(kinds) != {"copy"}:
    return (f"take static windows of whole tiles {whole} of {x} for ml.copy"
            + (f", or store the value from registers instead of through {x}" if value is not None else ""))
  d, idx = dynamic[0]
  n = view.ref.type.shape[d]
  var = None                           # `r` of a start written `r * 64`: one branch per value of r
  node = expr_at(view.loc)
  if isinstance(node, ast.Subscript):
    elts = list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]
    e = elts[d] if d < len(elts) and not any(isinstance(t, ast.Constant) and t.value is Ellipsis
                                                for t in elts) else None
    start = e.args[0] if isinstance(e, ast.Call) and e.args else None
    if isinstance(start, ast.BinOp) and isinstance(start.op, ast.Mult):
      for v, k in ((start.left, start.right), (start.right, start.left)):
        if isinstance(v, ast.Name) and isinstance(k, ast.Constant) and k.value == idx.size:
          var = v.id

  copy = next((c for c in ir.walk(kernel.body) if isinstance(c, Copy) and view.result in (c.src, c.dst)), None)
  into = copy is not None and copy.dst is view.result

  def window(k):
    return ", ".join([":"] * d + [f"{k * idx.size}:{(k + 1) * idx.size}"])

  def copy_of(k):
    w = f"{x}.at[{window(k)}]"
    return f"ml.copy(..., {w})" if into else f"ml.copy({w}, ...)"
  count = n // idx.size if n % idx.size == 0 else 0
  if var is not None and count >= 2 and idx.size % hw.TILE_ROWS == 0:
    branches = [f"{'if' if k == 0 else 'elif' if k < count - 1 else 'else'}"
                + (f" {var} == {k}" if k < count - 1 else "") + f": {copy_of(k)}"
                for k in range(count)][:3]
    split = (" ".join(branches) + (" ..." if count > 3 else "")
             + " (each copying to its own window of the array)")
  else:
    split = f"a branch per start, each copying a static window of whole tiles {whole} ({x}.at[{window(0)}])"
  fix = f"a window of a tiled buffer must be static (ml.copy takes static windows of whole tiles): {split}"
  promise = _promise(view, kernel.smem_layouts[view.ref.id].tile, multiple, defs)
  if promise:
    fix = (f"a window of a tiled buffer must start on a whole tile: if its run-time start always is one, say"
           f" so, {promise} (checked in interpret mode); else, with a static window (ml.copy takes static"
           f" windows of whole tiles), {split}")
  if value is None or into:
    return fix
  y = value.name if (value.name or "").isidentifier() else "the value"
  rows = d == len(view.index) - 2
  keep = (f"ml.arange({n})[:, None] // {idx.size} == {var}" if rows and var
          else f"ml.arange({n})[None, :] // {idx.size} == {var}" if var else "the elements this program writes")
  return (f"{fix}; or store {y} from registers, not through {x}, into the array's window of all {n}"
          f" {'rows' if rows else 'columns'} with a mask: .store({y}, mask={keep})")


def _promise(view, tile, multiple, defs) -> str | None:
  """`ml.ds(ml.multiple_of(r, 8), 64)` for each run-time start of a window of whole tiles of a tiled
  buffer that is not proven a multiple of the tile (a row start read from memory), in the user's
  words; None when the window is no such window, or a start is certainly not one (`r * 8 + 4`)."""
  from .tma_starts import _constant_offset
  inner = view.index[-2:]
  if not any(isinstance(i.start, ir.Value) for i in inner) or any(
      i.squeeze or i.size % t or isinstance(i.start, int) and i.start % t for i, t in zip(inner, tile)):
    return None
  for i, t in zip(inner, tile):
    base, c = _constant_offset(i.start, defs) if isinstance(i.start, ir.Value) else (0, 0)
    if c % t and multiple(base) % t == 0:
      return None
  texts = start_texts(view)[-2:]
  return " and ".join(f"ml.ds(ml.multiple_of({text or 'start'}, {t}), {i.size})" for i, t, text in
                      zip(inner, tile, texts) if isinstance(i.start, ir.Value) and multiple(i.start) % t) or None


def _run_time_start_hint(view, tile, multiple, defs) -> str | None:
  """A window of whole tiles of a tensor-core buffer whose start is known only at run time and not
  proven a multiple of the tile (`x_s.at[ml.ds(r, 64)]` of a row start read from memory): if it is one,
  ml.multiple_of says so; else unrolled with ml.static_range, each trip's window is static. None for
  other windows."""
  promise = _promise(view, tile, multiple, defs)
  shape = tuple(i.size for i in view.index if not i.squeeze)
  if promise is None and whole_tiles(view.index, tile, multiple):
    # (proven whole tiles: what ml.dot and ml.copy take; a register load or store takes them in
    # windows of a warpgroup's 64 tensor-core rows, not transposed: register_tile_window)
    x = view.ref.name
    return (f"register reads and writes of {x} take windows of {hw.MMA_M} rows (a warpgroup's tensor-core rows)"
            f" by 128 bytes of columns, not transposed, at static starts or run-time ones proven multiples of"
            f" them (ml.ds(t * {hw.MMA_M}, {hw.MMA_M}) in a loop): read or write {hw.MMA_M}-row windows, or {x}"
            f" whole, {x}[...], and slice or join the value in registers")
  if promise is None:
    return None
  tiles = " by ".join(f"{t} {w}" for t, w in zip(tile, ("rows", "columns")))
  return (f"{view.ref.name}'s tiles for the tensor cores are {tiles}, and this window's run-time start is not"
          f" provably a multiple of them: if it always is one, say so, {promise} (checked in interpret mode);"
          f" else step it with a loop of ml.static_range (for k in ml.static_range(n): ..., unrolled while"
          f" compiling, so each trip's window is a static window of whole tiles), or copy each step's tile into a"
          f" buffer of its own, {view.ref.name}_k = ml.smem({shape}), and pass that")


def _check_tiled_views(kernel, defs) -> None:
  """Views of tiled buffers pick whole leading slices (pipeline stages); TMA copies and ml.dot
  may also take windows of whole tiles (several pages filling one operand, a warpgroup's rows,
  a K sub-step of a stage), static or at run-time starts proven multiples of the tile."""
  from .absint import known_multiple, loop_counters
  from .ops.mma import Dot
  loops = loop_counters(kernel.body)

  def multiple(start):
    return known_multiple(start, defs, loops)
  uses: dict = {}
  dot_read = set()           # the buffers ml.dot reads (tiled as its operands)
  for o in ir.walk(kernel.body):
    for v in o.operands():
      kind = "copy" if isinstance(o, Copy) and v in (o.src, o.dst) else "dot" if (
          isinstance(o, Dot) and v in (o.a, o.b)) else None
      uses.setdefault(v.id, []).append(kind)
    if isinstance(o, Dot):
      for v in (o.a, o.b):
        while isinstance(defs.get(v.id), View):
          v = defs[v.id].ref
        dot_read.add(v.id)
  for o in ir.walk(kernel.body):
    if isinstance(o, View) and o.ref.id in kernel.smem_layouts:
      full = o.ref.type.shape
      inner = o.index[-2:]
      if any(i.squeeze or i.size != n or i.start != 0 for i, n in zip(inner, full[-2:])):
        kinds = set(uses.get(o.result.id, [])) or {"copy"}
        # (a run-time start proven a multiple of the tile is a whole number of tiles in: the window
        # is as static a window of whole tiles, at an offset the descriptor or TMA copy computes)
        whole = whole_tiles(o.index, kernel.smem_layouts[o.ref.id].tile, multiple)
        if whole and kinds <= {"copy", "dot"} and not (o.transpose and "copy" in kinds):
          continue
        if kinds == {None} and o.ref.id in dot_read and register_tile_window(o, kernel.smem_layouts[o.ref.id].tile,
                                                                              multiple):
          continue
        if o.ref.id in dot_read:
          tile = kernel.smem_layouts[o.ref.id].tile
          raise E.LayoutError(
              f"{o.result.name or 'this view'} slices the rows or columns of {o.ref.name}, which is tiled"
              f" for the tensor cores", o.loc,
              hint=_stored_pieces_hint(kernel, defs, o) or inside_tile_hint(kernel, defs, o, tile, loops) or
              _run_time_start_hint(o, tile, multiple, defs) or
              "index only the leading (stage) dimensions of a buffer ml.dot reads, or take windows of whole"
              " tiles for ml.dot or ml.copy (starting and ending at multiples of 8 rows and of 128 bytes of"
              " columns)")
        stored = _stored_value(kernel, o.ref)
        why = ("an ml.dot result (a value in the WGMMA layout) is stored into it" if stored is not None
               else "its values are read in the WGMMA layout of ml.dot results")
        raise E.LayoutError(
            f"{o.result.name or 'this view'} slices the rows or columns of {o.ref.name}, which is tiled"
            f" for the tensor cores (8-row, 128-byte tiles) because {why}", o.loc,
            hint=_result_window_hint(kernel, o, uses.get(o.result.id, []), stored, multiple, defs))
