"""Shape rules of Split in every version (1, 2, 11, 13, 18).

Unit tests on small models from ONNX text; property tests on random Split models checked against
the outputs onnxruntime computes (its execution, not its shape inference) where it runs them, and
against np.split with sizes worked out here from the spec where it does not (Split-1) or where
onnxruntime departs from the spec (listed in ``ort_departs``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import helper, numpy_helper

from onnxforge.io import from_proto
from onnxforge.ir import DType, TensorType
from onnxforge.shape_infer import InferReport, infer
from onnxforge.shape_infer.engine import VALUE_RULES
from onnxforge.shape_infer.symbolic import evaluate, is_unknown_symbol
from onnxforge.testing import model_from_text

F32 = DType.FLOAT

# Type constraint T of each Split version, as the spec lists it.
_ALL_BUT_BF16 = {
    DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64, DType.INT8, DType.INT16,
    DType.INT32, DType.INT64, DType.FLOAT16, DType.FLOAT, DType.DOUBLE, DType.STRING,
    DType.BOOL, DType.COMPLEX64, DType.COMPLEX128,
}  # fmt: skip
SPLIT_TYPES = {
    1: {DType.FLOAT16, DType.FLOAT, DType.DOUBLE},
    2: _ALL_BUT_BF16,
    11: _ALL_BUT_BF16,
    13: _ALL_BUT_BF16 | {DType.BFLOAT16},
    18: _ALL_BUT_BF16 | {DType.BFLOAT16},
}


def run(
    text: str, *, unknown_rank: Sequence[str] = (), dims: Sequence[int | str] | None = None
) -> tuple[list[TensorType | None], InferReport]:
    """Infer a model written in ONNX text; graph outputs start untyped (the text cannot say so).

    ``unknown_rank``: inputs whose shape is made unknown; ``dims``: the first input's dims, for
    expressions such as ``2*M`` that the text cannot spell.
    """
    model = model_from_text(text)
    for value in model.graph.outputs:
        value.type = None
    for value in model.graph.inputs:
        if value.name in unknown_rank:
            value.type = TensorType(value.type.dtype, None)
    if dims is not None:
        first = model.graph.inputs[0]
        first.type = TensorType(first.type.dtype, tuple(dims))
    report = infer(model)
    return [v.type for v in model.graph.outputs], report


def split(
    version: int,
    shape: str,
    n: int,
    *,
    attrs: str = "",
    split_input: str = "",
    dtype: str = "float",
    extra_inputs: str = "",
    unknown_rank: Sequence[str] = (),
    dims: Sequence[int | str] | None = None,
) -> tuple[list[TensorType | None], InferReport]:
    """Split ``x`` of ``shape`` into ``n`` outputs.

    ``split_input``, the node's second input: ``init|int64[2] {2, 4}`` an initializer,
    ``s = Shape(y)|s`` ops placed before the node and the name of the one it reads, ``|s`` a
    name declared in ``extra_inputs``.
    """
    ir = 4 if version < 7 else 8  # IR 4: initializers need not be graph inputs
    outs = ", ".join(f"y{i}" for i in range(n))
    attrs = f"<{attrs}>" if attrs else ""
    body, _, second = split_input.partition("|")
    inits = ""
    if body == "init":
        declared, _, values = second.partition(" ")
        inits, body, second = f"<{declared} s = {values}>", "", "s"
    args = f"x, {second}" if second else "x"
    text = (
        f'<ir_version: {ir}, opset_import: ["" : {version}]> '
        f"g ({dtype}{shape} x{extra_inputs}) => ({', '.join(f'float y{i}' for i in range(n))}) "
        f"{inits} {{ {body} [split_node] {outs} = Split{attrs}({args}) }}"
    )
    return run(text, unknown_rank=unknown_rank, dims=dims)


def shapes(types: list[TensorType | None]) -> list[tuple | None]:
    return [None if t is None else t.shape for t in types]


def error_text(report: InferReport) -> str:
    assert len(report.errors) == 1, report.errors
    return str(report.errors[0])


def const(*values: float, dtype: str = "int64") -> str:
    """A constant split input (an initializer)."""
    return f"init|{dtype}[{len(values)}] {{{', '.join(map(str, values))}}}"


# --- exact shapes in every version ------------------------------------------------------------


@pytest.mark.parametrize("version", [1, 2, 11, 13])
def test_split_without_sizes_gives_equal_parts(version: int) -> None:
    types, report = split(version, "[6,4]", 3, attrs="axis=0")
    assert report.errors == []
    assert types == [TensorType(F32, (2, 4))] * 3


@pytest.mark.parametrize("version", [2, 11, 13])
def test_split_axis_defaults_to_0(version: int) -> None:
    types, report = split(version, "[4,6]", 2)
    assert report.errors == [] and shapes(types) == [(2, 6), (2, 6)]


def test_split_1_without_axis_splits_axis_0() -> None:
    types, report = split(1, "[4,6]", 2)
    assert report.errors == [] and shapes(types) == [(2, 6), (2, 6)]


@pytest.mark.parametrize("version", [1, 2, 11])
def test_split_sizes_from_the_attribute(version: int) -> None:
    types, report = split(version, "[N,6]", 3, attrs="axis=1, split=[1, 0, 5]")
    assert report.errors == []
    assert shapes(types) == [("N", 1), ("N", 0), ("N", 5)]


def test_split_1_sizes_from_the_float_second_input() -> None:
    split_input = const(2.0, 4.0, dtype="float")
    types, report = split(1, "[N,6]", 2, attrs="axis=1", split_input=split_input)
    assert report.errors == [] and shapes(types) == [("N", 2), ("N", 4)]


@pytest.mark.parametrize("version", [13, 18])
def test_split_sizes_from_an_initializer(version: int) -> None:
    types, report = split(version, "[2,6]", 2, attrs="axis=-1", split_input=const(2, 4))
    assert report.errors == [] and shapes(types) == [(2, 2), (2, 4)]


@pytest.mark.parametrize("version", [13, 18])
def test_split_sizes_from_a_constant_node(version: int) -> None:
    if VALUE_RULES.find("Constant", version) is None:
        pytest.skip("no value rule for Constant: sizes from Constant nodes stay unknown")
    split_input = "s = Constant<value = int64[2] {3, 2}>()|s"
    types, report = split(version, "[5,2]", 2, split_input=split_input)
    assert report.errors == [] and shapes(types) == [(3, 2), (2, 2)]


@pytest.mark.parametrize("version", [13, 18])
def test_split_sizes_from_a_computed_value(version: int) -> None:
    if VALUE_RULES.find("Shape", version) is None:
        pytest.skip("no value rule for Shape: sizes computed from shapes stay unknown")
    # The sizes are y's shape, known only by propagating Shape's value.
    types, report = split(
        version, "[N,7]", 2, attrs="axis=1", split_input="s = Shape(y)|s",
        extra_inputs=", float[3,4] y",
    )  # fmt: skip
    assert report.errors == [] and shapes(types) == [("N", 3), ("N", 4)]


@pytest.mark.parametrize("version", [13, 18])
def test_split_sizes_from_a_graph_input_give_unknown_dims_on_the_axis(version: int) -> None:
    types, report = split(
        version, "[N,7,5]", 2, attrs="axis=1", split_input="|s", extra_inputs=", int64[2] s"
    )
    assert report.errors == []
    for t in types:
        assert t is not None and t.shape[0] == "N" and t.shape[2] == 5
        assert is_unknown_symbol(t.shape[1])
    assert types[0].shape[1] != types[1].shape[1]


def test_split_18_of_7_into_3_is_3_3_1() -> None:
    # onnxruntime's symbolic shape inference says [2,2,2] here; its kernel gives [3,3,1].
    types, report = split(18, "[7]", 3, attrs="num_outputs=3")
    assert report.errors == [] and shapes(types) == [(3,), (3,), (1,)]


@pytest.mark.parametrize(
    ("dim", "n", "parts"),
    [
        (6, 3, [2, 2, 2]),
        (8, 3, [3, 3, 2]),
        (7, 4, [2, 2, 2, 1]),
        (4, 3, [2, 2, 0]),
        (0, 2, [0, 0]),
    ],
)
def test_split_18_num_outputs_gives_ceil_parts_and_a_smaller_last(
    dim: int, n: int, parts: list[int]
) -> None:
    types, report = split(18, f"[2,{dim}]", n, attrs=f"axis=1, num_outputs={n}")
    assert report.errors == [] and shapes(types) == [(2, p) for p in parts]


def test_split_zero_size_parts() -> None:
    types, report = split(13, "[0]", 3, split_input=const(0, 0, 0))
    assert report.errors == [] and shapes(types) == [(0,), (0,), (0,)]
    types, report = split(13, "[0,3]", 3)
    assert report.errors == [] and shapes(types) == [(0, 3)] * 3


# --- symbolic dims ----------------------------------------------------------------------------


def test_split_equal_parts_of_a_symbolic_dim_divide_it() -> None:
    types, report = split(13, "[N,6]", 3)
    assert report.errors == [] and shapes(types) == [("floor(N/3)", 6)] * 3
    types, report = split(11, "[M,6]", 2, dims=("2*M", 6))
    assert report.errors == [] and shapes(types) == [("M", 6)] * 2


def test_split_18_num_outputs_of_a_symbolic_dim_gives_ceil_parts() -> None:
    types, report = split(18, "[N]", 3, attrs="num_outputs=3")
    assert report.errors == []
    assert shapes(types) == [("ceil(N/3)",), ("ceil(N/3)",), ("N-2*ceil(N/3)",)]
    for n in range(3, 20):
        chunk = math.ceil(n / 3)
        values = [evaluate(t.shape[0], {"N": n}) for t in types]
        assert values == [chunk, chunk, n - 2 * chunk]


def test_split_sizes_of_a_symbolic_dim_record_the_assumption() -> None:
    types, report = split(13, "[N,M]", 2, attrs="axis=1", split_input=const(2, 4))
    assert report.errors == [] and shapes(types) == [("N", 2), ("N", 4)]
    assert [(a.a, a.b, a.node, a.op) for a in report.assumptions] == [
        ("M", 6, "split_node", "Split-13")
    ]


def test_split_with_an_unknown_rank_keeps_the_type_and_checks_the_counts() -> None:
    types, report = split(11, "[2]", 2, attrs="split=[1, 1]", unknown_rank=("x",))
    assert report.errors == [] and types == [TensorType(F32, None)] * 2
    _, report = split(11, "[2]", 2, attrs="split=[1, 1, 0]", unknown_rank=("x",))
    assert "split [1, 1, 0] has 3 sizes for 2 outputs" in error_text(report)


# --- errors -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("version", "shape", "n", "attrs", "split_input", "reason"),
    [
        (13, "[7]", 3, "", "", "dim 7 cannot be split into 3 equal parts"),
        (2, "[7,2]", 2, "", "", "dim 7 cannot be split into 2 equal parts"),
        (11, "[4,6]", 2, "axis=1, split=[2, 3]", "", "split [2, 3] sums to 5, but the dim is 6"),
        (13, "[4,6]", 2, "axis=1", const(2, 5), "split [2, 5] sums to 7, but the dim is 6"),
        (18, "[6]", 2, "", const(1, 2, 3), "split has 3 sizes for 2 outputs"),
        (2, "[6]", 2, "split=[1, 2, 3]", "", "split [1, 2, 3] has 3 sizes for 2 outputs"),
        (13, "[6]", 2, "", const(7, -1), "split [7, -1] has a negative size (-1)"),
        (11, "[6]", 2, "axis=1", "", "axis 1 is outside [-1, 0] for input [6]"),
        (13, "[6,2]", 2, "axis=-3", "", "axis -3 is outside [-2, 1] for input [6,2]"),
        (2, "[6,2]", 2, "axis=-1", "", "axis -1 is negative (allowed from Split-11)"),
        (1, "[6,2]", 2, "axis=2", "", "axis 2 is outside [0, 1]"),
        (18, "[5]", 4, "num_outputs=4", "", "dim 5 cannot be split into 4 parts of 2"),
        (18, "[6]", 2, "num_outputs=3", "", "num_outputs is 3, but the node has 2 outputs"),
        (18, "[6]", 2, "", "", "neither the split input nor num_outputs is given"),
        (18, "[6]", 2, "num_outputs=2", const(3, 3), "both the split input and num_outputs"),
        (1, "[6]", 2, "split=[3, 3]", const(3.0, 3.0, dtype="float"),
         "split is given both as attribute and as input"),
        (1, "[6]", 2, "", const(2.5, 3.5, dtype="float"), "holds non-integers"),
    ],
)  # fmt: skip
def test_split_errors_name_the_node_the_version_and_the_numbers(
    *, version: int, shape: str, n: int, attrs: str, split_input: str, reason: str
) -> None:
    types, report = split(version, shape, n, attrs=attrs, split_input=split_input)
    message = error_text(report)
    assert "split_node" in message and f"Split-{version}" in message
    assert reason in message


@pytest.mark.parametrize(("version", "dtype"), [(1, "int32"), (2, "bfloat16"), (11, "bfloat16")])
def test_split_rejects_types_outside_its_constraint(version: int, dtype: str) -> None:
    _, report = split(version, "[4]", 2, dtype=dtype)
    assert f"Split-{version} does not take {dtype} for input" in error_text(report)
    _, report = split(13, "[4]", 2, dtype=dtype)
    assert report.errors == []


def test_split_13_sizes_must_be_int64() -> None:
    _, report = split(13, "[4]", 2, split_input=const(2, 2, dtype="int32"))
    assert "split must be int64, got int32" in error_text(report)


# --- properties: random Split models against onnxruntime and np.split -------------------------

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=800,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
POOL = [DType.FLOAT, DType.DOUBLE, DType.FLOAT16, DType.INT32, DType.INT64, DType.INT8,
        DType.UINT8, DType.BOOL, DType.BFLOAT16]  # fmt: skip
ORT_FEEDABLE = set(POOL) - {DType.BFLOAT16}


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


@st.composite
def split_models(draw: st.DrawFn) -> dict:
    version = draw(st.sampled_from([1, 2, 11, 13, 18]))
    shape = tuple(draw(st.lists(st.integers(0, 7), min_size=1, max_size=3)))
    rank = len(shape)
    axis = draw(st.one_of(st.none(), st.integers(-rank - 1, rank)))
    count = draw(st.integers(1, 4))
    modes = {1: ["equal", "attr", "input"], 2: ["equal", "attr"], 11: ["equal", "attr"],
             13: ["equal", "input", "runtime"], 18: ["input", "runtime", "chunks", "chunks",
             "equal"]}[version]  # fmt: skip
    mode = draw(st.sampled_from(modes))
    dim = shape[(axis or 0) % rank] if -rank <= (axis or 0) < rank else 3
    sizes = None
    if mode in ("attr", "input", "runtime"):
        if draw(st.integers(0, 3)):  # mostly sizes that add up
            cuts = sorted(draw(st.lists(st.integers(0, dim), min_size=count - 1,
                                        max_size=count - 1)))  # fmt: skip
            sizes = [b - a for a, b in zip([0, *cuts], [*cuts, dim], strict=True)]
        else:
            sizes = draw(st.lists(st.integers(-1, 7), min_size=1, max_size=5))
    chunks = None
    if mode == "chunks":
        chunks = count if draw(st.integers(0, 5)) else draw(st.integers(0, 5))
    allowed = sorted(SPLIT_TYPES[version] & set(POOL))
    dtype = draw(st.sampled_from(allowed if draw(st.integers(0, 3)) else POOL))
    symbolic = draw(st.integers(0, 4)) == 0
    return {"version": version, "shape": shape, "axis": axis, "count": count, "mode": mode,
            "sizes": sizes, "chunks": chunks, "dtype": dtype, "symbolic": symbolic}  # fmt: skip


def oracle(case: dict) -> list[tuple[int, ...]] | None:
    """Output shapes by the spec, with np.split doing the splitting; None: invalid model."""
    version, shape, count = case["version"], case["shape"], case["count"]
    if case["dtype"] not in SPLIT_TYPES[version]:
        return None
    axis = 0 if case["axis"] is None else case["axis"]
    if axis < 0 and version < 11:
        return None
    if not -len(shape) <= axis < len(shape):
        return None
    dim = shape[axis]
    mode, sizes, chunks = case["mode"], case["sizes"], case["chunks"]
    if mode == "equal":
        if version >= 18 or dim % count:
            return None  # Split-18 needs split or num_outputs
        sizes = [dim // count] * count
    elif mode == "chunks":
        if chunks != count:
            return None
        size = math.ceil(dim / chunks)
        sizes = [size] * (chunks - 1) + [dim - size * (chunks - 1)]
    if len(sizes) != count or min(sizes) < 0 or sum(sizes) != dim:
        return None
    parts = np.split(np.zeros(shape), np.cumsum(sizes)[:-1], axis=axis)
    return [p.shape for p in parts]


def ort_departs(case: dict) -> str | None:
    """Where onnxruntime's Split departs from the spec: why, or None."""
    shape, axis = case["shape"], case["axis"] or 0
    if case["version"] == 2 and axis < 0:
        return "Split-2 with a negative axis runs in onnxruntime"
    if case["mode"] == "chunks" and case["chunks"] != case["count"]:
        return "onnxruntime splits by the output count, whatever num_outputs says"
    if case["mode"] == "chunks" and -len(shape) <= axis < len(shape):
        dim, k = shape[axis], case["chunks"]
        if k and dim - math.ceil(dim / k) * (k - 1) == 0:
            return "onnxruntime refuses num_outputs with an empty last part (4 into 3)"
    return None


