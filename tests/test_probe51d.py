"""Probe 51d (ragged and data-dependent kernels as users write them). Kernels that failed:

- `lax.while_loop(cond, body, init)` whose init is a tuple of numbers (`(0, 0.0)`, `(lo, hi)` of a binary search
  over cu_seqlens-style offsets, `(jnp.int32(0), jnp.float32(0))`) was MG003, "this while condition is the Python
  value True when the loop starts": a tuple of numbers only is carried once tracing shows the body changes it, and
  the condition was evaluated on the static tuple first. So was the plain `st = (0, 0.0); while st[0] < n and
  st[1] < t: st = (...)`. Now the loop is traced again carrying such a tuple (frontend/flow.py, _Force).
- a vector a column reduction gives (`(tok,) = jnp.nonzero(e == g, size=C)`, an MoE capacity's token slots;
  `ml.argmax(x, axis=0)`; a column count) used as the row indices of a gather (`x[tok, :]`, `t[best, :]`) was
  MG204, "tok is used as a column vector ... and as a row statistic": the gather's own broadcast of its indices
  along the rows was taken for NumPy's alignment (a likely slip), so the relayout pass left it. Now that use reads
  a copy through SMEM (frontend/layout_errors.py).
- jnp's static-size forms of data-dependent functions were MG003 in a kernel: `jnp.repeat(jnp.arange(b), lens,
  total_repeat_length=t)` (a jagged batch's segment ids; "total_repeat_length= has no counterpart"), `jnp.where(c,
  size=n, fill_value=f)` of one argument ("use ml.where", though jnp.nonzero(size=) worked), `jnp.unique(e, size=n,
  return_counts=True)`, `jnp.extract` / `jnp.compress(..., size=n)` (stream compaction) and `jnp.digitize`. Now each
  is jax's own definition in ml.* functions (frontend/jnp_sized.py); without the static size the MG003 stands.
- a gather of whole rows at a 2-D tile of indices, `y[pos, :]` of an MoE's (tokens, top-k) slots or
  `table[ids]` of an embedding bag's (batch, bag) ids, and Triton's grid of them, `t.at[b[:, :, None], c[None, None,
  :]]`, was MG204 ("gives a 3-D result: a gather gives 1-D and 2-D tensors"): now it is the gather of the tile's
  flattened indices (the grid with its leading axes merged) reshaped to (t, k, d), as jnp's
  (frontend/ops/tile_gathers.py). So are the scatters there, `out[pos, :] = v[:, None, :]` (an MoE's permutation,
  each token's row into its k slots), masked, atomic (its old values (t, k, d) too), and Triton's grid of them.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _offsets(lens):
  return np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)


def _export(kernel, *specs, **kw):
  """The kernel's real Mosaic GPU module, built and verified for CUDA on this machine."""
  return jax.export.export(jax.jit(lambda *a: kernel(*a, **kw)), platforms=["cuda"])(*specs)


# ---------------------------------------------------------------- lax.while_loop over a tuple of numbers
@mg.mgpu_kernel(out_shape=lambda off, q: S(q.shape, I32), grid=lambda off, q: (q.shape[0],))
def segment_of(off, q, out):
  """Each query position's segment: a binary search over sorted offsets, Pallas-style."""
  r = ml.program_id(0)
  t = q[r]

  def cond(c):
    lo, hi = c
    return lo < hi

  def body(c):
    lo, hi = c
    mid = (lo + hi + 1) // 2
    return jax.lax.cond(off[mid] <= t, lambda: (mid, hi), lambda: (lo, mid - 1))

  lo, _ = jax.lax.while_loop(cond, body, (0, off.shape[0] - 1))
  out[r] = lo


