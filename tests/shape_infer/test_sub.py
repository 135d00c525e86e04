"""Shape rules of Sub in every version (and Add/Mul/Div/Pow, comparisons, Where, Mod, BitShift).

Unit tests on small models from ONNX text; property tests on random models checked against what
onnxruntime computes where it runs them, and against an oracle written here (numpy computing the
legacy subtraction directly) where it does not (opset 1 and 6, types without a CPU kernel).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import onnx
import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st
from onnx import helper

from onnxforge import opset
from onnxforge.io import from_proto
from onnxforge.ir import DType, Model, TensorType
from onnxforge.shape_infer import InferReport, infer
from onnxforge.shape_infer.symbolic import evaluate, is_unknown_symbol
from onnxforge.testing import model_from_text

F16, F32, F64, BF16 = DType.FLOAT16, DType.FLOAT, DType.DOUBLE, DType.BFLOAT16
I8, I16, I32, I64 = DType.INT8, DType.INT16, DType.INT32, DType.INT64
U8, U16, U32, U64 = DType.UINT8, DType.UINT16, DType.UINT32, DType.UINT64
BOOL = DType.BOOL

# Type constraint T of each Sub version, as the spec lists it (not read from onnx.defs).
SUB_TYPES = {
    1: {F16, F32, F64},
    6: {F16, F32, F64, I32, I64, U32, U64},
    7: {F16, F32, F64, I32, I64, U32, U64},
    13: {F16, F32, F64, I32, I64, U32, U64, BF16},
    14: {F16, F32, F64, I32, I64, U32, U64, BF16, I8, I16, U8, U16},
}
ALL_TYPES = [F16, F32, F64, BF16, I8, I16, I32, I64, U8, U16, U32, U64, BOOL, DType.STRING]
TEXT_NAME = {t: t.name.lower() for t in DType}
TEXT_NAME[F32], TEXT_NAME[F64] = "float", "double"


def run(
    text: str, *, unknown_rank: Sequence[str] = ()
) -> tuple[dict[str, TensorType], InferReport]:
    """Infer a model written in ONNX text; graph outputs start untyped (the text cannot say so).

    ``unknown_rank``: graph inputs whose shape is made unknown.
    """
    model = model_from_text(text)
    for value in model.graph.outputs:
        value.type = None
    for value in model.graph.inputs:
        if value.name in unknown_rank:
            value.type = TensorType(value.type.dtype, None)
    report = infer(model)
    return {v.name: v.type for v in model.graph.outputs}, report


def binary(
    op: str,
    opset_version: int,
    a: str,
    b: str,
    *,
    attrs: str = "",
    a_type: str = "float",
    b_type: str | None = None,
    unknown_rank: Sequence[str] = (),
) -> tuple[TensorType | None, InferReport]:
    ir = 3 if opset_version < 7 else 8
    attrs = f"<{attrs}>" if attrs else ""
    text = (
        f'<ir_version: {ir}, opset_import: ["" : {opset_version}]> '
        f"g ({a_type}{a} a, {b_type or a_type}{b} b) => (float c) "
        f"{{ [node_{op.lower()}] c = {op}{attrs}(a, b) }}"
    )
    types, report = run(text, unknown_rank=unknown_rank)
    return types["c"], report


def error_text(report: InferReport) -> str:
    assert len(report.errors) == 1, report.errors
    return str(report.errors[0])


# --- numpy broadcasting: Sub-7, -13, -14 ------------------------------------------------------


@pytest.mark.parametrize("version", [7, 13, 14])
@pytest.mark.parametrize(
    ("a", "b", "out"),
    [
        ("[3,4,5]", "[3,4,5]", (3, 4, 5)),
        ("[3,4,5]", "[5]", (3, 4, 5)),
        ("[3,4,5]", "", (3, 4, 5)),  # "float b": a scalar
        ("[5]", "[2,3,1]", (2, 3, 5)),
        ("[2,1,4]", "[3,1]", (2, 3, 4)),
        ("[0,3]", "[1,3]", (0, 3)),
        ("[1]", "[0]", (0,)),
        ("[N,3]", "[1,3]", ("N", 3)),
        ("[N,1]", "[1,M]", ("N", "M")),
    ],
)
def test_sub_numpy_versions_give_the_broadcast_shape(
    version: int, a: str, b: str, out: tuple
) -> None:
    t, report = binary("Sub", version, a, b)
    assert report.errors == [] and report.assumptions == []
    assert t == TensorType(F32, out)


def test_sub_14_n_against_m_is_exact_not_an_assumption() -> None:
    """N or M may be the broadcast 1: min(M*N, max(M, N)) is the dim at every valid pair."""
    t, report = binary("Sub", 14, "[N,3]", "[M,3]")
    assert t == TensorType(F32, ("min(M*N, max(M, N))", 3))
    assert report.errors == [] and report.assumptions == []


@pytest.mark.parametrize("version", [7, 13, 14])
def test_sub_shapes_that_do_not_broadcast_are_an_error_naming_node_version_and_shapes(
    version: int,
) -> None:
    t, report = binary("Sub", version, "[2,3]", "[4]")
    message = error_text(report)
    assert "node_sub" in message and f"Sub-{version}" in message
    assert "float[2,3]" in message and "float[4]" in message
    assert "dim 1 of A (3) does not fit dim 0 of B (4)" in message
    assert t is None or t.shape is None


def test_sub_14_with_an_unknown_rank_gives_an_unknown_rank_of_the_same_type() -> None:
    t, report = binary("Sub", 14, "[2,3]", "[3]", a_type="int8", unknown_rank=("b",))
    assert report.errors == []
    assert t == TensorType(I8, None)


# --- legacy broadcasting: Sub-1 and Sub-6 -----------------------------------------------------


@pytest.mark.parametrize("version", [1, 6])
@pytest.mark.parametrize(
    ("a", "b", "attrs", "out"),
    [
        # broadcast=0 (the default): equal shapes
        ("[2,3]", "[2,3]", "", (2, 3)),
        ("[2,3]", "[2,3]", "broadcast=0", (2, 3)),
        # the spec's examples of broadcast=1
        ("[2,3,4,5]", "", "broadcast=1", (2, 3, 4, 5)),
        ("[2,3,4,5]", "[1,1]", "broadcast=1", (2, 3, 4, 5)),
        ("[2,3,4,5]", "[5]", "broadcast=1", (2, 3, 4, 5)),
        ("[2,3,4,5]", "[4,5]", "broadcast=1", (2, 3, 4, 5)),
        ("[2,3,4,5]", "[3,4]", "broadcast=1, axis=1", (2, 3, 4, 5)),
        ("[2,3,4,5]", "[2]", "broadcast=1, axis=0", (2, 3, 4, 5)),
        # B's leading and trailing 1s broadcast (Caffe2); the output has A's shape
        ("[2,3,4,5]", "[1,4,1]", "broadcast=1, axis=1", (2, 3, 4, 5)),
        ("[N,3]", "[3]", "broadcast=1", ("N", 3)),
    ],
)
def test_sub_legacy_versions_give_a_shape(
    version: int, a: str, b: str, attrs: str, out: tuple
) -> None:
    t, report = binary("Sub", version, a, b, attrs=attrs)
    assert report.errors == [] and report.assumptions == []
    assert t == TensorType(F32, out)


@pytest.mark.parametrize("version", [1, 6])
@pytest.mark.parametrize(
    ("a", "b", "attrs", "reason"),
    [
        ("[2,3]", "[3]", "", "none rule: ranks differ (2 and 1)"),
        ("[2,3]", "[2,4]", "broadcast=0", "dim 1 of A (3) does not fit dim 1 of B (4)"),
        ("[2,3,4,5]", "[3,4]", "broadcast=1", "dim 2 of A (4) does not fit dim 0 of B (3)"),
        ("[2,3,4,5]", "[3,4]", "broadcast=1, axis=3", "axis 3 is outside [0, 2]"),
        ("[3]", "[2,3]", "broadcast=1", "rank of B (2) exceeds rank of A (1)"),
        ("[2,3,4]", "[3,1,4]", "broadcast=1", "does not fit"),  # no 1-dim expansion inside B
        # a one-element B only "with rank equal to or smaller than the first tensor"
        ("[3]", "[1,1]", "broadcast=1", "[3] and [1,1] under the legacy rule: rank of B (2)"),
        ("[1]", "[1,1]", "broadcast=1", "[1] and [1,1] under the legacy rule: rank of B (2)"),
        ("", "[1]", "broadcast=1", "[] and [1] under the legacy rule: rank of B (1)"),
    ],
)
def test_sub_legacy_shapes_that_do_not_fit_are_an_error(
    version: int, a: str, b: str, attrs: str, reason: str
) -> None:
    _, report = binary("Sub", version, a, b, attrs=attrs)
    message = error_text(report)
    assert f"Sub-{version}" in message and "node_sub" in message and reason in message


def test_sub_6_without_broadcast_takes_n_and_m_equal() -> None:
    t, report = binary("Sub", 6, "[N,3]", "[M,3]")
    assert t == TensorType(F32, ("N", 3))
    assert [(a.a, a.b, a.op) for a in report.assumptions] == [("N", "M", "Sub-6")]


def test_sub_1_without_broadcast_takes_a_symbol_equal_to_the_static_dim() -> None:
    t, report = binary("Sub", 1, "[N,3]", "[2,3]")
    assert report.errors == [] and t == TensorType(F32, (2, 3))
    assert [(a.a, a.b, a.node) for a in report.assumptions] == [("N", 2, "node_sub")]


def test_sub_6_broadcast_keeps_a_even_when_b_has_an_unknown_rank() -> None:
    t, report = binary("Sub", 6, "[2,3]", "[3]", attrs="broadcast=1", unknown_rank=("b",))
    assert report.errors == [] and t == TensorType(F32, (2, 3))


# --- element types ----------------------------------------------------------------------------


@pytest.mark.parametrize("version", sorted(SUB_TYPES))
def test_sub_type_constraints_are_read_from_the_schema(version: int) -> None:
    assert opset.allowed_types("Sub", version) == SUB_TYPES[version]


@pytest.mark.parametrize("version", sorted(SUB_TYPES))
@pytest.mark.parametrize("dtype", [t for t in ALL_TYPES if t != DType.STRING])
def test_sub_accepts_exactly_the_types_of_its_version(version: int, dtype: DType) -> None:
    ir = 3 if version < 7 else 8
    text = (
        f'<ir_version: {ir}, opset_import: ["" : {version}]> '
        f"g ({TEXT_NAME[dtype]}[2,3] a, {TEXT_NAME[dtype]}[2,3] b) => (float c) "
        "{ [s] c = Sub(a, b) }"
    )
    types, report = run(text)
    if dtype in SUB_TYPES[version]:
        assert report.errors == [] and types["c"] == TensorType(dtype, (2, 3))
    else:
        message = error_text(report)
        assert f"Sub-{version} does not take {TEXT_NAME[dtype]} for A" in message


def test_sub_13_rejects_int8_naming_the_version_and_the_type() -> None:
    _, report = binary("Sub", 13, "[2]", "[2]", a_type="int8")
    message = error_text(report)
    assert "node_sub" in message and "Sub-13 does not take int8" in message
    _, report = binary("Sub", 14, "[2]", "[2]", a_type="int8")
    assert report.errors == []


def test_sub_a_and_b_of_different_types_are_an_error() -> None:
    _, report = binary("Sub", 14, "[2]", "[2]", a_type="float", b_type="double")
    assert "one element type for A and B (both T), got float and double" in error_text(report)


def test_allowed_types_rejects_a_version_that_is_no_schema_version() -> None:
    with pytest.raises(Exception, match="Sub-8 is no schema version; versions: 1, 6, 7, 13, 14"):
        opset.allowed_types("Sub", 8)


# --- the other element-wise ops ---------------------------------------------------------------


@pytest.mark.parametrize("op", ["Add", "Mul", "Div"])
@pytest.mark.parametrize("version", [1, 6, 7, 13, 14])
def test_add_mul_div_follow_the_rules_of_sub(op: str, version: int) -> None:
    attrs = "broadcast=1" if version < 7 else ""
    t, report = binary(op, version, "[2,3,4]", "[4]", attrs=attrs)
    assert report.errors == [] and t == TensorType(F32, (2, 3, 4))
    _, report = binary(op, version, "[2,3,4]", "[3]", attrs=attrs)
    assert f"{op}-{version}" in error_text(report)


def test_pow_12_takes_an_exponent_of_another_type_and_gives_the_base_type() -> None:
    t, report = binary("Pow", 12, "[2,3]", "[3]", a_type="float", b_type="int64")
    assert report.errors == [] and t == TensorType(F32, (2, 3))
    _, report = binary("Pow", 7, "[2,3]", "[3]", a_type="float", b_type="double")
    assert "Pow-7 needs one element type for X and Y" in error_text(report)
    _, report = binary("Pow", 7, "[2,3]", "[3]", a_type="float", b_type="int64")
    assert "Pow-7 does not take int64 for Y" in error_text(report)
    _, report = binary("Pow", 15, "[2,3]", "[3]", a_type="int8", b_type="int64")
    assert "Pow-15 does not take int8 for X" in error_text(report)


def test_pow_1_uses_the_legacy_rule() -> None:
    t, report = binary("Pow", 1, "[2,3]", "[2]", attrs="broadcast=1, axis=0")
    assert report.errors == [] and t == TensorType(F32, (2, 3))


@pytest.mark.parametrize(
    ("op", "version", "dtype"),
    [
        ("Equal", 19, "string"),
        ("Less", 13, "int8"),
        ("Greater", 9, "uint64"),
        ("LessOrEqual", 16, "float"),
        ("GreaterOrEqual", 12, "double"),
        ("And", 7, "bool"),
        ("Or", 7, "bool"),
        ("Xor", 7, "bool"),
    ],
)
def test_comparisons_and_logical_ops_give_bool(op: str, version: int, dtype: str) -> None:
    t, report = binary(op, version, "[N,1,3]", "[4,1]", a_type=dtype)
    assert report.errors == [] and t == TensorType(BOOL, ("N", 4, 3))


def test_less_7_rejects_int32_which_came_with_less_9() -> None:
    _, report = binary("Less", 7, "[3]", "[3]", a_type="int32")
    assert "Less-7 does not take int32 for A" in error_text(report)


def test_equal_1_uses_the_legacy_rule_and_gives_bool() -> None:
    t, report = binary("Equal", 1, "[2,3]", "[3]", a_type="int64", attrs="broadcast=1")
    assert report.errors == [] and t == TensorType(BOOL, (2, 3))


def test_where_broadcasts_condition_x_and_y_together() -> None:
    text = (
        '<ir_version: 8, opset_import: ["" : 16]> '
        "g (bool[N,1,1] c, int64[3,1] x, int64[4] y) => (int64 z) { [w] z = Where(c, x, y) }"
    )
    types, report = run(text)
    assert report.errors == [] and types["z"] == TensorType(I64, ("N", 3, 4))
    bad = text.replace("int64[3,1] x", "int64[3,2] x")
    _, report = run(bad)
    assert "Where-16" in error_text(report)
    _, report = run(text.replace("bool[N,1,1] c", "float[N,1,1] c"))
    assert "Where-16 does not take float for condition" in error_text(report)


def test_where_with_one_unknown_rank_still_checks_the_other_two() -> None:
    text = (
        '<ir_version: 8, opset_import: ["" : 9]> '
        "g (bool[2] c, float[3] x, float[4] y) => (float z) { z = Where(c, x, y) }"
    )
    _, report = run(text, unknown_rank=("c",))
    assert "cannot broadcast [3] and [4]" in error_text(report)
    types, report = run(text.replace("float[4] y", "float[1] y"), unknown_rank=("c",))
    assert report.errors == [] and types["z"] == TensorType(F32, None)


def test_mod_on_floats_needs_fmod_1_before_mod_28() -> None:
    _, report = binary("Mod", 13, "[3]", "[3]")
    assert "Mod-13 on float needs fmod=1" in error_text(report)
    t, report = binary("Mod", 13, "[3]", "[3]", attrs="fmod=1")
    assert report.errors == [] and t == TensorType(F32, (3,))
    t, report = binary("Mod", 28, "[3]", "[1]")
    assert report.errors == [] and t == TensorType(F32, (3,))


def test_bitshift_11_takes_unsigned_types_only() -> None:
    t, report = binary("BitShift", 11, "[3]", "[1]", a_type="uint8", attrs='direction="LEFT"')
    assert report.errors == [] and t == TensorType(U8, (3,))
    _, report = binary("BitShift", 11, "[3]", "[1]", a_type="int8", attrs='direction="LEFT"')
    assert "BitShift-11 does not take int8 for X" in error_text(report)


# --- properties: random Sub models against onnxruntime and an oracle --------------------------

SETTINGS = settings(
    derandomize=True,
    database=None,
    deadline=None,
    max_examples=1000,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
ORT_FEEDABLE = {F16, F32, F64, I8, I16, I32, I64, U8, U16, U32, U64, BOOL, DType.STRING}
SYMBOLS = ("n", "m", "k")


def numpy_oracle(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, ...] | None:
    """The shape numpy gives A - B, or None when numpy refuses."""
    try:
        return np.subtract(np.zeros(a), np.zeros(b)).shape
    except ValueError:
        return None


def legacy_oracle(
    a: tuple[int, ...], b: tuple[int, ...], broadcast: int | None, axis: int | None
) -> tuple[int, ...] | None:
    """Sub-1/6 computed directly: the spec's rule with Caffe2's treatment of B's outer 1s.

    broadcast=0: equal shapes. broadcast=1: rank(B) <= rank(A); a one-element B fits from any
    axis; otherwise B, with its leading and trailing 1s set aside, must equal A's dims from
    ``axis`` (suffix when absent).
    """
    x, y = np.zeros(a), np.zeros(b)
    if not broadcast:
        return (x - y).shape if a == b else None
    if y.ndim > x.ndim:
        return None
    if y.size == 1:
        return (x - y.reshape(())).shape
    start = x.ndim - y.ndim if axis in (None, -1) else axis
    if not 0 <= start <= x.ndim - y.ndim:
        return None
    core = [j for j, d in enumerate(b) if d != 1]
    lo, hi = core[0], core[-1] + 1
    if b[lo:hi] != a[start + lo : start + hi]:
        return None
    placed = [1] * x.ndim
    placed[start + lo : start + hi] = b[lo:hi]
    out = x - y.reshape(placed)  # B's outer 1s dropped, B placed on A's dims from start
    assert out.shape == a
    return out.shape


@pytest.fixture(scope="module")
def ort() -> object:
    module = pytest.importorskip("onnxruntime")
    module.set_default_logger_severity(4)
    return module


def ort_verdict(ort: object, proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> object:
    """Output shapes when onnxruntime runs the model; "invalid" when it refuses the model or
    fails running it; "unsupported" when it has no kernel for the op at this version or type."""
    try:
        session = ort.InferenceSession(  # type: ignore[attr-defined]
            proto.SerializeToString(), providers=["CPUExecutionProvider"]
        )
        return [tuple(o.shape) for o in session.run(None, feeds)]
    except Exception as e:  # onnxruntime raises its own exception types
        text = str(e)
        if "NOT_IMPLEMENTED" in text or "Could not find an implementation" in text:
            return "unsupported"
        return "invalid"


def feed(dtype: DType, shape: tuple[int, ...]) -> np.ndarray:
    if dtype == DType.STRING:
        return np.full(shape, "s", dtype=object)
    return np.ones(shape, dtype=dtype.numpy)


@st.composite
def shapes_pair(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A and B: often related (B a slice of A with some dims set to 1), sometimes random."""
    a = tuple(draw(st.lists(st.integers(0, 4), max_size=4)))
    if draw(st.booleans()):
        start = draw(st.integers(0, len(a)))
        end = draw(st.integers(start, len(a)))
        b = [
            d if draw(st.integers(0, 3)) else draw(st.sampled_from([1, 1, 2, 3]))
            for d in a[start:end]
        ]
        if draw(st.integers(0, 4)) == 0:
            b = [draw(st.integers(1, 3))] + b  # longer than A, sometimes
    else:
        b = draw(st.lists(st.integers(0, 4), max_size=4))
    pair = (a, tuple(b))
    return pair[::-1] if draw(st.integers(0, 5)) == 0 else pair


