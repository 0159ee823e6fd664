"""The hint for jnp.dot, jnp.matmul, lax.dot_general and jnp.einsum called in a kernel (a Pallas
kernel's spelling of a tile product): the ml.dot call that computes it, written with the call's
own operands (an SMEM ref read whole, `a_s[...]`, is passed as the ref; a contraction over b's
last axis is `b_s.T`; `preferred_element_type=` is kept, ml.dot takes it), and where an operand
is not in SMEM, how to stage it there (b is always read from SMEM, a from SMEM or registers)."""
from __future__ import annotations

from . import hw
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


def batched_hint(a: str, b: str, batch: int, b_flip=False, a_flip=False) -> str:
  """A product over a leading batch axis (jnp.matmul of 3-D operands, einsum's 'bmk,bkn->bmn'): one
  ml.dot per batch element, of the buffers' views `.at[z]`, or the batch on a grid axis."""
  av, bv = f"{a}.at[z]{'.T' if a_flip else ''}", f"{b}.at[z]{'.T' if b_flip else ''}"
  return (f"ml.dot multiplies 2-D tiles: take one product per batch element, for z in ml.static_range({batch}):"
          f" out.at[z][...] = ml.dot({av}, {bv}) (out: where the result goes), or give the batch a grid axis"
          f" (z = ml.program_id(2)) and copy that element's tiles")


def _batched_call(name, pos, kw, operands) -> str | None:
  """The batched_hint for jnp.matmul, einsum ('bmk,bkn->bmn', 'bmk,bnk->bmn') or lax.dot_general with one
  leading batch dimension, of two 3-D SMEM (or GMEM) refs with the same batch; None otherwise."""
  if len(operands) != 2:
    return None
  (ta, va, fa), (tb, vb, fb) = operands
  ts = [getattr(v, "type", None) for v in (va, vb)]
  if fa or fb or not all(isinstance(t, RefType) and t.space in (Space.SMEM, Space.GMEM) and len(t.shape) == 3
                         for t in ts) or ts[0].shape[0] != ts[1].shape[0] or not (ta.isidentifier() and tb.isidentifier()):
    return None
  if name == "matmul":
    ca, cb = 2, 1
  elif name == "einsum":
    spec = literal(pos[0]) if pos else None
    if not isinstance(spec, str) or "->" not in spec:
      return None
    ins, out = spec.replace(" ", "").split("->")
    parts = ins.split(",")
    if len(parts) != 2 or any(len(p) != 3 for p in parts) or len(out) != 3 or not parts[0][0] == parts[1][0] == out[0]:
      return None
    inner = _contractions("einsum", [repr(f"{parts[0][1:]},{parts[1][1:]}->{out[1:]}")], {})
    if inner is None:
      return None
    ca, cb = inner[0] + 1, inner[1] + 1
  elif name == "dot_general":
    dims = literal(kw.get("dimension_numbers", pos[2] if len(pos) > 2 else ""))
    try:
      ((ca,), (cb,)), ((ba,), (bb,)) = dims
    except (TypeError, ValueError):
      return None
    if (ba, bb) != (0, 0) or ca not in (1, 2) or cb not in (1, 2):
      return None
  else:
    return None
  if any(isinstance(t, RefType) and t.space == Space.GMEM for t in ts):
    return None                  # (an input: staged first, which the 2-D hint writes)
  return batched_hint(ta, tb, ts[0].shape[0], a_flip=ca == 1, b_flip=cb == 2)


def _int8_hint(name, pos, kw, operands) -> str | None:
  """A product of two int8 register tiles without `preferred_element_type=`: jnp's result is int8 (the sums
  wrapped), so the call asks for the int32 sums, as a W8A8 kernel means (probe 51e: computed as ml.dot then)."""
  ds = [resolve(getattr(getattr(v, "type", None), "dtype", None)) for _, v, _ in operands]
  if "preferred_element_type" in kw or ds != [DType.i8, DType.i8]:
    return None                  # (refs read whole, `a[...]`, too: probe 51l)
  fn = "lax.dot_general" if name == "dot_general" else f"jnp.{name}"
  args = ", ".join(list(pos) + [f"{k}={v}" for k, v in kw.items()])
  return (f"jnp's product of int8 tiles is int8 (its int32 sums wrapped): ask for the sums, {fn}({args},"
          f" preferred_element_type=jnp.int32), computed on the tensor cores as ml.dot")


def _int32_hint(name, pos, operands) -> str | None:
  """A product of 32-bit integer tiles registers cannot hold whole (jnp_einsum.chunked_product takes accumulators of
  up to 32768 elements): the tensor cores take no 32-bit integers (ml.dot's MG106), so the hint computes the product
  in pieces of a's rows, each stored (probe 57a; it hinted int32 SMEM operands for ml.dot)."""
  ds = [resolve(getattr(getattr(v, "type", None), "dtype", None)) for _, v, _ in operands]
  shapes = [tuple(getattr(getattr(v, "type", None), "shape", ())) for _, v, _ in operands]
  if name not in ("dot", "matmul") or len(pos) != 2 or not all(d in (DType.i32, DType.u32) for d in ds) or \
      any(len(s) != 2 for s in shapes) or any(f for _, _, f in operands):
    return None
  (m, _), (_, n) = shapes
  rows = next((r for r in (128, 64, 32, 16, 8) if m % r == 0 and r * n <= 1 << 14 and r < m), None)
  if rows is None:
    return None
  a = pos[0].strip()
  a = f"{a[:-5]}[r:r + {rows}, :]" if a.endswith("[...]") else f"{a}[r:r + {rows}]"
  return (f"the tensor cores take no 32-bit integers, and registers hold an int32 product of at most 32768 elements"
          f" ({m} x {n} here): compute it in pieces of {rows} rows, each stored: for r in ml.static_range(0, {m},"
          f" {rows}): out[r:r + {rows}, :] = jnp.{name}({a}, {pos[1].strip()})")


