"""ml.dot's operand checks that read the user's text (a register A, the operands' majors) and the words of its
diagnostics: hints for operands in registers, 8-bit and TF32 operands, mixed dtypes, tile widths (frontend/ops/mma.py
raises them)."""
from __future__ import annotations

import re

from .. import errors as E
from .. import hw
from ..dtypes import DType
from ..types import RefType, TensorType, dtype_name, resolve
from .base import is_value
from .memory import View
from .elementwise_checks import method_on
from ..loc import expr_of


def _read(x, cx=None) -> tuple[str, bool]:
  """How a hint reads operand `x` into registers, and whether that is its transpose (`w_s.T`): a register
  value without a name of its own as the user wrote it at this call (`q.at[b][...]`), not a placeholder."""
  name = x.name if is_value(x) and (x.name or "").replace(".T", "").replace("_", "a").isalnum() else None
  if name is None and cx is not None and is_value(x) and isinstance(x.type, TensorType) and cx.named(x, ""):
    return cx.named(x, ""), False
  if name is None:
    return ("w" if x is None else "v"), False
  if isinstance(x.type, TensorType):
    return name, False
  return (f"{name[:-2]}[...]", True) if name.endswith(".T") else (f"{name}[...]", False)


def _vector_hint(what, x, other, cx=None) -> str:
  """A 1-D operand: a matrix-vector product (decode GEMV), which runs as a multiply and a
  reduction in registers (or, for a vector b, on the tensor cores with the vector as 8 rows)."""
  v, _ = _read(x, cx)
  w, flipped = _read(other, cx)
  shape = tuple(other.type.shape) if is_value(other) and hasattr(other.type, "shape") else ()
  if len(shape) != 2 or shape[1 if what == "b" else 0] != x.type.shape[0]:    # (shape: as ml.dot reads it)
    return "pass an (m, k) tile" if what == "a" else "index the leading dimensions away: buf.at[stage]"
  vf, wf = _as(v, "float32"), _as(w, "float32")
  if (what == "b") != flipped:       # the vector runs along the matrix's rows (as stored)
    product, axis = f"{wf} * {vf}[None, :]", 1
  else:
    product, axis = f"{vf}[:, None] * {wf}", 0
  fix = (f"ml.dot multiplies 2-D tiles: a matrix-vector product (a decode GEMV) is a multiply and a sum in"
         f" registers, ml.sum({product}, axis={axis})")
  if what == "b":
    a = other.name if is_value(other) and (other.name or "").replace(".T", "").isidentifier() else "a_s"
    buf = "row_s"      # (not v_s, a placeholder that was attention's V buffer)
    fix += ("; or, on the tensor cores, copy the vector as a row (x.reshape(1, k) outside the kernel) into an"
            f" (8, k) buffer, {buf} (TMA reads zeros past the last row), and take column 0 of ml.dot({a}, {buf}.T)")
  return fix


def _register_a(cx, a, d, b=None):
  """A register A operand: a 2-D 16-bit tile (the WGMMA layout a converted accumulator has), or an
  8-bit one (int8, float8: activations quantised in the kernel), K-major as 8-bit operands are."""
  if len(a.type.shape) != 2:
    raise E.MmaOperandError(f"ml.dot operand a must be 2-D, got shape {a.type.shape}", cx.loc,
                            hint=_vector_hint("a", a, b, cx) if len(a.type.shape) == 1 else "pass an (m, k) tile")
  if isinstance(d, DType) and d not in hw.MMA_REG_A_DTYPES and d.bits != 8:   # (uint8: the operand dtype checks)
    got = f"got {cx.named(a, '') or 'a register tensor'} ({d})"
    bd = resolve(b.type.dtype) if is_value(b) else None
    if isinstance(bd, DType) and bd.bits == 8 and bd in hw.MMA_REG_A_DTYPES:
      raise E.UnsupportedDtypeError(
          f"ml.dot takes operand a from registers in bfloat16, float16 or b's 8-bit dtype ({bd}) only, {got}",
          cx.loc, hint=_to_eight_bit_hint(cx, a, bd))
    names = " or ".join(sorted(str(x) for x in hw.MMA_REG_A_DTYPES if x.bits == 16))
    hint = (_tf32_hint(a, b) if _is_f32(b) else
            f"convert it to b's dtype: ml.dot({method_on(_unconverted(cx.named(a, 'a')))}.astype(jnp.{_b_dtype(b)}), ...)")
    raise E.UnsupportedDtypeError(f"ml.dot takes operand a from registers in {names} only, {got}", cx.loc, hint=hint)


