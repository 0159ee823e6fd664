"""Probe 66a's differential fuzzer of pipelined loops whose stages are not whole 128-byte multiples, and of store
buffers under SMEM pressure (session 54 padded the one and gave the other one copy, frontend/pipeline_plan.py):
random kernels of `ml.range(n, stages=s)` loops (s from 2 to 4, a third warp-specialised) that TMA-load 1-D vectors
of 8..200 elements and 2-D tiles of 1..9 rows of float32, float16, bfloat16, int8, int32 and bool, whose bytes are
mostly not a multiple of 128, then read them into registers (broadcast against a tile, summed over the trips, a
row sum, `[...]` then a static slice, a transposed view `buf.T`, static row windows `t_s.at[0:r - 2]`), store them
back by TMA from the loaded buffer, or load into static windows of one buffer; loops nested in a persistent outer
loop, or twice one after the other. And store buffers (written whole from registers, TMA-stored every trip) sized
so that a copy a stage overflows the SMEM and one copy fits, or (a share) so that even one copy does not: MG402,
expected at one of the user's lines (the loop's `stages=` or an allocation), with a hint.

`Gen(seed)` draws a plan and writes from it the kernel's source and its NumPy reference (computed from the plan,
never from interpret mode). `run(gen)` classifies as tests/mem_fuzz.py does: "ok", "wrong", "crash" (a raw traceback
or an InternalError), "refused" (a KernelError of a legal plan; of an expected MG402 its code), "build" (interpret
mode right, the CUDA export not). Deterministic. `python tests/stage_fuzz.py LO HI [EVERY]`;
benchmarks/probe_stage_fuzz.py runs it on a pool (and on the GPU).
"""
from __future__ import annotations

import copy
import random
import sys

import jax.numpy as jnp
import numpy as np

import diff_fuzz
import mem_fuzz

F32, F16, BF16, I32, I8, BOOL = "float32", "float16", "bfloat16", "int32", "int8", "bool"
ISZ = {F32: 4, F16: 2, BF16: 2, I32: 4, I8: 1, BOOL: 1}
SMEM_LIMIT = 227 * 1024 - 16
OVERFLOW_SHARE = 0.25       # store plans drawn so that even one copy of the store buffer overflows


def _np(dt):
  return np.dtype(jnp.dtype(dt))


