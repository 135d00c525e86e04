"""fuse-mul-into-conv: a Mul by a scalar or per-output-channel constant after a Conv or
ConvTranspose with constant weights scales them; other shapes, shared outputs and shared
weights stay as they are. Differential: onnxruntime on the model before and after."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import FuseMulIntoConvPass
from onnxforge.testing import assert_models_close, model_from_text

RNG = np.random.default_rng(0)


def _run(model: Model) -> dict[str, int]:
    stats = dict(FuseMulIntoConvPass()(model).stats)
    verify(model)
    return stats


def _conv_mul(mul: str, scale: np.ndarray, *, bias: bool = True) -> Model:
    conv = "Conv <pads = [1, 1, 1, 1]> (x, w, b)" if bias else "Conv(x, w)"
    weights = {"w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "s": scale}
    if bias:
        weights["b"] = RNG.standard_normal(4).astype(np.float32)
    return model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + f"""
    g (float[N, 3, 6, 6] x) => (float[N, 4, ?, ?] y) {{
        c = {conv}
        y = {mul}
    }}""",
        **weights,
    )


@pytest.mark.parametrize("shape", [(4, 1, 1), (1, 4, 1, 1), (), (1,), (1, 1, 1)], ids=str)
@pytest.mark.parametrize("order", ["Mul(c, s)", "Mul(s, c)"])
@pytest.mark.parametrize("bias", [True, False])
def test_a_per_channel_or_scalar_mul_becomes_the_weights(
    shape: tuple[int, ...], order: str, bias: bool
) -> None:
    model = _conv_mul(order, RNG.uniform(0.5, 2, shape).astype(np.float32), bias=bias)
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    assert [op.op_type for op in model.graph.ops] == ["Conv"]
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert_models_close(before, model)


@pytest.mark.parametrize("shape", [(4, 6, 1), (1, 1, 6, 1), (2, 4, 1, 1), (3, 1, 1)], ids=str)
def test_a_mul_along_other_axes_or_growing_the_output_stays(shape: tuple[int, ...]) -> None:
    model = _conv_mul("Mul(c, s)", RNG.uniform(0.5, 2, shape).astype(np.float32))
    assert _run(model) == {}
    assert [op.op_type for op in model.graph.ops] == ["Conv", "Mul"]


def test_a_grouped_conv_transpose_is_scaled_per_output_channel() -> None:
    weights = {
        "w": RNG.standard_normal((4, 3, 2, 2)).astype(np.float32),
        "s": RNG.uniform(0.5, 2, (6, 1, 1)).astype(np.float32),
    }
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 13]>'
        + """
    g (float[1, 4, 5, 5] x) => (float[1, 6, ?, ?] y) {
        c = ConvTranspose <group = 2, strides = [2, 2]> (x, w)
        y = Mul(c, s)
    }""",
        **weights,
    )
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    assert [op.op_type for op in model.graph.ops] == ["ConvTranspose"]
    assert_models_close(before, model)


def test_a_conv_output_read_twice_or_a_shared_weight_is_left_alone() -> None:
    weights = {
        "w": RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
        "s": RNG.uniform(0.5, 2, (4, 1, 1)).astype(np.float32),
    }
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + """
    g (float[1, 3, 6, 6] x) => (float[1, 4, ?, ?] y, float[1, 4, ?, ?] z) {
        c = Conv(x, w)
        y = Mul(c, s)
        z = Relu(c)
    }""",
        **weights,
    )
    assert _run(model) == {}
    shared = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + """
    g (float[1, 3, 6, 6] x) => (float[1, 4, ?, ?] y, float[1, 4, ?, ?] z) {
        c = Conv(x, w)
        y = Mul(c, s)
        z = Conv(x, w)
    }""",
        **weights,
    )
    assert _run(shared) == {}


def test_a_runtime_scale_is_left_alone() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 15]>'
        + """
    g (float[1, 3, 6, 6] x, float[4, 1, 1] s) => (float[1, 4, ?, ?] y) {
        c = Conv(x, w)
        y = Mul(c, s)
    }""",
        w=RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
    )
    assert _run(model) == {}


def test_a_legacy_broadcast_mul_is_left_alone() -> None:
    """Mul-6 with broadcast=1 aligns S at ``axis``: (4, 1, 1) at axis 0 scales the batch, not
    the channels, so only numpy-broadcasting versions (7+) are fused."""
    model = model_from_text(
        '<ir_version: 4, opset_import: ["" : 6]>'
        + """
    g (float[4, 3, 6, 6] x) => (float[4, 4, 4, 4] y) {
        c = Conv(x, w)
        y = Mul <broadcast = 1, axis = 0> (c, s)
    }""",
        w=RNG.standard_normal((4, 3, 3, 3)).astype(np.float32),
        s=RNG.uniform(0.5, 2, (4, 1, 1)).astype(np.float32),
    )
    assert _run(model) == {}
