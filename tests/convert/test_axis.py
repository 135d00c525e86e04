"""ArgMax, ArgMin, Compress, Flatten below 11 (non-negative axis) and ArgMax/ArgMin below 12."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


@pytest.mark.parametrize(
    ("body", "out"),
    [
        ("y = ArgMax <axis = -1> (x)", "int64[N, 3, 1] y"),
        ("y = ArgMin <axis = -2, keepdims = 0> (x)", "int64[N, 4] y"),
        ("y = Flatten <axis = -1> (x)", "float[?, 4] y"),
    ],
)
def test_negative_axis_becomes_positive_below_11(body: str, out: str) -> None:
    text = f"""{header(13)} g (float[N, 3, 4] x) => ({out}) {{ {body} }}"""
    model = check_conversion(text, 9)
    assert model.graph.ops[0].attrs["axis"] >= 0


def test_compress_negative_axis_becomes_positive_below_11() -> None:
    text = f"""{header(11)} g (float[N, 3] x) => (float[N, ?] y) {{
        c = Constant <value = bool[3] {{1, 0, 1}}> ()
        y = Compress <axis = -1> (x, c) }}"""
    model = check_conversion(text, 9)
    assert model.graph.ops[-1].attrs["axis"] == 1


def test_argmax_select_last_index_1_cannot_go_below_12() -> None:
    text = f"""{header(12)} g (float[N, 3] x) => (int64[N, 1] y) {{
        y = ArgMax <axis = 1, select_last_index = 1> (x) }}"""
    with pytest.raises(AdapterError, match="select_last_index=1"):
        convert(model_from_text(text), 11)
