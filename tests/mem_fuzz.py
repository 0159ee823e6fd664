"""Probe 58b's differential fuzzer of memory-structured kernels: random kernels of GMEM -> SMEM copies (TMA) of
windows at static and run-time offsets, partial windows at the arrays' ends, masked loads and stores (`ml.ds` views
and Triton's pointer grids), SMEM buffers read and written in registers (slices, transposed views), dtype
conversions on the way, pipelined loops (`ml.range(n, stages=s)`, with and without `warp_specialize=True`), `ml.dot`
of SMEM tiles with accumulators carried through the loop, reductions to GMEM by atomics and TMA reductions, several
outputs, grids of up to three axes.

`Gen(seed)` draws a plan (a kernel family and its sizes, dtypes and paths) and writes from it the kernel's source
and its NumPy reference, computed from the plan directly (a tile at a time, padded with the zeros TMA and the masks
read past an array's end), never from interpret mode. A small share of plans (`ILLEGAL_SHARE`) holds one
deliberate mistake: `gen.illegal` is then (error class name, line of the source) and `run` checks that the kernel is
refused with that class at that line. `run(gen)` classifies as tests/diff_fuzz.py does: "ok", "wrong", "crash" (a
raw traceback, or an InternalError), "refused" (a KernelError: of a legal plan a refusal to look at, of an illegal
one the expected class at the expected line), "build" (interpret mode right, the CUDA export not). Deterministic.
"""
from __future__ import annotations

import random
import sys

import jax.numpy as jnp
import numpy as np

import diff_fuzz
from mem_fuzz_smem import SmemFamilies
from mem_fuzz_tiles import BF16, BOOL, F16, F32, I32, I8, INTS, ISZ, TileFamilies, U8, _cdiv, _np

ILLEGAL_SHARE = 0.07


class Gen(TileFamilies, SmemFamilies):
  """One random memory-structured kernel (`source`, `args`, `refs`) from the plan of `seed`."""

  FAMILIES = (["tile"] * 5 + ["loop"] * 2 + ["matmul"] * 3 + ["atomic"] * 2 + ["persist"] * 2 + ["odd"] * 2
              + ["smem"] * 4 + ["pipe_store"] * 3 + ["prefetch"] * 2 + ["vec"] * 2 + ["views"] * 4
              + ["sync"] * 4 + ["attn"] * 2 + ["nd"] * 3)

  def __init__(self, seed, family=None, illegal=None):
    self.seed = seed
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.ins = []          # (name, array)
    self.outs = []         # (name, NumPy reference)
    self.lines = []
    self.grid = (1,)
    self.block = None
    self.aliases = None
    self.tags = set()
    self.illegal = None    # (error class name, source line) of a deliberate mistake
    self.tol_dtype = None  # compare float outputs at this dtype's tolerance (attention: its 16-bit probabilities)
    self.family = family or self.r.choice(self.FAMILIES)
    want_illegal = self.r.random() < ILLEGAL_SHARE if illegal is None else illegal
    getattr(self, "k_" + self.family)()
    if want_illegal:
      self._break()

  # ------------------------------------------------------------------ values
  def input(self, shape, dt, lo=-100, hi=100):
    name = f"x{len(self.ins)}"
    if dt in INTS:
      a = self.rng.integers(0 if dt == U8 else lo, 250 if dt == U8 else hi, shape).astype(_np(dt))
    elif dt == BOOL:
      a = self.rng.random(shape) < 0.5
    else:
      a = self.rng.standard_normal(shape).astype(np.float32).astype(_np(dt))
    self.ins.append((name, a))
    return name, a

  def output(self, ref):
    name = f"o{len(self.outs)}"
    self.outs.append((name, ref))
    return name

  def emit(self, line):
    self.lines.append("  " + line)

  def _dt(self, choices=(F32, F32, F16, BF16, I32, I8)):
    return self.r.choice(choices)

  def _tile(self, dt, max_elems=8192):
    """(bm, bn): rows and columns of a register tile whose rows are whole 16-byte TMA units."""
    while True:
      bm = self.r.choice([8, 16, 32, 64, 64, 128])
      bn = self.r.choice([16, 32, 64, 128, 256])
      if (bn * ISZ[dt]) % 16 == 0 and bm * bn <= max_elems and (bm * bn) % 128 == 0:
        return bm, bn

  def _cols(self, dt, bn, extra=()):
    """An array width whose rows are a multiple of 16 bytes apart (for every dtype in `extra` too)."""
    unit = max(16 // ISZ[d] for d in (dt,) + tuple(extra))
    return self.r.randint(1, _cdiv(3 * bn, unit)) * unit

  # ------------------------------------------------------------------ deliberate mistakes
  def _break(self):
    """Replace the plan's kernel by one holding a mistake of a known class at a known line."""
    r = self.r
    kind = r.choice(["copy_dtype", "gmem_gmem", "store_dtype", "oob", "smem_dtype_conflict"])
    self.lines, self.outs, self.ins, self.tags = [], [], [], {"illegal:" + kind}
    x, xa = self.input((64, 128), F32)
    o = self.output(xa * 2)
    self.grid, self.block = (1,), None
    if kind == "copy_dtype":
      self.emit("xs = ml.smem((64, 128), jnp.float16)")
      self.emit(f"ml.copy({x}, xs)  # illegal")
      self.emit(f"{o}[...] = xs[...].astype(jnp.float32) * 2")
      want = "CopyDtypeError"
    elif kind == "gmem_gmem":
      self.emit(f"ml.copy({x}, {o})  # illegal")
      want = "CopySpaceError"
    elif kind == "store_dtype":
      self.emit("xs = ml.smem((64, 128))")
      self.emit(f"ml.copy({x}, xs)")
      self.emit(f"{o}[...] = (xs[...] * 2).astype(jnp.float16)  # illegal")
      want = "StoreDtypeError"
    elif kind == "oob":
      self.emit(f"{o}[...] = {x}.at[ml.ds(8, 64)][...] * 2  # illegal")
      want = "IndexOutOfBoundsError"
    else:
      self.emit("xs = ml.smem((64, 128))")
      self.emit(f"ml.copy({x}, xs)")
      self.emit("xs[...] = (xs[...] * 2).astype(jnp.float16)  # illegal")
      self.emit(f"{o}[...] = xs[...]")
      want = "DtypeConflictError"
    line = next(k for k, s in enumerate(self.source.splitlines(), 1) if s.endswith("# illegal"))
    self.illegal = (want, line)

  # ------------------------------------------------------------------ source
  @property
  def source(self):
    ins = ", ".join(n for n, _ in self.ins)
    outs = ", ".join(n for n, _ in self.outs)
    specs = ", ".join(f"S({tuple(v.shape)}, jnp.{jnp.dtype(v.dtype).name})" for _, v in self.outs)
    block = f", block={self.block}" if self.block else ""
    block += f", input_output_aliases={self.aliases}" if self.aliases else ""
    src = diff_fuzz.HEADER + f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: ({specs},), grid={self.grid}{block})\n"
    src += f"def kernel({ins}, {outs}):\n"
    return src + "\n".join(self.lines) + "\n"

  @property
  def args(self):
    return [jnp.asarray(a) for _, a in self.ins]

  @property
  def refs(self):
    return [v for _, v in self.outs]


