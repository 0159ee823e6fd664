"""How a compiled specialisation enters JAX: under the kernel's name, with no silent derivative.

`jax.grad` of a kernel call would otherwise fail deep inside JAX ("Differentiation
rule for 'mosaic_gpu_p' not implemented", or "Pure callbacks do not support JVP" in
interpret mode). Both paths go through a `jax.custom_jvp` whose rule raises a
KernelError that says how to attach a backward (docs/autodiff.md).
"""
from __future__ import annotations

import contextlib
import contextvars
import functools
from typing import Callable

from .frontend import errors as E


def derivative_error(name: str, loc, inputs=()) -> E.KernelError:
  """MG009 for the kernel `name`; `inputs`: its input parameters, for the stop_gradient call the
  hint writes (every input of a call, in its place)."""
  held = ", ".join(f"jax.lax.stop_gradient({n})" for n in inputs or ("x",))
  return E.DifferentiationError(
      f"jax cannot differentiate the kernel {name}: mgpu_dsl kernels have no automatic derivative",
      loc, hint="wrap the call in a function decorated with jax.custom_vjp and give it a backward"
                " (a second kernel or jnp code); for forward mode (jax.jvp, jax.jacfwd) use"
                " jax.custom_jvp and give it a tangent rule; a call whose result needs no derivative (a"
                " metric mixed into the loss) takes its inputs through"
                f" jax.lax.stop_gradient: {name}({held}); see docs/autodiff.md")


class _Missing:
  """The kernel a missing derivative belongs to (a primitive's parameter, hashed by identity)."""

  def __init__(self, name: str, loc, inputs=(), at=None, rule=None):
    self.name, self.loc, self.inputs, self.at = name, loc, tuple(inputs), at
    self.rule = rule          # "forward" / "backward": the call is in a jax.custom_vjp's rule, differentiated again

  def error(self) -> E.KernelError:
    e = derivative_error(self.name, self.loc, self.inputs)
    if self.rule is not None:        # jax.hessian (jax.jacfwd of jax.grad) of a function with a custom_vjp
      e.hint = (f"the call is in a jax.custom_vjp's {self.rule}, which a second derivative (jax.hessian, jax.jacfwd"
                f" of jax.grad) differentiates in turn, and JAX takes a custom_vjp's derivative once: define the"
                f" derivative with jax.custom_jvp instead, its rule computing the primal with the function itself"
                f" and the tangent in jnp code (@f.defjvp def f_jvp(p, t): return f(p[0]), 2 * p[0] * t[0]), which"
                f" JAX differentiates to any order; see docs/autodiff.md")
    if self.at is not None and getattr(self.at, "lineno", 0):      # the call jax differentiates (jax.grad's
      e.notes = tuple(e.notes) + (f"{self.at}: the call that jax differentiates",)   # transpose runs after it)
    return e


@functools.lru_cache(maxsize=None)
def _no_tangent_primitive():
  """`mgpu_dsl_no_derivative`: the tangents of a kernel call's outputs, linear in the inputs'
  tangents and never computed. Evaluating or lowering it (forward mode: jax.jvp, jax.linearize's
  function) and transposing it with a cotangent that is not a symbolic zero (jax.grad through the
  call) is MG009; where no derivative of the outputs is used (an aux output of jax.grad, a result
  under jax.lax.stop_gradient), JAX drops it or transposes only zeros, and nothing fails."""
  import jax
  from jax.extend.core import Primitive
  from jax.interpreters import ad, batching, mlir

  p = Primitive("mgpu_dsl_no_derivative")
  p.multiple_results = True

  def impl(*tangents, avals, kernel):
    raise kernel.error()

  def lowering(ctx, *tangents, avals, kernel):
    raise kernel.error()

  def transpose(cts, *tangents, avals, kernel):
    if any(type(ct) is not ad.Zero for ct in cts):
      raise kernel.error()
    return [ad.Zero(t.aval) if ad.is_undefined_primal(t) else None for t in tangents]

  def batch(args, dims, *, avals, kernel):
    size = next(a.shape[d] for a, d in zip(args, dims) if d is not None)
    args = [batching.bdim_at_front(a, d, size) for a, d in zip(args, dims)]
    out = p.bind(*args, avals=tuple(jax.core.ShapedArray((size, *a.shape), a.dtype) for a in avals), kernel=kernel)
    return out, [0] * len(out)

  def jvp(primals, tangents, *, avals, kernel):      # linear: its tangent is itself, of the tangents
    tangents = [ad.instantiate_zeros(t) for t in tangents]
    return p.bind(*primals, avals=avals, kernel=kernel), p.bind(*tangents, avals=avals, kernel=kernel)

  p.def_impl(impl)
  ad.primitive_jvps[p] = jvp
  p.def_abstract_eval(lambda *tangents, avals, kernel: list(avals))
  ad.primitive_transposes[p] = transpose
  batching.primitive_batchers[p] = batch
  mlir.register_lowering(p, lowering)
  return p


