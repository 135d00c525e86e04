"""OneHot conversion below 11: negative indices and axis."""

from __future__ import annotations

import numpy as np
from adapter_check import check_conversion, header, op_types

ONE_HOT = """g (int64[N] idx) => (float[N, 4] y) {
    depth = Constant <value = int64 {4}> ()
    values = Constant <value = float[2] {0.0, 1.0}> ()
    y = OneHot <axis = AXIS> (idx, depth, values) }"""
FEEDS = {"idx": np.array([0, -1, 3, -4, 2, -5, 7], dtype=np.int64)}


def test_one_hot_negative_indices_are_wrapped_below_11() -> None:
    model = check_conversion(header(11) + ONE_HOT.replace("AXIS", "-1"), 9, feeds=FEEDS)
    assert op_types(model)[-1] == "OneHot" and "Where" in op_types(model)
    assert model.graph.topo_order()[-1].attrs["axis"] == 1


def test_one_hot_constant_indices_are_rewritten_not_wrapped_by_ops() -> None:
    text = f"""{header(11)} g () => (float[3, 4] y) {{
        idx = Constant <value = int64[3] {{0, -1, 2}}> ()
        depth = Constant <value = int64 {{4}}> ()
        values = Constant <value = float[2] {{0.0, 1.0}}> ()
        y = OneHot (idx, depth, values) }}"""
    model = check_conversion(text, 9, feeds={})
    assert "Where" not in op_types(model)
