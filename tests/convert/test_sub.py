"""Converting Sub (and Add, Mul, Div, which share its adapters) between every pair of its
versions (1, 6, 7, 13, 14), with numerics, the cases onnx's own converter gets wrong, and the
nodes a version cannot express, refused by name."""

from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest
from convert.numerics import convert_and_compare, evaluate

from onnxforge import opset as schemas
from onnxforge.errors import AdapterError
from onnxforge.ir import DType, Model, Op
from onnxforge.passes.convert import convert
from onnxforge.testing import model_from_text

VERSIONS = (1, 6, 7, 13, 14)
RNG = np.random.default_rng(5)
A = RNG.standard_normal((2, 3, 4, 5)).astype(np.float32)
B34 = RNG.standard_normal((3, 4)).astype(np.float32)
B45 = RNG.standard_normal((4, 5)).astype(np.float32)


def header(opset: int) -> str:
    return f'<ir_version: {3 if opset < 7 else 8}, opset_import: ["" : {opset}]>'


def binary(
    opset: int, a: str, b: str, attrs: str = "", *, op: str = "Sub", out: str | None = None
) -> Model:
    """``c = op <attrs> (a, b)`` with inputs typed as given (``float[2,3] a``)."""
    attr = f" <{attrs}>" if attrs else ""
    out_type = (out or a).split(maxsplit=1)[0]
    text = f"{header(opset)} g ({a}, {b}) => ({out_type} c) {{ c = {op}{attr} (a, b) }}"
    return model_from_text(text)


def sub_model(version: int) -> tuple[Model, np.ndarray]:
    """A Sub of each version: the legacy ones broadcast B (3x4) from axis 1 (Sub-1 also sets
    consumed_inputs), the numpy ones B (4x5) onto the trailing dims."""
    a = "float[2,3,4,5] a"
    if version == 1:
        attrs = "broadcast = 1, axis = 1, consumed_inputs = [0, 0]"
        return binary(1, a, "float[3,4] b", attrs), B34
    if version == 6:
        return binary(6, a, "float[3,4] b", "broadcast = 1, axis = 1"), B34
    return binary(version, a, "float[4,5] b"), B45


def node(model: Model, op_type: str = "Sub") -> Op:
    (op,) = [op for op in model.graph.ops if op.op_type == op_type]
    return op


PAIRS = [(a, b) for a in VERSIONS for b in VERSIONS if a != b]


