"""How an op family declares its `ml.` builtins, and the checks every family shares.

A builtin is one Python function: its signature is what users call (arguments are
bound by Python's own rules, so a missing or misspelled keyword gets the usual
message at the user's line), its docstring is the user documentation, and its body
is the type rule: it receives a `Call` (the builder and the call's location) first
and appends typed ops.

    @builtin
    def exp(cx, x):
        '''Elementwise e**x (floating point).'''
        return unary(cx, UnOp.EXP, x)

Called outside a kernel it raises a clear error.
"""
from __future__ import annotations

import inspect
import re

import numpy as np

from .. import errors as E
from .. import ir
from ..dtypes import DType, to_dtype, to_dtype_name
from ..types import RefType, ScalarType, TensorType, resolve

BUILTINS: dict[str, "Builtin"] = {}     # ml.<name> -> builtin
METHODS: dict[str, "Builtin"] = {}      # register tensor methods: x.<name>(...) -> builtin(x, ...)
REF_METHODS: dict[str, "Builtin"] = {}  # ref methods: ref.<name>(...) -> builtin(ref, ...)

Num = (int, float, bool)


class _ScalarMethods:
  """What a NumPy scalar's methods give, on the typed number that stands for it in a kernel (probe 57c: a module's
  `FP8_MAX = jnp.finfo(jnp.float8_e4m3fn).max`, then `FP8_MAX.astype(jnp.float32)` or `FP8_MAX.item()`, was MG002
  "has no attribute"): `.astype(dtype)` the number converted as NumPy converts it (a typed number of that dtype),
  `.item()` and `.tolist()` the plain Python number (weakly typed)."""

  def astype(self, dtype, copy=True):
    import numpy as np
    d = to_dtype(dtype)
    with np.errstate(all="ignore"):
      return typed_number(np.asarray(self.item(), self.dtype.np).astype(d.np if d is not None else np.dtype(dtype))[()])

  def item(self):
    return float(self) if isinstance(self, float) else int(self)

  tolist = item
  shape, ndim, size = (), 0, 1       # a NumPy scalar's (probe 65a: `c.shape` of `c = np.float32(2)` was MG002)


class TypedFloat(_ScalarMethods, float):
  """A NumPy or JAX float scalar (`jnp.float32(c)`, a module's `np.float16` constant) as the
  kernel sees it: a Python float that remembers its dtype. Where a Python number would take a
  register value's dtype (weak typing), this one, like jnp's strongly typed scalars, must match
  it: dtypes are never converted implicitly (elementwise.common)."""
  dtype: DType


class TypedInt(_ScalarMethods, int):
  """A NumPy or JAX integer scalar (`jnp.int32(c)`): TypedFloat's rule for integers."""
  dtype: DType


def typed_number(v):
  """The Python number a 0-d NumPy or JAX value holds; float and integer ones (not bools)
  remember their dtype (TypedFloat, TypedInt)."""
  x = v.item()
  d = to_dtype(getattr(v, "dtype", None))
  if d is None or isinstance(x, bool) or not (d.is_float or d.is_int):
    return x
  out = (TypedFloat if isinstance(x, float) else TypedInt)(x)
  out.dtype = d
  return out


def typed_op(f, *operands):
  """`f`, or where an operand is a NumPy or JAX scalar, `f` computed as NumPy computes it (typed_arith)."""
  if any(isinstance(x, (TypedInt, TypedFloat)) for x in operands):
    return lambda *xs: typed_arith(f, *xs)
  return f


def typed_arith(f, *operands):
  """`f` of static numbers, one of them a NumPy or JAX scalar (a TypedInt or TypedFloat), as NumPy (and eager
  jnp) compute it: in the scalar's dtype, wrapping (`np.uint8(7) ** 3` is uint8 87, not the Python int 343;
  `-np.int32(5)` an int32), the result typed (probe 65a: it was a weak Python number)."""
  import numpy as np
  with np.errstate(all="ignore"):
    out = f(*_as_numpy(operands))
  return typed_number(out) if isinstance(out, np.generic) else out


def numpy_scalars(fn, args):
  """`args` of a static call of a NumPy or JAX function with its NumPy and JAX scalars as NumPy's, so that it sees
  their dtype (probe 65a: `jnp.sign(np.uint8(7))` was int32 and `jnp.square(jnp.bfloat16(1.5))` float32, as of the
  Python numbers they were passed as)."""
  if not (getattr(fn, "__module__", None) or "").startswith(("jax", "numpy")):
    return args
  return _as_numpy(args)


