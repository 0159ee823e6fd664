"""Elementwise math's checks and diagnostics: which dtypes an op takes on Hopper
(check_dtype_support), the range of Python ints that meet kernel values, the casts Mosaic GPU
cannot do, Python numbers added to refs, integer ops meeting Python floats, and the wording the
hints use (method_on, the Python-math and explicit-conversion hints).

These emit no ops; the type rules that do are in elementwise.py.
"""
from __future__ import annotations

import math as pymath

from .. import errors as E
from .. import hw
from ..dtypes import DType, FLOAT8, INDEX
from .arith_hints import pointer_hint
from ..types import ScalarType, dtype_name, resolve
from .base import is_ref, is_value
from ..loc import expr_of


def check_python_int(cx, value, dtype, what, hint=None):
  """A Python int that meets a kernel value must fit in 32 bits, as in JAX (whose Python ints
  are int32 without x64): int32's range, or uint32's for an unsigned operand. Narrower integer
  types then wrap, as jnp's do. Before this check, 2**32 + 5 silently became 5."""
  if not isinstance(value, int) or isinstance(value, bool):
    return
  d = resolve(dtype) if dtype is not None else INDEX
  if isinstance(d, DType) and d.is_float:       # converted to the float type, as a float would be
    return
  lo, hi, kind = python_int_range(d)
  if not lo <= value <= hi:
    raise E.KernelTypeError(
        f"{what} uses the Python int {value}, which does not fit in {kind}: kernels compute in"
        f" {kind[-2:]} bits (a larger constant would silently lose its high bits)", cx.loc,
        hint=hint or _range_hint(value, kind))


def _range_hint(value, kind):
  """A hash's constant past its type (probe 71b: the hint said "use a constant in range, or a float"): a uint32 one
  meeting int32 (`jnp.where(c & 1, 0xEDB88320, 0)` of two numbers) as a NumPy uint32, a uint64 one (splitmix64's
  `0x9E3779B97F4A7C15`) as the int64 of its bits, whose +, -, * and bitwise ops wrap as uint64's."""
  if kind == "int32" and 2 ** 31 <= value < 2 ** 32:
    return (f"{value} ({hex(value)}) fits uint32: write it as a uint32 constant, jnp.uint32({hex(value)}) (what it"
            f" meets, or a select of it and a Python int, is then uint32, as in jnp), or as an int32 of its bits,"
            f" {value - 2 ** 32}")
  if kind == "int64" and 2 ** 63 <= value < 2 ** 64:
    return (f"kernels have no uint64, and int64's +, -, *, & | ^ and << wrap as uint64's: write its bits as an int64,"
            f" ({hex(value)} - 2**64), which is {value - 2 ** 64} (and shift right logically with"
            f" jax.lax.shift_right_logical(x, n))")
  return "use a constant in range, or a float (e.g. float(...)) if you meant floating point"


def python_int_range(d):
  """(lo, hi, name) of the Python ints that may meet a value of integer dtype `d`."""
  if d == DType.u32:          # (narrower unsigned types take int32's range, as jnp's Python ints, then wrap)
    return -2 ** 31, 2 ** 32 - 1, "uint32"
  if d == DType.i64:                             # an int64 operand (jax_enable_x64) takes 64-bit ones
    return -2 ** 63, 2 ** 63 - 1, "int64"
  return -2 ** 31, 2 ** 31 - 1, "int32"


