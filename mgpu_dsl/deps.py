"""What a kernel reads from outside itself: module globals, closure cells, `@ml.inline` helpers.

The frontend parses a kernel once, against a snapshot of its globals. A notebook
that later rebinds `SCALE = 3` or redefines a helper must not keep running the old
kernel, so `Dependencies` records, when the kernel is parsed, every outside value
its source (and, transitively, the source of the helpers and plain functions it
calls) reads, and `changed()` compares them with the live values on each call: one
dict lookup per name. Numbers, strings, tuples and dtypes compare by value, and so do the
items of small lists and dicts of them (a config dict changed in place is a change; functions and
helpers held there compare by identity: `ACTS["relu"] = other` is a change too), every
other object by identity (an object mutated in place is not noticed), except for the attributes a
kernel reads of an instance (`self.scale`, `cfg.tile`, and those its methods and properties read,
`cfg.tiles()`, and a bound `@ml.inline` method's): those are read again too, as a module's are. A
helper's closure cells and default values, and what a `functools.partial` of one binds, are reads.

`fingerprint()` turns the same values into stable text for the disk cache key, or
None when one of them has no reliable text form (an array, an instance of a user
class): such a kernel is then cached in memory only.

Names bound inside a function (parameters, assignment and loop targets) are its
locals, as in Python, and are not followed to the module.
"""
from __future__ import annotations

import ast
import dataclasses
import enum
import functools
import sys
import textwrap
import types

import numpy as np

from .frontend import language as L
from .frontend import source

MISSING = object()
_VALUE_TYPES = (type(None), bool, int, float, complex, str, bytes)
_LIBRARIES = frozenset({"jax", "jaxlib", "numpy", "ml_dtypes", "mgpu_dsl", "scipy", "opt_einsum"}
                       | set(sys.stdlib_module_names))
MAX_FUNCTIONS = 64        # helpers followed per kernel, against pathological call graphs


@dataclasses.dataclass
class Read:
  """One outside value a kernel depends on: `space[name]` (a dict, a cell or an object)."""
  where: str
  space: object
  name: str
  value: object
  contents: object = None     # a list's or dict's plain items when recorded (see `contents`)

  def current(self):
    s = self.space
    if type(s) is dict:
      return s.get(self.name, MISSING)
    if isinstance(s, types.CellType):
      try:
        return s.cell_contents
      except ValueError:
        return MISSING
    return getattr(s, self.name, MISSING)


def same(a, b) -> bool:
  """True when `b` stands for the value `a` was (identity, or equal plain values of one type).
  Floats compare by their text (`repr`): 0.0 and -0.0 differ, nan is nan."""
  if a is b:
    return True
  if type(a) is not type(b):
    return False
  if isinstance(a, _VALUE_TYPES) or isinstance(a, np.dtype):
    try:
      return value_key(a) == value_key(b)
    except Exception:
      return False
  if type(a) is tuple:
    return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
  return False


class _Same:
  """An item compared by identity (a helper in a dict of activations)."""
  __slots__ = ("obj",)
  __hash__ = None

  def __init__(self, obj):
    self.obj = obj

  def __eq__(self, other):
    return isinstance(other, _Same) and other.obj is self.obj


def _items(v, depth=0):
  """`v` as comparable items: plain values by their text, functions and helpers by identity; None
  where some item is neither (an array, another object)."""
  if isinstance(v, _VALUE_TYPES) or isinstance(v, np.dtype):
    return (type(v), repr(v))
  if type(v) in (tuple, list, dict) and depth < 4 and len(v) <= 64:
    pairs = list(v.items()) if type(v) is dict else list(enumerate(v))
    out = [(_items(k, depth + 1), _items(x, depth + 1)) for k, x in pairs]
    return None if any(a is None or b is None for a, b in out) else (type(v), tuple(out))
  if isinstance(v, (types.FunctionType, L.Inline, functools.partial)):
    return _Same(v)
  if isinstance(v, np.ndarray) and not v.dtype.hasobject and v.nbytes <= 4096:    # a small table of weights
    return (type(v), v.dtype.str, v.shape, v.tobytes())
  return None


def contents(v):
  """A list's or dict's items where they are plain values (`CFG = {"scale": 2.0}`, a list of tile
  sizes) or functions and helpers (`ACTS = {"relu": relu}`), or a small numpy array's bytes, so that
  a change in place (`CFG["scale"] = 3.0`, `ACTS["relu"] = other`, `W[1] = 9.0`) is a change; else None."""
  return _items(v) if type(v) in (list, tuple, dict, np.ndarray) else None


