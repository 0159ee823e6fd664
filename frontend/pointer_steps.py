"""Triton's pointer increment of a pointer block held in a variable (probe 62d): `a_ptrs = A.at[offs_m[:, None],
offs_k[None, :]]` then `a_ptrs += BLOCK_K` in the k loop (DeepSeek-V3's fp8 GEMM, vLLM's fused MoE and most Triton
GEMMs: `b_ptrs += BLOCK_K * stride_bk`, `a_s_ptrs += 1`). It was Python's own error ("unsupported operand type(s)
for +: 'IndexedRef' and 'int'", MG003 with the hint "static values compute as in Python").

A ref is not a pointer, but a pointer block is its indices, so the step moves them: a static integer step `c` is
Triton's flat offset, split over the ref's row-major strides (`c = q0 * s0 + q1 * s1 + ...`, each part the largest
whole number of its axis's stride, `-c` the negation of `c`'s split) and `q_d` added to the index of axis d.
That is Triton's address wherever the moved index stays inside its axis, which is where Triton's kernels read (a
masked lane is read by neither); an unmasked index that leaves its axis is the gather's error, not the next row
Triton would read. `ptrs + c` and `c + ptrs` make a new block, `ptrs - c` and `ptrs -= c` step back; a loop carries
the block as its index values (frontend/carried.py), as it carries a block pointer's offsets. A run-time step (an
integer scalar, or a tensor of steps) is split the same way at run time (`|c| // s` and `|c| % s` per stride, with
c's sign): `c_ptrs += BM * stride_cm * (pid % 2)`. A product, a block indexed by slices (`x.at[ids, :]`) and a
block subtracted from a number are KernelTypeErrors at the step, with hints."""
from __future__ import annotations

import ast
import math

from . import errors as E
from .ops import elementwise as ew
from .ops.base import is_value
from .ops.gather import IndexedRef
from .types import resolve

__all__ = ["binop"]


def _split(c: int, shape: tuple) -> list:
  """Static `c` split over the row-major strides of `shape`: one whole number per axis."""
  strides = [math.prod(shape[d + 1:]) for d in range(len(shape))]
  sign, rest, parts = (-1 if c < 0 else 1), abs(c), []
  for s in strides:
    parts.append(sign * (rest // s))
    rest %= s
  return parts


def _run_time_split(cx, c, shape: tuple) -> list:
  """A run-time integer step (a scalar or a tensor) split as `_split` splits a static one: the parts of |c|, each
  given c's sign (ops on scalars, or elementwise on a tensor of steps)."""
  if len(shape) == 1:
    return [c]
  neg = ew.compare(cx, ew.CmpOp.LT, c, 0)
  rest = ew.where_(cx, neg, ew.unary(cx, ew.UnOp.NEG, c), c)
  parts = []
  for d in range(len(shape)):
    s = math.prod(shape[d + 1:])
    q = rest if s == 1 else ew.binary(cx, ew.BinOp.FLOORDIV, rest, s)
    if s != 1:
      rest = ew.binary(cx, ew.BinOp.MOD, rest, s)
    parts.append(ew.where_(cx, neg, ew.unary(cx, ew.UnOp.NEG, q), q))
  return parts


def _moved(cx, entry, q):
  if q == 0:
    return entry
  if isinstance(entry, int) and not isinstance(entry, bool):
    return entry + q
  return ew.binary(cx, ew.BinOp.ADD, entry, q)


def binop(tracer, op, a, b, node):
  """`ptrs + c`, `c + ptrs` or `ptrs - c` of a pointer block (an IndexedRef); None where neither operand is one."""
  if not isinstance(a, IndexedRef) and not isinstance(b, IndexedRef):
    return None
  left, right = (node.left, node.right) if isinstance(node, ast.BinOp) else (node.target, node.value)
  ptrs, step, ptr_node, step_node = (a, b, left, right) if isinstance(a, IndexedRef) else (b, a, right, left)
  name, text = tracer.text(ptr_node), tracer.text(step_node)
  ref = ptrs.ref
  shape = tuple(ref.type.shape)
  index = ptrs.index if isinstance(ptrs.index, tuple) else (ptrs.index,)
  ok_op = op is ast.Add or (op is ast.Sub and ptrs is a)
  static = isinstance(step, int) and not isinstance(step, bool)
  runtime = is_value(step) and getattr(resolve(step.type.dtype), "is_int", False)    # (a scalar or a tensor)
  ref_name = ref.name or "x"
  said = tracer.text(node)
  if not ok_op or not (static or runtime):
    what = {ast.Sub: "-", ast.Mult: "*", ast.FloorDiv: "//", ast.Mod: "%", ast.Div: "/"}.get(op, "+")
    raise E.KernelTypeError(
        f"{name} is a block of {ref_name}'s elements (Triton's pointer block): it moves by an integer added to it or"
        f" subtracted from it ({name} += BLOCK_K), and {said} is neither", tracer.loc(node),
        hint=f"to compute with the elements, load them first: ml.load({name}, mask=..., other=0) {what} ...")
  if len(index) != len(shape) or not all(is_value(i) or (isinstance(i, int) and not isinstance(i, bool))
                                         for i in index):
    raise E.KernelTypeError(
        f"{name} indexes {ref_name} with slices or fewer indices than its {len(shape)} axes, so it has no one"
        f" element per address to move by {text}", tracer.loc(node),
        hint=f"give every axis an index (a run of offsets or a number), {ref_name}.at[rows[:, None],"
             f" cols[None, :]], or move the offsets themselves: offs_k += BLOCK_K")
  sign = -1 if op is ast.Sub else 1
  cx = tracer.cx(node)
  if not all(isinstance(n, int) for n in shape):
    raise E.KernelTypeError(f"{said} needs {ref_name}'s shape while compiling", tracer.loc(node),
                            hint="move the offsets themselves: offs_k += BLOCK_K")
  if runtime:
    parts = _run_time_split(cx, step if sign == 1 else ew.unary(cx, ew.UnOp.NEG, step), shape)
  else:
    parts = _split(sign * step, shape)
  moved = tuple(_moved(cx, i, q) for i, q in zip(index, parts))
  return IndexedRef(ref, moved if isinstance(ptrs.index, tuple) else moved[0])