def _check_pointer_arithmetic(cx, a, b):
  """Triton's `x_ptr + offsets`: a ref plus a tensor of integer offsets. Refs are not
  pointers; a window of one is what Triton's offsets describe."""
  from .base import is_tensor, is_scalar
  ref, off = (a, b) if is_ref(a) else (b, a)
  if is_ref(ref) and is_scalar(off) and getattr(resolve(off.type.dtype), "is_int", False):
    pointer_step(cx, ref, cx.named(off, "n"))     # Triton's x_ptr + pid * stride (a Python int: a ref read as a value)
  if not (is_ref(ref) and is_tensor(off)):
    return
  d = resolve(off.type.dtype)
  if not (isinstance(d, DType) and d.is_int):
    return
  from .arith_hints import enclosing_access, pointer_grid, pointer_row
  name = ref.name or "x"
  offs = cx.named(off, "")
  raise E.KernelTypeError(
      f"+ works on register values, got {name} ({ref.type.space} ref) plus integer offsets: a ref is"
      f" not a pointer, so offsets are not added to it", cx.loc,
      hint=pointer_hint(name, off, offs if _offsets_text(offs) else "", enclosing_access(cx.loc),
                        pointer_grid(cx.loc, name) if len(ref.type.shape) == 2 else None,
                        pointer_row(cx.loc, name) if len(ref.type.shape) == 2 else None))


def _offsets_text(text: str) -> bool:
  """Whether `text`, the user's offsets in `x_ptr + offsets`, reads as one expression on a line (a name, or
  `tl.arange(0, 64)`, `pid * B + tl.arange(0, B)` written inline): the hint indexes the ref with it as written."""
  from ..loc import expr_of
  return bool(text) and "\n" not in text and expr_of(text) is not None


def pointer_step(cx, ref, off: str, loc=None, op="+"):
  """Triton's `x_ptr + row * stride` or `ptrs += BLOCK_K * stride`: a ref moved by an integer."""
  from .arith_hints import enclosing_access, pointer_row, pointer_step_hint, whole_argument
  from .memory import root
  name = ref.name or "x"
  base = root(cx.b, ref)
  access = enclosing_access(loc or cx.loc) if loc is None else None     # (ml.store(out + off, v, mask=m))
  raise E.KernelTypeError(
      f"{op} works on register values, got {name} ({ref.type.space} ref) {'plus' if op == '+' else 'minus'} the"
      f" offset {off}: a ref is not a pointer,"
      f" so it does not move by an offset", loc or cx.loc,
      hint=pointer_step_hint(name, off, base.name or name, len(base.type.shape), op + "=" if loc is not None else "",
                             access, pointer_row(loc or cx.loc, name) if ref is base and op == "+" else None,
                             whole=access is not None and whole_argument(cx.loc)))


