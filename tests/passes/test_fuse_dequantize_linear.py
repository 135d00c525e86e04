"""fuse-dequantize-linear: an integer weight cast to float32, less a zero point, times a scale
becomes one DequantizeLinear, per tensor or per axis as the scale's shape says and the opset
allows; onnxruntime computes the same bits either way, and the file does not grow."""

from __future__ import annotations

from pathlib import Path

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.api._optimize import OptimizeOptions, optimize_model
from onnxforge.cli import app
from onnxforge.io import from_proto, to_proto
from onnxforge.ir import Model, verify
from onnxforge.passes import FuseDequantizeLinearPass
from onnxforge.testing import model_from_text, random_feeds, run_onnxruntime

pytest.importorskip("onnxruntime")
RNG = np.random.default_rng(27)
K, N = 48, 24


def _int8(*shape: int) -> np.ndarray:
    return RNG.integers(-128, 128, shape).astype(np.int8)


def _uint8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


def _scale(*shape: int) -> np.ndarray:
    return (RNG.random(shape) * 0.02 + 0.001).astype(np.float32)


def _linear(body: str, opset: int = 17, **weights: np.ndarray) -> Model:
    """x [2, K] times the weight f that ``body`` computes (f = ...)."""
    return model_from_text(
        f'<ir_version: 8, opset_import: ["" : {opset}]>'
        + f"""
    g (float[2, {K}] x) => (float[2, {N}] y) {{
        {body}
        y = MatMul(x, f)
    }}""",
        **weights,
    )


def _run(model: Model) -> dict[str, int]:
    stats = dict(FuseDequantizeLinearPass()(model).stats)
    verify(model)
    return stats


def _ops(model: Model | onnx.ModelProto) -> list[str]:
    if isinstance(model, onnx.ModelProto):
        return [n.op_type for n in model.graph.node]
    return [op.op_type for op in model.graph.topo_order()]


def _assert_same_model_smaller(before: onnx.ModelProto, model: Model) -> onnx.ModelProto:
    """Fewer nodes, a valid model, no more bytes, and the same bits from onnxruntime."""
    after = to_proto(model)
    onnx.checker.check_model(after, full_check=True)
    assert len(after.graph.node) < len(before.graph.node)
    assert after.ByteSize() <= before.ByteSize()
    _assert_same_bits(before, after)
    return after


def _assert_same_bits(before: onnx.ModelProto, after: onnx.ModelProto) -> None:
    for seed in range(3):
        feeds = random_feeds(before, seed=seed)
        want, got = run_onnxruntime(before, feeds), run_onnxruntime(after, feeds)
        for w, g in zip(want, got, strict=True):
            assert np.array_equal(w, g)


def _dequantize(model: Model | onnx.ModelProto) -> onnx.NodeProto:
    proto = model if isinstance(model, onnx.ModelProto) else to_proto(model)
    (node,) = [n for n in proto.graph.node if n.op_type == "DequantizeLinear"]
    return node


def _operand(proto: onnx.ModelProto, name: str) -> np.ndarray:
    for t in proto.graph.initializer:
        if t.name == name:
            return numpy_helper.to_array(t)
    raise KeyError(name)


