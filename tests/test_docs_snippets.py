"""The python blocks of the user docs stay true (docs/errors.md has tests/test_errors_doc.py).

Every kernel a block of README.md, docs/language.md, docs/autodiff.md or docs/tooling.md
defines (a `def` decorated with `@mg.mgpu_kernel`, whose body is not a `...` sketch) is read
from the docs at test time, imported from a file (kernels need their source), checked with
`kernel.check(*specs)` for the specs CASES gives it, and, where CASES says how, run in
interpret mode against jnp. A kernel block with no case fails, so a new one gets specs.

The fragments of docs/language.md (a loop body, a few lines) are found by their first line (tests/test_docs_fragments.py),
placed in a minimal kernel (FRAGMENTS) and checked: a builtin or keyword that does not exist,
or a shape that cannot work, fails. A fragment whose first line changed fails too: update its
marker here.

Each block's file keeps the doc's line numbers, so an error names the line of the doc.
"""
from __future__ import annotations

import ast
import dataclasses
import importlib.util
import os
import re
import typing
from typing import Callable

import jax
import jax.numpy as jnp
import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), os.pardir)
DOCS = ("README.md", "docs/language.md", "docs/autodiff.md", "docs/tooling.md")
BLOCK = re.compile(r"^```python\n(.*?)^```\s*$", re.M | re.S)
PRELUDE = "import jax, jax.numpy as jnp; import mgpu_dsl as mg; from mgpu_dsl import language as ml\n"

S = jax.ShapeDtypeStruct
f32, f16, i32 = jnp.float32, jnp.float16, jnp.int32


@dataclasses.dataclass
class Block:
  doc: str          # "docs/language.md"
  line: int         # the doc's line of the block's first code line
  text: str

  @property
  def where(self) -> str:
    return f"{self.doc}:{self.line}"


def doc_blocks() -> list[Block]:
  out = []
  for doc in DOCS:
    text = open(os.path.join(ROOT, doc)).read()
    for m in BLOCK.finditer(text):
      out.append(Block(doc, text.count("\n", 0, m.start(1)) + 1, m.group(1)))
  return out


def is_kernel_decorator(d: ast.expr) -> bool:
  f = d.func if isinstance(d, ast.Call) else d
  return isinstance(f, ast.Attribute) and f.attr == "mgpu_kernel"


def is_sketch(fn: ast.FunctionDef) -> bool:
  """A body that stands for code written elsewhere (`...  # examples/matmul.py's body`)."""
  return any(isinstance(s, ast.Expr) and isinstance(s.value, ast.Constant) and s.value.value is ...
             for s in fn.body)


def kernels_of(block: Block) -> list[str]:
  try:
    tree = ast.parse(block.text)
  except SyntaxError:       # a signature shown as a call, a doctest
    return []
  return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)
          and any(map(is_kernel_decorator, n.decorator_list)) and not is_sketch(n)]


def definitions(block: Block) -> str:
  """The block's imports, constants and definitions at the doc's line numbers; the lines that
  use them (`y = scale(x, block_rows=128)`) blanked."""
  tree = ast.parse(block.text)
  lines = [""] * len(block.text.split("\n"))
  src = block.text.split("\n")
  for node in tree.body:
    keep = isinstance(node, (ast.Import, ast.ImportFrom, ast.FunctionDef)) or (
        isinstance(node, ast.Assign) and all(isinstance(t, ast.Name) for t in node.targets) and (
            isinstance(node.value, ast.Constant) or all(t.id.isupper() for t in node.targets)))  # (SOBEL = np.array(...))
    if keep:
      first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
      for i in range(first - 1, node.end_lineno):
        lines[i] = src[i]
  return PRELUDE + "\n" * (block.line - 2) + "\n".join(lines)


