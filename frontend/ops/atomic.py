"""Atomics: read-modify-write updates of GMEM and SMEM that programs and threads may race on.

`ml.atomic_add(ref, value)` (and `atomic_max`, `atomic_min`) adds `value` into every element
of the window `ref` atomically: a tensor of the window's shape, or a scalar when `ref` is one
element (then one thread of the CTA does it). `ml.copy(buf, out.at[...], reduce="add")` is the
TMA engine's bulk form. Outputs the kernel updates this way start at the operation's identity
(0 for add, the lowest value for max, the highest for min), so programs can accumulate into
them in any order; atomics never report a race in interpret mode, but a plain access by
another program to an element updated atomically does.
"""
from __future__ import annotations

import math

import enum

from .. import errors as E
from .. import hw
from .. import ir
from ..dtypes import DType
from ..infer import unify
from ..ir import Access, LayoutRule, Traits
from ..types import LayoutKind, ScalarType, Space, TensorType, dtype_name, resolve
from .base import Num, builtin, is_ref, is_scalar, is_tensor, is_value, kind_of
from .widen_hints import widen_hint  # a 16-bit float sum into float32: sum in float32


class AtomicKind(enum.Enum):
  ADD = "add"
  MAX = "max"
  MIN = "min"
  SET = "set"      # a scatter's plain store (`out[ids, :] = v`): no atomic, each element written whole
  CAS = "cas"      # ml.atomic_cas: `ref = val if ref == cmp`, returning the old value (atomic_rmw.py)
  XCHG = "exch"    # ml.atomic_xchg: `ref = val`, returning the old value (PTX's atom.exch)
  AND = "and"      # ml.atomic_and, atomic_or, atomic_xor: Triton's bitwise atomics (32-bit integers; probe 49c)
  OR = "or"
  XOR = "xor"


UPDATE_KINDS = (AtomicKind.ADD, AtomicKind.MAX, AtomicKind.MIN)    # what atomics and reducing copies combine with
ZERO_KINDS = (AtomicKind.ADD, AtomicKind.CAS, AtomicKind.XCHG)     # an output they update starts at 0: they mix
BITWISE_KINDS = (AtomicKind.AND, AtomicKind.OR, AtomicKind.XOR)
COMBINE_KINDS = UPDATE_KINDS + BITWISE_KINDS    # the atomics that combine a value with the element (no cas, xchg)
_SYMBOL = {AtomicKind.AND: "&", AtomicKind.OR: "|", AtomicKind.XOR: "^"}


@ir.op(Traits(effects=lambda o: [(o.ref, Access.REG_WRITE)], layout=LayoutRule.MEMORY))
class AtomicUpdate(ir.Op):
  """`ref[...] = ref[...] <kind> value`, atomically per element (`red` on the GPU). A single GMEM element's
  update may return the old value (`results`: one scalar; `t = ml.atomic_add(count, 1)`, ml.atomic_cas,
  ml.atomic_xchg; atomic_rmw.py), read by one thread and handed to the others through `scratch`, an SMEM
  word atomic_rmw.plan_fetch_scratch gives it where the value is used; `cmp` is a compare-and-swap's
  expected value, `sem` and `scope` the PTX memory order and scope (Triton's `sem=`, `scope=`)."""
  kind: AtomicKind
  ref: ir.Value
  value: ir.Operand
  loc: object
  results: tuple = ()
  start_multiple: int | None = None   # (as Load's: tma_starts.mark_register_starts)
  cmp: ir.Operand = None
  sem: str = "relaxed"
  scope: str = "gpu"
  scratch: ir.Value | None = None
  mask: ir.Operand = None             # (an xchg's bool scalar: the element stays as it is where off)


