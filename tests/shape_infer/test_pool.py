"""Pooling with ceil_mode over a symbolic spatial dim: the written expression evaluates to what
onnxruntime computes at every size it runs, for kernels, strides and pads up to 3, at an opset
before and after onnx wrote down the rule that drops a window starting in the end padding."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from onnx import TensorProto, helper

from onnxforge.io import from_proto
from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate

ort = pytest.importorskip("onnxruntime")


@pytest.mark.parametrize("opset", [11, 19])
@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
def test_ceil_mode_windows_over_a_symbolic_dim_are_onnxruntimes(op_type: str, opset: int) -> None:
    checked = 0
    for k, s, begin, end in itertools.product([1, 2, 3], [1, 2, 3], [0, 1, 2], [0, 1, 2]):
        if begin >= k or end >= k:
            continue  # onnxruntime refuses pads as wide as the kernel
        node = helper.make_node(
            op_type, ["x"], ["y"], kernel_shape=[k], strides=[s], pads=[begin, end], ceil_mode=1
        )
        graph = helper.make_graph(
            [node],
            "g",
            [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1, "H"])],
            [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        )
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
        model.ir_version = 9
        ours = from_proto(model)
        assert not infer(ours).errors
        t = ours.graph.outputs[0].type
        assert isinstance(t, TensorType) and t.shape is not None and t.shape[2] is not None
        session = ort.InferenceSession(
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        for h in range(1, 12):
            try:
                (y,) = session.run(None, {"x": np.zeros((1, 1, h), np.float32)})
            except Exception:  # noqa: BLE001  (too small for the kernel: no size to compare)
                continue
            assert evaluate(t.shape[2], {"H": h}) == y.shape[2], (k, s, begin, end, h, t)
            checked += 1
    assert checked > 300
