"""Shape rules of the quantized ops, each its float twin's shape with its own element type:
ONNX's ConvInteger, QLinearConv, MatMulInteger and QLinearMatMul, and the com.microsoft ops
onnxruntime's quantizer writes (DynamicQuantizeLSTM, QLinearConcat, QLinearAveragePool, QGemm,
QAttention ...). One node each with symbolic dims; onnxruntime's output shapes at two sizes of
every symbol equal the inferred ones evaluated. Then whole models: a small CNN + LSTM quantized
by onnxruntime (dynamic and static, QOperator format) has every value resolved."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from ort_shapes import B, S, check_against_onnxruntime, node_model, random_feeds, weight

from onnxforge.io import from_proto
from onnxforge.ir import TensorType
from onnxforge.shape_infer import infer
from onnxforge.shape_infer.symbolic import evaluate, is_unknown_symbol
from onnxforge.testing import every_value_exposed

ort = pytest.importorskip("onnxruntime")
F, U8, I8, I32, BOOL = (
    TensorProto.FLOAT,
    TensorProto.UINT8,
    TensorProto.INT8,
    TensorProto.INT32,
    TensorProto.BOOL,
)
H, W = "height", "width"
SIZES = ({B: 2, S: 3, H: 9, W: 12}, {B: 1, S: 5, H: 16, W: 7})
"""Two sizes of every symbolic dim."""


def _scale(value: float = 0.05) -> np.ndarray:
    return np.array(value, np.float32)


def _zero(value: int = 0, dtype: type = np.uint8) -> np.ndarray:
    return np.array(value, dtype)


def _u8(*shape: int) -> np.ndarray:
    return weight(*shape, dtype=np.uint8)


def _i8(*shape: int) -> np.ndarray:
    return weight(*shape, dtype=np.int8)


def _lstm_inputs(directions: int, size: int, hidden: int) -> list:
    """X, W, R, B, sequence_lens, initial_h, initial_c, P, then per-direction scales and
    zero points of W and R."""
    per_direction = np.full(directions, 0.02, np.float32)
    zeros = np.zeros(directions, np.uint8)
    return [
        ("x", F, [S, B, size]),
        _u8(directions, size, 4 * hidden),
        _u8(directions, hidden, 4 * hidden),
        weight(directions, 8 * hidden),
        "",
        "",
        "",
        "",
        per_direction,
        zeros,
        per_direction,
        zeros,
    ]


# name: (op_type, inputs (as ort_shapes.node_model takes them), attributes, outputs, domain,
#        opset)
ONNX_CASES: dict[str, tuple] = {
    "conv_integer_strides_pads_dilations_group": (
        "ConvInteger",
        [("x", U8, [B, 4, H, W]), _u8(6, 2, 3, 3), _zero(3), _zero(1)],
        {"strides": [2, 1], "pads": [1, 0, 2, 1], "dilations": [2, 1], "group": 2},
        13,
    ),
    "conv_integer_auto_pad_same_upper": (
        "ConvInteger",
        [("x", U8, [B, 1, H, W]), _u8(4, 1, 3, 3)],
        {"strides": [2, 2], "auto_pad": "SAME_UPPER"},
        13,
    ),
    "conv_integer_1d_valid": (
        "ConvInteger",
        [("x", U8, [B, 3, S]), _u8(2, 3, 2), _zero(7)],
        {"strides": [2], "auto_pad": "VALID"},
        13,
    ),
    "matmul_integer_batch_broadcast": (
        "MatMulInteger",
        [("a", U8, [B, 1, S, 8]), _u8(3, 8, 5), _zero(3), _zero(5)],
        {},
        13,
    ),
    "matmul_integer_symbolic_batch_in_b": (
        "MatMulInteger",
        [("a", U8, [S, 8]), ("b", I8, [B, 8, 6])],
        {},
        13,
    ),
    "qlinear_conv_uint8": (
        "QLinearConv",
        [("x", U8, [B, 3, H, W]), _scale(), _zero(128), _u8(4, 3, 3, 3)]
        + [_scale(0.01), _zero(120), _scale(0.2), _zero(100), weight(4, dtype=np.int32)],
        {"strides": [2, 2], "pads": [1, 1, 1, 1]},
        13,
    ),
    "qlinear_conv_int8_grouped_dilated": (
        "QLinearConv",
        [("x", I8, [B, 4, H, W]), _scale(), _zero(0, np.int8), _i8(4, 1, 3, 3)]
        + [_scale(0.01), _zero(0, np.int8), _scale(0.2), _zero(5, np.int8)],
        {"group": 4, "dilations": [2, 2], "strides": [1, 2]},
        13,
    ),
    "qlinear_matmul_10": (
        "QLinearMatMul",
        [("a", U8, [B, S, 8]), _scale(), _zero(3), _u8(8, 5)]
        + [_scale(0.01), _zero(7), _scale(0.2), _zero(100)],
        {},
        13,
    ),
    "qlinear_matmul_21_batch_broadcast": (
        "QLinearMatMul",
        [("a", I8, [B, 1, S, 8]), _scale(), _zero(0, np.int8), _i8(2, 8, 5)]
        + [_scale(0.01), _zero(0, np.int8), _scale(0.2), _zero(3, np.int8)],
        {},
        21,
    ),
}

CONTRIB_CASES: dict[str, tuple] = {
    "dynamic_quantize_lstm_bidirectional": (
        "DynamicQuantizeLSTM",
        _lstm_inputs(2, 6, 5),
        {"hidden_size": 5, "direction": "bidirectional"},
        3,
    ),
    "dynamic_quantize_lstm_reverse_y_h_only": (
        "DynamicQuantizeLSTM",
        _lstm_inputs(1, 4, 3),
        {"hidden_size": 3, "direction": "reverse"},
        2,
    ),
    "qlinear_concat": (
        "QLinearConcat",
        [_scale(), _zero(128), ("a", U8, [B, 2, S]), _scale(0.1), _zero(120)]
        + [("b", U8, [B, 3, S]), _scale(0.02), _zero(128)],
        {"axis": 1},
        1,
    ),
    "qlinear_average_pool": (
        "QLinearAveragePool",
        [("x", U8, [B, 3, H, W]), _scale(), _zero(128), _scale(0.06), _zero(120)],
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 1, 1, 1]},
        1,
    ),
    "qlinear_average_pool_channels_last_ceil": (
        "QLinearAveragePool",
        [("x", U8, [B, H, W, 3]), _scale(), _zero(128), _scale(0.06), _zero(120)],
        {"kernel_shape": [2, 3], "strides": [2, 2], "channels_last": 1, "ceil_mode": 1},
        1,
    ),
    "qlinear_where": (
        "QLinearWhere",
        [("c", BOOL, [S]), ("x", U8, [B, S]), _scale(), _zero(128), _u8(1)]
        + [_scale(0.1), _zero(128), _scale(0.1), _zero(128)],
        {},
        1,
    ),
    "qgemm_quantized_output": (
        "QGemm",
        [("a", U8, [B, 8]), _scale(), _zero(128), _u8(6, 8), _scale(0.01), _zero(120)]
        + [weight(6, dtype=np.int32), _scale(0.2), _zero(100)],
        {"transB": 1},
        1,
    ),
    "qgemm_float_output": (
        "QGemm",
        [("a", U8, [8, B]), _scale(), _zero(128), _u8(8, 6), _scale(0.01), _zero(120)],
        {"transA": 1},
        1,
    ),
    "qattention_with_present": (
        "QAttention",
        [("x", U8, [B, S, 16]), _u8(16, 48), weight(48), _scale(0.05), _scale(0.01)]
        + ["", _zero(128), _zero(128)],
        {"num_heads": 4},
        2,
    ),
    "qembed_layer_norm": (
        "QEmbedLayerNormalization",
        [("ids", I32, [B, S]), ("types", I32, [B, S]), _u8(10, 8), _u8(16, 8), _u8(2, 8)]
        + [_u8(8), _u8(8), ("mask", I32, [B, S])]
        + [_scale(0.01)] * 5
        + [_zero(128)] * 5,
        {},
        2,
    ),
}


@pytest.mark.parametrize("name", ONNX_CASES)
def test_onnx_quantized_op_shapes_are_what_onnxruntime_computes(name: str) -> None:
    op_type, inputs, attrs, opset = ONNX_CASES[name]
    model = node_model(op_type, inputs, attrs, 1, domain="", opset=opset)
    check_against_onnxruntime(model, SIZES)


@pytest.mark.parametrize("name", CONTRIB_CASES)
def test_contrib_quantized_op_shapes_are_what_onnxruntime_computes(name: str) -> None:
    op_type, inputs, attrs, n_out = CONTRIB_CASES[name]
    check_against_onnxruntime(node_model(op_type, inputs, attrs, n_out), SIZES)


@pytest.mark.parametrize(
    "attrs", [{"axes": [-1], "keepdims": 1}, {"axes": [0, 2], "keepdims": 0}, {"keepdims": 1}]
)
def test_qlinear_reduce_mean_is_the_shape_onnxruntime_computes_for_reduce_mean(
    attrs: dict,
) -> None:
    # onnxruntime 1.31 has no CPU kernel for QLinearReduceMean: its float twin (ReduceMean-13,
    # axes an attribute as here) runs instead
    x = ("x", U8, [B, 4, S])
    quantized = [x, _scale(), _zero(128), _scale(0.06), _zero(120)]
    (t,) = _inferred(node_model("QLinearReduceMean", quantized, attrs, 1))
    assert t is not None and t.dtype == TensorProto.UINT8 and t.shape is not None
    twin = node_model("ReduceMean", [("x", F, [B, 4, S])], attrs, 1, domain="", opset=13)
    session = ort.InferenceSession(twin.SerializeToString(), providers=["CPUExecutionProvider"])
    for bindings in SIZES:
        (array,) = session.run(None, random_feeds(twin, bindings))
        assert [evaluate(d, bindings) for d in t.shape] == list(array.shape)


def _inferred(model: onnx.ModelProto) -> list[TensorType | None]:
    ours = from_proto(model)
    report = infer(ours)
    assert not report.errors, report.errors
    return [v.type if isinstance(v.type, TensorType) else None for v in ours.graph.outputs]


@pytest.mark.parametrize(
    ("quantized", "float_inputs"),
    [
        ("conv_integer_strides_pads_dilations_group", [0, 1]),
        ("qlinear_conv_uint8", [0, 3]),
        ("matmul_integer_batch_broadcast", [0, 1]),
        ("qlinear_matmul_21_batch_broadcast", [0, 3]),
    ],
)
def test_quantized_ops_keep_the_symbolic_dims_their_float_twin_computes(
    quantized: str, float_inputs: list[int]
) -> None:
    op_type, inputs, attrs, opset = ONNX_CASES[quantized]
    twin = "Conv" if "Conv" in op_type else "MatMul"
    float_specs = [
        (spec[0], F, spec[2]) if isinstance(spec, tuple) else spec.astype(np.float32)
        for spec in (inputs[i] for i in float_inputs)
    ]
    (ours,) = _inferred(node_model(op_type, inputs, attrs, 1, domain="", opset=opset))
    (theirs,) = _inferred(node_model(twin, float_specs, attrs, 1, domain="", opset=opset))
    assert ours is not None and theirs is not None and ours.shape is not None
    assert ours.shape == theirs.shape
    assert all(isinstance(d, int) or not is_unknown_symbol(d) for d in ours.shape), ours


def test_conv_integer_stride_2_gives_the_floor_expression() -> None:
    model = node_model(
        "ConvInteger",
        [("x", U8, ["N", 1, "H", "W"]), _u8(8, 1, 3, 3)],
        {"strides": [2, 2]},
        1,
        domain="",
        opset=13,
    )
    (t,) = _inferred(model)
    # floor((H-3)/2)+1, as symbolic.py normalizes it
    assert t == TensorType(TensorProto.INT32, ("N", 8, "floor((H+1)/2)-1", "floor((W+1)/2)-1"))


def test_dynamic_quantize_lstm_weights_that_disagree_with_hidden_size_are_an_error() -> None:
    inputs = _lstm_inputs(2, 6, 5)
    attrs = {"hidden_size": 4, "direction": "bidirectional"}
    report = infer(from_proto(node_model("DynamicQuantizeLSTM", inputs, attrs, 3)))
    assert [e.reason for e in report.errors] == ["W is [2,6,20], expected [2,6,16]"]


def test_qlinear_concat_without_axis_is_an_error() -> None:
    model = node_model(
        "QLinearConcat",
        [_scale(), _zero(), ("a", U8, [B, 2]), _scale(), _zero()],
        {},
        1,
    )
    report = infer(from_proto(model))
    assert [e.reason for e in report.errors] == ["QLinearConcat needs an axis attribute"]


# -- whole models: what onnxruntime's quantizer writes ------------------------------------------
def _crnn(path: Path) -> Path:
    """A tiny CRNN: two convolutions (the second on a Concat of two branches), pooling, the
    height averaged away, a bidirectional LSTM over the width, a projection per step."""
    f32 = np.float32
    rng = np.random.default_rng(1)

    def init(name: str, *shape: int) -> onnx.TensorProto:
        return numpy_helper.from_array((rng.standard_normal(shape) * 0.3).astype(f32), name)

    hidden = 6
    nodes = [
        helper.make_node("Conv", ["x", "w1", "b1"], ["c1"], strides=[2, 2], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2", "b2"], ["c2"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c2"], ["r2"]),
        helper.make_node("Concat", ["r1", "r2"], ["cat"], axis=1),
        helper.make_node("MaxPool", ["cat"], ["p1"], kernel_shape=[2, 1], strides=[2, 1]),
        helper.make_node("Conv", ["p1", "w3", "b3"], ["c3"], strides=[1, 1], pads=[1, 1, 1, 1]),
        helper.make_node("AveragePool", ["c3"], ["p2"], kernel_shape=[2, 2], strides=[1, 1]),
        helper.make_node("ReduceMean", ["p2"], ["m"], axes=[2], keepdims=0),
        helper.make_node("Transpose", ["m"], ["seq"], perm=[2, 0, 1]),
        helper.make_node(
            "LSTM",
            ["seq", "lw", "lr", "lb"],
            ["y", "y_h"],
            hidden_size=hidden,
            direction="bidirectional",
        ),
        helper.make_node("Transpose", ["y"], ["yt"], perm=[0, 2, 1, 3]),
        helper.make_node("Reshape", ["yt", "shape"], ["flat"]),
        helper.make_node("MatMul", ["flat", "proj"], ["logits"]),
        helper.make_node("Add", ["logits", "proj_b"], ["out"]),
    ]
    inits = [
        init("w1", 4, 1, 3, 3),
        init("b1", 4),
        init("w2", 4, 4, 3, 3),
        init("b2", 4),
        init("w3", 8, 8, 3, 3),
        init("b3", 8),
        init("lw", 2, 4 * hidden, 8),
        init("lr", 2, 4 * hidden, hidden),
        init("lb", 2, 8 * hidden),
        numpy_helper.from_array(np.array([0, 0, -1], np.int64), "shape"),
        init("proj", 2 * hidden, 5),
        init("proj_b", 5),
    ]
    graph = helper.make_graph(
        nodes,
        "crnn",
        [helper.make_tensor_value_info("x", F, [B, 1, H, W])],
        [helper.make_tensor_value_info("out", F, None)],
        inits,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, path)
    return path


class _Calibration:
    """A few random images for quantize_static."""

    def __init__(self) -> None:
        self.batches = iter(random_feeds(_input_model(), sizes) for sizes in SIZES)

    def get_next(self) -> dict[str, np.ndarray] | None:
        return next(self.batches, None)


def _input_model() -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", F, [B, 1, H, W])
    return helper.make_model(helper.make_graph([], "x", [x], []))


def _quantized(kind: str, tmp_path: Path) -> onnx.ModelProto:
    from onnxruntime.quantization import QuantFormat, quantize_dynamic, quantize_static

    source = _crnn(tmp_path / "crnn.onnx")
    target = tmp_path / f"crnn_{kind}.onnx"
    if kind == "dynamic":
        quantize_dynamic(source, target)
    else:
        quantize_static(source, target, _Calibration(), quant_format=QuantFormat.QOperator)
    return onnx.load(target)


@pytest.mark.parametrize(
    ("kind", "expected_ops"),
    [
        ("dynamic", {"ConvInteger", "MatMulInteger", "DynamicQuantizeLSTM"}),
        ("static", {"QLinearConv", "QLinearMatMul", "QLinearConcat", "QLinearAveragePool"}),
    ],
)
def test_every_value_of_a_quantized_crnn_is_resolved(
    kind: str, expected_ops: set[str], tmp_path: Path
) -> None:
    model = every_value_exposed(_quantized(kind, tmp_path))
    assert expected_ops <= {n.op_type for n in model.graph.node}
    ours = from_proto(model)
    report = infer(ours)
    assert not report.errors, report.errors
    assert not [n for n in report.notes if "passed over" in n], report.notes
    types = {v.name: v.type for v in ours.graph.outputs}
    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    names = [o.name for o in session.get_outputs()]
    for bindings in SIZES:
        arrays = session.run(names, random_feeds(model, bindings))
        wrong = {}
        for name, array in zip(names, arrays, strict=True):
            t = types[name]
            got = (
                (t.dtype, [evaluate(d, bindings) for d in t.shape])
                if isinstance(t, TensorType) and t.shape is not None
                else t
            )
            if got != (helper.np_dtype_to_tensor_dtype(array.dtype), list(array.shape)):
                wrong[name] = (got, array.dtype, array.shape)
        assert not wrong, f"{len(wrong)} of {len(names)} values: {wrong}"