def _to_eight_bit_hint(cx, a, bd) -> str:
  """A wider register A beside 8-bit b: converted to float8 (NaN or inf past its range, as jnp), or quantised to
  int8 with a scale per row that the product is multiplied by after."""
  v = method_on(_unconverted(cx.named(a, "a")))
  if bd.is_float:
    return (f"convert it to {bd}: ml.dot({v}.astype(jnp.{bd}), ...) (past the type's largest value the conversion"
            f" gives NaN or inf, as jnp's: scale values that may exceed it, and divide the product by the scale after)")
  xf = v if resolve(a.type.dtype) == DType.f32 else f"{v}.astype(jnp.float32)"
  return (f"quantise it to int8 with a scale per row and multiply the int32 product by the scale after: xf = {xf};"
          f" s = ml.max(ml.abs(xf), axis=1, keepdims=True) / 127.0; ml.dot(ml.round(xf / s).astype(jnp.int8),"
          f" ...).astype(jnp.float32) * s")


def _padded_b(b, rows) -> str:
  """The b tile padded to `rows` of n, as stored: columns of a (k, n) b, rows of an (n, k) one passed as bt.T."""
  if b.type.transposed:
    bn = (b.name or "").removesuffix(".T")
    return f"a {bn if bn.isidentifier() else 'b'} tile of {rows} rows (b is stored (n, k), passed transposed)"
  return f"a b tile of {rows} columns"


def _eight_bit_a_hint(cx, a, b, d, tail=True) -> str:
  """An 8-bit register A: stored into an SMEM buffer named after it (`x` -> `x_s`), which the dot reads."""
  name = a.name if (a.name or "").isidentifier() else None
  buf = f"{name}_s" if name else "a8_s"     # (a_s is often taken: the 16-bit tile the 8-bit one is made from)
  bn = b.name if is_value(b) and (b.name or "").replace(".T", "").isidentifier() else cx.named(b, "") or "b"
  fix = f"{buf} = ml.smem({a.type.shape}, jnp.{d}); {buf}[...] = {name or cx.named(a, '') or 'a'}; ml.dot({buf}, {bn})"
  if not tail:
    return fix
  return f"store the tile in an SMEM buffer and pass the buffer: {fix} (a tile read from SMEM: pass that buffer itself)"


def _is_f32(b) -> bool:
  return is_value(b) and resolve(b.type.dtype) == DType.f32


def _tf32_hint(a, b) -> str:
  """A float32 register A with a float32 b: TF32 reads both operands from SMEM, K-major. A b stored
  (k, n), as attention's V tile is, is not made K-major by writing `.T` on it (a square tile would
  then multiply by its transpose, silently): it is transposed once into an (n, k) buffer."""
  name = a.name if (a.name or "").isidentifier() else "a"
  bn = (b.name or "b_s").removesuffix(".T")
  if isinstance(b.type, RefType) and b.type.transposed:
    major = f"b, {b.name}, is K-major already, ml.dot({name}_s, {b.name})"
  elif isinstance(b.type, RefType) and bn.isidentifier() and len(b.type.shape) == 2 and b.type.shape[1] % hw.MMA_M:
    k, n = b.type.shape      # (registers fill a tiled buffer 64 rows at a time: n rows must come by TMA)
    major = (f"b must be K-major too: {bn} is stored (k, n), so load its tile as (n, k) = ({n}, {k}) from the"
             f" transposed array (x.T, or jnp.swapaxes(x, -1, -2), outside the kernel) into a buffer bt_s and pass"
             f" ml.dot({name}_s, bt_s.T, ...) (passing {bn}.T instead would multiply by {bn}'s transpose)")
  elif isinstance(b.type, RefType) and bn.isidentifier() and len(b.type.shape) == 2:
    k, n = b.type.shape
    major = (f"b must be K-major too: {bn} is stored (k, n), so transpose it once, {bn}_nk = ml.smem(({n}, {k}),"
             f" jnp.float32); {bn}_nk[...] = {bn}.T[...], and pass ml.dot({name}_s, {bn}_nk.T, ...) (passing {bn}.T"
             f" instead would multiply by {bn}'s transpose)")
  else:
    major = f"b must be K-major too (stored (n, k) and passed transposed, {bn}.T)"
  return (f"a float32 (TF32) dot reads both operands from SMEM: {name}_s = ml.smem({a.type.shape}, jnp.float32);"
          f" {name}_s[...] = {name}; ml.dot({name}_s, ...); {major}; or convert both to 16 bits"
          f" (ml.dot({name}.astype(jnp.bfloat16), ...) with b stored as bfloat16)")


