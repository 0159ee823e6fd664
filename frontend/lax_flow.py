"""JAX's control flow called in a kernel, as a Pallas kernel writes its loops (`lax.fori_loop(0, n, body,
(o, m, l))`, `lax.while_loop(cond, body, init)`, `lax.cond(p, f, g, x)`, `lax.switch(i, fns, x)`): traced as the
Python statement the call means, its functions ones the kernel calls on run-time values (a def or lambda of its
body, an @ml.inline helper, an ml.* or jax function, or a functools.partial of those), so a ported kernel runs
unchanged. The statement is built from temporaries bound to the call's values (as jnp_calls.trace_form does for
expressions), placed at the call, and traced as the kernel's own loop or if: a run-time loop carrying the state
(a tuple or list of values as one carried name, a dict as the tuple of its values), an if whose branches bind the
result. Diagnostics from inside it are put in the user's words (`_renamed`). Other forms (a plain module function
as the body, an argument spread with *, a lax.scan of more than SCAN_UNROLL trips over register tensors) are
UNHANDLED: the call keeps its MG003 and control_hint's hint. `decorated` serves a def under
`@functools.partial(lax.fori_loop, ...)` the same way (probe 48h).
`lax.scan(f, init, xs)` of a static length is unrolled (`for j in ml.static_range(n): c, y = f(c, xs[j])`), its
ys stacked with ml.stack, as jax.lax stacks them (probe 49h); a longer one over the trip counter (or None), whose
ys are None, is a run-time loop (probe 51i)."""
from __future__ import annotations

import ast
import functools
import itertools

from . import errors as E
from .branches import LAX_TEMP
from .env import POISON, PoisonedUse, Unbound
from .scan_rows import returns_ys, stacked_loop

# jax.lax's functions run as statements -> their parameters, in order (cond's and switch's operands follow them)
FORMS = {"fori_loop": ("lower", "upper", "body_fun", "init_val"), "while_loop": ("cond_fun", "body_fun", "init_val"),
         "cond": ("pred", "true_fun", "false_fun"), "switch": ("index", "branches"), "scan": ("f", "init", "xs")}
SCAN_UNROLL = 64              # lax.scan's static trips unrolled at most (each a copy of the body)
_IGNORED = {"fori_loop": ("unroll",)}          # lax.fori_loop(..., unroll=2): the same numbers, unrolled or not
_counter = itertools.count()
UNHANDLED = object()          # trace's answer for a call it leaves to the MG003 hint (None is a carry's value)


def _helper(fn) -> bool:
  """Whether `fn` is a function the kernel calls on run-time values: a def or lambda of its body, an @ml.inline
  helper, a plain function of the user's (traced as one), an ml.* builtin or a jnp / jax.nn / lax function (`functools.partial(jnp.maximum, 0.0)`), or a
  functools.partial of one."""
  from .inline import LocalFunction
  from .jnp_calls import library
  from .language import Inline
  from .jax_wrapped import helper, plain_helper
  from .ops.base import Builtin
  while isinstance(fn, functools.partial):
    fn = fn.func
  return isinstance(fn, (Inline, LocalFunction, Builtin)) or helper(fn) is not None or \
      callable(fn) and library(fn) is not None or plain_helper(fn) is not None     # (a plain one: probe 52b)


def _bound(name, args, kwargs):
  """The call's arguments by jax.lax's parameter names (and the operands after them, for cond and switch),
  or None where a keyword is not one of them."""
  params = FORMS[name]
  kw = {k: v for k, v in kwargs.items() if k not in _IGNORED.get(name, ())}
  if any(k not in params[len(args):] for k in kw if k != "operand") or "operand" in kw and name != "cond":
    return None
  got = dict(zip(params, args))
  got.update((k, v) for k, v in kw.items() if k != "operand")
  if any(p not in got for p in params):
    return None
  operands = list(args[len(params):]) + ([kw["operand"]] if "operand" in kw else [])
  return got, operands


