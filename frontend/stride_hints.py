"""The hint for a persistent loop that does not step by the grid: `for t in range(ml.program_id(0), n, 1)`
(or a step other than the number of programs along that axis) has programs meet on the same tiles (a
RaceError) or skip tiles between their steps (an UncoveredOutputError), where the grid-stride loop,
`range(ml.program_id(0), n, ml.num_programs(0))`, gives each tile one program; and the hint for a loop whose trips
stop short of an output's end (`range(T // 64)` of a chunked scan, probe 67b)."""
from __future__ import annotations

from . import ir


def persistent_stride_hint(kernel, loc) -> str | None:
  """The hint for the error at `loc` (a write into an output) inside a loop that starts at
  ml.program_id(a) and steps by a static count other than the grid's extent along `a`; None otherwise."""
  from .ops.control import For, ProgramId
  if loc is None:
    return None
  pids = {o.result.id: o.axis for o in ir.walk(kernel.body) if isinstance(o, ProgramId)}
  for o in ir.walk(kernel.body):
    if not isinstance(o, For) or not isinstance(o.step, int) or isinstance(o.step, bool):
      continue
    axis = pids.get(getattr(o.start, "id", None))
    if axis is None or axis == kernel.batch_axis or kernel.grid[axis] <= 1 or o.step == kernel.grid[axis]:
      continue
    if not any(x.loc is not None and (x.loc.filename, x.loc.lineno) == (loc.filename, loc.lineno)
               for x in ir.walk(o.body)):
      continue
    g = kernel.grid[axis]
    what = ("so programs meet on the same tiles" if o.step < g else
            f"so the tiles t with t % {o.step} >= {g} are left to no program")
    return (f"the loop at line {o.loc.lineno} walks tiles from ml.program_id({axis}) in steps of {o.step}, but the"
            f" grid has {g} programs along axis {axis}, {what}: step by the number of programs, range(ml.program_id"
            f"({axis}), n, ml.num_programs({axis})), so each tile has one program")
  return None


def loop_trips_hint(kernel, name, shape, missing, loc) -> str | None:
  """The hint for an output `name` left unwritten in part (`missing`, a boolean array of its shape) by the write at
  `loc` whose window along a partly covered dimension starts `iv * t` with `iv` a loop's index (a chunked scan's
  `o.at[h, ml.ds(c * 64, 64)]` in `for c in ml.range(T // 64)`): the loop stops short of the end, so the fix is its
  trip count, ml.cdiv(n, t), not the grid's programs that uncovered_error's hint names; None otherwise."""
  import numpy as np
  from .ops.control import For
  from .ops.elementwise import Binary, BinOp
  from .ops.memory import View
  from .races import _written_op
  op = _written_op(kernel.body, None, loc)
  ref = getattr(op, "ref", getattr(op, "dst", None)) if op is not None else None
  defs = {r.id: o for o in ir.walk(kernel.body) for r in o.results}
  view = defs.get(getattr(ref, "id", None))
  if not isinstance(view, View) or len(view.index) != len(shape):
    return None
  covered = ~np.asarray(missing, bool)
  if not covered.any():
    return None
  loops = [o for o in ir.path_to(kernel.body, op) if isinstance(o, For)]
  for d, idx in enumerate(view.index):
    if covered.any(axis=tuple(a for a in range(covered.ndim) if a != d)).all() or not isinstance(idx.start, ir.Value):
      continue
    t = 1 if idx.squeeze else idx.size
    mul = defs.get(idx.start.id)
    for loop in loops:
      iv = loop.body.args[0]
      scaled = (idx.start is iv and t == 1) or (
          isinstance(mul, Binary) and mul.kind == BinOp.MUL and iv in (mul.lhs, mul.rhs)
          and any(type(x) is int and x == t for x in (mul.lhs, mul.rhs)))
      if not scaled or not all(isinstance(x, int) for x in (loop.start, loop.stop, loop.step)) or loop.start != 0 \
          or loop.step != 1 or not 0 < loop.stop * t < shape[d]:
        continue
      n, need = shape[d], -(-shape[d] // t)
      head = (f"the loop at line {loop.loc.lineno} runs {loop.stop} trips of {t}, which reach {loop.stop * t} of the"
              f" {n} along {name}'s dimension {d}: ")
      if n % t == 0:
        return head + f"run {need} trips, so that its windows reach the end; or write the rest after the loop"
      return (head + f"run ml.cdiv({n}, {t}) = {need} trips rather than {n} // {t}" + _cdiv_header(loop.loc)
              + "; the last window then runs past the end, where ml.copy loads read zeros and ml.copy stores drop"
              f" what falls outside the array, while a register store needs a mask of {name}'s extent,"
              f" {_masked_store(view, name, len(shape))}; or write the rest after the loop")
  for d, idx in enumerate(view.index):       # another start the loop moves (a loop counting down): its bounds
    if covered.any(axis=tuple(a for a in range(covered.ndim) if a != d)).all() or not isinstance(idx.start, ir.Value):
      continue
    loop = next((lp for lp in reversed(loops) if _reaches(defs, idx.start, lp.body.args[0])), None)
    if loop is not None:
      return (f"the loop at line {loop.loc.lineno} moves this window along {name}'s dimension {d}, and none of its"
              f" trips reaches the rest: change its bounds so that its windows cover {name} (Python's range stops"
              f" before its end: range(n - 1, -1, -1) walks down to 0), or write the rest after the loop")
  return None


def _reaches(defs, v, target, depth=0) -> bool:
  """Whether the scalar `v` is computed from `target` (a loop counter) through the ops that define it."""
  if v is target:
    return True
  d = defs.get(getattr(v, "id", None))
  if d is None or depth > 32:
    return False
  return any(isinstance(x, ir.Value) and _reaches(defs, x, target, depth + 1) for x in d.operands())


def _cdiv_header(loc) -> str:
  """`, for c in ml.range(ml.cdiv(a, b))`: the loop header at `loc` with its trip count `a // b` written ml.cdiv(a,
  b), as the user would write it; "" where it has none."""
  import ast
  line = (getattr(loc, "source_line", "") or "").strip()
  try:
    node = ast.parse(line + " pass").body[0] if line.startswith("for ") and line.endswith(":") else None
  except SyntaxError:
    node = None
  if not isinstance(node, ast.For):
    return ""
  found = []

  class Cdiv(ast.NodeTransformer):
    def visit_BinOp(self, b):
      if isinstance(b.op, ast.FloorDiv):
        found.append(b)
        return ast.Call(ast.Attribute(ast.Name("ml"), "cdiv"), [self.visit(b.left), self.visit(b.right)], [])
      return self.generic_visit(b)

  it = Cdiv().visit(node.iter)
  return f", for {ast.unparse(node.target)} in {ast.unparse(it)}" if len(found) == 1 else ""


def _masked_store(view, name, rank) -> str:
  """The store into the window `view` under the mask of `name`'s extent, in the user's words where they read."""
  from .memory_errors import _extent_mask
  loc = view.loc
  line, a, b = getattr(loc, "source_line", "") or "", loc.col_offset, getattr(loc, "end_col_offset", None)
  text = line[a:b] if b is not None and loc.end_lineno == loc.lineno else ""
  ext = _extent_mask(text, name, rank) if ".at[" in text else None
  return f"{text}.store(value, mask={ext}" if ext else f"{name}.at[...].store(value, mask=...)"
