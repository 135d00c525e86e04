"""Softmax and LogSoftmax kernels: versions 1 and 11 see the input as 2-D from ``axis``
(default 1), version 13 normalizes along one axis (default -1)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from onnxforge.errors import KernelError
from onnxforge.ir import Op
from onnxforge.kernels import run as run_kernel


def run(op_type: str, version: int, x: np.ndarray, **attrs: object) -> np.ndarray:
    op = Op(op_type, name="node_softmax", attrs=dict(attrs))
    (out,) = run_kernel(op, [x], {"": version})
    return out


def test_softmax_13_default_axis_is_the_last() -> None:
    x = np.array([[0.0, math.log(3.0)], [0.0, 0.0]], np.float32)
    out = run("Softmax", 13, x)
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, [[0.25, 0.75], [0.5, 0.5]], rtol=1e-7)


@pytest.mark.parametrize("version", [1, 11])
def test_softmax_1_and_11_default_axis_1_flattens_the_rest(version: int) -> None:
    out = run("Softmax", version, np.zeros((1, 2, 2), np.float32))
    assert out.shape == (1, 2, 2)
    assert out.tolist() == [[[0.25, 0.25], [0.25, 0.25]]]  # one row of 4


def test_softmax_13_axis_1_normalizes_that_axis_only() -> None:
    out = run("Softmax", 13, np.zeros((2, 2, 3), np.float32), axis=1)
    assert out.shape == (2, 2, 3)
    assert np.all(out == 0.5)
    out = run("Softmax", 11, np.zeros((2, 2, 3), np.float32), axis=1)
    assert np.all(out == np.float32(1 / 6))  # rows of 2 * 3 elements


def test_softmax_11_negative_axis_counts_from_the_back() -> None:
    out = run("Softmax", 11, np.zeros((2, 2, 3), np.float32), axis=-1)
    assert np.all(out == np.float32(1 / 3))
    out = run("Softmax", 11, np.zeros((2, 2, 3), np.float32), axis=-3)
    assert np.all(out == np.float32(1 / 12))


def test_softmax_13_axis_0() -> None:
    x = np.array([[0.0, 1.0], [0.0, 1.0]], np.float64)
    assert run("Softmax", 13, x, axis=0).tolist() == [[0.5, 0.5], [0.5, 0.5]]


def test_softmax_13_values_against_python() -> None:
    x = np.array([1.0, 2.0, 3.0], np.float32)
    total = math.exp(-2.0) + math.exp(-1.0) + 1.0
    expected = [math.exp(-2.0) / total, math.exp(-1.0) / total, 1.0 / total]
    np.testing.assert_allclose(run("Softmax", 13, x), expected, rtol=1e-6)


def test_softmax_13_large_and_infinite_inputs_are_stable() -> None:
    out = run("Softmax", 13, np.array([[1000.0, 1000.0], [-1000.0, -1000.0]], np.float32))
    assert out.tolist() == [[0.5, 0.5], [0.5, 0.5]]
    out = run("Softmax", 13, np.array([-np.inf, 0.0], np.float32))
    assert out.tolist() == [0.0, 1.0]


def test_log_softmax_13_and_1() -> None:
    out = run("LogSoftmax", 13, np.zeros((1, 2, 2), np.float32))
    np.testing.assert_allclose(out, np.full((1, 2, 2), math.log(0.5)), rtol=1e-7)
    out = run("LogSoftmax", 1, np.zeros((1, 2, 2), np.float32))
    np.testing.assert_allclose(out, np.full((1, 2, 2), math.log(0.25)), rtol=1e-7)
    out = run("LogSoftmax", 13, np.array([-np.inf, 0.0, 1000.0, 1000.0]))
    np.testing.assert_allclose(out, [-np.inf, -1000 - math.log(2), -math.log(2), -math.log(2)])


def test_softmax_13_float16_stays_float16() -> None:
    out = run("Softmax", 13, np.array([0.0, 0.0, 0.0, 0.0], np.float16))
    assert out.dtype == np.float16
    assert out.tolist() == [0.25] * 4


def test_softmax_13_empty_input_gives_empty_output() -> None:
    out = run("Softmax", 13, np.zeros((2, 0), np.float32))
    assert out.shape == (2, 0)


def test_softmax_axis_out_of_range_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"Softmax 'node_softmax'.*axis 2"):
        run("Softmax", 13, np.zeros((2, 2), np.float32), axis=2)
    with pytest.raises(KernelError, match="axis -3"):
        run("Softmax", 11, np.zeros((2, 2), np.float32), axis=-3)
