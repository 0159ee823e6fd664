"""`for j in range(n)` of static bounds whose body needs `j` static (probe 52b): a Python list or tuple indexed by
the loop index (`tiles[j]`, `W[j]` of a tuple of weights, `bufs[j % 2]`, `TAPS[j]` of a module's NumPy array), a register tensor's window bounded by it
(`acc[j * 32:(j + 1) * 32]`), refs chosen by it or swapped each trip (probe 67a: Jacobi's ping-pong buffers, `src,
dst = (a, b) if j % 2 == 0 else (b, a)`, `a, b = b, a`), the same in a helper of the kernel's called with it (probe
67a: a median filter's `sort2(j, j + 1)` over a list of taps), or a list grown in the body (`outs.append(v)`, `outs += [v]`, `outs = outs + [v]`). A kernel's `range` is a run-time loop, where such a body is
MG003 ("cannot index tiles with a runtime value") or MG005 (a list's length cannot change); Python, and a Pallas
kernel, run it as written, so the loop is unrolled instead, as `ml.static_range` would (at most UNROLL trips;
longer loops keep their error, whose hint writes ml.static_range). A body that needs neither stays a run-time
loop, so loops that compile today compile as they did. So is (probe 57g) a loop whose run-time trace failed because
its body makes a scalar it carries a tensor (`acc = 0.0`, then `acc = acc + w * g[idx]` over a trilinear
interpolation's 8 corners: MG005, "start it as a tensor"), which Python runs as written."""
from __future__ import annotations

import ast

UNROLL = 64
_GROW = ("append", "extend", "insert")
# Functions whose arguments past the operand are static ints (a shift, a diagonal, pad widths): `jnp.roll(x, s,
# axis=0)` of a causal conv's tap s, `jnp.tril(a, k)`; jnp.eye's and jnp.tri's sizes are static too
_STATIC_ARGS = ("roll", "tril", "triu", "pad", "diagonal", "diag")
_STATIC_ALL = ("eye", "tri")
# Functions whose shape arguments are static ints (probe 56f): a Stockham FFT's `x.reshape(2, m, L)` of L doubled
# each trip, a bitonic stage's `v.reshape(N // (2 * j), 2, j)`, `ml.arange(n // 2)`; the index of the first
# static argument of the module's function (a method's, `x.reshape(...)`, are all static)
_SHAPES = {"reshape": 1, "arange": 0, "zeros": 0, "ones": 0, "full": 0, "empty": 0, "broadcast_to": 1}


def _walk(stmts):
  """The nodes of `stmts`, not those of nested functions (their own scopes)."""
  todo = list(stmts)
  while todo:
    n = todo.pop()
    yield n
    todo.extend(c for c in ast.iter_child_nodes(n) if not isinstance(c, (ast.FunctionDef, ast.Lambda,
                                                                          ast.AsyncFunctionDef, ast.ClassDef)))


def _reads(node, names) -> bool:
  return any(isinstance(n, ast.Name) and n.id in names for n in ast.walk(node))


def _static_container(tracer, name) -> bool:
  if name in tracer.env:
    v = tracer.env[name]
  elif name in getattr(tracer, "local_names", ()):
    return False
  else:
    v = tracer.scope.get(name)
  from .ops.base import _outside_array, is_value
  # (a module's NumPy table, TAPS[k] of a filter's taps: probe 53b)
  return isinstance(v, (tuple, list, dict, str)) or _outside_array(v) and not is_value(v)


def _root(n):
  """The expression a chain of subscripts indexes: `k` of `k[i][j]`."""
  while isinstance(n, ast.Subscript):
    n = n.value
  return n


def unrolled(tracer, node: ast.For, fn, bounds, carry=False):
  """ml.static_range where `fn` is range of static `bounds` (at most UNROLL trips) whose body needs a static index
  (or, `carry`, makes a scalar it carries a tensor: its run-time trace failed so), else `fn`."""
  from .ops import control as ctl
  if few_trips(fn, bounds) and (carry or needs_static_index(tracer, node)):
    return ctl.static_range
  return fn


def unrollable(e, loc, init, leaf):
  """MG005 `e` of the loop at `loc`, marked as one its unrolling lifts where `init`, a scalar, becomes `leaf`, a
  tensor (retried_unrolled)."""
  from .types import TensorType
  if not init.type.shape and isinstance(leaf.type, TensorType):
    e.unroll_loop = loc
  return e


def retried_unrolled(tracer, e, loc, fn, bounds, pipelined, undo, node) -> bool:
  """Whether the loop `node` at `loc`, whose run-time trace failed with `e`, is traced again unrolled (its trace
  undone): `e` is its own unrollable MG005 and it is Python's range of few trips."""
  if getattr(e, "unroll_loop", None) is not loc or not few_trips(fn, bounds, pipelined):
    return False
  undo(tracer)
  tracer.unroll_loops = getattr(tracer, "unroll_loops", set()) | {id(node)}
  return True


