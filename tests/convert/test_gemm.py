"""Gemm conversion: broadcast (7), optional C (11)."""

from __future__ import annotations

import pytest
from adapter_check import check_conversion, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text

GEMM = """g (float[M, 4] a) => (float[M, 3] y) <float[4, 3] b = {C_B}CINIT> {
    y = Gemm <transB = 0> (a, b CIN) }"""
B = ", ".join(str(0.1 * i) for i in range(12))


def gemm(opset: int, c_shape: str | None) -> str:
    text = header(opset) + GEMM.replace("{C_B}", "{" + B + "}")
    if c_shape is None:
        return text.replace("CINIT", "").replace(" CIN", "")
    n = 1
    for d in c_shape.strip("[]").split(","):
        n *= int(d) if d.strip() else 1
    values = ", ".join(str(0.5 * i) for i in range(n))
    return text.replace("CINIT", f", float{c_shape} c = {{{values}}}").replace(" CIN", ", c")


def test_gemm_without_c_gets_a_zero_c_below_11() -> None:
    model = check_conversion(gemm(13, None), 9)
    assert model.graph.ops[0]._inputs[2].const.numpy().tolist() == 0.0


@pytest.mark.parametrize("c_shape", ["[3]", "[1]"])
def test_gemm_broadcasting_c_says_broadcast_below_7(c_shape: str) -> None:
    model = model_from_text(gemm(13, c_shape))
    convert(model, 6)
    assert model.graph.ops[0].attrs["broadcast"] == 1
    check_conversion(model, 9, dims={"M": 2})
    assert "broadcast" not in model.graph.ops[0].attrs


def test_gemm_with_a_c_that_expands_a_1_dim_is_refused_below_7() -> None:
    text = (
        gemm(13, "[1, 3]")
        .replace("float[M, 4] a", "float[2, 4] a")
        .replace("[M, 3] y", "[2, 3] y")
    )
    with pytest.raises(AdapterError, match="Gemm.*C of shape"):
        convert(model_from_text(text), 6)
