"""Probe 57e's differential fuzzer: random kernels of register ops, each run in interpret mode against jnp on the
same inputs and built for CUDA.

`Gen(seed)` writes one kernel as Python source (the frontend reads source: it goes to a temporary module file).
Every statement `vK = <kernel expression>` has a twin `<jnp expression>` that is evaluated at once, eagerly, on the
reference values of the names it reads (the same inputs the kernel gets): so the twin's dtype and shape are jnp's,
and the kernel asserts them after each statement (`assert vK.dtype == ... and vK.shape == ...`, a static check:
promotion that differs from jnp's is an MG011 at that line). The ops: elementwise math of float32, float16,
bfloat16, int8, uint8, int32 and bool values and Python numbers (weakly typed), broadcasts of rows, columns and
outer products, row and column reductions, `ml.where` / `jnp.where`, casts, reshapes, transposes, static slices,
iota masks, cumulative sums and maxima, dots of small tiles, and masked loads and stores of odd lengths (1..300
elements) and odd 2-D windows. `run(gen)` classifies a kernel: "ok", "wrong" (a number that is not jnp's),
"crash" (anything but a KernelError: a raw traceback), "refused" (a KernelError), "build" (interpret mode right, the
CUDA export not). Deterministic: a seed gives the same kernel and inputs.
"""
from __future__ import annotations

import itertools
import random
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import fuzz_check

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "uint8", "int32", "int16")
DTYPES = FLOATS + INTS + ("bool",)
TILES = [(8, 128), (16, 64), (4, 256), (64, 64), (2, 128), (16, 128), (32, 32), (64, 128)]
VECS = [128, 256, 64, 512, 1024]
TOL = {"float32": 2e-5, "float16": 2e-3, "bfloat16": 1.6e-2}


def _wide(f):
  """jax.nn's composite activations of float16 / bfloat16 as the kernel computes them (documented: in float32,
  rounded once, as XLA on the GPU computes them; jnp on the CPU rounds each step)."""
  def g(x):
    if x.dtype in (jnp.float16, jnp.bfloat16):
      return f(x.astype(jnp.float32)).astype(x.dtype)
    return f(x)
  return g


REF_NS = {"jnp": jnp, "jax": jax, "lax": lax, "np": np, "gelu": _wide(jax.nn.gelu), "silu": _wide(jax.nn.silu),
          "softplus": _wide(jax.nn.softplus)}

HEADER = """import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
import mgpu_dsl as mg
from mgpu_dsl import language as ml
S = jax.ShapeDtypeStruct
"""


def _lit(r, dtype, mixed=True):
  """A Python number literal that meets a value of `dtype` (weakly typed in kernel and jnp alike)."""
  if dtype in FLOATS or (mixed and r.random() < 0.2):
    return repr(r.choice([0.5, 2.0, -1.5, 3.0, 0.1, -0.25, 1.0, 7.0]))
  hi = {"uint8": 200, "int8": 100}.get(dtype, 1000)
  lo = 0 if dtype == "uint8" else -hi
  return str(r.randint(lo, hi))


