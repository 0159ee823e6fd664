"""The slow tier: the tests that take most of the suite's CPU time, skipped by the README's test command (and so by
CI) unless asked for, as JAX's own suite samples its generated cases.

`tests/slow_tests.txt` lists their node ids: every test that took 1.5 s or more (call, setup and teardown together)
in a `--durations=0` run of the whole suite on a 2-core machine (session 45: 860 of 5963 tests, 72% of the
summed test time; with 3 s, 412 tests, the README command still took 946 s in a clean clone). Timings depend on
the machine's load: session 47's unloaded run put only 350 tests past 1.5 s, so its list is the union of the old one
and that run's tests of 1.0 s or more (1047 tests; `python tests/slow_tests.py durations.log 1.0`); session 48 added
that run's tests of 0.8 s or more (a clean clone's README command had grown to 671 s). They still run
with `--runslow` (or `MGPU_DSL_SLOW_TESTS=1`), on the GPU machine (`-m gpu` tests are never in the list) and in the
full runs each session's lead makes before landing. Remake the list from a log:

    python -m pytest -q -n auto --dist loadfile --runslow --durations=0 > durations.log
    python tests/slow_tests.py durations.log > tests/slow_tests.txt
"""
from __future__ import annotations

import os
import re
import sys

LIST = os.path.join(os.path.dirname(__file__), "slow_tests.txt")
THRESHOLD_S = 1.5


def wanted(config) -> bool:
  """Whether this run includes the slow tier."""
  return bool(config.getoption("--runslow", default=False)) or os.environ.get("MGPU_DSL_SLOW_TESTS") == "1"


def listed() -> frozenset[str]:
  try:
    with open(LIST) as f:
      return frozenset(line.strip() for line in f if line.strip() and not line.startswith("#"))
  except FileNotFoundError:
    return frozenset()


def from_log(text: str, threshold: float = THRESHOLD_S) -> list[str]:
  """The node ids of a `--durations=0` report whose call, setup and teardown took `threshold` seconds or more."""
  total: dict[str, float] = {}
  for line in text.splitlines():
    m = re.match(r"^([\d.]+)s (?:call|setup|teardown)\s+(.+?)\s*$", line)
    if m:
      total[m.group(2)] = total.get(m.group(2), 0.0) + float(m.group(1))
  return sorted(n for n, t in total.items() if t >= threshold)


if __name__ == "__main__":
  threshold = float(sys.argv[2]) if len(sys.argv) > 2 else THRESHOLD_S
  with open(sys.argv[1]) as f:
    ids = from_log(f.read(), threshold)
  print(f"# slow tier: tests of {threshold:g} s or more in a --durations=0 run (tests/slow_tests.py); {len(ids)} tests")
  print("\n".join(ids))
