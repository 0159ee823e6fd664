"""The hint for jnp.dot, jnp.matmul, lax.dot_general and jnp.einsum called in a kernel (a Pallas
kernel's spelling of a tile product): the ml.dot call that computes it, written with the call's
own operands (an SMEM ref read whole, `a_s[...]`, is passed as the ref; a contraction over b's
last axis is `b_s.T`; `preferred_element_type=` is kept, ml.dot takes it), and where an operand
is not in SMEM, how to stage it there (b is always read from SMEM, a from SMEM or registers)."""
from __future__ import annotations

from .dtypes import DType
from .shape_hints import literal
from .types import RefType, Space, resolve

_DOTS = ("dot", "matmul", "dot_general", "einsum")


def _contractions(name, pos, kw):
  """(a's contracted axis, b's contracted axis) of the call, for 2-D operands; None if unknown."""
  if name in ("dot", "matmul"):
    return 1, 0
  if name == "dot_general":
    dims = literal(kw.get("dimension_numbers", pos[2] if len(pos) > 2 else ""))
    try:
      (ca, cb), (ba, bb) = dims
      if len(ca) == len(cb) == 1 and not ba and not bb and ca[0] in (0, 1, -1, -2) and cb[0] in (0, 1, -1, -2):
        return ca[0] % 2, cb[0] % 2
    except (TypeError, ValueError):
      return None
    return None
  spec = literal(pos[0]) if pos else None
  if not isinstance(spec, str) or "->" not in spec:
    return None
  ins, out = spec.replace(" ", "").split("->")
  parts = ins.split(",")
  if len(parts) != 2 or any(len(p) != 2 for p in parts) or len(out) != 2:
    return None
  (a, b), shared = parts, set(parts[0]) & set(parts[1])
  if len(shared) != 1 or sorted(out) != sorted(set(a + b) - shared):
    return None
  k = shared.pop()
  if out != a.replace(k, "") + b.replace(k, ""):
    return None                  # the result transposed: (b @ a).T
  return a.index(k), b.index(k)


def _buffer(text: str, which: str, taken) -> str:
  """A name for the SMEM buffer staging operand `text` (x_ref -> x_s, q -> q_s), not one of `taken`."""
  base = (f"{which}_s" if not text.isidentifier() else
          f"{text[:-4]}_s" if text.endswith("_ref") and len(text) > 4 else f"{text}_s")
  name, n = base, 2
  while name in taken:
    name, n = f"{base}{n}", n + 1
  return name


def dot_hint(name, pos, kw, operands, taken=frozenset()) -> str | None:
  """The ml.dot hint for `name` (one of _DOTS) called with arguments `pos`, `kw` (as written) whose
  operands are `operands`: (text, value, transposed) of a and of b, a ref read whole (`a_s[...]`,
  `k_s[...].T`) given as the ref itself (`taken`: the names of the kernel's file, which a staging
  buffer's name avoids); None where the call is not understood."""
  if name not in _DOTS or len(operands) != 2:
    return None
  axes = _contractions(name, pos, kw)
  if axes is None:
    return None
  (ta, va, fa), (tb, vb, fb) = operands
  axes = (axes[0] ^ fa, axes[1] ^ fb)
  a = f"{ta}.T" if axes[0] == 0 else ta
  b = f"{tb}.T" if axes[1] == 1 else tb
  extra = "".join(f", {k}={v.strip()}" for k, v in kw.items() if k in ("preferred_element_type", "precision"))
  stage = []
  for which, text, v in (("a", ta, va), ("b", tb, vb)):
    t = getattr(v, "type", None)
    if isinstance(t, RefType) and t.space == Space.SMEM:
      continue
    if which == "a" and not isinstance(t, RefType):
      continue                   # a register A, used as it is
    d = resolve(getattr(t, "dtype", None)) if t is not None else None
    dt = f", jnp.{d}" if isinstance(d, DType) else ""
    shape = getattr(t, "shape", None)
    buf = _buffer(text, which, taken)
    fill = f"ml.copy({text}, {buf})" if isinstance(t, RefType) else f"{buf}[...] = {text}"
    stage.append(f"{buf} = ml.smem({shape if shape is not None else 'shape'}{dt}); {fill}")
    if which == "a":
      a = f"{buf}.T" if axes[0] == 0 else buf
    else:
      b = f"{buf}.T" if axes[1] == 1 else buf
  how = f"write ml.dot({a}, {b}{extra}) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)"
  if stage:
    how += ("; ml.dot reads b from an SMEM buffer (a from SMEM or registers), so stage the operands first: "
            + "; ".join(stage))
  return how
