"""The public API's floor: functions that compose io, inference, passes and runtimes
(optimize, check, infer, convert, fold). Everything they use lies below them; nothing below
imports them."""

from __future__ import annotations

__all__ = [
    "Calibration",
    "MixedPrecision",
    "Problem",
    "check",
    "choose_float32_ops",
    "choose_float32_weights",
    "convert",
    "fold",
    "infer",
    "optimize",
]

from onnxforge.api._check import Problem, check
from onnxforge.api._mixed_precision import (
    Calibration,
    MixedPrecision,
    choose_float32_ops,
    choose_float32_weights,
)
from onnxforge.api._optimize import convert, fold, infer, optimize
