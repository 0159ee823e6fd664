"""The hints and role names of frontend/layouts.py's messages: what a user writes instead when a
register layout cannot hold what the kernel asks (narrow rows, column slices, broadcasts into
3-D and 4-D tensors), in the user's names."""
from __future__ import annotations

import ast
import math

from . import hw
from . import ir
from .dtypes import DType
from .types import Layout, RefType, Space, TensorType, resolve
from .loc import call_at
from .ops.memory import View, root_in
from .pad_reductions import _padding_note, identity, loaded_other


def column_slice_hint(name, store_to=None, one_view=False) -> str | None:
  """For a too-small `t[:, a:b]` (the first k weights of a top-k): store t whole, masked. Where
  the slice is stored straight into a 2-D ref named `store_to`, the hint rewrites that store
  (`one_view`: the ref is one view of a 2-D array, whose index can take the column window)."""
  import re
  m = re.fullmatch(r"(.+)\[:, *([^:\[\]]*?) *: *([^:\[\]]+?) *\]", name or "")
  if m is None:
    return None
  t, a, b = m.group(1), m.group(2) or "0", m.group(3)
  cols = f"ml.arange({t}.shape[1])[None, :]"
  cond = f"{cols} < {b}" if a == "0" else f"({cols} >= {a}) & ({cols} < {b})"
  cols = f"ml.ds(0, {t}.shape[1])"
  out = (_with_columns(store_to, cols) if one_view else f"{store_to}.at[:, {cols}]") if store_to else \
      f"out.at[rows, {cols}]"
  last = f"{store_to.split('.at[')[0]}'s" if store_to else "out's"
  return (f"store {t} whole with a mask instead of slicing it: {out}.store({t},"
          f" mask={cond}) (the window may run past {last} last column: masked elements are never written)")


def _with_columns(ref: str, cols: str) -> str:
  """`ref` (the source text of one view of a 2-D array) with its columns windowed by `cols`:
  `out.at[r]` and `out.at[r, :]` become `out.at[r, cols]`, anything else `ref.at[:, cols]`."""
  if ref.endswith("]") and ref.count(".at[") == 1:
    head, index = ref[:ref.rindex(".at[")], ref[ref.rindex(".at[") + 4:-1]
    depth, parts, start = 0, [], 0
    for k, ch in enumerate(index):
      depth += ch in "([{"
      depth -= ch in ")]}"
      if ch == "," and depth == 0:
        parts.append(index[start:k].strip())
        start = k + 1
    parts.append(index[start:].strip())
    if depth == 0 and "..." not in parts and (len(parts) == 1 or len(parts) == 2 and parts[1] == ":"):
      return f"{head}.at[{parts[0]}, {cols}]"
  return f"{ref}.at[:, {cols}]"


def loaded_dtype(defs, v, tiles=()):
  """The dtype in memory of the data `v` was read from (through conversions), else of the first
  tile among `tiles` that a load reads (not a mask), else the narrower integer type `v` converts
  (an 8-bit max computed in 32 bits: the uint8 tile the user reduces); None where none is found."""
  from .ops.elementwise import Cast
  o, passed = defs.get(v.id), []
  while isinstance(o, Cast) and not o.bitcast:
    passed.append(o.x.type.dtype)
    o = defs.get(o.x.id)
  if type(o).__name__ in ("Load", "MaskedLoad"):
    return o.results[0].type.dtype
  own = v.type.dtype
  narrow = [d for d in passed if isinstance(d, DType) and isinstance(own, DType) and not d.is_float
            and d != DType.bool_ and not own.is_float and d.itemsize < own.itemsize]
  return next((t.type.dtype for t in tiles if type(defs.get(t.id)).__name__ in ("Load", "MaskedLoad")
               and t.type.dtype != DType.bool_), None) or min(narrow, key=lambda d: d.itemsize, default=None)


def _by_coordinates(shape, ref, parts, kept) -> str:
  """For an (r, c) window of 2 to 4 columns read from GMEM (a point set's xyz, no multiple of 128 elements): its
  columns one at a time, which the kernel's pairwise (r, n, c) broadcasts need no tile of (probe 57g); else ''."""
  r, c = shape
  if not 2 <= c <= 4 or len(kept) != 2:
    return ""
  rows = parts[kept[0]][0]
  at = ", ".join((f"ml.ds({rows}, {r})" if rows != "0" else f"0:{r}") if k == kept[0] else "j" if k == kept[1]
                 else p for k, (p, _, _) in enumerate(parts))
  return (f"take it a column at a time, {ref}[{at}] for j in range({c}) (a ({r},) vector each: pairwise distances"
          f" are sum((a[:, j][:, None] - b[:, j][None, :]) ** 2 for j in range({c})), with no (m, n, {c}) tile), or ")


