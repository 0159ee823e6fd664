"""Row statistics composed of reductions and elementwise math, with jnp's and jax.nn's meaning:
ml.softmax, ml.log_softmax, ml.logsumexp, ml.var, ml.std, ml.any, ml.all.

No IR op of their own: each is written out at trace time in the ops of `reduce` and
`elementwise`, so layouts, interpret mode and lowering need nothing new. float16 and bfloat16
values are computed in float32 and rounded once at the end (jnp.var does the same; jax.nn.softmax
and logsumexp round each step in the 16-bit type, so results may differ from them in the last bit);
integers and booleans give float32, as in jnp.
"""
from __future__ import annotations

import dataclasses

import math

from .. import errors as E
from ..dtypes import DType, to_dtype
from ..types import dtype_name, resolve
from . import elementwise as ew
from .elementwise_checks import method_on
from .base import builtin, check_register_value, is_tensor, is_value, kind_of, shown
from .reduce import _axes, as_stat_dtype, keep_arg, kept_only, reduce, stat_dtype
from .shape import ReduceKind, broadcast_shape
from .spread import rehint


def _float_operand(cx, x, what):
  """(x as float32 where it is narrower or not a float, the dtype of the result)."""
  check_register_value(cx, x, what)
  if not is_tensor(x):
    raise E.KernelTypeError(f"{what} takes a register tensor, got {kind_of(x)}", cx.loc,
                            hint=f"{what} of a scalar has nothing to combine: apply it to the tensor the scalar"
                            f" was reduced from, or use the scalar as it is")
  d = resolve(x.type.dtype)
  if isinstance(d, DType) and d.is_float and d.bits < 16:
    raise E.UnsupportedDtypeError(
        f"{what} of {dtype_name(d)} values is not supported", cx.loc,
        hint=f"convert first: {method_on(cx.named(x))}.astype(jnp.float32)")
  out = d if isinstance(d, DType) and d.is_float else DType.f32
  return (x if d == DType.f32 else ew.astype(cx, x, DType.f32)), out


def _int_shift(cx, x, axis, where, what):
  """jax.nn's shift of an integer tensor, `x - max(x)` in its own dtype (wrapping: an int8 row spanning more than
  127 wraps, as jnp's; probe 57e found the kernel's exact float32 shift silently unlike it), converted to float32
  next; None for floats, bools and `where=` (jnp's max of an integer where= has no initial: the float path)."""
  if where is not None or not is_tensor(x):
    return None
  d = resolve(x.type.dtype)
  if not (isinstance(d, DType) and d.is_int):
    return None
  return ew.binary(cx, ew.BinOp.SUB, x, reduce(cx, ReduceKind.MAX, x, _axis(cx, x, axis, what), True, what))


def _finite_max(cx, x, axis, what):
  """The max over `axis` (kept), with infinite maxima replaced by 0 (jax.nn's shift: a row of
  -inf gives exp(-inf - 0) = 0, not NaN)."""
  m = reduce(cx, ReduceKind.MAX, x, axis, True, what=what)
  return ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, ew.unary(cx, ew.UnOp.ABS, m), math.inf), m, 0.0)


def _axis(cx, x, axis, what):
  _axes(cx, axis, len(x.type.shape), what)         # checked: an int, a tuple or None, in range
  return axis


def _masked(cx, y, where, what, x=None):
  """`y` with -inf where the mask `where` is off (jax.nn's `where=`), and the mask."""
  if where is None:
    return y
  if not is_tensor(where):
    raise E.KernelTypeError(f"{what}: where= must be a boolean tensor, got {kind_of(where)}", cx.loc,
                            hint=f"a comparison, {what}(v, where=ml.arange(n)[None, :] < k)")
  where = ew.truth(cx, where)     # a number mask keeps its non-zero elements, as jax.nn's
  broadcast_shape(cx, [where.type.shape, y.type.shape], f"{what}'s where=",     # (in the call's words, not ml.where's)
                  [cx.named(where, "the mask"), cx.named(x, "x")], (where, x))
  return ew.where_(cx, where, y, -math.inf)


