"""Reshape adapters: the shape attribute <-> input (5), allowzero (14)."""

from __future__ import annotations

__all__ = ["reshape_4_5", "reshape_5_4", "reshape_14_13"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import add_input, const_ints, finish, int64s, take_const
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Reshape", 4, 5)
def reshape_4_5(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The shape attribute becomes an int64 input; consumed_inputs goes."""
    op.attrs.pop("consumed_inputs", None)
    shape = op.attrs.pop("shape", None)
    if shape is None:
        raise ctx.fail(op, "Reshape-1 without a shape attribute")
    add_input(graph, op, 1, int64s(graph, ctx, f"{op.name or 'reshape'}_shape", shape))
    finish(op, graph, ctx)


@adapter("Reshape", 5, 4)
def reshape_5_4(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant (or inferred) shape input becomes the attribute; a computed one is an
    error."""
    shape = take_const(graph, ctx, op, 1)
    if shape is None:
        raise ctx.fail(op, "the shape is computed at run time; Reshape-1 takes an attribute")
    op.attrs["shape"] = [int(d) for d in shape.reshape(-1)]
    finish(op, graph, ctx)


@adapter("Reshape", 14, 13)
def reshape_14_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """allowzero=1 keeps a 0 as a 0-sized dim; without a 0 in a known shape it changes
    nothing and goes."""
    if int(op.attrs.pop("allowzero", 0) or 0):
        shape = const_ints(graph, ctx, graph.inputs_of(op)[1])
        if shape is None or 0 in shape:
            raise ctx.fail(op, "allowzero=1 with a shape that may hold 0 has no equivalent")
    finish(op, graph, ctx)
