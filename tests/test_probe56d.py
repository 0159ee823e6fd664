"""Probe 56d: LLM sampling and decoding kernels (top-k, top-p, min-p, Gumbel-max, penalties, speculative decoding,
beam search, chunked log-softmax over a long vocabulary). Found and fixed:

- a sort's padding judged where the kernel reads it (interpret mode, lowering/interpret_pad_sorts.py): the descending
  sort as jnp writes it, `jnp.sort(p)[::-1]` / `jnp.argsort(p)[::-1]` of a top-p filter, and the k-th largest read from
  the end of an ascending sort, `jnp.sort(v)[-k]`, `[-8:]`, were MG953 whose hint (`other=float('inf')`) made them
  silently wrong; a reversed sort that puts padding first (`other=float('inf')` then `[::-1]`) was no error at all;
- `jnp.take_along_axis` of a register vector (a sort's order taken from the row it sorted) or of a 3-D register
  tensor was MG003 "gathers from a GMEM ref" (only 2-D tiles were taken);
- `jnp.unravel_index` of a run-time flat index (a beam search's argmax over (beams, vocab)), `jnp.ravel_multi_index`
  (mode 'clip', 'wrap') and `jnp.lexsort` were MG003 with the hint of the kernel's own functions ("decorate a helper of
  your own"): they compute as jax's now, and a library function with no kernel form says so;
- a slice of a register tensor of a run-time length (`s[:k[r]]`, a top k's prefix) hinted to read the window from
  a ref with ml.ds, whose size must be static too: the hint masks the positions outside the window;
- masked-off lanes inside the array (a row's run-time vocabulary length, `mask=c < vl[r]`) were not followed as
  padding: `jnp.max` of them with `other=0.0`, or a softmax, was silently wrong in interpret mode; MG953 now, worded
  "kept off under its mask (c < vl[r])".
The theme's corpus of kernels that compute and build for CUDA is tests/test_probe56d2.py."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where
from probe_util import S, export, rnd


def _softmax(x):
  return np.asarray(jax.nn.softmax(jnp.asarray(x), -1))


# ---------------------------------------------------------------- a sort's padding, judged where it is read
@mg.mgpu_kernel(out_shape=lambda x, tp: x, grid=lambda x, tp: (x.shape[0],))
def top_p_reversed(x, tp, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < x.shape[1]
  v = x.at[r, c].load(mask=m, other=-float("inf"))
  p = jax.nn.softmax(v)
  ps = jnp.sort(p)[::-1]
  cs = jnp.cumsum(ps)
  thr = jnp.min(jnp.where(cs - ps < tp[r], ps, 2.0))
  o.at[r, c].store(jnp.where(p < thr, -jnp.inf, v), mask=m)


def _top_p_ref(x, tp):
  p = _softmax(x)
  ps = -np.sort(-p, -1)
  cs = np.cumsum(ps, -1)
  thr = np.where(cs - ps < tp[:, None], ps, 2.0).min(-1)
  return np.where(p < thr[:, None], -np.inf, x)


def test_descending_sort_as_jnp_writes_it_filters_top_p():
  """`jnp.sort(p)[::-1]` of a softmax whose padding is 0 (sorted first, read last) was MG953 at the sort."""
  x, tp = rnd((4, 1000), 0), np.array([0.9, 0.5, 0.99, 0.1], np.float32)
  np.testing.assert_allclose(np.asarray(top_p_reversed(x, tp, interpret=True)), _top_p_ref(x, tp), rtol=1e-5)
  export(top_p_reversed, x, tp)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 8), jnp.int32), grid=lambda x: (x.shape[0],))
def top8_ids(x, o, *, fill: ml.constexpr = float("-inf")):
  r = ml.program_id(0)
  c = ml.arange(1024)
  v = x.at[r, c].load(mask=c < x.shape[1], other=fill)
  o[r, :] = jnp.argsort(v)[::-1][:8]


def test_reversed_argsort_takes_the_top_ids_and_padding_first_is_mg953():
  """`jnp.argsort(v)[::-1][:8]` with -inf padding computes; with +inf padding (last in the ascending sort, first
  once reversed) the top ids were padding's positions with no error: MG953 now, with the fill that sorts last."""
  x = rnd((4, 1000), 1)
  got = np.asarray(top8_ids(x, interpret=True))
  np.testing.assert_array_equal(got, np.argsort(x, 1, kind="stable")[:, ::-1][:, :8])
  with pytest.raises(mg.MaskedReductionError) as info:
    top8_ids(x, fill=float("inf"), interpret=True)
  e = info.value
  assert e.code == "MG953" and (e.lineno, e.col_offset) == where(top8_ids, "jnp.argsort(v)"), e.render()
  assert e.message.startswith("jnp.argsort sorts lanes the masked load at line")
  assert "a lane of padding sorts to position 0, before an element of data at position 24" in e.message
  assert "other=float('-inf') in the masked load" in e.hint
  assert "Traceback" not in str(e)