def small_tile_hint(shape, ref=None, window=None, reduced=((), None)) -> str:
  """A tile too small for the registers: for a 2-D one read from the ref named `ref`, the masked
  window that holds it (rows a multiple of 4 and columns of 32, which a 2-D mask's row and column
  vectors need), at the window's own starts (`window`, read_window's); an SMEM buffer, whose
  windows cannot run past its end, is allocated that large instead."""
  if len(shape) == 2 and ref:
    r, c = shape
    R, C = -(-r // 4) * 4, max(32, -(-c // 32) * 32)
    mask = " & ".join(m for m, pad in ((f"(ml.arange({R})[:, None] < {r})", R != r),
                                       (f"(ml.arange({C})[None, :] < {c})", C != c)) if pad)
    mask = mask[1:-1] if " & " not in mask else mask
    tail = " and the same mask on its store (a 2-D mask needs rows a multiple of 4 and columns of 32)"
    parts = window[2] if window is not None else [("0", r, False), ("0", c, False)]
    kept = [k for k, (_, _, squeeze) in enumerate(parts) if not squeeze]
    # (a pipelined loop's buffer is read whole, a stage at a time)
    whole = all(s == "0" for s, _, _ in parts) and tuple(window[3]) == (r, c) if window else False
    if len(kept) != 2:
      parts, kept = [("0", r, False), ("0", c, False)], [0, 1]
    new = dict(zip(kept, (R, C)))
    at = ", ".join(s if k not in new else f"ml.ds({s}, {new[k]})" for k, (s, _, _) in enumerate(parts))
    kinds, dtype = reduced
    other = loaded_other(kinds, dtype)
    load = f"{ref}.at[{at}].load(mask={mask}, other={other})"
    tail = _padding_note(kinds, dtype, mask) + tail
    if window is not None and window[1]:         # SMEM: a window cannot run past the buffer
      if whole:
        return (f"work on a larger tile: allocate {ref} as ml.smem(({R}, {C}), ...) (an SMEM window cannot run past"
                f" its buffer), fill it (by a TMA copy of a ({R}, {C}) window, which reads zeros past the array's"
                f" end) and read it masked to this one, {ref}.load(mask={mask}, other=0) (the elements the mask"
                f" keeps off need not be written);{tail}")
      big = [max(n, int(s) + new[k]) if k in new and s.lstrip("-").isdigit() else n
             for k, ((s, _, _), n) in enumerate(zip(parts, window[3]))]
      alloc = (f"allocate {ref} as ml.smem({tuple(big)}, ...)" if len(big) == len(parts) and big != list(window[3])
               else f"allocating {ref} large enough to hold that window")
      return (f"work on a larger tile, masked to this one: {load}, {alloc} (an SMEM window cannot run past its"
              f" buffer; the elements the mask keeps off need not be written);{tail}")
    return _by_coordinates(shape, ref, parts, kept) + f"work on a larger tile, masked to this one: {load}{tail}"
  if len(shape) == 3 and ref and reduced[0] and not (window is not None and window[1]):
    from .tile_pad_hints import padded_3d_hint
    return padded_3d_hint(shape, ref, window, reduced)
  if len(shape) > 2 and ref and shape[-1] % 8 == 0:    # (3, 3, c) weights of a depthwise conv, read whole
    lead = ", ".join("ab"[k] if k < 2 else f"i{k}" for k in range(len(shape) - 1))
    return (f"read {ref} a vector at a time where it is used, {ref}.at[{lead}][...] (a ({shape[-1]},) vector each;"
            f" a 1-D vector needs a multiple of 8 elements), with {lead} from ml.static_range loops")
  if len(shape) == 2 and all(shape) and math.prod(shape) > hw.WARPGROUP:   # a stencil's halo tile, (66, 72)
    r, c = shape
    rows = next(n for n in range(r, r + hw.WARPGROUP + 1) if n * c % hw.WARPGROUP == 0)
    cols = next(n for n in range(c, c + hw.WARPGROUP + 1) if r * n % hw.WARPGROUP == 0)
    return (f"make the tile ({rows}, {c}) or ({r}, {cols}) (allocate an SMEM buffer that large and leave its"
            f" extra rows or columns unused)")
  return ("work on tiles of 128 elements or more, e.g. (128,) or (4, 32); a 1-D vector may be shorter if its"
          " length is a multiple of 8")


def register_window_hint(loc) -> str:
  """The hint for a static window of a register tensor (`v[:, 1:]` of a (16, 128) tile) that is not
  itself a register tensor: ml.concatenate reads such windows of whole tensors as rolls, so math on
  the window moves to the whole tensor (its text from the error's line where it can be read)."""
  import re
  text = loc.source_line[loc.col_offset:loc.end_col_offset] if loc and loc.end_lineno == loc.lineno else ""
  m = re.fullmatch(r"([A-Za-z_]\w*)(\[.*\])", text or "")
  name, index = m.groups() if m else ("v", "[:, 1:]")
  return (f"a window of a register tensor must itself hold a multiple of 128 elements, except as a part of"
          f" ml.concatenate read straight from a tensor of the concatenation's shape (as that tensor rolled):"
          f" compute on the whole of {name} first and take the window of the result there (for -{name}{index}:"
          f" w = -{name}, then w{index} in the ml.concatenate list); or keep whole tensors and select by index,"
          f" ml.where(ml.arange(n)[None, :] < k, a, b)")


def read_window(defs, load):
  """(root name, whether in SMEM, [(start text, size, squeeze)] per root dimension, root shape) of
  the window the register load `load` reads (a root or one view of it), starts in the user's words;
  None where it cannot be told."""
  from .ops.index_hints import index_texts
  if type(load).__name__ not in ("Load", "MaskedLoad"):
    return None
  view = defs.get(load.ref.id)
  root = view.ref if isinstance(view, View) else load.ref
  if isinstance(defs.get(root.id), View) or not isinstance(root.type, RefType) or not (root.name or "").isidentifier():
    return None
  shape = tuple(root.type.shape)
  if isinstance(view, View) and (view.transpose or len(view.index) != len(shape)):
    return None
  index = view.index if isinstance(view, View) else [ir.Idx(0, n) for n in shape]
  loc = load.loc
  text = loc.source_line[loc.col_offset:loc.end_col_offset] if loc.end_lineno == loc.lineno else ""
  try:
    node = ast.parse(text.strip(), mode="eval").body if text else None
  except SyntaxError:
    node = None
  if isinstance(node, ast.Subscript) and isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis:
    node = node.value                                   # x.at[...][...]
  elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "load":
    node = node.func.value                              # x.at[...].load(mask=...)
  texts = index_texts(ast.unparse(node), root.name, len(shape)) if node is not None else None
  user = _user_starts(node, root.name, len(shape))
  parts = []
  for k, i in enumerate(index):
    s = (user[k] if user and user[k] is not None else i.start if isinstance(i.start, int)
         else texts[k] if texts else i.start.name)
    if not i.squeeze and str(s).isidentifier() and (user and user[k] == s or texts and texts[k] == s):
      # a window bound to a name (`r = ml.ds(i * 8, 8)`, then x.at[r, :]): the name is the window, not its start
      s = i.start if isinstance(i.start, int) else i.start.name
    if not isinstance(s, int) and not (s or "").strip():
      return None
    parts.append((str(s), i.size, i.squeeze))
  lead = len(shape) - len(load.results[0].type.shape)
  if isinstance(node, ast.Name) and lead > 0:     # buf[...] of a pipelined buffer: its stages are no index
    parts, shape = parts[lead:], shape[lead:]     # of the user's
  return root.name, root.type.space == Space.SMEM, parts, shape


def _user_starts(node, root_name, rank):
  """Per dimension of `x.at[a, b]` (the AST `node`), the user's text of an int index or of an
  `ml.ds` start (an `ml.static_range` counter is `i`, not the 0 of the first trip); None for a
  slice and for dimensions left out; None in all where `node` is not such an index of `x`."""
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"
          and ast.unparse(node.value.value) == root_name):
    return None
  elts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  if len(elts) > rank or any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elts):
    return None
  ds = lambda e: (isinstance(e, ast.Call) and isinstance(e.func, (ast.Attribute, ast.Name)) and len(e.args) >= 2
                  and (e.func.attr if isinstance(e.func, ast.Attribute) else e.func.id) == "ds")
  out = [None if isinstance(e, ast.Slice) else ast.unparse(e.args[0] if ds(e) else e) for e in elts]
  return out + [None] * (rank - len(out))


