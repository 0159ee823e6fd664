"""examples/ragged_dot.py against jax.lax.ragged_dot: group layouts with empty groups, boundaries
on and off tile edges, and a row count that is not a multiple of the tile, in interpret mode;
CUDA export; the GPU (-m gpu)."""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "examples"))
import ragged_dot as ex  # noqa: E402
import rand

S = jax.ShapeDtypeStruct
SIZES = {
    "uneven": [70, 0, 130, 100],          # an empty group, boundaries inside tiles
    "on_tile_edges": [128, 0, 128, 44],   # boundaries on tile edges, 300 rows in all
    "one_group": [0, 300, 0, 0],
    "empty_last": [100, 100, 100, 0],
}


def operands(sizes, k=128, n=256, dtype=jnp.float16, seed=0):
  m, g = sum(sizes), len(sizes)
  ka, kb = rand.split(rand.key(seed))
  lhs = rand.normal(ka, (m, k), dtype)
  rhs = rand.normal(kb, (g, k, n), dtype)
  return lhs, rhs, jnp.array(sizes, jnp.int32)


def rel_err(got, want):
  got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
  return float(np.linalg.norm(got - want) / np.linalg.norm(want))


@pytest.mark.parametrize("name", list(SIZES))
def test_interpret_matches_lax_ragged_dot(name):
  lhs, rhs, sizes = operands(SIZES[name])
  got = ex.ragged_dot(lhs, rhs, sizes, bn=128, interpret=True)
  assert rel_err(got, ex.reference(lhs, rhs, sizes)) < 1e-3


def test_rows_of_other_groups_are_not_written():
  lhs, rhs, sizes = operands([70, 0, 130, 100])
  got = np.asarray(ex.ragged_dot(lhs, rhs, sizes, bn=128, interpret=True), np.float32)
  assert np.isfinite(got).all()          # every row written by exactly one program (no poison)


def test_exports_for_cuda():
  specs = (S((16384, 2048), jnp.float16), S((16, 2048, 16384), jnp.float16), S((16,), jnp.int32))
  txt = jax.export.export(jax.jit(ex.ragged_dot), platforms=["cuda"])(*specs).mlir_module()
  assert "@mosaic_gpu" in txt


def test_boundary_tiles_take_masked_stores_and_whole_tiles_tma_stores():
  mlir = ex.ragged_dot.mlir(*[S(a.shape, a.dtype) for a in operands([70, 0, 130, 104])])
  assert "vector.store" in mlir and "cp.async.bulk.tensor.global.shared.cta" in mlir
  assert "wgmma" in mlir


def test_row_counts_off_the_8_row_tiles_store_every_tile_masked():
  mlir = ex.ragged_dot.mlir(*[S(a.shape, a.dtype) for a in operands(SIZES["uneven"])])   # 300 rows
  assert "memref.store" in mlir and "cp.async.bulk.tensor.global.shared.cta" not in mlir


@pytest.mark.gpu
@pytest.mark.parametrize("m,k,n,g", [(4096, 1024, 2048, 8), (1000, 512, 1024, 5), (16384, 2048, 4096, 16)])
def test_gpu_matches_lax_ragged_dot(m, k, n, g):
  ka, kb = rand.split(rand.key(m + g), 2)
  lhs = rand.normal(ka, (m, k), jnp.float16)
  rhs = rand.normal(kb, (g, k, n), jnp.float16)
  sizes = ex.random_group_sizes(jax.random.key(m + g), m, g)      # (the example's own draw: a jax.random key)
  assert rel_err(jax.jit(ex.ragged_dot)(lhs, rhs, sizes), ex.reference(lhs, rhs, sizes)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("name", list(SIZES))
def test_gpu_matches_interpret_on_group_edge_cases(name):
  lhs, rhs, sizes = operands(SIZES[name])
  got = ex.ragged_dot(lhs, rhs, sizes, bn=128)
  want = ex.ragged_dot(lhs, rhs, sizes, bn=128, interpret=True)
  assert rel_err(got, want) < 1e-3


@pytest.mark.parametrize("sizes", [[50, 50, 50, 40], [0, 0, 0, 0], [128, 0, 0, 0], [100, 100, 100, 50]],
                         ids=["short_by_10", "all_empty", "one_tile", "past_m"])
def test_groups_not_summing_to_m_match_lax_ragged_dot(sizes):
  """Rows past the groups' total are zeros, as in jax.lax.ragged_dot (an MoE router that dropped
  tokens): they were left unwritten, garbage on the GPU (probe 15). Groups summing past m end at m."""
  lhs, rhs, _ = operands([200])
  rhs = jnp.concatenate([rhs] * 4)
  gs = jnp.array(sizes, jnp.int32)
  got = np.asarray(ex.ragged_dot(lhs, rhs, gs, bn=128, interpret=True), np.float32)
  want = np.asarray(jax.lax.ragged_dot(lhs, rhs, gs, preferred_element_type=jnp.float32), np.float32)
  total = min(sum(sizes), 200)
  np.testing.assert_array_equal(got[total:], 0.0)
  np.testing.assert_allclose(got[:total], want[:total], rtol=2e-2, atol=2e-2)
