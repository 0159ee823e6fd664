"""Probe 69b's sweep of SMEM gathers and scatters (design note 228): `make(seed)` writes one kernel that stages a
1-D or 2-D buffer by TMA and gathers from it (`b[i]`, `b[i, :]`, `ml.load(b.at[i], mask=, other=)`), scatters into
it (`b[i] = v`, `ml.store(b.at[i], v, mask=)`, places outside dropped) or both, at a random dtype, buffer and index
length, with jnp's result on the same inputs: (kernel, args, want, kind, dtype, n, m)."""
import random

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
DT = [jnp.float32, jnp.int32, jnp.float16, jnp.bfloat16, jnp.int8, jnp.uint8]
def make(seed):
  """The seed's kernel, its inputs and jnp's result."""
  rnd = random.Random(seed)
  dt = rnd.choice(DT)
  n = rnd.choice([64, 128, 256, 512])
  m = rnd.choice([128, 256]) if rnd.random() < 0.7 else rnd.choice([64, 8, 16])
  kind = rnd.choice(["gather", "gather_masked", "scatter", "scatter_masked", "gather_2d_rows", "scatter_then_gather"])
  @mg.mgpu_kernel(out_shape=lambda x, ids: S((m, 16) if kind == "gather_2d_rows" else ((n,) if kind.startswith("scatter") and kind != "scatter_then_gather" else (m,)), x.dtype), grid=(1,))
  def k(x, ids, o):
    i = ids[...]
    if kind == "gather_2d_rows":
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      o[...] = b[i, :]
    elif kind == "gather":
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      o[...] = b[i]
    elif kind == "gather_masked":
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      o[...] = ml.load(b.at[i], mask=i >= 0, other=0)
    elif kind == "scatter":
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      b[i] = (ids[...] * 0 + 3).astype(x.dtype)
      ml.copy(b, o)
    elif kind == "scatter_masked":
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      ml.store(b.at[i], (i % 7).astype(x.dtype), mask=i % 2 == 0)
      ml.copy(b, o)
    else:
      b = ml.smem(x.shape, x.dtype); ml.copy(x, b)
      b[i] = (i % 5).astype(x.dtype)
      o[...] = b[(i * 3) % x.shape[0]]
  rng = np.random.default_rng(seed)
  shape = (n // 16, 16) if kind == "gather_2d_rows" else (n,)
  x = np.asarray(jnp.asarray(rng.integers(-50, 50, shape) if jnp.dtype(dt) != jnp.uint8 else rng.integers(0, 100, shape), dt))
  lo = -shape[0] if kind.startswith("gather") or kind == "scatter_then_gather" else -shape[0] - 5
  ids = rng.integers(lo, shape[0] + 5, m).astype(np.int32)
  if kind == "scatter_then_gather":
    ids = rng.permutation(max(m, n))[:m].astype(np.int32) % n
  xj, ij = jnp.asarray(x), jnp.asarray(ids)
  if kind == "gather_2d_rows": want = xj[ij, :]
  elif kind == "gather": want = xj[ij]
  elif kind == "gather_masked": want = jnp.where(ij >= 0, xj[ij], 0).astype(dt)
  elif kind == "scatter": want = xj.at[ij].set(jnp.asarray(3, dt), mode="drop")
  elif kind == "scatter_masked":
    keep = ij % 2 == 0
    want = xj.at[jnp.where(keep, ij, 10**6)].set((ij % 7).astype(dt), mode="drop")
  else:
    bb = xj.at[ij].set((ij % 5).astype(dt), mode="drop"); want = bb[(ij * 3) % n]
  return k, (x, ids), np.asarray(want), kind, dt, n, m
