"""`@mgpu_kernel`: the decorator that turns a kernel function into a JAX-callable."""
from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import numbers
import os
import re
import time
import types
from typing import Any, Callable, NamedTuple

import numpy as np

from . import cache as C
from . import calling, empty_grid, grid_hints, meta_calls, output_names
from . import py_numbers, pytree_inputs, signature, stand_ins
from .aot import SpecMethods, user_errors as _user_errors
from . import deps as D
from . import dump
from . import narrowing
from . import wrap
from .bench import caller_loc, has_gpu
from .frontend import compile as fc, hw, jax_wrapped
from .frontend import errors as E
from .frontend import ir as kir
from .frontend import language as L
from .frontend import source as fsource
from .frontend.pickling import ByReference

log = dump.log
DEFAULT_CACHE_SIZE = 64


def _runtime_text(v) -> str:
  """An element of a launch tuple in the user's words: a run-time value (a tracer, a 0-d array) by
  its kind, not JAX's repr of it (JitTracer(~int32[]))."""
  if hasattr(v, "shape") and hasattr(v, "dtype"):
    return f"a run-time {getattr(v.dtype, 'name', v.dtype)} value"
  return repr(v)


def _as_tuple3(x, what, loc, computed=True, fn=None):
  """`x` as a 3-tuple of positive ints; `fn`: the grid callable that computed it (hints rewrite it)."""
  integral = lambda i: isinstance(i, numbers.Integral) and not isinstance(i, (bool, np.bool_))
  if integral(x):
    x = (x,)
  if what == "grid" and isinstance(x, (tuple, list)) and len(x) == 0:
    x = (1,)                            # Pallas's grid=(): one program
  if isinstance(x, (tuple, list)) and all(integral(i) for i in x):
    x = tuple(int(i) for i in x)        # NumPy ints (np.prod of a shape) are ints here
  if (not isinstance(x, (tuple, list)) or not 1 <= len(x) <= 3
      or not all(isinstance(i, int) and not isinstance(i, bool) and i > 0 for i in x)):
    # (a NumPy scalar, np.ceil(n / 128), has a shape and a dtype but is known when compiling)
    runtime = isinstance(x, (tuple, list)) and any(
        hasattr(i, "shape") and hasattr(i, "dtype") and not isinstance(i, np.generic) for i in x)
    zero = (what == "grid" and isinstance(x, (tuple, list)) and 1 <= len(x) <= 3
            and all(isinstance(i, int) and not isinstance(i, bool) and i >= 0 for i in x) and 0 in x)
    shown = (f"({', '.join(_runtime_text(i) for i in x)}{',' if len(x) == 1 else ''})" if runtime else repr(x))
    raise E.LaunchConfigError(
        calling.cap(f"{what} must be 1 to 3 positive ints, got {shown}"
                    + (": a value known only at run time (an ml.scalar or an array's element)" if runtime else "")),
        loc, hint=grid_hints.launch_hint(what, x, runtime, zero, computed, loc, fn))
  return tuple(x) + (1,) * (3 - len(x))


def _key_value(v):
  """A constexpr as a cache key: its type too, so 2, 2.0 and True are three specialisations, and
  floats by their text, so 0.0 and -0.0 are two and a nan finds its compile (deps.value_key)."""
  return D.value_key(v)


class Specialisation(NamedTuple):
  key: tuple
  in_specs: list
  out_fspecs: list
  out_specs: list
  treedef: Any
  grid: tuple
  block: int
  cluster: tuple
  axes: int = 3       # the grid's axes as written (grid=(n,): 1): ml.program_id of another axis is MG203


class CacheInfo(NamedTuple):
  hits: int           # calls served by an in-memory specialisation
  misses: int         # specialisations made (traced, or read from disk)
  maxsize: int
  currsize: int
  disk_hits: int      # specialisations read from the disk cache instead of traced
  retraces: int       # times a changed global or helper dropped the compiled kernel


