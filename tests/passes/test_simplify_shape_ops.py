"""simplify-shape-ops: known shapes become constants or are computed once; reshape,
transpose and squeeze/unsqueeze chains collapse only when the result is provably the same."""

from __future__ import annotations

import numpy as np
import pytest

from onnxforge.io import to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import EliminateDeadCodePass, SimplifyShapeOpsPass
from onnxforge.testing import assert_models_close, model_from_text, random_feeds

HEADER = '<ir_version: 8, opset_import: ["" : 17]>'


def _run(model: Model) -> dict[str, int]:
    stats = dict(SimplifyShapeOpsPass()(model).stats)
    verify(model)
    EliminateDeadCodePass()(model)
    verify(model)
    return stats


def _ops(model: Model) -> list[str]:
    return [op.op_type for op in model.graph.ops if op.op_type != "Constant"]


def test_shape_and_size_of_a_static_tensor_become_constants() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3] x) => (float[?] y) {
        s0 = Constant <value = int64[1] {0}> ()
        s = Shape(x)
        n = Size(x)
        u = Unsqueeze(n, s0)
        c = Concat <axis = 0> (s, u)
        f = Cast <to = 1> (c)
        y = Add(f, f)
    }"""
    )
    assert _run(model)["made_constant"] == 4
    assert _ops(model) == ["Cast", "Add"]
    (c,) = [v for v in model.graph.initializers if v.name == "c"]
    assert c.const.numpy().tolist() == [2, 3, 6]


def test_gather_of_a_static_dim_of_a_partly_static_shape_becomes_a_constant() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3] x) => (float[N, ?] y) {
        s = Shape(x)
        i = Constant <value = int64[1] {1}> ()
        d = Gather <axis = 0> (s, i)
        z = Constant <value = int64[1] {0}> ()
        t = Concat <axis = 0> (z, d)
        y = Reshape(x, t)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"made_constant": 2}
    assert _ops(model) == ["Reshape"]
    assert_models_close(before, model)


def test_a_reshape_of_a_reshape_reads_the_first_input() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[2, 12] y) {
        a = Constant <value = int64[2] {6, 4}> ()
        r = Reshape(x, a)
        b = Constant <value = int64[2] {2, -1}> ()
        y = Reshape(r, b)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"reshapes_merged": 1}
    assert _ops(model) == ["Reshape"]
    assert model.graph.ops[-1]._inputs[0] is model.graph.inputs[0]
    assert_models_close(before, model)


def test_a_zero_that_copies_a_dim_of_the_first_reshape_blocks_the_merge() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[6, 2, 2] y) {
        a = Constant <value = int64[2] {6, 4}> ()
        r = Reshape(x, a)
        b = Constant <value = int64[3] {0, 2, 2}> ()
        y = Reshape(r, b)
    }"""
    )
    assert _run(model) == {}
    assert _ops(model) == ["Reshape", "Reshape"]


def test_a_zero_copied_through_both_reshapes_allows_the_merge() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 3, 4] x) => (float[N, 4, 3] y) {
        a = Constant <value = int64[2] {0, 12}> ()
        r = Reshape(x, a)
        b = Constant <value = int64[3] {0, 4, 3}> ()
        y = Reshape(r, b)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"reshapes_merged": 1}
    assert _ops(model) == ["Reshape"]
    assert_models_close(before, model)


def test_transposes_compose_and_cancel() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[2, 3, 4] x) => (float[4, 2, 3] y, float[2, 3, 4] z) {
        a = Transpose <perm = [1, 2, 0]> (x)
        y = Transpose <perm = [1, 2, 0]> (a)
        b = Transpose <perm = [0, 2, 1]> (x)
        c = Transpose <perm = [0, 2, 1]> (b)
        z = Relu(c)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"transposes_merged": 1, "transposes_removed": 1}
    assert _ops(model) == ["Transpose", "Relu"]
    assert model.graph.ops[0].attrs["perm"] == [2, 0, 1]
    assert_models_close(before, model)


@pytest.mark.parametrize(
    ("first", "second", "removed"),
    [
        ("Squeeze(x, p1)", "Unsqueeze(a, p1)", True),
        ("Squeeze(x, p1)", "Unsqueeze(a, n3)", True),  # -3 of rank 4 is 1
        ("Squeeze(x, p1)", "Unsqueeze(a, p0)", False),
        ("Unsqueeze(x, p0)", "Squeeze(a, p0)", True),
        ("Unsqueeze(x, n3)", "Squeeze(a, p2)", True),  # -3 of rank 5 is 2
        ("Squeeze(x)", "Unsqueeze(a, p1)", True),  # the only 1 of [2, 1, 3, 4]
    ],
)
def test_squeeze_and_unsqueeze_of_the_same_axes_cancel(
    first: str, second: str, removed: bool
) -> None:
    model = model_from_text(
        HEADER
        + f"""
    g (float[2, 1, 3, 4] x) => (float[?, ?, ?, ?, ?] y) {{
        p0 = Constant <value = int64[1] {{0}}> ()
        p1 = Constant <value = int64[1] {{1}}> ()
        p2 = Constant <value = int64[1] {{2}}> ()
        n3 = Constant <value = int64[1] {{-3}}> ()
        a = {first}
        b = {second}
        y = Relu(b)
    }}"""
    )
    stats = _run(model)
    assert stats == ({"squeeze_pairs_removed": 1} if removed else {})
    assert _ops(model) == (
        ["Relu"] if removed else [first[: first.index("(")], second[: second.index("(")], "Relu"]
    )


