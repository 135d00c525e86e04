"""The infer-shapes pass: every value gets its type, so later passes and the saved model see
the shapes (the optimize pipeline runs it first and last)."""

from __future__ import annotations

__all__ = ["InferShapesPass"]

import logging
from typing import ClassVar

from onnxforge.ir import Model
from onnxforge.passes._infra import Pass, PassResult, register_pass
from onnxforge.passes._rewrite import inference

logger = logging.getLogger(__name__)


@register_pass
class InferShapesPass(Pass):
    """Run shape inference in place.

    1. Every value whose type can be inferred gets it (written as value_info on save).
    2. Inference errors are counted (``errors``) and kept in the details; with ``strict``
       they raise instead (a ShapeError listing every one).
    """

    name: ClassVar[str] = "infer-shapes"
    summary: ClassVar[str] = "Give every value the type and shape inference finds for it."
    types_only: ClassVar[bool] = True

    def __init__(self, *, strict: bool = False) -> None:
        self.strict = strict

    def call(self, model: Model) -> PassResult:
        result = PassResult(model)
        before = {v: v.type for g in model.graphs() for v in g.values()}
        # The whole model, not brought up to date: what is written names fresh dims in order.
        report = inference(model, strict=self.strict, again=False)
        for error in report.errors:
            result.note("errors", str(error))
            logger.warning("shape inference: %s", error)
        result.stats["values_typed"] = report.typed
        result.modified = any(
            v.type is not before.get(v) for g in model.graphs() for v in g.values()
        )
        return result
