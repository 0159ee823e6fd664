"""Atomics that return the old value: Triton's locks and tickets (probe 48c).

`ml.atomic_cas(lock, 0, 1)` and `ml.atomic_xchg(lock, 0)` (Triton's spin lock of its layer-norm backward
tutorial, `while tl.atomic_cas(lock, 0, 1) == 1: pass` ... `tl.atomic_xchg(lock, 0)`), and the value of a
single element's `t = ml.atomic_add(count, 1)` (a stream-K ticket, the "last program finishes the
reduction" test `if t == ml.num_programs(0) - 1:`). They update one element of an output (GMEM) with PTX's
`atom`, issued by one thread of the CTA, which hands the old value to the others through an SMEM word
(plan_fetch_scratch gives it where the value is used). `sem=` and `scope=` are Triton's: the memory order
(default "acq_rel", Triton's; an atomic_add whose value nothing uses keeps its relaxed `red` unless `sem=`
says otherwise) and the scope ("gpu"). The CTA's threads meet before the atom, so a release orders every
thread's earlier writes, and after it, so an acquire orders every thread's later reads.

An output that a cas or an xchg updates starts at 0 (Triton's `torch.zeros` lock), as one atomic_add updates
does, and it may take all three (a lock and its count in one array). Interpret mode orders the programs as
the GPU would (lowering/interpret_sync.py): a program's accesses after an acquire are ordered after what the
releasing programs did before their release, so accesses under a lock and a last program's reads of the totals
are no race; a program that waits steps aside for the others, and a wait nothing can end is an InterpretError.
The compile-time race proofs leave the accesses after an acquire to it (checks.synced_ops).
"""
from __future__ import annotations

import math

from .. import errors as E
from .. import hw
from .. import ir
from ..dtypes import DType
from ..infer import unify
from ..types import ScalarType, Space, TensorType, dtype_name, resolve
from .atomic import AtomicKind, AtomicUpdate, check_target, number_into
from .base import Num, builtin, is_ref, is_scalar, is_tensor, is_value, kind_of


def check_order(cx, what: str, sem, scope, default: str = "acq_rel") -> tuple[str, str]:
  """Triton's `sem=` and `scope=` (strings; None: the defaults), as PTX's `atom` orders and scopes."""
  sem = default if sem is None else sem
  scope = "gpu" if scope is None else scope
  for name, v, ok in (("sem", sem, hw.ATOMIC_SEMS), ("scope", scope, hw.ATOMIC_SCOPES)):
    if v not in ok and not (name == "sem" and v == ""):     # "": atomic_add's default (plan_fetch_scratch)
      raise E.KernelTypeError(
          f"{what}'s {name}= must be one of {', '.join(repr(x) for x in ok)}, got {v!r}", cx.loc,
          hint=f"{name}={ok[-1] if name == 'sem' else ok[0]!r} (Triton's default)" if name == "sem" else
               f"{name}='gpu' (Triton's default: every program of the launch sees the update)")
  return sem, scope


def unordered_scatter(cx, what: str, sem: str) -> None:
  """A scatter's updates (one `red` per element, by every thread) are relaxed: an ordering `sem=` is MG003,
  whose hint orders them with a single element's atomic after them, which orders the CTA's earlier accesses."""
  if sem in ("", "relaxed"):
    return
  raise E.KernelTypeError(
      f"{what}'s sem={sem!r} is not supported on a scatter (or a masked window that may leave its array): its"
      f" updates are relaxed", cx.loc,
      hint="leave sem= out here, and order the updates with a single element's atomic after them, e.g. a ticket,"
           " t = ml.atomic_add(count, 1) (sem='acq_rel'): it releases every earlier access of the CTA")


def _element(cx, what: str, ref):
  """The single GMEM element an atomic that returns the old value updates."""
  if not is_ref(ref):
    text = cx.named(ref, "")
    target = "lock.at[i]"
    if text.endswith("]") and "[" in text:          # lock[i] (a value read) -> lock.at[i] (its element)
      base, idx = text[:text.index("[")], text[text.index("[") + 1:-1]
      target = f"{base}.at[{idx}]" if base and not base.endswith(".at") else target
    raise E.KernelTypeError(
        f"{what} needs a ref (one element of an output, e.g. lock.at[0]), got {kind_of(ref)}", cx.loc,
        hint=f"pass the element's window, {what}({target}, ...), not a value read from it")
  t = ref.type
  if t.space != Space.GMEM or t.remote:
    raise E.KernelTypeError(
        f"{what} on {'another CTA' if t.remote else 'an SMEM buffer'}: a lock or a ticket lives in an output"
        f" (GMEM), where programs meet", cx.loc,
        hint="a CTA's own threads need no lock: update SMEM plainly between barriers (each element is held by one"
             " thread), or make the lock an output (jnp.int32 in out_shape; it starts at 0)")
  from .memory import root
  r = root(cx.b, ref)
  if r.id in cx.b.read_only and r.id not in cx.b.aliased:       # Triton passes a zeroed lock tensor in
    raise E.InputWriteError(
        f"{what} updates {r.name}, an input: inputs are read-only", cx.loc,
        hint=f"make {r.name} an output (jnp.int32 in out_shape: an output that atomics update starts at 0, as"
             f" Triton's torch.zeros lock), or alias the input to an output (input_output_aliases) and update that")
  check_target(cx, cx.b, ref, what)
  if t.shape and math.prod(t.shape) == 1:
    from .memory import view
    ref = view(cx, ref, (0,) * len(t.shape), f"{ref.name or 'out'}[0]")
    t = ref.type
  if t.shape:
    raise E.ShapeMismatchError(
        f"{what} updates one element and returns its old value, got a window of shape {t.shape}", cx.loc,
        hint=f"pass one element, {what}({_root_name(cx, ref)}.at[i], ...) (a lock per group of programs:"
             f" {_root_name(cx, ref)}.at[ml.program_id(0) % groups])")
  from .memory import check_in_bounds
  check_in_bounds(cx, ref, what)
  return ref


