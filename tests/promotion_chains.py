"""Probe 65a's promotion-chain generator: two- and three-op chains of weakly and strongly typed values meeting
tensors of another dtype, each run in interpret mode against the same statements evaluated eagerly by jnp.

`Chain(seed)` writes one kernel as Python source. A producer (a Python number, a NumPy or JAX scalar, `jnp.where`
of numbers, bool tensors and values, a bool tensor, `ml.full` / `jnp.full` / `jnp.zeros_like` / `jnp.ones`, an
`arange`, a reduction, `.astype`, unary math, jax.nn, `lax.select`, `jnp.select`, `jnp.clip`, `jnp.maximum`, a
comparison, a loop carry started from a Python number (`for` and `lax.fori_loop`), an `ml.scalar` parameter or a
0-d input), perhaps wrapped once or twice, meets a tensor of int8 ... float32 through `+ - * / // % ** & | max min
where`, and the result perhaps meets another tensor, number or producer. Every statement is also executed eagerly
by jnp on the kernel's inputs (the kernel's text with `ml.` read as `jnp.`), and the kernel asserts jnp's dtype
and shape after it (a static check: promotion unlike jnp's is an MG011 at that line). `run(chain)` classifies it
as tests/diff_fuzz.py's `run` does ("ok", "wrong", "crash", "refused", "build").

  python tests/promotion_chains.py LO HI [--build N]   # seeds LO..HI, a CUDA export of every Nth
"""
from __future__ import annotations

import random
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax

import diff_fuzz

FLOATS = ("float32", "float16", "bfloat16")
INTS = ("int8", "uint8", "int16", "uint16", "int32", "uint32")
CONSUMERS = INTS + FLOATS
N = 128



def _weak(a):
  return isinstance(a, (bool, int, float)) or getattr(a, "weak_type", False)


def _bitwise(op, a, b):
  """jnp's `a & b` / `a | b`, computed by NumPy in jnp's promoted dtype where one side is strong: jax 0.10.2's CPU
  backend crashes (a segfault) on `w | t` of a weakly typed int32 tensor `w` and an int8 or int16 `t`."""
  f = {"&": jnp.bitwise_and, "|": jnp.bitwise_or}[op]
  if _weak(a) and _weak(b):
    return f(a, b)
  dt = jnp.result_type(a, b)
  g = {"&": np.bitwise_and, "|": np.bitwise_or}[op]
  if not (jnp.issubdtype(dt, jnp.integer) or dt == jnp.bool_):
    return f(a, b)                                  # jnp's own refusal (floats)
  x, y = np.asarray(a).astype(dt), np.asarray(b).astype(dt)
  return jnp.asarray(g(x, y), dt)


REF_NS = {"jnp": jnp, "jax": jax, "lax": lax, "np": np, "_bitwise": _bitwise}

# Producers: kernel text ({m}: a bool tensor, {f}: float32, {i}: int32, {s}: an ml.scalar, {z}: a 0-d input).
NUMBERS = ["3", "-2", "2.5", "0.5", "True", "7", "-1.5"]
NP_SCALARS = ["np.float32(2)", "jnp.int8(3)", "np.int16(-4)", "jnp.bfloat16(1.5)", "np.uint8(7)",
              "jnp.float16(0.5)", "np.int32(5)", "jnp.uint16(9)", "np.bool_(True)", "jnp.uint32(6)"]
WHERE_ARGS = ["1", "2", "-3", "1.5", "0.5", "True", "False", "{m}", "{f}", "{i}", "np.float32(2)", "jnp.int8(3)",
              "jnp.float16(1.5)", "np.uint8(4)"]
