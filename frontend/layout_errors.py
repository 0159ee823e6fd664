"""The layout pass's errors (frontend/layouts.py): a vector used in two layouts, tensors no register
layout holds, tiles moved between registers and a tensor-core buffer. A mixin of the pass's solver,
whose union-find, classes and definitions the messages read to name the user's values.
"""
from __future__ import annotations

import math

from . import errors as E, relayout
from . import hw
from . import ir
from .ops.control import For, While
from .ops.elementwise import BinOp, Cast, Full
from .ops.gather import Gather, ScatterUpdate
from .ops.memory import Store
from .ops.mma import Dot
from .ops.shape import Broadcast, Reduce, Reshape
from .ops.permute import TransposeLoad, TransposeStore
from .layout_hints import (column_slice_hint, empty_tensor_hint, pad_hint, read_window, register_window_hint, role,
                           row_of_statistic, small_tile_hint, smem_vector_hint)
from .pad_reductions import reductions_of
from .types import Layout, LayoutKind, RefType, TensorType, dtype_name
from .loc import expr_at


def _is_tensor(x) -> bool:
  return isinstance(x, ir.Value) and isinstance(x.type, TensorType)


def _expression(text) -> bool:
  """Whether a value's name is Python the user can write again (`cs`, `ml.exp(last)`)."""
  try:
    compile(text, "<name>", "eval")
  except (SyntaxError, ValueError):
    return False
  return bool(text)


def _written_out(o) -> bool:
  """Whether the broadcast `o` is a subscript with None the user wrote (`(a + b)[None, :]`, `v[:, None]`)."""
  import ast
  node = expr_at(o.loc) if isinstance(o, Broadcast) else None
  return isinstance(node, ast.Subscript) and any(isinstance(n, ast.Constant) and n.value is None
                                                 for n in ast.walk(node.slice))


