"""The kernel language: what `from mgpu_dsl import language as ml` gives.

The builtins are declared with their op families in frontend/ops/; this module
gathers them, with the dtypes, `ml.constexpr` and `@ml.inline`. Builtins are
recognised while tracing a kernel; calling one from ordinary Python raises a
clear error.
"""
from __future__ import annotations

import functools

from .dtypes import DType
from .pickling import ByReference
from .ops import BUILTINS
from .ops.access import load_ as load, store_ as store
from .ops.atomic import atomic_add, atomic_and, atomic_max, atomic_min, atomic_or, atomic_xor
from .ops.atomic_rmw import atomic_cas, atomic_xchg
from .ops.control import (cluster_sync, debug_barrier, device_assert, grouped_ids, max_constancy, max_contiguous, multiple_of, num_programs,
                           program_id, range, static_assert, static_range)
from .ops.elementwise_fns import (abs_ as abs, arange, bitcast, cast, cdiv, ceil, clip, cos, erf, exp, exp2,
                              floor, full, isnan, log, log2, maximum, minimum, round_ as round, rsqrt,
                              sigmoid, sin, softplus, sqrt, tanh, trunc, where, zeros, zeros_like)
from .ops.fma import fma
from .ops.libdevice import acos, asin, atan, atan2, cbrt, erfc, expm1, fmod, isfinite, isinf, log1p, pow_ as pow, tan
from .ops.memory import DSlice, cluster_ref, ds, smem
from .ops.transfers import copy
from .ops.mma import dot
from .ops.random import (pair_uniform_to_normal, philox_ as philox, rand, rand4x, randint, randint4x, randn, randn4x,
                         uint_to_uniform_float)
from .ops.scan import cummax, cummin, cumprod, cumsum
from .ops.assoc_scan import associative_scan
from .ops.combine_reduce import reduce, xor_sum
from .ops.search import searchsorted
from .ops.segments import bincount, histogram, segment_max, segment_min, segment_prod, segment_sum
from .ops.sort import argsort, sort, top_k, topk
from .ops.reduce import max_ as max, mean, min_ as min, sum_ as sum
from .ops.arg_reduce import argmax, argmin
from .ops.shape import broadcast_to, cat, concatenate, ravel, reshape
from .ops.permute import permute, trans, transpose
from .ops.roll import flip, roll
from .ops.stacking import expand_dims, interleave, join, pad, repeat, split, squeeze, stack
from .ops.stats import all_ as all, any_ as any, log_softmax, logsumexp, softmax, std, var
from .ops.triton_ops import PropagateNan, clamp, div_rn, fdiv, mulhi, swizzle2d, umulhi
from .ops.block_ptrs import advance, make_block_ptr, make_tensor_descriptor

take_along_axis = BUILTINS["take_along_axis"]     # (frontend/ops/gather.py)
gather = BUILTINS["gather"]                       # Triton's tl.gather(src, index, axis): ops/take_along.py
sqrt_rn = BUILTINS["sqrt"]
broadcast = BUILTINS["broadcast"]                 # Triton's tl.broadcast(a, b): ops/shape.py                        # Triton's tl.sqrt_rn: ml.sqrt is the IEEE square root already

from .triton_math import Namespace as _Namespace   # Triton's tl.math, tl.extra.cuda.libdevice (probe 48g)
math = _Namespace("math")
libdevice = _Namespace("libdevice")
extra = _Namespace("extra", cuda=_Namespace("extra.cuda", libdevice=libdevice), libdevice=libdevice)


