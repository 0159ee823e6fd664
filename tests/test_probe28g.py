"""Probe 28g (row statistics and losses): the hint for a too-narrow column slice that is stored
rewrites the user's own store, and the store it proposes works as written. (Top 20 of rows of 8: a top 4, (8, 4), has
fewer elements than a warpgroup has threads and is read back whole as their vector since probe 45a.)"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 20), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def top4_sliced(x, vals):
  i = ml.program_id(0)
  s = ml.sort(x.at[ml.ds(i * 8, 8)][...], axis=-1, descending=True)
  vals.at[ml.ds(i * 8, 8)][...] = s[:, 0:20]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 20), x.dtype), grid=lambda x: (x.shape[0] // 8,))
def top4_hinted(x, vals):
  i = ml.program_id(0)
  s = ml.sort(x.at[ml.ds(i * 8, 8)][...], axis=-1, descending=True)
  vals.at[ml.ds(i * 8, 8), ml.ds(0, s.shape[1])].store(s, mask=ml.arange(s.shape[1])[None, :] < 20)


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 8, 20), x.dtype), grid=lambda x: (x.shape[0],))
def top4_heads_sliced(x, vals):
  h = ml.program_id(0)
  s = ml.sort(x.at[h][...], axis=-1, descending=True)
  vals.at[h][...] = s[:, :20]


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0], 8, 20), x.dtype), grid=lambda x: (x.shape[0],))
def top4_heads_hinted(x, vals):
  h = ml.program_id(0)
  s = ml.sort(x.at[h][...], axis=-1, descending=True)
  vals.at[h].at[:, ml.ds(0, s.shape[1])].store(s, mask=ml.arange(s.shape[1])[None, :] < 20)


def test_column_slice_hint_rewrites_the_users_store():
  """The hint named `out.at[rows, ...]`, not the ref the slice was stored into."""
  # (the slice was MG204 with the hint followed below; since probe 46a a slice stored whole into a window of its
  # shape is copied in pieces that registers hold: it computes)
  x = np.random.default_rng(0).normal(size=(16, 64)).astype(np.float32)
  # (the slice itself was MG204 with that hint; since probe 46j it is computed padded, as the sort's (8, 20) part)
  np.testing.assert_array_equal(top4_sliced(x, interpret=True), jax.lax.top_k(x, 20)[0])
  np.testing.assert_array_equal(top4_hinted(x, interpret=True), jax.lax.top_k(x, 20)[0])
  np.testing.assert_array_equal(top4_sliced(x, interpret=True), jax.lax.top_k(x, 20)[0])
  jax.export.export(jax.jit(top4_hinted), platforms=["cuda"])(S((16, 64), F32))


def test_column_slice_hint_of_a_view_of_a_3d_array_windows_the_view():
  """A view `vals.at[h]` of a 3-D array: its index cannot take the column window (it would window
  the rows), so the hint windows the view."""
  # (as above: the slice computes since probe 46a)
  x = np.random.default_rng(1).normal(size=(2, 8, 64)).astype(np.float32)
  # (the slice itself was MG204 with that hint; since probe 46j it is computed padded)
  np.testing.assert_array_equal(top4_heads_sliced(x, interpret=True), jax.lax.top_k(x, 20)[0])
  np.testing.assert_array_equal(top4_heads_hinted(x, interpret=True), jax.lax.top_k(x, 20)[0])
  np.testing.assert_array_equal(top4_heads_sliced(x, interpret=True), jax.lax.top_k(x, 20)[0])
  jax.export.export(jax.jit(top4_heads_hinted), platforms=["cuda"])(S((2, 8, 64), F32))