def _as_numpy(values):
  """`values` with each NumPy or JAX scalar (a TypedInt or TypedFloat) as the NumPy scalar it stands for."""
  import numpy as np
  return [np.asarray(x, x.dtype.np)[()] if isinstance(x, (TypedInt, TypedFloat)) else x for x in values]


def static_number(v):
  """A NumPy (or ml_dtypes) scalar met while tracing (a module constant, `COEFFS[2]`,
  `jnp.finfo(x.dtype).min`), or a concrete 0-d array (`TABLE[k]` of a module's JAX array), as the
  typed Python number it holds; any other value unchanged."""
  import numpy as np
  if isinstance(v, np.generic) and hasattr(v, "item"):
    return typed_number(v)
  traced = any(c.__name__.endswith("Tracer") for c in type(v).__mro__)
  zero_d = not traced and getattr(v, "shape", None) == () and hasattr(v, "item") and hasattr(v, "dtype")
  return typed_number(v) if zero_d else v


class Builtin:
  """A DSL function (`ml.<name>`)."""

  def __init__(self, fn, name: str, eager: bool = False):
    self.rule = fn
    self.eager = eager          # also callable outside kernels, on Python values (ml.cdiv in a grid)
    self.__name__ = name
    self.__qualname__ = f"ml.{name}"
    self.__doc__ = fn.__doc__
    self.__module__ = "mgpu_dsl.language"
    sig = inspect.signature(fn)
    self.__signature__ = sig.replace(parameters=list(sig.parameters.values())[1:])

  def __repr__(self):
    return f"<mgpu_dsl builtin ml.{self.__name__}>"

  def __call__(self, *args, **kwargs):
    if self.eager:
      from ..builder import Call
      from ..loc import UNKNOWN
      return self.rule(Call(None, UNKNOWN), *args, **kwargs)
    from ..loc import outside_loc
    err = E.KernelTypeError(f"ml.{self.__name__} can only be used inside an @mgpu_kernel function", outside_loc(),
                            hint="call it in a kernel's body (or an @ml.inline helper's); outside, use jax.numpy")
    err.outside_kernel = True     # (a kernel's helper called on static values retries it traced: calls.static_call)
    raise err

  def bind(self, cx, args, kwargs):
    """Bind the user's arguments by Python's rules; a mismatch is a KernelTypeError at the call."""
    if self.__name__ in ("load", "store") and any(k in _CACHE_ONLY for k in kwargs):
      kwargs = {k: v for k, v in kwargs.items() if not cache_only(self.__name__, k, v)}    # (probe 48g)
    if self.__name__ in ("load", "store") and len(args) >= 2:
      from .arith_hints import is_index, pallas_access_error
      if is_index(args[1]):            # Pallas's pl.load(x_ref, idx, mask=m): the window is x_ref.at[idx]
        raise pallas_access_error(cx, self.__name__, len(args))
    if self.__name__ in ("atomic_add", "atomic_max", "atomic_min", "atomic_and", "atomic_or", "atomic_xor",
                         "atomic_xchg") and len(args) == 3:
      from .atomic_fetch import pallas_target
      if (target := pallas_target(cx, args)) is not None:     # Pallas's pl.atomic_add(x_ref, idx, val)
        args = [target, args[2]]
    if "keep_dims" in kwargs and "keepdims" in self.__signature__.parameters and "keepdims" not in kwargs:
      kwargs = {("keepdims" if k == "keep_dims" else k): v for k, v in kwargs.items()}    # Triton's spelling
    for k, to in getattr(self.rule, "aliases", {}).items():     # a library's own name for a parameter (Triton's)
      if k in kwargs and to not in kwargs:
        kwargs = {(to if a == k else a): v for a, v in kwargs.items()}
    try:
      return self.__signature__.bind(*args, **kwargs)
    except TypeError as e:
      e = bind_message(self.__signature__, kwargs, e)
      refused = getattr(self.rule, "refused", ())     # taken only to be refused with a message of its own
      shown = self.__signature__.replace(
          parameters=[p for p in self.__signature__.parameters.values() if p.name not in refused])
      meant = near_keyword(shown, kwargs) or next(((k, _ALIASES[k]) for k in kwargs if k in _ALIASES
                                                   and k not in shown.parameters and _ALIASES[k] in shown.parameters), None)
      dropped = [k for k in kwargs if k in _CACHE_HINTS and k not in shown.parameters]
      trans = [k for k in ("trans_a", "trans_b") if kwargs.get(k) is True and self.__name__ == "dot"]
      if trans:        # Triton 2's tl.dot(a, b, trans_b=True)
        ops = [cx.named(v, n) for v, n in zip(list(args) + [None] * (2 - len(args)), ("a", "b", "acc"))]
        ops = [o + ".T" if i < 2 and f"trans_{'ab'[i]}" in trans else o for i, o in enumerate(ops)]
        meant = None
      # (argmax's and argmin's tie_break_left=, like max's return_indices=, are triton_index_hint's)
      triton = "".join(_TRITON_KW[k].format(f=self.__name__) + "; " for k in kwargs
                       if k in _TRITON_KW and k not in shown.parameters
                       and not (k == "tie_break_left" and self.__name__ in ("argmax", "argmin")))
      raise E.KernelTypeError(f"ml.{self.__name__}: {e}", cx.loc,
                              hint=(f"write {' and '.join(f'{b}= for {a}=' for a, b in renames(shown, kwargs, meant))}: "
                                    if meant else "")
                              + (f"pass the transposed view instead of {'= and '.join(trans)}=: ml.dot({', '.join(ops)})"
                                 f" (no data moves); " if trans else
                                 f"drop {'= and '.join(dropped)}= (Triton's memory options; kernels take none): "
                                 if dropped else "")
                              + triton + jnp_keyword_hint(cx, self.__name__, self.__signature__, args, kwargs)
                              + f"ml.{self.__name__}{shown}") from None

  def apply(self, cx, args, kwargs):
    bound = self.bind(cx, args, kwargs)
    out = self.rule(cx, *bound.args, **bound.kwargs)
    if self.__name__ in KEEPS_WEAK and bound.args and cx.b is not None:
      x = bound.args[0]
      keep_weak(cx.b, list(x) if isinstance(x, (list, tuple)) else [x], out)
    from .default_ints import mark
    return mark(cx.b, self.__name__, out, bound.args)      # jnp.argmax's index: jnp's int64 under x64 (ops/default_ints.py)


