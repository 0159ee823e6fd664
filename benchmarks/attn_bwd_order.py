"""Attention backward: does issuing dQ's product before dK's shorten a step (issue #9)?

    MOSAIC_GPU_DUMP_PTXAS=1 python benchmarks/attn_bwd_order.py

The fused backward (examples/attention.py, `dkv_dq_kernel`) ends each step with dk += ds @ q,
then dq = k.T @ ds (ds through SMEM), then waits for both before storing dq for its TMA
reduction: the tensor cores idle while dq is stored, fenced and sent, and until the next step's
first products are issued. Variants, by two flags of the kernel below:
  dq_first: issue dq's product before dk's, wait for dq alone, store and send it while dk's runs;
  settle:   also wait for dk's product at the end of the step (a read of its accumulator), so no
            product runs across the loop's back edge (ptxas serialises such loops: C7514).
float16, batch x seq = 16384 tokens, 16 heads, seq 4096, TFLOP/s by kernel time (CUPTI) of the
jitted vjp and its wall time, beside the example's kernel and cuDNN; each checked against a jnp
reference (one head) first.
"""
import dataclasses
import functools
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
from common import table  # noqa: E402

# examples/attention.py by its path: `attention` is also this folder's benchmark module
_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples", "attention.py"))
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex             # (its dataclasses look their module up)
_spec.loader.exec_module(ex)


@ml.inline
def bwd_step(q, do, lse, delta, k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, p_s, dq_s, dq_acc, dk_acc, dv_acc,
             b, h, i, j, bq, bkv, c, masked, dq_first, settle, ds_smem, p_smem):
  """One query block's share of dK, dV and dQ (the fused backward's step)."""
  d = q.shape[3]
  ex.load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq)
  p, dp = ex.transposed_probabilities(k_s, v_s, q_s, do_s, lse_s, i, j, bq, bkv, c, masked)
  if p_smem:
    p_s[...] = p.astype(q.dtype)
    dv_acc = ml.dot(p_s, do_s, dv_acc)
  else:
    dv_acc = ml.dot(p.astype(q.dtype), do_s, dv_acc)
  ds = (p * (dp - delta_s[...][None, :])).astype(q.dtype)
  if not dq_first and not ds_smem:
    dk_acc = ml.dot(ds, q_s, dk_acc)
  ds_s[...] = ds
  if ds_smem and not dq_first:
    dk_acc = ml.dot(ds_s, q_s, dk_acc)
  if d >= 128:
    dq = ml.dot(k_s.T, ds_s)
  else:
    dq = ml.dot(ds_s.T, k_s)
  if dq_first:
    dk_acc = ml.dot(ds_s if ds_smem else ds, q_s, dk_acc)
  dq_s[...] = dq
  if d >= 128:
    ml.copy(dq_s, dq_acc.at[b, h, :, ml.ds(j * bq, bq)], reduce="add")
  else:
    ml.copy(dq_s, dq_acc.at[b, ml.ds(j * bq, bq), h, :], reduce="add")
  if settle:
    dk_acc = dk_acc * 1.0                  # a read: waits for dk's product before the step ends
  return dk_acc, dv_acc


def bwd_kernel(q, k, v, do, lse, delta, dk, dv, dq_acc, *, bq: ml.constexpr, bkv: ml.constexpr,
               stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr,
               dq_first: ml.constexpr = False, settle: ml.constexpr = False,
               ds_smem: ml.constexpr = False, p_smem: ml.constexpr = False,
               split_mask: ml.constexpr = False):
  """The example's dkv_dq_kernel with the variants' flags; `split_mask`: the causal query blocks
  that need the mask in a loop of their own, the others in a loop without the mask's code."""
  i = ml.program_id(0)
  hk = ml.program_id(1)
  b = ml.program_id(2)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s = ml.smem((bkv, d))
  v_s = ml.smem((bkv, d))
  ml.copy(k.at[b, ml.ds(i * bkv, bkv), hk, :], k_s)
  ml.copy(v.at[b, ml.ds(i * bkv, bkv), hk, :], v_s)
  q_s = ml.smem((bq, d))
  do_s = ml.smem((bq, d))
  lse_s = ml.smem((bq,))
  delta_s = ml.smem((bq,))
  ds_s = ml.smem((bkv, bq))
  p_s = ml.smem((bkv, bq)) if p_smem else None
  dq_s = ml.smem((d, bq) if d >= 128 else (bq, d), jnp.float32)
  c = scale * ex.LOG2E
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  first = 0
  if causal:
    first = i * bkv // bq
  count = q.shape[1] // bq - first
  flags = (dq_first, settle, ds_smem, p_smem)
  bufs = (k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, p_s, dq_s, dq_acc)
  if causal and split_mask:
    nm = ml.minimum(((i + 1) * bkv - first * bq + bq - 1) // bq, count)   # blocks on the diagonal
    for t in ml.range(g * nm, stages=stages):
      dk_acc, dv_acc = bwd_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // nm, i,
                                first + t % nm, bq, bkv, c, True, *flags)
    rest = count - nm
    for t in ml.range(g * rest, stages=stages):
      dk_acc, dv_acc = bwd_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // rest, i,
                                first + nm + t % rest, bq, bkv, c, False, *flags)
  else:
    for t in ml.range(g * count, stages=stages):
      dk_acc, dv_acc = bwd_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // count, i,
                                first + t % count, bq, bkv, c, causal, *flags)
  ex.store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale)


