"""Pad adapters: paddings -> pads (2), pads and value attributes <-> inputs (11), the axes
input (18) expanded to every axis going down."""

from __future__ import annotations

__all__ = ["pad_1_2", "pad_2_1", "pad_10_11", "pad_11_10", "pad_18_17", "pad_19_18"]

import numpy as np

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import (
    add_input,
    drop_if_unused,
    dtype_of,
    emit,
    finish,
    int64s,
    known,
    normalize_axes,
    rank_of,
    remove_input,
    replace_outputs,
    scalar,
    shape_of,
    spread,
    take_const,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Pad", 1, 2)
def pad_1_2(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Pad-1's paddings is Pad-2's pads (same layout: all begins, then all ends)."""
    if "paddings" in op.attrs:
        op.attrs["pads"] = op.attrs.pop("paddings")
    finish(op, graph, ctx)


@adapter("Pad", 2, 1)
def pad_2_1(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    if "pads" in op.attrs:
        op.attrs["paddings"] = op.attrs.pop("pads")
    finish(op, graph, ctx)


@adapter("Pad", 10, 11)
def pad_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """pads becomes an int64 input; value (constant mode) a scalar input of the data's type
    (left out at 0, Pad-11's default)."""
    base = op.name or "pad"
    add_input(graph, op, 1, int64s(graph, ctx, f"{base}_pads", op.attrs.pop("pads")))
    value = float(op.attrs.pop("value", 0.0) or 0.0)
    mode = op.attr("mode", b"constant")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode == "constant" and value != 0.0:
        dtype = dtype_of(ctx, graph.inputs_of(op)[0])
        if dtype is None:
            raise ctx.fail(op, "the data's element type is unknown; constant_value needs it")
        add_input(graph, op, 2, scalar(graph, ctx, f"{base}_value", value, dtype))
    finish(op, graph, ctx)


@adapter("Pad", 11, 10)
def pad_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Constant pads and constant_value inputs become the attributes; computed ones are an
    error naming the node."""
    inputs = graph.inputs_of(op)
    has_value = len(inputs) > 2 and inputs[2] is not None
    value = take_const(graph, ctx, op, 2) if has_value else None
    if has_value and value is None:
        raise ctx.fail(op, "constant_value is computed at run time; Pad-2 takes an attribute")
    pads = take_const(graph, ctx, op, 1)
    if pads is None:
        raise ctx.fail(op, "pads is computed at run time; Pad-2 takes an attribute")
    op.attrs["pads"] = [int(p) for p in pads.reshape(-1)]
    if value is not None and value.size:
        op.attrs["value"] = float(value.reshape(-1)[0])
    finish(op, graph, ctx)


@adapter("Pad", 18, 17)
def pad_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """A constant axes input (and a known rank) is folded into pads for every axis, 0 for
    the others: computed here for constant pads, by Slice/Concat for computed ones."""
    inputs = graph.inputs_of(op)
    if len(inputs) < 4 or inputs[3] is None:
        finish(op, graph, ctx)
        return
    x, pads_value, axes_value = inputs[0], inputs[1], inputs[3]
    assert pads_value is not None
    axes = known(graph, ctx, axes_value)
    rank = rank_of(ctx, x)
    if axes is None or rank is None:
        raise ctx.fail(op, "axes must be a constant and the rank known to fold them into pads")
    fixed = normalize_axes([int(a) for a in axes.reshape(-1)], rank)
    assert fixed is not None
    base = op.name or "pad"
    pads = known(graph, ctx, pads_value)
    if pads is not None:
        flat = [int(p) for p in pads.reshape(-1)]
        full = np.zeros(2 * rank, dtype=np.int64)
        for i, axis in enumerate(fixed):
            full[axis] = flat[i]
            full[axis + rank] = flat[i + len(fixed)]
        new = ctx.add_constant(graph, f"{base}_pads", full)
    else:
        zero = int64s(graph, ctx, f"{base}_zero", [0])
        pieces = [
            *spread(graph, ctx, pads_value, fixed, rank, fill=lambda _: zero, base=base),
            *spread(
                graph,
                ctx,
                pads_value,
                fixed,
                rank,
                fill=lambda _: zero,
                offset=len(fixed),
                base=base,
            ),
        ]
        new = emit(graph, "Concat", pieces, base=base, axis=0)
    remove_input(graph, op, 3)
    graph.set_input(op, 1, new)
    drop_if_unused(graph, pads_value)
    finish(op, graph, ctx)


@adapter("Pad", 19, 18)
def pad_19_18(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """mode='wrap' (new at 19) with constant pads, none negative or above its axis's static
    size, becomes per padded axis Concat(Slice(x, d - before, d), x, Slice(x, 0, after)):
    the axes one after the other, as wrap pads corners. Other modes are unchanged."""
    if _mode(op) != "wrap":
        finish(op, graph, ctx)
        return
    inputs = graph.inputs_of(op)
    x, pads_value = inputs[0], inputs[1]
    axes_value = inputs[3] if len(inputs) > 3 else None
    assert x is not None
    dims = shape_of(ctx, x)
    pads = known(graph, ctx, pads_value)
    if dims is None or pads is None:
        raise ctx.fail(op, "mode='wrap' needs constant pads and a known rank below 19")
    axes = (
        list(range(len(dims)))
        if axes_value is None
        else normalize_axes([int(a) for a in known(graph, ctx, axes_value) or []], len(dims))
    )
    flat = [int(p) for p in pads.reshape(-1)]
    if axes is None or len(flat) != 2 * len(axes):
        raise ctx.fail(op, "mode='wrap' needs constant axes matching the pads below 19")
    base = op.name or "pad"
    y = x
    for i, axis in enumerate(axes):
        before, after, size = flat[i], flat[i + len(axes)], dims[axis]
        if not before and not after:
            continue
        if not isinstance(size, int) or not 0 <= before <= size or not 0 <= after <= size:
            raise ctx.fail(
                op,
                f"mode='wrap' pads axis {axis} of size {size} by {before} and {after}; below 19 "
                "only pads from 0 to a static size are written out",
            )
        pieces = []
        axis_value = int64s(graph, ctx, f"{base}_axis", [axis])
        if before:
            starts = int64s(graph, ctx, f"{base}_starts", [size - before])
            ends = int64s(graph, ctx, f"{base}_ends", [size])
            pieces.append(emit(graph, "Slice", [y, starts, ends, axis_value], base=base))
        pieces.append(y)
        if after:
            starts = int64s(graph, ctx, f"{base}_starts", [0])
            ends = int64s(graph, ctx, f"{base}_ends", [after])
            pieces.append(emit(graph, "Slice", [y, starts, ends, axis_value], base=base))
        y = emit(graph, "Concat", pieces, base=base, axis=axis)
    replace_outputs(graph, op, [y])


def _mode(op: Op) -> str:
    mode = op.attr("mode", "constant")
    return mode.decode() if isinstance(mode, bytes) else str(mode)
