"""DFT conversion at 20: the axis attribute <-> input."""

from __future__ import annotations

from adapter_check import check_conversion, header


def test_dft_axis_attribute_becomes_an_input_at_20() -> None:
    text = f"""{header(17)} g (float[2, 8, 1] x) => (float[2, 8, 2] y) {{
        y = DFT <axis = 1> (x) }}"""
    model = check_conversion(text, 20, rtol=1e-4, atol=1e-4)
    assert int(model.graph.ops[0]._inputs[2].const.numpy()) == 1
    check_conversion(model, 17, rtol=1e-4, atol=1e-4)
    assert model.graph.ops[0].attrs["axis"] == 1
