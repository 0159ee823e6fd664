"""jax.scipy.linalg.solve_triangular of register tiles (probe 53f): DeltaNet's UT transform written as JAX code
writes it, `jax.scipy.linalg.solve_triangular(jnp.eye(64) + A, B, lower=True)` of a chunk's strictly lower `A`. The
form is form_helpers.solve_triangular's substitution, a row a trip of a run-time loop, computed in float32 and given
jnp's result dtype; `trans=1` ('T', and 'C' of real values) solves with `a.T`, whose triangle is the other. A form as
jnp_forms' are (the parameters it reads, a function of the bound arguments giving (the form, its operands) or None:
MG003 and its hint stand for what it does not take: a 1-D b, other dtypes)."""
from __future__ import annotations

from .jnp_forms import _dtype, _shape

_FLOATS = ("float32", "float16", "bfloat16")


def _solve_triangular(a):
  x, y, trans, lower, unit = a["a"], a["b"], a["trans"], a["lower"], a["unit_diagonal"]
  sa, sb = _shape(x), _shape(y)
  if sa is None or sb is None or len(sa) != 2 or len(sb) != 2 or sa[0] != sa[1] or sb[0] != sa[0]:
    return None
  da, db = str(_dtype(x)), str(_dtype(y))
  if da not in _FLOATS or db not in _FLOATS or not isinstance(lower, bool) or not isinstance(unit, bool):
    return None
  if trans in (0, "N"):
    t = ""
  elif trans in (1, "T", 2, "C"):
    t, lower = ".T", not lower
  else:
    return None
  from . import form_helpers
  from .ops.promotion import arithmetic_in
  out = da if da == db else arithmetic_in(_dtype(x), _dtype(y))
  if out is None:
    return None
  return (f"{{2}}({{0}}.astype(ml.float32){t}, {{1}}.astype(ml.float32), {lower}, {unit}).astype({{3}})",
          [x, y, form_helpers.solve_triangular, str(out)])


LINALG = {
    ("jax.scipy.linalg", "solve_triangular"): (("a", "b", "trans", "lower", "unit_diagonal"), _solve_triangular),
}


def _square(x):
  """A float (n, n) tile whose form_helpers.lu_solve steps are register tiles: n a multiple of 16 (a smaller or odd
  matrix's steps are no register tensor: MG003, missing.py's hint)."""
  s = _shape(x)
  return s is not None and len(s) == 2 and s[0] == s[1] and s[0] % 16 == 0 and str(_dtype(x)) in _FLOATS


def _small(x, shape_of):
  """A float 2x2 or 3x3 tile (its own shape, `shape_of`: a padded trace holds it padded): form_helpers.small_solve's
  adjugate over the determinant (probe 55b)."""
  s = shape_of(x) if _shape(x) is not None else None
  return s is not None and tuple(s) in ((2, 2), (3, 3)) and str(_dtype(x)) in _FLOATS


def _solve(a):
  """jnp.linalg.solve(a, b) of an (n, n) `a` and an (n, m) `b`: form_helpers.lu_solve's X (probe 54d); of a 2x2 or
  3x3 `a` and a 1-D (n,) or 2-D (n, m) `b`, form_helpers.small_solve's (probe 55b)."""
  x, y = a["a"], a["b"]
  sb = _shape(y)
  own = a.get("_shape_of", _shape)
  if _small(x, own) and sb is not None and len(sb) in (1, 2) and own(y)[0] == own(x)[0] and \
      str(_dtype(y)) in _FLOATS:
    from . import form_helpers
    from .ops.promotion import arithmetic_in
    out = arithmetic_in(_dtype(x), _dtype(y))
    return None if out is None else ("{2}({0}.astype(ml.float32), {1}, False).astype({3})",
                                     [x, y, form_helpers.small_solve, str(out)])
  if not _square(x) or sb is None or len(sb) != 2 or sb[0] != _shape(x)[0] or str(_dtype(y)) not in _FLOATS:
    return None
  from . import form_helpers
  from .ops.promotion import arithmetic_in
  out = arithmetic_in(_dtype(x), _dtype(y))
  if out is None:
    return None
  return ("{2}({0}.astype(ml.float32), {1}.astype(ml.float32), False)[0].astype({3})",
          [x, y, form_helpers.lu_solve, str(out)])


def _inv(a):
  """jnp.linalg.inv(a) of an (n, n) `a`: jax's solve(a, eye(n)), form_helpers.lu_solve's X (probe 54d); of a 2x2
  or 3x3 one, form_helpers.small_solve's adjugate over the determinant (probe 55b)."""
  x = a["a"]
  from . import form_helpers
  if _small(x, a.get("_shape_of", _shape)):             # (a 2x2 or 3x3: its adjugate over its determinant, probe 55b)
    return "{1}({0}.astype(ml.float32), None, True).astype({2})", [x, form_helpers.small_solve, str(_dtype(x))]
  if not _square(x):
    return None
  n = _shape(x)[0]
  eye = f"ml.where(ml.arange({n})[:, None] == ml.arange({n})[None, :], 1.0, 0.0)"
  return (f"{{1}}({{0}}.astype(ml.float32), {eye}, False)[0].astype({{2}})",
          [x, form_helpers.lu_solve, str(_dtype(x))])


_DET_SMALL = {      # jax's _det_2x2 and _det_3x3, of the matrix's scalar elements
    2: "{0}[0, 0] * {0}[1, 1] - {0}[0, 1] * {0}[1, 0]",
    3: ("{0}[0, 0] * {0}[1, 1] * {0}[2, 2] + {0}[0, 1] * {0}[1, 2] * {0}[2, 0] + {0}[0, 2] * {0}[1, 0] * {0}[2, 1]"
        " - {0}[0, 2] * {0}[1, 1] * {0}[2, 0] - {0}[0, 0] * {0}[1, 2] * {0}[2, 1] - {0}[0, 1] * {0}[1, 0] * {0}[2, 2]"),
}


def _det(a):
  """jnp.linalg.det(a) of an (n, n) `a`: the product of form_helpers.lu_solve's pivots, a swap negating it (jax's
  LU); of a 2x2 or 3x3 one, jax's closed form of its scalar elements (probe 54d)."""
  x = a["a"]
  s = _shape(x)
  if s is not None and tuple(s) in ((2, 2), (3, 3)) and str(_dtype(x)) in _FLOATS:
    return _DET_SMALL[s[0]], [x]
  if not _square(x):
    return None
  from . import form_helpers
  n = _shape(x)[0]
  return (f"{{1}}({{0}}.astype(ml.float32), ml.zeros(({n}, {n}), ml.float32), True)[1].astype({{2}})",
          [x, form_helpers.lu_solve, str(_dtype(x))])


LINALG.update({
    ("jnp.linalg", "solve"): (("a", "b"), _solve),
    ("jnp.linalg", "inv"): (("a",), _inv),
    ("jnp.linalg", "det"): (("a",), _det),
})
