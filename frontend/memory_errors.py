"""The words of the memory proofs' errors that interpret mode also raises: an output left
unwritten (UncoveredOutputError) and a read of what nothing wrote (UninitializedReadError).
The compile-time checks (frontend/checks.py) and interpret mode (lowering/interpret_memory.py)
describe the same mistake the same way."""
from __future__ import annotations

import math

import numpy as np

from . import errors as E
from . import hw
from . import ir
from .coverage import describe
from .ir import Access as A
from .loc import call_at, expr_at, expr_of
from .ops.access import MaskedStore
from .ops.memory import Copy, View
from .types import Space

READS = (A.REG_READ, A.TMA_READ, A.MMA_READ)


def _root(defs, ref):
  d = defs.get(ref.id)
  return d.ref if isinstance(d, View) else ref


def _accumulated(loc, name):
  """(the window, the part) as the user wrote them of a statement at `loc` that adds into output `name`,
  `o[...] += part` or `o[i] = o[i] + part`, with the window as an atomic takes it (`o`, `o.at[i]`); else None."""
  import ast
  try:
    st = ast.parse(getattr(loc, "source_line", "").strip()).body[0]
  except (SyntaxError, IndexError, ValueError):
    return None
  if isinstance(st, ast.AugAssign) and isinstance(st.op, ast.Add):
    target, part = st.target, st.value
  elif isinstance(st, ast.Assign) and len(st.targets) == 1 and isinstance(st.value, ast.BinOp) \
      and isinstance(st.value.op, ast.Add):
    target = st.targets[0]
    sides = [v for v in (st.value.left, st.value.right) if ast.unparse(v) == ast.unparse(target)]
    if not sides:
      return None
    part = st.value.right if sides[0] is st.value.left else st.value.left
  else:
    return None
  if not isinstance(target, ast.Subscript):
    return None
  ref, idx = ast.unparse(target.value), ast.unparse(target.slice)
  if ref.startswith(f"{name}.at[") and idx in ("...", ":"):       # c.at[rows, cols][...] += part
    return ref, ast.unparse(part)
  if ref != name:
    return None
  return (name if idx in ("...", ":") else f"{name}.at[{idx}]"), ast.unparse(part)


def gathered_table_read(name, region, where, shape, loc):
  """MG601 of a gather from an SMEM table of 2 or more axes (a DP table's neighbours, `D.at[i - 1, j]`, read by
  masked gathers along a wavefront; probe 72a): such a gather reads the whole buffer, cells not computed yet too, so
  "fill it first" did not say what to write. A flat table's gather reads only the elements it names (and a masked
  one only those its mask keeps)."""
  import math
  cols = math.prod(shape[1:])
  index = " + ".join([f"i * {cols}"] + (["j"] if len(shape) == 2 else [f"j * {math.prod(shape[2:])}", "k"]))
  return E.UninitializedReadError(
      f"{region} is read{where} before anything writes it: a gather from the {len(shape)}-D SMEM buffer {name}"
      f" reads all of it, and SMEM starts with garbage", loc,
      hint=f"keep the table flat, {name} = ml.smem(({math.prod(shape)},), ...), and gather and scatter at"
           f" {name}.at[{index}]: a gather of a 1-D buffer reads only the elements it names (a masked one only"
           f" those its mask keeps); or fill all of {name} before this read ({name}[...] = ml.zeros(...))")


