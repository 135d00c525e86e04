"""Sub adapters for every schema step (1, 6, 7, 13, 14), both ways; Add, Mul and Div share
them (same versions, types and legacy broadcasting).

- 1 <-> 6: ``consumed_inputs`` is dropped going up; going down the integer types go.
- 6 -> 7: ``broadcast=1`` places B on A from ``axis`` (Caffe2's rule, as shape inference and
  the kernels apply it); B gets trailing 1s (an initializer is reshaped, anything else goes
  through a Reshape whose 0s copy B's dims, symbolic ones included), or becomes a scalar when
  the rule only accepts it as one element, so numpy broadcasting computes the same.
- 7 -> 6: Sub-6 writes what the legacy rule expresses as its text states it: equal shapes, a
  one-element B, or B equal to A's trailing dims (``broadcast=1``, ``axis``). A B dim of 1
  that would expand ("1-dim expansion doesn't work yet"), or an A that would broadcast, is
  refused naming the node; Add and Mul swap their operands when A fits onto B instead.
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
    why = _legacy_problem(sa, sb)
    if why is None:
        _set_broadcast(op, sa, sb)
        return
    if op.op_type in _COMMUTATIVE and _legacy_problem(sb, sa) is None:
        graph.set_input(op, 0, b)
        graph.set_input(op, 1, a)
        _set_broadcast(op, sb, sa)
        return
    raise ctx.fail(op, f"A {format_shape(sa)}, B {format_shape(sb)}: {why}")


def _set_broadcast(op: Op, sa: tuple[Dim, ...], sb: tuple[Dim, ...]) -> None:
    op.attrs["broadcast"] = 1
    if not all(d == 1 for d in sb):  # a one-element B fits anywhere
        op.attrs["axis"] = len(sa) - len(sb)


def _legacy_problem(sa: tuple[Dim, ...], sb: tuple[Dim, ...]) -> str | None:
    """Why numpy broadcasting of B onto A is not what Sub-6 ``broadcast=1`` writes, or None
    when it is: B one element, or B equal to A's trailing dims (provably)."""
    if len(sb) > len(sa):
        return "B has more dims than A: A would have to broadcast, and Sub-6 broadcasts only B"
    if all(d == 1 for d in sb):
        return None
    offset = len(sa) - len(sb)
    for j, y in enumerate(sb):
        x = sa[offset + j]
        if same_dim(x, y):
            continue
        if y == 1:
            return (
                f"B's dim {j} is 1 where A has {'?' if x is None else x}; Sub-6 does not "
                'expand size-1 dims ("1-dim expansion doesn\'t work yet")'
            )
        if x == 1:
            return f"A's dim {offset + j} is 1 where B has {y}: A would have to broadcast"
        return f"dim {offset + j} of A ({x}) and dim {j} of B ({y}) are not provably equal"
    return None
