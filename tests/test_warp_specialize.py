"""Warp specialisation: a producer warpgroup issues a pipelined loop's TMA loads, the compute
warpgroups wait on full barriers and release stages on empty ones; persistent kernels."""
import copy
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand as rnd
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import ir
from mgpu_dsl.frontend import ops as O
from mgpu_dsl.lowering import interpret as interp
from locate import builds, expect, where

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "examples"))
import matmul as ex  # noqa: E402
from mlir_barriers import named_barriers

S = jax.ShapeDtypeStruct


def rand(shape, dtype, seed):
  return rnd.normal(rnd.key(seed), shape, dtype)


def rel_err(got, want):
  got = jnp.asarray(got, jnp.float32)
  return float(jnp.linalg.norm(got - want) / jnp.linalg.norm(want))


def _out(a, b, *args, **meta):
  return jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), a.dtype)


@mg.mgpu_kernel(out_shape=_out, grid=lambda a, b, ctas=3, **meta: (ctas,), block=256)
def tiles_matmul(a, b, c, *, stages: ml.constexpr = 3, ctas: ml.constexpr = 3, bn: ml.constexpr = 128):
  """A persistent warp-specialised matmul on a small grid: several tiles per CTA, unevenly."""
  bm, bk = 128, 64
  num_m, num_n = a.shape[0] // bm, b.shape[1] // bn
  a_s, b_s, c_s = ml.smem((bm, bk)), ml.smem((bk, bn)), ml.smem((bm, bn))
  for t in range(ml.program_id(0), num_m * num_n, ml.num_programs(0)):
    i, j = ml.grouped_ids(t, num_m, num_n, group=2)
    acc = ml.zeros((bm, bn), jnp.float32)
    for k in ml.range(a.shape[1] // bk, stages=stages, warp_specialize=True):
      ml.copy(a.at[ml.ds(i * bm, bm), ml.ds(k * bk, bk)], a_s)
      ml.copy(b.at[ml.ds(k * bk, bk), ml.ds(j * bn, bn)], b_s)
      acc = ml.dot(a_s, b_s, acc)
    c_s[...] = acc.astype(c.dtype)
    ml.copy(c_s, c.at[ml.ds(i * bm, bm), ml.ds(j * bn, bn)])


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(3,))
def scale_ws(x, out):
  """Register reads of the loaded stages; a store buffer per stage; tiles from the program id."""
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(ml.program_id(0), x.shape[0] // 64, ml.num_programs(0), stages=3, warp_specialize=True):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    o_s[...] = x_s[...] * 2.0
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


def roles(kernel):
  return next(o for o in kernel.body.ops if isinstance(o, O.WarpSpecialize))


def compiled(kfn, *args, **constexprs):
  hit = kfn._compile(args, constexprs)
  return copy.deepcopy(hit["kernel"]), hit["out_specs"]


# ---------------------------------------------------------------- interpret mode
@pytest.mark.parametrize("m,n,k", [(256, 256, 128), (384, 512, 256), (128, 128, 64)], ids=str)
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_persistent_warp_specialized_matmul_interprets(m, n, k, stages):
  a, b = rand((m, k), jnp.float16, 1), rand((k, n), jnp.float16, 2)
  got = tiles_matmul(a, b, stages=stages, interpret=True)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


@pytest.mark.parametrize("cfg", [dict(), dict(persistent=False), dict(bn=128, stages=4),
                                 dict(specialize=False)], ids=str)
def test_example_matmul_configurations_interpret(cfg):
  a, b = rand((256, 256), jnp.bfloat16, 3), rand((256, 256), jnp.bfloat16, 4)
  got = ex.matmul(a, b, interpret=True, **cfg)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


@pytest.mark.parametrize("rows", [64, 192, 704])
def test_warp_specialized_register_reads_and_stage_stores_interpret(rows):
  x = rand((rows, 128), jnp.float32, 5)
  np.testing.assert_array_equal(scale_ws(x, interpret=True), x * 2)


# ---------------------------------------------------------------- the IR
def test_roles_split_the_kernel_into_a_producer_and_consumers():
  text = tiles_matmul.typed_ir(S((256, 256), jnp.float16), S((256, 256), jnp.float16))
  assert "barrier<3, arrivals=2> = barrieralloc" in text
  assert "warpspecialize producer_regs=24 consumer_regs=240" in text     # (FA3's pair; 40 / 232 until session 57)
  producer = text[text.index("producer():"):text.index("consumer():")]
  consumer = text[text.index("consumer():"):]
  assert "barrierwait" in producer and "copy src=" in producer and "dot " not in producer
  assert "waitload" not in producer and "store " not in producer
  assert consumer.count("barrierarrive") == 3 + 2      # 3 stages made free, a release in and after the loop
  assert "waitload" in consumer and "dot " in consumer and "copy src=%" in consumer
  assert "slot=-1" in consumer and "slot=-1" not in producer   # only the consumers store


def test_mosaic_module_trades_registers_and_meets_compute_threads_only():
  txt = tiles_matmul.mlir(S((256, 256), jnp.float16), S((256, 256), jnp.float16))
  assert txt.count("nvvm.setmaxregister") == 2
  assert ("sync", 15, 256) in named_barriers(txt)         # the consumers' barrier, not the CTA's
  assert "384" in txt                                  # 2 compute warpgroups + the producer


@pytest.mark.parametrize("cfg", [dict(), dict(persistent=False), dict(bn=128, stages=5)], ids=str)
def test_warp_specialized_matmul_exports_for_cuda(cfg):
  specs = [S((1024, 512), jnp.float16), S((512, 768), jnp.float16)]
  exported = jax.export.export(jax.jit(lambda a, b: ex.matmul(a, b, **cfg)), platforms=["cuda"])(*specs)
  assert "@mosaic_gpu" in exported.mlir_module()


# ---------------------------------------------------------------- what the interpreter catches
def _drop(block, cls, pred=lambda o: True):
  for o in ir.walk(block):
    for r in o.regions:
      blk = getattr(o, r)
      blk.ops[:] = [x for x in blk.ops if not (isinstance(x, cls) and pred(x))]
  block.ops[:] = [x for x in block.ops if not (isinstance(x, cls) and pred(x))]


def test_producer_that_does_not_wait_for_a_free_stage_is_a_race():
  a, b = rand((128, 512), jnp.float16, 6), rand((512, 128), jnp.float16, 7)
  kernel, specs = compiled(tiles_matmul, a, b)
  _drop(roles(kernel).producer, O.BarrierWait)
  with pytest.raises(interp.RaceError, match="starts before the first landed") as e:
    interp.run(kernel, [a, b], specs)
  assert e.value.lineno == where(tiles_matmul, "ml.copy(a.at")[0]


def test_consumers_that_never_release_a_stage_hang():
  a, b = rand((128, 512), jnp.float16, 6), rand((512, 128), jnp.float16, 7)
  kernel, specs = compiled(tiles_matmul, a, b)
  loop = next(o for o in ir.walk(roles(kernel).consumer) if isinstance(o, O.For) and o.warp_specialize)
  _drop(loop.body, O.BarrierArrive)
  with pytest.raises(mg.InterpretError, match="the kernel hangs: the producer and the consumer wait") as e:
    interp.run(kernel, [a, b], specs)
  assert e.value.lineno == where(tiles_matmul, "for k in ml.range")[0]


def test_consumers_that_do_not_make_the_stages_free_first_hang():
  a, b = rand((128, 128), jnp.float16, 6), rand((128, 128), jnp.float16, 7)
  kernel, specs = compiled(tiles_matmul, a, b)
  body = roles(kernel).consumer
  body.ops[:] = [o for o in body.ops if not isinstance(o, O.BarrierArrive)]
  with pytest.raises(mg.InterpretError, match="hangs"):
    interp.run(kernel, [a, b], specs)


# ---------------------------------------------------------------- diagnostics
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def ws_with_cluster_sync(x, out):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  ml.cluster_sync()
  for t in ml.range(x.shape[0] // 64, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    o_s[...] = x_s[...]
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])


