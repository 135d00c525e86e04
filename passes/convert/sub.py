"""Sub adapters for every schema step (1, 6, 7, 13, 14), both ways; Add, Mul and Div share
them (same versions, types and legacy broadcasting).

- 1 <-> 6: ``consumed_inputs`` is dropped going up; going down the integer types go.
- 6 -> 7: ``broadcast=1`` places B on A from ``axis`` (Caffe2's rule, as shape inference and
  the kernels apply it); B gets trailing 1s (an initializer is reshaped, anything else goes
  through a Reshape whose 0s copy B's dims, symbolic ones included), or becomes a scalar when
  the rule only accepts it as one element, so numpy broadcasting computes the same.
- 7 -> 6: Sub-6 writes what the legacy rule expresses as its text states it: equal shapes, a
  one-element B, or B equal to a contiguous run of A's dims from ``axis`` (``broadcast=1``).
  B, aligned right as numpy aligns it, may have size-1 dims at its ends that numpy expands:
  those are stripped (their leading and trailing 1s all go: a constant B becomes a reshaped
  initializer, anything else goes through a Squeeze, exact on symbolic dims) and ``axis``
  places the rest. An inner size-1 dim of B that would expand ("1-dim expansion doesn't work
  yet"), or an A that would broadcast, is refused naming the node; Add and Mul swap their
  operands when A fits onto B instead.
- 12 <-> 13 and 13 <-> 14: bfloat16 (13) and int8/uint8/int16/uint16 (14) go when going down.
"""

from __future__ import annotations

__all__ = [
    "ARITH",
    "arith_5_6",
    "arith_6_5",
    "arith_6_7",
    "arith_7_6",
    "arith_13_12",
    "arith_14_13",
]

import numpy as np

