"""The typed kernel IR: the only contract between frontend/ and lowering/.

A `Kernel` holds parameters (GMEM refs), SMEM allocations and a `Block` of ops.
Ops are frozen dataclasses with a required `loc`; operands are `Value`s (or
Python scalars, weakly typed) and each op defines at most its `results`.
Structured control flow (`For`, `If`) owns nested `Block`s, as in MLIR's scf.

Every op here has a lowering rule (lowering/rules.py) and an interpreter rule
(lowering/interpret.py); tests/test_op_tables.py checks both tables.
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import ClassVar, Union

from .loc import Loc
from .types import Type

_ids = itertools.count()


class Value:
  """An SSA value. `type` is filled at creation and resolved after inference."""
  __slots__ = ("type", "name", "id")

  def __init__(self, type: Type, name: str = ""):
    self.type = type
    self.name = name          # the user's expression, for messages and IR dumps
    self.id = next(_ids)

  def __repr__(self):
    return f"%{self.id}"


Operand = Union[Value, int, float, bool]


@dataclasses.dataclass
class Block:
  ops: list = dataclasses.field(default_factory=list)
  args: tuple[Value, ...] = ()


# ---------------------------------------------------------------- index forms
@dataclasses.dataclass(frozen=True)
class Idx:
  """A view index on one dimension: a static or dynamic start and a size.

  `squeeze` marks an integer index (the dimension disappears from the view).
  """
  start: Operand
  size: int
  squeeze: bool = False


class Op:
  loc: Loc
  results: tuple[Value, ...]
  regions: ClassVar[tuple[str, ...]] = ()

  @property
  def result(self) -> Value:
    (r,) = self.results
    return r

  def operands(self) -> list:
    out = []
    for f in dataclasses.fields(self):
      if f.name in ("loc", "results") or f.name in self.regions:
        continue
      v = getattr(self, f.name)
      if isinstance(v, Value):
        out.append(v)
      elif isinstance(v, tuple):
        for x in v:
          if isinstance(x, Value):
            out.append(x)
          elif isinstance(x, Idx) and isinstance(x.start, Value):
            out.append(x.start)
    return out


def op(cls):
  return dataclasses.dataclass(frozen=True, eq=False)(cls)


class BinOp(enum.Enum):
  ADD = "+"; SUB = "-"; MUL = "*"; DIV = "/"; FLOORDIV = "//"; MOD = "%"
  MAX = "max"; MIN = "min"
  AND = "&"; OR = "|"; XOR = "^"


class CmpOp(enum.Enum):
  LT = "<"; LE = "<="; GT = ">"; GE = ">="; EQ = "=="; NE = "!="


class UnOp(enum.Enum):
  NEG = "neg"; EXP = "exp"; EXP2 = "exp2"; LOG = "log"; SQRT = "sqrt"
  RSQRT = "rsqrt"; TANH = "tanh"; ABS = "abs"; NOT = "not"


# ---------------------------------------------------------------- ops
@op
class ProgramId(Op):
  axis: int
  loc: Loc
  results: tuple[Value, ...]


@op
class NumPrograms(Op):
  axis: int
  loc: Loc
  results: tuple[Value, ...]


@op
class Constant(Op):
  """A Python scalar materialised as a CTA-uniform scalar of `dtype`."""
  value: int | float | bool
  loc: Loc
  results: tuple[Value, ...]


@op
class SmemAlloc(Op):
  """An SMEM buffer; lives for the whole kernel."""
  loc: Loc
  results: tuple[Value, ...]


@op
class View(Op):
  """A window of a root ref (a parameter, an SmemAlloc or a ClusterRef)."""
  ref: Value
  index: tuple[Idx, ...]
  loc: Loc
  results: tuple[Value, ...]


@op
class ClusterRef(Op):
  """The same SMEM buffer in another CTA of the cluster (`cta` along `axis`)."""
  ref: Value
  cta: Operand
  axis: int
  loc: Loc
  results: tuple[Value, ...]


@op
class Load(Op):
  """Read a whole ref (GMEM or SMEM) into registers."""
  ref: Value
  loc: Loc
  results: tuple[Value, ...]


@op
class Store(Op):
  """Write a register tensor (same shape and dtype) into a ref."""
  ref: Value
  value: Value
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class Copy(Op):
  """An asynchronous TMA copy, GMEM -> SMEM or SMEM -> GMEM.

  `slot` numbers the copy sites that load SMEM; each has its own barrier. A
  pipelined copy (frontend/pipeline.py) uses barrier `slot + stage`.
  """
  src: Value
  dst: Value
  slot: int
  loc: Loc
  results: tuple[Value, ...] = ()
  stage: Operand = 0


@op
class Binary(Op):
  kind: BinOp
  lhs: Operand
  rhs: Operand
  loc: Loc
  results: tuple[Value, ...]


@op
class Compare(Op):
  kind: CmpOp
  lhs: Operand
  rhs: Operand
  loc: Loc
  results: tuple[Value, ...]


@op
class Unary(Op):
  kind: UnOp
  x: Value
  loc: Loc
  results: tuple[Value, ...]


@op
class Where(Op):
  cond: Value
  on_true: Operand
  on_false: Operand
  loc: Loc
  results: tuple[Value, ...]


@op
class Cast(Op):
  x: Value
  loc: Loc
  results: tuple[Value, ...]


@op
class Full(Op):
  """A tensor filled with one (static or scalar) value; also scalar broadcast."""
  value: Operand
  loc: Loc
  results: tuple[Value, ...]


@op
class Arange(Op):
  """`[0, 1, ..., n)` along `dim` of the result's shape."""
  dim: int
  loc: Loc
  results: tuple[Value, ...]


