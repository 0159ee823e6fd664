"""What Triton and jnp users reach for that mgpu_dsl lacks, and what to write instead: hints for a missing
`ml.` name, and for Triton's, Pallas's and JAX's own functions called in a kernel out of habit."""
from __future__ import annotations

import ast, collections, difflib, math, re

from .activation_forms import ACTIVATIONS, activation_args, gelu_form  # jax.nn's activations in ml.* functions
from .aten_hints import NAMES as ATEN_NAMES  # ATen's everyday operators ml has no function for
from .formula_hints import nan_to_num_hint, operand as _operand, with_operands  # the formula hints with the call's own operands
from .segment_hints import SEGMENT  # jax.ops.segment_sum, unique, diff
from .shape_hints import SPLITS, ml_same_hint, split_hint  # jnp.split's windows; jnp.stack's ml.stack
from .image_hints import IMAGE, PAD_MODES  # lax.reduce_window, conv_general_dilated, jnp.median, jax.image.resize

from .scan_hints import SCAN as _SCAN  # a general scan: log2(n) steps of shifted copies
from .bit_hints import _logical_shift, bit_count_hint, lax_count_hint  # shifts and bit counts in what a kernel offers
_TOP = ("ml.top_k(x, k) gives the k largest elements along the last axis and their int32 positions, as"
        " jax.lax.top_k (values, indices = ml.top_k(x, k)); ml.sort and ml.argsort(x, descending=True) order"
        " whole rows")
_TRANSPOSE = ("a 2-D tensor transposes with x.T or ml.transpose(x) (through SMEM); for the tensor cores,"
              " give ml.dot the transposed view buf.T, which moves no data")
_CONCAT = "join register tensors along an existing axis with ml.concatenate([a, b], axis=0)"
_JOIN = ("no ml.{}: join along a new last axis with ml.concatenate([a[..., None], b[..., None]], axis=-1)"
         " (then .reshape(m, 2 * n) interleaves the columns of (m, n) tensors)")
_POW = ("use ml.pow(x, y) (libdevice's powf, as jnp.power of floats); the ** operator gives t ** n (a static"
        " int), t ** 0.5 and c ** t (c a Python number) as jnp")
_FMA = "write ml.fma(x, y, z): x * y + z rounded once (Triton's tl.fma, C's fmaf; a * b + c is rounded twice)"
_DIV = "no ml.{}: divide with the / operator, x / y (ml.cdiv(a, b) is the ceiling of an integer division)"
_FLOOR_DIV = "no ml.{}: divide with the // operator, x // y (ml.cdiv(a, b) rounds up instead)"
# jnp's math functions that ml lacks (some a near-spelling of another ml name: copysign, ldexp, square)
# -> (what to write, with {0}, {1} its arguments, a note)
_MATH = {
    "copysign": ("ml.where(ml.bitcast({1}, jnp.int32) < 0, -ml.abs({0}), ml.abs({0}))",
                 " (the bitcast sees the sign of -0.0, as jnp.copysign; jnp.int16 for a 16-bit float)"),
    "signbit": ("ml.bitcast({0}, jnp.int32) < 0", " (True for -0.0, as jnp.signbit; jnp.int16 for a 16-bit float)"),
    "ldexp": ("{0} * ml.exp2({1}.astype(jnp.float32))", " ({0} * 2.0 ** n for a static int n)"),
    "nearbyint": ("ml.round({0})", ": to the nearest integer, ties to even"),
    "fix": ("ml.trunc({0})", ": rounds toward zero"),
    "nan_to_num": ("ml.where({0} != {0}, 0.0, ml.clip({0}, -jnp.finfo({0}.dtype).max, jnp.finfo({0}.dtype).max))",
                   " (NaN to 0, +-inf to the dtype's largest finite values, as jnp.nan_to_num)"),
    "square": ("{0} * {0}", ""),
    "log10": ("jnp.log10({0})", " (jnp's form, computed in kernels; also ml.libdevice.log10)"),
    "exp10": ("ml.libdevice.exp10({0})", " (10 ** x, libdevice's powf of 10)"),
}


def _math_hint(attr, args) -> str:
  form, note = _MATH[attr]
  n = 2 if "{1}" in form else 1
  xs = list(map(_operand, args)) if args and len(args) == n and "=" not in "".join(args) else ["x", "y"][:n]
  if attr == "ldexp" and isinstance(_const(xs[1]), int):
    form, note = "{0} * 2.0 ** {1}", ""
  if attr == "copysign" and re.fullmatch(r"[-+]?[\d.]+(e[-+]?\d+)?", xs[0].strip()):   # a number: |it| here,
    form = "ml.where(ml.bitcast({1}, jnp.int32) < 0, -%r, %r)" % ((abs(float(xs[0])),) * 2)   # not ml.abs(1.0)
  return f"no ml.{attr}: {form.format(*xs)}{note.format(*xs)}"


_ALONG = ("write ml.take_along_axis with the same arguments, ml.take_along_axis(x, ids, axis=1): it gathers"
          " from a GMEM ref (a kernel parameter) as jnp's does")
