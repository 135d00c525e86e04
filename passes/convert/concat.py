"""Concat adapters: axis required from 4, non-negative below 11."""

from __future__ import annotations

__all__ = ["concat_3_4", "concat_11_10"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish, rank_of
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Concat", 3, 4)
def concat_3_4(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Concat-1's axis defaults to 1; Concat-4 requires it written."""
    op.attrs.setdefault("axis", 1)
    finish(op, graph, ctx)


@adapter("Concat", 11, 10)
def concat_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A negative axis is made non-negative by the inputs' rank."""
    axis = int(op.attrs["axis"])
    if axis < 0:
        ranks = {rank_of(ctx, v) for v in graph.inputs_of(op)} - {None}
        if len(ranks) != 1:
            raise ctx.fail(op, f"axis={axis} and the inputs' rank is unknown")
        op.attrs["axis"] = axis + ranks.pop()
    finish(op, graph, ctx)
