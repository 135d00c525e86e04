"""GridSample adapters at 20: mode values renamed (bilinear -> linear, bicubic -> cubic) and
N-D inputs (16 takes 4-D only)."""

from __future__ import annotations

__all__ = ["grid_sample_19_20", "grid_sample_20_19"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish, rank_of
from onnxforge.passes.convert._registry import ConvertContext, adapter

_UP = {"bilinear": "linear", "bicubic": "cubic", "nearest": "nearest"}
_DOWN = {v: k for k, v in _UP.items()}


def _rename(op: Op, names: dict[str, str]) -> None:
    mode = op.attrs.get("mode")
    if mode is None:
        return  # the defaults (bilinear at 16, linear at 20) are the same interpolation
    text = mode.decode() if isinstance(mode, bytes) else str(mode)
    op.attrs["mode"] = names.get(text, text)


@adapter("GridSample", 19, 20)
def grid_sample_19_20(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    _rename(op, _UP)
    finish(op, graph, ctx)


@adapter("GridSample", 20, 19)
def grid_sample_20_19(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """GridSample-16 samples 4-D inputs only."""
    rank = rank_of(ctx, graph.inputs_of(op)[0])
    if rank is not None and rank != 4:
        raise ctx.fail(op, f"a {rank}-D input; GridSample-16 takes 4-D ones")
    _rename(op, _DOWN)
    finish(op, graph, ctx)
