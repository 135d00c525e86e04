"""QuantizeLinear and DequantizeLinear kernels: per tensor, per axis and blocked, rounding half
to even and saturation; float8 and 4-bit types through onnx's reference."""

from __future__ import annotations

import math

import ml_dtypes
import numpy as np
import pytest
from onnx import TensorProto

from onnxforge.errors import KernelError
from onnxforge.ir import Op
from onnxforge.kernels import run as run_kernel


def q(version: int, *inputs: np.ndarray | None, **attrs: object) -> np.ndarray:
    op = Op("QuantizeLinear", name="node_q", attrs=dict(attrs))
    (out,) = run_kernel(op, list(inputs), {"": version})
    return out


def dq(version: int, *inputs: np.ndarray | None, **attrs: object) -> np.ndarray:
    op = Op("DequantizeLinear", name="node_dq", attrs=dict(attrs))
    (out,) = run_kernel(op, list(inputs), {"": version})
    return out


def f32(*values: float) -> np.ndarray:
    return np.array(values, np.float32)


ONE = np.array(1.0, np.float32)


# --- QuantizeLinear -----------------------------------------------------------------------------


def test_quantize_10_without_zero_point_is_uint8_and_saturates() -> None:
    out = q(10, f32(0.0, 1.0, 2.5, 3.5, -1.0, 300.0, math.inf), ONE)
    assert out.dtype == np.uint8
    assert out.tolist() == [0, 1, 2, 4, 0, 255, 255]


def test_quantize_13_rounds_half_to_even_after_dividing() -> None:
    out = q(13, f32(0.5, 1.5, 2.5, -0.5, -1.5, -2.5), ONE, np.array(0, np.int8))
    assert out.dtype == np.int8
    assert out.tolist() == [0, 2, 2, 0, -2, -2]


def test_quantize_13_adds_the_zero_point_and_saturates_int8() -> None:
    out = q(13, f32(-2.5, 2.5, 1000.0, -1000.0), np.array(0.5, np.float32), np.array(10, np.int8))
    assert out.tolist() == [5, 15, 127, -128]  # -5 + 10, 5 + 10


def test_quantize_13_per_axis() -> None:
    x = np.array([[4.0, 4.0, 4.0], [8.0, 8.0, 8.0]], np.float32)
    scale = f32(1.0, 2.0, 4.0)
    zero_point = np.array([0, 1, 2], np.uint8)
    assert q(13, x, scale, zero_point, axis=1).tolist() == [[4, 3, 3], [8, 5, 4]]
    assert q(13, x.T, scale, zero_point, axis=-2).tolist() == [[4, 8], [3, 5], [3, 4]]


def test_quantize_13_per_axis_scale_of_the_wrong_length_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"QuantizeLinear 'node_q'.*y_scale of shape \[2\]"):
        q(13, np.zeros((2, 3), np.float32), f32(1.0, 2.0), axis=1)


def test_quantize_10_takes_only_a_scalar_scale() -> None:
    with pytest.raises(KernelError, match="must be a scalar"):
        q(10, np.zeros((2, 2), np.float32), f32(1.0, 2.0))


def test_quantize_21_blocked() -> None:
    x = np.array([[1.0, 2.0, 3.0, 4.0, 5.0], [6.0, 7.0, 8.0, 9.0, 10.0]], np.float32)
    scale = np.array([[1.0, 2.0, 4.0], [2.0, 4.0, 8.0]], np.float32)  # blocks of 2 along axis 1
    zero_point = np.array([[0, 1, 2], [3, 4, 5]], np.int8)
    out = q(21, x, scale, zero_point, axis=1, block_size=2)
    # row 0: 1/1, 2/1, 3/2, 4/2, 5/4 -> 1, 2, 2 (1.5 to even), 2, 1 (1.25); plus 0, 0, 1, 1, 2
    # row 1: 6/2, 7/2, 8/4, 9/4, 10/8 -> 3, 4 (3.5 to even), 2, 2, 1; plus 3, 3, 4, 4, 5
    assert out.tolist() == [[1, 2, 3, 3, 3], [6, 7, 6, 6, 6]]


def test_quantize_21_block_size_that_does_not_match_the_scale_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="block_size 2"):
        q(21, np.zeros((2, 5), np.float32), np.ones((2, 2), np.float32), axis=1, block_size=2)


def test_quantize_21_output_dtype_int16_and_uint16() -> None:
    out = q(21, f32(40000.4, -3.5), ONE, output_dtype=TensorProto.INT16)
    assert out.dtype == np.int16
    assert out.tolist() == [32767, -4]
    out = q(21, f32(40000.5, -3.5), ONE, output_dtype=TensorProto.UINT16)
    assert out.dtype == np.uint16
    assert out.tolist() == [40000, 0]


def test_quantize_21_output_dtype_contradicting_the_zero_point_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="output_dtype"):
        q(21, f32(1.0), ONE, np.array(0, np.uint8), output_dtype=TensorProto.INT8)


