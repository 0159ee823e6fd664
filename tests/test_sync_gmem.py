"""GMEM a CTA both writes and reads or rewrites (probe 13): each pair of accesses of one output
(or aliased input) gets the wait, barrier or proxy fence the GPU needs, found in the typed IR."""
import re
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
X = S((128, 128), F32)


@mg.mgpu_kernel(out_shape=lambda x: x)
def store_then_tma_store(x, out):
  out[...] = x[...] + 1.0                 # registers, then
  b = ml.smem((128, 128))
  ml.copy(x, b)
  ml.copy(b, out)                         # TMA over the same elements: the final value is x


@mg.mgpu_kernel(out_shape=lambda x: x)
def store_then_tma_add(x, out):
  out[...] = x[...]
  b = ml.smem((128, 128))
  b[...] = ml.full((128, 128), 1.0, F32)
  ml.copy(b, out, reduce="add")           # x + 1


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def load_then_overwrite(x, out):
  b = ml.smem((64, 128))
  ml.copy(x.at[ml.ds(0, 64)], b)          # the load may still be reading x[0:64] ...
  out.at[ml.ds(0, 64)][...] = ml.full((64, 128), 7.0, F32)    # ... when this overwrites it
  out.at[ml.ds(64, 64)][...] = b[...]


@mg.mgpu_kernel(out_shape=lambda x, ids: x)
def store_then_scatter(x, ids, out):
  out[...] = x[...]
  ml.atomic_add(out.at[ids[...]], ml.full((1024,), 1.0, F32))


@mg.mgpu_kernel(out_shape=lambda x, ids: (x, x))
def store_then_gather(x, ids, out, res):
  out[...] = x[...] * 2.0
  res[...] = out[ids[...]]


@mg.mgpu_kernel(out_shape=lambda x: x, input_output_aliases={0: 0})
def store_then_scalar(x, out):
  out.at[ml.ds(0, 128)][...] = ml.full((128,), 5.0, F32)
  s = x[77]                               # reads the 5.0 just written through out
  out.at[ml.ds(128, 128)][...] = ml.full((128,), 1.0, F32) * s


