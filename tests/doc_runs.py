"""How tests/test_docs_snippets.py runs the kernels of the docs: for each, inputs, a call in interpret mode and a
jnp reference (a case's `run`). Split from that file, which keeps the cases and the reading of the docs."""
from __future__ import annotations

import typing

import jax
import jax.numpy as jnp
import numpy as np

S = jax.ShapeDtypeStruct
f32, f16, i32 = jnp.float32, jnp.float16, jnp.int32


rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
  return jnp.asarray(rng.standard_normal(shape).astype(dtype))


def close(got, want, tol=1e-5):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                             rtol=tol, atol=tol)


def run_scale(k):
  x = rand(512, 64)
  close(k(x, block_rows=128, interpret=True), x * 2)
  close(k(x, block_rows=64, factor=3.0, interpret=True), x * 3)


def run_axpb(k):
  x = rand(512)
  close(k(x, 0.5, 2.0, interpret=True), x * 0.5 + 2.0)
  close(k(x, 0.25, 1.0, interpret=True), x * 0.25 + 1.0)
  assert k.cache_info().misses == 1                   # "no recompilation"


class _Linear(typing.NamedTuple):
  w: object
  b: object


def run_affine(k):
  x, w, b = rand(64, 128), rand(128), rand(16, 128)
  close(k(x, _Linear(w, b), interpret=True), x * w + np.tile(b, (4, 1)))


def run_scale_shift(k):
  x, w, b = rand(32, 128), rand(128), rand(128)
  close(k(x, w, None, interpret=True), x * w)
  close(k(x, w, b, interpret=True), x * w + b)
def run_sgd_foreach(k):
  ps, gs = [rand(1000), rand(77), rand(2048)], [rand(1000), rand(77), rand(2048)]
  for o, p, g in zip(k(ps, gs, interpret=True), ps, gs):
    close(o, p - 0.1 * g)


def run_lookups(k):
  x, t = rand(16, 32), np.sort(rand(24))
  y, bins = k(x, t, interpret=True)
  v, knots = jnp.asarray(x), jnp.asarray(t)
  close(y, jnp.where(jnp.tri(16, 32, dtype=bool), jnp.interp(v, knots, jnp.exp(knots)), 0.0) * jnp.hypot(v, 1.0))
  np.testing.assert_array_equal(np.asarray(bins), np.asarray(jnp.digitize(v, knots)))


def run_buckets(k):
  t, q = np.sort(rand(100)), rand(2, 16)
  np.testing.assert_array_equal(np.asarray(k(t, q, interpret=True)), np.searchsorted(t, q, side="right"))
def run_solve_block(k):
  a, b = rand(64, 64), rand(64, 128)
  close(k(a, b, interpret=True), np.linalg.solve(np.asarray(a, np.float64) + np.eye(64), np.asarray(b, np.float64)),
        tol=2e-3)       # (float32 elimination of a random matrix)

def run_unproject(k):
  m, p = rand(3, 3) + 3 * np.eye(3, dtype=np.float32), rand(3, 128)
  close(k(m, p, interpret=True), np.linalg.solve(m, p), tol=1e-4)
def run_strict_upper(k):
  s = rand(64, 64)
  close(k(s, interpret=True), s * np.triu(np.ones((64, 64), np.float32), 1), tol=0)


def run_scaled_sum(k):
  import jax.numpy as jnp
  x, s = rand(512).astype(jnp.bfloat16), jnp.bfloat16(0.75)
  close(k(x, s, interpret=True), (np.asarray(x, np.float32) * 0.75).reshape(4, 128).sum(0))


def run_add_one(k):
  x, y = rand(16, 128), rand(8, 128)
  a, b = k(x, y, interpret=True)
  close(a, np.asarray(x) + 1)
  close(b, np.asarray(y) + 1)


