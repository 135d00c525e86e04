"""Max, Min, Mean and Sum below 8 and PRelu below 7: inputs of one shape (no broadcasting),
made so with Tile/Reshape when the shapes are static."""

from __future__ import annotations

__all__ = ["prelu_7_6", "variadic_8_7"]

import numpy as np

from onnxforge.ir import Graph, Op, Value
from onnxforge.passes.convert._build import emit, finish, int64s, shape_of
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _expand_static(
    graph: Graph, ctx: ConvertContext, value: Value, shape: tuple, target: tuple, *, base: str
) -> Value:
    """``value`` tiled (and reshaped to the same rank) to the static ``target`` shape."""
    aligned = (1,) * (len(target) - len(shape)) + tuple(shape)
    if aligned != tuple(shape):
        value = emit(
            graph, "Reshape", [value, int64s(graph, ctx, f"{base}_shape", aligned)], base=base
        )
    repeats = [t // a for t, a in zip(target, aligned, strict=True)]
    return emit(graph, "Tile", [value, int64s(graph, ctx, f"{base}_repeats", repeats)], base=base)


@adapter(("Max", "Min", "Mean", "Sum"), 8, 7)
def variadic_8_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Inputs of one shape pass; static shapes that broadcast are tiled to the result's."""
    inputs = [v for v in graph.inputs_of(op) if v is not None]
    shapes = [shape_of(ctx, v) for v in inputs]
    if any(s is None for s in shapes):
        raise ctx.fail(op, "an input's shape is unknown; before 8 the inputs share one shape")
    if len({tuple(s) for s in shapes}) > 1:  # type: ignore[arg-type]
        if not all(isinstance(d, int) for s in shapes for d in s):  # type: ignore[union-attr]
            raise ctx.fail(
                op,
                f"inputs of shapes {[list(s) for s in shapes]} broadcast; "  # type: ignore[arg-type]
                "before 8 they share one shape",
            )
        target = tuple(np.broadcast_shapes(*[tuple(s) for s in shapes]))  # type: ignore[arg-type,misc]
        base = op.name or op.op_type.lower()
        for port, (value, shape) in enumerate(zip(inputs, shapes, strict=True)):
            if tuple(shape) != target:  # type: ignore[arg-type]
                graph.set_input(
                    op, port, _expand_static(graph, ctx, value, shape, target, base=base)
                )  # type: ignore[arg-type]
    finish(op, graph, ctx)


@adapter("PRelu", 7, 6)
def prelu_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """PRelu-6's slope has X's shape or one element; a constant slope that broadcasts is
    broadcast here when X's shape is static."""
    x, slope = graph.inputs_of(op)[:2]
    sx, ss = shape_of(ctx, x), shape_of(ctx, slope)
    if ss is not None and all(d == 1 for d in ss):
        finish(op, graph, ctx)
        return
    if sx is not None and ss is not None and tuple(sx) == tuple(ss):
        finish(op, graph, ctx)
        return
    data = ctx.const(graph, slope)
    if data is None or sx is None or not all(isinstance(d, int) for d in sx):
        raise ctx.fail(op, "the slope broadcasts; PRelu-6 needs it of X's static shape")
    assert slope is not None
    full = np.ascontiguousarray(np.broadcast_to(data, tuple(sx)))  # type: ignore[arg-type]
    graph.set_input(op, 1, ctx.add_constant(graph, f"{slope.name}_full", full))
    finish(op, graph, ctx)
