"""The IR's graph helpers and invariants."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.errors import InvalidModelError, OnnxForgeError
from onnxforge.ir import Graph, Model, Tensor, TensorType, problems, verify
from onnxforge.testing import model_from_text

CHAIN = """
<ir_version: 10, opset_import: ["" : 18]>
g (float[N, 6] x) => (float[N, 3] a, float[N, 3] b) {
    y = Relu(x)
    a, b = Split <axis = 1, num_outputs = 2> (y)
}
"""

IF_MODEL = """
<ir_version: 10, opset_import: ["" : 18]>
g (bool c, float[2] x) => (float[2] z) {
    w = Neg(x)
    z = If(c) <
        then_branch = t () => (float[2] r) { r = Abs(w) },
        else_branch = e () => (float[2] r) { r = Identity(x) }
    >
}
"""


def _op(model: Model, op_type: str):
    return next(op for op in model.graph.ops if op.op_type == op_type)


def test_values_and_ports_follow_the_file() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    relu, split = g.ops
    assert [v.name for v in g.inputs_of(split)] == ["y"]
    assert [v.name for v in g.outputs_of(split)] == ["a", "b"]
    y = g.outputs_of(relu)[0]
    assert g.producer(y) is relu
    assert g.consumers(y) == [(split, 0)]
    assert g.inputs[0].type == TensorType(1, ("N", 6))
    assert split.attr("num_outputs") == 2 and split.attr("missing", 7) == 7
    assert g.nx.has_edge(y, split, key=0) and g.nx.has_edge(split, y) is False
    verify(model)


def test_add_op_gets_fresh_names_and_replace_all_uses_rewires_outputs() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    relu = g.ops[0]
    y = g.outputs_of(relu)[0]
    neg = g.add_op("Neg", [y], name="y")
    (neg_out,) = g.outputs_of(neg)
    assert neg_out.name == "y_out0"
    replaced = g.replace_all_uses(y, neg_out)
    assert replaced == 2  # Split's input and Neg's own input
    assert g.inputs_of(neg) == [neg_out]  # a cycle: verify must say so
    with pytest.raises(InvalidModelError, match="cycle"):
        verify(model)


def test_remove_op_refuses_while_an_output_is_used() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    relu, split = g.ops
    with pytest.raises(OnnxForgeError, match="output 'y' is used"):
        g.remove_op(relu)
    g.outputs[:] = []
    g.remove_op(split)
    assert g.ops == [relu]
    assert not g.is_used(g.outputs_of(relu)[0])


def test_topo_order_keeps_stored_order_and_sorts_appended_producers() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    relu, split = g.ops
    x = g.inputs[0]
    neg = g.add_op("Neg", [x])
    g.set_input(relu, 0, g.outputs_of(neg)[0])
    assert not g.is_sorted()
    assert g.topo_order() == [neg, relu, split]


def test_subgraph_reads_of_outer_values_are_capture_edges() -> None:
    model = model_from_text(IF_MODEL)
    g = model.graph
    if_op = _op(model, "If")
    then_g, else_g = if_op.attrs["then_branch"], if_op.attrs["else_branch"]
    assert then_g.parent is g and then_g.owner is if_op
    w = g.outputs_of(_op(model, "Neg"))[0]
    x = g.inputs[1]
    assert then_g.captures() == {w} and else_g.captures() == {x}
    assert g.nx.has_edge(w, if_op, key=("capture", "w"))
    assert (if_op, ("capture", "w")) not in g.consumers(w)  # consumers are ports only
    assert len(list(model.graphs())) == 3
    verify(model)


def test_replace_all_uses_reaches_into_subgraphs() -> None:
    model = model_from_text(IF_MODEL)
    g = model.graph
    if_op = _op(model, "If")
    w, x = g.outputs_of(_op(model, "Neg"))[0], g.inputs[1]
    assert g.replace_all_uses(w, x) == 1
    then_g = if_op.attrs["then_branch"]
    assert then_g.inputs_of(then_g.ops[0]) == [x]
    assert not g.is_used(w)


def test_problems_lists_undefined_and_duplicate_names_at_once() -> None:
    g = Graph("g")
    x = g.add_value("x", TensorType(1, (2,)))
    g.inputs.append(x)
    ghost = g.add_value("ghost")
    a = g.add_op("Add", [x, ghost], output_names=["y"])
    b = g.add_op("Neg", [x], output_names=["y"])
    g.outputs.extend([g.outputs_of(a)[0], g.outputs_of(b)[0]])
    found = problems(Model(g, opset_imports={"": 18}))
    assert any("'ghost' is used but never produced" in p for p in found)
    assert any("the name 'y' is defined twice" in p for p in found)
    assert len(found) == 2


def test_opset_accepts_both_spellings_of_the_default_domain() -> None:
    model = model_from_text(CHAIN)
    assert model.opset("") == 18 and model.opset("ai.onnx") == 18
    with pytest.raises(OnnxForgeError, match="com.microsoft"):
        model.opset("com.microsoft")


def test_make_constant_turns_outputs_into_initializers_and_keeps_their_uses() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2] x) => (float[2] y) { c = Constant <value = float[2] {1, 2}> ()  y = Add(x, c) }""")
    graph = model.graph
    const_op = graph.ops[0]
    (c,) = graph.outputs_of(const_op)
    graph.make_constant(const_op, [Tensor.from_numpy(np.array([1, 2], np.float32))])
    verify(model)
    assert [op.op_type for op in graph.ops] == ["Add"]
    assert c in graph.initializers and graph.consumers(c)[0][0].op_type == "Add"