def value_key(v):
  """`v` as a dict key that tells apart what compiles differently: floats (Python's and
  numpy's, and complex ones) by their text, so 0.0 and -0.0 are two keys and nan equals nan;
  tuples, lists, frozensets, dicts (in their order) and dataclasses (frozen ones too) item by item;
  numpy arrays by their bytes; functools.partials and bound methods by what they bind; an instance of
  a user class by identity (held, so its id is not reused), also by its attributes where they are plain
  values; other unhashable values by repr."""
  if isinstance(v, (float, complex, np.floating, np.complexfloating)):
    return (type(v), repr(v))
  if isinstance(v, (tuple, list)):
    return (type(v), tuple(value_key(x) for x in v))
  if isinstance(v, frozenset):
    return (type(v), frozenset(value_key(x) for x in v))
  if isinstance(v, np.ndarray):      # by its contents: a large array's repr elides the middle ('...')
    if v.dtype.hasobject:
      return (type(v), v.shape, value_key(v.tolist()))
    return (type(v), v.dtype.str, v.shape, v.tobytes())
  if isinstance(v, dict):          # in its order, as a kernel iterating it traces it
    return (type(v), tuple((value_key(k), value_key(x)) for k, x in v.items()))
  if dataclasses.is_dataclass(v) and not isinstance(v, type):
    # field by field, frozen ones too: their __eq__ holds Cfg(0.0) == Cfg(-0.0) and Cfg(1) == Cfg(1.0)
    return (type(v), tuple((f.name, value_key(getattr(v, f.name))) for f in dataclasses.fields(v)))
  if isinstance(v, types.MethodType):      # fn=model.act: the function and its instance (what act reads of it)
    return (type(v), v.__func__, value_key(v.__self__))
  if isinstance(v, functools.partial):     # fn=partial(helper, cfg=cfg): what it binds, by value (a list or
    return (type(v), value_key(v.func), value_key(v.args),          # a config object changed in place too)
            tuple((k, value_key(x)) for k, x in v.keywords.items()))
  if isinstance(v, types.SimpleNamespace):
    return (type(v), value_key(vars(v)))
  try:
    hash(v)
  except TypeError:
    if _user_object(v):      # an unhashable config object (its class defines __eq__): itself, and its attributes
      return (type(v), _Id(v)) + _attrs_key(v)
    return (type(v), repr(v))
  if type(v).__hash__ is object.__hash__ and _user_object(v):
    # a config object hashed by identity: its attributes too, so that a kernel reading cfg.scale of a
    # constexpr cfg recompiles after cfg.scale = 3.0 (the object is the same)
    return (type(v), v) + _attrs_key(v)
  return (type(v), v)


class _Id:
  """An object as a key by identity (holding it: its id is not reused while the key lives)."""
  __slots__ = ("obj",)

  def __init__(self, obj):
    self.obj = obj

  def __hash__(self):
    return id(self.obj)

  def __eq__(self, other):
    return isinstance(other, _Id) and other.obj is self.obj


def _user_object(v) -> bool:
  attrs = getattr(v, "__dict__", None)
  return (type(attrs) is dict and len(attrs) <= 64 and not is_library(v)
          and not isinstance(v, (type, types.FunctionType, L.Inline)))


def _attrs_key(v) -> tuple:
  """A user object's attributes as a key where they are plain values, small arrays or functions (no
  large array's bytes); () otherwise."""
  attrs = vars(v)
  return (tuple((k, value_key(x)) for k, x in attrs.items()),) if _items(attrs) is not None else ()


def is_library(obj) -> bool:
  """Whether `obj` comes from jax, numpy, mgpu_dsl, the standard library or the like."""
  mod = getattr(obj, "__module__", None)
  if not isinstance(mod, str):
    if isinstance(obj, (types.FunctionType, type)):
      return False        # a function exec'd in a namespace without __name__: the user's, not builtins'
    mod = type(obj).__module__
  return (mod or "").split(".")[0] in _LIBRARIES


