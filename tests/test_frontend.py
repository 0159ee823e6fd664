"""Frontend tests: Python source -> typed IR, with no JAX anywhere."""
import subprocess
import sys
import textwrap

import numpy as np

from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ArgSpec, dump, parse, trace
from mgpu_dsl.frontend import ir
from mgpu_dsl.frontend import ops as O
from mgpu_dsl.frontend.dtypes import DType
from mgpu_dsl.frontend.types import Space


def build(fn, ins, outs, grid=(1, 1, 1), block=128, cluster=(1, 1, 1), **constexprs):
  spec = lambda s: ArgSpec(s[0], DType(np.dtype(s[1]).name)) if not isinstance(s, ArgSpec) else s
  return trace(parse(fn), [spec(s) for s in ins], [spec(s) for s in outs], constexprs,
               grid=grid, block=block, cluster=cluster)


def ops(kernel, cls):
  return [o for o in ir.walk(kernel.body) if isinstance(o, cls)]


def double(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 64))
  ml.copy(x.at[ml.ds(i * 128, 128), :], buf)
  buf[...] = buf[...] * 2
  ml.copy(buf, out.at[ml.ds(i * 128, 128), :])


def test_smem_dtype_is_inferred_from_the_copy_source():
  k = build(double, [((1024, 64), "float16")], [((1024, 64), "float16")], grid=(8, 1, 1))
  (alloc,) = ops(k, O.SmemAlloc)
  assert alloc.result.type.dtype == DType.f16
  assert alloc.result.type.space == Space.SMEM


def test_smem_dtype_is_inferred_from_a_register_store():
  def k(x, out):
    buf = ml.smem((128,))
    buf[...] = x[...].astype(ml.bfloat16)
    out[...] = buf[...].astype(ml.float32)
  kern = build(k, [((128,), "float32")], [((128,), "float32")])
  assert kern.smem[0].type.dtype == DType.bf16


def test_every_value_gets_a_dtype_shape_and_space():
  k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1))
  for o in ir.walk(k.body):
    for r in o.results:
      assert r.type.dtype in DType
      assert isinstance(r.type.shape, tuple)
      assert r.type.space in Space


def test_views_compose_onto_the_root_parameter():
  def k(x, out):
    i = ml.program_id(0)
    rows = x.at[ml.ds(i * 64, 64)]
    tile = rows.at[8:24, 16:32]
    buf = ml.smem((16, 16))
    ml.copy(tile, buf)
    ml.copy(buf, out.at[0:16, 0:16])
  kern = build(k, [((512, 64), "float32")], [((16, 16), "float32")])
  view = [v for v in ops(kern, O.View) if v.ref is kern.params[0].value][-1]   # `rows` is dead code
  assert len(ops(kern, O.View)) == 2
  assert [i.size for i in view.index] == [16, 16]
  assert view.index[1].start == 16


def test_sync_pass_waits_before_first_read_and_commits_before_store():
  k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1))
  names = [type(o).__name__ for o in k.body.ops]
  assert names.index("WaitLoad") < names.index("Load")
  assert names.index("CommitShared") < len(names) - 1 - names[::-1].index("Copy")
  assert names[-1] == "AwaitStores"


def test_sync_pass_waits_a_load_issued_in_a_loop_inside_the_loop():
  def k(x, out):
    buf = ml.smem((128, 64))
    acc = ml.zeros((128, 64), ml.float32)
    for j in range(4):
      ml.copy(x.at[ml.ds(j * 128, 128)], buf)
      acc = acc + buf[...]
    out[...] = acc
  kern = build(k, [((512, 64), "float32")], [((128, 64), "float32")])
  (loop,) = ops(kern, O.For)
  body = [type(o).__name__ for o in loop.body.ops]
  assert body.index("Copy") < body.index("WaitLoad") < body.index("Load")
  assert loop.results[0].type.shape == (128, 64)


