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
  own = a.get("_shape_of", _shape)
  n = _odd(x, own) if sa is not None and len(sa) == 2 and own(x)[0] > 3 else (
      own(x)[0] if sa is not None and len(sa) == 2 and tuple(own(x)) in ((2, 2), (3, 3)) else None)
  if n is not None and str(_dtype(x)) in _FLOATS:    # (an odd n: the padded (16k, 16k) system, identity below and
    sb = own(y) if sb is not None else None           # right of it; b's rows grown alike; probe 56a)
    if sb is None or len(sb) != 2 or sb[0] != n or str(_dtype(y)) not in _FLOATS or not isinstance(lower, bool) \
        or not isinstance(unit, bool) or trans not in (0, "N", 1, "T", 2, "C"):
      return None
    from . import form_helpers
    from .ops.padded_squares import SHRUNK
    from .ops.promotion import arithmetic_in
    out = arithmetic_in(_dtype(x), _dtype(y))
    t, lower = ("", lower) if trans in (0, "N") else (".T", not lower)
    big_a, big, grown = _embedded(n, 2)
    return None if out is None else (
        f"{{4}}({{3}}({big_a}{t}, {{2}}({{1}}.astype(ml.float32), {big}), {lower}, {unit}), {n}, {sb[1]})"
        f".astype({{5}})", [x, y, grown, form_helpers.solve_triangular, SHRUNK, str(out)])
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


def _odd(x, shape_of):
  """n of a float (n, n) tile, n past 3 and not a multiple of 16 (its own shape, `shape_of`: a padded trace holds
  it padded), solved as the (16k, 16k) matrix of it with an identity block below and right of it (probe 56a); else
  None."""
  s = shape_of(x) if _shape(x) is not None else None
  if s is None or len(s) != 2 or s[0] != s[1] or s[0] <= 3 or not s[0] % 16 or str(_dtype(x)) not in _FLOATS:
    return None
  return s[0]


