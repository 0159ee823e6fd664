"""How a kernel is called: the checks on its arguments (the signature it shows, and the parameters of callables
and partials, are signature.py).

Every check here runs before any user `grid`/`out_shape` callable, so a list
passed where an array belongs, a wrong input count or a traced constexpr is
reported in the caller's terms instead of as a failure inside a lambda.
"""
from __future__ import annotations

import functools
import reprlib

import numpy as np

from . import stand_ins
from .frontend import errors as E
from .frontend.packed_dtypes import packed_hint
from .frontend.dtypes import DType, to_dtype

MAX_MESSAGE = 500       # characters of a message built from user values
_short = reprlib.Repr()
_short.maxstring, _short.maxother, _short.maxlist, _short.maxtuple, _short.maxdict = 40, 40, 4, 4, 4


def cap(text: str, limit: int = MAX_MESSAGE) -> str:
  """`text`, cut to `limit` characters."""
  if len(text) <= limit:
    return text
  tail = f" ... ({len(text)} chars)"
  return text[:limit - len(tail)] + tail


def is_array_like(x) -> bool:
  return hasattr(x, "shape") and hasattr(x, "dtype") and not isinstance(x, type)


def source_repr(v) -> str:
  """A Python value as a user writes it: dtypes as jnp.float16, others by repr."""
  import numpy as np
  try:
    if isinstance(v, type) or isinstance(v, np.dtype):
      return f"jnp.{np.dtype(v).name}"
  except TypeError:
    pass
  return _repr(v)


def _repr(v) -> str:
  """repr(v), or `<Type object>` where the value's own __repr__ fails (a report must not)."""
  try:
    return repr(v)
  except Exception:
    return f"<{type(v).__name__} object>"


def constexpr_text(v) -> str:
  """A constexpr's value as reports show it: a dtype by its name (float8_e4m3fn), others by repr."""
  import numpy as np
  try:
    if isinstance(v, type) or isinstance(v, np.dtype):
      return np.dtype(v).name
  except TypeError:
    pass
  from .frontend.calls import _is_array_library
  from .frontend.held_library import library_text
  return library_text(v, _is_array_library) or _repr(v)     # jax.nn.gelu, not <PjitFunction of ... at 0x...>


def keyword_hint(name, names, values) -> str:
  """`pass it by keyword: f(..., a=1.0, b=...)`: constexprs `names` given `values` by position."""
  shown = [f"{c}={source_repr(values[i])}" if i < len(values) else f"{c}=..." for i, c in enumerate(names)]
  return f"pass {'them' if len(names) > 1 else 'it'} by keyword: {name}(..., {', '.join(shown)})"


def describe(x) -> str:
  """A short description of a call argument: `float32[1024, 64]`, `a list of 3 items`, ..."""
  if is_array_like(x):
    try:
      return f"{getattr(x.dtype, 'name', x.dtype)}{list(x.shape)}"
    except TypeError:
      pass
  if isinstance(x, (list, tuple, dict, set)):
    kind = type(x).__name__
    return f"{'an' if kind[0].lower() in 'aeiou' else 'a'} {kind} of {len(x)} item{'s' if len(x) != 1 else ''}"
  if isinstance(x, type):
    shown = source_repr(x)
    if shown.startswith("jnp."):
      return f"the dtype {shown}"
  if x is None:
    return "None"
  return f"{type(x).__name__} {_short.repr(x)}"


SUPPORTED_DTYPES = ", ".join(d.value for d in DType)

ELSEWHERE = {   # what Triton and Pallas users reach for, and where it lives here
    "num_warps": "threads per CTA are block= (a multiple of 128: num_warps=4 is block=128)",
    "num_stages": "pipelining is per loop: ml.range(n, stages=s)",
    "num_ctas": "CTAs per cluster are cluster=(n,)",
    "in_specs": "kernels index their refs themselves: ml.copy(x.at[ml.ds(i * 128, 128)], buf)",
    "out_specs": "kernels index their refs themselves: ml.copy(buf, out.at[ml.ds(i * 128, 128)])",
    "grid_spec": "grid= takes the CTA counts, or a callable of the inputs returning them",
    "compiler_params": "launch options are block=, cluster= and grid=; tile sizes are constexprs",
    "scratch_shapes": "scratch is allocated in the kernel body: acc = ml.smem(shape, dtype) (SMEM), or"
                      " ml.zeros(shape, dtype) (registers); a kernel's parameters are its inputs and outputs",
    "interpret": "it chooses how a call runs (kernel(x, interpret=True)); check, typed_ir and mlir trace and"
                 " build the GPU kernel and run nothing, so leave it out",
    "debug": "drop debug=: kernel.typed_ir(*specs) and kernel.mlir(*specs) print what it compiles to (MGPU_DSL_DUMP=DIR"
             " writes both for every specialisation), and print(...) in the kernel prints values",
    "cost_estimate": "drop cost_estimate=: XLA schedules the kernel's custom call without one",
}