bwd = mg.mgpu_kernel(bwd_kernel, out_shape=ex._fused_out, grid=ex._dkv_grid, block=256)


def make(causal, config, **flags):
  """attention(q, k, v) whose backward is bwd_kernel with `flags` (the example's forward)."""
  @jax.custom_vjp
  def f(q, k, v):
    return ex.attention(q, k, v, causal, config=config)

  def f_fwd(q, k, v):
    o, lse = ex.attention(q, k, v, causal, config=config, return_lse=True)
    return o, (q, k, v, o, lse)

  def f_bwd(res, do):
    q, k, v, o, lse = res
    scale = 1.0 / q.shape[-1] ** 0.5
    delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32))
    dk, dv, dq_acc = bwd(q, k, v, do, lse, delta, bq=config.dkv_bq, bkv=config.dkv_bkv,
                         stages=config.dkv_stages, causal=causal, scale=scale, **flags)
    dq = dq_acc.transpose(0, 3, 1, 2) if ex.dq_transposed(q.shape[-1]) else dq_acc
    return (dq * scale).astype(q.dtype), dk, dv

  f.defvjp(f_fwd, f_bwd)
  return f


VARIANTS = [dict(dq_first=True, settle=True), dict(split_mask=True), dict(split_mask=True, dq_first=True, settle=True),
            dict(ds_smem=True), dict(dq_first=True, settle=True, ds_smem=True)]


def main():
  rows = []
  head = ("D", "mask", "backward", "TFLOP/s", "wall ms")
  for d, causal in ((128, False), (128, True), (64, False), (64, True)):
    cfg = ex.default_config(d, causal)
    b, seq, heads = 16384 // 4096, 4096, 16
    keys = jax.random.split(jax.random.key(d + causal), 4)
    q, k, v, do = (jax.random.normal(kk, (b, seq, heads, d), jnp.float32).astype(jnp.float16) for kk in keys)
    ref = lambda q, k, v: ex.reference(q, k, v, causal)[0]
    _, vjp_ref = jax.vjp(ref, q[:, :, :1], k[:, :, :1], v[:, :, :1])
    want = vjp_ref(do[:, :, :1])
    flops = 2.5 * 4 * seq * seq * d * heads * b / (2 if causal else 1)
    cands = [("example (dk, then dq)", lambda q, k, v: ex.attention(q, k, v, causal, config=cfg))]
    for flags in VARIANTS:
      name = " ".join(k for k, on in flags.items() if on) or "same order"
      cands.append((name, make(causal, cfg, **flags)))
    cands.append(("cuDNN", lambda q, k, v: jax.nn.dot_product_attention(q, k, v, is_causal=causal,
                                                                         implementation="cudnn")))
    for name, fn in cands:
      try:
        _, vjp = jax.vjp(jax.jit(fn), q, k, v)
        g = jax.jit(lambda vjp, do: vjp(do))
        got = g(vjp, do)
        for x, w in zip(got, want):
          err = float(jnp.linalg.norm(x[:, :, :1].astype(jnp.float32) - w) / jnp.linalg.norm(w))
          if not err < 3e-2:
            raise AssertionError(f"relative error {err:.3g}")
        ms = mg.bench(g, vjp, do) * 1e3
        wall = mg.bench_wall(g, vjp, do) * 1e3
        rows.append((d, "causal" if causal else "full", name, f"{flops / ms / 1e9:.0f}", f"{wall:.3f}"))
      except Exception as e:  # a variant that cannot run: say why, go on
        rows.append((d, "causal" if causal else "full", name, f"{type(e).__name__}: {str(e).splitlines()[0][:60]}", ""))
      print(table(head, rows[-1:]), flush=True)
  print(table(head, rows))


if __name__ == "__main__":
  main()
