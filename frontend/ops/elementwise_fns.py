"""The `ml.` elementwise builtins: casts, fills, iotas, maximum/minimum, where, cdiv and the
math functions (exp, log, sqrt, tanh, erf, sin, cos, sigmoid, rounding, clip, isnan). Each is a
thin layer over elementwise.py's type rules and ops.
"""
from __future__ import annotations

import builtins
import math as pymath

import numpy as np

from .. import errors as E
from ..dtypes import DType, FLOAT8, INDEX, PY_FLOAT
from ..types import TensorType, dtype_name, resolve
from .base import (METHODS, Builtin, builtin, check_register_value, dtype_arg, is_value, kind_of, named_builtin,
                   one_element, shown)
from .arith_hints import divisor_guard
from .elementwise import Arange, BinOp, Cast, CmpOp, UnOp, _like, astype, binary, compare, full_, unary, where_
from .elementwise_checks import check_dtype_support, method_on

# Register values `ml.arange` can produce (Mosaic GPU's iota has no 8-bit float or bool form).
_ARANGE_DTYPES = frozenset(d for d in DType if d.is_int) | {DType.f32, DType.f16, DType.bf16}

@builtin(methods=("astype", "to", "cast"))
def cast(cx, x, dtype, fp_downcast_rounding=None, bitcast=False, copy=None):
  """`x` converted to `dtype` (also `x.astype(dtype)`). Two tensors of different dtypes never convert
  implicitly; Python numbers take the dtype they meet (docs/language.md, "Register values").
  Triton's keywords: `bitcast=True` is ml.bitcast, `fp_downcast_rounding` "rtne" (the default: to
  nearest, ties to even) or "rtz" (toward zero: float32 -> bfloat16); jnp's `copy` changes nothing."""
  from .cast_modes import check_cast_keywords, toward_zero
  mode = check_cast_keywords(cx, x, dtype, fp_downcast_rounding, bitcast, copy)
  if bitcast is True:
    return globals()["bitcast"].rule(cx, x, dtype)
  dt = dtype_arg(cx, dtype, "the conversion (.astype / ml.cast)")
  return toward_zero(cx, x, dt) if mode == "rtz" else astype(cx, x, dt)


@builtin
def bitcast(cx, x, dtype):
  """`x`'s bits reinterpreted as `dtype` of the same width: `ml.bitcast(f, jnp.uint32)`."""
  dtype = dtype_arg(cx, dtype, "ml.bitcast")
  check_register_value(cx, x, "ml.bitcast")
  if not is_value(x):
    raise E.KernelTypeError("ml.bitcast needs a register value, got a Python number", cx.loc,
                            hint="make it a tensor first: ml.full(shape, value, dtype)")
  src = resolve(x.type.dtype)
  if isinstance(src, DType) and (src.bits != dtype.bits or DType.bool_ in (src, dtype)):
    if DType.bool_ not in (src, dtype) and max(src.bits, dtype.bits) <= 32 and isinstance(x.type, TensorType):
      return _resized_bitcast(cx, x, src, dtype)
    raise E.UnsupportedDtypeError(
        f"ml.bitcast from {src} ({src.bits} bits) to {dtype} ({dtype.bits} bits): widths differ", cx.loc,
        hint="bitcast between types of one width, e.g. float32 <-> uint32 or int32, or between tensors of 8 to"
             " 32 bits (a wider element splits into a new last axis, as lax.bitcast_convert_type's)")
  from .broadcast_nd import small_cast
  return small_cast(cx, x, dtype, bitcast=True) or cx.b.emit(Cast, x, loc=cx.loc, types=[_like(x.type, dtype)],
                                                             names=[cx.name], bitcast=True).result


