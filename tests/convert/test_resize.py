"""Upsample and Resize conversion: Upsample-9 <-> Resize-10, Resize-10 <-> 11 (onnxruntime's
Resize-10 rounding as nearest_mode), roi/scales at 13, antialias/axes/policy at 18."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def resize_10(scales: str, mode: str) -> str:
    return f"""{header(10)} g (float[1, 2, 6, 10] x) => (float[?, ?, ?, ?] y) {{
        s = Constant <value = float[4] {{{scales}}}> ()
        y = Resize <mode = "{mode}"> (x, s) }}"""


@pytest.mark.parametrize("scales", ["1.0, 1.0, 2.0, 1.5", "1.0, 1.0, 0.6, 0.75", "1, 1, 1.7, 2.3"])
@pytest.mark.parametrize("mode", ["nearest", "linear"])
def test_resize_10_computes_the_same_at_11_and_13(scales: str, mode: str) -> None:
    model = check_conversion(resize_10(scales, mode), 11)
    assert model.graph.topo_order()[-1].attrs["coordinate_transformation_mode"] == "asymmetric"
    check_conversion(resize_10(scales, mode), 13)


@pytest.mark.parametrize("scales", ["1, 1, 2.0, 0.5", "1, 1, 0.45, 2.3"])
def test_resize_10_nearest_scaling_up_and_down_is_two_resizes_at_11(scales: str) -> None:
    model = check_conversion(resize_10(scales, "nearest"), 11)
    modes = [op.attrs["nearest_mode"] for op in model.graph.topo_order() if op.op_type == "Resize"]
    assert modes == ["floor", "ceil"]
    check_conversion(resize_10(scales, "nearest"), 18)


@pytest.mark.parametrize("scales", [[1, 1, 2.0, 1.5], [1, 1, 0.6, 0.75], [1, 1, 1.7, 0.6]])
def test_resize_10_nearest_with_computed_scales_is_two_resizes_at_11(scales: list) -> None:
    text = f"""{header(10)} g (float[1, 2, 6, 10] x, float[4] s) => (float[?, ?, ?, ?] y) {{
        y = Resize <mode = "nearest"> (x, s) }}"""
    feeds = {
        "x": np.arange(120, dtype=np.float32).reshape(1, 2, 6, 10),
        "s": np.array(scales, dtype=np.float32),
    }
    model = check_conversion(text, 11, feeds=feeds)
    assert op_types(model).count("Resize") == 2
    check_conversion(text, 13, feeds=feeds)


def test_resize_13_asymmetric_with_sizes_goes_down_to_10_as_scales() -> None:
    text = f"""{header(13)} g (float[1, 2, 6, 10] x) => (float[1, 2, 9, 15] y) {{
        sz = Constant <value = int64[4] {{1, 2, 9, 15}}> ()
        y = Resize <mode = "linear", coordinate_transformation_mode = "asymmetric">
            (x, , , sz) }}"""
    model = check_conversion(text, 10)
    assert op_types(model) == ["Resize"] and len(model.graph.ops[0]._inputs) == 2


def test_resize_13_half_pixel_cannot_go_below_11() -> None:
    text = f"""{header(13)} g (float[1, 2, 6, 10] x) => (float[1, 2, 12, 20] y) {{
        s = Constant <value = float[4] {{1.0, 1.0, 2.0, 2.0}}> ()
        y = Resize <mode = "linear"> (x, , s) }}"""
    with pytest.raises(AdapterError, match="half_pixel"):
        convert(model_from_text(text), 10)
    model = check_conversion(text, 11)
    assert model.graph.topo_order()[-1]._inputs[1].const.numpy().size == 0


def test_resize_18_axes_fold_into_full_scales_below_18() -> None:
    text = f"""{header(18)} g (float[1, 2, 6, 10] x) => (float[1, 2, 12, 5] y) {{
        s = Constant <value = float[2] {{2.0, 0.5}}> ()
        y = Resize <mode = "nearest", axes = [2, -1], antialias = 0> (x, , s) }}"""
    model = check_conversion(text, 17)
    resize = model.graph.topo_order()[-1]
    assert resize._inputs[2].const.numpy().tolist() == [1.0, 1.0, 2.0, 0.5]


def test_resize_18_antialias_cannot_go_below_18() -> None:
    text = f"""{header(18)} g (float[1, 2, 6, 10] x) => (float[1, 2, 3, 5] y) {{
        s = Constant <value = float[4] {{1.0, 1.0, 0.5, 0.5}}> ()
        y = Resize <mode = "linear", antialias = 1> (x, , s) }}"""
    with pytest.raises(AdapterError, match="antialias=1"):
        convert(model_from_text(text), 17)


def test_upsample_9_becomes_resize_10_and_back() -> None:
    text = f"""{header(9)} g (float[1, 2, 3, 4] x) => (float[1, 2, 6, 8] y) {{
        s = Constant <value = float[4] {{1.0, 1.0, 2.0, 2.0}}> ()
        y = Upsample <mode = "nearest"> (x, s) }}"""
    model = check_conversion(text, 10)
    assert op_types(model) == ["Constant", "Resize"]
    check_conversion(model, 9)
    assert op_types(model) == ["Constant", "Upsample"]


def test_upsample_9_scales_become_the_attribute_at_8_and_height_width_at_6() -> None:
    text = f"""{header(9)} g (float[1, 2, 3, 4] x) => (float[1, 2, 6, 12] y) {{
        s = Constant <value = float[4] {{1.0, 1.0, 2.0, 3.0}}> ()
        y = Upsample (x, s) }}"""
    model = check_conversion(text, 7)
    assert op_types(model) == ["Upsample"] and model.graph.ops[0].attrs["scales"] == [1, 1, 2, 3]
    convert(model, 6)
    assert model.graph.ops[0].attrs == {"height_scale": 2.0, "width_scale": 3.0}
    convert(model, 13)  # Upsample-1 does not run anywhere: no numbers to compare
    assert op_types(model) == ["Resize"]


def test_resize_18_computed_scales_with_axes_are_spread_over_every_axis_below_18() -> None:
    text = f"""{header(18)} g (float[1, 2, 6, 10] x, float[2] s) => (float[?, ?, ?, ?] y) {{
        y = Resize <mode = "nearest", axes = [2, 3]> (x, , s) }}"""
    feeds = {
        "x": np.random.default_rng(0).standard_normal((1, 2, 6, 10)).astype(np.float32),
        "s": np.array([2.0, 0.5], np.float32),
    }
    model = check_conversion(text, 13, feeds=feeds)
    assert "Concat" in op_types(model)
