"""The Split kernels, every version (1, 2, 11, 13, 18).

Unit tests on small models from ONNX text with literal expected values; a property test on
random Split models checked against onnxruntime's outputs where it runs them, and against
np.split with sizes worked out here from the spec where it does not (Split-1, bfloat16) or where
onnxruntime departs from the spec (listed in ``ort_departs``).
"""

from __future__ import annotations

import math
import re

import ml_dtypes
import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from onnxforge import opset
from onnxforge.errors import KernelError
from onnxforge.io import from_proto
from onnxforge.ir import Model
from onnxforge.kernels import KERNELS
from onnxforge.kernels import run as run_op
from onnxforge.testing import model_from_text


def run_model(model: Model, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    """The single op of ``model`` through our kernels, inputs by graph-input name."""
    (op,) = model.graph.topo_order()
    args = [None if v is None else feeds[v.name] for v in model.graph.inputs_of(op)]
    return run_op(op, args, dict(model.opset_imports))


def run(text: str, **feeds: np.ndarray) -> list[np.ndarray]:
    return run_model(model_from_text(text), feeds)


def split_text(version: int, x: str, outputs: int, attrs: str = "", extra: str = "") -> str:
    """Split of ``x`` (a typed input such as ``float[7] x``) into ``outputs`` parts."""
    outs = ", ".join(f"y{i}" for i in range(outputs))
    decl = ", ".join(f"float[N{i}] y{i}" for i in range(outputs))
    attr = f" <{attrs}>" if attrs else ""
    args = "x" + (", s" if extra else "")
    inputs = x + (f", {extra}" if extra else "")
    return (
        f'<ir_version: 10, opset_import: ["" : {version}]> '
        f"g ({inputs}) => ({decl}) {{ {outs} = Split{attr} ({args}) }}"
    )


X7 = np.arange(1, 8, dtype=np.float32)


# --- unit tests -------------------------------------------------------------------------------


def test_every_split_version_has_a_kernel() -> None:
    assert KERNELS.versions("Split") == opset.schema_versions("Split") == (1, 2, 11, 13, 18)


def test_split_18_of_7_into_3_gives_sizes_3_3_1() -> None:
    parts = run(split_text(18, "float[7] x", 3, "num_outputs = 3"), x=X7)
    assert [p.tolist() for p in parts] == [[1, 2, 3], [4, 5, 6], [7]]


def test_split_18_of_8_into_3_along_axis_1_gives_sizes_3_3_2() -> None:
    x = np.arange(16, dtype=np.int64).reshape(2, 8)
    parts = run(split_text(18, "int64[2, 8] x", 3, "axis = 1, num_outputs = 3"), x=x)
    assert [p.tolist() for p in parts] == [
        [[0, 1, 2], [8, 9, 10]],
        [[3, 4, 5], [11, 12, 13]],
        [[6, 7], [14, 15]],
    ]
    assert all(p.dtype == np.int64 for p in parts)


def test_split_18_of_5_into_4_is_an_error_naming_the_op_and_the_numbers() -> None:
    model = model_from_text(split_text(18, "float[5] x", 4, "num_outputs = 4"))
    model.graph.topo_order()[0].name = "cut"
    with pytest.raises(KernelError, match=r"Split 'cut'.*\b5\b.*4 parts of 2.*6"):
        run_model(model, {"x": np.arange(5, dtype=np.float32)})


def test_split_18_of_6_into_4_gives_an_empty_last_part() -> None:
    # The spec's ceil rule (onnx's shape inference agrees: 2, 2, 2, 0); onnxruntime refuses.
    parts = run(split_text(18, "float[6] x", 4, "num_outputs = 4"), x=np.arange(6.0, dtype="f4"))
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5], []]


def test_split_18_num_outputs_must_match_the_output_count() -> None:
    with pytest.raises(KernelError, match="num_outputs is 2, but the node has 3 outputs"):
        run(split_text(18, "float[6] x", 3, "num_outputs = 2"), x=np.zeros(6, "f4"))