def identity(kind: AtomicKind, d: DType):
  """The value an output updated only by `kind` atomics (or set only by scatters) starts at."""
  if kind in (AtomicKind.ADD, AtomicKind.SET, AtomicKind.CAS, AtomicKind.XCHG, AtomicKind.OR, AtomicKind.XOR):
    return 0
  if kind == AtomicKind.AND:           # (all bits set)
    return -1 if d.is_signed else (1 << d.bits) - 1
  if d.is_float:
    return float("-inf") if kind == AtomicKind.MAX else float("inf")
  lo, hi = (-(1 << (d.bits - 1)), (1 << (d.bits - 1)) - 1) if d.is_signed else (0, (1 << d.bits) - 1)
  return lo if kind == AtomicKind.MAX else hi


def check_target(cx, b, ref, what):
  """Atomics update outputs, SMEM and inputs aliased to an output (input_output_aliases: vLLM's token counts
  updated in place); other inputs are read-only."""
  from .scatter_hints import output_for
  from .memory import root
  r = root(b, ref)
  if r.id in b.read_only and r.id not in getattr(b, "aliased", ()):
    raise E.InputWriteError(
        f"{what} updates {r.name}, an input: inputs are read-only", cx.loc,
        hint=f"accumulate into an output ({output_for(b, r)}) instead: it starts at the operation's identity, e.g. 0"
             f" for add")


def check_dtype(cx, kind: AtomicKind, d, table, what, where, smem=None, words=None, instead=None):
  """`smem`: the texts of an SMEM window updated whole and of the value, which one CTA's threads hold an element each
  of, so a plain read-modify-write does the same (no two threads meet on an element); `words`: the texts of
  the window, the value and the array (for the hint of a float max or min)."""
  d = resolve(d)
  if isinstance(d, DType) and d not in table[kind.value]:
    ok = hw.dtype_list(table[kind.value])
    buf, v = smem or ("", "")
    op = (f"{buf}[...] + {v}" if kind == AtomicKind.ADD else f"{buf}[...] {_SYMBOL[kind]} {v}" if kind in _SYMBOL
          else f"ml.{kind.value}imum({buf}[...], {v})")
    plain = (f"update the SMEM window plainly, {buf}[...] = {op}: each of its elements is"
             f" held by one thread of the CTA, so none of them race (atomics matter between CTAs, in GMEM); or ")
    raise E.UnsupportedDtypeError(
        f"{what} on {d} is not supported {where}: Hopper's atomic {kind.value} takes {ok}", cx.loc,
        hint=(plain if smem else "") + (f"{instead}; or " if instead else "")
        + "convert the value and the array to a supported dtype" + _narrow_int(d, kind, _number_text(words))
        + (_as_float32(d, kind, *(words or ())) if d in (DType.f16, DType.bf16) and DType.f32 in table[kind.value]
           and (kind != AtomicKind.ADD or not smem) else
           _float_keys(d, kind, *(words or ()), in_smem=smem is not None) if kind in (AtomicKind.MAX, AtomicKind.MIN) and (d == DType.f32 or d in (DType.f16, DType.bf16)
                                                              and not smem) else ""))


def _as_float32(d, kind, ref="ref", value="value", array=None) -> str:
  """A 16-bit float max or min where float32 takes it: a float32 output, converted back exactly."""
  from .elementwise_checks import method_on
  from .widen_hints import _sum_in_f32
  if kind == AtomicKind.ADD:      # (a bfloat16 loss added into one element: a float32 one, summed in float32)
    wide = _sum_in_f32(value) or f"{method_on(value)}.astype(jnp.float32)"
    return (f": make {array or 'the output'} float32 (jnp.float32 in its out_shape) and add float32 values,"
            f" ml.atomic_add({ref}, {wide}); .astype(jnp.{dtype_name(d)}) of the result outside the kernel"
            f" converts it back")
  return (f": make {array or 'the output'} float32 (jnp.float32 in its out_shape) and update it with"
          f" ml.atomic_{kind.value}({ref}, {method_on(value)}.astype(jnp.float32)); .astype(jnp.{dtype_name(d)}) of"
          f" the result outside the kernel converts it back exactly")