@mg.mgpu_kernel(out_shape=lambda x: x, grid=lambda x: (x.shape[0] // 128,), cluster=(2,))
def push_then_tma_store(x, out):
  i = ml.program_id(0)
  buf = ml.smem((128, 128))
  ml.cluster_ref(buf, (i + 1) % 2)[...] = x.at[ml.ds(i * 128, 128)][...]
  ml.cluster_sync()
  ml.copy(buf, out.at[ml.ds(i * 128, 128)])


def _ops(kernel, *specs):
  return [line.split("#")[0].strip() for line in kernel.typed_ir(*specs).splitlines()]


def _before(lines, marker, then):
  """The ops between the first line containing `marker` and the next containing `then`."""
  i = next(n for n, line in enumerate(lines) if marker in line)
  j = next(n for n, line in enumerate(lines[i + 1:], i + 1) if then in line)
  return lines[i + 1:j]


def test_registers_then_tma_into_one_output_are_fenced():
  for kernel in (store_then_tma_store, store_then_tma_add):
    between = _before(_ops(kernel, X), "store ref=", "slot=-1")
    assert any(line.startswith("commitshared global_=True") for line in between), kernel


def test_a_write_waits_for_a_tma_load_still_reading_the_same_array():
  lines = _ops(load_then_overwrite, X)
  assert "waitload slot=0 stage=0" in _before(lines, "slot=0", "store ref=")


def test_a_plain_store_then_scatter_or_gather_of_the_output_meets_at_a_barrier():
  ids = S((1024,), jnp.int32)
  for kernel, then in ((store_then_scatter, "scatterupdate"), (store_then_gather, "= gather")):
    assert "barrier" in _before(_ops(kernel, S((1024,), F32), ids), "store ref=", then), kernel


def test_a_scalar_read_of_an_aliased_input_is_ordered_after_writes():
  lines = _ops(store_then_scalar, S((256,), F32))
  assert "barrier" in _before(lines, "store ref=", "scalarload")


def test_writes_into_a_peers_smem_are_fenced_for_its_tma_store():
  text = push_then_tma_store.mlir(S((256, 128), F32))
  # (jax 0.10 prints "nvvm.cluster.arrive {aligned}", jax 0.11 "nvvm.cluster.arrive aligned")
  assert text.index("fence.proxy.async;") < re.search(r"nvvm\.cluster\.arrive \{?aligned", text).start()
  assert "fence.proxy.async;" not in (mg.mgpu_kernel(out_shape=lambda x: x, grid=(2,), cluster=(2,))(
      _sync_only).mlir(S((256, 128), F32)))


def _sync_only(x, out):
  i = ml.program_id(0)
  ml.cluster_sync()
  out.at[ml.ds(i * 128, 128)][...] = x.at[ml.ds(i * 128, 128)][...]


def _cases():
  k = rand.split(rand.key(0), 2)
  x = rand.normal(k[0], (128, 128), F32)
  v = rand.normal(k[1], (1024,), F32)
  ids = rand.randint(k[1], (1024,), 0, 1024)
  return [
      (store_then_tma_store, (x,), x),
      (store_then_tma_add, (x,), x + 1),
      (load_then_overwrite, (x,), jnp.concatenate([jnp.full((64, 128), 7.0), x[:64]])),
      (store_then_scatter, (v, ids), v.at[ids].add(1.0)),
      (store_then_scalar, (jnp.zeros((256,), F32),), jnp.concatenate([jnp.full((128,), 5.0),
                                                                       jnp.full((128,), 5.0)])),
  ]


@pytest.mark.parametrize("case", range(5))
def test_gmem_orderings_interpret(case):
  kernel, args, want = _cases()[case]
  np.testing.assert_allclose(kernel(*args, interpret=True), want, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(5))
def test_gmem_orderings_gpu(case):
  kernel, args, want = _cases()[case]
  np.testing.assert_allclose(jax.jit(kernel)(*args), want, rtol=1e-6)


# ---------------------------------------------------------------- TMA stores to the same elements
# TMA stores land in no order: a second store to elements an in-flight one surely writes waits for
# it (the last one written wins, as in interpret mode). Stores to other windows, or to windows
# that a loop index moves, keep overlapping.
@mg.mgpu_kernel(out_shape=lambda x: S((16, 128), F32))
def store_one_window_twice(x, out):
  a, b = ml.smem((8, 128)), ml.smem((8, 128))
  ml.copy(x.at[ml.ds(0, 8)], a)
  ml.copy(a, out.at[ml.ds(0, 8)])
  ml.copy(x.at[ml.ds(8, 8)], b)
  ml.copy(b, out.at[ml.ds(0, 8)])          # over the first: waits for it
  ml.copy(b, out.at[ml.ds(8, 8)])          # other elements: no wait


@mg.mgpu_kernel(out_shape=lambda x: S((x.shape[0] // 4, 128), F32), grid=lambda x: (x.shape[0] // 64,))
def store_each_trip_to_the_programs_window(x, out):
  i = ml.program_id(0)
  a = ml.smem((16, 128))
  for t in ml.static_range(4):
    ml.copy(x.at[ml.ds(i * 64 + t * 16, 16)], a)
    ml.copy(a, out.at[ml.ds(i * 16, 16)])  # the same window each trip: the last trip's rows win


@mg.mgpu_kernel(out_shape=lambda x, n: S((x.shape[0], 128), F32))
def store_where_the_loop_moves(x, n: ml.scalar, out):
  a = ml.smem((8, 128))
  for t in ml.range(n):
    ml.copy(x.at[ml.ds(t * 8, 8)], a)
    ml.copy(a, out.at[ml.ds(t * 8, 8)])    # a window a trip: no wait for the last trip's store


@mg.mgpu_kernel(out_shape=lambda x: S((8, 128), F32))
def tma_add_twice(x, out):
  a = ml.smem((8, 128))
  ml.copy(x.at[ml.ds(0, 8)], a)
  ml.copy(a, out, reduce="add")
  ml.copy(a, out, reduce="add")            # additions commute: no wait


def _full_waits_between(lines, first, second):
  stores = [n for n, line in enumerate(lines) if line.startswith("copy") and "slot=-1" in line]
  return sum(1 for line in lines[stores[first] + 1:stores[second]] if line == "awaitstores read_only=False pending=0")


def test_a_tma_store_over_elements_still_being_stored_waits_for_that_store():
  lines = _ops(store_one_window_twice, S((16, 128), F32))
  assert _full_waits_between(lines, 0, 1) == 1
  assert _full_waits_between(lines, 1, 2) == 0


def test_stores_to_one_window_in_an_unrolled_loop_are_ordered():
  lines = _ops(store_each_trip_to_the_programs_window, S((256, 128), F32))
  assert [_full_waits_between(lines, t, t + 1) for t in range(3)] == [1, 1, 1]


def test_stores_a_loop_index_moves_and_atomic_adds_are_not_ordered():
  lines = _ops(store_where_the_loop_moves, S((64, 128), F32), S((), jnp.int32))
  assert "awaitstores read_only=False pending=0" not in lines
  lines = _ops(tma_add_twice, S((8, 128), F32))
  assert "awaitstores read_only=False pending=0" not in lines


def _store_cases():
  x = rand.normal(rand.key(3), (256, 128), F32)
  return [(store_one_window_twice, (x[:16],), jnp.concatenate([x[8:16], x[8:16]])),
          (store_each_trip_to_the_programs_window, (x,), x.reshape(4, 4, 16, 128)[:, 3].reshape(64, 128)),
          (tma_add_twice, (x[:8],), x[:8] * 2)]


@pytest.mark.parametrize("case", range(3))
def test_tma_store_orderings_interpret(case):
  kernel, args, want = _store_cases()[case]
  np.testing.assert_allclose(kernel(*args, interpret=True), want, rtol=1e-6)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(3))
def test_tma_store_orderings_gpu(case):
  kernel, args, want = _store_cases()[case]
  for _ in range(10):
    np.testing.assert_allclose(jax.jit(kernel)(*args), want, rtol=1e-6)
