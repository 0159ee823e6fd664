"""Probe 32d (Liger-Kernel and Unsloth kernels ported from Triton: fused add + RMSNorm, layer norm
forward and backward, RoPE, SwiGLU/GeGLU, cross-entropy, fused linear cross-entropy, KL, JSD, group
norm, DyT, sparsemax, top-k and top-p sampling): the mistakes a Triton user makes on the way, and
the hints that must work when followed."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32


# ---------------------------------------------------------------- Triton's tl.atomic_add(..., mask=)
BN = 64


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1],), F32), grid=lambda p: (ml.cdiv(p.shape[1], BN),))
def dw_masked(p, dw):                 # layer norm's dw: partial sums of the CTAs, Triton's masked atomic
  j = ml.program_id(0)
  cols = j * BN + ml.arange(BN)
  v = p.at[:, ml.ds(j * BN, BN)].load(mask=cols[None, :] < p.shape[1], other=0.0)
  ml.atomic_add(dw.at[ml.ds(j * BN, BN)], ml.sum(v, axis=0), mask=cols < p.shape[1])


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1], 32), F32), grid=lambda p: (ml.cdiv(p.shape[1], BN),))
def dw_rows_masked(p, dw):            # a 2-D window: rows of dw, the mask along them
  j = ml.program_id(0)
  cols = j * BN + ml.arange(BN)
  t = p.at[ml.ds(0, 32), ml.ds(j * BN, BN)].load(mask=cols[None, :] < p.shape[1], other=0.0).T
  ml.atomic_add(dw.at[ml.ds(j * BN, BN), :], t, mask=(cols < p.shape[1])[:, None])


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1],), jnp.int32), grid=lambda p: (ml.cdiv(p.shape[1], BN),))
def colmax_masked(p, out):
  j = ml.program_id(0)
  cols = j * BN + ml.arange(BN)
  v = p.at[:, ml.ds(j * BN, BN)].load(mask=cols[None, :] < p.shape[1], other=0)
  ml.atomic_max(out.at[ml.ds(j * BN, BN)], ml.max(v, axis=0), mask=cols < p.shape[1])


def test_a_masked_atomic_updates_what_its_mask_keeps():
  """The masked atomics were MG003 ("takes no mask=") whose hint wrote the scatter and the select; since probe
  47d mask= works (frontend/ops/atomic_masks.py), windows past the array's end included."""
  p = np.asarray(rand.normal(rand.key(3), (8, 130), F32))
  np.testing.assert_allclose(dw_masked(p, interpret=True), p.sum(0), rtol=1e-5, atol=1e-5)
  p = np.asarray(rand.normal(rand.key(4), (32, 130), F32))
  np.testing.assert_allclose(dw_rows_masked(p, interpret=True), p.T, rtol=1e-5, atol=1e-5)
  q = np.random.default_rng(5).integers(-100, 100, (8, 130)).astype(np.int32)
  np.testing.assert_array_equal(colmax_masked(q, interpret=True), q.max(0))


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1],), F32), grid=lambda p: (ml.cdiv(p.shape[1], BN),))
def dw_scatter(p, dw):                # the first form, followed
  j = ml.program_id(0)
  cols = j * BN + ml.arange(BN)
  v = p.at[:, ml.ds(j * BN, BN)].load(mask=cols[None, :] < p.shape[1], other=0.0)
  ml.atomic_add(dw.at[(j * BN) + ml.arange(64)], ml.sum(v, axis=0))


@mg.mgpu_kernel(out_shape=lambda p: S((p.shape[1], 32), F32), grid=lambda p: (ml.cdiv(p.shape[1], BN),))
def dw_rows_scatter(p, dw):
  j = ml.program_id(0)
  cols = j * BN + ml.arange(BN)
  t = p.at[ml.ds(0, 32), ml.ds(j * BN, BN)].load(mask=cols[None, :] < p.shape[1], other=0.0).T
  ml.atomic_add(dw.at[(j * BN) + ml.arange(64)], t)


def test_the_masked_atomic_hint_followed_computes_the_column_sums():
  p = rand.normal(rand.key(0), (8, 130), F32)
  np.testing.assert_allclose(dw_scatter(p, interpret=True), p.sum(0), rtol=1e-5, atol=1e-5)
  p = rand.normal(rand.key(1), (32, 130), F32)
  np.testing.assert_allclose(dw_rows_scatter(p, interpret=True), p.T, rtol=1e-6)