def test_split_18_with_both_split_and_num_outputs_is_an_error() -> None:
    text = split_text(18, "float[6] x", 2, "num_outputs = 2", extra="int64[2] s")
    with pytest.raises(KernelError, match="both the split input and num_outputs"):
        run(text, x=np.zeros(6, "f4"), s=np.array([3, 3]))


def test_split_18_with_neither_split_nor_num_outputs_is_an_error() -> None:
    with pytest.raises(KernelError, match="neither the split input nor num_outputs"):
        run(split_text(18, "float[6] x", 2), x=np.zeros(6, "f4"))


@pytest.mark.parametrize("version", [13, 18])
def test_split_zero_size_parts(version: int) -> None:
    text = split_text(version, "float[0] x", 3, extra="int64[3] s")
    parts = run(text, x=np.zeros(0, "f4"), s=np.array([0, 0, 0], dtype=np.int64))
    assert [p.shape for p in parts] == [(0,), (0,), (0,)]
    assert all(p.dtype == np.float32 for p in parts)


def test_split_13_zero_size_parts_among_others() -> None:
    text = split_text(13, "float[2, 3] x", 3, "axis = 1", extra="int64[3] s")
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    parts = run(text, x=x, s=np.array([0, 3, 0], dtype=np.int64))
    assert [p.shape for p in parts] == [(2, 0), (2, 3), (2, 0)]
    assert parts[1].tolist() == [[0, 1, 2], [3, 4, 5]]


def test_split_1_takes_lengths_from_the_float_second_input() -> None:
    text = split_text(1, "float[7] x", 2, extra="float[2] s")
    parts = run(text, x=X7, s=np.array([2.0, 5.0], dtype=np.float32))
    assert [p.tolist() for p in parts] == [[1, 2], [3, 4, 5, 6, 7]]


def test_split_1_takes_lengths_from_the_attribute() -> None:
    parts = run(split_text(1, "float[7] x", 3, "split = [1, 4, 2]"), x=X7)
    assert [p.tolist() for p in parts] == [[1], [2, 3, 4, 5], [6, 7]]


def test_split_1_with_lengths_as_attribute_and_input_is_an_error() -> None:
    text = split_text(1, "float[7] x", 2, "split = [3, 4]", extra="float[2] s")
    with pytest.raises(KernelError, match="both as attribute"):
        run(text, x=X7, s=np.array([3.0, 4.0], dtype=np.float32))


def test_split_1_lengths_input_with_fractions_is_an_error() -> None:
    text = split_text(1, "float[7] x", 2, extra="float[2] s")
    with pytest.raises(KernelError, match="non-integers"):
        run(text, x=X7, s=np.array([2.5, 4.5], dtype=np.float32))


@pytest.mark.parametrize("version", [11, 13, 18])
def test_split_negative_axis_counts_from_the_back(version: int) -> None:
    x = np.arange(12, dtype=np.float32).reshape(2, 2, 3)
    attrs = "axis = -1" + (", num_outputs = 3" if version == 18 else "")
    parts = run(split_text(version, "float[2, 2, 3] x", 3, attrs), x=x)
    assert [p.reshape(-1).tolist() for p in parts] == [[0, 3, 6, 9], [1, 4, 7, 10], [2, 5, 8, 11]]


@pytest.mark.parametrize("version", [1, 2])
def test_split_before_11_rejects_a_negative_axis(version: int) -> None:
    with pytest.raises(KernelError, match="axis -1 is negative"):
        run(split_text(version, "float[2, 4] x", 2, "axis = -1"), x=np.zeros((2, 4), "f4"))


@pytest.mark.parametrize("version", [1, 2, 11, 13])
def test_split_without_lengths_gives_equal_parts_by_output_count(version: int) -> None:
    x = np.arange(6, dtype=np.int32) if version > 1 else np.arange(6, dtype=np.float32)
    dtype = "int32" if version > 1 else "float"
    parts = run(split_text(version, f"{dtype}[6] x", 3), x=x)
    assert [p.tolist() for p in parts] == [[0, 1], [2, 3], [4, 5]]


@pytest.mark.parametrize("version", [1, 2, 11, 13])
def test_split_into_unequal_parts_without_lengths_is_an_error(version: int) -> None:
    with pytest.raises(KernelError, match=r"dim 0 of input \[7\] is 7.*2 equal parts"):
        run(split_text(version, "float[7] x", 2), x=X7)


