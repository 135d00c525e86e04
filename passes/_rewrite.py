"""What the cleanup passes share: constants, shapes, opset versions, and bypassing an op."""

from __future__ import annotations

__all__ = [
    "STANDARD_DOMAINS",
    "bypass",
    "constant",
    "dtype_of",
    "graphs_with_opset",
    "inference",
    "inferred_types",
    "is_graph_output",
    "only_reader",
    "output_name",
    "producer_of",
    "refresh_captures",
    "rename",
    "reshape_target",
    "set_input",
    "shape_of",
    "since",
]

import logging
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from onnxforge import opset as schemas
from onnxforge.errors import OnnxForgeError
from onnxforge.ir import (
    Graph,
    Model,
    Op,
    Shape,
    Tensor,
    TensorType,
    Value,
    constant_tensor,
    edit_mark,
    walk_graphs,
)
from onnxforge.passes._infra import Inference, inference_key, untracked_changes, verified
from onnxforge.shape_infer import InferReport, infer_resumable

logger = logging.getLogger(__name__)

STANDARD_DOMAINS = frozenset({"", "ai.onnx"})


def graphs_with_opset(model: Model) -> Iterator[tuple[Graph, int]]:
    """Every graph (parents before their bodies) with the default-domain opset its ops use:
    the model's, or a local function's own import."""
    base = dict(model.opset_imports)
    main = base.get("", base.get("ai.onnx", 0))
    for graph in walk_graphs(model.graph):
        yield graph, main
    for fn in model.functions:
        imports = {**base, **fn.opset_imports}
        version = imports.get("", imports.get("ai.onnx", main))
        for graph in walk_graphs(fn.graph):
            yield graph, version


def since(op: Op, opset: int) -> int | None:
    """The since_version of ``op``'s schema at ``opset``; None for other domains or no schema."""
    if op.domain not in STANDARD_DOMAINS:
        return None
    try:
        return schemas.since_version(op.op_type, opset)
    except OnnxForgeError:
        return None


def constant(value: Value | None) -> np.ndarray | None:
    """The contents of an initializer a caller cannot override (of this graph or an enclosing
    one) or of a Constant op's output; None for anything else."""
    if value is None:
        return None
    owner = value.graph
    if not isinstance(value.const, Tensor):
        op = owner.producer(value) if owner is not None else None
        if op is None or op.op_type != "Constant" or op.domain not in STANDARD_DOMAINS:
            return None
        tensor = constant_tensor(op)
        return None if tensor is None else tensor.numpy()
    if owner is not None and value in owner.inputs:
        return None  # a default the caller may override
    try:
        return value.const.numpy()
    except OnnxForgeError:
        return None


def shape_of(value: Value | None) -> Shape | None:
    """The shape of a constant, else the (inferred) type's shape."""
    if value is None:
        return None
    if isinstance(value.const, Tensor):
        return value.const.shape
    return value.type.shape if isinstance(value.type, TensorType) else None


def dtype_of(value: Value | None) -> int | None:
    if value is None:
        return None
    if isinstance(value.const, Tensor):
        return value.const.dtype
    if isinstance(value.type, TensorType) and value.type.dtype:
        return value.type.dtype
    return None


def is_graph_output(graph: Graph, value: Value) -> bool:
    return value in graph.outputs


def only_reader(graph: Graph, value: Value | None, op: Op) -> bool:
    """``op`` is the one use of ``value``: no other op or port, no subgraph, no graph output."""
    if value is None or value.graph is not graph or is_graph_output(graph, value):
        return False
    if graph.use_count(value) != 1:
        return False
    return graph.uses(value)[0][0] is op


def producer_of(
    graph: Graph, value: Value | None, op_types: set[str] | frozenset[str]
) -> Op | None:
    """The op of ``graph`` computing ``value`` when it is one of ``op_types`` (ONNX domain)."""
    first = graph.producer(value) if value is not None else None
    if first is None or first.op_type not in op_types or first.domain not in STANDARD_DOMAINS:
        return None
    return first


def output_name(op: Op) -> str:
    """The name of the op's first output (to name what is made for it)."""
    return next((v.name for v in op._outputs if v is not None), op.op_type)


def set_input(graph: Graph, op: Op, port: int, value: Value | None) -> None:
    """``graph.set_input`` that also fills an omitted trailing optional input (Conv's bias)."""
    while len(op._inputs) <= port:
        op._inputs.append(None)
    graph.set_input(op, port, value)


def rename(value: Value, name: str) -> None:
    """Give ``value`` a new name; capture edges (keyed by name) follow."""
    if value.graph is None:
        value.name = name
        return
    value.graph.rename(value, name)


