"""Shape start/end (15), Cast's type name (6), CastLike (15) and Constant below the
versions of its attributes and element types."""

from __future__ import annotations

import numpy as np
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_shape_start_and_end_become_a_slice_below_15() -> None:
    text = f"""{header(15)} g (float[N, 3, 4, 5] x) => (int64[2] y) {{
        y = Shape <start = 1, end = -1> (x) }}"""
    model = check_conversion(text, 14)
    assert op_types(model) == ["Shape", "Slice"] and model.graph.outputs[0].name == "y"


def test_shape_without_start_or_end_stays_one_node_below_15() -> None:
    text = f"""{header(15)} g (float[N, 3] x) => (int64[2] y) {{ y = Shape <start = 0> (x) }}"""
    model = check_conversion(text, 13)
    assert op_types(model) == ["Shape"] and model.graph.ops[0].attrs == {}


def test_cast_like_is_a_cast_to_the_known_type_below_15() -> None:
    text = f"""{header(15)} g (float[N, 3] x, int32[1] like) => (int32[N, 3] y) {{
        y = CastLike (x, like) }}"""
    model = check_conversion(text, 14)
    assert op_types(model) == ["Cast"] and model.graph.ops[0].attrs["to"] == 6


def test_cast_names_its_type_below_6_and_numbers_it_again_above() -> None:
    text = f"""{header(9)} g (float[2, 3] x) => (double[2, 3] y) {{ y = Cast <to = 11> (x) }}"""
    model = model_from_text(text)
    feeds = {"x": np.ones((2, 3), np.float32)}
    convert(model, 5)
    assert model.graph.ops[0].attrs["to"] == "DOUBLE"
    assert evaluate(model, feeds)[0].dtype == np.float64
    check_conversion(model, 13, feeds=feeds)
    assert model.graph.ops[0].attrs["to"] == 11


def test_constant_value_ints_become_a_value_tensor_below_12() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 2, 3] y) {{
        s = Constant <value_ints = [0, 2, 3]> ()
        y = Reshape (x, s) }}"""
    model = check_conversion(text, 11)
    constant = [op for op in model.graph.ops if op.op_type == "Constant"]
    assert list(constant[0].attrs) == ["value"]


def test_constant_int64_below_9_becomes_an_initializer() -> None:
    text = f"""{header(13)} g (float[N, 6] x) => (float[N, 6] y) {{
        c = Constant <value = float[1] {{2.0}}> ()
        y = Mul (x, c) }}"""
    model = check_conversion(text, 8)
    assert op_types(model) == ["Constant", "Mul"]
    text = f"""{header(13)} g (float[2, 6] x) => (float[3, 4] y) {{
        s = Constant <value = int64[2] {{3, 4}}> ()
        y = Reshape (x, s) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Reshape"] and model.graph.initializers[0].name == "s"


def test_constant_of_shape_with_a_known_shape_becomes_an_initializer_below_9() -> None:
    text = f"""{header(9)} g (float[2, 3] x) => (float[2, 3] y) {{
        s = Constant <value = int64[2] {{2, 3}}> ()
        c = ConstantOfShape <value = float[1] {{1.5}}> (s)
        y = Add (x, c) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Add"]
    (c,) = [v for v in model.graph.initializers if v.name == "c"]
    assert c.const.numpy().tolist() == [[1.5] * 3] * 2
