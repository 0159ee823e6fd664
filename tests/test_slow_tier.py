"""The slow tier's list (tests/slow_tests.py): made from a --durations=0 report, read back, applied by conftest."""
import slow_tests

REPORT = """\
============================= slowest durations ==============================
12.50s call     tests/test_a.py::test_big
2.10s call     tests/test_b.py::test_case[(1, 97, 2, 128)-1-203-False]
1.20s setup    tests/test_b.py::test_case[(1, 97, 2, 128)-1-203-False]
0.40s call     tests/test_c.py::test_small
(1 durations < 0.005s hidden.  Use -vv to show these durations.)
"""


def test_a_report_gives_the_tests_over_the_threshold_with_setup_and_call_together():
  # (a parametrised id with spaces is kept whole; its 2.1 s call and 1.2 s setup pass 3 s together)
  assert slow_tests.from_log(REPORT) == ["tests/test_a.py::test_big",
                                         "tests/test_b.py::test_case[(1, 97, 2, 128)-1-203-False]"]
  assert slow_tests.from_log(REPORT, threshold=20.0) == []


def test_the_list_is_read_and_names_test_files_that_exist():
  import os
  ids = slow_tests.listed()
  assert len(ids) > 100
  root = os.path.dirname(os.path.dirname(slow_tests.__file__))
  missing = {i.split("::")[0] for i in ids if not os.path.isfile(os.path.join(root, i.split("::")[0]))}
  assert not missing, f"slow_tests.txt names files that are gone: {sorted(missing)[:5]}"


def test_this_run_skips_the_slow_tier_unless_asked(request):
  ids = slow_tests.listed()
  items = [i for i in request.session.items if i.nodeid in ids]
  if slow_tests.wanted(request.config):
    assert not any(i.get_closest_marker("slow") for i in items)
  else:
    assert all(i.get_closest_marker("slow") for i in items if "gpu" not in i.keywords)
