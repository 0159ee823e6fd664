"""The hints of reductions no layout takes (frontend/ops/reduce.py): a result too small for a register tensor, a
3-D partial reduction written as its slices combined elementwise, or as the 2-D reduction of a reshape."""
from __future__ import annotations

import math

from .. import hw
from .shape import ReduceKind


def _small_result_hint(cx, x, shape, axes, what, keepdims):
  """How to compute a reduction of a 3-D (or wider) tensor whose result has two or more axes but too few elements
  for a register tensor, over axes that are no leading or trailing run (which _reshape_hint covers): over leading
  and trailing axes, on a 3-D reshape whose (0, 2) the compiler reduces (the kept middle a vector, or a (1, m, 1)
  statistic that broadcasts back); over a middle run, a leading index at a time, 2-D from the ref the tensor was
  read from. Written for what the caller computes: a softmax keeps the shape, a keepdims statistic broadcasts
  back, any other (var, std and logsumexp too, whose keepdims is their own) is reduced. None for any other."""
  from .reduce import _as_call, _bare, _split_order
  n = len(shape)
  kept = tuple(s for i, s in enumerate(shape) if i not in axes)
  if n < 3 or len(kept) < 2 or math.prod(kept) % hw.WARPGROUP == 0 or len(axes) == n:
    return None
  lead = next(i for i in range(n + 1) if i == n or i not in axes)        # reduced axes before the first kept one
  trail = next(i for i in range(n + 1) if i == n or n - 1 - i not in axes)
  if lead == len(axes) or trail == len(axes):                          # a leading or trailing run
    return None
  mode = ("same" if _bare(what) in ("softmax", "log_softmax") else
          "keep" if keepdims and _bare(what) not in ("var", "std", "logsumexp") else "reduce")
  src = cx.named(x)
  name = src if src.isidentifier() else f"({src})"
  k = math.prod(kept)
  fn = _as_call(what)
  if lead + trail == len(axes):                                       # leading and trailing axes, the middle kept
    l, t = math.prod(shape[:lead]), math.prod(shape[n - trail:])
    if _split_order((l, k, t), (0, 2)) is None or not hw.rows_fit(k, t):
      return None
    flat = f"{name}.reshape({l}, {k}, {t})"
    if mode == "reduce":
      return (f"compute the {kept} result as the ({k},) vector of its row-major order: {fn}({flat}, axis=(0, 2)),"
              f" then store it through an output of shape ({k},) and reshape that outside the kernel,"
              f" .reshape{kept} (free in XLA)")
    use = (f"{fn}(w, axis=(0, 2)).reshape{shape}" if mode == "same" else
           f"{fn}(w, axis=(0, 2), keepdims=True), a (1, {k}, 1) statistic that broadcasts against w (w -"
           f" {fn}(w, axis=(0, 2), keepdims=True)), the result reshaped back, .reshape{shape}")
    return f"compute on the 3-D reshape w = {flat}: {use}"
  first, last = axes[0], axes[-1]
  if last - first + 1 != len(axes) or first == 0 or last == n - 1:   # one middle run, kept axes on both sides
    return None
  b, r, t = math.prod(shape[:first]), math.prod(shape[first:last + 1]), math.prod(shape[last + 1:])
  if not hw.rows_fit(r, t):
    return None
  from .memory import Load
  op = cx.b.defining(x)
  ref = op.ref.name if isinstance(op, Load) and op.ref.type.shape == tuple(shape) else ""
  own = ref.isidentifier() and b == shape[0]                  # (else x: the array reshaped to 3-D outside)
  read = f"{ref}.at[i][...]" if own else "x.at[i][...]"
  slab = read if n == 3 and own else f"{read}.reshape({r}, {t})"
  arr = "" if own else (f" (x: the array reshaped to ({b}, {r}, {t}) outside the kernel, free in XLA; compute on each"
                        f" slice as on the whole)")
  if mode == "same":
    return (f"compute a leading index at a time, 2-D from its ref: for i in ml.static_range({b}): out.at[i][...] ="
            f" {fn}({slab}, axis=0)" + ("" if slab == read else f".reshape{shape[1:]}") + arr)
  if mode == "keep":
    return (f"compute a leading index at a time, 2-D from its ref: for i in ml.static_range({b}): w = {slab}, whose"
            f" statistic {fn}(w, axis=0, keepdims=True) is a (1, {t}) row that broadcasts against w; store each"
            f" result into out.at[i]" + arr)
  return (f"reduce each leading index apart, read 2-D from its ref: for i in ml.static_range({b}): out.at[i][...] ="
          f" {fn}({slab}, axis=0), a ({t},) vector a row of an output out of shape ({b}, {t}){arr}")