NOT_YET = {   # what Triton and jnp users reach for that mgpu_dsl does not have, and what to write
    "scan": _SCAN, "sort": _TOP, "topk": _TOP, **SEGMENT, **IMAGE,
    "permute": _TRANSPOSE,
    "gather": "index the GMEM ref with a tensor of indices: table[ids, :] (NumPy's advanced indexing)",
    "take": "index the GMEM ref with a tensor of indices: x[idx] (NumPy's advanced indexing)",
    "join": _JOIN.format("join"), "interleave": _JOIN.format("interleave"), "stack": _JOIN.format("stack"),
    "cat": _CONCAT, "concatenate": _CONCAT,
    "split": ("no ml.split: Triton's split of a last axis of 2 is indexing, a[..., 0] and a[..., 1]; halves of a ref"
              " are its windows, x.at[:, 0:n][...] and x.at[:, n:2 * n][...]"),
    "power": _POW,
    **{n: (f"no ml.{n}: Triton's tl.math and libdevice functions are ml.* functions here (ml.{n}.rsqrt(x) is"
           " ml.rsqrt(x)): ml.exp, ml.exp2, ml.log, ml.log2, ml.sqrt, ml.rsqrt, ml.erf, ml.tanh, ml.sin, ml.cos,"
           " ml.sigmoid, ml.asin, ml.acos, ml.atan, ml.atan2, ml.tan, ml.cbrt, ml.expm1, ml.log1p, ml.erfc, ml.pow,"
           " ml.isnan, ml.isinf, ml.isfinite, ml.floor, ml.ceil, ml.trunc, ml.round, ml.abs, ml.maximum, ml.minimum") for n in ("math", "extra", "libdevice")},
    **{n: f"no ml.{n}: jnp.{n}(x) (jnp's form, accurate near 0 too; also ml.libdevice.{n}(x))"
       for n in ("sinh", "cosh", "asinh", "acosh", "atanh")},
    **{n: f"use ml.{n.replace('arc', 'a')} (libdevice's {n.replace('arc', 'a')}f)"
       for n in ("arcsin", "arccos", "arctan", "arctan2")},
    "sign": "no ml.sign: ml.where(x > 0, 1, ml.where(x < 0, -1, x)) (jnp.sign: x's dtype, NaN and -0.0 kept)",
    # Triton tutorial names that were 'check the spelling' or a misleading near miss (probe 29a)
    "pointer_type": ("no pointers: a kernel's parameters are arrays; for groups of operands (Triton's arrays of"
                     " pointers in a grouped GEMM), concatenate the groups' rows into one array and pass their row"
                     " offsets (examples/ragged_dot.py), or stack equal shapes into one (G, m, k) array"),
    "dot_scaled": ("no ml.dot_scaled (block-scaled MMA is not Hopper's): dot each K block's tiles and scale the"
                   " float32 partial product, acc = acc + ml.dot(a_s, b_s.T) * a_scale[:, None] * b_scale[None, :]"
                   " with the block's scale columns read as vectors"),
    "inline_asm_elementwise": "no inline assembly: write the math with ml.* functions",
    "int1": "booleans are jnp.bool_ (comparisons give them; bool arrays are read and written as they are)",
    "float64": "no float64 in kernels: compute in jnp.float32",
    "uint64": "no uint64: use two uint32 halves, or jnp.int64 (with jax_enable_x64)",
    "sqrt_rn": "no ml.sqrt_rn: ml.sqrt(x) is the IEEE square root, rounded to nearest",
    "rcp": "no ml.rcp: write 1.0 / x",
    "rcp_rn": "no ml.rcp_rn: ml.div_rn(1.0, x) (1 / x rounded to nearest)",      # (libdevice's; probe 58d)
    "rsqrt_rn": "no ml.rsqrt_rn: ml.div_rn(1.0, ml.sqrt(x)) (ml.rsqrt(x) is the hardware's approximation)",
    "fast_powf": "no ml.fast_powf: ml.pow(x, y) (libdevice's powf)",
    "ilogb": "no ml.ilogb: ((ml.bitcast(x, jnp.int32) >> 23) & 0xFF) - 127 (the exponent of a normal float32 x)",
    **dict.fromkeys(("div_rz", "div_rd", "div_ru"), "no directed-rounding divisions: ml.div_rn(x, y) rounds to"
                                                    " nearest (ml.fdiv(x, y), x / y, within an ulp of it)"),
    "fast_expf": "no ml.fast_expf: ml.exp2(x * 1.4426950408889634, approx=True) (the hardware's ex2.approx)",
    "fast_dividef": "no ml.fast_dividef: write x / y",
    "saturatef": "no ml.saturatef: ml.clip(x, 0.0, 1.0)",
    "hypot": "no ml.hypot: jnp.hypot(x, y) (scaled: ml.sqrt(x * x + y * y) overflows past 1.8e19 in float32)",
    "modf": "no ml.modf: the whole part ml.trunc(x) and the fraction x - ml.trunc(x)",
    **{n: (f"no ml.{n}: ml.{'minimum' if n == 'fmin' else 'maximum'}(x, y) (NaN if either is NaN; for {n}'s"
           f" number over a NaN, ml.where(x != x, y, ml.where(y != y, x, ml.{'minimum' if n == 'fmin' else 'maximum'}(x,"
           f" y))))")
       for n in ("fmin", "fmax")},
    "llrint": "no ml.llrint: ml.round(x).astype(jnp.int32) (to nearest, ties to even)",
    "zeros_like": "no ml.zeros_like: ml.zeros(x.shape, x.dtype)",
    "ones": "no ml.ones: ml.full(shape, 1, dtype)",
    "ones_like": "no ml.ones_like: ml.full(x.shape, 1, x.dtype)",
    "full_like": "no ml.full_like: ml.full(x.shape, value, x.dtype)",
    "relu": "no ml.relu: ml.maximum(x, 0.0)",
    "leaky_relu": "no ml.leaky_relu: ml.where(x >= 0, x, 0.01 * x)",
    "gelu": "no ml.gelu: 0.5 * x * ml.erfc(-x * 0.7071067811865476) (tanh form: 0.5 * x * (1 + ml.tanh("
            "0.7978845608028654 * (x + 0.044715 * x * x * x))))",
    "tensor_descriptor": "a descriptor is made in the kernel: desc = ml.make_tensor_descriptor(x, shape=x.shape,"
                         " strides=[x.shape[1], 1], block_shape=[BM, BK])",
    "load_tensor_descriptor": "no ml.load_tensor_descriptor: desc.load([r, c]) (desc = ml.make_tensor_descriptor(...))",
    "store_tensor_descriptor": "no ml.store_tensor_descriptor: desc.store([r, c], value)",
    "rint": "no ml.rint: ml.round(x) rounds to the nearest integer, ties to even, as jnp.rint",
    "scatter": "no ml.scatter: store at the indices, out[ids] = values (rows: out[ids, :] = rows; with a mask:"
               " out.at[ids].store(values, mask=m)), as jnp's .at[ids].set(mode=\"drop\") (indices outside are"
               " dropped; an output written only by scatters starts at 0); to add repeated indices up,"
               " ml.atomic_add(out.at[ids], values)",
    "scatter_add": "ml.atomic_add(out.at[ids], values) (an output updated only by atomics starts at 0)",
    "nonzero": "no ml.nonzero (its length depends on the data): keep a mask, or compact with an exclusive"
               " ml.cumsum of the mask as each kept element's position and a scatter",
    **{n: _DIV.format(n) for n in ("divide", "true_divide")},
    **{n: _FLOOR_DIV.format(n) for n in ("floor_divide", "floordiv")},
    "fliplr": "no ml.fliplr: ml.flip(x, axis=1)", "flipud": "no ml.flipud: ml.flip(x, axis=0)",
    "reverse": "no ml.reverse: ml.flip(x, axis=dims) (lax.rev's dimensions)",
    **{n: "no ml.{}: reshape the register tensor, v.reshape(shape) (or ml.reshape(v, shape))".format(n)
       for n in ("view", "flatten")},
    "prod": "no ml.prod: take the last element of the running product, ml.cumprod(v, axis=1)[:, -1] along the"
            " rows of a 2-D v (ml.cumprod(v)[-1] for a 1-D v)",
}


def is_dtype_text(t: str) -> bool:
  """Whether an argument as written names a dtype: jnp.int32, np.uint8, x.dtype, 'float16'."""
  t = t.strip()
  if t[:1] in "'\"":
    t = t.strip("'\"")
  last = t.rsplit(".", 1)[-1]
  return last == "dtype" or bool(re.fullmatch(r"u?int(8|16|32|64)|float(16|32|64)|bfloat16|float8_\w+|bool_?", last))


