"""Probe 53a: odd tile shapes that were MG204 though registers hold them, or a padded copy of them. A line of a
tile too short for a register vector (a column `s[:, k]` of a (4, 128) tile, 4 elements) is taken of the tile grown
to 8 rows and kept padded, so the sort-based row statistics of tiles of fewer than 8 rows compile; `ml.repeat` of a
value read padded keeps its padding at the end; a 3-D reduction over axes around a kept one ((2, 32, 2) over (0, 2))
and its statistic's broadcast back go through the tile permuted; var, std and logsumexp over two axes of a tile read
padded reduce the axes as they are. MG204 of a gather's row layout names the gather whose shape breaks the rule
(vLLM's AWQ GEMM at narrow blocks named the (16, 64) gather of A, which meets it)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import S, export, f32, rnd
from test_probe52e import _awq_gemm_case, awq_gemm


# ---------------------------------------------------------------- lines of a tile of fewer than 8 rows (columns)
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def row_median(x, out):
  out[...] = jnp.median(x[...], axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def row_quartile(x, out):
  out[...] = jnp.quantile(x[...], 0.25, axis=1)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def fourth_smallest(x, out):
  out[...] = jnp.sort(x[...], axis=1)[:, 3]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), x.dtype), grid=(1,))
def row_range(x, out):
  s = jnp.sort(x[...], axis=1)
  out[...] = s[:, -1] - s[:, 0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0],), jnp.int32), grid=(1,))
def row_argmin(x, out):
  out[...] = jnp.argsort(x[...], axis=1)[:, 0]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def third_of_columns(x, out):
  out[...] = jnp.sort(x[...], axis=0)[2]


_LINES = [
    (row_median, (4, 48), lambda x: np.median(x, axis=1)),
    (row_median, (4, 128), lambda x: np.median(x, axis=1)),
    (row_quartile, (4, 48), lambda x: np.quantile(x, 0.25, axis=1)),
    (fourth_smallest, (4, 128), lambda x: np.sort(x, axis=1)[:, 3]),
    (row_range, (4, 48), lambda x: np.ptp(x, axis=1)),
    (row_argmin, (4, 128), lambda x: np.argmin(x, axis=1)),
    (third_of_columns, (128, 4), lambda x: np.sort(x, axis=0)[2]),
]


@pytest.mark.parametrize("kernel, shape, ref", _LINES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_line_of_a_tile_too_short_for_a_vector_is_taken_padded(kernel, shape, ref):
  """Each was MG204 'this tensor has shape (4,): a 1-D register vector needs a multiple of 8 elements'."""
  x = rnd(shape, 1)
  np.testing.assert_allclose(f32(kernel(x, interpret=True)), ref(x), rtol=1e-5, atol=1e-5)
  export(kernel, x)


def test_a_bf16_median_of_four_rows():
  x = rnd((4, 128), 2, jnp.bfloat16)
  np.testing.assert_allclose(f32(row_median(x, interpret=True)), np.median(f32(x), axis=1), rtol=1e-2, atol=1e-2)
  export(row_median, x)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, shape, ref", _LINES, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_line_of_a_tile_too_short_for_a_vector_gpu(kernel, shape, ref):
  x = rnd(shape, 3)
  np.testing.assert_allclose(f32(jax.jit(kernel)(x)), ref(x), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- ml.repeat of a vector or tile read padded
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * 3,), x.dtype), grid=(1,))
def repeat_method(x, out):
  out[...] = x[...].repeat(3) * 2.0


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] * 2,), x.dtype), grid=(1,))
def repeat_ml(x, out):
  out[...] = ml.repeat(x[...] + 1.0, 2, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 2 * x.shape[2], x.shape[3]), x.dtype), grid=lambda x: (x.shape[0],))
def upsample_rows(x, out):
  n = ml.program_id(0)
  out[n] = jnp.repeat(x[n, 0], 2, axis=0)


@mg.mgpu_kernel(out_shape=lambda x: S((3 * x.shape[0], x.shape[1]), x.dtype), grid=(1,))
def repeat_rows3(x, out):
  out[...] = ml.repeat(x[...], 3, axis=0)


_REPEATS = [
    (repeat_method, (5,), lambda x: np.repeat(x, 3) * 2),
    (repeat_method, (100,), lambda x: np.repeat(x, 3) * 2),
    (repeat_ml, (12,), lambda x: np.repeat(x + 1, 2)),
    (upsample_rows, (2, 3, 7, 64), lambda x: np.repeat(x[:, 0], 2, axis=1)),
    (repeat_rows3, (5, 96), lambda x: np.repeat(x, 3, axis=0)),
]


@pytest.mark.parametrize("kernel, shape, ref", _REPEATS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_repeat_of_a_value_read_padded_keeps_its_padding_at_the_end(kernel, shape, ref):
  """Each was MG204: the (n, 1) columns ml.repeat joins of an odd vector, or the (7, 64) read of the tile."""
  x = rnd(shape, 4)
  np.testing.assert_allclose(f32(kernel(x, interpret=True)), ref(x), rtol=1e-6, atol=1e-6)
  export(kernel, x)


def test_a_bf16_repeat_of_seven_rows():
  x = rnd((2, 3, 7, 64), 5, jnp.bfloat16)
  np.testing.assert_array_equal(f32(upsample_rows(x, interpret=True)), np.repeat(f32(x)[:, 0], 2, axis=1))
  export(upsample_rows, x)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, shape, ref", _REPEATS, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_repeat_of_a_value_read_padded_gpu(kernel, shape, ref):
  x = rnd(shape, 6)
  np.testing.assert_allclose(f32(jax.jit(kernel)(x)), ref(x), rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- 3-D statistics over axes around a kept one, and back
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def mean_02(x, out):
  out[...] = x[...].mean(axis=(0, 2))


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1],), x.dtype), grid=(1,))
def max_02(x, out):
  out[...] = jnp.max(x[...], axis=(0, 2))


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(1,))
def batch_norm_02(x, out):
  v = x[...].astype(jnp.float32)
  m = jnp.mean(v, axis=(0, 2), keepdims=True)
  var = jnp.mean((v - m) ** 2, axis=(0, 2), keepdims=True)
  out[...] = ((v - m) * jax.lax.rsqrt(var + 1e-5)).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, s: x, grid=(1,))
def channel_scale(x, s, out):
  out[...] = x[...] * s[...][None, :, None] + 1.0


def _bn(x):
  x = f32(x)
  m = x.mean(axis=(0, 2), keepdims=True)
  return (x - m) / np.sqrt(x.var(axis=(0, 2), keepdims=True) + 1e-5)


_AROUND = [
    (mean_02, (2, 32, 2), lambda x: x.mean(axis=(0, 2))),
    (max_02, (2, 16, 4), lambda x: x.max(axis=(0, 2))),
    (batch_norm_02, (2, 32, 2), _bn),
    (batch_norm_02, (2, 16, 4), _bn),
    (batch_norm_02, (2, 16, 2, 2), _bn),      # (a kept (16, 2) statistic: the 4-D tile permuted, then its rows)
]


@pytest.mark.parametrize("kernel, shape, ref", _AROUND, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_statistic_over_axes_around_a_kept_one_and_its_broadcast_back(kernel, shape, ref):
  """Each was MG204: 'partial reductions work on 1-D and 2-D tensors' (either order of the two axes leaves 64
  elements), or the (1, 32, 1) statistic 'broadcasting works into 1-D and 2-D tensors'."""
  x = rnd(shape, 7)
  np.testing.assert_allclose(f32(kernel(x, interpret=True)), ref(x), rtol=1e-4, atol=1e-4)
  export(kernel, x)


def test_a_channel_vector_broadcast_around_its_axis():
  x, s = rnd((2, 32, 2), 8), rnd((32,), 9)
  np.testing.assert_allclose(f32(channel_scale(x, s, interpret=True)), x * s[None, :, None] + 1, rtol=1e-6)
  export(channel_scale, x, s)


@mg.mgpu_kernel(out_shape=lambda x, w: x, grid=(1,))
def short_stretch(x, w, out):
  if len(w.shape) == 2 and w.shape[0] == x.shape[1]:
    out[...] = x[...] * w[...][None, :, :]          # two copies of a (4, 16) tile along a leading axis
  else:
    out[...] = x[...] + w[...][:, None, :]          # along a middle axis of 2


@pytest.mark.parametrize("xs, ws", [((2, 4, 16), (4, 16)), ((2, 16, 4), (16, 4)), ((8, 2, 8), (8, 8))])
def test_a_tile_stretched_along_a_short_leading_or_middle_axis(xs, ws):
  """Each was MG204 'broadcasting w[...] of shape (1, 4, 16) to (2, 4, 16): broadcasting works into 1-D and 2-D
  tensors': a (2, 64) broadcast has too few rows for any layout; (64, 1) stretched to (64, 2) and permuted has not."""
  x, w = rnd(xs, 23), rnd(ws, 24)
  want = x * w[None] if xs[1:] == ws else x + w[:, None, :]
  np.testing.assert_allclose(f32(short_stretch(x, w, interpret=True)), want, rtol=1e-6, atol=1e-6)
  export(short_stretch, x, w)


