"""Masked runs of SMEM buffers that leave the buffer (probe 72a): `ml.load(buf.at[s - 1], mask=s >= 1, other=NEG)`,
warp-ctc's alpha[s - 1] read back from SMEM, and its stores at `s + 1`, which no window can take (an SMEM window
stays inside its buffer, masked or not), are the masked gather and scatter (ops/gather.py), whose indices are
clamped (dropped) and whose mask selects after."""
from __future__ import annotations

from ..types import Space
from .base import is_tensor


def _guards(b, mask, idx, depth=0) -> bool:
  """Whether the boolean `mask` is (an `&` of terms one of which is) a comparison of the index tensor `idx` itself
  (`(idx >= 0) & (idx < n)`): a mask that bounds the run's own positions, which may then leave the buffer."""
  from .elementwise import BinOp, Binary, Compare
  o = b.defining(mask) if is_tensor(mask) else None
  if isinstance(o, Compare):
    return any(getattr(v, "id", None) == idx.id for v in (o.lhs, o.rhs))
  if isinstance(o, Binary) and o.kind == BinOp.AND and depth < 8:
    return any(_guards(b, v, idx, depth + 1) for v in (o.lhs, o.rhs))
  return False


def smem_run_outside(cx, iref, mask=None) -> bool:
  """Whether a run of `iref` (`buf.at[s - 1]`, `buf.at[s + 2]` of `s = ml.arange(n)`) covers an SMEM window that
  leaves its buffer at a static start, or starts at run time under a `mask` that bounds its positions: CUDA's and
  Triton's shifted neighbour read under a mask (`mask=s >= 1`, a CTC step's alpha[s - 1]), which the gather (its
  indices clamped, the mask selecting after) and the scatter (the masked-off elements dropped) take where no window
  can (probe 72a: MG203, "windows stay inside it, masked or not", though a masked gather at any other indices
  computed)."""
  from .index_hints import RUN_ONLY, run_start
  if getattr(iref.ref.type, "space", None) != Space.SMEM:
    return False
  items = iref.index if isinstance(iref.index, tuple) else (iref.index,)
  for k, i in enumerate(items):
    run = run_start(cx.b, i) if is_tensor(i) else None
    if run is not None and isinstance(run[0], int) and k < len(iref.ref.type.shape) and \
        (run[0] < 0 or run[0] + run[1] > iref.ref.type.shape[k]):
      return True
    if mask is not None and is_tensor(i) and (run is None or not isinstance(run[0], int)) and \
        run_start(cx.b, i, RUN_ONLY) is not None and _guards(cx.b, mask, i):
      return True          # (a run-time start the mask bounds, `idx = s + k - 2`, `mask=(idx >= 0) & (idx < n)`)
  return False
