"""A float16 or bfloat16 running sum over many loop trips, or an 8- or 16-bit integer count over more trips than
its type holds (PrecisionWarning, not an error).

`acc = ml.zeros((128,), x.dtype)` then `acc = acc + x.at[i][...]` over 2048 rows of bfloat16 data: each trip
rounds the sum to 8 significant bits, so once it is 256 times a term the term no longer changes it; 2048 terms
of about 1 sum to 256. jnp computes the same with the same code, so the kernel is not wrong by the language's
rules, and a sum of terms of mixed signs, or of few of them, is fine: a warning, at the addition, with the
float32 accumulation that Triton's `acc = tl.zeros(..., dtype=tl.float32)` writes. Only loops whose trip count
is known while compiling are counted (with the static loops around them that carry the sum through).

An int8 or int16 count (`cnt = ml.zeros((128,), jnp.int8)`, `cnt += (v > 0).astype(jnp.int8)` over 300 tiles)
wraps past 127 (32767), as jnp's would, to a negative count: where the trips outnumber the type's largest value
a term of 1 on each would wrap it (probe 49f). The hint counts in int32, as Triton's `tl.sum` and jnp's
`jnp.sum` of a small integer type do.
"""
from __future__ import annotations

from . import errors as E
from . import ir
from .dtypes import DType
from .ops.control import For, Yield
from .ops.elementwise import BinOp, Binary, Cast
from .types import dtype_name, resolve

# Terms after which a sum of terms of one sign and size stops growing: 2**(significant bits)
TERMS = {DType.f16: 2 ** 11, DType.bf16: 2 ** 8}
# Largest value of the small integer types a count wraps in (probe 49f)
INT_MAX = {DType.i8: 2 ** 7 - 1, DType.i16: 2 ** 15 - 1, DType.u8: 2 ** 8 - 1, DType.u16: 2 ** 16 - 1}


def check_narrow_sums(kernel: ir.Kernel) -> None:
  defs = {r.id: o for o in ir.walk(kernel.body) for r in getattr(o, "results", ())}
  _visit(kernel.body, {}, defs, set())


def _visit(block, outer: dict, defs: dict, seen: set) -> None:
  """`outer`: block argument id of an enclosing static loop's carry -> the trips of the loops around it (a nested
  loop whose carry starts from it adds to the same sum on every trip of theirs too)."""
  for o in block.ops:
    inner = dict(outer)
    if isinstance(o, For) and all(type(x) is int for x in (o.start, o.stop, o.step)) and o.body.ops and isinstance(
        o.body.ops[-1], Yield):
      trips = len(range(o.start, o.stop, o.step))
      for a, init, v in zip(o.body.args[1:], o.inits, o.body.ops[-1].values):
        n = trips * outer.get(getattr(init, "id", None), 1)
        inner[a.id] = n
        _check(a, v, n, defs, seen)
    for r in o.regions:
      _visit(getattr(o, r), inner, defs, seen)


def _check(a, v, trips, defs, seen) -> None:
  d = resolve(a.type.dtype)
  add = defs.get(getattr(v, "id", None))
  limit = TERMS[d] if d in TERMS else INT_MAX.get(d)
  if d in INT_MAX:                        # (a small integer sum adds in int32 and converts back: through the casts)
    add = _uncast(add, defs)
  if limit is None or trips < limit + (d in INT_MAX) or not isinstance(add, Binary) or (
      add.kind not in (BinOp.ADD, BinOp.SUB)):
    return
  if not any(isinstance(x, ir.Value) and _root(x, defs).id == a.id for x in (add.lhs, add.rhs)) or add.loc in seen:
    return
  seen.add(add.loc)
  name = a.name or "the sum"
  t = dtype_name(d)
  if d in INT_MAX:
    _warn_count(name, t, trips, INT_MAX[d], tuple(getattr(a.type, 'shape', ())), add.loc)
    return
  start = f"ml.zeros({tuple(getattr(a.type, 'shape', ()))}, jnp.float32)"
  E.warn(E.KernelError(
      f"{name} ({t}) adds a term on each of {trips} loop trips, rounded to {t} after each: past {TERMS[d]} terms of"
      f" one sign a {t} sum stops growing (it keeps {TERMS[d].bit_length() - 1} significant bits), so it may lose"
      f" most of its value", add.loc,
      hint=f"accumulate in float32: start {name} as float32 ({name} = {start}), add each term as float32"
           f" (term.astype(jnp.float32)), and convert once after the loop: {name}.astype(jnp.{t}); if {t} is meant,"
           f" silence this with warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"),
         category=E.PrecisionWarning)


def _uncast(op, defs):
  """`op`, or the op a (non-bit) Cast of it converts."""
  while isinstance(op, Cast) and not op.bitcast:
    op = defs.get(getattr(op.x, "id", None))
  return op


def _root(v, defs):
  """`v` less the (non-bit) casts around it: the carried value an int8 addition widens to int32 first."""
  while isinstance(defs.get(getattr(v, "id", None)), Cast) and not defs[v.id].bitcast:
    v = defs[v.id].x
  return v


def _warn_count(name, t, trips, top, shape, loc) -> None:
  """An int8/int16 (uint8/uint16) sum carried through more trips than its type's largest value (probe 49f)."""
  low = "0" if t.startswith("u") else f"{-top - 1}"
  E.warn(E.KernelError(
      f"{name} ({t}) adds a term on each of {trips} loop trips, but {t} holds no value past {top}: a count of more"
      f" than {top} ones, or a sum of larger terms, wraps around (to {low}) and comes out wrong", loc,
      hint=f"count in int32: start {name} as int32 ({name} = ml.zeros({shape}, jnp.int32)), add each term as int32"
           f" (term.astype(jnp.int32)), and convert once after the loop where the result fits:"
           f" {name}.astype(jnp.{t}); if wrapping is meant (a hash), silence this with"
           f" warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"),
         category=E.PrecisionWarning)
