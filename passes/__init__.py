"""Graph passes (onnxforge.passes): the pass manager and one module per pass."""

from __future__ import annotations

__all__ = [
    "DEFAULT_FOLD_LIMIT",
    "PASSES",
    "EliminateDeadCodePass",
    "FoldConstantsPass",
    "ConvertOpsetPass",
    "Pass",
    "PassManager",
    "PassResult",
    "Report",
    "fold_pipeline",
    "convert",
    "register_pass",
]

from onnxforge.passes._infra import PASSES, Pass, PassManager, PassResult, Report, register_pass
from onnxforge.passes.convert import ConvertOpsetPass, convert
from onnxforge.passes.eliminate_dead_code import EliminateDeadCodePass
from onnxforge.passes.fold_constants import DEFAULT_FOLD_LIMIT, FoldConstantsPass


def fold_pipeline(
    *, limit_bytes: int = DEFAULT_FOLD_LIMIT, exclude: frozenset[str] | set[str] = frozenset()
) -> PassManager:
    """What `onnxforge fold` runs: fold-constants, then eliminate-dead-code for what folding
    left unread (the Shape whose Gather became a constant)."""
    return PassManager(
        [FoldConstantsPass(limit_bytes=limit_bytes, exclude=exclude), EliminateDeadCodePass()]
    )
