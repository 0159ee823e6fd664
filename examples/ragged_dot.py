"""Grouped GEMM with run-time group sizes (MoE): `jax.lax.ragged_dot` in mgpu_dsl.

    python examples/ragged_dot.py      # checks against jax.lax.ragged_dot on a GPU; interpret mode elsewhere

out[r] = lhs[r] @ rhs[g] for the rows r of group g; groups are consecutive runs of rows whose
sizes `group_sizes` (g,) are known only at run time. The grid has one program per (row tile,
column tile) pair of the layout below, which needs at most cdiv(m, bm) + g row tiles:
each group boundary inside a tile makes that tile twice, once per group, and rows past the
groups' total (sum(group_sizes) < m: tokens a router dropped) are zeros, as in
jax.lax.ragged_dot, written by one more run of tiles. A program finds its
group by scanning the group sizes (scalars read from memory, in an unrolled loop), runs the
tensor-core main loop on that group's rhs, and stores only its group's rows: a whole tile
inside one group by a TMA store, a tile cut by a group boundary by a masked register store
(and every tile when m is not a multiple of 8: TMA stores whole 8-row tiles of the output).
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from matmul import check_tiles   # K, N, M remainders the tiles would drop


def _out(lhs, rhs, group_sizes, *, bn=256, bk=64, **meta):
  if lhs.ndim != 2 or rhs.ndim != 3 or lhs.shape[1] != rhs.shape[1] or group_sizes.shape != (rhs.shape[0],):
    raise ValueError(f"ragged_dot needs lhs (m, k), rhs (groups, k, n) and group_sizes (groups,), got"
                     f" {tuple(lhs.shape)}, {tuple(rhs.shape)} and {tuple(group_sizes.shape)}")
  check_tiles("ragged_dot", 0, rhs.shape[2], lhs.shape[1], 1, bn, bk)   # (rows: any m, tails masked)
  return jax.ShapeDtypeStruct((lhs.shape[0], rhs.shape[2]), lhs.dtype)


def _grid(lhs, rhs, group_sizes, *, bm=128, bn=256, **meta):
  return ((ml.cdiv(lhs.shape[0], bm) + rhs.shape[0]) * (rhs.shape[2] // bn),)


@ml.inline
def find_group(group_sizes, t, bm, m):
  """(group, its first row, its end, the tile's first row) of row tile t in the layout where
  each group covers the row tiles its rows touch."""
  end = 0
  group = 0
  first = 0
  last = 0
  tile = -1
  for g in ml.static_range(group_sizes.shape[0]):   # unrolled: the size reads overlap
    start = end
    end = start + group_sizes[g]
    t0 = start // bm + g                        # this group's tiles in the layout
    t1 = (end - 1) // bm + 1 + g                # (an empty group gets none, or one empty one)
    if (t0 <= t) & (t < t1):
      group = g
      first = start
      last = end
      tile = t - g
  # Rows past the groups' total (tokens an MoE router dropped) are zeros, as in
  # jax.lax.ragged_dot: one more run of tiles, after the groups', writes them (group -1).
  g = group_sizes.shape[0]
  t0 = end // bm + g
  t1 = (m - 1) // bm + 1 + g
  if (t0 <= t) & (t < t1) & (end < m):
    group = -1
    first = end
    last = m
    tile = t - g
  return group, first, last, tile


@mg.mgpu_kernel(out_shape=_out, grid=_grid, block=256)
def ragged_dot(lhs, rhs, group_sizes, out, *, bm: ml.constexpr = 128, bn: ml.constexpr = 256,
               bk: ml.constexpr = 64, stages: ml.constexpr = 4):
  """out = jax.lax.ragged_dot(lhs (m, k), rhs (g, k, n), group_sizes (g,))."""
  num_t = ml.cdiv(lhs.shape[0], bm) + rhs.shape[0]
  t, j = ml.grouped_ids(ml.program_id(0), num_t, rhs.shape[2] // bn, group=8)
  group, first, last, tile = find_group(group_sizes, t, bm, lhs.shape[0])
  row0 = tile * bm
  lo = ml.maximum(first, row0)
  hi = ml.minimum(ml.minimum(last, row0 + bm), lhs.shape[0])    # (groups summing past m end at m)
  if (hi > lo) & (group < 0):                   # rows past the groups' total: zeros
    rows = row0 + ml.arange(bm)[:, None]
    out.at[ml.ds(row0, bm), ml.ds(j * bn, bn)].store(ml.zeros((bm, bn), out.dtype),
                                                      mask=(rows >= lo) & (rows < hi))
  if (hi > lo) & (group >= 0):                  # some tiles of the layout hold no rows
    a_s = ml.smem((bm, bk))
    b_s = ml.smem((bk, bn))
    acc = ml.zeros((bm, bn), jnp.float32)
    for k in ml.range(lhs.shape[1] // bk, stages=stages):
      ml.copy(lhs.at[ml.ds(row0, bm), ml.ds(k * bk, bk)], a_s)     # rows past m read zeros
      ml.copy(rhs.at[group, ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    y = acc.astype(out.dtype)
    window = out.at[ml.ds(row0, bm), ml.ds(j * bn, bn)]
    # The whole tile is this group's (TMA stores whole (8, 64) tiles of out: m % 8 == 0).
    full = (hi - lo == bm) if out.shape[0] % 8 == 0 else False
    if full:
      c_s = ml.smem((bm, bn))
      c_s[...] = y
      ml.copy(c_s, window)
    else:                                       # a group boundary or the array's end cuts it
      rows = row0 + ml.arange(bm)[:, None]
      window.store(y, mask=(rows >= lo) & (rows < hi))


def reference(lhs, rhs, group_sizes):
  return jax.lax.ragged_dot(lhs, rhs, group_sizes, preferred_element_type=jnp.float32).astype(lhs.dtype)


def random_group_sizes(key, m, g):
  """g sizes summing to m, from sorted random boundaries (some may be empty)."""
  cuts = jnp.sort(jax.random.randint(key, (g - 1,), 0, m, jnp.int32))
  bounds = jnp.concatenate([jnp.zeros((1,), jnp.int32), cuts, jnp.full((1,), m, jnp.int32)])
  return jnp.diff(bounds).astype(jnp.int32)


# Specialisations `python -m mgpu_dsl check examples/ragged_dot.py` checks without a GPU.
mg.check_specs(ragged_dot, jax.ShapeDtypeStruct((1000, 512), jnp.float16),
               jax.ShapeDtypeStruct((4, 512, 512), jnp.float16), jax.ShapeDtypeStruct((4,), jnp.int32))


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  m, k, n, g = (4096, 1024, 2048, 8) if on_gpu else (600, 128, 512, 4)
  ka, kb, kg = jax.random.split(jax.random.key(0), 3)
  lhs = jax.random.normal(ka, (m, k), jnp.float32).astype(jnp.float16)
  rhs = jax.random.normal(kb, (g, k, n), jnp.float32).astype(jnp.float16)
  sizes = random_group_sizes(kg, m, g)
  want = np.asarray(reference(lhs, rhs, sizes), np.float32)
  if on_gpu:
    got = jax.jit(ragged_dot)(lhs, rhs, sizes)
  else:
    print(ragged_dot.mlir(lhs, rhs, sizes).count("\n"), "lines of Mosaic GPU MLIR; running in interpret mode")
    got = ragged_dot(lhs, rhs, sizes, bn=128, interpret=True)
  err = float(np.linalg.norm(np.asarray(got, np.float32) - want) / np.linalg.norm(want))
  print(f"ragged_dot m={m} k={k} n={n} groups={np.asarray(sizes).tolist()}: relative error {err:.2e}")
  assert err < 1e-2


if __name__ == "__main__":
  main()
