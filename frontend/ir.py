"""The typed kernel IR: the only contract between frontend/ and lowering/.

A `Kernel` holds parameters (GMEM refs), SMEM allocations and a `Block` of ops.
Ops are frozen dataclasses with a required `loc`; operands are `Value`s (or
Python scalars, weakly typed) and each op defines its `results`. Structured
control flow (`For`, `If`) owns nested `Block`s, as in MLIR's scf.

The op classes are declared by family in frontend/ops/ (each with its `ml.`
builtin, type rule and `Traits`); this module holds what every op shares: the
base class, the traits record the passes read, and IR utilities (walking,
substitution, def tables, the text dump).
"""
from __future__ import annotations

import dataclasses
import enum
import itertools
from typing import Callable, ClassVar, Union

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

  @property
  def ref(self) -> str:
    """`%id`: how IR dumps name the value."""
    return f"%{self.id}"

  def __repr__(self):
    # Messages (and tuples of values in them) show the user's name, never an internal id.
    return self.name or f"a {self.type}"

  __str__ = __repr__


Operand = Union[Value, int, float, bool]


@dataclasses.dataclass
class Block:
  ops: list = dataclasses.field(default_factory=list)
  args: tuple[Value, ...] = ()


@dataclasses.dataclass(frozen=True)
class Idx:
  """A view index on one dimension: a static or dynamic start and a size.

  `squeeze` marks an integer index (the dimension disappears from the view).
  """
  start: Operand
  size: int
  squeeze: bool = False


# ---------------------------------------------------------------- traits
class Access(enum.Enum):
  """What an op does that the synchronisation pass must order (MLIR's memory effects)."""
  REG_READ = "reg_read"          # registers read the ref (a synchronous load)
  REG_WRITE = "reg_write"        # registers write the ref
  TMA_READ = "tma_read"          # an async TMA copy reads the ref (SMEM -> GMEM)
  TMA_WRITE = "tma_write"        # an async TMA copy lands in the ref (GMEM -> SMEM)
  MMA_READ = "mma_read"          # the tensor cores read the ref asynchronously
  MMA_ISSUE = "mma_issue"        # starts tensor-core work (no ref): complete at a DotWait
  CTA_BARRIER = "cta_barrier"    # all threads of the CTA meet
  CLUSTER_BARRIER = "cluster_barrier"   # all threads of the cluster meet; SMEM is published


class LayoutRule(enum.Enum):
  """How an op's register results relate to its operands' layouts (frontend/layouts.py)."""
  NONE = "none"                  # no register tensor results; operands unconstrained
  ELEMENTWISE = "elementwise"    # results and tensor operands share one layout
  FRESH = "fresh"                # a new tensor (splat, iota) that takes whatever layout its users need
  MEMORY = "memory"              # a register <-> ref transfer: the value follows its SMEM buffer's tiling
  DOT = "dot"                    # the tensor-core accumulator layout; operands tiled in SMEM
  REDUCE = "reduce"              # the result is the operand's layout with the reduced axes removed
  BROADCAST = "broadcast"        # the operand is the result's layout with the new axes removed
  REGION = "region"              # loop carries and branch results share layouts


@dataclasses.dataclass(frozen=True)
class Traits:
  """What the passes know about an op, declared with it (never re-derived by isinstance)."""
  effects: Callable[["Op"], list] = lambda o: []   # [(ref Value or None, Access)]
  layout: LayoutRule = LayoutRule.NONE
  pure: bool = False          # no effects: may be cloned, hoisted, moved across pipeline stages, dropped
  inserted: bool = False      # synchronisation the compiler inserts; users never write it
  # Its register accesses of its ref give each thread other threads' elements (a transpose or a
  # scan through SMEM scratch): the sync pass never counts them as thread-private.
  moves_elements: bool = False
  # Its lowering takes register tensors split by rows among warpgroups (each warpgroup its
  # ctx.local_shape rows: frontend/layouts.py splits strided tensors that only such ops touch).
  splits: bool = False


_OPERAND_FIELDS: dict[type, tuple[str, ...]] = {}     # each op class's fields that may hold operands