def _param(fn, k, default):
  """The name of `fn`'s k-th parameter (a helper's carry, `acc` of `def body(i, acc)`), else `default`."""
  import inspect
  from .inline import LocalFunction
  from .jax_wrapped import helper
  while isinstance(fn, functools.partial):
    fn = fn.func
  fn = helper(fn) or fn          # (a jitted body: its own parameters)
  try:
    sig = fn.signature if isinstance(fn, LocalFunction) else inspect.signature(fn.fn)
    names = [p.name for p in sig.parameters.values()]
  except (AttributeError, TypeError, ValueError):
    return default
  return names[k] if k < len(names) and names[k].isidentifier() else default


def _packing(init, carry):
  """(how the loop holds the carry, the carry as the body takes it, back to the user's structure): a dict of
  values (a pytree jax.lax carries) is held as the tuple of its values, by its keys' order, since a kernel's
  loop carries names, tuples and lists; other carries are held as they are."""
  if not isinstance(init, dict) or not init or not all(isinstance(k, str) for k in init):
    return init, carry, lambda v: v
  keys = list(init)
  as_dict = "{" + ", ".join(f"{k!r}: {carry}[{i}]" for i, k in enumerate(keys)) + "}"
  return tuple(init.values()), as_dict, lambda v: dict(zip(keys, v)) if isinstance(v, tuple) else v


def _statements(name, tmp, got, operands):
  """(source of the statements, the temporaries' values, the name holding the result, the result's unpacking)."""
  res, values = f"{tmp}r", {}

  def bind(key, value):
    values[f"{tmp}{key}"] = value
    return f"{tmp}{key}"
  ops = ", ".join(bind(f"o{k}", v) for k, v in enumerate(operands))
  unpack = lambda v: v
  if name in ("fori_loop", "while_loop"):
    values[res], arg, unpack = _packing(got["init_val"], res)
    new = res if arg == res else f"{tmp}d"
    back = "" if arg == res else f"  {res} = ({''.join(f'{new}[{k!r}], ' for k in got['init_val'])})\n"
  if name == "fori_loop":
    src = (f"for {tmp}i in {bind('range', range)}({bind('lo', got['lower'])}, {bind('hi', got['upper'])}):\n"
           f"  {new} = {bind('f', got['body_fun'])}({tmp}i, {arg})\n{back}")
  elif name == "while_loop":
    src = f"while {bind('c', got['cond_fun'])}({arg}):\n  {new} = {bind('f', got['body_fun'])}({arg})\n{back}"
  elif name == "cond":
    src = (f"if {bind('p', got['pred'])}:\n  {res} = {bind('t', got['true_fun'])}({ops})\n"
           f"else:\n  {res} = {bind('e', got['false_fun'])}({ops})\n")
  else:                       # lax.switch clamps the index into the branches: i <= 0 is the first, else the last
    fns, idx = list(got["branches"]), bind("i", got["index"])
    src = "".join(f"{'if' if k == 0 else 'elif'} {idx} <= {k}:\n  {res} = {bind(f'b{k}', f)}({ops})\n"
                  for k, f in enumerate(fns[:-1]))
    last = f"{res} = {bind(f'b{len(fns) - 1}', fns[-1])}({ops})\n"
    src = src + f"else:\n  {last}" if len(fns) > 1 else last
  return src, values, res, unpack


def _words(name, tmp, got, texts):
  """The user's words for the statement's temporaries, for its diagnostics: each argument as written, the
  carry by the body's name for it (`acc` of `def body(i, acc)`), the loop index by the body's."""
  words = {f"{tmp}{k}": texts.get(p) for k, p in (("lo", "lower"), ("hi", "upper"), ("f", "body_fun"),
                                                   ("c", "cond_fun"), ("p", "pred"), ("t", "true_fun"),
                                                   ("e", "false_fun"), ("i", "index"))}
  if name == "fori_loop":
    words[f"{tmp}i"] = _param(got["body_fun"], 0, "i")
    words[f"{tmp}r"] = _param(got["body_fun"], 1, "carry")
  elif name == "while_loop":
    words[f"{tmp}r"] = _param(got["body_fun"], 0, "carry")
  else:                   # (its branches are an if's: said of lax.cond's or lax.switch's, as written; probe 50b)
    words[f"{tmp}r"] = "the result"
    words["after one branch of this if and"] = f"from one branch of lax.{name} and"
    words["after the other"] = "from another" if name == "switch" else "from the other"
  words[f"{tmp}d"] = words[f"{tmp}r"]
  words[f"{tmp}range"] = "range"
  for k, t in enumerate(texts.get("*", ())):
    words[f"{tmp}o{k}"] = t
  for k, t in enumerate(texts.get("branches*", ())):
    words[f"{tmp}b{k}"] = t
  fns = {f"{tmp}{k}" for k in ("f", "c", "t", "e")} | {f"{tmp}b{k}" for k in range(len(texts.get("branches*", ())))}
  return {t: f"({w})" if t in fns and w.startswith("lambda") else w for t, w in words.items() if w}


