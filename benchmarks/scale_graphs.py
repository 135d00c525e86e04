"""Synthetic graphs of any size for ``scale.py``: a chain of element-wise ops (and one with
a few Identities), a stack of transformer-style blocks, and a chain with If and Loop bodies.
Weights are shared, so a million-node file stays small and the time goes to the graph, not
to bytes."""

from __future__ import annotations

__all__ = ["FAMILIES", "blocks", "chain", "control", "sparse"]

from collections.abc import Callable

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
CHAIN_OPS = ("Add", "Mul", "Relu", "Sub")


def _model(graph: onnx.GraphProto) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)])
    model.ir_version = 8
    return model


def chain(nodes: int) -> onnx.ModelProto:
    """x[N, 8] through Add, Mul, Relu, Sub with a broadcast constant [8], repeated: nothing to
    simplify. The constant is below 1, so each Add-Mul-Relu-Sub shrinks differences and the
    outputs stay finite at any length (comparing them on onnxruntime means something; with
    constants up to 1.5 every output of the 10k chain overflowed)."""
    c = numpy_helper.from_array(np.linspace(0.5, 0.95, 8, dtype=np.float32), "c")
    made = []
    prev = "x"
    for i in range(nodes):
        op = CHAIN_OPS[i % len(CHAIN_OPS)]
        out = f"v{i}"
        made.append(helper.make_node(op, [prev] if op == "Relu" else [prev, "c"], [out]))
        prev = out
    graph = helper.make_graph(
        made,
        "chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8])],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 8])],
        [c],
    )
    return _model(graph)


def sparse(nodes: int) -> onnx.ModelProto:
    """The chain with one op in ``SPARSE_EVERY`` an Identity: little to clean up, as in a
    large export. The first round removes the Identities; the second finds nothing, and
    costs what looking at every op again costs unless a pass visits only what changed."""
    model = chain(nodes)
    for i in range(SPARSE_EVERY - 1, nodes - 1, SPARSE_EVERY):  # the last op stays
        node = model.graph.node[i]
        node.op_type = "Identity"
        del node.input[1:]
    return model


SPARSE_EVERY = 1000

BLOCK_NODES = 21


def blocks(nodes: int) -> onnx.ModelProto:
    """Transformer-style blocks on x[B, S, 64]: MatMul, Shape -> Gather -> Concat -> Reshape to
    4 heads, Transposes, Softmax attention, a reshape back, a residual Add, an Identity and a
    duplicated Relu joined by Max (what optimize removes: the Identity, one Relu, the repeated
    shape computations). 21 nodes a block. Small weights and Max keep the 10k graph's outputs
    finite (about 1e11), so comparing them on onnxruntime means something: with 0.05 and Add,
    the values doubled every block and every output was NaN."""
    rng = np.random.default_rng(0)
    inits = [
        numpy_helper.from_array((rng.standard_normal((64, 64)) * 0.01).astype(np.float32), "w"),
        numpy_helper.from_array(np.array(0, np.int64), "i0"),
        numpy_helper.from_array(np.array(1, np.int64), "i1"),
        numpy_helper.from_array(np.array([0], np.int64), "axes0"),
        numpy_helper.from_array(np.array([4, 16], np.int64), "heads"),
        numpy_helper.from_array(np.array([64], np.int64), "width"),
    ]
    made = []
    h = "x"
    for b in range(max(1, nodes // BLOCK_NODES)):
        p = f"b{b}_"

        def node(op: str, ins: list[str], out: str, **attrs: object) -> str:
            made.append(helper.make_node(op, ins, [p + out], **attrs))  # noqa: B023
            return p + out  # noqa: B023

        q = node("MatMul", [h, "w"], "q")
        shape = node("Shape", [h], "shape")
        ub = node("Unsqueeze", [node("Gather", [shape, "i0"], "b"), "axes0"], "ub")
        us = node("Unsqueeze", [node("Gather", [shape, "i1"], "s"), "axes0"], "us")
        split = node("Concat", [ub, us, "heads"], "split", axis=0)
        qh = node("Transpose", [node("Reshape", [q, split], "q4")], "qh", perm=[0, 2, 1, 3])
        kt = node("Transpose", [qh], "kt", perm=[0, 1, 3, 2])
        att = node("Softmax", [node("MatMul", [qh, kt], "scores")], "att", axis=-1)
        ctx = node("Transpose", [node("MatMul", [att, qh], "ctx")], "ctx_t", perm=[0, 2, 1, 3])
        merged = node("Concat", [ub, us, "width"], "merged", axis=0)
        out = node("Add", [node("Reshape", [ctx, merged], "ctx3"), h], "res")
        kept = node("Identity", [out], "kept")
        h = node("Max", [node("Relu", [kept], "r1"), node("Relu", [kept], "r2")], "out")
    graph = helper.make_graph(
        made,
        "blocks",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["B", "S", 64])],
        [helper.make_tensor_value_info(h, TensorProto.FLOAT, ["B", "S", 64])],
        inits,
    )
    return _model(graph)


