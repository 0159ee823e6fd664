"""A float16 or bfloat16 running sum over many loop trips (PrecisionWarning, not an error).

`acc = ml.zeros((128,), x.dtype)` then `acc = acc + x.at[i][...]` over 2048 rows of bfloat16 data: each trip
rounds the sum to 8 significant bits, so once it is 256 times a term the term no longer changes it; 2048 terms
of about 1 sum to 256. jnp computes the same with the same code, so the kernel is not wrong by the language's
rules, and a sum of terms of mixed signs, or of few of them, is fine: a warning, at the addition, with the
float32 accumulation that Triton's `acc = tl.zeros(..., dtype=tl.float32)` writes. Only loops whose trip count
is known while compiling are counted (with the static loops around them that carry the sum through).
"""
from __future__ import annotations

from . import errors as E
from . import ir
from .dtypes import DType
from .ops.control import For, Yield
from .ops.elementwise import BinOp, Binary
from .types import dtype_name, resolve

# Terms after which a sum of terms of one sign and size stops growing: 2**(significant bits)
TERMS = {DType.f16: 2 ** 11, DType.bf16: 2 ** 8}


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
  if d not in TERMS or trips < TERMS[d] or not isinstance(add, Binary) or add.kind not in (BinOp.ADD, BinOp.SUB):
    return
  if not any(isinstance(x, ir.Value) and x.id == a.id for x in (add.lhs, add.rhs)) or add.loc in seen:
    return
  seen.add(add.loc)
  name = a.name or "the sum"
  t = dtype_name(d)
  start = f"ml.zeros({tuple(getattr(a.type, 'shape', ()))}, jnp.float32)"
  E.warn(E.KernelError(
      f"{name} ({t}) adds a term on each of {trips} loop trips, rounded to {t} after each: past {TERMS[d]} terms of"
      f" one sign a {t} sum stops growing (it keeps {TERMS[d].bit_length() - 1} significant bits), so it may lose"
      f" most of its value", add.loc,
      hint=f"accumulate in float32: start {name} as float32 ({name} = {start}), add each term as float32"
           f" (term.astype(jnp.float32)), and convert once after the loop: {name}.astype(jnp.{t}); if {t} is meant,"
           f" silence this with warnings.filterwarnings('ignore', category=mg.PrecisionWarning)"),
         category=E.PrecisionWarning)