def _renamed(err, tmp, words, body):
  """`err` in the user's words: the temporaries replaced (longest first); a hint that rebinds the carry at the
  end of the body says to return it so, as the body's `return` is what the loop carries."""
  import re
  carry = re.escape(f"{tmp}r")
  for attr in ("message", "hint"):
    text = getattr(err, attr)
    if not text or tmp not in text:
      continue
    if attr == "hint" and body:
      text = re.sub(rf"convert it back at the end of the body: {carry} = {carry}(\.astype\([^()]*\))",
                    rf"convert it back where {body} returns it: return (...)\1", text)
    for t in sorted(words, key=len, reverse=True):
      text = text.replace(t, words[t])
    setattr(err, attr, text)
  err.notes = tuple(n.replace(f"{tmp}r", words.get(f"{tmp}r", "the carry")) for n in err.notes)
  err.args = (err.message,)


def _scan_length(xs, length):
  """The trips of lax.scan over `xs` (a register tensor, a tuple or list of them, or None) of `length`, or None
  where it is not a static count the leaves agree on."""
  from .ops.base import is_tensor
  leaves = [] if xs is None else list(xs) if isinstance(xs, (tuple, list)) else [xs]
  if not all(isinstance(x, (range, RefRows, RowsOf)) or is_tensor(x) and len(x.type.shape) >= 1 for x in leaves):
    return None
  ns = {len(x) if isinstance(x, (range, RefRows, RowsOf)) else x.type.shape[0] for x in leaves}
  ns |= {length} if length is not None else set()
  n = ns.pop() if len(ns) == 1 else None
  return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n else None


def _scan(tracer, node, args, kwargs, texts):
  """`lax.scan(f, init, xs, length=None, reverse=False)` of a static length: its trips unrolled, `ys[j]` the y
  of the trip that took `xs[j]` (reverse= runs the trips from the last), each leaf of ys stacked (ml.stack)."""
  from .ops import BUILTINS
  params = ("f", "init", "xs", "length", "reverse", "unroll", "_split_transpose")
  if len(args) > len(params) or any(k not in params[len(args):] for k in kwargs):
    return UNHANDLED
  got = dict(zip(params, args)) | kwargs
  if "f" not in got or "init" not in got or not _helper(got["f"]) or not isinstance(got.get("reverse", False), bool):
    return UNHANDLED
  xs = got.get("xs")
  n = _scan_length(xs, got.get("length"))
  if n is None:
    return UNHANDLED
  if n > SCAN_UNROLL:
    return _scan_loop(tracer, node, got, n, texts)
  tmp = f"{LAX_TEMP}{next(_counter)}_"
  values = {f"{tmp}r": got["init"], f"{tmp}f": got["f"], f"{tmp}range": BUILTINS["static_range"], f"{tmp}xs": xs}
  x = ("None" if xs is None else f"({''.join(f'{tmp}xs[{k}][{tmp}j], ' for k in range(len(xs)))})"
       if isinstance(xs, (tuple, list)) else f"{tmp}xs[{tmp}j]")
  trips = f"{n} - 1, -1, -1" if got.get("reverse") else f"{n}"
  grow = f"[{tmp}y] + {tmp}ys" if got.get("reverse") else f"{tmp}ys + [{tmp}y]"
  src = (f"{tmp}ys = []\nfor {tmp}j in {tmp}range({trips}):\n  {tmp}r, {tmp}y = {tmp}f({tmp}r, {x})\n"
         f"  {tmp}ys = {grow}\n")
  words = {f"{tmp}r": _param(got["f"], 0, "carry"), f"{tmp}f": texts.get("f"), f"{tmp}xs": texts.get("xs"),
           f"{tmp}j": "j", f"{tmp}range": "ml.static_range", f"{tmp}y": "y", f"{tmp}ys": "ys"}
  words = {t: w for t, w in words.items() if w}
  out = _run(tracer, node, src, values, tmp, words, texts.get("f"), [f"{tmp}r", f"{tmp}ys"])
  if out is UNHANDLED:
    return out
  carry, ys = out
  ys_out = _stacked(tracer, node, ys, tmp, words)
  return carry, ys_out


