"""Tensor cores: `ml.dot` on WGMMA, its type rule and operand checks, and the dot waits.

WGMMA reads both operands from SMEM tiled in (8, 128 bytes) tiles with a 128-byte
swizzle (frontend/layouts.py sets that up for every buffer a dot reads); the
accumulator lives in registers in the WGMMA layout. The limits are hw.py's.
"""
from __future__ import annotations

import re

from .. import errors as E
from .. import hw
from .. import ir
from ..dtypes import DType
from ..infer import unify
from ..ir import Access, LayoutRule, Traits
from ..types import Layout, RefType, ScalarType, Space, TensorType, dtype_name, resolve
from .base import builtin, is_value, kind_of
from .memory import View
from .elementwise_checks import method_on
from ..loc import expr_of


def _dot_effects(o):
  refs = [(x, Access.MMA_READ) for x in (o.a, o.b) if isinstance(x.type, RefType)]
  return refs + [(None, Access.MMA_ISSUE)]


@ir.op(Traits(effects=_dot_effects, layout=LayoutRule.DOT))
class Dot(ir.Op):
  """`acc + a @ b` on the tensor cores (WGMMA), issued asynchronously.

  `b` (k, n) is an SMEM ref that frontend/layouts.py tiles and swizzles for the
  tensor cores, possibly a transposed view (`buf.T`); `a` (m, k) is one too, or a
  register tensor in the WGMMA layout. `acc` is an (m, n) tensor in the WGMMA
  layout, or None for zeros. The sync pass waits for the result before it is read.
  """
  a: ir.Value
  b: ir.Value
  acc: ir.Value | None
  loc: object
  results: tuple


@ir.op(Traits(inserted=True))
class DotWait(ir.Op):
  """Wait until at most `pending` issued Dot groups are still running."""
  pending: int
  loc: object
  results: tuple = ()


