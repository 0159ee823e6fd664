"""Triton's math namespaces and dtype attributes in a ported kernel (probe 48g).

Liger's and flash-linear-attention's kernels write `tl.math.tanh(x)`, `tl.math.exp2(x)`, `tl.math.rsqrt(x)` and
`tl.extra.cuda.libdevice.tanh(x)` (or `tl.extra.libdevice`), and `x_ptr.dtype.element_ty` for the element type
of a pointer; each was MG002 with a hint naming the one thing it means. `ml.math`, `ml.libdevice` and
`ml.extra.cuda.libdevice` are now namespaces whose functions are the ml functions of the same meaning (`tanh` is
`ml.tanh`; Triton's other names of one, `fabs`, `fast_logf`, `sqrt_rn`, `finitef`, are mapped). A libdevice
function whose meaning differs from ml's namesake is not mapped to it: `fmax` / `fmin` (a number over NaN) are jnp's,
with the other libdevice names of library functions (libdevice_math.ALIASES); `round` (libdevice rounds halves away
from zero, ml.round to even) is its own function, `triton_ops.ROUND_AWAY` (probe 57c; it was MG002 with a hint).
"""
from __future__ import annotations

# Triton's tl.math / libdevice names for ml functions of the same meaning under another name
SAME = {"fabs": "abs", "max": "maximum", "min": "minimum", "clamp": "clip", "finitef": "isfinite",
        "isfinited": "isfinite", "fast_logf": "log", "fast_log2f": "log2", "fast_sinf": "sin", "fast_cosf": "cos",
        "fast_tanf": "tan", "sqrt_rn": "sqrt", "fast_expf": "exp", "fast_exp2f": "exp2", "rint": "round",
        "nearbyint": "round", "powf": "pow", "exp2f": "exp2", "expf": "exp", "logf": "log", "sqrtf": "sqrt",
        "rsqrtf": "rsqrt", "tanhf": "tanh", "erff": "erf", "fdiv_rn": "div_rn", "div_rn": "div_rn",
        "umulhi": "umulhi", "mulhi": "mulhi"}
SAME.update({"fma_rn": "fma", "fmaf": "fma", "fmaf_rn": "fma"})      # x * y + z rounded once (probe 70b)
SAME["fast_powf"] = "pow"                        # (libdevice's powf: session 60, MG002 whose hint named ml.pow)
_STAND_INS: dict = {}


def _bits_stand_in(name):
  """A function standing for libdevice's integer intrinsic `name` (popc, clz, ffs, brev, byte_perm, hadd, ...:
  libdevice_bits.py's forms, probe 71b); of Python ints it computes CUDA's result while tracing."""
  key = f"libdevice.{name}"
  if key not in _STAND_INS:
    from .libdevice_bits import PARAMS, static

    def fn(*args):
      if not all(isinstance(a, int) for a in args):
        raise TypeError(f"libdevice.{name} takes integers")
      return static(name, *args)
    _register(fn, key, ("libdevice", name), "mgpu_dsl.libdevice", PARAMS[name])
  return _STAND_INS[key]


def _math_stand_in(name):
  """A function standing for libdevice's `name` (libdevice_math.py): traced as the library function of the same
  meaning (its ALIASES: jnp.sinh, jax.scipy.special.erfinv, jnp.add for add_rn, ...) or as its own form; of Python
  numbers CUDA's float32 result."""
  key = f"libdevice.{name}"
  if key not in _STAND_INS:
    from . import libdevice_math as lm
    from .jnp_calls import SHAPED
    lib = lm.ALIASES.get(name, ("libdevice", name))
    params = SHAPED[lib][0] if lib in SHAPED else lm.PARAMS.get(name)     # (None: a ufunc's *args, jnp.add's)

    def fn(*args):
      return lm.static(name, *args)
    # (jnp's: a static array's call, as jnp's own functions; libdevice_math's forms: a library function's hints)
    _register(fn, key, lib, "jax.numpy" if lib[0] == "jnp" else "mgpu_dsl.libdevice", params)
  return _STAND_INS[key]


def _register(fn, key, lib, module, params):
  from .jnp_calls import STAND_INS
  fn.__name__ = fn.__qualname__ = lib[1]
  fn.__module__ = module           # (a library function to the calls' hints: a ref read first, jnp's arity)
  if params:
    import inspect
    fn.__signature__ = inspect.Signature(
        [inspect.Parameter(n, inspect.Parameter.POSITIONAL_ONLY) for n in params])
  STAND_INS[fn] = lib
  _STAND_INS[key] = fn


class Namespace:
  """`ml.math`, `ml.libdevice`, `ml.extra`, `ml.extra.cuda`: Triton's namespaces of math functions, whose
  attributes are the ml functions of the same meaning (`inner`: the namespaces below this one)."""

  def __init__(self, name, **inner):
    self.__name__ = f"ml.{name}"
    self._inner = inner

  def __repr__(self):
    return f"<Triton's tl.{self.__name__[3:]}: ml's functions>"

  def __getattr__(self, attr):
    if attr.startswith("__") or attr == "_inner":
      raise AttributeError(attr)
    if attr in self._inner:
      return self._inner[attr]
    fn = function(attr)
    if fn is None:
      raise AttributeError(f"{self.__name__} has no attribute {attr!r}")
    return fn

  def __dir__(self):
    return list(self._inner)


def function(attr):
  """The ml builtin Triton's math function `attr` is, or None."""
  from .ops import BUILTINS
  from . import libdevice_math
  if attr in libdevice_math.ALIASES or attr in libdevice_math.NAMES:    # sinh, erfinv, float2int_rn, ... (session 60)
    return _math_stand_in(attr)
  from .libdevice_bits import NAMES
  if attr in NAMES:                    # popc, clz, ffs, brev, byte_perm, hadd, ...: composed (probe 71b)
    return _bits_stand_in(attr)
  if attr == "round":                  # halves away from zero, not ml.round's to even (probe 57c)
    from .ops.triton_ops import ROUND_AWAY
    return ROUND_AWAY
  return BUILTINS.get(SAME.get(attr, attr))


def dtype_attr(base, attr):
  """Triton's attributes of a dtype, on `x.dtype` (numpy's dtype in a kernel): `element_ty` (a pointer's
  element type, which a ref's dtype is already) and `primitive_bitwidth`; `(value,)`, or None for others."""
  import numpy as np
  if not isinstance(base, np.dtype):
    return None
  if attr == "element_ty":
    return (base,)
  if attr == "primitive_bitwidth":
    return (8 * base.itemsize if base.kind != "b" else 1,)
  return None


class TritonType:
  """Triton's `x.type` of a ref or register value (probe 49h): `Out.type.element_ty` (the tutorials' fused
  attention stores `acc.to(Out.type.element_ty)`) and `x.type.scalar.element_ty` are the element dtype (numpy's,
  as `x.dtype`); `.shape` the shape."""

  def __init__(self, element_ty, shape, pointer):
    self.element_ty, self.shape, self._pointer = element_ty, shape, pointer

  @property
  def scalar(self):
    return self

  def is_ptr(self):
    return self._pointer

  def __repr__(self):
    return f"<Triton's type of {'a ref' if self._pointer else 'a value'} of {self.element_ty}>"