def _unconverted(text: str) -> str:
  """`a[...].astype(jnp.float32)` -> `a[...]`: a hint converts the value once, not twice."""
  return re.sub(r"\.astype\([^()]*\)$", "", text) or text


def _b_dtype(b) -> DType:
  """The 16-bit dtype a register A operand should take: b's where b is 16-bit, else float16."""
  d = resolve(b.type.dtype) if is_value(b) else None
  return d if d in (DType.f16, DType.bf16) else DType.f16


def _k_major_a_hint(a) -> str:
  """A stored (k, m), as its array is: transposed in the caller, or once into a (m, k) buffer."""
  base = a.name[:-2] if (a.name or "").endswith(".T") else None
  if base is None:
    return "store a's tile as (m, k) and pass the buffer itself, without .T"
  m, k = a.type.shape
  return (f"pass a buffer stored (m, k): transpose the array outside the kernel (x.T in the caller, which XLA"
          f" fuses), or transpose the tile once in the kernel, a_mk = ml.smem(({m}, {k})); a_mk[...] = {a.name}[...]"
          f" (through registers), and pass ml.dot(a_mk, ...)")


def _k_major_b_hint(a, b, with_acc=True, an=None) -> str:
  """B stored (k, n), as a weight (in, out) is: loaded as (n, k) from the transposed array, or
  transposed once in the kernel into an (n, k) buffer passed as .T (`acc` only where the call has one;
  `an`: a register A as the call wrote it, `p.astype(F8)`)."""
  acc = ", acc" if with_acc else ""
  an = an or (a.name if is_value(a) and (a.name or "").replace(".T", "").isidentifier() else "a_s")
  fix = f"load B's tile as (n, k), e.g. from a (n, k) array bt, and pass bt_s.T: ml.dot({an}, bt_s.T{acc})"
  if not (b.name or "").isidentifier():
    return fix
  k, n = b.type.shape
  if n % hw.MMA_M:         # registers fill a tiled buffer 64 rows at a time: fewer rows come by TMA only
    return fix
  return (f"{fix}; or transpose the tile once in the kernel, b_nk = ml.smem(({n}, {k})); b_nk[...] = {b.name}.T[...]"
          f" (through registers), and pass ml.dot({an}, b_nk.T{acc})")


def _major(cx, a, b, d, with_acc=True):
  """8-bit (and other non-16-bit) operands must be K-major: A as stored, B stored (n, k) and
  passed transposed."""
  if not isinstance(d, DType) or d in hw.MMA_MN_MAJOR_DTYPES:
    return
  if isinstance(a.type, RefType) and a.type.transposed:
    raise E.MmaOperandError(
        f"ml.dot reads {d} operands K-major only, so a must be stored (m, k); {a.name} is a transposed view",
        cx.loc, hint=_k_major_a_hint(a))
  if not b.type.transposed:
    raise E.MmaOperandError(
        f"ml.dot reads {d} operands K-major only, so b must be stored (n, k) and passed transposed;"
        f" {b.name} is stored (k, n)", cx.loc,
        hint=_k_major_b_hint(a, b, with_acc, cx.named(a, "") if isinstance(a.type, TensorType) else None))


def _root(cx, ref):
  """The buffer a view of an SMEM ref (b_s.T, a window) reads."""
  d = cx.b.defining(ref)
  return _root(cx, d.ref) if isinstance(d, View) else ref


