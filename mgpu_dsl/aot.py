"""A kernel's methods that take specs instead of running it: mgpu_dsl's own views of a specialisation
(`typed_ir`, `mlir`, `check`, without a GPU) and JAX's ahead-of-time steps of a jitted function
(`lower`, `trace`, `eval_shape`), which a kernel offers as `jax.jit(kernel)` does, so code written for
jitted functions (`f.lower(x).as_text()`, `f.eval_shape(x)`) takes a kernel as it is."""
from __future__ import annotations

import functools
import sys

from .frontend import errors as E
from .frontend.loc import ours
from . import py_numbers
from .triton_names import in_user_alias


def user_errors(fn):
  """Re-raise KernelErrors without mgpu_dsl's frames: the user's line is in the message."""
  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    try:
      return fn(*args, **kwargs)
    except E.KernelError as e:
      in_user_alias(e, getattr(getattr(args[0] if args else None, "fn", None), "__globals__", None))
      if isinstance(e, E.SignatureError) and not ours(sys._getframe(1)):
        # the call's mistake (an input too many, a misspelt constexpr), at the user's call; one made by
        # mgpu_dsl itself (`python -m mgpu_dsl check`'s declared specs, autotune's configurations) stays at
        # the def, or moves at the user's call of the outer method
        e = _at_caller(e, args[0] if args else None)
      # An InternalError keeps its cause: the Mosaic GPU traceback is what a bug report needs.
      raise e.with_traceback(None) from (e.__cause__ if isinstance(e, E.InternalError) else None)
  return wrapper


def _at_caller(e, kernel):
  """A SignatureError found at the kernel's def, moved to the user's call of `kernel.check(...)`,
  `.typed_ir(...)`, `.mlir(...)` (or an autotuned kernel's), as `kernel(...)` moves it."""
  from . import calling
  from .bench import caller_loc
  parsed = getattr(kernel, "parsed", None) or getattr(getattr(kernel, "kernel", None), "parsed", None)
  if parsed is None or e.col_offset != parsed.loc.col_offset:     # (one at a parameter stays there)
    return e
  return calling.at_call(e, parsed.loc, caller_loc())


class JitStages:
  """jax.jit's ahead-of-time steps of a kernel (or an autotuned one) called with these constexprs."""

  def _jitted(self, interpret, constexprs):
    """`jax.jit` of this kernel with the constexprs (and `interpret`) bound: what `jax.jit(functools.partial(
    kernel, n=4)).lower(x)` lowers, named after the kernel as a jitted kernel is."""
    import jax
    def call(*args):
      return self(*args, interpret=interpret, **constexprs)
    call.__name__ = call.__qualname__ = self.__name__
    return jax.jit(call)

  def _by_position(self, args, constexprs):
    """(args, constexprs) with constexprs passed by position after the inputs (`k.lower(x, 64)`) moved to
    the keywords, bound rather than traced (positional.py)."""
    from . import calling
    return calling.keyword_inputs(getattr(self, "kernel", self), args, constexprs, bind=False,
                                  skip=getattr(self, "tuned", ()))

  @user_errors
  def lower(self, *args, interpret: bool | None = None, **constexprs):
    """`jax.jit(kernel).lower(*args)` with the constexprs bound: a `jax.stages.Lowered` (`.as_text()`,
    `.compile()`); `args` are arrays or jax.ShapeDtypeStructs. Lowering for the GPU needs one (or
    `jax.export.export(jax.jit(kernel), platforms=["cuda"])`); `interpret=True` lowers the CPU interpreter."""
    args, constexprs = self._by_position(args, constexprs)
    return self._jitted(interpret, constexprs).lower(*args)

  @user_errors
  def trace(self, *args, interpret: bool | None = None, **constexprs):
    """`jax.jit(kernel).trace(*args)` with the constexprs bound: a `jax.stages.Traced` (`.jaxpr`, `.lower()`)."""
    args, constexprs = self._by_position(args, constexprs)
    return self._jitted(interpret, constexprs).trace(*args)

  @user_errors
  def eval_shape(self, *args, interpret: bool | None = None, **constexprs):
    """The outputs' `jax.ShapeDtypeStruct`s for these arrays or specs, as `jax.eval_shape(kernel, *args)`
    gives them (the kernel is traced and checked; nothing runs)."""
    args, constexprs = self._by_position(args, constexprs)
    return self._jitted(interpret, constexprs).eval_shape(*args)


