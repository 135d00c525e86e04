"""Running a model before and after conversion: onnxruntime from opset 7, our kernels below."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import onnx

from onnxforge import ir
from onnxforge.io import to_proto
from onnxforge.ir import Model, Value
from onnxforge.kernels import run as run_op
from onnxforge.passes.convert import convert
from onnxforge.testing import run_onnxruntime


def evaluate(model: Model, feeds: Mapping[str, np.ndarray]) -> list[np.ndarray]:
    """The graph's outputs, every op through onnxforge.kernels (any opset, 1 included)."""
    graph = model.graph
    env: dict[Value, np.ndarray] = {}
    for value in graph.inputs:
        env[value] = feeds[value.name]
    for value in graph.initializers:
        if value not in env:
            env[value] = value.const.numpy()  # type: ignore[union-attr]
    for op in graph.topo_order():
        args = [None if v is None else env[v] for v in graph.inputs_of(op)]
        results = run_op(op, args, dict(model.opset_imports))
        for out, result in zip(graph.outputs_of(op), results, strict=False):
            if out is not None:
                env[out] = result
    return [env[v] for v in graph.outputs]


def outputs(
    model: Model, feeds: Mapping[str, np.ndarray], *, ours: bool = False
) -> list[np.ndarray]:
    """onnxruntime where it runs the model's opset (7 and later), else (or with ``ours``:
    bfloat16 feeds, where onnxruntime departs from the spec) our kernels."""
    if model.opset() >= 7 and not ours:
        return run_onnxruntime(model, feeds)
    return evaluate(model, feeds)


def check_model(model: Model) -> None:
    """onnx's full check (with its shape inference) on the converted model."""
    onnx.checker.check_model(to_proto(model), full_check=True)


def convert_and_compare(
    model: Model,
    opset: int,
    feeds: Mapping[str, np.ndarray],
    *,
    allow_cast: bool = False,
    full_check: bool = True,
    ours: bool = False,
    compare: bool = True,
) -> list[np.ndarray]:
    """Convert ``model`` to ``opset``, verify it, check it with onnx and (unless not
    ``compare``) assert it computes what it did."""
    expected = outputs(model, feeds, ours=ours) if compare else []
    convert(model, opset, allow_cast=allow_cast)
    ir.verify(model)
    assert model.opset() == opset
    if full_check:
        check_model(model)
    if not compare:
        return []
    got = outputs(model, feeds, ours=ours)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g.dtype == e.dtype and g.shape == e.shape
        np.testing.assert_array_equal(g, e)
    return got
