"""remove-default-inputs: optional inputs fed all zeros, which is what their absence means,
are omitted (the zero initial state of an LSTM, a zero bias); an attribute that changes
nothing takes its default (Reshape's allowzero with no 0 in the shape)."""

from __future__ import annotations

__all__ = ["RemoveDefaultInputsPass"]

import logging
from typing import ClassVar

import numpy as np

from onnxforge.ir import Graph, Model, Op, Tensor, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import constant, graphs_with_opset, refresh_captures, since
from onnxforge.passes._worklist import visit

logger = logging.getLogger(__name__)

ZERO_PORTS: dict[str, tuple[int, ...]] = {
    "RNN": (3, 5),  # B, initial_h
    "GRU": (3, 5),  # B, initial_h
    "LSTM": (3, 5, 6, 7),  # B, initial_h, initial_c, P
    "Conv": (2,),  # B
    "ConvTranspose": (2,),  # B
}
"""Optional inputs whose absence means zeros (Gemm's C from 11 is handled apart)."""
KEEP_ZEROS = frozenset(
    {"Identity", "Reshape", "Flatten", "Squeeze", "Unsqueeze", "Transpose", "Slice", "Expand"}
    | {"Tile", "Cast", "Gather"}
)
"""Ops whose output is all zeros when their first input is."""
MAX_DEPTH = 8


@register_pass
class RemoveDefaultInputsPass(Pass):
    """Omit an optional input that is all zeros when its absence means zeros, and an
    attribute set where it changes nothing.

    1. RNN, GRU, LSTM: the bias B, initial_h, initial_c and the peepholes P; Conv and
       ConvTranspose: the bias B; Gemm from opset 11: C.
    2. All zeros: a constant whose elements are all 0 (also -0.0), a ConstantOfShape of 0,
       and what Reshape, Slice, Expand, Cast, Gather, Concat and the like make of those
       (followed up to 8 producers back).
    3. Reshape (14 or later) with allowzero=1 and a constant shape holding no 0: the
       attribute goes. ONNX's Reshape treats only a 0 of the shape differently under it
       (kept as 0 rather than copied from the input), so the node computes the same, and
       converters without allowzero take it (onnx2torch 1.5.15: '"allowzero=1" is not
       implemented').
    The producers left unread go with eliminate-dead-code.
    """

    name: ClassVar[str] = "remove-default-inputs"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    keeps_types: ClassVar[bool] = True  # output types do not depend on a zero default input
    summary: ClassVar[str] = (
        "Omit an optional input that is all zeros when its absence means zeros, and "
        "Reshape's allowzero where the shape has no 0."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        for graph, opset in graphs_with_opset(model):
            for op in visit(graph, self.focus):
                version = since(op, opset)
                if op.op_type == "Reshape" and _allowzero_unused(op, version):
                    del op.attrs["allowzero"]
                    graph.touch(op)
                    result.note("allowzeros_removed", node_label(op))
                    continue
                ports = ZERO_PORTS.get(op.op_type, ())
                if op.op_type == "Gemm" and version is not None and version >= 11:
                    ports = (2,)
                if version is None or not ports:
                    continue
                for port in ports:
                    value = op._inputs[port] if port < len(op._inputs) else None
                    if value is not None and _zeros(graph, value, 0):
                        graph.set_input(op, port, None)
                        result.note("inputs_removed", f"{node_label(op)} input {port}")
                while op._inputs and op._inputs[-1] is None:
                    op._inputs.pop()
                    graph.touch(op)
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result


def _allowzero_unused(op: Op, version: int | None) -> bool:
    """Case 3."""
    if version is None or version < 14 or not op.attr("allowzero", 0):
        return False
    shape = constant(op._inputs[1]) if len(op._inputs) > 1 else None
    return shape is not None and shape.dtype.kind in "iu" and bool(np.all(shape != 0))


def _zeros(graph: Graph, value: Value, depth: int) -> bool:
    """Case 2."""
    array = constant(value)
    if array is not None:
        return array.dtype.kind in "iufcb" and not np.any(array)
    owner = value.graph or graph
    op = owner.producer(value)
    if op is None or depth >= MAX_DEPTH or op.domain not in ("", "ai.onnx"):
        return False
    if op.op_type == "ConstantOfShape":
        fill = op.attr("value")
        return fill is None or (isinstance(fill, Tensor) and not np.any(fill.numpy()))
    if op.op_type == "Concat":
        return all(v is not None and _zeros(owner, v, depth + 1) for v in op._inputs)
    first = op._inputs[0] if op._inputs else None
    return op.op_type in KEEP_ZEROS and first is not None and _zeros(owner, first, depth + 1)