def test_cluster_sync_in_a_warp_specialized_kernel_is_rejected():
  e = expect(ws_with_cluster_sync, [S((256, 128), jnp.float32)], mg.WarpSpecializeError, "ml.cluster_sync()",
             "ml.cluster_sync() in a kernel with a warp-specialised loop: its producer warpgroup never"
             " reaches this barrier, so the kernel would hang")
  assert e.hint == "drop warp_specialize=True from the loop, or the cluster_sync"


@mg.mgpu_kernel(out_shape=lambda x: x)
def two_specialized_loops(x, out):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(2, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    o_s[...] = x_s[...]
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])
  y_s = ml.smem((64, 128))
  for t in ml.range(2, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(128 + t * 64, 64)], y_s)
    o_s[...] = y_s[...]
    ml.copy(o_s, out.at[ml.ds(128 + t * 64, 64)])


def test_a_second_warp_specialized_loop_is_rejected():
  e = expect(two_specialized_loops, [S((256, 128), jnp.float32)], mg.WarpSpecializeError, "for t in", nth=1,
             message="a kernel may have one warp-specialised loop; this is a second one")
  assert e.notes and f":{where(two_specialized_loops, 'for t in')[0]}:" in e.notes[0]


@mg.mgpu_kernel(out_shape=lambda x: x)
def carried_window(x, out):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  row = 0
  for r in range(2):
    for t in ml.range(2, stages=2, warp_specialize=True):
      ml.copy(x.at[ml.ds(row + t * 64, 64)], x_s)
      o_s[...] = x_s[...]
      ml.copy(o_s, out.at[ml.ds(row + t * 64, 64)])
    row = row + 128