def _float_keys(d, kind, ref="ref", value="value", array=None, in_smem=False) -> str:
  """A float max or min as an int32 one on keys that order as the floats do (16-bit floats widened
  first, exactly), decoded outside; an element no update reached holds int32's identity, a NaN
  when decoded, so the decoding maps it to the float identity (jax.ops.segment_max's empty segments).
  In the call's words where given: the window `ref`, the `value` and the output `array`. An SMEM buffer
  (`in_smem`) has no out_shape and no start value: it is allocated int32, filled with the identity and decoded
  in the kernel."""
  from .elementwise_checks import method_on
  f32 = d == DType.f32
  v = value if f32 else f"{method_on(value)}.astype(jnp.float32)"
  into = (f"into {array} made int32 (jnp.int32 in its out_shape)" if array else "into an int32 array")
  lim, inf = ("min", "-jnp.inf") if kind == AtomicKind.MAX else ("max", "jnp.inf")
  back = "" if f32 else f", then .astype(jnp.{dtype_name(d)}) (exact)"
  if in_smem:
    buf = array or "buf"
    return (f", e.g. a {'float32' if f32 else dtype_name(d)} {kind.value} as an int32 one whose keys order as the"
            f" floats do, negatives included: allocate {buf} int32 (ml.smem(shape, jnp.int32)), fill it first with"
            f" {buf}[...] = ml.full(shape, jnp.iinfo(jnp.int32).{lim}, jnp.int32), update it with"
            f" ml.atomic_{kind.value}({ref}, ml.where(b >= 0, b, b ^ 0x7FFFFFFF)) with b = ml.bitcast({v}, jnp.int32),"
            f" and decode it when read, k = {buf}[...]; ml.bitcast(ml.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32)"
            f" (NaN aside; an element no update reached, k == jnp.iinfo(jnp.int32).{lim}, is {inf}:"
            f" ml.where(k == jnp.iinfo(jnp.int32).{lim}, {inf}, decoded)){back}")
  return (f", e.g. a {'float32' if f32 else dtype_name(d)} {kind.value} as an int32 one whose keys order as the"
          f" floats do, negatives included: {into}, ml.atomic_{kind.value}({ref}, ml.where(b >= 0, b,"
          f" b ^ 0x7FFFFFFF)) with b = ml.bitcast({v}, jnp.int32), decoded outside the kernel,"
          f" jax.lax.bitcast_convert_type(jnp.where(k >= 0, k, k ^ 0x7FFFFFFF), jnp.float32) (k the int32"
          f" result; NaN aside), where an element no update reached, k == jnp.iinfo(jnp.int32).{lim}, is {inf}:"
          f" jnp.where(k == jnp.iinfo(jnp.int32).{lim}, {inf}, decoded){back}")


def _words(cx, ref, value):
  """(window, value, array) as the atomic's call wrote them, for _float_keys."""
  from .memory import root
  if not is_value(value):
    return None
  return cx.named(ref, "ref"), cx.named(value, "value"), root(cx.b, ref).name or None


def _number_text(words) -> str:
  """The value's text where the call wrote a Python number (`ml.atomic_add(h.at[ids], 1)`), else ""."""
  text = words[1] if words and len(words) > 1 and isinstance(words[1], str) else ""
  try:
    float(text)
  except ValueError:
    return ""
  return text


def _narrow_int(d, kind, number="") -> str:
  """For 8- and 16-bit integers and bools: the 32-bit output that takes the update exactly (a Python `number`
  updates it as written: it has no .astype)."""
  if not (isinstance(d, DType) and (d == DType.bool_ or d.is_int and d.bits < 32)):
    return ""
  wide = "uint32" if d.is_int and not d.is_signed else "int32"
  back = (f"; .astype(jnp.{dtype_name(d)}) of the result outside the kernel gives {dtype_name(d)}'s, wrapping as"
          f" jnp's {dtype_name(d)} .at[].add does" if d != DType.bool_ and kind == AtomicKind.ADD else
          f"; .astype(jnp.{dtype_name(d)}) of the result outside the kernel converts it back exactly"
          if d != DType.bool_ else " (a bool add is a count)")
  update = (f"update it with {number} as written" if number else f"update it with the value's .astype(jnp.{wide})")
  return (f": make the output {wide} (out_shape=jax.ShapeDtypeStruct(shape, jnp.{wide})) and {update}{back}")


