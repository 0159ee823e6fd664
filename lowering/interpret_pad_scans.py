"""Interpret mode's check of masked-off lanes that reach a scan (MaskedReductionError, MG953; probe 51a).

A scan's element k combines the lanes up to k along its axis (from k on, reversed). Lanes a masked load kept off
past the end of its array, filled with `other`, change it where `other` is not the identity of the scan's
operation: 0 for a sum, 1 for a product, -inf for a max, +inf for a min. The elements of the scan at lanes of data
so changed (a reverse scan from a padded end, or a padded start) are wrong wherever they go: the error, at the scan.
The elements at the padding's own lanes stay padding (a masked store drops them, a reduction sees them as padding:
PAD), but for the scan's total, its last element (first, reversed), which jnp.prod and `ml.cumprod(v)[-1]` take as
the product of the tile (frontend/ops/scan.py marks such scans `totals`): where the padding changes it, `other=0.0`
under a product, that is the error too. Scans a frontend reduction runs (a sum over a middle axis) come with
their own padding rules; those of segments are left alone (REAL), as anything this does not follow.
"""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend.loc import called_text
from ..frontend.ops.memory import Copy
from ..frontend.ops.scan import Scan, ScanKind
from .scan import scanned
from .interpret_padding import DIRTY, PAD, REAL, _differs, _set, _source, state
from .interpret_pad_texts import _identity, _load_texts, _num, _origin

_NAMES = {ScanKind.SUM: "a sum", ScanKind.PROD: "a product", ScanKind.MAX: "a max", ScanKind.MIN: "a min"}
_VERBS = {ScanKind.SUM: "adds", ScanKind.PROD: "multiplies", ScanKind.MAX: "takes the max of",
          ScanKind.MIN: "takes the min of"}




def _ident_text(kind, d) -> str:
  i = _identity(kind, d)
  if d.is_float:
    return {0: "0.0", 1: "1.0"}.get(i, "float('-inf')" if i < 0 else "float('inf')")
  return str(i)


def _scan(cta, o):
  st = state(cta, o.x)
  src = _source(cta, o.x)
  if not isinstance(st, np.ndarray) or src is None or o.segment:
    return
  x, d = np.asarray(cta.get(o.x)), o.x.type.dtype
  st = np.broadcast_to(st, x.shape)
  pad = st == PAD
  if not pad.any() or (st == DIRTY).any() or pad.all(axis=o.axis).all():
    if pad.all():
      _set(cta, o.result, np.full(x.shape, PAD, np.int8), src)
    return
  got = np.asarray(cta.get(o.result))
  want = scanned(o, np.where(pad, np.asarray(_identity(o.kind, d)).astype(x.dtype), x), d)   # (in the GPU's order)
  changed = _differs(got, want, 0, d)
  data = changed & ~pad
  wrong = data
  if o.totals:           # (the element read as the total: the last of the tile's own, where it is read padded)
    last = [slice(None)] * x.ndim
    last[o.axis] = o.totals[0]
    total = np.zeros(x.shape, bool)
    total[tuple(last)] = True
    whole = np.broadcast_to(pad.all(axis=o.axis, keepdims=True), x.shape)   # (groups of padding only: padding)
    wrong = data | (changed & total & ~whole)
  if wrong.any():
    raise _scan_error(cta, o, src, x, pad, got, want, wrong, bool(data.any()))
  _set(cta, o.result, np.where(pad, PAD, REAL).astype(np.int8), src)


def _scan_error(cta, o, src, x, pad, got, want, wrong, data):
  k = tuple(int(i) for i in np.argwhere(wrong)[0])
  ref, axis, mask, other = _load_texts(cta, src)
  d = o.x.type.dtype
  ident = _ident_text(o.kind, d)
  name = _NAMES[o.kind]
  what, arg = called_text(o.loc, f"ml.cum{o.kind.value}")
  at = f"lanes {list(k)}" if len(k) > 1 else f"lane {k[0]}"
  lanes = np.asarray(x)[pad]
  fill = getattr(src, "other", 0)
  raw = isinstance(fill, (int, float)) and np.all(lanes == np.asarray(fill).astype(lanes.dtype))
  if data:
    msg = (f"{what} scans {_origin(src, ref, other, cta)}: they change its elements at lanes of data, {_num(got[k])} at"
           f" {at} in program {cta.label} where the elements inside give {_num(want[k])}")
  else:
    msg = (f"{what} {_VERBS[o.kind]} {_origin(src, ref, other, cta)}: they change its result in program {cta.label},"
           f" {_num(got[k])} where the elements inside give {_num(want[k])}")
  keep = f"ml.where({mask}, {arg or 'v'}, {ident})" if mask else None
  if isinstance(src, Copy):
    hint = (f"keep the zeros out of the {'scan' if data else name[2:]}: {'scan' if data else 'reduce'} {keep}" if keep
            else f"keep the zeros out: ml.where(pos < {ref}.shape[{axis}], v, {ident}) with pos the positions of the"
                 f" copied window along that dimension")
  elif raw and not isinstance(fill, bool):
    hint = f"fill them with the identity of {name}: other={ident} in the masked load at line {src.loc.lineno}"
    if keep and o.kind != ScanKind.SUM:
      hint += f" (where a sum reads the same tile, keep other=0 there and {'scan' if data else 'reduce'} {keep})"
  else:
    hint = (f"keep the padding out of the scan: scan {keep}" if keep else
            f"keep the padding out of the scan: ml.where(mask, v, {ident}) with mask the lanes inside {ref}")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


RULES = {Scan: _scan}
