"""Timing helpers for the benchmark scripts (GPU only)."""
import statistics
import time

import jax


def median_time(fn, *args, warmup=3, iters=20, samples=5):
  """Median seconds per call of `fn(*args)` over `samples` loops of `iters` calls."""
  for _ in range(warmup):
    jax.block_until_ready(fn(*args))
  times = []
  for _ in range(samples):
    t0 = time.perf_counter()
    for _ in range(iters):
      out = fn(*args)
    jax.block_until_ready(out)
    times.append((time.perf_counter() - t0) / iters)
  return statistics.median(times)


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