def test_load_window_carried_through_an_outer_loop_is_rejected():
  expect(carried_window, [S((256, 128), jnp.float32)], mg.WarpSpecializeError, "for t in",
         "the loads of this warp-specialised loop depend on row, which is carried through an enclosing"
         " loop; the producer warpgroup can only recompute loop indices and scalar arithmetic on them")


@mg.mgpu_kernel(out_shape=lambda x, idx: x, grid=(2,))
def gather_ws(x, idx, out, *, from_smem: ml.constexpr = False):
  """Row blocks of x in the order an index input gives (a page table): the producer reads it."""
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  p = ml.program_id(0)
  n = idx[4 * p + 3] - idx[4 * p + 3] + 4          # a trip count read from the input, too
  if from_smem:
    table = ml.smem((8,), jnp.int32)
    ml.copy(idx, table)
  for t in ml.range(n, stages=2, warp_specialize=True):
    page = table[4 * p + t] if from_smem else idx[4 * p + t]
    ml.copy(x.at[ml.ds(page * 64, 64)], x_s)
    o_s[...] = x_s[...] + 1.0
    ml.copy(o_s, out.at[ml.ds((4 * p + t) * 64, 64)])


def test_producer_reads_load_windows_and_trip_counts_from_inputs():
  x = rand((512, 128), jnp.float32, 21)
  idx = jnp.array([5, 2, 7, 0, 1, 6, 3, 4], jnp.int32)
  got = gather_ws(x, idx, interpret=True)
  want = (x.reshape(8, 64, 128)[idx] + 1.0).reshape(512, 128)
  np.testing.assert_array_equal(got, want)
  builds(gather_ws, S(x.shape, x.dtype), S(idx.shape, idx.dtype))


def test_producer_reading_windows_from_smem_is_rejected():
  expect(gather_ws, [S((512, 128), jnp.float32), S((8,), jnp.int32)], mg.WarpSpecializeError, "table[4",
         "a load window of this warp-specialised loop is read from table in SMEM; the producer warpgroup"
         " that issues the loads does not wait for what the kernel copies into SMEM, so it would read it"
         " before it lands", from_smem=True,
         hint="read the window from the kernel's input (a page table in GMEM), or drop warp_specialize=True")


@pytest.mark.gpu
def test_producer_reads_load_windows_from_inputs_on_the_gpu():
  x = rand((512, 128), jnp.float32, 21)
  idx = jnp.array([5, 2, 7, 0, 1, 6, 3, 4], jnp.int32)
  np.testing.assert_array_equal(jax.jit(gather_ws)(x, idx), gather_ws(x, idx, interpret=True))


def test_warp_specialize_needs_stages():
  @mg.mgpu_kernel(out_shape=lambda x: x)
  def one_stage(x, out):
    x_s = ml.smem((64, 128))
    for t in ml.range(2, warp_specialize=True):
      ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
      ml.copy(x_s, out.at[ml.ds(t * 64, 64)])
  expect(one_stage, [S((128, 128), jnp.float32)], mg.KernelTypeError, "ml.range(2, warp",
         "warp_specialize=True needs stages of at least 2")


# ---------------------------------------------------------------- on the H200
@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("cfg", [dict(), dict(persistent=False), dict(bn=128, stages=5),
                                 dict(specialize=False), dict(persistent=False, specialize=False, stages=4)],
                         ids=str)
