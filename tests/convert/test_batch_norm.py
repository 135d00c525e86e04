"""BatchNormalization conversion: consumed_inputs (6), is_test (7), spatial (9), training
outputs and training_mode (14)."""

from __future__ import annotations

import numpy as np
import pytest
from adapter_check import check_conversion, evaluate, header

from onnxforge.errors import AdapterError
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text, run_onnxruntime

BN = """g (float[N, 3, 4] x) => (float[N, 3, 4] y)
    <float[3] s = {1.0, 2.0, 0.5}, float[3] b = {0.0, 1.0, -1.0},
     float[3] m = {0.1, 0.2, 0.3}, float[3] v = {1.0, 0.5, 2.0}> {
    y = BatchNormalization ATTRS (x, s, b, m, v) }"""


def test_batch_norm_of_opset_15_reaches_opset_7_and_back() -> None:
    text = header(15) + BN.replace("ATTRS", "<epsilon = 0.001>")
    model = check_conversion(text, 7)
    assert model.graph.ops[0].attrs["epsilon"] == pytest.approx(0.001)
    check_conversion(model, 15)


def test_batch_norm_below_7_says_is_test_and_keeps_its_numbers() -> None:
    text = header(9) + BN.replace("ATTRS", "")
    model = model_from_text(text)
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3, 4)).astype(np.float32)}
    expected = run_onnxruntime(model, feeds)
    convert(model, 6)
    assert model.graph.ops[0].attrs == {"is_test": 1}
    np.testing.assert_allclose(evaluate(model, feeds)[0], expected[0], rtol=1e-5, atol=1e-6)
    convert(model, 5)
    assert model.graph.ops[0].attrs == {"is_test": 1, "consumed_inputs": [0, 0]}
    convert(model, 9)
    assert model.graph.ops[0].attrs == {}


def test_batch_norm_spatial_0_cannot_reach_9() -> None:
    text = header(8) + BN.replace("ATTRS", "<spatial = 0>")
    with pytest.raises(AdapterError, match="spatial=0"):
        convert(model_from_text(text), 9)


def test_batch_norm_training_mode_cannot_go_below_14() -> None:
    text = header(14) + BN.replace("ATTRS", "<training_mode = 1>")
    with pytest.raises(AdapterError, match="training mode"):
        convert(model_from_text(text), 13)
