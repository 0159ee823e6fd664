"""Probe 60d: a mutation fuzzer of diagnostics.

A valid kernel of the corpus (tests/mut_corpus.json: module-level kernels of tests/ and examples/ with the inputs a
test run called them on) gets one or two random source mutations a user could make by mistake: an integer constant
changed (tile, slice bound, axis, grid), two arguments swapped, `.T` dropped or added, a dtype changed, `[...]`
dropped from a ref's read (a ref used as a value) or a ref passed where a ref's `[...]` was, a statement deleted, two
statements swapped (a name used before it is bound), a name replaced by another name of the kernel (GMEM -> GMEM
copies, shape mismatches in dots and wheres), an output parameter dropped or added, a keyword renamed, an `ml.` op
replaced by another. The mutated module is written to a file, imported, and the kernel called in interpret mode on
small inputs, then exported for CUDA on the CPU.

`classify(case, source)` -> (class, detail):
  "ran"        a legal mutant (interpret mode ran and the export built)
  "refused"    a KernelError located in the mutant's module (or the call), with a code and a hint
  "pyerr"      a Python error the user's own code raised (the innermost frame is the mutant's: an out_shape helper's
               ValueError), or one with no mgpu_dsl frame
  "escape"     a BUG: an exception other than KernelError raised through mgpu_dsl (detail: type, message, the
               innermost mgpu_dsl frame)
  "internal"   a BUG: an InternalError
  "badloc"     a BUG: a KernelError located outside the user's module and call (mgpu_dsl's own files, <unknown>)
  "nohint"     a BUG: a KernelError without a hint
  "badtext"    a BUG: a KernelError whose message shows an internal value name (%12)
Hangs and crashes are the pool's (benchmarks/probe_mut_fuzz.py): "timeout", "died".
"""
from __future__ import annotations

import ast
import contextlib
import importlib.util
import itertools
import json
import os
import random
import re
import sys
import tempfile
import traceback
import warnings

import jax
import mgpu_dsl as mg

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CORPUS = os.environ.get("MUT_CORPUS") or os.path.join(ROOT, "tests", "mut_corpus.json")   # (another: heavier kernels)
BUGS = ("escape", "internal", "badloc", "nohint", "badtext")
_OWN = tuple(os.path.join(ROOT, d) + os.sep for d in ("frontend", "lowering", "mgpu_dsl"))

DTYPES = ["jnp.float16", "jnp.float32", "jnp.bfloat16", "jnp.int8", "jnp.int32", "jnp.bool_", "jnp.uint8"]
OPS = ["exp", "log", "sqrt", "sum", "max", "min", "maximum", "minimum", "where", "dot", "zeros", "full", "copy",
       "arange", "program_id", "smem", "abs", "sigmoid", "broadcast_to", "reshape", "astype", "cdiv", "ds"]
KEYWORDS = ["axis", "dtype", "keepdims", "out", "shape", "stages", "mask", "other", "transpose_b", "acc", "size"]


def corpus():
  with open(CORPUS) as f:
    return json.load(f)


# ---------------------------------------------------------------------- mutation
def _kernel_def(tree, name):
  for node in tree.body:
    if isinstance(node, ast.FunctionDef) and node.name == name:
      return node
  raise LookupError(name)


def _lines_offsets(text):
  offs, n = [0], 0
  for line in text.splitlines(keepends=True):
    n += len(line.encode())
    offs.append(n)
  return offs


