"""Property test of the pipeliner: random loop shapes `for k in ml.range(n, stages=s)` either
fail with a located user error (never an InternalError) or compute, in interpret mode, exactly
what the same kernel computes with stages=1 (so every prefetch loads the window of the
iteration it prefetches).

Shapes drawn: static and runtime trip counts (fewer than the stages too), 1 or 2 loaded
buffers, windows from the loop index, from values computed before the loop, from values
computed in the body, from a loop-carried value, loads under a branch, register reads and
dots of the loaded tiles (accumulating, read in the body, feeding a second dot), stores inside
the loop, and extra carried scalars.

`MGPU_DSL_PIPELINE_FUZZ_EXAMPLES` sets the number of hypothesis examples (default 40);
`python tests/test_pipeline_fuzz.py N` runs N random ones and prints failures.
"""
from __future__ import annotations

import os
import re
import sys

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mgpu_dsl as mg
from fuzz_check import load
from fuzz_gen import DataChooser, Program, RandomChooser

M = 6            # rows of A in tiles of 64
WINDOWS = ["k * 64", "(k + base) % {M} * 64", "(k * 2 + 1) % {M} * 64", "(k + i) % {M} * 64",
           "inner % {M} * 64", "row % {M} * 64", "(k + row) % {M} * 64"]


def generate(c) -> tuple[str, int]:
  """A kernel's source (pipelined) and its number of programs."""
  grid = c.choice([1, 2])
  stages = c.integer(2, 4)
  n = c.choice(["1", "2", "3", "5", "i + 1", "i + 2"])
  two = c.chance(0.5)
  body = []
  window = c.choice(WINDOWS).format(M=M)
  if "inner" in window:
    body.append("inner = k + base")
  load = f"ml.copy(a.at[ml.ds({window}, 64)], a_s)"
  if c.chance(0.15):
    body.append("if k % 2 == 0:")
    body.append("  " + load)
  else:
    body.append(load)
  if two:
    body.append(f"ml.copy(b.at[ml.ds({c.choice(['k', '(k + 1)', 'base'])} % {M} * 64, 64)], c_s)")
  use = c.choice(["dot", "dot", "read", "both", "read_dot", "dot_of_dot"])
  other = 'c_s' if two else 'b_s'
  if use in ("dot", "both"):
    body.append(f"acc = ml.dot(a_s, {other}, acc)")
  if use == "read_dot":        # a dot's result read in the body: the refill moves before that read
    body.append(f"acc = acc + ml.dot(a_s, {other}) * 0.5")
  if use == "dot_of_dot":      # attention's shape: p = a @ x, then acc += p @ y
    body.append(f"p = ml.dot(a_s, {other}) * 0.125")
    body.append(f"acc = ml.dot(p.astype(jnp.float16), {c.choice(['b_s', other])}, acc)")
  if use in ("read", "both"):
    body.append("acc = acc + a_s[...].astype(jnp.float32)")
  if c.chance(0.3):
    body.append("row = row + 1")
  if c.chance(0.2):
    body.append("if k == 0:")
    body.append("  first[...] = a_s[...].astype(jnp.float32)")
  lines = [
      "import jax, jax.numpy as jnp",
      "import mgpu_dsl as mg",
      "from mgpu_dsl import language as ml",
      "",
      f"@mg.mgpu_kernel(out_shape=(jax.ShapeDtypeStruct(({64 * grid}, 64), jnp.float32),"
      f" jax.ShapeDtypeStruct(({64 * grid}, 64), jnp.float32)), grid=({grid},))",
      "def kernel(a, b, out, out2):",
      "  i = ml.program_id(0)",
      f"  base = i * {c.choice([1, 2, 3])}",
      "  a_s = ml.smem((64, 64), jnp.float16)",
      "  b_s = ml.smem((64, 64), jnp.float16)",
      "  c_s = ml.smem((64, 64), jnp.float16)",
      "  first = ml.smem((64, 64), jnp.float32)",
      "  first[...] = ml.zeros((64, 64), jnp.float32)",
      "  ml.copy(b.at[0:64], b_s)",
      "  acc = ml.zeros((64, 64), jnp.float32)",
      "  row = base",
      f"  for k in ml.range({n}, stages={stages}):",
      *["    " + line for line in body],
      "  out.at[ml.ds(i * 64, 64)][...] = acc",
      "  out2.at[ml.ds(i * 64, 64)][...] = first[...]",
  ]
  return "\n".join(lines) + "\n", grid


ARGS = [jnp.asarray(np.random.default_rng(s).standard_normal((M * 64, 64)), jnp.float16) for s in (0, 1)]


def run(source: str, grid: int):
  """None when the kernel fails with a located user error or matches its stages=1 twin."""
  specs = [jax.ShapeDtypeStruct((M * 64, 64), jnp.float16)] * 2
  program = Program(source, [], None, first_line=5, last_line=source.count("\n"))
  kernel = load(program)
  try:
    kernel.check(*specs)
  except mg.InternalError as e:
    return f"InternalError: {e}"
  except mg.KernelError as e:
    bad = [x for x in e.errors if isinstance(x, mg.InternalError)
           or not program.first_line <= x.lineno <= program.last_line]
    return f"{type(bad[0]).__name__}: {bad[0]}" if bad else None
  except Exception as e:   # noqa: BLE001
    return f"{type(e).__name__}: {e}"
  twin = load(Program(re.sub(r"stages=\d", "stages=1", source), [], None, 5, 0))
  try:               # an accepted kernel runs as its twin does (a run-time error is a compiler bug)
    got = kernel(*ARGS, interpret=True)
  except Exception as e:   # noqa: BLE001
    return f"{type(e).__name__} in interpret mode: {e}"
  for g, w in zip(got, twin(*ARGS, interpret=True)):
    if not np.array_equal(np.asarray(g), np.asarray(w)):
      return "the pipelined loop computes something else than the same loop with stages=1"
  return None


EXAMPLES = int(os.environ.get("MGPU_DSL_PIPELINE_FUZZ_EXAMPLES", "40"))


@settings(max_examples=EXAMPLES, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(st.data())
def test_pipelined_loops_fail_located_or_match_their_unpipelined_twin(data):
  source, grid = generate(DataChooser(data))
  failure = run(source, grid)
  if failure is not None:
    pytest.fail(f"{failure}\n--- kernel ---\n{source}", pytrace=False)


if __name__ == "__main__":
  n = int(sys.argv[1]) if len(sys.argv) > 1 else 200
  bad = 0
  for seed in range(n):
    source, grid = generate(RandomChooser(seed))
    failure = run(source, grid)
    if failure:
      bad += 1
      print(f"=== {seed}: {failure}\n{source}")
  print(f"ran {n} pipelined kernels; {bad} failures")
  sys.exit(1 if bad else 0)
