"""docs/errors.md stays true: every error code has a section whose example raises exactly
the class and the message the section shows.

Each section `## MGxxx ClassName` holds a ```python example (a whole module) and a
```text block that is the rendered error, whose first line is
`ClassName: example.py:LINE:COL: message [MGxxx]` (then the source line, the caret, the notes and
the hint, as printed). The example is written to
`example.py` in a temporary folder and imported; the error is the first
KernelError that importing it raises (interpret-mode examples run the kernel at
import) or else the first one of checking what it declares with mg.check_specs.
"""
from __future__ import annotations

import os
import re

import pytest

import mgpu_dsl as mg
from mgpu_dsl import check as C
from mgpu_dsl.frontend import errors as E
from mgpu_dsl.lowering import registry

DOC = os.path.join(os.path.dirname(__file__), os.pardir, "docs", "errors.md")
SECTION = re.compile(r"^## (MG\d{3}) (\w+)\s*$", re.M)
BLOCK = re.compile(r"^```(\w+)\n(.*?)^```\s*$", re.M | re.S)


def sections(whole: bool = False) -> dict[str, tuple[str, str, str]]:
  """code -> (class name, python example, expected first line, or the whole text block)."""
  text = open(DOC).read()
  heads = list(SECTION.finditer(text))
  out = {}
  for h, nxt in zip(heads, heads[1:] + [None]):
    body = text[h.end():nxt.start() if nxt else len(text)]
    blocks = {}
    for b in BLOCK.finditer(body):
      blocks.setdefault(b.group(1), b.group(2))
    shown = blocks.get("text") or ""
    out[h.group(1)] = (h.group(2), blocks.get("python"), shown if whole else shown.split("\n")[0])
  return out


def first_error(source: str, folder: str) -> E.KernelError | None:
  """The first KernelError that importing `source` as example.py, then checking it, raises."""
  path = os.path.join(folder, "example.py")
  with open(path, "w") as f:
    f.write(source)
  registry.load()
  saved = dict(registry.LOWER)      # the InternalError example breaks a rule on purpose
  try:
    report = C.check_file(path)
    if isinstance(report.import_error, mg.KernelError):
      return report.import_error
    if report.import_error is not None:
      raise report.import_error
    for r in report.results:
      if r.crash is not None:
        raise r.crash
      if r.errors:
        return r.errors[0]
    return None
  finally:
    registry.LOWER.clear()
    registry.LOWER.update(saved)


def rendered(e: E.KernelError, folder: str) -> str:
  return C.render_error(e, relative=False).replace(os.path.join(folder, "example.py"), "example.py")


def first_line(e: E.KernelError, folder: str) -> str:
  return rendered(e, folder).split("\n")[0]


DOCUMENTED = sections()
WHOLE = sections(whole=True)


def test_every_error_class_has_a_section():
  codes = {c.code: c.__name__ for c in E.ALL_ERRORS if c is not E.KernelError}   # the base is never raised
  assert {k: v[0] for k, v in DOCUMENTED.items()} == codes


@pytest.mark.parametrize("code", sorted(DOCUMENTED), ids=str)
def test_documented_example_raises_the_documented_error(code, tmp_path):
  name, example, expected = DOCUMENTED[code]
  assert example, f"{code}: no ```python example"
  assert expected.startswith(f"{name}: "), f"{code}: no ```text block with the message"
  e = first_error(example, str(tmp_path))
  assert e is not None, f"{code}: the example raises nothing"
  assert type(e).__name__ == name and e.code == code
  assert first_line(e, str(tmp_path)) == expected
  # the whole ```text block: the source line, the caret, the notes and the hint too (a hint the
  # compiler no longer prints, or one the section leaves out, fails)
  assert rendered(e, str(tmp_path)).rstrip("\n") == WHOLE[code][2].rstrip("\n")