def number_into(cx, what: str, value, d, name: str):
  """A Python float added (or maxed) into an integer ref: a whole number in the dtype's range is
  that integer (`ml.atomic_add(counts.at[b], 1.0)`); 0.5 would truncate to 0 and 1e10 wrap or
  saturate, a count silently lost, so those are errors (as `other=` of an integer load)."""
  d = resolve(d)
  if not (isinstance(value, float) and isinstance(d, DType) and not d.is_float and d != DType.bool_):
    return value
  lo, hi = d.int_range
  if value.is_integer() and lo <= value <= hi:
    return int(value)
  dn = dtype_name(d)
  if not math.isfinite(value):
    raise E.KernelTypeError(
        f"{what} of {value} into {name} ({dn}): {dn} holds no {value}", cx.loc,
        hint=f"pass a number {name} can hold ({lo}..{hi}: {lo} and {hi} are the identities of max and min), or"
             f" make {name} a float array")
  if value.is_integer():
    raise E.KernelTypeError(
        f"{what} of {value} into {name} ({dn}): the number is outside {dn}'s range ({lo}..{hi})", cx.loc,
        hint=f"pass a number {name} can hold ({lo}..{hi}), or make {name} a float array to accumulate floats")
  raise E.DtypeMismatchError(
      f"{what} of the float {value} into {name} ({dn}): it would be truncated to {int(value)} in every update",
      cx.loc, hint=f"make {name} a float array (jnp.float32 in out_shape) to accumulate fractions, or pass an"
                   f" integer ({math.floor(value)} or {math.ceil(value)})")


def _ref_hint(cx, what: str, ref, value) -> str:
  """The hint for an atomic given a value: where the user read it from a ref (`out[...]`, `out[i]`),
  that ref's window, which the atomic takes instead of the value read from it."""
  text, depth = cx.named(ref, ""), 0
  for j in range(len(text) - 1, -1, -1) if text.endswith("]") else ():
    depth += {"]": 1, "[": -1}.get(text[j], 0)
    if depth == 0:
      base, idx = text[:j], text[j + 1:-1]
      if base and not base.endswith(".at"):
        target = base if idx.strip() == "..." else f"{base}.at[{idx}]"
        return (f"pass the ref's window itself, not the value read from it:"
                f" {what}({target}, {cx.named(value, 'value')})")
      break
  return f"{what}(out.at[ml.ds(i * 128, 128)], x)"


def _reduce_first_hint(cx, kind: AtomicKind, what: str) -> str:
  """A tensor updating one element: reduce it with the atomic's own operation (ml.max for
  ml.atomic_max), in the call's words."""
  from .elementwise_checks import _call_args
  target, value = _call_args(cx.text, 2) or ("out.at[i]", "x")
  red = {AtomicKind.ADD: "ml.sum", AtomicKind.MAX: "ml.max", AtomicKind.MIN: "ml.min"}.get(kind)
  if red is None:         # (a bitwise atomic: no ml. reduction of its own)
    return f"update a window of the value's shape, {what}(out.at[ml.ds(i, n)], {value}), or one element a value"
  return f"reduce it first: {what}({target}, {red}({value}))"


