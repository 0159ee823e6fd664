"""Flash attention's backward kernels (examples/attention.py's `attention` wires them with jax.custom_vjp).

The backward recomputes P from the forward's logsumexp. `dkv_dq_kernel` (the default) gives each CTA a block
of keys of one K/V head: it accumulates dK and dV over the query blocks (and the query heads sharing the K/V
head) in registers and adds each query block's share of dQ into a float32 buffer with TMA reductions;
`deferred_kernel` (the default at head_dim 64) issues each step's dQ product at the start of the next step.
`dkv_kernel` and `dq_kernel` are the backward without atomics, in two kernels (`Config(fused_bwd=False)`).
"""
from __future__ import annotations

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from attention_config import LOG2E, NEG_INF


# ---------------------------------------------------------------- backward
@ml.inline
def kv_blocks(q, k, i, bq, bkv, causal):
  """How many key blocks program i's query rows see: all of them (the last may be partial), or with
  `causal` those up to the diagonal."""
  n = ml.cdiv(k.shape[1], bkv)
  if causal:
    last = ((i + 1) * bq + bkv - 1) // bkv   # blocks up to the diagonal
    if q.shape[1] % bq or k.shape[1] % bkv:
      last = ml.minimum(last, n)             # the partial last query tile
    n = last
  return n


def _dkv_out(q, k, v, do, lse, delta, **_):
  return jax.ShapeDtypeStruct(k.shape, k.dtype), jax.ShapeDtypeStruct(v.shape, v.dtype)


def _blocks_grid(n, heads, batch, lpt):
  """The backward's grid: (block, head, batch), or with `lpt` one axis that `block_ids` unfolds."""
  return (n * heads * batch,) if lpt else (n, heads, batch)


def _dkv_grid(q, k, v, do, lse, delta, *, bkv, lpt=0, **_):
  return _blocks_grid(ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0], lpt)


def _dq_grid(q, k, v, do, lse, delta, *, bq, lpt=0, **_):
  return _blocks_grid(ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0], lpt)


@ml.inline
def block_ids(n, heads, batch, lpt, reverse):
  """(block, head, batch) of this backward program, `reverse` numbering the n blocks from the end.

  Without `lpt` the grid is (block, head, batch): each head's blocks launch in turn. With `lpt`, in
  chunks of `lpt` neighbouring blocks: every head's and batch's first chunk, then every one's second, and
  so on. Under a causal mask a block's work shrinks (dK/dV) or grows (dQ, reversed) along the sequence,
  so the longest blocks of all heads launch first and the last to launch are short (the tail of
  the default order is a whole head's longest block); within a chunk, `lpt` programs of one head
  stream the same query (or key) blocks, which L2 serves once."""
  if lpt:
    t = ml.program_id(0)
    span = lpt * heads * batch          # the programs of one whole chunk of every head and batch
    w, width = t % span, lpt
    if n % lpt:                         # the last chunk is narrower
      tail = t >= n // lpt * span
      w = ml.where(tail, t - n // lpt * span, w)
      width = ml.where(tail, n % lpt, lpt)
    i = t // span * lpt + w % width
    pair = w // width
    h, b = pair % heads, pair // heads
  else:
    i, h, b = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  if reverse:
    i = n - 1 - i
  return i, h, b


@ml.inline
def load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq):
  """Query block j of head h (and its dO, logsumexp and delta) into SMEM, by TMA."""
  ml.copy(q.at[b, ml.ds(j * bq, bq), h, :], q_s)
  ml.copy(do.at[b, ml.ds(j * bq, bq), h, :], do_s)
  ml.copy(lse.at[b, h, ml.ds(j * bq, bq)], lse_s)
  ml.copy(delta.at[b, h, ml.ds(j * bq, bq)], delta_s)


@ml.inline
def transposed_probabilities(k_s, v_s, q_s, do_s, lse_s, i, j, bq, bkv, c, causal):
  """p = softmax probabilities with keys along the rows (recomputed from the logsumexp), and
  dp = v @ do.T, whose dot runs while p is computed."""
  s = ml.dot(k_s, q_s.T)
  dp = ml.dot(v_s, do_s.T)
  return probabilities(s, lse_s, i, j, bq, bkv, c, causal), dp


