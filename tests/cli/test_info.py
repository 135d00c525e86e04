"""`onnxforge info`: tables and JSON for good models, one clear line and exit 2 for unreadable
input, each problem and exit 1 for invalid models; never a traceback."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import onnx
import pytest
from onnx import TensorProto, helper
from suites import LIGHT_MODELS
from typer.testing import CliRunner

from onnxforge.cli import app

runner = CliRunner()


def _invoke(*args: str):
    result = runner.invoke(app, list(args))
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_info_describes_every_zoo_model(light_model: Path) -> None:
    result = _invoke("info", str(light_model))
    assert result.exit_code == 0, result.output
    proto = onnx.load(light_model)
    assert f"{len(proto.graph.node)} ({len(proto.graph.node)} with subgraphs)" in result.stdout
    assert "ai.onnx 9" in result.stdout
    assert proto.graph.output[0].name in result.stdout


def test_info_json_matches_the_model(light_model: Path) -> None:
    result = _invoke("info", str(light_model), "--json")
    assert result.exit_code == 0
    data = json.loads(result.stdout)
    proto = onnx.load(light_model)
    assert data["nodes"] == len(proto.graph.node)
    assert sum(data["op_types"].values()) == len(proto.graph.node)
    assert data["opset_imports"] == {"ai.onnx": 9}
    assert data["initializers"] == len(proto.graph.initializer)
    weights = {t.name for t in proto.graph.initializer}
    assert [i["name"] for i in data["inputs"]] == [
        i.name for i in proto.graph.input if i.name not in weights
    ]
    assert data["problems"] == []


def _corrupt(source: Path, folder: Path) -> dict[str, tuple[Path, str]]:
    data = source.read_bytes()
    flipped = bytearray(data)
    flipped[2] ^= 0xFF
    cases = {
        "truncated": (data[: len(data) // 3], "truncated or corrupted"),
        "bit-flipped": (bytes(flipped), "not an ONNX model"),
        "empty": (b"", "is empty"),
        "text": (b"hello, world\n", "not an ONNX model"),
    }
    made = {}
    for name, (content, message) in cases.items():
        path = folder / f"{name}.onnx"
        path.write_bytes(content)
        made[name] = (path, message)
    (folder / "a_folder.onnx").mkdir()
    made["folder"] = (folder / "a_folder.onnx", "is a directory")
    made["missing"] = (folder / "missing.onnx", "no such file")
    return made


@pytest.mark.parametrize(
    "case", ["truncated", "bit-flipped", "empty", "text", "folder", "missing"]
)
def test_unreadable_input_is_one_line_and_exit_2(case: str, tmp_path: Path) -> None:
    path, message = _corrupt(LIGHT_MODELS[0], tmp_path)[case]
    result = _invoke("info", str(path))
    assert result.exit_code == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and str(path) in lines[0] and message in lines[0], result.stderr
    assert "Traceback" not in result.output


def _invalid_model(kind: str) -> onnx.ModelProto:
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
    nodes = {
        "cycle": [
            helper.make_node("Relu", ["b"], ["a"], name="r1"),
            helper.make_node("Relu", ["a"], ["b"], name="r2"),
            helper.make_node("Add", ["x", "b"], ["y"], name="add"),
        ],
        "undefined": [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")],
        "two-producers": [
            helper.make_node("Relu", ["x"], ["y"], name="first"),
            helper.make_node("Neg", ["x"], ["y"], name="second"),
        ],
    }[kind]
    graph = helper.make_graph(nodes, "g", [x], [y])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)])


@pytest.mark.parametrize(
    ("kind", "problems"),
    [
        ("cycle", ["cycle through Relu 'r1', Relu 'r2'"]),
        ("undefined", ["Add 'add' input 1 'ghost' is used but never produced"]),
        ("two-producers", ["the name 'y' is defined twice: by Relu 'first' and by Neg 'second'"]),
    ],
)
def test_invalid_model_lists_its_problems_and_exits_1(kind, problems, tmp_path: Path) -> None:
    path = tmp_path / f"{kind}.onnx"
    onnx.save(_invalid_model(kind), path)
    result = _invoke("info", str(path))
    assert result.exit_code == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == len(problems)
    for line, problem in zip(lines, problems, strict=True):
        assert line.startswith(f"{path}: ") and problem in line
    assert "Traceback" not in result.output


def test_python_dash_m_runs_the_cli(tmp_path: Path) -> None:
    ok = subprocess.run(
        [sys.executable, "-m", "onnxforge", "info", "--json", str(LIGHT_MODELS[0])],
        capture_output=True,
        text=True,
        check=False,
    )
    assert ok.returncode == 0 and json.loads(ok.stdout)["ir_version"] == 3
    bad = subprocess.run(
        [sys.executable, "-m", "onnxforge", "info", str(tmp_path / "nope.onnx")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert bad.returncode == 2 and bad.stderr.strip().endswith("nope.onnx: no such file")


def test_symbolic_shapes_print_literally() -> None:
    example = Path(__file__).resolve().parents[2] / "examples" / "tiny_convnet.onnx"
    result = _invoke("info", str(example))
    assert result.exit_code == 0
    assert "[batch, 3, 16, 16]" in result.stdout and "[batch, 10]" in result.stdout
