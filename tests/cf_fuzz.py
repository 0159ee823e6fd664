"""Probe 59c's differential fuzzer of control-flow-structured kernels: random kernels whose structure is control
flow over register values and scalars. `range` / `ml.range` loops of static and run-time trip counts (zero trips
too, descending and stepped ones), loops carrying several tensors, scalars and tuples, nested loops, `while` loops
of data-dependent conditions, `if` / `elif` / `else` on scalars read from GMEM, on program ids, loop indices and
reductions, `a if c else b`, early `return` (at the top, under ifs and inside loops), `break` / `continue`,
`for ... else`, `ml.where` masks of values and of `ml.arange` against loop indices, `lax.fori_loop` of a lambda,
accumulations across trips, GMEM rows read at run-time indices and rows stored in loops.

`Gen(seed)` draws a plan and writes the kernel's body once as Python text (its looping statements in
tests/cf_fuzz_loops.py). The same text is the NumPy/jnp
reference: it runs as a plain Python function (`reference`), once per program of the grid, with `ml` a namespace of
jnp stand-ins (`ml.range` is `range`, `ml.where` `jnp.where`, `ml.program_id` the program's id) and the refs NumPy
arrays whose reads give jnp values (so promotion is jnp's) and whose writes store into the outputs. Python's own
control flow runs it: the kernel has to compute what Python computes. Values stay exact where the control flow
reads them: inputs are small whole numbers in float32, tensors are clipped to +-4096 when assigned, the reductions
that conditions read are max, min and sums of `jnp.floor`; so a decision never depends on a summation order.

Every path stores every output (a `return` stores the values it has first), each program its own rows. `run(gen)`
classifies as tests/diff_fuzz.py does: "ok", "wrong", "crash" (a raw traceback or InternalError), "refused" (a
KernelError of this legal kernel), "build" (interpret mode right, the CUDA export not); "gen" is a plan whose
reference itself failed (a fuzzer bug). Deterministic: a seed gives the same kernel and inputs.
"""
from __future__ import annotations

import math
import random
import sys
import types

import jax
import jax.numpy as jnp
import numpy as np

import diff_fuzz
from cf_fuzz_loops import LoopStatements

SHAPES = [(128,), (256,), (128,), (8, 128), (16, 64), (2, 128)]
CLIP = "4096.0"


class Ref:
  """A ref of the reference: reads are jnp values (jnp's promotion), writes store NumPy values."""

  def __init__(self, a):
    self.a = a

  def __getitem__(self, idx):
    return jnp.asarray(self.a[_np_index(idx)])

  def __setitem__(self, idx, v):
    self.a[_np_index(idx)] = np.asarray(v)

  @property
  def shape(self):
    return self.a.shape

  def __iter__(self):
    return (Ref(self.a[k]) for k in range(len(self.a)))

  def __len__(self):
    return len(self.a)


def _np_index(idx):
  if isinstance(idx, tuple):
    return tuple(_np_index(i) for i in idx)
  if isinstance(idx, (jax.Array, np.ndarray, np.generic)):
    return int(idx)
  return idx


def _shim(pid):
  ns = types.SimpleNamespace()
  ns.program_id = lambda a: pid[a]
  ns.range = range
  ns.static_range = range
  ns.where = jnp.where
  ns.sum = jnp.sum
  ns.max = jnp.max
  ns.min = jnp.min
  ns.maximum = jnp.maximum
  ns.minimum = jnp.minimum
  ns.zeros = lambda shape, dtype=jnp.float32: jnp.zeros(shape, dtype)
  ns.arange = lambda *a: jnp.arange(*a, dtype=jnp.int32)
  ns.floor = jnp.floor
  ns.any = jnp.any
  ns.all = jnp.all
  return ns


def _fori_loop(lo, hi, body, init):
  c = init
  for i in range(int(lo), int(hi)):
    c = body(i, c)
  return c


def _while_loop(cond, body, init):
  c = init
  while bool(cond(c)):
    c = body(c)
  return c


# jax.lax's loops and cond by their definitions (jax's docs give them so), run as Python: eager jax compiles each
# lambda anew, seconds a call
PY_LAX = types.SimpleNamespace(fori_loop=_fori_loop, while_loop=_while_loop,
                               cond=lambda p, f, g, *ops: f(*ops) if bool(p) else g(*ops),
                               switch=lambda i, fs, *ops: fs[min(max(int(i), 0), len(fs) - 1)](*ops))


