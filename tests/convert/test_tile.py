"""Tile at 6: (tiles, axis) <-> repeats."""

from __future__ import annotations

import numpy as np
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_tile_repeats_become_one_tile_1_per_repeated_axis_and_back() -> None:
    text = f"""{header(13)} g (float[2, 3] x) => (float[4, 9] y) <int64[2] r = {{2, 3}}> {{
        y = Tile (x, r) }}"""
    model = model_from_text(text)
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3)}
    expected = evaluate(model, feeds)
    convert(model, 5)
    assert op_types(model) == ["Tile", "Tile"]
    convert(model, 13)
    assert op_types(model) == ["Tile", "Tile"]
    np.testing.assert_array_equal(
        check_conversion(model, 13, feeds=feeds).graph.outputs[0].name, "y"
    )
    np.testing.assert_array_equal(evaluate(model, feeds)[0], expected[0])
