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
"""
import functools

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

MASK = -1e30


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
  state = [(ml.full((page,), MASK, jnp.float32), ml.zeros((page,), jnp.float32),
            ml.zeros((page, dim), jnp.float32)) for j in ml.static_range(group)]
  for i in ml.range(count, stages=stages):
    pool_page = block_tables[b, first + i]
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


def combine(o_part, m_part, l_part, dtype):
  """Flash-decoding's last step: the splits' outputs weighted by their share of the softmax."""
  top = m_part.max(axis=-1, keepdims=True)
  w = jnp.exp(m_part - top)
  return ((o_part * w[..., None]).sum(-2) / (l_part * w).sum(-1)[..., None]).astype(dtype)


@functools.partial(jax.jit, static_argnames=("splits", "stages", "interpret"))
def paged_attention(q, k_pages, v_pages, block_tables, lengths, *, splits=8, stages=4, interpret=False):
  """Decode attention: q (batch, heads, head_dim) over pages (kv_heads, pages, page_size, head_dim)."""
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


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  shape = (8, 16, 4, 128, 16, 64) if on_gpu else (2, 4, 2, 128, 16, 8)
  args = make_inputs(jax.random.key(0), *shape)
  want = np.asarray(reference(*args), np.float32)
  got = paged_attention(*args, splits=4 if on_gpu else 2, interpret=not on_gpu)
  err = float(np.abs(np.asarray(got, np.float32) - want).max())
  b, h, kvh, d, page, pps = shape
  print(f"paged attention batch={b} heads={h} kv_heads={kvh} head_dim={d} page={page}"
        f" lengths={np.asarray(args[4]).tolist()}: max abs error {err:.2e}"
        + ("" if on_gpu else " (interpret mode)"))
  assert err < 1e-2


if __name__ == "__main__":
  main()