@mg.mgpu_kernel(out_shape=lambda x, t: S(t.shape, I32), grid=lambda x, t: (t.shape[0],))
def steps_to_budget(x, t, out):
  """How many leading elements of row r fit in budget t[r] (an early exit on loaded values)."""
  r = ml.program_id(0)

  def cond(c):
    return c[0] < x.shape[1] and c[1] + x[r, c[0]] <= t[r]

  def body(c):
    return c[0] + 1, c[1] + x[r, c[0]]

  out[r] = jax.lax.while_loop(cond, body, (0, 0.0))[0]


@mg.mgpu_kernel(out_shape=lambda x: S((), I32))
def count_until(x, out):
  """jnp scalars in the init and a plain while over a tuple of numbers."""
  i, _ = jax.lax.while_loop(lambda c: (c[0] < x.shape[0]) & (c[1] < 10.0), lambda c: (c[0] + 1, c[1] + x[c[0]]),
                            (jnp.int32(0), jnp.float32(0.0)))
  st = (0, 0.0)
  while st[0] < x.shape[0] and st[1] < 10.0:
    st = (st[0] + 1, st[1] + x[st[0]])
  out[...] = i * 1000 + st[0]


def _budget_ref(x, t):
  out = []
  for r in range(x.shape[0]):
    i, s = 0, np.float32(0)
    while i < x.shape[1] and s + x[r, i] <= t[r]:
      s += x[r, i]
      i += 1
    out.append(i)
  return np.array(out, np.int32)


def test_lax_while_loop_over_a_tuple_of_numbers_is_a_run_time_loop():
  rng = np.random.default_rng(0)
  for lens in ([3, 0, 47, 1, 0, 77], [128], [0, 0, 5]):          # empty segments, one huge, odd tails
    off = _offsets(lens)
    q = rng.integers(0, int(off[-1]), 16).astype(np.int32)
    want = (np.searchsorted(off, q, side="right") - 1).astype(np.int32)
    np.testing.assert_array_equal(np.asarray(segment_of(off, q, interpret=True)), want)
  x = rng.uniform(0, 1, (6, 40)).astype(np.float32)
  t = np.array([0.0, 0.5, 5.0, 10.0, 30.0, 100.0], np.float32)   # none, a few, every element
  np.testing.assert_array_equal(np.asarray(steps_to_budget(x, t, interpret=True)), _budget_ref(x, t))
  v = rng.uniform(0, 1, 100).astype(np.float32)
  c, s = 0, np.float32(0)                                        # the count while the sum stays below 10
  while c < 100 and s < 10.0:
    s += v[c]
    c += 1
  assert int(count_until(v, interpret=True)) == c * 1000 + c
  for k, specs in ((segment_of, (S((7,), I32), S((16,), I32))), (steps_to_budget, (S((6, 40), F32), S((6,), F32))),
                   (count_until, (S((100,), F32),))):
    k.check(*specs)
    _export(k, *specs)


@pytest.mark.gpu
def test_gpu_lax_while_loop_over_a_tuple_of_numbers():
  rng = np.random.default_rng(1)
  off = _offsets([3, 0, 47, 1, 0, 77])
  q = rng.integers(0, int(off[-1]), 16).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(segment_of(off, q)), np.searchsorted(off, q, side="right") - 1)
  x = rng.uniform(0, 1, (6, 40)).astype(np.float32)
  t = np.array([0.0, 0.5, 5.0, 10.0, 30.0, 100.0], np.float32)
  np.testing.assert_array_equal(np.asarray(steps_to_budget(x, t)), _budget_ref(x, t))


# ---------------------------------------------------------------- a column statistic as a gather's row indices
@mg.mgpu_kernel(out_shape=lambda x, e, *, E, C: S((E, C, x.shape[1]), x.dtype), grid=lambda x, e, *, E, C: (E,))
def dispatch(x, e, out, *, E: ml.constexpr, C: ml.constexpr):
  """An MoE's capacity-limited dispatch: expert g's first C tokens, zero rows past them."""
  g = ml.program_id(0)
  (tok,) = jnp.nonzero(e[...] == g, size=C, fill_value=-1)
  rows = x[ml.maximum(tok, 0), :]
  out[g] = jnp.where((tok >= 0)[:, None], rows, 0.0)


