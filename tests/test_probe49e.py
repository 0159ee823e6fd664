"""Probe 49e (ragged and data-dependent kernels, what probe 48e left). Triton's bitonic sort (its tutorial's
`_compare_and_swap`: reshapes to (n_outer * 2**i, 2, 2**(n_dims - i - 1)), masked sums of the halves broadcast
back) was MG204: the (1, 1, 64) half of a (1, 2, 64) tile stretched to it was a broadcast into 3-D, and a sort of
128 or more elements moves more row-wise tiles through SMEM than the relayout pass's 64 tries took.
jax.ops.segment_prod was MG003."""
import math

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


# ---------------------------------------------------------------- Triton's bitonic sort, written as its tutorial does
@ml.inline
def _compare_and_swap(x, flip, i: ml.constexpr, n_dims: ml.constexpr):
  n_outer: ml.constexpr = x.size >> n_dims
  shape: ml.constexpr = [n_outer * 2**i, 2, 2**(n_dims - i - 1)]
  y = ml.reshape(x, shape)
  mask = ml.arange(0, 2)[None, :, None]
  left = ml.broadcast_to(ml.sum(y * (1 - mask), 1)[:, None, :], shape).to(y.dtype)
  right = ml.broadcast_to(ml.sum(y * mask, 1)[:, None, :], shape).to(y.dtype)
  left = ml.reshape(left, x.shape)
  right = ml.reshape(right, x.shape)
  ileft = left.to(jnp.int32, bitcast=True)
  iright = right.to(jnp.int32, bitcast=True)
  ix = x.to(jnp.int32, bitcast=True)
  ret = ix ^ ml.where((left > right) != flip, ileft ^ iright, ml.zeros_like(ix))
  return ret.to(x.dtype, bitcast=True)


@ml.inline
def _bitonic_merge(x, stage: ml.constexpr, order: ml.constexpr, n_dims: ml.constexpr):
  n_outer: ml.constexpr = x.size >> n_dims
  if order == 2:
    shape: ml.constexpr = [n_outer * 2**(n_dims - 1 - stage), 2, 2**stage]
    flip = ml.reshape(ml.broadcast_to(ml.arange(0, 2)[None, :, None], shape), x.shape)
  else:
    flip = order
  for i in ml.static_range(stage):
    x = _compare_and_swap(x, flip, i + (n_dims - stage), n_dims)
  return x


@mg.mgpu_kernel(out_shape=lambda x, descending: S(x.shape, x.dtype), grid=(1,))
def bitonic_sort(x, out, descending: ml.constexpr):
  v = x[...]
  n_dims: ml.constexpr = int(math.log2(x.shape[-1]))
  for i in ml.static_range(1, n_dims + 1):
    v = _bitonic_merge(v, i, 2 if i < n_dims else descending, n_dims)
  out[...] = v


def _sorted(x, descending):
  s = np.sort(np.asarray(x), axis=-1)
  return s[..., ::-1] if descending else s


def test_triton_bitonic_sort_by_reshapes_and_masked_sums():
  """The tutorial's sort of 128 floats was MG204 at `ml.broadcast_to(... [:, None, :], [1, 2, 64])` (a broadcast
  into 3-D); the size-1 axes of such a result are left out now, (1, 64) to (2, 64) between reshapes. A (4, 64) tile
  sorted by rows (21 compare-and-swaps, each moving its halves through SMEM) stopped at the relayout pass's 64th
  try with MG204 at a reshape; it tries as often as the kernel has reshapes now."""
  x = jnp.asarray(_rng(0).standard_normal(128), F32)
  np.testing.assert_array_equal(bitonic_sort(x, descending=0, interpret=True), _sorted(x, False))
  t = jnp.asarray(_rng(1).standard_normal((4, 64)), F32)
  np.testing.assert_array_equal(bitonic_sort(t, descending=1, interpret=True), _sorted(t, True))
  _export(bitonic_sort, x, descending=0)


