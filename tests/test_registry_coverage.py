"""Every registered shape rule and value rule is for a real schema version of a real op, and
the seed ops (Sub, Split) have a rule for every version they have."""

from __future__ import annotations

import pytest

import onnxforge.shape_infer  # noqa: F401  (registers the rules)
from onnxforge import opset
from onnxforge.kernels import KERNELS
from onnxforge.shape_infer.engine import SHAPE_RULES, VALUE_RULES

CONTRIB = {"com.microsoft": (1,)}
"""Domains onnx has no schemas for: onnxruntime's contrib ops are all version 1."""


@pytest.mark.parametrize("registry", [SHAPE_RULES, VALUE_RULES, KERNELS], ids=lambda r: r.kind)
def test_registered_versions_are_real_since_versions(registry) -> None:
    wrong = [
        f"{domain or 'ai.onnx'}::{op_type}-{version}"
        for domain, op_type, version in registry.entries()
        if version not in (opset.schema_versions(op_type, domain) or CONTRIB.get(domain, ()))
    ]
    assert not wrong, f"not a since_version: {wrong}"


@pytest.mark.parametrize("op_type", ["Sub", "Add", "Mul", "Div", "Split", "Reshape", "If"])
def test_seed_ops_have_a_shape_rule_for_every_version(op_type: str) -> None:
    assert SHAPE_RULES.versions(op_type) == opset.schema_versions(op_type)


SHAPE_ARITHMETIC = [
    "Sub",
    "Split",
    "Shape",
    "Size",
    "Gather",
    "GatherElements",
    "Concat",
    "Slice",
    "Squeeze",
    "Unsqueeze",
    "Reshape",
    "Flatten",
    "Transpose",
    "Cast",
    "CastLike",
    "Identity",
    "ConstantOfShape",
    "Range",
    "Expand",
    "Tile",
    "Where",
    "Equal",
    "Less",
    "Greater",
    "LessOrEqual",
    "GreaterOrEqual",
    "Not",
    "And",
    "Or",
    "Add",
    "Mul",
    "Div",
    "Pow",
    "Neg",
    "Abs",
    "Sqrt",
    "Reciprocal",
    "Exp",
    "Log",
    "Min",
    "Max",
    "Mean",
    "Sum",
    "Floor",
    "Ceil",
    "Round",
    "ReduceSum",
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "MatMul",
    "Gemm",
    "Clip",
    "Relu",
    "Sigmoid",
    "Tanh",
    "Softmax",
    "ScatterND",
    "NonZero",
    "TopK",
    "ArgMax",
    "ArgMin",
    "CumSum",
    "Pad",
    "Trilu",
    "DequantizeLinear",
    "QuantizeLinear",
]


@pytest.mark.parametrize("op_type", SHAPE_ARITHMETIC)
def test_shape_arithmetic_ops_have_a_kernel_for_every_version(op_type: str) -> None:
    assert KERNELS.versions(op_type) == opset.schema_versions(op_type)
