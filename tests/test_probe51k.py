"""Probe 51k: leftovers of probe 51f (attention written by users): an MLA decode's 576-wide latent rows.

DeepSeek's MLA decode reads rows of 512 latent plus 64 RoPE columns, and users copy them whole into one buffer and
write `p @ kv_s.at[:, 0:512]`: a TMA box of more than 256 elements (MG401) and a dot of n = 512 (MG501). Their hints
said `copy each piece of at most 256 into a buffer of its own` and `split wider tiles into several dots of at most 256
columns`, without saying how. They now write the split in the kernel's words (frontend/tma.py `_own_buffers`,
frontend/ops/mma.py `_wide_n_hint`): the buffers with their shapes, each copy's window of the array, one dot and one
accumulator a piece; and the kernels written as the hints say compute and build for CUDA. Checked and already right:
Pallas's masked store of a padded head_dim (`o_ref.at[qs, ml.ds(0, 128)].store(o, mask=head_mask)` into an output of
head_dim 80) computes; the store that forgets the mask (`o_ref[qs, :] = o`) was MG202 with a generic hint, which now
writes the masked store through a window as wide as the tile (frontend/ops/transfers.py `_padded_hint`). Left: decode
scores held (keys, heads) = (64, 4) and reduced over axis 0 stay MG204."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F16, BF16, F32 = jnp.float16, jnp.bfloat16, jnp.float32


def _rand(shape, dtype, seed):
  return jnp.asarray(np.random.default_rng(seed).standard_normal(shape), dtype)


def _f64(x):
  return np.asarray(x, np.float64)


def _exports(kernel, *args, **constexprs):
  f = lambda *a: kernel(*a, **constexprs)      # noqa: E731
  jax.export.export(jax.jit(f), platforms=["cuda"])(*[S(a.shape, a.dtype) for a in args])


def _mla_ref(q, kv, scale):
  """MLA decode of one batch: q (heads, 576), kv (keys, 576); values are kv's first 512 columns."""
  q, kv = _f64(q), _f64(kv)
  s = q @ kv.T * scale
  p = np.exp(s - s.max(1, keepdims=True))
  return p @ kv[:, :512] / p.sum(1, keepdims=True)


@mg.mgpu_kernel(out_shape=lambda q, kv, **kw: S((q.shape[0], q.shape[1], 512), q.dtype),
                grid=lambda q, kv, **kw: (q.shape[0],))
