"""Probe 56g: diffusion and vision-transformer kernels (GroupNorm + SiLU in NHWC and NCHW, AdaLN modulation and
DiT's gated residual, timestep embeddings, GEGLU / SwiGLU halves, qk-norm then rotary, 2-D rotary of patches,
patchify / unpatchify, nearest and bilinear upsampling, Swin window attention with a relative-position bias table,
cross-attention over 77 keys, classifier-free guidance; bf16 storage, f32 statistics), each run in interpret mode
against NumPy and exported for CUDA (those that computed before: test_probe56g2.py). Found and fixed: (1) gathers at
a Swin bias table's column, `tab[idx, h]` (a run-time head `h` or a static int beside a tensor of indices) from a
register table were MG003, and with a (49, 49) tile of indices (a 7x7 window) MG204 from a register table or GMEM:
run-time integer scalars now index a register gather, and the padded trace gathers at (and scatters to) padded
index tiles beside ints and scalars; (2) a ref read indexed with None (`g[b, None, :]`) was MG203 counting None as
an index: a plain read inserts the axis, a view or a None between gather indices is a located MG003; (3)
jax.image.resize 'linear' of an (H, W, C) image took its neighbours and edge masks along the wrong axis (silently
wrong where H == W); (4) a transpose of a padded tile (a window's heads) ended the padded trace; (5) a padded axis
split in two or merged (a 7x7 window's 49 tokens) ended it too."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from probe_util import export, f32, rnd

S = jax.ShapeDtypeStruct
F32 = jnp.float32


def _rel_index(w):
  """Swin's relative-position index of a w x w window: (w*w, w*w) rows of a ((2w - 1)**2, heads) table."""
  c = np.stack(np.meshgrid(np.arange(w), np.arange(w), indexing="ij")).reshape(2, -1)
  rel = (c[:, :, None] - c[:, None, :]).transpose(1, 2, 0) + (w - 1)
  return (rel[..., 0] * (2 * w - 1) + rel[..., 1]).astype(np.int32)


def _attn(q, k, v, bias=None):
  s = f32(q) @ f32(k).T / np.sqrt(q.shape[-1])
  if bias is not None:
    s = s + bias
  p = np.exp(s - s.max(-1, keepdims=True))
  return (p / p.sum(-1, keepdims=True)) @ f32(v)


# ---------------------------------------------------------------- (1) a bias table's column gathered
@mg.mgpu_kernel(out_shape=lambda q, k, v, tab, idx: q, grid=lambda q, k, v, tab, idx: (q.shape[0], q.shape[1]))
def window_attention(q, k, v, tab, idx, o):          # Swin: a window's tokens, one head a program
  w = ml.program_id(0)
  h = ml.program_id(1)
  qq, kk, vv = q[w, h].astype(F32), k[w, h].astype(F32), v[w, h].astype(F32)
  s = qq @ kk.T * (q.shape[-1] ** -0.5)
  s = s + tab[...][idx[...], h]                      # the head's column of the bias table, at every pair
  o[w, h] = (jax.nn.softmax(s, axis=-1) @ vv).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda tab, idx: S((tab.shape[1],) + idx.shape, tab.dtype),
                grid=lambda tab, idx: (tab.shape[1],))
def bias_of_head(tab, idx, o):                       # the bias gathered from GMEM
  h = ml.program_id(0)
  o[h] = tab[idx[...], h]


@mg.mgpu_kernel(out_shape=lambda tab, idx: S((tab.shape[1],) + idx.shape, tab.dtype),
                grid=lambda tab, idx: (tab.shape[1],))
def bias_of_head_registers(tab, idx, o):
  h = ml.program_id(0)
  o[h] = tab[...][idx[...], h]


@mg.mgpu_kernel(out_shape=lambda tab, idx: S(idx.shape, tab.dtype))
def bias_of_first_head(tab, idx, o):
  o[...] = tab[...][idx[...], 1]


@mg.mgpu_kernel(out_shape=lambda tab, idx: S((tab.shape[0],) + idx.shape, tab.dtype),
                grid=lambda tab, idx: (tab.shape[0],))
def bias_of_head_row(tab, idx, o):                   # the table stored (heads, entries)
  h = ml.program_id(0)
  o[h] = tab[...][h, idx[...]]


