"""jnp.einsum of register values in general (probe 60c): what jnp_dots and jnp_einsum take directly is a matrix
product ml.dot runs ('qd,kd->qk'), a leading batch of them ('bij,bjk->bik'), and a broadcast product of at most two
labels summed ('ij,ij->i', 'i,j->ij'); register layouts are 1-D and 2-D, so a product of three labels reduced
('hd,thd->ht', a decode step's scores of a few heads) has no layout. Here such a spec is written as einsums the
direct paths take: labels of few elements are unrolled, each a label of one size indexed away in both operands
(`k[:, h, :]`), the pieces' einsums stacked along the label's output axis (a batch label, or a free label of one
operand) or summed (a contracted label, in float32 for float operands, as XLA's dot accumulates, then converted to
jnp's dtype). Unrolled are the fewest elements that leave a direct spec, the smallest labels first, at most
_MOST_PIECES pieces. Also: an implicit output ('ij,jk': the labels seen once, in alphabetical order, numpy's rule),
an ellipsis ('...d,de->...e': spare letters), a label repeated in one operand (a diagonal, 'ii->i': the operand
masked by an identity and the repeat summed away), and three or more tiles contracted pairwise, left to right (each
intermediate keeping the labels later operands or the output name)."""
from __future__ import annotations

_MOST_PIECES = 64      # einsums of the pieces a spec is unrolled into (each traced: a few heads, a few groups)
_LETTERS = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"


def explicit_spec(spec, shapes):
  """`spec` with its output written and every ellipsis replaced by letters ('ij,jk' -> 'ij,jk->ik', '...d,de->...e'
  of a (4, 8, 16) operand -> 'ABd,de->ABe'), spaces removed; `spec` itself where nothing changes and None where it is
  no einsum spec of `shapes` (the caller's MG003 or jnp's own error then stands)."""
  if not isinstance(spec, str) or any(s is None for s in shapes):
    return None
  spec = spec.replace(" ", "")
  ins, arrow, out = spec.partition("->")
  parts = ins.split(",")
  if len(parts) != len(shapes):
    return None
  used = set(c for c in spec if c.isalpha())
  spare = [c for c in _LETTERS[::-1] if c not in used]
  most = 0
  for p, s in zip(parts, shapes):
    if p.count("...") > 1 or p.replace("...", "").count(".") or (
        "..." in p and len(s) < len(p) - 3) or ("..." not in p and len(s) != len(p)):
      return None
    if "..." in p:
      most = max(most, len(s) - (len(p) - 3))
  if most > len(spare):
    return None
  ell = "".join(spare[:most][::-1])      # (the ellipsis' axes, right-aligned as broadcasting aligns them)
  parts = [p.replace("...", ell[most - (len(s) - (len(p) - 3)):]) if "..." in p else p for p, s in zip(parts, shapes)]
  if not arrow:
    counts = {}
    for c in "".join(parts):
      counts[c] = counts.get(c, 0) + 1
    out = ell + "".join(sorted(c for c, n in counts.items() if n == 1 and c not in ell))
  elif "..." in out:
    out = out.replace("...", ell)
  if out.count(".") or not all(p.isalpha() or not p for p in parts) or not (out.isalpha() or not out):
    return None
  return ",".join(parts) + "->" + out


def _direct(parts, out) -> bool:
  """Whether jnp_dots / jnp_einsum take the spec as it is: at most two labels, or a matrix product (three labels,
  two 2-D operands, a 2-D output)."""
  labels = set("".join(parts))
  return len(labels) <= 2 or (len(labels) == 3 and [len(p) for p in parts] == [2, 2] and len(out) == 2)


