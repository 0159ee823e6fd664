"""Matmul TFLOP/s on the H200: mgpu_dsl (examples/matmul.py) vs jnp.dot (cuBLAS) vs Pallas Mosaic GPU.

    python benchmarks/matmul.py [--quick] [--dtype float16|bfloat16] [--plot docs/matmul.png]

For each shape and dtype, each contender runs at its best configuration of a small
sweep, chosen by kernel time (CUPTI, via Mosaic GPU's profiler: the median of 20
calls); its wall time (median of timed loops after warm-up) is reported beside it.
Every result is checked against jnp.dot first. cuBLAS is the faster of `a @ b` and
`jnp.dot(a, b, preferred_element_type=f32).astype(a.dtype)`. mgpu_dsl's sweep covers
its persistent warp-specialised default, the non-persistent and the single-producer
pipelines. Also prints the first-call latency (trace + compile + run) of mgpu_dsl and
Pallas. A timing is never an assertion.
"""
import argparse
import os
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg

sys.path.insert(0, os.path.dirname(__file__))
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
from common import kernel_time, median_time, table  # noqa: E402

SHAPES = [(2048, 2048, 2048), (4096, 4096, 4096), (4096, 8192, 4096), (8192, 8192, 8192),
          (16384, 4096, 4096)]
OURS = [dict(bn=256, stages=4), dict(bn=256, stages=3), dict(bn=128, stages=6),        # persistent, warp-specialised
        dict(bn=256, stages=4, group=16), dict(bn=256, stages=4, cluster_m=2),
        dict(bn=128, stages=6, cluster_m=2), dict(bn=256, stages=4, persistent=False, cluster_m=2),
        dict(bn=256, stages=4, persistent=False), dict(bn=128, stages=6, persistent=False),
        dict(bn=256, stages=4, persistent=False, specialize=False),                    # the earlier pipeline
        dict(bn=256, stages=3, persistent=False, specialize=False)]


def describe(cfg):
  kind = ("persistent " if cfg.get("persistent", True) else "") + ("ws" if cfg.get("specialize", True) else "sw")
  group = f" g{cfg['group']}" if "group" in cfg else ""
  cluster = f" c{cfg['cluster_m']}" if "cluster_m" in cfg else ""
  return f"128x{cfg['bn']}x{cfg.get('bk', 64)} s{cfg['stages']} {kind}{group}{cluster}"


def tflops(m, n, k, t):
  return 2 * m * n * k / t / 1e12


def checked(fn, a, b, ref):
  out = fn(a, b)
  err = float(jnp.linalg.norm(out.astype(jnp.float32) - ref) / jnp.linalg.norm(ref))
  if not err < 1e-2:
    raise AssertionError(f"relative error {err:.3g}")
  return fn


def best(candidates, a, b, ref, m, n, k):
  """(kernel TFLOP/s, wall TFLOP/s, config name) of the candidate fastest by kernel time,
  or (nan, nan, error)."""
  out, fastest, last_err = None, None, ""
  for name, make in candidates:
    try:
      fn = checked(make(), a, b, ref)
      t = kernel_time(fn, a, b)
    except Exception as e:  # a config the contender cannot run: report, keep going
      last_err = f"{type(e).__name__}: {str(e)[:80]}"
      print(f"  skip {name}: {last_err}", flush=True)
      continue
    print(f"  {name}: {tflops(m, n, k, t):.0f} TFLOP/s (kernel)", flush=True)
    if out is None or tflops(m, n, k, t) > out[0]:
      out, fastest = (tflops(m, n, k, t), name), fn
  if out is None:
    return float("nan"), float("nan"), last_err
  return out[0], tflops(m, n, k, median_time(fastest, a, b)), out[1]


def ours(m, n, k):
  import matmul as ex
  for cfg in OURS:
    if m % (128 * cfg.get("cluster_m", 1)) or n % cfg["bn"] or k % cfg.get("bk", 64):
      continue
    yield describe(cfg), lambda cfg=cfg: jax.jit(lambda a, b: ex.matmul(a, b, **cfg))


def cublas(m, n, k):
  yield "a @ b", lambda: jax.jit(lambda a, b: a @ b)
  yield "f32 acc", lambda: jax.jit(lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype))


# Pallas's (tile_m, tile_n, steps, wg_dimension): its 128x256 and 256x128 tiles take two warpgroups'
# tiles; four steps overflow SMEM on the H200 (docs/logs/matmul_quick_session5.log), two fit.
PALLAS_TILES = [(128, 256, 2, "N"), (256, 128, 2, "M"), (128, 256, 4, "N"), (128, 128, 4, "N")]


def pallas(m, n, k):
  from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm
  D = hm.MatmulDimension
  for tm, tn, steps, wg in PALLAS_TILES:
    wg = getattr(D, wg)
    for width in (8, 16):
      cfg = hm.TuningConfig(tile_m=tm, tile_n=tn, tile_k=64, max_concurrent_steps=steps,
                            epi_tile_m=64, epi_tile_n=64, grid_minor_dim=D.N,
                            grid_tile_width=width, wg_dimension=wg)
      yield (f"{tm}x{tn} s{steps} w{width}",
             lambda cfg=cfg: jax.jit(lambda a, b: hm.matmul(a, b, None, cfg)))


def proto(m, n, k):
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), "proto"))
  import mgpu_matmul as pm
  yield ("128x256 s4 ws", lambda: jax.jit(lambda a, b: pm.matmul(a, b, pm.MatmulConfig())))


