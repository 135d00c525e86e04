"""RoiAlign conversion at 16: coordinate_transformation_mode."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


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
