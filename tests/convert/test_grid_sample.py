"""GridSample conversion at 20: mode names."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header


@pytest.mark.parametrize(("mode", "old"), [("linear", "bilinear"), ("cubic", "bicubic")])
def test_grid_sample_mode_names_go_back_to_16s(mode: str, old: str) -> None:
    text = f"""{header(20)} g (float[1, 2, 4, 5] x, float[1, 3, 3, 2] grid)
        => (float[1, 2, 3, 3] y) {{
        y = GridSample <mode = "{mode}"> (x, grid) }}"""
    model = check_conversion(text, 16, rtol=1e-4, atol=1e-5)
    assert model.graph.ops[0].attrs["mode"] == old
    check_conversion(model, 20, rtol=1e-4, atol=1e-5)
    assert model.graph.ops[0].attrs["mode"] == mode