@mg.mgpu_kernel(out_shape=lambda v, ids: S((v.shape[1],) + ids.shape, v.dtype), grid=lambda v, ids: (v.shape[1],))
def column_at_program(v, ids, o):                    # a table registers hold whole: a run-time column
  h = ml.program_id(0)
  t = v[...] * 2.0
  o[h] = t[ids[...], h] + t[ids[...], -1]


@pytest.mark.parametrize("w", [7, 8])
def test_bias_table_gathers_match_numpy(w):
  idx, tab = _rel_index(w), rnd(((2 * w - 1) ** 2, 3), w)
  want = np.moveaxis(tab[idx], -1, 0)
  np.testing.assert_array_equal(bias_of_head(tab, idx, interpret=True), want)
  np.testing.assert_array_equal(bias_of_head_registers(tab, idx, interpret=True), want)
  np.testing.assert_array_equal(bias_of_first_head(tab, idx, interpret=True), tab[idx, 1])
  tt = np.ascontiguousarray(tab.T)
  np.testing.assert_array_equal(bias_of_head_row(tt, idx, interpret=True), tt[:, idx])


def test_a_run_time_column_of_a_register_table():
  v = rnd((64, 8), 1)
  ids = np.random.default_rng(2).integers(-64, 80, (8, 128)).astype(np.int32)   # (clamped, negative from the end)
  got = column_at_program(v, ids, interpret=True)
  t = jnp.asarray(v * 2)
  want = np.stack([np.asarray(t[ids, h] + t[ids, -1]) for h in range(8)])
  np.testing.assert_array_equal(got, want)
  export(column_at_program, v, ids)


@pytest.mark.parametrize("w,dt,tol", [(7, np.float32, 2e-3), (8, jnp.bfloat16, 3e-2)])
def test_window_attention_with_relative_position_bias(w, dt, tol):
  n, heads = w * w, 2
  idx, tab = _rel_index(w), rnd(((2 * w - 1) ** 2, heads), 4)
  q, k, v = (rnd((3, heads, n, 32), s, dt) for s in (5, 6, 7))
  want = np.stack([np.stack([_attn(q[a, h], k[a, h], v[a, h], tab[idx, h]) for h in range(heads)])
                   for a in range(3)])
  np.testing.assert_allclose(f32(window_attention(q, k, v, tab, idx, interpret=True)), want, rtol=tol, atol=tol)


def test_bias_gathers_build_for_cuda():
  idx, tab = _rel_index(7), rnd((169, 2), 4)
  export(bias_of_head, tab, idx)
  export(bias_of_head_registers, tab, idx)
  export(bias_of_first_head, tab, idx)
  export(window_attention, *(rnd((2, 2, 49, 32), s) for s in (5, 6, 7)), tab, idx)


@pytest.mark.gpu
def test_bias_gathers_on_gpu():
  idx, tab = _rel_index(7), rnd((169, 2), 4)
  np.testing.assert_array_equal(bias_of_head(tab, idx), np.moveaxis(tab[idx], -1, 0))
  np.testing.assert_array_equal(bias_of_head_registers(tab, idx), np.moveaxis(tab[idx], -1, 0))
  v = rnd((64, 8), 1)
  ids = np.random.default_rng(2).integers(-64, 80, (8, 128)).astype(np.int32)
  t = jnp.asarray(v * 2)
  want = np.stack([np.asarray(t[ids, h] + t[ids, -1]) for h in range(8)])
  np.testing.assert_array_equal(column_at_program(v, ids), want)
  q, k, vv = (rnd((2, 2, 49, 32), s) for s in (5, 6, 7))
  want = np.stack([np.stack([_attn(q[a, h], k[a, h], vv[a, h], tab[idx, h]) for h in range(2)]) for a in range(2)])
  np.testing.assert_allclose(window_attention(q, k, vv, tab, idx), want, rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- (2) None in a plain read of a ref
@mg.mgpu_kernel(out_shape=lambda x, y, g: x, grid=lambda x, y, g: (x.shape[0],))
def gated_residual(x, y, g, o):                      # DiT's adaLN-Zero: x + gate[b] * attn(x), per batch item
  b = ml.program_id(0)
  o[b] = (x[b].astype(F32) + g[b, None, :].astype(F32) * y[b].astype(F32)).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda x, sh, sc: x)
def modulate(x, sh, sc, o):                          # the whole batch: shift and scale broadcast over tokens
  o[...] = x[...] * (1 + sc[:, None, :]) + sh[..., None, :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape + (1, t.shape[1]), t.dtype))
def rows_with_axis(t, ids, o):
  o[...] = t[ids[...], None, :]


