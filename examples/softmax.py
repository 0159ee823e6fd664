"""Row softmax at memory speed, with the max subtracted (correct for logits of 1e4 and more).

    python examples/softmax.py            # on a GPU: checks against jax.nn.softmax; else interpret mode

Each program reads `rows` whole rows straight from GMEM into registers (the compiler
picks a layout in which each warp owns whole rows, or spreads warps across a single
row), subtracts the row max, exponentiates and divides by the row sum, and writes the
rows back: one read and one write of every element. Rows too long for registers are held
in SMEM (up to 128 KiB a CTA, a cluster of CTAs beyond): their chunks' TMA loads all in flight,
each chunk read as it lands, normalised in place and stored while the next is computed; a
float32 row past 96 KiB keeps its last chunks in registers instead, so that two CTAs fit an SM
(softmax_mixed_rows). Rows that do not split into 256-column boxes take two passes over column
chunks instead.
"""
import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

MAX_ROW_BYTES = 64 * 1024     # a row (in float32) up to this stays in registers
CHUNK = 4096                  # columns per step of the two-pass kernel


def _grid(x, *, rows):
  return (x.shape[0] // rows,)


@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=_grid)
def softmax_rows(x, out, *, rows: ml.constexpr):
  """`rows` whole rows per program, held in registers."""
  i = ml.program_id(0)
  v = x.at[ml.ds(i * rows, rows), :][...].astype(jnp.float32)
  e = ml.exp(v - ml.max(v, axis=1, keepdims=True))
  out.at[ml.ds(i * rows, rows), :][...] = (e / ml.sum(e, axis=1, keepdims=True)).astype(out.dtype)


