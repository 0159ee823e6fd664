"""Property test: every generated kernel either builds or fails with a located user error.

A generator writes small kernels as Python source (the frontend reads source,
so they go to a temporary module file), mixing valid and invalid uses of
GMEM parameters, ml.smem buffers, register tensors and scalars over the dtypes
f32, f16, bf16, int8, int32 and bool. `KernelFunction.check(*specs)` must then
either succeed (verified Mosaic GPU IR, built on the CPU) or raise a
`mgpu_dsl.KernelError` that is not an `InternalError` and points inside the
kernel. Any other outcome is a frontend bug: a missing check.

The number of examples defaults to 150; set MGPU_DSL_FUZZ_EXAMPLES for more.
`python tests/test_fuzz.py N [SEED]` runs N random kernels without hypothesis
and prints every distinct failure (for bug hunts; no shrinking).
"""
from __future__ import annotations

import dataclasses
import importlib.util
import itertools
import os
import random
import sys
import tempfile
import traceback

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mgpu_dsl as mg

DTYPES = ["float32", "float16", "bfloat16", "int8", "int32", "bool"]
SHAPES = [(128,), (256,), (64,), (16,), (1024,), (128, 64), (64, 32), (8, 16), (2, 128),
          (256, 64), (64, 8), (4, 8, 32), (300, 64), (128, 3)]
BINOPS = ["+", "-", "*", "/", "//", "%", "&", "|", "^", "<", "<=", "==", "!=", ">", ">="]
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


@dataclasses.dataclass
class Program:
  source: str
  specs: list            # (shape, dtype name) per input
  out: tuple             # (shape, dtype name)
  first_line: int        # the decorator line in the written file
  last_line: int


