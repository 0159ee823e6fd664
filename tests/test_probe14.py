"""Probe 14's findings: cluster_sync hands this CTA's SMEM to peers only once its TMA stores and
dots stop reading it; a loop whose next-trip load something later waits for, a register store
into a peer's tiled buffer, and a warp-specialised loop loading what the kernel writes outside
it are located errors (they were an internal error, a Mosaic failure, a silent race)."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from locate import expect

S = jax.ShapeDtypeStruct
F32 = jnp.float32
PER = 8


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def store_then_peer_writes(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  buf[...] = x.at[ml.ds(i * 128, 128)][...]
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])       # the TMA store may still read buf ...
  ml.cluster_sync()
  ml.cluster_ref(buf, (i + 1) % 2)[...] = ml.zeros((128, 128), F32)   # ... when the peer writes it
  ml.cluster_sync()


@mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))
def reload_then_cluster_sync(x, out):
  pid = ml.program_id(0)
  xs = ml.smem((2 * PER, 256))
  for c in ml.static_range(2):
    ml.copy(x.at[pid, ml.ds(c * PER, PER)], xs.at[ml.ds(c * PER, PER)])
  for row in range(pid, x.shape[0], 2):
    nxt = ml.where(row + 2 < x.shape[0], row + 2, row)
    for c in ml.static_range(2):
      out.at[row, ml.ds(c * PER, PER)][...] = xs.at[ml.ds(c * PER, PER)][...] * 2.0
      ml.copy(x.at[nxt, ml.ds(c * PER, PER)], xs.at[ml.ds(c * PER, PER)])
    ml.cluster_sync()


@mg.mgpu_kernel(out_shape=lambda a, b: S((256, 128), F32), grid=(2,), cluster=(2,))
def peer_tiled_store(a, b, out):
  i = ml.program_id(0)
  a_s, b_s = ml.smem((128, 64), a.dtype), ml.smem((64, 128), b.dtype)
  ml.copy(a.at[ml.ds(i * 128, 128)], a_s)
  ml.copy(b, b_s)
  acc = ml.dot(a_s, b_s)
  ml.cluster_sync()
  ml.cluster_ref(b_s, (i + 1) % 2)[...] = ml.zeros((64, 128), b.dtype)
  ml.cluster_sync()
  out.at[ml.ds(i * 128, 128)][...] = acc


@mg.mgpu_kernel(out_shape=lambda x: (x, x))
def ws_loads_written(x, o, res):
  b = ml.smem((64, 128))
  o[...] = x[...] * 2.0
  for k in ml.range(x.shape[0] // 64, stages=2, warp_specialize=True):
    ml.copy(o.at[ml.ds(k * 64, 64)], b)
    res.at[ml.ds(k * 64, 64)][...] = b[...] + 1.0


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def ws_in_place(x, out):
  """Loads and writes of an aliased array inside the loop only, tile by tile: allowed."""
  b = ml.smem((64, 128))
  for k in ml.range(x.shape[0] // 64, stages=2, warp_specialize=True):
    ml.copy(x.at[ml.ds(k * 64, 64)], b)
    out.at[ml.ds(k * 64, 64)][...] = b[...] * 3.0


def test_cluster_sync_waits_for_this_ctas_tma_stores_before_peers_write():
  lines = [line.split("#")[0].strip() for line in store_then_peer_writes.typed_ir(S((256, 128), F32)).splitlines()]
  i = next(n for n, line in enumerate(lines) if line.startswith("copy") and "slot=-1" in line)
  j = lines.index("clustersync", i)
  assert "awaitstores read_only=True pending=0" in lines[i + 1:j]
  x = rand.normal(rand.key(0), (256, 128), F32)
  np.testing.assert_array_equal(store_then_peer_writes(x, interpret=True), x)


def test_a_next_trip_load_awaited_before_the_loops_end_is_a_located_error():
  expect(reload_then_cluster_sync, [S((8, 16, 256), F32)], mg.PipelineError, "for row in range",
         "this loop loads the next trip's data into SMEM before its body ends (the load stays in flight"
         " across the back edge), but something after that load waits for it: an ml.cluster_sync(), or a"
         " write into the array the load reads")


def test_a_register_store_into_a_peers_tiled_buffer_is_a_located_error():
  expect(peer_tiled_store, [S((256, 64), jnp.float16), S((64, 128), jnp.float16)], mg.LayoutError,
         "ml.cluster_ref(b_s, (i + 1) % 2)[...] =",
         "this stores registers into a peer CTA's b_s, which is tiled for the tensor cores (ml.dot reads it,"
         " or it holds a dot result); register stores into a peer's buffer take plain buffers only")


def test_a_warp_specialised_loop_may_not_load_what_the_kernel_writes_outside_it():
  expect(ws_loads_written, [S((256, 128), F32)], mg.WarpSpecializeError, "ml.copy(o.at[ml.ds(k * 64, 64)], b)",
         "this warp-specialised loop loads from o, which the kernel writes before it (line 61); its producer"
         " warpgroup issues the loads from the kernel's start, ordered after nothing the other warpgroups"
         " write, so it could read o before the writes land")
  x = rand.normal(rand.key(1), (256, 128), F32)       # inside the loop only: fine
  np.testing.assert_allclose(ws_in_place(x, interpret=True), x * 3.0)
  jax.export.export(jax.jit(ws_in_place), platforms=["cuda"])(S((256, 128), F32))


@pytest.mark.gpu
def test_cluster_sync_after_a_tma_store_gpu():
  x = rand.normal(rand.key(0), (256, 128), F32)
  np.testing.assert_array_equal(jax.jit(store_then_peer_writes)(x), x)


@mg.mgpu_kernel(out_shape=lambda x: (S((128,), F32), S((128,), F32)))
def accumulate_then_read(x, h, p):
  ml.atomic_add(h, x[...])
  ml.atomic_add(h, x[...])
  p[...] = h[...] * 0.5


def test_vmap_of_a_one_program_histogram_is_not_a_cross_program_race():
  # each batch element's program updates and reads its own slice of h (was MG951 under vmap)
  x = rand.normal(rand.key(3), (3, 128), F32)
  h, p = jax.vmap(lambda v: accumulate_then_read(v, interpret=True))(x)
  np.testing.assert_allclose(h, 2 * x, rtol=1e-6)
  np.testing.assert_allclose(p, x, rtol=1e-6)
  jax.export.export(jax.jit(jax.vmap(accumulate_then_read)), platforms=["cuda"])(S((3, 128), F32))
