"""Numpy kernels per op and schema version (onnxforge.kernels)."""

from __future__ import annotations

__all__: list[str] = []
