"""Named barriers as NVVM's convergent ops (the default, lowering/barriers.py) against Mosaic GPU's
inline assembly: is the register-bound kernels' speed the same?

    python benchmarks/barrier_forms.py [--bwd-only]

Each form runs in a process of its own (barriers.CONVERGENT set before anything compiles) over
producer_regs.py's kernels (the attention forward at head_dim 64 and 128, full and causal; the
float16 matmul at 4096x8192x4096; the float8 one at 8192^3) and the attention backward at head_dim
128 (full and causal). Each is checked against a jnp reference first. Figures: TFLOP/s by kernel
time (CUPTI, median of 20), wall ms beside it. The backward's figure times the whole jitted vjp (the
forward it recomputes included) and counts 2.5 forwards' FLOPs: compare the two forms with each
other, not with benchmarks/attention.py's backward figures.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
FORMS = {"nvvm": True, "asm": False}


def measure_backward(res):
  import jax
  import jax.numpy as jnp
  import mgpu_dsl as mg
  from producer_regs import _load, _rel
  att = _load("attention")
  b, s, h, d = 4, 4096, 16, 128
  for causal in (False, True):
    keys = jax.random.split(jax.random.key(7 + causal), 4)
    q, k, v, do = (jax.random.normal(kk, (b, s, h, d), jnp.float32).astype(jnp.float16) for kk in keys)
    cfg = att.default_config(d, causal)
    fn = jax.jit(lambda q, k, v, do, causal=causal: jax.vjp(
        lambda q, k, v: att.attention(q, k, v, causal=causal, config=cfg), q, k, v)[1](do))
    sl = lambda x: x[:, :512, :1]
    want = jax.vjp(lambda q, k, v: att.reference(q, k, v, causal)[0], sl(q), sl(k), sl(v))[1](sl(do))
    got = jax.vjp(lambda q, k, v: att.attention(q, k, v, causal=causal, config=cfg), sl(q), sl(k), sl(v))[1](sl(do))
    err = max(_rel(g, w) for g, w in zip(got, want))
    if not err < 3e-2:
      raise AssertionError(f"attention bwd causal={causal}: relative error {err:.2g}")
    flops = 2.5 * 4 * s * s * d * h * b / (2 if causal else 1)
    ms = mg.bench(fn, q, k, v, do) * 1e3
    name = f"attention bwd D{d} {'causal' if causal else 'full'}"
    res[name] = (flops / ms / 1e9, mg.bench_wall(fn, q, k, v, do) * 1e3)
    print(f"  {name}: {res[name][0]:.0f} TFLOP/s, wall {res[name][1]:.3f} ms", flush=True)


def main():
  bwd_only = "--bwd-only" in sys.argv
  if len(sys.argv) > 2 and sys.argv[1] == "--child":
    sys.path.insert(0, os.path.join(HERE, ".."))
    sys.path.insert(1, HERE)
    from mgpu_dsl.lowering import barriers
    barriers.CONVERGENT = FORMS[sys.argv[2]]
    print(f"barriers: {sys.argv[2]}", flush=True)
    from producer_regs import measure_all
    res = {} if bwd_only else measure_all()
    measure_backward(res)
    print("RESULT " + json.dumps(res), flush=True)
    return
  env = dict(os.environ, MGPU_DSL_CACHE_DIR="off")
  runs = {}
  for form in FORMS:
    out = subprocess.run([sys.executable, "-u", __file__, "--child", form] + ["--bwd-only"] * bwd_only, env=env, text=True, capture_output=True)
    print(out.stdout + out.stderr[-3000:], flush=True)
    line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT ")), None)
    runs[form] = json.loads(line[7:]) if line else {}
  sys.path.insert(0, HERE)
  from common import table
  names = sorted({k for v in runs.values() for k in v})
  rows = [(n, *(f"{runs[f][n][0]:.0f} ({runs[f][n][1]:.3f} ms)" if n in runs[f] else "failed" for f in FORMS))
          for n in names]
  print(table(("kernel", "NVVM barriers (default)", "inline-assembly barriers"), rows))


if __name__ == "__main__":
  main()
