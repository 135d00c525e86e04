"""convert-precision: every converted model passes onnx's full check, runs in onnxruntime (or,
for bfloat16 ops its CPU provider lacks, onnx's reference evaluator) and computes the float32
original within HALF_TOLERANCE of each output's range; one test per failure class of issue 28."""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from onnxforge import ir
from onnxforge.api._mixed_precision import Chosen
from onnxforge.io import to_proto
from onnxforge.ir import DType, Model
from onnxforge.passes import ConvertPrecisionPass, PassManager, Report
from onnxforge.passes.convert_precision import convert_array
from onnxforge.testing import model_from_text, run_onnxruntime

pytest.importorskip("onnxruntime")

HALF_TOLERANCE = 1e-2
"""The documented tolerance for half types: largest absolute error at most 1e-2 of the range
of the float32 output (its largest magnitude when it is constant)."""
FLOAT16_LOWEST = float(np.finfo(np.float16).min)


def _convert(
    model: Model, dtype: str = "float16", **options: object
) -> tuple[Report, onnx.ModelProto]:
    report = PassManager([ConvertPrecisionPass(dtype, **options)], verify_each=True).run(model)  # type: ignore[arg-type]
    ir.verify(model)
    proto = to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    stored = options.get("weights_only") or options.get("store_kept_weights")
    _assert_clean(proto, weights_only=bool(stored))
    return report, proto


def _assert_clean(proto: onnx.ModelProto, *, weights_only: bool = False) -> None:
    """No Cast of a constant (but weights_only's), no Cast pair that undoes itself, nodes in
    topological order."""
    for graph in _graphs(proto.graph):
        constants = {i.name for i in graph.initializer}
        constants |= {n.output[0] for n in graph.node if n.op_type == "Constant"}
        made = {o: n for n in graph.node for o in n.output}
        seen = {i.name for i in graph.input} | {i.name for i in graph.initializer}
        for node in graph.node:
            if node.op_type == "Cast":
                assert weights_only or node.input[0] not in constants, node.input[0]
                inner = made.get(node.input[0])
                assert inner is None or inner.op_type != "Cast" or _undoes(inner, node) is False
            for name in node.input:
                assert not name or name in seen or name not in made, f"{name} read before made"
            seen.update(node.output)


def _undoes(inner: onnx.NodeProto, outer: onnx.NodeProto) -> bool:
    wider = {TensorProto.FLOAT16: {1, 11}, TensorProto.BFLOAT16: {1, 11}}
    to = {a.name: a.i for a in inner.attribute}["to"]
    back = {a.name: a.i for a in outer.attribute}["to"]
    return to in wider.get(back, set())


def _graphs(graph: onnx.GraphProto) -> list[onnx.GraphProto]:
    found = [graph]
    for node in graph.node:
        for a in node.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                found += _graphs(a.g)
    return found


def _assert_close(expected: Sequence[Any], got: Sequence[Any], tolerance: float) -> None:
    for a, b in zip(expected, got, strict=True):
        want = np.asarray(a, dtype=np.float64)
        have = np.asarray(b, dtype=np.float64)
        assert np.isfinite(have).all()
        span = float(want.max() - want.min()) or float(np.abs(want).max()) or 1.0
        np.testing.assert_allclose(have, want, rtol=0, atol=tolerance * span)


def _reference(proto: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> list[Any]:
    """onnx's reference evaluator: it runs bfloat16 ops onnxruntime's CPU provider lacks."""
    out = ReferenceEvaluator(proto).run(None, feeds)
    assert isinstance(out, list)
    return out


def _ops(proto: onnx.ModelProto) -> Counter[str]:
    return Counter(n.op_type for g in _graphs(proto.graph) for n in g.node)


def _node(proto: onnx.ModelProto, name: str) -> onnx.NodeProto:
    return next(n for n in proto.graph.node if n.name == name)


def _reads(proto: onnx.ModelProto, output: str) -> list[str]:
    return list(next(n for n in proto.graph.node if output in n.output).input)


def _dtype(proto: onnx.ModelProto, name: str) -> int:
    for vi in [*proto.graph.input, *proto.graph.output, *proto.graph.value_info]:
        if vi.name == name:
            return vi.type.tensor_type.elem_type
    for init in proto.graph.initializer:
        if init.name == name:
            return init.data_type
    raise KeyError(name)


ATTENTION = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,4] q, bool[2,4] mask) => (float[2,4] y) {
    m = Cast <to = 1> (mask)
    one = Constant <value = float {1.0}> ()
    inv = Sub (one, m)
    big = Constant <value = float {-1e9}> ()
    fill = Mul (inv, big)
    s = Add (q, fill)
    y = Softmax <axis = -1> (s)
}"""
ATTENTION_FEEDS = {
    "q": np.random.default_rng(0).standard_normal((2, 4)).astype(np.float32),
    "mask": np.array([[1, 1, 0, 0], [1, 0, 1, 0]], dtype=bool),
}


def test_a_cast_to_float_inside_the_graph_casts_to_the_new_type() -> None:
    original = to_proto(model_from_text(ATTENTION))
    model = model_from_text(ATTENTION)
    report, proto = _convert(model)
    cast = next(n for n in proto.graph.node if n.input == ["mask"])
    assert cast.attribute[0].i == TensorProto.FLOAT16
    assert report.rows[0].stats["type_attributes_changed"] == 1
    _assert_close(
        run_onnxruntime(original, ATTENTION_FEEDS),
        run_onnxruntime(proto, ATTENTION_FEEDS),
        HALF_TOLERANCE,
    )


def test_a_minus_1e9_mask_fill_becomes_float16s_lowest_finite_value() -> None:
    model = model_from_text(ATTENTION)
    report, proto = _convert(model)
    big = next(n for n in proto.graph.node if n.output == ["big"])
    value = onnx.numpy_helper.to_array(big.attribute[0].t)
    assert value.dtype == np.float16 and float(value) == FLOAT16_LOWEST
    assert report.details("convert-precision", "constants_clamped") == [
        "big: 1 value(s) clamped to ±65504"
    ]
    (y,) = run_onnxruntime(proto, ATTENTION_FEEDS)
    assert np.isfinite(y).all() and (y[ATTENTION_FEEDS["mask"] == 0] == 0).all()


def test_float32_min_and_minus_3_4e38_fills_clamp_and_infinities_stay() -> None:
    fills = np.array([np.finfo(np.float32).min, -3.4e38, -np.inf, 7e4, 1.5], dtype=np.float32)
    half, clamped = convert_array(fills, DType.FLOAT16)
    assert clamped == 3
    assert half.tolist() == [FLOAT16_LOWEST, FLOAT16_LOWEST, -np.inf, 65504.0, 1.5]
    brain, clamped = convert_array(fills, DType.BFLOAT16)
    assert clamped == 2 and np.isfinite(brain[:2].astype(np.float32)).all()


RESIZE = """<ir_version: 10, opset_import: ["" : 18]>
g (float[1,1,2,2] x) => (float[1,1,4,4] y) {
    y = Resize <mode = "linear"> (x, , scales)
}"""


def test_resize_scales_stay_float32_while_the_data_is_converted() -> None:
    scales = np.array([1, 1, 2, 2], dtype=np.float32)
    model = model_from_text(RESIZE, scales=scales)
    report, proto = _convert(model, keep_io_types=False)
    assert _dtype(proto, "scales") == TensorProto.FLOAT
    assert _dtype(proto, "x") == TensorProto.FLOAT16 == _dtype(proto, "y")
    assert "Cast" not in _ops(proto)
    x = np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2)
    (want,) = run_onnxruntime(to_proto(model_from_text(RESIZE, scales=scales)), {"x": x})
    (got,) = run_onnxruntime(proto, {"x": x.astype(np.float16)})
    _assert_close([want], [got], HALF_TOLERANCE)


def test_arithmetic_that_only_makes_resize_scales_stays_float32() -> None:
    """A scale computed in half and cast back holds 3 digits: 2.998 x 1.00066 = 2.99998 makes a
    2 x 2 image 5 x 5 (floor of 5.99996); in half it is 3.0, and the image 6 x 6."""
    text = """<ir_version: 10, opset_import: ["" : 18]>
