"""The size guard (probe 58a): a kernel whose Mosaic GPU module has more than `errors.MODULE_OPS_MOST` operations
gets a `mg.ModuleSizeWarning` at its def line, naming the size and the source line most of them came from. Such
modules come from work unrolled at compile time (an `ml.static_range` loop of many trips, reductions of a tile
repeated per segment), and ptxas takes minutes to compile them (two of probe 57a's GPU tests, 150k-565k lines of
MLIR, did not finish in 430 s). A warning, not an error: the kernel computes."""
from __future__ import annotations

import collections
import re

from jaxlib.mlir import ir

from ..frontend import errors as E

_LOC = re.compile(r'loc\("(?P<file>[^"]*)":(?P<line>\d+):\d+\)')


def count_ops(root) -> int:
  """The operations nested under `root` (an operation), itself included."""
  n = 0

  def one(_op):
    nonlocal n
    n += 1
    return ir.WalkResult.ADVANCE
  root.operation.walk(one)
  return n


def _busiest_line(root, filename):
  """(line, ops) of the line of `filename` most of `root`'s operations are located at; None where none is."""
  lines = collections.Counter()

  def one(op):
    m = _LOC.search(str(op.location))
    if m and m.group("file") == filename:
      lines[int(m.group("line"))] += 1
    return ir.WalkResult.ADVANCE
  root.operation.walk(one)
  return lines.most_common(1)[0] if lines else None


def size_warning(kernel, root, most=None):
  """Count `root`'s operations (the kernel's gpu.launch); past `most` (errors.MODULE_OPS_MOST) the warning to
  issue at the kernel's def line (a KernelError, `errors.warn`'s), else None. Issued by the caller once the module
  is built (a warning the user made an error then stops the build, not the walk inside it)."""
  most = E.MODULE_OPS_MOST if most is None else most
  n = count_ops(root)
  if n <= most:
    return None
  busiest = _busiest_line(root, kernel.loc.filename)
  where = f", {busiest[1]} of them from line {busiest[0]}" if busiest else ""
  return E.KernelError(
      f"the Mosaic GPU module of {kernel.name} has {n} operations (more than {most}{where}): work unrolled at"
      f" compile time (the trips of an ml.static_range loop, or a call composed of many ops on large tiles), which"
      f" ptxas may take many minutes to compile", kernel.loc,
      hint="a loop over ml.static_range (or a Python range) is compiled once per trip: write it as a run-time loop,"
           " `for i in ml.range(n)`, whose body is compiled once; or give each program smaller tiles (a larger"
           " grid). Silence this with warnings.filterwarnings('ignore', category=mg.ModuleSizeWarning)")
