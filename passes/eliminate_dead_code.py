"""eliminate-dead-code: remove ops whose outputs nothing reads, unread initializers and
local functions nothing calls."""

from __future__ import annotations

__all__ = ["EliminateDeadCodePass"]

import logging
from typing import ClassVar

from onnxforge.ir import Function, Graph, Model, Op, walk_graphs
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass
from onnxforge.passes._worklist import visit

logger = logging.getLogger(__name__)


@register_pass
class EliminateDeadCodePass(Pass):
    """Remove what cannot affect a graph output.

    1. An op none of whose outputs is read (by an op, a subgraph or as a graph output) goes,
       and then the ops that only it read, in reverse topological order. Subgraphs first, so
       an op that only a dead inner op read becomes dead too.
    2. An initializer nothing reads goes, unless it is also a graph input (an interface).
    3. A local function that no op of the main graph calls, directly or through other
       functions, goes.
    ONNX ops have no side effects; ops of custom domains are kept (we cannot know), except
    calls of local functions whose bodies only hold ops that could go. Inputs of subgraphs
    stay even when unread: they are the If/Loop/Scan signature.
    """

    name: ClassVar[str] = "eliminate-dead-code"
    journaled: ClassVar[bool] = True  # every edit stamps the op it changes
    keeps_types: ClassVar[bool] = True  # nothing read what it removes
    summary: ClassVar[str] = (
        "Remove ops, initializers and local functions no graph output depends on."
    )

    def __init__(self) -> None:
        self.pure: set[tuple[str, str, str]] = set()  # local functions a dead call may go to

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        self.pure = _pure_functions(model.functions)
        for graph in reversed(list(model.graphs())):  # innermost bodies first
            self._sweep(graph, result)
            if graph.parent is not None and graph.owner is not None:
                graph.parent.refresh_captures(graph.owner)
        called = _called(model) if model.functions else set()
        if any(fn.key not in called for fn in model.functions):
            for fn in model.functions:
                if fn.key not in called:
                    result.note("functions_removed", f"{fn.domain}::{fn.name}")
            model.functions = [fn for fn in model.functions if fn.key in called]
        result.modified = bool(result.stats)
        return result

    def _sweep(self, graph: Graph, result: PassResult) -> None:
        for op in visit(graph, self.focus, near=_itself, reverse=True):
            if self._dead(graph, op):
                name = node_label(op)
                graph.remove_op(op)  # its inputs' producers come later in this reverse order
                result.note("ops_removed", name)
        for value in list(graph.initializers):
            if not graph.is_used(value) and value not in graph.inputs:
                graph.remove_initializer(value)
                result.note("initializers_removed", value.name)

    def _dead(self, graph: Graph, op: Op) -> bool:
        if op.domain not in PURE_DOMAINS and (op.domain, op.op_type, op.overload) not in self.pure:
            return False
        return all(v is None or not graph.is_used(v) for v in op._outputs)


def _itself(graph: Graph, op: Op) -> tuple[Op]:
    """An op dies only by a touch of its own: its last reader went, or its output stopped
    being a graph output (the removals in a run touch the producers they leave unread)."""
    return (op,)


PURE_DOMAINS = frozenset({"", "ai.onnx", "ai.onnx.ml"})


def _calls(graph: Graph) -> set[tuple[str, str, str]]:
    """(domain, name, overload) of every op in ``graph`` and its bodies."""
    return {(op.domain, op.op_type, op.overload) for g in walk_graphs(graph) for op in g.ops}


def _pure_functions(functions: list[Function]) -> set[tuple[str, str, str]]:
    """Local functions whose bodies (and the functions they call) only hold ONNX ops."""
    by_key = {fn.key: fn for fn in functions}
    pure: set[tuple[str, str, str]] = set()
    changed = True
    while changed:  # a function is pure once every function it calls is
        changed = False
        for key, fn in by_key.items():
            if key not in pure and all(
                c[0] in PURE_DOMAINS or c in pure for c in _calls(fn.graph)
            ):
                pure.add(key)
                changed = True
    return pure


def _called(model: Model) -> set[tuple[str, str, str]]:
    """Keys of the local functions the main graph calls, directly or through others."""
    by_key = {fn.key: fn for fn in model.functions}
    called: set[tuple[str, str, str]] = set()
    todo = [c for c in _calls(model.graph) if c in by_key]
    while todo:
        key = todo.pop()
        if key not in called:
            called.add(key)
            todo.extend(c for c in _calls(by_key[key].graph) if c in by_key)
    return called