def _convert_hint(names, da, db, what=None) -> str:
  """Convert the side jnp would widen (an integer meeting a float, the narrower of two), never
  the side that would lose values (a float scale truncated to int32 gives zeros); a shift's
  amount (a loop index, `v >> b` of uint32 `v`) to the shifted value's dtype."""
  from .promotion import jnp_result
  if what in ("<<", ">>") and all(isinstance(d, DType) and d.is_int for d in (da, db)):
    return (f"convert the shift amount to the shifted value's dtype, {names[0]} {what}"
            f" {method_on(names[1])}.astype(jnp.{dtype_name(da)}): the result keeps {names[0]}'s dtype, and an"
            f" amount from 0 to {da.bits - 1} is the same number in either")
  if isinstance(da, DType) and isinstance(db, DType) and da.is_int and db.is_int and DType.i64 in (da, db):
    # (jnp_result reads an int64 as a scalar's, int32 without x64: it would narrow the int64 side)
    return f"convert one side explicitly, e.g. {method_on(names[0] if db == DType.i64 else names[1])}.astype(jnp.int64)"
  if what in ("&", "|", "^") and all(isinstance(d, DType) for d in (da, db)) and da.is_float != db.is_float:
    f, o = (0, 1) if da.is_float else (1, 0)     # bitwise ops take no floats (jnp's neither)
    if (db, da)[f] == DType.bool_ and what == "&":
      return (f"{what} takes integers and bools, as jnp's: to keep {names[f]} where {names[o]} holds, write"
              f" ml.where({names[o]}, {names[f]}, 0) (or {names[f]} * {method_on(names[o])})")
    return (f"{what} takes integers and bools, as jnp's: convert {names[f]} to an integer type,"
            f" {method_on(names[f])}.astype(jnp.int32), or its bits, jax.lax.bitcast_convert_type")
  want = jnp_result(da, db) if isinstance(da, DType) and isinstance(db, DType) else None
  if what in ("&", "|", "^") and want is None and DType.u32 in (da, db) and all(
      isinstance(d, DType) and d.is_int for d in (da, db)):
    k = 1 if da == DType.u32 else 0      # a hash's `idx ^ seed`: the signed side's bits as uint32
    return (f"convert {names[k]} to uint32, the same bits: {names[1 - k]} {what} {method_on(names[k])}.astype("
            f"jnp.uint32) is the low 32 bits of jnp's int64 result (with jax_enable_x64)")
  if what in ("+", "-", "*") and want is None and {da, db} == {DType.u32, DType.i32}:
    k = 1 if da == DType.u32 else 0      # Philox counters, `c0 += i4` (FlagGems): wrapping uint32 arithmetic
    sides = [f"{method_on(n)}.astype(jnp.uint32)" if j == k else n for j, n in enumerate(names)]
    return (f"convert {names[k]} to uint32, the same bits: {sides[0]} {what} {sides[1]} wraps as uint32 (Triton's result, the low 32 bits of jnp's int64 one); for the exact"
            f" value, convert both sides to int64: {method_on(names[0])}.astype(jnp.int64) and"
            f" {method_on(names[1])}.astype(jnp.int64)")
  if want is None or want not in (da, db):
    if want is None and isinstance(da, DType) and isinstance(db, DType) and da.is_int and db.is_int:
      # int32 (or int64) with uint32: jnp computes in int64 (int32 without jax_enable_x64, where
      # uint32 values of 2**31 or more wrap negative); converting to either 32-bit side changes
      # comparisons, max/min, // and % of negative or large values
      sides = [method_on(n) for n, d in zip(names, (da, db)) if d != DType.i64]
      return (f"convert {'both sides' if len(sides) == 2 else sides[0]} to int64, where jnp (with jax_enable_x64)"
              f" computes and every value of both fits: " + " and ".join(f"{t}.astype(jnp.int64)" for t in sides))
    if want is None:
      return f"convert one side explicitly, e.g. {method_on(names[1])}.astype(jnp.{dtype_name(da)})"
    return (f"convert both sides to the dtype jnp would compute in: {method_on(names[0])}.astype(jnp.{dtype_name(want)})"
            f" and {method_on(names[1])}.astype(jnp.{dtype_name(want)})")
  side, to = (names[1], da) if want == da else (names[0], db)
  return f"convert one side explicitly, e.g. {method_on(side)}.astype(jnp.{dtype_name(to)})"


def _of_scalar_param(cx, v, depth=4):
  """Whether `v` is an ml.scalar parameter's value ("param"), or a 0-d input read as a scalar
  (`s[...]`, where jax.jit passes a Python number: "input"), or one computed from either alone with Python
  numbers (`-a`, `a * 2`, `ml.abs(a)`): it has the parameter's (the input's) dtype. None otherwise."""
  if not is_value(v) or getattr(v.type, "shape", ()) or depth == 0:
    return None
  if v.id in cx.b.scalar_params:
    return "param"
  op = cx.b.defining(v)
  if type(op).__name__ in ("ScalarLoad", "ScalarRead"):
    from .memory import root
    r = root(cx.b, op.ref)
    return "input" if r.id in cx.b.read_only and not tuple(r.type.shape) else None
  ins = [x for x in op.operands() if is_value(x)] if op is not None else []
  return _of_scalar_param(cx, ins[0], depth - 1) if len(ins) == 1 and type(op).__name__ in ("Unary", "Binary") \
      else None


def float_param(cx, v, err, use: str):
  """`err`, for a float value `v` used where an integer is needed (`use`: "a random seed"), marked with
  the ml.scalar parameter `v` is (`err.scalar_param`): where the call passed it a Python float, the
  mistake is the call's, which mgpu_dsl/calling.py's float_scalar_at_call reports there."""
  d = resolve(v.type.dtype) if is_value(v) and isinstance(v.type, ScalarType) else None
  if isinstance(d, DType) and d.is_float and v.id in cx.b.scalar_params and v.name:
    err.scalar_param = (v.name, use)
  return err


