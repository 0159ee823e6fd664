"""MG402 of a pipelined loop whose stages alone overflow SMEM (pipeline_plan.check_fits), at the line the user
changes (probe 62b): the loop's `stages=` keyword where fewer stages fit (it was the whole `for` line), else the
allocation of the loop's largest buffer, whose tile must shrink, with the smaller tile that fits at the stages
written (it was "use smaller tiles" at the loop) and a note at the loop."""
from __future__ import annotations

import dataclasses
import re

from . import errors as E
from . import hw
from . import ir
from .smem_overflow import _cut, kib


def stages_loc(loc):
  """The `stages=...` keyword of the loop at `loc` (on its own line: `for k in ml.range(n, stages=3):`), or `loc`."""
  line = getattr(loc, "source_line", "") or ""
  m = re.compile(r"\b(?:num_)?stages\s*=\s*[^,)]+").search(line, getattr(loc, "col_offset", 0))
  if m is None or "\n" in m.group(0):
    return loc
  return dataclasses.replace(loc, col_offset=m.start(), end_lineno=loc.lineno, end_col_offset=m.end())


def loop_axes(kernel, loop, bufs) -> dict:
  """{buffer id: axis} of the loop's buffers whose TMA source (a load's) or destination (a store's) moves along one
  axis with the loop's index (`ml.copy(a.at[:, ml.ds(k * bk, bk)], a_s)`: a_s's axis 1, the loop's step)."""
  from .ops.memory import Copy, View, is_load, root_in
  if loop is None or not getattr(loop, "regions", None) or not loop.body.args:
    return {}
  defs = {r.id: o for o in ir.walk(kernel.body) for r in o.results}
  index = loop.body.args[0]

  def moves(v, depth=8) -> bool:
    o = defs.get(getattr(v, "id", None))
    return v is index or depth > 0 and o is not None and any(
        moves(x, depth - 1) for x in o.operands() if isinstance(x, ir.Value))
  ids, out = {id(b) for b in bufs}, {}
  for o in ir.walk(loop.body):        # (a load's GMEM source, a store's GMEM destination)
    if not isinstance(o, Copy):
      continue
    gmem, buf = (o.src, o.dst) if is_load(o) else (o.dst, o.src)
    view, buf = defs.get(getattr(gmem, "id", None)), root_in(defs, buf)
    if not isinstance(view, View) or id(buf) not in ids:
      continue
    kept = [ix for ix in view.index if not ix.squeeze]
    axes = [a for a, ix in enumerate(kept) if isinstance(ix.start, ir.Value) and moves(ix.start)]
    if len(axes) == 1 and len(kept) == len(buf.type.shape):
      out[id(buf)] = axes[0]
  return out


