"""AveragePool and MaxPool at 22: with ceil_mode, a last window that would start in the right
padding is dropped from 22 on and kept before. Crossing is exact where no such window exists:
ceil_mode=0, auto_pad (its windows never start in the padding), or static sizes showing it."""

from __future__ import annotations

__all__ = ["pool_21_22", "pool_22_21"]

import math

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish, shape_of
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _window_in_padding(op: Op, graph: Graph, ctx: ConvertContext) -> bool | None:
    """Whether ceil_mode adds a window starting in the right padding (None: unknown)."""
    if not int(op.attr("ceil_mode", 0)):
        return False
    auto_pad = op.attr("auto_pad", b"NOTSET")
    if (auto_pad.decode() if isinstance(auto_pad, bytes) else auto_pad) != "NOTSET":
        return False
    shape = shape_of(ctx, graph.inputs_of(op)[0])
    kernel = [int(k) for k in op.attrs["kernel_shape"]]
    n = len(kernel)
    if shape is None or len(shape) != n + 2:
        return None
    sizes = shape[2:]
    pads = [int(p) for p in op.attr("pads", [0] * 2 * n)]
    strides = [int(s) for s in op.attr("strides", [1] * n)]
    dilations = [int(d) for d in op.attr("dilations", [1] * n)]
    for i, size in enumerate(sizes):
        if not isinstance(size, int):
            return None
        extent = (kernel[i] - 1) * dilations[i] + 1
        out = math.ceil((size + pads[i] + pads[i + n] - extent) / strides[i]) + 1
        if (out - 1) * strides[i] >= size + pads[i]:
            return True
    return False


def _check(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    found = _window_in_padding(op, graph, ctx)
    if found is None:
        raise ctx.fail(
            op,
            "ceil_mode=1 with unknown sizes: the last window may start in the "
            "padding, which 22 drops and earlier versions keep",
        )
    if found:
        raise ctx.fail(
            op,
            "ceil_mode=1 makes a last window start in the padding, which 22 "
            "drops and earlier versions keep",
        )
    finish(op, graph, ctx)


@adapter(("AveragePool", "MaxPool"), 21, 22)
def pool_21_22(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    _check(op, graph, ctx)


@adapter(("AveragePool", "MaxPool"), 22, 21)
def pool_22_21(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    _check(op, graph, ctx)
