"""eliminate-identity: Identity, inference Dropout and ops that leave their input unchanged
go; graph outputs keep their names; what changes the value or the shape stays."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import EliminateIdentityPass
from onnxforge.testing import assert_models_close, model_from_text, run_onnxruntime

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _run(model: Model) -> dict[str, int]:
    stats = dict(EliminateIdentityPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops]


def test_a_chain_of_identities_goes_and_readers_read_the_source() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) {
        a = Identity(x)
        b = Identity(a)
        y = Relu(b)
    }"""
    )
    assert _run(model) == {"removed.Identity": 2}
    assert _ops(model) == ["Relu"]
    assert model.graph.ops[0]._inputs[0] is model.graph.inputs[0]


def test_a_graph_output_keeps_its_name_when_the_source_is_computed() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y) {
        r = Relu(x)
        y = Identity(r)
    }"""
    )
    assert _run(model) == {"removed.Identity": 1}
    assert _ops(model) == ["Relu"]
    assert [v.name for v in model.graph.outputs] == ["y"]
    assert model.graph.outputs[0].type is not None


def test_an_identity_from_an_input_or_to_a_second_output_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x) => (float[2] y, float[2] r, float[2] z) {
        y = Identity(x)
        r = Relu(x)
        z = Identity(r)
    }"""
    )
    assert _run(model) == {"kept.graph_output": 2}
    assert _ops(model) == ["Identity", "Relu", "Identity"]


def test_inference_dropout_goes_unless_its_mask_is_read_or_it_trains() -> None:
    model = model_from_text(
        '<ir_version: 8, opset_import: ["" : 13]>'
        + """
    g (float[2, 3] x) => (float[2, 3] y, bool[2, 3] m, float[2, 3] t) {
        a = Dropout(x)
        y = Relu(a)
        r = Constant <value = float {0.5}> ()
        b, m = Dropout(x, r)
        on = Constant <value = bool {1}> ()
        t = Dropout(x, r, on)
    }"""
    )
    assert _run(model) == {"removed.Dropout": 1}
    assert _ops(model) == ["Relu", "Constant", "Dropout", "Constant", "Dropout"]


def test_a_training_dropout_of_ratio_0_goes_as_onnxruntime_computes_it() -> None:
    text = (
        '<ir_version: 8, opset_import: ["" : 13]>'
        + """
    g (float[2, 3] x) => (float[2, 3] y, float[2, 3] t) {
        on = Constant <value = bool {1}> ()
        zero = Constant <value = float {0.0}> ()
        a = Dropout(x, zero, on)
        y = Relu(a)
        half = Constant <value = float {0.5}> ()
        t = Dropout(x, half, on)
    }"""
    )
    model = model_from_text(text)
    assert _run(model) == {"removed.Dropout": 1}
    assert [o.op_type for o in model.graph.ops if o.op_type != "Constant"] == ["Relu", "Dropout"]
    feeds = {"x": np.random.default_rng(0).standard_normal((2, 3)).astype(np.float32)}
    want = run_onnxruntime(to_proto(model_from_text(text)), feeds)[0]
    np.testing.assert_array_equal(run_onnxruntime(to_proto(model), feeds)[0], want)


def test_dropout_7_in_an_opset_9_model_goes() -> None:
    model = model_from_text(
        '<ir_version: 4, opset_import: ["" : 9]>'
        + """
    g (float[2] x) => (float[2] y) { a = Dropout <ratio = 0.3> (x)  y = Relu(a) }"""
    )
    assert _run(model) == {"removed.Dropout": 1}
    assert _ops(model) == ["Relu"]


def test_a_cast_to_the_same_dtype_goes_and_a_real_cast_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2] x, int64[2] i) => (float[2] y) {
        a = Cast <to = 1> (x)
        b = Cast <to = 1> (i)
        c = CastLike(a, x)
        y = Add(c, b)
    }"""
    )
    assert _run(model) == {"removed.Cast": 1, "removed.CastLike": 1}
    assert _ops(model) == ["Cast", "Add"]


def test_a_reshape_to_the_input_shape_goes_with_zero_and_minus_one() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3, 4] x) => (float[N, 3, 4] y, float[N, 12] z) {
        s = Constant <value = int64[3] {0, 3, -1}> ()
        a = Reshape(x, s)
        y = Relu(a)
        t = Constant <value = int64[2] {0, 12}> ()
        z = Reshape(x, t)
    }"""
    )
    assert _run(model) == {"removed.Reshape": 1}
    assert _ops(model) == ["Constant", "Relu", "Constant", "Reshape"]


