"""Shape rules, one module per op family (onnxforge.shape_infer.rules); importing registers."""

from __future__ import annotations

__all__: list[str] = []

from onnxforge.shape_infer.rules import (  # noqa: F401
    contrib,
    control,
    elementwise,
    linalg,
    ml,
    nn,
    shapes,
    sized,
    tensor,
    unary,
)
