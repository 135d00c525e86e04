"""Concat conversion: axis required from 4, non-negative below 11."""

from __future__ import annotations

from adapter_check import check_conversion, header


def test_concat_negative_axis_becomes_positive_below_11() -> None:
    text = f"""{header(13)} g (float[N, 2] a, float[N, 3] b) => (float[N, 5] y) {{
        y = Concat <axis = -1> (a, b) }}"""
    model = check_conversion(text, 10)
    assert model.graph.ops[0].attrs["axis"] == 1


def test_concat_of_opset_3_gets_its_default_axis_written_at_4() -> None:
    text = f"""{header(3, 3)} g (float[2, 2] a, float[2, 3] b) => (float[2, 5] y) {{
        y = Concat (a, b) }}"""
    model = check_conversion(text, 4)
    assert model.graph.ops[0].attrs["axis"] == 1
