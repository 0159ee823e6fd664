"""Long float32 rows held partly in SMEM, partly in registers, so two CTAs fit an SM (issue #8).

    python benchmarks/mixed_rows.py            # softmax, layer norm and RMS norm, rows partly in registers
    python benchmarks/mixed_rows.py --pairs    # layer norm, two rows a CTA sharing w and b (not yet measured)

A 1024 x 32768 float32 row is 128 KiB: held whole in SMEM (examples/softmax.py's
softmax_smem_rows, layernorm.py's layernorm_smem_rows) it leaves room for one CTA an SM, whose
loads stop while it normalises and stores. Here the last `in_regs` of a row's `chunks` chunks
go straight from GMEM into registers and stay there, the others into SMEM by TMA: with 96 KiB
of SMEM a CTA, two CTAs share an SM and one's loads overlap the other's normalising. GB/s
(bytes read plus written) by kernel time / wall time, and the kernel-time ratio to the `x * 2`
copy of the same input in the same run; every result checked against jnp first.
"""
import functools
import os
import sys

import jax
import jax.numpy as jnp

HERE = os.path.dirname(__file__)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(HERE, "..", "examples"))
from common import table  # noqa: E402
from rowwise import long_layernorm_variants, measure  # noqa: E402
import layernorm as LN  # noqa: E402
import softmax as SM  # noqa: E402
import mgpu_dsl as mg  # noqa: E402
from mgpu_dsl import language as ml  # noqa: E402

F32 = jnp.float32
SEG = 256
LOG2E = 1.4426950408889634


def _rows(x, *rest, **meta):
  return (x.shape[0],)


def _block(x, *rest, warpgroups=1):
  return 128 * warpgroups


def _ln_out(x, w, b, **meta):
  stat = jax.ShapeDtypeStruct((x.shape[0],), F32)
  return x, stat, stat


