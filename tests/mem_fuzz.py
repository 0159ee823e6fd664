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

F32, F16, BF16, I32, I8 = "float32", "float16", "bfloat16", "int32", "int8"
U8, I16, BOOL, F8 = "uint8", "int16", "bool", "float8_e4m3fn"
INTS = (I32, I8, U8, I16)
ISZ = {F32: 4, F16: 2, BF16: 2, I32: 4, I8: 1, U8: 1, I16: 2, BOOL: 1, F8: 1}
ILLEGAL_SHARE = 0.07


def math_prod(xs):
  out = 1
  for v in xs:
    out *= v
  return out


def _np(dt):
  return np.dtype(jnp.dtype(dt))


def _cdiv(a, b):
  return -(-a // b)


# Elementwise ops of a tile: kernel form and its reference on float32 (or the integer dtype), rounded to the
# tile's dtype after each op as the kernel rounds.
FOPS = [("{v} * 2.0", lambda a: a * 2), ("{v} + 1.0", lambda a: a + 1), ("-{v}", lambda a: -a),
        ("jnp.maximum({v}, 0.0)", lambda a: np.maximum(a, 0)), ("ml.abs({v})", np.abs),
        ("{v} * 0.5 - 0.25", None)]
IOPS = [("{v} * 2", lambda a: a * 2), ("{v} + 3", lambda a: a + 3), ("-{v}", lambda a: -a),
        ("jnp.maximum({v}, 0)", lambda a: np.maximum(a, 0)), ("{v} - 1", lambda a: a - 1)]


def _apply(op, a, dt):
  """`op`'s reference on `a` (a NumPy array of dtype dt), rounded as the kernel rounds each op."""
  form, f = op
  if f is None:       # two ops: a product, then a difference, each rounded
    return _apply(("", lambda x: x - 0.25), _apply(("", lambda x: x * 0.5), a, dt), dt)
  if dt in INTS:
    with np.errstate(over="ignore"):
      return f(a).astype(_np(dt))
  return f(a.astype(np.float32)).astype(_np(dt))


class Gen:
  """One random memory-structured kernel (`source`, `args`, `refs`) from the plan of `seed`."""

  FAMILIES = (["tile"] * 5 + ["loop"] * 2 + ["matmul"] * 3 + ["atomic"] * 2 + ["persist"] * 2 + ["odd"] * 2
              + ["smem"] * 4 + ["pipe_store"] * 3 + ["prefetch"] * 2 + ["vec"] * 2 + ["views"] * 4)

  def __init__(self, seed, family=None, illegal=None):
    self.seed = seed
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.ins = []          # (name, array)
    self.outs = []         # (name, NumPy reference)
    self.lines = []
    self.grid = (1,)
    self.block = None
    self.tags = set()
    self.illegal = None    # (error class name, source line) of a deliberate mistake
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

  # ------------------------------------------------------------------ family: tiles through SMEM and registers
  def k_tile(self):
    r = self.r
    dt = self._dt((F32, F32, F16, BF16, I32, I8, U8, I16, BOOL, F8))
    isint = dt in INTS
    out_dt = r.choice([dt, dt, F32]) if dt not in (BOOL, F8) else F32
    transposed = r.random() < 0.2
    bm, bn = self._tile(dt)
    if transposed:
      while (bm * ISZ[out_dt]) % 16:
        bm, bn = self._tile(dt)
    M = r.randint(1, 3 * bm)
    N = self._cols(dt, bn, (out_dt,))
    if transposed:
      M = _cdiv(M, 16) * 16
    batch = r.choice([0, 0, 0, 2, 3])
    load = r.choice(["tma", "tma", "mask", "ptr", "ptr_var"])
    shift = r.choice([None, None, None, "static", "runtime"])
    store = r.choice(["tma", "tma", "mask", "ptr"]) if not transposed else "tma"
    swap = r.random() < 0.2 and bm >= 16
    via_smem = r.random() < 0.25
    stat = r.random() < 0.3
    ops = [r.choice(IOPS if isint else FOPS) for _ in range(r.randint(0, 3))] if dt not in (BOOL, F8) else []
    self.tags |= {f"load:{load}", f"store:{store}", f"dt:{dt}"} | ({"transposed"} if transposed else set()) | (
        {f"shift:{shift}"} if shift else set()) | ({"batch"} if batch else set()) | ({"swap"} if swap else set())

    xshape = ((batch,) if batch else ()) + (M, N)
    x, xa = self.input(xshape, dt)
    s = cs = 0
    if shift == "static" and M > 1:      # (a shift of M or more reads nothing: MG203 by design)
      s = r.randint(1, min(bm, M - 1))
    elif shift == "static":
      shift = None
    elif shift == "runtime":       # from before the array's start to past its end (TMA reads zeros there)
      s = r.randint(-bm - 2, M + 2)
      unit = 16 // ISZ[dt]       # (a run-time column start is a multiple of 16 bytes, promised: MG401 else)
      cs = r.randint(-1, _cdiv(N, unit)) * unit if load == "tma" and r.random() < 0.4 else 0
      sh, _ = self.input((2,), I32)
      self.ins[-1] = (sh, np.array([s, cs], np.int32))
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    axes = [0, 1] if r.random() < 0.7 else [1, 0]       # which program_id axis walks the rows
    grid = [0, 0]
    grid[axes[0]], grid[axes[1]] = gm, gn
    self.grid = tuple(grid) + ((batch,) if batch else ())

    # reference: each tile of the zero-padded input, as the kernel computes it
    P, PC = bm + 2, bn + 8         # (the padding before the array's start)
    xp = np.zeros(((batch or 1), P + gm * bm + max(s, 0) + bm, PC + gn * bn + max(cs, 0) + bn), _np(dt))
    xp[:, P:P + M, PC:PC + N] = xa.reshape((batch or 1), M, N)
    out = np.zeros(((batch or 1), gm * bm, gn * bn) if not transposed else ((batch or 1), gn * bn, gm * bm), _np(out_dt))
    stats = np.zeros(((batch or 1), gm, gn), np.float32)
    for b in range(batch or 1):
      for i in range(gm):
        for j in range(gn):
          t = xp[b, P + i * bm + s:P + i * bm + s + bm, PC + j * bn + cs:PC + (j + 1) * bn + cs]
          for op in ops:
            t = _apply(op, t, dt)
          rin = (np.arange(bm) + i * bm + s >= 0) & (np.arange(bm) + i * bm + s < M)
          cin = (np.arange(bn) + j * bn + cs >= 0) & (np.arange(bn) + j * bn + cs < N)
          stats[b, i, j] = np.where(rin[:, None] & cin[None, :], t.astype(np.float32).astype(_np(out_dt)).astype(np.float32), 0).sum()
          if swap:
            t = np.concatenate([t[bm // 2:], t[:bm // 2]])
          t = t.astype(np.float32).astype(_np(out_dt)) if out_dt != dt else t
          if transposed:
            out[b, j * bn:(j + 1) * bn, i * bm:(i + 1) * bm] = t.T
          else:
            out[b, i * bm:(i + 1) * bm, j * bn:(j + 1) * bn] = t
    oshape = (N, M) if transposed else (M, N)
    oref = out[:, :oshape[0], :oshape[1]].reshape(((batch,) if batch else ()) + oshape)
    o = self.output(oref)
    if stat:
      so = self.output(stats.reshape(((batch,) if batch else ()) + (gm, gn)))
      self.tags |= {"stat", "dot"}     # (a float32 sum of many elements: the looser tolerance)

    # kernel
    pb = "b, " if batch else ""
    self.emit(f"i = ml.program_id({axes[0]})")
    self.emit(f"j = ml.program_id({axes[1]})")
    if batch:
      self.emit("b = ml.program_id(2)")
    start = "i * %d" % bm
    if shift == "static":
      start += f" + {s}"
    elif shift == "runtime":
      self.emit(f"s = {sh}[0]")
      start += " + s"
      if cs:
        self.emit(f"cs = ml.multiple_of({sh}[1], {unit})")
    if load != "tma" or stat or r.random() < 0.5:
      self.emit(f"rows = {start} + ml.arange({bm})")
      self.emit(f"cols = j * {bn}{' + cs' if cs else ''} + ml.arange({bn})")
    m_in = f"(rows[:, None] < {x}.shape[{1 if batch else 0}]) & (cols[None, :] < {x}.shape[{2 if batch else 1}])"
    if shift == "runtime":
      m_in = "(rows[:, None] >= 0) & " + m_in + (" & (cols[None, :] >= 0)" if cs else "")
    if load == "tma":
      ddt = f", jnp.{dt}" if r.random() < 0.5 else ""
      self.emit(f"xs = ml.smem(({bm}, {bn}){ddt})")
      self.emit(f"ml.copy({x}.at[{pb}ml.ds({start}, {bm}), ml.ds(j * {bn}{' + cs' if cs else ''}, {bn})], xs)")
      if r.random() < 0.3 and bm >= 16:       # read in two static row windows
        h = bm // 2
        self.emit(f"v = jnp.concatenate([xs.at[0:{h}][...], xs.at[{h}:{bm}][...]], axis=0)")
        self.tags.add("smem_halves")
      else:
        self.emit("v = xs[...]")
    elif load == "mask":
      self.emit(f"v = {x}.at[{pb}ml.ds({start}, {bm}), ml.ds(j * {bn}, {bn})].load(mask={m_in}, other=0)")
    elif load == "ptr":
      self.emit(f"v = ml.load({x}.at[{pb}rows[:, None], cols[None, :]], mask={m_in}, other=0)")
    else:
      self.emit(f"p = {x}.at[{pb}rows[:, None], cols[None, :]]")
      self.emit(f"v = p.load(mask={m_in}, other=0)")
    for op in ops:
      self.emit(f"v = {op[0].format(v='v')}")
    if stat:      # the sum of the tile's elements inside x (the padding read past its end left out, MG953)
      self.emit(f"{so}[{pb}i, j] = ml.sum(ml.where({m_in}, v.astype(jnp.{out_dt}).astype(jnp.float32), 0.0))")
    if via_smem:
      self.emit(f"ys = ml.smem(({bm}, {bn}))")
      self.emit("ys[...] = v")
      self.emit("v = ys[...]")
      self.tags.add("via_smem")
    if swap:
      h = bm // 2
      self.emit(f"ws = ml.smem(({bm}, {bn}))")
      if r.random() < 0.5:
        self.emit(f"ws.at[0:{h}][...] = v[{h}:]")
        self.emit(f"ws.at[{h}:{bm}][...] = v[:{h}]")
      else:
        self.emit(f"ws[0:{h}, :] = v[{h}:{bm}, :]")
        self.emit(f"ws[{h}:, :] = v[0:{h}, :]")
      self.emit("v = ws[...]")
    if out_dt != dt:
      self.emit(f"v = v.astype(jnp.{out_dt})")
    ostart_r, ostart_c = f"i * {bm}", f"j * {bn}"
    if transposed:
      self.emit(f"os = ml.smem(({bn}, {bm}))")
      if r.random() < 0.5:
        self.emit("os[...] = v.T")
      else:
        self.emit("os.T[...] = v")
        self.tags.add("smem.T")
      self.emit(f"ml.copy(os, {o}.at[{pb}ml.ds({ostart_c}, {bn}), ml.ds({ostart_r}, {bm})])")
      return
    if store == "tma":
      self.emit(f"os = ml.smem(({bm}, {bn}))")
      self.emit("os[...] = v")
      self.emit(f"ml.copy(os, {o}.at[{pb}ml.ds({ostart_r}, {bm}), ml.ds({ostart_c}, {bn})])")
      return
    self.emit(f"orow = i * {bm} + ml.arange({bm})")
    self.emit(f"ocol = j * {bn} + ml.arange({bn})")
    m_out = f"(orow[:, None] < {o}.shape[{1 if batch else 0}]) & (ocol[None, :] < {o}.shape[{2 if batch else 1}])"
    if store == "mask":
      self.emit(f"{o}.at[{pb}ml.ds({ostart_r}, {bm}), ml.ds({ostart_c}, {bn})].store(v, mask={m_out})")
    else:
      self.emit(f"ml.store({o}.at[{pb}orow[:, None], ocol[None, :]], v, mask={m_out})")

  # ------------------------------------------------------------------ family: a (pipelined) loop reducing tiles
  def k_loop(self):
    r = self.r
    dt = self._dt((F32, F16, BF16, F32))
    bm, bk = self._tile(dt, max_elems=4096)
    M = r.randint(1, 3 * bm)
    K = self._cols(dt, bk)
    nk = _cdiv(K, bk)
    kind = r.choice(["sum", "rowsum", "max"])
    loop = r.choice(["stages", "stages", "ws", "plain", "static"])
    stages = r.randint(1, 4)
    two = r.random() < 0.3
    self.tags |= {f"loop:{loop}", f"reduce:{kind}", f"dt:{dt}"} | ({"two_loads"} if two else set())
    x, xa = self.input((M, K), dt)
    if two:
      y, ya = self.input((M, K), dt)
    gm = _cdiv(M, bm)
    self.grid = (gm,)
    xp = np.zeros((gm * bm, nk * bk), np.float32)
    xp[:M, :K] = xa.astype(np.float32)
    if two:
      yp = np.zeros_like(xp)
      yp[:M, :K] = ya.astype(np.float32)
      # kernel: t = xs + ys in dt, then float32
      xp = (xp.astype(_np(dt)) + yp.astype(_np(dt))).astype(np.float32) if dt != F32 else xp + yp
    tiles = xp.reshape(gm * bm, nk, bk)
    if kind == "sum":
      ref = tiles.sum(axis=1)[:M]
      oshape = (M, bk)
    elif kind == "rowsum":
      ref = tiles.sum(axis=(1, 2))[:M]
      oshape = (M,)
    else:
      ref = tiles.max(axis=1)[:M]
      oshape = (M, bk)
    o = self.output(ref.astype(np.float32))
    self.tags.add("dot")        # (sums of many float32 terms: compare with the looser tolerance)

    self.emit("i = ml.program_id(0)")
    self.emit(f"xs = ml.smem(({bm}, {bk}))")
    if two:
      self.emit(f"ys = ml.smem(({bm}, {bk}))")
    ashape = f"({bm},)" if kind == "rowsum" else f"({bm}, {bk})"
    fill = "ml.full({s}, -float('inf'), jnp.float32)" if kind == "max" else "ml.zeros({s}, jnp.float32)"
    self.emit("acc = " + fill.format(s=ashape))
    bound = f"ml.cdiv({x}.shape[1], {bk})"
    if loop == "stages":
      head = f"for k in ml.range({bound}, stages={stages}):"
    elif loop == "ws":
      head = f"for k in ml.range({bound}, stages={max(stages, 2)}, warp_specialize=True):"
    elif loop == "plain":
      head = f"for k in range({bound}):"
    else:
      head = f"for k in ml.static_range({nk}):"
    self.emit(head)
    self.emit(f"  ml.copy({x}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})], xs)")
    if two:
      self.emit(f"  ml.copy({y}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})], ys)")
      self.emit("  t = (xs[...] + ys[...]).astype(jnp.float32)")
    else:
      self.emit("  t = xs[...].astype(jnp.float32)")
    if kind == "sum":
      self.emit("  acc = acc + t")
    elif kind == "rowsum":
      self.emit("  acc = acc + ml.sum(t, axis=1)")
    else:
      self.emit("  acc = ml.maximum(acc, t)")
    self.emit(f"rows = i * {bm} + ml.arange({bm})")
    if kind == "rowsum":
      self.emit(f"{o}.at[ml.ds(i * {bm}, {bm})].store(acc, mask=rows < {o}.shape[0])")
    else:
      self.emit(f"{o}.at[ml.ds(i * {bm}, {bm}), :].store(acc, mask=(rows < {o}.shape[0])[:, None])")
    _ = oshape

  # ------------------------------------------------------------------ family: a matmul of SMEM tiles
  def k_matmul(self):
    r = self.r
    dt = r.choice([F16, BF16])
    bm = r.choice([64, 64, 128])
    bn = r.choice([32, 64, 128, 256])
    bk = r.choice([16, 32, 64])
    bt = r.random() < 0.35            # B stored (N, K), read as b_s.T
    at = not bt and r.random() < 0.2  # A stored (K, M), read as a_s.T
    a_regs = not at and r.random() < 0.15      # A from registers: (a_s[...] * 2).astype(dt)
    b_regs = not a_regs and r.random() < 0.1   # B from registers: b_s[...]
    K = r.randint(1, 4) * 64 if r.random() < 0.7 else r.randint(1, 8) * bk      # (whole swizzle tiles: MG401)
    M = r.randint(1, 2 * bm) if not at else r.randint(1, 3) * 64
    N = r.randint(1, 4) * 64 if not bt else r.randint(1, 2 * bn)
    if bn > 64 and not bt:
      N = r.randint(1, 2) * bn
    out_dt = r.choice([F32, dt])
    loop = r.choice(["stages", "stages", "ws", "plain"])
    stages = r.randint(1, 4)
    epi = r.choice(["tma", "mask", "tma_t"] if bm * bn < 128 * 256 else ["tma", "mask"])    # (SMEM: MG402)
    bias = r.random() < 0.3
    batch = r.choice([0, 0, 0, 2])
    persist = not batch and r.random() < 0.25
    rowsum = r.random() < 0.2
    self.tags |= {"dot", f"loop:{loop}", f"epi:{epi}", f"dt:{dt}"} | {t for t, on in [
        ("bt", bt), ("at", at), ("bias", bias), ("batch", batch), ("persist", persist), ("a_regs", a_regs),
        ("b_regs", b_regs), ("rowsum", rowsum)] if on}
    pre = (batch,) if batch else ()
    a, aa = self.input(pre + ((K, M) if at else (M, K)), dt)
    b, ba = self.input(pre + ((N, K) if bt else (K, N)), dt)
    if bias:
      c, ca = self.input((N,), F32)
    A = aa.astype(np.float32)
    A = np.swapaxes(A, -1, -2) if at else A
    if a_regs:
      A = (A * 2).astype(_np(dt)).astype(np.float32)
    B = ba.astype(np.float32)
    B = np.swapaxes(B, -1, -2) if bt else B
    ref = A @ B
    if bias:
      ref = ref + ca
    ref = ref.astype(_np(out_dt))
    if epi == "tma_t":
      ref = np.swapaxes(ref, -1, -2)
    o = self.output(ref)
    if rowsum:
      rs = self.output(ref.astype(np.float32).sum(axis=-1 if epi != "tma_t" else -2))
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    P = r.randint(1, 3)
    self.grid = (P,) if persist else (gm, gn) + pre
    if bm == 128 and (bn == 256 or r.random() < 0.5):
      self.block = 256          # (a 128x256 float32 accumulator on one warpgroup spills: MG403)
      self.tags.add("block256")
    if epi == "tma" and (N * ISZ[out_dt]) % 16:
      epi = "mask"
    if epi == "tma_t" and (M * ISZ[out_dt]) % 16:
      epi = "mask"
      o_ref = np.swapaxes(self.outs[0][1], -1, -2)
      self.outs[0] = (o, o_ref)
      if rowsum:
        self.outs[1] = (rs, o_ref.astype(np.float32).sum(axis=-1))
    pb = "z, " if batch else ""
    ind = "  " if persist else ""
    if persist:
      self.emit(f"a_s = ml.smem(({bk}, {bm}))" if at else f"a_s = ml.smem(({bm}, {bk}))")
      self.emit(f"b_s = ml.smem(({bn}, {bk}))" if bt else f"b_s = ml.smem(({bk}, {bn}))")
      self.emit(f"for t in range(ml.program_id(0), {gm * gn}, ml.num_programs(0)):")
      self.emit(f"  i = t // {gn}")
      self.emit(f"  j = t % {gn}")
    else:
      self.emit("i = ml.program_id(0)")
      self.emit("j = ml.program_id(1)")
      if batch:
        self.emit("z = ml.program_id(2)")
      self.emit(f"a_s = ml.smem(({bk}, {bm}))" if at else f"a_s = ml.smem(({bm}, {bk}))")
      self.emit(f"b_s = ml.smem(({bn}, {bk}))" if bt else f"b_s = ml.smem(({bk}, {bn}))")
    e = lambda line: self.emit(ind + line)   # noqa: E731
    e(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    bound = f"ml.cdiv({a}.shape[{-2 if at else -1}], {bk})"
    if loop == "stages":
      e(f"for k in ml.range({bound}, stages={stages}):")
    elif loop == "ws":
      e(f"for k in ml.range({bound}, stages={max(2, stages)}, warp_specialize=True):")
    else:
      e(f"for k in range({bound}):")
    if at:
      e(f"  ml.copy({a}.at[{pb}ml.ds(k * {bk}, {bk}), ml.ds(i * {bm}, {bm})], a_s)")
    else:
      e(f"  ml.copy({a}.at[{pb}ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    if bt:
      e(f"  ml.copy({b}.at[{pb}ml.ds(j * {bn}, {bn}), ml.ds(k * {bk}, {bk})], b_s)")
    else:
      e(f"  ml.copy({b}.at[{pb}ml.ds(k * {bk}, {bk}), ml.ds(j * {bn}, {bn})], b_s)")
    aop = "a_s.T" if at else (f"(a_s[...] * 2).astype(jnp.{dt})" if a_regs else "a_s")
    bop = "b_s.T" if bt else ("b_s[...]" if b_regs else "b_s")
    e(f"  acc = ml.dot({aop}, {bop}, acc)")
    if bias:
      e(f"bv = ml.load({c}.at[ml.ds(j * {bn}, {bn})], mask=j * {bn} + ml.arange({bn}) < {c}.shape[0], other=0.0)")
      e("acc = acc + bv[None, :]")
    v = "acc" if out_dt == F32 else f"acc.astype(jnp.{out_dt})"
    if rowsum:
      e(f"rows = i * {bm} + ml.arange({bm})")
      e(f"cols = j * {bn} + ml.arange({bn})")
      e(f"part = ml.sum(ml.where(cols[None, :] < {N}, ({v}).astype(jnp.float32), 0.0), axis=1)")
      e(f"ml.atomic_add({rs}.at[{pb}ml.ds(i * {bm}, {bm})], part, mask=rows < {M})")
    if epi == "tma":
      e(f"c_s = ml.smem(({bm}, {bn}))")
      e(f"c_s[...] = {v}")
      e(f"ml.copy(c_s, {o}.at[{pb}ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})])")
    elif epi == "tma_t":
      e(f"c_s = ml.smem(({bn}, {bm}))")
      e(f"c_s[...] = ({v}).T")
      e(f"ml.copy(c_s, {o}.at[{pb}ml.ds(j * {bn}, {bn}), ml.ds(i * {bm}, {bm})])")
    else:
      e(f"rows = i * {bm} + ml.arange({bm})")
      e(f"cols = j * {bn} + ml.arange({bn})")
      e(f"{o}.at[{pb}ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})].store({v}, "
        f"mask=(rows[:, None] < {o}.shape[{-2}]) & (cols[None, :] < {o}.shape[-1]))")

  # ------------------------------------------------------------------ family: reductions to GMEM by atomics
  def k_atomic(self):
    r = self.r
    dt = r.choice([F32, I32])
    bm, bn = self._tile(dt, max_elems=4096)
    M = r.randint(1, 3 * bm)
    N = self._cols(dt, bn)
    kind = r.choice(["add", "add", "max", "min"]) if dt == I32 else "add"
    tma_reduce = dt == F32 and r.random() < 0.3
    x, xa = self.input((M, N), dt)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    self.grid = (gm, gn)
    self.tags |= {f"atomic:{kind}", f"dt:{dt}"} | ({"tma_reduce"} if tma_reduce else set())
    ident = {"add": 0, "max": -2 ** 31, "min": 2 ** 31 - 1}[kind]      # the padding: the reduction's identity
    xp = np.full((gm * bm, gn * bn), ident, _np(dt))
    xp[:M, :N] = xa
    red = {"add": np.sum, "max": np.max, "min": np.min}[kind]
    cols_ref = red(xp, axis=0)[:N].astype(_np(dt))
    rows_ref = red(xp, axis=1)[:M].astype(_np(dt))
    co = self.output(cols_ref)
    ro = self.output(rows_ref) if r.random() < 0.5 else None
    self.tags.add("dot")
    self.emit("i = ml.program_id(0)")
    self.emit("j = ml.program_id(1)")
    self.emit(f"rows = i * {bm} + ml.arange({bm})")
    self.emit(f"cols = j * {bn} + ml.arange({bn})")
    self.emit(f"t = {x}.at[ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})].load("
              f"mask=(rows[:, None] < {x}.shape[0]) & (cols[None, :] < {x}.shape[1]), other={ident})")
    f = {"add": "ml.sum", "max": "ml.max", "min": "ml.min"}[kind]
    self.emit(f"ml.atomic_{kind}({co}.at[ml.ds(j * {bn}, {bn})], {f}(t, axis=0), mask=cols < {co}.shape[0])")
    if ro:
      self.emit(f"ml.atomic_{kind}({ro}.at[ml.ds(i * {bm}, {bm})], {f}(t, axis=1), mask=rows < {ro}.shape[0])")
    if tma_reduce:     # the sum of the row tiles, (bm, N), by TMA's reduction
      fold = xp.reshape(gm, bm, gn * bn).sum(axis=0)[:, :N]
      fo = self.output(fold.astype(np.float32))
      self.emit(f"ts = ml.smem(({bm}, {bn}), jnp.float32)")
      self.emit("ts[...] = t")
      self.emit(f"ml.copy(ts, {fo}.at[:, ml.ds(j * {bn}, {bn})], reduce=\"add\")")

  # ------------------------------------------------------------------ family: persistent programs over tiles
  def k_persist(self):
    """A grid of P programs walking the tiles (`range(pid, tiles, num_programs)`): each trip loads a tile, writes
    the result into one SMEM buffer and stores it by TMA, so the buffer is rewritten under the last trip's store."""
    r = self.r
    dt = self._dt((F32, F16, BF16, I32))
    isint = dt == I32
    bm, bn = self._tile(dt, max_elems=4096)
    M = r.randint(1, 4 * bm)
    N = self._cols(dt, bn)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    P = r.randint(1, 3)
    ops = [r.choice(IOPS if isint else FOPS) for _ in range(r.randint(1, 2))]
    loop = r.choice(["range", "ml.range", "while"])
    order = r.choice(["row", "col"])
    self.tags |= {f"persist:{loop}", f"order:{order}", f"dt:{dt}"}
    x, xa = self.input((M, N), dt)
    xp = np.zeros((gm * bm, gn * bn), _np(dt))
    xp[:M, :N] = xa
    t = xp
    for op in ops:
      t = _apply(op, t, dt)
    o = self.output(t[:M, :N])
    self.grid = (P,)
    self.emit("pid = ml.program_id(0)")
    self.emit(f"xs = ml.smem(({bm}, {bn}))")
    self.emit(f"os = ml.smem(({bm}, {bn}))")
    n = f"ml.cdiv({x}.shape[0], {bm}) * ml.cdiv({x}.shape[1], {bn})"
    if loop == "while":
      self.emit("t = pid")
      self.emit(f"while t < {n}:")
    else:
      self.emit(f"for t in {loop}(pid, {n}, ml.num_programs(0)):")
    if order == "row":
      self.emit(f"  i = t // ml.cdiv({x}.shape[1], {bn})")
      self.emit(f"  j = t % ml.cdiv({x}.shape[1], {bn})")
    else:
      self.emit(f"  j = t // ml.cdiv({x}.shape[0], {bm})")
      self.emit(f"  i = t % ml.cdiv({x}.shape[0], {bm})")
    self.emit(f"  ml.copy({x}.at[ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})], xs)")
    self.emit("  v = xs[...]")
    for op in ops:
      self.emit(f"  v = {op[0].format(v='v')}")
    self.emit("  os[...] = v")
    self.emit(f"  ml.copy(os, {o}.at[ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})])")
    if loop == "while":
      self.emit("  t += ml.num_programs(0)")

  # ------------------------------------------------------------------ family: copies TMA cannot align
  def k_odd(self):
    """Rows not a multiple of 16 bytes apart, or a window starting off a 16-byte boundary: the copy goes through
    registers (docs/language.md, "Copies"), keeping TMA's meaning (zeros past the end, stores inside only)."""
    r = self.r
    dt = self._dt((F16, BF16, I8, F32))
    kind = r.choice(["rows", "colstart"])
    unit = 16 // ISZ[dt]
    if kind == "rows":
      while True:
        N = r.randint(2, 80)
        bm = r.choice([8, 16, 32, 64, 128])
        if N % unit and (bm * N) % 128 == 0 and bm * N <= 8192:
          break
      bn, c0 = N, 0
      W = N
    else:
      while True:
        bn = r.choice([16, 32, 64, 128])
        bm = r.choice([8, 16, 32, 64])
        if (bm * bn) % 128 == 0 and (bn * ISZ[dt]) % 16 == 0:
          break
      c0 = r.randint(1, unit * 2 - 1) if unit > 1 else r.randint(1, 3)
      W = _cdiv(bn + c0 + r.randint(0, bn), unit) * unit
    M = r.randint(1, 3 * bm)
    ops = [r.choice(IOPS if dt == I8 else FOPS) for _ in range(r.randint(0, 2))]
    store = r.choice(["mask", "tma"]) if kind == "colstart" or (bn * 4) % 16 == 0 else "mask"
    self.tags |= {f"odd:{kind}", f"dt:{dt}", f"store:{store}"}
    x, xa = self.input((M, W), dt)
    gm = _cdiv(M, bm)
    self.grid = (gm,)
    xp = np.zeros((gm * bm, W), _np(dt))
    xp[:M] = xa
    t = xp[:, c0:c0 + bn]
    for op in ops:
      t = _apply(op, t, dt)
    o = self.output(t[:M].astype(np.float32))
    self.emit("i = ml.program_id(0)")
    self.emit(f"b = ml.smem(({bm}, {bn}), {x}.dtype)")
    cs = f"ml.ds({c0}, {bn})" if kind == "colstart" else ":"
    self.emit(f"ml.copy({x}.at[ml.ds(i * {bm}, {bm}), {cs}], b)")
    self.emit("v = b[...]")
    for op in ops:
      self.emit(f"v = {op[0].format(v='v')}")
    self.emit("v = v.astype(jnp.float32)")
    if store == "tma":
      self.emit(f"os = ml.smem(({bm}, {bn}), jnp.float32)")
      self.emit("os[...] = v")
      self.emit(f"ml.copy(os, {o}.at[ml.ds(i * {bm}, {bm}), :])")
    else:
      self.emit(f"{o}.at[ml.ds(i * {bm}, {bm}), :].store(v, mask=(i * {bm} + ml.arange({bm}) < {o}.shape[0])[:, None])")

  # ------------------------------------------------------------------ family: SMEM buffers read and written in registers
  def k_smem(self):
    """A random program of register reads and writes of two SMEM buffers, A (R, C) and T (C, R), through whole
    reads, static windows of rows and columns, transposed views (`A.T[...]`, `T.T[...] = v`), run-time windows of
    rows in a loop, single elements and SMEM -> SMEM copies; a NumPy shadow of each buffer is the reference."""
    r = self.r
    dt = self._dt((F32, F16, BF16, I32))
    isint = dt == I32
    R = r.choice([8, 16, 32, 64, 128])
    C = r.choice([c for c in (16, 32, 64, 128) if R * c >= 128 and R * c <= 8192])
    x, xa = self.input((R, C), dt)
    sh = {"A": xa.copy(), "T": np.zeros((C, R), _np(dt))}
    shape = {"A": (R, C), "T": (C, R)}
    written = {"A": True, "T": False}
    self.emit(f"A = ml.smem(({R}, {C}), jnp.{dt})")
    self.emit(f"T = ml.smem(({C}, {R}), jnp.{dt})")
    self.emit(f"ml.copy({x}, A)" if r.random() < 0.7 else f"A[...] = {x}[...]")

    def rows_of(n, width):      # static windows of rows a register tile holds: (size, starts)
      sizes = [h for h in (8, 16, 32, 64) if h < n and (h * width) % 128 == 0]
      return r.choice(sizes) if sizes else None

    def op_of(v, a):
      op = r.choice(IOPS if isint else FOPS)
      return op[0].format(v=v), _apply(op, a, dt)

    for _ in range(r.randint(2, 6)):
      kind = r.choice(["whole", "rows", "cols", "trans_read", "trans_write", "loop", "elem", "copy"])
      if kind == "whole":
        k, a = op_of("A[...]", sh["A"])
        self.emit(f"A[...] = {k}")
        sh["A"] = a
      elif kind == "rows":
        h = rows_of(R, C)
        if h is None:
          continue
        s0, s1 = r.randrange(0, R - h + 1), r.randrange(0, R - h + 1)
        k, a = op_of(f"A.at[{s0}:{s0 + h}][...]", sh["A"][s0:s0 + h])
        form = r.choice(["A.at[{a}:{b}][...] = {k}", "A[{a}:{b}] = {k}", "A[{a}:{b}, :] = {k}"])
        self.emit(form.format(a=s1, b=s1 + h, k=k))
        sh["A"][s1:s1 + h] = a
        self.tags.add("smem:rows")
      elif kind == "cols":
        w = r.choice([c for c in (16, 32, 64) if c < C] or [C])
        if (w * R) % 128 or w == C:
          continue
        c0, c1 = r.randrange(0, C - w + 1, 8), r.randrange(0, C - w + 1, 8)
        k, a = op_of(f"A[:, {c0}:{c0 + w}]", sh["A"][:, c0:c0 + w])
        self.emit(f"A[:, {c1}:{c1 + w}] = {k}")
        sh["A"][:, c1:c1 + w] = a
        self.tags.add("smem:cols")
      elif kind == "trans_read":
        k, a = op_of("A.T[...]", sh["A"].T)
        self.emit(f"T[...] = {k}")
        sh["T"] = a.copy()
        written["T"] = True
        self.tags.add("smem:T_read")
      elif kind == "trans_write":
        if not written["T"]:
          continue
        k, a = op_of("T[...]", sh["T"])
        self.emit(f"A.T[...] = {k}" if r.random() < 0.5 else f"T.T[...] = ({k}).T")
        if self.lines[-1].strip().startswith("A.T"):
          sh["A"] = a.T.copy()
        else:
          sh["T"] = a.copy()
        self.tags.add("smem:T_write")
      elif kind == "loop":
        h = rows_of(R + 1, C)
        if h is None or R % h:
          continue
        add = "k" if not isint else "k * 3"
        self.emit(f"for k in range({R // h}):")
        self.emit(f"  A.at[ml.ds(k * {h}, {h})][...] = A.at[ml.ds(k * {h}, {h})][...] + {add}")
        for kk in range(R // h):
          blk = sh["A"][kk * h:(kk + 1) * h]
          sh["A"][kk * h:(kk + 1) * h] = (blk + (kk * 3 if isint else kk)).astype(_np(dt)) if isint else (
              blk.astype(np.float32) + kk).astype(_np(dt))
        self.tags.add("smem:loop")
      elif kind == "elem":
        i, j = r.randrange(R), r.randrange(C)
        val = r.choice([1, -2, 5]) if isint else r.choice([0.5, -2.0, 3.0])
        self.emit(f"A[{i}, {j}] = {val}")
        sh["A"][i, j] = val
        if r.random() < 0.5:
          i2, j2 = r.randrange(R), r.randrange(C)
          self.emit(f"A[...] = A[...] + A[{i2}, {j2}]")
          sh["A"] = (sh["A"].astype(np.float32 if not isint else np.int64) + sh["A"][i2, j2]).astype(_np(dt))
        self.tags.add("smem:elem")
      else:
        self.emit("B = ml.smem(A.shape, A.dtype)" if "B" not in sh else "")
        self.lines = [ln for ln in self.lines if ln.strip()]
        self.emit("ml.copy(A, B)")
        k, a = op_of("B[...]", sh["A"])
        self.emit(f"A[...] = {k}")
        sh["B"] = sh["A"].copy()
        sh["A"] = a
        self.tags.add("smem:copy")
    oa = self.output(sh["A"].copy())
    if r.random() < 0.5:
      self.emit(f"ml.copy(A, {oa})")
    else:
      self.emit(f"{oa}[...] = A[...]")
    if written["T"]:
      ot = self.output(sh["T"].copy())
      self.emit(f"ml.copy(T, {ot})" if r.random() < 0.5 else f"{ot}[...] = T[...]")
    _ = shape

  # ------------------------------------------------------------------ family: a pipelined loop that stores tiles
  def k_pipe_store(self):
    """Each trip loads a tile (pipelined), writes its transform into an SMEM buffer and stores it by TMA (the
    stored buffer gets `stages` copies), and adds it to an accumulator stored after the loop."""
    r = self.r
    dt = self._dt((F32, F16, BF16, I32))
    isint = dt == I32
    bm, bk = self._tile(dt, max_elems=4096)
    M = r.randint(1, 2 * bm)
    K = self._cols(dt, bk)
    nk = _cdiv(K, bk)
    loop = r.choice(["stages", "ws", "plain"])
    stages = r.randint(1, 4)
    ops = [r.choice(IOPS if isint else FOPS) for _ in range(r.randint(1, 2))]
    acc_out = r.random() < 0.5
    store = r.choice(["tma", "tma", "mask"])
    self.tags |= {f"loop:{loop}", f"dt:{dt}", f"store:{store}"} | ({"acc"} if acc_out else set())
    x, xa = self.input((M, K), dt)
    gm = _cdiv(M, bm)
    self.grid = (gm,)
    xp = np.zeros((gm * bm, nk * bk), _np(dt))
    xp[:M, :K] = xa
    t = xp
    for op in ops:
      t = _apply(op, t, dt)
    o = self.output(t[:M, :K])
    if acc_out:
      acc = t.astype(np.float64).reshape(gm * bm, nk, bk).sum(axis=1)[:M]
      ao = self.output(acc.astype(np.float32 if not isint else np.int32))
      self.tags.add("dot")
    self.emit("i = ml.program_id(0)")
    self.emit(f"xs = ml.smem(({bm}, {bk}))")
    if store == "tma":
      self.emit(f"os = ml.smem(({bm}, {bk}))")
    adt = "int32" if isint else "float32"
    if acc_out:
      self.emit(f"acc = ml.zeros(({bm}, {bk}), jnp.{adt})")
    bound = f"ml.cdiv({x}.shape[1], {bk})"
    head = {"stages": f"ml.range({bound}, stages={stages})", "plain": f"range({bound})",
            "ws": f"ml.range({bound}, stages={max(stages, 2)}, warp_specialize=True)"}[loop]
    self.emit(f"for k in {head}:")
    self.emit(f"  ml.copy({x}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})], xs)")
    self.emit("  v = xs[...]")
    for op in ops:
      self.emit(f"  v = {op[0].format(v='v')}")
    if store == "tma":
      self.emit("  os[...] = v")
      self.emit(f"  ml.copy(os, {o}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})])")
    else:
      self.emit(f"  rows = i * {bm} + ml.arange({bm})")
      self.emit(f"  cols = k * {bk} + ml.arange({bk})")
      self.emit(f"  {o}.at[ml.ds(i * {bm}, {bm}), ml.ds(k * {bk}, {bk})].store(v, "
                f"mask=(rows[:, None] < {o}.shape[0]) & (cols[None, :] < {o}.shape[1]))")
    if acc_out:
      self.emit(f"  acc = acc + v.astype(jnp.{adt})")
      self.emit(f"{ao}.at[ml.ds(i * {bm}, {bm})].store(acc, mask=(i * {bm} + ml.arange({bm}) < {ao}.shape[0])[:, None])")

  # ------------------------------------------------------------------ family: the next row's load in flight
  def k_prefetch(self):
    """A persistent loop over rows that issues the next row's load before the end of the trip (docs/language.md,
    "Loads in flight across a loop"), in chunks of a row."""
    r = self.r
    dt = self._dt((F32, F16, BF16))
    chunks = r.randint(1, 3)
    per = r.choice([128, 256])
    n = r.randint(1, 9)
    P = r.randint(1, 3)
    x, xa = self.input((n, chunks * per), dt)
    op = r.choice(FOPS)
    o = self.output(_apply(op, xa, dt))
    self.grid = (P,)
    self.tags |= {f"dt:{dt}", f"chunks:{chunks}"}
    self.emit("pid = ml.program_id(0)")
    self.emit(f"xs = ml.smem(({chunks * per},), jnp.{dt})")
    self.emit(f"first = ml.where(pid < {x}.shape[0], pid, 0)")
    for c in range(chunks):
      self.emit(f"ml.copy({x}.at[first, ml.ds({c * per}, {per})], xs.at[ml.ds({c * per}, {per})])")
    self.emit(f"for row in range(pid, {x}.shape[0], ml.num_programs(0)):")
    self.emit(f"  nxt = ml.where(row + ml.num_programs(0) < {x}.shape[0], row + ml.num_programs(0), row)")
    for c in range(chunks):
      self.emit(f"  v = xs.at[ml.ds({c * per}, {per})][...]")
      self.emit(f"  {o}.at[row, ml.ds({c * per}, {per})][...] = {op[0].format(v='v')}")
      self.emit(f"  ml.copy({x}.at[nxt, ml.ds({c * per}, {per})], xs.at[ml.ds({c * per}, {per})])")

  # ------------------------------------------------------------------ family: 1-D windows (TMA split past 256)
  def k_vec(self):
    r = self.r
    dt = self._dt((F32, F16, BF16, I32, I8))
    isint = dt in (I32, I8)
    B = r.choice([128, 256, 512, 1024])
    unit = 16 // ISZ[dt]
    L = r.randint(1, 3 * B)
    if r.random() < 0.7:
      L = _cdiv(L, unit) * unit
    ops = [r.choice(IOPS if isint else FOPS) for _ in range(r.randint(1, 2))]
    g = _cdiv(L, B)
    self.grid = (g,)
    store = r.choice(["tma", "mask"])
    self.tags |= {f"dt:{dt}", f"vec:{B}", f"store:{store}"}
    x, xa = self.input((L,), dt)
    t = xa
    for op in ops:
      t = _apply(op, t, dt)
    o = self.output(t)
    self.emit("i = ml.program_id(0)")
    self.emit(f"xs = ml.smem(({B},))")
    self.emit(f"ml.copy({x}.at[ml.ds(i * {B}, {B})], xs)")
    self.emit("v = xs[...]")
    for op in ops:
      self.emit(f"v = {op[0].format(v='v')}")
    if store == "tma":
      self.emit(f"ts = ml.smem(({B},))")
      self.emit("ts[...] = v")
      self.emit(f"ml.copy(ts, {o}.at[ml.ds(i * {B}, {B})])")
    else:
      self.emit(f"offs = i * {B} + ml.arange({B})")
      self.emit(f"ml.store({o}.at[offs], v, mask=offs < {o}.shape[0])")

  # ------------------------------------------------------------------ family: chains of views of a GMEM array
  def k_views(self):
    """`x.at[...]` composed a few times (ints, negative ints, static slices, `ml.ds` windows at program ids, plain
    slices of run-time bounds, steps), read whole into registers or copied into SMEM, stored into an output of the
    view's shape; the reference is NumPy's indexing of the same chain."""
    r = self.r
    dt = self._dt((F32, F16, BF16, I32))
    D = [r.choice([2, 3, 4]), r.choice([16, 32, 64, 128]), r.choice([32, 64, 128, 256])]
    x, xa = self.input(tuple(D), dt)
    ref = xa
    text = x
    strided = False
    programs = 1
    self.emit("p = ml.program_id(0)")
    shape = list(D)
    for _ in range(r.randint(1, 3)):
      kind = r.choice(["int", "neg", "slice", "ds", "pid", "step", "neg_slice", "ell_ds", "rev"])
      ax = r.randrange(len(shape))
      n = shape[ax]
      pre = ":, " * ax
      lead = (slice(None),) * (ref.ndim - len(shape))      # (the program axis, where `p` indexed one)
      if kind in ("int", "neg", "pid") and len(shape) > 2 and ax == 0:
        if kind == "pid" and programs == 1:
          programs, idx = n, "p"
        elif kind == "pid":
          continue
        else:
          k = r.randrange(n)
          idx = str(k - n if kind == "neg" else k)
          ref = ref[lead + (k,)]
        text += f".at[{idx}]"
        shape.pop(0)
        continue
      if kind == "slice" and n >= 16:
        a = r.randrange(0, n // 2, 8) if ax == len(shape) - 1 else r.randrange(0, n // 2)
        b = n if r.random() < 0.5 else a + (n - a) // 2 // 8 * 8 or n
        text += f".at[{pre}{a}:{b}]"
        ref = ref[lead + (slice(None),) * ax + (slice(a, b),)]
        shape[ax] = b - a
      elif kind == "ds" and n >= 16:
        w = n // 2 if ax < len(shape) - 1 or (n // 2) % 16 == 0 else n
        a = r.randrange(0, n - w + 1, 8) if ax == len(shape) - 1 else r.randrange(0, n - w + 1)
        text += f".at[{pre}ml.ds({a}, {w})]"
        ref = ref[lead + (slice(None),) * ax + (slice(a, a + w),)]
        shape[ax] = w
      elif kind == "neg_slice" and n >= 16 and (ax < len(shape) - 1 or n % 16 == 0):
        a = n // 2 if ax < len(shape) - 1 else n // 2 // 8 * 8
        text += f".at[{pre}-{a}:]"
        ref = ref[lead + (slice(None),) * ax + (slice(n - a, None),)]
        shape[ax] = a
      elif kind == "ell_ds" and shape[-1] >= 32:
        n = shape[-1]
        w = n // 2 // 16 * 16
        a = r.randrange(0, n - w + 1, 16)
        text += f".at[..., ml.ds({a}, {w})]"
        ref = ref[..., a:a + w]
        shape[-1] = w
      elif kind == "rev" and ax < len(shape) - 1:
        text += f".at[{pre}::-1]"
        ref = ref[lead + (slice(None),) * ax + (slice(None, None, -1),)]
        strided = True
      elif kind == "step" and ax < len(shape) - 1 and n >= 8 and n % 2 == 0:
        st = r.choice([0, 1])
        text += f".at[{pre}{st}::2]"
        ref = ref[lead + (slice(None),) * ax + (slice(st, None, 2),)]
        shape[ax] = n // 2
        strided = True
      else:
        continue
    if len(shape) > 2 or not shape or math_prod(shape) % 128 or shape[-1] < 8:
      self.__init__(self.seed + 7919, family="views", illegal=False)     # another plan of this family
      return
    read = "copy" if not strided and r.random() < 0.4 and (shape[-1] * ISZ[dt]) % 16 == 0 else "plain"
    self.tags |= {f"dt:{dt}", f"views:{read}"} | ({"strided"} if strided else set())
    o = self.output(ref.copy())
    self.grid = (programs,)
    dst = f"{o}.at[p]" if programs > 1 else o
    if read == "copy":
      self.emit(f"b = ml.smem({tuple(shape)}, jnp.{dt})")
      self.emit(f"ml.copy({text}, b)")
      self.emit("v = b[...]")
    else:
      self.emit(f"v = {text}[...]")
    if shape[0] >= 16 and shape[0] % 16 == 0 and (shape[0] // 2 * shape[-1]) % 128 == 0 and r.random() < 0.4:
      h = shape[0] // 2          # written in two views of rows
      self.emit(f"{dst}.at[0:{h}][...] = v[:{h}]")
      self.emit(f"{dst}.at[{h}:][...] = v[{h}:]")
      self.tags.add("views:halves")
    else:
      self.emit(f"{dst}[...] = v")

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
    src = diff_fuzz.HEADER + f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: ({specs},), grid={self.grid}{block})\n"
    src += f"def kernel({ins}, {outs}):\n"
    return src + "\n".join(self.lines) + "\n"

  @property
  def args(self):
    return [jnp.asarray(a) for _, a in self.ins]

  @property
  def refs(self):
    return [v for _, v in self.outs]


def compare(got, want, dot=False):
  """None if `got` is `want`: diff_fuzz.compare's rule, but for sums of many products (`dot`: a matmul, a loop's
  sums, atomics) a tolerance of the dtype's relative one plus 2e-4 of the largest magnitude (diff_fuzz's dot rule
  lets a matmul of 16-bit outputs be 0.5 of the scale off)."""
  if not dot or np.asarray(want).dtype.name not in diff_fuzz.FLOATS:
    return diff_fuzz.compare(got, want)
  g, w = np.asarray(got), np.asarray(want)
  if g.shape != w.shape or g.dtype != w.dtype:
    return f"shape/dtype {g.shape} {g.dtype} != {w.shape} {w.dtype}"
  g, w = g.astype(np.float64), w.astype(np.float64)
  scale = max(1.0, np.abs(w).max()) if w.size else 1.0
  bad = ~(np.abs(g - w) <= diff_fuzz.TOL[want.dtype.name] * np.abs(w) + 2e-4 * scale)    # (NaN: bad)
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
  return diff_fuzz.run(gen, build=build, compare=compare)


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  for s in range(lo, hi):
    g = Gen(s)
    cls, detail = run(g, build=(s % every == 0))
    print(f"SEED {s} {cls} {g.family} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
