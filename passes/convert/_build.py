"""What adapters share: constant inputs read and detached, int64 initializers, ops emitted in
the form the step's target opset expects, an op replaced by new ones under the same output
names, attributes dropped where they hold the older behaviour."""

from __future__ import annotations

__all__ = [
    "add_input",
    "all_ones",
    "axes_input_to_attribute",
    "axes_attribute_to_input",
    "const_ints",
    "drop_attributes",
    "drop_if_unused",
    "dtype_of",
    "emit",
    "finish",
    "int64s",
    "known",
    "normalize_axes",
    "rank_of",
    "remove_input",
    "replace_outputs",
    "reroute_output",
    "scalar",
    "shape_of",
    "spread",
    "take_const",
    "unsqueeze",
    "squeeze",
]

from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np

from onnxforge.ir import DType, Graph, Op, Shape, TensorType, Value
from onnxforge.passes.convert._classify import structural_problem
from onnxforge.passes.convert._registry import ConvertContext, adapter


# -- reading -------------------------------------------------------------------------------
def shape_of(ctx: ConvertContext, value: Value | None) -> Shape | None:
    t = ctx.type(value)
    return t.shape if isinstance(t, TensorType) else None


# Ops whose output has the rank of their (broadcast) inputs: a value without an inferred type
# (one an adapter added, or one inference left open) takes its rank from them.
_RANK_KEEPING = frozenset(
    {
        "Abs", "Add", "And", "Cast", "CastLike", "Ceil", "Clip", "Cos", "Div", "Elu", "Equal",
        "Erf", "Exp", "Floor", "Greater", "GreaterOrEqual", "HardSigmoid", "HardSwish",
        "Identity", "LeakyRelu", "Less", "LessOrEqual", "Log", "LogSoftmax", "Max", "Mean",
        "Min", "Mish", "Mod", "Mul", "Neg", "Not", "Or", "Pow", "PRelu", "Reciprocal", "Relu",
        "Round", "Selu", "Sigmoid", "Sign", "Sin", "Softmax", "Softplus", "Softsign", "Sqrt",
        "Sub", "Sum", "Tanh", "Where", "Xor",
    }
)  # fmt: skip


def rank_of(ctx: ConvertContext, value: Value | None, _depth: int = 0) -> int | None:
    """The value's rank: inferred, or (for values without a type) the largest rank of the
    inputs of the elementwise op that makes it."""
    shape = shape_of(ctx, value)
    if shape is not None:
        return len(shape)
    graph = value._graph if value is not None else None
    producer = graph.producer(value) if graph is not None and value is not None else None
    if producer is None or producer.op_type not in _RANK_KEEPING or _depth > 32:
        return None
    ranks = [rank_of(ctx, v, _depth + 1) for v in graph.inputs_of(producer) if v is not None]  # type: ignore[union-attr]
    if producer.op_type == "Clip":
        ranks = ranks[:1]
    if not ranks or any(r is None for r in ranks):
        return None
    return max(r for r in ranks if r is not None)


def dtype_of(ctx: ConvertContext, value: Value | None) -> int | None:
    t = ctx.type(value)
    return t.dtype if isinstance(t, TensorType) else None


def known(graph: Graph, ctx: ConvertContext, value: Value | None) -> np.ndarray | None:
    """The value's data when known without running the model: a constant, an inferred
    integer vector, or an empty tensor (a static shape with a 0 dim)."""
    array = ctx.const(graph, value)
    if array is not None:
        return array
    t = ctx.type(value)
    if t is not None and t.shape is not None and 0 in t.shape:
        np_dtype = DType(t.dtype).numpy if t.dtype in DType._value2member_map_ else None
        if np_dtype is not None and all(isinstance(d, int) for d in t.shape):
            return np.zeros(t.shape, dtype=np_dtype)
    return None


def const_ints(graph: Graph, ctx: ConvertContext, value: Value | None) -> list[int] | None:
    """An integer input known without running the model, as a flat list."""
    array = known(graph, ctx, value)
    if array is None or array.dtype.kind not in "iu":
        return None
    return [int(v) for v in np.asarray(array).reshape(-1)]


def normalize_axes(axes: Iterable[int], rank: int | None) -> list[int] | None:
    """Axes made non-negative; None when one is negative and the rank is unknown."""
    out = []
    for axis in axes:
        if axis < 0 and rank is None:
            return None
        out.append(axis + rank if axis < 0 and rank is not None else axis)
    return out


# -- building ------------------------------------------------------------------------------
def int64s(graph: Graph, ctx: ConvertContext, base: str, values: Sequence[int]) -> Value:
    """A new 1-D int64 initializer."""
    return ctx.add_constant(graph, base, np.array(list(values), dtype=np.int64))


