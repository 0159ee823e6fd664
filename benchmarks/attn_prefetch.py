"""Two-stage persistent attention forwards, and the next tile's Q loaded under this tile's epilogue (issue #9).

    python benchmarks/attn_prefetch.py [--seq 4096] [--head-dim 128] [--causal full]

A warp-specialised loop's compute warpgroups now release the previous iteration's K/V stage at the
first wait that retires its dots (after the scores' dot, before the softmax) rather than at the end of
the body (frontend/warp_specialize.py `release_early`), so the producer has nearly a whole iteration
more to refill it: two stages may then keep the tensor cores fed, which frees 64 KiB of SMEM at
head_dim 128. With it, `prefetch` loads the next tile's Q as soon as the key loop ends (the loop's
last dot has read Q) and stores O through an SMEM buffer of its own, so the Q load runs under the
epilogue rather than before the next tile's first dot. Each variant is checked against the float32
reference before it is timed; TFLOP/s by kernel time, wall ms per call.

Measured on the H200 (twenty-fifth session, docs/benchmarks.md): with the early release the default
three-stage persistent forward went from 623-631 to 643-645 TFLOP/s at head_dim 128, seq 4096; two
stages now run at 620 (444 before); the Q prefetch on two stages is slower (602; causal 409, with
its tiles in plain order rather than the default's pairs). Twenty-sixth session: the balanced grid (as
many programs as the busiest needs rounds, now the default) 658 against 650 at head_dim 128, seq 4096;
ping-pong with the early release slower (555); the Q prefetch at head_dim 64, seq 1024, 373 against 360.
"""
import dataclasses
import os
import sys

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.dirname(__file__))
from attn_sweep import ex, sweep  # noqa: E402


def prefetch_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                    causal: ml.constexpr, scale: ml.constexpr):
  d = q.shape[3]
  q_s, k_s, v_s, o_s = ml.smem((bq, d)), ml.smem((bkv, d)), ml.smem((bkv, d)), ml.smem((bq, d))
  tiles = ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0]
  pid, programs = ml.program_id(0), ml.num_programs(0)
  i0, h0, b0 = ex.tile_ids(pid, q, bq, causal)
  ml.copy(q.at[b0, ml.ds(i0 * bq, bq), h0, :], q_s)
  for t in range(pid, tiles, programs):
    i, h, b = ex.tile_ids(t, q, bq, causal)
    m, l, acc = ex.online_softmax(q, k, v, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, True, False, 0)
    i2, h2, b2 = ex.tile_ids(ml.where(t + programs < tiles, t + programs, t), q, bq, causal)
    ml.copy(q.at[b2, ml.ds(i2 * bq, bq), h2, :], q_s)       # the next tile's Q, under the epilogue
    o_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
    ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
    ex.store_lse(lse, (m + ml.log2(l)) * (1.0 / ex.LOG2E), b, h, i, bq)


def _grid(q, *_, bq, **__):
  return (min(ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0], mg.num_sms()),)


prefetch = mg.mgpu_kernel(prefetch_kernel, out_shape=ex._fwd_out, grid=_grid, block=ex._fwd_block)


def _per_sm_grid(q, *_, bq, causal=False, **__):
  """One program an SM (the persistent forward's grid before the twenty-sixth session, which now has as many
  programs as the busiest needs rounds: 128 for 2048 tiles)."""
  tiles = ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0]
  return (min(tiles // 2 if causal and tiles % 2 == 0 else tiles, mg.num_sms()),)


per_sm = mg.mgpu_kernel(ex.forward_kernel, out_shape=ex._fwd_out, grid=_per_sm_grid, block=ex._fwd_block)


def variants(d, causal):
  base = dataclasses.replace(ex.default_config(d, causal), persistent=True)
  for stages in (base.stages, 2):
    c = dataclasses.replace(base, stages=stages)
    yield f"persistent q{c.bq} kv{c.bkv} s{stages}", lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c)
  yield f"per SM q{base.bq} kv{base.bkv} s{base.stages}", lambda q, k, v: per_sm(
      q, k, v, bq=base.bq, bkv=base.bkv, stages=base.stages, causal=causal, scale=1.0 / d ** 0.5, ws=True,
      lpt=base.lpt, persistent=True)[0]
  for persistent in (True, False):     # the warpgroups taking turns on the tensor cores (FA3's ping-pong)
    c = dataclasses.replace(base, persistent=persistent, pingpong=True)
    yield f"{'persistent' if persistent else 'grid'} pingpong s{c.stages}", \
        lambda q, k, v, c=c: ex.attention(q, k, v, causal, config=c)
  scale = 1.0 / d ** 0.5
  yield f"prefetch q{base.bq} kv{base.bkv} s2", lambda q, k, v: prefetch(
      q, k, v, bq=base.bq, bkv=base.bkv, stages=2, causal=causal, scale=scale)[0]


if __name__ == "__main__":
  sweep(variants, seqs=(1024, 4096))