def run_sobel(k):
  x = np.asarray(rand(34, 66))
  w = np.array([[-1., 0., 1.], [-2., 0., 2.], [-1., 0., 1.]], np.float32)
  close(k(x, interpret=True), sum(w[a, b] * x[a:a + 32, b:b + 64] for a in range(3) for b in range(3)))


def run_glu(k):
  import jax
  swiglu = k.fn.__globals__["swiglu"]          # the block's own undecorated helper, passed as the constexpr
  x = rand(16, 128)
  close(k(x, act=swiglu, interpret=True), np.asarray(jax.nn.silu(x[:, :64])) * x[:, 64:])


class _Model:          # the block's Model (its class is not kept: blocks may use names they do not import)
  def __init__(self, scale):
    self.scale = scale

  def act(self, v):
    return v * self.scale


def run_apply_act(k):
  m = _Model(2.0)                             # a bound method as the constexpr
  x = rand(16, 128)
  close(k(x, fn=m.act, interpret=True), x * 2.0)
  m.scale = 3.0                               # changed in place: traced again (probe 54b)
  close(k(x, fn=m.act, interpret=True), x * 3.0)


def run_ffn_act(k):
  import jax
  x = rand(8, 128)
  h = np.asarray(jax.nn.gelu(x, approximate=False))
  close(k(x, interpret=True), h - h.max(axis=-1, keepdims=True))


def run_debug_scaled(k):
  x = rand(192)
  close(k(x, interpret=True), x * 2)


def run_l2_normalize(k):
  x = np.array(rand(8, 128))
  x[2, 5] = np.nan
  out, mean = k(jnp.asarray(x), interpret=True)
  close(mean, np.asarray(jnp.nanmean(x, axis=1)))
  close(out[3:], (x / np.linalg.norm(x, axis=-1, keepdims=True))[3:])


def run_rope_hstack(k):           # (probe 52c: jnp.hsplit and jnp.hstack of register tensors)
  q, c, s = rand(32, 128), rand(32, 128), rand(32, 128)
  qn = np.asarray(q)
  close(k(q, c, s, interpret=True), qn * np.asarray(c) + np.hstack([-qn[:, 64:], qn[:, :64]]) * np.asarray(s))


def run_bf16_bits(k):             # (probe 52c: v.view(jnp.uint32) of a register tensor)
  x = rand(8, 128)
  assert np.array_equal(np.asarray(k(x, interpret=True)), np.asarray(jnp.asarray(x, jnp.bfloat16)).view(np.uint16))
def run_pool_and_upsample(k):    # (probe 53c: lax.reduce_window and jax.image.resize of a register tile)
  x = jnp.asarray(np.random.default_rng(53).standard_normal((16, 64)), f32)
  pooled, up = k(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(pooled), np.asarray(jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2),
                                                                                     (2, 2), "VALID")))
  np.testing.assert_allclose(np.asarray(up), np.asarray(jax.image.resize(x, (32, 128), "bilinear")), rtol=1e-6,
                             atol=1e-6)


def run_clip_range(k):           # (probe 52d: jnp.percentile and jnp.quantile at a static q)
  x = np.array(rand(8, 128))
  close(k(jnp.asarray(x), interpret=True), np.stack([np.percentile(x, 1.0, axis=1), np.quantile(x, 0.99, axis=1)]))


def run_weight_grad(k):          # (probe 48c: partial sums per lock group)
  x, dy = rand(37, 128), rand(37, 128)
  dw, lock = k(x, dy, interpret=True)
  close(np.asarray(dw).sum(0), (np.asarray(x) * np.asarray(dy)).sum(0), 1e-4)
  assert np.array_equal(np.asarray(lock), [0] * 8 + [1] * 8)


def run_column_norms(k):         # (probe 48c: the last program finishes the reduction)
  x = rand(256, 128)
  acc, out, count = k(x, interpret=True)
  close(out, np.sqrt((np.asarray(x) ** 2).sum(0)), 1e-4)
  assert int(count) == 4


