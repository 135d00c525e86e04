"""RNN/GRU/LSTM below 14: layout=1 (batch first) through Transposes."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import evaluate, header, op_types

from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime


@pytest.mark.parametrize("op_type", ["RNN", "GRU", "LSTM"])
def test_batch_first_layout_becomes_transposes_below_14(op_type: str) -> None:
    gates = {"RNN": 1, "GRU": 3, "LSTM": 4}[op_type]
    outs = "Y, Y_h, Y_c" if op_type == "LSTM" else "Y, Y_h"
    decl = "float[2, 5, 1, 3] Y, float[2, 1, 3] Y_h" + (
        ", float[2, 1, 3] Y_c" if op_type == "LSTM" else ""
    )
    text = f"""{header(14)} g (float[2, 5, 4] X, float[1, {3 * gates}, 4] W,
        float[1, {3 * gates}, 3] R) => ({decl}) {{
        {outs} = {op_type} <hidden_size = 3, layout = 1> (X, W, R) }}"""
    model = model_from_text(text)
    rng = np.random.default_rng(0)
    feeds = {
        "X": rng.standard_normal((2, 5, 4)).astype(np.float32),
        "W": rng.standard_normal((1, 3 * gates, 4)).astype(np.float32) * 0.3,
        "R": rng.standard_normal((1, 3 * gates, 3)).astype(np.float32) * 0.3,
    }
    expected = evaluate(model, feeds)  # onnxruntime does not run layout=1
    convert(model, 13)
    assert op_types(model).count("Transpose") == 1 + len(expected)
    assert [v.name for v in model.graph.outputs] == outs.split(", ")
    for got, want in zip(run_onnxruntime(model, feeds), expected, strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_rms_normalization_reaches_opset_10_through_untyped_intermediates() -> None:
    text = f"""{header(23)} g (float[N, 3, 4] x) => (float[N, 3, 4] y)
        <float[4] s = {{1.0, 0.5, 2.0, 1.5}}> {{ y = RMSNormalization (x, s) }}"""
    model = model_from_text(text)
    convert(model, 10)
    reduce = [op for op in model.graph.ops if op.op_type == "ReduceMean"][0]
    assert reduce.attrs["axes"] == [2]