def int64_index_hint(cx, values, names, dtypes) -> str | None:
  """A loop index that counts in int64 (its loop's bounds are int64, with jax_enable_x64) meeting a
  narrower integer value (`t + ml.arange(64)`): the index takes its bounds' type, as lax.fori_loop's, so
  the hint says both ways out. None where that is not the case."""
  k = next((k for k, v in enumerate(values) if is_value(v) and v.id in cx.b.loop_indices
            and dtypes[k] == DType.i64), None)
  other = None if k is None else dtypes[1 - k]
  if not isinstance(other, DType) or other.is_float or other == DType.bool_:
    return None
  t, o = names[k], names[1 - k]
  return (f"{t} counts in int64, as its loop's bounds are int64 (lax.fori_loop's index takes its bounds' type"
          f" too): convert the other side, {method_on(o)}.astype(jnp.int64), or convert the loop's int64 bounds"
          f" to int32 (values below 2**31) for an int32 {t}")


def scalar_param_hint(cx, values, names, dtypes, what) -> str | None:
  """An ml.scalar parameter (a Python number passed is int32 or float32, not weakly typed as in jnp)
  meeting a tensor of another dtype it converts to as jnp converts a Python number (`x_f16 * alpha`,
  `x_f32 + n`): convert the scalar, which keeps the tensor's dtype (converting the tensor would compute
  in, and give, the scalar's). None where that is not the case."""
  if what in ("&", "|", "^", "<<", ">>"):      # bits: _convert_hint's own forms
    return None
  k = next((k for k, v in enumerate(values) if _of_scalar_param(cx, v)), None)
  if k is not None and is_value(values[1 - k]) and dtypes[1 - k] == DType.i64 and isinstance(dtypes[k], DType) and \
      dtypes[k].is_int and dtypes[k].bits < 64 and _of_scalar_param(cx, values[k]) == "param":
    # (a scalar too: Liger's `tl.program_id(0).to(tl.int64) * stride` with x64, whose generic hint converted the
    # stride in the kernel, its low 32 bits through jax.jit; probe 62b)
    s = names[k]
    return (f"pass {s} as an int64 scalar, jnp.int64({s}) (with jax_enable_x64): a Python int passed for an"
            f" ml.scalar is {dtype_name(dtypes[k])} here, its low 32 bits through jax.jit; or convert it,"
            f" {method_on(s)}.astype(jnp.int64), where every value passed fits {dtype_name(dtypes[k])}")
  if k is None or not is_value(values[1 - k]) or not getattr(values[1 - k].type, "shape", ()):
    return None
  ds, dt = dtypes[k], dtypes[1 - k]
  if not (isinstance(ds, DType) and isinstance(dt, DType)) or ds == DType.bool_ or dt == DType.bool_ \
      or (ds.is_float and not dt.is_float):
    return None
  s, t = names[k], names[1 - k]
  kind = _of_scalar_param(cx, values[k])
  wide = f"{method_on(t)}.astype(jnp.{dtype_name(ds)})"
  if what in _ARITHMETIC or what in _COMPARISONS:   # the whole expression, so that one step is enough
    a, b = (wide, method_on(s)) if k == 1 else (method_on(s), wide)
    expr = f"{a} {what} {b}"
    wide = expr if what in _COMPARISONS else f"({expr}).astype(jnp.{dtype_name(dt)})"
    wide = f"{wide} (computed in {dtype_name(ds)}" + (f", the result converted back to {dtype_name(dt)})"
                                                       if what in _ARITHMETIC else ")")
  else:
    wide = None          # (a call's operands: convert the scalar)
  python = ds in (DType.f32, DType.i32)       # what a Python float or int passed for it becomes
  number = f"a Python {'float' if ds.is_float else 'int'}"
  if kind == "input":     # s[...] of a 0-d input: jax.jit passes a Python number as one
    python = python and not (ds.is_int and cx.b.x64)       # (with x64 a Python int is an int64 array)
    what_is = (f"{s} reads an input of dtype {dtype_name(ds)} here, not weakly typed"
               + (f" as {number} passed for it would be" if python else ""))
  else:
    why = f"as {number} passed for it becomes" if python else "the dtype of the value passed for it"
    what_is = f"an ml.scalar is {dtype_name(ds)} here, {why}, not weakly typed"
  return (f"convert the scalar, {method_on(s)}.astype(jnp.{dtype_name(dt)}): the result stays {dtype_name(dt)}, as"
          f" jnp's does for a Python number ({what_is})"
          + (f"; or {wide}" if wide and ds.is_float == dt.is_float and (ds.is_float or ds.is_signed == dt.is_signed)
             else ""))


