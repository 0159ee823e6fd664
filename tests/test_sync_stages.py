"""A pipelined loop's first loads land in memory an earlier buffer used (the SMEM planner shares
memory between buffers of disjoint lifetimes): they wait for what may still read it, a dot, a TMA
store, other threads' register reads (probe 15: none of these waits was there). Also: a
warp-specialised loop whose stages registers read releases them after a warpgroup barrier, and a
multicast some CTAs of a cluster issue and their peers skip is a compile-time RaceError."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32, F16 = jnp.float32, jnp.float16


@mg.mgpu_kernel(out_shape=lambda x, y: (S((64, 128), F32), S((64, 128), F32)))
def read_then_stages(x, y, o1, o2):
  pre = ml.smem((64, 128))
  ml.copy(y, pre)
  o1[...] = pre[...] * 3                     # every thread reads pre ...
  x_s = ml.smem((64, 128))                   # ... whose memory the stages reuse
  acc = ml.zeros((64, 128), F32)
  for t in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    acc = acc + x_s[...]
  o2[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, y: (S((64, 128), F32), S((64, 128), F32)))
def store_then_stages(x, y, o1, o2):
  pre = ml.smem((64, 128))
  pre[...] = y[...] * 3
  ml.copy(pre, o1)                           # a TMA store still reading pre ...
  x_s = ml.smem((64, 128))
  acc = ml.zeros((64, 128), F32)
  for t in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    acc = acc + x_s[...]
  o2[...] = acc


@mg.mgpu_kernel(out_shape=lambda x, y: (S((64, 128), F32), S((64, 128), F32)))
def dot_then_stages(x, y, o1, o2):
  p_s, q_s = ml.smem((64, 64), F16), ml.smem((64, 128), F16)
  ml.copy(y.at[:, ml.ds(0, 64)], p_s)
  ml.copy(y, q_s)
  d = ml.dot(p_s, q_s)                       # a dot still reading p_s and q_s ...
  x_s = ml.smem((64, 128), F16)
  acc = ml.zeros((64, 128), F32)
  for t in ml.range(x.shape[0] // 64, stages=2):
    ml.copy(x.at[ml.ds(t * 64, 64)], x_s)
    acc = acc + x_s[...].astype(F32)
  o1[...] = d
  o2[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((128, 128), F32))
def two_pipelined_loops(a, b, c):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  n = a.shape[1] // 64
  for k in ml.range(n // 2, stages=3):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)              # the last dot still runs when ...
  for k in ml.range(n // 2, n, stages=3):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)   # ... these stages are loaded
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc * 0.5)
  c[...] = acc


def _ops(kernel, *specs):
  return [line.split("#")[0].strip() for line in kernel.typed_ir(*specs).splitlines()]


def _before_prologue(lines, nth=0):
  """The ops between the previous top-level op that is not scalar arithmetic and the nth
  pipelined loop's prologue (its `for ... stages=1`)."""
  starts = [i for i, line in enumerate(lines) if line.startswith("for ") and "stages=1" in line]
  i = starts[nth]
  return lines[i - 3:i]


X32, Y32 = S((256, 128), F32), S((64, 128), F32)


def test_the_first_loads_wait_for_other_threads_reading_the_memory():
  assert "barrier" in _before_prologue(_ops(read_then_stages, X32, Y32))


def test_the_first_loads_wait_for_a_tma_store_reading_the_memory():
  assert any(line.startswith("awaitstores") for line in _before_prologue(_ops(store_then_stages, X32, Y32)))


def test_the_first_loads_wait_for_a_dot_reading_the_memory():
  lines = _ops(dot_then_stages, S((256, 128), F16), S((64, 128), F16))
  assert "dotwait pending=0" in _before_prologue(lines)


def test_a_second_pipelined_loop_waits_for_the_first_ones_dots():
  lines = _ops(two_pipelined_loops, S((128, 512), F16), S((512, 128), F16))
  assert "dotwait pending=0" in _before_prologue(lines, 1)


