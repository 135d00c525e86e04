"""merge-parallel-matmuls: MatMuls of one input by constant 2-D weights become one MatMul by
the concatenated weights and a Split; bias Adds merge when all have one; weights read
elsewhere, other K or dtype, non-constant weights, or results that are graph outputs stay
apart."""

from __future__ import annotations

import numpy as np
import onnx
import onnx.parser
import pytest
from onnx import numpy_helper

from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import MergeParallelMatMulsPass
from onnxforge.testing import assert_models_close, model_from_text, random_feeds

RNG = np.random.default_rng(3)


def _model(text: str, opset: int = 18, **weights: np.ndarray) -> Model:
    return model_from_text(f'<ir_version: 8, opset_import: ["" : {opset}]>' + text, **weights)


def _run(model: Model) -> dict[str, int]:
    stats = dict(MergeParallelMatMulsPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return sorted(op.op_type for op in model.graph.ops)


def _weights(*shapes: tuple[int, ...], dtype: type = np.float32) -> dict[str, np.ndarray]:
    return {f"w{i}": RNG.standard_normal(s).astype(dtype) for i, s in enumerate(shapes)}


def _bytes(model: Model) -> int:
    """Bytes of the float initializers (the weights; the Split's sizes are not counted)."""
    return sum(
        v.const.nbytes for v in model.graph.initializers if v.const.numpy().dtype.kind == "f"
    )


QKV = """
    g (float[B, S, 8] x) => (float[B, S, 8] q, float[B, S, 4] k, float[B, S, 2] v) {
        a = MatMul(x, w0)
        b = MatMul(x, w1)
        c = MatMul(x, w2)
        q = Relu(a)
        k = Relu(b)
        v = Relu(c)
    }"""


@pytest.mark.parametrize("opset", [7, 11, 13, 17, 18])
def test_three_projections_of_one_input_become_one_matmul_and_a_split(opset: int) -> None:
    model = _model(QKV, opset, **_weights((8, 8), (8, 4), (8, 2)))
    before, size = to_proto(model), _bytes(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 2}
    assert _ops(model) == ["MatMul", "Relu", "Relu", "Relu", "Split"]
    assert [v.name for v in model.graph.outputs] == ["q", "k", "v"]
    (split,) = [op for op in model.graph.ops if op.op_type == "Split"]
    if opset >= 13:
        assert split._inputs[1].const.numpy().tolist() == [8, 4, 2]
        assert split.attr("axis") == -1
    else:
        assert split.attr("split") == [8, 4, 2]
        assert split.attr("axis") == (-1 if opset >= 11 else 2)
    (matmul,) = [op for op in model.graph.ops if op.op_type == "MatMul"]
    assert matmul._inputs[1].const.shape == (8, 14)
    assert _bytes(model) == size
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_a_split_before_opset_11_needs_the_rank_of_the_input() -> None:
    proto = onnx.parser.parse_model(
        '<ir_version: 8, opset_import: ["" : 10]>'
        + """
    g (float[N, 8] x) => (float q, float k) {
        q = MatMul(x, w0)
        k = MatMul(x, w1)
    }"""
    )
    proto.graph.input[0].type.tensor_type.ClearField("shape")  # rank unknown
    proto.graph.initializer.extend(
        numpy_helper.from_array(a, n) for n, a in _weights((8, 8), (8, 4)).items()
    )
    model = from_proto(proto)
    assert _run(model) == {}
    assert _ops(model) == ["MatMul", "MatMul"]


def test_bias_adds_after_every_projection_merge_into_one_add() -> None:
    weights = _weights((8, 6), (8, 6))
    model = _model(
        """
    g (float[N, 8] x) => (float[N, 6] q, float[N, 6] k) {
        a = MatMul(x, w0)
        d = Add(a, b0)
        c = MatMul(x, w1)
        e = Add(b1, c)
        q = Relu(d)
        k = Relu(e)
    }""",
        b0=RNG.standard_normal(6).astype(np.float32),
        b1=RNG.standard_normal(6).astype(np.float32),
        **weights,
    )
    before, size = to_proto(model), _bytes(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1, "adds_removed": 1}
    assert _ops(model) == ["Add", "MatMul", "Relu", "Relu", "Split"]
    assert [v.name for v in model.graph.outputs] == ["q", "k"]
    assert _bytes(model) == size
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_bias_adds_stay_when_one_projection_has_none() -> None:
    model = _model(
        """
    g (float[N, 8] x) => (float[N, 6] q, float[N, 6] k) {
        a = MatMul(x, w0)
        d = Add(a, b0)
        e = MatMul(x, w1)
        q = Relu(d)
        k = Relu(e)
    }""",
        b0=RNG.standard_normal(6).astype(np.float32),
        **_weights((8, 6), (8, 6)),
    )
    before = to_proto(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1}
    assert _ops(model) == ["Add", "MatMul", "Relu", "Relu", "Split"]
    (add,) = [op for op in model.graph.ops if op.op_type == "Add"]
    assert model.graph.producer(add._inputs[0]).op_type == "Split"
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_a_weight_read_elsewhere_is_left_out_and_the_others_merge() -> None:
    model = _model(
        """
    g (float[N, 8] x) => (float[N, 12] y, float[8, 4] w) {
        q = MatMul(x, w0)
        k = MatMul(x, w1)
        v = MatMul(x, w2)
        y = Concat <axis = 1> (q, k, v)
        w = Relu(w2)
    }""",
        **_weights((8, 4), (8, 4), (8, 4)),
    )
    before = to_proto(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1}
    assert _ops(model) == ["Concat", "MatMul", "MatMul", "Relu", "Split"]
    assert {v.name for v in model.graph.initializers} >= {"w2"}
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_weights_that_are_graph_inputs_or_computed_are_not_merged() -> None:
    model = _model(
        """
    g (float[N, 8] x, float[8, 4] w0) => (float[N, 4] q, float[N, 4] k, float[N, 4] v) {
        q = MatMul(x, w0)
        r = Relu(w1)
        k = MatMul(x, r)
        v = MatMul(x, w2)
    }""",
        **{k: v for k, v in _weights((8, 4), (8, 4), (8, 4)).items() if k != "w0"},
    )
    assert _run(model) == {}
    assert _ops(model) == ["MatMul", "MatMul", "MatMul", "Relu"]


def test_constant_op_weights_merge_and_their_constants_go() -> None:
    model = _model(
        """
    g (float[N, 2] x) => (float[N, 3] y) {
        a = Constant <value = float[2, 2] {1, 2, 3, 4}> ()
        b = Constant <value = float[2, 1] {5, 6}> ()
        q = MatMul(x, a)
        k = MatMul(x, b)
        y = Concat <axis = 1> (k, q)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1}
    assert _ops(model) == ["Concat", "MatMul", "Split"]
    (merged,) = [v for v in model.graph.initializers if v.const.shape == (2, 3)]
    assert merged.const.numpy().tolist() == [[1, 2, 5], [3, 4, 6]]
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_projections_inside_a_branch_merge_there() -> None:
    model = _model(
        """
    g (bool c, float[2, 2] x) => (float[2, 2] y) {
        y = If(c) <
            then_branch = t () => (float[2, 2] o) {
                a = Constant <value = float[2, 2] {1, 2, 3, 4}> ()
                b = Constant <value = float[2, 2] {5, 6, 7, 8}> ()
                p = MatMul(x, a)
                q = MatMul(x, b)
                o = Sub(p, q)
            },
            else_branch = e () => (float[2, 2] z) { z = MatMul(x, w0) }
        >
    }""",
        **_weights((2, 2)),
    )
    before = to_proto(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1}
    then_branch, else_branch = model.graph.ops[0].subgraphs()
    assert sorted(op.op_type for op in then_branch.ops) == ["MatMul", "Split", "Sub"]
    assert [op.op_type for op in else_branch.ops] == ["MatMul"]
    for cond in (True, False):
        feeds = {"c": np.array(cond), "x": RNG.standard_normal((2, 2)).astype(np.float32)}
        assert_models_close(before, model, feeds)


def test_weights_of_an_outer_graph_are_read_only_inside_a_branch() -> None:
    model = _model(
        """
    g (bool c, float[2, 8] x) => (float[2, 4] y) {
        y = If(c) <
            then_branch = t () => (float[2, 4] o) {
                p = MatMul(x, w0)
                q = MatMul(x, w1)
                o = Add(p, q)
            },
            else_branch = e () => (float[2, 4] z) { z = MatMul(x, w0) }
        >
    }""",
        **_weights((8, 4), (8, 4)),
    )
    assert _run(model) == {}


def test_a_result_that_is_a_graph_output_keeps_its_own_matmul() -> None:
    # trueocr's order.onnx: onnx2torch 1.5.15 takes a graph output for its producer's whole
    # result, so "cls" as a Split's part came out as every part
    model = _model(
        """
    g (float[N, 8] x) => (float[N, 10] cls, float[N, 8] y) {
        a = MatMul(x, w0)
        q = Add(a, b0)
        c = MatMul(x, w1)
        k = Add(c, b1)
        d = MatMul(x, w2)
        cls = Add(d, b2)
        y = Mul(q, k)
    }""",
        b0=RNG.standard_normal(8).astype(np.float32),
        b1=RNG.standard_normal(8).astype(np.float32),
        b2=RNG.standard_normal(10).astype(np.float32),
        **_weights((8, 8), (8, 8), (8, 10)),
    )
    before = to_proto(model)
    assert _run(model) == {"matmuls_merged": 1, "matmuls_removed": 1, "adds_removed": 1}
    assert _ops(model) == ["Add", "Add", "MatMul", "MatMul", "Mul", "Split"]
    cls, y = model.graph.outputs
    producer = model.graph.producer(cls)
    assert producer.op_type == "Add"
    assert model.graph.producer(producer._inputs[0])._inputs[1].const.shape == (8, 10)
    assert model.graph.producer(y).op_type == "Mul"
    (split,) = [op for op in model.graph.ops if op.op_type == "Split"]
    assert split._inputs[1].const.numpy().tolist() == [8, 8]
    assert_models_close(before, model, random_feeds(before, dim=5))


def test_matmuls_whose_results_are_graph_outputs_are_not_merged() -> None:
    model = _model(
        """
    g (float[N, 8] x) => (float[N, 4] q, float[N, 4] k) {
        q = MatMul(x, w0)
        k = MatMul(x, w1)
    }""",
        **_weights((8, 4), (8, 4)),
    )
    assert _run(model) == {}
    assert _ops(model) == ["MatMul", "MatMul"]
