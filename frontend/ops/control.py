"""Control and synchronisation: the grid, loops and branches, and the barriers and waits.

`For` and `If` are built by frontend/flow.py and frontend/branches.py from Python's `for` and `if`; the
waits and fences are inserted by frontend/sync.py and frontend/pipeline.py (users
never write them); `ml.cluster_sync()` is the one barrier users write.
"""
from __future__ import annotations

import builtins
import dataclasses

from typing import ClassVar

from .. import errors as E
from .. import ir
from ..dtypes import INDEX, DType
from ..ir import Access, LayoutRule, Traits
from ..types import ScalarType, TensorType, resolve
from . import elementwise as ew
from .base import builtin, shown
from .index_operands import index_operand


@ir.op(Traits(pure=True))
class ProgramId(ir.Op):
  axis: int
  loc: object
  results: tuple


@ir.op(Traits(pure=True))
class NumPrograms(ir.Op):
  axis: int
  loc: object
  results: tuple


@ir.op(Traits(pure=True))
class MultipleOf(ir.Op):
  """`x`, with the promise that it is a multiple of `multiple` (ml.multiple_of)."""
  x: ir.Value
  multiple: int
  loc: object
  results: tuple


@ir.op(Traits(pure=True))
class PositiveStep(ir.Op):
  """`step`, a pipelined loop's run-time step, which must be positive (interpret mode checks it, as
  it does a plain loop's; the loop is renumbered 0 .. trip - 1 around it)."""
  x: ir.Value
  loc: object
  results: tuple


@ir.op(Traits(layout=LayoutRule.REGION, splits=True))
class For(ir.Op):
  """`for iv in range(start, stop, step)` carrying `inits` through `body`.

  body.args = (iv, *carried); the body ends with a `Yield` of the new carries.
  `stages` > 1 asks for a software pipeline (frontend/pipeline.py): its TMA
  loads run `stages - 1` iterations ahead and its dots overlap them;
  `warp_specialize` has a producer warpgroup issue them (frontend/warp_specialize.py);
  `pingpong` has its two compute warpgroups take turns issuing dots (frontend/pingpong.py).
  """
  start: ir.Operand
  stop: ir.Operand
  step: ir.Operand
  inits: tuple
  body: ir.Block
  loc: object
  results: tuple
  stages: int = 1
  regions: ClassVar = ("body",)
  warp_specialize: bool = False
  pingpong: bool = False


@ir.op(Traits(layout=LayoutRule.REGION, splits=True))
class While(ir.Op):
  """`while cond:` carrying `inits`, as MLIR's scf.while.

  before.args = the carries; it computes the condition and ends with a `Condition` that
  forwards them. body.args = the carries again; it ends with a `Yield` of the new carries.
  The results are the carries when the condition first fails.
  """
  inits: tuple
  before: ir.Block
  body: ir.Block
  loc: object
  results: tuple
  regions: ClassVar = ("before", "body")


@ir.op(Traits(splits=True))
class Condition(ir.Op):
  """Ends a While's `before` block: go on with `values` into the body while `cond` holds."""
  cond: ir.Value
  values: tuple
  loc: object
  results: tuple = ()


@ir.op(Traits(layout=LayoutRule.REGION, splits=True))
class If(ir.Op):
  cond: ir.Value
  then_block: ir.Block
  else_block: ir.Block
  loc: object
  results: tuple
  regions: ClassVar = ("then_block", "else_block")


@ir.op(Traits(splits=True))
class Yield(ir.Op):
  values: tuple
  loc: object
  results: tuple = ()


LOOPS = (For, While)        # ops whose regions repeat


def terminator_values(o) -> list | None:
  """The values a region's last op hands on (a Yield's; a Condition's condition, then its
  values), or None when `o` ends no region."""
  if isinstance(o, Yield):
    return list(o.values)
  if isinstance(o, Condition):
    return [o.cond, *o.values]
  return None


@ir.op(Traits(effects=lambda o: [(None, Access.CLUSTER_BARRIER)]))
class ClusterSync(ir.Op):
  """All threads of all CTAs in the cluster meet (ml.cluster_sync())."""
  loc: object
  results: tuple = ()


