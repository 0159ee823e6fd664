"""Registers of a warp-specialised kernel's producer warpgroup: 40 (the default) against 24 (FA3's).

    python benchmarks/producer_regs.py [--regs 40 24]

`setmaxnreg` gives the producer's registers back to the compute warpgroups: with two of them,
(512 - 40) / 2 rounds to 232 registers a thread, (512 - 24) / 2 to 240. Each setting runs in a
process of its own (`frontend/hw.py`'s PRODUCER_REGISTERS, set before anything compiles) over
the warp-specialised kernels whose compute warpgroups are register-bound: the attention forward
(examples/attention.py's defaults, float16, seq 4096, 16 heads, batch 4; head_dim 64 and 128,
full and causal), the float16 matmul at 4096x8192x4096 and the float8_e4m3fn one at 8192^3
(examples/matmul.py, examples/matmul_fp8.py defaults). Each is checked against a jnp reference
first. Figures: TFLOP/s by kernel time (CUPTI, median of 20), wall ms beside it.
"""
import argparse
import importlib.util
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLES = os.path.normpath(os.path.join(HERE, "..", "examples"))


def _load(name):
  """examples/NAME.py (examples/ first on the path: benchmarks/ has a matmul.py too)."""
  if sys.path[0] != EXAMPLES:
    sys.path.insert(0, EXAMPLES)
  return importlib.import_module(name)


def _rel(got, want):
  import jax.numpy as jnp
  got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))


def measure_all():
  """{problem: (TFLOP/s, wall ms)} at this process's PRODUCER_REGISTERS."""
  import jax
  import jax.numpy as jnp
  import mgpu_dsl as mg
  res = {}

  def timed(name, fn, args, want, flops):
    err = _rel(fn(*args), want)
    if not err < 3e-2:
      raise AssertionError(f"{name}: relative error {err:.2g}")
    ms = mg.bench(fn, *args) * 1e3
    res[name] = (flops / ms / 1e9, mg.bench_wall(fn, *args) * 1e3)
    print(f"  {name}: {res[name][0]:.0f} TFLOP/s, wall {res[name][1]:.3f} ms", flush=True)

  att = _load("attention")
  b, s, h = 4, 4096, 16
  for d in (64, 128):
    for causal in (False, True):
      keys = jax.random.split(jax.random.key(d + causal), 3)
      q, k, v = (jax.random.normal(kk, (b, s, h, d), jnp.float32).astype(jnp.float16) for kk in keys)
      fn = jax.jit(lambda q, k, v, causal=causal, d=d: att.attention(q, k, v, causal=causal,
                                                                     config=att.default_config(d, causal)))
      want = att.reference(q[:, :, :1], k[:, :, :1], v[:, :, :1], causal)[0]
      check = lambda q, k, v, fn=fn: fn(q, k, v)[:, :, :1]
      err = _rel(check(q, k, v), want)
      if not err < 3e-2:
        raise AssertionError(f"attention d{d} causal={causal}: relative error {err:.2g}")
      flops = 4 * s * s * d * h * b / (2 if causal else 1)
      timed(f"attention fwd D{d} {'causal' if causal else 'full'}", fn, (q, k, v), fn(q, k, v), flops)

  mm = _load("matmul")
  m, n, kk = 4096, 8192, 4096
  ka, kb = jax.random.split(jax.random.key(1))
  a = jax.random.normal(ka, (m, kk), jnp.float32).astype(jnp.float16)
  bb = jax.random.normal(kb, (kk, n), jnp.float32).astype(jnp.float16)
  timed("matmul f16 4096x8192x4096", jax.jit(mm.matmul), (a, bb),
        jnp.dot(a, bb, preferred_element_type=jnp.float32), 2 * m * n * kk)

  f8 = _load("matmul_fp8")
  m = n = kk = 8192
  a = jax.random.normal(ka, (m, kk), jnp.float32).astype(jnp.float8_e4m3fn)
  bt = jax.random.normal(kb, (n, kk), jnp.float32).astype(jnp.float8_e4m3fn)
  timed("matmul fp8 8192^3 (f32 out)", jax.jit(lambda a, bt: f8.scaled_matmul(a, bt, out_dtype=jnp.float32)),
        (a, bt), jnp.dot(a, bt.T, preferred_element_type=jnp.float32), 2 * m * n * kk)
  return res


def main():
  p = argparse.ArgumentParser()
  p.add_argument("--regs", type=int, nargs="+", default=[40, 24])
  p.add_argument("--timeout", type=float, default=200.0,
                 help="seconds a setting may run (a hung kernel is reported, not waited for: session 55's 32 hung)")
  p.add_argument("--child", type=int, help=argparse.SUPPRESS)
  args = p.parse_args()
  if args.child is not None:
    sys.path.insert(0, os.path.join(HERE, ".."))
    from mgpu_dsl.frontend import hw
    hw.PRODUCER_REGISTERS = args.child
    print(f"producer registers {args.child}, compute warpgroups (two of them) "
          f"{hw.consumer_registers(2)} a thread", flush=True)
    print("RESULT " + json.dumps(measure_all()), flush=True)
    return
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off")
  runs = {}
  for r in args.regs:
    try:
      out = subprocess.run([sys.executable, "-u", __file__, "--child", str(r)], env=env, text=True,
                           capture_output=True, timeout=args.timeout)
    except subprocess.TimeoutExpired as e:      # (the child is killed, and with it its context on the GPU)
      done = e.stdout.decode() if isinstance(e.stdout, bytes) else (e.stdout or "")
      print(f"{done}producer registers {r}: no result in {args.timeout:.0f} s (a hung kernel?)", flush=True)
      runs[r] = {}
      continue
    print(out.stdout + out.stderr[-3000:], flush=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT ")), None)
    runs[r] = json.loads(line[7:]) if line else {}
  sys.path.insert(0, HERE)
  from common import table
  names = sorted({k for v in runs.values() for k in v})
  rows = [(n, *(f"{runs[r][n][0]:.0f} ({runs[r][n][1]:.3f} ms)" if n in runs[r] else "failed" for r in args.regs))
          for n in names]
  print(table(("kernel",) + tuple(f"producer {r} regs" for r in args.regs), rows))


if __name__ == "__main__":
  main()