def test_store_overwriting_smem_waits_for_the_inflight_tma_store():
  def k(x, out):
    buf = ml.smem((128,), ml.float32)
    buf[...] = x[...]
    ml.copy(buf, out.at[0:128])
    buf[...] = x[...] * 2
    ml.copy(buf, out.at[128:256])
  kern = build(k, [((128,), "float32")], [((256,), "float32")])
  names = [type(o).__name__ for o in kern.body.ops]
  first_store = names.index("Copy")
  assert "AwaitStores" in names[first_store:names.index("Store", first_store)]


def _two_windows(x, out):
  buf = ml.smem((256,), ml.float32)
  ml.copy(x.at[0:128], buf.at[0:128])
  ml.copy(x.at[128:256], buf.at[128:256])
  a = buf.at[0:128][...]
  b = buf.at[128:256][...]
  out[...] = a + b


def test_loads_into_disjoint_windows_of_one_buffer_are_awaited_one_by_one():
  kern = build(_two_windows, [((256,), "float32")], [((128,), "float32")])
  seq = [(type(o).__name__, getattr(o, "slot", None)) for o in kern.body.ops
         if type(o).__name__ in ("Copy", "WaitLoad", "Load")]
  assert seq == [("Copy", 0), ("Copy", 1), ("WaitLoad", 0), ("Load", None), ("WaitLoad", 1), ("Load", None)]


def test_a_load_into_an_overlapping_window_waits_for_the_first():
  def k(x, out):
    buf = ml.smem((256,), ml.float32)
    ml.copy(x.at[0:128], buf.at[0:128])
    ml.copy(x.at[128:256], buf.at[64:192])
    out[...] = buf.at[0:128][...]
  kern = build(k, [((256,), "float32")], [((128,), "float32")])
  seq = [(type(o).__name__, o.slot) for o in kern.body.ops if type(o).__name__ in ("Copy", "WaitLoad")]
  assert seq[:3] == [("Copy", 0), ("WaitLoad", 0), ("Copy", 1)]


def test_loads_into_windows_at_run_time_starts_are_awaited_before_any_read():
  def k(x, out):
    i = ml.program_id(0)
    buf = ml.smem((16, 32), ml.float32)
    ml.copy(x.at[0:4], buf.at[ml.ds(i, 4)])                  # starts known only at run time
    ml.copy(x.at[4:8], buf.at[ml.ds(i + 8, 4)])
    out[...] = buf.at[ml.ds(i, 4)][...]
  kern = build(k, [((8, 32), "float32")], [((4, 32), "float32")])
  seq = [(type(o).__name__, getattr(o, "slot", None)) for o in kern.body.ops
         if type(o).__name__ in ("Copy", "WaitLoad", "Load")]
  assert seq == [("Copy", 0), ("WaitLoad", 0), ("Copy", 1), ("WaitLoad", 1), ("Load", None)]


def test_writing_one_window_leaves_the_store_of_another_in_flight():
  def k(x, out):
    buf = ml.smem((256,), ml.float32)
    buf.at[0:128][...] = x[...]
    ml.copy(buf.at[0:128], out.at[0:128])
    buf.at[128:256][...] = x[...] * 2
    ml.copy(buf.at[128:256], out.at[128:256])
    buf.at[0:128][...] = x[...] * 3       # the first store's window: waits for it, not the second
    ml.copy(buf.at[0:128], out.at[256:384])
  kern = build(k, [((128,), "float32")], [((384,), "float32")])
  waits = [o for o in kern.body.ops if isinstance(o, O.AwaitStores)]
  assert [(w.read_only, w.pending) for w in waits] == [(True, 1), (True, 0)]   # the last: the kernel's end


def test_constexpr_parameters_specialise_the_trace():
  def k(x, out, *, scale: ml.constexpr):
    out[...] = x[...] * scale
  a = dump(build(k, [((128,), "float32")], [((128,), "float32")], scale=3))
  b = dump(build(k, [((128,), "float32")], [((128,), "float32")], scale=5))
  assert "rhs=3" in a and "rhs=5" in b


