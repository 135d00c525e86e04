"""Softmax/LogSoftmax/Hardmax conversion: the axis semantics of 13 both ways, negative axes
below 11."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header, op_types, unknown_rank

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert

OPS = ["Softmax", "LogSoftmax", "Hardmax"]


@pytest.mark.parametrize("op_type", OPS)
def test_softmax_12_default_axis_over_the_tail_becomes_a_flatten_reshape_sandwich(
    op_type: str,
) -> None:
    text = f"""{header(12)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{ y = {op_type} (x) }}"""
    model = check_conversion(text, 13, dims={"N": 2})
    assert op_types(model) == ["Shape", "Flatten", op_type, "Reshape"]
    assert model.graph.outputs[0].name == "y"


@pytest.mark.parametrize("op_type", OPS)
def test_softmax_12_on_the_last_axis_keeps_one_node(op_type: str) -> None:
    text = f"""{header(12)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{
        y = {op_type} <axis = 2> (x) }}"""
    model = check_conversion(text, 13)
    assert op_types(model) == [op_type]


def test_softmax_12_with_only_ones_after_the_axis_keeps_one_node() -> None:
    text = (
        f"""{header(12)} g (float[N, 4, 1, 1] x) => (float[N, 4, 1, 1] y) {{ y = Softmax (x) }}"""
    )
    model = check_conversion(text, 13)
    assert op_types(model) == ["Softmax"] and model.graph.ops[0].attrs["axis"] == 1


def test_softmax_12_with_an_unknown_rank_uses_the_sandwich() -> None:
    text = f"""{header(12)} g (float[N, 3, 4] x, int64[K] s) => (float[N, 3, 4] y) {{
        z = Reshape (x, s)
        y = Softmax (z) }}"""
    rng = np.random.default_rng(0)
    feeds = {"x": rng.standard_normal((2, 3, 4)).astype(np.float32), "s": np.array([2, 3, 4])}
    model = check_conversion(text, 13, feeds=feeds)
    assert op_types(model) == ["Reshape", "Shape", "Flatten", "Softmax", "Reshape"]


@pytest.mark.parametrize("op_type", OPS)
def test_softmax_13_default_last_axis_goes_down_as_axis_minus_one(op_type: str) -> None:
    text = f"""{header(13)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{ y = {op_type} (x) }}"""
    model = check_conversion(text, 12)
    assert op_types(model) == [op_type] and model.graph.ops[0].attrs["axis"] == -1


@pytest.mark.parametrize("op_type", OPS)
def test_softmax_13_on_a_middle_axis_goes_down_through_a_transpose(op_type: str) -> None:
    text = f"""{header(13)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{
        y = {op_type} <axis = 1> (x) }}"""
    model = check_conversion(text, 12)
    assert op_types(model) == ["Transpose", op_type, "Transpose"]


def test_softmax_13_middle_axis_with_unknown_rank_is_refused_naming_the_node() -> None:
    text = f"""{header(13)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{
        y = Softmax <axis = 1> (x) }}"""
    with pytest.raises(AdapterError, match=r"Softmax node .* 13 -> 12.*rank is unknown"):
        convert(unknown_rank(text, "x"), 12)


def test_softmax_13_with_negative_axis_reaches_opset_7() -> None:
    text = f"""{header(13)} g (float[N, 3, 4] x) => (float[N, 3, 4] y) {{
        y = LogSoftmax <axis = -2> (x) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Transpose", "LogSoftmax", "Transpose"]
    assert model.graph.topo_order()[1].attrs["axis"] == 2


def test_softmax_12_middle_axis_up_and_back_down_computes_the_same() -> None:
    text = f"""{header(12)} g (float[N, 3, 4, 5] x) => (float[N, 3, 4, 5] y) {{
        y = Softmax <axis = 2> (x) }}"""
    model = check_conversion(text, 13)
    check_conversion(model, 12)