def compare(got, want, dot=False, tol_dtype=None):
  """None if `got` is `want`: diff_fuzz.compare's rule, but for sums of many products (`dot`: a matmul, a loop's
  sums, atomics) a tolerance of the dtype's relative one (`tol_dtype`'s, if given) plus 2e-4 of the largest
  magnitude (diff_fuzz's dot rule lets a matmul of 16-bit outputs be 0.5 of the scale off)."""
  if not dot or np.asarray(want).dtype.name not in diff_fuzz.FLOATS:
    return diff_fuzz.compare(got, want)
  g, w = np.asarray(got), np.asarray(want)
  if g.shape != w.shape or g.dtype != w.dtype:
    return f"shape/dtype {g.shape} {g.dtype} != {w.shape} {w.dtype}"
  g, w = g.astype(np.float64), w.astype(np.float64)
  scale = max(1.0, np.abs(w[np.isfinite(w)]).max()) if np.isfinite(w).any() else 1.0
  with np.errstate(invalid="ignore"):
    bad = ~((g == w) | (np.isnan(g) & np.isnan(w)) | (np.abs(g - w) <= diff_fuzz.TOL[tol_dtype or want.dtype.name] * np.abs(w) + 2e-4 * scale))
  if bad.any():
    i = tuple(np.argwhere(bad)[0])
    return f"{int(bad.sum())} values differ, first at {i}: got {g[i]!r}, want {w[i]!r}"
  return None


def run(gen, *, build=True, interpret=True):
  """(class, detail) of `gen`'s kernel (see the module's docstring)."""
  import mgpu_dsl as mg
  if gen.illegal:
    want, line = gen.illegal
    try:
      diff_fuzz.load(gen)(*gen.args, interpret=True)
    except mg.KernelError as e:
      if isinstance(e, mg.InternalError):
        return "crash", f"InternalError: {e}"
      got = [(type(x).__name__, x.lineno) for x in getattr(e, "errors", [e])]
      if (want, line) in got:
        return "refused", want
      return "wrong", f"expected {want} at line {line}, got {got}: {str(e).splitlines()[0][:200]}"
    except Exception as e:  # noqa: BLE001
      return "crash", diff_fuzz.describe_exception(e)
    return "wrong", f"expected {want} at line {line}, the kernel ran"
  return diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: compare(g, w, dot, gen.tol_dtype))


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  for s in range(lo, hi):
    g = Gen(s)
    cls, detail = run(g, build=(s % every == 0))
    print(f"SEED {s} {cls} {g.family} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
