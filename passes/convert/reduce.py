"""Reduce* adapters: axes attribute <-> input (ReduceSum at 13, the others at 18) and
non-negative axes below 11."""

from __future__ import annotations

__all__ = ["reduce_11_10", "reduce_axes_down", "reduce_axes_up"]

from onnxforge import opset as schemas
from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    axes_attribute_to_input,
    axes_input_to_attribute,
    emit,
    finish,
    normalize_axes,
    rank_of,
    replace_outputs,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter

AXES_INPUT_AT_18 = tuple(op for op in schemas.REDUCE_OPS if op != "ReduceSum")


@adapter("ReduceSum", 12, 13)
@adapter(AXES_INPUT_AT_18, 17, 18)
def reduce_axes_up(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The axes attribute becomes an int64 input; no axes (reduce all) stays no input."""
    if op.attr("axes") is not None and len(op.attr("axes")) == 0:
        del op.attrs["axes"]  # an empty list reduced everything, as an absent one does
    axes_attribute_to_input(op, graph, ctx)
    finish(op, graph, ctx)


@adapter("ReduceSum", 13, 12)
@adapter(AXES_INPUT_AT_18, 18, 17)
def reduce_axes_down(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant axes input becomes the attribute. noop_with_empty_axes=1 with no (or empty)
    axes is the identity: the node becomes an Identity."""
    noop = int(op.attrs.pop("noop_with_empty_axes", 0) or 0)
    inputs = graph.inputs_of(op)
    has_axes = len(inputs) > 1 and inputs[1] is not None
    axes = axes_input_to_attribute(op, graph, ctx) if has_axes else None
    if not axes:
        op.attrs.pop("axes", None)
        if noop:
            x = graph.inputs_of(op)[0]
            assert x is not None
            replace_outputs(graph, op, [emit(graph, "Identity", [x], base=op.name or "noop")])
            return
    finish(op, graph, ctx)


@adapter(schemas.REDUCE_OPS, 11, 10)
def reduce_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Negative axes are counted from the back only from 11: made non-negative by the rank."""
    axes = op.attr("axes")
    if axes is not None:
        fixed = normalize_axes(axes, rank_of(ctx, graph.inputs_of(op)[0]))
        if fixed is None:
            raise ctx.fail(op, f"negative axes {list(axes)} and the input's rank is unknown")
        op.attrs["axes"] = fixed
    finish(op, graph, ctx)
