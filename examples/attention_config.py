"""The tiles of examples/attention.py's kernels: `Config`, and `default_config`, the choices measured on
the H200 for each head_dim, mask and sequence length (figures in docs/benchmarks.md)."""
from __future__ import annotations

import dataclasses

LOG2E = 1.4426950408889634     # the kernels' exponentials are exp2: exp(x) = 2 ** (x * LOG2E)
NEG_INF = -float("inf")


@dataclasses.dataclass(frozen=True)
class Config:
  """Tiles of the kernels: query rows per CTA (`*_bq`), keys per CTA or step (`*_bkv`) and
  pipelined stages; which forward and backward kernels run. The fused backward uses the
  dkv_* tiles (dkv_bq a multiple of 128 when head_dim < 128, of 64 with dkv_bkv=64). Split tiles (the
  forward's and dQ's bq, dK/dV's bkv) hold 64 rows per warpgroup, so they are multiples of 128 with
  block=256; the forward's bq may also be 192 (three warpgroups), dK/dV's bkv 64 (one warpgroup, block=128:
  slower, thirty-first session, but the only fused backward that fits at head_dim 80-112). Any tile may
  leave a partial last block."""
  bq: int = 128
  bkv: int = 128
  stages: int = 2
  overlap: bool = True       # the forward with softmax under the tensor cores (forward_overlap)
  fused_bwd: bool = True     # one backward kernel (dkv_dq_kernel, dk/dv tiles) rather than two
  ws: bool = False           # the forward warp-specialised: a producer warpgroup issues the K/V loads
  bwd_ws: bool = False       # the backward kernels too (Q/dO loads; not in kernels of one stage): slower
  bwd_dq_first: bool = False  # the fused backward issues dQ's product before dK's (dkv_dq_kernel's dq_first)
  bwd_split_mask: bool = False  # causal: the fused backward's diagonal blocks in a loop of their own
                                # (not with bwd_ws: a kernel has one warp-specialised loop; the deferred
                                # backward too: without it one loop tests each block at run time)
  bwd_p16_ds: bool = False   # the fused backward's ds = p * (dp - delta) from the 16-bit p (dV's operand)
  bwd_dq_deferred: bool = False  # the fused backward issues each step's dQ product at the next step's start
                                 # (attention_bwd.py's deferred_kernel; its own order: bwd_dq_first has no effect;
                                 # not with bwd_ws)
  bwd_dp_late: bool = False  # the deferred backward issues dP's product after dQ's store (one product fewer in flight)
  bwd_lpt: int = 0           # the backward's blocks in chunks of this many across heads (causal: longest first)
  pingpong: bool = False     # with ws: the forward's two warpgroups take turns on the tensor cores (FA3)
  lpt: bool = False          # the forward's query tiles the grid's slowest axis (causal: longest first overall)
  persistent: bool = False   # the (plain) forward on one program an SM walking the query tiles
  prefetch_q: bool = False   # persistent: the next tile's Q loads under this tile's epilogue (O's own buffer)
  emulate: float = 0.0       # the (plain) forward's share of exponentials on the FMA units (ml.exp2's emulate)
  dkv_bq: int = 64
  dkv_bkv: int = 128
  dkv_stages: int = 2
  dq_bq: int = 128
  dq_bkv: int = 64
  dq_stages: int = 2