def _const(t: str):
  """The number an argument as written is, if it is one (else None)."""
  try:
    e = ast.parse(t.strip(), mode="eval").body
  except SyntaxError:
    return None
  return e.value if isinstance(e, ast.Constant) and isinstance(e.value, (int, float)) else None


def _signs_differ(a: str, b: str) -> str:
  """Whether a and b (as written) differ in sign: ((a < 0) != (b < 0)), or (a < 0) for a number b > 0."""
  c = _const(b)
  return f"({a} < 0)" if c is not None and c > 0 else f"(({a} < 0) != ({b} < 0))"


def join_hint(attr, args) -> str:
  """ml.join(a, b) / ml.interleave(a, b) / jnp.stack([a, b], -1): a concatenation of [..., None] pieces."""
  parts = ", ".join(f"{_operand(a)}[..., None]" for a in args)
  cat = f"ml.concatenate([{parts}], axis=-1)"
  if attr == "interleave":
    return (f"no ml.interleave: join along a new last axis and merge it into the last: {cat}.reshape({len(args)} * n)"
            f" for {' and '.join(args)} of n elements, .reshape(m, {len(args)} * n) of shape (m, n)")
  return f"no ml.{attr}: join along a new last axis, {cat}"


def _expand_hint(attr, args) -> str:
  """ml.expand_dims(v, axis) (Triton's and jnp's): NumPy indexing with None."""
  pos = [a for a in (args or []) if not re.match(r"\w+=[^=]", a)]
  kw = {a.split("=", 1)[0]: a.split("=", 1)[1] for a in (args or []) if a not in pos}
  v = _operand(pos[0]) if pos else "v"
  axis = _const(pos[1] if len(pos) > 1 else kw.get("axis", kw.get("dim", "")))
  if isinstance(axis, int) and axis >= 0:
    index = ", ".join([":"] * axis + ["None"])
    return f"no ml.{attr}: insert the axis by indexing, {v}[{index}] (NumPy's None)"
  if axis == -1:
    return f"no ml.{attr}: insert the axis by indexing, {v}[..., None] (NumPy's None)"
  return f"no ml.{attr}: insert an axis by indexing with None, {v}[None, :] or {v}[:, None] (as in NumPy)"


def _namespace_hint(base, ns, after: str) -> str | None:
  """Triton's `tl.math.exp2(x)` written `ml.math.exp2(x)` (`after`: the text after `ml.math`): the ml
  function it is, with the user's arguments, or what to write for one ml lacks; None if not a call."""
  m = re.match(r"((?:\s*\.\s*\w+)+)\s*(\(.*)?", after)
  if not m:
    return None
  name = m.group(1).replace(" ", "").split(".")[-1]
  args = None
  if m.group(2):
    depth = 0
    for end, ch in enumerate(m.group(2)):
      depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
      if depth == 0:
        break
    try:
      call = ast.parse("f" + m.group(2)[:end + 1], mode="eval").body
      args = [ast.unparse(a) for a in call.args] + [f"{k.arg}={ast.unparse(k.value)}" for k in call.keywords]
    except SyntaxError:
      args = None
  lead = f"no ml.{ns}: Triton's tl.{ns} (and libdevice) functions are ml.* functions here"
  if name in ("cuda", "libdevice", "math", "extra"):
    return None
  xs = ", ".join(args) if args is not None else "..."     # (a call spanning lines is not parsed here)
  if name in ("float_as_int", "int_as_float", "float_as_uint", "uint_as_float"):
    to = {"float_as_int": "int32", "float_as_uint": "uint32"}.get(name, "float32")
    return f"{lead}: write ml.bitcast({xs}, jnp.{to}) (the same bits)"
  ml_name = _TRITON_MATH.get(name, name)
  if not ml_name.startswith("_") and callable(getattr(base, ml_name, None)):
    note = (" (it rounds halves to even, as jnp.round; libdevice's round takes them away from zero)"
            if ml_name == "round" else "")
    call = f"({xs})" if m.group(2) else ""
    return f"{lead}: write ml.{ml_name}{call} for ml.{ns}{m.group(1).strip()}{call and '(...)'}{note}"
  inner = missing_hint(base, _TRITON_MATH.get(name, name), args)
  return None if inner == "check the spelling" else f"{lead}; {inner}"


# Triton's tl.math / libdevice names of functions ml has under another name
_TRITON_MATH = {"max": "maximum", "min": "minimum", "fmax": "maximum", "fmin": "minimum", "fabs": "abs",
                "clamp": "clip", "finitef": "isfinite", "isfinited": "isfinite", "fast_logf": "log",
                "fast_log2f": "log2", "fast_sinf": "sin", "fast_cosf": "cos", "fast_tanf": "tan",
                "fdiv_rn": "div_rn", "rcp_rn": "rcp", "sqrt_rn": "sqrt_rn"}


