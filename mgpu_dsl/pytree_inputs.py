"""Inputs passed as pytrees: a dict, tuple or list of arrays, a NamedTuple of weights or a registered
dataclass given as one argument, as `pallas_call` takes them. The kernel's parameter receives the same
structure of GMEM refs (`p['w'][...]`, `w, b = p`, `p.w`); the call is that of a kernel whose inputs are
the leaves, in JAX's order (a dict's by sorted key), so jit, vmap, the caches and the checks see arrays.

A kernel called with pytrees is served by a derived kernel per structure (`flat_call`), whose parsed
signature names each leaf as the user reads it (`p['w']`, `p[0]`, `p.w`: jax.tree_util.keystr) and whose
out_shape/grid/block/cluster callables get the structures back (they are the user's, written for them).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import functools
import inspect

from . import calling, derived_kernels
from .frontend import errors as E


def _number(x) -> bool:
  import numpy as np
  return isinstance(x, (bool, int, float, np.number, np.bool_))


def _tree_of(a):
  """(leaves with their paths, treedef) of an argument that is a pytree of arrays with more than itself (a
  container), else None: an array, a number, a list of numbers (made one array elsewhere) or None. Python
  and NumPy numbers among arrays, or in a dict or NamedTuple (`{'scale': 2.0}`), are 0-d inputs, as a
  number passed for one is."""
  import jax
  if a is None:               # an optional input left out (Triton's bias=None): a structure of no leaves
    return jax.tree_util.tree_flatten_with_path(None)
  if calling.is_array_like(a):
    return None
  try:
    flat, treedef = jax.tree_util.tree_flatten_with_path(a)
  except Exception:
    return None
  if treedef.num_leaves == 1 and treedef.num_nodes == 1:
    return None             # a leaf of its own (a number, an object JAX does not know)
  arrays = [calling.is_array_like(l) for _, l in flat]
  if not flat or not all(x or _number(l) for x, (_, l) in zip(arrays, flat)):
    return None             # (mixed containers: calling's own messages)
  if not any(arrays) and isinstance(a, (list, tuple)) and not hasattr(a, "_fields"):
    return None             # a list of numbers: one array (calling's hint makes it with jnp.asarray)
  return flat, treedef


def flat_call(kernel, args, constexprs, loc):
  """(the kernel for the structures of `args`, their leaves, the constexprs) where an input is a pytree of
  arrays (by position, or by keyword in a run of inputs after the positional ones), else None. One derived
  kernel per structure (its specialisations are its own). A kernel of a star parameter (`def k(*refs)`) is
  first the kernel of the call's count of refs (star_refs.py)."""
  from . import star_refs
  star = star_refs.star_call(kernel, args, constexprs, loc)
  if star is not None:
    return flat_call(*star, loc) or star
  pk = kernel.parsed
  named = {pk.ref_params.index(k): k for k, v in constexprs.items()
           if k in pk.ref_params and (_tree_of(v) is not None or calling.is_array_like(v))}
  if named and sorted(named) == list(range(len(args), len(args) + len(named))) and \
      any(_tree_of(constexprs[k]) is not None for k in named.values()):
    constexprs = dict(constexprs)
    args = tuple(args) + tuple(constexprs.pop(named[i]) for i in sorted(named))
  _check_leaves(kernel, pk, args, loc)
  trees = {i: t for i, a in enumerate(args) if (t := _tree_of(a)) is not None}
  lo, hi = kernel._input_bounds(pk)
  if not trees or len(args) < lo or max(trees) >= hi:
    return None         # inputs left out, or a pytree past them: the call as given says what is missing
  for i, (flat, _) in trees.items():
    name = pk.ref_params[i] if i < len(pk.ref_params) else None
    if name is not None and name in pk.scalar_params:
      raise E.SignatureError(
          f"{kernel.__name__}: input {i} ({name}) is an ml.scalar, given {calling.describe(args[i])}", loc,
          hint=f"an ml.scalar takes one number: drop the annotation to take the pytree's arrays as refs"
               f" ({name}[...]), or pass one of its values")
  key = tuple((i, t[1]) for i, t in sorted(trees.items()))
  derived = kernel._pytree_kernels.get(key)
  if derived is None:
    derived = kernel._pytree_kernels[key] = _derive(kernel, trees)
  leaves = [l for i, a in enumerate(args) for l in ([l for _, l in trees[i][0]] if i in trees else [a])]
  return derived, tuple(leaves), constexprs