class KernelFunction(SpecMethods, ByReference):     # copied and pickled as a function is
  """A kernel function compiled per (shapes, dtypes, constexprs). Call it like a JAX function.

  Specialisations are kept in memory (least recently used first out, `cache_size`
  of them) and, traced, on disk (see docs/tooling.md). A global or `@ml.inline`
  helper the kernel reads that is rebound after the first call makes it recompile.
  """

  def __init__(self, fn: Callable, *, out_shape, grid=(1,), block: int = 128, cluster=None,
               interpret: bool | None = None, cache_size: int = DEFAULT_CACHE_SIZE,
               input_output_aliases: dict | None = None, name: str | None = None):
    fn, self._bound = signature.unpartial(fn)     # pallas_call(functools.partial(kernel, eps=...)): constexprs
    if not isinstance(fn, types.FunctionType):     # a functools.partial, a kernel decorated twice
      raise fsource.not_a_function(fn, "@mgpu_kernel", _statement_loc(caller_loc()))
    fsource.snapshot(fn, record=True)      # the text Python compiled, kept for every later trace
    functools.update_wrapper(self, fn)
    if isinstance(input_output_aliases, dict) and all(
        isinstance(x, numbers.Integral) and not isinstance(x, (bool, np.bool_))
        for kv in input_output_aliases.items() for x in kv):
      input_output_aliases = {int(i): int(o) for i, o in input_output_aliases.items()}   # NumPy ints too
    self.input_output_aliases = input_output_aliases
    self.fn = fn
    self.kernel_name = _kernel_name(fn, name)     # pallas_call's name=: the custom call's and the profile's
    self.out_shape = out_shape
    self.grid = grid
    self.block = block
    self.cluster = cluster
    self.interpret = interpret
    if not isinstance(cache_size, int) or isinstance(cache_size, bool) or cache_size < 1:
      raise E.LaunchConfigError(calling.cap(f"cache_size must be a positive int, got {cache_size!r}"),
                                _option_loc(fn, "cache_size"),
                                hint=f"the number of specialisations kept in memory (default {DEFAULT_CACHE_SIZE})")
    self.cache_size = cache_size
    self._parsed = None
    self._deps: D.Dependencies | None = None
    self._const_deps: dict = {}    # id -> (helper passed as a constexpr, what it reads)
    self._cache: collections.OrderedDict = collections.OrderedDict()
    self._stats = collections.Counter()
    self._bounds = None
    self._pytree_kernels: dict = {}    # input structures -> the kernel of their leaves (pytree_inputs.py)

  def __repr__(self):                 # as a function shows: <mgpu_kernel double at 0x...>
    return f"<mgpu_kernel {getattr(self, '__qualname__', self.__name__)} at {id(self):#x}>"

  def __get__(self, obj, objtype=None):
    """As a class attribute, the kernel itself (what an attribute without __get__ gives too): having it
    makes the kernel a routine to `inspect`, so help(kernel) shows its signature and docstring."""
    return self

  @property
  def parsed(self) -> fc.ParsedKernel:
    if self._parsed is None:
      pk = fc.parse(self.fn)
      deps = D.Dependencies(self.fn, pk.tree)
      for helper in deps.inlines:     # read afresh: their scope snapshot may predate a rebinding
        helper.parsed = None
      jax_wrapped.reread(deps.functions)     # (plain and JAX-wrapped functions traced as helpers too)
      self._parsed, self._deps = pk, deps
    return self._parsed

  @property
  def __signature__(self) -> inspect.Signature:
    """The call users make: the inputs, then keyword-only constexprs and `interpret`."""
    try:
      sig = signature.signature(self.parsed, self.out_shape, self.grid, self._bound)
    except Exception:      # an unreadable kernel: its first call reports why
      return signature.fallback_signature(self.__name__)
    signature.check(self)      # (jax.jit reads it to check its static_argnums: a mistake there is said here)
    return sig

  def cache_clear(self) -> None:
    """Forget every compiled specialisation and the parsed source, and zero the counters, as
    functools.lru_cache's cache_clear does (the disk cache stays)."""
    self._forget()
    for k in self._stats:
      self._stats[k] = 0

  def _forget(self) -> None:
    """Drop the compiled specialisations and the parsed source (a retrace: the counters stay)."""
    self._cache.clear()
    self._const_deps.clear()
    self._pytree_kernels.clear()       # (kernels of pytree leaves: made again from the new parse)
    self._parsed = self._deps = None

  def cache_info(self) -> CacheInfo:
    """Counters of the specialisation cache, like functools.lru_cache's."""
    s = self._stats
    return CacheInfo(s["hits"], s["misses"], self.cache_size, len(self._cache), s["disk_hits"],
                     s["retraces"])

  # ------------------------------------------------------------ specialisation
  def _check_fresh(self) -> None:
    """Drop the compiled kernel when a global or helper it reads was rebound since."""
    if self._deps is None:
      return
    changed = self._deps.changed() + [c for _, d in self._const_deps.values() for c in d.changed()]
    if changed:
      log.info("mgpu_dsl: %s: %s changed since it was compiled; recompiling", self.__name__,
               ", ".join(changed[:5]))
      self._stats["retraces"] += 1
      for h, d in self._const_deps.values():
        if isinstance(h, L.Inline):       # its scope snapshot predates the rebinding: read it afresh
          h.parsed = None
        jax_wrapped.reread([h, *d.functions])
      self._forget()

  def _specialise(self, args, constexprs, allow_empty=False, grid=None) -> Specialisation:
    """The call's specialisation. With `allow_empty` (a call on arrays), a grid with no programs
    whose outputs are all empty gives one with grid None: nothing to launch."""
    import jax
    pk = self.parsed
    loc, name = pk.loc, pk.tree.name
    calling.check_constexprs(pk, constexprs, name, loc, args, self._input_bounds(pk))
    out = self.out_shape
    if out is None:
      raise E.LaunchConfigError("@mgpu_kernel needs out_shape=", loc,
                                hint="out_shape=jax.ShapeDtypeStruct(shape, dtype), or lambda x: x")
    static = hasattr(out, "shape") or not callable(out)
    at = pk.option_loc      # launch configuration mistakes point at the decorator's argument

    def no_outputs():
      if not jax.tree.leaves(out):
        what = "out_shape describes" if static else "the out_shape callable returned"
        raise E.LaunchConfigError(
            f"{what} no outputs ({calling.describe(out)}); a kernel returns at least one array",
            at("out_shape"), hint="describe its outputs: out_shape=jax.ShapeDtypeStruct(shape, dtype); to"
                                  " update an input in place, alias it (input_output_aliases={0: 0}) and return it")
    if static:
      no_outputs()
    bounds = self._input_bounds(pk)
    calling.check_inputs(pk, args, bounds, name, loc, count=False, constexprs=constexprs)   # before any user callable runs
    # The callables see the constexprs the kernel sees: those passed, and the kernel's defaults.
    meta = {**{c: pk.defaults[c] for c in pk.constexpr_params if c in pk.defaults}, **constexprs}
    arity = None if static else signature.arity(out, pk.constexpr_params)
    if not static and arity is not None and arity[0] == arity[1] == len(args) == len(pk.ref_params):
      # The out_shape callable takes every parameter as an input: one that returns no outputs
      # (lambda x: ()) is the mistake to report, not the count.
      out = meta_calls.call_with_meta(out, args, meta, "out_shape", at("out_shape"), pk.ref_params[:len(args)])
      no_outputs()
      arity = "called"
    calling.check_count(pk, len(args), bounds, name, loc)
    if not static and arity != "called":
      out = meta_calls.call_with_meta(out, args, meta, "out_shape", at("out_shape"), pk.ref_params[:len(args)])
      no_outputs()
    leaves, treedef = jax.tree.flatten(out)
    if not leaves or not all(calling.is_array_like(l) for l in leaves):
      raise E.LaunchConfigError(calling.cap(f"out_shape must give arrays or jax.ShapeDtypeStructs,"
                                            f" got {calling.describe(out)}"), at("out_shape"),
                                hint=grid_hints.out_shape_hint(out, pk.ref_params[:len(args)]))
    runtime = next((l for l in leaves if not all(isinstance(d, numbers.Integral) for d in tuple(l.shape))), None)
    if runtime is not None and not any(hasattr(d, "shape") for d in tuple(runtime.shape)):
      raise E.LaunchConfigError(calling.cap(f"out_shape gives an output of shape {tuple(runtime.shape)}; dimensions"
                                            f" are ints of 0 or more"), at("out_shape"),
                                hint="use // for sizes: jax.ShapeDtypeStruct((x.shape[0] // 2,), x.dtype)")
    if runtime is not None:       # a shape from an ml.scalar or an array's value: known only at run time
      raise E.LaunchConfigError(
          calling.cap(f"out_shape gives an output whose shape holds a run-time value"
                      f" ({', '.join(type(d).__name__ for d in tuple(runtime.shape))}): shapes are static"),
          at("out_shape"), hint="pass the size as a constexpr (def k(x, out, *, n: ml.constexpr), out_shape=lambda"
                                " x, *, n: jax.ShapeDtypeStruct((n,), x.dtype)) and call k(x, n=128)")
    bad = next((l for l in leaves if any(isinstance(d, numbers.Integral) and d < 0 for d in l.shape)), None)
    if bad is not None:
      raise E.LaunchConfigError(calling.cap(f"out_shape gives an output of shape {tuple(bad.shape)}; dimensions"
                                            f" are ints of 0 or more"), at("out_shape"),
                                hint="compute the output's shape from the inputs' shapes, e.g."
                                     " out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0], 4), x.dtype)")
    pytree_inputs.check_output_trees(pk, out, len(args))    # pallas_call's grouping, where one leaf each does not fit
    n_in = len(pk.ref_params) - len(leaves)
    calling.check_count(pk, len(args), (n_in, n_in), name, loc, outputs_known=True)
    output_names.check(pk, out, n_in, at)
    # Outputs with nothing to write: empty ones, and those aliased to an input (they keep its values).
    aliased = set((self.input_output_aliases or {}).values()) if isinstance(self.input_output_aliases, dict) else set()
    all_empty = all(0 in tuple(l.shape) or k in aliased for k, l in enumerate(leaves))
    grid, block, cluster, axes = self._launch(args, meta, loc, allow_empty and all_empty, all_empty, grid)
    if allow_empty and all(0 in tuple(l.shape) for l in leaves):
      grid = None             # programs, but no output has an element to write: nothing to launch
    if grid is None:          # no programs and nothing to write: the outputs are the empty arrays
      return Specialisation(None, None, None, [jax.ShapeDtypeStruct(tuple(l.shape), l.dtype) for l in leaves],
                            treedef, None, block, cluster)
    # int64/float64 specs become what JAX will pass (int32/float32 unless x64 is on): where that
    # narrows a spec, an output or a value, it is refused (narrowing.py).
    narrowing.check(args, leaves, pk.ref_params, name, loc, at("out_shape"))
    canon = lambda x: jax.ShapeDtypeStruct(tuple(x.shape), jax.dtypes.canonicalize_dtype(x.dtype))
    try:
      in_specs = [fc.ArgSpec.of(canon(a), weak=calling.is_weak(a) or getattr(a, "weak_type", False)) for a in args]
    except (TypeError, AttributeError, ValueError) as e:
      raise E.SignatureError(calling.cap(f"{name}: an input mgpu_dsl cannot take: {e}"), loc,
                             hint=f"supported dtypes: {calling.SUPPORTED_DTYPES}") from None
    try:
      out_specs = [canon(s) for s in leaves]
      out_fspecs = [fc.ArgSpec.of(s) for s in out_specs]
    except (TypeError, AttributeError, ValueError) as e:
      raise E.SignatureError(calling.cap(f"out_shape gives an output mgpu_dsl cannot make: {e}"), at("out_shape"),
                             hint=calling.output_dtype_hint(leaves)) from None
    key = (tuple(in_specs), tuple(out_fspecs), grid, block, cluster,
           tuple(sorted((k, _key_value(v)) for k, v in constexprs.items())),
           _key_value(self.input_output_aliases), axes, treedef,      # (an out_shape callable's structure:
           bool(jax.config.jax_enable_x64))   # a dict or a tuple of the same leaves; x64 last: _trace)
    return Specialisation(key, in_specs, out_fspecs, out_specs, treedef, grid, block, cluster, axes)

  def _launch(self, args, constexprs, loc, nothing=False, all_empty=False, forced=None) -> tuple:
    """(grid, block, cluster, the grid's axes as written) of a call, checked; mistakes point at the
    decorator's argument.
    `nothing`: every output is empty, so a grid of no programs is no launch (grid None);
    `all_empty`: so it is, but the caller (check, mlir) needs a kernel."""
    at = self.parsed.option_loc
    grid = (meta_calls.call_with_meta(self.grid, args, constexprs, "grid", at("grid"),
                                   self.parsed.ref_params[:len(args)]) if callable(self.grid)
            else self.grid) if forced is None else forced
    empty = [i for i, a in enumerate(args) if 0 in tuple(getattr(a, "shape", ()))]
    zero_axis = callable(self.grid) and isinstance(grid, (tuple, list)) and any(
        isinstance(g, (int, np.integer)) and g == 0 for g in grid)
    no_items = (grid_hints.no_work(at("grid"), grid, self.grid)      # (no items counted: an empty graph, 71a)
                if zero_axis and not (empty or all_empty) else None)
    if zero_axis and (empty or all_empty or no_items):
      if nothing:
        return None, self.block if not callable(self.block) else 128, None, 3
      if all_empty:
        raise E.LaunchConfigError(
            f"the grid callable gave {tuple(grid)} and every output of this call is empty (or aliased to an"
            f" input): a call on arrays returns them without a launch, and there is no kernel to check or build",
            at("grid"), hint="check or build a specialisation whose outputs have elements")
      raise empty_grid.no_programs(grid, empty, args, at("grid"), self.grid, no_items)   # (_compile: atomics')
    axes = len(grid) if isinstance(grid, (tuple, list)) else 1      # (grid=8: one axis)
    try:
      grid = _as_tuple3(grid, "grid", at("grid"), computed=callable(self.grid),
                        fn=self.grid if callable(self.grid) else None)
    except E.LaunchConfigError as e:
      raise grid_hints.float_constexpr(e, grid, constexprs, self.grid if callable(self.grid) else None) from None
    fc.check_grid_limits(grid, at("grid"))
    block = self.block
    if callable(block):
      block = meta_calls.call_with_meta(block, args, constexprs, "block", at("block"), self.parsed.ref_params[:len(args)])
    if not isinstance(block, int) or isinstance(block, bool) or block % hw.WARPGROUP or not hw.WARPGROUP <= block <= hw.MAX_BLOCK:
      raise E.LaunchConfigError(
          f"block must be a multiple of {hw.WARPGROUP} threads (one warpgroup) between {hw.WARPGROUP} and {hw.MAX_BLOCK}, got {block!r}",
          at("block"), hint=f"Mosaic GPU works in warpgroups of {hw.WARPGROUP} threads: use block={hw.WARPGROUP}, {2 * hw.WARPGROUP} or {3 * hw.WARPGROUP}")
    cluster = self.cluster
    if callable(cluster):
      cluster = meta_calls.call_with_meta(cluster, args, constexprs, "cluster", at("cluster"),
                                        self.parsed.ref_params[:len(args)])
    cluster = _as_tuple3((1,) if cluster is None else cluster, "cluster", at("cluster"))
    for d, g, c in zip("xyz", grid, cluster):
      if g % c:
        raise E.LaunchConfigError(f"grid {grid[:3]} is not divisible by cluster {cluster} along {d}",
                                  at("cluster"), hint="make each grid dimension a multiple of the cluster's")
    if cluster[0] * cluster[1] * cluster[2] > 16:
      raise E.LaunchConfigError(f"a cluster holds at most 16 CTAs on Hopper, got {cluster}", at("cluster"),
                                hint="use at most 16 CTAs per cluster, e.g. cluster=(2,) or (2, 2)")
    return grid, block, cluster, max(1, axes)

  def _input_bounds(self, pk) -> tuple[int, int]:
    """signature.input_bounds, computed once per parse (and per out_shape/grid object)."""
    memo = (pk, self.out_shape, self.grid)
    cached = self._bounds
    if cached is None or any(a is not b for a, b in zip(cached[0], memo)):
      cached = self._bounds = (memo, signature.input_bounds(pk, self.out_shape, self.grid))
    return cached[1]

  def _scalar_args(self, args) -> tuple:
    """Python numbers for `ml.scalar` parameters (and Python floats jax.jit traced for any 0-d input) as 0-d arrays."""
    import numpy as np
    args, scalars = list(args), self.parsed.scalar_positions()
    for p in range(len(args)):
      if p not in scalars and not (calling.is_weak(args[p]) and calling.is_f64_scalar(args[p])):
        continue      # (a weak int64 stays int64 there: an int64 kernel reads it as jnp.int64(n))
      if p < len(args) and isinstance(args[p], bool):     # a flag: a bool scalar, as jnp.bool_(b)
        args[p] = np.asarray(args[p], np.bool_)
        continue
      if p < len(args) and isinstance(args[p], int) and not -2 ** 31 <= args[p] < 2 ** 31:
        name = self.parsed.ref_params[p]
        raise E.SignatureError(
            f"{self.__name__}: {name} is an ml.scalar parameter, given the Python int {args[p]}, which int32"
            f" (a Python int's type here, as in JAX) cannot hold", caller_loc() or self.parsed.loc,
            hint=f"pass a 0-d array of the type you mean: jnp.uint32({name}) for values below 2**32, or"
                 f" jnp.int64({name}) with jax_enable_x64")
      if p < len(args) and isinstance(args[p], (int, float)):
        args[p] = np.asarray(args[p], np.float32 if isinstance(args[p], float) else np.int32)
      elif p < len(args) and calling.is_weak(args[p]):
        # A Python number through jax.jit with jax_enable_x64: a weak int64/float64 scalar. Typed as
        # the same number passed eagerly (int32, float32), as jnp keeps weak values in 32 bits.
        d = np.dtype(args[p].dtype)
        if d in (np.int64, np.float64):
          args[p] = py_numbers.narrowed(args[p], np.int32 if d == np.int64 else np.float32, weak=p not in scalars)
    return tuple(args)

  def _compile(self, args, constexprs, levels=(), allow_empty=False) -> dict:
    """The compiled specialisation for `args`; `levels` are jax.vmap batch levels in front of
    the batched inputs (mgpu_dsl/batching.py), () for a plain call."""
    from . import batching
    self._check_fresh()
    for v in constexprs.values():      # a helper passed as a constexpr: what it reads is watched too
      for h in D.helpers_in(v):
        if id(h) not in self._const_deps:
          self._const_deps[id(h)] = (h, D.Dependencies(h.fn if type(h) is L.Inline else h))
          while len(self._const_deps) > 4 * self.cache_size:      # helpers of calls long evicted
            del self._const_deps[next(iter(self._const_deps))]
    args = self._scalar_args(args)
    try:
      spec = self._specialise(batching.unbatched_specs(args, levels) if levels else args, constexprs,
                              allow_empty=allow_empty)
    except empty_grid.NoPrograms as e:         # outputs only atomics update: their start values
      return empty_grid.start_values(self, e, args, constexprs, levels, allow_empty)
    if spec.grid is None:
      return {"empty": spec, "treedef": spec.treedef}
    if not allow_empty and not levels:
      empty_grid.nothing_to_check(self, spec)
    key = spec.key + ((tuple((n, tuple(b)) for n, b in levels),) if levels else ())
    hit = self._cache.get(key)
    if hit is not None:
      self._cache.move_to_end(key)
      self._stats["hits"] += 1
      return hit
    self._stats["misses"] += 1
    t0 = time.perf_counter()
    kernel, from_disk = self._trace(spec, constexprs, levels)
    ms = (time.perf_counter() - t0) * 1e3
    out_specs = batching.batched_out_specs(spec.out_specs, levels) if levels else spec.out_specs
    hit = {"kernel": kernel, "treedef": spec.treedef, "out_specs": out_specs, "key": key,
           "what": dump.spec_text(spec.in_specs, constexprs)}
    self._cache[key] = hit
    while len(self._cache) > self.cache_size:
      self._cache.popitem(last=False)
    log.info("mgpu_dsl: %s(%s): %s in %.1f ms", self.__name__, hit["what"],
             "read from the disk cache" if from_disk else "traced", ms)
    if dump.dump_dir() is not None:
      dump.write(self.__name__, spec.key, "ir.txt", kir.dump(kernel))
    return hit

  def _grid_of(self, specs, constexprs):
    """The kernel's own grid for unbatched argument specs."""
    return self._specialise(specs, constexprs).grid

  def _run(self, hit, args, interpret: bool):
    """Run a compiled specialisation: on the GPU, or in interpret mode."""
    import jax
    if not interpret:
      if calling.tracing(args):       # built when lowered: jax.eval_shape and jax.make_jaxpr build nothing
        if "deferred_call" not in hit:
          hit["deferred_call"] = wrap.compiled_call(lambda: self._build(hit) or hit["call"], hit["out_specs"],
                                                    self.kernel_name)
        return hit["deferred_call"](*args)
      if not has_gpu():
        from .lowering.platforms import no_gpu_error     # an eager call: say so at the user's line
        raise no_gpu_error(self.__name__, jax.default_backend(), caller_loc())
      self._build(hit)
      return hit["call"](*args)
    from .lowering import interpret as interp
    if calling.tracing(args):
      if "interpret_call" not in hit:
        kernel, specs = hit["kernel"], hit["out_specs"]

        def compiled():
          self._build(hit)
          return hit["call"]
        prim = wrap.interpreted_call(lambda *a, site=None: tuple(interp.run(kernel, a, specs, site)), compiled, specs,
                                     self.__name__)
        hit["interpret_call"] = wrap.no_derivative(lambda *a: tuple(prim(*a)), self.__name__, self.parsed.loc)
      return hit["interpret_call"](*args)
    return interp.run(hit["kernel"], args, hit["out_specs"])

  def _disk_key(self, spec, constexprs, levels=()) -> str | None:
    """The disk cache key of a specialisation; None when caching on disk is off or unsafe."""
    if C.cache_dir() is None:
      return None
    fingerprint = self._deps.fingerprint()
    # The defaults too: Python bound them when the def ran, perhaps from an enclosing function's locals.
    consts = [(k, D.value_text(v)) for k, v in sorted({**self.parsed.defaults, **constexprs}.items())]
    if fingerprint is None or any(t is None for _, t in consts):
      log.debug("mgpu_dsl: %s: not cached on disk: %s has no stable text form", self.__name__,
                ", ".join(self._deps.unhashable() + [k for k, t in consts if t is None]))
      return None
    return C.digest("traced", C.versions(), fingerprint, self.__name__, spec.in_specs,
                    spec.out_fspecs, spec.grid, spec.axes, spec.block, spec.cluster, consts,
                    [(n, list(b)) for n, b in levels], repr(self.input_output_aliases), spec.key[-1])

  def _trace(self, spec, constexprs, levels=()) -> tuple[kir.Kernel, bool]:
    from . import batching
    key = self._disk_key(spec, constexprs, levels)
    path = C.traced_path(self.__name__, key) if key is not None else None
    if path is not None:
      kernel = C.load_traced(path, key, kir.Kernel)
      if kernel is not None:
        self._stats["disk_hits"] += 1
        return kernel, True
    import jax
    # jnp calls on static values in the kernel (jnp.float32(0.5), 1 / jnp.sqrt(d)) run while
    # tracing: eagerly, even when the call to the kernel is itself being traced by jax.jit.
    with jax.ensure_compile_time_eval():
      kernel = fc.trace(self.parsed, spec.in_specs, spec.out_fspecs, constexprs, grid=spec.grid,
                        grid_axes=spec.axes, block=spec.block, cluster=spec.cluster,
                        batch=batching.batch_spec(levels, spec.grid), aliases=self.input_output_aliases, x64=spec.key[-1])
    if path is not None:
      C.store_traced(path, key, kernel)
    return kernel, False

  def _build(self, hit) -> None:
    """Build the Mosaic GPU kernel of a specialisation (once)."""
    if "built" in hit:
      return
    import jax
    from .lowering import kernel as lk
    t0 = time.perf_counter()
    kernel = hit["kernel"]
    if kernel.name != self.kernel_name:             # name= (the traced kernel keeps its def's name, cached so)
      kernel = dataclasses.replace(kernel, name=self.kernel_name)
    built = lk.build(kernel)
    log.info("mgpu_dsl: %s(%s): Mosaic GPU module built in %.1f ms", self.__name__, hit["what"],
             (time.perf_counter() - t0) * 1e3)
    hit["built"] = built
    hit["call"] = wrap.named_call(built, self.kernel_name, self.parsed.loc)
    if dump.dump_dir() is not None:
      shapes = [jax.ShapeDtypeStruct(tuple(p.value.type.shape), lk.jax_dtype(p.value.type.dtype))
                for p in hit["kernel"].inputs]
      dump.write(self.__name__, hit["key"], "mlir", lk.module_text(built, shapes))

  def _interpret(self, interpret):
    if interpret is not None:
      return bool(interpret)
    if self.interpret is not None:
      return bool(self.interpret)
    return os.environ.get("MGPU_DSL_INTERPRET", "") not in ("", "0", "false", "False")

  # ------------------------------------------------------------ public
  @_user_errors
  def __getitem__(self, grid):
    """`kernel[grid](...)`, Triton's launch: the grid belongs to the decorator here."""
    from .triton_names import launch_error
    pk = self.parsed
    raise launch_error(self.fn.__name__, grid, caller_loc(),     # (the subscript: `k[(4,)]` in jnp.sum(k[(4,)](x)))
                       pk.ref_params[:max(0, self._input_bounds(pk)[1])], pk.constexpr_params)

  @_user_errors
  @pytree_inputs.output_trees
  def __call__(self, *args: Any, interpret: bool | None = None, **constexprs: Any) -> Any:
    """Run the kernel on `args` (arrays: its inputs, in order) and return its outputs.

    Args:
      *args: the kernel's inputs, jax or numpy arrays (jax tracers under jax.jit).
      interpret: run on the CPU with numpy instead of the GPU (default: the
        decorator's `interpret`, else the MGPU_DSL_INTERPRET environment variable).
      **constexprs: the kernel's compile-time constants, by keyword. Under
        `jax.jit`, mark them static: `jax.jit(k, static_argnames=["n"])`.

    Returns:
      The outputs, in the structure `out_shape` describes.

    Raises:
      KernelError: a subclass per class of mistake, at the kernel's line.
    """
    import jax
    from . import batching
    calling.check_interpret(interpret, self.__name__, caller_loc())
    flat = pytree_inputs.flat_call(self, args, constexprs, caller_loc())
    if flat is not None:       # a dict, tuple or NamedTuple of arrays as one input: the kernel of their leaves
      with pytree_inputs.miscounted(args):      # (else the call as given reports the input: a list for an array)
        return flat[0](*flat[1], interpret=interpret, **flat[2])
    args, constexprs = calling.keyword_inputs(self, args, constexprs)
    spec = next((i for i, a in enumerate(args) if isinstance(a, (jax.ShapeDtypeStruct, jax.core.AbstractValue))), None)
    if spec is not None:       # a spec (or an abstract value, x.aval) has no values to run on
      kind = "a jax.ShapeDtypeStruct" if isinstance(args[spec], jax.ShapeDtypeStruct) else \
          f"an abstract value ({type(args[spec]).__name__} {stand_ins.describe_aval(args[spec])})"
      raise E.SignatureError(
          f"{self.__name__}: input {spec} is {kind}; a call runs the kernel on arrays",
          caller_loc() or self.parsed.loc,
          hint=f"build or inspect it for specs with {self.__name__}.check(*specs), .typed_ir(*specs) or"
               f" .mlir(*specs); to run it, pass arrays")
    given, args = args, self._scalar_args(args)
    try:
      hit, args = py_numbers.compiled(self, args, constexprs, allow_empty=True)
      if "empty" in hit:       # every output empty, no programs: nothing to launch
        return jax.tree.unflatten(hit["treedef"], self._empty_outputs(hit["empty"], args, hit.get("fill", {})))
      outs = batching.call(self, args, constexprs, self._interpret(interpret), hit=hit)
    except E.KernelError as e:
      if isinstance(e, E.InternalError):
        raise                          # (its cause, the Mosaic GPU diagnostic, is what a bug report needs)
      if isinstance(e, E.SignatureError):
        e = calling.at_call(e, self.parsed.loc, caller_loc())
      e = calling.float_scalar_at_call(e, given, self.parsed.ref_params, caller_loc())
      raise calling.call_noted(e, caller_loc(), args, self.parsed.ref_params, constexprs) from None
    return jax.tree.unflatten(hit["treedef"], list(outs))

  def _empty_outputs(self, spec, args, fill) -> list:
    """The outputs of a call with nothing to write: empty arrays (an aliased one is its input), or those
    only atomics update at their start value (`fill`, empty_grid.py)."""
    import jax.numpy as jnp
    aliased = {o: i for i, o in (self.input_output_aliases or {}).items()}
    return [args[aliased[k]] if k in aliased else jnp.full(s.shape, fill.get(k, 0), s.dtype)
            for k, s in enumerate(spec.out_specs)]


