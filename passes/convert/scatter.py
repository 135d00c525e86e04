"""Scatter (deprecated at 11) <-> ScatterElements."""

from __future__ import annotations

__all__ = ["scatter_10_11", "scatter_elements_11_10"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import emit, replace_outputs
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _replace(op: Op, graph: Graph, op_type: str) -> None:
    inputs = graph.inputs_of(op)
    out = emit(
        graph, op_type, inputs, base=op.name or op_type.lower(), axis=int(op.attr("axis", 0))
    )
    new = graph.producer(out)
    assert new is not None
    new.name = op.name
    replace_outputs(graph, op, [out])


@adapter("Scatter", 10, 11)
def scatter_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Scatter-9 is ScatterElements-11 under another name."""
    _replace(op, graph, "ScatterElements")


@adapter("ScatterElements", 11, 10)
def scatter_elements_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """ScatterElements-11 (no reduction before 16) is Scatter-9."""
    _replace(op, graph, "Scatter")
