"""Hints for the scans jnp, lax, NumPy and torch users reach for that ml spells otherwise or lacks:
`jnp.cumulative_sum`, `jnp.maximum.accumulate`, `lax.cumlogsumexp`, `lax.associative_scan`, written
with the call's own operand and axis. They said "kernels call ml.* functions ...; decorate a helper
with @ml.inline" (which does not scan), or "check the spelling"; a log-cumsum-exp shifted by the row's
maximum underflowed to -inf where a row spans more than about 87 (log-probabilities do)."""
from __future__ import annotations

import re

SCAN = ("no ml.scan: ml.associative_scan(combine, (a, b), axis=1) scans with an associative combine of your own"
        " (an @ml.inline helper or a lambda of two elements, the earlier first: h = a * h + b combines (a1, b1) and"
        " (a2, b2) into (a1 * a2, a2 * b1 + b2)); ml.cumsum, ml.cumprod, ml.cummax and ml.cummin are the common ones;"
        " or carry the running value through a loop")
UFUNC_SCANS = {"add": "cumsum", "multiply": "cumprod", "maximum": "cummax", "minimum": "cummin",
               "logical_or": "cummax", "logical_and": "cummin"}


def _kw(a):
  m = re.match(r"\s*(\w+)\s*=(?!=)\s*(.*)", a)
  return (m.group(1), m.group(2).strip()) if m else (None, a.strip())


def _call(pos, kw, names, default_axis):
  """(operand, axis, reverse) as the call wrote them (`names`: its parameters in order)."""
  given = dict(zip(names, pos))
  given.update(kw)
  x = given.get(names[0], "x")
  axis = given.get("axis", given.get("dim", default_axis))
  return x, axis, given.get("reverse", "False") == "True"


def _axis_text(axis, ndim):
  return "" if axis in (None, "None") or ndim == 1 else f", axis={axis}"


def log_cumsum_exp(x, axis, reverse, ndim) -> str:
  """lax.cumlogsumexp as ml.associative_scan of a stable logaddexp (exact at any range; probe 46h: it wrote the
  log2(n) steps of shifted copies out)."""
  a = "0" if ndim == 1 else str(axis) if axis not in (None, "None") else "0"
  kw = ("" if ndim == 1 else f", axis={a}") + (", reverse=True" if reverse else "")
  return (f"ml.associative_scan(lambda p, q: ml.maximum(p, q) + ml.log1p(ml.exp(-ml.abs(p - q))), {x}{kw}) (a"
          f" logaddexp of each value and the running one {'after' if reverse else 'before'} it; exact at any range,"
          f" where m + ml.log(ml.cumsum(ml.exp(v - m))) of the maximum m underflows to -inf for values more than"
          f" about 87 below it)")


def _same_scan(name, pos, kw, lax, ndim) -> str:
  """`lax.cumsum(v, axis=1, reverse=True)`, `jnp.cumprod(v, 0, jnp.float32)`, `lax.associative_scan(fn, (a, b),
  axis=1)` as the ml call of the same scan, with the call's own arguments (probe 46h)."""
  if name == "associative_scan":            # lax's order and keywords are ml's
    args = ", ".join([*pos, *(f"{k}={v}" for k, v in kw.items())])
    return (f"use ml.associative_scan({args}) (the same arguments as jax.lax.associative_scan; the combine an"
            f" @ml.inline helper, a lambda or a def of the kernel's body)")
  names = ("operand", "axis", "reverse") if lax else ("a", "axis", "dtype")
  given = {**dict(zip(names, pos)), **kw}
  x = given.get(names[0], "x")
  axis = given.get("axis", "0" if lax else "None")
  parts = [x]
  if axis == "None" and ndim != 1:          # jnp's axis=None scans the flattened array
    parts = [f"{x}.reshape(-1)"]
  elif axis != "None" and ndim != 1:
    parts.append(f"axis={axis}")
  parts += [f"{k}={given[k]}" for k in ("reverse", "dtype") if given.get(k, "None") not in ("None", "False")]
  return f"use ml.{name}({', '.join(parts)}) (the same scan)"


def scan_hint(name, pos, kw, *, ufunc=None, ndim=None, ml_name=False, lax=False) -> str | None:
  """What to write for a scan the call names (`pos`, `kw`: its arguments as written; `ufunc`: the name of
  the ufunc whose .accumulate it is; `ndim`: its operand's rank, where known; `lax`: the call is jax.lax's,
  whose third argument is `reverse`, not jnp's `dtype`); None for other names."""
  pre = f"no ml.{name}: " if ml_name else ""
  if not ml_name and name in ("cumsum", "cumprod", "cummax", "cummin", "associative_scan"):
    return _same_scan(name, pos, kw, lax, ndim)
  if name == "accumulate" and ufunc in UFUNC_SCANS:             # jnp.maximum.accumulate(x, axis=0)
    x, axis, _ = _call(pos, kw, ("a", "axis"), "0")
    return (f"use ml.{UFUNC_SCANS[ufunc]}({x}{_axis_text(axis, ndim)}) (the running {ufunc} along the axis; a ufunc's"
            f" accumulate runs along axis 0 unless told)")
  if name in ("cumulative_sum", "cumulative_prod"):
    x, axis, _ = _call(pos, kw, ("x", "axis"), None)
    f = "cumsum" if name == "cumulative_sum" else "cumprod"
    shown = f"ml.{f}({x}{_axis_text(axis, ndim)})"
    first = f"{shown} - {x}" if f == "cumsum" else f"{shown} / {x} (where no element is 0)"
    return (f"{pre or 'use '}{shown}; include_initial=True's extra first element ({'0' if f == 'cumsum' else '1'}) makes"
            f" the result one longer, which a register tile cannot be: its first n elements are the exclusive scan,"
            f" {first}")
  if name in ("cumlogsumexp", "logcumsumexp"):
    x, axis, reverse = _call(pos, kw, ("operand", "axis", "reverse"), "0" if not ml_name else None)
    ndim = ndim or (1 if axis in (None, "None") else 2)          # (ml.logcumsumexp(v) of an unknown v: a vector)
    return f"{pre or 'no ml.cumlogsumexp: '}{log_cumsum_exp(x, axis, reverse, ndim)}"
  return None