from onnxforge.errors import ShapeError
from onnxforge.ir import Dim, Graph, Op, TensorType
from onnxforge.passes.convert._kinds import (
    discard_if_unused,
    remove_attribute,
    type_restriction,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter
from onnxforge.shape_infer.broadcast import broadcast_shape, format_shape
from onnxforge.shape_infer.symbolic import same_dim

ARITH = ("Add", "Sub", "Mul", "Div")
_COMMUTATIVE = frozenset({"Add", "Mul"})

arith_5_6 = remove_attribute(ARITH, 5, 6, attr="consumed_inputs")
arith_6_5 = type_restriction(ARITH, 6, 5, reverse=False)  # Sub-1: float types only
arith_13_12 = type_restriction(ARITH, 13, 12)  # no bfloat16; 12 -> 13 accepted as is
arith_14_13 = type_restriction(ARITH, 14, 13)  # no int8/uint8/int16/uint16; 13 -> 14 as is


@adapter(ARITH, 6, 7)
def arith_6_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Legacy ``broadcast``/``axis`` -> numpy broadcasting with B reshaped to fit."""
    broadcast = op.attrs.pop("broadcast", 0)
    axis = op.attrs.pop("axis", None)
    if not broadcast:
        return  # equal shapes, which numpy broadcasting leaves alone
    a, b = graph.inputs_of(op)[:2]
    ta, tb = ctx.type(a), ctx.type(b)
    if tb is None or tb.shape is None:
        raise ctx.fail(op, "broadcast=1 and the rank of B is unknown")
    sb = tb.shape
    if not sb:
        return  # a scalar B broadcasts the same way under both rules
    if ta is None or ta.shape is None:
        raise ctx.fail(op, "broadcast=1 and the rank of A is unknown")
    sa = ta.shape
    try:
        broadcast_shape(sa, sb, rule="legacy", axis=axis)
    except ShapeError as e:
        raise ctx.fail(op, str(e)) from None
    start = len(sa) - len(sb) if axis is None or axis == -1 else axis
    fits = len(sb) <= len(sa) and 0 <= start <= len(sa) - len(sb)
    # Not fitting, B was taken as one element (all its dims are 1): it becomes a scalar.
    target: tuple[Dim, ...] = tuple(sb) + (1,) * (len(sa) - start - len(sb)) if fits else ()
    if target == tuple(sb):
        return
    _reshape_b(op, graph, ctx, tb, target)


def _reshape_b(
    op: Op, graph: Graph, ctx: ConvertContext, tb: TensorType, target: tuple[Dim, ...]
) -> None:
    """Input 1 of ``op`` gets shape ``target``: B's own dims (kept) then 1s, or ()."""
    b = graph.inputs_of(op)[1]
    assert b is not None
    data = ctx.const(graph, b)
    if data is not None:
        shape = tuple(data.shape) + (1,) * (len(target) - data.ndim) if target else ()
        new = ctx.add_constant(graph, f"{b.name}_legacy", np.asarray(data).reshape(shape))
        graph.set_input(op, 1, new)
        discard_if_unused(graph, b)
        return
    spec = np.array([0] * len(tb.shape or ()) + [1] * (len(target) - len(tb.shape or ())))
    if not target:
        spec = np.zeros((0,), dtype=np.int64)
    shape_value = ctx.add_constant(graph, f"{b.name}_legacy_shape", spec.astype(np.int64))
    reshape = graph.add_op("Reshape", [b, shape_value], name=graph.fresh_name(f"{b.name}_legacy"))
    (out,) = graph.outputs_of(reshape)
    assert out is not None
    out.type = TensorType(tb.dtype, target)
    graph.set_input(op, 1, out)


@adapter(ARITH, 7, 6)
def arith_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Numpy broadcasting -> what Sub-6's legacy rule expresses, or an error naming why."""
    a, b = graph.inputs_of(op)[:2]
    ta, tb = ctx.type(a), ctx.type(b)
    if ta is None or ta.shape is None or tb is None or tb.shape is None:
        raise ctx.fail(op, "the rank of A or B is unknown; Sub-6 broadcasts by rank")
    sa, sb = tuple(ta.shape), tuple(tb.shape)
    if len(sa) == len(sb) and all(same_dim(x, y) for x, y in zip(sa, sb, strict=True)):
        return  # equal shapes: no broadcast attribute
    plan = _legacy_plan(sa, sb)
    if isinstance(plan, str) and op.op_type in _COMMUTATIVE:
        swapped = _legacy_plan(sb, sa)
        if not isinstance(swapped, str):
            graph.set_input(op, 0, b)
            graph.set_input(op, 1, a)
            plan, sa, sb, tb = swapped, sb, sa, ta
    if isinstance(plan, str):
        raise ctx.fail(op, f"A {format_shape(sa)}, B {format_shape(sb)}: {plan}")
    op.attrs["broadcast"] = 1
    if all(d == 1 for d in sb):
        return  # a one-element B fits anywhere: no axis
    start, stop = plan
    op.attrs["axis"] = len(sa) - len(sb) + start
    if (start, stop) != (0, len(sb)):
        _strip_b(op, graph, ctx, tb, (start, stop))


def _legacy_plan(sa: tuple[Dim, ...], sb: tuple[Dim, ...]) -> tuple[int, int] | str:
    """How Sub-6 ``broadcast=1`` writes numpy broadcasting of B onto A: the run
    ``B[start:stop]`` that goes on A from axis ``rank(A) - rank(B) + start`` (the rest of B
    being size-1 dims at its ends), or why it cannot (A would broadcast, or a size-1 dim inside
    B would expand). All of B when it fits as it is, or when it is one element."""
    if len(sb) > len(sa):
        return "B has more dims than A: A would have to broadcast, and Sub-6 broadcasts only B"
    offset = len(sa) - len(sb)
    for j, y in enumerate(sb):
        x = sa[offset + j]
        if same_dim(x, y) or y == 1:
            continue
        if x == 1 and y is not None:
            return f"A's dim {offset + j} is 1 where B has {y}: A would have to broadcast"
        return (
            f"dim {offset + j} of A ({_dim(x)}) and dim {j} of B ({_dim(y)}) are not provably "
            "equal"
        )
    # Every dim of B equals A's or is 1; the 1s against A dims not provably 1 would expand.
    expand = [j for j, y in enumerate(sb) if y == 1 and not same_dim(sa[offset + j], 1)]
    if not expand or all(d == 1 for d in sb):
        return 0, len(sb)
    start = next(j for j, y in enumerate(sb) if y != 1)
    stop = max(j for j, y in enumerate(sb) if y != 1) + 1
    for j in expand:
        if start <= j < stop:
            x = sa[offset + j]
            return (
                f"B's dim {j} is 1 where A has {_dim(x)}; Sub-6 does not "
                'expand size-1 dims inside B ("1-dim expansion doesn\'t work yet")'
            )
    return start, stop


def _dim(d: Dim) -> str:
    return "?" if d is None else str(d)


def _strip_b(
    op: Op, graph: Graph, ctx: ConvertContext, tb: TensorType, span: tuple[int, int]
) -> None:
    """Input 1 of ``op`` keeps only its dims ``span`` (start, stop); the others are all 1s. A
    constant becomes a new initializer (others reading the old one keep it), anything else
    goes through a Squeeze (Squeeze-1: ``axes`` attribute), which keeps symbolic dims."""
    start, stop = span
    b = graph.inputs_of(op)[1]
    assert b is not None and tb.shape is not None
    shape = tuple(tb.shape)
    data = ctx.const(graph, b)
    if data is not None:
        array = np.asarray(data)
        new = ctx.add_constant(graph, f"{b.name}_legacy", array.reshape(array.shape[start:stop]))
        graph.set_input(op, 1, new)
        discard_if_unused(graph, b)
        return
    axes = [j for j in range(len(shape)) if not start <= j < stop]
    squeeze = graph.add_op("Squeeze", [b], name=graph.fresh_name(f"{b.name}_legacy"), axes=axes)
    (out,) = graph.outputs_of(squeeze)
    assert out is not None
    out.type = TensorType(tb.dtype, shape[start:stop])
    graph.set_input(op, 1, out)
