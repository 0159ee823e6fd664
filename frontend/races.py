"""Two programs that certainly write the same output element: a race the grid proves.

Programs run in no fixed order, so such a kernel's result depends on timing. The grid
evaluation (frontend/absint.py) gives, for each write a program certainly performs, its
exact window; this module finds two programs whose windows share an element. Writes that
only may happen (under a data-dependent branch, in loops past the evaluation budget) are
left to interpret mode, which reports every race it sees.
"""
from __future__ import annotations

import math

import numpy as np

from . import errors as E
from .coverage import MAX_CELLS, group_rows
from .flag_races import flag_hint

class Writers:
  """The certain writes into one output: boxes, the program of each, and where it is written."""

  def __init__(self, shape):
    self.shape = np.asarray(shape, np.int64)
    self.lo, self.hi, self.pid, self.site = [], [], [], []
    self.locs: list = []           # the write (and read) sites, numbered by `site`
    self.reads: dict = {}          # sites that read (an aliased input, an output read back) -> the name read
    self.found = None              # a race seen while adding

  def add(self, lo, hi, pids, loc, *, read=None):
    lo, hi = np.clip(lo, 0, self.shape), np.clip(hi, 0, self.shape)
    keep = np.all(hi > lo, axis=1)
    lo, hi, pids = lo[keep], hi[keep], pids[keep]
    if read is not None:             # reads race only with other programs' writes (first_race)
      if len(lo):
        self.reads[len(self.locs)] = read
        self.lo.append(lo)
        self.hi.append(hi)
        self.pid.append(pids)
        self.site.append(np.full(len(lo), len(self.locs)))
        self.locs.append(loc)
      return
    if len(lo) > 1 and (lo == lo[0]).all() and (hi == hi[0]).all():   # one window, several programs
      self.found = self.found or (tuple(int(x) for x in lo[0]), int(pids[0]), loc, int(pids[1]), loc)
      lo, hi, pids = lo[:1], hi[:1], pids[:1]
    keep = np.ones(len(lo), bool)
    if keep.any():
      self.lo.append(lo[keep])
      self.hi.append(hi[keep])
      self.pid.append(pids[keep])
      self.site.append(np.full(int(keep.sum()), len(self.locs)))
      self.locs.append(loc)

  def writes_at(self, element, program, loc) -> bool:
    """Whether `program` certainly writes `element` at `loc`'s line (out[...] += part reads and
    writes there)."""
    for lo, hi, pid, site in zip(self.lo, self.hi, self.pid, self.site):
      at = self.locs[int(site[0])]
      if int(site[0]) in self.reads or (at.filename, at.lineno) != (loc.filename, loc.lineno):
        continue
      e = np.asarray(element, np.int64)
      if np.any((pid == program) & np.all((lo <= e) & (e < hi), axis=1)):
        return True
    return False

  def reads_on_line(self, loc) -> bool:
    """Whether a read of this output is recorded at `loc`'s line (out[...] += part, or out[...] =
    out[...] + part: the statement that writes the element reads it too)."""
    return any((self.locs[i].filename, self.locs[i].lineno) == (loc.filename, loc.lineno) for i in self.reads)

  def first_race(self):
    """((element, program a, loc a, program b, loc b)) of an element two programs write, or
    one reads and another writes (program b's access a write, a's a read or a write), or None."""
    if self.found is not None or not self.lo:
      return self.found
    lo, hi = np.concatenate(self.lo), np.concatenate(self.hi)
    pid = np.concatenate(self.pid)
    site = np.concatenate(self.site)
    g = np.maximum(np.gcd.reduce(np.concatenate([self.shape[None], lo, hi]), axis=0), 1)
    grid = self.shape // g
    a, b = lo // g, hi // g
    counts = b - a
    if int(np.prod(counts, axis=1).sum()) > MAX_CELLS:
      return None
    cells, owners, sites = [], [], []
    sizes, inv = group_rows(counts)
    for k, size in enumerate(sizes):
      rows = np.flatnonzero(inv == k)
      idx = [a[rows, d][:, None] + np.arange(n)[None] for d, n in enumerate(size)]
      flat = np.zeros((len(rows), 1), np.int64)
      for d, ix in enumerate(idx):          # row-major cell numbers of each box
        flat = (flat[:, :, None] * grid[d] + ix[:, None, :]).reshape(len(rows), -1)
      cells.append(flat.reshape(-1))
      owners.append(np.repeat(pid[rows], flat.shape[1]))
      sites.append(np.repeat(site[rows], flat.shape[1]))
    cells, owners, sites = map(np.concatenate, (cells, owners, sites))
    order = np.lexsort((owners, cells))
    cells, owners, sites = cells[order], owners[order], sites[order]
    if not self.reads:
      clash = np.flatnonzero((cells[1:] == cells[:-1]) & (owners[1:] != owners[:-1]))
      if not len(clash):
        return None
      i, j = clash[0], clash[0] + 1
    else:                  # a write whose cell another program also touches
      write = ~np.isin(sites, list(self.reads))
      starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
      lo_own = np.minimum.reduceat(owners, starts)[np.searchsorted(starts, np.arange(len(cells)), "right") - 1]
      hi_own = np.maximum.reduceat(owners, starts)[np.searchsorted(starts, np.arange(len(cells)), "right") - 1]
      clash = np.flatnonzero(write & ((owners != lo_own) | (owners != hi_own)))
      if not len(clash):
        return None
      j = clash[0]
      group = np.flatnonzero((cells == cells[j]) & (owners != owners[j]))
      i = group[0]
    element = tuple(int(x) for x in np.unravel_index(cells[j], tuple(grid)) * g)
    return (element, int(owners[i]), self.locs[int(sites[i])], int(owners[j]),
            self.locs[int(sites[j])], self.reads.get(int(sites[i])))


