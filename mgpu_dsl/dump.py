"""What a compile leaves behind for debugging: log records and, under MGPU_DSL_DUMP, files.

`logging.getLogger("mgpu_dsl")` records each specialisation traced and built, with
the time each took. `MGPU_DSL_DUMP=DIR` writes, per specialisation, the typed IR
(`NAME-KEY.ir.txt`) and the Mosaic GPU module (`NAME-KEY.mlir`), where KEY is a
short hash of the specialisation (shapes, dtypes, constexprs, launch config).
"""
from __future__ import annotations

import hashlib
import logging
import os

log = logging.getLogger("mgpu_dsl")


def dump_dir() -> str | None:
  return os.environ.get("MGPU_DSL_DUMP") or None


def short_key(key) -> str:
  return hashlib.sha256(repr(key).encode()).hexdigest()[:10]


def spec_text(in_specs, constexprs: dict) -> str:
  """`float32[1024,64], bn=128`: a specialisation in one line."""
  args = [f"{s.dtype}[{','.join(str(n) for n in s.shape)}]" for s in in_specs]
  from .calling import constexpr_text
  return ", ".join(args + [f"{k}={constexpr_text(v)}" for k, v in constexprs.items()])


def write(name: str, key, suffix: str, text: str) -> str | None:
  """Write `text` to DIR/NAME-KEY.SUFFIX when MGPU_DSL_DUMP=DIR is set; the path written."""
  d = dump_dir()
  if d is None:
    return None
  path = os.path.join(d, f"{name}-{short_key(key)}.{suffix}")
  try:
    os.makedirs(d, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
      f.write(text)
  except OSError as e:
    log.warning("mgpu_dsl: MGPU_DSL_DUMP could not write %s: %s", path, e)
    return None
  return path