def test_an_expand_to_a_shape_x_has_goes_and_a_broadcasting_one_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3] x) => (float[N, 3] y, float[2, N, 3] z) {
        s = Constant <value = int64[1] {3}> ()
        a = Expand(x, s)
        y = Relu(a)
        t = Constant <value = int64[3] {2, 1, 1}> ()
        z = Expand(x, t)
    }"""
    )
    assert _run(model) == {"removed.Expand": 1}
    assert _ops(model) == ["Constant", "Relu", "Constant", "Expand"]


def test_an_expand_by_the_input_own_shape_goes() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3] x) => (float[N, 3] y) {
        s = Shape(x)
        a = Expand(x, s)
        y = Relu(a)
    }"""
    )
    assert _run(model) == {"removed.Expand": 1}
    assert _ops(model) == ["Shape", "Relu"]


def test_identity_transpose_full_slice_and_zero_pad_go_but_a_reversing_slice_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3] x) => (float[N, 3] y, float[N, 3] z) {
        a = Transpose <perm = [0, 1]> (x)
        st = Constant <value = int64[2] {0, -3}> ()
        en = Constant <value = int64[2] {9223372036854775807, 3}> ()
        b = Slice(a, st, en)
        p = Constant <value = int64[4] {0, 0, 0, 0}> ()
        c = Pad(b, p)
        y = Relu(c)
        s1 = Constant <value = int64[1] {-1}> ()
        e1 = Constant <value = int64[1] {-4}> ()
        ax = Constant <value = int64[1] {1}> ()
        z = Slice(x, s1, e1, ax, s1)
    }"""
    )
    stats = _run(model)
    assert stats == {"removed.Transpose": 1, "removed.Slice": 1, "removed.Pad": 1}
    assert [op.op_type for op in model.graph.ops if op.op_type != "Constant"] == [
        "Relu",
        "Slice",
    ]


def test_opset_9_slice_and_pad_attributes_are_read() -> None:
    model = model_from_text(
        '<ir_version: 4, opset_import: ["" : 9]>'
        + """
    g (float[2, 3] x) => (float[2, 3] y) {
        a = Slice <starts = [0], ends = [3], axes = [1]> (x)
        b = Pad <pads = [0, 0, 0, 0]> (a)
        y = Relu(b)
    }"""
    )
    assert _run(model) == {"removed.Slice": 1, "removed.Pad": 1}
    assert _ops(model) == ["Relu"]


def test_a_squeeze_with_nothing_to_squeeze_and_an_unsqueeze_of_no_axes_go() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] x, float[1, 3] w) => (float[2, 3] y, float[3] z) {
        a = Squeeze(x)
        y = Relu(a)
        z = Squeeze(w)
    }"""
    )
    assert _run(model) == {"removed.Squeeze": 1}
    assert _ops(model) == ["Relu", "Squeeze"]


@pytest.mark.parametrize(
    ("body", "removed"),
    [
        ("c = Constant <value = float[3] {0, 0, 0}> ()  a = Add(c, x)", True),
        ("c = Constant <value = float {0}> ()  a = Sub(x, c)", True),
        ("c = Constant <value = float {0}> ()  a = Sub(c, x)", False),
        ("c = Constant <value = float[1, 3] {1, 1, 1}> ()  a = Mul(x, c)", True),
        ("c = Constant <value = float {1}> ()  a = Div(x, c)", True),
        ("c = Constant <value = float {1}> ()  a = Div(c, x)", False),
        ("c = Constant <value = float[2, 3] {1, 1, 1, 1, 1, 1}> ()  a = Mul(x, c)", False),
        ("c = Constant <value = float[1, 1, 3] {0, 0, 0}> ()  a = Add(x, c)", False),
        ("c = Constant <value = float {0.5}> ()  a = Mul(x, c)", False),
    ],
)
def test_neutral_constants_go_only_when_the_shape_stays(body: str, removed: bool) -> None:
    model = model_from_text(
        HEADER
        + f"""
    g (float[N, 3] x) => (float[?, ?, ?] y) {{
        {body}
        y = Relu(a)
    }}"""
    )
    before = to_proto(model)
    stats = EliminateIdentityPass()(model).stats
    verify(model)
    assert bool(stats) == removed
    op_type = body.split("a = ")[1].split("(", maxsplit=1)[0]
    left = [op.op_type for op in model.graph.ops if op.op_type != "Constant"]
    assert left == (["Relu"] if removed else [op_type, "Relu"])
    feeds = {"x": np.arange(6, dtype=np.float32).reshape(2, 3) - 2.0}
    assert_models_close(before, model, feeds)


def test_and_with_true_and_or_with_false_go() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool[3] x) => (bool[3] y) {
        t = Constant <value = bool {1}> ()
        f = Constant <value = bool[3] {0, 0, 0}> ()
        a = And(t, x)
        b = Or(a, f)
        y = Not(b)
    }"""
    )
    assert _run(model) == {"removed.And": 1, "removed.Or": 1}
    assert _ops(model) == ["Constant", "Constant", "Not"]


def test_identities_in_branches_go_and_captured_values_are_followed() -> None:
    model = model_from_text(
        HEADER
        + """
    g (bool c, float[2] x) => (float[2] y) {
        k = Identity(x)
        y = If(c) <
            then_branch = t () => (float[2] a) { i = Identity(k)  a = Neg(i) },
            else_branch = e () => (float[2] b) { b = Identity(k) }
        >
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"removed.Identity": 2, "kept.graph_output": 1}
    assert _ops(model) == ["If"]
    then_branch, else_branch = model.graph.ops[0].subgraphs()
    assert [op.op_type for op in then_branch.ops] == ["Neg"]
    assert then_branch.ops[0]._inputs[0] is model.graph.inputs[1]
    assert [op.op_type for op in else_branch.ops] == ["Identity"]  # a captured value: kept
    x = np.array([-1.0, 2.0], np.float32)
    for cond in (True, False):
        assert_models_close(before, model, {"c": np.array(cond), "x": x})


