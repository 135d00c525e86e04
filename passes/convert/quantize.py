"""QuantizeLinear and DequantizeLinear below 13: per-tensor only (a scalar scale and zero
point), no axis attribute."""

from __future__ import annotations

__all__ = ["quantize_13_12"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import drop_if_unused, emit, finish, int64s, shape_of
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter(("QuantizeLinear", "DequantizeLinear"), 13, 12)
def quantize_13_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """axis goes; scale and zero point must hold one element (made scalars when 1-D)."""
    op.attrs.pop("axis", None)
    base = op.name or op.op_type.lower()
    for port in (1, 2):
        inputs = graph.inputs_of(op)
        value = inputs[port] if port < len(inputs) else None
        if value is None:
            continue
        shape = shape_of(ctx, value)
        if shape is None or any(not isinstance(d, int) for d in shape):
            raise ctx.fail(op, f"input {port}'s shape is unknown; opset 10 takes scalars only")
        if any(d != 1 for d in shape):
            raise ctx.fail(
                op,
                f"per-axis quantization (input {port} of shape {list(shape)}) "
                "has no equivalent before 13",
            )
        if not shape:
            continue
        data = ctx.const(graph, value)
        if data is not None:
            scalar = ctx.add_constant(graph, f"{value.name}_scalar", data.reshape(()))
        else:
            scalar = emit(
                graph, "Reshape", [value, int64s(graph, ctx, f"{base}_scalar", [])], base=base
            )
        graph.set_input(op, port, scalar)
        drop_if_unused(graph, value)
    finish(op, graph, ctx)