TENSORS = ["{m}", "~{m}", "{f} > 0", "{i} < 3", "{m} & ({i} > 0)", "{f}", "{i}"]
FILLS = ["ml.full(({N},), 2.0)", "jnp.full(({N},), 3)", "jnp.full(({N},), 3, jnp.int8)",
         "ml.full(({N},), 1.5, jnp.bfloat16)", "jnp.zeros_like({f})", "jnp.zeros_like({m})", "jnp.ones(({N},))",
         "jnp.ones(({N},), jnp.int16)", "ml.zeros(({N},))", "jnp.zeros_like(jnp.where({m}, 1, 2))",
         "jnp.ones_like({i})", "jnp.full_like({f}, 2)", "jnp.full(({N},), True)", "ml.full(({N},), 5)",
         "jnp.full(({N},), 2.0, jnp.float16)", "jnp.full_like({m}, 3)", "jnp.ones_like(jnp.where({m}, 1.5, 0.5))"]
ARANGES = ["jnp.arange({N})", "ml.arange(0, {N})", "jnp.arange({N}) * 0.5", "jnp.arange({N}) % 7",
           "jnp.arange({N}, dtype=jnp.int16)", "jnp.arange(0.0, {N})"]
WEAK = ["jnp.where({m}, 1, 2)", "jnp.where({m}, 1.5, 0.5)", "ml.full(({N},), 2.0)", "{m} * 3", "{i} * 0.5",
        "{m} + 1.5", "jnp.where({m}, {m}, 4)", "{m} * True", "jnp.zeros_like(jnp.where({m}, 1, 2))",
        "ml.where({m}, 2, -1)"]
WRAPS = ["jnp.sum({p})", "jnp.max({p})", "jnp.mean({p})", "jnp.argmax({p})", "jnp.min({p})",
         "{p}.astype(jnp.int16)", "{p}.astype(jnp.float16)", "{p}.astype(jnp.uint8)",
         "jnp.exp({p})", "jnp.sqrt(jnp.abs({p}))", "jnp.abs({p})", "-{p}", "jnp.floor({p})", "jnp.sign({p})",
         "ml.abs({p})", "jax.nn.relu({p})", "jax.nn.sigmoid({p})", "jax.nn.silu({p})",
         "jax.nn.softplus({p})", "jnp.clip({p}, 0, 2)", "jnp.clip({p}, -1.5, 1.5)", "jnp.maximum({p}, 0)",
         "jnp.minimum({p}, 1.0)", "ml.maximum({p}, 1)", "{p} > 1", "{p} == 2", "jnp.where({m}, {p}, 0)",
         "jnp.where({m}, 1.0, {p})", "lax.select({m}, {p}, {p})", "jnp.select([{m}], [{p}], 0)",
         "jnp.select([{m}, ~{m}], [{p}, 2], 1.5)", "{p} + 1", "{p} * 0.5", "{p} // 2", "{p} % 3", "{p} ** 2",
         "jnp.square({p})", "jnp.round({p})", "jnp.ceil({p})", "jnp.trunc({p})", "{p}[::-1]",
         "jnp.reshape({p}, (8, 16)).reshape(-1)", "jnp.cumsum({p})", "{p} / 2", "jnp.tanh({p})"]
LOOPS = [
    ["acc{k} = 0", "for j{k} in range(3):", "  acc{k} = acc{k} + j{k}"],
    ["acc{k} = 0.0", "for j{k} in range(3):", "  acc{k} = acc{k} * 0.5 + 1"],
    ["acc{k} = 1", "for j{k} in range(3):", "  acc{k} = acc{k} * 2"],
    ["acc{k} = jnp.where({m}, 0, 1)", "for j{k} in range(3):", "  acc{k} = acc{k} + j{k}"],
    ["acc{k} = jnp.where({m}, 0.0, 1.0)", "for j{k} in range(3):", "  acc{k} = acc{k} * 0.5 + {m}"],
    ["acc{k} = lax.fori_loop(0, 3, lambda t, a: a + t, 0)"],
    ["acc{k} = lax.fori_loop(0, 3, lambda t, a: a * 0.5 + 1, 1.0)"],
    ["acc{k} = lax.fori_loop(0, 3, lambda t, a: a + {m}, jnp.where({m}, 0, 1))"],
    ["acc{k} = lax.fori_loop(0, 3, lambda t, a: a * 0.5, ml.full(({N},), 2.0))"],
]
SCALARS = [3, 2.5, -4, 0.75, True]
ZERO_D = [("3", None), ("1.5", None), ("jnp.int8(3)", "int8"), ("jnp.float16(0.5)", "float16"),
          ("jnp.uint8(5)", "uint8"), ("jnp.bfloat16(2.0)", "bfloat16"), ("jnp.int32(-7)", "int32"),
          ("jnp.float32(0.25)", "float32")]
