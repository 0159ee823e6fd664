"""Flash attention on Hopper in mgpu_dsl: forward and backward, causal or not, GQA.

    python examples/attention.py       # checks against a jnp reference (on a GPU; small, interpreted, elsewhere)

`attention(q, k, v, causal=False, sm_scale=None)` takes (batch, seq, heads, head_dim)
arrays (float16 or bfloat16, head_dim a multiple of 16 from 32 to 128, or 256; k and v may have
fewer heads than q, a divisor of them: grouped-query attention) and works under `jax.grad`.

The forward kernel gives each CTA `bq` query rows of one head; with block=256 its two
warpgroups own 64 rows each (the row split of tensor-core tiles). It walks the keys in
blocks of `bkv`, in a loop the compiler software-pipelines (`stages` buffers of K and V,
loaded by TMA ahead of use), and keeps the online softmax (row max `m`, row sum `l`, the
output accumulator) in registers:

    s = q @ k.T                   ml.dot(q_s, k_s.T): K read transposed from SMEM
    p = 2 ** (s * c - m)          c = sm_scale * log2(e) folded into one multiply-add
    acc = acc * alpha + p @ v     P straight from registers into the tensor cores

Causal programs stop at the diagonal (a runtime trip count) and mask only the blocks that
cross it. With `Config(persistent=True)` (the default up to 4096 keys) one program an SM walks
query tiles, its producer warpgroup loading the next tile's K and V during this tile's end. Any
sequence length works: a last block is partial (TMA reads zeros past the end), its missing keys
masked, missing query rows add nothing (at head_dim >= 128 zero rows pad seq to a multiple of 8).
`forward_overlap` (an option, slower on the H200) reorders the loop as FlashAttention-3 does.

The backward recomputes P from the forward's logsumexp: one kernel per K/V block
accumulates dK and dV over the query blocks (and over the query heads that share a K/V
head) and adds each block's share of dQ into a float32 buffer with TMA reductions
(`dkv_dq_kernel`, the default); or, without atomics, a second kernel per query block
accumulates dQ (`Config(fused_bwd=False)`, and for head_dim 256).
"""
from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from attention_config import LOG2E, NEG_INF, Config, default_config  # noqa: F401  (the tiles: attention_config.py)
# the backward's kernels: examples/attention_bwd.py
from attention_bwd import attention_bwd, attention_bwd_deferred, attention_dkv, attention_dq, dq_transposed, kv_blocks


# ---------------------------------------------------------------- forward
def _fwd_out(q, k, v, **_):
  b, s, h, _d = q.shape
  return jax.ShapeDtypeStruct(q.shape, q.dtype), jax.ShapeDtypeStruct((b, h, s), jnp.float32)


def _q_grid(q, *_, bq, **__):
  return (ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0])


def _fwd_grid(q, *_, bq, lpt=False, persistent=False, causal=False, **__):
  if persistent:
    tiles = ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0]
    n = tiles // 2 if causal and tiles % 2 == 0 else tiles       # (causal: pairs of tiles)
    if q.shape[3] < 128:      # one program an SM: at head_dim 64 the balanced grid is 1-2% slower (458 / 452)
      return (min(n, mg.num_sms()),)
    # as many programs as the busiest needs rounds: 2048 tiles take 16 rounds on 132 SMs, which 128 finish
    return (ml.cdiv(n, max(1, ml.cdiv(n, mg.num_sms()))),)     # 653-658 against 644-650 TFLOP/s (seq 4096)
  if lpt:      # query tiles the slowest axis: every head's longest (causal) tile launches first
    return (q.shape[2], q.shape[0], ml.cdiv(q.shape[1], bq))
  return (ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0])     # a partial last query tile


@ml.inline
def fwd_ids(causal, lpt):
  """(query tile, head, batch) of this program: with `causal`, the longest rows first (a shorter
  tail); with `lpt`, across all heads and batches (the grid's slowest axis), else within each."""
  if lpt:
    return ml.num_programs(2) - 1 - ml.program_id(2), ml.program_id(0), ml.program_id(1)
  i = ml.program_id(0)
  if causal:
    i = ml.num_programs(0) - 1 - i
  return i, ml.program_id(1), ml.program_id(2)


def _fwd_block(q, *_, bq, **__):
  return 384 if bq == 192 else 256       # 64 query rows a warpgroup: three for bq=192