def uninitialized_read(name, region, where, gmem: bool, loc, keep=None, dtype=None, programs=1, atomic=None,
                       mma_shape=None, source=None):
  """The UninitializedReadError for a read of `region` of buffer `name` (also used by interpret mode);
  `keep`: the read's Load.keep (a masked SMEM load's); `dtype`: the buffer's element type's name;
  `programs`: how many the grid launches (several adding into an output: split-K); `mma_shape`: the
  buffer's shape where ml.dot reads it (a vector copied into one row of an operand tile), `source` the
  name of the array a copy fills it from."""
  added = _accumulated(loc, name) if gmem and programs > 1 else None
  if added is not None:        # `c[...] += partial`: programs adding their parts (split-K) add atomically
    window, part = added
    narrow = (f" (each {dtype} add rounds: for a sum of many parts, give {name} a float32 out_shape and convert"
              f" after the call)" if dtype in ("float16", "bfloat16") else "")
    return E.UninitializedReadError(
        f"{region} is read{where} before this program writes it: outputs start uninitialised", loc,
        hint=f"to add the parts of several programs into {name} (split-K), add them atomically:"
             f" ml.atomic_add({window}, {part}) (an output only atomics update starts at 0){narrow}; within"
             f" one program, keep the running value in registers and store it once (acc = acc + ... in the loop,"
             f" {name}[...] = acc after)")
  if gmem:
    return E.UninitializedReadError(
        f"{region} is read{where} before this program writes it: outputs start uninitialised", loc,
        hint=f"read inputs, not outputs: to accumulate into {name}, keep the running value in registers and"
             f" store it once (acc = ml.zeros(shape, dtype) before the loop, acc = acc + ... in it,"
             f" {name}[...] = acc after); to update an array in place, pass it as an input and alias it"
             f" to {name}: @mgpu_kernel(..., input_output_aliases={{input_index: output_index}}); a value another"
             f" program writes cannot be waited for (programs run in no set order): a prefix over programs (a"
             f" decoupled look-back) is two kernels, one writing each program's total, and one taking"
             f" jnp.cumsum(totals) - totals as an input")
  fill = f"fill {name} first, with ml.copy(x.at[...], {name}) or {name}[...] = value, on every path to this read"
  if keep == ():
    fill = (f"the mask cannot be proved to keep {region} off (it is not a condition on ml.arange and constants):"
            f" {fill}")
  elif keep is not None:
    fill = f"the mask is on for elements of {region}: turn it off there, or {fill}"
  if atomic is not None:     # an atomic update of SMEM combines with what the buffer holds
    fill = atomic_fill_hint(name, atomic, dtype)
  elif mma_shape is not None and keep is None and dtype and len(mma_shape) == 2:
    fill = _mma_fill_hint(name, mma_shape, dtype, source)
  return E.UninitializedReadError(
      f"{region} is read{where} before anything writes it: SMEM starts with garbage", loc, hint=fill)


def _mma_fill_hint(name, shape, dtype, source) -> str:
  """An ml.dot operand buffer partly filled (a vector copied into row 0 of an (8, k) tile): the
  tensor cores read all of it. A row of A (of a b passed transposed) the program leaves unfilled only
  feeds a row (a column) of the product it may drop, but the proof does not follow rows through the
  product, and garbage in the K extent spoils every element: the buffer is filled whole, by TMA from an
  array of fewer rows (the engine reads zeros past its end), or zeroed first where registers may write it
  (a multiple of 64 rows, as tensor-core tiles are stored from registers)."""
  rows, k = shape
  x = source or "x"
  fill = (f"ml.dot reads all of {name}, every row and column of its tile, and SMEM starts with garbage: fill it"
          f" whole by TMA from an array of fewer rows, ml.copy({x}.at[ml.ds(0, {rows})], {name}) (a vector"
          f" as a (1, {k}) array, {x}.reshape(1, {k}) outside the kernel): the TMA engine reads zeros past"
          f" {x}'s end, so the other rows are 0")
  if rows % hw.MMA_M == 0:
    fill += (f"; or zero it first, {name}[...] = ml.zeros({tuple(shape)}, jnp.{dtype}), then copy whole tiles"
             f" (8 rows) into it")
  return fill


def atomic_fill_hint(name, kind, dtype) -> str:
  """The hint for an atomic update of SMEM nothing filled: start the buffer at the update's identity."""
  from .ops.atomic import AtomicKind, identity
  from .dtypes import from_name
  start = identity(kind, from_name(dtype)) if dtype and kind in (AtomicKind.MAX, AtomicKind.MIN, AtomicKind.AND) else 0
  fill = (f"{name}[...] = ml.zeros({name}.shape, {name}.dtype)" if start == 0 else
          f"{name}[...] = ml.full({name}.shape, {start!r}, {name}.dtype)")
  return (f"ml.atomic_{kind.name.lower()} combines with what {name} holds, and SMEM starts with garbage: fill"
          f" {name} first, {fill}, on every path to this update")


def masked_store(kernel: ir.Kernel, out_id: int):
  """(loc, (ref, mask, value) as the user wrote them) of the first masked store into the output
  `out_id` of `kernel`, or None: interpret mode's UncoveredOutputError names it (elements every
  program's windows cover that no program wrote were skipped by its mask)."""
  defs = ir.def_table(kernel.body)
  for o in ir.walk(kernel.body):
    if isinstance(o, MaskedStore) and _root(defs, o.ref).id == out_id:
      return masked_store_words(o, next(p.name for p in kernel.outputs if p.value.id == out_id))
  return None


