"""A Hopper matmul in mgpu_dsl: TMA loads pipelined under tensor-core dots.

    python examples/matmul.py          # checks against jnp.dot on a GPU; shows the IR elsewhere

`matmul` (by default) is persistent and warp-specialised: one CTA per SM walks the
output tiles (in groups of 8 tile-rows, so neighbours share A and B in L2); in each,
`ml.range(..., stages=s, warp_specialize=True)` has the compiler add a producer
warpgroup that issues the TMA loads of A and B tiles `s` steps ahead, across tiles,
while the two compute warpgroups (block=256) run the dots and the epilogue; the
epilogue's TMA store overlaps the next tile's loads. `persistent=False` gives one CTA
per tile, `specialize=False` the single-producer software pipeline. `mainloop`, an
`@ml.inline` helper shared by the kernels, holds the pipelined loop.
"""
import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml


def check_tiles(name, m, n, k, bm, bn, bk):
  """A ValueError at the call for shapes the tiles do not divide: a K remainder would be dropped
  (TMA reads zeros only past the array's end), an N remainder never written."""
  # (a smaller tile seldom helps: bm must stay a multiple of 64 rows a warpgroup, bn of 16 bytes)
  for dim, size, tile, fix in (("k", k, bk, "pad a's columns and b's rows with zeros (the product is unchanged)"),
                               ("n", n, bn, "pad b's columns with zeros (slice the result's columns after)"),
                               ("m", m, bm, "pad a's rows with zeros (slice the result's rows after)")):
    if size % tile:
      raise ValueError(f"{name}: {dim} = {size} is not a multiple of b{dim} = {tile}: {fix} to a multiple of"
                       f" b{dim}, {-(-size // tile) * tile}")


def _out(a, b, *args, bm=128, bn=256, bk=64, **meta):
  if a.ndim != 2 or b.ndim != 2 or a.shape[1] != b.shape[0]:    # a TMA load past b's end would read zeros
    raise ValueError(f"a @ b needs a (m, k) and b (k, n), got {tuple(a.shape)} and {tuple(b.shape)}")
  check_tiles("matmul", a.shape[0], b.shape[1], a.shape[1], bm, bn, bk)
  return jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)


