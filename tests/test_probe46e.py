"""Probe 46e (data-dependent and MoE kernels: routing, permutations, grouped GEMMs, compaction, segments,
searches, run-time loops): top-k routing as users write it. `ml.top_k` (jax.lax.top_k: the k largest along
the last axis and their positions; `jax.lax.top_k` in a kernel was MG003 hinting a hand-written top-k), sorts
of any length (a sort needed a power of two: 60 experts, 120 tokens were MG003) and of 3-D tensors along
their last axis (group-limited routing's (tokens, groups, experts) scores were MG003)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import builds, expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
I32 = jnp.int32


def _top_k(x, k):
  """jax.lax.top_k as documented: largest first, equal elements by position (XLA's CPU top_k breaks ties
  otherwise for k near the row's length), floats in XLA's total order (a positive NaN first, +0.0 above -0.0:
  probe 53c; it was jnp's descending sort, which ties the zeros)."""
  keys = np.asarray(x)
  if np.issubdtype(np.asarray(x).dtype, np.floating) or keys.dtype == jnp.bfloat16:
    b = np.asarray(x, np.float32).view(np.int32).astype(np.int64)
    keys = np.where(b < 0, b ^ 0x7FFFFFFF, b)
  i = np.argsort(-keys.astype(np.int64), axis=-1, kind="stable")[..., :k].astype(np.int32)
  return np.take_along_axis(np.asarray(x), i, axis=-1), i


def _softmax(x):
  e = np.exp(x - x.max(-1, keepdims=True))
  return e / e.sum(-1, keepdims=True)


def _ties(rng, shape, dtype):
  """Values with many ties (halves), for orders that must break them by position."""
  return (np.round(rng.standard_normal(shape) * 4) / 2).astype(dtype)


# ---------------------------------------------------------------- ml.top_k
@mg.mgpu_kernel(out_shape=lambda x, *, k: (S((*x.shape[:-1], k), x.dtype), S((*x.shape[:-1], k), I32)))
def top_k_rows(x, vals, ids, *, k: ml.constexpr):
  v, i = ml.top_k(x[...], k)
  vals[...] = v
  ids[...] = i


@mg.mgpu_kernel(out_shape=lambda lg, *, k: (S((lg.shape[0], k), F32), S((lg.shape[0], k), I32)),
                grid=lambda lg, *, k: (lg.shape[0] // 64,))
def route(logits, w_out, i_out, *, k: ml.constexpr):
  t = ml.program_id(0)
  p = ml.softmax(logits.at[ml.ds(t * 64, 64), :][...].astype(F32), axis=-1)
  w, i = ml.top_k(p, k)
  w_out.at[ml.ds(t * 64, 64), :][...] = w / ml.sum(w, axis=-1, keepdims=True)     # renormalised
  i_out.at[ml.ds(t * 64, 64), :][...] = i


def _route_ref(lg, k):
  w, i = _top_k(_softmax(np.asarray(lg, np.float32)), k)
  return w / w.sum(-1, keepdims=True), i


_TOP_K_CASES = [((64,), np.float32, 8), ((128, 8), np.float32, 2), ((64, 16), np.int32, 4),
                ((4, 16, 8), np.float32, 2), ((64, 64), jnp.bfloat16, 64)]


@pytest.mark.parametrize("shape,dtype,k", _TOP_K_CASES, ids=str)
def test_top_k_is_jax_lax_top_k(shape, dtype, k):
  """Was MG002 (ml has no top_k; jax.lax.top_k in a kernel MG003), hinting a sort and a slice by hand."""
  x = _ties(np.random.default_rng(len(shape) * 10 + k), shape, dtype)
  x.reshape(-1)[:3] = [np.nan, np.inf, -np.inf] if dtype != np.int32 else [7, -7, 0]
  v, i = top_k_rows(jnp.asarray(x), k=k, interpret=True)
  want_v, want_i = _top_k(x, k)
  np.testing.assert_array_equal(np.asarray(v, np.float32), np.asarray(want_v, np.float32))
  np.testing.assert_array_equal(np.asarray(i), want_i)


def test_top_k_builds_for_the_gpu():
  for shape, dtype, k in _TOP_K_CASES[1:4]:
    builds(top_k_rows, S(shape, dtype), k=k)


@pytest.mark.parametrize("experts,k,dtype", [(8, 2, jnp.bfloat16), (60, 4, F32), (256, 8, F32)])
def test_routing_with_top_k_matches_numpy_and_exports(experts, k, dtype):
  """Mixtral's 8 experts (k = 2), Qwen1.5-MoE's 60 (k = 4, a sort of 60 was MG003), DeepSeek's 256 (k = 8)."""
  lg = np.random.default_rng(experts).standard_normal((128, experts)).astype(dtype)
  w, i = route(jnp.asarray(lg), k=k, interpret=True)
  want_w, want_i = _route_ref(lg, k)
  np.testing.assert_array_equal(np.asarray(i), want_i)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  spec = S(lg.shape, dtype)
  assert "mosaic_gpu" in jax.export.export(jax.jit(lambda a: route(a, k=k)), platforms=["cuda"])(spec).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x, w, *, k: (S((x.shape[0], k), F32), S((x.shape[0], k), I32)),
                grid=lambda x, w, *, k: (x.shape[0] // 64,))
def fused_router(x, w, w_out, i_out, *, k: ml.constexpr):
  """The gate's logits from the tensor cores, then the top k: the sort keeps the dot's layout, whose columns
  slice in registers only by whole 8-column tiles."""
  t = ml.program_id(0)
  xs = ml.smem((64, x.shape[1]), x.dtype)
  ws = ml.smem(w.shape, w.dtype)
  ml.copy(x.at[ml.ds(t * 64, 64), :], xs)
  ml.copy(w, ws)
  p = ml.softmax(ml.dot(xs, ws, ml.zeros((64, w.shape[1]), F32)), axis=-1)
  v, i = ml.top_k(p, k)
  w_out.at[ml.ds(t * 64, 64), :][...] = v / ml.sum(v, axis=-1, keepdims=True)
  i_out.at[ml.ds(t * 64, 64), :][...] = i


def _fused_router_inputs(experts):
  rng = np.random.default_rng(experts + 1)
  return (rng.standard_normal((128, 64)).astype(jnp.bfloat16),
          (rng.standard_normal((64, experts)) * 0.1).astype(jnp.bfloat16))


@pytest.mark.parametrize("experts,k", [(64, 2), (160, 6), (64, 8)])
def test_top_k_of_a_dot_result_takes_any_k(experts, k):
  """k = 2 and 6 were MG204 at ml.top_k (columns 0:2 are not whole 8-column tiles of the dot's layout)."""
  x, w = _fused_router_inputs(experts)
  got_w, got_i = fused_router(jnp.asarray(x), jnp.asarray(w), k=k, interpret=True)
  want_w, want_i = _route_ref(np.asarray(x, np.float32) @ np.asarray(w, np.float32), k)
  np.testing.assert_array_equal(np.asarray(got_i), want_i)
  np.testing.assert_allclose(np.asarray(got_w), want_w, rtol=1e-4, atol=1e-5)
  builds(fused_router, S(x.shape, jnp.bfloat16), S(w.shape, jnp.bfloat16), k=k)


@pytest.mark.parametrize("shape,k", [((64, 8), 3), ((48, 32), 5), ((64,), 5), ((256,), 12)], ids=str)
def test_a_top_k_no_register_tensor_holds_is_stored_padded(shape, k):
  """(64, 3) values were MG204 at ml.top_k (192 elements; a (5,) vector too): the padded trace keeps them (64, 4)
  and its masked store writes the (64, 3) output."""
  x = _ties(np.random.default_rng(sum(shape) + k), shape, np.float32)
  v, i = top_k_rows(jnp.asarray(x), k=k, interpret=True)
  want_v, want_i = _top_k(x, k)
  np.testing.assert_array_equal(np.asarray(v), want_v)
  np.testing.assert_array_equal(np.asarray(i), want_i)
  builds(top_k_rows, S(shape, F32), k=k)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 3), F32))
def top_3_scaled_by_its_width(x, out):
  v, i = ml.top_k(x[...], 3)
  out[...] = v * v.shape[1]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), F32))
