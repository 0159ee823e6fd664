"""Probe 48e (ragged and data-dependent kernels: MoE routing and grouped matmuls, segments, histograms, sorts,
searches). `ml.searchsorted` of a scalar query past a ref's last element read one element past its end (the
unrolled binary search reads on after it has finished); jax.ops.segment_sum / segment_max / segment_min,
jnp.bincount, Triton's tl.histogram and jnp.searchsorted of register values were MG003 / MG002 hints."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32, F16, BF16, I32 = jnp.float32, jnp.float16, jnp.bfloat16, jnp.int32


def _spec(x):
  return S(x.shape, x.dtype)


def _export(kernel, *args, **constexprs):
  fn = jax.jit(lambda *a: kernel(*a, **constexprs))
  text = jax.export.export(fn, platforms=["cuda"])(*[_spec(a) for a in args]).mlir_module()
  assert "mosaic_gpu" in text
  return text


def _rng(seed):
  return np.random.default_rng(seed)


# ---------------------------------------------------------------- ml.searchsorted of a scalar past the end
@mg.mgpu_kernel(out_shape=lambda ids: S((8,), F32), grid=lambda ids: (8,))
def segment_counts(ids, out):              # segment g of the sorted ids is searchsorted(g):searchsorted(g, right)
  g = ml.program_id(0)
  lo = ml.searchsorted(ids, g)
  hi = ml.searchsorted(ids, g, side="right")
  out[g] = (hi - lo).astype(F32)


@mg.mgpu_kernel(out_shape=lambda off, q: S(q.shape, I32), grid=lambda off, q: (q.shape[0],))
def find_groups(off, q, out):              # which group of the offsets each query row falls in
  i = ml.program_id(0)
  out[i] = ml.searchsorted(off, q[i], side="right") - 1


def _counts_want(ids):
  return np.bincount(ids, minlength=8)[:8].astype(np.float32)


def test_searchsorted_of_a_scalar_after_every_element_stays_inside_the_array():
  """The last segment's end (side='right' of the largest id) and a query past every offset were interpret mode's
  OutOfBoundsError at the search (ids[1000]): the unrolled search read a[mid] with mid = len(a) once finished,
  on the GPU a read past the array. mid is clamped now; the answers are jnp's."""
  ids = jnp.asarray(np.sort(_rng(0).integers(0, 8, 1000)), I32)
  np.testing.assert_array_equal(segment_counts(ids, interpret=True), _counts_want(np.asarray(ids)))
  off = jnp.asarray([0, 4, 4, 10, 20], I32)
  q = jnp.asarray([0, 3, 4, 25, 20, -1, 19, 10], I32)
  np.testing.assert_array_equal(find_groups(off, q, interpret=True), np.searchsorted(off, q, side="right") - 1)
  sizes = jnp.asarray([0, 0, 7], I32)             # a query past a one-group table of no rows
  np.testing.assert_array_equal(find_groups(sizes, q, interpret=True), np.searchsorted(sizes, q, side="right") - 1)
  text = segment_counts.mlir(_spec(ids))
  assert "arith.minsi" in text
  _export(find_groups, off, q)


@pytest.mark.gpu
def test_gpu_searchsorted_of_a_scalar_after_every_element():
  ids = jnp.asarray(np.sort(_rng(1).integers(0, 8, 4096)), I32)
  np.testing.assert_array_equal(jax.jit(segment_counts)(ids), _counts_want(np.asarray(ids)))
  off = jnp.asarray([0, 4, 4, 10, 20], I32)
  q = jnp.asarray([0, 3, 4, 25, 20, -1, 19, 10], I32)
  np.testing.assert_array_equal(jax.jit(find_groups)(off, q), np.searchsorted(off, q, side="right") - 1)


# ---------------------------------------------------------------- jax.ops.segment_* and jnp.bincount of register values
def _segments(fn, n, mode=None):
  @mg.mgpu_kernel(out_shape=lambda x, ids: S((n,) + x.shape[1:], x.dtype), grid=(1,))
  def segments(x, ids, out):
    out[...] = fn(x[...], ids[...], num_segments=n) if mode is None else fn(x[...], ids[...], n, mode=mode)
  return segments


