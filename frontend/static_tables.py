"""A small table of constants built in a kernel (probe 51n): `jnp.array([1.0, 2.0, 4.0])`, `jnp.asarray(...)`,
`np.array(...)` of Python numbers (polynomial coefficients for jnp.polyval, bin edges for jnp.digitize or
jnp.searchsorted, the values of jnp.isin, the knots of jnp.interp) is computed while tracing as before, then made
a register vector of its numbers: `ml.full` of the first, a select by `ml.arange` for each other element. Its dtype
is jnp's: NumPy's float64 and int64 are float32 and int32 unless jax_enable_x64 is on (jnp.asarray of them).

Only 1-D tables of at most MAX elements, of the names in NAMES, become vectors (since probe 53i also
jnp.linspace's and the other 1-D ranges' and windows' numbers, as jnp computed them), and (since probe 53b) 2-D
ones of at most MAX elements register tiles (`jnp.array([[1., 2.], [3., 4.]])`, a 3x3 stencil's taps); since
probe 54d, a larger array of any name that the index builders make (np.eye(64), np.tri: grid_pattern); other
static arrays keep their MG003 and hints. Kernels that compiled before never reach this (their static
arrays were MG003), so their IR is unchanged."""
from __future__ import annotations

import numpy as np

from .dtypes import DType, to_dtype

NAMES = ("array", "asarray",       # jnp.array, jnp.asarray, np.array, np.asarray
         # 1-D static arrays of numbers the library computed (probe 53i): trapezoid's sample points, a window's taps
         "linspace", "logspace", "geomspace", "hanning", "hamming", "blackman", "bartlett", "kaiser")
KNOWN: dict = {}                  # a table's value id -> (its numbers as Python literals, its DType, its numbers)
MAX = 256
# static array builders of one value (their MG003 hints write ml.zeros, ml.full: calls.py's _FILLED)
FILLED = ("zeros", "ones", "full", "empty", "iota", "broadcasted_iota", "zeros_like", "ones_like", "full_like")
OUTSIDE = 64                      # elements of a module's array made a table (more: passed as an input, its hint)


def _dtype(out, x64: bool):
  """jnp's dtype of the static array `out` in the kernel, or None where no register vector holds it."""
  name = np.dtype(out.dtype).name if hasattr(out, "dtype") else None
  if name == "float64":
    return None if x64 else DType.f32
  if name == "int64" and not x64:
    return DType.i32
  if name == "uint64":
    return None
  return to_dtype(out.dtype)


def _number(v, d: DType) -> str:
  """The Python literal of the element `v` in the dtype `d` (a float's repr round-trips its value)."""
  if d == DType.bool_:
    return repr(bool(v))
  if d.is_float:
    f = float(v)
    return repr(f) if np.isfinite(f) else f"float({str(f)!r})"
  return repr(int(v))


def table(tracer, node, name, out):
  """The register vector of the static array `out` that `name(...)` (at `node`) returned; None where it is not
  a table (the call's MG003 stands)."""
  if node is not None and hasattr(out, "shape") and len(out.shape) in (1, 2) and name not in FILLED and (
      name not in NAMES or int(np.prod(out.shape)) > MAX) and int(np.prod(out.shape)) > OUTSIDE and \
      int(np.prod(out.shape)) % 128 == 0:
    got = grid_pattern(tracer, node, out)      # (np.eye(64), np.tri(128), np.arange(256): probe 54d)
    if got is not None or not computed_floats(name, out):
      return got
  if name not in NAMES and not computed_floats(name, out) or node is None or not hasattr(out, "shape") or \
      len(out.shape) not in (1, 2) or not (1 <= int(np.prod(out.shape)) <= MAX) or 0 in out.shape:
    return None
  if len(out.shape) == 2:
    return _matrix(tracer, node, out)
  d = _dtype(out, bool(getattr(tracer.b, "x64", False)))
  if d is None:
    return None
  vals = np.asarray(out)
  if d.is_int and (vals.min() < d.int_range[0] or vals.max() > d.int_range[1]):
    return None                      # (np.array([2 ** 40]) under x64 off: jnp's int32 cannot hold it)
  from .jnp_calls import trace_form
  n = vals.shape[0]
  texts = [_number(v, d) for v in vals.tolist()]
  t = trace_form(tracer, node, f"ml.full(({n},), {texts[0]}, ml.{'bool_' if d == DType.bool_ else d.value})", [])
  if n > 1 and any(s != texts[0] for s in texts[1:]):
    i = trace_form(tracer, node, f"ml.arange({n})", [])
    for k in range(1, n):
      if texts[k] != texts[0]:
        t = trace_form(tracer, node, f"ml.where({{1}} == {k}, {texts[k]}, {{0}})", [t, i])
  KNOWN[t.id] = (texts, d, vals.astype(d.np))
  return t