def _atomic(cx, kind: AtomicKind, ref, value, mask=None, sem=None, scope=None):
  from .atomic_rmw import check_order
  from .memory import check_in_bounds
  from .shape import broadcast_shape, broadcast_to_shape
  from .elementwise import full_
  from .atomic_masks import as_scatter, check_mask, masked_element, select_identity
  what = f"ml.atomic_{kind.value}"
  order = check_order(cx, what, sem, scope, default="") if (sem, scope) != (None, None) else ("", "gpu")
  from .gather import IndexedRef, scatter
  from .atomic_rmw import unordered_scatter
  if isinstance(mask, bool) and (is_ref(ref) or isinstance(ref, IndexedRef)):    # mask=True, mask=False
    d = resolve((ref.ref if isinstance(ref, IndexedRef) else ref).type.dtype)
    if mask or isinstance(d, DType) and (is_value(value) or isinstance(value, Num)):
      value, mask = value if mask else identity(kind, d), None
  if isinstance(ref, IndexedRef):            # out.at[ids, :]: a scatter
    unordered_scatter(cx, what, order[0])
    return scatter(cx, kind, ref, value, mask=mask)
  from .padded_atomics import padded_atomic      # (a value computed padded: over its padded window, probe 61b)
  if (got := padded_atomic(cx, _atomic, kind, ref, value, mask, sem, scope)) is not None:
    return got[0]
  if mask is not None and is_ref(ref) and (s := as_scatter(cx, ref)) is not None:
    mask = check_mask(cx, mask, ref.type.shape, what)      # a window that may leave the array: its positions
    check_dtype(cx, kind, ref.type.dtype, hw.ATOMIC_ELEMENT, what, "with mask= at a window that may leave its"
                " array (one element at a time)", words=_words(cx, ref, value))
    iref, keep = s
    unordered_scatter(cx, what, order[0])
    if keep is not None:
      from .elementwise import BinOp, binary
      mask = keep if mask is True else binary(cx, BinOp.AND, keep, mask)
    return scatter(cx, kind, iref, value, mask=mask)
  if not is_ref(ref):
    raise E.KernelTypeError(f"{what} needs a ref (an output, an ml.smem buffer or a view of one), got"
                            f" {kind_of(ref)}", cx.loc, hint=_ref_hint(cx, what, ref, value))
  t = ref.type
  if t.remote:
    raise E.ClusterRefError(f"{what} on another CTA's SMEM is not supported", cx.loc,
                            hint="update this CTA's buffer and combine after ml.cluster_sync()")
  check_target(cx, cx.b, ref, what)
  check_in_bounds(cx, ref, what)
  if not (is_value(value) or isinstance(value, Num)) or is_ref(value):
    raise E.KernelTypeError(f"{what} adds a register value, got {kind_of(value)}", cx.loc,
                            hint=f"read refs first: {what}(dst, src[...])")
  value = number_into(cx, what, value, t.dtype, ref.name or "the ref")
  if is_value(value) and unify(t.dtype, value.type.dtype, cx.loc, what) is None:
    raise E.DtypeMismatchError(
        f"{what} of {value.name or 'a value'} ({dtype_name(value.type.dtype)}) into {ref.name or 'a ref'}"
        f" ({dtype_name(t.dtype)}): dtypes differ", cx.loc,
        hint=widen_hint(cx, value, t.dtype)
        or f"convert explicitly: ({cx.named(value, 'value')}).astype(jnp.{dtype_name(t.dtype)})")
  if math.prod(t.shape) == 1 and is_tensor(value) and math.prod(value.type.shape) == 1:
    from .elementwise import one_element_scalar        # a keepdims full reduction: its scalar
    value = one_element_scalar(cx, value) or value
  if t.shape and math.prod(t.shape) == 1 and (isinstance(value, Num) or is_scalar(value)):
    from .memory import view                      # a window of shape (1,) updated with a scalar: its element
    ref = view(cx, ref, (0,) * len(t.shape), f"{ref.name or 'out'}[0]")
    t = ref.type
  if not t.shape:                                 # one element: one thread does it
    if t.space != Space.GMEM:
      raise E.KernelTypeError(
          f"{what} on a single SMEM element: a scalar is the same in every thread, so update it"
          f" plainly", cx.loc, hint=("buf[i] = buf[i] + v" if kind == AtomicKind.ADD else
                                       f"buf[i] = buf[i] {_SYMBOL[kind]} v" if kind in _SYMBOL else
                                       f"buf[i] = ml.{kind.value}imum(buf[i], v)")
          + " (or make the value a tensor to combine threads)")
    if is_tensor(value):
      raise E.ShapeMismatchError(f"{what} of a tensor of shape {value.type.shape} into a single element",
                                 cx.loc, hint=_reduce_first_hint(cx, kind, what))
    check_dtype(cx, kind, t.dtype, hw.ATOMIC_SCALAR, what, "on a single element", words=_words(cx, ref, value))
    if mask is not None:
      mask = check_mask(cx, mask, (), what)
      ref = masked_element(cx, ref, mask)         # (an index the mask keeps off may leave the array)
      value = select_identity(cx, kind, mask, value, t.dtype)
    # the old value, Triton's `t = tl.atomic_add(count, 1)` (atomic_rmw.py; dropped where nothing uses it). A
    # run-time mask also rides along: where it is off no `red` is issued (probe 48c; the identity is the update
    # of a fetched value, whose element is then the one masked_element chose)
    return cx.b.emit(AtomicUpdate, kind, ref, value, loc=cx.loc, types=[ScalarType(resolve(t.dtype))],
                     names=[cx.name or ""], sem=order[0], scope=order[1],
                     mask=mask if is_value(mask) else None).result
  check_dtype(cx, kind, t.dtype, hw.ATOMIC_GMEM if t.space == Space.GMEM else hw.ATOMIC_SMEM, what,
              f"in {t.space}", smem=(cx.named(ref, "buf"), cx.named(value, "v") if is_value(value) else repr(value))
              if t.space == Space.SMEM else None, words=_words(cx, ref, value))
  if isinstance(value, Num) or is_scalar(value):
    value = full_(cx, t.shape, value, t.dtype, what)
  elif value.type.shape != t.shape:
    if broadcast_shape(cx, [value.type.shape, t.shape], what, [value.name or "the value",
                                                             ref.name or "the window"]) != t.shape:
      raise E.ShapeMismatchError(
          f"{what} of a tensor of shape {value.type.shape} into {ref.name or 'a ref'} of shape {t.shape}",
          cx.loc, hint="update a window of the value's shape (slice the ref with .at[...])")
    value = broadcast_to_shape(cx, value, t.shape)
  keep = None
  if mask is not None:                            # the identity where the mask is off: no change there
    keep = check_mask(cx, mask, t.shape, what)
    value = select_identity(cx, kind, keep, value, t.dtype)
  assert isinstance(value.type, TensorType)
  from .atomic_fetch import window_update
  return window_update(cx, kind, ref, value, keep, order[0] or "relaxed", order[1])