@pytest.mark.gpu
@pytest.mark.parametrize("xs, ws", [((2, 4, 16), (4, 16)), ((8, 2, 8), (8, 8))])
def test_a_tile_stretched_along_a_short_leading_or_middle_axis_gpu(xs, ws):
  x, w = rnd(xs, 25), rnd(ws, 26)
  want = x * w[None] if xs[1:] == ws else x + w[:, None, :]
  np.testing.assert_allclose(f32(jax.jit(short_stretch)(x, w)), want, rtol=1e-6, atol=1e-6)


def test_a_bf16_batch_norm_of_a_tile_of_two_columns():
  x = rnd((2, 32, 2), 10, jnp.bfloat16)
  np.testing.assert_allclose(f32(batch_norm_02(x, interpret=True)), _bn(x), rtol=3e-2, atol=3e-2)
  export(batch_norm_02, x)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, shape, ref", _AROUND, ids=lambda v: getattr(v, "__name__", str(v)))
def test_a_statistic_over_axes_around_a_kept_one_gpu(kernel, shape, ref):
  x = rnd(shape, 11)
  np.testing.assert_allclose(f32(jax.jit(kernel)(x)), ref(x), rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_a_channel_vector_broadcast_around_its_axis_gpu():
  x, s = rnd((2, 16, 4), 12), rnd((16,), 13)
  np.testing.assert_allclose(f32(jax.jit(channel_scale)(x, s)), x * s[None, :, None] + 1, rtol=1e-6)


# ---------------------------------------------------------------- MG204 of a gather names the gather that breaks the rule


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32), grid=(1,))
def two_gathers(a_ptr, b_ptr, c_ptr):
  offs_m = ml.arange(0, 16)
  offs_k = ml.arange(0, 64)
  offs_n = ml.arange(0, 4)
  acc = ml.zeros((16, 4), jnp.float32)
  for _ in range(0, a_ptr.shape[1] // 64):
    a = ml.load(a_ptr.at[offs_m[:, None], offs_k[None, :]])
    b = ml.load(b_ptr.at[offs_k[:, None], offs_n[None, :]])
    acc += ml.sum(a, axis=1)[:, None] * ml.sum(b, axis=0)[None, :]
    offs_k += 64
  c_ptr[...] = acc


@pytest.mark.parametrize("bn", [16, 32])
def test_awq_gemm_of_narrow_blocks_computes(bn):
  """vLLM's AWQ GEMM at BLOCK_M=16, BLOCK_K=64: the (64, BN // 8) gather of B's words shares the carried offsets_k
  with the (16, 64) gather of A. It was MG204 naming the B gather (this probe); since probe 56a one use of the
  carried vector reads a copy through SMEM and it computes."""
  args, ref = _awq_gemm_case(5, 2)
  out = awq_gemm(*args, BM=16, BN=bn, BK=64, SPLIT_K=1, group_size=128, interpret=True)
  np.testing.assert_allclose(np.asarray(out, np.float32), ref, rtol=3e-2, atol=3e-2)


def test_a_narrow_gather_beside_a_wide_one_computes():          # (MG204 naming the (64, 4) gather before probe 56a)
  a, b = np.random.default_rng(0).standard_normal((16, 128)), np.random.default_rng(1).standard_normal((128, 4))
  a, b = a.astype(np.float32), b.astype(np.float32)
  want = sum(a[:, k:k + 64].sum(1)[:, None] * b[k:k + 64].sum(0)[None, :] for k in (0, 64))
  np.testing.assert_allclose(two_gathers(a, b, interpret=True), want, rtol=1e-4, atol=1e-3)


# ---------------------------------------------------------------- var, std, logsumexp over two axes of a 3-D tile read padded
@mg.mgpu_kernel(out_shape=lambda x, *, axes, kd: S(tuple(1 if i in axes else n for i, n in enumerate(x.shape)) if kd else
                tuple(n for i, n in enumerate(x.shape) if i not in axes), jnp.float32), grid=(1,))
def two_axis_stat(x, out, *, fn: ml.constexpr, axes: ml.constexpr, kd: ml.constexpr):
  v = x[...].astype(jnp.float32)
  if fn == "var":
    out[...] = jnp.var(v, axis=axes, keepdims=kd)
  elif fn == "std":
    out[...] = jnp.std(v, axis=axes, keepdims=kd)
  else:
    out[...] = jax.nn.logsumexp(v, axis=axes, keepdims=kd)


def _lse(x, axis, keepdims):
  m = x.max(axis=axis, keepdims=True)
  r = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
  return r if keepdims else r.squeeze(axis)


_TWO_AXES = [
    ("var", (2, 3, 40), (0, 1), False, lambda x: x.var(axis=(0, 1))),
    ("std", (3, 5, 40), (1, 2), True, lambda x: x.std(axis=(1, 2), keepdims=True)),
    ("lse", (2, 3, 40), (0, 1), False, lambda x: _lse(x, (0, 1), False)),
    ("lse", (2, 7, 48), (1, 2), True, lambda x: _lse(x, (1, 2), True)),
]


@pytest.mark.parametrize("fn, shape, axes, kd, ref", _TWO_AXES)
def test_a_statistic_over_two_axes_of_a_tile_read_padded(fn, shape, axes, kd, ref):
  """Each was MG204 at the read: var and std reshaped the padded tile to 2-D (padding inside its rows), logsumexp's
  vector lost its padding where it was made one again."""
  x = rnd(shape, 14)
  np.testing.assert_allclose(f32(two_axis_stat(x, fn=fn, axes=axes, kd=kd, interpret=True)), ref(x), rtol=1e-4,
                             atol=1e-5)
  export(two_axis_stat, x, fn=fn, axes=axes, kd=kd)


def test_a_bf16_variance_over_two_axes_read_padded():
  x = rnd((2, 3, 40), 15, jnp.bfloat16)
  np.testing.assert_allclose(f32(two_axis_stat(x, fn="var", axes=(0, 1), kd=False, interpret=True)),
                             f32(x).var(axis=(0, 1)), rtol=1e-4, atol=1e-5)


@pytest.mark.gpu
@pytest.mark.parametrize("fn, shape, axes, kd, ref", _TWO_AXES)
def test_a_statistic_over_two_axes_of_a_tile_read_padded_gpu(fn, shape, axes, kd, ref):
  x = rnd(shape, 16)
  out = jax.jit(lambda v: two_axis_stat(v, fn=fn, axes=axes, kd=kd))(x)
  np.testing.assert_allclose(f32(out), ref(x), rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------- a statistic of a few kept elements without keepdims
@mg.mgpu_kernel(out_shape=lambda x, *, axes: S(tuple(n for i, n in enumerate(x.shape) if i not in axes), jnp.float32),
                grid=(1,))
def few_kept(x, out, *, fn: ml.constexpr, axes: ml.constexpr):
  v = x[...]
  if fn == "mean":
    out[...] = v.mean(axis=axes)
  elif fn == "max":
    out[...] = jnp.max(v, axis=axes) * 2.0 + 1.0
  else:
    out[...] = jnp.var(v, axis=axes)


_FEW = [
    ("mean", (2, 32, 2), (1, 2), lambda x: x.mean(axis=(1, 2))),
    ("max", (4, 2, 32), (0, 2), lambda x: x.max(axis=(0, 2)) * 2 + 1),
    ("var", (2, 16, 4), (1, 2), lambda x: x.var(axis=(1, 2))),
    ("mean", (2, 2, 8, 4), (0, 2, 3), lambda x: x.mean(axis=(0, 2, 3))),
]


@pytest.mark.parametrize("fn, shape, axes, ref", _FEW)
def test_a_statistic_of_a_few_kept_elements_without_keepdims(fn, shape, axes, ref):
  """Each was MG204 'keeps an axis of size 2: 2 elements, too few for a register vector' (with keepdims=True the
  same statistic computed): each element the full reduction of its part, as the hint wrote it by hand."""
  x = rnd(shape, 17)
  np.testing.assert_allclose(f32(few_kept(x, fn=fn, axes=axes, interpret=True)), ref(x), rtol=1e-5, atol=1e-5)
  export(few_kept, x, fn=fn, axes=axes)


@pytest.mark.gpu
@pytest.mark.parametrize("fn, shape, axes, ref", _FEW)
def test_a_statistic_of_a_few_kept_elements_without_keepdims_gpu(fn, shape, axes, ref):
  x = rnd(shape, 18)
  out = jax.jit(lambda v: few_kept(v, fn=fn, axes=axes))(x)
  np.testing.assert_allclose(f32(out), ref(x), rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------- vectors broadcast into a tile no layout holds
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), a.dtype), grid=(1,))
def rope_cache(pos, inv_freq, out):
  out[...] = jnp.cos(jnp.outer(pos[...], inv_freq[...]))


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0],), a.dtype), grid=(1,))
def nearest(a, b, out):
  out[...] = jnp.min(jnp.abs(a[...][:, None] - b[...][None, :]), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.int32), grid=(1,))
