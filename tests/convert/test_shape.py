"""Shape below 15: start and end through Slice."""

from __future__ import annotations

from adapter_check import check_conversion, header, op_types


def test_shape_start_and_end_become_a_slice_below_15() -> None:
    text = f"""{header(15)} g (float[N, 3, 4, 5] x) => (int64[2] y) {{
        y = Shape <start = 1, end = -1> (x) }}"""
    model = check_conversion(text, 14)
    assert op_types(model) == ["Shape", "Slice"] and model.graph.outputs[0].name == "y"


def test_shape_without_start_or_end_stays_one_node_below_15() -> None:
    text = f"""{header(15)} g (float[N, 3] x) => (int64[2] y) {{ y = Shape <start = 0> (x) }}"""
    model = check_conversion(text, 13)
    assert op_types(model) == ["Shape"] and model.graph.ops[0].attrs == {}
