"""The random kernel generator behind the fuzz tests (tests/test_fuzz.py, and the pipelined
loops of tests/test_pipeline_fuzz.py and the GPU differential tests of test_gpu_safety.py).

It writes small kernels as Python source (the frontend reads source, so they go to a temporary
module file), mixing valid and invalid uses of GMEM parameters, ml.smem buffers, register
tensors and scalars over the dtypes f32, f16, bf16, int8, int32 and bool: views, TMA and
register copies, arithmetic, casts, ml.where/full/arange, runtime and unrolled loops, ifs,
clusters, ml.dot and pipelined ml.range loops, launch configurations and unsupported Python.
Each statement is well typed unless a `bad` draw makes it wrong, so about half the kernels
build. tests/fuzz_check.py loads and checks them.
"""
from __future__ import annotations

import dataclasses
import itertools
import math
import random

from hypothesis import strategies as st

DTYPES = ["float32", "float16", "bfloat16", "int8", "int32", "bool"]
SHAPES = [(128,), (256,), (64,), (16,), (1024,), (128, 64), (64, 32), (8, 16), (2, 128),
          (256, 64), (64, 8), (4, 8, 32), (300, 64), (128, 3), (64, 128), (128, 256)]
BINOPS = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", ">="]
FLOATS = ("float32", "float16", "bfloat16")
ARITH = FLOATS + ("int32",)          # register arithmetic exists for 16- and 32-bit types
ITEMSIZE = {"float32": 4, "float16": 2, "bfloat16": 2, "int8": 1, "int32": 4, "bool": 1}
P_BAD = 0.04                         # the chance that one choice is deliberately wrong
UNARY = ["ml.exp", "ml.exp2", "ml.log", "ml.sqrt", "ml.rsqrt", "ml.tanh", "ml.abs", "-", "not "]
MAX_STMTS = 10


def jnp_name(dtype: str) -> str:
  return "bool_" if dtype == "bool" else dtype


# ---------------------------------------------------------------------------- choosers
class RandomChooser:
  """The generator's source of choices, from `random.Random` (for bug hunts)."""

  def __init__(self, seed):
    self.r = random.Random(seed)

  def choice(self, seq):
    return self.r.choice(list(seq))

  def integer(self, lo, hi):
    return self.r.randint(lo, hi)

  def chance(self, p):
    return self.r.random() < p


class DataChooser:
  """The same choices drawn through hypothesis (shrinkable)."""

  def __init__(self, data):
    self.data = data

  def choice(self, seq):
    return self.data.draw(st.sampled_from(list(seq)))

  def integer(self, lo, hi):
    return self.data.draw(st.integers(lo, hi))

  def chance(self, p):
    return self.data.draw(st.integers(0, 99)) < int(p * 100)


# ---------------------------------------------------------------------------- generator
@dataclasses.dataclass
class Var:
  name: str
  kind: str              # "gmem", "smem", "tensor", "scalar"
  shape: tuple
  dtype: str | None      # None: an SMEM buffer whose dtype is inferred
  filled: bool = True    # refs: every element written (inputs; SMEM and out once written whole)


@dataclasses.dataclass
class Program:
  source: str
  specs: list            # (shape, dtype name) per input
  out: tuple             # (shape, dtype name)
  first_line: int        # the decorator line in the written file
  last_line: int