def mgpu_kernel(fn: Callable | None = None, *, out_shape=None, grid=(1,), block: int = 128,
                cluster=None, interpret: bool | None = None,
                cache_size: int = DEFAULT_CACHE_SIZE, input_output_aliases: dict | None = None,
                name: str | None = None, **unknown) -> Any:
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
    block: threads per CTA, a multiple of 128 (one warpgroup), or a callable of the
      inputs (and constexprs).
    cluster: CTAs per cluster along up to 3 axes (each must divide the grid).
    interpret: run on the CPU with numpy instead (also MGPU_DSL_INTERPRET=1).
    cache_size: specialisations kept in memory (least recently used dropped first).
    input_output_aliases: {input index: output index}: the output is the input's memory,
      updated in place (as in Pallas); other inputs are read-only.
    name: the kernel's name in the compiled module, its custom call and profiles (as
      pallas_call's name=); the def's name when left out.

  Returns:
    A `KernelFunction` (or, without `fn`, a decorator that makes one).
  """
  @_user_errors
  def wrap_fn(f):
    if unknown:
      raise _unknown_option(f, unknown)
    if getattr(f, "__name__", "") == "<lambda>":   # mg.mgpu_kernel(lambda x, out: ..., out_shape=...), (...)(lambda)
      raise E.LaunchConfigError("a kernel must be a def: a lambda's body is one expression, and a kernel writes its"
                                " outputs in statements", caller_loc(),
                                hint="def body(x, out): out[...] = ...  then mg.mgpu_kernel(body, out_shape=...)")
    return KernelFunction(f, out_shape=out_shape, grid=grid, block=block, cluster=cluster,
                          interpret=interpret, cache_size=cache_size,
                          input_output_aliases=input_output_aliases, name=name)
  if fn is not None and (getattr(fn, "__name__", "") == "<lambda>" and out_shape is None or not callable(fn)):
    got = "a lambda" if callable(fn) else calling.describe(fn)
    raise E.LaunchConfigError(
        f"mgpu_kernel's positional argument is the kernel function, got {got}: out_shape"
        f" and the other options are passed by keyword", caller_loc(),
        hint="@mg.mgpu_kernel(out_shape=lambda x: x, grid=...) above a def, or"
             " mg.mgpu_kernel(kernel_fn, out_shape=...)")
  return wrap_fn(fn) if fn is not None else wrap_fn


def _kernel_name(fn, name) -> str:
  """The kernel's name in its module and profiles: `name=` (pallas_call's), spelt as a symbol, or the def's."""
  if name is None:
    return fn.__name__
  if not isinstance(name, str) or not re.sub(r"[^A-Za-z0-9_]", "", name):
    raise E.SignatureError(f"name= names the kernel in profiles: a string with a letter or digit, got"
                           f" {calling.describe(name)}", _option_loc(fn, "name"),
                           hint=f"name=\"{fn.__name__}\" (or leave it out: the def's name)")
  symbol = re.sub(r"[^A-Za-z0-9_]", "_", name)       # "attention/fwd" -> attention_fwd, as MLIR symbols spell it
  return symbol if not symbol[0].isdigit() else "_" + symbol