def masked_store_words(o: MaskedStore, name: str):
  """(loc, (ref, mask, value) as the user wrote them) of the masked store `o` into output `name`."""
  written = _store_call(o.loc)      # the mask and value as the user wrote them, where known
  return o.loc, (o.ref.name or f"{name}.at[...]", written.get("mask") or o.mask.name or "mask",
                 written.get("value") or o.value.name or "value")


def skipped_store(kernel: ir.Kernel, out_id: int, skipped: set):
  """(store loc, if loc) of a write into the output `out_id` in a branch of a run-time `if` that
  some program did not take (`skipped`: ids of such blocks, from interpret mode) while the other
  branch writes nothing into it, or None: interpret mode's UncoveredOutputError says the condition
  skipped the write (the windows the programs may write cover the output)."""
  from .ops.control import For, If, While
  defs = ir.def_table(kernel.body)

  def write(blk):
    return next((o for o in ir.walk(blk) for ref, kind in ir.traits_of(o).effects(o)
                 if ref is not None and kind not in READS and _root(defs, ref).id == out_id), None)
  for o in ir.walk(kernel.body):
    if isinstance(o, If):
      for blk, other in ((o.then_block, o.else_block), (o.else_block, o.then_block)):
        w = write(blk) if id(blk) in skipped else None
        if w is not None and write(other) is None:
          return w.loc, o.loc, "shared" if _same_window(defs, w, out_id) else "if"
    elif isinstance(o, (For, While)) and id(o.body) in skipped and (w := write(o.body)) is not None:
      return w.loc, o.loc, "loop"      # a run-time loop that ran no trip in some program
  return None


def _same_window(defs, w, out_id) -> bool:
  """Whether op `w` writes the output `out_id` at a window every program computes alike: its starts
  made of constants alone (a flag `found[...] = 1`), not of program ids, loop counters or memory."""
  from .ops.control import ProgramId
  refs = [ref for ref, kind in ir.traits_of(w).effects(w) if ref is not None and kind not in READS
          and _root(defs, ref).id == out_id]
  todo, seen = [x for r in refs for x in (defs[r.id].operands() if isinstance(defs.get(r.id), View) else ())], set()
  while todo:
    x = todo.pop()
    if not isinstance(x, ir.Value) or x.id in seen or x.id == out_id:
      continue
    seen.add(x.id)
    d = defs.get(x.id)
    if d is None or isinstance(d, ProgramId) or not ir.traits_of(d).pure:
      return False                     # a loop counter, a program id, a read of memory
    todo.extend(d.operands())
  return bool(refs)


def _store_call(loc) -> dict:
  """{"mask": text, "value": text} of a `ref.store(value, mask=...)` call at `loc`."""
  import ast
  node = call_at(loc)
  if node is None:
    return {}
  args = {k.arg: k.value for k in node.keywords if k.arg in ("mask", "value")}
  f = node.func
  if isinstance(f, ast.Attribute) and f.attr == "store":     # ref.store(value, ...), ml.store(ref, value, ...)
    first = node.args[0] if node.args else None      # tl.store(x.at[...], v): the language under Triton's name
    k = 1 if isinstance(f.value, ast.Name) and f.value.id in ("ml", "tl") or isinstance(first, ast.Subscript) \
        and isinstance(first.value, ast.Attribute) and first.value.attr == "at" else 0
    if len(node.args) > k:
      args.setdefault("value", node.args[k])
  return {k: ast.unparse(v) for k, v in args.items()}


def _extent_mask(ref, name, rank):
  """The mask of `name`'s own extent for the window `ref` as the user wrote it (`o.at[b, ml.ds(i * 64, 64),
  h, :]`: `(i * 64 + ml.arange(64))[:, None] < o.shape[1])`), where one ml.ds dimension may run past the
  end; else None."""
  import ast
  node = expr_of(ref)
  if node is None:
    return None
  if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Attribute) and node.value.attr == "at"):
    return None
  items = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  if any(isinstance(i, ast.Constant) and i.value is Ellipsis for i in items) or len(items) > rank:
    return None
  items = items + [ast.Slice()] * (rank - len(items))
  kept = [d for d, i in enumerate(items) if isinstance(i, (ast.Slice, ast.Call))]
  ds = [d for d in kept if isinstance(items[d], ast.Call) and ast.unparse(items[d].func) == "ml.ds"
        and len(items[d].args) == 2]
  if len(ds) != 1:
    return None
  d = ds[0]
  start, size = (ast.unparse(a) for a in items[d].args)
  pos = f"{start} + ml.arange({size})" if start != "0" else f"ml.arange({size})"
  if len(kept) > 1:
    pos = f"({pos})[{', '.join(':' if k == d else 'None' for k in kept)}]"
  return f"{pos} < {name}.shape[{d}])"


