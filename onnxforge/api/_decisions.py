"""Decisions: ops that turn float values into picks (a comparison, an ArgMax, TopK's indices,
NonMaxSuppression's boxes, a Cast to an integer). A half type moves a float value by its
rounding; where the original's value is that near the boundary of a pick, the pick flips,
and what follows it (a mask, a class id, the order of TopK's rows, the number of detections)
jumps by a whole step however small the error that flipped it.

A precision conversion is judged on them as the user reads them: the values a decision is
made on are compared like outputs (within the budget of their own range), and the rest of the
model is compared with the original's picks put in place of the converted model's own
(``pin``), so a near tie that flips is counted as a flipped pick, not as an error of
everything after it. sudachi's ArgMax moved 2 of 1,280 ids under --weights alone; a PaddleDet
export's NonZero counted one box more, a shape no error measure can compare.
"""

from __future__ import annotations

__all__ = [
    "Decisions",
    "expose",
    "find_decisions",
    "flipped",
    "pin",
    "pin_exposing",
    "pinnable",
    "tally_flips",
]

import contextlib
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from onnxforge.errors import OnnxForgeError
from onnxforge.ir import DType, Graph, Model, Op, Tensor, TensorType, Value

_FLOATS = frozenset({DType.FLOAT, DType.FLOAT16, DType.BFLOAT16, DType.DOUBLE})
_COMPARISONS = frozenset({"Greater", "Less", "GreaterOrEqual", "LessOrEqual", "Equal"})
_PICKS = {"ArgMax": 0, "ArgMin": 0, "TopK": 1, "NonMaxSuppression": 0}
"""Ops picking positions from float values: the output that holds the picks."""


@dataclass
class Decisions:
    """A model's decisions: ``picks``, the value each one makes (a bool mask, indices), by
    name -> what makes it (``Op.describe``); ``judged``, the float values they are made on,
    name -> the decision reading it (for messages)."""

    picks: dict[str, str] = field(default_factory=dict)
    judged: dict[str, str] = field(default_factory=dict)

    def __bool__(self) -> bool:
        return bool(self.picks)


def _float(value: Value | None) -> bool:
    t = value.type if value is not None else None
    return isinstance(t, TensorType) and t.dtype in _FLOATS


def _data(value: Value | None) -> bool:
    """Computed (not a constant): a constant is the same in both models."""
    return value is not None and value.const is None and not _constant_op(value)


def _constant_op(value: Value) -> bool:
    graph = value.graph
    op = graph.producer(value) if graph is not None else None
    return op is not None and op.op_type == "Constant"


def _decision(op: Op) -> tuple[Value, list[Value]] | None:
    """The value ``op`` decides and the computed float values it decides on (None when it is
    not a decision on float values)."""
    if op.domain not in ("", "ai.onnx"):
        return None
    reads = [v for v in op._inputs if v is not None]
    if op.op_type == "Cast":
        to = op.attr("to")
        if to in _FLOATS or to == DType.STRING or not reads or not _float(reads[0]):
            return None
        port = 0
    elif op.op_type in _COMPARISONS:
        port = 0
    else:
        port = _PICKS.get(op.op_type, -1)
        reads = reads[:2] if op.op_type == "NonMaxSuppression" else reads[:1]
    out = op._outputs[port] if 0 <= port < len(op._outputs) else None
    decided_on = [v for v in reads if _data(v) and _float(v)]
    return (out, decided_on) if out is not None and decided_on else None


_SHAPE_OF = frozenset({"Shape", "Size"})
"""Ops whose outputs depend on their input's shape alone, not its values."""


def find_decisions(model: Model) -> Decisions:
    """The decisions of ``model``'s main graph (a body's are its own: they stay as they
    compute) on values computed from the inputs' values, with the float values each is made
    on. One on sizes alone (a ViT's Cast of the square root of its patch count) is exact
    arithmetic, no near tie: it is judged by what follows (pinned, onnxruntime's optimizer
    could no longer fold the Resize sizes it makes, and failed on them)."""
    graph = model.graph
    inputs = set(graph.inputs)
    valued = {v for v in inputs if v.const is None}  # depend on the inputs' values
    found = Decisions()
    for op in graph.topo_order():
        if op.op_type not in _SHAPE_OF and any(v in valued for v in op.reads()):
            valued.update(v for v in op._outputs if v is not None)
        decision = _decision(op)
        if decision is None or decision[0] not in valued:
            continue
        out, decided_on = decision
        found.picks[out.name] = op.describe()
        for value in decided_on:  # a graph input is given, not computed: nothing to judge
            if value not in inputs:
                found.judged.setdefault(value.name, f"read by {op.describe()}")
    return found


def pinnable(model: Model, picks: Iterable[str]) -> list[str]:
    """Those of ``picks`` an op of ``model``'s main graph makes (a converted model may have
    folded one, or dropped it)."""
    graph = model.graph
    made = {v.name for op in graph.ops for v in op._outputs if v is not None}
    return [name for name in picks if name in made]