@ml.inline
def store_lse(lse, value, b, h, i, bq):
  """The logsumexp of query rows i * bq ..., those inside the sequence (the last tile may be partial)."""
  if lse.shape[2] % bq:
    rows = i * bq + ml.arange(bq)
    lse.at[b, h, ml.ds(i * bq, bq)].store(value, mask=rows < lse.shape[2])
  else:
    lse.at[b, h, ml.ds(i * bq, bq)][...] = value


@ml.inline
def mask_kv_tail(s, j, bkv, skv):
  """Block j's scores of keys past the sequence's end (TMA read them as zeros) at -inf: only the
  last block, and only when the block does not divide the keys."""
  if skv % bkv:
    if (j + 1) * bkv > skv:
      cols = j * bkv + ml.arange(bkv)[None, :]
      s = ml.where(cols < skv, s, NEG_INF)
  return s


@ml.inline
def tile_ids(t, q, bq, causal):
  """(query tile, head, batch) of a persistent program's tile t: query tiles fastest (neighbours share
  K and V in L2); with `causal`, a head's tiles in the order longest, shortest, second longest, second
  shortest, ..., so that tiles 2u and 2u + 1 together see about as many key blocks as any other pair."""
  nq, heads = ml.cdiv(q.shape[1], bq), q.shape[2]
  i = t % nq
  if causal:
    i = ml.where(i % 2 == 0, nq - 1 - i // 2, i // 2)
  return i, t // nq % heads, t // (nq * heads)


@ml.inline
def online_softmax(q, k, v, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len, emulate=0):
  """(m, l, acc) of query tile i of head h (its Q in q_s) over its key blocks: the online softmax."""
  hk = h // (q.shape[2] // k.shape[2])
  c = scale * LOG2E                          # softmax in base 2: exp(x * scale) = 2 ** (x * c)
  m = ml.full((bq,), NEG_INF, jnp.float32)   # running row max of s * c
  l = ml.zeros((bq,), jnp.float32)           # running row sum of 2 ** (s * c - m)
  acc = ml.zeros((bq, q.shape[3]), jnp.float32)
  n = kv_blocks(q, k, i, bq, bkv, causal)
  for j in ml.range(n, stages=stages, warp_specialize=ws, pingpong=pingpong):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T)
    if causal:
      if (j + 1) * bkv > i * bq:             # only blocks crossing the diagonal need the mask
        rows = i * bq + ml.arange(bq)[:, None]
        cols = j * bkv + ml.arange(bkv)[None, :]
        s = ml.where(cols <= rows, s, NEG_INF)
    else:
      s = mask_kv_tail(s, j, bkv, kv_len or k.shape[1])
    m_new = ml.maximum(m, ml.max(s, axis=1) * c)
    alpha = ml.exp2(m - m_new, approx=True)
    p = ml.exp2(ml.fma(s, c, -m_new[:, None]), approx=True, emulate=emulate)     # emulate: a share on the FMA units
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(q.dtype), v_s, acc * alpha[:, None])
    m = m_new
  return m, l, acc


@ml.inline
def attend_tile(q, k, v, o, lse, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len, emulate,
                o_s=None, after=None):
  """o and lse of query tile i of head h: its Q into q_s, the online softmax, O out through q_s.
  With `after` (the next tile's (i, h, b)), Q is already in q_s (loaded ahead), O goes out through `o_s`,
  and the next tile's Q is loaded into q_s once the last dot has read this one's: under the epilogue.
  (O stored straight from registers instead of through o_s was slower: 351 against 377 TFLOP/s at
  head_dim 64, seq 1024; docs/benchmarks.md, thirty-first session.)"""
  if after is None:
    ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
    o_s = q_s                                                  # (q is spent when O is stored)
  m, l, acc = online_softmax(q, k, v, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len,
                             emulate)
  if after is not None:
    ml.copy(q.at[after[2], ml.ds(after[0] * bq, bq), after[1], :], q_s)
  o_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
  store_lse(lse, (m + ml.log2(l)) * (1.0 / LOG2E), b, h, i, bq)


