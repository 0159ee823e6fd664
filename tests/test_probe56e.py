"""Probe 56e: recommendation and graph kernels (EmbeddingBag over offsets, FBGEMM's jagged ops, segment reductions,
CSR SpMV / SpMM, GAT and GraphSAGE aggregation, DLRM's pairwise interaction, hashed embeddings, loops on bounds read
from memory; the corpus that computed as it was is test_probe56e2.py). Found and fixed (frontend only):
- DLRM's lower triangle `z[li, lj]` of a register tile at 28 or 351 pairs (no multiple of 8) was MG204: the padded
  trace's register gather (ops/register_gather.py `_padded_vector`) took a 1-D tensor and one index only; it takes
  any rank and several indices now, each clamped into its own axis;
- `z[np.tril_indices(F, -1)]` (`jnp.tril_indices`, `np.triu_indices`, `np.nonzero`/`flatnonzero` of a static mask)
  was MG003: the index builders' static int arrays are register vectors of arithmetic runs (static_tables.index_tables);
- `jnp.searchsorted(offsets[...], j)` of 9 offsets indexing a gather's rows (dense to jagged) was MG204: a whole read
  of an input no multiple of 32 long is searched in the input (ops/search.py `_narrow_input`);
- `jnp.isneginf` / `jnp.isposinf` were MG003; `v.at[ids].get(mode='fill')` of a register tensor was MG003 with a
  hint about `.set`;
- a grid gather of a tile, `z[r[:, None], c[None, :]]` of (5, 40), was a misleading MG003 ("a form a register gather
  does not take"): MG204 with the padding hint, which computes (the unpadded form is left)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import where
from probe_util import export

S = jax.ShapeDtypeStruct
R = np.random.default_rng(56)


def _close(got, want, tol=1e-4):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64), rtol=tol, atol=tol)


def _both(kernel, args, want, tol=1e-4, **kw):
  """`kernel` in interpret mode against `want`, then built for CUDA."""
  _close(kernel(*args, **kw, interpret=True), want, tol)
  export(kernel, *args, **kw)


# --- DLRM's pairwise interaction: the lower triangle of x x^T per sample ---

def _dlrm_ref(x, upper=False):
  f = x.shape[1]
  li, lj = np.triu_indices(f, 1)[::-1] if upper else np.tril_indices(f, -1)
  return np.einsum("bfd,bgd->bfg", x.astype(np.float64), x.astype(np.float64))[:, li, lj]


@mg.mgpu_kernel(out_shape=lambda x, a, b: S((x.shape[0], a.shape[0]), x.dtype), grid=lambda x, a, b: (x.shape[0],))
def dlrm_pairs(x, li, lj, out):
  b = ml.program_id(0)
  v = x[b]
  z = jnp.dot(v, v.T, preferred_element_type=jnp.float32)
  out[b, :] = z[li[...], lj[...]]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] * (x.shape[1] - 1) // 2), x.dtype),
                grid=lambda x: (x.shape[0],))
def dlrm_tril(x, out, *, form: ml.constexpr = 0):
  b = ml.program_id(0)
  v = x[b]
  z = v @ v.T
  f = x.shape[1]
  if form == 0:
    i, j = np.tril_indices(f, -1)
    out[b] = z[i, j]
  elif form == 1:
    out[b] = z[jnp.tril_indices(f, -1)]
  else:
    i, j = np.triu_indices(f, 1)
    out[b] = z[j, i]


@mg.mgpu_kernel(out_shape=lambda x, a, b: S((x.shape[0], x.shape[2] + a.shape[0]), x.dtype),
                grid=lambda x, a, b: (x.shape[0],))
def dlrm_concat(x, li, lj, out):
  b = ml.program_id(0)
  v = x[b]
  z = jnp.dot(v, v.T)
  out[b, :] = jnp.concatenate([v[0], z[li[...], lj[...]]])


@pytest.mark.parametrize("f,d", [(8, 64), (27, 128)])
def test_dlrm_pairs_from_index_inputs(f, d):
  x = R.standard_normal((3, f, d)).astype(np.float32)
  li, lj = (a.astype(np.int32) for a in np.tril_indices(f, -1))
  _both(dlrm_pairs, [x, li, lj], _dlrm_ref(x), tol=2e-2)


@pytest.mark.parametrize("f", [8, 27])
@pytest.mark.parametrize("form", [0, 1, 2])
def test_dlrm_pairs_from_static_tril_indices(f, form):
  x = R.standard_normal((2, f, 64)).astype(np.float32)
  _both(dlrm_tril, [x], _dlrm_ref(x, form == 2), tol=2e-2, form=form)


def test_dlrm_dense_features_concatenated_with_pairs():
  x = R.standard_normal((2, 27, 128)).astype(np.float32)
  li, lj = (a.astype(np.int32) for a in np.tril_indices(27, -1))
  _both(dlrm_concat, [x, li, lj], np.concatenate([x[:, 0], _dlrm_ref(x)], 1), tol=2e-2)


@mg.mgpu_kernel(out_shape=lambda x, r, c: S((x.shape[0], r.shape[0]), x.dtype), grid=lambda x, r, c: (x.shape[0],))
def tile_pairs(x, r, c, out):
  b = ml.program_id(0)
  z = x[b] * 2.0
  out[b, :] = z[r[...], c[...]]


def test_padded_gather_of_a_tile_clamps_and_wraps_each_index_into_its_own_axis():
  """Indices past either end of either axis, and negative ones, read jnp's element (each axis clamped on its own)."""
  x = R.standard_normal((2, 8, 64)).astype(np.float32)
  r = np.array([0, 7, -1, -8, 9, 3, 100, -100, 2, 5, 1, 6, 4, 0, 7, 3, 2, 1, 5, 6, 0], np.int32)
  c = np.array([63, 0, -1, 64, 5, -64, 70, 2, 1, 3, -2, 33, 17, 9, 8, 7, 6, 5, 4, 3, 2], np.int32)
  want = np.asarray(jnp.asarray(x * 2.0)[:, jnp.asarray(r), jnp.asarray(c)])
  _both(tile_pairs, [x, r, c], want)


