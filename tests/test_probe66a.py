"""Probe 66a: pipelined loops whose stages are padded to 128 bytes, and store buffers under SMEM pressure (session
54's frontend/pipeline_plan.py change), probed with tests/stage_fuzz.py. The classes found:

- a pipelined loop nested in another loop (a persistent grid's) whose loaded stages are TMA-stored back: the last
  trips' stores were still in flight when the next outer trip's prologue refilled their stages (MG951 in interpret
  mode, a race on the GPU); the prologue now awaits them;
- MG402 of a loop with store buffers counted a copy of each store buffer a stage, where the compiler keeps one: it
  suggested stages=1 (unpipelined) where stages=2 compiles, and an eighth of the tile where a half fits.
"""
import re

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import mgpu_dsl as mg
from mgpu_dsl import language as ml

import stage_fuzz

S = jax.ShapeDtypeStruct
F32 = jnp.float32


@mg.mgpu_kernel(out_shape=lambda v: v, grid=lambda v, *, n, outer, trips: (v.shape[0] // n // outer // trips,))
def copied_back(v, out, *, n: ml.constexpr, outer: ml.constexpr, trips: ml.constexpr, stages: ml.constexpr,
                ws: ml.constexpr):
  """Each program walks `outer` items of `trips` blocks of n elements, each loaded and TMA-stored back from its stage."""
  v_s = ml.smem((n,), v.dtype)
  for t in ml.range(outer):
    base = (ml.program_id(0) * outer + t) * trips
    for j in ml.range(trips, stages=stages, warp_specialize=ws):
      ml.copy(v.at[ml.ds((base + j) * n, n)], v_s)
      ml.copy(v_s, out.at[ml.ds((base + j) * n, n)])


@mg.mgpu_kernel(out_shape=lambda x: S(x.shape, jnp.float32))
def scaled(x, out, *, rows: ml.constexpr, stages: ml.constexpr):
  x_s = ml.smem((rows, x.shape[1]), x.dtype)
  o_s = ml.smem((rows, x.shape[1]), jnp.float32)
  for j in ml.range(x.shape[0] // rows, stages=stages):
    ml.copy(x.at[ml.ds(j * rows, rows)], x_s)
    o_s[...] = x_s[...] * 2.0
    ml.copy(o_s, out.at[ml.ds(j * rows, rows)])


@pytest.mark.parametrize("n,dtype,stages", [(24, np.float32, 2), (32, np.float32, 2), (40, np.float16, 3),
                                            (48, np.int8, 4), (56, np.int32, 3)])
def test_a_nested_loop_awaits_its_stores_before_refilling_their_stages(n, dtype, stages):
  v = (np.arange(2 * 2 * 3 * n) % 97).astype(dtype)
  kw = dict(n=n, outer=2, trips=3, stages=stages, ws=False)
  got = np.asarray(copied_back(v, interpret=True, **kw))     # was MG951: overwritten while a TMA store reads it
  np.testing.assert_array_equal(got, v)
  ir_text = copied_back.typed_ir(S(v.shape, v.dtype), **kw)
  outer = ir_text[ir_text.index("for start=0 stop=2"):]
  wait, load = outer.find("awaitstores read_only=True pending=0"), outer.find("copy src=")
  assert 0 <= wait < load, outer[:600]                     # the wait comes before the prologue's first load
  copied_back.check(S(v.shape, v.dtype), **kw)


@mg.mgpu_kernel(out_shape=lambda v: v)
def one_loop(v, out, *, n: ml.constexpr, stages: ml.constexpr):
  v_s = ml.smem((n,), v.dtype)
  for j in ml.range(v.shape[0] // n, stages=stages):
    ml.copy(v.at[ml.ds(j * n, n)], v_s)
    ml.copy(v_s, out.at[ml.ds(j * n, n)])


def test_a_loop_not_nested_keeps_its_waits():
  """Only the kernel's final wait awaits every store (the pipelined loop's own waits leave one in flight)."""
  ir_text = one_loop.typed_ir(S((96,), F32), n=24, stages=2)
  assert ir_text.count("pending=0") == 1 and ir_text.rstrip().splitlines()[-1].lstrip().startswith("awaitstores")
  v = np.arange(96, dtype=np.float32)
  np.testing.assert_array_equal(np.asarray(one_loop(v, n=24, stages=2, interpret=True)), v)


def test_cuda_export_of_a_nested_loop_storing_its_stages():
  f = jax.jit(lambda v: copied_back(v, n=24, outer=2, trips=3, stages=2, ws=False))
  text = jax.export.export(f, platforms=["cuda"])(S((24 * 12,), F32)).mlir_module()
  assert "mosaic_gpu" in text


def test_mg402_counts_one_copy_of_a_store_buffer_and_offers_the_stages_that_fit():
  spec = S((768, 256), F32)
  with pytest.raises(mg.SmemCapacityError) as info:
    scaled.check(spec, rows=64, stages=3)
  e = info.value
  assert e.code == "MG402"
  assert "for j in ml.range" in e.loc.source_line and e.loc.source_line[e.col_offset:].startswith("stages=")
  assert "x_s 64 KiB per stage, 3 copies; o_s 64 KiB, one copy" in e.message, e.message
  m = re.search(r"use stages=(\d)", e.hint)
  assert m and int(m.group(1)) == 2, e.hint                # it said stages=1, unpipelined
  assert "unpipelined" not in e.hint.split(";")[0]
  scaled.check(spec, rows=64, stages=int(m.group(1)))      # the stage count the hint names compiles
  x = np.random.default_rng(0).standard_normal((768, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(scaled(x, rows=64, stages=2, interpret=True)), x * 2)


def test_mg402_offers_the_largest_tile_that_fits_with_one_store_copy():
  spec = S((768, 256), F32)
  with pytest.raises(mg.SmemCapacityError) as info:
    scaled.check(spec, rows=128, stages=2)
  e = info.value
  assert e.code == "MG402" and e.loc.source_line.strip().startswith("x_s = ml.smem")
  m = re.search(r"x_s of shape \((\d+), 256\)", e.hint)
  assert m and int(m.group(1)) == 64, e.hint               # it said (32, 256), a quarter, where a half fits
  assert "step cut to 1/2" in e.hint
  scaled.check(spec, rows=int(m.group(1)), stages=2)       # the tile the hint names compiles


def test_mg402_of_a_store_buffer_too_big_even_once_says_so():
  with pytest.raises(mg.SmemCapacityError) as info:
    scaled.check(S((768, 256), F32), rows=192, stages=2)
  e = info.value
  assert e.code == "MG402" and "o_s 192 KiB, one copy" in e.message, e.message
  assert e.hint and "smaller tiles" in e.hint
  assert any("one copy of it" in n or "a copy of it per stage" in n for n in e.notes)


def _nested_copybacks(family, count=3):
  """The first fuzz plans of `family` that store their loaded stages back inside a persistent loop (MG951 before)."""
  gens = (stage_fuzz.Gen(seed, family=family) for seed in range(400))
  return [g for g, _ in zip((g for g in gens if {"persist", "copyback"} <= g.tags), range(count))]


@pytest.mark.parametrize("family", ["vec", "tile"])
def test_fuzz_plans_of_nested_loops_storing_their_stages(family):
  gens = _nested_copybacks(family)
  assert len(gens) == 3
  for g in gens:
    cls, detail = stage_fuzz.run(g, build=g is gens[0])
    assert cls == "ok", (g.seed, g.tags, detail)


@pytest.mark.parametrize("family", ["vec", "tile", "win", "store", "dot"])
def test_stage_fuzz_families_agree_with_numpy(family):
  """The first seeds of each family: interpret mode is the plan's NumPy reference and the CUDA export builds (or,
  where the plan overflows even with one store copy, MG402 at the user's line with a hint)."""
  seen = 0
  for seed in range(40):
    g = stage_fuzz.Gen(seed, family=family)
    cls, detail = stage_fuzz.run(g, build=seed % 4 == 0)
    if cls == "refused" and not g.illegal and detail.startswith("MG204"):
      continue      # a register tile no warpgroup holds (a (1, 12) slice): a limit with its own hint
    assert cls == ("refused" if g.illegal else "ok"), (seed, g.tags, detail)
    seen += 1
  assert seen >= 30


# ---------------------------------------------------------------------- GPU twins
@pytest.mark.gpu
@pytest.mark.parametrize("n,dtype,stages", [(24, np.float32, 2), (40, np.float16, 3), (56, np.int32, 3)])
def test_gpu_nested_loop_storing_its_stages(n, dtype, stages):
  v = (np.arange(4 * 2 * 6 * n) % 97).astype(dtype)
  got = np.asarray(copied_back(v, n=n, outer=2, trips=6, stages=stages, ws=False))
  np.testing.assert_array_equal(got, v)


@pytest.mark.gpu
def test_gpu_the_stage_count_mg402_suggests_runs():
  x = np.random.default_rng(0).standard_normal((768, 256)).astype(np.float32)
  np.testing.assert_array_equal(np.asarray(scaled(x, rows=64, stages=2)), x * 2)


@pytest.mark.gpu
@pytest.mark.parametrize("family", ["vec", "tile"])
def test_gpu_fuzz_plans_of_nested_loops(family):
  for g in _nested_copybacks(family):
    got = jax.block_until_ready(jax.jit(stage_fuzz.diff_fuzz.load(g))(*g.args))
    got = got if isinstance(got, (tuple, list)) else (got,)
    for a, w in zip(got, g.refs):
      np.testing.assert_array_equal(np.asarray(a), w)


@mg.mgpu_kernel(out_shape=lambda v: v)
def odd_vector_windows(v, out, *, n: ml.constexpr):
  v_s = ml.smem((n,), v.dtype)
  for j in ml.range(v.shape[0] // n, stages=2):
    ml.copy(v.at[ml.ds(j * n, n)], v_s)
    ml.copy(v_s, out.at[ml.ds(j * n, n)])


def test_a_vector_window_of_odd_bytes_is_told_to_widen_the_window():
  """56 int8 of a 280-element vector: the hint said "v's rows are 280 bytes, so no window of them is" (a vector's
  windows of whole 16 bytes are fine, whatever its length); it names the window's width, which compiles."""
  with pytest.raises(mg.TmaLimitError) as info:
    odd_vector_windows.check(S((280,), jnp.int8), n=56)
  e = info.value
  assert e.code == "MG401" and e.loc.source_line.strip().startswith("ml.copy(v.at[ml.ds(j * n, n)], v_s)")
  assert e.col_offset == e.loc.source_line.index("ml.copy(v.at")
  assert "56 x 1 bytes = 56" in e.message
  assert e.hint.startswith("make the window's last dimension a multiple of 16 elements (16 bytes)"), e.hint
  assert "rows are" not in e.hint
  v = (np.arange(320) % 101).astype(np.int8)
  odd_vector_windows.check(S(v.shape, jnp.int8), n=64)            # the hint followed
  np.testing.assert_array_equal(np.asarray(odd_vector_windows(v, n=64, interpret=True)), v)