class Op:
  loc: Loc
  results: tuple[Value, ...]
  regions: ClassVar[tuple[str, ...]] = ()
  traits: ClassVar[Traits]

  @property
  def result(self) -> Value:
    (r,) = self.results
    return r

  def operands(self) -> list:
    names = _OPERAND_FIELDS.get(type(self))
    if names is None:         # (dataclasses.fields per call was a fifth of the layout pass's time on big kernels)
      names = _OPERAND_FIELDS[type(self)] = tuple(
          f.name for f in dataclasses.fields(self) if f.name not in ("loc", "results") and f.name not in self.regions)
    out = []
    for name in names:
      v = getattr(self, name)
      if isinstance(v, Value):
        out.append(v)
      elif isinstance(v, tuple):
        for x in v:
          if isinstance(x, Value):
            out.append(x)
          elif isinstance(x, Idx) and isinstance(x.start, Value):
            out.append(x.start)
    return out


ALL_OPS: list[type] = []


def op(traits: Traits):
  """Declare an op class: a frozen dataclass with its traits, registered in ALL_OPS."""
  def deco(cls):
    cls = dataclasses.dataclass(frozen=True, eq=False)(cls)
    cls.traits = traits
    ALL_OPS.append(cls)
    return cls
  return deco


def traits_of(o: Op) -> Traits:
  """The traits of `o`; an op declared without them is a compiler bug (passes fail closed)."""
  t = type(o).__dict__.get("traits")
  if not isinstance(t, Traits):
    from .errors import InternalError
    raise InternalError(f"op {type(o).__name__} has no traits: declare it with @ir.op(Traits(...))", o.loc)
  return t


# ---------------------------------------------------------------- kernels
class Captured(dict):
  """The module-level names a kernel's source read while tracing, and their values: what a
  cached specialisation depends on besides its arguments. Shared, not copied, by deepcopy;
  pickled with an opaque stand-in for values that do not pickle (modules, functions)."""

  def __deepcopy__(self, memo):
    return self

  def __reduce__(self):
    import pickle
    out = {}
    for k, v in self.items():
      try:
        pickle.dumps(v)
        out[k] = v
      except Exception:
        out[k] = f"<{type(v).__name__} {getattr(v, '__name__', '')}>"
    return (Captured, (out,))



@dataclasses.dataclass
class Param:
  value: Value
  name: str
  is_output: bool
  loc: Loc | None = None       # the parameter in the kernel's signature


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
  globals_read: dict = dataclasses.field(default_factory=lambda: Captured())   # module names read -> value
  scratch_ids: dict = dataclasses.field(default_factory=dict)    # SMEM the compiler added (reductions) -> its exchange slots
  accumulated: dict = dataclasses.field(default_factory=dict)    # output id -> AtomicKind updating it
  aliases: dict = dataclasses.field(default_factory=dict)        # input index -> output index (same memory)
  pipelines: list = dataclasses.field(default_factory=list)      # frontend/pipeline_plan.py Staged, a loop each
  batch_axis: int | None = None      # the grid axis jax.vmap added: its programs work on separate batch slices
  batch_sizes: tuple = ()            # its levels' sizes, outermost first (the batch element of a program)
  batch_lead: dict = dataclasses.field(default_factory=dict)     # param value id -> its leading batch dimensions

  @property
  def own_grid(self) -> tuple:
    """The grid the kernel was written for: under jax.vmap, the batch's axis is 1 there."""
    return tuple(1 if a == self.batch_axis else g for a, g in enumerate(self.grid))

  @property
  def inputs(self):
    return [p for p in self.params if not p.is_output]

  @property
  def outputs(self):
    return [p for p in self.params if p.is_output]


# ---------------------------------------------------------------- utilities
def walk(block: Block):
  """Every op of `block` and of its nested regions, in program order."""
  for o in block.ops:
    yield o
    for r in o.regions:
      yield from walk(getattr(o, r))


def path_to(block: Block, target) -> list:
  """The region ops from `block` down to `target` (outermost first, target last); [] if absent."""
  for o in block.ops:
    if o is target:
      return [o]
    for r in o.regions:
      sub = path_to(getattr(o, r), target)
      if sub:
        return [o] + sub
  return []


def def_table(block: Block) -> dict[int, Op]:
  """Value id -> the op defining it, for every op under `block`."""
  return {r.id: o for o in walk(block) for r in o.results}


def _removable(o) -> bool:
  """An op whose only effect is its results: pure, or a plain register read of memory."""
  t = traits_of(o)
  return t.pure or (bool(o.results) and all(a == Access.REG_READ for _, a in t.effects(o)))