@mg.mgpu_kernel(out_shape=lambda x, t: (S((x.shape[1], t.shape[1]), t.dtype), S((x.shape[1], t.shape[1]), t.dtype)))
def column_picks(x, t, by_count, by_best):
  """Rows of t at each column's count of positives and at each column's argmax."""
  cnt = ml.sum((x[...] > 0).astype(jnp.int32), axis=0)
  by_count[...] = t[cnt, :]
  best = ml.argmax(x[...], axis=0)
  by_best[...] = t[...][best]


@mg.mgpu_kernel(out_shape=lambda x, s: (S((x.shape[0], s.shape[0]), x.dtype), S((x.shape[0], s.shape[0]), x.dtype)))
def row_picks(x, s, by_best, by_count):
  """x's columns at each row of s's argmax, and at each row's count of positives."""
  by_best[...] = x[...][:, ml.argmax(s[...], axis=1)]
  by_count[...] = x[...][:, ml.minimum(ml.sum((s[...] > 0).astype(jnp.int32), axis=1), x.shape[1] - 1)]


def _dispatch_ref(x, e, E, C):
  out = np.zeros((E, C, x.shape[1]), x.dtype)
  for g in range(E):
    tok = np.nonzero(e == g)[0][:C]
    out[g, :len(tok)] = x[tok]
  return out


def test_a_column_statistic_indexes_a_row_gather():
  rng = np.random.default_rng(2)
  x = rng.standard_normal((128, 64)).astype(np.float32)
  for e in (rng.integers(0, 4, 128), np.zeros(128, np.int64), np.r_[np.full(100, 3), np.full(28, 1)]):
    e = e.astype(np.int32)                       # balanced, one expert takes all, two (over capacity) and two empty
    np.testing.assert_array_equal(np.asarray(dispatch(x, e, E=4, C=32, interpret=True)), _dispatch_ref(x, e, 4, 32))
  v = rng.standard_normal((16, 64)).astype(np.float32)
  t = rng.standard_normal((32, 32)).astype(np.float32)
  a, b = column_picks(v, t, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), t[(v > 0).sum(0)])
  np.testing.assert_array_equal(np.asarray(b), t[v.argmax(0)])
  _export(dispatch, S((128, 64), F32), S((128,), I32), E=4, C=32)
  x, s = rng.standard_normal((16, 128)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
  a, b = row_picks(x, s, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), x[:, s.argmax(1)])
  np.testing.assert_array_equal(np.asarray(b), x[:, np.minimum((s > 0).sum(1), 127)])
  _export(column_picks, S((16, 64), F32), S((32, 32), F32))
  _export(row_picks, S((16, 128), F32), S((64, 128), F32))


@pytest.mark.gpu
def test_gpu_a_column_statistic_indexes_a_row_gather():
  rng = np.random.default_rng(3)
  x = rng.standard_normal((128, 64)).astype(np.float32)
  e = rng.integers(0, 4, 128).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(dispatch(x, e, E=4, C=32)), _dispatch_ref(x, e, 4, 32))
  v = rng.standard_normal((16, 64)).astype(np.float32)
  t = rng.standard_normal((32, 32)).astype(np.float32)
  a, b = column_picks(v, t)
  np.testing.assert_array_equal(np.asarray(a), t[(v > 0).sum(0)])
  np.testing.assert_array_equal(np.asarray(b), t[v.argmax(0)])
  x, s = rng.standard_normal((16, 128)).astype(np.float32), rng.standard_normal((64, 128)).astype(np.float32)
  a, b = row_picks(x, s)
  np.testing.assert_array_equal(np.asarray(a), x[:, s.argmax(1)])
  np.testing.assert_array_equal(np.asarray(b), x[:, np.minimum((s > 0).sum(1), 127)])


