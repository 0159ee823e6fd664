"""Probe 45d (KernelBench level-1 operators as a Triton or Pallas user ports them: reductions over one dim of a
(batch, dim1, dim2) array with tails, scans, norms, pooling, wide softmax, activations against jax.nn), the
problems the ports found."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect, where

S = jax.ShapeDtypeStruct
F32, I32 = jnp.float32, jnp.int32


def _rand(shape, seed):
  return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


# ---------------------------------------------------------------- a small statistic of a 3-D tile, stored under a tail's mask
REDUCE = {"sum": (ml.sum, 0.0), "max": (ml.max, float("-inf")), "argmin": (ml.argmin, float("inf"))}


def _reduced(x, axis, kind):
  return S(tuple(n for a, n in enumerate(x.shape) if a != axis), I32 if kind.startswith("arg") else F32)


@mg.mgpu_kernel(out_shape=lambda x, **k: _reduced(x, k["axis"], k["kind"]),
                grid=lambda x, **k: (ml.cdiv(x.shape[0], k["BB"]), ml.cdiv(x.shape[3 - k["axis"]], k["BK"])))
def reduce_blocks(x, o, *, kind: ml.constexpr, axis: ml.constexpr, BB: ml.constexpr, BM: ml.constexpr,
                  BK: ml.constexpr):
  """torch's sum, max or argmin over dim=axis of (batch, dim1, dim2), axis 1 or 2, BB batches a program: a (BB, BM, BK) or
  (BB, BK, BM) tile, its (BB, BK) statistic stored under the tail's mask (a (2, 8) max over dim2: 16 elements,
  a (2, 32) sum over dim1: 64, too few for a register tensor of their shape)."""
  i, j = ml.program_id(0), ml.program_id(1)
  fn, other = REDUCE[kind]
  b = i * BB + ml.arange(BB)
  k = j * BK + ml.arange(BK)
  if axis == 1:      # the statistic's columns run along dim2
    v = x.at[ml.ds(i * BB, BB), ml.ds(0, BM), ml.ds(j * BK, BK)].load(
        mask=(b[:, None, None] < x.shape[0]) & (ml.arange(BM)[None, :, None] < x.shape[1])
        & (k[None, None, :] < x.shape[2]), other=other)
    inside = (b[:, None] < x.shape[0]) & (k[None, :] < x.shape[2])
  else:              # along dim1
    v = x.at[ml.ds(i * BB, BB), ml.ds(j * BK, BK), ml.ds(0, BM)].load(
        mask=(b[:, None, None] < x.shape[0]) & (k[None, :, None] < x.shape[1])
        & (ml.arange(BM)[None, None, :] < x.shape[2]), other=other)
    inside = (b[:, None] < x.shape[0]) & (k[None, :] < x.shape[1])
  o.at[ml.ds(i * BB, BB), ml.ds(j * BK, BK)].store(fn(v, axis=axis), mask=inside)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2] + (1,), F32))
def row_max_kept(x, o):
  """A keepdims (4, 8, 1) statistic of a window past the array's 3 batches: the rows its mask keeps off (the 4th
  batch, wholly outside the array) are not stored."""
  inside = ml.arange(4)[:, None, None] < x.shape[0]
  v = x.at[ml.ds(0, 4), :, :].load(mask=inside, other=float("-inf"))
  o.at[ml.ds(0, 4), :, :].store(ml.max(v, axis=2, keepdims=True), mask=inside)


CASES = [("max", 2, (5, 7, 100), (2, 128, 8)), ("argmin", 2, (3, 20, 40), (2, 64, 32)),
         ("sum", 1, (5, 7, 100), (2, 8, 32)), ("argmin", 1, (3, 20, 40), (2, 32, 32))]


@pytest.mark.parametrize("kind,axis,shape,tile", CASES, ids=str)
def test_a_small_statistic_of_a_3d_tile_stores_under_a_tails_mask(kind, axis, shape, tile):
  """The statistic stored whole with ref[...] = m computed (probe 44f, a row at a time), but the same store under
  a mask, the tail's ml.store(o.at[...], m, mask=...), was MG204 at the reduction ('r has shape (2, 8): register
  tensors need a multiple of 128 elements', or 'reduced ... along an axis; that works on 2-D tiles'): it is
  stored a row at a time too, each row under its part of the mask, computed at the row's shape."""
  bb, bm, bk = tile
  x = _rand(shape, sum(shape))
  got = reduce_blocks(jnp.asarray(x), kind=kind, axis=axis, BB=bb, BM=bm, BK=bk, interpret=True)
  np.testing.assert_allclose(got, getattr(np, kind)(x, axis=axis), rtol=1e-5, atol=1e-5)
  assert "@mosaic_gpu" in str(reduce_blocks.mlir(S(shape, F32), kind=kind, axis=axis, BB=bb, BM=bm, BK=bk))