def _operand(cx, what, x, other=None):
  """An SMEM operand (b, or a from SMEM) must be a 2-D ref of this CTA's SMEM."""
  if not is_value(x) or not isinstance(x.type, RefType) or x.type.space != Space.SMEM or x.type.remote:
    got = f"{x.name} ({x.type.space})" if is_value(x) and isinstance(x.type, RefType) else kind_of(x)
    hint = f"copy the tile into SMEM first: {what}_s = ml.smem(shape); ml.copy({what}_tile, {what}_s)"
    if is_value(x) and isinstance(x.type, RefType) and x.type.space == Space.GMEM and x.name:
      # In the user's names: the ref they passed and its shape (ml.smem infers the dtype from the copy).
      shape = tuple(x.type.shape) if len(x.type.shape) != 1 else (x.type.shape[0],)
      hint = (f"copy the tile into SMEM first: {what}_s = ml.smem({shape}); ml.copy({x.name}, {what}_s);"
              f" then pass {what}_s to ml.dot")
    if what == "a":
      got_what = "an SMEM buffer of this CTA or a register tensor"
    else:
      got_what = "an SMEM buffer of this CTA"
      read = _whole_read(cx, x) if is_value(x) and isinstance(x.type, TensorType) else None
      if is_value(x) and isinstance(x.type, TensorType) and len(x.type.shape) == 1 and is_value(other) \
          and isinstance(other.type, RefType) and len(other.type.shape) == 2:
        hint = _vector_hint(what, x, other, cx)       # a decode GEMV: SMEM would not make it a tile
      elif read is not None and read[0].type.space == Space.SMEM:   # `b_s[...]`, `b_s[...].T`: the buffer, or its view
        ref, flip = read
        view = f"{ref.name}.T" if flip else ref.name
        a_text = (cx.named(other, "") if what == "b" and other is not None else "") or "..."
        hint = (f"only a may come from registers; pass the SMEM buffer {ref.name} itself"
                + (f", as its transposed view {view} (which moves no data)" if flip else "")
                + f": ml.dot({a_text}, {view})")
      elif read is not None and not cx.named(x, "").replace(".T", "").isidentifier():
        # `w[...]` of a GMEM ref, written in the call: copied into a buffer by TMA, not through registers
        ref, flip = read
        base = re.match(r"\w+", ref.name).group()          # b_ref.at[ml.ds(k, 64), :] -> b_s
        buf = f"{base[:-4] if base.endswith('_ref') and len(base) > 4 else base}_s"
        hint = (f"only a may come from registers; copy {ref.name} into SMEM and pass the buffer"
                f"{' transposed' if flip else ''}: {buf} = ml.smem({tuple(ref.type.shape)}); ml.copy({ref.name}, {buf});"
                f" ml.dot(..., {buf}{'.T' if flip else ''})")
      elif is_value(x) and isinstance(x.type, TensorType) and len(x.type.shape) == 2:
        from .dot_staging import unstageable_b
        message, hint = unstageable_b(cx, x)
        raise E.MmaOperandError(message, cx.loc, hint=hint)
      elif is_value(x) and isinstance(x.type, TensorType):
        text, d = cx.named(x, ""), dtype_name(x.type.dtype)
        flip = text.endswith(".T") and text[:-2].isidentifier()      # q @ k.T of a k in registers
        v = text[:-2] if flip else text
        if v.isidentifier() and len(x.type.shape) == 2:
          shape = tuple(x.type.shape)[::-1] if flip else tuple(x.type.shape)
          hint = (f"only a may come from registers; store {v} in an SMEM buffer and pass the buffer"
                  + (" transposed (buf.T moves no data)" if flip else "") + f": {v}_s = ml.smem({shape}, jnp.{d});"
                  f" {v}_s[...] = {v}; ml.dot(..., {v}_s{'.T' if flip else ''}) (a tile read from SMEM: pass that"
                  f" buffer itself)")
        else:
          v = text or x.name or "b_value"
          hint = (f"only a may come from registers; store b's tile in SMEM: b_s = ml.smem({tuple(x.type.shape)});"
                  f" b_s[...] = {v}; then pass b_s to ml.dot (a tile read from SMEM: pass that buffer itself)")
    if is_value(x) and isinstance(x.type, RefType) and x.type.remote:
      hint = (f"the tensor cores read this CTA's SMEM only: read the peer's tile into registers and store it in"
              f" a buffer of this CTA ({what}_s[...] = {x.name or 'peer'}[...])"
              + (", or pass it as a register A operand" if what == "a" else ""))
    raise E.MmaOperandError(f"ml.dot operand {what} must be {got_what}, got {got}", cx.loc, hint=hint)
  if len(x.type.shape) != 2:
    raise E.MmaOperandError(f"ml.dot operand {what} must be 2-D, got shape {x.type.shape}", cx.loc,
                            hint=_vector_hint(what, x, other, cx) if len(x.type.shape) == 1 else
                            _batched_operands(x, other, what) or "index the leading dimensions away: buf.at[stage]")


def _batched_dot(cx, a, b, acc, out_dtype):
  """Triton's 3-D tl.dot (probe 51e): `acc + a @ b` of (z, m, k) and (z, k, n) register tensors or SMEM refs
  (and a (z, m, n) acc) as z two-dimensional dots of their elements, stacked, as jnp.matmul of 3-D tiles is
  (jnp_dots.batched_product). None where the operands are not two such 3-D operands of one batch."""
  from .memory import view
  from .shape import expand
  from .stacking import stack
  ops = (a, b) if acc is None else (a, b, acc)
  if not all(is_value(x) and len(getattr(x.type, "shape", ())) == 3 for x in ops) or len(
      {x.type.shape[0] for x in ops}) != 1 or not all(
      isinstance(x.type, TensorType) or isinstance(x.type, RefType) and x.type.space == Space.SMEM for x in ops):
    return None
  def element(x, i):
    whole = (i, slice(None), slice(None))
    return expand(cx, x, whole) if isinstance(x.type, TensorType) else view(cx, x, whole)
  name = cx.name
  cx.name = ""                        # (only the stacked result takes the name it is bound to)
  try:
    parts = [dot.rule(cx, element(a, i), element(b, i), None if acc is None else element(acc, i),
                      out_dtype=out_dtype) for i in range(a.type.shape[0])]
  finally:
    cx.name = name
  return stack.rule(cx, parts, 0)