g (float[1, 1, 2, 2] x, float[2] f) => (float[1, 1, 5, 5] y) {
    ones = Constant <value = float[2] {1, 1}> ()
    k = Constant <value = float {1.00066}> ()
    grown = Mul (f, k)
    scales = Concat <axis = 0> (ones, grown)
    y = Resize <mode = "linear"> (x, , scales)
}"""
    report, proto = _convert(model_from_text(text))
    kept = report.details("convert-precision", "kept_float32")
    assert len(kept) == 2 and all("its values feed only float32 inputs" in n for n in kept), kept
    mul = next(n for n in proto.graph.node if n.op_type == "Mul")
    assert mul.input[0] == "f"  # the float32 input read as it is: no Cast to half and back
    resize = next(n for n in proto.graph.node if n.op_type == "Resize")
    assert resize.input[2] == "scales"  # read as made: no Cast between
    feeds = {
        "x": np.arange(4, dtype=np.float32).reshape(1, 1, 2, 2),
        "f": np.full(2, 2.998, np.float32),
    }
    (want,) = run_onnxruntime(to_proto(model_from_text(text)), feeds)
    (got,) = run_onnxruntime(proto, feeds)
    assert got.shape == want.shape == (1, 1, 5, 5)
    _assert_close([want], [got], HALF_TOLERANCE)


CONCAT = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,3] x) => (float[4,3] y) {
    c = Constant <value = float[2,3] {1, 2, 3, 4, 5, 6}> ()
    joined = Concat <axis = 0> (x, c)
    y = Relu (joined)
}"""


def test_a_concat_of_a_float32_input_and_a_constant_reads_one_type() -> None:
    model = model_from_text(CONCAT)
    _, proto = _convert(model)
    concat = next(n for n in proto.graph.node if n.op_type == "Concat")
    cast = next(n for n in proto.graph.node if n.output[0] == concat.input[0])
    assert cast.op_type == "Cast" and cast.input == ["x"]
    const = next(n for n in proto.graph.node if n.output[0] == concat.input[1])
    assert const.attribute[0].t.data_type == TensorProto.FLOAT16
    x = np.arange(6, dtype=np.float32).reshape(2, 3) - 2
    _assert_close(
        run_onnxruntime(to_proto(model_from_text(CONCAT)), {"x": x}),
        run_onnxruntime(proto, {"x": x}),
        HALF_TOLERANCE,
    )


INPUT_ORDER = """<ir_version: 10, opset_import: ["" : 18]>
g (float[3] a, float[3] b, float[3] c) => (float[3] y) {
    ab = Mul (a, b)
    abc = Add (ab, c)
    y = Tanh (abc)
}"""


def test_graph_inputs_are_cast_before_their_readers_in_the_written_order() -> None:
    model = model_from_text(INPUT_ORDER)
    _, proto = _convert(model)
    order = [n.op_type for n in proto.graph.node]
    assert order.count("Cast") == 4  # three inputs in, one output back
    position = {o: i for i, n in enumerate(proto.graph.node) for o in n.output}
    for i, node in enumerate(proto.graph.node):
        assert all(position.get(name, -1) < i for name in node.input)
    assert proto.graph.node[-1].op_type == "Cast" and proto.graph.node[-1].output == ["y"]
    feeds = {k: np.linspace(-s, s, 3, dtype=np.float32) for k, s in (("a", 1), ("b", 2), ("c", 3))}
    _assert_close(
        run_onnxruntime(to_proto(model_from_text(INPUT_ORDER)), feeds),
        run_onnxruntime(proto, feeds),
        HALF_TOLERANCE,
    )