# --- bags over offsets (ragged, empty) ---

def _bags(seed, v=50, d=128, lens=(3, 0, 5, 1, 0, 7, 2, 4)):
  r = np.random.default_rng(seed)
  offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  idx = r.integers(0, v, int(offs[-1])).astype(np.int32)
  return r.standard_normal((v, d)).astype(np.float32), idx, offs


def _bag_ref(table, idx, offs, mode):
  out = np.zeros((len(offs) - 1, table.shape[1]), np.float32)
  for b in range(len(offs) - 1):
    rows = table[idx[offs[b]:offs[b + 1]]]
    if len(rows):
      out[b] = {"sum": rows.sum(0), "mean": rows.mean(0), "max": rows.max(0)}[mode]
  return out


@mg.mgpu_kernel(out_shape=lambda t, i, o: S((o.shape[0] - 1, t.shape[1]), t.dtype), grid=lambda t, i, o: (o.shape[0] - 1,))
def bag_max_fori(table, idx, offs, out, *, pos: ml.constexpr = False):
  b = ml.program_id(0)
  if pos:
    acc = jax.lax.fori_loop(offs[b], offs[b + 1], lambda j, a: jnp.minimum(a, table[idx[j]]), jnp.full((table.shape[1],), jnp.inf))
    out[b] = -jnp.where(jnp.isposinf(acc), 0.0, acc)
  else:
    acc = jax.lax.fori_loop(offs[b], offs[b + 1], lambda j, a: jnp.maximum(a, table[idx[j]]), jnp.full((table.shape[1],), -jnp.inf))
    out[b] = jnp.where(jnp.isneginf(acc), 0.0, acc)


@pytest.mark.parametrize("pos", [False, True])
def test_bag_max_with_isneginf_for_empty_bags(pos):
  """jnp.isneginf / jnp.isposinf were MG003 ('no ml.isneginf'): they are x == -inf (inf)."""
  table, idx, offs = _bags(1)
  want = _bag_ref(-table if pos else table, idx, offs, "max")
  _both(bag_max_fori, [table, idx, offs], want, pos=pos)