def prune_dead(block: Block) -> None:
  """Drop side-effect-free ops (pure, or register reads) whose results nothing uses, to a fixpoint: a worklist over
  use counts (a whole-block pass per level of a dead chain was a twentieth of a big kernel's trace)."""
  uses: dict[int, int] = {}
  producer: dict[int, Op] = {}
  for o in walk(block):
    for v in o.operands():
      uses[id(v)] = uses.get(id(v), 0) + 1
    for r in o.regions:
      for a in getattr(o, r).args:
        uses[id(a)] = uses.get(id(a), 0) + 1
    for r in o.results:
      producer[id(r)] = o

  def dead_now(o):
    return bool(o.results) and not o.regions and not any(uses.get(id(r), 0) for r in o.results) and _removable(o)

  dead: set[int] = set()
  work = [o for o in walk(block) if dead_now(o)]
  while work:
    o = work.pop()
    if id(o) in dead:
      continue
    dead.add(id(o))
    for v in o.operands():
      uses[id(v)] -= 1
      p = producer.get(id(v))
      if uses[id(v)] == 0 and p is not None and id(p) not in dead and dead_now(p):
        work.append(p)
  if not dead:
    return

  def visit(blk):
    for o in blk.ops:
      for r in o.regions:
        visit(getattr(o, r))
    blk.ops[:] = [o for o in blk.ops if id(o) not in dead]

  visit(block)


def _sub_one(x, mapping):
  if isinstance(x, Value):
    return mapping.get(x, x)
  if isinstance(x, Idx) and isinstance(x.start, Value) and x.start in mapping:
    return dataclasses.replace(x, start=mapping[x.start])
  return x


def substitute(o: Op, mapping: dict) -> Op:
  """`o` with its operands replaced through `mapping` (value -> value); regions untouched."""
  changes = {}
  for f in dataclasses.fields(o):
    if f.name in ("loc", "results") or f.name in o.regions:
      continue
    v = getattr(o, f.name)
    if isinstance(v, Value) and v in mapping:
      changes[f.name] = mapping[v]
    elif isinstance(v, tuple) and any(isinstance(x, (Value, Idx)) for x in v):
      new = tuple(_sub_one(x, mapping) for x in v)
      if any(a is not b for a, b in zip(new, v)):    # an op nothing maps stays itself
        changes[f.name] = new
  return dataclasses.replace(o, **changes) if changes else o


def substitute_deep(o: Op, mapping: dict) -> Op:
  """`substitute`, also inside `o`'s regions (in place)."""
  o = substitute(o, mapping)
  for r in o.regions:
    blk = getattr(o, r)
    blk.ops[:] = [substitute_deep(x, mapping) for x in blk.ops]
  return o


def retyped(o: Op, mapping: dict, type_of) -> Op:
  """`o` with its operands replaced through `mapping` and fresh results of the types `type_of(result)`: the same math
  at another shape, or on scalars."""
  return dataclasses.replace(substitute(o, mapping), results=tuple(Value(type_of(r), r.name) for r in o.results))


def clone(o: Op, mapping: dict) -> Op:
  """A copy of `o` (no regions) with fresh results; `mapping` gains old -> new results."""
  new_results = tuple(Value(r.type, r.name) for r in o.results)
  c = dataclasses.replace(substitute(o, mapping), results=new_results)
  for old, new in zip(o.results, new_results):
    mapping[old] = new
  return c


# ---------------------------------------------------------------- text
def dump(kernel: Kernel) -> str:
  """The typed IR as text, for users and tests."""
  lines = [f"kernel @{kernel.name} grid={kernel.grid} block={kernel.block}"
           f" cluster={kernel.cluster}"]
  for p in kernel.params:
    lines.append(f"  param {p.value.ref} {p.name}: {p.value.type}"
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
  if isinstance(x, Value):
    return x.ref
  return repr(x)


def _dump_block(block: Block, lines, ind):
  for o in block.ops:
    res = ", ".join(f"{r.ref}: {r.type}" for r in o.results)
    fields = [f for f in dataclasses.fields(o)    # optional fields left unset (False, (), Load.keep None) are not shown
              if f.name not in ("loc", "results") and f.name not in o.regions
              and not (f.default is False and getattr(o, f.name) is False)
              and not (f.default == () and getattr(o, f.name) == ())
              and not (f.name == "keep" and getattr(o, f.name) is None)]
    args = " ".join(f"{f.name}={_fmt(getattr(o, f.name))}" for f in fields)
    head = f"{res} = " if res else ""
    lines.append(f"{ind}{head}{type(o).__name__.lower()} {args}  # {o.loc.short}")
    if o.regions:
      for r in o.regions:
        blk = getattr(o, r)
        lines.append(f"{ind}  {r}({', '.join(a.ref for a in blk.args)}):")
        _dump_block(blk, lines, ind + "    ")
