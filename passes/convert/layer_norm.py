"""LayerNormalization (17) below 17: its function body, written out in the target opset's
ops (ReduceMean, Sub, Mul, Add, Sqrt, Reciprocal; Cast for stash_type)."""

from __future__ import annotations

__all__ = ["layer_norm_17_16", "normalize"]

from onnxforge.ir import DType, Graph, Op, TensorType, Value
from onnxforge.passes.convert._build import (
    dtype_of,
    emit,
    rank_of,
    reduce,
    replace_outputs,
    scalar,
    shape_of,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


def normalize(
    graph: Graph,
    ctx: ConvertContext,
    x: Value,
    axes: list[int],
    *,
    dtype: int,
    epsilon: float,
    compute: int,
    base: str,
) -> tuple[Value, Value, Value]:
    """(normalized, mean, inverse std dev) of ``x`` (element type ``dtype``) over ``axes``,
    computed in ``compute`` (``x`` is cast there first when its type differs; ``normalized``
    is cast back)."""
    shape = shape_of(ctx, x)
    xc = x
    if dtype != compute:
        xc = emit(graph, "Cast", [x], base=base, to=compute, type=TensorType(compute, shape))
    full = TensorType(compute, shape)
    mean = reduce(graph, ctx, "ReduceMean", xc, axes, base=base)
    d = emit(graph, "Sub", [xc, mean], base=base, type=full)
    dd = emit(graph, "Mul", [d, d], base=base, type=full)
    var = reduce(graph, ctx, "ReduceMean", dd, axes, base=base)
    eps = scalar(graph, ctx, f"{base}_epsilon", epsilon, compute)
    std = emit(graph, "Sqrt", [emit(graph, "Add", [var, eps], base=base)], base=base)
    inv = emit(graph, "Reciprocal", [std], base=base)
    normalized = emit(graph, "Mul", [d, inv], base=base, type=full)
    if dtype != compute:
        normalized = emit(
            graph, "Cast", [normalized], base=base, to=dtype, type=TensorType(dtype, shape)
        )
    return normalized, mean, inv


@adapter("LayerNormalization", 17, 16)
def layer_norm_17_16(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Normalized over axes [axis, ..., -1] (a negative axis needs no rank), in stash_type's
    precision, then scaled by Scale and shifted by B; Mean and InvStdDev keep their dims."""
    x, scale = graph.inputs_of(op)[:2]
    bias = graph.inputs_of(op)[2] if len(op._inputs) > 2 else None
    assert x is not None and scale is not None
    dtype = dtype_of(ctx, x)
    if dtype is None:
        raise ctx.fail(op, "X's element type is unknown")
    axis = int(op.attr("axis", -1))
    if axis < 0:
        axes = list(range(axis, 0))
    else:
        rank = rank_of(ctx, x)
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and X's rank is unknown")
        axes = list(range(axis, rank))
    compute = int(op.attr("stash_type", 1))
    base = op.name or "layer_norm"
    normalized, mean, inv = normalize(
        graph,
        ctx,
        x,
        axes,
        dtype=dtype,
        epsilon=float(op.attr("epsilon", 1e-5)),
        compute=compute if compute else int(DType.FLOAT),
        base=base,
    )
    y = emit(graph, "Mul", [normalized, scale], base=base)
    if bias is not None:
        y = emit(graph, "Add", [y, bias], base=base)
    replace_outputs(graph, op, [y, mean, inv])
