"""A FunctionProto holds no initializers: a constant a pass gives a local function's body
(fuse-bias-add's new bias) is written as a Constant op, not dropped (the Conv read a name
nothing defined, and onnx's checker refused the model)."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper

from onnxforge import io
from onnxforge.api._optimize import optimize_model

RNG = np.random.default_rng(0)


def _model() -> onnx.ModelProto:
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    b = numpy_helper.from_array(RNG.standard_normal((1, 4, 1, 1)).astype(np.float32), "b")
    body = [
        helper.make_node("Constant", [], ["w"], value=w),
        helper.make_node("Constant", [], ["b"], value=b),
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "b"], ["y"]),
    ]
    fn = helper.make_function("local", "Block", ["x"], ["y"], body, [helper.make_opsetid("", 17)])
    graph = helper.make_graph(
        [helper.make_node("Block", ["x"], ["y"], domain="local")],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [1, 4, 8, 8])],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("local", 1)]
    return helper.make_model(graph, functions=[fn], opset_imports=opsets, ir_version=8)


@pytest.mark.parametrize("external_data", [False, True])
def test_a_constant_a_pass_adds_to_a_function_body_is_written(
    tmp_path: Path, external_data: bool
) -> None:
    ort = pytest.importorskip("onnxruntime")
    proto = _model()
    model = io.from_proto(proto)
    report = optimize_model(model)
    assert any(r.pass_name.strip() == "fuse-bias-add" and r.modified for r in report.rows)
    path = tmp_path / "out.onnx"
    io.save(model, path, external_data=external_data)
    onnx.checker.check_model(str(path), full_check=True)
    written = onnx.load(path)
    ops = [n.op_type for n in written.functions[0].node]
    assert ops.count("Add") == 0 and ops.count("Constant") == 2  # w, and the bias Conv reads
    x = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    want = ort.InferenceSession(proto.SerializeToString()).run(None, x)[0]
    got = ort.InferenceSession(str(path)).run(None, x)[0]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