def _view(cx, x, *args, **kwargs):
  """The method `v.view(dtype)` of a register tensor (jax.Array's, and torch's of a dtype): `v`'s bits as
  `dtype`. Of the same width ml.bitcast; of another width the last axis scales by the ratio of the widths, as
  jnp's view scales it (float32 (8, 128) as uint16 is (8, 256), uint8 (8, 128) as uint32 is (8, 32)). A shape,
  torch's `v.view(8, 128)`, is a reshape: MG003 saying so (probe 52c; a dtype was MG003 too)."""
  from ..dtypes import to_dtype
  from .shape import reshape_
  name = cx.named(x, "v")
  dtype = (args[0] if len(args) == 1 and not kwargs else kwargs.get("dtype") if set(kwargs) == {"dtype"} and not args
           else None)
  if dtype is None or to_dtype(dtype) is None and not isinstance(dtype, str):
    shown_args = ", ".join([*(shown(a) for a in args), *(f"{k}={shown(v)}" for k, v in kwargs.items())])
    raise E.KernelTypeError(f"{name}.view({shown_args}): view takes a dtype (jnp's: the same bits as another"
                            " dtype), not a shape", cx.loc, hint=f"write {method_on(name)}.reshape({shown_args})")
  check_register_value(cx, x, "view")
  dst = dtype_arg(cx, dtype, f"{name}.view")
  src = resolve(x.type.dtype) if is_value(x) else None
  if not isinstance(x.type, TensorType) or not isinstance(src, DType) or src.bits == dst.bits or DType.bool_ in (
      src, dst):
    return bitcast.rule(cx, x, dst)
  shape, k = tuple(x.type.shape), max(src.bits, dst.bits) // min(src.bits, dst.bits)
  if not shape or src.bits < dst.bits and shape[-1] % k:
    raise E.ShapeMismatchError(
        f"{name}.view({dtype_name(dst)}) joins each {k} elements of the last axis into one, and {name}'s last axis"
        f" is {shape[-1] if shape else 'missing'}", cx.loc,
        hint=f"view a tensor whose last axis is a multiple of {k}, or ml.bitcast({name}, jnp.{dtype_name(dst)})"
             f" of one of {dst.bits} bits")
  if src.bits > dst.bits:         # each element splits into k along a new last axis, merged into the last one
    return reshape_(cx, bitcast.rule(cx, x, dst), shape[:-1] + (shape[-1] * k,))
  return bitcast.rule(cx, reshape_(cx, x, shape[:-1] + (shape[-1] // k, k)), dst)


_UINT = {8: DType.u8, 16: DType.u16, 32: DType.u32}


def _resized_bitcast(cx, x, src: DType, dst: DType):
  """lax.bitcast_convert_type between widths: an element of `src` wider than `dst` splits into a new last
  axis of its parts, lowest bits first (float32 -> (..., 2) uint16); a last axis of as many narrower parts
  joins into one element (uint8 (..., 4) -> float32). In uint32, by shifts and masks (a sum joins the parts,
  whose bits are disjoint)."""
  from .reduce import sum_
  from .shape import expand
  k, rank = max(src.bits, dst.bits) // min(src.bits, dst.bits), len(x.type.shape)
  u = astype(cx, bitcast.rule(cx, x, _UINT[src.bits]), DType.u32)
  steps = expand(cx, binary(cx, BinOp.MUL, arange.rule(cx, k, dtype=DType.u32), min(src.bits, dst.bits)),
                 (None,) * (rank - (src.bits < dst.bits)) + (slice(None),))
  if src.bits > dst.bits:
    parts = binary(cx, BinOp.AND, binary(cx, BinOp.SHR, expand(cx, u, (Ellipsis, None)), steps), 2 ** dst.bits - 1)
    return bitcast.rule(cx, astype(cx, parts, _UINT[dst.bits]), dst)
  if x.type.shape[-1] != k:
    raise E.ShapeMismatchError(
        f"ml.bitcast from {src} to {dst} joins a last axis of {k} parts into one element, and {cx.named(x)}'s"
        f" last axis is {x.type.shape[-1]}", cx.loc,
        hint=(f"reshape it first: ml.bitcast({method_on(cx.named(x))}.reshape"
              f"{(*x.type.shape[:-1], x.type.shape[-1] // k, k)}, jnp.{dtype_name(dst)}) joins each {k} neighbours"
              if x.type.shape[-1] % k == 0 else f"give it a last axis of {k} elements, as lax.bitcast_convert_type"
              f" needs"))
  joined = sum_.rule(cx, binary(cx, BinOp.SHL, u, steps), axis=-1)
  return bitcast.rule(cx, astype(cx, joined, _UINT[dst.bits]), dst)


def _a_shape(x) -> bool:
  return isinstance(x, int) and not isinstance(x, bool) or isinstance(x, tuple) and all(
      isinstance(s, int) and not isinstance(s, bool) for s in x)


def _shape_not_first(cx, what, args, names):
  """`ml.full(0.0, (128,), f32)`, `ml.zeros(jnp.float32, (128,))`: the shape passed after another argument
  (NumPy's and jnp's order is shape first); the error writes the call with the shape first."""
  if _a_shape(args[0]) or not any(_a_shape(a) for a in args[1:]):
    return
  k = next(i for i, a in enumerate(args) if i and _a_shape(a))
  order = [args[k]] + [a for i, a in enumerate(args) if i != k]
  raise E.KernelTypeError(
      f"{what}'s first argument is the shape, got {shown(args[0])} there and the shape {shown(args[k])} as its"
      f" {names[k]}", cx.loc, hint=f"write the shape first, {what}({', '.join(shown(a) for a in order)}) ({what}("
                                   f"{', '.join(names)}), as jnp's and Triton's)")


@builtin
def zeros(cx, shape, dtype=DType.f32):
  """A register tensor of zeros: `acc = ml.zeros((128, 64), jnp.float32)` (float32 by default, as jnp.zeros)."""
  _shape_not_first(cx, "ml.zeros", (shape, dtype), ("shape", "dtype"))
  return full_(cx, shape, 0, dtype_arg(cx, dtype, "ml.zeros"), "ml.zeros")


@builtin
def zeros_like(cx, x, dtype=None):
  """Triton's `tl.zeros_like(x)` (and jnp's, with `dtype=`): zeros of `x`'s shape and dtype."""
  check_register_value(cx, x, "ml.zeros_like")
  if not is_value(x):
    raise E.KernelTypeError("ml.zeros_like takes a register value, got a Python number", cx.loc,
                            hint="write 0 (a Python number broadcasts), or ml.zeros(shape, dtype)")
  d = resolve(x.type.dtype) if dtype is None else dtype_arg(cx, dtype, "ml.zeros_like")
  return full_(cx, tuple(getattr(x.type, "shape", ())), 0, d, "ml.zeros_like")


@builtin
def full(cx, shape, value, dtype=None):
  """A register tensor filled with `value` (a Python number or a scalar). Without a dtype, as jnp.full:
  a scalar's own, or a Python number's weakly typed float32, int32 or bool (it takes the dtype of what
  it meets: x_bf16 * ml.full(x.shape, 2.0) is bfloat16)."""
  _shape_not_first(cx, "ml.full", (shape, value) + ((dtype,) if dtype is not None else ()), ("shape", "value", "dtype"))
  if dtype is None:
    from .base import TypedFloat, TypedInt
    if is_value(value):
      return full_(cx, shape, value, value.type.dtype, convert=True)
    if isinstance(value, (TypedFloat, TypedInt)):
      return full_(cx, shape, value, value.dtype, convert=True)
    d = DType.bool_ if isinstance(value, bool) else DType.f32 if isinstance(value, float) else DType.i32
    out = full_(cx, shape, value, d, convert=True)
    if d != DType.bool_:
      cx.b.weak.add(out.id)
    return out
  return full_(cx, shape, value, dtype_arg(cx, dtype, "ml.full"), convert=True)


@builtin
def arange(cx, n, stop=None, dtype=None):
  """The register vector `[0, 1, ..., n)` (int32 unless `dtype` says otherwise); also
  Triton's two-bound form `ml.arange(start, stop)` of static ints, `[start, ..., stop)`
  (`ml.arange(start, stop, dtype=...)`; `ml.arange(n, dtype)` takes the dtype second).

  Index grids: `ml.arange(m)[:, None] * n + ml.arange(n)[None, :]`.
  """
  is_int = lambda v: isinstance(v, int) and not isinstance(v, bool)
  bad = next(((w, v) for w, v in (("start", n), ("stop", stop))
              if stop is not None and (is_value(v) or isinstance(v, (bool, float)))), None)
  if bad is not None:                           # (a dtype second is ml.arange(n, dtype), below)
    raise E.KernelTypeError(
        f"ml.arange(start, stop) takes static ints, got {kind_of(bad[1]) if is_value(bad[1]) else repr(bad[1])}"
        f" for {bad[0]}", cx.loc,
        hint="a run-time start is added to a static length: start + ml.arange(n); a run-time length is a"
             " mask over a static N: ml.arange(N) < n")
  if stop is not None and not is_int(stop):
    if dtype is not None:
      raise E.KernelTypeError(f"ml.arange: two dtypes, {stop!r} and dtype={dtype!r}", cx.loc,
                              hint="ml.arange(n, dtype=...) or ml.arange(start, stop, dtype=...)")
    stop, dtype = None, stop                    # ml.arange(n, jnp.float32)
  if stop is not None and is_int(n) and is_int(stop) and is_int(dtype) and dtype > 0:   # jnp's step
    count = -(-(stop - n) // dtype)
    scaled = f"ml.arange({count}) * {dtype}" if n == 0 else f"{n} + ml.arange({count}) * {dtype}"
    raise E.KernelTypeError(f"ml.arange takes no step (its third argument is a dtype), got {dtype}", cx.loc,
                            hint=f"scale a unit range: {scaled} is {n}, {n + dtype}, ... below {stop}")
  if stop is not None and is_int(n):
    start = n                                   # tl.arange(start, stop)
    if stop <= start:
      raise E.KernelTypeError(f"ml.arange({start}, {stop}) is empty: stop must be above start", cx.loc,
                              hint="ml.arange(start, stop) holds stop - start values, e.g. ml.arange(0, 128)")
    if start == 0:
      return arange.rule(cx, stop, None, dtype)
    d = dtype_arg(cx, dtype, "ml.arange", optional=True)
    if d is not None and d.is_int and d.bits == 8:      # (no 8-bit +: in int32, then converted)
      return astype(cx, binary(cx, BinOp.ADD, arange.rule(cx, stop - start), start), d)
    return binary(cx, BinOp.ADD, arange.rule(cx, stop - start, None, dtype), start)
  if not isinstance(n, int) or isinstance(n, bool) or n <= 0:
    raise E.KernelTypeError(f"ml.arange needs a positive static int, got {shown(n)}", cx.loc,
                            hint=_arange_size_hint(cx, n))
  dtype = dtype_arg(cx, dtype, "ml.arange", optional=True) or INDEX
  if dtype not in _ARANGE_DTYPES:
    raise E.UnsupportedDtypeError(
        f"ml.arange cannot produce {dtype}: it makes integers, float32, float16 or bfloat16", cx.loc,
        hint=f"make it as int32 and convert: ml.arange({n}).astype(jnp.float32)" + (
            f".astype(jnp.{dtype})" if dtype in FLOAT8 else ""))
  if n == 1:       # [0]: a one-element tensor, held (and computed on) as its scalar
    return full_(cx, (1,), 0, dtype)
  emit = lambda up: cx.b.emit(Arange, 0, loc=cx.loc, types=[TensorType(up, dtype)], names=[cx.name]).result
  pads = getattr(cx.b, "pad_tiles", None)
  if cx.builtin != "arange" or not getattr(pads, "aranges", False):
    if cx.builtin == "arange" and pads is not None and n % 32 and not getattr(cx.b, "pad_ok", 0):
      pads.odd_aranges = True       # (the last padded trace, ArangePads, is tried)
    return emit((n,))     # (the compiler's own index vectors, an argmax's, at their exact length; and the user's
                          # but in the last padded trace: index grids and masks take them so, probe 48g)
  if n % 8 == 0 and n % 32 and not getattr(cx.b, "pad_ok", 0):   # (a column index of 40 or 24, as a padded tile's
    out = emit((-(-n // 32) * 32,))                           # columns are padded: a causal grid beside an (8, 40)
    pads[out.id] = (n,)                                        # read, probe 49a)
    return out
  from .padded_tiles import padded_fill     # the user's, of an odd length in a padded trace: made padded, as an
  return padded_fill(cx, (n,), dtype, emit)  # odd read is (the token index beside 100 sorted ids)


def _arange_size_hint(cx, n) -> str:
  """A run-time length (a segment's `e - s`, a count read from memory) sizes no tensor: a static
  block and a mask of the positions below it, as Triton writes `tl.arange(0, BLOCK) < n`."""
  if not is_value(n):
    return "sizes are fixed when the kernel is compiled: ml.arange(128)"
  import ast
  from ..loc import call_at
  call = call_at(cx.loc)
  text = ast.unparse(call.args[0]) if call is not None and call.args else "n"
  if not (text.isidentifier() or isinstance(call.args[0], (ast.Call, ast.Subscript, ast.Attribute))):
    text = f"({text})"
  return (f"a run-time length sizes no tensor (sizes are fixed when the kernel is compiled): take a static block"
          f" and mask the positions past the length, r = ml.arange(128), keep = r < {text}, then load and store"
          f" under mask=keep (in a loop of blocks, c * 128 + ml.arange(128), while the length runs past 128)")


def _min_max(cx, kind, x, y):
  if not is_value(x) and not is_value(y) and all(isinstance(v, (int, float)) for v in (x, y)):
    return (builtins.max if kind == BinOp.MAX else builtins.min)(x, y)     # static numbers stay Python
  return binary(cx, kind, x, y)


def _nan_policy(cx, propagate_nan, what):
  """Triton's `propagate_nan=` of tl.maximum / tl.minimum: ml's always propagate NaN, which both policies allow
  (PropagateNan.NONE leaves a NaN's result unspecified); anything else is an error."""
  if propagate_nan not in (None, "none", "all"):       # (ml.PropagateNan.NONE / .ALL: frontend/ops/triton_ops.py)
    raise E.KernelTypeError(f"{what}'s propagate_nan must be ml.PropagateNan.NONE or .ALL, got {shown(propagate_nan)}",
                            cx.loc, hint="drop propagate_nan= (NaN always propagates, Triton's PropagateNan.ALL)")


@builtin
def maximum(cx, a, b, propagate_nan=None):
  """Elementwise maximum (NaN if either is NaN, Triton's `propagate_nan=tl.PropagateNan.ALL`, which the
  keyword may say)."""
  _nan_policy(cx, propagate_nan, "ml.maximum")
  return _min_max(cx, BinOp.MAX, a, b)


@builtin
def minimum(cx, a, b, propagate_nan=None):
  """Elementwise minimum (NaN if either is NaN, Triton's `propagate_nan=tl.PropagateNan.ALL`, which the
  keyword may say)."""
  _nan_policy(cx, propagate_nan, "ml.minimum")
  return _min_max(cx, BinOp.MIN, a, b)


@builtin(eager=True)
def cdiv(cx, a, b):
  """Ceiling division (`(a + b - 1) // b`, without its overflow) of integers: tiles covering `a` elements, `b` a tile.

  On Python ints it is a Python int (`grid=lambda x: (ml.cdiv(x.shape[0], 128),)` works too);
  on integer scalars (a runtime size read from memory) it is a scalar.
  """
  if not is_value(a) and not is_value(b):
    if not all(isinstance(v, int) and not isinstance(v, bool) for v in (a, b)):
      raise E.KernelTypeError(f"ml.cdiv needs integers, got {shown(a)} and {b!r}", cx.loc,
                              hint="ml.cdiv(n, 128)")
    if b <= 0:
      raise E.KernelTypeError(f"ml.cdiv needs a positive divisor, got {b}", cx.loc, hint="ml.cdiv(n, 128)")
    return -(-a // b)
  for v in (a, b):
    check_register_value(cx, v, "ml.cdiv")      # a ref: read it first (n[...]), named as ml.cdiv's
    d = resolve(v.type.dtype) if is_value(v) else None
    if (is_value(v) and isinstance(d, DType) and not d.is_int) or isinstance(v, float):
      text = cx.named(v, "n")
      what = f"{text} ({dtype_name(d)})" if is_value(v) else repr(v)
      raise E.KernelTypeError(f"ml.cdiv needs integers, got {what}", cx.loc,
                              hint=f"convert it: {method_on(text)}.astype(jnp.int32); or, for a float result,"
                                   f" ml.ceil(a / b) of floats" if is_value(v) else
                              f"pass an int: {int(v)!r}" if pymath.isfinite(v) and v == int(v) else
                              "ml.cdiv takes integers (ml.cdiv(n, 128)); for a float result, ml.ceil(a / b)")
  texts = (method_on(cx.named(a, "n")), method_on(cx.named(b, "d")) if is_value(b) else repr(b))
  if isinstance(b, int) and b == 0:
    raise E.KernelTypeError("ml.cdiv by 0: integer division by zero is undefined on the GPU", cx.loc,
                            hint=f"divide by a positive constant; {divisor_guard(texts[0], '', 'd', 'ml.cdiv')}")
  # floor(a / b), plus one where b does not divide a: `(a + b - 1) // b` would wrap for an `a` within
  # b - 1 of its type's largest value (a run-time size near 2**31 gave a negative tile count)
  # (each op names ml.cdiv: frontend/narrow_index.py knows q * b is at most a, and the sum a / b's ceiling)
  q = binary(cx, BinOp.FLOORDIV, a, b, via=("ml.cdiv",) + texts)
  inexact = compare(cx, CmpOp.NE, binary(cx, BinOp.MUL, q, b, via=("ml.cdiv",) + texts), a)
  return binary(cx, BinOp.ADD, q, astype(cx, inexact, resolve(q.type.dtype)), via=("ml.cdiv",) + texts)


@builtin
def where(cx, cond, a, b):
  """`a` where `cond` holds, else `b` (cond a boolean tensor, e.g. `x > 0`); operands broadcast."""
  return where_(cx, cond, a, b)


def _unary_builtin(kind: UnOp, doc: str):
  def rule(cx, x):
    return unary(cx, kind, x)
  return named_builtin(rule, kind.value.name, doc)


exp = _unary_builtin(UnOp.EXP, "Elementwise e**x (floating point).")
@builtin
def exp2(cx, x, *, approx=False, emulate=0):
  """Elementwise 2**x (floating point); the fast path for softmax: exp2(x * log2(e)).

  `approx=True` (float32) uses the hardware's approximate instruction (ex2.approx.ftz:
  about 2 ulp, subnormal results flushed to zero), as flash attention kernels do:
  `p = ml.exp2(s * c - m[:, None], approx=True)`.
  `emulate` (with approx=True, on tensors): the share of elements, from 0 to 1, computed by a
  polynomial on the FMA units instead (relative error below 1e-4), which relieves the special
  function unit where exponentials bound a kernel (FlashAttention-4's trick): `emulate=0.25`.
  """
  if not isinstance(approx, bool):
    raise E.KernelTypeError(f"ml.exp2's approx must be True or False, got {shown(approx)}", cx.loc,
                            hint=f"ml.exp2({cx.named(x)}, approx=True)")
  if approx and is_value(x) and resolve(x.type.dtype) != DType.f32:
    text = cx.named(x, "")
    raise E.UnsupportedDtypeError(
        f"ml.exp2(..., approx=True) works on float32, got {text or 'a value'} ({dtype_name(x.type.dtype)})",
        cx.loc, hint=f"compute in float32: ml.exp2({method_on(text or 'x')}.astype(jnp.float32), approx=True)")
  from .fast_math import check_share, exp2_emulated
  share = check_share(cx, emulate, cx.named(x))
  if share and approx is not True:
    raise E.KernelTypeError("ml.exp2's emulate replaces the approximate instruction: it needs approx=True", cx.loc,
                            hint=f"ml.exp2({cx.named(x)}, approx=True, emulate={emulate})")
  if share and is_value(x) and isinstance(x.type, TensorType) and not one_element(x.type.shape):
    return exp2_emulated(cx, x, share)      # (one element is worked on as its scalar: ex2.approx alone)
  return unary(cx, UnOp.EXP2_APPROX if approx else UnOp.EXP2, x)


log = _unary_builtin(UnOp.LOG, "Elementwise natural logarithm (floating point).")
log2 = _unary_builtin(UnOp.LOG2, "Elementwise base-2 logarithm (floating point).")
sqrt = _unary_builtin(UnOp.SQRT, "Elementwise square root (floating point).")
rsqrt = _unary_builtin(UnOp.RSQRT, "Elementwise 1/sqrt(x) (floating point).")
tanh = _unary_builtin(UnOp.TANH, "Elementwise hyperbolic tangent (floating point).")
sin = _unary_builtin(UnOp.SIN, "Elementwise sine (floating point).")
cos = _unary_builtin(UnOp.COS, "Elementwise cosine (floating point).")
erf = _unary_builtin(UnOp.ERF, "Elementwise error function (floating point).")
abs_ = _unary_builtin(UnOp.ABS, "Elementwise absolute value.")


def _rounding_builtin(kind: UnOp, doc: str):
  def rule(cx, x):
    check_register_value(cx, x, f"ml.{kind.value.name}")
    if is_value(x):
      d = resolve(x.type.dtype)
      if isinstance(d, DType) and (d.is_int or d == DType.bool_):
        return x                                  # integers (and bools) are whole already (jnp returns them)
    return unary(cx, kind, x)
  return named_builtin(rule, kind.value.name, doc)


floor = _rounding_builtin(UnOp.FLOOR, "Elementwise floor: the largest whole number <= x (integers unchanged).")
ceil = _rounding_builtin(UnOp.CEIL, "Elementwise ceiling: the smallest whole number >= x (integers unchanged).")
trunc = _rounding_builtin(UnOp.TRUNC, "Elementwise rounding toward zero (integers unchanged).")
_round_whole = _rounding_builtin(UnOp.ROUND, "").rule


@builtin(name="round", methods=("round",))
def round_(cx, x, decimals=0):
  """Elementwise rounding to the nearest whole number, halves to even as `jnp.round` (0.5 -> 0,
  1.5 -> 2, 2.5 -> 2); integers unchanged. Convert with `.astype` afterwards. `decimals` (a static
  int) rounds to that many decimal places as jnp.round does: x * 10**decimals rounded, divided
  back (multiplied by the factor's float32 reciprocal, as XLA rewrites jnp's division; bfloat16 divides), in x's
  dtype (float16 in float32)."""
  decimals = 0 if decimals is None else decimals      # (Python's round(x, None))
  if not isinstance(decimals, int) or isinstance(decimals, bool):
    raise E.KernelTypeError(f"ml.round's decimals must be a static int, got {kind_of(decimals)}", cx.loc,
                            hint=f"ml.round({cx.named(x)}, 2) rounds to hundredths (a constexpr or a Python int)")
  d = resolve(x.type.dtype) if is_value(x) else None
  if d == DType.bool_ and decimals:
    raise E.KernelTypeError(f"ml.round of bool values to decimals={decimals} (nor in jnp.round: bool is not"
                            f" inexact)", cx.loc, hint=f"convert first: ml.round({method_on(cx.named(x, 'x'))}.astype("
                                                       f"jnp.float32), {decimals})")
  if decimals == 0 or not isinstance(d, DType) or d.is_int and decimals > 0:
    return _round_whole(cx, x)
  if d.is_int:
    raise E.KernelTypeError(f"ml.round of {d} to decimals={decimals}: integers do not round to negative"
                            f" decimals (nor in jnp.round)", cx.loc,
                            hint=f"work in floats: ml.round({cx.named(x, 'x')}.astype(jnp.float32), {decimals})")
  if decimals > pymath.log10(d.float_max):
    return x                                  # beyond the type's precision: unchanged, as jnp
  wide = astype(cx, x, DType.f32) if d == DType.f16 else x
  factor = float(10 ** decimals)
  r = unary(cx, UnOp.ROUND, binary(cx, BinOp.MUL, wide, factor))
  if d == DType.bf16:
    y = binary(cx, BinOp.DIV, r, factor)
  else:
    # jnp's lax.div by its constant factor is XLA's product by the constant's float32 reciprocal (its algebraic
    # simplifier's A / c => A * (1 / c)), under jit and eagerly, on the CPU and the GPU: that product, bit for bit
    # (probe 53h: the quotient was an ulp from jnp's in a fifth of float32 roundings to 2 decimals)
    y = binary(cx, BinOp.MUL, r, float(np.float32(1) / np.float32(factor)))
  return astype(cx, y, d) if d == DType.f16 else y


@builtin(methods=("clip",))
def clip(cx, x, min=None, max=None):
  """`x` limited to `[min, max]` (either may be None), as `jnp.clip`:
  `ml.minimum(ml.maximum(x, min), max)`; NaN stays NaN."""
  check_register_value(cx, x, "ml.clip")
  if not is_value(x):
    raise E.KernelTypeError("ml.clip of a Python number should be computed in Python", cx.loc,
                            hint="use min(max(x, lo), hi) on static numbers")
  if min is None and max is None:
    raise E.KernelTypeError("ml.clip needs min, max or both", cx.loc,
                            hint=f"give the bounds: ml.clip({cx.named(x, 'x')}, min=lo, max=hi), or min= or max= alone")
  if min is not None:
    x = binary(cx, BinOp.MAX, x, min, "ml.clip")
  if max is not None:
    x = binary(cx, BinOp.MIN, x, max, "ml.clip")
  return x


@builtin
def isnan(cx, x):
  """Elementwise test for NaN (a boolean tensor): `x != x`; False for integers."""
  check_register_value(cx, x, "ml.isnan")
  if not is_value(x):
    return pymath.isnan(x)
  return compare(cx, CmpOp.NE, x, x)


@builtin
def sigmoid(cx, x):
  """Elementwise logistic function 1 / (1 + exp(-x)) (floating point): `ml.sigmoid(x)`. float16 and
  bfloat16 compute in float32 and round once (in float16, exp(-x) overflows below x = -11.1, which gave
  0 where sigmoid is 1.5e-5 down to 6e-8, a float16 subnormal)."""
  check_dtype_support(cx, x.type.dtype if is_value(x) else PY_FLOAT, "ml.sigmoid", floats_only=True,
                      x=x)
  d = resolve(x.type.dtype) if is_value(x) else None
  narrow = d in (DType.f16, DType.bf16)
  y = astype(cx, x, DType.f32) if narrow else x
  e = unary(cx, UnOp.EXP, unary(cx, UnOp.NEG, y))
  r = binary(cx, BinOp.DIV, 1.0, binary(cx, BinOp.ADD, e, 1.0))
  return astype(cx, r, d) if narrow else r


@builtin
def softplus(cx, x):
  """Elementwise log(1 + exp(x)) (floating point): `ml.softplus(x)`, composed as jax.nn.softplus computes it,
  max(x, 0) + log1p(exp(-|x|)) (exact for large |x|, where log(1 + exp(x)) overflows or rounds 1 + e). float16
  and bfloat16 compute in float32 and round once, as XLA on the GPU computes jax.nn.softplus (probe 51j: it was
  MG002, whose hint wrote this form)."""
  check_dtype_support(cx, x.type.dtype if is_value(x) else PY_FLOAT, "ml.softplus", floats_only=True, x=x)
  d = resolve(x.type.dtype) if is_value(x) else None
  narrow = d in (DType.f16, DType.bf16)
  y = astype(cx, x, DType.f32) if narrow else x
  small = unary(cx, UnOp.LOG1P, unary(cx, UnOp.EXP, unary(cx, UnOp.NEG, unary(cx, UnOp.ABS, y))))
  r = binary(cx, BinOp.ADD, binary(cx, BinOp.MAX, y, 0), small)
  return astype(cx, r, d) if narrow else r


def f8_scalar_to_f32(cx, x, src):
  """A float8 scalar in float32, exactly, from its bits (the GPU has no scalar float8 conversion):
  sign, exponent and mantissa moved into float32's fields; subnormals as mantissa x 2**(1 - bias -
  mantissa bits); e5m2's top exponent is inf/NaN, e4m3fn's top exponent with mantissa 7 is NaN."""
  mbits, bias = (2, 15) if src == DType.f8e5m2 else (3, 7)
  ebits = 7 - mbits
  b = astype(cx, bitcast.rule(cx, x, DType.u8), DType.i32)
  sign = binary(cx, BinOp.SHL, binary(cx, BinOp.SHR, b, 7), 31)
  e = binary(cx, BinOp.AND, binary(cx, BinOp.SHR, b, mbits), (1 << ebits) - 1)
  m = binary(cx, BinOp.AND, b, (1 << mbits) - 1)
  top = compare(cx, CmpOp.EQ, e, (1 << ebits) - 1)
  if src == DType.f8e5m2:
    f32_e = where_(cx, top, 255, binary(cx, BinOp.ADD, e, 127 - bias))
  else:      # e4m3fn: no infinities; only S.1111.111 is NaN
    nan = binary(cx, BinOp.AND, top, compare(cx, CmpOp.EQ, m, (1 << mbits) - 1))
    f32_e = where_(cx, nan, 255, binary(cx, BinOp.ADD, e, 127 - bias))
  bits = binary(cx, BinOp.OR, binary(cx, BinOp.OR, sign, binary(cx, BinOp.SHL, f32_e, 23)),
                binary(cx, BinOp.SHL, m, 23 - mbits))
  normal = bitcast.rule(cx, bits, DType.f32)
  tiny = binary(cx, BinOp.MUL, astype(cx, m, DType.f32), float(2.0 ** (1 - bias - mbits)))
  negative = compare(cx, CmpOp.NE, sign, 0)
  subnormal = where_(cx, negative, unary(cx, UnOp.NEG, tiny), tiny)
  return where_(cx, compare(cx, CmpOp.EQ, e, 0), subnormal, normal)


METHODS["view"] = Builtin(_view, "view")      # a method only: ml has no view (ml.bitcast is one)
