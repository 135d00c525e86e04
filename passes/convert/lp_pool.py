"""LpPool and GlobalLpPool at 2: p was a float, is an int."""

from __future__ import annotations

__all__ = ["lp_pool_1_2", "lp_pool_2_1"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter(("LpPool", "GlobalLpPool"), 1, 2)
def lp_pool_1_2(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    p = op.attrs.get("p")
    if p is not None:
        if float(p) != int(p):
            raise ctx.fail(op, f"p={p} is not an integer, which p is from opset 2")
        op.attrs["p"] = int(p)
    finish(op, graph, ctx)


@adapter(("LpPool", "GlobalLpPool"), 2, 1)
def lp_pool_2_1(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    if op.attrs.get("p") is not None:
        op.attrs["p"] = float(op.attrs["p"])
    finish(op, graph, ctx)
