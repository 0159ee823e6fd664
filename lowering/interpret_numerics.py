"""Numerics of interpret mode: what each typed-IR dtype and arithmetic op means in numpy.

Kept apart from the interpreter so the GPU-matching rules are in one place:
narrow floats (f16, bf16, f8 via ml_dtypes) compute in float32 and round back
after every op, as the GPU rounds per instruction; integers wrap; `//` and `%`
floor (Python's rules, which the lowering follows too); comparisons give bool;
float -> int casts truncate toward zero and saturate, NaN -> 0 (PTX cvt.rzi; the lowering
selects NaN to 0 and clamps before converting, as LLVM leaves the rest undefined); float -> float8 casts
saturate finite overflow and +-inf to the largest finite value, NaN staying NaN (PTX
cvt.rn.satfinite, which the GPU uses); the hardware's approximate instructions (`.ftz`)
flush subnormal inputs and results to zero.
"""
from __future__ import annotations

import ml_dtypes
import numpy as np

from ..frontend.dtypes import DType, FLOAT8
from ..frontend.ops.elementwise import BinOp as B, CmpOp as C, UnOp as U


def np_dtype(d: DType) -> np.dtype:
  return np.dtype(getattr(ml_dtypes, d.numpy_name, d.numpy_name))


def compute_dtype(d: DType) -> np.dtype:
  """Narrow floats compute in float32 and round back after each op."""
  return np.dtype(np.float32) if d.is_float and d.bits < 32 else np_dtype(d)


def poison(shape, d: DType) -> np.ndarray:
  """Never-written memory: NaN for floats, the most negative (or largest unsigned) int, True."""
  if d.is_float:
    v = np.nan
  elif d == DType.bool_:
    v = True
  else:
    info = np.iinfo(np_dtype(d))
    v = info.min if d.is_signed else info.max
  return np.full(shape, v, np_dtype(d))


def int_of_float(x: float, d: DType) -> int:
  """A Python float as an integer of `d` by the cast rule: truncated toward zero, saturated to
  `d`'s range, NaN -> 0 (as a float -> int cast on the GPU, and as jnp converts)."""
  return int(_float_to_int(np.asarray(x, np.float64), d))


def const(x, d: DType) -> np.ndarray:
  """A Python scalar as a value of `d` (arith.constant: rounded for floats, wrapped for ints;
  a Python float given an integer dtype converts as a cast does: `int_of_float`; a number out
  of a float8 type's range is NaN or inf, as jnp.full converts it from float64)."""
  if d in FLOAT8:     # (a stored 1000.0 is NaN in float8_e4m3fn, as jnp's; -1e5 is -inf in e5m2)
    try:
      x = float(x)
    except OverflowError:                 # an int past float's range: an infinity
      x = np.inf if x > 0 else -np.inf
    with np.errstate(over="ignore"):
      return np.asarray(np.float64(x)).astype(np_dtype(d))
  if d.is_float:      # through float32, as jnp converts a Python float (x64 off): rounded twice below it
    with np.errstate(over="ignore"):      # 1e6 as float16 is inf, as on the GPU: no warning
      return np.asarray(np.float32(x)).astype(np_dtype(d))
  if d == DType.bool_:
    return np.asarray(bool(x))
  if isinstance(x, float):
    return np.asarray(int_of_float(x, d)).astype(np_dtype(d))
  return np.asarray(np.int64(int(x))).astype(np_dtype(d))


def float8_max(d: DType) -> float:
  return d.float_max                                   # 448 (e4m3fn), 57344 (e5m2)


def _float_to_int(f: np.ndarray, dst: DType) -> np.ndarray:
  nd = np_dtype(dst)
  f = np.trunc(f)
  info = np.iinfo(nd)
  hi, lo = f >= float(info.max), f <= float(info.min)
  out = np.where(hi | lo | np.isnan(f), 0, f).astype(nd)
  return np.where(hi, info.max, np.where(lo, info.min, out)).astype(nd)


def cast(x: np.ndarray, src: DType, dst: DType) -> np.ndarray:
  """arith casts: float -> int truncates and saturates, NaN -> 0 (PTX cvt.rzi); ints wrap;
  -> float8 saturates (PTX cvt.rn.satfinite: +-inf and finite overflow become +-max, NaN stays)."""
  nd = np_dtype(dst)
  if src == dst:
    return x
  if src.is_float and not dst.is_float:
    return _float_to_int(x.astype(np.float64), dst)
  if dst in FLOAT8:
    m = float8_max(dst)
    return np.clip(np.asarray(x).astype(np.float64), -m, m).astype(nd)      # clip keeps NaN
  if dst.is_float and src.is_int and src.bits > 32:
    with np.errstate(over="ignore"):         # (int64: float64 would round before the target does)
      return _round_int64(x, _SIGNIFICANT_BITS.get(dst, 24)).astype(nd)
  if dst.is_float and src.is_int and dst in _SIGNIFICANT_BITS:
    with np.errstate(over="ignore"):         # past the range: inf, as the GPU
      return _round_significand(x.astype(np.float64), _SIGNIFICANT_BITS[dst]).astype(nd)
  return x.astype(np.float64).astype(nd) if dst.is_float else x.astype(nd)


