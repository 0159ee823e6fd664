"""Decode attention over a paged KV cache, in mgpu_dsl.

    python examples/paged_attention.py    # checks against a jnp reference on a GPU; interpret mode elsewhere

One query token per sequence attends to that sequence's cached keys and values, which live in
fixed-size pages scattered through a shared pool: `block_tables[b, i]` is the pool page of the
sequence's i-th page, `lengths[b]` its number of tokens (as Pallas's `paged_attention`: q
(batch, heads, head_dim), k_pages and v_pages (kv_heads, pages, page_size, head_dim)).

Each program handles one (sequence, kv head, split of the sequence's pages) and every query
head that shares the kv head (grouped-query attention reads each page once): it reads the
page table entry at run time and TMA-copies that page of K and V, several pages ahead
(`ml.range(..., stages=)` pipelines copies whose windows come from the page table), and keeps,
per query head, a running softmax per token slot of the page (slot t sees tokens t, t + page,
...), so the loop needs no reduction across warps; the heads' states are a list carried
through the loop. The slots and then the splits are combined at the end (flash-decoding).

The tensor-core path (grouped-query attention: the query heads of a kv head are the rows of one
tile) hands the (sequence, split) work items to programs longest first: every program reads
the lengths and computes the order itself (`_longest_first`), so no long item starts last
and runs on alone; then a few splits suffice (`default_splits`).
"""
import functools
import numbers

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

MASK = -1e30
LOG2E = 1.4426950408889634


def _parts(q, k_pages, v_pages, block_tables, lengths, *, splits, **meta):
  b, h, d = q.shape
  return (jax.ShapeDtypeStruct((b, h, splits, d), jnp.float32),
          jax.ShapeDtypeStruct((b, h, splits), jnp.float32),
          jax.ShapeDtypeStruct((b, h, splits), jnp.float32))


def _grid(q, k_pages, v_pages, block_tables, lengths, *, splits, **meta):
  return (q.shape[0] * k_pages.shape[0], splits)


@ml.inline
def _step(state, qv, k, v, valid):
  """One page for one query head: the running (max, sum, output) of each token slot."""
  m, l, acc = state
  logits = ml.where(valid, ml.sum(k * qv[None, :], axis=1), MASK)
  m_new = ml.maximum(m, logits)
  alpha = ml.exp(m - m_new)
  p = ml.exp(logits - m_new)
  return m_new, l * alpha + p, acc * alpha[:, None] + p[:, None] * v


@mg.mgpu_kernel(out_shape=_parts, grid=_grid)
def paged_attention_parts(q, k_pages, v_pages, block_tables, lengths, o_part, m_part, l_part, *,
                          splits: ml.constexpr, stages: ml.constexpr = 4):
  """Per (sequence, kv head, split): for each query head sharing that kv head (grouped-query
  attention reads each page once for all of them), the split's unnormalised output, its max
  logit and its sum."""
  heads, kv_heads, page, dim = q.shape[1], k_pages.shape[0], k_pages.shape[2], q.shape[2]
  group = heads // kv_heads
  bk = ml.program_id(0)
  s = ml.program_id(1)
  b = bk // kv_heads
  kv_head = bk % kv_heads
  per_split = block_tables.shape[1] // splits
  length = lengths[b]
  first = s * per_split
  count = ml.minimum(ml.maximum(ml.cdiv(length, page) - first, 0), per_split)
  qs = [q.at[b, kv_head * group + j][...].astype(jnp.float32) * (1.0 / dim ** 0.5)
        for j in ml.static_range(group)]
  k_s = ml.smem((page, dim))
  v_s = ml.smem((page, dim))
  staged = per_split % 4 == 0                            # TMA moves whole 16-byte rows
  if staged:   # the split's page-table entries in SMEM: one read of GMEM, not one a step
    table = ml.smem((per_split,), jnp.int32)
    ml.copy(block_tables.at[b, ml.ds(first, per_split)], table)
  state = [(ml.full((page,), MASK, jnp.float32), ml.zeros((page,), jnp.float32),
            ml.zeros((page, dim), jnp.float32)) for j in ml.static_range(group)]
  for i in ml.range(count, stages=stages):
    pool_page = table[i] if staged else block_tables[b, first + i]
    ml.copy(k_pages.at[kv_head, pool_page], k_s)
    ml.copy(v_pages.at[kv_head, pool_page], v_s)
    valid = (first + i) * page + ml.arange(page) < length
    k = k_s[...].astype(jnp.float32)
    v = ml.where(valid[:, None], v_s[...].astype(jnp.float32), 0.0)   # slots past the end may hold anything
    state = [_step(state[j], qs[j], k, v, valid) for j in ml.static_range(group)]
  for j in ml.static_range(group):                      # combine each head's token slots
    m, l, acc = state[j]
    top = ml.max(m)
    w = ml.exp(m - top)
    h = kv_head * group + j
    o_part.at[b, h, s][...] = ml.sum(acc * w[:, None], axis=0)
    m_part[b, h, s] = top
    l_part[b, h, s] = ml.sum(l * w)