def masked_outside_hint(loc, name, rank, before, d=None, data=True) -> str | None:
  """For a masked load or store (`x.at[...].load(mask=m)`, `ml.load(x.at[...], mask=m)`, `.store`) at `loc`
  whose mask of data is on outside `name` (rank `rank`) before its start (`before`) or past its end: the
  user's mask and'ed with the window's extent mask, in their words (for Triton's offsets `x.at[offs]`, those
  along dimension `d`); None where the call cannot be read."""
  import ast
  node = call_at(loc)
  if node is None or not isinstance(node.func, ast.Attribute) or node.func.attr not in ("load", "store"):
    return None
  mask = next((ast.unparse(k.value) for k in node.keywords if k.arg == "mask"), None)
  on_ml = isinstance(node.func.value, ast.Name) and node.func.value.id in ("ml", "tl")
  ref = node.args[0] if on_ml and node.args else None if on_ml else node.func.value
  # (a mask known while compiling, `data` False, is hinted so only for run offsets: MG203's general hint else)
  ext = _extent_mask(ast.unparse(ref), name, rank) if ref is not None and mask is not None and data else None
  if ext is None and d is not None and d >= 0 and mask is not None:     # Triton's offsets x.at[offs]: theirs (dimension d)
    from .bounds_hints import _user_window
    run = _user_window(loc, name, d)
    ext = f"{run[2]} < {name}.shape[{d}])" if run and run[2] else None
  if ext is None:
    return None
  cond = ext[:ext.rindex(" < ")] + " >= 0" if before else ext[:-1]
  return (f"keep the mask off outside {name} too: mask=({mask}) & ({cond})" + (
      f" (a mask of data, a segment's end or a length read from memory, is on wherever the data says, also past"
      f" {name}'s {'start' if before else 'end'})" if data else ""))


