"""Probe 62a's differential fuzzer of multi-warpgroup kernels: register tiles and vectors at block=256 and 384 (two
or three warpgroups, block=128 the control), where tensor-core tiles are split by rows (64 a warpgroup), strided
tiles may be split by their leading axis and vectors are replicated (design notes 16, 20, 208).

`Gen(seed)` draws a plan and writes from it the kernel and a NumPy reference of the same program (never interpret
mode's numbers): every statement of the kernel has a twin that computes its value in float64 for each program of the
grid, rounded to the statement's dtype where the kernel rounds. Families:

- `tile`: one (bm, bn) tile a program (bm 64..384, multiples of 64 and not; bn 16..256), float32 / float16 /
  bfloat16 / int32, loaded by a TMA window, a plain window read or a masked window read of a ragged array; then a
  chain of register ops: elementwise math, `ml.where` of `ml.arange` masks (and the program's rows), casts, row and
  column statistics (sum / max / min / argmax / argmin, keepdims or not), broadcasts back (`m[:, None]`,
  `v[None, :]`), `ml.cumsum` along either axis (and of vectors), tensor-core products (`ml.dot` of the tile cast to
  16 bits with a TMA-loaded weight);
- `loop`: vectors (row and column statistics) and a tile carried through an `ml.range` loop (pipelined or not) over
  column blocks, then the `tile` chain on what it carried;
- `ws`: a warp-specialised (and at block=256 sometimes ping-pong-free pipelined) dot loop, a row statistic carried
  in it, then the `tile` chain on the accumulator.

Stores: the tile (whole, masked by rows, masked by columns into a narrower output, a window), row vectors (masked
where the array is ragged), column vectors a program each, keepdims statistics. Inputs are small whole numbers or
halves, so every sum is exact in float32 and the kernel and the reference round at the same points. `run(gen)`
classifies as tests/diff_fuzz.py does ("ok", "wrong", "crash", "refused", "build"). Deterministic.
"""
from __future__ import annotations

import sys

import numpy as np

import diff_fuzz
import dot_fuzz

F32, F16, BF16, I32 = "float32", "float16", "bfloat16", "int32"
DTYPES = [F32, F32, F16, BF16, I32]
BLOCKS = [128, 256, 256, 384, 384]
FAMILIES = ["tile"] * 5 + ["loop"] * 2 + ["ws"] * 2
ROWS = [64, 96, 128, 128, 160, 192, 192, 256, 320, 384]
COLS = [16, 32, 48, 64, 64, 128, 256]
LIMIT = {F32: 2.0 ** 20, BF16: 2.0 ** 20, F16: 3.0e4, I32: 2.0 ** 20}    # magnitudes the chain keeps below


def _rnd(x, dt):
  """float64 `x` as the kernel holds it in `dt` (ints truncated as a cast truncates)."""
  x = np.asarray(x, np.float64)
  if dt == I32:
    return np.trunc(x)
  return np.asarray(x, np.float32).astype(dot_fuzz._np(dt)).astype(np.float64)


class V:
  """A value of the kernel: its name, kind ("tile", "row", "col"), dtype, keepdims and a bound of its magnitude."""

  def __init__(self, name, kind, dt, bound, keep=False, n=None):
    self.name, self.kind, self.dt, self.bound, self.keep, self.n = name, kind, dt, bound, keep, n