def _root_name(cx, ref) -> str:
  from .memory import root
  return root(cx.b, ref).name or "lock"


def _operand(cx, what: str, ref, value, role: str):
  """A scalar (or a Python number) of the element's dtype."""
  d = resolve(ref.type.dtype)
  if is_tensor(value):
    raise E.ShapeMismatchError(
        f"{what}'s {role} is a tensor of shape {value.type.shape}, and the element takes one value", cx.loc,
        hint="pass a scalar (a number, or a value read from one element); a tensor of places is not supported:"
             " update one element at a time")
  if not (isinstance(value, Num) or is_scalar(value)):
    raise E.KernelTypeError(f"{what}'s {role} must be a number or a scalar, got {kind_of(value)}", cx.loc,
                            hint=f"read refs first: {cx.named(ref, 'lock')}[...]")
  value = number_into(cx, what, value, d, ref.name or "the ref")
  if is_value(value) and unify(d, value.type.dtype, cx.loc, what) is None:
    raise E.DtypeMismatchError(
        f"{what}'s {role} {value.name or 'value'} ({dtype_name(value.type.dtype)}) and {ref.name or 'the ref'}"
        f" ({dtype_name(d)}): dtypes differ", cx.loc,
        hint=f"convert it: ({cx.named(value, role)}).astype(jnp.{dtype_name(d)})")
  return value


def check_fetch_dtype(cx, kind: AtomicKind, d, what: str):
  d = resolve(d)
  if isinstance(d, DType) and d not in hw.ATOMIC_FETCH[kind.value]:
    ok = hw.dtype_list(hw.ATOMIC_FETCH[kind.value])
    raise E.UnsupportedDtypeError(
        f"{what} on {dtype_name(d)} is not supported: Hopper's atom {kind.value} takes {ok}", cx.loc,
        hint="make the lock or counter int32 (jnp.int32 in its out_shape)" + (
            "; a float32 max or min that returns nothing is ml.atomic_max(out.at[i], v) with its value unused"
            if kind in (AtomicKind.MAX, AtomicKind.MIN) and d == DType.f32 else ""))


def fetch(cx, kind: AtomicKind, ref, value, cmp=None, sem="acq_rel", scope="gpu", mask=None):
  """Emit the single-element atomic `kind` on `ref` (checked), returning the old value (a scalar). `mask`: a
  bool scalar that keeps the element as it is where off (an xchg's; the value returned is then the element's)."""
  d = resolve(ref.type.dtype)
  return cx.b.emit(AtomicUpdate, kind, ref, value, loc=cx.loc, types=[ScalarType(d)], names=[cx.name or ""],
                   cmp=cmp, sem=sem, scope=scope, mask=mask).result


@builtin
def atomic_cas(cx, ref, cmp, val, sem=None, scope=None):
  """Compare and swap, Triton's `tl.atomic_cas(lock, 0, 1)`: where the element `ref` holds `cmp`, store `val`;
  return what it held (so `== cmp` means this program swapped). One element of an output (int32, uint32 or
  float32, compared bitwise), which starts at 0; `sem=` ("acq_rel") and `scope=` ("gpu") as Triton's.
  A spin lock: `while ml.atomic_cas(lock.at[g], 0, 1) == 1: pass` ... `ml.atomic_xchg(lock.at[g], 0)`."""
  what = "ml.atomic_cas"
  from .atomic_fetch import is_tensor_target, tensor_rmw
  if is_tensor_target(ref):        # a tensor of elements: their old values (probe 49c)
    return tensor_rmw(cx, AtomicKind.CAS, ref, val, cmp, None, *check_order(cx, what, sem, scope, default=""), what)
  sem, scope = check_order(cx, what, sem, scope)
  ref = _element(cx, what, ref)
  check_fetch_dtype(cx, AtomicKind.CAS, ref.type.dtype, what)
  cmp = _operand(cx, what, ref, cmp, "cmp")
  val = _operand(cx, what, ref, val, "val")
  return fetch(cx, AtomicKind.CAS, ref, val, cmp=cmp, sem=sem, scope=scope)


