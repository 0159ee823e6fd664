import os

import pytest

if os.environ.get("PYTEST_XDIST_WORKER"):
  # Workers of `pytest -n` share one GPU: each allocates as it goes, none takes 75% up front.
  os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")


def _has_gpu() -> bool:
  try:
    import jax
    return any(d.platform == "gpu" for d in jax.devices())
  except Exception:
    return False


def pytest_addoption(parser):
  parser.addoption("--runslow", action="store_true", default=False,
                   help="also run the slow tier (tests/slow_tests.txt): the whole suite")


def pytest_collection_modifyitems(config, items):
  import slow_tests
  if not slow_tests.wanted(config):
    slow, skip_slow = slow_tests.listed(), pytest.mark.skip(
        reason="slow tier (tests/slow_tests.txt): run with --runslow or MGPU_DSL_SLOW_TESTS=1")
    for item in items:
      if item.nodeid in slow and "gpu" not in item.keywords:
        item.add_marker(pytest.mark.slow)
        item.add_marker(skip_slow)
  if _has_gpu():
    return
  skip = pytest.mark.skip(reason="needs an NVIDIA Hopper GPU")
  for item in items:
    if "gpu" in item.keywords:
      item.add_marker(skip)


@pytest.fixture(autouse=True)
def _no_interpret_env(monkeypatch):
  # Tests choose interpret mode explicitly; a developer's environment must not.
  monkeypatch.delenv("MGPU_DSL_INTERPRET", raising=False)


@pytest.fixture(autouse=True, scope="session")
def _private_cache_dir(tmp_path_factory):
  # The disk cache of a test run starts empty and never touches the developer's ~/.cache.
  old = os.environ.get("MGPU_DSL_CACHE_DIR")
  os.environ["MGPU_DSL_CACHE_DIR"] = str(tmp_path_factory.mktemp("mgpu_dsl_cache"))
  yield
  if old is None:
    os.environ.pop("MGPU_DSL_CACHE_DIR", None)
  else:
    os.environ["MGPU_DSL_CACHE_DIR"] = old
