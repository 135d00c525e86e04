"""Ops whose only change at 11 is a negative ``axis`` (ArgMax, ArgMin, Compress, Flatten):
going below 11 it is made non-negative by the input's rank."""

from __future__ import annotations

__all__ = ["axis_11_10"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish, rank_of
from onnxforge.passes.convert._registry import ConvertContext, adapter

_DEFAULT_AXIS = {"ArgMax": 0, "ArgMin": 0, "Flatten": 1}


@adapter(("ArgMax", "ArgMin", "Compress", "Flatten"), 11, 10)
def axis_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Flatten's axis may be the rank itself (range [-r, r]); the others' [-r, r-1]."""
    axis = op.attr("axis", _DEFAULT_AXIS.get(op.op_type))
    if axis is not None and int(axis) < 0:
        rank = rank_of(ctx, graph.inputs_of(op)[0])
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and the input's rank is unknown")
        op.attrs["axis"] = int(axis) + rank
    finish(op, graph, ctx)