# ---------------------------------------------------------------- Triton's tl.load(x_ptr + row * stride + cols, mask=)
BLOCK = 1024


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def sum_sq_positions(x, out):         # RMSNorm's sum of squares, the columns as a tensor of positions
  r = ml.program_id(0)
  acc = ml.zeros((BLOCK,), F32)
  for off in range(0, x.shape[1], BLOCK):
    cols = off + ml.arange(0, BLOCK)
    v = x.at[r, cols].load(mask=cols < x.shape[1], other=0.0)
    acc += v * v
  out[r] = ml.sum(acc)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def scale_positions(x, y):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  v = x.at[r, ml.ds(0, BLOCK)].load(mask=cols < x.shape[1], other=0.0)
  y.at[r, cols].store(v * 2.0, mask=cols < x.shape[1])


def test_a_load_or_store_of_positions_moves_the_window_they_cover():
  """x.at[r, cols].load(mask=, other=) and y.at[r, cols].store(v, mask=) of a run of columns were errors whose
  hints wrote the window; they now move it (twenty-ninth session)."""
  x = rand.normal(rand.key(3), (4, 5000), F32)
  np.testing.assert_allclose(sum_sq_positions(x, interpret=True), (x * x).sum(1), rtol=1e-5)
  np.testing.assert_allclose(sum_sq_positions(x, interpret=True), sum_sq_window(x, interpret=True), rtol=1e-6)
  x = rand.normal(rand.key(4), (4, 1000), F32)
  np.testing.assert_array_equal(scale_positions(x, interpret=True), x * 2)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), F32), grid=lambda x: (x.shape[0],))
def sum_sq_window(x, out):            # the hint followed
  r = ml.program_id(0)
  acc = ml.zeros((BLOCK,), F32)
  for off in range(0, x.shape[1], BLOCK):
    cols = off + ml.arange(0, BLOCK)
    v = x.at[r, ml.ds(off, 1024)].load(mask=cols < x.shape[1], other=0.0)
    acc += v * v
  out[r] = ml.sum(acc)


def test_the_window_hint_followed_sums_every_row():
  x = rand.normal(rand.key(2), (4, 5000), F32)
  np.testing.assert_allclose(sum_sq_window(x, interpret=True), (x * x).sum(1), rtol=1e-5)


# ---------------------------------------------------------------- group norm over 196 positions (14 x 14)
GROUPS = 8


@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0], GROUPS))
def group_norm(x, w, b, y):
  n = ml.program_id(0)
  g = ml.program_id(1)
  cpg = x.shape[1] // GROUPS
  v = x.at[n, ml.ds(g * cpg, cpg), :][...]          # (8, 196): the group's channels by positions
  mu = ml.mean(v)
  var = ml.mean((v - mu) * (v - mu))
  rs = ml.rsqrt(var + 1e-5)
  wv = w.at[ml.ds(g * cpg, cpg)][...]
  bv = b.at[ml.ds(g * cpg, cpg)][...]
  y.at[n, ml.ds(g * cpg, cpg), :][...] = (v - mu) * rs * wv[:, None] + bv[:, None]


@mg.mgpu_kernel(out_shape=lambda x, w, b, p: x, grid=lambda x, w, b, p: (x.shape[0], GROUPS))
def group_norm_position_bias(x, w, b, p, y):   # + a bias per position, (196,): a row no padded tile meets
  n = ml.program_id(0)
  g = ml.program_id(1)
  cpg = x.shape[1] // GROUPS
  v = x.at[n, ml.ds(g * cpg, cpg), :][...]          # (8, 196): the group's channels by positions
  mu = ml.mean(v)
  var = ml.mean((v - mu) * (v - mu))
  rs = ml.rsqrt(var + 1e-5)
  wv = w.at[ml.ds(g * cpg, cpg)][...]
  bv = b.at[ml.ds(g * cpg, cpg)][...]
  y.at[n, ml.ds(g * cpg, cpg), :][...] = (v - mu) * rs * wv[:, None] + bv[:, None] + p[...][None, :]


