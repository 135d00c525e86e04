"""The replace-stale-types pass: declared types that contradict what the graph computes give way
to the inferred ones, as onnxruntime does (it warns and runs the model)."""

from __future__ import annotations

__all__ = ["ReplaceStaleTypesPass"]

import logging
from typing import ClassVar

from onnxforge.errors import ShapeError
from onnxforge.ir import Model
from onnxforge.passes._infra import Pass, PassResult, register_pass
from onnxforge.passes._rewrite import inference

logger = logging.getLogger(__name__)


@register_pass
class ReplaceStaleTypesPass(Pass):
    """Replace stale declarations (a PyTorch 1.x export's ``float[1, seqlen]`` value_info on a
    value the graph computes as rank 3).

    1. A declared type (value_info, graph output, If/Loop/Scan body input) whose rank or a
       static dim contradicts inference takes the inferred type; each is counted
       (``stale_types``) with its message (value, both types, the producing node).
    2. With ``strict`` such a declaration is an error: a ShapeError lists every one.
    3. Every other declared type stays as it was (the pass adds no value_info). Element types
       that differ stay an inference error: onnxruntime refuses those too.
    """

    name: ClassVar[str] = "replace-stale-types"
    summary: ClassVar[str] = (
        "Replace declared types the graph contradicts by the inferred ones (--strict: refuse)."
    )
    types_only: ClassVar[bool] = True  # the types it leaves are the ones inference computed

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        declared = {v: v.type for g in model.graphs() for v in g.values()}
        report = inference(model)
        replaced = {s.value for s in report.stale}
        for value, t in declared.items():
            if value not in replaced:
                value.type = t
        if self.strict and report.stale:
            for value, t in declared.items():
                value.type = t
            lines = [f"{s.contradiction} (refused: strict)" for s in report.stale]
            raise ShapeError("\n".join(lines))
        for stale in report.stale:
            result.note("stale_types", str(stale))
        result.modified = bool(report.stale)
        return result
