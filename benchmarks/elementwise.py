"""Memory-bound elementwise kernels on the H200: mgpu_dsl (examples/elementwise.py) against XLA.

    python benchmarks/elementwise.py [--quick]

Four kernels over 2^28 elements (1 GiB of float32): `a * 2` f32, `a + b` f32,
`gelu(a) * b` bf16 and a float32 -> bfloat16 cast. XLA is `jax.jit` of the jnp
expression. mgpu_dsl runs the persistent, pipelined kernels of examples/elementwise.py
over a sweep of tiles, stages and CTAs per SM (--quick: the defaults only); the best
by kernel time is reported. Every contender's result is checked first (random normal
inputs). GB/s counts bytes read plus bytes written. Kernel time: the CUPTI profiler
(median of 20 calls); wall time: median of timed loops of jitted calls. A timing is
never an assertion. Also prints the first call (trace + compile + run) of a new kernel.
"""
import argparse
import os
import sys

import jax
import jax.numpy as jnp

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import first_call_time, kernel_time, median_time, table  # noqa: E402
import elementwise as ex  # noqa: E402

import mgpu_dsl as mg  # noqa: E402

SHAPE = (65536, 4096)
TILES = [(32, 128), (64, 128), (32, 256), (64, 256)]
SMEM_BUDGET = 200 * 1024       # per SM, leaving room for barriers and alignment


def configs(kernel_dtypes, out_dtype, quick):
  """The sweep: every tile, stage count and CTAs per SM whose buffers fit the SMEM budget."""
  if quick:
    yield {}
    return
  for bm, bn in TILES:
    per_stage = bm * bn * (sum(jnp.dtype(d).itemsize for d in kernel_dtypes) + jnp.dtype(out_dtype).itemsize)
    for per_sm in (1, 2):
      for stages in (2, 3, 4, 6):
        if stages * per_stage <= SMEM_BUDGET // per_sm:
          yield dict(bm=bm, bn=bn, stages=stages, ctas=per_sm * mg.num_sms())
          if per_sm == 1 and stages > 2:
            yield dict(bm=bm, bn=bn, stages=stages, ctas=mg.num_sms(), specialize=True)


def describe(cfg):
  if not cfg:
    return "defaults"
  ws = " ws" if cfg.get("specialize") else ""
  return f"{cfg['bm']}x{cfg['bn']} s{cfg['stages']} {cfg['ctas'] // mg.num_sms()}/SM{ws}"


def measure(fn, args, want, nbytes):
  ex.check(fn(*args), want)
  k, w = kernel_time(fn, *args), median_time(fn, *args)
  return nbytes / k / 1e9, nbytes / w / 1e9


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="only the kernels' default configurations")
  p.add_argument("--kernel", action="append", help="only this kernel (repeatable), e.g. 'a * 2'")
  a = p.parse_args()
  quick = a.quick
  rows = []
  for name, (kernel, ref, dtypes) in ex.KERNELS.items():
    if a.kernel and name not in a.kernel:
      continue
    args = ex.inputs(SHAPE, dtypes)
    xla = jax.jit(ref)
    want = xla(*args)
    nbytes = sum(a.nbytes for a in args) + want.nbytes
    xk, xw = measure(xla, args, want, nbytes)
    rows.append((name, "XLA", "-", f"{xk:.0f}", f"{xw:.0f}", "1.00", "1.00"))
    best = None
    for cfg in configs(dtypes, want.dtype, quick):
      try:
        ok, ow = measure(jax.jit(lambda *a, cfg=cfg: kernel(*a, **cfg)), args, want, nbytes)
      except Exception as e:   # report and keep going: one bad config must not hide the others
        print(f"{name} {describe(cfg)}: {type(e).__name__}: {str(e)[:200]}")
        continue
      print(f"{name} {describe(cfg)}: {ok:.0f} GB/s kernel, {ow:.0f} wall (XLA {xk:.0f})", flush=True)
      if best is None or ok > best[0]:
        best = (ok, ow, cfg)
    if best is not None:
      ok, ow, cfg = best
      rows.append((name, "mgpu_dsl", describe(cfg), f"{ok:.0f}", f"{ow:.0f}", f"{ok / xk:.3f}", f"{ow / xw:.3f}"))
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {SHAPE[0] * SHAPE[1]} elements a tensor;"
        f" GB/s = (bytes read + written) / time")
  print(table(("kernel", "contender", "config", "kernel GB/s", "wall GB/s", "vs XLA (kernel)",
               "vs XLA (wall)"), rows))
  x = ex.inputs(SHAPE, (jnp.float32,))
  fresh = lambda: jax.jit(lambda v: mg.mgpu_kernel(out_shape=ex.scale.out_shape, grid=ex.scale.grid)(
      ex.scale.fn)(v, factor=3.0))
  print(f"first call (trace + compile + run) of a new a * 3 kernel: {first_call_time(fresh, *x):.3f} s")


if __name__ == "__main__":
  main()