def _embedded(n, i):
  """The form's text of the (N, N) matrix (N: n rounded up to 16) of operand {i} (a padded (n, n) tile, float32),
  ones on the diagonal past n, and N."""
  from .ops.padded_squares import GROWN
  big = -(-n // 16) * 16
  eye = (f"ml.where((ml.arange({big})[:, None] == ml.arange({big})[None, :]) & (ml.arange({big})[:, None] >= {n}),"
         f" 1.0, 0.0)")
  return f"({{{i}}}({{0}}.astype(ml.float32), {big}, {big}) + {eye})", big, GROWN


def _batched(a, names):
  """jnp.linalg's call of a (B, n, n) `a` (and a (B, n, m) or (B, n) `b`): the stack of the calls of each matrix
  (probe 56a; jax batches them so), B at most 16; None where `a` is no such stack."""
  own = a.get("_shape_of", _shape)
  x = a[names[0]]
  s = own(x) if _shape(x) is not None else None
  if s is None or len(s) != 3 or s[1] != s[2] or not 1 <= s[0] <= 16 or a.get("_fn") is None:
    return None
  if len(names) > 1:
    y = a[names[1]]
    sb = own(y) if _shape(y) is not None else None
    if sb is None or len(sb) != 3 or sb[0] != s[0] or sb[1] != s[1]:
      return None               # (a (B, n) b's solutions are vectors that no stack of them holds: MG003)
  args = ", ".join(f"{{{k}}}[_i_]" for k in range(len(names)))
  if a["_fn"].__name__ == "det":        # (scalars, put together by selects)
    d = str(_dtype(x))
    from . import form_helpers
    return "{1}({0}, {2}).astype({3})", [x, form_helpers.scalars_of, a["_fn"], d]
  return (f"ml.stack([{{{len(names)}}}({args}) for _i_ in range({s[0]})])",
          [a[k] for k in names] + [a["_fn"]])


def _solve(a):
  """jnp.linalg.solve(a, b) of an (n, n) `a` and an (n, m) `b`: form_helpers.lu_solve's X (probe 54d); of a 2x2 or
  3x3 `a` and a 1-D (n,) or 2-D (n, m) `b`, form_helpers.small_solve's (probe 55b)."""
  got = _batched(a, ("a", "b"))
  if got is not None:
    return got
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
  n = _odd(x, own) or (_shape(x)[0] if _square(x) else None)
  if n is not None and sb is not None and len(sb) == 1 and own(y)[0] == n and str(_dtype(y)) in _FLOATS:
    from . import form_helpers                  # (a vector b: its solve's column, probe 56a)
    from .ops.padded_squares import SHRUNK
    from .ops.promotion import arithmetic_in
    out = arithmetic_in(_dtype(x), _dtype(y))
    big_a, big, grown = _embedded(n, 2) if n % 16 else ("{0}.astype(ml.float32)", n, None)
    return None if out is None else (
        f"{{4}}({{3}}({big_a}, {{2}}({{1}}, {big})), {n}).astype({{5}})" if n % 16 else
        "{3}({0}.astype(ml.float32), {1}).astype({5})",
        [x, y, grown, form_helpers.lu_solve_vector, SHRUNK, str(out)])
  n = _odd(x, own)
  if n is not None and sb is not None and len(sb) == 2 and own(y)[0] == n and str(_dtype(y)) in _FLOATS:
    from . import form_helpers                  # (an odd n: the padded (16k, 16k) system, b's rows grown alike)
    from .ops.padded_squares import SHRUNK
    from .ops.promotion import arithmetic_in
    out = arithmetic_in(_dtype(x), _dtype(y))
    big_a, big, grown = _embedded(n, 2)
    m = own(y)[1]
    return None if out is None else (
        f"{{4}}({{3}}({big_a}, {{2}}({{1}}.astype(ml.float32), {big}), False)[0], {n}, {m}).astype({{5}})",
        [x, y, grown, form_helpers.lu_solve, SHRUNK, str(out)])
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
  got = _batched(a, ("a",))
  if got is not None:
    return got
  x = a["a"]
  from . import form_helpers
  if _small(x, a.get("_shape_of", _shape)):             # (a 2x2 or 3x3: its adjugate over its determinant, probe 55b)
    return "{1}({0}.astype(ml.float32), None, True).astype({2})", [x, form_helpers.small_solve, str(_dtype(x))]
  n = _odd(x, a.get("_shape_of", _shape))
  if n is not None:                  # (an odd n: the padded (16k, 16k) matrix's inverse, its top left (n, n) block)
    from .ops.padded_squares import SHRUNK
    big_a, big, grown = _embedded(n, 1)
    eye = f"ml.where(ml.arange({big})[:, None] == ml.arange({big})[None, :], 1.0, 0.0)"
    return (f"{{3}}({{2}}({big_a}, {eye}, False)[0], {n}, {n}).astype({{4}})",
            [x, grown, form_helpers.lu_solve, SHRUNK, str(_dtype(x))])
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
  got = _batched(a, ("a",))
  if got is not None:
    return got
  x = a["a"]
  s = a.get("_shape_of", _shape)(x) if _shape(x) is not None else None   # (own: a[i] of a stack, held padded)
  if s is not None and tuple(s) in ((2, 2), (3, 3)) and str(_dtype(x)) in _FLOATS:
    return _DET_SMALL[s[0]], [x]
  from . import form_helpers
  odd = _odd(x, a.get("_shape_of", _shape))
  if odd is not None:                 # (an odd n: the padded (16k, 16k) matrix's, whose padding's pivots are 1)
    big_a, big, grown = _embedded(odd, 1)
    return (f"{{2}}({big_a}, ml.zeros(({big}, {big}), ml.float32), True)[1].astype({{3}})",
            [x, grown, form_helpers.lu_solve, str(_dtype(x))])
  if not _square(x):
    return None
  n = _shape(x)[0]
  return (f"{{1}}({{0}}.astype(ml.float32), ml.zeros(({n}, {n}), ml.float32), True)[1].astype({{2}})",
          [x, form_helpers.lu_solve, str(_dtype(x))])


def _cholesky(a):
  """jnp.linalg.cholesky(a) (jax.scipy.linalg.cholesky(a, lower), upper by default) of a float (n, n) `a`:
  form_helpers.cholesky's L (its transpose for an upper one), n a multiple of 16, or any other n past 1 solved as
  the padded (16k, 16k) matrix with an identity block, whose factor's top left block is a's (probe 56a); a stack
  (B, n, n) is each matrix's."""
  got = _batched(a, ("a",))
  if got is not None:
    return got
  x, lower = a["a"], a.get("lower", True)
  own = a.get("_shape_of", _shape)
  s = own(x) if _shape(x) is not None else None
  if s is None or len(s) != 2 or s[0] != s[1] or s[0] < 2 or str(_dtype(x)) not in _FLOATS \
      or not isinstance(lower, bool):
    return None
  from . import form_helpers
  t = "" if lower else ".T"
  n = s[0]
  if not n % 16:
    return f"{{1}}({{0}}.astype(ml.float32)){t}.astype({{2}})", [x, form_helpers.cholesky, str(_dtype(x))]
  from .ops.padded_squares import SHRUNK
  big_a, _, grown = _embedded(n, 1)
  return (f"{{3}}({{2}}({big_a}){t}, {n}, {n}).astype({{4}})",
          [x, grown, form_helpers.cholesky, SHRUNK, str(_dtype(x))])


def _slogdet(a):
  """jnp.linalg.slogdet(a) of a float (n, n) `a`: (sign, log |det|) of form_helpers.lu_solve's pivots (their signs,
  a swap negating, and their logarithms summed, so that no product overflows; probe 56a), any n as det's."""
  x = a["a"]
  if a.get("method") is not None:
    return None
  from . import form_helpers
  odd = _odd(x, a.get("_shape_of", _shape))
  if odd is None and not _square(x):
    return None
  if odd is not None:
    big_a, n, grown = _embedded(odd, 1)
  else:
    big_a, n, grown = "{0}.astype(ml.float32)", _shape(x)[0], None
  d = str(_dtype(x))
  return (f"(lambda _r_: (_r_[0].astype({{3}}), _r_[1].astype({{3}})))({{2}}({big_a}, ml.zeros(({n}, {n}),"
          f" ml.float32), 'log')[1])", [x, grown, form_helpers.lu_solve, d])


def _power_text(n: int) -> str:
  """The form's text of {0} to the power n >= 1 by squaring (`@` of register tiles: jnp.dot's forms)."""
  if n == 1:
    return "{0}"
  half = f"(lambda _p_: _p_ @ _p_)({_power_text(n // 2)})"
  return half if n % 2 == 0 else f"({half} @ {{0}})"


def _matrix_power(a):
  """jnp.linalg.matrix_power(a, n) of a square (n, n) tile and a static n >= 1: products by squaring (probe 56a);
  n 0 or negative keeps MG003."""
  x, n = a["a"], a["n"]
  own = a.get("_shape_of", _shape)
  s = own(x) if _shape(x) is not None else None
  if s is None or len(s) != 2 or s[0] != s[1] or not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 64:
    return None
  return _power_text(n), [x]


def _cho_factor(a):
  """jax.scipy.linalg.cho_factor(a, lower=False): (the Cholesky factor, lower), the factor as _cholesky's."""
  got = _cholesky(a)
  lower = a.get("lower")
  return None if got is None or not isinstance(lower, bool) else (f"({got[0]}, {lower})", got[1])


def _cho_solve(a):
  """jax.scipy.linalg.cho_solve((c, lower), b): two triangular solves of c (jax's), through the library's own
  solve_triangular (jnp_linalg's form, any n), found in the module the user's jax has loaded (probe 56a)."""
  import sys
  pair, y = a["c_and_lower"], a["b"]
  tri = getattr(sys.modules.get("jax.scipy.linalg"), "solve_triangular", None)
  if not isinstance(pair, tuple) or len(pair) != 2 or not isinstance(pair[1], bool) or tri is None \
      or _shape(pair[0]) is None or _shape(y) is None:
    return None
  lower = pair[1]
  return (f"{{2}}({{0}}, {{2}}({{0}}, {{1}}, lower={lower}, trans={0 if lower else 1}), lower={lower},"
          f" trans={1 if lower else 0})", [pair[0], y, tri])


LINALG.update({
    ("jnp.linalg", "matrix_power"): (("a", "n"), _matrix_power),
    ("jax.scipy.linalg", "cho_factor"): (("a", "lower"), _cho_factor),
    ("jax.scipy.linalg", "cho_solve"): (("c_and_lower", "b"), _cho_solve),
    ("jnp.linalg", "slogdet"): (("a", "method"), _slogdet),
    ("jnp.linalg", "cholesky"): (("a",), _cholesky),
    ("jax.scipy.linalg", "cholesky"): (("a", "lower"), _cholesky),
    ("jnp.linalg", "solve"): (("a", "b"), _solve),
    ("jnp.linalg", "inv"): (("a",), _inv),
    ("jnp.linalg", "det"): (("a",), _det),
})


def _alias(target, given):
  """A jnp.linalg function of the array API that is its jnp namesake with other parameters (`jnp.linalg.trace(x,
  offset=1)` is `jnp.trace(x, 1, axis1=-2, axis2=-1)`; probe 60c, they were MG003 "has no form"): the namesake's form
  (jnp_calls.SHAPED) of the arguments `given(a)` maps them to, the namesake's other parameters at their defaults."""
  def make(a):
    from .jnp_calls import SHAPED
    args = given(a)
    if args is None:
      return None
    reads, form = SHAPED[target]
    return form({**{p: None for p in reads}, **args, **{k: a[k] for k in ("_shape_of", "_fn") if k in a}})
  return make


def _last_two(a, name="x"):
  """The last two axes of a's operand as non-negative numbers (jnp.trace and jnp.diagonal read them so); None for a
  number."""
  s = _shape(a[name])
  return None if s is None or len(s) < 2 else (len(s) - 2, len(s) - 1)


LINALG.update({
    ("jnp.linalg", "trace"): (("x", "offset", "dtype"), _alias(("jnp", "trace"), lambda a: None if (
        ax := _last_two(a)) is None else {"a": a["x"], "offset": a["offset"], "axis1": ax[0], "axis2": ax[1],
                                          "dtype": a["dtype"]})),
    ("jnp.linalg", "diagonal"): (("x", "offset"), _alias(("jnp", "diagonal"), lambda a: None if (
        ax := _last_two(a)) is None else {"a": a["x"], "offset": a["offset"], "axis1": ax[0], "axis2": ax[1]})),
    ("jnp.linalg", "outer"): (("x1", "x2"), _alias(("jnp", "outer"), lambda a: {"a": a["x1"], "b": a["x2"]})),
    ("jnp.linalg", "cross"): (("x1", "x2", "axis"), _alias(("jnp", "cross"), lambda a: {
        "a": a["x1"], "b": a["x2"], "axisa": -1, "axisb": -1, "axisc": -1, "axis": a["axis"]})),
    ("jnp.linalg", "matrix_transpose"): (("x",), lambda a: None if (ax := _last_two(a)) is None else (
        f"ml.transpose({{0}}, {tuple(range(ax[0])) + (ax[1], ax[0])})" if ax[0] else "{0}.T", [a["x"]])),
})