@mg.mgpu_kernel(out_shape=lambda x: (S((1, 4, 64), F32), S(x.shape, F32)), grid=(1,))
def centred_by_middle_axes(x, o, p):
  v = x[...]                                   # (4, 64)
  m = ml.max(v, axis=0)                        # a column max stretched back into 3-D, (1, 1, 64) -> (1, 4, 64)
  o[...] = v[None] - ml.broadcast_to(m[None, None, :], (1, 4, 64))
  y = v.reshape(1, 2, 128)
  lo = ml.min(y, axis=1)                       # the smaller half of each pair of rows, (1, 128) -> (1, 2, 128)
  p[...] = (y - lo[:, None, :]).reshape(4, 64)


def test_broadcast_into_3d_with_size_one_axes_is_the_2d_broadcast():
  """Other kernels of the class: a statistic stretched into a 3-D result whose other axes are 1 was MG204."""
  x = jnp.asarray(_rng(2).standard_normal((4, 64)), F32)
  o, p = centred_by_middle_axes(x, interpret=True)
  xv = np.asarray(x)
  np.testing.assert_allclose(o, xv[None] - xv.max(0)[None, None], rtol=1e-6)
  y = xv.reshape(1, 2, 128)
  np.testing.assert_allclose(p, (y - y.min(1, keepdims=True)).reshape(4, 64), rtol=1e-6)
  _export(centred_by_middle_axes, x)


@pytest.mark.gpu
def test_gpu_bitonic_sort_and_3d_broadcasts():
  x = jnp.asarray(_rng(3).standard_normal(256), F32)
  np.testing.assert_array_equal(jax.jit(lambda a: bitonic_sort(a, descending=0))(x), _sorted(x, False))
  t = jnp.asarray(_rng(4).standard_normal((4, 64)), F32)
  np.testing.assert_array_equal(jax.jit(lambda a: bitonic_sort(a, descending=1))(t), _sorted(t, True))
  o, p = jax.jit(centred_by_middle_axes)(t)
  o2, p2 = centred_by_middle_axes(t, interpret=True)
  np.testing.assert_allclose(o, o2, rtol=1e-6)
  np.testing.assert_allclose(p, p2, rtol=1e-6)


# ---------------------------------------------------------------- jax.ops.segment_prod
def _segment_prod(n):
  @mg.mgpu_kernel(out_shape=lambda x, ids: S((n,) + x.shape[1:], x.dtype), grid=(1,))
  def segment_prod(x, ids, out):
    out[...] = jax.ops.segment_prod(x[...], ids[...], num_segments=n)
  return segment_prod


@pytest.mark.parametrize("shape,dtype,n", [((128,), F32, 8), ((256,), I32, 40), ((64, 32), F32, 4)])
def test_segment_prod_of_register_values_is_jax_ops(shape, dtype, n):
  """jax.ops.segment_prod was MG003 (its hint: no atomic multiply, one program per sorted segment). It is the
  one-hot table of segment_sum with 1 where an element is not of the segment, reduced by the last row of its running
  product (ml.cumprod along the rows): ids outside [0, n) dropped, an empty segment 1, as jax's."""
  rng = _rng(5)
  if dtype == I32:
    x = jnp.asarray(rng.choice([-2, -1, 1, 2], shape), I32)
  else:
    x = jnp.asarray(rng.uniform(0.6, 1.5, shape) * rng.choice([-1, 1], shape), F32)
  ids = jnp.asarray(rng.integers(-2, n + 3, shape[0]), I32)
  got = _segment_prod(n)(x, ids, interpret=True)
  want = jax.ops.segment_prod(x, ids, num_segments=n)
  np.testing.assert_allclose(got, want, rtol=1e-5)
  if dtype == F32 and len(shape) == 1:
    _export(_segment_prod(n), x, ids)


@pytest.mark.gpu
def test_gpu_segment_prod():
  rng = _rng(6)
  x = jnp.asarray(rng.uniform(0.6, 1.5, 256), F32)
  ids = jnp.asarray(rng.integers(0, 40, 256), I32)
  np.testing.assert_allclose(jax.jit(_segment_prod(40))(x, ids), jax.ops.segment_prod(x, ids, num_segments=40),
                             rtol=1e-5)
  t = jnp.asarray(rng.uniform(0.6, 1.5, (64, 32)), F32)
  np.testing.assert_allclose(jax.jit(_segment_prod(4))(t, ids[:64] % 5),
                             jax.ops.segment_prod(t, ids[:64] % 5, num_segments=4), rtol=1e-5)