@ml.inline
def causal_mask(s, i, j, bq, bkv):
  """The transposed scores s of key block i and query block j with the keys past each query at -inf."""
  rows = i * bkv + ml.arange(bkv)[:, None]
  cols = j * bq + ml.arange(bq)[None, :]
  return ml.where(cols >= rows, s, NEG_INF)


@ml.inline
def probabilities(s, lse_s, i, j, bq, bkv, c, causal):
  """p from the transposed scores s (keys along the rows) and the logsumexp; with `causal`, the keys past each
  query masked where the block crosses the diagonal (`causal="diag"`: every block does, no run-time test)."""
  if causal == "diag":
    s = causal_mask(s, i, j, bq, bkv)
  elif causal:
    if j * bq < (i + 1) * bkv:
      s = causal_mask(s, i, j, bq, bkv)
  # (not ml.fma(s, c, -lse2[None, :]): with the fused form ptxas spills more in the fused backward, 52 against 20
  # bytes at head_dim 128 and 68 against 56 at 64, by the deviceless report; fifty-eighth session)
  return ml.exp2(s * c - (lse_s[...] * LOG2E)[None, :], approx=True)


@ml.inline
def key_block(q, k, v, b, i, hk, bq, bkv, causal):
  """The backward's key block i of K/V head hk in SMEM, the query blocks' buffers, and which query blocks see it."""
  d = q.shape[3]
  k_s, v_s = ml.smem((bkv, d)), ml.smem((bkv, d))
  ml.copy(k.at[b, ml.ds(i * bkv, bkv), hk, :], k_s)
  ml.copy(v.at[b, ml.ds(i * bkv, bkv), hk, :], v_s)
  q_s, do_s, lse_s, delta_s = ml.smem((bq, d)), ml.smem((bq, d)), ml.smem((bq,)), ml.smem((bq,))
  first = 0
  if causal:
    first = i * bkv // bq                    # query blocks before it see none of these keys
  count = ml.cdiv(q.shape[1], bq) - first     # the last query block may be partial
  return k_s, v_s, q_s, do_s, lse_s, delta_s, first, count


@ml.inline
def store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale):
  dk_s = ml.smem((bkv, d))
  dv_s = ml.smem((bkv, d))
  dk_s[...] = (dk_acc * scale).astype(dk.dtype)
  dv_s[...] = dv_acc.astype(dv.dtype)
  ml.copy(dk_s, dk.at[b, ml.ds(i * bkv, bkv), hk, :])
  ml.copy(dv_s, dv.at[b, ml.ds(i * bkv, bkv), hk, :])


def dkv_kernel(q, k, v, do, lse, delta, dk, dv, *, bq: ml.constexpr, bkv: ml.constexpr,
               stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
               lpt: ml.constexpr = 0):
  """dK and dV of `bkv` keys of one K/V head, summed over its query heads and query blocks.

  With s = k @ q.T (transposed scores, keys along the rows): p = 2 ** (s * c - lse * log2(e)),
  dv += p @ do, dp = v @ do.T, ds = p * (dp - delta), dk += ds @ q.
  """
  i, hk, b = block_ids(ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0], lpt, False)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s, v_s, q_s, do_s, lse_s, delta_s, first, count = key_block(q, k, v, b, i, hk, bq, bkv, causal)
  c = scale * LOG2E
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  for t in ml.range(g * count, stages=stages, warp_specialize=ws):
    h = hk * g + t // count
    j = first + t % count
    load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq)
    p, dp = transposed_probabilities(k_s, v_s, q_s, do_s, lse_s, i, j, bq, bkv, c, causal)
    dv_acc = ml.dot(p.astype(q.dtype), do_s, dv_acc)      # runs while ds is computed
    ds = p * (dp - delta_s[...][None, :])
    dk_acc = ml.dot(ds.astype(q.dtype), q_s, dk_acc)
  store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale)