def computed_floats(name, out) -> bool:
  """Whether `out`, a static array a NumPy or jnp function of another name than NAMES' returned, is a 1-D table
  of at most MAX float numbers (probe 72b: a window's or a frequency axis's values computed while tracing,
  `jnp.sin(jnp.linspace(0, jnp.pi, n))`, `np.fft.rfftfreq(n, 1 / sr)`, were MG003 "returned an array ... while
  tracing"); a table as jnp.asarray of it makes. Builders of one value (FILLED) keep their hints."""
  return name not in FILLED and hasattr(out, "shape") and len(out.shape) == 1 and 1 <= out.shape[0] <= MAX and \
      np.dtype(getattr(out, "dtype", np.int32)).kind == "f"


INDEX_BUILDERS = ("tril_indices", "triu_indices", "diag_indices", "tril_indices_from", "triu_indices_from",
                  "diag_indices_from", "nonzero", "flatnonzero", "unravel_index")


def index_tables(tracer, node, name, out):
  """The register vectors of the integer index arrays a NumPy or jnp index builder returned while tracing
  (`np.tril_indices(F, -1)`, DLRM's lower triangle of pairs; `np.nonzero` of a static mask): a tuple of 1-D arrays
  (one array for flatnonzero), each made of at most RUNS arithmetic runs (`ml.arange` selected piecewise: a
  tril_indices(27, -1)'s 351 rows are 26 runs of one value, its columns 26 runs of step 1), or else of at most MAX
  elements, a table as `jnp.asarray` of it would be (probe 56e: it was MG003 "returned an array ... while
  tracing"); None for anything else (the call's error stands)."""
  if name not in INDEX_BUILDERS or node is None:
    return None
  arrays = out if isinstance(out, tuple) else (out,)
  if not arrays or not all(hasattr(a, "shape") and len(a.shape) == 1 and 1 <= a.shape[0] <= RUN_MAX and
                           np.asarray(a).dtype.kind in "iu" for a in arrays):
    return None
  got = [_runs(tracer, node, np.asarray(a)) for a in arrays]
  if any(g is None for g in got):
    return None
  return tuple(got) if isinstance(out, tuple) else got[0]


RUNS, RUN_MAX = 64, 65536


def _runs(tracer, node, vals):
  """The register vector of the static integer array `vals` as runs start + step * (p - first) selected by the
  position p; a table of its numbers where it has more than RUNS runs (None past MAX elements)."""
  d = _dtype(vals, bool(getattr(tracer.b, "x64", False)))
  if d is None or not d.is_int or vals.min() < d.int_range[0] or vals.max() > d.int_range[1] or \
      max(abs(int(vals.min())), abs(int(vals.max()))) >= 2 ** 31:
    return None
  n, runs, p = vals.shape[0], [], 0
  while p < n and len(runs) <= RUNS:
    step = int(vals[p + 1]) - int(vals[p]) if p + 1 < n else 0
    q = p + 1
    while q < n and int(vals[q]) - int(vals[q - 1]) == step:
      q += 1
    runs.append((p, int(vals[p]), step))
    p = q
  if len(runs) > RUNS:
    return table(tracer, node, "asarray", vals) if n <= MAX else None
  from .jnp_calls import trace_form
  ty = f"ml.{d.value}"
  first, a, step = runs[0]
  t = trace_form(tracer, node, f"({a} + {step} * ml.arange({n})).astype({ty})" if step else
                 f"ml.full(({n},), {a}, {ty})", [])
  if len(runs) > 1:
    i = trace_form(tracer, node, f"ml.arange({n})", [])
    for first, a, step in runs[1:]:
      v = f"({a} + {step} * ({{1}} - {first})).astype({ty})" if step else f"{a}"
      t = trace_form(tracer, node, f"ml.where({{1}} >= {first}, {v}, {{0}})", [t, i])
  return t