@pytest.mark.parametrize(("source", "target"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
def test_sub_converts_between_every_pair_of_versions_computing_the_same(
    source: int, target: int
) -> None:
    model, b = sub_model(source)
    convert_and_compare(model, target, {"a": A, "b": b})
    op = node(model)
    assert schemas.since_version("Sub", model.opset()) == target
    assert "consumed_inputs" not in op.attrs
    if target >= 7:
        assert op.attrs == {}
    elif source < 7:
        assert op.attrs == {"broadcast": 1, "axis": 1}
    else:
        assert op.attrs == {"broadcast": 1, "axis": 2}


# -- 6 -> 7: the legacy broadcast as numpy broadcasting ----------------------------------
def test_sub_6_axis_1_with_a_2x3x4x5_and_b_3x4_reshapes_b_to_3x4x1() -> None:
    # onnx's converter asserts on this one
    model = binary(6, "float[2,3,4,5] a", "float[3,4] b", "broadcast = 1, axis = 1")
    convert_and_compare(model, 7, {"a": A, "b": B34})
    reshape = node(model, "Reshape")
    shape = model.graph.inputs_of(reshape)[1]
    assert shape.const.numpy().tolist() == [0, 0, 1]  # 0: B's own dims, whatever they are
    assert model.graph.inputs_of(node(model))[1] is model.graph.outputs_of(reshape)[0]


def test_sub_6_axis_0_converts_to_a_model_onnxruntime_loads() -> None:
    # onnx's converter writes a value_info of dtype 0 here, which onnxruntime refuses
    b = RNG.standard_normal(2).astype(np.float32)
    model = binary(6, "float[2,3,4,5] a", "float[2] b", "broadcast = 1, axis = 0")
    convert_and_compare(model, 14, {"a": A, "b": b})


@pytest.mark.parametrize("target", [7, 13, 14, 21])
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_symbolic_dims_in_an_opset_6_broadcast_convert_up(op_type: str, target: int) -> None:
    # onnx's converter fails here: "Dimension is a param"
    model = binary(6, "float[N,3,S,5] a", "float[3,S] b", "broadcast = 1, axis = 1", op=op_type)
    b = RNG.standard_normal((3, 4)).astype(np.float32) + 3
    convert_and_compare(model, target, {"a": A, "b": b})
    out = model.graph.outputs_of(node(model, "Reshape"))[0]
    assert out.type.shape == (3, "S", 1)


def test_symbolic_dims_in_an_opset_6_broadcast_reach_the_latest_opset() -> None:
    # onnxruntime 1.31 reads IR 13 at most, which the latest opset is past: onnx checks it
    model = binary(6, "float[N,3,S,5] a", "float[3,S] b", "broadcast = 1, axis = 1")
    convert_and_compare(model, schemas.latest_opset(), {}, compare=False)


def test_sub_6_initializer_b_is_reshaped_in_place_of_a_reshape_node() -> None:
    model = model_from_text(
        '<ir_version: 4, opset_import: ["" : 6]> g (float[2,3,4,5] a) => (float[2,3,4,5] c) '
        "<float[3] b = {1, 2, 3}> { c = Sub <broadcast = 1, axis = 1> (a, b) }"
    )
    convert_and_compare(model, 13, {"a": A})
    assert [op.op_type for op in model.graph.ops] == ["Sub"]
    (b,) = model.graph.initializers
    assert b.const.numpy().shape == (3, 1, 1) and b.name == "b_legacy"


def test_sub_6_one_element_b_outside_the_axis_range_becomes_a_scalar() -> None:
    model = binary(6, "float[2,3] a", "float[1,1] b", "broadcast = 1, axis = 1")
    b = np.full((1, 1), 0.5, np.float32)
    convert_and_compare(model, 7, {"a": A[0, 0, :2, :3], "b": b})
    assert model.graph.outputs_of(node(model, "Reshape"))[0].type.shape == ()


def test_sub_6_one_element_b_of_higher_rank_than_a_is_refused_naming_the_node() -> None:
    # Sub-6 allows a one-element B only "with rank equal to or smaller than the first tensor".
    model = binary(6, "float[2,3] a", "float[1,1,1] b", "broadcast = 1")
    node(model).name = "minus"
    with pytest.raises(AdapterError, match="Sub node 'minus' 6 -> 7: .*rank of B \\(3\\)"):
        convert(model, 7)


def test_sub_6_without_broadcast_only_loses_the_attributes() -> None:
    model = binary(6, "float[4,5] a", "float[4,5] b", "broadcast = 0, axis = 1")
    convert_and_compare(model, 7, {"a": B45, "b": B45 * 2})
    assert [op.op_type for op in model.graph.ops] == ["Sub"] and node(model).attrs == {}


def test_sub_6_with_b_that_does_not_fit_a_is_refused_naming_the_node() -> None:
    model = binary(6, "float[2,3,4,5] a", "float[4,5] b", "broadcast = 1, axis = 1")
    node(model).name = "minus"
    with pytest.raises(AdapterError, match="Sub node 'minus' 6 -> 7: cannot broadcast"):
        convert(model, 7)


# -- 7 -> 6: what the legacy rule of Sub-6 expresses -----------------------------------------
def random_feed(typed: str, sizes: dict[str, int] | None = None) -> np.ndarray:
    """Random floats for an input typed as ``float[N,3] a``; symbols get ``sizes`` (N=2, S=4)."""
    sizes = sizes or {"N": 2, "S": 4}
    dims = typed[typed.index("[") + 1 : typed.index("]")].split(",")
    shape = [sizes[d] if d in sizes else int(d) for d in dims]
    return RNG.standard_normal(shape).astype(np.float32)


def squeezes(model: Model) -> list[list[int]]:
    return [op.attrs["axes"] for op in model.graph.ops if op.op_type == "Squeeze"]


@pytest.mark.parametrize("target", [6, 1])
def test_sub_7_to_6_of_2x3x4_and_3x1_squeezes_b_to_3_at_axis_1(target: int) -> None:
    # onnx's converter writes Sub-6 broadcast=1 with B (3,1), whose trailing 1 Sub-6's text
    # does not expand; B (3,) on A's dim 1 is the same values, written as Sub-6 states it
    model = binary(7, "float[2,3,4] a", "float[3,1] b")
    a, b = A[..., 0].copy(), B34[:, :1].copy()
    (got,) = convert_and_compare(model, target, {"a": a, "b": b})  # ORT at 7, kernels below
    np.testing.assert_array_equal(got, a - b)
    assert node(model).attrs == {"broadcast": 1, "axis": 1}
    assert squeezes(model) == [[1]]
    assert model.graph.inputs_of(node(model))[1].type.shape == (3,)


@pytest.mark.parametrize(
    ("a", "b", "axis", "axes", "core"),
    [
        ("float[2,3,4] a", "float[1,3,4] b", 1, [0], (3, 4)),
        ("float[2,3,4,5] a", "float[1,3,4,1] b", 1, [0, 3], (3, 4)),
        ("float[2,3,4,5] a", "float[3,1,1] b", 1, [1, 2], (3,)),
        ("float[2,1,5] a", "float[1,1,5] b", 2, [0, 1], (5,)),
        ("float[2,3,1,5] a", "float[3,1,1] b", 1, [1, 2], (3,)),
        ("float[2,3,1,5,4] a", "float[3,1,5,1] b", 1, [3], (3, 1, 5)),
        ("float[N,3,4] a", "float[3,1] b", 1, [1], (3,)),
        ("float[N,3,S,5] a", "float[1,3,S,1] b", 1, [0, 3], (3, "S")),
    ],
    ids=[
        "leading",
        "both-ends",
        "two-trailing",
        "ones-against-a-1-go-too",
        "end-1s-against-a-1-and-5",
        "inner-1-against-a-1-stays",
        "symbolic-a",
        "symbolic-b",
    ],
)
def test_sub_7_to_6_strips_the_size_1_dims_at_the_ends_of_b(
    a: str, b: str, axis: int, axes: list[int], core: tuple[object, ...]
) -> None:
    model = binary(7, a, b)
    feeds = {name: random_feed(text) for name, text in (("a", a), ("b", b))}
    (got,) = convert_and_compare(model, 6, feeds)
    np.testing.assert_array_equal(got, feeds["a"] - feeds["b"])
    assert node(model).attrs == {"broadcast": 1, "axis": axis}
    assert squeezes(model) == [axes]
    assert model.graph.inputs_of(node(model))[1].type.shape == core


def test_sub_7_to_6_reshapes_a_constant_b_into_a_new_initializer_others_keep_the_old() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 7]> g (float[2,3,4] a) => (float[2,3,4] c, '
        "float[3,1] d) <float[3,1] b = {1, 2, 3}> { c = Sub (a, b)  d = Add (b, b) }"
    )
    a = A[..., 0].copy()
    (got, d) = convert_and_compare(model, 6, {"a": a})
    b = np.array([[1], [2], [3]], np.float32)
    np.testing.assert_array_equal(got, a - b)
    np.testing.assert_array_equal(d, b + b)
    assert [op.op_type for op in model.graph.ops] == ["Sub", "Add"]
    consts = {v.name: v.const.numpy() for v in model.graph.initializers}
    assert consts["b"].shape == (3, 1) and consts["b_legacy"].shape == (3,)
    assert model.graph.inputs_of(node(model))[1].name == "b_legacy"
    assert node(model).attrs == {"broadcast": 1, "axis": 1}


def test_sub_7_to_6_replaces_a_constant_b_nothing_else_reads() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 7]> g (float[2,3,4] a) => (float[2,3,4] c) '
        "<float[1,3,1] b = {1, 2, 3}> { c = Sub (a, b) }"
    )
    a = A[..., 0].copy()
    (got,) = convert_and_compare(model, 6, {"a": a})
    np.testing.assert_array_equal(got, a - np.array([[1], [2], [3]], np.float32))
    assert [(v.name, v.const.numpy().shape) for v in model.graph.initializers] == [
        ("b_legacy", (3,))
    ]


