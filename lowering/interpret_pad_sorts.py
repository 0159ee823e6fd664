"""Interpret mode's check of masked-off lanes that reach a sort (MaskedReductionError, MG953; probe 54e).

A sort (`jax.lax.top_k`, `jnp.sort`, `jnp.argsort`, `ml.top_k`) of a row of 100 elements read as a tile of 128 with
`mask=cols < n` orders the 28 lanes past the end, filled with `other`, among the elements: `other=0.0` under a
top k of logits that may all be negative makes the top k padding, and a sorted row stored back under the load's
mask (or its first element read as the minimum) loses elements of data to padding. Every such use wants the
padding after the data, where `other` below every element (above, ascending) leaves it: a sort that puts a lane of
padding before a lane of data of another value (ties are harmless) is the error, at the sort. Sorted lanes of
padding stay padding (a masked store drops them, a reduction sees them as padding). Sorts of 64-bit keys (two
passes of 32-bit words) are left alone.
"""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend.loc import called_text
from ..frontend.ops.memory import Copy
from ..frontend.ops.sort import Sort
from .interpret_padding import DIRTY, PAD, REAL, _set, _source, state
from .interpret_pad_texts import _load_texts, _origin


def _sort(cta, o):
  st = state(cta, o.x)
  src = _source(cta, o.x)
  if not isinstance(st, np.ndarray) or src is None:
    return
  d = src.result.type.dtype if not isinstance(src, Copy) else None
  if d is not None and d.bits > 32:
    return
  x = np.asarray(cta.get(o.x))
  n = x.shape[-1]
  perm = np.asarray(cta.get(o.results[1])).reshape(-1, n)
  lanes = np.broadcast_to(st, x.shape).reshape(-1, n)
  moved = np.take_along_axis(lanes, perm, axis=1)
  pad = moved == PAD
  data = (moved == REAL) | (moved == DIRTY)
  # a lane of padding with a lane of data of another value after it, row by row (padding equal to elements of
  # data ties with them: either order gives the same values); sorted, the last lane of data differs if any does
  vals = np.asarray(cta.get(o.results[0])).reshape(-1, n)
  last = np.where(data.any(1), n - 1 - np.argmax(np.flip(data, 1), 1), -1)
  tail = np.take_along_axis(vals, np.maximum(last, 0)[:, None], 1)
  early = pad & (np.arange(n)[None, :] < last[:, None]) & (vals != tail)
  what, _ = called_text(o.loc, "ml.sort")
  name = what.rsplit(".", 1)[-1]
  if name in _RANKS:
    # an order statistic ranks every lane of the tile: padding sorted last still moves the position it reads
    # (the median of 128 lanes, not of the row's 100 elements); the NaN-skipping ones skip padding that is NaN
    counted = pad & data.any(1)[:, None]
    if o.valid:        # (a tile the compiler computes padded: its own padding stays past `valid`, unranked)
      counted &= np.arange(n)[None, :] < o.valid
    if name.startswith("nan"):
      counted &= ~np.isnan(vals.astype(np.float64)) if vals.dtype.kind == "f" else True
    if counted.any():
      raise _rank_error(cta, o, src, what, name, counted, data)
  if early.any():
    raise _sort_error(cta, o, src, vals, moved, early)
  shape = o.results[0].type.shape
  _set(cta, o.results[0], np.where(pad, PAD, REAL).astype(np.int8).reshape(shape), src)


def _sort_error(cta, o, src, vals, moved, early):
  r, p = (int(i) for i in np.argwhere(early)[0])
  q = p + 1 + int(np.argmax((moved[r, p + 1:] != PAD) & (vals[r, p + 1:] != vals[r, p])))
  ref, axis, mask, other = _load_texts(cta, src)
  what, _ = called_text(o.loc, "ml.sort")
  row = f" (row {r})" if len(vals) > 1 else ""
  first = "largest" if o.descending else "smallest"
  gives = ("the first positions it gives are the padding's" if "argsort" in what else
           f"the {first} values it gives are padding")
  msg = (f"{what} sorts {_origin(src, ref, other)}: in program {cta.label}{row} a lane of padding sorts to position"
         f" {p}, before an element of data at position {q}, so {gives}")
  d = src.result.type.dtype if not isinstance(src, Copy) else o.x.type.dtype
  if d.is_float:
    ident = "float('-inf')" if o.descending else "float('inf')"
  else:
    info = np.iinfo(np.dtype(str(d)) if str(d) != "bool" else np.int8)
    ident = str(info.min if o.descending else info.max)
  if isinstance(src, Copy):
    hint = (f"sort the padding last: ml.where(pos < {ref}.shape[{axis}], v, {ident}) with pos the positions of the"
            f" copied window along that dimension")
  else:
    hint = (f"fill them so that they sort after the data: other={ident} in the masked load at line {src.loc.lineno}"
            f" (or sort ml.where({mask}, v, {ident}))")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


_RANKS = ("median", "quantile", "percentile", "nanmedian", "nanquantile", "nanpercentile")


def _rank_error(cta, o, src, what, name, counted, data):
  r = int(np.argwhere(counted)[0][0])
  n, real = counted.shape[1], int(data[r].sum())
  ref, axis, mask, other = _load_texts(cta, src)
  row = f" (row {r})" if len(counted) > 1 else ""
  msg = (f"{what} ranks {_origin(src, ref, other)}: in program {cta.label}{row} it ranks all {n} lanes, not the"
         f" {real} elements of data, so the position it reads is the wrong one")
  nan = name if name.startswith("nan") else "nan" + name
  if isinstance(src, Copy):
    hint = (f"fill the padding with NaN and skip it: jnp.{nan}(ml.where(pos < {ref}.shape[{axis}], v, float('nan')))"
            f" with pos the positions of the copied window along that dimension")
  else:
    hint = (f"fill the padding with NaN and skip it: other=float('nan') in the masked load at line"
            f" {src.loc.lineno} and jnp.{nan}")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


RULES = {Sort: _sort}