def top_k_k_past_the_row(x, out):
  v, i = ml.top_k(x[...], 9)
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x, k: S((x.shape[0], 2), F32))
def top_k_run_time_k(x, k, out):
  v, i = ml.top_k(x[...], k[0])
  out[...] = v


@mg.mgpu_kernel(out_shape=lambda x: (S((2, x.shape[1]), F32), S((2, x.shape[1]), I32)))
def top_k_down_columns(x, vals, ids):
  v, i = ml.top_k(x[...], 2, axis=0)
  vals[...] = v
  ids[...] = i


@mg.mgpu_kernel(out_shape=lambda x: (S((2, x.shape[1]), F32), S((2, x.shape[1]), I32)))
def top_k_down_columns_followed(x, vals, ids):
  v, i = ml.top_k(x[...].T, 2)
  vals[...] = v.T
  ids[...] = i.T


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2), F32))
def lax_top_k(x, out):
  v, i = jax.lax.top_k(x[...], 2)
  out[...] = v


def test_top_k_mistakes_are_reported_at_the_call():
  expect(top_k_k_past_the_row, [S((64, 8), F32)], mg.KernelTypeError, "ml.top_k(",
         "ml.top_k: k=9 of 8 elements along the last axis", hint="k is 1 to 8")
  expect(top_k_run_time_k, [S((64, 8), F32), S((1,), I32)], mg.KernelTypeError, "ml.top_k(",
         "ml.top_k: k is a static int, got k[0]",
         hint="k sets the shape of the result: pass a Python int or a constexpr, ml.top_k(p, 2)")
  y = np.random.default_rng(20).standard_normal((64, 8)).astype(np.float32)   # (v.shape of the padded top 3 ended
  np.testing.assert_allclose(np.asarray(top_3_scaled_by_its_width(y, interpret=True)),  # the padded trace, MG204;
                             -np.sort(-y, 1)[:, :3] * 3, rtol=1e-6)                      # since probe 46j it is (64, 3))
  expect(top_k_down_columns, [S((128, 64), F32)], mg.KernelTypeError, "ml.top_k(",
         "ml.top_k takes the top k along the last axis; axis 0 of a 2-D tensor is not it",
         hint="transpose first: v, i = ml.top_k(x[...].T, 2); then v.T and i.T hold each column's top 2")
  x = _ties(np.random.default_rng(19), (128, 64), np.float32)
  v, i = top_k_down_columns_followed(jnp.asarray(x), interpret=True)
  want_v, want_i = _top_k(x.T, 2)
  np.testing.assert_array_equal(np.asarray(v), want_v.T)
  np.testing.assert_array_equal(np.asarray(i), want_i.T)
  x = _ties(np.random.default_rng(20), (64, 8), np.float32)     # jax.lax.top_k is ml.top_k since probe 46i
  np.testing.assert_array_equal(np.asarray(lax_top_k(jnp.asarray(x), interpret=True)),
                                np.asarray(jax.lax.top_k(x, 2)[0]))


