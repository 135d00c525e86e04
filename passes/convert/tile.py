"""Tile at 6: Tile-1's (tiles, axis) pair becomes one repeats input, and back."""

from __future__ import annotations

__all__ = ["tile_5_6", "tile_6_5"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    const_ints,
    dtype_of,
    emit,
    int64s,
    rank_of,
    replace_outputs,
    scalar,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Tile", 5, 6)
def tile_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Constant tiles and axis and a known rank make repeats: 1s, tiles at axis."""
    x, tiles, axis = graph.inputs_of(op)[:3]
    t, a = ctx.const(graph, tiles), ctx.const(graph, axis)
    rank = rank_of(ctx, x)
    if t is None or a is None or rank is None:
        raise ctx.fail(op, "tiles and axis must be constants and the rank known")
    repeats = [1] * rank
    repeats[int(a.reshape(-1)[0])] = int(t.reshape(-1)[0])
    out = emit(
        graph,
        "Tile",
        [x, int64s(graph, ctx, f"{op.name or 'tile'}_repeats", repeats)],
        base=op.name or "tile",
    )
    replace_outputs(graph, op, [out])


@adapter("Tile", 6, 5)
def tile_6_5(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Constant repeats become one Tile-1 per repeated axis (tiles and axis of X's float
    type)."""
    x, repeats_value = graph.inputs_of(op)[:2]
    repeats = const_ints(graph, ctx, repeats_value)
    dtype = dtype_of(ctx, x)
    if repeats is None or dtype is None:
        raise ctx.fail(op, "repeats must be a constant and X's element type known")
    base = op.name or "tile"
    out = x
    for axis, count in enumerate(repeats):
        if count != 1 or (axis == len(repeats) - 1 and out is x):
            out = emit(
                graph,
                "Tile",
                [
                    out,
                    scalar(graph, ctx, f"{base}_tiles", count, dtype),
                    scalar(graph, ctx, f"{base}_axis", axis, dtype),
                ],
                base=base,
            )
    replace_outputs(graph, op, [out])  # type: ignore[list-item]