LAYER_NORM = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x) => (float[2,8] y) {
    h = Mul (x, k)
    n = LayerNormalization <axis = -1, epsilon = 1e-12> (h, scale, bias)
    y = Relu (n)
}"""
LAYER_NORM_WEIGHTS = {
    "k": np.full(8, 0.5, dtype=np.float32),
    "scale": np.linspace(0.5, 1.5, 8, dtype=np.float32),
    "bias": np.linspace(-0.1, 0.1, 8, dtype=np.float32),
}


def test_a_layer_norm_with_a_1e_12_epsilon_stays_float32_and_says_so() -> None:
    model = model_from_text(LAYER_NORM, **LAYER_NORM_WEIGHTS)
    node = next(op for op in model.graph.ops if op.op_type == "LayerNormalization")
    node.name = "ln"
    report, proto = _convert(model)
    (kept,) = report.details("convert-precision", "kept_float32")
    assert kept.startswith("ln: epsilon 1e-12 is below float16's smallest")
    assert _dtype(proto, "scale") == TensorProto.FLOAT == _dtype(proto, "bias")
    assert _dtype(proto, "k") == TensorProto.FLOAT16
    x = np.ones((2, 8), dtype=np.float32)  # constant rows: the variance is 0, only eps is left
    x[1] = np.linspace(-3, 3, 8)
    want = run_onnxruntime(to_proto(model_from_text(LAYER_NORM, **LAYER_NORM_WEIGHTS)), {"x": x})
    _assert_close(want, run_onnxruntime(proto, {"x": x}), HALF_TOLERANCE)
    _assert_close(want, _reference(proto, {"x": x}), HALF_TOLERANCE)


def test_a_layer_norm_with_the_default_epsilon_is_converted() -> None:
    text = LAYER_NORM.replace("epsilon = 1e-12", "epsilon = 1e-5")
    model = model_from_text(text, **LAYER_NORM_WEIGHTS)
    report, proto = _convert(model)
    assert report.details("convert-precision", "kept_float32") == []
    assert _dtype(proto, "scale") == TensorProto.FLOAT16


BATCH_NORM = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,3,4,4] x) => (float[2,3,4,4] y) {
    c = Conv (x, w)
    n = BatchNormalization (c, scale, bias, mean, var)
    y = Relu (n)
}"""


def test_a_batch_norm_whose_variance_float16_cannot_hold_stays_float32_unclamped() -> None:
    """PP-OCRv3's text detectors hold BatchNormalization variances of up to 4.8e7: clamped to
    65504, a channel is scaled 27 times over for every input, so the op stays float32 with
    its parameters as they are, and the Conv before it still converts (a clamp is for fills
    and masks, whose values past the range only saturate)."""
    rng = np.random.default_rng(3)
    weights = {
        "w": rng.standard_normal((3, 3, 1, 1)).astype(np.float32) * 1000,
        "scale": np.ones(3, np.float32),
        "bias": np.zeros(3, np.float32),
        "mean": np.zeros(3, np.float32),
        "var": np.array([1.0, 4.8e7, 1e6], np.float32),
    }
    model = model_from_text(BATCH_NORM, **weights)
    next(op for op in model.graph.ops if op.op_type == "BatchNormalization").name = "bn"
    report, proto = _convert(model)
    (kept,) = report.details("convert-precision", "kept_float32")
    assert kept == "bn: its parameter 'var' holds values up to 4.8e+07, past float16's 65504"
    assert report.details("convert-precision", "constants_clamped") == []
    assert _dtype(proto, "var") == TensorProto.FLOAT and _dtype(proto, "w") == TensorProto.FLOAT16
    x = rng.standard_normal((2, 3, 4, 4)).astype(np.float32)
    want = run_onnxruntime(to_proto(model_from_text(BATCH_NORM, **weights)), {"x": x})
    _assert_close(want, run_onnxruntime(proto, {"x": x}), HALF_TOLERANCE)
    _assert_close(want, _reference(proto, {"x": x}), HALF_TOLERANCE)
    stored = model_from_text(BATCH_NORM, **weights)
    report, proto = _convert(stored, weights_only=True, min_elements=3)
    assert report.details("convert-precision", "weights_kept_float32") == [
        "var: values past float16's 65504"
    ]
    assert report.details("convert-precision", "constants_clamped") == []
    assert _dtype(proto, "var") == TensorProto.FLOAT
    assert set(report.details("convert-precision", "weights_compressed")) == {
        "w", "scale", "bias", "mean"
    }  # fmt: skip
    _assert_close(want, run_onnxruntime(proto, {"x": x}), 1e-3)


LOOP = """<ir_version: 10, opset_import: ["" : 18]>
g (float[3] x, int64 trip) => (float[3] y, float[N,3] steps) {
    cond = Constant <value = bool {1}> ()
    y, steps = Loop (trip, cond, x) <body = body (int64 i, bool c, float[3] a)
                                      => (bool co, float[3] b, float[3] s) {
        co = Identity (c)
        half = Constant <value = float {0.5}> ()
        scaled = Mul (a, half)
        b = Add (scaled, w)
        s = Identity (b)
    }>
}"""


