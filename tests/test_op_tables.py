"""Every op is declared once, with traits, a Mosaic GPU lowering rule and an interpreter rule;
passes fail closed on an op that lacks what they need."""
import dataclasses

import pytest

from mgpu_dsl import language as ml
from mgpu_dsl.frontend import errors as E
from mgpu_dsl.frontend import ir
from mgpu_dsl.frontend import ops
from mgpu_dsl.frontend.loc import UNKNOWN


def test_every_family_declares_its_ops():
  names = {c.__name__ for c in ir.ALL_OPS}
  assert {"For", "Yield", "ClusterSync", "Reduce", "Broadcast", "Dot", "Copy", "Print"} <= names
  assert len(names) == len(ir.ALL_OPS), "an op class is declared twice"


def test_every_op_has_traits():
  for c in ir.ALL_OPS:
    assert isinstance(c.__dict__.get("traits"), ir.Traits), c.__name__


@pytest.mark.parametrize("table", ["LOWER", "INTERPRET"])
def test_every_op_has_a_rule(table):
  from mgpu_dsl.lowering import registry
  registry.load()
  t = getattr(registry, table)
  missing = [c.__name__ for c in ir.ALL_OPS if c not in t]
  assert not missing, f"ops without a rule in {table}: {missing}"
  extra = [c.__name__ for c in t if c not in ir.ALL_OPS]
  assert not extra, f"rules for classes that are not ops: {extra}"


def test_every_builtin_is_in_the_language_namespace():
  for name, b in ops.BUILTINS.items():
    assert getattr(ml, name) is b, name
    assert b.__doc__, f"ml.{name} has no docstring"


def test_an_op_without_traits_fails_closed():
  @dataclasses.dataclass(frozen=True, eq=False)
  class Undeclared(ir.Op):
    loc: object
    results: tuple = ()

  with pytest.raises(E.InternalError, match="has no traits"):
    ir.traits_of(Undeclared(UNKNOWN))


def test_passes_fail_closed_on_an_undeclared_op():
  from mgpu_dsl.frontend.sync import SyncPass

  @dataclasses.dataclass(frozen=True, eq=False)
  class Undeclared(ir.Op):
    loc: object
    results: tuple = ()

  with pytest.raises(E.InternalError):
    SyncPass({}).run(ir.Block([Undeclared(UNKNOWN)]), UNKNOWN)
