"""Probe 61d's differential fuzzer of kernels as JAX functions: small known-good kernels wrapped in random,
composed JAX transformations (design note 206).

`CASES` are kernels with their jnp references (`ref`): elementwise, a row reduction, a small `ml.dot` matmul, two
outputs, `input_output_aliases`, a grid of three axes, a constexpr, `ml.scalar` arguments (Python numbers, 0-d
arrays, program inputs vmap may batch, weak floats through jax.jit) and a dict input. `Gen(seed)` draws a case, a
dtype, how the kernel is reached (`base`), jax_enable_x64 or not, and a stack of `TRANSFORMS` (innermost first):
jit (static_argnames, donation, AOT), vmap (in_axes None / 0 / 1 / -1 / a pytree, out_axes, axis_size, nested),
scan, fori, while (the kernel in its condition too), cond, switch, lax.map, checkpoint, named_call, disable_jit,
shard_map, custom_vjp (a jnp or kernel backward, under jax.grad), custom_jvp, grad with aux, eval_shape. The
program is built twice from one plan: once calling the kernels with `interpret=True`, once their jnp references;
`run(gen)` compares them. Outcomes: "ok", "wrong" (a mismatch), "crash" (any exception that is not a KernelError
with a hint), "refused" (a KernelError with a hint), "invalid" (the reference program fails: a composition JAX
refuses). `cuda(gen)` exports the kernel program for CUDA on the CPU, round-trips it through serialisation where
flatbuffers is installed and checks its output shapes. `python tests/jax_fuzz.py LO:HI [cuda]` runs seeds.
Deterministic.
"""
from __future__ import annotations

import functools
import random
import traceback

import jax
import jax.numpy as jnp
import numpy as np

import mgpu_dsl as mg
from mgpu_dsl import language as ml

import importlib.util

_FLATBUFFERS = importlib.util.find_spec("flatbuffers") is not None   # (jax.export's serialisation needs it)

