"""The output a hint's store writes, by the name the kernel gave it (probe 50b): hints that pad a tensor and store
its first elements under a mask wrote `out.at[...]` whatever the kernel's output was called (`o`, `y_ref`)."""
import ast


def stored_into(cx, default="out") -> str:
  """The name of the ref the statement at `cx.loc` stores into (`o[...] = v.reshape(2, 2)`, `o.at[i][...] = ...`,
  `ml.store(o, ...)`, `o.at[...].store(...)`), else the kernel's only output's name, else `default`."""
  outs = [o.name for o in getattr(cx.b, "output_refs", ()) if (o.name or "").isidentifier()]
  line = getattr(cx.loc, "source_line", "") or ""
  try:
    stmt = ast.parse(line.strip()).body[0]
  except (SyntaxError, IndexError):
    stmt = None
  base = None
  if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
    base = stmt.targets[0]
  elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and isinstance(stmt.value.func, ast.Attribute) \
      and stmt.value.func.attr == "store":
    f = stmt.value.func
    ml_form = isinstance(f.value, ast.Name) and f.value.id == "ml"
    base = (stmt.value.args[0] if stmt.value.args else None) if ml_form else f.value
  while isinstance(base, (ast.Subscript, ast.Attribute)) and not (isinstance(base, ast.Attribute) and base.attr != "at"):
    base = base.value
  if isinstance(base, ast.Name) and base.id in outs:
    return base.id
  return outs[0] if len(outs) == 1 else default