# ---------------------------------------------------------------- jnp's acc.at[ids].add(y) of register tensors
@mg.mgpu_kernel(out_shape=lambda y, tok, w: S((32, y.shape[1]), F32), grid=(1,))
def unpermute(y, tok, w, out):              # an MoE unpermute: each routed row, weighted, added back to its token
  rows = y[...].astype(jnp.float32) * w[...][:, None]
  out[...] = jnp.zeros((32, y.shape[1]), jnp.float32).at[tok[...]].add(rows)


@mg.mgpu_kernel(out_shape=lambda e, x: (S((16,), I32), S((8, 64), F32), S((32,), F32)), grid=(1,))
def scattered_updates(e, x, counts, peaks, prods):
  counts[...] = jnp.zeros((16,), jnp.int32).at[e[...]].add(1)       # a histogram of ids, negatives from the end
  v = x[...]
  ids = e[...] % 8
  peaks[...] = jnp.full((8, 64), -1.0, jnp.float32).at[ids, :].max(v)
  prods[...] = jnp.ones((32,), jnp.float32).at[e[...] % 32].multiply(v[:, 0] * 0.5 + 1.0)


@mg.mgpu_kernel(out_shape=lambda o: S(o.shape, I32), grid=(1,))
def inverse_order(o, out):                  # each token's slot in the order that sorts it by expert
  out[...] = jnp.zeros((128,), jnp.int32).at[o[...]].set(ml.arange(128))


@mg.mgpu_kernel(out_shape=lambda x, ids: S((32, 64), F32), grid=(1,))
def set_rows(x, ids, out):
  out[...] = jnp.full((32, 64), -5.0, jnp.float32).at[ids[...], :].set(x[...])


@mg.mgpu_kernel(out_shape=lambda x: S((128,), F32), grid=(1,))
def set_one(x, out):
  v = x[...]
  out[...] = v.at[0].set(0.0)


def test_at_add_max_multiply_of_register_tensors_at_index_vectors():
  """`acc.at[ids].add(rows)` of a register tensor was MG003 (a register tensor has no .at), whose hint selected by
  index (wrong where an index repeats: a token routed twice). It is now jnp's scatter: ml.segment_sum of the
  updates at the ids added to the tensor (max, min, multiply by segment_max, min, prod; set where an id names an
  element), a negative id counted from the end once, one outside [-n, n) dropped."""
  rng = _rng(7)
  y = jnp.asarray(rng.standard_normal((64, 32)), BF16)
  tok = jnp.asarray(rng.integers(0, 32, 64), I32)
  w = jnp.asarray(rng.random(64), F32)
  want = jnp.zeros((32, 32), F32).at[tok].add(y.astype(F32) * w[:, None])
  np.testing.assert_allclose(unpermute(y, tok, w, interpret=True), want, rtol=1e-5, atol=1e-5)
  e = jnp.asarray(rng.integers(-20, 20, 128), I32)
  x = jnp.asarray(rng.uniform(-1.0, 1.0, (128, 64)), F32)
  counts, peaks, prods = scattered_updates(e, x, interpret=True)
  np.testing.assert_array_equal(counts, jnp.zeros((16,), I32).at[e].add(1))
  np.testing.assert_array_equal(peaks, jnp.full((8, 64), -1.0).at[e % 8, :].max(x))
  np.testing.assert_allclose(prods, jnp.ones((32,)).at[e % 32].multiply(x[:, 0] * 0.5 + 1.0), rtol=1e-5)
  _export(unpermute, y, tok, w)
  # .set: the inverse of a permutation; rows of a tile at unique ids, negative ones from the end
  order = jnp.asarray(rng.permutation(128), I32)
  np.testing.assert_array_equal(inverse_order(order, interpret=True), np.argsort(np.asarray(order)))
  ids = rng.permutation(32)[:24]
  ids[::3] -= 32
  ids, rows = jnp.asarray(ids, I32), jnp.asarray(rng.standard_normal((24, 64)), F32)
  np.testing.assert_array_equal(set_rows(rows, ids, interpret=True), jnp.full((32, 64), -5.0).at[ids].set(rows))
  # a scalar index computes the select its MG003 hint wrote (probe 51i)
  v = jnp.asarray(rng.standard_normal(128), F32)
  np.testing.assert_array_equal(np.asarray(set_one(v, interpret=True)), np.asarray(v.at[0].set(0.0)))