class _Stacks(Exception):
  """A long lax.scan's body returns ys (to stack): the call is left to its MG003 and hint."""


def _scan_loop(tracer, node, got, n, texts):
  """`lax.scan(f, init, xs)` of more than SCAN_UNROLL trips whose xs are None, the trip counter
  (`jnp.arange(n)`) or whole reads of refs (`x_ref[...]`, read a row a step: RefRows), its ys None, as a
  recurrence over time writes it (each step's output stored by the body):
  the run-time loop `for j in range(n): carry, y = f(carry, j)` (from n - 1 down with reverse=True). ys to
  stack (no register tensor holds n rows of them) are MG003, saying to store them in the body; xs of register
  tensors stay UNHANDLED (MG003's hint writes the loop)."""
  from .ops import BUILTINS
  xs = got.get("xs")
  leaves = [] if xs is None else list(xs) if isinstance(xs, (tuple, list)) else [xs]
  if not all(isinstance(x, (RefRows, RowsOf, range)) for x in leaves):
    return UNHANDLED
  tmp = f"{LAX_TEMP}{next(_counter)}_"
  init, arg, unpack = _packing(got["init"], f"{tmp}r")
  new = f"{tmp}r" if arg == f"{tmp}r" else f"{tmp}d"
  back = "" if arg == f"{tmp}r" else f"  {tmp}r = ({''.join(f'{new}[{k!r}], ' for k in got['init'])})\n"
  rows = [f"{tmp}x{k}[{tmp}j]" if isinstance(x, RefRows) else _counter_at(x, f"{tmp}j") if isinstance(x, range) else
          x.row([f"{tmp}x{k}_{m}" for m in range(len(x.reads))], f"{tmp}j") for k, x in enumerate(leaves)]
  x = "None" if xs is None else f"({''.join(r + ', ' for r in rows)})" if isinstance(xs, (tuple, list)) else rows[0]
  trips = f"{n} - 1, -1, -1" if got.get("reverse") else f"{n}"
  values = {f"{tmp}r": init, f"{tmp}f": got["f"], f"{tmp}range": range, f"{tmp}none": BUILTINS["static_assert"]}
  values |= {f"{tmp}x{k}": x.ref for k, x in enumerate(leaves) if isinstance(x, RefRows)}
  computed = [(f"{tmp}x{k}_{m}", r) for k, x in enumerate(leaves) if isinstance(x, RowsOf) for m, r in enumerate(x.reads)]
  values |= {t: r.ref for t, r in computed}
  src = (f"for {tmp}j in {tmp}range({trips}):\n  {new}, {tmp}y = {tmp}f({arg}, {x})\n"
         f"  {tmp}none({tmp}y is None, '{tmp}stacks')\n{back}")
  index = _param(got["f"], 1, "step") if isinstance(xs, range) else "step"     # (the body's name for the counter)
  words = {f"{tmp}r": _param(got["f"], 0, "carry"), f"{tmp}d": _param(got["f"], 0, "carry"),
           f"{tmp}f": texts.get("f"), f"{tmp}j": "step" if index == "_" else index, f"{tmp}range": "range",
           f"{tmp}y": "y"}
  words |= {f"{tmp}x{k}": x.text for k, x in enumerate(leaves) if isinstance(x, RefRows)}
  words |= {t: r.text for t, r in computed}
  words = {t: w for t, w in words.items() if w}

  def too_many(why):
    f = texts.get("f") or "the body"
    f = "the body" if f.startswith("lambda") else f
    counter = isinstance(xs, range)
    t = _param(got["f"], 1, "t") if counter else "t"
    over = "" if counter else f"; scan over jnp.arange({n}) for the step t, reading rows of its xs in the body"
    return E.KernelTypeError(
        f"lax.scan of {n} steps returns ys to stack, {why}", tracer.loc(node),
        hint=f"store each step's y where {f} makes it (out[{t}] = y, a row of an output or of an ml.smem buffer{over})"
             f" and return None as its y: a lax.scan of more steps then runs as a loop")
  if returns_ys(got["f"]):        # (probe 53f: ys stacked through SMEM rows, the first trip peeled)
    carry, ys = stacked_loop(tracer, node, n, bool(got.get("reverse")), tmp, new, arg, x, back, values,
                             words, texts.get("f"), _run, too_many)
    return unpack(carry), ys
  recorded = len(tracer.errors)
  stacks = lambda e: isinstance(e, E.StaticAssertionError) and f"{tmp}stacks" in e.message
  try:
    carry = _run(tracer, node, src, values, tmp, words, texts.get("f"), [f"{tmp}r"])[0]
  except (E.KernelError, PoisonedUse) as e:
    if not stacks(e) and not any(stacks(r) for r in tracer.errors[recorded:]):
      raise
    carry = UNHANDLED
  if carry is UNHANDLED or any(stacks(r) for r in tracer.errors[recorded:]):
    del tracer.errors[recorded:]
    raise too_many(f"which a kernel holds for at most {SCAN_UNROLL} steps")
  return unpack(carry), None