def test_a_loop_body_computes_in_the_new_type_and_reads_the_outer_weight_as_converted() -> None:
    w = np.array([1.0, -2.0, 3.0], dtype=np.float32)
    model = model_from_text(LOOP, w=w)
    _, proto = _convert(model)
    loop = next(n for n in proto.graph.node if n.op_type == "Loop")
    body = loop.attribute[0].g
    assert [i.type.tensor_type.elem_type for i in body.input] == [7, 9, TensorProto.FLOAT16]
    assert [o.type.tensor_type.elem_type for o in body.output][1:] == [10, 10]
    assert _dtype(proto, "w") == TensorProto.FLOAT16
    assert not [n for n in body.node if n.op_type == "Cast"]
    feeds = {"x": np.array([4.0, 0.25, -8.0], dtype=np.float32), "trip": np.array(3)}
    _assert_close(
        run_onnxruntime(to_proto(model_from_text(LOOP, w=w)), feeds),
        run_onnxruntime(proto, feeds),
        HALF_TOLERANCE,
    )


SCAN = """<ir_version: 10, opset_import: ["" : 18]>
g (float[3] x, float[5,3] rows) => (float[3] total, float[5,3] each) {
    total, each = Scan <num_scan_inputs = 1, body = step (float[3] acc, float[3] row)
        => (float[3] next, float[3] out) {
        scaled = Mul (row, w)
        next = Add (acc, scaled)
        out = Tanh (next)
    }> (x, rows)
}"""


def test_a_scan_body_computes_in_the_new_type_with_its_state_and_scan_outputs() -> None:
    w = np.array([0.5, -1.5, 2.0], dtype=np.float32)
    model = model_from_text(SCAN, w=w)
    _, proto = _convert(model)
    scan = next(n for n in proto.graph.node if n.op_type == "Scan")
    body = next(a.g for a in scan.attribute if a.type == onnx.AttributeProto.GRAPH)
    assert [i.type.tensor_type.elem_type for i in body.input] == [TensorProto.FLOAT16] * 2
    assert [o.type.tensor_type.elem_type for o in body.output] == [TensorProto.FLOAT16] * 2
    assert _dtype(proto, "w") == TensorProto.FLOAT16
    assert not [n for n in body.node if n.op_type == "Cast"]
    assert [o.type.tensor_type.elem_type for o in proto.graph.output] == [1, 1]  # io kept
    rng = np.random.default_rng(2)
    feeds = {
        "x": rng.standard_normal(3).astype(np.float32),
        "rows": rng.standard_normal((5, 3)).astype(np.float32),
    }
    want = run_onnxruntime(to_proto(model_from_text(SCAN, w=w)), feeds)
    _assert_close(want, run_onnxruntime(proto, feeds), HALF_TOLERANCE)
    _assert_close(want, _reference(proto, feeds), HALF_TOLERANCE)


IF = """<ir_version: 10, opset_import: ["" : 18]>
g (float[3] x, bool flag) => (float[3] y) {
    y = If (flag) <then_branch = then_g () => (float[3] t) {
        t = Mul (x, x)
    }, else_branch = else_g () => (float[3] e) {
        e = Range (start, limit, delta)
    }>
}"""


def test_if_branches_match_the_if_and_an_op_without_float16_stays_float32_inside() -> None:
    consts = {
        "start": np.array(0, dtype=np.float32),
        "limit": np.array(3, dtype=np.float32),
        "delta": np.array(1, dtype=np.float32),
    }
    model = model_from_text(IF, **consts)
    report, proto = _convert(model)
    assert any("Range-11" in d for d in report.details("convert-precision", "kept_float32"))
    if_node = next(n for n in proto.graph.node if n.op_type == "If")
    for branch in if_node.attribute:
        assert branch.g.output[0].type.tensor_type.elem_type == TensorProto.FLOAT16
    x = np.array([1.5, -2.0, 0.5], dtype=np.float32)
    for flag in (True, False):
        feeds = {"x": x, "flag": np.array(flag)}
        _assert_close(
            run_onnxruntime(to_proto(model_from_text(IF, **consts)), feeds),
            run_onnxruntime(proto, feeds),
            HALF_TOLERANCE,
        )


FUNCTION = """<ir_version: 10, opset_import: ["" : 18, "local" : 1]>
g (float[4] x) => (float[4] y) {
    t = local.Scale (x)
    y = Sigmoid (t)
}
<domain: "local", opset_import: ["" : 18]>
Scale (p) => (q) {
    k = Constant <value = float {3.0}> ()
    q = Mul (p, k)
}"""


def test_a_local_function_is_converted_with_its_call() -> None:
    model = model_from_text(FUNCTION)
    _, proto = _convert(model)
    (fn,) = proto.functions
    const = next(n for n in fn.node if n.op_type == "Constant")
    assert const.attribute[0].t.data_type == TensorProto.FLOAT16
    call = next(n for n in proto.graph.node if n.op_type == "Scale")
    assert next(n for n in proto.graph.node if n.output[0] == call.input[0]).op_type == "Cast"
    x = np.array([-2.0, -0.5, 0.5, 2.0], dtype=np.float32)
    _assert_close(
        run_onnxruntime(to_proto(model_from_text(FUNCTION)), {"x": x}),
        run_onnxruntime(proto, {"x": x}),
        HALF_TOLERANCE,
    )