@pytest.mark.parametrize("shape", [(1024, 768, 512), (2048, 2048, 1024), (384, 512, 256)], ids=str)
def test_matmul_paths_on_the_gpu_match_jnp(shape, cfg, dtype):
  m, n, k = shape
  if n % cfg.get("bn", 256) or m % 128:
    pytest.skip("tile does not divide the shape")
  a, b = rand((m, k), dtype, 8), rand((k, n), dtype, 9)
  got = jax.jit(lambda a, b: ex.matmul(a, b, **cfg))(a, b)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("stages", [2, 4])
def test_small_grid_persistent_matmul_on_the_gpu_matches_interpret_mode(stages):
  a, b = rand((384, 256), jnp.float16, 10), rand((256, 512), jnp.float16, 11)
  got = jax.jit(lambda a, b: tiles_matmul(a, b, stages=stages))(a, b)
  want = tiles_matmul(a, b, stages=stages, interpret=True)
  np.testing.assert_allclose(np.asarray(got, np.float32), np.asarray(want, np.float32), rtol=2e-3, atol=2e-3)


@pytest.mark.gpu
@pytest.mark.parametrize("rows", [64, 704, 4096])
def test_warp_specialized_elementwise_on_the_gpu(rows):
  x = rand((rows, 128), jnp.float32, 12)
  np.testing.assert_array_equal(jax.jit(scale_ws)(x), x * 2)


# ---------------------------------------------------------------- clusters and multicast
def test_multicast_loads_free_their_stages_cluster_wide():
  specs = [S((512, 256), jnp.float16), S((256, 512), jnp.float16)]
  text = ex.matmul.typed_ir(*specs, cluster_m=2)
  assert "cluster=(2, 1, 1)" in text
  assert "barrier<4, arrivals=2, cluster_axis=0> = barrieralloc" in text
  assert text.count("multicast=0") == 1                 # B only, in the producer
  assert text.rstrip().splitlines()[-2].strip().startswith("clustersync")   # no CTA leaves early
  txt = ex.matmul.mlir(*specs, cluster_m=2)
  assert "multicast" in txt and "mapa" in txt


def _mbarrier_init_counts(mlir_text):
  """The arrival counts the kernel's mbarriers are initialised with, in order."""
  return [int(m) for m in re.findall(r"nvvm\.mbarrier\.init %\w+, %c(\d+)_i32", mlir_text)]


@pytest.mark.parametrize("cluster_m,stage_free", [(1, 2), (2, 4)])
def test_stage_free_barriers_count_every_consumer_warpgroup_of_the_cluster(cluster_m, stage_free):
  """The TMA barriers complete on one arrival; the stage-free barriers of a warp-specialised
  loop on one arrival per consumer warpgroup (2), of every CTA sharing its multicast loads.
  Once they were initialised with 0 arrivals in a cluster: the kernel hung on the H200."""
  specs = [S((512, 256), jnp.float16), S((256, 512), jnp.float16)]
  counts = _mbarrier_init_counts(ex.matmul.mlir(*specs, cluster_m=cluster_m, stages=4))
  assert counts and min(counts) >= 1
  assert counts[-4:] == [stage_free] * 4                # the 4 stages' empty barriers come last
  assert set(counts[:-4]) == {1}


@pytest.mark.parametrize("cfg", [dict(cluster_m=2), dict(cluster_m=2, persistent=False),
                                 dict(cluster_m=2, bn=128, stages=4)], ids=str)
def test_multicast_matmul_interprets_and_exports(cfg):
  a, b = rand((512, 256), jnp.bfloat16, 13), rand((256, 512), jnp.bfloat16, 14)
  got = ex.matmul(a, b, interpret=True, **cfg)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2
  exported = jax.export.export(jax.jit(lambda a, b: ex.matmul(a, b, **cfg)), platforms=["cuda"])(a, b)
  assert "@mosaic_gpu" in exported.mlir_module()


@mg.mgpu_kernel(out_shape=_out, grid=(2,), block=256, cluster=(2,))
def multicast_own_rows(a, b, c):
  """Wrong: the peers load different rows of A but say it is one multicast window."""
  a_s, b_s, c_s = ml.smem((128, 64)), ml.smem((64, 128)), ml.smem((128, 128))
  i = ml.program_id(0)
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * 128, 128), ml.ds(k * 64, 64)], a_s, multicast=0)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  c_s[...] = acc.astype(c.dtype)
  ml.copy(c_s, c.at[ml.ds(i * 128, 128)])


