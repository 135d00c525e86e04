"""eliminate-dead-code: remove ops whose outputs nothing reads, and unread initializers."""

from __future__ import annotations

__all__ = ["EliminateDeadCodePass"]

import logging
from typing import ClassVar

from onnxforge.ir import Graph, Model, Op
from onnxforge.passes._infra import Pass, PassResult, node_label, register_pass

logger = logging.getLogger(__name__)


@register_pass
class EliminateDeadCodePass(Pass):
    """Remove what cannot affect a graph output.

    1. An op none of whose outputs is read (by an op, a subgraph or as a graph output) goes,
       and then the ops that only it read, in reverse topological order. Subgraphs first, so
       an op that only a dead inner op read becomes dead too.
    2. An initializer nothing reads goes, unless it is also a graph input (an interface).
    ONNX ops have no side effects; ops of custom domains are kept (we cannot know).
    """

    name: ClassVar[str] = "eliminate-dead-code"

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        for graph in reversed(list(model.graphs())):  # innermost bodies first
            self._sweep(graph, result)
            if graph.parent is not None and graph.owner is not None:
                graph.parent.refresh_captures(graph.owner)
        result.modified = bool(result.stats)
        return result

    def _sweep(self, graph: Graph, result: PassResult) -> None:
        for op in reversed(graph.topo_order()):
            if self._dead(graph, op):
                name = node_label(op)
                graph.remove_op(op)  # its inputs' producers come later in this reverse order
                result.note("ops_removed", name)
        for value in list(graph.initializers):
            if not graph.is_used(value) and not any(v is value for v in graph.inputs):
                graph.remove_initializer(value)
                result.note("initializers_removed", value.name)

    @staticmethod
    def _dead(graph: Graph, op: Op) -> bool:
        if op.domain not in ("", "ai.onnx", "ai.onnx.ml"):
            return False
        return all(v is None or not graph.is_used(v) for v in op._outputs)