BINOPS = ["+", "-", "*", "/", "//", "%", "**", "&", "|", "max", "min", "where", "+", "*", "-"]


class Chain:
  def __init__(self, seed, steps=None, weak_probe=False):
    self.seed = seed
    self.weak_probe = weak_probe
    self.r = random.Random(seed)
    self.rng = np.random.default_rng(seed)
    self.inputs = {}      # name -> (kernel parameter text, argument, reference value, load line or None)
    self.lines = []       # kernel statements (indented by the source)
    self.ns = dict(REF_NS)
    self.tags = set()
    self.count = 0
    self.dead = False     # jnp refused a statement: not a kernel
    self._build(steps or self.r.choice([2, 2, 3, 3, 4]))

  # ------------------------------------------------------------------ inputs
  def tensor(self, dtype, nonzero=False, name=None):
    name = name or f"t{len(self.inputs)}"
    if dtype in FLOATS:
      a = self.rng.standard_normal(N).astype(np.float32) * self.r.choice([1.0, 3.0])
      if nonzero:
        a = np.where(np.abs(a) < 0.25, 0.5, a)
    elif dtype == "bool":
      a = self.rng.random(N) < 0.5
    else:
      info = np.iinfo(dtype)
      lo, hi = max(info.min, -20), min(info.max, 40)
      a = self.rng.integers(lo, hi + 1, N)
      if nonzero:
        a = np.where(a == 0, 1, a)
    arr = jnp.asarray(a, jnp.dtype(dtype))
    self.inputs[name] = (name + "_ref", arr, arr, f"{name} = {name}_ref[...]")
    self.ns[name] = arr
    return name

  def named(self, key, dtype):
    """The shared input `key` (the mask m, the float32 f, the int32 i), made at its first use."""
    if key not in self.inputs:
      self.tensor(dtype, name=key)
    return key

  def scalar(self):
    if "s" not in self.inputs:
      v = self.r.choice(SCALARS)
      self.inputs["s"] = ("s: ml.scalar", v, jnp.asarray(v), None)
      self.ns["s"] = jnp.asarray(v)
      self.tags.add("ml.scalar")
    return "s"

  def zero_d(self):
    if "z" not in self.inputs:
      text, dt = self.r.choice(ZERO_D)
      v = eval(text, dict(REF_NS))
      self.inputs["z"] = ("z_ref", v, jnp.asarray(v), "z = z_ref[...]")
      self.ns["z"] = jnp.asarray(v)
      self.tags.add("0-d")
    return "z"

  def fill(self, text):
    subs = {}
    if "{m}" in text:
      subs["m"] = self.named("m", "bool")
    if "{f}" in text:
      subs["f"] = self.named("f", "float32")
    if "{i}" in text:
      subs["i"] = self.named("i", "int32")
    if "{s}" in text:
      subs["s"] = self.scalar()
    if "{z}" in text:
      subs["z"] = self.zero_d()
    return text.replace("{N}", str(N)).format(**subs) if subs or "{" in text else text

  # ------------------------------------------------------------------ statements
  def bind(self, kexpr, tag, pre=(), ref=None):
    """`vK = kexpr` in the kernel after the lines `pre`, run eagerly by jnp; None where jnp refuses it."""
    name = f"v{self.count}"
    self.count += 1
    lines = list(pre) + [f"{name} = {kexpr}"]
    refs = lines[:-1] + [f"{name} = {ref or kexpr}"]
    try:
      exec("\n".join(ln.replace("ml.", "jnp.") for ln in refs), self.ns)
    except Exception:   # noqa: BLE001  jnp's refusal: not a kernel
      return None
    val = self.ns[name]
    if np.ndim(val) > 1 or np.asarray(val).dtype.name not in CONSUMERS + ("bool", "int64", "float64"):
      return None
    if not isinstance(val, jax.Array):       # a Python number or NumPy scalar: no array to ask
      self.lines += lines
      return name
    if val.dtype.name not in CONSUMERS + ("bool",) or val.ndim > 1:
      return None
    self.lines += lines
    self.lines.append(f"assert {name}.dtype == jnp.{val.dtype.name} and {name}.shape == {tuple(val.shape)}, "
                      f"f'jnp: {val.dtype.name}{'~' if getattr(val, 'weak_type', False) else ''}{tuple(val.shape)}, "
                      f"got {{{name}.dtype}}{{{name}.shape}}'")
    self.probe(name, val)
    self.tags.add(tag)
    return name

  def probe(self, name, val):
    """The weak probe: `vK + jnp.zeros((), int8 or bfloat16)` has the narrow dtype where vK is weakly typed in jnp,
    vK's where it is strong; asserted, so a weak type lost (or made up) shows at the statement that did it."""
    if not self.weak_probe or val.dtype.name not in ("int32", "float32") or "s" in self.inputs:
      # (an ml.scalar is one kernel for every value passed: neither weak nor strong, docs/language.md)
      return
    narrow = "int8" if val.dtype.name == "int32" else "bfloat16"
    want = (val + jnp.zeros((), jnp.dtype(narrow))).dtype.name
    self.lines.append(f"assert ({name} + jnp.zeros((), jnp.{narrow})).dtype == jnp.{want}, "
                      f"'weak probe: jnp {'weak' if val.weak_type else 'strong'}'")

  def producer(self):
    r = self.r
    kind = r.choice(["number", "np", "where", "tensor", "fill", "arange", "weak", "loop", "scalar", "zero_d",
                     "weak", "where"])
    pre = []
    if kind == "number":
      text = r.choice(NUMBERS)
    elif kind == "np":
      text = r.choice(NP_SCALARS)
    elif kind == "where":
      fn = r.choice(["jnp.where", "ml.where"])
      text = f"{fn}({{m}}, {r.choice(WHERE_ARGS)}, {r.choice(WHERE_ARGS)})"
    elif kind == "tensor":
      text = r.choice(TENSORS)
    elif kind == "fill":
      text = r.choice(FILLS)
    elif kind == "arange":
      text = r.choice(ARANGES)
    elif kind == "weak":
      text = r.choice(WEAK)
    elif kind == "scalar":
      text = r.choice(["{s}", "{s} * 2", "{s} + 0.5", "jnp.where({m}, {s}, 1)"])
    elif kind == "zero_d":
      text = r.choice(["{z}", "{z} * 2", "jnp.where({m}, {z}, 0)", "{z} + 1.5"])
    else:
      k = self.count
      pre = [self.fill(ln.replace("{k}", str(k))) for ln in r.choice(LOOPS)]
      text = f"acc{k}"
    return self.fill(text), "producer:" + kind, pre

  def value(self):
    """A producer, perhaps wrapped once or twice, each step a statement; None where jnp refuses it."""
    text, tag, pre = self.producer()
    if not pre and re.fullmatch(r"[\w.()\-]+", text) and self.r.random() < 0.5:
      p = text                                 # a number or scalar used in place, not bound to a name
    else:
      p = self.bind(text, tag, pre)
      if p is None:
        return None
    for _ in range(self.r.choice([0, 1, 1, 2])):
      w = self.r.choice(WRAPS)
      q = self.bind(self.fill(w.replace("{p}", "{{p}}")).replace("{p}", p), "wrap:" + w.split("(")[0])
      if q is not None:
        p = q
    return p

  def consume(self, a, b, tag):
    o = self.r.choice(BINOPS)
    if o in ("max", "min"):
      fn = self.r.choice(["jnp.maximum", "ml.maximum"]) if o == "max" else self.r.choice(["jnp.minimum", "ml.minimum"])
      e = f"{fn}({a}, {b})"
    elif o == "where":
      e = f"{self.r.choice(['jnp.where', 'ml.where'])}({self.named('m', 'bool')}, {a}, {b})"
    else:
      e = f"{a} {o} {b}"
    ref = f"_bitwise('{o}', {a}, {b})" if o in "&|" else None
    return self.bind(e, f"{tag}{o}", ref=ref)

  def _build(self, steps):
    p = None
    for _ in range(8):
      p = self.value()
      if p is not None:
        break
    if p is None:
      self.dead = True
      return
    for step in range(1, steps):
      kind = self.r.random()
      if kind < 0.65:
        dt = self.r.choice(CONSUMERS)
        t = self.tensor(dt, nonzero=True)
        a, b = (p, t) if self.r.random() < 0.7 else (t, p)
        if a == t and self.r.random() < 0.8:
          a, b = b, a                         # the producer divides, the tensor (never zero) is the divisor
      elif kind < 0.85:
        a, b = p, self.r.choice(NUMBERS + NP_SCALARS[:4])
      else:
        a, b = p, self.value()
        if b is None:
          continue
      q = self.consume(a, b, f"step{step}")
      if q is not None:
        p = q
    if p not in self.ns or not hasattr(self.ns[p], "shape") or self.ns[p].shape != (N,):
      dt = self.r.choice(CONSUMERS)
      q = self.consume(p, self.tensor(dt, nonzero=True), "last")
      if q is None:
        self.dead = True
        return
      p = q
    self.out = p

  # ------------------------------------------------------------------ the kernel
  def used(self):
    """The inputs the kept statements read (a statement jnp refused may have made one)."""
    words = set(re.findall(r"\w+", "\n".join(self.lines + [self.out])))
    return [v for k, v in self.inputs.items() if k in words]

  @property
  def source(self):
    params = [v[0] for v in self.used()]
    ref = self.ns[self.out]
    src = diff_fuzz.HEADER + (f"\n\n@mg.mgpu_kernel(out_shape=lambda *a: (S({tuple(ref.shape)}, jnp.{ref.dtype.name}),))\n"
                              f"def kernel({', '.join(params + ['o0'])}):\n")
    body = [v[3] for v in self.used() if v[3]] + self.lines + [f"o0[...] = {self.out}"]
    return src + "\n".join("  " + ln for ln in body) + "\n"

  @property
  def args(self):
    return [v[1] for v in self.used()]

  @property
  def refs(self):
    return [self.ns[self.out]]


