"""Which part of test_probe33c's `ssd_intra` was wrong on the H200 at block=256 (twenty-fourth session).

    python3 benchmarks/probe_ssd256.py

The kernel (Mamba-2's diagonal SSD blocks: (C B^T * exp(segsum(a))) X, masked causal, on the tensor
cores) gave wrong results at block=256 when the compiler copied the cumsum vector through SMEM for its
second orientation (relayout.CopyUse, now allowed at block=128 only). Each variant below isolates one
part; each runs on the GPU and in interpret mode, and the largest difference is printed.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "tests"))
from test_probe33c import _ssd_inputs  # noqa: E402

S, F32 = jax.ShapeDtypeStruct, jnp.float32
OUT = lambda x, *_: S(x.shape, F32)
GRID = lambda x, *_: (x.shape[1] // 128, x.shape[0])


@ml.inline
def _load(x, b, c, h, j):
  x_s, b_s, c_s = ml.smem((128, 64), x.dtype), ml.smem((128, 64), b.dtype), ml.smem((128, 64), c.dtype)
  ml.copy(x.at[h, ml.ds(j * 128, 128)], x_s)
  ml.copy(b.at[h, ml.ds(j * 128, 128)], b_s)
  ml.copy(c.at[h, ml.ds(j * 128, 128)], c_s)
  return x_s, b_s, c_s


def scratch(x, a, b, c, y):          # the copy written by hand: the cumsum stored, read back for the columns
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = _load(x, b, c, h, j)
  cs = ml.cumsum(a.at[h, ml.ds(j * 128, 128)][...])
  t = ml.smem((128,), F32)
  t[...] = cs
  i = ml.arange(128)
  s = ml.where(i[:, None] >= i[None, :], ml.dot(c_s, b_s.T) * ml.exp(cs[:, None] - t[...][None, :]), 0.0)
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


def from_input(x, cs_in, b, c, y):   # the cumsum given as an input: each orientation read from GMEM
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = _load(x, b, c, h, j)
  rows = cs_in.at[h, ml.ds(j * 128, 128)][...]
  cols = cs_in.at[h, ml.ds(j * 128, 128)][...]
  i = ml.arange(128)
  s = ml.where(i[:, None] >= i[None, :], ml.dot(c_s, b_s.T) * ml.exp(rows[:, None] - cols[None, :]), 0.0)
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


def mask_only(x, a, b, c, y):        # no decay: the causal mask of the scores alone
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = _load(x, b, c, h, j)
  i = ml.arange(128)
  s = ml.where(i[:, None] >= i[None, :], ml.dot(c_s, b_s.T), 0.0)
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


def cumsum_rows(x, a, b, c, y):      # the cumsum as a row statistic only
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = _load(x, b, c, h, j)
  cs = ml.cumsum(a.at[h, ml.ds(j * 128, 128)][...])
  s = ml.dot(c_s, b_s.T) * ml.exp(cs[:, None])
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


def cumsum_cols(x, a, b, c, y):      # the cumsum as a column vector only
  j, h = ml.program_id(0), ml.program_id(1)
  x_s, b_s, c_s = _load(x, b, c, h, j)
  cs = ml.cumsum(a.at[h, ml.ds(j * 128, 128)][...])
  s = ml.dot(c_s, b_s.T) * ml.exp(-cs[None, :])
  y.at[h, ml.ds(j * 128, 128)][...] = ml.dot(s.astype(x.dtype), x_s)


def main():
  x, a, b, c = _ssd_inputs(seed=1)
  cs = jnp.cumsum(a.reshape(a.shape[0], -1, 128), axis=2).reshape(a.shape)
  for fn, second in ((scratch, a), (from_input, cs), (mask_only, a), (cumsum_rows, a), (cumsum_cols, a)):
    for block in (128, 256):
      k = mg.mgpu_kernel(fn, out_shape=OUT, grid=GRID, block=block)
      try:
        got = np.asarray(jax.jit(k)(x, second, b, c))
        want = np.asarray(k(x, second, b, c, interpret=True))
        err = float(np.abs(got - want).max() / max(1e-9, np.abs(want).max()))
        print(f"{fn.__name__:12s} block={block}: max |gpu - interpret| / max |interpret| = {err:.2e}"
              f" {'WRONG' if not err < 2e-2 else 'ok'}", flush=True)
      except Exception as e:    # a variant that does not build: noted, the others go on
        print(f"{fn.__name__:12s} block={block}: {type(e).__name__}: {str(e).splitlines()[0][:120]}", flush=True)


if __name__ == "__main__":
  main()
