"""Dropout adapters: consumed_inputs (6), is_test (7), the mask (10: bool, all true at
inference), ratio and training_mode as inputs (12)."""

from __future__ import annotations

__all__ = [
    "dropout_5_6",
    "dropout_6_7",
    "dropout_7_6",
    "dropout_9_10",
    "dropout_10_9",
    "dropout_11_12",
    "dropout_12_11",
]

import numpy as np

from onnxforge.ir import DType, Graph, Op, Tensor, TensorType
from onnxforge.passes.convert._build import (
    add_input,
    dtype_of,
    emit,
    finish,
    remove_input,
    reroute_output,
    scalar,
    take_const,
)
from onnxforge.passes.convert._registry import ConvertContext, adapter


@adapter("Dropout", 5, 6)
def dropout_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    op.attrs.pop("consumed_inputs", None)
    finish(op, graph, ctx)


@adapter("Dropout", 6, 7)
def dropout_6_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """is_test=1 goes (Dropout-7 is the identity at inference); an explicit is_test=0 asks
    for training, which 7 does not express."""
    is_test = op.attrs.pop("is_test", None)
    if is_test is not None and int(is_test) == 0:
        raise ctx.fail(op, "is_test=0 (training) has no equivalent at 7")
    finish(op, graph, ctx)


@adapter("Dropout", 7, 6)
def dropout_7_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Inference: is_test=1 (the default 0 would drop)."""
    op.attrs["is_test"] = 1
    finish(op, graph, ctx)


def _recast_mask(op: Op, graph: Graph, dtype: int, to: int) -> None:
    """The mask output changes type to ``dtype``: a Cast to ``to`` serves its readers (an
    unread mask is dropped instead)."""
    outputs = graph.outputs_of(op)
    mask = outputs[1] if len(outputs) > 1 else None
    if mask is None:
        return
    if not graph.is_used(mask):
        graph.drop_outputs(op, 1)
        return
    shape = mask.type.shape if isinstance(mask.type, TensorType) else None
    reroute_output(
        graph,
        op,
        1,
        lambda fresh: emit(graph, "Cast", [fresh], base=f"{op.name or 'dropout'}_mask", to=to),
        type=TensorType(dtype, shape),
    )


@adapter("Dropout", 9, 10)
def dropout_9_10(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """The mask becomes bool; a Cast gives its readers the data's type back."""
    dtype = dtype_of(ctx, graph.inputs_of(op)[0])
    if dtype is None and len(op._outputs) > 1 and op._outputs[1] is not None:
        raise ctx.fail(op, "the data's element type is unknown; the mask's Cast needs it")
    _recast_mask(op, graph, int(DType.BOOL), int(dtype or 0))
    finish(op, graph, ctx)


def _constant_mask(op: Op, graph: Graph) -> None:
    """At inference the mask is all true: a read mask becomes ConstantOfShape(Shape(data),
    true) and the node loses the output."""
    outputs = graph.outputs_of(op)
    mask = outputs[1] if len(outputs) > 1 else None
    if mask is None:
        return
    if graph.is_used(mask):
        x = graph.inputs_of(op)[0]
        assert x is not None
        base = f"{op.name or 'dropout'}_mask"
        dims = emit(graph, "Shape", [x], base=base)
        true = Tensor.from_numpy(np.ones((1,), dtype=np.bool_))
        ones = emit(graph, "ConstantOfShape", [dims], base=base, value=true)
        graph.replace_all_uses(mask, ones)
        name, mask.name = mask.name, graph.fresh_name(f"{mask.name}_unfilled")
        ones.name, ones.type = name, mask.type
    graph.drop_outputs(op, 1)


@adapter("Dropout", 10, 9)
def dropout_10_9(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Dropout-7 does not fill the mask at inference; from 10 it is all true there. A read
    mask becomes ConstantOfShape(Shape(data), true) and the node loses the output."""
    _constant_mask(op, graph)
    finish(op, graph, ctx)


@adapter("Dropout", 11, 12)
def dropout_11_12(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """ratio becomes a float scalar input (left out at the default 0.5); no training_mode
    input means inference, as before."""
    ratio = op.attrs.pop("ratio", None)
    if ratio is not None and float(ratio) != 0.5:
        value = scalar(graph, ctx, f"{op.name or 'dropout'}_ratio", float(ratio), DType.FLOAT)
        add_input(graph, op, 1, value)
    finish(op, graph, ctx)


@adapter("Dropout", 12, 11)
def dropout_12_11(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """Inference only: training_mode absent or a constant false. ratio then does not act; a
    constant one is kept as the attribute, a computed one dropped. seed goes. A read mask
    (all true at inference) becomes ConstantOfShape(Shape(data), true): onnxruntime's
    Dropout-10 returns it all false."""
    inputs = graph.inputs_of(op)
    if len(inputs) > 2 and inputs[2] is not None:
        mode = take_const(graph, ctx, op, 2)
        if mode is None or bool(mode.reshape(-1)[0]):
            raise ctx.fail(op, "training_mode may be true; Dropout-10 has no training mode")
    inputs = graph.inputs_of(op)
    if len(inputs) > 1 and inputs[1] is not None:
        ratio = take_const(graph, ctx, op, 1)
        if ratio is not None:
            op.attrs["ratio"] = float(ratio.reshape(-1)[0])
        else:
            remove_input(graph, op, 1)
    op.attrs.pop("seed", None)
    _constant_mask(op, graph)
    finish(op, graph, ctx)
