"""Property test: every generated kernel either builds or fails with a located user error.

The generator (tests/fuzz_gen.py) writes small kernels as Python source, valid and
invalid uses of every kind of buffer and value, about half of which build.
`KernelFunction.check(*specs)` must then either succeed (verified Mosaic GPU IR, built
on the CPU) or raise a `mgpu_dsl.KernelError` whose every error (`.errors`) is not an
`InternalError` and points inside the kernel. Any other outcome is a frontend bug: a
missing check.

The number of examples defaults to 150; set MGPU_DSL_FUZZ_EXAMPLES for more.
`python tests/test_fuzz.py N [SEED]` runs N random kernels without hypothesis
and prints every distinct failure (for bug hunts; no shrinking).
"""
from __future__ import annotations

import os
import sys

import jax
import jax.numpy as jnp
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import mgpu_dsl as mg
from fuzz_check import _describe, check_program, load
from fuzz_gen import DataChooser, RandomChooser, generate


FUZZ_EXAMPLES = int(os.environ.get("MGPU_DSL_FUZZ_EXAMPLES", "150"))


@settings(max_examples=FUZZ_EXAMPLES, deadline=None, database=None,
          suppress_health_check=list(HealthCheck))
@given(st.data())
def test_generated_kernels_build_or_fail_with_a_located_user_error(data):
  program = generate(DataChooser(data))
  failure = check_program(program)
  if failure is not None:
    pytest.fail(_describe(program, failure), pytrace=False)


def test_the_generator_produces_both_valid_and_invalid_kernels():
  outcomes = set()
  for seed in range(60):
    program = generate(RandomChooser(seed))
    try:
      load(program).check(*[jax.ShapeDtypeStruct(s, jnp.dtype(d)) for s, d in program.specs])
      outcomes.add("ok")
    except mg.KernelError:
      outcomes.add("error")
  assert outcomes == {"ok", "error"}


def _hunt(n, seed):
  """Run `n` random kernels; print each distinct failure once."""
  import collections
  import re
  seen = collections.Counter()
  for k in range(n):
    program = generate(RandomChooser(seed * 1_000_003 + k))
    failure = check_program(program)
    if failure is None:
      continue
    key = re.sub(r"\d+", "N", failure[0])[:160]
    seen[key] += 1
    if seen[key] == 1:
      print(f"=== failure #{len(seen)} (example {k}) ===\n{_describe(program, failure)}", flush=True)
  print(f"ran {n} kernels; {sum(seen.values())} failures, {len(seen)} distinct", flush=True)
  for key, count in seen.most_common():
    print(f"{count:6d}  {key}")
  return 1 if seen else 0


if __name__ == "__main__":
  sys.exit(_hunt(int(sys.argv[1]) if len(sys.argv) > 1 else 1000,
                 int(sys.argv[2]) if len(sys.argv) > 2 else 0))
