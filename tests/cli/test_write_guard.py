"""The guard on every write: no command publishes a model onnx's checker refuses where it
accepted the input (the paddle2onnx Loop whose [1] counters were rewritten to scalars)."""

from __future__ import annotations

from pathlib import Path

import onnx
import pytest
from onnx import parser
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.ir import DType, TensorType
from onnxforge.shape_infer.rules import control

# The body declares its counters as [1], as paddle2onnx writes them: onnx's checker compares
# the condition with the outer cond (bool[1]) and onnxruntime feeds both as [1].
LOOP = """<ir_version: 8, opset_import: ["" : 13]>
g (float[N] x) => (float[N] y) <int64[1] m = {3}, bool[1] c = {1}> {
    y = Loop(m, c, x) <body = b (int64[1] i, bool[1] ci, float[N] xi)
                                => (bool[1] co, float[N] xo) {
        co = Identity(ci)
        one = Constant <value = float[1] {1}> ()
        xo = Add(xi, one)
    }>
}"""

COMMANDS = [
    (["infer"], "infer-shapes"),
    (["fold"], "replace-stale-types"),
    (["convert", "--opset", "18"], "replace-stale-types"),
    (["optimize"], "replace-stale-types"),
]


@pytest.fixture
def loop_model(tmp_path: Path) -> Path:
    path = tmp_path / "loop.onnx"
    model = parser.parse_model(LOOP)
    onnx.checker.check_model(model, full_check=True)
    onnx.save(model, path)
    return path


@pytest.mark.parametrize(("args", "culprit"), COMMANDS, ids=str)
def test_every_command_writes_a_loop_with_rank_1_counters_that_the_checker_takes(
    loop_model: Path, tmp_path: Path, args: list[str], culprit: str
) -> None:
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, [*args, str(loop_model), "-o", str(out)])
    assert result.exit_code == 0, result.output
    written = onnx.load(out)
    onnx.checker.check_model(written, full_check=True)
    body = written.graph.node[0].attribute[0].g
    assert [len(i.type.tensor_type.shape.dim) for i in body.input[:2]] == [1, 1]


@pytest.mark.parametrize(("args", "culprit"), COMMANDS, ids=str)
def test_a_result_the_checker_refuses_is_never_written_and_the_pass_is_named(
    loop_model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    culprit: str,
) -> None:
    # Inference as it was before the fix: the spec's scalar counters replace the declaration.
    monkeypatch.setattr(control, "_counter", lambda declared, dtype: TensorType(dtype, ()))
    out = tmp_path / "out.onnx"
    before = loop_model.read_bytes()
    result = CliRunner().invoke(app, [*args, str(loop_model), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert not out.exists()
    assert loop_model.read_bytes() == before
    message = result.output
    assert "onnx's checker accepts the input but not the result" in message
    assert f"after pass {culprit}" in message
    assert "Loop" in message and "nothing written" in message
    assert "Traceback" not in message


def test_a_result_is_written_when_the_input_fails_the_checker_too(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The input already has scalar counters against a bool[1] cond: the checker refuses it, so
    # a result it refuses for the same reason is no worse and is written.
    model = parser.parse_model(LOOP.replace("bool[1] ci", "bool ci"))
    with pytest.raises((onnx.checker.ValidationError, onnx.shape_inference.InferenceError)):
        onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "in.onnx"
    onnx.save(model, path)
    monkeypatch.setattr(control, "_counter", lambda declared, dtype: TensorType(dtype, ()))
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["infer", str(path), "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert out.exists()


def test_the_checker_copy_leaves_weights_out_but_keeps_their_types() -> None:
    import numpy as np

    from onnxforge.io import checkable_proto, from_proto

    w = onnx.numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
    shape = onnx.numpy_helper.from_array(np.array([-1, 64], np.int64), "shape")
    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node("MatMul", ["x", "w"], ["y"]),
            onnx.helper.make_node("Reshape", ["y", "shape"], ["z"]),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 64])],
        [onnx.helper.make_tensor_value_info("z", onnx.TensorProto.FLOAT, ["N", 64])],
        [w, shape],
    )
    model = from_proto(onnx.helper.make_model(graph))
    proto = checkable_proto(model)
    assert [t.name for t in proto.graph.initializer] == ["shape"]
    assert [i.name for i in proto.graph.input] == ["x", "w"]
    assert TensorType(DType.FLOAT, (64, 64)).shape == tuple(
        d.dim_value for d in proto.graph.input[1].type.tensor_type.shape.dim
    )
    onnx.checker.check_model(proto, full_check=True)


# -- accepted as onnxruntime accepts them (found in the wild corpus) ------------------------


