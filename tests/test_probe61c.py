"""Probe 61c: tensor-core operands in flight in the shapes probe 61a's fuzzer did not draw (design note 205).

tests/async_fuzz2.py draws int8 / float8 / TF32 register A operands, several warpgroups, A sliced, concatenated or
masked by `jnp.where`, dots in an `ml.static_range` of a pipelined body, accumulators carried through `lax.fori_loop`
and while loops, and epilogues reading the accumulator under masks. Classes found, each fixed in the general rule:

- a loop carrying an 8-bit WGMMA-layout tensor (a register A operand loaded before the loop and changed each trip)
  failed to build (MG900, Mosaic GPU's accumulator fence takes no two-byte register): lowering/kernel.py `carried`
  keeps it a FragmentedArray;
- a column slice of a loop-carried register tensor that no dot reads from registers (A of a small dot the compiler
  pads through SMEM) was MG204: frontend/layouts.py gives a sliced tensor the tensor-core layout;
- interpret mode could not see a carried value read after the dot whose running result takes its place at the back
  edge (probe 61a's gap): lowering/interpret.py `check_dot_yield` now reports it (MG951) from the values read since
  the dot was issued.
"""
import os
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import async_fuzz2
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import sync_loops
from probe_util import export

S = jax.ShapeDtypeStruct


def _f(x):
  return np.asarray(x, np.float64)


def _vals(shape, seed, dt):
  r = np.random.default_rng(seed)
  v = r.integers(-8, 9, shape) if dt == jnp.int8 else r.integers(-7, 8, shape) / 2
  return np.asarray(v, np.float32).astype(dt)


