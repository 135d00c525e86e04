"""Scatter (deprecated at 11) <-> ScatterElements; ScatterElements and ScatterND with a
reduction written out below the version that has it ('add'/'mul' at 16, 'max'/'min' at 18)."""

from __future__ import annotations

__all__ = ["scatter_10_11", "scatter_16_15", "scatter_18_17", "scatter_elements_11_10"]

import numpy as np

from onnxforge.ir import DType, Graph, Op, Shape, TensorType, Value, dtype_name
from onnxforge.passes.convert._build import (
    dtype_of,
    emit,
    finish,
    int64s,
    rank_of,
    reduce,
    replace_outputs,
    scalar,
    shape_of,
    unsqueeze,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter

# reduction -> (the Reduce* op that combines the updates, the op that combines them with data)
_COMBINE = {
    "add": ("ReduceSum", "Add"),
    "mul": ("ReduceProd", "Mul"),
    "max": ("ReduceMax", "Max"),
    "min": ("ReduceMin", "Min"),
}


def _replace(op: Op, graph: Graph, op_type: str) -> None:
    inputs = graph.inputs_of(op)
    out = emit(
        graph, op_type, inputs, base=op.name or op_type.lower(), axis=int(op.attr("axis", 0))
    )
    new = graph.producer(out)
    assert new is not None
    new.name = op.name
    replace_outputs(graph, op, [out])


@adapter("Scatter", 10, 11)
def scatter_10_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Scatter-9 is ScatterElements-11 under another name."""
    _replace(op, graph, "ScatterElements")


@adapter("ScatterElements", 11, 10)
def scatter_elements_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """ScatterElements-11 (no reduction before 16) is Scatter-9."""
    _replace(op, graph, "Scatter")


def _reduction(op: Op) -> str:
    value = op.attr("reduction", "none")
    return value.decode() if isinstance(value, bytes) else str(value)


@adapter(("ScatterElements", "ScatterND"), 18, 17)
def scatter_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """reduction 'max' and 'min' (new at 18) are written out; the others are valid at 16."""
    if _reduction(op) in ("max", "min"):
        _write_out(op, graph, ctx)
    else:
        finish(op, graph, ctx)


@adapter(("ScatterElements", "ScatterND"), 16, 15)
def scatter_16_15(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """reduction='none' is the older behaviour (dropped); 'add' and 'mul' are written out."""
    reduction = _reduction(op)
    if reduction == "none":
        op.attrs.pop("reduction", None)
        finish(op, graph, ctx)
    elif reduction in ("add", "mul"):
        _write_out(op, graph, ctx)
    else:
        raise ctx.fail(op, f"reduction={reduction!r} has no equivalent at opset {ctx.to_opset}")


class _Scatter:
    """Emits one written-out scatter with a reduction: every update is spread over a one-hot
    axis of the size of the data dim it indexes (the other positions hold the reduction's
    neutral value), the Reduce* op combines them, and Add/Mul/Max/Min combines the result
    with the data. Duplicate indices are all combined with the data element, as the
    reduction attribute says; negative indices count from the back."""

    def __init__(self, op: Op, graph: Graph, ctx: ConvertContext) -> None:
        self.op, self.graph, self.ctx = op, graph, ctx
        self.reduction = _reduction(op)
        self.base = op.name or op.op_type.lower()
        data, indices, updates = graph.inputs_of(op)[:3]
        assert data is not None and indices is not None and updates is not None
        self.data, self.indices, self.updates = data, indices, updates
        dtype = dtype_of(ctx, data) or dtype_of(ctx, updates)
        if dtype is None:
            raise ctx.fail(
                op, f"reduction={self.reduction!r} and the data's element type is unknown"
            )
        np_dtype = DType(dtype).numpy if dtype in DType._value2member_map_ else None
        if np_dtype is None or np_dtype.kind not in "iuf":
            raise ctx.fail(
                op, f"reduction={self.reduction!r} on {dtype_name(dtype)} data is not written out"
            )
        self.dtype = dtype
        rank = rank_of(ctx, data)
        if rank is None:
            raise ctx.fail(op, f"reduction={self.reduction!r} and the data's rank is unknown")
        self.rank = rank
        if self.reduction in ("add", "mul"):
            self.neutral: float = 0 if self.reduction == "add" else 1
        else:  # what max/min never picks over the data: the type's lowest/highest
            low, high = (
                (-np.inf, np.inf)
                if np_dtype.kind == "f"
                else (np.iinfo(np_dtype).min, np.iinfo(np_dtype).max)
            )
            self.neutral = low if self.reduction == "max" else high

    def __call__(self, op_type: str, *inputs: Value | None, **attrs: object) -> Value:
        return emit(self.graph, op_type, list(inputs), base=self.base, **attrs)

    def ints(self, values: list[int] | int) -> Value:
        """An int64 constant: 1-D from a list, 0-D from an int."""
        if isinstance(values, int):
            return scalar(self.graph, self.ctx, f"{self.base}_i", values, DType.INT64)
        return int64s(self.graph, self.ctx, f"{self.base}_i", values)

    def unsqueeze(self, x: Value, axes: list[int]) -> Value:
        return unsqueeze(self.graph, self.ctx, x, axes, base=self.base) if axes else x

    def ramp(self, dims: Value, axis: int) -> tuple[Value, Value]:
        """0 .. dims[axis] - 1 (and dims[axis], a scalar)."""
        count = self("Gather", dims, self.ints(axis), axis=0)
        return self("Range", self.ints(0), count, self.ints(1)), count

    def typed(self, rank: int) -> TensorType:
        """The data's element type, ``rank`` dims of unknown extent."""
        return TensorType(self.dtype, (None,) * rank)

    def spread(self, hit: Value, updates: Value, rank: int, axes: list[int]) -> Value:
        """Where(hit, updates, neutral) (of rank ``rank``), reduced over ``axes`` (dropped)."""
        fill = scalar(self.graph, self.ctx, f"{self.base}_neutral", self.neutral, self.dtype)
        where = [hit, updates, fill]
        spread = emit(self.graph, "Where", where, base=self.base, type=self.typed(rank))
        if not axes:
            return spread
        reducer = _COMBINE[self.reduction][0]
        out = reduce(self.graph, self.ctx, reducer, spread, axes, base=self.base, keepdims=0)
        out.type = self.typed(rank - len(axes))
        return out

    def done(self, contribution: Value) -> None:
        combine = _COMBINE[self.reduction][1]
        out = emit(self.graph, combine, [self.data, contribution], base=self.base)
        replace_outputs(self.graph, self.op, [out])


def _write_out(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    if op.op_type == "ScatterElements":
        _scatter_elements(_Scatter(op, graph, ctx))
    else:
        _scatter_nd(_Scatter(op, graph, ctx))


def _scatter_elements(w: _Scatter) -> None:
    """The one-hot axis goes right after ``axis``: hit[i0, .., i_a, j, ..] says whether the
    update at [i0, .., i_a, ..] lands on data index j of the axis. Reducing over ``axis``
    leaves the contribution in the indices' shape with the axis' dim the data's; where the
    indices are shorter than the data in another dim, it is padded with the neutral value."""
    r, op = w.rank, w.op
    axis = int(op.attr("axis", 0))
    if not -r <= axis < r:
        raise w.ctx.fail(op, f"axis={axis} is out of range for rank {r}")
    axis %= r
    indices = w.indices
    if dtype_of(w.ctx, indices) != DType.INT64:
        indices = w("Cast", indices, to=int(DType.INT64))
    dims = w("Shape", w.data)
    ramp, count = w.ramp(dims, axis)
    ramp = w.unsqueeze(ramp, list(range(1, r - axis)))  # [d_a, 1, .., 1]: at axis + 1
    wrapped = w("Mod", indices, count)  # -d_a .. -1 count from the back
    hit = w("Equal", w.unsqueeze(wrapped, [axis + 1]), ramp)
    contribution = w.spread(hit, w.unsqueeze(w.updates, [axis + 1]), r + 1, [axis])
    if not _same_dims(shape_of(w.ctx, w.data), shape_of(w.ctx, w.indices), skip=axis):
        grow = w("Sub", dims, w("Shape", contribution))
        pads = w("Concat", w.ints([0] * r), grow, axis=0)
        fill = scalar(w.graph, w.ctx, f"{w.base}_neutral", w.neutral, w.dtype)
        contribution = emit(
            w.graph,
            "Pad",
            [contribution, pads, fill],
            base=w.base,
            type=w.typed(r),
            mode="constant",
        )
    w.done(contribution)


def _scatter_nd(w: _Scatter) -> None:
    """Indices [m.., k] address the data's first k dims: hit[m.., j0, .., j_{k-1}] says
    whether index tuple m.. is (j0, .., j_{k-1}) (each component compared with a Range over
    its dim). The updates [m.., d_k, ..] spread over those k axes and reduced over m.. give
    a contribution in the data's shape."""
    op = w.op
    shape = shape_of(w.ctx, w.indices)
    if shape is None or not shape or not isinstance(shape[-1], int):
        raise w.ctx.fail(op, f"reduction={w.reduction!r} and the indices' last dim is unknown")
    q, k, r = len(shape), shape[-1], w.rank
    if k > r:
        raise w.ctx.fail(op, f"indices address {k} dims of rank-{r} data")
    dims = w("Shape", w.data)
    leading = w("Slice", dims, w.ints([0]), w.ints([k]))
    wrapped = w("Mod", w.indices, leading)  # -d .. -1 count from the back
    hit: Value | None = None
    for j in range(k):
        component = w("Gather", wrapped, w.ints(j), axis=q - 1)  # [m..]
        component = w.unsqueeze(component, list(range(q - 1, q - 1 + k)))  # [m.., 1 * k]
        ramp, _ = w.ramp(dims, j)
        ramp = w.unsqueeze(ramp, [a for a in range(k) if a != j])  # d_j at j of k axes
        equal = w("Equal", component, ramp)
        hit = equal if hit is None else w("And", hit, equal)
    assert hit is not None
    hit = w.unsqueeze(hit, list(range(q - 1 + k, q - 1 + r)))  # [m.., d0..d_{k-1}, 1 ..]
    updates = w.unsqueeze(w.updates, list(range(q - 1, q - 1 + k)))  # [m.., 1 * k, d_k ..]
    w.done(w.spread(hit, updates, q - 1 + r, list(range(q - 1))))


def _same_dims(a: Shape | None, b: Shape | None, *, skip: int) -> bool:
    """Whether the shapes are known to agree in every dim but ``skip``."""
    if a is None or b is None or len(a) != len(b):
        return False
    pairs = enumerate(zip(a, b, strict=True))
    return all(x is not None and x == y for i, (x, y) in pairs if i != skip)
