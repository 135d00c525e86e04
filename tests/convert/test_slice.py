"""Slice conversion: attributes <-> inputs (10), negative axes below 11."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_slice_attributes_become_inputs_at_10() -> None:
    text = f"""{header(9)} g (float[N, 6] x) => (float[N, 3] y) {{
        y = Slice <starts = [1], ends = [4], axes = [1]> (x) }}"""
    model = check_conversion(text, 10)
    assert [v.const.numpy().tolist() for v in model.graph.ops[0]._inputs[1:]] == [[1], [4], [1]]


def test_slice_constant_inputs_with_negative_axes_reach_9() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 3] y) {{
        st = Constant <value = int64[1] {{1}}> ()
        en = Constant <value = int64[1] {{-2}}> ()
        ax = Constant <value = int64[1] {{-1}}> ()
        y = Slice (x, st, en, ax) }}"""
    model = check_conversion(text, 9)
    assert op_types(model) == ["Slice"]
    assert model.graph.ops[0].attrs == {"starts": [1], "ends": [-2], "axes": [1]}


def test_slice_with_steps_cannot_go_below_10() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 3] y) {{
        st = Constant <value = int64[1] {{0}}> ()
        en = Constant <value = int64[1] {{6}}> ()
        ax = Constant <value = int64[1] {{1}}> ()
        sp = Constant <value = int64[1] {{2}}> ()
        y = Slice (x, st, en, ax, sp) }}"""
    with pytest.raises(AdapterError, match="steps"):
        convert(model_from_text(text), 9)