@st.composite
def sub_models(draw: st.DrawFn) -> dict:
    version = draw(st.sampled_from([1, 6, 7, 13, 14]))
    a, b = draw(shapes_pair())
    allowed = sorted(SUB_TYPES[version])
    dtype_a = draw(st.sampled_from(allowed if draw(st.integers(0, 3)) else ALL_TYPES))
    dtype_b = dtype_a if draw(st.integers(0, 7)) else draw(st.sampled_from(ALL_TYPES))
    attrs: dict[str, int] = {}
    if version < 7:
        broadcast = draw(st.sampled_from([None, 0, 1, 1, 1]))
        if broadcast is not None:
            attrs["broadcast"] = broadcast
        if broadcast and draw(st.booleans()):
            attrs["axis"] = draw(st.integers(-2, len(a) + 1))
    symbols: dict[str, int] = {}
    if draw(st.integers(0, 3)) == 0:  # some dims become symbols bound to their values
        symbols = {s: draw(st.integers(0, 4)) for s in SYMBOLS}
    return {
        "version": version,
        "a": a,
        "b": b,
        "dtypes": (dtype_a, dtype_b),
        "attrs": attrs,
        "symbols": symbols,
        "seed": draw(st.integers(0, 2**16)),
    }


def declared(shape: tuple[int, ...], symbols: dict[str, int], seed: int) -> list[int | str]:
    """Dims as declared: a dim whose value a symbol is bound to becomes that symbol, sometimes."""
    out: list[int | str] = []
    for i, d in enumerate(shape):
        names = [s for s, v in symbols.items() if v == d]
        out.append(names[(seed >> i) % len(names)] if names and (seed >> (i + 8)) & 1 else d)
    return out