# --- synchronisation inserted by frontend/sync.py and frontend/pipeline.py
@ir.op(Traits(inserted=True))
class WaitLoad(ir.Op):
  """Wait on the barrier of copy site `slot` (+ `stage`): its bytes have landed."""
  slot: int
  loc: object
  results: tuple = ()
  stage: ir.Operand = 0


@ir.op(Traits(effects=lambda o: [(None, Access.CTA_BARRIER)], inserted=True))
class AwaitStores(ir.Op):
  """Wait for in-flight TMA stores: to stop reading SMEM (`read_only`) or to finish; the
  `pending` most recently issued ones may stay in flight. All threads meet after it."""
  read_only: bool
  loc: object
  results: tuple = ()
  pending: int = 0


@ir.op(Traits(effects=lambda o: [(None, Access.CTA_BARRIER)], inserted=True))
class CommitShared(ir.Op):
  """Make register writes visible to the TMA engine: each thread's proxy fence, then a barrier.
  `global_`: writes to GMEM (an output written from registers and read back by a TMA load)
  are fenced too, or (`only_global`) instead of writes to SMEM."""
  loc: object
  results: tuple = ()
  global_: bool = False
  only_global: bool = False


@ir.op(Traits(effects=lambda o: [(None, Access.CTA_BARRIER)], inserted=True))
class Barrier(ir.Op):
  """All threads of the CTA meet (orders SMEM accesses between threads)."""
  loc: object
  results: tuple = ()


# --- warp specialisation (frontend/warp_specialize.py builds these; users never write them)
@ir.op(Traits(layout=LayoutRule.REGION))
class WarpSpecialize(ir.Op):
  """The kernel split into roles: one producer warpgroup runs `producer` (TMA loads, with
  `producer_regs` registers a thread), the `block` compute threads run `consumer` (with
  `consumer_regs`). A barrier inside a role meets that role's threads only."""
  producer: ir.Block
  consumer: ir.Block
  producer_regs: int
  consumer_regs: int
  loc: object
  results: tuple = ()
  regions: ClassVar = ("producer", "consumer")


@ir.op(Traits(inserted=True))
class Turn(ir.Op):
  """A ping-pong loop's turn on the tensor cores (frontend/pingpong.py): `take` waits until the
  other compute warpgroup has passed it, else pass it to the other; run by both warpgroups, or
  by warpgroup `only`. It orders no memory, only when the warpgroups issue their dots."""
  take: bool
  only: int | None
  loc: object
  results: tuple = ()


@ir.op(Traits())
class BarrierAlloc(ir.Op):
  """`count` mbarriers (a BarrierType value), each completing when `arrivals` warpgroups arrive."""
  loc: object
  results: tuple


@ir.op(Traits())
class BarrierArrive(ir.Op):
  """Each warpgroup of the running role arrives on barrier `index` of `barrier`: one thread
  for it, after (with `sync`) all its threads have met, so their accesses come before."""
  barrier: ir.Value
  index: ir.Operand
  loc: object
  results: tuple = ()
  sync: bool = True


@ir.op(Traits())
class BarrierWait(ir.Op):
  """The running role waits for the next phase of barrier `index` of `barrier` (phases are
  counted per thread: the n-th wait returns once the n-th phase has completed)."""
  barrier: ir.Value
  index: ir.Operand
  loc: object
  results: tuple = ()


# ---------------------------------------------------------------- builtins
def _axis(cx, axis, what):
  if not isinstance(axis, int) or isinstance(axis, bool) or not 0 <= axis <= 2:
    raise E.KernelTypeError(f"{what} axis must be 0, 1 or 2, got {shown(axis)}", cx.loc,
                            hint="grids have up to 3 axes: ml.program_id(0), (1) or (2)")
  return axis


