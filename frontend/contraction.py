"""Contractions that leave out the end of an input: a k loop of `K // bk` trips over a K that is not a
multiple of bk drops the last columns of A and rows of B from every product, and nothing else notices:
the output is written in full, every window is inside its array. jnp.dot never drops them, so a dot fed
from an input dimension that no program reads to its end is reported (MG501) at the read, with the ml.cdiv loop (TMA reads zeros past the end; a register read masks).

The dimension a dot contracts is followed from the dot's operand (its buffer's k axis: the columns of A,
the rows of B, swapped for a `buf.T` view) through the TMA copies that fill that buffer to the input
array's dimension (or through a register tile read from the input and stored into that buffer, or
passed as a register A; or through another SMEM buffer the tile was copied or stored from). Only reads of inputs count, and only when every read of that input is known while
compiling: a run-time trip count (`ml.range(n[...])`, a KV cache's length) or start leaves it alone.
(A K below one step, `K // bk` = 0 trips of a static loop, is dropped while tracing: empty_dot_loop.)
"""
from __future__ import annotations

import ast

import numpy as np

from . import errors as E
from . import ir
from .absint import UNKNOWN
from .ops.access import MaskedLoad
from .ops.elementwise import Binary, Cast, Unary
from .ops.memory import Copy, Load, Store, View
from .types import RefType, Space


def _dims(defs, ref):
  """(root, [root axis of each of the view's axes, as ml.dot reads it]) of a ref or view."""
  d = defs.get(ref.id)
  if not isinstance(d, View):
    return ref, list(range(len(ref.type.shape)))
  rank = len(d.ref.type.shape)
  index = list(d.index) + [None] * (rank - len(d.index))
  axes = [r for r, i in enumerate(index) if not getattr(i, "squeeze", False)]
  return d.ref, (axes[::-1] if d.transpose and len(axes) == 2 else axes)


def _loaded(defs, v, axes):
  """(the ref a register tensor was read from, its axis for axis `axes` of v, the read), through conversions and
  elementwise math with numbers (a dequantised tile, `w[...].astype(x.dtype) * s`); None otherwise."""
  for _ in range(16):
    d = defs.get(v.id)
    if isinstance(d, (Load, MaskedLoad)):
      return d.ref, axes, d
    if isinstance(d, (Cast, Unary)):
      v = d.x
    elif isinstance(d, Binary):
      same = [x for x in (d.lhs, d.rhs) if isinstance(x, ir.Value) and getattr(x.type, "shape", ()) == v.type.shape]
      if not same:
        return None
      v = same[0]
    else:
      return None
  return None


def contracted_inputs(kernel) -> dict:
  """{(input root id, axis): (read op, dot op, the read's size along it)} for every input axis a dot contracts: through a TMA copy
  into its SMEM operand, a register store into it of a tile read from the input, or a register A read
  from the input."""
  defs = ir.def_table(kernel.body)
  ops = list(ir.walk(kernel.body))
  inputs = {p.value.id for p in kernel.inputs}
  k_axes, out = {}, {}                         # SMEM root id -> {root axis: dot}

  def add(ref, axis_of_ref, site, dot):        # ref: a view of an input, read by `site`
    root, axes = _dims(defs, ref)
    if root.id in inputs and axis_of_ref < len(axes):
      view = defs.get(ref.id)
      index = list(view.index) if isinstance(view, View) else []
      axis = axes[axis_of_ref]
      step = index[axis].size if axis < len(index) and index[axis] is not None else root.type.shape[axis]
      out.setdefault((root.id, axis), (site, dot, step))

  for o in ops:
    if type(o).__name__ != "Dot":
      continue
    for x, k in ((o.a, -1), (o.b, -2)):        # k: the axis of A (m, k) and of B (k, n) as the dot reads them
      if len(getattr(x.type, "shape", ())) != 2:
        continue
      if isinstance(x.type, RefType):
        root, axes = _dims(defs, x)
        k_axes.setdefault(root.id, {}).setdefault(axes[k], o)
      elif (src := _loaded(defs, x, 2 + k)) is not None:
        add(*src, o)
  for _ in range(8):                           # to a fixpoint: a tile copied from one SMEM buffer into another
    grown = False
    for o in ops:
      copy = isinstance(o, Copy)
      if not (copy or isinstance(o, Store) and isinstance(o.value, ir.Value)):
        continue
      droot, daxes = _dims(defs, o.dst if copy else o.ref)
      for axis, dot in list(k_axes.get(droot.id, {}).items()):
        if axis not in daxes:                  # the axis of the window (and of a stored tensor)
          continue
        found = (o.src, daxes.index(axis), o) if copy else _loaded(defs, o.value, daxes.index(axis))
        if found is None:
          continue
        sroot, saxes = _dims(defs, found[0])
        if sroot.id in inputs:
          add(*found, dot)
        elif sroot.type.space == Space.SMEM and found[1] < len(saxes) and saxes[found[1]] not in k_axes.get(sroot.id, {}):
          k_axes.setdefault(sroot.id, {})[saxes[found[1]]] = dot     # (its own fills are followed next round)
          grown = True
    if not grown:
      break
  return out