def _statement_loc(loc):
  """`loc` (a caller's line, column 0) at the first character of its statement."""
  if loc is None:
    return None
  text = loc.source_line.rstrip("\n")
  return dataclasses.replace(loc, col_offset=len(text) - len(text.lstrip()), source_line=text)


def _option_loc(fn, name):
  """Where the decorator's option `name` is written; its caller's line if there is no source."""
  try:
    return fc.parse(fn).option_loc(name)
  except E.KernelError:      # no source to read (exec, a REPL)
    return caller_loc()


def _unknown_option(fn, unknown: dict) -> E.KernelError:
  """An unknown keyword of @mgpu_kernel, at the keyword in the decorator."""
  import difflib
  name = sorted(unknown)[0]
  loc = _option_loc(fn, name)
  options = [p.name for p in inspect.signature(mgpu_kernel).parameters.values()
             if p.kind == inspect.Parameter.KEYWORD_ONLY]
  close = difflib.get_close_matches(name, options, n=1)
  hint = calling.ELSEWHERE.get(name) or (f"did you mean {close[0]}=?" if close else
                                  f"@mgpu_kernel takes {', '.join(options)}")
  others = sorted(unknown)[1:]
  if others:                          # every unknown option at once (num_warps= and num_stages=)
    hint += "; " + "; ".join(f"{o}=: {calling.ELSEWHERE.get(o) or 'not an option either'}" for o in others)
  names = ", ".join(f"{o}=" for o in sorted(unknown))
  what = f"option {name}=" if not others else f"options {names}"
  return E.SignatureError(f"@mgpu_kernel has no {what}", loc, hint=hint)
