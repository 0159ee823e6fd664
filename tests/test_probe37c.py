"""Probe 37c (row statistics and normalisation as a Triton or Pallas user writes them: softmax and
log-softmax along rows and columns, layer/RMS/group norm forward and backward, cross-entropy, Welford
variance, narrow and 3-D tiles, integer and boolean reductions)."""
import math

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rows(shape, dtype=F32, seed=0):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


# ---------------------------------------------------------------- a long row staged in SMEM, one row of a buffer a chunk
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_softmax(x, out):        # each 1024-wide chunk of the row loaded into one row of x_s
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    ml.copy(x.at[ml.ds(i, 1), ml.ds(c * 1024, 1024)], x_s.at[ml.ds(c, 1)])
  v = x_s[...].astype(F32)
  e = ml.exp(v - ml.max(v))
  out.at[i][...] = (e / ml.sum(e)).reshape(n * 1024).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_rms(x, out):            # the row of x_s indexed by an int
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    ml.copy(x.at[i, ml.ds(c * 1024, 1024)], x_s.at[c])
  v = x_s[...].astype(F32)
  out.at[i][...] = (v * ml.rsqrt(ml.mean(v * v) + 1e-6)).reshape(n * 1024).astype(x.dtype)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def long_row_softmax_followed(x, out):
  i = ml.program_id(0)
  n = x.shape[1] // 1024
  x_s = ml.smem((n, 1024), x.dtype)
  for c in ml.static_range(n):
    for k in ml.static_range(4):
      ml.copy(x.at[ml.ds(i, 1), ml.ds(c * 1024 + k * 256, 256)], x_s.at[ml.ds(c, 1), ml.ds(k * 256, 256)])
  m = ml.full((), -jnp.inf, F32)
  s = ml.full((), 0.0, F32)
  for c in ml.static_range(n):
    blk = x_s.at[c][...].astype(F32)
    mn = ml.maximum(m, ml.max(blk))
    s = s * ml.exp(m - mn) + ml.sum(ml.exp(blk - mn))
    m = mn
  for c in ml.static_range(n):
    x_s.at[c][...] = (ml.exp(x_s.at[c][...].astype(F32) - m) / s).astype(x.dtype)
  for c in ml.static_range(n):
    for k in ml.static_range(4):
      ml.copy(x_s.at[ml.ds(c, 1), ml.ds(k * 256, 256)], out.at[ml.ds(i, 1), ml.ds(c * 1024 + k * 256, 256)])


def test_tma_box_split_hint_keeps_the_buffer_views_own_index():
  """The MG401 hint for a window wider than a TMA box named windows of the whole buffer,
  went into one row of it, `x_s.at[ml.ds(c, 1)]` or `x_s.at[c]`; it kept that index. Since probe 56c the (1, 1024)
  window is one box of (1, 4, 256): long_row_softmax computes as written."""
  spec = [S((4, 4096), jnp.bfloat16)]
  x = _rows((4, 4096), jnp.bfloat16)
  np.testing.assert_allclose(np.asarray(long_row_softmax(x, interpret=True), np.float32),
                             np.asarray(jax.nn.softmax(x.astype(F32), axis=1)), rtol=1e-2, atol=1e-6)
  assert "mosaic_gpu" in jax.export.export(jax.jit(long_row_softmax), platforms=["cuda"])(*spec).mlir_module()
  # the row of x_s indexed by an int is a 1-D window of 1024 (its only axis leading): 4 TMAs of 256 since probe 52i
  v = np.asarray(x, np.float32)
  want = v / np.sqrt((v * v).mean(1, keepdims=True) + 1e-6)
  np.testing.assert_allclose(np.asarray(long_row_rms(x, interpret=True), np.float32), want, rtol=2e-2, atol=2e-2)
  assert "mosaic_gpu" in jax.export.export(jax.jit(long_row_rms), platforms=["cuda"])(*spec).mlir_module()
  got = long_row_softmax_followed(x, interpret=True)
  ref = jax.nn.softmax(x.astype(F32), axis=1)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(ref), rtol=1e-2, atol=1e-6)
  long_row_softmax_followed.check(*spec)


# ---------------------------------------------------------------- a statistic over the last axis of a 3-D tile
@mg.mgpu_kernel(out_shape=lambda x: x)
def l2norm_3d(x, out):               # each (b, r) row of a (b, r, c) tile scaled to unit length
  v = x[...]
  out[...] = v * ml.rsqrt(ml.sum(v * v, axis=-1, keepdims=True))


