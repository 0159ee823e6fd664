"""How a compiled specialisation enters JAX: under the kernel's name, with no silent derivative.

`jax.grad` of a kernel call would otherwise fail deep inside JAX ("Differentiation
rule for 'mosaic_gpu_p' not implemented", or "Pure callbacks do not support JVP" in
interpret mode). Both paths go through a `jax.custom_jvp` whose rule raises a
KernelError that says how to attach a backward (docs/autodiff.md).
"""
from __future__ import annotations

import functools
from typing import Callable

from .frontend import errors as E


def no_derivative(f: Callable, name: str, loc) -> Callable:
  """`f`, whose derivative is a KernelError naming the kernel `name` (defined at `loc`)."""
  import jax

  @jax.custom_jvp
  def call(*args):
    return f(*args)

  @call.defjvp
  def _jvp(primals, tangents):
    raise E.DifferentiationError(
        f"jax cannot differentiate the kernel {name}: mgpu_dsl kernels have no automatic derivative",
        loc, hint="wrap the call in a function decorated with jax.custom_vjp and give it a backward"
                  " (a second kernel or jnp code); for forward mode (jax.jvp, jax.jacfwd) use"
                  " jax.custom_jvp and give it a tangent rule; a call whose result needs no derivative (an"
                  " aux output, a metric, a target under jax.lax.stop_gradient) takes its inputs through"
                  f" jax.lax.stop_gradient: {name}(jax.lax.stop_gradient(x)); see docs/autodiff.md")

  return call


def transpose_error(name: str, loc) -> E.KernelError:
  """MG009 for jax.grad transposing a kernel call: one made on a tangent inside a jax.custom_jvp
  rule (or under jax.linear_transpose), which JAX must run backwards to reverse."""
  return E.DifferentiationError(
      f"jax cannot transpose the kernel {name}: jax.grad (or jax.vjp, jax.linear_transpose) runs a"
      f" tangent computation backwards, and a kernel called on a tangent (in a jax.custom_jvp rule) is not"
      f" a linear map JAX can reverse", loc,
      hint="for reverse mode give the function a jax.custom_vjp with a backward (a second kernel or jnp"
           " code); or compute the custom_jvp rule's tangent with jnp code, which JAX can transpose;"
           " see docs/autodiff.md")


@functools.lru_cache(maxsize=None)
def guard_transpose() -> None:
  """A transpose rule for `jax.custom_batching.custom_vmap` calls (how a traced kernel call enters
  JAX, mgpu_dsl/batching.py): JAX has none, so transposing a kernel call was a raw
  NotImplementedError. A call of a kernel (its vmap rule carries `mgpu_kernel`) is MG009; any other
  call fails as JAX's own would. Installed once, only where JAX has no rule of its own."""
  try:
    from jax._src.custom_batching import custom_vmap_p
    from jax.interpreters import ad
    if custom_vmap_p in ad.primitive_transposes:
      return
  except (ImportError, AttributeError):      # another JAX layout: JAX's own error stays
    return

  def transpose(cts, *args, rule, **params):
    kernel = getattr(rule, "mgpu_kernel", None) or getattr(getattr(rule, "rule", None), "mgpu_kernel", None)
    if kernel is None:
      raise NotImplementedError(f"Transpose rule (for reverse-mode differentiation) for '{custom_vmap_p.name}'"
                                f" not implemented")
    raise transpose_error(*kernel)

  ad.primitive_transposes[custom_vmap_p] = transpose


def named_call(f: Callable, name: str, loc) -> Callable:
  """`f` (one built specialisation) jitted under the kernel's name, with no derivative.

  The name becomes the `func.func private @name` that wraps the Mosaic GPU custom
  call in `jax.jit(g).lower(...).as_text()`, and the `jit(name)` in XLA op metadata.
  """
  import jax
  guarded = no_derivative(f, name, loc)

  def call(*args):
    return guarded(*args)

  call.__name__ = call.__qualname__ = name
  return jax.jit(call)


class _Call:
  """One interpreted specialisation under a JAX trace: how it runs on each platform. Hashed by
  identity (a primitive's parameter)."""

  def __init__(self, interpret_fn: Callable, kernel_fn: Callable, out_specs, name: str):
    self.interpret_fn = interpret_fn     # jax.pure_callback of the interpreter
    self.kernel_fn = kernel_fn           # () -> the compiled Mosaic GPU call (built when asked)
    self.out_specs = out_specs
    self.name = name

  def __repr__(self):
    return f"interpret({self.name})"


@functools.lru_cache(maxsize=None)
def _interpret_primitive():
  """`mgpu_dsl_interpret`: interpret mode under a JAX trace. On the CPU (and on a machine with
  a GPU) it lowers to the interpreter's callback; lowered for CUDA where there is no GPU (an
  export for a GPU elsewhere, with MGPU_DSL_INTERPRET=1 or interpret=True) it lowers to the
  compiled kernel, as does any export for CUDA: a callback cannot run in an exported CUDA
  module, and the interpreter stands in for a GPU this machine lacks, not for the kernel."""
  import jax
  from jax.extend.core import Primitive
  from jax.interpreters import mlir

  from .bench import has_gpu

  p = Primitive("mgpu_dsl_interpret")
  p.multiple_results = True
  p.def_impl(lambda *args, call: call.interpret_fn(*args))
  p.def_abstract_eval(lambda *avals, call: [jax.core.ShapedArray(tuple(s.shape), s.dtype) for s in call.out_specs])

  def interpreted(ctx, *args, call):
    if getattr(ctx.module_context.lowering_parameters, "for_export", False):
      from .bench import caller_loc
      platforms = ", ".join(ctx.module_context.platforms)
      raise E.SignatureError(
          f"{call.name} runs in interpret mode, a host callback, which jax.export cannot hold (exporting for"
          f" {platforms})", caller_loc(),
          hint="export for platforms=['cuda'] alone (the export holds the compiled kernel, also in interpret"
               " mode); run interpret mode by calling the function, not through jax.export")
    return mlir.lower_fun(call.interpret_fn, multiple_results=True)(ctx, *args)

  def cuda(ctx, *args, call):
    if has_gpu() and not getattr(ctx.module_context.lowering_parameters, "for_export", False):
      return interpreted(ctx, *args, call=call)
    run = call.kernel_fn()
    return mlir.lower_fun(lambda *a: list(run(*a)), multiple_results=True)(ctx, *args)

  mlir.register_lowering(p, interpreted)
  mlir.register_lowering(p, cuda, platform="cuda")
  return p


def interpreted_call(interpret_fn: Callable, kernel_fn: Callable, out_specs, name: str) -> Callable:
  """`interpret_fn` (the interpreter under a trace) as one JAX primitive whose CUDA lowering on
  a machine without a GPU is the compiled kernel `kernel_fn()` (see _interpret_primitive)."""
  call = _Call(interpret_fn, kernel_fn, out_specs, name)

  def run(*args):
    return _interpret_primitive().bind(*args, call=call)
  return run