# int -> 16-bit float rounds once, to nearest even (the GPU's cvt.rn); numpy's float64 ->
# bfloat16 goes through float32 and can round twice (16842753 -> 16777216, not 16908288).
_SIGNIFICANT_BITS = {DType.bf16: 8, DType.f16: 11}


def _round_significand(x: np.ndarray, bits: int) -> np.ndarray:
  """float64 `x` rounded to `bits` significant bits, half to even (exact values then cast exactly)."""
  m, e = np.frexp(x)                       # x = m * 2**e, 0.5 <= |m| < 1
  return np.ldexp(np.rint(np.ldexp(m, bits)), e - bits)


def _round_int64(x: np.ndarray, bits: int) -> np.ndarray:
  """int64 `x` rounded once to `bits` significant bits, half to even, as float64 (then exact in
  the target: cvt.rn.f32.s64 rounds once; x.astype(float64) would first round to 53 bits, and
  2**60 + 2**36 + 1 would become float32's 2**60, not 2**60 + 2**37)."""
  u = np.asarray(x, np.int64).view(np.uint64)
  neg = np.asarray(x) < 0
  m = np.where(neg, ~u + np.uint64(1), u)             # |x| (2**63 for int64's lowest)
  n = sum(((m >> np.uint64(k)) != 0).astype(np.int64) for k in range(64))      # bit lengths
  s = np.maximum(n - bits, 0).astype(np.uint64)
  q = m >> s
  r = m - (q << s)
  half = np.where(s > 0, np.uint64(1) << (s - np.uint64(1)), np.uint64(0))
  up = (s > 0) & ((r > half) | ((r == half) & (q & np.uint64(1) == 1)))
  v = np.ldexp((q + up.astype(np.uint64)).astype(np.float64), s.astype(np.int64))
  return np.where(neg, -v, v)


def bitcast(x: np.ndarray, dst: DType) -> np.ndarray:
  return np.asarray(x).view(np_dtype(dst))


def _shift_right(a, b):
  return np.right_shift(a, b)    # arithmetic for signed, logical for unsigned, as shrsi / shrui


def ieee_maximum(a, b):
  """NaN-propagating maximum with -0.0 < +0.0 (the GPU's maximumf, jnp.maximum); numpy's
  returns its first operand for two zeros."""
  r = np.maximum(a, b)
  return np.where((a == 0) & (b == 0), np.add(a, b), r)           # -0 + +0 = +0; -0 + -0 = -0


def ieee_minimum(a, b):
  r = np.minimum(a, b)
  return np.where((a == 0) & (b == 0), -np.add(-a, -b), r)        # -0 if either zero is negative


def is_floating(dtype) -> bool:
  """numpy's floats and ml_dtypes' (bfloat16, float8), which numpy's issubdtype does not count."""
  name = np.dtype(dtype).name
  return np.issubdtype(dtype, np.floating) or name.startswith(("bfloat", "float")) and name in ml_dtypes.__all__


def ieee_reduce(kind_max: bool, x, axis):
  """max or min of x over `axis`, with the signed-zero rule of ieee_maximum / ieee_minimum."""
  r = (np.max if kind_max else np.min)(x, axis=axis)
  if not is_floating(x.dtype):
    return r
  zero = np.asarray(x) == 0
  keep = ~np.signbit(x) if kind_max else np.signbit(x)     # the zero that wins
  won = np.any(zero & keep, axis=axis)
  return np.where((r == 0) & won, np.abs(r) if kind_max else -np.abs(r), r).astype(r.dtype)


def _power(a, b):
  """powf rounded once from float64: numpy's float32 power takes SVML's vector powf where the CPU has
  AVX-512, an ulp from libm's (XLA:CPU's and the GPU's libdevice powf are within an ulp of the exact
  result); float64 rounded to float32 is the correctly rounded power on every machine. Both operands are
  whole arrays: NumPy's power by a scalar (or broadcast) exponent of 0.5 takes sqrt, -0.0 at -0.0 and NaN at -inf,
  where powf (and jnp's pow) gives 0.0 and inf (probe 53h)."""
  a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
  shape = np.broadcast_shapes(a64.shape, b64.shape)
  with np.errstate(all="ignore"):
    r = np.power(np.array(np.broadcast_to(a64, shape)), np.array(np.broadcast_to(b64, shape)))
  return r.astype(np.result_type(a, b))