def mla_whole_rows(q, kv, o, *, scale: ml.constexpr):
  b = ml.program_id(0)
  q_s, kv_s = ml.smem((q.shape[1], 576)), ml.smem((64, 576))
  ml.copy(q.at[b], q_s)
  m = ml.full((q.shape[1],), -jnp.inf, jnp.float32)
  l = ml.zeros((q.shape[1],), jnp.float32)
  acc = ml.zeros((q.shape[1], 512), jnp.float32)
  for j in ml.range(kv.shape[1] // 64, stages=1):
    ml.copy(kv.at[b, ml.ds(j * 64, 64)], kv_s)
    s = ml.dot(q_s, kv_s.T) * scale
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    a = ml.exp(m - m_new)
    l = l * a + ml.sum(p, axis=1)
    acc = ml.dot(p.astype(kv.dtype), kv_s.at[:, 0:512], acc * a[:, None])
    m = m_new
  o[b] = (acc / l[:, None]).astype(o.dtype)


@mg.mgpu_kernel(out_shape=lambda q, kv, **kw: S((q.shape[0], q.shape[1], 512), q.dtype),
                grid=lambda q, kv, **kw: (q.shape[0],))
def mla_as_hinted(q, kv, o, *, scale: ml.constexpr):
  """The same decode written as the hints say: 256 + 256 + 64 column buffers, two accumulators."""
  b = ml.program_id(0)
  h = q.shape[1]
  q_s0, q_s1, q_s2 = ml.smem((h, 256)), ml.smem((h, 256)), ml.smem((h, 64))
  kv_s0, kv_s1, kv_s2 = ml.smem((64, 256)), ml.smem((64, 256)), ml.smem((64, 64))
  ml.copy(q.at[b, :, ml.ds(0, 256)], q_s0)
  ml.copy(q.at[b, :, ml.ds(256, 256)], q_s1)
  ml.copy(q.at[b, :, ml.ds(512, 64)], q_s2)
  m = ml.full((h,), -jnp.inf, jnp.float32)
  l = ml.zeros((h,), jnp.float32)
  acc0, acc1 = ml.zeros((h, 256), jnp.float32), ml.zeros((h, 256), jnp.float32)
  for j in ml.range(kv.shape[1] // 64, stages=1):
    ml.copy(kv.at[b, ml.ds(j * 64, 64), ml.ds(0, 256)], kv_s0)
    ml.copy(kv.at[b, ml.ds(j * 64, 64), ml.ds(256, 256)], kv_s1)
    ml.copy(kv.at[b, ml.ds(j * 64, 64), ml.ds(512, 64)], kv_s2)
    s = ml.dot(q_s0, kv_s0.T)
    s = ml.dot(q_s1, kv_s1.T, s)
    s = ml.dot(q_s2, kv_s2.T, s) * scale
    m_new = ml.maximum(m, ml.max(s, axis=1))
    p = ml.exp(s - m_new[:, None])
    a = ml.exp(m - m_new)
    l = l * a + ml.sum(p, axis=1)
    acc0 = ml.dot(p.astype(kv.dtype), kv_s0, acc0 * a[:, None])
    acc1 = ml.dot(p.astype(kv.dtype), kv_s1, acc1 * a[:, None])
    m = m_new
  o.at[b, :, ml.ds(0, 256)][...] = (acc0 / l[:, None]).astype(o.dtype)
  o.at[b, :, ml.ds(256, 256)][...] = (acc1 / l[:, None]).astype(o.dtype)


MLA = [S((2, 16, 576), BF16), S((2, 128, 576), BF16)]


def test_an_mla_decodes_wide_rows_hint_the_split_in_the_kernels_words():
  """The 576-wide rows' copies were MG401, hinted as buffers a piece (mla_as_hinted); since probe 56c they are one
  box in tiles (the buffers ml.dot reads are tiled 64 columns wide): the kernel as written computes, and so does
  the hinted one."""
  q, kv = _rand((2, 16, 576), BF16, 1), _rand((2, 128, 576), BF16, 2)
  scale = 1 / math.sqrt(576)
  got = mla_whole_rows(q, kv, scale=scale, interpret=True)
  for b in range(2):
    np.testing.assert_allclose(_f64(got[b]), _mla_ref(q[b], kv[b], scale), atol=4e-2, rtol=4e-2)
  _exports(mla_whole_rows, q, kv, scale=scale)
  got = mla_as_hinted(q, kv, scale=scale, interpret=True)
  for b in range(2):
    np.testing.assert_allclose(_f64(got[b]), _mla_ref(q[b], kv[b], scale), atol=4e-2, rtol=4e-2)
  _exports(mla_as_hinted, q, kv, scale=scale)


# ---------------------------------------------------------------- the same class elsewhere: wide products, wide stores
@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32), grid=lambda a, bt: (a.shape[0] // 64,))
def wide_bt(a, bt, c):
  """A projection to 384 features with the weights stored (n, k), as nn.Linear's."""
  i = ml.program_id(0)
  a_s, bt_s = ml.smem((64, 64)), ml.smem((384, 64))
  acc = ml.zeros((64, 384), F32)
  for k in ml.range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[:, ml.ds(k * 64, 64)], bt_s)
    acc = ml.dot(a_s, bt_s.T, acc)
  c.at[ml.ds(i * 64, 64)][...] = acc


@mg.mgpu_kernel(out_shape=lambda a, bt: S((a.shape[0], bt.shape[0]), F32), grid=lambda a, bt: (a.shape[0] // 64,))
def wide_bt_as_hinted(a, bt, c):
  i = ml.program_id(0)
  a_s, bt_s0, bt_s1 = ml.smem((64, 64)), ml.smem((192, 64)), ml.smem((192, 64))
  acc0, acc1 = ml.zeros((64, 192), F32), ml.zeros((64, 192), F32)
  for k in ml.range(a.shape[1] // 64):
    ml.copy(a.at[ml.ds(i * 64, 64), ml.ds(k * 64, 64)], a_s)
    ml.copy(bt.at[ml.ds(0, 192), ml.ds(k * 64, 64)], bt_s0)
    ml.copy(bt.at[ml.ds(192, 192), ml.ds(k * 64, 64)], bt_s1)
    acc0 = ml.dot(a_s, bt_s0.T, acc0)
    acc1 = ml.dot(a_s, bt_s1.T, acc1)
  c.at[ml.ds(i * 64, 64), ml.ds(0, 192)][...] = acc0
  c.at[ml.ds(i * 64, 64), ml.ds(192, 192)][...] = acc1


@mg.mgpu_kernel(out_shape=lambda bt: S((bt.shape[1] // 64, bt.shape[0]), F32), grid=(1,))
def row_sums_by_pieces(bt, o):
  """MG401's hint followed in a k loop: 384 rows copied in two windows of 192, counted by kk."""
  bt_s = ml.smem((384, 64), F16)
  for k in range(bt.shape[1] // 64):
    for kk in ml.static_range(2):
      ml.copy(bt.at[ml.ds(kk * 192, 192), ml.ds(k * 64, 64)], bt_s.at[ml.ds(kk * 192, 192)])
    o.at[k][...] = ml.sum(bt_s[...].astype(F32), axis=1)


@mg.mgpu_kernel(out_shape=lambda bt: S((bt.shape[1] // 64, bt.shape[0]), F32), grid=(1,))
def row_sums_whole(bt, o):
  """The same with one copy of the 384 rows: two TMAs of 256 and 128 rows since probe 52i."""
  bt_s = ml.smem((384, 64), F16)
  for k in range(bt.shape[1] // 64):
    ml.copy(bt.at[:, ml.ds(k * 64, 64)], bt_s)
    o.at[k][...] = ml.sum(bt_s[...].astype(F32), axis=1)


def test_a_product_wider_than_256_computes_as_written_and_as_the_hint_said():
  """n = 384 of a b stored (n, k): MG501 (with a hint splitting it into two pieces of 192) until probe 53d, which
  writes the split itself (two dots over rows 0..191 and 192..383 of bt_s, the products joined)."""
  a, bt = _rand((128, 128), F16, 3), _rand((384, 128), F16, 4)
  rows = row_sums_by_pieces(bt, interpret=True)
  np.testing.assert_allclose(_f64(rows), _f64(bt).reshape(384, 2, 64).sum(2).T.reshape(2, 384), rtol=1e-2, atol=5e-2)
  _exports(row_sums_by_pieces, bt)
  np.testing.assert_allclose(_f64(row_sums_whole(bt, interpret=True)), _f64(rows), rtol=1e-6, atol=1e-6)
  _exports(row_sums_whole, bt)
  for kernel in (wide_bt_as_hinted, wide_bt):
    got = kernel(a, bt, interpret=True)
    np.testing.assert_allclose(_f64(got), _f64(a) @ _f64(bt).T, atol=5e-2, rtol=1e-2)
    _exports(kernel, a, bt)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[0] // 64,))
def wide_store(x, o):
  i = ml.program_id(0)
  o_s = ml.smem((64, 320), x.dtype)
  o_s[...] = x.at[ml.ds(i * 64, 64)][...] * 2
  ml.copy(o_s, o.at[ml.ds(i * 64, 64)])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[0] // 64,))
def wide_store_as_hinted(x, o):
  i = ml.program_id(0)
  o_s0, o_s1 = ml.smem((64, 256), x.dtype), ml.smem((64, 64), x.dtype)
  o_s0[...] = x.at[ml.ds(i * 64, 64), ml.ds(0, 256)][...] * 2
  o_s1[...] = x.at[ml.ds(i * 64, 64), ml.ds(256, 64)][...] * 2
  ml.copy(o_s0, o.at[ml.ds(i * 64, 64), ml.ds(0, 256)])
  ml.copy(o_s1, o.at[ml.ds(i * 64, 64), ml.ds(256, 64)])


def test_a_wide_row_stored_by_tma_hints_a_store_a_piece():
  """The store's side: each piece copied out of its own buffer into its columns of the array (256 and 64), as
  the MG401 hint said; since probe 56c the (64, 320) store is one box of (64, 2, 160) and computes as written."""
  x = _rand((128, 320), BF16, 5)
  np.testing.assert_array_equal(_f64(wide_store(x, interpret=True)), _f64(x) * 2)
  _exports(wide_store, x)
  np.testing.assert_array_equal(_f64(wide_store_as_hinted(x, interpret=True)), _f64(x) * 2)
  _exports(wide_store_as_hinted, x)


@pytest.mark.gpu
def test_gpu_probe51k_hinted_kernels_match_numpy():
  q, kv = _rand((2, 16, 576), BF16, 1), _rand((2, 128, 576), BF16, 2)
  scale = 1 / math.sqrt(576)
  got = mla_as_hinted(q, kv, scale=scale)
  want = mla_as_hinted(q, kv, scale=scale, interpret=True)
  np.testing.assert_allclose(_f64(got), _f64(want), atol=2e-2, rtol=2e-2)
  for b in range(2):
    np.testing.assert_allclose(_f64(got[b]), _mla_ref(q[b], kv[b], scale), atol=4e-2, rtol=4e-2)
  a, bt = _rand((128, 128), F16, 3), _rand((384, 128), F16, 4)
  np.testing.assert_allclose(_f64(wide_bt_as_hinted(a, bt)), _f64(a) @ _f64(bt).T, atol=5e-2, rtol=1e-2)
  x = _rand((128, 320), BF16, 5)
  np.testing.assert_array_equal(_f64(wide_store_as_hinted(x)), _f64(x) * 2)
  x = _rand((128, 40), F32, 6)
  np.testing.assert_array_equal(np.asarray(_padded_store("hinted")(x)), np.asarray(x) * 2)


# ---------------------------------------------------------------- a tile padded past its output, stored unmasked
def _padded_store(form):
  """Pallas's head_dim padded to a power of two (BLOCK_D = 64 over 40 columns), read under its head mask; the
  store forgets the mask (Pallas's block is padded, the output here is not)."""
  @mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[0] // 64,))
  def padded(x_ref, o_ref):
    i = ml.program_id(0)
    qs = ml.ds(i * 64, 64)
    head_mask = (jnp.arange(64) < x_ref.shape[-1])[None, :]
    o = x_ref.at[qs, ml.ds(0, 64)].load(mask=head_mask, other=0.0) * 2
    if form == "setitem":
      o_ref[qs, :] = o
    elif form == "store":
      ml.store(o_ref.at[qs], o)
    else:
      o_ref.at[qs, ml.ds(0, 64)].store(o, mask=jnp.arange(64)[None, :] < 40)      # the hint followed
  return padded


def test_a_padded_tile_stored_into_a_narrower_output_hints_the_masked_window():
  """It was MG202 with `store a value of the window's shape (slice the ref with .at[...] to match)`; the hint now
  writes the masked store into a window as wide as the tile (which never writes past the array)."""
  for form, at in (("setitem", "o_ref[qs, :] = o"), ("store", "ml.store(o_ref.at[qs], o)")):
    name = at.split(" = ")[0] if form == "setitem" else "o_ref.at[qs]"
    expect(_padded_store(form), [S((128, 40), F32)], mg.ShapeMismatchError, at,
           f"cannot store a tensor of shape (64, 64) into {name} of shape (64, 40)",
           hint=f"o is 64 wide along axis 1 where {name} is 40 (a padded tile, a head_dim padded to 64): store it"
                f" through a window 64 wide under a mask of the first 40, o_ref.at[qs, ml.ds(0, 64)].store(o,"
                f" mask=ml.arange(64)[None, :] < 40) (a masked store never writes the elements past the array)")
  x = _rand((128, 40), F32, 6)
  hinted = _padded_store("hinted")
  np.testing.assert_array_equal(np.asarray(hinted(x, interpret=True)), np.asarray(x) * 2)
  _exports(hinted, x)


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, x.dtype), grid=lambda x: (x.shape[1] // 64, x.shape[0], x.shape[2]))
def padded_heads(x_all, o_all):
  """The 4-D Pallas port, (batch, seq, heads, head_dim) with views of one head: the window's start in the hint is
  the user's to write (the view's text does not show the last axis whole)."""
  i, b, h = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  x_ref, o_ref = x_all.at[b, :, h, :], o_all.at[b, :, h, :]
  qs = ml.ds(i * 64, 64)
  o = x_ref.at[qs, ml.ds(0, 128)].load(mask=(jnp.arange(128) < x_ref.shape[-1])[None, :], other=0.0)
  o_ref.at[qs][...] = o.astype(o_ref.dtype)


def test_a_padded_tile_of_a_heads_view_hints_the_masked_window_along_its_axis():
  expect(padded_heads, [S((1, 64, 2, 96), BF16)], mg.ShapeMismatchError, "o_ref.at[qs][...] = o.astype(o_ref.dtype)",
         "cannot store a tensor of shape (64, 128) into o_ref.at[qs] of shape (64, 96)",
         hint="o.astype(o_ref.dtype) is 128 wide along axis 1 where o_ref.at[qs] is 96 (a padded tile, a head_dim"
              " padded to 128): store it through a window 128 wide there, ml.ds(start, 128) along axis 1, under a"
              " mask of the first 96, .store(o.astype(o_ref.dtype), mask=ml.arange(128)[None, :] < 96) (a masked"
              " store never writes the elements past the array)")
