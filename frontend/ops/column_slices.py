"""Column slices of tensor-core tiles, `x[:, a:b]` (the Slice op: no data moves, each thread keeps its
registers of those columns); columns off the 8-column tiles are MG204 where the window is used."""
from __future__ import annotations

from .. import errors as E, hw, ir
from ..ir import LayoutRule, Traits
from ..types import TensorType, dtype_name


@ir.op(Traits(pure=True, layout=LayoutRule.ELEMENTWISE))
class Slice(ir.Op):
  """Columns `start:stop` of a 2-D register tensor in the tensor-core layout (`x[:, a:b]`):
  no data moves, each thread keeps its registers of those columns."""
  x: ir.Value
  start: int
  stop: int
  loc: object
  results: tuple
  # (message, hint) of the MG204 of columns off the 8-column tiles: raised where the window is used,
  # not where only ml.concatenate reads it, as the roll of x it makes (frontend/ops/roll.py)
  misaligned: tuple = ()


def slice_columns(cx, x, s: slice):
  n = x.type.shape[1]
  if s.step not in (None, 1) or not all(v is None or (isinstance(v, int) and not isinstance(v, bool))
                                        for v in (s.start, s.stop)):
    raise E.KernelTypeError("a register tensor is sliced with static ints and a step of 1: x[:, a:b]", cx.loc,
                            hint="slice columns with static bounds, e.g. acc[:, 64 * j:64 * (j + 1)]"
                                 " in a loop over ml.static_range")
  start, stop, _ = s.indices(n)
  if (s.start is not None and not -n <= s.start <= n) or (s.stop is not None and not -n <= s.stop <= n) \
      or stop <= start:
    raise E.IndexOutOfBoundsError(f"columns {s.start}:{s.stop} are outside a tensor of {n} columns", cx.loc,
                                  hint=f"slice within 0:{n}")
  misaligned = ()
  if start % hw.MMA_N_STEP or stop % hw.MMA_N_STEP:
    rows, width, wide = x.type.shape[0], stop - start, -(-(stop - start) // 32) * 32
    narrow = (rows * width) % hw.WARPGROUP and start + wide <= n     # buf.at[:, a:b][...] would be MG204 itself
    read = (f"v = buf.at[:, ml.ds({start}, {wide})].load(mask=ml.arange({wide})[None, :] < {width}, other=0) (a window"
            f" of {rows * width} elements is read {wide} columns wide; store it under the same mask, e.g."
            f" out.at[:, ml.ds(0, {wide})].store(v, mask=ml.arange({wide})[None, :] < {width}))" if narrow else
            f"buf.at[:, {start}:{stop}][...]")
    t_, s_ = _operand(cx.named(x, 't')), start or stop
    stage = (f"; for a narrower window, stage the tile through SMEM and read the window there: buf ="
             f" ml.smem({tuple(x.type.shape)}, jnp.{dtype_name(x.type.dtype)}); buf[...] = {cx.named(x, 't')}; {read}"
             if narrow or not (rows * width) % hw.WARPGROUP else "")    # (else that read is MG204 too)
    misaligned = (
        f"columns {start}:{stop} do not start and end on the tensor-core layout's {hw.MMA_N_STEP}-column"
        f" tiles",
        f"take the column as a vector: {t_}[:, {start}] ({t_}[:, {start}][:, None] keeps its axis, an (n, 1) tile"
        f" that broadcasts against the rows; into an (n, 1) output: out.at[:, 0][...] = {t_}[:, {start}])"
        if stop - start == 1 else
        f"slice at multiples of {hw.MMA_N_STEP} columns (64 is the usual chunk)" + (
            f"; windows that only rotate the tile work as written, ml.concatenate([{t_}[:, {s_}:], {t_}[:, :{s_}]],"
            f" axis=1) (ml.roll({t_}, -{s_}, axis=1)): compute on the rolled tile" if start == 0 or stop == n
            else "") + stage)

  t = x.type
  out = cx.b.emit(Slice, x, start, stop, loc=cx.loc, types=[TensorType((t.shape[0], stop - start), t.dtype)],
                  names=[cx.name], misaligned=misaligned).result
  from .roll import record_window          # (ml.concatenate of rotated windows reads x rolled)
  record_window(cx, out, x, (slice(None), slice(start, stop)))
  return out


def _operand(text: str) -> str:
  """`text` as the operand of a subscript: parenthesised unless a name, call or subscript."""
  import re
  return text if re.fullmatch(r"[\w.]+(\[[^\]]*\]|\([^)]*\))*", text) else f"({text})"
