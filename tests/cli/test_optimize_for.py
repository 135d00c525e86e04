"""`onnxforge optimize --for TOOLCHAIN` and `passes --for`: each profile on a small generated
model (the output computes what the original does on onnxruntime, and on OpenVINO and MNN for
their profiles), the opset a profile picks, pinned defaults, static shapes asked for by name,
integer weights as DequantizeLinear or folded to float as the profile says, and weights the
converter reads from initializers alone folded whatever their size."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.toolchains import _ONNX2TORCH, PROFILES

ort = pytest.importorskip("onnxruntime")
runner = CliRunner()
RNG = np.random.default_rng(0)


def _cnn(
    opset: int = 18, ir_version: int = 8, defaults_as_inputs: bool = False
) -> onnx.ModelProto:
    """Conv -> Relu -> ReduceMean (axes an input from 18) -> Split in two (num_outputs from 18),
    batch dynamic; with ``defaults_as_inputs`` the weights are also graph inputs (IR 3)."""
    w = numpy_helper.from_array(RNG.standard_normal((4, 3, 3, 3)).astype(np.float32), "w")
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c"], ["r"]),
    ]
    inits = [w]
    if opset >= 18:
        inits.append(numpy_helper.from_array(np.array([2], np.int64), "axes"))
        nodes.append(helper.make_node("ReduceMean", ["r", "axes"], ["m"], keepdims=1))
        nodes.append(helper.make_node("Split", ["m"], ["a", "b"], axis=1, num_outputs=2))
    else:
        nodes.append(helper.make_node("ReduceMean", ["r"], ["m"], axes=[2], keepdims=1))
        nodes.append(helper.make_node("Split", ["m"], ["a", "b"], axis=1))
    inputs = [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3, 8, 8])]
    if defaults_as_inputs:
        inputs.append(helper.make_tensor_value_info("w", onnx.TensorProto.FLOAT, [4, 3, 3, 3]))
    outputs = [helper.make_tensor_value_info(n, onnx.TensorProto.FLOAT, None) for n in "ab"]
    graph = helper.make_graph(nodes, "cnn", inputs, outputs, initializer=inits)
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=ir_version
    )


def _int8_matmul(opset: int = 17) -> onnx.ModelProto:
    """x @ (Cast(int8 W) * scale): a weight shipped as int8 with its float scale."""
    weight = RNG.integers(-127, 127, (16, 8)).astype(np.int8)
    scale = np.array(0.02, np.float32)
    graph = helper.make_graph(
        [
            helper.make_node("Cast", ["wq"], ["wf"], to=onnx.TensorProto.FLOAT),
            helper.make_node("Mul", ["wf", "scale"], ["w"]),
            helper.make_node("MatMul", ["x", "w"], ["y"]),
        ],
        "q",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(weight, "wq"),
            numpy_helper.from_array(scale, "scale"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _generated_conv() -> onnx.ModelProto:
    """The zoo's light_resnet50.onnx in small (IR 3): the Conv weight is
    ConstantOfShape(w_shape) of a [16, 3, 3, 3] shape listed as a graph input, 1.7 KB made
    (over the fold limit)."""
    graph = helper.make_graph(
        [
            helper.make_node(
                "ConstantOfShape",
                ["w_shape"],
                ["w"],
                value=numpy_helper.from_array(np.array([0.02], np.float32)),
            ),
            helper.make_node("Conv", ["x", "w"], ["y"]),
        ],
        "light",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 3, 8, 8]),
            helper.make_tensor_value_info("w_shape", onnx.TensorProto.INT64, [4]),
        ],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([16, 3, 3, 3], np.int64), "w_shape")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 9)], ir_version=3)


def _quantized(activations: bool) -> onnx.ModelProto:
    """x @ DequantizeLinear(int8 W) at opset 17; with ``activations`` x is quantized too
    (QuantizeLinear -> DequantizeLinear, sscd's QDQ form)."""
    nodes = [
        helper.make_node("DequantizeLinear", ["wq", "scale"], ["w"]),
        helper.make_node("MatMul", ["xd" if activations else "x", "w"], ["y"]),
    ]
    if activations:
        nodes[:0] = [
            helper.make_node("QuantizeLinear", ["x", "scale"], ["xq"]),
            helper.make_node("DequantizeLinear", ["xq", "scale"], ["xd"]),
        ]
    graph = helper.make_graph(
        nodes,
        "q",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(RNG.integers(-127, 127, (16, 8)).astype(np.int8), "wq"),
            numpy_helper.from_array(np.array(0.02, np.float32), "scale"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def _run(proto: onnx.ModelProto | Path, feeds: dict[str, np.ndarray]) -> list[np.ndarray]:
    data = proto.read_bytes() if isinstance(proto, Path) else proto.SerializeToString()
    return ort.InferenceSession(data, providers=["CPUExecutionProvider"]).run(None, feeds)


def _optimize(tmp_path: Path, proto: onnx.ModelProto, *args: str) -> tuple[Path, object]:
    src, out = tmp_path / "in.onnx", tmp_path / "out.onnx"
    onnx.save(proto, src)
    result = runner.invoke(app, ["optimize", str(src), "-o", str(out), *args])
    return out, result


@pytest.mark.parametrize("toolchain", sorted(PROFILES))
def test_every_profile_writes_a_model_that_computes_the_same(
    tmp_path: Path, toolchain: str
) -> None:
    proto = _cnn()
    out, result = _optimize(tmp_path, proto, "--for", toolchain, "--input-shape", "x=2,3,8,8")
    assert result.exit_code == 0, result.output
    assert f"--for {toolchain}:" in result.stderr
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    feeds = {"x": RNG.standard_normal((2, 3, 8, 8)).astype(np.float32)}
    for want, got in zip(_run(proto, feeds), _run(out, feeds), strict=True):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    profile = PROFILES[toolchain]
    opset = next(o.version for o in written.opset_import if o.domain in ("", "ai.onnx"))
    if profile.ops:  # every node has a converter at the opset chosen (Split-18 has none)
        assert opset == 17
        for node in written.graph.node:
            since = onnx.defs.get_schema(node.op_type, opset).since_version
            assert since in _ONNX2TORCH[node.op_type], node.op_type
    else:
        assert opset == 18


def test_openvino_computes_what_onnxruntime_does_on_the_profile_output(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    proto = _cnn(opset=11, ir_version=3, defaults_as_inputs=True)
    out, result = _optimize(tmp_path, proto, "--for", "openvino")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert [i.name for i in written.graph.input] == ["x"]  # the weight pinned
    feeds = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    # f32: the CPU plugin may otherwise compute in bf16 where the CPU has it (0.2% off here)
    compiled = ov.compile_model(
        ov.convert_model(str(out)), "CPU", {"INFERENCE_PRECISION_HINT": "f32"}
    )
    got = compiled(feeds)
    for i, want in enumerate(_run(proto, feeds)):
        np.testing.assert_allclose(got[i], want, rtol=1e-4, atol=1e-5)


def test_a_dropout_left_in_training_mode_is_inference_for_every_toolchain_but_onnxruntime(
    tmp_path: Path,
) -> None:
    """torch's dynamo exporter writes Dropout(x, 0.1, training_mode=True) for a model left in
    train(): OpenVINO refuses to convert it; onnxruntime computes it (randomly)."""
    graph = helper.make_graph(
        [
            helper.make_node("Dropout", ["x", "ratio", "on"], ["d"]),
            helper.make_node("Relu", ["d"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 16])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(np.array(0.1, np.float32), "ratio"),
            numpy_helper.from_array(np.array(True), "on"),
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    kept, result = _optimize(tmp_path, proto, "--for", "onnxruntime")
    assert result.exit_code == 0, result.output
    assert [n.op_type for n in onnx.load(kept).graph.node] == ["Dropout", "Relu"]
    out, result = _optimize(tmp_path, proto, "--for", "openvino")
    assert result.exit_code == 0, result.output
    assert "a Dropout left in training mode as inference does" in result.stderr
    assert [n.op_type for n in onnx.load(out).graph.node] == ["Relu"]
    x = RNG.standard_normal((3, 16)).astype(np.float32)
    np.testing.assert_array_equal(_run(out, {"x": x})[0], np.maximum(x, 0))
    ov = pytest.importorskip("openvino")
    with pytest.raises(Exception, match="Dropout"):  # why the profile does it
        ov.convert_model(str(tmp_path / "in.onnx"))
    got = ov.compile_model(ov.convert_model(str(out)), "CPU")({"x": x})
    np.testing.assert_allclose(got[0], np.maximum(x, 0), rtol=0, atol=0)


def _squeeze_if_one() -> onnx.ModelProto:
    """torch's x.squeeze(1) of a dynamic dim: If(dim 1 of x[:, 0:1] == 1, Squeeze, Identity),
    rank 2 or 3: the dim is 0 when x is empty (onnxslim folds it to Squeeze, which then
    fails on empty inputs the original runs)."""

    def branch(name: str, node: onnx.NodeProto, shape: list) -> onnx.GraphProto:
        out = helper.make_tensor_value_info(node.output[0], onnx.TensorProto.FLOAT, shape)
        return helper.make_graph([node], name, [], [out])

    squeeze = helper.make_node("Squeeze", ["s", "one"], ["sq"])
    keep = helper.make_node("Identity", ["s"], ["id"])
    graph = helper.make_graph(
        [
            helper.make_node("Slice", ["x", "zero", "one", "one"], ["s"]),
            helper.make_node("Shape", ["s"], ["shape"]),
            helper.make_node("Gather", ["shape", "one_scalar"], ["dim"], axis=0),
            helper.make_node("Equal", ["dim", "one_scalar"], ["is_one"]),
            helper.make_node(
                "If", ["is_one"], ["y"],
                then_branch=branch("then", squeeze, ["N", 8]),
                else_branch=branch("else", keep, ["N", "S1", 8]),
            ),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", "S", 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(np.array([0], np.int64), "zero"),
            numpy_helper.from_array(np.array([1], np.int64), "one"),
            numpy_helper.from_array(np.array(1, np.int64), "one_scalar"),
        ],
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)


def test_an_if_of_dynamic_rank_stays_and_openvino_is_told_what_fixes_it(tmp_path: Path) -> None:
    ov = pytest.importorskip("openvino")
    proto = _squeeze_if_one()
    out, result = _optimize(tmp_path, proto, "--for", "openvino")
    assert result.exit_code == 0, result.output
    message = " ".join(result.stderr.split())
    assert "If 'If' makes rank 2 or 3 as the input's shape says" in message.replace('"', "'")
    assert "give --input-shape NAME=D1,D2,... for x" in message
    empty = np.zeros((2, 0, 8), np.float32)
    assert _run(out, {"x": empty})[0].shape == (2, 0, 8)  # the empty input still runs
    fixed, result = _optimize(tmp_path, proto, "--for", "openvino", "--input-shape", "x=2,5,8")
    assert result.exit_code == 0, result.output
    assert "makes rank" not in result.stderr
    assert "If" not in [n.op_type for n in onnx.load(fixed).graph.node]
    x = RNG.standard_normal((2, 5, 8)).astype(np.float32)
    got = ov.compile_model(ov.convert_model(str(fixed)), "CPU")({"x": x})
    np.testing.assert_array_equal(got[0], x[:, 0, :])


def test_mnn_computes_what_onnxruntime_does_on_the_profile_output(tmp_path: Path) -> None:
    """MNN's own converter (what ``mnnconvert -f ONNX`` runs) and its module runtime."""
    mnn = pytest.importorskip("MNN")
    tools = pytest.importorskip("_tools")  # the mnn wheel's converter, as mnnconvert calls it
    proto = _cnn(opset=11, ir_version=3, defaults_as_inputs=True)
    out, result = _optimize(tmp_path, proto, "--for", "mnn")
    assert result.exit_code == 0, result.output
    assert [i.name for i in onnx.load(out).graph.input] == ["x"]  # the weight pinned
    converted = tmp_path / "out.mnn"
    tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", str(out),
                      "--MNNModel", str(converted), "--bizCode", "test"])  # fmt: skip
    assert converted.stat().st_size > 0
    module = mnn.nn.load_module_from_file(str(converted), ["x"], ["a", "b"])
    x = RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)
    expr = mnn.expr
    got = module.forward([expr.const(x, list(x.shape), expr.NCHW, expr.float)])
    for var, want in zip(got, _run(proto, {"x": x}), strict=True):
        plain = expr.convert(var, expr.NCHW) if var.data_format == expr.NC4HW4 else var
        np.testing.assert_allclose(np.array(plain.read()), want, rtol=1e-4, atol=1e-5)


def test_new_zeros_gets_its_fill_written_and_mnn_computes_zeros(tmp_path: Path) -> None:
    """torch's x.new_zeros(b, 2 * s): ConstantOfShape without ``value``, which MNN 3.6 leaves
    uninitialized (5.5e18 one run, 1e-43 the next); written out, MNN computes 0."""
    pytest.importorskip("MNN")
    graph = helper.make_graph(
        [
            helper.make_node("Shape", ["x"], ["b"], start=0, end=1),
            helper.make_node("Shape", ["x"], ["s"], start=1, end=2),
            helper.make_node("Mul", ["s", "two"], ["s2"]),
            helper.make_node("Concat", ["b", "s2"], ["shape"], axis=0),
            helper.make_node("ConstantOfShape", ["shape"], ["zeros"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["B", "S", 8])],
        [helper.make_tensor_value_info("zeros", onnx.TensorProto.FLOAT, None)],
        initializer=[numpy_helper.from_array(np.array([2], np.int64), "two")],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=8)
    out, result = _optimize(tmp_path, proto)
    assert result.exit_code == 0, result.output
    fill = next(n for n in onnx.load(out).graph.node if n.op_type == "ConstantOfShape")
    value = numpy_helper.to_array(helper.get_attribute_value(fill.attribute[0]))
    assert fill.attribute[0].name == "value" and value.dtype == np.float32 and value[0] == 0
    x = RNG.standard_normal((2, 3, 8)).astype(np.float32)
    assert _mnn_run(tmp_path, out, x, "zeros").tolist() == np.zeros((2, 6)).tolist()


def _mnn_run(tmp_path: Path, model: Path, x: np.ndarray, output: str) -> np.ndarray:
    """What ``mnnconvert -f ONNX`` then MNN's module runtime make of ``model`` on ``x``."""
    mnn = pytest.importorskip("MNN")
    tools = pytest.importorskip("_tools")
    converted = tmp_path / f"{model.stem}.mnn"
    tools.mnnconvert(["mnnconvert", "-f", "ONNX", "--modelFile", str(model),
                      "--MNNModel", str(converted), "--bizCode", "test"])  # fmt: skip
    module = mnn.nn.load_module_from_file(str(converted), ["x"], [output])
    expr = mnn.expr
    got = module.forward([expr.const(x, list(x.shape), expr.NCHW, expr.float)])[0]
    plain = expr.convert(got, expr.NCHW) if got.data_format == expr.NC4HW4 else got
    return np.array(plain.read())


def test_mnn_computes_the_erf_gelu_exactly_in_the_profile_order(tmp_path: Path) -> None:
    """MNN turns x * (erf(x / sqrt 2) + 1) * 0.5 into its GELU kernel, whose erf is
    approximate; (x * 0.5) * (erf + 1) it computes op by op."""
    pytest.importorskip("MNN")
    consts = {"root": 1.4142135381698608, "one": 1.0, "half": 0.5}
    graph = helper.make_graph(
        [
            helper.make_node("Div", ["x", "root"], ["d"]),
            helper.make_node("Erf", ["d"], ["e"]),
            helper.make_node("Add", ["e", "one"], ["a"]),
            helper.make_node("Mul", ["x", "a"], ["m"]),
            helper.make_node("Mul", ["m", "half"], ["y"]),
        ],
        "g",
        [helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [1, 64, 8, 8])],
        [helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, None)],
        initializer=[
            numpy_helper.from_array(np.array(v, np.float32), k) for k, v in consts.items()
        ],
    )
    proto = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], ir_version=7)
    out, result = _optimize(tmp_path, proto, "--for", "mnn")
    assert result.exit_code == 0, result.output
    x = RNG.standard_normal((1, 64, 8, 8)).astype(np.float32)
    want = _run(proto, {"x": x})[0]
    np.testing.assert_allclose(_mnn_run(tmp_path, out, x, "y"), want, rtol=1e-5, atol=1e-6)
    plain = np.abs(_mnn_run(tmp_path, tmp_path / "in.onnx", x, "y") - want).max()
    assert plain > 1e-4  # why the profile does it: MNN's own GELU on the original