def _check_leaves(kernel, pk, args, loc) -> None:
  """A pytree input holding arrays and something else (a string, a function, an object): SignatureError
  naming that leaf, where calling's message would say to pass the container's arrays one by one."""
  import jax
  for i, a in enumerate(args):
    if calling.is_array_like(a) or not isinstance(a, (dict, tuple, list)) and not hasattr(a, "__dataclass_fields__"):
      continue
    try:
      flat, _ = jax.tree_util.tree_flatten_with_path(a)
    except Exception:
      continue
    arrays = [calling.is_array_like(l) for _, l in flat]
    bad = next(((p, l) for x, (p, l) in zip(arrays, flat) if not x and not _number(l)), None)
    if bad is None or not any(arrays):
      continue
    name = pk.ref_params[i] if i < len(pk.ref_params) else f"input {i}"
    leaf = name + jax.tree_util.keystr(bad[0])
    last = bad[0][-1]
    kw = getattr(last, "key", None) if isinstance(getattr(last, "key", None), str) else getattr(last, "name", "value")
    raise E.SignatureError(
        calling.cap(f"{kernel.__name__}: input {i} ({name}) is a pytree of arrays whose leaf {leaf} is"
                    f" {calling.describe(bad[1])}; a pytree input holds arrays (and numbers)"), loc,
        hint=f"leave it out of {name}; a compile-time value is a constexpr, passed by keyword"
             f" ({kernel.__name__}(..., {kw}=...) with a"
             f" keyword-only parameter of that name)")


@contextlib.contextmanager
def miscounted(args):
  """Around the call of a kernel of pytree leaves: where a plain list or tuple of arrays among `args` makes
  the count of inputs and outputs wrong (an out_shape `lambda x: x` given a list of arrays describes one
  output per array: the list was meant as one array), the error is dropped, and the caller goes on with the
  call as given, whose message names the input that is not an array (`input 0 (x) is a list of 1000 items`,
  hinting jnp.stack). A dict's or NamedTuple's count error stands."""
  try:
    yield
  except E.SignatureError as e:
    listed = any(type(a) in (list, tuple) and _tree_of(a) is not None for a in args)
    if "ref parameter" not in e.message or not listed:
      raise


def _derive(kernel, trees):
  """A copy of `kernel` whose inputs are the leaves of `trees` ({input position: (leaves with paths,
  treedef)}) in their places. Its input_output_aliases index the leaves, as pallas_call's index the
  flattened inputs and outputs."""
  derived = derived_kernels.copy(kernel)
  treedefs = {i: t[1] for i, t in trees.items()}

  def rebuild(flat):
    """The user's arguments from the leaves (the out_shape/grid callables' view: the inputs only, the
    constexprs given by position after them gone to the keywords)."""
    out, k = [], 0
    while k < len(flat) or len(out) in treedefs:      # (an input passed as None, last, has no leaves)
      t = treedefs.get(len(out))
      out.append(flat[k] if t is None else t.unflatten(flat[k:k + t.num_leaves]))
      k += 1 if t is None else t.num_leaves
    return out
  for what in ("out_shape", "grid", "block", "cluster"):
    f = getattr(kernel, what)
    if callable(f) and not isinstance(f, type):
      setattr(derived, what, _rebuilding(f, rebuild, treedefs))
  return _copy(kernel, trees, derived)


def _copy(kernel, trees, derived=None):
  """`kernel` (or `derived`, a copy of it with callables of its own) with the ref parameters at the
  positions of `trees` expanded to their leaves, and caches of its own."""
  tag = repr([(i, str(t[1])) for i, t in sorted(trees.items())])
  derived = derived_kernels.derive(kernel, functools.partial(expand, trees=trees), tag, derived)
  derived._trees = trees
  return derived


def user_inputs(kernel, n: int) -> list:
  """The input parameters of the user's call of `kernel` on `n` (flat) inputs, as the user wrote the call: a
  derived kernel's leaves (`p['w']`, `p['b']`) are its base kernel's one parameter `p` (MG009's hint writes
  `k(jax.lax.stop_gradient(x), jax.lax.stop_gradient(p))`; it listed the leaves as inputs of their own)."""
  base, trees = getattr(kernel, "_base", None), getattr(kernel, "_trees", None)
  if base is None or not trees:
    return list(kernel.parsed.ref_params[:n])
  k = used = 0
  while used < n:
    used += trees[k][1].num_leaves if k in trees else 1
    k += 1
  return user_inputs(base, k)


def _rebuilding(f, rebuild, treedefs):
  """`f` (an out_shape/grid/block/cluster callable) called with the leaves, as the user wrote it for the
  structures; its signature shows a parameter per leaf, so the arity checks count leaves."""
  def call(*flat, **kw):
    return f(*rebuild(list(flat)), **kw)
  try:
    sig = inspect.signature(f)
  except (TypeError, ValueError):
    return call
  params, out, k = list(sig.parameters.values()), [], 0
  for p in params:
    if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and k in treedefs:
      out += [p.replace(name=f"{p.name}_{j}", kind=p.POSITIONAL_OR_KEYWORD) for j in range(treedefs[k].num_leaves)]
    else:
      out.append(p)
    k += p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
  try:
    call.__signature__ = sig.replace(parameters=out)
  except ValueError:         # (a default before a leaf's parameter: the plain call)
    pass
  return call


