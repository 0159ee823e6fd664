"""Index grids compared as thread scalars against immediates (lowering/index_compare.py), checked thread by thread.

Each kernel's comparisons of index grids are lowered by `lower_compare` into real MLIR, which tests/mlir_eval.py
evaluates for every thread of the warpgroups; each element a thread holds (where Mosaic GPU's own `thread_idxs`
places it, evaluated the same way) must equal the comparison NumPy computes on the whole grid from the typed IR,
on kernels whose grids the grid evaluation proved free of wrap-around (Compare.no_wrap). No GPU: the GPU twins run the same masks end to end.
"""
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax._src.interpreters import mlir as jax_mlir
from jaxlib.mlir import ir
from jaxlib.mlir.dialects import arith, func

import mgpu_dsl as mg
import mgpu_dsl.language as ml
from mgpu_dsl import py_numbers
from mgpu_dsl.frontend import ir as kir
from mgpu_dsl.frontend.ops.control import ProgramId
from mgpu_dsl.frontend.ops.elementwise import Arange, BinOp, Binary, Compare, Constant
from mgpu_dsl.frontend.ops.shape import Broadcast
from mgpu_dsl.frontend.types import ScalarType, TensorType
from mgpu_dsl.lowering import index_compare
from mgpu_dsl.lowering.kernel import LowerCtx
from mgpu_dsl.lowering.mosaic import is_split, layout_of

from mlir_eval import Eval

F16, F32 = jnp.float16, jnp.float32
S = jax.ShapeDtypeStruct


def _tile(a, b, o, bm, bn):
  """A (bm, bn) tensor-core tile: the WGMMA layout the masks are compared in."""
  a_s, b_s = ml.smem((bm, 64)), ml.smem((bn, 64))
  ml.copy(a.at[ml.ds(0, bm), :], a_s)
  ml.copy(b.at[ml.ds(0, bn), :], b_s)
  return ml.dot(a_s, b_s.T)


def _out(a, b, **_):
  return S((4 * a.shape[0], 4 * b.shape[0]), F32)


@mg.mgpu_kernel(out_shape=_out, grid=(4, 4), block=lambda *_, wgs, **__: 128 * wgs)
def causal(a, b, o, *, wgs: ml.constexpr, form: ml.constexpr):
  bm, bn = a.shape[0], b.shape[0]
  s = _tile(a, b, o, bm, bn)
  i, j = ml.program_id(0), ml.program_id(1)
  rows = i * bm + ml.arange(bm)[:, None]
  cols = j * bn + ml.arange(bn)[None, :]
  if form == "le":
    s = ml.where(cols <= rows, s, 0.0)
  elif form == "ge_t":
    s = ml.where(cols >= rows, s, 0.0)
  elif form == "difference":
    s = ml.where(ml.arange(bm)[:, None] - ml.arange(bn)[None, :] <= j * bn - i * bm, s, 0.0)
  elif form == "scaled":
    s = ml.where(2 * ml.arange(bm)[:, None] + 3 < ml.arange(bn)[None, :] * 3 + i, s, 0.0)
  elif form == "window":
    s = ml.where((rows - cols < 40) & (cols <= rows), s, 0.0)
  elif form == "diagonal":
    s = ml.where(rows == cols, s, 0.0)
  elif form == "not_diagonal":
    s = ml.where(rows != cols, s, 0.0)
  elif form == "tail":
    s = ml.where(j * bn + ml.arange(bn)[None, :] < i * 7 + 100, s, 0.0)
  elif form == "rows_tail":
    s = ml.where((i * bm + ml.arange(bm))[:, None] >= j * 3, s, 0.0)
  elif form == "vectors":               # row and column vectors compared before they meet the tile
    rowsel = ml.arange(bm) < i * 5 + 3
    colsel = j * bn + ml.arange(bn) >= 7 * i
    s = ml.where(rowsel[:, None] & colsel[None, :], s, 0.0)
  elif form == "wrap":
    s = ml.where(i * 1073741824 + rows > cols - j * 1073741824, s, 0.0)
  o.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)][...] = s


FORMS = ["le", "ge_t", "difference", "scaled", "window", "diagonal", "not_diagonal", "tail", "rows_tail", "vectors",
         "wrap"]


