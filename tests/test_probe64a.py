"""Probe 64a: the integer-pattern fuzzer (tests/int_fuzz.py, benchmarks/probe_int_fuzz.py, design note 217).

Integer elementwise chains of six dtypes feeding reductions, scans and stores, against jnp on the same inputs: the
neighbourhood of session 52's ptxas class (an int32 max of a negation across lanes, design note 216). The CPU tests
hold the generator (deterministic, every family drawn, the reference's dtypes the DSL's) and a seed of each
consumer through interpret mode and a CUDA export; the GPU test runs 50 seeds under `jax.jit`.
"""
from __future__ import annotations

import re

import jax
import numpy as np
import pytest

import diff_fuzz
import int_fuzz

SWEEP = range(0, 400)


def _first(pred):
  return next(s for s in SWEEP if pred(int_fuzz.Gen(s)))


def test_the_generator_is_deterministic():
  for s in (0, 7, 123, 2024):
    a, b = int_fuzz.Gen(s), int_fuzz.Gen(s)
    assert a.source == b.source and a.tags == b.tags and a.combo == b.combo
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a.args, b.args))
    assert all(np.array_equal(x, y) and x.dtype == y.dtype for x, y in zip(a.refs, b.refs))
  assert int_fuzz.Gen(1).source != int_fuzz.Gen(2).source


def test_the_tags_cover_every_family():
  """Over 400 seeds: every dtype, block, load, consumer (and axis), and every elementwise op is drawn."""
  tags = set()
  for s in SWEEP:
    tags |= int_fuzz.Gen(s).tags
  want = ({f"dt:{d}" for d in int_fuzz.INTS} | {f"block:{b}" for b in int_fuzz.BLOCKS}
          | {f"load:{k}" for k in int_fuzz.LOADS} | {f"out:{c}" for c in int_fuzz.CONSUMERS}
          | {f"consume:{f}:{ax}" for f in int_fuzz.REDUCES for ax in ("0", "1", "all")}
          | {f"consume:{f}:{ax}" for f in int_fuzz.SCANS for ax in ("0", "1")} | {"consume:store"}
          | {"spelled:jnp", "spelled:jax.lax", "hot"})
  assert want <= tags, sorted(want - tags)
  ops = {t.split(":")[1] for t in tags if t.startswith("op:")}
  assert set(int_fuzz.OPS) <= ops, sorted(set(int_fuzz.OPS) - ops)
  rows = {int(t.split(":")[1].split("x")[0]) for t in tags if t.startswith("shape:")}
  cols = {int(t.split("x")[1]) for t in tags if t.startswith("shape:")}
  assert min(rows) == 16 and max(rows) == 256 and min(cols) == 16 and max(cols) == 128


def test_session_52s_class_is_drawn():
  """An int32 max or min along the rows (lanes meeting by shuffles) of a negated tile, and its 8- and 16-bit
  neighbours, are among the seeds."""
  src = int_fuzz.Gen(_first(lambda g: {"dt:int32", "op:neg", "consume:max:1"} <= g.tags)).source
  assert "max(" in src and "axis=1)" in src and re.search(r"= (-v|0 - v|v\d+ \* -1|~v\d+ \+ 1)", src), src
  for dt in ("int8", "int16", "uint32"):
    _first(lambda g: {f"dt:{dt}", "op:neg"} <= g.tags and g.family in ("max", "min"))
  hot = [g for g in map(int_fuzz.Gen, range(100)) if "hot" in g.tags]
  assert len(hot) >= 15 and all("op:neg" in g.tags and g.family in int_fuzz.HOT for g in hot)


def test_the_reference_takes_the_dsls_dtypes():
  """ml.cumsum of 8- and 16-bit integers is int32 / uint32 (docs/language.md) and jnp.cumsum keeps the dtype,
  ml.sum is jnp's, scans of max and min keep the dtype, argmax is int32."""
  for dt, fam, lib, want in (("int8", "cumsum", "ml", "int32"), ("uint16", "cumsum", "ml", "uint32"),
                             ("uint8", "sum", "ml", "uint32"),
                             ("int16", "cummax", "ml", "int16"), ("uint8", "argmin", "ml", "int32")):
    g = int_fuzz.Gen(_first(lambda g: g.fed == dt and g.family == fam and (f"spelled:{lib}" in g.tags) == (lib != "ml")))
    assert f"{lib}.{fam}(" in g.source and g.refs[0].dtype == np.dtype(want), (dt, fam, lib, g.refs[0].dtype)
  narrow = [g for g in map(int_fuzz.Gen, SWEEP) if g.family == "cumsum" and "spelled:jnp" in g.tags
            and np.dtype(g.fed).itemsize < 4]
  assert narrow and all(g.refs[0].dtype == np.dtype(g.fed) for g in narrow)


FAMILY_SEEDS = {c: _first(lambda g, c=c: g.family == c and "load:masked" not in g.tags) for c in int_fuzz.CONSUMERS}
MASKED_SEED = _first(lambda g: g.family == "max" and "load:masked" in g.tags)
NARROW_SCAN_SEED = _first(lambda g: g.family == "cumsum" and "spelled:jnp" in g.tags and g.refs[0].itemsize < 4)


@pytest.mark.parametrize("seed", sorted(set(FAMILY_SEEDS.values()) | {MASKED_SEED, NARROW_SCAN_SEED}))
def test_a_seed_of_each_consumer_matches_jnp_in_interpret_mode_and_builds(seed):
  g = int_fuzz.Gen(seed)
  assert int_fuzz.run(g, build=True) == ("ok", ""), g.source


def test_the_harness_calls_a_wrong_value_wrong():
  """The comparison can fail: one element of the reference changed (in its dtype) is "wrong"."""
  g = int_fuzz.Gen(FAMILY_SEEDS["max"])
  ref = np.array(g.refs[0])
  ref.flat[0] = ref.flat[0] + np.array(1, ref.dtype)
  g.refs = (ref,)
  cls, detail = int_fuzz.run(g, build=False)
  assert cls == "wrong" and "1 values differ" in detail


@pytest.mark.gpu
def test_fifty_seeds_on_the_gpu_match_jnp():
  bad, ran = [], 0
  for s in range(50):
    g = int_fuzz.Gen(s)
    cls, detail = int_fuzz.run(g, build=False)
    if cls.startswith("refused"):
      continue
    assert cls == "ok", (s, cls, detail)
    got = jax.block_until_ready(jax.jit(diff_fuzz.load(g))(*g.args))
    got = got if isinstance(got, (tuple, list)) else (got,)
    err = diff_fuzz.compare(np.asarray(got[0]), g.refs[0])
    if err:
      bad.append(f"seed {s} [{' '.join(sorted(g.tags))}]: {err}")
    ran += 1
  assert ran >= 40 and not bad, "\n".join(bad)
