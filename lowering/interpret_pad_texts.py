"""The words of interpret mode's MG953 (lowering/interpret_padding.py): where a reduction's padding came from
(the masked load or TMA copy, its mask and `other` as the user wrote them: frontend/call_texts.py), the message,
and the hint that fits (the identity as `other`, an `ml.where` of the mask before reducing)."""
from __future__ import annotations

import numpy as np

from ..frontend import errors as E
from ..frontend import ir
from ..frontend import call_texts as T
from ..frontend.ops.memory import Copy
from ..frontend.ops.shape import ReduceKind
from . import interpret_numerics as N


def _identity(kind, d):
  """The identity of a reduction's or a scan's kind (ReduceKind or ScanKind, by name) in dtype `d`."""
  if kind.name == "SUM":
    return 0
  if kind.name == "PROD":
    return 1
  if d.is_float:
    return -np.inf if kind.name == "MAX" else np.inf
  info = np.iinfo(N.np_dtype(d))
  return info.min if kind.name == "MAX" else info.max


def _load_texts(cta, src):
  """(the array's name, the root axis its padding leaves, the mask's text, other's text) of the masked load or
  TMA load `src` (a TMA load's mask is the positions of its window along that axis, where its call says them)."""
  if isinstance(src, Copy):
    return _copy_texts(cta, src)
  from .access import _coords
  ref = cta.get(src.ref)
  kw = T.keywords(src.loc)
  mask = kw.get("mask", "mask")
  other = kw.get("other", str(src.other) if not isinstance(src.other, ir.Value) else "other")
  if not isinstance(src.other, ir.Value) and not T.names_value(other, src.other):
    other = f"{other} ({src.other})"            # (a constexpr's name: its value too)
  lead = cta.m.lead(ref)
  axis = 0
  shape = np.asarray(cta.get(src.mask)).shape
  for k, (c, d) in enumerate(zip(_coords(ref, shape), ref.root.type.shape)):
    if ((c < 0) | (c >= d)).any():
      axis = k - lead
  return ref.name, max(axis, 0), mask, other


def _copy_texts(cta, src):
  ref = cta.get(src.src)
  lead = cta.m.lead(ref)
  axis, at = 0, 0
  for k, ((s_, n, sq), d) in enumerate(zip(ref.win, ref.root.type.shape)):
    if (s_ < 0 or s_ + (1 if sq else n) > d) and k >= lead:
      axis = k - lead
      break
    at += not sq
  rank = sum(not sq for _, _, sq in ref.win)
  mask = None
  pos = T.ds_positions(src.loc, axis)
  if pos is not None:
    if rank > 1:
      pos = f"({pos})[{', '.join(':' if j == at else 'None' for j in range(rank))}]"
    mask = f"{pos} < {ref.name}.shape[{axis}]"
  return ref.name, axis, mask, None


def _origin(src, ref, other, cta=None):
  """How the message names where the padding came from: past the array's end, or (some lanes inside it) off under
  the load's mask, a bound of the kernel's own such as a row's run-time length (probe 56d)."""
  if isinstance(src, Copy):
    return f"elements the TMA copy at line {src.loc.lineno} read past the end of {ref} (as zeros)"
  if cta is not None and id(src) in cta.pad_inside:
    mask = T.keywords(src.loc).get("mask")
    return (f"lanes the masked load at line {src.loc.lineno} kept off under its mask{f' ({mask})' if mask else ''},"
            f" filled with other={other}")
  return f"lanes the masked load at line {src.loc.lineno} kept off past the end of {ref}, filled with other={other}"


