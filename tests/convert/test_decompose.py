"""Ops written out below their first version: Gelu, HardSwish, Mish, Celu, Swish,
ThresholdedRelu, GreaterOrEqual/LessOrEqual, RMSNormalization, Trilu."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime


@pytest.mark.parametrize(
    ("opset", "body"),
    [
        (20, "y = Gelu (x)"),
        (20, 'y = Gelu <approximate = "tanh"> (x)'),
        (14, "y = HardSwish (x)"),
        (18, "y = Mish (x)"),
        (12, "y = Celu <alpha = 0.7> (x)"),
        (10, "y = ThresholdedRelu <alpha = 0.3> (x)"),
    ],
)
def test_activation_is_written_out_below_its_first_version(opset: int, body: str) -> None:
    text = f"{header(opset)} g (float[N, 5] x) => (float[N, 5] y) {{ {body} }}"
    model = check_conversion(text, opset - 1, rtol=1e-5, atol=1e-6)
    op_type = body.split("=")[1].split(maxsplit=1)[0]
    assert op_type not in op_types(model) and model.graph.outputs[0].name == "y"


@pytest.mark.parametrize("op_type", ["GreaterOrEqual", "LessOrEqual"])
def test_or_equal_comparison_is_or_of_strict_and_equal_below_12(op_type: str) -> None:
    text = f"""{header(12)} g (float[N, 4] a, float[4] b) => (bool[N, 4] y) {{
        y = {op_type} (a, b) }}"""
    a = np.array([[1, 2, np.nan, 4], [0, 5, 3, 3]], np.float32)
    b = np.array([1, 3, np.nan, 2], np.float32)
    model = check_conversion(text, 11, feeds={"a": a, "b": b})
    assert op_types(model)[-1] == "Or"


def test_swish_is_written_out_below_24() -> None:
    text = (
        f"""{header(24)} g (float[N, 5] x) => (float[N, 5] y) {{ y = Swish <alpha = 1.5> (x) }}"""
    )
    model = model_from_text(text)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 5)).astype(np.float32)}
    convert(model, 23)
    x = feeds["x"]
    np.testing.assert_allclose(evaluate(model, feeds)[0], x / (1 + np.exp(-1.5 * x)), rtol=1e-5)


def test_rms_normalization_is_written_out_below_23() -> None:
    text = f"""{header(23)} g (float[N, 3, 4] x) => (float[N, 3, 4] y)
        <float[4] s = {{1.0, 0.5, 2.0, 1.5}}> {{ y = RMSNormalization <epsilon = 0.01> (x, s) }}"""
    model = model_from_text(text)
    x = np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)
    convert(model, 22)
    assert "RMSNormalization" not in op_types(model)
    s = np.array([1.0, 0.5, 2.0, 1.5], np.float32)
    want = x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + 0.01) * s
    np.testing.assert_allclose(run_onnxruntime(model, {"x": x})[0], want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
def test_trilu_is_a_where_on_a_range_mask_below_14(upper: int, k: int | None) -> None:
    k_in = "" if k is None else ", k"
    k_def = "" if k is None else f"k = Constant <value = int64 {{{k}}}> ()"
    text = f"""{header(14)} g (float[B, R, C] x) => (float[B, R, C] y) {{
        {k_def}
        y = Trilu <upper = {upper}> (x{k_in}) }}"""
    model = check_conversion(text, 13, dims={"B": 2, "R": 4, "C": 5})
    assert "Trilu" not in op_types(model)
