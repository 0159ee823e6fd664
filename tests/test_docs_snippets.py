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
from typing import Callable

import jax
import jax.numpy as jnp
import pytest

from doc_runs import (  # the kernels' runs (inputs, interpret mode, a jnp reference)
    _Linear, run_add_one, run_affine, run_ln_apply, run_append, run_apply_act, run_attention_block, run_axpb, run_batch_norm,
    run_bf16_bits, run_bias_grad, run_bsr4_spmv, run_biased_and_summed, run_bits_and_outer, run_buckets, run_clip_range,
    run_column_norms, run_column_sums, run_combine_splits, run_debug_scaled, run_dequantize, run_double_direct,
    run_double_masked, run_double_twice, run_dropout, run_dropout4, run_embedding, run_embedding_backward,
    run_expert_offsets, run_expert_slots, run_ffn_act, run_first_writer_wins, run_fold, run_glu, run_gqa_decode,
    run_hyperbolic, run_jagged_stats, run_l2_normalize, run_lengths_and_starts, run_lookups, run_pallas_matmul,
    run_pool_and_upsample, run_readme_double, run_recurrence, run_rms_gate, run_rope, run_rope_halves,
    run_rope_hstack, run_rope_inplace, run_rope_shard, run_route, run_row_mean, run_row_median, run_row_softmax,
    run_scale, run_scale_shift, run_scaled_sum, run_segment_sums, run_segmented_sum, run_sgd_foreach, run_sobel,
    run_softmax, run_solve_block, run_square, run_square_vjp, run_strict_upper, run_sum_into_bf16,
    run_swap_pairs, run_transpose, run_unpermute, run_unproject, run_weight_grad, run_write_cache)

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
# Complete kernels: specs to check, and (for the small ones) interpret-mode numbers (their runs: tests/doc_runs.py).


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
    Case(L, "bsr4_spmv", [S((4,), i32), S((5,), i32), S((5, 4, 4), f32), S((16,), f32)], run=run_bsr4_spmv),
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
    Case(L, "ln_apply", [S((5, 30), f32), S((5,), f32), S((5,), f32)], run=run_ln_apply),
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

