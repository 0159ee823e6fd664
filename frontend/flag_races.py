"""The hint of a race between programs that each may set one flag (probe 69a): torch.amp's found_inf, set where a
program's block holds an inf or nan, written as a plain write of the same element under a run-time condition
(`if has_inf: found_inf[0] = 1.0`) or as a masked store (`ml.store(found.at[0], 1.0, mask=has_inf)`, which is an `if`
in the IR). Several programs may set it, and one program's write is a race with another's (MG951); the window hints
(each program its own window, or one writer) do not fit a flag. Its fix is an atomic update every program makes,
`ml.atomic_max(found.at[0], ml.where(has_inf, 1.0, 0.0))`, whose result is the plain writes' meant value (0 where no
program sets it, as MG602's hint for the same flag says where no program does)."""
from __future__ import annotations

import ast

from . import ir
from .ir import Access as A

_WRITES = (A.REG_WRITE, A.TMA_WRITE)


def _enclosing_ifs(body, op):
  """The run-time Ifs whose branches hold `op`, outermost first, each with the branch that holds it."""
  from .ops.control import If
  return [(o, o.then_block if ir.path_to(o.then_block, op) else o.else_block)
          for o in ir.path_to(body, op)[:-1] if isinstance(o, If)]


def _same_loc(a, b) -> bool:
  key = lambda x: (getattr(x, "filename", None), getattr(x, "lineno", None), getattr(x, "col_offset", None))
  return a is b or (a is not None and b is not None and key(a) == key(b) and key(a)[1] is not None)


def _writes_into(defs, op, out_id) -> bool:
  from .memory_errors import _root
  return any(ref is not None and kind in _WRITES and _root(defs, ref).id == out_id
             for ref, kind in ir.traits_of(op).effects(op))


def _statement(loc):
  """The statement on `loc`'s line as an ast node (one line only), or None."""
  line = (getattr(loc, "source_line", "") or "").strip()
  try:
    tree = ast.parse(line)
  except SyntaxError:
    return None
  return tree.body[0] if len(tree.body) == 1 else None


def _written(loc):
  """(module alias, ref text, value text, mask text or None) of the write at `loc` as the user wrote it:
  `ml.store(ref, value, mask=m)`, `ref.store(value, mask=m)`, `ref[idx] = value`; None where it is none of them."""
  node = _statement(loc)
  if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Subscript):
    t = node.targets[0]
    whole = isinstance(t.slice, ast.Constant) and t.slice.value is Ellipsis
    ref = ast.unparse(t.value) if whole else f"{ast.unparse(t.value)}.at[{ast.unparse(t.slice)}]"
    return "ml", ref, ast.unparse(node.value), None
  call = node.value if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) else None
  if call is None or not isinstance(call.func, ast.Attribute) or call.func.attr != "store":
    return None
  kw = {k.arg: ast.unparse(k.value) for k in call.keywords if k.arg}
  f = call.func.value
  if isinstance(f, ast.Name) and f.id in ("ml", "tl") and len(call.args) >= 1:      # ml.store(ref, value, mask)
    value = ast.unparse(call.args[1]) if len(call.args) > 1 else kw.get("value")
    mask = ast.unparse(call.args[2]) if len(call.args) > 2 else kw.get("mask")
    return f.id, ast.unparse(call.args[0]), value, mask
  value = ast.unparse(call.args[0]) if call.args else kw.get("value")            # ref.store(value, mask=)
  mask = ast.unparse(call.args[1]) if len(call.args) > 1 else kw.get("mask")
  return "ml", ast.unparse(f), value, mask


def flag_hint(body, op=None, loc=None) -> str | None:
  """The hint for programs that each write one program-independent element of an output under a run-time
  condition (the op `op`, or the write at `loc`): an atomic max every program makes; None where the write is not
  such a flag."""
  from .if_holes import _condition
  from .memory_errors import _root, _same_window
  if body is None:
    return None
  if op is None:
    op = next((o for o in ir.walk(body) if _same_loc(getattr(o, "loc", None), loc) and any(
        ref is not None and kind in _WRITES for ref, kind in ir.traits_of(o).effects(o))), None)
  if op is None:
    return None
  refs = [ref for ref, kind in ir.traits_of(op).effects(op) if ref is not None and kind in _WRITES]
  if len(refs) != 1:
    return None
  defs = ir.def_table(body)
  out_id = _root(defs, refs[0]).id
  chain = _enclosing_ifs(body, op)
  if not chain or not _same_window(defs, op, out_id):
    return None
  cond_op, branch = chain[-1]
  other = cond_op.else_block if branch is cond_op.then_block else cond_op.then_block
  if any(_writes_into(defs, o, out_id) for o in ir.walk(other)):
    return None                        # both branches write it: not a flag some programs set
  words = _written(op.loc)
  if words is None or words[2] is None:
    return None
  mod, ref, value, mask = words
  tests = []
  for o, blk in chain:
    if _same_loc(o.loc, op.loc):       # a masked store: the If of its mask
      tests.append(mask)
      continue
    t = _condition(o.loc)
    if not t:
      return None                      # (a condition on several lines: not quoted)
    tests.append(t if blk is o.then_block else f"~({t})")
  if any(t is None for t in tests):
    return None
  if mask and mask not in tests:
    tests.append(mask)
  cond = tests[0] if len(tests) == 1 else " & ".join(f"({t})" for t in tests)
  where = "masked store" if tests == [mask] else "if"
  zero = "0.0" if any(ch in value for ch in ".e") else "0"
  return (f"several programs may set this flag, and a plain write of one element by several programs is a race:"
          f" make it an atomic update every program makes, {mod}.atomic_max({ref}, {mod}.where({cond}, {value},"
          f" {zero})) in place of the {where} (so it ends {zero} where no program sets it:"
          f" an output updated by atomics starts at the lowest value, not at 0)")