_DECORATOR = ("grid", "block", "cluster", "out_shape", "input_output_aliases", "cache_size", "name")


def _decorator_option_hint(option: str, value) -> str:
  """`k(x, grid=(4,))`, `k(x, block=256)`: a launch option passed at the call, as pallas_call takes it; here it
  is the decorator's, which a callable of the inputs and constexprs makes vary per call."""
  shown = source_repr(value)
  form = {"grid": "(n,)", "cluster": "(n,)", "block": "n"}.get(option)
  per_call = (f"; for one that varies per call, make it a callable of a constexpr parameter n of the kernel"
              f" (`*, n: ml.constexpr` in its def): {option}=lambda x, *, n: {form}, called k(x, n=...)" if form else "")
  return (f"{option}= is the decorator's, not the call's: @mg.mgpu_kernel(..., {option}={shown}) (a call passes"
          f" the inputs and constexprs){per_call}")


def _numbers(x) -> bool:
  """A (nested) list or tuple of Python or NumPy numbers only: data jnp.asarray makes one array of."""
  import numpy as np
  if isinstance(x, (list, tuple)):
    return all(_numbers(v) for v in x)
  return isinstance(x, (bool, int, float, np.number, np.bool_))


def _input_hint(x, name="xs") -> str:
  if isinstance(x, (list, tuple)) and x and _numbers(x):
    return (f"make the numbers one array first, as jnp functions need too: jnp.asarray({name}) (with the"
            f" dtype you mean: jnp.asarray({name}, jnp.float32))")
  from .value_hints import fields_hint
  if not isinstance(x, (list, dict)) and fields_hint(x, name):      # a NamedTuple, a dataclass pytree
    return fields_hint(x, name)
  if isinstance(x, (list, tuple)):
    return f"pass each array as its own argument, or stack them: jnp.stack({name})"
  if isinstance(x, dict):
    return "kernels take arrays positionally; pass the dict's arrays one by one"
  if isinstance(x, (bool, float)) or isinstance(x, int) and -2 ** 31 <= x < 2 ** 31:
    n = "x" if name == "xs" else name
    as_array = f"jnp.{'bool_' if isinstance(x, bool) else 'float32' if isinstance(x, float) else 'int32'}({x!r})"
    return (f"pass a 0-d array, which the kernel reads with {n}[...]: {as_array}, as jnp makes of a Python"
            f" {'bool' if isinstance(x, bool) else 'number'}; or annotate the parameter `{n}: ml.scalar` (a Python"
            f" {'bool' if isinstance(x, bool) else 'number'} then works, read as {n});"
            f" a compile-time constant is a keyword-only (or `{n}: ml.constexpr`) parameter passed by keyword")
  if x is None:             # an optional input (Triton's bias=None): a flag and a placeholder that is never read
    n = "x" if name == "xs" else name
    return (f"an input cannot be left out: pass a placeholder array that the kernel never reads, with a constexpr"
            f" that says so, k(..., jnp.zeros((1,), jnp.float32), has_{n}=False) and `if has_{n}:` around the reads of"
            f" {n} (or a kernel without the parameter)")
  if isinstance(x, (bool, int, float, complex)):
    return ("a compile-time constant is a keyword-only (or `name: ml.constexpr`) parameter passed"
            " by keyword; a runtime scalar is a parameter annotated `name: ml.scalar` (pass an int or"
            " float), or a 0-d array read with name[...]")
  return "pass a jax or numpy array (or a jax.ShapeDtypeStruct to typed_ir/mlir/check)"


def _supported(dtype) -> bool:
  """Whether kernels take `dtype` as JAX will pass it (float64 is float32 unless jax_enable_x64 is on:
  the answer depends on the flag, which a notebook may turn on after a first call)."""
  import jax
  return _supported_as(dtype, bool(jax.config.jax_enable_x64))


@functools.lru_cache(maxsize=64)
def _supported_as(dtype, x64: bool) -> bool:
  import jax
  try:
    return to_dtype(jax.dtypes.canonicalize_dtype(dtype)) is not None
  except (TypeError, ValueError):
    return False


def output_dtype_hint(leaves) -> str:
  """The hint for an out_shape whose dtype kernels cannot make: complex outputs as (re, im) pairs of
  float32 outputs, float64 ones as float32 converted outside the kernel."""
  try:
    bad = next((np.dtype(s.dtype) for s in leaves if not _supported(s.dtype)), None)
  except (TypeError, ValueError, AttributeError):     # an unhashable or unknown dtype object
    bad = None
  if bad is not None and bad.kind == "c":
    return ("make its real and imaginary parts two float32 outputs, out_shape=lambda ...:"
            " (jax.ShapeDtypeStruct(shape, jnp.float32), jax.ShapeDtypeStruct(shape, jnp.float32)), and rebuild"
            f" the complex result outside the kernel, jax.lax.complex(re, im); supported dtypes: {SUPPORTED_DTYPES}")
  packed = packed_hint(bad.name, "output") if bad is not None else None
  if packed is not None:
    return f"{packed}; supported dtypes: {SUPPORTED_DTYPES}"
  if bad == np.float64:
    return ("make the output float32 (jax.ShapeDtypeStruct(shape, jnp.float32)) and convert it outside the"
            f" kernel, y.astype(jnp.float64); supported dtypes: {SUPPORTED_DTYPES}")
  return f"supported dtypes: {SUPPORTED_DTYPES}"