def test_peers_multicasting_different_windows_is_a_race():
  a, b = rand((256, 128), jnp.float16, 15), rand((128, 128), jnp.float16, 16)
  with pytest.raises(interp.RaceError, match="multicast different windows") as e:
    multicast_own_rows(a, b, interpret=True)
  assert e.value.lineno == where(multicast_own_rows, "ml.copy(a.at")[0]


def _multicast_kernel(body_line, cluster=(2,), specialize=True):
  src = f'''
@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster={cluster})
def k(x, out):
  x_s, o_s = ml.smem((64, 128)), ml.smem((64, 128))
  for t in ml.range(2, stages=2, warp_specialize={specialize}):
    {body_line}
    o_s[...] = x_s[...]
    ml.copy(o_s, out.at[ml.ds(t * 64, 64)])
'''
  return src


@pytest.mark.parametrize("line,cluster,specialize,cls,message", [
    ("ml.copy(x.at[ml.ds(t * 64, 64)], x_s, multicast=0)", (1,), True, mg.ClusterRefError,
     "multicast along axis 0, but the kernel's cluster is (1, 1, 1)"),
    ("ml.copy(x.at[ml.ds(t * 64, 64)], x_s, multicast=0)", (2,), False, mg.WarpSpecializeError,
     "ml.copy(..., multicast=) is supported for the loads of a warp-specialised loop only"),
    ("ml.copy(x.at[ml.ds(t * 64, 8)], x_s.at[0:8], multicast=0)", (2,), True, mg.ClusterRefError,
     "a multicast load is split among the 2 CTAs along axis 0 by rows, in 8-row tiles, but x_s.at[0:8] has 8 rows"),
    ("ml.copy(x.at[ml.ds(t * 64, 64)], x_s, multicast=True)", (2,), True, mg.KernelTypeError,
     "multicast must be a cluster axis (0, 1 or 2), got True"),
], ids=["no_cluster", "not_specialized", "rows", "axis"])
def test_multicast_mistakes_are_located(tmp_path, line, cluster, specialize, cls, message):
  path = tmp_path / "mc.py"
  path.write_text("import jax, jax.numpy as jnp\nimport mgpu_dsl as mg\nfrom mgpu_dsl import language as ml\n"
                  + _multicast_kernel(line, cluster, specialize))
  import importlib.util
  spec = importlib.util.spec_from_file_location("mc", path)
  mod = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(mod)
  with pytest.raises(mg.KernelError) as e:
    mod.k.check(S((256, 128), jnp.float32))
  assert type(e.value) is cls and e.value.code == cls.code
  assert e.value.message == message
  assert e.value.lineno == 9 and e.value.col_offset == 4 and e.value.hint


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [jnp.float16, jnp.bfloat16], ids=str)
@pytest.mark.parametrize("cfg", [dict(cluster_m=2), dict(cluster_m=2, persistent=False),
                                 dict(cluster_m=2, bn=128, stages=5)], ids=str)
@pytest.mark.parametrize("shape", [(1024, 768, 512), (2048, 2048, 1024), (768, 512, 256)], ids=str)
def test_multicast_matmul_on_the_gpu_matches_jnp(shape, cfg, dtype):
  m, n, k = shape
  if n % cfg.get("bn", 256) or m % 256:
    pytest.skip("tile does not divide the shape")
  a, b = rand((m, k), dtype, 17), rand((k, n), dtype, 18)
  got = jax.jit(lambda a, b: ex.matmul(a, b, **cfg))(a, b)
  assert rel_err(got, jnp.dot(a, b, preferred_element_type=jnp.float32)) < 1e-2


# ---------------------------------------------------------------- column slices of tensor-core tiles
def test_epilogue_stores_column_chunks_through_two_buffers():
  specs = [S((512, 256), jnp.float16), S((256, 512), jnp.float16)]
  text = ex.matmul.typed_ir(*specs)
  assert text.count("slice x=") == 4 and "tensor<128x64, float16, wgmma> = slice" in text
  assert text.count("awaitstores read_only=True pending=1") == 2     # chunks 3 and 4 of each tile
  assert text.count("ref<SMEM, 128x64, float16> = smemalloc") == 2


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], b.shape[1]), jnp.float32))
def sliced_dot(a, b, c):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  c.at[:, 0:64][...] = acc[:, 64:128]
  c.at[:, 64:128][...] = acc[:, 0:64] * 2.0


