"""Attention backward: dQ's product deferred to the next step, measured against the fused default (issue #9).

    MOSAIC_GPU_DUMP_PTXAS=1 python benchmarks/attn_bwd_deferred.py [--check] [--seq N]

The fused backward (examples/attention.py, `dkv_dq_kernel`) ends each step with ds through SMEM, a block
barrier, dq = ds.T @ k, a wait for it, dq into SMEM, a second barrier and a TMA reduction: the tensor cores
wait on that chain every step (Nsight Compute, forty-sixth session: 37% of the warps' stalls at head_dim 64
are barriers). Here step t issues the product of step t-1's ds (still in SMEM) first, beside step t's two
score products, and stores and sends it while they run; its own ds goes to SMEM at the end of the step for
the next one (the first step adds a zero product; the last block's dQ is issued after the loop). Each kernel
is timed alone (CUPTI kernel time) on the same inputs, head_dim 64 and 128, with and without the causal mask.
`--check` (any machine): interpret mode against the default kernel at a small shape.
"""
import dataclasses
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402

_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples", "attention.py"))
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex
_spec.loader.exec_module(ex)


@ml.inline
def dq_target(dq_acc, b, h, j, bq, d):
  """dq_acc's window of query block j of head h (transposed at head_dim >= 128: dq_transposed)."""
  if d >= 128:
    return dq_acc.at[b, h, :, ml.ds(j * bq, bq)]
  return dq_acc.at[b, ml.ds(j * bq, bq), h, :]


@ml.inline
def dq_product(k_s, ds_s, d):
  return ml.dot(k_s.T, ds_s) if d >= 128 else ml.dot(ds_s.T, k_s)


@ml.inline
def deferred_step(q, do, lse, delta, k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc, dk_acc, dv_acc,
                  b, h, i, j, hp, jp, bq, bkv, c, masked, p16_ds, early):
  """Step of query block j (head h): the scores' two products, then the previous block's (hp, jp) dQ product
  from the ds in SMEM, both running while p is computed; dQ sent, then dV's and dK's products. `early`: dQ's
  product first, stored and sent as soon as it is done (its registers free before p's), the scores' behind it."""
  d = q.shape[3]
  ex.load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq)
  if early:
    dq = dq_product(k_s, ds_s, d)
  s = ml.dot(k_s, q_s.T)
  dp = ml.dot(v_s, do_s.T)
  if early:
    dq_s[...] = dq
    ml.copy(dq_s, dq_target(dq_acc, b, hp, jp, bq, d), reduce="add")
  else:
    dq = dq_product(k_s, ds_s, d)
  if masked:
    if j * bq < (i + 1) * bkv:
      rows = i * bkv + ml.arange(bkv)[:, None]
      cols = j * bq + ml.arange(bq)[None, :]
      s = ml.where(cols >= rows, s, ex.NEG_INF)
  p = ml.exp2(s * c - (lse_s[...] * ex.LOG2E)[None, :], approx=True)
  p16 = p.astype(q.dtype)
  dv_acc = ml.dot(p16, do_s, dv_acc)
  if not early:
    dq_s[...] = dq
    ml.copy(dq_s, dq_target(dq_acc, b, hp, jp, bq, d), reduce="add")
  ds = ((p16 if p16_ds else p) * (dp - delta_s[...][None, :])).astype(q.dtype)
  ds_s[...] = ds
  dk_acc = ml.dot(ds, q_s, dk_acc)
  return dk_acc, dv_acc


@ml.inline
def send_last(k_s, ds_s, dq_acc, b, h, j, bq, d):
  """The last block's dQ, added by register atomics (dq_s is the loop's, staged)."""
  ml.atomic_add(dq_target(dq_acc, b, h, j, bq, d), dq_product(k_s, ds_s, d))