def no_derivative(f: Callable, name: str, loc, inputs=(), at=None) -> Callable:
  """`f`, whose derivative is a KernelError naming the kernel `name` (defined at `loc`, with the
  input parameters `inputs`) where one is used: the error waits until a tangent or cotangent of the
  outputs is needed. `at`: the user's call, noted as the call jax differentiates (else the frame that asks
  for the tangent: where JAX differentiates a jaxpr, a jax.lax.scan's or jax.lax.cond's body under jax.jit,
  the call is no longer on the stack, and the note pointed into Python's contextlib)."""
  import jax
  import numpy as np

  kernel = _Missing(name, loc, inputs, at)

  @jax.custom_jvp
  def call(*args):
    return f(*args)

  @call.defjvp
  def _jvp(primals, tangents):
    outs = call(*primals)       # (itself: a derivative of this rule, jax.hessian's, comes back here)
    inexact = [jnp_inexact(o.dtype) for o in outs]
    ts = [t for t in tangents if t.dtype != jax.dtypes.float0]
    avals = tuple(jax.core.ShapedArray(o.shape, o.dtype) for o, x in zip(outs, inexact) if x)
    from .bench import caller_loc
    here = _Missing(kernel.name, kernel.loc, kernel.inputs, kernel.at or caller_loc(), _custom_vjp_rule())
    missing = iter(_no_tangent_primitive().bind(*ts, avals=avals, kernel=here))
    return outs, type(outs)(next(missing) if x else np.zeros(o.shape, jax.dtypes.float0)
                            for o, x in zip(outs, inexact))

  return call


def _custom_vjp_rule() -> str | None:
  """"forward" or "backward" where a kernel's call being differentiated runs in a jax.custom_vjp's rule (JAX's
  `_flatten_fwd` / `_flatten_bwd` on the stack: a derivative of the derivative, jax.hessian's); else None."""
  import traceback
  for frame in reversed(traceback.extract_stack()):
    if frame.filename.endswith("custom_derivatives.py") and frame.name in ("_flatten_fwd", "_flatten_bwd"):
      return "forward" if frame.name == "_flatten_fwd" else "backward"
  return None


def jnp_inexact(dtype) -> bool:
  import jax.numpy as jnp
  return bool(jnp.issubdtype(dtype, jnp.inexact))


def transpose_error(name: str, loc, at=None) -> E.KernelError:
  """MG009 for jax.grad transposing a kernel call: one made on a tangent inside a jax.custom_jvp
  rule (or under jax.linear_transpose), which JAX must run backwards to reverse; `at`: that call."""
  notes = (f"{at}: the call that jax transposes",) if at is not None and getattr(at, "lineno", 0) else ()
  return E.DifferentiationError(
      f"jax cannot transpose the kernel {name}: jax.grad (or jax.vjp, jax.linear_transpose) runs a"
      f" tangent computation backwards, and a kernel called on a tangent (in a jax.custom_jvp rule) is not"
      f" a linear map JAX can reverse", loc,
      hint="for reverse mode give the function a jax.custom_vjp with a backward (a second kernel or jnp"
           " code); or compute the custom_jvp rule's tangent with jnp code, which JAX can transpose;"
           " see docs/autodiff.md", notes=notes)


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
  """`f` (one built specialisation) jitted under the kernel's name, with no derivative (jitted also under
  jax.disable_jit).

  The name becomes the `func.func private @name` that wraps the Mosaic GPU custom
  call in `jax.jit(g).lower(...).as_text()`, and the `jit(name)` in XLA op metadata.

  The operands and the results pass optimization barriers. Without them XLA's GPU compiler folds a
  slice that feeds the custom call into it (a "dynamic-slice fusion" that hands the kernel the sliced
  array's buffer at an offset), and a dynamic-update-slice of its result likewise: with an aliased
  input (`input_output_aliases`) the kernel's result was wrong, zeros or another array's data
  (`k(c[768:], v[768:])`, `jax.lax.map(k, xs, batch_size=256)`), and an offset off 256 bytes failed
  at run time ("Input buffer 0 is not 256-byte aligned"); measured on the H100, jax 0.11.2
  (benchmarks/probe_vmap_map.py, design note 143). The barriers cost nothing at run time: a slice is
  copied, as it was before those fusions.
  """
  import jax
  guarded = no_derivative(f, name, loc)

  def call(*args):
    return jax.lax.optimization_barrier(guarded(*jax.lax.optimization_barrier(args)) if args else guarded())

  call.__name__ = call.__qualname__ = name
  jitted = jax.jit(call)

  def run(*args):
    # Under jax.disable_jit the jit above would run `call` op by op, binding the Mosaic GPU custom call eagerly,
    # which JAX cannot evaluate ("Evaluation rule for 'mosaic_gpu_p' not implemented"): the kernel stays one
    # compiled call there (a kernel has no op-by-op form; interpret mode is the eager path).
    if jax.config.jax_disable_jit:
      with jax.disable_jit(False):
        return jitted(*args)
    return jitted(*args)
  run.__name__ = run.__qualname__ = name
  return run


