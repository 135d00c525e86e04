"""Hostile models, written to files: broken shapes and graphs, absurd sizes, corrupted bytes.

Each case is a function ``(folder) -> Path`` that writes its model (and any file it needs) into
``folder``. ``GRAPH_CASES`` maps a name to (builder, exit codes every command may end with):
invalid models end with 1 (they read but break a rule) or 2 (they cannot be read).
``SHAPE_CASES`` are models only shape inference finds wrong (a perm of a million axes for a
rank-2 input, a shape of 2^124 elements made by ConstantOfShape): the commands that infer
(infer, fold, optimize, check) end with 1; info and convert, which do not, may succeed.
``LARGE_CASES`` are valid models whose constants are far too large to make: every command
succeeds without making them.
"""

from __future__ import annotations

__all__ = [
    "GRAPH_CASES",
    "LARGE_CASES",
    "SHAPE_CASES",
    "WEIGHT",
    "corrupted",
    "field_bytes",
    "nested_if_bytes",
    "weighted_model",
    "zoo_models",
]

import random
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
from onnx import AttributeProto, TensorProto, helper, numpy_helper
from suites import LIGHT_MODELS

Builder = Callable[[Path], Path]
F = TensorProto.FLOAT
I64 = TensorProto.INT64
HUGE = 1 << 62
ROOT = Path(__file__).resolve().parents[2]
TINY_CONVNET = ROOT / "examples" / "tiny_convnet.onnx"


def zoo_models() -> list[Path]:
    """The real models corrupted copies are made from: the zoo's light models and the example."""
    return [*LIGHT_MODELS, TINY_CONVNET]


def _model(
    nodes: list[onnx.NodeProto],
    inputs: list[onnx.ValueInfoProto],
    outputs: list[onnx.ValueInfoProto],
    initializers: list[TensorProto] = (),  # type: ignore[assignment]
    *,
    opset: int = 18,
    functions: list[onnx.FunctionProto] = (),  # type: ignore[assignment]
) -> onnx.ModelProto:
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(initializers))
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], functions=list(functions)
    )
    model.ir_version = 8
    return model


WEIGHT = np.arange(4096, dtype=np.float32).reshape(64, 64)
"""The one weight of ``weighted_model``: 16 KiB, enough to go to external data."""


def weighted_model(*, relu: bool = False) -> onnx.ModelProto:
    """A valid model ``y = x + w`` (then Relu, with ``relu``; something for fold to keep) over
    the 64x64 WEIGHT: what the path and safe-output tests load, save and point elsewhere."""
    nodes = [helper.make_node("Add", ["x", "w"], ["s" if relu else "y"])]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    return _model(
        nodes,
        [_vi("x", F, [64, 64])],
        [_vi("y", F, [64, 64])],
        [numpy_helper.from_array(WEIGHT, "w")],
    )


def _save(folder: Path, name: str, model: onnx.ModelProto) -> Path:
    path = folder / f"{name}.onnx"
    path.write_bytes(model.SerializeToString())
    return path


def _vi(name: str, dtype: int = F, shape: list[int | str | None] | None = None):
    return helper.make_tensor_value_info(name, dtype, shape)


def _ints(name: str, values: list[int]) -> TensorProto:
    return helper.make_tensor(name, I64, [len(values)], values)


def _scalar(name: str, dtype: int, value: float) -> TensorProto:
    return helper.make_tensor(name, dtype, [], [value])


# -- shapes ---------------------------------------------------------------------------------
def overflowing_input_shape(folder: Path) -> Path:
    """A declared shape with 2^186 elements."""
    shape = [HUGE, HUGE, HUGE]
    return _save(
        folder,
        "overflowing_input_shape",
        _model(
            [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, shape)], [_vi("y", F, shape)]
        ),
    )


def overflowing_initializer(folder: Path) -> Path:
    """An initializer that claims 2^124 elements and holds four bytes."""
    w = TensorProto(name="w", data_type=F, dims=[HUGE, HUGE], raw_data=b"\0\0\0\0")
    return _save(
        folder,
        "overflowing_initializer",
        _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [1])], [_vi("y")], [w]),
    )