class Gen(LoopStatements):
  """One random control-flow kernel (`source`, `args`, `refs`) from the plan of `seed`."""

  def __init__(self, seed, depth=None):
    self.seed = seed
    self.r = r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.tags = set()
    self.shape = r.choice(SHAPES)
    self.grid = r.choice([(1,), (2,), (3,), (2, 2), (1,), (2,)])
    self.G = int(np.prod(self.grid))
    self.max_depth = depth if depth is not None else r.choice([1, 2, 2, 3, 3])
    self.XR = r.choice([3, 4, 5])
    self.nt, self.ns, self.nc = r.randint(1, 3), r.randint(1, 2), r.randint(1, 2)
    self.pair = r.random() < 0.3
    self.lst = r.random() < 0.2        # a list carried, its items assigned (lst[0] = ...)
    self.dct = r.random() < 0.2        # a dict carried, its items assigned (d["a"] = ...)
    self.rows_out = r.random() < 0.3
    self.ins = [("x0", self._floats((self.G,) + self.shape)), ("x1", self._floats((self.XR,) + self.shape)),
                ("n0", self.rng.integers(0, 5, 8).astype(np.int32)),
                ("n1", self.rng.integers(0, 5, (self.G, 4)).astype(np.int32)),
                ("xs", self.rng.integers(-6, 7, 8).astype(np.float32))]
    self.ints = r.random() < 0.3
    self.narrow = r.choice([None, None, "bfloat16", "float16", "int8", "uint8", "int16"])   # h0: a narrow carry      # an int32 tensor carried too (k0, a count of elements)
    self.ins[2][1][self.rng.integers(0, 8)] = 0       # a zero trip count is always at hand
    self.lines = []
    self.ind = 1
    self.budget = r.randint(6, 16)        # statements
    self.loop_ids = 0
    self._build()

  def _floats(self, shape):
    return self.rng.integers(-8, 9, shape).astype(np.float32)

  # ------------------------------------------------------------------ names
  @property
  def T(self):
    return [f"t{k}" for k in range(self.nt)]

  @property
  def S(self):
    return [f"s{k}" for k in range(self.ns)]

  @property
  def C(self):
    return [f"c{k}" for k in range(self.nc)]

  @property
  def extras(self):
    """The (tensor, float) leaves of the containers carried (tuple, list, dict)."""
    return ([("pair[0]", "pair[1]")] if self.pair else []) + ([("lst[0]", "lst[1]")] if self.lst else []) + (
        [('d["a"]', 'd["b"]')] if self.dct else [])

  def emit(self, line):
    self.lines.append("  " * self.ind + line)

  # ------------------------------------------------------------------ expressions
  def tensor(self, depth=0, extra=()):
    """A float32 tensor expression of the kernel's shape."""
    r = self.r
    names = self.T + list(extra)
    if depth >= 2 or r.random() < 0.3:
      k = r.random()
      if k < 0.75:
        return r.choice(names)
      if k < 0.9:
        return f"x1[{self.row_index()}]"
      return "x0[pid]"
    a, b = self.tensor(depth + 1, extra), self.tensor(depth + 1, extra)
    k = r.randrange(12)
    if k == 0:
      return f"({a} + {b})"
    if k == 1:
      return f"({a} - {b})"
    if k == 2:
      return f"({a} * 0.5)"
    if k == 3:
      return f"{r.choice(['jnp', 'ml'])}.maximum({a}, {b})"
    if k == 4:
      return f"jnp.minimum({a}, {b})"
    if k == 5:
      return f"jnp.abs({a})"
    if k == 6:
      self.tags.add("where")
      return f"{r.choice(['ml', 'jnp'])}.where({a} > {self.fconst()}, {a}, {b})"
    if k == 7:
      self.tags.add("iota_mask")
      ax = "ml.arange({})".format(self.shape[-1]) + ("[None, :]" if len(self.shape) == 2 else "")
      return f"ml.where({ax} < {self.int_scalar()}, {a}, {b})"
    if k == 8:
      return f"({a} + {self.float_scalar()})"
    if k == 9:
      return f"({a} * {r.choice(['2.0', '-1.0', '0.25'])})"
    if k == 10:
      return f"({a} if {self.cond()} else {b})"
    if k == 11 and r.random() < 0.5:
      self.tags.add("int_scalar_in_tensor")
      return f"({a} + {r.choice(['d0', self.int_scalar()])})"
    return f"(-{a})"

  def row_index(self):
    """An index into x1's rows, in range on every path (every int scalar here is >= 0)."""
    return f"({self.int_scalar()}) % {self.XR}"

  def fconst(self):
    return repr(float(self.r.randint(-6, 6)))

  def reduction(self, t=None):
    r = self.r
    t = t or r.choice(self.T)
    k = r.randrange(4)
    self.tags.add("reduce")
    if k == 0:
      return f"{r.choice(['jnp', 'ml'])}.max({t})"
    if k == 1:
      return f"jnp.min({t})"
    if k == 2:
      return f"{r.choice(['jnp', 'ml'])}.sum(jnp.floor({t} * 0.5))"
    return f"{r.choice(['jnp', 'ml'])}.sum(jnp.floor({t}))"

  def float_scalar(self):
    r = self.r
    k = r.random()
    if k < 0.4:
      return r.choice(self.S)
    if k < 0.5:
      self.tags.add("gmem_float")
      return f"xs[{self.int_scalar()} % 8]"
    if k < 0.7:
      return self.reduction()
    if k < 0.8:
      return "d0 * 0.5"
    return f"{r.choice(self.S)} * 0.5"

  def int_scalar(self):
    """A non-negative int32 scalar: a counter, a loop index, a value read from GMEM, the program id."""
    r = self.r
    opts = self.C + ["pid"] + [f"n0[{r.randrange(8)}]", f"n1[pid, {r.randrange(4)}]"] + self.idx * 2
    return r.choice(opts)

  def cond(self, depth=0):
    r = self.r
    k = r.randrange(11 if depth == 0 else 8)
    if k == 0:
      return f"{self.int_scalar()} > {r.randint(0, 4)}"
    if k == 1:
      self.tags.add("if_pid")
      return f"pid {r.choice(['==', '!=', '<', '>='])} {r.randint(0, self.G - 1)}"
    if k == 2 and self.idx:
      return f"{r.choice(self.idx)} % 2 == {r.randint(0, 1)}"
    if k == 3:
      self.tags.add("if_data")
      return f"{self.reduction()} > {self.fconst()}"
    if k == 4:
      return f"{r.choice(self.S)} < {self.fconst()}"
    if k == 5:
      self.tags.add("if_gmem")
      return f"n0[{r.randrange(8)}] {r.choice(['==', '<=', '>'])} {r.randint(0, 4)}"
    if k == 6:
      return f"{self.int_scalar()} < {self.int_scalar()}"
    if k == 7 and r.random() < 0.3:
      self.tags.add("any_tensor")
      return f"{r.choice(['ml.any', 'jnp.any', 'ml.all'])}({r.choice(self.T)} > {self.fconst()})"
    if k == 7 and r.random() < 0.3:
      self.tags.add("gmem_float")
      return f"xs[{self.int_scalar()} % 8] > {self.fconst()}"
    if k == 7:
      self.tags.add("chained")
      return f"0 < {self.int_scalar()} <= {self.int_scalar()}"
    if k == 8:
      return f"({self.cond(1)}) and ({self.cond(1)})"
    if k == 9:
      return f"({self.cond(1)}) or ({self.cond(1)})"
    if r.random() < 0.4:
      return r.choice(["f0", f"d0 < {r.randint(-3, 3)}", "d0 % 2 == 0", f"max(d0, {self.int_scalar()}) > 2",
                       f"d0 // 2 >= {r.randint(-2, 2)}", "d0", r.choice(self.C), r.choice(self.S), "not d0",
                       f"not {r.choice(self.C)} % 3"])     # (numbers by their truth, as Python's if)
    return f"not ({self.cond(1)})"

  # ------------------------------------------------------------------ statements
  def store_all(self):
    for k, t in enumerate(self.T):
      self.emit(f"ot[pid, {k}] = {t}")
    for k, s in enumerate(self.S):
      self.emit(f"os[pid, {k}] = {s}")
    for k, c in enumerate(self.C):
      self.emit(f"oc[pid, {k}] = {c}")
    self.emit(f"oc[pid, {self.nc}] = d0")
    self.emit(f"oc[pid, {self.nc + 1}] = 1 if f0 else 0")
    if self.ints:
      self.emit("ok[pid] = k0")
    if self.narrow:
      self.emit("oh[pid] = h0")
    for k, (t, f) in enumerate(self.extras):
      self.emit(f"ot[pid, {self.nt + k}] = {t}")
      self.emit(f"os[pid, {self.ns + k}] = {f}")

  def clipped(self, e):
    return f"jnp.clip({e}, -{CLIP}, {CLIP})" if self.r.random() < 0.5 else f"ml.minimum(ml.maximum({e}, -{CLIP}), {CLIP})"

  def stmt(self, depth):
    r = self.r
    self.budget -= 1
    kinds = ["t"] * 5 + ["s"] * 2 + ["c"] * 2
    if depth < self.max_depth:
      kinds += ["if"] * 3 + ["for"] * 4 + ["while"] * 2
    if self.loops:
      kinds += ["break", "continue"]
    kinds += ["return"] + ["swap"] + ["fori"] + (["pair"] * 2 if self.pair else []) + (["row"] if self.rows_out else [])
    kinds += ["narrow"] * 3 if self.narrow else []
    kinds += ["switch", "multi", "sfloat"]
    if depth < self.max_depth:
      kinds += ["while_tensor", "helper_while", "fori_def", "while_def"]
    kinds += ["walrus", "anyall", "sternary", "swhere", "reset", "d", "d", "f"] + (["ints"] * 2 if self.ints else [])
    kinds += (["lst"] * 2 if self.lst else []) + (["dct"] * 2 if self.dct else [])
    if depth < self.max_depth:
      kinds += ["lastidx", "while_walrus", "for_else_jump"]
    if depth < self.max_depth:
      kinds += ["lax_while", "lax_cond", "while_true", "helper", "rows", "static", "fori_tuple"]
    k = r.choice(kinds)
    getattr(self, "s_" + k)(depth)

  def block(self, depth, n=None):
    n = n or self.r.randint(1, 3)
    start = len(self.lines)
    for _ in range(n):
      if self.budget <= 0 and len(self.lines) > start:
        break
      self.stmt(depth)

  def s_t(self, depth):
    t = self.r.choice(self.T)
    if self.r.random() < 0.25:
      self.tags.add("augassign")
      self.emit(f"{t} += {self.clipped(self.tensor(1))} * 0.5")
      self.emit(f"{t} = {self.clipped(t)}")
    else:
      self.emit(f"{t} = {self.clipped(self.tensor())}")

  def s_s(self, depth):
    s = self.r.choice(self.S)
    k = self.r.randrange(3)
    if k == 0:
      self.emit(f"{s} = {s} + {self.reduction()}")
    elif k == 1:
      self.emit(f"{s} = jnp.maximum({s}, {self.reduction()})")
    else:
      self.emit(f"{s} = {s} * 0.5 + {self.int_scalar()}")

  def s_c(self, depth):
    c = self.r.choice(self.C)
    k = self.r.randrange(3)
    if k == 0:
      self.emit(f"{c} += 1")
    elif k == 1:
      self.emit(f"{c} = ({c} + {self.int_scalar()}) % 97")
    else:
      self.emit(f"{c} = ({c} + {self.int_scalar()}) % 7")

  def s_swap(self, depth):
    self.tags.add("tuple_assign")
    t = self.r.choice(self.T)
    u = self.r.choice(self.T)
    s = self.r.choice(self.S)
    self.emit(f"{t}, {s} = {self.clipped(u + ' + ' + s)}, {s} - 1.0")

  def s_pair(self, depth):
    self.tags.add("tuple_carry")
    self.emit(f"pair = ({self.clipped('pair[0] * 0.5 + ' + self.tensor(1))}, pair[1] + {self.float_scalar()})")

  def s_row(self, depth):
    self.tags.add("row_store")
    self.emit(f"orow[pid, ({self.int_scalar()}) % 4] = {self.tensor(1)}")

  def s_if(self, depth):
    self.tags.add("if")
    self.emit(f"if {self.cond()}:")
    self.ind += 1
    self.block(depth + 1)
    self.ind -= 1
    k = self.r.random()
    if k < 0.2:
      self.tags.add("elif")
      self.emit(f"elif {self.cond()}:")
      self.ind += 1
      self.block(depth + 1)
      self.ind -= 1
    if k < 0.6:
      self.emit("else:")
      self.ind += 1
      self.block(depth + 1)
      self.ind -= 1

  def s_break(self, depth):
    self.tags.add("break")
    self.emit(f"if {self.cond()}:")
    self.ind += 1
    if self.r.random() < 0.5:
      self.s_t(depth)
    self.emit("break")
    self.ind -= 1

  def s_continue(self, depth):
    self.tags.add("continue")
    self.emit(f"if {self.cond()}:")
    self.ind += 1
    self.emit("continue")
    self.ind -= 1

  def s_return(self, depth):
    self.tags.add("return" if not self.loops else "return_in_loop")
    self.emit(f"if {self.cond()}:")
    self.ind += 1
    self.store_all()
    self.emit("return")
    self.ind -= 1

  def s_lst(self, depth):
    self.tags.add("list_carry")
    if self.r.random() < 0.6:
      self.emit(f"lst[0] = {self.clipped('lst[0] + ' + self.tensor(1))}")
    else:
      self.emit(f"lst[1] = lst[1] * 0.5 + {self.float_scalar()}")

  def s_dct(self, depth):
    self.tags.add("dict_carry")
    if self.r.random() < 0.6:
      self.emit(f'd["a"] = {self.clipped(chr(100) + "[" + repr("a") + "] * 2.0 - " + self.tensor(1))}')
    else:
      self.emit(f'd["b"] = jnp.maximum(d["b"], {self.float_scalar()})')

  def s_narrow(self, depth):
    """h0, a bfloat16 / float16 / int8 / uint8 / int16 tensor carried: its own rounding and wrapping, as jnp's."""
    self.tags.add("narrow:" + self.narrow)
    dt = self.narrow
    t = self.r.choice(self.T)
    if dt in ("bfloat16", "float16"):
      k = self.r.randrange(5)
      e = [f"h0 + {self.clipped(t)}.astype(jnp.{dt})", "h0 * 0.5 + 1.0", f"jnp.maximum(h0, {t}.astype(jnp.{dt}))",
           f"jnp.where({t} > 0.0, h0 - 1.5, h0)", f"(h0.astype(jnp.float32) * 1.5 + {self.float_scalar()}).astype(jnp.{dt})"][k]
      self.emit(f"h0 = jnp.clip({e}, -1000.0, 1000.0)")
    else:
      k = self.r.randrange(6)
      e = [f"h0 + ({t} > 0.0).astype(jnp.{dt})", "h0 * 3 + 1", "h0 // 2", f"h0 - {self.r.randint(1, 9)}",
           f"jnp.where({t} > {self.fconst()}, h0, h0 + 7)", "h0 % 5 + h0"][k]
      self.emit(f"h0 = {e}")

  def s_multi(self, depth):
    self.tags.add("multi_target")
    t, u = self.r.sample(self.T, 2) if len(self.T) > 1 else (self.T[0], None)
    if u is None:
      self.emit(f"{t} = {t} = {self.clipped(self.tensor(1))}")
    else:
      e = self.tensor(1)
      self.emit(f"{t} = {u} = {self.clipped(e if self.r.random() < 0.5 else f'{e} if {self.cond(1)} else {t} if {self.cond(1)} else {u}')}")

  def s_sfloat(self, depth):
    """Float scalars from ints: true division, math.floor of a float, `**`."""
    self.tags.add("scalar_math")
    s = self.r.choice(self.S)
    k = self.r.randrange(4)
    if k == 0:
      self.emit(f"{s} = {s} + {self.int_scalar()} / 2")
    elif k == 1:
      c = self.r.choice(self.C)
      self.emit(f"{c} = ({c} + math.floor({s} * 0.25 + 100.5)) % 97")
    elif k == 2:
      self.emit(f"{s} = jnp.minimum({s} ** 2, 1000.0)")
    else:
      self.emit(f"{s} = {s} - d0 / 4")

  def s_d(self, depth):
    self.tags.add("signed_int")
    k = self.r.randrange(7)
    e = ["d0 - {}".format(self.int_scalar()), "d0 // 3", "d0 % 5 - 2", "-d0 + 1", "abs(d0) - {}".format(self.int_scalar()),
         "d0 * 3 // -2", "(d0 - 7) % -3 + d0 // 4"][k]
    self.emit(f"d0 = max(min({e}, 1000), -1000)")

  def s_f(self, depth):
    self.tags.add("bool_carry")
    if self.r.random() < 0.3:       # a boolean in arithmetic: Python's bool is an int
      self.tags.add("bool_arith")
      k = self.r.randrange(3)
      if k == 0:
        c = self.r.choice(self.C)
        self.emit(f"{c} = ({c} + f0) % 97")
      elif k == 1:
        s = self.r.choice(self.S)
        self.emit(f"{s} = {s} + f0 * 2.5")
      else:
        t = self.r.choice(self.T)
        self.emit(f"{t} = {t} * f0 + {t} * 0.5")
      return
    k = self.r.randrange(4)
    self.emit(["f0 = f0 or ({})".format(self.cond(1)), "f0 = not f0", "f0 = f0 and ({})".format(self.cond(1)),
               "f0 = ({}) != f0".format(self.cond(1))][k])

  def s_sternary(self, depth):
    self.tags.add("scalar_ternary")
    s = self.r.choice(self.S)
    self.emit(f"{s} = {s} + 1.0 if {self.cond()} else {s} * 0.5")

  def s_swhere(self, depth):
    self.tags.add("scalar_where")
    t = self.r.choice(self.T)
    self.emit(f"{t} = {self.r.choice(['jnp', 'ml'])}.where({self.cond(1)}, {t}, {self.tensor(1)})")

  def s_reset(self, depth):
    """A name rebound in one branch to a Python number (weakly typed) and in the other to a typed value."""
    self.tags.add("weak_merge")
    if self.r.random() < 0.5:
      c = self.r.choice(self.C)
      self.emit(f"if {self.cond()}:")
      self.emit(f"  {c} = 0")
      self.emit("else:")
      self.emit(f"  {c} = ({c} + n0[{self.r.randrange(8)}]) % 97")
    else:
      s = self.r.choice(self.S)
      self.emit(f"if {self.cond()}:")
      self.emit(f"  {s} = 2.0")
      if self.r.random() < 0.5:
        self.emit("else:")
        self.emit(f"  {s} = {self.reduction()}")

  def s_walrus(self, depth):
    self.tags.add("walrus")
    c = self.r.choice(self.C)
    self.emit(f"if (m := n0[{self.r.randrange(8)}]) > {self.r.randint(0, 3)}:")
    self.emit(f"  {c} = ({c} + m) % 97")

  def s_anyall(self, depth):
    self.tags.add("anyall")
    f = self.r.choice(["any", "all"])
    self.emit(f"if {f}([{self.cond(1)}, {self.cond(1)}, {self.cond(1)}]):")
    self.ind += 1
    self.s_t(depth)
    self.ind -= 1

  def s_ints(self, depth):
    self.tags.add("int_tensor")
    k = self.r.randrange(3)
    if k == 0:
      self.emit(f"k0 = k0 + ({self.r.choice(self.T)} > {self.fconst()}).astype(jnp.int32)")
    elif k == 1:
      t = self.r.choice(self.T)
      self.emit(f"{t} = jnp.where(k0 > {self.r.randint(0, 3)}, {t}, {self.tensor(1)})")
    else:
      self.emit(f"k0 = jnp.minimum(k0 + {self.int_scalar()}, 50)")

  # ------------------------------------------------------------------ the kernel
  def _build(self):
    r = self.r
    self.idx, self.loops, self.whiles = [], [], []
    if len(self.grid) == 2:
      self.emit(f"pid = ml.program_id(0) * {self.grid[1]} + ml.program_id(1)")
    else:
      self.emit("pid = ml.program_id(0)")
    for k, t in enumerate(self.T):
      init = r.choice(["x0[pid]", f"x1[{k % self.XR}]", "x0[pid] * 0.5 + x1[0]", f"ml.zeros({self.shape}, jnp.float32)"])
      self.emit(f"{t} = {init}")
    for s in self.S:
      self.emit(f"{s} = {r.choice(['0.0', '1.0', self.reduction('x0[pid]')])}")
    for c in self.C:
      self.emit(f"{c} = {r.choice(['0', '0', 'pid', 'n0[1]'])}")
    self.emit(f"d0 = {r.choice(['0', 'pid - 2', '-3', 'n0[2] - n0[3]'])}")      # a signed int: // and % of negatives
    self.emit(f"f0 = {r.choice(['False', 'pid > 0', 'n0[0] == 0'])}")           # a boolean carried
    if self.pair:
      self.emit("pair = (x0[pid], 0.0)")
    if self.ints:
      self.emit(f"k0 = ml.zeros({self.shape}, jnp.int32)")
    if self.narrow:
      self.emit(f"h0 = x0[pid].astype(jnp.{self.narrow})" if self.narrow != "uint8" else
                "h0 = jnp.abs(x0[pid]).astype(jnp.uint8)")
    if self.lst:
      self.emit("lst = [x0[pid] * 0.5, 0.0]")
    if self.dct:
      self.emit('d = {"a": x1[0], "b": 1.0}')
    if self.rows_out:
      self.emit("for q in range(4):")
      self.emit("  orow[pid, q] = x1[0]")
    while self.budget > 0:
      self.stmt(0)
    self.store_all()

  # ------------------------------------------------------------------ source, inputs, reference
  def out_specs(self):
    f32, i32 = np.float32, np.int32
    outs = [("ot", (self.G, self.nt + len(self.extras)) + self.shape, f32),
            ("os", (self.G, self.ns + len(self.extras)), f32),
            ("oc", (self.G, self.nc + 2), i32)]
    if self.rows_out:
      outs.append(("orow", (self.G, 4) + self.shape, f32))
    if self.ints:
      outs.append(("ok", (self.G,) + self.shape, i32))
    if self.narrow:
      outs.append(("oh", (self.G,) + self.shape, jnp.dtype(self.narrow)))
    return outs

  @property
  def body(self):
    return "\n".join(self.lines) + "\n"

  @property
  def source(self):
    ins = ", ".join(n for n, _ in self.ins)
    outs = ", ".join(n for n, _, _ in self.out_specs())
    specs = ", ".join(f"S({s}, jnp.{np.dtype(d).name})" for _, s, d in self.out_specs())
    src = diff_fuzz.HEADER + "import math\n" + f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: ({specs},), grid={self.grid})\n"
    return src + f"def kernel({ins}, {outs}):\n" + self.body

  @property
  def args(self):
    return [jnp.asarray(a) for _, a in self.ins]

  def reference(self):
    """The outputs, the body run as Python once per program (grid order), on jnp values."""
    outs = [np.zeros(s, d) for _, s, d in self.out_specs()]
    names = ", ".join([n for n, _ in self.ins] + [n for n, _, _ in self.out_specs()])
    ns = {"jnp": jnp, "np": np, "lax": PY_LAX, "jax": jax, "math": math}
    exec(f"def ref(ml, {names}):\n" + self.body, ns)
    for pid in np.ndindex(*self.grid):
      ns["ref"](_shim(tuple(int(p) for p in pid)), *[Ref(a) for _, a in self.ins], *[Ref(o) for o in outs])
    return outs

  _refs = None

  @property
  def refs(self):
    if self._refs is None:
      self._refs = self.reference()
    return self._refs


def compare(got, want, dot=False):
  return diff_fuzz.compare(got, want)


def run(gen, *, build=True):
  """(class, detail) of `gen`'s kernel (see the module's docstring)."""
  try:
    gen.refs
  except Exception as e:  # noqa: BLE001
    return "gen", diff_fuzz.describe_exception(e)
  return diff_fuzz.run(gen, build=build, compare=compare)


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[3]) if len(sys.argv) > 3 else 1      # export one seed in `every`
  for s in range(lo, hi):
    g = Gen(s)
    cls, detail = run(g, build=(s % every == 0))
    print(f"SEED {s} {cls} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