def is_weak(a) -> bool:
  """Whether `a` is a weakly typed value jax.jit traced: a Python number (int64/float64 with x64)."""
  return bool(getattr(getattr(a, "aval", None), "weak_type", False))


def is_f64_scalar(a) -> bool:
  return getattr(a, "shape", None) == () and np.dtype(getattr(a, "dtype", None) or np.int8) == np.float64


def _dtype_hint(pk, i, a) -> str:
  """The hint for an input of an unsupported dtype: with jax_enable_x64 on, a weakly typed float64
  under a trace is a Python number that jax.jit made a 64-bit array."""
  import jax
  refs = pk.ref_params
  if jax.dtypes.issubdtype(a.dtype, jax.dtypes.prng_key):      # jax.random.key(0): no data to read
    name = refs[i] if i < len(refs) else "key"
    return (f"a typed PRNG key is not data a kernel reads: pass a seed drawn from it,"
            f" jax.random.bits({name}, dtype=jnp.uint32) (a 0-d uint32 for an ml.scalar seed), and draw"
            f" numbers in the kernel with ml.rand(seed, offsets); or its words, jax.random.key_data({name})")
  if a.dtype == jax.dtypes.float0:      # a cotangent of integer values: it holds no numbers
    return ("float0 is JAX's cotangent of integer and bool values (a jax.custom_vjp backward receives it for"
            " an integer output): it holds no numbers, so leave it out of the kernel call (and return None as"
            " the cotangent of an integer input)")
  try:
    dtype = np.dtype(a.dtype)
  except TypeError:
    dtype = None
  if dtype is not None and dtype.kind == "c":      # complex: kernels compute on (re, im) pairs of floats
    return complex_hint(refs[i] if i < len(refs) else "z", dtype)
  packed = packed_hint(dtype.name, "input", refs[i] if i < len(refs) else "x") if dtype is not None else None
  if packed is not None:
    return f"{packed}; supported dtypes: {SUPPORTED_DTYPES}"
  if dtype != np.float64 or not jax.config.jax_enable_x64:
    return f"supported dtypes: {SUPPORTED_DTYPES}"
  refs = pk.ref_params
  name = refs[i] if i < len(refs) else "x"
  if not isinstance(a, jax.core.Tracer):
    return f"convert it to a supported dtype: {name}.astype(np.float32); supported dtypes: {SUPPORTED_DTYPES}"
  if getattr(getattr(a, "aval", None), "weak_type", False):     # a Python float jax.jit traced
    scalar = name in getattr(pk, "scalar_params", ())
    return (f"jax_enable_x64 is on, so a Python float passed through jax.jit arrives as float64: pass"
            f" jnp.float32({name})" + (" (or call with the Python float outside jax.jit)" if scalar
                                       else f" or {name}.astype(jnp.float32)")
            + f"; supported dtypes: {SUPPORTED_DTYPES}")
  return (f"jax_enable_x64 is on, so float64 values stay float64 under a transformation: pass"
          f" jnp.float32({name}) or {name}.astype(jnp.float32); supported dtypes: {SUPPORTED_DTYPES}")
  return f"supported dtypes: {SUPPORTED_DTYPES}"


def complex_hint(name: str, dtype) -> str:
  """For a complex array: kernels have no complex dtype; pass its real and imaginary parts."""
  conv = "" if dtype != np.complex128 else ".astype(jnp.float32)"     # float64 parts: no kernel dtype
  return (f"pass its real and imaginary parts as two float32 inputs, jnp.real({name}){conv} and"
          f" jnp.imag({name}){conv}, compute on the pairs (a product is (ar * br - ai * bi, ar * bi + ai * br)),"
          f" and rebuild a complex result outside the kernel, jax.lax.complex(re, im); supported dtypes:"
          f" {SUPPORTED_DTYPES}")


