"""Version conversion (onnxforge.passes.convert): the convert-opset pass and its adapters,
one module per op; generic kinds of adapter in _kinds.py."""

from __future__ import annotations

__all__ = [
    "DOWNGRADES",
    "UPGRADES",
    "ConvertContext",
    "ConvertOpsetPass",
    "PlannedStep",
    "adapter",
    "convert",
    "find_adapter",
]

from onnxforge.passes.convert._converter import ConvertOpsetPass, PlannedStep, convert
from onnxforge.passes.convert._registry import (
    DOWNGRADES,
    UPGRADES,
    ConvertContext,
    adapter,
    find_adapter,
)