def dot_hint(name, pos, kw, operands, taken=frozenset()) -> str | None:
  """The ml.dot hint for `name` (one of _DOTS) called with arguments `pos`, `kw` (as written) whose
  operands are `operands`: (text, value, transposed) of a and of b, a ref read whole (`a_s[...]`,
  `k_s[...].T`) given as the ref itself (`taken`: the names of the kernel's file, which a staging
  buffer's name avoids); None where the call is not understood."""
  if name not in _DOTS or len(operands) != 2:
    return None
  ints = _int8_hint(name, pos, kw, operands) or _int32_hint(name, pos, operands)
  if ints is not None:
    return ints
  batched = _batched_call(name, pos, kw, operands)
  if batched is not None:
    return batched
  if any(len(getattr(getattr(v, "type", None), "shape", ())) > 2 for _, v, _ in operands):
    if name == "einsum" and pos and not any(isinstance(getattr(v, "type", None), RefType) for _, v, _ in operands):
      from .einsum_general import unroll_hint      # (register tensors of 3 labels or more: a label at a time)
      return unroll_hint(literal(pos[0]), [t for t, _, _ in operands],
                         [tuple(getattr(v.type, "shape", ())) for _, v, _ in operands])
    return None                  # (another rank: ml.dot's own 2-D hint would not compute it)
  axes = _contractions(name, pos, kw)
  if axes is None:
    return None
  (ta, va, fa), (tb, vb, fb) = operands
  axes = (axes[0] ^ fa, axes[1] ^ fb)
  a = f"{ta}.T" if axes[0] == 0 else ta
  b = f"{tb}.T" if axes[1] == 1 else tb
  extra = "".join(f", {k}={v.strip()}" for k, v in kw.items() if k in ("preferred_element_type", "precision"))
  stage, staged = [], {}
  for which, text, v in (("a", ta, va), ("b", tb, vb)):
    t = getattr(v, "type", None)
    if isinstance(t, RefType) and t.space == Space.SMEM:
      continue
    d = resolve(getattr(t, "dtype", None)) if t is not None else None
    if which == "a" and not isinstance(t, RefType) and (not isinstance(d, DType) or d in hw.MMA_MN_MAJOR_DTYPES or (
        d in hw.MMA_REG_A_DTYPES and axes[0] == 1)):
      continue                   # a 16-bit or (m, k) 8-bit register A, used as it is (others are read from SMEM)
    dt = f", jnp.{d}" if isinstance(d, DType) else ""
    shape = getattr(t, "shape", None)
    # float32 and 8-bit operands are read K-major: a register tile is stored so (a as (m, k), b as (n, k))
    k_major = isinstance(d, DType) and d not in hw.MMA_MN_MAJOR_DTYPES
    flip = k_major and shape is not None and len(shape) == 2 and axes[0 if which == "a" else 1] == 0
    if flip:
      shape = tuple(shape)[::-1]
    buf = staged.get((text, flip))           # (v @ v.T: one buffer for both operands)
    if buf is None:
      buf = staged[text, flip] = _buffer(text, which, taken)
      fill = (f"{buf}[...] = {text}[...].T" if flip and isinstance(t, RefType) else
              f"ml.copy({text}, {buf})" if isinstance(t, RefType) else
              f"{buf}[...] = {_transposed(text)}" if flip else f"{buf}[...] = {text}")
      stage.append(f"{buf} = ml.smem({shape if shape is not None else 'shape'}{dt}); {fill}")
    kept = axes[0] == 1 if which == "a" else axes[1] == 0      # the operand stored as ml.dot reads it
    if which == "a":
      a = buf if kept or flip else f"{buf}.T"
    else:
      b = f"{buf}.T" if not kept or flip else buf
  how = f"write ml.dot({a}, {b}{extra}) (on the tensor cores; ml.dot(a, b, acc) adds the product to acc)"
  d = resolve(getattr(getattr(va, "type", None), "dtype", None))
  if stage and isinstance(d, DType) and d not in hw.MMA_MN_MAJOR_DTYPES:
    how += (f"; ml.dot reads {d} operands from SMEM buffers stored K-major (a as (m, k), b as (n, k), passed"
            f" transposed), so stage the operands first: " + "; ".join(stage))
  elif stage:
    how += ("; ml.dot reads b from an SMEM buffer (a from SMEM or registers), so stage the operands first: "
            + "; ".join(stage))
  return how


def _transposed(text: str) -> str:
  """`text`.T, or `w` for `w.T` (a tile stored transposed is the tile itself)."""
  import ast
  try:
    node = ast.parse(text, mode="eval").body
  except SyntaxError:
    return f"({text}).T"
  if isinstance(node, ast.Attribute) and node.attr == "T":
    return ast.unparse(node.value)
  return f"{text}.T" if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) else f"({text}).T"
