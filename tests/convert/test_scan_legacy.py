"""Scan (batch axis at 8, axes and directions at 9, negative axes below 11) and the legacy
broadcast of Pow/And/Or/Xor/Equal/Greater/Less below 7."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime

BODY = """body (float[2] s_in, float[2] x_in) => (float[2] s_out, float[2] y_out) {
        s_out = Add (s_in, x_in)
        y_out = Identity (s_out) }"""


def scan_9(attrs: str = "") -> str:
    return f"""{header(9)} g (float[2] init, float[5, 2] xs) => (float[2] last, float[5, 2] ys) {{
        last, ys = Scan <num_scan_inputs = 1{attrs}, body = {BODY}> (init, xs) }}"""


def test_scan_9_runs_as_scan_8_over_a_batch_of_1_and_back() -> None:
    model = check_conversion(scan_9(", scan_input_directions = [1]"), 8)
    assert op_types(model)[op_types(model).index("Scan") - 1] == "Unsqueeze"
    scan = [op for op in model.graph.ops if op.op_type == "Scan"][0]
    assert scan._inputs[0] is None and scan.attrs["directions"] == [1]
    check_conversion(model, 11)
    assert [v.name for v in model.graph.outputs] == ["last", "ys"]


def test_scan_9_with_a_scan_axis_other_than_0_cannot_reach_8() -> None:
    with pytest.raises(AdapterError, match="scan_input_axes"):
        convert(model_from_text(scan_9(", scan_input_axes = [1]")), 8)


def test_scan_negative_axes_become_positive_below_11() -> None:
    text = scan_9(", scan_input_axes = [-2], scan_output_axes = [-2]").replace('"" : 9', '"" : 11')
    model = check_conversion(text, 10)
    scan = model.graph.ops[0]
    assert scan.attrs["scan_input_axes"] == [0] and scan.attrs["scan_output_axes"] == [0]


def test_pow_with_legacy_broadcast_from_an_axis_gets_numpy_broadcasting_at_7() -> None:
    text = f"""{header(6, 3)} g (float[2, 3, 4] a, float[3] b) => (float[2, 3, 4] y) {{
        y = Pow <broadcast = 1, axis = 1> (a, b) }}"""
    model = model_from_text(text)
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.random((2, 3, 4)).astype(np.float32) + 0.5,
        "b": np.array([1, 2, 0.5], np.float32),
    }
    expected = evaluate(model, feeds)
    convert(model, 7)
    assert "broadcast" not in model.graph.topo_order()[-1].attrs
    np.testing.assert_allclose(run_onnxruntime(model, feeds)[0], expected[0], rtol=1e-6)


def test_greater_with_numpy_broadcasting_says_broadcast_below_7() -> None:
    text = f"""{header(7)} g (float[2, 3, 4] a, float[4] b) => (bool[2, 3, 4] y) {{
        y = Greater (a, b) }}"""
    model = model_from_text(text)
    convert(model, 6)
    assert model.graph.ops[0].attrs["broadcast"] == 1
