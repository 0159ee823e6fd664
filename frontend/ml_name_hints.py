"""Hints for `ml.<name>` names a jnp, jax.nn or PyTorch user reaches for that ml does not have
(`ml.softplus`, `ml.matmul`, `ml.logaddexp`): what to write, with the call's own arguments. They
said "check the spelling", or named a near spelling that computes something else (`ml.maximum` for
`ml.matmul`, the reduction `ml.logsumexp` for the elementwise `logaddexp`)."""
from __future__ import annotations

import re

from .activation_forms import ACTIVATIONS

_DOT = ("no ml.{}: tensor-core products are ml.dot(a_s, b_s, acc) of SMEM buffers (a may be a 16-bit"
        " register tensor; b_s.T reads b transposed, with no copy)")
FORMS = {           # ({0}, {1}: the call's arguments)
    "log_sigmoid": ACTIVATIONS["log_sigmoid"], "logsigmoid": ACTIVATIONS["log_sigmoid"],
    "softsign": "{0} / (1 + ml.abs({0}))", "elu": "ml.where({0} > 0, {0}, ml.expm1({0}))",
    "mish": ACTIVATIONS["mish"],
    # (equal operands apart, as logaddexp2's: -inf and -inf give -inf, as jnp.logaddexp, not NaN)
    "logaddexp": "ml.where({0} == {1}, {0} + 0.6931471805599453, ml.maximum({0}, {1}) + ml.log1p(ml.exp(-ml.abs({0} - {1}))))",
    "soft_sign": "{0} / (1 + ml.abs({0}))",
    "clamp": "ml.clip({0}, {1}, {2})",     # (Triton's tl.clamp(x, min, max), not lax.clamp's order)
    "lerp": "{0} + {2} * ({1} - {0})",       # (torch.lerp(start, end, weight))
    "fdim": "ml.where({0} <= {1}, 0.0, {0} - {1})",     # (C's fdimf: +0 where x <= y, NaN from either; probe 70b)
}
TEXTS = {
    "matmul": _DOT.format("matmul"), "einsum": _DOT.format("einsum"), "dot_general": _DOT.format("dot_general"),
    "broadcast": ("no ml.broadcast: arithmetic broadcasts its operands as NumPy does (a + b); to give each the"
                  " common shape, ml.broadcast_to(a, shape) and ml.broadcast_to(b, shape)"),
    # Pallas's pl.* control flow spelt with ml. (probe 48h): JAX's own calls run in a kernel as what they mean
    "fori_loop": ("no ml.fori_loop: call jax.lax.fori_loop(lower, upper, body, init) itself (it runs as the loop it"
                  " means), or write the loop: for i in range(lower, upper): carry = body(i, carry)"),
    "while_loop": ("no ml.while_loop: call jax.lax.while_loop(cond, body, init) itself (it runs as the loop it means),"
                   " or write it: while cond(carry): carry = body(carry)"),
    "cond": ("no ml.cond: call jax.lax.cond(pred, true_fun, false_fun, *operands) itself (it runs as the if it"
             " means), or write the if: if pred: ... else: ... (ml.where(pred, a, b) for tensors)"),
    "switch": ("no ml.switch: call jax.lax.switch(index, branches, *operands) itself (it runs as the if and elif"
               " chain it means), or write that chain: if index <= 0: ... elif index <= 1: ... else: ..."),
}


_DIRECTED = {"add": "{0} + {1}", "sub": "{0} - {1}", "mul": "{0} * {1}", "fma": "ml.fma({0}, {1}, {2})",
             "sqrt": "ml.sqrt({0})", "rcp": "ml.div_rn(1.0, {0})", "dadd": "{0} + {1}", "dmul": "{0} * {1}"}