def scalar(graph: Graph, ctx: ConvertContext, base: str, value: float, dtype: int) -> Value:
    """A new 0-D initializer of element type ``dtype`` (a numpy-readable one)."""
    np_dtype = DType(dtype).numpy
    if np_dtype is None:
        raise ValueError(f"no numpy dtype for element type {dtype}")
    return ctx.add_constant(graph, base, np.array(value, dtype=np_dtype))


def emit(
    graph: Graph,
    op_type: str,
    inputs: Sequence[Value | None],
    *,
    base: str,
    n_outputs: int = 1,
    type: TensorType | None = None,
    **attrs: Any,
) -> Value:
    """Add an op and return its first output (typed with ``type`` when given)."""
    names = [graph.fresh_name(f"{base}_{op_type.lower()}")]
    for i in range(1, n_outputs):
        names.append(graph.fresh_name(f"{base}_{op_type.lower()}{i}"))
    op = graph.add_op(op_type, inputs, n_outputs=n_outputs, output_names=names, **attrs)
    out = graph.outputs_of(op)[0]
    assert out is not None
    out.type = type
    return out


def unsqueeze(
    graph: Graph, ctx: ConvertContext, x: Value, axes: Sequence[int], *, base: str
) -> Value:
    """Unsqueeze in the form of the step's target opset (axes input from 13)."""
    if ctx.to_opset >= 13:
        return emit(graph, "Unsqueeze", [x, int64s(graph, ctx, f"{base}_axes", axes)], base=base)
    return emit(graph, "Unsqueeze", [x], base=base, axes=list(axes))


def squeeze(
    graph: Graph, ctx: ConvertContext, x: Value, axes: Sequence[int], *, base: str
) -> Value:
    """Squeeze in the form of the step's target opset (axes input from 13)."""
    if ctx.to_opset >= 13:
        return emit(graph, "Squeeze", [x, int64s(graph, ctx, f"{base}_axes", axes)], base=base)
    return emit(graph, "Squeeze", [x], base=base, axes=list(axes))


def reduce(
    graph: Graph,
    ctx: ConvertContext,
    op_type: str,
    x: Value,
    axes: Sequence[int],
    *,
    base: str,
    keepdims: int = 1,
) -> Value:
    """A Reduce* op in the form of the step's target opset (axes input from 18, ReduceSum 13)."""
    as_input = ctx.to_opset >= (13 if op_type == "ReduceSum" else 18)
    if as_input:
        axes_value = int64s(graph, ctx, f"{base}_axes", axes)
        return emit(graph, op_type, [x, axes_value], base=base, keepdims=keepdims)
    return emit(graph, op_type, [x], base=base, axes=list(axes), keepdims=keepdims)


def spread(
    graph: Graph,
    ctx: ConvertContext,
    value: Value,
    axes: Sequence[int],
    rank: int,
    *,
    fill: Callable[[int], Value],
    offset: int = 0,
    base: str,
) -> list[Value]:
    """One 1-element piece per axis 0..rank-1: element ``offset + j`` of ``value`` (a 1-D
    tensor computed at run time) at ``axes[j]``, ``fill(axis)`` elsewhere; Concat them."""
    pieces = []
    for axis in range(rank):
        if axis in axes:
            j = offset + list(axes).index(axis)
            start, end = (
                int64s(graph, ctx, f"{base}_s", [j]),
                int64s(graph, ctx, f"{base}_e", [j + 1]),
            )
            pieces.append(emit(graph, "Slice", [value, start, end], base=base))
        else:
            pieces.append(fill(axis))
    return pieces


# -- editing -------------------------------------------------------------------------------
def add_input(graph: Graph, op: Op, port: int, value: Value | None) -> None:
    """Set input ``port``, appending omitted optionals before it as needed."""
    while len(op._inputs) <= port:
        op._inputs.append(None)
    graph.set_input(op, port, value)


def remove_input(graph: Graph, op: Op, port: int) -> None:
    """Omit input ``port`` (trailing omitted inputs are dropped) and clean up what fed it."""
    if port >= len(op._inputs):
        return
    old = op._inputs[port]
    graph.set_input(op, port, None)
    while op._inputs and op._inputs[-1] is None:
        op._inputs.pop()
    if old is not None:
        drop_if_unused(graph, old)


def take_const(graph: Graph, ctx: ConvertContext, op: Op, port: int) -> np.ndarray | None:
    """The constant data of input ``port``, which is then removed from the op; None (and the
    op untouched) when the input is absent or not constant."""
    inputs = graph.inputs_of(op)
    value = inputs[port] if port < len(inputs) else None
    array = known(graph, ctx, value)
    if array is None:
        return None
    array = np.array(array)  # a copy: the initializer may go away
    remove_input(graph, op, port)
    return array


