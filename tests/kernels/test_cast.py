"""Cast and CastLike kernels: ONNX's conversion rules on numpy's types; float8, int4 and
string conversions through onnx's reference."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from onnxforge.errors import KernelError
from onnxforge.ir import Op
from onnxforge.kernels import run as run_kernel
from onnxforge.testing import model_from_text

BF16 = np.dtype(ml_dtypes.bfloat16)


def cast(version: int, x: np.ndarray, to: object, **attrs: object) -> np.ndarray:
    op = Op("Cast", name="node_cast", attrs={"to": to, **attrs})
    (out,) = run_kernel(op, [x], {"": version})
    return out


def test_cast_13_float_to_int_truncates_toward_zero() -> None:
    out = cast(13, np.array([1.9, -1.9, 0.5, -0.5, 255.9], np.float32), TensorProto.INT32)
    assert out.dtype == np.int32
    assert out.tolist() == [1, -1, 0, 0, 255]


def test_cast_13_float_to_uint8_in_range_after_truncation() -> None:
    out = cast(13, np.array([255.9, -0.9], np.float32), TensorProto.UINT8)
    assert out.tolist() == [255, 0]


@pytest.mark.parametrize("value", [256.0, -1.0, math.nan, math.inf])
def test_cast_13_float_out_of_the_integer_range_is_a_kernel_error(value: float) -> None:
    with pytest.raises(KernelError, match=r"Cast 'node_cast'.*does not fit uint8"):
        cast(13, np.array([1.0, value], np.float32), TensorProto.UINT8)


def test_cast_13_double_to_int64_edges() -> None:
    out = cast(13, np.array([-(2.0**63), 2.0**62]), TensorProto.INT64)
    assert out.tolist() == [-(2**63), 2**62]
    with pytest.raises(KernelError, match="does not fit int64"):
        cast(13, np.array([2.0**63]), TensorProto.INT64)


def test_cast_13_int_to_int_keeps_the_low_bits() -> None:
    assert cast(13, np.array([200, -200], np.int16), TensorProto.INT8).tolist() == [-56, 56]
    assert cast(13, np.array([-1], np.int64), TensorProto.UINT32).tolist() == [2**32 - 1]
    assert cast(13, np.array([2**64 - 1], np.uint64), TensorProto.INT64).tolist() == [-1]


def test_cast_13_to_bool_is_nonzero() -> None:
    out = cast(13, np.array([0.0, -0.0, math.nan, 0.1], np.float32), TensorProto.BOOL)
    assert out.dtype == np.bool_
    assert out.tolist() == [False, False, True, True]
    assert cast(13, np.array([0, 36], np.int64), TensorProto.BOOL).tolist() == [False, True]
    assert cast(13, np.array([0.0, 2.0], BF16), TensorProto.BOOL).tolist() == [False, True]


def test_cast_13_from_bool_gives_one_and_zero() -> None:
    x = np.array([True, False])
    assert cast(13, x, TensorProto.FLOAT).tolist() == [1.0, 0.0]
    assert cast(13, x, TensorProto.UINT8).tolist() == [1, 0]


def test_cast_13_int_to_float16_beyond_its_range_is_inf() -> None:
    out = cast(13, np.array([70000, -70000, 2049], np.int32), TensorProto.FLOAT16)
    assert out.dtype == np.float16
    assert out.astype(np.float64).tolist() == [math.inf, -math.inf, 2048.0]  # 2049: tie to even


def test_cast_13_float_to_bfloat16_rounds_to_nearest_even() -> None:
    x = np.array([1 + 2.0**-8, 1 + 3 * 2.0**-8, 1e39], np.float64)
    out = cast(13, x, TensorProto.BFLOAT16)
    assert out.dtype == BF16
    assert out.astype(np.float64).tolist() == [1.0, 1 + 2.0**-6, math.inf]


def test_cast_13_bfloat16_to_float_is_exact() -> None:
    out = cast(13, np.array([1.5, -(2.0**100)], BF16), TensorProto.FLOAT)
    assert out.dtype == np.float32
    assert out.tolist() == [1.5, -(2.0**100)]


def test_cast_6_double_to_float_overflows_to_inf() -> None:
    out = cast(6, np.array([1e300, 0.1]), TensorProto.FLOAT)
    assert out.tolist() == [math.inf, float(np.float32(0.1))]


def test_cast_same_type_is_a_copy() -> None:
    x = np.array([1, 2], np.int32)
    out = cast(13, x, TensorProto.INT32)
    assert out.tolist() == [1, 2]
    assert out is not x


def test_cast_1_names_the_type_in_a_string() -> None:
    model = model_from_text(
        """<ir_version: 3, opset_import: ["" : 1]>
        g (float[2] x) => (int8[2] y) { y = Cast <to = "INT8"> (x) }"""
    )
    (op,) = model.graph.topo_order()
    (out,) = run_kernel(op, [np.array([1.9, -1.9], np.float32)], {"": 1})
    assert out.dtype == np.int8
    assert out.tolist() == [1, -1]
    with pytest.raises(KernelError, match="names no element type"):
        cast(1, np.array([1.0], np.float32), "FLOAT42")


def test_cast_19_to_float8_runs_the_reference() -> None:
    x = np.array([1.9, 1000.0], np.float32)
    out = cast(19, x, TensorProto.FLOAT8E4M3FN)
    assert out.dtype == np.dtype(ml_dtypes.float8_e4m3fn)
    # 3 mantissa bits: 1.9 lies between 1.875 and 2, nearer 1.875; 1000 saturates to 448.
    assert out.astype(np.float64).tolist() == [1.875, 448.0]
    out = cast(19, x, TensorProto.FLOAT8E4M3FN, saturate=0)
    assert math.isnan(float(out[1]))


def test_cast_21_to_int4_runs_the_reference() -> None:
    out = cast(21, np.array([3.0, -8.0], np.float32), TensorProto.INT4)
    assert out.dtype == np.dtype(ml_dtypes.int4)
    assert out.astype(np.int64).tolist() == [3, -8]


def test_cast_13_strings_run_the_reference() -> None:
    out = cast(13, np.array(["1.5", "-INF"], dtype=object), TensorProto.FLOAT)
    assert out.dtype == np.float32
    assert out.tolist() == [1.5, -math.inf]


def test_castlike_15_takes_the_type_of_the_second_input() -> None:
    op = Op("CastLike", name="like")
    x = np.array([2.7, -2.7], np.float64)
    (out,) = run_kernel(op, [x, np.zeros(0, np.int16)], {"": 15})
    assert out.dtype == np.int16
    assert out.tolist() == [2, -2]
    (out,) = run_kernel(op, [x, np.zeros(0, BF16)], {"": 21})
    assert out.dtype == BF16
    assert out.astype(np.float64).tolist() == [2.703125, -2.703125]  # 8 significant bits


def test_castlike_19_to_float8_runs_the_reference() -> None:
    op = Op("CastLike")
    like = np.zeros(1, ml_dtypes.float8_e5m2)
    (out,) = run_kernel(op, [np.array([1.9], np.float32), like], {"": 19})
    assert out.dtype == like.dtype
    assert out.astype(np.float64).tolist() == [2.0]  # 2 mantissa bits: 1.75 or 2
