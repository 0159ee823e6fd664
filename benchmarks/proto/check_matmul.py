"""Check and benchmark the hand-written Mosaic GPU matmul prototype (mgpu_matmul.py).

On a GPU:  correctness for 256x256x256, 512x1024x768 and 4096^3 (f16, bf16) against
           jnp.dot(a, b, preferred_element_type=f32).astype(dtype)  (rel. Frobenius error < 1e-2),
           then TFLOP/s for 4096x8192x4096 and 8192^3 next to jnp.dot's.
On a CPU:  builds and exports (jax.export, platforms=["cuda"]) every configuration and prints
           'export OK'.

Run from the repository root:
    python benchmarks/proto/check_matmul.py                # default config
    python benchmarks/proto/check_matmul.py --quick        # small shapes + one timing
    python benchmarks/proto/check_matmul.py --sweep        # also a few alternative tile configs
    python benchmarks/proto/check_matmul.py --tile-m 256 --tile-n 128 --stages 4
Shapes are "MxNxK" (C[M,N] = A[M,K] @ B[K,N]).
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import statistics
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402

import mgpu_matmul as mm  # noqa: E402

DTYPES = {"f16": jnp.float16, "bf16": jnp.bfloat16}
CHECK_SHAPES = [(256, 256, 256), (512, 1024, 768), (4096, 4096, 4096)]
BENCH_SHAPES = [(4096, 8192, 4096), (8192, 8192, 8192)]
# Alternative configurations tried by --sweep (all fit in 227 KiB of SMEM).
SWEEP = [
    dict(tile_m=128, tile_n=256, tile_k=64, stages=4),
    dict(tile_m=256, tile_n=128, tile_k=64, stages=4),
    dict(tile_m=128, tile_n=128, tile_k=64, stages=6),
    dict(tile_m=128, tile_n=256, tile_k=64, stages=3),
    dict(tile_m=128, tile_n=256, tile_k=64, stages=4, group_m=16),
]


def p(*a):
  print(*a, flush=True)


def parse_shape(s: str):
  m, n, k = (int(x) for x in s.lower().split("x"))
  return m, n, k


def fits(shape, cfg: mm.MatmulConfig):
  m, n, k = shape
  return m % cfg.tile_m == 0 and n % cfg.tile_n == 0 and k % cfg.tile_k == 0


def rel_fro(x, ref):
  x = x.astype(jnp.float32)
  ref = ref.astype(jnp.float32)
  return float(jnp.linalg.norm(x - ref) / jnp.linalg.norm(ref))


def bench(f, *args, warmup=3, iters=20, samples=5):
  out = None
  for _ in range(warmup):
    out = f(*args)
  jax.block_until_ready(out)
  ts = []
  for _ in range(samples):
    t0 = time.perf_counter()
    for _ in range(iters):
      out = f(*args)
    jax.block_until_ready(out)
    ts.append((time.perf_counter() - t0) / iters)
  return statistics.median(ts)


def inputs(shape, dtype, seed=0):
  m, n, k = shape
  ka, kb = jax.random.split(jax.random.key(seed))
  a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
  b = jax.random.normal(kb, (k, n), jnp.float32).astype(dtype)
  return a, b


def run_cpu(configs, shapes, dtypes):
  p(f"jax {jax.__version__} backend {jax.default_backend()}: build + export only")
  p(f"{'dtype':5} {'shape':>16} {'config':34} {'smem':>7}  result")
  n_fail = 0
  for cfg in configs:
    for shape in shapes:
      if not fits(shape, cfg):
        continue
      for dn in dtypes:
        dt = DTYPES[dn]
        m, n, k = shape
        try:
          f = mm.build_matmul(m, n, k, dt, cfg)
          exp = jax.export.export(jax.jit(f), platforms=["cuda"])(
              jax.ShapeDtypeStruct((m, k), dt), jax.ShapeDtypeStruct((k, n), dt))
          ok = "mosaic_gpu_v2" in exp.mlir_module()
          res = "export OK" if ok else "export FAILED (no mosaic_gpu_v2 custom call)"
          n_fail += not ok
        except Exception as e:  # noqa: BLE001
          res = f"FAILED {type(e).__name__}: {str(e)[:200]}"
          n_fail += 1
        p(f"{dn:5} {m:>5}x{n:>5}x{k:>5} {cfg.describe():34} "
          f"{mm.smem_bytes(cfg) // 1024:>5}K  {res}")
  return n_fail


def run_gpu(configs, check_shapes, bench_shapes, dtypes, args):
  dev = jax.devices()[0]
  p(f"jax {jax.__version__} device {dev.device_kind} ({getattr(dev, 'core_count', '?')} SMs)")
  n_fail = 0
  p("== correctness: rel Frobenius error vs jnp.dot(preferred_element_type=f32).astype(dtype)")
  p(f"{'dtype':5} {'shape':>17} {'config':34} {'rel_err':>9} {'max_abs':>9}  result")
  for cfg in configs:
    for shape in check_shapes:
      if not fits(shape, cfg):
        p(f"{'':5} {'x'.join(map(str, shape)):>17} {cfg.describe():34} skipped (not divisible)")
        continue
      for dn in dtypes:
        dt = DTYPES[dn]
        m, n, k = shape
        try:
          a, b = inputs(shape, dt)
          ref = jnp.dot(a, b, preferred_element_type=jnp.float32).astype(dt)
          out = jax.block_until_ready(mm.matmul(a, b, cfg))
          assert out.shape == (m, n) and out.dtype == dt, (out.shape, out.dtype)
          err = rel_fro(out, ref)
          mabs = float(jnp.max(jnp.abs(out.astype(jnp.float32) - ref.astype(jnp.float32))))
          ok = err < 1e-2
          n_fail += not ok
          p(f"{dn:5} {m:>5}x{n:>5}x{k:>5} {cfg.describe():34} {err:9.2e} {mabs:9.2e}  "
            f"{'PASS' if ok else 'FAIL'}")
        except Exception as e:  # noqa: BLE001
          n_fail += 1
          p(f"{dn:5} {m:>5}x{n:>5}x{k:>5} {cfg.describe():34} ERROR {type(e).__name__}: "
            f"{str(e)[:300]}")
          if args.verbose:
            traceback.print_exc()
  if args.no_bench:
    return n_fail
  p(f"== timing: median of {args.samples} samples x {args.iters} iters (warmup {args.warmup})")
  p(f"{'dtype':5} {'shape':>17} {'config':34} {'mgpu_us':>9} {'TFLOP/s':>8} "
    f"{'xla_us':>9} {'TFLOP/s':>8} {'ratio':>6}")
  xla_dot = jax.jit(lambda a, b: jnp.dot(a, b))
  for shape in bench_shapes:
    for dn in dtypes:
      dt = DTYPES[dn]
      m, n, k = shape
      flops = 2.0 * m * n * k
      a, b = inputs(shape, dt, seed=1)
      t_ref = bench(xla_dot, a, b, warmup=args.warmup, iters=args.iters, samples=args.samples)
      for cfg in configs:
        if not fits(shape, cfg):
          continue
        try:
          f = mm.build_matmul(m, n, k, dt, cfg)
          t = bench(f, a, b, warmup=args.warmup, iters=args.iters, samples=args.samples)
          p(f"{dn:5} {m:>5}x{n:>5}x{k:>5} {cfg.describe():34} {t * 1e6:9.1f} "
            f"{flops / t / 1e12:8.1f} {t_ref * 1e6:9.1f} {flops / t_ref / 1e12:8.1f} "
            f"{t_ref / t:6.3f}")
        except Exception as e:  # noqa: BLE001
          n_fail += 1
          p(f"{dn:5} {m:>5}x{n:>5}x{k:>5} {cfg.describe():34} ERROR {type(e).__name__}: "
            f"{str(e)[:300]}")
  return n_fail


def main(argv=None):
  ap = argparse.ArgumentParser(description=__doc__,
                               formatter_class=argparse.RawDescriptionHelpFormatter)
  d = mm.MatmulConfig()
  ap.add_argument("--tile-m", type=int, default=d.tile_m)
  ap.add_argument("--tile-n", type=int, default=d.tile_n)
  ap.add_argument("--tile-k", type=int, default=d.tile_k)
  ap.add_argument("--stages", type=int, default=d.stages)
  ap.add_argument("--group-m", type=int, default=d.group_m)
  ap.add_argument("--epi-m", type=int, default=d.epi_m)
  ap.add_argument("--num-ctas", type=int, default=None,
                  help="persistent grid size (default: number of SMs; use a large number "
                       "for one CTA per tile)")
  ap.add_argument("--producer-regs", type=int, default=d.producer_regs)
  ap.add_argument("--consumer-regs", type=int, default=d.consumer_regs)
  ap.add_argument("--sweep", action="store_true",
                  help="also run the alternative configs in SWEEP")
  ap.add_argument("--quick", action="store_true",
                  help="check the two small shapes only and time only 4096x8192x4096")
  ap.add_argument("--no-bench", action="store_true", help="correctness only")
  ap.add_argument("--dtypes", default="f16,bf16")
  ap.add_argument("--check-shapes", default=None, help="comma list of MxNxK")
  ap.add_argument("--bench-shapes", default=None, help="comma list of MxNxK")
  ap.add_argument("--warmup", type=int, default=3)
  ap.add_argument("--iters", type=int, default=20)
  ap.add_argument("--samples", type=int, default=5)
  ap.add_argument("--cpu-export", action="store_true",
                  help="only build + export, even when a GPU is present")
  ap.add_argument("-v", "--verbose", action="store_true")
  args = ap.parse_args(argv)

  base = mm.MatmulConfig(
      tile_m=args.tile_m, tile_n=args.tile_n, tile_k=args.tile_k, stages=args.stages,
      group_m=args.group_m, epi_m=args.epi_m, num_ctas=args.num_ctas,
      producer_regs=args.producer_regs, consumer_regs=args.consumer_regs)
  configs = [base]
  if args.sweep:
    for kw in SWEEP:
      c = dataclasses.replace(base, **kw)
      if c not in configs:
        configs.append(c)
  dtypes = [s.strip() for s in args.dtypes.split(",") if s.strip()]
  check_shapes = CHECK_SHAPES[:2] if args.quick else CHECK_SHAPES
  bench_shapes = BENCH_SHAPES[:1] if args.quick else BENCH_SHAPES
  if args.check_shapes:
    check_shapes = [parse_shape(s) for s in args.check_shapes.split(",")]
  if args.bench_shapes:
    bench_shapes = [parse_shape(s) for s in args.bench_shapes.split(",")]

  if jax.default_backend() == "gpu" and not args.cpu_export:
    n_fail = run_gpu(configs, check_shapes, bench_shapes, dtypes, args)
  else:
    n_fail = run_cpu(configs, list(dict.fromkeys(check_shapes + bench_shapes)), dtypes)
  p(f"== {'ALL OK' if n_fail == 0 else f'{n_fail} FAILURE(S)'}")
  return 1 if n_fail else 0


if __name__ == "__main__":
  sys.exit(main())
