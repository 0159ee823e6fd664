"""The on-disk cache: traced kernels (pickled `ir.Kernel`s) and autotuning winners (JSON).

Where: `MGPU_DSL_CACHE_DIR`, by default `$XDG_CACHE_HOME/mgpu_dsl` (`~/.cache/mgpu_dsl`);
`MGPU_DSL_CACHE_DIR=0` (or `off`) turns it off. Every write goes to a temporary
file in the same folder and is renamed into place, so processes sharing the
folder never see half a file. An entry that does not read back exactly (another
version's header, another key, a checksum mismatch, an unpickling error) is
ignored and rebuilt, never trusted. The folder should be yours alone: a pickle
runs code when read.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import json
import logging
import os
import pickle
import sys
import tempfile

log = logging.getLogger("mgpu_dsl")

_OFF = ("0", "off", "false", "no", "none")
TRACED_HEADER = b"mgpu_dsl traced kernel v1\n"


def cache_dir() -> str | None:
  """The cache folder, or None when caching on disk is turned off."""
  v = os.environ.get("MGPU_DSL_CACHE_DIR", "").strip()
  if v.lower() in _OFF:
    return None
  if v:
    return os.path.expanduser(v)
  base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(base, "mgpu_dsl")


def source_files() -> list[str]:
  """Every .py file of mgpu_dsl's packages, subpackages included (frontend/ops once was not:
  an op's changed rule kept serving kernels compiled by the old one)."""
  out = []
  for pkg in ("mgpu_dsl", "mgpu_dsl.frontend", "mgpu_dsl.lowering"):
    root = list(importlib.util.find_spec(pkg).submodule_search_locations)[0]
    for folder, dirs, files in os.walk(root):
      dirs[:] = sorted(d for d in dirs if os.path.exists(os.path.join(folder, d, "__init__.py")))
      out += [os.path.join(folder, f) for f in sorted(files) if f.endswith(".py")]
  return out


@functools.lru_cache(maxsize=None)
def package_hash() -> str:
  """A digest of mgpu_dsl's own source files: a changed compiler never reads old entries."""
  h = hashlib.sha256()
  for path in source_files():
    h.update(os.path.basename(path).encode())
    with open(path, "rb") as f:
      h.update(f.read())
  return h.hexdigest()


@functools.lru_cache(maxsize=None)
def versions() -> str:
  """The versions a cached entry depends on, as one line."""
  import jax
  import jaxlib
  import numpy
  from . import __version__
  return (f"mgpu_dsl {__version__} src {package_hash()[:16]}; jax {jax.__version__};"
          f" jaxlib {jaxlib.__version__}; numpy {numpy.__version__}; python {sys.version_info[:3]}")


def digest(*parts) -> str:
  return hashlib.sha256("\x1f".join(str(p) for p in parts).encode()).hexdigest()


def write_atomic(path: str, data: bytes) -> bool:
  """Write `data` to `path` through a temporary file and a rename; False (logged) on failure."""
  folder = os.path.dirname(path)
  try:
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix=".tmp-", suffix=os.path.basename(path))
    try:
      with os.fdopen(fd, "wb") as f:
        f.write(data)
      os.replace(tmp, path)
    except BaseException:
      try:
        os.unlink(tmp)
      except OSError:
        pass
      raise
  except OSError as e:
    log.warning("mgpu_dsl: could not write the cache entry %s: %s", path, e)
    return False
  return True


# ---------------------------------------------------------------- traced kernels
def traced_path(name: str, key: str) -> str | None:
  d = cache_dir()
  return None if d is None else os.path.join(d, "traced", f"{name}-{key[:24]}.pkl")


def load_traced(path: str, key: str, expect: type):
  """The object stored at `path` under `key`, or None if absent, stale or damaged."""
  try:
    with open(path, "rb") as f:
      blob = f.read()
  except FileNotFoundError:
    return None
  except OSError as e:
    log.info("mgpu_dsl: cache entry %s unreadable (%s); rebuilding it", path, e)
    return None
  head = TRACED_HEADER + key.encode() + b"\n"
  if not blob.startswith(head) or len(blob) < len(head) + 65:
    log.info("mgpu_dsl: cache entry %s has another version or key; rebuilding it", path)
    return None
  check, payload = blob[len(head):len(head) + 64], blob[len(head) + 65:]
  if hashlib.sha256(payload).hexdigest().encode() != check:
    log.info("mgpu_dsl: cache entry %s is damaged (checksum); rebuilding it", path)
    return None
  try:
    obj = pickle.loads(payload)
  except Exception as e:   # any unpickling failure means: do not trust it
    log.info("mgpu_dsl: cache entry %s does not unpickle (%s); rebuilding it", path, e)
    return None
  return obj if isinstance(obj, expect) else None


def store_traced(path: str, key: str, obj) -> bool:
  try:
    payload = pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)
  except Exception as e:
    log.info("mgpu_dsl: %s cannot be pickled (%s); not cached on disk", type(obj).__name__, e)
    return False
  check = hashlib.sha256(payload).hexdigest().encode()
  return write_atomic(path, TRACED_HEADER + key.encode() + b"\n" + check + b"\n" + payload)


# ---------------------------------------------------------------- JSON records
def read_json(path: str) -> dict:
  """The JSON object at `path`; {} when it is absent or not a valid object."""
  try:
    with open(path, encoding="utf-8") as f:
      data = json.load(f)
  except FileNotFoundError:
    return {}
  except (OSError, ValueError) as e:
    log.info("mgpu_dsl: ignoring unreadable cache file %s: %s", path, e)
    return {}
  return data if isinstance(data, dict) else {}


def update_json(path: str, key: str, value) -> bool:
  """Set `key` in the JSON object at `path` (read, merge, atomic write: last writer wins)."""
  data = read_json(path)
  data[key] = value
  return write_atomic(path, json.dumps(data, indent=1, sort_keys=True).encode())
