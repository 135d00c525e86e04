"""Fallback for ops without an own rule: onnx's per-node inference (the schema's C++ function).

Our dims go in as they are (a symbolic dim is a ``dim_param`` string, so ``N+M`` survives ops
that copy dims); constant and fully known integer inputs go in as data, so Reshape-like ops
without an own rule still see their shape input.
"""

from __future__ import annotations

__all__ = ["infer_node", "schema_function"]

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import onnx
import onnx.shape_inference
from onnx import defs

from onnxforge.errors import ShapeError
from onnxforge.io import (
    function_from_proto,
    node_to_proto,
    tensor_to_proto,
    type_from_proto,
    type_to_proto,
)
from onnxforge.ir import Function, Op, OpaqueType, Tensor, TensorType, UnknownDim

if TYPE_CHECKING:
    from onnxforge.shape_infer.engine import InferContext

MAX_DATA_ELEMENTS = 1 << 12
"""Integer constant inputs up to this size are handed to onnx as data (shapes, axes, pads)."""
MAX_FLOAT_DATA_ELEMENTS = 16
"""Float constants up to this size too (Resize scales); weights never are."""


def infer_node(
    op: Op, in_types: Sequence[TensorType | OpaqueType | None], ctx: InferContext
) -> list[TensorType | OpaqueType | None]:
    schema = defs.get_schema(op.op_type, ctx.opset, op.domain)
    node = node_to_proto(op)
    types: dict[str, onnx.TypeProto] = {}
    data: dict[str, onnx.TensorProto] = {}
    for index, (name, t) in enumerate(zip(node.input, in_types, strict=False)):
        if not name:
            continue
        if t is None:
            return [None] * len(node.output)  # onnx needs every input's type
        proto = onnx.TypeProto()
        type_to_proto(t, proto)
        types[name] = proto
        array = _data(ctx, index)
        if array is not None:
            data[name] = tensor_to_proto(Tensor.from_numpy(array), name)
    opsets = [onnx.helper.make_opsetid(d, v) for d, v in ctx.scope.opsets.items()]
    try:
        out = onnx.shape_inference.infer_node_outputs(schema, node, types, data, {}, opsets)
    except (onnx.shape_inference.InferenceError, onnx.checker.ValidationError) as e:
        raise ShapeError(_clean(str(e))) from None
    unknown: dict[str, UnknownDim] = {
        str(d): d
        for t in in_types
        if isinstance(t, TensorType) and t.shape is not None
        for d in t.shape
        if isinstance(d, UnknownDim)
    }
    return [_unknowns_back(_type(out.get(name)), unknown) for name in node.output]


def _unknowns_back(
    t: TensorType | OpaqueType | None, unknown: dict[str, UnknownDim]
) -> TensorType | OpaqueType | None:
    """onnx copies our fresh unknowns as plain names: give them their kind back."""
    if not unknown or not isinstance(t, TensorType) or t.shape is None:
        return t
    return TensorType(
        t.dtype, tuple(unknown.get(d, d) if isinstance(d, str) else d for d in t.shape)
    )


def _type(proto: onnx.TypeProto | None) -> TensorType | OpaqueType | None:
    if proto is None or proto.WhichOneof("value") is None:
        return None  # onnx inferred nothing
    return type_from_proto(proto)


def _data(ctx: InferContext, index: int) -> np.ndarray | None:
    value = ctx.input(index)
    stored = None if value is None else value.const
    if (
        isinstance(stored, Tensor)
        and stored.size > MAX_FLOAT_DATA_ELEMENTS
        and stored.dtype
        in (
            onnx.TensorProto.FLOAT,
            onnx.TensorProto.FLOAT16,
            onnx.TensorProto.DOUBLE,
            onnx.TensorProto.BFLOAT16,
        )
    ):
        return None  # a weight: never read it
    array = ctx.const(index)
    if array is not None:
        limit = MAX_DATA_ELEMENTS if array.dtype.kind in "iub" else MAX_FLOAT_DATA_ELEMENTS
        return array if array.size <= limit else None
    known = ctx.value(index)
    if known is None or value is None or not all(isinstance(d, int) for d in known):
        return None
    t = ctx.scope.type_of(value)
    if not isinstance(t, TensorType) or t.shape is None:
        return None
    dtype = np.dtype(np.int32) if t.dtype == onnx.TensorProto.INT32 else np.dtype(np.int64)
    return np.array(known, dtype=dtype).reshape(() if t.shape == () else (len(known),))


def _clean(message: str) -> str:
    """onnx's messages start with '[ShapeInferenceError] (op_type:X, node name: y): '."""
    head, sep, tail = message.partition("): ")
    return tail if sep and head.startswith("[") else message


_FUNCTIONS: dict[tuple[str, str, int], Function | None] = {}


def schema_function(
    op: Op, in_types: Sequence[TensorType | OpaqueType | None], ctx: InferContext
) -> Function | None:
    """The op's definition as a function of simpler ops, when its schema has one.

    onnx infers such ops (GroupNormalization, MeanVarianceNormalization, the window functions)
    by inferring the body; context-dependent bodies are built for this node and input types.
    """
    schema: Any = defs.get_schema(op.op_type, ctx.opset, op.domain)  # stubs lack some members
    if schema.has_function:
        versions = [v for v in schema.function_opset_versions if v <= ctx.opset]
        if not versions:
            return None
        key = (op.domain, op.op_type, max(versions))
        if key not in _FUNCTIONS:
            fp = schema.get_function_with_opset_version(max(versions))
            _FUNCTIONS[key] = None if fp is None else function_from_proto(_as_function(fp))
        return _FUNCTIONS[key]
    if schema.has_context_dependent_function:
        versions = [v for v in schema.context_dependent_function_opset_versions if v <= ctx.opset]
        if not versions or any(t is None for t in in_types):
            return None
        types = []
        for t in in_types:
            proto = onnx.TypeProto()
            type_to_proto(t, proto)  # type: ignore[arg-type]
            types.append(proto.SerializeToString())
        node = node_to_proto(op).SerializeToString()
        try:
            raw = schema.get_context_dependent_function_with_opset_version(
                max(versions), node, types
            )
        except Exception:  # onnx raises RuntimeError/ValidationError for odd nodes
            return None
        return function_from_proto(_as_function(raw)) if raw else None
    return None


def _as_function(raw: object) -> onnx.FunctionProto:
    if isinstance(raw, onnx.FunctionProto):
        return raw
    fp = onnx.FunctionProto()
    fp.ParseFromString(raw)  # type: ignore[arg-type]
    return fp
