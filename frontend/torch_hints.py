"""Hints for torch's tensor methods on a register tensor (code ported from PyTorch and from Triton
kernels written beside it: `x.float()`, `v.clamp(min=0.0)`, `g.sigmoid()`), in the user's words."""
from __future__ import annotations

from .loc import expr_of

_CASTS = {"float": "float32", "half": "float16", "bfloat16": "bfloat16", "double": "float64", "int": "int32",
          "long": "int64", "short": "int16", "bool": "bool_"}
_FUNCS = frozenset({"exp", "log", "sqrt", "rsqrt", "sigmoid", "tanh", "abs", "sin", "cos", "exp2", "log2", "erf",
                    "floor", "ceil", "round", "log1p", "expm1", "erfc"})


def _atom(text: str) -> str:
  import ast
  node = expr_of(text)
  if node is None:
    return f"({text})"
  return text if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)) else f"({text})"


def torch_method_hint(attr: str, recv: str, args) -> str | None:
  """What to write for torch's `recv.<attr>(args)` (`args`: the call's arguments as written, None where it
  is not called), or None where it is no torch method with an ml form."""
  if args is None:
    return None
  if attr.endswith("_") and not attr.startswith("_") and (h := torch_method_hint(attr[:-1], recv, args)):
    # torch.optim's in-place updates (exp_avg.mul_(b1).add_(g, alpha=1 - b1), p.addcdiv_(m, d, value=-lr))
    again = (f"; rebind the name, {recv} = ..., as register values do not change in place (torch's .{attr}"
             f" changes its tensor)") if recv.isidentifier() else f" (torch's in-place .{attr} is this value here)"
    return h + again
  r = _atom(recv)
  if attr in _CASTS and not args:
    d = _CASTS[attr]
    tail = (" (torch's .long() is int64, which a kernel computes in only with jax_enable_x64; an index fits"
            f" int32: {r}.astype(jnp.int32))") if attr == "long" else ""
    return f"write {r}.astype(jnp.{d}){tail}"
  if attr in _FUNCS and not args:
    return f"write ml.{attr}({recv})"
  if attr in ("clamp", "clamp_min", "clamp_max", "clip") and args and (h := clamp_hint(attr, recv, args)):
    return h
  if attr == "pow" and len(args) == 1 and "=" not in args[0]:
    return f"write {r} ** {_atom(args[0])}"
  from .aten_hints import method_hint       # the operators and the other ATen methods
  return method_hint(attr, recv, args)


def clamp_hint(attr: str, x: str, args) -> str | None:
  """`write ml.clip(x, lo, hi)` (or ml.maximum, ml.minimum where one bound is given) for torch's and
  Triton's clamp of `x` (`args`: the bounds as written, positional or min=/max=); None without bounds."""
  pos = [a for a in args if "=" not in a.split("(")[0]]
  kw = {k.strip(): v.strip() for k, v in (a.split("=", 1) for a in args if "=" in a.split("(")[0])}
  lo = kw.get("min", pos[0] if pos and attr != "clamp_max" else None)
  hi = kw.get("max", pos[1] if len(pos) > 1 else pos[0] if pos and attr == "clamp_max" else None)
  if lo is not None and hi is not None:
    return f"write ml.clip({x}, {lo}, {hi})"
  if lo is not None:
    return f"write ml.maximum({x}, {lo})"
  if hi is not None:
    return f"write ml.minimum({x}, {hi})"
  return None