def pin(model: Model, picks: Iterable[str]) -> dict[str, str]:
    """Make each of ``picks`` (decision values ``find_decisions`` named) that ``model``
    computes a graph input, fed the original's, in place: what read it reads the input; the
    op itself still runs, its pick under a new name, exposed as an output, to count what
    flipped. TopK's values are then read from its input at the given indices. Returns pick
    -> the name of the model's own."""
    graph = model.graph
    values = {v.name: v for v in graph.values() if v._graph is graph}
    tops = [graph.producer(values[n]) for n in picks if n in values]
    if any(op is not None and op.op_type == "TopK" for op in tops):
        from onnxforge.shape_infer import infer

        with contextlib.suppress(OnnxForgeError):  # else a GatherElements reads the values
            infer(model, verify=False)  # the rank of what TopK reads (_read_at)
    own: dict[str, str] = {}
    for name in picks:
        value = values.get(name)
        op = graph.producer(value) if value is not None else None
        if value is None or op is None:
            continue
        given = graph.add_value(graph.fresh_name(f"{name}_pinned"), _pick_type(op, value))
        graph.inputs.append(given)
        graph.replace_all_uses(value, given)
        graph.rename(value, graph.fresh_name(f"{name}_own"))
        graph.rename(given, name)
        graph.outputs.append(value)
        own[name] = value.name
        if op.op_type == "TopK" and op._outputs and op._outputs[0] is not None:
            _read_at(graph, op, given, model.opset())
    return own


def _read_at(graph: Graph, op: Op, indices: Value, opset: int) -> None:
    """TopK ``op``'s values, read from its input at ``indices`` instead: a GatherND over the
    TopK axis moved last (onnx's reference evaluator gathers elements with ``np.choose``,
    which takes 64 choices at most: a YOLO's top 300 of 8,400 fails there), or a
    GatherElements where the rank is not known or the opset predates GatherND's batches."""
    values, data = op._outputs[0], op._inputs[0]
    assert values is not None and data is not None
    t = data.type
    rank = len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
    axis = op.attr("axis", -1)
    if rank is None or opset < 12:
        out = graph.add_op("GatherElements", [data, indices], axis=axis)._outputs[0]
    else:
        axis %= rank
        perm = [i for i in range(rank) if i != axis] + [axis]
        moved = perm != list(range(rank))

        def last(value: Value) -> Value:
            found = graph.add_op("Transpose", [value], perm=perm)._outputs[0] if moved else value
            assert found is not None
            return found

        if opset >= 13:
            axes = graph.add_initializer(
                graph.fresh_name("pinned_axes"), Tensor.from_numpy(np.array([rank], np.int64))
            )
            unsqueeze = graph.add_op("Unsqueeze", [last(indices), axes])
        else:
            unsqueeze = graph.add_op("Unsqueeze", [last(indices)], axes=[rank])
        at = unsqueeze._outputs[0]
        out = graph.add_op("GatherND", [last(data), at], batch_dims=rank - 1)._outputs[0]
        if moved:
            back = [perm.index(i) for i in range(rank)]
            out = graph.add_op("Transpose", [out], perm=back)._outputs[0]
    assert out is not None
    out.type = values.type
    graph.replace_all_uses(values, out)
    name = values.name
    graph.rename(values, graph.fresh_name(f"{name}_own"))
    graph.rename(out, name)


def _pick_type(op: Op, value: Value) -> TensorType:
    """The type of ``op``'s pick ``value``, every dim unknown: the pick fed has the
    original's shape (a NonZero after it may count differently than this model would)."""
    t = value.type
    rank = len(t.shape) if isinstance(t, TensorType) and t.shape is not None else None
    if op.op_type in _COMPARISONS:
        dtype = DType.BOOL
    elif op.op_type == "Cast":
        dtype = DType(op.attr("to"))
    else:
        dtype = DType.INT64
    return TensorType(dtype, None if rank is None else (None,) * rank)


def expose(model: Model, names: Iterable[str]) -> None:
    """Add the main-graph values ``names`` to ``model``'s outputs, in order (those it has
    not, or holds already, are left as they are)."""
    graph = model.graph
    by_name = {v.name: v for v in graph.values() if v._graph is graph}
    listed = {v.name for v in graph.outputs}
    graph.outputs.extend(by_name[n] for n in names if n not in listed and n in by_name)


def pin_exposing(model: Model, picks: Iterable[str], judged: Iterable[str]) -> dict[str, str]:
    """``pin`` ``picks`` in ``model``, then expose the ``judged`` values after its outputs and
    its own picks last (what a judge compares, in that order); returns pick -> its own."""
    own = pin(model, picks)
    tail = set(own.values())
    model.graph.outputs[:] = [v for v in model.graph.outputs if v.name not in tail]
    expose(model, [*judged, *own.values()])
    return own


def tally_flips(
    pairs: Iterable[tuple[str, np.ndarray, np.ndarray]],
) -> dict[str, tuple[int, int]]:
    """Per pick, over (pick, the original's, the model's own) of every input set: how many
    the model made otherwise, of how many (``flipped``)."""
    counts: dict[str, tuple[int, int]] = {}
    for pick, want, own in pairs:
        n, total = flipped(want, own)
        before = counts.get(pick, (0, 0))
        counts[pick] = (before[0] + n, before[1] + total)
    return counts


def flipped(want: np.ndarray, own: np.ndarray) -> tuple[int, int]:
    """How many of a decision's picks the converted model made differently, of how many."""
    w, g = np.asarray(want), np.asarray(own)
    if w.shape != g.shape:
        return max(w.size, g.size), max(w.size, g.size)
    return int(np.count_nonzero(w != g)), int(w.size)
