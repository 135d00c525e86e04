"""TopK adapters: k attribute <-> input (10); largest/sorted and negative axes (11)."""

from __future__ import annotations

__all__ = ["topk_9_10", "topk_10_9", "topk_11_10"]

from onnxforge.ir import Graph, Op, TensorType
from onnxforge.passes.convert._build import (
    add_input,
    emit,
    finish,
    int64s,
    rank_of,
    reroute_output,
    take_const,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("TopK", 9, 10)
def topk_9_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """k becomes a one-element int64 input."""
    k = op.attrs.pop("k")
    add_input(graph, op, 1, int64s(graph, ctx, f"{op.name or 'topk'}_k", [int(k)]))
    finish(op, graph, ctx)


@adapter("TopK", 10, 9)
def topk_10_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant K becomes the attribute; a computed one is an error."""
    k = take_const(graph, ctx, op, 1)
    if k is None:
        raise ctx.fail(op, "K is computed at run time; TopK-1 takes an attribute")
    op.attrs["k"] = int(k.reshape(-1)[0])
    finish(op, graph, ctx)


@adapter("TopK", 11, 10)
def topk_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A negative axis is made non-negative by the rank. sorted goes (sorted output is one of
    the orders sorted=0 allows). largest=0 becomes TopK of -X, whose values are negated
    back: the same elements, ties in the same index order."""
    axis = int(op.attr("axis", -1))
    if axis < 0:
        rank = rank_of(ctx, graph.inputs_of(op)[0])
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and the input's rank is unknown")
        axis += rank
    op.attrs["axis"] = axis
    op.attrs.pop("sorted", None)
    if int(op.attrs.pop("largest", 1)) == 0:
        x = graph.inputs_of(op)[0]
        assert x is not None
        base = op.name or "topk"
        negated = emit(graph, "Neg", [x], base=base, type=ctx.type(x))
        graph.set_input(op, 0, negated)
        values = graph.outputs_of(op)[0]
        t = values.type if values is not None else None
        reroute_output(
            graph,
            op,
            0,
            lambda inner: emit(graph, "Neg", [inner], base=base),
            type=t if isinstance(t, TensorType) else None,
        )
    finish(op, graph, ctx)
