"""Probe 64a's integer-pattern fuzzer: small kernels of integer elementwise chains feeding a cross-lane operation.

Session 52 found ptxas miscompiling an int32 max / min reduction across lanes when a negation fed it (design note
216; only the GPU was wrong, the PTX right). This generator walks the neighbourhood at random, so that a GPU visit
can hunt the class: `Gen(seed)` draws a dtype (int8, int16, int32, uint8, uint16, uint32), a tile of 16-256 rows
and 16-128 columns, block 128, 256 or 384, a load (a plain read, a masked window past the array's end with a fill,
or a TMA copy through SMEM), a chain of 1-4 elementwise ops (neg, abs, ~, + - *, // %, << >>, & | ^,
jnp.minimum / maximum, jnp.where, comparisons cast back, astype between integer widths; an operand a second input
of the same or another integer dtype, or a Python int), then one consumer: `ml.sum / min / max / argmax / argmin`
along axis 0, 1 or the whole tile (keepdims), `ml.cumsum / cummax / cummin` along either axis, or a plain store
(the consumer spelled `jnp.` or `jax.lax.` in three kernels of ten: `jnp.cumsum` keeps an 8- or 16-bit dtype).
Three seeds in ten are "hot" (tag `hot`): a negation (`-v`, `0 - v`, `v * -1`, `~v + 1`) somewhere in the chain and
a max, min, argmax, argmin, cummax or cummin after it, session 52's class and its neighbours.

The reference is the same expression text evaluated eagerly by jnp on the kernel's inputs (the DSL's definition
follows jnp: wrapping in the dtype, jnp's promotion, `jnp.sum` and `ml.cumsum` of 8- and 16-bit integers in 32
bits, max / min scans in the input's dtype), so overflow is allowed and compared bit for bit; inputs are small (-9..9, 0..18 unsigned) so
most chains stay in range. `run(gen)` is tests/diff_fuzz.py's (classes "ok", "wrong", "crash", "refused",
"build"). Deterministic: a seed gives the same kernel and inputs. `gen.family` is the consumer.
"""
from __future__ import annotations

import random

import jax
import jax.numpy as jnp
import numpy as np

INTS = ("int8", "int16", "int32", "uint8", "uint16", "uint32")
BLOCKS = (128, 256, 384)
ROWS = (16, 32, 48, 64, 96, 128, 160, 192, 256)
COLS = (16, 32, 48, 64, 96, 128)
LOADS = ("plain", "masked", "tma")
REDUCES = ("sum", "min", "max", "argmax", "argmin")
SCANS = ("cumsum", "cummax", "cummin")
CONSUMERS = REDUCES * 2 + SCANS + ("store",)
HOT = ("max", "min", "max", "min", "argmax", "argmin", "cummax", "cummin")
OPS = ("neg", "neg", "abs", "invert", "add", "sub", "mul", "floordiv", "mod", "shl", "shr", "and", "or", "xor",
       "minimum", "maximum", "where", "compare", "astype")
SHORT = 3          # a masked window's rows past the array's end
BITS = {d: np.iinfo(d).bits for d in INTS}

HEADER = """import jax
import jax.numpy as jnp
import mgpu_dsl as mg
from mgpu_dsl import language as ml
S = jax.ShapeDtypeStruct


"""


class _ML:
  """The consumers as jnp computes them (the reference's `ml`)."""
  sum, min, max, argmax, argmin = jnp.sum, jnp.min, jnp.max, jnp.argmax, jnp.argmin

  @staticmethod
  def cumsum(x, axis):
    """ml.cumsum: 8- and 16-bit integers give int32 (uint32), as `jnp.sum` does (docs/language.md; `jnp.cumsum`
    keeps the type)."""
    wide = {"int8": jnp.int32, "int16": jnp.int32, "uint8": jnp.uint32, "uint16": jnp.uint32}.get(x.dtype.name)
    return jnp.cumsum(x, axis=axis, dtype=wide or x.dtype)

  @staticmethod
  def cummax(x, axis):
    return jax.lax.cummax(x, axis=axis)

  @staticmethod
  def cummin(x, axis):
    return jax.lax.cummin(x, axis=axis)


def _signed(dt):
  return np.iinfo(dt).min < 0