def test_a_kept_statistics_rows_its_mask_keeps_off_are_not_stored():
  """A keepdims statistic under a mask was MG204 as the others; stored a row at a time, a row wholly past the
  array's end that a mask known while compiling keeps off is skipped (its store, all off, would index the array
  past its end: Mosaic GPU's lowering fails there)."""
  x = _rand((3, 8, 128), 1)
  np.testing.assert_array_equal(row_max_kept(jnp.asarray(x), interpret=True), x.max(2, keepdims=True))
  row_max_kept.check(S(x.shape, F32))


@pytest.mark.gpu
def test_gpu_small_statistics_stored_under_tail_masks_match_interpret():
  """The last program's masked-off rows lie past the array's end (row 5 of 5 batches): predicated off, never
  dereferenced (may fault if they were)."""
  for kind, axis, shape, (bb, bm, bk) in CASES:
    x = jnp.asarray(_rand(shape, sum(shape)))
    kw = dict(kind=kind, axis=axis, BB=bb, BM=bm, BK=bk)
    np.testing.assert_allclose(reduce_blocks(x, **kw), reduce_blocks(x, **kw, interpret=True), rtol=1e-5, atol=1e-5)
  x = jnp.asarray(_rand((3, 8, 128), 1))
  np.testing.assert_array_equal(row_max_kept(x), row_max_kept(x, interpret=True))


# ---------------------------------------------------------------- jax.nn activations: the hint's form and operand
@mg.mgpu_kernel(out_shape=lambda x: x)
def gelu_exact_positional(x, o):
  v = x[...]
  o[...] = jax.nn.gelu(v, False)


@mg.mgpu_kernel(out_shape=lambda x: x)
def relu_by_keyword(x, o):
  v = x[...]
  o[...] = jax.nn.relu(x=v)


@mg.mgpu_kernel(out_shape=lambda x: x)
def gelu_exact_followed(x, o):
  v = x[...]
  o[...] = 0.5 * v * ml.erfc(-v * 0.7071067811865476)


def test_an_activations_hint_reads_its_arguments_as_jax_nn_binds_them():
  """jax.nn.gelu(v, False) (approximate by position: KernelBench's exact GELU) was hinted as the tanh form, with
  the operand as `x` (its second argument made the call's arguments not fit the form); jax.nn.relu(x=v) wrote
  ml.maximum(x, 0). The hint reads approximate by position too and the operand by its keyword."""
  x = _rand((2, 256), 2) * 3      # (since probe 46i the calls compute the hinted forms, bound as jax.nn binds them)
  for kernel in (gelu_exact_followed, gelu_exact_positional):
    np.testing.assert_allclose(kernel(jnp.asarray(x), interpret=True), jax.nn.gelu(x, approximate=False),
                               rtol=1e-5, atol=1e-6)
  np.testing.assert_array_equal(relu_by_keyword(jnp.asarray(x), interpret=True), np.maximum(x, 0))


# ---------------------------------------------------------------- a whole (batch, dim1, dim2) array no register tensor holds
@mg.mgpu_kernel(out_shape=lambda x, **k: _reduced(x, k["axis"], "sum"))
def sum_whole(x, o, *, axis: ml.constexpr):
  o[...] = ml.sum(x[...], axis=axis)       # torch.sum(x, dim=axis)


