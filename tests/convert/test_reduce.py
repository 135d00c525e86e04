"""Reduce* conversion: axes attribute <-> input (ReduceSum 12 <-> 13, the others 17 <-> 18),
noop_with_empty_axes, negative axes below 11."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text

REDUCE = [
    "ReduceMean",
    "ReduceMax",
    "ReduceMin",
    "ReduceProd",
    "ReduceL1",
    "ReduceL2",
    "ReduceLogSumExp",
    "ReduceSumSquare",
]


@pytest.mark.parametrize("op_type", REDUCE)
def test_reduce_axes_attribute_becomes_an_input_at_18(op_type: str) -> None:
    text = f"""{header(17)} g (float[N, 4, 5] x) => (float[N, 1, 5] y) {{
        y = {op_type} <axes = [1], keepdims = 1> (x) }}"""
    model = check_conversion(text, 18)
    (op,) = model.graph.ops
    assert "axes" not in op.attrs and len(op._inputs) == 2
    assert op._inputs[1].const.numpy().tolist() == [1]


@pytest.mark.parametrize("op_type", REDUCE)
def test_reduce_axes_input_becomes_the_attribute_at_17(op_type: str) -> None:
    text = f"""{header(18)} g (float[N, 4, 5] x) => (float[N, 5] y) {{
        axes = Constant <value = int64[1] {{-2}}> ()
        y = {op_type} <keepdims = 0> (x, axes) }}"""
    model = check_conversion(text, 17)
    assert op_types(model) == [op_type]
    assert model.graph.ops[0].attrs["axes"] == [-2]


def test_reduce_sum_axes_move_at_13_both_ways() -> None:
    up = f"""{header(12)} g (float[N, 4, 5] x) => (float[N, 4] y) {{
        y = ReduceSum <axes = [-1], keepdims = 0> (x) }}"""
    model = check_conversion(up, 13)
    assert len(model.graph.ops[0]._inputs) == 2
    down = f"""{header(13)} g (float[N, 4, 5] x) => (float[1, 4, 1] y) {{
        axes = Constant <value = int64[2] {{0, 2}}> ()
        y = ReduceSum (x, axes) }}"""
    model = check_conversion(down, 12)
    assert model.graph.ops[0].attrs["axes"] == [0, 2]


def test_reduce_without_axes_reduces_everything_both_ways() -> None:
    text = f"""{header(17)} g (float[N, 4] x) => (float[1, 1] y) {{ y = ReduceMean (x) }}"""
    model = check_conversion(text, 18)
    assert len(model.graph.ops[0]._inputs) == 1
    check_conversion(text.replace('"" : 17', '"" : 18'), 13)


def test_reduce_noop_with_empty_axes_becomes_identity_going_down() -> None:
    text = f"""{header(18)} g (float[N, 4] x) => (float[N, 4] y) {{
        y = ReduceMax <noop_with_empty_axes = 1> (x) }}"""
    model = check_conversion(text, 17)
    assert op_types(model) == ["Identity"]


def test_reduce_computed_axes_cannot_go_below_18() -> None:
    text = f"""{header(18)} g (float[N, 4] x, int64[1] axes) => (float[N] y) {{
        y = ReduceMean <keepdims = 0> (x, axes) }}"""
    with pytest.raises(AdapterError, match="ReduceMean.*axes.*not a constant"):
        convert(model_from_text(text), 17)


def test_reduce_negative_axes_are_made_positive_below_11() -> None:
    text = f"""{header(11)} g (float[N, 4, 5] x) => (float[N, 4] y) {{
        y = ReduceSum <axes = [-1], keepdims = 0> (x) }}"""
    model = check_conversion(text, 10)
    assert model.graph.ops[0].attrs["axes"] == [2]


def test_reduce_mean_from_18_reaches_7_through_every_step() -> None:
    text = f"""{header(18)} g (float[N, 4, 5] x) => (float[N, 4, 1] y) {{
        axes = Constant <value = int64[1] {{-1}}> ()
        y = ReduceMean (x, axes) }}"""
    model = check_conversion(text, 7)
    assert model.graph.ops[0].attrs["axes"] == [2]


def test_reduce_with_an_empty_axes_input_reduces_everything_below_18() -> None:
    text = f"""{header(18)} g (float[N, 4] x, int64[0] axes) => (float[1, 1] y) {{
        y = ReduceSum (x, axes) }}"""
    feeds = {"x": np.ones((2, 4), np.float32), "axes": np.zeros((0,), np.int64)}
    model = check_conversion(text, 12, feeds=feeds)
    assert "axes" not in model.graph.ops[0].attrs and len(model.graph.ops[0]._inputs) == 1
