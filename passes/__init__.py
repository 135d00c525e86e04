"""Graph passes (onnxforge.passes): the pass manager and one module per pass."""

from __future__ import annotations

__all__: list[str] = []
