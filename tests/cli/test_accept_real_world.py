"""What exporters we did not write produce is accepted by every command, as onnxruntime
accepts it: paddle2onnx's ``-1`` dims, a PyTorch 1.x export's stale declared shapes, tf2onnx's
``unk__214`` batch name, paddle's dotted dim names. Judged by onnxruntime: it runs the
original, every command exits 0, outputs agree, and every written shape is what it observes."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.shape_infer.symbolic import evaluate

ort = pytest.importorskip("onnxruntime")
runner = CliRunner()
RNG = np.random.default_rng(0)


def _weight(name: str, *shape: int) -> onnx.TensorProto:
    return numpy_helper.from_array(RNG.standard_normal(shape).astype(np.float32), name)


def _model(graph: onnx.GraphProto, opset: int) -> onnx.ModelProto:
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    model.ir_version = 7
    return model


def paddle_cnn() -> tuple[onnx.ModelProto, list[dict[str, int]]]:
    """paddle2onnx: every dynamic dim declared ``dim_value: -1``, on inputs, outputs and
    value_info; two stride-2 convolutions over the unknown spatial dims."""
    dims = [-1, 3, -1, -1]
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w2"], ["c2"], kernel_shape=[3, 3], strides=[2, 2]),
        helper.make_node("GlobalAveragePool", ["c2"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "paddle",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 4, 1, 1])],
        [_weight("w1", 8, 3, 3, 3), _weight("w2", 4, 8, 3, 3)],
        value_info=[helper.make_tensor_value_info("c1", TensorProto.FLOAT, [-1, 8, -1, -1])],
    )
    return _model(graph, 11), [{"x": (2, 3, 17, 23)}, {"x": (1, 3, 32, 9)}]  # type: ignore[list-item]


def torch19_stale() -> tuple[onnx.ModelProto, list[dict[str, int]]]:
    """PyTorch 1.9: value_info says ``float[1, seqlen]`` for a value the graph computes as
    ``[batch, seqlen, 4]`` (onnxruntime warns and runs it)."""
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="proj"),
        helper.make_node("Relu", ["h"], ["y"], name="act"),
    ]
    graph = helper.make_graph(
        nodes,
        "stale",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", "seqlen", 16])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", "seqlen", 4])],
        [_weight("w", 16, 4)],
        value_info=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "seqlen"])],
    )
    return _model(graph, 13), [{"x": (2, 5, 16)}, {"x": (3, 1, 16)}]  # type: ignore[list-item]


def tf2onnx_unk() -> tuple[onnx.ModelProto, list[dict[str, int]]]:
    """tf2onnx: the batch dim is named ``unk__214``; a Reshape to [-1, 32, 1] keeps it."""
    shape = numpy_helper.from_array(np.array([-1, 32, 1], np.int64), "shape")
    nodes = [
        helper.make_node("Reshape", ["x", "shape"], ["r"]),
        helper.make_node("Transpose", ["r"], ["t"], perm=[0, 2, 1]),
        helper.make_node("Concat", ["t", "t"], ["y"], axis=0),
    ]
    graph = helper.make_graph(
        nodes,
        "tf2onnx",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["unk__214", 32])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [shape],
    )
    return _model(graph, 13), [{"x": (3, 32)}, {"x": (7, 32)}]  # type: ignore[list-item]


def dotted_names() -> tuple[onnx.ModelProto, list[dict[str, int]]]:
    """PaddleOCR: dims named ``p2o.DynamicDimension.1``, ``batch size``, ``?``."""
    dims = ["batch size", 3, "p2o.DynamicDimension.1", "?"]
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1], strides=[2, 2]),
        helper.make_node("MaxPool", ["c"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
        helper.make_node("Shape", ["p"], ["s"]),
        helper.make_node("Flatten", ["p"], ["y"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "ocr",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [
            helper.make_tensor_value_info("y", TensorProto.FLOAT, None),
            helper.make_tensor_value_info("s", TensorProto.INT64, None),
        ],
        [_weight("w", 4, 3, 3, 3)],
    )
    return _model(graph, 13), [{"x": (2, 3, 20, 9)}, {"x": (1, 3, 7, 16)}]  # type: ignore[list-item]


MODELS: dict[str, Callable[[], tuple[onnx.ModelProto, list[dict[str, int]]]]] = {
    "paddle_cnn": paddle_cnn,
    "torch19_stale": torch19_stale,
    "tf2onnx_unk": tf2onnx_unk,
    "dotted_names": dotted_names,
}
COMMANDS = {
    "infer": ["infer"],
    "fold": ["fold"],
    "convert13": ["convert", "--opset", "13"],
    "convert18": ["convert", "--opset", "18"],
    "convert21": ["convert", "--opset", "21"],
    "optimize": ["optimize"],
}


def _run(path: Path, feeds: dict[str, np.ndarray], names: list[str]) -> dict[str, np.ndarray]:
    session = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    return dict(zip(names, session.run(names, feeds), strict=True))


def _exposed(path: Path, out: Path) -> list[str]:
    """A copy of the model with every value a graph output, to observe its shape."""
    model = onnx.load(path)
    have = {o.name for o in model.graph.output}
    for node in model.graph.node:
        for name in node.output:
            if name and name not in have:
                model.graph.output.add().name = name
                have.add(name)
    onnx.save(model, out)
    return [o.name for o in model.graph.output]


def _declared(model: onnx.ModelProto) -> dict[str, list[int | str | None]]:
    found = {}
    for vi in [*model.graph.value_info, *model.graph.output, *model.graph.input]:
        if vi.type.tensor_type.HasField("shape"):
            found[vi.name] = [
                d.dim_value
                if d.HasField("dim_value")
                else d.dim_param
                if d.HasField("dim_param")
                else None
                for d in vi.type.tensor_type.shape.dim
            ]
    return found


@pytest.mark.parametrize("command", COMMANDS)
@pytest.mark.parametrize("name", MODELS)
def test_every_command_accepts_what_onnxruntime_runs(
    tmp_path: Path, name: str, command: str
) -> None:
    proto, sizes = MODELS[name]()
    src = tmp_path / f"{name}.onnx"
    onnx.save(proto, src)
    before = src.read_bytes()
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, [*COMMANDS[command], str(src), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert src.read_bytes() == before  # the input is never modified
    written = onnx.load(out)
    onnx.checker.check_model(written)
    outputs = [o.name for o in proto.graph.output]
    exposed = tmp_path / "exposed.onnx"
    every = _exposed(out, exposed)
    declared = _declared(written)
    for size in sizes:
        feeds = {k: RNG.standard_normal(v).astype(np.float32) for k, v in size.items()}
        want = _run(src, feeds, outputs)
        got = _run(exposed, feeds, every)
        for key in outputs:
            np.testing.assert_allclose(got[key], want[key], rtol=1e-4, atol=1e-5)
        # Bind each input's symbols from the feed, then every written shape must evaluate to
        # what onnxruntime observes; a name bound twice must get the same number.
        bindings: dict[str, int] = {}
        for vi in proto.graph.input:
            for dim, actual in zip(declared[vi.name], feeds[vi.name].shape, strict=True):
                if isinstance(dim, str) and dim:
                    assert bindings.setdefault(dim, actual) == actual
        for value, dims in declared.items():
            if value in got and dims is not None:
                observed = got[value].shape
                assert len(dims) == len(observed), (value, dims, observed)
                for dim, actual in zip(dims, observed, strict=True):
                    if isinstance(dim, str) and dim:
                        value_of = evaluate(dim, bindings)
                        if value_of is None:  # a name inference gave: bound on first sight
                            value_of = bindings.setdefault(dim, actual)
                        assert value_of == actual, (value, dims, observed)
                    elif isinstance(dim, int) and dim >= 0:  # -1: paddle's unknown, as read
                        assert dim == actual, (value, dims, observed)


def _written(tmp_path: Path, make: Callable[[], tuple[onnx.ModelProto, object]], command: str):
    """The dims each value has in what ``command`` writes for the model ``make`` builds."""
    src = tmp_path / "model.onnx"
    onnx.save(make()[0], src)
    out = tmp_path / "out.onnx"
    assert runner.invoke(app, [command, str(src), "-o", str(out)]).exit_code == 0
    return _declared(onnx.load(out))


def test_negative_dims_are_written_back_as_they_were(tmp_path: Path) -> None:
    assert _written(tmp_path, paddle_cnn, "fold")["x"] == [-1, 3, -1, -1]


def test_inferred_spatial_dims_are_expressions_of_the_models_own_names(tmp_path: Path) -> None:
    declared = _written(tmp_path, dotted_names, "infer")
    assert declared["c"] == [
        "batch size",
        4,
        "floor((p2o.DynamicDimension.1+1)/2)",
        "floor(('?'+1)/2)",  # a name the expression syntax cannot hold is quoted
    ]
    assert declared["y"][0] == "batch size"


def test_a_tf2onnx_unk_name_is_kept_through_a_reshape(tmp_path: Path) -> None:
    declared = _written(tmp_path, tf2onnx_unk, "infer")
    assert declared["r"] == ["unk__214", 32, 1]
    assert declared["y"] == ["2*unk__214", 1, 32]


@pytest.mark.parametrize("command", ["infer", "fold", "convert18", "optimize"])
def test_a_stale_declaration_is_one_warning_and_replaced(tmp_path: Path, command: str) -> None:
    proto, _ = torch19_stale()
    src = tmp_path / "stale.onnx"
    onnx.save(proto, src)
    out = tmp_path / "out.onnx"
    extra = ["--json", str(tmp_path / "r.json")] if command == "optimize" else ["--json"]
    result = runner.invoke(app, [*COMMANDS[command], str(src), "-o", str(out), *extra])
    assert result.exit_code == 0, result.output
    warnings = [ln for ln in result.stderr.splitlines() if ln.startswith("warning:")]
    assert warnings == [
        f"warning: {src}: value 'h' is declared float[1,seqlen] but node 'proj' (MatMul-13) "
        "computes float[batch,seqlen,4]; the inferred type replaces it"
    ]
    report = json.loads(
        (tmp_path / "r.json").read_text() if command == "optimize" else result.stdout
    )
    assert report["stale_types"] == 1
    assert _declared(onnx.load(out))["h"] == ["batch", "seqlen", 4]


@pytest.mark.parametrize("command", ["infer", "fold", "convert18", "optimize"])
def test_strict_refuses_a_stale_declaration_and_writes_nothing(
    tmp_path: Path, command: str
) -> None:
    proto, _ = torch19_stale()
    src = tmp_path / "stale.onnx"
    onnx.save(proto, src)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, [*COMMANDS[command], str(src), "-o", str(out), "--strict"])
    assert result.exit_code == 1, result.output
    assert "'h'" in result.stderr and "float[1,seqlen]" in result.stderr
    assert "Traceback" not in result.output
    assert not out.exists()