class Gen(dot_fuzz.Gen):
  """One random multi-warpgroup kernel (`source`, `args`, `refs`, `tags`) from the plan of `seed`."""

  def __init__(self, seed, block=None, family=None, wide=False):
    self._start(seed)
    self.ops = WIDE if wide else OPS
    r = self.r
    self.tags = set()
    self.block = block or r.choice(BLOCKS)
    self.family = family or r.choice(FAMILIES)
    self.steps = []         # functions of (env, program id) computing the reference, in the kernel's order
    self.specs = []         # the outputs: (name, shape, dtype)
    self.n = 0
    self.dotted = False
    self.tags |= {f"block:{self.block}", f"fam:{self.family}"} | ({"wide"} if wide else set())
    getattr(self, "f_" + self.family)()
    self._finish()

  # ------------------------------------------------------------------ plumbing
  def new(self, kind, dt, bound, keep=False):
    self.n += 1
    return V(f"v{self.n}", kind, dt, bound, keep, {"row": self.bm, "col": self.bn}.get(kind))

  def stmt(self, line, fn=None, ind=0):
    self.emit("  " * ind + line)
    if fn is not None:
      self.steps.append(fn)

  def out(self, shape, dt):
    name = f"o{len(self.specs)}"
    self.specs.append((name, shape, dt))
    return name

  def _finish(self):
    outs = {name: np.zeros(shape) for name, shape, _ in self.specs}
    for p in range(self.grid[0]):
      env = {"__outs": outs}
      for fn in self.steps:
        fn(env, p)
    self.outs = [(name, _rnd(outs[name], dt).astype(dot_fuzz._np(dt))) for name, _, dt in self.specs]
    if self.dotted:
      self.tags.add("dot")

  # ------------------------------------------------------------------ the tile
  def plan_tile(self, rows=None):
    r = self.r
    self.bm = rows or r.choice(ROWS)
    self.bn = r.choice(COLS)
    while self.bm * self.bn > 96 * self.block:     # (a tile past what the threads hold: MG403 by design)
      self.bn = r.choice(COLS)
    self.gm = r.randint(1, 2)
    self.grid = (self.gm,)
    self.r0 = f"i * {self.bm}"

  def load_tile(self, dt, mode, ncols=None, k=None):
    """The tile a program (of the (M, ncols) input; column block `k`, a loop index's name, when given)."""
    bm, bn, M = self.bm, self.bn, self.M
    ncols = ncols or bn
    lo, hi = (-4, 4) if dt != I32 else (-9, 9)
    if not hasattr(self, "x"):
      self.x, self.xv = self.input((M, ncols), dt, lo, hi, half=dt != I32)
    x, xv = self.x, self.xv
    cols = f"ml.ds({k} * {bn}, {bn})" if k else ":"
    v = self.new("tile", dt, float(hi))
    ind = 1 if k else 0
    if mode == "tma":
      self.stmt(f"{v.name} = x_s[...]", ind=ind)
      self.lines.insert(self._tma_at, f"  x_s = ml.smem(({bm}, {bn}), jnp.{dt})")
      self._tma_at += 1
      self.lines.insert(len(self.lines) - 1, "  " * (ind + 1) + f"ml.copy({x}.at[ml.ds({self.r0}, {bm}), {cols}], x_s)")
    elif mode == "load":
      self.stmt(f"{v.name} = {x}.at[ml.ds({self.r0}, {bm}), {cols}][...]", ind=ind)
    else:
      self.stmt(f"{v.name} = {x}.at[ml.ds({self.r0}, {bm}), {cols}].load(mask=rr[:, None] < {M}, other=0)", ind=ind)
    name = v.name

    def fn(env, p, kk=k):
      c0 = env[kk] * bn if kk else 0
      pad = np.zeros((bm, bn))
      part = xv[p * bm:(p + 1) * bm, c0:c0 + bn]
      pad[:part.shape[0]] = part
      env[name] = pad
    self.steps.append(fn)
    return v

  # ------------------------------------------------------------------ the chain of register ops
  def chain(self, t, n_ops, ind=0):
    """`n_ops` random ops on the tile `t` and the vectors they make; returns the tile and the vectors."""
    vecs = list(self.vecs)
    for _ in range(n_ops):
      vecs = [v for v in vecs if v.kind == "row" or v.n == self.bn]     # (columns of a tile before a dot: dropped)
      for _ in range(6):
        got = getattr(self, "op_" + self.r.choice(self.ops))(t, vecs, ind)
        if got is not None:
          t, nv = got
          if nv is not None:
            vecs.append(nv)
          break
    return t, vecs

  def unary(self, a, kexpr, fn, dt, bound, kind=None, keep=None, ind=0):
    """`vK = kexpr` (of `a`), its reference fn(a's value) rounded to `dt`."""
    if bound > LIMIT[dt]:
      return None
    v = self.new(kind or a.kind, dt, bound, a.keep if keep is None else keep)
    an, vn = a.name, v.name
    self.stmt(f"{vn} = {kexpr}", lambda env, p: env.__setitem__(vn, _rnd(fn(env[an], env, p), dt)), ind)
    return v

  def op_ew(self, t, vecs, ind):
    a = t if self.r.random() < 0.7 or not vecs else self.r.choice(vecs)
    k, fn, b = self.r.choice([("{a} * 2", lambda x: x * 2, 2), ("{a} + 1", lambda x: x + 1, 1),
                              ("ml.abs({a})", np.abs, 1), ("ml.maximum({a}, -1)", lambda x: np.maximum(x, -1), 1),
                              ("-{a}", lambda x: -x, 1), ("{a} - 3", lambda x: x - 3, 1)])
    bound = a.bound * b if b == 2 else a.bound + b
    v = self.unary(a, k.format(a=a.name), lambda x, env, p: fn(x), a.dt, bound, ind=ind)
    self.tags.add("ew")
    return None if v is None else ((v, None) if a is t else (t, v))

  def mask(self, dt):
    """A mask of the tile from `ml.arange` (and the program's rows): its kernel text and reference."""
    bm, bn, r = self.bm, self.bn, self.r
    c = r.randint(1, bn - 1)
    q = r.randint(2, 5)
    h = r.randint(1, bm - 1)
    forms = [(f"(ml.arange({bn}) < {c})[None, :]", lambda p: (np.arange(bn) < c)[None, :]),
             (f"(ml.arange({bm}) % {q} == 1)[:, None]", lambda p: (np.arange(bm) % q == 1)[:, None]),
             (f"(ml.arange({bm})[:, None] < {h}) | (ml.arange({bn})[None, :] >= {c})",
              lambda p: (np.arange(bm)[:, None] < h) | (np.arange(bn)[None, :] >= c)),
             (f"(rr % {q} == 0)[:, None]", lambda p: ((p * bm + np.arange(bm)) % q == 0)[:, None]),
             (f"ml.arange({bm})[:, None] >= ml.arange({bn})[None, :]",
              lambda p: np.arange(bm)[:, None] >= np.arange(bn)[None, :])]
    return r.choice(forms)

  def op_where(self, t, vecs, ind):
    mk, mf = self.mask(t.dt)
    rows = [v for v in vecs if v.kind == "row" and v.dt == t.dt]
    cols = [v for v in vecs if v.kind == "col" and v.dt == t.dt]
    other = self.r.choice(["0", "neg"] + (["row"] if rows else []) + (["col"] if cols else []))
    if other == "0":
      ok, of, ob = "0", lambda env: 0.0, 0
    elif other == "neg":
      ok, of, ob = f"-{t.name}", lambda env, n=t.name: -env[n], t.bound
    else:
      o = self.r.choice(rows if other == "row" else cols)
      ok = o.name if o.keep else (f"{o.name}[:, None]" if other == "row" else f"{o.name}[None, :]")
      of = (lambda env, n=o.name: env[n].reshape(-1, 1)) if other == "row" else (lambda env, n=o.name: env[n].reshape(1, -1))
      ob = o.bound
    fn = lambda x, env, p: np.where(mf(p), x, of(env))  # noqa: E731
    v = self.unary(t, f"ml.where({mk}, {t.name}, {ok})", fn, t.dt, max(t.bound, ob), ind=ind)
    self.tags.add("where")
    return None if v is None else (v, None)

  def op_cast(self, t, vecs, ind):
    to = self.r.choice([d for d in (F32, F16, BF16, I32) if d != t.dt])
    if to == F16 and t.bound > LIMIT[F16]:
      return None
    v = self.unary(t, f"{t.name}.astype(jnp.{to})", lambda x, env, p: x, to, t.bound, ind=ind)
    self.tags.add(f"cast:{to}")
    return None if v is None else (v, None)

  def op_stat(self, t, vecs, ind):
    r = self.r
    ax = r.randint(0, 1)
    f = r.choice(["sum", "sum", "max", "min", "argmax", "argmin"])
    keep = r.random() < 0.3
    n = (self.bm, self.bn)[ax]
    npf = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax, "argmin": np.argmin}[f]
    dt = I32 if f.startswith("arg") else t.dt
    bound = t.bound * n if f == "sum" else (n if f.startswith("arg") else t.bound)
    kw = ", keepdims=True" if keep else ""
    call = r.choice([f"ml.{f}({t.name}, axis={ax}{kw})", f"jnp.{f}({t.name}, axis={ax}{kw})"])
    kind = "col" if ax == 0 else "row"
    v = self.unary(t, call, lambda x, env, p: npf(x, axis=ax).reshape(-1), dt, bound, kind=kind, keep=keep, ind=ind)
    self.tags.add(f"stat:{f}:{ax}" + (":keep" if keep else ""))
    if v is None:
      return None
    if r.random() < 0.6:            # broadcast back into the tile
      vk = v.name if keep else (f"{v.name}[:, None]" if kind == "row" else f"{v.name}[None, :]")
      if v.dt != t.dt:
        vk = f"{vk}.astype(jnp.{t.dt})"
      o = r.choice(["-", "+"])
      sh = (-1, 1) if kind == "row" else (1, -1)
      vn = v.name
      tdt = t.dt          # (the vector converted to the tile's dtype first: argmax's indices round in bfloat16)
      fn = (lambda x, env, p: x - _rnd(env[vn], tdt).reshape(sh)) if o == "-" else (lambda x, env, p: x + _rnd(env[vn], tdt).reshape(sh))
      w = self.unary(t, f"{t.name} {o} {vk}", fn, t.dt, t.bound + bound, kind="tile", keep=False, ind=ind)
      self.tags.add(f"bcast:{kind}")
      if w is not None:
        return w, v
    return t, v

  def op_mix(self, t, vecs, ind):
    """A second tile of the current shape, read plainly, by a masked window or by a pointer grid (a strided tile
    meeting the chain's tile, which may be a tensor-core one), added, maxed or selected into it."""
    r, bm, bn = self.r, self.bm, self.bn
    dt = t.dt
    yn, yv = self.input((self.gm * bm, bn), dt, -3, 3, half=dt != I32)
    how = r.choice(["plain", "masked", "pointer"])
    c = r.randint(1, bn)
    if how == "plain":
      k = f"{yn}.at[ml.ds({self.r0}, {bm}), :][...]"
      keep = lambda p: np.ones((bm, bn), bool)  # noqa: E731
    elif how == "masked":
      k = f"{yn}.at[ml.ds({self.r0}, {bm}), :].load(mask=(ml.arange({bn}) < {c})[None, :], other=1)"
      keep = lambda p: np.broadcast_to((np.arange(bn) < c)[None, :], (bm, bn))  # noqa: E731
    else:
      k = (f"ml.load({yn}.at[rr[:, None], ml.arange({bn})[None, :]], mask=(rr % 2 == 0)[:, None] & "
           f"(ml.arange({bn}) < {c})[None, :], other=1)")
      keep = lambda p: ((p * bm + np.arange(bm)) % 2 == 0)[:, None] & (np.arange(bn) < c)[None, :]  # noqa: E731
    y = self.new("tile", dt, 3.0)
    yname = y.name
    self.stmt(f"{yname} = {k}", lambda env, p: env.__setitem__(yname, np.where(keep(p), yv[p * bm:(p + 1) * bm], 1)), ind)
    op = r.choice(["+", "max", "where"])
    if op == "+":
      v = self.unary(t, f"{t.name} + {yname}", lambda x, env, p: x + env[yname], dt, t.bound + 3, ind=ind)
    elif op == "max":
      v = self.unary(t, f"ml.maximum({t.name}, {yname})", lambda x, env, p: np.maximum(x, env[yname]), dt,
                     max(t.bound, 3), ind=ind)
    else:
      v = self.unary(t, f"ml.where({yname} > 0, {t.name}, {yname})", lambda x, env, p: np.where(env[yname] > 0, x, env[yname]),
                     dt, max(t.bound, 3), ind=ind)
    self.tags.add(f"mix:{how}:{op}")
    return None if v is None else (v, None)

  def op_full(self, t, vecs, ind):
    """A full reduction of the tile (the warpgroups' parts combined) broadcast back."""
    f = self.r.choice(["sum", "max", "min"])
    npf = {"sum": np.sum, "max": np.max, "min": np.min}[f]
    b = t.bound * self.bm * self.bn if f == "sum" else t.bound
    if b > LIMIT[t.dt]:
      return None
    s = self.new("tile", t.dt, b)
    sn = s.name
    self.stmt(f"{sn} = ml.{f}({t.name})", lambda env, p, tn=t.name: env.__setitem__(sn, _rnd(npf(env[tn]), t.dt)), ind)
    v = self.unary(t, f"{t.name} - {sn}", lambda x, env, p: x - env[sn], t.dt, t.bound + b, ind=ind)
    self.tags.add(f"full:{f}")
    return None if v is None else (v, None)

  def op_tstat(self, t, vecs, ind):
    """A column statistic as the statistic of the transpose along its rows (MG204's hint for split tiles)."""
    f = self.r.choice(["sum", "max", "min", "argmax"])
    npf = {"sum": np.sum, "max": np.max, "min": np.min, "argmax": np.argmax}[f]
    dt = I32 if f == "argmax" else t.dt
    v = self.unary(t, f"ml.{f}({t.name}.T, axis=1)", lambda x, env, p: npf(x, axis=0), dt,
                   t.bound * self.bm if f == "sum" else (self.bm if f == "argmax" else t.bound), kind="col", keep=False,
                   ind=ind)
    self.tags.add(f"tstat:{f}")
    return None if v is None else (t, v)

  def op_slice(self, t, vecs, ind):
    """A static column slice of the tile (`t[:, a:b]`, whole multiples of 8 columns): the tile narrows."""
    if self.bn < 32 or ind:
      return None
    w = self.r.choice([c for c in range(8, self.bn, 8)])
    a = self.r.choice(range(0, self.bn - w + 1, 8))
    v = self.unary(t, f"{t.name}[:, {a}:{a + w}]", lambda x, env, p: x[:, a:a + w], t.dt, t.bound, ind=ind)
    self.bn = w
    self.tags.add("slice")
    return None if v is None else (v, None)

  def op_cummax(self, t, vecs, ind):
    ax = self.r.randint(0, 1)
    v = self.unary(t, f"ml.cummax({t.name}, axis={ax})", lambda x, env, p: np.maximum.accumulate(x, ax), t.dt, t.bound,
                   ind=ind)
    self.tags.add(f"cummax:{ax}")
    return None if v is None else (v, None)

  def op_transposed(self, t, vecs, ind):
    """A scan or a broadcast computed on the transpose and transposed back (`ml.cumsum(t.T, axis=1).T`)."""
    rows = [v for v in vecs if v.kind == "row" and v.dt == t.dt and not v.keep]
    if rows and self.r.random() < 0.5:
      o = self.r.choice(rows)
      v = self.unary(t, f"({t.name}.T + {o.name}[None, :]).T", lambda x, env, p: x + env[o.name][:, None], t.dt,
                     t.bound + o.bound, ind=ind)
      self.tags.add("transposed:bcast")
    else:
      v = self.unary(t, f"ml.cumsum({t.name}.T, axis=1).T", lambda x, env, p: np.cumsum(x, 0), t.dt,
                     t.bound * self.bm, ind=ind)
      self.tags.add("transposed:cumsum")
    return None if v is None else (v, None)

  def op_mean(self, t, vecs, ind):
    if t.dt == I32:
      return None
    ax = self.r.randint(0, 1)
    n = (self.bm, self.bn)[ax]
    v = self.unary(t, f"jnp.mean({t.name}, axis={ax})", lambda x, env, p: np.asarray(x.sum(ax), np.float32) / np.float32(n),
                   t.dt, t.bound, kind="col" if ax == 0 else "row", keep=False, ind=ind)
    self.tags.add(f"mean:{ax}")
    return None if v is None else (t, v)

  def op_cumsum(self, t, vecs, ind):
    r = self.r
    if vecs and r.random() < 0.35:       # a vector's scan
      a = r.choice(vecs)
      n = self.bm if a.kind == "row" else self.bn
      ax = ", axis=0" if a.keep and a.kind == "row" else (", axis=1" if a.keep else "")
      dt = a.dt
      v = self.unary(a, f"ml.cumsum({a.name}{ax})", lambda x, env, p: np.cumsum(x), dt, a.bound * n, ind=ind)
      self.tags.add(f"cumsum:{a.kind}")
      return None if v is None else (t, v)
    ax = r.randint(0, 1)
    n = (self.bm, self.bn)[ax]
    rev = r.random() < 0.2
    kx = f"ml.cumsum({t.name}, axis={ax}{', reverse=True' if rev else ''})"
    fn = (lambda x, env, p: np.flip(np.cumsum(np.flip(x, ax), ax), ax)) if rev else (lambda x, env, p: np.cumsum(x, ax))
    v = self.unary(t, kx, fn, t.dt, t.bound * n, ind=ind)
    self.tags.add(f"cumsum:{ax}" + (":rev" if rev else ""))
    return None if v is None else (v, None)

  def op_dot(self, t, vecs, ind):
    """`ml.dot` of the tile cast to 16 bits with a TMA-loaded (bn, n2) weight: a tensor-core tile (split by rows)."""
    r = self.r
    if self.dotted or t.dt == I32 and t.bound > 2048 or t.bound > 1024 or self.bn % 16:
      return None
    op = r.choice([F16, BF16])
    if op == BF16 and t.bound > 128 or ind:
      return None
    n2 = r.choice([16, 32, 64, 128])
    wn, wv = self.input((self.bn, n2), op, -2, 2, half=True)
    self.lines.insert(self._tma_at, f"  w_s = ml.smem(({self.bn}, {n2}), jnp.{op})")
    self._tma_at += 1
    self.stmt(f"ml.copy({wn}, w_s)")
    a = t.name if t.dt == op else f"{t.name}.astype(jnp.{op})"
    v = self.new("tile", F32, t.bound * 2 * self.bn)
    an, vn = t.name, v.name
    self.stmt(f"{vn} = ml.dot({a}, w_s)", lambda env, p: env.__setitem__(vn, _rnd(_rnd(env[an], op) @ wv, F32)), ind)
    self.dotted = True
    self.bn = n2
    self.tags.add(f"dot:{op}")
    return v, None

  # ------------------------------------------------------------------ stores
  def store_tile(self, t):
    r, bm, bn, M = self.r, self.bm, self.bn, self.M
    ragged = M < self.gm * bm
    how = r.choice(["whole", "rows", "cols", "window"])
    tn = t.name
    if how == "cols":          # the kept columns only, into a narrower output
      c = r.randint(1, bn)
      o = self.out((M, c), t.dt)
      self.stmt(f"{o}.at[ml.ds({self.r0}, {bm}), ml.ds(0, {bn})].store({tn}, mask=(rr[:, None] < {M}) & "
                f"(ml.arange({bn}) < {c})[None, :])")
      self.steps.append(lambda env, p: env["__outs"][o].__setitem__(slice(p * bm, (p + 1) * bm), env[tn][:M - p * bm, :c]))
    elif how == "window" and not ragged:       # two column windows of a wider output: the tile and its negation
      o = self.out((M, 2 * bn), t.dt)
      self.stmt(f"{o}[ml.ds({self.r0}, {bm}), ml.ds(0, {bn})] = {tn}")
      self.stmt(f"{o}[ml.ds({self.r0}, {bm}), ml.ds({bn}, {bn})] = -{tn}")
      self.steps.append(lambda env, p: env["__outs"][o].__setitem__((slice(p * bm, (p + 1) * bm)), np.concatenate([env[tn], -env[tn]], 1)))
    else:
      o = self.out((M, bn), t.dt)
      if ragged or how == "rows":
        self.stmt(f"{o}.at[ml.ds({self.r0}, {bm}), :].store({tn}, mask=rr[:, None] < {M})")
      else:
        self.stmt(f"{o}[ml.ds({self.r0}, {bm}), :] = {tn}")
      self.steps.append(lambda env, p: env["__outs"][o].__setitem__(slice(p * bm, (p + 1) * bm), env[tn][:M - p * bm]))
    self.tags.add(f"store:{how}")

  def store_vec(self, v):
    bm, M, vn = self.bm, self.M, v.name
    n = v.n
    if v.kind == "row":
      ragged = M < self.gm * bm
      o = self.out((M, 1) if v.keep else (M,), v.dt)
      w = f"ml.ds({self.r0}, {bm})" + (", :" if v.keep else "")
      m = "rr[:, None]" if v.keep else "rr"
      self.stmt(f"{o}.at[{w}].store({vn}, mask={m} < {M})" if ragged else f"{o}[{w}] = {vn}")
      self.steps.append(lambda env, p: env["__outs"][o].__setitem__(
          slice(p * bm, (p + 1) * bm), env[vn][:M - p * bm].reshape((-1, 1) if v.keep else (-1,))))
    else:
      o = self.out((self.gm, n) if v.keep else (self.gm * n,), v.dt)
      self.stmt(f"{o}[ml.ds(i, 1), :] = {vn}" if v.keep else f"{o}[ml.ds(i * {n}, {n})] = {vn}")
      self.steps.append(lambda env, p: env["__outs"][o].__setitem__(
          p if v.keep else slice(p * n, (p + 1) * n), env[vn]))
    self.tags.add(f"store:{v.kind}")

  def epilogue(self, t, n_ops):
    t, vecs = self.chain(t, n_ops)
    self.store_tile(t) if self.r.random() < 0.75 or not vecs else None
    for v in self.r.sample(vecs, min(len(vecs), self.r.randint(1, 2))) if vecs else []:
      self.store_vec(v)
    if not self.specs:
      self.store_tile(t)

  def head(self, ragged_ok=True):
    self.emit("i = ml.program_id(0)")
    self._tma_at = len(self.lines)
    self.M = self.gm * self.bm
    self.mode = self.r.choice(["tma", "load", "masked"] if ragged_ok else ["tma", "load"])
    if self.mode == "masked" and self.r.random() < 0.7:
      self.M -= self.r.randint(1, self.bm - 1)
    self.emit(f"rr = {self.r0} + ml.arange({self.bm})")
    self.tags.add(f"load:{self.mode}")
    self.vecs = []

  # ------------------------------------------------------------------ families
  def f_tile(self):
    self.plan_tile()
    self.head()
    dt = self.r.choice(DTYPES)
    self.tags.add(f"dt:{dt}")
    t = self.load_tile(dt, self.mode)
    self.epilogue(t, self.r.randint(2, 6))

  def f_loop(self):
    r = self.r
    self.plan_tile()
    self.head()
    dt = r.choice(DTYPES)
    self.tags.add(f"dt:{dt}")
    nk = r.randint(1, 3)
    bm, bn = self.bm, self.bn
    carry_v = r.choice(["sum", "max"])
    carry_c = r.random() < 0.5
    carry_t = r.random() < 0.5
    low = {F32: "-jnp.inf", F16: "-jnp.inf", BF16: "-jnp.inf", I32: "-2147483647"}[dt]
    acc = V("acc_v", "row", dt, 0.0, n=bm)
    self.stmt(f"acc_v = ml.zeros(({bm},), jnp.{dt})" if carry_v == "sum" else f"acc_v = ml.full(({bm},), {low}, jnp.{dt})",
              lambda env, p: env.__setitem__("acc_v", np.zeros(bm) if carry_v == "sum" else np.full(bm, -np.inf if dt != I32 else -2147483647.0)))
    if carry_c:
      self.stmt(f"acc_c = ml.zeros(({bn},), jnp.{dt})", lambda env, p: env.__setitem__("acc_c", np.zeros(bn)))
    if carry_t:
      self.stmt(f"acc_t = ml.zeros(({bm}, {bn}), jnp.{dt})", lambda env, p: env.__setitem__("acc_t", np.zeros((bm, bn))))
    if not carry_t:          # the last trip's tile, read after the loop (bound before it, as Python needs)
      self.stmt(f"last = ml.zeros(({bm}, {bn}), jnp.{dt})")
    head = r.choice([f"ml.range({nk})", f"range({nk})"] + ([f"ml.range({nk}, stages=2)"] if self.mode == "tma" else []))
    self.tags.add("loop:" + head.split("(")[0] + (":stages" if "stages" in head else ""))
    self.emit(f"for k in {head}:")
    steps_before = len(self.steps)
    self.steps.append(lambda env, p: None)     # (a marker: the loop's body is replayed nk times below)
    t = self.load_tile(dt, self.mode, ncols=nk * bn, k="k")
    if r.random() < 0.5:
      mk, mf = self.mask(dt)
      t = self.unary(t, f"ml.where({mk}, {t.name}, 0)", lambda x, env, p: np.where(mf(p), x, 0), dt, t.bound, ind=1)
    tn = t.name
    if carry_v == "sum":
      self.stmt(f"acc_v = acc_v + ml.sum({tn}, axis=1)", lambda env, p: env.__setitem__("acc_v", _rnd(env["acc_v"] + _rnd(env[tn].sum(1), dt), dt)), 1)
    else:
      self.stmt(f"acc_v = ml.maximum(acc_v, ml.max({tn}, axis=1))", lambda env, p: env.__setitem__("acc_v", np.maximum(env["acc_v"], env[tn].max(1))), 1)
    if carry_c:
      self.stmt(f"acc_c = acc_c + jnp.sum({tn}, axis=0)", lambda env, p: env.__setitem__("acc_c", _rnd(env["acc_c"] + _rnd(env[tn].sum(0), dt), dt)), 1)
    if carry_t:
      self.stmt(f"acc_t = acc_t + {tn}", lambda env, p: env.__setitem__("acc_t", _rnd(env["acc_t"] + env[tn], dt)), 1)
    if not carry_t:
      self.stmt(f"last = {tn}", lambda env, p: env.__setitem__("last", env[tn]), 1)
    body = self.steps[steps_before + 1:]
    del self.steps[steps_before:]

    def loop(env, p):
      for k in range(nk):
        env["k"] = k
        for fn in body:
          fn(env, p)
    self.steps.append(loop)
    b = t.bound * nk * max(bm, bn)
    acc.bound = b if carry_v == "sum" else t.bound
    if dt == F16 and b > LIMIT[F16]:
      acc.bound = min(acc.bound, LIMIT[F16])
    self.vecs = [acc] + ([V("acc_c", "col", dt, b, n=bn)] if carry_c else [])
    start = V("acc_t", "tile", dt, t.bound * nk) if carry_t else V("last", "tile", dt, t.bound)
    self.tags.add("carried_tile" if carry_t else "last_tile")
    self.epilogue(start, r.randint(1, 4))

  def f_ws(self):
    r = self.r
    wgs = self.block // 128
    self.plan_tile(rows=r.choice([64 * wgs, 128 * wgs]) if wgs > 1 else r.choice([64, 128]))
    self.bn = r.choice([16, 32, 64, 128])
    self.head(ragged_ok=False)
    op = r.choice([F16, BF16])
    bk = r.choice([16, 32, 64])
    nk = r.randint(1, 4)
    bm, bn = self.bm, self.bn
    an, av = self.input((self.M, nk * bk), op, -4, 4)
    bname, bv = self.input((nk * bk, bn), op, -2, 2)
    self.lines.insert(self._tma_at, f"  a_s = ml.smem(({bm}, {bk}), jnp.{op})")
    self.lines.insert(self._tma_at, f"  b_s = ml.smem(({bk}, {bn}), jnp.{op})")
    self.emit(f"acc = ml.zeros(({bm}, {bn}), jnp.float32)")
    mx = r.random() < 0.5
    if mx:
      self.emit(f"mx = ml.full(({bm},), -jnp.inf, jnp.float32)")
    ws = self.block > 128 and r.random() < 0.8
    head = f"ml.range({nk}, stages={r.choice([2, 3])}" + (", warp_specialize=True)" if ws else ")")
    self.tags |= {f"loop:{'ws' if ws else 'stages'}", f"dt:{op}"} | ({"carried_max"} if mx else set())
    self.emit(f"for k in {head}:")
    self.emit(f"  ml.copy({an}.at[ml.ds({self.r0}, {bm}), ml.ds(k * {bk}, {bk})], a_s)")
    self.emit(f"  ml.copy({bname}.at[ml.ds(k * {bk}, {bk}), :], b_s)")
    self.emit("  acc = ml.dot(a_s, b_s, acc)")
    if mx:
      self.emit("  mx = ml.maximum(mx, ml.max(acc, axis=1))")

    def loop(env, p):
      acc, m = np.zeros((bm, bn)), np.full(bm, -np.inf)
      for k in range(nk):
        acc = acc + av[p * bm:(p + 1) * bm, k * bk:(k + 1) * bk] @ bv[k * bk:(k + 1) * bk]
        m = np.maximum(m, acc.max(1))
      env["acc"], env["mx"] = acc, m
    self.steps.append(loop)
    b = 8.0 * bk * nk
    self.vecs = [V("mx", "row", F32, b, n=bm)] if mx else []
    self.dotted = True
    self.epilogue(V("acc", "tile", F32, b), r.randint(1, 4))


OPS = ["ew", "where", "where", "cast", "stat", "stat", "stat", "cumsum", "cumsum", "dot", "mix", "full", "tstat"]
WIDE = OPS + ["slice", "cummax", "transposed", "mean"]     # `Gen(seed, wide=True)`: column slices, cummax, transposes, means


def compare(got, want, tol_dtype=None):
  """Exact inputs: every output is the reference (diff_fuzz's tight rule; float outputs within rounding)."""
  return diff_fuzz.compare(got, want)


def run(gen, *, build=True):
  """(class, detail) of `gen`'s kernel: tests/diff_fuzz.py's classes."""
  return diff_fuzz.run(gen, build=build, compare=lambda g, w, dot=False: compare(g, w))


if __name__ == "__main__":     # python tests/wg_fuzz.py LO HI [EVERY]: interpret mode, a CUDA export of one seed in EVERY
  for s in range(int(sys.argv[1]), int(sys.argv[2])):
    gen = Gen(s)
    print(f"SEED {s}", *run(gen, build=s % int((sys.argv[3:] or [1])[0]) == 0), sorted(gen.tags), flush=True)