@builtin
def program_id(cx, axis):
  """The index of this CTA (program) along grid axis 0, 1 or 2: `i = ml.program_id(0)`."""
  axes = getattr(cx.b, "grid_axes", 3)
  if _axis(cx, axis, "grid") >= axes:     # Triton's 0 there; a grid of fewer axes has no such index
    a, ids = ("1 axis", "ml.program_id(0)") if axes == 1 else (f"{axes} axes", "ml.program_id(0) and ml.program_id(1)")
    extents = ", ".join(f"n{k}" for k in (0, 1, 2)[:axis + 1])
    raise E.IndexOutOfBoundsError(
        f"ml.program_id({axis}) reads grid axis {axis}, but the grid has {a}: it would be 0 in every program",
        cx.loc, hint=f"the grid's programs are {ids}; to launch programs along axis {axis} too, give the grid"
                     f" {axis + 1} extents, grid=({extents}) (or a callable returning them), or write 0 where 0 is meant")
  if axis == cx.b.batch_axis:     # the axis jax.vmap took: 1 in the kernel's grid
    return ew.constant(cx, 0)
  return cx.b.emit(ProgramId, axis, loc=cx.loc, types=[ScalarType(INDEX)], names=[cx.name]).result


@builtin
def num_programs(cx, axis):
  """The grid's extent along `axis`."""
  if _axis(cx, axis, "grid") == cx.b.batch_axis:
    return ew.constant(cx, 1)
  return cx.b.emit(NumPrograms, axis, loc=cx.loc, types=[ScalarType(INDEX)], names=[cx.name]).result


@builtin
def multiple_of(cx, x, multiple):
  """`x`, promised to be a multiple of `multiple`: `ml.ds(ml.multiple_of(start, 8), 128)`.

  The compiler uses the promise where it cannot prove alignment itself (a TMA window of a
  tensor-core operand must start on a whole tile); interpret mode checks it.
  """
  if not isinstance(multiple, int) or isinstance(multiple, bool) or multiple <= 0:
    raise E.KernelTypeError(f"ml.multiple_of needs a positive static int multiple, got {shown(multiple)}", cx.loc,
                            hint="ml.multiple_of(i * n, 8): the multiple is fixed when the kernel is compiled")
  if isinstance(getattr(x, "type", None), TensorType) and getattr(resolve(x.type.dtype), "is_int", False):
    return x    # Triton's multiple_of(offs, BLOCK) of an index vector: a fact about its runs, no value changes
  if isinstance(getattr(x, "type", None), TensorType):
    raise E.KernelTypeError(f"ml.multiple_of promises integers (a start or offsets), got {cx.named(x, 'a tensor')} of"
                            f" {resolve(x.type.dtype)}", cx.loc, hint="drop ml.multiple_of: it changes no value")
  x = index_operand(cx, x)
  if isinstance(x, int):
    if x % multiple:
      raise E.KernelTypeError(f"ml.multiple_of({x}, {multiple}): {x} is not a multiple of {multiple}",
                              cx.loc, hint="promise only what is true, or drop ml.multiple_of")
    return x
  return cx.b.emit(MultipleOf, x, multiple, loc=cx.loc, types=[x.type], names=[x.name]).result


def _compiler_hint(cx, x, n, what):
  """Triton's tl.max_contiguous / tl.max_constancy(x, n): facts its compiler vectorises with; here the
  compiler finds runs of indices itself, so `x` unchanged (n a positive static int or a tuple of them)."""
  ns = n if isinstance(n, (tuple, list)) else (n,)
  if not ns or not all(isinstance(k, int) and not isinstance(k, bool) and k > 0 for k in ns):
    raise E.KernelTypeError(f"{what} needs a positive static int (or a tuple of them), got {shown(n)}", cx.loc,
                            hint=f"{what}(offs, BLOCK) with BLOCK a constexpr; or drop it: it changes no value")
  return x


@builtin
def max_contiguous(cx, x, n):
  """Triton's `tl.max_contiguous(offs, BLOCK)`: `offs` itself (the compiler finds contiguous runs)."""
  return _compiler_hint(cx, x, n, "ml.max_contiguous")


@builtin
def max_constancy(cx, x, n):
  """Triton's `tl.max_constancy(x, n)`: `x` itself."""
  return _compiler_hint(cx, x, n, "ml.max_constancy")


@builtin
def static_assert(cx, cond, msg=""):
  """Triton's `tl.static_assert(cond, msg)`: Python's assert on static values (shapes, dtypes, constexprs),
  checked while tracing (MG011 where it fails)."""
  from .base import is_value
  if is_value(cond):
    raise E.UnsupportedSyntaxError(
        "static_assert of a run-time value", cx.loc,
        hint="it runs while tracing, so it checks static values (shapes, dtypes, constexprs: x.shape[0] % 128 == 0);"
             " run-time indices are checked by interpret mode (interpret=True), and ml.where masks values")
  if not cond:
    said = _condition_text(cx)
    raise E.StaticAssertionError(f"static_assert{' ' * bool(said)}{said} failed" + (f": {msg}" if msg else ""), cx.loc,
                                 hint="the kernel's own check, on the shapes, dtypes and constexprs of this call:"
                                      " call it with arguments that satisfy it")
  return None