def uncovered_error(name, shape, missing, g, grid, loc, masked=None, rank=1, skipped=None):
  """The UncoveredOutputError for the cells `missing` of output `name` (also used by interpret
  mode). `masked`: interpret mode's masked_store into the output (it records only the elements
  written, after the proof over the windows each program may write passed, so the cells were
  skipped by that store's mask). `rank`: the grid's axes to show at least (those the kernel reads
  ml.program_id of: a grid (2, 1) the user wrote is not shown as (2,))."""
  region, count = describe(name, shape, missing, g)
  if skipped is not None and skipped[2] == "loop":
    at, loop, _ = skipped
    return E.UncoveredOutputError(
        f"{region} is never written: the write into {name} at line {at.lineno} is in the run-time loop at line"
        f" {loop.lineno}, which ran no trip in the programs whose windows hold these elements, and nothing else"
        f" writes them, so {count} of {math.prod(shape)} elements of {name} would stay uninitialised", at,
        hint=f"write {name}'s window on every path: write it once before the loop (zeros, or the value meant for"
             f" no trips) and let the loop add to or overwrite it; or, to keep the old values, alias an input to"
             f" {name}: @mgpu_kernel(..., input_output_aliases={{input index: output index}})",
        notes=(f"{loop}: the loop",))
  if skipped is not None and skipped[2] == "shared" and math.prod(grid) > 1:
    at, cond, _ = skipped
    from .if_holes import _condition          # (if_holes.py imports this module)
    test = f"({_condition(cond)})" if _condition(cond) else "cond"
    return E.UncoveredOutputError(
        f"{region} is never written: the write into {name} at line {at.lineno} is under the run-time"
        f" condition at line {cond.lineno}, which every program skipped, and nothing else writes it, so"
        f" {count} of {math.prod(shape)} elements of {name} would stay uninitialised", at,
        hint=f"every program writes this same window of {name} where its condition holds: a flag any program may"
             f" set is an update every program makes, ml.atomic_max({name}, {test}.astype(jnp.int32)) (an int32 {name},"
             f" outside the if; ml.atomic_add counts instead), as a plain write in an else: branch would race with"
             f" the other programs", notes=(f"{cond}: the condition",))
  if skipped is not None:
    at, cond, _ = skipped
    return E.UncoveredOutputError(
        f"{region} is never written: the write into {name} at line {at.lineno} is under the run-time"
        f" condition at line {cond.lineno}, which skipped it in the programs whose windows hold these"
        f" elements, and nothing else writes them, so {count} of {math.prod(shape)} elements of {name}"
        f" would stay uninitialised", at,
        hint=f"write {name}'s window on every path: add an else: branch that writes the value meant for"
             f" it there (zeros, or the input's values); or, to keep the old values where the condition"
             f" is false, alias an input to {name}: @mgpu_kernel(..., input_output_aliases={{input index:"
             f" output index}})", notes=(f"{cond}: the condition",))
  store = masked
  if store is not None:
    at, (ref, mask, value) = store
    return E.UncoveredOutputError(
        f"{region} is never written: the masked store into {name} (line {at.lineno}) leaves the elements"
        f" where its mask is false unwritten, and nothing else writes them, so {count} of"
        f" {math.prod(shape)} elements of {name} would stay uninitialised", at,
        hint=f"write every element of {name}: put the mask into the value, ml.where({mask}, {value}, 0), and"
             f" store that unmasked, {ref}[...] = ..., where the window lies inside {name}; a window running"
             f" past {name}'s end keeps a mask of {name}'s own extent only, {ref}.store(..., mask="
             + (_extent_mask(ref, name, len(shape)) or f"offs < {name}.shape[0]) with offs the window's positions"))
  n = math.prod(grid)
  who = ("the kernel's one program does not" if n == 1 else
         f"none of the {n} programs of grid {tuple(grid[:max(rank, _rank(grid))])}")
  # the dimensions of the output with indices no program reaches (a grid axis rounded down)
  covered = ~np.asarray(missing, bool)
  part = [d for d in range(covered.ndim)
          if not covered.any(axis=tuple(a for a in range(covered.ndim) if a != d)).all()] if covered.any() else []
  if part and (part != [0] or rank > 1):         # (a 1-D grid over rows keeps the rows hint below)
    dims = " and ".join(f"{d} ({shape[d]})" for d in part)
    cover = (f"{name}'s dimension{'s' if len(part) > 1 else ''} {dims} {'are' if len(part) > 1 else 'is'} covered"
             f" only in part: launch ml.cdiv(n, t) programs along the grid axis that steps"
             f" {'each' if len(part) > 1 else 'it'} (n its size, t its tile), not n // t; the last window then runs"
             f" past the end: ml.copy stores drop what falls outside the array, a register store needs a mask of"
             f" {name}'s extent ({name}.at[...].store(v, mask=...))")
  else:
    cover = (f"launch enough programs for their windows to cover {name} {tuple(shape)} (for tiles of t rows,"
             f" grid=lambda x: ((x.shape[0] + t - 1) // t,); ml.copy stores drop what falls outside the array, a"
             f" register store needs a mask of {name}'s extent: {name}.at[...].store(v, mask=offs < {name}.shape[0])"
             f" with offs the window's positions)")
  return E.UncoveredOutputError(
      f"{region} is never written: {who} write{'s' if n > 1 else ''} it, so {count} of {math.prod(shape)}"
      f" elements of {name} would stay uninitialised", loc,
      hint=f"{cover}, or write the rest; to update part of an input in place, alias it to {name}:"
           f" @mgpu_kernel(..., input_output_aliases={{input index: output index}})")


def _with_lone_axis_note(kernel, err, hole=None):
  """`err` with a note where the kernel reads ml.program_id of an axis the grid has one program
  along (ml.program_id(1) on a 1-D grid: always 0), the likely cause of windows that collide or
  leave the output unwritten. `hole`: (the grid evaluator, the output param) of an MG602, whose
  hint names an if known while compiling that skipped a write into the output (frontend/if_holes.py)."""
  if hole is not None:
    from .if_holes import if_hole_hint
    err.hint = if_hole_hint(kernel, *hole) or err.hint
  from .stride_hints import persistent_stride_hint
  err.hint = persistent_stride_hint(kernel, err.loc if hasattr(err, "loc") else None) or err.hint
  from .ops.control import ProgramId
  lone = next((o for o in ir.walk(kernel.body) if isinstance(o, ProgramId) and o.axis > 0
               and kernel.grid[o.axis] == 1), None)
  if lone is not None:
    err.notes = tuple(err.notes) + (
        f"{lone.loc}: ml.program_id({lone.axis}) is 0 in every program: the grid has 1 program along axis"
        f" {lone.axis} (grid {tuple(kernel.grid[:grid_rank(kernel)])})",)
  return err


