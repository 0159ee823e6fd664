"""Probe 61a: tensor-core operands in flight that interpret mode passed and the GPU may not (design note 203).

WGMMA reads a register A operand and writes its accumulator until a `wgmma.wait_group` retires it, and PTX orders
other instructions' accesses of those registers against it only through `wgmma.fence` / `wgmma.wait_group`. Three
classes, each fixed in the general rule and checked here on the CPU (the GPU twins at the end):

- a dot issued again (a pipelined loop's next trip) with an accumulator other than its running result (`ml.dot(a_s,
  b_s)`, zeros; `ml.dot(a_s, b_s, c)`, a tile set before the loop) writes that accumulator into the registers the
  previous trip's instance still writes: it retires first (frontend/sync.py `acc_rewritten`); interpret mode reports
  the race (MG951, lowering/interpret.py `check_dot_acc`);
- a dot result a pipelined loop yields twice (`acc = ml.dot(...); last = acc`) is copied at the back edge while
  WGMMA writes it, and the code after the loop read one of the two without a wait: it retires at the back edge
  (frontend/sync_loops.py `back_edge_wait`, `carried_dots`); interpret mode reports the copy (`check_dot_yield`);
- an accumulator other instructions read since its dot wrote it (a running row max) was chained into the next dot
  without a `wgmma.fence` between: lowering/mma.py now fences it (frontend/acc_fences.py).

tests/async_fuzz.py generates kernels of operands in flight in every structure the language allows; a fixed sample
runs here against its NumPy references (interpret mode, some exported for CUDA).
"""
import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import async_fuzz
import mgpu_dsl as mg
from mgpu_dsl import language as ml
from mgpu_dsl.frontend import sync, sync_loops
from probe_util import export

S = jax.ShapeDtypeStruct
A, B = (64, 256), (256, 64)


def _ints(shape, seed):
  return (np.random.default_rng(seed).integers(-4, 5, shape) / 2).astype(jnp.float16)


def _f(x):
  return np.asarray(x, np.float64)


# ---------------------------------------------------------------------- class 1: a fresh accumulator
@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def fresh_acc(a, b, o, *, init: ml.constexpr = "zeros"):
  """The last K block's product (plus 1 with init="tile"): each trip's dot starts from a fresh accumulator (zeros, or
  a tile set before the loop), its result carried out of the loop."""
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  c = ml.full((a.shape[0], b.shape[1]), 1.0, jnp.float32)
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    if init == "zeros":
      acc = ml.dot(a_s, b_s)
    else:
      acc = ml.dot(a_s, b_s, c)
  o[...] = acc


def _fresh_ref(a, b, init):
  return _f(a)[:, -64:] @ _f(b)[-64:] + (1.0 if init == "tile" else 0.0)


def _body(ir_text, marker="stages=2"):
  """The ops of the pipelined loop's body (its own lines only, not nested ones)."""
  lines = [l.rstrip() for l in ir_text.splitlines()]
  top = next(i for i, l in enumerate(lines) if " = for " in l and marker in l)
  indent = len(lines[top + 2]) - len(lines[top + 2].lstrip())
  body = []
  for l in lines[top + 2:]:
    if len(l) - len(l.lstrip()) < indent:
      break
    if len(l) - len(l.lstrip()) == indent:
      body.append(l.strip())
  return body, lines


@pytest.mark.parametrize("init", ["zeros", "tile"])
def test_a_fresh_accumulator_waits_for_the_previous_trips_dot(init):
  body, _ = _body(fresh_acc.typed_ir(S(A, jnp.float16), S(B, jnp.float16), init=init))
  dot = next(i for i, l in enumerate(body) if " = dot " in l)
  assert body[dot - 1].startswith("dotwait pending=0"), body[:dot + 1]
  a, b = _ints(A, 1), _ints(B, 2)
  np.testing.assert_array_equal(_f(fresh_acc(a, b, init=init, interpret=True)), _fresh_ref(a, b, init))
  export(fresh_acc, a, b, init=init)


def test_a_chained_accumulator_keeps_its_dot_in_flight():
  """The common case is untouched: `acc = ml.dot(a_s, b_s, acc)` issues the next trip's dot with the previous one
  running (PTX orders a chain of one shape itself)."""
  body, _ = _body(chained.typed_ir(S(A, jnp.float16), S(B, jnp.float16)))
  dot = next(i for i, l in enumerate(body) if " = dot " in l)
  assert not any(l.startswith("dotwait") for l in body[:dot]), body[:dot + 1]


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def chained(a, b, o):
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  o[...] = acc


@mg.mgpu_kernel(out_shape=lambda a, b: S((a.shape[0], b.shape[1]), jnp.float32))
def dead_last(a, b, o):
  """A product nothing reads, issued after the chained one: it runs across the back edge."""
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
    _ = ml.dot(a_s, b_s)
  o[...] = acc


