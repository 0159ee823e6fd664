"""Probe 61a's differential fuzzer of tensor-core operands in flight: kernels whose dots keep register A operands and
accumulators running while the code around them goes on (design note 203).

WGMMA reads a register A operand, and writes its accumulator, until a `wgmma.wait_group` retires it; PTX leaves
touching those registers meanwhile undefined (design note 202). Interpret mode runs the scheduled IR and reports such
a race (MG951), so these kernels, right in interpret mode and free of MG951, have every wait the GPU needs. `Gen(seed)`
draws a plan and writes the kernel and its NumPy reference from it (never from interpret mode):

- the loop: `ml.range(n, stages=2..4)`, a plain `range`, `warp_specialize=True`, ping-pong (block=256), a persistent
  grid (a plain loop over tiles around the pipelined one), a pipelined loop inside a plain loop over column blocks,
  a plain loop inside the pipelined body (building A);
- A: by TMA (an SMEM operand: the control), loaded, masked-loaded, computed (`(x * s).astype`), read back from SMEM,
  carried and changed each trip, loaded once before the loop, defined under an `if`, a previous dot's result
  converted (`ml.dot(q_s, k_s.T)` then `.astype`, as attention's p), reused by two dots;
- the accumulator: chained, `acc += ml.dot(...)`, rescaled (`acc * alpha[:, None]` as attention's), two
  accumulators, read mid-loop (a running row max), a fresh product each trip carried out of the loop;
- epilogues after the loop (a bias, a cast, masked or plain stores).

Inputs are small multiples of 1/2, so products and sums are exact; the reference rounds where the kernel does (p's
conversion, the output's dtype). `run(gen)` classifies as tests/dot_fuzz.py does. Deterministic.
"""
from __future__ import annotations

import sys

import numpy as np

import diff_fuzz
import dot_fuzz

F16, BF16, F32 = "float16", "bfloat16", "float32"
_round = dot_fuzz._round

LOOPS = ["stages"] * 5 + ["plain", "ws", "pingpong", "persistent", "outer", "inner"]
A_MODES = ["tma", "load", "load", "masked", "computed", "computed_smem", "smem_regs", "carried", "carried_pre",
           "invariant", "if", "chain", "chain", "chain_late", "reuse"]
ACC_MODES = ["chain", "chain", "plus", "rescale", "rescale_pre", "two", "mid", "fresh", "fresh_bias", "copy", "cond",
             "swap", "old", "dead"]