def test_static_shape_toolchains_name_the_inputs_that_need_one(tmp_path: Path) -> None:
    for toolchain in ("ncnn", "tflite"):
        out, result = _optimize(tmp_path, _cnn(), "--for", toolchain)
        assert result.exit_code == 1
        assert "needs static input shapes" in result.stderr
        assert "x [?,3,8,8]" in result.stderr
        assert not out.exists()
    out, result = _optimize(tmp_path, _cnn(), "--for", "ncnn", "--input-shape", "x=1,3,8,8")
    assert result.exit_code == 0, result.output
    dims = onnx.load(out).graph.input[0].type.tensor_type.shape.dim
    assert [d.dim_value for d in dims] == [1, 3, 8, 8]


def test_the_default_keeps_initializer_inputs_and_converters_pin_them(tmp_path: Path) -> None:
    proto = _cnn(opset=11, ir_version=3, defaults_as_inputs=True)
    out, result = _optimize(tmp_path, proto)
    assert result.exit_code == 0, result.output
    assert [i.name for i in onnx.load(out).graph.input] == ["x", "w"]
    for toolchain in ("mnn", "torch", "tensorrt"):
        out, result = _optimize(tmp_path, proto, "--for", toolchain)
        assert result.exit_code == 0, result.output
        assert [i.name for i in onnx.load(out).graph.input] == ["x"], toolchain


