"""Hints for the everyday operators of PyTorch's ATen (and FlagGems, jnp) that ml has no function of
their own for: `ml.logical_and`, `ml.eye`, `ml.count_nonzero`, `ml.dropout`, ... (merged into
missing.NOT_YET), and torch's tensor methods (`v.neg()`, `v.masked_fill(m, 0.0)`, `v.cummax(1)`,
`v.remainder(3)`), written in the user's words. They said "check the spelling", or named a near
miss (`ml.dropout`: "did you mean ml.dot?"), or listed the register methods."""
from __future__ import annotations

_LOGICAL = ("no ml.{0}: write the operator on booleans, {1} (comparisons give booleans; of numbers,"
            " compare first: (x != 0) {2} (y != 0))")
_ARG = "ml.arg{0}(x, axis=...) gives the indices"

NAMES = {
    **{n: _LOGICAL.format(n, f"a {op} b", op) for n, op in (("logical_and", "&"), ("logical_or", "|"),
                                                             ("logical_xor", "^"))},
    "logical_not": "no ml.logical_not: write ~m for a boolean m (of numbers, x == 0)",
    "negative": "no ml.negative: write -x", "neg": "no ml.neg: write -x",
    "isposinf": "no ml.isposinf: x == float('inf')",
    "isneginf": "no ml.isneginf: x == float('-inf')",
    "eye": ("no ml.eye: compare index vectors, (ml.arange(m)[:, None] == ml.arange(n)[None, :]).astype(dtype)"
            " (the k-th diagonal: ml.arange(n)[None, :] - ml.arange(m)[:, None] == k), stored as any tile"),
    "linspace": ("no ml.linspace: t = ml.arange(n).astype(jnp.float32) / (n - 1), then start * (1 - t) + stop * t"
                 " (jnp.linspace's formula, exact at both ends)"),
    "count_nonzero": ("no ml.count_nonzero: ml.sum(x != 0, axis=...) (booleans count in int32, as"
                      " jnp.count_nonzero)"),
    "norm": ("no ml.norm: the L2 norm ml.sqrt(ml.sum(x * x, axis=...)), L1 ml.sum(ml.abs(x), axis=...), the"
             " largest ml.max(ml.abs(x), axis=...) (convert float16/bfloat16 x to float32 first: x * x"
             " overflows float16 past 256)"),
    **{n: ("no ml.{}: gather the diagonal from the ref, x[ml.arange(n), ml.arange(n)] (the k-th: x[r, r + k]"
           " with r = ml.arange(n - k)); of a register tile t, ml.sum(ml.where(ml.arange(n)[:, None] =="
           " ml.arange(n)[None, :], t, 0), axis=1); a vector v onto a diagonal, ml.where(r[:, None] =="
           " r[None, :], v[None, :], 0)").format(n) for n in ("diag", "diagonal", "diag_embed")},
    "index_select": ("no ml.index_select: index the GMEM ref with a tensor of indices, x[ids, :] (dim 0) or"
                     " x[:, ids] (dim 1), NumPy's advanced indexing"),
    "dropout": ("no ml.dropout: ml.where(ml.rand(seed, offsets) >= p, x * (1.0 / (1.0 - p)), 0.0) with seed an"
                " ml.scalar parameter and offsets each element's own index (examples/dropout.py)"),
    "masked_fill": "no ml.masked_fill: ml.where(mask, value, x)",
    **{n: "no ml.{0}: ml.{1}(x, axis=...)".format(n, n[1:]) for n in ("amax", "amin")},
    "nanmax": ("no ml.nanmax: ml.max(ml.where(x != x, float('-inf'), x), axis=...) (a row of NaNs only then"
               " gives -inf, where jnp.nanmax gives NaN)"),
    "nanmin": ("no ml.nanmin: ml.min(ml.where(x != x, float('inf'), x), axis=...) (a row of NaNs only then"
               " gives inf, where jnp.nanmin gives NaN)"),
    "nansum": "no ml.nansum: ml.sum(ml.where(x != x, 0, x), axis=...)",
    "repeat_interleave": ("no ml.repeat_interleave: read the tensor from its ref with a gather, x[ml.arange(n * r)"
                          " // r] (r repeats of each of n elements)"),
}


def _atom(text: str) -> str:
  from .torch_hints import _atom as atom
  return atom(text)


_OPS = {"add": "+", "sub": "-", "mul": "*", "div": "/", "true_divide": "/", "floor_divide": "//",
        "remainder": "%", "bitwise_and": "&", "bitwise_or": "|", "bitwise_xor": "^", "logical_and": "&",
        "logical_or": "|", "logical_xor": "^", "eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">",
        "ge": ">=", "bitwise_left_shift": "<<", "bitwise_right_shift": ">>"}