@mg.mgpu_kernel(out_shape=lambda x, k: (S((x.shape[0],), x.dtype), S((x.shape[0], 8), x.dtype),
                                        S((x.shape[0],), x.dtype)), grid=lambda x, k: (x.shape[0],))
def kth_from_end(x, k, kth, top8, top1):
  r = ml.program_id(0)
  c = ml.arange(1024)
  v = x.at[r, c].load(mask=c < x.shape[1], other=-float("inf"))
  s = jnp.sort(v)
  kth[r] = s[-k[r]]
  top8[r, :] = s[-8:]
  top1[r] = s[-1]


def test_kth_largest_read_from_the_end_of_an_ascending_sort():
  """`jnp.sort(v)[-k]` (and `[-8:]`, `[-1]`) with -inf padding: the padding sorts first and is never read (was
  MG953, whose hint `other=float('inf')` would have read inf as the maximum)."""
  x, k = rnd((4, 1000), 2), np.array([1, 2, 50, 1000], np.int32)
  kth, top8, top1 = (np.asarray(a) for a in kth_from_end(x, k, interpret=True))
  s = np.sort(x, 1)
  np.testing.assert_array_equal(kth, s[np.arange(4), 1000 - k])
  np.testing.assert_array_equal(top8, s[:, -8:])
  np.testing.assert_array_equal(top1, x.max(1))
  export(kth_from_end, x, k)


