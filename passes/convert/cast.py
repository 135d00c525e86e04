"""Cast and CastLike adapters: Cast-1 names the target type (6), CastLike below 15 is a
Cast to the known type of its second input."""

from __future__ import annotations

__all__ = ["cast_5_6", "cast_6_5", "cast_like_15_14"]

from onnxforge.ir import DType, Graph, Op
from onnxforge.passes.convert._build import dtype_of, emit, finish, replace_outputs
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Cast", 5, 6)
def cast_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """to="FLOAT" -> to=1."""
    to = op.attrs["to"]
    if isinstance(to, bytes):
        to = to.decode()
    if isinstance(to, str):
        try:
            op.attrs["to"] = int(DType[to.upper()])
        except KeyError:
            raise ctx.fail(op, f"to={to!r} names no element type") from None
    finish(op, graph, ctx)


@adapter("Cast", 6, 5)
def cast_6_5(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """to=1 -> to="FLOAT"."""
    to = op.attrs["to"]
    if isinstance(to, int):
        op.attrs["to"] = DType(to).name
    finish(op, graph, ctx)


@adapter("CastLike", 15, 14)
def cast_like_15_14(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """CastLike(x, like) is Cast(x, to=type of like) when that type is known."""
    x, like = graph.inputs_of(op)[:2]
    assert x is not None
    to = dtype_of(ctx, like)
    if to is None:
        raise ctx.fail(op, "the element type of target_type is unknown")
    replace_outputs(graph, op, [emit(graph, "Cast", [x], base=op.name or "cast_like", to=to)])
