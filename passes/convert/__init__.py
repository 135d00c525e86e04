"""Opset version conversion (onnxforge.passes.convert): the pass and one adapter module per op."""

from __future__ import annotations

__all__: list[str] = []