@mg.mgpu_kernel(out_shape=lambda x, *, rows: x, grid=_grid)
def softmax_long_rows(x, out, *, rows: ml.constexpr):
  """One long row per program in two passes over CHUNK-column windows: an online max and sum,
  then the normalised values (one more read of the row)."""
  i = ml.program_id(0)
  m = ml.full((rows,), float(jnp.finfo(jnp.float32).min), jnp.float32)   # finite: -inf - it is -inf, not NaN
  s = ml.zeros((rows,), jnp.float32)
  for c in range(x.shape[1] // CHUNK):
    v = x.at[ml.ds(i * rows, rows), ml.ds(c * CHUNK, CHUNK)][...].astype(jnp.float32)
    m_new = ml.maximum(m, ml.max(v, axis=1))
    s = s * ml.exp(m - m_new) + ml.sum(ml.exp(v - m_new[:, None]), axis=1)
    m = m_new
  for c in range(x.shape[1] // CHUNK):
    v = x.at[ml.ds(i * rows, rows), ml.ds(c * CHUNK, CHUNK)][...].astype(jnp.float32)
    y = ml.exp(v - m[:, None]) / s[:, None]
    out.at[ml.ds(i * rows, rows), ml.ds(c * CHUNK, CHUNK)][...] = y.astype(out.dtype)


SEG = 256                     # columns a TMA box row spans: an SMEM-held row is (d // SEG, SEG)
SMEM_PART_BYTES = 128 * 1024  # bytes of a row one CTA holds in SMEM (longer rows: a cluster)
LOG2E = 1.4426950408889634
LOWEST = float(jnp.finfo(jnp.float32).min)   # where a running max starts: finite, so -inf - it is -inf


@ml.inline
def cluster_exchange(a, b, parts):
  """Two float32 scalars from each of the `parts` CTAs of a cluster, through distributed shared
  memory: [(a, b) of part p, each repeated over 128 lanes] for p in order."""
  stats = ml.smem((2, 128), jnp.float32)
  stats.at[0][...] = a
  stats.at[1][...] = b
  ml.cluster_sync()
  return [(ml.cluster_ref(stats, p).at[0][...], ml.cluster_ref(stats, p).at[1][...])
          for p in ml.static_range(parts)]


def _smem_grid(x, *, chunks, parts=1, online=False):
  return (x.shape[0] * parts,)


@mg.mgpu_kernel(out_shape=lambda x, **meta: x, grid=_smem_grid,
                cluster=lambda x, *, chunks, parts=1, online=False: (parts,),
                block=lambda x, *, warpgroups=1: 128 * warpgroups)
def softmax_smem_rows(x, out, *, chunks: ml.constexpr, parts: ml.constexpr = 1, online: ml.constexpr = False,
                      warpgroups: ml.constexpr = 1):
  """One long row per cluster of `parts` CTAs, each holding 1/parts of it in SMEM (x viewed as
  (n, d // SEG, SEG)).

  A CTA's part arrives as `chunks` TMA loads, all in flight at once, its max taken from each
  chunk as it lands; then its sum of exponentials, read back from SMEM (`online`: the sum is
  kept as the chunks land, rescaled as the max grows, so only the last pass runs after the
  last chunk lands); the CTAs of a cluster combine their (max, sum) through distributed shared
  memory; then each chunk is normalised in place and stored by TMA while the next is computed.
  One read and one write of GMEM. With `warpgroups` > 1 (block=128 * warpgroups) the compiler
  splits each chunk's rows among the warpgroups (each computes its own rows; the full max and
  sum combine their parts), so more warps hide each other's latency."""
  i = ml.program_id(0)
  row, part = i // parts, i % parts
  rows = x.shape[1] // parts                 # SEG-wide rows of x's row this CTA holds
  per = rows // chunks
  first = part * rows
  x_s = ml.smem((rows, SEG), x.dtype)
  for c in ml.static_range(chunks):
    ml.copy(x.at[row, ml.ds(first + c * per, per)], x_s.at[ml.ds(c * per, per)])
  # In base 2: exp(v - max) = 2 ** ((v - max) * log2(e)). The difference is taken first, so a row
  # of finfo.min (a fully masked row) gives 2 ** 0 everywhere, as jax.nn.softmax does, where
  # v * log2(e) would overflow to -inf and -inf - -inf is NaN; the maxima start at the lowest
  # finite float, so lanes (or a cluster's part) of -inf give 0, not NaN.
  if online:
    m = ml.full((per, SEG), LOWEST, jnp.float32)
    s = ml.zeros((per, SEG), jnp.float32)
    for c in ml.static_range(chunks):        # each chunk awaited just before it is read
      t = x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32)
      m_new = ml.maximum(m, t)
      s = s * ml.exp2((m - m_new) * LOG2E, approx=True) + ml.exp2((t - m_new) * LOG2E, approx=True)
      m = m_new
    top = ml.max(m)
    total = ml.sum(s * ml.exp2((m - top) * LOG2E, approx=True))
  else:
    m = ml.full((per, SEG), LOWEST, jnp.float32)
    for c in ml.static_range(chunks):        # each chunk awaited just before it is read
      m = ml.maximum(m, x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32))
    top = ml.max(m)
    s = ml.zeros((per, SEG), jnp.float32)
    for c in ml.static_range(chunks):
      s = s + ml.exp2((x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32) - top) * LOG2E, approx=True)
    total = ml.sum(s)
  if parts > 1:                              # combine the parts' (max, sum) across the cluster
    got = cluster_exchange(top, total, parts)
    big = got[0][0]
    for p in ml.static_range(1, parts):
      big = ml.maximum(big, got[p][0])
    acc = got[0][1] * ml.exp2((got[0][0] - big) * LOG2E, approx=True)
    for p in ml.static_range(1, parts):
      acc = acc + got[p][1] * ml.exp2((got[p][0] - big) * LOG2E, approx=True)
    top = ml.max(big)                        # every lane holds the same values
    total = ml.max(acc)
  inv = 1.0 / total
  for c in ml.static_range(chunks):
    v = x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32)
    x_s.at[ml.ds(c * per, per)][...] = (ml.exp2((v - top) * LOG2E, approx=True) * inv).astype(out.dtype)
    ml.copy(x_s.at[ml.ds(c * per, per)], out.at[row, ml.ds(first + c * per, per)])
  if parts > 1:
    ml.cluster_sync()                        # no CTA exits while a peer still reads its SMEM


def _row_grid(x, **meta):
  return (x.shape[0],)


