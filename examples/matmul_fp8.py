"""FP8 and int8 matmuls on Hopper in mgpu_dsl, with scales applied in the epilogue.

    python examples/matmul_fp8.py      # checks against jnp.dot on a GPU; interpreted, smaller, elsewhere

    c = (a @ bt.T) * row_scale[:, None] * col_scale[None, :]

`a` (m, k) and `bt` (n, k) are float8_e4m3fn, float8_e5m2 or int8: the tensor cores read
8-bit operands K-major only, so B is stored (n, k) (as a transposed weight usually is) and
the kernel passes its tiles transposed, `ml.dot(a_s, bt_s.T, acc)`; no data moves. Products
accumulate in float32 (int32 for int8). Scales: one per row of a (per token), one per
column of c (per output channel); a per-tensor scale is a constant vector (`scaled_matmul`
builds them). The structure is the matmul example's: persistent CTAs walking the tiles in
grouped order, a warp-specialised main loop (a producer warpgroup issues the TMA loads
`stages` steps ahead), two compute warpgroups splitting each (bm, bn) tile, the epilogue
stored in column chunks.
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from matmul import check_tiles   # K, N, M remainders the tiles would drop


def _out(a, bt, row_scale, col_scale, *, out_dtype=jnp.bfloat16, bm=128, bn=256, bk=128, cluster_m=1, **meta):
  if a.ndim != 2 or bt.ndim != 2 or a.shape[1] != bt.shape[1]:
    raise ValueError(f"a @ bt.T needs a (m, k) and bt (n, k), got {tuple(a.shape)} and {tuple(bt.shape)}")
  check_tiles("scaled_matmul", a.shape[0], bt.shape[0], a.shape[1], bm, bn, bk)
  if a.shape[0] // bm % cluster_m:
    raise ValueError(f"scaled_matmul: cluster_m={cluster_m} pairs row tiles: m = {a.shape[0]} must be a multiple"
                     f" of cluster_m * bm = {cluster_m * bm}")
  return jax.ShapeDtypeStruct((a.shape[0], bt.shape[0]), out_dtype)


def _grid(a, bt, *args, bm=128, bn=256, persistent=True, cluster_m=1, **meta):
  tiles = (a.shape[0] // bm) * (bt.shape[0] // bn)
  return (min(tiles, mg.num_sms() // cluster_m * cluster_m) if persistent else tiles,)


def _cluster(*args, cluster_m=1, **meta):
  return (cluster_m,)


@ml.inline
def scaled_tile(a, bt, row_scale, col_scale, c, a_s, b_s, c_s, i, j, acc_dtype, stages, specialize, share_b):
  """c's (i, j) tile: the 8-bit main loop, then the scales, stored in column chunks through two
  SMEM buffers used in turn (each chunk's TMA store overlaps the next chunk's conversion). With
  `share_b` (a cluster axis) the CTAs along it compute tiles of the same columns and receive one
  multicast load of each bt tile."""
  (bm, bk), bn, epi = a_s.shape, b_s.shape[0], c_s[0].shape[1]
  acc = ml.zeros((bm, bn), acc_dtype)
  for k in ml.range(a.shape[1] // bk, stages=stages, warp_specialize=specialize):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(bt.at[ml.ds(j * bn, bn), ml.ds(k * bk, bk)], b_s, multicast=share_b)
    acc = ml.dot(a_s, b_s.T, acc)
  rows = row_scale.at[ml.ds(i * bm, bm)][...]
  cols = col_scale.at[ml.ds(j * bn, bn)][...]
  y = (acc.astype(jnp.float32) * rows[:, None] * cols[None, :]).astype(c.dtype)
  for e in ml.static_range(bn // epi):
    c_s[e % len(c_s)][...] = y[:, e * epi:(e + 1) * epi]
    ml.copy(c_s[e % len(c_s)], c.at[ml.ds(i * bm, bm), ml.ds(j * bn + e * epi, epi)])


@mg.mgpu_kernel(out_shape=_out, grid=_grid, block=256, cluster=_cluster)
def matmul_scaled(a, bt, row_scale, col_scale, c, *, acc_dtype: ml.constexpr = jnp.float32,
                  out_dtype: ml.constexpr = jnp.bfloat16, bm: ml.constexpr = 128, bn: ml.constexpr = 256,
                  bk: ml.constexpr = 128, stages: ml.constexpr = 4, persistent: ml.constexpr = True,
                  specialize: ml.constexpr = True, group: ml.constexpr = 8, epi: ml.constexpr = 64,
                  epi_bufs: ml.constexpr = 2, cluster_m: ml.constexpr = 1):
  """c = (a @ bt.T) * row_scale[:, None] * col_scale[None, :], 8-bit a and bt.

  Persistent (one CTA per SM walks the tiles, grouped for L2) and warp-specialised (a
  producer warpgroup loads `stages` steps ahead, across tiles) unless told otherwise. With
  cluster_m=2, pairs of CTAs compute vertically adjacent tiles and share each bt tile (multicast).
  """
  num_m, num_n = a.shape[0] // bm, bt.shape[0] // bn
  a_s, b_s = ml.smem((bm, bk)), ml.smem((bn, bk))
  c_s = tuple(ml.smem((bm, epi)) for _ in ml.static_range(epi_bufs))
  pid, cm, share_b = ml.program_id(0), cluster_m, (0 if cluster_m > 1 else None)
  if persistent:     # the cluster walks its tiles: pid // cm, then every num_programs // cm
    for t in range(pid // cm, num_m // cm * num_n, ml.num_programs(0) // cm):
      i, j = ml.grouped_ids(t, num_m // cm, num_n, group=group)
      scaled_tile(a, bt, row_scale, col_scale, c, a_s, b_s, c_s, i * cm + pid % cm, j, acc_dtype, stages,
                  specialize, share_b)
  else:
    i, j = ml.grouped_ids(pid // cm, num_m // cm, num_n, group=group)
    scaled_tile(a, bt, row_scale, col_scale, c, a_s, b_s, c_s, i * cm + pid % cm, j, acc_dtype, stages,
                specialize, share_b)


def scaled_matmul(a, bt, a_scale=1.0, b_scale=1.0, *, out_dtype=jnp.bfloat16, interpret=None, **tiles):
  """(a @ bt.T) scaled, for 8-bit a (m, k) and bt (n, k).

  `a_scale` is a number (per tensor) or an (m,) vector (per row); `b_scale` a number or an
  (n,) vector (per column of the result). int8 operands accumulate in int32.
  """
  eight = (jnp.int8, jnp.float8_e4m3fn, jnp.float8_e5m2)
  if a.dtype not in eight or bt.dtype != a.dtype:
    raise ValueError(f"scaled_matmul: a and bt must share one 8-bit dtype (int8, float8_e4m3fn, float8_e5m2), got"
                     f" {a.dtype} and {bt.dtype}: for 16-bit operands use examples/matmul.py's matmul")
  m, n = a.shape[0], bt.shape[0]
  for name, s, size, what in (("a_scale", a_scale, m, "row of a"), ("b_scale", b_scale, n, "row of bt")):
    if jnp.ndim(s) > 1 or jnp.size(s) not in (1, size):
      raise ValueError(f"scaled_matmul: {name} must be a number or a ({size},) vector, one per {what} ({size}),"
                       f" got shape {jnp.shape(s)}")
  rows = jnp.broadcast_to(jnp.asarray(a_scale, jnp.float32), (m,))
  cols = jnp.broadcast_to(jnp.asarray(b_scale, jnp.float32), (n,))
  acc = jnp.int32 if a.dtype == jnp.int8 else jnp.float32
  if jnp.dtype(out_dtype).itemsize == 4:
    tiles.setdefault("epi", 32)        # the two float32 epilogue buffers beside 4 stages
  # pairs of CTAs share each bt tile (multicast) where the row tiles pair up: at 8192^3 on the H200 1500 against
  # 1474 TFLOP/s (float32 out) and 1543 against 1528 (bfloat16 out), docs/logs/matmul_fp8q_session28.log
  if m % (2 * tiles.get("bm", 128)) == 0 and tiles.get("persistent", True):
    tiles.setdefault("cluster_m", 2)
  return matmul_scaled(a, bt, rows, cols, acc_dtype=acc, out_dtype=out_dtype, interpret=interpret, **tiles)


def reference(a, bt, a_scale=1.0, b_scale=1.0, out_dtype=jnp.bfloat16):
  acc = jnp.int32 if a.dtype == jnp.int8 else jnp.float32
  y = jnp.dot(a, bt.T, preferred_element_type=acc).astype(jnp.float32)
  return (y * jnp.reshape(a_scale, (-1, 1)) * jnp.reshape(b_scale, (1, -1))).astype(out_dtype)


# Specialisations `python -m mgpu_dsl check examples/matmul_fp8.py` checks without a GPU.
_A8 = jax.ShapeDtypeStruct((1024, 512), jnp.float8_e4m3fn)
_B8 = jax.ShapeDtypeStruct((768, 512), jnp.float8_e4m3fn)
_R, _C = jax.ShapeDtypeStruct((1024,), jnp.float32), jax.ShapeDtypeStruct((768,), jnp.float32)
mg.check_specs(matmul_scaled, _A8, _B8, _R, _C, bn=256)
mg.check_specs(matmul_scaled, _A8.update(dtype=jnp.float8_e5m2), _B8.update(dtype=jnp.float8_e5m2), _R, _C,
               bn=128, out_dtype=jnp.float16)
mg.check_specs(matmul_scaled, _A8.update(dtype=jnp.int8), _B8.update(dtype=jnp.int8), _R, _C,
               acc_dtype=jnp.int32, out_dtype=jnp.float32, epi=32)
mg.check_specs(matmul_scaled, _A8, _B8, _R, _C, persistent=False, specialize=False)
mg.check_specs(matmul_scaled, _A8, _B8, _R, _C, cluster_m=2)


def random_operands(key, m, n, k, dtype):
  ka, kb, ks, kt = jax.random.split(key, 4)
  if dtype == jnp.int8:
    a = jax.random.randint(ka, (m, k), -128, 128, jnp.int32).astype(jnp.int8)
    bt = jax.random.randint(kb, (n, k), -128, 128, jnp.int32).astype(jnp.int8)
  else:
    a = jax.random.normal(ka, (m, k), jnp.float32).astype(dtype)
    bt = jax.random.normal(kb, (n, k), jnp.float32).astype(dtype)
  rows = jax.random.uniform(ks, (m,), jnp.float32, 0.5, 2.0)
  cols = jax.random.uniform(kt, (n,), jnp.float32, 0.5, 2.0)
  return a, bt, rows, cols


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  m, n, k = (1024, 768, 512) if on_gpu else (256, 256, 256)
  for dtype in (jnp.float8_e4m3fn, jnp.float8_e5m2, jnp.int8):
    a, bt, rows, cols = random_operands(jax.random.key(0), m, n, k, dtype)
    for what, sa, sb in (("per tensor", 0.5, 2.0), ("per row and column", rows, cols)):
      got = scaled_matmul(a, bt, sa, sb, interpret=not on_gpu, bn=128 if not on_gpu else 256)
      want = reference(a, bt, sa, sb)
      err = float(jnp.linalg.norm((got - want).astype(jnp.float32)) / jnp.linalg.norm(want.astype(jnp.float32)))
      print(f"{jnp.dtype(dtype).name} {m}x{n}x{k} scaled {what}: relative error {err:.1e}"
            f"{'' if on_gpu else ' (interpret mode)'}")
      assert err < 1e-2
  assert np.isfinite(err)


if __name__ == "__main__":
  main()