def _numpy(defs, v, pids, bits=32):
  """v's value over its whole shape from the typed IR (program ids given), wrapped to int32 as the GPU wraps."""
  if not isinstance(v, kir.Value):
    return np.int64(v)
  o = defs[v.id]
  if isinstance(o, ProgramId):
    return np.int64(pids[o.axis])
  if isinstance(o, Constant):
    return np.int64(o.value)
  if isinstance(o, Arange):
    shape = [1] * len(v.type.shape)
    shape[o.dim] = v.type.shape[o.dim]
    return np.broadcast_to(np.arange(v.type.shape[o.dim]).reshape(shape), v.type.shape)
  if isinstance(o, Broadcast):
    x = _numpy(defs, o.x, pids)
    shape = [1] * len(v.type.shape)
    for a, d in enumerate(o.dims):
      shape[d] = o.x.type.shape[a]
    return np.broadcast_to(np.reshape(x, shape), v.type.shape)
  if isinstance(o, Binary):
    a, b = _numpy(defs, o.lhs, pids), _numpy(defs, o.rhs, pids)
    r = {BinOp.ADD: np.add, BinOp.SUB: np.subtract, BinOp.MUL: np.multiply}[o.kind](a, b)
    return (r + (1 << 31)) % (1 << 32) - (1 << 31)
  raise NotImplementedError(type(o).__name__)


class _Ctx:
  """What lower_compare reads of LowerCtx: program ids are the only scalars (constants of the test's choice)."""
  local_shape = LowerCtx.local_shape

  def __init__(self, kernel, pids, wg):
    self.kernel, self.pids = kernel, pids
    self.defs = kir.def_table(kernel.body)
    self.num_warpgroups = kernel.block // 128
    self.wg = None if self.num_warpgroups == 1 else arith.constant(ir.IndexType.get(), wg)
    self.values = {}

  def get(self, v):
    if v.id not in self.values:
      i32 = ir.IntegerType.get_signless(32)
      x = _numpy(self.defs, v, self.pids)
      self.values[v.id] = arith.constant(i32, int((int(x) + (1 << 31)) % (1 << 32) - (1 << 31)))
    return self.values[v.id]


def _compares(kernel):
  return [o for o in kir.walk(kernel.body) if isinstance(o, Compare) and isinstance(o.result.type, TensorType)]