def drop_if_unused(graph: Graph, value: Value) -> None:
    """Remove an initializer or Constant nothing reads any more."""
    if graph.is_used(value) or value._graph is not graph or value in graph.inputs:
        return
    producer = graph.producer(value)
    if producer is not None:
        if producer.op_type == "Constant":
            graph.remove_op(producer)
    elif value in graph.initializers:
        graph.remove_initializer(value)


def replace_outputs(graph: Graph, op: Op, outputs: Sequence[Value | None]) -> None:
    """Remove ``op``; each of its outputs is taken over by the value at the same position,
    which gets the old name (graph outputs keep their names) and, when it has none, the
    old type."""
    olds = graph.outputs_of(op)
    for old, new in zip(olds, outputs, strict=False):
        if old is not None and new is not None:
            graph.replace_all_uses(old, new)
    renames = [
        (new, old.name, old.type)
        for old, new in zip(olds, outputs, strict=False)
        if old is not None and new is not None
    ]
    graph.remove_op(op)
    for new, name, old_type in renames:
        new.name = name
        if new.type is None:
            new.type = old_type


def reroute_output(
    graph: Graph,
    op: Op,
    port: int,
    after: Callable[[Value], Value],
    *,
    type: TensorType | None = None,
) -> None:
    """Output ``port`` of ``op`` becomes a fresh value (typed ``type``); ``after(fresh)``
    builds what computes the old output from it, and that result takes the old output's
    name, uses and type."""
    old = graph.outputs_of(op)[port]
    assert old is not None
    fresh = graph.add_value(graph.fresh_name(f"{old.name}_inner"), type)
    graph.set_output(op, port, fresh)
    result = after(fresh)
    graph.replace_all_uses(old, result)
    graph.remove_value(old)
    result.name, result.type = old.name, old.type


def finish(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Drop trailing omitted inputs; raise when the adapted node is still not valid at the
    target opset."""
    while op._inputs and op._inputs[-1] is None:
        op._inputs.pop()
    problem = structural_problem(op, graph, ctx)
    if problem is not None:
        raise ctx.fail(op, problem)


# -- generic kinds -------------------------------------------------------------------------
AttrTest = Callable[[Any], bool]


def _equal_to(value: Any) -> AttrTest:
    def test(v: Any) -> bool:
        if isinstance(v, bytes):
            v = v.decode()
        if isinstance(v, (list, tuple)):
            return list(v) == list(value) if isinstance(value, (list, tuple)) else False
        return bool(v == value)

    return test


def all_ones(v: Any) -> bool:
    return all(int(x) == 1 for x in v)


def drop_attributes(
    op_types: str | Iterable[str],
    from_opset: int,
    to_opset: int,
    *,
    name: str,
    **keep: Any,
) -> None:
    """Register an adapter that removes attributes the target schema lacks when their value
    is the one meaning the target's behaviour (``keep[attr]``: a value or a predicate),
    refuses the node otherwise, then checks the node against the target schema."""

    tests = {k: (v if callable(v) else _equal_to(v)) for k, v in keep.items()}

    def drop(op: Op, graph: Graph, ctx: ConvertContext) -> None:
        for attr, test in tests.items():
            value = op.attr(attr)
            if value is None:
                continue
            if not test(value):
                shown = value.decode() if isinstance(value, bytes) else value
                raise ctx.fail(op, f"{attr}={shown!r} has no equivalent at opset {ctx.to_opset}")
            del op.attrs[attr]
        finish(op, graph, ctx)

    drop.__name__ = drop.__qualname__ = name
    adapter(op_types, from_opset, to_opset)(drop)


def axes_attribute_to_input(op: Op, graph: Graph, ctx: ConvertContext, *, port: int = 1) -> None:
    """``axes`` attribute -> int64 initializer input at ``port`` (left out when unset)."""
    axes = op.attrs.pop("axes", None)
    if axes is not None:
        add_input(graph, op, port, int64s(graph, ctx, f"{op.name or op.op_type}_axes", axes))


def axes_input_to_attribute(
    op: Op, graph: Graph, ctx: ConvertContext, *, port: int = 1
) -> list[int] | None:
    """int64 ``axes`` input at ``port`` -> attribute; returns the axes (None when absent).
    A non-constant input is an error naming the node."""
    inputs = graph.inputs_of(op)
    if port >= len(inputs) or inputs[port] is None:
        return None
    array = take_const(graph, ctx, op, port)
    if array is None:
        raise ctx.fail(op, f"input {port} (axes) is not a constant; opset {ctx.to_opset} needs it")
    axes = [int(a) for a in array.reshape(-1)]
    op.attrs["axes"] = axes
    return axes
