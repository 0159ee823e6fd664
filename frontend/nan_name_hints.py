"""Hints for jnp's numerics functions ml has no function of its own for (`ml.isclose`, `ml.nanmean`,
`ml.nanargmax`, `ml.ptp`, `ml.heaviside`, `ml.median`, `ml.deg2rad`, `ml.arctanh`): what to write, with
the call's own operands and axis. They said "check the spelling", or named a near spelling that
computes something else ("did you mean ml.cos?" for isclose, ml.arange for average, ml.randint for
nanmedian and radians, ml.float8_e5m2 for float_power)."""
from __future__ import annotations

import re

_CLOSE = "({0} == {1}) | (ml.abs({0} - {1}) <= 1e-08 + 1e-05 * ml.abs({1}))"
# ({0}, {1}: the call's operands; {a}: its axis, ", axis=1", or nothing: jnp's axis=None, everything)
FORMS = {
    "isclose": (_CLOSE, " (jnp.isclose's default tolerances; equal infinities are close, NaN never)"),
    "allclose": (f"ml.all({_CLOSE})", " (a scalar: jnp.allclose's default tolerances; NaN is never close)"),
    "nanmean": ("ml.sum(ml.where({0} != {0}, 0.0, {0}){a}) / ml.sum({0} == {0}{a})",
                " (the mean of the elements that are not NaN; NaN where all are, as jnp.nanmean)"),
    "nanargmax": ("ml.argmax(ml.where({0} != {0}, float('-inf'), {0}){a})",
                  " (NaN ranked lowest; where every element is NaN this gives 0, jnp.nanargmax -1)"),
    "nanargmin": ("ml.argmin(ml.where({0} != {0}, float('inf'), {0}){a})",
                  " (NaN ranked highest; where every element is NaN this gives 0, jnp.nanargmin -1)"),
    "nancumsum": ("ml.cumsum(ml.where({0} != {0}, 0.0, {0}){a})", ""),
    "nancumprod": ("ml.cumprod(ml.where({0} != {0}, 1.0, {0}){a})", ""),
    "ptp": ("ml.max({0}{a}) - ml.min({0}{a})", ""),
    "average": ("ml.mean({0}{a})", " (weights w: ml.sum({0} * w{a}) / ml.sum(w{a}))"),
    "heaviside": ("ml.where({0} > 0, 1.0, ml.where({0} < 0, 0.0, ml.where({0} == 0, {1}, {0})))",
                  " (NaN stays NaN, as jnp.heaviside)"),
    "positive": ("{0}", " (+x is x)"),
    **dict.fromkeys(("absolute", "fabs"), ("ml.abs({0})", "")),
    "float_power": ("ml.pow({0}, {1})", " (in float32: kernels have no float64, in which jnp.float_power computes)"),
    **dict.fromkeys(("deg2rad", "radians"), ("{0} * 0.017453292519943295", " (pi / 180)")),
    **dict.fromkeys(("rad2deg", "degrees"), ("{0} * 57.29577951308232", " (180 / pi)")),
    "sinc": ("ml.where({0} == 0, 1.0, ml.sin(3.141592653589793 * {0}) / (3.141592653589793 * {0}))", ""),
    "logaddexp2": ("ml.where({0} == {1}, {0} + 1.0, ml.maximum({0}, {1}) + ml.log2(1 + ml.exp2(-ml.abs({0} - {1}))))",
                   " (equal operands apart: inf and inf give inf, as jnp.logaddexp2)"),
    "round_half_even": ("ml.round({0})", " (halves to even, as jnp.round)"),
    # jax.scipy.special's terms of entropy and KL-divergence losses, with their edge values
    "xlogy": ("ml.where(({0} != 0) | ({1} != {1}), {0} * ml.log({1}), 0.0)",
              " (0 where {0} is 0, a NaN {1} kept, as jax.scipy.special.xlogy)"),
    "xlog1py": ("ml.where(({0} != 0) | ({1} != {1}), {0} * ml.log1p({1}), 0.0)",
                " (0 where {0} is 0, a NaN {1} kept, as jax.scipy.special.xlog1py)"),
    "entr": ("ml.where({0} < 0, float('-inf'), ml.where({0} == 0, 0.0, -{0} * ml.log({0})))",
             " (-inf below 0, as jax.scipy.special.entr)"),
    "rel_entr": ("ml.where(({0} > 0) & ({1} > 0), {0} * ml.log({0}) - {0} * ml.log({1}),"
                 " ml.where(({0} == 0) & ({1} >= 0), 0.0, float('inf')))", " (as jax.scipy.special.rel_entr)"),
    "kl_div": ("ml.where(({0} > 0) & ({1} > 0), {0} * ml.log({0}) - {0} * ml.log({1}),"
               " ml.where(({0} == 0) & ({1} >= 0), 0.0, float('inf'))) - {0} + {1}", " (as jax.scipy.special.kl_div)"),
    "expit": ("ml.sigmoid({0})", ""),
    "logit": ("ml.log({0} / (1 - {0}))", " (as jax.scipy.special.logit)"),
    "vdot": ("ml.sum({0} * {1})", " (jnp.vdot of real tensors: the sum of the products, a scalar)"),
}
_MEDIAN = ("no ml.{0}: sort the rows, s = ml.sort(v) (along the last axis, of a power-of-two length: pad a row with"
           " float('inf'), other=float('inf') on a masked load or ml.where(k < n, v, float('inf'))), then index the"
           " sorted rows: the median of n values is ml.sort(v, axis=-1)[:, n // 2] for odd n, and"
           " (s[:, n // 2 - 1] + s[:, n // 2]) / 2 for even n, as jnp.median's ({1}); a"
           " quantile q is s[:, k] at k = round(q * (n - 1)), jnp's 'nearest' method")
