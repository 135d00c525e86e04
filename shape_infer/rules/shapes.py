"""Shape rules and element propagation for the ops that compute and apply shapes.

Exporters write shape arithmetic as Shape -> Gather/Slice -> Unsqueeze -> Concat -> Reshape
(or Expand, ConstantOfShape, Range, Tile). The value rules here carry the elements of those small
integer tensors, symbols included; the shape rules read them back through ``ctx.value`` so a
Reshape to ``[batch, -1]`` gets ``[N, 12]``.
"""

from __future__ import annotations

__all__: list[str] = []

from collections.abc import Callable, Sequence

import numpy as np

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, DType, Op, Tensor, TensorType, constant_tensor
from onnxforge.opset import schema_versions
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape
from onnxforge.shape_infer.engine import (
    INTEGER_DTYPES,
    InferContext,
    Known,
    shape_rule,
    value_rule,
)
from onnxforge.shape_infer.symbolic import (
    Expr,
    dim_add,
    dim_ceildiv,
    dim_div_exact,
    dim_floordiv,
    dim_max,
    dim_min,
    dim_mul,
    dim_neg,
    dim_product,
    dim_sub,
    is_unknown_symbol,
    nonnegative,
    parse,
    same_dim,
    to_dim,
)

Inputs = Sequence[TensorType | None]
TO_THE_END = (1 << 31) - 1
"""Ends at or past this mean "to the end": INT64_MAX from PyTorch, INT32_MAX from tf2onnx (no
dim of a real tensor reaches 2**31)."""


def _rank(t: TensorType | None) -> int | None:
    return None if t is None else t.rank


def _axis(axis: int, rank: int, op: Op, what: str = "axis") -> int:
    if not -rank <= axis < rank:
        raise ShapeError(f"{what} {axis} is out of range for rank {rank}")
    return axis + rank if axis < 0 else axis


def _ints(ctx: InferContext, index: int, attr: str | None = None) -> list[int] | None:
    """Static integer elements of an input (or of an attribute in older versions)."""
    if attr is not None:
        value = ctx.op.attr(attr)
        if value is not None:
            return [int(v) for v in value]
    known = ctx.value(index)
    if known is None or not all(isinstance(d, int) for d in known):
        return None
    return [int(d) for d in known]  # type: ignore[arg-type]


# -- Shape, Size ------------------------------------------------------------------------------
def _shape_range(op: Op, rank: int) -> tuple[int, int]:
    start = int(op.attr("start", 0))
    end = op.attr("end")
    end = rank if end is None else int(end)
    start = min(max(start + rank if start < 0 else start, 0), rank)
    end = min(max(end + rank if end < 0 else end, 0), rank)
    return start, max(end, start)