def _plan(parts, out, size):
  """The labels to unroll, in order (at least one: the direct paths did not take `parts -> out`), or None where more
  than _MOST_PIECES pieces would be needed."""
  plan, pieces = [], 1
  while not plan or not _direct(parts, out):
    rest = set("".join(parts))
    if len(rest) <= 1:
      return None if not plan else plan
    def rank(c):      # (the smallest first; of one size a batch label, then a contracted one, then a free one)
      both = all(c in p for p in parts)
      return size[c], 0 if both and c in out else 1 if both else 2
    c = min(sorted(rest), key=rank)
    pieces *= size[c]
    if pieces > _MOST_PIECES:
      return None
    plan.append(c)
    parts, out = [p.replace(c, "") for p in parts], out.replace(c, "")
  return plan


def unrolled_einsum(tracer, node, spec, values, kwargs):
  """jnp.einsum of two register tensors whose spec the direct paths refused, as einsums of pieces (the module's
  note), or None (the call's MG003 and its hint stand)."""
  from .jnp_forms import _dtype, _kind
  from .ops.padded_tiles import true_shape
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  if len(values) != 2 or any(not isinstance(s, tuple) for s in shapes) or \
      any(_kind(v) not in ("float", "int") for v in values):
    return None
  shapes = [tuple(true_shape(tracer.b, v)) for v in values]     # (a padded trace's tiles: their own shapes)
  spec = explicit_spec(spec, shapes)
  if spec is None:
    return None
  ins, out = spec.split("->")
  parts = ins.split(",")
  if any(len(set(p)) != len(p) for p in parts) or len(set(out)) != len(out) or not set(out) <= set(ins):
    return None
  size = {}
  for p, s in zip(parts, shapes):
    for c, n in zip(p, s):
      if size.setdefault(c, n) != n:
        return None             # (jnp_einsum's MG202 names the label; here the MG003 stands)
  plan = _plan(parts, out, size)
  if plan is None:
    return None
  extra = {k: v for k, v in kwargs.items() if k not in ("preferred_element_type", "precision", "optimize")}
  if extra:
    return None
  summed = any(c not in out for c in plan)
  want = kwargs.get("preferred_element_type")
  from .ops.promotion import arithmetic_in
  da, db = (_dtype(v) for v in values)
  d = da if da == db else arithmetic_in(da, db)
  if d is None:
    return None
  wide = summed and _kind(values[0]) == "float" and _kind(values[1]) == "float"
  sub_parts = [p.translate({ord(c): None for c in plan}) for p in parts]
  sub_out = out.translate({ord(c): None for c in plan})
  sub = f"{sub_parts[0]},{sub_parts[1]}->{sub_out}"
  kw = {k: v for k, v in kwargs.items() if k != "preferred_element_type"}
  if wide:
    kw["preferred_element_type"] = None
  elif want is not None:
    kw["preferred_element_type"] = want
  names = list(kw)
  # operands: {0} {1} the tensors, {2} jnp.einsum as the call names it, {3} the pieces' spec, {4} the result dtype,
  # {5}... the pieces' keywords
  kw_text = "".join(f", {k}={{{5 + i}}}" for i, k in enumerate(names))
  from .dtypes import DType
  kw_vals = [DType.f32 if (k == "preferred_element_type" and wide) else kw[k] for k in names]

  def at(i, p, fixed):        # (`v[h]`, `k[:, h]`: trailing whole axes left out, as a user writes them)
    idx = [str(fixed[c]) if c in fixed else ":" for c in p]
    while idx and idx[-1] == ":":
      idx.pop()
    return f"{{{i}}}[{', '.join(idx)}]" if idx else f"{{{i}}}"

  def piece(fixed):
    return f"{{2}}({{3}}, {at(0, parts[0], fixed)}, {at(1, parts[1], fixed)}{kw_text})"

  def build(level, fixed):
    if level == len(plan):
      return piece(fixed)
    c = plan[level]
    items = [build(level + 1, {**fixed, c: j}) for j in range(size[c])]
    if c not in out:
      return "(" + " + ".join(items) + ")"
    held = [x for x in out if x in sub_out or x in plan[level:]]
    return f"ml.stack([{', '.join(items)}], axis={held.index(c)})"

  form = build(0, {})
  if wide:
    form = f"({form}).astype({{4}})"
  final = want if want is not None else d
  from .jnp_calls import trace_form
  fn = tracer.eval(node.func)
  return trace_form(tracer, node, form, [*values, fn, sub, final, *kw_vals],
                    [tracer.text(n) for n in node.args[1:3]])


