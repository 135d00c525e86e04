"""GroupNormalization adapters: GroupNormalization-18 (scale and bias per group, deprecated)
to 21 (per channel), and the op written out in the target opset's ops below 21."""

from __future__ import annotations

__all__ = ["group_norm_18_17", "group_norm_20_21", "group_norm_21_20"]

import numpy as np

from onnxforge.ir import DType, Graph, Op
from onnxforge.passes.convert._build import (
    dtype_of,
    emit,
    finish,
    int64s,
    replace_outputs,
    shape_of,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter
from onnxforge.passes.convert.layer_norm import normalize


def _decompose(op: Op, graph: Graph, ctx: ConvertContext, *, per_channel: bool) -> None:
    """X (N, C, ...) -> (N, G, -1), normalized over the last axis, scale/bias applied per
    group on that view (18) or per channel on (N, C, -1) (21), back to X's shape."""
    x, scale, bias = graph.inputs_of(op)[:3]
    assert x is not None and scale is not None and bias is not None
    dtype = dtype_of(ctx, x)
    if dtype is None:
        raise ctx.fail(op, "X's element type is unknown")
    groups = int(op.attrs["num_groups"])
    base = op.name or "group_norm"
    grouped = emit(
        graph, "Reshape", [x, int64s(graph, ctx, f"{base}_groups", [0, groups, -1])], base=base
    )
    compute = int(op.attr("stash_type", 1)) if per_channel else dtype
    normalized, _, _ = normalize(
        graph,
        ctx,
        grouped,
        [2],
        dtype=dtype,
        epsilon=float(op.attr("epsilon", 1e-5)),
        compute=compute,
        base=base,
    )
    dims = emit(graph, "Shape", [x], base=base)
    if per_channel:
        two = emit(
            graph,
            "Slice",
            [dims, int64s(graph, ctx, f"{base}_0", [0]), int64s(graph, ctx, f"{base}_2", [2])],
            base=base,
        )
        rest = int64s(graph, ctx, f"{base}_rest", [-1])
        view = emit(graph, "Concat", [two, rest], base=base, axis=0)
        normalized = emit(graph, "Reshape", [normalized, view], base=base)
    column = int64s(graph, ctx, f"{base}_column", [-1, 1])
    s = emit(graph, "Reshape", [scale, column], base=base)
    b = emit(graph, "Reshape", [bias, column], base=base)
    y = emit(graph, "Add", [emit(graph, "Mul", [normalized, s], base=base), b], base=base)
    replace_outputs(graph, op, [emit(graph, "Reshape", [y, dims], base=base)])


@adapter("GroupNormalization", 18, 17)
def group_norm_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    _decompose(op, graph, ctx, per_channel=False)


def _channels(op: Op, graph: Graph, ctx: ConvertContext) -> int | None:
    shape = shape_of(ctx, graph.inputs_of(op)[0])
    return shape[1] if shape is not None and len(shape) > 1 and isinstance(shape[1], int) else None


@adapter("GroupNormalization", 20, 21)
def group_norm_20_21(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Each group's scale and bias repeated for its C/G channels (constants folded, others
    through Reshape/Expand); stash_type says the input's float type, where 18 computed."""
    x, scale, bias = graph.inputs_of(op)[:3]
    groups = int(op.attrs["num_groups"])
    base = op.name or "group_norm"
    channels = _channels(op, graph, ctx)
    for port, value in ((1, scale), (2, bias)):
        assert value is not None
        data = ctx.const(graph, value)
        if data is not None and channels is not None:
            repeated = np.repeat(data.reshape(-1), channels // groups)
            graph.set_input(
                op, port, ctx.add_constant(graph, f"{value.name}_per_channel", repeated)
            )
            continue
        dims = emit(graph, "Shape", [x], base=base)  # type: ignore[list-item]
        c = emit(
            graph,
            "Slice",
            [dims, int64s(graph, ctx, f"{base}_1", [1]), int64s(graph, ctx, f"{base}_2", [2])],
            base=base,
        )
        per = emit(graph, "Div", [c, int64s(graph, ctx, f"{base}_g", [groups])], base=base)
        target = emit(
            graph, "Concat", [int64s(graph, ctx, f"{base}_one", [1]), per], base=base, axis=0
        )
        column = emit(
            graph, "Reshape", [value, int64s(graph, ctx, f"{base}_col", [-1, 1])], base=base
        )
        wide = emit(graph, "Expand", [column, target], base=base)
        graph.set_input(
            op,
            port,
            emit(graph, "Reshape", [wide, int64s(graph, ctx, f"{base}_flat", [-1])], base=base),
        )
    dtype = dtype_of(ctx, x)
    if dtype is not None and dtype != DType.FLOAT:
        op.attrs["stash_type"] = int(dtype)
    finish(op, graph, ctx)


@adapter("GroupNormalization", 21, 20)
def group_norm_21_20(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """GroupNormalization-18 is deprecated (onnx's checker refuses it): the op is written
    out with per-channel scale and bias."""
    _decompose(op, graph, ctx, per_channel=True)
