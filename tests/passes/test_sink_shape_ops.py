"""sink-shape-ops: elementwise ops between a Reshape (or Transpose) and the one that undoes it
read the first one's input, and the pair goes; nothing moves unless something is removed."""

from __future__ import annotations

import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import SinkShapeOpsPass
from onnxforge.shape_infer import infer
from onnxforge.testing import assert_models_close, model_from_text, random_feeds

HEADER = '<ir_version: 8, opset_import: ["" : 18]>'
SHAPES = """
        s3 = Constant <value = int64[3] {1, 16, 64}> ()
        s2 = Constant <value = int64[2] {-1, 64}> ()
        s4 = Constant <value = int64[2] {32, 32}> ()
        z = Constant <value = int64[3] {0, 16, 64}> ()"""


def _model(body: str, signature: str = "(float[16, 64] x) => (float[16, 64] y)") -> Model:
    return model_from_text(f"{HEADER} g {signature} {{ {SHAPES} {body} }}")


def _run(model: Model) -> dict[str, int]:
    stats = dict(SinkShapeOpsPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.topo_order() if op.op_type != "Constant"]


def _check(model: Model, stats: dict[str, int], ops: list[str]) -> None:
    before = to_proto(model)
    assert _run(model) == stats
    assert _ops(model) == ops
    assert [v.name for v in model.graph.outputs] == [o.name for o in before.graph.output]
    infer(model)  # the moved values are consistent again
    assert_models_close(before, model, random_feeds(before, dim=4))


def test_a_gelu_between_a_reshape_and_its_inverse_reads_the_input_and_both_go() -> None:
    model = _model(
        """
        c05 = Constant <value = float {0.5}> ()
        c3 = Constant <value = float {3.0}> ()
        c044 = Constant <value = float[1] {0.044715}> ()
        c079 = Constant <value = float {0.7978845}> ()
        c1 = Constant <value = float[1, 1] {1.0}> ()
        r = Reshape(x, s3)
        half = Mul(r, c05)
        cube = Pow(r, c3)
        scaled = Mul(cube, c044)
        inner = Add(r, scaled)
        arg = Mul(inner, c079)
        t = Tanh(arg)
        one = Add(t, c1)
        g = Mul(half, one)
        y = Reshape(g, s2)"""
    )
    _check(
        model,
        {"reshapes_sunk": 1, "reshapes_removed": 2},
        ["Mul", "Pow", "Mul", "Add", "Mul", "Tanh", "Add", "Mul"],
    )
    last = model.graph.producer(model.graph.outputs[0])
    assert last.op_type == "Mul" and model.graph.outputs[0].name == "y"


def test_a_reshape_read_only_by_the_region_goes_when_the_last_reshape_stays() -> None:
    model = _model(
        """
        r = Reshape(x, s3)
        a = Relu(r)
        y = Reshape(a, s4)""",
        "(float[16, 64] x) => (float[32, 32] y)",
    )
    _check(model, {"reshapes_sunk": 1, "reshapes_removed": 1}, ["Relu", "Reshape"])


def test_a_reshape_read_outside_the_region_stays_and_its_inverse_goes() -> None:
    model = _model(
        """
        r = Reshape(x, s3)
        a = Sigmoid(r)
        y = Reshape(a, s2)""",
        "(float[16, 64] x) => (float[16, 64] y, float[1, 16, 64] r)",
    )
    _check(model, {"reshapes_sunk": 1, "reshapes_removed": 1}, ["Reshape", "Sigmoid"])


def test_nothing_moves_when_no_reshape_would_go() -> None:
    model = _model(
        """
        r = Reshape(x, s3)
        a = Relu(r)
        y = Reshape(a, s4)""",
        "(float[16, 64] x) => (float[32, 32] y, float[1, 16, 64] r)",
    )
    _check(model, {}, ["Reshape", "Relu", "Reshape"])


@pytest.mark.parametrize(
    ("body", "why"),
    [
        ("a = Relu(r)  y = Softmax(a)", "read by a Softmax"),
        ("a = Add(r, b)  y = Reshape(a, s2)", "a bias of 64 elements"),
        ("a = Add(r, c)  y = Reshape(a, s2)", "a one-element constant of rank 3 > 2"),
        ("a = Relu(r)  y = Reshape(a, z)", "a 0 copying dim 0: 1 for r, 16 for x"),
    ],
)
def test_nothing_moves_when_the_region_cannot_read_x(body: str, why: str) -> None:
    model = _model(
        f"""
        b = Constant <value = float[64] {{{", ".join(["1.0"] * 64)}}}> ()
        c = Constant <value = float[1, 1, 1] {{2.0}}> ()
        r = Reshape(x, s3)
        {body}""",
        "(float[16, 64] x) => (float y)",
    )
    ops = _ops(model)
    assert _run(model) == {}, why
    assert _ops(model) == ops


def test_a_region_value_that_is_a_graph_output_stops_the_move() -> None:
    model = _model(
        """
        r = Reshape(x, s3)
        a = Relu(r)
        y = Reshape(a, s2)""",
        "(float[16, 64] x) => (float[16, 64] y, float[1, 16, 64] a)",
    )
    assert _run(model) == {}


def test_a_reshape_after_a_flatten_reads_the_region_on_the_flattened_input() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
        m = Constant <value = bool {1}> ()
        zero = Constant <value = float {0.0}> ()
        s = Constant <value = int64[3] {2, 3, 4}> ()
        f = Flatten <axis = 1> (x)
        a = Exp(f)
        b = Where(m, a, zero)
        y = Reshape(b, s)
    }"""
    )
    _check(
        model,
        {"flattens_sunk": 1, "flattens_removed": 1, "reshapes_removed": 1},
        ["Exp", "Where"],
    )


def test_a_transpose_and_its_inverse_around_elementwise_ops_both_go() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[2, 3, 4] y) {
        t = Transpose <perm = [0, 2, 1]> (x)
        a = Sigmoid(t)
        b = Mul(t, a)
        y = Transpose <perm = [0, 2, 1]> (b)
    }"""
    )
    _check(model, {"transposes_sunk": 1, "transposes_removed": 2}, ["Sigmoid", "Mul"])


def test_two_transposes_around_elementwise_ops_compose_into_one() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[4, 3, 2] y) {
        t = Transpose <perm = [1, 2, 0]> (x)
        a = Neg(t)
        y = Transpose <perm = [1, 0, 2]> (a)
    }"""
    )
    _check(model, {"transposes_sunk": 1, "transposes_removed": 1}, ["Neg", "Transpose"])
    (t,) = [op for op in model.graph.ops if op.op_type == "Transpose"]
    assert t.attr("perm") == [2, 1, 0]


def test_a_transpose_read_by_a_reshape_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[6, 4] y) {
        s = Constant <value = int64[2] {6, 4}> ()
        t = Transpose <perm = [0, 2, 1]> (x)
        a = Relu(t)
        y = Reshape(a, s)
    }"""
    )
    assert _run(model) == {}


def test_declared_types_of_moved_values_are_dropped() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[16, 64] x) => (float[16, 64] y)
    <float[1, 16, 64] a> {
        s3 = Constant <value = int64[3] {1, 16, 64}> ()
        s2 = Constant <value = int64[2] {-1, 64}> ()
        r = Reshape(x, s3)
        a = Relu(r)
        b = Neg(a)
        y = Reshape(b, s2)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"reshapes_sunk": 1, "reshapes_removed": 2}
    (a,) = [v for v in model.graph.values() if v.name == "a"]
    assert a.type is None
    infer(model)
    assert a.type.shape == (16, 64)
    assert_models_close(before, model, random_feeds(before))