def _flat_statistic(cx, x, axis, keepdims, what):
  """(the 2-D shape, its axis, the result's shape) where a statistic of a 3-D (or wider) `x` over a leading
  or trailing run of two or more axes is computed on the 2-D reshape, as the plain reduction over them is
  (reduce's plan: a kept part that a register tensor holds): its mean or max kept with the tensor's rank does
  not broadcast back against the 3-D tile (ml.var(v, axis=(1, 2)) was MG204 where ml.mean of it worked); None
  for any other."""
  from .reduce import _flat_plan
  shape = x.type.shape
  axes = _axes(cx, axis, len(shape), what)
  if len(shape) <= 2 or len(axes) < 2 or len(axes) == len(shape) or (plan := _flat_plan(shape, axes)) is None:
    return None
  from .padded_tiles import padded_table
  if (pads := padded_table(cx, x)) is not None and any(n != u for n, u in zip(pads[x.id], shape)):
    return None     # (a tile read padded, a (2, 3, 40) one held as (2, 4, 64): the reshape would put padding inside
                    # its rows; the statistic over its axes as they are, probe 53a)
  rows, cols, lead, kept = plan
  return (rows, cols), 0 if lead else 1, tuple(1 if i in axes else n for i, n in enumerate(shape)) if keepdims else kept


def _as_2d(cx, v, shape, shape2):
  """A mask or scale `v` (None, a number, or a tensor that broadcasts to `shape`) for the 2-D reshape."""
  from .shape import broadcast_to_shape, reshape_
  if not is_tensor(v):
    return v
  return reshape_(cx, broadcast_to_shape(cx, v, shape) if v.type.shape != shape else v, shape2)


@builtin
def softmax(cx, x, axis=-1, where=None):
  """jax.nn.softmax: exp(x - max) / sum(exp(x - max)) along `axis` (-1: along each row); with
  `where=` (a boolean tensor that broadcasts to x), over the elements it keeps, 0 elsewhere."""
  shifted = _int_shift(cx, x, axis, where, "ml.softmax")
  y, out = _float_operand(cx, x if shifted is None else shifted, "ml.softmax")
  axis = _axis(cx, y, axis, "ml.softmax")
  y = _masked(cx, y, where, "ml.softmax", x)
  e = ew.unary(cx, ew.UnOp.EXP, y if shifted is not None else ew.binary(
      cx, ew.BinOp.SUB, y, reduce(cx, ReduceKind.MAX, y, axis, True, "ml.softmax")))
  r = ew.binary(cx, ew.BinOp.DIV, e, reduce(cx, ReduceKind.SUM, e, axis, True, "ml.softmax"))
  if where is not None:
    r = ew.where_(cx, where, r, 0.0)
  return r if out == DType.f32 else ew.astype(cx, r, out)


@builtin
def log_softmax(cx, x, axis=-1, where=None):
  """jax.nn.log_softmax: x - max - log(sum(exp(x - max))) along `axis`; with `where=`, over the
  elements it keeps, -inf elsewhere."""
  shifted = _int_shift(cx, x, axis, where, "ml.log_softmax")
  y, out = _float_operand(cx, x if shifted is None else shifted, "ml.log_softmax")
  axis = _axis(cx, y, axis, "ml.log_softmax")
  y = _masked(cx, y, where, "ml.log_softmax", x)
  s = y if shifted is not None else ew.binary(cx, ew.BinOp.SUB, y, reduce(cx, ReduceKind.MAX, y, axis, True,
                                                                           "ml.log_softmax"))
  lse = ew.unary(cx, ew.UnOp.LOG,
                 reduce(cx, ReduceKind.SUM, ew.unary(cx, ew.UnOp.EXP, s), axis, True, "ml.log_softmax"))
  r = ew.binary(cx, ew.BinOp.SUB, s, lse)
  if where is not None:
    r = ew.where_(cx, where, r, -math.inf)
  return r if out == DType.f32 else ew.astype(cx, r, out)


