"""Static shape inference (onnxforge.shape_infer): exact broadcasting, every Sub and Split
version, symbolic dims, and onnx's per-node inference for ops without an own rule."""

from __future__ import annotations

__all__ = [
    "Assumption",
    "InferError",
    "InferReport",
    "Resumable",
    "StaleDeclaration",
    "broadcast_shape",
    "infer",
    "infer_resumable",
]

from onnxforge.shape_infer import rules  # noqa: F401  (registers the rules)
from onnxforge.shape_infer.broadcast import broadcast_shape
from onnxforge.shape_infer.engine import (
    Assumption,
    InferError,
    InferReport,
    Resumable,
    StaleDeclaration,
    infer,
    infer_resumable,
)
