"""The Sub kernel in every version: exact values, wrap-around, legacy broadcasting.

Unit tests assert values worked out by hand (or from the spec's examples); property tests run
random Sub models through the kernel and compare with onnxruntime where it runs them and, always,
with an oracle written here that subtracts element by element in Python (integers modulo 2^bits,
floats in double and rounded once to the type) after placing B by hand.
"""

from __future__ import annotations

import itertools
import math
from typing import Literal

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp
from onnx import helper

from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Op
from onnxforge.kernels import run as run_kernel
from onnxforge.testing import model_from_text

BF16 = np.dtype(ml_dtypes.bfloat16)


def sub(version: int, a: np.ndarray, b: np.ndarray, **attrs: object) -> np.ndarray:
    (out,) = run_kernel(Op("Sub", name="node_sub", attrs=dict(attrs)), [a, b], {"": version})
    return out


def run_text(text: str, *feeds: np.ndarray) -> list[np.ndarray]:
    """Run the single node of a model written in ONNX text."""
    model = model_from_text(text)
    (op,) = model.graph.topo_order()
    return run_kernel(op, list(feeds), dict(model.opset_imports))


# --- integer types: computed in the type, wrapping around ---------------------------------------


def test_sub_14_uint8_3_minus_5_is_254() -> None:
    out = sub(14, np.array([3], np.uint8), np.array([5], np.uint8))
    assert out.dtype == np.uint8
    assert out.tolist() == [254]


def test_sub_14_uint8_scalars_stay_uint8_arrays() -> None:
    out = sub(14, np.array(3, np.uint8), np.array(5, np.uint8))
    assert isinstance(out, np.ndarray)
    assert out.dtype == np.uint8
    assert out.shape == ()
    assert int(out) == 254


def test_sub_14_int8_minus_128_minus_1_wraps_to_127() -> None:
    out = sub(14, np.array([-128, 0], np.int8), np.array([1, -128], np.int8))
    assert out.dtype == np.int8
    assert out.tolist() == [127, -128]


def test_sub_14_int16_and_uint16_wrap() -> None:
    assert sub(14, np.array([-32768], np.int16), np.array([1], np.int16)).tolist() == [32767]
    assert sub(14, np.array([0], np.uint16), np.array([1], np.uint16)).tolist() == [65535]


def test_sub_13_int32_overflow_wraps() -> None:
    out = sub(13, np.array([-(2**31), 2**31 - 1], np.int32), np.array([1, -1], np.int32))
    assert out.dtype == np.int32
    assert out.tolist() == [2**31 - 1, -(2**31)]


def test_sub_7_int64_and_uint64_wrap() -> None:
    out = sub(7, np.array([-(2**63)], np.int64), np.array([1], np.int64))
    assert out.dtype == np.int64
    assert out.tolist() == [2**63 - 1]
    out = sub(7, np.array([0], np.uint64), np.array([2**64 - 1], np.uint64))
    assert out.dtype == np.uint64
    assert out.tolist() == [1]


def test_sub_6_uint32_wraps() -> None:
    out = sub(6, np.array([1, 2], np.uint32), np.array([2, 2], np.uint32))
    assert out.dtype == np.uint32
    assert out.tolist() == [2**32 - 1, 0]


# --- float types: computed and rounded in the type ----------------------------------------------


def test_sub_14_bfloat16_stays_bfloat16() -> None:
    out = sub(14, np.array([1.5], BF16), np.array([0.25], BF16))
    assert out.dtype == BF16
    assert out.astype(np.float64).tolist() == [1.25]


def test_sub_14_bfloat16_result_is_rounded_to_bfloat16() -> None:
    # 256 - 0.5 = 255.5 lies halfway between the bfloat16 neighbours 255 and 256 (8-bit
    # significand): ties to even gives 256. In float32 the result would be 255.5.
    out = sub(14, np.array([256.0], BF16), np.array([0.5], BF16))
    assert out.dtype == BF16
    assert out.astype(np.float64).tolist() == [256.0]