@pytest.mark.parametrize(("sizes", "total"), [([3, 3], 6), ([4, 4], 8)])
def test_split_13_lengths_not_summing_to_the_dim_is_an_error(sizes: list[int], total: int) -> None:
    model = model_from_text(split_text(13, "float[7] x", 2, extra="int64[2] s"))
    model.graph.topo_order()[0].name = "parts"
    message = f"Split 'parts': split {sizes} sums to {total}, but dim 0 of input [7] is 7"
    with pytest.raises(KernelError, match=re.escape(message)):
        run_model(model, {"x": X7, "s": np.array(sizes, dtype=np.int64)})


def test_split_13_negative_length_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"split \[-1, 8\] has a negative size"):
        run(split_text(13, "float[7] x", 2, extra="int64[2] s"), x=X7, s=np.array([-1, 8]))


def test_split_11_more_lengths_than_outputs_is_an_error() -> None:
    with pytest.raises(KernelError, match=r"split \[2, 2, 3\] has 3 sizes for 2 outputs"):
        run(split_text(11, "float[7] x", 2, "split = [2, 2, 3]"), x=X7)


@pytest.mark.parametrize(
    "dtype",
    [np.float16, ml_dtypes.bfloat16, np.int64, np.uint8, np.bool_, np.complex64, np.str_, object],
    ids=lambda d: np.dtype(d).name,
)
def test_split_keeps_the_dtype_and_the_values(dtype: type) -> None:
    model = model_from_text(split_text(13, "float[4] x", 2))
    x: np.ndarray = np.array([1, 0, 1, 1]).astype(dtype)
    parts = run_model(model, {"x": x})
    assert [p.dtype for p in parts] == [x.dtype] * 2
    assert [p.tolist() for p in parts] == [x[:2].tolist(), x[2:].tolist()]


def test_split_parts_do_not_share_memory_with_a_read_only_input() -> None:
    x = np.arange(6, dtype=np.float32)
    x.flags.writeable = False
    parts = run(split_text(13, "float[6] x", 2), x=x)
    for part in parts:
        assert not np.shares_memory(part, x)
        assert part.flags.writeable and part.flags.c_contiguous
    parts[0][0] = 42
    assert x[0] == 0


def test_split_of_a_scalar_is_an_error() -> None:
    with pytest.raises(KernelError, match="scalar"):
        run(split_text(13, "float x", 1), x=np.array(1.0, dtype=np.float32))


# --- property: random Split models against onnxruntime and np.split ---------------------------

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=500,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POOL = ["float32", "float64", "float16", "int32", "int64", "int8", "uint8", "bool", "bfloat16"]
SPLIT_1_TYPES = ["float32", "float64", "float16"]
NO_BF16_BEFORE_13 = {1: SPLIT_1_TYPES, 2: POOL[:-1], 11: POOL[:-1], 13: POOL, 18: POOL}


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


@st.composite
def split_cases(draw: st.DrawFn) -> dict:
    version = draw(st.sampled_from([1, 2, 11, 13, 18]))
    shape = tuple(draw(st.lists(st.integers(0, 6), min_size=1, max_size=4)))
    rank = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-rank, rank - 1)))
    count = draw(st.integers(1, 4))
    modes = {
        1: ["equal", "attr", "input", "both"],
        2: ["equal", "attr"],
        11: ["equal", "attr"],
        13: ["equal", "input"],
        18: ["input", "chunks", "chunks", "equal"],
    }[version]
    mode = draw(st.sampled_from(modes))
    dim = shape[(axis or 0) % rank]
    sizes = None
    if mode in ("attr", "input", "both"):
        if draw(st.integers(0, 4)):  # mostly sizes that add up, zeros included
            cuts = sorted(draw(st.lists(st.integers(0, dim), min_size=count - 1,
                                        max_size=count - 1)))  # fmt: skip
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim], strict=True)]
        else:
            sizes = draw(st.lists(st.integers(-1, 7), min_size=count, max_size=count))
    chunks = None
    if mode == "chunks":
        chunks = count if draw(st.integers(0, 5)) else draw(st.integers(1, 5))
    dtype = draw(st.sampled_from(NO_BF16_BEFORE_13[version]))
    return {"version": version, "shape": shape, "axis": axis, "count": count, "mode": mode,
            "sizes": sizes, "chunks": chunks, "dtype": dtype}  # fmt: skip