@mg.mgpu_kernel(out_shape=lambda x: x)
def l2norm_3d_followed(x, out):
  v2 = x[...].reshape(16, 128)
  out[...] = (v2 * ml.rsqrt(ml.sum(v2 * v2, axis=1, keepdims=True))).reshape(2, 8, 128)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape[:2], F32))
def row_sums_3d(x, out):
  out[...] = ml.sum(x[...], axis=-1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * x.shape[1],), F32))
def row_sums_3d_followed(x, out):
  out[...] = (ml.sum(x[...], axis=-1)).reshape(16)


def test_3d_reduction_kept_or_too_short_hints_computing_on_the_2d_reshape():
  """A reduction over the last axis of a (2, 8, 128) tile with keepdims=True (a norm), or whose (2, 8)
  result no register tensor holds, got 'read the tensor 2-D ... a register tile cannot be reshaped into
  one': it can (x[...].reshape(16, 128) is free), and computing there works."""
  spec = [S((2, 8, 128), F32)]
  # (since probe 43a the (2, 8) statistic is the vector of the 2-D reshape's rows, typed (2, 8): m[..., None] and m[i]
  # take it; since probe 44f stored whole it is stored a row of 8 at a time: it was MG204 at the store)
  x = _rows((2, 8, 128))     # (l2norm_3d itself computes since probe 39a: its (2, 8, 1) statistic broadcasts)
  np.testing.assert_allclose(row_sums_3d(x, interpret=True), x.sum(-1), rtol=1e-5, atol=1e-5)
  row_sums_3d.check(*spec)
  np.testing.assert_allclose(l2norm_3d(x, interpret=True), x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True)),
                             rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(l2norm_3d_followed(x, interpret=True),
                             x * jax.lax.rsqrt(jnp.sum(x * x, axis=-1, keepdims=True)), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(row_sums_3d_followed(x, interpret=True).reshape(2, 8), x.sum(-1), rtol=1e-5, atol=1e-5)
  l2norm_3d_followed.check(*spec)
  row_sums_3d_followed.check(*spec)


# ---------------------------------------------------------------- per-row statistics of a few rows stored through SMEM
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 2,))
def two_row_stats(x, mean, rstd):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 2, 2)][...]
  m_s = ml.smem((2,), F32)
  mu = ml.mean(v, axis=1)
  m_s[...] = mu
  ml.copy(m_s, mean.at[ml.ds(i * 2, 2)])
  rstd.at[ml.ds(i * 2, 2)][...] = ml.rsqrt(ml.var(v, axis=1) + 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), F32)), grid=lambda x: (x.shape[0] // 2,))
def two_row_stats_followed(x, mean, rstd):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 2, 2)][...]
  mu = ml.mean(v, axis=1)
  mean.at[ml.ds(i * 2, 2)][...] = mu
  rstd.at[ml.ds(i * 2, 2)][...] = ml.rsqrt(ml.var(v, axis=1) + 1e-5)


def test_tma_window_narrower_than_16_bytes_hints_the_register_store():
  """'make the last dimension a multiple of 4 elements' named no window and no way round it; the
  hint names the window and the register store, which takes any width (a row statistic of 2 rows)."""
  spec = [S((16, 128), F32)]
  expect(two_row_stats, spec, mg.TmaLimitError, "ml.copy(m_s",
         "TMA copies need the last dimension to span a multiple of 16 bytes; 2 x 4 bytes = 8",
         hint="make the window's last dimension a multiple of 4 elements (16 bytes), or store the value from"
              " registers instead of copying it through m_s, mean.at[ml.ds(i * 2, 2)][...] = value (a register"
              " store takes any width)")
  x = _rows((16, 128))
  got = two_row_stats_followed(x, interpret=True)
  np.testing.assert_allclose(got[0], x.mean(1), rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(got[1], jax.lax.rsqrt(x.var(1) + 1e-5), rtol=1e-5)
  two_row_stats_followed.check(*spec)


# ---------------------------------------------------------------- jax.nn.logsumexp's b= and return_sign=
@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), F32))
def weighted_lse(x, w, out):         # log(sum(w * exp(x))) per row: a mixture's log-likelihood
  out[...] = ml.logsumexp(x[...], axis=1, b=w[...])


@mg.mgpu_kernel(out_shape=lambda x, w: S((x.shape[0],), F32))
def weighted_lse_followed(x, w, out):
  out[...] = ml.logsumexp(x[...] + ml.log(w[...]), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def halved_lse(x, out):
  out[...] = ml.logsumexp(x[...], axis=1, b=0.5)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def halved_lse_followed(x, out):
  out[...] = ml.logsumexp(x[...] + math.log(0.5), axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32))
def signed_lse(x, out):
  r, s = ml.logsumexp(x[...], axis=1, return_sign=True)
  out[...] = r * s


