"""Clip conversion: min/max attributes <-> inputs at 11, consumed_inputs at 6."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_clip_min_and_max_become_scalar_inputs_at_11() -> None:
    text = f"""{header(10)} g (float[N, 4] x) => (float[N, 4] y) {{
        y = Clip <min = -0.5, max = 0.25> (x) }}"""
    model = check_conversion(text, 11)
    op = model.graph.ops[0]
    assert [float(v.const.numpy()) for v in op._inputs[1:]] == [-0.5, 0.25]
    assert op._inputs[1].const.numpy().shape == ()


def test_clip_with_only_max_leaves_min_omitted() -> None:
    text = f"""{header(10)} g (float[N, 4] x) => (float[N, 4] y) {{
        y = Clip <max = 0.25> (x) }}"""
    model = check_conversion(text, 12)
    op = model.graph.ops[0]
    assert op._inputs[1] is None and op._inputs[2].const.numpy().dtype.name == "float32"


def test_clip_constant_inputs_become_attributes_at_10() -> None:
    text = f"""{header(13)} g (float[N, 4] x) => (float[N, 4] y) {{
        hi = Constant <value = float {{0.5}}> ()
        y = Clip (x, , hi) }}"""
    model = check_conversion(text, 10)
    assert op_types(model) == ["Clip"] and model.graph.ops[0].attrs == {"max": 0.5}


def test_clip_computed_bound_cannot_go_below_11() -> None:
    text = f"""{header(13)} g (float[N, 4] x, float lo) => (float[N, 4] y) {{
        y = Clip (x, lo) }}"""
    with pytest.raises(AdapterError, match="Clip.*min is computed"):
        convert(model_from_text(text), 10)


def test_clip_consumed_inputs_goes_at_6() -> None:
    text = f"""{header(5, 3)} g (float[2, 4] x) => (float[2, 4] y) {{
        y = Clip <min = -0.5, max = 0.5, consumed_inputs = [0]> (x) }}"""
    model = check_conversion(text, 6)
    assert "consumed_inputs" not in model.graph.ops[0].attrs


def test_clip_with_both_bounds_omitted_loses_the_empty_inputs_below_11() -> None:
    text = f"""{header(13)} g (float[N, 4] x) => (float[N, 4] y) {{ y = Clip (x, , ) }}"""
    model = check_conversion(text, 7)
    assert model.graph.ops[0]._inputs == [model.graph.inputs[0]]
