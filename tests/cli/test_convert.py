"""`onnxforge convert`: exit codes, --dry-run, --json, nothing written on failure, the input
never modified."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import onnx
from onnx import parser
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.testing import run_onnxruntime

runner = CliRunner()
SUB6 = """<ir_version: 3, opset_import: ["" : 6]>
g (float[N,3,4,5] a, float[3,4] b) => (float[N,3,4,5] c) {
    c = Sub <broadcast = 1, axis = 1> (a, b)
}"""
SPLIT13 = """<ir_version: 8, opset_import: ["" : 13]>
g (float[N,4] x, int64[2] s) => (float[A,4] y, float[B,4] z, float[C,4] u, float[D,4] v) {
    y, z = Split <axis = 0> (x, s)
    u, v = Split <axis = 0> (x, s)
}"""


def _write(tmp_path: Path, text: str, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    proto = parser.parse_model(text)
    for i, node in enumerate(proto.graph.node):
        node.name = f"node{i}"
    onnx.save(proto, path)
    return path


def test_convert_writes_a_model_at_the_target_opset_that_computes_the_same(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, SUB6)
    before = path.read_bytes()
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["convert", str(path), "--opset", "14", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert "arith_6_7" in result.stderr and "(opset 14, IR 7)" in result.stderr
    converted = onnx.load(out)
    onnx.checker.check_model(converted, full_check=True)
    assert converted.opset_import[0].version == 14 and converted.ir_version == 7
    a = np.arange(120, dtype=np.float32).reshape(2, 3, 4, 5)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    (c,) = run_onnxruntime(converted, {"a": a, "b": b})
    np.testing.assert_array_equal(c, a - b[:, :, None])
    assert path.read_bytes() == before


def test_convert_json_report_goes_to_stdout(tmp_path: Path) -> None:
    path = _write(tmp_path, SUB6)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["convert", str(path), "--opset", "7", "-o", str(out), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["from_opset"] == 6 and report["to_opset"] == 7
    assert report["stats"] == {"adapted.arith_6_7": 1}
    assert report["ir_version"] == {"before": 3, "after": 4}  # the Reshape's shape initializer


def test_convert_that_cannot_be_done_lists_every_blocking_node_and_writes_nothing(
    tmp_path: Path,
) -> None:
    path = _write(tmp_path, SPLIT13)
    before = path.read_bytes()
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["convert", str(path), "--opset", "11", "-o", str(out)])
    assert result.exit_code == 1
    assert "2 blocking node(s)" in result.stderr
    assert "Split node 'node0' 13 -> 12: input 1 ('s') is computed" in result.stderr
    assert "Split node 'node1' 13 -> 12" in result.stderr
    assert not out.exists() and path.read_bytes() == before


def test_convert_dry_run_lists_each_step_and_writes_nothing(tmp_path: Path) -> None:
    path = _write(tmp_path, SUB6)
    result = runner.invoke(app, ["convert", str(path), "--opset", "14", "--dry-run", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["dry_run"] is True and report["blocking"] == []
    steps = [(s["op"], s["from"], s["to"], s["how"]) for s in report["steps"]]
    assert steps[0] == ("Sub", 6, 7, "arith_6_7")
    assert ("Reshape", 12, 13, "automatic") in steps  # the Reshape the adapter added
    assert list(tmp_path.iterdir()) == [path]


def test_convert_dry_run_shows_problems_and_exits_1(tmp_path: Path) -> None:
    path = _write(tmp_path, SPLIT13)
    result = runner.invoke(app, ["convert", str(path), "--opset", "11", "--dry-run"])
    assert result.exit_code == 1
    assert "input 1 ('s') is computed at run time" in " ".join(result.stderr.split())
    assert "2 blocking node(s)" in result.stderr
    assert list(tmp_path.iterdir()) == [path]


def test_convert_refuses_to_overwrite_its_input(tmp_path: Path) -> None:
    path = _write(tmp_path, SUB6)
    before = path.read_bytes()
    result = runner.invoke(app, ["convert", str(path), "--opset", "7", "-o", str(path)])
    assert result.exit_code == 1
    assert "refusing to overwrite the input" in result.stderr
    assert path.read_bytes() == before


def test_convert_needs_an_output_unless_dry_run(tmp_path: Path) -> None:
    path = _write(tmp_path, SUB6)
    result = runner.invoke(app, ["convert", str(path), "--opset", "7"])
    assert result.exit_code == 2
    assert "required unless --dry-run" in result.output


def test_convert_to_an_opset_that_does_not_exist_exits_1(tmp_path: Path) -> None:
    path = _write(tmp_path, SUB6)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["convert", str(path), "--opset", "999", "-o", str(out)])
    assert result.exit_code == 1
    assert "opset 999 does not exist" in result.stderr and not out.exists()


def test_convert_of_an_unreadable_file_exits_2(tmp_path: Path) -> None:
    path = tmp_path / "junk.onnx"
    path.write_bytes(b"not a model")
    result = runner.invoke(app, ["convert", str(path), "--opset", "7", "-o", str(tmp_path / "o")])
    assert result.exit_code == 2


def test_convert_allow_cast_computes_int8_in_int32(tmp_path: Path) -> None:
    text = """<ir_version: 8, opset_import: ["" : 14]>
    g (int8[3] a, int8[3] b) => (int8[3] c) { c = Sub (a, b) }"""
    path = _write(tmp_path, text)
    out = tmp_path / "out.onnx"
    refused = runner.invoke(app, ["convert", str(path), "--opset", "13", "-o", str(out)])
    assert refused.exit_code == 1 and "Sub-13 does not take int8" in refused.stderr
    assert not out.exists()
    args = ["convert", str(path), "--opset", "13", "-o", str(out), "--allow-cast"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    a, b = np.array([-128, 127, 5], np.int8), np.array([1, -1, 7], np.int8)
    (c,) = run_onnxruntime(onnx.load(out), {"a": a, "b": b})
    np.testing.assert_array_equal(c, np.array([127, -128, -2], np.int8))