@builtin
def logsumexp(cx, x, axis=None, b=None, keepdims=False, return_sign=False, where=None):
  """jax.nn.logsumexp: log(sum(b * exp(x))) over `axis`, computed as max + log(sum(b * exp(x - max)))
  (a row of -inf gives -inf; one holding +inf gives +inf). `b` (a number or a tensor that broadcasts
  to x: a split-K combine's partial sums) scales the exponentials, the elements where it is 0 left out,
  and a negative sum is NaN unless `return_sign=True`, which gives (log of its magnitude, its sign);
  `where=` keeps the elements it is True at, as jax.nn's."""
  y, out = _float_operand(cx, x, "ml.logsumexp")
  keepdims = keep_arg(cx, keepdims, "ml.logsumexp", x, axis)
  axis = _axis(cx, y, axis, "ml.logsumexp")
  if not isinstance(return_sign, bool):
    raise E.KernelTypeError(f"ml.logsumexp: return_sign must be a static bool, got {shown(return_sign)}", cx.loc,
                            hint="return_sign=True gives (the log of the sum's magnitude, its sign); leave it out for the log")
  if (flat := _flat_statistic(cx, y, axis, keepdims, "ml.logsumexp")) is not None:
    from .shape import reshape_
    if where is not None:
      _masked(cx, y, where, "ml.logsumexp", x)
    shape2, a2, res = flat
    w2 = None if where is None else _as_2d(cx, ew.truth(cx, where), y.type.shape, shape2)
    r = logsumexp.rule(cx, reshape_(cx, x, shape2), a2, _as_2d(cx, b, y.type.shape, shape2), False, return_sign, w2)
    return tuple(reshape_(cx, v, res) for v in r) if return_sign else reshape_(cx, r, res)
  y = _masked(cx, y, where, "ml.logsumexp")
  if b is not None:
    y, out = _scaled(cx, y, b, out)
  m = _finite_max(cx, y, axis, "ml.logsumexp")
  e = ew.unary(cx, ew.UnOp.EXP, ew.binary(cx, ew.BinOp.SUB, y, m))
  if b is not None:
    e = ew.binary(cx, ew.BinOp.MUL, e, b if not is_value(b) else ew.astype(cx, b, DType.f32))
  s = reduce(cx, ReduceKind.SUM, e, axis, True, "ml.logsumexp")
  mag = ew.unary(cx, ew.UnOp.ABS, s) if b is not None else s     # log of a negative sum: NaN, as jnp's
  r = ew.binary(cx, ew.BinOp.ADD, ew.unary(cx, ew.UnOp.LOG, s if not return_sign else mag), m)
  if b is not None and not return_sign:
    r = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, s, 0.0), math.nan, r)
  results = [r]
  if return_sign:     # lax.sign: 1, -1, or the zero (or NaN) itself
    results.append(ew.where_(cx, ew.compare(cx, ew.CmpOp.GT, s, 0.0), 1.0,
                             ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, s, 0.0), -1.0, s)))
  if not keepdims:
    results = [rehint(cx, _drop(cx, v, y, axis), x, axis, "ml.logsumexp") for v in results]
  results = [v if out == DType.f32 else ew.astype(cx, v, out) for v in results]
  return tuple(results) if return_sign else results[0]


def _scaled(cx, y, b, out):
  """(y with -inf where the scale `b` is 0, as jax.nn.logsumexp leaves those elements out; the result's
  dtype, promoted with b's as jnp promotes a and b)."""
  check_register_value(cx, b, "ml.logsumexp")
  if not is_value(b):
    if not isinstance(b, (int, float)) or isinstance(b, bool):
      raise E.KernelTypeError(f"ml.logsumexp: b must be a number or a register tensor, got {kind_of(b)}", cx.loc,
                              hint="b scales each exponential: ml.logsumexp(m, axis=1, b=l) for partial sums l")
    if b == 0:      # every element left out: -inf (a select, NaN included)
      y = ew.where_(cx, ew.compare(cx, ew.CmpOp.LT, y, -math.inf), y, -math.inf)
    return y, out
  bd = resolve(b.type.dtype)
  if isinstance(bd, DType) and bd.is_float and bd != out:
    out = DType.f32          # float16, bfloat16 and float32 meet in float32
  return ew.where_(cx, ew.compare(cx, ew.CmpOp.NE, b, 0), y, -math.inf), out


def _drop(cx, r, x, axis):
  """`r`, reduced over `axis` with keepdims=True, without those axes (a scalar where all go)."""
  from .shape import reshape_
  rank = len(x.type.shape)
  axes = _axes(cx, axis, rank, "")
  if len(axes) == rank:
    return ew.one_element_scalar(cx, r)
  return reshape_(cx, r, tuple(n for i, n in enumerate(x.type.shape) if i not in axes))


