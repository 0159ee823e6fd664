"""`@mgpu_kernel`: the decorator that turns a kernel function into a JAX-callable."""
from __future__ import annotations

import functools
import inspect
import os

from .frontend import compile as fc
from .frontend import errors as E
from .frontend import ir as kir


def _user_errors(fn):
  """Re-raise KernelErrors without mgpu_dsl's frames: the user's line is in the message."""
  @functools.wraps(fn)
  def wrapper(*args, **kwargs):
    try:
      return fn(*args, **kwargs)
    except E.KernelError as e:
      # An InternalError keeps its cause: the Mosaic GPU traceback is what a bug report needs.
      raise e.with_traceback(None) from (e.__cause__ if isinstance(e, E.InternalError) else None)
  return wrapper


def _as_tuple3(x, what, loc):
  if isinstance(x, int) and not isinstance(x, bool):
    x = (x,)
  if (not isinstance(x, (tuple, list)) or not 1 <= len(x) <= 3
      or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in x)):
    raise E.LaunchConfigError(f"{what} must be 1 to 3 positive ints, got {x!r}", loc)
  return tuple(x) + (1,) * (3 - len(x))


def _call_with_meta(f, args, constexprs, what, loc):
  """Call a grid/out_shape callable with the inputs and whichever constexprs it names."""
  try:
    params = inspect.signature(f).parameters
  except (TypeError, ValueError):
    params = None
  try:
    if params is None:
      return f(*args)
    if any(p.kind == p.VAR_KEYWORD for p in params.values()):
      return f(*args, **constexprs)
    return f(*args, **{k: v for k, v in constexprs.items() if k in params})
  except Exception as e:
    raise E.SignatureError(
        f"the {what} callable failed for {len(args)} input(s) of shapes"
        f" {[tuple(getattr(a, 'shape', ())) for a in args]}: {type(e).__name__}: {e}", loc,
        hint=f"{what} is called with the kernel's inputs (and the constexprs it names)") from None


