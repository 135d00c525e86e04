"""Squeeze and Unsqueeze adapters: axes attribute <-> input at 13, non-negative axes below 11."""

from __future__ import annotations

__all__ = ["squeeze_11_10", "squeeze_12_13", "squeeze_13_12"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    axes_attribute_to_input,
    axes_input_to_attribute,
    finish,
    normalize_axes,
    rank_of,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter(("Squeeze", "Unsqueeze"), 12, 13)
def squeeze_12_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The axes attribute becomes an int64 input (Squeeze without axes stays without)."""
    axes_attribute_to_input(op, graph, ctx)
    finish(op, graph, ctx)


@adapter(("Squeeze", "Unsqueeze"), 13, 12)
def squeeze_13_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant (or inferred) axes input becomes the attribute; a computed one is an error."""
    axes_input_to_attribute(op, graph, ctx)
    finish(op, graph, ctx)


@adapter(("Squeeze", "Unsqueeze"), 11, 10)
def squeeze_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Negative axes count from the back only from 11: made non-negative (Squeeze: the input's
    rank; Unsqueeze: the output's, input rank + number of axes)."""
    axes = op.attr("axes")
    if axes is not None and any(a < 0 for a in axes):
        rank = rank_of(ctx, graph.inputs_of(op)[0])
        if rank is not None and op.op_type == "Unsqueeze":
            rank += len(axes)
        fixed = normalize_axes(axes, rank)
        if fixed is None:
            raise ctx.fail(op, f"negative axes {list(axes)} and the input's rank is unknown")
        op.attrs["axes"] = fixed
    finish(op, graph, ctx)
