"""Timing kernels: GPU kernel time from jax's Mosaic GPU profiler (CUPTI), and wall time.

    t = mg.bench(matmul, a, b)                  # median kernel time, seconds
    w = mg.bench_wall(jax.jit(matmul), a, b)    # median wall time per call, seconds

Like `triton.testing.do_bench`. Kernel time is the sum of the GPU time of every
kernel one call of `fn` launches (XLA's too), free of Python dispatch: the figure
the benchmarks report as kernel time (docs/benchmarks.md). Wall time is what a user's step sees.
"""
from __future__ import annotations

import functools
import statistics
import time
from typing import Any, Callable

from .frontend import errors as E
from .frontend.loc import Loc, user_loc


@functools.lru_cache(maxsize=None)
def has_gpu() -> bool:
  """Whether JAX sees a GPU (asked once per process)."""
  import jax
  try:
    return bool(jax.devices("gpu"))
  except RuntimeError:
    return False


def caller_loc() -> Loc:
  """The location of the first frame outside mgpu_dsl and JAX: where the user called it from
  (through jax.vmap's rules, jax.jit's tracing...)."""
  import jax
  return user_loc(skip=(jax,))


def bench(fn: Callable, *args: Any, iterations: int = 20) -> float:
  """Median GPU kernel time of `fn(*args)`, in seconds, over `iterations` calls.

  `fn` is jitted (unless it already is) and run once to warm up; CUPTI then
  records every kernel each call launches, and their times are summed per call.
  Pass constexprs with `functools.partial(kernel, bn=128)`. Needs a GPU::

      t = mg.bench(double, x)
      print(f"{x.nbytes * 2 / t / 1e12:.2f} TB/s")

  Raises KernelError without a GPU, or when `fn` launches no GPU kernel.
  """
  if not isinstance(iterations, int) or iterations < 1:
    raise ValueError(f"iterations must be a positive int, got {iterations!r}")
  if not has_gpu():
    raise E.NoGpuError("mg.bench measures GPU kernel time, and JAX sees no GPU here", caller_loc(),
                        hint="run it on a machine with an NVIDIA GPU; mg.bench_wall times calls on any device")
  from jax.experimental.mosaic.gpu import profiler
  name = getattr(fn, "__name__", None) or getattr(getattr(fn, "func", None), "__name__", "the function")
  try:
    _, ms = profiler.measure(fn, iterations=iterations)(*args)
  except E.KernelError:
    raise
  except Exception as e:    # CUPTI busy (Nsight attached), launches that differ per call, ...
    first = (str(e).strip().splitlines() or [""])[0][:300]
    raise E.NoGpuError(f"mg.bench could not time {name}: {type(e).__name__}: {first}", caller_loc(),
                        hint="CUPTI allows one subscriber: not under Nsight or another profiler;"
                             " mg.bench_wall needs no profiler") from e
  if ms is None:
    raise E.NoGpuError(f"{name} launched no GPU kernel", caller_loc(),
                        hint="mg.bench times GPU work: pass a kernel or a jitted function of GPU arrays")
  ms = ms if isinstance(ms, list) else [ms]
  return statistics.median(ms) / 1e3


def bench_wall(fn: Callable, *args: Any, warmup: int = 3, iterations: int = 20,
               samples: int = 5) -> float:
  """Median wall time of one call of `fn(*args)`, in seconds.

  After `warmup` calls, times `samples` loops of `iterations` calls each (waiting
  for the last result with jax.block_until_ready) and returns the median loop
  time divided by `iterations`. Works on any device::

      t = mg.bench_wall(jax.jit(double), x)
  """
  import jax
  for name, v, least in (("warmup", warmup, 0), ("iterations", iterations, 1), ("samples", samples, 1)):
    if not isinstance(v, int) or isinstance(v, bool) or v < least:
      raise E.KernelTypeError(f"mg.bench_wall's {name} must be an int of at least {least}, got {v!r}",
                              caller_loc(), hint="mg.bench_wall(f, *args, warmup=3, iterations=20, samples=5)")
  for _ in range(warmup):
    jax.block_until_ready(fn(*args))
  times = []
  for _ in range(samples):
    t0 = time.perf_counter()
    for _ in range(iterations):
      out = fn(*args)
    jax.block_until_ready(out)
    times.append((time.perf_counter() - t0) / iterations)
  return statistics.median(times)
