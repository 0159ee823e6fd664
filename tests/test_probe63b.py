"""Probe 63b: differential fuzzing of grid and schedule structures (tests/grid_fuzz.py, design note 214).

Its one class, a refusal worth lifting: a warp-specialised loop whose load windows (or whose enclosing `if`'s
condition) came from a conditional expression of scalars was MG503, "computed by an operation the producer
warpgroup cannot repeat": `j = t if i % 2 == 0 else n - 1 - t` (a snake order of tiles), `... if i < n else 0`, and
Triton's `if pid_m >= num_m or pid_n >= num_n: return` before the K loop (a run-time `or` is traced as an if that
yields a scalar). The producer now repeats such an if, its branches being scalar arithmetic and reads of input
elements (frontend/warp_specialize.py `_repeatable_if`, `_clone_deep`). Inputs are small whole numbers, so the
products are exact and the GPU, interpret mode and NumPy agree bit for bit.
"""
from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

import grid_fuzz
from probe_util import line_of

S = jax.ShapeDtypeStruct
F16, F32 = jnp.float16, jnp.float32
BM, BN, BK = 64, 64, 64


def _out(a, b, *args, **kw):
  return S((a.shape[0], b.shape[1]), F32)


def _grid(a, b, order, *, form):
  extra = 1 if form == "early_return" else 0      # a grid past the tiles in both axes: those programs return
  return (a.shape[0] // BM + extra, b.shape[1] // BN + 2 * extra)


@mg.mgpu_kernel(out_shape=_out, grid=_grid)
def product(a, b, order, o, *, form: ml.constexpr):
  """A tile of a @ b a program, B's window column from a conditional expression of scalars: a snake order (odd tile
  rows walk their columns backwards), Triton's `if ... or ...: return` before the K loop, or nested conditional
  expressions whose branches read an input's elements (a tile scheduler's table)."""
  i = ml.program_id(0)
  t = ml.program_id(1)
  if form == "snake":
    j = t if i % 2 == 0 else ml.num_programs(1) - 1 - t
  elif form == "table":
    j = (order[t] if i % 2 == 0 else ml.num_programs(1) - 1 - order[t]) if i < 100 or t > 100 else 0
  elif form == "registers":      # a reduction of a register tensor in a branch: still refused
    v = order[...]
    j = ml.sum(v) % 2 if i % 2 == 0 else t
  else:
    j = t
    if i >= a.shape[0] // BM or j >= b.shape[1] // BN:
      return
  a_s = ml.smem((BM, BK), jnp.float16)
  b_s = ml.smem((BK, BN), jnp.float16)
  acc = ml.zeros((BM, BN), jnp.float32)
  for k in ml.range(a.shape[1] // BK, stages=2, warp_specialize=True):
    ml.copy(a.at[ml.ds(i * BM, BM), ml.ds(k * BK, BK)], a_s)
    ml.copy(b.at[ml.ds(k * BK, BK), ml.ds(j * BN, BN)], b_s)
    acc = ml.dot(a_s, b_s, acc)
  o.at[ml.ds(i * BM, BM), ml.ds(j * BN, BN)][...] = acc


def _inputs(m=128, k=128, n=192, seed=0):
  r = np.random.default_rng(seed)
  a = jnp.asarray(r.integers(-3, 4, (m, k)), F16)
  b = jnp.asarray(r.integers(-3, 4, (k, n)), F16)
  order = jnp.asarray(r.permutation(n // BN), jnp.int32)
  return a, b, order


FORMS = ["snake", "early_return", "table"]


def _want(a, b):
  return np.asarray(a, np.float64) @ np.asarray(b, np.float64)


@pytest.mark.parametrize("form", FORMS)
def test_a_conditional_scalar_feeds_a_warp_specialised_loop(form):
  args = _inputs()
  specs = [S(x.shape, x.dtype) for x in args]
  text = product.typed_ir(*specs, form=form)
  producer = text[text.index("producer():"):text.index("consumer():")]
  assert "warpspecialize" in text and " = if cond=" in producer      # the producer repeats the if
  got = product(*args, form=form, interpret=True)
  np.testing.assert_array_equal(np.asarray(got, np.float64), _want(args[0], args[1]))
  jax.export.export(jax.jit(lambda *a: product(*a, form=form)), platforms=["cuda"])(*specs)


@pytest.mark.gpu
@pytest.mark.parametrize("form", FORMS)
def test_a_conditional_scalar_feeds_a_warp_specialised_loop_gpu(form):
  args = _inputs()
  got = jax.block_until_ready(jax.jit(lambda *a: product(*a, form=form))(*args))
  np.testing.assert_array_equal(np.asarray(got, np.float64), _want(args[0], args[1]))


def test_a_conditional_of_a_register_reduction_stays_refused():
  """The producer still cannot repeat a branch that reduces a register tensor: MG503 at the tensor's read."""
  specs = [S(x.shape, x.dtype) for x in _inputs()]
  with pytest.raises(mg.WarpSpecializeError) as info:
    product.typed_ir(*specs, form="registers")
  e = info.value
  line, col = line_of(product, "order[...]")
  assert (e.code, e.lineno, e.col_offset) == ("MG503", line, col)
  assert "computed by an operation the producer warpgroup cannot repeat" in e.message
  assert e.hint.startswith("compute them from program ids, loop indices, scalar arithmetic")


@pytest.mark.parametrize("seed", [2066, 2079])
def test_the_fuzzer_seeds_that_found_it(seed):
  """tests/grid_fuzz.py's map family: an early return (`if i >= gm or j >= gn`) and a snake order before a
  warp-specialised K loop, each against the NumPy reference of its plan, and built for CUDA."""
  g = grid_fuzz.Gen(seed, family="map")
  assert "kloop:ws" in g.tags
  assert grid_fuzz.run(g, build=True) == ("ok", "")


@pytest.mark.parametrize("family", sorted(set(grid_fuzz.FAMILIES)))
def test_grid_fuzz_seeds_of_each_family(family):
  """A few seeds of each family of tests/grid_fuzz.py against their NumPy references (the first also built for
  CUDA); the overlap family's racing plans refused with the codes the plan expects."""
  for k, seed in enumerate(range(7000, 7004)):
    g = grid_fuzz.Gen(seed, family=family)
    cls, detail = grid_fuzz.run(g, build=k == 0)
    assert cls == "ok", (seed, cls, detail, g.source)
    assert bool(g.race) == detail.startswith("refused as expected"), (seed, g.race, detail)


def test_grid_fuzz_calls_an_accepted_race_wrong():
  """The harness can fail: a plan whose writes are disjoint, marked as racing, runs, so it is "wrong"."""
  g = next(g for g in (grid_fuzz.Gen(s, family="overlap") for s in range(100)) if "overlap:control" in g.tags)
  assert grid_fuzz.run(g, build=False) == ("ok", "")
  g.race = "race"
  cls, detail = grid_fuzz.run(g, build=False)
  assert cls == "wrong" and detail.startswith("race accepted")
