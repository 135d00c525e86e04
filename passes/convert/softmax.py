"""Softmax, LogSoftmax and Hardmax adapters: the axis semantics of 13 (one axis, not the
flattened tail) both ways, and non-negative axes below 11."""

from __future__ import annotations

__all__ = ["softmax_11_10", "softmax_12_13", "softmax_13_12"]

from onnxforge.ir import Graph, Op, TensorType
from onnxforge.passes.convert._build import emit, finish, rank_of, replace_outputs, shape_of
from onnxforge.passes.convert._registry import ConvertContext, adapter

SOFTMAX_OPS = ("Softmax", "LogSoftmax", "Hardmax")


def _ones_after(shape: tuple | None, axis: int) -> bool:
    """Every dim after ``axis`` is a static 1 (then one axis and the tail coincide)."""
    return shape is not None and all(d == 1 for d in shape[axis + 1 :])


@adapter(SOFTMAX_OPS, 12, 13)
def softmax_12_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Softmax-11 over the tail from ``axis`` (default 1). When the tail is one axis (the last,
    or only 1s follow) the axis is kept; otherwise Flatten(axis) -> op(axis=-1) -> Reshape to
    the input's shape, which needs no rank and works on symbolic dims."""
    x = graph.inputs_of(op)[0]
    assert x is not None
    axis = int(op.attr("axis", 1))
    shape = shape_of(ctx, x)
    if shape is not None:
        rank = len(shape)
        a = axis + rank if axis < 0 else axis
        if a == rank - 1 or _ones_after(shape, a):
            op.attrs["axis"] = a
            finish(op, graph, ctx)
            return
    t = ctx.type(x)
    base = op.name or op.op_type.lower()
    dims = emit(graph, "Shape", [x], base=base)
    flat = emit(graph, "Flatten", [x], base=base, axis=axis)
    flat.type = TensorType(t.dtype, None) if t is not None else None
    inner = emit(graph, op.op_type, [flat], base=base, axis=-1)
    inner.type = flat.type
    out = emit(graph, "Reshape", [inner, dims], base=base)
    replace_outputs(graph, op, [out])


@adapter(SOFTMAX_OPS, 13, 12)
def softmax_13_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Softmax-13 along one ``axis`` (default -1). The last axis, or one followed by static 1s,
    is the same under Softmax-11; any other axis of a known rank goes through a Transpose that
    makes it the last one (and back). An unknown rank with another axis is an error."""
    x = graph.inputs_of(op)[0]
    assert x is not None
    axis = int(op.attr("axis", -1))
    shape = shape_of(ctx, x)
    if axis == -1:
        op.attrs["axis"] = -1
        finish(op, graph, ctx)
        return
    if shape is None:
        raise ctx.fail(op, f"axis={axis} is not the last one and the input's rank is unknown")
    rank = len(shape)
    a = axis + rank if axis < 0 else axis
    if a == rank - 1 or _ones_after(shape, a):
        op.attrs["axis"] = a
        finish(op, graph, ctx)
        return
    perm = [i for i in range(rank) if i != a] + [a]
    back = [perm.index(i) for i in range(rank)]
    t = ctx.type(x)
    base = op.name or op.op_type.lower()
    moved_shape = tuple(shape[i] for i in perm)
    moved_type = TensorType(t.dtype, moved_shape) if t is not None else None
    moved = emit(graph, "Transpose", [x], base=base, perm=perm, type=moved_type)
    inner = emit(graph, op.op_type, [moved], base=base, axis=rank - 1, type=moved_type)
    out = emit(graph, "Transpose", [inner], base=base, perm=back)
    replace_outputs(graph, op, [out])


@adapter(SOFTMAX_OPS, 11, 10)
def softmax_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Negative axes count from the back only from 11: made non-negative by the rank."""
    axis = int(op.attr("axis", 1))
    if axis < 0:
        rank = rank_of(ctx, graph.inputs_of(op)[0])
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and the input's rank is unknown")
        op.attrs["axis"] = axis + rank
    finish(op, graph, ctx)