def few_trips(fn, bounds, pipelined=False) -> bool:
  """Whether `fn` is Python's range of static `bounds` of at most UNROLL trips (not a pipelined loop's)."""
  return fn is range and not pipelined and all(type(x) is int for x in bounds) and bool(bounds[2]) and \
      len(range(*bounds)) <= UNROLL


def _register(v) -> bool:
  from .ops.base import is_value
  from .types import TensorType
  return is_value(v) and isinstance(v.type, TensorType)


def needs_static_index(tracer, node: ast.For) -> bool:
  """Whether the body of `node` (a for over range(...), its target a name) indexes a static container by the loop
  index (or a name computed from it), or grows a list."""
  return _needs(tracer, node.body, {node.target.id})


def _needs(tracer, stmts, seed, depth=0) -> bool:
  """needs_static_index of the statements `stmts`, `seed` the names holding the loop index; also through the
  kernel's own helpers the body calls with it (depth: how many such calls deep)."""
  body = list(_walk(stmts))
  index = set(seed) | _static_carries(tracer, body)
  grew = True
  while grew:                 # names computed from the index: k = j * 2, then tiles[k]
    grew = False
    for n in body:
      if isinstance(n, ast.For) and _reads(n.iter, index):     # an inner loop over range(stage - 1, -1, -1)
        for m in ast.walk(n.target):
          if isinstance(m, ast.Name) and m.id not in index:
            index.add(m.id)
            grew = True
      if isinstance(n, (ast.Assign, ast.AnnAssign, ast.AugAssign)) and n.value is not None and _reads(n.value, index):
        targets = n.targets if isinstance(n, ast.Assign) else [n.target]
        for t in targets:
          for m in ast.walk(t):
            if isinstance(m, ast.Name) and m.id not in index:
              index.add(m.id)
              grew = True
  for n in body:
    if isinstance(n, ast.Subscript) and isinstance(_root(n), ast.Name) and isinstance(n.ctx, ast.Load) and \
        _reads(n.slice, index) and _static_container(tracer, _root(n).id):
      return True             # (k[i][j] of a nested list of taps too: its root, k; probe 53b)
    if isinstance(n, ast.Subscript) and isinstance(n.value, ast.Name) and _register(tracer.env.get(n.value.id)) \
        and any(isinstance(s, ast.Slice) and _reads(s, index) for s in ast.walk(n.slice)):
      return True             # acc[j * 32:(j + 1) * 32]: a window of a register tensor has static bounds
    if isinstance(n, ast.Call) and (_static_args(n, index) or _shape_args(tracer, n, index)):
      return True             # jnp.roll(x, s, axis=0): a shift, a diagonal or pad widths are static ints
    if _chooses_refs(tracer, n, index):
      return True             # src, dst = (a, b) if j % 2 == 0 else (b, a): ping-pong buffers (probe 67a)
    if isinstance(n, ast.Call) and depth < 4 and _helper_needs(tracer, n, index, depth):
      return True             # sort2(j, j + 1) of a helper that indexes a list by its parameters (probe 67a)
    if isinstance(n, ast.Call) and isinstance(n.func, ast.Attribute) and n.func.attr in _GROW and \
        isinstance(n.func.value, ast.Name) and isinstance(tracer.env.get(n.func.value.id), list):
      return True
    if isinstance(n, ast.AugAssign) and isinstance(n.target, ast.Name) and isinstance(n.op, ast.Add) and \
        isinstance(tracer.env.get(n.target.id), (list, tuple)):
      return True
    if isinstance(n, ast.Assign) and len(n.targets) == 1 and isinstance(n.targets[0], ast.Name) and \
        isinstance(n.value, ast.BinOp) and isinstance(n.value.op, ast.Add) and \
        isinstance(tracer.env.get(n.targets[0].id), (list, tuple)) and \
        any(isinstance(s, (ast.List, ast.Tuple)) for s in (n.value.left, n.value.right)):
      return True
  return False


def _helper_needs(tracer, call: ast.Call, index, depth) -> bool:
  """Whether `call` calls a helper defined in the kernel (a def or lambda of its body: its tree is known) with
  arguments that read the loop index, and the helper's body needs those parameters static: a median filter's
  compare-exchange `sort2(j, j + 1)` over a Python list of taps, `t[i], t[j] = lo, hi` (it was MG003, "cannot
  index t (a Python list) with a runtime value", where Python runs it with the index an int)."""
  if not isinstance(call.func, ast.Name):
    return False
  fn = tracer.env.get(call.func.id)
  parsed = getattr(fn, "parsed", None)
  tree = parsed[1] if isinstance(parsed, tuple) else None
  if not isinstance(tree, ast.FunctionDef):
    return False
  params = [a.arg for a in tree.args.posonlyargs + tree.args.args]
  seed = {p for p, a in zip(params, call.args) if not isinstance(a, ast.Starred) and _reads(a, index)}
  seed |= {k.arg for k in call.keywords if k.arg in params + [a.arg for a in tree.args.kwonlyargs]
           and _reads(k.value, index)}
  return bool(seed) and _needs(tracer, tree.body, seed, depth + 1)


