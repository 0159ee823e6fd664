"""Attention backward: dQ's product deferred to the next step, measured against the fused kernel (issue #9).

    MOSAIC_GPU_DUMP_PTXAS=1 python benchmarks/attn_bwd_deferred.py [--check] [--seq N]

The fused backward (examples/attention.py, `dkv_dq_kernel`) ends each step with ds through SMEM, a block
barrier, dq = ds.T @ k, a wait for it, dq into SMEM, a second barrier and a TMA reduction: the tensor cores
wait on that chain every step (Nsight Compute, forty-sixth session: 37% of the warps' stalls at head_dim 64
are barriers). examples/attention_bwd.py's `deferred_kernel` issues at step t the product of step t-1's ds
(still in SMEM) first, the step's two score products behind it, and stores and sends it while they run; its
own ds goes to SMEM at the end of the step for the next one (the first step adds a zero product; the last
block's dQ is added after the loop by register atomics). Each kernel is timed alone (CUPTI kernel time) on the
same inputs, head_dim 64 and 128, with and without the causal mask. Fiftieth session (H100, seq 4096): 372 /
329 against 304 / 313 at head_dim 64 (full / causal), 428 / 375 against 457 / 406 at 128; a first order, the
product issued after the scores' and sent after p (its registers live through the softmax), was slower at 64
causal and 128 (326 / 299 / 435 / 314).
`--check` (any machine): interpret mode against the default kernel at a small shape.
"""
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402

_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples", "attention.py"))
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex
_spec.loader.exec_module(ex)


def inputs(b, seq, heads, d, causal, seed=0):
  keys = jax.random.split(jax.random.key(seed), 4)
  q, k, v, do = (jax.random.normal(kk, (b, seq, heads, d), jnp.float32).astype(jnp.float16) for kk in keys)
  scale = 1.0 / np.sqrt(d)
  o, lse = ex.reference(q, k, v, causal)
  delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32))
  return (q, k, v, do, lse.astype(jnp.float32), delta), scale


def kernels(d, causal, seq, interpret=None):
  """(name, fn) of the fused kernel (dkv_dq_kernel, the default's flags) and the deferred one (deferred_kernel),
  each with the default config's tiles."""
  cfg = ex.default_config(d, causal, seq)
  scale = 1.0 / np.sqrt(d)
  kw = dict(bq=cfg.dkv_bq, bkv=cfg.dkv_bkv, stages=cfg.dkv_stages, causal=causal, scale=scale, lpt=cfg.bwd_lpt,
            p16_ds=cfg.bwd_p16_ds, interpret=interpret)
  fused = lambda *a: ex.attention_bwd(*a, dq_first=cfg.bwd_dq_first, split_mask=cfg.bwd_split_mask, **kw)
  return [("fused", fused), ("dq deferred", lambda *a: ex.attention_bwd_deferred(*a, **kw))]


def check():
  for d, causal in ((64, False), (64, True), (128, False), (128, True)):
    args, _ = inputs(1, 384, 2, d, causal, seed=d + causal)
    outs = [jax.tree.map(np.asarray, fn(*args)) for _, fn in kernels(d, causal, 384, interpret=True)]
    for name, out in zip(("deferred",), outs[1:]):
      errs = [float(np.max(np.abs(a - b_)) / (np.max(np.abs(a)) + 1e-9)) for a, b_ in zip(outs[0], out)]
      print(f"head_dim {d} causal {causal} {name}: relative max differences dk / dv / dq_acc {errs}", flush=True)
      assert max(errs) < 2e-2, errs


def main():
  if "--check" in sys.argv:
    return check()
  seqs = (4096,)
  if "--seq" in sys.argv:
    seqs = (int(sys.argv[sys.argv.index("--seq") + 1]),)
  head = ("D", "mask", "seq", "kernel", "TFLOP/s", "max diff vs fused")
  rows = []
  for d, causal, seq in ((d, c, s) for d in (64, 128) for c in (False, True) for s in seqs):
    args, _ = inputs(16384 // seq, seq, 16, d, causal, seed=d + causal)
    flops = 2.5 * 4 * seq * seq * d * 16 * (16384 // seq) / (2 if causal else 1)
    want = None
    for name, fn in kernels(d, causal, seq):
      try:
        f = jax.jit(fn)
        got = f(*args)
        gap = lambda a, w: float(jnp.max(jnp.abs(a.astype(jnp.float32) - w.astype(jnp.float32))))
        diff = "" if want is None else f"{max(gap(a, w) for a, w in zip(got, want)):.3g}"
        want = want or got
        ms = mg.bench(f, *args) * 1e3
        rows.append((d, "causal" if causal else "full", seq, name, f"{flops / ms / 1e9:.0f}", diff))
      except Exception as e:  # a variant that cannot run: say why, go on
        why = f"{type(e).__name__}: {str(e).splitlines()[0][:70]}"
        rows.append((d, "causal" if causal else "full", seq, name, why, ""))
      print(table(head, rows[-1:]), flush=True)
  print(table(head, rows))


if __name__ == "__main__":
  main()