def _counter_at(r, j):
  """The text of step `j`'s element of the trip counter `r` (`jnp.arange(1, n)` is range(1, n): `1 + j`)."""
  return j if (r.start, r.step) == (0, 1) else f"({r.start} + {j} * {r.step})" if r.start else f"({j} * {r.step})"


def _stacked(tracer, node, ys, tmp, words):
  """The per-trip ys (a list of one structure: a value, None, or a tuple or list of them) stacked leaf by leaf."""
  from .ops import BUILTINS
  first = ys[0]
  if first is None:
    return None
  if isinstance(first, (tuple, list)):
    parts = [_stacked(tracer, node, [y[k] for y in ys], tmp, words) for k in range(len(first))]
    return type(first)(parts)
  from .ops.base import is_scalar, is_value
  if all(is_scalar(y) or isinstance(y, (int, float)) and not isinstance(y, bool) for y in ys):
    # scalars (a Python number among them: the initial carry) into a vector, each selected in at its trip
    from .dtypes import DType
    typed = next((y for y in ys if is_value(y)), None)
    dt = typed.type.dtype if typed is not None else DType.f32 if any(isinstance(y, float) for y in ys) else DType.i32
    values = {f"{tmp}l": list(ys), f"{tmp}dt": dt, f"{tmp}range": BUILTINS["static_range"],
              f"{tmp}zeros": BUILTINS["zeros"], f"{tmp}arange": BUILTINS["arange"], f"{tmp}where": BUILTINS["where"]}
    src = (f"{tmp}i = {tmp}arange({len(ys)})\n{tmp}s = {tmp}zeros(({len(ys)},), {tmp}dt)\n"
           f"for {tmp}k in {tmp}range({len(ys)}):\n  {tmp}s = {tmp}where({tmp}i == {tmp}k, {tmp}l[{tmp}k], {tmp}s)\n")
    return _run(tracer, node, src, values, tmp, words, None, [f"{tmp}s"])[0]
  values = {f"{tmp}stack": BUILTINS["stack"], f"{tmp}l": list(ys)}
  return _run(tracer, node, f"{tmp}s = {tmp}stack({tmp}l)\n", values, tmp, words, None, [f"{tmp}s"])[0]