class ContractionReads:
  """How far the reads of each contracted input axis reach, over every program (a visitor's helper)."""

  def __init__(self, kernel):
    self.kernel = kernel
    self.axes = contracted_inputs(kernel)
    self.reach: dict = {}                     # (root id, axis) -> the highest element end read
    self.unknown: set = set()                 # root ids some read of which is not known

  def __call__(self, acc, reads) -> None:
    w = acc.window
    keys = [k for k in self.axes if k[0] == w.root.id]
    if not keys or acc.kind not in reads or w.root.type.space != Space.GMEM or not acc.may.any():
      return
    if not acc.exact:
      self.unknown.add(w.root.id)
      return
    for key in keys:
      s = w.starts[key[1]]
      if s is UNKNOWN:
        self.unknown.add(w.root.id)
        continue
      self.reach[key] = max(self.reach.get(key, 0), int(np.max(s[acc.may])) + w.sizes[key[1]])

  def errors(self) -> list:
    out = []
    names = {p.value.id: p for p in self.kernel.inputs}
    for (rid, axis), (site, dot, step) in self.axes.items():
      size = names[rid].value.type.shape[axis]
      reach = self.reach.get((rid, axis), 0)
      if rid in self.unknown or reach >= size or size - reach >= step:
        continue      # (a tail of a step or more: a prefix read on purpose, a padded array's valid part)
      name, rank = names[rid].name, len(names[rid].value.type.shape)
      box = ", ".join(f"{reach}:{size}" if d == axis else ":" for d in range(rank))
      along = {rank - 1: "columns", rank - 2: "rows"}.get(axis, f"elements along dimension {axis}")
      trips = f"{size} // {step} = {size // step} trips"
      out.append(E.MmaOperandError(
          f"no program reads {name}[{box}], but the ml.dot on line {dot.loc.lineno} sums over {name}'s {size}"
          f" {along}: the product would leave out {f'the last {size - reach}' if reach else 'all of them'}"
          f" (a k loop of {trips} stops short of the end)", site.loc,
          hint=f"loop over ml.cdiv({size}, {step}) steps (ml.cdiv(K, bk) rather than K // bk): "
               + (f"the copy of the last step runs past {name}'s end and reads zeros there, which add nothing to"
                  f" the product" if isinstance(site, Copy) else
                  f"read the last step's window with a mask that keeps {name}'s {along} below {size} and other=0"
                  f" (zeros add nothing to the product), {name}.at[...].load(mask=..., other=0)")))
    return out


def empty_dot_loop(tracer, node, it) -> None:
  """A static loop of no trips, `range(K // bk)` with 0 < K < bk, whose body calls ml.dot: the loop is
  dropped while tracing, so the reads above never see it. Recorded (with the names its body uses) for
  empty_loop_errors, which reports it where an input it names is read nowhere else."""
  stop = it.args[0] if len(it.args) == 1 else None
  if not (isinstance(stop, ast.BinOp) and isinstance(stop.op, ast.FloorDiv)) or not any(
      isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr == "dot" for n in ast.walk(node)):
    return
  try:
    x, y = tracer.eval(stop.left), tracer.eval(stop.right)
  except E.KernelError:
    return
  if isinstance(x, int) and isinstance(y, int) and 0 < x < y:
    names = {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}
    tracer.b.empty_dot_loops = getattr(tracer.b, "empty_dot_loops", []) + [(tracer.loc(it), tracer.text(stop), x, y, names)]


def empty_loop_errors(kernel, records) -> list:
  """The loops empty_dot_loop recorded whose inputs nothing else in the kernel reads."""
  used = {v.id for o in ir.walk(kernel.body) for v in o.operands() if isinstance(v, ir.Value)}
  out = []
  for loc, text, x, y, names in records:
    unread = [p.name for p in kernel.inputs if p.name in names and p.value.id not in used]
    if unread:
      out.append(E.MmaOperandError(
          f"this loop runs no trips ({text} = {x} // {y} = 0), so its ml.dot never runs and {' and '.join(unread)}"
          f" {'is' if len(unread) == 1 else 'are'} never read: the product would leave out all {x} of its terms", loc,
          hint=f"loop over ml.cdiv({text.replace(' // ', ', ')}) steps (ml.cdiv(K, bk) rather than K // bk): one step"
               f" here, whose copies read zeros past the arrays' ends, which add nothing to the product"))
  return out