def _mulhi(a, b):
  """The high 32 bits of the 64-bit product of 32-bit integers (signed or unsigned, as `a`'s dtype)."""
  wide = np.int64 if np.asarray(a).dtype.kind == "i" else np.uint64
  p = np.asarray(a).astype(wide) * np.asarray(b).astype(wide)
  return (p >> wide(32)).astype(np.asarray(a).dtype)


FLOAT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.DIV: np.divide, B.DIV_RN: np.divide,
             B.MAX: ieee_maximum, B.MIN: ieee_minimum,
             B.ATAN2: np.arctan2, B.POW: _power}


def by_zero(kind, f):
  """Integer `f` (//, % or fmod) as jnp's at a zero divisor (XLA's integer division defines it: x / 0 is -1,
  all bits set, and x % 0 is x; jnp's % and fmod make the divisor 1 first): `x % 0` and `ml.fmod(x, 0)` are 0,
  `x // 0` the largest unsigned value, or for signed types -1 where x is 0 and -2 elsewhere (jnp's floor moves
  lax.div's -1 down where the signs differ and lax.rem's x is not 0)."""
  def op(a, b):
    a, b = np.asarray(a), np.asarray(b)
    zero = b == 0
    with np.errstate(all="ignore"):
      r = np.asarray(f(a, np.where(zero, np.ones_like(b), b)))
    if kind == B.FLOORDIV and zero.any():
      on_zero = np.where((a != 0) & (r.dtype.kind == "i"), -2, -1).astype(np.int64).astype(r.dtype)
      r = np.where(zero, on_zero, r).astype(r.dtype)
    return r
  return op


INT_BIN = {B.ADD: np.add, B.SUB: np.subtract, B.MUL: np.multiply, B.FLOORDIV: by_zero(B.FLOORDIV, np.floor_divide),
           B.MOD: by_zero(B.MOD, np.mod), B.FMOD: by_zero(B.FMOD, np.fmod), B.MAX: np.maximum, B.MIN: np.minimum,
           B.AND: np.bitwise_and, B.OR: np.bitwise_or, B.XOR: np.bitwise_xor, B.SHL: np.left_shift, B.SHR: _shift_right,
           B.MULHI: _mulhi}
CMP = {C.LT: np.less, C.LE: np.less_equal, C.GT: np.greater, C.GE: np.greater_equal,
       C.EQ: np.equal, C.NE: np.not_equal}
INT_UN = {U.NEG: np.negative, U.ABS: np.abs, U.NOT: np.logical_not}


def float_divmod(kind, a, b, d: DType):
  """jnp's float `//` (kind FLOORDIV) or `%` (MOD) of `a` and `b` (arrays of dtype `d`), rounded
  to `d` after each step as jnp's lax ops are: the exact remainder (fmod), moved to the divisor's
  sign; the quotient (a - fmod) / b, one less where the remainder moved, rounded half away from zero
  (a zero divisor divides `a` itself: inf, -inf or NaN, as jnp)."""
  t = np_dtype(d)
  with np.errstate(all="ignore"):
    a, b = np.asarray(a, t), np.asarray(b, t)
    mod = np.fmod(a.astype(np.float32), b.astype(np.float32)).astype(t)        # exact
    if kind == B.FMOD:
      return mod
    moved = (mod != 0) & ((mod < 0) != (b < 0)) | np.isnan(mod)
    if kind == B.MOD:
      return np.where((mod != 0) & ((mod < 0) != (b < 0)), (mod + b).astype(t), mod).astype(t)
    q = np.where(b == 0, a, (a - mod).astype(t))
    q = (q.astype(np.float32) / b.astype(np.float32)).astype(t)
    q = np.where(moved, (q - np.asarray(1, t)).astype(t), q).astype(t)
    f = q.astype(np.float32)
    return np.where(np.abs(f - np.trunc(f)) >= 0.5, np.trunc(f) + np.sign(f), np.trunc(f)).astype(t)


def flush_subnormals(x: np.ndarray) -> np.ndarray:
  """`.ftz`: subnormal values become zero of the same sign."""
  x = np.asarray(x)
  tiny = ml_dtypes.finfo(x.dtype).tiny
  return np.where((np.abs(x) < tiny) & (x != 0), np.copysign(np.zeros_like(x), x), x).astype(x.dtype)


def float_unary(kind, x):
  if kind.value.approx:         # ex2.approx.ftz.f32: subnormal inputs and results are flushed
    return flush_subnormals(np.asarray(kind.value.numpy(flush_subnormals(x))).astype(x.dtype))
  return np.asarray(kind.value.numpy(x)).astype(x.dtype)
