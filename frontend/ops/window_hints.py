"""Hints for windows at a run-time start that a ref or register tile cannot take as written: a register
tile's `t[i:i + 8]` (the SMEM buffer and window that hold it) and a ref's strided `x[i:i + 64:2]` (the
window ml.ds(i, 64), then the step in registers), in the user's names."""
from __future__ import annotations

from .. import errors as E
from .base import is_value
from .index_hints import _index_text, fixed_length


def register_window_hint(cx, x, index, name) -> str:
  """For a register tile's `t[i:i + 8]`: the SMEM buffer that holds it and its window ml.ds(i, 8), in the
  user's names ("" where no slice has a fixed size at a run-time start)."""
  from ..types import dtype_name, resolve
  d = next((k for k, i in enumerate(index) if isinstance(i, slice) and is_value(i.start) and i.step in (None, 1)
            and (fixed_length(cx, i.start, i.stop) or 0) > 0), None)
  if d is None:
    return ""
  win = ", ".join(f"ml.ds({_index_text(i.start, cx)}, {fixed_length(cx, i.start, i.stop)})" if k == d else
                  "..." if i is Ellipsis else _index_text(i, cx) for k, i in enumerate(index))
  size = fixed_length(cx, index[d].start, index[d].stop)
  lax = f"jax.lax.dynamic_slice_in_dim({name}, {_index_text(index[d].start, cx)}, {size}, axis={d})"
  return (f"take the window with {lax} (a gather in registers: a start past {x.type.shape[d] - size} is clamped"
          f" to it, as jax does); or store {name} into an SMEM buffer and read the window there: buf ="
          f" ml.smem({tuple(x.type.shape)}, jnp.{dtype_name(resolve(x.type.dtype))}); buf[...] = {name}; then"
          f" buf.at[{win}][...]")


def strided_window_error(cx, index, d, shape, name, access=""):
  """`x[i:i + 64:2]` of a ref, a fixed size at a run-time start with a step k > 1 on the last kept axis: the
  window ml.ds(i, 64) read into registers, then [..., ::k] there (a register tensor's last axis takes a step);
  None for any other slice."""
  i = index[d]
  size = fixed_length(cx, i.start, i.stop) if is_value(i.start) else None
  kept = [k for k, x in enumerate(index) if not (isinstance(x, int) or is_value(x))]
  if not (isinstance(i.step, int) and i.step > 1 and size and 0 < size <= shape[d] and kept[-1] == d):
    return None
  win = ", ".join(f"ml.ds({_index_text(i.start, cx)}, {size})" if k == d else _index_text(x, cx)
                  for k, x in enumerate(index))
  reg = ", ".join(f"::{i.step}" if k == d else ":" for k in kept)
  how = (f"read the window and take the step in registers: {name}.at[{win}][...][{reg}]" if access != "write" else
         f"a ref's slices take a step of 1: write a window of step 1, {name}.at[{win}], holding the elements between")
  return E.KernelTypeError(f"slice {_index_text(i, cx)}:{i.step} in dimension {d} of {name} has a run-time start and"
                           f" a step of {i.step}: a ref's slices take a step of 1", cx.loc, hint=how)
