"""GroupNormalization: per group (18, deprecated) <-> per channel (21), written out below."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
from adapter_check import check_conversion, header, op_types, random_feeds

from onnxforge.io import from_proto
from onnxforge.testing import run_onnxruntime

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