def _matrix(tracer, node, out):
  """The register tile of the static 2-D array `out` (a 3x3 stencil's taps, a small lookup matrix): `ml.full` of
  its first number, then a select by the flat index of each element that differs (since probe 53b)."""
  d = _dtype(out, bool(getattr(tracer.b, "x64", False)))
  if d is None:
    return None
  vals = np.asarray(out)
  if d.is_int and (vals.min() < d.int_range[0] or vals.max() > d.int_range[1]):
    return None
  from .jnp_calls import trace_form
  (r, c), flat = vals.shape, vals.reshape(-1)
  texts = [_number(v, d) for v in flat.tolist()]
  t = trace_form(tracer, node, f"ml.full(({r}, {c}), {texts[0]}, ml.{'bool_' if d == DType.bool_ else d.value})", [])
  if any(s != texts[0] for s in texts[1:]):
    i = trace_form(tracer, node, f"ml.arange({r})[:, None] * {c} + ml.arange({c})[None, :]", [])
    for k in range(1, r * c):
      if texts[k] != texts[0]:
        t = trace_form(tracer, node, f"ml.where({{1}} == {k}, {texts[k]}, {{0}})", [t, i])
  KNOWN[t.id] = (texts, d, vals.astype(d.np))
  return t


def outside(tracer, node, x, lookup=False):
  """`x` where it is no array from outside the kernel; a module's small NumPy (or JAX) array met by register values
  (`x * W`, `x @ W`, `jnp.where(M, x, 0)` of a global W or M) as the register table `jnp.asarray(W)` makes (probe
  53b: it was MG003, "pass the array to the kernel as an input"). A 1-D one indexed by a tensor (`lookup`: CRC32's
  256-entry table, `CRC_TABLE[(c ^ b) & 0xFF]`, a byte's popcount table) takes up to MAX numbers, as
  `jnp.array([...])[idx]` does (probe 71b: past 64 it was that MG003)."""
  from .ops.base import _outside_array, is_value
  most = MAX if lookup and len(getattr(x, "shape", ())) == 1 else OUTSIDE
  if is_value(x) or not _outside_array(x) or len(x.shape) not in (1, 2) or not 1 <= int(np.prod(x.shape)) <= most:
    return x
  try:
    vals = np.asarray(x)
  except Exception:            # (a traced value closed over: its own error where it is used)
    return x
  if vals.dtype.kind not in "biuf":
    return x
  got = table(tracer, node, "asarray", vals)
  return x if got is None else got


def index_arrays(tracer, node, base, index):
  """`index` with each NumPy (or JAX) integer array among its parts made the register vector `jnp.asarray` of it
  would be, where `base` is a register tensor or a ref (probe 72b: an FFT's bit-reversal table as a module constant,
  `x[:, REV]` or `x_ref[REV]`, was MG900 "the truth value of an array ... is ambiguous"): a gather, as NumPy's
  advanced indexing by it. Any other index, or base (a module's array indexed by one: NumPy's own), unchanged."""
  from .ops.base import _outside_array, is_value
  if not (is_value(base) or type(base).__name__ in ("At", "AtOf", "StridedView", "RegisterAt")):
    return index
  parts = index if isinstance(index, tuple) else (index,)
  if not any(_outside_array(p) and not is_value(p) and len(p.shape) >= 1 for p in parts):
    return index

  def made(p):
    if is_value(p) or not _outside_array(p) or len(p.shape) not in (1, 2):
      return p
    try:
      vals = np.asarray(p)
    except Exception:
      return p
    if vals.dtype.kind not in "iu" or vals.size == 0:
      return p
    got = _runs(tracer, node, vals) if vals.ndim == 1 else table(tracer, node, "asarray", vals)
    if got is None:
      from . import errors as E
      raise E.KernelTypeError(
          f"{tracer.text(node)}: an index table of {vals.size} numbers from outside the kernel is more than a"
          f" register table holds ({MAX} numbers, or {RUNS} runs of equal steps)", tracer.loc(node),
          hint="pass it to the kernel as an int32 input and index with its read (idx = idx_ref[...], then"
               " x[idx]), or compute the indices in the kernel (a bit reversal: ml.extra.cuda.libdevice.brev)")
    return got
  out = tuple(made(p) for p in parts)
  return out if isinstance(index, tuple) else out[0]


