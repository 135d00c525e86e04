"""Scan conversion: the batch axis of 8, axes and directions of 9, negative axes below 11."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text

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
