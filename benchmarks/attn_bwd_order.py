"""Attention backward: the orders of the fused backward's step, measured (issue #9).

    MOSAIC_GPU_DUMP_PTXAS=1 python benchmarks/attn_bwd_order.py [--stages]

The fused backward (examples/attention.py, `dkv_dq_kernel`) in its plain order ends each step with
dk += ds @ q, then dq = k.T @ ds (ds through SMEM), then waits for both before storing dq for its
TMA reduction. Its flags (Config fields), each a row of the table:
  bwd_dq_first:   issue dq's product before dk's, wait for dq alone, store and send it while dk's
                  runs, and wait for dk's at the end of the step (no product across the back edge);
  bwd_split_mask: causal: the query blocks on the diagonal (which need the mask) in a loop of their
                  own, the others in a loop without the mask's code.
Two more variants, ds or p through SMEM as the products' A operand, were measured slower everywhere
(sixteenth and seventeenth sessions, docs/benchmarks.md) and are no longer in this script.
float16, batch x seq = 16384 tokens, 16 heads, seq 4096, TFLOP/s by kernel time (CUPTI) of the
jitted vjp and its wall time, beside cuDNN; each checked against a jnp reference (one head) first.
With MOSAIC_GPU_DUMP_PTXAS=1, ptxas reports each kernel's registers and spills. `--stages`: the
default order with 2 and 3 pipelined stages of the query blocks' loads instead. `--one-wg`: the default
against the fused backward on one warpgroup of 64 keys a CTA (ONE_WG), head_dim 96 too. `--lpt`: the
backward's blocks in chunks of 1, 2 or 4 across heads and batches (`bwd_lpt`, LPT) at seq 1024 and 4096,
head_dim 96 too; `--seq N` one sequence length instead. `--tiles`: the fused backward's query block at head_dim 128,
64 (the default), 80 (FA3's without the mask) and 80 with dq_first (96 passes the SMEM);
fifty-fourth session (H100): 339 / 262 against 465 / 376 (full / causal; ptxas spills 384-760 bytes). `--dp-late`:
head_dim 64's deferred backward with dP's product after dQ's store, with and without ds from the 16-bit p. `--one-loop`:
causal head_dim 64's deferred backward in one loop rather than the diagonal's and the rest's (`bwd_split_mask=False`);
`--one-loop-128`: causal head_dim 128's fused backward so. `--p16`: ds = p * (dp - delta) from the 16-bit p that
dV's product takes (`bwd_p16_ds`: the float32 p dies at the conversion, 16 registers a thread fewer at the step's
peak), alone, with and without dq_first, and warp-specialised (PRODUCER_REGS=24 in the environment: FA3's producer
registers). Forty-seventh session (H100): 465 / 356 against 444 / 352 at head_dim 128 (full / causal), slower at 64
(342 against 349); warp-specialised 291 / 258 (ptxas spills 184 / 236 bytes a thread at 240 registers).
`--index-compare`: the causal backward at head_dim 64 and 128, default and one loop, with the masks compared as one
scalar a thread against immediates (lowering/index_compare.py); with INDEX_COMPARE=0 in the environment, as Mosaic's
index grids (run it both ways).
"""
import dataclasses
import importlib.util
import os
import sys

import jax
import jax.numpy as jnp

import mgpu_dsl as mg

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.append(os.path.join(HERE, "..", "examples"))   # (the example imports attention_config)
from common import table  # noqa: E402

# examples/attention.py by its path: `attention` is also this folder's benchmark module
_spec = importlib.util.spec_from_file_location("attention_example", os.path.join(HERE, "..", "examples", "attention.py"))
ex = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = ex             # (its dataclasses look their module up)
_spec.loader.exec_module(ex)

ORDERS = [dict(bwd_dq_first=False, bwd_split_mask=False), dict(bwd_dq_first=True, bwd_split_mask=False),
          dict(bwd_dq_first=False, bwd_split_mask=True), dict(bwd_dq_first=True, bwd_split_mask=True)]
# --stages: the default order with a third stage of Q, dO, logsumexp and delta loads in flight
STAGES = [dict(dkv_stages=2), dict(dkv_stages=3)]
# --one-wg: the fused backward on one warpgroup of 64 keys a CTA (block=128; several CTAs an SM where the
# SMEM allows), at head_dim 64, 96 (where the default is the two-kernel backward) and 128
ONE_WG = [dict(), dict(fused_bwd=True, dkv_bkv=64, dkv_bq=64), dict(fused_bwd=True, dkv_bkv=64, dkv_bq=64, dkv_stages=3),
          dict(fused_bwd=True, dkv_bkv=64, dkv_bq=128)]
# --lpt: the grid's order. By default each head's blocks launch in turn, so under the causal mask the last head's
# longest block starts late and runs alone at the end (a model of the grid: 7% over the ideal at seq 1024 and 4096);
# in chunks of 1 the longest of every head go first (0.3%), and chunks of 2-4 keep neighbours of one head together
LPT = [dict(bwd_lpt=0), dict(bwd_lpt=1), dict(bwd_lpt=2), dict(bwd_lpt=4)]
# --tiles: the fused backward's query block at head_dim 128 (FA3 takes 80 without the mask, 64 with it): the stages
# of the 80 logsumexps (320 bytes) padded to 384, dQ's float32 store buffer one copy where two pass the SMEM
TILES = [dict(dkv_bq=64), dict(dkv_bq=80), dict(dkv_bq=80, bwd_dq_first=True)]   # (96 passes the SMEM)
# --dp-late: the deferred backward (head_dim 64) with dP's product issued after dQ's store: ptxas serialises every
# product of the default one (C7512, too few registers; benchmarks/ptxas_report.py), not of these (fifty-fourth session)
DP_LATE = [dict(bwd_dp_late=False, bwd_p16_ds=False), dict(bwd_dp_late=True, bwd_p16_ds=False),
           dict(bwd_dp_late=True, bwd_p16_ds=True), dict(bwd_dp_late=False, bwd_p16_ds=True)]
