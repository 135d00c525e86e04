"""Upsample and Resize adapters: Upsample's scales (7: attribute for height/width scales,
9: input), Upsample-9 <-> Resize-10, Resize-10's behaviour under Resize-11's attributes, the
optional roi/scales of 13, antialias/axes/keep_aspect_ratio_policy of 18.

onnxruntime's Resize-10 and Upsample-9 map coordinates asymmetrically (x / scale); nearest
rounds down along upscaled axes and up along downscaled ones: Resize-11's
'asymmetric' with nearest_mode 'floor' or 'ceil', or one Resize of each when the scales do not
agree on one of them or are computed."""

from __future__ import annotations

__all__ = [
    "resize_10_9",
    "resize_10_11",
    "resize_11_10",
    "resize_13_12",
    "resize_18_17",
    "upsample_6_7",
    "upsample_7_6",
    "upsample_8_9",
    "upsample_9_8",
    "upsample_9_10",
]

import numpy as np

from onnxforge.ir import Graph, Op, Value
from onnxforge.passes.convert._build import (
    add_input,
    drop_if_unused,
    emit,
    finish,
    int64s,
    known,
    normalize_axes,
    rank_of,
    remove_input,
    replace_outputs,
    shape_of,
    spread,
    take_const,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _text(value: object, default: str) -> str:
    if value is None:
        return default
    return value.decode() if isinstance(value, bytes) else str(value)


def _floats(graph: Graph, ctx: ConvertContext, base: str, values: object) -> Value:
    return ctx.add_constant(graph, base, np.asarray(values, dtype=np.float32).reshape(-1))


# -- Upsample ------------------------------------------------------------------------------
@adapter("Upsample", 6, 7)
def upsample_6_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """height_scale/width_scale (4-D input) -> scales [1, 1, h, w]."""
    h = float(op.attrs.pop("height_scale", 1.0))
    w = float(op.attrs.pop("width_scale", 1.0))
    op.attrs["scales"] = [1.0, 1.0, h, w]
    finish(op, graph, ctx)


@adapter("Upsample", 7, 6)
def upsample_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    scales = [float(s) for s in op.attrs.pop("scales")]
    if len(scales) != 4 or scales[:2] != [1.0, 1.0]:
        raise ctx.fail(op, f"scales {scales}: Upsample-1 scales the last two of 4 axes only")
    op.attrs["height_scale"], op.attrs["width_scale"] = scales[2], scales[3]
    finish(op, graph, ctx)


@adapter("Upsample", 8, 9)
def upsample_8_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The scales attribute becomes a float input."""
    scales = op.attrs.pop("scales")
    add_input(graph, op, 1, _floats(graph, ctx, f"{op.name or 'upsample'}_scales", scales))
    finish(op, graph, ctx)


@adapter("Upsample", 9, 8)
def upsample_9_8(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    scales = take_const(graph, ctx, op, 1)
    if scales is None:
        raise ctx.fail(op, "scales are computed at run time; Upsample-7 takes an attribute")
    op.attrs["scales"] = [float(s) for s in scales.reshape(-1)]
    finish(op, graph, ctx)


def _renamed(op: Op, graph: Graph, op_type: str) -> None:
    out = emit(
        graph,
        op_type,
        graph.inputs_of(op),
        base=op.name or op_type.lower(),
        mode=_text(op.attr("mode"), "nearest"),
    )
    new = graph.producer(out)
    assert new is not None
    new.name = op.name
    replace_outputs(graph, op, [out])


@adapter("Upsample", 9, 10)
def upsample_9_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Upsample is deprecated at 10: Resize-10 computes the same."""
    _renamed(op, graph, "Resize")


@adapter("Resize", 10, 9)
def resize_10_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Resize-10 is Upsample-9 where no scale is below 1."""
    scales = ctx.const(graph, graph.inputs_of(op)[1])
    if scales is None or np.any(scales < 1):
        raise ctx.fail(op, "Upsample-9 needs constant scales of at least 1")
    _renamed(op, graph, "Upsample")


# -- Resize --------------------------------------------------------------------------------
@adapter("Resize", 10, 11)
def resize_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """An empty roi goes before scales; coordinates 'asymmetric'; nearest rounds 'floor'
    when every scale is at least 1, 'ceil' when none is above 1. Scales above and below 1,
    or computed ones, resize in two passes, Resize(floor) by Max(scales, 1) then
    Resize(ceil) by Min(scales, 1): nearest is separable, and each axis moves in one pass."""
    mode = _text(op.attr("mode"), "nearest")
    x, scales_value = graph.inputs_of(op)[:2]
    assert x is not None and scales_value is not None
    op.attrs["coordinate_transformation_mode"] = "asymmetric"
    base = op.name or "resize"
    if mode == "nearest":
        scales = ctx.const(graph, scales_value)
        if scales is not None and np.all(scales >= 1):
            op.attrs["nearest_mode"] = "floor"
        elif scales is not None and np.all(scales <= 1):
            op.attrs["nearest_mode"] = "ceil"
        else:
            if scales is not None:
                up = _floats(graph, ctx, f"{base}_up", np.maximum(scales, 1))
                down = _floats(graph, ctx, f"{base}_down", np.minimum(scales, 1))
            else:
                one = _floats(graph, ctx, f"{base}_one", [1.0])
                up = emit(graph, "Max", [scales_value, one], base=base)
                down = emit(graph, "Min", [scales_value, one], base=base)
            first = emit(
                graph,
                "Resize",
                [x, _floats(graph, ctx, f"{base}_roi", []), up],
                base=base,
                mode="nearest",
                coordinate_transformation_mode="asymmetric",
                nearest_mode="floor",
            )
            graph.set_input(op, 0, first)
            graph.set_input(op, 1, down)
            drop_if_unused(graph, scales_value)
            scales_value = down
            op.attrs["nearest_mode"] = "ceil"
    graph.set_input(op, 1, _floats(graph, ctx, f"{base}_roi", []))
    add_input(graph, op, 2, scales_value)
    finish(op, graph, ctx)


@adapter("Resize", 11, 10)
def resize_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """'asymmetric' nearest (floor with scales >= 1, ceil with scales <= 1) or linear; sizes
    become scales when X's shape is static; roi goes. Anything else is an error."""
    mode = _text(op.attr("mode"), "nearest")
    ctm = _text(op.attr("coordinate_transformation_mode"), "half_pixel")
    if mode not in ("nearest", "linear") or ctm != "asymmetric":
        raise ctx.fail(op, f"mode={mode!r} with {ctm!r} coordinates has no equivalent at 10")
    if int(op.attr("exclude_outside", 0)):
        raise ctx.fail(op, "exclude_outside=1 has no equivalent at 10")
    inputs = graph.inputs_of(op) + [None, None]
    x, roi, scales_value, sizes_value = inputs[:4]
    scales = ctx.const(graph, scales_value)
    if scales_value is not None and (scales is None or scales.size):
        new_scales = scales_value  # given (computed or constant)
    elif sizes_value is not None:
        sizes = ctx.const(graph, sizes_value)
        shape = shape_of(ctx, x)
        if sizes is None or shape is None or not all(isinstance(d, int) for d in shape):
            raise ctx.fail(op, "sizes need to be constant and X's shape static at 10")
        scales = _scales_for(list(shape), [int(v) for v in sizes.reshape(-1)])  # type: ignore[arg-type]
        new_scales = _floats(graph, ctx, f"{op.name or 'resize'}_scales", scales)
    else:
        raise ctx.fail(op, "neither scales nor sizes are given")
    if mode == "nearest":
        want = None
        if scales is not None:
            want = "floor" if np.all(scales >= 1) else "ceil" if np.all(scales <= 1) else None
        if want is None or _text(op.attr("nearest_mode"), "round_prefer_floor") != want:
            raise ctx.fail(op, "nearest_mode and the scales have no equivalent rounding at 10")
    graph.set_input(op, 1, new_scales)
    for port in (3, 2):
        remove_input(graph, op, port)
    for value in (roi, scales_value, sizes_value):
        if value is not None and value is not new_scales:
            drop_if_unused(graph, value)
    for attr in (
        "coordinate_transformation_mode",
        "cubic_coeff_a",
        "exclude_outside",
        "extrapolation_value",
        "nearest_mode",
    ):
        op.attrs.pop(attr, None)
    finish(op, graph, ctx)


def _scales_for(shape: list[int], sizes: list[int]) -> np.ndarray:
    """Float scales whose floor(in * scale) is exactly each size."""
    out = []
    for n, size in zip(shape, sizes, strict=True):
        scale = np.float32(size) / np.float32(n)
        while np.floor(np.float32(n) * scale) < size:
            scale = np.nextafter(scale, np.float32(np.inf))
        out.append(scale)
    return np.array(out, dtype=np.float32)


@adapter("Resize", 13, 12)
def resize_13_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Resize-11 requires roi and scales: omitted ones become empty float tensors."""
    base = op.name or "resize"
    inputs = graph.inputs_of(op)
    for port, name in ((1, "roi"), (2, "scales")):
        if port >= len(inputs) or inputs[port] is None:
            add_input(graph, op, port, _floats(graph, ctx, f"{base}_{name}", []))
    finish(op, graph, ctx)


@adapter("Resize", 18, 17)
def resize_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """antialias=0 and keep_aspect_ratio_policy='stretch' go; axes are folded into roi,
    scales and sizes for every axis (roi 0..1, scale 1, X's own dim elsewhere): computed here
    for constants, by Slice/Concat otherwise."""
    if int(op.attrs.pop("antialias", 0) or 0):
        raise ctx.fail(op, "antialias=1 has no equivalent before 18")
    policy = _text(op.attrs.pop("keep_aspect_ratio_policy", None), "stretch")
    if policy != "stretch":
        raise ctx.fail(op, f"keep_aspect_ratio_policy={policy!r} has no equivalent before 18")
    axes = op.attrs.pop("axes", None)
    if axes is not None:
        x = graph.inputs_of(op)[0]
        assert x is not None
        rank = rank_of(ctx, x)
        fixed = normalize_axes([int(a) for a in axes], rank)
        if fixed is None or rank is None:
            raise ctx.fail(op, "axes and X's rank is unknown")
        for port in (1, 2, 3):
            _spread_input(op, graph, ctx, port, x=x, axes=fixed, rank=rank)
    finish(op, graph, ctx)


def _spread_input(
    op: Op, graph: Graph, ctx: ConvertContext, port: int, *, x: Value, axes: list[int], rank: int
) -> None:
    """Input ``port`` (roi, scales or sizes) given for ``axes``, made one for every axis."""
    inputs = graph.inputs_of(op)
    value = inputs[port] if port < len(inputs) else None
    if value is None:
        return
    data = known(graph, ctx, value)
    if data is not None and data.size == 0:
        return
    base = f"{op.name or 'resize'}_{('roi', 'scales', 'sizes')[port - 1]}"
    n = len(axes)
    if data is not None:
        flat = data.reshape(-1)
        if port == 1:
            full = np.concatenate([np.zeros(rank), np.ones(rank)]).astype(data.dtype)
            for j, axis in enumerate(axes):
                full[axis], full[axis + rank] = flat[j], flat[j + n]
        elif port == 2:
            full = np.ones(rank, dtype=data.dtype)
            full[axes] = flat
        else:
            shape = shape_of(ctx, x)
            if shape is None or not all(isinstance(d, int) for d in shape):
                full = None
            else:
                full = np.array(shape, dtype=data.dtype)
                full[axes] = flat
        if full is not None:
            graph.set_input(op, port, ctx.add_constant(graph, base, full))
            drop_if_unused(graph, value)
            return
    if port == 1:
        zero, one = _floats(graph, ctx, f"{base}_0", [0]), _floats(graph, ctx, f"{base}_1", [1])
        pieces = [
            *spread(graph, ctx, value, axes, rank, fill=lambda _: zero, base=base),
            *spread(graph, ctx, value, axes, rank, fill=lambda _: one, offset=n, base=base),
        ]
    elif port == 2:
        one = _floats(graph, ctx, f"{base}_1", [1])
        pieces = spread(graph, ctx, value, axes, rank, fill=lambda _: one, base=base)
    else:
        dims = emit(graph, "Shape", [x], base=base)

        def own(axis: int) -> Value:
            start, end = (
                int64s(graph, ctx, f"{base}_s", [axis]),
                int64s(graph, ctx, f"{base}_e", [axis + 1]),
            )
            return emit(graph, "Slice", [dims, start, end], base=base)

        pieces = spread(graph, ctx, value, axes, rank, fill=own, base=base)
    graph.set_input(op, port, emit(graph, "Concat", pieces, base=base, axis=0))
    drop_if_unused(graph, value)