# ---------------------------------------------------------------- sorts of any length
@mg.mgpu_kernel(out_shape=lambda x, *, descending: (x, S(x.shape, I32)))
def sort_any(x, y, ix, *, descending: ml.constexpr):
  y[...] = ml.sort(x[...], descending=descending)
  ix[...] = ml.argsort(x[...], descending=descending)


def _sorted(x, descending):
  i = np.asarray(jnp.argsort(jnp.asarray(x), axis=-1, descending=descending, stable=True))
  v = np.asarray(jnp.sort(jnp.asarray(x), axis=-1, descending=descending))
  return v, i


_ODD = [((120,), np.int32), ((64, 60), np.float32), ((32, 24), jnp.bfloat16), ((16, 40), np.uint8),
        ((32, 12), np.float32)]


@pytest.mark.parametrize("shape,dtype", _ODD, ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_a_sort_of_any_length_is_jnps(shape, dtype, descending):
  """Was MG003 ("the sorted axis has 60 elements, and a sort needs a power of two"), hinting a padded window."""
  rng = np.random.default_rng(sum(shape))
  if np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
    x.reshape(-1)[:4] = [info.max, info.min, info.max, info.min]       # equal to a padding's value
  else:
    x = _ties(rng, shape, dtype)
    x.reshape(-1)[:5] = [np.nan, -np.inf, np.inf, -0.0, np.nan]
  y, ix = sort_any(jnp.asarray(x), descending=descending, interpret=True)
  want_y, want_ix = _sorted(x, descending)
  np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(want_y, np.float32))
  np.testing.assert_array_equal(np.asarray(ix), want_ix)