@mg.mgpu_kernel(out_shape=lambda t, ids: S((1,) + ids.shape, t.dtype))
def column_with_axis(t, ids, o):
  o[...] = t[None, ids[...], 5]


@mg.mgpu_kernel(out_shape=lambda x, g: x, grid=lambda x, g: (x.shape[0],))
def view_with_none(x, g, o):
  b = ml.program_id(0)
  o[b] = x[b] * ml.load(g.at[b, None, :])


@mg.mgpu_kernel(out_shape=lambda t, ids: S(ids.shape + (1,), t.dtype))
def gather_none_apart(t, ids, o):
  o[...] = t[ids[...], None, 5]


def test_none_in_plain_reads_matches_numpy():
  x, y, g = rnd((2, 64, 128), 1, jnp.bfloat16), rnd((2, 64, 128), 2, jnp.bfloat16), rnd((2, 128), 3, jnp.bfloat16)
  np.testing.assert_allclose(f32(gated_residual(x, y, g, interpret=True)), f32(x) + f32(g)[:, None] * f32(y),
                             rtol=2e-2, atol=2e-2)
  x, sh, sc = rnd((2, 32, 128), 4), rnd((2, 128), 5), rnd((2, 128), 6)
  np.testing.assert_allclose(modulate(x, sh, sc, interpret=True), x * (1 + sc[:, None]) + sh[:, None], rtol=1e-6)
  t, ids = rnd((4, 128), 7), np.random.default_rng(8).integers(0, 4, (16, 8)).astype(np.int32)
  np.testing.assert_array_equal(rows_with_axis(t, ids[0], interpret=True), t[ids[0], None, :])
  np.testing.assert_array_equal(column_with_axis(t, ids, interpret=True), t[None, ids, 5])
  export(gated_residual, rnd((2, 64, 128), 1, jnp.bfloat16), rnd((2, 64, 128), 2, jnp.bfloat16), g)
  export(modulate, x, sh, sc)
  export(rows_with_axis, t, ids[0])
  export(column_with_axis, t, ids)


def test_none_in_a_view_or_between_gather_indices_is_a_located_error():
  from locate import expect
  expect(view_with_none, [S((2, 64, 128), F32), S((2, 128), F32)], mg.KernelTypeError, "g.at[b, None, :]",
         "cannot index a ref with None (dimension 1): a view of g has the ref's own axes",
         hint="index g without None and give the value the size-1 axis: a plain read takes None as jnp's (g[i, None,"
              " :] is g[i][None, :]); a value written drops it (v[0])")
  expect(gather_none_apart, [S((4, 128), F32), S((16, 8), jnp.int32)], mg.KernelTypeError, "t[ids[...], None, 5]",
         "cannot index t with None (dimension 1) between its tensors of indices and ints",
         hint="gather without the None and insert the size-1 axis in the result (r[:, None] or ml.expand_dims(r,"
              " axis)): a None between them moves their axes first in NumPy")


@pytest.mark.gpu
def test_none_in_plain_reads_on_gpu():
  x, sh, sc = rnd((2, 32, 128), 4), rnd((2, 128), 5), rnd((2, 128), 6)
  # (the GPU contracts x * s + t into one FMA, rounded once: an absolute tolerance of the operands' size)
  np.testing.assert_allclose(modulate(x, sh, sc), x * (1 + sc[:, None]) + sh[:, None], rtol=1e-6, atol=1e-6)
  t, ids = rnd((4, 128), 7), np.random.default_rng(8).integers(0, 4, (16, 8)).astype(np.int32)
  np.testing.assert_array_equal(rows_with_axis(t, ids[0]), t[ids[0], None, :])
  np.testing.assert_array_equal(column_with_axis(t, ids), t[None, ids, 5])


# ---------------------------------------------------------------- (3) bilinear resize of an image of channels
def _resize_kernel(shape, method):
  @mg.mgpu_kernel(out_shape=lambda x: S(shape, x.dtype))
  def upsample(x, o):                                # a VAE decoder's / UNet's upsampling of an (H, W, C) tile
    o[...] = jax.image.resize(x[...], shape, method)
  return upsample


_RESIZES = [((8, 8, 32), (16, 16, 32)), ((8, 16, 32), (16, 32, 32)), ((4, 8, 16), (4, 8, 32)),
            ((2, 4, 8, 32), (2, 8, 16, 32)), ((8, 4, 64), (8, 8, 64)), ((16, 64), (32, 128))]


