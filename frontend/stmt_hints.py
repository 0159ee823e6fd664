"""Hints for Python statements a kernel does not run (`import`, `global`, `del`, `try`), in the
words of the statement the user wrote, and for the Python builtins it does not call."""
from __future__ import annotations

import ast

from .env import names_restored


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
    "filter": "write a comprehension with a static condition: [v for v in parts if cond]",
}


def builtin_hint(name: str, calls: str) -> str:
  """The hint for the Python builtin `name`, which kernels do not call (`calls`: those they do)."""
  what = _BUILTINS.get(name, f"write what {name}() would give out")
  return (f"kernels call these builtins on static values: {calls}; {what}, or compute it outside the kernel and"
          f" pass it as a constexpr")


_FOLDS = {"sum": "{a} + {e}", "max": "ml.maximum({a}, {e})", "min": "ml.minimum({a}, {e})",
          "any": "{a} | ({e})", "all": "{a} & ({e})"}


def _fold_start(fold, kind) -> str:
  """What a run-time loop folding elements of `kind` (a ScalarType, None where unknown) with `fold` starts at."""
  from .carried import extreme_text
  from .types import DType, ScalarType
  d = kind.dtype if isinstance(kind, ScalarType) else None
  if fold in ("any", "all"):
    return "False" if fold == "any" else "True"
  integer = d is not None and d.is_int and d != DType.bool_
  if fold == "sum":
    return "0" if integer else "0.0"
  return extreme_text(d if integer else DType.f32, fold == "max")


def runtime_comprehension_hint(tracer, comp, gen, start) -> str:
  """A comprehension (or generator) over a `range` of run-time bounds (`sum(x[i] for i in range(n[0]))`):
  the run-time loop that folds its elements, written with the user's own element and range, where it is
  the argument of sum, max, min, any or all; else the loop that stores each element."""
  rng, tgt, elt = tracer.text(gen.iter), ast.unparse(gen.target), tracer.text(comp.elt)
  stmt = getattr(tracer, "stmt", None)
  call = next((n for n in ast.walk(stmt) if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)
               and n.args and n.args[0] is comp), None) if stmt is not None else None
  fold = call.func.id if call is not None and call.func.id in _FOLDS and len(call.args) == 1 else None
  head = f"a comprehension is unrolled while tracing, and {rng} counts at run time"
  if fold is None or len(comp.generators) != 1 or gen.ifs or not isinstance(gen.target, ast.Name):
    return (f"{head}: give it static bounds (ints or constexprs, shapes), or loop at run time, for {tgt} in {rng}: ...,"
            f" carrying what its elements make (a sum: acc = acc + {elt}) or storing each one")
  kind = None
  with names_restored(tracer.env, [gen.target.id]):
    try:                      # the element's kind, for the loop's starting value (the IR made here is dropped)
      tracer.env[gen.target.id] = start
      kind = getattr(tracer.eval(comp.elt), "type", None)
    except Exception:          # noqa: BLE001  (a hint only: the element's own mistake is reported where it is traced)
      pass
  acc = next(n for n in ("acc", "total", "result", "acc_") if n not in tracer.env and n != gen.target.id)
  step = _FOLDS[fold].format(a=acc, e=elt)
  return (f"{head}: loop at run time instead, {acc} = {_fold_start(fold, kind)}, then for {tgt} in {rng}:"
          f" {acc} = {step}, and use {acc} where {tracer.src.quote(call)} stood")


_NO_EFFECT = ("REG_READ", "MMA_READ", "MMA_ISSUE")