def test_static_range_unrolls_and_if_on_constexpr_picks_one_branch():
  def k(x, out, *, flip: ml.constexpr):
    for j in ml.static_range(2):
      v = x.at[j * 128:(j + 1) * 128][...]
      if flip:
        v = -v
      out.at[j * 128:(j + 1) * 128][...] = v
  kern = build(k, [((256,), "float32")], [((256,), "float32")], flip=True)
  assert len(ops(kern, O.Load)) == 2 and len(ops(kern, O.Unary)) == 2
  assert not ops(kern, O.For) and not ops(kern, O.If)


def test_runtime_if_yields_values_of_both_branches():
  def k(x, out):
    v = x[...]
    if ml.program_id(0) == 0:
      v = v * 2
    out[...] = v
  kern = build(k, [((128,), "float32")], [((128,), "float32")])
  (if_op,) = ops(kern, O.If)
  assert len(if_op.results) == 1 and if_op.results[0].type.shape == (128,)


def test_the_frontend_runs_without_jax():
  code = textwrap.dedent("""
      import sys, numpy as np
      sys.path.insert(0, %r)
      from test_frontend import build, double
      k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1))
      assert 'jax' not in sys.modules and 'jaxlib' not in sys.modules, sorted(m for m in sys.modules if 'jax' in m)
      print("ok")
  """) % (str(__import__("pathlib").Path(__file__).parent),)
  r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
  assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr


def test_reading_and_rewriting_one_window_needs_no_barrier():
  k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1))
  assert not ops(k, O.Barrier)


def _shift(start):
  def shift(x, out):
    buf = ml.smem((256,), ml.float32)
    ml.copy(x, buf)
    v = buf.at[0:128][...]
    buf.at[start:start + 128][...] = v
    ml.copy(buf, out)
  return shift


def test_rewriting_an_overlapping_smem_window_after_a_read_gets_a_barrier():
  k = build(_shift(64), [((256,), "float32")], [((256,), "float32")])
  names = [type(o).__name__ for o in k.body.ops]
  assert names.index("Load") < names.index("Barrier") < names.index("Store")
  k2 = build(_shift(64), [((256,), "float32")], [((256,), "float32")], block=256)
  names = [type(o).__name__ for o in k2.body.ops]
  assert names.index("Load") < names.index("Barrier") < names.index("Store")


def test_writing_a_disjoint_smem_window_after_a_read_needs_no_barrier():
  # Elements [0, 128) read, [128, 256) written: no thread touches another's element.
  for block in (128, 256):
    k = build(_shift(128), [((256,), "float32")], [((256,), "float32")], block=block)
    names = [type(o).__name__ for o in k.body.ops]
    assert "Barrier" not in names[names.index("Load"):names.index("Store")], block
    assert ops(k, O.CommitShared)     # before the TMA store reads what registers wrote


def test_two_warpgroups_rewriting_one_window_get_a_barrier():
  # 384 threads: 128 rows do not split among 3 warpgroups, so each holds the whole tile.
  k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1), block=384)
  assert "wg" not in str(ops(k, O.Load)[0].result.type)
  names = [type(o).__name__ for o in k.body.ops]
  assert names.index("Load") < names.index("Barrier") < names.index("Store")


def test_two_warpgroups_rewriting_their_own_rows_need_no_barrier():
  # 256 threads: each warpgroup holds and rewrites its own 64 of the tile's 128 rows.
  k = build(double, [((256, 64), "float32")], [((256, 64), "float32")], grid=(2, 1, 1), block=256)
  assert str(ops(k, O.Load)[0].result.type).endswith("strided/2wg>")
  assert not ops(k, O.Barrier)


def _before(kern, first_cls, then_cls):
  """Whether a Barrier stands between the first `first_cls` op and the next `then_cls` op."""
  names = [type(o).__name__ for o in ir.walk(kern.body)]
  i = names.index(first_cls)
  j = names.index(then_cls, i)
  return any(n in ("Barrier", "CommitShared") for n in names[i:j])