# -- per tensor -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "weights", "zero_point"),
    [
        ("c = Cast<to = 1>(w) f = Mul(c, s)", {"w": _int8(K, N), "s": _scale()}, None),
        ("c = Cast<to = 1>(w) f = Mul(c, s)", {"w": _uint8(K, N), "s": _scale(1, 1)}, None),
        (
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _uint8(K, N), "s": _scale(1), "z": np.array([128.0], np.float32)},
            np.uint8(128),
        ),
        (
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(-3.0, np.float32)},
            np.int8(-3),
        ),
        (
            "c = Cast<to = 1>(w) q = Cast<to = 1>(z) d = Sub(c, q) f = Mul(d, s)",
            {"w": _uint8(K, N), "s": _scale(), "z": np.array(131, np.uint8)},
            np.uint8(131),
        ),
        (
            "c = Cast<to = 1>(w) q = Cast<to = 1>(z) d = Sub(c, q) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(1, 1), "z": np.array([[5]], np.int8)},
            np.int8(5),
        ),
        (  # a zero point of zeros is DequantizeLinear's default: left out
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(0.0, np.float32)},
            None,
        ),
    ],
    ids=[
        "int8",
        "uint8_scale_1x1",
        "uint8_zp_float",
        "int8_zp_float",
        "uint8_zp_cast",
        "int8_zp_cast",
        "zp_zero",
    ],
)
def test_a_weight_with_one_scale_becomes_a_per_tensor_dequantize_linear(
    body: str, weights: dict[str, np.ndarray], zero_point: np.generic | None
) -> None:
    model = _linear(body, **weights)
    before = to_proto(model)
    assert _run(model) == {"per_tensor": 1}
    assert _ops(model) == ["DequantizeLinear", "MatMul"]
    after = _assert_same_model_smaller(before, model)
    node = _dequantize(after)
    assert node.input[0] == "w" and node.output[0] == "f" and not node.attribute
    scale = _operand(after, node.input[1])
    assert scale.shape == () and scale == weights["s"].reshape(())
    if zero_point is None:
        assert len(node.input) == 2
    else:
        zp = _operand(after, node.input[2])
        assert zp.shape == () and zp.dtype == zero_point.dtype and zp == zero_point
    assert {t.name for t in after.graph.initializer} == set(node.input)  # nothing left over


def test_the_scale_may_be_on_the_left_of_the_mul() -> None:
    model = _linear(
        "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(s, d)",
        w=_uint8(K, N),
        s=_scale(N),
        z=np.full(N, 128.0, np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"per_axis": 1}
    _assert_same_model_smaller(before, model)


def test_constant_ops_are_read_like_initializers() -> None:
    model = model_from_text("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] x) => (float[2, 2] y) {
        w = Constant<value = int8[3, 2] {-128, 5, 0, 127, -7, 9}>()
        s = Constant<value = float {0.125}>()
        c = Cast<to = 1>(w) f = Mul(c, s) y = MatMul(x, f)
    }""")
    before = to_proto(model)
    assert _run(model) == {"per_tensor": 1}
    _assert_same_model_smaller(before, model)
    assert _ops(model) == ["Constant", "Constant", "DequantizeLinear", "MatMul"]


# -- per axis ---------------------------------------------------------------------------------
def test_a_matmul_weight_with_a_scale_per_column_becomes_per_axis_1() -> None:
    model = _linear(
        "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
        w=_int8(K, N),
        s=_scale(N),
        z=RNG.integers(-10, 10, N).astype(np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"per_axis": 1}
    after = _assert_same_model_smaller(before, model)
    node = _dequantize(after)
    assert helper.get_attribute_value(node.attribute[0]) == 1
    assert _operand(after, node.input[1]).shape == (N,)
    assert _operand(after, node.input[2]).dtype == np.int8


def test_a_conv_weight_with_a_scale_per_output_channel_becomes_per_axis_0() -> None:
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[1, 8, 10, 10] x) => (float[1, 16, 8, 8] y) {
        c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s) y = Conv(x, f)
    }""",
        w=_uint8(16, 8, 3, 3),
        s=_scale(16, 1, 1, 1),
        z=RNG.integers(120, 136, (16, 1, 1, 1)).astype(np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"per_axis": 1}
    after = _assert_same_model_smaller(before, model)
    node = _dequantize(after)
    assert helper.get_attribute_value(node.attribute[0]) == 0
    assert _operand(after, node.input[1]).shape == (16,)
    assert _operand(after, node.input[2]).shape == (16,)


def test_a_zero_point_per_tensor_is_repeated_along_a_scale_per_axis() -> None:
    """DequantizeLinear needs both of one shape: N bytes of zero point where there were 4."""
    model = _linear(
        "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
        w=_uint8(K, N),
        s=_scale(N),
        z=np.array(128.0, np.float32),
    )
    before = to_proto(model)
    assert _run(model) == {"per_axis": 1}
    after = to_proto(model)
    _assert_same_bits(before, after)
    zp = _operand(after, _dequantize(after).input[2])
    assert zp.shape == (N,) and np.all(zp == 128)
    assert after.ByteSize() <= before.ByteSize() + N


# -- left as they are -------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("body", "weights"),
    [
        (  # the Cast's output is read twice
            "c = Cast<to = 1>(w) f = Mul(c, s) g = Relu(c) h = Add(f, g)",
            {"w": _int8(K, N), "s": _scale()},
        ),
        (  # the Sub's output is read twice
            "c = Cast<to = 1>(w) d = Sub(c, z) e = Mul(d, s) g = Relu(d) f = Add(e, g)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(1.0, np.float32)},
        ),
        (  # a zero point that is not an integer
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(0.5, np.float32)},
        ),
        (  # a zero point outside int8
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(200.0, np.float32)},
        ),
        (  # zp - x is not x - zp
            "c = Cast<to = 1>(w) d = Sub(z, c) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(), "z": np.array(1.0, np.float32)},
        ),
        (  # a scale that varies along both dims: blocks
            "c = Cast<to = 1>(w) f = Mul(c, s)",
            {"w": _int8(K, N), "s": _scale(K, N)},
        ),
        (  # scale and zero point along different axes
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N), "s": _scale(N), "z": np.ones((K, 1), np.float32)},
        ),
        (  # a float weight is no quantized one
            "c = Cast<to = 1>(w) f = Mul(c, s)",
            {"w": RNG.standard_normal((K, N)).astype(np.float64), "s": _scale()},
        ),
        (  # int32 takes no zero point
            "c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s)",
            {"w": _int8(K, N).astype(np.int32), "s": _scale(), "z": np.array(3.0, np.float32)},
        ),
    ],
    ids=[
        "cast_shared",
        "sub_shared",
        "zp_fraction",
        "zp_range",
        "reversed_sub",
        "blocks",
        "two_axes",
        "float",
        "int32_zp",
    ],
)
def test_what_dequantize_linear_cannot_say_is_left(
    body: str, weights: dict[str, np.ndarray]
) -> None:
    model = _linear(body, **weights)
    ops = _ops(model)
    assert _run(model) == {}
    assert _ops(model) == ops