def _kib(n):
  return -(-n // 1024) * 1024


class Gen:
  """One random pipelined kernel (`source`, `args`, `refs`) from the plan of `seed`."""

  FAMILIES = ["vec"] * 4 + ["tile"] * 4 + ["win"] * 2 + ["store"] * 3 + ["dot"] * 2

  def __init__(self, seed, family=None):
    self.seed = seed
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.ins, self.outs, self.lines, self.tags = [], [], [], set()
    self.block = self.aliases = None
    self.illegal = None       # ("SmemCapacityError", lines): an expected MG402 at one of the kernel's lines
    self.tol_dtype = None
    self.family = family or self.r.choice(self.FAMILIES)
    r = self.r
    self.stages = r.choice([2, 2, 3, 4])
    self.ws = r.random() < 0.3
    self.outer = 2 if r.random() < 0.25 else 1      # a persistent outer loop of 2 items a program
    self.G = r.choice([1, 1, 2])                    # programs
    self.trips = r.randint(1, 6)                    # (1: fewer trips than stages)
    self.twice = not self.ws and r.random() < 0.2   # the loop written twice, one after the other (MG503: a kernel
                                                    # has one warp-specialised loop)
    self.tags |= {f"S{self.stages}"} | ({"ws"} if self.ws else set()) | ({"persist"} if self.outer > 1 else set()) \
        | ({"twice"} if self.twice else set())
    self.B = self.G * self.outer * self.trips       # blocks in all
    self.grid = (self.G,)
    getattr(self, "k_" + self.family)()

  # ------------------------------------------------------------------ values (mem_fuzz's: inputs, outputs, source)
  input, output, source, args, refs = (mem_fuzz.Gen.input, mem_fuzz.Gen.output, mem_fuzz.Gen.source, mem_fuzz.Gen.args,
                                       mem_fuzz.Gen.refs)

  def emit(self, line, depth=1):
    self.lines.append("  " * depth + line)

  def _vec_len(self, dt, lo=8, hi=200):
    """A vector length: a multiple of 8 (a register vector) and of 16 bytes (a TMA row), mostly not of 128 bytes."""
    unit = max(8, 16 // ISZ[dt])
    while True:
      n = self.r.randrange(lo // unit * unit or unit, hi + 1, unit) or unit
      if n * ISZ[dt] % 128 or self.r.random() < 0.15:
        return n

  def _loop(self, body, pre=(), post=()):
    """The loop nest around `body` (the trip's lines, BLK standing for its block's index): the persistent outer
    loop if drawn, the pipelined loop (written twice if drawn)."""
    d = 1
    for line in pre:
      self.emit(line, d)
    if self.outer > 1:
      self.emit(f"for t in ml.range({self.outer}):", d)
      d += 1
      self.emit(f"base = (ml.program_id(0) * {self.outer} + t) * {self.trips}", d)
    else:
      self.emit(f"base = ml.program_id(0) * {self.trips}", d)
    self._inner(body, d)
    for line in post:
      self.emit(line, d)

  # ------------------------------------------------------------------ family: 1-D vectors
  def k_vec(self):
    r = self.r
    dt = r.choice([F32, F32, F16, BF16, I32, I8, BOOL])
    n = self._vec_len(dt)
    mode = r.choice(["bcast", "bcast", "acc", "slice", "copyback", "store"] if dt != BOOL else
                    ["bcast", "acc", "copyback"])
    self.tags |= {"vec", mode, dt}
    v, va = self.input((self.B * n,), dt)
    vf = va.astype(np.float32)
    self.emit(f"v_s = ml.smem(({n},), jnp.{dt})")
    if mode == "bcast":
      c = r.choice([16, 32, 64])
      xd = r.choice([F16, F32])
      x, xa = self.input((self.B * n, c), xd)
      o = self.output((xa.astype(np.float32) * vf[:, None]).astype(np.float32))
      self.emit(f"x_s = ml.smem(({n}, {c}), jnp.{xd})")

      body = [f"ml.copy({x}.at[ml.ds(BLK * {n}, {n})], x_s)",
              f"ml.copy({v}.at[ml.ds(BLK * {n}, {n})], v_s)",
              f"{o}[ml.ds(BLK * {n}, {n}), :] = x_s[...].astype(jnp.float32) * v_s[...].astype(jnp.float32)"
                  f"[:, None]"]
      self._loop(body)
    elif mode == "acc":
      per = vf.reshape(self.G, self.outer, self.trips, n).sum(2).reshape(self.G * self.outer, n)
      o = self.output(per * (2 if self.twice else 1))
      self.tags.add("dot")      # (sums: mem_fuzz's tolerance of sums)

      body = [f"ml.copy({v}.at[ml.ds(BLK * {n}, {n})], v_s)",
              "acc = acc + v_s[...].astype(jnp.float32)"]
      if self.outer > 1:
        self.emit(f"for t in ml.range({self.outer}):")
        self.emit(f"base = (ml.program_id(0) * {self.outer} + t) * {self.trips}", 2)
        self.emit(f"acc = ml.zeros(({n},), jnp.float32)", 2)
        self._inner(body, 2)
        self.emit(f"{o}[ml.program_id(0) * {self.outer} + t, :] = acc", 2)
      else:
        self.emit(f"base = ml.program_id(0) * {self.trips}")
        self.emit(f"acc = ml.zeros(({n},), jnp.float32)")
        self._inner(body, 1)
        self.emit(f"{o}[ml.program_id(0), :] = acc")
    elif mode == "slice":
      a = r.randrange(0, n - 7, 8)
      h = r.randrange(8, n - a + 1, 8)
      ref = vf.reshape(self.B, n)[:, a:a + h].reshape(-1) * 2
      o = self.output(ref.astype(np.float32))

      body = [f"ml.copy({v}.at[ml.ds(BLK * {n}, {n})], v_s)",
              f"{o}[ml.ds(BLK * {h}, {h})] = v_s[...][{a}:{a + h}].astype(jnp.float32) * 2"]
      self._loop(body)
    elif mode == "copyback":
      o = self.output(va.copy())

      body = [f"ml.copy({v}.at[ml.ds(BLK * {n}, {n})], v_s)",
              f"ml.copy(v_s, {o}.at[ml.ds(BLK * {n}, {n})])"]
      self._loop(body)
    else:        # a store buffer of odd bytes, multi-buffered (padded) beside the loaded vector
      o = self.output((vf * 2 + 1).astype(np.float32))
      self.emit(f"w_s = ml.smem(({n},), jnp.float32)")

      body = [f"ml.copy({v}.at[ml.ds(BLK * {n}, {n})], v_s)",
              "w_s[...] = v_s[...].astype(jnp.float32) * 2 + 1",
              f"ml.copy(w_s, {o}.at[ml.ds(BLK * {n}, {n})])"]
      self._loop(body)

  def _inner(self, body, d):
    ws = ", warp_specialize=True" if self.ws else ""
    for _ in range(2 if self.twice else 1):
      self.loop_line = len(self.lines) + 1
      self.emit(f"for j in ml.range({self.trips}, stages={self.stages}{ws}):", d)
      for line in body:
        self.emit(line.replace("BLK", "(base + j)"), d + 1)

  # ------------------------------------------------------------------ family: 2-D tiles of odd bytes
  def k_tile(self):
    r = self.r
    dt = r.choice([F32, F32, F16, BF16, I32, I8])
    unit = 16 // ISZ[dt]
    rows = r.randint(1, 9)
    mode = r.choice(["rowsum", "rowsum", "copyback", "T", "halo"] if rows >= 3 else ["rowsum", "copyback", "T"])
    # (a row sum needs columns a multiple of 32, a lane each: MG204)
    cols = r.choice([32, 64] if mode == "rowsum" else [unit * k for k in range(1, 9)])
    self.tags |= {"tile", mode, dt}
    x, xa = self.input((self.B * rows, cols), dt)
    xf = xa.astype(np.float32)
    self.emit(f"t_s = ml.smem(({rows}, {cols}), jnp.{dt})")
    if mode == "rowsum":
      o = self.output(xf.sum(1).astype(np.float32))
      self.tags.add("dot")

      body = [f"ml.copy({x}.at[ml.ds(BLK * {rows}, {rows})], t_s)",
              f"{o}[ml.ds(BLK * {rows}, {rows})] = ml.sum(t_s[...].astype(jnp.float32), axis=1)"]
    elif mode == "copyback":
      o = self.output(xa.copy())

      body = [f"ml.copy({x}.at[ml.ds(BLK * {rows}, {rows})], t_s)",
              f"ml.copy(t_s, {o}.at[ml.ds(BLK * {rows}, {rows})])"]
    elif mode == "T":
      ref = xf.reshape(self.B, rows, cols).transpose(0, 2, 1).reshape(self.B * cols, rows)
      o = self.output(ref.astype(np.float32))

      body = [f"ml.copy({x}.at[ml.ds(BLK * {rows}, {rows})], t_s)",
              f"{o}[ml.ds(BLK * {cols}, {cols}), :] = t_s.T[...].astype(jnp.float32)"]
    else:
      blocks = xf.reshape(self.B, rows, cols)
      ref = (blocks[:, :rows - 2] + blocks[:, 2:]).reshape(self.B * (rows - 2), cols)
      o = self.output(ref.astype(np.float32))

      body = [f"ml.copy({x}.at[ml.ds(BLK * {rows}, {rows})], t_s)",
              f"{o}[ml.ds(BLK * {rows - 2}, {rows - 2}), :] = (t_s.at[0:{rows - 2}][...].astype(jnp.float32)"
                  f" + t_s.at[2:{rows}][...].astype(jnp.float32))"]
    self._loop(body)

  # ------------------------------------------------------------------ family: loads into static windows
  def k_win(self):
    r = self.r
    dt = r.choice([F32, F16, BF16, I32, I8])
    first = 128 // ISZ[dt] * r.randint(1, 2)         # the first window: whole 128 bytes, so the second aligns
    second = self._vec_len(dt, 8, 96)
    n = first + second
    self.tags |= {"win", dt}
    a, aa = self.input((self.B * first,), dt)
    b, ba = self.input((self.B * second,), dt)
    ref = np.concatenate([aa.reshape(self.B, first), ba.reshape(self.B, second)], 1).astype(np.float32) * 2
    o = self.output(ref.reshape(-1))
    self.emit(f"t_s = ml.smem(({n},), jnp.{dt})")

    body = [f"ml.copy({a}.at[ml.ds(BLK * {first}, {first})], t_s.at[0:{first}])",
            f"ml.copy({b}.at[ml.ds(BLK * {second}, {second})], t_s.at[{first}:{n}])",
            f"{o}[ml.ds(BLK * {n}, {n})] = t_s[...].astype(jnp.float32) * 2"]
    self._loop(body)

  # ------------------------------------------------------------------ family: dots of a padded A
  def k_dot(self):
    """ml.dot of an A tile of 1..9 rows (its stage padded to 128 bytes; the dot pads its rows to 64) a trip and a
    B loaded once before the loop (as is, or stored (n, k) and passed transposed); A read from SMEM or registers."""
    r = self.r
    dt = r.choice([F16, BF16])
    m, k, n = r.randint(1, 9), r.choice([16, 32, 64]), r.choice([16, 64, 128])
    way = r.choice(["smem", "regs", "bT"])
    self.tags |= {"dot", way, dt}
    a, aa = self.input((self.B * m, k), dt)
    b, ba = self.input((n, k) if way == "bT" else (k, n), dt)
    bm = (ba.T if way == "bT" else ba).astype(np.float32)
    scale = 2 if way == "regs" else 1
    o = self.output((aa.astype(np.float32) * scale) @ bm)
    self.emit(f"a_s = ml.smem(({m}, {k}), jnp.{dt})")
    self.emit(f"b_s = ml.smem({(n, k) if way == 'bT' else (k, n)}, jnp.{dt})")
    bexpr = "b_s.T" if way == "bT" else "b_s"
    aexpr = "a_s[...] * 2" if way == "regs" else "a_s"

    body = [f"ml.copy({a}.at[ml.ds(BLK * {m}, {m})], a_s)",
            f"{o}[ml.ds(BLK * {m}, {m}), :] = ml.dot({aexpr}, {bexpr})"]
    self._loop(body, pre=[f"ml.copy({b}, b_s)"])

  # ------------------------------------------------------------------ family: store buffers under SMEM pressure
  def k_store(self):
    r = self.r
    overflow = r.random() < OVERFLOW_SHARE
    for _ in range(200):
      din = r.choice([F16, BF16, F32, I8])
      dout = r.choice([F32, F32, F16, I32]) if din != I8 else r.choice([I32, F32])
      cols = r.choice([128, 256])
      rows = r.choice([32, 64, 96, 128, 192, 256])
      S = self.stages
      load, store = rows * cols * ISZ[din], rows * cols * ISZ[dout]
      # (two loops over one buffer inside a persistent loop each take their own stages, both live across it:
      # frontend/pipeline.py's copy of a buffer two loops load)
      loads = 2 if self.twice and self.outer > 1 else 1
      multi, single = loads * S * _kib(load) + S * _kib(store), loads * S * _kib(load) + _kib(store)
      # (away from the edge: 4 KiB of barriers and alignment)
      if overflow and single > SMEM_LIMIT + 4096 or not overflow and multi > SMEM_LIMIT + 4096 and \
          single + 4096 < SMEM_LIMIT:
        break
    else:
      overflow, rows, cols, din, dout = False, 64, 256, F16, F32
    self.block = 256 if rows * cols > 16384 or rows >= 128 and r.random() < 0.5 else None
    self.tags |= {"store", din + "->" + dout, "overflow" if overflow else "one-copy"}
    x, xa = self.input((self.B * rows, cols), din)
    xf = xa.astype(np.float32)
    if dout in (I32,):
      ref = (xf * 2 + 1).astype(np.int32) if din == I8 else (xf * 2 + 1).astype(np.float32).astype(np.int32)
      expr = "(x_s[...].astype(jnp.float32) * 2 + 1).astype(jnp.int32)" if din != I8 else \
          "x_s[...].astype(jnp.int32) * 2 + 1"
    else:
      ref = (xf * 2 + 1).astype(_np(dout))
      expr = f"(x_s[...].astype(jnp.float32) * 2 + 1).astype(jnp.{dout})"
    o = self.output(ref)
    alloc = len(self.lines) + 1
    self.emit(f"x_s = ml.smem(({rows}, {cols}), jnp.{din})")
    self.emit(f"o_s = ml.smem(({rows}, {cols}), jnp.{dout})")

    body = [f"ml.copy({x}.at[ml.ds(BLK * {rows}, {rows})], x_s)",
            f"o_s[...] = {expr}",
            f"ml.copy(o_s, {o}.at[ml.ds(BLK * {rows}, {rows})])"]
    self._loop(body)
    if overflow:
      self.illegal = ("SmemCapacityError", {alloc, alloc + 1, self.loop_line})

  # ------------------------------------------------------------------ source
  def line_of(self, k):
    """The source line number of the kernel's k-th line (1-based)."""
    return self.source.splitlines().index(self.lines[k - 1]) + 1 if k else 0


def _at_stages(gen, n):
  """(class, detail) of `gen`'s kernel with `stages=n`, as a legal plan."""
  fixed = copy.copy(gen)
  fixed.lines = [ln.replace(f"stages={gen.stages}", f"stages={n}") for ln in gen.lines]
  fixed.illegal = None
  return diff_fuzz.run(fixed, build=False, compare=lambda g, w, dot=False: mem_fuzz.compare(g, w, dot))


def _suggestion(gen, e):
  """None where the stage count MG402's hint names (`use stages=2`; `use for ...`, unpipelined, is 1) is the largest
  that fits: the kernel at that count computes the plan's reference, one more stage (below the count written) is
  MG402 again; else ("wrong", what the kernel did)."""
  import re
  m = re.match(r"use (?:stages=(\d+)|for )", e.hint or "")
  if m is None:
    return None
  n = int(m.group(1) or 1)
  if n >= 2:
    cls, detail = _at_stages(gen, n)
    if cls != "ok":
      return "wrong", f"MG402's hint names stages={n}: {cls} {detail}"
  if n + 1 < gen.stages and _at_stages(gen, n + 1)[0] == "ok":
    return "wrong", f"MG402's hint names stages={n}, but stages={n + 1} compiles and computes"
  return None


def run(gen, *, build=True, interpret=True):
  """(class, detail) of `gen`'s kernel (see the module's docstring)."""
  import mgpu_dsl as mg
  if gen.illegal:
    want, where = gen.illegal
    lines = {gen.line_of(k) for k in where}
    try:
      diff_fuzz.load(gen)(*gen.args, interpret=True)
    except mg.KernelError as e:
      if isinstance(e, mg.InternalError):
        return "crash", f"InternalError: {e}"
      errs = getattr(e, "errors", [e])
      if any(type(x).__name__ == want and x.lineno in lines and x.hint for x in errs):
        return _suggestion(gen, e) or ("refused", f"{getattr(e, 'code', '?')} {str(e).splitlines()[0][:200]}")
      return "wrong", f"expected {want} at a line of {sorted(lines)} with a hint, got " \
          f"{[(type(x).__name__, x.lineno) for x in errs]}: {str(e).splitlines()[0][:200]}"
    except Exception as e:  # noqa: BLE001
      return "crash", diff_fuzz.describe_exception(e)
    return "wrong", f"expected {want} at a line of {sorted(lines)}, the kernel ran"
  return diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: mem_fuzz.compare(g, w, dot))


if __name__ == "__main__":
  lo, hi, every = (list(map(int, sys.argv[1:4])) + [1])[:3]      # export one seed in `every`
  for g in map(Gen, range(lo, hi)):
    cls, detail = run(g, build=(g.seed % every == 0))
    print(f"SEED {g.seed} {cls} {g.family} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