def missing_hint(base, attr, args=None, after="", taken=frozenset()) -> str:
  """The hint for a name a module lacks: the ml function a Triton or jnp user meant, if any
  (`args`: the call's arguments as written, where it is called; `after`: the text after the name
  on its line, which names the function of a namespace ml lacks: `.exp2(x)` after `ml.math`)."""
  from .triton_math import Namespace
  if isinstance(base, Namespace):                # ml.math.fast_dividef: the hint for ml.fast_dividef
    from . import language as base
  if getattr(base, "__name__", "").endswith("language"):
    if attr in ("math", "extra", "libdevice") and after and (ns := _namespace_hint(base, attr, after)):
      return ns
    if args and len(args) >= 2 and attr == "view":
      if len(args) == 2 and is_dtype_text(args[1]):
        return f"write ml.bitcast({args[0]}, {args[1]}): the same bits as another dtype of the same width"
      return f"write {args[0]}.reshape({', '.join(args[1:])})"
    if args and attr in ("join", "interleave") and len(args) == 2 and "=" not in "".join(args):
      return join_hint(attr, args)
    if args and (attr in _OPERATORS and _OPERATORS[attr] != "%" or attr == "shift_right_logical" or
                 attr == "nan_to_num" and len(args) > 1):
      pos = [a for a in args if not re.match(r"\w+=[^=]", a)]
      hint = array_call_hint(attr, pos, {a.split("=")[0]: a for a in args if a not in pos})
      if hint is not None:
        return f"no ml.{attr}: {hint[0].lower()}{hint[1:]}" if hint.startswith("write") else f"no ml.{attr}: {hint}"
    if attr in _MATH:
      return _math_hint(attr, args)
    if args and attr in ("zeros_like", "ones_like", "full_like") and not any(re.match(r"\w+=[^=]", a) for a in args):
      form = form_hint(attr, args, {})          # ml.full_like(x, 3.0): with the user's x and 3.0
      if form is not None:
        return f"no ml.{attr}: {form.removeprefix('write ')}"
    if attr in ("expand_dims", "unsqueeze"):
      return _expand_hint(attr, args)
    if attr in SPLITS and args and (split := split_hint(attr, args)):
      return f"no ml.{attr}: {split}"
    if attr in _BIT_NAMES:
      return lax_count_hint(attr, args)
    if attr in NOT_YET:
      return with_operands(attr, NOT_YET[attr], args, taken) or NOT_YET[attr]
    from . import triton_dtypes
    if (dtype_hint := triton_dtypes.hint(attr)) is not None:
      return dtype_hint
    from .shape_hints import NOT_YET as shape_names
    if attr in shape_names:
      return shape_names[attr]
    from .ml_name_hints import ml_name_hint
    if (named := ml_name_hint(attr, args)) is not None:
      return named
    close = difflib.get_close_matches(attr, [n for n in dir(base) if not n.startswith("_")], n=1)
    if close and not (close[0] in attr and len(attr) >= len(close[0]) + 2):
      return f"did you mean ml.{close[0]}?"    # (not ml.copy for copysign, nor ml.exp for ldexp)
  if any((getattr(base, "__name__", "") or "").startswith(p) for p in _FOREIGN_PACKAGES if p != "triton") \
      and attr in _FOREIGN:          # pl.load, pl.store: Pallas's names this JAX no longer has
    return f"write {_FOREIGN[attr]}"
  if attr == "fma" and (getattr(base, "__name__", "") or "").startswith(("jax", "numpy")):     # (probe 70b)
    return with_operands("fma", _FMA, args, taken) or _FMA
  if attr == "element_ty":          # Triton's x_ptr.dtype.element_ty
    return "a ref's .dtype is its element type already (a ref is an array, not a pointer): drop .element_ty"
  if attr == "primitive_bitwidth":
    return "write jnp.dtype(x.dtype).itemsize * 8 (the bits of one element)"
  if getattr(base, "__name__", "") == "mgpu_dsl":      # mg.program_id for ml.program_id
    from .language import __all__ as lang
    if attr in lang:
      return f"it is ml.{attr}, in the kernel language: from mgpu_dsl import language as ml"
  return "check the spelling"


_AT_UPDATES = {"set": "=", "add": "+=", "multiply": "*=", "get": ""}   # jnp's .at[idx] updates, on a ref
_REGISTER_METHODS = ("astype", "sum", "max", "min", "mean", "var", "std", "argmax", "argmin", "cumsum", "cumprod",
                     "reshape", "transpose", "clip", "any", "all")


def method_hint(attr, recv: str, *, ref: bool, shape=(), is_bool=False, args=None, axis=None,
                bitcast=None) -> str | None:
  """The hint for a Triton, torch or NumPy method a register tensor or ref lacks (`recv`: the
  receiver as written; `args`: the call's arguments as written, None where it is not called)."""
  if ref:
    if attr == "stride":
      return (f"refs are indexed by dimension, so no strides are needed: {recv}.at[r, ml.ds(c, n)] is row r's"
              f" columns c to c + n; for flat pointer arithmetic, reshape the array outside the kernel")
    if attr in _AT_UPDATES:           # o_ref.at[idx].set(v): jnp's functional update, of a ref
      v = (args or ["v"])[0]
      return f"write {recv}[...] {_AT_UPDATES[attr]} {v} (a ref is written in place)" if attr != "get" else \
          f"read it: {recv}[...]"
    if attr in _REGISTER_METHODS:     # x_ref.astype(jnp.float32), x_ref.sum(): a Pallas ref read is explicit
      return f"read it into registers first: {recv}[...].{attr}({', '.join(args or ())})"
    return method_hint(attr, f"{recv}[...]", ref=False, shape=shape, args=args, axis=axis, bitcast=bitcast)
  a = ", ".join(args or ())
  first = (args or ["dtype"])[0]
  if attr == "to":
    from .triton_dtypes import as_jnp
    first = ", ".join([as_jnp(first), *(args or [])[1:]])     # .to(tl.float8e4nv, fp_downcast_rounding="rtz")
    if bitcast is None:
      return (f"write {recv}.astype({first}) to convert the values (Triton's .to(dtype, bitcast=True) is"
              f" ml.bitcast({recv}, {first}))")
    return f"write ml.bitcast({recv}, {first})" if bitcast else f"write {recv}.astype({first})"
  if attr == "prod":
    if axis is None and len(shape) == 1:
      return f"take the last element of the running product: ml.cumprod({recv})[-1]"
    if isinstance(axis, int) and len(shape) == 2 and -2 <= axis < 2:
      last = "[:, -1]" if axis % 2 == 1 else "[-1]"
      return f"take the last element of the running product: ml.cumprod({recv}, axis={axis}){last}"
    return NOT_YET["prod"]
  if attr == "view":
    if args and len(args) == 1 and is_dtype_text(args[0]):
      return f"write ml.bitcast({recv}, {args[0]}): the same bits as another dtype of the same width"
    return f"write {recv}.reshape({a or 'shape'})"
  if attr == "at" and shape:          # jnp's v.at[i].set(x): a select by index
    pick = f"ml.arange({shape[0]})[:, None] == idx" if len(shape) == 2 else f"ml.arange({shape[0]}) == idx"
    return (f"register tensors are values, updated by a select: {recv}.at[idx].set(y) is"
            f" ml.where({pick}, y, {recv}) (.add(y): ml.where({pick}, {recv} + y, {recv}))")
  if attr in ("flatten", "ravel"):
    return f"write {recv}.reshape(({math.prod(shape)},))"
  if attr == "squeeze":
    from .shape_hints import shape_call_hint
    kw = dict(a.split("=", 1) for a in args or () if re.match(r"\w+=", a))
    return shape_call_hint("squeeze", [recv, *(a for a in args or () if a.split("=", 1)[0] not in kw)], kw,
                           tuple(shape))
  if attr in ("softmax", "log_softmax", "logsumexp"):   # torch's dim= and keepdim= are ml's (jnp's) axis=, keepdims=
    a = ", ".join(re.sub(r"^dim(?==)", "axis", re.sub(r"^keepdim(?==)", "keepdims", x.strip())) for x in args or ())
    return f"write ml.{attr}({recv}{', ' + a if a else ''})"
  return None