R, C = 128, 64                     # each case's unbatched input (rows, cols); a program takes 64 rows


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def ew(x, out):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  v = x.at[rows][...]
  out.at[rows][...] = v * 2 + 1


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((x.shape[0],), jnp.float32),
                grid=lambda x: (x.shape[0] // 64,))
def rowsum(x, out):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = ml.sum(x.at[rows][...].astype(jnp.float32), axis=1)


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32),
                grid=lambda a, b: (a.shape[0] // 64,))
def mm(a, b, out):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = ml.dot(a.at[rows][...], b[...])


@mg.mgpu_kernel(out_shape=lambda x, y: (x, x), grid=lambda x, y: (x.shape[0] // 64,))
def two(x, y, s, p):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  a, b = x.at[rows][...], y.at[rows][...]
  s.at[rows][...] = a + b
  p.at[rows][...] = a * b


@mg.mgpu_kernel(out_shape=lambda x, y: x, grid=lambda x, y: (x.shape[0] // 64,), input_output_aliases={0: 0})
def acc(x, y, out):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = x.at[rows][...] + y.at[rows][...]


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 64,))
def scaled(x, out, *, k: ml.constexpr = 3):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = x.at[rows][...] * k


@mg.mgpu_kernel(out_shape=lambda x, alpha, beta: x, grid=lambda x, alpha, beta: (x.shape[0] // 64,))
def axpb(x, alpha: ml.scalar, beta: ml.scalar, out):
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = x.at[rows][...] * alpha + beta


@mg.mgpu_kernel(out_shape=lambda x, p: x, grid=lambda x, p: (x.shape[0] // 64,))
def affine(x, p, out):
  """A dict input: out = x * p['w'] + p['b'] (p's leaves are the kernel's inputs 1 and 2, by sorted key)."""
  i = ml.program_id(0)
  rows = ml.ds(i * 64, 64)
  out.at[rows][...] = x.at[rows][...] * p["w"][...][None, :] + p["b"].at[rows][...]


@mg.mgpu_kernel(out_shape=lambda x, y: (x, y), grid=lambda x, y: (x.shape[0] // 64, 2, 2),
                input_output_aliases={1: 1})
def grid3(x, y, o, yo):
  """Every grid axis used (jax.vmap runs it as a jax.lax.map loop), its second input aliased to its second output."""
  i, j, k = ml.program_id(0), ml.program_id(1), ml.program_id(2)
  r, c = ml.ds(i * 64, 64), ml.ds((j * 2 + k) * 16, 16)
  o.at[r, c][...] = x.at[r, c][...] * 2
  yo.at[r, c][...] = y.at[r, c][...] + x.at[r, c][...]


def _vals(rng, shape, dt):
  if dt == "int32":
    return jnp.asarray(rng.integers(-8, 8, shape), jnp.int32)
  return jnp.asarray(rng.integers(-8, 8, shape) / 2, dt)     # small halves: exact in every dtype


class Case:
  def __init__(self, name, kernel, ref, arity, dtypes, kw=None, shapes=None, float_grad=True):
    self.name, self.kernel, self.ref, self.arity, self.dtypes = name, kernel, ref, arity, dtypes
    self.kw = kw or {}
    self.shapes = shapes or [(R, C)] * arity
    self.float_grad = float_grad


ALL = ("float16", "bfloat16", "float32", "int32")
FL = ("float16", "bfloat16", "float32")
CASES = [
    Case("ew", ew, lambda x: x * 2 + 1, 1, ALL),
    Case("rowsum", rowsum, lambda x: jnp.sum(x.astype(jnp.float32), axis=1), 1, ALL),
    Case("mm", mm, lambda a, b: jnp.dot(a, b, preferred_element_type=jnp.float32), 2, ("float16", "bfloat16"),
         shapes=[(R, C), (C, C)]),
    Case("two", two, lambda x, y: (x + y, x * y), 2, ALL),
    Case("acc", acc, lambda x, y: x + y, 2, ALL),
    Case("scaled", scaled, lambda x, k=3: x * k, 1, ALL, kw={"k": 5}),
    Case("grid3", grid3, lambda x, y: (x * 2, y + x), 2, ALL),
    Case("affine", affine, lambda x, p: x * p["w"][None, :] + p["b"], 1, ALL),
    Case("axpb", axpb, lambda x, alpha, beta: (x * alpha + beta).astype(x.dtype), 1, ALL),
]

TRANSFORMS = ("grad_aux", "named_call", "disable_jit", "aot", "vmap_unbatched", "scan_rev", "lax_map_bs", "shard_map",
              "custom_jvp", "same_input", "while_cond", "custom_vjp_kbwd", "jit", "jit_static", "jit_donate", "vmap",
              "vmap_axis", "vmap_none", "vmap_last", "vmap_tree",
              "vmap_outs", "scan", "fori",
              "while", "cond", "switch", "checkpoint", "custom_vjp", "eval_shape", "export", "tree")


class Gen:
  """One composed program: `case`, `dtype`, `stack` of transformations (innermost first), `args` (a tuple)."""

  def __init__(self, seed):
    rng = random.Random(seed)
    self.seed = seed
    self.case = rng.choice(CASES)
    self.dtype = rng.choice(self.case.dtypes)
    n = rng.choice((1, 2, 2, 3, 3, 4))
    stack = []
    for _ in range(n):
      t = rng.choice(TRANSFORMS)
      if t in ("eval_shape", "export") and t in stack:
        continue
      stack.append(t)
    if "aot" in stack[:-1]:           # (a compiled function takes no tracers: jax.jit(f).lower() is outermost)
      stack.remove("aot")
    for cv in ("custom_vjp", "custom_vjp_kbwd"):
      while cv in stack and (self.dtype == "int32" or {"while", "while_cond"} & set(stack[:len(stack) - 1
                                                                                        - stack[::-1].index(cv)])):
        stack.pop(len(stack) - 1 - stack[::-1].index(cv))   # (jax.grad through a while_loop: JAX's own limit)
    self.scalar_kind = rng.choice(("py", "py_int", "arr", "traced", "weak"))
    self.base = rng.choice(("call", "call", "jitted_kernel", "vmapped_kernel", "checkpointed_kernel", "lax_map"))
    self.axes = [rng.choice((0, 1, -1)) for _ in stack]
    self.sizes = [rng.choice((1, 2, 3)) for _ in stack]
    self.out_axes = [rng.choice((0, 0, 1, -1)) for _ in stack]
    self.stack = stack
    nrng = np.random.default_rng(seed)
    self.args = tuple(_vals(nrng, s, self.dtype) for s in self.case.shapes)
    if self.case.name == "affine":        # the dict's leaves are program inputs too: (x, w, b) -> x, {'w', 'b'}
      self.args += (_vals(nrng, (C,), self.dtype), _vals(nrng, (R, C), self.dtype))
    self.x64 = rng.random() < 0.25
    if self.case.name == "axpb":
      if self.scalar_kind == "py":
        self.scalars = (0.5, 2.0)
      elif self.scalar_kind == "py_int":
        self.scalars = (3, -1)
      elif self.scalar_kind == "arr":
        self.scalars = (jnp.float32(0.5), jnp.float32(2.0))
      elif self.scalar_kind == "weak":     # Python floats passed through jax.jit: weak-typed tracers
        self.scalars = (0.5, 2.0)
      else:                                # 0-d arrays among the program's inputs (so vmap may batch them)
        self.scalars = ()
        self.args = self.args + (jnp.float32(0.5), jnp.float32(2.0))
    else:
      self.scalars = ()

  def __repr__(self):
    return (f"Gen({self.seed}): {self.case.name} {self.dtype} stack={self.stack} axes={self.axes}"
            f" sizes={self.sizes} out_axes={self.out_axes} scalars={self.scalar_kind} base={self.base}")


def _base(gen, kernel_mode):
  """f(*arrays) -> a pytree of outputs: the kernel (interpret=interp) or its reference."""
  case = gen.case
  interp = getattr(gen, "interpret", True)
  if kernel_mode:
    k = case.kernel
    if gen.base == "jitted_kernel":      # jax.jit of the kernel object itself, its keywords static
      k = jax.jit(k, static_argnames=("interpret",) + tuple(case.kw))
    elif gen.base == "checkpointed_kernel":   # (its keywords bound first: jax.checkpoint traces keywords)
      k = jax.checkpoint(functools.partial(k, interpret=interp, **case.kw))
      k0 = k
      k = lambda *xs, interpret, **kw: k0(*xs)   # noqa: E731
    def f(*xs):
      return k(*xs, interpret=interp, **case.kw)
    if gen.base == "vmapped_kernel":     # jax.vmap of the kernel object (a partial) over a batch of 1
      f1 = f
      def f(*xs):
        axes = [0 if hasattr(x, "shape") or isinstance(x, dict) else None for x in xs]
        xs = [jax.tree_util.tree_map(lambda v: v[None], x) if a == 0 else x for x, a in zip(xs, axes)]
        out = jax.vmap(functools.partial(case.kernel, interpret=interp, **case.kw), in_axes=axes)(*xs)
        return jax.tree_util.tree_map(lambda o: o[0], out) if out is not None else f1(*xs)
    elif gen.base == "lax_map":          # jax.lax.map of the kernel over a batch of 2
      def f(*xs):
        arr = [hasattr(x, "shape") or isinstance(x, dict) for x in xs]
        stacked = tuple(jax.tree_util.tree_map(lambda v: jnp.stack([v, v]), x) for x, a in zip(xs, arr) if a)
        def one(t):
          it = iter(t)
          return k(*[next(it) if a else x for x, a in zip(xs, arr)], interpret=interp, **case.kw)
        out = jax.lax.map(one, stacked)
        return jax.tree_util.tree_map(lambda o: o[1], out)
  else:
    def f(*xs):
      return case.ref(*xs, **case.kw)
  if case.name == "affine":
    f0 = f
    def f(x, w, b, *rest):
      return f0(x, {"w": w, "b": b}, *rest)
  if gen.scalar_kind == "weak" and gen.scalars:
    g = jax.jit(f)
    return lambda *xs: g(*xs, *gen.scalars)
  return lambda *xs: f(*xs, *gen.scalars)


def _batch(x, n, axis):
  """x stacked n times (each copy changed) along `axis` of the result."""
  xs = jnp.stack([x + i if x.dtype != jnp.bool_ else x for i in range(n)], 0)
  return jnp.moveaxis(xs, 0, axis)


def _custom_vjp(f, ref, through=None):
  """`f` under jax.custom_vjp, its backward the reference `ref`'s vjp (each cotangent passed `through` a kernel if
  given)."""
  @jax.custom_vjp
  def cf(*xs):
    return f(*xs)

  def fwd(*xs):
    return f(*xs), xs

  def bwd(xs, g):
    cts = jax.vjp(ref, *xs)[1](g)
    return cts if through is None else tuple(through(c) for c in cts)
  cf.defvjp(fwd, bwd)
  return cf


def _sum_tree(t):
  return sum(jnp.sum(jnp.asarray(v, jnp.float32)) for v in jax.tree_util.tree_leaves(t))


def build(gen, kernel_mode):
  """(f, args) of the composed program."""
  f = _base(gen, kernel_mode)
  args = gen.args
  for level, t in enumerate(gen.stack):
    f, args = _wrap(gen, t, f, args, level)
  return f, args


def _wrap(gen, t, f, args, level):
  n, ax, oax = gen.sizes[level], gen.axes[level], gen.out_axes[level]
  if t == "jit":
    return jax.jit(f), args
  if t == "jit_static":
    g = jax.jit(lambda *xs, mode="a": f(*xs) if mode == "a" else None, static_argnames=("mode",))
    return functools.partial(g, mode="a"), args
  if t == "jit_donate":
    g = jax.jit(f, donate_argnums=(0,))
    return (lambda *xs: g(*[jnp.array(x, copy=True) for x in xs])), args
  if t in ("vmap", "vmap_axis"):
    axis = 0 if t == "vmap" else ax
    nd = [a.ndim + 1 for a in args]
    axes = tuple(axis % d if axis >= 0 else axis for d in nd)
    bargs = tuple(_batch(a, n, a_ax) for a, a_ax in zip(args, axes))
    out_nd = [len(s.shape) + 1 for s in jax.tree_util.tree_leaves(jax.eval_shape(f, *args))]
    oa = oax if all(oax < d for d in out_nd) else 0
    return jax.vmap(f, in_axes=axes, out_axes=oa), bargs
  if t == "vmap_none":     # the first input batched, the others shared
    bargs = (_batch(args[0], n, 0),) + tuple(args[1:])
    return jax.vmap(f, in_axes=(0,) + (None,) * (len(args) - 1)), bargs
  if t == "vmap_last":     # the last input batched, the others (an aliased one among them) shared
    bargs = tuple(args[:-1]) + (_batch(args[-1], n, 0),)
    return jax.vmap(f, in_axes=(None,) * (len(args) - 1) + (0,)), bargs
  if t == "vmap_outs":     # out_axes a pytree, one axis per output
    bargs = tuple(_batch(a, n, 0) for a in args)
    shapes = jax.eval_shape(f, *args)
    oa = jax.tree_util.tree_map(lambda s_: (level + oax) % (len(s_.shape) + 1), shapes)
    return jax.vmap(f, out_axes=oa), bargs
  if t == "vmap_tree":     # the inputs passed as a dict, its in_axes a dict
    keys = [f"a{i}" for i in range(len(args))]
    axes = {k: (0 if i == 0 or level % 2 else None) for i, k in enumerate(keys)}
    bargs = {k: (_batch(a, n, 0) if axes[k] == 0 else a) for k, a in zip(keys, args)}
    g = jax.vmap(lambda d: f(*[d[k] for k in keys]), in_axes=(axes,))
    return (lambda *xs: g(dict(zip(keys, xs)))), tuple(bargs[k] for k in keys)
  if t == "tree":          # a pytree of inputs through a jit boundary
    g = jax.jit(lambda p: f(*p["xs"]))
    return (lambda *xs: g({"xs": list(xs)})), args
  if t == "scan":          # the call in a scan body, over n steps, the carry the first input
    def s(*xs):
      def body(c, i):
        out = f(c, *xs[1:])
        first = jax.tree_util.tree_leaves(out)[0]
        c2 = c if first.shape != c.shape else first.astype(c.dtype)      # (the next step reads this one's)
        return c2, out
      _, ys = jax.lax.scan(body, xs[0], jnp.arange(n))
      return ys
    return s, args
  if t == "fori":
    def s(*xs):
      out0 = jax.eval_shape(f, *xs)
      init = jax.tree_util.tree_map(lambda s_: jnp.zeros(s_.shape, s_.dtype), out0)
      def body(i, acc_):
        out = f(*xs)
        return jax.tree_util.tree_map(lambda a, b: a + b, acc_, out)
      return jax.lax.fori_loop(0, n, body, init)
    return s, args
  if t == "while":
    def s(*xs):
      out0 = jax.eval_shape(f, *xs)
      init = (0, jax.tree_util.tree_map(lambda s_: jnp.zeros(s_.shape, s_.dtype), out0))
      def body(c):
        i, acc_ = c
        return i + 1, jax.tree_util.tree_map(lambda a, b: a + b, acc_, f(*xs))
      return jax.lax.while_loop(lambda c: c[0] < n, body, init)[1]
    return s, args
  if t == "cond":
    def s(*xs):
      z = jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(f, *xs))
      return jax.lax.cond(jnp.sum(jnp.asarray(xs[0], jnp.float32)) > -1e9, lambda: f(*xs), lambda: z)
    return s, args
  if t == "switch":
    def s(*xs):
      z = jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(f, *xs))
      return jax.lax.switch(n % 3, [lambda: z, lambda: f(*xs), lambda: jax.tree_util.tree_map(lambda a, b: a + b,
                                                                                              f(*xs), z)])
    return s, args
  if t == "disable_jit":   # the program below run op by op (its scans and loops Python loops)
    def s(*xs):
      with jax.disable_jit():
        return f(*xs)
    return s, args
  if t == "aot":           # jax.jit(f).lower(...).compile(), then called
    comp = jax.jit(f).lower(*args).compile()
    return (lambda *xs: comp(*xs)), args
  if t == "vmap_unbatched":   # no input batched: axis_size gives the batch, the outputs broadcast
    return jax.vmap(f, in_axes=None, axis_size=n), args
  if t == "scan_rev":      # a scan over the batch, reversed and unrolled, the kernel's outputs stacked
    bargs = tuple(_batch(a, n, 0) for a in args)
    def s(*xs):
      return jax.lax.scan(lambda c, t_: (c, f(*t_)), 0, xs, reverse=True, unroll=2)[1]
    return s, bargs
  if t == "lax_map_bs":    # jax.lax.map in batches of 2 (vmap inside a scan)
    bargs = tuple(_batch(a, n + 1, 0) for a in args)
    return (lambda *xs: jax.lax.map(lambda t_: f(*t_), xs, batch_size=2)), bargs
  if t == "shard_map":     # jax.shard_map over a mesh of the one device, every input replicated
    from jax.sharding import Mesh, PartitionSpec as P
    mesh = Mesh(np.array(jax.devices()[:1]), ("d",))
    return jax.shard_map(f, mesh=mesh, in_specs=P(), out_specs=P()), args
  if t == "custom_jvp":    # the call under custom_jvp, its tangent rule the reference's jvp, under jax.jvp
    ref = build_ref_at(gen, level)
    if not all(jnp.issubdtype(a.dtype, jnp.floating) for a in args):
      return f, args
    cj = jax.custom_jvp(f)
    cj.defjvp(lambda xs, ts: (f(*xs), jax.jvp(ref, xs, ts)[1]))
    return (lambda *xs: jax.jvp(cj, xs, tuple(jnp.ones_like(x) for x in xs))), args
  if t == "same_input":    # one array passed for every input of its shape and dtype (an aliased one among them)
    firsts = {}
    idx = [firsts.setdefault((a.shape, a.dtype), i) for i, a in enumerate(args)]
    return (lambda *xs: f(*[xs[j] for j in idx])), args
  if t == "while_cond":    # the kernel called in a while_loop's condition and body
    def s(*xs):
      def cond(c):
        return (c[0] < n) & (_sum_tree(f(*xs)) > -1e30)
      def body(c):
        return c[0] + 1, jax.tree_util.tree_map(lambda a, b: a + b, c[1], f(*xs))
      z = jax.tree_util.tree_map(jnp.zeros_like, jax.eval_shape(f, *xs))
      return jax.lax.while_loop(cond, body, (0, z))[1]
    return s, args
  if t == "custom_vjp_kbwd":   # a backward that calls a kernel (scaled, k=1) on each 2-D cotangent of whole row blocks
    ref = build_ref_at(gen, level)
    if not all(jnp.issubdtype(a.dtype, jnp.floating) for a in args):
      return f, args
    interp = getattr(gen, "interpret", True)
    def through(g):
      if g.ndim == 2 and g.shape[0] % 64 == 0 and jnp.issubdtype(g.dtype, jnp.floating):
        return scaled(g, k=1, interpret=interp)
      return g
    cf = _custom_vjp(f, ref, through)
    return (lambda *xs: (cf(*xs), jax.grad(lambda *ys: _sum_tree(cf(*ys)), argnums=tuple(range(len(xs))))(*xs))), args
  if t == "named_call":
    return jax.named_call(f, name=f"level{level}"), args
  if t == "grad_aux":      # the kernel's outputs as jax.grad's aux (no cotangent reaches them)
    if not all(jnp.issubdtype(a.dtype, jnp.floating) for a in args):
      return f, args
    def s(*xs):
      def loss(y0, *ys):
        out = f(*ys)
        return jnp.sum(jnp.asarray(y0, jnp.float32) ** 2), out
      gr, out = jax.grad(loss, has_aux=True)(xs[0], *xs)
      return gr, out
    return s, args
  if t == "checkpoint":
    return jax.checkpoint(f), args
  if t == "eval_shape":    # the abstract result, then the call: both must agree
    def s(*xs):
      shape = jax.eval_shape(f, *xs)
      out = f(*xs)
      got = jax.tree_util.tree_map(lambda o: (o.shape, o.dtype), out)
      want = jax.tree_util.tree_map(lambda o: (o.shape, o.dtype), shape)
      assert got == want, (got, want)
      return out
    return s, args
  if t == "export":        # interpret mode is a host callback jax.export refuses (MG006): cuda() exports it
    return f, args
  if t == "custom_vjp":    # the call under custom_vjp, its backward jnp (the reference's vjp), under jax.grad
    ref = build_ref_at(gen, level)
    cf = _custom_vjp(f, ref)
    if any(not jnp.issubdtype(a.dtype, jnp.floating) for a in args):
      return cf, args
    def s(*xs):
      out = cf(*xs)
      gr = jax.grad(lambda *ys: _sum_tree(cf(*ys)))(*xs)
      return out, gr
    return s, args
  raise ValueError(t)


def build_ref_at(gen, level):
  """The reference program of `gen`'s first `level` transformations (a jnp function)."""
  sub = Gen.__new__(Gen)
  sub.__dict__.update(gen.__dict__)
  sub.stack = gen.stack[:level]
  return build(sub, False)[0]


def _close(a, b, dt):
  a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
  if a.shape != b.shape:
    return False
  tol = {"float16": 2e-3, "bfloat16": 1e-2}.get(str(dt), 1e-5)
  return np.allclose(a, b, rtol=tol, atol=tol, equal_nan=True)


def compare(got, want, dtype):
  gl, wl = jax.tree_util.tree_leaves(got), jax.tree_util.tree_leaves(want)
  if jax.tree_util.tree_structure(got) != jax.tree_util.tree_structure(want):
    return f"structure {jax.tree_util.tree_structure(got)} != {jax.tree_util.tree_structure(want)}"
  for i, (g, w) in enumerate(zip(gl, wl)):
    if np.shape(g) != np.shape(w) or np.asarray(g).dtype != np.asarray(w).dtype:
      return f"leaf {i}: {np.shape(g)} {np.asarray(g).dtype} != {np.shape(w)} {np.asarray(w).dtype}"
    if not _close(g, w, dtype):
      d = np.max(np.abs(np.asarray(g, np.float64) - np.asarray(w, np.float64)))
      return f"leaf {i}: values differ (max |d| {d})"
  return None


def run(gen):
  """`_run` of `gen`, under jax_enable_x64 where the plan says."""
  if gen.x64:
    with jax.enable_x64(True):
      return _run(gen)
  return _run(gen)


def _run(gen):
  """(outcome, detail) of `gen`: "ok", "wrong", "crash", "refused"; "invalid" where the reference program itself
  fails (the fuzzer's composition is one JAX refuses)."""
  try:
    g, rargs = build(gen, False)
    want = jax.block_until_ready(g(*rargs))
  except Exception as e:      # noqa: BLE001
    return "invalid", f"{type(e).__name__}: {str(e)[:200]}"
  try:
    f, args = build(gen, True)
    got = f(*args)
    jax.block_until_ready(got)
  except mg.KernelError as e:
    if getattr(e, "hint", None):
      return "refused", f"{type(e).__name__}: {str(e)[:300]}"
    return "crash", "no hint: " + traceback.format_exc()[-2000:]
  except Exception:           # noqa: BLE001: every other exception is the class sought
    return "crash", traceback.format_exc()[-3000:]
  why = compare(got, want, gen.dtype)
  return ("wrong", why) if why else ("ok", "")


def cuda(gen):
  """(outcome, detail) of exporting `gen`'s kernel program for CUDA (the stack without export and custom_vjp)."""
  sub = Gen.__new__(Gen)
  sub.__dict__.update(gen.__dict__)
  sub.stack = [t for t in gen.stack if t not in ("export", "custom_vjp", "custom_vjp_kbwd", "custom_jvp", "jit_donate",
                                                    "aot")]
  sub.axes = [a for a, t in zip(gen.axes, gen.stack) if t in sub.stack]
  sub.sizes = [a for a, t in zip(gen.sizes, gen.stack) if t in sub.stack]
  sub.out_axes = [a for a, t in zip(gen.out_axes, gen.stack) if t in sub.stack]
  try:
    sub.interpret = False
    f = _base(sub, True)
    args = sub.args
    for level, t in enumerate(sub.stack):
      f, args = _wrap(sub, t, f, args, level)
    specs = [jax.ShapeDtypeStruct(a.shape, a.dtype) for a in args]
    exp = jax.export.export(jax.jit(f), platforms=["cuda"])(*specs)
    back = jax.export.deserialize(exp.serialize()) if _FLATBUFFERS else exp   # the serialisation round trip
    want = jax.eval_shape(build(sub, False)[0], *args)
    got = jax.tree_util.tree_unflatten(back.out_tree, back.out_avals)
    same = jax.tree_util.tree_map(lambda a, b: (a.shape, a.dtype) == (b.shape, b.dtype), got, want)
    if not all(jax.tree_util.tree_leaves(same)):
      return "wrong", f"exported {got} != {want}"
  except mg.KernelError as e:
    if getattr(e, "hint", None):
      return "refused", str(e)[:300]
    return "crash", traceback.format_exc()[-2000:]
  except Exception:            # noqa: BLE001
    return "crash", traceback.format_exc()[-3000:]
  return "ok", ""


if __name__ == "__main__":
  import sys
  lo, hi = map(int, sys.argv[1].split(":"))
  do_cuda = len(sys.argv) > 2
  counts = {}
  for seed in range(lo, hi):
    gen = Gen(seed)
    out, why = run(gen)
    if do_cuda and out == "ok" and seed % 3 == 0:
      if gen.x64:
        with jax.enable_x64(True):
          out, why = cuda(gen)
      else:
        out, why = cuda(gen)
      out = "cuda_" + out if out != "ok" else out
    counts[out] = counts.get(out, 0) + 1
    if out not in ("ok",):
      print(f"== {gen}: {out}\n{why}", flush=True)
  print(counts)