class Gen:
  """One kernel: `source`, `args`, `refs`, `tags`, `family` (the consumer), `combo` (a one-line summary)."""

  def __init__(self, seed):
    self.seed = seed
    r = self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.dt = r.choice(INTS)
    self.block = r.choice(BLOCKS)
    self.rows, self.cols = r.choice(ROWS), r.choice(COLS)
    while self.rows * self.cols > 96 * self.block:     # (a tile past what the threads hold: MG403 by design)
      self.cols = r.choice(COLS)
    self.load = r.choice(LOADS)
    # a hot seed: session 52's class (a negation, somewhere in the chain, feeding a max / min across lanes)
    self.hot = r.random() < 0.3
    self.family = r.choice(HOT if self.hot else CONSUMERS)
    self.tags = {f"dt:{self.dt}", f"block:{self.block}", f"shape:{self.rows}x{self.cols}", f"load:{self.load}",
                 f"out:{self.family}"} | ({"hot"} if self.hot else set())
    self.lines, self.args, self.env, self.n = [], [], {"jnp": jnp, "jax": jax, "ml": _ML}, 0
    self.ydt = self.dt if r.random() < 0.75 else r.choice(INTS)
    v = self._load(self.dt)
    self.y = self._load(self.ydt) if r.random() < 0.6 else None
    if self.y is not None and self.ydt != self.dt:
      self.tags.add(f"y:{self.ydt}")
    n_ops = r.randint(1, 4)
    neg_at = r.randrange(n_ops) if self.hot else -1
    for k in range(n_ops):
      for _ in range(6):          # (an op jnp refuses, or one whose promotion leaves the integers, is drawn again)
        w = self._op(v, "neg" if k == neg_at else None)
        if w is not None:
          v = w
          break
    self._consume(v)

  # ------------------------------------------------------------------ plumbing
  def bind(self, expr, tag=None):
    """`vK = expr` in the kernel and `expr` evaluated by jnp now; None where jnp refuses or leaves the integers."""
    try:
      val = eval(expr, dict(self.env))
    except Exception:   # noqa: BLE001  jnp's own refusal (a literal out of the dtype's range): not a kernel
      return None
    if val.dtype.name not in INTS or val.shape != (self.rows, self.cols):
      return None
    name = f"v{self.n}"
    self.n += 1
    self.env[name] = val
    self.lines.append(f"  {name} = {expr}")
    if tag:
      self.tags.add(f"op:{tag}")
    return name

  def lit(self, dt, lo=-6, hi=9):
    """A small Python int in range of `dt` (non-negative for unsigned types)."""
    return self.r.randint(0 if not _signed(dt) else lo, hi)

  def _load(self, dt):
    k = len(self.args)
    rows = self.rows - SHORT if self.load == "masked" else self.rows
    lo, hi = (-9, 9) if _signed(dt) else (0, 18)
    a = self.rng.integers(lo, hi + 1, (rows, self.cols)).astype(dt)
    self.args.append(a)
    x = f"x{k}"
    if self.load == "plain":
      self.env[x] = jnp.asarray(a)
      return self.bind(f"{x}[...]")
    if self.load == "tma":
      self.env[f"{x}_s"] = jnp.asarray(a)
      self.lines += [f"  {x}_s = ml.smem(({self.rows}, {self.cols}), jnp.{dt})", f"  ml.copy({x}, {x}_s)"]
      return self.bind(f"{x}_s[...]")
    fill = self.lit(dt, -9, 20)
    self.lines += [f"  rr{k} = ml.arange({self.rows})",
                   f"  v{self.n} = {x}.at[ml.ds(0, {self.rows}), :].load(mask=rr{k}[:, None] < {rows}, other={fill})"]
    self.env[f"v{self.n}"] = jnp.asarray(np.pad(a, ((0, SHORT), (0, 0)), constant_values=np.asarray(fill).astype(dt)))
    self.n += 1
    return f"v{self.n - 1}"

  # ------------------------------------------------------------------ ops
  def _y(self, v):
    """The second input where it meets `v` (None without one, and for uint32 against a signed type: jnp's int64,
    MG104 by design, docs/language.md)."""
    pair = {self.env[v].dtype.name, self.ydt}
    if self.y is None or ("uint32" in pair and any(_signed(d) for d in pair)):
      return None
    return self.y

  def _other(self, v):
    """A second operand: the second input (mostly) or a Python int."""
    if self._y(v) is not None and self.r.random() < 0.6:
      return self.y
    return str(self.lit(self.env[v].dtype.name))

  def _op(self, v, kind=None):
    r = self.r
    kind = kind or r.choice(OPS)
    dt = self.env[v].dtype.name
    bits = BITS[dt]
    if kind == "neg":
      return self.bind(r.choice([f"-{v}", f"-{v}", f"0 - {v}", f"{v} * -1", f"~{v} + 1"]), kind)
    if kind == "abs":
      return self.bind(r.choice([f"jnp.abs({v})", f"ml.abs({v})"]), kind) if _signed(dt) else None
    if kind == "invert":
      return self.bind(f"~{v}", kind)
    if kind in ("add", "sub", "mul", "and", "or", "xor"):
      o = {"add": "+", "sub": "-", "mul": "*", "and": "&", "or": "|", "xor": "^"}[kind]
      b = self._other(v)
      e = f"{v} {o} {b}" if r.random() < 0.8 else f"{b} {o} {v}"
      return self.bind(e, kind + (":y" if b == self.y else ":lit"))
    if kind in ("floordiv", "mod"):
      o = "//" if kind == "floordiv" else "%"
      if self._y(v) is not None and r.random() < 0.5:
        d = f"(jnp.abs({self.y}) % 5 + 1)" if _signed(self.ydt) else f"({self.y} % 5 + 1)"
        return self.bind(f"{v} {o} {d}", kind + ":y")
      d = r.choice([2, 3, 4, 5, 7, -2, -3]) if _signed(dt) else r.choice([2, 3, 4, 5, 7])
      return self.bind(f"{v} {o} {d}", kind + ":lit")
    if kind in ("shl", "shr"):
      o = "<<" if kind == "shl" else ">>"
      if self.y is not None and self.ydt == dt and r.random() < 0.4:
        return self.bind(f"{v} {o} ({self.y} & 3)", kind + ":y")
      return self.bind(f"{v} {o} {r.choice([0, 1, 2, 3, bits - 1])}", kind + ":lit")
    if kind in ("minimum", "maximum"):
      return self.bind(f"jnp.{kind}({v}, {self._other(v)})", kind)
    if kind == "where":
      b = self._other(v)
      c = r.choice([f"{v} > {b}", f"{v} < {self.lit(dt)}", f"({v} & 1) == 0"])
      t, f = r.choice([(v, b), (f"-{v}", v), (v, str(self.lit(dt)))])
      return self.bind(f"jnp.where({c}, {t}, {f})", kind)
    if kind == "compare":
      c = r.choice(["<", "<=", ">", ">=", "==", "!="])
      return self.bind(f"({v} {c} {self._other(v)}).astype(jnp.{r.choice([dt, 'int32'])})", kind)
    new = r.choice([d for d in INTS if d != dt])
    return self.bind(f"{v}.astype(jnp.{new})", "astype:" + new)

  # ------------------------------------------------------------------ the consumer
  def _consume(self, v):
    f = self.family
    self.fed = self.env[v].dtype.name          # the dtype the consumer takes
    # spelled `ml.` (mostly) or as jnp / lax: `jnp.cumsum` keeps an 8- or 16-bit type and wraps, `ml.cumsum` widens
    lib = "ml" if f == "store" or self.r.random() < 0.7 else ("jax.lax" if f in ("cummax", "cummin") else "jnp")
    if f == "store":
      e, tag = v, "store"
    elif f in SCANS:
      ax = self.r.randint(0, 1)
      e, tag = f"{lib}.{f}({v}, axis={ax})", f"{f}:{ax}"
    else:
      ax = self.r.choice([0, 1, None])
      e = f"{lib}.{f}({v}, axis={ax})" if ax is not None else f"{lib}.{f}({v}, keepdims=True)"
      tag = f"{f}:{'all' if ax is None else ax}"
    self.tags |= {"consume:" + tag} | ({f"spelled:{lib}"} if lib != "ml" else set())
    ref = np.asarray(eval(e, dict(self.env)))
    self.refs = (ref,)
    self.lines.append(f"  o0[...] = {e}")
    self.combo = f"{self.dt} {self.load} {self.rows}x{self.cols} b{self.block} -> {tag}"

  @property
  def source(self):
    ins = ", ".join(f"x{k}" for k in range(len(self.args)))
    ref = self.refs[0]
    head = (f"@mg.mgpu_kernel(out_shape=lambda *a: (S({tuple(ref.shape)}, jnp.{ref.dtype.name}),), grid=(1,), "
            f"block={self.block})\ndef kernel({ins}, o0):\n")
    return HEADER + head + "\n".join(self.lines) + "\n"


def run(gen, *, build=True):
  """tests/diff_fuzz.py's classification of kernel `gen`."""
  import diff_fuzz
  return diff_fuzz.run(gen, build=build)


if __name__ == "__main__":
  import sys
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  for s in range(lo, hi):
    g = Gen(s)
    cls, detail = run(g, build="--nobuild" not in sys.argv)
    print(f"SEED {s} {cls} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
