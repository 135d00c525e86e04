"""LayerNormalization (17) and GroupNormalization (18, 21) conversion: written out below their
first version, scale/bias per group <-> per channel at 21."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from adapter_check import check_conversion, header, op_types, random_feeds

from onnxforge.io import from_proto
from onnxforge.testing import run_onnxruntime

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


GN = """g (float[N, 4, H, W] x) => (float[N, 4, H, W] y)
    <float[{S}] s = {{{SV}}}, float[{S}] b = {{{BV}}}> {{
    y = GroupNormalization <num_groups = 2, epsilon = 0.001> (x, s, b) }}"""


def group_norm(size: int, values: list[float] | None = None) -> str:
    sv = values or [1 + 0.25 * i for i in range(size)]
    return GN.format(S=size, SV=", ".join(map(str, sv)), BV=", ".join(str(0.1 * v) for v in sv))


def test_group_norm_21_is_written_out_below_21() -> None:
    model = check_conversion(
        header(21) + group_norm(4), 17, dims={"N": 2, "H": 3, "W": 5}, rtol=1e-4, atol=1e-5
    )
    assert "GroupNormalization" not in op_types(model)


def test_group_norm_18_deprecated_scale_per_group_is_repeated_per_channel_at_21() -> None:
    proto = onnx.parser.parse_model(header(20) + group_norm(2))  # onnx's checker refuses it
    model = from_proto(proto)
    feeds = random_feeds(model, {"N": 2, "H": 3, "W": 5})
    expected = run_onnxruntime(model, feeds)
    check_conversion(model, 21, feeds=feeds, rtol=1e-4, atol=1e-5)
    (op,) = model.graph.ops
    assert op._inputs[1].const.numpy().tolist() == [1.0, 1.0, 1.25, 1.25]
    np.testing.assert_allclose(run_onnxruntime(model, feeds)[0], expected[0], rtol=1e-4, atol=1e-5)


def test_group_norm_18_deprecated_is_written_out_below_18() -> None:
    model = from_proto(onnx.parser.parse_model(header(18) + group_norm(2)))
    check_conversion(model, 17, dims={"N": 2, "H": 3, "W": 5}, rtol=1e-4, atol=1e-5)
    assert "GroupNormalization" not in op_types(model)