def huge_dim_initializer(folder: Path) -> Path:
    """An initializer of 2^62 elements with four bytes of data."""
    w = TensorProto(name="w", data_type=F, dims=[HUGE], raw_data=b"\0\0\0\0")
    return _save(
        folder,
        "huge_dim_initializer",
        _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [1])], [_vi("y")], [w]),
    )


def negative_dim_initializer(folder: Path) -> Path:
    w = TensorProto(name="w", data_type=F, dims=[-4], raw_data=b"\0" * 16)
    return _save(
        folder,
        "negative_dim_initializer",
        _model([helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [4])], [_vi("y")], [w]),
    )


def short_initializer(folder: Path) -> Path:
    """raw_data shorter than the dims say."""
    w = TensorProto(name="w", data_type=F, dims=[1000], raw_data=b"\0" * 16)
    return _save(
        folder,
        "short_initializer",
        _model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [_vi("x", F, [1000])],
            [_vi("y", F, [1000])],
            [w],
        ),
    )


def overflowing_constant_of_shape(folder: Path) -> Path:
    """ConstantOfShape of [2^62, 2^62]: more elements than int64 counts."""
    return _save(
        folder,
        "overflowing_constant_of_shape",
        _model(
            [
                helper.make_node("ConstantOfShape", ["s"], ["c"]),
                helper.make_node("Add", ["x", "c"], ["y"]),
            ],
            [_vi("x", F, [1])],
            [_vi("y")],
            [_ints("s", [HUGE, HUGE])],
        ),
    )


def overflowing_reshape(folder: Path) -> Path:
    return _save(
        folder,
        "overflowing_reshape",
        _model(
            [helper.make_node("Reshape", ["x", "s"], ["y"])],
            [_vi("x", F, [2, 3])],
            [_vi("y")],
            [_ints("s", [HUGE, HUGE, 6])],
        ),
    )


