"""Tensor data <-> TensorProto: decoding for exotic dtypes, raw bytes for writing."""

from __future__ import annotations

__all__ = ["decode", "dtype_of_numpy", "raw_source", "tensor_from_array"]

import sys
from typing import BinaryIO

import numpy as np
import onnx
from onnx import numpy_helper

from onnxforge.io._files import Span
from onnxforge.io._wire import WeightSource
from onnxforge.ir import DType, Tensor


def decode(tensor: Tensor) -> np.ndarray:
    """The array of a tensor whose data numpy cannot view directly (typed fields, packed or
    ml_dtypes types); read-only like the views."""
    if tensor.proto is not None:
        array = numpy_helper.to_array(tensor.proto)
    else:
        proto = onnx.TensorProto(data_type=tensor.dtype, dims=tensor.shape)
        if tensor.span is not None:
            proto.raw_data = tensor.span.read()
        array = numpy_helper.to_array(proto)
    array.flags.writeable = False
    return array


def dtype_of_numpy(np_dtype: np.dtype) -> int:
    """ONNX dtype of a numpy dtype, ml_dtypes' bfloat16/float8/int4 included."""
    try:
        return int(onnx.helper.np_dtype_to_tensor_dtype(np_dtype))
    except (KeyError, ValueError, TypeError):
        raise TypeError(f"numpy dtype {np_dtype} has no ONNX equivalent") from None


def tensor_from_array(array: np.ndarray, dtype: int) -> onnx.TensorProto:
    """A TensorProto holding ``array`` (strings, ml_dtypes and packed types included)."""
    proto = numpy_helper.from_array(np.asarray(array))
    if proto.data_type != dtype:
        proto.data_type = dtype
    return proto


def raw_source(tensor: Tensor) -> WeightSource | None:
    """Where the raw_data bytes of ``tensor`` come from, without copying them; None for
    tensors that cannot be raw (strings)."""
    span = tensor.span
    if isinstance(span, Span):
        return WeightSource(span.length, span.write_to)
    if tensor.dtype == DType.STRING:
        return None
    array = tensor.numpy()
    np_dtype = DType(tensor.dtype).numpy if tensor.dtype in DType._value2member_map_ else None
    if np_dtype is None:  # packed / ml_dtypes: let onnx lay the bytes out
        data = tensor_from_array(array, tensor.dtype).raw_data

        def write_packed(out: BinaryIO) -> None:
            out.write(data)

        return WeightSource(len(data), write_packed)
    contiguous = np.ascontiguousarray(array, dtype=np_dtype)
    if sys.byteorder != "little":  # pragma: no cover - big-endian hosts
        contiguous = contiguous.byteswap()

    def write(out: BinaryIO) -> None:
        out.write(contiguous.reshape(-1).view(np.uint8).data)

    return WeightSource(contiguous.nbytes, write)
