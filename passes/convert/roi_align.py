"""RoiAlign adapters at 16: coordinate_transformation_mode (RoiAlign-10 is
'output_half_pixel'; the new attribute defaults to 'half_pixel')."""

from __future__ import annotations

__all__ = ["roi_align_15_16", "roi_align_16_15"]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("RoiAlign", 15, 16)
def roi_align_15_16(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    op.attrs["coordinate_transformation_mode"] = "output_half_pixel"
    finish(op, graph, ctx)


@adapter("RoiAlign", 16, 15)
def roi_align_16_15(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    mode = op.attrs.pop("coordinate_transformation_mode", b"half_pixel")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode != "output_half_pixel":
        raise ctx.fail(
            op,
            f"coordinate_transformation_mode={mode!r}; RoiAlign-10 has only 'output_half_pixel'",
        )
    finish(op, graph, ctx)
