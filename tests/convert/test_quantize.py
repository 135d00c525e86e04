"""QuantizeLinear/DequantizeLinear below 13: per tensor only."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


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