_ARITHMETIC = ("+", "-", "*", "/", "//", "%", "**")
_COMPARISONS = ("<", "<=", ">", ">=", "==", "!=")


def method_on(text: str) -> str:
  """`text` as the receiver of a method call: `v`, `ml.mean(v)`, but `(a + b)`."""
  import ast
  node = expr_of(text)
  if node is None:
    return f"({text})"
  return text if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({text})"


def _both(cx, what, pair, wide) -> str:
  """`what` of both operands of `pair` converted to `wide`: `ml.atan2(a.astype(jnp.float32), ...)`, `(a + b)`."""
  a, b = (f"{method_on(cx.named(v))}.astype(jnp.{wide})" for v in pair)
  return f"{what}({a}, {b})" if what[:1].isalpha() else f"({a} {what} {b})"


def _upcast_hint(cx, d, what, x, pair) -> str:
  wide = "int32" if d.is_int else "float16"
  if pair is None:
    return f"upcast first: {x}.astype(jnp.{wide}), compute, then cast back"
  # both 8-bit: convert both (u8 + u8)
  return f"upcast both operands, compute, then cast back: {_both(cx, what, pair, wide)}.astype(jnp.{dtype_name(d)})"


def check_dtype_support(cx, dtype, what, *, floats_only=False, ints_only=False, bitwise=False, x=None, pair=None):
  """`x`: the operand, which hints name (as the user wrote it); `pair`: a binary op's two register
  operands, both of which an 8-bit op's hint converts."""
  x = method_on(cx.named(x))
  d = resolve(dtype)
  if not isinstance(d, DType):
    return
  if bitwise and d.is_int:
    return
  if ints_only and d.is_float and d.bits == 8:     # & on float8: the integer rule, not the 8-bit one
    raise E.UnsupportedDtypeError(f"{what} needs integer operands, got {d}", cx.loc,
                                  hint=f"on the bits: ml.bitcast({x}, jnp.uint8) (a uint8 result {what} works on)")
  if floats_only and not d.is_float:     # (an int8 too: its 8-bit rule's int32 would not do)
    raise E.UnsupportedDtypeError(f"{what} needs a floating-point operand, got {d}", cx.loc,
                                  hint=f"convert first: {x}.astype(jnp.float32)" if pair is None else
                                  f"convert both first: {_both(cx, what, pair, 'float32')} (float32, as jnp computes)")
  if d not in hw.ARITH_DTYPES and d != DType.bool_:
    raise E.UnsupportedDtypeError(
        f"{what} is not supported on {d}: Hopper has no register arithmetic on 8-bit types", cx.loc,
        hint=_upcast_hint(cx, d, what, x, pair))
  if ints_only and not (d.is_int or d == DType.bool_):
    bits = f"uint{d.bits}" if d.is_float else None     # x & 0x7FFFFFFF of a float: its bits, not its value
    raise E.UnsupportedDtypeError(f"{what} needs integer operands, got {d}", cx.loc,
                                  hint=f"on the bits: ml.bitcast({x}, jnp.{bits}) (and ml.bitcast(..., jnp.{d})"
                                       f" back to {d}); on the values: {x}.astype(jnp.int32)" if bits else
                                       f"convert first: {x}.astype(jnp.int32)")


