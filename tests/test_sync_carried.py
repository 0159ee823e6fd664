"""Loads in flight across a plain runtime loop's back edge (frontend/sync.py, carried_loads):
a persistent kernel fetching its next row into the SMEM chunks this row frees."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import rand
import mgpu_dsl as mg
from mgpu_dsl import language as ml

S = jax.ShapeDtypeStruct
F32 = jnp.float32
SEG = 256


def _grid(x, *, chunks, programs):
  return (programs,)


@mg.mgpu_kernel(out_shape=lambda x, **meta: x, grid=_grid)
def row_softmax(x, out, *, chunks: ml.constexpr, programs: ml.constexpr):
  """Softmax of whole rows held in SMEM (x viewed as (n, d // SEG, SEG)), each CTA walking rows
  pid, pid + programs, ...: as chunk c of this row is written out, chunk c of the next is loaded."""
  pid = ml.program_id(0)
  n, segs = x.shape[0], x.shape[1]
  per = segs // chunks
  x_s = ml.smem((segs, SEG), x.dtype)
  for c in ml.static_range(chunks):
    ml.copy(x.at[pid, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
  for row in range(pid, n, programs):
    m = ml.full((per, SEG), -1e30, F32)
    for c in ml.static_range(chunks):
      m = ml.maximum(m, x_s.at[ml.ds(c * per, per)][...].astype(F32))
    top = ml.max(m)
    s = ml.zeros((per, SEG), F32)
    for c in ml.static_range(chunks):
      s = s + ml.exp(x_s.at[ml.ds(c * per, per)][...].astype(F32) - top)
    inv = 1.0 / ml.sum(s)
    nxt = ml.where(row + programs < n, row + programs, row)
    for c in ml.static_range(chunks):
      v = x_s.at[ml.ds(c * per, per)][...].astype(F32)
      out.at[row, ml.ds(c * per, per)][...] = (ml.exp(v - top) * inv).astype(out.dtype)
      ml.copy(x.at[nxt, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])


@mg.mgpu_kernel(out_shape=lambda x, **meta: x, grid=_grid)
def reread_after_reload(x, out, *, chunks: ml.constexpr, programs: ml.constexpr):
  """The body reads a chunk after reloading it: that load must land within the iteration."""
  pid = ml.program_id(0)
  n, segs = x.shape[0], x.shape[1]
  per = segs // chunks
  x_s = ml.smem((segs, SEG), x.dtype)
  for c in ml.static_range(chunks):
    ml.copy(x.at[pid, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
  for row in range(pid, n, programs):
    nxt = ml.where(row + programs < n, row + programs, row)
    for c in ml.static_range(chunks):
      v = x_s.at[ml.ds(c * per, per)][...]
      ml.copy(x.at[nxt, ml.ds(c * per, per)], x_s.at[ml.ds(c * per, per)])
      out.at[row, ml.ds(c * per, per)][...] = v + x_s.at[ml.ds(c * per, per)][...] * 0
  

def _body(lines):
  start = next(i for i, l in enumerate(lines) if " = for " in l)
  end = next(i for i, l in enumerate(lines) if l.startswith("yield") and i > start)
  return start, end


def _lines(kernel, *specs, **meta):
  return [l.strip() for l in kernel.typed_ir(*specs, **meta).splitlines()]


def test_next_rows_loads_take_the_first_loads_barriers_and_stay_in_flight_at_the_back_edge():
  lines = _lines(row_softmax, S((64, 32, SEG), F32), chunks=4, programs=8)
  start, end = _body(lines)
  before = [l.split("slot=")[1].split()[0] for l in lines[:start] if l.startswith("copy")]
  inside = [l.split("slot=")[1].split()[0] for l in lines[start:end] if l.startswith("copy")]
  assert before == inside == ["0", "1", "2", "3"]
  assert not lines[end - 1].startswith("waitload")
  waits = [l.split()[1] for l in lines[start:end] if l.startswith("waitload")]
  assert waits == ["slot=0", "slot=1", "slot=2", "slot=3"]          # each at its first read
  assert [l.split()[1] for l in lines[end + 1:] if l.startswith("waitload")] == waits  # after the loop


def test_a_window_read_after_its_reload_is_awaited_in_the_same_iteration():
  lines = _lines(reread_after_reload, S((64, 32, SEG), F32), chunks=4, programs=8)
  start, end = _body(lines)
  inside = [l.split("slot=")[1].split()[0] for l in lines[start:end] if l.startswith("copy")]
  assert inside == ["4", "5", "6", "7"]                              # barriers of their own
  assert [l for l in lines[start:end] if l.startswith("waitload")]


@pytest.mark.parametrize("n,d,programs,chunks", [(11, 4096, 4, 4), (3, 2048, 5, 8), (4, 256, 3, 1)])
@pytest.mark.parametrize("dtype", [F32, jnp.bfloat16], ids=str)
def test_carried_loads_interpret(dtype, n, d, programs, chunks):
  """11 rows over 4 CTAs: some take 3, some 2; 5 CTAs for 3 rows: the grid is clamped."""
  x = (rand.normal(rand.key(8), (n, d), F32) * 30).astype(dtype)
  programs = min(n, programs)
  got = row_softmax(x.reshape(n, d // SEG, SEG), chunks=min(chunks, d // SEG), programs=programs,
                    interpret=True).reshape(n, d)
  tol = 2e-5 if dtype == F32 else 2e-2
  np.testing.assert_allclose(np.asarray(got, np.float32), jax.nn.softmax(x.astype(F32), -1), rtol=tol, atol=tol)
  got = reread_after_reload(x.reshape(n, d // SEG, SEG), chunks=min(chunks, d // SEG), programs=programs,
                            interpret=True)
  np.testing.assert_array_equal(np.asarray(got), np.asarray(x.reshape(n, d // SEG, SEG)))


@pytest.mark.gpu
@pytest.mark.parametrize("n,d", [(1024, 32768), (300, 16384), (131, 8192)])
def test_carried_loads_gpu(n, d):
  x = rand.normal(rand.key(9), (n, d), F32) * 30
  f = jax.jit(lambda x: row_softmax(x.reshape(n, d // SEG, SEG), chunks=8, programs=min(n, mg.num_sms())))
  np.testing.assert_allclose(f(x).reshape(n, d), jax.nn.softmax(x, -1), rtol=2e-5, atol=2e-5)
