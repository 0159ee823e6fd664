"""Building typed IR while tracing: the current block, the def table, the kernel's buffers.

The tracer (frontend/tracer.py) walks the user's AST and calls the op families'
type rules (frontend/ops/); those append ops here. The builder knows nothing of
Python syntax, of any particular op, or of MLIR.
"""
from __future__ import annotations

import contextlib
import dataclasses

from . import ir
from .loc import Loc


class Builder:
  def __init__(self, *, cluster=(1, 1, 1), block=128):
    self.block = ir.Block()
    self.defs: dict[int, ir.Op] = {}
    self.allocs: list[ir.Value] = []     # SMEM buffers, in allocation order
    self.loop_indices: set = set()        # ids of for loops' index values (not carries), for messages
    self.small_carries: dict = {}         # a loop's initial vector id -> the small statistic's shape it carries
    self.one_elements = False             # one-element tensors met and carried as their elements (compile.trace)
    self.one_carries: dict = {}           # a loop's initial scalar id -> the one-element tensor's shape it carries
    self.spread_leaves: dict = {}         # (loop's line, col, small shape) -> (spread shape, axes, hint): carried spread
    self.spread_wanted: dict = {}         # an inner loop's small carry it could not spread -> the spread entry
    self.spread_carried: dict = {}        # a loop's initial spread tile's id -> (the statistic's shape, axes, hint)
    self.few_stats: dict = {}             # a few-element keepdims statistic's id -> its elements' scalars
    self.pad_tiles: dict | None = None    # short windows read padded: value id -> its unpadded shape (ops/padded_tiles.py)
    self.small_loads: list | None = []    # small windows read whole as vectors (ops/small_loads.py); None: not so
    self.dot_layouts: list | None = None  # jnp.dot calls ml.dot met a layout error in (the first trace: compile.trace)
    self.chunked: list = []               # locs of jnp.dot products traced as broadcast chunks (jnp_einsum.chunked_product)
    self.no_chunks = False                # a float product ml.dot did not take goes to ml.dot in registers instead
    self.few_leaves: set = set()          # (loop's line, col, shape) of carries a loop carries packed (ops/few_stats.py)
    self.few_carried: dict = {}           # a loop's initial packed vector's id -> the statistic's shape
    self.spread: dict = {}                # a small middle-axis statistic's id -> (its tile spread along the axes, axes, hint)
    self.counts_from: dict = {}           # a run-time loop's index id -> its start (it counts up; ops/run_stores.py)
    self.static_loops: dict = {}          # index id -> (name, line, range text) of a run-time range() with static bounds
    self.weak: set = set()                # ids of values standing for a Python number a loop carries
    self.default_ints: set = set()        # ids of int32 indices jnp gives as int64 under x64 (ops/default_ints.py)
    self.weak_inputs: set = set()         # ids of 0-d inputs made of Python numbers: s[...] is weakly typed
    self.scalar_params: set = set()       # ids of the ml.scalar parameters' values (for hints)
    self.inline_stack: list = []          # the @ml.inline calls being traced: (call site, helper name)
    self.inline_sites: dict = {}          # an op's (file, line, col) -> the inline call paths it came from
    self.cluster = cluster               # the launch configuration some type rules check
    self.threads = block
    self.num_load_slots = 0              # TMA load sites so far; each gets an mbarrier
    self.batch_axis = None               # the grid axis jax.vmap added (frontend/compile.py Batch)
    self.read_only: set[int] = set()     # value ids of the kernel's input refs
    self.aliased: set[int] = set()       # inputs aliased to an output: the kernel may change them
    self.alias_of: dict = {}             # an aliased output's value id: the input it starts as
    self.narrow_gathers: dict = {}       # a gather read wider than asked: its kept columns' id: (table, kept, read)
    self.index_broadcasts: set = set()   # a register gather's indices broadcast to its result (no NumPy alignment)
    self.gathered_reads: set = set()     # ids of whole reads of SMEM buffers of 2 or more axes made for a gather
    self.output_refs: list = []          # the kernel's output refs, in order (hints name them)
    self.index_scratch: dict = {}        # value id -> (SMEM scratch holding it, block it was stored in)
    self.transient: set[int] = set()     # compiler scratches: written whole, then read, by one builtin
    self.x64 = False                     # jax_enable_x64: int and float as dtypes are 64-bit, as jnp's

  def new_load_slot(self) -> int:
    self.num_load_slots += 1
    return self.num_load_slots - 1

  def emit(self, cls, *args, loc: Loc, types=(), names=(), **kw) -> ir.Op:
    results = tuple(ir.Value(t, n) for t, n in zip(types, names or [""] * len(types)))
    if self.pad_tiles is not None:       # (a padded trace: ops/padded_tiles.py)
      from .ops.padded_tiles import on_emit
      on_emit(self, cls, args, results)
    o = cls(*args, loc=loc, results=results, **kw)
    self.block.ops.append(o)
    for r in results:
      self.defs[r.id] = o
    if self.inline_stack:       # for the notes of errors found after tracing (races, uninitialised reads)
      self.inline_sites.setdefault((loc.filename, loc.lineno, loc.col_offset), set()).add(tuple(self.inline_stack))
    return o

  def append(self, o: ir.Op) -> ir.Op:
    """Append an op built elsewhere (a pass's clone), recording its results."""
    self.block.ops.append(o)
    for r in o.results:
      self.defs[r.id] = o
    return o

  @contextlib.contextmanager
  def region(self, block: ir.Block):
    saved, self.block = self.block, block
    try:
      yield block
    finally:
      self.block = saved

  def defining(self, v: ir.Value):
    """The op that defines `v` (None for parameters and block arguments)."""
    return self.defs.get(v.id)


@dataclasses.dataclass
class Call:
  """What a builtin's type rule receives: the builder, the call's location, names for results."""
  b: Builder
  loc: Loc
  name: str = ""      # the name the call's result is about to be bound to (names buffers)
  text: str = ""      # the call's source text, for messages
  operands: object = None   # the user's operand values -> their source text (see `named`)
  access: str = ""    # "read" for x[...] of a ref, "write" for x[...] = v: what a hint about its window shows
  calls: object = None      # fn, args -> fn(*args) traced as the kernel calls it (a helper passed to a builtin)
  builtin: str = ""         # the ml.* function the user called here (its rule may call others on the same Call)

  def invoke(self, fn, args):
    """`fn(*args)` as the kernel's own call of it: an @ml.inline helper, a lambda or def of the body traced in
    place, an ml.* function applied (ml.associative_scan's combine)."""
    if self.calls is None:
      from . import errors as E
      raise E.InternalError("a builtin called a function outside a traced call", self.loc)
    return self.calls(fn, args)

  def named(self, x, default: str = "x") -> str:
    """How messages name the value `x`: the user's text for it where it is an operand the user
    wrote at this call or operator, else its name, else `default`."""
    text = self.operands.get(x) if self.operands is not None else None
    return text or getattr(x, "name", None) or default