class Gen:
  def __init__(self, c):
    self.c = c
    self.env: list[Var] = []
    self.lines: list[str] = []
    self.counter = itertools.count()
    self.n_stmts = 0

  def fresh(self, prefix):
    return f"{prefix}{next(self.counter)}"

  def pick(self, *kinds, shape=None, dtype=None, p_match=0.8):
    cands = [v for v in self.env if v.kind in kinds]
    if shape is not None and self.c.chance(p_match):
      matched = [v for v in cands if v.shape == shape and (dtype is None or v.dtype == dtype)]
      cands = matched or cands
    return self.c.choice(cands) if cands else None

  def shape(self):
    return self.c.choice(SHAPES)

  def dtype(self):
    return self.c.choice(DTYPES)

  # -- expressions
  def index_expr(self, shape):
    """An index for `ref.at[...]`/`ref[...]` on a ref of `shape`, and the view's shape."""
    kind = self.c.choice(["whole", "ds", "slice", "int", "int", "ds_dyn", "bad"])
    if kind == "whole":
      return "...", shape
    n0 = shape[0]
    if kind == "int":
      i = self.c.choice([0, 1, n0 - 1, n0, -1])
      return str(i), shape[1:]
    if kind == "slice":
      size = self.c.choice([n0, n0 // 2 or 1, 64, 128])
      return f":{size}", (min(size, n0),) + shape[1:]
    if kind == "ds":
      size = self.c.choice([n0, n0 // 2 or 1, 64, 128, 1])
      return f"ml.ds({self.c.choice([0, size, n0 - size])}, {size})", (size,) + shape[1:]
    if kind == "ds_dyn":
      size = self.c.choice([n0 // 2 or 1, 64, 128])
      if not any(v.kind == "scalar" for v in self.env):
        self.emit("i = ml.program_id(0)")
        self.env.append(Var("i", "scalar", (), "int32"))
      s = self.pick("scalar").name
      return f"ml.ds({s} * {size}, {size})", (size,) + shape[1:]
    return self.c.choice(["1.5", "i, i", "::2", "0, 0, 0, 0", "x0"]), shape

  def ref_expr(self, ref):
    if len(ref.shape) == 0 or self.c.chance(0.5):
      return ref.name, ref.shape
    idx, shape = self.index_expr(ref.shape)
    return f"{ref.name}.at[{idx}]", shape

  def value_expr(self, shape=None, dtype=None):
    """A register value: a tensor name, a load, a scalar or a Python number."""
    k = self.c.choice(["tensor", "tensor", "load", "scalar", "const"])
    if k == "tensor" and (v := self.pick("tensor", shape=shape, dtype=dtype)):
      return v.name, v.shape, v.dtype
    if k in ("tensor", "load") and (r := self.pick("gmem", "smem", shape=shape, dtype=dtype)):
      expr, s = self.ref_expr(r)
      return f"{expr}[...]", s, r.dtype
    if k == "scalar" and (v := self.pick("scalar")):
      return v.name, (), v.dtype
    c = self.c.choice(["2", "1.5", "0", "True", "-3"])
    return c, None, None

  # -- statements
  def emit(self, line):
    self.lines.append("  " * self.depth + line)

  def stmt(self):
    self.n_stmts += 1
    kind = self.c.choice(["smem", "smem", "copy", "copy", "load", "store", "store", "binary",
                          "binary", "unary", "cast", "where", "full", "pid", "for", "if",
                          "cluster", "aug", "scalar", "attr"])
    getattr(self, "s_" + kind)()

  def s_pid(self):
    name = self.fresh("i")
    self.emit(f"{name} = ml.program_id({self.c.choice([0, 0, 1, 3])})")
    self.env.append(Var(name, "scalar", (), "int32"))

  def s_scalar(self):
    a = self.pick("scalar")
    if a is None:
      return self.s_pid()
    name = self.fresh("s")
    op = self.c.choice(["+", "*", "//", "%", "-", "/", "<"])
    self.emit(f"{name} = {a.name} {op} {self.c.choice(['1', '2', '0.5', a.name])}")
    dt = "bool" if op == "<" else "float32" if op == "/" else a.dtype
    self.env.append(Var(name, "scalar", (), dt))

  def s_smem(self):
    name = self.fresh("b")
    shape = self.c.choice(SHAPES + [(512, 256), (128, 128)])
    dt = self.dtype() if self.c.chance(0.5) else None
    arg = f", jnp.{jnp_name(dt)}" if dt else ""
    self.emit(f"{name} = ml.smem({shape}{arg})")
    self.env.append(Var(name, "smem", shape, dt))

  def s_copy(self):
    dst = self.pick("smem", "gmem")
    if dst is None:
      return self.s_smem()
    dexpr, dshape = self.ref_expr(dst)
    src = self.pick("gmem", "smem", shape=dshape, dtype=dst.dtype)
    sexpr, sshape = self.ref_expr(src)
    if sshape != dshape and self.c.chance(0.5):
      sexpr = src.name
    self.emit(f"ml.copy({sexpr}, {dexpr})")
    if dst.dtype is None and src.dtype is not None:
      dst.dtype = src.dtype

  def s_load(self):
    r = self.pick("gmem", "smem")
    if r is None:
      return self.s_smem()
    expr, shape = self.ref_expr(r)
    name = self.fresh("t")
    self.emit(f"{name} = {expr}[...]")
    self.env.append(Var(name, "tensor", shape, r.dtype))

  def s_store(self):
    r = self.pick("gmem", "smem")
    if r is None:
      return self.s_smem()
    expr, shape = self.ref_expr(r)
    vexpr, _, vdt = self.value_expr(shape, r.dtype)
    if self.c.chance(0.3) and r.dtype:
      vexpr = f"({vexpr}).astype(jnp.{jnp_name(r.dtype)})"
    self.emit(f"{expr}[...] = {vexpr}")
    if r.dtype is None and vdt is not None:
      r.dtype = vdt

  def s_binary(self):
    a, sa, da = self.value_expr()
    b, sb, db = self.value_expr(sa, da)
    op = self.c.choice(BINOPS)
    name = self.fresh("t")
    fn = self.c.choice([None, None, None, "ml.maximum", "ml.minimum", "max"])
    self.emit(f"{name} = {fn}({a}, {b})" if fn else f"{name} = {a} {op} {b}")
    shape = sa or sb
    dt = "bool" if op in ("<", "<=", "==", "!=", ">", ">=") and not fn else (da or db)
    self.env.append(Var(name, "tensor" if shape else "scalar", shape or (), dt or "float32"))

  def s_unary(self):
    a, sa, da = self.value_expr()
    op = self.c.choice(UNARY)
    name = self.fresh("t")
    self.emit(f"{name} = {op}{a}" if op in ("-", "not ") else f"{name} = {op}({a})")
    self.env.append(Var(name, "tensor" if sa else "scalar", sa or (), da or "float32"))

  def s_cast(self):
    a, sa, da = self.value_expr()
    dt = self.dtype()
    name = self.fresh("t")
    form = self.c.choice(["{a}.astype(jnp.{dt})", "ml.cast({a}, jnp.{dt})", "jnp.{dt}({a})"])
    self.emit(f"{name} = " + form.format(a=a if a.isidentifier() else f"({a})", dt=jnp_name(dt)))
    self.env.append(Var(name, "tensor" if sa else "scalar", sa or (), dt))

  def s_where(self):
    a, sa, da = self.value_expr()
    b, sb, db = self.value_expr(sa, da)
    name = self.fresh("t")
    cond = self.c.choice([f"{a} > 0", f"{a} == {b}", a])
    self.emit(f"{name} = ml.where({cond}, {a}, {b})")
    self.env.append(Var(name, "tensor", sa or sb or (128,), da or db or "float32"))

  def s_full(self):
    shape = self.shape()
    dt = self.dtype()
    name = self.fresh("t")
    k = self.c.choice(["zeros", "full", "full_scalar", "arange"])
    if k == "zeros":
      self.emit(f"{name} = ml.zeros({shape}, jnp.{jnp_name(dt)})")
    elif k == "full":
      self.emit(f"{name} = ml.full({shape}, {self.c.choice(['1', '2.5', 'True', '-1'])}, jnp.{jnp_name(dt)})")
    elif k == "full_scalar" and (s := self.pick("scalar")):
      self.emit(f"{name} = ml.full({shape}, {s.name}, jnp.{jnp_name(dt)})")
    else:
      shape = (shape[0],)
      arg = f", jnp.{jnp_name(dt)}" if self.c.chance(0.5) else ""
      dt = dt if arg else "int32"
      self.emit(f"{name} = ml.arange({shape[0]}{arg})")
    self.env.append(Var(name, "tensor", shape, dt))

  def s_attr(self):
    v = self.pick("gmem", "smem", "tensor")
    if v is None:
      return self.s_pid()
    name = self.fresh("t")
    self.emit(f"{name} = ml.zeros({v.name}.shape, {v.name}.dtype)")
    self.env.append(Var(name, "tensor", v.shape, v.dtype))

  def s_aug(self):
    if self.c.chance(0.5) and (v := self.pick("tensor", "scalar")):
      b, _, _ = self.value_expr(v.shape, v.dtype)
      self.emit(f"{v.name} {self.c.choice(['+', '*', '-'])}= {b}")
      return
    r = self.pick("gmem", "smem")
    if r is None:
      return self.s_smem()
    expr, shape = self.ref_expr(r)
    b, _, _ = self.value_expr(shape, r.dtype)
    self.emit(f"{r.name}[...] += {b}" if expr == r.name else f"{expr}[...] += {b}")

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
    if self.depth >= 2:
      return self.s_binary()
    var = self.fresh("j")
    rng = self.c.choice(["range(3)", "range(0)", "ml.static_range(2)", "range(1, 4, 2)",
                         "range(i)", "range(2, i)"])
    if "i" in rng and not any(v.name == "i" for v in self.env):
      self.emit("i = ml.program_id(0)")
      self.env.append(Var("i", "scalar", (), "int32"))
    self.emit(f"for {var} in {rng}:")
    self.env.append(Var(var, "scalar", (), "int32"))
    saved = self.block(self.c.integer(1, 3))
    if self.c.chance(0.8):       # the loop variable is not defined after a runtime loop
      self.env[:] = saved[:-1] if saved and saved[-1].name == var else saved

  def s_if(self):
    if self.depth >= 2:
      return self.s_binary()
    s = self.pick("scalar")
    cond = self.c.choice([f"{s.name} % 2 == 0" if s else "True", "1 < 2", s.name if s else "False",
                          f"{s.name} > 0" if s else "x0.shape[0] > 1"])
    self.emit(f"if {cond}:")
    saved = self.block(self.c.integer(1, 2))
    if self.c.chance(0.5):
      self.emit("else:")
      self.block(self.c.integer(1, 2))
    if self.c.chance(0.7):
      self.env[:] = saved

  def s_cluster(self):
    b = self.pick("smem")
    if self.c.chance(0.3) or b is None:
      self.emit("ml.cluster_sync()")
      return
    name = self.fresh("p")
    self.emit(f"{name} = ml.cluster_ref({b.name}, {self.c.choice(['1', '0', '2', 'i % 2'])})")
    if "i %" in self.lines[-1] and not any(v.name == "i" for v in self.env):
      self.lines.insert(-1, "  " * self.depth + "i = ml.program_id(0)")
      self.env.append(Var("i", "scalar", (), "int32"))
    self.env.append(Var(name, "smem", b.shape, b.dtype))

  # -- the kernel
  def kernel(self) -> Program:
    self.depth = 1
    n_in = self.c.integer(1, 2)
    specs = [(self.shape(), self.dtype()) for _ in range(n_in)]
    out = (self.shape(), self.dtype()) if self.c.chance(0.5) else specs[0]
    for k, (shape, dt) in enumerate(specs):
      self.env.append(Var(f"x{k}", "gmem", shape, dt))
    self.env.append(Var("out", "gmem", out[0], out[1]))
    for _ in range(self.c.integer(1, MAX_STMTS)):
      if self.n_stmts < MAX_STMTS:
        self.stmt()
    grid = self.c.choice(["(1,)", "(2,)", "(4, 2)"])
    cluster = self.c.choice(["None", "None", "(2,)", "(1, 2)"])
    block = self.c.choice(["128", "128", "256", "96"])
    params = ", ".join([f"x{k}" for k in range(n_in)] + ["out"])
    head = [
        "import jax, jax.numpy as jnp",
        "import mgpu_dsl as mg",
        "from mgpu_dsl import language as ml",
        "",
        f"@mg.mgpu_kernel(out_shape=jax.ShapeDtypeStruct({out[0]}, jnp.{jnp_name(out[1])}), grid={grid},"
        f" cluster={cluster}, block={block})",
        f"def kernel({params}):",
    ]
    text = "\n".join(head + self.lines) + "\n"
    return Program(text, specs, out, first_line=5, last_line=len(head) + len(self.lines))


def generate(c) -> Program:
  return Gen(c).kernel()


# ---------------------------------------------------------------------------- checking
_modules = itertools.count()
_tmp = tempfile.TemporaryDirectory(prefix="mgpu_dsl_fuzz_")


def load(program: Program):
  name = f"mgpu_dsl_fuzz_{os.getpid()}_{next(_modules)}"
  path = os.path.join(_tmp.name, name + ".py")
  with open(path, "w") as f:
    f.write(program.source)
  spec = importlib.util.spec_from_file_location(name, path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules[name] = mod
  try:
    spec.loader.exec_module(mod)
  finally:
    del sys.modules[name]
  return mod.kernel


def check_program(program: Program):
  """None if the kernel builds or fails with a located user error; else a failure description."""
  kernel = load(program)
  specs = [jax.ShapeDtypeStruct(shape, jnp.dtype(dt)) for shape, dt in program.specs]
  try:
    kernel.check(*specs)
  except mg.InternalError as e:
    return f"InternalError: {e.message}", e
  except mg.KernelError as e:
    if not program.first_line <= e.lineno <= program.last_line:
      return f"{type(e).__name__} outside the kernel (line {e.lineno}): {e.message}", e
    return None
  except Exception as e:   # noqa: BLE001  (any other exception is the bug we look for)
    return f"{type(e).__name__}: {e}", e
  return None


def _describe(program, failure):
  what, exc = failure
  tb = "".join(traceback.format_exception(exc))
  return f"{what}\n--- kernel ---\n{program.source}--- specs: {program.specs}\n{tb}"


FUZZ_EXAMPLES = int(os.environ.get("MGPU_DSL_FUZZ_EXAMPLES", "150"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_kernels_build_or_fail_with_a_located_user_error(data):
  program = generate(DataChooser(data))
  failure = check_program(program)
  if failure is not None:
    pytest.fail(_describe(program, failure), pytrace=False)


def test_the_generator_produces_both_valid_and_invalid_kernels():
  outcomes = set()
  for seed in range(60):
    program = generate(RandomChooser(seed))
    try:
      load(program).check(*[jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in program.specs])
      outcomes.add("ok")
    except mg.KernelError:
      outcomes.add("error")
  assert outcomes == {"ok", "error"}


def _hunt(n, seed):
  """Run `n` random kernels; print each distinct failure once."""
  import collections
  import re
  seen = collections.Counter()
  ok = errors = 0
  for k in range(n):
    program = generate(RandomChooser(seed * 1_000_003 + k))
    failure = check_program(program)
    if failure is None:
      continue
    key = re.sub(r"\d+", "N", failure[0])[:160]
    seen[key] += 1
    if seen[key] == 1:
      print(f"=== failure #{len(seen)} (example {k}) ===\n{_describe(program, failure)}", flush=True)
  print(f"ran {n} kernels; {sum(seen.values())} failures, {len(seen)} distinct", flush=True)
  for key, count in seen.most_common():
    print(f"{count:6d}  {key}")
  return 1 if seen else 0


if __name__ == "__main__":
  sys.exit(_hunt(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                 int(sys.argv[2]) if len(sys.argv) > 2 else 0))
