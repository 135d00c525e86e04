"""Shape rules, one module per op family (onnxforge.shape_infer.rules); importing registers them."""

from __future__ import annotations

__all__: list[str] = []

from onnxforge.shape_infer.rules import control, elementwise, shapes, tensor  # noqa: F401