def check_inputs(pk, args, bounds: tuple[int, int], name: str, loc, *, count: bool = True,
                 constexprs=()) -> None:
  """Raise SignatureError unless `args` are arrays of supported dtypes, between `bounds`
  (from `input_bounds`) in number (`count=False`: the number is checked later)."""
  import jax
  refs = pk.ref_params
  if not args or not is_array_like(args[0]) or len(args) < bounds[0]:
    _not_a_method(refs, name, loc)
  for i, a in enumerate(args):
    what = f"input {i}" + (f" ({refs[i]})" if i < len(refs) else "")
    held = stand_ins.derivative_stand_in(a, what, refs[i] if i < len(refs) else "x")
    if held is not None:
      raise E.SignatureError(cap(f"{name}: {held[0]}"), loc, hint=held[1])
    if not is_array_like(a):
      if isinstance(a, bool) and i == len(args) - 1 and i >= bounds[0]:
        raise E.SignatureError(
            cap(f"{name}: input {i} is the bool {a}; a kernel's inputs are arrays, and interpret is passed"
                f" by keyword"), loc, hint=f"{name}(..., interpret={a})")
      if len(args) > bounds[1]:     # a constexpr passed by position (scale(x, 128)): the count says so
        check_count(pk, len(args), bounds, name, loc, args=args, constexprs=constexprs)
      marked = getattr(pk, "scalar_params", ())
      scalars = [r for r in refs[i + 1:] if r in marked]
      if scalars and isinstance(a, (int, float)) and not isinstance(a, bool):
        order = refs[:i] + scalars + [r for r in refs[i:] if r not in scalars]
        raise E.SignatureError(
            cap(f"{name}: {what} is {describe(a)}, but {refs[i]} is not an ml.scalar parameter; {scalars[0]}"
                f" is, after it"), loc,
            hint=f"ml.scalar parameters are inputs, so they come before the outputs: def {name}("
                 f"{', '.join(f'{r}: ml.scalar' if r in marked else r for r in order)}, ...)")
      from .triton_names import outputs_first_hint
      raise E.SignatureError(cap(f"{name}: {what} is {describe(a)}; kernel inputs are arrays"), loc,
                             hint=outputs_first_hint(name, refs, i, _input_hint(a, refs[i] if i < len(refs) else "xs")))
    try:
      ok = _supported(a.dtype)
    except TypeError:         # an unhashable dtype object
      ok = _supported_as.__wrapped__(a.dtype, None)
    if not ok:
      shown = "float0" if a.dtype == jax.dtypes.float0 else a.dtype    # (its repr: [('float0', 'V')])
      raise E.SignatureError(cap(f"{name}: {what} has dtype {shown}, which kernels do not support"),
                             loc, hint=_dtype_hint(pk, i, a))
    sym = next((d for d in a.shape if not isinstance(d, int)), None)
    if sym is not None:       # jax.export's shape polymorphism: a symbolic dimension
      raise E.SignatureError(
          cap(f"{name}: {what} has shape {tuple(a.shape)}, with the symbolic dimension {sym}; a kernel is"
              f" compiled for concrete shapes"), loc,
          hint="export once per shape you need (concrete jax.ShapeDtypeStruct specs), or pad to a few"
               " fixed sizes")
  if count:
    check_count(pk, len(args), bounds, name, loc, args=args, constexprs=constexprs)


def _not_a_method(refs, name: str, loc) -> None:
  """SignatureError when the kernel's first parameter is `self` (or `cls`): a kernel binds no instance."""
  if refs and refs[0] in ("self", "cls"):
    raise E.SignatureError(
        f"{name}'s first parameter is {refs[0]}, but a kernel is not a method: it binds no {refs[0]} (every"
        f" parameter is an array)", loc,
        hint=f"drop {refs[0]} and put @staticmethod above @mg.mgpu_kernel, or define the kernel at module level")