def split_proto(case: dict) -> tuple[onnx.ModelProto, dict[str, np.ndarray]]:
    version, shape, mode, dtype = case["version"], case["shape"], case["mode"], case["dtype"]
    dims: list[int | str] = list(shape)
    if case["symbolic"]:
        dims = [f"d{i}" for i in range(len(shape))]
    inputs = [helper.make_tensor_value_info("x", dtype, dims)]
    feeds = {"x": np.ones(shape, dtype=DType(dtype).numpy)} if dtype in ORT_FEEDABLE else {}
    names, inits, attrs = ["x"], [], {}
    if case["axis"] is not None:
        attrs["axis"] = case["axis"]
    if mode == "attr":
        attrs["split"] = case["sizes"]
    elif mode == "chunks":
        attrs["num_outputs"] = case["chunks"]
    elif mode in ("input", "runtime"):
        sizes = np.array(case["sizes"], dtype=np.float32 if version == 1 else np.int64)
        names.append("s")
        if mode == "input":
            inits.append(numpy_helper.from_array(sizes, "s"))
        else:
            inputs.append(helper.make_tensor_value_info("s", onnx.TensorProto.INT64, [None]))
            feeds["s"] = sizes
    outs = [f"y{i}" for i in range(case["count"])]
    node = helper.make_node("Split", names, outs, name="split", **attrs)
    graph = helper.make_graph(
        [node], "g", inputs, [onnx.ValueInfoProto(name=o) for o in outs], initializer=inits
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", version)])
    model.ir_version = 3 if version < 7 else 8
    return model, feeds


def ort_run(ort: object, proto: onnx.ModelProto, feeds: dict) -> list[tuple] | str:
    try:
        session = ort.InferenceSession(  # type: ignore[attr-defined]
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return [tuple(o.shape) for o in session.run(None, feeds)]
    except Exception as e:  # onnxruntime raises its own exception types
        return "unsupported" if "NOT_IMPLEMENTED" in str(e) else "invalid"


@SETTINGS
@given(split_models())
def test_random_split_models_agree_with_onnxruntime_and_np_split(ort: object, case: dict) -> None:
    truth = oracle(case)
    mode, version = case["mode"], case["version"]
    event(f"Split-{version} {mode}: {'ok' if truth is not None else 'invalid'}")
    proto, feeds = split_proto(case)
    model = from_proto(proto)
    report = infer(model)
    got = [v.type for v in model.graph.outputs]

    if not case["symbolic"] and case["dtype"] in ORT_FEEDABLE and version >= 2:
        verdict = ort_run(ort, proto, feeds)
        departs = ort_departs(case)
        event(f"onnxruntime: {verdict if isinstance(verdict, str) else 'ran'}")
        if departs is not None:
            event(f"onnxruntime departs: {departs}")
        elif verdict == "invalid":
            assert truth is None, f"onnxruntime refuses what the oracle gives: {truth}"
        elif verdict != "unsupported":
            assert verdict == truth, f"oracle {truth}, onnxruntime {verdict}"

    bindings = {f"d{i}": d for i, d in enumerate(case["shape"])}
    if truth is None:
        if mode != "runtime" and not case["symbolic"]:
            assert report.errors, f"accepted an invalid model: {got}"
        return
    assert report.errors == [], [str(e) for e in report.errors]
    axis = (case["axis"] or 0) % len(case["shape"])
    assert all(isinstance(t, TensorType) and t.dtype == case["dtype"] for t in got)
    if any(evaluate(a.a, bindings) != evaluate(a.b, bindings) for a in report.assumptions):
        return  # the result is promised only where its assumptions hold
    for t, want in zip(got, truth, strict=True):
        values = [evaluate(d, bindings) for d in t.shape]
        if mode == "runtime":
            assert is_unknown_symbol(t.shape[axis])
            values[axis] = want[axis]
        assert tuple(values) == want, f"inferred {t.shape}, truth {want}"
