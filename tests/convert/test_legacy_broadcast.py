"""Pow/And/Or/Xor/Equal/Greater/Less at 7: legacy broadcast <-> numpy broadcasting."""

from __future__ import annotations

import numpy as np
from adapter_check import evaluate, header

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime


def test_pow_with_legacy_broadcast_from_an_axis_gets_numpy_broadcasting_at_7() -> None:
    text = f"""{header(6, 3)} g (float[2, 3, 4] a, float[3] b) => (float[2, 3, 4] y) {{
        y = Pow <broadcast = 1, axis = 1> (a, b) }}"""
    model = model_from_text(text)
    rng = np.random.default_rng(0)
    feeds = {
        "a": rng.random((2, 3, 4)).astype(np.float32) + 0.5,
        "b": np.array([1, 2, 0.5], np.float32),
    }
    expected = evaluate(model, feeds)
    convert(model, 7)
    assert "broadcast" not in model.graph.topo_order()[-1].attrs
    np.testing.assert_allclose(run_onnxruntime(model, feeds)[0], expected[0], rtol=1e-6)


def test_greater_with_numpy_broadcasting_says_broadcast_below_7() -> None:
    text = f"""{header(7)} g (float[2, 3, 4] a, float[4] b) => (bool[2, 3, 4] y) {{
        y = Greater (a, b) }}"""
    model = model_from_text(text)
    convert(model, 6)
    assert model.graph.ops[0].attrs["broadcast"] == 1
