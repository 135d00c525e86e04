"""OpRegistry maps an opset to the schema version it selects and matches exactly."""

from __future__ import annotations

import pytest

from onnxforge import opset
from onnxforge.errors import OnnxForgeError
from onnxforge.registry import OpRegistry


def test_lookup_maps_opset_to_since_version() -> None:
    registry: OpRegistry = OpRegistry("kernel")

    @registry.register("Split", versions=(13,))
    def split_13() -> str:
        return "13"

    @registry.register(("Sub", "Add"), versions=(7, 13, 14))
    def arith() -> str:
        return "arith"

    assert registry.lookup("Split", 17) is split_13  # opset 17 selects Split-13
    assert registry.find("Split", 18) is None  # Split-18 is another schema
    assert registry.lookup("Sub", 21) is arith and registry.lookup("Add", 8) is arith
    with pytest.raises(
        OnnxForgeError, match=r"no kernel for Split-18 \(opset 18\); versions with one: 13"
    ):
        registry.lookup("Split", 18)


def test_registering_a_version_twice_is_an_error() -> None:
    registry: OpRegistry = OpRegistry("rule")
    registry.register("Relu", versions=(14,))(lambda: None)
    with pytest.raises(OnnxForgeError, match="Relu-14 registered twice"):
        registry.register("Relu", versions=(14,))(lambda: None)


def test_schema_versions_come_from_onnx_defs() -> None:
    assert opset.schema_versions("Split") == (1, 2, 11, 13, 18)
    assert opset.schema_versions("Sub") == (1, 6, 7, 13, 14)
    assert opset.since_version("Sub", 21) == 14
    assert opset.attribute_default("Split", 11, "axis") == 0
    with pytest.raises(OnnxForgeError, match="NoSuchOp has no schema"):
        opset.since_version("NoSuchOp", 18)