class Inline(ByReference):     # copied and pickled as a function is
  """A helper function that kernels call; its body is traced into each caller (`@ml.inline`)."""
  pickled_what = "@ml.inline helper"

  def __init__(self, fn):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.parsed = None          # (Source, ast.FunctionDef, scope), parsed on first use
    from .source import snapshot
    snapshot(fn, record=True)   # its text as Python compiled it, however the file changes later

  def __repr__(self):
    return f"<mgpu_dsl inline function {self.fn.__qualname__}>"

  def __call__(self, *args, **kwargs):
    from . import errors as E
    from .loc import outside_loc
    raise E.KernelTypeError(f"{self.fn.__qualname__} is an @ml.inline helper: call it from an @mgpu_kernel function",
                            outside_loc(), hint=f"call {self.fn.__name__}(...) inside a kernel; its undecorated function"
                                             f" is {self.fn.__name__}.fn")

  def __get__(self, obj, objtype=None):
    """A helper that is a method: `self.step(v)` (or `model.step(v)`) passes the instance as its first
    argument, a static value while tracing, as Python binds a method."""
    return self if obj is None else BoundInline(self, obj)


class BoundInline(Inline):
  """An `@ml.inline` method read from an instance: the helper, and the instance it passes first."""

  def __init__(self, helper: Inline, obj):
    functools.update_wrapper(self, helper.fn)
    self.helper, self.obj, self.fn = helper, obj, helper.fn

  @property
  def parsed(self):
    return self.helper.parsed

  @parsed.setter
  def parsed(self, value):
    self.helper.parsed = value


def inline(fn):
  """Make `fn` a helper that kernels can call; it is inlined where it is called.

      @ml.inline
      def load_tile(ref, i, rows):
          buf = ml.smem((rows, ref.shape[1]))
          ml.copy(ref.at[ml.ds(i * rows, rows)], buf)
          return buf

  Its body follows the kernel language; `return` may only end it.
  """
  from .inline import LocalFunction
  if isinstance(fn, LocalFunction):     # ml.inline(lambda v: ...) in a kernel's body: a helper already
    return fn
  if isinstance(fn, functools.partial):  # ml.inline(functools.partial(leaky, slope=0.1)): a partial of the helper
    return functools.partial(inline(fn.func), *fn.args, **fn.keywords)
  return fn if isinstance(fn, Inline) else Inline(fn)     # (decorated twice: the same helper)


class _Constexpr:
  """Annotation: `def k(x, out, *, n: ml.constexpr)` makes `n` a compile-time constant.

  Called, as Triton's globals are wrapped (`EPS = ml.constexpr(1e-5)`), it is the value itself: a
  module constant is static in a kernel already."""

  def __repr__(self):
    return "ml.constexpr"

  def __call__(self, value):
    return value


constexpr = _Constexpr()


class _Scalar:
  """Annotation: `def k(x, alpha: ml.scalar, out)` passes `alpha` (a Python number or a 0-d
  array) as a run-time scalar: one compiled kernel serves every value."""

  def __repr__(self):
    return "ml.scalar"


scalar = _Scalar()

# dtypes, so kernels can say ml.float16 without importing jax.numpy.
float32, float16, bfloat16 = DType.f32, DType.f16, DType.bf16
float8_e4m3fn, float8_e5m2 = DType.f8e4m3, DType.f8e5m2
int64, int32, int16, int8 = DType.i64, DType.i32, DType.i16, DType.i8
uint32, uint16, uint8, bool_ = DType.u32, DType.u16, DType.u8, DType.bool_
# Triton's names of the same types, as a ported kernel writes them (`x.to(tl.float8e4nv)`, `m.to(tl.int1)`)
float8e4nv, float8e5, int1 = DType.f8e4m3, DType.f8e5m2, DType.bool_
# Pallas's other name of its dynamic slice (pl.dslice is pl.ds), as a port spelt with ml. writes it
dslice = ds


def debug_print(fmt, *args):
  """Pallas's `pl.debug_print(fmt, *args)` as a port spelt with ml. writes it: in a kernel,
  `print(fmt.format(*args))` (frontend/trace_debug.py), per program in interpret mode and on the GPU."""
  from . import errors as E
  from .loc import outside_loc
  err = E.KernelTypeError("ml.debug_print can only be used inside an @mgpu_kernel function", outside_loc(),
                          hint="call it in a kernel's body (or an @ml.inline helper's); outside, jax.debug.print")
  err.outside_kernel = True       # (a helper of static arguments printing: traced instead, calls.static_call)
  raise err