def check_count(pk, n_in: int, bounds: tuple[int, int], name: str, loc, *, outputs_known=False,
                args=(), constexprs=(), bound=None) -> None:
  """Raise SignatureError unless lo <= n_in <= hi (`args`: the call's positional arguments, where
  trailing non-arrays past the inputs are constexprs passed by position)."""
  lo, hi = bounds
  if lo <= n_in <= hi:
    return
  _not_a_method(pk.ref_params, name, loc)      # M().forward(x): self is no array, and the count is off
  extra = list(args[hi:]) if lo == hi and args and len(args) == n_in > hi else []
  if extra and [c for c in pk.constexpr_params if c not in constexprs] and not any(is_array_like(a) for a in extra):
    from . import positional, triton_names
    given = ", ".join(describe(a) for a in extra)
    s = "s" if len(extra) > 1 else ""
    raise E.SignatureError(
        f"{name} was given {len(extra)} extra positional argument{s} ({given}) after its"
        f" {len(args) - len(extra)} input{'s' if len(args) - len(extra) != 1 else ''}"
        + positional.too_many(pk, bounds, bound, len(extra)), loc,
        hint=triton_names.size_after_outputs_hint(name, pk.ref_params, hi, getattr(pk, "scalar_params", ()), extra) or
        keyword_hint(name, [c for c in pk.constexpr_params if c not in constexprs][:len(extra)], extra))
  refs = pk.ref_params
  plural = lambda n, w: f"{n} {w}{'s' if n != 1 else ''}"
  if lo < 0:
    msg = (f"out_shape describes {plural(len(refs) - lo, 'output')}, but {name} has only"
           f" {plural(len(refs), 'ref parameter')} ({', '.join(refs)})")
  elif lo == hi and outputs_known and n_in > lo:
    outs = len(refs) - lo
    msg = (f"{name} was called with {plural(n_in, 'input')} and out_shape describes"
           f" {plural(outs, 'output')}: {n_in + outs} ref parameters, but {name} has"
           f" {len(refs)} ({', '.join(refs)})")
  elif lo == hi and any(r in getattr(pk, "scalar_params", ()) for r in refs[lo:]):
    # out_shape or grid make the kernel take fewer inputs than it has: an ml.scalar parameter
    # (always an input) would otherwise be called an output
    scalar = next(r for r in refs[lo:] if r in pk.scalar_params)
    ins = refs[:max(n_in, refs.index(scalar) + 1)]
    msg = (f"{name}'s out_shape and grid make it take {plural(lo, 'input')} ({', '.join(refs[:lo]) or 'none'}),"
           f" but its inputs include {scalar} (an ml.scalar parameter, so an input), and it was called with"
           f" {plural(n_in, 'input')}")
    raise E.SignatureError(cap(msg), loc, hint=(
        f"give a callable out_shape or grid every input (lambda {', '.join(ins)}: ...); a static out_shape"
        f" describes only the outputs ({', '.join(refs[len(ins):]) or 'none left'})"))
  elif lo == hi:
    takes = f"{plural(lo, 'input')} ({', '.join(refs[:lo])})" if lo else "no inputs"
    outs = refs[lo:]
    msg = (f"{name} takes {takes}, then {plural(len(outs), 'output')} ({', '.join(outs)}"
           f"{', from out_shape' if outputs_known else ''}), but was called with {plural(n_in, 'input')}")
  else:
    span = f"at most {plural(hi, 'input')}" if lo == 0 else f"{lo} to {plural(hi, 'input')}"
    msg = (f"{name} has {plural(len(refs), 'ref parameter')} ({', '.join(refs)}) and takes {span}"
           f" (the rest are outputs), but was called with {n_in}")
  hint = ("parameters are the inputs, then the outputs; compile-time constants are keyword-only (or"
          " `name: ml.constexpr`) and passed by keyword")
  if lo == hi and lo < n_in < len(refs) and not outputs_known:
    # more inputs than the out_shape/grid callables take: they decide the count, and may be stale
    extra = ", ".join(refs[lo:n_in])
    hint = (f"{name}'s out_shape and grid make it take {plural(lo, 'input')}; if {extra}"
            f" {'is an input' if n_in - lo == 1 else 'are inputs'}, give a callable out_shape or grid"
            f" {'a parameter' if n_in - lo == 1 else 'parameters'} for {'it' if n_in - lo == 1 else 'them'}"
            f" (lambda {', '.join(refs[:n_in])}: ...), or describe fewer outputs in a static out_shape")
  if lo == hi and 0 < lo < n_in == len(refs) and all(is_array_like(a) for a in args[lo:]):
    # every parameter passed: Triton's habit of passing preallocated outputs
    outs = refs[lo:]
    hint = (f"outputs are returned, not passed: call {_inputs_only(name, lo, n_in, refs)}, which returns"
            f" {' and '.join(outs)} (out_shape describes {'it' if len(outs) == 1 else 'them'})")
  outputs_too = [r for r in refs[n_in:lo] if r not in getattr(pk, "scalar_params", ())]
  if lo == hi and 0 < n_in < lo and outputs_too:   # fewer inputs than out_shape leaves: too few outputs?
    hint = (f"if {', '.join(outputs_too)} {'is an output' if len(outputs_too) == 1 else 'are outputs'} too, describe"
            f" {plural(len(refs) - n_in, 'output')} in out_shape (a tuple of jax.ShapeDtypeStruct, one per"
            f" output parameter: {', '.join(refs[n_in:])}); otherwise pass every input. " + hint)
    scratch = refs[len(refs) - (lo - n_in):]     # Pallas's scratch_shapes come after the outputs
    hint += (f"; if {' and '.join(scratch)} {'is' if len(scratch) == 1 else 'are'} scratch (Pallas's scratch_shapes),"
             f" drop {'it' if len(scratch) == 1 else 'them'} from the parameters and allocate in the body:"
             f" {scratch[0]} = ml.smem(shape, dtype)")
  from .triton_names import strides_hint
  hint = strides_hint(refs, args[lo:] if lo == hi else (), hint, name, lo)
  raise E.SignatureError(cap(msg), loc, hint=hint)


def _inputs_only(name: str, lo: int, n_in: int, refs) -> str:
  """The user's call of `name` (on the line that called the kernel) with its first `lo`
  positional arguments only, as written (`copy(x, interpret=True)` for `copy(x, out,
  interpret=True)`), or `name(inputs)`."""
  import ast
  from .frontend.loc import user_loc
  text = (user_loc().source_line or "").strip()
  try:
    tree = ast.parse(text)
  except SyntaxError:
    tree = None
  for node in ast.walk(tree) if tree is not None else ():
    if isinstance(node, ast.Call) and len(node.args) == n_in and not any(isinstance(a, ast.Starred) for a in node.args):
      fn = ast.get_source_segment(text, node.func) or ""
      if fn == name or fn.endswith("." + name):
        kept = [ast.get_source_segment(text, a) for a in node.args[:lo]] + [
            ast.get_source_segment(text, k) for k in node.keywords]
        if all(kept):
          return f"{fn}({', '.join(kept)})"
  return f"{name}({', '.join(refs[:lo])})"