def _rank(grid) -> int:
  return max([1] + [a + 1 for a, n in enumerate(grid) if n > 1])


def grid_rank(kernel) -> int:
  """The axes of the kernel's grid to show: those with more than one program, and those it reads
  ml.program_id of."""
  from .ops.control import ProgramId
  return max([_rank(kernel.own_grid)] + [o.axis + 1 for o in ir.walk(kernel.body) if isinstance(o, ProgramId)
                             and o.axis != kernel.batch_axis])


# ---------------------------------------------------------------- writes into inputs
def _output_first_hint(kernel, defs, written) -> str | None:
  """Triton's parameter order (output first: `def softmax(output_ptr, input_ptr, ...)`): an input is
  written while an output is never written, so the outputs are the last parameters by position but
  not by use. The hint gives the order that makes the written ones the outputs."""
  writes, reads = set(), set()
  for o in ir.walk(kernel.body):
    for ref, kind in ir.traits_of(o).effects(o):
      if ref is not None:
        (reads if kind in READS else writes).add(_root(defs, ref).id)
  outs = [p for k, p in enumerate(kernel.outputs) if p.value.id not in writes
          and k not in kernel.aliases.values() and p.value.id not in kernel.accumulated]
  if not outs or not any(p.value.id in reads for p in outs):
    return None     # an output neither written nor read: an update in place was meant (an alias)
  ins = [p.value for p in kernel.inputs]
  order = ([v for v in ins if v.id not in writes] + [p.value for p in outs]
           + [v for v in ins if v.id in writes] + [p.value for p in kernel.outputs if p.value.id in writes])
  unwritten = ", ".join(p.value.name for p in outs)
  return (f"parameters are the inputs, then the outputs (Triton kernels often take their output first), and"
          f" this kernel writes {written.name} but never {unwritten}: list the outputs last, in out_shape's order,"
          f" def {kernel.name}({', '.join(v.name for v in order)}, ...) (the call passes the inputs only)")


def _written_otherwise(kernel, defs) -> dict:
  """{output position: the ids of the inputs it may stand for}: for each output the kernel writes in
  registers, the inputs whose plain reads are all it writes there (`out[...] = x[...]`); an output written
  with computed values (an optimizer's `p_out[...] = p - lr * u`) stands for none. Outputs only a copy or an
  atomic writes are left out (they stand for any input, as unwritten ones do)."""
  from .ops.access import MaskedLoad
  from .ops.memory import Load, Store
  outputs = {p.value.id: k for k, p in enumerate(kernel.outputs)}
  sources = {}
  for o in ir.walk(kernel.body):
    if not isinstance(o, (Store, MaskedStore)):
      continue
    j = outputs.get(_root(defs, o.ref).id)
    if j is None:
      continue
    d = defs.get(o.value.id)
    read = _root(defs, d.ref).id if isinstance(d, (Load, MaskedLoad)) else None
    sources.setdefault(j, set()).add(read)
  return {j: set() if None in ids else ids for j, ids in sources.items()}


def _alias_hint(kernel, root, k, written, claimed) -> str:
  """How to update input `root` (position `k`) in place: alias it to an output of its type that nothing
  else is meant for (unwritten, or written only with `root`'s own values, not aliased, not named in an
  earlier hint of this check), else to a new output; the dict holds the kernel's aliases and `claimed`."""
  taken = set(kernel.aliases.values()) | set(claimed.values())
  same = [j for j, p in enumerate(kernel.outputs) if p.value.type == root.type and j not in taken
          and (j not in written or root.id in written[j])]
  n_out = len(kernel.outputs) + sum(j >= len(kernel.outputs) for j in claimed.values())
  claimed[k] = same[0] if same else n_out
  pairs = {**kernel.aliases, **claimed}
  text = "{" + ", ".join(f"{i}: {j}" for i, j in sorted(pairs.items())) + "}"
  if same:
    return f"alias it to an output of its shape and dtype: @mgpu_kernel(..., input_output_aliases={text})"
  return (f"add an output of its shape and dtype (out_shape gives {n_out + 1} outputs, the last like"
          f" {root.name}) and alias it: input_output_aliases={text}")