def _condition_text(cx) -> str:
  """The call's first argument as written (an assert's condition), or ""."""
  import ast
  try:
    return ast.unparse(ast.parse(cx.text, mode="eval").body.args[0])
  except Exception:
    return ""


@builtin
def device_assert(cx, cond, msg="", mask=None):
  """Triton's `tl.device_assert(cond, msg="", mask=None)`: `cond` holds at every element (where `mask` is True),
  checked by interpret mode in every program (MG950 at this line where it does not, naming the first element); the
  GPU runs no check, as Triton compiles none without TRITON_DEBUG. A static condition is checked while tracing
  (MG011, as ml.static_assert). Session 60 (MG002 before)."""
  from .base import check_register_value, is_value
  from .debug import DeviceAssert
  if not isinstance(msg, str):
    raise E.KernelTypeError(f"ml.device_assert's message must be a static str, got {type(msg).__name__}", cx.loc,
                            hint="ml.device_assert(x >= 0, \"x is negative\")")
  said = _condition_text(cx)
  if not is_value(cond):
    if not cond and (mask is None or (not is_value(mask) and mask)):
      raise E.StaticAssertionError(f"device_assert {said} failed while tracing" + (f": {msg}" if msg else ""),
                                   cx.loc, hint="its condition is static here (shapes, constexprs): call the kernel"
                                                " with arguments that satisfy it")
    if not is_value(mask):
      return None
  check_register_value(cx, cond, "ml.device_assert")
  d = resolve(cond.type.dtype) if is_value(cond) else None
  if d is not None and d != DType.bool_:
    cond = ew.compare(cx, ew.CmpOp.NE, cond, 0)            # (a number's truth, as Python's assert takes it)
  if mask is not None:
    check_register_value(cx, mask, "ml.device_assert")
    cond = ew.binary(cx, ew.BinOp.OR, cond, ew.unary(cx, ew.UnOp.NOT, mask), "ml.device_assert")
  from .padded_tiles import allowed, mask as own_mask, padded_table
  own = None
  if (pads := padded_table(cx, cond)) is not None:         # (a padded trace's value: its padding lanes hold nothing
    own = tuple(pads[cond.id])                              # to check, a (17,) read at 24)
    with allowed(cx):
      if (inside := own_mask(cx, own, tuple(cond.type.shape))) is not None:
        cond = ew.binary(cx, ew.BinOp.OR, cond, ew.unary(cx, ew.UnOp.NOT, inside), "ml.device_assert")
  with allowed(cx):
    cx.b.emit(DeviceAssert, cond, msg, said, own, loc=cx.loc)
  return None


@builtin
def debug_barrier(cx):
  """Triton's `tl.debug_barrier()` (Liger's cross-entropy, between its stores and a read of them): nothing, as
  the compiler orders every access of one CTA to shared and global memory itself (the sync pass)."""
  return None


@builtin
def cluster_sync(cx):
  """All threads of every CTA in the cluster wait for each other."""
  cx.b.emit(ClusterSync, loc=cx.loc)


@builtin
def range(cx, *args, stages=1, warp_specialize=False, pingpong=False):
  """A runtime loop like `range`; with `stages=s > 1`, a software pipeline.

  In `for k in ml.range(n, stages=4):` the TMA loads into SMEM buffers at the top
  of the body run 3 iterations ahead: the compiler gives each such buffer 4
  copies, and overlaps the loads of later iterations with this one's ml.dot.
  With `warp_specialize=True` an extra producer warpgroup issues the loads, up to
  4 ahead, across the iterations of any loops around this one. With `pingpong=True`
  (and block=256) the two compute warpgroups take turns on the tensor cores: one issues
  its dots while the other runs the code between its own (FlashAttention-3's ping-pong).
  """
  raise E.UnsupportedSyntaxError("ml.range here is not supported in a kernel", cx.loc,
                                 hint="ml.range(...) is for `for` loops: for k in ml.range(n, stages=3):")


