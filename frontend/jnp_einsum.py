"""Two-operand jnp.einsum specs that are not a matrix product ml.dot takes (probe 49b): outer products
('ij,jk->ijk', 'i,j->ij'), elementwise products ('ij,ij->ij', 'ij,i->ij'), row dots ('ij,ij->i') and small
contractions, as a Pallas kernel writes them. Computed as jnp's meaning spelled in registers: each operand's axes
permuted into one order of the labels (the output's, then the contracted ones) and given size-1 axes for the labels
it lacks, the two multiplied (float32 for 16-bit floats, as XLA's dot accumulates them) and the contracted axes
summed, then converted to jnp's dtype (`preferred_element_type=`, else the operands' promoted dtype). The broadcast
product is held in registers: specs whose labels span more than _MOST elements stay MG003."""
from __future__ import annotations

_MOST = 1 << 15


def einsum_products(tracer, node, spec, values, kwargs):
  """The einsum as broadcast products summed, or None (the call's MG003 and its hint stand)."""
  from .jnp_forms import _dtype, _kind
  extra = {k: v for k, v in kwargs.items() if k not in ("preferred_element_type", "precision", "optimize")}
  if extra or not isinstance(spec, str) or len(values) != 2 or "->" not in spec or "." in spec:
    return None
  ins, out = spec.replace(" ", "").split("->")
  parts = ins.split(",")
  from .ops.padded_tiles import true_shape
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  shapes = [tuple(true_shape(tracer.b, v)) if isinstance(s, tuple) else s for v, s in zip(values, shapes)]
  if len(parts) != 2 or any(not isinstance(s, tuple) for s in shapes) or any(
      len(set(p)) != len(p) or not p.isalpha() for p in parts) or len(set(out)) != len(out) or not out.isalpha() \
      and out or any(len(p) != len(s) for p, s in zip(parts, shapes)):
    return None
  if any(_kind(v) not in ("float", "int") for v in values) or not set(out) <= set(parts[0]) | set(parts[1]):
    return None
  size = {}
  for p, s in zip(parts, shapes):
    for c, n in zip(p, s):
      if size.setdefault(c, n) != n:
        _sizes_differ(tracer, node, spec, shapes, c, size[c], n)
  gone = [c for c in parts[0] + parts[1] if c not in out]
  order = list(out) + list(dict.fromkeys(gone))
  total = 1
  for c in order:
    total *= size[c]
  if total > _MOST:
    if set(parts[0]) & set(parts[1]) - set(out):
      return None               # (a contraction of both: the ml.dot hint stands)
    _too_many(tracer, node, spec, parts, order, size, total)
  from .ops.promotion import arithmetic_in
  da, db = (_dtype(v) for v in values)
  d = da if da == db else arithmetic_in(da, db)
  if d is None:
    return None
  want = kwargs.get("preferred_element_type")
  wide = _kind(values[0]) == "float" and str(d) in ("float16", "bfloat16")
  terms = []
  for i, p in enumerate(parts):
    mine = [c for c in order if c in p]
    perm = tuple(p.index(c) for c in mine)
    t = f"{{{i}}}" if str(_dtype(values[i])) == ("float32" if wide else str(d)) else \
        f"{{{i}}}.astype(ml.{'float32' if wide else d})"
    if perm != tuple(range(len(p))):
      t = f"ml.transpose({t}, {perm!r})"
    if len(mine) != len(order):
      t = f"{t}[{', '.join(':' if c in p else 'None' for c in order)}]"
    terms.append(t)
  form = f"{terms[0]} * {terms[1]}"
  if len(order) > len(out):
    axes = tuple(range(len(out), len(order)))
    form = f"ml.sum({form}, axis={axes if len(axes) > 1 else axes[0]!r})"
  form = f"({form}).astype({'{2}' if want is not None else f'ml.{d}'})"
  from .jnp_calls import trace_form
  return trace_form(tracer, node, form, [*values, want], [tracer.text(n) for n in node.args[1:3]])


def _sizes_differ(tracer, node, spec, shapes, label, n1, n2):
  """MG202 at the call: a label naming axes of two sizes, as jnp's ValueError says."""
  from . import errors as E
  raise E.ShapeMismatchError(
      f"jnp.einsum({spec!r}) of shapes {shapes[0]} and {shapes[1]}: label {label!r} names axes of sizes {n1} and {n2}",
      tracer.loc(node), hint=f"a label names axes of one size in every operand; give the two {label!r} axes one size, "
      f"or name them apart (a new letter) if they are different axes")


def _too_many(tracer, node, spec, parts, order, size, total):
  """MG003 at the call: a broadcast product larger than registers hold, with the product written as broadcasts and
  a loop that writes it in pieces."""
  from . import errors as E
  names = [tracer.text(n) for n in node.args[1:3]]
  terms = []
  for name, p in zip(names, parts):
    mine = [c for c in order if c in p]
    perm = tuple(p.index(c) for c in mine)
    t = name if perm == tuple(range(len(p))) else f"ml.transpose({name}, {perm})"
    terms.append(t if len(mine) == len(order) else f"{t}[{', '.join(':' if c in p else 'None' for c in order)}]")
  shape = tuple(size[c] for c in order)
  raise E.KernelTypeError(
      f"jnp.einsum({spec!r}) is a broadcast product of shape {shape} ({total} elements), more than a kernel holds in "
      f"registers ({_MOST})", tracer.loc(node),
      hint=f"it is {terms[0]} * {terms[1]} (summed over the labels not in the output); compute it in pieces, a "
      f"slice of the first axis at a time in a loop, storing each piece")
