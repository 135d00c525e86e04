"""Helpers for tests of onnxforge and of code built on it."""

from __future__ import annotations

__all__ = ["model_from_text", "run_onnxruntime"]

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.parser

from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model


def model_from_text(text: str) -> Model:
    """A Model from ONNX text: ``'<ir_version: 10, opset_import: ["" : 18]> g (...)'``."""
    proto = onnx.parser.parse_model(text)
    onnx.checker.check_model(proto)
    return from_proto(proto)


def run_onnxruntime(
    model: Model | onnx.ModelProto | str, feeds: Mapping[str, np.ndarray]
) -> list[Any]:
    """Outputs of onnxruntime's CPU provider (the test extras install it)."""
    import onnxruntime as ort

    if isinstance(model, Model):
        model = to_proto(model)
    source = model if isinstance(model, str) else model.SerializeToString()
    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(source, options, providers=["CPUExecutionProvider"])
    return session.run(None, dict(feeds))
