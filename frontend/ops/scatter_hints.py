"""Hints that write a scatter: an atomic window outside its array as the scatter it becomes (`scatter_text`), a
write at computed places as an atomic scatter or a row at a time, the output (or the input aliased to it) to
scatter into, a tensor's values as int32 indices."""
from __future__ import annotations

from .index_hints import _atom, index_texts


def scatter_text(root, index, d, pos=None, texts=None) -> str:
  """`root.at[...]` of the window `index` over `root`, its dimension d indexed by the positions
  `start + ml.arange(size)` (or `pos`): a scatter, whose updates past the end are dropped (an atomic
  update takes no mask). A run-time start shows as the user's text of the index (`texts`, see
  index_texts) or its name (`start` if neither)."""
  def text(k, x):
    if isinstance(x, int):
      return str(x)
    if texts is not None:
      return texts[k]
    return x.name or ("start" if k == d else f"i{k}")

  parts = []
  for k, (i, n) in enumerate(zip(index, root.type.shape)):
    s = text(k, i.start)
    if k == d:
      s = s if s.isidentifier() or s.lstrip("-").isdigit() or _atom(s) else f"({s})"
      parts.append(pos or (f"ml.arange({i.size})" if s == "0" else f"{s} + ml.arange({i.size})"))
    elif i.squeeze:
      parts.append(s)
    else:
      parts.append(":" if (i.start, i.size) == (0, n) else f"ml.ds({s}, {i.size})")
  while parts and parts[-1] == ":":
    parts.pop()
  return f"{root.name or 'out'}.at[{', '.join(parts)}]"


def _atomic_value(loc) -> str:
  """The value of the atomic call at `loc` as the user wrote it (`ml.dot(a_s, b_s)`), else `value`."""
  import ast
  from ..loc import call_at
  node = call_at(loc)
  v = (node.args[1] if node is not None and len(node.args) > 1 else
       next((k.value for k in node.keywords if k.arg in ("val", "value")), None) if node is not None else None)
  return ast.unparse(v) if v is not None else "value"


def atomic_outside_hint(op, root, index, d, n, full, before) -> str:
  """The hint of an atomic update whose window (`index` over `root`, n elements along dimension d
  of size `full`) starts before 0 (`before`) or runs past the end in some program: a scatter drops
  what is past the end, and a negative index counts from the end, so those before 0 are sent past it."""
  what = f"ml.atomic_{op.kind.value}"
  loc = op.loc
  line = loc.source_line[loc.col_offset:loc.end_col_offset] if loc.end_lineno == loc.lineno else ""
  texts = index_texts(line, root.name, len(index)) if line else None
  if before:
    at = scatter_text(root, index, d, f"ml.where(pos >= 0, pos, {full})", texts)
    start = index[d].start
    start = texts[d] if texts else start if isinstance(start, int) else start.name or "start"
    start = start if str(start).isidentifier() or str(start).lstrip("-").isdigit() or _atom(str(start)) else f"({start})"
    text = (f"index the window with positions, pos = {start} + ml.arange({n}), moving the ones before 0 past"
            f" the end, where a scatter drops them (a negative index counts from the end): {what}({at},"
            f" {_atomic_value(loc)})")
  else:
    text = (f"index the window with a tensor of positions (a scatter), whose updates past the end are dropped:"
            f" {what}({scatter_text(root, index, d, texts=texts)}, {_atomic_value(loc)})")
  return text + (", start being the window's start" if "start +" in text else "")


def atomic_static_hint(what, root, index, d, start, size, n, text=None) -> str:
  """The hint of an atomic `what` (`ml.atomic_max`) whose window (`index` over `root`; `text`, the
  user's text of the window) is known while compiling to start before 0 or run past the end of
  dimension d (of n elements): the scatter of its positions, as atomic_outside_hint's."""
  texts = index_texts(text, root.name, len(index)) if text else None
  if start < 0:      # a negative index counts from the end: send those past it instead
    return (f"an atomic update must stay inside the array: index dimension {d} with positions instead,"
            f" pos = {start} + ml.arange({size}), moving the ones before 0 past the end, where they are"
            f" dropped (a negative index counts from the end):"
            f" {what}({scatter_text(root, index, d, f'ml.where(pos >= 0, pos, {n})', texts)}, value)")
  return (f"an atomic update must stay inside the array: index dimension {d} with a tensor instead,"
          f" {what}({scatter_text(root, index, d, texts=texts)}, value), which drops the elements past"
          f" the end (or ml.copy(buf, window, reduce=\"{what[len('ml.atomic_'):]}\") from SMEM, which TMA"
          f" clips)")


def aliased_input(b, name: str) -> str | None:
  """The input an output named `name` starts as (input_output_aliases), or None."""
  out = next((o for o in getattr(b, "output_refs", ()) if o.name == name), None)
  src = getattr(b, "alias_of", {}).get(out.id) if out is not None else None
  return src.name if src is not None else None


def scatter_set_hint(ref: str, index: str, value: str, mask: str | None = None, source: str | None = None) -> str:
  """The scatter that stores `value` at computed places (`c[tok, :] = v`, or with a mask
  `c.at[tok, :].store(v, mask=m)`), in the user's words, and what the elements it does not write hold."""
  how = (f"{ref}.at[{index}].store({value}, mask={mask})" if mask is not None else f"{ref}[{index}] = {value}")
  rest = (f"the elements it does not write keep {source}'s values (input_output_aliases)" if source is not None else
          "an output written only by scatters starts at 0")
  return f"scatter: {how} ({rest}; indices outside {ref} are dropped, as jnp's .at[].set drops them)"


def output_for(b, ref) -> str:
  """The kernel output a hint names for a write into the input `ref` (read-only): the one of its
  shape and dtype, else of its rank, else the first; "out" if none is known."""
  outs = [o for o in getattr(b, "output_refs", ()) if o.name]
  t = ref.type
  for same in (lambda o: o.type.shape == t.shape and o.type.dtype == t.dtype,
               lambda o: len(o.type.shape) == len(t.shape), lambda o: True):
    hit = next((o for o in outs if same(o)), None)
    if hit is not None:
      return hit.name
  return "out"


def scatter_target(b, ref, name: str) -> tuple[str, str]:
  """(what a scatter hint says first, the ref it scatters into): `name` itself, or for an input
  (read-only) a note and the output `output_for` picks."""
  from .memory import root
  r = root(b, ref)
  if r.id not in b.read_only or r.id in getattr(b, "aliased", ()):     # (an aliased input is written in place)
    return "", name
  out = output_for(b, r)
  return f"{name} is an input, which is read-only: scatter into an output ({out}) instead; ", out


def as_int_indices(text: str, x) -> str:
  """`text`, the user's words for index value `x`, converted where `x` is a tensor of float (or bool)
  indices (`t.astype(jnp.int32)`), as gathers and scatters take them: hints that index with it."""
  from .base import is_value
  from .elementwise_checks import method_on
  from ..dtypes import DType
  from ..types import TensorType, resolve
  d = resolve(x.type.dtype) if is_value(x) and isinstance(x.type, TensorType) else None
  return f"{method_on(text)}.astype(jnp.int32)" if isinstance(d, DType) and not d.is_int else text