@shape_rule("Shape", versions=schema_versions("Shape"))
def infer_shape(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    rank = _rank(inputs[0])
    if rank is None:
        return [TensorType(DType.INT64, (None,))]
    start, end = _shape_range(op, rank)
    return [TensorType(DType.INT64, (end - start,))]


@value_rule("Shape", versions=schema_versions("Shape"))
def shape_value(op: Op, ctx: InferContext) -> list[Known | None]:
    value = ctx.input(0)
    t = None if value is None else ctx.scope.type_of(value)
    if not isinstance(t, TensorType) or t.shape is None:
        return [None]
    start, end = _shape_range(op, len(t.shape))
    return [tuple(t.shape[start:end])]


@shape_rule("Size", versions=schema_versions("Size"))
def infer_size(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    return [TensorType(DType.INT64, ())]


@value_rule("Size", versions=schema_versions("Size"))
def size_value(op: Op, ctx: InferContext) -> list[Known | None]:
    value = ctx.input(0)
    t = None if value is None else ctx.scope.type_of(value)
    if not isinstance(t, TensorType) or t.shape is None:
        return [None]
    return [(dim_product(t.shape),)]


# -- Constant, Identity, Cast -----------------------------------------------------------------
@value_rule("Constant", versions=schema_versions("Constant"))
def constant_value(op: Op, ctx: InferContext) -> list[Known | None]:
    tensor = constant_tensor(op)
    array = None if tensor is None else tensor.numpy()
    outputs = ctx.scope.graph.outputs_of(op)
    if array is not None and outputs and outputs[0] is not None:
        ctx.engine.consts[outputs[0]] = array  # later rules read it through ctx.const
    if array is None or array.dtype.kind not in "iu" or array.ndim > 1 or array.size > 1024:
        return [None]
    return [tuple(int(x) for x in array.reshape(-1))]


@value_rule("Identity", versions=schema_versions("Identity"))
def identity_value(op: Op, ctx: InferContext) -> list[Known | None]:
    return [ctx.value(0, any_rank=True)]


EXACT_FLOATS = frozenset({DType.FLOAT, DType.DOUBLE})
"""Float types shape values pass through exactly (tf2onnx casts shapes to float to scale them):
the integers a dim takes are exact in float32 below 2**24."""


@value_rule("Cast", versions=schema_versions("Cast"))
def cast_value(op: Op, ctx: InferContext) -> list[Known | None]:
    to = op.attr("to")
    return [ctx.value(0, any_rank=True) if to in INTEGER_DTYPES or to in EXACT_FLOATS else None]


def rounding_value(op: Op, ctx: InferContext) -> list[Known | None]:
    """Known float elements are integers (casts of dims, exact arithmetic on them)."""
    return [ctx.value(0, any_rank=True)]


for _name in ("Floor", "Ceil", "Round"):
    value_rule(_name, versions=schema_versions(_name))(rounding_value)


@shape_rule("Cast", versions=schema_versions("Cast"))
def infer_cast(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    return [TensorType(int(op.attr("to")), None if t is None else t.shape)]


# -- Gather, Concat, Squeeze, Unsqueeze -------------------------------------------------------
@shape_rule("Gather", versions=schema_versions("Gather"))
def infer_gather(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    data, indices = inputs[0], inputs[1]
    if data is None:
        return [None]
    if data.shape is None or indices is None or indices.shape is None:
        return [TensorType(data.dtype, None)]
    axis = _axis(int(op.attr("axis", 0)), len(data.shape), op)
    return [TensorType(data.dtype, data.shape[:axis] + indices.shape + data.shape[axis + 1 :])]


@value_rule("Gather", versions=schema_versions("Gather"))
def gather_value(op: Op, ctx: InferContext) -> list[Known | None]:
    data, indices = ctx.value(0), ctx.const(1)
    if data is None or indices is None or indices.ndim > 1 or int(op.attr("axis", 0)) != 0:
        return [None]
    out = []
    for i in indices.reshape(-1).tolist():
        if not -len(data) <= i < len(data):
            raise ShapeError(f"index {i} is out of range for {len(data)} elements")
        out.append(data[i])
    return [tuple(out)]


@shape_rule("Concat", versions=schema_versions("Concat"))
def infer_concat(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    known = [t for t in inputs if t is not None]
    if not known:
        return [None]
    dtype = known[0].dtype
    if len(known) < len(inputs) or any(t.shape is None for t in known):
        ranks = {t.rank for t in known if t.shape is not None}
        rank_of = ranks.pop() if len(ranks) == 1 else None
        return [TensorType(dtype, None if rank_of is None else (None,) * rank_of)]
    rank = len(known[0].shape)  # type: ignore[arg-type]
    axis_attr = op.attr("axis")
    if axis_attr is None:
        if ctx.version >= 4:
            raise ShapeError("Concat needs an axis attribute")
        axis_attr = 1
    axis = _axis(int(axis_attr), rank, op)
    out: list[Dim] = list(known[0].shape)  # type: ignore[arg-type]
    out[axis] = 0
    for n, t in enumerate(known):
        shape = t.shape
        assert shape is not None
        if len(shape) != rank:
            raise ShapeError(f"input {n} has rank {len(shape)}, input 0 has rank {rank}")
        for i, d in enumerate(shape):
            if i == axis:
                out[i] = dim_add(out[i], d)
            else:
                out[i] = _equal_dims(out[i], d, ctx, f"dim {i} of input {n}")
    return [TensorType(dtype, tuple(out))]


def _equal_dims(a: Dim, b: Dim, ctx: InferContext, where: str) -> Dim:
    if same_dim(a, b):
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ShapeError(f"{where} is {b}, expected {a}")
    if is_unknown_symbol(a):
        return b
    if is_unknown_symbol(b):
        return a
    ctx.assume(a, b)
    return b if isinstance(b, int) else a


@value_rule("Concat", versions=schema_versions("Concat"))
def concat_value(op: Op, ctx: InferContext) -> list[Known | None]:
    parts = [ctx.value(i) for i in range(len(ctx.inputs))]
    if any(p is None for p in parts):
        return [None]
    return [tuple(d for p in parts for d in p)]  # type: ignore[union-attr]


def _axes(op: Op, ctx: InferContext, index: int) -> list[int] | None:
    if ctx.version < 13:
        axes = op.attr("axes")
        return None if axes is None else [int(a) for a in axes]
    if ctx.input(index) is None:
        return None
    return _ints(ctx, index)


@shape_rule("Unsqueeze", versions=schema_versions("Unsqueeze"))
def infer_unsqueeze(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None:
        return [None]
    axes = _axes(op, ctx, 1)
    if t.shape is None or axes is None:
        return [TensorType(t.dtype, None)]
    rank = len(t.shape) + len(axes)
    norm = sorted(_axis(a, rank, op, "axis") for a in axes)
    if len(set(norm)) != len(norm):
        raise ShapeError(f"axes {axes} repeat an axis")
    dims = iter(t.shape)
    return [TensorType(t.dtype, tuple(1 if i in norm else next(dims) for i in range(rank)))]


@value_rule("Unsqueeze", versions=schema_versions("Unsqueeze"))
def unsqueeze_value(op: Op, ctx: InferContext) -> list[Known | None]:
    known = ctx.value(0)
    t = ctx.scope.type_of(ctx.inputs[0]) if ctx.inputs[0] is not None else None
    if known is None or not isinstance(t, TensorType) or t.shape != ():
        return [None]
    return [known]


@shape_rule("Squeeze", versions=schema_versions("Squeeze"))
def infer_squeeze(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None:
        return [None]
    if t.shape is None:
        return [TensorType(t.dtype, None)]
    axes = _axes(op, ctx, 1)
    has_axes = op.attr("axes") is not None if ctx.version < 13 else ctx.input(1) is not None
    if has_axes and axes is None:
        return [TensorType(t.dtype, None)]
    if axes is None:
        if any(not isinstance(d, int) for d in t.shape):
            return [TensorType(t.dtype, None)]  # which dims are 1 is not known
        return [TensorType(t.dtype, tuple(d for d in t.shape if d != 1))]
    norm = {_axis(a, len(t.shape), op) for a in axes}
    for a in norm:
        if isinstance(t.shape[a], int) and t.shape[a] != 1:
            raise ShapeError(f"cannot squeeze axis {a} of size {t.shape[a]}")
    return [TensorType(t.dtype, tuple(d for i, d in enumerate(t.shape) if i not in norm))]


@value_rule("Squeeze", versions=schema_versions("Squeeze"))
def squeeze_value(op: Op, ctx: InferContext) -> list[Known | None]:
    known = ctx.value(0)
    return [known if known is not None and len(known) == 1 else None]


# -- Slice ------------------------------------------------------------------------------------
def _slice_params(op: Op, ctx: InferContext, rank: int) -> list[tuple[int, Dim, Dim, int]] | None:
    """(axis, start, end, step) per sliced axis; starts/ends may be symbolic."""
    if ctx.version < 10:
        starts: Sequence[Dim] | None = op.attr("starts")
        ends: Sequence[Dim] | None = op.attr("ends")
        axes = op.attr("axes")
        steps = None
    else:
        starts, ends = ctx.value(1), ctx.value(2)
        axes = _ints(ctx, 3) if ctx.input(3) is not None else None
        steps = _ints(ctx, 4) if ctx.input(4) is not None else None
        if (ctx.input(3) is not None and axes is None) or (
            ctx.input(4) is not None and steps is None
        ):
            return None
    if starts is None or ends is None:
        return None
    axes = list(range(len(starts))) if axes is None else [int(a) for a in axes]
    steps = [1] * len(starts) if steps is None else steps
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ShapeError("starts, ends, axes and steps have different lengths")
    params = []
    for a, s, e, st in zip(axes, starts, ends, steps, strict=True):
        if st == 0:
            raise ShapeError("a step is 0")
        params.append((_axis(a, rank, op), s, e, st))
    if len({p[0] for p in params}) != len(params):
        raise ShapeError(f"axes {axes} repeat an axis")
    return params


def _slice_len(dim: Dim, start: Dim, end: Dim, step: int, ctx: InferContext) -> Dim:
    """The length Slice gives, exact for every size the dim may take: a bound is clamped to the
    dim as Slice clamps it (``[0:1000000000]`` of N is ``min(1000000000, N)``, never a guess
    at which side wins), except that a bound at or past 2**31-1 reaches the end, since no
    runtime makes a dim that large. Symbolic bounds must be provably >= 0."""
    if isinstance(dim, int) and isinstance(start, int) and isinstance(end, int):
        return len(_slice_range(dim, start, end, step))
    if dim is None:
        return None
    if step < 0:  # only the whole axis reversed (x[::-1], x[-1::-k])
        from_last = isinstance(start, int) and (start == -1 or start >= TO_THE_END)
        if from_last and isinstance(end, int) and end <= -TO_THE_END:
            return dim if step == -1 else dim_ceildiv(dim, -step)
        return None
    first, last = _slice_position(start, dim), _slice_position(end, dim)
    if first is None or last is None:
        return None
    if first == 0:
        length = last
    elif same_dim(last, dim):  # to the end
        if isinstance(start, int) and start < 0:
            length = dim_min(-start, dim)  # [-k:] of N: min(k, N)
        else:
            length = dim_max(dim_sub(dim, start), 0)  # [k:] of N: max(N-k, 0)
    elif isinstance(start, int) and isinstance(end, int) and (start < 0) == (end < 0):
        if start >= end:
            length = 0
        elif start > 0:  # [k:j]: min(max(N-k, 0), j-k)
            length = dim_min(dim_max(dim_sub(dim, start), 0), end - start)
        else:  # [-k:-j]: min(max(N-j, 0), k-j)
            length = dim_min(dim_max(dim_add(dim, end), 0), end - start)
    elif isinstance(start, int) and isinstance(end, int) and start >= 0:
        length = dim_max(dim_add(dim, end - start), 0)  # [k:-j] of N: max(N-j-k, 0)
    else:
        length = dim_max(dim_sub(last, first), 0)
    if length is None or step == 1:
        return length
    return dim_ceildiv(length, step)


def _slice_range(dim: int, start: int, end: int, step: int) -> range:
    """The indices Slice takes along a static dim: ONNX's clamping (the kernel's), which is
    Python's but for a negative step whose start is before the front: the spec clamps it to
    0 (``[-5::-1]`` of 3 takes index 0), Python to -1 (nothing)."""
    if dim == 0:
        return range(0)
    start = start + dim if start < 0 else start
    end = end + dim if end < 0 else end
    if step > 0:
        return range(min(max(start, 0), dim), min(max(end, 0), dim), step)
    return range(min(max(start, 0), dim - 1), min(max(end, -1), dim - 1), step)


def _slice_position(bound: Dim, dim: Dim) -> Dim:
    """Where a start or end lands on an axis of ``dim`` after Slice's clamping."""
    if isinstance(bound, int):
        if bound >= TO_THE_END:
            return dim
        if bound <= -TO_THE_END:
            return 0
        if bound >= 0:
            return 0 if bound == 0 else dim_min(bound, dim)
        return dim_max(dim_add(dim, bound), 0)
    if bound is None:
        return None
    if not nonnegative(bound):
        # -L on an axis of L is its start (T5's relative bias slices [-L:] of L), L = 0
        # included; another -E is 0 when E is, not N - E, so it stays unknown.
        return 0 if same_dim(dim_neg(bound), dim) else None
    return dim if same_dim(bound, dim) else dim_min(bound, dim)


@shape_rule("Slice", versions=schema_versions("Slice"))
def infer_slice(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None:
        return [None]
    if t.shape is None:
        return [TensorType(t.dtype, None)]
    params = _slice_params(op, ctx, len(t.shape))
    if params is None:
        return [TensorType(t.dtype, (None,) * len(t.shape))]
    out = list(t.shape)
    for axis, start, end, step in params:
        out[axis] = _slice_len(t.shape[axis], start, end, step, ctx)
    return [TensorType(t.dtype, tuple(out))]


@value_rule("Slice", versions=schema_versions("Slice"))
def slice_value(op: Op, ctx: InferContext) -> list[Known | None]:
    known = ctx.value(0)
    if known is None:
        return [None]
    params = _slice_params(op, ctx, 1)
    if params is None or not params:
        return [None if params is None else known]
    _, start, end, step = params[0]
    if not isinstance(start, int) or not isinstance(end, int):
        return [None]
    return [tuple(known[i] for i in _slice_range(len(known), start, end, step))]


# -- Reshape, Flatten, Expand, Tile, ConstantOfShape, Range -----------------------------------
@shape_rule("Reshape", versions=schema_versions("Reshape"))
def infer_reshape(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None:
        return [None]
    target: Sequence[Dim] | None
    if ctx.version < 5:
        attr = op.attr("shape")
        target = None if attr is None else [int(d) for d in attr]
    else:
        target = ctx.value(1)
    if target is None:
        shape_t = inputs[1] if len(inputs) > 1 else None
        if shape_t is not None and shape_t.shape is not None and isinstance(shape_t.shape[0], int):
            return [TensorType(t.dtype, (None,) * shape_t.shape[0])]
        return [TensorType(t.dtype, None)]
    allowzero = int(op.attr("allowzero", 0) or 0)
    out: list[Dim] = []
    maybe_copied: list[int] = []  # symbols that may be 0 where 0 copies another size
    infer_at = None
    for i, d in enumerate(target):
        if d == -1:
            if infer_at is not None:
                raise ShapeError(f"shape {format_shape(target)} has more than one -1")
            infer_at = i
            out.append(None)
        elif d == 0 and not allowzero:
            if t.shape is None or i >= len(t.shape):
                if t.shape is None:
                    out.append(None)
                    continue
                raise ShapeError(
                    f"shape {format_shape(target)} copies dim {i} of a rank-{len(t.shape)} input"
                )
            out.append(t.shape[i])
        elif isinstance(d, int) and d < -1:
            raise ShapeError(f"shape {format_shape(target)} has a negative dim {d}")
        elif isinstance(d, str) and not nonnegative(d):
            out.append(None)  # N-1 is -1 at N=0: then the dim is inferred, not N-1
        elif isinstance(d, str) and not allowzero and not ctx.at_least_one(d):
            # A symbol may be 0, which copies dim i: d is that dim's size where d=0 makes
            # dim i 0 too (dim i is d or a multiple of it), where there is no dim i (d=0 is
            # then an invalid model); else see below.
            copied = t.shape[i] if t.shape is not None and i < len(t.shape) else 0
            ratio = dim_div_exact(d, copied)  # 8*B over B: 0 exactly where B is, so exact
            if dim_div_exact(copied, d) is None and not (isinstance(ratio, int) and ratio):
                maybe_copied.append(i)
            out.append(d)
        else:
            out.append(d)
    if maybe_copied and t.shape is not None:
        # Still d where the element counts agree as polynomials and every other dim is at
        # least 1 (the flattening [B, S, H] -> [B*S, H]): a copy at d=0 would then leave the
        # output a non-empty tensor of an empty input, an invalid model.
        fits = infer_at is None and same_dim(dim_product(out), dim_product(t.shape))
        for i in maybe_copied:
            others = (o for j, o in enumerate(out) if j != i)
            if not (fits and all(ctx.at_least_one(o) for o in others)):
                out[i] = None
    if infer_at is not None and not allowzero:
        # onnxruntime refuses a -1 whose other dims multiply to 0 (with allowzero it makes the
        # -1 a 1), so they are 1 or more in every run: GPT-2's head split [B, S, -1, 8]
        # makes B and S facts for later Reshapes
        ctx.positive(*(d for i, d in enumerate(out) if i != infer_at))
    if t.shape is not None:
        total = dim_product(t.shape)
        if infer_at is not None:
            rest = dim_product(d for i, d in enumerate(out) if i != infer_at)
            out[infer_at] = dim_div_exact(total, rest)
            if out[infer_at] is None:
                out[infer_at] = _quotient(total, rest)
            if isinstance(total, int) and isinstance(rest, int) and rest and total % rest:
                raise ShapeError(
                    f"cannot reshape {format_shape(t.shape)} ({total} elements) to "
                    f"{format_shape(target)}"
                )
        else:
            size = dim_product(out)
            if isinstance(total, int) and isinstance(size, int) and total != size:
                raise ShapeError(
                    f"cannot reshape {format_shape(t.shape)} ({total} elements) to "
                    f"{format_shape(target)} ({size} elements)"
                )
    return [TensorType(t.dtype, tuple(out))]


def _quotient(total: Dim, rest: Dim) -> Dim:
    """A Reshape's -1 where ``rest`` does not divide ``total`` as polynomials: onnxruntime runs
    the model only when it divides the sizes, so where ``rest`` is a constant c times factors
    of ``total``, the -1 is ``floor((total / factors) / c)`` for every run: madmom's
    [T, 24, F] to [-1, 2520] is ``floor(F*T/105)``, [1, 4, h, 1, w] to [0, 0, -1, 2, 0]
    ``floor(h/2)``."""
    if total is None or rest is None:
        return None
    if isinstance(rest, int):
        return dim_floordiv(total, rest) if rest > 0 else None
    terms = parse(rest).terms
    if len(terms) != 1:
        return None
    ((monomial, coef),) = terms.items()
    if coef <= 0:
        return None
    quotient = dim_div_exact(total, to_dim(Expr({monomial: 1})))
    return None if quotient is None else dim_floordiv(quotient, coef)


@value_rule("Reshape", versions=schema_versions("Reshape"))
def reshape_value(op: Op, ctx: InferContext) -> list[Known | None]:
    known = ctx.value(0)  # scalar <-> [1] and 1-D -> 1-D keep the elements
    target = ctx.value(1) if ctx.version >= 5 else None
    if known is None or target is None or len(target) > 1:
        return [None]
    return [known]


@shape_rule("Expand", versions=schema_versions("Expand"))
def infer_expand(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t, shape_t = inputs[0], inputs[1]
    if t is None:
        return [None]
    target = ctx.value(1)
    if target is None:
        if shape_t is not None and shape_t.shape is not None and isinstance(shape_t.shape[0], int):
            if t.shape is not None and len(t.shape) > shape_t.shape[0]:
                return [TensorType(t.dtype, (None,) * len(t.shape))]
            return [TensorType(t.dtype, (None,) * shape_t.shape[0])]
        return [TensorType(t.dtype, None)]
    if any(isinstance(d, int) and d < 0 for d in target):
        raise ShapeError(f"shape {format_shape(target)} has a negative dim")
    if t.shape is None:
        return [TensorType(t.dtype, None)]
    return [TensorType(t.dtype, broadcast_shape(t.shape, target, on_assume=ctx.assume))]


@shape_rule("Tile", versions=schema_versions("Tile"))
def infer_tile(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    if t is None:
        return [None]
    if t.shape is None:
        return [TensorType(t.dtype, None)]
    if ctx.version < 6:  # Tile-1: a scalar count of tiles along one axis
        tiles, axis = ctx.value(1), ctx.value(2)
        dims = list(t.shape)
        if tiles is None or axis is None or len(tiles) != 1 or len(axis) != 1:
            return [TensorType(t.dtype, (None,) * len(dims))]
        at = axis[0]
        if not isinstance(at, int) or not -len(dims) <= at < len(dims):
            raise ShapeError(f"axis {at} is out of range for a rank-{len(dims)} input")
        dims[at] = dim_mul(dims[at], tiles[0])
        return [TensorType(t.dtype, tuple(dims))]
    repeats = ctx.value(1)
    if repeats is None:
        return [TensorType(t.dtype, (None,) * len(t.shape))]
    if len(repeats) != len(t.shape):
        raise ShapeError(f"{len(repeats)} repeats for a rank-{len(t.shape)} input")
    if any(isinstance(r, int) and r < 0 for r in repeats):
        raise ShapeError(f"repeats {format_shape(repeats)} has a negative count")
    return [
        TensorType(t.dtype, tuple(dim_mul(d, r) for d, r in zip(t.shape, repeats, strict=True)))
    ]


@shape_rule("ConstantOfShape", versions=schema_versions("ConstantOfShape"))
def infer_constant_of_shape(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    value = op.attr("value")
    dtype = value.dtype if isinstance(value, Tensor) else DType.FLOAT
    target = ctx.value(0)
    if target is not None:
        for d in target:
            if isinstance(d, int) and d < 0:
                raise ShapeError(f"shape {format_shape(target)} has a negative dim")
        return [TensorType(dtype, tuple(target))]
    shape_t = inputs[0]
    if shape_t is not None and shape_t.shape is not None and isinstance(shape_t.shape[0], int):
        return [TensorType(dtype, (None,) * shape_t.shape[0])]
    return [TensorType(dtype, None)]


@value_rule("ConstantOfShape", versions=schema_versions("ConstantOfShape"))
def constant_of_shape_value(op: Op, ctx: InferContext) -> list[Known | None]:
    target, value = ctx.value(0), op.attr("value")
    if target is None or len(target) != 1 or not isinstance(target[0], int) or target[0] > 1024:
        return [None]
    fill = value.numpy().reshape(-1) if isinstance(value, Tensor) else np.zeros(1, np.float32)
    if fill.dtype.kind not in "iu":
        return [None]
    return [(int(fill[0]),) * target[0]]


DOUBLE_EXACT = 1 << 53
"""onnxruntime counts Range's elements as ceil((double(limit) - double(start)) / double(delta)):
past 2**53 that is not the exact count (Range(1, INT64_MIN, INT64_MIN) has 2 elements, 1 there)."""


@shape_rule("Range", versions=schema_versions("Range"))
def infer_range(op: Op, inputs: Inputs, ctx: InferContext) -> list[TensorType | None]:
    t = inputs[0]
    dtype = t.dtype if t is not None else DType.UNDEFINED
    start, limit, delta = ctx.value(0), ctx.value(1), ctx.value(2)
    if start is None or limit is None or delta is None:
        consts = [ctx.const(i) for i in range(3)]
        if all(c is not None for c in consts):
            s, lim, d = (float(c.reshape(-1)[0]) for c in consts)  # type: ignore[union-attr]
            if d == 0:
                raise ShapeError("delta is 0")
            count = np.ceil((lim - s) / d)
            if not np.isfinite(count):
                raise ShapeError(f"start {s}, limit {lim}, delta {d} give no finite length")
            return [TensorType(dtype, (max(int(count), 0),))]
        return [TensorType(dtype, (None,))]
    s, lim, d = start[0], limit[0], delta[0]
    if d == 0:
        raise ShapeError("delta is 0")
    if any(isinstance(v, int) and abs(v) >= DOUBLE_EXACT for v in (s, lim, d)):
        return [TensorType(dtype, (None,))]  # counted in double at run time: not exact here
    if isinstance(s, int) and isinstance(lim, int) and isinstance(d, int):
        return [TensorType(dtype, (max(-(-(lim - s) // d), 0),))]
    if isinstance(d, int):
        # max(ceil((limit - start) / delta), 0): Range(5, N, 1) is empty for N < 5
        span = dim_sub(lim, s) if d > 0 else dim_sub(s, lim)
        return [TensorType(dtype, (dim_max(dim_ceildiv(span, abs(d)), 0),))]
    return [TensorType(dtype, (None,))]


@value_rule("Range", versions=schema_versions("Range"))
def range_value(op: Op, ctx: InferContext) -> list[Known | None]:
    start, limit, delta = ctx.value(0), ctx.value(1), ctx.value(2)
    if start is None or limit is None or delta is None:
        return [None]
    s, lim, d = start[0], limit[0], delta[0]
    if not (isinstance(s, int) and isinstance(lim, int) and isinstance(d, int)) or d == 0:
        return [None]
    if max(abs(s), abs(lim), abs(d)) >= DOUBLE_EXACT:
        return [None]
    if max(-(-(lim - s) // d), 0) > 1024:  # before len(): INT64 bounds overflow a range's len
        return [None]
    return [tuple(range(s, lim, d))]


# -- element arithmetic on shape values -------------------------------------------------------
def _elementwise(ctx: InferContext, fn: object) -> list[Known | None]:
    a, b = ctx.value(0), ctx.value(1)
    if a is None or b is None:
        return [None]
    if len(a) == 1 and len(b) > 1:
        a = a * len(b)
    if len(b) == 1 and len(a) > 1:
        b = b * len(a)
    if len(a) != len(b):
        return [None]
    return [tuple(fn(x, y) for x, y in zip(a, b, strict=True))]  # type: ignore[operator]


def _div(ctx: InferContext) -> Callable[[Dim, Dim], Dim]:
    def div(x: Dim, y: Dim) -> Dim:
        if isinstance(x, int) and isinstance(y, int):
            if y == 0:
                return None
            q = abs(x) // abs(y)
            return q if (x >= 0) == (y >= 0) else -q  # integer Div truncates toward zero
        if not (nonnegative(x) and nonnegative(y)):
            exact = dim_div_exact(x, y)
            if exact is not None:
                return exact
            # Integer Div truncates, floor rounds down: the same unless the quotient is
            # negative. Shape arithmetic such as (H - 1) // 2 + 1 (PyTorch's dynamo export
            # of a strided conv) is floored on the assumption that H - 1 is not negative,
            # as onnxruntime's symbolic inference does; the report lists the assumption.
            quotient = dim_floordiv(x, y)
            if quotient is not None:
                ctx.assume(x if not nonnegative(x) else y, 0, ">=")
            return quotient
        return dim_floordiv(x, y)

    return div


def _mod(x: Dim, y: Dim) -> Dim:
    """Integer Mod (fmod=0: the sign of the divisor, Python's %): ``x - y*floor(x/y)``, exact
    for any integer x when y is a positive constant (``N % 3`` of a padding computation)."""
    if isinstance(x, int) and isinstance(y, int):
        return None if y == 0 else x % y
    if isinstance(y, int) and y > 0:
        return dim_sub(x, dim_mul(y, dim_floordiv(x, y)))
    return None


def _equal(x: Dim, y: Dim) -> Dim:
    """1 or 0 when known: a dim (>= 0) never equals a negative number (the -1 of Reshape)."""
    if same_dim(x, y):
        return 1
    if isinstance(x, int) and isinstance(y, int):
        return int(x == y)
    if (isinstance(x, int) and x < 0 and nonnegative(y)) or (
        isinstance(y, int) and y < 0 and nonnegative(x)
    ):
        return 0
    return None


_ARITH: dict[str, Callable[[Dim, Dim], Dim] | None] = {
    "Add": dim_add,
    "Sub": dim_sub,
    "Mul": dim_mul,
    "Div": None,  # _div(ctx): it records the assumption it makes
    "Mod": _mod,
    "Max": dim_max,
    "Min": dim_min,
    "Equal": _equal,
}
for _name, _fn in _ARITH.items():

    def _rule(op: Op, ctx: InferContext, fn: object = _fn) -> list[Known | None]:
        if op.op_type in ("Max", "Min") and len(ctx.inputs) != 2:
            return [None]
        if op.attr("broadcast") is not None:
            return [None]  # legacy broadcast: not shape arithmetic
        first = ctx.input(0)
        t = None if first is None else ctx.scope.type_of(first)
        if op.op_type == "Mod" and op.attr("fmod", 0):
            return [None]  # C's fmod: the sign of the dividend
        if fn is None:
            fn = _div(ctx)
        if isinstance(t, TensorType) and t.dtype in EXACT_FLOATS:
            if op.op_type == "Mod":
                return [None]  # fmod semantics: not needed for shapes
            if op.op_type == "Div":  # true division: known only when exact
                fn = dim_div_exact
        return _elementwise(ctx, fn)

    value_rule(_name, versions=schema_versions(_name))(_rule)


def _fold(fn: Callable[[Dim, Dim], Dim]) -> Callable[[Sequence[Dim]], Dim]:
    def fold(elements: Sequence[Dim]) -> Dim:
        total = elements[0]
        for d in elements[1:]:
            total = fn(total, d)
        return total

    return fold


_REDUCE: dict[str, Callable[[Sequence[Dim]], Dim]] = {
    "ReduceProd": dim_product,
    "ReduceSum": _fold(dim_add),
    "ReduceMax": _fold(dim_max),
    "ReduceMin": _fold(dim_min),
}


def reduce_value(op: Op, ctx: InferContext) -> list[Known | None]:
    """A reduction of a known 1-D shape value over its one axis (tf2onnx's ReduceProd of
    Gather(Shape) for a flattened size): one element, keepdims or not."""
    known = ctx.value(0)
    if not known:
        return [None]
    axes: Sequence[Dim] | None = None
    if op.attr("axes") is not None:
        axes = [int(a) for a in op.attr("axes")]  # type: ignore[union-attr]
    elif ctx.input(1) is not None:
        axes = ctx.value(1)
        if axes is None:
            return [None]
    if axes is not None and not axes and op.attr("noop_with_empty_axes", 0):
        return [known]
    if axes and any(a not in (0, -1) for a in axes):
        return [None]
    return [(_REDUCE[op.op_type](known),)]


for _name in _REDUCE:
    value_rule(_name, versions=schema_versions(_name))(reduce_value)


@value_rule("Where", versions=schema_versions("Where"))
def where_value(op: Op, ctx: InferContext) -> list[Known | None]:
    cond, x, y = ctx.value(0), ctx.value(1), ctx.value(2)
    if cond is None or x is None or y is None:
        bools = ctx.const(0)
        if bools is None or x is None or y is None:
            return [None]
        cond = tuple(int(v) for v in bools.reshape(-1))
    n = max(len(cond), len(x), len(y))
    parts = []
    for p in (cond, x, y):
        if len(p) not in (1, n):
            return [None]
        parts.append(p * n if len(p) == 1 else p)
    if not all(isinstance(c, int) for c in parts[0]):
        return [None]
    return [tuple(b if c else a for c, b, a in zip(parts[0], parts[1], parts[2], strict=True))]


@value_rule("Neg", versions=schema_versions("Neg"))
def neg_value(op: Op, ctx: InferContext) -> list[Known | None]:
    known = ctx.value(0, any_rank=True)
    return [None if known is None else tuple(dim_sub(0, d) for d in known)]
