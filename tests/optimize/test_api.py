"""The Python API converters call: onnxforge.optimize / infer / convert / fold take a path,
a ModelProto or a Model and return a ModelProto."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import parser

import onnxforge
from onnxforge.errors import AdapterError, ShapeError
from onnxforge.testing import run_onnxruntime

pytest.importorskip("onnxruntime")

MODEL = """<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] x) => (float[N, 4] y) {
    c = Constant <value = float[4] {1.0, 2.0, 3.0, 4.0}> ()
    d = Identity(c)
    s = Add(x, d)
    y = Relu(s)
}"""


def test_optimize_takes_a_proto_and_returns_an_equivalent_smaller_one() -> None:
    proto = parser.parse_model(MODEL)
    result = onnxforge.optimize(proto, opset=18)
    assert isinstance(result, onnx.ModelProto)
    onnx.checker.check_model(result, full_check=True)
    assert [n.op_type for n in result.graph.node] == ["Add", "Relu"]
    assert {o.domain: o.version for o in result.opset_import}[""] == 18
    x = np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32)
    np.testing.assert_allclose(
        run_onnxruntime(result, {"x": x})[0], run_onnxruntime(proto, {"x": x})[0]
    )


def test_optimize_takes_a_path(tmp_path: Path) -> None:
    path = tmp_path / "m.onnx"
    onnx.save(parser.parse_model(MODEL), path)
    result = onnxforge.optimize(path, skip=["eliminate-identity"])
    assert [n.op_type for n in result.graph.node] == ["Add", "Relu"]  # folding took Identity


def test_infer_convert_fold_one_call_each() -> None:
    proto = parser.parse_model(MODEL)
    typed = onnxforge.infer(proto)
    assert {vi.name for vi in typed.graph.value_info} >= {"s"}
    converted = onnxforge.convert(proto, 11)
    assert {o.domain: o.version for o in converted.opset_import}[""] == 11
    folded = onnxforge.fold(proto)
    assert [n.op_type for n in folded.graph.node] == ["Add", "Relu"]


def test_api_errors_are_onnxforge_errors() -> None:
    bad = parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 13]> '
        "g (float[2, 3] a, float[4] b) => (float[2, 3] y) "
        "{ y = Sub(a, b) }"
    )
    with pytest.raises(ShapeError):
        onnxforge.infer(bad)
    with pytest.raises(AdapterError, match="opset 99 does not exist"):
        onnxforge.convert(parser.parse_model(MODEL), 99)