class Dependencies:
  """The outside values `fn` (a kernel function) reads, recorded now."""

  def __init__(self, fn, tree: ast.FunctionDef | None = None):
    self.reads: list[Read] = []
    self.functions: list = []        # user functions followed: the kernel, helpers, in order
    self.inlines: list[L.Inline] = []
    self._seen: set[int] = set()
    self._fingerprint = None
    if isinstance(fn, L.BoundInline):     # a bound helper passed as a constexpr
      self._visit(fn)
    else:
      self._follow(fn, tree)

  # ------------------------------------------------------------ recording
  def _follow(self, fn, tree=None):
    if id(fn) in self._seen or len(self.functions) >= MAX_FUNCTIONS:
      return
    self._seen.add(id(fn))
    self.functions.append(fn)
    code = getattr(fn, "__code__", None)
    if code is None:
      return
    tree = tree if tree is not None else _function_tree(fn)
    if tree is None:          # no def to parse (a lambda, no source): the names its bytecode loads,
      names, chains = _code_names(code) | set(code.co_freevars), []    # its closure cells included
    else:
      names, chains = _tree_names(tree)
    cells = dict(zip(code.co_freevars, fn.__closure__ or ()))
    owner = getattr(fn, "__qualname__", "?")
    for name in sorted(names):
      space = cells.get(name, fn.__globals__)
      read = Read(f"{name} (read by {owner})", space, name, MISSING)
      read.value = read.current()
      read.contents = contents(read.value)
      if read.value is MISSING and tree is None:
        continue
      self.reads.append(read)
      self._visit(read.value)
    for attr in ("__defaults__", "__kwdefaults__"):
      if getattr(fn, attr, None):   # values bound when the def ran (`lambda v, a=a: v * a` in a factory)
        read = Read(f"{attr} of {owner}", fn, attr, MISSING)
        read.value = read.current()
        read.contents = contents(read.value)
        self.reads.append(read)
        self._visit(read.value)
    for root, attrs in sorted(chains):
      base = cells.get(root, fn.__globals__)
      self._chain(Read("", base, root, MISSING).current(), root, attrs, owner)

  def _chain(self, base, path, attrs, owner):
    """The reads of `base.a.b...` (`path` names `base`): attributes of modules, classes and instances."""
    for attr in attrs:
      if isinstance(base, (types.ModuleType, type)):
        space = base.__dict__ if isinstance(base, types.ModuleType) else base
      elif isinstance(getattr(base, "__dict__", None), dict) and attr in base.__dict__:
        space = base.__dict__     # an instance's own attribute (self.scale, cfg.tile): no property runs
      else:
        helper = getattr(type(base), attr, None)
        if isinstance(helper, property):
          helper = helper.fget                      # cfg.rows: what the property reads of its self
        if isinstance(helper, L.Inline) or isinstance(helper, types.FunctionType) and not is_library(helper):
          self._self_reads(helper, base, path)      # model.step(v), cfg.tiles(): what it reads of its self
        break
      path += "." + attr
      read = Read(f"{path} (read by {owner})", space, attr, MISSING)
      read.value = read.current()
      read.contents = contents(read.value)
      self.reads.append(read)
      self._visit(read.value)
      base = read.value

  def _self_reads(self, helper, obj, path):
    """What the method `helper` (an @ml.inline one, or a plain one or a property's getter run on static
    values) reads of its first parameter, bound to `obj` (named `path`)."""
    if ("self", id(helper), id(obj)) in self._seen:
      return
    self._seen.add(("self", id(helper), id(obj)))
    self._visit(helper)
    fn = helper.fn if isinstance(helper, L.Inline) else helper
    tree = _function_tree(fn)
    args = tree.args.posonlyargs + tree.args.args if tree is not None else []
    for node in (n for n in ast.walk(tree) if args and isinstance(n, ast.Attribute)):
      chain = []
      while isinstance(node, ast.Attribute):
        chain.append(node.attr)
        node = node.value
      if isinstance(node, ast.Name) and node.id == args[0].arg:
        self._chain(obj, f"{path}", tuple(reversed(chain)), getattr(fn, "__qualname__", "?"))

  def _visit(self, value, depth=0):
    from .frontend.jax_wrapped import helper
    wrapped = helper(value) if callable(value) and not isinstance(value, L.Inline) else None
    if wrapped is not None:                  # a @jax.jit helper of the user's: the function it wraps (probe 52f)
      value = wrapped
    if isinstance(value, L.BoundInline):     # act = model.step, or passed as a constexpr: its instance too
      if value not in self.inlines:
        self.inlines.append(value)
      self._self_reads(value.helper, value.obj, "self")
    elif isinstance(value, L.Inline):
      if value not in self.inlines:
        self.inlines.append(value)
      self._follow(value.fn)
    elif isinstance(value, types.FunctionType) and not is_library(value):
      self._follow(value)
    elif isinstance(value, functools.partial) and depth < 4:
      # act = functools.partial(helper, s=2.0): what the helper reads (and helpers bound as arguments)
      for item in (value.func, *value.args, *value.keywords.values()):
        self._visit(item, depth + 1)
    elif isinstance(value, (tuple, list, frozenset, dict)) and depth < 4 and len(value) <= 64:
      # helpers held in a container (ACTS = (relu, gelu); ACTS[i](v)): followed too
      for item in (value.values() if isinstance(value, dict) else value):
        self._visit(item, depth + 1)

  # ------------------------------------------------------------ queries
  def changed(self) -> list[str]:
    """The reads whose live value differs from the recorded one (empty: all unchanged)."""
    out = []
    for r in self.reads:
      now = r.current()
      if not same(r.value, now) or r.contents is not None and contents(now) != r.contents:
        out.append(r.where)
    return out

  def fingerprint(self) -> str | None:
    """Stable text of every read value and every followed function's source; None if any
    value has no reliable text form."""
    if self._fingerprint is None:
      parts = []
      for fn in self.functions:
        src = _source_text(fn)
        if src is None:
          return None
        parts.append(src)
      for r in self.reads:
        t = value_text(r.value, deep=False)      # helpers read here: their source is in parts already
        if t is None:
          return None
        parts.append(f"{r.where}={t}")
      self._fingerprint = "\n".join(parts)
    return self._fingerprint

  def unhashable(self) -> list[str]:
    """The reads `fingerprint` cannot describe, for the log."""
    return [r.where for r in self.reads if value_text(r.value) is None]