def _jax_segments(fn, x, ids, n, mode=None):
  return np.asarray(getattr(jax.ops, fn.__name__)(x, ids, n, mode=mode), np.float32)


@pytest.mark.parametrize("fn, n, shape, dtype, mode", [
    (jax.ops.segment_sum, 10, (256,), F32, None),        # 10 experts: a padded (10,) result
    (jax.ops.segment_sum, 200, (128,), BF16, None),      # two one-hot tables of 128 segments
    (jax.ops.segment_max, 16, (100,), F32, None),        # an odd read of 100 ids, empty segments -inf
    (jax.ops.segment_min, 12, (128,), I32, "clip"),      # ids outside clamped into range
    ("segment_sum", 5, (100, 64), F32, None),            # ml.segment_sum of rows of 2-D data
])
def test_segment_reductions_of_register_values_are_jax_ops(fn, n, shape, dtype, mode):
  """jax.ops.segment_sum / max / min of register values were MG003 ("segment_sum cannot take a register tensor"),
  hinting an atomic scatter; they compute as jax's now: ids outside the segments dropped (negative ones too, where
  jnp's .at[] and so the atomic scatter would count them from the end), empty segments the identity."""
  fn = getattr(ml, fn) if isinstance(fn, str) else fn
  rng = _rng(3)
  x = jnp.asarray(rng.standard_normal(shape) * 4, dtype)
  ids = jnp.asarray(rng.integers(-3, n + 3, shape[0]), I32)
  kernel = _segments(fn, n, mode)
  got = np.asarray(kernel(x, ids, interpret=True), np.float32)
  np.testing.assert_allclose(got, _jax_segments(fn, x, ids, n, mode), rtol=2e-2, atol=5e-2)
  if fn is jax.ops.segment_sum and n == 10:
    _export(kernel, x, ids)


@mg.mgpu_kernel(out_shape=lambda logits: (S((logits.shape[1],), I32), S((logits.shape[1] + 1,), I32),
                                          S((logits.shape[0], 2), I32)), grid=(1,))
def route(logits, sizes, offsets, experts):     # top-2 experts per token, tokens per expert and their offsets
  _, ids = ml.top_k(logits[...].astype(F32), 2)
  experts[...] = ids
  counts = jnp.bincount(ids.reshape(-1), length=logits.shape[1])
  sizes[...] = counts
  offsets[...] = jnp.concatenate([jnp.zeros((1,), I32), jnp.cumsum(counts)])


@mg.mgpu_kernel(out_shape=lambda x, n: S((16,), I32), grid=lambda x, n: (ml.cdiv(x.shape[0], 128),))
def histogram_blocks(x, n, out):                # Triton's tl.histogram of each block, added up atomically
  offs = ml.program_id(0) * 128 + ml.arange(128)
  inside = offs < n[0]
  v = x.at[offs].load(mask=inside, other=0)
  ml.atomic_add(out.at[ml.arange(16)], ml.histogram(v, 16, mask=inside))


@mg.mgpu_kernel(out_shape=lambda off, q: S(q.shape, I32), grid=(1,))
def group_of_rows(off, q, out):
  out[...] = jnp.searchsorted(off[...], q[...], side="right") - 1


def test_bincount_histogram_and_searchsorted_of_register_values():
  """An MoE router's tokens per expert (jnp.bincount of its top-k ids, length= the experts), Triton's tl.histogram
  of a block's values under its mask, and jnp.searchsorted of register values were MG003 / MG002 hints."""
  rng = _rng(4)
  logits = jnp.asarray(rng.standard_normal((64, 16)), BF16)
  sizes, offsets, experts = route(logits, interpret=True)
  want = np.bincount(np.asarray(experts).reshape(-1), minlength=16)
  np.testing.assert_array_equal(sizes, want)
  np.testing.assert_array_equal(offsets, np.concatenate([[0], np.cumsum(want)]))
  top2 = np.argsort(-np.asarray(logits, np.float32), axis=1, kind="stable")[:, :2]
  np.testing.assert_array_equal(experts, top2)
  x = jnp.asarray(rng.integers(-2, 20, 300), jnp.int32)
  got = histogram_blocks(x, jnp.asarray([290], I32), interpret=True)
  kept = np.asarray(x)[:290]
  np.testing.assert_array_equal(got, np.bincount(kept[(kept >= 0) & (kept < 16)], minlength=16))
  off = jnp.asarray([0, 10, 10, 40, 64, 128, 128, 128], I32)
  q = jnp.asarray(np.arange(128), I32)
  np.testing.assert_array_equal(group_of_rows(off, q, interpret=True), np.searchsorted(off, q, side="right") - 1)
  _export(route, logits)
  _export(histogram_blocks, x, jnp.asarray([290], I32))