class KernelFunction:
  """A kernel function compiled per (shapes, dtypes, constexprs). Call it like a JAX function."""

  def __init__(self, fn, *, out_shape, grid=(1,), block=128, cluster=None, interpret=None):
    functools.update_wrapper(self, fn)
    self.fn = fn
    self.out_shape = out_shape
    self.grid = grid
    self.block = block
    self.cluster = cluster
    self.interpret = interpret
    self._parsed = None
    self._cache: dict = {}

  @property
  def parsed(self) -> fc.ParsedKernel:
    if self._parsed is None:
      self._parsed = fc.parse(self.fn)
    return self._parsed

  # ------------------------------------------------------------ specialisation
  def _specialise(self, args, constexprs):
    import jax
    pk = self.parsed
    loc = pk.loc
    out = self.out_shape
    if out is None:
      raise E.LaunchConfigError("@mgpu_kernel needs out_shape=", loc,
                                hint="out_shape=jax.ShapeDtypeStruct(shape, dtype), or lambda x: x")
    if callable(out) and not hasattr(out, "shape"):
      out = _call_with_meta(out, args, constexprs, "out_shape", loc)
    leaves, treedef = jax.tree.flatten(out)
    try:
      out_specs = [jax.ShapeDtypeStruct(tuple(l.shape), l.dtype) for l in leaves]
    except AttributeError:
      raise E.LaunchConfigError(f"out_shape must give arrays or jax.ShapeDtypeStructs, got {out!r}",
                                loc) from None
    grid = _call_with_meta(self.grid, args, constexprs, "grid", loc) if callable(self.grid) else self.grid
    grid = _as_tuple3(grid, "grid", loc)
    block = self.block
    if not isinstance(block, int) or isinstance(block, bool) or block % 128 or not 128 <= block <= 1024:
      raise E.LaunchConfigError(
          f"block must be a multiple of 128 threads (one warpgroup) between 128 and 1024, got {block!r}",
          loc, hint="Mosaic GPU works in warpgroups of 128 threads: use block=128, 256 or 384")
    cluster = self.cluster
    if callable(cluster):
      cluster = _call_with_meta(cluster, args, constexprs, "cluster", loc)
    cluster = _as_tuple3(cluster or (1,), "cluster", loc)
    for d, g, c in zip("xyz", grid, cluster):
      if g % c:
        raise E.LaunchConfigError(f"grid {grid[:3]} is not divisible by cluster {cluster} along {d}", loc,
                                  hint="make each grid dimension a multiple of the cluster's")
    if cluster[0] * cluster[1] * cluster[2] > 16:
      raise E.LaunchConfigError(f"a cluster holds at most 16 CTAs on Hopper, got {cluster}", loc)
    try:
      # int64/float64 specs become what JAX will pass (int32/float32 unless x64 is on).
      canon = lambda x: jax.ShapeDtypeStruct(tuple(x.shape), jax.dtypes.canonicalize_dtype(x.dtype))
      in_specs = [fc.ArgSpec.of(canon(a)) for a in args]
      out_specs = [canon(s) for s in out_specs]
      out_fspecs = [fc.ArgSpec.of(s) for s in out_specs]
    except (TypeError, AttributeError) as e:
      raise E.SignatureError(f"kernel arguments must be arrays: {e}", loc) from None
    key = (tuple(in_specs), tuple(out_fspecs), grid, block, cluster,
           tuple(sorted((k, _hashable(v)) for k, v in constexprs.items())))
    return key, in_specs, out_fspecs, out_specs, treedef, grid, block, cluster

  def _compile(self, args, constexprs):
    return self._compile_batched(args, constexprs, ())

  def _compile_batched(self, args, constexprs, levels):
    """The compiled specialisation for `args`, with `levels` of jax.vmap batch dimensions in
    front of the batched inputs (mgpu_dsl/batching.py); () for a plain call."""
    from . import batching
    own = batching._unbatched_specs(args, levels) if levels else args
    key, in_specs, out_fspecs, out_specs, treedef, grid, block, cluster = self._specialise(own, constexprs)
    key = key + (tuple((n, tuple(b)) for n, b in levels),)
    hit = self._cache.get(key)
    if hit is None:
      kernel = fc.trace(self.parsed, in_specs, out_fspecs, constexprs, grid=grid, block=block,
                        cluster=cluster, batch=batching.batch_spec(levels, grid))
      if levels:
        out_specs = batching.batched_out_specs(out_specs, levels)
      hit = self._cache[key] = {"kernel": kernel, "treedef": treedef, "out_specs": out_specs}
    return hit

  def _grid_of(self, specs, constexprs):
    return self._specialise(specs, constexprs)[5]

  def _launch(self, hit, args, interpret: bool):
    """Run a compiled specialisation: on the GPU, or in interpret mode."""
    if interpret:
      from .lowering import interpret as interp
      return interp.run(hit["kernel"], args, hit["out_specs"])
    if "fn" not in hit:
      from .lowering import kernel as lk
      hit["fn"] = lk.build(hit["kernel"])
    return hit["fn"](*args)

  def _interpret(self, interpret):
    if interpret is not None:
      return bool(interpret)
    if self.interpret is not None:
      return bool(self.interpret)
    return os.environ.get("MGPU_DSL_INTERPRET", "") not in ("", "0", "false", "False")

  # ------------------------------------------------------------ public
  @_user_errors
  def __call__(self, *args, interpret=None, **constexprs):
    import jax
    from . import batching
    hit = self._compile(args, constexprs)
    outs = batching.call(self, args, constexprs, self._interpret(interpret))
    return jax.tree.unflatten(hit["treedef"], list(outs))

  @_user_errors
  def typed_ir(self, *specs, **constexprs) -> str:
    """The kernel's typed IR (after inference and sync insertion) for these argument specs."""
    return kir.dump(self._compile(specs, constexprs)["kernel"])

  @_user_errors
  def mlir(self, *specs, **constexprs) -> str:
    """The Mosaic GPU module (MLIR text) this kernel compiles to for these argument specs.

    Works without a GPU: `print(double.mlir(jax.ShapeDtypeStruct((1024, 64), jnp.float32)))`.
    """
    import jax
    from .lowering import kernel as lk
    hit = self._compile(specs, constexprs)
    if "fn" not in hit:
      hit["fn"] = lk.build(hit["kernel"])
    shapes = [jax.ShapeDtypeStruct(s.shape, s.dtype) for s in specs]
    return lk.module_text(hit["fn"], shapes)

  @_user_errors
  def check(self, *specs, **constexprs) -> None:
    """Trace, check and build the kernel for these specs; raises KernelError on any mistake."""
    from .lowering import kernel as lk
    hit = self._compile(specs, constexprs)
    if "fn" not in hit:
      hit["fn"] = lk.build(hit["kernel"])


def _hashable(v):
  try:
    hash(v)
    return v
  except TypeError:
    return repr(v)


def mgpu_kernel(fn=None, *, out_shape=None, grid=(1,), block=128, cluster=None, interpret=None):
  """Compile a Python kernel function to a Mosaic GPU kernel callable from JAX.

  Parameters of the kernel are GMEM refs: the inputs, then the outputs
  described by `out_shape`. Parameters annotated `ml.constexpr` (or
  keyword-only) are compile-time constants passed by keyword.

  Example::

      @mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,))
      def double(x, out):
          i = ml.program_id(0)
          buf = ml.smem((128, 64))
          ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
          buf[...] = buf[...] * 2
          ml.copy(buf, out.at[ml.ds(i * 128, 128), :])

      y = jax.jit(double)(jnp.ones((1024, 64), jnp.float32))

  Args:
    out_shape: a jax.ShapeDtypeStruct, a pytree of them, or a callable of the
      inputs (and constexprs) returning one.
    grid: the number of CTAs (programs) along up to 3 axes, or a callable of
      the inputs (and constexprs).
    block: threads per CTA, a multiple of 128 (one warpgroup).
    cluster: CTAs per cluster along up to 3 axes (each must divide the grid).
    interpret: run on the CPU with numpy instead (also MGPU_DSL_INTERPRET=1).
  """
  def wrap(f):
    return KernelFunction(f, out_shape=out_shape, grid=grid, block=block, cluster=cluster,
                          interpret=interpret)
  return wrap(fn) if fn is not None else wrap
