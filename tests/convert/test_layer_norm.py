"""LayerNormalization below 17: written out in the target opset."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header, op_types

LN = """g (float[N, T, 8] x) => (float[N, T, 8] y{OUTS})
    <float[{S}] s = {{{SV}}}, float[{S}] b = {{{BV}}}> {{
    y{OUTN} = LayerNormalization <axis = {AXIS}, epsilon = 0.001> (x, s, b) }}"""


def layer_norm(axis: int, stats: bool = False) -> str:
    size = 8 if axis in (-1, 2) else 24
    sv = ", ".join(str(1 + 0.1 * i) for i in range(size))
    bv = ", ".join(str(0.05 * i) for i in range(size))
    s = f"{size}" if size == 8 else "T, 8".replace("T", "3")
    outs = ", float[N, T, 1] m, float[N, T, 1] inv" if stats else ""
    if stats and axis not in (-1, 2):
        outs = ", float[N, 1, 1] m, float[N, 1, 1] inv"
    return LN.format(OUTS=outs, S=s, SV=sv, BV=bv, OUTN=", m, inv" if stats else "", AXIS=axis)


@pytest.mark.parametrize("axis", [-1, 2, -2, 1])
def test_layer_norm_is_written_out_below_17(axis: int) -> None:
    model = check_conversion(
        header(17) + layer_norm(axis), 16, dims={"N": 2, "T": 3}, rtol=1e-4, atol=1e-5
    )
    assert "LayerNormalization" not in op_types(model)
    assert "ReduceMean" in op_types(model)


def test_layer_norm_mean_and_inv_std_dev_outputs_keep_their_names_below_17() -> None:
    model = check_conversion(
        header(18) + layer_norm(-1, stats=True), 13, dims={"N": 2, "T": 3}, rtol=1e-4, atol=1e-5
    )
    assert [v.name for v in model.graph.outputs] == ["y", "m", "inv"]


def test_layer_norm_of_float16_computes_in_float_below_17() -> None:
    text = f"""{header(17)} g (float16[N, 4] x, float16[4] s) => (float16[N, 4] y) {{
        y = LayerNormalization (x, s) }}"""
    model = check_conversion(text, 16, rtol=1e-3, atol=1e-3)
    assert op_types(model).count("Cast") == 2