def deferred_kernel(q, k, v, do, lse, delta, dk, dv, dq_acc, *, bq: ml.constexpr, bkv: ml.constexpr,
                    stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr, lpt: ml.constexpr = 0,
                    p16_ds: ml.constexpr = False, early: ml.constexpr = False):
  """dkv_dq_kernel (plain loop, or with the mask the diagonal blocks in a loop of their own) with each
  step's dQ product issued at the start of the next step."""
  i, hk, b = ex.block_ids(ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0], lpt, False)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s, v_s, q_s, do_s, lse_s, delta_s, first, count = ex.key_block(q, k, v, b, i, hk, bq, bkv, causal)
  ds_s = ml.smem((bkv, bq))
  dq_s = ml.smem((d, bq) if d >= 128 else (bq, d), jnp.float32)
  bufs = (k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc)
  c = scale * ex.LOG2E
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  ds_s[...] = ml.zeros((bkv, bq), q.dtype)      # the first step's "previous" product adds zeros
  if causal:
    diag = ml.minimum(((i + 1) * bkv + bq - 1) // bq - first, count)     # blocks the diagonal crosses
    for t in ml.range(g * diag, stages=stages):
      tp = ml.maximum(t - 1, 0)
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // diag, i,
                                     first + t % diag, hk * g + tp // diag, first + tp % diag, bq, bkv, c, True,
                                     p16_ds, early)
    rest = count - diag
    for t in ml.range(g * rest, stages=stages):
      tp = ml.maximum(t - 1, 0)
      # the first step sends the diagonal loop's last block
      hp = ml.where(t == 0, hk * g + g - 1, hk * g + tp // ml.maximum(rest, 1))
      jp = ml.where(t == 0, first + diag - 1, first + diag + tp % ml.maximum(rest, 1))
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // rest, i,
                                     first + diag + t % rest, hp, jp, bq, bkv, c, False, p16_ds, early)
    last = ml.where(rest > 0, first + count - 1, first + diag - 1)
    send_last(k_s, ds_s, dq_acc, b, hk * g + g - 1, last, bq, d)
  else:
    for t in ml.range(g * count, stages=stages):
      tp = ml.maximum(t - 1, 0)
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // count, i,
                                     first + t % count, hk * g + tp // count, first + tp % count, bq, bkv, c,
                                     False, p16_ds, early)
    send_last(k_s, ds_s, dq_acc, b, hk * g + g - 1, first + count - 1, bq, d)
  ex.store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale)


deferred = mg.mgpu_kernel(deferred_kernel, out_shape=ex._fused_out, grid=ex._dkv_grid, block=ex._dkv_block)


def inputs(b, seq, heads, d, causal, seed=0):
  keys = jax.random.split(jax.random.key(seed), 4)
  q, k, v, do = (jax.random.normal(kk, (b, seq, heads, d), jnp.float32).astype(jnp.float16) for kk in keys)
  scale = 1.0 / np.sqrt(d)
  o, lse = ex.reference(q, k, v, causal)
  delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32))
  return (q, k, v, do, lse.astype(jnp.float32), delta), scale


def kernels(d, causal, seq, interpret=None):
  """(name, fn) of the default fused kernel and the deferred one, each with the default config's tiles."""
  cfg = ex.default_config(d, causal, seq)
  scale = 1.0 / np.sqrt(d)
  kw = dict(bq=cfg.dkv_bq, bkv=cfg.dkv_bkv, stages=cfg.dkv_stages, causal=causal, scale=scale, lpt=cfg.bwd_lpt,
            p16_ds=cfg.bwd_p16_ds, interpret=interpret)
  fused = lambda *a: ex.attention_bwd(*a, dq_first=cfg.bwd_dq_first, split_mask=cfg.bwd_split_mask, **kw)
  return [("fused (default)", fused), ("dq deferred", lambda *a: deferred(*a, **kw)),
          ("dq deferred, early", lambda *a: deferred(*a, early=True, **kw))]


def check():
  for d, causal in ((64, False), (64, True), (128, False), (128, True)):
    args, _ = inputs(1, 384, 2, d, causal, seed=d + causal)
    outs = [jax.tree.map(np.asarray, fn(*args)) for _, fn in kernels(d, causal, 384, interpret=True)]
    for name, out in zip(("deferred", "deferred, early"), outs[1:]):
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
        diff = "" if want is None else f"{max(float(jnp.max(jnp.abs(a.astype(jnp.float32) - w.astype(jnp.float32)))) for a, w in zip(got, want)):.3g}"
        want = want or got
        ms = mg.bench(f, *args) * 1e3
        rows.append((d, "causal" if causal else "full", seq, name, f"{flops / ms / 1e9:.0f}", diff))
      except Exception as e:  # a variant that cannot run: say why, go on
        rows.append((d, "causal" if causal else "full", seq, name, f"{type(e).__name__}: {str(e).splitlines()[0][:70]}", ""))
      print(table(head, rows[-1:]), flush=True)
  print(table(head, rows))


if __name__ == "__main__":
  main()