def run_column_sums(k):
  x = rand(100, 200)
  close(k(x, interpret=True), np.asarray(x).sum(0), 1e-4)
def run_rms_gate(k):
  import jax
  import jax.numpy as jnp
  x, w = jnp.asarray(rand(8, 128), jnp.bfloat16), rand(128)
  var = jnp.mean(x, axis=-1, keepdims=True, dtype=jnp.float32)
  y = x * jax.lax.rsqrt(var + 1e-6) * w
  want = jnp.where(jnp.logical_and(y > 0, jnp.isfinite(y)), y, jnp.fmin(y, 0.0)) * jnp.arange(128.0)
  close(k(x, w, interpret=True), np.asarray(want))


def run_bits_and_outer(k):
  import jax
  import jax.numpy as jnp
  x, w = rand(8, 16), rand(16, 32)
  outer, q = k(x, w, interpret=True)
  m, e = jnp.frexp(x)
  close(outer, np.asarray(jnp.einsum("ij,jk->ijk", x, w)))
  np.testing.assert_array_equal(np.asarray(q), np.asarray(
      jnp.ldexp(jax.lax.reduce_precision(m, exponent_bits=5, mantissa_bits=2), e)))


def run_attention_block(k):
  import jax
  import jax.numpy as jnp
  q, kk, v = (jnp.asarray(rand(*s), jnp.bfloat16) for s in ((64, 64), (128, 64), (128, 64)))
  qf, kf, vf = (np.asarray(t, np.float32) for t in (q, kk, v))
  want = np.asarray(jax.nn.softmax(qf @ kf.T * 0.125, axis=-1) @ vf)
  close(np.asarray(k(q, kk, v, interpret=True), np.float32), want, 3e-2)


def run_hyperbolic(k):
  import jax
  import jax.numpy as jnp
  x = jnp.asarray(rand(8, 128), jnp.bfloat16)
  want = jnp.arcsinh(x) * jnp.cosh(x * 0.5) + jax.nn.glu(jnp.concatenate([x, x], axis=-1))
  close(np.asarray(k(x, interpret=True), np.float32), np.asarray(want, np.float32), 3e-2)
def run_pallas_matmul(k):
  x, y = rand(128, 128), rand(128, 128)
  close(k(x, y, interpret=True), np.asarray(x) @ np.asarray(y), 2e-1)


def run_row_mean(k):
  x = rand(4, 300)
  close(k(x, interpret=True), np.asarray(x).mean(1), 1e-4)


def run_row_median(k):
  x = rand(4, 48)
  close(k(x, interpret=True), np.median(np.asarray(x), axis=1), 1e-6)


def run_batch_norm(k):
  x = np.asarray(rand(2, 32, 2))
  m = x.mean(axis=(0, 2), keepdims=True)
  close(k(x, interpret=True), (x - m) / np.sqrt(((x - m) ** 2).mean(axis=(0, 2), keepdims=True) + 1e-5), 1e-4)


def run_append(k):
  cache, new = rand(64, 128, dtype=np.float16), rand(16, 128, dtype=np.float16)
  close(k(cache, new, pos=16, interpret=True), cache.at[16:32].set(new), 0)


def run_double_masked(k):
  x = rand(1000, 64)                                  # "any number of rows"
  close(k(x, interpret=True), x * 2, 0)


def run_segment_sums(k):
  off = jnp.array([0, 100, 100, 700, 1024], i32)
  x = rand(1024)
  want = [x[int(off[g]):int(off[g + 1])].sum() for g in range(4)]
  close(k(off, x, interpret=True), want, 1e-4)


def run_embedding(k):
  table, ids = rand(100, 64), jnp.asarray(rng.integers(0, 100, 128).astype(np.int32))
  close(k(table, ids, interpret=True), table[ids], 0)


def run_softmax(k):
  x = rand(64, 256)
  close(k(x, interpret=True), jax.nn.softmax(x, axis=1))


