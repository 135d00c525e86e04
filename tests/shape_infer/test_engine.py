"""The engine: every error at once, declared types checked, assumptions and notes reported,
subgraphs and local functions inferred."""

from __future__ import annotations

import pytest

from onnxforge.ir import DType, TensorType
from onnxforge.shape_infer import infer
from onnxforge.testing import model_from_text


def test_every_error_is_listed_not_just_the_first() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a, float[4, 5] b) => (float[?, ?] y, float[?, ?] z) {
        y = Add(a, b)
        z = MatMul(a, a)
    }""")
    report = infer(model)
    assert [e.op for e in report.errors] == ["Add-14", "MatMul-13"]
    first = str(report.errors[0])
    assert "float[2,3]" in first and "float[4,5]" in first
    assert not any(e.internal for e in report.errors)


def test_a_declared_shape_that_contradicts_the_inferred_one_is_replaced_with_a_warning() -> None:
    # onnxruntime runs such a model (it warns and uses what it infers): so do we.
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a) => (float[2, 4] y) { y = Relu(a) }""")
    report = infer(model)
    assert not report.errors
    assert [(s.name, s.declared, s.inferred, s.op) for s in report.stale] == [
        ("y", "float[2,4]", "float[2,3]", "Relu-14")
    ]
    assert model.graph.outputs[0].type == TensorType(1, (2, 3))
    assert report.to_json()["stale_declarations"][0]["value"] == "y"


def test_a_stale_rank_is_replaced_and_strict_declared_refuses_it() -> None:
    text = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, S, 16] x) => (float[N, S, 16] y) <float[1, S] t> { t = Relu(x)  y = Neg(t) }"""
    model = model_from_text(text)
    report = infer(model)
    assert not report.errors and len(report.stale) == 1
    (t,) = [v for v in model.graph.values() if v.name == "t"]
    assert t.type == TensorType(1, ("N", "S", 16))
    strict = infer(model_from_text(text), strict_declared=True)
    assert strict.errors and not strict.stale
    assert "declared float[1,S], inferred float[N,S,16] (ranks differ)" in str(strict.errors[0])


def test_a_declared_element_type_that_contradicts_inference_stays_an_error() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a) => (int64[2, 3] y) { y = Relu(a) }""")
    report = infer(model)
    assert len(report.errors) == 1 and not report.stale
    assert "element types differ" in str(report.errors[0])


def test_different_symbols_that_must_match_are_reported_as_assumptions() -> None:
    """Concat's other dims must be equal for the model to run: N is M in every run, so [5, N]
    is true, and the equality is reported. (A broadcast is not such a place: Sub of [N, 3]
    and [M, 3] may have N or M be 1; its dim is exact, test_broadcast.py.)"""
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, N] a, float[3, M] b) => (float[?, ?] y) { y = Concat <axis = 0> (a, b) }""")
    report = infer(model)
    assert not report.errors
    assert [(a.a, a.b, a.op) for a in report.assumptions] == [("N", "M", "Concat-13")]
    assert model.graph.outputs[0].type == TensorType(1, (5, "N"))


def test_custom_domain_ops_are_passed_over_with_a_note() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17, "my.ops" : 1]>
    g (float[2] a) => (float[?] y) { t = my.ops.Thing(a)  y = Relu(t) }""")
    report = infer(model)
    assert not report.errors
    assert any("my.ops::Thing" in note for note in report.notes)


def test_if_branches_are_inferred_and_joined() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (bool c, float[N, 4] x) => (float[?, ?] y) {
        y = If(c) <
            then_branch = t () => (float[?, ?] a) { a = Relu(x) },
            else_branch = e () => (float[?, ?] b) {
                k = Constant <value = int64[2] {1, 2}> ()
                b = Tile(x, k)
            }
        >
    }""")
    report = infer(model)
    assert not report.errors
    y = model.graph.outputs[0].type
    assert y.shape[0] == "N" and y.shape[1] not in (4, 8)


def test_an_if_branch_of_unknown_type_leaves_the_rank_unknown_not_the_other_branch() -> None:
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper

    from onnxforge import io

    def branch(name: str, op: str, domain: str = "") -> onnx.GraphProto:
        out = onnx.ValueInfoProto(name=f"{name}_out")  # no type declared: a custom op's
        node = helper.make_node(op, ["x"], [f"{name}_out"], domain=domain)
        return helper.make_graph([node], name, [], [out])

    graph = helper.make_graph(
        [
            helper.make_node(
                "If",
                ["c"],
                ["y"],
                then_branch=branch("t", "Relu"),
                else_branch=branch("e", "Mystery", "custom"),
            )
        ],
        "g",
        [
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    proto = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("custom", 1)]
    )
    model = io.from_proto(proto)
    report = infer(model)
    assert not report.errors
    assert model.graph.outputs[0].type == TensorType(DType.FLOAT, None)


def test_loop_scan_outputs_get_the_trip_count() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[3] x) => (float[?] s, float[?, ?] ys) {
        n = Constant <value = int64 {5}> ()
        c = Constant <value = bool {1}> ()
        s, ys = Loop(n, c, x) <body = b (int64 i, bool ci, float[3] si) => (bool co, float[3] so,
                                                                          float[3] yo) {
            co = Identity(ci)
            so = Add(si, si)
            yo = Identity(so)
        }>
    }""")
    report = infer(model)
    assert not report.errors
    types = {v.name: v.type for v in model.graph.outputs}
    assert types["s"].shape == (3,)
    assert types["ys"].shape == (5, 3)