MLP = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x, bool[2,8] keep) => (float[2,4] y, float[2,8] gated) {
    h = MatMul (x, w1)
    hb = Add (h, b1)
    a = Relu (hb)
    y = MatMul (a, w2)
    zero = ConstantOfShape <value = float[1] {-1e9}> (shape)
    gated = Where (keep, x, zero)
}"""


def _mlp_weights() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(1)
    return {
        "w1": rng.standard_normal((8, 32)).astype(np.float32),
        "b1": rng.standard_normal(32).astype(np.float32),
        "w2": rng.standard_normal((32, 4)).astype(np.float32),
        "shape": np.array([2, 8], dtype=np.int64),
    }


MLP_FEEDS = {
    "x": np.random.default_rng(2).standard_normal((2, 8)).astype(np.float32),
    "keep": np.tile(np.array([True, False]), (2, 4)),
}


def test_constant_of_shape_value_is_converted_and_clamped() -> None:
    model = model_from_text(MLP, **_mlp_weights())
    report, proto = _convert(model)
    cos = next(n for n in proto.graph.node if n.op_type == "ConstantOfShape")
    fill = onnx.numpy_helper.to_array(cos.attribute[0].t)
    assert fill.dtype == np.float16 and fill.tolist() == [FLOAT16_LOWEST]
    assert _dtype(proto, "w1") == TensorProto.FLOAT16
    assert report.rows[0].stats["casts_inserted"] == 3  # x in (read twice); y and gated out
    want = run_onnxruntime(to_proto(model_from_text(MLP, **_mlp_weights())), MLP_FEEDS)
    got = run_onnxruntime(proto, MLP_FEEDS)
    _assert_close(want[:1], got[:1], HALF_TOLERANCE)
    keep = MLP_FEEDS["keep"]
    _assert_close([want[1][keep]], [got[1][keep]], HALF_TOLERANCE)
    assert (got[1][~keep] == FLOAT16_LOWEST).all()


def test_a_constant_whose_readers_read_only_its_shape_is_converted() -> None:
    """tf2onnx's folded constants read by Shape alone (g2p-id's BERT: six of 64 KiB)."""
    model = model_from_text(
        """<ir_version: 10, opset_import: ["" : 18]>
g (float[2, 4] x) => (float[2, 4] y, int64[2] s) {
  s = Shape (only_shape)
  n = Size (only_shape)
  both = Shape (read_too)
  r = Add (x, read_too)
  y = Relu (r)
}""",
        only_shape=np.ones((2, 4), np.float32),
        read_too=np.full((2, 4), 0.1, np.float32),
    )
    _, proto = _convert(model)
    assert _dtype(proto, "only_shape") == TensorProto.FLOAT16
    assert _dtype(proto, "read_too") == TensorProto.FLOAT16  # Add wants it: as before
    feeds = {"x": np.ones((2, 4), np.float32)}
    got = run_onnxruntime(proto, feeds)
    assert got[1].tolist() == [2, 4]


def test_keep_io_types_false_retypes_the_graph_inputs_and_outputs() -> None:
    model = model_from_text(MLP, **_mlp_weights())
    _, proto = _convert(model, keep_io_types=False)
    assert _dtype(proto, "x") == _dtype(proto, "y") == _dtype(proto, "gated") == 10
    assert "Cast" not in _ops(proto)
    half = {"x": MLP_FEEDS["x"].astype(np.float16), "keep": MLP_FEEDS["keep"]}
    want = run_onnxruntime(to_proto(model_from_text(MLP, **_mlp_weights())), MLP_FEEDS)
    _assert_close(want[:1], run_onnxruntime(proto, half)[:1], HALF_TOLERANCE)


@pytest.mark.parametrize("text", [ATTENTION, LOOP, MLP, FUNCTION, LAYER_NORM, IF])
def test_float32_to_float16_to_float32_keeps_every_op_type_and_computes_within_tolerance(
    text: str,
) -> None:
    weights = {
        ATTENTION: {},
        LOOP: {"w": np.array([1.0, -2.0, 3.0], dtype=np.float32)},
        MLP: _mlp_weights(),
        FUNCTION: {},
        LAYER_NORM: LAYER_NORM_WEIGHTS,
        IF: {
            "start": np.array(0, dtype=np.float32),
            "limit": np.array(3, dtype=np.float32),
            "delta": np.array(1, dtype=np.float32),
        },
    }[text]
    original = to_proto(model_from_text(text, **weights))
    model = model_from_text(text, **weights)
    _convert(model, "float16")
    _, back = _convert(model, "float32")
    assert _ops(back) == _ops(original)
    for graph in _graphs(back.graph):
        for init in graph.initializer:
            assert init.data_type != TensorProto.FLOAT16
        for vi in [*graph.input, *graph.output, *graph.value_info]:
            assert vi.type.tensor_type.elem_type != TensorProto.FLOAT16
    feeds = {
        ATTENTION: ATTENTION_FEEDS,
        LOOP: {"x": np.array([4.0, 0.25, -8.0], dtype=np.float32), "trip": np.array(3)},
        MLP: MLP_FEEDS,
        FUNCTION: {"x": np.array([-2.0, -0.5, 0.5, 2.0], dtype=np.float32)},
        LAYER_NORM: {"x": np.linspace(-3, 3, 16, dtype=np.float32).reshape(2, 8)},
        IF: {"x": np.array([1.5, -2.0, 0.5], dtype=np.float32), "flag": np.array(True)},
    }[text]
    want, got = run_onnxruntime(original, feeds), run_onnxruntime(back, feeds)
    _assert_close(want[:1], got[:1], HALF_TOLERANCE)


def test_a_float16_model_becomes_float32() -> None:
    text = """<ir_version: 10, opset_import: ["" : 18]>
    g (float16[2,3] x) => (float16[2,3] y) {
        s = Add (x, c)
        y = Cast <to = 10> (s)
    }"""
    model = model_from_text(text, c=np.array([1, 2, 3], dtype=np.float16))
    _, proto = _convert(model, "float32", keep_io_types=False)
    assert _dtype(proto, "x") == _dtype(proto, "y") == _dtype(proto, "c") == TensorProto.FLOAT
    assert _ops(proto) == Counter({"Add": 1, "Cast": 1})  # the model's own Cast stays
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    (y,) = run_onnxruntime(proto, {"x": x})
    np.testing.assert_array_equal(y, x + [1, 2, 3])


BF16 = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x) => (float[2,4] y) {
    h = MatMul (x, w1)
    hb = Add (h, b1)
    a = Relu (hb)
    y = MatMul (a, w2)
}"""