def _batched_operands(x, other, what):
  """Two 3-D buffers of one batch (ml.dot(a_s, b_s) of (B, m, k) and (B, k, n)): one dot per element."""
  from ..dot_hints import batched_hint
  a, b = (x, other) if what == "a" else (other, x)
  if not all(is_value(v) and isinstance(v.type, RefType) and len(v.type.shape) == 3 and (v.name or "").isidentifier()
             for v in (a, b)) or a.type.shape[0] != b.type.shape[0]:
    return None
  return batched_hint(a.name, b.name, a.type.shape[0])


def _whole_read(cx, x):
  """(ref, transposed) where register tensor `x` is a whole read of `ref`, this CTA's SMEM buffer
  (`b_s[...]`) or a GMEM array or window of one (`w[...]`, `w.at[ml.ds(k, 64), :][...]`), or its transpose (`b_s[...].T`, through a scratch the
  transpose writes just before)."""
  from .memory import Load
  from .permute import TransposeLoad, transposed_of
  d, flip = cx.b.defining(x), False
  if isinstance(d, TransposeLoad):
    src = transposed_of(cx, x)
    d, flip = (cx.b.defining(src) if src is not None else None), True
  if not isinstance(d, Load) or d.merge or d.keep:
    return None
  ref = d.ref
  t = ref.type
  name = ref.name or ""
  if (not isinstance(t, RefType) or t.space not in (Space.SMEM, Space.GMEM) or t.remote or t.transposed
      or len(t.shape) != 2 or not (name.isidentifier() or t.space == Space.GMEM and re.fullmatch(r"\w+\.at\[.*\]", name))):
    return None
  return ref, flip


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
  fix = f"load B's tile as (n, k), e.g. from a (n, k) array bt, and pass bt_s.T: ml.dot({an or 'a_s'}, bt_s.T{acc})"
  an = an or (a.name if is_value(a) and (a.name or "").replace(".T", "").isidentifier() else "a_s")
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