def _inner_hint(a, b, with_acc):
  """The hint for ml.dot's inner dimensions differing: b stored (n, k) wants its view b_s.T; a
  view b_s.T of a (k, n) buffer wants the buffer itself (K-major 8-bit and float32: stored (n, k))."""
  (_, k), (k2, n) = a.type.shape, b.type.shape
  an, acc = a.name or "a", ", acc" if with_acc else ""
  if n != k:
    return "a is (m, k) and b is (k, n)"
  d = resolve(b.type.dtype)
  k_major = isinstance(d, DType) and (d.bits == 8 or d == DType.f32)
  if not b.type.transposed:
    return (f"{b.name} {b.type.shape} is stored (n, k): pass its transposed view, ml.dot({an}, {b.name}.T{acc})"
            + (f" ({dtype_name(d)} operands are K-major: the layout the tensor cores read)" if k_major else
               " (it moves no data)"))
  base = b.name[:-2] if (b.name or "").endswith(".T") else "the buffer"
  if k_major:
    return (f"{b.name} views a buffer stored (k, n); {dtype_name(d)} operands are K-major: store B's tile as"
            f" (n, k), e.g. from a (n, k) array bt, and pass bt_s.T: ml.dot({an}, bt_s.T{acc})")
  return f"{b.name} views a buffer stored (k, n) = {(n, k2)}: pass {base} itself, ml.dot({an}, {base}{acc})"


def _mixed_hint(a, b, da, db, in_regs, with_acc, roots=None):
  """The hint for ml.dot of two dtypes (float16 x bfloat16): a TMA copy does not convert, so A
  goes through registers, converted to B's dtype (A from registers takes 16-bit tiles), or the
  caller converts an input before the call."""
  acc = ", acc" if with_acc else ""
  if da in (DType.f16, DType.bf16) and isinstance(db, DType) and db.bits == 8 and (b.name or "").replace(
      ".T", "").isidentifier():
    # W8A16: the 8-bit weights dequantised in the kernel, through a 16-bit buffer the tensor cores read
    bt = b.name.endswith(".T")
    base = b.name[:-2] if bt else b.name
    shape = tuple(reversed(b.type.shape)) if bt else tuple(b.type.shape)
    w = f"{base}16"
    return (f"dequantise {base} in the kernel through a {dtype_name(da)} buffer (a TMA copy does not convert):"
            f" {w} = ml.smem({shape}, jnp.{dtype_name(da)}); {w}[...] = {base}[...].astype(jnp.{dtype_name(da)})"
            f" (times its scales, in float32, as needed); ml.dot({a.name}, {w}{'.T' if bt else ''}{acc}); or"
            f" convert the array that fills {base} before the call (.astype(jnp.{dtype_name(da)}))")
  if db in (DType.f16, DType.bf16) and isinstance(da, DType) and (da.is_float or da.bits == 8):
    an = a.name if in_regs else f"{a.name}[...]"
    if in_regs or not a.type.transposed:
      fix = (f"convert A to {dtype_name(db)} in registers: ml.dot({_as(an, dtype_name(db))},"
             f" {b.name}{acc}) (the tensor cores read A from registers)")
      return fix if in_regs else (f"{fix}, or convert the array that fills {a.name} before the call"
                                  f" (.astype(jnp.{dtype_name(db)}), which XLA fuses into its producer)")
  if any(isinstance(x, DType) and x.is_int for x in (da, db)):
    return _unsupported_hint(da if da != DType.i8 else db)
  want, other = (db, a) if da not in (DType.f16, DType.bf16) else (da, b)
  buf = roots.get(id(other)) if roots else None
  if buf is not None and (buf.name or "").isidentifier():
    # (a buffer filled from registers, a state kept in SMEM for the next dot, takes the dtype there)
    w = dtype_name(want)
    return (f"give {buf.name} the dtype of the other operand: where registers fill it, allocate it as"
            f" ml.smem({tuple(buf.type.shape)}, jnp.{w}) and store the value converted, {buf.name}[...] ="
            f" v.astype(jnp.{w}); where a TMA copy fills it, convert the array before the call"
            f" (.astype(jnp.{w}), which XLA fuses into its producer): a TMA copy does not convert")
  return (f"convert the array that fills {other.name} before the call (.astype(jnp.{dtype_name(want)}), which"
          f" XLA fuses into its producer): a TMA copy does not convert, and both operands need one dtype")


