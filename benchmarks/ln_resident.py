"""Layer norm of long float32 rows with w and b resident in SMEM (issue #8).

    python benchmarks/ln_resident.py

The 1024 x 32768 float32 layer norm is L2-bound (docs/benchmarks.md, tenth session): every row
reads all of w and b (256 KiB) from L2 besides its own 128 KiB of x, and 256 KiB do not fit in
one CTA's SMEM. Here a cluster of `parts` CTAs splits every row: each CTA keeps its 1/parts of w
and b in SMEM for the whole kernel (read from GMEM once), and the cluster walks rows
`g, g + clusters, ...` in a pipelined loop (x's part of the next rows in flight), the parts'
statistics combined through distributed shared memory each row. GB/s (bytes of x read plus y
written) by kernel time / wall time, and the kernel-time ratio to the `x * 2` copy in the same
run; every result checked against jnp first.

Measured on the H200 (docs/benchmarks.md, fourteenth session): 0.18-0.42 of copy against the
default's 0.83, each row's chain of reductions, cluster barrier and DSMEM reads being longer than
its memory time; the example keeps one row a CTA.
"""
import os
import sys

import jax
import jax.numpy as jnp

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from rowwise import long_layernorm_variants  # noqa: E402
import mgpu_dsl as mg  # noqa: E402
from mgpu_dsl import language as ml  # noqa: E402

F32 = jnp.float32


def _out(x, w, b, **meta):
  stat = jax.ShapeDtypeStruct((x.shape[0],), F32)
  return x, stat, stat


@mg.mgpu_kernel(out_shape=_out, grid=lambda x, w, b, *, parts, clusters, **meta: (clusters * parts,),
                cluster=lambda x, w, b, *, parts, **meta: (parts,),
                block=lambda x, w, b, *, warpgroups=1, **meta: 128 * warpgroups)
def layernorm_resident_rows(x, w, b, y, mean, rstd, *, parts: ml.constexpr, clusters: ml.constexpr,
                            eps: ml.constexpr, stages: ml.constexpr = 2, warpgroups: ml.constexpr = 1,
                            syncs: ml.constexpr = 2):
  """x viewed as (n, segs, seg), w and b as (segs, seg): cluster g of `clusters` takes rows g,
  g + clusters, ...; CTA `part` of it holds columns [part, part + 1) * segs // parts of every row."""
  i = ml.program_id(0)
  g, part = i // parts, i % parts
  n, segs, seg = x.shape
  mine = segs // parts
  first = part * mine
  d = segs * seg
  w_s = ml.smem((mine, seg), w.dtype)
  b_s = ml.smem((mine, seg), b.dtype)
  ml.copy(w.at[ml.ds(first, mine)], w_s)     # once: the loop only reads them
  ml.copy(b.at[ml.ds(first, mine)], b_s)
  x_s = ml.smem((mine, seg), x.dtype)
  o_s = ml.smem((mine, seg), y.dtype)
  # syncs=1: the statistics alternate between two buffers by trip, so a part writes a row's while
  # its peers may still read the last row's (they pass the next ml.cluster_sync() before either
  # buffer changes again); syncs=2: one buffer, a second cluster_sync() a row.
  stats2 = ml.smem((2, 2, 128), F32)
  for row in ml.range(g, n, clusters, stages=stages):
    stats = stats2.at[(row - g) // clusters % 2] if syncs == 1 else stats2.at[0]
    ml.copy(x.at[row, ml.ds(first, mine)], x_s)
    v = x_s[...].astype(F32)
    mu = ml.sum(v) * (1.0 / (mine * seg))
    t = v - mu
    m2 = ml.sum(t * t)
    stats.at[0][...] = mu
    stats.at[1][...] = m2
    ml.cluster_sync()
    total = ml.cluster_ref(stats, 0).at[0][...]
    for p in ml.static_range(1, parts):
      total = total + ml.cluster_ref(stats, p).at[0][...]
    mu_all = total * (1.0 / parts)
    m2_all = ml.zeros((128,), F32)
    for p in ml.static_range(parts):
      dev = ml.cluster_ref(stats, p).at[0][...] - mu_all
      m2_all = m2_all + ml.cluster_ref(stats, p).at[1][...] + (mine * seg) * dev * dev
    if syncs > 1:
      ml.cluster_sync()                      # every part has read the statistics before they change
    mu_r = ml.max(mu_all)                    # every lane holds the same values
    r = ml.rsqrt(ml.max(m2_all) / d + eps)
    o_s[...] = ((v - mu_r) * r * w_s[...].astype(F32) + b_s[...].astype(F32)).astype(y.dtype)
    ml.copy(o_s, y.at[row, ml.ds(first, mine)])
    if part == 0:
      mean[row] = mu_r
      rstd[row] = r
  ml.cluster_sync()                          # no CTA exits while a peer still reads its SMEM


def layernorm_resident(x, w, b, eps=1e-5, *, parts=8, clusters=None, seg=256, stages=2, warpgroups=1,
                       syncs=2, interpret=None):
  n, d = x.shape
  clusters = clusters or max(1, min(n, mg.num_sms() // parts))
  y, mean, rstd = layernorm_resident_rows(x.reshape(n, d // seg, seg), w.reshape(d // seg, seg),
                                          b.reshape(d // seg, seg), parts=parts, clusters=clusters, eps=eps,
                                          stages=stages, warpgroups=warpgroups, syncs=syncs,
                                          interpret=interpret)
  return y.reshape(n, d), mean, rstd


_S = jax.ShapeDtypeStruct
mg.check_specs(layernorm_resident_rows, _S((16, 32, 256), F32), _S((32, 256), F32), _S((32, 256), F32),
               parts=4, clusters=2, eps=1e-5)


CONFIGS = (  # parts, clusters (None: SMs // parts), stages, warpgroups, syncs
    (8, None, 2, 1, 2), (8, None, 2, 1, 1), (8, None, 3, 1, 1), (8, None, 2, 2, 1), (4, None, 2, 1, 1),
    (4, None, 2, 2, 1), (4, None, 3, 2, 1), (8, 32, 2, 1, 1), (8, 32, 2, 2, 1), (16, None, 2, 1, 1),
    (8, None, 4, 1, 1))


def main():
  long_layernorm_variants([
      ("layer norm, resident w and b", "parts {}, clusters {}, stages {}, warpgroups {}, syncs {}".format(*cfg),
       lambda x, w, b, a=cfg: layernorm_resident(x, w, b, parts=a[0], clusters=a[1], stages=a[2],
                                                 warpgroups=a[3], syncs=a[4]))
      for cfg in CONFIGS])


if __name__ == "__main__":
  main()
