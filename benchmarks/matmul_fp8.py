"""FP8 / int8 matmul TFLOP/s on the H200: mgpu_dsl (examples/matmul_fp8.py) vs XLA's jnp.dot.

    python benchmarks/matmul_fp8.py [--quick] [--dtype float8_e4m3fn]

Shapes 4096^3, 4096x8192x4096 (m x n x k) and 8192^3. a is (m, k) and bt (n, k), the
layout 8-bit GEMMs want (K-major). Contenders, checked against each other first:
  * mgpu_dsl `matmul_scaled` with unit scales, float32 output (as the reference) and bf16
    output (what a scaled FP8 layer writes), best of a small tile sweep;
  * `jnp.dot(a, bt.T, preferred_element_type=float32)` on the same 8-bit inputs (XLA);
  * `jnp.dot` of float16 copies of the inputs (the 16-bit baseline).
Figures: kernel time (CUPTI, median of 20) as TFLOP/s, and wall time (median of timed loops)
in ms. --quick: 8192^3 float8_e4m3fn only.
"""
import argparse
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg

sys.path.insert(0, os.path.dirname(__file__))
from common import table  # noqa: E402

# examples/matmul_fp8.py, loaded by path: this script has the same name. Its `from matmul import` must
# find examples/matmul.py, not this folder's benchmark of the same name.
_examples = os.path.join(os.path.dirname(__file__), "..", "examples")
sys.path.insert(0, _examples)
sys.modules.pop("matmul", None)
_spec = importlib.util.spec_from_file_location("matmul_fp8_example", os.path.join(_examples, "matmul_fp8.py"))
ex = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ex)

SHAPES = [(4096, 4096, 4096), (4096, 8192, 4096), (8192, 8192, 8192)]
TILES = [dict(bm=128, bn=256, bk=128, stages=4), dict(bm=128, bn=256, bk=128, stages=3),
         dict(bm=128, bn=128, bk=128, stages=6), dict(bm=256, bn=128, bk=128, stages=3),
         dict(bm=128, bn=256, bk=128, stages=4, cluster_m=2), dict(bm=128, bn=256, bk=128, stages=3, cluster_m=2),
         dict(bm=128, bn=256, bk=128, stages=4, specialize=False),
         dict(bm=128, bn=256, bk=128, stages=4, persistent=False, specialize=False)]


def tflops(m, n, k, ms):
  return 2 * m * n * k / (ms * 1e-3) / 1e12


def rel(got, want):
  got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))


def timed(fn, args, want, tol, m, n, k):
  err = rel(fn(*args), want)
  if not err < tol:
    raise AssertionError(f"relative error {err:.2g}")
  return tflops(m, n, k, mg.bench(fn, *args) * 1e3), mg.bench_wall(fn, *args) * 1e3


def ours_best(a, bt, rows, cols, want, out_dtype, m, n, k):
  top, why = (float("nan"), float("nan"), ""), ""
  for t in TILES:
    if m % t["bm"] or n % t["bn"]:
      continue
    fn = jax.jit(lambda a, bt, r, c, t=t: ex.scaled_matmul(a, bt, r, c, out_dtype=out_dtype, **t))
    try:
      tf, wall = timed(fn, (a, bt, rows, cols), want, 1e-2, m, n, k)
    except Exception as e:  # a tile the kernel cannot run: note it, go on
      why = f"{type(e).__name__}: {str(e).splitlines()[0][:60]}"
      print(f"  {jnp.dtype(out_dtype).name} out, {t}: {why}", flush=True)
      continue
    kind = ("" if t.get("persistent", True) else "non-persistent ") + ("ws" if t.get("specialize", True) else "sw pipeline")
    kind += f" cluster {t['cluster_m']}" if t.get("cluster_m", 1) > 1 else ""
    label = f"{t['bm']}x{t['bn']}x{t['bk']} s{t['stages']} {kind}"
    print(f"  {jnp.dtype(out_dtype).name} out, {label}: {tf:.0f} TFLOP/s, {wall:.3f} ms wall", flush=True)
    if not top[0] >= tf:
      top = (tf, wall, label)
  return top if top[2] else (float("nan"), float("nan"), why)


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--quick", action="store_true", help="8192^3 float8_e4m3fn only")
  p.add_argument("--dtype", choices=("float8_e4m3fn", "float8_e5m2", "int8"), action="append")
  args = p.parse_args()
  dtypes = args.dtype or (["float8_e4m3fn"] if args.quick else ["float8_e4m3fn", "int8"])
  shapes = [(8192, 8192, 8192)] if args.quick else SHAPES
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; TFLOP/s by kernel time (CUPTI),"
        f" wall ms per call")
  header = ("dtype", "m x n x k", "mgpu_dsl f32 out", "bf16 out", "XLA 8-bit", "XLA f16", "vs XLA 8-bit",
            "wall ms ours", "XLA 8-bit", "config")
  rows = []
  for name in dtypes:
    dtype = getattr(jnp, name)
    for m, n, k in shapes:
      a, bt, _, _ = ex.random_operands(jax.random.key(m + n + k), m, n, k, dtype)
      ones_r, ones_c = jnp.ones((m,), jnp.float32), jnp.ones((n,), jnp.float32)
      pref = jnp.int32 if dtype == jnp.int8 else jnp.float32
      xla = jax.jit(lambda a, bt: jnp.dot(a, bt.T, preferred_element_type=pref))
      want = xla(a, bt).astype(jnp.float32)
      x8, x8_wall = timed(xla, (a, bt), want, 1e-6, m, n, k)
      a16, b16 = a.astype(jnp.float16), bt.astype(jnp.float16)
      x16, _ = timed(jax.jit(lambda a, bt: jnp.dot(a, bt.T, preferred_element_type=jnp.float32)), (a16, b16),
                     want, 1e-2, m, n, k)
      o32 = ours_best(a, bt, ones_r, ones_c, want, jnp.float32, m, n, k)
      o16 = ours_best(a, bt, ones_r, ones_c, want, jnp.bfloat16, m, n, k)
      rows.append((name, f"{m}x{n}x{k}", f"{o32[0]:.0f}", f"{o16[0]:.0f}", f"{x8:.0f}", f"{x16:.0f}",
                   f"{o32[0] / x8:.2f}", f"{o32[1]:.3f}", f"{x8_wall:.3f}", o32[2]))
      print(table(header, rows[-1:]), flush=True)
  print("\n8-bit matmul, each at its best configuration:")
  print(table(header, rows))


if __name__ == "__main__":
  main()