def test_an_output_read_back_after_register_writes_gets_barriers():
  # A histogram kept in its output: every thread reads and writes out[b]; a warp ahead would
  # read an update of the next iteration (found by a probe: no barrier at all).
  def hist(x, out):
    out[...] = ml.zeros((32,), ml.int32)
    for k in range(x.shape[0]):
      b = x[k]
      out[b] = out[b] + 1
  kern = build(hist, [((300,), "int32")], [((32,), "int32")])
  (loop,) = ops(kern, O.For)
  body = [type(o).__name__ for o in loop.body.ops]
  assert body.index("Barrier") < body.index("ScalarLoad") < body.index("Barrier", body.index("ScalarLoad")) \
      < body.index("ScalarStore")
  assert _before(kern, "Store", "For")


def test_an_output_reread_in_another_layout_gets_a_barrier():
  def reread(x, out, out2):
    out[...] = x[...] * 2.0
    out2[...] = ml.sum(out.at[ml.ds(64, 64)][...]) + x[...]
  kern = build(reread, [((128,), "float32")], [((128,), "float32"), ((128,), "float32")])
  assert _before(kern, "Store", "Load")


def test_a_scalar_read_then_rewritten_gets_a_barrier_between():
  # Every thread reads the element and every thread writes it: a warp ahead must not write
  # the new value before a warp behind has read the old one.
  def k(x, out):
    buf = ml.smem((128,), ml.float32)
    buf[...] = x[...]
    v = buf[3]
    buf[3] = v + 1.0
    out[...] = buf[...]
  kern = build(k, [((128,), "float32")], [((128,), "float32")])
  names = [type(o).__name__ for o in kern.body.ops]
  assert names.index("ScalarLoad") < names.index("Barrier", names.index("ScalarLoad")) < names.index("ScalarStore")


def test_outputs_only_written_and_atomics_get_no_barriers():
  def written(x, out):
    for i in range(4):
      out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...] + 1.0
  def atomics(x, out):
    for i in range(4):
      ml.atomic_add(out, x.at[ml.ds(i * 128, 128)][...])
  assert not ops(build(written, [((512,), "float32")], [((512,), "float32")]), O.Barrier)
  kern = build(atomics, [((512,), "float32")], [((128,), "float32")])
  assert not ops(kern, O.Barrier) and not ops(kern, O.CommitShared)


def test_a_plain_read_after_atomics_gets_a_barrier():
  def k(x, out, total):
    for i in range(4):
      ml.atomic_add(out, x.at[ml.ds(i * 128, 128)][...])
    total[...] = out[...] * 2.0
  kern = build(k, [((512,), "float32")], [((128,), "float32"), ((128,), "float32")])
  names = [type(o).__name__ for o in kern.body.ops]
  assert names.index("For") < names.index("Barrier") < names.index("Load")
  assert not any(isinstance(o, O.Barrier) for o in ops(kern, O.For)[0].body.ops)


def test_two_pipelined_loops_loading_one_buffer_get_a_buffer_each_sharing_memory():
  # Triton's two-phase causal attention loads K and V tiles in two loops; it was "loaded in a
  # pipelined loop but also used outside it".
  def two_phase(a, out):
    a_s = ml.smem((64, 64))
    acc = ml.zeros((64, 64), ml.float32)
    for k in ml.range(0, 2, stages=2):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      acc = acc + a_s[...].astype(ml.float32)
    for k in ml.range(2, 4, stages=2):
      ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
      acc = acc + a_s[...].astype(ml.float32)
    out[...] = acc
  kern = build(two_phase, [((64, 256), "float16")], [((64, 64), "float32")])
  assert len(kern.smem) == 2 and all(b.type.shape == (2, 64, 64) for b in kern.smem)
  assert kern.smem_plan.offsets[0] == kern.smem_plan.offsets[1]
  loops = [o for o in kern.body.ops if isinstance(o, O.For)]
  assert len(loops) >= 2


