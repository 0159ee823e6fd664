"""`@mg.autotune`: pick the fastest of several constexpr configurations, per input shape.

    @mg.autotune(configs=[dict(bn=256, stages=4), dict(bn=128, stages=6)])
    @mg.mgpu_kernel(out_shape=..., grid=...)
    def matmul(a, b, c, *, bn: ml.constexpr, stages: ml.constexpr): ...

On the first call for each (input shapes, dtypes, other constexprs) on a GPU,
every configuration that compiles is timed with `mg.bench` (kernel time) and the
fastest is kept, in memory and on disk (JSON under the cache folder, keyed by the
kernel's source, the configurations, the shapes, the jax version and the GPU
kind). Without a GPU, and in interpret mode, the first configuration that compiles for
the call is used, untimed. See docs/tooling.md.
"""
from __future__ import annotations

import functools
import hashlib
import inspect
import json
import logging
import os
import time
from typing import Any, Callable, Iterable, Sequence

from . import cache as C
from . import calling
from . import triton_names
from .bench import bench, caller_loc, has_gpu
from .frontend import errors as E
from .aot import JitStages
from .frontend.pickling import ByReference
from .kernel import KernelFunction, _user_errors

log = logging.getLogger("mgpu_dsl")


def _what(x) -> str:
  """A decorated object, in words: `the plain function add` rather than its repr."""
  if inspect.isfunction(x):
    return f"the plain function {x.__name__} (decorated in the wrong order?)"
  return calling.describe(x)


def _parameters(kernel) -> list:
  import inspect
  try:
    return list(inspect.signature(kernel.fn).parameters)
  except (TypeError, ValueError):
    return []


def _key_names(kernel, names, loc) -> tuple:
  """Triton's `key=['M', 'N']`: the arguments whose changes retune. The default key (every input's shape and dtype,
  every constexpr) separates them already, also where a port reads M and N from the shapes and has no such
  parameter; a named run-time scalar (`n: ml.scalar`) adds its value."""
  return tuple(names)