# --one-loop: causal head_dim 64's deferred backward in one loop (a run-time test masks the diagonal's blocks), not the
# diagonal's loop and the rest's: deviceless (ptxas_report.py), 104 / 176 bytes spilled against 156 / 336, and with
# dp_late and p16_ds 92 / 116 and not serialised (308 / 420 in two loops; fifty-eighth session)
ONE_LOOP = [dict(bwd_split_mask=True), dict(bwd_split_mask=False),
            dict(bwd_split_mask=False, bwd_dp_late=True, bwd_p16_ds=True),
            dict(bwd_split_mask=True, bwd_dp_late=True, bwd_p16_ds=True)]
# --one-loop-128: causal head_dim 128's fused backward in one loop: deviceless 156 / 168 bytes spilled (124 / 136 without
# dq_first) against the default's 228 / 364 (split_mask, dq_first); none serialised (fifty-eighth session)
ONE_LOOP_128 = [dict(bwd_split_mask=True), dict(bwd_split_mask=False), dict(bwd_split_mask=False, bwd_dq_first=False)]
# --index-compare: the causal backward's masks with lowering/index_compare.py (a thread's scalar against immediates)
# or without it (INDEX_COMPARE=0 in the environment: Mosaic's index grids): deviceless, head_dim 64's default 80 / 96
# against 92 / 116 bytes spilled, 128's default 260 / 360 against 228 / 348, its one loop 104 / 112 against
# 124 / 136 (fifty-ninth session)
INDEX_COMPARE = [dict(), dict(bwd_split_mask=False), dict(bwd_split_mask=False, bwd_dq_first=False)]
P16 = [dict(bwd_p16_ds=False), dict(bwd_p16_ds=True), dict(bwd_p16_ds=True, bwd_dq_first=True),
       dict(bwd_p16_ds=True, bwd_dq_first=False), dict(bwd_p16_ds=True, bwd_ws=True)]


def name_of(flags, cfg):
  name = " ".join(k.removeprefix("bwd_") if on is True else f"{k}={on}" for k, on in flags.items()
                  if on is not False) or "plain"
  if all(getattr(cfg, k) == on for k, on in flags.items()):
    name += " (default)"
  return name


def main():
  if os.environ.get("INDEX_COMPARE") == "0":
    from mgpu_dsl.lowering import index_compare
    index_compare.ENABLED = False
  if os.environ.get("PRODUCER_REGS"):
    from mgpu_dsl.frontend import hw
    hw.PRODUCER_REGISTERS = int(os.environ["PRODUCER_REGS"])
  rows = []
  head = ("D", "mask", "seq", "backward", "TFLOP/s", "wall ms")
  shapes = ((128, False), (128, True), (64, False), (64, True))
  if "--tiles" in sys.argv:
    shapes = ((128, False), (128, True))
  if "--dp-late" in sys.argv:
    shapes = ((64, False), (64, True))
  if "--one-loop" in sys.argv:      # (without the mask: the default against dp_late + p16_ds again)
    shapes = ((64, False), (64, True))
  if "--one-loop-128" in sys.argv:
    shapes = ((128, True),)
  if "--index-compare" in sys.argv:
    shapes = ((64, True), (128, True))
  if "--one-wg" in sys.argv or "--lpt" in sys.argv:
    shapes += ((96, False), (96, True))
  seqs = (1024, 4096) if "--lpt" in sys.argv else (4096,)
  if "--seq" in sys.argv:
    seqs = (int(sys.argv[sys.argv.index("--seq") + 1]),)
  for d, causal, seq in ((d, causal, seq) for d, causal in shapes for seq in seqs):
    cfg = ex.default_config(d, causal, seq)
    b, heads = 16384 // seq, 16
    keys = jax.random.split(jax.random.key(d + causal), 4)
    q, k, v, do = (jax.random.normal(kk, (b, seq, heads, d), jnp.float32).astype(jnp.float16) for kk in keys)
    ref = lambda q, k, v: ex.reference(q, k, v, causal)[0]
    _, vjp_ref = jax.vjp(ref, q[:, :, :1], k[:, :, :1], v[:, :, :1])
    want = vjp_ref(do[:, :, :1])
    flops = 2.5 * 4 * seq * seq * d * heads * b / (2 if causal else 1)
    cands = []
    modes = {"--stages": STAGES, "--one-wg": ONE_WG, "--lpt": LPT, "--p16": P16, "--tiles": TILES, "--dp-late": DP_LATE,
             "--one-loop-128": ONE_LOOP_128, "--one-loop": ONE_LOOP, "--index-compare": INDEX_COMPARE}
    seen = []
    for flags in next((v for k, v in modes.items() if k in sys.argv), ORDERS):
      if flags.get("bwd_split_mask") and not causal:
        continue
      c = dataclasses.replace(cfg, **flags)
      if c in seen:         # (a variant that is another's configuration)
        continue
      seen.append(c)
      cands.append((name_of(flags, cfg), lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c)))
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
        rows.append((d, "causal" if causal else "full", seq, name, f"{flops / ms / 1e9:.0f}", f"{wall:.3f}"))
      except Exception as e:  # a variant that cannot run: say why, go on
        rows.append((d, "causal" if causal else "full", seq, name, f"{type(e).__name__}: {str(e).splitlines()[0][:60]}",
                     ""))
      print(table(head, rows[-1:]), flush=True)
  print(table(head, rows))


if __name__ == "__main__":
  main()
