"""Graph passes (onnxforge.passes): the pass manager and one module per pass."""

from __future__ import annotations

__all__ = [
    "DEFAULT_FOLD_LIMIT",
    "PASSES",
    "EliminateCommonSubexpressionsPass",
    "EliminateDeadCodePass",
    "EliminateIdentityPass",
    "FixedPoint",
    "FuseBatchNormIntoConvPass",
    "FuseDequantizeLinearPass",
    "FuseMulIntoConvPass",
    "InferShapesPass",
    "Instrument",
    "FuseBiasAddPass",
    "FuseMatMulAddPass",
    "MergeParallelMatMulsPass",
    "RemoveDefaultInputsPass",
    "ReplaceStaleTypesPass",
    "SimplifyShapeOpsPass",
    "SinkShapeOpsPass",
    "cleanup_passes",
    "FoldConstantsPass",
    "ConvertOpsetPass",
    "ConvertPrecisionPass",
    "Pass",
    "PassManager",
    "PassResult",
    "Report",
    "fold_pipeline",
    "convert",
    "register_pass",
]

from onnxforge.passes._infra import (
    PASSES,
    FixedPoint,
    Instrument,
    Pass,
    PassManager,
    PassResult,
    Report,
    register_pass,
)
from onnxforge.passes.convert import ConvertOpsetPass, convert
from onnxforge.passes.convert_precision import ConvertPrecisionPass
from onnxforge.passes.eliminate_common_subexpressions import EliminateCommonSubexpressionsPass
from onnxforge.passes.eliminate_dead_code import EliminateDeadCodePass
from onnxforge.passes.eliminate_identity import EliminateIdentityPass
from onnxforge.passes.fold_constants import DEFAULT_FOLD_LIMIT, FoldConstantsPass
from onnxforge.passes.fuse_batchnorm_into_conv import (
    FuseBatchNormIntoConvPass,
    FuseMulIntoConvPass,
)
from onnxforge.passes.fuse_bias_add import FuseBiasAddPass
from onnxforge.passes.fuse_dequantize_linear import FuseDequantizeLinearPass
from onnxforge.passes.fuse_matmul_add import FuseMatMulAddPass
from onnxforge.passes.infer_shapes import InferShapesPass
from onnxforge.passes.merge_parallel_matmuls import MergeParallelMatMulsPass
from onnxforge.passes.remove_default_inputs import RemoveDefaultInputsPass
from onnxforge.passes.replace_stale_types import ReplaceStaleTypesPass
from onnxforge.passes.simplify_shape_ops import SimplifyShapeOpsPass
from onnxforge.passes.sink_shape_ops import SinkShapeOpsPass


def fold_pipeline(
    *,
    limit_bytes: int = DEFAULT_FOLD_LIMIT,
    exclude: frozenset[str] | set[str] = frozenset(),
    strict: bool = False,
) -> PassManager:
    """What `onnxforge fold` runs: replace-stale-types (``strict``: refuse them), fold-constants,
    then eliminate-dead-code for what folding left unread (the Shape whose Gather became a
    constant)."""
    return PassManager(
        [
            ReplaceStaleTypesPass(strict=strict),
            FoldConstantsPass(limit_bytes=limit_bytes, exclude=exclude),
            EliminateDeadCodePass(),
        ]
    )


def cleanup_passes() -> list[Pass]:
    """The cleanup passes in the order a fixed point repeats them (``FixedPoint``): no-ops
    go first so that the patterns after them touch, shape chains collapse, reshapes and
    transposes sink through elementwise ops to meet what undoes them, the exact fusions
    run (parallel MatMuls merge before a MatMul + Add becomes a Gemm, so a merged bias Add
    can still join it), zero inputs that mean their default go, duplicates merge, and dead
    code goes last."""
    return [
        EliminateIdentityPass(),
        SimplifyShapeOpsPass(),
        SinkShapeOpsPass(),
        FuseBatchNormIntoConvPass(),
        FuseMulIntoConvPass(),
        FuseBiasAddPass(),
        MergeParallelMatMulsPass(),
        FuseMatMulAddPass(),
        RemoveDefaultInputsPass(),
        EliminateCommonSubexpressionsPass(),
        EliminateDeadCodePass(),
    ]