# Builtins whose result holds their operand's elements, moved: jnp keeps a weakly typed operand's
# weak type through them (ml.where(m, 1.0, 0.5).reshape(8, 16) * x_f16 is float16, as in jnp).
KEEPS_WEAK = frozenset({"broadcast_to", "reshape", "transpose", "concatenate", "flip", "roll", "sort"})


def keep_weak(b, sources, out):
  """`out`, weakly typed (in `b.weak`) where every register value of `sources` is and it has
  their dtype: a shape op (reshape, broadcast, transpose, an index, a flip) of a weakly typed value."""
  vals = [v for v in sources if is_value(v)]
  if b is not None and vals and is_value(out) and all(v.id in b.weak for v in vals) \
      and resolve(out.type.dtype) == resolve(vals[0].type.dtype):
    b.weak.add(out.id)
  if b is not None and vals and is_value(out) and all(v.id in b.default_ints for v in vals) \
      and resolve(out.type.dtype) == resolve(vals[0].type.dtype):
    b.default_ints.add(out.id)      # (an index jnp gives as int64, moved: ops/default_ints.py)
  return out


_ALIASES = {"dim": "axis", "keepdim": "keepdims", "input": "x", "pointer": "ref"}     # torch's (and Triton's) keywords
_TRITON_KW = {     # Triton keywords whose behaviour is the only one here
    "tie_break_left": ("drop tie_break_left= (the index is the first one, Triton's tie_break_left=True; for the last,"
                       " x.shape[axis] - 1 - ml.{f}(ml.flip(x, axis), axis))"),
    "propagate_nan": "drop propagate_nan= (NaN always propagates, Triton's PropagateNan.ALL)",
    "can_reorder": "drop can_reorder= (a reshape keeps the elements' row-major order, Triton's can_reorder=False)"}
_CACHE_HINTS = ("eviction_policy", "cache_modifier", "volatile", "sem", "scope")
# Triton's cache options of tl.load / tl.store that only tune caching (Liger's and Unsloth's evict_first /
# evict_last, .cg): taken and dropped, as the hardware's caches are the compiler's to use. `.cv` (fetch again: a
# cross-program protocol) and volatile=True keep their hint.
_CACHE_ONLY = {"eviction_policy": ("", "evict_first", "evict_last", "evict_normal"),
               "cache_modifier": ("", ".ca", ".cg", ".cs", ".lu", ".wb", ".wt"), "volatile": (False,)}