class Gen(dot_fuzz.Gen):
  """One random kernel (`source`, `args`, `refs`, `tags`) of dots with operands in flight, from the plan of `seed`
  (`loop`, `a_mode`, `acc_mode` force a choice)."""

  def __init__(self, seed, loop=None, a_mode=None, acc_mode=None):
    self._start(seed)
    self.family = "async"
    r = self.r
    self.loop = loop or r.choice(LOOPS)
    self.a_mode = a_mode or r.choice(A_MODES)
    self.acc_mode = acc_mode or r.choice(ACC_MODES)
    if self.loop == "pingpong" and self.acc_mode == "cond":
      self.acc_mode = "chain"        # (a dot under an if of a ping-pong loop is MG503, a right refusal)
    self.build()

  def build(self):
    r = self.r
    loop, a_mode, acc_mode = self.loop, self.a_mode, self.acc_mode
    dt = r.choice([F16, BF16])
    pp = loop == "pingpong"
    bm = 128 if pp else r.choice([64, 64, 128])
    block = 256 if pp or (bm == 128 and r.random() < 0.3) else None
    bn = r.choice([16, 32, 64, 64, 128])
    bk = r.choice([16, 32, 64, 64])
    nk = r.randint(1, 4)
    gm = r.randint(1, 3)
    ncb = 2 if loop == "outer" else 1               # column blocks (a plain loop around the pipelined one)
    M, K, N = gm * bm, nk * bk, ncb * bn
    if a_mode == "masked":
      M -= r.randint(0, bm - 1)
    d = r.choice([16, 32, 64])                       # chain: q's width
    self.block = block
    self.tags |= {f"loop:{loop}", f"a:{a_mode}", f"acc:{acc_mode}", f"dt:{dt}"}
    # inputs
    if a_mode in ("chain", "chain_late"):
      qn, qv = self.input((M, d), dt, -2, 2)
      kn, kv = self.input((K, d), dt, -2, 2)
      c = r.choice([0.125, 0.25, 0.5])
      s_ref = qv @ kv.T                               # (M, K); p of block k is its columns k*bk..
      A = _round(s_ref * c, dt)
    else:
      an, av = self.input((M, K), dt)
      A = av
    bname, bv = self.input((K, N), dt)
    if a_mode == "reuse" and acc_mode == "swap":
      acc_mode = self.acc_mode = "chain"
    two = acc_mode == "two" or a_mode == "reuse"
    if two:
      b2name, b2v = self.input((K, N), dt)
    rescale = acc_mode in ("rescale", "rescale_pre")
    if rescale:
      alname, alv = self.input((gm * bm,), F32, 1, 2, half=False)   # 1 or 2 a row: exact
      alv = np.where(alv > 1, 0.5, 1.0)
      self.ins[-1] = (alname, alv.astype(np.float32))
    # per (row tile, column block) the trips' A blocks, as the kernel forms them
    def a_block(k, rows):
      blk = A[rows, k * bk:(k + 1) * bk]
      if a_mode in ("computed", "computed_smem"):
        return blk * 0.5
      if a_mode == "carried":                         # A0, then halved after each trip's dot
        return A[rows, 0:bk] * 0.5 ** k
      if a_mode == "carried_pre":                     # halved before each trip's dot
        return A[rows, 0:bk] * 0.5 ** (k + 1)
      if a_mode == "invariant":
        return A[rows, 0:bk]
      if a_mode == "if":
        return blk if k % 2 == 0 else blk * 0.5
      if a_mode == "chain_late":                      # p of the previous trip's block (zeros on the first)
        return A[rows, (k - 1) * bk:k * bk] if k else blk * 0
      return blk
    ref0 = np.zeros((M, N))
    ref1 = np.zeros((M, N))
    refmax = np.full((M,), -np.inf)
    for cb in range(ncb):
      cols = slice(cb * bn, (cb + 1) * bn)
      acc = np.zeros((M, bn))
      acc2 = np.zeros((M, bn))
      mx = np.full((M,), -np.inf)
      for k in range(nk):
        ab = a_block(k, slice(0, M))
        bb = bv[k * bk:(k + 1) * bk, cols]
        if rescale:
          acc = acc * alv[:M, None]
        if acc_mode == "fresh":
          acc = ab @ bb
        elif acc_mode == "cond":
          acc = acc + ab @ bb if k % 2 == 0 else acc
        elif acc_mode == "swap":                      # acc, acc2 = ml.dot(a, b, acc2), acc
          acc, acc2 = acc2 + ab @ bb, acc
        elif acc_mode == "old":                       # the row max of the value before each dot
          mx = np.maximum(mx, acc.max(axis=1))
          acc = acc + ab @ bb
        elif acc_mode == "fresh_bias":
          acc = ab @ bb + 1.0
        else:
          acc = acc + ab @ bb
        if two:
          bb2 = b2v[k * bk:(k + 1) * bk, cols]
          acc2 = acc2 + ab @ bb2
        if acc_mode == "mid":
          mx = np.maximum(mx, acc.max(axis=1))
      ref0[:, cols] = acc
      ref1[:, cols] = acc if acc_mode == "copy" else acc2
      refmax = mx                                     # (the last column block's: its store comes last)
    # --- the kernel
    persistent = loop == "persistent"
    tiles = gm
    if persistent:
      self.grid = (max(1, gm - 1),)
    else:
      self.grid = (gm,)
    e = self.emit
    e("i = ml.program_id(0)")
    if a_mode in ("tma", "smem_regs", "computed_smem"):
      e(f"a_s = ml.smem(({bm}, {bk}), jnp.{dt})")
    if a_mode in ("chain", "chain_late"):
      e(f"q_s = ml.smem(({bm}, {d}), jnp.{dt})")
      e(f"k_s = ml.smem(({bk}, {d}), jnp.{dt})")
    e(f"b_s = ml.smem(({bk}, {bn}), jnp.{dt})")
    if two:
      e(f"b2_s = ml.smem(({bk}, {bn}), jnp.{dt})")
    ind = ""
    row = "i"
    if persistent:
      e(f"for t in range(i, {tiles}, ml.num_programs(0)):")
      ind, row = "  ", "t"
    col = "0"
    if loop == "outer":
      e("for cb in range(2):")
      ind, col = "  ", f"cb * {bn}"
    f = lambda s: e(ind + s)  # noqa: E731
    r0 = f"{row} * {bm}"
    f(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    if two or acc_mode == "swap":
      f(f"acc2 = ml.zeros(({bm}, {bn}), jnp.float32)")
    if acc_mode in ("mid", "old"):
      f(f"mx = ml.full(({bm},), -jnp.inf, jnp.float32)")
    if acc_mode == "fresh_bias":
      f(f"c0 = ml.full(({bm}, {bn}), 1.0, jnp.float32)")
    if acc_mode == "copy":
      f(f"cp = ml.zeros(({bm}, {bn}), jnp.float32)")
    if rescale:
      f(f"alpha = {alname}[ml.ds({r0}, {bm})]")
    if a_mode in ("chain", "chain_late"):
      f(f"ml.copy({qn}.at[ml.ds({r0}, {bm})], q_s)")
    if a_mode == "chain_late":
      f(f"av = ml.zeros(({bm}, {bk}), jnp.{dt})")
    if a_mode in ("carried", "carried_pre", "invariant"):
      f(f"a_reg = {an}.at[ml.ds({r0}, {bm}), ml.ds(0, {bk})][...]")
    head = {"stages": f"ml.range({nk}, stages={r.choice([2, 2, 3, 4])})", "plain": f"range({nk})",
            "ws": f"ml.range({nk}, stages={r.choice([2, 3])}, warp_specialize=True)",
            "pingpong": f"ml.range({nk}, stages=2, warp_specialize=True, pingpong=True)",
            "persistent": f"ml.range({nk}, stages={r.choice([2, 3])})",
            "outer": f"ml.range({nk}, stages={r.choice([2, 3])})",
            "inner": f"ml.range({nk}, stages={r.choice([2, 3])})"}[loop]
    f(f"for k in {head}:")
    g = lambda s: f("  " + s)  # noqa: E731
    win = f"{an if a_mode not in ('chain', 'chain_late') else ''}.at[ml.ds({r0}, {bm}), ml.ds(k * {bk}, {bk})]"
    g(f"ml.copy({bname}.at[ml.ds(k * {bk}, {bk}), ml.ds({col}, {bn})], b_s)")
    if two:
      g(f"ml.copy({b2name}.at[ml.ds(k * {bk}, {bk}), ml.ds({col}, {bn})], b2_s)")
    aop = "av"
    if a_mode == "tma":
      g(f"ml.copy({win}, a_s)")
      aop = "a_s"
    elif a_mode in ("load", "reuse"):
      if loop == "inner":
        g(f"av = ml.zeros(({bm}, {bk}), jnp.float32)")
        g("for h in range(2):")
        g(f"  av = av + {win}[...].astype(jnp.float32) * 0.5")
        g(f"av = av.astype(jnp.{dt})")
      else:
        g(f"av = {win}[...]")
    elif a_mode == "masked":
      g(f"av = {win}.load(mask=({r0} + ml.arange({bm}))[:, None] < {M}, other=0)")
    elif a_mode == "computed":
      g(r.choice([f"av = ({win}[...] * 0.5).astype(jnp.{dt})", f"av = ({win}[...] * 0.5).astype({an}.dtype)"]))
    elif a_mode == "computed_smem":
      g(f"ml.copy({win}, a_s)")
      g(f"av = (a_s[...] * 0.5).astype(jnp.{dt})")
    elif a_mode == "smem_regs":
      g(f"ml.copy({win}, a_s)")
      g("av = a_s[...]")
    elif a_mode in ("carried", "invariant"):
      aop = "a_reg"
    elif a_mode == "carried_pre":
      g(f"a_reg = (a_reg * 0.5).astype(jnp.{dt})")
      aop = "a_reg"
    elif a_mode == "if":
      g("if k % 2 == 0:")
      g(f"  av = {win}[...]")
      g("else:")
      g(f"  av = ({win}[...] * 0.5).astype(jnp.{dt})")
    elif a_mode == "chain":
      g(f"ml.copy({kn}.at[ml.ds(k * {bk}, {bk})], k_s)")
      g(r.choice(["s = ml.dot(q_s, k_s.T)", "s = ml.dot(q_s, ml.trans(k_s))"]))
      g(r.choice([f"av = (s * {c}).astype(jnp.{dt})", f"av = (s * {c}).astype({kn}.dtype)"]))
    if acc_mode == "rescale_pre":
      g("acc = acc * alpha[:, None]")
    if acc_mode == "fresh":
      g(f"acc = ml.dot({aop}, b_s)")
    elif acc_mode == "fresh_bias":
      g(f"acc = ml.dot({aop}, b_s, c0)")
    elif acc_mode == "plus":
      g(f"acc += ml.dot({aop}, b_s)")
    elif acc_mode == "rescale":
      g(f"acc = ml.dot({aop}, b_s, acc * alpha[:, None])")
    elif acc_mode == "cond":
      g("if k % 2 == 0:")
      g(f"  acc = ml.dot({aop}, b_s, acc)")
    elif acc_mode == "swap":
      g(f"acc, acc2 = ml.dot({aop}, b_s, acc2), acc")
    else:
      if acc_mode == "old":
        g("old = acc")
      g(f"acc = ml.dot({aop}, b_s, acc)")
    if acc_mode == "old":
      g("mx = ml.maximum(mx, ml.max(old, axis=1))")
    if acc_mode == "dead":                            # a product nothing reads, issued last
      g(f"unused = ml.dot({aop}, b_s)")
    if two:
      g(f"acc2 = ml.dot({aop}, b2_s, acc2)")
    if acc_mode == "mid":
      g("mx = ml.maximum(mx, ml.max(acc, axis=1))")
    if acc_mode == "copy":
      g("cp = acc")
    if a_mode == "carried":
      g(f"a_reg = (a_reg * 0.5).astype(jnp.{dt})")
    if a_mode == "chain_late":                        # the next trip's A: this trip's p (forward_overlap's order)
      g(f"ml.copy({kn}.at[ml.ds(k * {bk}, {bk})], k_s)")
      g("s = ml.dot(q_s, k_s.T)")
      g(f"av = (s * {c}).astype(jnp.{dt})")
    # epilogue after the loop
    odt = r.choice([F32, F32, F16])
    y = "acc"
    ref = ref0
    if r.random() < 0.3:
      bias_n, biasv = self.input((N,), F32)
      f(f"bias = {bias_n}[ml.ds({col}, {bn})]")
      y, ref = f"({y} + bias[None, :])", ref + biasv[None, :]
    if odt != F32:
      y = f"({y}).astype(jnp.{odt})"
    o = self.output(ref, odt)
    self.tol_dtype = odt
    if a_mode == "masked":
      f(f"rows = {r0} + ml.arange({bm})")
      f(f"{o}.at[ml.ds({r0}, {bm}), ml.ds({col}, {bn})].store({y}, mask=(rows[:, None] < {M}))")
    else:
      f(f"{o}[ml.ds({r0}, {bm}), ml.ds({col}, {bn})] = {y}")
    if two or acc_mode in ("copy", "swap"):
      second = "cp" if acc_mode == "copy" else "acc2"
      o1 = self.output(ref1, F32)
      if a_mode == "masked":
        f(f"{o1}.at[ml.ds({r0}, {bm}), ml.ds({col}, {bn})].store({second}, mask=(rows[:, None] < {M}))")
      else:
        f(f"{o1}[ml.ds({r0}, {bm}), ml.ds({col}, {bn})] = {second}")
    if acc_mode in ("mid", "old"):
      o1 = self.output(np.concatenate([refmax, np.zeros(gm * bm - M)]), F32)   # rows past M: zeros (other=0)
      f(f"{o1}[ml.ds({r0}, {bm})] = mx")

def compare(got, want, tol_dtype=None):
  return dot_fuzz.compare(got, want, tol_dtype)


def run(gen, *, build=True):
  """(class, detail) of `gen`'s kernel: tests/diff_fuzz.py's classes, and "race" for interpret mode's MG951 (a wait the
  compiler should have inserted: these kernels have no race of their own)."""
  cls, detail = diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: compare(g, w, gen.tol_dtype))
  return ("race" if cls == "refused" and detail.startswith("MG951") else cls), detail


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  for s in range(lo, hi):
    gen = Gen(s)
    cls, detail = run(gen, build=(s % every == 0))
    print(f"SEED {s} {cls} {sorted(gen.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
