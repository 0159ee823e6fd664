"""One tensor-core instruction's accumulator against the registers a thread is launched with.

ptxas compiles a kernel for its launch bound (hw.launch_registers: 128 registers a thread at 512
threads, 64 at 1024), and a WGMMA instruction keeps its whole 64 x n block of the accumulator in
registers at once: n / 2 registers for float32 and int32 accumulators, n / 4 for float16, plus
hw.MMA_EXTRA_REGISTERS. One that does not fit is not spilled: ptxas stops ("C7602 Insufficient
registers"), a raw "Pass pipeline failed" on the GPU. It is checked here, on the kernel after warp
specialisation added its producer warpgroup, at the ml.dot.
"""
from __future__ import annotations

from . import errors as E
from . import hw
from . import ir
from .types import DType, TensorType, dtype_name, resolve
from .ops.control import For, While, WarpSpecialize, terminator_values
from .ops.mma import Dot


def _registers(n: int, acc: DType) -> int:
  """Registers a thread holds one instruction's 64 x n accumulator block in."""
  return hw.MMA_M * n * acc.bits // 32 // hw.WARPGROUP


def _local_rows(m: int, wgs: int) -> int:
  """The rows of an (m, n) WGMMA tile one warpgroup holds: warpgroups split the rows of a tile of
  whole 64-row blocks each, and each holds a tile of fewer rows whole."""
  return m // wgs if wgs > 1 and m % (hw.MMA_M * wgs) == 0 else m


def _tile_registers(t, wgs: int) -> int:
  """Registers a thread holds its warpgroup's part of WGMMA-layout tensor type `t` in."""
  m, k = t.shape[-2:]
  return _local_rows(m, wgs) * k * resolve(t.dtype).bits // 32 // hw.WARPGROUP


def _carried_beside(kernel, o) -> list:
  """The other tensor-core accumulators the loops around ml.dot `o` carry past it (a gated MLP's second
  accumulator, attention's output beside its scores): each lives in registers whole all through the loop,
  beside `o`'s. Those whose loop carries `o`'s own result, or that of a dot chained onto it (`ml.dot(a2, b2, acc)`
  after `acc = ml.dot(a, b, acc)`, K slices of a static loop), are `o`'s accumulator, counted already."""
  from .ir import path_to
  all_dots = [x for x in ir.walk(kernel.body) if isinstance(x, Dot)]
  dots = {id(r) for x in all_dots for r in x.results}
  own = {id(o.results[0])}       # o's result and the dots chained onto it (acc=...): one accumulator's registers
  for x in all_dots:             # (program order: a chain's later dots come after its earlier ones)
    if x.acc is not None and id(x.acc) in own:
      own.add(id(x.results[0]))
  found = []
  for loop in path_to(kernel.body, o)[:-1]:
    if not isinstance(loop, (For, While)):
      continue
    args = loop.body.args[1:] if isinstance(loop, For) else loop.body.args
    ends = terminator_values(loop.body.ops[-1]) or []
    for arg, end in zip(args, ends):
      t = getattr(end, "type", None)
      if (id(end) in dots and id(end) not in own and isinstance(t, TensorType) and len(t.shape) == 2
          and all(end is not r for r in o.results)):
        found.append((arg, end, loop))
  return found