def test_a_dead_product_issued_again_retires_its_previous_instance_only():
  """Its group is of unknown value (no yield, no read): the next trip's instance waits for it (pending=1: the
  chained accumulator's dot keeps running)."""
  body, _ = _body(dead_last.typed_ir(S(A, jnp.float16), S(B, jnp.float16)))
  dots = [i for i, l in enumerate(body) if " = dot " in l]
  assert body[dots[1] - 1].startswith("dotwait pending=1") and not body[dots[0] - 1].startswith("dotwait"), body
  a, b = _ints(A, 9), _ints(B, 10)
  np.testing.assert_array_equal(_f(dead_last(a, b, interpret=True)), _f(a) @ _f(b))


def _without(monkeypatch, kernels, **rules):
  """Switch the named rules off (tracing afresh); returns a cleanup."""
  for name, fn in rules.items():
    owner = sync.SyncPass if hasattr(sync.SyncPass, name) else sync_loops.LoopEntry
    monkeypatch.setattr(owner, name, fn)
  monkeypatch.setenv("MGPU_DSL_CACHE_DIR", "off")
  for k in kernels:
    k.cache_clear()


@pytest.mark.parametrize("init", ["zeros", "tile"])
def test_interpret_mode_reports_a_fresh_accumulator_race_without_the_rule(init, monkeypatch):
  _without(monkeypatch, [fresh_acc], acc_rewritten=staticmethod(lambda st, o: None))
  try:
    with pytest.raises(mg.KernelError) as e:
      fresh_acc(_ints(A, 1), _ints(B, 2), init=init, interpret=True)
  finally:
    fresh_acc.cache_clear()
  assert e.value.code == "MG951" and "issued again while its previous instance may still be running" in e.value.message
  want = "acc = ml.dot(a_s, b_s)" if init == "zeros" else "acc = ml.dot(a_s, b_s, c)"
  assert open(__file__).read().splitlines()[e.value.lineno - 1].strip() == want
  assert any("the running ml.dot" in n for n in e.value.notes)


# ---------------------------------------------------------------------- class 2: a result yielded twice
@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), jnp.float32),) * 2)
def yielded_twice(a, b, o, o2):
  """`last = acc` after the dot: the loop carries the running result twice."""
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  last = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
    last = acc
  o[...] = acc
  o2[...] = last


def test_a_result_yielded_twice_retires_at_the_back_edge_and_is_awaited_after_the_loop():
  body, lines = _body(yielded_twice.typed_ir(S(A, jnp.float16), S(B, jnp.float16)))
  assert body[-1].startswith("yield ") and body[-2].startswith("dotwait pending=0"), body[-4:]
  first_store = next(i for i, l in enumerate(lines) if l.strip().startswith("store "))
  assert lines[first_store - 1].strip().startswith("dotwait pending=0"), lines[first_store - 2:first_store + 1]
  a, b = _ints(A, 3), _ints(B, 4)
  want = _f(a) @ _f(b)
  for got in yielded_twice(a, b, interpret=True):
    np.testing.assert_array_equal(_f(got), want)
  export(yielded_twice, a, b)


def test_interpret_mode_reports_the_copy_of_a_running_result_without_the_rule(monkeypatch):
  _without(monkeypatch, [yielded_twice], back_edge_wait=lambda self, st, o, block: self.a_rewritten(
      st, {a.id for a in block.args}))
  try:
    with pytest.raises(mg.KernelError) as e:
      yielded_twice(_ints(A, 3), _ints(B, 4), interpret=True)
  finally:
    yielded_twice.cache_clear()
  assert e.value.code == "MG951" and "is handed on (a copy of it is read) before its ml.dot finished" in e.value.message


@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), jnp.float32),) * 2)
def swapped(a, b, o, o2):
  """Two accumulators taking turns: `acc, acc2 = ml.dot(a_s, b_s, acc2), acc` (the even and the odd K blocks)."""
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  acc2 = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc, acc2 = ml.dot(a_s, b_s, acc2), acc
  o[...] = acc
  o2[...] = acc2


def test_a_result_carried_into_a_value_still_live_retires_at_the_back_edge():
  """The back edge swaps the two accumulators' registers, copying the running result: it retires first."""
  body, _ = _body(swapped.typed_ir(S(A, jnp.float16), S(B, jnp.float16)))
  assert body[-1].startswith("yield ") and body[-2].startswith("dotwait pending=0"), body[-4:]
  a, b = _ints(A, 7), _ints(B, 8)
  parts = [_f(a)[:, k * 64:(k + 1) * 64] @ _f(b)[k * 64:(k + 1) * 64] for k in range(4)]
  got, got2 = swapped(a, b, interpret=True)
  np.testing.assert_array_equal(_f(got), parts[1] + parts[3])
  np.testing.assert_array_equal(_f(got2), parts[0] + parts[2])


