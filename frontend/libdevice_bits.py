"""libdevice's integer bit intrinsics as a Triton port calls them (probe 71b; each was MG002, "has no attribute",
whose hint for popc and clz said there was no population count here): `tl.extra.cuda.libdevice.popc(x)` (and
`popcll`), `clz` / `clzll`, `ffs` / `ffsll`, `brev` / `brevll`, `byte_perm(x, y, s)` and the halving adds `hadd`,
`rhadd`, `uhadd`, `urhadd`, with CUDA's meaning: popc, clz and ffs give an int32 count of the operand's 32 bits (an
int64 operand's 64, as Triton dispatches popc of int64 to __nv_popcll), brev the operand's dtype, byte_perm and
the halving adds their operands'. Forms in the kernel language (bit_form_helpers.py's SWAR steps), traced as
jnp's forms are (jnp_calls.formula) through stand-in functions (triton_math's); also int64's `lax.population_count`,
`lax.clz` and `jnp.bitwise_count` (as the two uint32 halves; MG003 before, whose hint wrote those steps).

Of Python numbers each computes while tracing, as CUDA would of the number's 32 (or, past int32, 64) bits."""
from __future__ import annotations

from .jnp_forms import _dtype, _kind

_UNARY = ("popc", "popcll", "clz", "clzll", "ffs", "ffsll", "brev", "brevll")
_BINARY = ("hadd", "rhadd", "uhadd", "urhadd")
_PRODUCTS = ("mul24", "umul24", "mul64hi")                # (session 60, with sad / usad)
NAMES = frozenset(_UNARY + _BINARY + _PRODUCTS + ("byte_perm", "sad", "usad"))
PARAMS = {**{n: ("x",) for n in _UNARY}, **{n: ("x", "y") for n in _BINARY + _PRODUCTS}, "byte_perm": ("x", "y", "s"),
          "sad": ("x", "y", "z"), "usad": ("x", "y", "z")}
# the operand widths each takes (int32 / uint32: 32, int64: 64)
_TAKES = {**{n: (32, 64) for n in _UNARY}, **{n: (32,) for n in _BINARY + ("byte_perm", "mul24", "umul24", "sad",
                                                                              "usad")}, "mul64hi": (64,)}
_U32 = {"int32": "ml.bitcast({0}, ml.uint32)", "uint32": "{0}"}


def _width(x):
  """32 or 64: the bits an integer operand's intrinsic takes (int32 / uint32, int64); None for other dtypes."""
  d = str(_dtype(x))
  return 32 if d in _U32 else 64 if d == "int64" else None


def _count(name):
  """popc, clz, ffs (and their ll forms): an int32 count of x's 32 or 64 bits."""
  def make(a):
    from . import bit_form_helpers as h
    x, w = a["x"], _width(a["x"])
    if w is None:
      return None
    fn = getattr(h, f"{name}{w}")
    arg = _U32[str(_dtype(x))] if w == 32 else "{0}"
    return f"{{1}}({arg}).astype(ml.int32)", [x, fn]
  return make


def _brev(a):
  from . import bit_form_helpers as h
  x, w = a["x"], _width(a["x"])
  if w is None:
    return None
  if w == 64:
    return "{1}({0})", [x, h.brev64]
  return f"ml.bitcast({{1}}({_U32[str(_dtype(x))]}), {{0}}.dtype)", [x, h.brev32]


def _halving(name):
  """CUDA's __hadd / __rhadd (signed) and __uhadd / __urhadd (unsigned) of 32-bit integers: (x + y) >> 1 and
  (x + y + 1) >> 1 without the sum's overflow, as (x & y) + ((x ^ y) >> 1) and (x | y) - ((x ^ y) >> 1), in the
  operands' dtype (their bits taken as the intrinsic's signedness)."""
  unsigned, rounded = name.startswith("u"), "rhadd" in name
  def make(a):
    x, y = a["x"], a["y"]
    if _width(x) != 32 or _dtype(y) is not None and str(_dtype(y)) != str(_dtype(x)) or _kind(y) != "int":
      return None
    t = "ml.uint32" if unsigned else "ml.int32"
    p, q = f"ml.bitcast({{0}}, {t})", f"ml.bitcast({{1}}, {t})" if _dtype(y) is not None else "{1}"
    f = f"({p} | {q}) - (({p} ^ {q}) >> 1)" if rounded else f"({p} & {q}) + (({p} ^ {q}) >> 1)"
    return f"ml.bitcast({f}, {{0}}.dtype)", [x, y]
  return make


def _byte_perm(a):
  from . import bit_form_helpers as h
  x, y, s = a["x"], a["y"], a["s"]
  if _width(x) != 32 or _kind(y) != "int" or _kind(s) != "int" or any(
      _dtype(v) is not None and _width(v) != 32 for v in (y, s)):
    return None
  u = lambda i, v: f"ml.bitcast({{{i}}}, ml.uint32)" if _dtype(v) is not None else f"({{{i}}} % 2 ** 32)"
  return f"ml.bitcast({{3}}({u(0, x)}, {u(1, y)}, {u(2, s)}), {{0}}.dtype)", [x, y, s, h.byte_perm]