def test_a_scale_that_would_grow_the_weight_is_left() -> None:
    model = model_from_text(
        f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, {K}] x) => (float[3, 2, {N}] y) {{
        c = Cast<to = 1>(w) f = Mul(c, s) y = MatMul(x, f)
    }}""",
        w=_int8(K, N),
        s=_scale(3, 1, N),
    )
    assert _run(model) == {}


def test_an_intermediate_graph_output_is_left() -> None:
    model = model_from_text(
        f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, {K}] x) => (float[2, {N}] y, float[{K}, {N}] c) {{
        c = Cast<to = 1>(w) f = Mul(c, s) y = MatMul(x, f)
    }}""",
        w=_int8(K, N),
        s=_scale(),
    )
    assert _run(model) == {}


def test_an_int32_weight_without_a_zero_point_is_rewritten() -> None:
    model = _linear(
        "c = Cast<to = 1>(w) f = Mul(c, s)", w=_int8(K, N).astype(np.int32), s=_scale()
    )
    before = to_proto(model)
    assert _run(model) == {"per_tensor": 1}
    _assert_same_model_smaller(before, model)


def test_a_cast_to_float16_is_left() -> None:
    model = model_from_text(
        f"""<ir_version: 8, opset_import: ["" : 17]>
    g (float16[2, {K}] x) => (float16[2, {N}] y) {{
        c = Cast<to = 10>(w) f = Mul(c, s) y = MatMul(x, f)
    }}""",
        w=_int8(K, N),
        s=np.array(0.01, np.float16),
    )
    assert _run(model) == {}
    assert _ops(model) == ["Cast", "Mul", "MatMul"]


# -- what the opset allows --------------------------------------------------------------------
def test_opset_11_has_per_tensor_dequantize_linear_but_no_axis() -> None:
    per_tensor = _linear("c = Cast<to = 1>(w) f = Mul(c, s)", opset=11, w=_int8(K, N), s=_scale())
    before = to_proto(per_tensor)
    assert _run(per_tensor) == {"per_tensor": 1}
    _assert_same_model_smaller(before, per_tensor)
    per_axis = _linear("c = Cast<to = 1>(w) f = Mul(c, s)", opset=11, w=_int8(K, N), s=_scale(N))
    assert _run(per_axis) == {}
    assert _ops(per_axis) == ["Cast", "Mul", "MatMul"]


