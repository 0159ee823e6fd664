"""A jnp, jax.nn or jax.lax call in a kernel (calls.py's Calls.call asks first): of register values, computed as its
ml.* namesake, jax.nn's formula or lax's form (jnp_calls.py), a builder of a tensor (jnp.zeros) as ml.full, a
product of tiles as ml.dot (jnp_dots.py), a sized call (jnp_sized.py); _NOT_MAPPED for the calls it does not map."""
from __future__ import annotations

import ast
import inspect

from . import errors as E
from .assign import holds_value
from .dtypes import DType
from .ops import elementwise as ew
from .ops.base import BUILTINS, Builtin, is_value
from .ops.weak_lattice import PROMOTING, weak_to_join
from .types import RefType, resolve

_NOT_MAPPED = object()
_BUILDERS = ("zeros", "ones", "full", "arange", "broadcasted_iota", "iota", "eye", "identity", "tri", "indices")


def jnp_call(tracer, node, fn, args, kwargs, cx):
  """A jnp / jax.nn / jax.lax function of register values (or a builder of a tensor, jnp.zeros) computed as
  its ml.* namesake or jax.nn's formula (jnp_calls.py); _NOT_MAPPED for other calls."""
  from . import jnp_calls, jnp_moves
  from .calls import _Method, _tuples     # (calls.py imports this module)
  from .jnp_forms import numpy_twin
  if not isinstance(fn, (Builtin, _Method)):
    from .ufunc_reduce import ufunc_method
    if (got := ufunc_method(tracer, node, fn, args, kwargs)) is not None:
      return got             # jnp.add.reduce(v, axis=1), np.maximum.accumulate(v, axis=1): ufunc_reduce.py
  lib = jnp_calls.library(fn) if not isinstance(fn, (Builtin, _Method)) else None
  if lib is not None and lib[0] == "jnp" and lib[1] in PROMOTING:
    args = weak_to_join(cx, args)    # jnp.dot(w, x_bf16) of a weak float32 w: bfloat16, as jnp promotes first
  if lib is not None and not any(isinstance(a, ast.Starred) for a in node.args) and len(args) == len(node.args):
    from .jnp_dots import library_product
    if (got := library_product(tracer, node, lib, args, kwargs)) is not None:
      return got             # jnp.dot(q, k.T), jnp.einsum('qd,kd->qk', q, k), lax.dot_general: ml.dot
  if not isinstance(fn, (Builtin, _Method)) and (twin := numpy_twin(fn, args, kwargs)) is not None:
    try:                  # np.exp(v) of a register value: as jnp.exp(v), named as written
      return jnp_call(tracer, node, twin, args, kwargs, cx)
    except E.KernelError as e:
      name = getattr(twin, "__name__", "")
      e.message, e.hint = (t.replace(f"jnp.{name}", f"np.{name}") if t else t for t in (e.message, e.hint))
      e.args = (e.message,)
      raise
  from .jnp_sized import FORMS as SIZED, sized
  if isinstance(fn, (Builtin, _Method)) or not callable(fn) or not jnp_calls.maps(fn) and not (
      jnp_calls.library(fn) == ("jnp", "ones")) and jnp_calls.library(fn) not in SIZED:
    return _NOT_MAPPED
  lib, name = jnp_calls.library(fn)
  from .libdevice_bits import NAMES as BIT_NAMES
  if lib == "libdevice" and name in BIT_NAMES:     # libdevice.popc(x_ref), of floats, of int8: its words
    from .libdevice_bits import check
    check(tracer, node, cx, name, list(args))
  flat = [x for a in list(args) + list(kwargs.values()) for x in (a if isinstance(a, (tuple, list)) else (a,))]
  if any(is_value(a) and isinstance(a.type, RefType) for a in flat) and not (
      lib == "jnp" and name in ("zeros_like", "ones_like", "full_like") and not kwargs.get("shape")):
    return _NOT_MAPPED       # jnp.transpose(k_s) of a ref: its own hint (ml.* take register values); the
                             # builders of a ref's shape and dtype (Pallas's jnp.zeros_like(acc_ref)) run
  if not any(holds_value(a) for a in list(args) + list(kwargs.values())) and (
      name not in _BUILDERS or (args[0] if args else kwargs.get("shape")) in ((), [])):
    return _NOT_MAPPED       # jnp.sqrt(2.0), jnp.zeros(()) of static values: a number, computed now
  if (got := sized(tracer, cx, node, fn, lib, name, args, kwargs)) is not None:
    return got             # jnp.repeat(ids, lens, total_repeat_length=t), jnp.unique(e, size=8): jnp_sized.py
  if (lib, name) in SIZED and not jnp_calls.maps(fn):
    return _NOT_MAPPED       # (jnp.unique without size=: its MG003)
  if name == "ones":
    try:
      bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
      return _NOT_MAPPED
    shape, dtype = bound.arguments.get("shape"), bound.arguments.get("dtype")
    # (float32 where the dtype is left out, strongly typed as jnp.ones's: v_bf16 * jnp.ones(s) is float32)
    return BUILTINS["full"].apply(cx, [_tuples(shape), 1], {"dtype": DType.f32 if dtype is None else dtype})
  if lib == "jnp" and name in jnp_calls.BINARY_INEXACT:
    args, kwargs = jnp_calls.inexact_operands(cx, args, kwargs)     # jnp.arctan2 of int32 tiles: float32
  if lib == "jnp" and name in jnp_calls.NUMBER_OPERANDS:
    args, kwargs = jnp_calls.number_operands(cx, name, args, kwargs)   # jnp.copysign(1.0, v): v's dtype and shape
  if lib == "jnp" and name in jnp_moves.JOINS:
    args, kwargs = jnp_moves.promoted_parts(cx, name, args, kwargs)   # jnp.concatenate([a_bf16, b_f32]): float32
  if jnp_calls._form(lib, name) is not None and name not in jnp_calls.MAPPED.get(lib, {}):
    out = jnp_calls.formula(tracer, cx, node, fn, args, kwargs)
    _weak_like(cx, lib, name, args, kwargs, out)
    return _NOT_MAPPED if out is None else out
  from .jnp_forms import _kind
  if lib == "jnp" and name in ("power", "pow") and len(args) == 2 and not kwargs and any(
      is_value(a) for a in args) and all(_kind(a) in ("int", "bool") for a in args):
    # jnp's integer power (x ** n, binary exponentiation wrapping in the dtype), not XLA's float pow
    return jnp_calls.trace_form(tracer, node, "{0} ** {1}", list(args))
  got = jnp_calls.bind(cx, fn, args, kwargs)
  if got is None:
    return _NOT_MAPPED
  ml_name, pos, kw = got
  if lib != "jax.lax" and ml_name in jnp_calls.INEXACT and pos and is_value(pos[0]) and getattr(
      resolve(pos[0].type.dtype), "is_float", True) is False:
    weak = pos[0].id in cx.b.weak
    pos[0] = ew.astype(cx, pos[0], DType.f32)       # jnp.exp of int32 or bool values: float32, as jnp's
    if weak:
      cx.b.weak.add(pos[0].id)    # of a weak int32 (jnp.where(m, 4, 1)) a weak float32: x_f16 + it is float16
  try:
    out = BUILTINS[ml_name].apply(cx, [_tuples(a) for a in pos], {k: _tuples(v) for k, v in kw.items()})
    d = resolve(pos[0].type.dtype) if pos and is_value(pos[0]) else None
    if ml_name in ("cumsum", "cumprod") and isinstance(d, DType) and d.is_int and d.bits < 32 and is_value(out) \
        and resolve(out.type.dtype) != d:
      out = ew.astype(cx, out, d)      # jnp's and lax's scans keep an 8- or 16-bit dtype (wrapping), ml's widen
    if ml_name in _STRONG and is_value(out) and out.id in cx.b.weak:
      out = ew.astype(cx, out, resolve(out.type.dtype))   # jnp.sum(w) of a weak scalar is strong, as jnp's (probe 65a)
    return out
  except E.KernelError as e:     # "ml.cumsum of a 2-D tensor needs an axis": named as the user wrote it
    if e.loc == cx.loc and e.message.startswith((f"ml.{ml_name} ", f"ml.{ml_name}:")):   # ("ml.sum: axis 3 ...")
      e.message = f"{lib}.{name} (as ml.{ml_name}){e.message[len(ml_name) + 3:]}"
      e.args = (e.message,)
    raise


_STRONG = ("sum", "max", "min", "prod", "mean", "argmax", "argmin", "cumsum", "cumprod", "cummax", "cummin")


def _weak_like(cx, lib, name, args, kwargs, out) -> None:
  """jnp.zeros_like / ones_like / full_like of a weakly typed value without a dtype are weakly typed, as jnp's
  (`jnp.zeros_like(jnp.where(m, 1, 2)) + x_i16` is int16; probe 65a: they were strong int32)."""
  if lib != "jnp" or name not in ("zeros_like", "ones_like", "full_like") or not is_value(out):
    return
  a = args[0] if args else kwargs.get("a")
  if kwargs.get("dtype") is None and len(args) < (3 if name == "full_like" else 2) and is_value(a) \
      and a.id in cx.b.weak and resolve(out.type.dtype) == resolve(a.type.dtype):
    cx.b.weak.add(out.id)