def import_source(source: str, folder, name: str):
  """`source` imported as a module from `folder`/`name`.py."""
  folder.mkdir(parents=True, exist_ok=True)
  path = folder / f"{name}.py"
  path.write_text(source)
  spec = importlib.util.spec_from_file_location(f"docsnip_{folder.name}_{name}", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  return mod


def module_name(doc: str) -> str:
  return os.path.basename(doc).replace(".", "_")        # language_md.py: errors name the doc


# ---------------------------------------------------------------------------------------------
# Complete kernels: specs to check, and (for the small ones) interpret-mode numbers.

rng = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
  return jnp.asarray(rng.standard_normal(shape).astype(dtype))


def close(got, want, tol=1e-5):
  np.testing.assert_allclose(np.asarray(got, np.float64), np.asarray(want, np.float64),
                             rtol=tol, atol=tol)


def run_scale(k):
  x = rand(512, 64)
  close(k(x, block_rows=128, interpret=True), x * 2)
  close(k(x, block_rows=64, factor=3.0, interpret=True), x * 3)


def run_axpb(k):
  x = rand(512)
  close(k(x, 0.5, 2.0, interpret=True), x * 0.5 + 2.0)
  close(k(x, 0.25, 1.0, interpret=True), x * 0.25 + 1.0)
  assert k.cache_info().misses == 1                   # "no recompilation"


class _Linear(typing.NamedTuple):
  w: object
  b: object


def run_affine(k):
  x, w, b = rand(64, 128), rand(128), rand(16, 128)
  close(k(x, _Linear(w, b), interpret=True), x * w + np.tile(b, (4, 1)))


def run_scale_shift(k):
  x, w, b = rand(32, 128), rand(128), rand(128)
  close(k(x, w, None, interpret=True), x * w)
  close(k(x, w, b, interpret=True), x * w + b)
def run_sgd_foreach(k):
  ps, gs = [rand(1000), rand(77), rand(2048)], [rand(1000), rand(77), rand(2048)]
  for o, p, g in zip(k(ps, gs, interpret=True), ps, gs):
    close(o, p - 0.1 * g)


def run_lookups(k):
  x, t = rand(16, 32), np.sort(rand(24))
  y, bins = k(x, t, interpret=True)
  v, knots = jnp.asarray(x), jnp.asarray(t)
  close(y, jnp.where(jnp.tri(16, 32, dtype=bool), jnp.interp(v, knots, jnp.exp(knots)), 0.0) * jnp.hypot(v, 1.0))
  np.testing.assert_array_equal(np.asarray(bins), np.asarray(jnp.digitize(v, knots)))


def run_buckets(k):
  t, q = np.sort(rand(100)), rand(2, 16)
  np.testing.assert_array_equal(np.asarray(k(t, q, interpret=True)), np.searchsorted(t, q, side="right"))
def run_solve_block(k):
  a, b = rand(64, 64), rand(64, 128)
  close(k(a, b, interpret=True), np.linalg.solve(np.asarray(a, np.float64) + np.eye(64), np.asarray(b, np.float64)),
        tol=2e-3)       # (float32 elimination of a random matrix)

def run_unproject(k):
  m, p = rand(3, 3) + 3 * np.eye(3, dtype=np.float32), rand(3, 128)
  close(k(m, p, interpret=True), np.linalg.solve(m, p), tol=1e-4)
def run_strict_upper(k):
  s = rand(64, 64)
  close(k(s, interpret=True), s * np.triu(np.ones((64, 64), np.float32), 1), tol=0)


def run_scaled_sum(k):
  import jax.numpy as jnp
  x, s = rand(512).astype(jnp.bfloat16), jnp.bfloat16(0.75)
  close(k(x, s, interpret=True), (np.asarray(x, np.float32) * 0.75).reshape(4, 128).sum(0))


def run_add_one(k):
  x, y = rand(16, 128), rand(8, 128)
  a, b = k(x, y, interpret=True)
  close(a, np.asarray(x) + 1)
  close(b, np.asarray(y) + 1)


def run_sobel(k):
  x = np.asarray(rand(34, 66))
  w = np.array([[-1., 0., 1.], [-2., 0., 2.], [-1., 0., 1.]], np.float32)
  close(k(x, interpret=True), sum(w[a, b] * x[a:a + 32, b:b + 64] for a in range(3) for b in range(3)))


def run_glu(k):
  import jax
  swiglu = k.fn.__globals__["swiglu"]          # the block's own undecorated helper, passed as the constexpr
  x = rand(16, 128)
  close(k(x, act=swiglu, interpret=True), np.asarray(jax.nn.silu(x[:, :64])) * x[:, 64:])


class _Model:          # the block's Model (its class is not kept: blocks may use names they do not import)
  def __init__(self, scale):
    self.scale = scale

  def act(self, v):
    return v * self.scale


def run_apply_act(k):
  m = _Model(2.0)                             # a bound method as the constexpr
  x = rand(16, 128)
  close(k(x, fn=m.act, interpret=True), x * 2.0)
  m.scale = 3.0                               # changed in place: traced again (probe 54b)
  close(k(x, fn=m.act, interpret=True), x * 3.0)


def run_ffn_act(k):
  import jax
  x = rand(8, 128)
  h = np.asarray(jax.nn.gelu(x, approximate=False))
  close(k(x, interpret=True), h - h.max(axis=-1, keepdims=True))


def run_debug_scaled(k):
  x = rand(192)
  close(k(x, interpret=True), x * 2)


def run_l2_normalize(k):
  x = np.array(rand(8, 128))
  x[2, 5] = np.nan
  out, mean = k(jnp.asarray(x), interpret=True)
  close(mean, np.asarray(jnp.nanmean(x, axis=1)))
  close(out[3:], (x / np.linalg.norm(x, axis=-1, keepdims=True))[3:])


def run_rope_hstack(k):           # (probe 52c: jnp.hsplit and jnp.hstack of register tensors)
  q, c, s = rand(32, 128), rand(32, 128), rand(32, 128)
  qn = np.asarray(q)
  close(k(q, c, s, interpret=True), qn * np.asarray(c) + np.hstack([-qn[:, 64:], qn[:, :64]]) * np.asarray(s))


def run_bf16_bits(k):             # (probe 52c: v.view(jnp.uint32) of a register tensor)
  x = rand(8, 128)
  assert np.array_equal(np.asarray(k(x, interpret=True)), np.asarray(jnp.asarray(x, jnp.bfloat16)).view(np.uint16))
def run_pool_and_upsample(k):    # (probe 53c: lax.reduce_window and jax.image.resize of a register tile)
  x = jnp.asarray(np.random.default_rng(53).standard_normal((16, 64)), f32)
  pooled, up = k(x, interpret=True)
  np.testing.assert_array_equal(np.asarray(pooled), np.asarray(jax.lax.reduce_window(x, -jnp.inf, jax.lax.max, (2, 2),
                                                                                     (2, 2), "VALID")))
  np.testing.assert_allclose(np.asarray(up), np.asarray(jax.image.resize(x, (32, 128), "bilinear")), rtol=1e-6,
                             atol=1e-6)


def run_clip_range(k):           # (probe 52d: jnp.percentile and jnp.quantile at a static q)
  x = np.array(rand(8, 128))
  close(k(jnp.asarray(x), interpret=True), np.stack([np.percentile(x, 1.0, axis=1), np.quantile(x, 0.99, axis=1)]))


def run_weight_grad(k):          # (probe 48c: partial sums per lock group)
  x, dy = rand(37, 128), rand(37, 128)
  dw, lock = k(x, dy, interpret=True)
  close(np.asarray(dw).sum(0), (np.asarray(x) * np.asarray(dy)).sum(0), 1e-4)
  assert np.array_equal(np.asarray(lock), [0] * 8 + [1] * 8)


def run_column_norms(k):         # (probe 48c: the last program finishes the reduction)
  x = rand(256, 128)
  acc, out, count = k(x, interpret=True)
  close(out, np.sqrt((np.asarray(x) ** 2).sum(0)), 1e-4)
  assert int(count) == 4


def run_column_sums(k):
  x = rand(100, 200)
  close(k(x, interpret=True), np.asarray(x).sum(0), 1e-4)
def run_rms_gate(k):
  import jax
  import jax.numpy as jnp
  x, w = jnp.asarray(rand(8, 128), jnp.bfloat16), rand(128)
  var = jnp.mean(x, axis=-1, keepdims=True, dtype=jnp.float32)
  y = x * jax.lax.rsqrt(var + 1e-6) * w
  want = jnp.where(jnp.logical_and(y > 0, jnp.isfinite(y)), y, jnp.fmin(y, 0.0)) * jnp.arange(128.0)
  close(k(x, w, interpret=True), np.asarray(want))


def run_bits_and_outer(k):
  import jax
  import jax.numpy as jnp
  x, w = rand(8, 16), rand(16, 32)
  outer, q = k(x, w, interpret=True)
  m, e = jnp.frexp(x)
  close(outer, np.asarray(jnp.einsum("ij,jk->ijk", x, w)))
  np.testing.assert_array_equal(np.asarray(q), np.asarray(
      jnp.ldexp(jax.lax.reduce_precision(m, exponent_bits=5, mantissa_bits=2), e)))


def run_attention_block(k):
  import jax
  import jax.numpy as jnp
  q, kk, v = (jnp.asarray(rand(*s), jnp.bfloat16) for s in ((64, 64), (128, 64), (128, 64)))
  qf, kf, vf = (np.asarray(t, np.float32) for t in (q, kk, v))
  want = np.asarray(jax.nn.softmax(qf @ kf.T * 0.125, axis=-1) @ vf)
  close(np.asarray(k(q, kk, v, interpret=True), np.float32), want, 3e-2)


def run_hyperbolic(k):
  import jax
  import jax.numpy as jnp
  x = jnp.asarray(rand(8, 128), jnp.bfloat16)
  want = jnp.arcsinh(x) * jnp.cosh(x * 0.5) + jax.nn.glu(jnp.concatenate([x, x], axis=-1))
  close(np.asarray(k(x, interpret=True), np.float32), np.asarray(want, np.float32), 3e-2)
def run_pallas_matmul(k):
  x, y = rand(128, 128), rand(128, 128)
  close(k(x, y, interpret=True), np.asarray(x) @ np.asarray(y), 2e-1)


def run_row_mean(k):
  x = rand(4, 300)
  close(k(x, interpret=True), np.asarray(x).mean(1), 1e-4)


def run_row_median(k):
  x = rand(4, 48)
  close(k(x, interpret=True), np.median(np.asarray(x), axis=1), 1e-6)


def run_batch_norm(k):
  x = np.asarray(rand(2, 32, 2))
  m = x.mean(axis=(0, 2), keepdims=True)
  close(k(x, interpret=True), (x - m) / np.sqrt(((x - m) ** 2).mean(axis=(0, 2), keepdims=True) + 1e-5), 1e-4)


def run_append(k):
  cache, new = rand(64, 128, dtype=np.float16), rand(16, 128, dtype=np.float16)
  close(k(cache, new, pos=16, interpret=True), cache.at[16:32].set(new), 0)


def run_double_masked(k):
  x = rand(1000, 64)                                  # "any number of rows"
  close(k(x, interpret=True), x * 2, 0)


def run_segment_sums(k):
  off = jnp.array([0, 100, 100, 700, 1024], i32)
  x = rand(1024)
  want = [x[int(off[g]):int(off[g + 1])].sum() for g in range(4)]
  close(k(off, x, interpret=True), want, 1e-4)


def run_embedding(k):
  table, ids = rand(100, 64), jnp.asarray(rng.integers(0, 100, 128).astype(np.int32))
  close(k(table, ids, interpret=True), table[ids], 0)


def run_softmax(k):
  x = rand(64, 256)
  close(k(x, interpret=True), jax.nn.softmax(x, axis=1))


def run_row_softmax(k):
  x = rand(6, 100) - 3.0          # negative rows: other=0.0 would be MG953 at the max
  close(k(x, interpret=True), jax.nn.softmax(x, axis=1))


def run_transpose(k):
  x = rand(128, 256)
  close(k(x, interpret=True), x.T, 0)


def run_double_twice(k):
  x = rand(256, 512)
  close(k(x, interpret=True), x * 2, 0)


def run_readme_double(k):
  x = rand(1024, 64)
  close(k(x, interpret=True), x * 2, 0)


def run_double_direct(k):
  x = rand(64, 1024)
  close(k(x, interpret=True), x * 2, 0)


def run_fold(k):
  x = rand(1024)
  sums, count = k(x, interpret=True)
  close(sums, x.reshape(2, 4, 128).sum(0))
  assert int(count) == 8


def run_dequantize(k):
  q = jnp.asarray(rng.integers(-100, 100, (100, 40)).astype(np.int8))
  close(k(q, interpret=True), np.asarray(q, np.float32) * 0.5, 0)


def run_bias_grad(k):
  p = rand(8, 130)
  close(k(p, interpret=True), p.sum(0))


def run_embedding_backward(k):
  g, ids = rand(128, 64), jnp.asarray(rng.integers(-100, 100, 128).astype(np.int32))
  close(k(g, ids, n=100, interpret=True), jnp.zeros((100, 64), f32).at[ids].add(g))


def run_write_cache(k):
  cache, new = rand(512, 64), rand(128, 64)
  slots = jnp.asarray(rng.permutation(512)[:128].astype(np.int32))
  close(k(cache, new, slots, interpret=True), cache.at[slots].set(new))


def run_unpermute(k):
  y = rand(256, 64)
  tok = np.asarray(rng.permutation(256).astype(np.int32))
  tok[::5] = -1                                        # padding slots: masked off
  keep = tok >= 0
  close(k(y, jnp.asarray(tok), interpret=True), jnp.zeros_like(y).at[tok[keep]].set(y[keep]))


def run_dropout(k):
  x = rand(3000)                                      # not a multiple of 1024: masked
  y = np.asarray(k(x, 7, interpret=True))
  kept = y != 0
  assert 0.4 < kept.mean() < 0.6
  close(y[kept], 2 * np.asarray(x)[kept])


def run_dropout4(k):
  from mgpu_dsl.lowering.random import philox_numpy
  x = np.asarray(rand(1100))                          # three programs, the last one masked
  y = np.asarray(k(jnp.asarray(x), 77, 1000, interpret=True))
  want = np.zeros(1536, np.float32)
  for b in range(3):
    words = philox_numpy(77, 0, 1000 + b * 128 + np.arange(128))
    for j in range(4):
      o = b * 512 + j * 128 + np.arange(128)
      i = words[j].view(np.int32)
      u = np.where(i < 0, ~i, i).astype(np.float32) * np.float32(4.6566127342e-10)
      want[o] = np.where((u > np.float32(0.1)) & (o < 1100), np.pad(x, (0, 436))[o] / np.float32(0.9), 0)
  close(y, want[:1100])


def run_swap_pairs(k):
  x = rand(256, 64)
  close(k(x, interpret=True), jnp.concatenate([x[128:], x[:128]]), 0)


def run_recurrence(k):
  a, b = np.asarray(jax.nn.sigmoid(rand(8, 64))), np.asarray(rand(8, 64))
  h, want = np.zeros(8, np.float32), []
  for t in range(64):
    h = a[:, t] * h + b[:, t]
    want.append(h)
  close(k(jnp.asarray(a), jnp.asarray(b), interpret=True), np.stack(want, 1))


def run_segmented_sum(k):
  x, reset = np.asarray(rand(8, 128)), (np.arange(8 * 128).reshape(8, 128) % 37 == 5).astype(np.int32)
  want = np.zeros_like(x)
  for r in range(8):
    acc = 0.0
    for c in range(128):
      acc = x[r, c] if reset[r, c] else acc + x[r, c]
      want[r, c] = acc
  close(k(jnp.asarray(x), jnp.asarray(reset), interpret=True), want)


def run_lengths_and_starts(k):
  off = np.array([3, 3, 10, 11, 20, 20, 25, 40, 41], np.int32)
  lengths, starts = k(jnp.asarray(off), interpret=True)
  np.testing.assert_array_equal(np.asarray(lengths), off[1:] - off[:-1])
  np.testing.assert_array_equal(np.asarray(starts), np.concatenate([[0], off]))


def run_jagged_stats(k):
  lens = np.array([2, 0, 5, 1], np.int32)
  e = np.array([3, 1, 3, 7, 1, 1, 0, 3] * 16, np.int32)
  seg, experts, counts = k(jnp.asarray(lens), jnp.asarray(e), T=16, interpret=True)
  np.testing.assert_array_equal(np.asarray(seg), np.asarray(jnp.repeat(jnp.arange(4), lens, total_repeat_length=16)))
  u, c = jnp.unique(e, size=8, fill_value=-1, return_counts=True)
  np.testing.assert_array_equal(np.asarray(experts), np.asarray(u))
  np.testing.assert_array_equal(np.asarray(counts), np.asarray(c))


def run_gqa_decode(k):
  rng = np.random.default_rng(6)
  q, kk, v = (rng.standard_normal(s).astype(np.float32) for s in ((2, 8, 40), (2, 128, 40), (2, 128, 40)))
  q, kk, v = (jnp.asarray(a, jnp.bfloat16) for a in (q, kk, v))
  qf, kf, vf = (np.asarray(a, np.float32) for a in (q, kk, v))
  s = np.einsum("hgd,hnd->hgn", qf, kf) * 0.125
  p = np.exp(s - s.max(-1, keepdims=True))
  want = np.einsum("hgn,hnd->hgd", p / p.sum(-1, keepdims=True), vf)
  np.testing.assert_allclose(np.asarray(k(q, kk, v, interpret=True), np.float32), want, rtol=3e-2, atol=3e-2)


def run_biased_and_summed(k):
  x, b = np.random.default_rng(4).standard_normal((5, 45)), np.random.default_rng(5).standard_normal(45)
  x, b = x.astype(np.float32), b.astype(np.float32)
  out, sums = k(jnp.asarray(x), jnp.asarray(b), interpret=True)
  close(out, x + b)
  close(sums, (x + b).sum(0))


def run_expert_offsets(k):
  ids = np.random.default_rng(3).integers(-64, 64, 512).astype(np.int32) % 64     # (repeated experts)
  counts = np.stack([np.bincount(ids[i * 256:(i + 1) * 256], minlength=64) for i in range(2)]).astype(np.int32)
  np.testing.assert_array_equal(np.asarray(k(jnp.asarray(ids), interpret=True)), np.cumsum(counts, 1) - counts)


def run_expert_slots(k):
  e = np.random.default_rng(4).integers(-1, 16, 300).astype(np.int32)
  counts, pos = k(jnp.asarray(e), interpret=True)
  c, want = np.zeros(16, np.int32), np.full(300, -1, np.int32)
  for i, v in enumerate(e):              # (interpret mode's order: the programs and their elements in turn)
    if v >= 0:
      want[i], c[v] = c[v], c[v] + 1
  np.testing.assert_array_equal(np.asarray(counts), c)
  np.testing.assert_array_equal(np.asarray(pos), want)


def run_sum_into_bf16(k):
  x = np.ones(512, jnp.bfloat16)          # (partial sums multiples of 128: exact in bfloat16)
  assert float(k(jnp.asarray(x), interpret=True)) == 512.0


def run_first_writer_wins(k):
  x = jnp.asarray(np.random.default_rng(5).random(384).astype(np.float32) + 1)
  np.testing.assert_array_equal(np.asarray(k(x, interpret=True)), np.asarray(x)[:128])


def run_square(k):
  x = rand(2048)
  close(k(x, interpret=True), x * x)


def run_square_vjp(k):
  x, g = rand(2048), rand(2048)
  close(k(x, g, interpret=True), 2 * x * g)


def run_rope(k):
  q, cos, sin = rand(9, 6, 64), rand(9, 32), rand(9, 32)
  x1, x2 = q[..., :32], q[..., 32:]
  c, s = cos[:, None], sin[:, None]
  close(k(q, cos, sin, interpret=True), jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], -1))