def run_row_softmax(k):
  x = rand(6, 100) - 3.0          # negative rows: other=0.0 would be MG953 at the max
  close(k(x, interpret=True), jax.nn.softmax(x, axis=1))


def run_transpose(k):
  x = rand(128, 256)
  close(k(x, interpret=True), x.T, 0)


def run_double_twice(k):
  x = rand(256, 512)
  close(k(x, interpret=True), x * 2, 0)


def run_readme_double(k):
  x = rand(1024, 64)
  close(k(x, interpret=True), x * 2, 0)


def run_double_direct(k):
  x = rand(64, 1024)
  close(k(x, interpret=True), x * 2, 0)


def run_fold(k):
  x = rand(1024)
  sums, count = k(x, interpret=True)
  close(sums, x.reshape(2, 4, 128).sum(0))
  assert int(count) == 8


def run_dequantize(k):
  q = jnp.asarray(rng.integers(-100, 100, (100, 40)).astype(np.int8))
  close(k(q, interpret=True), np.asarray(q, np.float32) * 0.5, 0)


def run_bias_grad(k):
  p = rand(8, 130)
  close(k(p, interpret=True), p.sum(0))


def run_embedding_backward(k):
  g, ids = rand(128, 64), jnp.asarray(rng.integers(-100, 100, 128).astype(np.int32))
  close(k(g, ids, n=100, interpret=True), jnp.zeros((100, 64), f32).at[ids].add(g))


def run_write_cache(k):
  cache, new = rand(512, 64), rand(128, 64)
  slots = jnp.asarray(rng.permutation(512)[:128].astype(np.int32))
  close(k(cache, new, slots, interpret=True), cache.at[slots].set(new))


def run_unpermute(k):
  y = rand(256, 64)
  tok = np.asarray(rng.permutation(256).astype(np.int32))
  tok[::5] = -1                                        # padding slots: masked off
  keep = tok >= 0
  close(k(y, jnp.asarray(tok), interpret=True), jnp.zeros_like(y).at[tok[keep]].set(y[keep]))


def run_dropout(k):
  x = rand(3000)                                      # not a multiple of 1024: masked
  y = np.asarray(k(x, 7, interpret=True))
  kept = y != 0
  assert 0.4 < kept.mean() < 0.6
  close(y[kept], 2 * np.asarray(x)[kept])


def run_dropout4(k):
  from mgpu_dsl.lowering.random import philox_numpy
  x = np.asarray(rand(1100))                          # three programs, the last one masked
  y = np.asarray(k(jnp.asarray(x), 77, 1000, interpret=True))
  want = np.zeros(1536, np.float32)
  for b in range(3):
    words = philox_numpy(77, 0, 1000 + b * 128 + np.arange(128))
    for j in range(4):
      o = b * 512 + j * 128 + np.arange(128)
      i = words[j].view(np.int32)
      u = np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)
      want[o] = np.where((u > np.float32(0.1)) & (o < 1100), np.pad(x, (0, 436))[o] / np.float32(0.9), 0)
  close(y, want[:1100])


def run_swap_pairs(k):
  x = rand(256, 64)
  close(k(x, interpret=True), jnp.concatenate([x[128:], x[:128]]), 0)


def run_recurrence(k):
  a, b = np.asarray(jax.nn.sigmoid(rand(8, 64))), np.asarray(rand(8, 64))
  h, want = np.zeros(8, np.float32), []
  for t in range(64):
    h = a[:, t] * h + b[:, t]
    want.append(h)
  close(k(jnp.asarray(a), jnp.asarray(b), interpret=True), np.stack(want, 1))


def run_segmented_sum(k):
  x, reset = np.asarray(rand(8, 128)), (np.arange(8 * 128).reshape(8, 128) % 37 == 5).astype(np.int32)
  want = np.zeros_like(x)
  for r in range(8):
    acc = 0.0
    for c in range(128):
      acc = x[r, c] if reset[r, c] else acc + x[r, c]
      want[r, c] = acc
  close(k(jnp.asarray(x), jnp.asarray(reset), interpret=True), want)