def test_optimized_model_computes_the_same_on_onnxruntime() -> None:
    pytest.importorskip("onnxruntime")
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3, 4] x) => (float[N, 3, 4] y) {
        a = Identity(x)
        s = Constant <value = int64[3] {0, 3, -1}> ()
        b = Reshape(a, s)
        c = Cast <to = 1> (b)
        z = Constant <value = float[4] {0, 0, 0, 0}> ()
        d = Add(c, z)
        e = Transpose <perm = [0, 1, 2]> (d)
        f = Dropout(e)
        y = Tanh(f)
    }"""
    )
    before = to_proto(model)
    assert sum(_run(model).values()) == 6
    assert _ops(model) == ["Constant", "Constant", "Tanh"]
    assert_models_close(before, model)


def test_a_concat_with_an_empty_part_computed_from_the_batch_goes() -> None:
    """brainmaze's spindle detector: pnnx writes the empty part as a (2, 0, 1) MemoryData
    that ncnn cannot load."""
    model = model_from_text(
        HEADER
        + """
    g (float[N, 5, 1] x) => (float[N, 5, 1] y) {
        r = Relu(x)
        s = Shape(x)
        n = Gather <axis = 0> (s, zero)
        u = Unsqueeze(n, axes)
        t = Concat <axis = 0> (u, axes, one)
        c = ConstantOfShape(t)
        e = Mul(c, big)
        y = Concat <axis = 1> (r, e)
    }""",
        zero=np.array(0, dtype=np.int64),
        axes=np.array([0], dtype=np.int64),
        one=np.array([1], dtype=np.int64),
        big=np.array(-1e9, dtype=np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"dropped.Concat_inputs": 1, "removed.Concat": 1}
    assert model.graph.producer(model.graph.outputs[0]).op_type == "Relu"
    assert model.graph.outputs[0].name == "y"
    (mul,) = [op for op in model.graph.ops if op.op_type == "Mul"]
    assert not model.graph.is_used(mul._outputs[0])  # left for eliminate-dead-code
    assert_models_close(before, model)


def test_empty_parts_of_a_concat_are_dropped_and_the_rest_stays() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] a, float[2, 0] e, float[2, 4] b, float[2, N] s) => (float[2, ?] y) {
        y = Concat <axis = -1> (a, e, b, e, s)
    }"""
    )
    feeds = {
        "a": np.ones((2, 3), np.float32),
        "e": np.zeros((2, 0), np.float32),
        "b": np.full((2, 4), 2, np.float32),
        "s": np.full((2, 5), 3, np.float32),
    }
    before = to_proto(model)
    assert _run(model) == {"dropped.Concat_inputs": 1}
    (concat,) = model.graph.ops
    assert [v.name for v in concat._inputs] == ["a", "b", "s"]
    assert_models_close(before, model, feeds)


def test_a_concat_of_only_empty_parts_keeps_the_first() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[0, 3] x, float[0, 3] z) => (float[0, 3] y) {
        r = Relu(x)
        y = Concat <axis = 0> (r, z)
    }"""
    )
    assert _run(model) == {"dropped.Concat_inputs": 1, "removed.Concat": 1}
    assert _ops(model) == ["Relu"]
    assert model.graph.ops[0]._inputs[0] is model.graph.inputs[0]


@pytest.mark.parametrize(
    ("opset", "split"),
    [(11, "Split <axis = 0> (x)"), (13, "Split <axis = 0> (x, n)"),
     (18, "Split <axis = 0, num_outputs = 1> (x)")],
)  # fmt: skip
def test_a_split_into_one_output_goes(opset: int, split: str) -> None:
    """onnx2torch hands the reader of a one-output Split a tuple (a DTLN export's unstack)."""
    model = model_from_text(
        f'<ir_version: 8, opset_import: ["" : {opset}]>'
        + f"""
    g (float[2, 3] x) => (float[2, 3] y) {{
        n = Constant <value = int64[1] {{2}}> ()
        s = {split}
        y = Relu(s)
    }}"""
    )
    before = to_proto(model)
    assert _run(model) == {"removed.Split": 1}
    relu = next(op for op in model.graph.ops if op.op_type == "Relu")
    assert relu._inputs[0] is model.graph.inputs[0]
    assert_models_close(before, model)