def test_opset_9_has_no_dequantize_linear() -> None:
    model = _linear("c = Cast<to = 1>(w) f = Mul(c, s)", opset=9, w=_int8(K, N), s=_scale())
    assert _run(model) == {}
    assert _ops(model) == ["Cast", "Mul", "MatMul"]


def _wide(dtype: int, array: np.ndarray, opset: int) -> onnx.ModelProto:
    """x [2, 16] times Mul(Sub(Cast(w), 1), s) with w [16, 8] of ``dtype``."""
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["w"], ["c"], to=TensorProto.FLOAT),
            helper.make_node("Sub", ["c", "z"], ["d"]),
            helper.make_node("Mul", ["d", "s"], ["f"]),
            helper.make_node("MatMul", ["x", "f"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 8])],
        [
            numpy_helper.from_array(array, "w"),
            numpy_helper.from_array(np.ones(8, np.float32), "z"),
            numpy_helper.from_array(_scale(8), "s"),
        ],
    )
    proto = helper.make_model(graph, ir_version=10, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(proto, full_check=True)
    return proto


@pytest.mark.parametrize(
    ("dtype", "array"),
    [
        (TensorProto.INT16, RNG.integers(-30000, 30000, (16, 8)).astype(np.int16)),
        (TensorProto.UINT16, RNG.integers(0, 60000, (16, 8)).astype(np.uint16)),
        (TensorProto.INT4, RNG.integers(-8, 8, (16, 8)).astype(ml_dtypes.int4)),
        (TensorProto.UINT4, RNG.integers(0, 16, (16, 8)).astype(ml_dtypes.uint4)),
    ],
    ids=["int16", "uint16", "int4", "uint4"],
)
def test_16_and_4_bit_weights_from_opset_21(dtype: int, array: np.ndarray) -> None:
    if dtype in (TensorProto.INT16, TensorProto.UINT16):  # Cast takes 4 bits from 21 only
        old = from_proto(_wide(dtype, array, 20))
        assert _run(old) == {}
    before = _wide(dtype, array, 21)
    model = from_proto(before)
    assert _run(model) == {"per_axis": 1}
    after = _assert_same_model_smaller(before, model)
    zp = _dequantize(after).input[2]
    assert next(t.data_type for t in after.graph.initializer if t.name == zp) == dtype


# -- bodies and functions ---------------------------------------------------------------------
def test_a_local_function_gets_constant_ops_not_initializers() -> None:
    proto = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17, "local" : 1]>
    g (float[2, 3] x) => (float[2, 2] y) { y = local.Linear(x) }
    <domain: "local", opset_import: ["" : 17]>
    Linear (x) => (y) {
        w = Constant<value = uint8[3, 2] {0, 255, 7, 128, 200, 3}>()
        z = Constant<value = float[1] {128.0}>()
        s = Constant<value = float[2] {0.5, 0.25}>()
        c = Cast<to = 1>(w) d = Sub(c, z) f = Mul(d, s) y = MatMul(x, f)
    }""")
    model = from_proto(proto)
    assert _run(model) == {"per_axis": 1}
    after = to_proto(model)
    onnx.checker.check_model(after, full_check=True)
    body = after.functions[0].node
    ops = [n.op_type for n in body]
    assert ops == ["Constant", "Constant", "Constant", "DequantizeLinear", "MatMul"]
    assert not after.graph.initializer
    _assert_same_bits(proto, after)


# -- in optimize ------------------------------------------------------------------------------
def _quantized_mlp(path: Path | None = None) -> onnx.ModelProto:
    model = model_from_text(
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[N, 64] x) => (float[N, 16] y) {
        c1 = Cast<to = 1>(w1) f1 = Mul(c1, s1) h = MatMul(x, f1) r = Relu(h)
        c2 = Cast<to = 1>(w2) d2 = Sub(c2, z2) f2 = Mul(s2, d2) y = MatMul(r, f2)
    }""",
        w1=_int8(64, 32),
        s1=_scale(32),
        w2=_uint8(32, 16),
        s2=_scale(),
        z2=np.array(128.0, np.float32),
    )
    proto = to_proto(model)
    if path is not None:
        onnx.save(proto, path)
    return proto


