"""Shape rules, one module per op family (onnxforge.shape_infer.rules)."""

from __future__ import annotations

__all__: list[str] = []
