"""Clip adapters: consumed_inputs (6), min and max attributes <-> inputs (11)."""

from __future__ import annotations

__all__ = ["clip_5_6", "clip_10_11", "clip_11_10"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import add_input, dtype_of, finish, scalar, take_const
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Clip", 5, 6)
def clip_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """consumed_inputs goes; unset min/max mean no bound under both (Clip-6 writes the
    default as -/+FLT_MAX)."""
    op.attrs.pop("consumed_inputs", None)
    finish(op, graph, ctx)


@adapter("Clip", 10, 11)
def clip_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """min and max become scalar inputs of the input's type; an unset one stays omitted."""
    base = op.name or "clip"
    dtype = dtype_of(ctx, graph.inputs_of(op)[0])
    for port, name in ((1, "min"), (2, "max")):
        value = op.attrs.pop(name, None)
        if value is None:
            continue
        if dtype is None:
            raise ctx.fail(op, "the input's element type is unknown; min/max inputs need it")
        add_input(graph, op, port, scalar(graph, ctx, f"{base}_{name}", float(value), dtype))
    finish(op, graph, ctx)


@adapter("Clip", 11, 10)
def clip_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Constant min/max inputs become the attributes; computed ones are an error."""
    for port, name in ((2, "max"), (1, "min")):
        inputs = graph.inputs_of(op)
        if port >= len(inputs) or inputs[port] is None:
            continue
        data = take_const(graph, ctx, op, port)
        if data is None:
            raise ctx.fail(op, f"{name} is computed at run time; Clip-6 takes an attribute")
        op.attrs[name] = float(data.reshape(-1)[0])
    finish(op, graph, ctx)