def _variance(cx, x, axis, ddof, keepdims, what, where=None):
  y, out = _float_operand(cx, x, what)
  if isinstance(ddof, int) and not isinstance(ddof, bool) and \
      (flat := _flat_statistic(cx, y, axis, keep_arg(cx, keepdims, what, x, axis), what)) is not None:
    from .shape import reshape_
    if where is not None:
      _masked(cx, y, where, what, x)       # (checked in the call's words: a tensor that broadcasts to x)
    shape2, a2, res = flat
    w2 = None if where is None else _as_2d(cx, ew.truth(cx, where), y.type.shape, shape2)
    v, _ = _variance(cx, reshape_(cx, y, shape2), a2, ddof, False, what, w2)
    return reshape_(cx, v, res), out
  axes = _axes(cx, axis, len(y.type.shape), what)
  keepdims = keep_arg(cx, keepdims, what, x, axis)
  if not isinstance(ddof, int) or isinstance(ddof, bool):
    src, ax = method_on(cx.named(x)), f"axis={axis!r}"
    fix = (f"{what}'s third argument is ddof (jnp's is dtype): {what}({src}.astype({shown(ddof)}), {ax})"
           if to_dtype(ddof) is not None and not isinstance(ddof, (float, str)) else
           f"{what}({src}, {ax}, ddof=1) for the unbiased estimate")
    raise E.KernelTypeError(f"{what}: ddof must be a static int, got {shown(ddof)}", cx.loc, hint=fix)
  if where is not None:
    return _masked_variance(cx, y, where, axis, ddof, keepdims, what), out
  from .padded_tiles import true_shape
  n = math.prod(true_shape(cx.b, y)[a] for a in axes)      # (a padded tile's count: its own)
  mu = ew.binary(cx, ew.BinOp.DIV, reduce(cx, ReduceKind.SUM, y, axis, True, what), float(n))
  c = ew.binary(cx, ew.BinOp.SUB, y, mu)
  # (the squared deviations named as the user's x: a message about the reduction names x, as ml.mean's copy does)
  sq = ew.binary(dataclasses.replace(cx, name=x.name or cx.named(x)), ew.BinOp.MUL, c, c)
  ss = reduce(cx, ReduceKind.SUM, sq, axis, keepdims, what)
  return rehint(cx, ew.binary(cx, ew.BinOp.DIV, ss, float(n - ddof) if n > ddof else math.nan), x, axis, what), out


def _masked_variance(cx, y, where, axis, ddof, keepdims, what):
  """jnp.var(y, axis, ddof, where=m) of a float32 `y`: the squared deviations from the masked mean that the
  mask keeps, summed, over the count it keeps less ddof (NaN where that is not positive, as jnp's)."""
  kept = kept_only(cx, y, where, 0.0, what, axis=axis)
  ones = kept_only(cx, ew.full_(cx, y.type.shape, 1.0, DType.f32), where, 0.0, what)
  mu = ew.binary(cx, ew.BinOp.DIV, reduce(cx, ReduceKind.SUM, kept, axis, True, what),
                 reduce(cx, ReduceKind.SUM, ones, axis, True, what))
  c = ew.binary(cx, ew.BinOp.SUB, y, mu)
  ss = reduce(cx, ReduceKind.SUM, kept_only(cx, ew.binary(cx, ew.BinOp.MUL, c, c), where, 0.0, what), axis, keepdims,
              what)
  den = ew.binary(cx, ew.BinOp.SUB, reduce(cx, ReduceKind.SUM, ones, axis, keepdims, what), float(ddof))
  return ew.where_(cx, ew.compare(cx, ew.CmpOp.GT, den, 0.0), ew.binary(cx, ew.BinOp.DIV, ss, den), math.nan)


def _ddof(cx, x, axis, ddof, correction, what):
  """ddof, or jnp's (and the Array API's, torch's) other name for it, `correction=`; not both."""
  if correction is None:
    return ddof
  if ddof != 0:
    ax = "" if axis is None else f", axis={axis!r}"
    raise E.KernelTypeError(f"{what}: ddof and correction are one setting, given both", cx.loc,
                            hint=f"give one: {what}({method_on(cx.named(x))}{ax}, ddof={shown(correction)})")
  return correction


@builtin(methods=("var",))
def var(cx, x, axis=None, ddof=0, keepdims=False, *, correction=None, where=None, dtype=None, mean=None):
  """jnp.var: the mean squared deviation from the mean over `axis`, divided by n - ddof (two
  passes: the mean, then the squares of the deviations); `correction` is jnp's other name for ddof;
  `where=` (a mask that broadcasts to x): of the elements it keeps, n their count; `dtype=`, as jnp's:
  computed in it (float16 and bfloat16 in float32) and given in it; `mean=`, as jnp's: the deviations from
  that mean (computed already, with keepdims=True: `ml.var(v, axis=1, keepdims=True, mean=mu)`)."""
  if dtype is not None:
    y, d = stat_dtype(cx, x, dtype, "ml.var")
    return as_stat_dtype(cx, var.rule(cx, y, axis, ddof, keepdims, correction=correction, where=where, mean=mean), d)
  ddof = _ddof(cx, x, axis, ddof, correction, "ml.var")
  if mean is not None:
    v, out = _about_mean(cx, x, mean, axis, ddof, keepdims, where, "ml.var")
  else:
    v, out = _variance(cx, x, axis, ddof, keepdims, "ml.var", where)
  return v if out == DType.f32 else ew.astype(cx, v, out)