def at_call(e: E.KernelError, def_loc, at) -> E.KernelError:
  """A call's mistake (a misspelt or missing constexpr, an input too many) found at the kernel's
  def, moved to the call `at` that made it, the def kept as a note."""
  if (e.lineno, e.filename) != (def_loc.lineno, def_loc.filename) or at is None or not at.lineno:
    return e
  e.notes = (f"{e.loc}: the kernel",) + tuple(e.notes)
  e.loc = at
  return e


def call_note(at, args, names, constexprs=None) -> str:
  """`FILE:LINE:COL: the call (x: float32[1024], n=4)`: the note naming the call `at` (a Loc)."""
  shown = [f"{n}: {describe(a)}" for n, a in zip(names, args)]
  shown += [f"{k}={constexpr_text(v)}" for k, v in (constexprs or {}).items()]
  if any(type(a).__name__ == "BatchTracer" for a in args):     # (the shapes are an element's, not those passed)
    return f"{at}: the call under jax.vmap, for each element ({', '.join(shown)})"
  return f"{at}: the call ({', '.join(shown)})"


def float_scalar_at_call(e: E.KernelError, args, names, at) -> E.KernelError:
  """A float ml.scalar parameter used where the kernel needs an integer (a seed, a loop bound, an index:
  frontend/ops/elementwise_checks.py's float_param marks the error) that the call `at` passed a Python
  float (1.5, or one jax.jit traced): the call's mistake, reported there, the kernel's use kept as a note."""
  param = getattr(e, "scalar_param", None)
  if param is None or at is None or not at.lineno or param[0] not in names:
    return e
  name, use = param
  a = args[names.index(name)]
  weak = is_weak(a) and np.issubdtype(np.dtype(getattr(a, "dtype", np.int32)), np.floating)
  if not (isinstance(a, float) or weak):
    return e
  given = f"the Python float {a!r}" if isinstance(a, float) else "a Python float"
  whole = f" ({int(a)})" if isinstance(a, float) and a.is_integer() else ""
  e.notes = (f"{e.loc}: {name} used as {use}",) + tuple(e.notes)
  e.message = (f"{name} (an ml.scalar parameter) is given {given}, a float32 scalar, but the kernel uses it as"
               f" {use}, which must be an integer")
  e.hint = f"pass an int{whole} for {name}: a Python int is an int32 scalar"
  e.loc, e.args = at, (e.message,)
  return e


def call_noted(e: E.KernelError, at, args, names, constexprs=None) -> E.KernelError:
  """Mistakes found in the kernel (or its options) for this call's arguments: each gets a note
  naming the call `at` and what it passed (an int8 input meeting a float, a batch too large),
  unless the mistake is at the call already."""
  if at is None or not at.lineno or (e.filename, e.lineno) == (at.filename, at.lineno):
    return e
  note = call_note(at, args, names, constexprs)
  for err in e.errors:
    if note not in err.notes:     # (it replaces a plainer note at the same call: "the call that jax differentiates")
      err.notes = tuple(n for n in err.notes if not n.startswith(f"{at}: the call ")) + (note,)
  return e


def keyword_inputs(kernel, args, constexprs, bind=True, skip=()) -> tuple[tuple, dict]:
  """(args, constexprs) of a call, with the kernel's constexpr values bound by a functools.partial,
  and the inputs passed by keyword (`k(x, y=y)`, `k(y=y, x=x)`, as a Python function or a Triton
  kernel takes them) moved into their places. Only a run of inputs right after the positional
  ones moves: an output, an input given twice or a gap is left to check_constexprs to report."""
  given_kw = set(constexprs)
  constexprs = {**kernel._bound, **constexprs} if bind else dict(constexprs)
  pk = kernel.parsed
  hi = kernel._input_bounds(pk)[1]
  scalars = getattr(pk, "scalar_params", ())
  named = {pk.ref_params.index(k): k for k, v in constexprs.items()      # (not a Python constant for a
           if k in pk.ref_params[:hi] and (k in scalars or is_array_like(v))}      # constexpr left undeclared)
  if named and sorted(named) == list(range(len(args), len(args) + len(named))):
    args = tuple(args) + tuple(constexprs.pop(named[k]) for k in sorted(named))
  from . import positional          # (Triton's habit: constexprs by position after the inputs)
  from .bench import caller_loc
  given = {k: v for k, v in constexprs.items() if k not in kernel._bound or k in given_kw}
  return positional.place(kernel, tuple(args), constexprs, given, caller_loc() or pk.loc, skip)