def test_a_narrow_tile_failing_at_a_broadcast_is_padded_for_the_reductions_it_also_meets():
  """The tile failed where w[:, None] is broadcast along it, so the hint read the 224 columns with
  other=0 and no word of the group's mean and variance: followed, ml.mean of the padded tile divided by
  1792 and counted (0 - mean) ** 2 for every padded column, silently wrong statistics. (Since probe 46d the
  padded trace takes `group_norm` itself, w[:, None] being the same along the padded columns: its numbers are
  checked below; since probe 47a a row of 196 positions broadcast along the tile, p[...][None, :], read padded
  to 200, is grown to the tile's 224 columns, and computes too.)"""
  x = rand.normal(rand.key(3), (2, 64, 196), F32) * 2 + 1
  w, b, p = rand.normal(rand.key(4), (64,), F32), rand.normal(rand.key(5), (64,), F32), rand.normal(rand.key(6), (196,), F32)
  xg = x.reshape(2, GROUPS, -1)
  want = ((xg - xg.mean(-1, keepdims=True)) / jnp.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
  want = want * w[None, :, None] + b[None, :, None] + p[None, None, :]
  np.testing.assert_allclose(group_norm_position_bias(x, w, b, p, interpret=True), want, rtol=1e-4, atol=1e-4)


@mg.mgpu_kernel(out_shape=lambda x, w, b: x, grid=lambda x, w, b: (x.shape[0], GROUPS))
def group_norm_padded(x, w, b, y):      # the hint followed
  n = ml.program_id(0)
  g = ml.program_id(1)
  cpg = x.shape[1] // GROUPS
  keep = ml.arange(224)[None, :] < 196
  v = x.at[n, ml.ds(g * cpg, 8), ml.ds(0, 224)].load(mask=keep, other=0.0)
  mu = ml.sum(v) / 1568
  var = ml.sum(ml.where(keep, (v - mu) ** 2, 0.0)) / 1568
  rs = ml.rsqrt(var + 1e-5)
  wv = w.at[ml.ds(g * cpg, cpg)][...]
  bv = b.at[ml.ds(g * cpg, cpg)][...]
  y.at[n, ml.ds(g * cpg, 8), ml.ds(0, 224)].store((v - mu) * rs * wv[:, None] + bv[:, None], mask=keep)


def test_the_padded_group_norm_matches_jnp():
  x = rand.normal(rand.key(3), (2, 64, 196), F32) * 2 + 1
  w = rand.normal(rand.key(4), (64,), F32)
  b = rand.normal(rand.key(5), (64,), F32)
  xg = x.reshape(2, GROUPS, -1)
  want = ((xg - xg.mean(-1, keepdims=True)) / jnp.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
  want = want * w[None, :, None] + b[None, :, None]
  np.testing.assert_allclose(group_norm_padded(x, w, b, interpret=True), want, rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(group_norm(x, w, b, interpret=True), want, rtol=1e-4, atol=1e-4)   # (probe 46d)


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0], 16))
def group_norm_two_channels(x, w, y):   # groups of 2 channels by 96 positions: rows, not columns, too few
  n = ml.program_id(0)
  g = ml.program_id(1)
  v = x.at[n, ml.ds(g * 2, 2), :][...]
  mu = ml.mean(v)
  d = v - mu
  rs = ml.rsqrt(ml.mean(d * d) + 1e-5)
  y.at[n, ml.ds(g * 2, 2), :][...] = d * rs * w.at[ml.ds(g * 2, 2)][...][:, None]


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=lambda x, w: (x.shape[0], 16))
def group_norm_two_channels_padded(x, w, y):    # the hint followed
  n = ml.program_id(0)
  g = ml.program_id(1)
  keep = (ml.arange(4) < 2)[:, None]
  v = x.at[n, ml.ds(g * 2, 4), :].load(mask=keep, other=0.0)
  mu = ml.sum(v) / 192
  d = v - mu
  rs = ml.rsqrt(ml.sum(ml.where(keep, d * d, 0.0)) / 192 + 1e-5)
  wv = w.at[ml.ds(g * 2, 4)].load(mask=ml.arange(4) < 2, other=0.0)
  y.at[n, ml.ds(g * 2, 4), :].store(d * rs * wv[:, None], mask=keep)


