"""Cast's type name below 6, CastLike below 15."""

from __future__ import annotations

import numpy as np
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


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
