"""Shape rules of element-wise ops: Sub and the other arithmetic ops, every broadcasting rule."""

from __future__ import annotations

__all__: list[str] = []