def _outside(name, hint):
  from . import errors as E
  from .loc import outside_loc
  err = E.KernelTypeError(f"ml.{name} can only be used inside an @mgpu_kernel function", outside_loc(), hint=hint)
  err.outside_kernel = True
  raise err


def static_print(*values, sep=" ", end="\n", file=None, flush=False):
  """Triton's `tl.static_print(...)`: in a kernel, Python's `print(...)` of its values while the kernel is traced
  (static values print then; a register value as its type, `tensor<256, float32>`, as Triton prints its type) (probe 60b)."""
  _outside("static_print", "call it in a kernel's body; outside, Python's print")


def device_print(prefix, *args, hex=False):
  """Triton's `tl.device_print(prefix, *args)`: in a kernel, `print(prefix, *args)`, per program in interpret mode
  and on the GPU (frontend/trace_debug.py); `hex=True` is an error whose hint formats the bits (probe 60b)."""
  _outside("device_print", "call it in a kernel's body; outside, jax.debug.print")


def assume(cond):
  """Triton's `tl.assume(cond)`: a fact the compiler may use; here its condition is traced and checked to be a
  boolean (a comparison), and nothing else: no code depends on it (probe 60b)."""
  _outside("assume", "call it in a kernel's body")


# Every builtin (frontend/ops/ declares them; each is imported above by its name) and the rest of `ml.`.
__all__ = [
    "abs", "acos", "advance", "all", "any", "arange", "argmax", "argmin", "argsort", "asin", "associative_scan",
    "atan", "atan2", "atomic_add", "atomic_and", "atomic_cas", "atomic_max", "atomic_min", "atomic_or",
    "atomic_xchg", "atomic_xor", "bincount", "bitcast", "broadcast", "broadcast_to", "cast", "cbrt", "cdiv", "ceil", "clamp",
    "cat", "clip", "cluster_ref", "cluster_sync", "concatenate", "copy", "cos", "cummax", "cummin", "cumprod", "cumsum",
    "debug_barrier", "device_assert", "div_rn", "dot", "ds", "erf", "erfc", "exp", "exp2", "expand_dims", "expm1", "fdiv", "flip",
    "floor", "fma", "fmod", "full", "gather", "grouped_ids", "histogram", "interleave", "isfinite", "isinf", "isnan", "join",
    "load", "log", "log1p", "log2", "log_softmax", "logsumexp", "make_block_ptr", "make_tensor_descriptor", "max",
    "max_constancy", "max_contiguous", "maximum", "mean", "min", "minimum", "mulhi", "multiple_of", "num_programs",
    "pad", "pair_uniform_to_normal", "permute", "philox", "pow", "program_id", "rand", "rand4x", "randint",
    "randint4x", "randn", "randn4x", "range", "ravel", "reduce", "repeat", "reshape", "roll", "round", "rsqrt",
    "searchsorted", "segment_max", "segment_min", "segment_prod", "segment_sum", "sigmoid", "sin", "smem",
    "softmax", "softplus", "sort", "split", "sqrt", "sqrt_rn", "squeeze", "stack", "static_assert", "static_range", "std",
    "store", "sum", "swizzle2d", "take_along_axis", "tan", "tanh", "top_k", "topk", "trans", "transpose", "trunc",
    "uint_to_uniform_float", "umulhi", "var", "where", "xor_sum", "zeros", "zeros_like"] + [
    "DSlice", "Inline", "inline", "constexpr", "scalar", "float32", "float16", "bfloat16", "float8_e4m3fn",
    "float8_e5m2", "int64", "int32", "int16", "int8", "uint32", "uint16", "uint8", "bool_", "float8e4nv",
    "float8e5", "int1", "dslice", "debug_print", "static_print", "device_print", "assume", "PropagateNan"]
if set(BUILTINS) - set(__all__):     # a builtin declared in frontend/ops/ and not exported here
  raise ImportError(f"frontend/language.py does not export {sorted(set(BUILTINS) - set(__all__))}: import them and"
                    " name them in __all__")