def _ref_bound(tracer, name) -> bool:
  """Whether `name` is bound to a ref (an SMEM buffer, a GMEM ref, a view) or a tuple or list of them."""
  from .ops.base import is_ref
  v = tracer.env[name] if name in tracer.env else tracer.scope.get(name)
  return is_ref(v) or isinstance(v, (tuple, list)) and bool(v) and all(is_ref(x) for x in v)


def _bare_ref(tracer, node) -> bool:
  """Whether `node` is a ref itself, not a value read from one: a name bound to a ref, its view (`a.at[...]`, `a.T`)
  or a tuple or list of them."""
  if isinstance(node, (ast.Tuple, ast.List)):
    return bool(node.elts) and all(_bare_ref(tracer, e) for e in node.elts)
  if isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at":
    return _bare_ref(tracer, node.value.value)
  if isinstance(node, ast.Attribute) and node.attr == "T":
    return _bare_ref(tracer, node.value)
  return isinstance(node, ast.Name) and _ref_bound(tracer, node.id)


def _binds_refs(tracer, n) -> bool:
  """Whether `n` assigns refs to names: `src, dst = b, a`, `src = a.at[0]`."""
  return isinstance(n, ast.Assign) and all(isinstance(t, (ast.Name, ast.Tuple, ast.List)) for t in n.targets) and \
      (_bare_ref(tracer, n.value) or isinstance(n.value, ast.IfExp) and
       (_bare_ref(tracer, n.value.body) or _bare_ref(tracer, n.value.orelse)))


def _chooses_refs(tracer, n, index) -> bool:
  """Whether `n` chooses refs by the loop index, or rebinds a name bound to a ref: Jacobi's or a double-buffered
  stencil's ping-pong, `src, dst = (a, b) if it % 2 == 0 else (b, a)`, the same as an `if` statement, or `src, dst
  = dst, src` at the end of each trip. Python runs them with the index an int; a run-time loop cannot carry a ref
  (MG003, "a ref cannot be chosen at run time"; MG005, "rebound inside a runtime loop")."""
  if isinstance(n, ast.IfExp):
    return _reads(n.test, index) and (_bare_ref(tracer, n.body) or _bare_ref(tracer, n.orelse))
  if isinstance(n, ast.If):
    return _reads(n.test, index) and any(_binds_refs(tracer, m) for m in _walk(n.body + n.orelse))
  if _binds_refs(tracer, n):
    return any(isinstance(m, ast.Name) and _ref_bound(tracer, m.id) for t in n.targets for m in ast.walk(t))
  return False


def _static_args(call: ast.Call, index) -> bool:
  """Whether `call` is one of _STATIC_ARGS (or _STATIC_ALL) whose static arguments read the loop index."""
  name = call.func.attr if isinstance(call.func, ast.Attribute) else call.func.id if isinstance(
      call.func, ast.Name) else None
  if name not in _STATIC_ARGS + _STATIC_ALL:
    return False
  args = (call.args if name in _STATIC_ALL else call.args[1:]) + [k.value for k in call.keywords if k.arg not in ("a", "m", "x", "array")]
  return any(_reads(a, index) for a in args)


def _static_carries(tracer, body) -> set:
  """Names bound to Python ints before the loop that its body assigns (`L *= 2`, `j //= 2`): Python runs them as
  ints, which a run-time loop would carry as scalars."""
  out = set()
  for n in body:
    targets = n.targets if isinstance(n, ast.Assign) else [n.target] if isinstance(n, (ast.AugAssign, ast.AnnAssign)) \
        else []
    for t in targets:
      if isinstance(t, ast.Name) and type(tracer.env.get(t.id)) is int:
        out.add(t.id)
  return out


def _shape_args(tracer, call: ast.Call, index) -> bool:
  """Whether `call` is one of _SHAPES whose shape arguments read the loop index."""
  import types
  f = call.func
  name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
  if name not in _SHAPES:
    return False
  first = _SHAPES[name]
  if isinstance(f, ast.Attribute):       # jnp.reshape(x, shape) of a module, or x.reshape(*shape) of a tensor
    base = f.value
    mod = isinstance(base, ast.Attribute) or isinstance(base, ast.Name) and isinstance(
        tracer.env.get(base.id, tracer.scope.get(base.id)), types.ModuleType)
    first = first if mod else 0
  args = call.args[first:first + 1] if name in ("zeros", "ones", "full", "empty") else call.args[first:]
  args = args + [k.value for k in call.keywords if k.arg in ("shape", "newshape", "start", "stop", "step")]
  return any(_reads(a, index) for a in args)
