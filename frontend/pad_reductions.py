"""What a padded tile's reductions need of its padding (the MG204 padding hints of frontend/layout_hints.py): the
reductions that read it (through casts, or, since probe 46h, through elementwise math), the identity a masked load's
`other` gives them, and the note that selects it in where one `other` cannot serve them all."""
from __future__ import annotations

from . import ir
from .dtypes import DType


def reductions_of(body, v) -> tuple:
  """(the names of what reduces `v` or a conversion of it, `v.astype(jnp.float32)`, an 8-bit max
  computed in 32 bits, the max of an argmax, in the order sum, max, min, then the reverse scans the padding at the end
  would reach, cummax, cummin, cumprod; v's dtype)."""
  from .ops.elementwise import Cast
  from .ops.scan import Scan
  from .ops.shape import Reduce, ReduceKind
  ops = list(ir.walk(body))
  family, grew = {v.id}, True
  while grew:
    grew = False
    for o in ops:
      if isinstance(o, Cast) and not o.bitcast and (o.x.id in family) != (o.results[0].id in family):
        family |= {o.x.id, o.results[0].id}
        grew = True
  order = [k.value for k in ReduceKind] + ["mean", "argmax", "argmin", "cummax", "cummin", "cumprod"]

  def found(fam):
    kinds = {_reduction_name(o) for o in ops if isinstance(o, Reduce) and o.x.id in fam}
    kinds |= {"cum" + o.kind.value for o in ops if isinstance(o, Scan) and o.reverse and o.x.id in fam
              and o.kind.value != "sum"}
    return tuple(k for k in order if k in kinds)
  direct = found(family)
  if direct:
    return direct, v.type.dtype
  # Reduced only through elementwise math (`ml.argmax(x[...] * 2)`, `ml.max(-v)`): no `other` is the identity of
  # what reaches the reduction in general, so the hint loads 0 and selects the identity in before it (probe 46h)
  from .ops.elementwise import Binary, Unary, Where
  grew = True
  while grew:
    grew = False
    for o in ops:
      if isinstance(o, (Cast, Binary, Unary, Where)) and any(getattr(a, "id", None) in family for a in o.operands()) \
          and o.results and o.results[0].id not in family and hasattr(o.results[0].type, "shape"):
        family.add(o.results[0].id)
        grew = True
  return Through(k for k in found(family) if k != "sum"), v.type.dtype


class Through(tuple):
  """Reductions that reach a padded tile through elementwise math: its padding is selected to their identity
  right before each (the note of _padding_note), the load's `other` is 0."""


def loaded_other(kinds, dtype) -> str:
  """A padded load's `other`: the identity of the one reduction that reads the loaded tile itself, else 0."""
  return identity(kinds[0], dtype) if len(kinds) == 1 and not isinstance(kinds, Through) else "0"


def _reduction_name(o) -> str:
  """A Reduce's kind, "mean" for the sum of an ml.mean, ml.var or ml.std (its count is the tile's)."""
  import re
  loc = o.loc
  text = loc.source_line[loc.col_offset:loc.end_col_offset] if loc and loc.end_lineno == loc.lineno else ""
  if o.kind.value == "sum" and re.match(r"(ml\.(mean|var|std)\(|.*\.(mean|var|std)\()", text or ""):
    return "mean"
  if o.kind.value in ("max", "min") and re.match(rf"(ml\.arg{o.kind.value}\(|.*\.arg{o.kind.value}\()", text or ""):
    return "arg" + o.kind.value       # (its padding's identity is the max's, its name the user's)
  return o.kind.value


def identity(kind, dtype) -> str:
  """What a masked load's `other` is for the padding to leave a reduction of `kind` (a ReduceKind,
  or the name of a reduction or scan: "cummax") unchanged."""
  name = getattr(kind, "value", kind).removeprefix("cum").removeprefix("arg").replace("mean", "sum")
  if isinstance(dtype, DType) and not dtype.is_float and dtype != DType.bool_:
    lo, hi = dtype.int_range
    return {"sum": "0", "max": str(lo), "min": str(hi), "prod": "1"}[name]
  return {"sum": "0.0", "max": "float('-inf')", "min": "float('inf')", "prod": "1.0"}[name]


def _padding_note(kinds, dtype, mask) -> str:
  """For a tile padded with `other=0` that more than one kind of reduction reads: each kind but the
  sum reduces the tile with its own identity selected into the padding."""
  mean = (" (for a mean, a var or a std, compute it from ml.sum of the padded tile and the count of the elements"
          f" the mask keeps, not with ml.mean, ml.var or ml.std of it; a var sums the squared deviations where the"
          f" mask keeps them, ml.where({mask}, (v - mean) ** 2, 0.0))" if "mean" in kinds else "")
  rest = [k for k in kinds if k not in ("sum", "mean")]
  if (len(kinds) < 2 and not isinstance(kinds, Through)) or not rest:
    return mean
  sels = " and ".join(f"ml.{k}(ml.where({mask}, v, {identity(k, dtype)}){', ...' if k[:3] == 'cum' else ''})"
                      for k in rest)
  return f" (the padding must not count: reduce {sels} for the padded tile v){mean}"
