"""`onnxforge optimize`: the pipeline end to end, --check, --opset, --input-shape, --json, and
nothing written when anything fails."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import parser
from typer.testing import CliRunner

from onnxforge.cli import app
from onnxforge.ir import Model
from onnxforge.testing import run_onnxruntime

pytest.importorskip("onnxruntime")
runner = CliRunner()

MODEL = """<ir_version: 8, opset_import: ["" : 13]>
g (float[N, 4] x) => (float[N, 2] a, float[N, 2] b) {
    shape = Shape(x)
    two = Constant <value = int64[1] {2}> ()
    c = Constant <value = float[4] {1.0, 2.0, 3.0, 4.0}> ()
    d = Identity(c)
    y = Add(x, d)
    z = Identity(y)
    r = Relu(z)
    a, b = Split <axis = 1> (r)
}"""


def _write(tmp_path: Path, text: str = MODEL, name: str = "model.onnx") -> Path:
    path = tmp_path / name
    onnx.save(parser.parse_model(text), path)
    return path


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_optimize_cleans_up_checks_and_reports(tmp_path: Path) -> None:
    path = _write(tmp_path)
    before = _digest(path)
    out, report = tmp_path / "out.onnx", tmp_path / "report.json"
    result = runner.invoke(
        app, ["optimize", str(path), "-o", str(out), "--check", "2", "--json", str(report)]
    )
    assert result.exit_code == 0, result.output
    assert "checked: same outputs on 2 random input sets" in result.stderr
    assert result.stdout == ""  # stdout is left to the model (-o -) and --json -
    optimized = onnx.load(out)
    onnx.checker.check_model(optimized, full_check=True)
    assert [n.op_type for n in optimized.graph.node] == ["Add", "Relu", "Split"]
    data = json.loads(report.read_text())
    assert data["before"]["nodes"] == 8 and data["after"]["nodes"] == 3
    names = [row["pass"] for row in data["passes"]]
    assert names[:2] == ["replace-stale-types", "infer-shapes"] and names[-1] == "infer-shapes"
    assert "  fold-constants" in names and "  eliminate-identity" in names
    assert _digest(path) == before  # the input is never modified


def test_the_same_input_and_options_give_the_same_bytes(tmp_path: Path) -> None:
    path = _write(tmp_path)
    outs = [tmp_path / "one.onnx", tmp_path / "two.onnx"]
    for out in outs:
        result = runner.invoke(app, ["optimize", str(path), "-o", str(out)])
        assert result.exit_code == 0, result.output
    assert outs[0].read_bytes() == outs[1].read_bytes()


def test_opset_converts_as_part_of_the_pipeline(tmp_path: Path) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["optimize", str(path), "-o", str(out), "--opset", "18"])
    assert result.exit_code == 0, result.output
    optimized = onnx.load(out)
    assert {o.domain: o.version for o in optimized.opset_import}[""] == 18
    (split,) = [n for n in optimized.graph.node if n.op_type == "Split"]
    assert [a.name for a in split.attribute if a.name == "num_outputs"] == ["num_outputs"]
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    for want, got in zip(
        run_onnxruntime(str(path), {"x": x}), run_onnxruntime(str(out), {"x": x}), strict=True
    ):
        np.testing.assert_allclose(got, want, rtol=1e-6)


def test_input_shape_fixes_symbolic_dims(tmp_path: Path) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(
        app, ["optimize", str(path), "-o", str(out), "--input-shape", "x=3,4", "--check", "1"]
    )
    assert result.exit_code == 0, result.output
    optimized = onnx.load(out)
    dims = [d.dim_value for d in optimized.graph.input[0].type.tensor_type.shape.dim]
    assert dims == [3, 4]
    outputs = {
        o.name: [d.dim_value for d in o.type.tensor_type.shape.dim] for o in optimized.graph.output
    }
    assert outputs == {"a": [3, 2], "b": [3, 2]}


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--input-shape", "y=3,4"], "the model has no input 'y'"),
        (["--input-shape", "x=3,5"], "input 'x' dim 1 is 4 in the model, not 5"),
        (["--opset", "99"], "opset 99 does not exist"),
    ],
)
def test_work_that_cannot_be_done_exits_1_and_writes_nothing(
    tmp_path: Path, args: list[str], message: str
) -> None:
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["optimize", str(path), "-o", str(out), *args])
    assert result.exit_code == 1, result.output
    assert message in result.stderr
    assert list(tmp_path.iterdir()) == [path]


@pytest.mark.parametrize(
    "args",
    [["--passes", "no-such-pass"], ["--skip", "fold"], ["--input-shape", "x"], ["--check", "-1"]],
)
def test_usage_errors_exit_2(tmp_path: Path, args: list[str]) -> None:
    path = _write(tmp_path)
    result = runner.invoke(app, ["optimize", str(path), "-o", str(tmp_path / "o.onnx"), *args])
    assert result.exit_code == 2, result.output
    assert list(tmp_path.iterdir()) == [path]


def test_unreadable_input_exits_2_and_the_input_is_never_the_output(tmp_path: Path) -> None:
    broken = tmp_path / "broken.onnx"
    broken.write_bytes(b"\x08\x07\x12\xff\xff")
    result = runner.invoke(app, ["optimize", str(broken), "-o", str(tmp_path / "o.onnx")])
    assert result.exit_code == 2
    assert "broken.onnx" in result.stderr and "Traceback" not in result.output
    path = _write(tmp_path)
    result = runner.invoke(app, ["optimize", str(path), "-o", str(path)])
    assert result.exit_code == 1 and "refusing to overwrite the input" in result.stderr


def test_a_difference_found_by_check_exits_1_and_writes_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import onnxforge.cli.optimize as command
    from onnxforge.api._optimize import optimize_model

    def broken_optimize(model: Model, options: object, **kwargs: object) -> object:
        report = optimize_model(model, options, **kwargs)  # type: ignore[arg-type]
        for op in model.graph.ops:
            if op.op_type == "Relu":
                op.op_type = "Abs"  # a "fusion" that changes the outputs
        return report

    monkeypatch.setattr(command, "optimize_model", broken_optimize)
    path = _write(tmp_path)
    out = tmp_path / "out.onnx"
    result = runner.invoke(app, ["optimize", str(path), "-o", str(out), "--check", "2"])
    assert result.exit_code == 1, result.output
    assert "output 'a'" in result.stderr
    assert "the result differs from the original; nothing written" in result.stderr
    assert list(tmp_path.iterdir()) == [path]


def test_value_info_is_written_only_when_asked(tmp_path: Path) -> None:
    path = _write(tmp_path)
    plain, annotated = tmp_path / "plain.onnx", tmp_path / "annotated.onnx"
    assert runner.invoke(app, ["optimize", str(path), "-o", str(plain)]).exit_code == 0
    result = runner.invoke(app, ["optimize", str(path), "-o", str(annotated), "--value-info"])
    assert result.exit_code == 0, result.output
    assert [vi.name for vi in onnx.load(plain).graph.value_info] == []
    typed = {vi.name: vi for vi in onnx.load(annotated).graph.value_info}
    assert set(typed) >= {"y", "r"}
    assert [d.dim_param or d.dim_value for d in typed["r"].type.tensor_type.shape.dim] == ["N", 4]
