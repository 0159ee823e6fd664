"""jax.scipy.special's gamma family that jax composes of lax.lgamma, and jnp's aliases of jax.scipy.special (probe
56f): `gammasgn`, `loggamma`, `factorial`, `beta`, `betaln`, `comb`, `poch`, `multigammaln`, `boxcox`, `boxcox1p` of
real operands (special_more's helpers), `jnp.i0` (jax.scipy.special.i0). Forms as jnp_math's are (the parameters a
form reads, a function of the bound arguments giving (the form, its operands) or None: MG003 and its hint stand).
Operands promote as jax's promote_args_inexact (integers and bools to float32, two floats to their wider one) and
compute in float32, a 16-bit result rounded once, as jnp_bits' lgamma."""
from __future__ import annotations

from .jnp_bits import _LAYOUT, _scaled
from .jnp_forms import _dtype, _kind


def _inexact_all(xs):
  """The dtype name jax's promote_args_inexact gives the operands `xs` (register values or Python numbers), or
  None where one is neither a real number nor a tensor of one, or none is a tensor."""
  from .ops.promotion import arithmetic_in
  if all(_dtype(x) is None for x in xs) or any(_kind(x) not in ("float", "int", "bool") for x in xs):
    return None
  floats = [_dtype(x) for x in xs if _dtype(x) is not None and _kind(x) == "float"]
  if any(str(f) not in _LAYOUT for f in floats):
    return None
  d = floats[0] if floats else None
  for f in floats[1:]:
    d = d if f == d else arithmetic_in(d, f)
    if d is None:
      return None
  return "float32" if d is None else str(d)


def _helper(name, params, static=()):
  """A form calling special_more's `name` on the float32 conversions of the operands named `params` (a Python
  number becomes a float32 tile of the first tensor's shape); `static`: parameters passed on as Python ints."""
  def form(a):
    from . import special_more
    xs = [a.get(p) for p in params]
    d = _inexact_all(xs)
    if d is None or any(not isinstance(a.get(s), int) or isinstance(a.get(s), bool) for s in static):
      return None
    first = next(i for i, x in enumerate(xs) if _dtype(x) is not None)
    conv = [f"{{{i}}}" if _dtype(x) is not None and str(_dtype(x)) == "float32" else
            f"{{{i}}}.astype(ml.float32)" if _dtype(x) is not None else
            f"ml.full({{{first}}}.shape, {float(x)!r}, ml.float32)" for i, x in enumerate(xs)]
    n = len(xs)
    args = ", ".join(conv + [f"{{{n + 1 + j}}}" for j in range(len(static))])
    body = f"{{{n}}}({args})"
    if d != "float32":
      body = f"({body}).astype(ml.{d})"
    return body, [*xs, getattr(special_more, name), *[a.get(s) for s in static]]
  return form


def _comb(a):
  rep = a.get("repetition", False)
  if not isinstance(rep, bool):
    return None
  return _helper("comb_repeated" if rep else "comb", ("N", "k"))(a)


def _factorial(a):
  return None if a.get("exact", False) is not False else _helper("factorial", ("n",))(a)


_SS = "jax.scipy.special"
SPECIAL = {
    (_SS, "gammasgn"): (("x",), _helper("gammasgn", ("x",))),
    (_SS, "loggamma"): (("x",), _helper("loggamma", ("x",))),
    (_SS, "factorial"): (("n", "exact"), _factorial),
    (_SS, "beta"): (("a", "b"), _helper("beta", ("a", "b"))),
    (_SS, "betaln"): (("a", "b"), _helper("betaln", ("a", "b"))),
    (_SS, "comb"): (("N", "k", "repetition"), _comb),
    (_SS, "poch"): (("z", "m"), _helper("poch", ("z", "m"))),
    (_SS, "multigammaln"): (("a", "d"), _helper("multigammaln", ("a",), static=("d",))),
    (_SS, "boxcox"): (("x", "lmbda"), _helper("boxcox", ("x", "lmbda"))),
    (_SS, "boxcox1p"): (("x", "lmbda"), _helper("boxcox1p", ("x", "lmbda"))),
    ("jnp", "i0"): (("x",), _scaled("i0e")),
}