def _run(tracer, node, src, values, tmp, words, body, results, check=None):
  """Trace the statements `src` at `node` with the temporaries `values`; the values of the names `results`.
  `check(out)`, where given, may raise a KernelError about them (renamed, as the statements' own are)."""
  stmts = ast.parse(src).body
  for n in (x for s in stmts for x in ast.walk(s)):
    n.lineno, n.col_offset = node.lineno, node.col_offset
    n.end_lineno, n.end_col_offset = node.end_lineno, node.end_col_offset
  saved = (tracer.pending_name, tracer.pending_node, tracer.stmt)
  recorded = len(tracer.errors)
  tracer.env.update(values)
  shown = getattr(tracer, "shown_names", {})
  tracer.shown_names = shown | {t: w for t, w in words.items() if w.isidentifier()}    # (a loop index's name)
  try:
    for s in stmts:
      tracer.visit(s)
    out = [tracer.env.get(r, POISON) for r in results]
    if check is not None:
      check(out)
  except E.KernelError as e:
    _renamed(e, tmp, words, body)
    raise
  finally:
    for e in tracer.errors[recorded:]:
      _renamed(e, tmp, words, body)
    tracer.pending_name, tracer.pending_node, tracer.stmt = saved
    tracer.shown_names = shown
    for t in list(tracer.env):
      if t.startswith(tmp):
        tracer.env.pop(t, None)
  if any(o is POISON for o in out):
    raise PoisonedUse()
  return out


def trace(tracer, node, fn, args, kwargs, texts):
  """The value of the call `node` of JAX's control flow `fn` (its arguments `args`, `kwargs`; `texts`: them as
  written, by parameter name, the operands after them under "*"), traced as the Python statement it means;
  UNHANDLED where its form is not one the kernel runs as it is."""
  name = getattr(fn, "__name__", "")
  if name == "scan":
    return _scan(tracer, node, args, kwargs, texts)
  if name not in FORMS or (bound := _bound(name, args, kwargs)) is None:
    return UNHANDLED
  got, operands = bound
  if name == "switch":
    if not isinstance(got["branches"], (tuple, list)) or not got["branches"]:
      return UNHANDLED
    fns = list(got["branches"])
  else:
    fns = [got[p] for p in FORMS[name] if p.endswith("_fun")]
  if not all(_helper(f) for f in fns):
    return UNHANDLED              # (a plain module function: the hint says to decorate it @ml.inline)
  tmp = f"{LAX_TEMP}{next(_counter)}_"
  src, values, res, unpack = _statements(name, tmp, got, operands)
  words = _words(name, tmp, got, texts)

  def one_structure(out):
    if isinstance(out[0], Unbound):     # branches that leave the result two kinds of thing (a tuple of 2 and of 3)
      raise E.KernelTypeError(
          f"the branches of {texts.get('fn', name)} return different kinds of values", tracer.loc(node),
          hint="return one structure from every branch (jax.lax requires it): a tuple of as many values, each of"
               " one shape and dtype")

  out = _run(tracer, node, src, values, tmp, words, texts.get("body_fun"), [res], one_structure)[0]
  return unpack(out)


def decorated(tracer, node):
  """The value a def decorated with a partial of JAX's control flow binds its name to, as Python's decorator
  binds it (`@functools.partial(lax.fori_loop, 0, n, init_val=c)` over `def body(i, c): ...`: the final carry),
  the def itself the function the call takes; UNHANDLED for other decorators (their MG001 and hint)."""
  from .calls import _lax_control
  from .inline import LocalFunction
  d = node.decorator_list[0] if len(node.decorator_list) == 1 else None
  if not isinstance(d, ast.Call) or not d.args or any(isinstance(a, ast.Starred) for a in d.args) or any(
      k.arg is None for k in d.keywords) or isinstance(node, ast.AsyncFunctionDef):
    return UNHANDLED
  try:
    if tracer.eval(d.func) is not functools.partial or not _lax_control(fn := tracer.eval(d.args[0])) or (
        name := fn.__name__) not in FORMS:
      return UNHANDLED
    args = [tracer.eval(a) for a in d.args[1:]]
    kwargs = {k.arg: tracer.eval(k.value) for k in d.keywords}
  except E.KernelError:
    return UNHANDLED
  plain = ast.copy_location(ast.FunctionDef(**{**{f: getattr(node, f) for f in node._fields}, "decorator_list": []}),
                            node)
  texts = {p: tracer.text(a) for p, a in zip(FORMS[name], d.args[1:])} | {"fn": tracer.text(d.args[0])}
  texts.update((k.arg, tracer.text(k.value)) for k in d.keywords)
  if len(d.args) - 1 < len(FORMS[name]):
    texts[FORMS[name][len(d.args) - 1]] = node.name      # (the def is the call's next positional argument)
  return trace(tracer, d, fn, args + [LocalFunction(tracer, plain, node.name)], kwargs, texts)