class _Deferred:
  """One compiled specialisation under a JAX trace, its Mosaic GPU module built when the call is first lowered
  (or run). Hashed by identity (a primitive's parameter)."""

  def __init__(self, build: Callable, out_specs, name: str):
    self.build = build                   # () -> the compiled Mosaic GPU call (built once, when asked)
    self.out_specs = out_specs
    self.name = name

  def __repr__(self):
    return self.name


@functools.lru_cache(maxsize=None)
def _compiled_primitive():
  """`mgpu_dsl_call`: a compiled kernel's call under a JAX trace, whose abstract evaluation is its `out_shape`.
  The Mosaic GPU module is built when the call is lowered (jax.jit's compile, jax.export), so jax.eval_shape,
  jax.make_jaxpr and `jax.jit(f).trace(...)`, which ask for shapes only, build nothing (they built every kernel's
  module, and a build can take a second). The lowering is that of the kernel's named call (named_call)."""
  import jax
  from jax.extend.core import Primitive
  from jax.interpreters import mlir

  p = Primitive("mgpu_dsl_call")
  p.multiple_results = True
  p.def_impl(lambda *args, kernel: list(kernel.build()(*args)))
  p.def_abstract_eval(lambda *avals, kernel: [jax.core.ShapedArray(tuple(s.shape), s.dtype) for s in kernel.out_specs])

  def lowering(ctx, *args, kernel):
    run = kernel.build()
    return mlir.lower_fun(lambda *a: list(run(*a)), multiple_results=True)(ctx, *args)

  mlir.register_lowering(p, lowering)
  return p


def compiled_call(build: Callable, out_specs, name: str) -> Callable:
  """The compiled call of one specialisation under a trace: `build()` (its named_call) runs when it is lowered."""
  kernel = _Deferred(build, out_specs, name)

  def run(*args):
    return _compiled_primitive().bind(*args, kernel=kernel)
  return run


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
  p.def_impl(lambda *args, call, site: call.interpret_fn(*args, site=site))
  p.def_abstract_eval(lambda *avals, call, site: [jax.core.ShapedArray(tuple(s.shape), s.dtype)
                                                  for s in call.out_specs])

  def interpreted(ctx, *args, call, site):
    if getattr(ctx.module_context.lowering_parameters, "for_export", False):
      from .bench import caller_loc
      platforms = ", ".join(ctx.module_context.platforms)
      raise E.SignatureError(
          f"{call.name} runs in interpret mode, a host callback, which jax.export cannot hold (exporting for"
          f" {platforms})", caller_loc(),
          hint="export for platforms=['cuda'] alone (the export holds the compiled kernel, also in interpret"
               " mode); run interpret mode by calling the function, not through jax.export")
    auto, every = _automatic_axes(ctx)
    if auto:
      from .bench import caller_loc
      raise E.SignatureError(
          f"{call.name} runs in interpret mode, a host callback, inside a jax.shard_map that leaves mesh"
          f" axis{'es' if len(auto) > 1 else ''} {', '.join(map(repr, auto))} automatic: JAX runs a callback there"
          f" only where every mesh axis is manual", caller_loc(),
          hint=f"name every mesh axis in the shard_map, axis_names={{{', '.join(map(repr, every))}}} (or leave"
               f" axis_names out), or run the kernel compiled, on the GPU (interpret=False)")
    outs = mlir.lower_fun(functools.partial(call.interpret_fn, site=site), multiple_results=True)(ctx, *args)
    return _replicated(ctx, outs)

  def cuda(ctx, *args, call, site):
    if has_gpu() and not getattr(ctx.module_context.lowering_parameters, "for_export", False):
      return interpreted(ctx, *args, call=call, site=site)
    run = call.kernel_fn()
    return mlir.lower_fun(lambda *a: list(run(*a)), multiple_results=True)(ctx, *args)

  mlir.register_lowering(p, interpreted)
  mlir.register_lowering(p, cuda, platform="cuda")
  return p