def test_bfloat16_is_judged_by_the_reference_evaluator_where_onnxruntime_lacks_kernels() -> None:
    weights = {k: v for k, v in _mlp_weights().items() if k != "shape"}
    original = to_proto(model_from_text(BF16, **weights))
    model = model_from_text(BF16, **weights)
    _, proto = _convert(model, "bfloat16")
    assert _dtype(proto, "w1") == TensorProto.BFLOAT16
    w1 = next(i for i in proto.graph.initializer if i.name == "w1")
    stored = onnx.numpy_helper.to_array(w1)
    assert stored.dtype == ml_dtypes.bfloat16
    feeds = {"x": MLP_FEEDS["x"]}
    want = run_onnxruntime(original, feeds)
    _assert_close(want, _reference(proto, feeds), HALF_TOLERANCE)


def test_bfloat16_before_opset_13_keeps_ops_without_it_in_float32() -> None:
    text = BF16.replace('"" : 18', '"" : 11').replace("ir_version: 10", "ir_version: 6")
    weights = {k: v for k, v in _mlp_weights().items() if k != "shape"}
    model = model_from_text(text, **weights)
    report, proto = _convert(model, "bfloat16")
    kept = report.details("convert-precision", "kept_float32")
    assert len(kept) == 4 and all("does not allow element type 16" in k for k in kept)
    assert "Cast" not in _ops(proto)
    assert all(i.data_type == TensorProto.FLOAT for i in proto.graph.initializer)


def test_weights_only_stores_float16_behind_one_cast_and_computes_in_float32() -> None:
    weights = _mlp_weights()
    original = to_proto(model_from_text(MLP, **weights))
    model = model_from_text(MLP, **weights)
    report, proto = _convert(model, "float16", weights_only=True)
    assert sorted(report.details("convert-precision", "weights_compressed")) == ["b1", "w1", "w2"]
    halves = {i.name for i in proto.graph.initializer if i.data_type == TensorProto.FLOAT16}
    assert halves == {"w1_float16", "b1_float16", "w2_float16"}
    casts = [n for n in proto.graph.node if n.op_type == "Cast"]
    assert sorted(c.output[0] for c in casts) == ["b1", "w1", "w2"]
    assert all(c.attribute[0].i == TensorProto.FLOAT for c in casts)
    assert _dtype(proto, "x") == TensorProto.FLOAT
    want, got = run_onnxruntime(original, MLP_FEEDS), run_onnxruntime(proto, MLP_FEEDS)
    for a, b in zip(want, got, strict=True):
        np.testing.assert_allclose(b, a, rtol=1e-3, atol=1e-3 * float(np.abs(a).max()))