def value_text(v, deep: bool = True) -> str | None:
  """A text that names `v` across processes, or None when there is no reliable one. `deep`: a
  helper is named with its source and what it reads (a constexpr's); else by name only (a read of a
  kernel's, whose helpers' sources the kernel's fingerprint holds already)."""
  if v is MISSING:
    return "<missing>"
  if isinstance(v, enum.Enum):      # (IntEnums too) its value and methods: a cell may redefine either
    value, methods = value_text(v.value, deep), _class_text(type(v))
    return None if value is None or methods is None else (
        f"enum:{type(v).__module__}.{type(v).__qualname__}.{v.name}={value}{methods}")
  if isinstance(v, _VALUE_TYPES):
    return f"{type(v).__name__}:{v!r}"
  if isinstance(v, (tuple, list, frozenset)):
    items = [value_text(x, deep) for x in (sorted(v, key=repr) if isinstance(v, frozenset) else v)]
    if None in items:
      return None
    fields = getattr(type(v), "_fields", None)
    if type(v) not in (tuple, list, frozenset) and isinstance(fields, tuple):
      # a NamedTuple: its fields' names (a notebook cell that swaps two reads cfg.scale elsewhere) and methods
      methods = _class_text(type(v))
      return None if methods is None else (
          f"namedtuple:{type(v).__module__}.{type(v).__qualname__}"
          f"({', '.join(f'{f}={t}' for f, t in zip(fields, items))}){methods}")
    return f"{type(v).__name__}({', '.join(items)})"
  if type(v) is dict:              # in its order, as a kernel iterating it traces it
    items = [value_text(x, deep) for kv in v.items() for x in kv]
    return None if None in items else f"dict({', '.join(f'{k}: {x}' for k, x in zip(items[::2], items[1::2]))})"
  if isinstance(v, np.dtype):
    return f"dtype:{v}"
  if isinstance(v, types.ModuleType):
    return f"module:{v.__name__}"
  if isinstance(v, L.Inline) or isinstance(v, types.FunctionType) and not is_library(v):
    fn = v.fn if isinstance(v, L.Inline) else v
    kind = "inline" if isinstance(v, L.Inline) else "function"
    if not deep:
      return f"{kind}:{fn.__module__}.{fn.__qualname__}"
    # a helper passed as a constexpr: its source and what it reads (transitively, once each; a
    # bound method's reads of its instance too)
    body = Dependencies(v if isinstance(v, L.BoundInline) else fn).fingerprint()
    if body is None:
      return None
    import hashlib
    return f"{kind}:{fn.__module__}.{fn.__qualname__}:{hashlib.sha256(body.encode()).hexdigest()[:16]}"
  if is_library(v):
    qual = getattr(v, "__qualname__", None)
    if isinstance(qual, str):          # a library function or class
      return f"lib:{getattr(v, '__module__', '')}.{qual}"
    if isinstance(v, np.generic) or type(v).__module__.split(".")[0] == "mgpu_dsl":
      r = repr(v)                      # numpy scalars; ml.constexpr and ml.* builtins
      if " at 0x" not in r:
        return f"lib:{type(v).__module__}.{type(v).__qualname__}:{r}"
  return None