# tl.range's tuning hints with no counterpart here (the compiler decides them), and why
_TRITON_TUNING = {"flatten": "Triton's flattening of a persistent loop nest; here warp_specialize=True on the"
                             " inner loop has its producer load the next tile's operands during this tile's"
                             " epilogue",
                  "loop_unroll_factor": "Triton's unrolling hint; unroll by hand with ml.static_range",
                  "disallow_acc_multi_buffer": "Triton's accumulator buffering hint; accumulators live in"
                                               " registers here",
                  "num_warps": "a kernel's threads are @mg.mgpu_kernel(block=...), 128 a warpgroup"}


# Triton's tl.range tuning keywords that change no value: accepted (the tutorials' persistent matmul writes
# flatten=True) when of their type, and dropped
_TUNING_ONLY = {"flatten": lambda v: isinstance(v, bool),
                "disallow_acc_multi_buffer": lambda v: isinstance(v, bool),
                "loop_unroll_factor": lambda v: isinstance(v, int) and not isinstance(v, bool) and v >= 1}


def range_options(keywords, evaluate, loc, at, plain=None) -> tuple:
  """(stages, warp_specialize, pingpong) of an `ml.range(...)` loop header's keywords (ast nodes):
  each value `evaluate`d while tracing, mistakes a KernelTypeError at `loc(node)` (`at`: the call;
  `plain`: the loop's header without its keywords, `for i in ml.range(n)`, where its body makes no TMA
  load (loop_bounds.may_load), so stages= would have nothing to pipeline). Triton's `num_stages=` is stages=, and
  nothing where there is nothing to pipeline (since probe 48g; it was MG003 hinting to drop it), and so is its
  `warp_specialize=` there (since probe 51f), unless `stages=` asks for a pipeline; `flatten=`,
  `loop_unroll_factor=` and `disallow_acc_multi_buffer=` tune Triton's compiler only and are dropped (probe 49h)."""
  stages, specialize, pingpong = 1, False, False
  explicit = any(kw.arg == "stages" for kw in keywords)
  for kw in keywords:
    if kw.arg is None:
      raise E.KernelTypeError("ml.range(..., **kwargs): its options are written out", loc(kw.value),
                              hint="ml.range(n, stages=s, warp_specialize=..., pingpong=...) with each keyword"
                                   " given by name (constexprs work as values)")
    if kw.arg in _TUNING_ONLY:      # Triton's tuning hints of no other meaning: taken and dropped (probe 49h)
      value = evaluate(kw.value)
      if not _TUNING_ONLY[kw.arg](value):
        raise E.KernelTypeError(f"{kw.arg} must be a static {'int of at least 1' if kw.arg == 'loop_unroll_factor' else 'bool'},"
                                f" got {shown(value)}", loc(kw.value),
                                hint=f"drop {kw.arg}= ({_TRITON_TUNING[kw.arg]})")
      continue
    if kw.arg not in ("stages", "warp_specialize", "pingpong", "num_stages"):
      meant = {"stage": "stages", "warp_specialization": "warp_specialize",
               "ws": "warp_specialize", "ping_pong": "pingpong"}.get(kw.arg)
      tuning = _TRITON_TUNING.get(kw.arg)
      said = " (Triton's num_stages is ml.range's stages)" if meant == "stages" else ""
      raise E.KernelTypeError(f"ml.range takes no keyword {kw.arg!r}", loc(kw),
                              hint=(f"write {meant}={said}: " if meant else
                                    f"drop {kw.arg}= ({tuning}): " if tuning else "")
                                   + "ml.range(start, stop, step, stages=s, warp_specialize=False, pingpong=False)")
    value = evaluate(kw.value)
    if kw.arg in ("warp_specialize", "pingpong"):
      if not isinstance(value, bool):
        raise E.KernelTypeError(f"{kw.arg} must be a static bool, got {shown(value)}", loc(kw.value),
                                hint=f"{kw.arg}=True or False (a Python bool or a constexpr)")
      if kw.arg == "pingpong":
        pingpong = value
      elif plain is None or explicit:
        specialize = value
      # (else Triton's tl.range(lo, hi, BLOCK_N, warp_specialize=True) over register loads, the fused-attention
      # tutorial's: no TMA load for a producer to issue, so dropped as num_stages= is; probe 51f)
      continue
    if kw.arg == "num_stages" and plain is not None and isinstance(value, int) and not isinstance(value, bool) \
        and value >= 1:
      continue       # (Triton's tuning hint on a loop of register loads, the tutorial's softmax: nothing to pipeline)
    stages = value   # (Triton's num_stages is stages= where the loop makes TMA loads; probe 48g)
    if not isinstance(stages, int) or isinstance(stages, bool) or not 1 <= stages <= 8:
      static = isinstance(stages, int) and not isinstance(stages, bool)
      raise E.KernelTypeError(f"stages must be a static int from 1 to 8, got {shown(stages)}", loc(kw.value),
                              hint="use at most 8 stages (3 or 4 usually hide the loads' latency): ml.range(n,"
                                   " stages=4)" if static and stages > 8 else
                                   "for a loop that is not pipelined, leave stages= out (or stages=1)"
                                   if static else "pass a Python int or a constexpr: ml.range(n, stages=3)")
  if specialize and stages < 2:
    raise E.KernelTypeError("warp_specialize=True needs stages of at least 2", at,
                            hint="ml.range(n, stages=4, warp_specialize=True)")
  if pingpong and not specialize:
    raise E.WarpSpecializeError(
        "pingpong=True needs warp_specialize=True: the compute warpgroups take turns on the tensor cores"
        " while a producer warpgroup loads for both", at,
        hint="ml.range(n, stages=3, warp_specialize=True, pingpong=True) in a kernel with block=256")
  return stages, specialize, pingpong