HEADER = ("dtype", "shape", "mgpu_dsl", "(wall)", "config", "cuBLAS", "(wall)", "Pallas", "(wall)",
          "Pallas config", "hand Mosaic", "vs best", "vs best (wall)")


def first_call(make, a, b):
  t0 = time.perf_counter()
  jax.block_until_ready(make()(a, b))
  return time.perf_counter() - t0


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="4096x8192x4096 only")
  p.add_argument("--plot", default="", help="save a bar chart here")
  p.add_argument("--dtype", choices=("float16", "bfloat16"), default=None,
                 help="one dtype only (the full run takes two 10-minute device calls otherwise)")
  p.add_argument("--no-multicast", action="store_true",
                 help="leave out the cluster_m=2 (TMA multicast) configurations")
  p.add_argument("--lean", action="store_true",
                 help="the configurations that won a shape in earlier runs only (both dtypes in one device call)")
  p.add_argument("--bk128", action="store_true",
                 help="our default against 128-deep k steps (half the steps, barriers and TMA issues a tile)")
  args = p.parse_args()
  if args.bk128:
    OURS[:] = [dict(bn=256, stages=4), dict(bn=256, bk=128, stages=2), dict(bn=256, bk=128, stages=2, cluster_m=2),
               dict(bn=128, bk=128, stages=3), dict(bn=256, stages=4, cluster_m=2)]
  if args.lean:
    OURS[:] = [c for c in OURS if c.get("persistent", True) and "group" not in c]
    PALLAS_TILES[:] = [t for t in PALLAS_TILES if t[:2] == (128, 128)]
  if args.no_multicast:
    OURS[:] = [c for c in OURS if "cluster_m" not in c]
  shapes = [(4096, 8192, 4096)] if args.quick else SHAPES
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}")
  rows, results = [], []
  for dtype in [jnp.dtype(args.dtype)] if args.dtype else (jnp.float16, jnp.bfloat16):
    for m, n, k in shapes:
      ka, kb = jax.random.split(jax.random.key(m + n + k))
      a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
      b = jax.random.normal(kb, (k, n), jnp.float32).astype(dtype)
      ref = jnp.dot(a, b, preferred_element_type=jnp.float32)
      cub, cubw, _ = best(cublas(m, n, k), a, b, ref, m, n, k)
      o, ow, ocfg = best(ours(m, n, k), a, b, ref, m, n, k)
      peers = not args.bk128         # (--bk128 compares our configurations: cuBLAS alone beside them)
      pl, plw, pcfg = best(pallas(m, n, k), a, b, ref, m, n, k) if peers else (float("nan"),) * 2 + ("",)
      pr, _, _ = best(proto(m, n, k), a, b, ref, m, n, k) if peers else (float("nan"),) * 3
      top = max(x for x in (cub, pl) if x == x)
      topw = max(x for x in (cubw, plw) if x == x)
      rows.append((jnp.dtype(dtype).name, f"{m}x{n}x{k}", f"{o:.0f}", f"{ow:.0f}", ocfg, f"{cub:.0f}",
                   f"{cubw:.0f}", f"{pl:.0f}", f"{plw:.0f}", pcfg, f"{pr:.0f}", f"{o / top:.3f}",
                   f"{ow / topw:.3f}"))
      results.append((jnp.dtype(dtype).name, f"{m}x{n}x{k}", o, cub, pl))
      print(table(HEADER, rows[-1:]), flush=True)
  print("\nTFLOP/s (kernel time; wall time beside it), each contender at its best swept configuration;"
        " 'vs best' divides by the better of cuBLAS and Pallas:")
  print(table(HEADER, rows))
  if args.bk128:
    return
  a = jax.random.normal(jax.random.key(1), (4096, 4096), jnp.float16)
  import matmul as ex
  from jax.experimental.pallas.ops.gpu import hopper_matmul_mgpu as hm
  fresh = lambda: mg.mgpu_kernel(out_shape=ex.matmul.out_shape, grid=ex.matmul.grid, block=ex.matmul.block)(
      ex.matmul.fn)
  ours_fc = first_call(lambda: jax.jit(fresh()), a, a)
  cfg = hm.TuningConfig(tile_m=128, tile_n=128, tile_k=64, max_concurrent_steps=4, epi_tile_m=64,
                        epi_tile_n=64)
  pl_fc = first_call(lambda: jax.jit(lambda a, b: hm.matmul(a, b, None, cfg)), a, a)
  print(f"\nfirst call (trace + compile + run), f16 4096^3: mgpu_dsl {ours_fc:.2f} s, Pallas {pl_fc:.2f} s")
  if args.plot:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(11, 4))
    x = np.arange(len(results))
    for i, (label, col) in enumerate([("mgpu_dsl", 2), ("jnp.dot (cuBLAS)", 3), ("Pallas MGPU", 4)]):
      ax.bar(x + (i - 1) * 0.27, [r[col] for r in results], 0.27, label=label)
    ax.set_xticks(x, [f"{r[0]}\n{r[1]}" for r in results], fontsize=7)
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"matmul on {jax.devices()[0].device_kind}, jax {jax.__version__}")
    ax.legend()
    fig.tight_layout()
    fig.savefig(args.plot, dpi=120)
    print(f"plot saved to {args.plot}")


if __name__ == "__main__":
  main()
