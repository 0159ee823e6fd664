"""What a loop body may assume at its top (frontend/sync_loops.py, design note 196): the state the previous
trip left at its end, found as a fixed point, not everything the body touches. A trip that commits its
SMEM writes (a barrier) after its last read of a buffer leaves nothing to order: the next trip writes that
buffer with no barrier of its own. A trip that writes a buffer after its last barrier leaves it unordered:
the next trip's first read still meets the others first."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
N = 3
SPECS = (S((128, 64), jnp.float16), S((64, 64), jnp.float16), S((128, 128), jnp.float16))


def _out(a, b, c):
  return S((N, 128, 64), jnp.float32)


@mg.mgpu_kernel(out_shape=_out, block=256)
def commit_last(a, b, c, o):
  """Each trip writes t_s from registers, a dot of both warpgroups reads it, then o_s is committed
  and stored: the commit orders the dot's reads before the next trip's write."""
  a_s, b_s, c_s = ml.smem((128, 64)), ml.smem((64, 64)), ml.smem((128, 128))
  t_s = ml.smem((128, 64))
  o_s = ml.smem((128, 64), jnp.float32)
  ml.copy(a, a_s)
  ml.copy(b, b_s)
  ml.copy(c, c_s)
  for j in range(N):
    x = ml.dot(a_s, b_s) * (j + 1.0)
    t_s[...] = x.astype(jnp.float16)
    y = ml.dot(c_s, t_s)
    o_s[...] = y
    ml.copy(o_s, o.at[j])


@mg.mgpu_kernel(out_shape=_out, block=256)
def write_last(a, b, c, o):
  """Each trip reads t_s (the previous trip's) by a dot and writes it again after its commit:
  the next trip's dot must meet the writers first."""
  b_s, c_s = ml.smem((64, 64)), ml.smem((128, 128))
  t_s = ml.smem((128, 64))
  o_s = ml.smem((128, 64), jnp.float32)
  ml.copy(a, t_s)
  ml.copy(c, c_s)
  ml.copy(b, b_s)
  for j in range(N):
    y = ml.dot(c_s, t_s)
    o_s[...] = y
    ml.copy(o_s, o.at[j])
    t_s[...] = (y * 0.25).astype(jnp.float16)


def reference(kernel, a, b, c):
  a, b, c = (np.asarray(x, np.float32) for x in (a, b, c))
  r16 = lambda x: x.astype(np.float16).astype(np.float32)
  out, t = [], a
  for j in range(N):
    if kernel is commit_last:
      t = r16((a @ b) * (j + 1.0))
    y = c @ t
    out.append(y)
    t = r16(y * 0.25)
  return np.stack(out)


def inputs(key=0):
  ks = rand.split(rand.key(key), 3)
  return tuple((rand.normal(k, s.shape) * 0.125).astype(s.dtype) for k, s in zip(ks, SPECS))


def _body(kernel):
  lines = [l.strip() for l in kernel.typed_ir(*SPECS).splitlines()]
  top = next(i for i, l in enumerate(lines) if " = for " in l or l.startswith("for "))
  end = next(i for i in range(top, len(lines)) if lines[i].startswith("yield"))
  return lines[top + 1:end]


def _meets(ops):
  return [l for l in ops if l.split()[0] in ("barrier", "commitshared", "awaitstores")]


def test_a_trip_ending_in_a_commit_writes_the_next_trip_with_no_barrier_of_its_own():
  ops = _body(commit_last)
  t_store = next(i for i, l in enumerate(ops) if l.startswith("store ref=") and "float32" not in l
                 and "start_multiple" in l)
  assert not _meets(ops[:t_store]), ops[:t_store + 1]
  assert [l.split()[0] for l in _meets(ops)].count("commitshared") == 2, _meets(ops)   # t_s for the dot, o_s


def test_a_trip_ending_in_a_write_meets_before_the_next_trip_reads():
  ops = _body(write_last)
  first_dot = next(i for i, l in enumerate(ops) if "= dot " in l)
  assert any(l.startswith("commitshared") for l in ops[:first_dot]), ops[:first_dot + 1]


@pytest.mark.parametrize("kernel", [commit_last, write_last], ids=["commit_last", "write_last"])
def test_interpret_mode_matches_numpy(kernel):
  args = inputs()
  np.testing.assert_allclose(np.asarray(kernel(*args, interpret=True)), reference(kernel, *args),
                             rtol=2e-2, atol=2e-2)


@pytest.mark.parametrize("kernel", [commit_last, write_last], ids=["commit_last", "write_last"])
def test_exports_for_cuda(kernel):
  exp = jax.export.export(jax.jit(kernel), platforms=["cuda"])(*SPECS)
  assert "mosaic_gpu" in exp.mlir_module()


@pytest.mark.gpu
@pytest.mark.parametrize("kernel", [commit_last, write_last], ids=["commit_last", "write_last"])
def test_gpu_matches_numpy(kernel):
  args = inputs(1)
  np.testing.assert_allclose(np.asarray(jax.jit(kernel)(*args)), reference(kernel, *args), rtol=2e-2, atol=2e-2)