def narrow_rows_hint(bad, dtypes=(), reduced=True, loaded=None, window=None, full=False, also=()) -> str:
  """Rows narrower than a warp, or not a multiple of one (48 columns): mask columns of the full rows
  (a top-k of a sorted row); where the rows are that narrow in memory (8 experts of a router), read
  them 32 wide (64 for 48), masked. The
  `other` of the masked read fits the data's dtype (`dtypes`: of the tiles, masks among them), and
  names what a reduction ignores only where the tile is `reduced` (in `loaded`, the dtype read from
  memory, where the tile is a conversion of it: an 8-bit max computed in 32 bits)."""
  n = bad.type.shape[-1]
  wide = -(-n // hw.WARP) * hw.WARP      # the columns to read: the next multiple of a warp's lanes
  own = loaded or bad.type.dtype   # the data's dtype in memory, or the tile's; else (a mask) any, floats first
  data = own if isinstance(own, DType) and own != DType.bool_ else next(
      (d for d in sorted((d for d in dtypes if isinstance(d, DType) and d != DType.bool_),
                         key=lambda d: (not d.is_float, str(d)))), None)
  if not reduced:
    other, rest = "other=0)", ""
  else:    # the reduction's own identity first (`reduced` its ReduceKind), then the others'
    from .ops.shape import ReduceKind
    first = reduced if isinstance(reduced, ReduceKind) else ReduceKind.MAX
    kinds = [first, *(k for k in (ReduceKind.MAX, ReduceKind.MIN, ReduceKind.SUM) if k != first)]
    d = data if data is not None else DType.f32
    ids = [f"{identity(k, d)}{')' if k == first else ''} for a {k.value}" for k in kinds]
    count = n * math.prod(bad.type.shape[:-1]) if full else n      # (a full reduction counts every row's)
    keep = f"ml.arange({wide})[None, :] < {n}"
    mean = "" if not d.is_float else (
        f"; for a mean, that sum divided by {count}, not ml.mean of the padded tile; for a variance, the squared"
        f" deviations where the mask keeps them, ml.where({keep}, (t - mean) ** 2, 0.0), summed and divided by"
        f" {count}, not ml.var")
    other, rest = f"other={ids[0]}", f" ({', '.join(ids[1:])}{mean})"
    others = [k for k in dict.fromkeys(also) if k != first]   # other kinds reducing the same tile: the padding
    if others:                                                 # is one identity, so they select their own
      t = bad.name if (bad.name or "").isidentifier() else "t"
      rest += (f"; {t} is also reduced by " + " and ".join(f"a {k.value}" for k in others) + ", which must not"
               " count the padding either: reduce " + " and ".join(f"ml.{k.value}(ml.where({keep}, {t},"
               f" {identity(k, d)}), ...)" for k in others) + " there")
  at = window(cols=f"ml.ds({window.starts[1]}, {wide})") if window else f"x.at[rows, ml.ds(c0, {wide})]"
  first = "" if window else ", c0"
  return ("keep the full rows and mask the columns you do not need: for the first k columns of a tile t,"
          " ml.where(ml.arange(t.shape[1])[None, :] < k, t, 0) (reduce or broadcast that), and store only those"
          " columns, with a mask: out.at[rows, ml.ds(0, t.shape[1])].store(t, mask=ml.arange(t.shape[1])[None, :]"
          f" < k) (the window may run past out's last column: masked elements are never written; or t[:, :k]"
          f" where that keeps a multiple of 128 elements); a tile only {n} columns wide where you load it"
          f" (rows that narrow, or a window of {n} columns): read {wide} columns from its first one{first},"
          f" the rest masked {'to what the reduction ignores' if reduced else 'off'}, {at}"
          f".load(mask=ml.arange({wide})[None, :] < {n}, {other}{rest}, and store {n} columns"
          f" back with the same column mask")


def transposed_hint(reduce, src) -> str | None:
  """A reduction of `src.T` along an axis: the same reduction of `src` along the other axis needs
  no transpose (and no row-wise layout of the transposed tile)."""
  rows, cols = src.type.shape
  if len(reduce.axes) != 1 or cols % hw.WARP or rows % hw.WARPS_PER_WARPGROUP and cols % hw.WARPGROUP:
    return None                   # (src itself is too narrow a tile)
  kind, axis, name = reduce.kind.value, reduce.axes[0], src.name or "t"
  return (f"reduce the tile before transposing it: ml.{kind}({name}, axis={1 - axis}) is"
          f" ml.{kind}({name}.T, axis={axis}), with no transpose")


def role(lay: Layout) -> str:
  return {(1,): "a row statistic (one value per row)", (0,): "a column vector (one value per column)"}.get(
      lay.drop, "a vector laid out for another tile (an axis of it taken or inserted)")


def broadcast_loops_hint(text, src, dst, loc=None, met=()) -> str:
  """Loops over a broadcast's leading axes, each trip 2-D: `for i in ml.static_range(2): for j in
  ml.static_range(4):` with every array indexed `.at[i, j]` (a size-1 axis of the source by 0). `loc`:
  the broadcast's, whose ml.broadcast_to call names its source as the user wrote it. Where the result is too
  small for a register tensor and meets a tile of a shape it broadcasts to (`met`: the shapes it meets; a mask
  `ml.arange(8)[None, :, None] < lens[:, None, None]` of (2, 8, 1) against a (2, 8, 32) tile), the broadcast
  straight to that tile's shape."""
  big = next((tuple(s) for s in met if len(s) == len(dst) and math.prod(dst) % hw.WARPGROUP and not math.prod(s) %
              hw.WARPGROUP and all(a in (1, b) for a, b in zip(dst, s)) and math.prod(s) > math.prod(dst)), None)
  if big is not None:
    name = _with_axes(loc, text) or f"{text or 'x'} (of shape {tuple(src)})"
    return (f"broadcast the {tuple(src)} operand straight to the {big} tile the result meets, ml.broadcast_to({name},"
            f" {big}), and compute at that shape: the {tuple(dst)} result holds {math.prod(dst)} elements, too few for"
            f" a register tensor (a multiple of {hw.WARPGROUP})")
  lead = len(dst) - 2
  names = "ijklm"[:lead]
  loops = " ".join(f"for {n} in ml.static_range({dst[k]}):" for k, n in enumerate(names))
  pad = len(dst) - len(src)
  full = (1,) * pad + tuple(src)
  at = ", ".join("0" if full[k] == 1 else n for k, n in enumerate(names))
  lone = all(full[k] == 1 for k in range(lead))
  if text and text.endswith("[...]") and text[:-5].isidentifier() and pad == 0:
    source = f"{text[:-5]}.at[{at}][...]"
  else:
    source = f"{text or 'the source'} with its leading axes indexed ({at})"
  ones = [k for k in range(len(dst)) if full[k] == 1 and dst[k] != 1]
  repeat = ""
  if len(ones) == 1 and 1 <= ones[0] and dst[ones[0]] <= 8 and len(src) == len(dst) and not math.prod(src) % hw.WARPGROUP:
    # a middle or last size-1 axis stretched a few times (a nearest upsampling's (w, 1, c) to (w, 2, c)): a
    # concatenation of copies, through SMEM, which 3-D tensors take
    call = call_at(loc) if loc is not None else None
    arg = (ast.get_source_segment(loc.source_line[loc.col_offset:loc.end_col_offset], call.args[0])
           if call is not None and call.args and ast.unparse(call.func).endswith("broadcast_to") else None)
    t = arg or "t"
    repeat = (f"repeat the {tuple(src)} tensor{'' if arg else ' t'} along axis {ones[0]} instead:"
              f" ml.concatenate([{t}] * {dst[ones[0]]}, axis={ones[0]}) (through SMEM; reshaped, that is"
              f" jnp.repeat's order); or ")
  return (repeat + f"take the leading axes in ml.static_range loops, 2-D at a time: {loops} each array .at[{', '.join(names)}]"
          f" (shape {tuple(dst[lead:])}), and {source}" + (" (the same for every trip)" if lone else "")
          + f"; or reshape the arrays to 2-D outside the kernel (x.reshape(-1, {dst[-1]}), free in XLA)")


def _with_axes(loc, name):
  """The user's `name[:, None, None]` in the expression at `loc`, else None."""
  seg = loc.source_line[loc.col_offset:loc.end_col_offset] if loc is not None and name and getattr(
      loc, "source_line", None) else ""
  try:
    tree = ast.parse(seg.strip(), mode="eval")
  except SyntaxError:
    return None
  for n in ast.walk(tree):
    if isinstance(n, ast.Subscript) and ast.unparse(n.value) == name and any(
        isinstance(c, ast.Constant) and c.value is None for c in ast.walk(n.slice)):
      return ast.unparse(n)
  return None


def smem_vector_hint(o, n, up, defs=None, name=None, dest=None):
  """A short vector read from or written to an SMEM buffer: windows of SMEM cannot run past its
  end, so the buffer itself takes the padding. `name`: the short vector's own text (`s[:4]`, whose
  tensor `s` the hint slices), `dest`: the 1-D ref it is stored into whole, if any."""
  refs = [r for r, _ in ir.traits_of(o).effects(o) if r is not None] if o is not None else []
  smem = next((r for r in refs if isinstance(r.type, RefType) and r.type.space == Space.SMEM), None)
  if smem is None:
    return None
  root = root_in(defs, smem) if defs is not None else smem
  if (root.name or "").endswith(" scratch") and len(root.type.shape) == 2 and root.type.shape[-1] == n:
    # a whole row t[j] of a tile n columns wide: no slice of it is longer, so widen the tile
    return (f"read the tile {up} columns wide, the extra ones masked off (t = x.at[rows, ml.ds(0, {up})]"
            f".load(mask=ml.arange({up})[None, :] < {n}, other=0), a masked window may run past the array's"
            f" end), take its row t[j] ({up} elements) and store it with mask=ml.arange({up}) < {n}")
  if root.name == "concatenate scratch":      # ml.concatenate([a[None], b[None], c[None]]) of scalars (statistics)
    out = dest or "out"
    return (f"no register vector holds {n} elements (a 1-D vector holds a multiple of 8): select the scalars into"
            f" {up} lanes by index, k = ml.arange({up}); v = ml.where(k == 0, s0, ml.where(k == 1, s1, ...,"
            f" 0.0)), and store it masked, {out}.at[ml.ds(0, {up})].store(v, mask=k < {n}), or add it at its"
            f" positions, ml.atomic_add({out}.at[k], v) (the updates past {out}'s end are dropped); or write each"
            f" scalar by itself, ml.atomic_add({out}.at[0], s0)")
  if (root.name or "").endswith(" scratch"):     # the compiler's, for v[a:b] of a register tensor
    view = defs.get(smem.id) if defs is not None else None
    a = view.index[-1].start if isinstance(view, View) and not view.index[-1].squeeze else 0
    a, length = (a if isinstance(a, int) else 0), root.type.shape[-1]
    import re
    m = re.fullmatch(r"(.+)\[ *-?\w* *: *-?\w* *\]", name or "")
    t = m.group(1) if m else "v"                 # the tensor sliced, as the user named it
    if a + up > length:           # (v[1:] of 264 elements: no 264 of them start at 1)
      return (f"slice {up} elements from {a}: {t}[{a}:{a + up}] needs {t} to hold {a + up}, so make it that long"
              f" where it is made (a masked load of a longer window, .load(mask=..., other=0)), or read the"
              f" {up} elements from memory at the shifted start (x.at[ml.ds(start + {a}, {up})].load(mask="
              f"ml.arange({up}) < {n}, other=0)) instead of slicing registers")
    out = f"{dest}.at[ml.ds(0, {up})]" if dest else f"out.at[..., ml.ds(0, {up})]"
    past = f"the end of {dest.split('.at[')[0]}" if dest else "the output's end"
    return (f"slice {up} elements instead (a multiple of 8, e.g. {t}[{a or ''}:{a + up}]) and store them with a"
            f" mask, {out}.store({t}[{a or ''}:{a + up}], mask=ml.arange({up}) < {n}) (a window past {past} is"
            f" fine: masked elements are not written)")
  view = defs.get(smem.id) if defs is not None else None
  if isinstance(view, View) and len(root.type.shape) == 1 and not view.index[0].squeeze:
    # a short window of a longer buffer (a tree reduction's last steps, buf.at[ml.ds(0, s)] with
    # s = 4): read and write a window of `up` elements of the buffer itself, masked to the `n`
    start, buf = view.index[0].start, root.name or "buf"
    if isinstance(start, int):
      at = f"{buf}.at[ml.ds({start}, {up})]"
      grow = (f"allocate {buf} with {start + up} elements (room for {up} from the window's start), then "
              if start + up > root.type.shape[0] else "")
      return (f"{grow}read {up} elements of {buf} from the window's start, {at}.load(mask=ml.arange({up}) <"
              f" {n}, other=0) (the ones the mask keeps off are read and dropped), and write back only your"
              f" {n}: {at}.store(v, mask=ml.arange({up}) < {n}); or keep the value in registers (ml.sum of"
              f" the vector) instead of going through SMEM")
  name = smem.name or "buf"
  return (f"an SMEM window cannot run past its buffer: allocate {name} with {up} elements, fill it"
          f" whole ({name}[...] = ml.zeros(({up},), ...)), put your {n} in {name}.at[ml.ds(0, {n})] and read"
          f" all {up} ({name}[...]; store them with mask=ml.arange({up}) < {n}); or keep the value in"
          f" registers instead of going through SMEM")


def reduction_of(defs, bad, axis=None):
  """A reduction of the tile `bad`, or of a value computed from it elementwise (`ml.mean((v - mu) *
  (v - mu))`), elsewhere in the kernel; None if there is none. A narrow tile that only failed where it
  is broadcast (`v * w[:, None]`) is then padded with what that reduction ignores, not with zeros."""
  from .ops.elementwise import Binary, Cast, Unary, Where
  from .ops.shape import Reduce
  ops = {id(o): o for o in defs.values()}.values()
  derived, grew = {bad.id}, True
  while grew:
    grew = False
    for o in ops:
      if isinstance(o, (Binary, Unary, Cast, Where)) and o.results and o.results[0].id not in derived and any(
          getattr(x, "id", None) in derived for x in vars(o).values() if isinstance(x, ir.Value)):
        derived.add(o.results[0].id)
        grew = True
  return next((o for o in ops if isinstance(o, Reduce) and o.x.id in derived
               and (axis is None or axis % len(o.x.type.shape) in o.axes)), None)


def reductions_along(defs, bad, axis):
  """The reductions of the tile `bad` itself (or of a conversion of it) that take its `axis`."""
  from .ops.elementwise import Cast
  from .ops.shape import Reduce
  ops = list({id(o): o for o in defs.values()}.values())
  same = {bad.id} | {o.results[0].id for o in ops if isinstance(o, Cast) and not o.bitcast and o.x.id == bad.id}
  return [o for o in ops if isinstance(o, Reduce) and o.x.id in same and axis % len(o.x.type.shape) in o.axes]


def row_wise_hint(bad, dtypes, red, defs, tiles) -> str:
  """For a tile `bad` reduced (by `red`, a Reduce, or None: broadcast) along its rows or columns
  whose shape has no row-wise layout: pad its columns, or its rows, with a mask (of the window it
  was read from, in the user's words, where one unmasked GMEM read made it)."""
  if len(bad.type.shape) != 2:
    return "use tiles like (8, 256) or (1, 1024); pad the last dimension to a multiple of 32"
  loaded = loaded_dtype(defs, bad, tiles)
  window = _plain_window(defs, bad)
  if bad.type.shape[-1] % hw.WARP:
    n = bad.type.shape[-1]
    if window is None and _arange_columns(defs, bad, n):
      wide = -(-n // hw.WARP) * hw.WARP
      return (f"the tile takes its {n} columns from ml.arange({n}): build it {wide} wide with ml.arange({wide}),"
              f" keeping the extra columns out of the result (a one-hot ids[:, None] == ml.arange({wide})[None, :]"
              f" of ids below {n} is False there, so its sums and cumsums are unchanged; else mask them,"
              f" ml.where(ml.arange({wide})[None, :] < {n}, t, 0)), and store {n} columns with"
              f" mask=ml.arange({wide})[None, :] < {n}")
    red = red if red is not None else reduction_of(defs, bad, -1)   # (a broadcast failed: a reduction elsewhere
    full = red is not None and len(red.axes) == len(bad.type.shape)  # pads the same way, its mean too)
    also = [o.kind for o in reductions_along(defs, bad, -1)]
    rest = narrow_rows_hint(bad, dtypes, red is not None and red.kind, loaded, window, full, also)
    r = bad.type.shape[0]
    if r % hw.WARP == 0 and (n % hw.WARPS_PER_WARPGROUP == 0 or r % hw.WARPGROUP == 0):
      # (a selective scan's (channels, d_state) state, d_state 16: the registers hold (16, channels))
      axis = f", and reduce along axis {1 - red.axes[0]} instead" if red is not None and len(red.axes) == 1 else ""
      return (f"hold the tile the other way round, ({n}, {r}), which the registers take as it is: swap the"
              f" [:, None] and [None, :] of the vectors it is built from (a tile read from an array: read"
              f" it from the array transposed outside the kernel, or transpose it in the kernel,"
              f" {_t(bad.name) + '.T' if bad.name else 'with .T'}, through an SMEM scratch the compiler plans,"
              f" and the result back with .T){axis};"
              f" or {rest}")
    return rest
  # padding rows count only where the reduction runs down the columns (axis 0, or everything)
  down = red if red is not None and 0 in red.axes else reduction_of(defs, bad, 0)   # (also one elsewhere)
  other = identity(down.kind, loaded or bad.type.dtype) if down is not None else "0.0"
  whole = down is not None and len(down.axes) == 2 and resolve(bad.type.dtype).is_float
  return rows_hint(bad.type.shape, other, window, math.prod(bad.type.shape) if whole else None)


def _t(name) -> str:
  """`name` as the operand of a `.T` (parenthesised unless it is a name, a call or a subscript)."""
  import ast
  try:
    node = ast.parse(name, mode="eval").body
  except SyntaxError:
    return f"({name})"
  return name if isinstance(node, (ast.Name, ast.Call, ast.Subscript, ast.Attribute)) else f"({name})"


def _arange_columns(defs, v, n) -> bool:
  """Whether the n columns of the tile `v` come from an ml.arange(n) alone (an index grid, a one-hot
  of ids against the experts), through register ops: operands that supply the columns (whose last
  axis is n) are followed; a vector broadcast along them (ids[:, None]) is not. Columns read from a
  ref (a loaded tile, sorted or not) or made in a loop are not an index grid's."""
  todo, seen, found = [v], set(), False
  while todo:
    o = defs.get(todo.pop().id)
    if o is None or id(o) in seen:
      continue
    seen.add(id(o))
    if type(o).__name__ == "Arange" and o.results[0].type.shape[o.dim] == n:
      found = True
      continue
    if o.regions or isinstance(getattr(o, "ref", None), ir.Value):
      return False                              # read from a ref, or made in a loop
    todo += [x for x in o.operands() if isinstance(x, ir.Value) and isinstance(x.type, TensorType)
             and x.type.shape and x.type.shape[-1] == n]
  return found


def _plain_window(defs, v):
  """The window text maker of the unmasked 2-D GMEM read `v` was converted from: a function of
  (row index text or None, column index text or None) giving `x.at[...]` with those dimensions
  replaced (None: as read); None where `v` is no such read."""
  from .ops.elementwise import Cast
  o = defs.get(v.id)
  while isinstance(o, Cast) and not o.bitcast:
    o = defs.get(o.x.id)
  w = read_window(defs, o) if type(o).__name__ == "Load" else None
  if w is None or w[1]:
    return None
  root, _, parts, shape = w
  kept = [k for k, (_, _, squeeze) in enumerate(parts) if not squeeze]
  if len(kept) != 2:
    return None

  def text(rows=None, cols=None):
    at = []
    for k, (start, size, squeeze) in enumerate(parts):
      new = {kept[0]: rows, kept[1]: cols}.get(k)
      at.append(start if squeeze else new if new is not None else
                ":" if start == "0" and size == shape[k] else f"ml.ds({start}, {size})")
    return f"{root}.at[{', '.join(at)}]"
  text.starts = (parts[kept[0]][0], parts[kept[1]][0])
  return text


def rows_hint(shape, other="0.0", window=None, count=None) -> str:
  """Columns a multiple of a warp's lanes but rows not of the warps: pad the rows with a mask
  (`other`, what the reduction down the columns ignores), of the window read (`window`, a
  _plain_window) where known."""
  r = shape[0]
  up = -(-r // hw.WARPS_PER_WARPGROUP) * hw.WARPS_PER_WARPGROUP
  at = window(f"ml.ds({window.starts[0]}, {up})") if window else f"x.at[ml.ds(r0, {up}), :]"
  return (f"make the rows a multiple of {hw.WARPS_PER_WARPGROUP}: read {up} rows with a masked window,"
          f" {at}.load(mask=(ml.arange({up}) < {r})[:, None], other={other}), and store the"
          f" result with the same mask" + (f" (a mean of the whole tile is its sum divided by {count}, not ml.mean"
          f" of the padded tile, and a variance sums the squared deviations where the mask keeps them)" if count else "") + f"; or use tiles whose columns are a multiple of {hw.WARPGROUP}, with"
          f" which any number of rows works")


def flat_gather_error(r, k, scatter=False) -> tuple[str, str]:
  """(message, hint) for a gather from a 1-D table by an (r, k) index tile the user broadcast
  from a column (rows[:, None] * n + ids, or a[:, None] + ml.arange(k)[None, :] for chunks of CSR rows):
  that broadcast needs the columns. `scatter`: an atomic scatter into a 1-D output, in its words."""
  wide = -(-k // hw.WARP) * hw.WARP
  if scatter:
    widen = (f"; or widen the tiles to {wide} columns (cols = ml.arange({wide})[None, :]): load the values with"
             f" mask=cols < {k}, other=0, and send the extra columns past the output's end, where the scatter"
             f" drops them: out.at[ml.where(cols < {k}, idx, out.shape[0])]") if k % hw.WARP else ""
    return (f"the indices of this scatter, a ({r}, {k}) tile, are broadcast along their rows (a column"
            f" stretched to {k} columns): that needs columns a multiple of {hw.WARP} (one per lane of a warp), and"
            f" rows a multiple of {hw.WARPS_PER_WARPGROUP} unless the columns are a multiple of {hw.WARPGROUP}",
            f"scatter each column by itself, 1-D (ml.atomic_add(out.at[rows * n + j], v[:, j]) for j in"
            f" ml.static_range({k})){widen}")
  widen = (f"; or widen the index tile to {wide} columns, the extra ones masked off (ml.arange({wide})[None, :]"
           f" < {k} in the masks of what it reads and stores; chunks of CSR rows, a[:, None] + c * {wide} +"
           f" ml.arange({wide})[None, :], need no other mask than the rows' ends)") if k % hw.WARP else ""
  return (f"the indices of this gather, a ({r}, {k}) tile, are broadcast along their rows (a column stretched"
          f" to {k} columns): that needs columns a multiple of {hw.WARP} (one per lane of a warp), and rows a"
          f" multiple of {hw.WARPS_PER_WARPGROUP} unless the columns are a multiple of {hw.WARPGROUP}",
          f"gather each column of indices by itself, 1-D (t[ml.arange({r}) * n + ids[:, j]] for j in"
          f" ml.static_range({k}), stored as out.at[:, j]), or index a 2-D view of the table passed in"
          f" reshaped (t2[rows, ids] with t2 = t.reshape(-1, n) outside the kernel){widen}")


def row_of_statistic(name, shape, n, was, tmp, red) -> tuple[str, str]:
  """(message, hint) for v[None, :] (a reshape, a broadcast_to) of a row statistic `name` of n
  values made a `shape` row; `red` the Reduce that made it, where rewriting it with keepdims holds."""
  hint = f"store {name} itself through a 1-D view of the row you write (ref.at[0][...] = {name})"
  if n % hw.WARPGROUP == 0:      # (1, n) register tensors need n a multiple of 128
    again = (f"ml.{red.kind.value}({red.x.name or 't'}, axis=1, keepdims=True).T"
             if red is not None and (red.x.name or "").isidentifier() else "the reduction with keepdims=True, then .T")
    hint += (f", keep the reduced axis and transpose ({again}), or pass it through an SMEM vector ({tmp};"
             f" tmp[...] = {name}; then tmp[...][None, :])")
  return (f"this makes a {shape} row of {name}, {was}: the threads of each row of its tile hold its values,"
          f" where a row tile spreads them along the columns, and registers cannot move between the two", hint)


def strided_window_hint(v, members, defs) -> str:
  """For a vector of n elements (not a multiple of 128) read from a window strided in its last
  dimension (a channel of (H, W, 3) pixels, x.at[r, :, 0]): the window padded to a multiple of 128,
  masked, where the vector is such a GMEM read; else more rows at once or another layout."""
  base = (f"move a window of a multiple of {hw.WARPGROUP} elements (more rows at once), or lay the array out with"
          f" this dimension last")
  n = v.type.shape[0]
  up = -(-n // hw.WARPGROUP) * hw.WARPGROUP
  for u in members:
    w = read_window(defs, defs.get(u.id))
    free = [k for k, (_, _, squeeze) in enumerate(w[2]) if not squeeze] if w is not None and not w[1] else []
    if len(free) == 1 and w[2][free[0]][1] == n:
      idx = ", ".join(s if squeeze else f"ml.ds({s}, {up if k == free[0] else size})"
                      for k, (s, size, squeeze) in enumerate(w[2]))
      return (f"pad the window to {up} elements, masked (a masked GMEM window may run past the array's end):"
              f" {w[0]}.at[{idx}].load(mask=ml.arange({up}) < {n}, other=0), and store {n} of them with the same"
              f" mask" + (f" (and make the vectors it meets {up} long the same way)"
                          if any(m is not u and read_window(defs, defs.get(m.id)) is not None for m in members) else "")
              + f"; or {base}")
  return base


def pad_hint(n, up, index, reduced=((), None), made=None, defs=None) -> str:
  """A 1-D vector of n elements padded to `up` by a masked window (of the GMEM read `made`, the op
  that made it, where it is one: its start in the user's words); `index`: it indexes a gather or a
  scatter, whose padding lanes need an index the scatter drops (0 would count); `reduced`
  (reductions_of): the padding is what they ignore. Made by ml.arange: a longer arange, masked."""
  from .ops.elementwise import Arange, Full
  if isinstance(made, Full):          # (a masked window of memory is no fix for a constant)
    return (f"make it {up} long, ml.full(({up},), ...) (or ml.zeros), and keep the extra {up - n} out of the"
            f" result: an SMEM buffer it fills {up} long too, and a store into GMEM masked,"
            f" .store(v, mask=ml.arange({up}) < {n})")
  if isinstance(made, Arange):
    mask = f"ml.arange({up}) < {n}"
    return (f"take {up} lanes, ml.arange({up}), and mask the ones past {n}: {mask} in the masks of what they read"
            f" and store" + (f"; an index vector's extra lanes point past the indexed array's end"
                             f" (ml.where({mask}, idx, n)), where a scatter drops them" if index else "")
            + f"; or work on {up} rows (or elements) a program")
  window = read_window(defs, made) if defs is not None and made is not None else None
  at = f"ref.at[ml.ds(start, {up})]"
  free = [k for k, (_, _, squeeze) in enumerate(window[2]) if not squeeze] if window is not None and not window[1] else []
  if len(free) == 1:     # x.at[r, :] of a 2-D array too: its one free dimension padded, the others as read
    at = f"{window[0]}.at[" + ", ".join(s if squeeze else f"ml.ds({s}, {up})" for s, _, squeeze in window[2]) + "]"
  kinds, dtype = reduced
  mask = f"ml.arange({up}) < {n}"
  other = loaded_other(kinds, dtype)
  return (f"pad it with a masked window: {at}.load(mask={mask},"
          + (f" other=<an index past the indexed array's end>): a scatter drops those updates (and a"
             f" gather's masked lanes are yours to ignore), where other=0 would add {up - n} updates at index 0"
             if index else f" other={other}){_padding_note(kinds, dtype, mask)} and a masked store of the same window"))


def empty_tensor_hint(kernel) -> str:
  """For a register tensor of no elements: a call whose outputs all have none needs no kernel
  (it returns them without a launch); only check/typed_ir/mlir of such specs come here."""
  import math
  outs = [p.value.type.shape for p in kernel.params if p.is_output]
  if outs and all(math.prod(s) == 0 for s in outs):
    return ("a call on arrays whose outputs all have no elements returns them without a launch, as jnp"
            " would; check or build a specialisation whose outputs have elements")
  return "call the kernel only on non-empty arrays (outside it, an empty output needs no kernel)"


def single_row_statistic(rels, comp, defs):
  """Raise for a (1,) statistic of a one-row (1, n) tile stretched to the (k,) statistics of a (k, n)
  tile (a mask that broadcasts, counted with ml.sum(m, axis=1)): the threads of a row-wise tile hold
  its rows, and the one-row tile's statistic is in other threads. `rels`/`comp`: the layout classes.
  None where there is no such statistic (the caller's error and hint stand)."""
  from . import errors as E
  from .ops.elementwise import Cast
  from .ops.shape import Broadcast, Reduce
  ops = [r for c, q, _, r in rels if c in comp or q in comp]
  lone = next((r for r in ops if isinstance(r, Broadcast) and r.x.type.shape == (1,)
               and len(r.result.type.shape) == 1 and r.result.type.shape[0] > 1), None)
  red = next((r for r in ops if isinstance(r, Reduce) and r.result.type.shape == (1,)
              and len(r.x.type.shape) == 2 and r.x.type.shape[0] == 1), None)
  if lone is None or red is None:
    return
  src, o = red.x, defs.get(red.x.id)
  while isinstance(o, Cast) and not o.bitcast:    # a bool mask summed as int32: the user's mask
    src, o = o.x, defs.get(o.x.id)
  k, n, name = lone.result.type.shape[0], red.x.type.shape[1], src.name or "t"
  raise E.LayoutError(
      f"a (1,) statistic of the one-row (1, {n}) tile {name} is stretched to ({k},), beside the row statistics"
      f" of a ({k}, {n}) tile: the threads holding that tile's rows do not hold the one row's statistic",
      red.loc,
      hint=f"reduce {name} to a scalar, which meets any tensor: ml.{red.kind.value}({name}) (the same value for"
           f" every row); or stretch it to the tile before reducing it: ml.{red.kind.value}(ml.broadcast_to({name},"
           f" ({k}, {n})), axis=1)")