def test_buffers_with_disjoint_lifetimes_share_smem():
  def k(x, out):
    a = ml.smem((128, 64), ml.float32)
    ml.copy(x, a)
    v = a[...] * 2
    b = ml.smem((128, 64), ml.float32)
    b[...] = v
    ml.copy(b, out)
  kern = build(k, [((128, 64), "float32")], [((128, 64), "float32")])
  plan = kern.smem_plan
  assert plan.offsets[0] == plan.offsets[1]
  assert plan.group[kern.smem[0].id] == plan.group[kern.smem[1].id]
  names = [type(o).__name__ for o in kern.body.ops]
  # b overwrites a's memory after a was read from registers: threads meet first.
  assert names.index("Load") < names.index("Barrier") < names.index("Store")


def test_buffers_live_in_one_loop_do_not_share_smem():
  def k(x, out):
    a = ml.smem((128,), ml.float32)
    b = ml.smem((128,), ml.float32)
    for j in range(2):
      a[...] = x[...]
      b[...] = a[...] + 1.0
    out[...] = b[...]
  kern = build(k, [((128,), "float32")], [((128,), "float32")])
  assert kern.smem_plan.offsets[0] != kern.smem_plan.offsets[1]


def test_a_buffer_whose_last_access_is_a_tma_copy_shares_no_smem():
  # Found on the H200 by the pipeline fuzz: a load nothing reads is awaited only at the kernel's
  # end, so a buffer placed on its memory was overwritten by it while in use.
  def k(x, out):
    unread = ml.smem((128, 64), ml.float32)
    ml.copy(x, unread)
    b = ml.smem((128, 64), ml.float32)
    b[...] = ml.zeros((128, 64), ml.float32)
    out[...] = b[...]
  kern = build(k, [((128, 64), "float32")], [((128, 64), "float32")])
  assert kern.smem_plan.offsets[0] != kern.smem_plan.offsets[1]

  def in_loop(x, out):          # loaded in a loop that never reads it: in flight after the loop
    unread = ml.smem((128, 64), ml.float32)
    for i in ml.range(2):
      ml.copy(x, unread)
    b = ml.smem((128, 64), ml.float32)
    b[...] = ml.zeros((128, 64), ml.float32)
    out[...] = b[...]
  kern = build(in_loop, [((128, 64), "float32")], [((128, 64), "float32")])
  assert kern.smem_plan.offsets[0] != kern.smem_plan.offsets[1]


def test_a_buffer_sharing_a_tma_stores_memory_waits_for_the_store():
  def stored(x, out, out2):     # a TMA store reads its SMEM asynchronously
    a = ml.smem((128, 64), ml.float32)
    a[...] = x[...]
    ml.copy(a, out)
    b = ml.smem((128, 64), ml.float32)
    b[...] = x[...] * 2
    out2[...] = b[...]
  kern = build(stored, [((128, 64), "float32")], [((128, 64), "float32")] * 2)
  assert kern.smem_plan.offsets[0] == kern.smem_plan.offsets[1]
  names = [type(o).__name__ for o in kern.body.ops]
  copy = names.index("Copy")
  wait = names.index("AwaitStores", copy)
  assert wait < names.index("Store", copy)


@ml.inline
def _scaled(ref, factor):
  """A helper: read a ref and scale it."""
  v = ref[...]
  return v * factor


@ml.inline
def _store_twice(ref, value):
  ref[...] = value + value


def test_inline_helpers_are_traced_into_the_kernel():
  def k(x, out):
    _store_twice(out, _scaled(x, 3.0))
  kern = build(k, [((128,), "float32")], [((128,), "float32")])
  binaries = ops(kern, O.Binary)
  assert [b.kind for b in binaries] == [O.BinOp.MUL, O.BinOp.ADD]
  assert binaries[0].loc.lineno != binaries[1].loc.lineno   # each at its helper's own line
  assert all(o.loc.filename == __file__ for o in ir.walk(kern.body))