class Mutator:
  """The mutation sites of one kernel of a module's source; `mutate(rng)` -> (source, kind, what) or None."""

  def __init__(self, source, name):
    self.source = source
    self.raw = source.encode()
    self.offs = _lines_offsets(source)
    tree = ast.parse(source)
    self.fn = _kernel_def(tree, name)
    self.names = sorted({n.id for n in ast.walk(self.fn) if isinstance(n, ast.Name)}
                        | {a.arg for a in self.fn.args.args})

  def _span(self, node):
    a = self.offs[node.lineno - 1] + node.col_offset
    b = self.offs[node.end_lineno - 1] + node.end_col_offset
    return a, b

  def text(self, node):
    a, b = self._span(node)
    return self.raw[a:b].decode()

  def replace(self, node, new, node2=None, new2=None):
    edits = [(self._span(node), new)] + ([(self._span(node2), new2)] if node2 is not None else [])
    edits.sort(key=lambda e: e[0][0], reverse=True)
    out = self.raw
    for (a, b), t in edits:
      out = out[:a] + t.encode() + out[b:]
    return out.decode()

  def nodes(self, *types, body_only=False):
    roots = self.fn.body if body_only else [self.fn]
    return [n for r in roots for n in ast.walk(r) if isinstance(n, types) and hasattr(n, "lineno")]

  # each returns (source, what) or None
  def m_int(self, rng):
    cs = [n for n in self.nodes(ast.Constant) if type(n.value) is int]
    if not cs:
      return None
    n = rng.choice(cs)
    v = n.value
    new = rng.choice([v + 1, v - 1, v * 2, v // 2, 0, 1, -1, 3, v + 64, 1000])
    return self.replace(n, str(new)), f"{v} -> {new} (line {n.lineno})"

  def m_swap_args(self, rng):
    cs = [n for n in self.nodes(ast.Call) if len(n.args) >= 2]
    if not cs:
      return None
    n = rng.choice(cs)
    i, j = rng.sample(range(len(n.args)), 2)
    a, b = n.args[i], n.args[j]
    if a.lineno != b.lineno and (a.end_lineno >= b.lineno if a.lineno < b.lineno else b.end_lineno >= a.lineno):
      return None
    return self.replace(a, self.text(b), b, self.text(a)), f"swap args {i},{j} of line {n.lineno}"

  def m_transpose(self, rng):
    ts = [n for n in self.nodes(ast.Attribute) if n.attr == "T"]
    vals = [n for n in self.nodes(ast.Name, ast.Subscript, body_only=True) if isinstance(n.ctx, ast.Load)]
    if ts and (rng.random() < 0.5 or not vals):
      n = rng.choice(ts)
      return self.replace(n, self.text(n.value)), f"drop .T (line {n.lineno})"
    if not vals:
      return None
    n = rng.choice(vals)
    return self.replace(n, f"({self.text(n)}).T"), f"add .T to {self.text(n)[:40]} (line {n.lineno})"

  def m_dtype(self, rng):
    ds = [n for n in self.nodes(ast.Attribute) if isinstance(n.value, ast.Name) and n.value.id in ("jnp", "np")
          and n.attr in {d.split(".")[1] for d in DTYPES} | {"float8_e4m3fn", "float64", "int16"}]
    if not ds:
      return None
    n = rng.choice(ds)
    new = rng.choice([d for d in DTYPES if d != f"jnp.{n.attr}"])
    return self.replace(n, new), f"{self.text(n)} -> {new} (line {n.lineno})"

  def m_drop_read(self, rng):
    subs = [n for n in self.nodes(ast.Subscript, body_only=True)
            if isinstance(n.slice, ast.Constant) and n.slice.value is Ellipsis]
    ats = [n for n in self.nodes(ast.Subscript, body_only=True)
           if isinstance(n.value, ast.Attribute) and n.value.attr == "at"]
    if subs and (rng.random() < 0.5 or not ats):
      n = rng.choice(subs)
      return self.replace(n, self.text(n.value)), f"drop [...] of {self.text(n)} (line {n.lineno})"
    if not ats:
      return None
    n = rng.choice(ats)         # x.at[i] (a ref) -> x[i] (registers)
    return self.replace(n, f"{self.text(n.value.value)}[{self.text(n.slice)}]"), f"x.at[] -> x[] (line {n.lineno})"

  def _stmts(self):
    out = []
    for node in ast.walk(self.fn):
      for field in ("body", "orelse"):
        block = getattr(node, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
          out.append(block)
    return out

  def m_delete(self, rng):
    blocks = [b for b in self._stmts() if b is not self.fn.body or len(b) > 1]
    stmts = [s for b in blocks for s in b if not isinstance(s, ast.FunctionDef)]
    if not stmts:
      return None
    s = rng.choice(stmts)
    return self.replace(s, "pass"), f"delete line {s.lineno}"

  def m_swap_stmts(self, rng):
    pairs = [(b[i], b[i + 1]) for b in self._stmts() for i in range(len(b) - 1)
             if b[i].end_lineno < b[i + 1].lineno and b[i].col_offset == b[i + 1].col_offset]
    if not pairs:
      return None
    a, b = rng.choice(pairs)
    return self.replace(a, self.text(b), b, self.text(a)), f"swap lines {a.lineno} and {b.lineno}"

  def m_name(self, rng):
    ns = [n for n in self.nodes(ast.Name, body_only=True) if isinstance(n.ctx, ast.Load)
          and n.id not in ("ml", "jnp", "jax", "np", "lax", "range", "len", "int", "float", "mg")]
    if not ns or len(self.names) < 2:
      return None
    n = rng.choice(ns)
    new = rng.choice([m for m in self.names if m != n.id] + ["undefined_name"])
    return self.replace(n, new), f"{n.id} -> {new} (line {n.lineno})"

  def m_params(self, rng):
    args = self.fn.args.args
    if not args:
      return None
    if rng.random() < 0.5 and len(args) > 1:
      a = args[-1] if rng.random() < 0.7 else rng.choice(args)
      i = args.index(a)
      nxt = args[i + 1] if i + 1 < len(args) else None
      if nxt is not None and nxt.lineno == a.lineno:
        return self.replace(a, "", nxt, self.text(nxt)).replace(f"(, {nxt.arg}", f"({nxt.arg}").replace(
            f", , {nxt.arg}", f", {nxt.arg}"), f"drop parameter {a.arg}"
      prev = args[i - 1]
      if prev.lineno != a.lineno:
        return None
      a0, _ = self._span(prev)
      _, b1 = self._span(a)
      src = (self.raw[:a0] + self.raw[a0:b1].decode().split(",")[0].encode() + self.raw[b1:]).decode()
      return src, f"drop parameter {a.arg}"
    a = args[-1]
    return self.replace(a, f"{self.text(a)}, extra_out"), "add an output parameter"

  def m_keyword(self, rng):
    kws = [k for n in self.nodes(ast.Call) for k in n.keywords if k.arg]
    calls = [n for n in self.nodes(ast.Call, body_only=True)]
    if kws and rng.random() < 0.6:
      k = rng.choice(kws)
      new = rng.choice([w for w in KEYWORDS if w != k.arg] + [k.arg + "s"])
      line = self.offs[k.lineno - 1] + k.col_offset
      src = (self.raw[:line] + self.raw[line:].replace(k.arg.encode(), new.encode(), 1)).decode()
      return src, f"keyword {k.arg}= -> {new}= (line {k.lineno})"
    if not calls:
      return None
    n = rng.choice(calls)
    kw = rng.choice(KEYWORDS)
    val = rng.choice(["1", "0", "True", "jnp.float32", "(64, 64)", "-1"])
    end = self._span(n)[1] - 1
    sep = ", " if (n.args or n.keywords) else ""
    src = (self.raw[:end] + f"{sep}{kw}={val}".encode() + self.raw[end:]).decode()
    return src, f"add {kw}={val} to line {n.lineno}"

  def m_op(self, rng):
    ops = [n for n in self.nodes(ast.Attribute) if isinstance(n.value, ast.Name) and n.value.id in ("ml", "jnp")
           and n.attr in OPS and n.attr not in {d.split(".")[1] for d in DTYPES}]
    if not ops:
      return None
    n = rng.choice(ops)
    new = rng.choice([o for o in OPS if o != n.attr])
    return self.replace(n, f"{n.value.id}.{new}"), f"{n.value.id}.{n.attr} -> {new} (line {n.lineno})"

  def m_slice(self, rng):
    subs = [n for n in self.nodes(ast.Slice) if n.lower is not None or n.upper is not None]
    dss = [n for n in self.nodes(ast.Call) if isinstance(n.func, ast.Attribute) and n.func.attr == "ds"
           and len(n.args) == 2]
    if subs and (rng.random() < 0.5 or not dss):
      n = rng.choice(subs)
      b = n.upper if n.upper is not None else n.lower
    elif dss:
      b = rng.choice(rng.choice(dss).args)
    else:
      return None
    d = rng.choice(["+ 1", "- 1", "* 2", "+ 128"])
    return self.replace(b, f"({self.text(b)}) {d}"), f"bound {self.text(b)[:30]} {d} (line {b.lineno})"

  def m_axis(self, rng):
    ks = [k for n in self.nodes(ast.Call) for k in n.keywords if k.arg in ("axis", "axes")]
    if not ks:
      return None
    k = rng.choice(ks)
    new = rng.choice(["0", "1", "-1", "2", "(0, 1)", "None", "5"])
    return self.replace(k.value, new), f"axis={self.text(k.value)} -> {new} (line {k.lineno})"

  def m_arg_count(self, rng):
    calls = [n for n in self.nodes(ast.Call, body_only=True) if n.args]
    if not calls:
      return None
    n = rng.choice(calls)
    if rng.random() < 0.5:
      a = rng.choice(n.args)
      i = n.args.index(a)
      if len(n.args) == 1:
        return self.replace(a, ""), f"drop the argument of line {n.lineno}"
      o = n.args[i + 1] if i + 1 < len(n.args) else n.args[i - 1]
      if o.lineno != a.lineno or o.end_lineno != a.end_lineno:
        return None
      lo, hi = (a, o) if i + 1 < len(n.args) else (o, a)
      keep = o
      src = self.replace(lo, self.text(keep), hi, "")
      src = src.replace(f"{self.text(keep)}, )", f"{self.text(keep)})", 1)
      return src, f"drop argument {i} of line {n.lineno}"
    extra = rng.choice(["1", "x" if "x" in self.names else "0", "None", "(64, 64)", self.text(n.args[0])])
    a = n.args[-1]
    return self.replace(a, f"{self.text(a)}, {extra}"), f"add argument {extra} to line {n.lineno}"

  def m_value(self, rng):
    vs = [n for n in self.nodes(ast.Name, ast.Subscript, ast.Call, ast.Constant, ast.BinOp, body_only=True)
          if isinstance(getattr(n, "ctx", ast.Load()), ast.Load)]
    if not vs:
      return None
    n = rng.choice(vs)
    new = rng.choice(["None", "1.5", "'a'", "(1, 2)", "[1, 2]", "True", "-1", "ml.program_id(0)", "2 ** 40",
                      "float('nan')", "jnp.float32", "ml.zeros((64, 64), jnp.float32)", "ml.arange(0, 128)",
                      "ml.smem((64, 64), jnp.float32)", "x.shape" if "x" in self.names else "()"])
    return self.replace(n, new), f"{self.text(n)[:30]} -> {new} (line {n.lineno})"

  def m_space(self, rng):
    sm = [n for n in self.nodes(ast.Call, body_only=True) if isinstance(n.func, ast.Attribute)
          and n.func.attr in ("smem", "zeros", "full", "empty") and n.args]
    if not sm:
      return None
    n = rng.choice(sm)
    shape = self.text(n.args[0])
    new = f"ml.zeros({shape}, jnp.float32)" if n.func.attr == "smem" else f"ml.smem({shape})"
    return self.replace(n, new), f"{self.text(n)[:40]} -> {new} (line {n.lineno})"

  def m_compare(self, rng):
    cs = [n for n in self.nodes(ast.Compare, ast.BinOp, ast.UnaryOp, body_only=True)]
    if not cs:
      return None
    n = rng.choice(cs)
    t = self.text(n)
    if isinstance(n, ast.UnaryOp):
      return self.replace(n, self.text(n.operand)), f"drop a unary op (line {n.lineno})"
    left = self.text(n.left)
    right = self.text(n.comparators[0] if isinstance(n, ast.Compare) else n.right)
    op = rng.choice(["<", "<=", "==", "!=", "+", "-", "*", "/", "//", "%", "@", "&", "|", "**", ">>"])
    return self.replace(n, f"{left} {op} {right}"), f"{t[:30]} -> op {op} (line {n.lineno})"

  KINDS = ("int", "swap_args", "transpose", "dtype", "drop_read", "delete", "swap_stmts", "name", "params",
           "keyword", "op", "slice", "axis", "arg_count", "value", "space", "compare", "input", "constexpr")

  def mutate(self, rng):
    for _ in range(20):
      kind = rng.choice(self.KINDS)
      if kind in ("input", "constexpr"):
        continue
      got = getattr(self, "m_" + kind)(rng)
      if got is None:
        continue
      src, what = got
      try:
        compile(src, "<mutant>", "exec")      # (not ast.parse: a repeated keyword is the compiler's error)
      except SyntaxError:
        continue
      if src != self.source:
        return src, kind, what
    return None


def mutate_call(case, rng):
  """`case` with one input's shape or dtype changed, an input dropped or added, or a constexpr changed."""
  case = json.loads(json.dumps(case))
  ins, cx = case["inputs"], case.setdefault("constexprs", {})
  r = rng.random()
  if cx and r < 0.25:
    k = rng.choice(sorted(cx))
    v = cx[k]
    cx[k] = rng.choice([None, 0, -1, 1.5, "a", True] + ([v + 1, v * 2, v // 2 if v else 3] if isinstance(v, int) else []))
    return case, f"constexpr {k}={v!r} -> {cx[k]!r}"
  if r < 0.35:
    cx["bogus"] = 1
    return case, "an unknown constexpr bogus=1"
  if not ins:
    return case, "no inputs"
  i = rng.randrange(len(ins))
  d = ins[i]
  r = rng.random()
  if r < 0.1:
    del ins[i]
    return case, f"input {i} dropped"
  if r < 0.2:
    ins.append(dict(d))
    return case, f"input {i} passed twice"
  if r < 0.45:
    d["dtype"] = rng.choice(["float16", "float32", "bfloat16", "int8", "int32", "bool", "uint8"])
    return case, f"input {i} as {d['dtype']}"
  shape = d["shape"]
  if shape and r < 0.8:
    j = rng.randrange(len(shape))
    shape[j] = max(1, rng.choice([shape[j] + 1, shape[j] - 1, shape[j] * 2, shape[j] // 2, 1]))
  elif shape and r < 0.9:
    del shape[rng.randrange(len(shape))]
  else:
    shape.insert(0, rng.choice([1, 2, 3]))
  return case, f"input {i} of shape {tuple(shape)}"


def mutant(seed, cases=None):
  """(case, source, kind, what) of `seed`: a corpus kernel and one mutation (one in five: two)."""
  rng = random.Random(seed)
  cases = cases or corpus()
  case = cases[seed % len(cases)]
  with open(os.path.join(ROOT, case["path"])) as f:
    src = f.read()
  kinds, whats = [], []
  for _ in range(2 if rng.random() < 0.2 else 1):
    if rng.random() < 0.1:       # a call-site mistake: inputs or constexprs unlike the kernel's
      case, what = mutate_call(case, rng)
      kinds.append("input")
      whats.append(what)
      continue
    got = Mutator(src, case["name"]).mutate(rng)
    if got is None:
      break
    src, k, w = got
    kinds.append(k)
    whats.append(w)
  return case, src, "+".join(kinds) or "none", "; ".join(whats)


# ---------------------------------------------------------------------- running
_modules = itertools.count()
_tmp = None
_paths = []      # the mutants' module files, last one last (a decorator's error leaves no kernel)


def load(source, name, home=None):
  """The kernel `name` of a module of `source` (written to a file: the frontend reads source), and its path."""
  global _tmp
  if _tmp is None:
    _tmp = tempfile.mkdtemp(prefix="mgpu_dsl_mut_")
  mod_name = f"mgpu_dsl_mut_{os.getpid()}_{next(_modules)}"
  path = os.path.join(_tmp, mod_name + ".py")
  _paths.append(path)
  with open(path, "w") as f:
    f.write(source)
  if home and home not in sys.path:      # the module's siblings (examples/rmsnorm.py imports layernorm)
    sys.path.append(home)
  spec = importlib.util.spec_from_file_location(mod_name, path)
  mod = importlib.util.module_from_spec(spec)
  sys.modules[mod_name] = mod
  try:
    spec.loader.exec_module(mod)
  finally:
    del sys.modules[mod_name]
  return getattr(mod, name), path


def inputs(case, seed=0):
  import jax.numpy as jnp
  import numpy as np
  r = np.random.default_rng(seed)
  out = []
  for d in case["inputs"]:
    shape, dt = tuple(d["shape"]), np.dtype(jnp.dtype(d["dtype"]))
    if dt == np.bool_:
      a = r.random(shape) < 0.5
    elif dt.kind in "iu":
      a = r.integers(d.get("lo", 0), d.get("hi", 3) + 1, shape)
    else:
      a = r.standard_normal(shape)
    out.append(jnp.asarray(a, dt))
  return out


def _own_frame(e):
  """The innermost frame of mgpu_dsl's own files in `e`'s traceback ('file:line in fn'), or None."""
  own = None
  for fs in traceback.extract_tb(e.__traceback__):
    if os.path.realpath(fs.filename).startswith(_OWN):
      own = f"{os.path.relpath(os.path.realpath(fs.filename), ROOT)}:{fs.lineno} in {fs.name}"
  return own


def check_error(e, path):
  """(class, detail) of a KernelError: 'refused' or the bug it shows."""
  for x in e.errors:
    head = f"{type(x).__name__} {x.code} {x.loc}: {x.message[:200]}"
    if isinstance(x, mg.InternalError):
      return "internal", head
    if x.filename not in (path, __file__) or not x.lineno:
      return "badloc", head
    if not x.hint:
      return "nohint", head
    if re.search(r"%\d", x.message) or (x.hint and re.search(r"%\d", x.hint)):
      return "badtext", head
  where = "call" if e.filename == __file__ else f"line {e.lineno}"
  return "refused", f"{e.code} {where}: {e.message[:160]}"


def classify(case, source, *, export=True):
  """(class, detail) of the mutant `source` of `case` (see the module's doc); its prints and warnings dropped."""
  with open(os.devnull, "w") as null, contextlib.redirect_stdout(null), warnings.catch_warnings():
    warnings.simplefilter("ignore")
    return _classify(case, source, export)


def _classify(case, source, export):
  try:
    kernel, path = load(source, case.get("kernel", case["name"]),      # (kernel: a module-level name bound to
                        os.path.dirname(os.path.join(ROOT, case["path"])))    # mg.mgpu_kernel(fn), fn the def name)
    args = inputs(case)
    cx = case.get("constexprs", {})
    jax.block_until_ready(kernel(*args, interpret=True, **cx))   # the call site: this line
    if export:
      specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
      jax.export.export(jax.jit(lambda *a: kernel(*a, **cx)), platforms=["cuda"])(*specs)
  except mg.KernelError as e:
    return check_error(e, _paths[-1])
  except RecursionError as e:
    return "escape", f"RecursionError: {str(e)[:100]} @ {_own_frame(e)}"
  except Exception as e:  # noqa: BLE001 - every other exception is classified by where it arose
    own = _own_frame(e)
    frames = traceback.extract_tb(e.__traceback__)
    if own is None or (frames and frames[-1].filename == _paths[-1]):     # raised by the user's own Python
      return "pyerr", f"{type(e).__name__}: {str(e)[:160]}"
    return "escape", f"{type(e).__name__}: {str(e).splitlines()[0][:200] if str(e) else ''} @ {own}"
  return "ran", ""


def run_seed(seed, cases=None, export=True):
  """(class, kind, what, detail) of one seed."""
  case, src, kind, what = mutant(seed, cases)
  if kind == "none":
    return "skipped", kind, what, case["name"]
  cls, detail = classify(case, src, export=export)
  return cls, kind, f"{case['path']}:{case['name']}: {what}", detail
