"""Layer norm, forward and backward, wired into jax.grad with jax.custom_vjp.

    python examples/layernorm.py         # on a GPU: checks against jnp; else interpret mode

Forward: each program normalises `rows` rows held in registers (row mean and variance
are row reductions that stay inside each warp) and also writes the per-row mean and
1/std, which the backward reuses. Backward: dx per row, and the weight and bias
gradients (column sums over all rows) in two steps: each of a few hundred programs
walks its share of the rows accumulating partial column sums in registers, then a
second kernel adds the partial rows up.

Rows too long for registers (past 16384 elements) are held in SMEM instead, as the long-row
softmax holds them (`layernorm_smem_rows`: every chunk's TMA load in flight, the mean and the
variance from SMEM, each chunk normalised in place and stored while the next is computed; a
cluster of CTAs past 128 KiB a row). Their backward takes the columns in windows: one kernel
gives each row's two sums (`layernorm_bwd_stats`), then dx and the partial column sums per
window of `cols` columns (`layernorm_bwd_cols`), so no program holds a whole row.
"""
import functools

import jax
import jax.numpy as jnp

import mgpu_dsl as mg
from mgpu_dsl import language as ml

from softmax import SEG, check_rows, cluster_exchange, most_chunks, smem_config   # rows held in SMEM as the long-row softmax holds them

F32 = jnp.float32