@mg.mgpu_kernel(out_shape=_ln_out, grid=_rows, block=_block)
def layernorm_mixed_rows(x, w, b, y, mean, rstd, *, chunks: ml.constexpr, in_regs: ml.constexpr,
                         eps: ml.constexpr, center: ml.constexpr = True, warpgroups: ml.constexpr = 1,
                         welford: ml.constexpr = False):
  """Layer norm (RMS norm: center=False) of one row a CTA, held as softmax_mixed_rows holds it;
  w and b (viewed as (d // SEG, SEG)) come into registers a chunk ahead of their use. `welford`:
  the mean and squared deviations in one pass, as chunks land (Welford over the chunks at each
  position, Chan over the positions), so no pass over the row waits for its last chunk."""
  row = ml.program_id(0)
  per = x.shape[1] // chunks
  held = chunks - in_regs
  d = x.shape[1] * x.shape[2]
  x_s = ml.smem((held * per, SEG), x.dtype)
  for c in ml.static_range(held):
    ml.copy(x.at[row, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
  regs = [x.at[row, ml.ds((held + c) * per, per)][...].astype(F32) for c in ml.static_range(in_regs)]
  mu = 0.0
  if center and welford:
    mean_p = ml.zeros((per, SEG), F32)
    m2_p = ml.zeros((per, SEG), F32)
    for k in ml.static_range(chunks):
      v = regs[k - held] if k >= held else x_s.at[ml.ds(k * per, per)][...].astype(F32)
      delta = v - mean_p
      mean_p = mean_p + delta * (1.0 / (k + 1))
      m2_p = m2_p + delta * (v - mean_p)
    mu = ml.sum(mean_p) * (1.0 / (per * SEG))
    dev = mean_p - mu
    r = ml.rsqrt((ml.sum(m2_p) + chunks * ml.sum(dev * dev)) * (1.0 / d) + eps)
  elif center:
    s = regs[0]
    for c in ml.static_range(1, in_regs):
      s = s + regs[c]
    for c in ml.static_range(held):
      s = s + x_s.at[ml.ds(c * per, per)][...].astype(F32)
    mu = ml.sum(s) * (1.0 / d)
  if not (center and welford):
    q = ml.zeros((per, SEG), F32)
    for c in ml.static_range(in_regs):
      t = regs[c] - mu
      q = q + t * t
    for c in ml.static_range(held):
      t = x_s.at[ml.ds(c * per, per)][...].astype(F32) - mu
      q = q + t * t
    r = ml.rsqrt(ml.sum(q) * (1.0 / d) + eps)
  w_next = w.at[ml.ds(0, per)][...]
  b_next = b.at[ml.ds(0, per)][...] if center else None
  for c in ml.static_range(chunks):
    w_c, b_c = w_next, b_next
    if c + 1 < chunks:
      w_next = w.at[ml.ds((c + 1) * per, per)][...]
      b_next = b.at[ml.ds((c + 1) * per, per)][...] if center else None
    v = x_s.at[ml.ds(c * per, per)][...].astype(F32) if c < held else regs[c - held]
    o = (v - mu) * r * w_c.astype(F32)
    if center:
      o = o + b_c.astype(F32)
    if c < held:
      x_s.at[ml.ds(c * per, per)][...] = o.astype(y.dtype)
      ml.copy(x_s.at[ml.ds(c * per, per)], y.at[row, ml.ds(c * per, per)])
    else:
      y.at[row, ml.ds(c * per, per)][...] = o.astype(y.dtype)
  mean[row] = mu
  rstd[row] = r


@functools.lru_cache
def _softmax_wide(warpgroups):
  return mg.mgpu_kernel(out_shape=lambda x, **meta: x, grid=_rows, block=128 * warpgroups)(SM.softmax_mixed_rows.fn)


def softmax_mixed(x, *, chunks=8, in_regs=2, warpgroups=1, interpret=None):
  """examples/softmax.py's softmax_mixed_rows (the default for these rows since this benchmark;
  `warpgroups` > 1: block=256, its tiles split among the warpgroups)."""
  n, d = x.shape
  kernel = SM.softmax_mixed_rows if warpgroups == 1 else _softmax_wide(warpgroups)
  return kernel(x.reshape(n, d // SEG, SEG), chunks=chunks, in_regs=in_regs, interpret=interpret).reshape(n, d)


def layernorm_mixed(x, w, b, eps=1e-5, *, center=True, chunks=8, in_regs=2, warpgroups=1, welford=False,
                    interpret=None):
  n, d = x.shape
  y, mean, rstd = layernorm_mixed_rows(x.reshape(n, d // SEG, SEG), w.reshape(d // SEG, SEG),
                                       b.reshape(d // SEG, SEG), chunks=chunks, in_regs=in_regs, eps=eps,
                                       center=center, warpgroups=warpgroups, welford=welford,
                                       interpret=interpret)
  return y.reshape(n, d), mean, rstd


def _pairs(x, *rest, **meta):
  return (x.shape[0] // 2,)


@mg.mgpu_kernel(out_shape=_ln_out, grid=_pairs, block=_block)
def layernorm_pair_rows(x, w, b, y, mean, rstd, *, chunks: ml.constexpr, in_regs: ml.constexpr,
                        eps: ml.constexpr, warpgroups: ml.constexpr = 2):
  """Layer norm of two rows a CTA, each held as layernorm_mixed_rows holds one, sharing every
  chunk of w and b: one read of them from L2 for two rows (the long-row layer norm is L2-bound,
  docs/benchmarks.md, tenth session). Not yet measured."""
  p = ml.program_id(0)
  per = x.shape[1] // chunks
  held = chunks - in_regs
  d = x.shape[1] * x.shape[2]
  x_s = ml.smem((2, held * per, SEG), x.dtype)
  for r in ml.static_range(2):
    for c in ml.static_range(held):
      ml.copy(x.at[2 * p + r, ml.ds(c * per, per)], x_s.at[r, ml.ds(c * per, per)])
  regs = [[x.at[2 * p + r, ml.ds((held + c) * per, per)][...].astype(F32) for c in ml.static_range(in_regs)]
          for r in ml.static_range(2)]
  mus, rs = [], []
  for r in ml.static_range(2):
    s = regs[r][0]
    for c in ml.static_range(1, in_regs):
      s = s + regs[r][c]
    for c in ml.static_range(held):
      s = s + x_s.at[r, ml.ds(c * per, per)][...].astype(F32)
    mu = ml.sum(s) * (1.0 / d)
    q = ml.zeros((per, SEG), F32)
    for c in ml.static_range(chunks):
      t = (x_s.at[r, ml.ds(c * per, per)][...].astype(F32) if c < held else regs[r][c - held]) - mu
      q = q + t * t
    mus = mus + [mu]
    rs = rs + [ml.rsqrt(ml.sum(q) * (1.0 / d) + eps)]
  w_next, b_next = w.at[ml.ds(0, per)][...], b.at[ml.ds(0, per)][...]
  for c in ml.static_range(chunks):
    w_c, b_c = w_next.astype(F32), b_next.astype(F32)
    if c + 1 < chunks:
      w_next, b_next = w.at[ml.ds((c + 1) * per, per)][...], b.at[ml.ds((c + 1) * per, per)][...]
    for r in ml.static_range(2):
      v = x_s.at[r, ml.ds(c * per, per)][...].astype(F32) if c < held else regs[r][c - held]
      o = ((v - mus[r]) * rs[r] * w_c + b_c).astype(y.dtype)
      if c < held:
        x_s.at[r, ml.ds(c * per, per)][...] = o
        ml.copy(x_s.at[r, ml.ds(c * per, per)], y.at[2 * p + r, ml.ds(c * per, per)])
      else:
        y.at[2 * p + r, ml.ds(c * per, per)][...] = o
  for r in ml.static_range(2):
    mean[2 * p + r] = mus[r]
    rstd[2 * p + r] = rs[r]


def layernorm_pairs(x, w, b, eps=1e-5, *, chunks=16, in_regs=6, warpgroups=2, interpret=None):
  n, d = x.shape
  y, mean, rstd = layernorm_pair_rows(x.reshape(n, d // SEG, SEG), w.reshape(d // SEG, SEG),
                                      b.reshape(d // SEG, SEG), chunks=chunks, in_regs=in_regs, eps=eps,
                                      warpgroups=warpgroups, interpret=interpret)
  return y.reshape(n, d), mean, rstd


def main_pairs():
  """--pairs: layernorm_pair_rows against the default."""
  long_layernorm_variants([
      ("layer norm, two rows a CTA", f"{chunks} chunks, {in_regs} in registers, {g} wg",
       lambda x, w, b, c=chunks, r=in_regs, g=g: layernorm_pairs(x, w, b, chunks=c, in_regs=r, warpgroups=g)[0])
      for chunks, in_regs, g in ((16, 6, 2), (16, 8, 2), (16, 4, 2), (16, 6, 1), (16, 4, 1))])


def main():
  if "--pairs" in sys.argv:
    return main_pairs()
  shape = (1024, 32768)
  print(f"jax {jax.__version__} on {jax.devices()[0].device_kind}; GB/s by kernel time / by wall time")
  k = jax.random.split(jax.random.key(0), 3)
  x = jax.random.normal(k[0], shape, F32)
  w = jax.random.normal(k[1], shape[1:], F32)
  b = jax.random.normal(k[2], shape[1:], F32)
  io = 2 * x.size * 4
  copy = measure("copy", lambda x: x * 2, [x], x * 2, io, 1e-6)
  rows = [("copy", "", f"{copy[0]:.0f} / {copy[1]:.0f}", "1.00")]
  sm_ref = jax.jit(lambda x: jax.nn.softmax(x, axis=-1))(x)
  ln_ref = jax.jit(LN.reference)(x, w, b)
  rms_ref = jax.jit(lambda x, w: x * jax.lax.rsqrt(jnp.mean(x * x, -1, keepdims=True) + 1e-5) * w)(x, w)
  cases = [("softmax", "SMEM only", lambda x: SM.softmax_smem(x), [x], sm_ref),
           ("softmax", "default", lambda x: SM.softmax(x), [x], sm_ref),
           ("layer norm", "SMEM only (default)", lambda x, w, b: LN.layernorm(x, w, b), [x, w, b], ln_ref),
           ("RMS norm", "SMEM only", lambda x, w: LN.layernorm_smem(x, w, w, center=False)[0], [x, w], rms_ref)]
  for chunks, in_regs, g in ((8, 3, 1), (8, 4, 1), (16, 6, 1), (16, 8, 1), (8, 4, 2), (16, 8, 2), (8, 5, 2),
                            (16, 10, 2)):
    tag = f"{chunks} chunks, {in_regs} in registers, {g} wg"
    cases += [("softmax", tag, lambda x, c=chunks, r=in_regs, g=g: softmax_mixed(x, chunks=c, in_regs=r,
                                                                                 warpgroups=g), [x], sm_ref),
              ("layer norm", tag, lambda x, w, b, c=chunks, r=in_regs, g=g: layernorm_mixed(
                  x, w, b, chunks=c, in_regs=r, warpgroups=g)[0], [x, w, b], ln_ref),
              ("layer norm, Welford", tag, lambda x, w, b, c=chunks, r=in_regs, g=g: layernorm_mixed(
                  x, w, b, chunks=c, in_regs=r, warpgroups=g, welford=True)[0], [x, w, b], ln_ref),
              ("RMS norm", tag, lambda x, w, c=chunks, r=in_regs, g=g: layernorm_mixed(
                  x, w, w, center=False, chunks=c, in_regs=r, warpgroups=g)[0], [x, w], rms_ref)]
  for op, tag, fn, args, ref in cases:
    r = measure(op, fn, args, ref, io, 1e-4)
    ok = not isinstance(r, str)
    rows.append((op, tag, f"{r[0]:.0f} / {r[1]:.0f}" if ok else r, f"{r[0] / copy[0]:.2f}" if ok else "-"))
    print(rows[-1], flush=True)
  print(table(("kernel", "float32 1024x32768", "GB/s kernel / wall", "of copy"), rows))


if __name__ == "__main__":
  main()
