"""Graph passes (onnxforge.passes): the pass manager and one module per pass."""

from __future__ import annotations

__all__ = [
    "DEFAULT_FOLD_LIMIT",
    "PASSES",
    "EliminateDeadCodePass",
    "FoldConstantsPass",
    "Pass",
    "PassManager",
    "PassResult",
    "Report",
    "register_pass",
]

from onnxforge.passes._infra import PASSES, Pass, PassManager, PassResult, Report, register_pass
from onnxforge.passes.eliminate_dead_code import EliminateDeadCodePass
from onnxforge.passes.fold_constants import DEFAULT_FOLD_LIMIT, FoldConstantsPass
