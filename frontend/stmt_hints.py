"""Hints for Python statements a kernel does not run (`import`, `global`, `del`, `try`), in the
words of the statement the user wrote, and for the Python builtins it does not call."""
from __future__ import annotations

import ast


def statement_hint(tracer, node) -> str | None:
  """What to write instead of statement `node`, or None for the generic hint."""
  if isinstance(node, (ast.Import, ast.ImportFrom)):
    return (f"move `{tracer.text(node)}` to the top of the module: the kernel reads the module's names (math.pi,"
            f" np.float32) while tracing, as static values")
  if isinstance(node, (ast.Global, ast.Nonlocal)):
    word = "global" if isinstance(node, ast.Global) else "nonlocal"
    names = ", ".join(node.names)
    return (f"drop `{word} {names}`: a kernel reads its module's (and closure's) names without it, and its"
            f" assignments bind names of its own; results go into output refs (out[...] = v)")
  if isinstance(node, ast.Delete):
    return ("drop the del: a kernel's names need no freeing (the compiler reuses registers and SMEM once a"
            " value is last read); a name no longer read is simply not used")
  if isinstance(node, ast.Try) or type(node).__name__ == "TryStar":
    return ("write the try body without try/except: a kernel raises nothing at run time (its mistakes are"
            " reported while compiling, or by interpret mode); choose between static cases with if")
  return None


def return_hint(tracer, node) -> str:
  """`return v` in a kernel: its results go into its output refs, named here (`out[...] = v`)."""
  outs = [o.name for o in getattr(tracer.b, "output_refs", []) if (o.name or "").isidentifier()]
  vals = node.value.elts if isinstance(node.value, ast.Tuple) else [node.value]
  if outs and len(vals) == len(outs) and not any(isinstance(v, ast.Name) and v.id in outs for v in vals):
    writes = "; ".join(f"{o}[...] = {tracer.text(v)}" for o, v in zip(outs, vals))
    return (f"kernels write their results into their output refs (the last parameters): {writes}, and end"
            f" with a bare return (or none)")
  if outs:
    return (f"kernels write their results into their output refs ({', '.join(outs)}: {outs[0]}[...] = v) and end"
            f" with a bare return (or none): the call returns the outputs")
  return "kernels write their results into output refs (the last parameters)"


_BUILTINS = {        # a builtin kernels do not call -> what to write instead
    "getattr": "write the attribute itself (ml.atomic_max rather than getattr(ml, 'atomic_max')); a static if"
               " picks between them",
    "hasattr": "write the attribute itself (ml.atomic_max rather than getattr(ml, 'atomic_max')); a static if"
               " picks between them",
    "next": "index a static tuple or list (parts[0]); a helper returns its values (return a, b), it does not"
            " yield them",
    "iter": "loop over the static tuple or list itself (for v in parts:), or index it (parts[0])",
    "map": "write a comprehension: [f(v) for v in parts] (f an @ml.inline helper or an ml.* function)",
    "filter": "write a comprehension with a static condition: [v for v in parts if cond]",
}


def builtin_hint(name: str, calls: str) -> str:
  """The hint for the Python builtin `name`, which kernels do not call (`calls`: those they do)."""
  what = _BUILTINS.get(name, f"write what {name}() would give out")
  return (f"kernels call these builtins on static values: {calls}; {what}, or compute it outside the kernel and"
          f" pass it as a constexpr")