def test_logsumexp_b_and_return_sign_are_jax_nns():
  """jax.nn.logsumexp(x, b=w) was MG003; it now takes b= and return_sign= (probe 37a), and the shifted
  form a hint once wrote computes the same."""
  x = jnp.abs(_rows((16, 128))) - 0.5
  w = jnp.abs(_rows((16, 128)))
  want = jax.nn.logsumexp(x, axis=1, b=w)
  np.testing.assert_allclose(weighted_lse(x, w, interpret=True), want, rtol=1e-5)
  np.testing.assert_allclose(weighted_lse_followed(x, w, interpret=True), want, rtol=1e-5)
  np.testing.assert_allclose(halved_lse(x, interpret=True), jax.nn.logsumexp(x, axis=1, b=0.5), rtol=1e-5)
  np.testing.assert_allclose(halved_lse_followed(x, interpret=True), jax.nn.logsumexp(x, axis=1, b=0.5), rtol=1e-5)
  r, sg = jax.nn.logsumexp(x, axis=1, return_sign=True)
  np.testing.assert_allclose(signed_lse(x, interpret=True), r * sg, rtol=1e-5)

# ---------------------------------------------------------------- torch's v.max(dim=1)[0]
@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), jnp.int32)))
def torch_row_max(x, m, idx):
  v = x[...]
  m[...] = v.max(dim=1)[0]
  idx[...] = v.max(dim=1)[1]


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0],), F32), S((x.shape[0],), jnp.int32)))
def torch_row_max_followed(x, m, idx):
  v = x[...]
  m[...] = ml.max(v, axis=1)
  idx[...] = ml.argmax(v, axis=1)


def test_torch_max_over_dim_hints_values_and_indices():
  """v.max(dim=1)[0] (torch: the values of a (values, indices) pair) was hinted 'write axis= for dim=';
  followed, v.max(axis=1)[0] is the first row's maximum, broadcast into every row: silently wrong."""
  spec = [S((16, 128), F32)]
  expect(torch_row_max, spec, mg.KernelTypeError, "v.max(dim=1)[0]", "ml.max: got an unexpected keyword argument 'dim'",
         hint="write axis= for dim=: torch's max and min over dim= give a (values, indices) pair: here ml.max(v, axis=1)"
              " is the values alone (no [0] after it: that would take its first element) and ml.argmax(v, axis=1) the"
              " indices; ml.max(x, axis=None, keepdims=False, initial=None, where=None, return_indices=False,"
              " return_indices_tie_break_left=True)")
  x = _rows((16, 128))
  m, idx = torch_row_max_followed(x, interpret=True)
  np.testing.assert_array_equal(m, x.max(1))
  np.testing.assert_array_equal(idx, jnp.argmax(x, 1))


# ---------------------------------------------------------------- a row statistic on the wrong axis
@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0], 1), F32)))
def row_normalise_transposed(x, out, total):
  v = x[...]
  out[...] = v / ml.sum(v, axis=1)[None, :]
  total[...] = ml.sum(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def row_centre_keepdims_T(x, out):
  v = x[...]
  out[...] = v - ml.max(v, axis=1, keepdims=True).T


@mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0], 1), F32)))
def row_normalise_followed(x, out, total):
  v = x[...]
  out[...] = v / ml.sum(v, axis=1)[:, None]
  total[...] = ml.sum(v, axis=1)[:, None]


