"""fuse-matmul-add: MatMul of 2-D operands plus an Add that broadcasts into [M, N] is one
Gemm; batched MatMuls and Adds that would grow the result are left alone."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import FuseMatMulAddPass
from onnxforge.testing import assert_models_close, model_from_text, random_feeds

RNG = np.random.default_rng(2)


def _run(model: Model) -> dict[str, int]:
    stats = dict(FuseMatMulAddPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


@pytest.mark.parametrize(
    ("x", "c", "add", "fused"),
    [
        ("float[M, 4]", (3,), "Add(t, c)", True),
        ("float[M, 4]", (1, 3), "Add(c, t)", True),
        ("float[M, 4]", (1, 1), "Add(t, c)", True),
        ("float[M, 4]", "float[M, 3] c", "Add(t, c)", False),  # computed: no linear layer
        ("float[M, 4]", "float[1, 3] c", "Add(t, c)", False),
        ("float[M, 4]", (2, 3), "Add(t, c)", False),  # 2 may not be M
        ("float[M, 4]", (2, 1, 3), "Add(t, c)", False),  # grows the result
        ("float[B, M, 4]", (3,), "Add(t, c)", False),  # batched: no Gemm
        ("double[M, 4]", (3,), "Add(t, c)", True),
        ("float16[M, 4]", (3,), "Add(t, c)", False),  # no CPU Gemm kernel
    ],
)
def test_matmul_of_matrices_plus_a_broadcast_add_becomes_gemm(
    x: str, c: str | tuple[int, ...], add: str, fused: bool
) -> None:
    elem = x.partition("[")[0]
    dtype = {"float": np.float32, "double": np.float64, "float16": np.float16}[elem]
    consts = {"w": RNG.standard_normal((4, 3)).astype(dtype)}
    if isinstance(c, tuple):  # a constant bias of that shape
        consts["c"] = RNG.standard_normal(c).astype(dtype)
    inputs = f"{x} x" if isinstance(c, tuple) else f"{x} x, {c}"
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + f"""
    g ({inputs}) => ({elem}[?, ?, ?] y) {{
        t = MatMul(x, w)
        y = {add}
    }}""",
        **consts,
    )
    before = to_proto(model)
    assert _run(model) == ({"fused": 1} if fused else {})
    assert _ops(model) == (["Gemm"] if fused else ["MatMul", "Add"])
    assert [v.name for v in model.graph.outputs] == ["y"]
    if fused:
        assert_models_close(before, model, random_feeds(before, dim=5))


def test_a_matmul_read_twice_is_not_fused() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (float[2, 4] x) => (float[2, 3] y, float[2, 3] z) {
        t = MatMul(x, w)
        y = Add(t, b)
        z = Relu(t)
    }""",
        w=RNG.standard_normal((4, 3)).astype(np.float32),
        b=RNG.standard_normal(3).astype(np.float32),
    )
    assert _run(model) == {}
    assert _ops(model) == ["MatMul", "Add", "Relu"]


def test_a_linear_layer_inside_a_branch_is_fused_there() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (bool k, float[2, 4] x) => (float[2, 3] y) {
        y = If(k) <
            then_branch = t () => (float[2, 3] o) { m = MatMul(x, w)  o = Add(m, b) },
            else_branch = e () => (float[2, 3] p) { p = MatMul(x, w) }
        >
    }""",
        w=RNG.standard_normal((4, 3)).astype(np.float32),
        b=RNG.standard_normal(3).astype(np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    then_branch, else_branch = model.graph.ops[0].subgraphs()
    assert [op.op_type for op in then_branch.ops] == ["Gemm"]
    assert [v.name for v in then_branch.outputs] == ["o"]
    assert [op.op_type for op in else_branch.ops] == ["MatMul"]
    for cond in (True, False):
        feeds = {"k": np.array(cond), "x": RNG.standard_normal((2, 4)).astype(np.float32)}
        assert_models_close(before, model, feeds)


@pytest.mark.parametrize(("bias_shape", "written"), [((1, 3), [3]), ((3,), [3]), ((2, 3), [2, 3])])
def test_a_constant_row_bias_is_written_one_dimensional(
    bias_shape: tuple[int, ...], written: list[int]
) -> None:
    """pnnx makes Gemm(x, W, [N]) an ncnn InnerProduct, Gemm(x, W, [1, N]) an F.linear ncnn
    lacks (qonnx's mnist-conv); both compute the same."""
    bias = RNG.standard_normal(bias_shape).astype(np.float32)
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17]>'
        + """
    g (float[2, 4] x) => (float[2, 3] y, float[?] z) {
        t = MatMul(x, w)
        y = Add(t, b)
        z = Neg(b)
    }""",
        w=RNG.standard_normal((4, 3)).astype(np.float32),
        b=bias,
    )
    before = to_proto(model)
    assert _run(model) == {"fused": 1}
    gemm = model.graph.ops[0]
    assert gemm.op_type == "Gemm"
    assert list(gemm._inputs[2].const.shape) == written
    np.testing.assert_array_equal(gemm._inputs[2].const.numpy(), bias.reshape(written))
    assert list(model.graph.ops[1]._inputs[0].const.shape) == list(bias_shape)  # Neg's own
    assert_models_close(before, model, random_feeds(before))


def test_a_bias_the_caller_may_override_stays_as_given() -> None:
    model = model_from_text(
        '<ir_version: 4, opset_import: ["" : 9]>'
        + """
    g (float[2, 4] x, float[1, 3] b) => (float[2, 3] y) {
        t = MatMul(x, w)
        y = Add(t, b)
    }""",
        w=RNG.standard_normal((4, 3)).astype(np.float32),
        b=RNG.standard_normal((1, 3)).astype(np.float32),
    )
    assert _run(model) == {}  # pinned by --pin-defaults or a --for profile, it is fused
    assert _ops(model) == ["MatMul", "Add"]
