"""BatchNormalization adapters: consumed_inputs (6), is_test (7), spatial (9), the training
outputs and training_mode (14)."""

from __future__ import annotations

__all__ = [
    "batch_norm_5_6",
    "batch_norm_6_5",
    "batch_norm_6_7",
    "batch_norm_7_6",
    "batch_norm_8_9",
    "batch_norm_9_8",
    "batch_norm_13_14",
    "batch_norm_14_13",
]

from onnxforge.ir import Graph, Op
from onnxforge.passes.convert._build import finish
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _n_outputs(op: Op) -> int:
    return sum(1 for v in op._outputs if v is not None)


@adapter("BatchNormalization", 5, 6)
def batch_norm_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    op.attrs.pop("consumed_inputs", None)
    finish(op, graph, ctx)


@adapter("BatchNormalization", 6, 5)
def batch_norm_6_5(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """BatchNormalization-1 requires consumed_inputs (an in-place hint): none consumed."""
    op.attrs["consumed_inputs"] = [0, 0]
    finish(op, graph, ctx)


@adapter("BatchNormalization", 6, 7)
def batch_norm_6_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """is_test=1 (inference) goes: BatchNormalization-7 infers with one output. An explicit
    is_test=0 asks for training mode, which 7 only has with the statistics outputs."""
    is_test = op.attrs.pop("is_test", None)
    if is_test is not None and int(is_test) == 0 and _n_outputs(op) == 1:
        raise ctx.fail(op, "is_test=0 (training) with one output has no equivalent at 7")
    finish(op, graph, ctx)


@adapter("BatchNormalization", 7, 6)
def batch_norm_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """One output is inference: is_test=1 (the default 0 would train)."""
    if _n_outputs(op) == 1:
        op.attrs["is_test"] = 1
    finish(op, graph, ctx)


@adapter("BatchNormalization", 8, 9)
def batch_norm_8_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """spatial=1 (the default: statistics per channel) is what 9 does; spatial=0 (per
    activation) is an error."""
    spatial = op.attrs.pop("spatial", 1)
    if int(spatial) != 1:
        raise ctx.fail(op, "spatial=0 (statistics per activation) has no equivalent at 9")
    finish(op, graph, ctx)


@adapter("BatchNormalization", 9, 8)
def batch_norm_9_8(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """BatchNormalization-7's spatial defaults to 1, which is what 9 computes."""
    finish(op, graph, ctx)


@adapter("BatchNormalization", 13, 14)
def batch_norm_13_14(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Inference (one output) is the same; the training outputs of 9 (mean, var,
    saved_mean, saved_var) are not those of 14."""
    if _n_outputs(op) > 1:
        raise ctx.fail(op, "training outputs of BatchNormalization-9 have no equivalent at 14")
    finish(op, graph, ctx)


@adapter("BatchNormalization", 14, 13)
def batch_norm_14_13(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """training_mode=0 with one output is BatchNormalization-9's inference."""
    if int(op.attrs.pop("training_mode", 0) or 0) or _n_outputs(op) > 1:
        raise ctx.fail(op, "training mode has no equivalent at 13")
    finish(op, graph, ctx)
