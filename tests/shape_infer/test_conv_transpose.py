"""ConvTranspose over symbolic sizes: every spatial dim written out, as onnxruntime computes it
(PP-OCR's detection heads upsample [N, C, H/4, W/4] by 2 twice; onnx's own inference leaves
those dims unknown)."""

from __future__ import annotations

import pytest
from onnx import TensorProto
from ort_shapes import check_against_onnxruntime, node_model, weight

from onnxforge.io import from_proto
from onnxforge.shape_infer import infer

pytest.importorskip("onnxruntime")
F = TensorProto.FLOAT
SIZES = ({"N": 2, "H": 3, "W": 5}, {"N": 1, "H": 6, "W": 4})

CASES = {
    "stride_2_kernel_2": ({"strides": [2, 2]}, (3, 4, 2, 2)),
    "stride_2_kernel_3_pads": ({"strides": [2, 2], "pads": [1, 1, 1, 1]}, (3, 4, 3, 3)),
    "output_padding": ({"strides": [2, 2], "output_padding": [1, 0]}, (3, 4, 3, 3)),
    "dilations_group": ({"dilations": [2, 1], "group": 3}, (3, 2, 3, 2)),
    "same_upper": ({"strides": [2, 3], "auto_pad": "SAME_UPPER"}, (3, 4, 3, 3)),
    "valid": ({"strides": [2, 2], "auto_pad": "VALID"}, (3, 4, 3, 3)),
}


@pytest.mark.parametrize("name", CASES)
def test_conv_transpose_sizes_are_what_onnxruntime_computes(name: str) -> None:
    attrs, w_shape = CASES[name]
    model = node_model(
        "ConvTranspose", [("x", F, ["N", 3, "H", "W"]), weight(*w_shape)], attrs, 1,
        domain="", opset=17,
    )  # fmt: skip
    check_against_onnxruntime(model, SIZES)


def test_conv_transpose_writes_the_upsampled_symbols() -> None:
    model = node_model(
        "ConvTranspose", [("x", F, ["N", 3, "H", "W"]), weight(3, 4, 2, 2)],
        {"strides": [2, 2]}, 1, domain="", opset=17,
    )  # fmt: skip
    ours = from_proto(model)
    infer(ours)
    assert ours.graph.outputs[0].type.shape == ("N", 4, "2*H", "2*W")