def _dq_out(q, k, v, do, lse, delta, **_):
  return jax.ShapeDtypeStruct(q.shape, q.dtype)


def dq_kernel(q, k, v, do, lse, delta, dq, *, bq: ml.constexpr, bkv: ml.constexpr,
              stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
              lpt: ml.constexpr = 0):
  """dQ of `bq` query rows of one head: dq += (p * (do @ v.T - delta)) @ k over the key blocks."""
  # causal: the longest rows (the last blocks) first, a shorter tail
  i, h, b = block_ids(ml.cdiv(q.shape[1], bq), q.shape[2], q.shape[0], lpt, causal)
  hk = h // (q.shape[2] // k.shape[2])
  d = q.shape[3]
  q_s = ml.smem((bq, d))
  do_s = ml.smem((bq, d))
  ml.copy(q.at[b, ml.ds(i * bq, bq), h, :], q_s)
  ml.copy(do.at[b, ml.ds(i * bq, bq), h, :], do_s)
  k_s = ml.smem((bkv, d))
  v_s = ml.smem((bkv, d))
  c = scale * LOG2E
  inside = i * bq + ml.arange(bq) < q.shape[1]     # the last query block may be partial
  lse2 = lse.at[b, h, ml.ds(i * bq, bq)].load(mask=inside, other=0.0) * LOG2E
  delta_i = delta.at[b, h, ml.ds(i * bq, bq)].load(mask=inside, other=0.0)
  dq_acc = ml.zeros((bq, d), jnp.float32)
  n = kv_blocks(q, k, i, bq, bkv, causal)
  for j in ml.range(n, stages=stages, warp_specialize=ws):
    ml.copy(k.at[b, ml.ds(j * bkv, bkv), hk, :], k_s)
    ml.copy(v.at[b, ml.ds(j * bkv, bkv), hk, :], v_s)
    s = ml.dot(q_s, k_s.T)
    dp = ml.dot(do_s, v_s.T)                 # runs while p is computed
    if causal:
      if (j + 1) * bkv > i * bq:
        rows = i * bq + ml.arange(bq)[:, None]
        cols = j * bkv + ml.arange(bkv)[None, :]
        s = ml.where(cols <= rows, s, NEG_INF)
    p = ml.exp2(ml.fma(s, c, -lse2[:, None]), approx=True)
    ds = p * (dp - delta_i[:, None])
    dq_acc = ml.dot(ds.astype(q.dtype), k_s, dq_acc)
  dq_s = ml.smem((bq, d))
  dq_s[...] = (dq_acc * scale).astype(dq.dtype)
  ml.copy(dq_s, dq.at[b, ml.ds(i * bq, bq), h, :])


def dq_transposed(head_dim: int) -> bool:
  """Whether the fused backward splits dQ's head_dim between the warpgroups (and accumulates
  dQ transposed, (batch, heads, head_dim, seq)) rather than its query rows."""
  return head_dim >= 128


def _fused_out(q, k, v, do, lse, delta, *, bq, **_):
  b, s, h, d = q.shape
  # transposed, dQ's TMA reductions add whole (8, 32) tiles along seq: padded to whole query blocks
  dq_shape = (b, h, d, ml.cdiv(s, bq) * bq) if dq_transposed(d) else q.shape
  return _dkv_out(q, k, v, do, lse, delta) + (jax.ShapeDtypeStruct(dq_shape, jnp.float32),)


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
def dkv_dq_step(q, do, lse, delta, k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc, dk_acc, dv_acc,
                b, h, i, j, bq, bkv, c, masked, dq_first, p16_ds=False):
  """dkv_dq_kernel's step: query block j of head h against the CTA's keys; dK and dV accumulated
  in registers, this block's share of dQ added into dq_acc in GMEM (`p16_ds`: ds from the 16-bit p)."""
  d = q.shape[3]
  load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq)
  p, dp = transposed_probabilities(k_s, v_s, q_s, do_s, lse_s, i, j, bq, bkv, c, masked)
  p16 = p.astype(q.dtype)
  dv_acc = ml.dot(p16, do_s, dv_acc)
  ds = ((p16 if p16_ds else p) * (dp - delta_s[...][None, :])).astype(q.dtype)
  if not dq_first:
    dk_acc = ml.dot(ds, q_s, dk_acc)
  ds_s[...] = ds
  dq = dq_product(k_s, ds_s, d)
  if dq_first:
    dk_acc = ml.dot(ds, q_s, dk_acc)
  dq_s[...] = dq
  ml.copy(dq_s, dq_target(dq_acc, b, h, j, bq, d), reduce="add")
  if dq_first:
    dk_acc = dk_acc * 1.0                  # a read: waits for dK's product before the step ends
  return dk_acc, dv_acc