def test_sub_13_float16_stays_float16_and_rounds_in_float16() -> None:
    # 2048 - 0.5 = 2047.5, halfway between float16's 2047 and 2048: ties to even gives 2048.
    out = sub(13, np.array([2048.0, 1.0], np.float16), np.array([0.5, 0.25], np.float16))
    assert out.dtype == np.float16
    assert out.astype(np.float64).tolist() == [2048.0, 0.75]


def test_sub_7_float_infinities_give_nan_and_inf() -> None:
    inf = np.inf
    out = sub(7, np.array([inf, inf, 1.0], np.float32), np.array([inf, -inf, inf], np.float32))
    assert out.dtype == np.float32
    assert np.isnan(out[0])
    assert out[1:].tolist() == [inf, -inf]


def test_sub_14_spec_examples() -> None:
    # onnx-Sub-14-examples.txt: test_sub_example, test_cc_sub, test_cc_sub_bcast
    x = np.array([1.0, 2.0, 3.0], np.float32)
    y = np.array([3.0, 2.0, 1.0], np.float32)
    assert sub(14, x, y).tolist() == [-2.0, 0.0, 2.0]
    x = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    y = np.array([[10.0, 20.0, 30.0], [40.0, 50.0, 60.0]], np.float32)
    assert sub(14, x, y).tolist() == [[-9.0, -18.0, -27.0], [-36.0, -45.0, -54.0]]
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    assert sub(14, x, np.array(0.5, np.float32)).tolist() == [[0.5, 1.5], [2.5, 3.5]]


def test_sub_14_spec_example_sub_bcast_row() -> None:
    # The first row of test_sub_bcast in onnx-Sub-14-examples.txt.
    x = np.array([[[0.16602525, 0.11929144, 0.5103543, -0.07833039, -0.2179262]]], np.float32)
    y = np.array([1.2357849, -0.33475664, 1.0486782, 0.70084286, 0.7489813], np.float32)
    expected = [-1.0697596, 0.4540481, -0.5383239, -0.77917325, -0.9669075]
    out = sub(14, x, y)
    assert out.shape == (1, 1, 5)
    np.testing.assert_allclose(out[0, 0], expected, rtol=1e-6)


# --- numpy broadcasting from 7 ------------------------------------------------------------------


def test_sub_7_broadcasts_both_ways() -> None:
    a = np.array([[1], [2]], np.int32)  # 2x1
    b = np.array([10, 20, 30], np.int32)  # 3
    out = sub(7, a, b)
    assert out.shape == (2, 3)
    assert out.tolist() == [[-9, -19, -29], [-8, -18, -28]]


def test_sub_13_empty_dim_broadcasts_to_empty() -> None:
    out = sub(13, np.zeros((0, 3), np.float32), np.ones((1, 3), np.float32))
    assert out.shape == (0, 3)
    assert out.dtype == np.float32


def test_sub_14_shapes_that_do_not_broadcast_are_a_kernel_error() -> None:
    with pytest.raises(KernelError, match=r"Sub 'node_sub'.*\[2,3\] and \[2\]"):
        sub(14, np.zeros((2, 3), np.float32), np.zeros(2, np.float32))


def test_sub_14_mixed_element_types_are_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="one element type"):
        sub(14, np.zeros(2, np.int32), np.zeros(2, np.int64))


def test_sub_at_opset_21_runs_the_sub_14_kernel() -> None:
    out = run_kernel(Op("Sub"), [np.array([3], np.uint8), np.array([5], np.uint8)], {"": 21})
    assert out[0].tolist() == [254]


# --- legacy broadcasting: Sub-1 and Sub-6 -------------------------------------------------------


def test_sub_6_broadcast_1_axis_1_places_b_3x4_on_dims_1_and_2_of_a_2x3x4x5() -> None:
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = sub(6, a, b, broadcast=1, axis=1)
    assert out.shape == (2, 3, 4, 5)
    assert out.dtype == np.float32
    for i, j, k, m in itertools.product(range(2), range(3), range(4), range(5)):
        # A[i,j,k,m] = 60i + 20j + 5k + m, B[j,k] = 4j + k
        assert out[i, j, k, m] == (60 * i + 20 * j + 5 * k + m) - (4 * j + k)
    assert out[1, 2, 3, 4] == 119 - 11