# ---------------------------------------------------------------- jnp's static-size forms
@mg.mgpu_kernel(out_shape=lambda x, lens, *, T: (S((T,), I32), S((T, x.shape[1]), x.dtype), S((x.shape[1], T), x.dtype)))
def jagged_ids(x, lens, seg, rows, cols, *, T: ml.constexpr):
  """Each token's segment of a jagged batch, and the batch's rows repeated by their lengths."""
  n = lens[...]
  seg[...] = jnp.repeat(jnp.arange(lens.shape[0], dtype=jnp.int32), n, total_repeat_length=T)
  rows[...] = jnp.repeat(x[...], n, axis=0, total_repeat_length=T)
  cols[...] = jnp.repeat(x[...].T, n, axis=1, total_repeat_length=T)


@mg.mgpu_kernel(out_shape=lambda v, e: (S(v.shape, I32), S((v.shape[0],), v.dtype), S((16,), I32), S((16,), I32)))
def packed(v, e, where_pos, kept, experts, counts):
  """The positive elements' positions and values packed to the front; the experts used and their token counts."""
  (i,) = jnp.where(v[...] > 0, size=v.shape[0], fill_value=-1)
  where_pos[...] = i
  kept[...] = jnp.extract(v[...] > 0, v[...], size=v.shape[0], fill_value=-7.0)
  u, c = jnp.unique(e[...], size=16, return_counts=True, fill_value=-1)
  experts[...] = u
  counts[...] = c


@mg.mgpu_kernel(out_shape=lambda m, x, b: (S((32, x.shape[1]), x.dtype), S(b.shape, I32), S(b.shape, I32)))
def compress_and_bin(m, x, b, rows, left, right):
  """The flagged rows packed (zeros past them); the bins of b's values among x's first column, both sides."""
  rows[...] = jnp.compress(m[...] != 0, x[...], axis=0, size=32)
  edges = x.at[ml.ds(0, 16), 0][...]
  left[...] = jnp.digitize(b[...], edges)
  right[...] = jnp.digitize(b[...], edges, right=True)


def test_jnp_repeat_with_a_total_length_gives_a_jagged_batchs_segment_ids():
  rng = np.random.default_rng(4)
  x = rng.standard_normal((8, 32)).astype(np.float32)
  for lens in ([1, 0, 3, 4, 0, 2, 5, 1], [0, 0, 0, 0, 0, 0, 0, 64], [9, 9, 9, 9, 9, 9, 9, 9], [3, 0, 0, 0, 0, 0, 0, 0]):
    n = np.array(lens, np.int32)                   # sums below T (the last id repeats, as jnp's), at it, past it
    seg, rows, cols = jagged_ids(x, n, T=64, interpret=True)
    np.testing.assert_array_equal(np.asarray(cols), np.asarray(jnp.repeat(x.T, n, axis=1, total_repeat_length=64)))
    np.testing.assert_array_equal(np.asarray(seg), np.asarray(jnp.repeat(jnp.arange(8, dtype=jnp.int32), n,
                                                                         total_repeat_length=64)))
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(jnp.repeat(x, n, axis=0, total_repeat_length=64)))
  _export(jagged_ids, S((8, 32), F32), S((8,), I32), T=64)


@mg.mgpu_kernel(out_shape=lambda e: S((16,), I32))
def unique_unsized(e, out):
  out[...] = jnp.unique(e[...])


@mg.mgpu_kernel(out_shape=lambda x, lens: S((64,), F32))
def repeat_untotalled(x, lens, out):
  out[...] = jnp.repeat(x[...], lens[...])