def interpreted_call(interpret_fn: Callable, kernel_fn: Callable, out_specs, name: str) -> Callable:
  """`interpret_fn` (the interpreter under a trace) as one JAX primitive whose CUDA lowering on
  a machine without a GPU is the compiled kernel `kernel_fn()` (see _interpret_primitive)."""
  from . import jit_errors
  jit_errors.install()          # the interpreter's run-time errors under jax.jit: its KernelError
  call = _Call(interpret_fn, kernel_fn, out_specs, name)

  def run(*args):
    return _interpret_primitive().bind(*args, call=call, site=_CALL_SITE.get())
  return run


# The user's call being traced, as (file, line, note, ...) (mgpu_dsl/batching.py): an interpreted call
# under a trace carries it, and its run-time errors get the note an eager call's errors get.
_CALL_SITE: contextvars.ContextVar = contextvars.ContextVar("mgpu_dsl_call_site", default=None)


@contextlib.contextmanager
def call_site(site):
  """Within: interpreted calls bound under a trace carry `site` (None: keep the enclosing one)."""
  token = _CALL_SITE.set(site) if site is not None else None
  try:
    yield
  finally:
    if token is not None:
      _CALL_SITE.reset(token)


def _automatic_axes(ctx) -> tuple[list, list]:
  """(the mesh axes a jax.shard_map with `axis_names` leaves automatic around this lowering, every mesh axis):
  JAX's callback lowering refuses the first with a raw NotImplementedError. ([], []) elsewhere."""
  try:
    from jax._src import sharding_impls
    axis = ctx.module_context.axis_context
    if not isinstance(axis, sharding_impls.SPMDAxisContext):
      return [], []
    every = [str(a) for a in axis.mesh.axis_names]
    return [str(a) for a in axis.mesh.axis_names if a not in axis.manual_axes], every
  except (ImportError, AttributeError):
    return [], []


def _replicated(ctx, outs) -> list:
  """The interpreter's outputs in a jax.jit over several devices (its inputs sharded, no jax.shard_map) marked
  replicated. JAX runs a pure_callback once, on device 0 (a MAXIMAL sharding), and that sharding reached the
  jitted function's result: an array JAX could not use (`y + 1`: "Cannot convert GSPMDSharding {maximal
  device=0} into SdyArray"). The outputs' type says replicated (the callback computes the whole value), so the
  partitioner copies them to every device, as it would a jnp result it chose to replicate. Unchanged where
  there is one device, inside jax.shard_map (each device runs the callback on its block), or in a JAX whose
  lowering internals differ."""
  try:
    from jax._src import config, sharding_impls
    from jax._src.interpreters import mlir
    axis = ctx.module_context.axis_context
    if not isinstance(axis, sharding_impls.ShardingContext) or axis.num_devices <= 1:
      return outs
    result = []
    for o, aval in zip(outs, ctx.avals_out):
      o = o[0] if isinstance(o, (list, tuple)) else o
      if config.use_shardy_partitioner.value:
        sharding = sharding_impls.SdyArray(mesh_shape=(), dim_shardings=(
            sharding_impls.SdyDim(axes=(), is_open=False),) * aval.ndim)
      else:
        from jax._src.lib import xla_client as xc
        sharding = xc.OpSharding()
        sharding.type = xc.OpSharding.Type.REPLICATED
      result.append([mlir.wrap_with_sharding_op(ctx, o, aval, sharding)])
    return result
  except (ImportError, AttributeError, TypeError):
    return outs


def varying_like(args, outs) -> list:
  """`outs` typed as varying over every mesh axis some input varies over (jax.shard_map's check_vma): a
  kernel's outputs depend on all its inputs, but the Mosaic GPU call and interpret mode's callback type
  their outputs invariant, so `out_specs=P()` took device 0's block of a per-device result silently (where
  JAX refuses it for jnp code) and a collective saw a value it took for replicated."""
  import jax

  def varying(x) -> frozenset:       # (jax 0.10 keeps them in aval.mat.varying, earlier ones in aval.vma)
    try:
      aval = jax.typeof(x)
    except TypeError:
      return frozenset()
    mat = getattr(aval, "mat", None)
    return frozenset((getattr(mat, "varying", None) if mat is not None else getattr(aval, "vma", None)) or ())
  vma = frozenset().union(*map(varying, args))
  if not vma:
    return list(outs)
  pcast, pvary = getattr(jax.lax, "pcast", None), getattr(jax.lax, "pvary", None)
  result = []
  for o in outs:
    missing = tuple(sorted(vma - varying(o)))
    if missing and pcast is not None:
      o = pcast(o, missing, to="varying")
    elif missing and pvary is not None:
      o = pvary(o, missing)
    result.append(o)
  return result