def export(chain):
  """The chain's kernel built for CUDA (jax.export), its Python-number arguments as weakly typed specs."""
  kernel = diff_fuzz.load(chain)
  specs = []
  for a in chain.args:
    if isinstance(a, (bool, int, float)):
      v = jnp.asarray(a)
      specs.append(jax.ShapeDtypeStruct((), v.dtype, weak_type=True))
    else:
      specs.append(jax.ShapeDtypeStruct(np.shape(a), np.asarray(a).dtype if not hasattr(a, "dtype") else a.dtype))
  return jax.export.export(jax.jit(kernel), platforms=["cuda"])(*specs)


def run(chain, build=False):
  """(class, detail) as diff_fuzz.run's: "ok", "wrong", "crash", "refused", "build"."""
  import mgpu_dsl as mg
  cls, detail = diff_fuzz.run(chain, build=False)
  if cls == "ok" and build:
    try:
      export(chain)
    except mg.KernelError as e:
      return "build", f"{getattr(e, 'code', '?')} {str(e).splitlines()[0][:200]}"
    except Exception as e:  # noqa: BLE001
      return "build", diff_fuzz.describe_exception(e)
  return cls, detail


if __name__ == "__main__":
  lo, hi = int(sys.argv[1]), int(sys.argv[2])
  every = int(sys.argv[sys.argv.index("--build") + 1]) if "--build" in sys.argv else 0
  for s in range(lo, hi):
    c = Chain(s, weak_probe="--probe" in sys.argv)
    if c.dead:
      print(f"SEED {s} dead", flush=True)
      continue
    cls, detail = run(c, build=bool(every) and s % every == 0)
    print(f"SEED {s} {cls} {sorted(c.tags)} :: {detail!s}".replace("\n", " | "), flush=True)