def _declare_constexpr(pk, name: str, param: str, value) -> str:
  """The hint for a ref parameter given a Python constant by keyword: it was meant as a
  constexpr (the annotation forgotten), so show the signature that declares it one."""
  scalars = getattr(pk, "scalar_params", ())
  refs = [f"{r}: ml.scalar" if r in scalars else r for r in pk.ref_params if r != param]
  kws = [c for c in pk.constexpr_params if c != param] + [f"{param}: ml.constexpr"]
  return (f"{param}={value!r} is a compile-time constant: declare {param} a constexpr, keyword-only"
          f" after the arrays: def {name}({', '.join(refs + ['*'] + kws)})")


def _ref_by_keyword(pk, unknown, name, args, bounds) -> tuple[str, str]:
  """(message, hint) for ref parameters passed by keyword that keyword_inputs could not place: an
  output is returned, not passed; an input given by position already is given twice; an input
  after a gap needs the ones before it."""
  hi = (bounds or (0, len(pk.ref_params) - 1))[1]
  refs = [c for c in unknown if c in pk.ref_params]
  p = min(refs, key=lambda c: (pk.ref_params.index(c) >= len(args), pk.ref_params.index(c) < hi))   # twice, output, gap
  k = pk.ref_params.index(p)
  if k >= hi:
    return (f"{name}: {p} is an output, passed by keyword",
            f"{p} is an output: outputs are returned, not passed (out_shape describes them): call"
            f" {name}({', '.join(pk.ref_params[:hi])})")
  if k < len(args):
    return f"{name}: input {p} is given twice, by position and by keyword", f"{p} is input {k}, given by position already: drop {p}="
  last = max(pk.ref_params.index(c) for c in unknown if c in pk.ref_params[:hi])
  gap = [r for r in pk.ref_params[len(args):last] if r not in unknown]
  return (f"{name}: input{'s' if len(gap) > 1 else ''} {', '.join(gap)} not given (before {p}=)",
          f"pass every input, by position or by keyword: {name}({', '.join(pk.ref_params[:last + 1])})")


def check_constexprs(pk, constexprs: dict, name: str, loc, args=(), bounds=None) -> None:
  """Raise SignatureError for an unknown, missing or traced constexpr (`args`: the positional
  arguments, where a constexpr passed by position shows as an extra non-array; `bounds`: the
  (min, max) inputs the kernel can take, which tell an output passed by keyword)."""
  import jax
  unknown = [c for c in constexprs if c not in pk.constexpr_params]
  if unknown:
    ref = unknown[0] in pk.ref_params
    if ref and (unknown[0] in getattr(pk, "scalar_params", ()) or not isinstance(constexprs[unknown[0]], (bool, int, float, str))):
      message, hint = _ref_by_keyword(pk, unknown, name, args, bounds)      # (an input keyword_inputs left)
      raise E.SignatureError(message, loc, hint=hint)
    raise E.SignatureError(
        f"{name} has no constexpr parameter {unknown[0]!r}" + (" (it is a ref parameter)" if ref else ""),
        loc, hint=(_declare_constexpr(pk, name, unknown[0], constexprs[unknown[0]]) if ref else
                   f"{unknown[0]} is not a kernel option here: {ELSEWHERE[unknown[0]]}" if unknown[0] in ELSEWHERE else
                   _decorator_option_hint(unknown[0], constexprs[unknown[0]]) if unknown[0] in _DECORATOR else
                   f"its constexpr parameters are: {', '.join(pk.constexpr_params) or 'none'}"))
  missing = [c for c in pk.constexpr_params if c not in constexprs and c not in pk.defaults]
  if missing:
    extra = []                    # trailing non-arrays: constexprs passed by position
    for a in reversed(args):
      if is_array_like(a):
        break
      extra.insert(0, a)
    if extra:
      from . import positional
      given = ", ".join(describe(a) for a in extra)
      s = "s" if len(extra) > 1 else ""
      hint = keyword_hint(name, missing, extra)
      if tracing(args):           # jax.checkpoint(k, static_argnums=(2,))(x, y, 3): a keyword would be traced there
        bound = ", ".join(f"{c}={source_repr(v)}" for c, v in zip(missing, extra))
        them = "them" if len(extra) > 1 else "it"
        hint += (f"; under a JAX transformation, which traces keyword arguments, bind {them} first:"
                 f" functools.partial({name}, {bound})")
      raise E.SignatureError(
          f"{name} was given {len(extra)} extra positional argument{s} ({given}), and needs constexpr"
          f" argument(s) {', '.join(missing)}" + positional.too_many(pk, bounds or (0, 0), None, len(extra)), loc,
          hint=hint)
    last = args[-1] if len(args) > 1 else None
    if not (isinstance(last, jax.core.Tracer) and is_weak(last) and tuple(last.shape) == ()):
      raise E.SignatureError(f"{name} needs constexpr argument(s) {', '.join(missing)}", loc,
                             hint=keyword_hint(name, missing, ()))
    # jax.jit(add_some)(x, y, 3): the 3 traced (a weak 0-d value), where jax.jit would hand a static one on
    them = "them" if len(missing) > 1 else "it"
    raise E.SignatureError(
        f"{name} needs constexpr argument(s) {', '.join(missing)}, and was given a traced Python number after its"
        f" inputs: jax.jit traces every argument that static_argnums or static_argnames does not name", loc,
        hint=f"pass {them} by keyword and name {them} static: jax.jit({name}, static_argnames=["
             f"{', '.join(map(repr, missing))}])(..., {', '.join(f'{c}=...' for c in missing)}) (in your own jitted"
             f" function, make the argument that carries {them} static)")
  for k, v in constexprs.items():
    if isinstance(v, jax.core.Tracer) and partial_keyword(k, v):
      raise partial_error(name, k, "constexpr", loc)
    if isinstance(v, jax.core.Tracer):
      raise E.SignatureError(
          f"{name}: constexpr {k} is a traced value ({describe(v)}); a constexpr must be a Python"
          f" value known when the kernel is compiled", loc,
          hint=f"mark it static: jax.jit({name}, static_argnames=[{k!r}]) when you jit the kernel itself; in"
               f" your own jitted function, the argument that carries it (static_argnames=['<its name>'] or"
               f" static_argnums); jax.eval_shape, jax.checkpoint and jax.make_jaxpr trace keyword arguments"
               f" too: bind it first, functools.partial({name}, {k}=...); or pass a Python value (one your function"
               f" computes with jnp, jnp.minimum(128, x.shape[0]), is traced too, shapes or not: compute it with"
               f" Python or NumPy, min(128, x.shape[0]))")
    if isinstance(v, jax.Array):
      raise E.SignatureError(
          cap(f"{name}: constexpr {k} is a jax array ({describe(v)}); a constexpr must be a Python value"),
          loc, hint=f"pass a Python number or tuple, e.g. {k}=v.item() ({k}=float(v) or int(v) as its dtype is)"
          if v.ndim == 0 else f"pass its values as a NumPy array, {k}=np.asarray(v), or a tuple, {k}=tuple(v.tolist())"
          f" (v the array you passed: {describe(v)}); or, for values known only at run time, pass it as an input"
          f" of the kernel and read its elements there")