def _slices_hint(cx, kind, x, shape, axes, keepdims, what):
  """A reduction over one short axis of a 3-D tensor (pairs of a (m, n, 2) reshape) written as
  elementwise math of its slices, which 3-D tensors take (READ_2D_FIRST would leave a tile too
  narrow to reduce along its rows: MG204 again); None for other reductions."""
  if len(axes) != 1 or shape[axes[0]] > 4 or what not in (f"ml.{kind.value}", f".{kind.value}") \
      or kind not in (ReduceKind.SUM, ReduceKind.MAX, ReduceKind.MIN):
    return None
  a, src = axes[0], cx.named(x)
  name = src if src.isidentifier() else "v"
  idx = [":"] * (len(shape) - 1)
  idx.insert(a, "None")
  keep = f"[{', '.join(idx)}]" if keepdims else ""
  parts = [f"{name}[{', '.join(str(k) if i == a else ':' for i in range(len(shape)))}]" for k in range(shape[a])]
  expr = " + ".join(parts) if kind == ReduceKind.SUM else f"{'max' if kind == ReduceKind.MAX else 'min'}({', '.join(parts)})"
  expr = (f"({expr})" if kind == ReduceKind.SUM else expr) + keep if keep else expr
  named = "" if name == src else f"{name} = {src}, then "
  return f"combine its {shape[a]} slices along axis {a} elementwise: {named}{expr} (elementwise math takes 3-D tensors)"


def _reshape_hint(cx, x, shape, axes, what):
  """A reduction of a 3-D (or wider) tensor over a leading or trailing run of its axes (a global
  average pool's `ml.mean(v, axis=(0, 1))` of an (h, w, c) tile) written as the 2-D reduction of its
  reshape in registers, where that 2-D tile reduces (columns a multiple of 32, rows a multiple of 4
  unless the columns are a multiple of 128); None otherwise."""
  from .reduce import _as_call, _bare, _flat_shape
  flat_shape = _flat_shape(shape, axes)
  if flat_shape is None:
    return None
  rows, cols, lead, kept = flat_shape
  src = cx.named(x)
  name = src if src.isidentifier() else f"({src})"
  flat, ax = f"{name}.reshape({rows}, {cols})", f"axis={0 if lead else 1}"
  if len(kept) > 1 and math.prod(kept) % hw.WARPGROUP:
    # (a (2, 8) tile of row sums, 16 elements: no register tensor of two axes holds it)
    call = f"{flat}{what}({ax})" if what.startswith(".") else f"{what}({flat}, {ax})"
    k = math.prod(kept)
    return (f"reshape it to 2-D in registers and reduce that: {call}, a ({k},) vector in the row-major"
            f" order of {kept} (too few elements for a register tensor of that shape): store it through an"
            f" output of shape ({k},) and reshape that outside the kernel, .reshape{kept} (free in XLA)" + ("" if
            _bare(what) not in ("sum", "mean", "max", "min") else
            f"; to broadcast it"
            f" back against the tile (m[..., None]), keep the reduced axes instead,"
            f" {_as_call(what)}({src}, axis={axes[0] if len(axes) == 1 else axes},"
            f" keepdims=True), which broadcasts back"))
  back = f".reshape{kept}" if len(kept) > 1 else ""
  call = f"{flat}{what}({ax})" if what.startswith(".") else f"{what}({flat}, {ax})"
  return f"reshape it to 2-D in registers and reduce that: {call}{back}"