def _check(kernel, pids):
  """Every compare of `kernel` that lower_compare takes, evaluated on every thread against NumPy's grid; the
  number of compares taken."""
  taken = 0
  for w in range(kernel.block // 128):
    with jax_mlir.make_ir_context(), ir.Location.unknown():
      module = ir.Module.create()
      with ir.InsertionPoint(module.body):
        body = func.FuncOp("f", ([], [])).add_entry_block()
        with ir.InsertionPoint(body):
          ctx = _Ctx(kernel, pids, w)
          for o in _compares(kernel):
            got = index_compare.lower_compare(ctx, o, o.lhs.type.dtype if isinstance(o.lhs, kir.Value)
                                              else o.rhs.type.dtype)
            if got is None:
              continue
            taken += 1
            t = o.result.type
            a = np.broadcast_to(_numpy(ctx.defs, o.lhs, pids), t.shape)
            b = np.broadcast_to(_numpy(ctx.defs, o.rhs, pids), t.shape)
            want = {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b, "==": a == b, "!=": a != b}[o.kind.value]
            shape = ctx.local_shape(t)
            layout = layout_of(t)
            places = list(layout.thread_idxs(shape))
            kept = [ax for ax in range(len(t.shape)) if ax not in t.layout.drop]
            ev = Eval(np.arange(128) + 128 * w, kernel.block)
            for r, reg in enumerate(got.registers.flat):
              bits = np.broadcast_to(ev.value(reg), (128, layout.vector_length))
              idx = np.stack([np.broadcast_to(ev.value(x), (128,)) for x in places[r]])   # (axes, threads)
              for j in range(layout.vector_length):
                full = np.zeros((len(t.shape), 128), np.int64)
                full[kept] = idx
                full[kept[-1]] += j
                if is_split(t) and ctx.wg is not None:
                  full[0] += w * shape[0]
                np.testing.assert_array_equal(bits[:, j] != 0, want[tuple(full)], err_msg=f"{o.kind} {w} {r} {j}")
          func.ReturnOp([])
  return taken


def _kernel(form, wgs, bm, bn):
  a, b = S((bm, 64), F16), S((bn, 64), F16)
  given = {"form": form, "wgs": wgs}
  return py_numbers.compiled(causal, *mg.calling.keyword_inputs(causal, (a, b), given))[0]["kernel"]


PROVEN = [f for f in FORMS if f != "wrap"]


@pytest.mark.parametrize("form", PROVEN)
@pytest.mark.parametrize("wgs,bm,bn", [(1, 64, 64), (1, 64, 128), (1, 64, 8), (2, 128, 64), (2, 256, 128)])
def test_index_grid_compares_equal_numpy_on_every_thread(form, wgs, bm, bn):
  kernel = _kernel(form, wgs, bm, bn)
  assert all(o.no_wrap for o in _compares(kernel))
  for pids in ((1, bm // bn), (3, 2 * bm // bn + 1)):      # blocks the diagonal crosses
    assert _check(kernel, pids) >= 1


def test_a_grid_that_may_wrap_is_lowered_as_before():
  """i * 2**30 + rows passes int32's top at i = 2 of the grid's 4: not proven, so not taken (Mosaic's own grids,
  which wrap as interpret mode does)."""
  kernel = _kernel("wrap", 1, 64, 64)
  assert [o.no_wrap for o in _compares(kernel)] == [False]
  assert _check(kernel, (2, 1)) == 0


def test_a_grid_of_data_is_lowered_as_before():
  @mg.mgpu_kernel(out_shape=lambda a, b: S((64, 64), F32), grid=(1,), block=128)
  def data(a, b, o):
    s = _tile(a, b, o, 64, 64)
    o.at[ml.ds(0, 64), ml.ds(0, 64)][...] = ml.where(s.astype(jnp.int32) < ml.arange(64)[None, :], s, 0.0)
  kernel = py_numbers.compiled(data, *mg.calling.keyword_inputs(data, (S((64, 64), F16), S((64, 64), F16)), {}))
  assert _check(kernel[0]["kernel"], (0, 0)) == 0


def test_a_scalar_read_from_data_is_not_bounded():
  @mg.mgpu_kernel(out_shape=lambda a, b, n: S((64, 64), F32), grid=(1,), block=128)
  def from_data(a, b, n, o):
    s = _tile(a, b, o, 64, 64)
    o.at[ml.ds(0, 64), ml.ds(0, 64)][...] = ml.where(ml.arange(64)[None, :] < n[0], s, 0.0)
  spec = (S((64, 64), F16), S((64, 64), F16), S((1,), jnp.int32))
  kernel = py_numbers.compiled(from_data, *mg.calling.keyword_inputs(from_data, spec, {}))[0]["kernel"]
  assert [o.no_wrap for o in _compares(kernel)] == [False]


def test_the_attention_backwards_causal_mask_is_proven_in_its_loop():
  """The fused backward's mask, in a loop of g * count trips (count from the program id), at the examples'
  shapes: j = first + t % count is bounded by the loop's span."""
  import sys
  sys.path.insert(0, str(__import__("pathlib").Path(__file__).parents[1] / "examples"))
  import attention_bwd as B
  spec = (B._Q, B._KV, B._KV, B._Q, B._LSE, B._LSE)
  given = dict(bq=64, bkv=128, stages=2, causal=True, scale=0.125)
  kernel = py_numbers.compiled(B.attention_bwd, *mg.calling.keyword_inputs(B.attention_bwd, spec, given))[0]
  masks = _compares(kernel["kernel"])
  assert masks and all(o.no_wrap for o in masks)


@pytest.mark.gpu
@pytest.mark.parametrize("form", FORMS)
@pytest.mark.parametrize("wgs,bm,bn", [(1, 64, 128), (2, 128, 64)])
def test_gpu_masked_tiles_equal_interpret_mode(form, wgs, bm, bn):
  ka, kb = jax.random.split(jax.random.key(7))
  a = jax.random.normal(ka, (bm, 64), F16)
  b = jax.random.normal(kb, (bn, 64), F16)
  got = causal(a, b, form=form, wgs=wgs)
  want = causal(a, b, form=form, wgs=wgs, interpret=True)
  np.testing.assert_allclose(np.asarray(got), np.asarray(want), rtol=1e-3, atol=1e-3)
  assert (np.asarray(got) == 0).any()      # (a mask that masks)
