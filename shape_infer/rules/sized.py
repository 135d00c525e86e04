"""Shape rules for ops whose output sizes come from an input's values: Pad, Resize, Upsample,
TopK. onnx's per-node inference stays the authority on types and errors and gives what it can;
these rules fill the dims it leaves unknown from symbolic values (pads computed from Shape, a
Resize to the size of another tensor, a TopK whose k is a dim), as onnxruntime's symbolic
shape inference does."""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Sequence
from fractions import Fraction

import numpy as np

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, Op, TensorType
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.broadcast import format_shape
from onnxforge.shape_infer.engine import InferContext, shape_rule
from onnxforge.shape_infer.symbolic import (
    dim_add,
    dim_floordiv,
    dim_mul,
    is_unknown_symbol,
    parse,
)

Inputs = Sequence[TensorType | None]


def _fallback(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    from onnxforge.shape_infer import _onnx_fallback  # noqa: PLC0415  (imports onnx)

    return _onnx_fallback.infer_node(op, list(inputs), ctx)  # type: ignore[return-value]


def _fill(onnx_type: TensorType | None, dims: Sequence[Dim] | None, dtype: int) -> TensorType:
    """onnx's result with its unknown dims taken from ``dims`` (a static dim of onnx's stays)."""
    if dims is None:
        return onnx_type or TensorType(dtype, None)
    if onnx_type is None or onnx_type.shape is None or len(onnx_type.shape) != len(dims):
        return TensorType(onnx_type.dtype if onnx_type else dtype, tuple(dims))
    filled = tuple(
        d if isinstance(d, int) or (d is not None and not is_unknown_symbol(d)) else ours
        for d, ours in zip(onnx_type.shape, dims, strict=True)
    )
    return TensorType(onnx_type.dtype, filled)


def _axes(ctx: InferContext, rank: int, index: int | None, attr: str | None) -> list[int] | None:
    raw = None
    if index is not None and ctx.input(index) is not None:
        array = ctx.const(index)
        if array is None:
            return None
        raw = [int(a) for a in array.reshape(-1)]
    elif attr is not None and ctx.op.attr(attr) is not None:
        raw = [int(a) for a in ctx.op.attr(attr)]  # type: ignore[union-attr]
    if raw is None:
        return list(range(rank))
    if any(not -rank <= a < rank for a in raw):
        return None
    return [a + rank if a < 0 else a for a in raw]


# -- Pad ----------------------------------------------------------------------------------------
@shape_rule("Pad", versions=schema_versions("Pad"))
def infer_pad(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    out = _fallback(op, inputs, ctx)
    x = inputs[0]
    if x is None or x.shape is None:
        return out
    rank = len(x.shape)
    if ctx.version < 11:
        attr = op.attr("pads" if ctx.version >= 2 else "paddings")
        pads: Sequence[Dim] | None = None if attr is None else [int(p) for p in attr]
        axes: list[int] | None = list(range(rank))
    else:
        pads = ctx.value(1)
        axes = _axes(ctx, rank, 3, None)
    if pads is None or axes is None or len(pads) != 2 * len(axes):
        return out
    dims = list(x.shape)
    for i, axis in enumerate(axes):
        padded = dim_add(dim_add(dims[axis], pads[i]), pads[i + len(axes)])
        if isinstance(padded, int) and padded < 0:  # a crop past the dim's size
            raise ShapeError(
                f"pads {format_shape(pads)} make dim {axis} ({x.shape[axis]}) {padded}"
            )
        dims[axis] = padded
    return [_fill(out[0], dims, x.dtype)]


# -- Resize and Upsample ------------------------------------------------------------------------
FLOAT32_EXACT = 1 << 24
"""Integers up to here are exact in float32, in which onnxruntime scales Resize's dims."""


def _scaled(dim: Dim, scale: float) -> Dim:
    """floor(dim * scale) where that is exact in float32 (onnxruntime multiplies in float):
    integer scales and 1/2**k, the ones exporters write for 2x and 0.5x."""
    fraction = Fraction(float(np.float32(scale)))
    if fraction <= 0 or fraction.denominator & (fraction.denominator - 1):
        return None
    if isinstance(dim, int):
        return int(np.floor(np.float32(scale) * np.float32(dim))) if dim < FLOAT32_EXACT else None
    if fraction.denominator > 1 << 10 or dim is None:
        return None
    if abs(parse(dim).terms.get((), 0)) >= FLOAT32_EXACT:
        return None  # N+1000000001 is past 2**24 for every N: float32 rounds it
    return dim_floordiv(dim_mul(dim, fraction.numerator), fraction.denominator)


def _float32_exact(t: TensorType | None, x: TensorType) -> TensorType | None:
    """onnx's static dims of a Resize by scales, less those past 2**24: onnxruntime computes
    them in float32, which holds no odd integer there (1000000001 * 1.0 is 1000000000)."""
    if t is None or t.shape is None or x.shape is None or len(t.shape) != len(x.shape):
        return t
    dims = tuple(
        None
        if isinstance(d, int)
        and (d >= FLOAT32_EXACT or (isinstance(i, int) and i >= FLOAT32_EXACT))
        else d
        for d, i in zip(t.shape, x.shape, strict=True)
    )
    return TensorType(t.dtype, dims)


def _resize_dims(
    op: Op, ctx: InferContext, x: TensorType, scales_at: int | None, sizes_at: int | None
) -> list[Dim] | None:
    assert x.shape is not None
    rank = len(x.shape)
    axes = _axes(ctx, rank, None, "axes") if ctx.version >= 18 else list(range(rank))
    if axes is None:
        return None
    dims = list(x.shape)
    if sizes_at is not None and ctx.input(sizes_at) is not None:
        policy = op.attr("keep_aspect_ratio_policy", "stretch")
        policy = policy.decode() if isinstance(policy, bytes) else str(policy)
        sizes = ctx.value(sizes_at)
        if policy != "stretch" or sizes is None or len(sizes) != len(axes):
            return None
        if any(isinstance(size, int) and size < 0 for size in sizes):
            raise ShapeError(f"sizes {format_shape(sizes)} has a negative size")
        for axis, size in zip(axes, sizes, strict=True):
            dims[axis] = size
        return dims
    scales = None if scales_at is None else ctx.const(scales_at)
    if scales_at is None:
        attr = op.attr("scales")
        scales = None if attr is None else np.array(attr, dtype=np.float32)
    if scales is None or scales.size != len(axes):
        return None
    for axis, scale in zip(axes, scales.reshape(-1).tolist(), strict=True):
        dims[axis] = _scaled(dims[axis], scale)
    return dims


@shape_rule("Resize", versions=schema_versions("Resize"))
def infer_resize(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    out = _fallback(op, inputs, ctx)
    x = inputs[0]
    if x is None or x.shape is None:
        return out
    if ctx.version < 11:
        dims = _resize_dims(op, ctx, x, 1, None)
    else:
        dims = _resize_dims(op, ctx, x, 2, 3)
    result = _fill(out[0], dims, x.dtype)
    by_sizes = ctx.version >= 11 and ctx.input(3) is not None
    return [result if by_sizes else _float32_exact(result, x)]


@shape_rule("Upsample", versions=schema_versions("Upsample"))
def infer_upsample(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    out = _fallback(op, inputs, ctx)
    x = inputs[0]
    if x is None or x.shape is None:
        return out
    dims = _resize_dims(op, ctx, x, None if ctx.version < 9 else 1, None)
    return [_float32_exact(_fill(out[0], dims, x.dtype), x)]


# -- TopK ---------------------------------------------------------------------------------------
@shape_rule("TopK", versions=schema_versions("TopK"))
def infer_topk(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Both outputs are x's shape with k on the axis; a k known only at run time is one fresh
    dim that values and indices share."""
    out = _fallback(op, inputs, ctx)
    x = inputs[0]
    if x is None or x.shape is None or not x.shape:
        return out
    rank = len(x.shape)
    axis = int(op.attr("axis", -1))  # type: ignore[arg-type]
    if not -rank <= axis < rank:
        return out
    axis %= rank
    if ctx.version < 10:
        k: Dim = int(op.attr("k"))  # type: ignore[arg-type]
    else:
        known = ctx.value(1)
        k = known[0] if known is not None and len(known) == 1 else None
    if isinstance(k, int) and k < 0:
        raise ShapeError(f"k {k} is negative")
    if k is None:
        onnx_k = out[0].shape[axis] if out[0] is not None and out[0].shape else None
        k = onnx_k if isinstance(onnx_k, int) else ctx.new_dim()
    dims = [*x.shape[:axis], k, *x.shape[axis + 1 :]]
    return [_fill(t, dims, x.dtype if i == 0 else 7) for i, t in enumerate(out)]
