"""Every typed-IR op has a Mosaic GPU lowering rule and an interpreter rule."""
import pytest

from mgpu_dsl.frontend import ir


def test_ir_defines_ops():
  assert ir.For in ir.ALL_OPS and ir.Yield in ir.ALL_OPS and ir.ClusterSync in ir.ALL_OPS


@pytest.mark.parametrize("table", ["rules", "interpret"])
def test_every_op_has_a_rule(table):
  if table == "rules":
    from mgpu_dsl.lowering.rules import RULES as t
  else:
    from mgpu_dsl.lowering.interpret import INTERPRET_RULES as t
  missing = [c.__name__ for c in ir.ALL_OPS if c not in t]
  assert not missing, f"ops without a rule in {table}: {missing}"
  extra = [c.__name__ for c in t if c not in ir.ALL_OPS]
  assert not extra, f"rules for classes that are not ops: {extra}"