def known(v):
  """(the literals, the DType, the NumPy array) of a register vector made of a static table here, or None."""
  return KNOWN.get(getattr(v, "id", None)) if hasattr(v, "type") else None


def numbers(v):
  """The elements of a table made here, as typed numbers (`for c in jnp.array([...])` unrolled over them, each as
  jnp's 0-d element of the table's dtype); any other value unchanged."""
  from .ops.base import _outside_array, is_value
  if not is_value(v) and _outside_array(v) and len(v.shape) >= 1 and len(v) <= MAX:
    try:                       # for t in TAPS: of a module's NumPy array: its items, numbers or rows (probe 53b)
      vals = np.asarray(v)
    except Exception:
      return v
    if vals.dtype.kind in "biuf":
      from .ops.base import typed_number
      return tuple(typed_number(e) if vals.ndim == 1 else e for e in vals)
  got = known(v)
  if got is None or got[2].ndim != 1:
    return v
  from .ops.base import typed_number
  return tuple(typed_number(e) for e in got[2])


def grid_pattern(tracer, node, out):
  """A static array of more than OUTSIDE elements, a multiple of 128 (a register tile), that the index builders
  make (probe 54d; it was MG003 "returned an array of shape ... while tracing"; a smaller one keeps it and its
  hint): a 2-D one of at most two values, one where the column index minus the row index is == k, <= k or >= k
  (np.eye, np.identity, np.tri, np.tril/np.triu of ones, a band's edge) and the other elsewhere, or of one value;
  a 1-D one an integer sequence start + step * i (np.arange), exact in its dtype. Made of ml.arange compared, in
  jnp's dtype (float32 for NumPy's float64); None for any other (its MG003 stands)."""
  x64 = bool(getattr(tracer.b, "x64", False))
  d = _dtype(out, x64)
  vals = np.asarray(out)
  if d is None or vals.dtype.kind not in "biuf" or (vals.dtype.kind == "f" and not np.isfinite(vals).all()):
    return None
  if d.is_int and (vals.min() < d.int_range[0] or vals.max() > d.int_range[1]):
    return None
  if d.is_float and not np.array_equal(vals.astype(d.np).astype(np.float64), vals.astype(np.float64)):
    return None                       # (numbers float32 rounds: no exact builder)
  from .jnp_calls import trace_form
  ty = f"ml.{'bool_' if d == DType.bool_ else d.value}"
  if vals.ndim == 1:
    n = vals.shape[0]
    if n < 2 or vals.dtype.kind == "b":
      return None
    start, step = vals[0], vals[1] - vals[0]
    if start != int(start) or step != int(step) or max(abs(vals.min()), abs(vals.max())) >= 2 ** 24 or \
        not np.array_equal(vals, start + step * np.arange(n)):
      return None
    return trace_form(tracer, node, f"({int(start)} + {int(step)} * ml.arange({n})).astype({ty})", [])
  r, c = vals.shape
  u = np.unique(vals)
  if len(u) == 1:
    return trace_form(tracer, node, f"ml.full(({r}, {c}), {_number(u[0], d)}, {ty})", [])
  if len(u) != 2:
    return None
  diff = np.arange(c)[None, :] - np.arange(r)[:, None]
  for off, on in ((u[0], u[1]), (u[1], u[0])):
    mask = vals == on
    for op, k in (("==", diff[mask].min()), ("<=", diff[mask].max()), (">=", diff[mask].min())):
      if np.array_equal(mask, {"==": diff == k, "<=": diff <= k, ">=": diff >= k}[op]):
        cond = f"ml.arange({c})[None, :] - ml.arange({r})[:, None] {op} {int(k)}"
        return trace_form(tracer, node, f"ml.where({cond}, {_number(on, d)}, {_number(off, d)}).astype({ty})", [])
  return None
