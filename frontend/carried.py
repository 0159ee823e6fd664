"""What a loop or an if carries: register values and numbers, or (nested) tuples and lists of
them, split into leaves and rebuilt; their types compared, and the words messages use for them
(frontend/flow.py traces the loops, frontend/branches.py the ifs)."""
from __future__ import annotations

import ast
import re

from . import errors as E
from . import ir
from .builder import Call
from .dtypes import DType
from .infer import unify
from .ops import elementwise as ew
from .ops.elementwise_checks import python_int_range
from .ops.base import Num, a_an, is_value, kind_of, value_words
from .types import RefType, ScalarType, TensorType, dtype_name, resolve


def is_carriable(v) -> bool:
  """A register value, or a Python number (a bool too: a flag set in a runtime if becomes a
  boolean scalar, as an int becomes an int32 one)."""
  return (is_value(v) and not isinstance(v.type, RefType)) or isinstance(v, Num)


def as_value(tracer, v, loc, note=None, dtype=None):
  """`v` as a value: a Python number becomes a constant (of `dtype`, the one a weakly typed number
  takes where given), any error about it reported at `loc` (the assignment that bound it), with
  `note` (the loop or if that made it a value)."""
  if is_value(v):
    return v
  from .ops.base import TypedFloat, TypedInt
  if dtype is None and isinstance(v, (TypedInt, TypedFloat)):   # jnp.int8(0): its dtype, as jnp's carry keeps
    v, dtype = (float if isinstance(v, TypedFloat) else int)(v), v.dtype
  try:
    return ew.constant(Call(tracer.b, loc), v, dtype)
  except E.KernelError as e:
    if note:
      e.notes = e.notes + (note,)
    raise


def is_weak(v) -> bool:
  """A Python number (not a bool, not jnp.float32(c)) a loop or if may give another dtype of its
  kind, as JAX does with weakly typed values."""
  return type(v) in (int, float)


def weak_dtype(v, other):
  """The dtype the Python number `v` takes to meet the register value `other` (a bfloat16
  scalar for t = 0.0 meeting one), or None where it keeps its own (and a mismatch is an error)."""
  if not is_weak(v) or not is_value(other) or not isinstance(other.type, ScalarType):
    return None
  k = ew.weak_kind(other.type.dtype)
  if k != ("float" if isinstance(v, float) else "int"):
    return None
  lo, hi, _ = python_int_range(other.type.dtype)
  if isinstance(v, int) and not lo <= v <= hi:
    return None
  return other.type.dtype


def same_type(a: ir.Value, b: ir.Value, loc) -> bool:
  ta, tb = a.type, b.type
  if type(ta) is not type(tb) or ta.shape != tb.shape:
    return False
  return unify(ta.dtype, tb.dtype, loc, "loop-carried value") is not None


def describe(v) -> str:
  """A value in the user's words: a bfloat16 scalar, a float32 tensor of shape (128,), a GMEM ref."""
  if is_value(v) and isinstance(v.type, RefType):
    return f"{a_an(dtype_name(v.type.dtype))} {v.type.space} ref of shape {tuple(v.type.shape)}"
  if is_value(v):
    return value_words(v)
  if type(v) in (tuple, list):
    return f"a {type(v).__name__} of {len(v)}"
  return kind_of(v)


def start_kind(v) -> str:
  """What a name holds when a loop starts, in words: None, a ref, a Python object."""
  if v is None:
    return "None"
  return describe(v)


def initial_value(n, v) -> str:
  """The assignment that starts `n` as the kind of value `v` (a register value or a number)."""
  if isinstance(v, Num):
    return f"{n} = {type(v)(0)!r}"
  t = v.type
  if isinstance(t, TensorType):
    return f"{n} = ml.zeros({tuple(t.shape)!r}, jnp.{dtype_name(t.dtype)})"
  if t.dtype == DType.f32:
    return f"{n} = 0.0"
  if t.dtype == DType.i32:
    return f"{n} = 0"
  return f"{n} = ml.cast(0, jnp.{dtype_name(t.dtype)})"


def _is_name(e, n) -> bool:
  import ast
  return isinstance(e, ast.Name) and e.id == n