def counted_node(node):
  """The xs argument of a `lax.scan(f, init, xs)` call node (third positional or xs=), or None."""
  return node.args[2] if len(node.args) > 2 else next((k.value for k in node.keywords if k.arg == "xs"), None)


def counted_xs(tracer, node):
  """`range(n)` for lax.scan's xs written `jnp.arange(n)` (`ml.arange(n)`, `range(n)`) of a static int n: the
  trip counter, which the body takes as a Python int (a vector of n elements may hold no register layout); None
  for other xs (probe 49h)."""
  return _counted(tracer, counted_node(node))


def _counted(tracer, xs):
  """`range(n)` for an xs node written `jnp.arange(n)` of a static int n > 0, else None; `range(a, b, s)` for
  `jnp.arange(a, b[, s])` of static ints (probe 57b: a scan from step 1, `jnp.arange(1, T)`, after the first step
  computed before it, was MG003 past 64 steps and MG204 below, a vector of 19 elements)."""
  if not (isinstance(xs, ast.Call) and 1 <= len(xs.args) <= 3 and all(k.arg in ("start", "stop", "step")
                                                                       for k in xs.keywords)):
    return None
  f = tracer.text(xs.func)
  if f != "range" and not f.endswith(".arange"):
    return None
  try:
    parts = [tracer.eval(a) for a in xs.args]
    kw = {k.arg: tracer.eval(k.value) for k in xs.keywords}
  except E.KernelError:
    return None
  if len(parts) == 1 and not kw:
    parts = [0] + parts
  elif set(kw) - {"step"} or len(parts) + len(kw) > 3:
    return None
  parts += list(kw.values())
  if not all(isinstance(n, int) and not isinstance(n, bool) for n in parts) or len(parts) == 3 and parts[2] == 0:
    return None
  r = range(*parts)
  return r if len(r) > 0 else None


class RefRows:
  """A long lax.scan's xs written as a whole read of a ref, `x_ref[...]`: read a row a step, `x_ref[j]`, as the
  loop its hint wrote reads it (n rows of a sequence are more than registers hold)."""
  def __init__(self, ref, text):
    self.ref, self.text = ref, text

  def __len__(self):
    return self.ref.type.shape[0]


def ref_rows(tracer, node):
  """The xs of a long `lax.scan(f, init, xs)` call node read a row a step: RefRows for a whole read of a ref,
  `x_ref[...]` (or `x_ref[:]`), RowsOf for a value elementwise in such reads (`x_ref[...] * 2`,
  `jnp.exp(a_ref[...]).astype(jnp.float32)`), the counter range(n) for `jnp.arange(n)` in a tuple (probe 51j),
  or a tuple of them; each more than SCAN_UNROLL rows. None for other xs (evaluated as they are)."""
  xs = counted_node(node)
  elts = xs.elts if isinstance(xs, ast.Tuple) else [xs]
  out = []
  for e in elts:
    got = _whole_read(tracer, e) or (_rows_of(tracer, e) if xs is not None else None)
    if got is None and isinstance(xs, ast.Tuple):
      got = _counted(tracer, e)
      got = got if got is not None and len(got) > SCAN_UNROLL else None
    if got is None:
      return None
    out.append(got)
  return tuple(out) if isinstance(xs, ast.Tuple) else out[0] if out else None