@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_a_legacy_broadcast_goes_up_to_7_and_back_down_to_6_computing_the_same(
    op_type: str,
) -> None:
    # 6 -> 7 gives B (3,4) trailing 1s (3,4,1); 7 -> 6 takes them off again
    model = binary(6, "float[2,3,4,5] a", "float[3,4] b", "broadcast = 1, axis = 1", op=op_type)
    feeds = {"a": A, "b": B34 + 3}
    expected = evaluate(model, feeds)
    convert_and_compare(model, 7, feeds)
    convert_and_compare(model, 6, feeds)
    op = node(model, op_type)
    assert op.attrs == {"broadcast": 1, "axis": 1}
    assert model.graph.inputs_of(op)[1].type.shape == (3, 4)
    for got, want in zip(evaluate(model, feeds), expected, strict=True):
        np.testing.assert_array_equal(got, want)


def test_sub_7_to_6_with_an_inner_size_1_dim_of_b_is_refused_naming_the_node() -> None:
    model = binary(7, "float[2,3,5,4] a", "float[3,1,4] b")
    node(model).name = "minus"
    with pytest.raises(
        AdapterError,
        match=r"Sub node 'minus' 7 -> 6: A \[2,3,5,4\], B \[3,1,4\]: B's dim 1 is 1 "
        r"where A has 5; Sub-6 does not expand size-1 dims inside B",
    ):
        convert(model, 6)


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("float[2,3,4,5] a", "float[3,1,5] b", "B's dim 1 is 1 where A has 4; Sub-6 does not"),
        ("float[2,3,4,5] a", "float[1,3,1,5] b", "B's dim 2 is 1 where A has 4; Sub-6 does not"),
        ("float[2,N,4] a", "float[2,1,4] b", "B's dim 1 is 1 where A has N; Sub-6 does not"),
    ],
)
def test_sub_7_to_6_with_other_inner_size_1_dims_is_refused(a: str, b: str, why: str) -> None:
    model = binary(7, a, b)
    with pytest.raises(AdapterError, match=why):
        convert(model, 6)


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("float[3,1] a", "float[3,4] b", "A's dim 1 is 1 where B has 4: A would have to"),
        ("float[4] a", "float[3,4] b", "B has more dims than A: A would have to broadcast"),
        ("float[N,4] a", "float[M,4] b", r"dim 0 of A \(N\) and dim 0 of B \(M\) are not prov"),
    ],
)
def test_sub_7_to_6_where_a_would_broadcast_is_refused(a: str, b: str, why: str) -> None:
    model = binary(7, a, b, out="float[3,4] c")
    with pytest.raises(AdapterError, match=why):
        convert(model, 6)


