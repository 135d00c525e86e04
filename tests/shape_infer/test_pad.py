"""Pad's output dims: dim + pad before + pad after, never below 0."""

from __future__ import annotations

import pytest

from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text

PADS_INPUT = """
        pads = Constant <value = int64[2] {0, -2}> ()
        y = Pad <mode = "constant"> (x, pads)"""
PADS_ATTRIBUTE = 'y = Pad <pads = [0, -9223372036854775808], mode = "constant"> (x)'


@pytest.mark.parametrize(("opset", "node"), [(13, PADS_INPUT), (10, PADS_ATTRIBUTE)])
def test_pad_cropping_past_the_dim_is_an_error_not_a_negative_dim(opset: int, node: str) -> None:
    # boundary fuzz: Pad of float[1] by [0, -2] was written float[-1]
    model = model_from_text(f"""
    <ir_version: 8, opset_import: ["" : {opset}]>
    g (float[1] x) => (float[?] y) {{
        {node}
    }}""")
    report = infer(model)
    assert len(report.errors) == 1 and "make dim 0 (1) -" in report.errors[0].reason
    assert not report.errors[0].internal