@builtin
def static_range(cx, *args):
  """Like `range`, but the loop is unrolled while tracing (bounds must be static). Outside a `for`
  header (zip(ml.static_range(2), ws), reversed(...)) it is Python's range of those bounds."""
  if 1 <= len(args) <= 3 and all(isinstance(a, int) and not isinstance(a, bool) for a in args):
    if len(args) == 3 and args[2] == 0:
      raise E.KernelTypeError("ml.static_range's step is 0", cx.loc, hint="use a non-zero step, as range() does")
    return builtins.range(*args)            # (`range` here is ml.range)
  raise E.UnsupportedSyntaxError("ml.static_range takes one to three static ints (it is unrolled while"
                                 " tracing)", cx.loc,
                                 hint="for a bound known only at run time, use range(...) or ml.range(...)")


@builtin
def grouped_ids(cx, pid, num_m, num_n, group=8):
  """(i, j) tile coordinates for a 1-D program id, visiting tiles in groups of `group` rows.

  Consecutive programs then share rows of A and columns of B in L2 (Triton's
  GROUP_M ordering): `i, j = ml.grouped_ids(ml.program_id(0), m // bm, n // bn)`.
  """
  for name, v in (("num_m", num_m), ("num_n", num_n), ("group", group)):
    if not isinstance(v, int) or isinstance(v, bool) or v <= 0:
      raise E.KernelTypeError(f"ml.grouped_ids' {name} must be a positive static int, got {shown(v)}", cx.loc,
                              hint="tile counts are static: m // bm")
  pid = index_operand(cx, pid)
  B = ew.BinOp
  width = group * num_n
  first_m = ew.binary(cx, B.MUL, ew.binary(cx, B.FLOORDIV, pid, width), group)
  size_m = ew.binary(cx, B.MIN, ew.binary(cx, B.SUB, num_m, first_m), group)
  within = ew.binary(cx, B.MOD, pid, width)
  i = ew.binary(cx, B.ADD, first_m, ew.binary(cx, B.MOD, within, size_m))
  j = ew.binary(cx, B.FLOORDIV, within, size_m)
  for k, v in enumerate((i, j)):    # (i, j) is one-to-one in pid: told to the sync pass (design note 19)
    o = cx.b.defs.get(v.id) if isinstance(v, ir.Value) else None
    at = next((n for n, x in enumerate(cx.b.block.ops) if x is o), None) if isinstance(o, ew.Binary) else None
    if at is not None:
      cx.b.block.ops[at] = cx.b.defs[v.id] = dataclasses.replace(o, tile=(k, num_m, num_n, group))
  return i, j
