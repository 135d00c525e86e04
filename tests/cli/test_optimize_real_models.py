"""`onnxforge optimize --check 3`, with and without `--opset 18`, on every real model: the light
zoo models, the exported ones under 300 MB (ONNXFORGE_EXPORT_DIR) and, marked slow, the one
over 2 GB with external data, whose peak memory must stay under 1.5x its size."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import onnx
import pytest
from real_models import EXPORT_DIR, exported_models
from suites import LIGHT_MODELS
from typer.testing import CliRunner

from onnxforge.cli import app

pytest.importorskip("onnxruntime")
runner = CliRunner()
MAX_BYTES = 300 << 20
OPSETS = (None, 18)
CHECKED = "checked: same outputs on 3 random input sets"
NO_EXPORTS = (
    "set ONNXFORGE_EXPORT_DIR to the output of shared/tools/export_models.py (needs torch)"
)


def _args(source: Path, out: Path, opset: int | None) -> list[str]:
    return ["optimize", str(source), "-o", str(out), "--check", "3"] + (
        ["--opset", str(opset)] if opset else []
    )


def _optimize(source: Path, tmp_path: Path, opset: int | None) -> None:
    out = tmp_path / source.name
    result = runner.invoke(app, _args(source, out, opset))
    assert result.exit_code == 0, result.output
    assert CHECKED in result.stderr
    assert out.stat().st_size <= 1.01 * source.stat().st_size, "grew by more than 1%"
    optimized = onnx.load(out)
    onnx.checker.check_model(optimized, full_check=True)
    if opset:
        assert {o.version for o in optimized.opset_import if o.domain in ("", "ai.onnx")} == {
            opset
        }


@pytest.mark.parametrize("opset", OPSETS, ids=["own-opset", "opset18"])
@pytest.mark.parametrize("source", LIGHT_MODELS, ids=[p.stem for p in LIGHT_MODELS])
def test_zoo_model_optimizes_and_checks(source: Path, opset: int | None, tmp_path: Path) -> None:
    _optimize(source, tmp_path, opset)


@pytest.mark.skipif(not exported_models(MAX_BYTES), reason=NO_EXPORTS)
@pytest.mark.parametrize("opset", OPSETS, ids=["own-opset", "opset18"])
@pytest.mark.parametrize(
    "source", exported_models(MAX_BYTES), ids=[p.stem for p in exported_models(MAX_BYTES)]
)
def test_exported_model_optimizes_and_checks(
    source: Path, opset: int | None, tmp_path: Path
) -> None:
    _optimize(source, tmp_path, opset)


def _large_models() -> list[Path]:
    """Exported models whose weights are external data over 2 GB."""
    if not EXPORT_DIR:
        return []
    found = []
    for model in sorted(Path(EXPORT_DIR).glob("*/*.onnx")):
        size = sum(f.stat().st_size for f in model.parent.iterdir() if f.is_file())
        if size > 2 << 30:
            found.append(model)
    return found


def _rss(pid: int) -> int:
    try:
        with open(f"/proc/{pid}/status") as f:
            return next((int(ln.split()[1]) * 1024 for ln in f if ln.startswith("VmRSS:")), 0)
    except OSError:
        return 0


def _descendants(pid: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            parents[int(entry.name)] = int(stat.rsplit(")", 1)[1].split()[1])
    found, frontier = [], [pid]
    while frontier:
        frontier = [p for p, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def _peak_tree_rss(child: subprocess.Popen[bytes]) -> int:
    """The largest RSS of ``child`` and its descendants together, sampled every 50 ms until
    it exits (leaves it unreaped for os.wait4)."""
    peak = 0
    while os.waitid(os.P_PID, child.pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is None:
        total = sum(_rss(p) for p in [child.pid, *_descendants(child.pid)])
        peak = max(peak, total)
        time.sleep(0.05)
    return peak


@pytest.mark.slow
@pytest.mark.skipif(not _large_models(), reason=f"no model over 2 GB: {NO_EXPORTS}")
@pytest.mark.parametrize("opset", OPSETS, ids=["own-opset", "opset18"])
@pytest.mark.parametrize("source", _large_models(), ids=[p.stem for p in _large_models()])
def test_large_model_optimizes_and_checks_in_bounded_memory(
    source: Path, opset: int | None, tmp_path: Path
) -> None:
    size = sum(f.stat().st_size for f in source.parent.iterdir() if f.is_file())
    out_dir = tmp_path / "out"
    out_dir.mkdir()
    command = [sys.executable, "-m", "onnxforge", *_args(source, out_dir / source.name, opset)]
    stdout, stderr = tmp_path / "stdout", tmp_path / "stderr"
    with stdout.open("w") as so, stderr.open("w") as se:
        child = subprocess.Popen(command, stdout=so, stderr=se)
        sampled = _peak_tree_rss(child)
        _, status, usage = os.wait4(child.pid, 0)  # each process's own peak, between samples
        child.returncode = os.waitstatus_to_exitcode(status)
    assert child.returncode == 0, stderr.read_text()
    assert CHECKED in stderr.read_text()
    peak = max(sampled, usage.ru_maxrss * 1024)
    assert peak < 1.5 * size, f"peak {peak / (1 << 30):.2f} GiB for {size / (1 << 30):.2f} GiB"
    written = sum(f.stat().st_size for f in out_dir.iterdir() if f.is_file())
    assert written <= 1.01 * size


def test_pinned_defaults_let_zoo_weights_fold(tmp_path: Path) -> None:
    """--pin-defaults with a fold limit past the weights: the IR-3 zoo model's weights,
    made by ConstantOfShape from shapes that are overridable inputs, are materialized as
    onnxsim does, and the result still computes the same."""
    source = next(p for p in LIGHT_MODELS if p.stem == "light_squeezenet")
    out = tmp_path / "pinned.onnx"
    args = _args(source, out, None) + ["--pin-defaults", "--fold-limit", "64M"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    assert CHECKED in result.stderr
    before, after = onnx.load(source), onnx.load(out)
    onnx.checker.check_model(after, full_check=True)
    assert before.ir_version < 4 <= after.ir_version
    assert len(before.graph.input) > 1 and [i.name for i in after.graph.input] == [
        i.name
        for i in before.graph.input
        if i.name not in {t.name for t in before.graph.initializer}
    ]
    kinds = [n.op_type for n in after.graph.node]
    assert "ConstantOfShape" not in kinds and len(kinds) < len(before.graph.node)
    plain = tmp_path / "plain.onnx"
    assert runner.invoke(app, _args(source, plain, None)).exit_code == 0
    assert "ConstantOfShape" in [n.op_type for n in onnx.load(plain).graph.node]
