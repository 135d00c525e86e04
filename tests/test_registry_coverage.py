"""Every registered shape rule and value rule is for a real schema version of a real op, and
the seed ops (Sub, Split) have a rule for every version they have."""

from __future__ import annotations

import pytest

import onnxforge.shape_infer  # noqa: F401  (registers the rules)
from onnxforge import opset
from onnxforge.shape_infer.engine import SHAPE_RULES, VALUE_RULES


@pytest.mark.parametrize("registry", [SHAPE_RULES, VALUE_RULES], ids=lambda r: r.kind)
def test_registered_versions_are_real_since_versions(registry) -> None:
    wrong = [
        f"{domain or 'ai.onnx'}::{op_type}-{version}"
        for domain, op_type, version in registry.entries()
        if version not in opset.schema_versions(op_type, domain)
    ]
    assert not wrong, f"not a since_version: {wrong}"


@pytest.mark.parametrize("op_type", ["Sub", "Add", "Mul", "Div", "Split", "Reshape", "If"])
def test_seed_ops_have_a_shape_rule_for_every_version(op_type: str) -> None:
    assert SHAPE_RULES.versions(op_type) == opset.schema_versions(op_type)
