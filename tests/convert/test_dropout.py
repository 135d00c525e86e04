"""Dropout conversion: is_test (7), the mask's type (10), ratio/training_mode inputs (12)."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_dropout_ratio_becomes_an_input_at_12_and_an_attribute_again_at_11() -> None:
    text = f"""{header(11)} g (float[N, 4] x) => (float[N, 4] y) {{
        y = Dropout <ratio = 0.25> (x) }}"""
    model = check_conversion(text, 12)
    assert float(model.graph.ops[0]._inputs[1].const.numpy()) == 0.25
    check_conversion(model, 11)
    assert model.graph.ops[0].attrs == {"ratio": 0.25}


def test_dropout_with_a_false_training_mode_goes_below_12() -> None:
    text = f"""{header(13)} g (float[N, 4] x, float r) => (float[N, 4] y) {{
        t = Constant <value = bool {{0}}> ()
        y = Dropout <seed = 3> (x, r, t) }}"""
    model = check_conversion(
        text, 10, feeds={"x": np.ones((2, 4), np.float32), "r": np.array(0.5, np.float32)}
    )
    assert op_types(model) == ["Dropout"] and model.graph.ops[0].attrs == {}


def test_dropout_that_may_train_cannot_go_below_12() -> None:
    text = f"""{header(13)} g (float[N, 4] x, bool t) => (float[N, 4] y) {{
        y = Dropout (x, , t) }}"""
    with pytest.raises(AdapterError, match="training_mode"):
        convert(model_from_text(text), 11)


def test_dropout_mask_read_below_10_is_all_true_as_at_inference() -> None:
    text = f"""{header(12)} g (float[N, 4] x) => (float[N, 4] y, bool[N, 4] mask) {{
        y, mask = Dropout (x) }}"""
    model = check_conversion(text, 9)
    assert op_types(model) == ["Dropout", "Shape", "ConstantOfShape"]
    assert [v.name for v in model.graph.outputs] == ["y", "mask"]


def test_dropout_mask_read_below_12_is_all_true_as_at_inference() -> None:
    """onnxruntime's Dropout-10 gives an all-false mask at inference: the mask is a constant."""
    text = f"""{header(12)} g (float[N, 4] x) => (float[N, 4] y, bool[N, 4] mask) {{
        y, mask = Dropout (x) }}"""
    model = check_conversion(text, 11)
    assert op_types(model) == ["Dropout", "Shape", "ConstantOfShape"]
    assert [v.name for v in model.graph.outputs] == ["y", "mask"]


def test_dropout_mask_read_above_9_is_cast_back_to_the_data_type() -> None:
    text = f"""{header(9)} g (float[N, 4] x) => (float[N, 4] y, float[N, 4] mask) {{
        y, mask = Dropout (x) }}"""
    model = model_from_text(text)
    convert(model, 12)
    assert op_types(model) == ["Dropout", "Cast"]
    assert [v.name for v in model.graph.outputs] == ["y", "mask"]


def test_dropout_unread_mask_is_dropped_going_below_10() -> None:
    text = f"""{header(10)} g (float[N, 4] x) => (float[N, 4] y) {{
        y, mask = Dropout (x) }}"""
    model = check_conversion(text, 7)
    assert len(model.graph.ops[0]._outputs) == 1


def test_dropout_below_7_says_is_test() -> None:
    text = f"""{header(7)} g (float[N, 4] x) => (float[N, 4] y) {{ y = Dropout (x) }}"""
    model = model_from_text(text)
    convert(model, 6)
    assert model.graph.ops[0].attrs == {"is_test": 1}
    convert(model, 7)
    assert model.graph.ops[0].attrs == {}
