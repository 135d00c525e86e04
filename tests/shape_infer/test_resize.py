"""Resize's output dims: sizes as given (never negative), scales as float32 computes them."""

from __future__ import annotations

import pytest

from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import is_unknown_symbol
from onnxforge.testing import model_from_text


def test_resize_to_a_negative_size_is_an_error_not_a_negative_dim() -> None:
    # boundary fuzz: Resize-13 of float[1] to sizes [-1] was written float[-1]
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1] x) => (float[?] y) {
        sizes = Constant <value = int64[1] {-1}> ()
        y = Resize <mode = "nearest"> (x, , , sizes)
    }""")
    report = infer(model)
    assert [e.reason for e in report.errors] == ["sizes [-1] has a negative size"]
    assert not any(e.internal for e in report.errors)


@pytest.mark.parametrize(("dim", "scale"), [("1", "1.0"), ("N", "0.5")])
def test_resize_by_scales_of_a_dim_past_2_to_the_24_is_unknown(dim: str, scale: str) -> None:
    # boundary fuzz: [0, 1000000001] by scales [0.5, 1] was written [0, 1000000001]
    # (onnxruntime: 1000000000, scaled in float32); [0, N+1000000000] by 0.5 was written
    # floor(N/2)+500000000 (onnxruntime: 500000000 at N=2)
    model = model_from_text(f"""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[0, {dim}] x) => (float[?, ?] y) {{
        pads = Constant <value = int64[4] {{0, 0, 0, 1000000000}}> ()
        p = Pad(x, pads)
        scales = Constant <value = float[2] {{0.5, {scale}}}> ()
        y = Resize <mode = "nearest"> (p, , scales)
    }}""")
    report = infer(model)
    assert not report.errors, report.errors
    t = model.graph.outputs[0].type
    assert isinstance(t, TensorType) and t.shape is not None
    assert t.shape[0] == 0 and is_unknown_symbol(t.shape[1])


def test_resize_by_2_of_a_symbol_stays_exact() -> None:
    model = model_from_text("""
    <ir_version: 8, opset_import: ["" : 13]>
    g (float[1, 3, H, W] x) => (float[?, ?, ?, ?] y) {
        scales = Constant <value = float[4] {1.0, 1.0, 2.0, 0.5}> ()
        y = Resize <mode = "nearest"> (x, , scales)
    }""")
    infer(model)
    t = model.graph.outputs[0].type
    assert isinstance(t, TensorType) and t.shape == (1, 3, "2*H", "floor(W/2)")
