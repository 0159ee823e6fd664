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
import logging
import os
import sys
import time

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


DIRECT_TILES = [(8, 512), (16, 512), (4, 1024), (8, 1024), (16, 1024), (32, 512)]


def configs(kernel_dtypes, out_dtype, quick):
  """The sweep: every tile, stage count and CTAs per SM whose buffers fit the SMEM budget,
  then the register-only kernels (`direct`) over their tiles."""
  if quick:
    yield {}
    yield dict(direct=True)
    return
  for bm, bn in DIRECT_TILES:
    yield dict(direct=True, bm=bm, bn=bn)
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
  if cfg.get("direct"):
    return "direct " + (f"{cfg['bm']}x{cfg['bn']}" if "bm" in cfg else "defaults")
  ws = " ws" if cfg.get("specialize") else ""
  return f"{cfg['bm']}x{cfg['bn']} s{cfg['stages']} {cfg['ctas'] // mg.num_sms()}/SM{ws}"


@jax.jit
def max_error(got, want):
  """Largest |got - want| relative to 1 + |want|, computed on the device (1 GiB to the host takes seconds)."""
  g, w = got.astype(jnp.float32), want.astype(jnp.float32)
  return jnp.max(jnp.abs(g - w) / (1.0 + jnp.abs(w)))


def measure(fn, args, want, nbytes):
  tol = 1e-6 if want.dtype == jnp.float32 else 2e-2
  err = float(max_error(fn(*args), want))
  if not err <= tol:   # also catches NaN
    raise AssertionError(f"wrong result: max relative error {err:.3g} > {tol}")
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
    best = {}     # pattern -> (kernel GB/s, wall GB/s, config): the best of each pattern
    for cfg in configs(dtypes, want.dtype, quick):
      try:
        k = ex.DIRECT_KERNELS[name] if cfg.get("direct") else kernel
        kw = {c: v for c, v in cfg.items() if c != "direct"}
        ok, ow = measure(jax.jit(lambda *a, k=k, kw=kw: k(*a, **kw)), args, want, nbytes)
      except Exception as e:   # report and keep going: one bad config must not hide the others
        print(f"{name} {describe(cfg)}: {type(e).__name__}: {str(e)[:200]}")
        continue
      print(f"{name} {describe(cfg)}: {ok:.0f} GB/s kernel, {ow:.0f} wall (XLA {xk:.0f})", flush=True)
      pattern = "direct" if cfg.get("direct") else "pipelined"
      if pattern not in best or ok > best[pattern][0]:
        best[pattern] = (ok, ow, cfg)
    for pattern, (ok, ow, cfg) in best.items():
      rows.append((name, "mgpu_dsl", describe(cfg), f"{ok:.0f}", f"{ow:.0f}", f"{ok / xk:.3f}", f"{ow / xw:.3f}"))
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; {SHAPE[0] * SHAPE[1]} elements a tensor;"
        f" GB/s = (bytes read + written) / time")
  print(table(("kernel", "contender", "config", "kernel GB/s", "wall GB/s", "vs XLA (kernel)",
               "vs XLA (wall)"), rows))
  x = ex.inputs(SHAPE, (jnp.float32,))
  fresh = lambda: jax.jit(lambda v: mg.mgpu_kernel(out_shape=ex.scale.out_shape, grid=ex.scale.grid)(
      ex.scale.fn)(v, factor=3.0))
  # The frontend's share (trace, proofs, module build) comes from the mgpu_dsl logger; the
  # rest is jax: lowering, Mosaic GPU's LLVM/ptxas compile, the launch.
  handler = logging.StreamHandler(sys.stdout)
  logging.getLogger("mgpu_dsl").addHandler(handler)
  logging.getLogger("mgpu_dsl").setLevel(logging.INFO)
  os.environ["MGPU_DSL_CACHE_DIR"] = "off"
  print(f"first call (trace + compile + run) of a new a * 3 kernel: {first_call_time(fresh, *x):.3f} s")
  fresh4 = jax.jit(lambda v: mg.mgpu_kernel(out_shape=ex.scale.out_shape, grid=ex.scale.grid)(
      ex.scale.fn)(v, factor=4.0))
  t0 = time.perf_counter()
  lowered = fresh4.lower(*x)           # jax tracing: mgpu_dsl's frontend and the Mosaic GPU module
  t1 = time.perf_counter()
  compiled = lowered.compile()         # XLA, and Mosaic GPU's passes, LLVM and ptxas
  t2 = time.perf_counter()
  jax.block_until_ready(compiled(*x))
  t3 = time.perf_counter()
  print(f"a new a * 4 kernel by stage: lower {t1 - t0:.3f} s, compile {t2 - t1:.3f} s, first run {t3 - t2:.3f} s")
  logging.getLogger("mgpu_dsl").removeHandler(handler)


if __name__ == "__main__":
  main()