def sub_proto(case: dict) -> onnx.ModelProto:
    symbols, seed = case["symbols"], case["seed"]
    inputs = [
        helper.make_tensor_value_info(name, dtype, declared(shape, symbols, seed + k))
        for k, (name, dtype, shape) in enumerate(
            zip("ab", case["dtypes"], (case["a"], case["b"]), strict=True)
        )
    ]
    node = helper.make_node("Sub", ["a", "b"], ["c"], name="sub", **case["attrs"])
    graph = helper.make_graph([node], "g", inputs, [onnx.ValueInfoProto(name="c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", case["version"])])
    model.ir_version = 3 if case["version"] < 7 else 8
    return model


@SETTINGS
@given(sub_models())
def test_random_sub_models_agree_with_onnxruntime_and_the_oracle(ort: object, case: dict) -> None:
    version, a, b = case["version"], case["a"], case["b"]
    dtype_a, dtype_b = case["dtypes"]
    types_ok = dtype_a == dtype_b and dtype_a in SUB_TYPES[version]
    if version >= 7:
        truth = numpy_oracle(a, b)
    else:
        attrs = case["attrs"]
        truth = legacy_oracle(a, b, attrs.get("broadcast"), attrs.get("axis"))
    event(
        f"Sub-{version}: "
        + ("bad type" if not types_ok else "bad shape" if truth is None else "ok")
    )
    proto = sub_proto(case)
    model: Model = from_proto(proto)
    report = infer(model)
    out = model.graph.outputs[0].type
    symbols = case["symbols"]

    if not case["symbols"] and version >= 7 and {dtype_a, dtype_b} <= ORT_FEEDABLE:
        verdict = ort_verdict(ort, proto, {"a": feed(dtype_a, a), "b": feed(dtype_b, b)})
        event(f"onnxruntime: {verdict if isinstance(verdict, str) else 'ran'}")
        if verdict == "invalid":
            assert not (types_ok and truth is not None), "the oracle accepts what ORT refuses"
        elif verdict != "unsupported":
            assert types_ok and [truth] == verdict, f"oracle {truth}, onnxruntime {verdict}"

    if not types_ok or (truth is None and not symbols):
        assert report.errors, f"accepted an invalid model: {out}"
        return
    if truth is None:
        return  # symbols may stand for the 1s that would make it fit: nothing to require
    assert report.errors == [], [str(e) for e in report.errors]
    holds = all(evaluate(x.a, symbols) == evaluate(x.b, symbols) for x in report.assumptions)
    if not holds:
        return  # the result is promised only where its assumptions hold
    assert out.dtype == dtype_a
    got = tuple(evaluate(d, symbols) if not is_unknown_symbol(d) else None for d in out.shape)
    assert got == truth, f"inferred {out.shape} = {got}, truth {truth}"