# ---------------------------------------------------------------------- class 1: an 8-bit register A carried
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[0]), jnp.int32 if a.dtype == jnp.int8 else jnp.float32))
def carried_a8(a, b, o):
  """A loaded once before the loop, negated (int8) or halved (float8) after each trip's dot: the loop carries an
  8-bit register A operand."""
  acc_dt = jnp.int32 if a.dtype == jnp.int8 else jnp.float32
  b_s = ml.smem((b.shape[0], 64), b.dtype)
  acc = ml.zeros((a.shape[0], b.shape[0]), acc_dt)
  a_reg = a.at[:, ml.ds(0, 64)][...]
  for k in ml.range(b.shape[1] // 64, stages=2):
    ml.copy(b.at[:, ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_reg, b_s.T, acc)
    if a.dtype == jnp.int8:
      a_reg = -a_reg
    else:
      a_reg = (a_reg.astype(jnp.float32) * 0.5).astype(a.dtype)
  o[...] = acc


def _carried_ref(a, b, dt):
  a0, out = _f(a)[:, :64], 0
  for k in range(b.shape[1] // 64):
    out = out + (a0 * (-1 if dt == jnp.int8 else 0.5) ** k) @ _f(b)[:, k * 64:(k + 1) * 64].T
  return out


DT8 = [jnp.int8, jnp.float8_e4m3fn, jnp.float8_e5m2]


@pytest.mark.parametrize("dt", DT8, ids=lambda d: jnp.dtype(d).name)
def test_a_loop_carries_an_eight_bit_register_a(dt):
  """Was MG900 on the CUDA build (NotImplementedError(2) in Mosaic GPU's optimization barrier)."""
  a, b = _vals((128, 64), 1, dt), _vals((64, 192), 2, dt)
  np.testing.assert_array_equal(_f(carried_a8(a, b, interpret=True)), _carried_ref(a, b, dt))
  export(carried_a8, a, b)


# ---------------------------------------------------------------------- class 2: a slice of a carried tensor
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def sliced_carried(a, b, o):
  """A (128, 32) register tile carried and halved each trip, its two 16-column halves the A of two (k=16, n=16)
  dots whose B is read into registers: dots the compiler pads through SMEM, so no dot reads the tile from registers."""
  b_s = ml.smem((32, 16), b.dtype)
  acc = ml.zeros((a.shape[0], 16), jnp.float32)
  a_reg = a[...]
  for k in ml.range(b.shape[0] // 32, stages=2):
    ml.copy(b.at[ml.ds(k * 32, 32)], b_s)
    for hh in ml.static_range(2):
      acc += ml.dot(a_reg[:, hh * 16:(hh + 1) * 16], b_s[...][hh * 16:(hh + 1) * 16, :])
    a_reg = (a_reg.astype(jnp.float32) * 0.5).astype(a.dtype)
  o[...] = acc


def test_a_column_slice_of_a_carried_tensor_takes_the_tensor_core_layout():
  """Was MG204 ('x[:, a:b] slices register tensors in the tensor-core layout ... a_reg is in the strided layout')."""
  a, b = _vals((128, 32), 3, jnp.float16), _vals((96, 16), 4, jnp.float16)
  want = sum((_f(a) * 0.5 ** k) @ _f(b)[k * 32:(k + 1) * 32] for k in range(3))
  np.testing.assert_array_equal(_f(sliced_carried(a, b, interpret=True)), want)
  export(sliced_carried, a, b)


def test_a_slice_of_a_tensor_not_a_tile_stays_located():
  """A slice the tensor-core layout cannot hold (rows not a multiple of 64) is still the located MG204."""
  @mg.mgpu_kernel(out_shape=lambda x: S((32, 16), jnp.float32))
  def narrow(x, o):
    t = x[...]
    for k in range(2):
      o[...] = t[:, 0:16]
      t = t * 2.0
  with pytest.raises(mg.KernelError) as e:
    narrow.check(S((32, 64), jnp.float32))
  assert e.value.code == "MG204" and "t[:, 0:16]" in open(__file__).read().splitlines()[e.value.lineno - 1]


# ---------------------------------------------------------------------- class 3: a carried value read after its dot
@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), jnp.float32), S((a.shape[0],), jnp.float32)))
def old_read(a, b, o, m):
  """The row max of the value each trip's dot chains, read after the dot: the result cannot take its registers."""
  a_s, b_s = ml.smem((a.shape[0], 64), a.dtype), ml.smem((64, b.shape[1]), b.dtype)
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  mx = ml.full((a.shape[0],), -jnp.inf, jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    old = acc
    acc = ml.dot(a_s, b_s, acc)
    mx = ml.maximum(mx, ml.max(old, axis=1))
  o[...] = acc
  m[...] = mx


def _old_ref(a, b):
  acc, mx = 0, np.full(a.shape[0], -np.inf)
  for k in range(a.shape[1] // 64):
    mx = np.maximum(mx, np.max(np.broadcast_to(acc, (a.shape[0], b.shape[1])), axis=1))
    acc = acc + _f(a)[:, k * 64:(k + 1) * 64] @ _f(b)[k * 64:(k + 1) * 64]
  return acc, mx


def test_a_carried_value_read_after_its_dot_is_right_with_the_rule():
  a, b = _vals((64, 256), 5, jnp.float16), _vals((256, 64), 6, jnp.float16)
  got, mx = old_read(a, b, interpret=True)
  want, wmx = _old_ref(a, b)
  np.testing.assert_array_equal(_f(got), want)
  np.testing.assert_array_equal(_f(mx), wmx)


def test_interpret_mode_reports_a_carried_value_read_after_its_dot_without_the_rule(monkeypatch):
  """Probe 61a's gap: the back edge's copy of the running result was the sync rule's alone."""
  monkeypatch.setattr(sync_loops.LoopEntry, "back_edge_wait", lambda self, st, o, block: self.a_rewritten(
      st, {x.id for x in block.args}))
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", "off")
  old_read.cache_clear()
  try:
    with pytest.raises(mg.KernelError) as e:
      old_read(_vals((64, 256), 5, jnp.float16), _vals((256, 64), 6, jnp.float16), interpret=True)
  finally:
    old_read.cache_clear()
  assert e.value.code == "MG951"
  assert "takes the place of the carried acc, whose old value is read after the ml.dot is issued" in e.value.message
  assert any("acc = ml.dot(a_s, b_s, acc)" in open(__file__).read().splitlines()[int(n.split(":")[1]) - 1]
             for n in e.value.notes if n.startswith(__file__))


# ---------------------------------------------------------------------- the fuzzer
SAMPLE = [3, 17, 41, 2041, 2972]
PLANS = [dict(dt="int8", loop="fori", a_mode="carried", acc_mode="old"),
         dict(dt="float8_e4m3fn", loop="static", a_mode="concat", epi="mid"),
         dict(dt="float8_e5m2", loop="while", a_mode="where", epi="masked"),
         dict(dt="float32", loop="stages", a_mode="slice", wgs=3),
         dict(dt="int8", loop="stages", a_mode="masked", wgs=2, epi="rowsum"),
         dict(dt="bfloat16", loop="static", a_mode="carried", acc_mode="fresh", wgs=2),
         dict(dt="float16", loop="stages", a_mode="where", acc_mode="old", wgs=3),
         dict(dt="float32", loop="fori", a_mode="concat", epi="where")]


@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample(seed):
  g = async_fuzz2.Gen(seed)
  assert async_fuzz2.run(g, build=seed % 2 == 1) == ("ok", ""), (seed, g.source)


def _gen(plan):
  """The first kernel of this plan with two trips or more."""
  return next(g for g in (async_fuzz2.Gen(s, **plan) for s in range(50))
              if not any(t in g.source for t in ("(1, stages", "range(1)", "fori_loop(0, 1,", "k < 1:")))


@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "-".join(map(str, p.values())))
def test_fuzz_structures(plan):
  g = _gen(plan)
  assert async_fuzz2.run(g, build=False) == ("ok", ""), (plan, g.source)


def test_fuzz_reference_tells_a_wrong_result():
  g = _gen(PLANS[0])
  k = next(k for k, line in enumerate(g.lines) if "= ml.dot(" in line)
  g.lines[k] = g.lines[k].replace("= ml.dot(", "= 2 * ml.dot(")
  assert async_fuzz2.run(g, build=False)[0] == "wrong"


def test_the_gpu_script_runs_a_61c_seed_without_a_gpu():
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
  import probe_async_fuzz
  cls, loop, tags, detail = probe_async_fuzz.run_seed(SAMPLE[0], "61c", False, 2)
  assert (cls, detail) == ("ok", "") and loop == "61c:" + async_fuzz2.Gen(SAMPLE[0]).loop and "dot" in tags


# ---------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("dt", DT8, ids=lambda d: jnp.dtype(d).name)
def test_gpu_carried_eight_bit_a(dt):
  a, b = _vals((128, 64), 1, dt), _vals((64, 192), 2, dt)
  np.testing.assert_array_equal(_f(jax.jit(carried_a8)(a, b)), _carried_ref(a, b, dt))


@pytest.mark.gpu
def test_gpu_sliced_carried():
  a, b = _vals((128, 32), 3, jnp.float16), _vals((96, 16), 4, jnp.float16)
  want = sum((_f(a) * 0.5 ** k) @ _f(b)[k * 32:(k + 1) * 32] for k in range(3))
  np.testing.assert_array_equal(_f(jax.jit(sliced_carried)(a, b)), want)


@pytest.mark.gpu
def test_gpu_old_read():
  a, b = _vals((64, 256), 5, jnp.float16), _vals((256, 64), 6, jnp.float16)
  got, mx = jax.jit(old_read)(a, b)
  want, wmx = _old_ref(a, b)
  np.testing.assert_array_equal(_f(got), want)
  np.testing.assert_array_equal(_f(mx), wmx)


@pytest.mark.gpu
@pytest.mark.parametrize("plan", PLANS, ids=lambda p: "-".join(map(str, p.values())))
def test_gpu_fuzz_structures(plan):
  g = _gen(plan)
  import diff_fuzz
  kernel = diff_fuzz.load(g)
  for got, want in zip(jax.jit(kernel)(*g.args), g.refs):
    assert not async_fuzz2.compare(got, want, g.tol_dtype), (plan, g.source)