def _check_integer_meets_float(cx, a, b, what):
  """`i & 3.0`: an integer value meets a Python float, so (as in jnp) the operation is float32,
  which the bitwise ops reject; the message names the float, not the user's integer."""
  v, py = (a, b) if is_value(a) else (b, a)
  vd = resolve(v.type.dtype) if is_value(v) else None
  if not (isinstance(py, float) and isinstance(vd, DType) and not vd.is_float):
    return
  name = method_on(cx.named(v))
  num = repr(float(py))
  def expr(x, y):         # in the user's order
    return f"{x} {what} {y}" if v is a else f"{y} {what} {x}"
  whole = py == py and abs(py) != pymath.inf and float(py).is_integer() and -2 ** 31 <= py < 2 ** 31
  integer = f"an integer constant: {expr(name, int(py))}" if whole else None
  hint = integer or f"use an integer constant, e.g. {expr(name, int(py) if abs(py) < 2 ** 31 else 1)}"
  raise E.UnsupportedDtypeError(
      f"{what} needs integer operands: {cx.named(v)} is {dtype_name(vd)} but {num} is a float (an integer"
      f" value meeting a Python float computes in float32)", cx.loc, hint=hint)


# What computes ml.<f> of a Python number in Python ({} is the argument's text).
_PYTHON_MATH = {"exp": "math.exp({})", "exp2": "2.0 ** {}", "log": "math.log({})", "log2": "math.log2({})",
                "sqrt": "math.sqrt({})", "rsqrt": "1 / math.sqrt({})", "tanh": "math.tanh({})",
                "sin": "math.sin({})", "cos": "math.cos({})", "erf": "math.erf({})", "abs": "abs({})",
                "floor": "math.floor({})", "ceil": "math.ceil({})", "trunc": "math.trunc({})",
                "round": "round({})"}


def _python_math_hint(cx, kind, x) -> str:
  """`math.log2(0.9)` for `ml.log2(0.9)`: computed while tracing, it is a Python number that
  then meets register values as any number does (`ml.exp2(t * math.log2(0.9))`)."""
  name = kind.value.name
  text = cx.text or ""
  arg = text[text.index("(") + 1:-1] if text.startswith(f"ml.{name}(") and text.endswith(")") else repr(x)
  if "," in arg or "=" in arg:
    arg = repr(x)
  form = _PYTHON_MATH.get(name, "math." + name + "({})")
  if form.startswith("2.0 **") and not arg.replace(".", "").isalnum():
    arg = f"({arg})"
  return f"compute it in Python while the kernel is traced: {form.format(arg)} (import math)"


def _call_args(text, n):
  """The source texts of the `n` positional arguments of the call `text`, or None."""
  import ast
  call = expr_of(text)
  if call is None:
    return None
  if not isinstance(call, ast.Call) or len(call.args) != n:
    return None
  return tuple(ast.unparse(a) for a in call.args)


def cast_problem(src: DType, dst: DType, *, scalar: bool) -> str | None:
  """Why Mosaic GPU cannot convert `src` to `dst` (None if it can).

  lowering/compat.py bridges narrow float <-> float, 8-bit <-> float and integer -> float8
  conversions through f32; what is left are the pairs below.
  """
  if dst == DType.bool_:       # (no Cast op to bool: astype makes it the comparison x != 0)
    return "casting to bool is not supported"
  if scalar and (src in FLOAT8 or dst in FLOAT8):
    # The GPU's pass pipeline has no scalar 8-bit float conversion (arith.truncf/extf to f8
    # fails to translate; tensors use the paired cvt.satfinite instructions).
    return f"scalars cannot be converted {'from' if src in FLOAT8 else 'to'} 8-bit floats on the GPU"
  return None
