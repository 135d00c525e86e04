"""eliminate-common-subexpressions: equal ops and equal initializers merge, in cascade;
random ops, different attributes, overridable defaults and graph output names do not."""

from __future__ import annotations

import numpy as np
import onnx
from onnx import helper, numpy_helper

from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import EliminateCommonSubexpressionsPass
from onnxforge.testing import assert_models_close, model_from_text

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _run(model: Model) -> dict[str, int]:
    stats = dict(EliminateCommonSubexpressionsPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


def test_equal_ops_merge_and_the_merges_cascade() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) {
        a = Relu(x)
        b = Relu(x)
        c = Neg(a)
        d = Neg(b)
        y = Sub(c, d)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"ops_merged": 2}
    assert _ops(model) == ["Relu", "Neg", "Sub"]
    sub = model.graph.ops[-1]
    assert sub._inputs[0] is sub._inputs[1]
    assert_models_close(before, model)


def test_commutative_ops_merge_whatever_the_operand_order() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x, float[2] w) => (float[2] y) {
        a = Add(x, w)
        b = Add(w, x)
        c = Sub(x, w)
        d = Sub(w, x)
        s = Sum(a, b, c)
        y = Sum(s, d)
    }"""
    )
    assert _run(model) == {"ops_merged": 1}
    assert _ops(model) == ["Add", "Sub", "Sub", "Sum", "Sum"]


def test_different_attributes_and_random_ops_do_not_merge() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] x) => (float[2, 3] y, float[2, 3] z) {
        a = Softmax <axis = 0> (x)
        b = Softmax <axis = 1> (x)
        r = RandomNormalLike(x)
        s = RandomNormalLike(x)
        y = Add(a, b)
        z = Add(r, s)
    }"""
    )
    assert _run(model) == {}
    assert _ops(model) == ["Softmax", "Softmax", "RandomNormalLike", "RandomNormalLike"] + [
        "Add",
        "Add",
    ]


def test_equal_constants_merge_and_then_the_ops_reading_them() -> None:
    model = model_from_text(
        HEADER
        + """
    g (int64[2] x) => (int64[2] y) {
        a = Constant <value = int64[2] {1, 2}> ()
        b = Constant <value = int64[2] {1, 2}> ()
        c = Add(x, a)
        d = Add(x, b)
        y = Mul(c, d)
    }"""
    )
    assert _run(model) == {"ops_merged": 2}
    assert _ops(model) == ["Constant", "Add", "Mul"]


def _weights_model(arrays: dict[str, np.ndarray], inputs: tuple[str, ...] = ()) -> Model:
    names = list(arrays)
    nodes = [helper.make_node("Add", ["x", names[0]], ["s0"])]
    for i, name in enumerate(names[1:], 1):
        nodes.append(helper.make_node("Add", [f"s{i - 1}", name], [f"s{i}"]))
    shape = list(next(iter(arrays.values())).shape)
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, shape)]
        + [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, shape) for n in inputs],
        [helper.make_tensor_value_info(f"s{len(names) - 1}", onnx.TensorProto.FLOAT, shape)],
        [numpy_helper.from_array(a, n) for n, a in arrays.items()],
    )
    opsets = [helper.make_opsetid("", 17)]
    return from_proto(helper.make_model(graph, opset_imports=opsets, ir_version=8))


def test_equal_initializers_merge_but_overridable_defaults_do_not() -> None:
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _weights_model({"a": w, "b": w.copy(), "c": w.copy(), "d": w + 1}, inputs=("c",))
    before = to_proto(model)
    assert _run(model) == {"initializers_merged": 1}
    assert [v.name for v in model.graph.initializers] == ["a", "c", "d"]
    assert_models_close(before, model)


def test_large_initializers_merge_only_when_every_byte_is_equal() -> None:
    w = np.random.default_rng(0).standard_normal((64, 64)).astype(np.float32)
    one_byte = w.copy()
    one_byte.view(np.uint8).reshape(-1)[402] ^= 1  # between the sampled bytes
    negative_zero = np.zeros((64, 64), np.float32)
    negative_zero[0, 0] = -0.0
    model = _weights_model(
        {
            "a": w,
            "b": w.copy(),
            "c": one_byte,
            "z": np.zeros((64, 64), np.float32),
            "n": negative_zero,
        }
    )
    assert _run(model) == {"initializers_merged": 1}
    assert [v.name for v in model.graph.initializers] == ["a", "c", "z", "n"]


def test_graph_outputs_keep_their_names() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y, float[2] z, float[2] w) {
        t = Relu(x)
        y = Relu(x)
        z = Relu(x)
        w = Neg(t)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"ops_merged": 1}
    assert _ops(model) == ["Relu", "Relu", "Neg"]
    assert [v.name for v in model.graph.outputs] == ["y", "z", "w"]
    assert model.graph.ops[-1]._inputs[0] is model.graph.outputs[0]
    assert_models_close(before, model)


def test_ifs_merge_when_their_branches_are_equal_node_for_node() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool c, float[2] x) => (float[2] y) {
        a = If(c) <
            then_branch = t1 () => (float[2] o1) { o1 = Relu(x) },
            else_branch = e1 () => (float[2] p1) { p1 = Neg(x) }
        >
        b = If(c) <
            then_branch = t2 () => (float[2] o2) { o2 = Relu(x) },
            else_branch = e2 () => (float[2] p2) { p2 = Neg(x) }
        >
        d = If(c) <
            then_branch = t3 () => (float[2] o3) { o3 = Relu(x) },
            else_branch = e3 () => (float[2] p3) { p3 = Abs(x) }
        >
        s = Add(a, b)
        y = Add(s, d)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"ops_merged": 1}
    assert _ops(model) == ["If", "If", "Add", "Add"]
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": np.array([-1.0, 2.0], np.float32)}
        assert_models_close(before, model, feeds)


def test_duplicates_inside_a_branch_merge_there() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool c, float[2] x) => (float[2] y) {
        y = If(c) <
            then_branch = t () => (float[2] o) { a = Relu(x)  b = Relu(x)  o = Add(a, b) },
            else_branch = e () => (float[2] p) { p = Neg(x) }
        >
    }"""
    )
    assert _run(model) == {"ops_merged": 1}
    then_branch = next(model.graph.ops[0].subgraphs())
    assert [op.op_type for op in then_branch.ops] == ["Relu", "Add"]


def test_long_list_attributes_are_compared_by_their_values_not_element_by_element() -> None:
    """A tree ensemble's lists hold millions of numbers: keyed by a digest (LIST_DIGEST), they
    still merge only when every value is the same, -0.0 and 0.0 apart as their reprs are."""
    from onnxforge.passes.eliminate_common_subexpressions import LIST_DIGEST, _attr_key

    n = LIST_DIGEST + 1
    floats = [float(i) for i in range(n)]
    assert _attr_key(floats) == _attr_key(list(floats))
    assert _attr_key(floats) != _attr_key([*floats[:-1], floats[-1] + 1e-9])
    assert _attr_key([0.0] * n) != _attr_key([-0.0] * n)
    assert _attr_key(list(range(n))) != _attr_key([float(i) for i in range(n)])
    assert _attr_key(["a", "bc"] * n) != _attr_key(["ab", "c"] * n)
    assert _attr_key([1, 2.5] * n) == _attr_key([1, 2.5] * n)  # mixed: element by element
    assert _attr_key([2**70] * n) == _attr_key([2**70] * n)  # past int64: element by element