@mg.mgpu_kernel(out_shape=lambda x, **k: _reduced(x, k["axis"], k["kind"]))
def reduce_padded(x, o, *, kind: ml.constexpr, axis: ml.constexpr, R: ml.constexpr, C: ml.constexpr):
  """The hint followed: the array read as a (b, R, C) window masked to it, the result stored under the mask's part."""
  fn, other = REDUCE[kind]
  b, r, c = x.shape
  v = x.at[ml.ds(0, b), ml.ds(0, R), ml.ds(0, C)].load(
      mask=(ml.arange(R)[None, :, None] < r) & (ml.arange(C)[None, None, :] < c), other=other)
  res = fn(v, axis=axis)
  if axis == 0:
    o.at[ml.ds(0, R), ml.ds(0, C)].store(res, mask=(ml.arange(R)[:, None] < r) & (ml.arange(C)[None, :] < c))
  elif axis == 1:
    o.at[:, ml.ds(0, C)].store(res, mask=ml.arange(C)[None, :] < c)
  else:
    o.at[:, ml.ds(0, R)].store(res, mask=ml.arange(R)[None, :] < r)


def test_a_3d_tile_no_register_tensor_holds_is_reported_at_its_read_with_the_padded_window():
  """ml.sum(x[...], axis=1) of a (3, 40, 72) array (8640 elements, no multiple of 128) was MG204 naming the
  compiler's SMEM scratch ('give tensor scratch the shape (8640,) and write tensor scratch[...] = s.reshape(8640)');
  over axis 0 or 2 it said 'partial reductions work on 1-D and 2-D tensors', whose hints (each slice combined, or
  a 2-D reshape) met the same wall. Each is now MG204 at the read, whose hint pads the window; followed, it computes
  for every axis (a (2, 4) statistic of too-short rows stored element by element, where its mask is static). Since
  probe 45g the compiler reads such a window padded itself."""
  # (since probe 45g the compiler reads such a window padded itself, as the hint does)
  xs = _rand((3, 40, 72), 4)
  for axis in (0, 1, 2):
    np.testing.assert_allclose(sum_whole(xs, axis=axis, interpret=True), xs.sum(axis), rtol=1e-5, atol=1e-4)
  for shape, (r, c) in (((3, 40, 72), (40, 96)), ((2, 3, 40), (4, 64))):
    x = _rand(shape, 3)
    for kind, axis in (("sum", 0), ("max", 1), ("argmin", 2), ("sum", 2)):
      got = reduce_padded(jnp.asarray(x), kind=kind, axis=axis, R=r, C=c, interpret=True)
      np.testing.assert_allclose(got, getattr(np, kind)(x, axis=axis), rtol=1e-5, atol=1e-5)
  reduce_padded.check(S((2, 3, 40), F32), kind="sum", axis=2, R=4, C=64)


# ---------------------------------------------------------------- an index tuple built per axis: list items assigned
@mg.mgpu_kernel(out_shape=lambda x, **k: x)
def keep_box(x, o, *, lim: ml.constexpr):
  """Each axis's mask built from an index list whose item a is set (N-D code written once for every rank)."""
  keep = None
  for a in ml.static_range(len(x.shape)):
    idx = [None] * len(x.shape)
    idx[a] = slice(None)
    t = ml.arange(x.shape[a])[tuple(idx)] < lim[a]
    keep = t if keep is None else keep & t
  o[...] = ml.where(keep, x[...], 0.0)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[1:], F32))
def carried_items(x, o):
  """A list a run-time loop carries, its items updated: a running sum and max over the batches."""
  st = [ml.zeros(x.shape[1:], F32), ml.full(x.shape[1:], float("-inf"), F32)]
  for b in range(x.shape[0]):
    v = x.at[b][...]
    st[0] = st[0] + v
    st[1] = ml.maximum(st[1], v)
  o[...] = st[0] - st[1]


@mg.mgpu_kernel(out_shape=lambda x: x)
def aliased_item(x, o):
  idx = [None, None]
  first = idx
  idx[0] = slice(None)
  o[...] = x[...] * len(first)