# -- graphs ---------------------------------------------------------------------------------
def duplicate_names(folder: Path) -> Path:
    return _save(
        folder,
        "duplicate_names",
        _model(
            [helper.make_node("Relu", ["x"], ["y"]), helper.make_node("Neg", ["x"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def duplicate_inputs(folder: Path) -> Path:
    return _save(
        folder,
        "duplicate_inputs",
        _model(
            [helper.make_node("Add", ["x", "x"], ["y"])],
            [_vi("x", F, [2]), _vi("x", F, [3])],
            [_vi("y", F, [2])],
        ),
    )


def initializer_shadowed_by_node(folder: Path) -> Path:
    return _save(
        folder,
        "initializer_shadowed_by_node",
        _model(
            [helper.make_node("Relu", ["x"], ["w"]), helper.make_node("Add", ["x", "w"], ["y"])],
            [_vi("x", F, [1])],
            [_vi("y", F, [1])],
            [numpy_helper.from_array(np.zeros(1, np.float32), "w")],
        ),
    )


def cycle(folder: Path) -> Path:
    return _save(
        folder,
        "cycle",
        _model(
            [
                helper.make_node("Add", ["x", "b"], ["a"]),
                helper.make_node("Relu", ["a"], ["b"]),
                helper.make_node("Identity", ["a"], ["y"]),
            ],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def self_loop(folder: Path) -> Path:
    return _save(
        folder,
        "self_loop",
        _model(
            [helper.make_node("Add", ["x", "y"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])]
        ),
    )


def dangling_input(folder: Path) -> Path:
    return _save(
        folder,
        "dangling_input",
        _model(
            [helper.make_node("Add", ["x", "nowhere"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def output_never_produced(folder: Path) -> Path:
    return _save(
        folder,
        "output_never_produced",
        _model(
            [helper.make_node("Relu", ["x"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2]), _vi("z", F, [2])],
        ),
    )


def too_few_inputs(folder: Path) -> Path:
    return _save(
        folder,
        "too_few_inputs",
        _model([helper.make_node("Add", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])]),
    )


def too_many_inputs(folder: Path) -> Path:
    return _save(
        folder,
        "too_many_inputs",
        _model(
            [helper.make_node("Relu", ["x", "x", "x"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def too_many_outputs(folder: Path) -> Path:
    return _save(
        folder,
        "too_many_outputs",
        _model(
            [helper.make_node("Relu", ["x"], ["y", "z", "w"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def no_outputs(folder: Path) -> Path:
    return _save(
        folder,
        "no_outputs",
        _model(
            [helper.make_node("Relu", ["x"], []), helper.make_node("Relu", ["x"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def split_arity(folder: Path) -> Path:
    """Split-18 whose num_outputs is not its output count (onnxruntime aborts on it)."""
    return _save(
        folder,
        "split_arity",
        _model(
            [helper.make_node("Split", ["x"], ["a", "b"], axis=0, num_outputs=5)],
            [_vi("x", F, [10])],
            [_vi("a"), _vi("b")],
        ),
    )


def unknown_op(folder: Path) -> Path:
    return _save(
        folder,
        "unknown_op",
        _model(
            [helper.make_node("NoSuchOp", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])]
        ),
    )


def empty_op_type(folder: Path) -> Path:
    return _save(
        folder,
        "empty_op_type",
        _model([helper.make_node("", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])]),
    )


def opset_from_the_future(folder: Path) -> Path:
    return _save(
        folder,
        "opset_from_the_future",
        _model(
            [helper.make_node("Relu", ["x"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
            opset=999,
        ),
    )


def no_opset_import(folder: Path) -> Path:
    model = _model(
        [helper.make_node("Relu", ["x"], ["y"])], [_vi("x", F, [2])], [_vi("y", F, [2])]
    )
    del model.opset_import[:]
    return _save(folder, "no_opset_import", model)


# -- dtypes and attributes -----------------------------------------------------------------
def unknown_input_dtype(folder: Path) -> Path:
    x = _vi("x", F, [2])
    x.type.tensor_type.elem_type = 999
    return _save(
        folder,
        "unknown_input_dtype",
        _model([helper.make_node("Relu", ["x"], ["y"])], [x], [_vi("y", F, [2])]),
    )


def unknown_initializer_dtype(folder: Path) -> Path:
    w = TensorProto(name="w", data_type=999, dims=[2], raw_data=b"\0" * 8)
    return _save(
        folder,
        "unknown_initializer_dtype",
        _model(
            [helper.make_node("Add", ["x", "w"], ["y"])],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
            [w],
        ),
    )


def cast_to_unknown_dtype(folder: Path) -> Path:
    return _save(
        folder,
        "cast_to_unknown_dtype",
        _model(
            [helper.make_node("Cast", ["x"], ["y"], to=999)],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def constant_of_unknown_dtype(folder: Path) -> Path:
    value = TensorProto(name="v", data_type=999, dims=[1], raw_data=b"\0" * 4)
    return _save(
        folder,
        "constant_of_unknown_dtype",
        _model(
            [
                helper.make_node("Constant", [], ["c"], value=value),
                helper.make_node("Add", ["x", "c"], ["y"]),
            ],
            [_vi("x", F, [1])],
            [_vi("y", F, [1])],
        ),
    )


def ints_where_a_graph_belongs(folder: Path) -> Path:
    """If whose branches are INTS attributes."""
    node = helper.make_node("If", ["c"], ["y"])
    for name in ("then_branch", "else_branch"):
        node.attribute.append(helper.make_attribute(name, [1, 2, 3]))
    return _save(
        folder,
        "ints_where_a_graph_belongs",
        _model([node], [_vi("c", TensorProto.BOOL, [])], [_vi("y", F, [1])]),
    )


def graph_type_without_graph(folder: Path) -> Path:
    """An attribute typed GRAPH that holds no graph."""
    node = helper.make_node("If", ["c"], ["y"])
    for name in ("then_branch", "else_branch"):
        node.attribute.append(AttributeProto(name=name, type=AttributeProto.GRAPH))
    return _save(
        folder,
        "graph_type_without_graph",
        _model([node], [_vi("c", TensorProto.BOOL, [])], [_vi("y", F, [1])]),
    )


def graph_where_ints_belong(folder: Path) -> Path:
    """Transpose whose perm is a graph."""
    body = helper.make_graph([], "b", [], [])
    node = helper.make_node("Transpose", ["x"], ["y"])
    node.attribute.append(helper.make_attribute("perm", body))
    return _save(
        folder,
        "graph_where_ints_belong",
        _model([node], [_vi("x", F, [2, 3])], [_vi("y", F, [3, 2])]),
    )


def string_where_int_belongs(folder: Path) -> Path:
    return _save(
        folder,
        "string_where_int_belongs",
        _model(
            [helper.make_node("Cast", ["x"], ["y"], to="FLOAT")],
            [_vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def unknown_attribute_type(folder: Path) -> Path:
    node = helper.make_node("Relu", ["x"], ["y"])
    attribute = field_bytes(1, b"odd") + _varint(20 << 3) + _varint(99) + _varint(3 << 3) + b"\x03"
    node.ParseFromString(node.SerializeToString() + field_bytes(5, attribute))
    return _save(
        folder,
        "unknown_attribute_type",
        _model([node], [_vi("x", F, [2])], [_vi("y", F, [2])]),
    )


def huge_perm(folder: Path) -> Path:
    """Transpose with a perm of a million entries."""
    return _save(
        folder,
        "huge_perm",
        _model(
            [helper.make_node("Transpose", ["x"], ["y"], perm=list(range(1_000_000)))],
            [_vi("x", F, [2, 3])],
            [_vi("y", F, [3, 2])],
        ),
    )


def many_attributes(folder: Path) -> Path:
    """A Relu with 100,000 attributes it does not have."""
    node = helper.make_node("Relu", ["x"], ["y"])
    node.attribute.extend(
        AttributeProto(name=f"a{i}", type=AttributeProto.INT, i=i) for i in range(100_000)
    )
    return _save(folder, "many_attributes", _model([node], [_vi("x", F, [2])], [_vi("y", F, [2])]))


def duplicate_attributes(folder: Path) -> Path:
    node = helper.make_node("Transpose", ["x"], ["y"], perm=[1, 0])
    node.attribute.append(helper.make_attribute("perm", [0, 1]))
    return _save(
        folder,
        "duplicate_attributes",
        _model([node], [_vi("x", F, [2, 3])], [_vi("y", F, [3, 2])]),
    )


def recursive_function(folder: Path) -> Path:
    """A local function that calls itself."""
    fn = helper.make_function(
        "local", "F", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")],
        [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)],
    )  # fmt: skip
    model = _model(
        [helper.make_node("F", ["x"], ["y"], domain="local")],
        [_vi("x", F, [2])],
        [_vi("y", F, [2])],
        functions=[fn],
    )
    model.opset_import.append(helper.make_opsetid("local", 1))
    return _save(folder, "recursive_function", model)


def mutually_recursive_functions(folder: Path) -> Path:
    opsets = [helper.make_opsetid("", 18), helper.make_opsetid("local", 1)]
    f = helper.make_function(
        "local", "F", ["a"], ["b"], [helper.make_node("G", ["a"], ["b"], domain="local")], opsets
    )
    g = helper.make_function(
        "local", "G", ["a"], ["b"], [helper.make_node("F", ["a"], ["b"], domain="local")], opsets
    )
    model = _model(
        [helper.make_node("F", ["x"], ["y"], domain="local")],
        [_vi("x", F, [2])],
        [_vi("y", F, [2])],
        functions=[f, g],
    )
    model.opset_import.append(helper.make_opsetid("local", 1))
    return _save(folder, "mutually_recursive_functions", model)


def loop_body_wrong_arity(folder: Path) -> Path:
    """A Loop whose body takes one input instead of two plus the carried values."""
    body = helper.make_graph(
        [helper.make_node("Identity", ["i"], ["o"])],
        "body",
        [_vi("i", I64, [])],
        [_vi("o", TensorProto.BOOL, [])],
    )
    return _save(
        folder,
        "loop_body_wrong_arity",
        _model(
            [helper.make_node("Loop", ["n", "c", "x"], ["y"], body=body)],
            [_vi("n", I64, []), _vi("c", TensorProto.BOOL, []), _vi("x", F, [2])],
            [_vi("y", F, [2])],
        ),
    )


def sparse_initializer_out_of_bounds(folder: Path) -> Path:
    values = helper.make_tensor("w", F, [2], [1.0, 2.0])
    indices = helper.make_tensor("w_idx", I64, [2], [5, 1 << 40])
    sparse = helper.make_sparse_tensor(values, indices, [4])
    model = _model(
        [helper.make_node("Add", ["x", "w"], ["y"])], [_vi("x", F, [4])], [_vi("y", F, [4])]
    )
    model.graph.sparse_initializer.append(sparse)
    return _save(folder, "sparse_initializer_out_of_bounds", model)


def nested_if_bytes(depth: int, leaf_input: str = "x") -> bytes:
    """A model of ``depth`` If nodes nested in each other's then_branch, as bytes: protobuf's
    own encoder refuses to build it past 100 message levels, so the fields are written out.
    Level i computes ``y<i>``; the innermost then_branch is ``y0 = Identity(leaf_input)``, each
    else_branch ``e<i> = Identity(x)``. Names are unique, so the model is valid when
    ``leaf_input`` is x."""

    def identity_graph(source: str, out: str) -> bytes:
        return helper.make_graph(
            [helper.make_node("Identity", [source], [out])], f"g_{out}", [], [_vi(out, F, [1])]
        ).SerializeToString()

    graph = identity_graph(leaf_input, "y0")
    for i in range(1, depth + 1):
        then_attr = field_bytes(1, b"then_branch") + field_bytes(6, graph) + _varint(20 << 3)
        else_attr = (
            field_bytes(1, b"else_branch")
            + field_bytes(6, identity_graph("x", f"e{i}"))
            + _varint(20 << 3)
        )
        node = (
            field_bytes(1, b"c")
            + field_bytes(2, f"y{i}".encode())
            + field_bytes(4, b"If")
            + field_bytes(5, then_attr + b"\x05")  # type = GRAPH
            + field_bytes(5, else_attr + b"\x05")
        )
        output = field_bytes(12, _vi(f"y{i}", F, [1]).SerializeToString())
        graph = field_bytes(1, node) + field_bytes(2, f"g{i}".encode()) + output
    inputs = field_bytes(11, _vi("c", TensorProto.BOOL, []).SerializeToString()) + field_bytes(
        11, _vi("x", F, [1]).SerializeToString()
    )
    opset = field_bytes(8, helper.make_opsetid("", 18).SerializeToString())
    return _varint(1 << 3) + b"\x08" + field_bytes(7, graph + inputs) + opset  # ir_version 8


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte, value = value & 0x7F, value >> 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def field_bytes(number: int, payload: bytes) -> bytes:
    """A length-delimited protobuf field."""
    return _varint(number << 3 | 2) + _varint(len(payload)) + payload


def deeply_nested_subgraphs(folder: Path) -> Path:
    """3,000 levels of If: deeper than any parser (ours included) follows."""
    path = folder / "deeply_nested_subgraphs.onnx"
    path.write_bytes(nested_if_bytes(3000))
    return path


def nested_subgraphs_with_a_dangling_input(folder: Path) -> Path:
    """30 levels of If (as deep as protobuf reads) whose innermost body reads a missing name."""
    path = folder / "nested_subgraphs_with_a_dangling_input.onnx"
    path.write_bytes(nested_if_bytes(30, leaf_input="missing"))
    return path


def long_chain(folder: Path) -> Path:
    """5,000 ops in a chain whose symbolic dim doubles at each step, with a cycle at the end."""
    nodes = [helper.make_node("Concat", ["x", "x"], ["t0"], axis=0)]
    for i in range(1, 5_000):
        nodes.append(helper.make_node("Concat", [f"t{i - 1}", f"t{i - 1}"], [f"t{i}"], axis=0))
    nodes.append(helper.make_node("Add", ["t4999", "z"], ["y"]))
    nodes.append(helper.make_node("Relu", ["y"], ["z"]))
    return _save(folder, "long_chain", _model(nodes, [_vi("x", F, ["N"])], [_vi("y", F, [None])]))


GRAPH_CASES: dict[str, tuple[Builder, frozenset[int]]] = {
    f.__name__: (f, frozenset(codes))
    for f, codes in [
        (overflowing_input_shape, {1}),
        (overflowing_initializer, {1, 2}),
        (huge_dim_initializer, {1, 2}),
        (negative_dim_initializer, {1, 2}),
        (short_initializer, {1, 2}),
        (duplicate_names, {1}),
        (duplicate_inputs, {1}),
        (initializer_shadowed_by_node, {1}),
        (cycle, {1}),
        (self_loop, {1}),
        (dangling_input, {1}),
        (output_never_produced, {1}),
        (too_few_inputs, {1}),
        (too_many_inputs, {1}),
        (too_many_outputs, {1}),
        (no_outputs, {1}),
        (unknown_op, {1}),
        (empty_op_type, {1}),
        (opset_from_the_future, {1}),
        (no_opset_import, {1}),
        (unknown_input_dtype, {1}),
        (unknown_initializer_dtype, {1, 2}),
        (cast_to_unknown_dtype, {1}),
        (constant_of_unknown_dtype, {1}),
        (ints_where_a_graph_belongs, {1}),
        (graph_type_without_graph, {1}),
        (graph_where_ints_belong, {1}),
        (string_where_int_belongs, {1}),
        (unknown_attribute_type, {1}),
        (many_attributes, {1}),
        (duplicate_attributes, {1}),
        (recursive_function, {1}),
        (mutually_recursive_functions, {1}),
        (loop_body_wrong_arity, {1}),
        (sparse_initializer_out_of_bounds, {1, 2}),
        (deeply_nested_subgraphs, {2}),
        (nested_subgraphs_with_a_dangling_input, {1}),
        (long_chain, {1}),
    ]
}


# -- only shape inference finds them wrong ---------------------------------------------------
def _made(
    name: str, nodes: list[onnx.NodeProto], inits: list[TensorProto], out: list[int] | None
) -> Builder:
    """``y = x + c``, with ``c`` made by ``nodes`` from ``inits``; ``out``: y's shape."""

    def build(folder: Path) -> Path:
        nodes_ = [*nodes, helper.make_node("Add", ["x", "c"], ["y"])]
        y = _vi("y", F, out) if out is not None else _vi("y", F, ["n"])
        return _save(folder, name, _model(nodes_, [_vi("x", F, [1])], [y], inits))

    build.__name__ = name
    return build


SHAPE_CASES: dict[str, Builder] = {
    b.__name__: b
    for b in [
        overflowing_constant_of_shape,
        overflowing_reshape,
        split_arity,
        huge_perm,
        _made(
            "range_float_tiny_delta",  # 10^60 elements
            [helper.make_node("Range", ["a", "b", "d"], ["c"])],
            [_scalar("a", F, 0.0), _scalar("b", F, 1e30), _scalar("d", F, 1e-30)],
            None,
        ),
        _made(
            "range_of_small_values",  # 0 to 4096 by 1e-30: small values, 4 x 10^33 elements
            [helper.make_node("Range", ["a", "b", "d"], ["c"])],
            [_scalar("a", F, 0.0), _scalar("b", F, 4096.0), _scalar("d", F, 1e-30)],
            None,
        ),
        _made(
            "range_of_infinities",
            [helper.make_node("Range", ["a", "b", "d"], ["c"])],
            [_scalar("a", F, 0.0), _scalar("b", F, float("inf")), _scalar("d", F, 1.0)],
            None,
        ),
    ]
}


# -- valid models with constants too large to make -------------------------------------------
_2_20 = 1 << 20
LARGE_CASES: dict[str, Builder] = {
    b.__name__: b
    for b in [
        _made(
            "constant_of_shape_2_40",
            [helper.make_node("ConstantOfShape", ["s"], ["c"])],
            [_ints("s", [_2_20, _2_20])],
            [_2_20, _2_20],
        ),
        _made(
            "constant_of_shape_of_small_values",  # 4096 x 4096 x 4096: three small numbers
            [helper.make_node("ConstantOfShape", ["s"], ["c"])],
            [_ints("s", [4096, 4096, 4096])],
            [4096, 4096, 4096],
        ),
        _made(
            "expand_2_40",
            [helper.make_node("Expand", ["one", "s"], ["c"])],
            [_scalar("one", F, 1.0), _ints("s", [_2_20, _2_20])],
            [_2_20, _2_20],
        ),
        _made(
            "expand_of_small_values",
            [helper.make_node("Expand", ["one", "s"], ["c"])],
            [_scalar("one", F, 1.0), _ints("s", [4096, 4096, 4096])],
            [4096, 4096, 4096],
        ),
        _made(
            "tile_2_40",
            [helper.make_node("Tile", ["v", "r"], ["c"])],
            [helper.make_tensor("v", F, [2], [1.0, 2.0]), _ints("r", [1 << 39])],
            [1 << 40],
        ),
        _made(
            "tile_of_small_values",
            [helper.make_node("Tile", ["v", "r"], ["c"])],
            [helper.make_tensor("v", F, [1, 1, 1], [1.0]), _ints("r", [4096, 4096, 4096])],
            [4096, 4096, 4096],
        ),
        _made(
            "range_int_2_62",
            [
                helper.make_node("Range", ["a", "b", "d"], ["r"]),
                helper.make_node("Cast", ["r"], ["c"], to=F),
            ],
            [_scalar("a", I64, 0), _scalar("b", I64, HUGE), _scalar("d", I64, 1)],
            [HUGE],
        ),
        _made(
            "range_float_2_40",
            [helper.make_node("Range", ["a", "b", "d"], ["c"])],
            [_scalar("a", F, 0.0), _scalar("b", F, 1.0), _scalar("d", F, 2.0**-40)],
            [1 << 40],
        ),
        _made(
            "range_int_from_computed_limit",  # the limit is computed: inference knows it late
            [
                helper.make_node("Mul", ["b0", "b0"], ["b"]),
                helper.make_node("Range", ["a", "b", "d"], ["r"]),
                helper.make_node("Cast", ["r"], ["c"], to=F),
            ],
            [_scalar("a", I64, 0), _scalar("b0", I64, 1 << 31), _scalar("d", I64, 1)],
            None,
        ),
        _made(
            "constant_of_shape_from_shape_arith",  # the shape is computed from a Shape
            [
                helper.make_node("Shape", ["x"], ["sx"]),
                helper.make_node("Mul", ["sx", "k"], ["s"]),
                helper.make_node("ConstantOfShape", ["s"], ["c"]),
            ],
            [_ints("k", [1 << 40])],
            None,
        ),
    ]
}


# -- corrupted bytes -------------------------------------------------------------------------
def corrupted(source: Path, count: int, seed: int) -> list[tuple[str, bytes]]:
    """``count`` damaged copies of ``source``: truncated at random points, bits flipped, bytes
    overwritten, spans zeroed. Same seed, same copies."""
    data = source.read_bytes()
    rng = random.Random(f"{seed}:{source.name}")
    out: list[tuple[str, bytes]] = []
    for i in range(count):
        kind = ("truncate", "flip", "flip_header", "overwrite", "zero")[i % 5]
        buf = bytearray(data)
        if kind == "truncate":
            cut = rng.randrange(1, len(buf))
            buf = buf[:cut]
            label = f"truncated_at_{cut}"
        elif kind == "flip":
            positions = [rng.randrange(len(buf)) for _ in range(rng.randint(1, 8))]
            for p in positions:
                buf[p] ^= 1 << rng.randrange(8)
            label = f"bits_flipped_at_{'_'.join(map(str, positions[:3]))}"
        elif kind == "flip_header":  # the field headers and small fields are near the start
            positions = [rng.randrange(min(len(buf), 512)) for _ in range(rng.randint(1, 4))]
            for p in positions:
                buf[p] ^= 1 << rng.randrange(8)
            label = f"header_bits_flipped_at_{'_'.join(map(str, positions[:3]))}"
        elif kind == "overwrite":
            p = rng.randrange(len(buf))
            n = rng.randint(1, 16)
            buf[p : p + n] = bytes(rng.randrange(256) for _ in range(n))
            label = f"overwritten_at_{p}"
        else:
            p = rng.randrange(len(buf))
            n = rng.randint(16, 4096)
            buf[p : p + n] = bytes(min(n, len(buf) - p))
            label = f"zeroed_at_{p}"
        out.append((f"{source.stem}-{i}-{label}", bytes(buf)))
    return out