def test_interpret_mode_reports_the_swap_of_a_running_result_without_the_rule(monkeypatch):
  _without(monkeypatch, [swapped], back_edge_wait=lambda self, st, o, block: self.a_rewritten(
      st, {a.id for a in block.args}))
  try:
    with pytest.raises(mg.KernelError) as e:
      swapped(_ints(A, 7), _ints(B, 8), interpret=True)
  finally:
    swapped.cache_clear()
  assert e.value.code == "MG951" and "is handed on (a copy of it is read)" in e.value.message


# ---------------------------------------------------------------------- class 3: an accumulator read between dots
@mg.mgpu_kernel(out_shape=lambda a, b: (S((a.shape[0], b.shape[1]), jnp.float32), S((a.shape[0],), jnp.float32)))
def running_max(a, b, o, mx_out, *, read: ml.constexpr = True):
  """The running row max of the accumulator, read after each trip's dot (with read=False: not read)."""
  a_s, b_s = ml.smem((a.shape[0], 64)), ml.smem((64, b.shape[1]))
  acc = ml.zeros((a.shape[0], b.shape[1]), jnp.float32)
  mx = ml.full((a.shape[0],), -jnp.inf, jnp.float32)
  for k in ml.range(a.shape[1] // 64, stages=2):
    ml.copy(a.at[:, ml.ds(k * 64, 64)], a_s)
    ml.copy(b.at[ml.ds(k * 64, 64)], b_s)
    acc = ml.dot(a_s, b_s, acc)
    if read:
      mx = ml.maximum(mx, ml.max(acc, axis=1))
  o[...] = acc
  mx_out[...] = mx


def _loop_ops(mlir):
  """The pipelined loop's wgmma events in the module, in order (the last scf.for holding an mma_async)."""
  ev = []
  for l in mlir.splitlines():
    m = re.search(r"wgmma\.fence|wgmma\.mma_async|wait\.group\.sync\.aligned \d|scf\.for|scf\.yield", l)
    if m and (not ev or ev[-1] != m.group(0)):
      ev.append(m.group(0))
  top = max(i for i, e in enumerate(ev) if e == "scf.for" and "wgmma.mma_async" in ev[i:])
  return ev[top:ev.index("scf.yield", top)]


@pytest.mark.parametrize("read", [True, False])
def test_an_accumulator_read_between_dots_is_fenced_before_the_next(read):
  shapes = S(A, jnp.float16), S(B, jnp.float16)
  ops = _loop_ops(running_max.mlir(*shapes, read=read))
  dot = ops.index("wgmma.mma_async")
  assert ("wgmma.fence" in ops[:dot]) == read, ops
  a, b = _ints(A, 5), _ints(B, 6)
  got, mx = running_max(a, b, read=read, interpret=True)
  np.testing.assert_array_equal(_f(got), _f(a) @ _f(b))
  if read:
    sums = np.cumsum([_f(a)[:, k * 64:(k + 1) * 64] @ _f(b)[k * 64:(k + 1) * 64] for k in range(4)], axis=0)
    np.testing.assert_array_equal(_f(mx), sums.max(axis=(0, 2)))


@mg.mgpu_kernel(out_shape=lambda a, b, c, d: S((a.shape[0], b.shape[1]), jnp.float32))
def mixed_shapes(a, b, c, d, o):
  """a @ b (float16: k16 instructions) and then c @ d.T (float8: k32) into one accumulator."""
  a_s, b_s, c_s, d_s = (ml.smem(x.shape, x.dtype) for x in (a, b, c, d))
  for x, x_s in ((a, a_s), (b, b_s), (c, c_s), (d, d_s)):
    ml.copy(x, x_s)
  acc = ml.dot(a_s, b_s)
  acc = ml.dot(c_s, d_s.T, acc)
  o[...] = acc


def test_an_accumulator_from_a_dot_of_another_shape_is_fenced():
  """PTX exempts from wgmma.fence only a chain of dots of one shape: k16 then k32 gets a fence between."""
  r = np.random.default_rng(9)
  a, b = ((r.integers(-3, 4, (64, 64)) / 2).astype(jnp.float16) for _ in range(2))
  c, d = ((r.integers(-3, 4, (64, 64)) / 2).astype(jnp.float8_e4m3fn) for _ in range(2))
  ev = re.findall(r"wgmma\.fence|k16\.f32|k32\.f32", mixed_shapes.mlir(*(S(x.shape, x.dtype) for x in (a, b, c, d))))
  first = ev.index("k32.f32")
  assert ev[first - 1] == "wgmma.fence" and "k16.f32" in ev[:first - 1], ev
  want = _f(a) @ _f(b) + _f(c) @ _f(d).T
  np.testing.assert_array_equal(_f(mixed_shapes(a, b, c, d, interpret=True)), want)


# ---------------------------------------------------------------------- the fuzzer's sample
SAMPLE = [0, 5, 9, 11, 14, 17, 22, 26, 30, 33]


def _forced():
  """Kernels of each class's structure, drawn with the fuzzer's plans."""
  return [("stages", "tma", "fresh"), ("persistent", "load", "fresh_bias"), ("stages", "chain", "copy"),
          ("stages", "load", "swap"), ("outer", "chain_late", "old"), ("ws", "tma", "dead"),
          ("ws", "chain_late", "mid"), ("outer", "if", "rescale"), ("pingpong", "reuse", "two"),
          ("inner", "carried", "cond"), ("stages", "masked", "plus")]


def _gen(plan):
  """The first of the fuzzer's kernels of this (loop, A, accumulator) plan with two trips or more."""
  return next(g for g in (async_fuzz.Gen(s, *plan) for s in range(50)) if "ml.range(1," not in g.source)


@pytest.mark.parametrize("seed", SAMPLE)
def test_fuzz_sample(seed):
  g = async_fuzz.Gen(seed)
  assert async_fuzz.run(g, build=seed % 3 == 0) == ("ok", ""), (seed, g.source)


@pytest.mark.parametrize("plan", _forced(), ids="-".join)
def test_fuzz_structures(plan):
  g = _gen(plan)
  assert async_fuzz.run(g, build=False) == ("ok", ""), (plan, g.source)


def test_fuzz_reference_tells_a_wrong_result():
  """The comparison fails where a kernel computes otherwise: a sample's product doubled is "wrong"."""
  g = _gen(("stages", "load", "chain"))
  k = next(k for k, line in enumerate(g.lines) if "= ml.dot(" in line)
  g.lines[k] = g.lines[k].replace("= ml.dot(", "= 2 * ml.dot(")
  assert async_fuzz.run(g, build=False)[0] == "wrong"


def test_fuzz_calls_a_missing_wait_a_race(monkeypatch):
  """A kernel whose wait the compiler leaves out is "race" (MG951), not "refused"."""
  _without(monkeypatch, [], acc_rewritten=staticmethod(lambda st, o: None))
  assert async_fuzz.run(_gen(("stages", "tma", "fresh")), build=False)[0] == "race"


def test_the_gpu_script_runs_a_seed_without_a_gpu():
  sys.path.insert(0, os.path.join(os.path.dirname(__file__), os.pardir, "benchmarks"))
  import probe_async_fuzz
  cls, loop, tags, detail = probe_async_fuzz.run_seed(SAMPLE[1], None, False, 1)
  assert (cls, detail) == ("ok", "") and loop == async_fuzz.Gen(SAMPLE[1]).loop and "dot" in tags


# ---------------------------------------------------------------------- on the GPU
@pytest.mark.gpu
@pytest.mark.parametrize("init", ["zeros", "tile"])
def test_gpu_fresh_accumulator(init):
  a, b = _ints(A, 11), _ints(B, 12)
  np.testing.assert_array_equal(_f(jax.jit(lambda x, y: fresh_acc(x, y, init=init))(a, b)), _fresh_ref(a, b, init))


@pytest.mark.gpu
def test_gpu_yielded_twice():
  a, b = _ints(A, 13), _ints(B, 14)
  for got in jax.jit(yielded_twice)(a, b):
    np.testing.assert_array_equal(_f(got), _f(a) @ _f(b))


@pytest.mark.gpu
def test_gpu_swapped():
  a, b = _ints(A, 17), _ints(B, 18)
  parts = [_f(a)[:, k * 64:(k + 1) * 64] @ _f(b)[k * 64:(k + 1) * 64] for k in range(4)]
  got, got2 = jax.jit(swapped)(a, b)
  np.testing.assert_array_equal(_f(got), parts[1] + parts[3])
  np.testing.assert_array_equal(_f(got2), parts[0] + parts[2])


@pytest.mark.gpu
def test_gpu_running_max():
  a, b = _ints(A, 15), _ints(B, 16)
  got, mx = jax.jit(running_max)(a, b)
  np.testing.assert_array_equal(_f(got), _f(a) @ _f(b))
  np.testing.assert_array_equal(_f(mx), _f(running_max(a, b, interpret=True)[1]))


@pytest.mark.gpu
@pytest.mark.parametrize("plan", _forced(), ids="-".join)
def test_gpu_fuzz_structures(plan):
  g = _gen(plan)
  got = jax.jit(async_fuzz.diff_fuzz.load(g))(*g.args)
  got = got if isinstance(got, (tuple, list)) else (got,)
  for x, w in zip(got, g.refs):
    assert async_fuzz.compare(np.asarray(x), w, g.tol_dtype) is None, plan