def test_a_list_item_assigned_at_a_static_index_rebinds_the_list():
  """`idx[a] = slice(None)` in an ml.static_range loop was MG003 ('lists in a kernel are values, so an item cannot
  be assigned'), its hint the first trip's `idx = idx[:0] + [slice(None)] + idx[1:]` for every trip; it binds idx to
  that list, as a list's += does (loops carry it, ifs merge it), and is refused, as += is, where another name still
  read holds the same list."""
  x = _rand((8, 128), 4)
  want = np.where((np.arange(8)[:, None] < 5) & (np.arange(128)[None, :] < 100), x, 0)
  np.testing.assert_array_equal(keep_box(jnp.asarray(x), lim=(5, 100), interpret=True), want)
  keep_box.check(S(x.shape, F32), lim=(5, 100))
  y = _rand((3, 8, 128), 5)
  np.testing.assert_allclose(carried_items(jnp.asarray(y), interpret=True), y.sum(0) - y.max(0), rtol=1e-5, atol=1e-5)
  expect(aliased_item, [S((8, 128), F32)], mg.KernelTypeError, "idx[0] =",
         "idx[0] = ... changes the list idx in place in Python, and first holds that same list, bound at line"
         f" {where(aliased_item, 'first = idx')[0]}; in a kernel lists are values, fixed once built: idx[0] = ... makes"
         " a new list, so first would keep the old items",
         hint="write idx = idx[:0] + [v] + idx[1:] (a new list, as in Python: first stays as it was), or give first a"
              " copy: first = list(idx)")


# ---------------------------------------------------------------- softplus, mish, log_sigmoid: the hinted forms' accuracy
@mg.mgpu_kernel(out_shape=lambda x: x)
def softplus_call(x, o):
  v = x[...]
  o[...] = jax.nn.softplus(v)


@mg.mgpu_kernel(out_shape=lambda x, **k: x)
def activation_hinted(x, o, *, form: ml.constexpr):
  o[...] = FORMS[form](x[...])


FORMS = {"softplus": ml.inline(lambda v: ml.maximum(v, 0) + ml.log1p(ml.exp(-ml.abs(v)))),
         "mish": ml.inline(lambda v: v * ml.tanh(ml.maximum(v, 0) + ml.log1p(ml.exp(-ml.abs(v))))),
         "log_sigmoid": ml.inline(lambda v: -(ml.maximum(-v, 0) + ml.log1p(ml.exp(-ml.abs(v)))))}


@pytest.mark.parametrize("name", ["softplus", "mish", "log_sigmoid"])
def test_softplus_forms_are_jax_nns_in_bfloat16_too(name):
  """The hints wrote softplus's tail as ml.log(1 + ml.exp(-ml.abs(v))): in bfloat16, 1 + e rounds to bfloat16's
  8 bits before the log, so softplus(-5) came out 0.0078 (jax.nn's 0.0067); mish and log_sigmoid, built on it,
  were off by as much (325 and 200 of 2048 elements beyond 2% of jax.nn's). The forms take ml.log1p, as jax.nn's
  logaddexp does."""
  x = jnp.asarray(np.concatenate([_rand(256, 6) * 4, np.linspace(-30, 30, 256)]), jnp.bfloat16)
  got = np.asarray(activation_hinted(x, form=name, interpret=True), np.float32)
  want = np.asarray(getattr(jax.nn, name)(x.astype(F32)).astype(jnp.bfloat16), np.float32)
  np.testing.assert_allclose(got, want, rtol=2e-2, atol=1e-3)
  if name == "softplus":      # the call itself computes the form since probe 46i
    np.testing.assert_allclose(np.asarray(softplus_call(x, interpret=True), np.float32), want, rtol=2e-2, atol=1e-3)


# ---------------------------------------------------------------- jnp.linalg.norm's orders, hinted as written
@mg.mgpu_kernel(out_shape=lambda x: x)
def l1_normalize_norm(x, o):
  v = x[...]
  o[...] = v / jnp.linalg.norm(v, ord=1, axis=1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda x: x)