# ---------------------------------------------------------------- other DSLs
def unknown_name(name: str, supported: dict, known=()) -> tuple[str, str]:
  """(message, hint) for a name a kernel reads that is neither its own, its module's nor a builtin it
  supports: another DSL's module name, a Python builtin kernels do not call, a function of the kernel
  language written without its module (`program_id(0)` for `ml.program_id(0)`, as after Triton's
  `from triton.language import *`), or a plain typo of a name the kernel sees (`known`: its parameters,
  locals and module globals)."""
  import builtins
  foreign = FOREIGN_MODULES.get(name)
  if foreign:
    return (f"name {name!r} is not defined", f"{name} is {foreign}'s name; mgpu_dsl's language is ml (from mgpu_dsl"
            f" import language as ml): ml.program_id, ml.arange, ml.load/ml.store or ref[...], ml.dot, ml.where, ml.cdiv")
  if callable(getattr(builtins, name, None)):
    calls = ", ".join(sorted(n for n, f in supported.items() if callable(f) and not (isinstance(f, type) and issubclass(f, Exception))))
    from .stmt_hints import builtin_hint
    return f"the Python builtin {name}() is not supported in a kernel", builtin_hint(name, calls)
  from . import language
  if not name.startswith("_") and name in getattr(language, "__all__", ()):
    return (f"name {name!r} is not defined",
            f"{name} is the kernel language's: write ml.{name} (from mgpu_dsl import language as ml)")
  names = sorted({k for k in known if isinstance(k, str) and not k.startswith("_") and k != name})
  close = difflib.get_close_matches(name, names, n=1, cutoff=0.75)
  if close:
    return f"name {name!r} is not defined", f"did you mean {close[0]}?"
  return f"name {name!r} is not defined", "kernels see their parameters, local names and module globals"


FOREIGN_MODULES = {"tl": "Triton (triton.language)", "triton": "Triton", "pl": "Pallas", "plgpu": "Pallas Mosaic GPU"}
# Pallas and Triton functions a kernel may call out of habit -> what mgpu_dsl writes instead.
_FOREIGN = {"program_id": "ml.program_id(axis)", "num_programs": "ml.num_programs(axis)",
            "ds": "ml.ds(start, size)", "dslice": "ml.ds(start, size)", "cdiv": "ml.cdiv(a, b)",
            "copy_gmem_to_smem": "ml.copy(src, dst) (GMEM to SMEM, awaited for you)",
            "copy_smem_to_gmem": "ml.copy(src, dst) (SMEM to GMEM)", "wgmma": "ml.dot(a_s, b_s, acc)",
            "dot": "ml.dot(a_s, b_s, acc)", "load": "ref[...] or ml.load(ref, mask=..., other=...)",
            "store": "ref[...] = value or ml.store(ref, value, mask=...)", "arange": "ml.arange(n)",
            "zeros": "ml.zeros(shape, dtype)", "full": "ml.full(shape, value, dtype)",
            "atomic_add": "ml.atomic_add(ref, value)", "where": "ml.where(cond, a, b)",
            "multiple_of": "ml.multiple_of(x, n)", "barrier_wait": "nothing: mgpu_dsl places waits itself",
            "barrier_arrive": "nothing: mgpu_dsl places barriers itself", "commit_smem": "nothing: mgpu_dsl fences"
            " itself", "wait_smem_to_gmem": "nothing: mgpu_dsl waits for stores itself",
            "SMEM": "ml.smem(shape, dtype) in the kernel body", "GMEM": "nothing: the kernel's parameters are GMEM refs",
            "run_scoped": "ml.smem(shape, dtype) in the kernel body (scratch lives as long as its uses)",
            "emit_pipeline": "a pipelined loop: for k in ml.range(n, stages=s): ml.copy(x.at[...], buf); ...",
            "emit_pipeline_warp_specialized": "for k in ml.range(n, stages=s, warp_specialize=True): ...",
            "when": "a Python if on a scalar: if i == 0: ...", "loop": "a for loop: for i in range(n): ...",
            "fori_loop": "a for loop: for i in range(n): ...", "nd_loop": "nested for loops",
            "wgmma_wait": "nothing: mgpu_dsl waits for dots itself",
            "wgmma_accumulator_load": "nothing: ml.dot returns its accumulator in registers",
            "set_max_registers": "nothing: warp specialisation sets the registers itself",
            "layout_cast": "nothing: the compiler chooses register layouts",
            "broadcasted_iota": "ml.arange(n)[:, None] or ml.arange(n)[None, :], broadcast as needed",
            "iota": "ml.arange(n)", "debug_print": "print(...) (also in interpret mode)",
            "Barrier": "nothing: mgpu_dsl creates and waits on barriers itself",
            "kernel": "@mg.mgpu_kernel(out_shape=..., grid=...)", "pallas_call": "@mg.mgpu_kernel(out_shape=..., grid=...)",
            "BlockSpec": "windows in the kernel body: x.at[ml.ds(i * bm, bm), :] with i = ml.program_id(0)",
            "reciprocal": "1.0 / x", "multicast_ref": "ml.copy(src, buf, multicast=axis) in a warp-specialised loop",
            "async_prefetch": "ml.copy into SMEM (loads are asynchronous; a pipelined loop prefetches)",
            "commit_smem_to_gmem_group": "nothing: mgpu_dsl commits and fences stores itself",
            "dynamic_scheduling_loop": "a persistent loop: for t in ml.range(ml.program_id(0), n,"
                                       " ml.num_programs(0), stages=s)",
            "planar_snake": "ml.grouped_ids(pid, num_m, num_n, group=8)",
            "semaphore_signal": "no semaphores: ml.cluster_sync() within a cluster, or a second kernel",
            "semaphore_wait": "no semaphores: ml.cluster_sync() within a cluster, or a second kernel",
            "get_global": "an extra output, or ml.smem for scratch"}
_FOREIGN_PACKAGES = ("jax.experimental.pallas", "jax._src.pallas", "jax._src.state.indexing", "jax._src.indexing",
                     "triton")
# JAX's control flow called in a kernel -> the Python statement that is the kernel's control flow.
# jnp/np functions called on refs or register values -> what a kernel writes (others: ml.<name>).
_DOT = ("use ml.dot(a_s, b_s, acc): it takes SMEM buffers (and A from registers) and runs on the"
        " tensor cores")
_TAKE = ("index the GMEM ref with a tensor of indices: t[ids, :] gathers rows, t[:, ids] columns"
         " (as jnp indexes; `ml.atomic_add(out.at[ids, :], rows)` scatters)")
_ASTYPE = "convert with x.astype(dtype) (or ml.cast(x, dtype)); values in a kernel are arrays already"
_SHIFT = ("read the neighbours from memory at shifted windows, masked at the edges: with j = s - 1 + ml.arange(n),"
          " x.at[ml.ds(s - 1, n)].load(mask=(j >= 0) & (j < x.shape[0]), other=0.0) is the window at s shifted by"
          " one, 0 outside x (jnp.pad's zeros); for jnp.roll's wrap-around, gather at wrapped indices,"
          " x[(s + ml.arange(n) - 1) % x.shape[0]]")