def test_sub_6_from_onnx_text_reads_broadcast_and_axis() -> None:
    text = """<ir_version: 3, opset_import: ["" : 6]>
    g (int32[2, 3] a, int32[2] b) => (int32[2, 3] c) {
        [node_sub] c = Sub <broadcast = 1, axis = 0> (a, b)
    }"""
    a = np.array([[1, 2, 3], [4, 5, 6]], np.int32)
    b = np.array([100, 200], np.int32)
    (out,) = run_text(text, a, b)
    assert out.tolist() == [[-99, -98, -97], [-196, -195, -194]]


def test_sub_6_broadcast_1_without_axis_aligns_b_with_the_last_dims() -> None:
    a = np.arange(24, dtype=np.int64).reshape(2, 3, 4)
    b = np.array([[0, 1, 2, 3], [10, 11, 12, 13], [20, 21, 22, 23]], np.int64)  # 3x4
    out = sub(6, a, b, broadcast=1)
    expected = [[[12 * i + 4 * j + k - (10 * j + k) for k in range(4)] for j in range(3)]
                for i in range(2)]  # fmt: skip
    assert out.tolist() == expected


def test_sub_6_broadcast_1_axis_minus_1_is_suffix_alignment() -> None:
    a = np.arange(6, dtype=np.float64).reshape(2, 3)
    out = sub(6, a, np.array([1.0, 2.0, 3.0]), broadcast=1, axis=-1)
    assert out.tolist() == [[-1.0, -1.0, -1.0], [2.0, 2.0, 2.0]]


def test_sub_1_broadcast_1_one_element_b_up_to_the_rank_of_a_fits_from_any_axis() -> None:
    a = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    for shape, axis in (
        ((1, 1), {}),
        ((1,), {"axis": 0}),
        ((), {"axis": 5}),
        ((1, 1), {"axis": 1}),
    ):
        out = sub(1, a, np.full(shape, 0.5, np.float32), broadcast=1, **axis)
        assert out.tolist() == [[0.5, 1.5], [2.5, 3.5]], (shape, axis)


@pytest.mark.parametrize(("a", "b"), [((3,), (1, 1)), ((1,), (1, 1)), ((), (1,))])
def test_sub_1_broadcast_1_one_element_b_of_higher_rank_is_a_kernel_error(
    a: tuple, b: tuple
) -> None:
    with pytest.raises(KernelError, match="rank of B .* exceeds rank of A"):
        sub(1, np.ones(a, np.float32), np.ones(b, np.float32), broadcast=1)


def test_sub_1_ignores_consumed_inputs() -> None:
    a = np.array([1.0, 2.0], np.float32)
    out = sub(1, a, a, consumed_inputs=[0, 0])
    assert out.tolist() == [0.0, 0.0]


def test_sub_6_leading_and_trailing_ones_of_b_broadcast() -> None:
    a = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    b = np.array([[[100], [200], [300]]], np.int32)  # 1x3x1 on all of A: B[0, j, 0]
    out = sub(6, a, b, broadcast=1, axis=0)
    assert out.tolist() == [
        [[12 * i + 4 * j + k - 100 * (j + 1) for k in range(4)] for j in range(3)]
        for i in range(2)
    ]


def test_sub_6_broadcast_0_shape_mismatch_is_a_kernel_error_naming_the_op() -> None:
    a = np.zeros((2, 3, 4, 5), np.float32)
    b = np.zeros((3, 4), np.float32)
    with pytest.raises(KernelError, match=r"Sub 'node_sub'.*broadcast=0.*\[2,3,4,5\].*\[3,4\]"):
        sub(6, a, b)
    with pytest.raises(KernelError, match="Sub 'node_sub'"):
        sub(6, a, b, broadcast=0, axis=1)


def test_sub_6_broadcast_0_equal_shapes_subtracts() -> None:
    a = np.array([5, 7], np.int32)
    assert sub(6, a, np.array([1, 2], np.int32), broadcast=0).tolist() == [4, 5]


def test_sub_1_broadcast_0_is_the_default() -> None:
    with pytest.raises(KernelError, match="broadcast=0"):
        sub(1, np.zeros((2, 3), np.float32), np.zeros(3, np.float32))


