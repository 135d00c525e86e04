"""Static shape inference (onnxforge.shape_infer)."""

from __future__ import annotations

__all__: list[str] = []