@mg.mgpu_kernel(out_shape=lambda x, ids: S((16,), x.dtype), grid=(1,))
def segments_of_unknown_count(x, ids, out):
  out[...] = jax.ops.segment_sum(x[...], ids[...])


@mg.mgpu_kernel(out_shape=lambda ids: S((8,), I32), grid=(1,))
def bincount_of_unknown_length(ids, out):
  out[...] = jnp.bincount(ids[...])


@mg.mgpu_kernel(out_shape=lambda x: S((16,), I32), grid=(1,))
def histogram_of_floats(x, out):
  out[...] = ml.histogram(x[...], 16)


def test_segment_counts_must_be_static_and_histograms_count_integers():
  expect(segments_of_unknown_count, [S((128,), F32), S((128,), I32)], mg.KernelTypeError, "jax.ops.segment_sum(",
         "jax.ops.segment_sum (as ml.segment_sum) needs num_segments=: it sets the result's shape, and jax's default"
         " (the largest id, plus one) depends on the data",
         hint="pass it as a Python int or a constexpr: ml.segment_sum(data, ids, num_segments=16) (ids past it are"
              " dropped)")
  e = expect(bincount_of_unknown_length, [S((128,), I32)], mg.KernelTypeError, "jnp.bincount(",
             "jnp.bincount (as ml.bincount) needs length=: it sets the result's shape, and jnp's default (the largest"
             " value, plus one) depends on the data")
  assert e.hint.startswith("pass the number of bins, ml.bincount(ids, length=8)")
  expect(histogram_of_floats, [S((128,), F32)], mg.KernelTypeError, "ml.histogram(",
         "ml.histogram counts integers (bins of width 1 from 0), got a register tensor of float32",
         hint="compute each value's bin first, e.g. ml.floor((v - lo) / width).astype(jnp.int32)")


@pytest.mark.gpu
def test_gpu_segment_reductions_histograms_and_routing():
  rng = _rng(5)
  for fn, n, shape, dtype in ((jax.ops.segment_sum, 10, (256,), F32), (jax.ops.segment_max, 16, (100,), F32),
                              (ml.segment_sum, 5, (100, 64), F32), (jax.ops.segment_sum, 200, (128,), BF16)):
    x = jnp.asarray(rng.standard_normal(shape) * 4, dtype)
    ids = jnp.asarray(rng.integers(-3, n + 3, shape[0]), I32)
    got = np.asarray(jax.jit(_segments(fn, n))(x, ids), np.float32)
    np.testing.assert_allclose(got, _jax_segments(fn, x, ids, n), rtol=2e-2, atol=5e-2)
  logits = jnp.asarray(rng.standard_normal((64, 16)), BF16)
  for a, b in zip(jax.jit(route)(logits), route(logits, interpret=True)):
    np.testing.assert_array_equal(a, b)
  x = jnp.asarray(rng.integers(-2, 20, 3000), jnp.int32)
  kept = np.asarray(x)[:2900]
  np.testing.assert_array_equal(jax.jit(histogram_blocks)(x, jnp.asarray([2900], I32)),
                                np.bincount(kept[(kept >= 0) & (kept < 16)], minlength=16))


