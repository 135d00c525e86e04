"""fuse-batchnorm-into-conv: inference BatchNormalization after Conv/ConvTranspose with
constant weights folds into them; shared weights, shared outputs and training mode do not."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import FuseBatchNormIntoConvPass
from onnxforge.testing import assert_models_close, model_from_text

RNG = np.random.default_rng(0)


def _run(model: Model) -> dict[str, int]:
    stats = dict(FuseBatchNormIntoConvPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


def _bn(channels: int) -> dict[str, np.ndarray]:
    return {
        "scale": RNG.uniform(0.5, 2, channels).astype(np.float32),
        "beta": RNG.standard_normal(channels).astype(np.float32),
        "mean": RNG.standard_normal(channels).astype(np.float32),
        "var": RNG.uniform(0.1, 2, channels).astype(np.float32),
    }


@pytest.mark.parametrize("bias", [True, False])
def test_batchnorm_after_conv_becomes_its_weights_and_bias(bias: bool) -> None:
    conv = "Conv <pads = [1, 1, 1, 1]> (x, w, b)" if bias else "Conv(x, w)"
    weights = {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), **_bn(4)}
    if bias:
        weights["b"] = RNG.standard_normal(4).astype(np.float32)
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + f"""
    g (float[N, 3, 6, 6] x) => (float[N, 4, ?, ?] y) {{
        c = {conv}
        y = BatchNormalization <epsilon = 0.001> (c, scale, beta, mean, var)
    }}""",
        **weights,
    )
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    assert _ops(model) == ["Conv"]
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert {v.name for v in model.graph.initializers} >= {"w"}
    assert_models_close(before, model)


def test_batchnorm_after_a_grouped_conv_transpose_scales_each_group() -> None:
    weights = {"w": RNG.standard_normal((4, 3, 2, 2)).astype(np.float32), **_bn(6)}
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 13]>'
        + """
    g (float[1, 4, 5, 5] x) => (float[1, 6, ?, ?] y) {
        c = ConvTranspose <group = 2, strides = [2, 2]> (x, w)
        r = BatchNormalization(c, scale, beta, mean, var)
        y = Relu(r)
    }""",
        **weights,
    )
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    assert _ops(model) == ["ConvTranspose", "Relu"]
    assert_models_close(before, model)


def test_a_conv_output_read_elsewhere_or_a_shared_weight_is_not_fused() -> None:
    weights = {"w": RNG.standard_normal((4, 3, 1, 1)).astype(np.float32), **_bn(4)}
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + """
    g (float[1, 3, 4, 4] x) => (float[1, 4, 4, 4] y, float[1, 4, 4, 4] z, float[1, 4, 4, 4] s) {
        c = Conv(x, w)
        y = BatchNormalization(c, scale, beta, mean, var)
        z = Relu(c)
        d = Conv(x, w)
        e = Conv(z, w2)
        f = Add(d, e)
        s = BatchNormalization(f, scale, beta, mean, var)
    }""",
        w2=RNG.standard_normal((4, 4, 1, 1)).astype(np.float32),
        **weights,
    )
    assert _run(model) == {}


def test_batchnorm_in_training_mode_is_not_fused() -> None:
    weights = {"w": RNG.standard_normal((2, 3, 1, 1)).astype(np.float32), **_bn(2)}
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + """
    g (float[2, 3, 4, 4] x) => (float[2, 2, 4, 4] y) {
        c = Conv(x, w)
        y, m, v = BatchNormalization <training_mode = 1> (c, scale, beta, mean, var)
    }""",
        **weights,
    )
    assert _run(model) == {}
    assert _ops(model) == ["Conv", "BatchNormalization"]


def test_opset_6_batchnorm_needs_is_test() -> None:
    weights = {"w": RNG.standard_normal((2, 3, 1, 1)).astype(np.float32), **_bn(2)}
    text = """
    g (float[2, 3, 4, 4] x) => (float[2, 2, 4, 4] y) {{
        c = Conv(x, w)
        y = BatchNormalization <is_test = {}> (c, scale, beta, mean, var)
    }}"""
    header = '<ir_version: 4, opset_import: ["" : 6]>'
    assert _run(model_from_text(header + text.format(0), **weights)) == {}
    assert _run(model_from_text(header + text.format(1), **weights)) == {"fused": 1}