def _sentinel_uses(n, stmts):
  """(whether `stmts` test `n is None`, 'max' or 'min' where they compare a value above or below `n`:
  `v > n` or `n < v` is a running maximum's test)."""
  import ast
  tests, kind = False, None
  for e in (x for st in stmts for x in ast.walk(st)):
    if not isinstance(e, ast.Compare) or len(e.ops) != 1:
      continue
    left, right, op = e.left, e.comparators[0], e.ops[0]
    if isinstance(op, (ast.Is, ast.IsNot)) and any(_is_name(a, n) for a in (left, right)) and any(
        isinstance(a, ast.Constant) and a.value is None for a in (left, right)):
      tests = True
    elif kind is None and isinstance(op, (ast.Gt, ast.GtE, ast.Lt, ast.LtE)) and _is_name(left, n) != _is_name(right, n):
      above = isinstance(op, (ast.Gt, ast.GtE)) == _is_name(right, n)
      kind = "max" if above else "min"
  return tests, kind


def extreme_text(d, low: bool) -> str:
  """The lowest (`low`) or highest value of dtype `d` as a user writes it: where a running max (min) starts."""
  if d.is_float:
    return f"float('{'-' if low else ''}inf')"
  return f"jnp.iinfo(jnp.{dtype_name(d)}).{'min' if low else 'max'}"


def none_start_hint(n, v, stmts, where: str) -> str:
  """The hint for `n = None` before a loop or if (`where`) whose body (`stmts`) makes `n` the value
  `v`. Python's sentinel, `if best is None or v > best:`, is decided while tracing (a value is never
  None), so a start of 0 would lose to every negative value: a running maximum (minimum) starts at
  the lowest (highest) value of its dtype instead; any other test of `n is None`, a flag."""
  start = initial_value(n, v)
  tests, kind = _sentinel_uses(n, stmts)
  if not tests:
    return f"start it as {start} before {where}"
  t = getattr(v, "type", None)
  d = resolve(t.dtype) if isinstance(t, (ScalarType, TensorType)) else DType.f32 if isinstance(v, float) else DType.i32
  drop = (f"; `{n} is None` is then False (a kernel decides `is` while tracing, and a value is never None),"
          f" so the first trip's test is the comparison")
  if kind is not None and d != DType.bool_ and (d.is_float or d.is_int):
    low = kind == "max"
    value = extreme_text(d, low)
    if isinstance(t, TensorType):
      value = f"ml.full({tuple(t.shape)!r}, {value}, jnp.{dtype_name(d)})"
    return (f"start it as {n} = {value} before {where}, the {'lowest' if low else 'highest'} {dtype_name(d)}, which the"
            f" first value compared with it replaces" + drop)
  return (f"start it as {start} before {where}, and test a flag instead of `{n} is None` (a kernel decides `is`"
          f" while tracing, and a value is never None): have = False before {where}, `not have` where `{n} is"
          f" None` stood, and have = True where {n} is set")


def list_change_hint(tracer, n, before, new, loop) -> str:
  """The hint for a list or tuple `n` a run-time loop rebinds to another length or kind (`vals.append(x[i])`):
  its trips are not known while tracing, so each trip's value goes into memory (an output, named as the
  kernel's, at the loop's index) and is read back from there; unrolling is for static counts."""
  import ast
  if not (type(before) in (list, tuple) and type(new) in (list, tuple) and len(new) != len(before)):
    return "use ml.static_range to unroll the loop, or compute it before the loop"
  item = None
  for e in (x for st in loop.body for x in ast.walk(st)):
    if isinstance(e, ast.Call) and isinstance(e.func, ast.Attribute) and _is_name(e.func.value, n) \
        and e.func.attr == "append" and len(e.args) == 1:
      item = e.args[0]
    elif isinstance(e, ast.AugAssign) and _is_name(e.target, n) and isinstance(e.value, ast.List) and len(e.value.elts) == 1:
      item = e.value.elts[0]                                  # vals += [v]
    elif isinstance(e, ast.BinOp) and _is_name(e.left, n) and isinstance(e.right, ast.List) and len(e.right.elts) == 1:
      item = e.right.elts[0]                                  # vals = vals + [v]
    if item is not None:
      break
  outs = [o.name for o in getattr(tracer.b, "output_refs", []) if (o.name or "").isidentifier()]
  i = loop.target.id if isinstance(loop, ast.For) and isinstance(loop.target, ast.Name) else "t"
  store = f"{outs[0] if outs else 'out'}[{i}] = {tracer.text(item)}" if item is not None else f"out.at[{i}][...] = v"
  return (f"a run-time loop cannot change {n}'s length (its trips are not known while tracing): store each trip's"
          f" value instead, {store}, and read the values back from memory after the loop (or fold them into a"
          f" value the loop carries: acc = acc + ...); ml.static_range unrolls a loop whose count is static")