@mg.mgpu_kernel(out_shape=lambda x: (S(x.shape, jnp.bool_), S(x.shape, jnp.bool_)))
def inf_flags(x, neg, pos):
  v = x[...]
  neg[...] = jnp.isneginf(v)
  pos[...] = jnp.isposinf(v) | jnp.isneginf(v.astype(jnp.int32))


def test_isneginf_isposinf_of_floats_and_ints():
  x = R.standard_normal(128).astype(np.float32)
  x[[1, 5, 9]] = [np.inf, -np.inf, np.nan]
  neg, pos = inf_flags(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(neg), np.isneginf(x))
  np.testing.assert_array_equal(np.asarray(pos), np.isposinf(x))
  export(inf_flags, x)


# --- dense to jagged: each row finds its bag by a search of the offsets ---

@mg.mgpu_kernel(out_shape=lambda d, o, n: S((n.shape[0], d.shape[1]), d.dtype),
                grid=lambda d, o, n: (ml.cdiv(n.shape[0], 8),))
def dense_to_jagged_search(dense, offsets, rows_like, out, *, L: ml.constexpr = 8, Q: ml.constexpr = 8):
  p = ml.program_id(0)
  j = p * Q + ml.arange(Q)
  bag = jnp.searchsorted(offsets[...], j, side="right") - 1
  t = j - offsets[bag]
  cols = ml.arange(dense.shape[1])
  m = j < rows_like.shape[0]
  rows = ml.load(dense.at[bag * L + t, :], mask=m[:, None], other=0.0)
  ml.store(out.at[j[:, None], cols[None, :]], rows, mask=m[:, None])


@pytest.mark.parametrize("lens", [(3, 0, 5, 1, 0, 7, 2, 4), (8, 1, 0, 0, 2, 8, 3, 3, 1, 6, 0, 5)])
def test_dense_to_jagged_bags_found_by_searchsorted_of_odd_offsets(lens):
  """`jnp.searchsorted(offsets[...], j)` of 9 (13) offsets whose result indexes a gather's rows was MG204 (the
  (8, 9) count tile took the gather's row layout): a whole read of an input of a length no multiple of 32 is
  searched in the input itself (binary search, jnp's answer)."""
  b, L, d = len(lens), 8, 128
  offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  dense = R.standard_normal((b * L, d)).astype(np.float32)
  n = int(offs[-1])
  want = np.concatenate([dense[k * L:k * L + lens[k]] for k in range(b)])
  _both(dense_to_jagged_search, [dense, offs, np.zeros(n, np.int32)], want, L=L)


@mg.mgpu_kernel(out_shape=lambda o, q: S(q.shape, jnp.int32))
def search_unsorted(a, q, out):
  out[...] = jnp.searchsorted(a[...], q[...], side="left")


def test_search_of_a_narrow_input_matches_jnp_on_ties_and_ends():
  a = np.array([0, 2, 2, 2, 5, 9, 9, 11, 40], np.int32)
  q = np.random.default_rng(3).integers(-3, 45, 128).astype(np.int32)
  got = search_unsorted(a, q, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(jnp.searchsorted(jnp.asarray(a), jnp.asarray(q))))
  export(search_unsorted, a, q)


def _gpu():
  return any(d.platform == "gpu" for d in jax.devices())