def test_int8_weights_stay_integer_or_become_float_as_the_toolchain_computes_them(
    tmp_path: Path,
) -> None:
    proto = _int8_matmul()
    feeds = {"x": RNG.standard_normal((2, 16)).astype(np.float32)}
    (want,) = _run(proto, feeds)
    out, result = _optimize(tmp_path, proto, "--for", "openvino")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert [n.op_type for n in written.graph.node] == ["DequantizeLinear", "MatMul"]
    # the same bits in onnxruntime without its MatMulNBits rewrite (README, --weights)
    plain = ort.SessionOptions()
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(str(out), plain, providers=["CPUExecutionProvider"])
    np.testing.assert_array_equal(session.run(None, feeds)[0], want)
    out, result = _optimize(tmp_path, proto, "--for", "torch")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert [n.op_type for n in written.graph.node] == ["MatMul"]  # onnx2torch has no DQ
    assert written.graph.initializer[0].data_type == onnx.TensorProto.FLOAT
    np.testing.assert_allclose(_run(out, feeds)[0], want, rtol=1e-6, atol=1e-6)


def test_a_generated_conv_weight_becomes_an_initializer_for_torch(tmp_path: Path) -> None:
    """onnx2torch reads a Conv's W from graph.initializers ("KeyError: 'gpu_0/conv1_w_0'")."""
    proto = _generated_conv()
    feeds = {"x": RNG.standard_normal((1, 3, 8, 8)).astype(np.float32)}
    (want,) = _run(proto, feeds)
    out, result = _optimize(tmp_path, proto, "--pin-defaults")
    assert result.exit_code == 0, result.output
    assert [n.op_type for n in onnx.load(out).graph.node] == ["ConstantOfShape", "Conv"]
    out, result = _optimize(tmp_path, proto, "--for", "torch")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert [i.name for i in written.graph.input] == ["x"]
    (conv,) = written.graph.node
    assert conv.op_type == "Conv"
    (weight,) = [t for t in written.graph.initializer if t.name == conv.input[1]]
    array = numpy_helper.to_array(weight)
    assert array.shape == (16, 3, 3, 3)
    assert np.all(array == np.float32(0.02))
    np.testing.assert_allclose(_run(out, feeds)[0], want, rtol=1e-6, atol=1e-6)