class LayoutErrors:
  """The solver's MG204 errors and their hints."""

  def two_way_use(self, comp):
    """A broadcast of a 1-D vector of the classes `comp` that another broadcast of it stretches the other way (an
    index vector carried by a loop, `offsets_k += BK`, the rows of a (64, 4) B tile of words and the columns of a
    (16, 64) A tile): the tiles share one layout through it, which none holds, though each alone may fit one. That
    use reads a copy through SMEM (relayout.CopyUse), and the layouts are solved again (probe 56a); None where no
    vector is stretched both ways."""
    from .ops.shape import Broadcast
    seen = {}
    for o in ir.walk(self.kernel.body):
      if isinstance(o, Broadcast) and _is_tensor(o.x) and len(o.x.type.shape) == 1 and \
          len(o.result.type.shape) == 2 and self.uf.find(("v", o.x.id)) in comp:
        if seen.setdefault(o.x.id, tuple(o.dims)) != tuple(o.dims):
          return o
    return None

  def conflict(self, c, p, axes, o, layout, members):

    def named(skip=None, default="this vector"):
      """A vector of the class as the user named it: a variable (`c`) before an expression."""
      names = [v.name for v in members.get(c, []) if v.name and v is not skip and len(v.type.shape) == 1]
      return next((n for n in names if n.isidentifier()), names[0] if names else default)
    here = getattr(o, "x", None)        # the vector this op broadcasts, when it is of the class
    held, vecs = named(default="v"), [v for v in members.get(c, []) if len(v.type.shape) == 1]
    # the last value of that name: the user's (a bool reduction's is named as its int32 step too)
    vec = here if here in vecs else next((v for v in reversed(vecs) if v.name == held), vecs[0] if vecs else None)
    tmp = (f"tmp = ml.smem(({vec.type.shape[0]},), jnp.{dtype_name(vec.type.dtype)})" if vec is not None else
           "tmp = ml.smem((n,), v.dtype)")
    if isinstance(o, Reduce) and o.results and len(o.result.type.shape) == 1:
      # Two reductions' vectors met in elementwise math (or a branch): no broadcast involved.
      other = named(skip=o.result, default="another vector")
      raise relayout.tagged(relayout.CopyResult(o), E.LayoutError(
          f"this reduction gives {role(layout[p].dropped(axes))} of {o.x.name or 'its tile'}, but it meets"
          f" {other}, {role(layout[c])}, in elementwise math or a branch: the two live in different"
          f" register layouts", o.loc,
          hint=f"pass one through an SMEM vector to combine them: {tmp}; tmp[...] = {held};"
               " then tmp[...] reads it back in the layout the other needs"))   # (the compiler does: copies)
    name = (here.name if here is not None and here.name and here in members.get(c, []) else named())
    was, now = role(layout[c]), role(layout[p].dropped(axes))
    written = (getattr(o.loc, "source_line", "") or "").replace(" ", "")
    bare = name.replace(" ", "")      # (as `written`: a vector named by its expression, `ml.sum(p, axis=1)`)
    implicit = f"{bare}[None" not in written and f"{bare}[:,None]" not in written     # (an outer product's v[None, :])
    # (a broadcast written out on an expression of the vector, `(e[:, t] + beta)[None, :]`, is as written out as
    # `w[None, :]` of that expression named: probe 72a, an HMM's backward pass was MG204 unless the sum was named)
    implicit = implicit and not _written_out(o)
    meant = (f"if {name} holds a value per row, broadcast it along the rows: {name}[:, None] (a (n,) vector"
             f" meeting an (m, n) tile aligns with its columns, as in NumPy); otherwise "
             if was.startswith("a row statistic") and now.startswith("a column vector") and implicit else "")
    # a (1, n) row of the vector that is not itself stretched into a tile (x + c[None, :] is a
    # column vector's use, not a row's)
    lone = (here is not None and here in members.get(c, []) and len(members.get(p, [])) == 1
            and math.prod(o.result.type.shape) == math.prod(here.type.shape)
            and not any(self.uf.find(child) == p for child, _, _, _ in self.relations))
    if lone and was.startswith("a row statistic") and now.startswith("a column vector"):
      # v[None, :] (or a reshape or broadcast_to) of a row statistic, used nowhere else as a tile
      red = next((r for r in ir.walk(self.kernel.body) if isinstance(r, Reduce) and r.results
                  and self.uf.find(("v", r.result.id)) == c), None)
      divided = any(getattr(self.defs.get(v.id), "kind", None) == BinOp.DIV for v in members.get(c, []))
      message, hint = row_of_statistic(name, o.result.type.shape, here.type.shape[0], was, tmp,
                                       None if divided else red)     # (ml.mean is a sum, then /)
      # (the relayout pass sends this reshape through SMEM, as the hint's tmp would: a statistic of a
      # (1, r, c) tile, computed on its (r, c) reshape, is made (1, r) so; where that fails, this error stands)
      raise relayout.tagged(o, E.LayoutError(message, o.loc, hint=hint))
    through = (f"{tmp}; tmp[...] = {name if _expression(name) else 'v'}; then tmp[...] reads it in the layout"
               " its use needs")
    if any(isinstance(r, Reduce) and r.results and self.uf.find(("v", r.result.id)) == c
           for r in ir.walk(self.kernel.body)):
      # a reduction gives its tile's row (or column) statistic however often it is computed
      hint = (meant + f"pass one use through an SMEM vector: {through} (a reduction's vector has its tile's"
              " layout, so computing it again does not help)")
    else:
      hint = (meant + "give each use its own copy: compute the vector twice (an index vector: write its ml.arange"
              f" expression again for the second use), load it again from memory, or pass one through an"
              f" SMEM vector ({through})")
    error = E.LayoutError(
        f"{name} is used as {was} of one tile and as {now} of another: a register vector lives in one of the"
        f" two layouts", o.loc, hint=hint)
    # (NumPy's alignment puts a vector along a tile's last axis, dims (1,); a vector stretched along the rows,
    # dims (0,), is a broadcast the compiler made itself, a row gather's indices: no slip of the user's)
    made = getattr(self.kernel, "index_broadcasts", set())    # (and a register gather's, `v[:, ids]`)
    aligned = any(isinstance(b, Broadcast) and len(b.x.type.shape) == 1 and len(b.result.type.shape) == 2
                  and math.prod(b.result.type.shape) != math.prod(b.x.type.shape) and tuple(b.dims) == (1,)
                  and b.result.id not in made and self.uf.find(("v", b.x.id)) == c for b in ir.walk(self.kernel.body))
    # a column statistic (every reduction of the class along axis 0 of a tile: fla's row of a triangular matrix,
    # ml.sum(ml.where(o_i[:, None] == i, A, 0), 0)) meets tiles along their columns by NumPy's alignment as it
    # was made: that use is no slip, and its use as a row statistic, b_a[:, None], is written out
    sums = [r for r in ir.walk(self.kernel.body) if isinstance(r, Reduce) and r.results
            and len(r.result.type.shape) == 1 and self.uf.find(("v", r.result.id)) == c]
    aligned = aligned and not (sums and all(len(r.x.type.shape) == 2 and tuple(r.axes) == (0,) for r in sums))
    if isinstance(o, Broadcast) and _is_tensor(o.x) and math.prod(o.x.type.shape) == math.prod(o.result.type.shape) \
        and not any(self.uf.find(child) == p for child, _, _, _ in self.relations):
      # only size-1 axes added, and not stretched further (a last-axis statistic of a (1, r, c) tile, its (r,)
      # vector made (1, r), meeting another; not v's NumPy alignment against a tile, v[:, None] - v): the
      # relayout pass sends that reshape through SMEM; where that fails, this error stands
      raise relayout.tagged(o, error)
    if isinstance(o, Broadcast) and _is_tensor(o.x) and (o.result.id in made or not meant and not aligned):
      # both orientations written out (cs[:, None] - cs[None, :]): the broadcast's use reads a copy;
      # a vector meeting a tile by NumPy's alignment alone (s - m) stays an error, as likely a slip
      raise relayout.tagged(relayout.CopyUse(o), error)     # (this use reads a copy, through SMEM)
    raise error

  def split_statistic(self, rels, parents, tiles, fits):
    """The reduction whose vector joins two tiles that no one row-wise layout holds together, though each alone
    fits one (`fits`, of a class's 2-D shapes): chained vector-matrix products, `h = jnp.dot(s, w1)` of a (32, 8)
    `w1` and then `jnp.dot(h, w2)` of an (8, 32) `w2`, an SE block's excitation, make `h` a column statistic of the
    first product's tile and a row vector of the second's. The relayout pass gives that vector's uses a copy
    through SMEM (relayout.CopyResult), which takes its own layout; None where there is no such reduction."""
    shapes = {}
    for v in tiles:
      if len(v.type.shape) == 2:
        shapes.setdefault(self.uf.find(("v", v.id)), []).append(v.type.shape)
    if len(shapes) < 2 or len(shapes) != len(parents) or not all(fits(sh) for sh in shapes.values()):
      return None
    for c, q, _, r in rels:
      if isinstance(r, Reduce) and q in shapes and r.results and len(r.result.type.shape) == 1:
        seen, todo = {c, q}, [c]       # (what the vector reaches without its own tile: h[:, None], then (8, 32))
        while todo:
          x = todo.pop()
          for a, b, _, _ in rels:
            for y in ((b,) if a == x else (a,) if b == x else ()):
              if y not in seen:
                seen.add(y)
                todo.append(y)
        if any(t in seen for t in shapes if t != q):
          return r
    return None

  def _reductions(self, v):
    """reductions_of `v` (what its padding hint must keep the identity for)."""
    return reductions_of(self.kernel.body, v)

  def _scalar_store_hint(self, v) -> str | None:
    """For `out[...] = s` of a scalar `s` into a one-element ref (the scalar filled into a
    tensor of the ref's shape): store it as a scalar, `out[0] = s`."""
    made = self.defs.get(v.id)
    if not (isinstance(made, Full) and math.prod(v.type.shape) == 1):
      return None
    use = next((o for o in ir.walk(self.kernel.body) if isinstance(o, Store) and o.value is v), None)
    if use is None:
      return None
    value = made.value
    text = getattr(value, "name", None) or (repr(value) if not isinstance(value, ir.Value) else "s")
    index = ", ".join("0" for _ in v.type.shape)
    return f"store the scalar into the one element: {use.ref.name or 'out'}[{index}] = {text}"

  def _smem_fill_hint(self, v, n, up) -> str | None:
    """A vector of n elements (no register layout) that fills a whole 1-D SMEM buffer of its length (`L[...] =
    ml.arange(100)`, 100 nodes' labels): the buffer made `up` long takes the padding, which no window of the (n,)
    buffer could (probe 71a: the hint took 104 lanes, which the buffer does not hold)."""
    from .types import Space
    use = next((o for o in ir.walk(self.kernel.body) if isinstance(o, Store) and o.value is v), None)
    ref = getattr(use, "ref", None)
    if ref is None or ref.type.space != Space.SMEM or tuple(self.root(ref).type.shape) != (n,):
      return None
    name = self.root(ref).name if (self.root(ref).name or "").isidentifier() else "buf"
    return (f"make {name} {up} long, ml.smem(({up},), ...): fill all {up} (ml.arange({up}), a load of {up} masked"
            f" with other=...), compute on the whole buffer, and read its first {n} back as {name}.at[ml.ds(0, {n})]"
            f" (a gather or an atomic at indices below {n} never touches the rest)")

  def _stored_to(self, v, ndim=2) -> tuple:
    """(the name of the `ndim`-D ref `v` is stored into whole, `out.at[rows][...] = v`, and whether
    that ref is one view of a 2-D array), or (None, False)."""
    use = next((o for o in ir.walk(self.kernel.body) if isinstance(o, Store) and o.value is v), None)
    ref = getattr(use, "ref", None)
    if ref is None or not ref.name or len(ref.type.shape) != ndim:
      return None, False
    return ref.name, len(self.root(ref).type.shape) == 2

  def _one_element(self, v, loc):
    """MG204 for a one-element tensor (a full reduction with keepdims=True, ml.full((1, 1), s)):
    math on it is done on its scalar, but a loop cannot carry it; elsewhere, a hint to use the
    scalar."""
    name = v.name if (v.name or "").isidentifier() else "t"
    index = ", ".join("0" for _ in v.type.shape)
    cls = self.uf.find(("v", v.id))
    loop = next((o for o in ir.walk(self.kernel.body) if isinstance(o, (For, While)) and any(
        isinstance(i, ir.Value) and self.uf.find(("v", i.id)) == cls for i in o.inits)), None)
    if loop is not None:
      raise E.LayoutError(
          f"this loop carries {name}, a tensor of shape {v.type.shape}: " + (
              "a 1-D register vector needs a multiple of 8 elements" if len(v.type.shape) == 1 else
              f"a register tensor needs a multiple of {hw.WARPGROUP} elements (one per thread of a warpgroup)"),
          loop.loc,
          hint=f"carry a scalar: start it as a number ({name} = 0.0) and add full reductions without"
               f" keepdims=True ({name} = {name} + ml.sum(...)); of a one-element tensor, {name}[{index}] is its"
               f" scalar")
    return (f"use the scalar: a full reduction without keepdims=True (ml.sum(x)) is one, and so is"
            f" {name}[{index}] of a one-element tensor")

  def reshaped_mma_tile(self, layout):
    """A reshape of a tensor-core (WGMMA) tile into another 2-D shape (`acc.reshape((64, 128))` of a
    (128, 64) dot result): its shapes both fit the layout, but the elements change rows, which no
    register layout follows (Mosaic GPU's reshape of it failed, MG900). Tagged, so that it goes
    through SMEM (relayout.py) as a reshape of a row-wise tile does."""
    ones = lambda shape: tuple(n for n in shape if n != 1)
    for o in ir.walk(self.kernel.body):
      if not isinstance(o, Reshape) or not _is_tensor(o.x):
        continue
      lay = layout.get(self.uf.find(("v", o.x.id)))
      src, dst = o.x.type.shape, o.results[0].type.shape
      if lay is None or lay.kind != LayoutKind.WGMMA or lay.drop or ones(src) == ones(dst):
        continue
      raise relayout.tagged(o, E.LayoutError(
          f"reshape of {o.x.name or 'a tensor-core tile'} {src} into {dst}: the elements change rows, and"
          f" a tensor-core tile's rows live in fixed threads", o.loc,
          hint="store the tile to SMEM and read the buffer back in the new shape"))

  def _register_window_hint(self, v, loc) -> str | None:
    """For a static window of a register tensor (read back from the compiler's scratch of it) too
    small for the registers: where ml.concatenate takes such windows (as rolls)."""
    d = self.defs.get(v.id)
    if type(d).__name__ != "Load" or self.root(d.ref).id not in getattr(self.kernel, "transient_ids", ()) \
        or self.root(d.ref) is d.ref or tuple(self.root(d.ref).type.shape) == tuple(v.type.shape):
      return None       # (a window of the scratch, not the scratch read whole: a concatenation's result)
    return register_window_hint(loc)

  def _element_reads_hint(self, v) -> str | None:
    """For a short vector read from memory (`s, e = cu.at[ml.ds(b, 2)][...]`, or `se[0]`, `se[1]` of it)
    whose only uses are its elements (each read back through the compiler's scratch): those elements
    read as scalars straight from memory, which need no register vector."""
    n = v.type.shape[0]
    window = read_window(self.defs, self.defs.get(v.id))
    if window is None or n > 8:
      return None
    free = [k for k, (_, _, squeeze) in enumerate(window[2]) if not squeeze]
    transient = getattr(self.kernel, "transient_ids", ())
    uses = [u for u in ir.walk(self.kernel.body) if any(x is v for x in u.operands())]
    if len(free) != 1 or not uses or not all(isinstance(u, Store) and u.value is v and self.root(u.ref).id in transient
                                             for u in uses):
      return None

    def element(k):
      parts = []
      for d, (s, _, squeeze) in enumerate(window[2]):
        if d == free[0] and k:
          s = f"{s} + {k}" if not str(s).lstrip("-").isdigit() else str(int(s) + k)
        parts.append(str(s))
      return f"{window[0]}[{', '.join(parts)}]"
    return (f"read its elements as scalars, straight from memory (a scalar needs no register vector):"
            f" {', '.join(element(k) for k in range(n))}")

  def check(self, v, lay: Layout):
    o = self.first_use.get(v.id)
    loc = o.loc if o else self.kernel.loc
    shape = v.type.shape
    if math.prod(shape) == 0:
      raise E.LayoutError(
          f"{v.name or 'this tensor'} has shape {shape}: no elements, and a register tensor needs some",
          loc, hint=empty_tensor_hint(self.kernel))
    if lay.kind == LayoutKind.STRIDED:
      if math.prod(shape) % hw.WARPGROUP:
        one = self._one_element(v, loc) if math.prod(shape) == 1 and self._scalar_store_hint(v) is None else None
        if len(shape) == 1:
          n = shape[0]
          step = 8 if n % 8 else hw.WARPGROUP    # (a multiple of 8 is a tile's row or column statistic only)
          up = -(-n // step) * step
          cls = self.uf.find(("v", v.id))
          index = any(isinstance(u, (Gather, ScatterUpdate)) and any(
              _is_tensor(i) and self.uf.find(("v", i.id)) == cls for i in u.indices) for u in ir.walk(self.kernel.body))
          raise E.LayoutError(
              f"{v.name or 'this tensor'} has shape {shape}: a 1-D register vector needs a multiple of 8"
              f" elements (other register tensors a multiple of {hw.WARPGROUP}, one per thread of a"
              f" warpgroup)" if step == 8 else
              f"{v.name or 'this tensor'} has shape {shape}: a 1-D register vector of {n} elements is held as a"
              f" tile's row or column statistic only, beside that tile; held alone it needs a multiple of"
              f" {hw.WARPGROUP} elements (one per thread of a warpgroup)", loc,
              hint=self._scalar_store_hint(v) or one or self._element_reads_hint(v) or self._smem_fill_hint(
                  v, n, up) or smem_vector_hint(
                  o, n, up, self.defs, v.name, self._stored_to(v, 1)[0]) or pad_hint(
                  n, up, index, self._reductions(v), self.defs.get(v.id), self.defs))
        raise E.LayoutError(
            f"{v.name or 'this tensor'} has shape {shape}: register tensors need a multiple of"
            f" {hw.WARPGROUP} elements (one per thread of a warpgroup)", loc,
            hint=self._scalar_store_hint(v) or one or column_slice_hint(v.name, *self._stored_to(v))
            or self._register_window_hint(v, loc) or small_tile_hint(
                shape, self._read_from(v), read_window(self.defs, self.defs.get(v.id)), self._reductions(v)))
      return
    if lay.drop and (len(shape) > 2 or any(shape[a] != 1 for a in lay.drop if len(shape) == 2)) or (
        not lay.drop and len(shape) != 2):
      vec = next((u for u in self.members.get(self.uf.find(("v", v.id)), []) if len(u.type.shape) == 1), None)
      what = f"{role(lay)} of a tile" if lay.drop else "a tile whose rows and columns a reduction or broadcast fixed"
      hint = "reshape before the reduction or broadcast, in registers that are not a tile yet"
      if lay.drop and vec is not None and len(shape) == 2:
        n, dt, name = vec.type.shape[0], dtype_name(vec.type.dtype), vec.name or "v"
        hint = (f"go through SMEM: tmp = ml.smem(({n},), jnp.{dt}); tmp[...] = {name}; then read row k of the"
                f" {shape} result as tmp.at[ml.ds(k * {shape[1]}, {shape[1]})][...] (k in ml.static_range({shape[0]}))")
      raise relayout.tagged(v, E.LayoutError(
          f"this {shape} tensor is reshaped from or into {what}: its values live in"
          f" fixed threads, so only size-1 axes can be added or removed", loc, hint=hint))
    if lay.kind == LayoutKind.WGMMA:
      rows = 64 if lay.whole else self.rows
      full = lay.register_shape(shape)
      if not lay.drop:
        ok = len(shape) == 2 and shape[0] % rows == 0 and shape[1] % hw.MMA_N_STEP == 0
      elif lay.drop == (1,):
        ok = len(full) == 1 and full[0] % rows == 0
      else:
        ok = len(full) == 1 and full[0] % hw.MMA_N_STEP == 0
      if not ok and not lay.drop:
        self.operand_tile(v, shape, rows, loc)
      elif not ok:      # a statistic of a tile stored into a dot's buffer: report that tile, at its store
        # up through every tile it is broadcast into (`offs_k[:, None] < K`, a (32, 1) mask broadcast
        # to the (32, 64) tile loaded and stored into the dot's buffer)
        seen, todo = set(), [self.uf.find(("v", v.id))]
        while todo:
          cls = todo.pop()
          for p in {self.uf.find(p) for c, p, _, _ in self.relations if self.uf.find(c) == cls} - seen:
            seen.add(p)
            todo.append(p)
            for t in self.members.get(p, []):
              if len(t.type.shape) == 2 and t.type.shape[0] % rows:
                self.operand_tile(t, t.type.shape, rows, loc)
      if not ok:
        raise relayout.tagged(v, E.LayoutError(
            f"{v.name or 'this tensor'} of shape {shape} meets a tensor-core result, so it must be"
            f" 2-D with rows a multiple of {rows} (64 per warpgroup) and columns a multiple of 8"
            f" (or a vector of its rows or columns)", loc,
            hint=staged_b_hint(self.kernel) or "keep values that combine with ml.dot results in the dot's (m, n)"
                 " tile shape" + (", or use fewer warpgroups (block=)" if rows > 64 else "")))

  def _read_from_memory(self, v) -> bool:
    """Whether the register tile `v` is data read from an array or a buffer (converted or transposed,
    perhaps: `v_s.T[...]`), which a TMA copy of the array could move instead; not a tile computed in
    the kernel (decode's probabilities `p.T`)."""
    d = self.defs.get(v.id)
    while d is not None:
      if isinstance(d, Cast):
        d = self.defs.get(d.x.id)
      elif isinstance(d, TransposeLoad):     # through its scratch: what the TransposeStore wrote there
        d = next((self.defs.get(o.x.id) for o in ir.walk(self.kernel.body)
                  if isinstance(o, TransposeStore) and o.scratch is d.scratch), None)
      else:
        break
    transient = getattr(self.kernel, "transient_ids", ())
    return type(d).__name__ in ("Load", "MaskedLoad") and isinstance(d.ref.type, RefType) and (
        self.root(d.ref).id not in transient)

  def operand_tile(self, v, shape, rows, loc):
    """MG204 for a tile moved between registers and a buffer ml.dot reads, which meets no ml.dot
    result: such a buffer is tiled for the tensor cores, so its register reads and writes take
    the WGMMA layout (rows in 64-row shares, one per warpgroup)."""
    uf = self.uf
    cls = uf.find(("v", v.id))
    if any(s[0] == "v" and uf.find(s) == cls for s in self.seeds):
      return                             # it meets a dot result (or a register A operand)
    bufs = [a for a in self.kernel.smem if a.id in self.mma_roots and uf.find(("smem", a.id)) == cls]
    if not bufs:
      return
    buf = bufs[0]
    # the value stored into the buffer (`p.astype(q.dtype)`), where one of the class is: the tile the
    # error is about, not the first tensor computed in its layout (`s`, which only p derives from)
    stored = next((o.value for o in ir.walk(self.kernel.body) if isinstance(o, Store) and _is_tensor(o.value)
                   and self.root(o.ref) is buf and uf.find(("v", o.value.id)) == cls), None)
    if stored is not None:
      v, shape = stored, stored.type.shape
      loc = self.first_use[stored.id].loc if stored.id in self.first_use else loc
    x = buf.name or "the buffer"
    wgs = self.kernel.block // hw.WARPGROUP
    split = f", which block={self.kernel.block} splits among {wgs} warpgroups" if wgs > 1 else ""
    fixes = []
    if wgs > 1 and len(shape) == 2 and shape[0] % 64 == 0 and shape[1] % hw.MMA_N_STEP == 0:
      fixes.append(f"use block=128 (one warpgroup holds all {shape[0]} rows)")
    fixes.append(f"give {x} a multiple of {rows} rows")
    fix = " or ".join(fixes)
    bt = next((o for o in ir.walk(self.kernel.body) if isinstance(o, Dot)
               and isinstance(o.b.type, RefType) and self.root(o.b) is buf
               and getattr(self.defs.get(o.b.id), "transpose", False)), None)
    if bt is not None and len(shape) == 2 and shape[0] % hw.MMA_N_STEP == 0 and shape[0] % rows and (
        self._read_from_memory(v)):
      # a narrow B stored (n, k), passed as x.T: TMA fills it in 8-row tiles, registers in 64-row ones
      # (only data read from memory: a tile computed in the kernel, decode's probabilities, has no array)
      fix += (f"; or fill {x} by TMA instead of from registers: transpose the array outside the kernel (bt ="
              f" b.T) and copy its {shape} window into {x}, which then takes any multiple of {hw.MMA_N_STEP}"
              f" rows")
    dot = next((o for o in ir.walk(self.kernel.body) if isinstance(o, Dot)
                and isinstance(o.b.type, RefType) and self.root(o.b) is buf
                and not getattr(self.defs.get(o.b.id), "transpose", False)), None)
    if dot is not None:                  # B (k, n) as TMA loaded it: scale A's columns or the result
      a = self.root(dot.a).name if isinstance(dot.a.type, RefType) else None
      acc = dot.result.name if (dot.result.name or "").isidentifier() else "acc"
      ra = f"{a}[...]" if a and not self.window_of_tiles(dot.a) else "the A tile"
      fix += (f"; or leave {x} as loaded and scale in registers instead: a scale of its rows (along k)"
              f" on the A operand, ml.dot({ra} * s, {x}, {acc}); one of its columns (or a scalar) on"
              f" the result, {acc} * s after the last ml.dot")
    raise E.LayoutError(
        f"{v.name or 'this tensor'} of shape {shape} moves between registers and {x}, which ml.dot"
        f" reads (tiled for the tensor cores), so it takes the tensor-core (WGMMA) layout{split}: it"
        f" must be 2-D with rows a multiple of {rows} (64 per warpgroup) and columns a multiple of 8",
        loc, hint=fix)


def staged_b_hint(kernel) -> str | None:
  """MG204's hint where an ml.dot's B tile in registers of fewer than 64 rows was staged into SMEM
  (ops/dot_staging.py): such a tile is stored transposed, and index vectors it shares with the result
  give it the result's layout, which needs 64 rows a warpgroup."""
  tiles = [(t, s) for t, s in getattr(kernel, "staged_b", {}).values() if s[0] % hw.MMA_M]
  if not tiles:
    return None
  t, (k, n) = tiles[0]
  return (f"ml.dot's b, {t} of shape {(k, n)}, comes from registers, and the compiler stores it into SMEM for the"
          f" tensor cores, 64 rows a warpgroup: use a k tile of 64 (BLOCK_K=64), or copy b's tile into an SMEM"
          f" buffer with ml.copy (TMA, zeros past the array's end) and pass the buffer")
