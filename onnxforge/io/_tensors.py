"""Tensor data <-> TensorProto: decoding for exotic dtypes, raw bytes for writing."""

from __future__ import annotations

__all__ = ["data_problem", "decode", "dtype_of_numpy", "raw_source", "tensor_from_array"]

import sys
from typing import BinaryIO

import numpy as np
import onnx
from onnx import numpy_helper

from onnxforge.errors import OnnxForgeError
from onnxforge.io._files import Span
from onnxforge.io._wire import WeightSource
from onnxforge.ir import DType, Tensor, dtype_name

_T = onnx.TensorProto
_TYPED_FIELD: dict[int, tuple[str, int]] = {  # dtype -> (field when not raw, values each)
    _T.FLOAT: ("float_data", 1),
    _T.COMPLEX64: ("float_data", 2),
    _T.DOUBLE: ("double_data", 1),
    _T.COMPLEX128: ("double_data", 2),
    _T.INT64: ("int64_data", 1),
    _T.UINT32: ("uint64_data", 1),
    _T.UINT64: ("uint64_data", 1),
    _T.STRING: ("string_data", 1),
    **{
        d: ("int32_data", 1)
        for d in (
            _T.INT32, _T.INT16, _T.INT8, _T.UINT16, _T.UINT8, _T.BOOL, _T.FLOAT16, _T.BFLOAT16,
        )
    },
}  # fmt: skip


def data_problem(tensor: Tensor) -> str | None:
    """Why the tensor's data cannot be its dtype and dims (a byte count or a value count that
    differs from what they need), or None. Packed and 8-bit float types held in typed fields
    are left to ``decode``, which raises on them instead."""
    if tensor.dtype not in DType._value2member_map_ or tensor.dtype == DType.UNDEFINED:
        return f"has the unknown element type {tensor.dtype}"
    if any(d < 0 for d in tensor.shape):
        return f"has a negative dim in {list(tensor.shape)}"
    count = tensor.size
    if count >= 1 << 63:
        return f"has {list(tensor.shape)}: more elements ({count}) than int64 counts"
    name = dtype_name(tensor.dtype)
    bits = DType(tensor.dtype).bits
    needed = None if bits is None else (count * bits + 7) // 8
    if tensor.span is not None:
        if needed is not None and tensor.span.length != needed:
            return (
                f"holds {tensor.span.length} bytes, but {name}{list(tensor.shape)} needs {needed}"
            )
        return None
    proto = tensor.proto
    if proto is None or proto.data_location == _T.EXTERNAL:
        return None
    if proto.HasField("raw_data"):
        if tensor.dtype == DType.STRING:
            return "is a string tensor with raw_data"
        have = len(proto.raw_data)
        if have != needed:
            return f"holds {have} bytes, but {name}{list(tensor.shape)} needs {needed}"
        return None
    typed = _TYPED_FIELD.get(tensor.dtype)
    if typed is None:
        return None
    field, per = typed
    have = len(getattr(proto, field))
    if have != count * per and not (have == 0 and count == 0):
        what = f"{count * per} {field} values" if per == 1 else f"{count * per} ({per} each)"
        return f"holds {have} {field} values, but {name}{list(tensor.shape)} needs {what}"
    return None


def decode(tensor: Tensor) -> np.ndarray:
    """The array of a tensor whose data numpy cannot view directly (typed fields, packed or
    ml_dtypes types); read-only like the views. Data that does not fit the dtype and dims
    raises OnnxForgeError."""
    problem = data_problem(tensor)
    if problem is not None:
        raise OnnxForgeError(f"tensor {_name(tensor)} {problem}")
    try:
        if tensor.proto is not None:
            array = numpy_helper.to_array(tensor.proto)
        else:
            proto = onnx.TensorProto(data_type=tensor.dtype, dims=tensor.shape)
            if tensor.span is not None:
                proto.raw_data = tensor.span.read()
            array = numpy_helper.to_array(proto)
        array = array.reshape(tensor.shape)
    except (ValueError, TypeError, KeyError, IndexError) as exc:
        raise OnnxForgeError(f"tensor {_name(tensor)} cannot be decoded: {exc}") from None
    array.flags.writeable = False
    return array


def _name(tensor: Tensor) -> str:
    meta = tensor.proto if tensor.proto is not None else tensor.meta
    name = getattr(meta, "name", "")
    return repr(name) if name else f"{dtype_name(tensor.dtype)}{list(tensor.shape)}"


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
    if tensor.proto is not None and tensor.proto.HasField("raw_data"):
        raw = tensor.proto.raw_data  # the bytes as read: nothing to convert

        def write_raw(out: BinaryIO) -> None:
            out.write(raw)

        return WeightSource(len(raw), write_raw)
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


class _OnnxCodec:
    """onnx's decoding for ``Tensor.numpy`` and ``Tensor.from_numpy`` (see Tensor.codec)."""

    decode = staticmethod(decode)
    dtype_of_numpy = staticmethod(dtype_of_numpy)


Tensor.codec = _OnnxCodec()