def test_consecutive_squeezes_become_one_unsqueezes_stay() -> None:
    """A multi-axis Unsqueeze adding the batch axis is what pnnx misconverts for ncnn."""
    model = model_from_text(
        HEADER
        + """
    g (float[3, 4] x, float[1, 3, 1, 4, 1] w) => (float[1, 3, 1, 4] y, float[3, 4] z) {
        p0 = Constant <value = int64[1] {0}> ()
        m1 = Constant <value = int64[1] {-1}> ()
        p2 = Constant <value = int64[1] {2}> ()
        a = Unsqueeze(x, p0)
        y = Unsqueeze(a, p2)
        b = Squeeze(w, m1)
        c = Squeeze(b, p2)
        z = Squeeze(c, p0)
    }"""
    )
    before = to_proto(model)
    feeds = {
        "x": np.arange(12, dtype=np.float32).reshape(3, 4),
        "w": np.arange(12, dtype=np.float32).reshape(1, 3, 1, 4, 1),
    }
    assert _run(model) == {"squeezes_merged": 2}
    assert _ops(model) == ["Unsqueeze", "Unsqueeze", "Squeeze"]
    first, second, squeeze = [op for op in model.graph.ops if op.op_type != "Constant"]
    assert second._inputs[0] is first._outputs[0]
    assert squeeze._inputs[1].const.numpy().tolist() == [0, 2, 4]
    assert_models_close(before, model, feeds)


