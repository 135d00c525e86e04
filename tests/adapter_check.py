"""Conversion tests of per-op adapters: convert a model from ONNX text, verify it, and compare
it with the original on onnxruntime with the same random inputs."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from onnxforge import ir
from onnxforge.io import to_proto
from onnxforge.ir import DType, Model, TensorType
from onnxforge.kernels import run as run_op
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime


def random_feeds(model: Model, dims: Mapping[str, int] | None = None, seed: int = 0) -> dict:
    """Random inputs for every graph input; symbolic dims take ``dims`` (3 by default)."""
    rng = np.random.default_rng(seed)
    feeds = {}
    for value in model.graph.inputs:
        if value.const is not None:
            continue
        t = value.type
        assert isinstance(t, TensorType) and t.shape is not None, value
        shape = [d if isinstance(d, int) else (dims or {}).get(str(d), 3) for d in t.shape]
        np_dtype = DType(t.dtype).numpy
        if t.dtype == DType.BOOL:
            feeds[value.name] = rng.random(shape) < 0.5
        elif np_dtype.kind in "iu":
            feeds[value.name] = rng.integers(-5 if np_dtype.kind == "i" else 0, 6, shape).astype(
                np_dtype
            )
        else:
            feeds[value.name] = rng.standard_normal(shape).astype(np_dtype)
    return feeds


def evaluate(model: Model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs through onnxforge.kernels (onnx's reference where we have none):
    any opset, below 7 included."""
    graph = model.graph
    env: dict = {v: feeds[v.name] for v in graph.inputs if v.name in feeds}
    for value in graph.initializers:
        env.setdefault(value, value.const.numpy())  # type: ignore[union-attr]
    for op in graph.topo_order():
        args = [None if v is None else env[v] for v in graph.inputs_of(op)]
        results = run_op(op, args, dict(model.opset_imports))
        for value, result in zip(graph.outputs_of(op), results, strict=False):
            if value is not None:
                env[value] = result
    return [env[v] for v in graph.outputs]


def run(model: Model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """onnxruntime from opset 7, our kernels below."""
    return run_onnxruntime(model, feeds) if model.opset() >= 7 else evaluate(model, feeds)


def op_types(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.topo_order()]


def check_conversion(
    text: str | Model,
    opset: int,
    *,
    feeds: Mapping[str, np.ndarray] | None = None,
    dims: Mapping[str, int] | None = None,
    rtol: float = 1e-5,
    atol: float = 1e-6,
) -> Model:
    """Convert the model to ``opset``; it must verify, pass onnx's full check, and compute
    what the original computed on onnxruntime. Returns the converted model."""
    model = model_from_text(text) if isinstance(text, str) else text
    feeds = dict(feeds) if feeds is not None else random_feeds(model, dims)
    expected = run(model, feeds)
    convert(model, opset)
    ir.verify(model)
    assert model.opset() == opset
    onnx.checker.check_model(to_proto(model), full_check=True)
    got = run(model, feeds)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.shape == e.shape and g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=rtol, atol=atol)
    return model


def unknown_rank(text: str, *names: str) -> Model:
    """The model with the named graph inputs' shapes forgotten (rank unknown)."""
    model = model_from_text(text)
    for value in model.graph.inputs:
        if value.name in names:
            value.type = TensorType(value.type.dtype, None)  # type: ignore[union-attr]
    return model


def header(opset: int, ir_version: int = 8) -> str:
    return f'<ir_version: {ir_version}, opset_import: ["" : {opset}]>'