def _about_mean(cx, x, mean, axis, ddof, keepdims, where, what):
  """jnp.var(x, mean=m): the squared deviations of x from the mean given (a tensor that broadcasts to x, or a
  number), summed over `axis` (the elements `where=` keeps), over their count less ddof; NaN where that is not
  positive, as jnp's; (it, the result's dtype)."""
  from .padded_tiles import true_shape
  y, out = _float_operand(cx, x, what)
  check_register_value(cx, mean, what)
  if is_value(mean) and resolve(mean.type.dtype) != DType.f32:
    mean = ew.astype(cx, mean, DType.f32)
  if not isinstance(ddof, int) or isinstance(ddof, bool):
    raise E.KernelTypeError(f"{what}: ddof must be a static int, got {shown(ddof)}", cx.loc,
                            hint=f"{what}({method_on(cx.named(x))}, axis={axis!r}, ddof=1) for the unbiased estimate")
  c = ew.binary(cx, ew.BinOp.SUB, y, mean)
  sq = ew.binary(dataclasses.replace(cx, name=x.name or cx.named(x)), ew.BinOp.MUL, c, c)
  keep = keep_arg(cx, keepdims, what, x, axis)
  if where is None:
    n = math.prod(true_shape(cx.b, y)[a] for a in _axes(cx, axis, len(y.type.shape), what))
    ss = reduce(cx, ReduceKind.SUM, sq, axis, keep, what)
    return ew.binary(cx, ew.BinOp.DIV, ss, float(n - ddof) if n > ddof else math.nan), out
  ones = kept_only(cx, ew.full_(cx, y.type.shape, 1.0, DType.f32), where, 0.0, what)
  ss = reduce(cx, ReduceKind.SUM, kept_only(cx, sq, where, 0.0, what, axis=axis), axis, keep, what)
  den = ew.binary(cx, ew.BinOp.SUB, reduce(cx, ReduceKind.SUM, ones, axis, keep, what), float(ddof))
  return ew.where_(cx, ew.compare(cx, ew.CmpOp.GT, den, 0.0), ew.binary(cx, ew.BinOp.DIV, ss, den), math.nan), out


@builtin(methods=("std",))
def std(cx, x, axis=None, ddof=0, keepdims=False, *, correction=None, where=None, dtype=None, mean=None):
  """jnp.std: the square root of ml.var (`where=` and `mean=` too), taken in its dtype (float16's and bfloat16's
  rounded first, as jnp's); `dtype=`, as jnp's: the square root of ml.var's with that dtype, taken in it."""
  if dtype is not None:
    v = var.rule(cx, x, axis, ddof, keepdims, correction=correction, where=where, dtype=dtype, mean=mean)
    return ew.unary(cx, ew.UnOp.SQRT, v)
  ddof = _ddof(cx, x, axis, ddof, correction, "ml.std")
  if mean is not None:
    v, out = _about_mean(cx, x, mean, axis, ddof, keepdims, where, "ml.std")
  else:
    v, out = _variance(cx, x, axis, ddof, keepdims, "ml.std", where)
  # the square root of the variance in its own dtype, as jnp's lax.sqrt(var(...)): a float16 variance past 65504
  # is inf, and so is its std (probe 56h: the root was taken in float32, 1.06e4 where jnp gives inf)
  return ew.unary(cx, ew.UnOp.SQRT, v if out == DType.f32 else ew.astype(cx, v, out))


def _truth(cx, x, what):
  check_register_value(cx, x, what)
  if not is_value(x):            # a Python number: jnp's any/all of a 0-d array, its truth
    return bool(x)
  return ew.truth(cx, x)


@builtin(methods=("any",))
def any_(cx, x, axis=None, keepdims=False, where=None):
  """jnp.any: whether any element over `axis` is true (nonzero), a bool; `where=`: of the elements it keeps."""
  x = _truth(cx, x, "ml.any")
  x = kept_only(cx, x, where, False, "ml.any", True)
  return reduce(cx, ReduceKind.MAX, x, axis, keep_arg(cx, keepdims, "ml.any", x, axis), what="ml.any")


@builtin(methods=("all",))
def all_(cx, x, axis=None, keepdims=False, where=None):
  """jnp.all: whether every element over `axis` is true (nonzero), a bool; `where=`: of the elements it keeps."""
  x = _truth(cx, x, "ml.all")
  x = kept_only(cx, x, where, True, "ml.all", True)
  return reduce(cx, ReduceKind.MIN, x, axis, keep_arg(cx, keepdims, "ml.all", x, axis), what="ml.all")