def test_optimize_writes_dequantize_linear_and_never_folds_it() -> None:
    """fold-constants keeps every DequantizeLinear (its QUANTIZATION rule): folded, the
    weights would be float32 and four times larger."""
    before = _quantized_mlp()
    model = from_proto(before)
    report = optimize_model(model, OptimizeOptions(weights="dequantize-linear"))
    after = to_proto(model)
    onnx.checker.check_model(after, full_check=True)
    assert _ops(after) == ["DequantizeLinear", "MatMul", "Relu", "DequantizeLinear", "MatMul"]
    assert after.ByteSize() < before.ByteSize()
    _assert_same_bits(before, after)
    stats = {r.pass_name.strip(): r.stats for r in report.rows}
    assert stats["fuse-dequantize-linear"] == {"per_axis": 1, "per_tensor": 1}
    assert stats["fold-constants"].get("not_folded.quantization", 0) > 0


def test_the_cli_writes_the_dequantize_linear_form_when_asked(tmp_path: Path) -> None:
    source, out = tmp_path / "q.onnx", tmp_path / "out.onnx"
    before = _quantized_mlp(source)
    args = ["optimize", str(source), "-o", str(out), "--check", "2"]
    result = CliRunner().invoke(app, [*args, "--weights", "dequantize-linear"])
    assert result.exit_code == 0, result.output
    after = onnx.load(out)
    assert _ops(after) == ["DequantizeLinear", "MatMul", "Relu", "DequantizeLinear", "MatMul"]
    assert out.stat().st_size < source.stat().st_size
    _assert_same_bits(before, after)


def test_the_default_keeps_cast_mul_which_onnxruntime_computes_exactly(tmp_path: Path) -> None:
    """onnxruntime's default session (all graph optimizations) runs an 8-bit DequantizeLinear
    -> MatMul as MatMulNBits with int8 activations: the DequantizeLinear form is off by more
    than the 1e-3 a user compares with, the Cast -> Mul form (folded to float) is not."""
    ort = pytest.importorskip("onnxruntime")
    source, out = tmp_path / "q.onnx", tmp_path / "out.onnx"
    _quantized_mlp(source)
    result = CliRunner().invoke(app, ["optimize", str(source), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "DequantizeLinear" not in _ops(onnx.load(out))
    fused = tmp_path / "dq.onnx"
    args = ["optimize", str(source), "-o", str(fused), "--weights", "dequantize-linear"]
    assert CliRunner().invoke(app, args).exit_code == 0
    x = RNG.standard_normal((4, 64)).astype(np.float32)

    def run(path: Path) -> np.ndarray:
        return ort.InferenceSession(str(path)).run(None, {"x": x})[0]  # default: ENABLE_ALL

    want = run(source)
    scale = np.abs(want).max()
    assert np.abs(run(out) - want).max() <= 1e-5 * scale
    assert np.abs(run(fused) - want).max() > 1e-3 * scale  # if this fails, ORT changed


# -- OpenVINO ---------------------------------------------------------------------------------
OPENVINO_F32 = {"INFERENCE_PRECISION_HINT": "f32", "DYNAMIC_QUANTIZATION_GROUP_SIZE": "0"}
"""OpenVINO's CPU plugin computes in bfloat16 where the CPU has it, and quantizes activations
to int8 for integer weights, by default: either is 0.3-0.6% off float32, for the Cast -> Mul
form and DequantizeLinear alike. This asks for float32."""


def test_openvino_computes_the_rewritten_model_as_onnxruntime_does(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    model = _linear("c = Cast<to = 1>(w) f = Mul(c, s)", w=_int8(K, N), s=_scale(N))
    assert _run(model) == {"per_axis": 1}
    path = tmp_path / "dq.onnx"
    onnx.save(to_proto(model), path)
    x = RNG.standard_normal((2, K)).astype(np.float32)
    compiled = ov.Core().compile_model(ov.convert_model(str(path)), "CPU", OPENVINO_F32)
    got = compiled({"x": x})[compiled.outputs[0]]
    np.testing.assert_allclose(got, run_onnxruntime(model, {"x": x})[0], rtol=1e-3, atol=1e-4)
