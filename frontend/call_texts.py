"""The user's own words for interpret mode's MaskedReductionError (MG953) hints: texts read from the call written
at an op's location (loc.call_at), so that lowering/interpret_padding.py, which finds the mistake, reads no source."""
from __future__ import annotations

import ast

from .loc import call_at

_WHERE_ARG = ("sum", "max", "min", "mean", "var", "std", "softmax", "log_softmax", "logsumexp", "any", "all")


def is_call(loc) -> bool:
  return call_at(loc) is not None


def as_sum(loc, arg) -> str:
  """The mean's call at `loc` as the sum it divides (its other arguments kept)."""
  node = call_at(loc)
  if node is None or not node.args:
    return f"ml.sum({arg or 'v'})"
  if isinstance(node.func, ast.Attribute):
    node.func.attr = "sum"
  return ast.unparse(node)


def called(loc, default):
  """(the function's text, its first argument's text) of the call at `loc`."""
  node = call_at(loc)
  if node is None:
    return default, None
  func = ast.unparse(node.func)
  if isinstance(node.func, ast.Attribute) and not (isinstance(node.func.value, ast.Name)
                                                   and node.func.value.id in ("ml", "tl", "jnp", "np")):
    return f"{func}()", ast.unparse(node.func.value)            # v.max(): the method of its tensor
  return func, ast.unparse(node.args[0]) if node.args else None


def keywords(loc) -> dict:
  """{name: text} of the keyword arguments of the call at `loc` (a masked load's mask= and other=)."""
  node = call_at(loc)
  return {k.arg: ast.unparse(k.value) for k in node.keywords} if node is not None else {}


def names_value(text: str, value) -> bool:
  """Whether `text` is a literal of `value` (else it names a constexpr, whose value the message adds)."""
  try:
    return ast.literal_eval(text) == value
  except (ValueError, SyntaxError):
    return False


def ds_positions(loc, axis: int) -> str | None:
  """`start + ml.arange(size)` of the `ml.ds(start, size)` that windows dimension `axis` of the TMA copy's
  source at `loc` (`ml.copy(x.at[..., ml.ds(s, n)], buf)`), or None where the call does not say it so."""
  node = call_at(loc)
  window = node.args[0] if node is not None and node.args else None
  if not (isinstance(window, ast.Subscript) and isinstance(window.value, ast.Attribute) and window.value.attr == "at"):
    return None
  items = window.slice.elts if isinstance(window.slice, ast.Tuple) else [window.slice]
  it = items[axis] if axis < len(items) and not any(
      isinstance(i, ast.Constant) and i.value is Ellipsis for i in items[:axis + 1]) else None
  if isinstance(it, ast.Call) and ast.unparse(it.func) in ("ml.ds", "tl.ds", "pl.ds") and len(it.args) == 2:
    return f"{ast.unparse(it.args[0])} + ml.arange({ast.unparse(it.args[1])})"
  return None


def with_where(loc, mask: str, ident: str) -> str | None:
  """The reduction's call at `loc` as the user wrote it, keeping only the lanes `mask` keeps: with `where=mask`
  where the function takes it (jnp's), else its first argument selected with the reduction's identity `ident`."""
  node = call_at(loc)
  if node is None or not node.args:
    return None
  name = node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
  try:
    m = ast.parse(mask, mode="eval").body
  except SyntaxError:
    return None
  if name in _WHERE_ARG and not any(k.arg == "where" for k in node.keywords):
    node.keywords.append(ast.keyword("where", m))
    return ast.unparse(node)
  node.args[0] = ast.parse(f"ml.where({mask}, {ast.unparse(node.args[0])}, {ident})", mode="eval").body
  return ast.unparse(node)


def keep_term(loc, side: int, keep: str, ident: str) -> tuple[str, str] | None:
  """(the accumulation at `loc`, it with its operand `side` (0 or 1) kept to the lanes `keep` selects, the
  identity `ident` elsewhere): `acc += d * d` -> `acc += ml.where(m, d * d, 0.0)`, `ml.maximum(acc, v)` ->
  `ml.maximum(acc, ml.where(m, v, float('-inf')))`; None where the line says it otherwise."""
  line, a, b = getattr(loc, "source_line", ""), getattr(loc, "col_offset", 0), getattr(loc, "end_col_offset", None)
  if not line or b is None or getattr(loc, "end_lineno", None) != getattr(loc, "lineno", None):
    return None
  text = line[a:b].strip()
  try:
    node = ast.parse(text).body[0]
  except (SyntaxError, IndexError):
    return None
  node = node.value if isinstance(node, ast.Expr) else node
  if isinstance(node, ast.AugAssign) and side == 1:
    parent, field = node, "value"
  elif isinstance(node, ast.BinOp):
    parent, field = node, ("left", "right")[side]
  elif isinstance(node, ast.Call) and len(node.args) == 2 and not node.keywords:
    parent, field = node.args, side
  else:
    return None
  term = parent[field] if isinstance(parent, list) else getattr(parent, field)
  sel = ast.parse(f"ml.where({keep}, {ast.unparse(term)}, {ident})", mode="eval").body
  if isinstance(parent, list):
    parent[field] = sel
  else:
    setattr(parent, field, sel)
  return text, ast.unparse(node)