class Autotuner(JitStages, ByReference):     # copied and pickled as a function is
  """A kernel that picks its fastest configuration. Call it like the kernel, without the
  tuned constexprs."""
  pickled_what = "autotuned kernel"

  def __init__(self, kernel: KernelFunction, configs: Sequence[dict], *, key: Callable | None = None,
               timer: Callable | None = None):
    loc = caller_loc()
    if not isinstance(kernel, KernelFunction):
      raise E.SignatureError(f"@mg.autotune decorates an @mg.mgpu_kernel function, got {_what(kernel)}", loc,
                             hint="stack @mg.autotune(...) above @mg.mgpu_kernel(...)")
    given = configs
    configs = (list(configs) if isinstance(configs, Iterable) and not isinstance(configs, (str, bytes, dict))
               else None)          # one dict, a string, None: not a collection of configs
    if not configs or not all(isinstance(c, dict) and all(isinstance(k, str) for k in c) for c in configs):
      raise E.SignatureError(calling.cap(f"autotune configs must be a non-empty list of dicts of"
                                         f" constexprs, got {given!r}"), loc,
                             hint="configs=[dict(bn=256, stages=4), dict(bn=128, stages=6)]")
    self.key_names = ()
    if isinstance(key, (list, tuple)) and key and all(isinstance(k, str) for k in key):
      self.key_names, key = _key_names(kernel, key, loc), None     # Triton's key=['n_cols'] (probe 60b)
    for name, fn in (("key", key), ("timer", timer)):
      if fn is not None and not callable(fn):
        given = list(fn) if isinstance(fn, (list, tuple)) else fn
        raise E.SignatureError(
            f"autotune's {name}= must be a callable, got {calling.describe(fn)}", loc,
            hint=(f"key=lambda *args, **constexprs: <what separates tunings>, e.g. key=lambda x, **kw: x.shape"
                  f" (Triton's key={given!r} names arguments; here the default key, every input's shape and dtype"
                  f" and the constexprs, already covers them)") if name == "key" else "timer=mg.bench_wall, or leave it out")
    try:
      parsed = kernel.parsed
    except E.KernelError:
      parsed = None           # no source: the call reports it
    if parsed is not None and parsed.tree.args.kwarg is None:
      triton_names.check_configs(kernel, configs, loc)
    functools.update_wrapper(self, kernel, updated=())
    self.kernel = kernel
    self.configs = configs
    self.key = key
    self.timer = timer
    self.loc = loc                   # the decorator, where the configs, key and timer are given
    self.tuned = set().union(*configs)
    self.best: dict = {}             # in-memory winners: tuning key -> config
    self.timings: dict = {}          # tuning key -> [(config, seconds or error text)]

  def __repr__(self):
    return f"<autotuned mgpu_kernel {getattr(self, '__qualname__', self.__name__)} at {id(self):#x}>"

  def __get__(self, obj, objtype=None):     # a routine to inspect, so help() shows its signature (kernel.py)
    return self

  @property
  def __signature__(self) -> inspect.Signature:
    sig = inspect.signature(self.kernel)
    return sig.replace(parameters=[p for p in sig.parameters.values() if p.name not in self.tuned])

  # ------------------------------------------------------------ keys
  def _tuning_key(self, args, constexprs) -> str:
    if self.key is not None:
      return json.dumps(["key", repr(self.key(*args, **constexprs))])
    specs = [[list(map(int, a.shape)), str(getattr(a.dtype, "name", a.dtype))] if hasattr(a, "shape")
             else [type(a).__name__] for a in args]      # a Python number for an ml.scalar: its type
    consts = sorted((k, type(v).__name__, repr(v)) for k, v in constexprs.items())
    named = dict(zip(_parameters(self.kernel), args))    # Triton's key=['n']: a named scalar's value too
    values = [[k, repr(named[k])] for k in self.key_names if k in named and not hasattr(named[k], "shape")]
    return json.dumps([specs, consts, values] if values else [specs, consts])

  def _winners_path(self) -> str | None:
    d = C.cache_dir()
    if d is None:
      return None
    try:
      configs = json.dumps(self.configs, sort_keys=True)
      from .frontend.source import snapshot
      snap = snapshot(self.kernel.fn)           # the text Python compiled, as the kernel's own caches
      source = "".join(snap.lines) if snap is not None else inspect.getsource(self.kernel.fn)
    except (TypeError, ValueError, OSError):
      return None       # configs that JSON cannot hold, or no source: tuned in memory only
    fn = self.kernel.fn
    bound = repr(sorted(getattr(self.kernel, "_bound", {}).items()))   # a functools.partial kernel's values
    try:                  # what it reads (globals, a factory's captures): a kernel of other values, other winners
      self.kernel.parsed
      reads = self.kernel._deps.fingerprint() or ""
    except Exception:     # (an unreadable kernel: its call reports why)
      reads = ""
    ident = hashlib.sha256("\x1f".join([fn.__module__, fn.__qualname__, source, configs, bound, reads,
                                        C.versions()]).encode()).hexdigest()
    return os.path.join(d, "autotune", f"{self.kernel.__name__}-{ident[:24]}.json")

  @staticmethod
  def _device_kind() -> str:
    import jax
    return jax.devices()[0].device_kind

  # ------------------------------------------------------------ choosing
  def _first_that_builds(self, args, constexprs) -> dict:
    """Untimed (interpret mode, no GPU): the first config that compiles for these arguments, as
    tuning on a GPU would skip one that does not (bs=256 on 384 elements); the first if none does,
    whose error the call then reports."""
    import jax
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) if hasattr(a, "shape") and hasattr(a, "dtype") else a
             for a in args]
    for cfg in self.configs:
      try:
        self.kernel.typed_ir(*specs, **constexprs, **cfg)
      except E.KernelError as e:
        log.info("mgpu_dsl: autotune %s: %s skipped: %s", self.__name__, _text(cfg), e.message)
        continue
      log.info("mgpu_dsl: autotune %s: %s, the first config that builds (untimed: no GPU or interpret mode)",
               self.__name__, _text(cfg))
      return cfg
    return self.configs[0]

  def best_config(self, *args: Any, interpret: bool | None = None, **constexprs: Any) -> dict:
    """The configuration a call with these arguments runs (tuning it first if needed)."""
    args, constexprs = calling.keyword_inputs(self.kernel, args, constexprs, bind=False,   # (inputs by keyword,
                                              skip=self.tuned)                      # constexprs by position)
    self._untuned(constexprs)
    if self.kernel._interpret(interpret):
      return self._first_that_builds(args, constexprs)
    key = self._tuning_key(args, constexprs)
    if key in self.best:
      return self.best[key]
    if self.timer is None and not has_gpu():
      return self._first_that_builds(args, constexprs)
    path = self._winners_path()
    disk_key = json.dumps([key, self._device_kind()])
    if path is not None:
      entry = C.read_json(path).get(disk_key)
      cfg = self._config_of(entry)
      if cfg is not None:
        log.info("mgpu_dsl: autotune %s: %s from %s", self.__name__, _text(cfg), path)
        self.best[key] = cfg
        return cfg
    cfg, results = self._tune(args, constexprs)
    self.best[key], self.timings[key] = cfg, results
    if path is not None:
      C.update_json(path, disk_key, {"index": self.configs.index(cfg), "config": cfg,
                                     "seconds": {_text(c): t for c, t in results},
                                     "when": time.strftime("%Y-%m-%d %H:%M:%S")})
    return cfg

  def _config_of(self, entry) -> dict | None:
    """The config a disk entry names, if it still is one of ours."""
    if not isinstance(entry, dict) or not isinstance(entry.get("index"), int):
      return None
    i = entry["index"]
    if 0 <= i < len(self.configs) and json.dumps(self.configs[i], sort_keys=True) == json.dumps(
        entry.get("config"), sort_keys=True):
      return self.configs[i]
    return None

  def _tune(self, args, constexprs) -> tuple[dict, list]:
    import jax
    # Under jax.jit every jax operation would be staged into the caller's program, the
    # timed runs too: evaluate them now, on random stand-ins for traced inputs.
    with jax.ensure_compile_time_eval():
      concrete = args
      if any(isinstance(a, (jax.core.Tracer, jax.ShapeDtypeStruct)) for a in args):
        concrete = stand_ins(args)      # traced inputs, or specs (best_config(spec), typed_ir(spec))
      return self._time_configs(args, concrete, constexprs)

  def _time_configs(self, args, concrete, constexprs) -> tuple[dict, list]:
    import jax
    timer = self.timer or bench
    specs = [jax.ShapeDtypeStruct(tuple(a.shape), a.dtype) if calling.is_array_like(a) else a
             for a in args]                 # (a Python number for an ml.scalar stays one)
    results, errors = [], []
    for cfg in self.configs:
      run = functools.partial(self.kernel, **constexprs, **cfg, interpret=False)
      try:
        self.kernel.check(*specs, **constexprs, **cfg)
        t = timer(run, *concrete)
      except Exception as e:   # a KernelError, or a Mosaic/XLA failure at compile or run time
        if self.timer is not None and not isinstance(e, E.KernelError):
          raise                # the caller's own timer failed: theirs to see
        first = (str(e).strip().splitlines() or [""])[0]
        log.info("mgpu_dsl: autotune %s: skipping %s: %s: %s", self.__name__, _text(cfg),
                 type(e).__name__, calling.cap(first, 200))
        errors.append((cfg, e))
        results.append((cfg, f"{type(e).__name__}: {calling.cap(first, 200)}"))
        continue
      results.append((cfg, self._seconds(t)))
    timed = [(t, i) for i, (c, t) in enumerate(results) if isinstance(t, float)]
    if not timed:
      first_cfg, first_err = errors[0]
      if isinstance(first_err, E.KernelError):
        raise first_err
      raise E.InternalError.wrap(f"autotune {self.__name__}: no configuration ran", first_err,
                                 self.kernel.parsed.loc) from first_err
    t, i = min(timed)
    best = results[i][0]
    log.info("mgpu_dsl: autotune %s: %s, %.4f ms (best of %d; %d skipped)", self.__name__,
             _text(best), t * 1e3, len(timed), len(errors))
    return best, results

  def _seconds(self, t) -> float:
    """A timer's measurement as seconds: a real number (a NumPy or JAX scalar too)."""
    import numpy as np
    try:
      ok = np.ndim(t) == 0 and not isinstance(t, (bool, str, bytes)) and np.isrealobj(t)
      seconds = float(t) if ok else None
    except (TypeError, ValueError):
      seconds = None
    if seconds is None:
      raise E.SignatureError(f"autotune {self.__name__}: the timer returned {calling.cap(repr(t), 80)},"
                             " not a number of seconds", self.loc or self.kernel.parsed.loc,
                             hint="timer(fn, *args) -> seconds, e.g. timer=mg.bench_wall")
    return seconds

  # ------------------------------------------------------------ calling
  @_user_errors
  def __call__(self, *args: Any, interpret: bool | None = None, **constexprs: Any) -> Any:
    """Run the kernel with the best configuration for these arguments (see best_config)."""
    args, constexprs = self._by_position(args, constexprs)       # (constexprs by position: positional.py)
    cfg = self.best_config(*args, interpret=interpret, **constexprs)
    return self.kernel(*args, interpret=interpret, **constexprs, **cfg)

  @_user_errors
  def check(self, *specs, **constexprs) -> None:
    """Trace, check and build every config for these specs (the tuner may pick any), as
    `python -m mgpu_dsl check` does for `mg.check_specs(tuned, *specs)`; raises the first mistake."""
    specs, constexprs = self._by_position(specs, constexprs)
    self._untuned(constexprs)
    for cfg in self.configs:
      self.kernel.check(*specs, **constexprs, **cfg)

  @_user_errors
  def typed_ir(self, *specs, **constexprs) -> str:
    """The typed IR of the config a call with these specs runs (see best_config)."""
    specs, constexprs = self._by_position(specs, constexprs)
    return self.kernel.typed_ir(*specs, **constexprs, **self.best_config(*specs, **constexprs))

  @_user_errors
  def mlir(self, *specs, **constexprs) -> str:
    """The Mosaic GPU module of the config a call with these specs runs (see best_config)."""
    specs, constexprs = self._by_position(specs, constexprs)
    return self.kernel.mlir(*specs, **constexprs, **self.best_config(*specs, **constexprs))

  def cache_info(self):
    """The kernel's specialisation cache (every config's compiles)."""
    return self.kernel.cache_info()

  def _untuned(self, constexprs) -> None:
    clash = sorted(self.tuned & set(constexprs))
    if clash:
      raise E.SignatureError(f"{self.__name__}: {', '.join(clash)} is chosen by @mg.autotune",
                             caller_loc() or self.kernel.parsed.loc,
                             hint="leave tuned constexprs out of the call, or call the kernel itself:"
                                  f" {self.__name__}.kernel(..., {clash[0]}=...)")
    params = self.kernel.parsed.constexpr_params
    unknown = [c for c in constexprs if c not in params]
    if unknown:           # (the kernel's own error would list the tuned ones among those to pass)
      import difflib
      rest = [c for c in params if c not in self.tuned]
      close = difflib.get_close_matches(unknown[0], rest, n=1)
      raise E.SignatureError(
          f"{self.__name__} has no constexpr parameter {unknown[0]!r}", caller_loc() or self.kernel.parsed.loc,
          hint=(f"did you mean {close[0]}=? " if close else "")
          + (f"the constexprs a call passes are: {', '.join(rest)}" if rest else "a call passes no constexprs")
          + f" ({', '.join(sorted(self.tuned))} {'is' if len(self.tuned) == 1 else 'are'} chosen by @mg.autotune)")

  def cache_clear(self) -> None:
    """Forget the in-memory winners (the kernel's own caches and the disk stay)."""
    self.best.clear()
    self.timings.clear()


