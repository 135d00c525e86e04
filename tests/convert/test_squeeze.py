"""Squeeze/Unsqueeze conversion: axes attribute <-> input at 13, negative axes below 11."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_unsqueeze_axes_become_an_input_at_13_and_an_attribute_again_at_12() -> None:
    text = f"""{header(12)} g (float[N, 4] x) => (float[N, 1, 4, 1] y) {{
        y = Unsqueeze <axes = [1, -1]> (x) }}"""
    model = check_conversion(text, 13)
    assert model.graph.ops[0]._inputs[1].const.numpy().tolist() == [1, -1]
    back = f"""{header(13)} g (float[N, 4] x) => (float[N, 1, 4, 1] y) {{
        axes = Constant <value = int64[2] {{1, -1}}> ()
        y = Unsqueeze (x, axes) }}"""
    model = check_conversion(back, 12)
    assert op_types(model) == ["Unsqueeze"] and model.graph.ops[0].attrs["axes"] == [1, -1]


def test_squeeze_without_axes_stays_without_both_ways() -> None:
    text = f"""{header(12)} g (float[1, 4, 1] x) => (float[4] y) {{ y = Squeeze (x) }}"""
    model = check_conversion(text, 13)
    assert len(model.graph.ops[0]._inputs) == 1
    check_conversion(text.replace('"" : 12', '"" : 13'), 12)


def test_squeeze_axes_from_shape_inference_become_the_attribute() -> None:
    text = f"""{header(13)} g (float[N, 1, 4] x) => (float[N, 4] y) {{
        s = Shape (x)
        one = Constant <value = int64[1] {{1}}> ()
        two = Constant <value = int64[1] {{2}}> ()
        ax = Slice (s, one, two)
        y = Squeeze (x, ax) }}"""
    model = check_conversion(text, 12)
    squeeze = [op for op in model.graph.ops if op.op_type == "Squeeze"][0]
    assert squeeze.attrs["axes"] == [1]


def test_unsqueeze_computed_axes_cannot_go_below_13() -> None:
    text = f"""{header(13)} g (float[N, 4] x, int64[1] axes) => (float[N, 4, 1] y) {{
        y = Unsqueeze (x, axes) }}"""
    with pytest.raises(AdapterError, match="Unsqueeze.*not a constant"):
        convert(model_from_text(text), 12)


def test_negative_axes_become_positive_below_11() -> None:
    text = f"""{header(13)} g (float[N, 4] x) => (float[N, 4, 1] y) {{
        axes = Constant <value = int64[1] {{-1}}> ()
        u = Unsqueeze (x, axes)
        y = Squeeze (u, axes) }}"""
    text = text.replace("(float[N, 4, 1] y)", "(float[N, 4] y)")
    model = check_conversion(text, 10)
    unsq, sq = model.graph.topo_order()
    assert unsq.attrs["axes"] == [2] and sq.attrs["axes"] == [2]