CROSS_PROGRAM_READ = ("programs do not wait for each other, so an output written by other programs cannot be"
                      " read in the same launch: read it in a second kernel, or compute the value in this"
                      " program from the inputs")
ACCUMULATE_ACROSS = ("{0}; to sum the programs' shares into one output (Pallas's accumulation over a grid"
                     " axis, out[...] += part after zeroing it in the first program), add them atomically"
                     " instead, ml.atomic_add(out.at[...], part): an output updated only by atomics starts at 0,"
                     " so drop the zeroing write")
SPIN_WAIT = ("a program cannot wait for another's write (a spin-wait on GMEM may never end: the GPU runs"
             " programs in no set order, not all at once, and nothing orders a plain read after another"
             " program's write); ")


def spin_wait(loc) -> str:
  """SPIN_WAIT where the read at `loc` is a while loop's condition (`while flags[i - 1] == 0:`), else ''."""
  return SPIN_WAIT if getattr(loc, "source_line", "").lstrip().startswith("while ") else ""


def unreleased_flag_hint(body, flag) -> str | None:
  """The hint for a read of another program's write made after this program acquired the element `flag` (a decoupled
  look-back waiting on `flags[i - 1]`), where the kernel sets a flag with an atomic whose result nothing uses:
  relaxed here (Triton's default is acq_rel), so it releases nothing (probe 49e). None where either is missing."""
  from . import ir
  from .ops.atomic import AtomicUpdate
  relaxed = [o for o in ir.walk(body) if isinstance(o, AtomicUpdate) and not o.ref.type.shape and not o.results
             and o.sem == "relaxed"]
  if flag is None or not relaxed:
    return None
  o = relaxed[0]
  call = getattr(o.loc, "source_line", "").strip()
  fixed = call[:-1] + ', sem="release")' if call.startswith("ml.atomic_") and call.endswith(")") else \
      'ml.atomic_add(flags.at[i], 1, sem="release")'
  return (f"this program waited for {flag} (an acquire), but the atomic that sets it at line {o.loc.lineno} is relaxed"
          f" (one whose result nothing uses, where Triton's default is acq_rel), so the writes before it are not yet"
          f" visible to the program that sees the flag: make it a release, {fixed}; or read the data in a second"
          f" kernel")


ACCUMULATED_READ = ("an output that programs update with atomics holds the total only once the kernel has"
                    " ended: read it in a second kernel (or in JAX after the call)")
SCATTERED_TWICE = ("each place a scatter writes must come from one program (the GPU keeps one program's"
                   " value, whichever stores last): make the places of different programs disjoint (each program"
                   " its own rows), or add the programs' values with ml.atomic_add at those places")
ONE_WRITER = ("write it from one program (if ml.program_id(0) == 0: ...), or add every program's share"
              " with ml.atomic_add")


def segment_spill_hint(name, ndim) -> str:
  """The hint for a whole window, whose start comes from data, that another program's window overlaps:
  a segment's tile running past the segment's end (tutorial 08's grouped GEMM, ragged rows)."""
  cols = ", :" * (ndim - 1)
  axes = "[:" + ", None" * (ndim - 1) + "]" if ndim > 1 else ""
  return (f"a window whose start comes from data (a group's or segment's first row) runs past the segment's end"
          f" into the next segment's rows, which another program writes (a TMA copy writes its whole window): store"
          f" only the segment's rows, with a masked store from registers, {name}.at[ml.ds(start, n){cols}]"
          f".store(value, mask=start + ml.arange(n){axes} < end)")