@mg.mgpu_kernel(out_shape=lambda x, **meta: x, grid=_row_grid)
def softmax_mixed_rows(x, out, *, chunks: ml.constexpr, in_regs: ml.constexpr):
  """One long row a CTA (x viewed as (n, d // SEG, SEG)) in `chunks` chunks: the first
  chunks - in_regs held in SMEM (TMA loads, all in flight), the last in_regs read straight into
  registers and kept there. A float32 row of 128 KiB held whole in SMEM leaves room for one CTA
  an SM, whose loads stop while it normalises; with a part in registers two CTAs share an SM and
  one's loads run while the other computes (docs/benchmarks.md, tenth session)."""
  row = ml.program_id(0)
  per = x.shape[1] // chunks
  held = chunks - in_regs
  x_s = ml.smem((held * per, SEG), x.dtype)
  for c in ml.static_range(held):
    ml.copy(x.at[row, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
  regs = [x.at[row, ml.ds((held + c) * per, per)][...].astype(jnp.float32) for c in ml.static_range(in_regs)]
  m = regs[0]
  for c in ml.static_range(1, in_regs):
    m = ml.maximum(m, regs[c])
  for c in ml.static_range(held):               # each chunk awaited just before it is read
    m = ml.maximum(m, x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32))
  top = ml.max(m)        # in base 2: exp(v - max) = 2 ** ((v - max) * log2(e)), the difference first
  s = ml.zeros((per, SEG), jnp.float32)
  for c in ml.static_range(in_regs):
    s = s + ml.exp2((regs[c] - top) * LOG2E, approx=True)
  for c in ml.static_range(held):
    s = s + ml.exp2((x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32) - top) * LOG2E, approx=True)
  inv = 1.0 / ml.sum(s)
  for c in ml.static_range(held):
    v = x_s.at[ml.ds(c * per, per)][...].astype(jnp.float32)
    x_s.at[ml.ds(c * per, per)][...] = (ml.exp2((v - top) * LOG2E, approx=True) * inv).astype(out.dtype)
    ml.copy(x_s.at[ml.ds(c * per, per)], out.at[row, ml.ds(c * per, per)])
  for c in ml.static_range(in_regs):
    out.at[row, ml.ds((held + c) * per, per)][...] = (ml.exp2((regs[c] - top) * LOG2E, approx=True)
                                                      * inv).astype(out.dtype)


MIXED = (16, 6)   # (chunks, in registers) for float32 rows past 96 KiB: 80 KiB of SMEM a CTA, two CTAs an SM


