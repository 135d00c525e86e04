"""Gemm adapters: the broadcast attribute (7) and the optional C (11)."""

from __future__ import annotations

__all__ = ["gemm_6_7", "gemm_7_6", "gemm_11_10"]

from onnxforge.ir import Dim, Graph, Op
from onnxforge.passes.convert._build import add_input, dtype_of, finish, scalar, shape_of
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _output_dims(op: Op, graph: Graph, ctx: ConvertContext) -> tuple[Dim, Dim] | None:
    a, b = graph.inputs_of(op)[:2]
    sa, sb = shape_of(ctx, a), shape_of(ctx, b)
    if sa is None or sb is None or len(sa) != 2 or len(sb) != 2:
        return None
    m = sa[1] if int(op.attr("transA", 0)) else sa[0]
    n = sb[0] if int(op.attr("transB", 0)) else sb[1]
    return m, n


@adapter("Gemm", 6, 7)
def gemm_6_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """broadcast goes: with broadcast=0, C has Y's shape, which numpy broadcasting leaves
    alone; with broadcast=1 C fits Y from the back, which numpy broadcasting also does."""
    op.attrs.pop("broadcast", None)
    finish(op, graph, ctx)


@adapter("Gemm", 7, 6)
def gemm_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """C of Y's shape needs nothing; one element or Y's trailing dims (the legacy rule, which
    expands no 1-dim) needs broadcast=1. Anything else, or unknown shapes, is an error."""
    c = graph.inputs_of(op)[2]
    sc = shape_of(ctx, c)
    mn = _output_dims(op, graph, ctx)
    if sc is None or mn is None:
        raise ctx.fail(op, "the shapes of A, B or C are unknown; Gemm-6 must know if C broadcasts")
    if tuple(sc) == tuple(mn) and all(d is not None for d in sc):
        finish(op, graph, ctx)
        return
    one_element = all(d == 1 for d in sc)
    suffix = len(sc) <= 2 and all(
        d is not None and d == y for d, y in zip(reversed(sc), reversed(mn), strict=False)
    )
    if not (one_element or suffix):
        raise ctx.fail(
            op,
            f"C of shape {list(sc)} is not Y's {list(mn)}, one element or Y's trailing dims "
            "(what Gemm-6's broadcast=1 expresses)",
        )
    op.attrs["broadcast"] = 1
    finish(op, graph, ctx)


@adapter("Gemm", 11, 10)
def gemm_11_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Gemm-9 requires C: an omitted one becomes a scalar 0 of A's type."""
    inputs = graph.inputs_of(op)
    if len(inputs) < 3 or inputs[2] is None:
        dtype = dtype_of(ctx, inputs[0])
        if dtype is None:
            raise ctx.fail(op, "C is omitted and A's element type is unknown")
        add_input(graph, op, 2, scalar(graph, ctx, f"{op.name or 'gemm'}_c", 0, dtype))
    finish(op, graph, ctx)
