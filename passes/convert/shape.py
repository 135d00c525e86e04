"""Shape adapter: start and end (15) become a Slice of the whole shape below 15."""

from __future__ import annotations

__all__ = ["shape_15_14"]

from onnxforge.ir import DType, Graph, Op, TensorType
from onnxforge.passes.convert._build import emit, finish, int64s, reroute_output
from onnxforge.passes.convert._registry import ConvertContext, adapter

_INT64_MAX = 2**63 - 1


@adapter("Shape", 15, 14)
def shape_15_14(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """start/end (clamped like Slice's) -> Shape, then Slice(starts=[start], ends=[end]);
    start=0 without end is the whole shape and just goes."""
    start = int(op.attrs.pop("start", 0) or 0)
    end = op.attrs.pop("end", None)
    if start != 0 or end is not None:
        base = op.name or "shape"
        stop = _INT64_MAX if end is None else int(end)
        whole = TensorType(DType.INT64, None)

        def sliced(full: object) -> object:
            return emit(
                graph,
                "Slice",
                [
                    full,  # type: ignore[list-item]
                    int64s(graph, ctx, f"{base}_start", [start]),
                    int64s(graph, ctx, f"{base}_end", [stop]),
                    int64s(graph, ctx, f"{base}_axes", [0]),
                ],
                base=base,
            )

        reroute_output(graph, op, 0, sliced, type=whole)  # type: ignore[arg-type]
    finish(op, graph, ctx)