def bypass(graph: Graph, op: Op, source: Value) -> bool:
    """Remove ``op``, whose first output equals ``source``; its other outputs must be unread.

    1. The output is not a graph output: its readers read ``source``.
    2. It is a graph output and ``source`` is computed by an op of this graph and is not a
       graph output itself: ``source`` takes the output's name and type.
    3. Otherwise (``source`` is a graph input, initializer, captured value or another
       graph output) the op stays: False.
    """
    out, *rest = graph.outputs_of(op)
    if out is None or any(v is not None and graph.is_used(v) for v in rest):
        return False
    if not is_graph_output(graph, out):  # Case 1
        graph.replace_all_uses(out, source)
        graph.remove_op(op)
        return True
    if graph.producer(source) is None or is_graph_output(graph, source):
        return False  # Case 3
    # Case 2
    name, declared = out.name, out.type
    graph.replace_all_uses(out, source)
    graph.remove_op(op)
    rename(source, name)
    if declared is not None:
        source.type = declared
    return True


def refresh_captures(model: Model) -> None:
    """Drop capture edges whose value no body reads any more, innermost bodies first."""
    for graph in reversed(list(model.graphs())):
        if graph.parent is not None and graph.owner is not None:
            graph.parent.refresh_captures(graph.owner)


def inference(model: Model, *, strict: bool = False, again: bool = True) -> InferReport:
    """Type every value in place and return the report, reusing the last one when nothing
    changed since (a fixed point's passes that find nothing to do share one inference: a
    third of optimize's time on densenet121 was inferring an unchanged model again), and,
    with ``again``, bringing it up to date when only journaled passes changed the model
    since: the ops they touched and what their new types reach are inferred again, not the
    whole model (``shape_infer.Resumable``)."""
    key = inference_key(model)
    cached: Inference | None = model._inference
    if cached is not None and cached[0] == key and not (strict and cached[1].engine.report.errors):
        for value in cached[2]:
            value.type = value._inferred
        return cached[1].engine.report  # type: ignore[no-any-return]
    untracked = untracked_changes()
    report = None
    if again and cached is not None and cached[3] == untracked:
        resumable = cached[1]
        try:
            report = resumable.again(strict=strict)
        except BaseException:
            model._inference = None  # half brought up to date
            raise
    if report is None:
        resumable = infer_resumable(model, strict=strict, verify=not verified(model))
        report = resumable.engine.report
        if again and cached is not None:  # a pass asks: later passes may visit what changed
            _touch_changed(model, cached[1].engine.report, report)
            resumable.mark = edit_mark()  # what it touched is inferred already
    values = [v for g in model.graphs() for v in g.values()]
    for value in values:
        value._inferred = value.type
    model._inference = (key, resumable, values, untracked)
    return report


def _touch_changed(model: Model, old: InferReport, new: InferReport) -> None:
    """Touch the readers of every value whose type or known elements a whole inference
    changed from the last one's (kept in ``Value._inferred``): a pass that visits only what
    changed (``_worklist.visit``) looks at them again."""
    old_known, new_known = old.known_values, new.known_values
    for graph in model.graphs():
        uses = graph._uses
        for value in graph.values():
            before, now = value._inferred, value.type
            changed = before is not now and before != now
            if changed or old_known.get(value) != new_known.get(value):
                for reader, _ in uses.get(value, ()):
                    graph.touch(reader)


@contextmanager
def inferred_types(model: Model) -> Iterator[InferReport]:
    """Type every value for the duration of a pass (see ``inference``); declared types come
    back afterwards (a pass adds no value_info), except on graph outputs, which keep the
    inferred ones."""
    before = [v for g in model.graphs() for v in g._values]  # what the pass may not retype
    declared = {v: t for v in before if (t := v.type) is not None}
    report = inference(model)
    try:
        yield report
    finally:  # a loop over every value per pass: kept to lookups (0.5 s of 2.4 s before)
        now = set(model.graphs())
        outputs = {v for g in now for v in g.outputs if v._graph is g}
        for value in before:
            graph = value._graph  # its own graph: outer values are theirs, inlined bodies' ours
            if graph is None or value not in graph._values:
                continue
            if value in outputs or (graph not in now and is_graph_output(graph, value)):
                continue  # outputs keep inferred types
            value.type = declared.get(value)


# -- operands from attributes or constant inputs ----------------------------------------------
def reshape_target(op: Op, version: int) -> np.ndarray | None:
    """A Reshape's target shape: the attribute before 5, then the constant second input."""
    if version < 5:
        return np.array(op.attr("shape", []), dtype=np.int64)
    return constant(op._inputs[1]) if len(op._inputs) > 1 else None