def dropped_value_error(tracer, node, value):
  """An expression statement that computes a register value and drops it: `ml.dot(a_s, b_s, acc)`
  (ml.dot returns acc + a @ b, it does not update acc: Triton's and Pallas's dots return theirs too),
  `acc.astype(jnp.float16)`, `acc * scale`. The op that made it has no other effect, so the statement
  does nothing and the kernel would go on with the old value. None where the statement is something
  else (a helper's call, a bare name or read, an op that writes memory)."""
  from . import ir
  from .ops.base import is_value
  expr = node.value
  call = isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute)
  if not (call or isinstance(expr, (ast.BinOp, ast.UnaryOp, ast.Compare))) or not is_value(value):
    return None
  if call:     # ml.dot(...), acc.astype(...): not a helper of the user's (utils.epilogue(acc, c) may store)
    base = expr.func.value
    held = (tracer.env.get(base.id, tracer.scope.get(base.id)) if isinstance(base, ast.Name) else None)
    if not (is_value(held) or getattr(held, "__name__", "") in ("mgpu_dsl.language", "mgpu_dsl.frontend.language")):
      return None
  op = tracer.b.defining(value)
  if op is None or op.regions or value not in op.results or any(
      a.name not in _NO_EFFECT for _, a in ir.traits_of(op).effects(op)):
    return None
  inner = tracer.b.defining(op.x) if type(op).__name__ == "Reshape" and is_value(getattr(op, "x", None)) else None
  if inner is not None and any(a.name not in _NO_EFFECT for _, a in ir.traits_of(inner).effects(inner)):
    return None         # (the old values of an atomic at a (t, k) index tile, reshaped back: ops/tile_gathers.py)
  from . import errors as E
  text = tracer.text(expr)
  fn = f"{tracer.text(expr.func)}" if call else None
  acc = None
  if call and fn.endswith("dot"):
    acc = expr.args[2] if len(expr.args) > 2 else next((k.value for k in expr.keywords if k.arg == "acc"), None)
  elif call and not expr.args[1:] and isinstance(expr.func.value, ast.Name):
    acc = expr.func.value                         # acc.astype(jnp.float16): the name it converts
  target = acc.id if isinstance(acc, ast.Name) else None
  what = (f"{fn} returns acc + a @ b and does not update {target or 'acc'} in place" if call and fn.endswith("dot")
          else f"{fn} returns a new value" if call else "the expression makes a new value")
  return E.KernelTypeError(
      f"the result of {text} is dropped: {what}, so this statement does nothing", tracer.loc(expr),
      hint=f"assign it: {target} = {text}" if target else _meant(tracer, expr) or
           f"assign it to a name and use that (y = {text}), or store it (out[...] = {text})")


_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//", ast.Mod: "%", ast.Pow: "**",
        ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^", ast.LShift: "<<", ast.RShift: ">>", ast.MatMult: "@"}


def _meant(tracer, expr) -> str | None:
  """The statement a dropped expression most likely meant: `out[...] == x[...]` (or `y == v * 2`) the assignment
  `=` typed as `==`; `acc + x[...]` (`acc * 0.5`) the update of the name on its left, `acc += x[...]`. None else."""
  if isinstance(expr, ast.Compare) and len(expr.ops) == 1 and isinstance(expr.ops[0], ast.Eq) and isinstance(
      expr.left, (ast.Name, ast.Subscript)):
    left, right = tracer.text(expr.left), tracer.text(expr.comparators[0])
    return f"== compares (and makes a new value); to assign or store, write one =: {left} = {right}"
  if isinstance(expr, ast.BinOp) and isinstance(expr.left, ast.Name) and type(expr.op) in _AUG:
    name, sym = expr.left.id, _AUG[type(expr.op)]
    return f"to update {name}, assign the result: {name} {sym}= {tracer.text(expr.right)} ({name} = {tracer.text(expr)})"
  return None


def in_hint(tracer, op, a, b, operands) -> str:
  """The hint of `in` / `not in` on run-time values: `k in (1, 2)` of a scalar is its == tests joined with |
  (!= with &); `0.0 in v` (`k not in v`) of a register tensor v is NumPy's any(v == 0.0) (all(v != k))."""
  from .ops.base import is_value
  from .types import TensorType
  if is_value(b) and isinstance(b.type, TensorType) and len(operands) > 1:
    t = tracer.text(operands[1]) if tracer.text(operands[1]).isidentifier() else f"({tracer.text(operands[1])})"
    return (f"reduce a comparison of every element: ml.any({t} == {tracer.text(operands[0])})" if op is ast.In
            else f"reduce a comparison of every element: ml.all({t} != {tracer.text(operands[0])})")
  name = tracer.text(operands[0]) if operands else "v"
  name = name if name.isidentifier() else f"({name})"
  items = list(b)[:4] if isinstance(b, (tuple, list)) and b and is_value(a) else [1.0, 2.0]
  if op is ast.NotIn:
    return "test each value with !=: " + " & ".join(f"({name} != {e!r})" for e in items)
  return "test each value with ==: " + " | ".join(f"({name} == {e!r})" for e in items)


def static_while_break_hint(cond, why) -> str:
  """The hint for `break` under the run-time condition `why` in a while on Python values (`cond`)."""
  loop = "while found == 0:" if cond in ("True", "1") else f"while ({cond}) & (found == 0):"
  return (f"this while loop's condition, {cond}, is on Python values, so the loop runs while tracing, unrolled,"
          f" and only a static condition can end it; for a run-time exit, fold it into the condition: found = 0"
          f" before the loop, {loop}, and found = ml.where({why}, 1, found) where the"
          f" break was (the rest of the body under if found == 0:)")


def one_element_hint(tracer, test, cond, word) -> str | None:
  """For a condition that is a one-element tensor other than a scalar's: its element is the scalar a condition
  needs."""
  from .ops.base import one_element
  if not one_element(cond.type.shape):
    return None
  text = tracer.text(test)
  simple = isinstance(test, (ast.Name, ast.Call, ast.Subscript, ast.Attribute))
  at = ", ".join("0" * len(cond.type.shape))
  return f"its one element is the scalar: {word} {text if simple else f'({text})'}[{at}]:"
