"""Ops below their first version, written out in the target opset's ops where that is exact:
Gelu (20), HardSwish (14), Mish (18), Celu (12), Swish (24), ThresholdedRelu (10),
GreaterOrEqual/LessOrEqual (12), RMSNormalization (23), Trilu (14)."""

from __future__ import annotations

__all__ = [
    "celu_12_11",
    "compare_12_11",
    "gelu_20_19",
    "hard_swish_14_13",
    "mish_18_17",
    "rms_norm_23_22",
    "swish_24_23",
    "thresholded_relu_10_9",
    "trilu_14_13",
]

import math

from onnxforge.ir import DType, Graph, Op, TensorType, Value
from onnxforge.passes.convert._build import (
    dtype_of,
    emit,
    int64s,
    rank_of,
    reduce,
    replace_outputs,
    scalar,
    shape_of,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


class _Writer:
    """Emits the ops of one decomposition: values typed like X, constants of X's type."""

    def __init__(self, op: Op, graph: Graph, ctx: ConvertContext) -> None:
        self.op, self.graph, self.ctx = op, graph, ctx
        x = graph.inputs_of(op)[0]
        assert x is not None
        self.x = x
        dtype = dtype_of(ctx, x)
        if dtype is None:
            raise ctx.fail(op, "the input's element type is unknown")
        self.dtype = dtype
        self.type = TensorType(dtype, shape_of(ctx, x))
        self.base = op.name or op.op_type.lower()

    def __call__(
        self, op_type: str, *inputs: Value | None, typed: bool = True, **attrs: object
    ) -> Value:
        return emit(
            self.graph,
            op_type,
            list(inputs),
            base=self.base,
            type=self.type if typed else None,
            **attrs,
        )

    def const(self, value: float) -> Value:
        return scalar(self.graph, self.ctx, f"{self.base}_c", value, self.dtype)

    def done(self, out: Value) -> None:
        replace_outputs(self.graph, self.op, [out])


@adapter("Gelu", 20, 19)
def gelu_20_19(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """0.5 x (1 + erf(x / sqrt 2)); approximate='tanh': 0.5 x (1 + tanh(sqrt(2/pi) (x +
    0.044715 x^3)))."""
    w = _Writer(op, graph, ctx)
    x = w.x
    approximate = op.attr("approximate", b"none")
    approximate = approximate.decode() if isinstance(approximate, bytes) else approximate
    if approximate == "tanh":
        cube = w("Mul", w("Mul", x, x), x)
        inner = w("Add", x, w("Mul", w.const(0.044715), cube))
        t = w("Tanh", w("Mul", w.const(math.sqrt(2 / math.pi)), inner))
    else:
        t = w("Erf", w("Div", x, w.const(math.sqrt(2))))
    w.done(w("Mul", w("Mul", w.const(0.5), x), w("Add", w.const(1.0), t)))


@adapter("HardSwish", 14, 13)
def hard_swish_14_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """x * HardSigmoid(x, alpha=1/6, beta=0.5)."""
    w = _Writer(op, graph, ctx)
    w.done(w("Mul", w.x, w("HardSigmoid", w.x, alpha=1 / 6, beta=0.5)))


@adapter("Mish", 18, 17)
def mish_18_17(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """x * tanh(softplus(x))."""
    w = _Writer(op, graph, ctx)
    w.done(w("Mul", w.x, w("Tanh", w("Softplus", w.x))))


@adapter("Celu", 12, 11)
def celu_12_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """max(0, x) + min(0, alpha (exp(x / alpha) - 1))."""
    w = _Writer(op, graph, ctx)
    alpha = float(op.attr("alpha", 1.0))
    a = w.const(alpha)
    negative = w("Mul", a, w("Sub", w("Exp", w("Div", w.x, a)), w.const(1.0)))
    w.done(w("Add", w("Relu", w.x), w("Min", negative, w.const(0.0))))


@adapter("Swish", 24, 23)
def swish_24_23(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """x * sigmoid(alpha x)."""
    w = _Writer(op, graph, ctx)
    w.done(w("Mul", w.x, w("Sigmoid", w("Mul", w.const(float(op.attr("alpha", 1.0))), w.x))))


@adapter("ThresholdedRelu", 10, 9)
def thresholded_relu_10_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Where(x > alpha, x, 0)."""
    w = _Writer(op, graph, ctx)
    above = w("Greater", w.x, w.const(float(op.attr("alpha", 1.0))), typed=False)
    w.done(w("Where", above, w.x, w.const(0.0)))


@adapter(("GreaterOrEqual", "LessOrEqual"), 12, 11)
def compare_12_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """a >= b is Or(a > b, a == b) (false with NaN, as GreaterOrEqual is)."""
    a, b = graph.inputs_of(op)[:2]
    base = op.name or op.op_type.lower()
    strict = "Greater" if op.op_type == "GreaterOrEqual" else "Less"
    out = emit(
        graph,
        "Or",
        [emit(graph, strict, [a, b], base=base), emit(graph, "Equal", [a, b], base=base)],
        base=base,
    )
    replace_outputs(graph, op, [out])


@adapter("RMSNormalization", 23, 22)
def rms_norm_23_22(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """x / sqrt(mean(x^2 over [axis, ..., -1]) + epsilon), in stash_type's precision, times
    scale."""
    w = _Writer(op, graph, ctx)
    scale = graph.inputs_of(op)[1]
    axis = int(op.attr("axis", -1))
    if axis < 0:
        axes = list(range(axis, 0))
    else:
        rank = rank_of(ctx, w.x)
        if rank is None:
            raise ctx.fail(op, f"axis={axis} and X's rank is unknown")
        axes = list(range(axis, rank))
    compute = int(op.attr("stash_type", 1)) or int(DType.FLOAT)
    x = w.x
    if compute != w.dtype:
        x = w("Cast", x, typed=False, to=compute)
    squares = emit(graph, "Mul", [x, x], base=w.base)
    mean = reduce(graph, ctx, "ReduceMean", squares, axes, base=w.base)
    eps = scalar(graph, ctx, f"{w.base}_epsilon", float(op.attr("epsilon", 1e-5)), compute)
    rms = emit(graph, "Sqrt", [emit(graph, "Add", [mean, eps], base=w.base)], base=w.base)
    normalized = emit(graph, "Div", [x, rms], base=w.base)
    if compute != w.dtype:
        normalized = w("Cast", normalized, to=w.dtype)
    w.done(w("Mul", normalized, scale))


@adapter("Trilu", 14, 13)
def trilu_14_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Where(mask, x, 0) with mask = (col - row >= k) for upper, (col - row <= k) for lower,
    from Range over the last two dims (symbolic dims included)."""
    w = _Writer(op, graph, ctx)
    inputs = graph.inputs_of(op)
    k = inputs[1] if len(inputs) > 1 else None
    dims = emit(graph, "Shape", [w.x], base=w.base)
    zero, one = int64s(graph, ctx, f"{w.base}_zero", [0]), int64s(graph, ctx, f"{w.base}_one", [1])

    def count(index: int) -> Value:
        picked = emit(
            graph,
            "Gather",
            [dims, int64s(graph, ctx, f"{w.base}_i", [index])],
            base=w.base,
            axis=0,
        )
        n = emit(graph, "Squeeze", [picked, int64s(graph, ctx, f"{w.base}_ax", [0])], base=w.base)
        return emit(
            graph,
            "Range",
            [_squeeze0(graph, ctx, zero, w.base), n, _squeeze0(graph, ctx, one, w.base)],
            base=w.base,
        )

    rows = emit(
        graph, "Unsqueeze", [count(-2), int64s(graph, ctx, f"{w.base}_ax", [1])], base=w.base
    )
    cols = count(-1)
    diff = emit(graph, "Sub", [cols, rows], base=w.base)
    if k is not None:
        kk = emit(graph, "Reshape", [k, int64s(graph, ctx, f"{w.base}_scalar", [])], base=w.base)
        diff = emit(graph, "Sub", [diff, kk], base=w.base)
    zero_s = _squeeze0(graph, ctx, zero, w.base)
    upper = int(op.attr("upper", 1))
    if upper:
        mask = emit(graph, "Not", [emit(graph, "Less", [diff, zero_s], base=w.base)], base=w.base)
    else:
        mask = emit(
            graph, "Not", [emit(graph, "Greater", [diff, zero_s], base=w.base)], base=w.base
        )
    w.done(w("Where", mask, w.x, w.const(0)))


def _squeeze0(graph: Graph, ctx: ConvertContext, value: Value, base: str) -> Value:
    return emit(graph, "Squeeze", [value, int64s(graph, ctx, f"{base}_ax", [0])], base=base)