def test_jnp_where_extract_unique_compress_and_digitize_with_static_sizes():
  rng = np.random.default_rng(5)
  for hi in (3, 16, 40):                            # fewer experts than slots, as many, more (the counts cut)
    v = rng.standard_normal(128).astype(np.float32)
    e = rng.integers(0, hi, 128).astype(np.int32)
    got = packed(v, e, interpret=True)
    u, c = jnp.unique(e, size=16, return_counts=True, fill_value=-1)
    for g, w in zip(got, (jnp.where(v > 0, size=128, fill_value=-1)[0], jnp.extract(v > 0, v, size=128, fill_value=-7.0),
                          u, c)):
      np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  x = rng.standard_normal((128, 32)).astype(np.float32)
  x[:16, 0] = np.sort(x[:16, 0])
  x[3, 0] = x[4, 0]                                 # a repeated edge
  b = np.concatenate([x[:16, 0], rng.standard_normal(112)]).astype(np.float32)   # values on the edges too
  for flags in (rng.uniform(size=128) > 0.8, np.zeros(128, bool), np.ones(128, bool)):
    m = flags.astype(np.int32)
    rows, left, right = compress_and_bin(m, x, b, interpret=True)
    np.testing.assert_array_equal(np.asarray(rows), np.asarray(jnp.compress(m != 0, x, axis=0, size=32)))
    np.testing.assert_array_equal(np.asarray(left), np.digitize(b, x[:16, 0]))
    np.testing.assert_array_equal(np.asarray(right), np.digitize(b, x[:16, 0], right=True))
  x[:16, 0] = x[:16, 0][::-1].copy()                # decreasing bins
  _, left, right = compress_and_bin(m, x, b, interpret=True)
  np.testing.assert_array_equal(np.asarray(left), np.digitize(b, x[:16, 0]))
  np.testing.assert_array_equal(np.asarray(right), np.digitize(b, x[:16, 0], right=True))
  _export(packed, S((128,), F32), S((128,), I32))
  _export(compress_and_bin, S((128,), I32), S((128, 32), F32), S((128,), F32))
  # (without the static size, the data-dependent forms stay MG003)
  expect(unique_unsized, [S((128,), I32)], mg.KernelTypeError, "jnp.unique(", "unique cannot take a register tensor"
         " inside a kernel")
  expect(repeat_untotalled, [S((16,), F32), S((16,), I32)], mg.KernelTypeError, "jnp.repeat(",
         "jnp.repeat (as ml.repeat) takes a static positive int of repeats, got lens[...]")