def inf_normalize_norm(x, o):
  v = x[...]
  o[...] = v / jnp.linalg.norm(v, ord=jnp.inf)


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def norms_followed(x, o, p):
  v = x[...]
  o[...] = v / ml.sum(ml.abs(v), axis=1, keepdims=True)
  p[...] = v / ml.max(ml.sum(ml.abs(v), axis=1))


def test_a_norms_order_is_hinted_as_written():
  """jnp.linalg.norm(v, ord=1, axis=1, keepdims=True) (KernelBench's L1 normalisation) and the matrix
  jnp.linalg.norm(v, ord=jnp.inf) got the generic 'no ml.norm: the L2 norm ml.sqrt(ml.sum(x * x, axis=...)), L1
  ...' with x for the operand; an order the hint reads (None, 'fro', 2 and 1 of vectors, +-inf, a matrix's 1 and
  inf) is written with the call's own operand, axis and keepdims."""
  x = _rand((16, 128), 7)
  got_l1, got_inf = norms_followed(jnp.asarray(x), interpret=True)
  np.testing.assert_allclose(got_l1, x / jnp.linalg.norm(x, ord=1, axis=1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(got_inf, x / jnp.linalg.norm(x, ord=jnp.inf), rtol=1e-5)
  # (since probe 47h the calls compute as jnp's formulas, frontend/jnp_stats.py)
  np.testing.assert_allclose(l1_normalize_norm(jnp.asarray(x), interpret=True),
                             x / jnp.linalg.norm(x, ord=1, axis=1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(inf_normalize_norm(jnp.asarray(x), interpret=True), x / jnp.linalg.norm(x, ord=jnp.inf),
                             rtol=1e-5)


# ---------------------------------------------------------------- pooling by strided register slices (a Pallas user's)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2, x.shape[2] // 2), F32), grid=lambda x: (x.shape[0],))
def max_pool_2x2(x, o):
  """nn.MaxPool2d(2) of (N*C, H, W) planes: the row pairs, then the column pairs, of a plane in registers."""
  r = ml.program_id(0)
  v = x.at[r][...]
  rows = ml.maximum(v[0::2, :], v[1::2, :])
  o.at[r][...] = ml.maximum(rows[:, 0::2], rows[:, 1::2])


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], (x.shape[1] - 1) // 2 + 1), F32), grid=lambda x: (x.shape[0] // 16,))
def max_pool_k3_s2_p1(x, o):
  """nn.MaxPool1d(3, stride=2, padding=1) of 16 rows a program: the padded window (one element before the row,
  -inf outside it) read once, its three taps strided slices, the third starting past the step."""
  i = ml.program_id(0)
  n, m = x.shape[1], o.shape[1]
  c = ml.arange(2 * m + 8)
  w = x.at[ml.ds(i * 16, 16), ml.ds(-1, 2 * m + 8)].load(mask=((c >= 1) & (c < n + 1))[None, :], other=float("-inf"))
  o.at[ml.ds(i * 16, 16)][...] = ml.maximum(ml.maximum(w[:, 0:2 * m:2], w[:, 1:2 * m + 1:2]), w[:, 2:2 * m + 2:2])


def test_strided_slices_of_a_tiles_rows_and_past_the_step_pool():
  """v[0::2, :] (a row step) and w[:, 2:130:2] (a start past the step, a stop before the end) were MG003 'strided
  slices (step 2) of a register tensor are not supported', whose hint reshaped the array outside the kernel (for a
  row step, its last axis); jnp's slices are the window of whole steps, reshaped and indexed at the offset, as
  v.reshape(8, 2, 128)[:, 1, :] (which compiled) is."""
  x = _rand((2, 16, 64), 8)
  np.testing.assert_array_equal(max_pool_2x2(jnp.asarray(x), interpret=True), x.reshape(2, 8, 2, 32, 2).max((2, 4)))
  max_pool_2x2.check(S(x.shape, F32))
  y = _rand((32, 128), 9)
  pad = np.pad(y, ((0, 0), (1, 1)), constant_values=-np.inf)
  want = np.stack([pad[:, 2 * t:2 * t + 3].max(1) for t in range(64)], 1)
  np.testing.assert_array_equal(max_pool_k3_s2_p1(jnp.asarray(y), interpret=True), want)
  max_pool_k3_s2_p1.check(S(y.shape, F32))


@pytest.mark.gpu
def test_gpu_max_pool_by_strided_row_and_column_slices_matches_interpret():
  x = jnp.asarray(_rand((4, 32, 128), 10))
  np.testing.assert_array_equal(max_pool_2x2(x), max_pool_2x2(x, interpret=True))


@pytest.mark.gpu
def test_gpu_pool_window_starting_before_the_row_matches_interpret():
  """The padded window starts one element before each row (ml.ds(-1, ...), masked there): may fault if the masked
  element's address were dereferenced."""
  y = jnp.asarray(_rand((64, 256), 11))
  np.testing.assert_array_equal(max_pool_k3_s2_p1(y), max_pool_k3_s2_p1(y, interpret=True))


# ---------------------------------------------------------------- a middle-axis statistic carried from a fill of its shape
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[2]), F32))
def logsumexp_dim1_chunks(x, o):
  """torch.logsumexp(x, dim=1) of (batch, time, 32) in chunks of 8 steps: an online max and sum per (batch,
  column), each carried from a fill of the statistic's own shape, (2, 32), without the reduced axis."""
  m = ml.full((x.shape[0], x.shape[2]), float("-inf"), F32)
  s = ml.zeros((x.shape[0], x.shape[2]), F32)
  for t0 in range(0, x.shape[1], 8):
    v = x.at[:, ml.ds(t0, 8), :][...]
    mn = ml.maximum(m, ml.max(v, axis=1))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(v - mn[:, None, :]), axis=1)
    m = mn
  o[...] = m + ml.log(s)