def _rows(n, d, budget=4096):
  rows = max(1, min(8, budget // d))
  while n % rows:
    rows //= 2
  return rows


@mg.mgpu_kernel(
    out_shape=lambda x, w, b, *, rows, eps: (x, jax.ShapeDtypeStruct((x.shape[0],), F32),
                                             jax.ShapeDtypeStruct((x.shape[0],), F32)),
    grid=lambda x, w, b, *, rows, eps: (x.shape[0] // rows,))
def layernorm_fwd(x, w, b, y, mean, rstd, *, rows: ml.constexpr, eps: ml.constexpr):
  i = ml.program_id(0)
  d = x.shape[1]
  v = x.at[ml.ds(i * rows, rows), :][...].astype(F32)
  mu = ml.sum(v, axis=1) / d
  xc = v - mu[:, None]
  r = ml.rsqrt(ml.sum(xc * xc, axis=1) / d + eps)
  out = xc * r[:, None] * w[...].astype(F32)[None, :] + b[...].astype(F32)[None, :]
  y.at[ml.ds(i * rows, rows), :][...] = out.astype(y.dtype)
  mean.at[ml.ds(i * rows, rows)][...] = mu
  rstd.at[ml.ds(i * rows, rows)][...] = r


def _parts(x, w, dy, mean, rstd, *, rows, steps):
  programs = x.shape[0] // (rows * steps)
  part = jax.ShapeDtypeStruct((programs, x.shape[1]), F32)
  return x, part, part


@mg.mgpu_kernel(out_shape=_parts,
                grid=lambda x, w, dy, mean, rstd, *, rows, steps: (x.shape[0] // (rows * steps),))
def layernorm_bwd(x, w, dy, mean, rstd, dx, dw_part, db_part, *, rows: ml.constexpr,
                  steps: ml.constexpr):
  """dx for `steps` blocks of `rows` rows, and this program's partial column sums of
  dy * xhat (for dw) and dy (for db)."""
  p = ml.program_id(0)
  d = x.shape[1]
  wv = w[...].astype(F32)
  dw = ml.zeros((rows, d), F32)      # summed over rows once, after the loop
  db = ml.zeros((rows, d), F32)
  for s in range(steps):
    r0 = (p * steps + s) * rows
    xhat = (x.at[ml.ds(r0, rows), :][...].astype(F32) - mean.at[ml.ds(r0, rows)][...][:, None]) \
        * rstd.at[ml.ds(r0, rows)][...][:, None]
    g = dy.at[ml.ds(r0, rows), :][...].astype(F32)
    wg = g * wv[None, :]
    c1 = ml.sum(xhat * wg, axis=1) / d
    c2 = ml.sum(wg, axis=1) / d
    grad = (wg - xhat * c1[:, None] - c2[:, None]) * rstd.at[ml.ds(r0, rows)][...][:, None]
    dx.at[ml.ds(r0, rows), :][...] = grad.astype(dx.dtype)
    dw = dw + g * xhat
    db = db + g
  dw_part.at[p][...] = ml.sum(dw, axis=0)
  db_part.at[p][...] = ml.sum(db, axis=0)


@mg.mgpu_kernel(out_shape=lambda parts, *, cols, step, dtype: jax.ShapeDtypeStruct((parts.shape[1],), dtype),
                grid=lambda parts, *, cols, step, dtype: (parts.shape[1] // cols,))
def column_sums(parts, out, *, cols: ml.constexpr, step: ml.constexpr, dtype: ml.constexpr):
  """out[j] = sum over rows of parts[:, j], `cols` columns per program, `step` rows at a time."""
  j = ml.program_id(0)
  acc = ml.zeros((cols,), F32)
  for r in range(parts.shape[0] // step):
    acc = acc + ml.sum(parts.at[ml.ds(r * step, step), ml.ds(j * cols, cols)][...], axis=0)
  out.at[ml.ds(j * cols, cols)][...] = acc.astype(out.dtype)


def _column_sums(parts, dtype, interpret):
  """column_sums with the widest windows that tile parts: every row is summed, however few."""
  step = 8
  while parts.shape[0] % step:
    step //= 2
  cols = 256 if parts.shape[1] % 256 == 0 else 128
  return column_sums(parts, cols=cols, step=step, dtype=dtype, interpret=interpret)


MAX_ROW = 16384                # elements of a row the forward holds in registers
COLS = 2048                    # columns a backward program takes at once when rows are long


def _smem_out(x, w, b, **meta):
  stat = jax.ShapeDtypeStruct((x.shape[0],), F32)
  return x, stat, stat


@mg.mgpu_kernel(out_shape=_smem_out, grid=lambda x, w, b, *, parts, **meta: (x.shape[0] * parts,),
                cluster=lambda x, w, b, *, parts, **meta: (parts,),
                block=lambda x, w, b, *, warpgroups=1: 128 * warpgroups)
def layernorm_smem_rows(x, w, b, y, mean, rstd, *, chunks: ml.constexpr, parts: ml.constexpr,
                        eps: ml.constexpr, center: ml.constexpr = True, wb_slots: ml.constexpr = 0,
                        warpgroups: ml.constexpr = 1):
  """One row per cluster of `parts` CTAs, each holding 1/parts of it in SMEM (x viewed as
  (n, d // SEG, SEG), w and b as (d // SEG, SEG)). `center=False` is RMS norm (b unused).

  A CTA's part arrives as `chunks` TMA loads, all in flight, summed as each lands; the sum of
  squared deviations from the part's mean is read back from SMEM; the parts combine their
  (mean, squared deviations) through distributed shared memory (Chan's parallel variance);
  then each chunk is normalised in place and stored by TMA while the next is computed.
  w and b come in by chunks: into registers one chunk ahead of their use, or, with `wb_slots`,
  by TMA into that many SMEM slots (the first ones issued with the row's loads)."""
  i = ml.program_id(0)
  row, part = i // parts, i % parts
  segs = x.shape[1] // parts                 # SEG-wide rows of x's row this CTA holds
  per = segs // chunks
  first = part * segs
  d = x.shape[1] * x.shape[2]
  x_s = ml.smem((segs, SEG), x.dtype)
  for c in ml.static_range(chunks):
    ml.copy(x.at[row, ml.ds(first + c * per, per)], x_s.at[ml.ds(c * per, per)])
  # w and b come from GMEM (L2) one chunk ahead of their use, or several by TMA: the first
  # chunks' now, so the last pass does not wait for them.
  if wb_slots:
    w_s = ml.smem((wb_slots, per, SEG), w.dtype)
    b_s = ml.smem((wb_slots, per, SEG), b.dtype)
    for c in ml.static_range(min(wb_slots, chunks)):
      ml.copy(w.at[ml.ds(first + c * per, per)], w_s.at[c])
      if center:
        ml.copy(b.at[ml.ds(first + c * per, per)], b_s.at[c])
  else:
    w_next = w.at[ml.ds(first, per)][...]
    b_next = b.at[ml.ds(first, per)][...] if center else None
  mu = 0.0
  if center:
    s = ml.zeros((per, SEG), F32)
    for c in ml.static_range(chunks):        # each chunk awaited just before it is read
      s = s + x_s.at[ml.ds(c * per, per)][...].astype(F32)
    mu = ml.sum(s) * (parts / d)
  q = ml.zeros((per, SEG), F32)
  for c in ml.static_range(chunks):
    t = x_s.at[ml.ds(c * per, per)][...].astype(F32) - mu
    q = q + t * t
  m2 = ml.sum(q)
  if parts > 1:                              # combine the parts' (mean, m2) across the cluster
    got = cluster_exchange(mu, m2, parts)
    total = got[0][0]
    for p in ml.static_range(1, parts):
      total = total + got[p][0]
    mu_all = total * (1.0 / parts)
    m2_all = ml.zeros((128,), F32)
    for p in ml.static_range(parts):
      dev = got[p][0] - mu_all
      m2_all = m2_all + got[p][1] + (d / parts) * dev * dev
    mu = ml.max(mu_all)                      # every lane holds the same values
    m2 = ml.max(m2_all)
  r = ml.rsqrt(m2 / d + eps)
  for c in ml.static_range(chunks):
    if wb_slots:
      w_c = w_s.at[c % wb_slots][...]
      b_c = b_s.at[c % wb_slots][...] if center else None
      if c + wb_slots < chunks:              # the slot just read takes a later chunk
        ml.copy(w.at[ml.ds(first + (c + wb_slots) * per, per)], w_s.at[c % wb_slots])
        if center:
          ml.copy(b.at[ml.ds(first + (c + wb_slots) * per, per)], b_s.at[c % wb_slots])
    else:
      w_c, b_c = w_next, b_next
      if c + 1 < chunks:
        w_next = w.at[ml.ds(first + (c + 1) * per, per)][...]
        b_next = b.at[ml.ds(first + (c + 1) * per, per)][...] if center else None
    out = (x_s.at[ml.ds(c * per, per)][...].astype(F32) - mu) * r * w_c.astype(F32)
    if center:
      out = out + b_c.astype(F32)
    x_s.at[ml.ds(c * per, per)][...] = out.astype(y.dtype)
    ml.copy(x_s.at[ml.ds(c * per, per)], y.at[row, ml.ds(first + c * per, per)])
  if part == 0:                              # the row's first part writes its statistics
    mean[row] = mu
    rstd[row] = r
  if parts > 1:
    ml.cluster_sync()                        # no CTA exits while a peer still reads its SMEM


WB_SMEM_BUDGET = 200 * 1024   # bytes of SMEM a CTA's row part and its w and b slots may take


def layernorm_smem(x, w, b, eps=1e-5, *, center=True, chunks=None, parts=None, wb_slots=None, warpgroups=1,
                   interpret=None):
  """layernorm_smem_rows on a 2-D x (its last dimension a multiple of SEG): (y, mean, rstd).
  `wb_slots` (default: 2 for 4-byte elements, whose rows fill a CTA's SMEM alone anyway; else 0);
  `warpgroups` splits each chunk's rows among that many warpgroups (block=128 * warpgroups)."""
  n, d = x.shape
  c0, p0 = smem_config(d, x.dtype.itemsize) or (8, 1)
  parts = parts or p0
  chunks = chunks or most_chunks(d // SEG // parts, c0)
  if (d // SEG) % parts or (d // SEG // parts) % chunks:
    raise ValueError(f"layernorm_smem: a row's {d // SEG} segments of {SEG} do not split into {parts} parts of"
                     f" {chunks} chunks")
  if wb_slots is None:     # two SMEM slots of w and b a chunk where they fit beside the row (few chunks: not)
    chunk = d // parts // chunks * w.dtype.itemsize
    wb_slots = 2 if x.dtype.itemsize == 4 and d * x.dtype.itemsize // parts + 4 * chunk <= WB_SMEM_BUDGET else 0
  y, mean, rstd = layernorm_smem_rows(x.reshape(n, d // SEG, SEG), w.reshape(d // SEG, SEG),
                                      b.reshape(d // SEG, SEG), chunks=chunks, parts=parts, eps=eps,
                                      center=center, wb_slots=wb_slots, warpgroups=warpgroups,
                                      interpret=interpret)
  return y.reshape(n, d), mean, rstd


def _stats_out(x, w, dy, mean, rstd, **meta):
  stat = jax.ShapeDtypeStruct((x.shape[0],), F32)
  return stat, stat


@mg.mgpu_kernel(out_shape=_stats_out, grid=lambda x, *rest, **meta: (x.shape[0],))
def layernorm_bwd_stats(x, w, dy, mean, rstd, c1, c2, *, segs: ml.constexpr, stages: ml.constexpr = 3):
  """Per row (x and dy viewed as (n, d // SEG, SEG), w as (d // SEG, SEG)): c1 = mean(xhat * w * dy)
  and c2 = mean(w * dy), over windows of `segs` SEG-wide rows whose TMA loads run `stages` ahead."""
  row = ml.program_id(0)
  d = x.shape[1] * x.shape[2]
  mu = mean[row]
  x_s = ml.smem((segs, SEG), x.dtype)
  dy_s = ml.smem((segs, SEG), dy.dtype)
  w_s = ml.smem((segs, SEG), w.dtype)
  a1 = ml.zeros((segs, SEG), F32)
  a2 = ml.zeros((segs, SEG), F32)
  for c in ml.range(x.shape[1] // segs, stages=stages):
    win = ml.ds(c * segs, segs)
    ml.copy(x.at[row, win], x_s)
    ml.copy(dy.at[row, win], dy_s)
    ml.copy(w.at[win], w_s)
    wg = dy_s[...].astype(F32) * w_s[...].astype(F32)
    a1 = a1 + (x_s[...].astype(F32) - mu) * wg
    a2 = a2 + wg
  c1[row] = ml.sum(a1) * rstd[row] * (1.0 / d)
  c2[row] = ml.sum(a2) * (1.0 / d)


def _cols_out(x, w, dy, mean, rstd, c1, c2, *, steps, segs, stages=3):
  part = jax.ShapeDtypeStruct((x.shape[0] // steps, x.shape[1], x.shape[2]), F32)
  return x, part, part


@mg.mgpu_kernel(out_shape=_cols_out,
                grid=lambda x, *rest, steps, segs, stages=3: (x.shape[0] // steps, x.shape[1] // segs))
def layernorm_bwd_cols(x, w, dy, mean, rstd, c1, c2, dx, dw_part, db_part, *, steps: ml.constexpr,
                       segs: ml.constexpr, stages: ml.constexpr = 3):
  """layernorm_bwd on one window of `segs` SEG-wide rows of columns (x, dy, dx viewed as
  (n, d // SEG, SEG)) for `steps` rows, the rows' c1 and c2 given: the rows' TMA loads run
  `stages` ahead, their four statistics staged in SMEM once."""
  p = ml.program_id(0)
  win = ml.ds(ml.program_id(1) * segs, segs)
  r0 = p * steps
  mu_s, rs_s, c1_s, c2_s = (ml.smem((steps,), F32), ml.smem((steps,), F32), ml.smem((steps,), F32),
                            ml.smem((steps,), F32))
  ml.copy(mean.at[ml.ds(r0, steps)], mu_s)
  ml.copy(rstd.at[ml.ds(r0, steps)], rs_s)
  ml.copy(c1.at[ml.ds(r0, steps)], c1_s)
  ml.copy(c2.at[ml.ds(r0, steps)], c2_s)
  wv = w.at[win][...].astype(F32)
  x_s = ml.smem((segs, SEG), x.dtype)
  dy_s = ml.smem((segs, SEG), dy.dtype)
  dw = ml.zeros((segs, SEG), F32)
  db = ml.zeros((segs, SEG), F32)
  for s in ml.range(steps, stages=stages):
    ml.copy(x.at[r0 + s, win], x_s)
    ml.copy(dy.at[r0 + s, win], dy_s)
    rs = rs_s[s]
    xhat = (x_s[...].astype(F32) - mu_s[s]) * rs
    g = dy_s[...].astype(F32)
    dx.at[r0 + s, win][...] = ((g * wv - xhat * c1_s[s] - c2_s[s]) * rs).astype(dx.dtype)
    dw = dw + g * xhat
    db = db + g
  dw_part.at[p, win][...] = dw
  db_part.at[p, win][...] = db


def _bwd_config(n, d):
  rows = _rows(n, d)
  steps = 1
  while n // (rows * steps * 2) >= 256 and (n // rows) % (steps * 2) == 0:   # about 256 programs
    steps *= 2
  return rows, steps


def _bwd_cols_config(n, d):
  """(steps, segs) of layernorm_bwd_cols: windows of COLS columns, each program walking `steps`
  rows (at least 4: their statistics arrive by TMA, 16 bytes or more), about 1024 programs (fewer
  would leave SMs idle, more write more rows of partial sums)."""
  steps = 4
  while (n // (steps * 2)) * (d // COLS) >= 1024 and n % (steps * 2) == 0 and steps < 64:
    steps *= 2
  return steps, COLS // SEG


def check_weights(name, x, *ws):
  """check_rows, and each of `ws` a (d,) vector for x's rows of d."""
  check_rows(name, x)
  for w in ws:
    if w.shape != (x.shape[1],):
      raise ValueError(f"{name}: the weights must have shape ({x.shape[1]},) for rows of {x.shape[1]}, got {w.shape}")


def _forward(x, w, b, eps, interpret):
  check_weights("layernorm", x, w, b)
  if x.shape[1] > MAX_ROW and smem_config(x.shape[1], x.dtype.itemsize) is not None:
    return layernorm_smem(x, w, b, eps, interpret=interpret)
  return layernorm_fwd(x, w, b, rows=_rows(*x.shape), eps=eps, interpret=interpret)


def check_static(fn, name, value):
  """A ValueError for an option traced by jax.jit: kernels are built for Python values."""
  if isinstance(value, jax.core.Tracer):
    raise ValueError(f"{fn}: {name} must be a Python value (it is built into the kernel), got a value jax.jit is"
                     f" tracing: mark it static, jax.jit(f, static_argnames=[{name!r}]) (or static_argnums)")


def layernorm(x, w, b, eps=1e-5, interpret=None):
  """(x - mean) / sqrt(var + eps) * w + b over the last axis of a 2-D array (its last
  dimension a multiple of 128; rows a multiple of 8 for the backward)."""
  check_static("layernorm", "eps", eps)
  return _layernorm(x, w, b, eps, interpret)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3, 4))
def _layernorm(x, w, b, eps, interpret):
  return _forward(x, w, b, eps, interpret)[0]


def _fwd(x, w, b, eps, interpret):
  y, mean, rstd = _forward(x, w, b, eps, interpret)
  return y, (x, w, b, mean, rstd)


def _bwd(eps, interpret, res, dy):
  x, w, b, mean, rstd = res
  n, d = x.shape
  if d > 4096 and d % COLS == 0 and n % 4 == 0:     # long rows: column windows, the row sums first
    steps, segs = _bwd_cols_config(n, d)
    x3, dy3, w2 = x.reshape(n, d // SEG, SEG), dy.reshape(n, d // SEG, SEG), w.reshape(d // SEG, SEG)
    c1, c2 = layernorm_bwd_stats(x3, w2, dy3, mean, rstd, segs=segs, interpret=interpret)
    dx, dw_part, db_part = layernorm_bwd_cols(x3, w2, dy3, mean, rstd, c1, c2, steps=steps, segs=segs,
                                              interpret=interpret)
    dx, dw_part, db_part = dx.reshape(n, d), dw_part.reshape(-1, d), db_part.reshape(-1, d)
  else:
    rows, steps = _bwd_config(n, d)
    dx, dw_part, db_part = layernorm_bwd(x, w, dy, mean, rstd, rows=rows, steps=steps,
                                         interpret=interpret)
  dw = _column_sums(dw_part, w.dtype, interpret)
  db = _column_sums(db_part, b.dtype, interpret)
  return dx, dw, db


_layernorm.defvjp(_fwd, _bwd)


def reference(x, w, b, eps=1e-5):
  xf = x.astype(F32)
  mu = xf.mean(-1, keepdims=True)
  var = ((xf - mu) ** 2).mean(-1, keepdims=True)
  return ((xf - mu) * jax.lax.rsqrt(var + eps) * w.astype(F32) + b.astype(F32)).astype(x.dtype)


for _dt in (jnp.float32, jnp.bfloat16):
  _S = jax.ShapeDtypeStruct
  mg.check_specs(layernorm_fwd, _S((64, 1024), _dt), _S((1024,), _dt), _S((1024,), _dt), rows=4, eps=1e-5)
  mg.check_specs(layernorm_bwd, _S((64, 1024), _dt), _S((1024,), _dt), _S((64, 1024), _dt),
                 _S((64,), F32), _S((64,), F32), rows=4, steps=2)
  mg.check_specs(column_sums, _S((256, 1024), F32), cols=256, step=8, dtype=_dt)
  mg.check_specs(layernorm_smem_rows, _S((4, 128, SEG), _dt), _S((128, SEG), _dt), _S((128, SEG), _dt),
                 chunks=8, parts=1, eps=1e-5)
  mg.check_specs(layernorm_smem_rows, _S((4, 64, SEG), _dt), _S((64, SEG), _dt), _S((64, SEG), _dt),
                 chunks=4, parts=2, eps=1e-5, center=False)
  mg.check_specs(layernorm_bwd_stats, _S((64, 32, SEG), _dt), _S((32, SEG), _dt), _S((64, 32, SEG), _dt),
                 _S((64,), F32), _S((64,), F32), segs=8)
  mg.check_specs(layernorm_bwd_cols, _S((64, 32, SEG), _dt), _S((32, SEG), _dt), _S((64, 32, SEG), _dt),
                 _S((64,), F32), _S((64,), F32), _S((64,), F32), _S((64,), F32), steps=8, segs=8)


if __name__ == "__main__":
  on_gpu = jax.default_backend() == "gpu"
  shapes = [(4096, 4096), (256, 32768)] if on_gpu else [(64, 512), (4, 32768)]   # registers; rows in SMEM
  interp = None if on_gpu else True
  for (n, d), dtype in [(s, t) for s in shapes for t in (jnp.float32, jnp.bfloat16)]:
    k = jax.random.split(jax.random.key(0), 4)
    x = (jax.random.normal(k[0], (n, d), F32) * 3 + 1).astype(dtype)
    w = jax.random.normal(k[1], (d,), F32).astype(dtype)
    b = jax.random.normal(k[2], (d,), F32).astype(dtype)
    dy = jax.random.normal(k[3], (n, d), F32).astype(dtype)
    y = layernorm(x, w, b, 1e-5, interp)
    ref = reference(x, w, b)
    f = lambda x, w, b: jnp.sum(layernorm(x, w, b, 1e-5, interp).astype(F32) * dy.astype(F32))
    g = lambda x, w, b: jnp.sum(reference(x, w, b).astype(F32) * dy.astype(F32))
    grads = jax.grad(f, argnums=(0, 1, 2))(x, w, b)
    want = jax.grad(g, argnums=(0, 1, 2))(x, w, b)
    errs = [float(jnp.abs(y.astype(F32) - ref.astype(F32)).max())] + [
        float(jnp.abs(a.astype(F32) - c.astype(F32)).max() / (jnp.abs(c.astype(F32)).max() + 1e-9))
        for a, c in zip(grads, want)]
    print(f"layernorm {dtype.__name__} ({n}, {d}): y max abs error {errs[0]:.2e}; dx, dw, db relative"
          f" errors {errs[1]:.2e} {errs[2]:.2e} {errs[3]:.2e} ({'GPU' if on_gpu else 'interpret mode'})")

