"""Which jax.vmap of an aliased kernel goes wrong on the GPU (session 37: a chunked, donated vmap of
`out[0] = v[...]` over 66000 rows returned the last chunk's v at the array's start): each case against NumPy.

    python benchmarks/probe_vmap_alias.py
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0}, grid=(1,))
def put_first(c, v, out):
  out[0] = v[...]


@mg.mgpu_kernel(out_shape=lambda c, v: c, input_output_aliases={0: 0})
def put_first_plain(c, v, out):      # no batching: the aliased kernel alone, on a (n, 8) array
  out[:, 0] = v[...]


def check(name, f, n):
  rng = np.random.default_rng(n)
  c, v = rng.standard_normal((n, 8)).astype(np.float32), np.arange(n, dtype=np.float32)
  try:
    y = np.asarray(f(jnp.asarray(c), jnp.asarray(v)))
    ok = np.array_equal(y[:, 0], v) and np.array_equal(y[:, 1:], c[:, 1:])
    bad = "" if ok else f" y[:4, 0]={y[:4, 0].tolist()} y[-2:, 0]={y[-2:, 0].tolist()}"
    print(f"{name} n={n}: {'OK' if ok else 'WRONG'}{bad}", flush=True)
  except Exception as e:
    print(f"{name} n={n}: {type(e).__name__}: {str(e)[:300]}", flush=True)


def main():
  for n in (1000, 66000):
    check("plain jit", jax.jit(put_first_plain), n)
    check("vmap", jax.jit(jax.vmap(put_first)), n)
    check("vmap donated", jax.jit(jax.vmap(put_first), donate_argnums=0), n)
    check("lax.map(batch_size=256) of the vmap", jax.jit(lambda c, v: jax.lax.map(
        lambda cv: put_first(*cv), (c, v), batch_size=256)), n)
    check("vmap of slices, concatenated", jax.jit(lambda c, v: jnp.concatenate(
        [jax.vmap(put_first)(c[:n // 2], v[:n // 2]), jax.vmap(put_first)(c[n // 2:], v[n // 2:])])), n)


if __name__ == "__main__":
  main()