def test_a_middle_axis_statistic_is_carried_from_a_fill_without_its_reduced_axis():
  """A run-time loop carried a (2, 32) middle-axis statistic (64 elements, held spread along the reduced axis) only
  from a keepdims fill, ml.zeros((2, 1, 32)); from ml.zeros((2, 32)) it was MG204 at the first broadcast of it
  ('broadcasting works into 1-D and 2-D tensors, not 3-D ones') or at the reduction ('that works on 2-D tiles')."""
  x = _rand((2, 64, 32), 12)
  np.testing.assert_allclose(logsumexp_dim1_chunks(jnp.asarray(x), interpret=True), jax.nn.logsumexp(x, axis=1),
                             rtol=1e-5, atol=1e-5)
  logsumexp_dim1_chunks.check(S(x.shape, F32))


@mg.mgpu_kernel(out_shape=lambda x, **k: (S(x.shape[:2], F32), S((x.shape[0], x.shape[2]), I32)),
                grid=lambda x, **k: (ml.cdiv(x.shape[0], k["BB"]),), block=256)
def kept_rows_two_warpgroups(x, o, p, *, BB: ml.constexpr):
  """A (2, 8) row max and a (2, 128) column argmax of (2, 8, 128) tiles under a tail's mask, at block=256."""
  i = ml.program_id(0)
  b = i * BB + ml.arange(BB)
  v = x.at[ml.ds(i * BB, BB), :, :].load(mask=b[:, None, None] < x.shape[0], other=float("-inf"))
  o.at[ml.ds(i * BB, BB), :].store(ml.max(v, axis=2), mask=b[:, None] < x.shape[0])
  p.at[ml.ds(i * BB, BB), :].store(ml.argmax(v, axis=1), mask=b[:, None] < x.shape[0])


def test_small_statistics_under_a_mask_build_with_two_warpgroups():
  x = _rand((5, 8, 128), 13)
  got_max, got_arg = kept_rows_two_warpgroups(jnp.asarray(x), BB=2, interpret=True)
  np.testing.assert_array_equal(got_max, x.max(2))
  np.testing.assert_array_equal(got_arg, x.argmax(1))
  kept_rows_two_warpgroups.check(S(x.shape, F32), BB=2)


