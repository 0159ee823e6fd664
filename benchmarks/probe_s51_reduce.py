"""A sweep of small reduction kernels, GPU against interpret mode and NumPy (session 51): the multi-warpgroup fuzzer's
two int32 seeds wrong on the H100 (365: a column min at block=256; 1142: a row max after a column cumsum at block=128,
design note 215) share no obvious cause, so this walks the neighbourhood in order instead of at random: int32 and
float32; sum, min, max; axis 0 and 1; eight tile shapes (64-256 rows, 16-128 columns, 160 rows among them); block 128
and 256; the tile read whole, by a masked window past the array's end (the fill the statistic's identity), or through
SMEM by TMA; before the statistic nothing, a negation, or a cumsum along either axis. Inputs are small integers (every
sum exact). Each "seed" is one combination (`--seeds 0:1728` is all of them); the summary's families are the load
kinds, and every line names its combination, so the wrong ones show their pattern.

    python benchmarks/probe_s51_reduce.py --jobs 14 --seeds 0:1728     # on the GPU machine
    python benchmarks/probe_s51_reduce.py --cpu --jobs 2 --seeds 0:60  # no GPU: interpret mode (+ a CUDA export)
"""
from __future__ import annotations

import itertools
import sys

import numpy as np

import fuzz_pool

DTYPES = ("int32", "float32")
OPS = ("sum", "min", "max")
AXES = (0, 1)
SHAPES = ((64, 48), (128, 48), (160, 48), (160, 64), (128, 64), (192, 32), (256, 16), (64, 128))
BLOCKS = (128, 256)
LOADS = ("plain", "masked", "tma")
PRES = ("none", "neg", "cumsum0", "cumsum1")
COMBOS = [c for c in itertools.product(DTYPES, OPS, AXES, SHAPES, BLOCKS, LOADS, PRES)
          if c[5] != "masked" or c[6] == "none"]     # (a cumsum or negation of a masked window's fill changes it)
_IDENT = {"sum": 0, "min": 10 ** 6, "max": -10 ** 6}
SHORT = 3          # a masked window's rows past the array's end

HEADER = """import jax
import jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml
S = jax.ShapeDtypeStruct


"""


class Case:
  """One combination: `source` (the kernel), `args`, `refs` (NumPy), `tags` (diff_fuzz.run's generator interface)."""

  def __init__(self, seed):
    self.seed = seed
    dt, op, axis, (r, c), block, load, pre = self.combo = COMBOS[seed % len(COMBOS)]
    rows = r - SHORT if load == "masked" else r
    x = np.random.default_rng(seed).integers(-9, 10, (rows, c)).astype(dt)
    n = c if axis == 0 else r
    lines = [f"@mg.mgpu_kernel(out_shape=lambda *a: (S(({n},), jnp.{dt}),), grid=(1,), block={block})",
             "def kernel(x0, o0):"]
    if load == "plain":
      lines.append("  v = x0[...]")
    elif load == "masked":
      lines.append(f"  rr = ml.arange({r})")
      lines.append(f"  v = x0.at[ml.ds(0, {r}), :].load(mask=rr[:, None] < {rows}, other={_IDENT[op]})")
    else:
      lines += [f"  x_s = ml.smem(({r}, {c}), jnp.{dt})", "  ml.copy(x0, x_s)", "  v = x_s[...]"]
    v = np.pad(x.astype(np.int64), ((0, r - rows), (0, 0)), constant_values=_IDENT[op])
    if pre == "neg":
      lines.append("  v = -v")
      v = -v
    elif pre.startswith("cumsum"):
      lines.append(f"  v = ml.cumsum(v, axis={pre[-1]})")
      v = np.cumsum(v, axis=int(pre[-1]))
    lines.append(f"  o0[...] = ml.{op}(v, axis={axis})")
    self.source = HEADER + "\n".join(lines) + "\n"
    self.args = (x,)
    self.refs = (getattr(np, op)(v, axis=axis).astype(dt),)
    self.tags = {f"dt:{dt}", f"op:{op}", f"axis:{axis}", f"shape:{r}x{c}", f"block:{block}", f"load:{load}",
                 f"pre:{pre}"}


def run_seed(seed, family, on_gpu, export_every):
  """(class, family, tags, detail) of combination `seed`."""
  import diff_fuzz
  g = Case(seed)
  tags = " ".join(sorted(g.tags))
  cls, detail = fuzz_pool.check_seed(g, diff_fuzz.run, on_gpu, seed % export_every == 0,
                                     lambda got, want: diff_fuzz.compare(got, want))
  return cls, g.combo[5], tags, detail


if __name__ == "__main__":
  sys.exit(fuzz_pool.main(__doc__, run_seed, "diff_fuzz", progress=200))