def test_sub_6_broadcast_1_b_that_does_not_fit_at_the_suffix_is_a_kernel_error() -> None:
    a = np.zeros((2, 3, 4, 5), np.float32)
    with pytest.raises(KernelError, match=r"Sub 'node_sub'.*legacy"):
        sub(6, a, np.zeros((3, 4), np.float32), broadcast=1)


def test_sub_6_inner_ones_of_b_do_not_expand() -> None:
    # "1-dim expansion doesn't work yet": B's 1 between two real dims must equal A's dim.
    a = np.zeros((2, 3, 4), np.float32)
    with pytest.raises(KernelError, match="legacy"):
        sub(6, a, np.zeros((2, 1, 4), np.float32), broadcast=1, axis=0)


def test_sub_6_axis_out_of_range_is_a_kernel_error() -> None:
    a = np.zeros((2, 3), np.float32)
    with pytest.raises(KernelError, match="axis 1"):
        sub(6, a, np.zeros((2, 3), np.float32), broadcast=1, axis=1)


def test_sub_6_b_of_higher_rank_than_a_is_a_kernel_error() -> None:
    with pytest.raises(KernelError, match="rank"):
        sub(6, np.zeros(3, np.float32), np.zeros((2, 3), np.float32), broadcast=1)


def test_sub_6_never_broadcasts_a() -> None:
    # numpy would give 2x3; the legacy rule gives A's shape or nothing.
    with pytest.raises(KernelError):
        sub(6, np.zeros((1, 3), np.float32), np.zeros((2, 3), np.float32), broadcast=1)


# --- properties: random Sub models against onnxruntime and an element-wise oracle ---------------

# Type constraint T of each Sub version, as onnx-Sub-all-versions.rst lists it.
F16, F32, F64 = np.dtype(np.float16), np.dtype(np.float32), np.dtype(np.float64)
I8, I16, I32, I64 = (np.dtype(t) for t in (np.int8, np.int16, np.int32, np.int64))
U8, U16, U32, U64 = (np.dtype(t) for t in (np.uint8, np.uint16, np.uint32, np.uint64))
SUB_TYPES = {
    1: [F16, F32, F64],
    6: [F16, F32, F64, I32, I64, U32, U64],
    7: [F16, F32, F64, I32, I64, U32, U64],
    13: [F16, F32, F64, I32, I64, U32, U64, BF16],
    14: [F16, F32, F64, I32, I64, U32, U64, BF16, I8, I16, U8, U16],
}
ONNX_TYPE = {
    F16: onnx.TensorProto.FLOAT16, F32: onnx.TensorProto.FLOAT, F64: onnx.TensorProto.DOUBLE,
    BF16: onnx.TensorProto.BFLOAT16, I8: onnx.TensorProto.INT8, I16: onnx.TensorProto.INT16,
    I32: onnx.TensorProto.INT32, I64: onnx.TensorProto.INT64, U8: onnx.TensorProto.UINT8,
    U16: onnx.TensorProto.UINT16, U32: onnx.TensorProto.UINT32, U64: onnx.TensorProto.UINT64,
}  # fmt: skip

WIDTH: dict[int, Literal[16, 32, 64]] = {2: 16, 4: 32, 8: 64}
SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=400,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)


def exact_difference(x: object, y: object, dtype: np.dtype) -> object:
    """One element of A - B: integers modulo 2^bits, floats in double rounded once to dtype
    (double has more than twice the bits of float32, so this is the correctly rounded
    difference IEEE subtraction in the type gives)."""
    if dtype.kind in "iu":
        bits = dtype.itemsize * 8
        r = (int(x) - int(y)) % (1 << bits)  # type: ignore[call-overload]
        if dtype.kind == "i" and r >= 1 << (bits - 1):
            r -= 1 << bits
        return r
    return float(x) - float(y)  # type: ignore[arg-type]