def _directed_hint(attr, args) -> str | None:
  """libdevice's add_rz, mul_ru, fma_rd, sqrt_ru, rcp_rz (interval arithmetic's directed roundings; probe 70b: "check
  the spelling"): no directed rounding here; the round-to-nearest form, with the call's arguments."""
  m = re.fullmatch(r"(add|sub|mul|fma|sqrt|rcp|dadd|dmul)_r([zdu])", attr)
  if m is None:
    return None
  n = {"sqrt": 1, "rcp": 1, "fma": 3}.get(m.group(1), 2)
  ops = list(args) if args and len(args) == n else ["x", "y", "z"][:n]
  mode = {"z": "toward zero", "d": "down", "u": "up"}[m.group(2)]
  return (f"no directed rounding (libdevice's {attr} rounds {mode}): {_DIRECTED[m.group(1)].format(*ops)} rounds to"
          " nearest, never fused (an interval's bounds can widen each by an ulp: jnp.nextafter(lo, -jnp.inf),"
          " jnp.nextafter(hi, jnp.inf))")


def ml_name_hint(attr, args) -> str | None:
  """`no ml.softplus: write ...` (jax.nn's form, `missing._FORMS`, where a jax.nn call has one)."""
  from .missing import _FORMS, _operand, form_hint
  from .nan_name_hints import hint as numerics_hint
  if attr in TEXTS:
    return TEXTS[attr]
  if (directed := _directed_hint(attr, args)) is not None:
    return directed
  if attr == "clamp" and args and len(args) > 1 and not re.match(r"\w+=[^=]", args[0]):
    from .torch_hints import clamp_hint     # tl.clamp(x, lo, hi), torch.clamp(x, min=, max=)
    if (h := clamp_hint(attr, args[0].strip(), args[1:])) is not None:
      return f"no ml.clamp: {h}"
  from .scan_hints import scan_hint       # ml.cumlogsumexp, ml.cumulative_sum
  split = [re.match(r"\s*(\w+)\s*=(?!=)\s*(.*)", a) for a in (args or [])]
  pos = [a.strip() for a, m in zip(args or [], split) if m is None]
  if (scan := scan_hint(attr, pos, {m.group(1): m.group(2).strip() for m in split if m}, ml_name=True)) is not None:
    return scan
  if (numeric := numerics_hint(attr, args)) is not None:
    return numeric
  form = FORMS.get(attr) or _FORMS.get(attr)
  if form is None:
    return None
  pos = [a.strip() for a in (args or []) if not re.match(r"\w+=[^=]", a)]
  n = len(set(re.findall(r"\{(\d)\}", form)))
  xs = pos if len(pos) == n else ["x", "y", "z"][:n]
  if attr not in FORMS:
    return f"no ml.{attr}: {form_hint(attr, xs, {})}"
  return f"no ml.{attr}: write {form.format(*map(_operand, xs))}"


def triton_method_hint(attr, recv: str, args) -> str | None:
  """What to write for Triton's tensor methods a register tensor lacks (`x.trans()`, `x.broadcast_to(m, n)`,
  `x.expand_dims(0)`, `x.split()`), with the call's own arguments; None for others."""
  if args is None:
    return None
  r = recv if re.fullmatch(r"[\w.\[\]]+", recv) else f"({recv})"
  if attr in ("trans", "permute"):
    return (f"write {r}.T (Triton's .{attr}() of a 2-D tensor, through SMEM; for ml.dot, pass the SMEM buffer's"
            f" transposed view buf.T, which moves no data)")
  if attr == "broadcast_to" and args:
    shape = args[0] if len(args) == 1 else f"({', '.join(args)})"
    return f"write ml.broadcast_to({recv}, {shape})"
  if attr == "expand_dims":
    return f"insert the axis by indexing with None: {r}[None, :] (axis 0) or {r}[:, None] (axis 1), as in NumPy"
  if attr == "split" and not args:
    return f"Triton's split of a last axis of 2 is indexing: {r}[..., 0] and {r}[..., 1]"
  if attr in ("split", "chunk", "tensor_split") and args:     # torch's v.split(size, dim), v.chunk(k, dim)
    from .shape_hints import split_hint
    numpy = any(a.startswith("axis=") for a in args)      # (NumPy's sections, written as a method)
    split = split_hint(attr, [r, *args], sizes=attr == "split" and not numpy)
    return split and split + ("" if numpy else f" (torch's .{attr})")
  return None