def _reduce_error(cta, o, src, x, pad, got, want, bad):
  k = tuple(int(i) for i in np.argwhere(bad)[0]) if np.ndim(bad) else ()
  g, w = np.asarray(got)[k], np.asarray(want)[k]
  lanes = np.asarray(x)[pad]
  ref, axis, mask, other = _load_texts(cta, src)
  fill = 0 if isinstance(src, Copy) else src.other
  raw = isinstance(fill, (int, float)) and np.all(lanes == np.asarray(fill).astype(lanes.dtype))
  kind = o.kind
  ident = {ReduceKind.SUM: "0", ReduceKind.MAX: "float('-inf')", ReduceKind.MIN: "float('inf')"}[kind]
  d = o.x.type.dtype
  if not d.is_float and kind != ReduceKind.SUM:
    ident = f"{_identity(kind, d)}"
  what, arg = T.called(o.loc, f"ml.{kind.value}")
  where = "" if not k else f" (result {list(k) if len(k) > 1 else k[0]})"
  through = cta.pad_dots.get(id(src))
  refill = cta.pad_wheres.get(id(src))
  if refill is not None and np.all(lanes == np.asarray(cta.get(refill[1]) if isinstance(refill[1], ir.Value)
                                                         else refill[1]).ravel()[0]):
    raw = True
  held = _origin(src, ref, other, cta) + (
      f", through the ml.dot at line {through[0].loc.lineno} (the {through[1]} of its result they alone make)"
      if through else "") + _met(cta, src, ref) + (
      f", then set to {_refill_text(cta, refill)} by the select at line {refill[0].loc.lineno}" if refill else "") + (
      "" if raw else f", {_few(lanes)} by the time they reach it")
  mask = mask if through else _oriented(cta, mask, src, pad)
  plain = what.split(".")[-1].rstrip("()") == kind.value
  msg = (f"{what} reduces {held}: they change {'its result' if plain else f'the {kind.value} it takes'} in program {cta.label}{where},"
         f" {_num(g)} where the elements inside give {_num(w)}")
  name = {ReduceKind.SUM: "a sum", ReduceKind.MAX: "a max", ReduceKind.MIN: "a min"}[kind]
  if through is not None:
    return _dot_error(cta, o, src, through, msg, ref, axis, mask, kind, d)
  if isinstance(src, Copy):
    fix = _with_where(o.loc, mask, kind, d) if mask else None
    hint = (f"reduce only the elements inside: {fix}" if fix else
            f"reduce only the elements inside {ref}: ml.where(pos < {ref}.shape[{axis}], v, {ident}) with pos the"
            f" positions of the copied window along that dimension") + (
            "; a masked load from registers, x.at[...].load(mask=..., other=...), fills them with a value of yours"
            if kind != ReduceKind.SUM else "")
  elif refill is not None:
    hint = (f"select the identity of {name} there: {ident} in place of {_refill_text(cta, refill)} in the select at line"
            f" {refill[0].loc.lineno}" + (" (where a sum reduces the same tile, keep 0 there and take the"
                                          f" {kind.value} of a select of {ident})" if kind != ReduceKind.SUM else ""))
  elif raw and (kind != ReduceKind.SUM or what.split(".")[-1] in ("sum", "sum()")):
    hint = f"fill them with the identity of {name}: other={ident} in the masked load at line {src.loc.lineno}"
    if kind != ReduceKind.SUM:
      hint += f" (where a sum reduces the same tile, keep other=0 there and take the {kind.value} of ml.where({mask}, v, {ident}))"
  else:
    hint = f"reduce only the lanes the mask keeps: {_with_where(o.loc, mask, kind, d) or what}"
  return E.MaskedReductionError(msg, o.loc, hint=hint)


def _refill_text(cta, refill) -> str:
  """The constant a select put in place of a masked load's padding (`0.0` of `ml.where(m, v, 0.0)`)."""
  return _num(np.asarray(cta.get(refill[1])).ravel()[0]) if isinstance(refill[1], ir.Value) else _num(refill[1])


def _met(cta, src, ref) -> str:
  """Where the padding of `src` met another array's data, or indexed a gather, in the message's words."""
  met, gathered = cta.pad_meets.get(id(src)), cta.pad_gathers.get(id(src))
  table = getattr(getattr(gathered, "ref", None), "name", None) or "the register tensor"
  return (f", then met the elements of {' and '.join(met[1])} in the same lanes at line {met[0].lineno} (where no"
          f" element of {ref} is there to pair with them)" if met else "") + (
          f", then indexed the gather at line {gathered.loc.lineno}, which read an element of {table} for each of"
          f" them" if gathered else "")