def tracing(args) -> bool:
  """Whether a call is being traced by JAX (jit, vmap, export...), not run eagerly: a traced
  input, or a trace in progress around inputs that are all concrete (a kernel of no inputs
  under jax.jit)."""
  import jax
  if any(isinstance(a, jax.core.Tracer) for a in args):
    return True
  try:
    from jax._src import core
    return not core.trace_state_clean()
  except (ImportError, AttributeError):      # a JAX without it: concrete inputs run eagerly
    return False


def partial_keyword(key: str, value) -> bool:
  """Whether the traced `value` of keyword `key` is a jax.tree_util.Partial's keyword, the Partial held by a frame
  of the call's stack (the user's `f(x)` of `f = Partial(k, interpret=True)` passed through jax.jit): a Partial is a
  pytree whose keywords are its leaves, so jax.jit, vmap or scan trace them (probe 62b)."""
  import sys
  try:
    from jax.tree_util import Partial
  except ImportError:
    return False
  f = sys._getframe(1)
  for _ in range(80):
    if f is None:
      return False
    if any(isinstance(p, Partial) and (p.keywords or {}).get(key) is value for p in list(f.f_locals.values())):
      return True
    f = f.f_back
  return False


def partial_error(name: str, key: str, what: str, loc):
  """MG006 of a keyword a jax.tree_util.Partial handed on traced (`what`: "interpret=" or "constexpr")."""
  shown = "interpret=True" if key == "interpret" else f"{key}=..."
  label = "interpret=" if key == "interpret" else f"constexpr {key}"
  return E.SignatureError(
      f"{name}: {label} is a traced value: jax.tree_util.Partial({name}, {shown}) holds its keywords as leaves of"
      f" a pytree, which jax.jit (vmap, scan, ...) traces like arrays", loc,
      hint=f"pass {key} at the call, in the traced function: f(..., {shown}) of a Partial({name}) without it; or"
           f" close over the kernel, jax.jit(lambda x: {name}(x, ..., {shown})); or pass"
           f" functools.partial({name}, {shown}) as a static argument (static_argnums), which is not traced")


def check_interpret(interpret, name: str, loc) -> None:
  import jax
  if isinstance(interpret, jax.core.Tracer) and partial_keyword("interpret", interpret):
    raise partial_error(name, "interpret", "interpret=", loc)
  if isinstance(interpret, jax.core.Tracer):
    raise E.SignatureError(f"{name}: interpret= is a traced value", loc,
                           hint="under jax.jit, mark it static: jax.jit(f, static_argnames=['interpret']);"
                                f" jax.eval_shape, jax.checkpoint and jax.make_jaxpr trace keyword arguments too: bind it first,"
                                f" functools.partial({name}, interpret=True)")
  if interpret is not None and not isinstance(interpret, (bool, np.bool_)):
    raise E.SignatureError(cap(f"{name}: interpret= takes True, False or None, got {interpret!r}"), loc,
                           hint="interpret=True runs the kernel with numpy on the CPU; None (the default)"
                                " follows MGPU_DSL_INTERPRET")