def _cut_at(shape: tuple, axis, cut: int) -> tuple | None:
  """`shape` with `axis` (None: its first of 16 or more) divided by `cut`; None where it does not divide."""
  if axis is None:
    return _cut(shape, cut)
  return None if shape[axis] % cut or shape[axis] // cut < 8 else \
      tuple(n // cut if a == axis else n for a, n in enumerate(shape))


def smaller_tile(kernel, loop, bufs, stages, sites, other, once=()) -> tuple | None:
  """(buffer, hint): the loop's buffers that move along its index cut along that axis (a smaller step, more trips)
  to a half, a quarter or an eighth; else its largest buffer (with the others of its type), else every loop buffer,
  cut along its first axis of 16 or more; the first that fits at `stages` beside `other` bytes. None where an
  eighth is not enough."""
  from .pipeline_plan import loop_bytes, stage_bytes
  axes = loop_axes(kernel, loop, bufs)
  big = max(bufs, key=lambda b: b.type.nbytes)
  groups = [[b for b in bufs if id(b) in axes]] if id(big) in axes else []
  groups += [[b for b in bufs if b.type == big.type], list(bufs)]
  for group in groups:
    along = groups[0] is group and id(big) in axes
    for cut in (2, 4, 8):
      shapes = {id(b): _cut_at(tuple(b.type.shape), axes.get(id(b)) if along else None, cut) for b in group}
      if None in shapes.values():
        break
      # (a stage of odd bytes is padded to 128: pipeline_plan.stage_bytes)
      size = lambda b: stage_bytes(dataclasses.replace(b.type, shape=shapes[id(b)]) if b in group else b.type)
      need = loop_bytes(bufs, stages, sites, kernel.num_load_slots, once, size) + other
      if need > hw.SMEM_LIMIT:
        continue
      which = " and ".join(f"{b.name or 'a buffer'} of shape {shapes[id(b)]}" for b in group)
      was = " and ".join(f"{tuple(b.type.shape)}" for b in group)
      how = (f"the loop's step cut to 1/{cut}, {cut} times the trips" if along else
             "the tile each trip handles cut to match")
      return big, (f"use smaller tiles: {which} instead of {was} ({how}) fits with stages={stages}, {need} bytes"
                   f" with the kernel's other buffers")
  return None


def stages_error(kernel, loop, bufs, S, sites, loc, need, fits, other, unpipelined, alloc_loc, no_fit, once=()):
  """The SmemCapacityError of check_fits: `fits`, the stage counts below S that fit (largest first); `no_fit()`,
  the hint where neither fewer stages nor an eighth of the loop's tiles fit (what the other buffers take); `once`,
  the store buffers of `bufs` counted once (one copy, where a copy a stage does not fit)."""
  one = {id(b) for b in once}
  staged = [b for b in bufs if id(b) not in one]
  per_stage = ", ".join(f"{b.name or '?'} {b.type.nbytes // 1024} KiB" for b in staged)
  kept = ", ".join(f"{b.name or '?'} {b.type.nbytes // 1024} KiB" for b in bufs if id(b) in one)
  each = "each" if len(staged) > 1 else ""
  copies = (f"{per_stage} per stage, {S} copies {each}".rstrip() if staged else "") + (
      f"{'; ' if staged else ''}{kept}, one copy (written and TMA-stored every trip)" if kept else "")
  beside = (f" beside the {other} bytes of the kernel's other buffers live across it" if kept and need <= hw.SMEM_LIMIT
            else "")
  message = (f"with stages={S} this loop's buffers need {need} bytes ({copies}){beside},"
             f" more than the {hw.SMEM_LIMIT} bytes ({hw.SMEM_WORDS}) a kernel's buffers can use")
  tile = smaller_tile(kernel, loop, bufs, S, sites, other, once)
  if fits:
    from .pipeline_plan import loop_bytes
    hint = (f"use {unpipelined if fits[0] == 1 else f'stages={fits[0]}'}"
            f" ({loop_bytes(bufs, fits[0], sites, kernel.num_load_slots, once) + other} bytes with the kernel's"
            f" other buffers)" + (" (no loads ahead of use: the loop then runs unpipelined)" if fits[0] == 1 else ""))
    hint += "; or " + tile[1] if tile else " or smaller tiles"
    return E.SmemCapacityError(message, stages_loc(loc), hint=hint)
  if tile is None:
    big = max(bufs, key=lambda b: b.type.nbytes)
    return E.SmemCapacityError(
        message, alloc_loc(big), hint=no_fit() + f" ({big.name}, the largest, is {tuple(big.type.shape)},"
        f" {kib(big.type.nbytes)}; cutting the loop's tiles to an eighth is not enough)",
        notes=(f"{loc}: the pipelined loop (stages={S}) keeping a copy per stage",))
  big, hint = tile
  keeps = "one copy of it (a store buffer)" if id(big) in one else "a copy of it per stage"
  return E.SmemCapacityError(message, alloc_loc(big), hint=hint,
                             notes=(f"{loc}: the pipelined loop (stages={S}) keeping {keeps}",))
