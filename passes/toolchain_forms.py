"""Forms a downstream toolchain computes right, written where its profile asks (`optimize
--for`; ``onnxforge.toolchains`` says which toolchain needs which). Each edit keeps what the
model computes on onnxruntime; each cites the converter behaviour it answers."""

from __future__ import annotations

__all__ = ["dropout_as_inference", "gelu_scale_first", "spell_out_fill"]

import math

import numpy as np

from onnxforge.ir import Graph, Model, Op, Tensor, Value
from onnxforge.passes._infra import node_label
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    constant,
    graphs_with_opset,
    only_reader,
    producer_of,
    since,
)


def dropout_as_inference(model: Model) -> list[str]:
    """Make every Dropout whose constant training flag is on (training_mode true from
    version 12, is_test 0 before 7) compute as inference does, its input unchanged (then
    eliminate-identity removes it): what an inference toolchain means by it (MNN and pnnx
    ignore the flag, OpenVINO refuses to convert it; exporters write it for a model left in
    training mode). A flag that is a graph input stays the caller's. Returns the nodes."""
    changed = []
    for graph, opset in graphs_with_opset(model):
        for op in graph.ops:
            version = since(op, opset) if op.op_type == "Dropout" else None
            if version is None or op.domain not in STANDARD_DOMAINS:
                continue
            if version < 7 and not op.attr("is_test", 0):
                op.attrs["is_test"] = 1
                graph.touch(op)
                changed.append(node_label(op))
            elif version >= 12 and len(op._inputs) > 2 and op._inputs[2] is not None:
                mode = constant(op._inputs[2])
                if mode is not None and mode.size == 1 and bool(mode.reshape(-1)[0]):
                    graph.set_input(op, 2, None)
                    changed.append(node_label(op))
    return changed


def spell_out_fill(model: Model) -> list[str]:
    """Give each ConstantOfShape without ``value`` the one its absence means (a float32 0):
    MNN 3.6 leaves that tensor uninitialized (torch's new_zeros: 5.5e18 one run, 1e-43 the
    next), and computes zeros once the value is written. Returns the nodes."""
    changed = []
    for graph, _ in graphs_with_opset(model):
        for op in graph.ops:
            standard = op.domain in STANDARD_DOMAINS
            if op.op_type == "ConstantOfShape" and standard and op.attrs.get("value") is None:
                op.attrs["value"] = Tensor.from_numpy(np.zeros(1, np.float32))
                graph.touch(op)
                changed.append(node_label(op))
    return changed


def _scalar(value: Value | None, want: float) -> bool:
    found = constant(value)
    return (
        found is not None
        and found.size == 1
        and found.dtype.kind == "f"
        and math.isclose(float(found.reshape(-1)[0]), want, rel_tol=1e-6)
    )


def _erf_gelu(graph: Graph, outer: Op) -> tuple[Value, Value, Value, Op] | None:
    """``outer`` = Mul(Mul(x, Erf(x / sqrt 2) + 1), 0.5): (x, the half, the Erf + 1, the
    inner Mul), else None."""
    if outer.op_type != "Mul" or outer.domain not in STANDARD_DOMAINS or len(outer._inputs) != 2:
        return None
    for k in (0, 1):
        inner_value, half = outer._inputs[k], outer._inputs[1 - k]
        inner = producer_of(graph, inner_value, {"Mul"})
        if half is None or inner is None or not _scalar(half, 0.5):
            continue
        if not only_reader(graph, inner_value, outer):
            continue
        for j in (0, 1):
            x, plus = inner._inputs[j], inner._inputs[1 - j]
            add = producer_of(graph, plus, {"Add"})
            if x is None or plus is None or add is None or len(add._inputs) != 2:
                continue
            for i in (0, 1):
                erf = producer_of(graph, add._inputs[i], {"Erf"})
                if erf is None or not _scalar(add._inputs[1 - i], 1.0):
                    continue
                scale = producer_of(graph, erf._inputs[0], {"Div", "Mul"})
                if scale is None or scale._inputs[0] is not x:
                    continue
                root = math.sqrt(2) if scale.op_type == "Div" else 1 / math.sqrt(2)
                if _scalar(scale._inputs[1], root):
                    return x, half, plus, inner
    return None


def gelu_scale_first(model: Model) -> list[str]:
    """Write the erf GELU x * (erf(x / sqrt 2) + 1) * 0.5 as (x * 0.5) * (erf(x / sqrt 2) + 1):
    the same float32 products (a product with 0.5 is exact), which MNN 3.6 computes op by op,
    where its converter turns the first form into its GELU kernel, whose erf is approximate
    (4.7e-4 off on standard normal inputs; a PP-OCR recognizer's outputs 9.6e-4 off).
    Returns the outer Mul of each GELU rewritten."""
    changed = []
    for graph, _ in graphs_with_opset(model):
        for outer in list(graph.ops):
            if outer._graph is not graph:
                continue
            found = _erf_gelu(graph, outer)
            if found is None:
                continue
            x, half, plus, inner = found
            halved = graph.add_op(
                "Mul", [x, half], name=f"{outer.name}_half" if outer.name else ""
            )
            graph.set_input(outer, 0, halved._outputs[0])
            graph.set_input(outer, 1, plus)
            graph.remove_op(inner)
            graph.touch(outer)
            changed.append(node_label(outer))
    return changed