def dkv_dq_kernel(q, k, v, do, lse, delta, dk, dv, dq_acc, *, bq: ml.constexpr, bkv: ml.constexpr,
                  stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr, ws: ml.constexpr = False,
                  dq_first: ml.constexpr = False, split_mask: ml.constexpr = False, lpt: ml.constexpr = 0,
                  p16_ds: ml.constexpr = False):
  """dkv_kernel that also adds this key block's share of dQ (unscaled, float32) into dq_acc
  with a TMA reduction per step: the backward in one pass over the scores (five tensor-core
  products per block pair, not seven).

  ds (keys along the rows, as computed) goes through SMEM once. With head_dim >= 128 the
  share is dq.T = k.T @ ds, head_dim split between the warpgroups, into dq_acc (batch, heads,
  head_dim, seq); otherwise dq = ds.T @ k, query rows split (bq a multiple of 128), into
  dq_acc (batch, seq, heads, head_dim).

  `dq_first`: issue dQ's product before dK's, store dQ while dK's runs, and wait for dK's at the
  end of the step (a read of its accumulator). Fewer registers live at once: at head_dim 64
  without the mask ptxas spills 16 bytes a thread rather than 236.
  `split_mask` (causal): the query blocks on the diagonal, which need the mask, in a loop of their own;
  the others in a second loop without the mask's code (not with `ws`: one warp-specialised loop a kernel).
  Measured on the H200 (benchmarks/attn_bwd_order.py, seventeenth session): both together
  301 against 276 TFLOP/s (head_dim 64, causal) and 340 against 298 (128, causal); dq_first alone
  349 against 285 (64, no mask) and slower at 128 without the mask (403 against 443).
  """
  i, hk, b = block_ids(ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0], lpt, False)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s, v_s, q_s, do_s, lse_s, delta_s, first, count = key_block(q, k, v, b, i, hk, bq, bkv, causal)
  ds_s = ml.smem((bkv, bq))
  dq_s = ml.smem((d, bq) if d >= 128 else (bq, d), jnp.float32)     # as dq_transposed(d)
  bufs = (k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc)
  c = scale * LOG2E
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  if causal and split_mask:
    diag = ml.minimum(((i + 1) * bkv + bq - 1) // bq - first, count)     # blocks the diagonal crosses
    for t in ml.range(g * diag, stages=stages, warp_specialize=ws):
      dk_acc, dv_acc = dkv_dq_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // diag, i,
                                   first + t % diag, bq, bkv, c, "diag", dq_first, p16_ds)
    rest = count - diag
    for t in ml.range(g * rest, stages=stages, warp_specialize=ws):
      dk_acc, dv_acc = dkv_dq_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // rest, i,
                                   first + diag + t % rest, bq, bkv, c, False, dq_first, p16_ds)
  else:
    for t in ml.range(g * count, stages=stages, warp_specialize=ws):
      dk_acc, dv_acc = dkv_dq_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // count, i,
                                   first + t % count, bq, bkv, c, causal, dq_first, p16_ds)
  store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale)


def _dkv_block(q, *_, bkv, **__):
  return 128 if bkv == 64 else 256       # the key rows split between warpgroups, 64 each


