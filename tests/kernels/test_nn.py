"""The reduction and matrix-product kernels (kernels/nn.py) in every schema version.

Unit tests on small models from ONNX text with literal expected values; onnxruntime as the
independent oracle for every version it implements; for Gemm-1/6 (which it does not) the
formula alpha * A @ B + beta * C written out with numpy here.
"""

from __future__ import annotations

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import helper

from onnxforge import opset
from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Model
from onnxforge.kernels import KERNELS
from onnxforge.kernels import run as run_op
from onnxforge.testing import model_from_text

NN_OPS = ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "MatMul", "Gemm"]
INPUT_AXES_FROM = {"ReduceSum": 13, "ReduceMean": 18, "ReduceMax": 18, "ReduceMin": 18,
                   "ReduceProd": 18}  # fmt: skip


def run_model(model: Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    (op,) = model.graph.topo_order()
    args = [None if v is None else feeds[v.name] for v in model.graph.inputs_of(op)]
    return run_op(op, args, dict(model.opset_imports))


def run(version: int, signature: str, body: str, **feeds: np.ndarray) -> np.ndarray:
    """``g (<signature>) => (y) { <body> }`` at opset ``version``; the one output."""
    text = (
        f'<ir_version: 10, opset_import: ["" : {version}]> '
        f"g ({signature}) => (float[N] y) {{ {body} }}"
    )
    (y,) = run_model(model_from_text(text), feeds)
    return y


def i64(*values: int) -> np.ndarray:
    return np.array(values, dtype=np.int64)


X = np.array([[1, 2, 3], [4, 5, 6]], dtype=np.float32)


@pytest.mark.parametrize("op_type", NN_OPS)
def test_every_version_of_the_op_has_a_kernel(op_type: str) -> None:
    assert KERNELS.versions(op_type) == opset.schema_versions(op_type)


# --- reductions -------------------------------------------------------------------------------


def reduce(
    op_type: str, version: int, x: np.ndarray, axes: list[int] | None, **attrs: object
) -> np.ndarray:
    """``op_type`` over ``axes`` (attribute or input as the version takes it)."""
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    names, infos, feeds = ["x"], [helper.make_tensor_value_info("x", elem, x.shape)], {"x": x}
    if axes is not None:
        if version >= INPUT_AXES_FROM[op_type]:
            names.append("a")
            infos.append(helper.make_tensor_value_info("a", onnx.TensorProto.INT64, [len(axes)]))
            feeds["a"] = np.array(axes, dtype=np.int64)
        else:
            attrs["axes"] = axes  # type: ignore[assignment]
    node = helper.make_node(op_type, names, ["y"], **attrs)  # type: ignore[arg-type]
    graph = helper.make_graph([node], "g", infos, [onnx.ValueInfoProto(name="y")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    (y,) = run_model(from_proto(proto), feeds)
    return y


@pytest.mark.parametrize(
    ("op_type", "want"),
    [("ReduceSum", [6, 15]), ("ReduceMean", [2, 5]), ("ReduceMax", [3, 6]),
     ("ReduceMin", [1, 4]), ("ReduceProd", [6, 120])],
)  # fmt: skip
def test_reduce_over_the_last_axis_keeps_it_by_default(op_type: str, want: list) -> None:
    for version in opset.schema_versions(op_type):
        y = reduce(op_type, version, X, [1])
        assert y.dtype == np.float32 and y.tolist() == [[w] for w in want], version
        y = reduce(op_type, version, X, [1], keepdims=0)
        assert y.tolist() == want, version


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMax", "ReduceProd"])
def test_reduce_without_axes_reduces_everything(op_type: str) -> None:
    want = {"ReduceSum": 21, "ReduceMean": 3.5, "ReduceMax": 6, "ReduceProd": 720}[op_type]
    for version in opset.schema_versions(op_type):
        assert reduce(op_type, version, X, None).tolist() == [[want]], version


@pytest.mark.parametrize("op_type", ["ReduceSum", "ReduceMean", "ReduceMin"])
def test_reduce_with_empty_axes_and_noop_returns_the_input(op_type: str) -> None:
    version = INPUT_AXES_FROM[op_type]
    for axes in (None, list[int]()):
        y = reduce(op_type, version, X, axes, noop_with_empty_axes=1)
        assert y.tolist() == X.tolist() and not np.shares_memory(X, y)
        y = reduce(op_type, version, X, axes, keepdims=0)  # no noop: every axis
        assert y.shape == ()


def test_reduce_sum_13_empty_axes_input_reduces_everything() -> None:
    y = run(13, "float[2, 3] x, int64[0] a", "y = ReduceSum <keepdims = 0> (x, a)",
            x=X, a=np.zeros(0, np.int64))  # fmt: skip
    assert y.shape == () and float(y) == 21


@pytest.mark.parametrize(
    ("op_type", "dtype", "want"),
    [
        ("ReduceSum", np.float32, 0),
        ("ReduceProd", np.int32, 1),
        ("ReduceMax", np.float32, -np.inf),
        ("ReduceMax", np.int8, -128),
        ("ReduceMax", np.bool_, False),
        ("ReduceMin", np.float16, np.inf),
        ("ReduceMin", np.uint16, 65535),
        ("ReduceMin", np.bool_, True),
    ],
)
def test_reduce_over_an_empty_set_gives_the_identity(op_type: str, dtype: type, want) -> None:
    x: np.ndarray = np.zeros((2, 0, 3), dtype=dtype)
    version = opset.schema_versions(op_type)[-1]
    y = reduce(op_type, version, x, [1], keepdims=0)
    assert y.dtype == np.dtype(dtype) and y.shape == (2, 3)
    assert y.tolist() == [[want] * 3] * 2
    y = reduce(op_type, version, x, [2])  # nothing to reduce over: an empty result
    assert y.shape == (2, 0, 1)


def test_reduce_mean_over_an_empty_set_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"mean over an empty set is undefined \(input \[2, 0"):
        reduce("ReduceMean", 18, np.zeros((2, 0), "f4"), [1])


def test_reduce_mean_of_integers_truncates_towards_zero() -> None:
    x = np.array([[-3, -4], [5, 2], [-1, 0]], dtype=np.int32)
    y = reduce("ReduceMean", 18, x, [1], keepdims=0)
    assert y.dtype == np.int32 and y.tolist() == [-3, 3, 0]


def test_reduce_1_rejects_negative_axes_reduce_11_takes_them() -> None:
    with pytest.raises(KernelError, match="negative axis"):
        reduce("ReduceMax", 1, X, [-1])
    assert reduce("ReduceMax", 11, X, [-1], keepdims=0).tolist() == [3, 6]


def test_reduce_with_a_repeated_or_out_of_range_axis_is_an_error() -> None:
    with pytest.raises(KernelError, match="repeat"):
        reduce("ReduceSum", 13, X, [1, -1])
    with pytest.raises(KernelError, match=r"axis 2 is outside \[-2, 1\]"):
        reduce("ReduceSum", 13, X, [2])


@pytest.mark.parametrize("dtype", [np.float16, ml_dtypes.bfloat16])
def test_reduce_sum_of_half_floats_accumulates_in_float32(dtype: type) -> None:
    x: np.ndarray = np.ones(
        4096, dtype=dtype
    )  # one at a time in float16 stops at 2048, bfloat16 at 256
    y = reduce("ReduceSum", 13, x, None, keepdims=0)
    assert y.dtype == np.dtype(dtype) and float(y) == 4096
    y = reduce("ReduceMean", 18, x * dtype(3), None, keepdims=0)
    assert y.dtype == np.dtype(dtype) and float(y) == 3


def test_reduce_keeps_integer_types_and_wraps() -> None:
    x = np.array([100, 100], dtype=np.int8)
    y = reduce("ReduceSum", 13, x, None, keepdims=0)
    assert y.dtype == np.int8 and int(y) == -56
    y = reduce("ReduceProd", 18, np.array([[2, 3]], dtype=np.uint64), [1])
    assert y.dtype == np.uint64 and y.tolist() == [[6]]


def test_reduce_max_20_of_bools() -> None:
    x = np.array([[True, False], [False, False]])
    assert reduce("ReduceMax", 20, x, [1], keepdims=0).tolist() == [True, False]
    assert reduce("ReduceMin", 20, x, [0], keepdims=0).tolist() == [False, False]


# --- MatMul -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("a_shape", "b_shape", "y_shape"),
    [((3,), (3,), ()), ((3,), (2, 3, 4), (2, 4)), ((2, 5, 3), (3,), (2, 5)),
     ((2, 1, 4, 3), (5, 3, 2), (2, 5, 4, 2))],
)  # fmt: skip
def test_matmul_promotes_vectors_and_broadcasts_batches(a_shape, b_shape, y_shape) -> None:
    a = np.ones(a_shape, dtype=np.float32)
    b = np.ones(b_shape, dtype=np.float32)
    y = run(13, f"float{list(a_shape)} a, float{list(b_shape)} b", "y = MatMul (a, b)", a=a, b=b)
    assert y.shape == y_shape and np.all(y == 3)


def test_matmul_keeps_integer_and_half_types() -> None:
    a = np.array([[1, 2], [3, 4]], dtype=np.int32)
    y = run(13, "int32[2, 2] a, int32[2, 2] b", "y = MatMul (a, b)", a=a, b=a)
    assert y.dtype == np.int32 and y.tolist() == [[7, 10], [15, 22]]
    h = np.full((1, 3000), 1.0, dtype=np.float16)
    y = run(13, "float16[1, 3000] a, float16[3000, 1] b", "y = MatMul (a, b)", a=h, b=h.T.copy())
    assert y.dtype == np.float16 and float(y[0, 0]) == 3000  # a float16 running sum: 2048


def test_matmul_with_mismatched_inner_dims_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"inner dims 3 != 2"):
        run(13, "float[2, 3] a, float[2, 3] b", "y = MatMul (a, b)", a=X, b=X)