def numpy_rule(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The broadcast shape by ONNX's multidirectional rule, written out; None if none."""
    rank = max(len(a), len(b))
    pa, pb = (1,) * (rank - len(a)) + a, (1,) * (rank - len(b)) + b
    out = []
    for x, y in zip(pa, pb, strict=True):
        if x != y and 1 not in (x, y):
            return None
        out.append(y if x == 1 else x)
    return tuple(out)


def legacy_start(
    a: tuple[int, ...], b: tuple[int, ...], broadcast: int | None, axis: int | None
) -> int | None:
    """Where B starts on A under Sub-1/6 (-1 for a one-element B), or None if B does not fit.

    broadcast=0: equal shapes. broadcast=1: rank(B) <= rank(A); a one-element B fits from any
    axis; otherwise B, its leading and trailing 1s set aside, must equal A's dims from ``axis``
    (suffix when absent).
    """
    if not broadcast:
        return 0 if a == b else None
    if len(b) > len(a):
        return None
    if math.prod(b) == 1:
        return -1
    start = len(a) - len(b) if axis in (None, -1) else axis
    assert start is not None
    if not 0 <= start <= len(a) - len(b):
        return None
    core = [j for j, d in enumerate(b) if d != 1]
    lo, hi = core[0], core[-1] + 1
    return start if b[lo:hi] == a[start + lo : start + hi] else None


def oracle(
    a: np.ndarray, b: np.ndarray, out_shape: tuple[int, ...], index_b: object
) -> np.ndarray:
    """A - B element by element; ``index_b`` maps an output index to B's."""
    rank = len(out_shape)
    out = np.empty(out_shape, dtype=a.dtype)
    for idx in itertools.product(*(range(d) for d in out_shape)):
        ia = tuple(0 if d == 1 else idx[rank - a.ndim + k] for k, d in enumerate(a.shape))
        value = exact_difference(a[ia], b[index_b(idx)], a.dtype)  # type: ignore[operator]
        out[idx] = np.array(value, dtype=np.float64 if a.dtype.kind == "f" or a.dtype == BF16
                            else object).astype(a.dtype)  # fmt: skip
    return out


@st.composite
def legacy_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...], dict]:
    """A and B for Sub-1/6: mostly fitting (B a slice of A with outer dims set to 1, or one
    element), sometimes not."""
    a = tuple(draw(st.lists(st.integers(1, 3), max_size=4)))
    attrs: dict[str, int] = {}
    kind = draw(st.sampled_from(["slice", "slice", "slice", "one", "same", "random", "random"]))
    if kind == "same":
        b = a
        if draw(st.booleans()):
            attrs["broadcast"] = draw(st.sampled_from([0, 1]))
        return a, b, attrs
    attrs["broadcast"] = 1 if draw(st.integers(0, 7)) else 0
    if kind == "one":
        b = (1,) * draw(st.integers(0, 5))
    elif kind == "slice":
        start = draw(st.integers(0, len(a)))
        end = draw(st.integers(start, len(a)))
        part = list(a[start:end])
        if draw(st.booleans()) and part:
            part[0] = 1
        if draw(st.booleans()) and part:
            part[-1] = 1
        b = tuple(part)
        if end < len(a) or draw(st.booleans()):
            attrs["axis"] = start
        elif draw(st.booleans()):
            attrs["axis"] = -1
    else:
        b = tuple(draw(st.lists(st.integers(1, 3), max_size=4)))
        if draw(st.booleans()):
            attrs["axis"] = draw(st.integers(-2, 4))
    return a, b, attrs


def values(dtype: np.dtype, shape: tuple[int, ...]) -> st.SearchStrategy[np.ndarray]:
    """Arrays over the type's whole range (NaN and infinities included for floats)."""
    if dtype == BF16:
        return hnp.arrays(F32, shape, elements=st.floats(width=32)).map(lambda x: x.astype(BF16))
    if dtype.kind == "f":
        return hnp.arrays(dtype, shape, elements=st.floats(width=WIDTH[dtype.itemsize]))
    return hnp.arrays(dtype, shape)