def test_column_slices_of_a_dot_result_interpret():
  a, b = rand((64, 64), jnp.float16, 20), rand((64, 128), jnp.float16, 21)
  want = jnp.dot(a, b, preferred_element_type=jnp.float32)
  got = sliced_dot(a, b, interpret=True)
  np.testing.assert_allclose(got[:, :64], want[:, 64:], rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(got[:, 64:], 2 * want[:, :64], rtol=1e-5, atol=1e-5)


@mg.mgpu_kernel(out_shape=lambda x: jax.ShapeDtypeStruct((128, 64), x.dtype))
def sliced_plain(x, out, *, cols: ml.constexpr = (0, 64)):
  v = x[...] * 2.0
  out[...] = v[:, cols[0]:cols[1]]


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((a.shape[0], 64), jnp.float32))
def sliced_dot_cols(a, b, c, *, cols: ml.constexpr = (0, 64)):
  a_s, b_s = ml.smem(a.shape), ml.smem(b.shape)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  c[...] = ml.dot(a_s, b_s)[:, cols[0]:cols[1]]


@pytest.mark.parametrize("cols", [(0, 64), (4, 68), (64, 128)], ids=str)
def test_column_slices_of_other_tensors_go_through_smem(cols):
  """Were MG204 ('x[:, a:b] slices register tensors in the tensor-core layout'): a tensor not
  computed from a dot is sliced through an SMEM scratch, at any column."""
  x = rand((128, 128), jnp.float32, 22)
  np.testing.assert_allclose(sliced_plain(x, cols=cols, interpret=True), 2 * x[:, cols[0]:cols[1]])
  assert "slice x=" not in sliced_plain.typed_ir(S((128, 128), jnp.float32), cols=cols)


@pytest.mark.parametrize("cols,cls,message", [
    ((4, 68), mg.LayoutError, "columns 4:68 do not start and end on the tensor-core layout's 8-column tiles"),
    ((64, 200), mg.IndexOutOfBoundsError, "columns 64:200 are outside a tensor of 128 columns"),
], ids=["misaligned", "outside"])
def test_column_slice_mistakes_of_a_dot_result_are_located(cols, cls, message):
  expect(sliced_dot_cols, [S((64, 64), jnp.float16), S((64, 128), jnp.float16)], cls, "ml.dot(a_s, b_s)[",
         message, cols=cols)


@pytest.mark.gpu
def test_column_slices_of_a_dot_result_on_the_gpu():
  a, b = rand((64, 64), jnp.float16, 20), rand((64, 128), jnp.float16, 21)
  np.testing.assert_allclose(jax.jit(sliced_dot)(a, b), sliced_dot(a, b, interpret=True), rtol=1e-5, atol=1e-5)


def test_peers_multicasting_different_windows_is_proved_before_running():
  """The window's start depends only on the program id: .check proves the peers differ (was found
  by interpret mode only)."""
  specs = (S((256, 128), jnp.float16), S((128, 128), jnp.float16))
  with pytest.raises(mg.RaceError) as e:
    multicast_own_rows.check(*specs)
  assert e.value.lineno == where(multicast_own_rows, "ml.copy(a.at")[0]
  assert e.value.message.startswith("programs (0, 0, 0) and (1, 0, 0) of a cluster multicast different windows"
                                    " (a from (0, 0) and from (128, 0))")
  assert "program_id // cluster size" in e.value.hint


@mg.mgpu_kernel(out_shape=lambda a, b: jax.ShapeDtypeStruct((1,), jnp.float32), block=256)
def ws_total(a, b, out):
  """A full reduction of a split tile in a warp-specialised kernel: the compute warpgroups combine
  their parts at their own barrier."""
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
  out[0] = ml.sum(acc)


def test_a_full_reduction_of_a_split_tile_in_a_warp_specialised_kernel_combines_the_parts():
  """It was MG204 (the warpgroups were said to run apart, as ping-pong's do): the compute warpgroups
  exchange their parts through SMEM between two barriers of their own (test_probe35b has the GPU test)."""
  a, b = rand((128, 128), jnp.float16, 30), rand((128, 128), jnp.float16, 31)
  want = (np.asarray(a, np.float32) @ np.asarray(b, np.float32)).sum()
  np.testing.assert_allclose(ws_total(a, b, interpret=True)[0], want, rtol=1e-3, atol=1e-1)
  jax.export.export(jax.jit(ws_total), platforms=["cuda"])(S((128, 128), jnp.float16), S((128, 128), jnp.float16))