def _oriented(cta, mask, src, pad):
  """The 1-D masked load's `mask` text oriented as its padding lies in the 2-D tile a reduction takes (`(m)[:, None]`
  where an outer product `a[:, None] * y[None, :]` made its rows the padding; NumPy's broadcast aligns a 1-D mask
  with the last axis), transposed where the padded tile was (`v.T`, a store through `buf.T`)."""
  if mask is None or isinstance(src, Copy) or pad.ndim != 2:
    return mask
  if len(src.result.type.shape) == 1:
    rows_only = bool((pad == pad[:, :1]).all()) and not bool((pad == pad[:1, :]).all())
    return f"({mask})[:, None]" if rows_only else mask
  loaded = cta.pads.get(src.result.id)
  if loaded is None or len(src.result.type.shape) != 2:
    return mask
  from .interpret_padding import PAD
  lp = np.broadcast_to(loaded[0], src.result.type.shape) == PAD
  same = pad.shape == lp.shape and bool((pad == lp).all())
  return f"({mask}).T" if not same and pad.shape == lp.T.shape and bool((pad == lp.T).all()) else mask


def _dot_error(cta, o, src, through, msg, ref, axis, mask, kind, d):
  """MG953 of padding an ml.dot's result carries (whole rows or columns computed from padding only): the message
  names the dot, the hint keeps the result's padded rows or columns out of the reduction."""
  dot, side = through
  res = dot.results[0].name or "the result"
  pos = T.ds_positions(src.loc, axis) if isinstance(src, Copy) else None
  valid = None
  if pos is not None:
    valid = f"({pos})[{'None, :' if side == 'columns' else ':, None'}] < {ref}.shape[{axis}]"
  elif mask and mask.count("<") == 1 and ("[:, None]" in mask) != ("[None, :]" in mask):
    keep = "[None, :]" if side == "columns" else "[:, None]"
    valid = mask.replace("[:, None]", keep).replace("[None, :]", keep)
  if valid is None:
    return E.MaskedReductionError(msg, o.loc, hint=(
        f"keep the {side} of {res} that the padding of {ref} makes out of the reduction: ml.where(valid, {res}, identity)"
        f" after the ml.dot at line {dot.loc.lineno}, with valid the positions of {ref}'s rows < {ref}.shape[{axis}]"))
  fix = _with_where(o.loc, valid, kind, d)
  direct = o.x is dot.results[0]
  hint = f"reduce only the elements inside: {fix}" if fix else ""
  if not direct or not fix:
    hint += (", or " if hint else "") + (
        f"mask {res} once after the ml.dot at line {dot.loc.lineno}: {res} = ml.where({valid}, {res}, float('-inf'))"
        f" (for a softmax of it: exp(-inf) = 0 in the padding's {side})")
  return E.MaskedReductionError(msg, o.loc, hint=hint)


def _num(v):
  v = np.asarray(v).item()
  return f"{v:.6g}" if isinstance(v, float) else str(v)


def _few(lanes):
  u = np.unique(np.asarray(lanes, np.float64))
  if u.size == 1:
    return f"{_num(u[0])}"
  return f"values such as {_num(u[0])} and {_num(u[-1])}"


def _with_where(loc, mask, kind, d):
  """The reduction's call at `loc` keeping only the lanes `mask` keeps (call_texts.with_where), the identity of
  `kind` in `d` selected in where the function takes no where=."""
  ident = {ReduceKind.SUM: "0.0" if d.is_float else "0", ReduceKind.MAX: "float('-inf')",
           ReduceKind.MIN: "float('inf')"}[kind]
  if not d.is_float and kind != ReduceKind.SUM:
    ident = str(_identity(kind, d))
  return T.with_where(loc, mask, ident)
