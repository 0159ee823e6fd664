import os

import pytest


def _has_gpu() -> bool:
  try:
    import jax
    return any(d.platform == "gpu" for d in jax.devices())
  except Exception:
    return False


def pytest_collection_modifyitems(config, items):
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
