"""MG402, the kernel's SMEM past its limit (frontend/smem.py's plan), in the user's terms (probe 61b): the error
points at the allocation that takes the kernel's buffers past the limit, placed in the order the kernel allocates
them (the buffer that tipped it, not the kernel's `def` line nor always the largest), with notes naming the
largest other buffers at their lines; the message lists the buffers, repeats counted (`reshape scratch 128 KiB
x16`, where a loop of products made sixteen); where the stage counts cannot help, the hint names the concrete
smaller tile of the largest buffer of the user's that fits, or says none does."""
from __future__ import annotations

from . import errors as E
from . import hw

SMEM_LIMIT = hw.SMEM_LIMIT
_NOTED = 3         # the largest buffers noted beside the one the error points at
_LISTED = 8        # the buffers (runs of equal ones) the message lists


def kib(n: int) -> str:
  return f"{n // 1024} KiB" if n >= 1024 and n % 1024 == 0 else f"{n} bytes"


def _sizes(kernel) -> str:
  """The buffers as allocated, `name size`, a run of equal ones counted once (`x16`)."""
  parts: list = []
  for b in kernel.smem:
    word = f"{b.name or '?'} {kib(b.type.nbytes)}"
    if parts and parts[-1][0] == word:
      parts[-1][1] += 1
    else:
      parts.append([word, 1])
  words = [w if n == 1 else f"{w} x{n}" for w, n in parts]
  if len(words) <= _LISTED:
    return ", ".join(words)
  rest = sum(b.type.nbytes for b in kernel.smem) - sum(
      b.type.nbytes for b in kernel.smem[:sum(n for _, n in parts[:_LISTED])])
  return ", ".join(words[:_LISTED]) + f", and {len(words) - _LISTED} more, {rest} bytes together"


def overflow_error(kernel, life, barrier_bytes, total, hint, notes):
  from .smem import _alloc_loc, _place
  nbytes = lambda b: b.type.nbytes
  placed, _ = _place(kernel.smem, life, barrier_bytes, nbytes, order="as_allocated")
  by_id = {b.id: b for b in kernel.smem}
  tip = next((by_id[bid] for bid, _, end, _ in placed if end > SMEM_LIMIT), None)
  biggest = max(kernel.smem, key=nbytes)
  loc = _alloc_loc(kernel, tip) if tip is not None else kernel.loc
  if loc is kernel.loc:
    tip, loc = biggest, _alloc_loc(kernel, biggest)
  seen, extra = {(loc.filename, loc.lineno)}, []
  for b in sorted(kernel.smem, key=lambda b: -nbytes(b)):
    at = _alloc_loc(kernel, b)
    if len(extra) == _NOTED or b is tip or at is kernel.loc or (at.filename, at.lineno) in seen:
      continue
    seen.add((at.filename, at.lineno))
    same = sum(1 for o in kernel.smem if o.name == b.name and _alloc_loc(kernel, o).lineno == at.lineno)
    extra.append(f"{at}: {b.name or 'a buffer'}, {kib(nbytes(b))}"
                 + (f" ({same} of them)" if same > 1 else "") + ", allocated here")
  if hint == "use smaller tiles":
    hint = _smaller_hint(kernel, life, barrier_bytes, total) or hint
  return E.SmemCapacityError(
      f"the kernel's SMEM needs {total} bytes ({_sizes(kernel)}, plus barriers and alignment), more than the"
      f" {SMEM_LIMIT} bytes ({hw.SMEM_WORDS}) a kernel's buffers can use", loc, hint=hint,
      notes=tuple(notes) + tuple(extra))


def _smaller_hint(kernel, life, barrier_bytes, total) -> str | None:
  """`use smaller tiles` made concrete: the largest of the user's own buffers (not a compiler scratch; with the
  others one line allocates, a comprehension's) with its first axis of 16 or more halved (or quartered, or cut to an
  eighth), where the kernel then fits; else how far over it is."""
  from .smem import _alloc_loc, _place
  own = [b for b in kernel.smem if b.name and not b.name.endswith(("scratch", "sort keys", "sort positions"))
         and b.type.shape]
  if not own:
    return None
  big = max(own, key=lambda b: b.type.nbytes)
  at = _alloc_loc(kernel, big)
  line = lambda loc: (loc.filename, loc.lineno, loc.col_offset)
  group = {b.id for b in own if b.type == big.type and line(_alloc_loc(kernel, b)) == line(at)} \
      if at is not kernel.loc else {big.id}
  shape = tuple(big.type.shape)
  axis = next((i for i, n in enumerate(shape) if n >= 16), None)
  many = " (each buffer this line allocates)" if len(group) > 1 else ""
  for cut in (2, 4, 8) if axis is not None else ():
    if shape[axis] % cut:
      break
    size = lambda b: b.type.nbytes // cut if b.id in group else b.type.nbytes
    fits = _place(kernel.smem, life, barrier_bytes, size)[1]
    if fits <= SMEM_LIMIT:
      if (staged := getattr(kernel, "staged_b_buffers", {}).get(big.id)) is not None:
        many = (f" (the buffer the compiler stores ml.dot's register operand {staged[0]} into; " +
                ("its rows are k: the dot becomes a loop of dots over k adding into one accumulator)"
                 if staged[1] == "kn" else "its rows are n: the dot computes fewer of its columns a program)"))
      return (f"use smaller tiles: {big.name} of shape {_cut(shape, cut)} instead of {shape}{many}"
              f" ({kib(big.type.nbytes // cut)}, the tile a program handles cut to match) fits, {fits} bytes in all;"
              f" or reuse one buffer for values the kernel does not need at once")
  for cut in (2, 4, 8):        # every buffer of the kernel's own cut along its first axis of 16 or more
    size = lambda b: b.type.nbytes // cut if b in own and _cut(tuple(b.type.shape), cut) else b.type.nbytes
    fits = _place(kernel.smem, life, barrier_bytes, size)[1]
    if fits <= SMEM_LIMIT:
      cuts = [f"{b.name} {_cut(tuple(b.type.shape), cut)}" for b in own if _cut(tuple(b.type.shape), cut)]
      named = ", ".join(cuts[:_NOTED + 1]) + (f", and {len(cuts) - _NOTED - 1} more" if len(cuts) > _NOTED + 1 else "")
      return (f"use smaller tiles: no one buffer is enough; the kernel's own cut to 1/{cut} ({named}) fit, {fits}"
              f" bytes in all")
  return (f"use smaller tiles: the buffers are {total - SMEM_LIMIT} bytes past the limit, more than cutting the"
          f" kernel's own to an eighth saves ({big.name}, the largest, is {shape}, {kib(big.type.nbytes)})")


def _cut(shape: tuple, cut: int) -> tuple | None:
  """`shape` with its first axis of 16 or more divided by `cut`; None where it has none that divides."""
  axis = next((i for i, n in enumerate(shape) if n >= 16), None)
  if axis is None or shape[axis] % cut:
    return None
  return shape[:axis] + (shape[axis] // cut,) + shape[axis + 1:]
