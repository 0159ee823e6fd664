"""Timing helpers for the benchmark scripts (GPU only).

How to time (docs/benchmarks.md): report two figures per contender, measured in the same process:
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
  Mosaic GPU profiler; all kernels of a call summed)."""
  import mgpu_dsl as mg
  return mg.bench(fn, *args, iterations=iterations) * 1e3


def run_smoke_cases(cases: dict, prelude: str, *, default_timeout: float, root: str):
  """Run each case (`name -> python source`, after `prelude`) once, in its own process with a
  timeout, printing OK, WRONG (an AssertionError), ERROR or HANG with its wall time. A kernel
  whose barriers are wrong hangs rather than fails: here a hang costs one case's timeout."""
  import argparse
  import subprocess
  import sys
  p = argparse.ArgumentParser()
  p.add_argument("--timeout", type=float, default=default_timeout)
  p.add_argument("-k", default="", help="only cases whose name contains this")
  args = p.parse_args()
  for name, call in cases.items():
    if args.k not in name:
      continue
    t0 = time.perf_counter()
    try:
      r = subprocess.run([sys.executable, "-c", prelude + call], capture_output=True, text=True,
                         timeout=args.timeout, cwd=root)
      status = "OK" if r.returncode == 0 else ("WRONG" if "AssertionError" in r.stderr else "ERROR")
      lines = r.stderr.strip().splitlines() or [""]
      detail = "" if r.returncode == 0 else next((x for x in reversed(lines) if "Error" in x), lines[-1])[:200]
    except subprocess.TimeoutExpired:
      status, detail = "HANG", f"no result in {args.timeout:.0f} s"
    print(f"{status:5} {time.perf_counter() - t0:6.1f} s  {name}  {detail}", flush=True)