@builtin
def atomic_add(cx, ref, value, mask=None, sem=None, scope=None):
  """Add `value` into `ref` atomically: `ml.atomic_add(out.at[ml.ds(j * 128, 128)], partial)`.

  `ref` is a window of an output or an SMEM buffer; `value` a tensor of its shape (or a
  number, or a scalar for a single element of an output, which one thread of the CTA adds; a
  single SMEM element is updated plainly, `h[i] = h[i] + v`). Returns the element's old value where `ref` is a
  single element of an output (Triton's `t = tl.atomic_add(count, 1)`; `sem=` "acq_rel" then, and `scope=`
  "gpu", as Triton's: ops/atomic_rmw.py), else None. An output updated by
  atomics starts at zero. `mask=` (Triton's) keeps the elements it is off for unchanged; a GMEM
  window that may leave the array (a run-time start) is then the scatter at its positions,
  `out.at[start + ml.arange(n)]`, whose updates outside the array are dropped.
  """
  return _atomic(cx, AtomicKind.ADD, ref, value, mask, sem, scope)


@builtin
def atomic_max(cx, ref, value, mask=None, sem=None, scope=None):
  """Store `max(ref, value)` into `ref` atomically (an output updated so starts at its lowest value);
  `mask=` as ml.atomic_add's."""
  return _atomic(cx, AtomicKind.MAX, ref, value, mask, sem, scope)


