"""remove-default-inputs: zero initial states and zero biases are omitted, since that is
what their absence means; non-zero ones and required inputs stay. Reshape's allowzero=1
goes where the shape is a constant without a 0."""

from __future__ import annotations

import numpy as np

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import EliminateDeadCodePass, RemoveDefaultInputsPass
from onnxforge.testing import assert_models_close, model_from_text, random_feeds

RNG = np.random.default_rng(3)


def _run(model: Model) -> dict[str, int]:
    stats = dict(RemoveDefaultInputsPass()(model).stats)
    verify(model)
    EliminateDeadCodePass()(model)
    verify(model)
    return stats


def test_an_lstm_zero_state_made_from_the_batch_size_is_omitted() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 14]>'
        + """
    g (float[T, N, 3] x) => (float[T, 1, N, 4] y) {
        s = Shape(x)
        one = Constant <value = int64[1] {1}> ()
        two = Constant <value = int64[1] {2}> ()
        n = Slice(s, one, two)
        four = Constant <value = int64[1] {4}> ()
        shape = Concat <axis = 0> (one, n, four)
        zeros = ConstantOfShape(shape)
        h = Identity(zeros)
        y, yh, yc = LSTM <hidden_size = 4> (x, w, r, b, , h, zeros)
    }""",
        w=RNG.standard_normal((1, 16, 3)).astype(np.float32),
        r=RNG.standard_normal((1, 16, 4)).astype(np.float32),
        b=np.zeros((1, 32), np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"inputs_removed": 3}
    assert [op.op_type for op in model.graph.ops] == ["LSTM"]
    assert len(model.graph.ops[0]._inputs) == 3
    assert_models_close(before, model, random_feeds(before, dim=4))


def test_a_zero_conv_bias_goes_and_a_nonzero_one_stays() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (float[1, 2, 4, 4] x) => (float[1, 2, 4, 4] y) {
        a = Conv(x, w, zero)
        y = Conv(a, w, bias)
    }""",
        w=RNG.standard_normal((2, 2, 1, 1)).astype(np.float32),
        zero=np.array([0.0, -0.0], np.float32),
        bias=np.array([0.0, 1.0], np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"inputs_removed": 1}
    assert [len(op._inputs) for op in model.graph.ops] == [2, 3]
    assert_models_close(before, model)


def test_a_zero_gemm_c_goes_from_opset_11_only() -> None:
    text = """
    g (float[2, 3] a) => (float[2, 4] y) {{ y = Gemm <beta = 2.0> (a, w, c) }}"""
    weights = {"w": RNG.standard_normal((3, 4)).astype(np.float32), "c": np.zeros(4, np.float32)}
    old = model_from_text('<ir_version: 4, opset_import: ["" : 9]>' + text.format(), **weights)
    assert _run(old) == {}
    new = model_from_text('<ir_version: 8, opset_import: ["" : 13]>' + text.format(), **weights)
    before = to_proto(new)
    assert _run(new) == {"inputs_removed": 1}
    assert_models_close(before, new)


RESHAPES = """
    g (float[N, 8, 1, 1] x, int64[2] s) => (float[N, 8] a, float[0, 4] b, float c) {
        a = Reshape <allowzero = 1> (x, flat)
        e = Slice(x, zero, zero, zero)
        b = Reshape <allowzero = 1> (e, empty)
        c = Reshape <allowzero = 1> (x, s)
    }"""


def test_reshape_allowzero_goes_where_the_constant_shape_has_no_zero() -> None:
    # malvizv1's resnet18: Reshape <allowzero = 1> (mean, [-1, 512]), which onnx2torch refuses
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 18]>' + RESHAPES,
        flat=np.array([-1, 8], np.int64),
        zero=np.array([0], np.int64),
        empty=np.array([0, 4], np.int64),
    )
    before = to_proto(model)
    assert _run(model) == {"allowzeros_removed": 1}
    a, b, c = (model.graph.producer(v) for v in model.graph.outputs)
    assert a.attr("allowzero") is None
    assert b.attr("allowzero") == 1  # a 0 of the shape: an empty dim, not a copied one
    assert c.attr("allowzero") == 1  # a shape given at run time may hold a 0
    feeds = {"x": RNG.standard_normal((3, 8, 1, 1)).astype(np.float32)}
    feeds["s"] = np.array([3, -1], np.int64)
    assert_models_close(before, model, feeds)
