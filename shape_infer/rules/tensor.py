"""Shape rules of tensor-splitting ops: Split in every version."""

from __future__ import annotations

__all__: list[str] = []