def default_config(head_dim: int, causal: bool = False, seq_kv: int | None = None) -> Config:
  """Tiles that fit the SMEM (227 KiB less 16 bytes) and the registers of the warpgroups; each choice
  measured on the H200 (TFLOP/s, sessions in docs/benchmarks.md). The forward is warp-specialised in the
  plain order (the fastest at head_dim 64 and 128). At head_dim 64 without a mask it runs three
  warpgroups of 64 query rows (437-443 against 410 on two; 471 against 441 since the producer warpgroup takes 24
  registers, not 40, and ptxas no longer serialises the products, fifty-seventh session, H100; with the mask the
  diagonal blocks of 192 rows waste what the third gains, 381 against 385), its query tiles the grid's slowest axis (`lpt`: 383 against 373
  causal; at 128 that order loses K and V's reuse in L2, 558 against 601). Up to `seq_kv` = 4096 keys
  the forward is persistent (541 / 628 against 518 / 603 at seq 1024 / 4096, head_dim 128; at 16384
  the per-tile grid wins, 630 against 585), its grid `_fwd_grid`; persistent causal at head_dim 64 takes
  3 stages (379 against 364 with 4). Causal at head_dim 64 computes an eighth of its exponentials on the
  FMA units (`emulate`: 384 / 271 against 369 / 267 at seq 4096 / 1024, equal at 16384; without the mask
  and at head_dim 128 it loses, twenty-seventh session). The persistent forward at head_dim 64 loads the next
  tile's Q under this tile's epilogue (`prefetch_q`: 375 / 465 against 361 / 457 at seq 1024 / 4096, causal 290 /
  396 against 272 / 385); at 128 O's own buffer leaves room for two stages only, which lose more (614 against
  659 at seq 4096). The backward kernels
  are not warp-specialised (`bwd_ws` spills: 135 / 294 against 284 / 444 at head_dim 64 / 128). The
  fused backward issues dQ's product first (`bwd_dq_first`) except at head_dim 128 without the mask
  (403 against 443), and with the mask runs the diagonal blocks in a loop of their own
  (`bwd_split_mask`): 349 / 301 / 340 against 285 / 276 / 298 (64 full / 64 causal / 128 causal). Up to `seq_kv`
  = 4096 keys the fused backward's blocks launch in chunks of 4 across heads (`bwd_lpt`): with the mask at seq
  4096, 348 / 315 against 337 / 301 (head_dim 128 / 64), equal at seq 1024 and without the mask (chunks of 1 lose
  K and Q's reuse in L2: 356 against 447 at 128 full); the two-kernel backward (96) loses (307 against 327). At
  head_dim 128 the fused backward takes ds from the 16-bit p (`bwd_p16_ds`: ptxas spills 20 bytes a thread, not 92):
  465 / 356 against 444 / 352 (full / causal, H100, forty-seventh session; at 64 it loses, 342 against 349); dQ and
  dK's error against a float32 reference grows from 3.3e-4 to 4.1e-4. At head_dim 64 the fused backward issues each
  step's dQ product at the next step's start (`bwd_dq_deferred`, fiftieth session, H100, the kernel alone): 372 / 314
  against 304 / 271 at seq 4096 / 1024 without the mask, 329 against 313 causal at 4096; causal at 1024 it loses
  (228 against 234) and at head_dim 128 everywhere (428 / 375 against 457 / 406). The deferred backward issues dP's
  product after dQ's store and takes ds from the 16-bit p (`bwd_dp_late`, `bwd_p16_ds`), and with the mask runs one
  loop that tests each block (`bwd_split_mask` off): ptxas no longer serialises its products (92 / 56 bytes spilled,
  against 156 / 52 serialised); 328 / 377 against 313 / 363 (causal / full, seq 4096, H100, fifty-eighth session)."""
  persistent = seq_kv is not None and seq_kv <= 4096
  if head_dim <= 64:
    deferred = not (causal and seq_kv is not None and seq_kv <= 1024)
    return Config(bq=128 if causal else 192, bkv=128, stages=4 if causal and not persistent else 3, overlap=False,
                  ws=True, lpt=True, persistent=persistent, prefetch_q=persistent, emulate=0.125 if causal else 0.0,
                  bwd_dq_first=True, bwd_dq_deferred=deferred, bwd_split_mask=causal and not deferred,
                  bwd_dp_late=deferred, bwd_p16_ds=deferred, bwd_lpt=4 if persistent else 0, dkv_bq=128, dkv_bkv=128,
                  dkv_stages=2, dq_bkv=128, dq_stages=3)
  if head_dim <= 128:      # (80-112: the fused backward's buffers pass the SMEM, so dK/dV and dQ run apart)
    return Config(bq=128, bkv=128, stages=3, overlap=False, ws=True, persistent=persistent, bwd_dq_first=causal,
                  bwd_split_mask=causal, bwd_p16_ds=head_dim == 128, fused_bwd=head_dim == 128, bwd_lpt=4 if persistent and head_dim == 128 else 0,
                  dkv_bq=64, dkv_bkv=128, dkv_stages=2,
                  dq_bkv=64 if head_dim == 128 else 128, dq_stages=3)
  return Config(bq=128, bkv=64, stages=2, fused_bwd=False, dkv_bq=64, dkv_bkv=128, dkv_stages=1, dq_bkv=64,
                dq_stages=1)