def run_lengths_and_starts(k):
  off = np.array([3, 3, 10, 11, 20, 20, 25, 40, 41], np.int32)
  lengths, starts = k(jnp.asarray(off), interpret=True)
  np.testing.assert_array_equal(np.asarray(lengths), off[1:] - off[:-1])
  np.testing.assert_array_equal(np.asarray(starts), np.concatenate([[0], off]))


def run_jagged_stats(k):
  lens = np.array([2, 0, 5, 1], np.int32)
  e = np.array([3, 1, 3, 7, 1, 1, 0, 3] * 16, np.int32)
  seg, experts, counts = k(jnp.asarray(lens), jnp.asarray(e), T=16, interpret=True)
  np.testing.assert_array_equal(np.asarray(seg), np.asarray(jnp.repeat(jnp.arange(4), lens, total_repeat_length=16)))
  u, c = jnp.unique(e, size=8, fill_value=-1, return_counts=True)
  np.testing.assert_array_equal(np.asarray(experts), np.asarray(u))
  np.testing.assert_array_equal(np.asarray(counts), np.asarray(c))


def run_gqa_decode(k):
  rng = np.random.default_rng(6)
  q, kk, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 8, 40), (2, 128, 40), (2, 128, 40)))
  q, kk, v = (jnp.asarray(a, jnp.bfloat16) for a in (q, kk, v))
  qf, kf, vf = (np.asarray(a, np.float32) for a in (q, kk, v))
  s = np.einsum("hgd,hnd->hgn", qf, kf) * 0.125
  p = np.exp(s - s.max(-1, keepdims=True))
  want = np.einsum("hgn,hnd->hgd", p / p.sum(-1, keepdims=True), vf)
  np.testing.assert_allclose(np.asarray(k(q, kk, v, interpret=True), np.float32), want, rtol=3e-2, atol=3e-2)


def run_biased_and_summed(k):
  x, b = np.random.default_rng(4).standard_normal((5, 45)), np.random.default_rng(5).standard_normal(45)
  x, b = x.astype(np.float32), b.astype(np.float32)
  out, sums = k(jnp.asarray(x), jnp.asarray(b), interpret=True)
  close(out, x + b)
  close(sums, (x + b).sum(0))


def run_expert_offsets(k):
  ids = np.random.default_rng(3).integers(-64, 64, 512).astype(np.int32) % 64     # (repeated experts)
  counts = np.stack([np.bincount(ids[i * 256:(i + 1) * 256], minlength=64) for i in range(2)]).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(k(jnp.asarray(ids), interpret=True)), np.cumsum(counts, 1) - counts)


def run_expert_slots(k):
  e = np.random.default_rng(4).integers(-1, 16, 300).astype(np.int32)
  counts, pos = k(jnp.asarray(e), interpret=True)
  c, want = np.zeros(16, np.int32), np.full(300, -1, np.int32)
  for i, v in enumerate(e):              # (interpret mode's order: the programs and their elements in turn)
    if v >= 0:
      want[i], c[v] = c[v], c[v] + 1
  np.testing.assert_array_equal(np.asarray(counts), c)
  np.testing.assert_array_equal(np.asarray(pos), want)


def run_sum_into_bf16(k):
  x = np.ones(512, jnp.bfloat16)          # (partial sums multiples of 128: exact in bfloat16)
  assert float(k(jnp.asarray(x), interpret=True)) == 512.0


def run_first_writer_wins(k):
  x = jnp.asarray(np.random.default_rng(5).random(384).astype(np.float32) + 1)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), np.asarray(x)[:128])


def run_square(k):
  x = rand(2048)
  close(k(x, interpret=True), x * x)


def run_square_vjp(k):
  x, g = rand(2048), rand(2048)
  close(k(x, g, interpret=True), 2 * x * g)