attention_dkv = mg.mgpu_kernel(dkv_kernel, out_shape=_dkv_out, grid=_dkv_grid, block=_dkv_block)
attention_dq = mg.mgpu_kernel(dq_kernel, out_shape=_dq_out, grid=_dq_grid, block=256)
attention_bwd = mg.mgpu_kernel(dkv_dq_kernel, out_shape=_fused_out, grid=_dkv_grid, block=_dkv_block)


# ---------------------------------------------------------------- dQ deferred
@ml.inline
def deferred_step(q, do, lse, delta, k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc, dk_acc, dv_acc,
                  b, h, i, j, hp, jp, bq, bkv, c, masked, p16_ds, dp_late=False):
  """deferred_kernel's step, query block j of head h: first the previous block's (hp, jp) dQ product from the ds
  in SMEM, then the scores' two products behind it on the tensor cores; dQ stored and sent by a TMA reduction
  while those run (its registers free before p's); p, dV's product, ds into SMEM for the next step, dK's product."""
  d = q.shape[3]
  load_query_block(q, do, lse, delta, q_s, do_s, lse_s, delta_s, b, h, j, bq)
  dq = dq_product(k_s, ds_s, d)
  s = ml.dot(k_s, q_s.T)
  if not dp_late:
    dp = ml.dot(v_s, do_s.T)
  dq_s[...] = dq
  ml.copy(dq_s, dq_target(dq_acc, b, hp, jp, bq, d), reduce="add")
  if dp_late:
    dp = ml.dot(v_s, do_s.T)
  p = probabilities(s, lse_s, i, j, bq, bkv, c, masked)
  p16 = p.astype(q.dtype)
  dv_acc = ml.dot(p16, do_s, dv_acc)
  ds = ((p16 if p16_ds else p) * (dp - delta_s[...][None, :])).astype(q.dtype)
  ds_s[...] = ds
  dk_acc = ml.dot(ds, q_s, dk_acc)
  return dk_acc, dv_acc


@ml.inline
def send_last(k_s, ds_s, dq_acc, b, h, j, bq, d):
  """The last block's dQ, added by register atomics (dq_s is the loop's, staged); rows past the end dropped (the
  transposed dq_acc is padded to whole query blocks)."""
  if d >= 128:
    ml.atomic_add(dq_target(dq_acc, b, h, j, bq, d), dq_product(k_s, ds_s, d))
  else:
    ml.atomic_add(dq_acc.at[b, j * bq + ml.arange(bq), h], dq_product(k_s, ds_s, d))


