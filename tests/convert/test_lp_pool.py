"""LpPool/GlobalLpPool at 2: p float <-> int."""

from __future__ import annotations

from adapter_check import header

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


def test_lp_pool_p_becomes_an_int_at_2_and_a_float_again_at_1() -> None:
    text = f"""{header(2, 3)} g (float[1, 2, 4, 4] x) => (float[1, 2, 1, 1] y) {{
        y = GlobalLpPool <p = 3> (x) }}"""
    model = model_from_text(text)
    convert(model, 1)
    assert model.graph.ops[0].attrs["p"] == 3.0
    convert(model, 2)
    assert model.graph.ops[0].attrs["p"] == 3