@pytest.mark.gpu
@pytest.mark.skipif(not _gpu(), reason="needs an NVIDIA Hopper GPU")
def test_gpu_dlrm_pairs_and_bags_found_by_search():
  """The padded register gather of a tile at two index vectors, the index builders' runs, and the binary search of
  a narrow input, on the GPU (no lowering changed: new compositions of existing ops)."""
  for f in (8, 27):
    x = R.standard_normal((3, f, 64)).astype(np.float32)
    li, lj = (a.astype(np.int32) for a in np.tril_indices(f, -1))
    _close(dlrm_pairs(x, li, lj), _dlrm_ref(x), 2e-2)
    _close(dlrm_tril(x, form=0), _dlrm_ref(x), 2e-2)
  x = R.standard_normal((2, 8, 64)).astype(np.float32)
  r = np.array([0, 7, -1, -8, 9, 3, 100, -100, 2, 5, 1, 6, 4, 0, 7, 3, 2, 1, 5, 6, 0], np.int32)
  c = np.array([63, 0, -1, 64, 5, -64, 70, 2, 1, 3, -2, 33, 17, 9, 8, 7, 6, 5, 4, 3, 2], np.int32)
  _close(tile_pairs(x, r, c), np.asarray(jnp.asarray(x * 2.0)[:, jnp.asarray(r), jnp.asarray(c)]))
  lens = (3, 0, 5, 1, 0, 7, 2, 4)
  offs = np.concatenate([[0], np.cumsum(lens)]).astype(np.int32)
  dense = R.standard_normal((64, 128)).astype(np.float32)
  want = np.concatenate([dense[k * 8:k * 8 + lens[k]] for k in range(8)])
  _close(dense_to_jagged_search(dense, offs, np.zeros(int(offs[-1]), np.int32)), want)
  table, idx, offs = _bags(1)
  _close(bag_max_fori(table, idx, offs), _bag_ref(table, idx, offs, "max"))


# --- jnp's v.at[ids].get(mode="fill"): a lookup whose ids may fall outside the table ---

@mg.mgpu_kernel(out_shape=lambda t, v, i: (S((i.shape[0], t.shape[1]), t.dtype), S(i.shape, v.dtype),
                                           S(i.shape, jnp.float32)))
def at_get_fill(t, v, i, rows, ints, fl):
  ids = i[...]
  rows[...] = (t[...] * 2.0).at[ids].get(mode="fill", fill_value=0.0)
  ints[...] = (v[...] + 1).at[ids].get(mode="fill")
  fl[...] = v[...].astype(jnp.float32).at[ids].get(mode="drop")


def test_at_get_with_fill_gives_the_fill_outside_and_wraps_negatives_inside():
  """`.at[ids].get(mode='fill')` of a register tensor was MG003 with a hint about .set: ids outside [-n, n) give
  fill_value (jnp's default: NaN, the lowest int32), negative ones inside count from the end."""
  t = R.standard_normal((64, 128)).astype(np.float32)
  v = R.integers(-100, 100, 256).astype(np.int32)
  i = R.integers(-300, 300, 128).astype(np.int32)
  got = at_get_fill(t, v, i, interpret=True)
  want = (jnp.asarray(t * 2).at[i].get(mode="fill", fill_value=0.0), jnp.asarray(v + 1).at[i].get(mode="fill"),
          jnp.asarray(v, jnp.float32).at[i].get(mode="drop"))
  for g, w in zip(got, want):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  assert np.isnan(np.asarray(got[2])).any() and (np.asarray(got[1]) == np.iinfo(np.int32).min).any()
  export(at_get_fill, t, v, i)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] * (x.shape[1] - 1) // 2), x.dtype),
                grid=lambda x: (x.shape[0],))
def dlrm_nonzero(x, out, *, flat: ml.constexpr = False):
  b = ml.program_id(0)
  v = x[b]
  z = jnp.dot(v, v.T, preferred_element_type=jnp.float32)
  f = x.shape[1]
  if flat:
    out[b] = z.reshape(-1)[np.flatnonzero(np.tri(f, k=-1))].astype(out.dtype)
  else:
    i, j = np.nonzero(np.tri(f, k=-1))
    out[b] = z[i, j].astype(out.dtype)


@pytest.mark.parametrize("flat", [False, True])
@pytest.mark.parametrize("dtype", [np.float32, jnp.bfloat16])
def test_dlrm_pairs_from_nonzero_of_a_static_mask(flat, dtype):
  x = R.standard_normal((2, 27, 64)).astype(dtype)
  _both(dlrm_nonzero, [x], _dlrm_ref(np.asarray(x, np.float32)), tol=5e-2, flat=flat)


def test_index_builders_under_x64_are_int64_runs():
  with jax.enable_x64(True):
    x = R.standard_normal((2, 27, 64)).astype(np.float32)
    _both(dlrm_tril, [x], _dlrm_ref(x), tol=2e-2, form=1)
    ir = dlrm_tril.typed_ir(S(x.shape, x.dtype), form=1)
    assert "int64" in str(ir) or "i64" in str(ir)