def oracle(case: dict, x: np.ndarray) -> list[np.ndarray] | None:
    """The parts by the spec, cut by np.split; None: the node is invalid."""
    version, shape, count = case["version"], case["shape"], case["count"]
    axis = 0 if case["axis"] is None else case["axis"]
    if axis < 0 and version < 11:
        return None
    dim = shape[axis]
    mode, sizes, chunks = case["mode"], case["sizes"], case["chunks"]
    if mode == "both":
        return None
    if mode == "equal":
        if version >= 18 or dim % count:
            return None
        sizes = [dim // count] * count
    elif mode == "chunks":
        if chunks != count:
            return None
        size = math.ceil(dim / chunks)
        sizes = [size] * (chunks - 1) + [dim - size * (chunks - 1)]
    if len(sizes) != count or min(sizes) < 0 or sum(sizes) != dim:
        return None
    return np.split(x, np.cumsum(sizes)[:-1], axis=axis)


def ort_cannot_run(case: dict) -> str | None:
    """Why onnxruntime is not asked, or None."""
    if case["dtype"] == "bfloat16":
        return "bfloat16 is not feedable from numpy"
    if case["version"] == 1:
        return "onnxruntime has no Split-1 kernel"
    if case["mode"] == "chunks" and case["chunks"] != case["count"]:
        return "onnxruntime 1.31 aborts the process on num_outputs != the output count"
    return None


def ort_departs(case: dict) -> str | None:
    """Where onnxruntime departs from the spec: why, or None."""
    shape, axis = case["shape"], case["axis"] or 0
    if case["version"] == 2 and axis < 0:
        return "Split-2 with a negative axis runs in onnxruntime"
    if case["mode"] == "chunks":
        dim, k = shape[axis], case["chunks"]
        if dim - math.ceil(dim / k) * (k - 1) == 0 and dim:
            return "onnxruntime refuses num_outputs with an empty last part (6 into 4)"
        if dim < k:
            return "onnxruntime refuses num_outputs above the dim"
    return None


def make_input(case: dict) -> np.ndarray:
    shape, dtype = case["shape"], case["dtype"]
    values = np.arange(math.prod(shape)).reshape(shape)
    if dtype == "bool":
        return values % 3 == 1
    if dtype == "bfloat16":
        return values.astype(ml_dtypes.bfloat16)
    return (values % 120).astype(dtype)


def split_proto(case: dict, x: np.ndarray) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    version, mode = case["version"], case["mode"]
    elem = helper.np_dtype_to_tensor_dtype(x.dtype)
    inputs = [helper.make_tensor_value_info("x", elem, x.shape)]
    feeds = {"x": x}
    names, attrs = ["x"], {}
    if case["axis"] is not None:
        attrs["axis"] = case["axis"]
    if mode in ("attr", "both"):
        attrs["split"] = case["sizes"]
    if mode == "chunks":
        attrs["num_outputs"] = case["chunks"]
    if mode in ("input", "both"):
        sizes = np.array(case["sizes"], dtype=np.float32 if version == 1 else np.int64)
        names.append("s")
        inputs.append(helper.make_tensor_value_info("s", helper.np_dtype_to_tensor_dtype(
            sizes.dtype), sizes.shape))  # fmt: skip
        feeds["s"] = sizes
    outs = [f"y{i}" for i in range(case["count"])]
    node = helper.make_node("Split", names, outs, name="split", **attrs)
    graph = helper.make_graph([node], "g", inputs, [onnx.ValueInfoProto(name=o) for o in outs])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    model.ir_version = 3 if version < 7 else 8
    return model, feeds


def ort_run(ort: object, proto: onnx.ModelProto, feeds: dict) -> list[np.ndarray] | str:
    """onnxruntime's outputs, or "unsupported" (no kernel) / "invalid" (it refuses)."""
    try:
        options = ort.SessionOptions()  # type: ignore[attr-defined]
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL  # type: ignore[attr-defined]
        session = ort.InferenceSession(  # type: ignore[attr-defined]
            proto.SerializeToString(), options, providers=["CPUExecutionProvider"]
        )
        return list(session.run(None, feeds))
    except Exception as e:  # onnxruntime raises its own exception types
        return "unsupported" if "NOT_IMPLEMENTED" in str(e) else "invalid"


def assert_same(got: list[np.ndarray], want: list[np.ndarray], what: str) -> None:
    assert len(got) == len(want), f"{what}: {len(got)} outputs, expected {len(want)}"
    for i, (g, w) in enumerate(zip(got, want, strict=True)):
        assert g.dtype == w.dtype, f"{what}: output {i} is {g.dtype}, expected {w.dtype}"
        assert g.shape == w.shape, f"{what}: output {i} is {g.shape}, expected {w.shape}"
        assert np.array_equal(g, w), f"{what}: output {i} is {g.tolist()}, expected {w.tolist()}"


@SETTINGS
@given(split_cases())
def test_random_split_models_agree_with_onnxruntime_and_np_split(ort: object, case: dict) -> None:
    x = make_input(case)
    proto, feeds = split_proto(case, x)
    try:
        ours: list[np.ndarray] | None = run_model(from_proto(proto), feeds)
    except KernelError:
        ours = None
    truth = oracle(case, x)
    event(f"Split-{case['version']} {case['mode']}: {'ok' if truth is not None else 'invalid'}")

    verdict: list[np.ndarray] | str = "not run"
    if ort_cannot_run(case) is None:
        verdict = ort_run(ort, proto, feeds)
    departs = ort_departs(case)
    if isinstance(verdict, list) and departs is None:
        event("checked against onnxruntime")
        assert ours is not None, f"onnxruntime runs it, our kernel refuses: {case}"
        assert_same(ours, verdict, "against onnxruntime")
    elif verdict == "invalid" and departs is None:
        assert ours is None, f"onnxruntime refuses it, our kernel runs it: {case}"
    else:
        event(f"onnxruntime {verdict if isinstance(verdict, str) else 'departs'}: np.split")

    if truth is None:
        assert ours is None, f"accepted an invalid node: {case}"
    else:
        assert ours is not None, f"refused a valid node: {case}"
        assert_same(ours, truth, "against np.split")


@pytest.mark.parametrize("version", [2, 11, 13, 18])
def test_onnxruntime_runs_split_of_every_version_from_2(ort: object, version: int) -> None:
    """The property test's onnxruntime branch is taken for these versions (it is not for
    Split-1, which onnxruntime does not implement)."""
    case = {"version": version, "shape": (4, 6), "axis": 1, "count": 2,
            "mode": "chunks" if version == 18 else "equal", "sizes": None, "chunks": 2,
            "dtype": "float32"}  # fmt: skip
    x = make_input(case)
    proto, feeds = split_proto(case, x)
    got = ort_run(ort, proto, feeds)
    assert isinstance(got, list), got
    assert_same(run_model(from_proto(proto), feeds), got, "against onnxruntime")
    assert got[1][0].tolist() == [3, 4, 5]


def test_split_1_sizes_input_is_fed_as_an_initializer_too() -> None:
    x = np.arange(5, dtype=np.float32)
    node = helper.make_node("Split", ["x", "s"], ["a", "b"], axis=0)
    graph = helper.make_graph(
        [node], "g", [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [5])],
        [onnx.ValueInfoProto(name="a"), onnx.ValueInfoProto(name="b")],
        initializer=[numpy_helper.from_array(np.array([4.0, 1.0], np.float32), "s")],
    )  # fmt: skip
    model = from_proto(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 1)]))
    (op,) = model.graph.topo_order()
    s = model.graph.inputs_of(op)[1]
    assert s is not None and s.const is not None
    parts = run_op(op, [x, s.const.numpy()], dict(model.opset_imports))
    assert [p.tolist() for p in parts] == [[0, 1, 2, 3], [4]]
