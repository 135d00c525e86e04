"""GridSample (20), RoiAlign (16), DFT (20), Scatter <-> ScatterElements (11),
QuantizeLinear/DequantizeLinear (13), Max/Min/Mean/Sum (8), PRelu (7), LpPool (2), Tile (6)."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


@pytest.mark.parametrize(("mode", "old"), [("linear", "bilinear"), ("cubic", "bicubic")])
def test_grid_sample_mode_names_go_back_to_16s(mode: str, old: str) -> None:
    text = f"""{header(20)} g (float[1, 2, 4, 5] x, float[1, 3, 3, 2] grid)
        => (float[1, 2, 3, 3] y) {{
        y = GridSample <mode = "{mode}"> (x, grid) }}"""
    model = check_conversion(text, 16, rtol=1e-4, atol=1e-5)
    assert model.graph.ops[0].attrs["mode"] == old
    check_conversion(model, 20, rtol=1e-4, atol=1e-5)
    assert model.graph.ops[0].attrs["mode"] == mode


def test_roi_align_10_says_output_half_pixel_at_16() -> None:
    text = f"""{header(10)} g (float[1, 2, 8, 8] x, float[2, 4] rois, int64[2] idx)
        => (float[2, 2, 2, 2] y) {{
        y = RoiAlign <output_height = 2, output_width = 2> (x, rois, idx) }}"""
    feeds = {
        "x": np.random.default_rng(0).standard_normal((1, 2, 8, 8)).astype(np.float32),
        "rois": np.array([[0, 0, 4, 4], [1, 2, 6, 7]], np.float32),
        "idx": np.array([0, 0], np.int64),
    }
    model = check_conversion(text, 16, feeds=feeds)
    assert model.graph.ops[0].attrs["coordinate_transformation_mode"] == "output_half_pixel"
    check_conversion(model, 15, feeds=feeds)


def test_roi_align_16_half_pixel_cannot_go_below_16() -> None:
    text = f"""{header(16)} g (float[1, 2, 8, 8] x, float[2, 4] rois, int64[2] idx)
        => (float[2, 2, 2, 2] y) {{
        y = RoiAlign (x, rois, idx) }}"""
    with pytest.raises(AdapterError, match="half_pixel"):
        convert(model_from_text(text), 15)


def test_dft_axis_attribute_becomes_an_input_at_20() -> None:
    text = f"""{header(17)} g (float[2, 8, 1] x) => (float[2, 8, 2] y) {{
        y = DFT <axis = 1> (x) }}"""
    model = check_conversion(text, 20, rtol=1e-4, atol=1e-4)
    assert int(model.graph.ops[0]._inputs[2].const.numpy()) == 1
    check_conversion(model, 17, rtol=1e-4, atol=1e-4)
    assert model.graph.ops[0].attrs["axis"] == 1


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


def test_quantize_with_one_element_scale_goes_below_13_as_scalars() -> None:
    text = f"""{header(13)} g (float[N, 4] x) => (float[N, 4] y)
        <float[1] s = {{0.05}}, uint8[1] z = {{128}}> {{
        q = QuantizeLinear (x, s, z)
        y = DequantizeLinear (q, s, z) }}"""
    model = check_conversion(text, 10)
    assert all(v.const.numpy().shape == () for op in model.graph.ops for v in op._inputs[1:])


def test_quantize_per_axis_cannot_go_below_13() -> None:
    text = f"""{header(13)} g (float[N, 2] x) => (uint8[N, 2] y) <float[2] s = {{0.05, 0.1}}> {{
        y = QuantizeLinear <axis = 1> (x, s) }}"""
    with pytest.raises(AdapterError, match="per-axis"):
        convert(model_from_text(text), 12)


@pytest.mark.parametrize("op_type", ["Max", "Min", "Mean", "Sum"])
def test_variadic_broadcasting_static_inputs_are_tiled_below_8(op_type: str) -> None:
    text = f"""{header(13)} g (float[2, 3] a, float[3] b, float[2, 1] c) => (float[2, 3] y) {{
        y = {op_type} (a, b, c) }}"""
    model = check_conversion(text, 7)
    assert op_types(model).count("Tile") == 2


def test_variadic_broadcasting_symbolic_inputs_are_refused_below_8() -> None:
    text = (
        f"""{header(13)} g (float[N, 3] a, float[3] b) => (float[N, 3] y) {{ y = Max (a, b) }}"""
    )
    with pytest.raises(AdapterError, match="broadcast"):
        convert(model_from_text(text), 7)


def test_prelu_constant_slope_is_broadcast_below_7() -> None:
    text = f"""{header(9)} g (float[2, 3, 4] x) => (float[2, 3, 4] y)
        <float[3, 1] s = {{0.1, 0.2, 0.3}}> {{
        y = PRelu (x, s) }}"""
    model = model_from_text(text)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    expected = evaluate(model, feeds)
    convert(model, 6)
    assert model.graph.ops[0]._inputs[1].const.numpy().shape == (2, 3, 4)
    np.testing.assert_allclose(evaluate(model, feeds)[0], expected[0])


def test_lp_pool_p_becomes_an_int_at_2_and_a_float_again_at_1() -> None:
    text = f"""{header(2, 3)} g (float[1, 2, 4, 4] x) => (float[1, 2, 1, 1] y) {{
        y = GlobalLpPool <p = 3> (x) }}"""
    model = model_from_text(text)
    convert(model, 1)
    assert model.graph.ops[0].attrs["p"] == 3.0
    convert(model, 2)
    assert model.graph.ops[0].attrs["p"] == 3


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
