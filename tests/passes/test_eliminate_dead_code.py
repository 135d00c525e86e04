"""eliminate-dead-code: unread ops and initializers go, inside subgraphs too; interfaces stay."""

from __future__ import annotations

import numpy as np

from onnxforge.ir import Model, verify
from onnxforge.passes import EliminateDeadCodePass
from onnxforge.testing import model_from_text, run_onnxruntime

HEADER = '<ir_version: 8, opset_import: ["" : 17, "my" : 1]>'


def _run(model: Model) -> dict[str, int]:
    stats = dict(EliminateDeadCodePass()(model).stats)
    verify(model)
    return stats


def test_chains_that_reach_no_output_are_removed() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) {
        a = Neg(x)
        b = Abs(a)
        y = Relu(x)
    }"""
    )
    assert _run(model) == {"ops_removed": 2}
    assert [op.op_type for op in model.graph.ops] == ["Relu"]


def test_unread_initializers_go_but_graph_inputs_stay() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x, float[2] w) => (float[2] y) <float[2] w = {1, 2}, float[2] unused = {3, 4}> {
        y = Relu(x)
    }"""
    )
    assert _run(model) == {"initializers_removed": 1}
    assert [v.name for v in model.graph.initializers] == ["w"]


def test_custom_domain_ops_are_kept() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) { t = my.Log(x)  y = Relu(x) }"""
    )
    assert _run(model) == {}


def test_dead_code_inside_branches_and_what_only_it_read() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool c, float[2] x) => (float[2] y) {
        k = Neg(x)
        y = If(c) <
            then_branch = t () => (float[2] a) { unused = Abs(k)  a = Relu(x) },
            else_branch = e () => (float[2] b) { b = Identity(x) }
        >
    }"""
    )
    assert _run(model) == {"ops_removed": 2}
    assert [op.op_type for op in model.graph.ops] == ["If"]
    x = np.array([-1.0, 2.0], np.float32)
    assert run_onnxruntime(model, {"c": np.array(True), "x": x})[0].tolist() == [0.0, 2.0]


FUNCTIONS = """
    <domain: "local", opset_import: ["" : 17, "local" : 1]>
    Used (a) => (r) { r = local.Helper(a) }
    <domain: "local", opset_import: ["" : 17]>
    Helper (a) => (r) { r = Relu(a) }
    <domain: "local", opset_import: ["" : 17, "local" : 1]>
    Unused (a) => (r) { r = local.OnlyFromUnused(a) }
    <domain: "local", opset_import: ["" : 17]>
    OnlyFromUnused (a) => (r) { r = Neg(a) }"""


def test_local_functions_nothing_calls_go_with_what_only_they_call() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'
        + """
    g (float[2] x) => (float[2] y) { y = local.Used(x) }"""
        + FUNCTIONS
    )
    assert _run(model) == {"functions_removed": 2}
    assert [fn.name for fn in model.functions] == ["Used", "Helper"]
    x = np.array([-1.0, 2.0], np.float32)
    assert run_onnxruntime(model, {"x": x})[0].tolist() == [0.0, 2.0]


def test_an_unread_call_of_a_pure_local_function_goes_and_then_the_function() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 17, "local" : 1]>'
        + """
    g (float[2] x) => (float[2] y) { t = local.Unused(x)  y = local.Used(x) }"""
        + FUNCTIONS
    )
    assert _run(model) == {"ops_removed": 1, "functions_removed": 2}
    assert [op.op_type for op in model.graph.ops] == ["Used"]


def test_unread_inputs_of_a_loop_body_stay() -> None:
    model = model_from_text(
        HEADER
        + """
    g (int64 n, float[2] x) => (float[2] y) {
        t = Constant <value = bool {1}> ()
        y = Loop(n, t, x) <body = b (int64 i, bool c, float[2] v) => (bool co, float[2] vo) {
            co = Identity(c)
            unused = Abs(v)
            vo = Neg(v)
        }>
    }"""
    )
    assert _run(model) == {"ops_removed": 1}
    body = model.graph.ops[-1].attrs["body"]
    assert [v.name for v in body.inputs] == ["i", "c", "v"]
    assert [op.op_type for op in body.ops] == ["Identity", "Neg"]
