"""Probe 58b's memory fuzzer (tests/mem_fuzz.py), its families of kernel plans about SMEM and ordering: SMEM buffers
read and written in registers, pipelined loops that store tiles, the next row's load in flight, 1-D windows, chains
of views of a GMEM array, and orderings the compiler keeps with waits (output read-back, in-place updates, branches
and early returns, SMEM atomics, one buffer loaded twice). A mixin of mem_fuzz.Gen, as mem_fuzz_tiles' families."""
from __future__ import annotations

import numpy as np

from mem_fuzz_tiles import BF16, F16, F32, FOPS, I32, I8, IOPS, ISZ, _apply, _cdiv, _np, math_prod


class SmemFamilies:
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
    past = L % unit and any((g - 1) * B + k >= L for k in range(0, B, 256))
    self.emit(f"ml.copy({x}.at[ml.ds(i * {B}, {B})], xs)" + ("  # illegal" if past else ""))
    if past:    # (a 256-element piece wholly past the end of an array of no whole 16-byte units faults on the GPU:
      # session 45's GPU run of this fuzzer; now an IndexOutOfBoundsError at the copy, frontend/tma_tail.py)
      self.tags.add("illegal:tma_tail")
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
    if past:
      self.illegal = ("IndexOutOfBoundsError",
                      next(k for k, t in enumerate(self.source.splitlines(), 1) if t.endswith("# illegal")))

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
    cut0 = stepped0 = False      # (the first axis taken in part, and stepped: a run-time index of it is MG003)
    self.emit("p = ml.program_id(0)")
    shape = list(D)
    for _ in range(r.randint(1, 3)):
      if stepped0 and not cut0 and programs == 1 and len(shape) > 2 and r.random() < 0.5:
        kind, ax = "pid", 0         # (a program's element of the axis just reversed or stepped: probe 59a)
      else:
        kind = r.choice(["int", "neg", "slice", "ds", "pid", "step", "neg_slice", "ell_ds", "rev"])
        ax = r.randrange(len(shape))
      n = shape[ax]
      pre = ":, " * ax
      lead = (slice(None),) * (ref.ndim - len(shape))      # (the program axis, where `p` indexed one)
      if kind in ("int", "neg", "pid") and len(shape) > 2 and ax == 0:
        if kind == "pid" and programs == 1 and not (cut0 and stepped0):
          programs, idx = n, "p"       # (of a reversed or stepped axis too, probe 59a; not of a part of one: MG003)
        elif kind == "pid":
          continue
        else:
          k = r.randrange(n)
          idx = str(k - n if kind == "neg" else k)
          ref = ref[lead + (k,)]
        text += f".at[{idx}]"
        shape.pop(0)
        cut0 = stepped0 = False
        continue
      if kind == "slice" and n >= 16:
        a = r.randrange(0, n // 2, 8) if ax == len(shape) - 1 else r.randrange(0, n // 2)
        b = n if r.random() < 0.5 else a + (n - a) // 2 // 8 * 8 or n
        text += f".at[{pre}{a}:{b}]"
        cut0 |= ax == 0
        ref = ref[lead + (slice(None),) * ax + (slice(a, b),)]
        shape[ax] = b - a
      elif kind == "ds" and n >= 16:
        w = n // 2 if ax < len(shape) - 1 or (n // 2) % 16 == 0 else n
        a = r.randrange(0, n - w + 1, 8) if ax == len(shape) - 1 else r.randrange(0, n - w + 1)
        text += f".at[{pre}ml.ds({a}, {w})]"
        cut0 |= ax == 0
        ref = ref[lead + (slice(None),) * ax + (slice(a, a + w),)]
        shape[ax] = w
      elif kind == "neg_slice" and n >= 16 and (ax < len(shape) - 1 or n % 16 == 0):
        a = n // 2 if ax < len(shape) - 1 else n // 2 // 8 * 8
        text += f".at[{pre}-{a}:]"
        cut0 |= ax == 0
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
        stepped0 |= ax == 0
        ref = ref[lead + (slice(None),) * ax + (slice(None, None, -1),)]
        strided = True
      elif kind == "step" and ax < len(shape) - 1 and n >= 8 and n % 2 == 0:
        st = r.choice([0, 1])
        text += f".at[{pre}{st}::2]"
        stepped0 |= ax == 0
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

  # ------------------------------------------------------------------ family: orderings the compiler must keep
  def k_sync(self):
    """Accesses whose order the compiler keeps with waits and barriers: an output tile stored by TMA and read back
    from registers; an input updated in place (input_output_aliases); copies and stores under a run-time `if` and
    after an early `return`; an SMEM histogram of atomics copied out; one buffer loaded twice in a program."""
    r = self.r
    kind = r.choice(["readback", "inplace", "branch", "histogram", "reload"])
    dt = self._dt((F32, F16, BF16, I32))
    isint = dt == I32
    bm, bn = self._tile(dt, max_elems=4096)
    M = r.randint(1, 3 * bm)
    N = self._cols(dt, bn)
    gm, gn = _cdiv(M, bm), _cdiv(N, bn)
    self.grid = (gm, gn)
    op = r.choice(IOPS if isint else FOPS)
    op2 = r.choice(IOPS if isint else FOPS)
    self.tags |= {f"sync:{kind}", f"dt:{dt}"}
    win = f"ml.ds(i * {bm}, {bm}), ml.ds(j * {bn}, {bn})"
    self.emit("i = ml.program_id(0)")
    self.emit("j = ml.program_id(1)")
    mask = (f"(i * {bm} + ml.arange({bm}) < {M})[:, None] & (j * {bn} + ml.arange({bn}) < {N})[None, :]")
    if kind == "histogram":
      nb = r.choice([128, 256])
      ids, ia = self.input((r.choice([128, 256, 512]),), I32, lo=0, hi=nb)
      self.grid = (1,)
      self.lines = []
      h = np.zeros(nb, np.int32)
      np.add.at(h, ia, 1)
      o = self.output(h)
      self.emit(f"h = ml.smem(({nb},), jnp.int32)")
      self.emit("h[...] = 0")
      self.emit(f"ml.atomic_add(h.at[{ids}[...]], 1)")
      self.emit(f"ml.copy(h, {o})" if r.random() < 0.5 else f"{o}[...] = h[...]")
      return
    x, xa = self.input((M, N), dt)
    t1 = _apply(op, xa, dt)
    if kind == "readback":
      o = self.output(t1)
      o2 = self.output(_apply(op2, t1, dt))
      self.emit(f"xs = ml.smem(({bm}, {bn}))")
      self.emit(f"ml.copy({x}.at[{win}], xs)")
      self.emit(f"xs[...] = {op[0].format(v='xs[...]')}")
      self.emit(f"ml.copy(xs, {o}.at[{win}])")
      self.emit(f"w = {o}.at[{win}].load(mask={mask}, other=0)")
      self.emit(f"{o2}.at[{win}].store({op2[0].format(v='w')}, mask={mask})")
    elif kind == "inplace":
      self.aliases = {0: 0}
      o = self.output(t1)
      self.emit(f"xs = ml.smem(({bm}, {bn}))")
      self.emit(f"ml.copy({x}.at[{win}], xs)")
      self.emit(f"xs[...] = {op[0].format(v='xs[...]')}")
      self.emit(f"ml.copy(xs, {o}.at[{win}])")
    elif kind == "branch":
      t2 = _apply(op2, xa, dt)
      cond = r.choice(["(i + j) % 2 == 0", "i == 0", "j > 0"])
      ci = np.add.outer(np.arange(gm * bm) // bm, np.arange(gn * bn) // bn)
      ii = np.repeat(np.arange(gm), bm)[:, None] + 0 * np.arange(gn * bn)[None, :]
      jj = 0 * np.arange(gm * bm)[:, None] + np.repeat(np.arange(gn), bn)[None, :]
      sel = {"(i + j) % 2 == 0": ci % 2 == 0, "i == 0": ii == 0, "j > 0": jj > 0}[cond][:M, :N]
      o = self.output(np.where(sel, t1, t2))
      self.emit(f"xs = ml.smem(({bm}, {bn}))")
      self.emit(f"os = ml.smem(({bm}, {bn}))")
      early = r.random() < 0.5
      self.emit(f"ml.copy({x}.at[{win}], xs)")
      self.emit(f"if {cond}:")
      self.emit(f"  os[...] = {op[0].format(v='xs[...]')}")
      self.emit(f"  ml.copy(os, {o}.at[{win}])")
      if early:
        self.emit("  return")
        self.emit(f"os[...] = {op2[0].format(v='xs[...]')}")
        self.emit(f"ml.copy(os, {o}.at[{win}])")
      else:
        self.emit("else:")
        self.emit(f"  os[...] = {op2[0].format(v='xs[...]')}")
        self.emit(f"  ml.copy(os, {o}.at[{win}])")
      self.tags.add("early_return" if early else "else")
    else:       # one buffer, two windows of x (the second load waits for the first's reads)
      y, ya = self.input((M, N), dt)
      o = self.output(_apply(op2, (t1.astype(np.float64) + ya).astype(_np(dt)) if isint else
                             (t1.astype(np.float32) + ya.astype(np.float32)).astype(_np(dt)), dt))
      self.emit(f"xs = ml.smem(({bm}, {bn}))")
      self.emit(f"ml.copy({x}.at[{win}], xs)")
      self.emit(f"a = {op[0].format(v='xs[...]')}")
      self.emit(f"ml.copy({y}.at[{win}], xs)")
      self.emit("xs[...] = a + xs[...]")
      self.emit(f"xs[...] = {op2[0].format(v='xs[...]')}")
      self.emit(f"ml.copy(xs, {o}.at[{win}])")


  # ------------------------------------------------------------------ family: windows of 3-D arrays
  def k_nd(self):
    """Windows of a (S, H, D) array: a head's rows (`x.at[ml.ds(i * bm, bm), h, :]`, rows H * D apart), a 3-D
    window into a 3-D buffer reduced over its leading axis or read a plane at a time, and windows of an SMEM
    buffer's rows as TMA destinations and sources (two loads into its halves, two stores from them)."""
    r = self.r
    dt = self._dt((F32, F16, BF16, I32))
    isint = dt == I32
    kind = r.choice(["head", "box", "halves"])
    D = r.choice([c for c in (16, 32, 64, 128) if (c * ISZ[dt]) % 16 == 0])
    H = r.randint(1, 4)
    bm = r.choice([b for b in (8, 16, 32, 64) if (b * D) % 128 == 0 and b * D <= 8192] or [128])
    S_ = r.randint(1, 3 * bm)
    gm = _cdiv(S_, bm)
    x, xa = self.input((S_, H, D), dt)
    op = r.choice(IOPS if isint else FOPS)
    self.tags |= {f"nd:{kind}", f"dt:{dt}"}
    if kind == "head":
      self.grid = (gm, H)
      o = self.output(_apply(op, xa, dt))
      self.emit("i = ml.program_id(0)")
      self.emit("h = ml.program_id(1)")
      self.emit(f"xs = ml.smem(({bm}, {D}))")
      self.emit(f"ml.copy({x}.at[ml.ds(i * {bm}, {bm}), h, :], xs)")
      self.emit(f"xs[...] = {op[0].format(v='xs[...]')}")
      self.emit(f"ml.copy(xs, {o}.at[ml.ds(i * {bm}, {bm}), h, :])")
    elif kind == "box":
      self.grid = (gm,)
      xp = np.zeros((gm * bm, H, D), _np(dt))
      xp[:S_] = xa
      t = _apply(op, xp, dt)
      acc = t.astype(np.float64).sum(axis=1).astype(np.float32 if not isint else np.int32)[:S_]
      o = self.output(acc)
      o2 = self.output(t[:S_, H - 1].copy())
      adt = "int32" if isint else "float32"
      self.emit("i = ml.program_id(0)")
      self.emit(f"xs = ml.smem(({bm}, {H}, {D}))")
      self.emit(f"ml.copy({x}.at[ml.ds(i * {bm}, {bm})], xs)")
      self.emit(f"acc = ml.zeros(({bm}, {D}), jnp.{adt})")
      self.emit(f"for hh in ml.static_range({H}):")
      self.emit(f"  acc = acc + ({op[0].format(v='xs[:, hh, :]')}).astype(jnp.{adt})")
      self.emit(f"rows = i * {bm} + ml.arange({bm})")
      self.emit(f"{o}.at[ml.ds(i * {bm}, {bm})].store(acc, mask=(rows < {S_})[:, None])")
      self.emit(f"{o2}.at[ml.ds(i * {bm}, {bm})].store({op[0].format(v=f'xs[:, {H - 1}, :]')}, mask=(rows < {S_})[:, None])")
      self.tags.add("dot")
    else:
      if bm < 16:
        bm = 16 if (16 * D) % 128 == 0 else 32
        gm = _cdiv(S_, bm)
      h2 = bm // 2
      self.grid = (gm, H)
      xp = np.zeros((gm * bm, H, D), _np(dt))
      xp[:S_] = xa
      t = _apply(op, xp, dt)
      o = self.output(t[:S_].copy())
      self.emit("i = ml.program_id(0)")
      self.emit("h = ml.program_id(1)")
      self.emit(f"xs = ml.smem(({bm}, {D}))")
      self.emit(f"ml.copy({x}.at[ml.ds(i * {bm}, {h2}), h, :], xs.at[0:{h2}])")
      self.emit(f"ml.copy({x}.at[ml.ds(i * {bm} + {h2}, {h2}), h, :], xs.at[{h2}:{bm}])")
      self.emit(f"xs[...] = {op[0].format(v='xs[...]')}")
      self.emit(f"ml.copy(xs.at[{h2}:{bm}], {o}.at[ml.ds(i * {bm} + {h2}, {h2}), h, :])")
      self.emit(f"ml.copy(xs.at[0:{h2}], {o}.at[ml.ds(i * {bm}, {h2}), h, :])")