def run_rope(k):
  q, cos, sin = rand(9, 6, 64), rand(9, 32), rand(9, 32)
  x1, x2 = q[..., :32], q[..., 32:]
  c, s = cos[:, None], sin[:, None]
  close(k(q, cos, sin, interpret=True), jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1))


def run_rope_inplace(k):      # probe 53e: pointer-block stores through the aliased inputs q and k
  q, kk, cs = np.asarray(rand(3, 256)), np.asarray(rand(3, 128)), np.asarray(rand(8, 128))
  pos = np.array([5, 0, 7], np.int32)
  def rot(x):
    x = x.reshape(3, -1, 128)
    c, s = cs[pos][:, None, :64], cs[pos][:, None, 64:]
    return np.concatenate([x[..., :64] * c - x[..., 64:] * s, x[..., 64:] * c + x[..., :64] * s], -1).reshape(3, -1)
  got_q, got_k = k(q, kk, pos, cs, interpret=True)
  close(got_q, rot(q))
  close(got_k, rot(kk))


def run_rope_shard(k):        # probe 53e: the halves of a (7, 128) tile of heads, read padded to 8 rows
  q, c, s = np.asarray(rand(3, 7, 128)), np.asarray(rand(8, 64)), np.asarray(rand(8, 64))
  pos = np.array([2, 7, 0], np.int32)
  cc, ss = c[pos][:, None], s[pos][:, None]
  x1, x2 = q[..., :64], q[..., 64:]
  close(k(q, pos, c, s, interpret=True), np.concatenate([x1 * cc - x2 * ss, x2 * cc + x1 * ss], -1))


def run_rope_halves(k):       # probe 49a: halves of a (2, 96) tile read padded to (4, 96)
  x, cos, sin = rand(2, 96), rand(2, 48), rand(2, 48)
  x1, x2 = x[:, :48], x[:, 48:]
  close(k(x, cos, sin, interpret=True), jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1))


def run_combine_splits(k):    # probe 50a: the (8, 40) sum of a (4, 8, 40) tile divided by a column
  m, l, acc = rand(1, 4, 8), jnp.abs(rand(1, 4, 8)) + 1, rand(1, 4, 8, 40)
  w = jnp.exp(m[0] - m[0].max(0))
  close(k(m, l, acc, interpret=True), (w[..., None] * acc[0]).sum(0) / (w * l[0]).sum(0)[:, None])


def run_route(k):    # probe 51c: the top 2 of each token's (96,) logits kept (`vals[:, 1:2]` of a (5, 96) read)
  x = rand(5, 96)
  s = -jnp.sort(-x, axis=1)
  p = jnp.where(x >= s[:, 1:2], jnp.exp(x - s[:, :1]), 0.0)
  close(k(x, interpret=True), p / p.sum(1, keepdims=True))


def run_ln_apply(k):
  x, mu, rs = np.asarray(rand(5, 30)), np.asarray(rand(5)), np.asarray(rand(5))
  close(k(x, mu, rs, interpret=True), (x - mu[:, None]) * rs[:, None], 1e-5)


def run_bsr4_spmv(k):
  """A BSR SpMV of 4x4 blocks (probe 71a): runs of ml.arange(4) read and stored."""
  bptr = np.array([0, 2, 2, 5], np.int32)
  bcols = np.array([0, 3, 1, 2, 3], np.int32)
  r = np.random.default_rng(71)
  bvals = r.standard_normal((5, 4, 4)).astype(np.float32)
  x = r.standard_normal(16).astype(np.float32)
  want = np.zeros(12)
  for i in range(3):
    for p in range(bptr[i], bptr[i + 1]):
      want[i * 4:(i + 1) * 4] += bvals[p].astype(np.float64) @ x[bcols[p] * 4:(bcols[p] + 1) * 4]
  got = k(jnp.asarray(bptr), jnp.asarray(bcols), jnp.asarray(bvals), jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(np.asarray(got), want, rtol=0, atol=1e-5)