def test_torch_keeps_the_opset_where_weight_dequantization_folds(tmp_path: Path) -> None:
    """DequantizeLinear has no converter in onnx2torch and no opset below 10: a weight's one
    folds under weights=float, so opset 17 stays; one of an activation has nowhere to go."""
    proto = _quantized(activations=False)
    feeds = {"x": RNG.standard_normal((2, 16)).astype(np.float32)}
    plain = ort.SessionOptions()  # no MatMulNBits rewrite, which rounds x to int8
    plain.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    session = ort.InferenceSession(
        proto.SerializeToString(), plain, providers=["CPUExecutionProvider"]
    )
    (want,) = session.run(None, feeds)
    out, result = _optimize(tmp_path, proto, "--for", "torch")
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    assert [(o.domain, o.version) for o in written.opset_import] == [("", 17)]
    assert [n.op_type for n in written.graph.node] == ["MatMul"]
    np.testing.assert_allclose(_run(out, feeds)[0], want, rtol=1e-6, atol=1e-6)
    out, result = _optimize(tmp_path, _quantized(activations=True), "--for", "torch")
    assert result.exit_code == 1
    assert "torch has no converter for DequantizeLinear-13, QuantizeLinear-13" in result.stderr
    assert "does not exist at opset 9" not in result.stderr