ISLANDS = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x) => (float[2,4] y) {
    h = MatMul (x, w1)
    hb = Add (h, b1)
    a = Relu (hb)
    m = MatMul (a, w3)
    s = Sigmoid (m)
    y = MatMul (s, w2)
}"""


def test_cheap_ops_between_float32_ops_alone_stay_float32() -> None:
    rng = np.random.default_rng(3)
    weights = {
        "w1": rng.standard_normal((8, 32)).astype(np.float32),
        "b1": rng.standard_normal(32).astype(np.float32),
        "w3": rng.standard_normal((32, 32)).astype(np.float32),
        "w2": rng.standard_normal((32, 4)).astype(np.float32),
    }
    x = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    want = run_onnxruntime(to_proto(model_from_text(ISLANDS, **weights)), x)
    keep = {"h": "asked", "y": "asked"}
    report, proto = _convert(model_from_text(ISLANDS, **weights), keep_float32=keep)
    between = "between float32 ops: in half it would add only Casts and rounding"
    # Add reads a weight the conversion halves, and MatMul m is faster in half: they convert;
    # the Relu and Sigmoid are then no island, and nothing else is kept
    kept = report.details("convert-precision", "kept_float32")
    assert kept == ["MatMul -> h: asked", "MatMul -> y: asked"]
    assert _dtype(proto, "b1") == _dtype(proto, "w3") == TensorProto.FLOAT16
    keep = {"h": "asked", "y": "asked", "m": "asked"}
    report, proto = _convert(model_from_text(ISLANDS, **weights), keep_float32=keep)
    kept = report.details("convert-precision", "kept_float32")
    assert sorted(kept) == ["MatMul -> h: asked", "MatMul -> m: asked", "MatMul -> y: asked",
                            f"Sigmoid -> s: {between}"]  # fmt: skip
    # the Add converts (its bias halves) and the Relu after it: one Cast each way; none
    # around the Sigmoid
    assert _ops(proto)["Cast"] == 2 and _dtype(proto, "b1") == TensorProto.FLOAT16
    _assert_close(want, run_onnxruntime(proto, x), 1e-3)
    weights["b1"] = weights["b1"][:1]  # a bias too small to halve: the Add joins the island
    want = run_onnxruntime(to_proto(model_from_text(ISLANDS, **weights)), x)
    report, proto = _convert(model_from_text(ISLANDS, **weights), keep_float32=keep)
    kept = report.details("convert-precision", "kept_float32")
    assert f"Add -> hb: {between}" in kept and f"Relu -> a: {between}" in kept  # then the Relu
    assert "Cast" not in _ops(proto)
    np.testing.assert_array_equal(run_onnxruntime(proto, x)[0], want[0])


EXACT = """<ir_version: 10, opset_import: ["" : 18]>
g (float[2,8] x) => (float[2,4] y, float[2,8] e) {
    h = MatMul (x, w1)
    r = Relu (h)
    c = Clip (r, lo, hi)
    y = MatMul (c, w2)
    e = Relu (x)
}"""


@pytest.mark.parametrize("hi", [6.0, 6.1], ids=["float16-holds-its-bound", "a-bound-it-rounds"])
def test_kept_ops_that_change_no_value_in_float16_compute_in_it(hi: float) -> None:
    rng = np.random.default_rng(5)
    weights = {
        "w1": rng.standard_normal((8, 32)).astype(np.float32),
        "w2": rng.standard_normal((32, 4)).astype(np.float32),
        "lo": np.array(0.0, np.float32),
        "hi": np.array(hi, np.float32),
    }
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    keep = dict.fromkeys(["r", "c", "e"], "measured")
    _, kept = _convert(model_from_text(EXACT, **weights), keep_float32=keep)
    report, freed = _convert(
        model_from_text(EXACT, **weights), keep_float32=keep, exact_free={"r", "c", "e"}
    )
    # the Relu reads h, a float16 value: it computes in float16, and so does the Clip after
    # it where float16 holds its bounds; Relu e reads the float32 input and stays
    still = sorted(report.details("convert-precision", "kept_float32"))
    want = ["Relu -> e: measured"] + (["Clip -> c: measured"] if hi == 6.1 else [])
    assert still == sorted(want)
    freed_notes = report.details("convert-precision", "exact_in_half")
    assert [n.split(":")[0] for n in freed_notes] == ["Relu -> r"] + (
        ["Clip -> c"] if hi == 6.0 else []
    )
    assert _reads(freed, "r") == ["h"]  # no Cast between
    # the Cast both ways around the pair goes; with the Clip kept it moves after the Relu
    assert _ops(freed)["Cast"] == _ops(kept)["Cast"] - (2 if hi == 6.0 else 0)
    # either way the model computes the same values, to the bit, where each op computes in
    # its own type; onnxruntime's CPU drops Cast pairs around its float16 MatMul (which it
    # runs in float32), so there the two agree within the rounding only
    for a, b in zip(_reference(kept, feeds), _reference(freed, feeds), strict=True):
        np.testing.assert_array_equal(b, a)
    _assert_close(run_onnxruntime(kept, feeds), run_onnxruntime(freed, feeds), 1e-3)


@pytest.mark.parametrize("hi", [6.0, 6.1])
def test_a_kept_clip_6_computes_in_float16_only_where_it_holds_its_bound_attributes(
    hi: float,
) -> None:
    text = f"""<ir_version: 5, opset_import: ["" : 10]>
    g (float[2,8] x) => (float[2,4] y) {{
        h = MatMul (x, w1)
        c = Clip <min = 0.0, max = {hi}> (h)
        y = MatMul (c, w2)
    }}"""
    rng = np.random.default_rng(6)
    weights = {"w1": 4 * rng.standard_normal((8, 32)).astype(np.float32),
               "w2": rng.standard_normal((32, 4)).astype(np.float32)}  # fmt: skip
    keep = {"c": "measured"}
    _, kept = _convert(model_from_text(text, **weights), keep_float32=keep)
    report, freed = _convert(model_from_text(text, **weights), keep_float32=keep, exact_free={"c"})
    assert _reads(freed, "c") == (["h"] if hi == 6.0 else ["h_float32"])
    feeds = {"x": rng.standard_normal((2, 8)).astype(np.float32)}
    for a, b in zip(_reference(kept, feeds), _reference(freed, feeds), strict=True):
        np.testing.assert_array_equal(b, a)


def test_kept_ops_the_runtime_refuses_or_the_caller_names_stay_float32() -> None:
    weights = {
        "w1": np.ones((8, 32), np.float32), "w2": np.ones((32, 4), np.float32),
        "lo": np.array(0.0, np.float32), "hi": np.array(6.0, np.float32),
    }  # fmt: skip
    chosen = Chosen({"r": "measured", "c": "refused"}, runtime_kept={"c"})
    report, proto = _convert(
        model_from_text(EXACT, **weights), keep_float32={"e": "asked"}, choose=lambda m: chosen
    )
    still = sorted(report.details("convert-precision", "kept_float32"))
    assert still == ["Clip -> c: refused", "Relu -> e: asked"]
    assert _reads(proto, "r") == ["h"]
    # a caller's op type holds the op the calibration named by its output too
    report, proto = _convert(
        model_from_text(EXACT, **weights), keep_float32={"Relu": "asked"}, choose=lambda m: chosen
    )
    assert _reads(proto, "r") == ["h_float32"]


def test_weights_only_stores_a_weight_half_only_where_that_saves_bytes() -> None:
    text = """<ir_version: 10, opset_import: ["" : 18]>
    g (float[4,16] x) => (float[4,16] y) {
        a = Add (x, b)
        y = Mul (a, big)
    }"""
    rng = np.random.default_rng(4)
    weights = {"b": rng.standard_normal(16).astype(np.float32),
               "big": rng.standard_normal((4, 16)).astype(np.float32)}  # fmt: skip
    report, chosen = _convert(model_from_text(text, **weights), weights_only=True)
    # 16 values save 32 bytes; the Cast and the name b_float16 add 40
    assert report.details("convert-precision", "weights_compressed") == ["big"]
    assert _dtype(chosen, "b") == TensorProto.FLOAT
    _, every = _convert(model_from_text(text, **weights), weights_only=True, min_elements=16)
    assert _dtype(every, "b_float16") == TensorProto.FLOAT16
    assert chosen.ByteSize() < every.ByteSize()
    x = {"x": rng.standard_normal((4, 16)).astype(np.float32)}
    want = run_onnxruntime(to_proto(model_from_text(text, **weights)), x)
    _assert_close(want, run_onnxruntime(chosen, x), 1e-3)


def test_weights_only_keeps_the_weights_keep_float32_names_and_notes_why() -> None:
    model = model_from_text(MLP, **_mlp_weights())
    report, proto = _convert(
        model, "float16", weights_only=True, keep_float32={"w2": "its rounding moves y"}
    )
    assert report.details("convert-precision", "weights_kept_float32") == [
        "w2: its rounding moves y"
    ]
    assert sorted(report.details("convert-precision", "weights_compressed")) == ["b1", "w1"]
    assert _dtype(proto, "w2") == TensorProto.FLOAT
    halves = {i.name for i in proto.graph.initializer if i.data_type == TensorProto.FLOAT16}
    assert halves == {"w1_float16", "b1_float16"}
    casts = [n for n in proto.graph.node if n.op_type == "Cast"]
    assert sorted(c.output[0] for c in casts) == ["b1", "w1"]
    y = next(n for n in proto.graph.node if n.output[0] == "y")
    assert list(y.input) == ["a", "w2"]


def test_weights_only_keep_float32_alone_leaves_the_model_unmodified() -> None:
    model = model_from_text(MLP, **_mlp_weights())
    keep = dict.fromkeys(["w1", "b1", "w2"], "asked")
    result = ConvertPrecisionPass("float16", weights_only=True, keep_float32=keep)(model)
    assert not result.modified
    assert result.stats == Counter({"weights_kept_float32": 3})
    assert "Cast" not in _ops(to_proto(model))


def test_weights_only_choose_adds_weights_from_the_model_it_is_given() -> None:
    seen: list[set[str]] = []

    def choose(given: Model) -> dict[str, str]:
        seen.append({v.name for v in given.graph.initializers})
        return {"w1": "chosen", "b1": "chosen"}

    model = model_from_text(MLP, **_mlp_weights())
    convert = ConvertPrecisionPass(
        "float16", weights_only=True, keep_float32={"b1": "asked"}, choose=choose
    )
    report, proto = _convert_with(model, convert)
    assert seen == [{"w1", "b1", "w2", "shape"}]
    kept = report.details("convert-precision", "weights_kept_float32")
    assert sorted(kept) == ["b1: asked", "w1: chosen"]  # the caller's reason wins
    assert report.details("convert-precision", "weights_compressed") == ["w2"]
    assert convert.keep_float32 == {"b1": "asked"}  # what choose added lasts one call
    assert _dtype(proto, "w1") == _dtype(proto, "b1") == TensorProto.FLOAT


def _convert_with(model: Model, convert: ConvertPrecisionPass) -> tuple[Report, onnx.ModelProto]:
    report = PassManager([convert], verify_each=True).run(model)
    ir.verify(model)
    proto = to_proto(model)
    onnx.checker.check_model(proto, full_check=True)
    _assert_clean(proto, weights_only=True)
    return report, proto


QDQ = """<ir_version: 9, opset_import: ["" : 19]>
g (float[2, 32] x) => (float[2, 32] y) {
    q = QuantizeLinear <axis = 1> (x, act_scale, act_zero)
    a = DequantizeLinear <axis = 1> (q, act_scale, act_zero)
    w = DequantizeLinear <axis = 1> (w_int8, w_scale)
    h = MatMul (a, w)
    y = Add (h, bias)
}"""


def test_weights_only_keeps_the_quantization_grid_float32() -> None:
    # Per-channel scales rounded to float16 move every activation near a step across it:
    # they stay, the float weights beside them (the bias) are compressed.
    rng = np.random.default_rng(0)
    weights = {
        "act_scale": np.float32(1 / 127) * (1 + rng.random(32)).astype(np.float32),
        "act_zero": np.zeros(32, np.int8),
        "w_int8": rng.integers(-127, 128, (32, 32)).astype(np.int8),
        "w_scale": (rng.random(32) / 100).astype(np.float32),
        "bias": rng.standard_normal(32).astype(np.float32),
    }
    original = to_proto(model_from_text(QDQ, **weights))
    report, proto = _convert(model_from_text(QDQ, **weights), "float16", weights_only=True)
    assert report.details("convert-precision", "weights_compressed") == ["bias"]
    kept = report.details("convert-precision", "weights_kept_float32")
    assert sorted(k.split(":")[0] for k in kept) == ["act_scale", "w_scale"]
    assert all("quantization parameter of" in k for k in kept)
    x = rng.standard_normal((2, 32)).astype(np.float32)
    want, got = run_onnxruntime(original, {"x": x}), run_onnxruntime(proto, {"x": x})
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=1e-3 * float(np.ptp(want[0])))


def test_store_kept_weights_stores_the_float32_ops_weights_but_the_asked_ones() -> None:
    original = to_proto(model_from_text(MLP, **_mlp_weights()))
    keep = {"h": "its error grows", "y": "asked (--keep-float32)"}
    report, proto = _convert(
        model_from_text(MLP, **_mlp_weights()), "float16", keep_float32=keep,
        store_kept_weights=True, asked={"y": keep["y"]},
    )  # fmt: skip
    assert report.details("convert-precision", "weights_compressed") == ["w1"]
    assert report.details("convert-precision", "weights_kept_float32") == [
        "w2: read by 'y', asked to stay float32"
    ]
    types = {i.name: i.data_type for i in proto.graph.initializer}
    assert types["w1_float16"] == TensorProto.FLOAT16 and types["w2"] == TensorProto.FLOAT
    h = next(n for n in proto.graph.node if n.output[0] == "h")
    assert _dtype(proto, h.input[0]) == TensorProto.FLOAT  # h computes in float32
    want, got = run_onnxruntime(original, MLP_FEEDS), run_onnxruntime(proto, MLP_FEEDS)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=HALF_TOLERANCE * np.ptp(want[0]))
    _, plain = _convert(model_from_text(MLP, **_mlp_weights()), "float16", keep_float32=keep)
    assert {i.name: i.data_type for i in plain.graph.initializer}["w1"] == TensorProto.FLOAT
