"""Numpy kernels: nn ops."""

from __future__ import annotations

__all__: list[str] = []