# ---------------------------------------------------------------- jax.nn.one_hot of top-k expert ids
@mg.mgpu_kernel(out_shape=lambda logits: (S(logits.shape, F32), S((logits.shape[1],), F32)), grid=(1,))
def dense_routing(logits, combine, load):       # Mixtral's: one_hot of the (tokens, 2) experts, weighted and summed
  v, e = jax.lax.top_k(logits[...].astype(F32), 2)
  mask = jax.nn.one_hot(e, logits.shape[1])                     # (tokens, 2, experts)
  combine[...] = jnp.sum(mask * jax.nn.softmax(v, axis=-1)[..., None], axis=1)
  load[...] = jnp.mean(jnp.sum(mask, axis=1), axis=0)           # the load-balancing loss's fractions


@mg.mgpu_kernel(out_shape=lambda e: S((8,) + e.shape, BF16), grid=(1,))
def one_hot_first(e, out):
  out[...] = jax.nn.one_hot(e[...], 8, dtype=BF16, axis=0)


def test_one_hot_of_ids_of_any_rank_and_axis():
  """jax.nn.one_hot of a (tokens, k) tile of top-k experts (an MoE router's dispatch mask) was MG003 ("no
  ml.one_hot"): only 1-D ids with the classes last had a form. Any rank and axis compare now, as jax's."""
  rng = _rng(6)
  logits = jnp.asarray(rng.standard_normal((64, 16)), BF16)
  combine, load = dense_routing(logits, interpret=True)
  v, e = jax.lax.top_k(jnp.asarray(logits, F32), 2)
  mask = np.asarray(jax.nn.one_hot(e, 16))
  np.testing.assert_allclose(combine, (mask * np.asarray(jax.nn.softmax(v, axis=-1))[..., None]).sum(1), rtol=1e-5,
                             atol=1e-6)
  np.testing.assert_allclose(load, mask.sum(1).mean(0), rtol=1e-6)
  ids = jnp.asarray(rng.integers(-1, 9, (32, 4)), I32)        # -1 and 8: rows of zeros
  np.testing.assert_array_equal(np.asarray(one_hot_first(ids, interpret=True), np.float32),
                                jax.nn.one_hot(ids, 8, axis=0))
  _export(dense_routing, logits)
  _export(one_hot_first, ids)


@pytest.mark.gpu
def test_gpu_one_hot_routing():
  rng = _rng(7)
  logits = jnp.asarray(rng.standard_normal((64, 16)), BF16)
  for a, b in zip(jax.jit(dense_routing)(logits), dense_routing(logits, interpret=True)):
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
  ids = jnp.asarray(rng.integers(-1, 9, (32, 4)), I32)
  np.testing.assert_array_equal(np.asarray(jax.jit(one_hot_first)(ids), np.float32), jax.nn.one_hot(ids, 8, axis=0))


# ---------------------------------------------------------------- key-value sorts: jax.lax.sort of several operands
@mg.mgpu_kernel(out_shape=lambda x, e: (S((e.shape[0] * e.shape[1], x.shape[1]), x.dtype),
                                       S((e.shape[0] * e.shape[1],), I32)), grid=(1,))