def deferred_kernel(q, k, v, do, lse, delta, dk, dv, dq_acc, *, bq: ml.constexpr, bkv: ml.constexpr,
                    stages: ml.constexpr, causal: ml.constexpr, scale: ml.constexpr, lpt: ml.constexpr = 0,
                    p16_ds: ml.constexpr = False, dp_late: ml.constexpr = False, split_mask: ml.constexpr = True):
  """dkv_dq_kernel (with the mask and `split_mask`, the diagonal blocks in a loop of their own; without `split_mask`
  one loop that masks the blocks the diagonal crosses, a run-time test) with each step's dQ product issued
  at the start of the next step: the chain dkv_dq_kernel ends each step with (ds into SMEM, a block barrier, dQ's
  product, a wait, dQ into SMEM, a barrier, the TMA reduction) runs under the next step's score products. The
  first step sends a zero product (ds_s starts zeroed), the last block's dQ is added after the loop by register
  atomics. Measured on an H100 (fiftieth session, benchmarks/attn_bwd_deferred.py, kernel time, seq 4096):
  372 against 304 TFLOP/s at head_dim 64 without the mask, 329 against 313 with it; at 128 it loses (428 / 375
  against 457 / 406): the default at head_dim 64 only."""
  i, hk, b = block_ids(ml.cdiv(k.shape[1], bkv), k.shape[2], k.shape[0], lpt, False)
  g = q.shape[2] // k.shape[2]
  d = q.shape[3]
  k_s, v_s, q_s, do_s, lse_s, delta_s, first, count = key_block(q, k, v, b, i, hk, bq, bkv, causal)
  ds_s = ml.smem((bkv, bq))
  dq_s = ml.smem((d, bq) if d >= 128 else (bq, d), jnp.float32)
  bufs = (k_s, v_s, q_s, do_s, lse_s, delta_s, ds_s, dq_s, dq_acc)
  c = scale * LOG2E
  dk_acc = ml.zeros((bkv, d), jnp.float32)
  dv_acc = ml.zeros((bkv, d), jnp.float32)
  ds_s[...] = ml.zeros((bkv, bq), q.dtype)      # the first step's "previous" product adds zeros
  if causal and split_mask:
    diag = ml.minimum(((i + 1) * bkv + bq - 1) // bq - first, count)     # blocks the diagonal crosses
    for t in ml.range(g * diag, stages=stages):
      tp = ml.maximum(t - 1, 0)
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // diag, i,
                                     first + t % diag, hk * g + tp // diag, first + tp % diag, bq, bkv, c, "diag",
                                     p16_ds, dp_late)
    rest = count - diag
    for t in ml.range(g * rest, stages=stages):
      tp = ml.maximum(t - 1, 0)
      # the first step sends the diagonal loop's last block
      hp = ml.where(t == 0, hk * g + g - 1, hk * g + tp // ml.maximum(rest, 1))
      jp = ml.where(t == 0, first + diag - 1, first + diag + tp % ml.maximum(rest, 1))
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // rest, i,
                                     first + diag + t % rest, hp, jp, bq, bkv, c, False, p16_ds, dp_late)
    last = ml.where(rest > 0, first + count - 1, first + diag - 1)
    send_last(k_s, ds_s, dq_acc, b, hk * g + g - 1, last, bq, d)
  else:
    for t in ml.range(g * count, stages=stages):
      tp = ml.maximum(t - 1, 0)
      dk_acc, dv_acc = deferred_step(q, do, lse, delta, *bufs, dk_acc, dv_acc, b, hk * g + t // count, i,
                                     first + t % count, hk * g + tp // count, first + tp % count, bq, bkv, c,
                                     causal, p16_ds, dp_late)
    send_last(k_s, ds_s, dq_acc, b, hk * g + g - 1, first + count - 1, bq, d)
  store_dkv(dk_acc, dv_acc, dk, dv, b, i, hk, bkv, d, scale)


attention_bwd_deferred = mg.mgpu_kernel(deferred_kernel, out_shape=_fused_out, grid=_dkv_grid, block=_dkv_block)


# the backward kernels' specialisations that `python -m mgpu_dsl check examples` builds (examples/attention.py's
# shapes: q (1, 1024, 4, 128), k and v (1, 1024, 2, 128); at head_dim 64 the default deferred kernel)
_Q = jax.ShapeDtypeStruct((1, 1024, 4, 128), jnp.float16)
_KV = jax.ShapeDtypeStruct((1, 1024, 2, 128), jnp.float16)
_LSE = jax.ShapeDtypeStruct((1, 4, 1024), jnp.float32)
_Q64 = jax.ShapeDtypeStruct((1, 1024, 4, 64), jnp.float16)
_KV64 = jax.ShapeDtypeStruct((1, 1024, 2, 64), jnp.float16)
mg.check_specs(attention_dkv, _Q, _KV, _KV, _Q, _LSE, _LSE, bq=64, bkv=128, stages=2, causal=True, scale=0.125)
mg.check_specs(attention_dq, _Q, _KV, _KV, _Q, _LSE, _LSE, bq=128, bkv=128, stages=2, causal=False, scale=0.125)
mg.check_specs(attention_bwd, _Q, _KV, _KV, _Q, _LSE, _LSE, bq=64, bkv=128, stages=2, causal=True, scale=0.125)
mg.check_specs(attention_bwd_deferred, _Q64, _KV64, _KV64, _Q64, _LSE, _LSE, bq=128, bkv=128, stages=2, causal=False,
               scale=0.125, p16_ds=True, dp_late=True)