def _no_shapes(kernel, specs, what: str) -> None:
  """A bare shape passed for a spec (`k.check((256, 64))`): the call's mistake, with the spec it means."""
  import numbers
  from .bench import caller_loc
  for i, s in enumerate(specs):
    if isinstance(s, tuple) and s and all(isinstance(d, numbers.Integral) and not isinstance(d, bool) for d in s):
      name = kernel.parsed.ref_params[i] if i < len(kernel.parsed.ref_params) else f"input {i}"
      raise E.SignatureError(
          f"{kernel.__name__}.{what}: {name} is given the tuple {s!r}, a shape without a dtype; specs are arrays"
          f" or jax.ShapeDtypeStructs", caller_loc() or kernel.parsed.loc,
          hint=f"give the shape its dtype: jax.ShapeDtypeStruct({s!r}, jnp.float32)")


def _leaves(kernel, specs, constexprs):
  """(kernel, specs, constexprs), or where an input is a pytree of specs or arrays, the kernel of their
  leaves, the leaves and the constexprs left (pytree_inputs.py)."""
  from . import pytree_inputs
  from .bench import caller_loc
  return pytree_inputs.flat_call(kernel, specs, constexprs, caller_loc()) or (kernel, specs, constexprs)


def _output_trees(method):
  from . import pytree_inputs       # (imported when called: pytree_inputs imports calling, as aot's users do)
  import functools

  @functools.wraps(method)
  def wrapper(self, *args, **kwargs):
    return pytree_inputs.output_trees(method)(self, *args, **kwargs)
  return wrapper


class SpecMethods(JitStages):
  """Mixed into KernelFunction: what a kernel does for specs (arrays or jax.ShapeDtypeStructs)."""

  @user_errors
  @_output_trees
  def typed_ir(self, *specs, **constexprs) -> str:
    """The kernel's typed IR (after inference and sync insertion) for these argument specs.

    Works without a GPU: `print(double.typed_ir(jax.ShapeDtypeStruct((1024, 64), jnp.float32)))`.
    """
    from . import calling
    from .frontend import ir as kir
    self, specs, constexprs = _leaves(self, specs, constexprs)      # pytree inputs: the kernel of their leaves
    _no_shapes(self, specs, "typed_ir")
    return kir.dump(py_numbers.compiled(self, *calling.keyword_inputs(self, specs, constexprs))[0]["kernel"])

  @user_errors
  @_output_trees
  def mlir(self, *specs, **constexprs) -> str:
    """The Mosaic GPU module (MLIR text) this kernel compiles to for these argument specs.

    Works without a GPU: `print(double.mlir(jax.ShapeDtypeStruct((1024, 64), jnp.float32)))`.
    """
    import jax
    from . import calling
    from .lowering import kernel as lk
    self, specs, constexprs = _leaves(self, specs, constexprs)      # pytree inputs: the kernel of their leaves
    _no_shapes(self, specs, "mlir")
    specs, constexprs = calling.keyword_inputs(self, specs, constexprs)
    hit, specs = py_numbers.compiled(self, specs, constexprs)
    self._build(hit)
    shapes = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs]
    return lk.module_text(hit["built"], shapes)

  @user_errors
  @_output_trees
  def check(self, *specs, **constexprs) -> None:
    """Trace, check and build the kernel for these specs; raises KernelError on any mistake.

    Example: `double.check(jax.ShapeDtypeStruct((1024, 64), jnp.float32))`.
    """
    from . import calling
    self, specs, constexprs = _leaves(self, specs, constexprs)      # pytree inputs: the kernel of their leaves
    _no_shapes(self, specs, "check")
    self._build(py_numbers.compiled(self, *calling.keyword_inputs(self, specs, constexprs))[0])