@mg.mgpu_kernel(out_shape=lambda x, k: S((x.shape[0],), x.dtype), grid=lambda x, k: (x.shape[0],))
def kth_smallest(x, k, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  v = x.at[r, c].load(mask=c < x.shape[1], other=-float("inf"))
  s = jnp.sort(v)
  o[r] = s[k[r] - 1]


def test_a_read_of_a_position_the_padding_sorted_to_is_mg953_at_the_sort():
  """A read of the sorted row where the padding lies (the k-th smallest with -inf padding; the k-th from the end
  past the row's length) is the sort's MG953, saying which position the kernel read."""
  x = rnd((4, 1000), 3)
  with pytest.raises(mg.MaskedReductionError) as info:
    kth_smallest(x, np.array([1, 2, 3, 4], np.int32), interpret=True)
  e = info.value
  line = where(kth_smallest, "o[r] = s[k[r] - 1]")[0]
  assert e.code == "MG953" and (e.lineno, e.col_offset) == where(kth_smallest, "jnp.sort(v)"), e.render()
  assert e.message == (
      f"jnp.sort sorts lanes the masked load at line {line - 2} kept off past the end of x, filled with"
      f" other=-float('inf') (-inf): in program (0, 0, 0) a lane of padding sorts to position 0, before an element"
      f" of data at position 24, so the smallest values it gives are padding; line {line} reads position 0, which"
      f" holds padding (the 1000 elements of data sort to positions 24..1023 of the 1024 lanes)")
  assert e.hint == (
      f"read only positions that hold data (a top k's k at most the row's 1000 elements, counted from the end of"
      f" the sorted row), or fill them so that they sort after the data: other=float('inf') in the masked load at"
      f" line {line - 2} (or sort ml.where(c < x.shape[1], v, float('inf')))")
  with pytest.raises(mg.MaskedReductionError) as info:
    kth_from_end(x, np.array([1, 2, 1001, 4], np.int32), interpret=True)
  assert "in program (2, 0, 0)" in info.value.message and "reads position 23, which holds padding" in \
      info.value.message


@mg.mgpu_kernel(out_shape=lambda x, k: x, grid=lambda x, k: (x.shape[0] // 8,))
def top_k_rows_ascending(x, k, o):
  rows = ml.program_id(0) * 8 + ml.arange(8)
  c = ml.arange(1024)
  m = c[None, :] < x.shape[1]
  v = x.at[rows[:, None], c[None, :]].load(mask=m, other=-float("inf"))
  s = jnp.sort(v, axis=-1)
  kth = s[jnp.arange(8), 1024 - k.at[rows].load()]
  o.at[rows[:, None], c[None, :]].store(jnp.where(v < kth[:, None], -jnp.inf, v), mask=m)


def test_rows_of_an_ascending_sort_read_from_their_ends():
  """Each row's k-th largest gathered from the end of a 2-D ascending sort (a gather through SMEM) computes; a k past
  the row's length reads padding: MG953 naming that row and position."""
  x, k = rnd((8, 1000), 16), np.random.default_rng(16).integers(1, 100, 8).astype(np.int32)
  th = -np.sort(-x, 1)[np.arange(8), k - 1]
  np.testing.assert_array_equal(np.asarray(top_k_rows_ascending(x, k, interpret=True)),
                                np.where(x < th[:, None], -np.inf, x))
  export(top_k_rows_ascending, x, k)
  k[3] = 1010
  with pytest.raises(mg.MaskedReductionError) as info:
    top_k_rows_ascending(x, k, interpret=True)
  e = info.value
  assert (e.lineno, e.col_offset) == where(top_k_rows_ascending, "jnp.sort(v, axis=-1)"), e.render()
  assert "in program (0, 0, 0) (row 3) a lane of padding sorts to position 0" in e.message
  assert "reads position 14 of row 3, which holds padding" in e.message


# ---------------------------------------------------------------- take_along_axis of register vectors and N-D tensors
@mg.mgpu_kernel(out_shape=lambda x, tp: x, grid=lambda x, tp: (x.shape[0],))
def top_p_gemma(x, tp, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  m = c < x.shape[1]
  v = x.at[r, c].load(mask=m, other=-float("inf"))
  probs = jax.nn.softmax(v)
  order = jnp.argsort(-probs)
  sp = jnp.take_along_axis(probs, order, axis=-1)
  cs = jnp.cumsum(sp)
  drop = jnp.take_along_axis(cs - sp > tp[r], jnp.argsort(order), axis=-1)
  o.at[r, c].store(jnp.where(drop, 0.0, probs), mask=m)


def test_take_along_axis_of_a_register_vector_permutes_a_sorted_row_back():
  """A top-p filter as a JAX sampler writes it (the order's inverse by a second argsort) was MG003 at the first
  take_along_axis ("gathers from a GMEM ref"): a 1-D register tensor is v[ids] now."""
  x, tp = rnd((8, 1000), 4), np.random.default_rng(4).uniform(0.3, 0.95, 8).astype(np.float32)
  p = _softmax(x)
  ps = -np.sort(-p, -1)
  cs = np.cumsum(ps, -1)
  thr = np.where(cs - ps <= tp[:, None], ps, 2.0).min(-1)
  np.testing.assert_allclose(np.asarray(top_p_gemma(x, tp, interpret=True)),
                             np.where(p >= thr[:, None], p, 0.0), rtol=1e-6, atol=1e-7)
  export(top_p_gemma, x, tp)


@mg.mgpu_kernel(out_shape=lambda x, i, j: (S(i.shape, x.dtype), S(j.shape, x.dtype)), grid=(1,))
def take_3d(x, i, j, o, o2):
  v = x[...] * 2.0
  o[...] = jnp.take_along_axis(v, i[...], axis=-1)
  o2[...] = jnp.take_along_axis(v, j[...], axis=1)


def test_take_along_axis_of_a_3d_register_tensor():
  rng = np.random.default_rng(5)
  x = rnd((2, 8, 128), 5)
  i, j = rng.integers(0, 128, (2, 8, 16)).astype(np.int32), rng.integers(0, 8, (2, 8, 128)).astype(np.int32)
  a, b = take_3d(x, i, j, interpret=True)
  np.testing.assert_array_equal(np.asarray(a), np.take_along_axis(x * 2, i, -1))
  np.testing.assert_array_equal(np.asarray(b), np.take_along_axis(x * 2, j, 1))
  export(take_3d, x, i, j)


# ---------------------------------------------------------------- jnp's index helpers of run-time values
@mg.mgpu_kernel(out_shape=lambda s: (S((s.shape[0] // 4,), jnp.int32), S((s.shape[0] // 4,), jnp.int32),
                                     S((s.shape[0] // 4,), jnp.int32)), grid=lambda s: (s.shape[0] // 4,))
def beam_best(s, beam_o, tok_o, flat_o):
  b = ml.program_id(0)
  rows = b * 4 + ml.arange(4)
  cand = s.at[rows[:, None], ml.arange(256)[None, :]].load()
  flat = jnp.argmax(cand)
  beam, tok = jnp.unravel_index(flat, cand.shape)
  beam_o[b] = beam
  tok_o[b] = tok
  flat_o[b] = jnp.ravel_multi_index((beam, tok), cand.shape, mode="clip")


def test_beam_search_unravels_the_flat_argmax():
  """`jnp.unravel_index` of a scalar was MG003 "cannot take a scalar inside a kernel"."""
  s = rnd((16, 256), 6)
  beam, tok, flat = (np.asarray(a) for a in beam_best(s, interpret=True))
  want = np.argmax(s.reshape(4, -1), 1)
  np.testing.assert_array_equal(beam, want // 256)
  np.testing.assert_array_equal(tok, want % 256)
  np.testing.assert_array_equal(flat, want)
  export(beam_best, s)


@mg.mgpu_kernel(out_shape=lambda i, j: (i, i, i, i, i, S(i.shape, jnp.int32)), grid=(1,))
def index_helpers(i, j, a, b, c, flat_wrap, flat_f, order):
  a[...], b[...], c[...] = jnp.unravel_index(i[...], (3, 5, 7))
  flat_wrap[...] = jnp.ravel_multi_index((i[...], j[...]), (4, 256), mode="wrap")
  flat_f[...] = jnp.ravel_multi_index([i[...], j[...]], [4, 200], mode="clip", order="F")
  order[...] = jnp.lexsort((j[...], i[...] % 4))


@pytest.mark.parametrize("dtype", [np.int32, np.uint32])
def test_unravel_ravel_and_lexsort_are_jaxs(dtype):
  """jax's own results, out-of-range indices clipped as jax clips them (signed and unsigned)."""
  rng = np.random.default_rng(7)
  lo = 0 if dtype == np.uint32 else -150
  i, j = rng.integers(lo, 150, 128).astype(dtype), rng.integers(0, 40, 128).astype(dtype)
  got = [np.asarray(a) for a in index_helpers(i, j, interpret=True)]
  ji, jj = jnp.asarray(i), jnp.asarray(j)
  want = [*jnp.unravel_index(ji, (3, 5, 7)), jnp.ravel_multi_index((ji, jj), (4, 256), mode="wrap"),
          jnp.ravel_multi_index((ji, jj), (4, 200), mode="clip", order="F"), jnp.lexsort((jj, ji % 4))]
  for g, w in zip(got, want):
    assert g.dtype == w.dtype
    np.testing.assert_array_equal(g, np.asarray(w))
  export(index_helpers, i, j)


@mg.mgpu_kernel(out_shape=lambda a, b: a, grid=(1,))
def ravel_raise(a, b, o):
  o[...] = jnp.ravel_multi_index((a[...], b[...]), (4, 256))


def test_a_library_function_with_no_kernel_form_says_so():
  """mode='raise' (jnp's default) checks values, which jax does only outside jit: no form. The hint was the one for
  the kernel's own functions ("decorate a helper of your own with @ml.inline")."""
  expect(ravel_raise, [S((128,), jnp.int32)] * 2, mg.KernelTypeError, "jnp.ravel_multi_index(",
         "ravel_multi_index cannot take a tuple of register values inside a kernel",
         hint="jnp.ravel_multi_index has no form in a kernel: write what it computes with ml.* functions (jnp's"
              " namesakes of them compute the same; a plain function of yours that holds them is traced as a"
              " helper)")


@mg.mgpu_kernel(out_shape=lambda x, k: x, grid=lambda x, k: (x.shape[0],))
def kth_by_prefix(x, k, o):
  r = ml.program_id(0)
  c = ml.arange(1024)
  v = x.at[r, c].load(mask=c < x.shape[1], other=-float("inf"))
  s = jnp.sort(v)[::-1]
  kth = jnp.min(s[:k[r]])
  o.at[r, c].store(jnp.where(v < kth, -jnp.inf, v), mask=c < x.shape[1])


def test_a_prefix_of_a_run_time_length_says_to_mask_it():
  """`s[:k[r]]` said to read the window from a ref with ml.ds (whose size must be static too): its length is a
  run-time value, and the hint keeps the whole row under a mask."""
  e = expect(kth_by_prefix, [S((8, 1000), jnp.float32), S((8,), jnp.int32)], mg.KernelTypeError, "s[:k[r]]",
             "a window of s needs static bounds; k[r] is a run-time value, so its length is too, and a register"
             " tensor has a static shape",
             hint="keep the whole of s and mask the positions outside the window: ml.where(ml.arange(1024) < k[r], s,"
                  " fill), fill what the use ignores (0 for a sum, float('inf') for a min, float('-inf') for a max)")
  assert e.end_col_offset == e.col_offset + len("s[:k[r]]")


# ---------------------------------------------------------------- a masked vocabulary tail of a run-time length
@mg.mgpu_kernel(out_shape=lambda x, vl: S((x.shape[0],), x.dtype), grid=lambda x, vl: (x.shape[0],))
def ragged_max(x, vl, o, *, fill: ml.constexpr = 0.0):
  r = ml.program_id(0)
  c = ml.arange(1024)
  v = x.at[r, c].load(mask=c < vl[r], other=fill)
  o[r] = jnp.max(v)


@mg.mgpu_kernel(out_shape=lambda x, vl: x, grid=lambda x, vl: (x.shape[0],))
def ragged_softmax(x, vl, o, *, fill: ml.constexpr = 0.0):
  r = ml.program_id(0)
  c = ml.arange(1024)
  keep = c < vl[r]
  v = x.at[r, c].load(mask=keep, other=fill)
  o.at[r, c].store(jnp.where(keep, jax.nn.softmax(v), 0.0))


def _ragged(seed):
  rng = np.random.default_rng(seed)
  return rnd((8, 1024), seed) - 3.0, rng.integers(100, 1000, 8).astype(np.int32)


def test_a_row_masked_at_its_own_length_is_followed_as_padding():
  """`other=0.0` under a max of a row of negatives cut at its run-time length gave 0 with no error (only lanes past
  the array's end were followed): MG953 at the max, worded with the load's mask."""
  x, vl = _ragged(8)
  line = where(ragged_max, "v = x.at[r, c]")[0]
  with pytest.raises(mg.MaskedReductionError) as info:
    ragged_max(x, vl, interpret=True)
  e = info.value
  assert e.code == "MG953" and (e.lineno, e.col_offset) == where(ragged_max, "jnp.max(v)"), e.render()
  assert e.message.startswith(f"jnp.max reduces lanes the masked load at line {line} kept off under its mask"
                              f" (c < vl[r]), filled with other=fill (0.0): they change its result in program (")
  assert e.hint.startswith(f"fill them with the identity of a max: other=float('-inf') in the masked load at line"
                           f" {line}")
  got = np.asarray(ragged_max(x, vl, fill=float("-inf"), interpret=True))
  np.testing.assert_array_equal(got, [x[i, :vl[i]].max() for i in range(8)])


def test_a_softmax_over_a_row_masked_at_its_own_length():
  x, vl = _ragged(9)
  with pytest.raises(mg.MaskedReductionError) as info:
    ragged_softmax(x, vl, interpret=True)
  assert info.value.code == "MG953" and "kept off under its mask (keep)" in info.value.message
  assert (info.value.lineno, info.value.col_offset) == where(ragged_softmax, "jax.nn.softmax(v)")
  got = np.asarray(ragged_softmax(x, vl, fill=float("-inf"), interpret=True))
  want = np.zeros_like(x)
  for i in range(8):
    want[i, :vl[i]] = _softmax(x[i, :vl[i]])
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
  export(ragged_softmax, x, vl, fill=float("-inf"))


# ---------------------------------------------------------------- on the GPU
@pytest.mark.gpu
def test_gpu_sampling_forms():
  x, tp = rnd((8, 1000), 10), np.random.default_rng(10).uniform(0.3, 0.95, 8).astype(np.float32)
  np.testing.assert_allclose(np.asarray(top_p_reversed(x, tp)), _top_p_ref(x, tp), rtol=1e-5)
  np.testing.assert_allclose(np.asarray(top_p_gemma(x, tp)), np.asarray(top_p_gemma(x, tp, interpret=True)),
                             rtol=1e-5, atol=1e-7)
  np.testing.assert_array_equal(np.asarray(top8_ids(x)), np.argsort(x, 1, kind="stable")[:, ::-1][:, :8])
  s = rnd((16, 256), 11)
  for g, w in zip(beam_best(s), beam_best(s, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  i = np.random.default_rng(12).integers(-150, 150, 128).astype(np.int32)
  j = np.random.default_rng(13).integers(0, 40, 128).astype(np.int32)
  for g, w in zip(index_helpers(i, j), index_helpers(i, j, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
  x3 = rnd((2, 8, 128), 14)
  i3 = np.random.default_rng(14).integers(0, 128, (2, 8, 16)).astype(np.int32)
  j3 = np.random.default_rng(15).integers(0, 8, (2, 8, 128)).astype(np.int32)
  for g, w in zip(take_3d(x3, i3, j3), take_3d(x3, i3, j3, interpret=True)):
    np.testing.assert_array_equal(np.asarray(g), np.asarray(w))
