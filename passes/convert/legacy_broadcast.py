"""Pow, And, Or, Xor, Equal, Greater and Less at 7: legacy ``broadcast``/``axis`` <-> numpy
broadcasting, by the adapters Add, Sub, Mul and Div use (sub.py)."""

from __future__ import annotations

__all__ = ["LEGACY_BROADCAST"]

from onnxforge.passes.convert._registry import adapter
from onnxforge.passes.convert.sub import arith_6_7, arith_7_6

LEGACY_BROADCAST = ("Pow", "And", "Or", "Xor", "Equal", "Greater", "Less")

adapter(LEGACY_BROADCAST, 6, 7)(arith_6_7)
adapter(LEGACY_BROADCAST, 7, 6)(arith_7_6)