def stand_ins(args) -> list:
  """Random arrays shaped like `args` (tracers under jax.jit, specs) to time configurations on;
  a Python number (an ml.scalar's value) is itself."""
  import jax
  import jax.numpy as jnp
  out = []
  for i, a in enumerate(args):
    k = jax.random.key(i)
    if not calling.is_array_like(a):
      out.append(a)
    elif jnp.issubdtype(a.dtype, jnp.floating):
      out.append(jax.random.normal(k, a.shape, jnp.float32).astype(a.dtype))
    elif jnp.issubdtype(a.dtype, jnp.integer):
      out.append(jax.random.randint(k, a.shape, 0, 8).astype(a.dtype))
    else:
      out.append(jnp.zeros(a.shape, a.dtype))
  return out


def _text(cfg: dict) -> str:
  return ", ".join(f"{k}={v!r}" for k, v in cfg.items())


def autotune(configs: Sequence[dict], key: Callable | None = None, *,
             timer: Callable | None = None) -> Callable[[KernelFunction], Autotuner]:
  """Choose, per input shape, the fastest of `configs` (constexpr keyword sets) for a kernel.

  Stack it above `@mg.mgpu_kernel`::

      @mg.autotune(configs=[dict(bn=256, stages=4), dict(bn=128, stages=6)])
      @mg.mgpu_kernel(out_shape=_out, grid=_grid, block=256)
      def matmul(a, b, c, *, bm: ml.constexpr = 128, bn: ml.constexpr, bk: ml.constexpr = 64,
                 stages: ml.constexpr): ...

      c = matmul(a, b)          # times both configs on the first call for these shapes

  Args:
    configs: dicts of constexpr values; without a GPU and in interpret mode the first that
      compiles for the call is used, untimed. A config that fails to compile is skipped (and logged).
    key: a callable of the inputs (and other constexprs) whose result replaces the
      shapes, dtypes and constexprs as the tuning key (e.g. to bucket shapes);
      None tunes once per exact (shapes, dtypes, other constexprs).
    timer: `timer(fn, *args) -> seconds`, default `mg.bench` (GPU kernel time).
      Given one, tuning runs even without a GPU.
  """
  return lambda kernel: Autotuner(kernel, configs, key=key, timer=timer)