def test_a_loop_body_that_declares_rank_1_counters_keeps_them_as_runtimes_do() -> None:
    """paddle2onnx declares the iteration number and condition as int64[1] and bool[1]: the
    checker compares the condition with the outer cond, and onnxruntime feeds both as [1]."""
    onnx = pytest.importorskip("onnx")
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    from onnxforge import io

    text = """<ir_version: 8, opset_import: ["" : 13]>
    g (float[N] x) => (float[N] y, int64[?, 1] scan) <int64[1] m = {3}, bool[1] c = {1}> {
        y, scan = Loop(m, c, x) <body = b (int64[1] i, bool[1] ci, float[N] xi)
                                        => (bool[1] co, float[N] xo, int64[1] io) {
            co = Identity(ci)
            one = Constant <value = float[1] {1}> ()
            xo = Add(xi, one)
            io = Identity(i)
        }>
    }"""
    model = model_from_text(text)
    report = infer(model)
    assert not report.errors and not report.stale
    body = model.graph.ops[0].attrs["body"]
    assert [v.type.shape for v in body.inputs[:2]] == [(1,), (1,)]
    assert model.graph.outputs[1].type.shape == (3, 1)
    proto = io.to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    session = ort.InferenceSession(proto.SerializeToString())
    ran = session.run(None, {"x": np.zeros(4, np.float32)})
    assert ran[1].shape == (3, 1)


def test_a_loop_carried_shape_that_grows_is_not_kept_from_the_first_pass() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (int64 n, float[2] x) => (float[?] y) {
        t = Constant <value = bool {1}> ()
        y = Loop(n, t, x) <body = b (int64 i, bool c, float[?] v) => (bool co, float[?] vo) {
            co = Identity(c)
            r = Relu(v)
            q = Shape(r)
            vo = Concat <axis = 0> (v, r)
        }>
    }""")
    report = infer(model)
    assert not report.errors
    body = model.graph.ops[-1].attrs["body"]
    types = {v.name: v.type for v in body.values()}
    assert types["r"].shape != (2,) and types["vo"].shape != (4,)
    assert all(v.name != "q" for v in report.static_values)


def test_local_functions_are_inferred_per_call() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[2, 3] a, float[5] b) => (float[?, ?] y, float[?] z) {
        y = local.Double(a)
        z = local.Double(b)
    }
    <domain: "local", opset_import: ["" : 17]>
    Double (x) => (r) { r = Add(x, x) }""")
    report = infer(model)
    assert not report.errors
    types = {v.name: v.type for v in model.graph.outputs}
    assert types["y"].shape == (2, 3)
    assert types["z"].shape == (5,)


def test_ops_defined_by_a_schema_function_are_inferred_through_it() -> None:
    model = model_from_text("""<ir_version: 10, opset_import: ["" : 21]>
    g (float[2, 4, 3, 3] x, float[4] s, float[4] b) => (float[?, ?, ?, ?] y) {
        y = GroupNormalization <num_groups = 2, epsilon = 0.001> (x, s, b)
    }""")
    report = infer(model)
    assert not report.errors
    assert model.graph.outputs[0].type.shape == (2, 4, 3, 3)


FLOAT_SHAPE_ARITHMETIC = """<ir_version: 8, opset_import: ["" : 17]>
    g (float[4, 4] x) => (float[?, ?] y) {
        a = Constant <value = float[2] {1.5, 2.9}> ()
        b = Mul(a, a)
        s = Cast <to = 7> (b)
        y = Reshape(x, s)
    }"""


def test_a_kernel_that_fails_while_evaluating_leaves_the_rules_types(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from onnxforge import kernels

    model = model_from_text(FLOAT_SHAPE_ARITHMETIC)
    assert infer(model).ok and model.graph.outputs[0].type.shape == (2, 8)  # evaluated

    def broken(*args: object) -> None:
        raise KeyError("an attribute a kernel looked for")  # a bug, not a numpy error

    monkeypatch.setattr(kernels.KERNELS, "find", lambda *args: broken)  # every op's kernel
    model = model_from_text(FLOAT_SHAPE_ARITHMETIC)
    assert infer(model).ok  # no value for s, no error: Reshape's rank is still known
    shape = model.graph.outputs[0].type.shape
    assert shape is not None and len(shape) == 2 and shape != (2, 8)