@pytest.mark.parametrize("op_type", ["Add", "Mul"])
def test_add_and_mul_7_to_6_swap_their_operands_when_a_fits_onto_b(op_type: str) -> None:
    model = binary(7, "float[4,5] a", "float[2,3,4,5] b", op=op_type, out="float[2,3,4,5] c")
    convert_and_compare(model, 6, {"a": B45, "b": A})
    op = node(model, op_type)
    assert [v.name for v in model.graph.inputs_of(op)] == ["b", "a"]
    assert op.attrs == {"broadcast": 1, "axis": 2}


@pytest.mark.parametrize("op_type", ["Add", "Mul"])
def test_add_and_mul_7_to_6_swap_their_operands_then_strip_the_ends_of_the_new_b(
    op_type: str,
) -> None:
    model = binary(7, "float[3,1] a", "float[2,3,4] b", op=op_type, out="float[2,3,4] c")
    convert_and_compare(model, 6, {"a": B34[:, :1].copy(), "b": A[..., 0].copy()})
    op = node(model, op_type)
    assert model.graph.inputs_of(op)[0].name == "b"
    assert model.graph.inputs_of(op)[1].type.shape == (3,)
    assert op.attrs == {"broadcast": 1, "axis": 1} and squeezes(model) == [[1]]


def test_sub_7_to_6_does_not_swap_its_operands() -> None:
    model = binary(7, "float[3,1] a", "float[2,3,4] b", out="float[2,3,4] c")
    with pytest.raises(AdapterError, match="B has more dims than A: A would have to broadcast"):
        convert(model, 6)


