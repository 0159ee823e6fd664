"""What Triton and jnp users reach for that mgpu_dsl does not have, and what to write instead:
the hints for a missing `ml.` name (the tracer's `ml.<name>` lookups)."""
from __future__ import annotations

import difflib

_SCAN = ("no general associative scan: ml.cumsum, ml.cumprod, ml.cummax and ml.cummin scan along an axis;"
         " for another combination, carry the running value through a loop")
_TOP = "no sort: repeated ml.argmax with ml.where masks picks the top k in k passes"
_TRANSPOSE = ("a 2-D tensor transposes with x.T or ml.transpose(x) (through SMEM); for the tensor cores,"
              " give ml.dot the transposed view buf.T, which moves no data")
_CONCAT = "build it in an SMEM buffer's windows: t.at[0:n][...] = a; t.at[n:2 * n][...] = b; then t[...]"
_POW = ("no ml.pow: use the ** operator for x ** n (a static int), x ** 0.5 and c ** t (c a positive"
        " Python number); otherwise, for x > 0, write ml.exp2(y * ml.log2(x))")
_DIV = "no ml.{}: divide with the / operator, x / y (ml.cdiv(a, b) is the ceiling of an integer division)"
_FLOOR_DIV = "no ml.{}: divide with the // operator, x // y (ml.cdiv(a, b) rounds up instead)"
_NOT_YET = {   # what Triton and jnp users reach for that mgpu_dsl does not have, and what to write
    "associative_scan": _SCAN, "scan": _SCAN, "sort": _TOP, "topk": _TOP,
    "trans": _TRANSPOSE, "permute": _TRANSPOSE,
    "gather": "index the GMEM ref with a tensor of indices: table[ids, :] (NumPy's advanced indexing)",
    "take": "index the GMEM ref with a tensor of indices: x[idx] (NumPy's advanced indexing)",
    "join": _CONCAT, "cat": _CONCAT, "concatenate": _CONCAT,
    "split": "read the halves through windows of the ref: x.at[:, 0:n][...] and x.at[:, n:2 * n][...]",
    "log1p": "no ml.log1p: ml.log(1 + x) loses the digits of small x; accurate for finite x:"
             " u = 1 + x; ml.where(u == 1, x, ml.log(u) * (x / (u - 1)))",
    "expm1": "no ml.expm1: ml.exp(x) - 1 loses the digits of small x; accurate for x below 88:"
             " u = ml.exp(x); ml.where(u == 1, x, ml.where(x < -20, -1.0, (u - 1) * (x / ml.log(u))))",
    "pow": _POW, "power": _POW,
    **{n: _DIV.format(n) for n in ("fdiv", "div_rn", "divide", "true_divide")},
    **{n: _FLOOR_DIV.format(n) for n in ("floor_divide", "floordiv")},
}


def missing_hint(base, attr) -> str:
  """The hint for a name a module lacks: the ml function a Triton or jnp user meant, if any."""
  if getattr(base, "__name__", "").endswith("language"):
    if attr in _NOT_YET:
      return _NOT_YET[attr]
    close = difflib.get_close_matches(attr, [n for n in dir(base) if not n.startswith("_")], n=1)
    if close:
      return f"did you mean ml.{close[0]}?"
  return "check the spelling"