_TAPS = ("sum the taps over shifted windows: for k in ml.static_range(K): acc = acc + w[k] * x.at[ml.ds(s + k - K // 2,"
         " n)].load(mask=(s + k - K // 2 + ml.arange(n) >= 0) & (s + k - K // 2 + ml.arange(n) < x.shape[0]),"
         " other=0.0) (jnp.convolve's mode='same' takes the taps reversed, w[K - 1 - k])")
_NONZERO = ("pass a static size=, jnp.nonzero(x, size=n, fill_value=-1) (the first n kept positions, fill_value"
            " past the count): without it the result's length depends on the data; or keep the shape, a mask,"
            " ml.where(x != 0, ...)")
# jnp.where(c) of one argument: jnp.nonzero(c), whose length depends on the data
WHERE_ONE = ("jnp.where(c) of one argument is jnp.nonzero(c), the indices where c holds: their count depends on the"
             " data, and a kernel's tensors have static shapes. Select with three arguments, ml.where(c, x, y); count"
             " with ml.sum(c); or give each kept element its position, ml.cumsum(c, dtype=jnp.int32) - 1, and"
             " scatter it there (a masked store or an atomic scatter)")
_LINALG = ("jnp.linalg.inv, solve and det take a float (n, n) register matrix (one of n not a multiple of 16 is"
           " solved padded to one that is, with ones on the padding's diagonal), or a stack (B, n, n) of at most 16"
           " of them; solve's b is (n,) or (n, m), or (B, n, m) beside a stack (a stack's (B, n) b: write"
           " b[..., None] into a (B, n, 1) b, or solve each matrix in a loop)")
_DECOMPOSE = ("kernels factor a register matrix by elimination only (jnp.linalg.inv, solve, det, slogdet, cholesky,"
              " jax.scipy.linalg.solve_triangular, cho_factor, cho_solve), not by orthogonal or spectral"
              " decompositions: a full-rank least squares is jnp.linalg.solve(a.T @ a, a.T @ b), a square pinv"
              " jnp.linalg.inv(a), a QR's R jnp.linalg.cholesky(a.T @ a).T; eigenvalues by power iteration in a loop")
ARRAY_CALLS = {"roll": _SHIFT, "pad": _SHIFT + PAD_MODES, "convolve": _TAPS, "correlate": _TAPS,
               "histogram": "no histogram: ml.atomic_add(counts.at[bins], 1) into a zeroed output (one updated only"
                            " by atomics starts at 0), bins computed from the values",
               "map_coordinates": "jax.scipy.ndimage.map_coordinates computes in a kernel as jax does for order=0 or"
                                  " 1 and mode 'constant', 'nearest', 'wrap', 'mirror' or 'reflect' (jax's own), of"
                                  " a 1- to 3-D register tensor (g[...]) at a list of float coordinate tensors of"
                                  " one shape and its dtype, cval a number",
               "dot": _DOT, "matmul": _DOT, "einsum": _DOT, "dot_general": _DOT, "take": _TAKE, "take_along_axis": _ALONG,
               "bitcast_convert_type": "use ml.bitcast(x, dtype): the same bits as another dtype, as lax's (of another width too)",
               "convert_element_type": _ASTYPE, "asarray": _ASTYPE,
               "debug_print": "write print(...): print(f\"x={x}\") or print(\"x\", x) prints register values in interpret"
                              " mode and on the GPU (jax.debug.print's \"{}\" fields are an f-string's here)",
               "rint": "use ml.round(x) (to the nearest integer, ties to even, as jnp.rint)",
               "bincount": "ml.bincount(ids, weights, length=n) counts a register vector of ids into n bins, as"
                           " jnp.bincount with a static length; or ml.atomic_add(counts.at[ids], ml.full(ids.shape, 1,"
                           " jnp.int32)) into a zeroed output (one updated only by atomics starts at 0)",
               "nonzero": _NONZERO, "argwhere": _NONZERO, "flatnonzero": _NONZERO,
               **dict.fromkeys(("inv", "solve", "det"), _LINALG),
               **dict.fromkeys(("pinv", "lstsq", "qr", "svd", "eigh", "eig", "eigvalsh", "matrix_rank"), _DECOMPOSE)}

# jnp's and lax's names of Python's operators -> the operator.
_OPERATORS = {**dict.fromkeys(("right_shift", "bitwise_right_shift", "shift_right_arithmetic"), ">>"),
              **dict.fromkeys(("left_shift", "bitwise_left_shift", "shift_left"), "<<"),
              "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^",
              **dict.fromkeys(("bitwise_not", "invert", "bitwise_invert"), "~"),
              **dict.fromkeys(("mod", "remainder"), "%")}


def array_call_hint(name, pos, kw, is_float=False, dtype=None) -> str | None:
  """The hint for jnp.right_shift(a, b), lax.rem(a, b), jnp.stack([a, b], -1), ... on register values:
  the operator or ml.* form to write (`pos`, `kw`: the call's arguments as written; `is_float`:
  whether its first operand is floating point; `dtype`: its DType, where known); None where
  ARRAY_CALLS' fixed hints apply."""
  if (same := ml_same_hint(name, pos, kw)) is not None:      # jnp.stack([a, b], -1): ml.stack, the same call
    return same
  integer = dtype if dtype is not None and dtype.is_int else None
  if integer is not None and integer.bits == 32 and integer.is_signed:
    integer = None             # int32 (or unknown): the forms below name int32's recipe
  if name == "nan_to_num" and (len(pos) > 1 or kw):      # its nan=, posinf=, neginf= kept
    return nan_to_num_hint(pos, kw)
  if name in _OPERATORS and len(pos) == 2 - (_OPERATORS[name] == "~") and not kw:
    op = _OPERATORS[name]
    if op == "~":
      return f"write the operator: ~{_operand(pos[0])}"
    a, b = map(_operand, pos)
    if op in ("<<", ">>") and integer is not None and integer.bits == 8:
      return (f"shift in 32 bits (there are no 8-bit shifts): ({a}.astype(jnp.int32) {op} {b}).astype(jnp.{integer})"
              + (f"; a logical shift is {_logical_shift(pos[0], b, integer)}" if op == ">>" and integer.is_signed
                 and name != "shift_right_arithmetic" else ""))
    logical = (_logical_shift(pos[0], b, integer) if integer is not None else
               f"ml.bitcast(ml.bitcast({pos[0]}, jnp.uint32) >> {b}, jnp.int32)")
    note = ("" if op != ">>" or name == "shift_right_arithmetic" or integer is not None and not integer.is_signed else
            f" (arithmetic on signed types; a logical shift is {logical})" if integer is not None else
            f" (arithmetic on signed types; for a logical shift of an int32, {logical})")
    note = note or (" (flooring, as Python and jnp)" if op == "%" else "")
    return f"write the operator: {a} {op} {b}{note}"
  if name in ("population_count", "bitwise_count", "clz") and len(pos) == 1:
    return bit_count_hint(name, pos[0], dtype if dtype is not None and dtype.is_int else None)
  if name == "shift_right_logical" and len(pos) == 2:
    if integer is not None:
      return (f"write {_logical_shift(pos[0], _operand(pos[1]), integer)} (>> shifts unsigned types logically"
              f" and signed ones arithmetically)")
    return (f">> shifts a uint32 logically and an int32 arithmetically: ml.bitcast(ml.bitcast({pos[0]}, jnp.uint32)"
            f" >> {_operand(pos[1])}, jnp.int32) for an int32 {pos[0]} ({_operand(pos[0])} >> {_operand(pos[1])}"
            f" of a uint32 one)")
  if name in ("fmod", "rem") and len(pos) == 2:
    return f"write ml.fmod({pos[0].strip()}, {pos[1].strip()}) (C's remainder, the sign of {_operand(pos[0])}; % takes {_operand(pos[1])}'s)"
  if name == "div" and len(pos) == 2:
    a, b = map(_operand, pos)
    if is_float:
      return f"write {a} / {b}"
    return (f"lax.div rounds toward zero, // floors: q = {a} // {b}; ml.where(({a} % {b} != 0) &"
            f" {_signs_differ(a, b)}, q + 1, q)")
  if name == "stack" and pos:
    try:
      items = ast.parse(pos[0].strip(), mode="eval").body
    except SyntaxError:
      items = None
    axis = kw.get("axis", pos[1] if len(pos) > 1 else "0").strip()
    if isinstance(items, (ast.List, ast.Tuple)) and axis == "-1":
      return join_hint("stack", [ast.get_source_segment(pos[0].strip(), e) for e in items.elts])
    if isinstance(items, (ast.List, ast.Tuple)) and axis.isdigit() and items.elts:    # a new axis k: [:, ..., None]
      index = ", ".join([":"] * int(axis) + ["None"])
      parts = ", ".join(f"{_operand(ast.get_source_segment(pos[0].strip(), e))}[{index}]" for e in items.elts)
      return f"no ml.stack: join along a new axis {axis}, ml.concatenate([{parts}], axis={axis})"
    return ("no ml.stack: join along a new axis, ml.concatenate([a[None], b[None]], axis=0) (a[:, None] for axis=1,"
            " a[..., None] for the last)")
  if name in _MATH:
    return _math_hint(name, pos)
  return None


