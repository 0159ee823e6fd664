"""Every diagnostic has a hint: no KernelError subclass is built without `hint=` in the source
of frontend/, lowering/ or mgpu_dsl/ (InternalError supplies its own), and messages never show
an internal value name such as `%697`."""
from __future__ import annotations

import ast
import pathlib
import sys

import mgpu_dsl as mg
from mgpu_dsl.frontend import errors as E
from mgpu_dsl.frontend import ir

ROOT = pathlib.Path(__file__).resolve().parent.parent
CLASSES = {c.__name__: c for c in E.ALL_ERRORS}


def calls_without_hint():
  out = []
  for folder in ("frontend", "lowering", "mgpu_dsl"):
    for path in sorted((ROOT / folder).rglob("*.py")):
      for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call):
          continue
        f = node.func
        name = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else None
        cls = CLASSES.get(name)
        if cls is None or getattr(cls, "default_hint", None):
          continue
        if len(node.args) < 3 and not any(k.arg in ("hint", None) for k in node.keywords):
          out.append(f"{path.relative_to(ROOT)}:{node.lineno}: {name}(...) without hint=")
  return out


def test_every_diagnostic_is_raised_with_a_hint():
  assert calls_without_hint() == []


def test_the_walker_finds_a_diagnostic_without_a_hint(tmp_path, monkeypatch):
  (tmp_path / "frontend").mkdir()
  (tmp_path / "frontend" / "bad.py").write_text("raise E.KernelTypeError('no hint', loc)\n")
  monkeypatch.setattr(sys.modules[__name__], "ROOT", tmp_path)
  assert calls_without_hint() == ["frontend/bad.py:1: KernelTypeError(...) without hint="]


def test_internal_errors_carry_the_report_hint():
  assert "bug in mgpu_dsl" in mg.InternalError("x").hint


def test_values_print_as_their_names_in_messages():
  from mgpu_dsl.frontend.dtypes import DType
  from mgpu_dsl.frontend.types import ScalarType
  named, anonymous = ir.Value(ScalarType(DType.i32), "i"), ir.Value(ScalarType(DType.i32))
  assert f"{named}" == f"{named!r}" == "i" and f"{anonymous}" == "a scalar<int32>"
  assert f"{(named, 128)}" == "(i, 128)"             # tuples in messages too
  assert anonymous.ref.startswith("%")              # IR dumps keep ids