def test_padded_rows_of_a_whole_tile_reduction_compute_its_mean_and_variance():
  """The rows hint padded with other=0.0 and said nothing more: ml.mean of the 4 padded rows is half
  the group's mean, and its variance counts (0 - mean) ** 2 for every padded element. (Then it said how they
  count; since probe 47a the kernel computes, its (2,) weights, read padded to 8, meeting the rows padded to 4.)"""
  x = rand.normal(rand.key(6), (2, 32, 96), F32) * 3 + 2
  w = rand.normal(rand.key(7), (32,), F32)
  xg = x.reshape(2, 16, -1)
  want = ((xg - xg.mean(-1, keepdims=True)) / jnp.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
  np.testing.assert_allclose(group_norm_two_channels_padded(x, w, interpret=True), want * w[None, :, None],
                             rtol=1e-4, atol=1e-4)
  np.testing.assert_allclose(group_norm_two_channels(x, w, interpret=True), want * w[None, :, None],
                             rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- a row of 100 elements: a 1-D vector padded
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def standardize_rows(x, out):
  r = ml.program_id(0)
  v = x.at[r, :][...]
  out.at[r, :][...] = (v - ml.mean(v)) * ml.rsqrt(ml.var(v) + 1e-5)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0],))
def standardize_rows_padded(x, out):    # the hint followed
  r = ml.program_id(0)
  keep = ml.arange(104) < 100
  v = x.at[r, ml.ds(0, 104)].load(mask=keep, other=0.0)
  mean = ml.sum(v) / 100
  var = ml.sum(ml.where(keep, (v - mean) ** 2, 0.0)) / 100
  out.at[r, ml.ds(0, 104)].store((v - mean) * ml.rsqrt(var + 1e-5), mask=keep)


def test_a_short_row_of_a_2d_array_is_padded_in_its_own_window_and_its_variance_masked():
  """The hint wrote ref.at[ml.ds(start, 104)] for x.at[r, :] (a window of a 2-D array), and said to compute
  a var from ml.sum of the padded tile, which counts (0 - mean) ** 2 for each padding element."""
  x = rand.normal(rand.key(8), (4, 100), F32) * 2 + 3
  want = (x - x.mean(1, keepdims=True)) / jnp.sqrt(x.var(1, keepdims=True) + 1e-5)
  np.testing.assert_allclose(standardize_rows_padded(x, interpret=True), want, rtol=1e-4, atol=1e-4)
  # (since probe 45g the compiler reads the row padded itself, its mean and var over the 100 elements, not 104)
  np.testing.assert_allclose(standardize_rows(x, interpret=True), want, rtol=1e-4, atol=1e-4)


# ---------------------------------------------------------------- cross-entropy with label smoothing over 1000 classes
@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32), grid=lambda x, y: (x.shape[0] // 4,))
def ce_smoothed(x, y, loss):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...]
  lab = y.at[ml.ds(i * 4, 4)][...]
  lse = ml.logsumexp(v, axis=1)
  xy = ml.sum(ml.where(ml.arange(v.shape[1])[None, :] == lab[:, None], v, 0.0), axis=1)
  sx = ml.sum(v, axis=1)
  loss.at[ml.ds(i * 4, 4)][...] = 0.9 * (lse - xy) + 0.1 * (lse - sx / x.shape[1])