_COMPARE = {"equal": "==", "not_equal": "!=", "greater": ">", "greater_equal": ">=", "less": "<", "less_equal": "<="}
# jnp's, lax's and jax.nn's functions that are an operator, a method or another ml.* call in a
# kernel -> that form ({0}, {1}, ...: the call's positional arguments as written)
_FORMS = {
    "select": "ml.where({0}, {1}, {2})", "select_n": "ml.where({0}, {2}, {1})", "clamp": "ml.clip({1}, {0}, {2})", "logistic": "ml.sigmoid({0})",
    "integer_pow": "{0} ** {1}", "add": "{0} + {1}", "sub": "{0} - {1}", "subtract": "{0} - {1}",
    "mul": "{0} * {1}", "multiply": "{0} * {1}", "neg": "-{0}", "negative": "-{0}", "reciprocal": "1 / {0}",
    **ACTIVATIONS,
    "zeros_like": "ml.zeros({0}.shape, {0}.dtype)", "ones_like": "ml.full({0}.shape, 1, {0}.dtype)",
    "full_like": "ml.full({0}.shape, {1}, {0}.dtype)", "astype": "{0}.astype({1})",
    "logical_and": "{0} & {1}", "logical_or": "{0} | {1}", "logical_xor": "{0} ^ {1}", "logical_not": "~{0}",
    "reduce_max": "ml.max({0}, axis={1})", "reduce_min": "ml.min({0}, axis={1})",
    "reduce_sum": "ml.sum({0}, axis={1})", "broadcast_in_dim": "ml.broadcast_to({0}, {1})",
    **{n: f"{{0}} {op} {{1}}" for n, op in _COMPARE.items()},
}
# lax's max and min are elementwise (jnp's reduce): ml.maximum and ml.minimum
_LAX_FORMS = {"max": "ml.maximum({0}, {1})", "min": "ml.minimum({0}, {1})"}
# the parameter names of _FORMS's functions that a call may pass by keyword (lax.reduce_max(v, axes=(1,)):
# its form's {1}), in their positional order
_PARAMS = {**{n: ("operand", "axes") for n in ("reduce_max", "reduce_min", "reduce_sum")},
           "broadcast_in_dim": ("operand", "shape", "broadcast_dimensions"), "select": ("pred", "on_true", "on_false"),
           "clamp": ("min", "x", "max"), "integer_pow": ("x", "y"), "full_like": ("a", "fill_value"),
           "astype": ("x", "dtype")}


def _computed(t: str) -> bool:
  """Whether an argument as written computes something (a call, an operator), which a form that
  uses it more than once would compute again each time."""
  try:
    e = ast.parse(t.strip(), mode="eval").body
  except SyntaxError:
    return True
  return not isinstance(e, (ast.Name, ast.Attribute, ast.Subscript, ast.Constant))


def form_hint(name, pos, kw, *, lax=False, taken=frozenset()) -> str | None:
  """The hint for lax.select(c, a, b), jax.nn.relu(x), jnp.zeros_like(x), lax.max(a, b), ... on
  register values: what a kernel writes instead, with the call's own arguments (`pos`, `kw`: as
  written; `lax`: whether the function is jax.lax's); None where no such form is known. An
  argument that computes something (jax.nn.silu(ml.dot(a_s, b_s))) and that the form uses more
  than once is bound to a name first, one not in `taken` (the names of the kernel's file), so that
  the hint computes it once."""
  form = _LAX_FORMS.get(name) if lax else None
  form = form or _FORMS.get(name)
  if form is None:
    return None
  if name == "gelu":
    form = gelu_form(pos, kw)
  pos = activation_args(name, pos, kw)
  for p in _PARAMS.get(name, ())[len(pos):]:      # keywords after the positional arguments, in order
    if p not in kw:
      break
    pos = [*pos, kw[p]]
  n = len(set(re.findall(r"\{(\d)\}", form)))
  names = {"clamp": ["lo", "x", "hi"], "select": ["c", "x", "y"], "select_n": ["c", "x", "y"]}.get(name, ["x", "y"])
  if name == "broadcast_in_dim":      # (operand, shape, broadcast_dimensions): the dimensions are x's axes
    pos = pos[:2]
  args = [a.strip() for a in pos] if len(pos) == n else names[:n]
  binds = []
  if len(pos) == n:
    uses = collections.Counter(re.findall(r"\{(\d)\}", form))
    free = (c for c in ("y", "h", "z", "v", "t", "u", "val", "act_in") if c not in taken)
    for i, a in enumerate(args):
      if uses[str(i)] > 1 and _computed(a):
        v = next(free, "act_in")
        binds.append(f"{v} = {a}")
        args[i] = v

  def arg(m):     # alone between a call's parentheses and commas, as written; else as an operand
    before, after = form[max(m.start() - 2, 0):m.start()], form[m.end():m.end() + 1]
    alone = (before.endswith(("(", "=")) or before == ", ") and after in (")", ",")
    a = args[int(m.group(1))]
    return a if alone else _operand(a)
  how = re.sub(r"\{(\d)\}", arg, form)
  if binds:        # computed once, then used by name
    how = f"{'; '.join(binds)} and then {how}"
  return f"write {how}" + (" (lax.clamp takes the bounds around x; ml.clip(x, min, max) after it)"
                           if name == "clamp" else " (a lower-rank operand first gets its size-1 axes where the"
                           " broadcast dimensions leave them: v[:, None] or v[None, :])"
                           if name == "broadcast_in_dim" else "")