TEXTS = {
    "median": _MEDIAN.format("median", "NaN sorts last: where a row may hold one, jnp.median gives NaN"),
    "nanmedian": _MEDIAN.format("nanmedian", "NaN sorts last, so it counts as the largest, where jnp.nanmedian"
                                " drops it").replace("no ml.nanmedian: ", "no ml.nanmedian: jnp.nanmedian(v, axis=1)"
                                                     " computes along one axis of a 1-D or 2-D tile; otherwise ", 1),
    # (jnp.quantile, percentile and their nan forms compute at a static q along one axis: jnp_quantiles.py, probe 52d)
    **{n: _MEDIAN.format(n, "NaN sorts last").replace(
        f"no ml.{n}: ", f"no ml.{n}: jnp.{n}(v, {'0.9' if n.endswith('quantile') else '90'}, axis=1) computes at a"
        " static q (a number) along one axis of a 1-D or 2-D tile, with jnp's methods but inverted_cdf; otherwise ", 1)
       for n in ("quantile", "percentile", "nanquantile", "nanpercentile")},
    "nanprod": ("no ml.nanprod: take the last element of the running product of the elements that are not NaN,"
                " ml.cumprod(ml.where(v != v, 1.0, v), axis=1)[:, -1] along the rows of a 2-D v"),
    **{n: ("no ml.{0}: with k = v == v (the elements that are not NaN) along the rows of a 2-D v, n = ml.sum(k,"
           " axis=1), m = ml.sum(ml.where(k, v, 0.0), axis=1) / n, then {1}ml.sum(ml.where(k, (v - m[:, None]) *"
           " (v - m[:, None]), 0.0), axis=1) / n{2}").format(n, "ml.sqrt(" if n == "nanstd" else "",
                                                              ")" if n == "nanstd" else "")
       for n in ("nanvar", "nanstd")},
}
ALIASES = {"arcsinh": "asinh", "arccosh": "acosh", "arctanh": "atanh"}    # jnp's names of the formulas


def _axis(args) -> str | None:
  """', axis=1' for the call's axis (a keyword, or a reduction's second operand), '' for none."""
  kw = [a.strip() for a in args if re.match(r"\s*axis\s*=[^=]", a)]
  return f", axis={kw[0].split('=', 1)[1].strip()}" if kw else ""


def hint(attr, args, taken=frozenset()) -> str | None:
  """The hint for `ml.<attr>(args)` (`args`: the call's arguments as written, or None), or None."""
  from .missing import NOT_YET, _operand
  from .formula_hints import with_operands
  if attr in ALIASES:
    name = ALIASES[attr]
    text = with_operands(name, NOT_YET[name], args, taken) or NOT_YET[name]
    return text.replace(f"no ml.{name}:", f"no ml.{attr} (nor ml.{name}):", 1)
  if attr in TEXTS:
    return TEXTS[attr]
  if attr not in FORMS:
    return None
  form, note = FORMS[attr]
  pos = [a.strip() for a in (args or []) if not re.match(r"\s*\w+\s*=[^=]", a)]
  n = len(set(re.findall(r"\{(\d)\}", form)))
  xs = pos[:n] if len(pos) >= n else ["x", "y"][:n]
  a = _axis(args or [])
  ops = [x if form == "{0}" else _operand(x) for x in xs]
  return f"no ml.{attr}: write {form.format(*ops, a=a)}{note.format(*ops, a=a)}"