def _class_text(cls) -> str | None:
  """The texts of the methods and properties a user's NamedTuple or Enum class defines
  itself (those its module's code defined, not those `typing` or `enum` made), "" when none; None when one
  has no reliable text."""
  parts = []
  for name, attr in sorted(vars(cls).items()):
    fn = attr.fget if isinstance(attr, property) else getattr(attr, "__func__", attr)
    if isinstance(fn, types.FunctionType) and fn.__module__ == cls.__module__:
      text = value_text(fn)
      if text is None:
        return None
      parts.append(f"{name}={text}")
  return f" methods({', '.join(parts)})" if parts else ""


def _snapshot(fn):
  """The source `fn` was compiled from, kept from its first read (frontend/source.py); None
  when there is none, or when its file no longer holds it (the bytecode then says what it reads)."""
  snap = source.snapshot(fn)
  return None if snap is None or snap.changed else snap


def _source_text(fn) -> str | None:
  snap = _snapshot(fn)
  if snap is None:
    return None
  text = f"# {snap.filename}:{snap.first}\n" + snap.text
  if getattr(getattr(fn, "__code__", None), "co_name", None) == "<lambda>":
    # a lambda: its own expression too, as the statement's text is every lambda's of its lines (two activations
    # of one dict literal, {"a": lambda v: v + 1, "b": lambda v: v * 10}, passed as a constexpr are two kernels)
    tree = _function_tree(fn)
    if tree is None:
      return None
    text += "\n# lambda: " + ast.unparse(tree)
  return text


def _function_tree(fn) -> ast.FunctionDef | None:
  snap = _snapshot(fn)
  if snap is None:
    return None
  try:
    tree = ast.parse(textwrap.dedent(snap.text)).body[0]
  except (SyntaxError, IndexError):
    tree = None
  code = getattr(fn, "__code__", None)
  if getattr(code, "co_name", None) == "<lambda>":    # a lambda helper: as a def of its expression (its
    text = snap.text                                   # attribute chains, `cfg.scale`, are then reads too)
    lam = source._lambda_def(tree, code, snap.first, len(text) - len(text.lstrip())) if tree is not None else None
    return lam if lam is not None else source._lambda_in_file(snap, code)
  return tree if isinstance(tree, (ast.FunctionDef, ast.AsyncFunctionDef)) else None


def _tree_names(tree) -> tuple[set[str], set[tuple[str, tuple[str, ...]]]]:
  """(global names read, attribute chains `root.a.b` read) by a function's body and defaults."""
  nodes = [tree.args] + list(tree.body) + list(tree.returns and [tree.returns] or [])
  bound = {a.arg for a in tree.args.posonlyargs + tree.args.args + tree.args.kwonlyargs}
  bound |= {a.arg for a in (tree.args.vararg, tree.args.kwarg) if a is not None}
  loads, chains = set(), set()
  for top in nodes:
    for n in ast.walk(top):
      if isinstance(n, ast.Name):
        (loads if isinstance(n.ctx, ast.Load) else bound).add(n.id)
      elif isinstance(n, ast.Attribute):
        attrs = []
        base = n
        while isinstance(base, ast.Attribute):
          attrs.append(base.attr)
          base = base.value
        if isinstance(base, ast.Name):
          chains.add((base.id, tuple(reversed(attrs))))
  names = loads - bound
  return names, {c for c in chains if c[0] in names}


def _code_names(code) -> set[str]:
  names = set(code.co_names)
  for c in code.co_consts:
    if isinstance(c, types.CodeType):
      names |= _code_names(c)
  return names


def helpers_in(value, depth=0) -> list:
  """The user functions and @ml.inline helpers in a constexpr's value (inside tuples too)."""
  if isinstance(value, L.Inline) or isinstance(value, types.FunctionType) and not is_library(value):
    return [value]
  if isinstance(value, functools.partial) and depth < 4:      # a partial of a helper: the helper
    return [h for x in (value.func, *value.args, *value.keywords.values()) for h in helpers_in(x, depth + 1)]
  if isinstance(value, (tuple, list, frozenset)) and depth < 4:
    return [h for x in value for h in helpers_in(x, depth + 1)]
  if isinstance(value, dict) and depth < 4:
    return [h for x in value.values() for h in helpers_in(x, depth + 1)]
  return []