CONTROL_STEP = 10


def control(nodes: int) -> onnx.ModelProto:
    """The chain, where every tenth node is an If (Relu or Neg of the chain by a bool input)
    or a Loop of two iterations adding the constant; each body holds one node."""
    c = numpy_helper.from_array(np.linspace(0.5, 1.5, 8, dtype=np.float32), "c")
    trips = numpy_helper.from_array(np.array(2, np.int64), "trips")
    made = []
    prev = "x"
    i = 0
    while i < nodes:
        out = f"v{i}"
        if i % (2 * CONTROL_STEP) == CONTROL_STEP - 1:
            branches = {
                name: helper.make_graph(
                    [helper.make_node(op, [prev], [f"{out}_{name}"])],
                    f"{out}_{name}",
                    [],
                    [helper.make_tensor_value_info(f"{out}_{name}", TensorProto.FLOAT, ["N", 8])],
                )
                for name, op in (("then", "Relu"), ("else", "Neg"))
            }
            made.append(
                helper.make_node(
                    "If",
                    ["flag"],
                    [out],
                    then_branch=branches["then"],
                    else_branch=branches["else"],
                )
            )
            i += 3
        elif i % (2 * CONTROL_STEP) == 2 * CONTROL_STEP - 1:
            body = helper.make_graph(
                [
                    helper.make_node("Identity", [f"{out}_cond"], [f"{out}_cond_out"]),
                    helper.make_node("Add", [f"{out}_acc", "c"], [f"{out}_acc_out"]),
                ],
                f"{out}_body",
                [
                    helper.make_tensor_value_info(f"{out}_i", TensorProto.INT64, []),
                    helper.make_tensor_value_info(f"{out}_cond", TensorProto.BOOL, []),
                    helper.make_tensor_value_info(f"{out}_acc", TensorProto.FLOAT, ["N", 8]),
                ],
                [
                    helper.make_tensor_value_info(f"{out}_cond_out", TensorProto.BOOL, []),
                    helper.make_tensor_value_info(f"{out}_acc_out", TensorProto.FLOAT, ["N", 8]),
                ],
            )
            made.append(helper.make_node("Loop", ["trips", "", prev], [out], body=body))
            i += 3
        else:
            op = CHAIN_OPS[i % len(CHAIN_OPS)]
            made.append(helper.make_node(op, [prev] if op == "Relu" else [prev, "c"], [out]))
            i += 1
        prev = out
    graph = helper.make_graph(
        made,
        "control",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 8]),
            helper.make_tensor_value_info("flag", TensorProto.BOOL, []),
        ],
        [helper.make_tensor_value_info(prev, TensorProto.FLOAT, ["N", 8])],
        [c, trips],
    )
    return _model(graph)


FAMILIES: dict[str, Callable[[int], onnx.ModelProto]] = {
    "chain": chain,
    "blocks": blocks,
    "control": control,
    "sparse": sparse,
}