def run_rope_inplace(k):      # probe 53e: pointer-block stores through the aliased inputs q and k
  q, kk, cs = np.asarray(rand(3, 256)), np.asarray(rand(3, 128)), np.asarray(rand(8, 128))
  pos = np.array([5, 0, 7], np.int32)
  def rot(x):
    x = x.reshape(3, -1, 128)
    c, s = cs[pos][:, None, :64], cs[pos][:, None, 64:]
    return np.concatenate([x[..., :64] * c - x[..., 64:] * s, x[..., 64:] * c + x[..., :64] * s], -1).reshape(3, -1)
  got_q, got_k = k(q, kk, pos, cs, interpret=True)
  close(got_q, rot(q))
  close(got_k, rot(kk))


def run_rope_shard(k):        # probe 53e: the halves of a (7, 128) tile of heads, read padded to 8 rows
  q, c, s = np.asarray(rand(3, 7, 128)), np.asarray(rand(8, 64)), np.asarray(rand(8, 64))
  pos = np.array([2, 7, 0], np.int32)
  cc, ss = c[pos][:, None], s[pos][:, None]
  x1, x2 = q[..., :64], q[..., 64:]
  close(k(q, pos, c, s, interpret=True), np.concatenate([x1 * cc - x2 * ss, x2 * cc + x1 * ss], -1))


