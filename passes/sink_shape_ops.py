"""sink-shape-ops: a Reshape or Transpose moves below the elementwise ops after it when
there it meets the Reshape or Transpose that undoes it."""

from __future__ import annotations

__all__ = ["ELEMENTWISE", "SinkShapeOpsPass"]

import logging
from collections.abc import Iterator
from typing import ClassVar

from onnxforge.ir import Graph, Model, Op, Shape, TensorType, Value
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._rewrite import (
    STANDARD_DOMAINS,
    bypass,
    graphs_with_opset,
    inferred_types,
    is_graph_output,
    refresh_captures,
    reshape_target,
    set_input,
    shape_of,
    since,
)
from onnxforge.passes._worklist import Near, neighbours, visit
from onnxforge.shape_infer.symbolic import same_dim

logger = logging.getLogger(__name__)

ELEMENTWISE = frozenset(
    {
        # unary
        "Abs", "Acos", "Acosh", "Asin", "Asinh", "Atan", "Atanh", "BitwiseNot", "Cast",
        "Ceil", "Celu", "Cos", "Cosh", "Elu", "Erf", "Exp", "Floor", "Gelu", "HardSigmoid",
        "HardSwish", "Identity", "IsInf", "IsNaN", "LeakyRelu", "Log", "Mish", "Neg", "Not",
        "Reciprocal", "Relu", "Round", "Selu", "Sigmoid", "Sign", "Sin", "Sinh", "Softplus",
        "Softsign", "Sqrt", "Tan", "Tanh", "ThresholdedRelu",
        # broadcasting (min and max of Clip are scalars)
        "Add", "And", "BitShift", "BitwiseAnd", "BitwiseOr", "BitwiseXor", "Clip", "Div",
        "Equal", "Greater", "GreaterOrEqual", "Less", "LessOrEqual", "Max", "Mean", "Min",
        "Mod", "Mul", "Or", "Pow", "PRelu", "Sub", "Sum", "Where", "Xor",
    }
)  # fmt: skip
"""Ops computing each output element from the elements at the same place of their inputs."""

RESHAPES = frozenset({"Reshape", "Flatten", "Squeeze", "Unsqueeze"})
MAX_REGION = 64
"""Elementwise ops one move takes at most (a GELU or a SiLU is 2 to 8)."""


@register_pass
class SinkShapeOpsPass(Pass):
    """Let the elementwise ops after ``r = R(x)`` read x, where R is a Reshape, Flatten,
    Squeeze, Unsqueeze or a Transpose, when R then cancels with the ops after them.

    The region is the elementwise ops (``ELEMENTWISE``) reading r or values of the region,
    and otherwise only values of one element whose rank is at most x's and r's (a constant
    0.5, an epsilon): those broadcast alike to either shape, so every value of the region
    has r's shape, and on x it holds the same elements with x's shape. Elementwise ops
    commute with reshapes and transposes, so this is exact. No region value is a graph
    output or read by a subgraph, and every reader outside the region is

    1. for a reshaping R: a Reshape reading the value as its data whose target means the
       same for x's shape (allowzero on, or a constant whose 0s copy dims that x and r
       provably share). A Reshape whose output then has x's shape is removed.
    2. for a Transpose R with perm p: a Transpose with perm q, which becomes
       ``[p[i] for i in q]`` and is removed when that is the identity.

    Only when something is removed: R (the region read every use of r) or one of those
    readers. A removed reader's output that is a graph output keeps its name. Region values
    lose their declared types (the shapes changed). Nothing before opset 7.
    """

    name: ClassVar[str] = "sink-shape-ops"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    summary: ClassVar[str] = (
        "Move a Reshape or Transpose past elementwise ops to cancel it with a later one."
    )

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        moved: list[Value] = []
        with inferred_types(model):
            for graph, opset in graphs_with_opset(model):
                if opset < 7:
                    continue
                for op in visit(graph, self.focus, near=_near_region()):
                    if op._graph is not graph or op.domain not in STANDARD_DOMAINS:
                        continue
                    if op.op_type not in RESHAPES and op.op_type != "Transpose":
                        continue
                    label = node_label(op)
                    values = _sink(graph, op, opset, result)
                    if values:
                        result.note(f"{op.op_type.lower()}s_sunk", label)
                        moved.extend(values)
        for value in moved:
            if value.graph is not None and not is_graph_output(value.graph, value):
                value.type = None  # a declared type has r's shape; inference gives the new one
        refresh_captures(model)
        result.modified = bool(result.stats)
        return result


