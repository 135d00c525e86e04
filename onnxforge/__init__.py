"""onnxforge: make ONNX models ready to ship (shapes, opset conversion, folding, cleanup)."""

from __future__ import annotations

__all__ = [
    "DType",
    "Function",
    "Graph",
    "Model",
    "Op",
    "Problem",
    "Tensor",
    "TensorType",
    "Value",
    "__version__",
    "check",
    "convert",
    "fold",
    "infer",
    "load",
    "optimize",
    "save",
    "verify",
]

from onnxforge.api import Problem, check, convert, fold, infer, optimize
from onnxforge.io import load, save
from onnxforge.ir import DType, Function, Graph, Model, Op, Tensor, TensorType, Value, verify

__version__ = "0.1.0"
