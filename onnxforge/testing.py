"""Helpers for tests of onnxforge and of code built on it."""

from __future__ import annotations

__all__ = ["assert_models_close", "model_from_text", "random_feeds", "run_onnxruntime"]

from collections.abc import Mapping
from typing import Any

import numpy as np
import onnx
import onnx.parser

from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model


def model_from_text(text: str, /, **weights: np.ndarray) -> Model:
    """A Model from ONNX text: ``'<ir_version: 10, opset_import: ["" : 18]> g (...)'``, with
    ``weights`` added as initializers under their keyword names (checked by onnx's checker)."""
    from onnx import numpy_helper  # noqa: PLC0415

    proto = onnx.parser.parse_model(text)
    proto.graph.initializer.extend(numpy_helper.from_array(a, n) for n, a in weights.items())
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


def random_feeds(model: Model | onnx.ModelProto, *, dim: int = 3, seed: int = 0) -> dict:
    """Random inputs for every graph input without a default: symbolic dims ``dim``; floats
    standard normal, integers in [0, 2), booleans either."""
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    initialized = {t.name for t in proto.graph.initializer}
    rng = np.random.default_rng(seed)
    feeds = {}
    for vi in proto.graph.input:
        if vi.name in initialized:
            continue
        tt = vi.type.tensor_type
        shape = [d.dim_value if d.HasField("dim_value") else dim for d in tt.shape.dim]
        dtype = onnx.helper.tensor_dtype_to_np_dtype(tt.elem_type)
        if dtype == np.bool_:
            feeds[vi.name] = rng.integers(0, 2, shape).astype(bool)
        elif dtype.kind in "iu":
            feeds[vi.name] = rng.integers(0, 2, shape).astype(dtype)
        else:
            feeds[vi.name] = rng.standard_normal(shape).astype(dtype)
    return feeds


def assert_models_close(
    expected: Model | onnx.ModelProto,
    actual: Model | onnx.ModelProto,
    feeds: Mapping[str, np.ndarray] | None = None,
    *,
    rtol: float = 1e-4,
    atol: float = 1e-5,
) -> None:
    """Both models give the same outputs on onnxruntime for the same (random) inputs. Take
    ``to_proto(model)`` before a pass changes ``model`` in place to keep the original."""
    if feeds is None:
        feeds = random_feeds(expected)
    want, got = run_onnxruntime(expected, feeds), run_onnxruntime(actual, feeds)
    assert len(want) == len(got), f"{len(want)} outputs before, {len(got)} after"
    for i, (w, g) in enumerate(zip(want, got, strict=True)):
        np.testing.assert_allclose(g, w, rtol=rtol, atol=atol, err_msg=f"output {i}")