def _mul24(name):
  """CUDA's __mul24 (int32 operands, Triton's mul24 of int32) and __umul24 (uint32, or the name umul24): the low 32
  bits of the product of the operands' low 24 bits, taken as signed 24-bit numbers by mul24 of int32; in x's
  dtype."""
  def make(a):
    x, y = a["x"], a["y"]
    if _width(x) != 32 or _kind(y) != "int" or _dtype(y) is not None and str(_dtype(y)) != str(_dtype(x)):
      return None
    if name == "mul24" and str(_dtype(x)) == "int32":
      if _dtype(y) is None:
        y = ((y & 0xFFFFFF) ^ 0x800000) - 0x800000        # (a number: its low 24 bits' signed value, now)
        return "((({0} << 8) >> 8) * {1})", [x, y]
      return "((({0} << 8) >> 8) * (({1} << 8) >> 8))", [x, y]
    q = "ml.bitcast({1}, ml.uint32)" if _dtype(y) is not None else "({1} % 2 ** 32)"
    return f"ml.bitcast((ml.bitcast({{0}}, ml.uint32) & 0xFFFFFF) * ({q} & 0xFFFFFF), {{0}}.dtype)", [x, y]
  return make


def _sad(name):
  """CUDA's __sad(x, y, z) (int32 x, y) and __usad (uint32, or the name usad): |x - y| + z, the difference taken
  without overflow (as uint32) and the sum wrapping, in x's dtype (Triton's sad: int32 of int32 operands)."""
  def make(a):
    x, y, z = a["x"], a["y"], a["z"]
    if _width(x) != 32 or _kind(y) != "int" or _kind(z) != "int" or any(
        _dtype(v) is not None and _width(v) != 32 for v in (y, z)):
      return None
    t = "ml.uint32" if name == "usad" or str(_dtype(x)) == "uint32" else "ml.int32"
    u = lambda i, v, to: f"ml.bitcast({{{i}}}, {to})" if _dtype(v) is not None else f"({{{i}}} % 2 ** 32)"
    p, q = u(0, x, t), u(1, y, t) if _dtype(y) is not None else "{1}"
    d = f"ml.bitcast(ml.where({p} < {q}, {q} - {p}, {p} - {q}), ml.uint32)"
    return f"ml.bitcast({d} + {u(2, z, 'ml.uint32')}, {{0}}.dtype)", [x, y, z]
  return make


def _mul64hi(a):
  from . import bit_form_helpers as h
  x, y = a["x"], a["y"]
  if _width(x) != 64 or _kind(y) != "int" or _dtype(y) is not None and _width(y) != 64:
    return None
  return "{2}({0}, {1} + {0} * 0)", [x, y, h.mul64hi]     # (y + 0 * x: a number as an int64 tensor)


def _lax_count(kind, base):
  """lax.population_count and lax.clz (`kind`) of int64 values as the halves' counts, in int64; other dtypes by
  jnp_math's form (`base`)."""
  def make(a):
    from . import bit_form_helpers as h
    if str(_dtype(a["x"])) != "int64":
      return base(a)
    return "{1}({0}).astype(ml.int64)", [a["x"], h.popc64 if kind == "popcount" else h.clz64]
  return make


def _bitwise_count(base):
  """jnp.bitwise_count of int64: the count of abs(x)'s bits, uint8 (jnp's), as the halves'."""
  def make(a):
    from . import bit_form_helpers as h
    if str(_dtype(a["x"])) != "int64":
      return base(a)
    return "{1}(ml.abs({0})).astype(ml.uint8)", [a["x"], h.popc64]
  return make


FORMS = {**{("libdevice", n): (("x",), _count(n.rstrip("l"))) for n in ("popc", "popcll", "clz", "clzll", "ffs", "ffsll")},
         ("libdevice", "brev"): (("x",), _brev), ("libdevice", "brevll"): (("x",), _brev),
         ("libdevice", "byte_perm"): (("x", "y", "s"), _byte_perm),
         **{("libdevice", n): (("x", "y"), _mul24(n)) for n in ("mul24", "umul24")},
         **{("libdevice", n): (("x", "y", "z"), _sad(n)) for n in ("sad", "usad")},
         ("libdevice", "mul64hi"): (("x", "y"), _mul64hi),
         **{("libdevice", n): (("x", "y"), _halving(n)) for n in _BINARY}}


def int64_forms(shaped):
  """`shaped` (jnp_calls.SHAPED) with lax.population_count, lax.clz and jnp.bitwise_count taking int64 too."""
  for key, kind in ((("jax.lax", "population_count"), "popcount"), (("jax.lax", "clz"), "clz")):
    reads, base = shaped[key]
    shaped[key] = (reads, _lax_count(kind, base))
  reads, base = shaped["jnp", "bitwise_count"]
  shaped["jnp", "bitwise_count"] = (reads, _bitwise_count(base))
  shaped.update(FORMS)