class Gen:
  def __init__(self, seed, n_ops=None, focus=False):
    self.seed = seed
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.ins = []        # (name, array, load line)
    self.lines = []
    self.vals = {}       # name -> reference value (jnp array)
    self.outs = []       # (name, kernel store line, reference value)
    self.count = itertools.count()
    self.specials = self.r.random() < 0.15
    self.tags = set()
    self.focus = focus       # a kernel of the classes probe 57e fixed: an integer or bool value's whole-number ops
    self._build(n_ops or self.r.randint(2, 7))

  # ------------------------------------------------------------------ values
  def array(self, shape, dtype):
    if dtype in FLOATS:
      a = (self.rng.standard_normal(shape) * self.r.choice([1.0, 4.0, 0.25])).astype(np.float32)
      if self.specials and a.size > 8:
        flat = a.reshape(-1)
        flat[self.rng.integers(0, flat.size, 3)] = [np.nan, np.inf, -0.0]
    elif dtype == "bool":
      a = self.rng.random(shape) < 0.5
    else:
      info = np.iinfo(dtype)
      a = self.rng.integers(max(info.min, -120), min(info.max, 250) + 1, shape)
    return jnp.asarray(a, jnp.dtype(dtype))

  def new_input(self, shape, dtype):
    name = f"a{len(self.ins)}"
    arr = self.array(shape, dtype)
    self.ins.append([name, arr])
    return name, arr

  def bind(self, kexpr, rexpr, tag):
    """`vK = kexpr` in the kernel, its reference `rexpr` evaluated now; None where jnp refuses or the shape is
    outside the corpus (scalars, empty or huge values)."""
    try:
      val = eval(rexpr, dict(REF_NS), dict(self.vals))
    except Exception:   # noqa: BLE001  jnp's own refusal: not a kernel
      return None
    if not hasattr(val, "shape") or val.ndim == 0 or val.size == 0 or val.size > 16384 or val.dtype.name not in DTYPES + ("int16", "uint16", "uint32"):
      return None
    name = f"v{next(self.count)}"
    self.vals[name] = val
    self.lines.append(f"  {name} = {kexpr}")
    self.lines.append(f"  assert {name}.dtype == jnp.{jnp.dtype(val.dtype).name} and {name}.shape == {tuple(val.shape)}, "
                      f"'jnp: {jnp.dtype(val.dtype).name}{tuple(val.shape)}'")
    self.tags.add(tag)
    return name

  def pick(self, pred=lambda v: True):
    names = [n for n, v in self.vals.items() if n.startswith("v") and pred(v)]
    return self.r.choice(names) if names else None

  # ------------------------------------------------------------------ loads
  def load_plain(self):
    if self.r.random() < 0.6:
      shape = self.r.choice(TILES)
    else:
      shape = (self.r.choice(VECS),)
    dt = self.r.choice(DTYPES + ("int16",))
    a, arr = self.new_input(shape, dt)
    self.vals[a] = arr
    return self.bind(f"{a}[...]", f"{a}", "load")

  def load_masked(self):
    """A masked load of an odd length (1..300) into a padded run, Triton's way or as a window."""
    dt = self.r.choice(DTYPES)
    other = "False" if dt == "bool" else _lit(self.r, dt if dt in FLOATS else "uint8", mixed=False)
    if self.r.random() < 0.6:
      n = self.r.randint(1, 300)
      P = -(-n // 128) * 128
      a, arr = self.new_input((n,), dt)
      self.vals[a] = arr
      if self.r.random() < 0.5:
        k = f"{a}.at[ml.ds(0, {P})].load(mask=ml.arange({P}) < {n}, other={other})"
      else:
        k = f"ml.load({a}.at[ml.arange({P})], mask=ml.arange({P}) < {a}.shape[0], other={other})"
      ref = f"jnp.where(jnp.arange({P}) < {n}, jnp.pad({a}, (0, {P - n})), jnp.asarray({other}, {a}.dtype))"
      return self.bind(k, ref, "masked_load")
    R, C = self.r.choice([(8, 128), (16, 64), (4, 128), (8, 64)])
    r, c = self.r.randint(1, R), self.r.randint(1, C)
    a, arr = self.new_input((r, c), dt)
    self.vals[a] = arr
    m = f"(ml.arange({R})[:, None] < {r}) & (ml.arange({C})[None, :] < {c})"
    k = f"{a}.at[ml.arange({R})[:, None], ml.arange({C})[None, :]].load(mask={m}, other={other})"
    ref = f"jnp.where((jnp.arange({R})[:, None] < {r}) & (jnp.arange({C})[None, :] < {c}), jnp.pad({a}, ((0, {R - r}), (0, {C - c}))), jnp.asarray({other}, {a}.dtype))"
    return self.bind(k, ref, "masked_load2")

  def load_odd(self):
    """An odd shape read whole (padded by the compiler)."""
    shape = self.r.choice([(300,), (100,), (5, 37), (3, 64), (7, 64), (6, 80), (250,), (12, 12), (40,)])
    dt = self.r.choice(DTYPES)
    a, arr = self.new_input(shape, dt)
    self.vals[a] = arr
    return self.bind(f"{a}[...]", f"{a}", "odd_load")

  # ------------------------------------------------------------------ ops
  def op(self):
    r = self.r
    kind = r.choice(["unary", "unary", "binary", "binary", "binary", "compare", "where", "cast", "reduce",
                     "outer", "transpose", "reshape", "slice", "iota", "cum", "dot", "minmax", "shift",
                     "load", "bitwise", "divmod", "mixed_where", "arg", "join", "move", "clip", "center", "idiv",
                     "binary", "compare", "where"])
    return getattr(self, "op_" + kind)()

  def op_load(self):
    return self.r.choice([self.load_plain, self.load_masked, self.load_odd])()

  def op_unary(self):
    x = self.pick(lambda v: v.dtype != jnp.bool_)
    if x is None:
      return None
    fns = [("jnp.exp({x})", None), ("ml.exp({x})", "jnp.exp({x})"), ("jnp.tanh({x})", None),
           ("ml.log(ml.abs({x}) + 1)", "jnp.log(jnp.abs({x}) + 1)"), ("jnp.sin({x})", None), ("jnp.cos({x})", None),
           ("ml.sqrt(ml.abs({x}))", "jnp.sqrt(jnp.abs({x}))"), ("jax.nn.sigmoid({x})", None),
           ("ml.floor({x})", "jnp.floor({x})"), ("jnp.ceil({x})", None), ("-{x}", None), ("ml.abs({x})", "jnp.abs({x})"),
           ("jnp.square({x})", None), ("{x} * {x}", None), ("jax.nn.relu({x})", None), ("jnp.round({x})", None),
           ("ml.rsqrt(ml.abs({x}) + 1.0)", "lax.rsqrt(jnp.abs({x}) + 1.0)"), ("jnp.sign({x})", None),
           ("ml.exp2({x})", "jnp.exp2({x})"), ("jax.nn.silu({x})", "silu({x})"), ("jax.nn.softplus({x})", "softplus({x})"),
           ("jnp.reciprocal({x})", None), ("{x} ** 2", None), ("{x} ** 3", None), ("jnp.log1p(jnp.abs({x}))", None),
           ("jnp.expm1({x})", None), ("jax.nn.gelu({x})", "gelu({x})"), ("jnp.trunc({x})", None)]
    k, rr = r_choice(self.r, fns)
    if "ml." in k and self.vals[x].dtype.name not in FLOATS:
      k, rr = rr or k.replace("ml.", "jnp."), None
    return self.bind(k.format(x=x), (rr or k).replace("ml.", "jnp.").format(x=x), "unary:" + k.split("(")[0])

  def _partner(self, x, numeric=True):
    """A second operand for `x`: another value it broadcasts with, or a Python number."""
    xs = self.vals[x].shape
    ok = [n for n, v in self.vals.items() if n.startswith("v") and _broadcasts(v.shape, xs) and (not numeric or v.dtype != jnp.bool_)]
    if ok and self.r.random() < 0.7:
      y = self.r.choice(ok)
      ys = self.vals[y].shape
      if len(ys) == 1 and len(xs) == 2 and ys[0] == xs[0] and ys[0] != xs[1]:
        return f"{y}[:, None]"
      return y
    return _lit(self.r, self.vals[x].dtype.name)

  def op_binary(self):
    x = self.pick(lambda v: v.dtype != jnp.bool_)
    if x is None:
      return None
    y = self._partner(x)
    o = self.r.choice(["+", "-", "*", "/", "*", "+"])
    if self.r.random() < 0.5:
      x, y = y, x
    return self.bind(f"{x} {o} {y}", f"{x} {o} {y}", "binary" + o)

  def op_minmax(self):
    x = self.pick(lambda v: v.dtype != jnp.bool_)
    if x is None:
      return None
    y = self._partner(x)
    f = self.r.choice(["maximum", "minimum"])
    pre = self.r.choice(["ml", "jnp"])
    return self.bind(f"{pre}.{f}({x}, {y})", f"jnp.{f}({x}, {y})", f)

  def op_divmod(self):
    x = self.pick(lambda v: v.dtype.name in INTS + FLOATS)
    if x is None:
      return None
    d = self.r.choice([3, 7, -5, 2, 16, -1]) if self.vals[x].dtype.name != "uint8" else self.r.choice([3, 7, 2, 16])
    o = self.r.choice(["//", "%"])
    return self.bind(f"{x} {o} {d}", f"{x} {o} {d}", "divmod" + o)

  def op_bitwise(self):
    x = self.pick(lambda v: v.dtype.name in INTS + ("bool",))
    if x is None:
      return None
    isb = self.vals[x].dtype == jnp.bool_
    ok = [n for n, v in self.vals.items() if n.startswith("v") and v.shape == self.vals[x].shape and (v.dtype == jnp.bool_) == isb]
    y = self.r.choice(ok) if ok and self.r.random() < 0.7 else ("True" if isb else str(self.r.randint(0, 100)))
    o = self.r.choice(["&", "|", "^"])
    if self.r.random() < 0.2:
      return self.bind(f"~{x}", f"~{x}", "invert")
    return self.bind(f"{x} {o} {y}", f"{x} {o} {y}", "bitwise")

  def op_shift(self):
    x = self.pick(lambda v: v.dtype.name in INTS)
    if x is None:
      return None
    bits = self.vals[x].dtype.itemsize * 8
    o = self.r.choice(["<<", ">>"])
    s = self.r.randint(0, bits - 1)
    return self.bind(f"{x} {o} {s}", f"{x} {o} {s}", "shift")

  def op_compare(self):
    x = self.pick()
    if x is None:
      return None
    y = self._partner(x, numeric=False)
    o = self.r.choice(["<", "<=", ">", ">=", "==", "!="])
    return self.bind(f"{x} {o} {y}", f"{x} {o} {y}", "compare")

  def op_where(self):
    c = self.pick(lambda v: v.dtype == jnp.bool_)
    if c is None:
      return None
    cs = self.vals[c].shape
    a = self.pick(lambda v: _broadcasts(v.shape, cs)) or _lit(self.r, "float32")
    b = self._partner(c, numeric=False) if self.r.random() < 0.5 else _lit(self.r, self.r.choice(DTYPES[:5]))
    pre = self.r.choice(["ml", "jnp"])
    return self.bind(f"{pre}.where({c}, {a}, {b})", f"jnp.where({c}, {a}, {b})", "where")

  def op_cast(self):
    x = self.pick()
    if x is None:
      return None
    dt = self.r.choice(DTYPES)
    if "dot" in self.tags and self.vals[x].dtype.name in FLOATS and dt not in FLOATS:
      dt = "float32"       # (a dot's floats truncated to integers: 3181.9997 summed in another order is 3182.0)
    form = self.r.choice(["{x}.astype(jnp.{d})", "ml.cast({x}, jnp.{d})", "{x}.to(jnp.{d})"])
    name = "bool_" if dt == "bool" else dt
    return self.bind(form.format(x=x, d=name), f"{x}.astype(jnp.{name})", "cast")

  def op_reduce(self):
    x = self.pick(lambda v: v.ndim == 2)
    if x is None:
      return None
    ax = self.r.randint(0, 1)
    f = self.r.choice(["sum", "max", "min", "mean", "sum", "prod", "any", "all"])
    v = self.vals[x]
    if f in ("any", "all") and v.dtype != jnp.bool_:
      f = "sum"
    if f == "prod" and v.dtype.name not in ("float32",):
      f = "max"
    keep = self.r.random() < 0.3
    kw = f"axis={ax}" + (", keepdims=True" if keep else "")
    form = self.r.choice(["jnp.{f}({x}, {kw})", "{x}.{f}({kw})", "ml.{f}({x}, {kw})"])
    if f in ("mean", "any", "all", "prod") and form.startswith("ml"):
      form = "jnp.{f}({x}, {kw})"
    return self.bind(form.format(f=f, x=x, kw=kw), f"jnp.{f}({x}, {kw})", "reduce:" + f)

  def op_outer(self):
    x = self.pick(lambda v: v.ndim == 1 and v.dtype != jnp.bool_)
    y = self.pick(lambda v: v.ndim == 1 and v.dtype != jnp.bool_)
    if x is None or self.vals[x].size * self.vals[y].size > 16384:
      return None
    o = self.r.choice(["+", "*", "-"])
    return self.bind(f"{x}[:, None] {o} {y}[None, :]", f"{x}[:, None] {o} {y}[None, :]", "outer")

  def op_transpose(self):
    x = self.pick(lambda v: v.ndim == 2)
    if x is None:
      return None
    form = self.r.choice(["{x}.T", "jnp.transpose({x})", "ml.trans({x})"])
    return self.bind(form.format(x=x), f"{x}.T", "transpose")

  def op_reshape(self):
    x = self.pick(lambda v: v.size % 128 == 0)
    if x is None:
      return None
    n = self.vals[x].size
    shapes = [(n,)] + [(a, n // a) for a in (2, 4, 8, 16, 32, 64) if n % a == 0 and (n // a) % 8 == 0]
    shape = self.r.choice(shapes)
    return self.bind(f"{x}.reshape{shape}" if len(shape) > 1 else f"{x}.reshape(-1)", f"{x}.reshape{shape}",
                     "reshape")

  def op_slice(self):
    x = self.pick()
    if x is None:
      return None
    s = self.vals[x].shape
    if len(s) == 1:
      h = s[0] // 2
      sl = self.r.choice([f"[:{h}]", f"[{h}:]", "[::-1]"])
    else:
      sl = self.r.choice([f"[:, :{s[1] // 2}]", f"[{s[0] // 2}:]", f"[:{max(1, s[0] // 2)}, {s[1] // 2}:]", "[0]",
                          f"[:, {s[1] - 1}]", "[:, 0]"])
    return self.bind(f"{x}{sl}", f"{x}{sl}", "slice")

  def op_iota(self):
    x = self.pick(lambda v: v.ndim == 2)
    if x is None:
      return None
    M, N = self.vals[x].shape
    o = self.r.choice([">=", "<", "=="])
    fill = "0" if self.vals[x].dtype != jnp.bool_ else "False"
    k = f"ml.where(ml.arange({M})[:, None] {o} ml.arange({N})[None, :], {x}, {fill})"
    return self.bind(k, k.replace("ml.", "jnp."), "iota")

  def op_cum(self):
    x = self.pick(lambda v: v.dtype.name in ("float32", "int32") or (v.dtype.name in INTS + ("bool",) and self.r.random() < 0.3))
    if x is None:
      return None
    ax = self.r.randint(0, self.vals[x].ndim - 1)
    f = self.r.choice(["jnp.cumsum({x}, axis={a})", "lax.cummax({x}, axis={a})", "lax.cummin({x}, axis={a})",
                       "ml.cumsum({x}, axis={a})", "jnp.cumprod({x}, axis={a})"])
    if "cumprod" in f and self.vals[x].shape[ax] > 64:
      f = "lax.cummax({x}, axis={a})"      # (a long product overflows where the scan's order decides NaN or 0)
    if ("cumprod" in f or "ml.cumsum" in f) and self.vals[x].dtype.name not in ("float32", "int32"):
      f = "jnp.cumsum({x}, axis={a})"     # ml.cumsum of 8-bit ints is int32 (documented, Triton's)
    ref = f.replace("ml.cumsum", "jnp.cumsum")
    return self.bind(f.format(x=x, a=ax), ref.format(x=x, a=ax), "cum")

  def op_dot(self):
    x = self.pick(lambda v: v.ndim == 2 and v.shape[1] in (16, 32, 64, 128, 256) and v.shape[0] <= 128)
    if x is None:
      return None
    K = self.vals[x].shape[1]
    n = self.r.choice([16, 32, 64, 128])
    dt = self.r.choice(["float16", "bfloat16", "float32"])
    b, arr = self.new_input((K, n), dt)
    self.vals[b] = arr
    self.lines.append(f"  w{b} = {b}[...]")
    self.vals["w" + b] = arr
    xs = x if self.vals[x].dtype.name == dt else f"{x}.astype(jnp.{dt})"
    pet = ", preferred_element_type=jnp.float32" if dt != "float32" and self.r.random() < 0.7 else ""
    self.tags.add("dot")
    return self.bind(f"jnp.dot({xs}, w{b}{pet})", f"jnp.dot({xs}, w{b}{pet}, precision=lax.Precision.HIGHEST)",
                     "dot")

  def op_mixed_where(self):
    c = self.pick(lambda v: v.dtype == jnp.bool_)
    if c is None:
      return None
    cs = self.vals[c].shape
    ok = [n for n, v in self.vals.items() if n.startswith("v") and _broadcasts(v.shape, cs)]
    a, b = self.r.choice(ok), self.r.choice(ok)
    fa = f"{a}[:, None]" if self.vals[a].shape != cs and len(cs) == 2 and self.vals[a].shape[0] == cs[0] and cs[0] != cs[1] else a
    fb = f"{b}[:, None]" if self.vals[b].shape != cs and len(cs) == 2 and self.vals[b].shape[0] == cs[0] and cs[0] != cs[1] else b
    return self.bind(f"jnp.where({c}, {fa}, {fb})", f"jnp.where({c}, {fa}, {fb})", "mixed_where")

  def op_focus(self):
    """jax.nn's activations of an integer or bool value, powers of bools and of two dtypes, floor of bools."""
    x = self.pick(lambda v: v.dtype.name not in FLOATS)
    if x is None:
      return None
    y = self.pick(lambda v: v.dtype.name not in FLOATS and v.shape == self.vals[x].shape) or x
    f = self.r.choice(["jax.nn.gelu({x})", "jax.nn.gelu({x}, approximate=False)", "jax.nn.softplus({x})",
                       "jax.nn.elu({x})", "jax.nn.selu({x})", "jax.nn.mish({x})", "jax.nn.log_sigmoid({x})",
                       "jax.nn.hard_tanh({x})", "jax.nn.celu({x})", "jax.nn.leaky_relu({x})", "{x} ** 2",
                       "jnp.square({x})", "jnp.floor({x})", "jnp.trunc({x})", "{x} ** ({y} % 4)"])
    k = f.format(x=x, y=y)
    return self.bind(k, k, "focus")

  def op_arg(self):
    x = self.pick(lambda v: v.ndim == 2 and v.dtype != jnp.bool_)
    if x is None:
      return None
    f = self.r.choice(["argmax", "argmin"])
    ax = self.r.randint(0, 1)
    return self.bind(f"jnp.{f}({x}, axis={ax})", f"jnp.{f}({x}, axis={ax})", "arg")

  def op_join(self):
    x = self.pick()
    if x is None:
      return None
    s = self.vals[x].shape
    ok = [n for n, v in self.vals.items() if n.startswith("v") and v.shape == s]
    y = self.r.choice(ok)
    ax = self.r.randint(0, len(s) - 1)
    return self.bind(f"jnp.concatenate([{x}, {y}], axis={ax})", f"jnp.concatenate([{x}, {y}], axis={ax})", "join")

  def op_move(self):
    x = self.pick()
    if x is None:
      return None
    ax = self.r.randint(0, self.vals[x].ndim - 1)
    f = self.r.choice([f"jnp.flip({{x}}, axis={ax})", f"jnp.roll({{x}}, {self.r.randint(1, 9)}, axis={ax})",
                       f"ml.roll({{x}}, {self.r.randint(1, 9)}, axis={ax})"])
    return self.bind(f.format(x=x), f.replace("ml.", "jnp.").format(x=x), "move")

  def op_clip(self):
    x = self.pick(lambda v: v.dtype != jnp.bool_)
    if x is None:
      return None
    lo, hi = sorted([_lit(self.r, self.vals[x].dtype.name), _lit(self.r, self.vals[x].dtype.name)], key=float)
    pre = self.r.choice(["ml", "jnp"])
    return self.bind(f"{pre}.clip({x}, {lo}, {hi})", f"jnp.clip({x}, {lo}, {hi})", "clip")

  def op_center(self):
    x = self.pick(lambda v: v.ndim == 2 and v.dtype != jnp.bool_)
    if x is None:
      return None
    ax = self.r.randint(0, 1)
    f = self.r.choice(["max", "sum", "mean", "min"])
    o = self.r.choice(["-", "*", "/", "+"])
    e = f"{x} {o} jnp.{f}({x}, axis={ax}, keepdims=True)"
    return self.bind(e, e, "center")

  def op_idiv(self):
    x = self.pick(lambda v: v.dtype.name in INTS)
    y = self.pick(lambda v: v.dtype.name in INTS)
    if x is None or self.vals[x].shape != self.vals[y].shape:
      return None
    o = self.r.choice(["//", "%"])
    d = f"(jnp.abs({y}) % 5 + 1)" if self.vals[y].dtype.name != "uint8" else f"({y} % 5 + 1)"
    return self.bind(f"{x} {o} {d}", f"{x} {o} {d}", "idiv" + o)

  # ------------------------------------------------------------------ kernel
  def _build(self, n_ops):
    first = self.op_load()
    while first is None:
      first = self.op_load()
    if self.focus:
      while self.op_focus() is None:
        self.load_plain()
    for _ in range(n_ops):
      for _ in range(8):
        if self.op() is not None:
          break
    last = f"v{next(self.count) - 1}"
    self.count = itertools.count(int(last[1:]) + 1)
    self.store(last)
    if self.r.random() < 0.3:
      other = self.pick(lambda v: True)
      if other != last and other in self.vals and other.startswith("v"):
        self.store(other)

  def store(self, v):
    val = self.vals[v]
    name = f"o{len(self.outs)}"
    if val.ndim == 1 and val.shape[0] % 128 == 0 and self.r.random() < 0.35:
      n = self.r.randint(val.shape[0] - 127, val.shape[0])
      P = val.shape[0]
      if self.r.random() < 0.5:
        line = f"  {name}.at[ml.ds(0, {P})].store({v}, mask=ml.arange({P}) < {n})"
      else:
        line = f"  ml.store({name}.at[ml.arange({P})], {v}, mask=ml.arange({P}) < {name}.shape[0])"
      self.outs.append((name, line, val[:n]))
      self.tags.add("masked_store")
    else:
      wider = {"bfloat16": "float32", "float16": "float32", "int8": "int32", "uint8": "int32", "bool": "int8"}
      if val.dtype.name in wider and self.r.random() < 0.0:     # (MG102 by design: no implicit conversion)
        val = val.astype(jnp.dtype(wider[val.dtype.name]))
        self.tags.add("widening_store")
      self.outs.append((name, f"  {name}[...] = {v}", val))

  @property
  def source(self):
    ins = ", ".join(n for n, _ in self.ins)
    outs = ", ".join(n for n, _, _ in self.outs)
    specs = ", ".join(f"S({tuple(v.shape)}, jnp.{jnp.dtype(v.dtype).name})" for _, _, v in self.outs)
    src = HEADER + f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: ({specs},))\ndef kernel({ins}, {outs}):\n"
    return src + "\n".join(self.lines + [line for _, line, _ in self.outs]) + "\n"

  @property
  def args(self):
    return [a for _, a in self.ins]

  @property
  def refs(self):
    return [v for _, _, v in self.outs]


def r_choice(r, seq):
  return seq[r.randrange(len(seq))]


def _broadcasts(a, b):
  """Shapes that meet as the generator writes them: equal, a row of b, or a column of b (added as `[:, None]`)."""
  if a == b:
    return True
  return len(a) == 1 and len(b) == 2 and (a[0] == b[1] or a[0] == b[0])


# ---------------------------------------------------------------------- running
def load(gen):
  """The generated kernel (the fuzz generator's loader: a module of its source, tests/fuzz_check.py)."""
  return fuzz_check.load(gen)


def compare(got, want, dot=False):
  """None if `got` is jnp's `want` (floats within the dtype's tolerance, NaN where NaN; the rest exactly)."""
  got = np.asarray(got)
  want = np.asarray(want)
  if got.shape != want.shape or got.dtype != want.dtype:
    return f"shape/dtype {got.shape} {got.dtype} != {want.shape} {want.dtype}"
  if want.dtype.name in FLOATS:
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    if (np.isnan(g) != nan).any():
      i = np.argwhere(np.isnan(g) != nan)[0]
      return f"NaN mismatch at {tuple(i)}: got {g[tuple(i)]}, want {w[tuple(i)]}"
    tol = TOL[want.dtype.name] * (30 if dot else 1)
    fin = np.isfinite(w) & np.isfinite(g)
    if (np.isinf(w) != np.isinf(g)).any() or (np.isinf(w) & (g != w)).any():
      i = np.argwhere((np.isinf(w) != np.isinf(g)) | (np.isinf(w) & (g != w)))[0]
      return f"inf mismatch at {tuple(i)}: got {g[tuple(i)]}, want {w[tuple(i)]}"
    scale = max(1.0, np.abs(w[fin]).max()) if fin.any() else 1.0
    with np.errstate(invalid="ignore"):
      bad = fin & (np.abs(g - w) > tol * (np.abs(w) + (scale if dot else 1e-3 * scale) + 1e-30))
    if bad.any():
      i = tuple(np.argwhere(bad)[0])
      return f"{int(bad.sum())} values differ, first at {i}: got {g[i]!r}, want {w[i]!r}"
    return None
  if (got != want).any():
    i = tuple(np.argwhere(got != want)[0])
    return f"{int((got != want).sum())} values differ, first at {i}: got {got[i]!r}, want {want[i]!r}"
  return None


def describe_exception(e):
  """The last frames of a raw traceback, short enough for one line of a fuzz log."""
  import traceback
  return "".join(traceback.format_exception(e)[-3:])[-600:]


def run(gen, *, build=True, compare=None):
  """(class, detail): "ok", "wrong", "crash", "refused" (a KernelError: detail its code and message), "build".
  `gen` is any generator object with `source`, `args` (the inputs), `refs` (the outputs' references) and `tags`
  (tests/mem_fuzz.py's too); `compare(got, want, dot=...)` replaces this module's `compare`."""
  import mgpu_dsl as mg
  try:
    kernel = load(gen)
    got = kernel(*gen.args, interpret=True)
  except mg.KernelError as e:
    if isinstance(e, mg.InternalError):
      return "crash", f"InternalError: {e}"
    return "refused", f"{getattr(e, 'code', '?')} {str(e).splitlines()[0][:200]}"
  except Exception as e:  # noqa: BLE001
    return "crash", describe_exception(e)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for g, w in zip(got, gen.refs):
    bad = (compare or globals()["compare"])(g, w, dot="dot" in gen.tags)
    if bad:
      return "wrong", bad
  if build:
    try:
      specs = [jax.ShapeDtypeStruct(np.shape(a), a.dtype) for a in gen.args]
      jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)
    except mg.KernelError as e:
      if isinstance(e, mg.InternalError):
        return "build", f"InternalError: {e}"
      return "build", f"{getattr(e, 'code', '?')} {str(e).splitlines()[0][:200]}"
    except Exception as e:  # noqa: BLE001
      return "build", describe_exception(e)
  return "ok", ""


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  build = "--nobuild" not in sys.argv
  for s in range(lo, hi):
    g = Gen(s)
    cls, detail = run(g, build=build)
    print(f"SEED {s} {cls} {sorted(g.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