# --- Gemm -------------------------------------------------------------------------------------

A = np.array([[1, 2], [3, 4], [5, 6]], dtype=np.float32)  # 3 x 2
B = np.array([[1, 0, 2, 1], [0, 1, 1, 3]], dtype=np.float32)  # 2 x 4
AB = [[1, 2, 4, 7], [3, 4, 10, 15], [5, 6, 16, 23]]


@pytest.mark.parametrize("version", [7, 9, 11, 13])
def test_gemm_adds_a_broadcast_c(version: int) -> None:
    c = np.array([10, 20, 30, 40], dtype=np.float32)
    y = run(version, "float[3, 2] a, float[2, 4] b, float[4] c", "y = Gemm (a, b, c)",
            a=A, b=B, c=c)  # fmt: skip
    assert y.tolist() == [
        [r + d for r, d in zip(row, [10, 20, 30, 40], strict=True)] for row in AB
    ]


def test_gemm_alpha_beta_and_transposes() -> None:
    body = "y = Gemm <alpha = 2.0, beta = -1.0, transA = 1, transB = 1> (a, b, c)"
    y = run(13, "float[2, 3] a, float[4, 2] b, float[3, 1] c", body,
            a=A.T.copy(), b=B.T.copy(), c=np.array([[1], [2], [3]], dtype=np.float32))  # fmt: skip
    assert y.tolist() == [[2 * v - c for v in row] for row, c in zip(AB, [1, 2, 3], strict=True)]