@st.composite
def sub_cases(draw: st.DrawFn) -> dict:
    version = draw(st.sampled_from([1, 6, 7, 13, 14]))
    dtype = draw(st.sampled_from(SUB_TYPES[version]))
    if version < 7:
        a, b, attrs = draw(legacy_shapes())
    else:
        attrs = {}
        if draw(st.integers(0, 3)):
            a, b = draw(hnp.mutually_broadcastable_shapes(num_shapes=2, max_dims=4, max_side=3))[0]
        else:  # sometimes shapes that may not broadcast
            a, b = (tuple(draw(st.lists(st.integers(0, 3), max_size=3))) for _ in range(2))
    return {
        "version": version,
        "attrs": attrs,
        "a": draw(values(dtype, a)),
        "b": draw(values(dtype, b)),
    }


def sub_model(case: dict) -> onnx.ModelProto:
    dtype = ONNX_TYPE[case["a"].dtype]
    inputs = [helper.make_tensor_value_info(name, dtype, case[name].shape) for name in ("a", "b")]
    node = helper.make_node("Sub", ["a", "b"], ["c"], name="sub", **case["attrs"])
    graph = helper.make_graph(
        [node], "g", inputs, [helper.make_tensor_value_info("c", dtype, None)]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case["version"])])
    model.ir_version = 3 if case["version"] < 7 else 8
    return model


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


def run_ort(ort: object, model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> object:
    """The output when onnxruntime runs the model; "unsupported" when it has no kernel for
    this version or type; "failed" when it refuses the model or fails running it."""
    options = ort.SessionOptions()  # type: ignore[attr-defined]
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # type: ignore[attr-defined]
    try:
        session = ort.InferenceSession(  # type: ignore[attr-defined]
            model.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
    except Exception as e:  # onnxruntime raises its own exception types
        if "NOT_IMPLEMENTED" in str(e) or "Type Error" in str(e) or "opset" in str(e):
            return "unsupported"
        return "failed"
    try:
        return session.run(None, feeds)[0]
    except Exception:
        return "failed"


@SETTINGS
@given(sub_cases())
def test_random_sub_models_agree_with_onnxruntime_and_the_oracle(ort: object, case: dict) -> None:
    version, attrs = case["version"], case["attrs"]
    a, b = case["a"], case["b"]
    if version >= 7:
        shape = numpy_rule(a.shape, b.shape)

        def index_b(idx: tuple[int, ...]) -> tuple[int, ...]:
            rank = len(idx)
            return tuple(0 if d == 1 else idx[rank - b.ndim + k] for k, d in enumerate(b.shape))

    else:
        start = legacy_start(a.shape, b.shape, attrs.get("broadcast"), attrs.get("axis"))
        shape = None if start is None else a.shape

        def index_b(idx: tuple[int, ...]) -> tuple[int, ...]:
            if start == -1:
                return (0,) * b.ndim
            assert start is not None
            return tuple(0 if d == 1 else idx[start + k] for k, d in enumerate(b.shape))

    model = sub_model(case)
    (op,) = from_proto(model).graph.topo_order()
    try:
        (got,) = run_kernel(op, [a, b], {"": version})
    except KernelError:
        got = None
    event(f"Sub-{version}: {'error' if shape is None else 'ok'}")

    if shape is None:
        assert got is None, f"accepted shapes {a.shape} and {b.shape} with {attrs}"
    else:
        assert got is not None, f"refused shapes {a.shape} and {b.shape} with {attrs}"
        expected = oracle(a, b, shape, index_b)
        assert got.dtype == a.dtype
        assert got.shape == shape
        if got.dtype.kind == "V":  # ml_dtypes (bfloat16): NaN equals NaN only as a float
            got, expected = got.astype(np.float32), expected.astype(np.float32)
        np.testing.assert_array_equal(got, expected)

    if a.dtype != BF16:
        verdict = run_ort(ort, model, {"a": a, "b": b})
        event(f"onnxruntime Sub-{version}: {verdict if isinstance(verdict, str) else 'ran'}")
        if isinstance(verdict, np.ndarray):
            assert got is not None, "onnxruntime runs what the kernel refuses"
            assert verdict.dtype == got.dtype
            np.testing.assert_array_equal(got, verdict)
        elif verdict == "failed" and version >= 7:
            assert got is None, "the kernel runs what onnxruntime refuses"