# --- a grid of pairs from a tile: z[r[:, None], c[None, :]] of (5, 40) ---

@mg.mgpu_kernel(out_shape=lambda x, r, c: S((x.shape[0], r.shape[0], c.shape[0]), x.dtype),
                grid=lambda x, r, c: (x.shape[0],))
def grid_pick(x, r, c, out):
  b = ml.program_id(0)
  v = x[b]
  z = jnp.dot(v, v.T, preferred_element_type=jnp.float32)
  out[b] = z[r[...][:, None], c[...][None, :]]


@mg.mgpu_kernel(out_shape=lambda x, r, c: S((x.shape[0], r.shape[0], c.shape[0]), x.dtype),
                grid=lambda x, r, c: (x.shape[0],))
def grid_pick_padded(x, r, c, out):
  b = ml.program_id(0)
  v = x[b]
  z = jnp.dot(v, v.T, preferred_element_type=jnp.float32)
  i = ml.arange(8)
  j = ml.arange(64)
  rr = r.at[i].load(mask=i < r.shape[0], other=0)
  cc = c.at[j].load(mask=j < c.shape[0], other=0)
  out.at[b, i[:, None], j[None, :]].store(z[rr[:, None], cc[None, :]],
                                          mask=(i[:, None] < r.shape[0]) & (j[None, :] < c.shape[0]))


def test_grid_gather_of_a_tile_is_mg204_whose_hint_pads_and_the_padded_form_computes():
  """`z[r[:, None], c[None, :]]` of a (5, 40) grid was MG003 "a form a register gather does not take" (it takes it,
  at a padded grid): MG204 now, whose hint (indices read padded to (8, 64), the result stored under the mask)
  computes. (The padded trace does not reach it: c's 40 lanes are no padded read.)"""
  x = R.standard_normal((2, 27, 64)).astype(np.float32)
  r = R.integers(-30, 30, 5).astype(np.int32)
  c = R.integers(-30, 30, 40).astype(np.int32)
  with pytest.raises(mg.LayoutError) as info:
    grid_pick(x, r, c, interpret=True)
  e = info.value
  assert e.code == "MG204" and (e.lineno, e.col_offset) == where(grid_pick, "z[r[...]"), e.render()
  assert e.message == ("a gather from z at a (5, 40) tile of indices gives 200 elements, which no register tensor"
                       " holds (a tile holds a multiple of 128)")
  assert e.hint.startswith("read the indices padded to (8, 64) under a mask (other=0)")
  z = jnp.einsum("bfd,bgd->bfg", x, x)
  _both(grid_pick_padded, [x, r, c], np.asarray(z[:, jnp.asarray(r)[:, None], jnp.asarray(c)[None, :]]), tol=2e-2)


# --- early exits (corpus: computed before the probe) ---

@mg.mgpu_kernel(out_shape=lambda x, t: S((t.shape[0],), jnp.int32), grid=lambda x, t: (t.shape[0],))
def first_at_least(x, t, out, *, chunks: ml.constexpr = False):
  q = ml.program_id(0)
  v = t[q]
  if chunks:
    res = x.shape[0]
    for c in range(0, x.shape[0], 128):
      k = c + ml.arange(128)
      hit = ml.load(x.at[k], mask=k < x.shape[0], other=-jnp.inf) >= v
      if jnp.any(hit):
        res = c + jnp.argmax(hit)
        break
    out[q] = res
  else:
    i = 0
    while True:
      if i >= x.shape[0]:
        break
      if x[i] >= v:
        break
      i += 1
    out[q] = i


@pytest.mark.parametrize("chunks", [False, True])
def test_early_exit_searches(chunks):
  x = np.sort(R.standard_normal(300)).astype(np.float32)
  t = R.standard_normal(16).astype(np.float32)
  t[:2] = [100, -100]
  got = first_at_least(x, t, chunks=chunks, interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.searchsorted(x, t, side="left"))
  export(first_at_least, x, t, chunks=chunks)