def test_a_sort_of_any_length_runs_the_network_on_the_next_power_of_two():
  """The partners at 60 or past it are elements after every real one: their addresses are clamped into the row
  (arith.minui) and the element keeps its own."""
  text = sort_any.mlir(S((64, 60), F32), descending=True)
  assert "arith.minui" in text
  assert "arith.minui" not in sort_any.mlir(S((64, 64), F32), descending=True)
  for shape, dtype in _ODD[:3]:
    builds(sort_any, S(shape, dtype), descending=False)


@mg.mgpu_kernel(out_shape=lambda e: (S(e.shape, I32), S(e.shape, I32)))
def expert_order(e_ref, order, rank):
  """The permutation that sorts 120 tokens by expert, and each token's slot in it (its inverse)."""
  e = e_ref[...]
  perm = ml.argsort(e)
  order[...] = perm
  rank[perm] = ml.arange(e.shape[0])


def test_the_permutation_of_a_tail_of_tokens_sorts_by_expert():
  e = np.random.default_rng(5).integers(0, 8, 120).astype(np.int32)
  order, rank = expert_order(jnp.asarray(e), interpret=True)
  want = np.argsort(e, kind="stable")
  np.testing.assert_array_equal(np.asarray(order), want)
  np.testing.assert_array_equal(np.asarray(rank), np.argsort(want))
  builds(expert_order, S((120,), I32))