def below(a, b, out):
  out[...] = jnp.where(a[...][:, None] < b[...][None, :], 1, 0)


_OUTER = [
    (rope_cache, 5, 24, lambda a, b: np.cos(np.outer(a, b))),
    (rope_cache, 8, 24, lambda a, b: np.cos(np.outer(a, b))),
    (nearest, 100, 24, lambda a, b: np.abs(a[:, None] - b[None, :]).min(axis=1)),
    (below, 6, 40, lambda a, b: (a[:, None] < b[None, :]).astype(np.int32)),
]


@pytest.mark.parametrize("kernel, m, n, ref", _OUTER, ids=lambda v: getattr(v, "__name__", str(v)))
def test_vectors_broadcast_into_a_tile_no_layout_holds_compute_padded(kernel, m, n, ref):
  """Each was MG204 'this tile of shape (5, 24) is reduced or broadcast along its rows or columns': the (m, n)
  result, 24 or 40 columns by rows no narrow layout takes, is computed padded to (m4, n32) and stored under a mask."""
  a, b = rnd((m,), 19), rnd((n,), 20)
  np.testing.assert_allclose(f32(kernel(a, b, interpret=True)), ref(a, b), rtol=1e-5, atol=1e-5)
  export(kernel, a, b)


@pytest.mark.gpu
@pytest.mark.parametrize("kernel, m, n, ref", _OUTER, ids=lambda v: getattr(v, "__name__", str(v)))
def test_vectors_broadcast_into_a_tile_no_layout_holds_gpu(kernel, m, n, ref):
  a, b = rnd((m,), 21), rnd((n,), 22)
  np.testing.assert_allclose(f32(jax.jit(kernel)(a, b)), ref(a, b), rtol=1e-5, atol=1e-5)