def structure(v):
  """(leaves, rebuild) of a value a loop or branch can carry: one register value or number, or
  a (nested) tuple or list of them; None for anything else."""
  if is_carriable(v):
    return [v], lambda ls: ls[0]
  if hasattr(v, "carry_leaves"):    # a block pointer (ops/block_ptrs.py): its offsets, the rest static
    inner = structure(tuple(v.carry_leaves()))
    return None if inner is None else (inner[0], lambda ls: v.with_leaves(inner[1](ls)))
  if type(v) is dict and v:       # a dict of static keys (probe 59c): its values, keys kept in order
    inner = structure(tuple(v.values()))
    return None if inner is None else (inner[0], lambda ls: dict(zip(v.keys(), inner[1](ls))))
  if type(v) in (tuple, list) and v:
    parts = [structure(e) for e in v]
    if any(p is None for p in parts):
      return None
    kind = type(v)

    def rebuild(ls):
      out, i = [], 0
      for leaves, rb in parts:
        out.append(rb(ls[i:i + len(leaves)]))
        i += len(leaves)
      return kind(out)
    return [l for leaves, _ in parts for l in leaves], rebuild
  return None


class Carry:
  """A name a loop carries: one value, or a tuple or list of them (each leaf one loop value)."""

  def __init__(self, name, value):
    self.name, self.value = name, value
    self.leaves, self.rebuild = structure(value)
    self.container = not is_carriable(value)
    self.leaf_names = [name + p for p in leaf_paths(value)]


def leaf_paths(v, prefix="") -> list[str]:
  """The index path of each leaf of a (nested) tuple, list or dict: ["[0]", "[1][0]", "['a']", ...]."""
  if type(v) is dict:
    return [p for k, e in v.items() for p in leaf_paths(e, f"{prefix}[{k!r}]")]
  if type(v) in (tuple, list) and not is_carriable(v):
    return [p for i, e in enumerate(v) for p in leaf_paths(e, f"{prefix}[{i}]")]
  if hasattr(v, "carry_leaves"):
    return [f"{prefix}.offsets[{i}]" for i in range(len(v.carry_leaves()))]
  return [prefix]


def carries_of(env, names, forced=frozenset()) -> list:
  """The names a loop carries: bound before it to a register value or number, or to a tuple or
  list of them holding a register value; a tuple of numbers only when tracing the body showed that
  it changes (`forced`, see _Attempt): its leaves then become scalars, as a number does."""
  out = []
  for n in names:
    if n not in env or structure(env[n]) is None:
      continue
    c = Carry(n, env[n])
    if c.container and not any(is_value(l) for l in c.leaves) and n not in forced:
      continue
    out.append(c)
  return out


def conversion(dtype, raw=None) -> str:
  """How to make a value of `dtype` from `{}`: a literal for a Python number (`flag = 1`, not
  True.astype), a comparison for a bool (casts to bool do not exist), else .astype."""
  d = dtype_name(dtype)
  if isinstance(raw, (bool, int, float)):
    v = bool(raw) if d == "bool" else float(raw) if d.startswith(("float", "bfloat")) else int(raw)
    return repr(v)
  if d == "bool":
    return "{} != 0"
  return "{}.astype(jnp." + d + ")"


def rebuilt(name, value, leaf_name, fix) -> str:
  """`leaf = fix(leaf)` for a plain carry; for a leaf of a carried tuple (`st[1][1]`, whose items
  cannot be assigned), the tuple rebuilt with that leaf fixed: st = (st[0], (st[1][0], fix))."""
  path = [int(i) for i in re.findall(r"\[(\d+)\]", leaf_name[len(name):])]
  if not isinstance(value, (tuple, list)) or not path:
    return f"{leaf_name} = {fix.format(leaf_name)}"

  def build(expr, v, rest):
    if not rest:
      return fix.format(expr)
    if not isinstance(v, (tuple, list)) or rest[0] >= len(v):
      raise IndexError
    items = [build(f"{expr}[{i}]", x, rest[1:]) if i == rest[0] else f"{expr}[{i}]" for i, x in enumerate(v)]
    body = ", ".join(items) + ("," if len(items) == 1 and isinstance(v, tuple) else "")
    return f"({body})" if isinstance(v, tuple) else f"[{body}]"
  try:
    return f"{name} = {build(name, value, path)}"
  except IndexError:
    return f"{leaf_name} = {fix.format(leaf_name)}"


def carry_slices(inits, carries, c):
  """The initial values of carry `c`'s leaves."""
  i = 0
  for d in carries:
    if d is c:
      return inits[i:i + len(c.leaves)]
    i += len(d.leaves)
  return ()


