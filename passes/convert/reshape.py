"""Reshape adapters: the shape attribute <-> input (5), allowzero (14)."""

from __future__ import annotations

__all__ = ["reshape_4_5", "reshape_5_4", "reshape_14_13"]

import numpy as np

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    add_input,
    emit,
    finish,
    int64s,
    shape_of,
    take_const,
)
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
    """allowzero=1 keeps a 0 as a 0-sized dim, where Reshape-5 copies the input's dim.

    1. Every element of the shape is a nonzero constant or the input's own dim at that index
       (symbolic too: Shape(x)[i] at i, as exporters write; a 0 there is copied as 0):
       allowzero changes nothing and goes.
    2. A literal 0 in a constant shape: refused (the empty result has no Reshape-5 form).
    3. Otherwise the elements that may be 0 at run time (another tensor's dim, computed) become
       -1 where they are 0: the output is then empty, so -1 infers 0 as allowzero=1 gives it.
       Exact unless two elements are 0 at once (Reshape-5 then fails where allowzero=1 gives
       an empty tensor).
    """
    if not int(op.attrs.pop("allowzero", 0) or 0):
        finish(op, graph, ctx)
        return
    x, shape_value = graph.inputs_of(op)[:2]
    assert shape_value is not None
    shape = ctx.known(graph, shape_value)
    dims = shape_of(ctx, x)
    maybe_zero = []
    for i, d in enumerate(shape or ()):
        if d == 0:
            raise ctx.fail(
                op, f"allowzero=1 with a 0 in the shape {list(shape)} (an empty output)"
            )
        own = d is not None and dims is not None and i < len(dims) and dims[i] == d
        maybe_zero.append(not isinstance(d, int) and not own)
    if shape is not None and not any(maybe_zero):
        finish(op, graph, ctx)
        return
    base = op.name or "reshape"
    is_zero = emit(
        graph, "Equal", [shape_value, int64s(graph, ctx, f"{base}_zero", [0])], base=base
    )
    if shape is not None and not all(maybe_zero):
        mask = ctx.add_constant(graph, f"{base}_may_be_zero", np.array(maybe_zero, np.bool_))
        is_zero = emit(graph, "And", [is_zero, mask], base=base)
    minus_one = int64s(graph, ctx, f"{base}_minus_one", [-1])
    fixed = emit(graph, "Where", [is_zero, minus_one, shape_value], base=base)
    fixed.type = shape_value.type
    add_input(graph, op, 1, fixed)
    finish(op, graph, ctx)