def _fp8_pair_hint(a, b, in_regs) -> str:
  """e4m3 x e5m2: both as float16 (exact), converted before the call or in the kernel (A through
  registers, B through a float16 buffer: a TMA copy does not convert)."""
  an = a.name if in_regs else f"{a.name}[...]"
  bt = (b.name or "").endswith(".T")
  base = b.name[:-2] if bt else b.name
  shape = tuple(reversed(b.type.shape)) if bt else tuple(b.type.shape)
  return (f"convert both to float16 (exact for both float8 types, at half the float8 rate): before the call"
          f" (.astype(jnp.float16)), or in the kernel, b16 = ml.smem({shape}, jnp.float16); b16[...] ="
          f" {base}[...].astype(jnp.float16); ml.dot({_as(an, 'float16')}, b16{'.T' if bt else ''}, ...);"
          f" or convert the float8_e4m3fn input to float8_e5m2 (keeps its range, drops a mantissa bit);"
          f" float8_e5m2 to float8_e4m3fn gives NaN beyond 464")


def _unsupported_hint(d) -> str:
  """Operands the tensor cores do not take (uint8, int16, ...), or int8 with another integer type:
  converted before the call, since a TMA copy does not convert, to a type that holds every value."""
  if isinstance(d, DType) and d.is_int and d.bits <= 8:
    return (f"convert both inputs to jnp.float16 before the call (.astype(jnp.float16): every {d} value is"
            f" exact in float16, and a float32 accumulator sums the products exactly up to 2**24), then"
            f" round the result; .astype(jnp.int8) would wrap {d} values outside int8's range")
  return ("convert the inputs to jnp.bfloat16 or jnp.float16 before the call (.astype(jnp.bfloat16), which XLA"
          " fuses into its producer): a TMA copy does not convert")


def _acc_name(cx, acc) -> str:
  """The accumulator's name as the kernel wrote it at the call (`part`), or `acc` for an expression."""
  name = cx.named(acc, "acc")
  return name if name.isidentifier() else "acc"


def _narrow_n_hint(a, b, n, k) -> str:
  """n a multiple of 8 but not of 64, b stored (k, n): an (n, k) tile passed as its view `.T` takes any
  multiple of 8; TMA fills one from the array transposed outside the kernel (a register transpose
  into a tensor-core buffer needs 64-row tiles)."""
  an, bn = _read(a)[0].removesuffix("[...]"), _read(b)[0].removesuffix("[...]")
  nk = f"{bn.removesuffix('_s')}t_s" if bn.isidentifier() else "bt_s"
  return (f"store b's tile as (n, k) and pass it transposed: transpose the array outside the kernel (bt = b.T,"
          f" (n, k)), copy its ({n}, {k}) window into {nk} = ml.smem(({n}, {k})) and write"
          f" ml.dot({an}, {nk}.T): n may then be any multiple of {hw.MMA_N_STEP}")