def permute_by_expert(x, e, xs, experts):      # the (token, slot) pairs ordered by expert, rows gathered
  flat = e[...].reshape(-1)
  se, token = jax.lax.sort_key_val(flat, ml.arange(flat.shape[0]) // e.shape[1])
  experts[...] = se
  xs[...] = x[token, :]


@mg.mgpu_kernel(out_shape=lambda a, b, c: (S(a.shape, I32), S(b.shape, I32), S(c.shape, F32)), grid=(1,))
def sort_two_keys(a, b, c, ao, bo, co):
  ao[...], bo[...], co[...] = jax.lax.sort([a[...], b[...], c[...]], num_keys=2)


@mg.mgpu_kernel(out_shape=lambda k, v: (S(k.shape, F32), S(v.shape, I32)), grid=(1,))
def sort_rows_descending(k, v, ko, vo):
  ko[...], vo[...] = ml.sort((k[...], v[...]), descending=True)


def test_sorts_of_several_operands_carry_the_values_along():
  """jax.lax.sort((keys, values), num_keys=1) and jax.lax.sort_key_val were MG003 ("sort cannot take a tuple of
  register values"): an MoE permute orders its (token, slot) pairs by expert. ml.sort takes a tuple now: one sort
  of the keys (each more significant key a stable sort after the others), the values gathered at its positions;
  descending keeps equal keys in order, as jnp.argsort(descending=True); odd lengths stay padded."""
  rng = _rng(8)
  x = jnp.asarray(rng.standard_normal((64, 64)), BF16)
  e = jnp.asarray(rng.integers(0, 8, (64, 2)), I32)
  xs, experts = permute_by_expert(x, e, interpret=True)
  order = np.argsort(np.asarray(e).reshape(-1), kind="stable")
  np.testing.assert_array_equal(experts, np.asarray(e).reshape(-1)[order])
  np.testing.assert_array_equal(np.asarray(xs, np.float32), np.asarray(x, np.float32)[order // 2])
  for n in (256, 100):
    a, b = (jnp.asarray(rng.integers(0, 4, n), I32) for _ in range(2))
    c = jnp.asarray(rng.standard_normal(n), F32)
    for got, want in zip(sort_two_keys(a, b, c, interpret=True), jax.lax.sort((a, b, c), num_keys=2)):
      np.testing.assert_array_equal(got, want)
  k = jnp.asarray(rng.standard_normal((4, 128)).round(1), F32)
  v = jnp.asarray(np.tile(np.arange(128), (4, 1)), I32)
  ko, vo = sort_rows_descending(k, v, interpret=True)
  o = np.argsort(-np.asarray(k), axis=1, kind="stable")
  np.testing.assert_array_equal(ko, np.take_along_axis(np.asarray(k), o, 1))
  np.testing.assert_array_equal(vo, o)
  _export(permute_by_expert, x, e)
  _export(sort_two_keys, a, b, c)


@pytest.mark.gpu
def test_gpu_sorts_of_several_operands():
  rng = _rng(9)
  x = jnp.asarray(rng.standard_normal((64, 64)), BF16)
  e = jnp.asarray(rng.integers(0, 8, (64, 2)), I32)
  for got, want in zip(jax.jit(permute_by_expert)(x, e), permute_by_expert(x, e, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  for n in (256, 100):
    a, b = (jnp.asarray(rng.integers(0, 4, n), I32) for _ in range(2))
    c = jnp.asarray(rng.standard_normal(n), F32)
    for got, want in zip(jax.jit(sort_two_keys)(a, b, c), jax.lax.sort((a, b, c), num_keys=2)):
      np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- gathers at the indices of an odd read's sort
@mg.mgpu_kernel(out_shape=lambda e, t: (S((e.shape[0], t.shape[1]), t.dtype), S(e.shape, I32)), grid=(1,))
def rows_by_expert(e, t, rows, experts):      # 100 tokens ordered by expert: a GMEM gather and a register one
  ev = e[...]
  o = ml.argsort(ev)
  rows[...] = t[o, :]
  experts[...] = ev[o]


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, F32), grid=(1,))
def sorted_by_gather(x, out):
  out[...] = x[ml.argsort(x[...], descending=True)] * 2.0


def test_gathers_at_the_positions_that_sort_an_odd_read():
  """ml.argsort of 100 expert ids read whole compiled (padded, probe 46e), but a gather at its positions ended the
  padded trace: `t[o, :]` of a GMEM ref was MG204 at the read ("x[...] has shape (100,)"), `v[o]` of the read itself
  MG003 ("a form a register gather does not take"), which also kept the padded trace from being tried. A padded
  index vector now gathers padded (its padding lanes clamped into the array), and an odd register gather is MG204."""
  rng = _rng(10)
  e = jnp.asarray(rng.integers(0, 8, 100), I32)
  t = jnp.asarray(rng.standard_normal((100, 64)), BF16)
  rows, experts = rows_by_expert(e, t, interpret=True)
  o = np.argsort(np.asarray(e), kind="stable")
  np.testing.assert_array_equal(np.asarray(rows, np.float32), np.asarray(t, np.float32)[o])
  np.testing.assert_array_equal(experts, np.asarray(e)[o])
  x = jnp.asarray(rng.standard_normal(60), F32)
  np.testing.assert_array_equal(sorted_by_gather(x, interpret=True), -np.sort(-np.asarray(x)) * 2)
  _export(rows_by_expert, e, t)
  _export(sorted_by_gather, x)


@pytest.mark.gpu
def test_gpu_gathers_at_the_positions_that_sort_an_odd_read():
  rng = _rng(11)
  e = jnp.asarray(rng.integers(0, 8, 100), I32)
  t = jnp.asarray(rng.standard_normal((100, 64)), BF16)
  for got, want in zip(jax.jit(rows_by_expert)(e, t), rows_by_expert(e, t, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))
  x = jnp.asarray(rng.standard_normal(60), F32)
  np.testing.assert_array_equal(jax.jit(sorted_by_gather)(x), -np.sort(-np.asarray(x)) * 2)


# ---------------------------------------------------------------- odd lengths: scatters at padded indices, aranges
@mg.mgpu_kernel(out_shape=lambda e: S(e.shape, I32), grid=(1,))
def rank_in_sort(e, out):                     # the inverse permutation: each token's slot in the sorted order
  out[ml.argsort(e[...])] = ml.arange(e.shape[0])


@mg.mgpu_kernel(out_shape=lambda x, e: S(x.shape, x.dtype), grid=(1,))
def unsort_rows(x, e, out):                   # an MoE unpermute: row i of x goes back to token o[i]
  out[ml.argsort(e[...]), :] = x[...]


@mg.mgpu_kernel(out_shape=lambda x: S((1,), F32), grid=(1,))
def position_weighted(x, out):
  out[0] = ml.sum(x[...] * (ml.arange(x.shape[0]).astype(F32) + 1.0))


def test_odd_lengths_scatter_at_padded_indices_and_take_aranges():
  """A scatter at the positions that sort 100 ids read whole was MG204 at the read (the padded trace met a scatter
  at padded indices, whose padding lanes would write), and ml.arange(n) of an odd n (the token index beside an odd
  read, 50 tokens' top-2 slots // 2) was MG204 at the arange: the scatter masks the padding lanes off now, and an
  odd arange is made padded in the padded trace, as ml.zeros of an odd shape is."""
  rng = _rng(12)
  e = jnp.asarray(rng.integers(0, 8, 100), I32)
  o = np.argsort(np.asarray(e), kind="stable")
  np.testing.assert_array_equal(rank_in_sort(e, interpret=True), np.argsort(o))
  x = jnp.asarray(rng.standard_normal((100, 64)), F32)
  want = np.zeros((100, 64), np.float32)
  want[o] = np.asarray(x)
  np.testing.assert_array_equal(unsort_rows(x, e, interpret=True), want)
  v = jnp.asarray(rng.standard_normal(37), F32)
  np.testing.assert_allclose(position_weighted(v, interpret=True), [np.sum(np.asarray(v) * np.arange(1, 38))],
                             rtol=1e-5)
  x2 = jnp.asarray(rng.standard_normal((50, 64)), BF16)
  e2 = jnp.asarray(rng.integers(0, 8, (50, 2)), I32)
  xs, experts = permute_by_expert(x2, e2, interpret=True)
  order = np.argsort(np.asarray(e2).reshape(-1), kind="stable")
  np.testing.assert_array_equal(np.asarray(xs, np.float32), np.asarray(x2, np.float32)[order // 2])
  _export(rank_in_sort, e)
  _export(unsort_rows, x, e)
  _export(position_weighted, v)


@pytest.mark.gpu
def test_gpu_odd_lengths_scatter_at_padded_indices_and_take_aranges():
  rng = _rng(13)
  e = jnp.asarray(rng.integers(0, 8, 100), I32)
  np.testing.assert_array_equal(jax.jit(rank_in_sort)(e), np.argsort(np.argsort(np.asarray(e), kind="stable")))
  x = jnp.asarray(rng.standard_normal((100, 64)), F32)
  np.testing.assert_array_equal(jax.jit(unsort_rows)(x, e), unsort_rows(x, e, interpret=True))
  v = jnp.asarray(rng.standard_normal(37), F32)
  np.testing.assert_allclose(jax.jit(position_weighted)(v), position_weighted(v, interpret=True), rtol=1e-5)
  x2 = jnp.asarray(rng.standard_normal((50, 64)), BF16)
  e2 = jnp.asarray(rng.integers(0, 8, (50, 2)), I32)
  for got, want in zip(jax.jit(permute_by_expert)(x2, e2), permute_by_expert(x2, e2, interpret=True)):
    np.testing.assert_array_equal(np.asarray(got, np.float32), np.asarray(want, np.float32))


# ---------------------------------------------------------------- jnp.nonzero with a static size: capacity dispatch
def _dispatch(experts, capacity):
  @mg.mgpu_kernel(out_shape=lambda e: S((experts, capacity), I32), grid=(1,))
  def dispatch(e, slots):                   # each expert's first `capacity` tokens, -1 in the empty slots
    ev = e[...]
    for x in ml.static_range(experts):
      slots.at[x][...] = jnp.nonzero(ev == x, size=capacity, fill_value=-1)[0]
  return dispatch


@mg.mgpu_kernel(out_shape=lambda m: (S((40,), I32), S((40,), I32), S((24, 1), I32)), grid=(1,))
def kept_positions(m, rows, cols, flat):
  mv = m[...]
  rows[...], cols[...] = jnp.nonzero(mv, size=40)
  flat[...] = jnp.argwhere(jnp.ravel(mv)[:64], size=24, fill_value=64)


def test_nonzero_flatnonzero_and_argwhere_with_a_static_size():
  """jnp.nonzero(mask, size=n) (Switch-style capacity dispatch: each expert's first tokens) was MG003 ("no nonzero:
  its length depends on the data") though size= fixes the length: it computes now, each kept element's rank naming
  its slot (ml.cumsum, then ml.segment_sum of the positions), fill_value past the count, 2-D masks split by rows."""
  rng = _rng(14)
  e = jnp.asarray(rng.integers(0, 4, 100), I32)             # 100 tokens read whole: padded
  got = _dispatch(2, 16)(e, interpret=True)
  want = np.stack([jnp.nonzero(np.asarray(e) == x, size=16, fill_value=-1)[0] for x in range(2)])
  np.testing.assert_array_equal(got, want)
  m = jnp.asarray(rng.random((16, 32)) < 0.1)
  rows, cols, flat = kept_positions(m, interpret=True)
  want_r, want_c = jnp.nonzero(np.asarray(m), size=40)
  np.testing.assert_array_equal(rows, want_r)
  np.testing.assert_array_equal(cols, want_c)
  np.testing.assert_array_equal(flat, jnp.argwhere(np.asarray(m).ravel()[:64], size=24, fill_value=64))
  _export(_dispatch(2, 16), e)


@pytest.mark.gpu
def test_gpu_nonzero_with_a_static_size():
  rng = _rng(15)
  e = jnp.asarray(rng.integers(0, 4, 100), I32)
  kernel = _dispatch(4, 16)
  np.testing.assert_array_equal(jax.jit(kernel)(e), kernel(e, interpret=True))
  m = jnp.asarray(rng.random((16, 32)) < 0.1)
  for got, want in zip(jax.jit(kept_positions)(m), kept_positions(m, interpret=True)):
    np.testing.assert_array_equal(got, want)


@mg.mgpu_kernel(out_shape=lambda x, i: S(i.shape, x.dtype), grid=(1,))
def take_scaled(x, i, out):
  out[...] = jnp.take(x[...] * 2, i[...])


def test_jnp_take_of_a_register_vector_fills_outside():
  """jnp.take of a register vector was MG003 (its hint gathered from a GMEM ref, which computed values are not):
  it is the register gather now, with jnp's default mode: an index outside [-n, n) gives fill_value (NaN, or the
  lowest integer)."""
  rng = _rng(16)
  for dtype in (F32, I32):
    x = jnp.asarray(rng.standard_normal(64) * 10, dtype)
    i = jnp.asarray(rng.integers(-70, 70, 128), I32)
    np.testing.assert_array_equal(take_scaled(x, i, interpret=True), jnp.take(x * 2, i))
  _export(take_scaled, x, i)
