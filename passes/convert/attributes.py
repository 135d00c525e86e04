"""Steps whose only adaptation is an attribute: an obsolete one removed going up
(``consumed_inputs`` at 6, ``output_sequence`` at 7), a new one dropped going down where its
value is the older behaviour (``select_last_index=0``, ``ceil_mode=0``, ``dilations`` of 1s,
``layout=0``, ...), refused where it is not."""

from __future__ import annotations

__all__ = ["max_pool_8_7", "quantize_21_20", "quantize_23_22", "selu_5_6", "selu_6_5"]

from typing import Any

from onnxforge import opset as schemas
from onnxforge.ir import DType, Graph, Op
from onnxforge.passes.convert._build import all_ones, drop_attributes, dtype_of, finish
from onnxforge.passes.convert._registry import ConvertContext, adapter


def _always(_: Any) -> bool:
    return True


# consumed_inputs (an in-place hint of opset 1) is gone from 6. Add/Sub/Mul/Div: sub.py;
# BatchNormalization, Dropout, Reshape, Clip: their own modules.
_CONSUMED = (
    "Abs",
    "Ceil",
    "Elu",
    "Exp",
    "Floor",
    "HardSigmoid",
    "InstanceNormalization",
    "LeakyRelu",
    "Log",
    "Max",
    "Mean",
    "Min",
    "Neg",
    "PRelu",
    "Reciprocal",
    "Relu",
    "Sigmoid",
    "Sqrt",
    "Sum",
    "Tanh",
)
drop_attributes(_CONSUMED, 5, 6, name="consumed_inputs_5_6", consumed_inputs=_always)

# output_sequence=0 only said Y may be omitted, which 7 says of every optional output.
drop_attributes(("RNN", "GRU", "LSTM"), 6, 7, name="rnn_6_7", output_sequence=_always)

# New attributes whose default is the older behaviour: dropped at that value going down.
drop_attributes(("ArgMax", "ArgMin"), 12, 11, name="arg_12_11", select_last_index=0)
drop_attributes("AveragePool", 7, 6, name="average_pool_7_6", count_include_pad=0)
drop_attributes("AveragePool", 10, 9, name="average_pool_10_9", ceil_mode=0)
drop_attributes("MaxPool", 10, 9, name="max_pool_10_9", ceil_mode=0, dilations=all_ones)
drop_attributes("AveragePool", 19, 18, name="average_pool_19_18", dilations=all_ones)
drop_attributes("LpPool", 18, 17, name="lp_pool_18_17", ceil_mode=0, dilations=all_ones)
drop_attributes("GRU", 3, 2, name="gru_3_2", linear_before_reset=0)
drop_attributes("DepthToSpace", 11, 10, name="depth_to_space_11_10", mode="DCR")
drop_attributes("SpaceToDepth", 28, 27, name="space_to_depth_28_27", mode="DCR")
drop_attributes("GatherND", 12, 11, name="gather_nd_12_11", batch_dims=0)
drop_attributes(
    "Attention", 25, 24, name="attention_25_24", left_window_size=-1, right_window_size=-1
)
# saturate and round_mode only act on float8 outputs, which the older versions do not have
# (the type check refuses them); stash_type only on float16/bfloat16, likewise.
drop_attributes(("Cast", "CastLike"), 19, 18, name="cast_19_18", saturate=_always)
drop_attributes(("Cast", "CastLike"), 24, 23, name="cast_24_23", round_mode=_always)
drop_attributes("QuantizeLinear", 19, 18, name="quantize_19_18", saturate=_always)
drop_attributes("Range", 27, 26, name="range_27_26", stash_type=_always)
drop_attributes("DequantizeLinear", 21, 20, name="dequantize_21_20", block_size=0)


@adapter("MaxPool", 8, 7)
def max_pool_8_7(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """storage_order only orders the Indices output, which MaxPool-1 does not have: it goes
    when Indices is absent or unused."""
    outputs = graph.outputs_of(op)
    if len(outputs) > 1 and outputs[1] is not None:
        if graph.is_used(outputs[1]):
            raise ctx.fail(op, "the Indices output is used; MaxPool-1 has none")
        graph.drop_outputs(op, 1)
    op.attrs.pop("storage_order", None)
    finish(op, graph, ctx)


@adapter("QuantizeLinear", 21, 20)
def quantize_21_20(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """block_size=0 (per tensor/axis) is QuantizeLinear-19; output_dtype goes when the zero
    point's type (or uint8 without one) already gives it."""
    if int(op.attrs.pop("block_size", 0) or 0):
        raise ctx.fail(op, "blocked quantization (block_size) has no equivalent before 21")
    output_dtype = int(op.attrs.pop("output_dtype", 0) or 0)
    if output_dtype:
        inputs = graph.inputs_of(op)
        zero_point = inputs[2] if len(inputs) > 2 else None
        given = dtype_of(ctx, zero_point) if zero_point is not None else int(DType.UINT8)
        if given != output_dtype:
            raise ctx.fail(op, f"output_dtype={output_dtype} without a zero point of that type")
    finish(op, graph, ctx)


@adapter(("QuantizeLinear", "DequantizeLinear"), 23, 22)
def quantize_23_22(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """precision (QuantizeLinear) and output_dtype (DequantizeLinear) go where they name the
    scale's type, which is what the older versions compute in and return."""
    scale_dtype = dtype_of(ctx, graph.inputs_of(op)[1])
    for attr in ("precision", "output_dtype"):
        value = int(op.attrs.pop(attr, 0) or 0)
        if value and value != scale_dtype:
            raise ctx.fail(op, f"{attr}={value} differs from the scale's type {scale_dtype}")
    finish(op, graph, ctx)


_SELU_1 = {
    "alpha": schemas.attribute_default("Selu", 1, "alpha"),
    "gamma": schemas.attribute_default("Selu", 1, "gamma"),
}
_SELU_6 = {
    "alpha": schemas.attribute_default("Selu", 6, "alpha"),
    "gamma": schemas.attribute_default("Selu", 6, "gamma"),
}


@adapter("Selu", 5, 6)
def selu_5_6(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """consumed_inputs goes; alpha and gamma left unset keep Selu-1's defaults, written out
    (Selu-6 rounds them differently)."""
    op.attrs.pop("consumed_inputs", None)
    for name, value in _SELU_1.items():
        op.attrs.setdefault(name, value)
    finish(op, graph, ctx)


@adapter("Selu", 6, 5)
def selu_6_5(op: Op, graph: Graph, ctx: ConvertContext) -> None:
    """alpha and gamma left unset keep Selu-6's defaults, written out."""
    for name, value in _SELU_6.items():
        op.attrs.setdefault(name, value)
    finish(op, graph, ctx)