def _cases():
  k = rand.split(rand.key(0), 4)
  x, y = rand.normal(k[0], (256, 128), F32), rand.normal(k[1], (64, 128), F32)
  xs = x.reshape(4, 64, 128).sum(0)
  a = rand.normal(k[2], (128, 512), F16)
  b = rand.normal(k[3], (512, 128), F16)
  fa, fb = a.astype(F32), b.astype(F32)
  acc = fa[:, :256] @ fb[:256]
  for j in range(4, 8):
    acc = acc * 0.5 + fa[:, j * 64:(j + 1) * 64] @ fb[j * 64:(j + 1) * 64]
  h, g = x.astype(F16), y.astype(F16)
  return [(read_then_stages, (x, y), (y * 3, xs)), (store_then_stages, (x, y), (y * 3, xs)),
          (dot_then_stages, (h, g), (g[:, :64].astype(F32) @ g[:64].astype(F32), h.astype(F32).reshape(4, 64, 128).sum(0))),
          (two_pipelined_loops, (a, b), acc)]


@pytest.mark.parametrize("case", range(4))
def test_stages_sharing_memory_interpret(case):
  kernel, args, want = _cases()[case]
  for got, w in zip(jax.tree.leaves(kernel(*args, interpret=True)), jax.tree.leaves(want)):
    np.testing.assert_allclose(got, w, rtol=2e-2, atol=2e-2)


@pytest.mark.gpu
@pytest.mark.parametrize("case", range(4))
def test_stages_sharing_memory_gpu(case):
  kernel, args, want = _cases()[case]
  for got, w in zip(jax.tree.leaves(jax.jit(kernel)(*args)), jax.tree.leaves(want)):
    np.testing.assert_allclose(got, w, rtol=2e-2, atol=2e-2)


# ---------------------------------------------------------------- warp-specialised stages read by registers
@mg.mgpu_kernel(out_shape=lambda a, b: (S((128, 128), F32), S((64, 128), F32)))
def ws_dot_and_register_read(a, b, c, d):
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  s = ml.zeros((64, 128), F32)
  for k in ml.range(a.shape[1] // 64, stages=2, warp_specialize=True):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s)
    acc = ml.dot(a_s, b_s, acc)
    s = s + b_s[...].astype(F32)            # other warps may still read b_s after this one's dot wait
  c[...] = acc
  d[...] = s


def test_a_warp_specialised_stage_read_by_registers_is_released_after_a_warpgroup_barrier():
  lines = _ops(ws_dot_and_register_read, S((128, 256), F16), S((256, 128), F16))
  releases = [line for line in lines if line.startswith("barrierarrive") and "index=%" in line]
  assert releases and all("sync=True" in line for line in releases)


# ---------------------------------------------------------------- multicast with peers skipping it
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), F32), grid=(2,), cluster=(2,))
def multicast_of_other_trip_counts(a, b, c):
  pid = ml.program_id(0)
  a_s, b_s = ml.smem((128, 64)), ml.smem((64, 128))
  acc = ml.zeros((128, 128), F32)
  for k in ml.range(2 + pid, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(pid * 128, 128), ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64), :], b_s, multicast=0)
    acc = ml.dot(a_s, b_s, acc)
  c.at[ml.ds(pid * 128, 128)][...] = acc


def test_a_multicast_one_peer_skips_is_a_race_at_compile_time():
  """Only interpret mode saw it; on the GPU the peer would never complete the loads' barriers."""
  with pytest.raises(mg.RaceError) as info:
    multicast_of_other_trip_counts.check(S((256, 192), F16), S((192, 128), F16))
  assert info.value.message.startswith("program (1, 0, 0) multicasts into its cluster here, but its peer"
                                       " (0, 0, 0) along cluster axis 0 does not")