def run_rope_halves(k):       # probe 49a: halves of a (2, 96) tile read padded to (4, 96)
  x, cos, sin = rand(2, 96), rand(2, 48), rand(2, 48)
  x1, x2 = x[:, :48], x[:, 48:]
  close(k(x, cos, sin, interpret=True), jnp.concatenate([x1 * cos - x2 * sin, x2 * cos + x1 * sin], -1))


def run_combine_splits(k):    # probe 50a: the (8, 40) sum of a (4, 8, 40) tile divided by a column
  m, l, acc = rand(1, 4, 8), jnp.abs(rand(1, 4, 8)) + 1, rand(1, 4, 8, 40)
  w = jnp.exp(m[0] - m[0].max(0))
  close(k(m, l, acc, interpret=True), (w[..., None] * acc[0]).sum(0) / (w * l[0]).sum(0)[:, None])


def run_route(k):    # probe 51c: the top 2 of each token's (96,) logits kept (`vals[:, 1:2]` of a (5, 96) read)
  x = rand(5, 96)
  s = -jnp.sort(-x, axis=1)
  p = jnp.where(x >= s[:, 1:2], jnp.exp(x - s[:, :1]), 0.0)
  close(k(x, interpret=True), p / p.sum(1, keepdims=True))


@dataclasses.dataclass
class Case:
  doc: str
  name: str
  specs: list
  constexprs: dict = dataclasses.field(default_factory=dict)
  run: Callable | None = None
  marker: str | None = None     # text of the block, where a doc defines two kernels of one name

  @property
  def id(self) -> str:
    return f"{os.path.basename(self.doc)}:{self.name}" + (f"[{self.marker}]" if self.marker else "")