def test_opset_11_squeeze_axes_are_attributes() -> None:
    model = model_from_text(
        '<ir_version: 7, opset_import: ["" : 11]>'
        + """
    g (float[3, 4] x) => (float[1, 3, 1, 4] y, float[3, 4] z) {
        a = Unsqueeze <axes = [0]> (x)
        y = Unsqueeze <axes = [2]> (a)
        b = Unsqueeze <axes = [-1]> (x)
        c = Squeeze <axes = [2]> (b)
        z = Relu(c)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"squeeze_pairs_removed": 1}
    assert _ops(model) == ["Unsqueeze", "Unsqueeze", "Relu"]
    assert [op.attrs["axes"] for op in model.graph.ops[:2]] == [[0], [2]]
    assert_models_close(before, model)


def test_equal_symbolic_shapes_are_computed_once() -> None:
    model = model_from_text(
        HEADER
        + """
    g (float[N, 4] x) => (float[N, 4] y) {
        r = Relu(x)
        s = Shape(x)
        t = Shape(r)
        a = Expand(x, s)
        b = Expand(r, t)
        y = Add(a, b)
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {"values_merged": 1}
    assert _ops(model) == ["Relu", "Shape", "Expand", "Expand", "Add"]
    assert_models_close(before, model)


def test_the_shape_of_a_growing_loop_carried_value_stays_computed() -> None:
    model = model_from_text(
        HEADER
        + """
    g (int64 n, float[2] x) => (float[?] y) {
        t = Constant <value = bool {1}> ()
        y = Loop(n, t, x) <body = b (int64 i, bool c, float[?] v) => (bool co, float[?] vo) {
            co = Identity(c)
            r = Relu(v)
            q = Shape(r)
            s = Shape(v)
            k = Reshape(r, q)
            w = Reshape(v, s)
            vo = Concat <axis = 0> (w, k)
        }>
    }"""
    )
    before = to_proto(model)
    assert _run(model) == {}
    body = model.graph.ops[-1].attrs["body"]
    assert [op.op_type for op in body.ops].count("Shape") == 2
    feeds = {"n": np.array(3), "x": np.array([1.0, -2.0], np.float32)}
    assert_models_close(before, model, feeds)


@pytest.mark.parametrize(
    ("x", "target", "constant"),
    [
        ("float[N, 3, 4]", "Concat <axis = 0> (n, twelve)", [0, 12]),
        ("float[N, 3, 4]", "Concat <axis = 0> (rest, n)", [3, 4, -1]),
        ("float[N, M, 4]", "Concat <axis = 0> (m, n, four)", None),  # two symbols move
    ],
)
def test_a_computed_reshape_target_known_but_for_symbols_becomes_constant(
    x: str, target: str, constant: list[int] | None
) -> None:
    model = model_from_text(
        HEADER
        + f"""
    g ({x} x) => (float[?, ?, ?] y) {{
        s = Shape(x)
        n = Shape <start = 0, end = 1> (x)
        m = Shape <start = 1, end = 2> (x)
        rest = Shape <start = 1> (x)
        twelve = Constant <value = int64[1] {{12}}> ()
        four = Constant <value = int64[1] {{4}}> ()
        t = {target}
        y = Reshape(x, t)
    }}"""
    )
    before = to_proto(model)
    stats = _run(model)
    assert stats.get("reshape_targets_made_constant", 0) == (constant is not None)
    if constant is not None:
        assert _ops(model) == ["Reshape"]
        assert model.graph.ops[-1]._inputs[1].const.numpy().tolist() == constant
    assert_models_close(before, model, random_feeds(before, dim=5))


@pytest.mark.parametrize(
    ("recurrent", "layout", "first"),
    [
        (
            'LSTM <hidden_size = 2, direction = "bidirectional"> (x, w, r)',
            "p = Transpose <perm = [0, 2, 1, 3]> (y)\n        s = Reshape(p, zz)",
            "Reshape",
        ),
        ("GRU <hidden_size = 4> (x, w, r)", "s = Squeeze(y, one)", "Squeeze"),
    ],
    ids=["lstm-transpose-reshape", "gru-squeeze"],
)
def test_the_op_laying_out_a_recurrent_output_stays_before_a_reshape(
    recurrent: str, layout: str, first: str
) -> None:
    """pnnx rebuilds nn.LSTM / nn.GRU from Y -> Transpose(0, 2, 1, 3) -> Reshape(0, 0, -1)
    or Y -> Squeeze(1); without them it leaves an ONNX LSTM that ncnn cannot load."""
    lstm = recurrent.startswith("LSTM")
    w_shape, r_shape = ((2, 8, 2), (2, 8, 2)) if lstm else ((1, 12, 2), (1, 12, 4))
    rng = np.random.default_rng(0)
    model = model_from_text(
        HEADER
        + f"""
    g (float[3, 1, 2] x) => (float[3, 4] z) {{
        y = {recurrent}
        {layout}
        z = Reshape(s, t)
    }}""",
        w=rng.standard_normal(w_shape).astype(np.float32),
        r=rng.standard_normal(r_shape).astype(np.float32),
        zz=np.array([0, 0, -1], dtype=np.int64),
        one=np.array([1], dtype=np.int64),
        t=np.array([3, 4], dtype=np.int64),
    )
    before = to_proto(model)
    assert "reshapes_merged" not in _run(model)
    *_, middle, last = model.graph.topo_order()
    assert (middle.op_type, last.op_type) == (first, "Reshape")
    assert last._inputs[0] is middle._outputs[0]
    assert middle._inputs[0] is not model.graph.inputs[0]
    assert_models_close(before, model)


def test_a_reshape_after_a_recurrent_state_output_still_merges() -> None:
    """Only Y is laid out for the framework's layer: Y_h is [directions, batch, hidden]."""
    rng = np.random.default_rng(0)
    model = model_from_text(
        HEADER
        + """
    g (float[3, 1, 2] x) => (float[4] z) {
        y, h = GRU <hidden_size = 2, direction = "bidirectional"> (x, w, r)
        s = Reshape(h, a)
        z = Reshape(s, b)
    }""",
        w=rng.standard_normal((2, 6, 2)).astype(np.float32),
        r=rng.standard_normal((2, 6, 2)).astype(np.float32),
        a=np.array([2, 2], dtype=np.int64),
        b=np.array([-1], dtype=np.int64),
    )
    before = to_proto(model)
    assert _run(model) == {"reshapes_merged": 1}
    assert _ops(model) == ["GRU", "Reshape"]
    assert_models_close(before, model)


def test_the_squeeze_laying_out_a_recurrent_output_stays_out_of_a_squeeze_chain() -> None:
    """Y -> Squeeze(1) is what pnnx matches for nn.GRU; a batch-1 export squeezes once more."""
    rng = np.random.default_rng(0)
    model = model_from_text(
        HEADER
        + """
    g (float[3, 1, 2] x, float[2, 1, 1] v) => (float[3, 4] z, float[2] u) {
        y = GRU <hidden_size = 4> (x, w, r)
        s = Squeeze(y, one)
        z = Squeeze(s, one)
        a = Squeeze(v, one)
        u = Squeeze(a, one)
    }""",
        w=rng.standard_normal((1, 12, 2)).astype(np.float32),
        r=rng.standard_normal((1, 12, 4)).astype(np.float32),
        one=np.array([1], dtype=np.int64),
    )
    before = to_proto(model)
    assert _run(model) == {"squeezes_merged": 1}  # v's chain, not y's
    squeezes = [op for op in model.graph.ops if op.op_type == "Squeeze"]
    assert len(squeezes) == 3
    assert_models_close(before, model)