@builtin
def atomic_min(cx, ref, value, mask=None, sem=None, scope=None):
  """Store `min(ref, value)` into `ref` atomically (an output updated so starts at its highest value);
  `mask=` as ml.atomic_add's."""
  return _atomic(cx, AtomicKind.MIN, ref, value, mask, sem, scope)


@builtin
def atomic_and(cx, ref, value, mask=None, sem=None, scope=None):
  """Store `ref & value` into `ref` atomically, Triton's `tl.atomic_and` (int32, uint32; an output updated so
  starts with every bit set); `mask=` and the old values as ml.atomic_add's."""
  return _atomic(cx, AtomicKind.AND, ref, value, mask, sem, scope)


@builtin
def atomic_or(cx, ref, value, mask=None, sem=None, scope=None):
  """Store `ref | value` into `ref` atomically, Triton's `tl.atomic_or` (int32, uint32; an output updated so
  starts at 0: a bit set of flags); `mask=` and the old values as ml.atomic_add's."""
  return _atomic(cx, AtomicKind.OR, ref, value, mask, sem, scope)


@builtin
def atomic_xor(cx, ref, value, mask=None, sem=None, scope=None):
  """Store `ref ^ value` into `ref` atomically, Triton's `tl.atomic_xor` (int32, uint32; an output updated so
  starts at 0); `mask=` and the old values as ml.atomic_add's."""
  return _atomic(cx, AtomicKind.XOR, ref, value, mask, sem, scope)


def odd_pairs(t: TensorType) -> bool:
  """Whether a 16-bit tensor's registers hold single elements, not pairs of neighbours (a
  strided or row-wise layout of one element per vector, or a replicated row or column
  vector, updated element by element): Hopper's float16/bfloat16 atomics then take add only."""
  lay = t.layout
  return bool(lay.drop) or (lay.kind != LayoutKind.WGMMA and lay.vec % 2 == 1)


def check_atomic_layouts(kernel: ir.Kernel) -> None:
  """After the layout pass: an atomic scatter into an SMEM buffer the layout pass
  tiled (an ml.dot operand; layouts.py leaves other scattered buffers untiled) is an error: its `red`s go to
  the logical element's address, which a tiled buffer does not hold there (probe 47d)."""
  for o in ir.walk(kernel.body):
    if (type(o).__name__ == "ScatterUpdate" and o.ref.type.space == Space.SMEM
        and o.ref.id in kernel.smem_layouts):
      buf, dt = o.ref.name or "buf", dtype_name(resolve(o.ref.type.dtype))
      which = "a plain scatter stores into" if o.kind == AtomicKind.SET else "an atomic scatter updates"
      raise E.KernelTypeError(
          f"{buf} is an ml.dot operand, which the compiler tiles for the tensor cores, and {which}"
          f" untiled SMEM buffers (each element at its own address)", o.loc,
          hint=f"scatter into a buffer of its own, h = ml.smem({o.ref.type.shape}, jnp.{dt}), and copy it before the"
               f" ml.dot: {buf}[...] = h[...]" if o.kind == AtomicKind.SET else
               f"scatter into a buffer of its own, h = ml.smem({o.ref.type.shape}, jnp.{dt}) filled with"
               f" zeros, and add it before the ml.dot: {buf}[...] = {buf}[...] + h[...]")
    # (a float16/bfloat16 max or min of a tensor held one element per register was MG204 here: Hopper's `red` of them
    # updates pairs; since probe 56b each element is a loop of `atom.cas.b16`, lowering/atomic.py's _red. A multiple
    # of 256 elements held singly still goes through SMEM to the pairs' `red`: relayout._pair_atomics)