def cache_only(name, key, value) -> bool:
  """Whether `key=value` of ml.load / ml.store (`name`) is one of Triton's options that only tune caching."""
  allowed = _CACHE_ONLY.get(key, ())
  if key == "cache_modifier" and value in (".lu", ".ca") and name == "store" or \
      key == "cache_modifier" and value in (".wb", ".wt") and name == "load":
    return False
  return any(value is a or type(value) is type(a) and value == a for a in allowed)

_IDENTITY = {"sum": "0", "mean": "0", "max": "float('-inf')", "min": "float('inf')", "any": "False", "all": "True",
             "argmax": "float('-inf')", "argmin": "float('inf')", "cumsum": "0", "cumprod": "1",
             "cummax": "float('-inf')", "cummin": "float('inf')", "logsumexp": "float('-inf')"}


def jnp_keyword_hint(cx, name, sig, args, kwargs) -> str:
  """For jnp's reduction keywords ml.<name> does not take (`where=`, `dtype=`, `initial=`), what
  to write instead, in the user's names, leading the hint; "" for others."""
  given = [k for k in kwargs if k not in sig.parameters]
  x = args[0] if args else kwargs.get("x")
  txt = lambda v, default="x": cx.named(v, default) if is_value(v) else repr(v)
  xs = txt(x) if x is not None else "x"
  rest = "".join([f", {txt(a)}" for a in args[1:]] + [f", {k}={txt(v)}" for k, v in kwargs.items()
                                                         if k in sig.parameters and k != "x"])
  if "where" in given and name in _IDENTITY:
    d = getattr(getattr(x, "type", None), "dtype", None)
    ident = _IDENTITY[name]
    if getattr(d, "is_int", False) and "inf" in ident:    # an integer's lowest or highest value
      ident = str(d.int_range[0 if "-inf" in ident else 1])
    m = txt(kwargs["where"], "m")
    return (f"select the elements first, the others set to what the reduction ignores:"
            f" ml.{name}(ml.where({m}, {xs}, {ident}){rest}); ")
  if "unbiased" in given and name in ("var", "std"):     # torch's
    ddof = int(bool(kwargs["unbiased"]))
    rest = "".join([f", {txt(a)}" for a in args[1:]] + [f", {_ALIASES.get(k, k)}={txt(v)}" for k, v in kwargs.items()
                                                         if _ALIASES.get(k, k) in sig.parameters and k != "x"])
    return (f"torch's unbiased={txt(kwargs['unbiased'])} is ddof={ddof} here (or jnp's correction=):"
            f" ml.{name}({xs}{rest}, ddof={ddof}); ")
  if "dtype" in given and name in _IDENTITY:
    from .elementwise_checks import method_on
    return f"convert first: ml.{name}({method_on(xs)}.astype(jnp.float32){rest}); "
  if "dim" in given and name in ("max", "min") and "axis" not in kwargs:     # torch's v.max(dim=1)
    d = txt(kwargs["dim"]) + (", keepdims=True" if kwargs.get("keepdim", kwargs.get("keepdims")) is True else "")
    return (f"torch's max and min over dim= give a (values, indices) pair: here ml.{name}({xs}, axis={d}) is the values"
            f" alone (no [0] after it: that would take its first element) and ml.arg{name}({xs}, axis={d}) the indices; ")
  if "approx" in given and name in _APPROX_FREE:      # Mosaic GPU's x.exp(approx=True), Pallas's approx_math
    from .elementwise_checks import method_on
    if name == "exp":
      return (f"ml.exp has no approx=: the hardware's approximate exponential is"
              f" ml.exp2({method_on(xs)} * 1.4426950408889634, approx=True) (ex2.approx.ftz: about 2 ulp, subnormal"
              f" results flushed to zero), or drop approx=; ")
    return f"ml.{name} has no approximate form (libdevice's, within 2 ulp on the GPU): drop approx=; "
  return triton_index_hint(name, given, args, kwargs, xs, rest)


_APPROX_FREE = ("exp", "log", "log2", "tanh", "sin", "cos", "rsqrt", "sqrt", "erf", "sigmoid")