L = "docs/language.md"
CASES = [
    Case("README.md", "double", [S((1024, 64), f32)], run=run_readme_double),
    Case(L, "scale", [S((512, 64), f32)], dict(block_rows=128), run_scale),
    Case(L, "axpb", [S((512,), f32), S((), f32), S((), f32)], run=run_axpb),
    Case(L, "append", [S((64, 128), f16), S((16, 128), f16)], dict(pos=16), run_append),
    Case(L, "affine", [S((64, 128), f32), _Linear(S((128,), f32), S((16, 128), f32))], run=run_affine),
    Case(L, "scale_shift", [S((32, 128), f32), S((128,), f32), None], run=run_scale_shift),
    Case(L, "sgd_foreach", [[S((1000,), f32), S((77,), f32), S((2048,), f32)]] * 2, run=run_sgd_foreach),
    Case(L, "scaled_sum", [S((512,), jnp.bfloat16), S((), jnp.bfloat16)], run=run_scaled_sum),
    Case(L, "add_one", [S((16, 128), f32), S((8, 128), f32)], run=run_add_one),
    Case(L, "sobel", [S((34, 66), f32)], run=run_sobel),
    Case(L, "lookups", [S((16, 32), f32), S((24,), f32)], run=run_lookups),
    Case(L, "apply_act", [S((16, 128), f32)], dict(fn=lambda v: v * 2.0), run=run_apply_act),
    Case(L, "buckets", [S((100,), f32), S((2, 16), f32)], run=run_buckets),
    Case(L, "solve_block", [S((64, 64), f32), S((64, 128), f32)], run=run_solve_block),
    Case(L, "unproject", [S((3, 3), f32), S((3, 128), f32)], run=run_unproject),
    Case(L, "strict_upper", [S((64, 64), f32)], run=run_strict_upper),
    Case(L, "glu", [S((16, 128), f32)], dict(act=lambda a, b: a * b), run=run_glu),
    Case(L, "double", [S((1000, 64), f32)], run=run_double_masked, marker="ml.cdiv"),
    Case(L, "segment_sums", [S((5,), i32), S((1024,), f32)], run=run_segment_sums),
    Case(L, "embedding", [S((100, 64), f32), S((128,), i32)], run=run_embedding),
    Case(L, "rope", [S((9, 6, 64), f32), S((9, 32), f32), S((9, 32), f32)], run=run_rope),
    Case(L, "rope_halves", [S((2, 96), f32), S((2, 48), f32), S((2, 48), f32)], run=run_rope_halves),
    Case(L, "rope_inplace", [S((3, 256), f32), S((3, 128), f32), S((3,), i32), S((8, 128), f32)],
         run=run_rope_inplace),
    Case(L, "rope_shard", [S((3, 7, 128), f32), S((3,), i32), S((8, 64), f32), S((8, 64), f32)], run=run_rope_shard),
    Case(L, "combine_splits", [S((1, 4, 8), f32), S((1, 4, 8), f32), S((1, 4, 8, 40), f32)], run=run_combine_splits),
    Case(L, "route", [S((5, 96), f32)], run=run_route),
    Case(L, "softmax", [S((64, 256), f32)], run=run_softmax),
    Case(L, "ffn_act", [S((8, 128), f32)], run=run_ffn_act),
    Case(L, "l2_normalize", [S((8, 128), f32)], run=run_l2_normalize),
    Case(L, "clip_range", [S((8, 128), f32)], run=run_clip_range),
    Case(L, "pool_and_upsample", [S((16, 64), f32)], run=run_pool_and_upsample),
    Case(L, "column_sums", [S((100, 200), f32)], run=run_column_sums),
    Case(L, "weight_grad", [S((37, 128), f32), S((37, 128), f32)], run=run_weight_grad),
    Case(L, "column_norms", [S((256, 128), f32)], run=run_column_norms),
    Case(L, "rms_gate", [S((8, 128), jnp.bfloat16), S((128,), f32)], run=run_rms_gate),
    Case(L, "bits_and_outer", [S((8, 16), f32), S((16, 32), f32)], run=run_bits_and_outer),
    Case(L, "attention_block", [S((64, 64), jnp.bfloat16), S((128, 64), jnp.bfloat16), S((128, 64), jnp.bfloat16)],
         run=run_attention_block),
    Case(L, "hyperbolic", [S((8, 128), jnp.bfloat16)], run=run_hyperbolic),
    Case(L, "row_softmax", [S((6, 100), f32)], run=run_row_softmax),
    Case(L, "transpose", [S((128, 256), f32)], run=run_transpose),
    Case(L, "matmul", [S((512, 256), f16), S((256, 512), f16)]),
    Case(L, "pallas_matmul", [S((128, 128), f32), S((128, 128), f32)], run=run_pallas_matmul),
    Case(L, "row_mean", [S((4, 300), f32)], run=run_row_mean),
    Case(L, "double", [S((256, 512), f32)], run=run_double_twice, marker="mg.num_sms()"),
    Case(L, "double_direct", [S((64, 1024), f32)], run=run_double_direct),
    Case(L, "fold", [S((1024,), f32)], run=run_fold),
    Case(L, "bias_grad", [S((8, 130), f32)], run=run_bias_grad),
    Case(L, "dequantize", [S((100, 40), jnp.int8)], run=run_dequantize),
    Case(L, "embedding_backward", [S((128, 64), f32), S((128,), i32)], dict(n=100), run_embedding_backward),
    Case(L, "write_cache", [S((512, 64), f32), S((128, 64), f32), S((128,), i32)], run=run_write_cache),
    Case(L, "unpermute", [S((256, 64), f32), S((256,), i32)], run=run_unpermute),
    Case(L, "dropout", [S((3000,), f32), S((), i32)], run=run_dropout),
    Case(L, "dropout4", [S((1100,), f32), S((), i32), S((), i32)], run=run_dropout4),
    Case(L, "swap_pairs", [S((256, 64), f32)], run=run_swap_pairs),
    Case(L, "recurrence", [S((8, 64), f32), S((8, 64), f32)], run=run_recurrence),
    Case(L, "segmented_sum", [S((8, 128), f32), S((8, 128), i32)], run=run_segmented_sum),
    Case(L, "lengths_and_starts", [S((9,), i32)], run=run_lengths_and_starts),
    Case(L, "jagged_stats", [S((4,), i32), S((128,), i32)], {"T": 16}, run=run_jagged_stats),
    Case(L, "biased_and_summed", [S((5, 45), f32), S((45,), f32)], run=run_biased_and_summed),
    Case(L, "gqa_decode", [S((2, 8, 40), jnp.bfloat16), S((2, 128, 40), jnp.bfloat16), S((2, 128, 40), jnp.bfloat16)],
         run=run_gqa_decode),
    Case(L, "expert_offsets", [S((512,), i32)], run=run_expert_offsets),
    Case(L, "scaled", [S((192,), f32)], run=run_debug_scaled),
    Case(L, "expert_slots", [S((300,), i32)], run=run_expert_slots),
    Case(L, "first_writer_wins", [S((384,), f32)], run=run_first_writer_wins),
    Case(L, "sum_into_bf16", [S((512,), jnp.bfloat16)], run=run_sum_into_bf16),
    Case(L, "rope_hstack", [S((32, 128), f32)] * 3, run=run_rope_hstack),
    Case(L, "bf16_bits", [S((8, 128), f32)], run=run_bf16_bits),
    Case(L, "row_median", [S((4, 48), f32)], run=run_row_median),
    Case(L, "batch_norm", [S((2, 32, 2), f32)], run=run_batch_norm),
    Case("docs/autodiff.md", "square", [S((4096,), f32)], run=run_square),
    Case("docs/autodiff.md", "square_vjp", [S((4096,), f32), S((4096,), f32)], run=run_square_vjp),
]


def blocks_of(case: Case) -> list[Block]:
  return [b for b in doc_blocks() if b.doc == case.doc and case.name in kernels_of(b)
          and (case.marker is None or case.marker in b.text)]


def test_every_kernel_of_the_docs_has_a_case():
  cases = {(c.doc, c.name, b.line) for c in CASES for b in blocks_of(c)}
  missing = [f"{b.where}: {name}" for b in doc_blocks() for name in kernels_of(b)
             if (b.doc, name, b.line) not in cases]
  assert not missing, f"kernels in the docs with no Case in {__file__}: {missing}"


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.id)
def test_doc_kernel_checks_and_computes(case, tmp_path):
  found = blocks_of(case)
  assert len(found) == 1, f"{case.id}: {len(found)} blocks of {case.doc} define it (update CASES)"
  block = found[0]
  mod = import_source(definitions(block), tmp_path / f"l{block.line}", module_name(block.doc))
  kernel = getattr(mod, case.name)
  kernel.check(*case.specs, **case.constexprs)
  if case.run is not None:
    case.run(kernel)