@builtin
def atomic_xchg(cx, ref, val, mask=None, sem=None, scope=None):
  """Exchange, Triton's `tl.atomic_xchg(lock, 0)`: store `val` into the element `ref` and return what it held.
  One element of an output (int32, uint32 or float32), which starts at 0; `mask=` (a bool scalar) keeps the
  element as it is where off (the returned value is then the element's); `sem=` ("acq_rel") and `scope=`
  ("gpu") as Triton's."""
  what = "ml.atomic_xchg"
  from .atomic_fetch import is_tensor_target, tensor_rmw
  if is_tensor_target(ref):        # a tensor of elements: their old values (probe 49c)
    return tensor_rmw(cx, AtomicKind.XCHG, ref, val, None, mask, *check_order(cx, what, sem, scope, default=""),
                      what)
  sem, scope = check_order(cx, what, sem, scope)
  ref = _element(cx, what, ref)
  check_fetch_dtype(cx, AtomicKind.XCHG, ref.type.dtype, what)
  val = _operand(cx, what, ref, val, "val")
  if mask is None or mask is True:
    return fetch(cx, AtomicKind.XCHG, ref, val, sem=sem, scope=scope)
  from .atomic_masks import check_mask
  mask = check_mask(cx, mask, (), what)
  if mask is False:        # nothing stored: an add of 0 reads the element atomically
    return fetch(cx, AtomicKind.ADD, ref, 0, sem=sem, scope=scope)
  return fetch(cx, AtomicKind.XCHG, ref, val, sem=sem, scope=scope, mask=mask)


def plan_fetch_scratch(kernel: ir.Kernel, builder) -> None:
  """After prune_dead: an atomic whose returned value is used gets an SMEM word (one per dtype, shared by
  the kernel's such atomics, each of which meets the CTA's threads before and after its use) to hand the
  value from the thread that runs the `atom` to the others; one whose value nothing uses drops its result
  (an atomic_add or max or min is then the `red` it was before probe 48c). A dtype no `atom` returns (a 16-bit
  float's) is MG106 here."""
  import dataclasses
  from ..types import RefType
  from .memory import SmemAlloc
  used = {v.id for o in ir.walk(kernel.body) for v in o.operands()}
  for o in ir.walk(kernel.body):
    for r in o.regions:
      used |= {a.id for a in getattr(o, r).args}
  words: dict = {}
  allocs = []
  dropped = [False]

  def visit(block):
    for i, o in enumerate(block.ops):
      for r in o.regions:
        visit(getattr(o, r))
      if not isinstance(o, AtomicUpdate) or not o.results:
        continue
      if isinstance(o.results[0].type, TensorType):     # a tensor's old values (probe 49c: atomic_fetch.py)
        from .atomic_fetch import plan_tensor
        block.ops[i] = plan_tensor(o, used)
        dropped[0] |= block.ops[i] is not o
        if block.ops[i].results:
          builder.defs[o.results[0].id] = block.ops[i]
        continue
      half = o.kind in (AtomicKind.MAX, AtomicKind.MIN) and resolve(o.ref.type.dtype) in (DType.f16, DType.bf16)
      if o.results[0].id not in used and not half:   # an update as before: relaxed unless sem= says otherwise
        # (a 16-bit float max or min has no `red` of one element: its cas loop runs, the value unused; probe 53c)
        block.ops[i] = dataclasses.replace(o, results=(), sem=o.sem or "relaxed")
        continue
      d = resolve(o.ref.type.dtype)
      if d not in hw.ATOMIC_FETCH[o.kind.value]:
        ok = hw.dtype_list(hw.ATOMIC_FETCH[o.kind.value])
        raise E.UnsupportedDtypeError(
            f"the value ml.atomic_{o.kind.value} returns is not supported on {dtype_name(d)}: Hopper's atom"
            f" {o.kind.value} takes {ok}", o.loc,
            hint=f"use the update without its value (ml.atomic_{o.kind.value}(out.at[i], v) as a statement), or"
                 f" update an int32 element (a counter) to return one")
      if d not in words:
        v = ir.Value(RefType((1,), d, Space.SMEM), "atomic value")
        alloc = SmemAlloc(o.loc, (v,))
        builder.defs[v.id] = alloc
        allocs.append(alloc)
        kernel.smem.append(v)
        words[d] = v
      block.ops[i] = dataclasses.replace(o, scratch=words[d], sem=o.sem or ("acq_rel" if o.results[0].id in used
                                                                            else "relaxed"))
      builder.defs[o.results[0].id] = block.ops[i]

  visit(kernel.body)
  kernel.body.ops[:0] = allocs
  if dropped[0]:          # (the masks and cmps of tensors' atomics whose old values nothing uses)
    ir.prune_dead(kernel.body)