@pytest.mark.gpu
def test_gpu_at_updates_of_register_tensors():
  rng = _rng(8)
  y = jnp.asarray(rng.standard_normal((64, 32)), BF16)
  tok = jnp.asarray(rng.integers(0, 32, 64), I32)
  w = jnp.asarray(rng.random(64), F32)
  np.testing.assert_allclose(jax.jit(unpermute)(y, tok, w), unpermute(y, tok, w, interpret=True), rtol=1e-5,
                             atol=1e-5)
  e = jnp.asarray(rng.integers(-20, 20, 128), I32)
  x = jnp.asarray(rng.uniform(-1.0, 1.0, (128, 64)), F32)
  for got, want in zip(jax.jit(scattered_updates)(e, x), scattered_updates(e, x, interpret=True)):
    np.testing.assert_allclose(got, want, rtol=1e-5)


# ---------------------------------------------------------------- a decoupled look-back whose flag is set relaxed
def _lookback(release):
  @mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, F32), S((x.shape[0] // 128,), F32), S((x.shape[0] // 128,), I32)),
                  grid=lambda x: (x.shape[0] // 128,))
  def lookback(x, out, agg, flags):           # a prefix sum across programs: each waits for the one before
    i = ml.program_id(0)
    c = jnp.cumsum(x[ml.ds(i * 128, 128)])
    prefix = 0.0
    if i > 0:
      while ml.atomic_add(flags.at[i - 1], 0) == 0:
        pass
      prefix = agg[i - 1]
    agg[i] = prefix + c[127]
    if release:
      ml.atomic_add(flags.at[i], 1, sem="release")
    else:
      ml.atomic_add(flags.at[i], 1)
    out[ml.ds(i * 128, 128)] = c + prefix
  return lookback


def test_a_look_back_whose_flag_is_set_relaxed_is_hinted_to_release_it():
  """A decoupled look-back ported from Triton (`tl.atomic_add(flag, 1)`, acq_rel there) sets its flag with an atomic
  whose result nothing uses, relaxed here: the next program's read of `agg[i - 1]` races (MG951), whose hint said
  programs do not wait for each other and to read it in a second kernel, though this one waited. The hint names the
  relaxed atomic and writes it with sem="release"; so written, the look-back matches np.cumsum."""
  x = jnp.asarray(_rng(9).standard_normal(512), F32)
  with pytest.raises(mg.RaceError) as e:
    _lookback(False)(x, interpret=True)
  assert e.value.code == "MG951"
  assert e.value.hint == (
      "this program waited for flags[0] (an acquire), but the atomic that sets it at line"
      f" {_lookback.__code__.co_firstlineno + 15} is relaxed (one whose result nothing uses, where Triton's default is"
      " acq_rel), so the writes before it are not yet visible to the program that sees the flag: make it a release,"
      " ml.atomic_add(flags.at[i], 1, sem=\"release\"); or read the data in a second kernel")
  out, _, _ = _lookback(True)(x, interpret=True)
  np.testing.assert_allclose(out, np.cumsum(np.asarray(x)), rtol=1e-4, atol=1e-4)
  _export(_lookback(True), x)


@pytest.mark.gpu
def test_gpu_decoupled_look_back_with_a_released_flag():
  x = jnp.asarray(_rng(10).standard_normal(128 * 64), F32)
  out, _, _ = jax.jit(_lookback(True))(x)
  np.testing.assert_allclose(out, np.cumsum(np.asarray(x, np.float64)), rtol=1e-3, atol=1e-3)


# ---------------------------------------------------------------- jnp.nonzero / argwhere of a 2-D mask with a fill
@mg.mgpu_kernel(out_shape=lambda m: (S((40, 2), I32), S((48,), I32), S((48,), I32)), grid=(1,))
def kept_coordinates(m, where_, rows, cols):
  hit = m[...] > 0
  where_[...] = jnp.argwhere(hit, size=40, fill_value=-1)
  rows[...], cols[...] = jnp.nonzero(hit, size=48, fill_value=7)


def test_nonzero_and_argwhere_of_a_2d_mask_fill_each_coordinate():
  """jnp.argwhere(m, size=n, fill_value=-1) of a (64, 2) mask gave (-1, 1) in the slots past the count, not jnp's
  (-1, -1): the fill was put into the flat position, then split by the row width (-1 // 2, -1 % 2). Each coordinate
  is filled now (jnp.nonzero's rows and columns alike)."""
  m = jnp.asarray(_rng(11).integers(0, 2, (64, 2)) * _rng(12).integers(0, 2, (64, 2)), I32)
  w, r, c = kept_coordinates(m, interpret=True)
  np.testing.assert_array_equal(w, jnp.argwhere(m > 0, size=40, fill_value=-1))
  want_r, want_c = jnp.nonzero(m > 0, size=48, fill_value=7)
  np.testing.assert_array_equal(r, want_r)
  np.testing.assert_array_equal(c, want_c)
  _export(kept_coordinates, m)


@pytest.mark.gpu
def test_gpu_nonzero_and_argwhere_of_a_2d_mask():
  m = jnp.asarray(_rng(13).integers(0, 2, (64, 2)) * _rng(14).integers(0, 2, (64, 2)), I32)
  for got, want in zip(jax.jit(kept_coordinates)(m), kept_coordinates(m, interpret=True)):
    np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- a router of 100 tokens and 8 experts, end to end
@mg.mgpu_kernel(out_shape=lambda lg: (S((200,), I32), S((8,), I32), S((100, 2), F32), S((1,), F32)), grid=(1,))
def route_tokens(lg, order, sizes, weights, z_loss):
  x = lg[...].astype(jnp.float32)              # (100, 8): read padded
  p = jax.nn.softmax(x, axis=-1)
  w, e = jax.lax.top_k(p, 2)
  weights[...] = w / jnp.sum(w, axis=-1, keepdims=True)
  flat = e.reshape(-1)                         # the 200 (token, slot) pairs
  order[...] = jnp.argsort(flat, stable=True)  # permuted by expert
  sizes[...] = jnp.bincount(flat, length=8)
  z_loss[0] = jnp.mean(jax.nn.logsumexp(x, axis=-1) ** 2)


def _route_want(lg):
  x = np.asarray(lg, np.float32)
  w, e = jax.lax.top_k(jax.nn.softmax(x, -1), 2)
  w, flat = np.asarray(w), np.asarray(e).reshape(-1)
  z = np.asarray(jax.nn.logsumexp(x, -1))
  return np.argsort(flat, kind="stable"), np.bincount(flat, minlength=8), w / w.sum(-1, keepdims=True), [np.mean(z ** 2)]


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] * x.shape[1],), F32), S((x.shape[0],), F32)), grid=(1,))
def flat_and_lse(x, flat, lse):
  v = x[...]
  flat[...] = v.reshape(-1) * 2.0
  lse[...] = jax.nn.logsumexp(v, axis=1)