def test_opset_out_of_a_profile_range_and_unknown_toolchains_are_refused(tmp_path: Path) -> None:
    out, result = _optimize(tmp_path, _cnn(), "--for", "torch", "--opset", "22")
    assert result.exit_code == 1
    assert "torch takes opsets 9..21" in result.stderr
    out, result = _optimize(tmp_path, _cnn(), "--for", "coreml")
    assert result.exit_code == 2
    assert "no such toolchain" in result.output


def test_passes_for_lists_what_the_profile_changes() -> None:
    result = runner.invoke(app, ["passes", "--for", "torch", "--json", "-"])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["toolchain"]["name"] == "torch"
    changes = " ".join(data["toolchain"]["changes"])
    assert "opset in 9..21" in changes and "float weights" in changes
    assert "pins initializers" in changes
    assert "folds weights computed from constants for Conv, ConvTranspose" in changes
    result = runner.invoke(app, ["passes", "--for", "ncnn"])
    assert result.exit_code == 0
    assert "needs a static shape for every input" in result.stdout


def test_ncnn_gets_one_file_even_from_a_model_with_external_data(tmp_path: Path) -> None:
    """pnnx loads the .onnx alone ("External file: model.onnx.data not found")."""
    proto = _cnn()
    src = tmp_path / "ext.onnx"
    onnx.save(proto, src, save_as_external_data=True, size_threshold=0, location="ext.onnx.data")
    out = tmp_path / "out.onnx"
    args = ["optimize", str(src), "-o", str(out), "--input-shape", "x=1,3,8,8"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert (tmp_path / "out.onnx.data").exists()  # the default keeps the input's layout
    (tmp_path / "out.onnx.data").unlink()
    result = runner.invoke(app, [*args, "--for", "ncnn"])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "out.onnx.data").exists()
    assert all(not t.external_data for t in onnx.load(out).graph.initializer)