def check_input_writes(kernel, defs) -> list:
  inputs = {p.value.id: k for k, p in enumerate(kernel.inputs)}
  written, claimed, hints = _written_otherwise(kernel, defs), {}, {}
  out = []
  for o in ir.walk(kernel.body):
    for ref, kind in ir.traits_of(o).effects(o):
      if ref is None or kind in READS:
        continue
      root = _root(defs, ref)
      k = inputs.get(root.id)
      if k is None or k in kernel.aliases or any(e.loc == o.loc for e in out):
        continue
      if k not in hints:
        hints[k] = _alias_hint(kernel, root, k, written, claimed)
      alias = hints[k]
      hint = f"write the result into an output; to update {root.name} in place, {alias}"
      hint = _output_first_hint(kernel, defs, root) or hint
      if isinstance(o, Copy) and o.reduce is None and o.src.type.space == Space.SMEM:   # ml.copy(buf, x): swapped?
        src, dst = o.src.name or "buf", o.dst.name or root.name
        hint = (f"ml.copy(src, dst) copies its first argument into its second: to fill {src} from {root.name},"
                f" swap them, ml.copy({dst}, {src}); else {hint}")
      out.append(E.InputWriteError(
          f"cannot write into {root.name}: it is an input of the kernel, and inputs are read-only"
          f" (JAX arrays are immutable)", o.loc, hint=hint))
  return out


def _index_texts(loc):
  """The indices, as the user wrote them, of the subscript `x[i - 1, j]` at `loc` (None if unknown)."""
  import ast
  node = expr_at(loc)
  if not isinstance(node, ast.Subscript):
    return None
  if isinstance(node.slice, ast.Constant) and node.slice.value is Ellipsis and isinstance(node.value, ast.Subscript) \
      and isinstance(node.value.value, ast.Attribute) and node.value.value.attr == "at":
    node = node.value                                   # x.at[i, j][...]: the window's indices
  parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
  return [ast.unparse(p) for p in parts]


def scalar_read_hint(root: str, loc, d: int, index: int, dtype=None) -> str:
  """The hint for a single element read outside `root` along dimension `d` at `index`: guard or
  clamp that index on the side it leaves (a stencil's x[i - 1] at i = 0 is before the start); the
  zero read instead is one of `root`'s kind (0 for int32 row pointers: 0.0 would make them floats)."""
  texts = _index_texts(loc)
  i = texts[d] if texts and d < len(texts) else "i"
  low = index < 0
  guard = f"{i} >= 0" if low else f"{i} < {root}.shape[{d}]"
  clamp = f"ml.maximum({i}, 0)" if low else f"ml.minimum({i}, {root}.shape[{d}] - 1)"
  if texts and d < len(texts):
    texts[d] = clamp
    clamped = f"{root}[{', '.join(texts)}]"
  else:
    clamped = clamp
  from .dtypes import DType
  zero = ("0.0" if not isinstance(dtype, DType) or dtype.is_float else "False" if dtype is DType.bool_ else "0")
  return (f"guard the read (if {guard}:) or clamp its index, {clamped} (ml.where({guard}, ..., {zero}) to read"
          f" 0 there)" + ("" if low else f", or pass a longer {root}"))


def run_overrun(loc, name, root_ref, index, what, held=None, at_loc=None):
  """The error of an unmasked register read or write (`what`) through Triton's offsets, `x.at[offs]` with
  `offs = start + ml.arange(size)` statically reaching outside `name` (its window `index` of `root_ref`), in
  the user's offsets: their masked access, with every dimension they leave in its mask, as the run-time check
  words it; None where the access is not written so. `held`: the name a window made at `loc` is read or written
  through at `at_loc` (`p = x.at[r, cols]`, then `p.load()`: the error at the access, its mask on `p`)."""
  from .bounds_hints import _stored_text, _user_window
  overs = [(d, i.start, i.size, n) for d, (i, n) in enumerate(zip(index or (), root_ref.type.shape))
           if isinstance(i.start, int) and (i.start < 0 or i.start + i.size > n)]
  conds = []
  for d, start, size, n in overs:
    written = _user_window(loc, name, d)
    if not n or not written or written[2] is None:
      return None
    at, offs = written[0], written[2]
    conds += [f"{offs} >= 0"] * (start < 0) + [f"{offs} < {name}.shape[{d}]"] * (start + size > n)
  if not overs:
    return None
  inside = conds[0] if len(conds) == 1 else " & ".join(f"({c})" for c in conds)
  at_loc = at_loc or loc
  op = (f"{held or at}.load(mask={inside}, other=0)" if what == "read" else
        f"{held or at}.store({_stored_text(at_loc) or 'value'}, mask={inside})")
  d, start, size, n = overs[0]
  of = f" of {held} (made at line {loc.lineno})" if held else ""
  return E.IndexOutOfBoundsError(
      f"the offsets {_user_window(loc, name, d)[2]}{of} run over {start}..{start + size - 1} along dimension {d} of"
      f" {name}, outside its size {n}: an unmasked register {what} must stay inside the array", at_loc,
      hint=f"mask the offsets to the elements inside: {op}")


