"""fuse-bias-add: a constant Add that is the same for every position of a Conv output
channel, or that broadcasts into a Gemm's [M, N] result, becomes the bias."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import FuseBiasAddPass
from onnxforge.testing import assert_models_close, model_from_text

RNG = np.random.default_rng(1)


def _run(model: Model) -> dict[str, int]:
    stats = dict(FuseBiasAddPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


@pytest.mark.parametrize(
    ("c_shape", "bias", "fused"),
    [
        ((4, 1, 1), True, True),
        ((1, 4, 1, 1), False, True),
        ((1,), True, True),
        ((), False, True),
        ((4, 1, 5), True, False),  # varies along the last spatial dim
        ((2, 4, 1, 1), False, False),  # would make the batch 2
        ((1, 1, 4, 1, 1), False, False),  # would add a dim
    ],
)
def test_a_per_channel_constant_add_after_conv_becomes_its_bias(
    c_shape: tuple[int, ...], bias: bool, fused: bool
) -> None:
    conv = "Conv(x, w, b)" if bias else "Conv(x, w)"
    weights = {
        "w": RNG.standard_normal((4, 3, 1, 1)).astype(np.float32),
        "c": RNG.standard_normal(c_shape).astype(np.float32),
    }
    if bias:
        weights["b"] = RNG.standard_normal(4).astype(np.float32)
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + f"""
    g (float[1, 3, 5, 5] x) => (float[?, ?, ?, ?] y) {{
        t = {conv}
        y = Add(c, t)
    }}""",
        **weights,
    )
    before = to_proto(model)
    assert _run(model) == ({"fused_into_conv": 1} if fused else {})
    assert _ops(model) == (["Conv"] if fused else ["Conv", "Add"])
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert_models_close(before, model)


def test_a_bias_shared_with_another_conv_is_not_changed() -> None:
    weights = {
        "w": RNG.standard_normal((2, 2, 1, 1)).astype(np.float32),
        "b": RNG.standard_normal(2).astype(np.float32),
        "c": RNG.standard_normal((2, 1, 1)).astype(np.float32),
    }
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (float[1, 2, 3, 3] x) => (float[1, 2, 3, 3] y) {
        t = Conv(x, w, b)
        u = Add(t, c)
        y = Conv(u, w, b)
    }""",
        **weights,
    )
    before = to_proto(model)
    assert _run(model) == {"fused_into_conv": 1}
    assert _ops(model) == ["Conv", "Conv"]
    first, second = model.graph.ops
    assert first._inputs[2] is not second._inputs[2]
    assert second._inputs[2].name == "b"
    assert_models_close(before, model)


@pytest.mark.parametrize(
    ("gemm", "c_shape", "fused"),
    [
        ("Gemm <beta = 0.5> (a, w, b)", (3,), True),
        ("Gemm <transB = 1> (a, wt)", (1, 3), True),
        ("Gemm(a, w, b)", (2, 3), True),
        ("Gemm(a, w, b)", (2, 1), True),
        ("Gemm(a, w, b)", (4, 2, 3), False),
    ],
)
def test_a_constant_add_after_gemm_becomes_c(
    gemm: str, c_shape: tuple[int, ...], fused: bool
) -> None:
    w = RNG.standard_normal((4, 3)).astype(np.float32)
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 13]>'
        + f"""
    g (float[2, 4] a) => (float[?, ?, ?] y) {{
        t = {gemm}
        y = Add(t, c)
    }}""",
        w=w,
        wt=w.T.copy(),
        b=RNG.standard_normal(3).astype(np.float32),
        c=RNG.standard_normal(c_shape).astype(np.float32),
    )
    before = to_proto(model)
    assert _run(model) == ({"fused_into_gemm": 1} if fused else {})
    assert _ops(model) == (["Gemm"] if fused else ["Gemm", "Add"])
    assert_models_close(before, model)
