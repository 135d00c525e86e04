"""Add, Mul, Div and Pow kernels: values worked out by hand, in every version's rules.

Integer results wrap around in the input type, integer Div truncates toward zero as C++ does,
Pow keeps the base's type whatever the exponent's. A random differential test against
onnxruntime covers Add/Mul/Div on the types its CPU kernels take.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper

from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Op
from onnxforge.kernels import run as run_kernel

BF16 = np.dtype(ml_dtypes.bfloat16)


def run(op_type: str, version: int, *inputs: np.ndarray, **attrs: object) -> np.ndarray:
    op = Op(op_type, name=f"node_{op_type.lower()}", attrs=dict(attrs))
    (out,) = run_kernel(op, list(inputs), {"": version})
    return out


# --- Add, Mul -----------------------------------------------------------------------------------


def test_add_14_uint8_250_plus_10_wraps_to_4() -> None:
    out = run("Add", 14, np.array([250], np.uint8), np.array([10], np.uint8))
    assert out.dtype == np.uint8
    assert out.tolist() == [4]


def test_add_13_int64_max_plus_1_wraps_to_min() -> None:
    out = run("Add", 13, np.array([2**63 - 1], np.int64), np.array([1], np.int64))
    assert out.tolist() == [-(2**63)]


def test_mul_14_int8_16_times_16_wraps_to_0_and_int32_65536_squared_to_0() -> None:
    assert run("Mul", 14, np.array([16], np.int8), np.array([16], np.int8)).tolist() == [0]
    out = run("Mul", 7, np.array([65536, 65537], np.int32), np.array([65536, 65537], np.int32))
    # 65537^2 = 2^32 + 2^17 + 1: the low 32 bits are 2^17 + 1
    assert out.tolist() == [0, 131073]


def test_add_13_bfloat16_and_float16_keep_their_type() -> None:
    out = run("Add", 13, np.array([1.0], BF16), np.array([2.0**-8], BF16))
    assert out.dtype == BF16
    # 1 + 2^-8 is halfway between bfloat16's 1 and 1 + 2^-7: ties to even gives 1.
    assert out.astype(np.float64).tolist() == [1.0]
    out = run("Mul", 13, np.array([3.0], np.float16), np.array([1.0 / 3.0], np.float16))
    assert out.dtype == np.float16
    # float16(1/3) = 1365/4096; times 3 = 4095/4096, halfway between float16's 2047/2048 and
    # 1: ties to even gives 1 (float32 would keep 4095/4096).
    assert out.astype(np.float64).tolist() == [1.0]


def test_add_1_legacy_broadcast_axis_0() -> None:
    a = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    out = run("Add", 1, a, np.array([10.0, 20.0], np.float32), broadcast=1, axis=0)
    assert out.tolist() == [[11.0, 12.0, 13.0], [24.0, 25.0, 26.0]]


def test_mul_6_broadcast_0_mismatch_is_a_kernel_error_naming_the_op() -> None:
    with pytest.raises(KernelError, match=r"Mul 'node_mul'.*broadcast=0"):
        run("Mul", 6, np.zeros((2, 3), np.int32), np.zeros(3, np.int32))


def test_mul_6_legacy_int64_wraps() -> None:
    out = run("Mul", 6, np.array([[2**62, 3]], np.int64), np.array([4], np.int64), broadcast=1)
    assert out.tolist() == [[0, 12]]


# --- Div ----------------------------------------------------------------------------------------


def test_div_14_int_truncates_toward_zero() -> None:
    a = np.array([-7, 7, -7, 7, 6, -6, 0], np.int32)
    b = np.array([2, -2, -2, 2, 3, 4, -5], np.int32)
    out = run("Div", 14, a, b)
    assert out.dtype == np.int32
    assert out.tolist() == [-3, -3, 3, 3, 2, -1, 0]


def test_div_14_int8_and_uint8_truncate() -> None:
    out = run("Div", 14, np.array([-128, 127, -1], np.int8), np.array([3, -3, 2], np.int8))
    assert out.tolist() == [-42, -42, 0]
    out = run("Div", 14, np.array([255, 7], np.uint8), np.array([2, 8], np.uint8))
    assert out.tolist() == [127, 0]


def test_div_13_int64_large_values_are_exact() -> None:
    a = np.array([-(2**62) - 1, 2**63 - 1], np.int64)
    out = run("Div", 13, a, np.array([2, 3], np.int64))
    assert out.tolist() == [-(2**61), 3074457345618258602]


def test_div_13_uint64_large_values_are_exact() -> None:
    out = run("Div", 13, np.array([2**64 - 1], np.uint64), np.array([3], np.uint64))
    assert out.tolist() == [6148914691236517205]


def test_div_14_integer_division_by_zero_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"Div 'node_div'.*division by zero"):
        run("Div", 14, np.array([1, 2], np.int32), np.array([1, 0], np.int32))
    with pytest.raises(KernelError, match="division by zero"):
        run("Div", 6, np.array([1], np.int64), np.array([0], np.int64))


def test_div_14_integer_division_by_zero_into_an_empty_result_divides_nothing() -> None:
    out = run("Div", 14, np.zeros((0, 2), np.int32), np.zeros((1, 2), np.int32))
    assert out.shape == (0, 2)


def test_div_7_float_division_by_zero_gives_inf_and_nan() -> None:
    out = run("Div", 7, np.array([1.0, -1.0, 0.0], np.float32), np.zeros(3, np.float32))
    assert out[:2].tolist() == [np.inf, -np.inf]
    assert np.isnan(out[2])


def test_div_13_bfloat16_stays_bfloat16() -> None:
    out = run("Div", 13, np.array([1.0], BF16), np.array([3.0], BF16))
    assert out.dtype == BF16
    # 1/3 rounded to 8 significant bits: 0.333984375 (= 171/512)
    assert out.astype(np.float64).tolist() == [0.333984375]


def test_div_6_legacy_truncates_integers_too() -> None:
    a = np.array([[-7, 7], [9, -9]], np.int32)
    out = run("Div", 6, a, np.array([2, 4], np.int32), broadcast=1, axis=0)
    assert out.tolist() == [[-3, 3], [2, -2]]


# --- Pow ----------------------------------------------------------------------------------------


def test_pow_7_float_example() -> None:
    out = run(
        "Pow", 7, np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    )
    assert out.dtype == np.float32
    assert out.tolist() == [1.0, 32.0, 729.0]


def test_pow_15_float_base_int_exponent_keeps_the_base_type() -> None:
    out = run("Pow", 15, np.array([2.0, 0.5, -3.0], np.float32), np.array([3, -2, 3], np.int64))
    assert out.dtype == np.float32
    assert out.tolist() == [8.0, 4.0, -27.0]


def test_pow_12_int_base_float_exponent_truncates_toward_zero() -> None:
    out = run("Pow", 12, np.array([2, 3, -8], np.int32), np.array([0.5, 2.0, 1.0], np.float32))
    assert out.dtype == np.int32
    assert out.tolist() == [1, 9, -8]


def test_pow_12_int_base_float_exponent_without_an_int_result_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"Pow 'node_pow'.*nan"):
        run("Pow", 12, np.array([-8], np.int32), np.array([0.5], np.float32))
    with pytest.raises(KernelError, match="does not fit"):
        run("Pow", 12, np.array([10], np.int32), np.array([10.0], np.float32))


def test_pow_13_int_powers_wrap_in_the_base_type() -> None:
    out = run("Pow", 13, np.array([3, 2, -2], np.int32), np.array([40, 31, 31], np.int32))
    low32 = 3**40 % 2**32  # 689956897, below 2^31
    assert out.tolist() == [low32, -(2**31), -(2**31)]
    out = run("Pow", 15, np.array([3], np.uint8), np.array([5], np.int64))
    assert out.dtype == np.uint8
    assert out.tolist() == [243 % 256]
    out = run("Pow", 15, np.array([7], np.uint64), np.array([30], np.uint64))
    assert out.dtype == np.uint64
    assert out.tolist() == [7**30 % 2**64]


def test_pow_15_int64_base_with_a_large_exponent_is_exact() -> None:
    out = run("Pow", 15, np.array([-1, 2, 3], np.int64), np.array([2**40 + 1, 62, 39], np.int64))
    assert out.tolist() == [-1, 2**62, 3**39]


def test_pow_15_int_negative_exponents_truncate_like_one_over_the_power() -> None:
    base = np.array([2, -2, 1, -1, -1, 5], np.int64)
    exponent = np.array([-1, -1, -7, -3, -4, 0], np.int64)
    assert run("Pow", 15, base, exponent).tolist() == [0, 0, 1, -1, 1, 1]


def test_pow_15_zero_to_a_negative_int_power_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="zero to a negative power"):
        run("Pow", 15, np.array([0], np.int32), np.array([-1], np.int32))


def test_pow_15_bfloat16_base_stays_bfloat16() -> None:
    out = run("Pow", 15, np.array([3.0], BF16), np.array([2], np.int32))
    assert out.dtype == BF16
    assert out.astype(np.float64).tolist() == [9.0]


def test_pow_7_broadcasts_numpy_style() -> None:
    out = run("Pow", 7, np.array([[1.0], [2.0]], np.float64), np.array([1.0, 2.0, 3.0]))
    assert out.tolist() == [[1.0, 1.0, 1.0], [2.0, 4.0, 8.0]]


def test_pow_1_uses_the_legacy_rule() -> None:
    x = np.array([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]], np.float32)
    out = run("Pow", 1, x, np.array([2.0, 3.0], np.float32), broadcast=1)
    assert out.tolist() == [[1.0, 8.0], [9.0, 64.0], [25.0, 216.0]]
    out = run("Pow", 1, x, np.array([2.0, 0.0, 1.0], np.float32), broadcast=1, axis=0)
    assert out.tolist() == [[1.0, 4.0], [1.0, 1.0], [5.0, 6.0]]
    with pytest.raises(KernelError, match="broadcast=0"):
        run("Pow", 1, x, np.array([2.0, 3.0], np.float32))


# --- properties: Add, Mul, Div against onnxruntime ----------------------------------------------

ORT_TYPES = [
    np.dtype(t)
    for t in (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
              np.uint8, np.uint16, np.uint32, np.uint64)
]  # fmt: skip
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=300,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


@st.composite
def binary_cases(draw: st.DrawFn) -> dict:
    op_type = draw(st.sampled_from(["Add", "Mul", "Div"]))
    dtype = draw(st.sampled_from(ORT_TYPES))
    shapes = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=3, max_side=3))[0]
    if dtype.kind == "f":
        elements = st.floats(width=dtype.itemsize * 8, allow_nan=False)
    else:
        info = np.iinfo(dtype)
        elements = st.integers(int(info.min), int(info.max))
        if op_type == "Div":  # no division by zero (an error here, undefined in onnxruntime)
            elements = elements.filter(bool)
    a = draw(hnp.arrays(dtype, shapes[0], elements=elements))
    b = draw(hnp.arrays(dtype, shapes[1], elements=elements))
    return {"op": op_type, "a": a, "b": b}


@SETTINGS
@given(binary_cases())
def test_add_mul_div_14_agree_with_onnxruntime(ort: object, case: dict) -> None:
    a, b = case["a"], case["b"]
    if case["op"] == "Div" and a.dtype.kind == "i":
        info = np.iinfo(a.dtype)
        if np.any((np.broadcast_to(a, np.broadcast_shapes(a.shape, b.shape)) == info.min)
                  & (b == -1)):  # fmt: skip
            return  # MIN / -1 overflows: undefined behaviour in C++
    code = helper.np_dtype_to_tensor_dtype(a.dtype)
    node = helper.make_node(case["op"], ["a", "b"], ["c"])
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info(n, code, case[n].shape) for n in "ab"],
        [helper.make_tensor_value_info("c", code, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)])
    model.ir_version = 8
    try:
        session = ort.InferenceSession(  # type: ignore[attr-defined]
            model.SerializeToString(), providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # no CPU kernel for this type
        assert "NOT_IMPLEMENTED" in str(e), e
        event(f"{case['op']} {a.dtype}: onnxruntime has no kernel")
        return
    event(f"{case['op']} {a.dtype}: compared")
    (expected,) = session.run(None, {"a": a, "b": b})
    (op,) = from_proto(model).graph.topo_order()
    (got,) = run_kernel(op, [a, b], {"": 14})
    assert got.dtype == expected.dtype
    np.testing.assert_array_equal(got, expected)