@op
class Dot(Op):
  """`acc + a @ b` on the tensor cores (WGMMA), issued asynchronously.

  `a` (m, k) and `b` (k, n) are SMEM refs that frontend/layouts.py tiles and
  swizzles for the tensor cores; `acc` is an (m, n) tensor in the WGMMA layout,
  or None for zeros. The sync pass waits for the result before it is read.
  """
  a: Value
  b: Value
  acc: Value | None
  loc: Loc
  results: tuple[Value, ...]


@op
class DotWait(Op):
  """Wait until at most `pending` issued Dot groups are still running."""
  pending: int
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class For(Op):
  """`for iv in range(start, stop, step)` carrying `inits` through `body`.

  body.args = (iv, *carried); the body ends with a `Yield` of the new carries.
  `stages` > 1 asks for a software pipeline (frontend/pipeline.py): its TMA
  loads run `stages - 1` iterations ahead and its dots overlap them.
  """
  start: Operand
  stop: Operand
  step: Operand
  inits: tuple[Value, ...]
  body: Block
  loc: Loc
  results: tuple[Value, ...]
  stages: int = 1
  regions: ClassVar = ("body",)


@op
class If(Op):
  cond: Value
  then_block: Block
  else_block: Block
  loc: Loc
  results: tuple[Value, ...]
  regions: ClassVar = ("then_block", "else_block")


@op
class Yield(Op):
  values: tuple[Value, ...]
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class Print(Op):
  """`print(...)`: static text and values. Interpret mode prints everything, per program;
  the GPU prints the text and scalars (once per warpgroup)."""
  parts: tuple
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class Breakpoint(Op):
  """`breakpoint()`: in interpret mode, a debugger with the kernel's names; no-op on the GPU."""
  names: tuple[str, ...]
  values: tuple
  loc: Loc
  results: tuple[Value, ...] = ()


# --- synchronisation ops: inserted by frontend/sync.py, never by users.
@op
class WaitLoad(Op):
  """Wait on the barrier of copy site `slot` (+ `stage`): its bytes have landed."""
  slot: int
  loc: Loc
  results: tuple[Value, ...] = ()
  stage: Operand = 0


@op
class AwaitStores(Op):
  """Wait for in-flight TMA stores: to stop reading SMEM (`read_only`) or to finish."""
  read_only: bool
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class CommitShared(Op):
  """Make register writes to SMEM visible to the TMA engine (fence + barrier)."""
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class Barrier(Op):
  """All threads of the CTA meet (orders SMEM accesses between threads)."""
  loc: Loc
  results: tuple[Value, ...] = ()


@op
class ClusterSync(Op):
  """All threads of all CTAs in the cluster meet (ml.cluster_sync())."""
  loc: Loc
  results: tuple[Value, ...] = ()


ALL_OPS = [c for c in list(globals().values())
           if isinstance(c, type) and issubclass(c, Op) and c is not Op]


@dataclasses.dataclass
class Param:
  value: Value
  name: str
  is_output: bool


@dataclasses.dataclass
class Kernel:
  """A traced, inferred and checked kernel, ready for a backend."""
  name: str
  params: list[Param]
  smem: list[Value]               # results of SmemAlloc, in allocation order
  body: Block
  grid: tuple[int, int, int]
  block: int
  cluster: tuple[int, int, int]
  num_load_slots: int
  loc: Loc
  smem_plan: object = None            # frontend/smem.py SmemPlan
  smem_layouts: dict = dataclasses.field(default_factory=dict)   # alloc value id -> SmemLayout

  @property
  def inputs(self):
    return [p for p in self.params if not p.is_output]

  @property
  def outputs(self):
    return [p for p in self.params if p.is_output]


def walk(block: Block):
  """Every op of `block` and of its nested regions, in program order."""
  for o in block.ops:
    yield o
    for r in o.regions:
      yield from walk(getattr(o, r))


def dump(kernel: Kernel) -> str:
  """The typed IR as text, for users and tests."""
  lines = [f"kernel @{kernel.name} grid={kernel.grid} block={kernel.block}"
           f" cluster={kernel.cluster}"]
  for p in kernel.params:
    lines.append(f"  param {p.value!r} {p.name}: {p.value.type}"
                 f"{' (output)' if p.is_output else ''}")
  _dump_block(kernel.body, lines, "  ")
  return "\n".join(lines)


def _fmt(x) -> str:
  if isinstance(x, Idx):
    s = _fmt(x.start)
    return s if x.squeeze else f"{s}:+{x.size}"
  if isinstance(x, tuple):
    return "[" + ", ".join(_fmt(i) for i in x) + "]"
  if isinstance(x, enum.Enum):
    return x.name.lower()
  return repr(x)


def _dump_block(block: Block, lines, ind):
  for o in block.ops:
    res = ", ".join(f"{r!r}: {r.type}" for r in o.results)
    fields = [f for f in dataclasses.fields(o)
              if f.name not in ("loc", "results") and f.name not in o.regions]
    args = " ".join(f"{f.name}={_fmt(getattr(o, f.name))}" for f in fields)
    head = f"{res} = " if res else ""
    lines.append(f"{ind}{head}{type(o).__name__.lower()} {args}  # {o.loc.short}")
    if o.regions:
      for r in o.regions:
        blk = getattr(o, r)
        lines.append(f"{ind}  {r}({', '.join(repr(a) for a in blk.args)}):")
        _dump_block(blk, lines, ind + "    ")
