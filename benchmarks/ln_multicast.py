"""Layer norm of long float32 rows with w and b multicast across a cluster (issue #8).

    python benchmarks/ln_multicast.py

The 1024 x 32768 float32 layer norm is L2-bound (docs/benchmarks.md, tenth session): every row
reads all of w and b (256 KiB) from L2 besides its own 128 KiB of x. Here a cluster of `cl` CTAs
on neighbouring rows (one row each, held in SMEM as layernorm_smem_rows holds it) shares each
chunk of w and b: the normalising pass is a warp-specialised loop whose producer multicasts the
chunk (each CTA fetches 1/cl of it, the TMA engine delivers it to all), so w and b cross the L2
once per cluster. GB/s (bytes of x read plus y written) by kernel time / wall time, and the
kernel-time ratio to the `x * 2` copy in the same run; every result checked against jnp first.

Measured on the H200 (docs/benchmarks.md, twelfth session): slower than the default at every
configuration (0.57-0.72 of copy against 0.83), so the example keeps its plain TMA loads of w and b.
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


@mg.mgpu_kernel(out_shape=_out, grid=lambda x, w, b, **meta: (x.shape[0],),
                cluster=lambda x, w, b, *, cl, **meta: (cl,))
def layernorm_multicast_rows(x, w, b, y, mean, rstd, *, chunks: ml.constexpr, cl: ml.constexpr,
                             eps: ml.constexpr, stages: ml.constexpr = 2):
  """One row a CTA (x viewed as (n, segs, seg), w and b as (segs, seg)); the CTAs of a cluster
  of `cl` neighbouring rows load each chunk of w and b once between them."""
  row = ml.program_id(0)
  segs, seg = x.shape[1], x.shape[2]
  per = segs // chunks
  d = segs * seg
  x_s = ml.smem((segs, seg), x.dtype)
  w_s = ml.smem((per, seg), w.dtype)
  b_s = ml.smem((per, seg), b.dtype)
  for c in ml.static_range(chunks):          # the whole row in flight
    ml.copy(x.at[row, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
  s = ml.zeros((per, seg), F32)
  for c in ml.static_range(chunks):          # each chunk awaited just before it is read
    s = s + x_s.at[ml.ds(c * per, per)][...].astype(F32)
  mu = ml.sum(s) * (1.0 / d)
  q = ml.zeros((per, seg), F32)
  for c in ml.static_range(chunks):
    t = x_s.at[ml.ds(c * per, per)][...].astype(F32) - mu
    q = q + t * t
  r = ml.rsqrt(ml.sum(q) / d + eps)
  axis = 0 if cl > 1 else None               # cl=1: the same kernel without the cluster
  for c in ml.range(chunks, stages=stages, warp_specialize=True):
    ml.copy(w.at[ml.ds(c * per, per)], w_s, multicast=axis)
    ml.copy(b.at[ml.ds(c * per, per)], b_s, multicast=axis)
    win = x_s.at[ml.ds(c * per, per)]
    win[...] = ((win[...].astype(F32) - mu) * r * w_s[...].astype(F32) + b_s[...].astype(F32)).astype(y.dtype)
    ml.copy(win, y.at[row, ml.ds(c * per, per)])
  mean[row] = mu
  rstd[row] = r


def layernorm_multicast(x, w, b, eps=1e-5, *, cl=2, chunks=8, seg=128, stages=2, interpret=None):
  n, d = x.shape
  y, mean, rstd = layernorm_multicast_rows(x.reshape(n, d // seg, seg), w.reshape(d // seg, seg),
                                           b.reshape(d // seg, seg), chunks=chunks, cl=cl, eps=eps,
                                           stages=stages, interpret=interpret)
  return y.reshape(n, d), mean, rstd


_S = jax.ShapeDtypeStruct
mg.check_specs(layernorm_multicast_rows, _S((4, 256, 128), F32), _S((256, 128), F32), _S((256, 128), F32),
               chunks=8, cl=2, eps=1e-5)


def main():
  long_layernorm_variants([
      ("layer norm, multicast", f"cluster {cl}, {chunks} chunks, seg {seg}, {stages} stages",
       lambda x, w, b, a=(cl, chunks, seg, stages): layernorm_multicast(x, w, b, cl=a[0], chunks=a[1], seg=a[2],
                                                                        stages=a[3])[0])
      for cl, chunks, seg, stages in ((1, 8, 256, 2), (2, 8, 256, 2), (2, 8, 128, 2), (4, 8, 128, 2),
                                      (2, 16, 128, 3), (2, 16, 128, 2), (2, 16, 128, 4), (1, 16, 128, 3))])


if __name__ == "__main__":
  main()