def test_gemm_c_is_optional_from_11_and_required_before() -> None:
    y = run(11, "float[3, 2] a, float[2, 4] b", "y = Gemm (a, b)", a=A, b=B)
    assert y.tolist() == AB
    model = model_from_text(
        '<ir_version: 10, opset_import: ["" : 11]> g (float[3, 2] a, float[2, 4] b) => '
        "(float[3, 4] y) { y = Gemm (a, b) }"
    )
    (op,) = model.graph.topo_order()
    with pytest.raises(KernelError, match="C.* is required before Gemm-11"):
        run_op(op, [A, B], {"": 9})


def test_gemm_c_that_does_not_broadcast_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"C \[2, 4\] does not broadcast to \[3, 4\]"):
        run(13, "float[3, 2] a, float[2, 4] b, float[2, 4] c", "y = Gemm (a, b, c)",
            a=A, b=B, c=np.zeros((2, 4), "f4"))  # fmt: skip


@pytest.mark.parametrize("version", [1, 6])
def test_gemm_before_7_broadcasts_c_only_when_asked(version: int) -> None:
    rng = np.random.default_rng(7)
    a, b = rng.standard_normal((3, 5)).astype("f4"), rng.standard_normal((5, 4)).astype("f4")
    c_row, c_full = rng.standard_normal(4).astype("f4"), rng.standard_normal((3, 4)).astype("f4")
    sig = "float[3, 5] a, float[5, 4] b, float[N] c"
    y = run(version, sig, "y = Gemm <alpha = 0.5, beta = 2.0> (a, b, c)", a=a, b=b, c=c_full)
    want = 0.5 * (a.astype(np.float64) @ b) + 2.0 * c_full
    np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
    y = run(version, sig, "y = Gemm <broadcast = 1> (a, b, c)", a=a, b=b, c=c_row)
    np.testing.assert_allclose(y, a.astype(np.float64) @ b + c_row, rtol=1e-5, atol=1e-6)
    with pytest.raises(KernelError, match=r"C \[4\] must be \[3, 4\] with broadcast=0"):
        run(version, sig, "y = Gemm (a, b, c)", a=a, b=b, c=c_row)