@pytest.mark.parametrize(
    ("a", "b", "attrs", "feeds"),
    [
        ("float[2,3] a", "float[2,3] b", {}, (A[0, 0, :2, :3], A[1, 1, :2, :3])),
        ("float[2,3] a", "float b", {"broadcast": 1}, (A[0, 0, :2, :3], np.float32(2.0))),
        ("float[2,3] a", "float[1,1] b", {"broadcast": 1}, (A[0, 0, :2, :3], B45[:1, :1])),
        ("float[N,4,5] a", "float[4,5] b", {"broadcast": 1, "axis": 1}, (A[0], B45)),
        ("float[2,1,5] a", "float[1,5] b", {"broadcast": 1, "axis": 1}, (A[:, :1, 0], B45[:1])),
    ],
    ids=["equal", "scalar", "one-element", "suffix-symbolic", "matching-ones"],
)
def test_sub_7_to_6_writes_what_the_legacy_rule_expresses(
    a: str, b: str, attrs: dict[str, int], feeds: tuple[np.ndarray, np.ndarray]
) -> None:
    model = binary(7, a, b)
    convert_and_compare(model, 6, {"a": np.asarray(feeds[0]), "b": np.asarray(feeds[1])})
    assert node(model).attrs == attrs


# -- types -----------------------------------------------------------------------------------
INT_CASES = [
    ("int8", np.int8, "INT32"),
    ("uint8", np.uint8, "UINT32"),
    ("int16", np.int16, "INT32"),
    ("uint16", np.uint16, "UINT32"),
]


@pytest.mark.parametrize(("name", "dtype", "wide"), INT_CASES, ids=[c[0] for c in INT_CASES])
def test_sub_14_small_int_types_are_refused_by_sub_13(name: str, dtype: type, wide: str) -> None:
    model = binary(14, f"{name}[4] a", f"{name}[4] b")
    node(model).name = "minus"
    with pytest.raises(AdapterError, match=f"'minus' 14 -> 13: Sub-13 does not take {name}"):
        convert(model, 13)


@pytest.mark.parametrize(("name", "dtype", "wide"), INT_CASES, ids=[c[0] for c in INT_CASES])
@pytest.mark.parametrize("op_type", ["Add", "Sub", "Mul", "Div"])
def test_small_int_types_with_allow_cast_wrap_around_exactly_in_a_wider_type(
    op_type: str, name: str, dtype: type, wide: str
) -> None:
    info = np.iinfo(dtype)
    a = np.array([info.max, info.min, info.max, 7, -7 if info.min else 7], dtype=dtype)
    b = np.array([info.max, 1, 2, 2, 2], dtype=dtype)
    if op_type == "Sub":
        b[1] = 1 if info.min else 3  # wraps below the minimum
    model = binary(14, f"{name}[5] a", f"{name}[5] b", op=op_type)
    convert_and_compare(model, 7, {"a": a, "b": b}, allow_cast=True)
    casts = [op for op in model.graph.ops if op.op_type == "Cast"]
    assert [c.attrs["to"] for c in casts] == [DType[wide]] * 2 + [DType[name.upper()]]
    assert model.graph.outputs[0].name == "c"


def test_sub_13_bfloat16_is_refused_by_sub_7_even_with_allow_cast() -> None:
    # Cast takes bfloat16 only from opset 13: opset 12 cannot hold it at all
    model = binary(13, "bfloat16[4] a", "bfloat16[4] b")
    with pytest.raises(AdapterError, match="Sub-7 does not take bfloat16; allow_cast"):
        convert(model, 12)
    model = binary(13, "bfloat16[4] a", "bfloat16[4] b")
    with pytest.raises(AdapterError, match="Cast at opset 12 converts to and from"):
        convert(model, 12, allow_cast=True)


def test_sub_bfloat16_goes_up_from_13_to_14() -> None:
    model = binary(13, "bfloat16[4] a", "bfloat16[4] b")
    a = np.array([1, 2, 3, 4], ml_dtypes.bfloat16)
    convert_and_compare(model, 14, {"a": a, "b": a[::-1].copy()}, ours=True)


def test_sub_6_int32_is_refused_by_sub_1_even_with_allow_cast() -> None:
    model = binary(6, "int32[4] a", "int32[4] b")
    with pytest.raises(AdapterError, match="Sub-1 does not take int32; allow_cast"):
        convert(model, 5)
    model = binary(6, "int32[4] a", "int32[4] b")
    with pytest.raises(AdapterError, match="takes no type that holds every int32 result"):
        convert(model, 5, allow_cast=True)


def test_sub_6_int64_converts_up_to_14() -> None:
    model = binary(6, "int64[2,3] a", "int64[3] b", "broadcast = 1")
    a = np.arange(6, dtype=np.int64).reshape(2, 3)
    convert_and_compare(model, 14, {"a": a, "b": np.array([2**62, -1, 5], np.int64)})