@builtin
def dot(cx, a, b, acc=None, *, out_dtype=None, input_precision=None, allow_tf32=None, max_num_imprecise_acc=None,
        preferred_element_type=None, precision=None):
  """`acc + a @ b` on the tensor cores (WGMMA).

  `b` (k, n) is an SMEM buffer (or a stage view of one, or a transposed view
  `buf.T` of an (n, k) buffer); `a` (m, k) is one too, or a register tensor (a
  16-bit tile such as `p.astype(jnp.float16)`, read straight from registers).
  Operands are float16, bfloat16, float8_e4m3fn, float8_e5m2, int8 or float32 (read
  as TF32); 8-bit and float32 operands are K-major: `ml.dot(a_s, bt_s.T)` with bt_s
  stored (n, k). `acc` is an (m, n) register tensor (float32; float16 also for float16
  and FP8 inputs; int32 for int8) or None for zeros. m any number of rows (a multiple of 64 fills the
  tensor cores; fewer, a decode's few tokens, are padded with zero rows), n a multiple of 16 (of 8 when b is `buf.T`;
  int8: 8, 24 or a multiple of 16) up to 256,
  k a multiple of 32 bytes (8 float32, 16 16-bit or 32 8-bit elements; sizes that are not multiples of 128
  bytes make the dot's buffers take a narrower swizzle).

  Triton's keywords: `out_dtype` is the accumulator's dtype when `acc` is None (that of `acc`
  otherwise); `input_precision="tf32"` and `allow_tf32=True` are what float32 operands get.
  JAX's (jnp.dot's, as Pallas kernels write them): `preferred_element_type` is `out_dtype`;
  `precision` other than float32's HIGHEST is what the tensor cores do anyway.
  """
  from .dot_options import check_dot_options
  out_dtype = check_dot_options(cx, a, b, acc, out_dtype, input_precision, allow_tf32, max_num_imprecise_acc,
                                preferred_element_type, precision)
  loc = cx.loc
  if (batched := _batched_dot(cx, a, b, acc, out_dtype)) is not None:
    return batched                    # Triton's 3-D tl.dot: one dot per batch element, stacked
  from .padded_dots import padded_dot
  if (padded := padded_dot(cx, a, b, acc, out_dtype, dot.rule)) is not None:
    return padded                     # a padded trace's dot: at padded shapes (ops/padded_dots.py)
  from .dot_register_checks import check_register_dtypes, check_register_operands
  check_register_operands(cx, a, b, acc)    # (in the call's words, before register operands are staged)
  from .dot_staging import f32_a_beside_smem_b, k_major_b, narrow_f32_b_dot, staged_a, staged_b
  if (padded := narrow_f32_b_dot(cx, a, b, acc, out_dtype, dot.rule)) is not None:
    return padded                     # TF32 p @ v_s at a head_dim of 32, 80 or 96: v_s padded in registers (51f)
  tf32_a = f32_a_beside_smem_b(a, b)  # a float32 register A beside an SMEM B: staged, or padded if few rows (51f)
  if tf32_a:
    b = k_major_b(cx, a, b)           # B stored (k, n): transposed once into an (n, k) buffer (K-major)
  a = staged_a(cx, a, b)
  in_regs = is_value(a) and isinstance(a.type, TensorType)
  if in_regs:
    if not tf32_a:                    # (a few rows of float32: small_m_dot pads them into SMEM)
      _register_a(cx, a, resolve(a.type.dtype), b)
  else:
    _operand(cx, "a", a, b)
  check_register_dtypes(cx, a, b, acc)
  from .small_dots import padded_k_dot
  if (padded := padded_k_dot(cx, a, b, acc, out_dtype, dot.rule)) is not None:
    return padded                     # k of 40 or 72 in 16 bits: both padded with zeros (ops/small_dots.py)
  b = staged_b(cx, b)                 # a register B: into SMEM, (k, n) or (n, k) read as .T (ops/dot_staging.py)
  if is_value(b) and isinstance(b.type, TensorType) and is_value(a) and len(a.type.shape) == 2:
    from .small_dots import unstaged_b_dot
    if (padded := unstaged_b_dot(cx, a, b, acc, out_dtype, dot.rule)) is not None:
      return padded                   # neither k nor n a multiple of 64: k (or n) padded to 64 (ops/small_dots.py)
  _operand(cx, "b", b, a)
  (m, k), (k2, n) = a.type.shape, b.type.shape
  if k != k2:
    raise E.ShapeMismatchError(
        f"ml.dot of {a.name} {a.type.shape} and {b.name} {b.type.shape}: inner dimensions differ", loc,
        hint=_inner_hint(a, b, acc is not None))
  dt = unify(a.type.dtype, b.type.dtype, loc, "ml.dot operand")
  if dt is None:
    da, db = resolve(a.type.dtype), resolve(b.type.dtype)
    fp8 = {da, db} == {DType.f8e4m3, DType.f8e5m2}
    raise E.DtypeMismatchError(
        f"ml.dot of {a.name} ({dtype_name(a.type.dtype)}) and {b.name} ({dtype_name(b.type.dtype)}):"
        f" both operands must have one dtype" + (" (Mosaic GPU's tensor-core dots take no e4m3 x e5m2 pair)"
                                                 if fp8 else ""), loc,
        hint=_fp8_pair_hint(a, b, in_regs) if fp8 else
             _mixed_hint(a, b, da, db, in_regs, acc is not None,
                         {id(x): _root(cx, x) for x in (a, b) if isinstance(x.type, RefType)}))
  d = resolve(dt)
  if isinstance(d, DType) and d not in hw.MMA_DTYPES:
    raise E.UnsupportedDtypeError(
        f"ml.dot on {d}: the tensor cores take float16, bfloat16, float8_e4m3fn, float8_e5m2, int8 or"
        f" float32 (as TF32) operands", loc, hint=_unsupported_hint(d))
  _major(cx, a, b, d, acc is not None)
  k_step = hw.tile_cols(d.itemsize if isinstance(d, DType) else 2, hw.MIN_SWIZZLE)
  # B stored (k, n) has n along its swizzled rows: whole rows of the narrowest swizzle (32 bytes, 16
  # columns; frontend/layouts.py picks the widest that divides every such size of the dot's buffers);
  # stored (n, k) (passed as buf.T), n counts its 8-row tiles: any multiple of WGMMA's N step.
  n_step = hw.MMA_N_STEP if b.type.transposed else hw.tile_cols(2, hw.MIN_SWIZZLE)
  int_n = d == DType.i8 and n not in hw.MMA_N_INT_EXTRA    # int8 WGMMA: n of 8, 24 or 16k
  if int_n:
    n_step = hw.MMA_N_STEP_INT
  small = m % hw.MMA_M != 0     # a few rows (decode): padded to a tile's rows (ops/small_dots.py)
  # (m of fewer rows than the warpgroups split, 64 at block=256: each computes it whole, frontend/layouts.py)
  if n % n_step and not int_n:
    from .small_dots import padded_n_dot
    if (padded := padded_n_dot(cx, a, b, acc, out_dtype, n_step, dot.rule)) is not None:
      return padded                   # n of 8, 24 or 40 stored (k, n): b padded with zeros (ops/small_dots.py)
  if n % n_step or n > hw.MMA_N_MAX:
    narrow = n < hw.MMA_N_MAX and n % hw.MMA_N_STEP == 0 and not b.type.transposed
    err = E.MmaOperandError(
        f"ml.dot{' on int8' if int_n else ''} needs n (columns of b) to be"
        f" {'8, 24 or ' if int_n else ''}a multiple of {n_step} and at most {hw.MMA_N_MAX}, got {n}", loc,
        hint=_narrow_n_hint(a, b, n, k) if narrow else
             _wide_n_hint(cx, a, b, acc, n, n_step) if n > hw.MMA_N_MAX else
             f"pad n to a multiple of {n_step}: {_padded_b(b, -(-n // n_step) * n_step)} (a TMA copy"
             f" past the array's end fills zeros; or mask a register load with other=0), and store only"
             f" the first {n} columns of the result (a masked store)"
             + (f"; where the same size is also the k of another dot (attention's key block: n of q @ k.T, k"
                f" of p @ v), pad to {-(-n // k_step) * k_step} instead, a multiple of {k_step}"
                if b.type.transposed and n % k_step else ""))
    # too wide a b tile is also too wide for one TMA copy: that error, earlier, comes second
    raise E.about(err, [_root(cx, b)], cause=n > hw.MMA_N_MAX)
  if k % k_step:
    up = -(-k // k_step) * k_step
    tiles = (f"use a k tile of {k_step} or {2 * k_step} (several small tiles, such as {k}-row pages, gathered"
             f" into one {k_step}-row buffer)" if k < k_step else
             f"use a k tile that is a multiple of {k_step} ({k - k % k_step} or {up})")
    raise E.MmaOperandError(
        f"ml.dot needs k (the columns of a, the rows of b) to be a multiple of {k_step} ({hw.MIN_SWIZZLE} bytes of"
        f" {d if isinstance(d, DType) else '16-bit'} elements), got {k}",
        loc, hint=f"{tiles}; where k is a whole dimension of the data (a head_dim), pad it with zeros to {up}"
                  f" outside the kernel (jnp.pad: zero columns of both operands leave the product unchanged;"
                  f" padded keys must be masked out of a softmax first; a scale taken from that dimension keeps"
                  f" its real size, 1 / math.sqrt({k}), not the padded shape's {up}; slice padded output columns"
                  f" off after the kernel)")
  if in_regs and d == DType.i8 and k % hw.MMA_REG_A_INT_K:
    up = -(-k // hw.MMA_REG_A_INT_K) * hw.MMA_REG_A_INT_K
    raise E.MmaOperandError(
        f"ml.dot takes an int8 operand a from registers with k (the columns of a, the rows of b) a multiple of"
        f" {hw.MMA_REG_A_INT_K}, got {k}", loc,
        hint=f"pad k with zeros to {up} (zero columns of both operands leave the product unchanged), or read a"
             f" from SMEM, where k may be any multiple of {k_step}: {_eight_bit_a_hint(cx, a, b, d, tail=False)}")
  ok = hw.MMA_ACC.get(d, (DType.f32,))
  acc_dtype = ok[0]
  if out_dtype is not None and acc is None:
    if isinstance(d, DType) and out_dtype not in ok:
      raise E.UnsupportedDtypeError(
          f"ml.dot accumulates {d} products in {' or '.join(map(str, ok))}, not"
          f" {'out_dtype' if preferred_element_type is None else 'preferred_element_type'}={out_dtype}", loc,
          hint=f"accumulate in jnp.{ok[0]} and convert the result: ml.dot({_names(a, b)}).astype(jnp.{out_dtype})")
    acc_dtype = out_dtype
  if acc is not None:
    if not is_value(acc) or not isinstance(acc.type, TensorType):
      number = isinstance(acc, (int, float)) and not isinstance(acc, bool)
      scalar = number or (is_value(acc) and isinstance(acc.type, ScalarType))
      v = repr(acc) if number else cx.named(acc, "s")
      raise E.KernelTypeError(f"ml.dot's acc must be a register tensor, got {kind_of(acc)}", loc,
                              hint=f"a scalar acc adds to every element: acc = ml.full(({m}, {n}), {v}, jnp.{ok[0]});"
                                   f" ml.dot({_names(a, b)}, acc) (or add it to the result, ml.dot({_names(a, b)})"
                                   f" + {v})" if scalar else
                                   f"start from acc = ml.zeros(({m}, {n}), jnp.{ok[0]})")
    if acc.type.shape != (m, n):
      shape = tuple(acc.type.shape)
      hint = (f"accumulate in a ({m}, {n}) tensor: {_acc_name(cx, acc)} = ml.zeros(({m}, {n}),"
              f" jnp.{dtype_name(acc.type.dtype)})")
      if len(shape) <= 2 and all(x in (1, y) for x, y in zip(shape[::-1], (n, m))):
        # a bias row (n,) or (1, n), or a column (m, 1), meant to start the sum: broadcast it first
        v = cx.named(acc, "bias")
        hint = (f"{v} broadcasts to the product's shape: start the sum from it broadcast, ml.dot({_names(a, b)},"
                f" ml.broadcast_to({v}, ({m}, {n}))), or add it to the product, ml.dot({_names(a, b)}) + {v}")
      raise E.ShapeMismatchError(
          f"ml.dot's acc has shape {acc.type.shape}, but {a.name} @ {b.name} is {(m, n)}", loc, hint=hint)
    acc_dtype = resolve(acc.type.dtype)
    if isinstance(acc_dtype, DType) and acc_dtype not in ok:
      raise E.UnsupportedDtypeError(
          f"ml.dot accumulates {d} products in {' or '.join(map(str, ok))}, not {acc_dtype}", loc,
          hint=f"accumulate in jnp.{ok[0]}: {_acc_name(cx, acc)} = ml.zeros(({m}, {n}), jnp.{ok[0]})")
  if small:
    from .small_dots import small_m_dot
    return small_m_dot(cx, a, b, acc, d, acc_dtype, dot.rule)
  t = TensorType((m, n), acc_dtype, Layout.WGMMA)
  return cx.b.emit(Dot, a, b, acc, loc=loc, types=[t], names=[cx.name]).result