@mg.mgpu_kernel(out_shape=lambda x, y: S((x.shape[0],), F32), grid=lambda x, y: (x.shape[0] // 4,))
def ce_smoothed_padded(x, y, loss):     # the hint followed
  i = ml.program_id(0)
  keep = ml.arange(1024)[None, :] < 1000
  v = x.at[ml.ds(i * 4, 4), ml.ds(0, 1024)].load(mask=keep, other=float('-inf'))
  lab = y.at[ml.ds(i * 4, 4)][...]
  lse = ml.logsumexp(v, axis=1)
  xy = ml.sum(ml.where(ml.arange(v.shape[1])[None, :] == lab[:, None], v, 0.0), axis=1)
  sx = ml.sum(ml.where(keep, v, 0.0), axis=1)
  loss.at[ml.ds(i * 4, 4)][...] = 0.9 * (lse - xy) + 0.1 * (lse - sx / x.shape[1])


def test_a_narrow_tile_reduced_by_a_max_and_a_sum_computes_as_written():
  """A (4, 1000) tile reduced by logsumexp's max and a label-smoothing sum was MG204 with a hint to pad with
  float('-inf') and mask the sum (followed, as ce_smoothed_padded, it is right); since session 39 (probes 49a, 49e) the compiler pads
  it itself, each reduction with its own identity: the kernel as written gives the same loss."""
  x = rand.normal(rand.key(9), (8, 1000), F32) * 3
  y = rand.randint(rand.key(10), (8,), 0, 1000)
  lse = jax.nn.logsumexp(x, 1)
  want = 0.9 * (lse - x[jnp.arange(8), y]) + 0.1 * (lse - x.mean(1))
  ce_smoothed.check(S((8, 1000), F32), S((8,), jnp.int32))
  for kernel in (ce_smoothed, ce_smoothed_padded):
    np.testing.assert_allclose(kernel(x, y, interpret=True), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- interleaved RoPE: x[:, ::2] and x[:, 1::2] in registers
HEAD_DIM = 128


@mg.mgpu_kernel(out_shape=lambda q, cos, sin: q, grid=lambda q, cos, sin: (q.shape[0],))
def rope_interleaved(q, cos, sin, out):
  t = ml.program_id(0)
  x = q.at[t][...]                             # (heads, 128): pairs (x[2i], x[2i + 1]) rotate together
  c = cos.at[t, :][...][None, :]
  s = sin.at[t, :][...][None, :]
  xe = x[:, ::2]
  xo = x[:, 1::2]
  pairs = ml.concatenate([(xe * c - xo * s)[..., None], (xo * c + xe * s)[..., None]], axis=-1)
  out.at[t][...] = pairs.reshape(x.shape)


@mg.mgpu_kernel(out_shape=lambda x: (S((x.shape[0] // 4,), x.dtype), S((x.shape[0] // 4,), x.dtype)))
def every_fourth(x, first, last):
  v = x[...]
  first[...] = v[::4]
  last[...] = v[..., 3::4]


def _rope_inputs(dtype=F32):
  q = rand.normal(rand.key(11), (16, 8, HEAD_DIM), dtype)
  ang = rand.uniform(rand.key(12), (16, HEAD_DIM // 2), F32) * 6
  return q, jnp.cos(ang).astype(dtype), jnp.sin(ang).astype(dtype)


def _rope_reference(q, cos, sin):
  c, s = cos[:, None, :], sin[:, None, :]
  xe, xo = q[..., 0::2], q[..., 1::2]
  return jnp.stack([xe * c - xo * s, xo * c + xe * s], -1).reshape(q.shape)


def test_a_strided_slice_of_a_register_tensor_is_jnps():
  """x[:, ::2] of a register tile was MG003 (slice the array outside the kernel), though the same
  elements are x.reshape(h, 64, 2)[:, :, 0] in registers, which compiles: interleaved RoPE (and
  GeGLU's interleaved halves) are written as in jnp now."""
  q, cos, sin = _rope_inputs()
  np.testing.assert_allclose(rope_interleaved(q, cos, sin, interpret=True), _rope_reference(q, cos, sin),
                             rtol=1e-6, atol=1e-6)
  x = np.arange(512, dtype=np.float32)
  first, last = every_fourth(x, interpret=True)
  np.testing.assert_array_equal(first, x[::4])
  np.testing.assert_array_equal(last, x[3::4])
  for dtype in (F32, jnp.bfloat16):
    spec = [S((16, 8, HEAD_DIM), dtype), S((16, HEAD_DIM // 2), dtype), S((16, HEAD_DIM // 2), dtype)]
    jax.export.export(jax.jit(rope_interleaved), platforms=["cuda"])(*spec)


def test_a_strided_slice_of_an_odd_vector_computes():
  """Of a 64-element vector, 16 elements each, it computed since test_probe36a; of 40 elements (10 each, which no
  register vector holds) it was MG204 with a pad-and-mask hint until session 39 padded such slices (probes 49a, 49e)."""
  every_fourth.check(S((40,), F32))
  x = np.arange(40, dtype=np.float32)
  first, last = every_fourth(x, interpret=True)
  np.testing.assert_array_equal(first, x[::4])
  np.testing.assert_array_equal(last, x[3::4])


@pytest.mark.gpu
def test_gpu_interleaved_rope_matches_interpret_mode():
  """Strided register slices are a reshape and an index (through SMEM where the layout needs it) on the
  GPU: the same numbers as interpret mode (written in session 32; not yet run on the H200)."""
  for dtype in (F32, jnp.bfloat16):
    q, cos, sin = _rope_inputs(dtype)
    got = np.asarray(jax.jit(rope_interleaved)(q, cos, sin), np.float32)
    want = np.asarray(rope_interleaved(q, cos, sin, interpret=True), np.float32)
    tol = 1e-5 if dtype == F32 else 1e-2       # (the GPU may fuse x * c - y * s into one rounding)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
  x = jnp.arange(512, dtype=F32)
  first, last = jax.jit(every_fourth)(x)
  np.testing.assert_array_equal(np.asarray(first), np.asarray(x)[::4])
  np.testing.assert_array_equal(np.asarray(last), np.asarray(x)[3::4])


# ---------------------------------------------------------------- Triton's tl.store(out_ptr + row * n + cols, v, mask=)
@mg.mgpu_kernel(out_shape=lambda x, *, n: x, grid=lambda x, *, n: (x.shape[0] // n,))
def silu_flat(x, out, *, n: ml.constexpr):
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  m = cols < n
  v = x.at[ml.ds(r * n, BLOCK)].load(mask=m, other=0.0)
  ml.store(out + r * n + cols, v * ml.sigmoid(v), mask=m)


@mg.mgpu_kernel(out_shape=lambda x, *, n: x, grid=lambda x, *, n: (x.shape[0] // n,))
def silu_flat_window(x, out, *, n: ml.constexpr):     # the hint followed
  r = ml.program_id(0)
  cols = ml.arange(BLOCK)
  m = cols < n
  v = x.at[ml.ds(r * n, BLOCK)].load(mask=m, other=0.0)
  ml.store(out.at[ml.ds(r * n, BLOCK)], v * ml.sigmoid(v), mask=m)


def test_pointer_arithmetic_inside_a_store_hints_the_store_of_the_window():
  """The hint of out + r * n inside ml.store was a load, x.at[ml.ds(start, n)].load(mask=mask, other=0.0),
  and ended 'to add to out's values, read it first: out[...] + r * n'."""
  expect(silu_flat, [S((4000,), F32)], mg.KernelTypeError, "out + r * n",
         "+ works on register values, got out (GMEM ref) plus the offset r * n: a ref is not a pointer, so it does"
         " not move by an offset",
         hint="index the window each step needs instead of moving out: a block, ml.store(out.at[ml.ds(r * n, n)],"
              " v * ml.sigmoid(v), mask=m) (for out + r * n + ml.arange(n), n the length of v * ml.sigmoid(v));"
              " one element, out[i] = v", n=1000)
  x = rand.normal(rand.key(13), (4000,), F32)
  np.testing.assert_allclose(silu_flat_window(x, n=1000, interpret=True), jax.nn.silu(x), rtol=1e-5, atol=1e-6)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], x.shape[1] // 2), x.dtype), grid=lambda x: (x.shape[0] // 4,),
                block=256)
def swiglu_interleaved(x, out):       # gate and up interleaved column by column; two warpgroups
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...].astype(F32)
  g, u = v[:, ::2], v[:, 1::2]
  out.at[ml.ds(i * 4, 4), :][...] = (g * ml.sigmoid(g) * u).astype(out.dtype)


def _swiglu_input():
  return rand.normal(rand.key(14), (8, 2752), jnp.bfloat16)


def test_interleaved_swiglu_splits_its_columns_in_registers():
  x = _swiglu_input()
  xf = x.astype(F32)
  want = (jax.nn.silu(xf[:, ::2]) * xf[:, 1::2]).astype(x.dtype)
  np.testing.assert_allclose(np.asarray(swiglu_interleaved(x, interpret=True), np.float32), np.asarray(want, np.float32),
                             rtol=1e-2, atol=1e-2)
  jax.export.export(jax.jit(swiglu_interleaved), platforms=["cuda"])(S(x.shape, x.dtype))


@pytest.mark.gpu
def test_gpu_interleaved_swiglu_matches_interpret_mode():
  x = _swiglu_input()
  np.testing.assert_allclose(np.asarray(jax.jit(swiglu_interleaved)(x), np.float32),
                             np.asarray(swiglu_interleaved(x, interpret=True), np.float32), rtol=1e-2, atol=1e-2)


@mg.mgpu_kernel(out_shape=lambda g, ids: S((100, g.shape[1]), F32), grid=lambda g, ids: (g.shape[0] // 64,))
def embedding_grad_masked(g, ids, dt):   # padding id 0 skipped, Triton's masked atomic
  i = ml.program_id(0)
  rows = ids.at[ml.ds(i * 64, 64)][...]
  ml.atomic_add(dt.at[rows, :], g.at[ml.ds(i * 64, 64), :][...], mask=(rows != 0)[:, None])


@mg.mgpu_kernel(out_shape=lambda g, ids: S((100, g.shape[1]), F32), grid=lambda g, ids: (g.shape[0] // 64,))
def embedding_grad_selected(g, ids, dt):   # the hint followed
  i = ml.program_id(0)
  rows = ids.at[ml.ds(i * 64, 64)][...]
  ml.atomic_add(dt.at[rows, :], ml.where((rows != 0)[:, None], g.at[ml.ds(i * 64, 64), :][...], 0))


def test_a_masked_scatter_skips_what_its_mask_keeps_off():
  """A scatter given mask= was MG003 whose hint wrote the select; it is that select since probe 47d."""
  g = rand.normal(rand.key(15), (128, 128), F32)
  ids = rand.randint(rand.key(16), (128,), 0, 100)
  want = jnp.zeros((100, 128), F32).at[ids].add(jnp.where((ids != 0)[:, None], g, 0.0))
  np.testing.assert_allclose(embedding_grad_selected(g, ids, interpret=True), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(embedding_grad_masked(g, ids, interpret=True), want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- a TMA box past 256 elements: the array's pieces named
@mg.mgpu_kernel(out_shape=lambda dy, x: S((4, x.shape[1]), F32), grid=lambda dy, x: (4,))
def dw_partials(dy, x, dwp):          # layer norm's dw: each program's rows summed, stored through SMEM
  pid = ml.program_id(0)
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(pid, x.shape[0], ml.num_programs(0)):
    acc += dy.at[r, :][...] * x.at[r, :][...]
  buf = ml.smem((x.shape[1],), F32)
  buf[...] = acc
  ml.copy(buf, dwp.at[pid])


@mg.mgpu_kernel(out_shape=lambda dy, x: S((4, x.shape[1]), F32), grid=lambda dy, x: (4,))
def dw_partials_row(dy, x, dwp):      # the same through a (1, n) buffer: its last axis past the box (one box since 56c)
  pid = ml.program_id(0)
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(pid, x.shape[0], ml.num_programs(0)):
    acc += dy.at[r, :][...] * x.at[r, :][...]
  buf = ml.smem((1, x.shape[1]), F32)
  buf.at[0][...] = acc
  ml.copy(buf, dwp.at[ml.ds(pid, 1)])


@mg.mgpu_kernel(out_shape=lambda dy, x: S((4, x.shape[1]), F32), grid=lambda dy, x: (4,))
def dw_partials_pieces(dy, x, dwp):   # the hint followed
  pid = ml.program_id(0)
  acc = ml.zeros((x.shape[1],), F32)
  for r in range(pid, x.shape[0], ml.num_programs(0)):
    acc += dy.at[r, :][...] * x.at[r, :][...]
  buf = ml.smem((x.shape[1],), F32)
  buf[...] = acc
  for k in ml.static_range(25):
    ml.copy(buf.at[ml.ds(k * 160, 160)], dwp.at[pid, ml.ds(k * 160, 160)])


def test_a_tma_box_hint_names_the_arrays_piece_too():
  """The hint named the buffer's pieces and left '(and the same window of the array)' to the reader. Since
  probe 52i the 1-D copy of 4000 (its only axis leading) is 16 TMAs of at most 256 and computes; a (1, 4000)
  buffer's last axis past the box is one box of (1, 20, 200) since probe 56c and computes too."""
  dy = rand.normal(rand.key(17), (37, 4000), F32)
  x = rand.normal(rand.key(18), (37, 4000), F32)
  want = jnp.stack([(dy[p::4] * x[p::4]).sum(0) for p in range(4)])
  np.testing.assert_allclose(dw_partials_row(dy, x, interpret=True), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dw_partials_pieces(dy, x, interpret=True), want, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(dw_partials(dy, x, interpret=True), want, rtol=1e-5, atol=1e-5)
  spec = (S((37, 4000), F32), S((37, 4000), F32))
  assert "mosaic_gpu" in jax.export.export(jax.jit(dw_partials), platforms=["cuda"])(*spec).mlir_module()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def double_grid_of_positions(x, out):   # Triton's x_ptr + rows[:, None] * stride + cols[None, :]
  i = ml.program_id(0)
  rows = i * 8 + ml.arange(8)
  cols = ml.arange(1024)
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1])
  v = x.at[rows[:, None], cols[None, :]].load(mask=m, other=0.0)
  out.at[ml.ds(i * 8, 8), ml.ds(0, 1024)].store(v * 2, mask=m)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (ml.cdiv(x.shape[0], 8),))
def double_grid_window(x, out):         # the hint followed
  i = ml.program_id(0)
  rows = i * 8 + ml.arange(8)
  cols = ml.arange(1024)
  m = (rows[:, None] < x.shape[0]) & (cols[None, :] < x.shape[1])
  v = x.at[ml.ds(i * 8, 8), ml.ds(0, 1024)].load(mask=m, other=0.0)
  out.at[ml.ds(i * 8, 8), ml.ds(0, 1024)].store(v * 2, mask=m)


def test_a_grid_of_positions_loads_the_2d_window_with_its_run_time_start():
  """rows[:, None] and cols[None, :] (broadcast runs, a start with no name of its own, i * 8) read the 2-D
  window they cover (an error with that window as its hint before the twenty-ninth session)."""
  x = rand.normal(rand.key(19), (20, 1000), F32)
  np.testing.assert_array_equal(double_grid_of_positions(x, interpret=True), x * 2)
  np.testing.assert_array_equal(double_grid_window(x, interpret=True), x * 2)


# ---------------------------------------------------------------- torch's spellings in a ported kernel
@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def centre_torch_keywords(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...]
  out.at[ml.ds(i * 4, 4), :][...] = v - v.max(dim=1, keepdim=True)


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def relu_torch_methods(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...].float()
  out.at[ml.ds(i * 4, 4), :][...] = v.clamp(min=0.0).sigmoid()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def relu_torch_clamp(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...]
  out.at[ml.ds(i * 4, 4), :][...] = v.clamp(min=0.0).sigmoid()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 4,))
def relu_torch_sigmoid(x, out):
  i = ml.program_id(0)
  v = x.at[ml.ds(i * 4, 4), :][...]
  out.at[ml.ds(i * 4, 4), :][...] = ml.maximum(v, 0.0).sigmoid()


def test_torch_keywords_and_methods_are_hinted_in_the_users_words():
  """v.max(dim=1, keepdim=True) named keepdims= only (dim= stayed wrong when followed); x.float(),
  v.clamp(min=0.0) and v.sigmoid() listed the register methods, none of them the one to write."""
  spec = [S((8, 256), F32)]
  expect(centre_torch_keywords, spec, mg.KernelTypeError, "v.max(dim=1, keepdim=True)",
         "ml.max: got an unexpected keyword argument 'dim'",
         hint="write keepdims= for keepdim= and axis= for dim=: torch's max and min over dim= give a (values, indices)"
              " pair: here ml.max(v, axis=1, keepdims=True) is the values alone (no [0] after it: that would take its"
              " first element) and ml.argmax(v, axis=1, keepdims=True) the indices; ml.max(x, axis=None, keepdims=False,"
              " initial=None, where=None, return_indices=False, return_indices_tie_break_left=True)")
  expect(relu_torch_methods, spec, mg.KernelTypeError, "x.at[ml.ds(i * 4, 4), :][...].float",
         "a register tensor has no attribute 'float'", hint="write x.at[ml.ds(i * 4, 4), :][...].astype(jnp.float32)")
  expect(relu_torch_clamp, spec, mg.KernelTypeError, "v.clamp", "a register tensor has no attribute 'clamp'",
         hint="write ml.maximum(v, 0.0)")
  expect(relu_torch_sigmoid, spec, mg.KernelTypeError, "ml.maximum(v, 0.0).sigmoid",
         "a register tensor has no attribute 'sigmoid'", hint="write ml.sigmoid(ml.maximum(v, 0.0))")
