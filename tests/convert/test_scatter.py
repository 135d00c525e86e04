"""Scatter (deprecated at 11) <-> ScatterElements."""

from __future__ import annotations

import numpy as np
from adapter_check import check_conversion, header, op_types


def test_scatter_becomes_scatter_elements_at_11_and_back() -> None:
    text = f"""{header(9)} g (float[3, 4] x, int64[1, 2] i, float[1, 2] u) => (float[3, 4] y) {{
        y = Scatter <axis = 1> (x, i, u) }}"""
    feeds = {
        "x": np.zeros((3, 4), np.float32),
        "i": np.array([[1, 3]], np.int64),
        "u": np.array([[5, 6]], np.float32),
    }
    model = check_conversion(text, 13, feeds=feeds)
    assert op_types(model) == ["ScatterElements"]
    check_conversion(model, 9, feeds=feeds)
    assert op_types(model) == ["Scatter"]
