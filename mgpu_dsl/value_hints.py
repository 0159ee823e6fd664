"""A launch callable (out_shape, grid, block, cluster) that reads its inputs' values, called where
they have none: under jax.jit, jax.vmap and jax.eval_shape, and by typed_ir/check/mlir, the callables
get abstract arrays (docs/language.md, "The decorator"). JAX's ConcretizationTypeError says so in
its own terms, a page long; this says it in the kernel's."""
from __future__ import annotations

from .frontend import errors as E


def reads_values(e: Exception) -> bool:
  """Whether `e` is JAX's error for a value asked of an abstract array (int(n[0]), np.asarray(x), if x[0]:)."""
  import jax
  kinds = tuple(getattr(jax.errors, n, None) for n in ("ConcretizationTypeError", "TracerArrayConversionError",
                                                       "TracerIntegerConversionError", "TracerBoolConversionError"))
  return isinstance(e, tuple(k for k in kinds if k is not None))


def values_error(what: str, described: str, loc) -> E.KernelError:
  """The SignatureError for the `what` callable reading the values of its inputs (`described`)."""
  if what == "out_shape":
    fix = ("an output's shape is fixed when the kernel is compiled: compute it from the inputs' shapes, or"
           " make the size a constexpr, def k(..., *, n: ml.constexpr) with out_shape=lambda x, *, n:"
           " jax.ShapeDtypeStruct((n,), x.dtype), called k(x, n=...) (under jax.jit, static: static_argnames);"
           " for a size known only at run time, make the largest output and slice the result after the call")
  else:
    fix = (f"the {what} is fixed when the kernel is compiled: compute it from the inputs' shapes, or make the"
           f" count a constexpr, def k(..., *, n: ml.constexpr) with {what}=lambda x, *, n: (n,), called"
           f" k(x, n=...) (under jax.jit, static: static_argnames)"
           + ("; for a count known only at run time, launch the largest grid and let the extra programs skip"
              " their work with a run-time if on the value read in the kernel" if what == "grid" else ""))
  return E.SignatureError(
      f"the {what} callable reads the values of its inputs ({described}), which are not known here: under"
      f" jax.jit, jax.vmap and jax.eval_shape, and in kernel.check and kernel.typed_ir, it gets abstract arrays (shapes and"
      f" dtypes only)", loc, hint=fix)


def fields_hint(x, name: str) -> str | None:
  """For an input that is a pytree with named fields (a NamedTuple, a registered dataclass, a flax
  struct): pass the fields, one parameter each. None for anything else."""
  import jax
  try:
    flat, _ = jax.tree_util.tree_flatten_with_path(x)
  except Exception:
    return None
  fields = [p[0].name for p, _ in flat if len(p) == 1 and isinstance(p[0], jax.tree_util.GetAttrKey)]
  if not flat or len(fields) != len(flat):
    return None
  return (f"kernel inputs are arrays, not pytrees: pass its fields as inputs of their own,"
          f" {', '.join(f'{name}.{f}' for f in fields)}, with a parameter for each (or unpack it,"
          f" *jax.tree.leaves({name}))")
