"""Tensor cores: `ml.dot` on WGMMA, its type rule and operand checks, and the dot waits (the checks that
read the user's text, and the hints, are mma_hints.py).

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
from .mma_hints import (_acc_name, _eight_bit_a_hint, _fp8_pair_hint, _inner_hint, _major,
                        _mixed_hint, _names, _narrow_n_hint, _padded_b, _register_a, _root,
                        _unsupported_hint, _vector_hint, _wide_n_hint)


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
  fence_acc: bool = False     # a wgmma.fence before it: threads accessed `acc` since a dot wrote it (acc_fences.py)


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
  from .split_k import Split, dot as split_dot
  if isinstance(a, Split) or isinstance(b, Split):    # (buffers split along a ragged K: ops/split_k.py, probe 59a)
    return split_dot(cx, a, b, acc, dot.rule, out_dtype=out_dtype, input_precision=input_precision,
                     allow_tf32=allow_tf32, max_num_imprecise_acc=max_num_imprecise_acc,
                     preferred_element_type=preferred_element_type, precision=precision)
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
  from .dot_staging import f32_a_beside_smem_b, k_major_a, k_major_b, narrow_f32_b_dot, staged_a, staged_b
  if (padded := narrow_f32_b_dot(cx, a, b, acc, out_dtype, dot.rule)) is not None:
    return padded                     # TF32 p @ v_s at a head_dim of 32, 80 or 96: v_s padded in registers (51f)
  tf32_a = f32_a_beside_smem_b(a, b)  # a float32 A beside an SMEM B: staged, or padded if few rows (51f, 67b)
  if tf32_a:
    b = k_major_b(cx, a, b)           # B stored (k, n): transposed once into an (n, k) buffer (K-major)
    a = k_major_a(cx, a, b)           # an SMEM A passed as a view .T: stored once into an (m, k) buffer (67b)
    tf32_a = isinstance(a.type, TensorType)
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
  from .dot_staging import k_major_8bit_b
  b = k_major_8bit_b(cx, b)           # an 8-bit B stored (k, n): transposed once into an (n, k) buffer (68a)
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
  if n > hw.MMA_N_MAX and not n % n_step:
    from .wide_dots import wide_n_dot
    if (split := wide_n_dot(cx, a, b, acc, out_dtype, n_step, dot.rule)) is not None:
      return split                    # n of 512 (MLA's latent columns): pieces of at most 256 (ops/wide_dots.py)
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
    # (an n no tensor-core step divides, a real FFT's 65 bins: the padded traces compute it at padded shapes)
    err.pads_help = n % hw.MMA_N_STEP != 0 and not int_n
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