def _grid(a, b, *args, bm=128, bn=256, persistent=False, cluster_m=1, **meta):
  tiles = (a.shape[0] // bm) * (b.shape[1] // bn)
  return (min(tiles, mg.num_sms() // cluster_m * cluster_m) if persistent else tiles,)


def _persistent_grid(a, b, *args, persistent=True, **meta):
  return _grid(a, b, *args, persistent=persistent, **meta)


def _cluster(*args, cluster_m=1, **meta):
  return (cluster_m,)


@ml.inline
def mainloop(a, b, a_s, b_s, i, j, stages, specialize, share_b=None):
  """The (i, j) tile of a @ b in float32: TMA loads pipelined under the tensor cores. With
  `share_b` (a cluster axis), the CTAs along it compute tiles of the same columns j and
  receive one multicast load of each B tile."""
  (bm, bk), bn = a_s.shape, b_s.shape[1]
  acc = ml.zeros((bm, bn), jnp.float32)
  for k in ml.range(a.shape[1] // bk, stages=stages, warp_specialize=specialize):
    ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
    ml.copy(b.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s, multicast=share_b)
    acc = ml.dot(a_s, b_s, acc)
  return acc


@ml.inline
def store_tile(acc, c, bufs, i, j):
  """acc (converted to c's dtype) into c's (i, j) tile, in column chunks through two SMEM
  buffers used in turn: each chunk's TMA store overlaps the next chunk's conversion, and
  the buffers take a fraction of a whole tile's SMEM."""
  (bm, epi), bn = bufs[0].shape, acc.shape[1]
  out = acc.astype(c.dtype)
  for e in ml.static_range(bn // epi):
    bufs[e % len(bufs)][...] = out[:, e * epi:(e + 1) * epi]
    ml.copy(bufs[e % len(bufs)], c.at[ml.ds(i * bm, bm), ml.ds(j * bn + e * epi, epi)])


@mg.mgpu_kernel(out_shape=_out, grid=_persistent_grid, block=256, cluster=_cluster)
def matmul(a, b, c, *, bm: ml.constexpr = 128, bn: ml.constexpr = 256, bk: ml.constexpr = 64,
           stages: ml.constexpr = 4, persistent: ml.constexpr = True, specialize: ml.constexpr = True,
           group: ml.constexpr = 8, cluster_m: ml.constexpr = 1, epi: ml.constexpr = 64,
           epi_bufs: ml.constexpr = 2):
  """c = a @ b. The epilogue stores `epi` columns at a time. With cluster_m=2, pairs of CTAs
  compute vertically adjacent tiles and share each B tile (one multicast load)."""
  num_m, num_n = a.shape[0] // bm, b.shape[1] // bn
  s = stages
  cm, share_b = cluster_m, (0 if cluster_m > 1 else None)
  pid = ml.program_id(0)
  a_s, b_s = ml.smem((bm, bk)), ml.smem((bk, bn))
  c_s = tuple(ml.smem((bm, epi)) for _ in ml.static_range(epi_bufs))
  if persistent:     # the cluster walks its tiles: pid // cm, then every num_programs // cm
    for t in range(pid // cm, num_m // cm * num_n, ml.num_programs(0) // cm):
      i, j = ml.grouped_ids(t, num_m // cm, num_n, group=group)
      i = i * cm + pid % cm
      acc = mainloop(a, b, a_s, b_s, i, j, s, specialize, share_b)
      store_tile(acc, c, c_s, i, j)
  else:
    i, j = ml.grouped_ids(pid // cm, num_m // cm, num_n, group=group)
    i = i * cm + pid % cm
    acc = mainloop(a, b, a_s, b_s, i, j, s, specialize, share_b)
    store_tile(acc, c, c_s, i, j)


def _out_residual(a, b, r, **meta):
  out = _out(a, b, **meta)
  if tuple(r.shape) != tuple(out.shape):        # a TMA load past r's end would read zeros
    raise ValueError(f"matmul_residual_relu: r must have the result's shape {tuple(out.shape)}, got {tuple(r.shape)}")
  return out


@mg.mgpu_kernel(out_shape=_out_residual, grid=_grid, block=256)
def matmul_residual_relu(a, b, r, c, *, bm: ml.constexpr = 128, bn: ml.constexpr = 256,
                         bk: ml.constexpr = 64, stages: ml.constexpr = 3):
  """c = relu(a @ b + r): the epilogue is fused into the matmul."""
  i, j = ml.grouped_ids(ml.program_id(0), a.shape[0] // bm, b.shape[1] // bn, group=8)
  a_s, b_s, c_s = ml.smem((bm, bk)), ml.smem((bk, bn)), ml.smem((bm, bn))
  ml.copy(r.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)], c_s)   # lands while the main loop runs
  acc = mainloop(a, b, a_s, b_s, i, j, stages, False)
  y = acc + c_s[...].astype(jnp.float32)
  c_s[...] = ml.maximum(y, 0.0).astype(c.dtype)
  ml.copy(c_s, c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)])


@mg.mgpu_kernel(out_shape=_out, grid=_grid, block=256)
def matmul_bias_gelu(a, b, bias, c, *, bm: ml.constexpr = 128, bn: ml.constexpr = 256,
                     bk: ml.constexpr = 64, stages: ml.constexpr = 4):
  """c = gelu(a @ b + bias), bias a vector of c's columns (tanh approximation of gelu)."""
  i, j = ml.grouped_ids(ml.program_id(0), a.shape[0] // bm, b.shape[1] // bn, group=8)
  a_s, b_s = ml.smem((bm, bk)), ml.smem((bk, bn))
  x = mainloop(a, b, a_s, b_s, i, j, stages, False) + bias.at[ml.ds(j * bn, bn)][...].astype(jnp.float32)
  y = 0.5 * x * (1.0 + ml.tanh(0.7978845608 * (x + 0.044715 * x * x * x)))
  c_s = ml.smem((bm, bn))
  c_s[...] = y.astype(c.dtype)
  ml.copy(c_s, c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)])


# Specialisations `python -m mgpu_dsl check examples/matmul.py` checks without a GPU.
_A, _B = jax.ShapeDtypeStruct((1024, 512), jnp.bfloat16), jax.ShapeDtypeStruct((512, 768), jnp.bfloat16)
mg.check_specs(matmul, _A, _B, bn=256)
mg.check_specs(matmul, _A.update(dtype=jnp.float16), _B.update(dtype=jnp.float16), bn=128, stages=5)
mg.check_specs(matmul, _A, _B, persistent=False, specialize=False, stages=4)
mg.check_specs(matmul, _A, _B, cluster_m=2)
mg.check_specs(matmul_residual_relu, _A, _B, jax.ShapeDtypeStruct((1024, 768), jnp.bfloat16))
mg.check_specs(matmul_bias_gelu, _A, _B, jax.ShapeDtypeStruct((768,), jnp.bfloat16))


# The entry point for users: the first call for each (shapes, dtypes) on a GPU times these
# configurations (kernel time) and keeps the fastest, on disk too; without a GPU, and in
# interpret mode, the first one is used. A configuration a shape cannot take (cluster_m=2
# needs rows in 256-row pairs of tiles) is skipped.
matmul_tuned = mg.autotune(configs=[dict(bn=256, stages=4), dict(bn=256, stages=3),
                                    dict(bn=128, stages=6), dict(bn=256, stages=4, group=16),
                                    dict(bn=256, stages=4, cluster_m=2)])(matmul)


def reference(a, b):
  return jnp.dot(a, b, preferred_element_type=jnp.float32).astype(a.dtype)


def main():
  on_gpu = any(d.platform == "gpu" for d in jax.devices())
  for dtype in (jnp.float16, jnp.bfloat16):
    ka, kb, kr = jax.random.split(jax.random.key(0), 3)
    a = jax.random.normal(ka, (1024, 512), jnp.float32).astype(dtype)
    b = jax.random.normal(kb, (512, 768), jnp.float32).astype(dtype)
    r = jax.random.normal(kr, (1024, 768), jnp.float32).astype(dtype)
    if not on_gpu:     # build for the GPU, then compute a smaller problem in interpret mode
      spec = lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype)
      matmul.check(spec(a), spec(b))
      matmul_residual_relu.check(spec(a), spec(b), spec(r))
      matmul_bias_gelu.check(spec(a), spec(b), spec(r[0]))
      a, b, r = a[:256, :256], b[:256, :256], r[:256, :256]
      want = jnp.dot(a, b, preferred_element_type=jnp.float32)
      got = matmul_tuned(a, b, interpret=True).astype(jnp.float32)
      err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
      print(f"{jnp.dtype(dtype).name}: the three kernels compile to Mosaic GPU; 256^3 matmul in"
            f" interpret mode: relative error {err:.2e}")
      assert err < 1e-2
      continue
    want = reference(a, b).astype(jnp.float32)
    got = jax.jit(matmul_tuned)(a, b).astype(jnp.float32)
    err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
    print(f"{jnp.dtype(dtype).name} matmul 1024x768x512: relative error {err:.2e}")
    assert err < 1e-2
    want = jnp.maximum(jnp.dot(a, b, preferred_element_type=jnp.float32) + r.astype(jnp.float32), 0)
    got = jax.jit(matmul_residual_relu)(a, b, r).astype(jnp.float32)
    err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
    print(f"{jnp.dtype(dtype).name} relu(a @ b + r): relative error {err:.2e}")
    assert err < 1e-2
    bias = r[0]
    want = jax.nn.gelu(jnp.dot(a, b, preferred_element_type=jnp.float32) + bias.astype(jnp.float32),
                       approximate=True)
    got = jax.jit(matmul_bias_gelu)(a, b, bias).astype(jnp.float32)
    err = float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))
    print(f"{jnp.dtype(dtype).name} gelu(a @ b + bias): relative error {err:.2e}")
    assert err < 1e-2


if __name__ == "__main__":
  main()