def _sink(graph: Graph, op: Op, opset: int, result: PassResult) -> list[Value] | None:
    """Move the region after ``op``; the region's values, or None when nothing goes."""
    x = op._inputs[0] if op._inputs else None
    r = op._outputs[0]
    x_shape, r_shape = shape_of(x), shape_of(r)
    if x is None or r is None or x_shape is None or r_shape is None:
        return None
    region, values = _region(graph, r, min(len(x_shape), len(r_shape)))
    if not region:
        return None
    perm = _perm(op, len(x_shape)) if op.op_type == "Transpose" else None
    readers: list[tuple[Op, Value, list[int] | None, bool]] = []
    for value in values:
        if is_graph_output(graph, value):
            return None
        keys_of: dict[Op, list[object]] = {}
        for reader, key in graph.uses(value):
            keys_of.setdefault(reader, []).append(key)
        for reader, keys in keys_of.items():
            if reader in region:
                continue
            if keys != [0]:
                return None  # not the data input, or a subgraph's capture
            undo = _undo(reader, perm, x_shape, r_shape, opset)
            if undo is None:
                return None
            readers.append((reader, value, *undo))
    dead = not is_graph_output(graph, r) and all(o in region for o, _ in graph.uses(r))
    if not dead and not any(removed for *_, removed in readers):
        return None
    # the region reads x
    for region_op in region:
        for port, source in enumerate(region_op._inputs):
            if source is r:
                set_input(graph, region_op, port, x)
    for value in values:
        t = value.type
        value.type = TensorType(t.dtype, x_shape) if isinstance(t, TensorType) else None
        if value._producer is not None:
            graph.touch(value._producer)  # its declared type changed
    for reader, value, new_perm, removed in readers:
        if new_perm is not None:
            reader.attrs["perm"] = new_perm
            graph.touch(reader)
        if removed and bypass(graph, reader, value):
            result.note(f"{reader.op_type.lower()}s_removed", node_label(reader))
    if dead:
        graph.remove_op(op)
        result.note(f"{op.op_type.lower()}s_removed", node_label(op))
    return values


def _near_region() -> Near:
    """A touch anywhere in a region, or at a reader after it, may let the Reshape or
    Transpose before it sink: near an op are the ones found walking up from it through
    elementwise ops (at most ``MAX_REGION`` deep; an op is walked again in a run only
    from nearer)."""
    walked: dict[Op, int] = {}  # the least depth each op was walked from

    def near(graph: Graph, op: Op) -> Iterator[Op]:
        yield from neighbours(graph, op)
        todo = [(op, 0)]
        while todo:
            current, depth = todo.pop()
            if depth > MAX_REGION or walked.get(current, MAX_REGION + 1) <= depth:
                continue
            walked[current] = depth
            for value in current._inputs:
                producer = value._producer if value is not None else None
                if producer is None or producer._graph is not graph:
                    continue
                if producer.domain not in STANDARD_DOMAINS:
                    continue
                if producer.op_type in RESHAPES or producer.op_type == "Transpose":
                    yield producer
                elif producer.op_type in ELEMENTWISE:
                    todo.append((producer, depth + 1))

    return near


def _region(graph: Graph, r: Value, rank: int) -> tuple[dict[Op, None], list[Value]]:
    """The elementwise ops computed from r (and one-element values of rank <= ``rank``),
    and the values they compute."""
    region: dict[Op, None] = {}
    inside: set[Value] = {r}
    values: list[Value] = []
    grown = True
    while grown and len(region) < MAX_REGION:
        grown = False
        for value in [r, *values]:
            for op, _ in graph.consumers(value):
                if op in region or not _joins(op, inside, rank):
                    continue
                region[op] = None
                out = op._outputs[0]
                assert out is not None
                inside.add(out)
                values.append(out)
                grown = True
    return region, values


def _joins(op: Op, inside: set[Value], rank: int) -> bool:
    if op.op_type not in ELEMENTWISE or op.domain not in STANDARD_DOMAINS:
        return False
    if len(op._outputs) != 1 or op._outputs[0] is None:
        return False
    for value in op._inputs:
        if value is None or value in inside:
            continue
        shape = shape_of(value)
        if shape is None or len(shape) > rank or any(d != 1 for d in shape):
            return False
    return True


def _perm(op: Op, rank: int) -> list[int]:
    perm = op.attr("perm")
    return list(perm) if perm else list(range(rank))[::-1]


def _undo(
    reader: Op, perm: list[int] | None, x_shape: Shape, r_shape: Shape, opset: int
) -> tuple[list[int] | None, bool] | None:
    """How ``reader`` reads a region value once it has x's shape: (its new perm, whether it
    then does nothing); None when it cannot."""
    if reader.domain not in STANDARD_DOMAINS:
        return None
    if perm is not None:  # Case 2
        if reader.op_type != "Transpose":
            return None
        q = _perm(reader, len(perm))
        if sorted(q) != list(range(len(perm))):
            return None
        composed = [perm[i] for i in q]
        return composed, composed == list(range(len(perm)))
    if reader.op_type != "Reshape":  # Case 1
        return None
    version = since(reader, opset) or 0
    if not (version >= 14 and reader.attr("allowzero", 0)):
        target = reshape_target(reader, version)
        if target is None:
            return None
        rank = min(len(x_shape), len(r_shape))
        for i, t in enumerate(target.reshape(-1).tolist()):
            if t == 0 and (i >= rank or not same_dim(x_shape[i], r_shape[i])):
                return None
    out = shape_of(reader._outputs[0])
    same = (
        out is not None
        and len(out) == len(x_shape)
        and all(same_dim(a, b) for a, b in zip(out, x_shape, strict=True))
    )
    return None, same