def test_inline_replaces_an_if_by_its_branch_and_keeps_output_names() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[2] x) => (float[2] y) {
        k = Neg(x)
        y = If(c) <
            then_branch = t () => (float[2] k2) { a = Abs(x)  k2 = Add(a, x) },
            else_branch = e () => (float[2] b) { b = Identity(x) }
        >
    }""")
    graph = model.graph
    if_op = graph.ops[1]
    graph.inline(if_op, if_op.attrs["then_branch"])
    verify(model)
    assert [op.op_type for op in graph.topo_order()] == ["Neg", "Abs", "Add", "Identity"]
    assert [v.name for v in graph.outputs] == ["y"]


def test_initializers_keep_their_order_through_removals() -> None:
    graph = Graph("g")
    weights = [
        graph.add_initializer(f"w{i}", Tensor.from_numpy(np.full(2, i, np.float32)))
        for i in range(5)
    ]
    graph.remove_initializer(weights[1])
    graph.remove_initializer(weights[3])
    assert [v.name for v in graph.initializers] == ["w0", "w2", "w4"]
    assert len(graph.initializers) == 3 and graph.initializers[1] is weights[2]
    assert weights[2] in graph.initializers and weights[3] not in graph.initializers
    graph.initializers.append(weights[3])
    assert [v.name for v in graph.initializers] == ["w0", "w2", "w4", "w3"]


def test_the_kept_topological_order_follows_a_rewire_that_reverses_two_ops() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    relu, split = g.ops
    assert g.topo_order() == [relu, split]  # kept from here on
    x = g.inputs[0]
    neg = g.add_op("Neg", [x])
    g.set_input(relu, 0, g.outputs_of(neg)[0])  # Neg, added last, now feeds Relu
    assert g.topo_order() == [neg, relu, split]
    g.set_input(relu, 0, x)
    g.remove_op(neg)
    assert g.topo_order() == [relu, split]
    verify(model)


def test_uses_of_a_value_read_by_many_ops_survive_growing_past_the_small_list() -> None:
    model = model_from_text(CHAIN)
    g = model.graph
    x = g.inputs[0]
    readers = [g.add_op("Abs", [x]) for _ in range(20)]
    assert g.use_count(x) == 21  # Relu and the twenty
    for op in readers[::2]:
        g.remove_op(op)
    assert [op for op, _ in g.consumers(x)] == [g.ops[0], *readers[1::2]]
    assert g.use_count(x) == 11 and g.nx.out_degree(x) == 11  # the networkx view follows
    verify(model)


def test_renaming_a_captured_value_renames_its_capture_edges() -> None:
    model = model_from_text(IF_MODEL)
    g = model.graph
    w = g.outputs_of(_op(model, "Neg"))[0]
    if_op = _op(model, "If")
    g.rename(w, "w2")
    assert g.uses(w) == [(if_op, ("capture", "w2"))]
    assert g.nx.has_edge(w, if_op, key=("capture", "w2"))
    verify(model)