@pytest.mark.gpu
def test_gpu_small_statistics_at_block_256_and_a_carried_spread_statistic_match_interpret():
  x = jnp.asarray(_rand((5, 8, 128), 13))
  for g, w in zip(kept_rows_two_warpgroups(x, BB=2), kept_rows_two_warpgroups(x, BB=2, interpret=True)):
    np.testing.assert_array_equal(g, w)
  y = jnp.asarray(_rand((2, 64, 32), 12))
  np.testing.assert_allclose(logsumexp_dim1_chunks(y), logsumexp_dim1_chunks(y, interpret=True), rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), F32))
def pairs_of_a_small_plane(x, o):
  v = x[...]
  o[...] = ml.maximum(v[:, ::2], v[:, 1::2])


def test_a_strided_slice_of_a_tile_registers_cannot_hold_computes():
  """v[:, ::2] of a (5, 40) plane read whole (200 elements) was an InternalError (StopIteration: the hint looked for
  a padding of the columns that made the slice whole, and none does), then MG204 naming the tile with the masked
  window that holds it; since probe 47a the plane is read padded and its pairs taken padded."""
  x = _rand((5, 40), 13)
  np.testing.assert_array_equal(np.asarray(pairs_of_a_small_plane(x, interpret=True)),
                                np.maximum(x[:, ::2], x[:, 1::2]))


# ---------------------------------------------------------------- Triton's 3-D grids of pointers
@mg.mgpu_kernel(out_shape=lambda x, **k: S((x.shape[0], x.shape[2]), F32),
                grid=lambda x, **k: (ml.cdiv(x.shape[0], k["BB"]), ml.cdiv(x.shape[2], k["BN"])))
def sum_dim1_pointer_grid(x, o, *, BB: ml.constexpr, BM: ml.constexpr, BN: ml.constexpr):
  """torch.sum(x, dim=1) with Triton's block of pointers, offs_b[:, None, None], offs_m[None, :, None] and
  offs_n[None, None, :], under its mask."""
  i, j = ml.program_id(0), ml.program_id(1)
  b, m, n = i * BB + ml.arange(BB), ml.arange(BM), j * BN + ml.arange(BN)
  v = ml.load(x.at[b[:, None, None], m[None, :, None], n[None, None, :]],
              mask=(b[:, None, None] < x.shape[0]) & (m[None, :, None] < x.shape[1]) & (n[None, None, :] < x.shape[2]),
              other=0.0)
  ml.store(o.at[b[:, None], n[None, :]], ml.sum(v, axis=1), mask=(b[:, None] < x.shape[0]) & (n[None, :] < x.shape[2]))


def test_a_3d_grid_of_runs_is_the_window_it_covers():
  """x.at[b[:, None, None], m[None, :, None], n[None, None, :]] of runs in the ref's axis order was taken for a
  gather, MG204 'this gather gives a 3-D result (2, 8, 32): a gather gives 1-D and 2-D tensors' (2-D grids,
  rows[:, None] and cols[None, :], were the window's masked access): a grid of any rank is."""
  x = _rand((5, 7, 100), 14)
  np.testing.assert_allclose(sum_dim1_pointer_grid(jnp.asarray(x), BB=2, BM=8, BN=32, interpret=True), x.sum(1),
                             rtol=1e-5, atol=1e-5)
  sum_dim1_pointer_grid.check(S(x.shape, F32), BB=2, BM=8, BN=32)


@pytest.mark.gpu
def test_gpu_3d_pointer_grid_past_the_arrays_end_matches_interpret():
  """The last programs' 3-D windows run past the batches and columns (masked off there): may fault if a masked
  element's address were dereferenced."""
  x = jnp.asarray(_rand((5, 7, 100), 14))
  np.testing.assert_allclose(sum_dim1_pointer_grid(x, BB=2, BM=8, BN=32),
                             sum_dim1_pointer_grid(x, BB=2, BM=8, BN=32, interpret=True), rtol=1e-6, atol=1e-6)