@pytest.mark.parametrize("src,dst", _RESIZES)
def test_bilinear_resize_of_every_axis_matches_jax(src, dst):
  """An (H, W, C) image scaled up by 2 along H was blended along W (the neighbours and edge masks were axis 0's of a
  2-D tile; with H == W a silently wrong image), and along a third axis the rows were shifted along axis 1."""
  k = _resize_kernel(dst, "bilinear")
  x = rnd(src, 5)
  np.testing.assert_allclose(k(x, interpret=True), jax.image.resize(x, dst, "bilinear"), rtol=1e-6, atol=1e-6)
  xb = rnd(src, 6, jnp.bfloat16)
  np.testing.assert_allclose(f32(k(xb, interpret=True)), f32(jax.image.resize(xb, dst, "bilinear")),
                             rtol=1e-2, atol=1e-2)
  export(k, x)


@pytest.mark.gpu
def test_bilinear_resize_on_gpu():
  for src, dst in _RESIZES[:4]:
    x = rnd(src, 5)
    np.testing.assert_allclose(_resize_kernel(dst, "bilinear")(x), jax.image.resize(x, dst, "bilinear"),
                               rtol=1e-6, atol=1e-6)


# ---------------------------------------------------------------- (4) permutes of padded tiles
@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[1], x.shape[0], x.shape[2]), x.dtype))
def swap_leading(x, o):
  o[...] = x[...].transpose(1, 0, 2)


@mg.mgpu_kernel(out_shape=lambda q, k, v: q, grid=lambda q, k, v: (q.shape[0],))
def window_heads(q, k, v, o, *, nh: ml.constexpr = 3):
  """Swin's attention inside a window of 49 tokens, the heads split by a reshape and a transpose, as timm writes it."""
  w = ml.program_id(0)
  n, c = q.shape[1], q.shape[2]
  d = c // nh
  qq = q[w].astype(F32).reshape(n, nh, d).transpose(1, 0, 2)
  kk = k[w].astype(F32).reshape(n, nh, d).transpose(1, 0, 2)
  vv = v[w].astype(F32).reshape(n, nh, d).transpose(1, 0, 2)
  s = jnp.einsum("hqd,hkd->hqk", qq, kk) * d ** -0.5
  out = jnp.einsum("hqk,hkd->hqd", jax.nn.softmax(s, axis=-1), vv)
  o[w] = out.transpose(1, 0, 2).reshape(n, c).astype(o.dtype)