def triton_index_hint(name, given, args, kwargs, xs, rest) -> str:
  """Triton's index keywords of max, min, argmax and argmin, in the user's words: tl.max(x, axis,
  return_indices=True) is two reductions, and tl.argmax(x, axis, tie_break_left=...) takes the first
  index of the extreme value (ml.argmax's) or, when False, the last (the first of the flipped axis)."""
  if "return_indices" in given and name in ("max", "min"):
    return (f"the values and their indices are two reductions: ml.{name}({xs}{rest}) and ml.arg{name}({xs}{rest})"
            f" (the first index of the extreme value, Triton's tie_break_left=True); ")
  if "tie_break_left" in given and name in ("argmax", "argmin"):
    left = kwargs["tie_break_left"]
    if left is True:
      return f"ml.{name} takes the first index of the extreme value already: drop tie_break_left=, ml.{name}({xs}{rest}); "
    axis = kwargs.get("axis", args[1] if len(args) > 1 else None)
    if left is False and isinstance(axis, int) and not isinstance(axis, bool):
      return (f"for the last index of the extreme value, take the first of the flipped axis:"
              f" {xs}.shape[{axis}] - 1 - ml.{name}(ml.flip({xs}, {axis}){rest}); ")
  return ""



def near_keyword(sig, kwargs):
  """(the keyword given, the parameter it misspells) for a keyword `sig` does not take but nearly
  spells (Triton's and torch's keep_dims / keepdim for keepdims), else None."""
  import difflib
  params = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
  for k in kwargs:
    if k not in params:
      close = difflib.get_close_matches(k, params, n=1, cutoff=0.8)
      if close:
        return k, close[0]
  return None