# ---------------------------------------------------------------- whole rows at a 2-D tile of indices
@mg.mgpu_kernel(out_shape=lambda y, pos, w: S((pos.shape[0], y.shape[1]), F32), grid=lambda y, pos, w: (pos.shape[0] // 16,))
def moe_combine(y, pos, w, out):
  """An MoE's un-permute: each token's top-k expert rows, weighted and summed."""
  i = ml.program_id(0)
  rows = y[pos.at[ml.ds(i * 16, 16), :][...], :]                       # (16, k, d)
  out.at[ml.ds(i * 16, 16), :][...] = jnp.sum(w.at[ml.ds(i * 16, 16), :][...][:, :, None] * rows, axis=1)


@mg.mgpu_kernel(out_shape=lambda t, ids: (S((ids.shape[0], t.shape[1]), F32), S((ids.shape[0], 32), F32)),
                grid=lambda t, ids: (ids.shape[0] // 16,))
def embedding_bag(t, ids, mean, peak):
  """The mean of each bag's rows (ids of -1 pad a bag) and the max of their first 32 columns."""
  i = ml.program_id(0)
  b = ids.at[ml.ds(i * 16, 16), :][...]
  keep = (b >= 0)[:, :, None]
  rows = t[jnp.maximum(b, 0)]
  mean.at[ml.ds(i * 16, 16), :][...] = jnp.sum(jnp.where(keep, rows, 0.0), axis=1) / jnp.maximum(
      jnp.sum(b >= 0, axis=1), 1)[:, None]
  part = t[jnp.maximum(b, 0), ml.ds(0, 32)]
  peak.at[ml.ds(i * 16, 16), :][...] = jnp.max(jnp.where(keep, part, -jnp.inf), axis=1)


@mg.mgpu_kernel(out_shape=lambda t, ids: S((ids.shape[0], t.shape[1]), F32), grid=lambda t, ids: (ids.shape[0] // 16,))
def bag_sum_triton(t, ids, out):
  """The bags' sums as Triton writes the gather: a grid of each bag's row ids and the columns, masked."""
  i = ml.program_id(0)
  b = ids.at[ml.ds(i * 16, 16), :][...]
  c = ml.arange(t.shape[1])
  rows = ml.load(t.at[b[:, :, None], c[None, None, :]], mask=(b >= 0)[:, :, None], other=0.0)
  out.at[ml.ds(i * 16, 16), :][...] = jnp.sum(rows, axis=1)


@mg.mgpu_kernel(out_shape=lambda x, pos: (S((pos.size, x.shape[1]), x.dtype), S((pos.size, x.shape[1]), x.dtype),
                                         S((pos.size, x.shape[1]), x.dtype), S(pos.shape + x.shape[1:], x.dtype)),
                grid=lambda x, pos: (x.shape[0] // 16,))
def moe_permute(x, pos, plain, grid, added, old):
  """Each token's row into its k slots (a slot of -1 drops it): a plain, a Triton-grid and an atomic scatter."""
  i = ml.program_id(0)
  p = pos.at[ml.ds(i * 16, 16), :][...]
  v = x.at[ml.ds(i * 16, 16), :][...]
  ml.store(plain.at[p, :], v[:, None, :], mask=(p >= 0)[:, :, None])
  c = ml.arange(x.shape[1])
  ml.store(grid.at[p[:, :, None], c[None, None, :]], v[:, None, :], mask=(p >= 0)[:, :, None])
  old.at[ml.ds(i * 16, 16)][...] = ml.atomic_add(added.at[p, :], v[:, None, :], mask=(p >= 0)[:, :, None])


def _permuted(x, pos):
  out = np.zeros((pos.size, x.shape[1]), x.dtype)
  for t, slots in enumerate(pos):
    for s in slots[slots >= 0]:
      out[s] = x[t]
  return out


def _bags(t, ids):
  mean, peak = np.zeros((ids.shape[0], t.shape[1]), np.float32), np.full((ids.shape[0], 32), -np.inf, np.float32)
  for r, b in enumerate(ids):
    k = b[b >= 0]
    mean[r] = t[k].sum(0) / max(len(k), 1)
    if len(k):
      peak[r] = t[k, :32].max(0)
  return mean, peak


def test_whole_rows_at_a_2d_tile_of_indices():
  rng = np.random.default_rng(7)
  y = rng.standard_normal((128, 64)).astype(np.float32)
  pos = rng.permutation(128).reshape(64, 2).astype(np.int32)
  w = rng.uniform(size=(64, 2)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(moe_combine(y, pos, w, interpret=True)), (w[:, :, None] * y[pos]).sum(1),
                             rtol=1e-6, atol=1e-6)
  t = rng.standard_normal((50, 64)).astype(np.float32)
  ids = rng.integers(-1, 50, (32, 4)).astype(np.int32)
  ids[3] = -1                                               # an empty bag
  for g, want in zip(embedding_bag(t, ids, interpret=True), _bags(t, ids)):
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-6, atol=1e-6)
  np.testing.assert_allclose(np.asarray(bag_sum_triton(t, ids, interpret=True)),
                             _bags(t, ids)[0] * np.maximum((ids >= 0).sum(1), 1)[:, None], rtol=1e-5, atol=1e-5)
  x = rng.standard_normal((64, 64)).astype(np.float32)
  pos[3, 1] = pos[10, 0] = -1                               # dropped slots
  *scattered, old = moe_permute(x, pos, interpret=True)
  for g in scattered:
    np.testing.assert_array_equal(np.asarray(g), _permuted(x, pos))
  np.testing.assert_array_equal(np.asarray(old), np.zeros((64, 2, 64), np.float32))    # each slot added once
  _export(moe_combine, S((128, 64), F32), S((64, 2), I32), S((64, 2), F32))
  _export(moe_permute, S((64, 64), F32), S((64, 2), I32))
  _export(embedding_bag, S((50, 64), F32), S((32, 4), I32))
  _export(bag_sum_triton, S((50, 64), F32), S((32, 4), I32))


@pytest.mark.gpu
def test_gpu_whole_rows_at_a_2d_tile_of_indices():
  rng = np.random.default_rng(8)
  y = rng.standard_normal((128, 64)).astype(np.float32)
  pos = rng.permutation(128).reshape(64, 2).astype(np.int32)
  w = rng.uniform(size=(64, 2)).astype(np.float32)
  np.testing.assert_allclose(np.asarray(moe_combine(y, pos, w)), (w[:, :, None] * y[pos]).sum(1), rtol=1e-5, atol=1e-5)
  t = rng.standard_normal((50, 64)).astype(np.float32)
  ids = rng.integers(-1, 50, (32, 4)).astype(np.int32)
  for g, want in zip(embedding_bag(t, ids), _bags(t, ids)):
    np.testing.assert_allclose(np.asarray(g), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(np.asarray(bag_sum_triton(t, ids)),
                             _bags(t, ids)[0] * np.maximum((ids >= 0).sum(1), 1)[:, None], rtol=1e-5, atol=1e-5)
  x = rng.standard_normal((64, 64)).astype(np.float32)
  pos[3, 1] = -1
  *scattered, old = moe_permute(x, pos)
  for g in scattered:
    np.testing.assert_array_equal(np.asarray(g), _permuted(x, pos))
  np.testing.assert_array_equal(np.asarray(old), np.zeros((64, 2, 64), np.float32))


@pytest.mark.gpu
def test_gpu_jnp_static_size_forms():
  rng = np.random.default_rng(6)
  x = rng.standard_normal((8, 32)).astype(np.float32)
  n = np.array([1, 0, 3, 4, 0, 2, 5, 1], np.int32)
  seg, rows, cols = jagged_ids(x, n, T=64)
  np.testing.assert_array_equal(np.asarray(cols), np.asarray(jnp.repeat(x.T, n, axis=1, total_repeat_length=64)))
  np.testing.assert_array_equal(np.asarray(seg), np.repeat(np.arange(8), n).tolist() + [7] * (64 - n.sum()))
  np.testing.assert_array_equal(np.asarray(rows), np.asarray(jnp.repeat(x, n, axis=0, total_repeat_length=64)))
  v = rng.standard_normal(128).astype(np.float32)
  e = rng.integers(0, 12, 128).astype(np.int32)
  u, c = jnp.unique(e, size=16, return_counts=True, fill_value=-1)
  for g, w in zip(packed(v, e), (jnp.where(v > 0, size=128, fill_value=-1)[0],
                                 jnp.extract(v > 0, v, size=128, fill_value=-7.0), u, c)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  xx = rng.standard_normal((128, 32)).astype(np.float32)
  xx[:16, 0] = np.sort(xx[:16, 0])
  m = (rng.uniform(size=128) > 0.8).astype(np.int32)
  b = rng.standard_normal(128).astype(np.float32)
  rows, left, right = compress_and_bin(m, xx, b)
  np.testing.assert_array_equal(np.asarray(rows), np.asarray(jnp.compress(m != 0, xx, axis=0, size=32)))
  np.testing.assert_array_equal(np.asarray(left), np.digitize(b, xx[:16, 0]))
  np.testing.assert_array_equal(np.asarray(right), np.digitize(b, xx[:16, 0], right=True))