def method_hint(attr: str, recv: str, args: list[str]) -> str | None:
  """What to write for torch's `recv.<attr>(args)` (called, `args` as written) among the operators
  above, or None."""
  r = _atom(recv)
  pos = [a for a in args if "=" not in a.split("(")[0]]
  kw = dict(a.split("=", 1) for a in args if "=" in a.split("(")[0])
  axis = kw.get("dim", kw.get("axis", pos[0] if pos else None))
  if attr in ("add", "sub") and len(pos) == 1 and set(kw) == {"alpha"}:      # torch.add(x, y, alpha=a)
    return f"write the operators: {r} {_OPS[attr]} {_atom(kw['alpha'].strip())} * {_atom(pos[0])}"
  if attr == "lerp" and len(pos) == 2 and not kw:                             # start + weight * (end - start)
    return f"write {r} + {_atom(pos[1])} * ({pos[0]} - {r})"
  if attr in ("addcmul", "addcdiv") and len(pos) == 2 and set(kw) <= {"value"}:
    scale = f"{_atom(kw['value'].strip())} * " if "value" in kw else ""
    return f"write {r} + {scale}{_atom(pos[0])} {'*' if attr == 'addcmul' else '/'} {_atom(pos[1])}"
  if attr in _OPS and len(pos) == 1 and not kw:
    note = " (flooring: the divisor's sign, as torch.remainder)" if attr == "remainder" else ""
    return f"write the operator: {r} {_OPS[attr]} {_atom(pos[0])}{note}"
  if attr in ("neg", "negative") and not args:
    return f"write -{r}"
  if attr in ("logical_not", "bitwise_not") and not args:
    return f"write ~{r}" + (f" (of numbers, {r} == 0)" if attr == "logical_not" else "")
  if attr in ("isnan", "isinf", "isfinite") and not args:
    return f"write ml.{attr}({recv})"
  if attr == "sign" and not args:
    return f"write ml.where({r} > 0, 1, ml.where({r} < 0, -1, {recv})) (torch.sign: {r}'s dtype, NaN kept)"
  if attr == "t" and not args:
    return f"write {r}.T"
  if attr == "fmod" and len(pos) == 1 and not kw:
    return f"write ml.fmod({recv}, {pos[0]}) (C's remainder, the sign of {r})"
  if attr == "masked_fill" and len(pos) == 2 and not kw:
    return f"write ml.where({pos[0]}, {pos[1]}, {recv})"
  if attr in ("maximum", "minimum", "fmax", "fmin") and len(pos) == 1 and not kw:
    return f"write ml.{attr.replace('fmax', 'maximum').replace('fmin', 'minimum')}({recv}, {pos[0]})"
  if attr in ("amax", "amin", "cummax", "cummin") and len(args) <= 1 and axis is not None:
    name = attr[1:] if attr in ("amax", "amin") else attr
    pair = (f" (torch's .{attr}(dim) gives the indices too; ml.{attr} gives the values)"
            if attr in ("cummax", "cummin") else "")
    return f"write ml.{name}({recv}, axis={axis}){pair}"
  if attr == "square" and not args:
    return f"write {r} * {r}"
  if attr == "reciprocal" and not args:
    return f"write 1 / {r}"
  if attr == "norm" and set(kw) <= {"p", "dim", "keepdim"} and len(pos) <= 3:   # torch's x.norm(p, dim, keepdim)
    return _norm_hint(recv, r, kw.get("p", pos[0] if pos else "2"), kw.get("dim", pos[1] if len(pos) > 1 else None),
                      kw.get("keepdim", pos[2] if len(pos) > 2 else None))
  if attr == "relu" and not args:
    return f"write ml.maximum({recv}, 0)"
  if attr == "count_nonzero":
    return f"write ml.sum({r} != 0{'' if axis is None else f', axis={axis}'})"
  return None


def _norm_hint(recv, r, p, dim, keep) -> str | None:
  """torch's v.norm(p, dim, keepdim) of a register tensor as the reduction it is (p 2, 1 or inf), else None."""
  tail = ("" if dim is None or dim.strip() == "None" else f", axis={dim.strip()}") + \
      ("" if keep is None or keep.strip() == "False" else f", keepdims={keep.strip()}")
  p = p.strip().replace(" ", "")
  if p in ("2", "2.0", "'fro'", '"fro"'):
    return f"write ml.sqrt(ml.sum({r} * {r}{tail})) (torch's 2-norm)"
  if p in ("1", "1.0"):
    return f"write ml.sum(ml.abs({recv}){tail}) (torch's 1-norm)"
  if p in ("float('inf')", 'float("inf")', "math.inf", "jnp.inf", "np.inf"):
    return f"write ml.max(ml.abs({recv}){tail}) (torch's inf-norm)"
  return None
