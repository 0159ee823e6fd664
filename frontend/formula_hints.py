"""The hints for a missing function that are a formula of its operands (`no ml.sign: ml.where(x > 0,
1.0, ...)`), written with the call's own arguments in place of `x` and `y` where the call passes
them: a kernel's `x` is often its input ref, so `ml.where(x > 0, ...)` followed literally would
compare a ref."""
from __future__ import annotations

import ast, re

# the missing function -> the placeholders its hint is written in, in the call's argument order
OPERANDS = {
    **dict.fromkeys(("sign", "sinh", "cosh", "asinh", "acosh", "atanh", "saturatef", "rcp", "sqrt_rn",
                     "llrint", "rint", "modf", "relu", "leaky_relu", "gelu", "fast_expf", "rcp_rn", "rsqrt_rn",
                     "ilogb"), ("x",)),
    **dict.fromkeys(("hypot", "fmin", "fmax", "fast_dividef", "mod", "remainder", "rem", "fdiv", "div_rn",
                     "divide", "true_divide", "floor_divide", "floordiv", "power", "fast_powf", "div_rz", "div_rd",
                     "div_ru"), ("x", "y")),
    "fma": ("x", "y", "z"),
}
_BIT_COUNTS = {**dict.fromkeys(("popc", "popcount", "population_count", "bitwise_count"), "popc"),
               **dict.fromkeys(("clz", "count_leading_zeros"), "clz")}
# jax's conversions of a register value -> the kernel's ({0}, {1}: the call's operands; {2}: {0} as an operand)
CONVERSIONS = {
    "bitcast_convert_type": "use ml.bitcast({0}, {1}): the same bits as another dtype, as lax's (of another width"
                            " too: a new last axis of parts, or the last axis joined)",
    **dict.fromkeys(("convert_element_type", "asarray", "array"),
                    "convert with {2}.astype({1}) (or ml.cast({0}, {1})); values in a kernel are arrays already"),
}
_NAMES = ("v", "t", "u", "w", "z", "val", "hint_in")


def with_operands(attr: str, hint: str, args, taken=frozenset()) -> str | None:
  """`hint` (written in OPERANDS[attr]) with the call's arguments (`args`: as written, keywords as
  `name=value`) in place of its placeholders; None where the call does not pass exactly those
  operands. An argument that computes something (`x[...] * 2`) and that the hint uses more than
  once is bound to a name first (one not in `taken`, the names of the kernel's file)."""
  from .bit_hints import bit_count_hint
  from .missing import _computed, _operand
  if attr in ("roll", "pad", "convolve", "correlate") and args:
    return _of_ref(hint, args[0], _operand)
  if attr in CONVERSIONS and args is not None and len(args) == 2 and not re.match(r"\s*\w+\s*=[^=]", args[0]):
    x, d = args[0].strip(), re.sub(r"^\s*(dtype|new_dtype)\s*=(?!=)", "", args[1]).strip()
    if not re.match(r"\s*\w+\s*=[^=]", d):
      return CONVERSIONS[attr].format(x, d, _operand(x))
  if attr in _BIT_COUNTS and args is not None and len(args) == 1 and not re.match(r"\s*\w+\s*=[^=]", args[0]):
    return bit_count_hint(_BIT_COUNTS[attr], args[0].strip())
  names = OPERANDS.get(attr)
  if names is None or args is None or len(args) != len(names) or any(re.match(r"\s*\w+\s*=[^=]", a) for a in args):
    return None
  args = [a.strip() for a in args]
  if attr in ("fmin", "fmax") and _number_and_tensor(args):
    return _fmin_fmax(attr, args, _operand)
  taken = set(taken) | set(re.findall(r"[A-Za-z_]\w*", " ".join(args)))
  free = (n for n in _NAMES if n not in taken)
  binds, values = [], {}
  for name, a in zip(names, args):
    if len(re.findall(rf"\b{name}\b", hint)) > 1 and _computed(a):
      v = next(free, "hint_in")
      binds.append(f"{v} = {a}")
      a = v
    values[name] = a

  def put(m):       # alone between parentheses or commas, as written; else as an operand
    before, after = hint[max(m.start() - 2, 0):m.start()], hint[m.end():m.end() + 1]
    alone = (before.endswith("(") or before == ", ") and after in (")", ",")
    a = values[m.group(0)]
    return a if alone else _operand(a)
  text = re.sub(r"\b(?:%s)\b" % "|".join(names), put, hint)
  if not binds:
    return text
  head, sep, rest = text.partition(": ")
  if sep and head.startswith("no ml."):
    return f"{head}: {'; '.join(binds)}, then {rest}"
  return f"with {'; '.join(binds)}: {text}"


def _number_and_tensor(args) -> bool:
  from .missing import _const
  return sum(_const(a) is not None for a in args) == 1


def _fmin_fmax(attr, args, operand) -> str:
  """fmin or fmax of a tensor and a number: only the tensor can be NaN (a NaN test of the number,
  `0.5 != 0.5`, would be a static bool, which ml.where does not take)."""
  from .missing import _const
  op = "minimum" if attr == "fmin" else "maximum"
  t = next(a for a in args if _const(a) is None)
  n = next(a for a in args if _const(a) is not None)
  return (f"no ml.{attr}: ml.{op}({args[0]}, {args[1]}) (NaN if either is NaN; for {attr}'s number over a NaN,"
          f" ml.where({operand(t)} != {operand(t)}, {n}, ml.{op}({args[0]}, {args[1]})))")


