"""Timing helpers for the benchmark scripts (GPU only).

DESIGN.md "How to time": report two figures per contender, measured in the same process:
kernel time (`mg.bench`: CUPTI, the sum of the GPU kernels one call launches, median of
`iterations` calls) and wall time (`mg.bench_wall`: median of timed loops of calls after
warm-up). `timings(fn, *args)` gives both; `median_time` is the wall time, as before.
"""
import dataclasses
import time

import jax

import mgpu_dsl as mg


@dataclasses.dataclass(frozen=True)
class Timing:
  kernel_s: float      # GPU kernel time per call (CUPTI), seconds
  wall_s: float        # wall time per call, seconds

  def rate(self, work: float) -> tuple[float, float]:
    """`work` (flops, bytes) per second by kernel time and by wall time."""
    return work / self.kernel_s, work / self.wall_s


def kernel_time(fn, *args, iterations=20):
  """Median GPU kernel time of `fn(*args)`, seconds (mg.bench)."""
  return mg.bench(fn, *args, iterations=iterations)


def median_time(fn, *args, warmup=3, iters=20, samples=5):
  """Median wall seconds per call of `fn(*args)` over `samples` loops of `iters` calls."""
  return mg.bench_wall(fn, *args, warmup=warmup, iterations=iters, samples=samples)


wall_time = median_time


def timings(fn, *args, iterations=20):
  """Both figures of `fn(*args)`: kernel time and wall time, in one process."""
  return Timing(kernel_time(fn, *args, iterations=iterations), median_time(fn, *args, iters=iterations))


def first_call_time(make_fn, *args):
  """Seconds for trace + compile + first run of a freshly made function."""
  t0 = time.perf_counter()
  jax.block_until_ready(make_fn()(*args))
  return time.perf_counter() - t0


def table(header, rows):
  widths = [max(len(str(x)) for x in col) for col in zip(header, *rows)]
  line = lambda r: "| " + " | ".join(str(x).rjust(w) for x, w in zip(r, widths)) + " |"
  out = [line(header), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
  return "\n".join(out + [line(r) for r in rows])


def kernel_ms(fn, *args, iterations=20):
  """Median GPU milliseconds of the kernels one call of `fn(*args)` launches (CUPTI, via jax's
  Mosaic GPU profiler; all kernels of a call summed). DESIGN.md "How to time"."""
  import mgpu_dsl as mg
  return mg.bench(fn, *args, iterations=iterations) * 1e3