def _heads_ref(q, k, v, nh=3):
  b, n, c = q.shape
  sp = lambda a: f32(a).reshape(b, n, nh, c // nh).transpose(0, 2, 1, 3)
  s = sp(q) @ sp(k).transpose(0, 1, 3, 2) * (c // nh) ** -0.5
  p = np.exp(s - s.max(-1, keepdims=True))
  return ((p / p.sum(-1, keepdims=True)) @ sp(v)).transpose(0, 2, 1, 3).reshape(b, n, c)


@pytest.mark.parametrize("shape", [(49, 3, 32), (3, 49, 32), (7, 7, 96), (5, 12, 40)])
def test_a_permute_of_an_odd_read_matches_numpy(shape):
  """A 3-D read no register tensor holds, transposed (MG204 at the read: the padded trace ended at the permute)."""
  x = rnd(shape, 1)
  np.testing.assert_array_equal(swap_leading(x, interpret=True), x.transpose(1, 0, 2))
  export(swap_leading, x)


def test_window_attention_with_heads_split_by_a_transpose():
  q, k, v = rnd((2, 49, 96), 2), rnd((2, 49, 96), 3), rnd((2, 49, 96), 4)
  np.testing.assert_allclose(window_heads(q, k, v, interpret=True), _heads_ref(q, k, v), rtol=2e-3, atol=2e-3)
  export(window_heads, q, k, v)


@pytest.mark.gpu
def test_permutes_of_padded_tiles_on_gpu():
  x = rnd((7, 7, 96), 1)
  np.testing.assert_array_equal(swap_leading(x), x.transpose(1, 0, 2))
  q, k, v = rnd((2, 49, 96), 2), rnd((2, 49, 96), 3), rnd((2, 49, 96), 4)
  np.testing.assert_allclose(window_heads(q, k, v), _heads_ref(q, k, v), rtol=2e-3, atol=2e-3)


# ---------------------------------------------------------------- (5) a window's tokens split and merged
@mg.mgpu_kernel(out_shape=lambda x, *, ws: S(((x.shape[0] // ws) * (x.shape[1] // ws), ws * ws, x.shape[2]), x.dtype),
                grid=lambda x, *, ws: (x.shape[0] // ws,))
def window_partition(x, o, *, ws: ml.constexpr):     # timm's window_partition, a row of windows a program
  i = ml.program_id(0)
  _, w, c = x.shape
  v = x[ml.ds(i * ws, ws)]
  v = v.reshape(ws, w // ws, ws, c).transpose(1, 0, 2, 3).reshape(w // ws, ws * ws, c)
  o[ml.ds(i * (w // ws), w // ws)] = v


@mg.mgpu_kernel(out_shape=lambda t, *, ws, h: S((h, h, t.shape[2]), t.dtype), grid=lambda t, *, ws, h: (h // ws, h // ws))
def window_reverse(t, o, *, ws: ml.constexpr, h: ml.constexpr):   # a window a program
  r = ml.program_id(0)
  c = ml.program_id(1)
  o[ml.ds(r * ws, ws), ml.ds(c * ws, ws), :] = t[r * (h // ws) + c].reshape(ws, ws, t.shape[2])


def _windows(x, ws):
  h, w, c = x.shape
  return x.reshape(h // ws, ws, w // ws, ws, c).transpose(0, 2, 1, 3, 4).reshape(-1, ws * ws, c)


@pytest.mark.parametrize("shape,ws", [((14, 14, 32), 7), ((28, 28, 96), 7), ((16, 16, 32), 8)])
def test_window_partition_and_reverse_match_numpy(shape, ws):
  """A window of 49 tokens (7x7) split from or merged into its rows: the padded trace ended at the reshape (MG204)."""
  x = rnd(shape, 1)
  np.testing.assert_array_equal(window_partition(x, ws=ws, interpret=True), _windows(x, ws))
  np.testing.assert_array_equal(window_reverse(_windows(x, ws), ws=ws, h=shape[0], interpret=True), x)
  export(window_partition, x, ws=ws)
  export(window_reverse, _windows(x, ws), ws=ws, h=shape[0])


@pytest.mark.gpu
def test_window_partition_and_reverse_on_gpu():
  x = rnd((28, 28, 96), 1)
  np.testing.assert_array_equal(window_partition(x, ws=7), _windows(x, 7))
  np.testing.assert_array_equal(window_reverse(_windows(x, 7), ws=7, h=28), x)


# ---------------------------------------------------------------- (1b) scatters at a padded tile of indices
@mg.mgpu_kernel(out_shape=lambda g, idx, z: z, grid=lambda g, idx, z: (g.shape[0],), input_output_aliases={2: 0})
def bias_table_grad(g, idx, z, dt):                  # the bias table's gradient: every pair's into its entry
  h = ml.program_id(0)
  ml.atomic_add(dt.at[idx[...], h], g[h])


@mg.mgpu_kernel(out_shape=lambda v, perm: S((perm.size, v.shape[0]), v.dtype), grid=lambda v, perm: (v.shape[0],))
def scatter_columns(v, perm, o):
  h = ml.program_id(0)
  o[perm[...], h] = v[h]


def test_scatters_at_a_padded_tile_of_indices_match_numpy():
  idx, g = _rel_index(7), rnd((2, 49, 49), 1)
  want = np.zeros((169, 2), np.float32)
  for h in range(2):
    np.add.at(want[:, h], idx, g[h])
  got = bias_table_grad(g, idx, np.zeros((169, 2), np.float32), interpret=True)
  np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
  perm = np.random.default_rng(3).permutation(49).astype(np.int32).reshape(7, 7)
  v = rnd((3, 7, 7), 4)
  want = np.zeros((49, 3), np.float32)
  for h in range(3):
    want[perm, h] = v[h]
  np.testing.assert_array_equal(scatter_columns(v, perm, interpret=True), want)
  export(bias_table_grad, g, idx, np.zeros((169, 2), np.float32))
  export(scatter_columns, v, perm)


@pytest.mark.gpu
def test_scatters_at_a_padded_tile_of_indices_on_gpu():
  idx, g = _rel_index(7), rnd((2, 49, 49), 1)
  want = np.zeros((169, 2), np.float32)
  for h in range(2):
    np.add.at(want[:, h], idx, g[h])
  np.testing.assert_allclose(bias_table_grad(g, idx, np.zeros((169, 2), np.float32)), want, rtol=1e-5, atol=1e-5)