NOT_YET.update({n: _math_hint(n, None) for n in _MATH})
NOT_YET.update({n: f"no ml.{n}: write the operator, " + ("~x" if op == "~" else f"x {op} n" if op in "<<>>" else
                                                         f"x {op} y")
                for n, op in _OPERATORS.items() if n not in NOT_YET})
NOT_YET.update({n: f"no ml.{n}: write the operator, x % y (flooring: the divisor's sign, as jnp.remainder and"
                   f" torch.remainder, exact on floats too)" for n in ("mod", "remainder")})
NOT_YET["rem"] = "no ml.rem: ml.fmod(x, y) (C's remainder, the sign of x, as lax.rem; exact on floats too)"
NOT_YET.update({n: h for n, h in ATEN_NAMES.items() if n not in NOT_YET})
_BIT_NAMES = ("popc", "popcount", "population_count", "bitwise_count", "clz", "count_leading_zeros")
NOT_YET.update({n: lax_count_hint(n, None) for n in _BIT_NAMES})
NOT_YET["shift_right_logical"] = ("no ml.shift_right_logical: >> shifts a uint32 logically and an int32"
                                  " arithmetically: ml.bitcast(ml.bitcast(x, jnp.uint32) >> n, jnp.int32)")

# jax.scipy.special's (and lax's) functions that XLA computes with series and loops of its own: no kernel form
# (probe 56f; the hint named an @ml.inline helper the user never wrote)
_SPECIAL_FORMS = ("erf, erfc, erfinv, ndtr, ndtri, log_ndtr, expit, logit, logsumexp, xlogy, xlog1py, entr,"
                  " rel_entr, kl_div, gammaln, digamma, gamma, gammasgn, loggamma, factorial, beta, betaln, comb,"
                  " poch, multigammaln, boxcox, boxcox1p, i0, i0e, i1, i1e")
NOT_YET.update({n: f"jax.scipy.special's {n} has no kernel form (XLA computes it with series of its own); the"
                   f" jax.scipy.special functions a kernel computes are {_SPECIAL_FORMS}: compute {n} outside the"
                   " kernel and pass its values in, or write its series in an @ml.inline helper"
                for n in ("zeta", "polygamma", "erfcx", "dawsn", "exp1", "expi", "expn", "spence", "gammainc",
                          "gammaincc", "betainc", "owens_t", "hyp1f1", "hyp2f1", "bessel_jn", "fresnel", "sici",
                          "wofz", "sph_harm_y", "igamma", "igammac", "random_gamma_grad")
                if n not in NOT_YET})

# jnp and lax functions that build an array from static arguments while tracing -> the ml.* call
STATIC_ARRAYS = {
    "zeros": "ml.zeros(shape, dtype) (float32 where the dtype is left out, as jnp.zeros)",
    "ones": "ml.full(shape, 1, dtype)", "full": "ml.full(shape, value, dtype)",
    "empty": "ml.zeros(shape, dtype) (a kernel's values are never uninitialised)",
    "arange": "ml.arange(n) (int32; start + ml.arange(n) for another start)",
    **dict.fromkeys(("iota", "broadcasted_iota"),
                    "ml.arange(n) (int32), with its axis placed by ml.arange(n)[:, None] (along the rows) or"
                    " ml.arange(n)[None, :] (along the columns) and broadcast against the tile it meets, or"
                    " ml.broadcast_to(ml.arange(n)[None, :], (m, n))"),
}



def foreign_dsl(fn, text: str = "") -> str | None:
  """'pl.ds' -> the hint naming mgpu_dsl's spelling, for a Pallas or Triton function (`text`: the
  call's function as written, for objects without a __name__)."""
  mod = getattr(fn, "__module__", None) or ""
  if not any(mod == p or mod.startswith(p + ".") for p in _FOREIGN_PACKAGES):
    return None                       # (a user's own triton_helpers module is not Triton)
  name = getattr(fn, "__name__", "") or text.rsplit(".", 1)[-1]
  if name in _FOREIGN:
    return f"write {_FOREIGN[name]}"
  from . import language
  if name and hasattr(language, name):
    return f"write ml.{name}"
  if name in NOT_YET:               # tl.flip, tl.umulhi: as a missing ml.flip, ml.umulhi
    return NOT_YET[name]
  return (f"mgpu_dsl has no {name or 'such function'}: docs/language.md lists the ml.* functions (pipelines"
          f" are ml.range(n, stages=s), scratch is ml.smem(shape, dtype), barriers and waits are placed for you)")


_NO_FORM = {     # library functions with no form in a kernel whose computation the hint spells out (probe 68a)
    "dot_product_attention": (
        "write the attention out (a kernel is where it is written): of (T, N, H) tiles in registers, s ="
        " jnp.einsum('tnh,snh->nts', q, k, preferred_element_type=jnp.float32) * scale (scale 1 / math.sqrt(H) by"
        " default; is_causal: s = jnp.where(jnp.tril(jnp.ones((T, S), bool)), s, -1e30)), p = jax.nn.softmax(s,"
        " axis=-1).astype(v.dtype), o = jnp.einsum('nts,snh->tnh', p, v, preferred_element_type=jnp.float32) (jax's"
        " own formula); for keys longer than a tile, an online softmax over key blocks (docs/language.md,"
        " \"Attention: an online softmax over a pipelined loop\"; examples/attention.py)"),
}


def no_form(called: str) -> str:
  """The hint of a library function (jnp, lax, NumPy) with no form in a kernel and no hint of its own: not the
  generic one for the kernel's own functions, which told a user of `jnp.lexsort` to decorate a helper (probe 56d);
  `_NO_FORM`'s where the computation is worth spelling out."""
  if (own := _NO_FORM.get(called.rsplit(".", 1)[-1])) is not None:
    return f"{called} has no form in a kernel: {own}"
  return (f"{called} has no form in a kernel: write what it computes with ml.* functions (jnp's namesakes of"
          f" them compute the same; a plain function of yours that holds them is traced as a helper)")