def _whole_read(tracer, e):
  """RefRows for `x_ref[...]` (or `x_ref[:]`), or a window's read `x_ref[:, cols]` (`x_ref[b]`), of a ref or view of
  more than SCAN_UNROLL rows, else None."""
  from .ops.base import is_value
  from .types import RefType
  if not isinstance(e, ast.Subscript):
    return None
  whole = (isinstance(e.slice, ast.Constant) and e.slice.value is Ellipsis
           or isinstance(e.slice, ast.Slice) and e.slice.lower is None and e.slice.upper is None and e.slice.step is None)
  if not whole and not isinstance(e.value, (ast.Name, ast.Attribute)):
    return None                   # (a window's read of a named ref only: nothing else is evaluated twice)
  try:
    ref = tracer.eval(e.value)
    if not whole and is_value(ref) and isinstance(ref.type, RefType):
      # a read of a window, `a_ref[:, cols]` or `x_ref[b]` (probe 57b; it was MG003): the rows of the view
      # `a_ref.at[:, cols]`, read a row a step as a whole read's are
      view = ast.copy_location(ast.Subscript(ast.copy_location(ast.Attribute(e.value, "at", ast.Load()), e),
                                             e.slice, ast.Load()), e)
      ref = tracer.eval(view)
  except E.KernelError:
    return None
  if not (is_value(ref) and isinstance(ref.type, RefType) and len(ref.type.shape) >= 1
          and ref.type.shape[0] > SCAN_UNROLL):
    return None
  return RefRows(ref, tracer.text(e.value))


# elementwise functions (jnp's, lax's, jax.nn's, ml's) whose row of a value is the function of its row
_ROWWISE = frozenset(("exp", "exp2", "log", "log1p", "expm1", "log2", "sqrt", "rsqrt", "tanh", "sin", "cos", "abs",
                      "negative", "square", "sigmoid", "softplus", "silu", "swish", "relu", "gelu", "erf", "maximum",
                      "minimum", "where", "astype", "clip", "floor", "ceil", "sign", "reciprocal"))


class RowsOf:
  """A long lax.scan's xs computed elementwise from whole reads of refs of one shape, `x_ref[...] * 2`: each
  step computes its row from the refs' rows, `x_ref[j] * 2` (`node`, its reads `reads`, RefRows, at `nodes`)."""
  def __init__(self, node, reads, nodes):
    self.node, self.reads, self.nodes = node, reads, nodes

  def __len__(self):
    return len(self.reads[0])

  def row(self, names, j):
    """The text of step j's row, each read `x_ref[...]` as `names[k][j]`."""
    import copy
    tree = copy.deepcopy(self.node)
    swap = {id(a): b for a, b in zip(ast.walk(self.node), ast.walk(tree))}
    for k, n in enumerate(self.nodes):
      new = ast.parse(f"{names[k]}[{j}]", mode="eval").body
      _replace(tree, swap[id(n)], new)
    return ast.unparse(tree)


def _replace(tree, old, new):
  for parent in ast.walk(tree):
    for field, value in ast.iter_fields(parent):
      if value is old:
        setattr(parent, field, new)
      elif isinstance(value, list) and any(v is old for v in value):
        setattr(parent, field, [new if v is old else v for v in value])


def _rows_of(tracer, e):
  """RowsOf for xs `e` elementwise in whole reads of refs of one shape (arithmetic, comparisons, _ROWWISE calls,
  numbers and scalars), else None (a tensor named in it, a reduction, a subscript: its row is not so computed)."""
  from .ops.base import is_tensor
  if isinstance(e, ast.Subscript):
    return None
  reads, nodes = [], []

  def ok(n):
    if isinstance(n, ast.Subscript):
      r = _whole_read(tracer, n)
      if r is not None:
        reads.append(r)
        nodes.append(n)
      return r is not None
    if isinstance(n, ast.BinOp):
      return ok(n.left) and ok(n.right)
    if isinstance(n, ast.UnaryOp):
      return ok(n.operand)
    if isinstance(n, ast.Compare):
      return ok(n.left) and all(ok(c) for c in n.comparators)
    if isinstance(n, ast.Call):
      f = n.func
      name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
      if name not in _ROWWISE or any(k.arg is None or k.arg == "axis" for k in n.keywords):
        return False
      recv = [f.value] if isinstance(f, ast.Attribute) else []     # (jnp, or a value's method: v.astype)
      return all(ok(a) for a in recv + list(n.args) + [k.value for k in n.keywords])
    if isinstance(n, ast.Constant):
      return True
    if isinstance(n, (ast.Name, ast.Attribute)):
      try:
        v = tracer.eval(n)
      except E.KernelError:
        return False
      return not is_tensor(v)
    return False
  if not ok(e) or not reads or len({tuple(r.ref.type.shape) for r in reads}) != 1:
    return None
  return RowsOf(e, reads, nodes)
