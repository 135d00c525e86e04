"""Slice adapters: starts/ends/axes attributes <-> inputs (10), non-negative axes below 11."""

from __future__ import annotations

__all__ = ["slice_9_10", "slice_10_9", "slice_11_10"]

import numpy as np

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    add_input,
    drop_if_unused,
    finish,
    int64s,
    normalize_axes,
    rank_of,
    take_const,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Slice", 9, 10)
def slice_9_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """starts, ends and axes become int64 inputs 1, 2, 3."""
    base = op.name or "slice"
    for port, name in ((1, "starts"), (2, "ends"), (3, "axes")):
        value = op.attrs.pop(name, None)
        if value is not None:
            add_input(graph, op, port, int64s(graph, ctx, f"{base}_{name}", value))
    finish(op, graph, ctx)


@adapter("Slice", 10, 9)
def slice_10_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Constant starts/ends/axes become attributes; steps must be absent or all 1; anything
    computed at run time is an error."""
    inputs = graph.inputs_of(op)
    if len(inputs) > 4 and inputs[4] is not None:
        steps = ctx.const(graph, inputs[4])
        if steps is None or not np.all(steps == 1):
            raise ctx.fail(op, "steps other than 1 have no equivalent before 10")
    arrays = [ctx.const(graph, v) if v is not None else None for v in inputs[1:4]]
    for name, value, array in zip(("starts", "ends", "axes"), inputs[1:4], arrays, strict=False):
        if value is not None and array is None:
            raise ctx.fail(op, f"{name} is computed at run time; Slice-1 takes an attribute")
    for port in range(len(inputs) - 1, 0, -1):
        take_const(graph, ctx, op, port)
    for name, array in zip(("starts", "ends", "axes"), arrays, strict=False):
        if array is not None:
            op.attrs[name] = [int(v) for v in array.reshape(-1)]
    finish(op, graph, ctx)


@adapter("Slice", 11, 10)
def slice_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Negative axes count from the back only from 11: a constant axes input is made
    non-negative by the rank."""
    inputs = graph.inputs_of(op)
    if len(inputs) > 3 and inputs[3] is not None:
        axes = ctx.const(graph, inputs[3])
        if axes is None:
            raise ctx.fail(op, "axes are computed at run time and may be negative")
        if np.any(axes < 0):
            fixed = normalize_axes([int(a) for a in axes.reshape(-1)], rank_of(ctx, inputs[0]))
            if fixed is None:
                raise ctx.fail(op, "negative axes and the input's rank is unknown")
            old = inputs[3]
            graph.set_input(op, 3, int64s(graph, ctx, f"{op.name or 'slice'}_axes", fixed))
            drop_if_unused(graph, old)
    finish(op, graph, ctx)