class Gen:
  """Writes one kernel. Each statement is well typed unless a `bad` draw (P_BAD) says otherwise."""

  def __init__(self, c):
    self.c = c
    self.env: list[Var] = []
    self.lines: list[str] = []
    self.counter = itertools.count()
    self.n_stmts = 0
    self.depth = 1
    self.cluster = None

  def fresh(self, prefix):
    return f"{prefix}{next(self.counter)}"

  def bad(self):
    return self.c.chance(P_BAD)

  def emit(self, line):
    self.lines.append("  " * self.depth + line)

  def pick(self, kinds, pred=lambda v: True, role="any"):
    """A variable of one of `kinds`. Refs picked to be read are filled, refs picked to be
    written are not inputs (inputs are read-only), unless a `bad` draw allows it."""
    ok = {"any": lambda v: True,
          "read": lambda v: v.filled,
          "write": lambda v: not v.name.startswith("x"),
          "rw": lambda v: v.filled and not v.name.startswith("x")}[role]
    cands = [v for v in self.env if v.kind in kinds and pred(v)]
    good = [v for v in cands if ok(v)]
    if good and (len(good) == len(cands) or not self.bad()):
      cands = good
    return self.c.choice(cands) if cands else None

  def written(self, ref, expr, shape):
    """`ref` was written at `expr`: filled when that is all of it, outside any loop or branch."""
    if self.depth == 1 and shape == ref.shape and expr in (ref.name, f"{ref.name}.at[...]"):
      ref.filled = True

  def program_id(self):
    """The name of a program-id scalar, defining one if needed."""
    v = self.pick(("scalar",), lambda v: v.name.startswith("i"))
    if v is None:
      name = self.fresh("i")
      self.emit(f"{name} = ml.program_id(0)")
      v = Var(name, "scalar", (), "int32")
      self.env.append(v)
    return v.name

  # -- views
  def view(self, ref: Var, *, tma=False):
    """`(expr, shape)` of a window of `ref`; well formed unless `bad`."""
    shape = ref.shape
    if self.bad():
      idx = self.c.choice(["1.5", "::2", "0, 0, 0, 0", "x0", f"{shape[0]}", f"ml.ds(0, {shape[0] + 1})",
                           f"{shape[0] - 1}", "-1", f":{shape[0] * 2}", "ml.ds(1, 8)"])
      return f"{ref.name}.at[{idx}]", shape
    choices = ["whole", "ds", "slice", "ds_dyn"] + (["int"] if len(shape) > 1 else [])
    kind = self.c.choice(choices)
    n0 = shape[0]
    sizes = [s for s in (n0, n0 // 2, n0 // 4, 64, 128) if 0 < s <= n0 and n0 % s == 0]
    if kind == "whole":
      return (ref.name if self.c.chance(0.5) else f"{ref.name}.at[...]"), shape
    if kind == "int":
      return f"{ref.name}.at[{self.c.choice([0, n0 - 1])}]", shape[1:]
    size = self.c.choice(sizes)
    if kind == "slice":
      start = self.c.choice([0, n0 - size])
      return f"{ref.name}.at[{start}:{start + size}]", (size,) + shape[1:]
    if kind == "ds":
      return f"{ref.name}.at[ml.ds({self.c.choice([0, n0 - size])}, {size})]", (size,) + shape[1:]
    i = self.program_id()
    return f"{ref.name}.at[ml.ds({i} % {n0 // size} * {size}, {size})]", (size,) + shape[1:]

  def register_view(self, ref: Var):
    """A window of `ref` that registers can hold (a few tries; may fail when `bad`)."""
    for _ in range(4):
      expr, shape = self.view(ref)
      if valid_layout(shape):
        break
    return expr, shape

  # -- operands
  def operand(self, shape, dtype):
    """An expression of `shape` and `dtype` for arithmetic: a tensor, a load, a scalar, a number."""
    if self.bad():
      return self.c.choice(["x0", "1.5", "True", "out", "(1, 2)", "jnp.float32"])
    k = self.c.choice(["tensor", "tensor", "load", "const", "scalar"])
    if k == "tensor" and (v := self.pick(("tensor",), lambda v: v.shape == shape and v.dtype == dtype)):
      return v.name
    if k == "load" and (r := self.pick(("gmem", "smem"), lambda v: v.dtype == dtype, "read")):
      expr, s = self.register_view(r)
      if s == shape:
        return f"{expr}[...]"
    if k == "scalar" and (v := self.pick(("scalar",), lambda v: v.dtype == dtype)):
      return v.name
    if dtype == "bool":
      return self.c.choice(["True", "False"])
    if dtype in FLOATS:
      return self.c.choice(["2.0", "0.5", "1", "-3"])
    return self.c.choice(["2", "1", "-3", "0"])

  def tensor(self, want=None):
    """A register tensor variable (whose dtype satisfies `want`), making one if needed."""
    v = self.pick(("tensor",), lambda v: valid_layout(v.shape) and (want is None or want(v.dtype)))
    if v is not None:
      return v
    dt = self.c.choice([d for d in DTYPES if want is None or want(d)])
    shape = self.c.choice([s for s in SHAPES if valid_layout(s)])
    name = self.fresh("t")
    self.emit(f"{name} = ml.full({shape}, {self.operand(shape, dt) if dt != 'bool' else 'True'},"
              f" jnp.{jnp_name(dt)})")
    v = Var(name, "tensor", shape, dt)
    self.env.append(v)
    return v

  # -- statements
  def stmt(self):
    self.n_stmts += 1
    kind = self.c.choice(["smem", "smem", "copy", "copy", "copy", "load", "load", "store", "store",
                          "binary", "binary", "compare", "unary", "cast", "cast", "where", "full",
                          "pid", "for", "if", "cluster", "aug", "scalar", "attr", "dot",
                          "scalar_cast", "grouped", "syntax", "transpose", "scan", "gather", "sort",
                          "index"])
    getattr(self, "s_" + kind)()

  def s_pid(self):
    name = self.fresh("i")
    axis = self.c.choice([1, 2, 3, -1]) if self.bad() else 0
    self.emit(f"{name} = ml.{self.c.choice(['program_id', 'num_programs'])}({axis})")
    self.env.append(Var(name, "scalar", (), "int32"))

  def s_scalar(self):
    i = self.program_id()
    name = self.fresh("s")
    op, rhs, dt = self.c.choice([("+", "1", "int32"), ("*", "2", "int32"), ("//", "2", "int32"),
                                 ("%", "2", "int32"), ("-", i, "int32"), ("<", "2", "bool"),
                                 ("==", "0", "bool")])
    if self.bad():
      op, rhs, dt = self.c.choice([("/", "2", "float32"), ("+", "0.5", "float32"), ("&", "1.5", "int32")])
    self.emit(f"{name} = {i} {op} {rhs}")
    self.env.append(Var(name, "scalar", (), dt))

  def s_smem(self):
    name = self.fresh("b")
    if self.bad():
      shape = self.c.choice([(512, 256), (256, 256), (0,), "(n,)", (128, 3)])
      dt = self.c.choice(DTYPES + ["float64"])
      self.emit(f"{name} = ml.smem({shape}, jnp.{jnp_name(dt)})")
      if isinstance(shape, tuple) and all(s > 0 for s in shape) and dt != "float64":
        self.env.append(Var(name, "smem", shape, dt, filled=False))
      return
    src = self.pick(("gmem",), lambda v: tma_ok(v.shape, v.dtype), "read")
    if src is not None and self.c.chance(0.5):   # inferred from the copy that fills it
      expr, shape = self.view(src)
      if tma_ok(shape, src.dtype):
        self.emit(f"{name} = ml.smem({shape})")
        self.emit(f"ml.copy({expr}, {name})")
        self.env.append(Var(name, "smem", shape, src.dtype))
        return
    shape = self.c.choice(SHAPES)
    dt = self.c.choice([d for d in DTYPES if d != "bool"])
    self.emit(f"{name} = ml.smem({shape}, jnp.{jnp_name(dt)})")
    v = Var(name, "smem", shape, dt, filled=False)
    self.env.append(v)
    if valid_layout(shape) and self.c.chance(0.8):      # fill it before anything reads it
      self.emit(f"{name}[...] = ml.full({shape}, {self.c.choice(['0', '1', '2'])}, jnp.{jnp_name(dt)})")
      self.written(v, name, shape)

  def s_copy(self):
    if self.bad():
      a, b = self.pick(("gmem", "smem", "tensor")), self.pick(("gmem", "smem", "tensor"))
      if a and b:
        self.emit(f"ml.copy({self.view(a)[0] if a.kind != 'tensor' else a.name},"
                  f" {self.view(b)[0] if b.kind != 'tensor' else b.name})")
      return
    direction = self.c.choice(["load", "store", "smem"])
    dst = self.pick(("smem",) if direction != "store" else ("gmem",), role="write")
    if dst is None:
      return self.s_smem()
    dexpr, dshape = self.view(dst)
    kinds = ("gmem",) if direction == "load" else ("smem",)
    src = self.pick(kinds, lambda v: v.dtype == dst.dtype and v is not dst, "read")
    if src is None:
      return self.s_smem()
    sexpr, sshape = self.view(src)
    if sshape != dshape:
      return self.s_smem()
    self.emit(f"ml.copy({sexpr}, {dexpr})")
    self.written(dst, dexpr, dshape)

  def s_load(self):
    r = self.pick(("gmem", "smem"), role="read")
    if r is None:
      return self.s_smem()
    expr, shape = self.register_view(r)
    name = self.fresh("t")
    self.emit(f"{name} = {expr}[...]")
    self.env.append(Var(name, "tensor", shape, r.dtype))

  def s_store(self):
    r = self.pick(("gmem", "smem"), role="write")
    if r is None:
      return self.s_smem()
    expr, shape = self.register_view(r)
    if self.bad():
      v = self.pick(("tensor",))
      self.emit(f"{expr}[...] = {v.name if v else '1.5'}")
      return
    k = self.c.choice(["tensor", "tensor", "cast", "const"])
    v = self.pick(("tensor",), lambda v: v.shape == shape and (v.dtype == r.dtype or k == "cast"))
    if k == "const" or v is None:
      value = self.operand(shape, r.dtype)
    elif v.dtype == r.dtype:
      value = v.name
    else:
      value = f"{v.name}.astype(jnp.{jnp_name(r.dtype)})"
    self.emit(f"{expr}[...] = {value}")
    self.written(r, expr, shape)

  def s_binary(self):
    v = self.tensor(lambda d: d in ARITH or d == "bool")
    ops = {"bool": ["&", "|", "^"], "int32": ["+", "-", "*", "//", "%", "&", "|", "^", "max", "min"]}.get(
        v.dtype, ["+", "-", "*", "/", "max", "min"])
    op = self.c.choice(BINOPS if self.bad() else ops)
    b = self.operand(v.shape, v.dtype)
    dt = v.dtype
    if self.bad():
      w = self.pick(("tensor",))
      b = w.name if w else b
    a, b = (v.name, b) if self.c.chance(0.7) else (b, v.name)
    name = self.fresh("t")
    if op in ("max", "min"):
      fn = self.c.choice([f"ml.{op}imum", op])
      self.emit(f"{name} = {fn}({a}, {b})")
    else:
      self.emit(f"{name} = {a} {op} {b}")
    if op in ("<", "<=", "==", "!=", ">", ">="):
      dt = "bool"
    self.env.append(Var(name, "tensor", v.shape, dt))

  def s_compare(self):
    v = self.tensor(lambda d: d in ARITH)
    op = self.c.choice(["<", "<=", "==", "!=", ">", ">="])
    name = self.fresh("m")
    self.emit(f"{name} = {v.name} {op} {self.operand(v.shape, v.dtype)}")
    self.env.append(Var(name, "tensor", v.shape, "bool"))

  def s_unary(self):
    bad = self.bad()
    v = self.tensor(None if bad else (lambda d: d in ARITH or d == "bool"))
    ops = (["not "] if v.dtype == "bool" else ["-", "ml.abs", "abs"] if v.dtype == "int32"
           else ["ml.exp", "ml.exp2", "ml.log", "ml.sqrt", "ml.rsqrt", "ml.tanh", "ml.abs", "-"])
    op = self.c.choice(UNARY if bad else ops)
    name = self.fresh("t")
    self.emit(f"{name} = {op}{v.name}" if op in ("-", "not ") else f"{name} = {op}({v.name})")
    self.env.append(Var(name, "tensor", v.shape, v.dtype))

  def s_cast(self):
    v = self.tensor()
    bad = self.bad()
    dt = self.c.choice(DTYPES if bad else [d for d in DTYPES if d != "bool"])
    if not bad and v.dtype == "bool":
      v = self.tensor(lambda d: d != "bool")
    name = self.fresh("t")
    form = self.c.choice(["{a}.astype(jnp.{dt})", "ml.cast({a}, jnp.{dt})", "jnp.{dt}({a})"])
    self.emit(f"{name} = " + form.format(a=v.name, dt=jnp_name(dt)))
    self.env.append(Var(name, "tensor", v.shape, dt))

  def s_where(self):
    v = self.tensor(lambda d: d in ARITH)
    name = self.fresh("t")
    cond = self.pick(("tensor",), lambda w: w.dtype == "bool" and w.shape == v.shape)
    cond = cond.name if cond else f"{v.name} > {self.operand(v.shape, v.dtype)}"
    if self.bad():
      cond = self.c.choice([v.name, "True", "x0"])
    self.emit(f"{name} = ml.where({cond}, {v.name}, {self.operand(v.shape, v.dtype)})")
    self.env.append(Var(name, "tensor", v.shape, v.dtype))

  def s_transpose(self):
    """x.T / ml.transpose(x) / x.transpose() of a 2-D tensor (any dtype but bool, unless bad)."""
    bad = self.bad()
    v = self.tensor(None if bad else (lambda d: d != "bool"))
    if len(v.shape) != 2 and not bad:
      return
    name = self.fresh("t")
    form = self.c.choice(["{a}.T", "ml.transpose({a})", "{a}.transpose()", "{a}.transpose(1, 0)"])
    self.emit(f"{name} = " + form.format(a=v.name))
    self.env.append(Var(name, "tensor", tuple(reversed(v.shape)), v.dtype))

  def s_scan(self):
    """ml.cumsum / cummax / cummin along an axis of a 1- or 2-D arithmetic tensor."""
    bad = self.bad()
    v = self.tensor(None if bad else (lambda d: d in ("float32", "int32")))
    if len(v.shape) > 2 and not bad:
      return
    f = self.c.choice(["cumsum", "cummax", "cummin"])
    axis = self.c.choice(range(len(v.shape))) if not bad else self.c.choice([None, 2, -3])
    rev = ", reverse=True" if self.c.chance(0.3) else ""
    name = self.fresh("t")
    self.emit(f"{name} = ml.{f}({v.name}, axis={axis}{rev})")
    self.env.append(Var(name, "tensor", v.shape, v.dtype))

  def s_sort(self):
    """ml.sort / ml.argsort along the last axis of a 1- or 2-D tensor whose last axis is a power of
    two (not, or a bool tensor, when bad)."""
    bad = self.bad()
    v = self.tensor(None if bad else (lambda d: d in ("float32", "int32", "float16", "bfloat16", "int8")))
    if (len(v.shape) > 2 or v.shape[-1] & (v.shape[-1] - 1)) and not bad:
      return
    f = self.c.choice(["sort", "argsort"])
    desc = ", descending=True" if self.c.chance(0.3) else ""
    name = self.fresh("t")
    self.emit(f"{name} = ml.{f}({v.name}{desc})")
    self.env.append(Var(name, "tensor", v.shape, v.dtype if f == "sort" else "int32"))

  def s_index(self):
    """An element, a row, a column or a static window of a register tensor (through SMEM)."""
    v = self.tensor(lambda d: d != "bool")
    if len(v.shape) not in (1, 2):
      return
    n0 = v.shape[0]
    i = self.c.choice([str(self.c.choice([0, n0 - 1, -1])), self.program_id()])
    name = self.fresh("t")
    if len(v.shape) == 1:
      k = self.c.choice([128, n0]) if n0 >= 128 else n0
      if self.c.chance(0.5) and n0 >= 128 and n0 % 128 == 0:
        lo = self.c.choice([0, n0 - k])
        self.emit(f"{name} = {v.name}[{lo}:{lo + k}]")
        self.env.append(Var(name, "tensor", (k,), v.dtype))
      else:
        self.emit(f"{name} = {v.name}[{i}]")
        self.env.append(Var(name, "scalar", (), v.dtype))
      return
    n1 = v.shape[1]
    form = self.c.choice(["row", "elem", "elem"])
    if form == "row" and valid_layout((n1,)):
      self.emit(f"{name} = {v.name}[{i}]")
      self.env.append(Var(name, "tensor", (n1,), v.dtype))
    else:
      self.emit(f"{name} = {v.name}[{i}, {self.c.choice([0, n1 - 1])}]")
      self.env.append(Var(name, "scalar", (), v.dtype))

  def s_gather(self):
    """Rows (or elements) of an input at indices computed from ml.arange, kept inside it."""
    ref = self.pick(("gmem",), lambda r: r.name.startswith("x") and len(r.shape) <= 2 and r.dtype != "bool")
    if ref is None:
      return
    n0 = ref.shape[0]
    mult = self.c.choice([1, 3, 7])
    if len(ref.shape) == 1:
      k = self.c.choice([128, 256])
      idx = f"(ml.arange({k}) * {mult}) % {n0}" if not self.bad() else f"ml.arange({k}) * {mult}"
      name = self.fresh("t")
      self.emit(f"{name} = {ref.name}[{idx}]")
      self.env.append(Var(name, "tensor", (k,), ref.dtype))
      return
    d = ref.shape[1]
    k = self.c.choice([k for k in (2, 4, 8, 16, 64) if (k * d) % 128 == 0] or [128])
    rows = f"(ml.arange({k}) * {mult} + {self.program_id()}) % {n0}"
    name = self.fresh("t")
    self.emit(f"{name} = {ref.name}[{rows}, :]")
    self.env.append(Var(name, "tensor", (k, d), ref.dtype))

  def s_full(self):
    bad = self.bad()
    shape = self.c.choice(SHAPES if bad else [s for s in SHAPES if valid_layout(s)])
    dt = self.c.choice(DTYPES)
    name = self.fresh("t")
    k = self.c.choice(["zeros", "full", "arange"])
    if k == "zeros":
      self.emit(f"{name} = ml.zeros({shape}, jnp.{jnp_name(dt)})")
    elif k == "full":
      value = self.operand(shape, dt) if not bad else self.c.choice(["x0", "1.5", "(1,)"])
      self.emit(f"{name} = ml.full({shape}, {value}, jnp.{jnp_name(dt)})")
    else:
      n = self.c.choice([128, 256, 1024, 100] if bad else [128, 256, 1024])
      shape = (n,)
      dt = self.c.choice(["int32", "float32", "float16"] if not bad else DTYPES)
      self.emit(f"{name} = ml.arange({n}, jnp.{jnp_name(dt)})" if dt != "int32" or self.c.chance(0.5)
                else f"{name} = ml.arange({n})")
    self.env.append(Var(name, "tensor", shape, dt))

  def s_attr(self):
    v = self.pick(("gmem", "smem", "tensor"), lambda v: valid_layout(v.shape))
    if v is None:
      return self.s_pid()
    name = self.fresh("t")
    self.emit(f"{name} = ml.zeros({v.name}.shape, {v.name}.dtype)")
    self.env.append(Var(name, "tensor", v.shape, v.dtype))

  def s_aug(self):
    if self.c.chance(0.5):
      v = self.tensor(lambda d: d in ARITH)
      op = self.c.choice(["+", "*", "-"])
      self.emit(f"{v.name} {op}= {self.operand(v.shape, v.dtype)}")
      return
    r = self.pick(("gmem", "smem"), lambda v: v.dtype in ARITH and valid_layout(v.shape), "rw")
    if r is None:
      return self.s_smem()
    expr, shape = self.register_view(r)
    self.emit(f"{expr.replace('.at[', '[', 1) if '.at[' in expr else expr + '[...]'} +="
              f" {self.operand(shape, r.dtype)}")

  def block(self, n):
    self.depth += 1
    saved = list(self.env)
    start = len(self.lines)
    for _ in range(n):
      if self.n_stmts < MAX_STMTS:
        self.stmt()
    if len(self.lines) == start:
      self.emit("pass")
    self.depth -= 1
    return saved

  def s_for(self):
    if self.depth >= 3:
      return self.s_binary()
    var = self.fresh("j")
    rng = self.c.choice(["range(3)", "ml.static_range(2)", "range(1, 4, 2)", "range({i})",
                         "range(2, {i} + 3)", "range(0)"])
    if "{i}" in rng:
      rng = rng.format(i=self.program_id())
    self.emit(f"for {var} in {rng}:")
    self.env.append(Var(var, "scalar", (), "int32"))
    saved = self.block(self.c.integer(1, 3))
    if not self.bad():     # names bound in a runtime loop are not defined after it
      self.env[:] = saved[:-1]

  def s_if(self):
    if self.depth >= 3:
      return self.s_binary()
    s = self.pick(("scalar",), lambda v: v.dtype == "bool")
    cond = s.name if s else f"{self.program_id()} % 2 == 0"
    if self.c.chance(0.2):
      cond = self.c.choice(["True", "x0.shape[0] > 128", "1 < 2"])
    self.emit(f"if {cond}:")
    saved = self.block(self.c.integer(1, 2))
    if self.c.chance(0.5):
      self.emit("else:")
      self.block(self.c.integer(1, 2))
    if not self.bad():
      self.env[:] = saved

  def s_dot(self):
    """`ml.dot` on SMEM tiles (f16/bf16, m % 64, n % 64 <= 256, k % 64), accumulating in f32."""
    bad = self.bad()
    dt = self.c.choice(["float16", "bfloat16"] + (["float32", "int8"] if bad else []))
    m, k, n = (self.c.choice([64, 128] + ([32, 96] if bad else [])),
               self.c.choice([64, 128] + ([32] if bad else [])),
               self.c.choice([64, 128, 256] + ([32, 512] if bad else [])))
    a, b = self.fresh("a"), self.fresh("b")
    self.emit(f"{a} = ml.smem(({m}, {k}), jnp.{dt})")
    self.emit(f"{b} = ml.smem(({k}, {n}), jnp.{dt})")
    for name, shape in ((a, (m, k)), (b, (k, n))):
      src = self.pick(("gmem",), lambda v: v.dtype == dt and len(v.shape) == 2 and v.shape[1] == shape[1]
                      and v.shape[0] >= shape[0] and v.shape[0] % shape[0] == 0, "read")
      if src is not None and self.c.chance(0.7):
        self.emit(f"ml.copy({src.name}.at[ml.ds({self.program_id()} % {src.shape[0] // shape[0]} * {shape[0]},"
                  f" {shape[0]})], {name})")
      else:
        self.emit(f"{name}[...] = ml.full({shape}, {self.c.choice(['1', '0.5'])}, jnp.{dt})")
    self.env += [Var(a, "smem", (m, k), dt), Var(b, "smem", (k, n), dt)]
    acc = self.pick(("tensor",), lambda v: v.shape == (m, n) and v.dtype == "float32")
    arg = ""
    if acc is not None and self.c.chance(0.6):
      arg = f", {acc.name}"
    elif self.c.chance(0.3):
      arg = f", ml.zeros(({m}, {n}), jnp.{self.c.choice(['float32', 'float16'] if not bad else DTYPES)})"
    name = self.fresh("t")
    if self.c.chance(0.3) and self.depth < 3:      # a (pipelined) k loop, as in a matmul
      acc = acc.name if arg and acc is not None and arg == f", {acc.name}" else None
      if acc is None:
        acc = self.fresh("acc")
        self.emit(f"{acc} = ml.zeros(({m}, {n}), jnp.float32)")
      var = self.fresh("j")
      self.emit(f"for {var} in ml.range({self.c.choice([1, 2, 4])}, stages={self.c.choice([1, 2, 3])}):")
      self.depth += 1
      src = self.pick(("gmem",), lambda v: v.dtype == dt and len(v.shape) == 2 and v.shape[1] == k
                      and v.shape[0] >= m, "read")
      if src is not None:
        self.emit(f"ml.copy({src.name}.at[ml.ds({var} % {src.shape[0] // m} * {m}, {m})], {a})")
      self.emit(f"{acc} = ml.dot({a}, {b}, {acc})")
      self.depth -= 1
      self.env.append(Var(acc, "tensor", (m, n), "float32"))
      return
    self.emit(f"{name} = ml.dot({a}, {b}{arg})")
    self.env.append(Var(name, "tensor", (m, n), "float32"))

  def s_scalar_cast(self):
    """Scalars of other dtypes, and tensors filled with them."""
    i = self.program_id()
    dt = self.c.choice(DTYPES[:-1] if not self.bad() else DTYPES)
    name = self.fresh("s")
    self.emit(f"{name} = ({i} + 1).astype(jnp.{jnp_name(dt)})")
    self.env.append(Var(name, "scalar", (), dt))
    if self.c.chance(0.5):
      shape = self.c.choice([s for s in SHAPES if valid_layout(s)])
      t = self.fresh("t")
      self.emit(f"{t} = ml.full({shape}, {name}, jnp.{jnp_name(dt)})")
      self.env.append(Var(t, "tensor", shape, dt))

  def s_grouped(self):
    i, j = self.fresh("g"), self.fresh("g")
    args = self.c.choice(["4, 2", "4, 2, group=2", "8, 8"] + (["0, 2", "x0, 2"] if self.bad() else []))
    self.emit(f"{i}, {j} = ml.grouped_ids({self.program_id()}, {args})")
    self.env += [Var(i, "scalar", (), "int32"), Var(j, "scalar", (), "int32")]

  def s_syntax(self):
    """Python kernels may not use (always a mistake, so only when `bad`)."""
    if not self.bad():
      return self.s_load()
    self.emit(self.c.choice([
        "while False:\n" + "  " * (self.depth + 1) + "pass", "print(1)", "f = lambda v: v",
        "l = [v for v in range(3)]", "assert True", "del x0", "s = f'{x0}'",
        "import math", "t = x0[...] if True else x0[...]", "y = x0[...] and x0[...]",
        "q = (1, 2)[5]", "z = x0.shape[7]", "w = ml.nothing(1)", "x0.at[0] = 1",
        "u = jnp.sum(x0)", "v = ml.exp(2.0)", "for a, b in range(2):\n" + "  " * (self.depth + 1) + "pass"]))

  def s_cluster(self):
    b = self.pick(("smem",), lambda v: not v.name.startswith("p"), "read")
    if b is None or self.c.chance(0.3):
      self.emit("ml.cluster_sync()")
      return
    if self.cluster is None and not self.bad():
      return self.s_load()
    name = self.fresh("p")
    peer = self.c.choice([f"({self.program_id()} + 1) % 2", "1", "0"] + (["2", "x0"] if self.bad() else []))
    self.emit(f"{name} = ml.cluster_ref({b.name}, {peer})")
    self.env.append(Var(name, "smem", b.shape, b.dtype))

  def epilogue(self, grid):
    """Write all of `out` once: each program its rows (when they divide evenly), else program 0."""
    out = next(v for v in self.env if v.name == "out")
    g = eval(grid)
    n = math.prod(g)
    if n <= 0:
      return
    rows = out.shape[0] // n if out.shape[0] % n == 0 else 0
    shape = (rows,) + out.shape[1:]
    if n == 1 or not rows or not valid_layout(shape) or self.c.chance(0.2):
      if n > 1 and not valid_layout(out.shape):
        return
      shape, rows = out.shape, 0
    src = self.pick(("gmem",), lambda v: v.shape == out.shape and v.dtype == out.dtype and v.name != "out",
                    "read")
    t = self.pick(("tensor",), lambda v: v.shape == shape and v.dtype == out.dtype)
    lin = " + ".join(f"ml.program_id({a}) * {math.prod(g[:a])}" for a in range(len(g))) if n > 1 else "0"
    if rows:
      window = f"ml.ds(({lin}) * {rows}, {rows})"
      value = (f"{src.name}.at[{window}][...]" if src and self.c.chance(0.6) else t.name if t
               else f"ml.full({shape}, 1, jnp.{jnp_name(out.dtype)})")
      self.emit(f"out.at[{window}][...] = {value}")
      return
    value = (f"{src.name}[...]" if src and self.c.chance(0.6) else t.name if t
             else f"ml.full({shape}, 1, jnp.{jnp_name(out.dtype)})")
    if n > 1:
      self.emit(f"if {lin} == 0:")
      self.emit(f"  out[...] = {value}")
    else:
      self.emit(f"out[...] = {value}")

  # -- the kernel
  def kernel(self) -> Program:
    bad = self.bad()
    n_in = self.c.integer(1, 2)
    specs = [(self.c.choice(SHAPES), self.c.choice(DTYPES)) for _ in range(n_in)]
    out = (self.c.choice(SHAPES), self.c.choice(DTYPES[:-1] if not bad else DTYPES)) if self.c.chance(0.5) \
        else specs[0]
    for k, (shape, dt) in enumerate(specs):
      self.env.append(Var(f"x{k}", "gmem", shape, dt))
    self.env.append(Var("out", "gmem", out[0], out[1], filled=False))
    grid, self.cluster = self.c.choice([("(1,)", None), ("(2,)", None), ("(4, 2)", None),
                                        ("(2,)", "(2,)"), ("(4, 2)", "(1, 2)")])
    block = "128" if self.c.chance(0.8) else "256"
    if bad:
      grid, self.cluster, block = self.c.choice([("(1,)", "(2,)", "128"), ("(3,)", "(2,)", "128"),
                                                 ("(0,)", None, "128"), ("(2,)", None, "96"),
                                                 ("(2,)", "(4, 4, 2)", "128"), ("(2,)", None, "2048")])
    for _ in range(self.c.integer(1, MAX_STMTS)):
      if self.n_stmts < MAX_STMTS:
        self.stmt()
    if not self.bad():
      self.epilogue(grid)
    params = ", ".join([f"x{k}" for k in range(n_in)] + ["out"])
    head = [
        "import jax, jax.numpy as jnp",
        "import mgpu_dsl as mg",
        "from mgpu_dsl import language as ml",
        "",
        f"@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct({out[0]}, jnp.{jnp_name(out[1])}),"
        f" grid={grid}, cluster={self.cluster}, block={block})",
        f"def kernel({params}):",
    ]
    lines = self.lines or ["  pass"]     # every statement drawn may have found nothing to use
    text = "\n".join(head + lines) + "\n"
    return Program(text, specs, out, first_line=5, last_line=text.count("\n"))


def valid_layout(shape) -> bool:
  return math.prod(shape) % 128 == 0


def tma_ok(shape, dtype) -> bool:
  size = ITEMSIZE[dtype]
  return dtype != "bool" and shape[-1] * size % 16 == 0 and all(s <= 256 for s in shape)


def generate(c) -> Program:
  return Gen(c).kernel()