def renames(sig, kwargs, first):
  """Every keyword of `kwargs` that `sig` takes under another name (torch's dim= and keepdim= both, in
  v.max(dim=1, keepdim=True)), `first` (near_keyword's, or an alias) leading."""
  import difflib
  params = [p.name for p in sig.parameters.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
  out = [first]
  for k in kwargs:
    if k in params or k == first[0]:
      continue
    to = _ALIASES.get(k) if _ALIASES.get(k) in params else next(iter(difflib.get_close_matches(k, params, n=1,
                                                                                                cutoff=0.8)), None)
    if to is not None and to not in kwargs:
      out.append((k, to))
  return out


def bind_message(sig, kwargs, e) -> str:
  """Python's binding error `e` for `sig`, naming a keyword it does not take before the argument that
  keyword leaves missing (ml.maximum(a, c=v) said "missing a required argument: 'b'")."""
  params = sig.parameters
  if not any(p.kind == p.VAR_KEYWORD for p in params.values()):
    unknown = [k for k in kwargs if k not in params]
    if unknown:
      return f"got an unexpected keyword argument {unknown[0]!r}"
  return str(e)


def builtin(fn=None, *, name: str | None = None, methods: tuple[str, ...] = (),
            ref_methods: tuple[str, ...] = (), eager: bool = False):
  """Declare `fn` as the builtin `ml.<name>` (and as register-tensor methods `methods`); an
  `eager` builtin also works outside kernels on Python values."""
  def deco(f):
    b = Builtin(f, name or f.__name__.rstrip("_"), eager)
    BUILTINS[b.__name__] = b
    for m in methods:
      METHODS[m] = b
    for m in ref_methods:
      REF_METHODS[m] = b
    return b
  return deco(fn) if fn is not None else deco



def named_builtin(rule, name: str, doc: str):
  """`rule`, a function a builtin factory made (one per math function, segment reduction, ...), declared as the
  builtin `ml.<name>` with the docstring `doc`."""
  rule.__name__, rule.__doc__ = name, doc
  return builtin(rule, name=name)

# ---------------------------------------------------------------- values
def is_value(x) -> bool:
  return isinstance(x, ir.Value)


def unroll_hint(b, v, hint: str) -> str:
  """`hint`, led by "unroll the loop ..." when the run-time value `v` comes from the counter of a
  `range()` loop with static bounds (a Pallas habit: `for e in range(2)` unrolls there, runs at run
  time here)."""
  todo, seen = [v], set()
  while todo and len(seen) < 64:
    x = todo.pop()
    if not is_value(x) or x.id in seen:
      continue
    seen.add(x.id)
    if x.id in b.static_loops:
      name, line, text = b.static_loops[x.id]
      unrolled = text.replace("range(", "ml.static_range(", 1) if text.startswith("range(") else "ml.static_range(...)"
      return (f"unroll the loop at line {line}: for {name} in {unrolled} makes {name} a Python int ({text}, even"
              f" with static bounds, is a run-time loop); or {hint}")
    o = b.defining(x)
    if o is not None and not o.regions:
      todo += [u for u in o.operands() if is_value(u)]
  return hint


def one_element(shape) -> bool:
  """Whether a tensor or window of `shape` holds one element and has axes ((1,), (1, 1)): such a one
  has no register layout of its own, so the compiler works on its scalar."""
  return bool(shape) and all(n == 1 for n in shape)


def is_tensor(x) -> bool:
  return isinstance(x, ir.Value) and isinstance(x.type, TensorType)


def is_scalar(x) -> bool:
  return isinstance(x, ir.Value) and isinstance(x.type, ScalarType)


def is_ref(x) -> bool:
  return isinstance(x, ir.Value) and isinstance(x.type, RefType)


def a_an(word: str) -> str:
  """`word` with its article: 'an int8', 'a uint8' (you-int), 'a float16'."""
  return f"{'an' if word[:1].lower() in 'aeio' else 'a'} {word}"


def value_words(x) -> str:
  """A register value in the user's words: 'an int32 scalar', 'a bool tensor of shape (128,)'."""
  if isinstance(x, ir.Value) and isinstance(x.type, (ScalarType, TensorType)):
    d = resolve(x.type.dtype)
    what = "scalar" if isinstance(x.type, ScalarType) else f"tensor of shape {x.type.shape}"
    return a_an(f"{d} {what}") if isinstance(d, DType) else a_an(what if what == "scalar" else f"register {what}")
  return kind_of(x)


def python_int(v) -> bool:
  """Whether `v` is a Python int (a bool is not one): what ml's builtins take as a static int."""
  return isinstance(v, int) and not isinstance(v, bool)


def static_integer(v) -> bool:
  """Whether `v` is a Python int or a NumPy integer (a bool is neither): what jnp's forms take as a static int."""
  import numpy as np
  return python_int(v) or isinstance(v, np.integer)


def shown(x) -> str:
  """A static argument as a message shows it, in the user's terms: `jnp.float32` for a dtype (not
  `<class 'jax.numpy.float32'>`), a function's or class's name, a value's name; else its repr."""
  if isinstance(x, ir.Value):
    return x.name or kind_of(x)
  if not isinstance(x, (bool, int, float, str, type(None), tuple, list, dict, slice)):
    d = to_dtype(x)
    if d is not None:
      from ..types import dtype_name
      return f"jnp.{dtype_name(d)}"
    name = getattr(x, "__qualname__", None) or getattr(x, "__name__", None)
    if isinstance(name, str):
      mod = getattr(x, "__module__", None) or ""
      return f"jnp.{name}" if mod.startswith("jax.numpy") else name
  return repr(x)


def kind_of(x) -> str:
  if isinstance(x, ir.Value):
    t = x.type
    if isinstance(t, RefType):
      return f"{'an' if str(t.space) == 'SMEM' else 'a'} {t.space} ref"
    return "a register tensor" if isinstance(t, TensorType) else "a scalar"
  if hasattr(x, "KIND"):
    return x.KIND
  if _outside_array(x):
    return f"an array from outside the kernel ({x.dtype}{list(x.shape)})"
  return f"a Python {type(x).__name__}"


def _outside_array(x) -> bool:
  """A NumPy or JAX array met in a kernel body: a global or closure variable."""
  return hasattr(x, "shape") and hasattr(x, "dtype") and isinstance(getattr(x, "shape"), tuple)


TRANSPOSES = ("transpose", "matrix_transpose", "permute_dims", "swapaxes", "moveaxis", "mT", "permute", "t", "trans")


def smem_transpose_hint(name: str) -> str:
  """The hint for a transpose (ml.transpose, jnp.transpose, .transpose(), .mT, ...) of a 2-D SMEM buffer:
  its view `.T`, which ml.dot reads with no data moved."""
  return (f"for an ml.dot operand write {name}.T: a transposed view of the SMEM buffer, no data moved"
          f" (ml.dot(a_s, {name}.T, acc)); to transpose its values, {name}[...].T")


def is_smem_matrix(x) -> bool:
  """A 2-D ref of this CTA's SMEM (whose transpose is the view `.T`)."""
  return is_ref(x) and str(x.type.space) == "SMEM" and len(x.type.shape) == 2 and not x.type.remote


_SIZE_NAME = re.compile(r"^(n|N|M|K|L|[nN]_\w+|num_\w+|\w*size\w*|\w*numel\w*|\w*_len|len_\w+)$")


def _is_output_param(b, x) -> bool:
  """`x` is an output parameter itself (a GMEM ref of the kernel's that is no input, not a view of one)."""
  from .memory import root
  return str(x.type.space) == "GMEM" and root(b, x) is x and x.id not in b.read_only


def check_register_value(cx, x, what):
  """`x` must be a register tensor, a scalar or a Python number."""
  if is_ref(x):
    name = x.name or "ref"
    hint = f"read it into registers first: {name}[...]"
    if what == "ml.transpose" and str(x.type.space) == "SMEM":
      hint = smem_transpose_hint(name)
    elif _SIZE_NAME.match(name) and _is_output_param(cx.b, x):
      hint = (f"{name} is an output parameter (parameters are the inputs, then the outputs; Triton passes sizes"
              f" after the output pointers): a run-time number is an ml.scalar input, before the outputs, {name}:"
              f" ml.scalar; or drop {name} and read sizes off the refs (x.shape[0] is a Python int in the kernel)")
    raise E.KernelTypeError(
        f"{what} works on register values, got {x.name or 'a ref'} ({x.type.space} ref)", cx.loc, hint=hint)
  if isinstance(x, (complex, np.complexfloating)):         # (x * 1j, x * cmath.exp(...): probe 72b)
    raise E.KernelTypeError(f"{what} cannot take a Python complex ({x!r}): kernels hold no complex values", cx.loc,
                            hint=COMPLEX_HINT)
  if not (is_value(x) or isinstance(x, Num)):
    raise E.KernelTypeError(f"{what} cannot take {kind_of(x)}", cx.loc,
                            hint="pass the array to the kernel as an input (kernels read arrays through their"
                                 " parameters)" if _outside_array(x) else _text_hint(x) or
                                 "pass a register tensor, a scalar or a Python number")


COMPLEX_HINT = ("hold a complex value as its real and imaginary parts, two float tensors: (xr + i xi) * w for a"
                " Python complex w is (xr * w.real - xi * w.imag, xr * w.imag + xi * w.real), and exp(1j * th) is"
                " (ml.cos(th), ml.sin(th))")


def _text_hint(x) -> str | None:
  """A str or bytes where a number was meant: a string kernel's bytes compared with a character (`c == 'a'`, `b ==
  b','`) take its code, as Triton's and CUDA's char literals are numbers."""
  if isinstance(x, str) and len(x) == 1 and ord(x) < 128 or isinstance(x, bytes) and len(x) == 1:
    code = ord(x) if isinstance(x, str) else x[0]
    return (f"uint8 bytes hold character codes: compare with the code, ord({x!r}) ({code}); for a longer string,"
            f" compare the bytes with an array of its codes passed as an input (np.frombuffer(b'...', np.uint8))")
  if isinstance(x, (str, bytes)):
    return ("uint8 bytes hold character codes: pass the string's codes as an input array (np.frombuffer(b'...',"
            " np.uint8)) and compare element by element, or a character's code, ord('a')")
  return None


def check_binary_operands(cx, x, y, what, in_python: str):
  """`x` and `y` of the two-operand builtin `what`: register values or numbers, at least one a value (two
  numbers are Python's to compute, as `in_python` says: the hint)."""
  for v in (x, y):
    check_register_value(cx, v, what)
  if not is_value(x) and not is_value(y):
    raise E.KernelTypeError(f"{what} of two Python numbers should be computed in Python", cx.loc, hint=in_python)


def static_int(cx, x, what, *, minimum=None) -> int:
  if not isinstance(x, int) or isinstance(x, bool) or (minimum is not None and x < minimum):
    need = "a static int" + (f" >= {minimum}" if minimum is not None else "")
    raise E.KernelTypeError(f"{what} must be {need}, got {shown(x)}", cx.loc,
                            hint="sizes and axes are fixed when the kernel is compiled; use constexpr"
                                 " parameters for them")
  return x


def _run_time_size_hint(cx, shape, what) -> str | None:
  """For a shape with a run-time size (`ml.zeros((n, d))`, `ml.smem((e - s, d))` of a segment's length):
  a static block, its positions past the length masked, in the user's words where the call reads."""
  import ast
  from ..loc import call_at
  if not isinstance(shape, tuple) or not any(is_value(s) for s in shape) or what in ("reshape", "ml.broadcast_to"):
    return None
  k = next(j for j, s in enumerate(shape) if is_value(s))
  call = call_at(cx.loc)
  arg = call.args[0] if call is not None and call.args else None
  texts = [ast.unparse(e) for e in arg.elts] if isinstance(arg, ast.Tuple) and len(arg.elts) == len(shape) else None
  n = texts[k] if texts else "n"
  n = n if n.isidentifier() else f"({n})"
  block = tuple(128 if is_value(s) else s for s in shape)
  pos = "ml.arange(128)" + ("" if len(shape) == 1 else f"[{', '.join(':' if j == k else 'None' for j in range(len(shape)))}]")
  return (f"a run-time size sizes no tensor or buffer (shapes are fixed when the kernel is compiled): take a static"
          f" block, {what}({block}, ...), and mask the positions past the length, {pos} < {n}, in the masks of its"
          f" loads and stores (in a loop of blocks while the length runs past 128)")


def static_shape(cx, shape, what) -> tuple[int, ...]:
  if isinstance(shape, int) and not isinstance(shape, bool):
    shape = (shape,)
  if (not isinstance(shape, tuple) or not shape
      or not all(isinstance(s, int) and not isinstance(s, bool) and s > 0 for s in shape)):
    ints = isinstance(shape, tuple) and all(isinstance(s, int) and not isinstance(s, bool) for s in shape)
    if ints and shape and -1 in shape:
      hint = "give every size: -1 (the rest of the elements) is for x.reshape, not for a new tensor"
    elif ints and shape:
      hint = f"sizes are counts of elements, each at least 1 (got {min(shape)})"
    elif ints:
      hint = "shape () is a scalar: a Python number, or ml.full((), value, dtype)"
    else:
      hint = _run_time_size_hint(cx, shape, what) or "shapes are fixed when the kernel is compiled; use constexpr parameters for sizes"
    raise E.KernelTypeError(
        f"{what} needs a static shape: a tuple of positive Python ints, got {shown(shape)}", cx.loc, hint=hint)
  return shape


# Python's types as dtypes, as jnp gives them without x64: x.astype(int) is int32, not int64.
PYTHON_TYPES = {int: DType.i32, float: DType.f32, bool: DType.bool_}


def python_type_dtype(cx, x, what) -> DType:
  """Python's int, float or bool as a dtype, as jnp takes it: with jax_enable_x64 on, int is int64
  and float float64 (which kernels do not compute in: an UnsupportedDtypeError saying so)."""
  if not (cx.b is not None and cx.b.x64) or x is bool:
    return PYTHON_TYPES[x]
  if x is int:
    return DType.i64
  raise E.UnsupportedDtypeError(
      f"{what}: float is float64 with jax_enable_x64 on (as in jnp), and kernels have no float64", cx.loc,
      hint="name the dtype: jnp.float32 (what float is without jax_enable_x64; the GPU's float64 units are a"
           " fraction of its float32 ones)")


def dtype_arg(cx, x, what, *, optional=False) -> DType | None:
  if x is None and optional:
    return None
  d = python_type_dtype(cx, x, what) if isinstance(x, type) and x in PYTHON_TYPES else to_dtype(x)
  if d is None and isinstance(x, str):        # x.astype("float16"), as numpy and jnp take it
    d = to_dtype_name(x)
  if d is None:
    import numpy as np
    try:                                   # a real dtype, just not one kernels compute in (None is
      known = np.dtype(x).name if x is not None else None     # no dtype, not NumPy's float64)
    except (TypeError, ValueError):
      known = None
    if known is not None and known != "object":
      from ..packed_dtypes import packed_hint
      raise E.UnsupportedDtypeError(
          f"{what}: {known} is not a kernel dtype", cx.loc, hint=packed_hint(known, "cast") or
          ("use jnp.float32: kernels have no float64 (the GPU's float64 units are a fraction of its"
                " float32 ones); " if known == "float64" else
           "for the high 32 bits of a 32-bit product (a Philox round's, a CUDA port's (uint64)a * b >> 32)"
           " use ml.umulhi(a, b), and a * b for the low ones; a 64-bit hash (fmix64, splitmix64) computes in int64,"
           " whose products and sums wrap as uint64's, with jax.lax.shift_right_logical(k, 33) for uint64's"
           " k >> 33; " if known == "uint64" else "")
               + "kernels compute in float32, float16, bfloat16, float8_e4m3fn, float8_e5m2, int8 to int64 and"
                 " uint8 to uint32 (int64 with jax_enable_x64)")
    raise E.KernelTypeError(f"{what} needs a dtype such as jnp.float32, got {shown(x)}", cx.loc,
                            hint="pass a jnp dtype: jnp.float32, jnp.bfloat16, jnp.int32, ...")
  return d