def _wide_n_hint(cx, a, b, acc, n, n_step) -> str:
  """n past 256 (an MLA decode's p @ kv of 512 latent columns, probe 51k): b's columns as buffers of their own
  (a TMA copy moves at most 256 along a dimension too), one dot and one accumulator a piece, in the call's words."""
  q, r = divmod(n, hw.MMA_N_MAX)
  count = q + (r > 0)
  sizes = ([n // count] * count if n % count == 0 and (n // count) % n_step == 0 else
           [hw.MMA_N_MAX] * q + ([r] if r else []))
  head = f"split wider tiles into several dots of at most {hw.MMA_N_MAX} columns"
  if n % hw.MMA_N_STEP and len(b.type.shape) == 2:
    return _odd_wide_hint(cx, a, b, n)
  if any(w % n_step for w in sizes):
    return f"{head}, each a multiple of {n_step}"
  text = lambda x, d: cx.named(x, d) if is_value(x) else d        # noqa: E731
  lead = lambda t, d: (re.match(r"[A-Za-z_]\w*", t) or [d])[0]    # noqa: E731
  bn = lead(text(_root(cx, b) if isinstance(b.type, RefType) else b, "b"), "b")
  k, m = b.type.shape[0], a.type.shape[0]
  shape = (lambda w: (w, k)) if b.type.transposed else (lambda w: (k, w))
  pieces = [f"{bn}{i}" + (".T" if b.type.transposed else "") for i in range(len(sizes))]
  at = text(acc, "acc") if acc is not None else None
  an = lead(at, "acc") if at is not None else "c"
  accs = [re.sub(rf"\b{re.escape(an)}\b", f"{an}{i}", at) if at is not None else None for i in range(len(sizes))]
  dots = "; ".join(f"{an}{i} = ml.dot({text(a, 'a')}, {p}" + (f", {c})" if c else ")")
                   for i, (p, c) in enumerate(zip(pieces, accs)))
  made = ", ".join(f"{bn}{i} = ml.smem({shape(w)})" for i, w in enumerate(sizes))
  held = ""
  if acc is not None:
    dt = dtype_name(acc.type.dtype) if hasattr(acc.type, "dtype") else "float32"
    held = f" and one ({m}, w) accumulator a piece, {an}0 = ml.zeros(({m}, {sizes[0]}), jnp.{dt}), ...,"
  return (f"{head}: b's {n} columns as buffers of their own, {made} (each filled by its own copy of its"
          f" columns; a TMA copy moves at most {hw.MMA_N_MAX} along a dimension too),{held} a dot each: {dots};"
          f" each piece of the result is those columns of the whole (store it at ml.ds(start, w))")


def _odd_wide_hint(cx, a, b, n) -> str:
  """An n past 256 that no tensor-core step divides (a 512-point real FFT's 257 bins, probe 72b): such an n is
  computed padded where b fits SMEM, and this b did not (the padded traces failed): k in blocks whose b fits, b's
  rows made a block at a time (a whole register b sliced would be staged whole)."""
  k, m = b.type.shape[0], a.type.shape[0]
  item = getattr(resolve(b.type.dtype), "itemsize", 2)
  up = -(-n // 32) * 32
  kb = 256
  while kb > 16 and (kb * up * item > 64 * 1024 or k % kb):
    kb //= 2
  import ast
  from ..loc import call_at
  call = call_at(cx.loc)            # (the operands as the call wrote them: b before the compiler staged it)
  args = [ast.unparse(x) for x in call.args] if call is not None and len(call.args) >= 2 else ["a", "b"]
  at = args[0] if args[0].replace("_", "a").isalnum() or args[0].endswith("]") else f"({args[0]})"
  bt = args[1] if args[1].replace("_", "a").isalnum() else "b"
  return (f"an n no tensor-core step divides is computed padded where b fits SMEM, and this ({k}, {n}) b does not:"
          f" take k in blocks of {kb}, acc = ml.zeros(({m}, {n}), jnp.float32), then for k0 in ml.static_range(0, {k},"
          f" {kb}): acc = ml.dot({at}[:, k0:k0 + {kb}], {bt}_blk, acc), with {bt}_blk the ({kb}, {n}) rows k0:k0 + {kb}"
          f" of {bt} computed or read for that block alone (a whole {bt} sliced in registers is staged whole)")


def _names(a, b) -> str:
  """`a_s, b_s.T`: the operands as the call wrote them, for a hint that repeats the call."""
  return ", ".join(x.name if is_value(x) and (x.name or "").replace(".T", "").isidentifier() else w
                   for x, w in ((a, "a"), (b, "b")))


def _conv(text):
  return text if text.replace("[...]", "").replace("_", "a").replace(".", "a").isalnum() else f"({text})"


def _as(text, dtype) -> str:
  """`text.astype(jnp.dtype)` in the user's words: a value converted already (`p.astype(jnp.bfloat16)`)
  is converted once, to `dtype` (`p.astype(jnp.float16)`), not twice."""
  import ast
  node = expr_of(text)
  if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "astype" and (
      len(node.args) == 1 and not node.keywords):
    text = ast.unparse(node.func.value)
  return f"{_conv(text)}.astype(jnp.{dtype})"