def test_router_of_odd_tokens_flattens_and_reduces_its_padded_tiles():
  """A router of 100 tokens over 8 experts (a (100, 8) read, padded in registers) was MG204 at its top-k: the
  padded trace ended at `e.reshape(-1)` of the (100, 2) experts (a padded 2-D tile's columns joined row by row, at
  most 64 rows) and at `jax.nn.logsumexp(x, axis=-1)` (its keepdims statistic made a vector by a reduction of the
  size-1 axis, which the padded trace did not follow). The flat vector is gathered from the padded tile through
  SMEM now, and the size-1 reduction keeps the padding."""
  lg = jnp.asarray(_rng(15).standard_normal((100, 8)), BF16)
  got = route_tokens(lg, interpret=True)
  for g, w in zip(got, _route_want(lg)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
  _export(route_tokens, lg)
  for shape in [(70, 5), (65, 3)]:
    x = jnp.asarray(_rng(16).standard_normal(shape), F32)
    f, l = flat_and_lse(x, interpret=True)
    np.testing.assert_allclose(f, np.asarray(x).reshape(-1) * 2.0, rtol=1e-6)
    np.testing.assert_allclose(l, jax.nn.logsumexp(x, axis=1), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_router_of_odd_tokens():
  lg = jnp.asarray(_rng(17).standard_normal((100, 8)), BF16)
  for g, w in zip(jax.jit(route_tokens)(lg), _route_want(lg)):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
  x = jnp.asarray(_rng(18).standard_normal((70, 5)), F32)
  f, l = jax.jit(flat_and_lse)(x)
  np.testing.assert_allclose(f, np.asarray(x).reshape(-1) * 2.0, rtol=1e-6)
  np.testing.assert_allclose(l, jax.nn.logsumexp(x, axis=1), rtol=1e-5)


@mg.mgpu_kernel(out_shape=lambda w, tok: S((300,), F32), grid=(1,))
def token_weights(w, tok, out):           # the routing weight each of 300 tokens got, summed over its slots
  out[...] = jnp.zeros((300,), jnp.float32).at[tok[...]].add(w[...])


@mg.mgpu_kernel(out_shape=lambda y, tok: S((512, y.shape[1]), F32), grid=(1,))
def unpermute_512(y, tok, out):
  rows = y[...].astype(jnp.float32)
  out[...] = jnp.zeros((512, y.shape[1]), jnp.float32).at[tok[...]].add(rows)


def test_at_add_into_an_odd_vector_and_into_too_many_rows():
  """`.at[ids].add` into 300 tokens' weights takes the length the vector has (a fill padded to 304 in the padded
  trace); into 512 rows of a tile (a segment reduction a row, at most 256 since probe 57a, 64 before) it is MG003 in
  the user's words, whose hint scatters into the output atomically."""
  rng = _rng(19)
  w, tok = jnp.asarray(rng.random(256), F32), jnp.asarray(rng.integers(-10, 300, 256), I32)
  np.testing.assert_allclose(token_weights(w, tok, interpret=True), jnp.zeros((300,)).at[tok].add(w), rtol=1e-5)
  expect(unpermute_512, (S((128, 32), BF16), S((128,), I32)), mg.KernelTypeError, "jnp.zeros((512, y.shape[1])",
         "jnp.zeros((512, y.shape[1]), jnp.float32).at[tok[...]].add(rows) updates 512 rows of a register tile at a"
         " vector of indices: in registers, at most 256 (one reduction of the updates a row)",
         hint="scatter the rows into the output atomically, ml.atomic_add(out.at[tok[...], :], rows) (an output"
              " updated only by atomics starts at 0; ids outside it are dropped)")


# ---------------------------------------------------------------- narrow columns joined in the padded trace
@mg.mgpu_kernel(out_shape=lambda m, v: (S((40, 2), I32), S((100, 2), F32)), grid=(1,))
def coordinates_and_pairs(m, v, where_, pairs):
  where_[...] = jnp.argwhere(m[...] > 0, size=40, fill_value=-1)    # an (80, 2) mask: read padded
  x = v[...]                                                          # 100 values: read padded
  pairs[...] = jnp.stack([x, x * 3.0], axis=-1)


def test_columns_joined_where_no_register_tensor_holds_the_parts_or_the_result():
  """jnp.argwhere of an (80, 2) mask and jnp.stack of two padded (100,) vectors along a new last axis were MG204:
  the padded trace flattened the mask (now gathered, as the router's experts) and then joined the (40, 1)
  coordinates, or the (104, 1) padded columns, by widening each part with zeros to 32 columns (no register tensor
  holds (40, 31)) or as they were ((104, 2) holds none). A column is stretched across the padded result now and
  selected in at its place."""
  rng = _rng(20)
  m = jnp.asarray(rng.integers(0, 2, (80, 2)) * rng.integers(0, 2, (80, 2)), I32)
  v = jnp.asarray(rng.standard_normal(100), F32)
  w, p = coordinates_and_pairs(m, v, interpret=True)
  np.testing.assert_array_equal(w, jnp.argwhere(m > 0, size=40, fill_value=-1))
  np.testing.assert_array_equal(p, np.stack([np.asarray(v), np.asarray(v) * 3.0], -1))
  _export(coordinates_and_pairs, m, v)


@pytest.mark.gpu
def test_gpu_columns_joined_in_the_padded_trace():
  rng = _rng(21)
  m = jnp.asarray(rng.integers(0, 2, (80, 2)) * rng.integers(0, 2, (80, 2)), I32)
  v = jnp.asarray(rng.standard_normal(100), F32)
  for got, want in zip(jax.jit(coordinates_and_pairs)(m, v), coordinates_and_pairs(m, v, interpret=True)):
    np.testing.assert_array_equal(got, want)
