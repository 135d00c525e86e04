"""OneHot adapter below 11: indices and axis must be non-negative there."""

from __future__ import annotations

__all__ = ["one_hot_11_10"]

import numpy as np

from onnxforge.ir import DType, Graph, Op, TensorType, Value
from onnxforge.passes.convert._build import (
    dtype_of,
    emit,
    finish,
    int64s,
    rank_of,
    scalar,
    shape_of,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter

# Producers whose outputs are never negative: their indices need no wrapping.
_NON_NEGATIVE = frozenset({"ArgMax", "ArgMin", "Shape", "Size", "NonZero"})


@adapter("OneHot", 11, 10)
def one_hot_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """OneHot-9 requires non-negative indices: a negative index in [-depth, -1] is wrapped
    (+ depth), one below -depth (nothing selected) sent to depth (nothing selected either).
    Constant indices are rewritten here; others get Less/Add/Where, unless unsigned or made
    by an op that yields no negative value. axis in [-r-1, r] becomes non-negative by the
    indices' rank r."""
    indices, depth = graph.inputs_of(op)[:2]
    assert indices is not None and depth is not None
    axis = int(op.attr("axis", -1))
    if axis < 0:
        rank = rank_of(ctx, indices)
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and the indices' rank is unknown")
        op.attrs["axis"] = axis + rank + 1
    _wrap_negative(op, graph, ctx, indices, depth)
    finish(op, graph, ctx)


def _wrap_negative(
    op: Op, graph: Graph, ctx: ConvertContext, indices: Value, depth: Value
) -> None:
    dtype = dtype_of(ctx, indices)
    producer = graph.producer(indices)
    if (dtype is not None and dtype in _UNSIGNED) or (
        producer is not None and producer.op_type in _NON_NEGATIVE
    ):
        return
    known = ctx.const(graph, indices)
    depth_data = ctx.const(graph, depth)
    if known is not None and not np.any(known < 0):
        return
    if known is not None and depth_data is not None:
        d = depth_data.reshape(-1)[0]
        shifted = np.where(known < 0, known + d, known)
        array = np.where(shifted < 0, d, shifted).astype(known.dtype)
        graph.set_input(op, 0, ctx.add_constant(graph, f"{indices.name}_wrapped", array))
        return
    if dtype is None:
        raise ctx.fail(op, "indices may be negative and their element type is unknown")
    base = op.name or "one_hot"
    t = TensorType(dtype, shape_of(ctx, indices))
    zero = scalar(graph, ctx, f"{base}_zero", 0, dtype)
    flat = emit(graph, "Reshape", [depth, int64s(graph, ctx, f"{base}_scalar", [])], base=base)
    d = emit(graph, "Cast", [flat], base=base, to=dtype)
    shifted_v = emit(graph, "Add", [indices, d], base=base, type=t)
    negative = emit(graph, "Less", [indices, zero], base=base)
    wrapped = emit(graph, "Where", [negative, shifted_v, indices], base=base, type=t)
    still = emit(graph, "Less", [wrapped, zero], base=base)
    safe = emit(graph, "Where", [still, d, wrapped], base=base, type=t)
    graph.set_input(op, 0, safe)


_UNSIGNED = frozenset({DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64})