def _live_error(kernel, o, threads: int, producer: bool, have: int):
  """The registers one ml.dot keeps live a thread at once: its whole accumulator (every 64-row block
  of it, each instruction's output, lives until the dot's result is read), a register A operand
  beside it, and the other accumulators the loops around it carry. Past a thread's registers ptxas spills
  them to local memory (several times slower); a RegisterSpillWarning at the dot (the line that makes the
  accumulator), with the block that splits its rows to fit or the tile that fits."""
  t = o.results[0].type
  wgs = max(1, kernel.block // hw.WARPGROUP)
  acc = _tile_registers(t, wgs)
  a = _tile_registers(o.a.type, wgs) if isinstance(o.a.type, TensorType) and len(o.a.type.shape) == 2 else 0
  beside = _carried_beside(kernel, o)
  others = sum(_tile_registers(end.type, wgs) for _, end, _ in beside)
  need = acc + a + others
  if need <= have:
    return None
  m, n = t.shape[-2:]
  rows = _local_rows(m, wgs)
  held = (f"{rows} rows on each of {wgs} warpgroups" if rows != m else
          f"all {m} rows on {'each warpgroup' if wgs > 1 else 'one warpgroup'} of block={kernel.block}")
  what = f"{acc} registers a thread ({held})"
  if a:
    what += f", and its register A operand {'x'.join(map(str, o.a.type.shape))} {dtype_name(o.a.type.dtype)} {a} more"
  loops = {}
  for arg, end, loop in beside:
    loops.setdefault(loop.loc.lineno, []).append(
        f"{arg.name or end.name or 'another accumulator'} ({'x'.join(map(str, end.type.shape))}"
        f" {dtype_name(end.type.dtype)}, {_tile_registers(end.type, wgs)} more)")
  for line, names in loops.items():
    what += f", and the loop at line {line} carries {' and '.join(names)} beside it all the way"
  extra = hw.WARPGROUP if producer else 0

  def fitting(w):
    """The most rows (m halved) a tile may have at block=w warpgroups, its registers a thread (the carried
    accumulators of as many rows as `o`'s taking as few rows as it)."""
    tile_m = m
    while tile_m >= hw.MMA_M:
      per = _tile_registers(TensorType((tile_m, n), t.dtype), w) + (
          _tile_registers(TensorType((tile_m, o.a.type.shape[-1]), o.a.type.dtype), w) if a else 0) + sum(
          _tile_registers(TensorType((tile_m if end.type.shape[0] == m else end.type.shape[0], end.type.shape[1]),
                                     end.type.dtype), w) for _, end, _ in beside)
      if tile_m % hw.MMA_M == 0 and per + hw.MMA_EXTRA_REGISTERS <= hw.launch_registers(w * hw.WARPGROUP + extra):
        return tile_m, per
      tile_m //= 2
    return None, None
  fixes, here = [], fitting(wgs)[0] or 0
  for w in range(wgs + 1, hw.MAX_BLOCK // hw.WARPGROUP + 1):
    tile_m, per = fitting(w)
    if tile_m is not None and tile_m > here:     # (more warpgroups, a bigger tile than at this block)
      if tile_m == m:
        fixes.append(f"block={w * hw.WARPGROUP} to split its rows over {w} warpgroups ({per} registers a thread)")
      else:
        fixes.append(f"block={w * hw.WARPGROUP} with a {tile_m}x{n} tile a program (its rows split over {w}"
                     f" warpgroups: {per} registers a thread)")
      break
  tile_m, per = fitting(wgs)
  if tile_m is not None:
    fixes.append(f"a {tile_m}x{n} tile a program at block={kernel.block} ({per} registers a thread)")
  elif beside and all(end.type.shape[1] == n for _, end, _ in beside):
    # (no fewer rows fit: fewer columns for every accumulator the loop carries, all as wide as this one)
    cols = n // 2
    while cols >= 64:
      per = (_tile_registers(TensorType((m, cols), t.dtype), wgs) + a + sum(
          _tile_registers(TensorType((end.type.shape[0], cols), end.type.dtype), wgs) for _, end, _ in beside))
      if per + hw.MMA_EXTRA_REGISTERS <= have:
        fixes.append(f"tiles of {cols} columns for each accumulator ({m}x{cols} at block={kernel.block}: {per}"
                     " registers a thread)")
        break
      cols //= 2
  return E.RegisterCapacityError(
      f"this ml.dot's {m}x{n} {dtype_name(t.dtype)} accumulator lives in registers whole: {what}; a CTA of"
      f" {threads} threads is compiled for {have} registers a thread, so ptxas spills it to local memory (it computes, several times slower)",
      o.loc, hint="use " + ", or ".join(fixes) if fixes else
      f"carry fewer or narrower accumulators through the loop: this {m}x{n} one and"
      f" {' and '.join(a.name or 'another accumulator' for a, _, _ in beside)} need {need} registers a thread"
      f" together, of {have} (tiles of fewer columns or rows a program, or a second kernel for part of them)"
      if beside else "use a smaller tile")


def launch_of(kernel: ir.Kernel) -> tuple[bool, int, int]:
  """(whether warp specialisation adds its producer warpgroup, the threads the CTA launches with, the registers
  ptxas gives each of them)."""
  producer = any(isinstance(o, WarpSpecialize) for o in kernel.body.ops)
  threads = kernel.block + (hw.WARPGROUP if producer else 0)
  return producer, threads, hw.launch_registers(threads)


def check_mma_registers(kernel: ir.Kernel) -> None:
  producer, threads, have = launch_of(kernel)
  errors, seen, carried_with = [], set(), set()
  for o in ir.walk(kernel.body):
    if not isinstance(o, Dot) or o.loc in seen:
      continue
    t = o.results[0].type
    acc, n = resolve(t.dtype), t.shape[-1]
    need = _registers(n, acc) + hw.MMA_EXTRA_REGISTERS
    if need <= have:
      beside = {end.id for _, end, _ in _carried_beside(kernel, o)}
      done = any(r.id in carried_with for r in o.results) or beside and beside <= carried_with
      live = None if done else _live_error(kernel, o, threads, producer, have)
      if live is not None:         # (it computes, but spilled: a warning, not an error; ptxas does not stop)
        seen.add(o.loc)
        carried_with.update(beside)          # (one warning for the accumulators a loop carries together)
        E.warn(live)
      continue
    seen.add(o.loc)
    per_col = hw.MMA_M * acc.bits // 32 / hw.WARPGROUP
    fits = int((have - hw.MMA_EXTRA_REGISTERS) / per_col) // 64 * 64
    # the most threads (whole warpgroups) whose launch bound holds the instruction
    most = max((w * hw.WARPGROUP for w in range(1, hw.MAX_BLOCK // hw.WARPGROUP + 1)
                if hw.launch_registers(w * hw.WARPGROUP) >= need), default=0)
    block = most - (hw.WARPGROUP if producer else 0)
    launched = f"block={kernel.block}" + (" and the warp-specialised loop's producer warpgroup" if producer else "")
    fixes = []
    if fits >= 64:
      fixes.append(f"dots of at most {fits} columns (a b tile of {fits} columns, or several dots on column"
                   f" slices of b, each with its own accumulator)")
    if block >= hw.WARPGROUP:
      fixes.append(f"block={block} or fewer threads" + (" (the producer warpgroup comes on top)" if producer else ""))
    errors.append(E.RegisterCapacityError(
        f"this ml.dot's {'x'.join(map(str, t.shape))} {dtype_name(acc)} accumulator: one tensor-core instruction holds a"
        f" 64x{n} block of it in {_registers(n, acc)} registers a thread, and needs {need} in all; a CTA of"
        f" {threads} threads ({launched}) is compiled for {have} registers a thread", o.loc,
        hint="use " + " or ".join(fixes) if fixes else "use fewer threads and a narrower b tile"))
  if errors:
    E.raise_all(errors)
