"""JAX's pytree utilities in a kernel (probe 69a): optax's and a hand-written training step's `jax.tree.map(lambda p,
g: ..., params, grads)`, `jax.tree.leaves(grads)` (a global norm over every gradient), `jax.tree.reduce`, their
`jax.tree_util.tree_*` names and `flatten` / `unflatten` / `structure`. A kernel's pytree inputs and outputs are the
user's structures with refs for leaves (mgpu_dsl/pytree_inputs.py), and the values a kernel computes are Python
objects JAX's registry does not know, so each is a leaf: the user's own function (the one the call names) walks the
structure while tracing, as it would arrays, and a function it applies (`f` of map, reduce; `is_leaf`) is traced as
the kernel calls it, each leaf's call in place. The frontend does not import JAX: the function called is the user's.

Before, `jax.tree.map` (named `map`) was taken for `lax.map`, JAX's control flow ("write `for j in range(n)`"), and
`jax.tree.leaves` of refs was MG003 ("has no form in a kernel")."""
from __future__ import annotations

# The functions of jax.tree and jax.tree_util (their __name__s) that walk a structure, and which of their
# arguments are functions the kernel traces.
_STRUCTURAL = {"leaves", "tree_leaves", "flatten", "tree_flatten", "structure", "tree_structure", "unflatten",
               "tree_unflatten", "flatten_with_path", "tree_flatten_with_path", "leaves_with_path",
               "tree_leaves_with_path", "all", "tree_all"}
_APPLYING = {"map", "tree_map", "reduce", "tree_reduce", "map_with_path", "tree_map_with_path"}


def handles(fn) -> bool:
  """`fn` is one of jax.tree's or jax.tree_util's structure functions (not lax.map, also named `map`)."""
  module = getattr(fn, "__module__", "") or ""
  return module.startswith("jax") and module.rsplit(".", 1)[-1] in ("tree", "tree_util") and getattr(
      fn, "__name__", "") in _STRUCTURAL | _APPLYING


def of_jax_not_tree(fn) -> bool:
  """`fn` is JAX's (its module is), and not one of these: lax.map and jax.tree.map share a name."""
  return (getattr(fn, "__module__", "") or "").startswith("jax") and not handles(fn)


def call(tracer, node, fn, args, kwargs):
  """`fn(*args, **kwargs)` while tracing: the user's function run on the structures, each function argument it
  applies to leaves traced as the kernel's own call of it."""
  from .inline import LocalFunction
  from .language import Inline

  def traced(f):
    if isinstance(f, (Inline, LocalFunction)) or callable(f) and not isinstance(f, type):
      return lambda *a: tracer.call(node, f, list(a), {})
    return f
  name = fn.__name__
  if name in _APPLYING and args:
    args = [traced(args[0]), *args[1:]]
  if callable(kwargs.get("is_leaf")):
    kwargs = dict(kwargs, is_leaf=traced(kwargs["is_leaf"]))
  return fn(*args, **kwargs)
