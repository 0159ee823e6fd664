"""Kernel time (CUPTI, jax's Mosaic GPU profiler) and wall time of a call, as DESIGN.md's
"How to time" asks: the median over `iterations` runs of the GPU time of all kernels one
call launches, and the median of timed loops of the jitted call after warm-up."""
import statistics

import jax
from jax.experimental.mosaic.gpu import profiler

from common import median_time


def kernel_ms(fn, *args, iterations=20):
  """Median milliseconds of GPU time per call of `fn(*args)` (all its kernels summed)."""
  jax.block_until_ready(fn(*args))
  _, times = profiler.measure(fn, aggregate=True, iterations=iterations)(*args)
  if times is None:
    raise RuntimeError("the call launched no kernel")
  times = times if isinstance(times, (list, tuple)) else [times]
  return statistics.median(times)


def wall_ms(fn, *args):
  """Median milliseconds per call in timed loops of the jitted call (Python dispatch included)."""
  return median_time(fn, *args) * 1e3
