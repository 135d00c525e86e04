"""`onnxforge fold`: a before/after summary, reasons for every refusal, --json, size limits."""

from __future__ import annotations

import json
from pathlib import Path

import onnx
from onnx import parser
from suites import LIGHT_MODELS
from typer.testing import CliRunner

from onnxforge.cli import app

runner = CliRunner()
MODEL = """<ir_version: 8, opset_import: ["" : 17]>
g (float[512, 1024] x) => (float[512, 1024] y) {
    s = Constant <value = int64[2] {512, 1024}> ()
    z = ConstantOfShape <value = float[1] {1.0}> (s)
    two = Constant <value = int64[1] {2}> ()
    three = Add(two, two)
    w = Add(x, z)
    y = Identity(w)
}"""


def _write(tmp_path: Path) -> Path:
    path = tmp_path / "model.onnx"
    onnx.save(parser.parse_model(MODEL), path)
    return path


def test_fold_reports_what_it_folded_and_why_not(tmp_path: Path) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["fold", str(path), "-o", str(out), "--verbose"])
    assert result.exit_code == 0, result.output
    assert "not folded: too large: 1 (ConstantOfShape -> z)" in result.stderr
    folded = onnx.load(out)
    assert [n.op_type for n in folded.graph.node] == ["ConstantOfShape", "Add", "Identity"]
    assert out.stat().st_size < 4096  # the 2 MB constant was not made


def test_fold_limit_and_json(tmp_path: Path) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(
        app, ["fold", str(path), "-o", str(out), "--fold-limit", "4MiB", "--json"]
    )
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["fold_limit"] == 4 << 20
    assert report["stats"]["folded"] == 2
    assert report["after"]["initializer_bytes"] >= 512 * 1024 * 4
    assert report["before"]["nodes"] == 6 and report["after"]["nodes"] == 2


def test_fold_exclude_keeps_those_ops(tmp_path: Path) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["fold", str(path), "-o", str(out), "--exclude", "Add", "--json"])
    assert result.exit_code == 0
    assert json.loads(result.stdout)["stats"]["not_folded.excluded"] == 1


def test_a_bad_size_is_a_clear_error(tmp_path: Path) -> None:
    path = _write(tmp_path)
    result = runner.invoke(
        app, ["fold", str(path), "-o", str(tmp_path / "o.onnx"), "--fold-limit", "lots"]
    )
    assert result.exit_code == 1
    assert "'lots' is not a size" in result.stderr
    assert not (tmp_path / "o.onnx").exists()


def test_unreadable_input_exits_2_and_writes_nothing(tmp_path: Path) -> None:
    bad = tmp_path / "bad.onnx"
    bad.write_bytes(b"\x12\x34garbage")
    result = runner.invoke(app, ["fold", str(bad), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 2
    assert not (tmp_path / "o.onnx").exists()


def test_an_invalid_legacy_sub_exits_1_naming_why_and_writes_nothing(tmp_path: Path) -> None:
    path = tmp_path / "legacy.onnx"
    onnx.save(
        parser.parse_model(
            """<ir_version: 4, opset_import: ["" : 6]>
    g () => (float[3] y) <float[3] a = {1.0, 2.0, 3.0}, float[1, 1] b = {1.0}> {
        y = Sub <broadcast = 1> (a, b)
    }"""
        ),
        path,
    )
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["fold", str(path), "-o", str(out)])
    assert result.exit_code == 1, result.output
    assert "[3] and [1,1] under the legacy rule: rank of B (2) exceeds rank of A (1)" in (
        result.stderr
    )
    assert isinstance(result.exception, SystemExit) and "Traceback" not in result.output
    assert not out.exists()


def test_a_zoo_model_whose_weights_are_all_inputs_says_why_nothing_folded(
    tmp_path: Path,
) -> None:
    """IR 3 lists every initializer as a graph input: nothing folds, and both fold and
    optimize say so in one line naming --pin-defaults (which then folds them)."""
    source = next(p for p in LIGHT_MODELS if p.stem == "light_densenet121")
    out = tmp_path / "out.onnx"
    for command in ("fold", "optimize"):
        result = runner.invoke(app, [command, str(source), "-o", str(out)])
        assert result.exit_code == 0, result.output
        notes = [line for line in result.stderr.splitlines() if "nothing folded" in line]
        assert len(notes) == 1, result.stderr
        assert "every initializer (848) is also a graph input (as IR 3 requires)" in notes[0]
        assert "--pin-defaults" in notes[0] and notes[0].startswith(f"note: {source}")
        quiet = runner.invoke(app, [command, str(source), "-o", str(out), "-q"])
        assert quiet.exit_code == 0 and quiet.output == ""
    pinned = runner.invoke(app, ["fold", str(source), "-o", str(out), "--pin-defaults", "--json"])
    report = json.loads(pinned.stdout)
    assert report["notes"] == [] and report["stats"]["folded"] > 0