# ---------------------------------------------------------------- 3-D sorts: group-limited routing
@mg.mgpu_kernel(out_shape=lambda lg, b: (S((lg.shape[0], 8), F32), S((lg.shape[0], 8), I32)))
def grouped_route(logits, bias, w_out, i_out, *, groups: ml.constexpr = 8, keep: ml.constexpr = 4):
  """DeepSeek-V3's router: sigmoid scores, a bias for the choice only, the best `keep` groups by the sum of their
  two best scores, then the top 8 experts of those groups, weighted by their unbiased scores."""
  s = ml.sigmoid(logits[...].astype(F32))
  sc = s + bias[...][None, :]
  t, e = sc.shape
  best2 = ml.sort(sc.reshape((t, groups, e // groups)), descending=True)[:, :, :2]     # 3-D: was MG003
  _, g = ml.top_k(ml.sum(best2, axis=-1), keep)
  hit = ml.zeros((t, groups), jnp.bool_)
  for j in ml.static_range(keep):
    hit = hit | (ml.arange(groups)[None, :] == g[:, j:j + 1])
  on = ml.broadcast_to(hit[:, :, None], (t, groups, e // groups)).reshape((t, e))
  _, i = ml.top_k(ml.where(on, sc, float("-inf")), 8)
  w = ml.take_along_axis(s, i, axis=1)
  w_out[...] = w / ml.sum(w, axis=-1, keepdims=True) * 2.5
  i_out[...] = i


def _grouped_ref(lg, bias):
  s = 1 / (1 + np.exp(-lg.astype(np.float32)))
  sc = s + bias
  t, e = sc.shape
  best2 = -np.sort(-sc.reshape(t, 8, e // 8), axis=-1)[..., :2]
  g = _top_k(best2.sum(-1), 4)[1]
  hit = np.zeros((t, 8), bool)
  np.put_along_axis(hit, g, True, axis=1)
  i = _top_k(np.where(np.repeat(hit, e // 8, axis=1), sc, -np.inf), 8)[1]
  w = np.take_along_axis(s, i, axis=1)
  return w / w.sum(-1, keepdims=True) * 2.5, i


def test_group_limited_routing_sorts_its_3d_scores():
  rng = np.random.default_rng(11)
  lg = rng.standard_normal((64, 64)).astype(np.float32)
  bias = (rng.standard_normal(64) * 0.1).astype(np.float32)
  w, i = grouped_route(jnp.asarray(lg), jnp.asarray(bias), interpret=True)
  want_w, want_i = _grouped_ref(lg, bias)
  np.testing.assert_array_equal(np.asarray(i), want_i)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  builds(grouped_route, S((64, 64), F32), S((64,), F32))


def test_a_4d_sort_sorts_each_row_of_its_last_axis():
  x = _ties(np.random.default_rng(12), (2, 4, 8, 24), np.float32)
  y, ix = sort_any(jnp.asarray(x), descending=False, interpret=True)
  want_y, want_ix = _sorted(x, False)
  np.testing.assert_array_equal(np.asarray(y), want_y)
  np.testing.assert_array_equal(np.asarray(ix), want_ix)
  builds(sort_any, S((2, 4, 8, 24), F32), descending=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_middle_axis(x, out):
  out[...] = ml.sort(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_middle_axis_followed(x, out):
  out[...] = ml.transpose(ml.sort(ml.transpose(x[...], (0, 2, 1))), (0, 2, 1))


def test_a_3d_sort_along_another_axis_hints_the_permute_that_works():
  """The hint was the 2-D one, ml.sort(x[...].T).T, which reverses all three axes of a 3-D tensor."""
  x = _ties(np.random.default_rng(18), (4, 8, 32), np.float32)
  np.testing.assert_array_equal(np.asarray(sort_middle_axis_followed(jnp.asarray(x), interpret=True)), np.sort(x, 1))
  # (MG003 whose hint wrote these transposes until probe 52d made the sort do them)
  np.testing.assert_array_equal(np.asarray(sort_middle_axis(jnp.asarray(x), interpret=True)), np.sort(x, 1))


# ---------------------------------------------------------------- ml.searchsorted
@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def row_groups(off, out, *, side: ml.constexpr = "right"):
  """The group of each of 256 rows, from E + 1 offsets: the binary search of the GMEM array, by gathers."""
  out[...] = ml.searchsorted(off, ml.arange(256), side=side) - 1


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def row_groups_counted(off, out):
  """The same from the offsets read whole (9 of them: read padded): counts of comparisons."""
  out[...] = ml.searchsorted(off[...], ml.arange(256), side="right") - 1


@mg.mgpu_kernel(out_shape=lambda off: S((8,), I32), grid=(8,))
def tile_groups(off, out):
  """A grouped GEMM's program finding the group its first row falls in: a binary search on scalars."""
  t = ml.program_id(0)
  out[t] = ml.searchsorted(off, t * 32, side="right") - 1


@mg.mgpu_kernel(out_shape=lambda a, q: S(q.shape, I32))
def float_search(a, q, out):
  out[...] = ml.searchsorted(a, q[...])


_OFFS = np.array([0, 10, 10, 50, 100, 180, 200, 256, 256], np.int32)     # empty groups, ties at the ends


@pytest.mark.parametrize("kernel,side", [(row_groups, "right"), (row_groups, "left"), (row_groups_counted, "right")],
                         ids=["gathers_right", "gathers_left", "counts"])
def test_searchsorted_of_offsets_is_jnps(kernel, side):
  """Was MG003 (jnp.searchsorted) or MG002 (ml.searchsorted), hinting the search written out."""
  kw = {"side": side} if kernel is row_groups else {}
  got = kernel(jnp.asarray(_OFFS), interpret=True, **kw)
  np.testing.assert_array_equal(np.asarray(got), np.searchsorted(_OFFS, np.arange(256), side=side) - 1)
  builds(kernel, S((9,), I32), **kw)


def test_searchsorted_of_scalars_and_of_2d_float_queries_is_jnps():
  got = tile_groups(jnp.asarray(_OFFS), interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.searchsorted(_OFFS, np.arange(8) * 32, side="right") - 1)
  builds(tile_groups, S((9,), I32))
  rng = np.random.default_rng(14)
  a = np.sort(rng.standard_normal(100)).astype(np.float32)
  a[10:14] = a[10]
  q = rng.standard_normal((64, 32)).astype(np.float32)
  q[0, :4] = a[10]
  np.testing.assert_array_equal(np.asarray(float_search(jnp.asarray(a), jnp.asarray(q), interpret=True)),
                                np.searchsorted(a, q))
  builds(float_search, S((100,), F32), S((64, 32), F32))


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def search_side_middle(off, out):
  out[...] = ml.searchsorted(off, ml.arange(256), side="middle")


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def search_2d_queries_of_a_vector(off, out):      # (computed since probe 53i: the flattened queries counted)
  out[...] = ml.searchsorted(off[...], ml.arange(256).reshape((2, 128))).reshape((256,))


@mg.mgpu_kernel(out_shape=lambda off: S((2, 16), I32))
def search_small_2d_queries_of_a_vector(off, out):
  out[...] = ml.searchsorted(off[...], ml.arange(32).reshape((2, 16)))


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def search_a_table(off, out):
  out[...] = ml.searchsorted(off, ml.arange(256))


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def search_with_a_sorter(off, out):
  out[...] = ml.searchsorted(off, ml.arange(256), sorter=ml.argsort(off[...]))


@mg.mgpu_kernel(out_shape=lambda off: S((256,), I32))
def search_by_method(off, out):
  out[...] = ml.searchsorted(off, ml.arange(256), method="binary")


@mg.mgpu_kernel(out_shape=lambda x: x)
def sort_a_scalar(x, out):
  out[...] = ml.sort(x[0])


def test_searchsorted_mistakes_are_reported_at_the_call():
  expect(search_a_table, [S((4, 8), I32)], mg.KernelTypeError, "ml.searchsorted(",
         "ml.searchsorted searches a 1-D sorted array, got off of shape (4, 8)",
         hint="search one row of it: ml.searchsorted(off.at[r], v)")
  expect(search_with_a_sorter, [S((16,), I32)], mg.KernelTypeError, "ml.searchsorted(",
         "ml.searchsorted takes no sorter=",
         hint="search the sorted values themselves: ml.searchsorted(ml.sort(a), v), or a[ml.argsort(a)] read as a"
              " gather")
  expect(search_by_method, [S((16,), I32)], mg.KernelTypeError, "ml.searchsorted(",
         "ml.searchsorted: method is one of jnp's ('scan', 'scan_unrolled', 'sort', 'compare_all'), got 'binary'",
         hint="leave it out: the compiler picks the search")
  expect(sort_a_scalar, [S((16,), F32)], mg.KernelTypeError, "ml.sort(",
         "ml.sort takes a register tensor, got a scalar",
         hint="ml.sort sorts the elements of a tensor along its last axis; a scalar is sorted already: use it as it is")
  expect(search_side_middle, [S((16,), I32)], mg.KernelTypeError, "ml.searchsorted(",
         "ml.searchsorted: side is 'left' or 'right', got 'middle'",
         hint="side='left' counts the elements below each query, side='right' those not above it")
  off = np.sort(np.random.default_rng(4).integers(0, 256, 16)).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(search_2d_queries_of_a_vector(off, interpret=True)),
                                np.searchsorted(off, np.arange(256)))
  np.testing.assert_array_equal(      # (MG003 until probe 54a: a (2, 16) tile of queries is counted flattened too)
      np.asarray(search_small_2d_queries_of_a_vector(off, interpret=True)),
      np.searchsorted(off, np.arange(32)).reshape(2, 16))


# ---------------------------------------------------------------- odd counts read whole: sorted padded
@mg.mgpu_kernel(out_shape=lambda lg, *, k: (S((lg.shape[0], k), F32), S((lg.shape[0], k), I32)))
def route_all(logits, w_out, i_out, *, k: ml.constexpr):
  """Every token in one program, as a small router test writes it: 100 tokens are read padded to 104 rows."""
  p = ml.softmax(logits[...].astype(F32), axis=-1)
  w, i = ml.top_k(p, k)
  w_out[...] = w / ml.sum(w, axis=-1, keepdims=True)
  i_out[...] = i


@pytest.mark.parametrize("tokens,experts,k", [(100, 8, 2), (30, 8, 2), (7, 60, 4), (100, 6, 1)])
def test_routing_an_odd_count_of_tokens_read_whole(tokens, experts, k):
  """Was MG204 at the read: the padded trace of odd reads (probe 45g) gave up at the sort; the sort now sorts
  each row's own elements and leaves the padding in place (Sort.valid), and ml.top_k keeps its k columns padded
  to a shape a tensor holds."""
  lg = np.random.default_rng(tokens + experts).standard_normal((tokens, experts)).astype(F32)
  w, i = route_all(jnp.asarray(lg), k=k, interpret=True)
  want_w, want_i = _route_ref(lg, k)
  np.testing.assert_array_equal(np.asarray(i), want_i)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  builds(route_all, S(lg.shape, F32), k=k)


@mg.mgpu_kernel(out_shape=lambda e, *, k: (S(e.shape, I32), S((k,), e.dtype)))
def order_and_top(e_ref, order, top, *, k: ml.constexpr):
  e = e_ref[...]
  order[...] = ml.argsort(e)
  top[...] = ml.top_k(e, k)[0]


def test_the_permutation_of_an_odd_count_read_whole():
  e = np.random.default_rng(15).integers(0, 8, 100).astype(np.int32)
  order, top = order_and_top(jnp.asarray(e), k=5, interpret=True)
  np.testing.assert_array_equal(np.asarray(order), np.argsort(e, kind="stable"))
  np.testing.assert_array_equal(np.asarray(top), np.sort(e)[::-1][:5])
  builds(order_and_top, S((100,), I32), k=5)
  x = _ties(np.random.default_rng(16), (17, 45), np.float32)
  for descending in (False, True):
    y, ix = sort_any(jnp.asarray(x), descending=descending, interpret=True)
    want_y, want_ix = _sorted(x, descending)
    np.testing.assert_array_equal(np.asarray(y), want_y)
    np.testing.assert_array_equal(np.asarray(ix), want_ix)
  builds(sort_any, S((17, 45), F32), descending=True)


@mg.mgpu_kernel(out_shape=lambda lg: (S((lg.shape[0],), F32), S((lg.shape[0],), I32), S((lg.shape[1],), I32)))
def switch_route(logits, gate, expert, first_token):
  """Top-1 (Switch) routing of every token read whole: the argmax of each row, and of each expert's column."""
  p = ml.softmax(logits[...], axis=-1)
  gate[...] = ml.max(p, axis=-1)
  expert[...] = ml.argmax(p, axis=-1)
  first_token[...] = ml.argmax(p, axis=0)


@pytest.mark.parametrize("tokens,experts", [(100, 8), (30, 45)])
def test_top_1_routing_of_an_odd_count_read_whole(tokens, experts):
  """Was MG204 at the read: the padded trace gave up at ml.argmax (its index grid meets the padded tile)."""
  lg = _ties(np.random.default_rng(tokens), (tokens, experts), np.float32)
  gate, expert, first = switch_route(jnp.asarray(lg), interpret=True)
  p = _softmax(lg)
  np.testing.assert_array_equal(np.asarray(expert), np.argmax(p, axis=-1))
  np.testing.assert_array_equal(np.asarray(first), np.argmax(p, axis=0))
  np.testing.assert_allclose(np.asarray(gate), p.max(-1), rtol=1e-5, atol=1e-6)
  builds(switch_route, S(lg.shape, F32))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("shape,dtype",
                         _ODD + [((64, 64), np.float32), ((8, 1024), np.int32), ((2, 8, 24), np.float32)], ids=str)
@pytest.mark.parametrize("descending", [False, True])
def test_gpu_sorts_of_any_length_match_jnp(shape, dtype, descending):
  """The network now sorts every block ascending (mirror first steps), powers of two included."""
  rng = np.random.default_rng(sum(shape) + 1)
  if np.issubdtype(dtype, np.integer):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, shape, endpoint=True).astype(dtype)
  else:
    x = _ties(rng, shape, dtype)
    x.reshape(-1)[:5] = [np.nan, -np.inf, np.inf, -0.0, np.nan]
  y, ix = jax.jit(lambda a: sort_any(a, descending=descending))(jnp.asarray(x))
  want_y, want_ix = _sorted(x, descending)
  np.testing.assert_array_equal(np.asarray(y, np.float32), np.asarray(want_y, np.float32))
  np.testing.assert_array_equal(np.asarray(ix), want_ix)


@pytest.mark.gpu
def test_gpu_routing_and_grouped_routing_match_numpy():
  rng = np.random.default_rng(13)
  for experts, k in [(8, 2), (60, 4), (256, 8)]:
    lg = rng.standard_normal((128, experts)).astype(np.float32)
    w, i = jax.jit(lambda a: route(a, k=k))(jnp.asarray(lg))
    want_w, want_i = _route_ref(lg, k)
    np.testing.assert_array_equal(np.asarray(i), want_i)
    np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  lg = rng.standard_normal((64, 64)).astype(np.float32)
  bias = (rng.standard_normal(64) * 0.1).astype(np.float32)
  w, i = jax.jit(grouped_route)(jnp.asarray(lg), jnp.asarray(bias))
  want_w, want_i = _grouped_ref(lg, bias)
  np.testing.assert_array_equal(np.asarray(i), want_i)
  np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  for experts, k in [(64, 2), (160, 6)]:
    x, w = _fused_router_inputs(experts)
    got = jax.jit(lambda a, b: fused_router(a, b, k=k))(jnp.asarray(x), jnp.asarray(w))
    want = fused_router(jnp.asarray(x), jnp.asarray(w), k=k, interpret=True)
    np.testing.assert_array_equal(np.asarray(got[1]), np.asarray(want[1]))
    np.testing.assert_allclose(np.asarray(got[0]), np.asarray(want[0]), rtol=1e-4, atol=1e-5)
  e = rng.integers(0, 8, 120).astype(np.int32)
  order, rank = jax.jit(expert_order)(jnp.asarray(e))
  np.testing.assert_array_equal(np.asarray(order), np.argsort(e, kind="stable"))


@pytest.mark.gpu
def test_gpu_searchsorted_matches_numpy():
  off = jnp.asarray(_OFFS)
  for side in ("left", "right"):
    np.testing.assert_array_equal(np.asarray(jax.jit(lambda o: row_groups(o, side=side))(off)),
                                  np.searchsorted(_OFFS, np.arange(256), side=side) - 1)
  np.testing.assert_array_equal(np.asarray(jax.jit(row_groups_counted)(off)),
                                np.searchsorted(_OFFS, np.arange(256), side="right") - 1)
  np.testing.assert_array_equal(np.asarray(jax.jit(tile_groups)(off)),
                                np.searchsorted(_OFFS, np.arange(8) * 32, side="right") - 1)


@pytest.mark.gpu
def test_gpu_odd_counts_read_whole_sort_and_route():
  rng = np.random.default_rng(17)
  for tokens, experts, k in [(100, 8, 2), (7, 60, 4)]:
    lg = rng.standard_normal((tokens, experts)).astype(np.float32)
    w, i = jax.jit(lambda a: route_all(a, k=k))(jnp.asarray(lg))
    want_w, want_i = _route_ref(lg, k)
    np.testing.assert_array_equal(np.asarray(i), want_i)
    np.testing.assert_allclose(np.asarray(w), want_w, rtol=1e-5, atol=1e-6)
  e = rng.integers(0, 8, 100).astype(np.int32)
  order, top = jax.jit(lambda a: order_and_top(a, k=5))(jnp.asarray(e))
  np.testing.assert_array_equal(np.asarray(order), np.argsort(e, kind="stable"))
  np.testing.assert_array_equal(np.asarray(top), np.sort(e)[::-1][:5])
  lg = _ties(rng, (100, 8), np.float32)
  gate, expert, first = jax.jit(switch_route)(jnp.asarray(lg))
  np.testing.assert_array_equal(np.asarray(expert), np.argmax(_softmax(lg), axis=-1))
  np.testing.assert_array_equal(np.asarray(first), np.argmax(_softmax(lg), axis=0))
  x = _ties(rng, (17, 45), np.float32)
  y, ix = jax.jit(lambda a: sort_any(a, descending=True))(jnp.asarray(x))
  want_y, want_ix = _sorted(x, True)
  np.testing.assert_array_equal(np.asarray(y), want_y)
  np.testing.assert_array_equal(np.asarray(ix), want_ix)