def forward_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                   causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
                   pingpong: ml.constexpr = False, lpt: ml.constexpr = False, kv_len: ml.constexpr = 0,
                   persistent: ml.constexpr = False, emulate: ml.constexpr = 0, prefetch_q: ml.constexpr = False):
  """o = softmax(q @ k.T * scale) @ v for `bq` rows of one head; lse (natural log) per row.

  `persistent`: one program an SM walks query tiles of every head and batch, its producer warpgroup
  loading the next tile's K and V while this tile finishes (no CTA starts with an empty pipeline).
  `prefetch_q` (persistent): O goes out through a buffer of its own, so the next tile's Q loads while
  this tile's epilogue runs (one more (bq, head_dim) buffer of SMEM).
  `emulate`: the share of the exponentials computed on the FMA units (ml.exp2's emulate)."""
  q_s = ml.smem((bq, q.shape[3]))
  k_s = ml.smem((bkv, q.shape[3]))
  v_s = ml.smem((bkv, q.shape[3]))
  if persistent:
    tiles = ml.cdiv(q.shape[1], bq) * q.shape[2] * q.shape[0]
    pid, programs = ml.program_id(0), ml.num_programs(0)
    o_s = ml.smem((bq, q.shape[3])) if prefetch_q else None
    pairs = causal and tiles % 2 == 0    # whole pairs of tiles a program (tile_ids): programs of equal work
    if prefetch_q:
      i, h, b = tile_ids(2 * pid if pairs else pid, q, bq, causal)
      ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
    if pairs:
      for u in range(2 * ml.cdiv(tiles // 2 - pid, programs)):
        t = 2 * (pid + u // 2 * programs) + u % 2
        i, h, b = tile_ids(t, q, bq, causal)
        after = (tile_ids(ml.minimum(2 * (pid + (u + 1) // 2 * programs) + (u + 1) % 2, tiles - 1), q, bq, causal)
                 if prefetch_q else None)
        attend_tile(q, k, v, o, lse, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len,
                    emulate, o_s, after)
    else:
      for t in range(pid, tiles, programs):
        i, h, b = tile_ids(t, q, bq, causal)
        after = tile_ids(ml.minimum(t + programs, tiles - 1), q, bq, causal) if prefetch_q else None
        attend_tile(q, k, v, o, lse, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len,
                    emulate, o_s, after)
  else:
    i, h, b = fwd_ids(causal, lpt)
    attend_tile(q, k, v, o, lse, q_s, k_s, v_s, i, h, b, bq, bkv, stages, causal, scale, ws, pingpong, kv_len,
                emulate)


def forward_overlap_kernel(q, k, v, o, lse, *, bq: ml.constexpr, bkv: ml.constexpr, stages: ml.constexpr,
                           causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
                           pingpong: ml.constexpr = False, lpt: ml.constexpr = False, kv_len: ml.constexpr = 0):
  """forward_kernel with the softmax under the tensor cores (FlashAttention-3's intra-warpgroup order):
  step t issues s = q @ k_t.T, then p_{t-1} @ v_{t-1} (the previous block's probabilities, in
  registers), then runs block t's softmax while that second dot runs, and waits for it at the end
  of the step before converting the new p: ptxas serialises every dot of the loop (warning C7514)
  if a register a running dot reads is redefined, or a dot runs across the loop's back edge.
  Step 0 has no block to finish (p = 0, alpha = 1) and step n no block to start: its scores are
  shifted to -1e30 per row (`kill`), which leaves m and l and gives p = 0. Slower than the plain
  order on the H200 (548 against 613 TFLOP/s at head_dim 128; docs/benchmarks.md): an option.
  """
  i, h, b = fwd_ids(causal, lpt)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s = ml.smem((bq, d))
  k_s = ml.smem((bkv, d))
  v_s = ml.smem((bkv, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  c = scale * LOG2E
  m = ml.full((bq,), -1e30, jnp.float32)     # finite: a step with no block gives alpha = 1, not NaN
  l = ml.zeros((bq,), jnp.float32)
  acc = ml.zeros((bq, d), jnp.float32)
  p = ml.zeros((bq, bkv), q.dtype)
  alpha = ml.full((bq,), 1.0, jnp.float32)
  n = kv_blocks(q, k, i, bq, bkv, causal)
  for t in ml.range(n + 1, stages=stages, warp_specialize=ws, pingpong=pingpong):
    ml.copy(k.at[b, ml.ds(ml.minimum(t, n - 1) * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(ml.maximum(t - 1, 0) * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T)
    acc = ml.dot(p, v_s, acc * alpha[:, None])
    if causal:
      if (t + 1) * bkv > i * bq:
        rows = i * bq + ml.arange(bq)[:, None]
        cols = t * bkv + ml.arange(bkv)[None, :]
        s = ml.where(cols <= rows, s, NEG_INF)
    else:
      s = mask_kv_tail(s, t, bkv, kv_len or k.shape[1])
    kill = ml.where(t < n, 0.0, -1e30)       # step n: no block
    m_new = ml.maximum(m, ml.max(s, axis=1) * c + kill)
    alpha = ml.exp2(m - m_new, approx=True)
    pf = ml.exp2(ml.fma(s, c, -(m_new - kill)[:, None]), approx=True)
    l = l * alpha + ml.sum(pf, axis=1)
    m = m_new
    acc = acc * 1.0                          # a read of acc: waits for p @ v before p changes
    p = pf.astype(q.dtype)
  o_s = q_s                                  # q is spent: its SMEM takes the output tile
  o_s[...] = (acc * (1.0 / l)[:, None]).astype(o.dtype)
  ml.copy(o_s, o.at[b, ml.ds(i * bq, bq), h, :])
  store_lse(lse, (m + ml.log2(l)) * (1.0 / LOG2E), b, h, i, bq)


forward = mg.mgpu_kernel(forward_kernel, out_shape=_fwd_out, grid=_fwd_grid, block=_fwd_block)
forward_overlap = mg.mgpu_kernel(forward_overlap_kernel, out_shape=_fwd_out, grid=_fwd_grid, block=_fwd_block)


# ---------------------------------------------------------------- the JAX function
def _check(q, k, v, causal, config):
  if q.ndim != 4 or k.shape != v.shape or k.ndim != 4:
    raise ValueError(f"q, k, v must be (batch, seq, heads, head_dim) arrays, got {q.shape}, {k.shape}, {v.shape}")
  (bsz, sq, h, d), (bk, skv, hk, dk) = q.shape, k.shape
  if bk != bsz or dk != d or hk == 0 or h % hk:
    raise ValueError(f"k and v must be (batch, seq_kv, kv_heads, head_dim) with kv_heads dividing the"
                     f" {h} query heads, got {k.shape} for q {q.shape}")
  if not q.dtype == k.dtype == v.dtype or q.dtype not in (jnp.float16, jnp.bfloat16):
    raise ValueError(f"q, k, v must all be float16 or all bfloat16, got {q.dtype}, {k.dtype}, {v.dtype}")
  if d != 256 and (d % 16 or not 32 <= d <= 128):
    raise ValueError(f"head_dim must be a multiple of 16 from 32 to 128, or 256, got {d}")
  if skv == 0 and bsz * sq * h:    # a softmax over no keys: the kernels' row sums are 0, every output NaN
    raise ValueError(f"k and v have no keys (kv seq length 0) for {sq} queries: attention needs at least one")
  if causal and sq != skv:
    raise ValueError(f"causal attention needs as many queries as keys, got {sq} and {skv}")
  if config.emulate and config.overlap:
    raise ValueError(f"emulate is an option of the plain forward: set overlap=False or emulate=0, got {config}")
  if (config.bq % 128 and config.bq != 192) or (config.dkv_bkv % 128 and config.dkv_bkv != 64) or config.dq_bq % 128:
    raise ValueError(f"bq (or 192: three warpgroups), dkv_bkv (or 64: one warpgroup) and dq_bq must be multiples of"
                     f" 128 (64 rows for each of two warpgroups), got {config}")


def _check_bwd(q, k, config):
  """The backward's tiles (any sequence lengths: the last blocks may be partial)."""
  d = q.shape[3]
  if config.fused_bwd and not dq_transposed(d) and config.dkv_bq % (64 if config.dkv_bkv == 64 else 128):
    raise ValueError(f"the fused backward splits dQ's query rows between its warpgroups for head_dim {d}: dkv_bq"
                     f" must be a multiple of 128 (of 64 with dkv_bkv=64, one warpgroup), got {config}")


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4, 5, 6, 7))
def _attention(q, k, v, causal, scale, config, interpret, kv_len):
  kw = dict(bq=config.bq, bkv=config.bkv, stages=config.stages, causal=causal, scale=scale, ws=config.ws,
            pingpong=config.pingpong, lpt=config.lpt, kv_len=kv_len, interpret=interpret)
  if config.overlap:
    return forward_overlap(q, k, v, **kw)
  return forward(q, k, v, persistent=config.persistent, emulate=config.emulate,
                 prefetch_q=config.persistent and config.prefetch_q, **kw)


def _attention_fwd(q, k, v, causal, scale, config, interpret, kv_len):
  o, lse = _attention(q, k, v, causal, scale, config, interpret, kv_len)
  return (o, lse), (q, k, v, o, lse)


def _attention_bwd(causal, scale, config, interpret, kv_len, res, cotangents):
  q, k, v, o, lse = res
  _check_bwd(q, k, config)
  do, dlse = cotangents
  # d lse / d s = p, so a cotangent of lse joins delta = rowsum(do * o) with the opposite sign.
  delta = jnp.einsum("bqhd,bqhd->bhq", o.astype(jnp.float32), do.astype(jnp.float32)) - dlse
  do = do.astype(q.dtype)
  sq = q.shape[1]
  if sq % 8:     # TMA moves lse's rows and dQ's float32 tiles in 16-byte steps: zero query rows, which add nothing
    pad = lambda x, axis: jnp.pad(x, [(0, -sq % 8 if a == axis else 0) for a in range(x.ndim)])
    q, do, lse, delta = pad(q, 1), pad(do, 1), pad(lse, 2), pad(delta, 2)
  kw = dict(causal=causal, scale=scale, lpt=config.bwd_lpt, interpret=interpret)
  ws = lambda stages: config.bwd_ws and stages > 1     # a backward kernel of one stage has nothing to overlap
  if config.fused_bwd and config.bwd_dq_deferred and not ws(config.dkv_stages):
    dk, dv, dq_acc = attention_bwd_deferred(q, k, v, do, lse, delta, bq=config.dkv_bq, bkv=config.dkv_bkv,
                                            stages=config.dkv_stages, p16_ds=config.bwd_p16_ds,
                                            dp_late=config.bwd_dp_late, split_mask=config.bwd_split_mask, **kw)
  elif config.fused_bwd:
    dk, dv, dq_acc = attention_bwd(q, k, v, do, lse, delta, bq=config.dkv_bq, bkv=config.dkv_bkv,
                                   stages=config.dkv_stages, ws=ws(config.dkv_stages), dq_first=config.bwd_dq_first,
                                   split_mask=config.bwd_split_mask and not ws(config.dkv_stages),
                                   p16_ds=config.bwd_p16_ds, **kw)
  if config.fused_bwd:
    dq = dq_acc.transpose(0, 3, 1, 2) if dq_transposed(q.shape[-1]) else dq_acc
    return (dq[:, :sq] * scale).astype(q.dtype), dk, dv
  dk, dv = attention_dkv(q, k, v, do, lse, delta, bq=config.dkv_bq, bkv=config.dkv_bkv, stages=config.dkv_stages,
                         ws=ws(config.dkv_stages), **kw)
  dq = attention_dq(q, k, v, do, lse, delta, bq=config.dq_bq, bkv=config.dq_bkv, stages=config.dq_stages,
                    ws=ws(config.dq_stages), **kw)
  return dq[:, :sq], dk, dv


_attention.defvjp(_attention_fwd, _attention_bwd)


def attention(q, k, v, causal: bool = False, sm_scale: float | None = None, *, return_lse: bool = False,
              config: Config | None = None, interpret: bool | None = None):
  """softmax(q @ k.T * sm_scale) @ v over (batch, seq, heads, head_dim) arrays, differentiable.

  `k` and `v` may have fewer heads than `q` (a divisor: grouped-query attention). With
  `causal`, query i attends to keys 0..i. `sm_scale` defaults to 1 / sqrt(head_dim).
  With `return_lse`, also returns the logsumexp of each row of scaled logits,
  (batch, heads, seq) float32 (differentiable too). `interpret=True` runs the kernels
  with numpy on the CPU.

      o = attention(q, k, v, causal=True)
      dq, dk, dv = jax.grad(lambda q, k, v: attention(q, k, v).sum(), argnums=(0, 1, 2))(q, k, v)
  """
  for name, value in (("causal", causal), ("sm_scale", sm_scale)):
    if isinstance(value, jax.core.Tracer):      # (bool() of it would be JAX's TracerBoolConversionError)
      raise ValueError(f"attention: {name} must be a Python value (it is built into the kernels), got a value"
                       f" jax.jit is tracing: mark it static, jax.jit(f, static_argnames=[{name!r}])")
  if config is not None and not isinstance(config, Config):
    raise TypeError(f"attention: config must be a Config (Config(bq=..., ...)), got {type(config).__name__}")
  config = config or default_config(q.shape[-1], bool(causal), k.shape[1])
  _check(q, k, v, causal, config)
  scale = float(sm_scale) if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
  if not 0 < scale < math.inf:     # the kernels mask with -inf before scaling: a scale of 0 or less breaks it,
    raise ValueError(f"sm_scale must be positive and finite, got {sm_scale}")     # inf gives inf - inf: NaN
  sq, skv = q.shape[1], k.shape[1]
  # rows wider than one swizzled tile (head_dim 48, 80-128, 256: tiles of 16, 32 or 64 columns): TMA moves whole
  # (8, columns) tiles, so seq in 8s; head_dim 32 and 64 are one tile a row, any number of rows
  wide = q.shape[-1] not in (32, 64)
  pad = lambda x: jnp.pad(x, [(0, 0), (0, -x.shape[1] % 8), (0, 0), (0, 0)]) if wide and x.shape[1] % 8 else x
  kv_len = skv if wide and skv % 8 else 0      # the zero keys added are masked out (their zero rows add nothing)
  o, lse = _attention(pad(q), pad(k), pad(v), bool(causal), scale, config, interpret, kv_len)
  if o.shape[1] != sq:
    o, lse = o[:, :sq], lse[:, :, :sq]
  return (o, lse) if return_lse else o


def reference(q, k, v, causal=False, sm_scale=None):
  """(o, lse) computed with jnp in float32 (the test and benchmark reference)."""
  scale = sm_scale if sm_scale is not None else 1.0 / math.sqrt(q.shape[-1])
  g = q.shape[2] // k.shape[2]
  k, v = jnp.repeat(k, g, axis=2), jnp.repeat(v, g, axis=2)
  s = jnp.einsum("bqhd,bkhd->bhqk", q.astype(jnp.float32), k.astype(jnp.float32)) * scale
  if causal:
    s = jnp.where(jnp.tril(jnp.ones(s.shape[-2:], bool)), s, -jnp.inf)
  lse = jax.nn.logsumexp(s, axis=-1)
  o = jnp.einsum("bhqk,bkhd->bqhd", jnp.exp(s - lse[..., None]), v.astype(jnp.float32))
  return o.astype(q.dtype), lse


# Specialisations `python -m mgpu_dsl check examples/attention.py` checks without a GPU.
_Q = jax.ShapeDtypeStruct((1, 1024, 4, 128), jnp.float16)
_KV = jax.ShapeDtypeStruct((1, 1024, 2, 128), jnp.float16)
_LSE = jax.ShapeDtypeStruct((1, 4, 1024), jnp.float32)
mg.check_specs(forward, _Q, _KV, _KV, bq=128, bkv=128, stages=3, causal=True, scale=0.125)
mg.check_specs(forward_overlap, _Q, _KV, _KV, bq=128, bkv=128, stages=3, causal=False, scale=0.125)


def main():
  on_gpu = any(dev.platform == "gpu" for dev in jax.devices())
  shape, heads_kv = ((2, 1024, 8, 128), 2) if on_gpu else ((1, 256, 2, 64), 1)
  bsz, seq, heads, dim = shape
  for dtype in (jnp.float16, jnp.bfloat16):
    for causal in (False, True):
      kq, kk, kv, kd = jax.random.split(jax.random.key(0), 4)
      q, do = (jax.random.normal(key, shape, jnp.float32).astype(dtype) for key in (kq, kd))
      k, v = (jax.random.normal(key, (bsz, seq, heads_kv, dim), jnp.float32).astype(dtype) for key in (kk, kv))
      run = functools.partial(attention, causal=causal, interpret=not on_gpu)
      got, vjp = jax.vjp(jax.jit(run) if on_gpu else run, q, k, v)
      want, vjp_ref = jax.vjp(lambda q, k, v: reference(q, k, v, causal)[0], q, k, v)
      err = _rel(got, want)
      gerr = max(_rel(g, w) for g, w in zip(vjp(do), vjp_ref(do)))
      print(f"{jnp.dtype(dtype).name} causal={causal} {shape} kv_heads={heads_kv}: output error {err:.1e},"
            f" gradient error {gerr:.1e}{'' if on_gpu else ' (interpret mode)'}")
      assert err < 2e-2 and gerr < 5e-2


def _rel(got, want):
  got, want = jnp.asarray(got, jnp.float32), jnp.asarray(want, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))


if __name__ == "__main__":
  main()
