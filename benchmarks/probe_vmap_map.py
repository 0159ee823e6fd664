"""Why `jax.lax.map(batch_size=256)` of a vmapped aliased kernel returns zeros on the GPU (probe 46f's known case,
sessions 37-40; `jax.vmap` alone and a vmap of slices are right): variants of the call, each against NumPy, with
the columns and rows it got.

    python benchmarks/probe_vmap_map.py
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0}, grid=(1,))
def put_first(c, v, out):
  out[0] = v[...]


@mg.mgpu_kernel(out_shape=lambda c, v: c, grid=(1,))
def put_first_copy(c, v, out):       # the same result, no alias: the output written whole
  x = c[...]
  out[...] = ml.where(ml.arange(8) == 0, v[...], x)


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0}, grid=(1,))
def add_first(c, v, out):            # reads the aliased input too
  out[0] = c[0] + v[...]


def check(name, f, n, want=lambda c, v: np.concatenate([v[:, None], c[:, 1:]], 1)):
  rng = np.random.default_rng(n)
  c, v = rng.standard_normal((n, 8)).astype(np.float32), np.arange(n, dtype=np.float32) + 1
  try:
    y = np.asarray(f(jnp.asarray(c), jnp.asarray(v)))
    w = want(c, v)
    bad = np.argwhere(~np.isclose(y, w))
    if not len(bad):
      print(f"{name} n={n}: OK", flush=True)
      return
    rows = np.unique(bad[:, 0])
    print(f"{name} n={n}: WRONG at {len(bad)} elements, {len(rows)} rows (first {rows[:6].tolist()}, last "
          f"{rows[-3:].tolist()}), columns {np.unique(bad[:, 1]).tolist()}; y[:3]={y[:3, :3].tolist()} "
          f"want {w[:3, :3].tolist()}; y[-2:, 0]={y[-2:, 0].tolist()}; c[:3, 0]={c[:3, 0].tolist()}", flush=True)
  except Exception as e:
    print(f"{name} n={n}: {type(e).__name__}: {str(e)[:300]}", flush=True)


def lmap(k, bs, jit_inner=False):
  g = (lambda cv: jax.jit(k)(*cv)) if jit_inner else (lambda cv: k(*cv))
  return jax.jit(lambda c, v: jax.lax.map(g, (c, v), batch_size=bs))


def main():
  n = 1000
  check("vmap (control)", jax.jit(jax.vmap(put_first)), n)
  check("lax.map(batch_size=256) aliased", lmap(put_first, 256), n)
  check("lax.map(batch_size=250) aliased (no remainder)", lmap(put_first, 250), n)
  check("lax.map(batch_size=256) not aliased", lmap(put_first_copy, 256), n)
  check("lax.map(batch_size=256) aliased, body jitted", lmap(put_first, 256, True), n)
  check("lax.map() aliased, one element a step", lmap(put_first, None), 64)
  check("vmap of the last 232 rows alone", jax.jit(lambda c, v: jax.vmap(put_first)(c[768:], v[768:])), n,
        lambda c, v: np.concatenate([v[768:, None], c[768:, 1:]], 1))
  check("vmap of a reshaped (4, 250) batch", jax.jit(lambda c, v: jax.vmap(jax.vmap(put_first))(
      c.reshape(4, 250, 8), v.reshape(4, 250)).reshape(n, 8)), n)
  check("scan of vmaps over (4, 250)", jax.jit(lambda c, v: jax.lax.scan(
      lambda _, cv: (None, jax.vmap(put_first)(*cv)), None, (c.reshape(4, 250, 8), v.reshape(4, 250)))[1].reshape(n, 8)), n)
  check("lax.map(batch_size=256) aliased, reading it", lmap(add_first, 256), n,
        lambda c, v: np.concatenate([c[:, :1] + v[:, None], c[:, 1:]], 1))


if __name__ == "__main__":
  main()