def smem_config(d, itemsize):
  """(chunks, parts) for rows of d elements: parts of at most SMEM_PART_BYTES (clusters of up
  to 8 CTAs), 8 chunks each; None if the row does not split so."""
  parts = 1
  while d * itemsize // parts > SMEM_PART_BYTES and (d // SEG) % (parts * 2) == 0 and parts < 8:
    parts *= 2
  if d % SEG or d * itemsize // parts > SMEM_PART_BYTES:
    return None
  return most_chunks(d // SEG // parts), parts


def most_chunks(rows, most=8):
  """The most chunks (at most `most`) that `rows` SEG-wide rows split into evenly: 33 rows take 3."""
  return max(c for c in range(1, min(most, rows) + 1) if rows % c == 0)


def check_rows(name, x, multiple=128):
  """A ValueError at the call for what the row kernels do not take: they normalise the rows of a
  2-D float array whose width is a multiple of `multiple`."""
  if x.ndim != 2:
    raise ValueError(f"{name} takes a 2-D array (rows, width), got shape {x.shape}: reshape it,"
                     f" x.reshape(-1, x.shape[-1])")
  if not jnp.issubdtype(x.dtype, jnp.floating):
    raise ValueError(f"{name} takes float32, float16 or bfloat16 rows, got {x.dtype}: convert them,"
                     f" x.astype(jnp.float32)")
  if x.shape[1] == 0:
    raise ValueError(f"{name} takes rows of at least {multiple} elements, got rows of width 0 (shape {x.shape})")
  if x.shape[1] % multiple:
    fix = ("pad them with -inf (which leaves the softmax unchanged)" if name.startswith("softmax") else
           "for other widths use a masked kernel or the jnp reference (padding would change a norm's statistics)")
    raise ValueError(f"{name} takes rows a multiple of {multiple} wide, got {x.shape[1]}: {fix}")


def softmax_smem(x, *, chunks=None, parts=None, online=False, warpgroups=1, interpret=None):
  """softmax_smem_rows on a 2-D x (its last dimension a multiple of SEG)."""
  check_rows("softmax_smem", x, SEG)
  n, d = x.shape
  c0, p0 = smem_config(d, x.dtype.itemsize) or (8, 1)
  parts = parts or p0
  chunks = chunks or most_chunks(d // SEG // parts, c0)
  if (d // SEG) % parts:
    raise ValueError(f"softmax_smem: a row's {d // SEG} segments of {SEG} columns do not split into {parts} parts")
  if (d // SEG // parts) % chunks:
    raise ValueError(f"softmax_smem: a part of {d // SEG // parts} segments of {SEG} columns does not split into"
                     f" {chunks} chunks")
  y = softmax_smem_rows(x.reshape(n, d // SEG, SEG), chunks=chunks, parts=parts, online=online,
                        warpgroups=warpgroups, interpret=interpret)
  return y.reshape(n, d)


def config(shape, itemsize=4):
  """(kernel, constexprs) for a (n, d) input: about 16 KiB of float32 per program in registers;
  rows too long for one CTA's registers are held in SMEM (softmax_smem_rows, on x viewed as
  (n, d // SEG, SEG)), else taken in two passes (see docs/benchmarks.md for the H200's figures
  of each, and of the registers of a cluster, which this replaced). 2-byte rows of 8192 and
  more are held in SMEM too: on the H200 that reads 8192 x 8192 bfloat16 at 4051 GB/s against
  3508 in registers (docs/logs/rowwise_session4.log; float32 rows and shorter ones gain nothing)."""
  n, d = shape
  long = d * 4 > MAX_ROW_BYTES or (itemsize == 2 and d >= 8192)
  if itemsize == 4 and 96 * 1024 < d * 4 <= SMEM_PART_BYTES and d % SEG == 0 and (d // SEG) % MIXED[0] == 0:
    return softmax_mixed_rows, {"chunks": MIXED[0], "in_regs": MIXED[1]}
  if long and (smem := smem_config(d, itemsize)) is not None:
    return softmax_smem_rows, {"chunks": smem[0], "parts": smem[1]}
  if d * 4 > MAX_ROW_BYTES and d % CHUNK == 0:
    return softmax_long_rows, {"rows": 1}
  rows = max(1, min(8, 4096 // d))
  while n % rows:
    rows //= 2
  return softmax_rows, {"rows": rows}


def softmax(x, *, interpret=None):
  """jax.nn.softmax(x, axis=-1) for a 2-D float32, float16 or bfloat16 array whose last
  dimension is a multiple of 128."""
  check_rows("softmax", x)
  kernel, meta = config(x.shape, x.dtype.itemsize)
  if kernel is softmax_smem_rows:
    return softmax_smem(x, interpret=interpret, **meta)
  if kernel is softmax_mixed_rows:
    n, d = x.shape
    return kernel(x.reshape(n, d // SEG, SEG), interpret=interpret, **meta).reshape(n, d)
  return kernel(x, interpret=interpret, **meta)


for _spec in [(256, 1024), (64, 16384), (8, 32768), (4, 65536)]:
  for _dt in (jnp.float32, jnp.bfloat16):
    _k, _meta = config(_spec, jnp.dtype(_dt).itemsize)
    _shape = (_spec[0], _spec[1] // SEG, SEG) if _k in (softmax_smem_rows, softmax_mixed_rows) else _spec
    mg.check_specs(_k, jax.ShapeDtypeStruct(_shape, _dt), **_meta)
  if _spec[1] % CHUNK == 0 and _spec[1] <= 32768:  # narrower rows would leave the output unwritten (MG602)
    mg.check_specs(softmax_long_rows, jax.ShapeDtypeStruct(_spec, jnp.float32), rows=1)


if __name__ == "__main__":
  on_gpu = jax.default_backend() == "gpu"
  shapes = [(4096, 4096), (1024, 32768)] if on_gpu else [(64, 1024), (8, 16384), (4, 32768)]
  for dtype in (jnp.float32, jnp.bfloat16):
    for shape in shapes:
      x = jax.random.normal(jax.random.key(0), shape, jnp.float32) * 1e4   # exp(x) overflows
      x = x.astype(dtype)
      got = jax.jit(softmax)(x) if on_gpu else softmax(x, interpret=True)
      want = jax.nn.softmax(x.astype(jnp.float32), axis=-1)
      err = float(jnp.abs(got.astype(jnp.float32) - want).max())
      finite = bool(np.isfinite(np.asarray(got, np.float32)).all())
      print(f"softmax {dtype.__name__} {shape}: max abs error {err:.2e}, finite {finite}"
            f" ({'GPU' if on_gpu else 'interpret mode'})")