def structure_shape(v):
  """The nesting of a tuple or list (its lengths), leaves left out: a list may become a tuple of
  the same shape and back (a list literal rebuilt by a comprehension), as in Python."""
  if type(v) in (tuple, list):
    return tuple(structure_shape(e) for e in v)
  if type(v) is dict:
    return ("dict",) + tuple((k, structure_shape(e)) for k, e in v.items())
  if hasattr(v, "carry_leaves"):    # two block pointers carry alike where their static parts agree
    return v.static_key()
  return None


def static_equal(a, b) -> bool:
  try:
    if any(is_value(l) for x in (a, b) for l in (structure(x) or ([x], None))[0]):
      return False
    return type(a) is type(b) and bool(a == b)
  except Exception:
    return False


def int_float_hint(name, value, leaf_name, int_side, float_side, raw_int, start=None, where="") -> str | None:
  """The hint for a name that is an integer on one path (a loop's entry or an if's branch) and a
  float on the other: where the integer is a Python int the user wrote (`s = 1`, then `s = 0.5`
  or `s *= 0.5` on the other path), write that int as a float (`s = 1.0`), as converting the float
  back would drop its fraction; else convert the integer side to the float's dtype. `start`: the
  Python number a loop carry entered as; `where`: " before the loop" / " before the if"; None
  where the two are not an integer and a float of one shape."""
  ti, tf = getattr(int_side, "type", None), getattr(float_side, "type", None)
  if ti is None or tf is None or tuple(ti.shape) != tuple(tf.shape):
    return None
  di, df = resolve(ti.dtype), resolve(tf.dtype)
  if not (isinstance(di, DType) and isinstance(df, DType) and di.is_int and df.is_float):
    return None
  py = raw_int if type(raw_int) is int else start if type(start) is int else None
  if py is not None:
    fix = rebuilt(name, value, leaf_name, repr(float(py)))
    if where.startswith(" before the loop"):     # as frontend/flow.py words it
      return f"start it as a float{where}: {fix} (a Python int starts an int32 carry)"
    return f"make it a float{where}: {fix} (a Python int makes an int32 {'tensor' if ti.shape else 'scalar'})"
  fix = rebuilt(name, value, leaf_name, "{}.astype(jnp." + dtype_name(df) + ")")
  return f"convert the integer to a float{where}: {fix}"


def widened_int_hint(name, value, leaf_name, init, leaf, where="") -> str | None:
  """The hint for an integer carry an iteration widens (`i = s[0]` of uint8, then `i = i.astype(jnp.int32) + 7`,
  as the narrow-index check asks): widen it where it starts; converting it back would wrap again. None for
  another change of type."""
  a, b = resolve(init.type.dtype), resolve(leaf.type.dtype)
  if not (isinstance(a, DType) and isinstance(b, DType) and a.is_int and b.is_int and a.bits < b.bits
          and b.int_range[0] <= a.int_range[0] and a.int_range[1] <= b.int_range[1]
          and init.type.shape == leaf.type.shape):
    return None
  fix = "{}.astype(jnp." + dtype_name(leaf.type.dtype) + ")"
  return (f"widen it{where}: {rebuilt(name, value, leaf_name, fix)} (a loop carries a value in the type it enters"
          f" with; converting it back to {dtype_name(init.type.dtype)} wraps as that type does)")


class Force(Exception):
  """A tuple or list of numbers only (`st = (0, 0.0)`, lax.while_loop's `(0, 0.0)` init) that the condition
  reads and the body rebinds: carried only once tracing shows it changes, it left the condition a Python value
  on the first trace; the loop is traced again carrying its leaves as scalars (probe 51d)."""

  def __init__(self, names):
    super().__init__(sorted(names))
    self.names = set(names)


def force_number_tuples(env, node, assigned, forced, before) -> None:
  """Raise Force for the tuples (lists) of numbers only, not yet carried, among the names the while loop
  rebinds (those its condition reads first): _unrolled_while already found the condition a run-time value
  after a trip, so what it reads changes at run time, as lax.while_loop traces its carry (flow.py retraces)."""
  loose = {n for n in assigned if n not in forced and n in before and structure(before[n]) is not None
           and Carry(n, before[n]).container and not any(is_value(l) for l in Carry(n, before[n]).leaves)}
  read = {n.id for n in ast.walk(node.test) if isinstance(n, ast.Name)} & loose
  if read or loose:
    raise Force(read or loose)
