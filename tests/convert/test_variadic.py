"""Max/Min/Mean/Sum below 8 and PRelu below 7: no broadcasting."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, evaluate, header, op_types

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text


@pytest.mark.parametrize("op_type", ["Max", "Min", "Mean", "Sum"])
def test_variadic_broadcasting_static_inputs_are_tiled_below_8(op_type: str) -> None:
    text = f"""{header(13)} g (float[2, 3] a, float[3] b, float[2, 1] c) => (float[2, 3] y) {{
        y = {op_type} (a, b, c) }}"""
    model = check_conversion(text, 7)
    assert op_types(model).count("Tile") == 2


def test_variadic_broadcasting_symbolic_inputs_are_refused_below_8() -> None:
    text = (
        f"""{header(13)} g (float[N, 3] a, float[3] b) => (float[N, 3] y) {{ y = Max (a, b) }}"""
    )
    with pytest.raises(AdapterError, match="broadcast"):
        convert(model_from_text(text), 7)


def test_prelu_constant_slope_is_broadcast_below_7() -> None:
    text = f"""{header(9)} g (float[2, 3, 4] x) => (float[2, 3, 4] y)
        <float[3, 1] s = {{0.1, 0.2, 0.3}}> {{
        y = PRelu (x, s) }}"""
    model = model_from_text(text)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    expected = evaluate(model, feeds)
    convert(model, 6)
    assert model.graph.ops[0]._inputs[1].const.numpy().shape == (2, 3, 4)
    np.testing.assert_allclose(evaluate(model, feeds)[0], expected[0])