def pairwise_einsum(tracer, node, spec, values, kwargs):
  """jnp.einsum of three or more register tensors ('ij,jk,kl->il'), as two-operand einsums left to right, each
  intermediate keeping the labels the later operands or the output name; None where the spec is not one."""
  from .jnp_forms import _kind
  shapes = [getattr(getattr(v, "type", None), "shape", None) for v in values]
  if len(values) < 3 or any(not isinstance(s, tuple) for s in shapes) or \
      any(_kind(v) not in ("float", "int") for v in values):
    return None
  spec = explicit_spec(spec, shapes)
  if spec is None:
    return None
  ins, out = spec.split("->")
  parts = ins.split(",")
  if any(len(set(p)) != len(p) for p in parts):
    return None
  form, acc = "{0}", parts[0]
  for i in range(1, len(parts)):
    later = set(out).union(*parts[i + 1:])
    keep = "".join(dict.fromkeys(c for c in acc + parts[i] if c in later))
    if i == len(parts) - 1:
      keep = out
    form = f"{{{len(values)}}}('{acc},{parts[i]}->{keep}', {form}, {{{i}}}{{kw}})"
    acc = keep
  names = list(kwargs)
  kw_text = "".join(f", {k}={{{len(values) + 1 + j}}}" for j, k in enumerate(names))
  form = form.replace("{kw}", kw_text)
  from .jnp_calls import trace_form
  return trace_form(tracer, node, form, [*values, tracer.eval(node.func), *kwargs.values()],
                    [tracer.text(n) for n in node.args[1:]])


def diagonal_operand(spec, shape):
  """A one-operand spec with a repeated label of a 2-D operand ('ii->i', 'ii->', 'ii'), as (the form of {0} masked by
  an identity with the repeated label's second axis summed away, the spec of what is left); None for others."""
  spec = explicit_spec(spec, [shape])
  if spec is None:
    return None
  ins, out = spec.split("->")
  if len(ins) != 2 or ins[0] != ins[1] or shape[0] != shape[1]:
    return None
  n = shape[0]
  return (f"ml.sum(ml.where(ml.arange({n})[:, None] == ml.arange({n})[None, :], {{0}}, 0), axis=1)",
          f"{ins[0]}->{out}")


def unroll_hint(spec, texts, shapes) -> str | None:
  """The hint for a two-operand einsum of register tensors that no path takes (more than _MOST_PIECES pieces): a
  batch label (of both operands and the output; else the smallest label), computed one of its elements at a time in
  a loop (or on a grid axis); None where `spec` is none of these."""
  spec = explicit_spec(spec, shapes) if len(shapes) == 2 else None
  if spec is None:
    return None
  ins, out = spec.split("->")
  parts = ins.split(",")
  if any(len(set(p)) != len(p) for p in parts) or len(set("".join(parts))) <= 2:
    return None
  size = {c: n for p, s in zip(parts, shapes) for c, n in zip(p, s)}
  c = min(sorted(set("".join(parts))), key=lambda x: (0 if all(x in p for p in parts) and x in out else 1, size[x]))
  sub = ",".join(p.replace(c, "") for p in parts) + "->" + out.replace(c, "")
  idx = [f"{t}[{', '.join(c if x == c else ':' for x in p)}]" if c in p else t for t, p in zip(texts, parts)]
  piece = f"jnp.einsum({sub!r}, {idx[0]}, {idx[1]})"
  how = (f"ml.stack([{piece} for {c} in range({size[c]})], axis={out.index(c)})" if c in out else
         f"sum({piece} for {c} in range({size[c]}))")
  return (f"registers hold 1-D and 2-D tensors, and this einsum is a product of {len(size)} labels: write it one"
          f" {c!r} at a time, {how} (each a product the kernel computes), or give {c!r} a grid axis and read that"
          f" element's slices")