def window_overrun(cx, ref, name, over, what):
  """The error of an unmasked register read or write (`what`) of a window past the end of `name` that the access
  itself does not spell out (probe 50b), in the user's words rather than the compiler's `ml.ds(0, 128)`: a block
  pointer's window read or written unchecked (`ml.load(ptr)` of a make_block_ptr: its boundary_check), and a
  window the kernel holds in a name (`p = x.at[r, ml.arange(128)]`, then `p.load()`), in the offsets of the line
  that made it; None for any other access (`over`: static_overrun's dimension, start, size and extent)."""
  from .bounds_hints import _block_ptr_access, _stored_text, _user_window
  from .ops.memory import View
  d, start, size, n = over
  if what not in ("read", "write") or not n:
    return None
  ptr = _block_ptr_access(cx.loc)
  if ptr is not None:
    checked = tuple(range(len(ref.type.shape)))
    op, fix = ((f"ml.load({ptr[0]})", f"ml.load({ptr[0]}, boundary_check={checked}, padding_option=\"zero\") reads"
                f" zeros past its shape") if what == "read" else
               (f"ml.store({ptr[0]}, ...)", f"ml.store({ptr[0]}, {ptr[1]}, boundary_check={checked}) drops what lies"
                f" past its shape"))
    return E.IndexOutOfBoundsError(
        f"{op} has no boundary_check: the block pointer's window covers {start}..{start + size - 1} along dimension"
        f" {d} of {name}, outside its size {n}, and an unmasked register {what} must stay inside the array", cx.loc,
        hint=f"check the block pointer's bounds: {fix}")
  made = cx.b.defining(ref)
  if not isinstance(made, View):
    return None
  held = ref.name if (ref.name or "").isidentifier() and ref.name != name else None
  at = (held and _held_at(cx.loc, held, name)) or cx.loc
  held = held if at is not cx.loc else None
  if held:                  # (Triton's offsets, held: p = x.at[r, cols], then p.load())
    run = run_overrun(at, name, made.ref, made.index, what, held=held, at_loc=cx.loc)
    if run is not None:
      return run
  written = _user_window(at, name, d)         # an ml.ds window past the end: its mask, in the user's words
  if start < 0 or not written or not written[1]:
    return None
  k, rank = sum(1 for i in made.index[:d] if not i.squeeze), len(ref.type.shape)
  pos = f"ml.arange({size})" if written[1] == "0" else f"{written[1]} + ml.arange({size})"
  if rank > 1:
    pos = f"{f'({pos})' if ' + ' in pos else pos}[{', '.join(':' if j == k else 'None' for j in range(rank))}]"
  inside = f"{pos} < {name}.shape[{d}]"
  op = (f"{held or written[0]}.load(mask={inside}, other=0)" if what == "read" else
        f"{held or written[0]}.store({_stored_text(cx.loc) or 'value'}, mask={inside})")
  return E.IndexOutOfBoundsError(
      f"ml.ds({start}, {size}) is out of bounds for dimension {d} of {name} (size {n})", cx.loc,
      hint=f"a register {what} must stay inside the array: mask it to the elements inside, {op}, or copy the window"
           f" with ml.copy (TMA reads zeros past the end and drops writes there)")


def _held_at(loc, held, root):
  """Where the window held in the name `held` was made: the nearest line before `loc` binding it to
  `root.at[...]` (`p = x.at[r, ml.arange(128)]`), as a Loc of that expression; None where there is none."""
  import ast
  import linecache
  import re
  from .loc import Loc
  lines = linecache.getlines(loc.filename)
  for k in range(min(loc.lineno, len(lines)) - 1, 0, -1):
    line = lines[k - 1].rstrip("\n")
    m = re.match(rf"(\s*){held}\s*=\s*{root}\.at\[", line)
    if m is None:
      continue
    try:
      stmt = ast.parse(line.strip()).body[0]
    except (SyntaxError, IndexError):
      return None
    if not isinstance(stmt, ast.Assign) or stmt.value.end_lineno != 1:
      return None
    pad = len(m.group(1))
    return Loc(loc.filename, k, pad + stmt.value.col_offset, k, pad + stmt.value.end_col_offset, line)
  return None