def test_statistic_on_the_wrong_axis_hints_the_axis_it_belongs_on():
  """A (16,) row sum as [None, :] (or a keepdims max transposed) meeting its (16, 128) tile, and the
  row sum stored into a (16, 1) output, were hinted 'insert axes with v[:, None] or v[None, :]' (naming
  the tile, not the statistic) and 'broadcast it explicitly with ml.broadcast_to' (which cannot)."""
  spec = [S((16, 128), F32)]
  expect(row_normalise_transposed, spec, mg.ShapeMismatchError, "v / ml.sum",
         "/ on v of shape (16, 128) and ml.sum(v, axis=1)[None, :] of shape (1, 16): the shapes do not broadcast"
         " (axis 1 of the result would be both 128 and 16)",
         hint="shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch; ml.sum(v, axis=1)[None, :]"
              " has its 16 elements on axis 1, where the other operand has 128: put them on axis 0,"
              " ml.sum(v, axis=1)[:, None] (shape (16, 1))")
  expect(row_centre_keepdims_T, spec, mg.ShapeMismatchError, "v - ml.max",
         "- on v of shape (16, 128) and ml.max(v, axis=1, keepdims=True).T of shape (1, 16): the shapes do not"
         " broadcast (axis 1 of the result would be both 128 and 16)",
         hint="shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch; ml.max(v, axis=1,"
              " keepdims=True).T has its 16 elements on axis 1, where the other operand has 128: put them on axis 0,"
              " ml.max(v, axis=1, keepdims=True) (shape (16, 1))")

  @mg.mgpu_kernel(out_shape=lambda x: (x, S((x.shape[0], 1), F32)))
  def row_normalise_store(x, out, total):
    v = x[...]
    out[...] = v / ml.sum(v, axis=1)[:, None]
    total[...] = ml.sum(v, axis=1)

  expect(row_normalise_store, spec, mg.ShapeMismatchError, "total[...] =",
         "cannot store a tensor of shape (16,) into total of shape (16, 1)",
         hint="the window has the value's elements on other axes: give ml.sum(v, axis=1) the axes it lacks:"
              " ml.sum(v, axis=1)[:, None] (shape (16, 1))")
  x = jnp.abs(_rows((16, 128))) + 0.1
  out, total = row_normalise_followed(x, interpret=True)
  np.testing.assert_allclose(out, x / x.sum(1, keepdims=True), rtol=1e-5)
  np.testing.assert_allclose(total, x.sum(1, keepdims=True), rtol=1e-5)
  row_normalise_followed.check(*spec)


# ---------------------------------------------------------------- rows narrower than a warp
@mg.mgpu_kernel(out_shape=lambda x: x)
def narrow_softmax(x, out):          # 16 classes a row
  v = x[...]
  out[...] = ml.softmax(v, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: x)
def narrow_softmax_followed(x, out):
  v = x[...]
  out[...] = ml.softmax(v.T, axis=0).T


def test_rows_narrower_than_a_warp_compile_and_so_does_the_transpose_in_the_kernel():
  """A (128, 16) tile reduced along its rows was hinted to be read transposed outside the kernel, or
  padded; its transpose in registers (through SMEM) works as well, with no change outside."""
  for shape in ((128, 16), (64, 8)):     # (the first now compiles as written: narrow rows, design note 71)
    x = _rows(shape)
    np.testing.assert_allclose(narrow_softmax(x, interpret=True), jax.nn.softmax(x, axis=1), rtol=1e-5, atol=1e-7)
    narrow_softmax.check(S(shape, F32))
    np.testing.assert_allclose(narrow_softmax_followed(x, interpret=True), jax.nn.softmax(x, axis=1),
                               rtol=1e-5, atol=1e-7)
    narrow_softmax_followed.check(S(shape, F32))


# ---------------------------------------------------------------- softmax's where= of another shape
@mg.mgpu_kernel(out_shape=lambda x, n: (x, x))
def softmax_row_mask(x, n, out, lout):
  v = x[...]
  rowok = n[...] > 64                # one flag a row
  out[...] = ml.softmax(v, axis=1, where=rowok)
  lout[...] = ml.log_softmax(v, axis=1, where=rowok)


@mg.mgpu_kernel(out_shape=lambda x, n: (x, x))
def softmax_row_mask_followed(x, n, out, lout):
  v = x[...]
  rowok = n[...] > 64
  out[...] = ml.softmax(v, axis=1, where=rowok[:, None])
  lout[...] = ml.log_softmax(v, axis=1, where=rowok[:, None])


def test_softmax_where_mask_that_does_not_broadcast_names_the_call():
  """A where= mask of shape (16,) for a (16, 128) tile was reported as 'ml.where on rowok ...', an op
  the kernel does not call; it names ml.softmax's where=, with the axes the mask lacks."""
  spec = [S((16, 128), F32), S((16,), jnp.int32)]
  expect(softmax_row_mask, spec, mg.ShapeMismatchError, "ml.softmax(",
         "ml.softmax's where= on rowok of shape (16,) and v of shape (16, 128): the shapes do not broadcast"
         " (axis 1 of the result would be both 16 and 128)",
         hint="shapes broadcast as in NumPy: trailing axes align and size-1 axes stretch; give rowok the axes it"
              " lacks: rowok[:, None] (shape (16, 1))")
  x = _rows((16, 128))
  n = jnp.asarray(np.random.default_rng(2).integers(0, 129, 16), jnp.int32)
  out, lout = softmax_row_mask_followed(x, n, interpret=True)
  keep = (n > 64)[:, None]
  np.testing.assert_allclose(out, jax.nn.softmax(x, axis=1, where=keep), rtol=1e-5, atol=1e-7)
  np.testing.assert_allclose(lout, jax.nn.log_softmax(x, axis=1, where=keep), rtol=1e-5, atol=1e-6)
  softmax_row_mask_followed.check(*spec)
