"""Whether out_shape's keys and fields bind the output parameters they name. A dict out_shape binds its
leaves to the output parameters in JAX's order (sorted keys), a NamedTuple or dataclass in its fields'
order, not by name: where that binds a key to another parameter than the one named after it, the outputs
would be silently swapped."""
from __future__ import annotations

from .calling import cap
from .frontend import errors as E

# How output parameters are named after what they hold: a gradient (dw, d_w, w_grad), an update (w_new,
# new_w, w_next), a ref (w_ref, w_out, o_w). Stripping one of these from a parameter's name gives the key.
_PREFIXES = ("d_", "d", "grad_", "g_", "new_", "next_", "out_", "o_", "upd_", "updated_")
_SUFFIXES = ("_ref", "_out", "_new", "_next", "_grad", "_g", "_o", "_upd", "_updated")


def _names(param: str, key: str) -> bool:
  """Whether output parameter `param` is named after `key` (`w`, `dw`, `w_new`, `dw_ref`)."""
  if param == key:
    return True
  for s in _SUFFIXES:
    if param.endswith(s) and len(param) > len(s) and _names(param[:-len(s)], key):
      return True
  return any(param.startswith(p) and param[len(p):] == key for p in _PREFIXES)


def check(pk, out, n_in: int, at) -> None:
  """Raise SignatureError where a key or field of `out` binds another output parameter than the one
  named after it: `{"var": ..., "mean": ...}` with `def k(x, var, mean)`, `Stats(mean, var)` with the same
  def, or a gradient kernel's `(x, params)` with `def bwd(g, x, p, dx, dw, db)` for params `{'w', 'b'}`
  (whose leaves go dx, then b, then w: `dw` would receive b's gradient)."""
  import jax
  tu = jax.tree_util
  outs = pk.ref_params[n_in:]
  flat, _ = tu.tree_flatten_with_path(out)
  last = [path[-1] if path else None for path, _ in flat]
  keys = [k.key if isinstance(k, tu.DictKey) else k.name if isinstance(k, tu.GetAttrKey) else None for k in last]
  if len(keys) != len(outs):
    return
  for i, (key, param) in enumerate(zip(keys, outs)):
    if not isinstance(key, str) or _names(param, key):
      continue
    named = [q for q in outs if q != param and _names(q, key)]
    if len(named) != 1:
      continue
    order = ", ".join(repr(k) for k in keys if isinstance(k, str))
    names = ", ".join(k for k in keys if isinstance(k, str))
    if isinstance(last[i], tu.DictKey):
      what, rule, fix = "key", f"a dict's outputs follow its sorted keys ({order})", f"sorted-key order ({names})"
    else:
      kind = type(out).__name__ if len(flat) and all(len(p) == 1 for p, _ in flat) else "a pytree"
      what, rule, fix = "field", f"{kind}'s outputs follow its fields' order ({order})", f"the fields' order ({names})"
    bound = f"not the parameter named {key!r}" if named[0] == key else f"not {named[0]!r}, named after it"
    raise E.SignatureError(
        cap(f"out_shape's {what} {key!r} binds output parameter {param!r}, {bound}: {rule}, not parameter"
            f" names"), at("out_shape"),
        hint=f"name the output parameters in {fix}, or give out_shape a tuple in the parameters' order")