def test_an_ir_3_initializer_that_is_not_a_graph_input_is_worked_on(tmp_path: Path) -> None:
    """onnxruntime's own datasets/mul_1.onnx: IR 3 wants every initializer to be a graph input
    too, but onnxruntime runs it (a constant), so every command works on it."""
    ort = pytest.importorskip("onnxruntime")
    import numpy as np

    graph = onnx.helper.make_graph(
        [onnx.helper.make_node("Mul", ["x", "W"], ["y"])],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [3, 2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [3, 2])],
        [onnx.numpy_helper.from_array(np.full((3, 2), 2.0, np.float32), "W")],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 7)])
    model.ir_version = 3
    path = tmp_path / "mul.onnx"
    onnx.save(model, path)
    for args in (["infer"], ["fold"], ["optimize"], ["convert", "--opset", "13"]):
        out = tmp_path / f"{args[0]}.onnx"
        result = CliRunner().invoke(app, [*args, str(path), "-o", str(out)])
        assert result.exit_code == 0, (args, result.output)
        y = ort.InferenceSession(str(out)).run(None, {"x": np.ones((3, 2), np.float32)})[0]
        assert (y == 2.0).all()


def test_convert_takes_a_model_that_imports_only_ai_onnx_ml(tmp_path: Path) -> None:
    """OnnxMLTools 1.2's logreg_iris imports ai.onnx.ml alone: nothing of ai.onnx to convert."""
    node = onnx.helper.make_node("Normalizer", ["x"], ["y"], domain="ai.onnx.ml", norm="L1")
    graph = onnx.helper.make_graph(
        [node],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, ["N", 3])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, ["N", 3])],
    )
    model = onnx.helper.make_model(
        graph, opset_imports=[onnx.helper.make_opsetid("ai.onnx.ml", 1)]
    )
    model.ir_version = 3
    path = tmp_path / "ml.onnx"
    onnx.save(model, path)
    out = tmp_path / "out.onnx"
    result = CliRunner().invoke(app, ["convert", str(path), "--opset", "13", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert [(o.domain, o.version) for o in onnx.load(out).opset_import] == [("ai.onnx.ml", 1)]


def test_a_constant_folded_into_an_ir_3_model_makes_it_ir_4(tmp_path: Path) -> None:
    """PyTorch 0.3's exports (onnx's backend data, test_operator_repeat) are IR 3, where every
    initializer must also be a graph input: a folded constant is not one, so the result is
    written as IR 4, which onnx's checker takes, instead of being refused by the guard."""
    import numpy as np

    graph = onnx.helper.make_graph(
        [
            onnx.helper.make_node(
                "Constant",
                [],
                ["k"],
                value=onnx.numpy_helper.from_array(np.array([1.0, 2.0], np.float32)),
            ),
            onnx.helper.make_node("Add", ["k", "k"], ["k2"]),
            onnx.helper.make_node("Mul", ["x", "k2"], ["y"]),
        ],
        "g",
        [onnx.helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2])],
        [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [2])],
    )
    model = onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 6)])
    model.ir_version = 3
    onnx.checker.check_model(model, full_check=True)
    path = tmp_path / "ir3.onnx"
    onnx.save(model, path)
    for command in ("fold", "optimize"):
        out = tmp_path / f"{command}.onnx"
        result = CliRunner().invoke(app, [command, str(path), "-o", str(out)])
        assert result.exit_code == 0, result.output
        written = onnx.load(out)
        assert written.ir_version == 4
        assert [t.name for t in written.graph.initializer]
        onnx.checker.check_model(written, full_check=True)


def test_the_guard_checks_a_weighty_model_without_its_weights_and_a_large_graph_by_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import numpy as np

    from onnxforge.io import Guard, from_proto

    def model(nodes: int, weight: int) -> onnx.ModelProto:
        made = [onnx.helper.make_node("Relu", [f"v{i}"], [f"v{i + 1}"]) for i in range(nodes)]
        made.append(onnx.helper.make_node("Add", [f"v{nodes}", "w"], ["y"]))
        graph = onnx.helper.make_graph(
            made,
            "g",
            [onnx.helper.make_tensor_value_info("v0", onnx.TensorProto.FLOAT, [weight])],
            [onnx.helper.make_tensor_value_info("y", onnx.TensorProto.FLOAT, [weight])],
            [onnx.numpy_helper.from_array(np.zeros(weight, np.float32), "w")],
        )
        return onnx.helper.make_model(graph, opset_imports=[onnx.helper.make_opsetid("", 17)])

    seen: list[str] = []
    monkeypatch.setattr(Guard, "check", lambda self, m, o: seen.append("proto"))
    monkeypatch.setattr(Guard, "check_file", lambda self, w, o: seen.append("file"))
    guard = Guard(tmp_path / "in.onnx")
    guard.check_written(from_proto(model(3, 1 << 20)), "w.onnx", "out", external=False)
    guard.check_written(from_proto(model(300, 4)), "w.onnx", "out", external=False)
    guard.check_written(from_proto(model(300, 4)), "w.onnx", "out", external=True)
    assert seen == ["proto", "file", "proto"]
