"""Probe 63b's grid fuzzer (tests/grid_fuzz.py): its `overlap` family, kernels whose programs' plain writes (or
reads of what other programs write) the compiler's grid proofs must refuse, beside look-alikes they must accept.

Each plan sets `self.race`: "race" (two programs write an element, or one reads what another writes, with nothing
ordering them: MG951), "uncovered" (an element no program writes: MG602), both, or None (disjoint and covering:
the kernel must run and match its reference).
"""
from __future__ import annotations

import numpy as np

F32, F16, I32 = "float32", "float16", "int32"


def _cdiv(a, b):
  return -(-a // b)


class RaceFamilies:
  """The `overlap` family of tests/grid_fuzz.py's Gen (its tiles, loads and stores are Gen's)."""

  # ------------------------------------------------------------------ family: overlapping plain writes
  def k_overlap(self):
    r = self.r
    bm, bn, M, N, dt = self.sizes()
    if M <= bm:                  # (two tile rows at least: else most plans' windows are disjoint)
      M += bm * r.randint(1, 2)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    if r.random() < 0.4:
      return self.overlap_forms(r.choice(["cond", "cond_ok", "wrap", "mixed", "mixed_self", "noflag", "nolock",
                                          "pidle"]))
    x, xv = self.input((M, N), dt, -4, 4, half=dt != I32)
    form = r.choice(["stride", "idle", "step", "split", "control", "stride_masked"])
    self.tags.add("overlap:" + form)
    writes = []        # per program: (rows, cols) ranges it writes
    if form == "stride":
      st = r.choice([bm // 2, max(1, bm - 8)]) if bm > 1 else 1
      nt = max(1, _cdiv(M - bm, st) + 1) if M > bm else 1
      self.grid = (nt, gn)
      self.emit("a = ml.program_id(0)")
      self.emit("j = ml.program_id(1)")
      r0, c0 = f"a * {st}", f"j * {bn}"
      writes = [(a * st, b * bn) for a in range(nt) for b in range(gn)]
      ind = 0
    elif form == "stride_masked":     # overlapping windows, each program's mask keeping its own rows: disjoint
      st = r.choice([bm // 2, max(1, bm - 8)]) if bm > 1 else 1
      st = max(st, 1)
      nt = _cdiv(M, st) + r.randint(-1, 0)
      self.grid = (max(nt, 1), gn)
      self.emit("a = ml.program_id(0)")
      self.emit("j = ml.program_id(1)")
      self.emit(f"cc = j * {bn} + ml.arange({bn})")
      self.emit(f"rr = a * {st} + ml.arange({bm})")
      self.emit(f"keep = (rr < ml.minimum((a + 1) * {st}, {M}))[:, None] & (cc < {N})[None, :]")
      writes = [(a * st, b * bn, st) for a in range(self.grid[0]) for b in range(gn)]
      r0, c0, ind = f"a * {st}", f"j * {bn}", 0
      self.store_masks = "keep"
    elif form == "idle":
      extra = r.choice([2, 3])
      self.grid = (gm, gn, extra) if r.random() < 0.5 else (gm * gn, extra)
      if len(self.grid) == 3:
        self.emit("i, j = ml.program_id(0), ml.program_id(1)")
      else:
        self.emit("t = ml.program_id(0)")
        self.emit(f"i, j = t // {gn}, t % {gn}")
      writes = [(a * bm, b * bn) for a in range(gm) for b in range(gn) for _ in range(extra)]
      r0, c0, ind = f"i * {bm}", f"j * {bn}", 0
    elif form == "step":
      P = r.choice([2, 3])
      self.grid = (P,)
      T = gm * gn
      step = r.choice(["", ", 1", f", {P - 1}"]) if P > 2 else r.choice(["", ", 1"])
      self.emit(f"for t in range(ml.program_id(0), {T}{step}):")
      self.emit(f"  i, j = t // {gn}, t % {gn}")
      s = int(step[2:]) if step else 1
      writes = [((t // gn) * bm, (t % gn) * bn) for p in range(P) for t in range(p, T, s)]
      r0, c0, ind = f"i * {bm}", f"j * {bn}", 1
    else:
      self.grid = (gm * gn,)
      self.emit("t = ml.program_id(0)")
      if form == "split":
        self.emit(f"i, j = t % {gm}, t % {gn}")
        writes = [((t % gm) * bm, (t % gn) * bn) for t in range(gm * gn)]
      else:
        self.emit(f"i, j = t // {gn}, t % {gn}")
        writes = [((t // gn) * bm, (t % gn) * bn) for t in range(gm * gn)]
      r0, c0, ind = f"i * {bm}", f"j * {bn}", 0
    count = np.zeros((M, N), np.int64)
    for w in writes:
      a, b = w[:2]
      count[a:a + (w[2] if len(w) > 2 else bm), b:b + bn] += 1
    self.race = "+".join(w for w, on in [("race", count.max() > 1), ("uncovered", count.min() == 0)] if on) or None
    self.tags.add("expect:" + (self.race or "ok"))
    self.load_tile(x, dt, bm, bn, M, N, r0, c0, "", ind, mode=r.choice(["tma", "mask", "ptr"]))
    k, f = self.math(dt)
    self.emit("  " * ind + f"y = {k.format(v='v')}")
    o = self.out(f(xv), dt)
    if getattr(self, "store_masks", None):
      self.emit(f"{o}.at[ml.ds({r0}, {bm}), ml.ds({c0}, {bn})].store(y, mask=keep)" if r.random() < 0.5 else
                f"ml.store({o}.at[rr[:, None], cc[None, :]], y, mask=keep)")
    else:
      self.store_tile(o, "y", dt, bm, bn, M, N, r0, c0, "", ind, modes=["tma", "mask", "ptr"])
    self.smem_lines()

  def overlap_forms(self, form):
    """Plans of one shape each: a conditional second write (by another program: a race; by the same one: none),
    rows rotated through a pointer scatter (a permutation: legal), a plain write among atomics, a partner's row read
    with no flag, a read-modify-write with no lock, a persistent loop on a grid with an idle axis."""
    r = self.r
    self.tags.add("overlap:" + form)
    bm = r.choice([8, 16, 32, 64, 128])
    bn = r.choice([32, 64, 128])
    dt = r.choice([F32, F16, I32])
    gm, gn = r.randint(2, 4), r.randint(1, 2)
    M, N = gm * bm, gn * bn
    x, xv = self.input((M, N), dt, -4, 4, half=dt != I32)
    k, f = self.math(dt)
    y = f(xv)
    T = gm * gn
    e = self.emit
    self.race = "race"
    tile = lambda i, j: f"ml.ds({i} * {bm}, {bm}), ml.ds({j} * {bn}, {bn})"  # noqa: E731
    if form in ("cond", "cond_ok", "mixed", "mixed_self", "wrap"):
      self.grid = (T,)
      e("t = ml.program_id(0)")
      e(f"i, j = t // {gn}, t % {gn}")
      self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", 0, mode=r.choice(["tma", "mask", "win"]))
      e(f"y = {k.format(v='v')}")
    if form == "cond":            # the last program also writes program 0's tile
      o = self.out(y, dt)
      e(f"{o}.at[{tile('i', 'j')}][...] = y")
      e(f"if t == {T - 1}:")
      e(f"  {o}.at[{tile(0, 0)}][...] = y")
    elif form == "cond_ok":       # program 0 writes its own tile twice: no other program's
      o = self.out(y, dt)
      self.race = None
      e(f"{o}.at[{tile('i', 'j')}][...] = y")
      e("if t == 0:")
      e(f"  {o}.at[{tile(0, 0)}][...] = y")
    elif form == "wrap":          # rows rotated by `sh` modulo M: every element written once
      sh = r.randint(1, M - 1)
      self.race = None
      o = self.out(np.roll(y, sh, axis=0), dt)
      e(f"rs = (i * {bm} + ml.arange({bm}) + {sh}) % {M}")
      e(f"cs = j * {bn} + ml.arange({bn})")
      e(f"ml.store({o}.at[rs[:, None], cs[None, :]], y)")
    elif form in ("mixed", "mixed_self"):   # a program zeroes a tile another program adds into (Triton's
      owner = gn                              # habit: a race), or the tile it adds into itself (no other's)
      if form == "mixed":
        zeroer = r.choice([t for t in range(T) if t != owner])
      else:
        zeroer, self.race = owner, None
        y = y.copy()
        y[bm:2 * bm, :bn] = 0
      o = self.out(y, dt)
      e(f"ml.atomic_add({o}.at[{tile('i', 'j')}], y)")
      e(f"if t == {zeroer}:")
      e(f"  {o}.at[{tile(1, 0)}][...] = ml.zeros(({bm}, {bn}), jnp.{dt})")
    elif form in ("noflag", "nolock"):
      P = 2 * r.randint(1, 3)
      M = P * bm
      x, xv = self.input((M, bn), dt, -4, 4, half=dt != I32)
      self.grid = (P,)
      tdt = I32 if dt == I32 else F32
      e("p = ml.program_id(0)")
      self.load_tile(x, dt, bm, bn, M, bn, f"p * {bm}", "0", "", 0, mode=r.choice(["tma", "mask"]))
      e(f"part = ml.sum(v{'' if dt == I32 else '.astype(jnp.float32)'}, axis=0)")
      parts = xv.reshape(P, bm, bn).sum(axis=1)
      if form == "noflag":
        ws = self.out(parts, tdt)
        o = self.out(parts[0::2] + parts[1::2], tdt)
        e(f"{ws}.at[p, :][...] = part")
        e("if p % 2 == 0:")
        e(f"  {o}.at[p // 2, :][...] = part + {ws}.at[p + 1, :][...]")
      else:                      # (a read of what the partner writes, before this program's own write: MG601)
        self.race = "read"
        o = self.out(parts.reshape(P // 2, 2, bn).sum(axis=1), tdt)
        e("g = p // 2")
        e("if p % 2 == 1:")
        e(f"  part += {o}.at[g, :][...]")
        e(f"{o}.at[g, :][...] = part")
    else:                          # pidle: a persistent loop on (P, 2) programs, axis 1 idle
      P = r.randint(1, 3)
      self.grid = (P, 2)
      e(f"for t in range(ml.program_id(0), {T}, ml.num_programs(0)):")
      e(f"  i, j = t // {gn}, t % {gn}")
      self.load_tile(x, dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", 1, mode=r.choice(["tma", "mask"]))
      e(f"  y = {k.format(v='v')}")
      o = self.out(y, dt)
      self.store_tile(o, "y", dt, bm, bn, M, N, f"i * {bm}", f"j * {bn}", "", 1, modes=["tma", "mask", "win"])
    self.tags.add("expect:" + (self.race or "ok"))
    self.smem_lines()