def plain_write_hint(name, aliased) -> str:
  """The hint for a plain write into an output other programs update with atomics."""
  return (f"an output updated with atomics starts at {'the input it is aliased to' if aliased else '0'}: drop"
          f" the plain write of {name}" + ("" if aliased else f" (to start elsewhere, pass the start in as an input"
                                                                 f" aliased to {name})")
          + ", or make it an atomic update too")


def own_window(name, shape, grid):
  """The hint for programs writing one element: a window of `name` a program, sized so the
  programs along grid axis 0 split its first dimension (a fixed 128 ran past small outputs)."""
  n = grid[0] if grid else 1
  if shape and n > shape[0] > 0:      # fewer rows than programs (a (1, heads, d) output): no row split
    return (f"give each program its own window of {name}: the windows two programs write overlap; make each"
            f" no longer than the step between two programs' starts, or write only the elements a program owns"
            f" with a masked store from registers, {name}.at[...].store(value, mask=...)")
  if shape and n > 1 and shape[0] > 0:
    # a register tensor needs a multiple of 8 elements (1-D) or of 128: a tile of `step` rows does
    step = 8 if len(shape) == 1 else 128 // math.gcd(128, math.prod(shape[1:]) or 1)
    t = -(-shape[0] // n)
    if shape[0] % n == 0 and t % step == 0:
      return (f"give each program its own window of {name}: {n} programs split its {shape[0]} rows"
              f" into {t} each, e.g. {name}.at[ml.ds(ml.program_id(0) * {t}, {t})], and read the"
              f" matching window of the inputs")
    t = -(-t // step) * step
    k = -(-shape[0] // t)
    # (the launch as a static grid: a grid callable takes the kernel's inputs, whose names this does not know)
    launch = "" if k == n else f", launching {k} programs (grid=({k},))"
    tile = f" (a register tile needs a multiple of {step})" if step > 1 else ""
    window = f"{name}.at[ml.ds(ml.program_id(0) * {t}, {t})]"
    if shape[0] % t == 0:
      return (f"give each program its own window of {name}: windows of {t} rows{tile} cover its {shape[0]}"
              f" rows{launch}: {window}[...] = value, and read the matching window of the inputs")
    axes = "" if len(shape) == 1 else "[:" + ", None" * (len(shape) - 1) + "]"
    mask = f"ml.program_id(0) * {t} + ml.arange({t}){axes} < {shape[0]}"
    return (f"give each program its own window of {name}: windows of {t} rows{tile} cover its {shape[0]} rows,"
            f" the last one partial{launch}: {window}.store(value, mask={mask}), and read the matching"
            f" window of the inputs the same way (.load(mask=..., other=0))")
  return (f"give each program its own window of {name}, e.g. {name}.at[ml.ds(ml.program_id(0) * t, t)]"
          f" with ml.cdiv(rows, t) programs along grid axis 0, and read the matching window of the inputs")


def _apart_along(name, a, b, grid, shape=None):
  """The hint for two programs that differ along one grid axis only and write one element: that
  axis does not give each program a window of its own (out.at[h // 2] of a grid over h). A
  one-axis grid gets own_window's split of the output's rows instead, where it has a row for
  each program (fewer, a (1, 1, heads, d) output of a decode, and that split would be no split)."""
  axes = [k for k, (x, y) in enumerate(zip(a, b)) if x != y]
  if len(axes) != 1 or not grid:
    return None
  if axes[0] == 0 and grid[0] > 1 and all(n == 1 for n in grid[1:]) and (not shape or shape[0] >= grid[0]):
    return None
  k = axes[0]
  return (f"programs {a} and {b} differ only along grid axis {k}, yet write the same elements: {name}'s"
          f" window must change one-to-one with ml.program_id({k}) (launch as many programs along axis"
          f" {k} as it has windows there, each its own) and be no longer than the step between two"
          f" programs' starts (a longer one overlaps the next program's: write only the elements the program"
          f" owns, with a masked store from registers, {name}.at[...].store(value, mask=...)), or add the"
          f" programs' shares atomically: ml.atomic_add(ref, value)")


def clamped_program_hint(body, op=None, loc=None) -> str | None:
  """Where the window of the write `op` (or of the write at `loc` in `body`) comes from a program id
  clamped with ml.minimum (Triton's `pid = tl.minimum(pid, n_tiles - 1)` for a grid larger than the
  work), the programs past the bound redo the last tile and race on it: end them instead."""
  from . import ir
  from .loc import call_at
  from .ops.control import ProgramId
  from .ops.elementwise import Binary, BinOp
  if body is None:
    return None
  op = _written_op(body, op, loc)
  if op is None:
    return None
  defs = {r.id: o for o in ir.walk(body) for r in o.results}
  todo, seen = [getattr(op, "ref", getattr(op, "dst", None))], set()     # the window written
  while todo:
    d = defs.get(todo.pop().id)
    if d is None or id(d) in seen:
      continue
    seen.add(id(d))
    if isinstance(d, Binary) and d.kind == BinOp.MIN:
      sides = [defs.get(x.id) if isinstance(x, ir.Value) else None for x in (d.lhs, d.rhs)]
      k = next((j for j, o in enumerate(sides) if isinstance(o, ProgramId)), None)
      if k is not None:
        call = call_at(d.loc)
        import ast
        texts = [ast.unparse(a) for a in call.args] if call is not None and len(call.args) == 2 else None
        pid = texts[k] if texts else f"ml.program_id({sides[k].axis})"
        bound = texts[1 - k] if texts else "last"
        return (f"{pid} is clamped with ml.minimum, so every program past {bound} works on tile {bound} again"
                f" and writes it a second time: let them do nothing instead, if {pid} > {bound}: return, at the"
                f" top of the kernel (the program id itself then is the tile index), or launch only as many"
                f" programs as there are tiles")
    todo += [x for x in d.operands() if isinstance(x, ir.Value)]
  return None


def _written_op(body, op=None, loc=None):
  """The write `op`, or the first write (an op with a ref or dst and no results) at `loc` in `body`."""
  from . import ir
  if op is None and body is not None:
    op = next((o for o in ir.walk(body) if o.loc == loc and not o.results
               and isinstance(getattr(o, "ref", getattr(o, "dst", None)), ir.Value)), None)
  return op


def short_step_hint(body, name, shape, grid, op=None, loc=None) -> str | None:
  """Where the window a program writes starts `pid * s` (a run `pid * s + ml.arange(t)`, or
  ml.ds(pid * s, t)) with a step s shorter than its t elements, neighbours overlap by t - s: the fix
  is the step, pid * t (Triton's `pid * BLOCK + tl.arange(0, BLOCK)`), named in the user's words."""
  from . import ir
  from .ops.control import ProgramId
  from .ops.elementwise import Arange, Binary, BinOp
  from .ops.gather import ScatterUpdate
  from .ops.memory import View
  op = _written_op(body, op, loc)
  if op is None:
    return None
  defs = {r.id: o for o in ir.walk(body) for r in o.results}

  def step_of(x):
    """(program-id axis, s, the product's loc, the Arange's length) found under operand x."""
    found, runs, todo, seen = [], [], [x], set()
    while todo:
      d = defs.get(todo.pop().id)
      if d is None or id(d) in seen:
        continue
      seen.add(id(d))
      if isinstance(d, Arange):
        runs.append(d.results[0].type.shape[d.dim])
      if isinstance(d, Binary) and d.kind == BinOp.MUL:
        sides = [defs.get(v.id) if isinstance(v, ir.Value) else v for v in (d.lhs, d.rhs)]
        k = next((j for j, v in enumerate(sides) if isinstance(v, ProgramId)), None)
        if k is not None and isinstance(sides[1 - k], int) and not isinstance(sides[1 - k], bool):
          found.append((sides[k].axis, sides[1 - k], d.loc))
          continue
      todo += [v for v in d.operands() if isinstance(v, ir.Value) and not isinstance(defs.get(v.id), View)]
    return (found[0] + (runs[0] if len(runs) == 1 else None,)) if len(found) == 1 else None

  ref = getattr(op, "ref", getattr(op, "dst", None))
  cand = []
  if isinstance(op, ScatterUpdate):
    cand = [(k, step_of(i), None) for k, i in enumerate(op.indices)]
  elif isinstance(defs.get(ref.id), View):
    cand = [(k, step_of(i.start), i.size) for k, i in enumerate(defs[ref.id].index) if isinstance(i.start, ir.Value)]
  cand = [(k, st[:3], size if size is not None else st[3]) for k, st, size in cand if st is not None]
  cand = [c for c in cand if c[2] is not None and 0 < c[1][1] < c[2]]    # a step shorter than the window
  if len(cand) != 1:
    return None
  dim, (axis, s, at), t = cand[0]
  line, a, b = getattr(at, "source_line", ""), at.col_offset, getattr(at, "end_col_offset", None)
  text = line[a:b] if line and b is not None and at.end_lineno == at.lineno else f"ml.program_id({axis}) * {s}"
  fixed = text[:len(text) - len(str(s))] + str(t) if text.endswith(str(s)) else f"ml.program_id({axis}) * {t}"
  n = shape[dim] if shape and dim < len(shape) else None
  launch = ""
  if n is not None:
    need = -(-n // t)
    if grid and axis < len(grid) and grid[axis] != need:
      launch = f", launching ml.cdiv({n}, {t}) = {need} programs along grid axis {axis}"
    if n % t:
      launch += (f", the last one's register store masked to {name}'s {n} elements ({name}.at[...].store(value,"
                 f" mask=...) keeping the positions below {n}; a TMA copy drops them itself)")
  return (f"the programs' windows of {name} start {s} apart ({text}) but each writes {t} elements, so"
          f" neighbours overlap by {t - s}: step them by their size, {fixed}{launch}, and the inputs' windows"
          f" the same way")


def _masked_write(body, loc):
  """The mask, in the user's words, of the masked store at `loc` (None where the write there is not one)."""
  from . import ir
  from .memory_errors import masked_store_words
  from .ops.access import MaskedStore
  o = next((o for o in ir.walk(body) if isinstance(o, MaskedStore) and o.loc == loc), None) if body else None
  return masked_store_words(o, "out")[1][1] if o is not None else None


def _masked_read_hint(mask, read_loc) -> str:
  """A read racing with another program's masked store (a red-black update in place, each program
  reading its neighbours' old colour): where only the lanes the store keeps use what is read, the
  load masked the same way never reads the elements the other programs write."""
  from .memory_errors import _store_call
  own = _store_call(read_loc).get("mask")       # the read's own mask (a masked load's), kept
  both = f"({mask}) & ({own})" if own else mask
  return (f"; where each program writes only the elements its mask keeps (a red-black or checkerboard update)"
          f" and uses what it reads only there, mask the read the same way, .load(mask={both}, other=0):"
          f" a masked-off element is never read")


def race_error(name, race, program, shape=None, grid=None, accumulates=False, body=None):
  """The RaceError of `race` on output `name` (`accumulates`: the reading program also writes the
  element it reads in that statement, out[...] += part; `body`: the kernel's, to find a masked store)."""
  element, p, loc_p, q, loc_q, *read = race
  if read and read[0] is not None:
    seen = read[0] if read[0] == name else f"{read[0]}{list(element)}, the memory of {name} (aliased),"
    what = f"{name}{list(element)}" if read[0] == name else seen
    mask = None if accumulates else _masked_write(body, loc_q)
    clamped = clamped_program_hint(body, loc=loc_q)       # a clamped program id redoes the last tile in place
    return E.RaceError(
        f"program {program(p)} reads {what} while program {program(q)} writes {name}{list(element)}:"
        f" programs run in no fixed order, so the value read depends on timing", loc_p,
        notes=(f"{loc_q}: program {program(q)} writes it here",),
        hint=clamped or ACCUMULATE_ACROSS.format(CROSS_PROGRAM_READ) if accumulates else
        clamped or spin_wait(loc_p) + CROSS_PROGRAM_READ + (_masked_read_hint(mask, loc_p) if mask else "") if read[0] == name else
        clamped or f"{CROSS_PROGRAM_READ}; for a stencil updated in place, write a new output instead of aliasing"
        f" {read[0]} to {name} (drop input_output_aliases), so every program reads {read[0]}'s old values"
        + (_masked_read_hint(mask, loc_p) if mask else ""))
  return E.RaceError(
      f"program {program(p)} and program {program(q)} both write {name}{list(element) if element else ''}:"
      f" programs run in no fixed order, so the result depends on timing", loc_q,
      notes=(f"{loc_p}: program {program(p)} writes it here",) if loc_p != loc_q else (),
      hint=ACCUMULATE_ACROSS.format(f"several programs read {name} and write it back ({name}[...] += part) in no"
                                    f" fixed order, so all but one program's share can be lost")
      if element and accumulates else
      flag_hint(body, loc=loc_q) or clamped_program_hint(body, loc=loc_q) or
      short_step_hint(body, name, shape, grid, loc=loc_q) or
      (_apart_along(name, program(p), program(q), grid, shape) or own_window(name, shape, grid)
            + "; where programs add partial results into the same elements (split-K), add them atomically:"
            " ml.atomic_add(ref, value) or ml.copy(buf, ref, reduce=\"add\")") if element else ONE_WRITER)