def expand(pk, trees):
  """The parsed kernel `pk` with each pytree input's parameter as its leaves (`p['w']`, `p.w`, `p[0]`)."""
  import jax
  refs, roots = list(pk.ref_params), {}
  for i in sorted(trees, reverse=True):
    if i >= len(pk.ref_params):
      continue
    flat, treedef = trees[i]
    root = pk.ref_params[i]
    names = [root + jax.tree_util.keystr(path) for path, _ in flat]
    refs[i:i + 1] = names
    roots[root] = (treedef.unflatten, names)
  # (the new roots first: one may be a leaf of an earlier structure, refs[0] of a star parameter's refs)
  return dataclasses.replace(pk, ref_params=refs, trees={**roots, **pk.trees})


# ---------------------------------------------------------------- outputs grouped as pallas_call groups them
class OutputTrees(Exception):
  """Raised by a specialisation whose out_shape has more leaves than the kernel has output parameters, where
  they group as pallas_call passes them: a tuple or list out_shape one parameter per item, another (a dict)
  one parameter for the whole; the call goes on with a kernel whose grouped parameters take their leaves.
  `trees`: {output position: (leaves with paths, treedef)}, of `n_out` output parameters. `tentative`: a tuple
  or list of several items for a kernel of one output parameter, taken whole (a multi-tensor step's
  `out_shape=lambda ps, gs: ps` for `def step(ps, gs, new_ps)`) only where the kernel traces so; else the call
  goes on as given, whose count error stands (a list of arrays meant as one array: `input 0 (x) is a list`)."""

  def __init__(self, trees, n_out, tentative=False):
    super().__init__("pallas_call's output grouping")
    self.trees, self.n_out, self.tentative = trees, n_out, tentative

  def derived(self, kernel):
    pk = kernel.parsed
    start = len(pk.ref_params) - self.n_out
    trees = {start + j: t for j, t in self.trees.items()}
    key = ("outputs", tuple((i, t[1]) for i, t in sorted(trees.items())))
    if key not in kernel._pytree_kernels:
      kernel._pytree_kernels[key] = _copy(kernel, trees)
    return kernel._pytree_kernels[key]


def check_output_trees(pk, out, n_in: int) -> None:
  """Raise OutputTrees where `out`'s leaves do not fit the kernel's output parameters one each, but its
  items (or the whole) do, as pallas_call's kernel takes them (`def k(x, o)` with a dict out_shape: `o['m']`)."""
  import jax
  n_out = len(pk.ref_params) - n_in
  if n_out <= 0 or len(jax.tree.leaves(out)) == n_out:
    return
  items = list(out) if isinstance(out, (tuple, list)) else [out]
  if len(items) != n_out and n_out == 1 and _WHOLE.get():
    raise OutputTrees({0: jax.tree_util.tree_flatten_with_path(out)}, 1, tentative=True)
  if len(items) != n_out:
    return
  trees = {}
  for j, item in enumerate(items):
    flat, treedef = jax.tree_util.tree_flatten_with_path(item)
    if treedef.num_nodes > 1 and flat:
      trees[j] = (flat, treedef)
  if trees:
    raise OutputTrees(trees, n_out)


def output_trees(method):
  """`method` of a kernel (a call, check, mlir, typed_ir) going on with the kernel of grouped outputs where its
  out_shape groups them (OutputTrees)."""
  @functools.wraps(method)
  def wrapper(self, *args, **kwargs):
    try:
      return method(self, *args, **kwargs)
    except OutputTrees as t:
      if not t.tentative:
        return method(t.derived(self), *args, **kwargs)
      try:
        return method(t.derived(self), *args, **kwargs)
      except E.KernelError as e:
        if isinstance(e, E.InternalError) or e.code not in _NOT_WHOLE:
          raise                      # a mistake of the kernel's own, taking its outputs whole
      token = _WHOLE.set(False)      # the kernel does not take the outputs whole: the call as given
      try:
        return method(self, *args, **kwargs)
      finally:
        _WHOLE.reset(token)
  return wrapper


# The errors of a kernel that does not take a tuple or list of outputs whole: a container used as a ref (MG003),
# callables given a list meant as one array (MG006, MG007).
_NOT_WHOLE = ("MG003", "MG006", "MG007")

# Whether check_output_trees may offer one output parameter the whole of a tuple or list out_shape.
_WHOLE = contextvars.ContextVar("mgpu_dsl_whole_outputs", default=True)