def static(name, *args):
  """The intrinsic of Python ints, as CUDA computes it of their 32 bits (64 where one is past int32, or for the ll
  forms): computed while tracing."""
  wide = name.endswith("ll") or any(not -2 ** 31 <= v < 2 ** 32 for v in args)
  bits = 64 if wide else 32
  if name == "mul64hi":
    bits = wide = 64
  u = [v % 2 ** bits for v in args]
  signed = lambda v: v - 2 ** bits if v >= 2 ** (bits - 1) else v
  if name in ("mul24", "umul24"):
    lo = [v % 2 ** 24 for v in u]
    lo = [v - 2 ** 24 if name == "mul24" and v >= 2 ** 23 else v for v in lo]
    return signed(lo[0] * lo[1] % 2 ** bits) if name == "mul24" else lo[0] * lo[1] % 2 ** bits
  if name in ("sad", "usad"):
    x, y = (u[0], u[1]) if name == "usad" else (signed(u[0]), signed(u[1]))
    out = (abs(x - y) + u[2]) % 2 ** bits
    return out if name == "usad" else signed(out)
  if name == "mul64hi":
    return signed(args[0] * args[1] >> 64 & (2 ** 64 - 1))
  base = name.rstrip("l") if name != "byte_perm" else name
  if base == "popc":
    return bin(u[0]).count("1")
  if base == "clz":
    return bits - u[0].bit_length()
  if base == "ffs":
    return (u[0] & -u[0]).bit_length()
  if base == "brev":
    return signed(int(f"{u[0]:0{bits}b}"[::-1], 2))
  if base == "byte_perm":
    both = u[0] | (u[1] % 2 ** 32) << 32
    return signed(sum(((both >> 8 * ((u[2] >> 4 * i) & 7)) & 0xFF) << 8 * i for i in range(4)))
  x, y = (v if name.startswith("u") else signed(v) for v in u[:2])
  half = ((x + y + 1) if "rhadd" in name else (x + y)) >> 1
  return half if name.startswith("u") else signed(half % 2 ** bits)


def check(tracer, node, cx, name, args) -> None:
  """The operands a libdevice intrinsic takes, else a KernelTypeError at the call in its words: a ref (read it
  first), a float (its bits through ml.bitcast, or its value converted), an 8- or 16-bit integer (widened)."""
  from . import errors as E
  from .ops.base import is_value
  from .types import RefType
  call, texts = tracer.text(node.func), [tracer.text(a) for a in node.args]
  for i, v in enumerate(args):
    if not is_value(v):
      continue
    t = texts[i] if i < len(texts) else "x"
    others = lambda new: f"{call}({', '.join(new if j == i else s for j, s in enumerate(texts))})"
    if isinstance(v.type, RefType):
      raise E.KernelTypeError(f"{call} works on register values, got {v.name or t} ({v.type.space} ref)", cx.loc,
                              hint=f"read it into registers first: {others(f'{t}[...]')}")
    d = _dtype(v)
    if _width(v) not in _TAKES[name]:
      takes = {(32,): "32-bit integers (int32 or uint32)", (32, 64): "32-bit integers (int32 or uint32) or int64",
               (64,): "int64 integers"}[_TAKES[name]]
      op = t if t.isidentifier() else f"({t})"
      if _TAKES[name] == (64,):
        raise E.KernelTypeError(f"{call} takes {takes}, got {d} for {t}", cx.loc,
                                hint=f"widen it: {others(f'{op}.astype(jnp.int64)')} (for 32-bit operands, the"
                                     f" high word of their product is ml.mulhi / ml.umulhi)")
      if getattr(d, "is_float", False):
        bits = {2: 16, 4: 32}.get(getattr(d, "itemsize", 4), 32)
        fix = (f"for its bits, {others(f'ml.bitcast({t}, jnp.int32)')}" if bits == 32 else
               f"for its bits, {others(f'ml.bitcast({t}, jnp.uint16).astype(jnp.int32)')}")
        hint = f"{fix}; for its value, {others(f'{op}.astype(jnp.int32)')}"
      elif getattr(d, "is_int", False):
        hint = (f"widen it: {others(f'{op}.astype(jnp.int32)')} (as CUDA converts it to int: a negative value's"
                f" sign bits count; its own bits alone are "
                f"{others(f'ml.bitcast({t}, jnp.uint{d.itemsize * 8}).astype(jnp.int32)')})"
                if d.itemsize < 4 else f"split it into two uint32 words, {op}.astype(jnp.uint32) and"
                                        f" ({op} >> 32).astype(jnp.uint32)")
      else:
        hint = f"convert it: {others(f'{op}.astype(jnp.int32)')}"
      raise E.KernelTypeError(f"{call} takes {takes}, got {d} for {t}", cx.loc, hint=hint)