def accumulated_outputs(body: ir.Block, defs, outputs, skipped=None) -> dict:
  """Output value id -> the AtomicKind that updates it (atomics and reducing TMA copies); an
  output updated with two kinds has no single starting value. `skipped`: output name -> the kind
  of the atomics updating it in loops of no trips (not traced): an output nothing else writes
  starts at their identity, as it would were the loop to run no trips at run time."""
  from .memory import Copy, View
  out_ids = {p.value.id for p in outputs}
  found: dict = {}
  written = {(defs[r.id].ref if isinstance(defs.get(r.id), View) else r).id for o in ir.walk(body)
             for r, a in ir.traits_of(o).effects(o) if r is not None and a in (ir.Access.REG_WRITE, ir.Access.TMA_WRITE)}
  for p in outputs:
    if (skipped or {}).get(p.name) and p.value.id not in written:
      found[p.value.id] = (AtomicKind(skipped[p.name]), p.loc)
  for o in ir.walk(body):
    if isinstance(o, AtomicUpdate):
      ref, kind = o.ref, o.kind
    elif isinstance(o, Copy) and o.reduce is not None:
      ref, kind = o.dst, o.reduce
    else:
      continue
    d = defs.get(ref.id)
    r = d.ref if isinstance(d, View) else ref
    if r.id not in out_ids:
      continue
    prev = found.setdefault(r.id, (kind, o.loc))
    if prev[0] != kind and prev[0] in ZERO_KINDS and kind in ZERO_KINDS:   # a lock and its count: all start at 0
      if kind == AtomicKind.ADD:
        found[r.id] = (kind, prev[1])
      continue
    if prev[0] != kind:
      how = lambda k: "a scatter's stores" if k == AtomicKind.SET else f"atomic {k.value}"
      raise E.KernelTypeError(
          f"{r.name} is updated with {how(prev[0])} and {how(kind)}: an output updated by atomics"
          + (" or written by scatters starts at the operation's identity (0 for a scatter)"
             if AtomicKind.SET in (prev[0], kind) else " starts at the operation's identity")
          + ", so it takes one kind", o.loc,
          hint="accumulate each kind into its own output" + (
              "; to add at the places a scatter wrote, scatter the sum: out[ids] = v + w"
              if AtomicKind.SET in (prev[0], kind) else ""), notes=(f"{prev[1]}: the {how(prev[0]).replace('a scatter', 'scatter')}",))
  return {k: v[0] for k, v in found.items()}


def check_smem_scatter_dtype(cx, kind: AtomicKind, d, ref, written, what):
  """An atomic scatter into an SMEM buffer (`red.shared::cta`, one element at a time) of a dtype it lacks
  (a 16-bit float max or min; its add, and float32's max and min, are ones since probe 47d), with a hint
  that keeps the buffer in SMEM: a float32 one (the 16-bit values convert to it and back exactly), or a
  32-bit integer one."""
  from .memory import root
  if not isinstance(d, DType) or d in hw.ATOMIC_SMEM_ELEMENT[kind.value]:
    return
  ok = hw.dtype_list(hw.ATOMIC_SMEM_ELEMENT[kind.value])
  window, value = written if written else (ref.name or "buf", "v")
  buf, shape = root(cx.b, ref).name or "buf", root(cx.b, ref).type.shape
  if d.is_float:
    hint = (f"allocate {buf} float32, ml.smem({shape}, jnp.float32), update it with float32 values,"
            f" ml.atomic_{kind.value}({window}, {value}.astype(jnp.float32)), and convert what you read back:"
            f" {buf}[...].astype(jnp.{dtype_name(d)}) (exact)")
  else:
    hint = f"use a 32-bit integer buffer, ml.smem({shape}, jnp.int32), and int32 values"
  raise E.UnsupportedDtypeError(
      f"{what} on {dtype_name(d)} into an SMEM buffer through a tensor of indices is not supported: Hopper's"
      f" shared-memory atomic {kind.value} takes {ok}", cx.loc, hint=hint)