def test_quantize_nan_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="NaN"):
        q(19, f32(1.0, math.nan), ONE, np.array(0, np.int8))


def test_quantize_19_int32_input() -> None:
    out = q(19, np.array([7, -7, 300], np.int32), np.array(2.0, np.float32), np.array(0, np.int8))
    assert out.tolist() == [4, -4, 127]  # 3.5 -> 4, -3.5 -> -4


def test_quantize_19_float16_divides_in_float16() -> None:
    x = np.array([3.0, 1000.0], np.float16)
    out = q(19, x, np.array(2.0, np.float16), np.array(0, np.uint8))
    assert out.tolist() == [2, 255]  # 1.5 -> 2


def test_quantize_23_divides_in_the_scale_type_or_precision() -> None:
    x = f32(2.5000002)  # float32 just above 2.5; float16 rounds it to 2.5
    zero_point = np.array(0, np.uint8)
    assert q(23, x, ONE, zero_point).tolist() == [3]
    assert q(23, x, ONE, zero_point, precision=TensorProto.FLOAT16).tolist() == [2]
    assert q(23, x, np.array(1.0, np.float16), zero_point).tolist() == [2]


def test_quantize_21_to_int4_runs_the_reference() -> None:
    out = q(21, f32(1.0, 10.0, -10.0), ONE, output_dtype=TensorProto.INT4)
    assert out.dtype == np.dtype(ml_dtypes.int4)
    assert out.astype(np.int64).tolist() == [1, 7, -8]


def test_quantize_19_to_float8_runs_the_reference() -> None:
    zero_point = np.zeros((), ml_dtypes.float8_e4m3fn)
    out = q(19, f32(1.9, 1000.0), ONE, zero_point)
    assert out.dtype == zero_point.dtype
    assert out.astype(np.float64).tolist() == [1.875, 448.0]


# --- DequantizeLinear ---------------------------------------------------------------------------


def test_dequantize_10_per_tensor() -> None:
    x = np.array([0, 128, 255], np.uint8)
    out = dq(10, x, np.array(2.0, np.float32), np.array(128, np.uint8))
    assert out.dtype == np.float32
    assert out.tolist() == [-256.0, 0.0, 254.0]


def test_dequantize_13_per_axis() -> None:
    x = np.array([[1, 2], [3, 4]], np.uint8)
    out = dq(13, x, f32(0.5, 2.0), np.array([1, 2], np.uint8), axis=1)
    assert out.tolist() == [[0.0, 0.0], [1.0, 4.0]]
    out = dq(13, x, f32(0.5, 2.0), np.array([1, 2], np.uint8), axis=0)
    assert out.tolist() == [[0.0, 0.5], [2.0, 4.0]]


def test_dequantize_13_int8_without_zero_point_and_int32() -> None:
    assert dq(13, np.array([-128, 127], np.int8), f32(0.5)).tolist() == [-64.0, 63.5]
    out = dq(13, np.array([2**31 - 1], np.int32), np.array(1.0, np.float32))
    assert out.tolist() == [2.0**31]  # the nearest float32


def test_dequantize_19_float16_scale_gives_float16() -> None:
    out = dq(19, np.array([100], np.int8), np.array(0.1, np.float16))
    assert out.dtype == np.float16
    # float16(0.1) = 0.0999755859375; times 100 = 9.99755859375, which rounds to 10 in float16
    assert out.astype(np.float64).tolist() == [10.0]


def test_dequantize_21_blocked() -> None:
    x = np.array([[1, 2, 3], [4, 5, 6]], np.int8)
    scale = np.array([[1.0, 10.0], [100.0, 1000.0]], np.float32)  # blocks of 2 along axis 1
    out = dq(21, x, scale, np.array([[1, 0], [0, 1]], np.int8), axis=1, block_size=2)
    assert out.tolist() == [[0.0, 1.0, 30.0], [400.0, 500.0, 5000.0]]


def test_dequantize_23_output_dtype() -> None:
    out = dq(23, np.array([3], np.uint8), ONE, output_dtype=TensorProto.FLOAT16)
    assert out.dtype == np.float16
    assert out.tolist() == [3.0]


def test_dequantize_zero_point_of_another_type_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"DequantizeLinear 'node_dq'.*x_zero_point"):
        dq(13, np.array([1], np.uint8), ONE, np.array(0, np.int8))


def test_dequantize_19_float8_runs_the_reference() -> None:
    x = np.array([1.875], ml_dtypes.float8_e4m3fn)
    assert dq(19, x, np.array(2.0, np.float32)).tolist() == [3.75]


def test_dequantize_21_int4_runs_the_reference() -> None:
    x = np.array([-8, 7], ml_dtypes.int4)
    assert dq(21, x, np.array(0.5, np.float32)).tolist() == [-4.0, 3.5]