def test_gemm_with_beta_0_ignores_a_nan_c() -> None:
    y = run(13, "float[3, 2] a, float[2, 4] b, float c", "y = Gemm <beta = 0.0> (a, b, c)",
            a=A, b=B, c=np.array(np.nan, dtype=np.float32))  # fmt: skip
    assert y.tolist() == AB


def test_gemm_keeps_float16_and_int32() -> None:
    y = run(13, "float16[3, 2] a, float16[2, 4] b", "y = Gemm (a, b)",
            a=A.astype(np.float16), b=B.astype(np.float16))  # fmt: skip
    assert y.dtype == np.float16 and y.tolist() == AB
    y = run(13, "int32[3, 2] a, int32[2, 4] b", "y = Gemm <alpha = 2.0> (a, b)",
            a=A.astype(np.int32), b=B.astype(np.int32))  # fmt: skip
    assert y.dtype == np.int32 and y.tolist() == [[2 * v for v in row] for row in AB]


# --- onnxruntime as the oracle, every version it implements ---------------------------------

_RNG = np.random.default_rng(20240612)
F = _RNG.standard_normal((2, 3, 4)).astype(np.float32)
N = _RNG.integers(-9, 9, (2, 3, 4)).astype(np.int32)


def _rows() -> list[tuple[str, int, dict, dict]]:
    rows: list[tuple[str, int, dict, dict]] = []
    for op_type in NN_OPS[:5]:
        for version in opset.schema_versions(op_type):
            for data in (F, N):
                for axes in (None, [1], [0, 2], [-1]):
                    if axes and min(axes) < 0 and version < 11:
                        continue
                    for keep in (0, 1):
                        attrs: dict = {"keepdims": keep}
                        inputs: dict = {"x": data}
                        if axes is not None and version >= INPUT_AXES_FROM[op_type]:
                            inputs["a"] = np.array(axes, dtype=np.int64)
                        elif axes is not None:
                            attrs["axes"] = axes
                        rows.append((op_type, version, inputs, attrs))
                if version >= INPUT_AXES_FROM[op_type]:
                    rows.append((op_type, version, {"x": data, "a": np.zeros(0, np.int64)},
                                 {"noop_with_empty_axes": 1}))  # fmt: skip

    def f(*shape: int) -> np.ndarray:
        return _RNG.standard_normal(shape).astype(np.float32)

    for version in (1, 9, 13):
        for a_dims, b_dims in (((3, 4), (4, 5)), ((2, 1, 3, 4), (3, 4, 2)), ((4,), (2, 4, 3)),
                               ((2, 3, 4), (4,)), ((4,), (4,))):  # fmt: skip
            rows.append(("MatMul", version, {"a": f(*a_dims), "b": f(*b_dims)}, {}))
    rows.append(("MatMul", 13, {"a": N[0], "b": N[1].T.copy()}, {}))
    for version in (7, 9, 11, 13):
        for ta in (0, 1):
            for tb in (0, 1):
                a = f(4, 3) if ta else f(3, 4)
                b = f(5, 4) if tb else f(4, 5)
                attrs = {"transA": ta, "transB": tb, "alpha": 1.5, "beta": -0.5}
                rows.append(("Gemm", version, {"a": a, "b": b, "c": f(1, 5)}, attrs))
        rows.append(("Gemm", version, {"a": f(3, 4), "b": f(4, 5), "c": np.array(2.0, "f4")}, {}))
        rows.append(("Gemm", version, {"a": f(3, 4), "b": f(4, 5), "c": f(3, 1)}, {}))
    for version in (11, 13):
        rows.append(("Gemm", version, {"a": f(3, 4), "b": f(4, 5)}, {}))
    return rows


ROWS = _rows()


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


@pytest.mark.parametrize("row", ROWS, ids=[f"{r[0]}-{r[1]}-{i}" for i, r in enumerate(ROWS)])
def test_kernel_equals_onnxruntime(ort: object, row: tuple) -> None:
    op_type, version, inputs, attrs = row
    infos = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
        for k, v in inputs.items()
    ]
    node = helper.make_node(op_type, list(inputs), ["y"], **attrs)
    graph = helper.make_graph([node], "g", infos, [onnx.ValueInfoProto(name="y")])
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    proto.ir_version = 3 if version < 7 else 7 if version < 18 else 8
    options = ort.SessionOptions()  # type: ignore[attr-defined]
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # type: ignore[attr-defined]
    session = ort.InferenceSession(  # type: ignore[attr-defined]
        proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
    )
    (want,) = session.run(None, inputs)
    (got,) = run_model(from_proto(proto), dict(inputs))
    assert got.dtype == want.dtype and got.shape == want.shape, (got.shape, want.shape)
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    else:
        np.testing.assert_array_equal(got, want)