ROWS = 64   # a tensor-core tile's rows: the query heads of one kv head, zero-padded


@ml.inline
def _longest_first(lengths, r, page, per_split, splits):
  """The (sequence, split) of the r-th work item, longest first.

  A sequence of `pages` pages splits into full items of `per_split` pages, at most one partial
  item and empty items. Programs take them in this order: the full items (sequence by
  sequence), the partial ones by size (largest first), then the empty ones (which exit at
  once). Lengths are random at run time, so with the natural order the last programs
  the GPU starts may be long ones that run on alone; largest first, the tail is short.
  Every program computes the same order: lane b of the vectors is sequence b, and one
  unrolled pass over the sequences counts, for each b, the full and empty items before its
  own and the partial items larger than its own."""
  batch = lengths.shape[0]
  lanes = ml.cdiv(batch, 8) * 8                          # a vector of whole 8-element groups
  seq = ml.arange(lanes)
  real = seq < batch
  pages = ml.cdiv(lengths.at[ml.ds(0, lanes)].load(mask=real, other=0), page)
  full = ml.minimum(pages // per_split, splits)
  rest = pages - full * per_split
  partial = rest > 0
  empty = ml.where(real, splits - full - ml.where(partial, 1, 0), 0)
  full_before = ml.zeros((lanes,), jnp.int32)            # full items of the sequences before b
  empty_before = ml.zeros((lanes,), jnp.int32)
  larger = ml.zeros((lanes,), jnp.int32)                 # partial items ranked before b's
  n_full = 0
  n_partial = 0
  for o in ml.static_range(batch):
    o_pages = ml.cdiv(lengths[o], page)
    o_full = ml.minimum(o_pages // per_split, splits)
    o_rest = o_pages - o_full * per_split
    o_partial = ml.where(o_rest > 0, 1, 0)
    before = seq > o
    full_before = full_before + ml.where(before, o_full, 0)
    empty_before = empty_before + ml.where(before, splits - o_full - o_partial, 0)
    larger = larger + ml.where((o_rest > rest) | ((o_rest == rest) & before), o_partial, 0)
    n_full = n_full + o_full
    n_partial = n_partial + o_partial
  r_empty = r - n_full - n_partial
  pick = ml.where(r < n_full, (full_before <= r) & (r < full_before + full),
                  ml.where(r < n_full + n_partial, partial & (larger == r - n_full),
                           (empty_before <= r_empty) & (r_empty < empty_before + empty)))
  split = ml.where(r < n_full, r - full_before,
                   ml.where(r < n_full + n_partial, full, full + ml.where(partial, 1, 0) + r_empty - empty_before))
  pick = pick & real
  return ml.sum(ml.where(pick, seq, 0)), ml.sum(ml.where(pick, split, 0))


def _parts_mma(q, k_pages, v_pages, block_tables, lengths, *, splits, group, **meta):
  rows, d = q.shape[0] * k_pages.shape[0] * group, q.shape[-1]     # a row per (sequence, query head)
  return (jax.ShapeDtypeStruct((splits, rows, d), jnp.float32),
          jax.ShapeDtypeStruct((splits, rows), jnp.float32),
          jax.ShapeDtypeStruct((splits, rows), jnp.float32))


def _grid_mma(q, k_pages, *rest, splits, longest_first, **meta):
  if longest_first:                                      # kv heads, then work items
    return (k_pages.shape[0], q.shape[0] * splits)
  return (q.shape[0] * k_pages.shape[0], splits)


@mg.mgpu_kernel(out_shape=_parts_mma, grid=_grid_mma)
def paged_attention_parts_mma(q, k_pages, v_pages, block_tables, lengths, o_part, m_part, l_part, *,
                              splits: ml.constexpr, group: ml.constexpr, stages: ml.constexpr = 2,
                              tokens: ml.constexpr = 64, q_regs: ml.constexpr = False,
                              longest_first: ml.constexpr = True):
  """The tensor-core variant, for grouped-query attention: per (sequence, kv head, split), the
  query heads sharing the kv head are the rows of one 64-row tile, so each step (`tokens`, a
  multiple of 64: one page or several) is one `q @ k.T` and one `p @ v` on the tensor cores,
  and the online softmax runs along the rows as in flash attention.

  The group's rows of q (batch, heads, head_dim) come in by a masked load, the tile's other
  rows as zeros. `q_regs` keeps the query tile in registers, so its SMEM goes to the stages.
  `longest_first` hands the (sequence, split) items to programs largest first (the lengths
  are read at run time), not in the order of the grid."""
  kv_heads, page, dim = k_pages.shape[0], k_pages.shape[2], k_pages.shape[3]
  block = tokens // page                                 # pages a step: `tokens`, the first dot's n
  per_split = block_tables.shape[1] // splits
  if longest_first:
    kv_head = ml.program_id(0)
    b, s = _longest_first(lengths, ml.program_id(1), page, per_split, splits)
    bk = b * kv_heads + kv_head
  else:
    bk = ml.program_id(0)
    s = ml.program_id(1)
    b = bk // kv_heads
    kv_head = bk % kv_heads
  first = s * per_split
  # First what needs no run-time value: the page-table entries' copy and q's load are in flight
  # while the sequence's length is read, and the first pages' loads wait only for the table.
  staged = per_split % 4 == 0                            # TMA moves whole 16-byte rows
  if staged:   # the split's page-table entries in SMEM: one read of GMEM, not one per page a step
    table = ml.smem((per_split,), jnp.int32)
    ml.copy(block_tables.at[b, ml.ds(first, per_split)], table)
  k_s = ml.smem((tokens, dim))
  v_s = ml.smem((tokens, dim))
  rows = ml.arange(ROWS) < group                         # the group's rows of q, zeros below them
  q_op = q.at[b, ml.ds(kv_head * group, ROWS)].load(mask=rows[:, None], other=0.0)
  if not q_regs:                                         # the dot reads it from SMEM
    q_s = ml.smem((ROWS, dim))
    q_s[...] = q_op
    q_op = q_s
  length = lengths[b]
  last = ml.cdiv(length, page) - 1                       # the sequence's last page
  count = ml.cdiv(ml.minimum(ml.maximum(last + 1 - first, 0), per_split), block)
  scale = LOG2E / dim ** 0.5                            # the softmax in base 2
  m = ml.full((ROWS,), MASK, jnp.float32)
  l = ml.zeros((ROWS,), jnp.float32)
  acc = ml.zeros((ROWS, dim), jnp.float32)
  for i in ml.range(count, stages=stages):
    for j in ml.static_range(block):                     # pages past the last load it again (masked)
      slot = ml.minimum(i * block + j, last - first)
      pool_page = table[slot] if staged else block_tables[b, first + slot]
      ml.copy(k_pages.at[kv_head, pool_page], k_s.at[ml.ds(j * page, page)])
      ml.copy(v_pages.at[kv_head, pool_page], v_s.at[ml.ds(j * page, page)])
    valid = (first + i * block) * page + ml.arange(tokens)[None, :] < ml.minimum(length, (first + per_split) * page)
    logits = ml.where(valid, ml.dot(q_op, k_s.T) * scale, MASK)     # in base 2: scale holds log2(e)
    m_new = ml.maximum(m, ml.max(logits, axis=1))
    alpha = ml.exp2(m - m_new, approx=True)
    p = ml.exp2(logits - m_new[:, None], approx=True)
    l = l * alpha + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(k_pages.dtype), v_s, acc * alpha[:, None])   # cache slots past the end get p = 0
    m = m_new
  # The tile's first `group` rows are the query heads: masked stores through 64-row windows
  # that run past the end of the group's rows write just those.
  head = ml.arange(ROWS) < group
  rows = ml.ds(bk * group, ROWS)                         # (sequence, query head) rows of this kv head
  o_part.at[s, rows].store(acc, mask=ml.broadcast_to(head[:, None], (ROWS, dim)))
  m_part.at[s, rows].store(m * (1.0 / LOG2E), mask=head)
  l_part.at[s, rows].store(l, mask=head)


def combine(o_part, m_part, l_part, dtype):
  """Flash-decoding's last step: the splits' outputs weighted by their share of the softmax."""
  top = m_part.max(axis=-1, keepdims=True)
  w = jnp.exp(m_part - top)
  return ((o_part * w[..., None]).sum(-2) / (l_part * w).sum(-1)[..., None]).astype(dtype)


COMBINE_ROWS = 16    # (sequence, head) rows a program of combine_splits takes


@mg.mgpu_kernel(out_shape=lambda o_part, m_part, l_part, *, dtype: jax.ShapeDtypeStruct(o_part.shape[1:], dtype),
                grid=lambda o_part, m_part, l_part, *, dtype: (ml.cdiv(o_part.shape[1], COMBINE_ROWS),))
def combine_splits(o_part, m_part, l_part, out, *, dtype: ml.constexpr):
  """combine() as one kernel, on (splits, rows, d) partial outputs and (splits, rows) maxima and
  sums: COMBINE_ROWS rows a program, every split's tile loaded at once."""
  win = ml.ds(ml.program_id(0) * COMBINE_ROWS, COMBINE_ROWS)
  splits = o_part.shape[0]
  ms = [m_part.at[s, win][...] for s in ml.static_range(splits)]
  os = [o_part.at[s, win][...] for s in ml.static_range(splits)]
  top = ms[0]
  for s in ml.static_range(1, splits):
    top = ml.maximum(top, ms[s])
  w = ml.exp(ms[0] - top)
  acc = os[0] * w[:, None]
  den = l_part.at[0, win][...] * w
  for s in ml.static_range(1, splits):
    w = ml.exp(ms[s] - top)
    acc = acc + os[s] * w[:, None]
    den = den + l_part.at[s, win][...] * w
  out.at[win][...] = (acc / den[:, None]).astype(out.dtype)


LONGEST_FIRST_MAX_BATCH = 256   # past it, programs take items in the grid's order (each scans every length)


def default_splits(batch, kv_heads, pages_per_sequence, per_sm=2):
  """How many parts the tensor-core path splits each sequence's pages into: the fewest (a power of
  two dividing the page table's width) that give the GPU about one and a half times as many
  (sequence, kv head, split) work items as it runs at once (`per_sm` an SM). Longest first, the
  items balance over the SMs; more splits than that only add partial outputs to combine. On the
  H200's 132 SMs: 2 for 32 sequences of 8 kv heads (docs/benchmarks.md, seventh session)."""
  splits = 1
  while (batch * kv_heads * splits * 2 < 3 * per_sm * mg.num_sms()
         and pages_per_sequence % (2 * splits) == 0):
    splits *= 2
  return splits


@functools.partial(jax.jit, static_argnames=("splits", "stages", "tensor_cores", "tokens", "q_regs",
                                             "fused_combine", "longest_first", "interpret"))
def paged_attention(q, k_pages, v_pages, block_tables, lengths, *, splits=None, stages=None, tensor_cores=None,
                    tokens=64, q_regs=True, fused_combine=True, longest_first=None, interpret=False):
  """Decode attention: q (batch, heads, head_dim) over pages (kv_heads, pages, page_size, head_dim).

  `tensor_cores` (default: when several query heads share a kv head, in float16 or bfloat16 with a
  head_dim of a multiple of 64) puts each kv head's query heads in one tensor-core tile; otherwise each token slot's softmax runs on the CUDA cores.
  Cache slots past a sequence's length are multiplied by zero, so they must hold finite values
  on the tensor-core path (a freshly allocated cache may not: zero it). `fused_combine`
  (tensor-core path): the splits are
  combined by one mgpu_dsl kernel (combine_splits), not by XLA's ops (three kernels). The
  tensor-core defaults (`stages=3`, `q_regs=True`) are the H200's best for the grouped-query
  shape of benchmarks/paged_attention.py (docs/logs/paged_gqa_session4b.log). `splits`
  (default: default_splits on the tensor-core path, 8 on the other) parts of each sequence's
  pages run as separate programs, combined at the end. `longest_first` (default: up to
  LONGEST_FIRST_MAX_BATCH sequences) orders the tensor-core path's work items by size. A length
  past the table's capacity (pages_per_sequence * page_size tokens) counts as the capacity."""
  if q.ndim != 3 or k_pages.ndim != 4 or v_pages.shape != k_pages.shape or k_pages.shape[3] != q.shape[2]:
    raise ValueError(f"paged_attention needs q (batch, heads, head_dim) and k_pages, v_pages (kv_heads, pages,"
                     f" page_size, head_dim), got {q.shape}, {k_pages.shape} and {v_pages.shape}")
  b, heads, d = q.shape
  kv_heads = k_pages.shape[0]
  if kv_heads == 0 or heads % kv_heads:
    raise ValueError(f"paged_attention: kv_heads ({kv_heads}) must divide heads ({heads})")
  if block_tables.ndim != 2 or block_tables.shape[0] != b or lengths.shape != (b,):
    raise ValueError(f"paged_attention needs block_tables (batch, pages_per_sequence) and lengths (batch,) for"
                     f" batch {b}, got {block_tables.shape} and {lengths.shape}")
  group = heads // kv_heads
  pages = block_tables.shape[1]
  page = k_pages.shape[2]
  for name, t in (("block_tables", block_tables), ("lengths", lengths)):
    if jnp.dtype(t.dtype) != jnp.int32:
      raise ValueError(f"paged_attention: {name} must be int32, got {t.dtype} (convert: {name}.astype(jnp.int32))")
  # a length past the table's pages_per_sequence * page_size tokens: the tokens it holds (both paths)
  lengths = jnp.minimum(lengths, pages * page)
  if splits is not None and (not isinstance(splits, numbers.Integral) or isinstance(splits, bool)
                             or splits < 1 or pages % splits):
    raise ValueError(f"paged_attention: splits ({splits}) must be a positive int dividing the pages per"
                     f" sequence ({pages})")
  if splits is not None:
    splits = int(splits)
  # ml.dot takes 16-bit operands from registers (p) and a K (head_dim) of a multiple of 128 bytes
  mma_ok = jnp.dtype(k_pages.dtype) in (jnp.float16, jnp.bfloat16) and d % 64 == 0
  if tensor_cores is None:
    tensor_cores = group > 1 and mma_ok
  if tensor_cores and not mma_ok:
    raise ValueError(f"paged_attention: the tensor-core path takes float16 or bfloat16 pages with a head_dim of a"
                     f" multiple of 64, got {jnp.dtype(k_pages.dtype).name} and head_dim {d}: pass"
                     f" tensor_cores=False")
  if tensor_cores and group > ROWS:
    raise ValueError(f"paged_attention: the tensor-core path takes at most {ROWS} query heads a kv head, got"
                     f" {group} ({heads} heads, {kv_heads} kv heads): pass tensor_cores=False")
  if tensor_cores:
    tokens = max(tokens, page)      # a step takes whole pages (page_size 128: one page a step)
    if page % 8:
      raise ValueError(f"paged_attention: the tensor-core path takes pages of a multiple of 8 tokens, got"
                       f" page_size {page}: pass tensor_cores=False")
    if tokens % page or tokens % 64:
      raise ValueError(f"paged_attention: the tensor-core path takes steps of `tokens` (a multiple of 64 and of"
                       f" the page size {page}), got tokens={tokens}: pass tokens={max(64, page)} or"
                       f" tensor_cores=False")
  if longest_first is None:        # every program scans all lengths: cheap up to a few hundred sequences
    longest_first = b <= LONGEST_FIRST_MAX_BATCH
  if splits is None:
    splits = (default_splits(b, kv_heads, block_tables.shape[1]) if tensor_cores and longest_first
              else 4 if tensor_cores else 8)
    while pages % splits:          # a divisor of the pages per sequence (each split takes as many)
      splits -= 1
  if tensor_cores:
    o_part, m_part, l_part = paged_attention_parts_mma(
        q, k_pages, v_pages, block_tables, lengths, splits=splits, group=group,
        stages=stages or 3, tokens=tokens, q_regs=q_regs, longest_first=longest_first, interpret=interpret)
    if fused_combine and (b * heads) % COMBINE_ROWS == 0:
      return combine_splits(o_part, m_part, l_part, dtype=q.dtype, interpret=interpret).reshape(b, heads, d)
    return combine(o_part.transpose(1, 0, 2).reshape(b, heads, splits, d), m_part.T.reshape(b, heads, splits),
                   l_part.T.reshape(b, heads, splits), q.dtype)
  if stages is None:               # as many as fit: each stage holds a page of K and of V
    stages = max(1, min(4, (192 * 1024) // (2 * page * d * jnp.dtype(k_pages.dtype).itemsize)))
  parts = paged_attention_parts(q, k_pages, v_pages, block_tables, lengths, splits=splits, stages=stages,
                                interpret=interpret)
  return combine(*parts, q.dtype)


def reference(q, k_pages, v_pages, block_tables, lengths):
  """Gather each sequence's pages, mask past its length, softmax in float32."""
  kv_heads, _, page, dim = k_pages.shape
  b, heads, _ = q.shape
  k = k_pages[:, block_tables].reshape(kv_heads, b, -1, dim)     # (kv_heads, batch, tokens, dim)
  v = v_pages[:, block_tables].reshape(kv_heads, b, -1, dim)
  k = jnp.repeat(k, heads // kv_heads, axis=0).astype(jnp.float32)
  v = jnp.repeat(v, heads // kv_heads, axis=0).astype(jnp.float32)
  logits = jnp.einsum("bhd,hbtd->bht", q.astype(jnp.float32), k) / dim ** 0.5
  mask = jnp.arange(k.shape[2])[None, None, :] < lengths[:, None, None]
  p = jax.nn.softmax(jnp.where(mask, logits, -jnp.inf), axis=-1)
  return jnp.einsum("bht,hbtd->bhd", p, v).astype(q.dtype)


def make_inputs(key, batch, heads, kv_heads, dim, page, pages_per_seq, dtype=jnp.float16, max_len=None):
  """A shuffled page pool holding every sequence's pages, and random lengths."""
  kq, kk, kv, kp, kl = jax.random.split(key, 5)
  pool = batch * pages_per_seq
  q = jax.random.normal(kq, (batch, heads, dim), jnp.float32).astype(dtype)
  k_pages = jax.random.normal(kk, (kv_heads, pool, page, dim), jnp.float32).astype(dtype)
  v_pages = jax.random.normal(kv, (kv_heads, pool, page, dim), jnp.float32).astype(dtype)
  block_tables = jax.random.permutation(kp, pool).reshape(batch, pages_per_seq).astype(jnp.int32)
  lengths = jax.random.randint(kl, (batch,), 1, (max_len or pages_per_seq * page) + 1, jnp.int32)
  return q, k_pages, v_pages, block_tables, lengths


# Specialisations `python -m mgpu_dsl check examples/paged_attention.py` checks without a GPU.
_S = jax.ShapeDtypeStruct
mg.check_specs(paged_attention_parts, _S((4, 8, 128), jnp.float16), _S((2, 64, 16, 128), jnp.float16),
               _S((2, 64, 16, 128), jnp.float16), _S((4, 16), jnp.int32), _S((4,), jnp.int32), splits=4)
for _regs in (False, True):
  mg.check_specs(paged_attention_parts_mma, _S((4, 8, 128), jnp.float16), _S((2, 64, 16, 128), jnp.float16),
                 _S((2, 64, 16, 128), jnp.float16), _S((4, 16), jnp.int32), _S((4,), jnp.int32), splits=4,
                 group=4, q_regs=_regs)


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  shape = (8, 16, 4, 128, 16, 64) if on_gpu else (2, 4, 2, 128, 16, 8)
  args = make_inputs(jax.random.key(0), *shape)
  want = np.asarray(reference(*args), np.float32)
  errs = []
  for tc in (False, True):
    got = paged_attention(*args, splits=4 if on_gpu else 2, tensor_cores=tc, interpret=not on_gpu)
    errs.append(float(np.abs(np.asarray(got, np.float32) - want).max()))
  err = max(errs)
  b, h, kvh, d, page, pps = shape
  print(f"paged attention batch={b} heads={h} kv_heads={kvh} head_dim={d} page={page}"
        f" lengths={np.asarray(args[4]).tolist()}: max abs error {err:.2e} (CUDA cores and tensor cores)"
        + ("" if on_gpu else " (interpret mode)"))
  assert err < 1e-2


if __name__ == "__main__":
  main()
