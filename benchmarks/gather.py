"""Embedding lookup (a row gather), its backward (an atomic row scatter-add) and a MoE un-permute (a plain
row scatter) on the H200: `table[ids, :]`, `ml.atomic_add(dt.at[ids, :], g)` and `out[ids, :] = x` in
mgpu_dsl kernels against XLA's `table[ids]`, `jnp.zeros(...).at[ids].add(g)` and `.at[ids].set(x)`, and
the `x * 2` copy of the output's size.

    python benchmarks/gather.py [--only scatter]

table (65536, 2048), 16384 random ids, float32 and bfloat16. GB/s counts the rows read plus the
output written. Every result is checked against `table[ids]` first. Kernel time: CUPTI (mg.bench,
median of 20 calls); wall time: median of timed loops of jitted calls. A timing is never an
assertion.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from common import table, timings  # noqa: E402

import mgpu_dsl as mg  # noqa: E402
from mgpu_dsl import language as ml  # noqa: E402

ROWS, DIM, IDS = 65536, 2048, 16384
BWD_ROWS = 16384


def _out(t, ids, *, r, c):
  return jax.ShapeDtypeStruct((ids.shape[0], t.shape[1]), t.dtype)


@mg.mgpu_kernel(out_shape=_out, grid=lambda t, ids, *, r, c: (ids.shape[0] // r, t.shape[1] // c))
def embedding(t, ids, out, *, r: ml.constexpr, c: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  rows = ids.at[ml.ds(i * r, r)][...]
  out.at[ml.ds(i * r, r), ml.ds(j * c, c)][...] = t.at[:, ml.ds(j * c, c)][rows, :]


def _bwd_out(g, ids, *, r, c, n):
  return jax.ShapeDtypeStruct((n, g.shape[1]), g.dtype)


@mg.mgpu_kernel(out_shape=_bwd_out, grid=lambda g, ids, *, r, c, n: (ids.shape[0] // r, g.shape[1] // c))
def embedding_backward(g, ids, dt, *, r: ml.constexpr, c: ml.constexpr, n: ml.constexpr):
  i, j = ml.program_id(0), ml.program_id(1)
  rows = ids.at[ml.ds(i * r, r)][...]
  ml.atomic_add(dt.at[:, ml.ds(j * c, c)].at[rows, :], g.at[ml.ds(i * r, r), ml.ds(j * c, c)][...])


@mg.mgpu_kernel(out_shape=lambda g, ids, *, r, n: jax.ShapeDtypeStruct((n, g.shape[1]), g.dtype),
                grid=lambda g, ids, *, r, n: (ids.shape[0] // r,))
def embedding_backward_rows(g, ids, dt, *, r: ml.constexpr, n: ml.constexpr):
  """Whole rows a program: the last index a static slice, so each register is one vector red."""
  i = ml.program_id(0)
  ml.atomic_add(dt.at[ids.at[ml.ds(i * r, r)][...], :], g.at[ml.ds(i * r, r), :][...])


@mg.mgpu_kernel(out_shape=lambda x, ids, *, r, c: x, grid=lambda x, ids, *, r, c: (x.shape[0] // r, x.shape[1] // c))
def unpermute(x, ids, out, *, r: ml.constexpr, c: ml.constexpr):
  """Row i of x to row ids[i] of out (a MoE combine's un-permute): a plain scatter of an (r, c) tile."""
  i, j = ml.program_id(0), ml.program_id(1)
  out.at[:, ml.ds(j * c, c)][ids.at[ml.ds(i * r, r)][...], :] = x.at[ml.ds(i * r, r), ml.ds(j * c, c)][...]


def _best(label, tiles, make, args, check, nbytes):
  """The fastest tile of a sweep by kernel time, ("r x c", timings): `make(r, c)` the jitted kernel, `check(result)`
  None when right, else what is wrong; a tile that fails or cannot run is reported, not fatal."""
  best = None
  for r, c in tiles:
    name = f"{r}x{c or 'whole rows'}"
    f = make(r, c)
    try:
      wrong = check(np.asarray(f(*args)))
      if wrong:
        print(f"  {label} {name}: WRONG RESULT{wrong}", flush=True)
        continue
      tm = timings(f, *args)
    except Exception as e:  # noqa: BLE001
      print(f"  {label} {name}: {type(e).__name__}: {str(e).splitlines()[0][:100]}", flush=True)
      continue
    print(f"  {label} {name}: {nbytes / tm.kernel_s / 1e9:.0f} GB/s (kernel)", flush=True)
    if best is None or tm.kernel_s < best[1].kernel_s:
      best = (name, tm)
  return best


def _equal_to(want):
  return lambda got: None if np.array_equal(got, want) else " (not equal)"


def scatter():
  """(16384, 2048) rows to a random permutation of their places. Both contenders zero the output first
  (neither knows the ids are a permutation); GB/s counts x read and out written once."""
  rows = []
  for dtype in (jnp.float32, jnp.bfloat16):
    x = jax.random.normal(jax.random.key(4), (IDS, DIM), jnp.float32).astype(dtype)
    ids = jax.random.permutation(jax.random.key(5), IDS).astype(jnp.int32)
    want = np.asarray(jnp.zeros_like(x).at[ids].set(x))
    nbytes = 2 * x.size * x.dtype.itemsize
    copy = timings(jax.jit(lambda y: y * 2), x)
    xla_t = timings(jax.jit(lambda x, ids: jnp.zeros_like(x).at[ids].set(x)), x, ids)
    best = _best(f"scatter {dtype.__name__}", [(8, 512), (16, 512), (32, 256), (8, 1024), (4, 2048), (64, 128)],
                 lambda r, c: jax.jit(lambda x, ids: unpermute(x, ids, r=r, c=c)), (x, ids), _equal_to(want), nbytes)
    gb = lambda tm: f"{nbytes / tm.kernel_s / 1e9:.0f} / {nbytes / tm.wall_s / 1e9:.0f}"
    rows.append([dtype.__name__, gb(copy), gb(xla_t), gb(best[1]), best[0],
                 f"{xla_t.kernel_s / best[1].kernel_s:.2f}", f"{copy.kernel_s / best[1].kernel_s:.2f}"])
  print(f"\nun-permute ({IDS}, {DIM}) rows (out[ids, :] = x), GB/s by kernel time / by wall time:")
  print(table(["dtype", "copy (x * 2)", "XLA .at[ids].set", "mgpu_dsl", "rows x cols", "vs XLA", "of copy"], rows))


def backward():
  """float32 only (the single-element red adds float32, int32, uint32). A (16384, 2048) table: both
  contenders also zero it (128 MiB), which the figure counts as written."""
  n = BWD_ROWS
  g = jax.random.normal(jax.random.key(2), (IDS, DIM), jnp.float32)
  ids = jax.random.randint(jax.random.key(1), (IDS,), 0, n)
  want = np.asarray(jnp.zeros((n, DIM), jnp.float32).at[ids].add(g))
  nbytes = (IDS + n) * DIM * 4                  # g read, the table zeroed (and rows updated in L2)
  xla = jax.jit(lambda g, ids: jnp.zeros((n, DIM), jnp.float32).at[ids].add(g))
  xla_t = timings(xla, g, ids)
  make = lambda r, c: (jax.jit(lambda g, ids: embedding_backward(g, ids, r=r, c=c, n=n)) if c else
                       jax.jit(lambda g, ids: embedding_backward_rows(g, ids, r=r, n=n)))
  err = lambda got: None if np.abs(got - want).max() < 1e-4 else f" (max error {np.abs(got - want).max()})"
  best = _best("backward float32", [(8, 512), (16, 256), (4, 2048), (32, 256), (1, None), (2, None), (4, None)],
               make, (g, ids), err, nbytes)
  gb = lambda tm: f"{nbytes / tm.kernel_s / 1e9:.0f} / {nbytes / tm.wall_s / 1e9:.0f}"
  print(f"\nbackward (scatter-add of {IDS} rows into a zeroed ({n}, {DIM}) float32 table), GB/s of g read"
        " and the table written:")
  print(table(["XLA .at[ids].add", "mgpu_dsl atomic scatter", "rows x cols", "vs XLA"],
              [[gb(xla_t), gb(best[1]), best[0], f"{xla_t.kernel_s / best[1].kernel_s:.2f}"]]))


def main():
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; rows of a ({ROWS}, {DIM}) table at {IDS} ids")
  out_rows = []
  for dtype in (jnp.float32, jnp.bfloat16):
    t = jax.random.normal(jax.random.key(0), (ROWS, DIM), jnp.float32).astype(dtype)
    ids = jax.random.randint(jax.random.key(1), (IDS,), 0, ROWS)
    want = np.asarray(t)[np.asarray(ids)]
    nbytes = 2 * IDS * DIM * t.dtype.itemsize
    y = jnp.zeros((IDS, DIM), dtype)
    copy = timings(jax.jit(lambda y: y * 2), y)
    xla = jax.jit(lambda t, ids: t[ids])
    assert np.array_equal(np.asarray(xla(t, ids)), want)
    xla_t = timings(xla, t, ids)
    best = _best(dtype.__name__, [(8, 512), (16, 512), (8, 1024), (16, 256), (32, 256), (4, 2048)],
                 lambda r, c: jax.jit(lambda t, ids: embedding(t, ids, r=r, c=c)), (t, ids), _equal_to(want), nbytes)
    gb = lambda tm: f"{nbytes / tm.kernel_s / 1e9:.0f} / {nbytes / tm.wall_s / 1e9:.0f}"
    out_rows.append([dtype.__name__, gb(copy), gb(xla_t), gb(best[1]), best[0],
                     f"{xla_t.kernel_s / best[1].kernel_s:.2f}", f"{copy.kernel_s / best[1].kernel_s:.2f}"])
  print("\nGB/s by kernel time / by wall time:")
  print(table(["dtype", "copy (y * 2)", "XLA t[ids]", "mgpu_dsl", "rows x cols", "vs XLA", "of copy"], out_rows))
  backward()


if __name__ == "__main__":
  if sys.argv[1:] == ["--only", "scatter"]:
    scatter()
  else:
    main()
    scatter()
