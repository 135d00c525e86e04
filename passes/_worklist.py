"""Visiting what changed: a fixed point's later rounds give each pass only the ops that edits
and inference touched since its last run, and their neighbours, instead of every op."""

from __future__ import annotations

__all__ = ["SWEEP_SHARE", "Near", "neighbours", "touched", "visit"]

import logging
from collections.abc import Callable, Iterable, Iterator

from onnxforge import ir
from onnxforge.ir import Graph, Op, walk_graphs

logger = logging.getLogger(__name__)

SWEEP_SHARE = 16
"""Visit every op when more than one op in this many was touched: the neighbours of that
many are most of the graph, and walking the order is cheaper per op than a worklist
(optimize on the 100k blocks: the second round's passes found 40% of the ops touched, and
took 1.5 s that way against 0.7 s visiting all)."""

Near = Callable[[Graph, Op], Iterable[Op]]
"""The ops whose rewrite may have become possible when ``op`` was touched (``op`` too)."""


def neighbours(graph: Graph, op: Op) -> Iterator[Op]:
    """``op``, the producers of its inputs and the readers of its outputs: a rewrite anchored
    at an op looks at these (a touched producer may let its reader fuse with it; a reader
    gone may leave a producer with one use)."""
    yield op
    for value in op._inputs:
        producer = value._producer if value is not None else None
        if producer is not None and producer._graph is graph:
            yield producer
    for value in op._outputs:
        if value is not None:
            for reader, _ in graph._uses.get(value, ()):
                yield reader


def touched(graph: Graph, since: int) -> list[Op]:
    """The ops of ``graph`` that an edit or a changed inferred type touched after the edit
    mark ``since``, and the ops holding a body in which one was."""
    ops = graph.touched_since(since)
    for holder in ir._holders(graph):
        if holder._stamp <= since and any(
            g.touched_since(since) for sub in holder.subgraphs() for g in walk_graphs(sub)
        ):
            ops.append(holder)
    return ops


def visit(
    graph: Graph, since: int | None, *, near: Near = neighbours, reverse: bool = False
) -> Iterator[Op]:
    """The ops of ``graph`` a pass should look at, in topological order (``reverse``: the
    reverse). ``since`` None: every op, as ``topo_order`` lists them. Else an edit mark
    taken when the pass last started: only the ops ``near`` to those touched since
    (``touched``), and, as the pass edits, those near to what its edits touch that are
    still ahead, so that rewrites cascade within one run as they do over every op. A body
    whose holder was touched is visited whole (its inputs' types may have changed).

    That finds what visiting every op finds as long as a rewrite at an op can only have
    become possible through a touch of an op it is ``near`` to: each pass says what is
    near for its rewrites (``tests/passes/test_worklist.py`` compares the two on real
    models). The walk is the order's; only ops in the worklist are looked at."""
    order = graph.topo_order()
    start = None if since is None or _holder_touched(graph, since) else touched(graph, since)
    if start is None or len(start) * SWEEP_SHARE > len(order):
        yield from reversed(order) if reverse else order
        return
    queued: set[Op] = set()

    def add(anchors: Iterable[Op]) -> None:
        for anchor in anchors:
            queued.update(near(graph, anchor))

    add(start)
    with ir.journal() as edits:
        for op in reversed(order) if reverse else order:
            if op not in queued or op._graph is not graph:
                continue  # not near a touch, or removed by a rewrite before its turn
            yield op
            if edits:  # what they touch ahead is visited in this run, behind in the next
                add(edits)
                edits.clear()


def _holder_touched(graph: Graph, since: int) -> bool:
    while graph.owner is not None and graph.parent is not None:
        if graph.owner._stamp > since:
            return True
        graph = graph.parent
    return False
