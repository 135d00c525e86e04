"""Shape rules of tensor-splitting ops: Split in every version."""

from __future__ import annotations

__all__ = [
    "infer_split_1",
    "infer_split_2",
    "infer_split_13",
    "infer_split_18",
    "split_sizes",
]

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

import numpy as np

from onnxforge import opset as schemas
from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, DType, Op, TensorType, dtype_name
from onnxforge.shape_infer.broadcast import format_shape
from onnxforge.shape_infer.engine import shape_rule
from onnxforge.shape_infer.symbolic import (
    dim_add,
    dim_ceildiv,
    dim_floordiv,
    dim_mul,
    dim_sub,
    is_unknown_symbol,
    same_dim,
)

if TYPE_CHECKING:
    from onnxforge.shape_infer.engine import InferContext

logger = logging.getLogger(__name__)

Inputs = Sequence["TensorType | None"]
Sizes = Sequence[Dim]


def split_sizes(
    label: str,
    dim: Dim,
    count: int,
    *,
    sizes: Sizes | None = None,
    chunks: int | None = None,
    ctx: InferContext | None = None,
) -> list[Dim]:
    """The length of each of ``count`` parts of a dimension ``dim``.

    Args:
        label: ``Split-13``, for messages.
        dim: The split dimension: int, symbol or None.
        count: Number of outputs.
        sizes: Explicit lengths (attribute or input); entries may be symbols or None (unknown).
        chunks: Split-18 ``num_outputs``: parts of ``ceil(dim / chunks)``, the last smaller.
        ctx: Where to record the assumption that a symbolic ``dim`` equals the sizes' sum.

    Neither ``sizes`` nor ``chunks``: ``count`` equal parts, which must divide ``dim``.

    Raises:
        ShapeError: Negative sizes, a count that differs from the outputs', sizes that do not add
            up to ``dim``, a ``dim`` that cannot be split as asked.
    """
    if sizes is not None:
        return _explicit(label, dim, count, list(sizes), ctx)
    if chunks is not None:
        return _chunks(label, dim, count, chunks)
    if isinstance(dim, int):
        if dim % count:
            raise ShapeError(
                f"{label}: dim {dim} cannot be split into {count} equal parts "
                f"({count} outputs, no split sizes)"
            )
        return [dim // count] * count
    # A symbolic dim that must be a multiple of count: floor(N/k) is then N/k exactly.
    return [dim_floordiv(dim, count)] * count


def _explicit(
    label: str, dim: Dim, count: int, sizes: list[Dim], ctx: InferContext | None
) -> list[Dim]:
    shown = "[" + ", ".join("?" if s is None else str(s) for s in sizes) + "]"
    if len(sizes) != count:
        raise ShapeError(f"{label}: split {shown} has {len(sizes)} sizes for {count} outputs")
    for s in sizes:
        if isinstance(s, int) and s < 0:
            raise ShapeError(f"{label}: split {shown} has a negative size ({s})")
    unknown = [i for i, s in enumerate(sizes) if is_unknown_symbol(s)]
    if len(unknown) == 1 and not is_unknown_symbol(dim):
        # The one size nobody knows is what the others leave of the dim.
        rest = dim_sub(dim, _sum(s for i, s in enumerate(sizes) if i != unknown[0]))
        if isinstance(rest, int) and rest < 0:
            raise ShapeError(f"{label}: split {shown} takes more than the dim ({dim})")
        if rest is not None:
            sizes[unknown[0]] = rest
        return sizes
    if unknown or is_unknown_symbol(dim):
        return sizes
    total = _sum(sizes)
    if total is None or same_dim(total, dim):
        return sizes
    if isinstance(total, int) and isinstance(dim, int):
        raise ShapeError(f"{label}: split {shown} sums to {total}, but the dim is {dim}")
    if ctx is not None:
        ctx.assume(dim, total)
    return sizes


def _chunks(label: str, dim: Dim, count: int, chunks: int) -> list[Dim]:
    if chunks < 1:
        raise ShapeError(f"{label}: num_outputs is {chunks}, it must be at least 1")
    if chunks != count:
        raise ShapeError(f"{label}: num_outputs is {chunks}, but the node has {count} outputs")
    if isinstance(dim, int):
        size = -(-dim // chunks)
        last = dim - size * (chunks - 1)
        if last < 0:
            raise ShapeError(
                f"{label}: dim {dim} cannot be split into {chunks} parts of {size} with a "
                f"smaller last one ({chunks - 1} parts of {size} already take "
                f"{size * (chunks - 1)})"
            )
        parts: list[Dim] = [size] * (chunks - 1)
        return [*parts, last]
    size = dim_ceildiv(dim, chunks)
    return [size] * (chunks - 1) + [dim_sub(dim, dim_mul(chunks - 1, size))]


def _sum(sizes: Iterable[Dim]) -> Dim:
    total: Dim = 0
    for s in sizes:
        total = dim_add(total, s)
    return total


def _axis(label: str, x: TensorType | None, axis: object, *, negative: bool) -> int | None:
    """The axis as an index into x's shape; None when x's rank is unknown."""
    if not isinstance(axis, int):
        raise ShapeError(f"{label}: axis must be an int, got {axis!r}")
    if axis < 0 and not negative:
        raise ShapeError(f"{label}: axis {axis} is negative (allowed from Split-11)")
    if x is None or x.shape is None:
        return None
    rank = len(x.shape)
    low = -rank if negative else 0
    if not low <= axis < rank:
        raise ShapeError(
            f"{label}: axis {axis} is outside [{low}, {rank - 1}] for input "
            f"{format_shape(x.shape)}"
        )
    return axis + rank if axis < 0 else axis


def _outputs(
    op: Op,
    inputs: Inputs,
    ctx: InferContext,
    *,
    axis: object,
    negative: bool,
    sizes: Sizes | None = None,
    chunks: int | None = None,
    sizes_unknown: bool = False,
) -> list[TensorType | None]:
    """Check the input type and axis, work out the parts, one type per output.

    ``sizes_unknown``: a split input whose values are not known; each part's length is unknown.
    """
    label = f"{op.op_type}-{ctx.version}"
    count = len(ctx.scope.graph.outputs_of(op))
    x = inputs[0] if inputs else None
    if x is not None and x.dtype:
        allowed = schemas.allowed_types(op.op_type, ctx.version, "T", op.domain)
        if x.dtype not in allowed:
            names = ", ".join(sorted(dtype_name(d).lower() for d in allowed))
            raise ShapeError(
                f"{label} does not take {dtype_name(x.dtype).lower()} for input "
                f"(type T allows {names})"
            )
    index = _axis(label, x, axis, negative=negative)
    dim = None if x is None or x.shape is None or index is None else x.shape[index]
    if sizes_unknown:
        parts: list[Dim] = [None] * count
    else:
        parts = split_sizes(label, dim, count, sizes=sizes, chunks=chunks, ctx=ctx)
    if x is None:
        return [None] * count
    if x.shape is None or index is None:
        return [TensorType(x.dtype, None) for _ in parts]
    shape = x.shape
    return [TensorType(x.dtype, (*shape[:index], part, *shape[index + 1 :])) for part in parts]


def _split_input(
    label: str, inputs: Inputs, ctx: InferContext, count: int
) -> tuple[Sizes | None, bool]:
    """Split-13/18's ``split`` input: (sizes, unknown). Sizes may hold symbols or None."""
    t = inputs[1] if len(inputs) > 1 else None
    if ctx.input(1) is None:
        return None, False
    if t is not None and t.dtype and t.dtype != DType.INT64:
        raise ShapeError(f"{label}: split must be int64, got {dtype_name(t.dtype).lower()}")
    if t is not None and t.shape is not None:
        if len(t.shape) != 1:
            raise ShapeError(f"{label}: split must be 1-D, got shape {format_shape(t.shape)}")
        if isinstance(t.shape[0], int) and t.shape[0] != count:
            raise ShapeError(f"{label}: split has {t.shape[0]} sizes for {count} outputs")
    known = ctx.value(1)
    if known is None:
        return None, True
    return list(known), False


def _split_attr(label: str, attr: object) -> list[Dim] | None:
    """Split-1/2/11's ``split`` attribute as sizes, None when absent."""
    if attr is None:
        return None
    if not isinstance(attr, (list, tuple)) or not all(isinstance(v, int) for v in attr):
        raise ShapeError(f"{label}: split must be a list of ints, got {attr!r}")
    return list(attr)


@shape_rule("Split", versions=(1,))
def infer_split_1(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Split-1: sizes from the ``split`` attribute or the optional second input (of type T, a
    float tensor), not both; else equal parts. ``axis`` has no default: absent means 0, as
    Split-2 made explicit. Negative axes came with Split-11."""
    label = f"Split-{ctx.version}"
    attr = op.attr("split")
    sizes = _split_attr(label, attr)
    unknown = False
    if ctx.input(1) is not None:
        if attr is not None:
            raise ShapeError(f"{label}: split is given both as attribute and as input")
        t = inputs[1] if len(inputs) > 1 else None
        allowed = schemas.allowed_types("Split", 1, "T")
        if t is not None and t.dtype and t.dtype not in allowed:
            raise ShapeError(
                f"{label}: the split input is of type T (float16, float, double), got "
                f"{dtype_name(t.dtype).lower()}"
            )
        array = ctx.const(1)
        if array is None:
            unknown = True
        else:
            values = np.asarray(array).reshape(-1)
            if not np.all(np.isfinite(values)) or np.any(values != np.round(values)):
                raise ShapeError(f"{label}: split {values.tolist()} holds non-integers")
            sizes = [int(v) for v in values]
    axis = op.attr("axis", 0)
    return _outputs(op, inputs, ctx, axis=axis, negative=False, sizes=sizes, sizes_unknown=unknown)


@shape_rule("Split", versions=(2, 11))
def infer_split_2(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Split-2 and -11: sizes from the ``split`` attribute, else equal parts; negative axes
    from Split-11."""
    sizes = _split_attr(f"Split-{ctx.version}", op.attr("split"))
    return _outputs(
        op, inputs, ctx, axis=ctx.attr("axis"), negative=ctx.version >= 11, sizes=sizes
    )


@shape_rule("Split", versions=(13,))
def infer_split_13(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Split-13: sizes from the optional ``split`` input (initializer, Constant or computed
    value), else equal parts."""
    label = f"Split-{ctx.version}"
    count = len(ctx.scope.graph.outputs_of(op))
    sizes, unknown = _split_input(label, inputs, ctx, count)
    return _outputs(
        op,
        inputs,
        ctx,
        axis=ctx.attr("axis"),
        negative=True,
        sizes=sizes,
        sizes_unknown=unknown,
    )


@shape_rule("Split", versions=(18,))
def infer_split_18(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    """Split-18: the ``split`` input or ``num_outputs`` (one of them, not both). With
    ``num_outputs`` the parts are ``ceil(dim / num_outputs)`` long and the last one smaller;
    a last part that would be negative (5 into 4: 2, 2, 2, -1) is an error."""
    label = f"Split-{ctx.version}"
    count = len(ctx.scope.graph.outputs_of(op))
    chunks = op.attr("num_outputs")
    given = ctx.input(1) is not None
    if given and chunks is not None:
        raise ShapeError(f"{label}: both the split input and num_outputs ({chunks}) are given")
    if not given and chunks is None:
        raise ShapeError(f"{label}: neither the split input nor num_outputs is given")
    if chunks is not None and not isinstance(chunks, int):
        raise ShapeError(f"{label}: num_outputs must be an int, got {chunks!r}")
    sizes, unknown = _split_input(label, inputs, ctx, count)
    return _outputs(
        op,
        inputs,
        ctx,
        axis=ctx.attr("axis"),
        negative=True,
        sizes=sizes,
        chunks=chunks,
        sizes_unknown=unknown,
    )