def _of_ref(hint: str, arg: str, operand) -> str | None:
  """A stencil's hint (written for a ref x and its window at s of n elements) for the value the
  call shifts, read from a ref: `a[...]` (x is a, from 0 over its length) or
  `a.at[ml.ds(start, n)][...]` (s and n too); None for another value (the hint's names stay)."""
  m = re.fullmatch(r"\s*([A-Za-z_]\w*)(?:\.at\[\s*(?:ml|tl)\.ds\((.+),\s*(\d+)\s*\)\s*\])?\[\.\.\.\]\s*", arg)
  if m is None:
    return None
  ref, start, size = m.groups()
  text = re.sub(r"\bx\b", ref, hint)
  if start is None:
    start, size = "0", f"{ref}.shape[0]"
    text = text.replace("s - 1", "-1").replace("(s + ", "(").replace("s + k - K", "k - K")
  text = re.sub(r"(?<!')\bs\b", lambda _: operand(start.strip()), text)
  return re.sub(r"(?<!')\bn\b", size, text)


def nan_to_num_form(x: str, nan: str = "0.0", posinf: str | None = None, neginf: str | None = None) -> str:
  """jnp.nan_to_num(x, nan=, posinf=, neginf=) written in ml.* functions (`x` as an operand): NaN to
  `nan`, +-inf to `posinf`/`neginf` where given, else to the dtype's largest finite values."""
  big = f"jnp.finfo({x}.dtype).max"
  if posinf is None and neginf is None:
    kept = f"ml.clip({x}, -{big}, {big})"
  else:
    kept = (f"ml.where({x} == float('inf'), {posinf if posinf is not None else big},"
            f" ml.where({x} == -float('inf'), {neginf if neginf is not None else '-' + big}, {x}))")
  return f"ml.where({x} != {x}, {nan}, {kept})"


def nan_to_num_hint(pos, kw) -> str | None:
  """The hint for jnp.nan_to_num(x, copy=True, nan=0.0, posinf=None, neginf=None) called in a kernel
  with `pos` and `kw` (its arguments as written: `kw` name -> its text), keeping the values it passes."""
  if not pos:
    return None
  vals = dict(zip(("copy", "nan", "posinf", "neginf"), pos[1:]))
  vals.update({k: v.strip().removeprefix(f"{k}=") for k, v in kw.items()})
  vals = {k: (None if v.strip() == "None" else v.strip()) for k, v in vals.items()}
  form = nan_to_num_form(operand(pos[0].strip()), vals.get("nan") or "0.0", vals.get("posinf"), vals.get("neginf"))
  return f"write {form}, as jnp.nan_to_num" + ("" if vals.get("posinf") and vals.get("neginf") else
                                                " (+-inf not given become the dtype's largest finite values)")


def operand(t: str) -> str:
  """An argument as written, as an operand of a binary operator: parenthesised unless it is a
  name, attribute, subscript, call or non-negative number."""
  try:
    e = ast.parse(t.strip(), mode="eval").body
  except SyntaxError:
    return f"({t})"
  if isinstance(e, (ast.Name, ast.Attribute, ast.Subscript, ast.Call, ast.Constant)) or _enclosed(t.strip()):
    return t
  return f"({t})"


def _enclosed(t: str) -> bool:
  """Whether `t` is one parenthesised expression, `(v - w)` (not `(a) * (b)`): an operand already."""
  depth = 0
  for k, c in enumerate(t):
    depth += (c == "(") - (c == ")")
    if depth == 0:
      return t[0] == "(" and k == len(t) - 1
  return False


# lax.reduce_precision's (exponent_bits, mantissa_bits) of the dtypes a kernel rounds through, and how
# that dtype's conversion differs from it
_ROUNDS_THROUGH = {(8, 7): ("bfloat16", ""), (5, 10): ("float16", ""),
                   (5, 2): ("float8_e5m2", ""),
                   (4, 3): ("float8_e4m3fn", "; float8_e4m3fn reaches 448 (reduce_precision's 4 exponent bits stop at"
                                             " 240, past which it gives inf), and NaN past 464")}


def reduce_precision_hint(pos, kw) -> str | None:
  """jax.lax.reduce_precision(x, exponent_bits, mantissa_bits) in a kernel (fake quantisation): a round
  trip through the dtype of those bits, where there is one."""
  vals = dict(zip(("operand", "exponent_bits", "mantissa_bits"), pos))
  vals.update({k: v.strip() for k, v in kw.items()})
  if "operand" not in vals:
    return None
  x = operand(vals["operand"].strip())
  try:
    bits = (int(vals.get("exponent_bits", "")), int(vals.get("mantissa_bits", "")))
  except ValueError:
    bits = None
  known = ", ".join(f"{d} for {e}, {m}" for (e, m), (d, _) in _ROUNDS_THROUGH.items())
  if bits not in _ROUNDS_THROUGH:
    return (f"round through a dtype of those bits and back, {x}.astype(jnp.bfloat16).astype({x}.dtype)"
            f" ({known})")
  d, note = _ROUNDS_THROUGH[bits]
  return (f"round through {d} and back: {x}.astype(jnp.{d}).astype({x}.dtype) (it keeps {d}'s subnormals, which"
          f" XLA's reduce_precision flushes to zero{note})")
